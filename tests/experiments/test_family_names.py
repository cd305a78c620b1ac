"""Evaluators, the evaluation plan and the analysis never name a model family: they ask the registries.

The check is the issue's ``grep -rnwE "tg|txl|txl-trees|txl-terminals|pushdown|base-lm|proposal-parser"
experiments/evaluate experiments/evaluation_plan.py analysis --include=*.py``, as a word match in Python."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAMILY_NAMES = re.compile(r"(?<!\w)(tg|txl|txl-trees|txl-terminals|pushdown|base-lm|proposal-parser)(?!\w)")


def test_no_family_name_outside_the_families_and_papers():
    files = [*(REPO / "experiments" / "evaluate").rglob("*.py"), REPO / "experiments" / "evaluation_plan.py",
             *(REPO / "analysis").rglob("*.py")]
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}" for path in files
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if FAMILY_NAMES.search(line)]
    assert len(files) > 30 and found == []
