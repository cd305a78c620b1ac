"""The comparison table: every model of an experiment x the metrics that compare across families.

``synbench reproduce compare`` trains every family on the same sentences and scores them on the same items;
this table sets their numbers side by side, one row per model, each cell the mean ± sd over seeds with its
percentile bootstrap CI (``statistics.summarize``):

- perplexity in one normalisation for all: ``ppl``, per word with the end of the sentence in log p (TG §3.1;
  every family's ``eval ppl`` writes it), exact or an upper bound as the run's scorer recorded
  (``scorer_convention.bound`` of ``eval/ppl/results.json``), beside ``ppl_end_counted`` (the end of sentence
  counted as a word too: Kim et al. 2019's, the convention of SOM's and PaLM's tables) and the family's own
  validation perplexity at the end of training (``val_word_ppl``, else ``val_token_ppl`` or ``val_ppl``) with the
  convention its ``DONE`` states;
- where a model was also scored with its gold trees (the evaluation labelled ``gold-tree``, ``ppl@gold-tree``),
  that value and the bound's distance to it, per seed (``ppl_gold_gap = ppl - ppl@gold-tree``), and that value
  in its two parts: the words' perplexity given the gold tree and the tree's own cost, -log p(y | ...) of its
  structure tokens in nats per word (``exp`` of the second times the first is the gold-tree value);
- SG, BLiMP, and the parsing metrics of the families that parse (bracket F1, reranking F1, UAS,
  unsupervised F1);
- the cost: parameters, training tokens per second, training wall-clock and the device (``training_cost``).

Nothing here names a family: the rows are the experiment's models, the columns whatever metrics they have.
Written to ``analysis/comparison.csv`` (long: model, family, metric, n, mean, sd, ci_low, ci_high, detail), the
values as measured (SG and BLiMP as fractions; the report shows them in percent).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from analysis.eval_results import result_folders
from experiments.evaluate import tasks

COMPARISON_FILE = "comparison.csv"
COLUMNS = ("model", "family", "metric", "n", "mean", "sd", "ci_low", "ci_high", "detail")
COMMON_PPL = "ppl"
GOLD_LABEL = "gold-tree"  # the label of the evaluation that scores a model with the gold trees
GOLD_PPL = tasks.labelled(COMMON_PPL, GOLD_LABEL)
GOLD_GAP = "ppl_gold_gap"
# log p(x, y_gold) in two parts (``eval ppl --method gold``): the words given the tree, the tree's structure
GOLD_WORDS = tasks.labelled("ppl_words_given_tree", GOLD_LABEL)
GOLD_STRUCTURE = tasks.labelled("structure_nll_per_word", GOLD_LABEL)
OWN_PPL = ("val_word_ppl", "val_token_ppl", "val_ppl")  # the family's own validation perplexity: the first found
# (metric, title) in the table's order; a column is shown when some model has the metric
METRICS = (
    (COMMON_PPL, "PPL (per word, end of sentence in log p)"),
    ("ppl_end_counted", "PPL (end of sentence counted)"),
    ("own_ppl", "own validation PPL"),
    (GOLD_PPL, "PPL with gold trees"),
    (GOLD_GAP, "PPL − gold-tree PPL"),
    (GOLD_WORDS, "gold-tree PPL of the words given the tree"),
    (GOLD_STRUCTURE, "gold tree's structure (nats per word)"),
    ("sg", "SG (%)"),
    ("sg.all_34", "SG, all 34 suites (%)"),
    ("blimp", "BLiMP (%)"),
    ("parse_f1", "parse F1"),
    ("f1", "reranking F1"),
    ("uas_rerank", "UAS (reranking)"),
    ("uas", "UAS"),
    ("unsupervised_f1", "unsupervised F1"),
    ("parameters", "parameters"),
    ("train_tokens_per_s", "training tokens/s"),
    ("train_seconds", "training wall-clock (s)"),
)
TITLES = dict(METRICS)


def comparison_table(long: Any, wide: Any, run_dirs: dict[str, Path]) -> Any:
    """The comparison rows of the DONE runs in ``long`` (``aggregate``'s tidy table) and ``wide`` (its per-run
    table, for the text fields: conventions, device); ``run_dirs``: run id -> folder (for the scorers'
    exact/bound record)."""
    import pandas as pd

    from analysis import statistics

    runs = long[["run_id", "model", "family", "seed"]].drop_duplicates("run_id")
    values = long.pivot_table(index="run_id", columns="metric", values="value", aggfunc="first")
    derived = []
    for run in runs.itertuples(index=False):
        row = values.loc[run.run_id] if run.run_id in values.index else pd.Series(dtype=float)
        own = next((name for name in OWN_PPL if pd.notna(row.get(name))), None)
        if own is not None:
            derived.append((run, "own_ppl", float(row[own])))
        if pd.notna(row.get(COMMON_PPL)) and pd.notna(row.get(GOLD_PPL)):
            derived.append((run, GOLD_GAP, float(row[COMMON_PPL] - row[GOLD_PPL])))
    extra = pd.DataFrame([{"run_id": r.run_id, "model": r.model, "family": r.family, "seed": r.seed,
                           "metric": m, "value": v} for r, m, v in derived])
    table = pd.concat([long[["run_id", "model", "family", "seed", "metric", "value"]], extra], ignore_index=True)
    wanted = [m for m, _ in METRICS if (table["metric"] == m).any()]
    if not wanted:
        return pd.DataFrame(columns=list(COLUMNS))
    summary = statistics.summarize(table[table["metric"].isin(wanted)], wanted)
    families = dict(zip(runs["model"], runs["family"], strict=False))
    details = _details(runs, wide, run_dirs)
    summary["family"] = summary["model"].map(families)
    summary["detail"] = [details.get((m, metric), "") for m, metric in zip(summary["model"], summary["metric"],
                                                                            strict=True)]
    return summary[list(COLUMNS)]


def _details(runs: Any, wide: Any, run_dirs: dict[str, Path]) -> dict[tuple[str, str], str]:
    """(model, metric) -> the words beside its number: how its perplexity was scored (exact or an upper
    bound, and by what), the convention of its own perplexity, the device it trained on."""
    found: dict[tuple[str, str], set[str]] = {}
    records = wide.set_index("run_id") if "run_id" in wide.columns else None
    for run in runs.itertuples(index=False):
        record = records.loc[run.run_id] if records is not None and run.run_id in records.index else {}
        texts = {COMMON_PPL: _ppl_scoring(run_dirs.get(run.run_id)), "own_ppl": _own_convention(record),
                 "train_seconds": f"device: {record['device']}" if isinstance(record.get("device"), str) else None}
        for metric, text in texts.items():
            if text:
                found.setdefault((run.model, metric), set()).add(text)
    return {key: "; ".join(sorted(texts)) for key, texts in found.items()}


def _own_convention(record: Any) -> str | None:
    """``NAME: CONVENTION`` of the first of ``OWN_PPL`` the run's ``DONE`` has (its name alone without one)."""
    for name in OWN_PPL:
        convention = record.get(f"{name}_convention")
        if isinstance(convention, str) and convention:
            return f"{name}: {convention}"
        value = record.get(name)
        if isinstance(value, float) and value == value:  # not NaN: the run has it, with no stated convention
            return name
    return None


def _ppl_scoring(run_dir: Path | None) -> str | None:
    """``exact`` or ``upper bound`` with the scoring method's description, from the run's perplexity result."""
    if run_dir is None:
        return None
    folder = result_folders(run_dir)[0].get(COMMON_PPL)
    if folder is None:
        return None
    try:
        settings = json.loads((folder / "results.json").read_text(encoding="utf-8")).get("settings", {})
    except (AttributeError, OSError, ValueError):  # unreadable, or not a JSON object
        return None
    convention = settings.get("scorer_convention") or {}
    kind = "upper bound" if convention.get("bound") else "exact"
    method = settings.get("description") or settings.get("method")
    return f"{kind} ({method})" if method and method != kind else kind
