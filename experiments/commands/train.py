"""``synbench train FAMILY [key=value ...] --seed N``: train one run into its run folder."""

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
    p.add_argument("--seed", type=natural, default=0)
    p.add_argument("--run-dir", type=Path, help="run folder (default: RUNS/train/RUN_ID)")
    p.add_argument("--runs-dir", type=Path, help="parent of run folders (default: $SYNBENCH_RUNS or ./runs)")
    p.add_argument("--print-config", action="store_true", help="print the resolved config and run id, then exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import os

    from experiments.config import resolve_train_config, run_id

    cfg = resolve_train_config(args.family, args.preset, args.overrides)
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
