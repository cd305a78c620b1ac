"""Shared pieces of the ``benchmarks/parity_*.py`` scripts, which compare synbench with a user's checkout of
an official implementation: the common arguments, the PTB sample they all read, and the one-screen report
(counts, the first differences in detail, exit status 1 on any difference).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import types
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

from lightning_modules.data.tree import Tree


def parser(description: str, official_help: str) -> argparse.ArgumentParser:
    """The arguments every parity script takes: the official checkout, the data directory, how much to show."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--official", required=True, type=Path, metavar="DIR", help=official_help)
    p.add_argument("--data-dir", metavar="DIR",
                   help="where `synbench prepare` staged ptb-sample (default: $SYNBENCH_DATA, else "
                        "~/.cache/synbench/data; a copy of the shared data folder works too)")
    p.add_argument("--show", type=int, default=3, metavar="N", help="differences shown in detail (default 3)")
    return p


def stub_modules(stubs: Mapping[str, Mapping[str, object]]) -> None:
    """Install modules named by ``stubs`` with the given attributes, so that an official module imports without
    the packages it does not need here (a GPU stack, HF ``datasets``)."""
    for name, attributes in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attributes)
        sys.modules[name] = module


def fail(message: str) -> NoReturn:
    """Stop on a setup problem (no checkout, no data, a failed build): one line, exit status 2."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def ptb_sample_trees(data_dir: str | Path | None) -> list[tuple[str, Tree]]:
    """All 3,914 raw PTB-sample trees (train, valid, test), as ``(FILE:LINE, tree)``."""
    from lightning_modules.data.corpora import load_corpus
    from lightning_modules.errors import InputError

    try:
        corpus = load_corpus("ptb-sample", data_dir)
    except InputError as e:
        fail(e.message)
    return [s for split in ("train", "valid", "test") for s in corpus.sentences(split)]  # type: ignore[misc]


def synbench_stdout(argv: Sequence[str]) -> str:
    """What ``synbench ARGV...`` prints, run in this process through the real command line."""
    from experiments.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(list(argv))
    if code != 0:
        fail(f"synbench {' '.join(argv)} exited with {code}")
    return out.getvalue()


@dataclass
class Report:
    """Counts of compared and identical items per check, and the first differences of each."""

    show: int = 3
    compared: dict[str, int] = field(default_factory=dict)
    identical: dict[str, int] = field(default_factory=dict)
    differences: list[tuple[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(self, check: str, same: bool, detail: str | None = None) -> None:
        """Count one comparison of ``check``; ``detail`` (built lazily by the caller) describes a difference."""
        self.compared[check] = self.compared.get(check, 0) + 1
        self.identical[check] = self.identical.get(check, 0) + int(same)
        if not same and sum(1 for c, _ in self.differences if c == check) < self.show:
            self.differences.append((check, detail or "(no detail)"))

    @property
    def ok(self) -> bool:
        return bool(self.compared) and all(self.identical[c] == n for c, n in self.compared.items())

    def render(self, title: str) -> str:
        width = max(len(c) for c in self.compared) if self.compared else 0
        lines = [title]
        lines += [f"  {c:<{width}}  {self.identical[c]:>6,} / {n:,} identical" for c, n in self.compared.items()]
        lines += [f"  note: {n}" for n in self.notes]
        for check, detail in self.differences:
            lines += [f"-- first differences: {check}", *("  " + d for d in detail.splitlines())]
        lines.append("RESULT: " + ("identical" if self.ok else "DIFFERENT"))
        return "\n".join(lines)

    def finish(self, title: str) -> int:
        """Print the report; the exit status: 0 when everything compared was identical, else 1."""
        print(self.render(title))
        return 0 if self.ok else 1


def first_difference(ours: object, official: object, path: str = "") -> str:
    """Where two JSON-like values first differ, e.g. ``chunks[1].attend[3]: ours [[0,1]] official [[0,2]]``."""
    if isinstance(ours, dict) and isinstance(official, dict):
        for key in [*ours, *(k for k in official if k not in ours)]:
            if ours.get(key) != official.get(key):
                return first_difference(ours.get(key), official.get(key), f"{path}.{key}" if path else key)
    elif isinstance(ours, list) and isinstance(official, list) and len(ours) == len(official):
        for i, (a, b) in enumerate(zip(ours, official)):
            if a != b:
                return first_difference(a, b, f"{path}[{i}]")
    dump = lambda v: json.dumps(v, separators=(",", ":"))[:300]  # noqa: E731
    return f"{path or '(value)'}: ours {dump(ours)}  official {dump(official)}"
