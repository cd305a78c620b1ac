"""Scorers of the TG family: exact for TXL (terminals), marginal bounds for the joint TG and TXL (trees).

All numbers are natural logs. A sentence is a sequence of words as the training treebank tokenizes them.

**Words and terminals.** A word becomes the terminal tokens the checkpoint was trained on: itself or its
Berkeley unknown-word class (``WordVocab.unkify``) for word-level vocabularies, or its SentencePiece pieces.
Each word is encoded on its own, so its first piece carries the word boundary ``▁`` (fused, ``▁the``, or a
piece of its own) and belongs to that word: the probability of starting a new word is part of the word it
starts, never of the previous one. Pieces are summed into their word through ``Example.word_index``.
``unknown_words`` counts words that are not known training words (mapped to an unknown class or ``UNK``) or,
for SentencePiece, words with a piece outside the vocabulary (``<unk>``).

**Exact** (``txl-terminals``): ``<s> w1 ... wn </s>``; ``word_logprobs[i]`` = log p(w_i | w_<i) summed over
pieces, ``end_logprob`` = log p(</s> | x), ``total`` = their sum = log p(x). With SentencePiece terminals and
``word_prob="corrected"`` (``experiments.evaluate.word_prob``) each word's pieces are corrected by the mass of
B = the pieces that begin a word (``▁...``) and ``</s>``: after the word over before it (the first word too, as
SentencePiece marks it); ``total`` and ``end_logprob`` stay log p(x) and log p(</s> | x).

**Trees** (``tg``, ``txl-trees``; ``gold`` and ``proposals``): a tree's log p(x, y) is the sum of its action
log-probs (the last closing nonterminal ends the sequence; there is no ``</s>``); the marginal over a set of
distinct trees and its incremental estimates are ``experiments.evaluate.scorers.tree_marginal.TreeScorer``'s,
which reads trees through ``TGModel``'s tree-marginal methods (``end_logprob``: the closing of the remaining
constituents).

**Beam** (word-synchronous, Stern et al. 2017): ``beam.BeamScorer`` (on a key/value cache); its
reference ``reference_beam.ReencodingBeamScorer`` runs the same search re-encoding every prefix. Prefix
values are the logsumexp over the hypotheses that have just generated word i (before pruning to the word
beam), the same quantity as above with Y' = the beam's prefixes, so with a wide enough beam both agree
exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from experiments.evaluate.scorer import Convention, SentenceScore, batches, check_sentences
from experiments.evaluate.scorers.txl_model import TXLModel
from experiments.evaluate.word_prob import WORD_PROBS, boundary_ids, corrected_word_logprobs
from lightning_modules.data.encodings.choe_charniak import (
    BOS,
    EOS,
    Actions,
    ActionVocab,
    TokenType,
    choe_charniak,
    transform_tree,
)
from lightning_modules.data.encodings.example import Example
from lightning_modules.data.encodings.segmentation import segment
from lightning_modules.data.sentencepiece import BOUNDARY
from lightning_modules.data.tree import Tree, clean, drop_pos_tags, to_bracketed
from lightning_modules.data.vocab import WordVocab, terminal_vocab
from lightning_modules.errors import InputError
from lightning_modules.families.tg.cc_constraints import build_tree

JOINT_FAMILIES = ("tg", "txl-trees")


# -- the model -----------------------------------------------------------------------------------------------
class TGModel(TXLModel):
    """A TG-family network with its vocabularies: words -> terminals -> encoded sequences -> log-probs."""

    def __init__(self, module: Any, meta: dict[str, Any], vocab: ActionVocab, device: str = "cpu"):
        from lightning_modules.families.tg.data import encoder

        super().__init__(module, meta, vocab, device)
        config = self.config
        self.level: str = config["data"].get("level", "sentence")
        self.memory = config["data"]["memory"]
        self.tree_transform = config["data"]["tree_transform"]
        self._encode = encoder(self.family, config["model"]["relpos"])
        payload = meta["vocab"]
        self.unknown_token: str | None = payload.get("unknown")
        terminals = terminal_vocab(payload, "checkpoint vocabulary")
        if isinstance(terminals, WordVocab):
            self.terminals: Callable[[str], tuple[str, ...]] = lambda w: (terminals.unkify(w),)
            self.is_unknown: Callable[[str], bool] = lambda w: w not in terminals.known
        else:
            self.terminals = lambda w: tuple(terminals.encode_words([w])[0])
            self.is_unknown = lambda w: any(p not in vocab for p in self.terminals(w))

    @staticmethod
    def network() -> tuple[tuple[str, ...], Any]:
        """The TG family's checkpoints and their network, the shared TXL LightningModule."""
        from lightning_modules.families.tg.data import FAMILIES
        from lightning_modules.models.txl_lm import build

        return FAMILIES, build

    @property
    def joint(self) -> bool:
        return self.family in JOINT_FAMILIES

    def encode(self, actions: Actions) -> Example:
        return self._encode(actions, self.vocab, unknown=self.unknown_token)

    # -- the tree-marginal protocol (experiments.evaluate.scorers.tree_marginal.TreeModel) -------------------
    def model_tree(self, tree: Tree, pos_tags: bool, location: str) -> Tree:
        """A given tree as the model reads it: cleaned, POS tags dropped, the checkpoint's tree transform."""
        if not isinstance(tree, Tree):
            raise InputError(f"{self.family} scores constituency trees, not {type(tree).__name__} (a dependency "
                             "corpus has no gold constituency trees)", location)
        try:
            tree = clean(tree)
            return transform_tree(drop_pos_tags(tree) if pos_tags else tree, self.tree_transform)
        except InputError as e:
            raise InputError(e.message, location) from None

    def tree_words(self, tree: Tree) -> list[str]:
        return tree.leaves()

    def tree_text(self, tree: Tree) -> str:
        return to_bracketed(tree)

    def encode_tree(self, tree: Tree) -> Example:
        return self.encode(choe_charniak(tree, self.terminals))

    def encoded_length(self, n_actions: int, n_closing: int) -> int:
        """Length of the encoded sequence: TG duplicates every closing nonterminal."""
        return n_actions + (n_closing if self.family == "tg" else 0)

    def chunks(self, examples: Sequence[Example]) -> list[Any]:
        """``examples`` segmented with the checkpoint's length and memory, chunks collated together (padding
        trimmed), as in training."""
        from lightning_modules.families.tg.data import collate_sequences

        rows = [(e, self.segmentation(e)) for e in examples]
        return [chunk.to(self.device) for chunk in collate_sequences(rows)]

    def segmentation(self, example: Example) -> Any:
        """The checkpoint's segment length and memory (plain or smart), as in training."""
        return segment(example, self.length, self.length, self.memory)


# -- exact: TXL (terminals) ----------------------------------------------------------------------------------
class ExactScorer:
    """Exact per-word log-probabilities of a string model (``txl-terminals``), batched over sentences."""

    def __init__(self, model: TGModel, batch_size: int = 32, word_prob: str = WORD_PROBS[0]):
        if model.joint:
            raise InputError(f"{model.family} is a joint model p(x, y): it has no exact p(x); "
                             "use method=proposals, beam or gold", "method")
        if batch_size < 1:
            raise InputError("must be at least 1", "batch_size")
        if word_prob != WORD_PROBS[0] and model.vocab_kind != "sentencepiece":
            raise InputError(f"a vocabulary of {model.vocab_kind} has one token per word: --word-prob {word_prob} "
                             "needs SentencePiece terminals", "--word-prob")
        self.model = model
        self.batch_size = batch_size
        self.name = model.family
        self.convention = Convention(method="exact", bound=False, end_of_sentence=True, word_prob=word_prob)
        # corrected: the ids of B (the pieces that begin a word, and </s>)
        self.boundary = (None if word_prob == WORD_PROBS[0] else
                         torch.tensor(boundary_ids(model.vocab.tokens, BOUNDARY, (EOS,))))

    def actions(self, words: Sequence[str]) -> Actions:
        """``<s>`` + every word's terminals + ``</s>``, with each terminal's word index."""
        tokens, types, word_index = [BOS], [int(TokenType.SOS)], [-1]
        for i, word in enumerate(words):
            pieces = self.model.terminals(word)
            tokens += pieces
            types += [int(TokenType.T)] * len(pieces)
            word_index += [i] * len(pieces)
        return Actions(tuple(tokens + [EOS]), tuple(types + [int(TokenType.T)]), tuple(word_index + [-1]))

    def score(self, sentences: Sequence[Sequence[str]]) -> list[SentenceScore]:
        check_sentences(sentences)
        examples = [self.model.encode(self.actions(words)) for words in sentences]
        order = sorted(range(len(examples)), key=lambda k: -len(examples[k]))  # similar lengths together
        out: list[SentenceScore | None] = [None] * len(examples)
        for batch in batches(order, [1] * len(examples), self.batch_size):
            logprobs = self.model.label_logprobs([examples[k] for k in batch])
            masses = self.boundary_masses([examples[k] for k in batch])
            for k, lp, boundary in zip(batch, logprobs, masses):
                out[k] = self.sentence_score(sentences[k], examples[k], lp, boundary)
        return out  # type: ignore[return-value]

    def boundary_masses(self, examples: Sequence[Example]) -> list[np.ndarray | None]:
        """``corrected``: log P(B | prefix) before every piece and after the last (positions ``<s>`` .. the last
        piece); None each otherwise."""
        if self.boundary is None:
            return [None] * len(examples)
        positions = [range(len(e.word_index) - 1) for e in examples]
        return [d[:, self.boundary].logsumexp(-1).double().numpy()
                for d in self.model.distributions(examples, positions)]

    def sentence_score(self, words: Sequence[str], example: Example, lp: np.ndarray,
                       boundary: np.ndarray | None = None) -> SentenceScore:
        """The score of one encoded sentence from its label log-probs (and, corrected, its boundary masses)."""
        token_lp = lp[:-1]  # token j (j >= 1) is predicted at position j - 1
        word_index = example.word_index[1:]
        is_word = word_index >= 0
        per_word = np.bincount(word_index[is_word], weights=token_lp[is_word], minlength=len(words))
        end = float(token_lp[-1])  # </s>
        total = float(per_word.sum()) + end
        if boundary is not None:
            per_word = np.array(corrected_word_logprobs(token_lp[is_word], word_index[is_word], boundary,
                                                        float(boundary[0])))
        return SentenceScore(
            words=tuple(words), word_logprobs=tuple(float(v) for v in per_word),
            total=total, end_logprob=end,
            unknown_words=sum(self.model.is_unknown(w) for w in words),
        )


# -- word-synchronous beam search (TG, TXL (trees)) ----------------------------------------------------------
def action_tree(tokens: Sequence[str], types: Sequence[int], word_index: Sequence[int],
                words: Sequence[str]) -> Tree:
    """The tree of a complete action sequence over the original words (a word's terminals become the word)."""
    kept, kept_types, previous = [], [], -1
    for token, ttype, w in zip(tokens, types, word_index):
        if ttype == TokenType.T:
            if w == previous:  # a later piece of the same word
                continue
            token, previous = words[w], w
        kept.append(token)
        kept_types.append(ttype)
    return build_tree(kept, kept_types)
