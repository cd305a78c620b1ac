"""Train a seed group: S seeds of one config in one process, their parameters stacked on a seed axis
(``lightning_modules.models.seed_stack.SeedStack``), each seed still an ordinary run in its own folder.

What each seed gets is what its solo run (``experiments.train``) gets: its initialisation (``seed_everything``
with its seed before the module is built), its batches (``StepBatches`` drawn from its seed), its own optimizer
and scheduler state (slices of the stacked optimizer's, which steps one flat buffer of all seeds' parameters per
parameter group, fused where the device has the kernel), gradient clipping by its own global norm, validation,
``best.ckpt`` (lowest ``val/loss``), ``last.ckpt`` (and those ``train.keep_every`` keeps), a CSV log
(``csv/version_K``), a W&B run with its run id and ``DONE``, so ``evaluate``, ``aggregate``, ``status`` and
every analysis see ordinary runs. With every dropout at 0 a seed ends where its solo run ends (float rounding
apart). With dropout, the group draws one mask per seed from one generator reseeded at every step from the
group's first seed: the masks differ from the solo run's, so such runs record the group in
``runtime.seed_group`` and their run ids differ from the solo ones.

Faults, per seed: a seed with ``DONE`` is not trained again; a seed whose training loss is not finite fails
alone (its ``FAILED`` line) while the others carry on; ``SIGUSR1``/``SIGTERM`` save ``last.ckpt`` of every
seed at the step boundary (SIGUSR1 then requeues the SLURM task); a rerun resumes every seed from its
``last.ckpt`` (seeds whose checkpoints are at different steps train as separate groups, one after another).
Checkpoints hold the solo format's keys (``state_dict``, ``optimizer_states``, ``lr_schedulers``,
``global_step``, ``synbench``), so evaluation loads them as any other; a group resumes from a solo run's
``last.ckpt`` too, but a solo run does not resume from a group's (Lightning's loop state is not written).
"""

from __future__ import annotations

import math
import signal
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from experiments.runs import DONE, FAILED, kept_checkpoint, write_done, write_failed, write_heartbeat
from experiments.seed_grouping import group_seed
from lightning_modules.errors import InputError
from lightning_modules.models.compiled import compile_mode

# 32-true, or bf16 autocast with fp32 weights (Lightning's bf16-mixed, as a solo run on a GPU trains)
GROUP_PRECISIONS = ("32-true", "bf16-mixed")


def train_group(cfg: dict[str, Any], seeds: Sequence[int], run_dirs: Sequence[Path]) -> dict[int, dict[str, Any]]:
    """Train (or resume) the seeds ``seeds`` of ``cfg`` into ``run_dirs`` (one per seed); returns the final
    metrics of each seed that finished (a failed seed is absent, its ``FAILED`` says why)."""
    from experiments.train import start_run

    if len(seeds) != len(run_dirs) or len(set(seeds)) != len(seeds):
        raise ValueError("one run folder per distinct seed")
    results: dict[int, dict[str, Any]] = {}
    pending: list[tuple[int, Path]] = []
    for seed, run_dir in zip(seeds, map(Path, run_dirs), strict=True):
        finished = start_run(cfg, seed, run_dir)
        if finished is None:
            pending.append((seed, run_dir))
        else:
            results[seed] = finished
    if not pending:
        return results
    try:
        results.update(_train_pending(cfg, pending, group_seed(cfg, seeds)))
    except BaseException as e:  # as a solo run: every seed still training records why the group stopped
        if not isinstance(e, KeyboardInterrupt | SystemExit):
            for _, run_dir in pending:  # a seed that failed alone keeps its own reason
                if not (run_dir / DONE).exists() and not (run_dir / FAILED).exists():
                    write_failed(run_dir, str(e) or type(e).__name__)
        raise
    return results


def _train_pending(cfg: dict[str, Any], pending: list[tuple[int, Path]], group_seed: int) -> dict[int, dict[str, Any]]:
    """Train the seeds not yet done; ``group_seed`` (``seed_grouping.group_seed``) seeds the dropout masks."""
    import pytorch_lightning as pl

    from experiments.checkpoints import read_checkpoint
    from experiments.families import get_family
    from experiments.train import set_threads, trainer_hardware
    from lightning_modules.data.atomic import remove_temporaries
    from lightning_modules.models.seed_stack import stackable

    results: dict[int, dict[str, Any]] = {}
    rt = cfg["runtime"]
    hardware = trainer_hardware(rt)
    compile_mode(rt)  # a bad value fails before the data is built
    if hardware["devices"] != 1 or hardware["precision"] not in GROUP_PRECISIONS:
        raise InputError(f"a seed group trains on one device in {' or '.join(GROUP_PRECISIONS)} precision",
                         "--seeds")
    set_threads(rt)
    torch.use_deterministic_algorithms(bool(cfg["train"].get("deterministic", True)), warn_only=True)
    family = get_family(cfg["family"])
    pl.seed_everything(pending[0][0], workers=True, verbose=False)
    data = family.build_data(cfg)
    device = _device(hardware["accelerator"])

    members = []
    for seed, run_dir in pending:
        pl.seed_everything(seed, workers=True, verbose=False)  # as the solo run: initialisation from the seed
        module = family.build_module(cfg, data)
        if not stackable(module):
            why = family.seed_stack_refusal or f"{type(module).__name__} has no stacked form"
            raise InputError(f"{cfg['family']} cannot train seeds as a group ({why}): train one seed per process "
                             "(--seed)", "--seeds")
        for folder in (run_dir, run_dir / "checkpoints"):
            remove_temporaries(folder)
        last = run_dir / "checkpoints" / "last.ckpt"
        resume = read_checkpoint(last, cfg["family"]) if last.exists() else None
        members.append(_Member(seed, run_dir, module.to(device), resume))
    by_step: dict[int, list[_Member]] = {}
    for m in members:  # seeds at different steps (an earlier failure) train as separate groups
        by_step.setdefault(m.start_step, []).append(m)
    for _, group in sorted(by_step.items()):
        results.update(_GroupRun(cfg, family, data, group, group_seed).fit())
    return results


def _device(accelerator: str) -> torch.device:
    if accelerator in ("cuda", "gpu") or (accelerator == "auto" and torch.cuda.is_available()):
        return torch.device("cuda")
    return torch.device("cpu")


@dataclass
class _Member:
    """One seed of a group: its folder, its freshly initialised module and the checkpoint it resumes from."""

    seed: int
    run_dir: Path
    module: Any
    resume: dict[str, Any] | None
    alive: bool = True
    best: float | None = None
    loggers: list[Any] = field(default_factory=list)

    @property
    def start_step(self) -> int:
        return int(self.resume["global_step"]) if self.resume else 0


class _GroupRun:
    """The training loop of one group whose seeds all start at the same step."""

    SIGNALS = (signal.SIGUSR1, signal.SIGTERM)

    def __init__(self, cfg: dict[str, Any], family: Any, data: Any, members: list[_Member], group_seed: int):
        from experiments.checkpoints import FORMAT_VERSION

        self.cfg, self.family, self.data, self.members = cfg, family, data, members
        self.group_seed = group_seed
        self.tc = cfg["train"]
        self.stack = family.seed_stack([m.module for m in members]).compile(compile_mode(cfg["runtime"]))
        configured = self.stack.configured  # the module's configure_optimizers, over the stack's flat buffers
        self.optimizer = self.stack.optimizer
        scheduler = configured.get("lr_scheduler") if isinstance(configured, dict) else None
        if isinstance(scheduler, dict):
            if scheduler.get("interval", "epoch") != "step":
                raise InputError("a seed group needs a learning rate stepped per optimizer step", "--seeds")
            scheduler = scheduler["scheduler"]
        self.scheduler = scheduler
        self.step = members[0].start_step
        self.bf16 = cfg["runtime"].get("precision", "32-true") == "bf16-mixed"
        self.payload = {m.seed: {"format": FORMAT_VERSION, "family": cfg["family"], "config": cfg, "seed": m.seed,
                                 "vocab": data.vocab} for m in members}
        self.received: int | None = None
        self._beat = 0.0
        device = next(iter(self.stack.parameters().values())).device
        self._weights = torch.ones(len(members), device=device)  # 0 for a seed that failed: no gradient
        self._window: list[torch.Tensor] = []  # each step's losses [S] on the device, until ``_flush``
        if members[0].resume:
            self._restore()

    # ---- state ---------------------------------------------------------------------------------------------
    def _restore(self) -> None:
        """Every seed's parameters, optimizer and scheduler state and best score from its ``last.ckpt``."""
        states = []
        for i, m in enumerate(self.members):
            self.stack.load_state_dict(i, m.resume["state_dict"])
            states.append(m.resume["optimizer_states"][0])
            m.best = _best_score(m.resume)
        self.stack.load_optimizer_states(states)
        if self.scheduler is not None:
            self.scheduler.load_state_dict(self.members[0].resume["lr_schedulers"][0])

    def _checkpoint(self, i: int) -> dict[str, Any]:
        """Seed ``i``'s checkpoint in the solo format (its slices of the stacked state)."""
        from lightning_modules.models.seed_stack import plain_state

        m = self.members[i]
        return {"state_dict": self.stack.state_dict(i), "optimizer_states": [self.stack.optimizer_state(i)],
                "lr_schedulers": [plain_state(self.scheduler.state_dict())] if self.scheduler is not None else [],
                "global_step": self.step, "epoch": 0, "seed_group": {"best_val_loss": m.best},
                "synbench": self.payload[m.seed]}

    def _save(self, i: int, name: str) -> None:
        import lightning_modules.data.atomic as atomic

        path = self.members[i].run_dir / "checkpoints" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        ckpt = self._checkpoint(i)
        atomic.atomic_write_with(path, lambda f: torch.save(ckpt, f))

    # ---- the loop ------------------------------------------------------------------------------------------
    def fit(self) -> dict[int, dict[str, Any]]:
        from experiments.batching import StepBatches
        from experiments.training_callbacks import step_seed

        tc = self.tc
        acc, max_steps = int(tc.get("accumulate", 1)), int(tc["max_steps"])
        val_every, ckpt_every, keep_every = int(tc["val_every"]), int(tc["ckpt_every"]), tc.get("keep_every")
        log_every, clip = int(tc.get("log_every", 10)), float(self.stack.stacked.config.grad_clip_norm)
        start = self.step * acc
        streams: list[Iterator[Any]] = []
        for m in self.members:
            batches = self.data.train_batches(int(tc["batch_size"]), m.seed, lambda: start)
            if batches is None:
                batches = StepBatches(self.data.train, int(tc["batch_size"]), m.seed, self.data.collate,
                                      consumed=lambda: start)
            streams.append(iter(batches))
        self._open_logs()
        previous = self._install_handlers()
        self._timed = (time.perf_counter(), self.step)
        try:
            self.stack.train(True)
            for m in self.members:
                write_heartbeat(m.run_dir, self.step)
            while self.step < max_steps and any(m.alive for m in self.members):
                losses = torch.zeros(len(self.members), device=self._weights.device)
                for a in range(acc):
                    torch.manual_seed(step_seed(self.group_seed, self.step * acc + a))
                    slices = self.stack.step_batches([next(s) for s in streams])
                    losses += self.stack.backward(slices, self._weights / acc, self._autocast) / acc
                    if (self.step * acc + a + 1) % val_every == 0 and a < acc - 1:  # Lightning counts batches
                        self._validate(self.step)
                self.stack.update(clip)
                self.optimizer.zero_grad(set_to_none=True)
                if self.scheduler is not None:
                    self.scheduler.step()
                self.step += 1
                self._window.append(losses)
                self._heartbeat()
                if self.step % log_every == 0:
                    self._flush()
                if (self.step * acc) % val_every == 0:
                    self._validate(self.step)
                if keep_every and self.step % int(keep_every) == 0:  # before last.ckpt, as solo runs keep them
                    self._flush()
                    for i, m in enumerate(self.members):
                        if m.alive:
                            self._save(i, kept_checkpoint(self.step))
                if self.received is not None or (ckpt_every > 0 and self.step % ckpt_every == 0):
                    self._flush()
                    for i, m in enumerate(self.members):
                        if m.alive:
                            self._save(i, "last.ckpt")
                if self.received is not None:
                    self._preempt()
            self._flush()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        return self._finish(max_steps)

    def _autocast(self) -> Any:
        """bf16 autocast of the forward under ``bf16-mixed`` (the parameters, gradients and Adam stay fp32)."""
        return torch.autocast(self._weights.device.type, dtype=torch.bfloat16, enabled=self.bf16)

    def _to_device(self, batch: Any) -> Any:
        """A group batch, packed on the host, on the group's device: one copy per tensor (pinned, asynchronous on
        CUDA)."""
        from lightning_modules.models.seed_stack import group_batch_to

        return group_batch_to(batch, self._weights.device)

    def _flush(self) -> None:
        """Read the losses of the steps since the last flush from the device (the only host sync of the loop
        outside validation and checkpoints): log each seed's training loss every ``train.log_every`` steps; a seed
        whose loss is not finite fails alone, at the first such step."""
        if not self._window:
            return
        log_every = int(self.tc.get("log_every", 10))
        window, first = torch.stack(self._window).cpu(), self.step - len(self._window)
        self._window = []
        for i, m in enumerate(self.members):
            for k, value in enumerate(window[:, i].tolist()):
                if not m.alive:
                    break
                step = first + k
                if not math.isfinite(value):
                    m.alive = False
                    self._weights[i] = 0.0
                    error = InputError(f"training loss is {value} (diverged); lower model.peak_lr or check the data",
                                       f"training step {step}")
                    write_failed(m.run_dir, str(error))
                    print(f"synbench: seed {m.seed}: {error}", file=sys.stderr, flush=True)
                    self._close_logs(m, "failed")
                elif (step + 1) % log_every == 0:
                    self._log(m, {"train/loss": value}, step)

    def _heartbeat(self) -> None:
        """Every living seed's heartbeat, at most every 10 s."""
        now = time.time()
        if now - self._beat >= 10.0:
            self._beat = now
            for m in self.members:
                if m.alive:
                    write_heartbeat(m.run_dir, self.step, now)

    @torch.no_grad()
    def _validate(self, step: int) -> None:
        """Every seed's token-level validation NLL on the same batches; a better one is its ``best.ckpt``."""
        self._flush()  # a seed that failed is neither validated nor saved
        limit = self.tc.get("limit_val_batches") or 1.0
        batches = list(self.data.valid_batches(int(self.tc.get("eval_batch_size", self.tc["batch_size"]))))
        batches = batches[:int(limit)] if isinstance(limit, int) else batches[:int(len(batches) * limit)]
        self.stack.train(False)
        total = torch.zeros(len(self.members), dtype=torch.float64)
        count = torch.zeros(len(self.members), dtype=torch.float64)
        for batch in batches:
            with self._autocast():
                _, t, c = self.stack.losses(self._to_device(self.stack.single(batch)), batched=False)
            total += t.double().cpu()
            count += c.double().cpu()
        self.stack.train(True)
        for i, m in enumerate(self.members):
            if not m.alive:
                continue
            loss = float(total[i] / count[i]) if count[i] else float("nan")
            self._log(m, {"val/loss": loss, "val/nll_sum": float(total[i]), "val/tokens": float(count[i])},
                      step - 1)
            if math.isfinite(loss) and (m.best is None or loss < m.best):
                m.best = loss
                self._save(i, "best.ckpt")
            for logger in m.loggers:
                logger.save()

    def _cost(self, module: Any) -> dict[str, Any]:
        """The ``training_cost`` fields of a seed: its parameters, the device, and the group attempt's timing
        (every seed of the group advances that many steps per second)."""
        from experiments.training_cost import cost_fields

        device = next(iter(self.stack.parameters().values())).device
        timed = (time.perf_counter() - self._timed[0], self.step - self._timed[1])
        per_step = int(self.tc["batch_size"]) * int(self.tc.get("accumulate", 1))
        return cost_fields(module, device, timed, self.data.stats, per_step)

    def _finish(self, max_steps: int) -> dict[int, dict[str, Any]]:
        results = {}
        for i, m in enumerate(self.members):
            if not m.alive:
                continue
            best = m.run_dir / "checkpoints" / "best.ckpt"
            if max_steps == 0 and not best.exists():  # an untrained model (a random-initialisation baseline)
                self._save(i, "best.ckpt")
            self._close_logs(m, "success")
            metrics = {"best_val_loss": m.best, "global_step": self.step, "family": self.cfg["family"],
                       "seed": m.seed}
            solo = self.stack.solo_module(i)
            metrics.update(self._cost(solo))
            metrics.update(self.family.final_metrics(solo, self.data, str(best) if best.exists() else ""))
            results[m.seed] = write_done(m.run_dir, metrics)
        return results

    # ---- logs ----------------------------------------------------------------------------------------------
    def _open_logs(self) -> None:
        from pytorch_lightning.loggers import CSVLogger

        from experiments.train import wandb_logger

        for m in self.members:
            m.loggers = [CSVLogger(save_dir=str(m.run_dir), name="csv")]
            m.loggers[0].log_hyperparams(m.module.hparams)
            if self.cfg["runtime"].get("wandb", "offline") != "disabled":
                m.loggers.append(wandb_logger(self.cfg, m.seed, m.run_dir, reinit="create_new"))

    @staticmethod
    def _log(m: _Member, metrics: dict[str, float], step: int) -> None:
        for logger in m.loggers:
            logger.log_metrics({**metrics, "epoch": 0}, step=step)

    @staticmethod
    def _close_logs(m: _Member, status: str) -> None:
        from pytorch_lightning.loggers import WandbLogger

        for logger in m.loggers:
            logger.finalize(status)
            if isinstance(logger, WandbLogger) and logger._experiment is not None:
                logger.experiment.finish()
        m.loggers = []

    # ---- preemption ----------------------------------------------------------------------------------------
    def _install_handlers(self) -> dict[int, Any]:
        if threading.current_thread() is not threading.main_thread():
            return {}

        def handler(signum: int, frame: Any) -> None:
            self.received = self.received or signum

        return {signum: signal.signal(signum, handler) for signum in self.SIGNALS}

    def _preempt(self) -> None:
        """Every seed's ``last.ckpt`` is saved: close the logs, requeue on SIGUSR1, stop (``Preempted``)."""
        from experiments.training_callbacks import Preempted, requeue_slurm_task

        for m in self.members:
            self._close_logs(m, "preempted")
        requeued = requeue_slurm_task() if self.received == signal.SIGUSR1 else None
        raise Preempted(self.received, self.step, requeued)


def _best_score(ckpt: dict[str, Any]) -> float | None:
    """The best validation loss so far recorded in a checkpoint: a group's, or a solo run's ModelCheckpoint."""
    if "seed_group" in ckpt:
        return ckpt["seed_group"]["best_val_loss"]
    for key, state in ckpt.get("callbacks", {}).items():
        if key.startswith("ModelCheckpoint") and state.get("best_model_score") is not None:
            return float(state["best_model_score"])
    return None
