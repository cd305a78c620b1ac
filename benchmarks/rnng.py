"""RNNG: our batched fixed-stack training step and word-synchronous beam against the official rnng-pytorch code
itself (Noji & Oseki 2021, aistairc/rnng-pytorch f30c0ed), in the same run, interleaved.

The reference is the official implementation, not a re-run of it: its ``fixed_stack_models.py``, ``utils.py``
and ``action_dict.py`` are imported from ``--official``: a checkout, a bare git directory (the files at
``--commit``), or a ``.tar.gz`` of them; by default ``$SYNBENCH_RNNG_OFFICIAL``, else the archive of the three
files at f30c0ed with the official MIT license that ships with the golden files
(``tests/golden/rnng/official-f30c0ed.tar.gz``, ``git archive`` of the official commit), extracted into a
temporary folder, so the comparison runs from a fresh clone, on a lent GPU machine and in CI.

- **training step**: a random official ``FixedStackRNNG`` (top-down, LSTM composition, ``--size`` wide,
  ``--layers`` layers, dropout 0, torch seed 0) and ours (``lightning_modules/families/rnng/model.py``) with its
  weights (``official_state_dict``), each with its own Adam (lr 0.001) and gradient clipping at 5: the official
  ``train.py`` step (``model(x, actions, stack_size_bound=...)``, the loss divided by the batch's sentences,
  backward, clip, step) against ours (``loss_terms`` -> ``loss``, backward, clip, step) on the same batches of
  ``--batch`` PTB-sample training sentences, alternating who goes first. The two losses of the first step are
  checked equal (1e-5 relative) before timing.
- **beam**: the official ``word_sync_beam_search`` as ``beam_search.py`` calls it (``--beam-batch`` sentences
  per call, stack bound -1) against ``RNNGBeamScorer`` (the same sentences per batch), on the first test
  sentences of the sample of at most ``--max-words`` words, alternating who goes first. Every sentence's log
  p(x) bound (the official: minus its summed surprisals) is checked equal (1e-4) before timing.

Printed: milliseconds per training step and sentences per second of the beam, each side, and the ratios
(official time / ours: above 1, ours is faster).

    PYTHONPATH=. python benchmarks/rnng.py [--device cuda] [--size 256 --layers 2 --batch 64] [--official DIR]

Measured 2026-11-28 on the shared 2-core CPU (1 thread, load average ~10 from other work; a tiny size, so the
numbers only say the two are alike: ``--size 16 --layers 1 --batch 4 --steps 2 --sentences 2 --max-words 8
--beam 4 --word-beam 2 --beam-batch 2``)::

    training step, 4 sentences (~64 words):  official 659.0 ms/step, synbench 617.9 ms/step: 1.07x
    beam 4/2, shift size 1, 2 sentences:     official 3.23 sentences/s, synbench 4.32: 1.33x

At the official PTB size on a GPU: ``benchmarks/gpu_session.sh`` step 10 (not run yet: no GPU this session).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from experiments.config import resolve_train_config
from experiments.families import get_family
from experiments.families.rnng.beam import RNNGBeamScorer
from experiments.families.rnng.scorers import RNNGModel
from lightning_modules.errors import InputError
from lightning_modules.families.rnng.encoding import ActionDict, WordDict
from lightning_modules.families.rnng.model import build, collate, official_state_dict

COMMIT = "f30c0ed"
OFFICIAL_FILES = ("fixed_stack_models.py", "utils.py", "action_dict.py")
ARCHIVE = Path(__file__).resolve().parents[1] / "tests" / "golden" / "rnng" / f"official-{COMMIT}.tar.gz"


def official_modules(source: Path, commit: str, into: Path) -> Any:
    """The official ``fixed_stack_models`` and ``action_dict`` modules from a checkout, a bare git directory or
    a ``.tar.gz`` of the files."""
    if source.name.endswith(".tar.gz") and source.is_file():
        with tarfile.open(source) as archive:
            archive.extractall(into, members=[m for m in archive.getmembers() if m.name in OFFICIAL_FILES],
                               filter="data")
        source = into
    elif not (source / "fixed_stack_models.py").is_file():
        if not (source / "HEAD").is_file():
            raise InputError("neither an rnng-pytorch checkout, its git directory nor a .tar.gz of its files",
                             str(source))
        for name in OFFICIAL_FILES:
            text = subprocess.run(["git", "--git-dir", str(source), "show", f"{commit}:{name}"], check=False,
                                  capture_output=True, text=True)
            if text.returncode != 0:
                raise InputError(f"no {name} at {commit}: {text.stderr.strip()[:120]}", str(source))
            (into / name).write_text(text.stdout)
        source = into
    if not (source / "fixed_stack_models.py").is_file():
        raise InputError("no fixed_stack_models.py in it", str(source))
    sys.path.insert(0, str(source))
    with warnings.catch_warnings():  # the official utils.py compares strings with `is`
        warnings.simplefilter("ignore", SyntaxWarning)
        import action_dict
        import fixed_stack_models

    return fixed_stack_models, action_dict


def timed(run: Callable[[], Any], device: str) -> float:
    if device == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    run()
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def interleaved(sides: dict[str, Callable[[int], Any]], rounds: int, device: str) -> dict[str, float]:
    """Total seconds of each side over ``rounds`` calls (call i gets i), the order alternating each round."""
    total = dict.fromkeys(sides, 0.0)
    names = list(sides)
    for i in range(rounds):
        for name in names if i % 2 == 0 else names[::-1]:
            total[name] += timed(lambda name=name, i=i: sides[name](i), device)
    return total


def add_race_arguments(ap: argparse.ArgumentParser, layers: int, shift_size: int) -> None:
    """The options of ``race`` (sizes, steps, the beam's widths), with a family's official defaults."""
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--size", type=int, default=256, help="w_dim = h_dim (the official default 256)")
    ap.add_argument("--layers", type=int, default=layers)
    ap.add_argument("--batch", type=int, default=64, help="training sentences per step")
    ap.add_argument("--steps", type=int, default=10, help="timed training steps per side")
    ap.add_argument("--sentences", type=int, default=8, help="beam: test sentences searched")
    ap.add_argument("--max-words", type=int, default=20)
    ap.add_argument("--beam", type=int, default=100)
    ap.add_argument("--word-beam", type=int, default=10)
    ap.add_argument("--shift-size", type=int, default=shift_size)
    ap.add_argument("--beam-batch", type=int, default=8, help="sentences per search call (both sides)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--data-dir", help="the prepared data (default: $SYNBENCH_DATA, ...)")


def main(argv: list[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--official", type=Path, default=os.environ.get("SYNBENCH_RNNG_OFFICIAL", ARCHIVE),
                    help="an aistairc/rnng-pytorch checkout, its git directory or a .tar.gz of its files (default "
                         "$SYNBENCH_RNNG_OFFICIAL, else the golden archive of f30c0ed)")
    ap.add_argument("--commit", default=COMMIT, help="the official commit read from a git directory")
    add_race_arguments(ap, layers=2, shift_size=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    path = list(sys.path)
    with tempfile.TemporaryDirectory() as tmp:
        try:
            official_code, official_actions = official_modules(Path(args.official), args.commit, Path(tmp))
            return _run(args, official_code, official_actions)
        finally:  # the official top-level modules (utils, ...) leave with their folder
            sys.path[:] = path
            for name in ("fixed_stack_models", "utils", "action_dict"):
                sys.modules.pop(name, None)


def _run(args: argparse.Namespace, official_code: Any, official_actions: Any) -> dict[str, float]:
    overrides = [f"runtime.data_dir={args.data_dir}"] if args.data_dir else []
    data = get_family("rnng").build_data(resolve_train_config("rnng", "cpu-small", overrides))
    words, actions = WordDict.from_json(data.vocab["words"]), ActionDict.from_json(data.vocab["actions"])
    size = {"w_dim": args.size, "h_dim": args.size, "num_layers": args.layers}
    torch.manual_seed(0)
    action_dict = official_actions.TopDownActionDict(list(actions.nonterminals))
    theirs = official_code.FixedStackRNNG(action_dict, vocab=len(words), dropout=0.0, **size).to(args.device)
    ours = build({"vocab_size": len(words), "num_nts": len(actions.nonterminals), "dropout": 0.0, **size})
    ours.load_state_dict(official_state_dict(theirs.state_dict(), num_nts=len(actions.nonterminals)))
    ours = ours.to(args.device)
    print(f"reference: the official rnng-pytorch code ({args.official}, {args.commit}); model: random top-down "
          f"RNNG, {args.layers} layer(s) of {args.size}, {len(words):,} words, {len(actions.nonterminals)} "
          f"nonterminals; device {args.device}, {torch.get_num_threads()} threads")
    scorer = RNNGBeamScorer(RNNGModel(ours, words, actions, device=args.device), args.beam, args.word_beam,
                            args.shift_size, batch_size=args.beam_batch)
    return race(args, data, theirs, ours, scorer, "rnng.py")


def race(args: argparse.Namespace, data: Any, theirs: Any, ours: Any, scorer: Any, name: str) -> dict[str, float]:
    """The official model ``theirs`` and ours (the same weights) raced on training steps and on the beam
    (module doc); shared by every fixed-stack family's benchmark (``benchmarks/cag.py``). ``name`` locates a
    disagreement."""
    words = WordDict.from_json(data.vocab["words"])
    # -- training step -----------------------------------------------------------------------------------------
    examples = sorted(data.train, key=lambda e: len(e.token_ids))  # the official batches: similar lengths
    batches = [collate(examples[i: i + args.batch]) for i in range(0, len(examples) - args.batch + 1, args.batch)]
    batches = [b.to(args.device) for b in batches[:: max(1, len(batches) // (args.steps + 1))][: args.steps + 1]]
    optimizers = {"official": torch.optim.Adam(theirs.parameters(), lr=0.001),
                  "synbench": torch.optim.Adam(ours.parameters(), lr=0.001)}

    def official_step(i: int) -> float:
        b = batches[i % len(batches)]
        loss = theirs(b.token_ids, b.action_ids, stack_size_bound=b.stack_size, subword_end_mask=b.token_ids != 0)[0]
        loss = loss / b.token_ids.size(0)  # train.py's loss_normalize batch (its default)
        optimizers["official"].zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(theirs.parameters(), 5.0)
        optimizers["official"].step()
        return loss.item()

    def our_step(i: int) -> float:
        b = batches[i % len(batches)]
        loss = ours.loss(ours.loss_terms(b))
        optimizers["synbench"].zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ours.parameters(), 5.0)
        optimizers["synbench"].step()
        return loss.item()

    first = official_step(0), our_step(0)  # the same weights, the same batch: the same loss
    if abs(first[0] - first[1]) > 1e-5 * abs(first[0]):
        raise SystemExit(f"synbench: error: {name}: first-step losses differ: official {first[0]}, ours {first[1]}")
    words_per_step = sum(int((b.token_ids != 0).sum()) for b in batches) / len(batches)
    step = interleaved({"official": lambda i: official_step(i + 1), "synbench": lambda i: our_step(i + 1)},
                       args.steps, args.device)
    ms = {k: 1000 * v / args.steps for k, v in step.items()}
    print(f"\ntraining step, {args.batch} sentences (~{words_per_step:.0f} words), {args.steps} steps per side "
          f"(first-step loss {first[1]:.4f} on both):\n  official {ms['official']:.1f} ms/step, synbench "
          f"{ms['synbench']:.1f} ms/step: {ms['official'] / ms['synbench']:.2f}x")

    # -- beam ----------------------------------------------------------------------------------------------------
    theirs.eval()
    ours.eval()
    test = [e for e in data.valid if len(e.token_ids) <= args.max_words][: args.sentences]
    sentences = [[words.i2w[i] for i in e.token_ids] for e in test]  # the words as ids map back (unknowns: class)
    groups = [list(range(i, min(i + args.beam_batch, len(test)))) for i in range(0, len(test), args.beam_batch)]

    @torch.no_grad()
    def official_beam(group: Sequence[int]) -> list[float]:
        width = max(len(test[k].token_ids) for k in group)
        x = torch.tensor([list(test[k].token_ids) + [0] * (width - len(test[k].token_ids)) for k in group],
                         device=args.device)
        _, surprisals = theirs.word_sync_beam_search(x, x != 0, beam_size=args.beam, word_beam_size=args.word_beam,
                                                     shift_size=args.shift_size, stack_size_bound=-1)
        return [-sum(float(v) for v in s) for s in surprisals]

    def our_beam(group: Sequence[int]) -> list[float]:
        return [s.total for s, _ in scorer.search([sentences[k] for k in group])]

    for group in groups:
        a, b = official_beam(group), our_beam(group)
        for k, x, y in zip(group, a, b, strict=True):
            if abs(x - y) > 1e-4 * max(1.0, abs(x)):
                raise SystemExit(f"synbench: error: {name}: sentence {k}: official log p {x}, ours {y}")
    beam = interleaved({"official": lambda i: [official_beam(g) for g in groups],
                        "synbench": lambda i: [our_beam(g) for g in groups]}, 2, args.device)
    rate = {k: 2 * len(test) / v for k, v in beam.items()}
    n_words = sum(len(s) for s in sentences)
    print(f"\nword-synchronous beam {args.beam}/{args.word_beam}, shift size {args.shift_size}, {len(test)} "
          f"sentences ({n_words} words), {args.beam_batch} per call, 2 rounds (log p(x) equal on every sentence):"
          f"\n  official {rate['official']:.2f} sentences/s, synbench {rate['synbench']:.2f}: "
          f"{rate['synbench'] / rate['official']:.2f}x")
    return {"step_official_ms": ms["official"], "step_synbench_ms": ms["synbench"],
            "beam_official": rate["official"], "beam_synbench": rate["synbench"]}


if __name__ == "__main__":
    try:
        main()
    except InputError as e:
        print(f"synbench: error: {e}", file=sys.stderr)
        raise SystemExit(2) from None
