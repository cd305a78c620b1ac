"""Unlabeled and labeled attachment scores of dependency trees (CoNLL-U), as dependency parsers report them.

UAS = the fraction of scored words whose predicted head is the gold head; LAS = head and relation both
correct, the relation compared on its universal part (``nsubj:pass`` -> ``nsubj``, as the CoNLL 2018 shared
task scorer does). Scored words: by default every syntactic word except those the **gold** tree tags
``PUNCT`` (UPOS) — the usual convention of dependency parsing on the PTB (Chen & Manning 2014; DTG's
reranking evaluation); ``--punct`` scores every word. Micro-averaged over words; the per-sentence mean UAS
is reported too. Sentences are paired in file order; a different number of sentences or a different word
(form) in a pair is an error at the test file's ``FILE:LINE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lightning_modules.data.dependency import DepTree, read_conllu
from lightning_modules.errors import InputError


def convention(punct: bool) -> str:
    scored = "every word" if punct else "words whose gold UPOS is not PUNCT"
    return (f"UAS/LAS over {scored}, micro-averaged over words; LAS compares the universal part of DEPREL "
            "(before ':')")


def _word_line(lines: list[str], sentence_line: int, word: int) -> int:
    """The line number of word ``word`` (1-based id) of the sentence starting at ``sentence_line``."""
    for number in range(sentence_line, len(lines) + 1):
        if lines[number - 1].split("\t", 1)[0] == str(word):
            return number
    return sentence_line


def attachment_scores(gold_path: str | Path, test_path: str | Path, punct: bool = False) -> dict[str, Any]:
    """``{"uas", "las", "words", "sentences", ...}`` (percentages), checked sentence by sentence."""
    gold, test = read_conllu(gold_path), read_conllu(test_path)
    if len(gold) != len(test):
        raise InputError(f"{len(test)} sentences but the gold file {gold_path} has {len(gold)}",
                         f"{test_path}:{test[min(len(gold), len(test)) - 1][0]}")
    test_lines = Path(test_path).read_text(encoding="utf-8").splitlines() if len(gold) else []
    words = heads = labels = 0
    per_sentence = []
    for (_, g), (line, t) in zip(gold, test):
        _check_pair(g, t, test_lines, line, test_path)
        scored = scored_words(g, punct)
        head = [g.heads[i] == t.heads[i] for i in scored]
        words += len(scored)
        heads += sum(head)
        labels += sum(h and g.deprels[i].split(":")[0] == t.deprels[i].split(":")[0] for h, i in zip(head, scored))
        if scored:
            per_sentence.append(sum(head) / len(scored))
    return {
        "uas": 100.0 * heads / words if words else None,
        "las": 100.0 * labels / words if words else None,
        "uas_sentence_mean": 100.0 * sum(per_sentence) / len(per_sentence) if per_sentence else None,
        "sentences": len(gold),
        "words": words,
        "correct_heads": heads,
        "correct_labeled": labels,
        "punctuation": "scored" if punct else "excluded (gold UPOS PUNCT)",
        "convention": convention(punct),
    }


def scored_words(gold: DepTree, punct: bool = False) -> list[int]:
    """0-based indices of the words scored in a gold tree: every word, or (default) those not tagged PUNCT."""
    return [i for i in range(len(gold)) if punct or (gold.upos[i] if gold.upos else "_") != "PUNCT"]


def attachment_counts(gold: Sequence[DepTree], heads: Sequence[Sequence[int]], punct: bool = False
                      ) -> tuple[int, int]:
    """(scored words, words with the gold head) of predicted ``heads`` (1-based, 0 = root) per gold tree."""
    words = correct = 0
    for g, h in zip(gold, heads, strict=True):
        scored = scored_words(g, punct)
        words += len(scored)
        correct += sum(g.heads[i] == h[i] for i in scored)
    return words, correct


def _check_pair(gold: DepTree, test: DepTree, test_lines: list[str], line: int, test_path: str | Path) -> None:
    if len(gold) != len(test):
        raise InputError(f"{len(test)} words but the gold sentence has {len(gold)}", f"{test_path}:{line}")
    for i, (a, b) in enumerate(zip(gold.forms, test.forms), start=1):
        if a != b:
            raise InputError(f"word {i} is {b!r} but the gold word is {a!r}",
                             f"{test_path}:{_word_line(test_lines, line, i)}")
