"""``synbench eval ppl|sg|blimp hf:DIR``: a local transformers causal LM through the evaluators, end to end.

The per-sentence log-probabilities written by the evaluators equal a direct ``transformers`` computation
(BOS + the raw text's pieces), whatever the batch size; bad sources are one error line and exit status 2.
"""

from __future__ import annotations

import json

import pytest
import torch

from experiments.cli import main
from experiments.evaluate.scorer import text_of_words
from tests.experiments.evaluate.test_hf_scorer import build_tiny_gpt2
from tests.tolerances import close32

SUITES = "number_prep"
PARADIGMS = "anaphor_number_agreement"


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory, shared_data):
    return build_tiny_gpt2(tmp_path_factory.mktemp("gpt2"), shared_data)


def direct_logprob(folder, text: str) -> float:
    """log p(text | BOS) summed over the pieces, straight from transformers."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(folder, local_files_only=True).eval()
    ids = [tok.bos_token_id] + tok(text, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].float().log_softmax(-1)
    return float(logits[torch.arange(len(ids) - 1), torch.tensor(ids[1:])].double().sum())


def run(capsys, *argv):
    code = main(["eval", *map(str, argv)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def items(folder):
    return [json.loads(line) for line in (folder / "items.jsonl").read_text().splitlines()]


def test_ppl_equals_transformers_for_any_batch_size(capsys, gpt2, prepared_data_dir, tmp_path):
    results = {}
    for batch in (1, 7):
        out = tmp_path / f"ppl-{batch}"
        code, stdout, _ = run(capsys, "ppl", f"hf:{gpt2}", "--corpus", "ptb-sample", "--split", "test", "--limit",
                              "6", "--batch-size", batch, "--out", out, "--data-dir", prepared_data_dir, "--json")
        assert code == 0
        result = json.loads(stdout)
        assert result["settings"]["family"] == "hf"
        convention = result["settings"]["scorer_convention"]
        assert convention["bos"] == "<|endoftext|>" and convention["precision"] == "float32"
        assert convention["tokenizer"] and convention["end_of_sentence"] is False
        results[batch] = items(out)
    from experiments.evaluate.ppl import read_sentences

    sentences = read_sentences("ptb-sample", "test", 6, str(prepared_data_dir))
    for record, words in zip(results[1], sentences.words, strict=True):
        assert record["logprob"] == close32(direct_logprob(gpt2, text_of_words(words).text))
    for a, b in zip(results[1], results[7], strict=True):
        assert a["logprob"] == close32(b["logprob"])


def test_sg_and_blimp_read_the_raw_text(capsys, gpt2, prepared_data_dir, tmp_path):
    code, stdout, _ = run(capsys, "sg", f"hf:{gpt2}", "--suites", SUITES, "--items-per-suite", "2", "--out",
                          tmp_path / "sg", "--data-dir", prepared_data_dir, "--json")
    assert code == 0 and json.loads(stdout)["suites"][SUITES]["items"]
    from experiments.evaluate.sg import condition_text, default_suites_dir, load_suites

    suite = load_suites(default_suites_dir(str(prepared_data_dir)))[SUITES]
    item = suite.items[0]
    surprisals = [json.loads(line) for line in (tmp_path / "sg" / "surprisals.jsonl").read_text().splitlines()]
    for condition in suite.conditions:
        text, _ = condition_text(item.conditions[condition])
        bits = sum(s["surprisal"] for s in surprisals if s["item"] == item.number and s["condition"] == condition)
        assert bits == pytest.approx(-direct_logprob(gpt2, text) / 0.6931471805599453, abs=1e-4)
    code, stdout, _ = run(capsys, "blimp", f"hf:{gpt2}", "--paradigms", PARADIGMS, "--pairs-per-paradigm", "3",
                          "--out", tmp_path / "blimp", "--data-dir", prepared_data_dir, "--json")
    assert code == 0
    from experiments.evaluate.blimp import load_paradigms
    from experiments.evaluate.blimp_eval import default_data_dir

    pairs = load_paradigms(default_data_dir(str(prepared_data_dir)), 3)[PARADIGMS]
    for record, pair in zip(items(tmp_path / "blimp"), pairs, strict=True):
        assert record["logprob_good"] == close32(direct_logprob(gpt2, pair.good))
        assert record["logprob_bad"] == close32(direct_logprob(gpt2, pair.bad))


def test_bad_sources_are_one_error_line(capsys, gpt2, tmp_path, prepared_data_dir):
    no_tokenizer = tmp_path / "no-tokenizer"
    no_tokenizer.mkdir()
    (no_tokenizer / "config.json").write_text((gpt2 / "config.json").read_text())
    cases = [(tmp_path / "missing", "not found"), (tmp_path, "config.json"), (no_tokenizer, "tokenizer")]
    for folder, expected in cases:
        code, out, err = run(capsys, "ppl", f"hf:{folder}", "--corpus", "ptb-sample", "--data-dir", prepared_data_dir)
        assert code == 2 and not out and err.startswith("synbench: error: ") and err.count("\n") == 1, err
        assert err.startswith(f"synbench: error: {folder}") and expected in err, err
    code, _, err = run(capsys, "ppl", f"hf:{gpt2}", "--method", "beam", "--data-dir", prepared_data_dir)
    assert code == 2 and "string model" in err
