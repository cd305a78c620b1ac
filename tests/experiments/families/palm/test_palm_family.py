"""The PaLM family end to end: tiny runs of every variant through ``experiments.train.train``, the exact scorer
(batching, punctuation, end of sentence), its greedy parses, and ``eval ppl|parse|unsupervised-f1``."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from experiments.checkpoints import read_checkpoint
from experiments.cli import main
from experiments.config import resolve_train_config
from experiments.families import get_family
from experiments.families.palm.scorers import ExactScorer, PalmModel, mikolov_form, with_words
from experiments.train import train
from lightning_modules.data.tree import parse_tree, to_bracketed
from lightning_modules.families.palm.encoding import greedy_parse
from lightning_modules.families.palm.model import build
from tests.tolerances import FLOAT32

TINY = ["model.d_embedding=16", "model.d_hidden=24", "model.d_rrnn=4", "model.d_span_mlp=8", "model.max_span=5",
        "model.bptt=12", "train.batch_size=4", "train.eval_batch_size=2", "train.log_every=1",
        "runtime.wandb=disabled", "runtime.progress=false", "runtime.threads=1", "train.max_steps=4",
        "train.val_every=2", "train.ckpt_every=2", "model.switch_after=1"]
SPAN_KEYS = ("model.d_rrnn", "model.d_span_mlp", "model.max_span")  # not in the awd-lstm presets


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_treebank):
    out = {}
    for family in ("awd-lstm", "palm-u", "palm-s", "palm-rb"):
        tiny = [o for o in TINY if family != "awd-lstm" or not o.startswith(SPAN_KEYS)]
        cfg = resolve_train_config(family, "cpu-small", [*tiny, f"data.corpus={tiny_treebank}",
                                                          "data.train_split=file", "data.valid_split=file",
                                                          "data.test_split=file"])
        run_dir = tmp_path_factory.mktemp(family)
        out[family] = (train(cfg, seed=1, run_dir=run_dir), run_dir / "checkpoints" / "best.ckpt", cfg)
    return out


@pytest.mark.parametrize("family", ["awd-lstm", "palm-u", "palm-s", "palm-rb"])
def test_every_variant_trains_switches_to_averaging_and_checkpoints_the_averages(runs, family):
    metrics, best, _ = runs[family]
    assert metrics["global_step"] == 4 and metrics["family"] == family
    assert np.isfinite(metrics["val_ppl"]) and metrics["val_ppl"] < 2 * metrics["vocab_size"]
    ckpt = read_checkpoint(best, family)
    assert ckpt["synbench"]["vocab"]["tokens"][:2] == ["<eos>", "<unk>"]
    # switch_after=1: averaged SGD from step 3; the step-4 checkpoint's model is the average
    assert "training_state_dict" in ckpt and ckpt["optimizer_states"][0]["param_groups"][0]["averaging"]
    assert get_family(family).kind() == "string"
    assert ("parse" in get_family(family).capabilities()) == (family != "awd-lstm")
    # log_every 1: each step logs the gradient norms of the LM (and PaLM-S's span) loss on the span attention
    [log] = best.parent.parent.glob("csv/version_0/metrics.csv")
    header = log.read_text().splitlines()[0].split(",")
    logged = {k.rsplit("_", 1)[-1] for k in header if k.startswith("train/grad_norm_span_attention_")}
    assert logged == ({"lm", "span"} if family == "palm-s" else set() if family == "awd-lstm" else {"lm"})


@pytest.mark.parametrize("family", ["awd-lstm", "palm-u"])
def test_stream_level_test_perplexity_reads_each_of_ten_rows_as_one_stream(runs, family):
    from lightning_modules.families.palm.bptt import batchify

    metrics, best, cfg = runs[family]
    assert metrics["ppl_convention"].startswith("stream-level") and metrics["nt_asgd_stage"] == "averaged"
    # the test split is the validation file here: the same stream, the same number
    assert metrics["ppl_stream"] == pytest.approx(metrics["val_ppl"]) and metrics["ppl_stream_tokens"] > 0
    data = get_family(family).build_data(cfg)
    module = build({**cfg["model"], "vocab_size": data.vocab_size}, family)
    module.load_state_dict(read_checkpoint(best, family)["state_dict"])
    module.eval()
    rows, _ = batchify(data.test_ids, 10)
    rows = torch.as_tensor(rows)
    logprobs = module.token_logprobs(rows[:, :-1], rows[:, 1:])
    assert metrics["ppl_stream_tokens"] == logprobs.numel()
    assert metrics["ppl_stream"] == pytest.approx(float(torch.exp(-logprobs.double().mean())), rel=1e-4)


def test_with_words_puts_punctuation_under_the_smallest_covering_node():
    tree = parse_tree("(X (X a b) (X c d))")
    words = ["``", "a", ",", "b", "c", "--", "d", "."]
    out = with_words(tree, words, [1, 3, 4, 6])
    assert to_bracketed(out) == "(X `` (X a , b) (X c -- d) .)"


def test_mikolov_form_of_evaluator_words():
    assert mikolov_form("The") == "the" and mikolov_form("1,000") == "N" and mikolov_form("-LRB-") is None
    assert mikolov_form("'") == "'"  # the possessive of "the Smiths'" is a word of the text


def tiny_model(family: str) -> PalmModel:
    torch.manual_seed(0)
    tokens = ["<eos>", "<unk>", "the", "dog", "barks", "loudly", "N"]
    module = build({"vocab_size": len(tokens), "d_embedding": 8, "d_hidden": 12, "max_span": 3, "d_rrnn": 3,
                    "d_span_mlp": 5}, family)
    return PalmModel(module, {"family": family, "vocab": {"tokens": tokens}})


def test_exact_scores_are_independent_of_batching_and_skip_punctuation():
    model = tiny_model("palm-u")
    sentences = [["The", "dog", "barks", "."], ["The", "cat", ",", "42", "dogs", "barks", "loudly"], ["dog"]]
    together = ExactScorer(model, batch_size=8, trees=True).score(sentences)
    alone = [ExactScorer(model, batch_size=1, trees=True).score([s])[0] for s in sentences]
    for a, b in zip(together, alone):
        np.testing.assert_allclose(a.word_logprobs, b.word_logprobs, **FLOAT32)
        assert a.best_tree == b.best_tree
    first = together[0]
    assert first.word_logprobs[3] == 0.0 and first.extra["punctuation"] == 1
    assert first.total == pytest.approx(sum(first.word_logprobs) + first.end_logprob)
    assert together[1].unknown_words == 2  # "cat", "dogs"
    # the exact log-probability of "the dog barks": p(the | <eos>) p(dog | <eos> the) ...
    ids = torch.tensor([[0, 2, 3, 4]])
    with torch.no_grad():
        logits = model.module(ids).logits.log_softmax(-1)[0]
    manual = [float(logits[k, ids[0, k + 1]]) for k in range(3)] + [float(logits[3, 0])]
    np.testing.assert_allclose([*first.word_logprobs[:3], first.end_logprob], manual, **FLOAT32)


def test_the_parse_is_the_greedy_tree_of_the_span_attention_scores():
    model = tiny_model("palm-u")
    words = ["the", "dog", "barks", "loudly", "the", "dog"]
    score = ExactScorer(model, trees=True).score([words])[0]
    ids = torch.tensor([[0, 2, 3, 4, 5, 2, 3, 0]])
    scores = model.module.all_span_scores(ids)[0].numpy()
    assert score.best_tree == to_bracketed(greedy_parse(scores[2:8, :6], words))
    assert parse_tree(score.best_tree).leaves() == words
    assert ExactScorer(tiny_model("awd-lstm"), trees=True).score([words])[0].best_tree is None


def official_parse(scores: np.ndarray, sentence: list[str], msl: int) -> str:
    """A port of the official ``SpanScorer.parse`` + ``construct_tree`` (Noahs-ARK/PaLM ``span_parser.py``).

    ``scores`` [T, msl − 1] is the official layout over x = ``sentence`` (words then ``<eos>``): query j, column
    k − start scores the span (k − msl − 1, j − 1), longest first."""
    hidden_len, span_scores = msl + 1, {}
    for j in range(len(sentence)):
        end_idx = j + hidden_len
        start_idx = max(0, end_idx - msl + 1)
        for k in range(start_idx, end_idx):
            if k - msl - 1 >= 0:
                span_scores[k - msl - 1, j - 1] = scores[j, k - start_idx]

    def assemble(start: int, end: int) -> str:
        if start == end:
            return sentence[start]
        best_split, best = -1, -1e4
        for k in range(start, end):
            if span_scores[k + 1, end] > best:
                best, best_split = span_scores[k + 1, end], k
        return f"(X {assemble(start, best_split)} {assemble(best_split + 1, end)})"

    return assemble(0, len(sentence) - 2)


@pytest.mark.parametrize("seed", range(4))
def test_parses_equal_the_official_parser_on_the_models_scores_in_its_layout(seed):
    """Which scores the parser reads (the query after each span, all lengths) and how it splits (right part
    only, ties to the longest right part) are the official code's: its layout is ours reversed along lengths.
    Untrained models initialised as the official code split both ways, so a score read one position off
    changes the trees."""
    torch.manual_seed(seed)
    tokens = ["<eos>", "<unk>", "the", "dog", "barks", "loudly"]
    module = build({"vocab_size": len(tokens), "d_embedding": 8, "d_hidden": 12, "max_span": 3, "d_rrnn": 3,
                    "d_span_mlp": 5}, "palm-u")
    model = PalmModel(module, {"family": "palm-u", "vocab": {"tokens": tokens}})
    words = ["the", "dog", "barks", "loudly", "the", "dog", "barks", "the", "dog"]
    ids = torch.tensor([[0, *[model.ids[w] for w in words], 0]])
    ours = model.module.all_span_scores(ids)[0].numpy()  # [p, i]: span [p−1−i, p−1] of ids
    msl = len(words) + 1
    # official x = words + <eos> is our ids from position 1; its column v at query j is the span of length
    # msl − 1 − v ending at x[j − 1]: our row j + 1, column msl − 2 − v
    official = ours[1:, : msl - 1][:, ::-1]
    tree = ExactScorer(model, trees=True).score([words])[0].best_tree
    assert tree == official_parse(official, [*words, "<eos>"], msl)


def test_palm_rb_parses_are_right_branching():
    words = ["the", "dog", "barks", "loudly"]
    assert ExactScorer(tiny_model("palm-rb"), trees=True).score([words])[0].best_tree == \
        "(X the (X dog (X barks loudly)))"


def test_eval_commands_on_a_trained_palm(runs, tiny_treebank, tmp_path, capsys):
    _, best, _ = runs["palm-u"]
    assert main(["eval", "ppl", str(best), "--corpus", str(tiny_treebank), "--split", "file", "--limit", "5",
                 "--out", str(tmp_path / "ppl"), "--json"]) == 0
    ppl = json.loads(capsys.readouterr().out)
    assert ppl["metrics"]["word_ppl"] > 1
    assert main(["eval", "unsupervised-f1", str(best), "--gold", str(tiny_treebank), "--limit", "8",
                 "--out", str(tmp_path / "uf1"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    parsed = result["metrics"]["parsed"]
    assert 0 <= parsed["sentence_f1"] <= 100 and parsed["sentences"] == result["settings"]["sentences"]
    assert result["metrics"]["right_branching"]["sentence_f1"] > 0
    assert main(["eval", "parse", str(best), "--gold", str(tiny_treebank), "--limit", "4",
                 "--out", str(tmp_path / "parse"), "--json"]) == 0
    assert "bracket_f1" in json.loads(capsys.readouterr().out)["metrics"]["parsed"]["all"]
    _, rb, _ = runs["palm-rb"]  # PaLM-RB's parses are the right-branching baseline, through the whole pipeline
    assert main(["eval", "unsupervised-f1", str(rb), "--gold", str(tiny_treebank), "--out", str(tmp_path / "rb"),
                 "--json"]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    assert metrics["parsed"]["sentence_f1"] == metrics["right_branching"]["sentence_f1"]
    assert metrics["parsed"]["left_splits_pct"] == 0.0
    _, awd, _ = runs["awd-lstm"]
    assert main(["eval", "unsupervised-f1", str(awd), "--gold", str(tiny_treebank), "--out",
                 str(tmp_path / "awd")]) == 2


def test_a_registered_wikitext_copy_trains_awd_lstm_as_written(tmp_path):
    """A user's WikiText-2 copy (a small file in its format written here) registered as a text corpus: the
    stream is every line's tokens as written plus <eos> (AWD-LSTM's reading), and palm-s, which needs trees,
    says so."""
    from experiments.prepare import register_treebank
    from lightning_modules.errors import InputError
    from tests.lightning_modules.data.test_corpora import WIKITEXT, write_wikitext

    data_dir = tmp_path / "data"
    data_dir.mkdir()
    name, entry = register_treebank(data_dir, f"my-wikitext-2={write_wikitext(tmp_path / 'wikitext-2')}")
    assert entry["kind"] == "text" and entry["sentences"] == {"train": 5, "valid": 5, "test": 5}
    tiny = [o for o in TINY if not o.startswith(SPAN_KEYS)]
    cfg = resolve_train_config("awd-lstm", "cpu-small", [*tiny, f"data.corpus={name}", "model.bptt=4",
                                                         "train.batch_size=2", f"runtime.data_dir={data_dir}"])
    data = get_family("awd-lstm").build_data(cfg)
    words = [w for line in WIKITEXT for w in [*line.split(), "<eos>"]]
    assert [data.vocab["tokens"][i] for i in data.train_ids] == words  # case, @-@ and <unk> as written
    assert len(data.test_ids) == len(words)
    metrics = train(cfg, seed=0, run_dir=tmp_path / "run")
    assert np.isfinite(metrics["ppl_stream"]) and metrics["train_tokens"] == len(words)
    with pytest.raises(InputError, match="text without trees; palm-s trains on gold spans"):
        get_family("palm-s").build_data(resolve_train_config("palm-s", "cpu-small", [
            f"data.corpus={name}", f"runtime.data_dir={data_dir}"]))
