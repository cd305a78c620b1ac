"""``synbench analyze EXPERIMENT``: every analysis of an experiment, from its run folders to ``analysis/``.

In order: the aggregate tables (``aggregate.py``); seed statistics and pairwise Welch tests
(``statistics.py``) and the papers' claimed directions checked on them (``claims.py``); item- vs seed-level
variance of SG and BLiMP; the TG §4.2 regressions on the runs' per-terminal log-probabilities
(``regressions.py``; inputs from ``synbench eval terminals``); MDL probing (``probing.py``) of one seed per
model; the figures (``figures.py``); the comparison table across models and its figures (``comparison.py``,
``comparison_figures.py``); and ``settings.json``, which names the scale and every setting that differs from
the full-protocol spec the experiment scales down (``compare_to``), and the proposal sets' quality (the
parser's 1-best and oracle F1, ``proposal_sets``) and the models that did not converge (``not_converged``,
``analysis.convergence``). Each output file is written atomically; a section whose
inputs are missing is skipped with its reason in ``settings.json["skipped"]``, which the report shows.

Units: the CSV and JSON files keep every value as measured, for programs to read: SG, BLiMP and their
breakdowns (``sg``, ``sg.*``, ``blimp``, ``blimp.*``) as fractions in [0, 1] (``summary.csv``'s mean, sd, sem,
ci_low, ci_high, min, max; ``welch.csv``'s mean_a, mean_b, diff; ``comparison.csv``; ``variance.csv``;
``claims.csv``'s mean_better and mean_worse, whereas its published_better and published_worse are the paper's
numbers in the paper's units, percent), perplexities as they are. The report and ``synbench leaderboard``, for
people to read, show SG and BLiMP in percent everywhere (``experiments.papers.percent_scale``).

The spec's ``analysis:`` section::

    analysis:
      correction: holm                                # multiple-comparison correction of the Welch tests
      regressions:
        frequency: {a: MODEL_A, b: MODEL_B}           # Δ = log p_a − log p_b, each an ensemble over seeds
        copying: {a: DOC_MODEL_A, b: DOC_MODEL_B}     # document-level models
      probing: {models: [MODEL_A, MODEL_B], seed: 0, train_sentences: 500, dev_sentences: 200,
                layers: [1, 2, 3, 4], probes: [linear, mlp], tasks: [...], top_k: 19, word_content_k: 100,
                max_epochs: 40, batch_size: 20}
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from experiments.evaluate import tasks
from experiments.experiment_runs import analysis_run_id, experiment_dir, experiment_runs, folder_of
from experiments.experiment_spec import ExperimentSpec, Run
from experiments.reductions import reduced_settings
from experiments.runs import run_status
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.errors import InputError

ANALYSIS_KEYS = ("correction", "regressions", "probing", "scale")
PROBING_KEYS = ("models", "seed", "train_sentences", "dev_sentences", "layers", "probes", "tasks", "top_k",
                "word_content_k", "word_content_start", "hidden", "max_epochs", "batch_size")


@dataclass
class Analysis:
    """What ``analyze`` wrote and skipped."""

    out_dir: Path
    written: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


def analysis_options(spec: ExperimentSpec) -> dict[str, Any]:
    """The spec's ``analysis:`` section, validated."""
    options = dict(spec.analysis)
    for key in options:
        if key not in ANALYSIS_KEYS:
            raise InputError(f"analysis.{key}: unknown option (known: {', '.join(ANALYSIS_KEYS)})",
                             spec.where("analysis", key))
    labels = {m.name for m in spec.models}
    for name, pair in (options.get("regressions") or {}).items():
        if name not in ("frequency", "copying"):
            raise InputError(f"analysis.regressions.{name}: unknown regression (frequency, copying)",
                             spec.where("analysis", "regressions", name))
        if not isinstance(pair, dict) or set(pair) != {"a", "b"} or not set(pair.values()) <= labels:
            raise InputError(f"analysis.regressions.{name}: expected {{a: MODEL, b: MODEL}} with models of the spec",
                             spec.where("analysis", "regressions", name))
    probing = options.get("probing") or {}
    for key in probing:
        if key not in PROBING_KEYS:
            raise InputError(f"analysis.probing.{key}: unknown option (known: {', '.join(PROBING_KEYS)})",
                             spec.where("analysis", "probing", key))
    for label in probing.get("models", []):
        if label not in labels:
            raise InputError(f"analysis.probing.models: no model {label!r} in the spec",
                             spec.where("analysis", "probing", "models"))
    return options


def analyze(spec: ExperimentSpec, root: Path, seeds: str | None = None, data_dir: str | None = None,
            wandb: str = "offline") -> Analysis:
    """Run every analysis of ``spec`` over its runs under ``root``; outputs in ``EXPERIMENT/analysis/``.

    ``wandb`` (offline | online | disabled): the tables and figures are also logged as one W&B run
    (group = experiment, job_type = analysis, id ``analysis-EXPERIMENT``), offline by default.
    """
    from analysis.aggregate import aggregate_experiment
    from analysis.learning_curves import write_learning_curves

    options = analysis_options(spec)
    out = experiment_dir(root, spec) / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    result = Analysis(out)
    agg = aggregate_experiment(spec, root, seeds)
    runs = [r for r in experiment_runs(spec, seeds)
            if run_status(folder_of(root, r), r.run_id, r.seed).state == "DONE"]

    _statistics(agg, options, result, _paper_key(spec))
    _regressions(options, runs, root, result)
    _probing(options, runs, root, data_dir, result)
    _figures(agg, result)
    _comparison(agg, runs, root, result)
    result.written += [str(p.relative_to(out)) for p in write_learning_curves(agg.steps, out)]  # kept checkpoints
    settings = {
        "experiment": spec.name,
        "description": spec.description,
        "scale": options.get("scale") or spec.name.rsplit("-", 1)[-1],
        "seeds": sorted({r.seed for r in runs if r.model in _lm_labels(spec)}),
        "models": {m.name: {"family": m.family, "level": _level(runs, m.name)} for m in spec.models},
        "runs": {"done": agg.summary["done"], "total": agg.summary["runs"],
                 "failed": [f["run_id"] for f in agg.summary["failed"]], "missing": agg.summary["missing"]},
        "data": sorted({r.data or str(r.config["data"]["corpus"]) for r in runs  # spec data, else the corpora
                        if r.data or r.config.get("data", {}).get("corpus")}),
        "evaluations": [dict(e) for e in spec.evaluations],
        "reduced": reduced_settings(spec, seeds),
        "skipped": result.skipped,
        "notes": agg.summary.get("notes", []),
        "proposals": proposal_sets(experiment_dir(root, spec) / "proposals"),
        "scoring": agg.summary.get("scoring", {}),
        "not_converged": _not_converged(agg.long),
        "created": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    if wandb != "disabled":
        _log_to_wandb(spec, result, settings, wandb)
    atomic_write_text(out / "settings.json", json.dumps(settings, indent=1, default=str) + "\n")
    result.written.append("settings.json")
    return result


def proposal_sets(folder: Path) -> list[dict[str, Any]]:
    """The metadata ``synbench propose`` wrote beside each proposal set under ``folder`` (PARSER_RUN/SET.jsonl
    -> SET.meta.json): the parser run, the set, N and, where the set has gold trees, the parser's 1-best and
    oracle F1 — how far a bound over those proposals can be from the marginal. Unreadable files are listed
    with the reason."""
    sets = []
    for path in sorted(folder.glob("*/*.meta.json")) if folder.is_dir() else []:
        entry: dict[str, Any] = {"parser_run": path.parent.name, "set": path.name.removesuffix(".meta.json")}
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
        except (OSError, UnicodeDecodeError, ValueError) as error:
            entry["problem"] = f"{path.name}: {error}"
        else:
            entry.update({k: meta[k] for k in ("n", "method", "sentences", "trees", "one_best_f1", "oracle_f1")
                          if k in meta})
        sets.append(entry)
    return sets


def _log_to_wandb(spec: ExperimentSpec, result: Analysis, settings: dict[str, Any], mode: str) -> None:
    """The analysis tables (as W&B tables) and figures of this analysis, in one run that is resumed each time."""
    import os

    import pandas as pd
    import wandb

    if mode not in ("offline", "online"):
        raise InputError(f"expected offline, online or disabled, not {mode!r}", "--wandb")
    os.environ.setdefault("WANDB_X_DISABLE_STATS", "true")
    os.environ.setdefault("WANDB_SILENT", "true")
    run = wandb.init(project="synbench", group=spec.name, job_type="analysis", id=analysis_run_id(spec.name),
                     name=analysis_run_id(spec.name), dir=str(result.out_dir), mode=mode, resume="allow",
                     config={"experiment": spec.name, "scale": settings["scale"], "seeds": settings["seeds"],
                             "reduced": settings["reduced"]})
    try:
        for name in ("summary", "welch", "claims", "variance", "mdl"):
            path = result.out_dir / f"{name}.csv"
            if path.is_file():
                run.log({name: wandb.Table(dataframe=pd.read_csv(path))})
        regressions = result.out_dir / "regressions.json"
        if regressions.is_file():
            for reg, fit in json.loads(regressions.read_text(encoding="utf-8")).items():
                if "adj_r2" in fit:
                    run.summary[f"{reg}/adj_r2"] = fit["adj_r2"]
                    for c in fit["coefficients"]:
                        run.summary[f"{reg}/{c['name']}"] = c["coef"]
        for png in sorted((result.out_dir / "figures").glob("*.png")):
            run.log({f"figures/{png.stem}": wandb.Image(str(png))})
    finally:
        run.finish()


def _not_converged(long: Any) -> dict[str, str]:
    """The models (tools of the protocol aside) that did worse than a uniform guess (``analysis.convergence``)."""
    from analysis.convergence import not_converged

    if long.empty:
        return {}
    return not_converged(long[~long["family"].map(_is_tool).astype(bool)])


def _lm_labels(spec: ExperimentSpec) -> set[str]:
    return {m.name for m in spec.models if not _is_tool(m.family)}


def _is_tool(family: str) -> bool:
    """A component of the protocol (e.g. the proposal parser), not a model under evaluation."""
    from experiments.families import get_family

    return get_family(family).kind() == "tool"


def _level(runs: list[Run], label: str) -> str | None:
    run = next((r for r in runs if r.model == label), None)
    return run.config["data"].get("level", "sentence") if run and "data" in run.config else None


# -- statistics ----------------------------------------------------------------------------------------------
def _paper_key(spec: ExperimentSpec) -> str | None:
    """The key of the paper whose tables describe the spec's models (``experiments.papers.paper_for``)."""
    from experiments.papers import paper_for

    paper = paper_for(m.family for m in spec.models if not _is_tool(m.family))
    return None if paper is None else paper.key


def _statistics(agg: Any, options: dict[str, Any], result: Analysis, paper: str | None) -> None:
    from analysis import claims, statistics

    long = agg.long[~agg.long["family"].map(_is_tool).astype(bool)]  # tools of the protocol are not models
    if long.empty:
        result.skipped["statistics"] = "no finished run has metrics"
        return
    metrics = [m for m in long["metric"].unique() if tasks.is_summarized(m)]
    summary = statistics.summarize(long, metrics)
    _write_csv(result, "summary.csv", summary)
    tested = [m for m in metrics if tasks.is_tested(m)]
    welch = statistics.pairwise_welch(long, tested, correction=options.get("correction", "holm"),
                                      evaluated_on=agg.summary.get("evaluated_on"))
    _write_csv(result, "welch.csv", welch)
    checked = claims.check_claims(welch, long, paper, correction=options.get("correction", "holm"))
    if not checked.empty:  # the claims of its paper, and the other papers' whose models this experiment has
        _write_csv(result, claims.CLAIMS_FILE, checked)
    if not agg.items.empty:
        _write_csv(result, "variance.csv", statistics.variance_components(agg.items))
    else:
        result.skipped["variance"] = "no item-level SyntaxGym/BLiMP results"


def _write_csv(result: Analysis, name: str, table: Any) -> None:
    atomic_write_text(result.out_dir / name, table.to_csv(index=False))
    result.written.append(name)


# -- regressions ---------------------------------------------------------------------------------------------
@dataclass
class TerminalTable:
    """Per-terminal log-probs of one model's seeds over one split, aligned token by token."""

    label: str
    logprobs: Any  # [n_seeds, n_terminals] float64
    units: list[str]
    train_counts: list[int]
    train_total: int
    documents: list[list[list[str]]]  # per item: sentences of units (for the copying indicators)
    seeds: list[int]


def read_terminals(label: str, runs: list[Run], root: Path) -> TerminalTable:
    """``eval terminals`` results of every DONE seed of ``label``; they must cover the same terminals."""
    import numpy as np

    rows, units, counts, total, documents, seeds = [], None, None, None, None, []
    for run in (r for r in runs if r.model == label):
        folder = folder_of(root, run) / "eval" / "terminals"
        try:
            record = json.loads((folder / "results.json").read_text(encoding="utf-8"))
            items = [json.loads(line) for line in (folder / "items.jsonl").read_text(encoding="utf-8").splitlines()]
        except (OSError, ValueError):
            continue
        unit_key = "word" if record["metrics"]["unit"] == "word" else "token"
        these = [u for it in items for u in it[unit_key]]
        if units is None:
            units, total = these, int(record["metrics"]["train_units"])
            counts = [c for it in items for c in it["train_count"]]
            documents = []
            for it in items:
                sentences: list[list[str]] = [[] for _ in range(max(it["sentence"], default=-1) + 1)]
                for u, s in zip(it[unit_key], it["sentence"]):
                    sentences[s].append(u)
                documents.append(sentences)
        elif these != units:
            raise InputError(f"model {label!r} seed {run.seed}: its terminals differ from seed {seeds[0]}'s "
                             "(same split and vocabulary expected)", str(folder))
        rows.append([x for it in items for x in it["logprob"]])
        seeds.append(run.seed)
    if not rows:
        raise InputError(f"model {label!r} has no `eval terminals` results")
    return TerminalTable(label, np.asarray(rows, dtype=np.float64), units, counts, total, documents, seeds)


def _regressions(options: dict[str, Any], runs: list[Run], root: Path, result: Analysis) -> None:
    from analysis import regressions

    specs = options.get("regressions") or {}
    if not specs:
        result.skipped["regressions"] = "no regressions in the spec's analysis section"
        return
    out: dict[str, Any] = {}
    for name, pair in specs.items():
        try:
            a, b = read_terminals(pair["a"], runs, root), read_terminals(pair["b"], runs, root)
        except InputError as e:
            out[name] = {"skipped": str(e)}
            continue
        if a.units != b.units:
            out[name] = {"skipped": f"{pair['a']} and {pair['b']} were scored on different terminals"}
            continue
        delta = regressions.ensemble_logprob(a.logprobs) - regressions.ensemble_logprob(b.logprobs)
        if name == "frequency":
            counts = dict(zip(a.units, a.train_counts))
            counts = {u: c for u, c in counts.items() if c > 0}
            indicators = regressions.frequency_indicators(a.units, counts, total=a.train_total)
        else:
            indicators = regressions.copying_indicators(a.documents)
        try:
            fit = regressions.fit_indicator_ols(
                delta, indicators, name, models=(a.label, b.label), ensemble=(len(a.seeds), len(b.seeds)),
                data=f"{len(a.units)} terminals in {len(a.documents)} sequences")
        except InputError as e:
            out[name] = {"skipped": str(e)}
            continue
        out[name] = fit.to_dict()
    atomic_write_text(result.out_dir / "regressions.json", json.dumps(out, indent=1, default=_json_default) + "\n")
    result.written.append("regressions.json")


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if hasattr(value, "item"):
        return value.item()
    return str(value)


# -- probing -------------------------------------------------------------------------------------------------
def _probing(options: dict[str, Any], runs: list[Run], root: Path, data_dir: str | None, result: Analysis) -> None:
    probing = options.get("probing")
    if not probing:
        result.skipped["probing"] = "no probing in the spec's analysis section"
        return
    from analysis.probes import ProbeSettings
    from analysis.probing import PROBE_KINDS, TASKS, run_probing
    from analysis.probing_tasks import TaskSettings
    from experiments.evaluate.ppl import read_sentences

    seed = int(probing.get("seed", 0))
    models = {}
    for label in probing.get("models", []):
        run = next((r for r in runs if r.model == label and r.seed == seed), None)
        if run is None:
            result.skipped[f"probing {label}"] = f"no finished run of {label} with seed {seed}"
            continue
        models[label] = folder_of(root, run) / "checkpoints" / "best.ckpt"
    if not models:
        result.skipped["probing"] = "no checkpoint to probe"
        return
    data = next(r for r in runs if r.model in models).config["data"]  # the probed models' own splits
    train = read_sentences(data["corpus"], data["train_split"], probing.get("train_sentences"), data_dir,
                           trees=True).trees
    dev = read_sentences(data["corpus"], data["valid_split"], probing.get("dev_sentences"), data_dir, trees=True).trees
    task_settings = TaskSettings(**{k: probing[k] for k in ("top_k", "word_content_k", "word_content_start")
                                    if k in probing})
    probe_settings = ProbeSettings(**{k: probing[k] for k in ("hidden", "max_epochs", "batch_size") if k in probing})
    table = run_probing(models, train, dev, tasks=probing.get("tasks") or TASKS, layers=probing.get("layers"),
                        probes=tuple(probing.get("probes") or PROBE_KINDS), task_settings=task_settings,
                        probe_settings=probe_settings, cache_dir=result.out_dir / "features", seed=seed)
    _write_csv(result, "mdl.csv", table)


# -- figures -------------------------------------------------------------------------------------------------
def _figures(agg: Any, result: Analysis) -> None:
    import pandas as pd

    from analysis import figures

    mdl = result.out_dir / "mdl.csv"
    regressions = result.out_dir / "regressions.json"
    drawn = figures.write_figures(
        result.out_dir / "figures",
        long=None if agg.long.empty else agg.long,
        mdl=pd.read_csv(mdl) if mdl.is_file() else None,
        regressions=json.loads(regressions.read_text(encoding="utf-8")) if regressions.is_file() else None,
    )
    result.written += [str(p.relative_to(result.out_dir)) for p in drawn.paths]


# -- comparison across models --------------------------------------------------------------------------------
def _comparison(agg: Any, runs: list[Run], root: Path, result: Analysis) -> None:
    """``comparison.csv`` (every model x the metrics that compare across families) and its figures; the
    figures' notes (what was not drawn and why) go to ``skipped["figures"]``."""
    from analysis.comparison import COMPARISON_FILE, comparison_table
    from analysis.comparison_figures import write_comparison_figures

    long = agg.long[~agg.long["family"].map(_is_tool).astype(bool)] if not agg.long.empty else agg.long
    if long.empty:
        result.skipped["comparison"] = "no finished run has metrics"
        return
    _write_csv(result, COMPARISON_FILE, comparison_table(long, agg.wide, {r.run_id: folder_of(root, r) for r in runs}))
    drawn = write_comparison_figures(long, result.out_dir / "figures")
    result.written += [str(p.relative_to(result.out_dir)) for p in drawn.paths]
    if drawn.notes:
        result.skipped["figures"] = "; ".join(drawn.notes)
