"""Pushdown scorers: the beam equals the exact marginal over every binary tree when nothing is pruned
(over words, or over pieces with each word a constituent of its pieces).

References come from the training path (``PushdownLM.gold_logprobs`` on each binary bracketing of the words,
collated as in training), not from the scorer's own step API.
"""

from __future__ import annotations

import base64
import itertools
import math

import pytest
import torch

from experiments.families.pushdown.scorers import BeamScorer, ExactScorer, GoldScorer, PushdownModel
from lightning_modules.data.sentencepiece import SentencePieceModel
from lightning_modules.data.tree import Tree, to_bracketed
from lightning_modules.data.vocab import TokenVocab, WordVocab
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown.batch import collate
from lightning_modules.families.pushdown.data import encode_sentence, with_unknown
from lightning_modules.families.pushdown.encoding import unlabelled
from lightning_modules.families.pushdown.model import build
from tests.tolerances import close32

WORDS = ["the", "dog", "is", "happy", "barks"]
TINY = dict(d_model=16, n_layers=2, n_heads=2, d_ff=32, attachment_depth_dim=8, dropout=0.0,
            embedding_dropout=0.0, output_dropout=0.0, attachment_dropout=0.0)


def _model(family: str, device: str = "cpu") -> PushdownModel:
    words = WordVocab.build(WORDS * 3, min_count=1)
    tokens = [words.token(i) for i in range(len(words))]
    vocab = TokenVocab(tokens)
    torch.manual_seed(1)
    overrides = {} if family == "pushdown" else {"pushdown_layers": 0, "attachment_loss": False}
    module = build({**TINY, **overrides, "vocab_size": len(vocab)}, family).eval()
    meta = {"family": family, "vocab": {"terminals": "words", "words": words.to_dict(), "tokens": list(vocab.tokens)}}
    return PushdownModel(module, meta, device)


def _binary_trees(leaves: list[Tree]) -> list[Tree]:
    if len(leaves) == 1:
        return [leaves[0]]
    out = []
    for cut in range(1, len(leaves)):
        for left, right in itertools.product(_binary_trees(leaves[:cut]), _binary_trees(leaves[cut:])):
            out.append(Tree("X", (left, right)))
    return out


def _joint(model: PushdownModel, words: list[str], tree: Tree) -> float:
    vocab = TokenVocab(list(model.ids)[3:])
    batch = collate([encode_sentence(tree, vocab, lambda w: (model.words.unkify(w),))])
    with torch.no_grad():
        lp_words, lp_attach = model.module.gold_logprobs(batch)
    return float(lp_words.sum() + lp_attach.sum())


@pytest.mark.parametrize("words", [["the", "dog"], ["the", "dog", "barks"], ["the", "dog", "is", "happy"]])
def test_unpruned_beam_is_the_marginal_over_all_binary_trees(words):
    model = _model("pushdown")
    leaves = [Tree("T", (w,)) for w in words]
    trees = _binary_trees(leaves) if len(words) > 1 else leaves
    expected = math.log(sum(math.exp(_joint(model, words, t)) for t in trees))
    score = BeamScorer(model, beam=1000).score([words])[0]
    assert score.total == pytest.approx(expected, abs=1e-4)
    assert sum(score.word_logprobs) + score.end_logprob == close32(score.total)
    assert score.extra["beam_final"] == len(trees)


def test_a_narrow_beam_is_a_lower_bound_and_greedy_follows_the_best_path():
    model = _model("pushdown")
    words = ["the", "dog", "is", "happy", "barks"]
    full = BeamScorer(model, beam=1000).score([words])[0].total
    narrow = BeamScorer(model, beam=2).score([words])[0].total
    assert narrow <= full + 1e-9
    greedy = BeamScorer(model, beam=1).score([words])[0]
    assert greedy.extra["beam_final"] == 1 and len(greedy.extra["attachment"]) == len(words) + 1


def test_gold_scorer_is_the_training_joint_of_the_gold_tree_and_below_the_unpruned_beam():
    """log p(x, y_gold) as training computes it, from a gold tree with POS tags (dropped as in training), its
    per-word values telescoping like the beam's; the full marginal is above every single tree."""
    model = _model("pushdown")
    words = ["the", "dog", "is", "happy"]
    tagged = Tree("S", (Tree("NP", (Tree("DT", ("the",)), Tree("NN", ("dog",)))),
                        Tree("VP", (Tree("VBZ", ("is",)), Tree("ADJP", (Tree("JJ", ("happy",)),))))))
    untagged = Tree("S", (Tree("NP", (Tree("T", ("the",)), Tree("T", ("dog",)))),
                          Tree("VP", (Tree("T", ("is",)), Tree("T", ("happy",))))))
    scorer = GoldScorer(model, lambda sentences: [[tagged] for _ in sentences], batch_size=2)
    two = scorer.score([words] * 3)  # two batches
    score = two[0]
    assert score.total == close32(_joint(model, words, untagged))
    assert [s.total for s in two] == close32([score.total] * 3)
    assert len(score.word_logprobs) == 4
    assert sum(score.word_logprobs) + score.end_logprob == close32(score.total)
    assert scorer.convention.method == "gold" and scorer.convention.bound
    vocab = TokenVocab(list(model.ids)[3:])
    with torch.no_grad():
        _, lp_attach = model.module.gold_logprobs(collate([encode_sentence(untagged, vocab, model.pieces)]))
    assert score.extra["structure_logprob"] == close32(float(lp_attach.sum()))
    assert BeamScorer(model, beam=1000).score([words])[0].total >= score.total


def test_gold_scorer_refuses_mismatched_trees_and_string_models():
    model = _model("pushdown")
    other = Tree("S", (Tree("T", ("a",)), Tree("T", ("cat",))))
    with pytest.raises(InputError, match="words differ") as e:
        GoldScorer(model, lambda sentences: [[other]]).score([["the", "dog"]])
    assert e.value.location == "sentence 0"
    with pytest.raises(InputError, match="constituency trees, not str") as e:
        GoldScorer(model, lambda sentences: [["(S a)"], ["(S b)"]]).score([["the"], ["dog"]])
    assert e.value.location == "sentence 0"
    with pytest.raises(InputError, match="needs a pushdown checkpoint"):
        GoldScorer(_model("base-lm"), lambda sentences: [])


def test_base_lm_is_exact_and_refuses_the_beam():
    model = _model("base-lm")
    words = ["the", "dog", "barks", "zebra"]
    score = ExactScorer(model).score([words])[0]
    ref = _joint(model, words, Tree("X", tuple(Tree("T", (w,)) for w in words)))  # no head: words only
    assert score.total == close32(ref) and score.unknown_words == 1
    with pytest.raises(InputError, match="needs a pushdown checkpoint"):
        BeamScorer(model)
    with pytest.raises(InputError, match="joint model"):
        ExactScorer(_model("pushdown"))


def _piece_model(family: str, device: str = "cpu") -> tuple[PushdownModel, SentencePieceModel]:
    """A tiny model over the pieces of a SentencePiece model trained on a few sentences."""
    sentences = [["the", "dog", "is", "happy"], ["the", "dog", "barks"], ["a", "cat", "sleeps"]] * 5
    sp = SentencePieceModel.train(sentences, vocab_size=22)  # single characters (and "▁")
    vocab = TokenVocab([sp.id_to_piece(i) for i in range(4, len(sp))] + ["<unk>"])
    torch.manual_seed(2)
    overrides = {} if family == "pushdown" else {"pushdown_layers": 0, "attachment_loss": False}
    module = build({**TINY, **overrides, "vocab_size": len(vocab)}, family).eval()
    meta = {"family": family, "vocab": {"terminals": "sentencepiece", "unknown": "<unk>", "tokens": list(vocab.tokens),
                                        "sentencepiece": base64.b64encode(sp.to_bytes()).decode("ascii")}}
    return PushdownModel(module, meta, device), sp


def _piece_joint(model: PushdownModel, sp: SentencePieceModel, tree: Tree) -> float:
    """log p(x, y) of the tree over words, its words split into right-branching pieces as in training."""
    vocab = TokenVocab(list(model.ids)[3:])
    batch = collate([encode_sentence(tree, vocab, with_unknown(lambda w: sp.encode_words([w])[0], vocab, "<unk>"))])
    with torch.no_grad():
        lp_words, lp_attach = model.module.gold_logprobs(batch)
    return float(lp_words.sum() + lp_attach.sum())


def test_pieces_unpruned_beam_is_the_marginal_over_word_trees_and_the_best_tree_is_over_words():
    model, sp = _piece_model("pushdown")
    words = ["the", "dog", "barks"]
    assert [len(sp.encode_words([w])[0]) for w in words] == [4, 4, 6]
    trees = _binary_trees([Tree("T", (w,)) for w in words])
    joints = [_piece_joint(model, sp, t) for t in trees]
    score = BeamScorer(model, beam=1000).score([words])[0]
    # one hypothesis per tree over words: the pieces of a word always form its right-branching constituent
    assert score.extra["beam_final"] == len(trees)
    assert score.total == pytest.approx(math.log(sum(math.exp(j) for j in joints)), abs=1e-4)
    assert len(score.word_logprobs) == 3
    assert sum(score.word_logprobs) + score.end_logprob == close32(score.total)
    best = trees[max(range(len(trees)), key=joints.__getitem__)]
    assert score.best_tree == to_bracketed(unlabelled(best))
    assert score.extra["best_logprob"] == pytest.approx(max(joints), abs=1e-4)


def test_pieces_base_lm_sums_pieces_into_words_and_counts_unknown_pieces():
    model, sp = _piece_model("base-lm")
    words = ["the", "zebra", "barks"]
    score = ExactScorer(model).score([words])[0]
    ref = _piece_joint(model, sp, Tree("X", tuple(Tree("T", (w,)) for w in words)))
    assert score.total == close32(ref)
    assert len(score.word_logprobs) == 3 and score.unknown_words == 1  # "z" is not a piece of the vocabulary
    assert sum(score.word_logprobs) + score.end_logprob == close32(score.total)
    assert model.is_unknown("zebra") and not model.is_unknown("dog")


@pytest.mark.parametrize("pieces", [False, True])
def test_sentences_searched_together_equal_each_searched_alone(pieces):
    model = _piece_model("pushdown")[0] if pieces else _model("pushdown")
    sentences = [["the", "dog", "barks"], ["the", "dog", "is", "happy"], ["dog"], ["a", "cat", "sleeps"],
                 ["happy", "dog", "is", "the", "dog"]]
    options = {"word_prob": "corrected"} if pieces else {}
    together = BeamScorer(model, beam=6, batch_size=4, **options).score(sentences)
    alone = BeamScorer(model, beam=6, batch_size=1, **options).score(sentences)
    for a, b in zip(together, alone, strict=True):
        assert a.words == b.words and a.total == close32(b.total) and a.end_logprob == close32(b.end_logprob)
        assert a.word_logprobs == close32(b.word_logprobs, scale=abs(b.total))
        assert (a.best_tree, a.extra["attachment"], a.extra["beam_final"]) == (
            b.best_tree, b.extra["attachment"], b.extra["beam_final"])


def _official_model(device: str) -> PushdownModel:
    """``_model`` with the official sentence end (imported checkpoints): ``</s>`` is in the vocabulary."""
    from experiments.families.pushdown.official import END

    model = _model("pushdown")
    tokens = [*model.tokens, END]
    module = build({**TINY, "vocab_size": len(tokens)}, "pushdown").eval()
    meta = {"family": "pushdown", "config": {"model": {"sentence_end": "official"}},
            "vocab": {"terminals": "words", "words": model.words.to_dict(), "tokens": tokens}}
    return PushdownModel(module, meta, device)


@pytest.mark.parametrize("kind", ["words", "pieces", "official"])
@pytest.mark.parametrize("device", ["cpu", *(["cuda"] if torch.cuda.is_available() else [])])  # CUDA where present
def test_word_steps_read_nothing_back_to_the_host(kind: str, device: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The word steps (``_lockstep``: every step, the pruning, the sentence ends) run under ``no_host_sync``
    (a scalar read or a value-dependent shape raises on any device, any synchronising call on CUDA), with a
    beam narrower than the candidates, and give the unguarded search's results."""
    from experiments.families.pushdown.scorers import _Batch
    from lightning_modules.models.host_sync import no_host_sync

    model = {"words": lambda: _model("pushdown", device), "pieces": lambda: _piece_model("pushdown", device)[0],
             "official": lambda: _official_model(device)}[kind]()
    sentences = [["the", "dog", "is", "happy", "barks"], ["the", "dog", "barks"], ["dog"]]
    scorer = BeamScorer(model, beam=3, batch_size=3, **({"word_prob": "corrected"} if kind == "pieces" else {}))
    expected = scorer.score(sentences)
    lockstep = BeamScorer._lockstep

    def guarded(self: BeamScorer, batch: _Batch) -> None:
        with no_host_sync(model.device):
            lockstep(self, batch)

    monkeypatch.setattr(BeamScorer, "_lockstep", guarded)
    assert scorer.score(sentences) == expected
    assert expected[0].extra["beam_final"] == 3
