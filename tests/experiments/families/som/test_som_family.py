"""The SOM family end to end at toy scale: presets, a few training steps on UD EWT, the exact greedy scorer
(equal to the module's own NLL, independent of batching), parses, ``eval ppl`` and ``model-info``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from experiments.checkpoints import read_checkpoint
from experiments.cli import main
from experiments.config import resolve_train_config
from experiments.evaluate import tasks
from experiments.families import get_family
from experiments.families.adapter import ScoringRequest
from experiments.families.som import parsing
from experiments.train import train
from lightning_modules.data.dependency import read_conllu
from lightning_modules.data.tree import parse_tree
from lightning_modules.families.som import encoding as som
from tests.tolerances import close32

TINY = ["model.d_sem=16", "model.d_syn=8", "model.n_slots=12", "model.warmup_steps=2", "model.total_steps=20",
        "train.batch_size=8", "train.eval_batch_size=16", "train.log_every=1", "runtime.wandb=disabled",
        "runtime.progress=false", "runtime.threads=1", "train.max_steps=3", "train.val_every=3",
        "train.ckpt_every=3"]


@pytest.fixture(scope="module")
def small_ud(tmp_path_factory, shared_data: Path) -> Path:
    """The first 60 sentences of UD EWT dev as a CoNLL-U file (split ``file``)."""
    import gzip

    text = gzip.open(shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz", "rt").read()
    path = tmp_path_factory.mktemp("ud") / "small.conllu"
    path.write_text("\n\n".join(text.split("\n\n")[:60]) + "\n\n")
    return path


@pytest.fixture(scope="module")
def trained(tmp_path_factory, small_ud: Path) -> tuple[Path, dict]:
    cfg = resolve_train_config("som", "cpu-small", [*TINY, f"data.corpus={small_ud}", "data.train_split=file",
                                                     "data.valid_split=file"])
    run = tmp_path_factory.mktemp("run")
    return run, train(cfg, seed=1, run_dir=run)


def test_cpu_small_presets_train_on_ud_ewt() -> None:
    cfg = resolve_train_config("som", "cpu-small")
    assert cfg["data"]["corpus"] == "ud-ewt" and cfg["data"]["valid_split"] == "dev"
    assert resolve_train_config("som", "cpu-small-esom")["model"]["disentangled"] is False
    # Table 6's models read Γ from Universal Dependencies (the paper's Table 2 run), not the constituency sample
    for preset in ("ptb", "ptb-esom"):
        assert resolve_train_config("som", preset)["data"]["corpus"] == "ptb-sample-ud"


def test_three_steps_give_a_checkpoint_and_metrics(trained) -> None:
    run, metrics = trained
    assert metrics["global_step"] == 3 and metrics["family"] == "som"
    assert json.loads((run / "DONE").read_text()) == metrics
    assert 1 < metrics["val_token_ppl"] < metrics["vocab_size"] * 2
    for key in ("val_p_accuracy", "val_p_prime_accuracy"):
        assert 0.0 <= metrics[key] <= 1.0
    assert 0.0 <= metrics["val_uf1"] <= 100.0 and metrics["train_sequences"] == 60
    ckpt = read_checkpoint(run / "checkpoints" / "best.ckpt", "som")
    assert ckpt["synbench"]["vocab"]["tokens"][:3] == ["<pad>", "<s>", "<eos>"]


def test_exact_scorer_matches_the_module_and_is_batch_independent(trained, small_ud: Path) -> None:
    run, metrics = trained
    family = get_family("som")
    ckpt = run / "checkpoints" / "best.ckpt"
    scoring = family.scoring(ckpt, read_checkpoint(ckpt)["synbench"], ScoringRequest("exact", batch_size=7))
    sentences = [list(dep.forms) for _, dep in read_conllu(small_ud)]
    scores = scoring.scorer.score(sentences)
    assert scoring.scorer.convention.method == "exact" and not scoring.scorer.convention.bound
    words = sum(len(s) for s in sentences)
    nll = -sum(s.total for s in scores)
    # the scorer's exact log p(x) is the validation NLL the training run reported (same data, greedy structure)
    assert math.exp(nll / words) == pytest.approx(metrics["val_word_ppl"], rel=1e-4)
    for s in scores:
        assert s.total == pytest.approx(sum(s.word_logprobs) + s.end_logprob)
        parse = som.shape_to_tree(som.shape_from_slots(s.extra["decisions"]), parsing.bracket_safe(s.words))
        assert str(parse) == s.best_tree
    one_by_one = [scoring.scorer.score([w])[0].total for w in sentences[:5]]
    assert one_by_one == close32([s.total for s in scores[:5]])


def test_eval_ppl_on_a_dependency_corpus(trained, small_ud: Path, tmp_path: Path, capsys) -> None:
    run, metrics = trained
    code = main(["eval", "ppl", str(run / "checkpoints" / "best.ckpt"), "--corpus", str(small_ud), "--split", "file",
                 "--out", str(tmp_path / "ppl"), "--json"])
    out = json.loads(capsys.readouterr().out)
    convention = out["settings"]["scorer_convention"]
    assert code == 0 and convention["method"] == "exact" and convention["bound"] is False
    assert convention["incremental"].startswith("exact given greedy decisions")
    assert out["metrics"]["word_ppl"] == pytest.approx(metrics["val_word_ppl"], rel=1e-4)
    # Kim et al. (2019)'s convention beside: one <eos> per sentence in the sum and in the count, as training's
    # per-token perplexity counts it
    assert out["metrics"]["end_tokens"] == 60
    assert out["metrics"]["ppl_end_counted"] == pytest.approx(metrics["val_token_ppl"], rel=1e-4)
    assert tasks.get("ppl").flatten(out["metrics"])["ppl_end_counted"] == out["metrics"]["ppl_end_counted"]
    assert "ppl_end_counted" in out["convention"] and tasks.is_summarized("ppl_end_counted@gum")


def test_eval_ppl_with_the_gold_decisions(trained, small_ud: Path, tmp_path: Path, capsys,
                                         prepared_data_dir: Path) -> None:
    """Table 2's "– Predicted tree + Gold tree": ``--method gold`` feeds the corpus trees' grid labels as θ and
    c, and its NLL is the module's own in ``gold`` mode on the same sentences."""
    import torch

    from lightning_modules.families.som import data as som_data

    run, _ = trained
    code = main(["eval", "ppl", str(run / "checkpoints" / "best.ckpt"), "--corpus", str(small_ud), "--split", "file",
                 "--method", "gold", "--out", str(tmp_path / "ppl"), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    assert out["settings"]["scorer_convention"]["method"] == "gold" and "gold decisions" in out["headline"]
    ckpt = read_checkpoint(run / "checkpoints" / "best.ckpt", "som")
    cfg = ckpt["synbench"]["config"]
    data = som_data.build(cfg)
    module = get_family("som").build_module(cfg, data)
    module.load_state_dict(ckpt["state_dict"])
    module.eval()
    with torch.no_grad():
        terms = module.loss_terms(data.collate(data.valid), "gold")
        greedy = math.exp(module.loss_terms(data.collate(data.valid), "argmax")["lm_nll"] / terms["lm_count"])
    assert out["metrics"]["ppl_end_counted"] == pytest.approx(math.exp(terms["lm_nll"] / terms["lm_count"]), rel=1e-4)
    assert out["metrics"]["ppl_end_counted"] != pytest.approx(greedy, rel=1e-6)
    # SG and BLiMP have no corpus trees to read
    assert main(["eval", "blimp", str(run / "checkpoints" / "best.ckpt"), "--method", "gold",
                 "--data-dir", str(prepared_data_dir)]) == 2
    assert "--method gold needs the gold trees" in capsys.readouterr().err


def test_model_info(capsys) -> None:
    assert main(["model-info", "som", "--preset", "ptb-esom", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert abs(info["parameters"] / 17.7e6 - 1) < 0.01 and info["parts"]["prediction_rnn"] == 24 * 400 ** 2 + 10 * 400


def test_eval_parse_against_gamma_on_a_ud_file(trained, small_ud: Path, tmp_path: Path, capsys) -> None:
    run, metrics = trained
    code = main(["eval", "parse", str(run / "checkpoints" / "best.ckpt"), "--gold", str(small_ud),
                 "--out", str(tmp_path / "parse"), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    assert code == 0 and out["settings"]["sentences"] == 60
    parsed, baseline = out["metrics"]["parsed"]["all"], out["metrics"]["right_branching"]["all"]
    assert parsed["sentences"] == baseline["sentences"] == 60 and parsed["valid_sentences"] == 60
    assert "Γ" in out["headline"] and 0.0 <= parsed["bracket_f1"] <= 100.0
    assert parsed["bracket_f1"] == metrics["val_uf1"]  # the training run's validation UF1: same parses, convention
    # Table 2's p and p' accuracies: the same counts as training's validation (Algorithm 1 over the greedy θ)
    decisions = out["metrics"]["decisions"]
    assert decisions["p"]["accuracy"] == pytest.approx(metrics["val_p_accuracy"], abs=1e-12)
    assert decisions["p_prime"]["accuracy"] == pytest.approx(metrics["val_p_prime_accuracy"], abs=1e-12)
    words = sum(len(dep.forms) for _, dep in read_conllu(small_ud))
    assert decisions["p_prime"]["scored"] == words and decisions["p"]["scored"] == words - 60
    # Γ is binary: the ceiling of a binary parser against it is 100
    assert out["metrics"]["oracle"]["all"]["bracket_f1"] == 100.0
    flat = tasks.get("parse").flatten(out["metrics"])
    assert flat["decision_accuracy.p"] == decisions["p"]["accuracy"] and flat["parse_f1_oracle"] == 100.0
    assert tasks.is_tested("decision_accuracy.p_prime") and tasks.is_summarized("parse_f1_oracle")
    gold = (tmp_path / "parse" / "gold.txt").read_text().splitlines()
    deps = [dep for _, dep in read_conllu(small_ud)]
    assert gold[0] == parsing.gold_line(deps[0]) and gold[0].startswith("(TOP ")
    # every parse is the tree of the scorer's greedy decisions, in EVALB form with the gold tags
    assert len((tmp_path / "parse" / "parsed.txt").read_text().splitlines()) == 60


def test_eval_parse_with_the_gold_decisions(trained, small_ud: Path, tmp_path: Path, capsys) -> None:
    """Table 2's "– Predicted tree + Gold tree" row reports p / p' accuracies: ``eval parse --method gold`` feeds
    the gold decisions and scores the parsers' predictions (argmax p_t, argmax p'_t) under that history, the
    hits validation counts in ``gold`` mode; the parse is then the gold decisions' tree."""
    import torch

    from lightning_modules.families.som import data as som_data

    run, _ = trained
    ckpt_path = run / "checkpoints" / "best.ckpt"
    code = main(["eval", "parse", str(ckpt_path), "--gold", str(small_ud), "--method", "gold",
                 "--out", str(tmp_path / "gold"), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    assert out["settings"]["method"] == "gold" and "gold decisions" in out["settings"]["description"]
    ckpt = read_checkpoint(ckpt_path, "som")
    cfg = ckpt["synbench"]["config"]
    data = som_data.build(cfg)
    module = get_family("som").build_module(cfg, data)
    module.load_state_dict(ckpt["state_dict"])
    module.eval()
    with torch.no_grad():
        terms = module.loss_terms(data.collate(data.valid), "gold")
    decisions = out["metrics"]["decisions"]
    assert (decisions["p"]["correct"], decisions["p"]["scored"]) == (terms["parser_correct"], terms["parser_count"])
    assert (decisions["p_prime"]["correct"], decisions["p_prime"]["scored"]) == (terms["zero_step_correct"],
                                                                               terms["zero_step_count"])
    assert 0.0 < decisions["p"]["accuracy"] < 1.0  # predictions, not the gold decisions fed back
    # the parse is the tree of the gold decisions: Γ wherever the memory holds the whole tree
    deps = [dep for _, dep in read_conllu(small_ud)]
    fits = [k for k, d in enumerate(deps)
            if som.depth_slots(som.first_siblings(som.sentence_shape(parsing.gold_shape(d))), 12).min() >= 0]
    parsed = (tmp_path / "gold" / "parsed.txt").read_text().splitlines()
    gold = (tmp_path / "gold" / "gold.txt").read_text().splitlines()
    assert fits and all(parsed[k] == gold[k] for k in fits)
    # greedy decisions (the default method) give other accuracies from the same checkpoint
    assert main(["eval", "parse", str(ckpt_path), "--gold", str(small_ud), "--out", str(tmp_path / "greedy"),
                 "--json"]) == 0
    greedy = json.loads(capsys.readouterr().out)
    assert greedy["settings"]["method"] == "exact" and greedy["metrics"]["decisions"] != decisions
    # a family without the gold method says so
    assert main(["eval", "parse", str(ckpt_path), "--gold", str(small_ud), "--method", "beam"]) == 2
    assert "scored with --method exact or gold, not beam" in capsys.readouterr().err


@pytest.mark.parametrize(("corpus", "xpos"), [("ud-lines", "Period"), ("ud-partut", "FS")])
def test_punctuation_is_upos_punct_on_lines_and_partut(prepared_data_dir: Path, corpus: str, xpos: str) -> None:
    """LinES and ParTUT tag punctuation with XPOS of their own (``Period``, ``Comma``; ``FS``, ``FF``): the lines
    drop the words whose UPOS is PUNCT (10-12% of their test words), whatever the XPOS."""
    from experiments.evaluate.ppl import read_sentences

    gold = read_sentences(corpus, "test", data_dir=str(prepared_data_dir), trees=True, tree_kind=None)
    punct = [[u == "PUNCT" for u in t.upos] for t in gold.trees]
    share = sum(map(sum, punct)) / sum(map(len, punct))
    assert 0.09 < share < 0.13
    assert any(x == xpos for t in gold.trees for x, u in zip(t.xpos, t.upos) if u == "PUNCT")
    assert not any(t in parsing.PUNCTUATION for tags in gold.tags for t in tags)  # what the XPOS rule kept
    lines, baseline = [], []
    for words, tree, marks in zip(gold.words, gold.trees, punct):
        tags = parsing.VIEW.tags(tree)
        assert [t == "PUNCT" for t in tags] == marks
        lines.append(parsing.gold_line(tree))
        baseline.append(parsing.right_branching_line(words, tags))
        kept = [w for w, m in zip(parsing.bracket_safe(words), marks) if not m]
        assert [w for w, _ in parse_tree(lines[-1]).pos()] == kept
    scores = parsing.unlabeled_f1(lines, baseline)
    assert scores["valid_sentences"] == scores["sentences"] == len(gold.words)


def test_eval_parse_drops_upos_punct_on_lines(trained, prepared_data_dir: Path, tmp_path: Path, capsys) -> None:
    run, _ = trained
    code = main(["eval", "parse", str(run / "checkpoints" / "best.ckpt"), "--gold", "ud-lines/test", "--limit", "20",
                 "--data-dir", str(prepared_data_dir), "--out", str(tmp_path / "parse"), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    parsed = json.loads(captured.out)["metrics"]["parsed"]["all"]
    assert parsed["sentences"] == parsed["valid_sentences"] == 20  # parses and gold drop the same words
    for line in (tmp_path / "parse" / name for name in ("gold.txt", "parsed.txt")):
        tags = {t for text in line.read_text().splitlines() for _, t in parse_tree(text).pos()}
        assert "PUNCT" not in tags and "NOUN" in tags


def test_val_uf1_and_eval_parse_score_the_whole_tree_when_it_is_clamped(small_ud: Path, tmp_path: Path,
                                                                        capsys) -> None:
    """One protocol: with 4 slots many EWT sentences are deeper than the memory and trained on clamped labels;
    validation's UF1 and ``eval parse`` both score the parses against the whole Γ, and the run says how many
    sentences were clamped."""
    cfg = resolve_train_config("som", "cpu-small", [*TINY, "model.n_slots=4", "train.max_steps=1",
                                                     "train.val_every=1", "train.ckpt_every=1",
                                                     f"data.corpus={small_ud}", "data.train_split=file",
                                                     "data.valid_split=file"])
    metrics = train(cfg, seed=2, run_dir=tmp_path / "run")
    deps = [dep for _, dep in read_conllu(small_ud)]
    deep = [min(som.depth_slots(som.first_siblings(som.sentence_shape(parsing.gold_shape(d))), 4)) < 0
            for d in deps]
    assert metrics["train_clamped_sentences"] == metrics["valid_clamped_sentences"] == sum(deep) > 0
    assert metrics["train_clamped_share"] == pytest.approx(sum(deep) / 60)
    code = main(["eval", "parse", str(tmp_path / "run" / "checkpoints" / "best.ckpt"), "--gold", str(small_ud),
                 "--out", str(tmp_path / "parse"), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert json.loads(captured.out)["metrics"]["parsed"]["all"]["bracket_f1"] == metrics["val_uf1"]
    assert (tmp_path / "parse" / "gold.txt").read_text().splitlines() == [parsing.gold_line(d) for d in deps]


def test_gold_lines_score_100_against_themselves(small_ud: Path) -> None:
    deps = [dep for _, dep in read_conllu(small_ud)]
    lines = [parsing.gold_line(d) for d in deps]
    assert parsing.unlabeled_f1(lines, lines)["bracket_f1"] == 100.0
    # a one-word sentence has no bracket left once the sentence span is deleted
    one = parsing.evalb_line(0, ["Hi"], ["UH"])
    assert one == "(TOP (UH Hi))"
    assert parsing.bracket_safe(["(", ":)", "a b"]) == ["-LRB-", ":-RRB-", "a_b"]
    # punctuation and trivial spans removed: the sentence span (a b) becomes TOP, deleted by EVALB
    assert parsing.evalb_line(((0, 1), 2), ["a", "b", "."], ["DT", "NN", "PUNCT"]) == "(TOP (DT a) (NN b))"
    assert parsing.evalb_line((0, (1, 2)), ["a", "b", "c"], ["DT", "NN", "VB"]) == "(TOP (DT a) (X (NN b) (VB c)))"
    assert parsing.evalb_line((0, 1), [".", ","], [".", ","]) == "(TOP (. .) (, ,))"


@pytest.mark.slow
def test_cpu_small_preset_on_ud_ewt(prepared_data_dir: Path, tmp_path: Path) -> None:
    """The cpu-small preset as shipped (UD EWT train/dev from the data directory), two tiny steps (two minutes
    on a loaded 2-core machine: all 12,544 + 2,001 sentences are converted and the dev set is scored twice)."""
    cfg = resolve_train_config("som", "cpu-small", [*TINY, "train.max_steps=2", "train.val_every=2",
                                                     "train.ckpt_every=2",
                                                     f"runtime.data_dir={prepared_data_dir}"])
    metrics = train(cfg, seed=0, run_dir=tmp_path / "run")
    assert metrics["train_sequences"] == 12544 and metrics["valid_sequences"] == 2001
    assert metrics["val_words"] == 25147 and metrics["train_lowest_slot"] >= 0
    assert metrics["val_token_ppl"] < 2 * metrics["vocab_size"]


@pytest.mark.parametrize(("override", "message"), [
    ("data.corpus=nope", "data.corpus: unknown corpus 'nope'"),
    ("model.tree_labels=right", "model.tree_labels: must be one of gold, left_branching"),
    ("data.terminals=sentencepiece", "data.terminals: SOM reads words"),
    ("model.structure=beam", "model.structure: must be one of adaptive, teacher_forcing"),
])
def test_bad_training_config_is_one_error_line(small_ud: Path, tmp_path: Path, capsys, override: str,
                                               message: str) -> None:
    argv = ["train", "som", override, "runtime.wandb=disabled", "--run-dir", str(tmp_path / "run")]
    if not override.startswith("data.corpus"):
        argv[3:3] = [f"data.corpus={small_ud}", "data.train_split=file", "data.valid_split=file"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"synbench: error: {message}") and err.count("\n") == 1


def test_constituency_gold_lines_and_the_oracle_binary_ceiling(shared_data: Path) -> None:
    from lightning_modules.data.tree import clean, parse_tree, read_bracketed

    tree = clean(parse_tree("(S (NP (DT the) (JJ old) (NN man)) (VP (VBD left)) (. .))"))
    # n-ary and as given; punctuation, the sentence span (TOP) and the one-word VP removed
    assert parsing.gold_line(tree) == "(TOP (NP (DT the) (JJ old) (NN man)) (VBD left))"
    trees = [clean(t) for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0003.mrg")]
    ceiling = parsing.oracle_binary_f1(trees)
    assert 60.0 < ceiling < 100.0  # Table 8 reports 82.5 on the PTB test set
    assert parsing.oracle_binary_f1([tree]) == 66.67  # recall 1, precision 1/2 (EVALB prints 2 decimals)


def test_eval_parse_against_original_constituency_trees(trained, shared_data: Path, tmp_path: Path, capsys) -> None:
    from lightning_modules.data.tree import clean, read_bracketed

    run, _ = trained
    gold = shared_data / "ptb_nltk_sample" / "combined" / "wsj_0003.mrg"
    code = main(["eval", "parse", str(run / "checkpoints" / "best.ckpt"), "--gold", str(gold), "--out",
                 str(tmp_path / "parse"), "--json"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    out = json.loads(captured.out)
    parsed = out["metrics"]["parsed"]["all"]
    assert parsed["sentences"] == parsed["valid_sentences"] == 30  # n-ary gold, same words once pruned
    # Table 8's ceiling beside the parses: the gold trees binarized as Γ, against the n-ary originals
    trees = [clean(t) for _, t in read_bracketed(gold)]
    assert out["metrics"]["oracle"]["all"]["bracket_f1"] == parsing.oracle_binary_f1(trees) < 100.0
    assert set(out["metrics"]["decisions"]) == {"p", "p_prime"}  # labels from the binarized constituency trees
    assert (tmp_path / "parse" / "gold.txt").read_text().startswith("(TOP ")


def test_decision_hits_hand_worked() -> None:
    """p / p' hits of one sentence against Algorithm 1's labels given the decisions taken, worked by hand for
    ``<s> the old man saw her . <eos>`` under ((<s> Γ) <eos>), Γ = ((((the old) man) (saw her)) .), N = 6."""
    from types import SimpleNamespace

    from lightning_modules.data.tree import clean, parse_tree

    tree = clean(parse_tree("(S (NP (DT the) (JJ old) (NN man)) (VP (VBD saw) (NP (PRP her))) (. .))"))
    assert parsing.gold_shape(tree) == ((((0, 1), 2), (3, 4)), 5)
    gold = som.token_slots(som.sentence_shape(parsing.gold_shape(tree)), 6)
    assert gold.tolist() == [6, 5, 4, 4, 4, 3, 4, 5]
    # the gold decisions (θ_t = the grid labels, c_t = the next token's) are all correct; the first word's slot
    # is forced and not scored, <eos>'s label is p'’s last target
    perfect = SimpleNamespace(extra={"n_slots": 6, "decisions": gold[1:7].tolist(), "choices": gold[2:8].tolist()})
    assert parsing.decision_hits(perfect, tree) == {"p": (5, 5), "p_prime": (6, 6)}
    # always slot 5: ξ = [6, 5, 4, 5, 5, 4, 5, 5] (ξ_i = max(ξ_j − 1, μ_i, θ_{i−1} − 1, 0)), so p is right at
    # man, saw, . (3 of 5) and p' at ξ_3, ξ_4, ξ_6, ξ_7 (4 of 6)
    flat = SimpleNamespace(extra={"n_slots": 6, "decisions": [5] * 6, "choices": [5] * 6})
    assert parsing.decision_hits(flat, tree) == {"p": (3, 5), "p_prime": (4, 6)}
    # without a prediction network there is no p'
    assert parsing.decision_hits(SimpleNamespace(extra={"n_slots": 6, "decisions": [5] * 6, "choices": None}),
                                 tree) == {"p": (3, 5)}
