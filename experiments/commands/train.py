"""``synbench train FAMILY [key=value ...] --seed N``: train one run into its run folder; ``--seeds A-B``: train
the seeds of one config in one process (a seed group, ``experiments.seed_group``), each into its own run folder."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from experiments.cli_options import natural


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "train", help="train one model (family × preset × overrides × seed)",
        description="Train one run. The run folder (default runs/train/RUN_ID) holds the config, checkpoints "
                    "(best by validation loss, and last), CSV and W&B-offline logs and the final metrics (DONE). "
                    "Running the same command again resumes from the last checkpoint; a finished run is not "
                    "trained again.",
    )
    from experiments.families import names

    p.add_argument("family", help=" | ".join(names()))
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="config overrides, e.g. train.max_steps=500 model.d_model=256 data.tree_transform=left")
    p.add_argument("--preset", default="cpu-small", help="cpu-small (default) | ptb | bllip")
    seeds = p.add_mutually_exclusive_group()
    seeds.add_argument("--seed", type=natural, default=0)
    seeds.add_argument("--seeds", metavar="A-B",
                       help="several seeds (e.g. 0-7 or 0,3,5) trained in one process with their parameters "
                            "stacked (a seed group); each seed writes its own run folder RUNS/train/RUN_ID")
    p.add_argument("--run-dir", type=Path, help="run folder (default: RUNS/train/RUN_ID; one seed only)")
    p.add_argument("--runs-dir", type=Path, help="parent of run folders (default: $SYNBENCH_RUNS or ./runs)")
    p.add_argument("--group-dir", type=Path, metavar="DIR",
                   help="--seeds: each seed's run folder is DIR/RUN_ID (an experiment's folder, as `submit` "
                        "passes it) instead of RUNS/train/RUN_ID")
    p.add_argument("--print-config", action="store_true", help="print the resolved config and run id, then exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import os

    from experiments.config import resolve_train_config, run_id

    cfg = resolve_train_config(args.family, args.preset, args.overrides)
    if args.seeds is not None:
        return _run_group(args, cfg)
    rid = run_id(cfg, args.seed)
    if args.print_config:
        print(json.dumps({"run_id": rid, "seed": args.seed, **cfg}, indent=2))
        return 0
    runs = args.runs_dir or Path(os.environ.get("SYNBENCH_RUNS", "runs"))
    run_dir = args.run_dir or runs / "train" / rid

    from experiments.train import train

    metrics = train(cfg, args.seed, run_dir)
    print(json.dumps({"run_id": rid, "run_dir": str(run_dir), **metrics}, indent=2))
    return 0


def _run_group(args: argparse.Namespace, cfg: dict) -> int:
    """``--seeds``: one seed group (a single seed trains as a solo run); prints one result object per seed."""
    import os

    from experiments.config import run_id
    from experiments.experiment_spec import parse_seeds
    from experiments.seed_group import train_group
    from experiments.seed_grouping import group_config
    from experiments.train import train
    from lightning_modules.errors import InputError

    seeds = parse_seeds(args.seeds, "--seeds")
    if args.run_dir is not None and len(seeds) > 1:
        raise InputError("--run-dir names one run folder; a seed group writes one per seed (use --runs-dir)",
                         "--run-dir")
    cfg = group_config(cfg, seeds)
    ids = {seed: run_id(cfg, seed) for seed in seeds}
    if args.print_config:
        print(json.dumps({"run_ids": list(ids.values()), "seeds": list(seeds), **cfg}, indent=2))
        return 0
    runs = args.runs_dir or Path(os.environ.get("SYNBENCH_RUNS", "runs"))
    parent = args.group_dir or runs / "train"
    dirs = {seed: args.run_dir or parent / rid for seed, rid in ids.items()}
    if len(seeds) == 1:
        results = {seeds[0]: train(cfg, seeds[0], dirs[seeds[0]])}
    else:
        results = train_group(cfg, list(seeds), [dirs[s] for s in seeds])
    for seed in seeds:
        state = results.get(seed) or {"failed": (dirs[seed] / "FAILED").read_text().strip()}
        print(json.dumps({"run_id": ids[seed], "run_dir": str(dirs[seed]), **state}))
    return 0 if len(results) == len(seeds) else 1
