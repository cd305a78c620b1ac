"""The CAG parity tests' shared pieces: the golden files of the official osekilab/CAG (tests/golden/cag) and its
random model's weights loaded into ours."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import torch

from lightning_modules.families.rnng.cag_model import CAG, build, official_state_dict

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "cag"


@functools.cache
def golden_values() -> dict[str, Any]:
    """``golden.json`` (read once; callers do not change it)."""
    return json.loads((GOLDEN / "golden.json").read_text())


def official_module(golden: dict[str, Any]) -> CAG:
    """Our CAG holding the official random model's weights (``model.pt``), in eval mode."""
    m = golden["model"]
    model = build({"vocab_size": len(golden["i2w"]), "num_nts": len(golden["nonterminals"]),
                   "w_dim": m["word_dim"], "h_dim": m["hidden_dim"], "num_layers": m["num_layers"],
                   "num_heads": m["num_heads"], "stack_size": m["max_stack_size"], "dropout": 0.0,
                   "embd_dropout": 0.0})
    state = torch.load(GOLDEN / "model.pt", map_location="cpu", weights_only=True)
    model.load_state_dict(official_state_dict(state), strict=True)
    return model.eval()
