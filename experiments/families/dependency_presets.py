"""The data presets of the families trained on dependency trees (DTG, TXL (trans), the dependency parser, SOM).

The model and loop come from the family's model presets and the shared ``configs/train.yaml``; these replace
the data of the presets that have a dependency corpus. The families that read subword pieces (DTG and TXL
(trans): ``data.terminals``) add the terminals of PIECE_PRESETS; the others read words.

The dependency scheme of the constituency corpora (PTB, BLLIP) is the paper's own: DTG trains and is
scored on Stanford basic dependencies (``NAME-sd``; the paper converted the PTB with CoreNLP 3.3.0, its
official scripts BLLIP the same way), SOM builds Γ from Universal Dependencies (``NAME-ud``). The scheme is
the corpus name, so it is part of every run's and evaluation's data identity; the Collins head-rule trees
(``NAME-dep``) stay an override, e.g. ``data.corpus=ptb-sample-dep``.
"""

from __future__ import annotations

from typing import Any

# the corpus suffix of each dependency scheme (lightning_modules/data/corpora.py: DEPENDENCY_SUFFIXES)
SCHEME_SUFFIXES = {"sd": "-sd", "ud": "-ud", "collins": "-dep"}
_CPU_SMALL = {"corpus": "ud-ewt", "train_split": "train", "valid_split": "dev", "min_count": 2}


def data_presets(scheme: str) -> dict[str, dict[str, Any]]:
    """The data presets with the constituency corpora converted to ``scheme`` (sd, ud or collins)."""
    suffix = SCHEME_SUFFIXES[scheme]
    return {
        "cpu-small": _CPU_SMALL,
        # cpu-small on SentencePiece pieces (PIECE_PRESETS), for the families that have a cpu-small-pieces preset
        "cpu-small-pieces": _CPU_SMALL,
        # the PTB sample converted, on the sentences the constituency families read (DTG's paper has no PTB
        # training setting; SOM's Table 6 models train on the PTB)
        "ptb": {"corpus": f"ptb-sample{suffix}", "train_split": "train", "valid_split": "valid", "min_count": 2},
        # BLLIP-LG (register it: synbench prepare --treebank bllip-lg=PATH) converted; the paper parsed it with
        # Biaffine-roberta trained on such trees, the official scripts with CoreNLP's Stanford basic dependencies
        "bllip": {"corpus": f"bllip-lg{suffix}", "train_split": "train", "valid_split": "valid", "min_count": 2},
    }


# DTG's, TXL (trans)'s and its dependency parser's: Stanford basic dependencies
DATA_PRESETS = data_presets("sd")
# Subword terminals by preset (words with unknown-word classes where a preset has none). bllip: the paper's
# SentencePiece model as the official data_scripts/tokenizer_build.py trains it: 32,719 pieces (the four
# specials and the user-defined symbols left_arc, right_arc, pop_root included) on the training trees'
# transition sequences (sp_text: transitions; lightning_modules/families/dtg/data.py); sp_text: words trains
# TG's tokenizer on the sentences instead. cpu-small-pieces: cpu-small's 2,000 pieces (configs/train.yaml),
# trained the same way.
PIECE_PRESETS = {
    "cpu-small-pieces": {"terminals": "sentencepiece", "sp_vocab_size": 2000, "sp_text": "transitions"},
    "bllip": {"terminals": "sentencepiece", "sp_vocab_size": 32719, "sp_text": "transitions"},
}


def dependency_presets(presets: dict[str, Any], pieces: bool = False) -> dict[str, Any]:
    """The shared loop and runtime presets (``configs/train.yaml``) with the dependency data of DATA_PRESETS;
    with ``pieces`` (a family that reads subword pieces) the terminals of PIECE_PRESETS added."""
    return {name: ({**value, "data": {**DATA_PRESETS[name], **(PIECE_PRESETS.get(name, {}) if pieces else {})}}
                   if name in DATA_PRESETS else value)
            for name, value in presets.items() if name in DATA_PRESETS or name == "runtime"}
