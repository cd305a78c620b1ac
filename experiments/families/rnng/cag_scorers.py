"""A trained CAG as the shared tree-marginal scorer and the word-synchronous beam read a joint model: the
RNNG's ``RNNGModel`` (trees -> actions -> per-action log-probs) over a CAG network, loaded from a CAG
checkpoint."""

from __future__ import annotations

from experiments.families.rnng.scorers import RNNGModel
from lightning_modules.errors import InputError
from lightning_modules.families.rnng.encoding import ActionDict, WordDict


class CAGModel(RNNGModel):
    """The CAG network with its vocabularies (the RNNG's, ``RNNGModel``)."""

    @classmethod
    def load(cls, checkpoint: str, device: str = "cpu") -> CAGModel:
        from experiments.checkpoints import read_checkpoint
        from lightning_modules.families.rnng.cag_model import build

        ckpt = read_checkpoint(checkpoint, "cag")
        meta = ckpt["synbench"]
        words, actions = WordDict.from_json(meta["vocab"]["words"]), ActionDict.from_json(meta["vocab"]["actions"])
        module = build({**meta["config"]["model"], "vocab_size": len(words), "num_nts": len(actions.nonterminals)})
        try:
            module.load_state_dict(ckpt["state_dict"])
        except RuntimeError as e:  # the weights of another network (or config) under a cag label
            first = str(e).split("\n\t")[1] if "\n\t" in str(e) else str(e)
            raise InputError(f"not a CAG of its recorded config: {first.strip()[:200]}", checkpoint) from None
        return cls(module, words, actions, meta["family"], device)

    def stack_bound(self) -> int:
        """``model.stack_size``: the stack decoder has a position embedding per element, so a deeper tree has
        no representation."""
        return self.module.config.stack_size
