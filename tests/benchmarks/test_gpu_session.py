"""benchmarks/gpu_session.sh, read as text: its GPU steps' time limits sum to the 8-minute bound (480 s) a lent
device allows, every step names a benchmark script that exists, and the --cpu-check branch has the same steps
(step 7, compiled FlexAttention, is GPU only), so checking the script on the CPU covers what the GPU will run."""

from __future__ import annotations

import re
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_session.sh"
STEP = re.compile(r"^\s*step (\d+) (\S+) (\d+) \"\$PY\" (benchmarks/\S+\.py)", re.M)


def _branches() -> tuple[str, str]:
    text = SCRIPT.read_text()
    body = text[text.index('if [ "$mode" = cuda ]; then\n  #'):]
    cuda, cpu = body.split("\nelse\n", 1)
    return cuda, cpu.split("\nfi\n", 1)[0]


def test_the_gpu_steps_fit_eight_minutes_and_name_existing_scripts() -> None:
    cuda, cpu = _branches()
    gpu = STEP.findall(cuda)
    assert len(gpu) >= 11 and sum(int(limit) for _, _, limit, _ in gpu) <= 480
    for _, _, _, script in gpu:
        assert (SCRIPT.parents[1] / script).is_file(), script
    on_cpu = {(n, name, script) for n, name, _, script in STEP.findall(cpu)}
    assert {(n, name, script) for n, name, _, script in gpu} - on_cpu == {("7", "attention", "benchmarks/attention.py")}
