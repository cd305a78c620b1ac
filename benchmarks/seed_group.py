"""Seed groups vs solo runs: seed-steps per second and peak memory per seed for groups of S seeds.

For each S, two measurements, each in a fresh process (so its peak memory is its own), interleaved
(solo, group, solo, group, ... ``--repeats`` times each, so a change of load on a shared machine hits both;
the best of the repeats is reported, and the load average before and after is printed): ``solo``, S modules
(seeds 0..S-1) each trained for ``--steps`` steps one after another, as S solo processes would (forward,
backward, clipping, Adam; the step loop alone: no process start-up, data loading or Lightning bookkeeping,
which a group shares too); ``group``, the same S seeds trained together as one ``SeedStack`` (one vmapped
forward and backward, per-seed clipping, one stacked Adam). One warm-up step precedes the timed steps.
Seed-steps/s = S × steps / seconds. Peak memory per seed: on CUDA ``max_memory_allocated`` / S; on the CPU
the growth of the process's peak RSS over training / S (allocator caching makes it coarse).

On the CPU this checks correctness of the plumbing more than speed (CPU matrix products are already large
enough at one seed: expect groups at or below solo speed). The GPU rows (``ptb``, ``bllip``) need a CUDA
device; without one they are printed as not measured. The ``reproduce-tg-paper`` device-hours (training, solo,
MPS and groups; evaluation) are ``benchmarks/paper_cost.py --train`` and ``--eval``.

    python benchmarks/seed_group.py                       # CPU, cpu-small, S in 1 4 16, batch 4, 1 timed step
    python benchmarks/seed_group.py --device cuda --preset ptb --sizes 1 4 16 64 --steps 20 --batch-size 32

``--padding`` trains nothing: for the same seeds' batches of the measured steps (warm-up included) it prints the
useful-token fraction (real tokens / computed token slots) and the attention area computed per useful one (query
× key pairs, memory columns included, against Σ n² over sentences) of solo runs, of the padded group (each chunk
padded to the largest seed's, ``SeedStack.stack_chunks``: the longest of S × batch sentences sets everyone's
chunk count and length) and of the packed group the trainer runs (``SeedStack.batch``), and the line
``useful-token fraction S=N: F`` per size. Computable without a GPU:

    python benchmarks/seed_group.py --padding --preset ptb --sizes 1 8 16 32 64 --batch-size 16

``--kernels`` measures the group's attention against the path it replaced, in one process, interleaved (``math``,
``folded``, ``math``, ... ``--repeats`` times each, best of): ``folded``, the group as it trains
(``lightning_modules.layers.folded_attention``: the seed axis folded into the batch of one ordinary SDPA call,
forward and backward); ``math``, the path before it (SDPA called directly under vmap, with its own vmap rules,
inside ``sdpa_kernel(SDPBackend.MATH)``, which ``SeedStack.losses`` forced while training). Per S it prints the
kernels of one training step (the group's loss, backward, per-seed clipping and Adam on one packed batch of the
seeds' data; ``torch.profiler``: CUDA kernels on a GPU, leaf ``aten::`` operators on the CPU) and which SDPA
operators ran with how many calls, the step's time without the profiler, and the time (and on CUDA the peak
memory) of one attention call alone, forward and backward, at the step's attention shape: S seeds × batch × heads
× ``--length`` queries and keys (default the config's segment length), an additive bias needing a gradient (as
the Transformer-XL position bias) and the config's attention dropout. On the CPU both paths run SDPA's math
kernel where the bias needs a gradient (SDPA's CPU flash kernel has none: ``folded_attention``):

    python benchmarks/seed_group.py --kernels --sizes 1 4 --batch-size 4
    python benchmarks/seed_group.py --kernels --device cuda --preset ptb --sizes 1 8 32 --batch-size 16


``--phases`` (Transformer-XL core families) measures, in this one process, the loss and the optimizer of the
group against what they replaced, on the same batches:

* the loss: ``full`` (the reference: logits [S, B, L, V] at every position, upcast, as the loss was computed,
  ``labelled_loss.full_logits_nll``) against ``chunked`` (the module's loss: the head at labelled positions alone,
  a chunk of rows at a time), interleaved (full, chunked, full, ... ``--repeats`` times), each a fresh
  ``SeedStack`` trained one warm-up and ``--steps`` timed steps; seed-steps/s, and peak memory per seed on CUDA
  (``max_memory_allocated`` growth / S). On the CPU the peak is not measurable (the allocator is not torch's):
  the logits avoided are given analytically instead, per seed and step, from the batches: full = the logits at
  every computed position and their float32 log-softmax kept for the backward (2 x positions x V x 4 bytes);
  chunked = at most one chunk's (2 x min(labelled, ``chunk_rows(V)``) x V x 4 bytes);
* the optimizer and clipping phase of one step: ``per-parameter`` (the reference, as before the flat buffers:
  one [S, ...] tensor per parameter, per-seed norms one kernel per parameter then stacked, one multiply per
  parameter, the module's optimizer with torch's default implementation) against ``flat`` (``clip_per_seed`` and
  the stack's optimizer: one [S, P] buffer per group, fused where available); operators (CPU: top-level aten
  operators; CUDA: kernels) counted by ``torch.profiler``, and the phase's time (best of ``--repeats``,
  interleaved).

    python benchmarks/seed_group.py --phases --sizes 1 4 --steps 2 --batch-size 4
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lightning_modules.models.compiled import COMPILE_MODES

if TYPE_CHECKING:
    import torch

REPO = Path(__file__).resolve().parents[1]


def measure(mode: str, size: int, args: argparse.Namespace) -> dict[str, float]:
    """Train ``size`` seeds (``mode``: solo | group) for ``args.steps`` timed steps in this process."""
    import pytorch_lightning as pl
    import torch

    from experiments.batching import StepBatches
    from experiments.config import resolve_train_config
    from experiments.families import get_family
    from lightning_modules.models.compiled import compile_module
    from lightning_modules.models.host_sync import no_host_sync
    from lightning_modules.models.seed_stack import SeedStack, group_batch_to

    torch.set_num_threads(args.threads)
    device = torch.device(args.device)
    cfg = resolve_train_config(args.family, args.preset, args.override)
    family = get_family(args.family)
    data = family.build_data(cfg)
    modules = []
    for seed in range(size):
        pl.seed_everything(seed, verbose=False)
        module = family.build_module(cfg, data).to(device).train()
        modules.append(compile_module(module, args.compile) if mode == "solo" else module)
    batch_size = args.batch_size
    streams = [iter(StepBatches(data.train, batch_size, seed, data.collate)) for seed in range(size)]
    clip = float(modules[0].config.grad_clip_norm)

    if mode == "group":
        stack = SeedStack(modules).compile(args.compile)
        optimizer = stack.optimizer  # the module's own (TG: Adam) over the flat buffers
        weights = torch.ones(size, device=device)

        def steps(n: int, check: bool = False) -> None:  # the group trainer's step (experiments/seed_group.py)
            for _ in range(n):
                slices = stack.step_batches([next(s) for s in streams])  # host: packing, the copies
                with no_host_sync(device) if check else contextlib.nullcontext():  # device: no sync inside
                    stack.backward(slices, weights)
                    stack.update(clip)
                    optimizer.zero_grad(set_to_none=True)
    else:
        optimizers = [m.configure_optimizers()["optimizer"] for m in modules]  # as a solo run's

        def steps(n: int) -> None:
            for module, optimizer, stream in zip(modules, optimizers, streams, strict=True):
                for _ in range(n):
                    total, count = module.nll(group_batch_to(next(stream), device))
                    (total / count.clamp(min=1)).backward()
                    torch.nn.utils.clip_grad_norm_(module.parameters(), clip)
                    optimizer.step()
                    optimizer.zero_grad(set_to_none=True)

    steps(1)  # warm-up (allocator, kernels)
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    start = time.perf_counter()
    if mode == "group":
        steps(args.steps, check=args.sync_check)
    else:
        steps(args.steps)
    if device.type == "cuda":
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    else:
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    seconds = time.perf_counter() - start
    return {"seed_steps_per_s": size * args.steps / seconds, "peak_mib_per_seed": (peak - base) / 2**20 / size,
            "seconds": seconds}


def padding(args: argparse.Namespace) -> None:
    """Useful-token fraction and attention area of a group's batches: padded (every seed's chunks padded to the
    largest seed's, ``SeedStack.stack_chunks``, the group before packing) and packed (``SeedStack.batch``:
    ``lightning_modules.models.packing``), against solo runs, for the same seeds' batches."""
    import pytorch_lightning as pl

    from experiments.batching import StepBatches
    from experiments.config import resolve_train_config
    from experiments.families import get_family
    from lightning_modules.models.packing import Part
    from lightning_modules.models.seed_stack import SeedStack, _field, as_chunks

    def _lengths(chunk: Any) -> torch.Tensor:
        """Each row's useful tokens: the queries that attend (a chunk's mask), ``lengths`` (a batch of whole
        sentences, as Pushdown-LM's), or the gold ``actions`` (a parser's decoder steps)."""
        mask = _field(chunk, "attn_mask")
        if mask is not None:
            return mask.any(-1).sum(-1)
        lengths = _field(chunk, "lengths")
        return lengths if lengths is not None else (_field(chunk, "actions") != 0).sum(-1)

    def _area(chunk: Any) -> int:
        """Query x key pairs computed: the mask's size, or rows x T x T without one."""
        mask = _field(chunk, "attn_mask")
        inputs = _field(chunk, "inputs")
        return mask.numel() if mask is not None else inputs.numel() * inputs.shape[-1]

    cfg = resolve_train_config(args.family, args.preset, args.override)
    family = get_family(args.family)
    data = family.build_data(cfg)
    pl.seed_everything(0, verbose=False)
    stack = SeedStack([family.build_module(cfg, data)])  # only its batch forms are used
    memory = int(cfg["model"].get("memory_length") or 0)
    print(f"# {args.family} {args.preset}: batch {args.batch_size} per seed, {args.steps + 1} steps (warm-up "
          f"included), memory {memory}. Useful tokens / computed token slots, and computed attention area "
          f"(query x key pairs) / the useful area (sum over sentences of n x n), summed over the steps")
    print(f"{'S':>4} {'solo tokens':>12} {'padded tokens':>14} {'packed tokens':>14} {'solo area':>10} "
          f"{'padded area':>12} {'packed area':>12}")
    fractions = {}
    for size in args.sizes:
        streams = [iter(StepBatches(data.train, args.batch_size, seed, data.collate)) for seed in range(size)]
        useful = solo = padded = packed = 0.0
        useful_area = solo_area = padded_area = packed_area = 0.0
        for _ in range(args.steps + 1):
            batches = [next(stream) for stream in streams]
            for batch in batches:
                chunks = as_chunks(batch)
                lengths = sum(_lengths(chunk) for chunk in chunks)
                useful += float(lengths.sum())
                useful_area += float((lengths.double() ** 2).sum())
                solo += sum(_field(chunk, "inputs").numel() for chunk in chunks)
                solo_area += sum(_area(chunk) for chunk in chunks)
            for chunk in stack.stack_chunks(batches):
                padded += chunk["inputs"].numel()
                padded_area += _area(chunk)
            for part in stack.batch(batches):
                for chunk in part.chunks if isinstance(part, Part) else [part]:
                    packed += chunk["inputs"].numel()
                    packed_area += _area(chunk)
        fractions[size] = useful / packed
        print(f"{size:>4} {useful / solo:>12.2f} {useful / padded:>14.2f} {useful / packed:>14.2f} "
              f"{solo_area / useful_area:>9.1f}x {padded_area / useful_area:>11.1f}x "
              f"{packed_area / useful_area:>11.1f}x", flush=True)
    for size, fraction in fractions.items():
        print(f"useful-token fraction S={size}: {fraction:.2f}")


def _setup(args: argparse.Namespace) -> tuple[Any, dict, Any, Any]:
    """The device, config, family and data of a measurement (``--threads`` torch threads)."""
    import torch

    from experiments.config import resolve_train_config
    from experiments.families import get_family

    torch.set_num_threads(args.threads)
    cfg = resolve_train_config(args.family, args.preset, args.override)
    family = get_family(args.family)
    return torch.device(args.device), cfg, family, family.build_data(cfg)


def full_logits_terms(module, chunks):
    """The reference loss terms (``_txl_terms`` on the full logits): mean NLL, NLL sum, count."""
    from lightning_modules.models.labelled_loss import full_logits_nll

    total, count = full_logits_nll(module, chunks)
    return total / count.clamp(min=1), total, count


def logits_bytes(group_batches, size: int, vocab: int) -> tuple[float, float]:
    """(full, chunked) bytes of logits alive at once per seed and step (``--phases``), the mean over the steps:
    full, every computed position's logits and log-softmax in float32; chunked, at most one chunk's."""
    from lightning_modules.models.labelled_loss import chunk_rows

    full = chunked = 0.0
    for batch in group_batches:
        positions, most = 0, 0
        for part in batch:  # a part over n seeds computes inputs.numel() / n positions for each of them
            for chunk in part.chunks:
                positions += chunk["inputs"].numel() / size
                most = max(most, min(chunk["label_index"].shape[-1], chunk_rows(vocab)))
        full += 2 * positions * vocab * 4
        chunked += 2 * most * vocab * 4
    return full / len(group_batches), chunked / len(group_batches)


def phases(args: argparse.Namespace) -> None:
    """The loss (full logits vs chunked at labelled positions) and the optimizer phase (per-parameter vs flat)
    of the group, against each other on the same batches (module docstring)."""
    import os

    import pytorch_lightning as pl
    import torch

    from experiments.batching import StepBatches
    from lightning_modules.models.seed_stack import SeedStack

    device, cfg, family, data = _setup(args)
    cuda = device.type == "cuda"
    print(f"# {args.family} {args.preset} on {args.device} ({args.threads} threads), batch {args.batch_size} per "
          f"seed, 1 warm-up + {args.steps} timed steps, best of {args.repeats} interleaved; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'S':>4} {'loss':>8} {'seed-steps/s':>13} {'peak MiB/seed':>14} {'logits MiB/seed (analytic)':>27}")
    for size in args.sizes:
        modules = []
        for seed in range(size):
            pl.seed_everything(seed, verbose=False)
            modules.append(family.build_module(cfg, data).to(device).train())
        vocab = int(modules[0].config.vocab_size)
        streams = [iter(StepBatches(data.train, args.batch_size, seed, data.collate)) for seed in range(size)]
        raw = [[[chunk.to(device) for chunk in next(s)] for s in streams] for _ in range(args.steps + 1)]
        rows: dict[str, list[dict[str, float]]] = {"full": [], "chunked": []}
        for _ in range(args.repeats):
            for mode in ("full", "chunked"):
                stack = SeedStack(modules, terms=full_logits_terms if mode == "full" else None)
                batches = [stack.batch(step) for step in raw]

                def step(batch, stack=stack) -> None:
                    loss, _, _ = stack.losses(batch)
                    loss.sum().backward()
                    stack.clip_per_seed(1.0)
                    stack.optimizer.step()
                    stack.optimizer.zero_grad(set_to_none=True)

                step(batches[0])
                if cuda:
                    torch.cuda.synchronize()
                    torch.cuda.reset_peak_memory_stats()
                    base = torch.cuda.memory_allocated()
                start = time.perf_counter()
                for batch in batches[1:]:
                    step(batch)
                if cuda:
                    torch.cuda.synchronize()
                seconds = time.perf_counter() - start
                peak = (torch.cuda.max_memory_allocated() - base) / 2**20 / size if cuda else float("nan")
                full, chunked = logits_bytes(batches[1:], size, vocab)
                rows[mode].append({"rate": size * args.steps / seconds, "peak": peak,
                                   "logits": (full if mode == "full" else chunked) / 2**20})
                del stack, batches, step
        for mode in ("full", "chunked"):
            best = max(rows[mode], key=lambda r: r["rate"])
            peak = f"{best['peak']:.1f}" if cuda else "n/a (CPU)"
            print(f"{size:>4} {mode:>8} {best['rate']:>13.2f} {peak:>14} {best['logits']:>27.2f}", flush=True)
        rate = {m: max(r["rate"] for r in rows[m]) for m in rows}
        print(f"loss S={size}: chunked {rate['chunked'] / rate['full']:.2f}x full's seed-steps/s, logits "
              f"{rows['full'][0]['logits']:.2f} -> {rows['chunked'][0]['logits']:.2f} MiB/seed")
        optimizer_phase(modules, raw[0], size, args.repeats, cuda)


def optimizer_phase(modules, batches, size: int, repeats: int, cuda: bool) -> None:
    """Operators and time of one step's clipping + optimizer step: per-parameter (before) vs flat (now)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    from lightning_modules.models.seed_stack import SeedStack

    stack = SeedStack(modules)
    loss, _, _ = stack.losses(stack.batch(batches))
    loss.sum().backward()
    grads = {name: g.clone() for name, g in stack.grads().items()}
    flat_grads = [f.grad.clone() for f in stack._flats]
    params = {name: torch.nn.Parameter(p.detach().clone()) for name, p in stack.parameters().items()}
    groups = [{**{k: v for k, v in g.items() if k not in ("params", "fused", "foreach", "capturable")},
               "params": [params[name] for name, _ in layout]}
              for g, layout in zip(stack.optimizer.param_groups, stack._layout, strict=False)]
    reference = type(stack.optimizer)(groups)  # the module's optimizer, torch's default implementation

    def per_parameter() -> None:
        for name, p in params.items():
            p.grad = grads[name].clone()
        gs = [p.grad for p in params.values()]
        norms = torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in gs],
                                                     dim=1), dim=1)
        coef = (1.0 / (norms + 1e-6)).clamp(max=1.0)
        for g in gs:
            g.mul_(coef.view(-1, *([1] * (g.dim() - 1))))
        reference.step()

    def flat() -> None:
        for f, g in zip(stack._flats, flat_grads, strict=True):
            f.grad = g.clone()
        stack.clip_per_seed(1.0)
        stack.optimizer.step()

    def counted(phase) -> int:
        phase()  # warm-up (state allocated)
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with profile(activities=activities) as prof:
            phase()
            if cuda:
                torch.cuda.synchronize()
        events = prof.events()
        if cuda:
            return sum(1 for e in events if e.device_type == torch.autograd.DeviceType.CUDA)
        return sum(1 for e in events if e.name.startswith("aten::") and e.cpu_parent is None)

    counts = {"per-parameter": counted(per_parameter), "flat": counted(flat)}
    times: dict[str, list[float]] = {"per-parameter": [], "flat": []}
    for _ in range(max(repeats, 3)):
        for name, phase in (("per-parameter", per_parameter), ("flat", flat)):
            times[name].append(_timed(phase, cuda))
    unit = "CUDA kernels" if cuda else "top-level aten operators"
    fused = bool(stack.optimizer.param_groups[0].get("fused"))
    print(f"optimizer+clip S={size} ({len(params)} parameters, {len(stack._flats)} flat buffers, fused "
          f"{fused}): per-parameter {counts['per-parameter']} {unit}, {min(times['per-parameter']) * 1e3:.2f} ms; "
          f"flat {counts['flat']} {unit}, {min(times['flat']) * 1e3:.2f} ms", flush=True)


@contextlib.contextmanager
def math_path() -> Iterator[None]:
    """The reference: SDPA called directly under vmap in ``sdpa_kernel(SDPBackend.MATH)``, as before the folded
    attention (every module that calls ``folded_attention.attention`` calls SDPA itself for the duration)."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from lightning_modules.layers import folded_attention

    folded = folded_attention.attention
    users = [m for m in list(sys.modules.values())  # the callers; not the vmap rule's own call inside
             if getattr(m, "attention", None) is folded and m is not folded_attention]
    for module in users:
        module.attention = F.scaled_dot_product_attention
    try:
        with sdpa_kernel(SDPBackend.MATH):
            yield
    finally:
        for module in users:
            module.attention = folded


def _timed(fn: Callable[[], None], cuda: bool) -> float:
    """Seconds of one call of ``fn`` (after the device finished)."""
    import torch

    if cuda:
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if cuda:
        torch.cuda.synchronize()
    return time.perf_counter() - start


def _profiled_kernels(fn: Callable[[], None], cuda: bool) -> tuple[int, dict[str, int]]:
    """(kernels of one call of ``fn``, calls of each SDPA operator): CUDA kernels on a GPU, else leaf ``aten::``
    operators (those that call no other operator: what runs a CPU kernel)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        fn()
    events = prof.events()
    if cuda:
        from torch.autograd import DeviceType

        kernels = sum(1 for e in events if e.device_type == DeviceType.CUDA)
    else:
        kernels = sum(1 for e in events if e.name.startswith("aten::") and not e.cpu_children)
    sdpa: dict[str, int] = {}
    for e in events:
        if e.name.startswith("aten::_scaled_dot_product") or e.name.startswith("aten::_efficient_attention"):
            sdpa[e.name.removeprefix("aten::")] = sdpa.get(e.name.removeprefix("aten::"), 0) + 1
    return kernels, sdpa


def _group_step(family: Any, cfg: dict, data: Any, size: int, batch_size: int,
                device: torch.device) -> Callable[[], None]:
    """One training step of a group of seeds 0..size-1 (loss, backward, per-seed clipping, Adam) on one packed
    batch of their data, the same batch at every call."""
    import pytorch_lightning as pl
    import torch

    from experiments.batching import StepBatches
    from lightning_modules.models.seed_stack import SeedStack

    modules = []
    for seed in range(size):
        pl.seed_everything(seed, verbose=False)
        modules.append(family.build_module(cfg, data).to(device).train())
    stack = SeedStack(modules)
    slices = stack.step_batches([next(iter(StepBatches(data.train, batch_size, seed, data.collate)))
                                 for seed in range(size)])
    weights = torch.ones(size, device=device)
    clip = float(modules[0].config.grad_clip_norm)

    def step() -> None:  # the group trainer's (experiments/seed_group.py)
        stack.backward(slices, weights)
        stack.update(clip)
        stack.optimizer.zero_grad(set_to_none=True)

    return step


def _attention_call(sdpa: Callable[..., torch.Tensor], shape: tuple[int, ...], dropout: float,
                    device: torch.device) -> Callable[[], None]:
    """Forward and backward of ``sdpa`` vmapped over S seeds: q, k, v [S, B, H, L, d] (``shape``) and an additive
    bias [S, B, H, L, L] needing a gradient, attention dropout ``dropout`` (one mask per seed)."""
    import torch

    size, batch, heads, length, d_head = shape
    generator = torch.Generator(device=device).manual_seed(size)
    q, k, v = (torch.randn(shape, device=device, generator=generator).requires_grad_() for _ in range(3))
    bias = torch.randn(size, batch, heads, length, length, device=device, generator=generator).requires_grad_()

    def run() -> None:
        out = torch.func.vmap(lambda q, k, v, b: sdpa(q, k, v, attn_mask=b, dropout_p=dropout),
                              randomness="different")(q, k, v, bias)
        out.sum().backward()

    return run


def kernels(args: argparse.Namespace) -> dict[int, dict[str, dict[str, float]]]:
    """Kernels per training step and attention time of the folded path against the math path (``--kernels``,
    module docstring); returns {S: {path: measurements}}."""
    import torch

    from lightning_modules.layers.folded_attention import attention

    device, cfg, family, data = _setup(args)
    cuda = device.type == "cuda"
    model = cfg["model"]
    heads = int(model["n_heads"])
    d_head = int(model["d_model"]) // heads
    length = args.length or int(model.get("segment_length") or 128)
    dropout = float(model.get("attention_dropout", model.get("dropout")) or 0.0)
    paths = {"math": math_path, "folded": contextlib.nullcontext}
    attentions = {"math": torch.nn.functional.scaled_dot_product_attention, "folded": attention}
    print(f"# {args.family} {args.preset} on {args.device} ({args.threads} threads), batch {args.batch_size} per "
          f"seed; attention alone: batch x {heads} heads x {length} queries and keys x {d_head}, a bias needing "
          f"a gradient, dropout {dropout}; best of {args.repeats} interleaved; load average "
          f"{os.getloadavg()[0]:.1f}")
    print(f"{'S':>4} {'path':>7} {'kernels/step':>13} {'step ms':>9} {'attn ms':>9} {'attn MiB':>9}  SDPA operators "
          f"(calls per step)")
    results: dict[int, dict[str, dict[str, float]]] = {}
    for size in args.sizes:
        step = _group_step(family, cfg, data, size, args.batch_size, device)
        shape = (size, args.batch_size, heads, length, d_head)
        calls = {path: _attention_call(sdpa, shape, dropout, device) for path, sdpa in attentions.items()}
        row: dict[str, dict[str, float]] = {}
        sdpa_ops: dict[str, dict[str, int]] = {}
        for _ in range(args.repeats):
            for path, context in paths.items():
                with context():
                    step(), calls[path]()  # warm-up
                    count, sdpa_ops[path] = _profiled_kernels(step, cuda)
                    step_s = _timed(step, cuda)
                    if cuda:
                        torch.cuda.reset_peak_memory_stats()
                        base = torch.cuda.memory_allocated()
                    attn_s = _timed(calls[path], cuda)
                    attn_mib = (torch.cuda.max_memory_allocated() - base) / 2**20 if cuda else float("nan")
                best = row.get(path)
                measured = {"kernels": count, "step_ms": step_s * 1e3, "attn_ms": attn_s * 1e3, "attn_mib": attn_mib}
                row[path] = measured if best is None else {key: min(best[key], measured[key]) for key in measured}
        for path in paths:
            m = row[path]
            ops = ", ".join(f"{name} x{n}" for name, n in sorted(sdpa_ops[path].items())) or "none"
            mib = f"{m['attn_mib']:>9.1f}" if cuda else f"{'-':>9}"
            print(f"{size:>4} {path:>7} {m['kernels']:>13.0f} {m['step_ms']:>9.1f} {m['attn_ms']:>9.2f} {mib}  {ops}")
        math, folded = row["math"], row["folded"]
        mib = f"{folded['attn_mib'] / math['attn_mib']:>8.2f}x" if cuda else f"{'-':>9}"
        print(f"{size:>4} {'ratio':>7} {folded['kernels'] / math['kernels']:>12.2f}x "
              f"{folded['step_ms'] / math['step_ms']:>8.2f}x {folded['attn_ms'] / math['attn_ms']:>8.2f}x {mib}  "
              f"folded / math", flush=True)
        results[size] = row
    return results


def main(argv: list[str] | None = None) -> dict[int, dict[str, dict[str, float]]] | None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--family", default="tg")
    ap.add_argument("--preset", default="cpu-small")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--batch-size", type=int, default=4, help="sequences per seed and step (cpu-small's is 16)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="interleaved measurements of each mode per S")
    ap.add_argument("--compile", choices=COMPILE_MODES, default="none",
                    help="runtime.compile of both paths: each solo network, the group's vmapped loss")
    ap.add_argument("--override", nargs="*", default=[], metavar="KEY=VALUE")
    ap.add_argument("--sync-check", action="store_true",
                    help="run the group's timed steps under no_host_sync (CUDA: sync debug mode 'error'): a host "
                         "sync inside a step fails the run")
    ap.add_argument("--padding", action="store_true",
                    help="no training: useful-token fraction and attention area, solo vs padded vs packed group")
    ap.add_argument("--kernels", action="store_true",
                    help="kernels per training step and attention time: folded attention vs the math path")
    ap.add_argument("--phases", action="store_true",
                    help="the loss (full logits vs chunked) and the optimizer phase (per-parameter vs flat)")
    ap.add_argument("--length", type=int, default=0,
                    help="--kernels: queries and keys of the timed attention call (default: the segment length)")
    ap.add_argument("--one", nargs=2, metavar=("MODE", "S"), help=argparse.SUPPRESS)  # a child measurement
    args = ap.parse_args(argv)
    if args.kernels:
        return kernels(args)
    if args.padding:
        padding(args)
        return
    if args.phases:
        phases(args)
        return
    if args.one:
        print(json.dumps(measure(args.one[0], int(args.one[1]), args)))
        return
    import torch

    forwarded = sys.argv[1:] if argv is None else argv
    print(f"# {args.family} {args.preset} on {args.device} ({args.threads} threads, compile {args.compile}), "
          f"batch {args.batch_size}, "
          f"{args.steps} timed steps per seed, best of {args.repeats} interleaved"
          f"{'; group steps under no_host_sync' if args.sync_check else ''}; load average "
          f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"{'S':>4} {'solo seed-steps/s':>18} {'group seed-steps/s':>19} {'speed-up':>9} "
          f"{'solo MiB/seed':>14} {'group MiB/seed':>15}")
    for size in args.sizes:
        row: dict[str, list[dict[str, float]]] = {"solo": [], "group": []}
        for _ in range(args.repeats):
            for mode in ("solo", "group"):
                done = subprocess.run([sys.executable, __file__, *forwarded, "--one", mode, str(size)], cwd=REPO,
                                      capture_output=True, text=True)
                if done.returncode:  # the measurement's own error, not just its exit status
                    sys.exit(f"{mode} S={size} failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
                row[mode].append(json.loads(done.stdout.strip().splitlines()[-1]))
        solo, group = (max(row[mode], key=lambda r: r["seed_steps_per_s"]) for mode in ("solo", "group"))
        print(f"{size:>4} {solo['seed_steps_per_s']:>18.2f} {group['seed_steps_per_s']:>19.2f} "
              f"{group['seed_steps_per_s'] / solo['seed_steps_per_s']:>8.2f}x "
              f"{solo['peak_mib_per_seed']:>14.1f} {group['peak_mib_per_seed']:>15.1f}", flush=True)
    print(f"# load average after: {os.getloadavg()[0]:.1f}")
    if args.device != "cuda":
        state = "no CUDA device here" if not torch.cuda.is_available() else "run with --device cuda"
        print(f"GPU rows (ptb, bllip; S up to 64; MFU): not measured ({state})")
        print("reproduce-tg-paper device-hours: benchmarks/paper_cost.py --train (training), --eval (evaluation)")


if __name__ == "__main__":
    main()
