"""A trained CAG as the shared tree-marginal scorer and the word-synchronous beam read a joint model: the
RNNG's ``RNNGModel`` (trees -> actions -> per-action log-probs) over a CAG network, loaded from a CAG
checkpoint."""

from __future__ import annotations

from typing import Any

from experiments.families.rnng.scorers import RNNGModel


class CAGModel(RNNGModel):
    """The CAG network with its vocabularies (the RNNG's, ``RNNGModel``)."""

    family = "cag"
    label = "a CAG"

    @staticmethod
    def build(config: dict[str, Any]) -> Any:
        """The CAG network of a flat model config."""
        from lightning_modules.families.rnng.cag_model import build

        return build(config)

    def stack_bound(self) -> int:
        """``model.stack_size``: the stack decoder has a position embedding per element, so a deeper tree has
        no representation."""
        return self.module.config.stack_size
