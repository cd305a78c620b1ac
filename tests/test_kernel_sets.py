"""The CI rerun under other CPU kernel sets (``.ci/kernel-sets``): it really runs under the set it names, and it
covers every test module that compares float32 results computed two ways (those that use ``tests.tolerances``)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import torch

from tests.conftest import REPO_ROOT

SCRIPT = REPO_ROOT / ".ci" / "kernel-sets"


def listed_paths() -> list[str]:
    block = re.search(r"^MODULES=\((.*?)^\)", SCRIPT.read_text(encoding="utf-8"), re.S | re.M)
    assert block, "no MODULES=( ... ) list in .ci/kernel-sets"
    return block.group(1).split()


def test_the_rerun_runs_under_the_kernel_set_it_names():
    """torch honours a forced set (an unknown value is ignored with a warning, and the pass would silently repeat
    the main run); under ``.ci/kernel-sets`` this very process runs on the set it names."""
    env = {**os.environ, "ATEN_CPU_CAPABILITY": "default"}
    probe = "import torch; print(torch.backends.cpu.get_cpu_capability())"
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "DEFAULT" and "invalid value" not in out.stderr
    forced = os.environ.get("SYNBENCH_KERNEL_SET")
    if forced is not None:
        assert torch.backends.cpu.get_cpu_capability().lower() == forced == os.environ["ATEN_CPU_CAPABILITY"]


def test_every_module_comparing_float32_two_ways_is_rerun():
    listed = listed_paths()
    assert "tests/test_kernel_sets.py" in listed
    for path in listed:  # a module, a folder, or a test of a module (``FILE::TEST``)
        file, _, test = path.partition("::")
        assert (REPO_ROOT / file).exists(), path
        assert not test or f"def {test}(" in (REPO_ROOT / file).read_text(encoding="utf-8"), path
    covered = {p.partition("::")[0] for p in listed if p.partition("::")[0].endswith(".py")}
    folders = [p.rstrip("/") + "/" for p in listed if not p.endswith(".py")]
    users = sorted(str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "tests").rglob("test_*.py")
                   if "tests.tolerances import" in p.read_text(encoding="utf-8"))
    assert users, "no module uses tests.tolerances"
    missing = [p for p in users if p not in covered and not any(p.startswith(f) for f in folders)]
    assert not missing, f"compare float32 results two ways but are not rerun by .ci/kernel-sets: {missing}"
