"""The data presets of the families trained on dependency trees (DTG, TXL (trans), the dependency parser).

The model and loop come from the family's model presets and the shared ``configs/train.yaml``; these replace
the data of the presets that have a dependency corpus.
"""

from __future__ import annotations

from typing import Any

DATA_PRESETS = {
    "cpu-small": {"corpus": "ud-ewt", "train_split": "train", "valid_split": "dev", "min_count": 2},
    # the paper has no PTB setting; the PTB sample converted with the Collins head table, for comparisons with
    # the constituency families on the same sentences
    "ptb": {"corpus": "ptb-sample-dep", "train_split": "train", "valid_split": "valid", "min_count": 2},
    # BLLIP-LG (register it: synbench prepare --treebank bllip-lg=PATH) converted by the Collins head table; the
    # paper parsed it with a biaffine parser, the official scripts with Stanford basic dependencies
    "bllip": {"corpus": "bllip-lg-dep", "train_split": "train", "valid_split": "valid", "min_count": 2},
}


def dependency_presets(presets: dict[str, Any]) -> dict[str, Any]:
    """The shared loop and runtime presets (``configs/train.yaml``) with the dependency data of DATA_PRESETS."""
    return {name: ({**value, "data": dict(DATA_PRESETS[name])} if name in DATA_PRESETS else value)
            for name, value in presets.items() if name in DATA_PRESETS or name == "runtime"}
