"""``synbench evaluate EXPERIMENT``: run the spec's ``evaluations:`` on every finished run.

First the proposal trees each evaluation needs (drawn once per sentence set by the spec's proposal parser),
then one ``synbench eval`` per (evaluation, run) into ``RUN/eval/NAME`` (with ``--checkpoints all`` also per
checkpoint kept over training, ``train.keep_every``, into ``RUN/steps/step-NNNNNN/eval/NAME``), on the chosen
executor. Finished evaluations are skipped, interrupted ones resume from their item cache. ``synbench
aggregate`` and ``synbench analyze`` read the results.
"""

from __future__ import annotations

import argparse
import sys

from experiments.cli_options import add_device_argument, checked_device, positive_int
from experiments.commands import add_experiment_arguments
from experiments.evaluate import inference_dtype
from experiments.evaluate.scorers.stacked import MODES
from experiments.runs import EVALUATED_CHECKPOINTS


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("evaluate", help="run an experiment's evaluations on its finished runs", description=__doc__)
    add_experiment_arguments(p)
    p.add_argument("--executor", default="local", choices=("local", "slurm", "submitit"))
    add_device_argument(p)
    p.add_argument("--seeds-per-process", type=positive_int, default=None, metavar="S",
                   help="evaluate S seeds of a config in one process, all their evaluations one after another "
                        "(experiments/eval_group.py; default: the spec's seeds_per_process)")
    p.add_argument("--stacked-scoring", choices=MODES, default="auto",
                   help="in a group, the seeds of one evaluation that score the same inputs (exact, gold, proposal "
                        "trees) share one vmapped forward (experiments/evaluate/scorers/stacked.py); auto: on "
                        "CUDA only (default)")
    inference_dtype.add_plan_argument(p)
    p.add_argument("--checkpoints", choices=EVALUATED_CHECKPOINTS, default="best",
                   help="best: each run's best.ckpt (default); all: also every checkpoint it kept over training "
                        "(train.keep_every), into RUN/steps/step-NNNNNN/eval, which the report draws against the step")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from experiments.experiment_spec import load_spec
    from experiments.reproduce import evaluate_stage
    from experiments.runs import runs_root

    checked_device(args.device)  # before any stage: every eval would fail on it
    spec = load_spec(args.experiment)
    failed = evaluate_stage(spec, runs_root(args.runs_dir), args.seeds, args.executor, args.data_dir,
                            device=args.device, seeds_per_process=args.seeds_per_process,
                            stacked_scoring=args.stacked_scoring, checkpoints=args.checkpoints,
                            inference_dtype=args.inference_dtype)
    for stage, keys in failed.items():
        if keys:
            print(f"synbench: {stage}: {len(keys)} task(s) failed: {', '.join(keys)}", file=sys.stderr)
    return 1 if any(failed.values()) else 0
