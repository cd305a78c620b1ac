"""SLURM executor: one ``sbatch --array`` job per submission, one array task per run, driven by a manifest.

The script is rendered from ``slurm/array.sbatch.tmpl``; every inserted value is shell-quoted
(``shlex.quote``, which sbatch's ``#SBATCH`` parser also understands) and values with newlines, NUL or
backslashes are refused, so no option value can inject a directive or a command. Each task ``exec``s the
training command of its manifest line, and the time-limit signal goes to the batch process
(``--signal=B:SIGUSR1@90``; without ``B:`` SLURM signals only ``srun`` steps, of which there are none), so it
reaches the training process, which checkpoints and requeues its own task (``--requeue``); the requeued task
resumes from the run folder.

GPUs: ``gpus: N`` (with ``gpu_type``) requests ``--gres=gpu[:TYPE]:N`` per task, ``cpus_per_gpu`` and
``mem_per_gpu`` the CPUs and memory per GPU (SLURM's ``--cpus-per-gpu`` / ``--mem-per-gpu``, which replace
``--cpus-per-task`` / ``--mem``). ``runs_per_gpu: K`` packs K runs per GPU into each array task (K x the GPUs
of a task): the task runs ``experiments.launchers.pack`` over K consecutive manifest lines, each its own
process and run folder, sharing the task's GPUs and CPUs (small models leave most of a GPU idle). ``mps: true``
runs the packer under the task's own NVIDIA MPS control daemon (``slurm/with-mps.sh``: per-task pipe and log
folders under the node's ``$TMPDIR``, stopped and removed on every exit path), so the K runs share each GPU
through one MPS server instead of time-slicing it. Off by default: MPS changes no result, only speed, and a
node without ``nvidia-cuda-mps-control`` fails such a task at once.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from experiments.launchers.manifest import Task, write_manifest
from experiments.runs import JobStatus, prepare_submission, write_queued
from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.errors import InputError

TEMPLATE = Path(__file__).resolve().parents[2] / "slurm" / "array.sbatch.tmpl"
WITH_MPS = TEMPLATE.parent / "with-mps.sh"
EXECUTOR = "slurm"

# Job states after which a task never runs again (everything else is queued, running or about to requeue).
ENDED_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
    "REVOKED",
}
OPTION_NAME = re.compile(r"[a-z][a-z0-9-]*")


@dataclass(frozen=True)
class SlurmOptions:
    """Resources and placement of each array task (``launcher.slurm`` in an experiment spec)."""

    partition: str | None = None
    time: str = "01:00:00"
    cpus_per_task: int = 1
    mem: str | None = "2G"
    gres: str | None = None
    gpus: int | None = None
    gpu_type: str | None = None
    cpus_per_gpu: int | None = None
    mem_per_gpu: str | None = None
    runs_per_gpu: int = 1
    mps: bool = False
    account: str | None = None
    qos: str | None = None
    max_parallel: int = 32
    job_name: str | None = None
    additional: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any], where: str = "launcher.slurm") -> SlurmOptions:
        """Validated options from a spec's ``launcher.slurm`` mapping; errors name ``where``."""
        known = set(cls.__dataclass_fields__)
        for key in options:
            if key not in known:
                raise InputError(
                    f"launcher.slurm.{key}: unknown option (known: {', '.join(sorted(known))})", where
                )
        for key in ("cpus_per_task", "max_parallel", "gpus", "cpus_per_gpu", "runs_per_gpu"):
            value = options.get(key, 1)
            if value is None and key in ("gpus", "cpus_per_gpu"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"launcher.slurm.{key}: expected a positive integer, got {value!r}", where)
        if options.get("gres") is not None and options.get("gpus") is not None:
            raise InputError("launcher.slurm.gres: give either gres or gpus (which writes --gres=gpu:N)", where)
        for key in ("gpu_type", "cpus_per_gpu", "mem_per_gpu"):
            if options.get(key) is not None and options.get("gpus") is None:
                raise InputError(f"launcher.slurm.{key}: needs launcher.slurm.gpus (the GPUs per task)", where)
        if not isinstance(options.get("mps", False), bool):
            raise InputError(f"launcher.slurm.mps: expected true or false, got {options['mps']!r}", where)
        if "time" in options and not isinstance(options["time"], str):
            raise InputError(
                f'launcher.slurm.time: expected a string like "01:00:00" (quote it: YAML reads '
                f"unquoted 10:00 as the number 600), got {options['time']!r}",
                where,
            )
        strings = ("partition", "time", "mem", "gres", "gpu_type", "mem_per_gpu", "account", "qos", "job_name")
        for key in strings:
            value = options.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, str | int)):
                raise InputError(f"launcher.slurm.{key}: expected a string, got {value!r}", where)
        additional = options.get("additional", {}) or {}
        if not isinstance(additional, dict) or not all(
            isinstance(k, str) and OPTION_NAME.fullmatch(k) for k in additional
        ):
            raise InputError(
                "launcher.slurm.additional: expected a mapping of sbatch option names "
                "(e.g. constraint) to values",
                where,
            )
        fields = {k: str(v) if k in strings and v is not None else v for k, v in options.items()}
        fields["additional"] = {k: str(v) for k, v in additional.items()}
        if fields.get("mem_per_gpu") is not None:
            fields["mem"] = None  # SLURM refuses --mem beside --mem-per-gpu
        return cls(**fields)

    @property
    def runs_per_task(self) -> int:
        """Runs packed into one array task: ``runs_per_gpu`` for each of its GPUs (at least one)."""
        return self.runs_per_gpu * (self.gpus or 1)

    @property
    def gpu_gres(self) -> str | None:
        """The ``--gres`` value: ``gres`` as given, or ``gpu[:TYPE]:N`` from ``gpus``."""
        if self.gpus is None:
            return self.gres
        return f"gpu:{self.gpu_type}:{self.gpus}" if self.gpu_type else f"gpu:{self.gpus}"


def _safe(value: str, what: str) -> str:
    """Shell-quote one value; refuse characters that no quoting makes safe in an ``#SBATCH`` line."""
    value = str(value)
    if any(c in value for c in "\n\r\0\\"):
        raise InputError(f"{what}: newlines, NUL bytes and backslashes are not allowed ({value!r})")
    return shlex.quote(value)


def _directives(options: SlurmOptions) -> list[str]:
    pairs = [
        ("partition", options.partition),
        ("time", options.time),
        ("cpus-per-task", options.cpus_per_task if options.cpus_per_gpu is None else None),
        ("mem", options.mem),
        ("gres", options.gpu_gres),
        ("cpus-per-gpu", options.cpus_per_gpu),
        ("mem-per-gpu", options.mem_per_gpu),
        ("account", options.account),
        ("qos", options.qos),
        *options.additional.items(),
    ]
    return [
        f"#SBATCH --{name}={_safe(value, f'launcher.slurm.{name}')}"
        for name, value in pairs
        if value is not None
    ]


def render_array_script(
    experiment: str,
    n_runs: int,
    manifest: Path,
    log_dir: Path,
    options: SlurmOptions,
    workdir: Path,
    python: str = sys.executable,
    template: Path = TEMPLATE,
    with_mps: Path = WITH_MPS,
) -> str:
    """The sbatch script of an array over the ``n_runs`` lines of ``manifest``: task i runs lines
    ``i·P .. i·P + P - 1`` (P = ``options.runs_per_task``; one line per task by default); with ``options.mps``
    the packer runs under ``with_mps`` (the task's own MPS daemon)."""
    if n_runs < 1:
        raise InputError("nothing to submit (no runs)")
    per_task = options.runs_per_task
    n_tasks = -(-n_runs // per_task)
    # sbatch expands %A, %a, %j... in --output; a literal % in the folder name must be doubled.
    output = str(Path(log_dir).resolve() / "slurm-%A_%a.out")
    output = output[: output.rindex("/")].replace("%", "%%") + "/slurm-%A_%a.out"
    values = {
        "EXPERIMENT": _safe(experiment, "experiment name"),
        "N_RUNS": str(n_runs),
        "RUNS_PER_TASK": str(per_task),
        "JOB_NAME": _safe(options.job_name or f"synbench-{experiment}", "launcher.slurm.job_name"),
        "LAST_INDEX": str(n_tasks - 1),
        "MAX_PARALLEL": str(options.max_parallel),
        "OUTPUT": _safe(output, "log folder"),
        "WORKDIR": _safe(str(Path(workdir).resolve()), "working directory"),
        "PYTHON": _safe(python, "python interpreter"),
        "MPS": f"bash {_safe(str(Path(with_mps).resolve()), 'MPS wrapper path')} " if options.mps else "",
        "MANIFEST": _safe(str(Path(manifest).resolve()), "manifest path"),
    }
    directives = _directives(options)
    text = template.read_text().replace("@OPTIONS@\n", "".join(line + "\n" for line in directives))
    for key, value in values.items():
        text = text.replace(f"@{key}@", value)
    left = re.findall(r"@[A-Z_]+@", text)
    if left:
        raise ValueError(f"{template}: unknown placeholder {left[0]}")
    return text


def _run(cmd: list[str], what: str) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    except FileNotFoundError:
        raise InputError(f"{cmd[0]} not found: is SLURM installed here? (use --executor local)") from None
    if done.returncode != 0:
        raise InputError(f"{what} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def sbatch(args: list[str]) -> str:
    """Run ``sbatch --parsable ARGS``; returns the job id (without the cluster name)."""
    out = _run(["sbatch", "--parsable", *args], "sbatch").strip()
    job_id = out.split(";")[0]
    if not job_id.isdigit():
        raise InputError(f"sbatch printed {out!r}, not a job id")
    return job_id


def submission_dir(exp_dir: Path) -> Path:
    """A new ``EXP/submissions/<time>-<n>`` folder for one submission's manifest and script."""
    base = Path(exp_dir) / "submissions"
    base.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for n in range(1000):
        folder = base / f"{stamp}-{n}"
        try:
            folder.mkdir()
            return folder
        except FileExistsError:
            continue
    raise InputError("cannot create a submission folder", str(base))


def submit_array(
    tasks: list[Task],
    experiment: str,
    exp_dir: Path,
    options: SlurmOptions,
    workdir: Path | None = None,
    python: str = sys.executable,
) -> str:
    """Submit the tasks as one array job; writes manifest + script under ``EXP/submissions/`` and each run's
    ``QUEUED`` marker (job id ``<array>_<index>``). Returns the array job id."""
    folder = submission_dir(exp_dir)
    manifest = folder / "manifest.jsonl"
    write_manifest(manifest, tasks)
    log_dir = Path(exp_dir) / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    script = folder / "array.sbatch"
    atomic_write_text(
        script,
        render_array_script(
            experiment, len(tasks), manifest, log_dir, options, workdir or Path.cwd(), python
        ),
    )
    for task in tasks:
        for run_folder in task.run_dirs():
            prepare_submission(run_folder)
    submitted_at = time.time()
    job_id = sbatch([str(script)])
    for task in tasks:
        for run_folder in task.run_dirs():  # every run of a seed group is queued under its task
            write_queued(run_folder, EXECUTOR, f"{job_id}_{task.index // options.runs_per_task}", submitted_at)
    atomic_write_text(folder / "JOB_ID", job_id + "\n")
    return job_id


def max_array_size() -> int:
    """The cluster's ``MaxArraySize`` (``scontrol show config``; SLURM's default 1001): an array's task indices
    run from 0 to MaxArraySize - 1."""
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)", _run(["scontrol", "show", "config"], "scontrol show config"),
                      re.MULTILINE)
    return int(match.group(1)) if match else 1001


def submit_arrays(
    tasks: list[Task],
    experiment: str,
    exp_dir: Path,
    options: SlurmOptions,
    workdir: Path | None = None,
    python: str = sys.executable,
) -> list[str]:
    """Submit the tasks as array jobs of at most ``MaxArraySize`` tasks each (one job when they fit; each
    array's tasks indexed from 0 in its own manifest); returns the array job ids in order."""
    size = max_array_size() * options.runs_per_task
    return [
        submit_array([replace(task, index=i) for i, task in enumerate(tasks[start:start + size])], experiment,
                     exp_dir, options, workdir, python)
        for start in range(0, len(tasks), size)
    ]


def submit_after(
    argv: list[str],
    after: str,
    experiment: str,
    exp_dir: Path,
    options: SlurmOptions,
    workdir: Path | None = None,
    name: str = "aggregate",
) -> str:
    """Submit ``argv`` (e.g. ``synbench aggregate EXP``) to start when the jobs ``after`` (ids joined by ``:``)
    have ended, whatever their tasks' outcome (``--dependency=afterany``). Arguments go to sbatch as a list: no
    shell quoting issue."""
    log_dir = Path(exp_dir) / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    args = [
        f"--dependency=afterany:{after}",
        f"--job-name={options.job_name or f'synbench-{experiment}'}-{name}",
        f"--output={str(log_dir.resolve()).replace('%', '%%')}/{name}-%j.out",
        "--ntasks=1",
        "--cpus-per-task=1",
        f"--chdir={(workdir or Path.cwd()).resolve()}",
        f"--time={options.time}",
    ]
    args += [
        f"--{k}={v}"
        for k, v in (("partition", options.partition), ("account", options.account), ("qos", options.qos))
        if v is not None
    ]
    args.append("--wrap=exec " + shlex.join(argv))
    for arg in args:
        if any(c in arg for c in "\n\r\0"):
            raise InputError(f"newlines are not allowed in sbatch arguments ({arg!r})")
    return sbatch(args)


# --- job states ---


def _expand_ids(job_id: str) -> list[str]:
    """``12_[3-5,7%2]`` -> ``12_3 12_4 12_5 12_7``; other ids unchanged."""
    m = re.fullmatch(r"(\d+)_\[([^\]]+)\]", job_id)
    if not m:
        return [job_id]
    out = []
    for part in m[2].split("%")[0].split(","):
        lo, _, hi = part.partition("-")
        out += [f"{m[1]}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return out


def _parse_states(text: str) -> dict[str, str]:
    states: dict[str, str] = {}
    for line in text.splitlines():
        if "|" not in line:
            continue
        job_id, state = line.split("|", 1)
        for jid in _expand_ids(job_id.strip()):
            states[jid] = state.split()[0] if state.split() else "UNKNOWN"  # "CANCELLED by 0" -> CANCELLED
    return states


def job_states(job_ids: Iterable[str], poll_s: float = 5.0) -> dict[str, str]:
    """SLURM states of array tasks (``12_3``) or jobs (``12``).

    The controller's view first (``squeue -t all`` also lists recently ended jobs), then accounting
    (``sacct``) for jobs the controller has purged. sacct lags the controller by a few seconds, so ids found
    nowhere are polled for up to ``poll_s`` seconds."""
    wanted = list(dict.fromkeys(job_ids))
    if not wanted:
        return {}
    bases = sorted({j.split("_")[0] for j in wanted})
    states: dict[str, str] = {}
    done = subprocess.run(
        ["squeue", "-h", "-r", "-t", "all", "-o", "%i|%T", "-j", ",".join(bases)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if done.returncode == 0:  # an id the controller no longer knows makes squeue fail: sacct has it
        states.update(_parse_states(done.stdout))
    deadline = time.monotonic() + poll_s
    while True:
        missing = [j for j in wanted if j not in states]
        if not missing:
            break
        out = _run(
            [
                "sacct",
                "-n",
                "-P",
                "-X",
                "-o",
                "JobID,State",
                "-j",
                ",".join(sorted({j.split("_")[0] for j in missing})),
            ],
            "sacct",
        )
        states.update({j: s for j, s in _parse_states(out).items() if j not in states})
        if all(j in states for j in wanted) or time.monotonic() >= deadline:
            break
        time.sleep(0.5)
    return {j: states[j] for j in wanted if j in states}


def job_status(job_ids: Iterable[str], poll_s: float = 5.0) -> dict[str, JobStatus]:
    """``active`` or ``ended`` per job id (ids SLURM does not know are left out), for ``runs.run_status``."""
    return {j: "ended" if s in ENDED_STATES else "active" for j, s in job_states(job_ids, poll_s).items()}
