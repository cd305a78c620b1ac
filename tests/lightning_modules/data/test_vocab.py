"""Word vocabulary: Berkeley/RNNG unknown-word classes, PTB-sample vocabulary, OOV rate, JSON round trip."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from lightning_modules.data.tree import clean, read_bracketed
from lightning_modules.data.vocab import UNK, WordVocab, signature
from lightning_modules.errors import InputError

# (word, class) with the known words {"mother", "apple", "stock"}. Expected classes were produced by running
# the reference function, `unkify` of clab/rnng get_oracle.py (Dyer et al. 2016), on each word.
KNOWN = frozenset({"mother", "apple", "stock"})
REFERENCE_CLASSES = [
    ("walked", "UNK-LC-ed"),
    ("Walked", "UNK-INITC-ed"),
    ("walking", "UNK-LC-ing"),
    ("nation", "UNK-LC-ion"),
    ("bigger", "UNK-LC-er"),
    ("biggest", "UNK-LC-est"),
    ("quickly", "UNK-LC-ly"),
    ("ability", "UNK-LC-ity"),
    ("happy", "UNK-LC-y"),
    ("final", "UNK-LC-al"),
    ("cats", "UNK-LC-s"),
    ("glass", "UNK-LC"),  # -ss is not a plural, and an 's' ending skips the other suffixes
    ("analysis", "UNK-LC"),
    ("status", "UNK-LC"),
    ("bus", "UNK-LC"),
    ("as", "UNK-LC"),
    ("is", "UNK-LC"),
    ("s", "UNK-LC"),
    ("Pierre", "UNK-INITC"),
    ("IBM", "UNK-CAPS"),
    ("U.S.", "UNK-CAPS"),
    ("McDonald", "UNK-CAPS"),
    ("iPhone", "UNK-LC"),
    ("NASA-s", "UNK-CAPS-DASH-s"),
    ("1990s", "UNK-LC-NUM-s"),
    ("1,000", "UNK-NUM"),
    ("3\\/4", "UNK-NUM"),
    ("12-year-old", "UNK-LC-NUM-DASH"),
    ("long-term", "UNK-LC-DASH"),
    ("Mother", "UNK-INITC-KNOWNLC-er"),
    ("Apple", "UNK-INITC-KNOWNLC"),
    ("Apples", "UNK-INITC-s"),
    ("STOCK", "UNK-CAPS"),  # -KNOWNLC only for a single initial capital
    ("Stocked", "UNK-INITC-ed"),
    ("A", "UNK-INITC"),
    ("a", "UNK-LC"),
    ("mid-1980s", "UNK-LC-NUM-DASH-s"),
    ("%", "UNK"),
    ("-LRB-", "UNK-CAPS-DASH"),
    ("--", "UNK-DASH"),
    ("'s", "UNK-LC"),
    ("...", "UNK"),
    ("F-16", "UNK-INITC-NUM-DASH"),
    ("401(k)", "UNK-LC-NUM"),
    ("x86", "UNK-LC-NUM"),
    ("ed", "UNK-LC"),
    ("fled", "UNK-LC"),  # suffixes need length >= 5
    ("caller", "UNK-LC-er"),
    ("Acquisition", "UNK-INITC-ion"),
    ("Texas", "UNK-INITC-s"),
    ("Walkers", "UNK-INITC-s"),
    ("CDs", "UNK-CAPS-s"),
    ("B-52s", "UNK-INITC-NUM-DASH-s"),
    ("3Com", "UNK-CAPS-NUM"),
    ("1980", "UNK-NUM"),
    ("talkative", "UNK-LC"),
    ("equal", "UNK-LC-al"),
    ("early", "UNK-LC-ly"),
    ("Early", "UNK-INITC-ly"),
    ("jaywalked", "UNK-LC-ed"),
    ("Pre-emptive", "UNK-INITC-DASH"),
    ("e-mail", "UNK-LC-DASH"),
    ("", "UNK"),
    ("  ", "UNK"),
    # beyond ASCII the reference's Python 2 byte strings differ; these follow Python 3 str predicates
    ("ŞAHIN", "UNK-CAPS"),
    ("élan", "UNK-LC"),
    ("Österreich", "UNK-INITC"),
    ("٣٤", "UNK-NUM"),
    ("日本", "UNK"),
]


@pytest.mark.parametrize(("word", "expected"), REFERENCE_CLASSES)
def test_signature_matches_reference_unkify(word: str, expected: str) -> None:
    assert signature(word, KNOWN) == expected


def test_known_words_keep_their_form_and_unseen_classes_fall_back_to_unk() -> None:
    vocab = WordVocab.build(["mother", "mother", "walked", "cats", "the", "the"])
    assert vocab.unkify("mother") == "mother"
    # classes seen in training (from the singletons) are tokens; a class never seen maps to UNK
    assert vocab.unkify("jumped") == "UNK-LC-ed"
    assert vocab.unkify("dogs") == "UNK-LC-s"
    assert vocab.unkify("Mother") == UNK  # UNK-INITC-KNOWNLC-er never occurred in training
    assert vocab.unkify("walked") == "UNK-LC-ed"  # a singleton is unkified, also in the training data
    assert vocab.tokens == ["mother", "the", "UNK-LC-ed", "UNK-LC-s", UNK]
    assert vocab.counts == [2, 2, 1, 1, 0]
    assert vocab.encode(["the", "jumped", "Zzz"]) == [1, 2, 4]
    assert len(vocab) == 5


def test_min_count_is_configurable() -> None:
    words = ["a", "a", "a", "b", "b", "c"]
    assert WordVocab.build(words, min_count=1).known == {"a", "b", "c"}
    assert WordVocab.build(words, min_count=2).known == {"a", "b"}
    assert WordVocab.build(words, min_count=3).known == {"a"}
    with pytest.raises(ValueError):
        WordVocab.build(words, min_count=0)


def test_ids_are_deterministic_frequency_then_string() -> None:
    words = ["b", "a", "c", "b", "a", "d", "d", "d"]
    first = WordVocab.build(words)
    second = WordVocab.build(list(reversed(words)))
    assert first.tokens == second.tokens == ["d", "a", "b", "UNK-LC", UNK]


def _ptb_words(ptb: Path, first: int, last: int) -> list[str]:
    """Words of the cleaned trees of wsj_FIRST..wsj_LAST (one document per file)."""
    return [
        w
        for k in range(first, last + 1)
        for _, tree in read_bracketed(ptb / f"wsj_{k:04d}.mrg")
        for w in clean(tree).leaves()
    ]


@pytest.fixture(scope="module")
def ptb_splits(shared_data: Path) -> dict[str, list[str]]:
    ptb = shared_data / "ptb_nltk_sample" / "combined"
    splits = {"train": (1, 159), "valid": (160, 179), "test": (180, 199)}
    return {name: _ptb_words(ptb, first, last) for name, (first, last) in splits.items()}


def test_ptb_sample_vocabulary(ptb_splits: dict[str, list[str]]) -> None:
    train = ptb_splits["train"]
    assert (len(train), len(ptb_splits["valid"]), len(ptb_splits["test"])) == (81793, 6327, 5964)
    vocab = WordVocab.build(train)
    counts = Counter(train)
    known = {w for w, c in counts.items() if c >= 2}
    classes = {signature(w, known) for w, c in counts.items() if c < 2}
    assert vocab.known == known
    assert set(vocab.tokens) == known | classes | {UNK}
    assert (len(vocab), len(known)) == (5336, 5280)
    # every training token is accounted for exactly once
    assert sum(vocab.counts) == len(train)
    assert vocab.tokens[:8] == [",", "the", ".", "of", "to", "a", "in", "and"]
    assert vocab.unkify("Vinken") == "Vinken" and vocab.unkify("Pierre") == "UNK-INITC"


def test_ptb_sample_oov_rate(ptb_splits: dict[str, list[str]]) -> None:
    vocab = WordVocab.build(ptb_splits["train"])
    valid = ptb_splits["valid"]
    expected = sum(w not in vocab.known for w in valid) / len(valid)
    assert vocab.oov_rate(valid) == pytest.approx(expected)
    assert vocab.oov_rate(valid) == pytest.approx(762 / 6327)
    assert vocab.oov_rate(ptb_splits["train"]) == pytest.approx(
        sum(c for c in Counter(ptb_splits["train"]).values() if c < 2) / len(ptb_splits["train"])
    )
    with pytest.raises(ValueError):
        vocab.oov_rate([])


def test_json_round_trip(ptb_splits: dict[str, list[str]]) -> None:
    vocab = WordVocab.build(ptb_splits["train"])
    text = vocab.to_json()
    again = WordVocab.from_json(text)
    assert again == vocab
    assert again.tokens == vocab.tokens and again.counts == vocab.counts and again.known == vocab.known
    assert [again.unkify(w) for w in ptb_splits["valid"]] == [vocab.unkify(w) for w in ptb_splits["valid"]]
    assert again.to_json() == text  # stable serialisation
    assert WordVocab.from_dict(json.loads(text)) == vocab


_VALID = {
    "format": "synbench.WordVocab", "version": 1, "min_count": 2, "tokens": [["UNK", 0]], "known_words": [],
}


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ([], "not a synbench.WordVocab"),
        ({**_VALID, "format": "other"}, "not a synbench.WordVocab"),
        ({**_VALID, "version": 9}, "unsupported"),
        ({**_VALID, "min_count": 0}, "min_count"),
        ({**_VALID, "tokens": [["UNK", -1]]}, "tokens"),
        ({**_VALID, "tokens": [["UNK", "0"]]}, "tokens"),
        ({**_VALID, "tokens": [["a", 1]]}, "UNK"),
        ({**_VALID, "tokens": [["UNK", 0], ["UNK", 1]]}, "duplicate"),
        ({**_VALID, "known_words": [1]}, "known_words"),
        ({**_VALID, "known_words": ["a"]}, "known words missing"),
    ],
)
def test_from_json_rejects_malformed_data(data: object, fragment: str) -> None:
    assert WordVocab.from_json(json.dumps(_VALID)).tokens == [UNK]
    with pytest.raises(InputError) as err:
        WordVocab.from_json(json.dumps(data), "ckpt.pt:vocab")
    assert err.value.location == "ckpt.pt:vocab"
    assert fragment in err.value.message


def test_from_json_reports_invalid_json_with_line() -> None:
    with pytest.raises(InputError) as err:
        WordVocab.from_json('{\n"format": ', "vocab.json")
    assert err.value.location == "vocab.json:2"
