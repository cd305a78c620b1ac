"""A loaded DTG / TXL (trans) checkpoint as a joint model over given dependency trees.

``DTGModel`` implements the tree-marginal protocol (``experiments.evaluate.scorers.tree_marginal.TreeModel``):
a given CoNLL-U tree is reduced to its structure (forms and heads; relations and tags do not change the
sequence), its non-projective arcs are lifted (the transition systems have no sequence otherwise; any tree
gives a lower bound on log p(x)), and it is encoded with the checkpoint's system, vocabulary and arc
representation; ``label_logprobs`` runs one forward pass over a batch
of sentences. ``TreeScorer`` then gives log p(x, y) of each tree and the marginal over a sentence's distinct
trees (gold trees, or proposals). The loader, the forward pass and the label log-probs are the shared
``TXLModel``'s (``experiments.evaluate.scorers.txl_model``); only the chunks differ: whole sentences, with
their arc representations.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from experiments.evaluate.scorers.txl_model import TXLModel
from lightning_modules.data.dependency import DepTree, projectivize, to_conllu
from lightning_modules.data.encodings.choe_charniak import ActionVocab
from lightning_modules.data.encodings.segmentation import segment
from lightning_modules.data.vocab import WordVocab, terminal_vocab
from lightning_modules.errors import InputError
from lightning_modules.families.dtg import data as dtg_data
from lightning_modules.families.dtg import encoding as dtg


class DTGModel(TXLModel):
    """A DTG-family network with its vocabularies: dependency trees -> transitions -> sequences -> log-probs."""

    def __init__(self, module: Any, meta: dict[str, Any], vocab: ActionVocab, device: str = "cpu"):
        super().__init__(module, meta, vocab, device)
        model = self.config["model"]
        self.system: str = model["system"]
        self.words = terminal_vocab(meta["vocab"], "checkpoint vocabulary")  # words, or SentencePiece pieces
        self._encode = dtg_data.example_encoder(self.family, self.system, model["arc_input"], vocab, self.words)

    @staticmethod
    def network() -> tuple[tuple[str, ...], Any]:
        from lightning_modules.families.dtg.model import FAMILIES, build

        return FAMILIES, build

    @property
    def joint(self) -> bool:
        return True

    # -- the tree-marginal protocol ------------------------------------------------------------------------------
    def model_tree(self, tree: Any, pos_tags: bool, location: str) -> DepTree:
        """The structure of a given dependency tree (forms and heads), non-projective arcs lifted
        (``dependency.projectivize``: any tree's log p(x, y) bounds log p(x), so the bound stays valid)."""
        if not isinstance(tree, DepTree):
            raise InputError(f"{self.family} scores dependency trees, not {type(tree).__name__} (use a dependency "
                             "corpus, or NAME-dep for a constituency corpus)", location)
        return projectivize(DepTree(tree.forms, tree.heads, ("_",) * len(tree)))

    def tree_words(self, tree: DepTree) -> list[str]:
        return list(tree.forms)

    def tree_text(self, tree: DepTree) -> str:
        return to_conllu(tree)

    def encode_tree(self, tree: DepTree) -> dtg_data.DTGExample:
        example = self._encode(tree, dtg.oracle(tree.heads, self.system))
        if len(example) > self.length:
            raise InputError(f"the {len(tree)}-word sentence needs {len(example)} tokens, more than the model's "
                             f"segment of {self.length} (DTG is sentence level)")
        return example

    def transitions_known(self, tree: DepTree) -> bool:
        """Whether the vocabulary has a token for every transition of ``tree`` (an arc-swift reach never seen in
        training has none: the model gives such a tree probability 0)."""
        return all(t.action == "gen" or t.token() in self.vocab
                   for t in dtg.oracle(self.model_tree(tree, False, "tree").heads, self.system))

    def known_trees(self, source: Any) -> Any:
        """A tree source keeping the trees of ``source`` the model can give a probability (``transitions_known``)."""
        def known(sentences: Sequence[Sequence[str]]) -> list[list[DepTree]]:
            return [[t for t in trees if self.transitions_known(t)] for trees in source(sentences)]

        known.name = getattr(source, "name", None)  # type: ignore[attr-defined]
        return known

    @property
    def pieces(self) -> bool:
        """Whether the checkpoint reads SentencePiece pieces (``data.terminals: sentencepiece``), not words."""
        return not isinstance(self.words, WordVocab)

    def is_unknown(self, word: str) -> bool:
        return dtg_data.is_unknown(self.words, self.vocab, word)

    def chunks(self, examples: Sequence[dtg_data.DTGExample]) -> list[Any]:
        """Whole sentences (one chunk each, with their arc representations)."""
        rows = [(e, self.segmentation(e)) for e in examples]
        return [chunk.to(self.device) for chunk in dtg_data.collate_sentences(rows)]

    def segmentation(self, example: dtg_data.DTGExample) -> Any:
        """One chunk per sentence (``encode_tree`` refuses longer ones)."""
        return segment(example, self.length, self.length, "plain")
