"""DTG and SOM trained and scored in the papers' dependency schemes against the Collins head-rule trees.

The papers' schemes: DTG's specs read Stanford basic dependencies (``ptb-sample-sd``), SOM's read Universal
Dependencies (``ptb-sample-ud``); the Collins trees stay available as ``ptb-sample-dep``. This script measures
what the scheme changes with the normal harness: for each paper and scheme it writes a reduced copy of the
paper's ``cpu-small`` spec (``experiments/configs/experiment/reproduce-PAPER-cpu-small.yaml``) with every
dependency corpus set to the scheme's, runs ``synbench submit``, ``evaluate`` and ``aggregate`` on it, and
prints one table, scheme x metric, mean ± sd over seeds, with Welch's t-test between the two schemes.

What is kept of the cpu-small specs: the models' presets and sizes, their optimisers and batch sizes, the
proposal parser of DTG's evaluations, SG's beams (20/5, <= 11 actions, fast-track 0). What is reduced (each a
flag, printed with the table; the defaults are what fitted ~45 minutes on 2 CPU cores shared by a dozen other
jobs): the models (DTG: dtg, txl-trans, dep-parser; SOM: esom, dsom), the seeds, the training steps of every
model, the proposal trees per sentence and the test sentences of DTG's perplexity bound and UAS, SG (off by
default; ``--sg-items K`` runs it on K items per suite), and SOM's out-of-domain sets and their sentences
(SOM's OOD UF1 is the mean parse F1 against Γ over the chosen UD English test sets). BLiMP, SOM's ablations,
its gold-decision rows, Table 8's PTB trees and OOD perplexity are left out.

Scores against each scheme's own gold: DTG's UAS is against the test split of the corpus it trained on, SOM's
in-domain UF1 and p accuracy against Γ of its own scheme's trees; SOM's OOD UF1 is against Γ of the UD test
sets in both rows (the Collins row is then scored on a scheme it did not train on).

    python benchmarks/scheme_comparison.py --out /tmp/schemes            # run (resumable), then the table
    python benchmarks/scheme_comparison.py --out /tmp/schemes --table    # the table of what has finished
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from experiments.papers import percent_scale

REPO = Path(__file__).resolve().parents[1]
SPECS = REPO / "experiments" / "configs" / "experiment"
SCHEMES = {"dtg": ("sd", "collins"), "som": ("ud", "collins")}
CORPUS = {"sd": "ptb-sample-sd", "ud": "ptb-sample-ud", "collins": "ptb-sample-dep"}
MODELS = {"dtg": ("dtg", "txl-trans", "dep-parser"), "som": ("esom", "dsom")}
OOD = ("gum", "ewt", "partut", "lines", "pronouns", "pud")
REDUCTIONS_FILE = "reductions.txt"  # in --out: the reductions of the runs there
# (paper, metric in the aggregate, row label); ``ood_uf1`` is the mean of ``parse_f1@SET`` over OOD.
# Training's validation metrics (the run's DONE) come first: they exist as soon as a run has finished.
METRICS = {
    "dtg": (("val_word_ppl", "valid ppl, gold-tree bound"), ("ppl", "test ppl bound (proposals)"),
            ("uas_rerank", "test UAS (rerank)"), ("sg", "SG (%)")),
    "som": (("val_word_ppl", "valid ppl"), ("val_p_accuracy", "valid p accuracy"),
            ("val_p_prime_accuracy", "valid p' accuracy"), ("val_uf1", "valid UF1 vs Γ"),
            ("ppl", "test ppl"), ("decision_accuracy.p", "test p accuracy"), ("parse_f1", "test UF1 vs Γ"),
            ("ood_uf1", "OOD UF1")),
}


def reduced_spec(paper: str, scheme: str, args: argparse.Namespace) -> dict[str, Any]:
    """The cpu-small spec of ``paper`` cut down to ``args``' sizes, every dependency corpus the scheme's."""
    spec = yaml.safe_load((SPECS / f"reproduce-{paper}-cpu-small.yaml").read_text(encoding="utf-8"))
    corpus = CORPUS[scheme]
    models = [m for m in spec["models"] if m["name"] in MODELS[paper]]
    for model in models:
        overrides = model["overrides"]
        overrides["data"]["corpus"] = corpus
        if paper == "dtg" and model["name"] != "dep-parser":
            overrides["model"]["total_steps"] = args.dtg_steps
            overrides["train"].update(max_steps=args.dtg_steps, val_every=args.dtg_steps, ckpt_every=args.dtg_steps)
        if model["name"] == "dep-parser":
            overrides["model"]["total_steps"] = args.parser_steps
            overrides["train"].update(max_steps=args.parser_steps, val_every=args.parser_steps,
                                      ckpt_every=args.parser_steps)
        if paper == "som":
            overrides["model"].update(total_steps=args.som_steps, warmup_steps=max(1, args.som_steps // 10))
            overrides["train"].update(max_steps=args.som_steps, val_every=args.som_steps,
                                      ckpt_every=args.som_steps)
    names = {m["name"] for m in models}
    evaluations = []
    for ev in spec["evaluations"]:
        kept = [m for m in ev.get("models", sorted(names)) if m in names]
        if not kept or ev["name"] == "blimp":
            continue
        ev = {**ev, "models": kept}
        if paper == "dtg":
            if "proposals" in ev:
                ev.update(n=args.proposals)
            if "limit" in ev:
                ev.update(limit=args.limit)
            if ev["name"] == "sg":
                if not args.sg_items:
                    continue
                ev.update(items_per_suite=args.sg_items)
        else:
            if ev.get("method") == "gold" or ev["name"] == "sg" or ev.get("corpus") == "ptb-sample":
                continue  # gold-decision bound, SG and Table 8's PTB trees: not part of this comparison
            if ev.get("label") in OOD:
                if ev["name"] != "parse" or ev["label"] not in args.ood_sets:
                    continue
                ev.update(limit=args.ood_limit)
        evaluations.append(ev)
    evaluations.sort(key=lambda ev: ev["name"] == "sg")  # the slowest (beam search) last
    return {"name": f"schemes-{paper}-{scheme}",
            "description": f"dependency-scheme comparison: reproduce-{paper}-cpu-small reduced, on {corpus} "
                           f"(benchmarks/scheme_comparison.py)",
            "seeds": f"0-{args.seeds - 1}", "models": models, "evaluations": evaluations,
            "launcher": {"local": {"max_parallel": args.max_parallel}}}


def run_pipeline(spec_path: Path, runs: Path, log: Path) -> int:
    """``submit``, ``evaluate`` and ``aggregate`` of one spec (each resumable), output appended to ``log``."""
    synbench = [sys.executable, "-m", "experiments.cli"]
    with log.open("a", encoding="utf-8") as out:
        for command in ("submit", "evaluate", "aggregate"):
            rc = subprocess.call([*synbench, command, str(spec_path), "--runs-dir", str(runs)],
                                 stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
            if rc != 0:
                print(f"{spec_path.stem}: {command} exited {rc} (see {log})", file=sys.stderr)
                return rc
    return 0


def seed_values(runs: Path, paper: str, scheme: str, ood_sets: list[str]) -> dict[tuple[str, str], list[float]]:
    """{(model, metric): [value per seed]} from the aggregate of one spec (``ood_uf1``: the mean over
    ``ood_sets`` of each run)."""
    import pandas as pd

    path = runs / f"schemes-{paper}-{scheme}" / "aggregate" / "metrics_long.csv"
    if not path.is_file():
        return {}
    table = pd.read_csv(path)
    out: dict[tuple[str, str], list[float]] = {}
    for (model, _seed), rows in table.groupby(["model", "seed"]):
        values = dict(zip(rows["metric"], rows["value"]))
        ood = [values[f"parse_f1@{s}"] for s in ood_sets if f"parse_f1@{s}" in values]
        if ood and len(ood) == len(ood_sets):
            values["ood_uf1"] = sum(ood) / len(ood)
        for metric, _label in METRICS[paper]:
            if metric in values:  # SG in percent, as the report shows it
                out.setdefault((model, metric), []).append(float(values[metric]) * percent_scale(metric))
    return out


def table(runs: Path, ood_sets: list[str]) -> str:
    """Markdown table: paper, model, metric, mean ± sd per scheme, Welch's t-test p between the schemes."""
    from statistics import mean, stdev

    from scipy.stats import ttest_ind

    def cell(xs: list[float]) -> str:
        if not xs:
            return "—"
        sd = f" ± {stdev(xs):.2f}" if len(xs) > 1 else ""
        return f"{mean(xs):.2f}{sd} (n={len(xs)})"

    lines = ["| model | metric | paper's scheme | Collins | Welch p |", "|---|---|---|---|---|"]
    for paper, (ours, collins) in SCHEMES.items():
        a, b = seed_values(runs, paper, ours, ood_sets), seed_values(runs, paper, collins, ood_sets)
        for model in MODELS[paper]:
            for metric, label in METRICS[paper]:
                xs, ys = a.get((model, metric), []), b.get((model, metric), [])
                if not xs and not ys:
                    continue
                p = ttest_ind(xs, ys, equal_var=False).pvalue if len(xs) > 1 and len(ys) > 1 else float("nan")
                label = label.replace("OOD UF1", f"OOD UF1 ({', '.join(ood_sets)})")
                lines.append(f"| {model} ({ours.upper()} / Collins) | {label} | {cell(xs)} | {cell(ys)} | "
                             f"{'—' if p != p else f'{p:.3f}'} |")
    return "\n".join(lines)


def reductions(args: argparse.Namespace) -> str:
    """What the runs in ``args.out`` were reduced to: written there by the run that made them, so that
    ``--table`` (whose own reduction flags are only defaults) reports the settings the numbers come from."""
    path = args.out / REDUCTIONS_FILE
    if args.table:
        return path.read_text(encoding="utf-8").strip() if path.is_file() else \
            f"reductions vs cpu-small: unknown ({path} not found: the command that ran these specs names them)"
    text = (f"reductions vs cpu-small: seeds {args.seeds}; DTG/TXL {args.dtg_steps} steps, dep-parser "
            f"{args.parser_steps} steps, {args.proposals} proposals, {args.limit} test sentences, "
            f"SG {args.sg_items} item(s)/suite; SOM {args.som_steps} steps, OOD {args.ood_limit} sentences of "
            f"{', '.join(args.ood_sets)}")
    path.write_text(text + "\n", encoding="utf-8")
    return text


def arguments(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line: where, how many seeds, and each reduction of the cpu-small specs."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("/tmp/schemes"), help="specs, runs and logs go here")
    parser.add_argument("--papers", nargs="+", choices=tuple(SCHEMES), default=list(SCHEMES))
    parser.add_argument("--seeds", type=int, default=2, help="seeds 0..N-1 (cpu-small: 3)")
    parser.add_argument("--dtg-steps", type=int, default=80, help="DTG and TXL (trans) steps (cpu-small: 300)")
    parser.add_argument("--parser-steps", type=int, default=80, help="DTG's dep-parser steps (cpu-small: 800)")
    parser.add_argument("--proposals", type=int, default=5, help="DTG proposal trees per sentence (cpu-small: 20)")
    parser.add_argument("--limit", type=int, default=20, help="DTG test sentences for ppl/UAS (cpu-small: 100)")
    parser.add_argument("--sg-items", type=int, default=0, help="DTG SG items per suite, 0: no SG (cpu-small: 2)")
    parser.add_argument("--som-steps", type=int, default=30, help="SOM training steps (cpu-small: 250)")
    parser.add_argument("--ood-limit", type=int, default=30, help="sentences per UD test set (cpu-small: 100)")
    parser.add_argument("--ood-sets", nargs="+", choices=OOD, default=["gum", "ewt"],
                        help="UD English test sets of SOM's OOD UF1 (cpu-small: all six)")
    parser.add_argument("--parallel", type=int, default=4, help="specs run at once")
    parser.add_argument("--max-parallel", type=int, default=2, help="runs of one spec trained at once")
    parser.add_argument("--table", action="store_true", help="only print the table of what has finished")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    runs = args.out / "runs"
    if not args.table:
        (args.out / "specs").mkdir(parents=True, exist_ok=True)
        described = reductions(args)  # written first: ``--table`` reads it while the runs go on
        jobs = []
        for scheme_index in range(2):
            for paper in args.papers:
                scheme = SCHEMES[paper][scheme_index]
                path = args.out / "specs" / f"schemes-{paper}-{scheme}.yaml"
                path.write_text(yaml.safe_dump(reduced_spec(paper, scheme, args), sort_keys=False),
                                encoding="utf-8")
                jobs.append((path, args.out / f"{path.stem}.log"))
        with ThreadPoolExecutor(args.parallel) as pool:
            codes = list(pool.map(lambda job: run_pipeline(job[0], runs, job[1]), jobs))
        if any(codes):
            print("some pipelines failed; the table shows what finished", file=sys.stderr)
    print(reductions(args) if args.table else described)
    print(table(runs, args.ood_sets))
    return 0


if __name__ == "__main__":
    sys.exit(main())
