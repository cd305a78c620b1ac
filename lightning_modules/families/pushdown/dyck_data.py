"""Dyck strings as training data and test sets of the Pushdown family (Murty et al. 2023, §4.1).

A run with ``data.corpus: dyck`` (preset ``dyck`` of ``experiments/configs/train.yaml``) has no corpus
file: its data section fully determines the strings.

  ``bracket_types`` k, ``max_depth`` m   the language Dyck_{k,m} (paper: Dyck_{20,10})
  ``train_strings``, ``valid_strings``   how many strings (paper: 100k training strings)
  ``min_length``, ``max_length``         the PDFA's minimum length; longer strings are redrawn (the official
                                         training reader drops strings over 600 tokens)
  ``generation_seed``                    the seed of every string of the run (independent of the run's seed,
                                         so all seeds of an experiment train on the same strings)

Training and validation strings come from ``dyck.sample_strings`` on two independent streams of
``generation_seed``; each is encoded with ``dyck.encode_dyck`` (the official silver parse and attachment
labels). Tokens: ids 0 ``<pad>``, 1 ``<s>``, 2 ``<eos>``, then the k opening and the k closing brackets in
the official vocabulary order (``get_vocab_of_bracket_types``). The official Dyck model reads a binary tape
(depth > 0; ``compute_stack_tape`` returns ``penalty > 0``, two embedding rows): that is the depth tape with
``model.depth_vocab: 2``, since depths beyond the table are clamped.

Test sets (``test_set``; their seed is the evaluation's, streams independent of the training strings):
  * ``long-L`` (L = 50, 100, 200, 300): ``dyck.long_range_set`` over PDFA strings of Dyck_{k,40} of at most
    500 tokens (officially the ``k-20_d-40_train.txt`` strings read with the 500-token limit), prefixes of at
    most 600 tokens, 50 prefixes by default;
  * ``depth``: ``dyck.depth_generalization_set`` (nests of depth 15..49 of the first 10 types), 100 prefixes
    by default (rounds of 35: 105). **Deviation:** the official fillers are the strings of its
    ``k-20_d-10_test.txt``; ours are fresh PDFA strings of the run's language and length limits.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from lightning_modules.data.train_data import TrainData
from lightning_modules.data.vocab import TokenVocab
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown import dyck
from lightning_modules.families.pushdown.batch import PushdownSentence, collate, max_depth

KEYS = ("bracket_types", "max_depth", "train_strings", "valid_strings", "min_length", "max_length",
        "generation_seed")
LONG_RANGE, TEST_SETS = dyck.LONG_RANGE, dyck.TEST_SETS
DEFAULT_SIZE = {**dict.fromkeys(LONG_RANGE, 50), "depth": 100}
LONG_RANGE_DEPTH = 40  # Dyck_{k,40}: the official long-range strings
LONG_RANGE_MAX_LENGTH = 500  # official read_dyck_data
MAX_PREFIX_LENGTH = 600  # official get_long_range_dependencies_data
FILLERS = 1000  # filler strings drawn for the depth set
# independent random streams of one seed
_TRAIN, _VALID, _LONG_RANGE, _FILLERS, _NESTS = range(5)


def stream_seed(seed: int, purpose: int) -> int:
    """A 32-bit seed for one purpose of ``seed`` (``SeedSequence`` mixing: independent streams per purpose)."""
    return int(np.random.SeedSequence([seed, purpose]).generate_state(1)[0])


def language(data: dict[str, Any]) -> dict[str, Any]:
    """The validated Dyck keys of a data section (``InputError`` naming ``data.KEY`` otherwise)."""
    missing = [k for k in KEYS if k not in data]
    if missing:
        raise InputError(f"a Dyck run needs {', '.join(KEYS)} (use --preset dyck)", f"data.{missing[0]}")
    out = {k: data[k] for k in KEYS}
    for key in KEYS:
        value = out[key]
        if key == "max_length" and value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise InputError(f"expected an integer, got {value!r}", f"data.{key}")
        if value < (0 if key == "generation_seed" else 1):
            raise InputError(f"must be {'>= 0' if key == 'generation_seed' else 'positive'}, got {value}",
                             f"data.{key}")
    if out["max_length"] is not None and out["max_length"] < max(out["min_length"], 2):
        raise InputError(f"leaves no string of at least {out['min_length']} tokens (got {out['max_length']})",
                         "data.max_length")
    return out


def vocabulary(k: int) -> TokenVocab:
    """The specials, the k opening brackets, then the k closing brackets."""
    names = dyck.bracket_types(k)
    return TokenVocab([dyck.open_bracket(n) for n in names] + [dyck.close_bracket(n) for n in names])


def strings(data: dict[str, Any], split: str) -> list[list[str]]:
    """The training (``train``) or validation (``valid``) strings of a run's data section."""
    lang = language(data)
    count, purpose = ((lang["train_strings"], _TRAIN) if split == "train" else (lang["valid_strings"], _VALID))
    return dyck.sample_strings(count, lang["bracket_types"], lang["max_depth"], lang["min_length"],
                               lang["max_length"], seed=stream_seed(lang["generation_seed"], purpose))


def encode(tokens: list[str], vocab: TokenVocab) -> PushdownSentence:
    """One string as a training sequence ``<s> tokens <eos>`` with its silver attachments and tape spans."""
    example = dyck.encode_dyck(tokens)
    return PushdownSentence(vocab.sentence_ids(tokens), example.attachment, example.spans, len(tokens))


def build(family: str, cfg: dict[str, Any]) -> TrainData:
    """The ``TrainData`` of a Dyck run: strings generated from ``cfg['data']``, encoded, bracket vocabulary."""
    lang = language(cfg["data"])
    vocab = vocabulary(lang["bracket_types"])
    train_strings = strings(cfg["data"], "train")
    train = [encode(s, vocab) for s in train_strings]
    valid = [encode(s, vocab) for s in strings(cfg["data"], "valid")]
    lengths = [len(s) for s in train_strings]
    return TrainData(
        train=train, valid=valid, collate=collate,
        vocab={"terminals": "dyck", "bracket_types": lang["bracket_types"], "tokens": list(vocab.tokens)},
        vocab_size=len(vocab), valid_words=sum(s.words for s in valid),
        stats={"train_sequences": len(train), "valid_sequences": len(valid),
               "train_tokens": sum(lengths) + len(train), "vocab_size": len(vocab),
               "max_train_length": max(lengths), "mean_train_length": sum(lengths) / len(lengths),
               "max_train_nesting": max(dyck.max_depth(s) for s in train_strings),
               "max_train_depth": max(max_depth(s) for s in train)},
    )


def test_set(data: dict[str, Any], name: str, size: int | None = None, seed: int = 0
             ) -> tuple[list[list[str]], list[str]]:
    """(prefixes, closing-bracket targets) of test set ``name`` (``TEST_SETS``) for a run's language."""
    if name not in TEST_SETS:
        raise InputError(f"unknown Dyck test set {name!r} (known: {', '.join(TEST_SETS)})", "--set")
    lang = language(data)
    size = DEFAULT_SIZE[name] if size is None else size
    if size < 1:
        raise InputError(f"must be positive, got {size}", "--size")
    k, m = lang["bracket_types"], lang["max_depth"]
    if name in LONG_RANGE:
        source = _pdfa_strings(k, LONG_RANGE_DEPTH, lang["min_length"], LONG_RANGE_MAX_LENGTH,
                               stream_seed(seed, _LONG_RANGE))
        return dyck.long_range_set(source, LONG_RANGE[name], size, MAX_PREFIX_LENGTH)
    fillers = dyck.sample_strings(FILLERS, k, m, lang["min_length"], lang["max_length"],
                                  seed=stream_seed(seed, _FILLERS))
    alphabet = dyck.bracket_types(min(k, 10))
    return dyck.depth_generalization_set(fillers, stream_seed(seed, _NESTS), alphabet=alphabet, size=size)


def _pdfa_strings(k: int, m: int, min_length: int, max_length: int, seed: int) -> Iterator[list[str]]:
    """An endless stream of PDFA strings of at most ``max_length`` tokens (``long_range_set`` stops it)."""
    rng = np.random.default_rng(seed)
    while True:
        tokens = dyck.sample_string(rng, k, m, min_length)
        if len(tokens) <= max_length:
            yield tokens
