"""``--hf-convention``: ``hf:`` scores equal the real packages' pair by pair and sentence by sentence (1e-4 nats).

``minicons``: ``IncrementalLMScorer.sequence_score(..., bos_token=True)``; ``lm-eval``: lm-evaluation-harness's
own ``blimp_*`` task configs (their ``target_delimiter``, ``doc_to_choice``, request construction) read from local
JSON files and its ``HFLM`` model's ``loglikelihood``, and ``HFLM.loglikelihood_rolling`` for perplexity, on a
model of 16 positions so that sentences span several rolling windows. Both packages come from the ``hf-parity``
test extra (pinned in pyproject.toml; ``.ci/setup`` installs it).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from experiments.cli import main
from experiments.evaluate.blimp import Pair, load_paradigms
from experiments.evaluate.scorer import text_of_words
from experiments.evaluate.scorers import hf
from tests.experiments.evaluate.test_hf_scorer import build_tiny_gpt2
from tests.tolerances import FLOAT32_RTOL

PARADIGMS = ("anaphor_number_agreement", "determiner_noun_agreement_2", "left_branch_island_echo_question",
             "superlative_quantifiers_2")
PAIRS = 25
TOLERANCE = 1e-4  # nats, the floor; totals of many pieces also get float32's relative FLOAT32_RTOL


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory: pytest.TempPathFactory, shared_data: Path) -> Path:
    return build_tiny_gpt2(tmp_path_factory.mktemp("gpt2"), shared_data)


@pytest.fixture(scope="module")
def short_gpt2(gpt2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same tokenizer and a fresh 16-position GPT-2: most PTB sentences need several windows."""
    from transformers import GPT2LMHeadModel

    folder = tmp_path_factory.mktemp("short") / "gpt2-16"
    shutil.copytree(gpt2, folder)
    config = GPT2LMHeadModel.config_class.from_pretrained(folder, local_files_only=True, n_positions=16)
    torch.manual_seed(1)
    GPT2LMHeadModel(config).save_pretrained(folder)
    return folder


def run(capsys: pytest.CaptureFixture, *argv: object) -> tuple[int, str, str]:
    code = main(["eval", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def items(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "items.jsonl").read_text().splitlines()]


def lm_eval_model(folder: Path):
    from lm_eval.models.huggingface import HFLM

    return HFLM(pretrained=str(folder), device="cpu", batch_size=16)


def lm_eval_blimp(folder: Path, paradigms: dict[str, list[Pair]], tmp_path: Path) -> list[tuple[float, float]]:
    """(log p(good), log p(bad)) of each pair from lm-eval's own BLiMP task configs and HFLM, paradigm by
    paradigm in sorted order; the task reads the pairs from a local JSON file instead of the hub."""
    import lm_eval
    from lm_eval.api.task import ConfigurableTask
    from lm_eval.tasks._yaml_loader import load_yaml

    lm = lm_eval_model(folder)
    tmp_path.mkdir()
    out = []
    for uid in sorted(paradigms):
        data = tmp_path / f"{uid}.jsonl"
        data.write_text("".join(json.dumps({"sentence_good": p.good, "sentence_bad": p.bad}) + "\n"
                                for p in paradigms[uid]))
        config = load_yaml(Path(lm_eval.__file__).parent / "tasks" / "blimp" / f"{uid}.yaml")
        config.update(dataset_path="json", dataset_name=None,
                      dataset_kwargs={"data_files": {"train": str(data)}, "cache_dir": str(tmp_path / "cache")})
        task = ConfigurableTask(config=config)
        assert task.config.target_delimiter == " " and task.OUTPUT_TYPE == "multiple_choice"
        task.build_all_requests(rank=0, world_size=1)
        requests = sorted(task.instances, key=lambda r: (r.doc_id, r.idx))
        assert requests[0].args == ("", " " + paradigms[uid][0].good)  # the delimiter before the sentence
        logprobs = [logprob for logprob, _ in lm.loglikelihood(requests, disable_tqdm=True)]
        out += list(zip(logprobs[::2], logprobs[1::2], strict=True))
    return out


def minicons_totals(folder: Path, sentences: list[str]) -> list[float]:
    from minicons.scorer import IncrementalLMScorer

    model = IncrementalLMScorer(str(folder), device="cpu")
    return [total for first in range(0, len(sentences), 32)
            for total in model.sequence_score(sentences[first : first + 32], bos_token=True,
                                              reduction=lambda logprobs: logprobs.sum(0).item())]


def test_rolling_windows_are_lm_evals():
    from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

    for n in range(30):
        pieces = list(range(100, 100 + n))
        for length in range(1, 12):
            want = [make_disjoint_window(w) for w in get_rolling_token_windows(pieces, 7, length, 1)]
            assert hf.rolling_windows(pieces, 7, length) == [(list(c), list(p)) for c, p in want], (n, length)


def test_blimp_equals_minicons_and_lm_eval_pair_by_pair(capsys, gpt2, shared_data, tmp_path):
    blimp_dir = shared_data / "blimp" / "data"
    paradigms = {uid: pairs for uid, pairs in load_paradigms(blimp_dir, PAIRS).items() if uid in PARADIGMS}
    sentences = [s for uid in sorted(paradigms) for p in paradigms[uid] for s in (p.good, p.bad)]
    ours = {}
    for convention in ("minicons", "lm-eval"):
        out = tmp_path / convention
        code, stdout, _ = run(capsys, "blimp", f"hf:{gpt2}", "--hf-convention", convention, "--blimp-dir", blimp_dir,
                              "--paradigms", ",".join(PARADIGMS), "--pairs-per-paradigm", PAIRS, "--out", out,
                              "--json")
        assert code == 0
        settings = json.loads(stdout)["settings"]
        assert settings["hf_convention"] == convention and f"{convention} convention" in settings["description"]
        assert json.loads((out / "results.json").read_text())["settings"]["hf_convention"] == convention
        ours[convention] = [(r["logprob_good"], r["logprob_bad"]) for r in items(out)]
    minicons = minicons_totals(gpt2, sentences)
    lm_eval = lm_eval_blimp(gpt2, paradigms, tmp_path / "lm-eval-data")
    assert len(ours["minicons"]) == len(lm_eval) == len(minicons) // 2 == len(PARADIGMS) * PAIRS
    for k, (mine, theirs) in enumerate(zip(ours["lm-eval"], lm_eval)):
        assert mine == pytest.approx(theirs, rel=FLOAT32_RTOL, abs=TOLERANCE), k
    for k, mine in enumerate(ours["minicons"]):
        assert mine == pytest.approx((minicons[2 * k], minicons[2 * k + 1]), rel=FLOAT32_RTOL, abs=TOLERANCE), k
    # the conventions differ on every pair: the space changes the first word's piece (and all that follows)
    assert all(max(abs(a - b) for a, b in zip(m, e)) > TOLERANCE for m, e in zip(ours["minicons"], ours["lm-eval"]))


def test_perplexity_equals_lm_eval_rolling_windows_and_minicons(capsys, gpt2, short_gpt2, prepared_data_dir,
                                                               tmp_path):
    from lm_eval.api.instance import Instance

    from experiments.evaluate.ppl import read_sentences

    sentences = read_sentences("ptb-sample", "test", 12, str(prepared_data_dir))
    texts = [text_of_words(words).text for words in sentences.words]
    common = ("--corpus", "ptb-sample", "--split", "test", "--limit", 12, "--data-dir", prepared_data_dir, "--json")
    code, stdout, _ = run(capsys, "ppl", f"hf:{short_gpt2}", "--hf-convention", "lm-eval", "--batch-size", 5,
                          "--out", tmp_path / "lm-eval", *common)
    assert code == 0 and json.loads(stdout)["settings"]["hf_convention"] == "lm-eval"
    scorer = hf.load(str(short_gpt2), convention="lm-eval")
    assert max(len(scorer.tokenizer(t)["input_ids"]) for t in texts) > 3 * scorer.max_length  # several windows
    requests = [Instance("loglikelihood_rolling", {}, (text,), k) for k, text in enumerate(texts)]
    want = lm_eval_model(short_gpt2).loglikelihood_rolling(requests, disable_tqdm=True)
    for k, (record, theirs) in enumerate(zip(items(tmp_path / "lm-eval"), want, strict=True)):
        assert record["logprob"] == pytest.approx(theirs, rel=FLOAT32_RTOL, abs=TOLERANCE), k
    # minicons reads no windows: a sentence longer than the positions is an error, never truncated
    code, _, err = run(capsys, "ppl", f"hf:{short_gpt2}", "--out", tmp_path / "minicons-16", *common)
    assert code == 2 and "pieces, but the model reads the BOS token and at most 15 pieces" in err
    wide = hf.load(str(gpt2))
    fitting = [k for k, text in enumerate(texts) if len(wide.tokenizer(text)["input_ids"]) <= wide.max_pieces]
    assert len(fitting) >= 8
    ours = wide.score([sentences.words[k] for k in fitting])  # what eval ppl calls
    theirs = minicons_totals(gpt2, [texts[k] for k in fitting])
    assert [s.total for s in ours] == pytest.approx(theirs, rel=FLOAT32_RTOL, abs=TOLERANCE)


def test_lm_eval_scores_the_bos_a_tokenizer_adds_in_rolling_requests(short_gpt2, tmp_path):
    """A tokenizer that adds BOS itself (Llama's) gives lm-eval's rolling requests BOS twice (the prefix token,
    then the text's own first piece): log p(BOS | BOS) is in the total, and so in ours."""
    from lm_eval.api.instance import Instance
    from transformers import AutoTokenizer

    folder = tmp_path / "adds-bos"
    shutil.copytree(short_gpt2, folder)
    AutoTokenizer.from_pretrained(folder, local_files_only=True, add_bos_token=True).save_pretrained(folder)
    texts = [text_of_words(words) for words in (["The", "dog", "barked", "."], ["Prices", "rose", "sharply", "in",
                                                                                "early", "trading", "today", "."])]
    ours = hf.load(str(folder), convention="lm-eval").score_texts(texts)
    requests = [Instance("loglikelihood_rolling", {}, (t.text,), k) for k, t in enumerate(texts)]
    theirs = lm_eval_model(folder).loglikelihood_rolling(requests, disable_tqdm=True)
    assert [s.total for s in ours] == pytest.approx(theirs, rel=FLOAT32_RTOL, abs=TOLERANCE)
    assert [s.unknown_words for s in ours] == [0, 0]  # the added BOS (also the unknown token) is no word's piece
    (minicons,) = hf.load(str(folder)).score_texts(texts[:1])  # BOS once, as minicons is used with such tokenizers
    assert abs(minicons.total - ours[0].total) > TOLERANCE
