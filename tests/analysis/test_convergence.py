"""Which models did not converge (``analysis.convergence``): a seed whose validation perplexity per token is above
its vocabulary size marks its model; a run recording neither number is not judged."""

from __future__ import annotations

import pandas as pd

from analysis.convergence import not_converged


def _long(runs: dict[tuple[str, int], dict[str, float]]) -> pd.DataFrame:
    return pd.DataFrame([{"run_id": f"{model}-s{seed}", "model": model, "seed": seed, "metric": metric, "value": value}
                         for (model, seed), metrics in runs.items() for metric, value in metrics.items()])


def test_a_seed_worse_than_a_uniform_guess_marks_its_model() -> None:
    long = _long({
        ("strings", 0): {"val_token_ppl": 6307.3, "vocab_size": 5340.0, "sg": 0.3},  # worse than uniform
        ("strings", 1): {"val_token_ppl": 5000.0, "vocab_size": 5340.0},
        ("joint", 0): {"val_token_ppl": 2537.0, "vocab_size": 5392.0, "val_ppl": 9000.0},  # the token one counts
        ("rnn", 0): {"val_ppl": 9500.0, "vocab_size": 9335.0},  # no per-token: its val_ppl is per token
        ("rnn", 1): {"val_ppl": 8000.0, "vocab_size": 9335.0},
        ("pretrained", 0): {"ppl": 1e9},  # no validation run, no vocabulary: not judged
    })
    assert not_converged(long) == {
        "strings": "validation perplexity per token above the vocabulary size (seed 0: 6307 > 5340)",
        "rnn": "validation perplexity per token above the vocabulary size (seed 0: 9500 > 9335)"}
    assert not_converged(_long({("ok", 0): {"val_token_ppl": 70.0, "vocab_size": 10000.0}})) == {}
