"""Which models did not converge: runs that predict their own validation tokens worse than a uniform guess.

A run whose validation perplexity per token (``val_token_ppl``, else ``val_ppl``: the first its ``DONE``
records, over the tokens of its own vocabulary) is above its vocabulary size (``vocab_size``) does worse than
the uniform distribution over that vocabulary, whatever its family: it diverged, or was stopped long before
it learned anything. Any such seed marks its model; ``analyze`` writes the result to
``settings.json["not_converged"]`` and the report marks the model's row (``analysis.report.marks``). A run
that records neither number is not judged.
"""

from __future__ import annotations

from typing import Any

TOKEN_PPL = ("val_token_ppl", "val_ppl")  # the run's validation perplexity per token: the first recorded
VOCABULARY = "vocab_size"


def not_converged(long: Any) -> dict[str, str]:
    """Model -> why it did not converge (its seeds worse than uniform, their perplexity and vocabulary size),
    from ``long`` (``aggregate``'s tidy table: ``run_id, model, seed, metric, value``); models that did are
    absent."""
    wanted = long[long["metric"].isin((*TOKEN_PPL, VOCABULARY))]
    values = wanted.pivot_table(index=["model", "seed"], columns="metric", values="value", aggfunc="first")
    found: dict[str, list[str]] = {}
    for (model, seed), row in values.iterrows():
        ppl = next((row[name] for name in TOKEN_PPL if name in row and row[name] == row[name]), None)
        size = row.get(VOCABULARY)
        if ppl is not None and size == size and size and ppl > size:
            found.setdefault(str(model), []).append(f"seed {seed}: {ppl:.4g} > {size:.0f}")
    return {model: f"validation perplexity per token above the vocabulary size ({'; '.join(seeds)})"
            for model, seeds in found.items()}
