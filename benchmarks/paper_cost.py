"""What the full evaluation protocol costs per checkpoint, from a timed sample of each evaluation's own sentences.

``--eval`` times, on ``--device``, one TG checkpoint of ``--preset`` (random weights: the speed does not depend
on them) on a sample of each evaluation of the protocol and prints the minutes per checkpoint that the whole
evaluation takes at that rate (seconds per word of the sample x the evaluation's words):

- ``ppl N=300``: PTB test perplexity marginalised over N = 300 proposal trees per sentence (TG §3.1), the trie
  scorer (``TreeScorer``); the proposals are the gold tree plus random trees sharing its prefixes, as a
  parser's k-best list does (``marginalize.proposals``, ``k-best``); the sample: PTB-sample validation trees.
- ``ppl beam``: the same sentences by the word-synchronous beam 100/10 (<= 15 actions per word; TG's beam method).
- ``sg``: every sentence of all 34 SyntaxGym suites (each item's conditions) by the beam 100/10.
- ``blimp``: both sentences of every pair of BLiMP's 67 paradigms by the beam 100/10.

The PTB test set is not in the sample data: its size is the standard WSJ §23 (2,416 sentences, 56,684 words);
SG and BLiMP are counted from the prepared data. Words are the evaluators' tokens (``evaluate/tokenize.py``).
The sample of each evaluation is spread over it (every k-th sentence); ``--sample`` sentences each.

    PYTHONPATH=. python benchmarks/paper_cost.py --eval [--preset ptb] [--device cuda] [--sample 8]

A GPU run belongs to ``benchmarks/gpu_session.sh``; on the CPU the numbers are CPU-minutes of this machine.
Measured 2026-11-28 on the 2-core CPU (1 thread, beside a CI run; ``--preset ptb --sample 2``, the paper's
settings; random weights)::

      evaluation                         method  sentences     words   s/word    minutes
       ppl N=300            300 proposals, trie      2,416    56,684   1.2201     1152.7
        ppl beam     beam 100/10, <= 15 actions      2,416    56,684   2.1972     2075.7
              sg     beam 100/10, <= 15 actions      3,304    42,413   6.5126     4603.6
           blimp     beam 100/10, <= 15 actions    134,000 1,183,893   5.1883   102374.2
    full protocol (ppl N=300, sg, blimp): 108130.5 minutes per checkpoint

(Not yet measured on a GPU.)

``--train`` estimates the device-hours of training TG Table 1's models (``reproduce-tg-paper``: TG, TXL (trees),
TXL (terminals), sentence-level PTB, 100 seeds each, 100,000 steps of batch 64, validation and a checkpoint every
500 steps; every number read from the spec's resolved configs) in three ways: ``solo`` (one run per device, as
``synbench submit`` runs by default), ``MPS K`` (K runs per device under NVIDIA MPS, ``--runs-per-gpu K``; off
CUDA, or without ``--mps``, ``packed K``: the K processes time-slice the device) and ``group S`` (S seeds in one
process, ``synbench train --seeds``). Each way is timed by three short real runs of ``synbench train`` on
``--device`` (the spec's preset unless ``--preset``; the PTB sample, as the licensed PTB is not needed for speed):

- A: ``a`` steps, validating once (at step ``a``);  B: ``2a`` steps, validating once;  C: ``2a`` steps, validating
  twice. Each run's own timing of its training (``TIMING``: from the first step to the end of the last
  validation, so process start-up and data loading are outside it) is read; a step costs (B - A) / a (the
  first step's warm-up and the one validation cancel) and a validation pass (C - B) (with its checkpoint).
- A pass over the sample's validation split is scaled to WSJ §22 (1,700 sentences, 40,117 words) by words.
- Packed runs and groups divide by the runs sharing the device (K or S): device-seconds per seed.

device-hours = Σ over the models of seeds x (steps x step + steps / val_every x validation x §22 scale).

    PYTHONPATH=. python benchmarks/paper_cost.py --train --device cuda [--steps 20] [--group 32] \
        [--runs-per-gpu 8] [--mps]

Not yet measured on a GPU (``benchmarks/gpu_session.sh`` holds the step).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from benchmarks.marginalize import cpu_small_model, proposals
from benchmarks.packed_runs import REPO, TINY, run_tasks
from experiments.evaluate.blimp import load_paradigms
from experiments.evaluate.blimp_eval import default_data_dir as blimp_dir
from experiments.evaluate.scorers.tree_marginal import TreeScorer
from experiments.evaluate.sg import condition_text, default_suites_dir, load_suites
from experiments.evaluate.tokenize import tokenize
from experiments.experiment_runs import experiment_runs
from experiments.experiment_spec import load_spec
from experiments.families.tg.beam import BeamScorer
from experiments.families.tg.methods import BEAM, N
from experiments.launchers.manifest import Task, write_manifest
from experiments.runs import DONE, read_timing
from experiments.training_cost import device_label
from lightning_modules.families.tg.cc_constraints import ActionMasks

PTB_TEST = (2416, 56684)  # WSJ section 23: sentences, words (the TG paper's test set)
PTB_VALID = (1700, 40117)  # WSJ section 22: sentences, words (the TG paper's validation set)
TABLE1 = ("tg", "txl-trees", "txl-terminals")  # TG Table 1's sentence-level PTB models in reproduce-tg-paper


@dataclass
class Row:
    """One evaluation: its name, how it is scored, its whole size and the timed sample's rate."""

    name: str
    method: str
    sentences: int
    words: int
    sample_words: int
    seconds: float

    @property
    def minutes(self) -> float:
        """The whole evaluation at the sample's seconds per word."""
        return self.seconds / self.sample_words * self.words / 60


def spread(items: Sequence, count: int) -> list:
    """``count`` items spread evenly over ``items`` (every k-th)."""
    step = max(1, len(items) // max(count, 1))
    return list(items[::step][:count])


def sg_sentences(data_dir: str | None) -> list[list[str]]:
    """Every sentence of every prepared SyntaxGym suite (each item's conditions), as the evaluators' words."""
    suites = load_suites(default_suites_dir(data_dir))
    return [[t.text for t in tokenize(condition_text(contents)[0])]
            for suite in suites.values() for item in suite.items for contents in item.conditions.values()]


def blimp_sentences(data_dir: str | None) -> list[list[str]]:
    """Both sentences of every BLiMP pair, as the evaluators' words."""
    return [[t.text for t in tokenize(text)] for pairs in load_paradigms(blimp_dir(data_dir)).values()
            for pair in pairs for text in (pair.good, pair.bad)]


def timed(score: Callable[[], object]) -> float:
    start = time.perf_counter()
    score()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter() - start


def eval_cost(preset: str, device: str, sample: int, data_dir: str | None, n: int = N,
              beam: tuple[int, int, int] = (BEAM.options["beam"], BEAM.options["word_beam"],
                                            BEAM.options["max_actions"])) -> list[Row]:
    """Time each evaluation's sample and extrapolate (module docstring)."""
    model, valid = cpu_small_model(preset, device)
    masks = ActionMasks(model.vocab)
    rng = np.random.default_rng(0)
    gold = spread([t for t in valid if len(t.leaves()) <= 40], sample)
    words = [t.leaves() for t in gold]
    trees = [proposals(t, n, masks, rng, "k-best") for t in gold]
    beam_scorer = BeamScorer(model, *beam)
    beam_name = f"beam {beam[0]}/{beam[1]}, <= {beam[2]} actions"
    rows = [Row(f"ppl N={n}", f"{n} proposals, trie", *PTB_TEST, sum(map(len, words)),
                timed(lambda: TreeScorer(model, None, method="proposals", n=n).score_trees(words, trees))),
            Row("ppl beam", beam_name, *PTB_TEST, sum(map(len, words)), timed(lambda: beam_scorer.score(words)))]
    for name, sentences in (("sg", sg_sentences(data_dir)), ("blimp", blimp_sentences(data_dir))):
        chosen = spread(sentences, sample)
        rows.append(Row(name, beam_name, len(sentences), sum(map(len, sentences)), sum(map(len, chosen)),
                        timed(lambda chosen=chosen: beam_scorer.score(chosen))))
    return rows


def print_rows(rows: list[Row], preset: str, device: str) -> None:
    print(f"TG {preset} (random weights) on {device}; minutes per checkpoint at the sample's seconds per word")
    print(f"{'evaluation':>12} {'method':>30} {'sentences':>10} {'words':>9} {'s/word':>8} {'minutes':>9}")
    for r in rows:
        print(f"{r.name:>12} {r.method:>30} {r.sentences:10,} {r.words:9,} {r.seconds / r.sample_words:8.4f} "
              f"{r.minutes:9.1f}")
    protocol = sum(r.minutes for r in rows if r.name != "ppl beam")
    print(f"full protocol ({rows[0].name}, sg, blimp): {protocol:.1f} minutes per checkpoint")


@dataclass(frozen=True)
class Protocol:
    """One model of TG Table 1 as ``reproduce-tg-paper`` trains it: how to launch it, and its paper numbers."""

    model: str
    family: str
    preset: str
    overrides: tuple[str, ...]
    seeds: int
    steps: int
    val_every: int


def table1(spec: str = "reproduce-tg-paper", models: Sequence[str] = TABLE1) -> list[Protocol]:
    """The models' launch settings and protocol numbers (seeds, steps, validation interval) from the spec."""
    runs = experiment_runs(load_spec(spec))
    out = []
    for name in models:
        mine = [r for r in runs if r.model == name]
        if not mine:
            known = ", ".join(dict.fromkeys(r.model for r in runs))
            raise ValueError(f"{spec} has no model {name!r} (its models: {known})")
        first, train = mine[0], mine[0].config["train"]
        out.append(Protocol(name, first.family, first.preset, first.overrides, len(mine), int(train["max_steps"]),
                            int(train["val_every"])))
    return out


@dataclass
class TrainRow:
    """One way of training one model: device-seconds per seed of a step and of a §22 validation pass."""

    model: str
    way: str
    step: float
    validation: float

    @property
    def noisy(self) -> bool:
        """A difference below zero: the runs were too short for the machine's noise (raise ``--steps``)."""
        return self.step <= 0 or self.validation < 0

    def hours(self, p: Protocol) -> float:
        """Device-hours of all the model's seeds at the paper's steps and validation (a negative difference,
        noise, counts as zero)."""
        return p.seeds * (p.steps * max(self.step, 0.0) + p.steps // p.val_every * max(self.validation, 0.0)) / 3600


def _timed_runs(folder: Path, argv: list[str], way: str, size: int, cpus: int, mps: bool) -> tuple[float, int]:
    """Launch one measurement (``way``: solo | packed | group) of ``size`` runs and return the mean of their
    ``train_seconds`` and their validation words; every run must end ``DONE``."""
    seeds = list(range(size))
    if way == "group":
        subprocess.run([*argv, "--seeds", ",".join(map(str, seeds)), "--runs-dir", str(folder)], cwd=REPO,
                       check=True, stdout=subprocess.DEVNULL)
        dirs = [d for d in (folder / "train").iterdir() if d.is_dir()]
    else:
        dirs = [folder / f"seed{s}" for s in seeds]
        tasks = [Task(i, d.name, s, str(d), (*argv, "--seed", str(s), "--run-dir", str(d)))
                 for i, (s, d) in enumerate(zip(seeds, dirs, strict=True))]
        write_manifest(folder / "manifest.jsonl", tasks)
        run_tasks(folder / "manifest.jsonl", 1, size, cpus, mps=mps)
    assert len(dirs) == size and all((d / DONE).is_file() for d in dirs), f"{folder.name}: a run failed"
    words = json.loads((dirs[0] / DONE).read_text())["val_words"]
    return float(np.mean([read_timing(d)["train_seconds"] for d in dirs])), int(words)


def measure_training(p: Protocol, way: str, size: int, args: argparse.Namespace, tmp: Path) -> tuple[float, float]:
    """Time ``way`` of ``p`` by runs A, B, C (module docstring): device-seconds per seed of a step and of a §22
    validation pass."""
    accelerator = "cuda" if args.device == "cuda" else "cpu"
    precision = "bf16-mixed" if args.device == "cuda" else "32-true"
    launch = [sys.executable, "-m", "experiments.cli", "train", p.family, "--preset", args.preset or p.preset,
              *p.overrides, "data.corpus=ptb-sample", f"runtime.accelerator={accelerator}",
              f"runtime.precision={precision}", "runtime.wandb=disabled", "runtime.progress=false",
              *(TINY if args.tiny else []), *args.override]
    a = args.steps
    seconds = {}
    for run, (steps, every) in {"A": (a, a), "B": (2 * a, 2 * a), "C": (2 * a, a)}.items():
        folder = tmp / f"{p.model}-{way}{size}-{run}"
        folder.mkdir()
        argv = [*launch, f"train.max_steps={steps}", f"train.val_every={every}", f"train.ckpt_every={every}"]
        seconds[run], words = _timed_runs(folder, argv, way, size, args.cpus, args.mps and way == "packed")
    scale = PTB_VALID[1] / words
    return (seconds["B"] - seconds["A"]) / a / size, (seconds["C"] - seconds["B"]) * scale / size


def train_cost(args: argparse.Namespace, protocols: list[Protocol]) -> list[TrainRow]:
    """Measure every way for every model, printing each row as it is measured (a time limit keeps them)."""
    ways = [("solo", 1)] + [("group", s) for s in args.group] + [("packed", k) for k in args.runs_per_gpu]
    label = {"solo": "solo", "packed": "MPS" if args.mps else "packed", "group": "group"}
    device = device_label(torch.device(args.device))
    print(f"training cost of TG Table 1 (reproduce-tg-paper) on {device}: "
          f"runs of {args.steps} and {2 * args.steps} steps, preset {args.preset or protocols[0].preset}"
          f"{' (tiny)' if args.tiny else ''}", flush=True)
    print(f"{'model':>14} {'way':>10} {'seeds':>6} {'steps':>8} {'val every':>9} {'s/seed-step':>12} "
          f"{'s/seed-val':>11} {'device-hours':>13}", flush=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="synbench-cost-") as tmp:
        for p in protocols:
            for way, size in ways:
                name = f"{label[way]}{'' if way == 'solo' else f' {size}'}"
                try:
                    row = TrainRow(p.model, name, *measure_training(p, way, size, args, Path(tmp)))
                except (subprocess.CalledProcessError, AssertionError) as error:  # e.g. a group the device can't hold
                    print(f"{p.model:>14} {name:>10}  failed: {error}", flush=True)
                    continue
                rows.append(row)
                print(f"{p.model:>14} {row.way:>10} {p.seeds:6} {p.steps:8,} {p.val_every:9} {row.step:12.5f} "
                      f"{row.validation:11.3f} {row.hours(p):13.1f}{'  (noise: raise --steps)' if row.noisy else ''}",
                      flush=True)
    by_model = {p.model: p for p in protocols}
    for way in dict.fromkeys(r.way for r in rows):
        measured = [r for r in rows if r.way == way]
        total = sum(r.hours(by_model[r.model]) for r in measured)
        print(f"TG Table 1 training, {way}: {total:,.1f} device-hours on {device} "
              f"({', '.join(r.model for r in measured)}{'' if len(measured) == len(protocols) else ' only'})")
    return rows


def main(argv: list[str] | None = None) -> list[Row] | tuple[list[Protocol], list[TrainRow]]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--eval", action="store_true", help="the evaluation protocol's cost per checkpoint")
    what.add_argument("--train", action="store_true", help="TG Table 1's training cost (solo, MPS, groups)")
    ap.add_argument("--preset", default=None,
                    help="the preset timed (default ptb, the paper's PTB model; --train: the spec's)")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--sample", type=int, default=8, help="--eval: sentences timed per evaluation")
    ap.add_argument("--proposals", type=int, default=N, help=f"--eval: N of the proposal perplexity (default {N})")
    ap.add_argument("--beam", type=int, nargs=3, default=None, metavar=("BEAM", "WORD_BEAM", "MAX_ACTIONS"),
                    help="--eval: the beam's settings (default TG's beam method's)")
    ap.add_argument("--data-dir", help="the prepared data (default $SYNBENCH_DATA)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads on the CPU")
    ap.add_argument("--models", nargs="+", default=list(TABLE1), help="--train: the spec's models timed")
    ap.add_argument("--steps", type=int, default=20, help="--train: a, the shorter run's steps (the longer: 2a)")
    ap.add_argument("--runs-per-gpu", type=int, nargs="*", default=[8], metavar="K",
                    help="--train: K of the packed runs timed (default 8; none: no packing)")
    ap.add_argument("--mps", action="store_true", help="--train: packed runs under NVIDIA MPS (CUDA only)")
    ap.add_argument("--group", type=int, nargs="*", default=[32], metavar="S",
                    help="--train: S of the seed groups timed (default 32; none: no group)")
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="--train: CPUs of a packed task")
    ap.add_argument("--tiny", action="store_true", help="--train: a tiny model (a CPU check of the script)")
    ap.add_argument("override", nargs="*", help="--train: further KEY=VALUE overrides of every run")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.train:
        if args.steps < 1 or any(k < 2 for k in args.runs_per_gpu) or any(s < 2 for s in args.group):
            ap.exit(2, "synbench: error: --train: --steps must be positive, each K and S at least 2\n")
        if args.mps and args.device != "cuda":
            ap.exit(2, "synbench: error: --mps: MPS shares an NVIDIA GPU between processes; it needs --device "
                       "cuda\n")
        try:
            protocols = table1(models=args.models)
        except ValueError as error:
            ap.exit(2, f"synbench: error: --models: {error}\n")
        return protocols, train_cost(args, protocols)
    if args.override:
        ap.exit(2, f"synbench: error: --eval takes no overrides ({' '.join(args.override)})\n")
    beam = tuple(args.beam) if args.beam else (BEAM.options["beam"], BEAM.options["word_beam"],
                                               BEAM.options["max_actions"])
    rows = eval_cost(args.preset or "ptb", args.device, args.sample, args.data_dir, args.proposals, beam)
    print_rows(rows, args.preset or "ptb", args.device)
    return rows

if __name__ == "__main__":
    main()
