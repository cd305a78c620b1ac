"""Training-step throughput of the TG family: TG vs TXL (terminals) on the same sentences, and our batch layout
vs the official one.

``--compare families`` (default): TG against its reference, Transformer-XL on the terminals, at the same
model size (``--preset ptb|bllip``) on the same sentences (the same batch indices of the PTB sample), steps
interleaved (TG, TXL, TG, ...). Per model: step time, tokens/s (non-padding input tokens), words/s, the peak
memory of a step above what is resident before it, the parameter + gradient + Adam state, and **MFU** =
model FLOPs per second / the device's peak. Model FLOPs of a step are 3x the forward's matmul FLOPs (forward +
backward): per token 2·(QKV + output projections + FFN) + 2·d·R (relative position logits over the R-row
table) + 2·d·V (tied output layer), plus 4·d per attended (query, key) pair per layer (QKᵀ and AV over the
pairs the mask keeps: TG's sparse STACK/COMPOSE pattern counts what it attends, not the dense M + L keys), plus
the key and value projections of the M memory slots of each row (when the memory is attended), plus
2x the relative-key projection of the table per chunk (it has no input gradient). With every pair attended
and no padding this is exactly what ``torch.utils.flop_counter`` counts (tests/benchmarks/test_training_step.py).
Peak bf16 dense tensor FLOPs assumed: H100 SXM 989.4 TFLOP/s (H100 PCIe 756), H200 989.4 (NVIDIA datasheets,
without sparsity); other devices need ``--peak-tflops``.
Ratios TG / TXL are printed from the same run. Targets (TG's speed budget): TG step time <= 1.15x TXL's, TG MFU >= 35 %.

``--compile MODE`` (default | reduce-overhead, ``runtime.compile``): each model also runs with its network
compiled (``lightning_modules.models.compiled``), from the same initial weights on the same batches, steps
interleaved with the eager ones (TG, TG compiled, TXL, TXL compiled, ...); the compiled / eager step-time ratio
of each is printed. The warm-up steps take the compilation; a step whose chunk shape is new may recompile once
(automatic dynamic shapes), so raise ``--warmup`` when the median moves.

``--check`` first compares the flex and dense attention paths on the device (forward logits and every
parameter gradient, fp32, rtol 1e-4) on the benchmark's own batches.

``--compare layout``: our collate (each chunk trimmed to its longest sequence) vs full L-token segments as the
official data pipeline feeds them (tests/lightning_modules/families/tg/test_tg_data.py checks both give the same loss).

    python benchmarks/training_step.py --device cuda --preset ptb --precision bf16 --steps 20 --check
    python benchmarks/training_step.py --device cuda --preset bllip --vocab-size 32768 --batch-size 32
    python benchmarks/training_step.py --device cpu --tiny --steps 2        # CPU smoke test
    python benchmarks/training_step.py --device cuda --preset ptb --compile reduce-overhead --warmup 10
    python benchmarks/training_step.py --compare layout --preset cpu-small
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import statistics
import time
from typing import Any

import torch

from experiments.batching import batch_indices
from experiments.config import resolve_train_config
from experiments.families import get_family
from lightning_modules.data.encodings.batch import collate_chunk
from lightning_modules.models.compiled import COMPILE_MODES, compile_module

PEAK_BF16_TFLOPS = {"H100 PCIe": 756.0, "H100": 989.4, "H200": 989.4}
TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64"]


def peak_tflops(device: str, given: float | None) -> float | None:
    """The bf16 dense peak of the device (``PEAK_BF16_TFLOPS``, first name that matches), or ``given``."""
    if given is not None or device != "cuda":
        return given
    name = torch.cuda.get_device_name()
    return next((tflops for key, tflops in PEAK_BF16_TFLOPS.items() if key in name), None)


def step_flops(module: Any, chunks: list[Any]) -> float:
    """Model FLOPs of one training step over ``chunks`` (see the module docstring)."""
    net, c = module.network, module.config
    d, n_fns = c.d_model, len(net.layers[0].attentions)
    rows = (net.max_rel - net.min_rel + 1) if net.relative else 0  # the sinusoid table's rows
    vocab = net.embedding.weight.shape[0]
    per_token = c.n_layers * (n_fns * (4 * 2 * d * d + 2 * d * rows) + 2 * 2 * d * c.d_ff) + 2 * d * vocab
    tokens = sum(int((chunk.inputs != 0).sum()) for chunk in chunks)
    pairs = memory_rows = 0
    for chunk in chunks:
        mask = chunk.attn_mask
        if bool(chunk.reset.all()):  # the core skips the (empty) memory columns
            mask = mask[..., net.memory_length:]
        else:  # keys and values of the memory slots are projected too
            memory_rows += chunk.inputs.shape[0] * net.memory_length
        pairs += int(mask.sum())
    table = c.n_layers * n_fns * 2 * rows * d * d * len(chunks)  # forward and weight gradient only: 2x
    memory = memory_rows * c.n_layers * n_fns * 2 * 2 * d * d
    return 3.0 * (tokens * per_token + pairs * c.n_layers * n_fns * 4 * d + memory) + 2.0 * table


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def one_step(module: Any, chunks: list[Any], optimizer: torch.optim.Optimizer, autocast: Any) -> None:
    with autocast():
        total, count = module.nll(chunks)
    (total / count).backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)


def family_batches(family_name: str, args: argparse.Namespace) -> tuple[Any, list[list[Any]], list[int]]:
    """(module, chunk lists of each step on the device, words per step) for one family."""
    overrides = ["runtime.wandb=disabled", *(TINY if args.tiny else []), *args.override]
    if args.attention:
        overrides.append(f"model.attention={args.attention}")
    if args.attention == "flex":
        overrides.append("model.attention_dropout=0.0")  # flex cannot drop attention weights
    if args.batch_size:
        overrides.append(f"train.batch_size={args.batch_size}")
    overrides.append(f"data.corpus={args.corpus}")
    if args.preset == "bllip":  # the sample's words stand in for BLLIP's pieces; --vocab-size restores the size
        overrides.append("data.terminals=words")
    cfg = resolve_train_config(family_name, args.preset, overrides)
    family = get_family(family_name)
    data = family.build_data(cfg)
    data = dataclasses.replace(data, vocab_size=max(data.vocab_size, args.vocab_size or 0))
    torch.manual_seed(0)
    module = family.build_module(cfg, data).to(args.device).train()
    size = cfg["train"]["batch_size"]
    steps = []
    words = []
    for k in range(args.steps + args.warmup):
        rows = [data.train[i] for i in batch_indices(len(data.train), size, 0, k)]
        steps.append([chunk.to(args.device) for chunk in data.collate(rows)])
        words.append(sum(int(((e.word_index >= 0) & (e.labels != 0)).sum()) for e, _ in rows))
    return module, steps, words


def check_paths(name: str, module: Any, chunks: list[Any]) -> None:
    """Flex vs dense on the device: logits and (on CUDA) gradients in fp32, dropout off."""
    results = {}
    state = {k: v.clone() for k, v in module.state_dict().items()}
    config = module.config
    for path in ("dense", "flex"):
        module.load_state_dict(state)
        module.config = dataclasses.replace(module.config, attention=path, attention_dropout=0.0)
        module.eval()
        with torch.no_grad():
            logits, _ = module(chunks)
        if chunks[0].inputs.is_cuda:  # FlexAttention has no backward on CPU: forward only there
            total, count = module.nll(chunks)
            (total / count).backward()
        results[path] = ([x.detach().float() for x in logits], {n: p.grad.clone() for n, p in
                                                                 module.named_parameters() if p.grad is not None})
        module.zero_grad(set_to_none=True)
    worst = max(float((f - d).abs().max()) for f, d in zip(results["flex"][0], results["dense"][0]))
    for n, g in results["dense"][1].items():
        torch.testing.assert_close(results["flex"][1][n], g, rtol=1e-4, atol=1e-5, msg=f"{name}: gradient of {n}")
    for f, d in zip(results["flex"][0], results["dense"][0]):
        torch.testing.assert_close(f, d, rtol=1e-4, atol=1e-4, msg=f"{name}: logits")
    print(f"  check {name}: flex == dense (logits, {len(results['dense'][1])} gradients; max abs. logit diff "
          f"{worst:.1e})")
    module.load_state_dict(state)
    module.config = config
    module.train()


def profile_steps(name: str, m: dict[str, Any], autocast: Any, device: str, count: int = 3) -> None:
    """Where a step's time goes: the top operators of ``count`` steps by device (CUDA) or CPU self time, and
    the device-busy fraction of the wall-clock (far below 1: the step waits on the host, e.g. kernel launches)."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device == "cuda" else [])
    sync(device)
    start = time.perf_counter()
    with profile(activities=activities) as prof:
        for chunks in m["steps"][-count:]:
            one_step(m["module"], chunks, m["optimizer"], autocast)
        sync(device)
    wall = time.perf_counter() - start
    events = prof.key_averages()
    key = "self_device_time_total" if device == "cuda" else "self_cpu_time_total"
    busy = sum(getattr(e, key) for e in events) / 1e6 if device == "cuda" else wall
    kernels = sum(e.count for e in events if device == "cuda" and getattr(e, key) > 0 and e.key.startswith(
        ("void", "triton", "sm90", "ampere", "cutlass", "nvjet", "Memcpy", "Memset"))) // count
    print(f"\n  profile {name}: {count} steps, {wall / count * 1000:.1f} ms/step wall, device busy "
          f"{busy / wall * 100:.0f} %{f', ~{kernels} kernels/step' if device == 'cuda' else ''}")
    print(events.table(sort_by=key, row_limit=15, max_name_column_width=60))


def compare_families(args: argparse.Namespace) -> None:
    device = args.device
    autocast = (lambda: torch.autocast(device, dtype=torch.bfloat16)) if args.precision == "bf16" \
        else contextlib.nullcontext
    peak = peak_tflops(device, args.peak_tflops)
    models = {}
    for family in ("tg", "txl-terminals"):
        for mode in ("none",) if args.compile == "none" else ("none", args.compile):
            name = family if mode == "none" else f"{family} {mode}"
            module, steps, words = family_batches(family, args)  # the same initial weights in both modes
            if args.check and mode == "none":
                check_paths(name, module, steps[0])
            module = compile_module(module, mode)
            optimizer = torch.optim.Adam(module.parameters(), lr=1e-5)
            flops = [step_flops(module, chunks) for chunks in steps]
            models[name] = {"module": module, "steps": steps, "words": words, "optimizer": optimizer,
                            "flops": flops, "times": [], "peaks": [],
                            "tokens": [sum(int((c.inputs != 0).sum()) for c in s) for s in steps]}
    for k in range(args.steps + args.warmup):  # interleaved: TG step k, (TG compiled step k,) TXL step k, ...
        for m in models.values():
            sync(device)
            if device == "cuda":
                torch.cuda.reset_peak_memory_stats()
                resident = torch.cuda.memory_allocated()
            start = time.perf_counter()
            one_step(m["module"], m["steps"][k], m["optimizer"], autocast)
            sync(device)
            if k >= args.warmup:
                m["times"].append(time.perf_counter() - start)
                if device == "cuda":
                    m["peaks"].append(torch.cuda.max_memory_allocated() - resident)
    print(f"TG vs TXL (terminals), preset {args.preset}{' (tiny)' if args.tiny else ''}, device {device}"
          f"{' ' + torch.cuda.get_device_name() if device == 'cuda' else ''}, precision {args.precision}, "
          f"attention {args.attention or 'auto'}, compile {args.compile}, {args.steps} steps after {args.warmup} "
          f"warm-up, peak {f'{peak:g} TFLOP/s' if peak else 'unknown (no MFU; --peak-tflops)'}")
    summary = {}
    for name, m in models.items():
        t = sum(m["times"])
        measured = slice(args.warmup, None)
        tokens, words, flops = sum(m["tokens"][measured]), sum(m["words"][measured]), sum(m["flops"][measured])
        params = sum(p.numel() for p in m["module"].parameters())
        state_gb = params * 4 * 4 / 2**30  # fp32 weights, gradients and two Adam moments
        mfu = flops / t / (peak * 1e12) if peak else None
        summary[name] = {"step": statistics.median(m["times"]), "tokens_s": tokens / t, "words_s": words / t,
                         "mfu": mfu}
        peak_gb = f"{max(m['peaks']) / 2**30:6.2f} GiB" if m["peaks"] else "   n/a"
        print(f"  {name:30} {params / 1e6:7.1f}M params: {summary[name]['step'] * 1000:8.1f} ms/step  "
              f"{tokens / t:9.0f} tokens/s  {words / t:8.0f} words/s  step peak {peak_gb} "
              f"(+{state_gb:.2f} GiB params/grads/Adam)  {flops / t / 1e12:7.2f} TFLOP/s"
              + (f"  MFU {mfu * 100:5.1f} %" if mfu is not None else ""))
    if args.profile:
        for name, m in models.items():
            profile_steps(name, m, autocast, device)
    tg, txl = summary["tg"], summary["txl-terminals"]
    print(f"  TG / TXL: step time {tg['step'] / txl['step']:.2f}x (target <= 1.15), tokens/s "
          f"{tg['tokens_s'] / txl['tokens_s']:.2f}x, words/s {tg['words_s'] / txl['words_s']:.2f}x"
          + (f"; TG MFU {tg['mfu'] * 100:.1f} % (target >= 35 %)" if tg["mfu"] is not None else ""))
    if args.compile != "none":
        print("  compiled / eager step time: " + ", ".join(
            f"{family} {summary[f'{family} {args.compile}']['step'] / summary[family]['step']:.2f}x"
            for family in ("tg", "txl-terminals")))


def compare_layout(args: argparse.Namespace) -> None:
    cfg = resolve_train_config(args.family, args.preset, ["runtime.wandb=disabled", *args.override])
    family = get_family(args.family)
    data = family.build_data(cfg)
    module = family.build_module(cfg, data)
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-4)
    bs = cfg["train"]["batch_size"]
    rows = [[data.train[i] for i in batch_indices(len(data.train), bs, 0, k)] for k in range(args.steps + 2)]

    def full(batch):
        ex, segs = [e for e, _ in batch], [s for _, s in batch]
        return [collate_chunk(ex, segs, c) for c in range(max(len(s) for s in segs))]

    def times(batches) -> list[float]:
        out = []
        for chunks in batches:
            start = time.perf_counter()
            one_step(module, chunks, optimizer, contextlib.nullcontext)
            out.append(time.perf_counter() - start)
        return out

    ours = [data.collate(b) for b in rows]
    reference = [full(b) for b in rows]
    tokens = statistics.mean(sum(int((c.labels != 0).sum()) for c in chunks) for chunks in ours)
    times(ours[:2])  # warm-up
    t_ours = statistics.median(times(ours[2:]))
    t_ref = statistics.median(times(reference[2:]))
    print(f"{args.family} {args.preset}: batch {bs}, {tokens:.0f} predicted tokens per step, {args.threads} threads")
    print(f"  reference (full L={cfg['model']['segment_length']} segments)   : {t_ref * 1000:8.1f} ms/step "
          f"{tokens / t_ref:8.0f} tokens/s")
    print(f"  synbench (trimmed to the longest chunk):        {t_ours * 1000:8.1f} ms/step "
          f"{tokens / t_ours:8.0f} tokens/s")
    print(f"  speed-up: {t_ref / t_ours:.2f}x")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--compare", choices=("families", "layout"), default="families")
    ap.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--preset", default=None, help="ptb | bllip (families; default ptb) or cpu-small (layout)")
    ap.add_argument("--precision", choices=("fp32", "bf16"), default=None,
                    help="bf16 autocast (default on cuda) or fp32 (default on cpu)")
    ap.add_argument("--attention", choices=("dense", "flex", "auto"), default=None,
                    help="model.attention (default: the preset's auto = flex on CUDA where no attention weights "
                         "drop); flex sets attention_dropout=0")
    ap.add_argument("--batch-size", type=int, help="train.batch_size (default: the preset's)")
    ap.add_argument("--vocab-size", type=int, help="pad the vocabulary to this size (bllip: 32768)")
    ap.add_argument("--corpus", default="ptb-sample", help="the sentences (default ptb-sample)")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--compile", choices=COMPILE_MODES, default="none",
                    help="also run each model with runtime.compile=MODE, interleaved with eager (default: none)")
    ap.add_argument("--check", action="store_true", help="first compare flex and dense (forward and gradients)")
    ap.add_argument("--profile", action="store_true", help="print where the time of a step goes (torch.profiler)")
    ap.add_argument("--peak-tflops", type=float, help="the device's peak bf16 dense TFLOP/s (MFU's denominator)")
    ap.add_argument("--tiny", action="store_true", help="a 2-layer d=32 model (CPU smoke test)")
    ap.add_argument("--family", default="tg", help="layout: the family")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("override", nargs="*", help="further KEY=VALUE overrides")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: CUDA is not available on this machine")
    torch.set_num_threads(args.threads)
    args.precision = args.precision or ("bf16" if args.device == "cuda" else "fp32")
    if args.compile == "reduce-overhead" and args.device != "cuda":
        ap.error("--compile reduce-overhead captures CUDA graphs: it needs --device cuda")
    if args.compare == "layout":
        args.preset = args.preset or "cpu-small"
        compare_layout(args)
    else:
        args.preset = args.preset or "ptb"
        compare_families(args)


if __name__ == "__main__":
    main()
