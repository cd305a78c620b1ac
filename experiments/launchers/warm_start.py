"""Warm start: local ``synbench`` tasks forked from an interpreter that has already imported torch and Lightning.

A local task is ``python -m experiments.cli ...`` (or an eval group, ``python -m experiments.eval_group ...``).
Started cold, each one spends about ten seconds on 2 cores importing torch, Lightning (which imports
torchmetrics, and through it scipy, transformers and matplotlib) before it does anything: a demo's forty tasks
pay minutes for it. Here such tasks are forked from a
``multiprocessing`` fork server that imported those libraries once (and nothing of synbench, so no module state
of ours is shared). Each task is still its own process: its own memory, environment, working directory, log
file and exit status (negative for a signal, as for a subprocess), and it is stopped alone. Any other argv (a
different interpreter, another program) starts as an ordinary subprocess.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import Protocol

# Imported once by the fork server: the libraries every task imports, none of synbench's own modules.
PRELOAD = ["torch", "pytorch_lightning", "transformers", "sentencepiece", "numpy", "scipy.stats", "pandas",
           "matplotlib.pyplot"]
# The task modules forked warm: module -> (its entry function, taking argv and returning the exit status; argv[0])
ENTRY_POINTS = {"experiments.cli": ("main", "synbench"),
                "experiments.eval_group": ("cli", "python -m experiments.eval_group")}
# Variables the preloaded libraries (or the interpreter) read once, at start or import: a task whose values differ
# from the fork server's starts cold. PYTHONPATH is applied in the child instead.
IMPORT_TIME = ("HF_", "HUGGINGFACE_", "TRANSFORMERS_", "TORCH", "PYTORCH_", "CUDA_", "ATEN_", "MKL_ENABLE",
               "ONEDNN_", "MPL", "PYTHON")

_start_lock = threading.Lock()
_server_env: dict[str, str] | None = None  # the import-time variables the fork server started with


def import_time_env(env: dict[str, str]) -> dict[str, str]:
    """The variables of ``env`` that take effect only when a process starts or imports (``IMPORT_TIME``)."""
    return {k: v for k, v in env.items() if k.startswith(IMPORT_TIME) and k != "PYTHONPATH"}


class Child(Protocol):
    """What the local executor needs of a started task."""

    def wait(self) -> int: ...

    def terminate(self) -> None: ...


class ForkedChild:
    """A task forked from the fork server (``wait`` returns its exit status, ``-N`` for signal N)."""

    def __init__(self, process: multiprocessing.process.BaseProcess):
        self.process = process

    def wait(self) -> int:
        self.process.join()
        return int(self.process.exitcode)

    def terminate(self) -> None:
        self.process.terminate()


def forkable(argv: Sequence[str]) -> bool:
    """Whether ``argv`` is this interpreter running a task module (``ENTRY_POINTS``) on a platform with a fork
    server."""
    # the path as written, not resolved: another virtual environment's python links to the same binary
    return (len(argv) > 3 and argv[1] == "-m" and argv[2] in ENTRY_POINTS
            and os.path.abspath(argv[0]) == os.path.abspath(sys.executable)
            and "forkserver" in multiprocessing.get_all_start_methods())


def start(argv: Sequence[str], log: str, env: dict[str, str], cwd: str | None, threads: int) -> Child:
    """Start the task ``argv`` with stdout and stderr appended to ``log``: forked warm where ``forkable``, else as a
    subprocess."""
    global _server_env
    cwd = cwd or os.getcwd()
    warm = forkable(argv)
    if warm:
        with _start_lock:
            if _server_env is None:  # the fork server is about to start, with this process's environment
                _server_env = import_time_env(dict(os.environ))
            warm = import_time_env(env) == _server_env
    if not warm:
        with open(log, "ab") as out:
            return subprocess.Popen(list(argv), stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                    stdin=subprocess.DEVNULL)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    process = context.Process(target=_run_task, args=(argv[2], list(argv[3:]), log, dict(env), cwd, threads),
                              name=f"synbench-task-{os.path.basename(log)}")
    with _start_lock:  # one connection to the fork server at a time
        process.start()
    return ForkedChild(process)


def _run_task(module: str, args: list[str], log: str, env: dict[str, str], cwd: str, threads: int) -> None:
    """In the forked child: become the task (output, environment, folder, threads), run the module's entry point,
    exit with its status after the interpreter's exit handlers (``multiprocessing`` children skip them otherwise)."""
    import atexit
    import importlib

    import torch

    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(env)
    sys.path[:0] = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in sys.path]
    os.chdir(cwd)
    # OpenMP read OMP_NUM_THREADS when the fork server loaded torch; the task's value is set here
    torch.set_num_threads(threads)
    entry, argv0 = ENTRY_POINTS[module]
    sys.argv = [argv0, *args]
    code = 1
    try:
        code = getattr(importlib.import_module(module), entry)(args)
    finally:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    sys.exit(code)
