"""``synbench reproduce PAPER --scale S``: a paper's whole pipeline as one resumable command.

A reproduction is the experiment spec that the paper's registry entry (``experiments.papers``) names for the
scale: the models and seeds to train, the evaluations, the analyses. The stages, each skipping what is already
done, so running the command again resumes (and ``--seeds`` more adds seeds without retraining the others):

1. **train** every run (``submit``; the spec's proposal parser too);
2. **proposals**: the proposal parser draws N trees once per evaluated sentence set (shared by all runs);
3. **evaluate**: perplexity, SyntaxGym, BLiMP, parse reranking, per-terminal log-probs, per run;
4. **analyze**: aggregate, statistics, regressions, probing, figures (``synbench analyze``);
5. **report**: ``report.md`` and ``report.html``, by the report writer the caller passes in (the CLI passes
   ``analysis.report.write_report``: the stages below ``analysis`` never import it).

Stages 1-4 run on the chosen executor (``local``, ``slurm``, ``submitit``); the command waits for each and
prints where the whole reproduction stands. A stage with failures does not stop the later ones: they work
with what finished, and the report lists what is missing.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from experiments import papers
from experiments.eval_group import eval_cells, group_by_checkpoint, group_tasks
from experiments.evaluation_plan import Planner, StageTask
from experiments.experiment_runs import experiment_dir, experiment_runs, folder_of, run_statuses
from experiments.experiment_spec import ExperimentSpec, load_spec
from experiments.reductions import reduced_settings
from experiments.runs import run_status
from experiments.stages import Progress, run_stage, watch
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.errors import InputError

STAGES = ("train", "proposals", "evaluate", "analyze", "report")
# (analysis folder, output folder) -> (report.md, report.html)
ReportWriter = Callable[[Path, Path], tuple[Path, Path]]


@dataclass
class Outcome:
    """Where the reproduction ended: its report files and what failed on the way."""

    report_md: Path | None
    report_html: Path | None
    failed: dict[str, list[str]]
    elapsed_s: float


def spec_for(paper: str, scale: str) -> ExperimentSpec:
    """The experiment spec that reproduces ``paper`` at ``scale``; an unknown paper or scale is an InputError
    naming those that exist."""
    reproductions = papers.get(paper).reproductions
    if scale not in reproductions:
        known = ", ".join(reproductions) or "none"
        raise InputError(f"paper {paper!r} has no scale {scale!r} (its scales: {known})", "--scale")
    return load_spec(reproductions[scale])


def overview(spec: ExperimentSpec, seeds: str | None) -> str:
    """The plan in a few lines: models x seeds, evaluations, analyses, and what is reduced."""
    runs = experiment_runs(spec, seeds)
    per_model: dict[str, int] = {}
    for run in runs:
        per_model[run.model] = per_model.get(run.model, 0) + 1
    analyses = ["statistics", *(k for k in ("regressions", "probing") if spec.analysis.get(k))]
    lines = [f"synbench reproduce: {spec.name} — {spec.description}",
             "  train:    " + ", ".join(f"{m} x{n}" for m, n in per_model.items()) + f" ({len(runs)} runs)",
             "  evaluate: " + ", ".join(dict.fromkeys(e["name"] for e in spec.evaluations)),
             "  analyze:  " + ", ".join(analyses)]
    reduced = reduced_settings(spec, seeds)
    if reduced:
        lines.append("  reduced from the paper's protocol:")
        lines += [f"    - {line}" for line in reduced]
    return "\n".join(lines)


def evaluate_stage(spec: ExperimentSpec, root: Path, seeds: str | None, executor: str, data_dir: str | None = None,
                   poll_s: float = 5.0, device: str = "cpu", seeds_per_process: int | None = None,
                   stacked_scoring: str = "auto", checkpoints: str = "best",
                   inference_dtype: str | None = None) -> dict[str, list[str]]:
    """Stages 2 and 3 for the finished runs: proposal sets, then every evaluation (``seeds_per_process`` seeds
    of a config per process with all their evals, ``experiments.eval_group``; None: the spec's
    ``seeds_per_process``: with 1, each run's evals share one process; ``stacked_scoring``: whether a group's
    seeds score shared inputs in one vmapped forward, ``experiments.evaluate.scorers.stacked``; ``checkpoints``:
    ``best``, or ``all`` to evaluate the checkpoints kept over training too; ``inference_dtype``: that of entries
    naming none, ``experiments.evaluate.inference_dtype``); returns failed task keys."""
    exp = experiment_dir(root, spec)
    runs = experiment_runs(spec, seeds)
    done = [r for r in runs if run_status(folder_of(root, r), r.run_id, r.seed).state == "DONE"]
    planner = Planner(spec, done, root, data_dir, sys.executable, device, checkpoints, inference_dtype)
    for path, sentences in planner.sentence_files().items():
        if not path.exists():
            atomic_write_text(path, "".join(" ".join(words) + "\n" for words in sentences))
    proposal_tasks = [t for t in planner.proposal_tasks() if t.ready()]  # the parser is trained
    proposal_tasks = group_by_checkpoint(proposal_tasks, exp, sys.executable)  # a parser's sets in one process
    failed = {"proposals": [t.key for t in run_stage("proposals", proposal_tasks, executor, spec, exp, poll_s)]}
    per_process = spec.seeds_per_process if seeds_per_process is None else seeds_per_process
    evals = group_tasks(eval_cells(planner), per_process, exp, sys.executable, stacked_scoring)
    failed["evaluate"] = [t.key for t in run_stage("evaluate", evals, executor, spec, exp, poll_s)]
    return failed


def _train(spec: ExperimentSpec, root: Path, seeds: str | None, executor: str, poll_s: float) -> list[str]:
    """Stage 1: submit the runs that are not DONE and wait for all; returns the failed run ids."""
    from experiments.submit import execute, plan_submission, wait_for

    plan = plan_submission(spec, root, seeds, only_missing=True)
    progress = Progress("train", len(plan.runs))

    def check() -> tuple[int, int, int]:
        states = [s.state for s in run_statuses(plan.runs, root, quiet=True)]
        return states.count("DONE"), states.count("RUNNING"), states.count("FAILED")

    progress.update(*check())
    if plan.tasks:
        stop = threading.Event()
        watcher = watch(check, progress, stop, poll_s)
        try:
            execute(plan, executor)
            if executor != "local":  # local execution returns when the runs have ended; a scheduler's does not
                wait_for(plan, poll_s)
        finally:
            stop.set()
            watcher.join()
        progress.update(*check())
    return [s.run_id for s in run_statuses(plan.runs, root, quiet=True) if s.state != "DONE"]


def reproduce(paper: str, scale: str, root: Path, seeds: int | None = None, executor: str = "local",
              data_dir: str | None = None, poll_s: float = 5.0, stream=None, *, write_report: ReportWriter,
              device: str = "cpu", inference_dtype: str | None = None) -> Outcome:
    """Run (or resume) the reproduction of ``paper`` at ``scale``; returns the report's paths and failures."""
    return run_pipeline(spec_for(paper, scale), root, seeds, executor, data_dir, poll_s, stream,
                        write_report=write_report, device=device, inference_dtype=inference_dtype)


def run_pipeline(spec: ExperimentSpec, root: Path, seeds: int | None = None, executor: str = "local",
                 data_dir: str | None = None, poll_s: float = 5.0, stream=None, *, write_report: ReportWriter,
                 device: str = "cpu", inference_dtype: str | None = None) -> Outcome:
    """The five stages for any spec with evaluations and an analysis section; ``write_report`` renders the
    analysis folder into the experiment folder; ``device``: where the evaluations run; ``inference_dtype``: the
    scorers' where an entry names none (``evaluate_stage``)."""
    stream = stream or sys.stderr
    started = time.monotonic()
    if seeds is not None and seeds < 1:
        raise InputError("must be at least 1", "--seeds")
    seed_text = f"0-{seeds - 1}" if seeds else None
    exp = experiment_dir(root, spec)
    print(overview(spec, seed_text), file=stream, flush=True)
    failed: dict[str, list[str]] = {}

    print("[1/5] train", file=stream, flush=True)
    failed["train"] = _train(spec, root, seed_text, executor, poll_s)

    print("[2/5] proposals, [3/5] evaluate", file=stream, flush=True)
    failed.update(evaluate_stage(spec, root, seed_text, executor, data_dir, poll_s, device,
                                 inference_dtype=inference_dtype))

    print("[4/5] analyze", file=stream, flush=True)
    marker = exp / "analysis" / "settings.json"
    marker.unlink(missing_ok=True)  # the analysis always reflects the current results
    argv = (sys.executable, "-m", "experiments.cli", "analyze", str(spec.path.resolve()), "--runs-dir",
            str(Path(root).resolve()), *(("--seeds", seed_text) if seed_text else ()),
            *(("--data-dir", data_dir) if data_dir else ()))
    analyze = StageTask(f"analyze-{spec.name}", exp / "analysis", argv, marker, "analysis")
    failed["analyze"] = [t.key for t in run_stage("analyze", [analyze], executor, spec, exp, poll_s)]

    print("[5/5] report", file=stream, flush=True)
    md = html = None
    if marker.is_file():
        md, html = write_report(exp / "analysis", exp)
    elapsed = time.monotonic() - started
    print(f"synbench reproduce: finished in {elapsed / 60:.1f} min" + (f"; report: {md}" if md else ""),
          file=stream, flush=True)
    for stage, keys in failed.items():
        if keys:
            print(f"  {stage}: {len(keys)} failed ({', '.join(keys[:5])}{' ...' if len(keys) > 5 else ''}); "
                  f"logs in {exp / 'logs'}", file=stream)
    return Outcome(md, html, {k: v for k, v in failed.items() if v}, elapsed)

