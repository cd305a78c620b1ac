"""CAG: our batched fixed-stack training step and word-synchronous beam against the official osekilab/CAG code
itself (Yoshida & Oseki 2022, commit d870345), in the same run, interleaved.

The reference is the official implementation: its ``src/models.py``, ``src/utils.py`` and ``src/action_dict.py``
from ``--official`` (default ``$SYNBENCH_CAG_OFFICIAL``, else the archive of them at d870345 with the official MIT
license that ships with the golden files, ``tests/golden/cag/official-d870345.tar.gz``). Its model imports
``GPT2Model`` from transformers 4.11.3 patched by the official ``scripts/transformers-v4.11.3-x.patch``
(``--transformers``, default ``$SYNBENCH_CAG_TRANSFORMERS``, else built once into
``~/.cache/synbench/cag-transformers-4.11.3``: the two pinned wheels below fetched from PyPI and checked
against their SHA-256, unpacked, the official patch applied with ``git apply``, transformers' runtime
dependency-version check switched off: only ``GPT2Model`` is used). That transformers cannot share a process
with the installed one, so the benchmark runs in a child process with it first on the path.

What is raced (``benchmarks.rnng.race``, as for the RNNG): a random official
``FixedStackCompositionAttentionGrammar`` (top-down, ``--size`` wide, ``--layers`` layers of ``--heads`` heads,
dropout 0, torch seed 0) and ours (``lightning_modules/families/rnng/cag_model.py``) with its weights
(``official_state_dict``), each with its own Adam (lr 0.001) and clipping at 5:

- **training step**: the official ``train.py`` step (``model(x, actions, stack_size_bound=batch max stack size)``,
  the summed loss divided by the batch's sentences, backward, clip, step) against ours, on the same batches of
  PTB-sample training sentences, alternating who goes first; the first step's losses checked equal (1e-5);
- **beam**: the official ``word_sync_beam_search`` as its ``beam_search.py`` calls it against ``CAGBeamScorer``,
  the same sentences per call; every sentence's log p(x) bound checked equal (1e-4) before timing.

Printed: milliseconds per training step and sentences per second of the beam, each side, and the ratios
(official time / ours: above 1, ours is faster).

    PYTHONPATH=. python benchmarks/cag.py [--device cuda] [--size 256 --layers 3 --heads 4 --batch 32]

Measured 2026-11-29 on the shared 2-core CPU (1 thread, other work running; a tiny size, so the numbers only say
the two are alike: ``--size 16 --layers 1 --heads 2 --batch 4 --steps 2 --sentences 2 --max-words 8 --beam 4
--word-beam 2 --shift-size 1 --beam-batch 2``): see docs/cag.md. At the official PTB size on a GPU:
``benchmarks/gpu_session.sh`` (not run yet: no GPU lent).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "d870345"
ARCHIVE = ROOT / "tests" / "golden" / "cag" / f"official-{COMMIT}.tar.gz"
OFFICIAL_FILES = ("src/models.py", "src/utils.py", "src/action_dict.py")
PATCH = "scripts/transformers-v4.11.3-x.patch"
WHEELS = {  # the official requirements' transformers, and the huggingface_hub it imports
    ("transformers", "4.11.3"): "9750b4e520b4a38a904834bce50d900208c650855e6f671e7718d0edba89f084",
    ("huggingface_hub", "0.0.19"): "edcea87cbd709073a63fc911efa2d8fd8304f62cfe43f0bf497dec8eaac10369",
}
CHILD = "SYNBENCH_CAG_BENCHMARK_CHILD"


def fail(message: str, where: str) -> SystemExit:
    print(f"synbench: error: {where}: {message}", file=sys.stderr)
    return SystemExit(2)


def _wheel(name: str, version: str, sha256: str, into: Path) -> Path:
    """The pinned wheel from PyPI, checked against its SHA-256."""
    filename = f"{name}-{version}-py3-none-any.whl"
    request = urllib.request.Request(f"https://pypi.org/simple/{name.replace('_', '-')}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})  # PEP 691
    with urllib.request.urlopen(request, timeout=60) as r:
        url = next(f["url"] for f in json.load(r)["files"] if f["filename"] == filename)
    path = into / filename
    with urllib.request.urlopen(url, timeout=120) as r:
        path.write_bytes(r.read())
    if hashlib.sha256(path.read_bytes()).hexdigest() != sha256:
        raise fail(f"SHA-256 of {path.name} is not the pinned {sha256}", url)
    return path


def reference_site(site: Path, patch: Path) -> Path:
    """The patched transformers 4.11.3 folder (module doc), built once, atomically (a half-built one is never
    left at ``site``)."""
    if (site / "transformers" / "models" / "gpt2" / "modeling_gpt2.py").is_file():
        return site
    site.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=site.parent) as tmp:
        build = Path(tmp) / "site"
        build.mkdir()
        for (name, version), sha256 in WHEELS.items():
            with zipfile.ZipFile(_wheel(name, version, sha256, Path(tmp))) as wheel:
                wheel.extractall(build)
        # outside any repository: inside one (a cache folder in a checkout) git apply silently skips the paths
        # that are not under the repository's root, and the patch would not be applied
        env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(Path(tmp).resolve())}  # absolute, or git ignores it
        applied = subprocess.run(["git", "apply", "-v", "-p2", str(patch.resolve())], cwd=build, capture_output=True,
                                 text=True, env=env)
        if applied.returncode != 0 or "Skipped patch" in applied.stderr:
            raise fail(f"the official patch does not apply: {applied.stderr.strip()[:200]}", str(patch))
        check = build / "transformers" / "dependency_versions_check.py"
        text = check.read_text()
        check.write_text(text.replace(text[text.index("pkgs_to_check_at_runtime = "):].split("\n", 1)[0],
                                      "pkgs_to_check_at_runtime = []"))
        try:
            build.rename(site)
        except OSError:  # built meanwhile by another process
            if not site.is_dir():
                raise
    return site


def official_source(source: Path, into: Path) -> Path:
    """The official files (and the patch) from a checkout or a ``.tar.gz`` of them, in ``into``."""
    if source.name.endswith(".tar.gz") and source.is_file():
        with tarfile.open(source) as archive:
            archive.extractall(into, members=[m for m in archive.getmembers()
                                              if m.name in (*OFFICIAL_FILES, PATCH)], filter="data")
        source = into
    missing = [f for f in (*OFFICIAL_FILES, PATCH) if not (source / f).is_file()]
    if missing:
        raise fail(f"not an osekilab/CAG checkout or archive of its files (no {', '.join(missing)})", str(source))
    return source


def parse(argv: list[str] | None) -> argparse.Namespace:
    from benchmarks.rnng import add_race_arguments

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--official", type=Path, default=os.environ.get("SYNBENCH_CAG_OFFICIAL", ARCHIVE),
                    help="an osekilab/CAG checkout or a .tar.gz of its files (default $SYNBENCH_CAG_OFFICIAL, "
                         "else the golden archive of d870345)")
    ap.add_argument("--transformers", type=Path,
                    default=os.environ.get("SYNBENCH_CAG_TRANSFORMERS",
                                           Path.home() / ".cache" / "synbench" / "cag-transformers-4.11.3"),
                    help="the patched transformers 4.11.3 folder (built there if missing)")
    ap.add_argument("--heads", type=int, default=4, help="attention heads (the README's --num_heads 4)")
    add_race_arguments(ap, layers=3, shift_size=5)  # the README's --num_layers 3 and beam_search --shift_size 5
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Build the reference (parent), then race in a child process with the patched transformers first."""
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    with tempfile.TemporaryDirectory() as tmp:
        source = official_source(args.official, Path(tmp))
        site = reference_site(args.transformers, source / PATCH)
        env = {**os.environ, CHILD: str(source), "PYTHONPATH": os.pathsep.join((str(site), str(ROOT)))}
        return subprocess.run([sys.executable, str(Path(__file__).resolve()), *argv], env=env).returncode


def child(argv: list[str], source: Path) -> dict[str, float]:
    """The race, in the process whose ``transformers`` is the patched 4.11.3."""
    import torch

    from benchmarks.rnng import race
    from experiments.config import resolve_train_config
    from experiments.families import get_family
    from experiments.families.rnng.cag_beam import CAGBeamScorer
    from experiments.families.rnng.cag_scorers import CAGModel
    from lightning_modules.families.rnng.cag_model import build, official_state_dict
    from lightning_modules.families.rnng.encoding import ActionDict, WordDict

    args = parse(argv)
    torch.set_num_threads(args.threads)
    sys.path.insert(0, str(source / "src"))
    import transformers
    from action_dict import TopDownActionDict
    from models import FixedStackCompositionAttentionGrammar

    overrides = [f"runtime.data_dir={args.data_dir}"] if args.data_dir else []
    data = get_family("cag").build_data(resolve_train_config("cag", "cpu-small", overrides))
    words, actions = WordDict.from_json(data.vocab["words"]), ActionDict.from_json(data.vocab["actions"])
    torch.manual_seed(0)
    theirs = FixedStackCompositionAttentionGrammar(
        TopDownActionDict(list(actions.nonterminals)), vocab_size=len(words), word_dim=args.size,
        hidden_dim=args.size, num_layers=args.layers, num_heads=args.heads, dropout=0.0, embd_dropout=0.0,
    ).to(args.device)
    ours = build({"vocab_size": len(words), "num_nts": len(actions.nonterminals), "w_dim": args.size,
                  "h_dim": args.size, "num_layers": args.layers, "num_heads": args.heads, "dropout": 0.0,
                  "embd_dropout": 0.0})
    ours.load_state_dict(official_state_dict(theirs.state_dict()))
    ours = ours.to(args.device)
    print(f"reference: the official osekilab/CAG code ({args.official}, {COMMIT}; transformers "
          f"{transformers.__version__} with its patch); model: random top-down CAG, {args.layers} layer(s) of "
          f"{args.size}, {args.heads} heads, {len(words):,} words, {len(actions.nonterminals)} nonterminals; "
          f"device {args.device}, {torch.get_num_threads()} threads")
    scorer = CAGBeamScorer(CAGModel(ours, words, actions, "cag", args.device), args.beam, args.word_beam,
                           args.shift_size, batch_size=args.beam_batch)
    return race(args, data, theirs, ours, scorer, "cag.py")


if __name__ == "__main__":
    if os.environ.get(CHILD):
        from lightning_modules.errors import InputError

        try:
            print(json.dumps(child(sys.argv[1:], Path(os.environ[CHILD]))))
        except InputError as e:
            raise fail(e.message, e.location) from None
    else:
        raise SystemExit(main())
