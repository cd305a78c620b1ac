"""SOM's recurrence: ``SOM.forward`` (cached prediction RNN, memory updates and parsers over all slots at once)
vs the slot-by-slot formulation (``som.slot_by_slot``: the equations as written and as OM's official code
loops, one slot at a time, the prediction RNN re-read from the top slot every step), in the same run.

Both compute the same numbers (``tests/lightning_modules/families/som/test_som_module.py`` checks equality). Inputs:
real UD EWT dev sentences (their Γ's gold slots), batches of ``--batch`` sentences of similar length, a
dSOM of the chosen preset. Two settings, interleaved repeat by repeat (fast, reference, fast, ...), medians:
  * ``eval``: greedy decisions (argmax), forward only, no gradient (scoring);
  * ``train``: gold decisions (teacher forcing, deterministic so both paths take the same decisions),
    forward + backward of the LM loss.
The composition chain M̂^j = cell(M̂^{j-1}, M^j) stays sequential over slots in both (each slot composes the
one below it); the fast path runs it only from the lowest decision of the batch up.

Memory grows with the number of slots: for N in ``--slots`` the bytes of tensors autograd keeps for the
backward pass of one ``train`` forward (distinct storages, counted by a saved-tensor hook).

Usage: ``python benchmarks/som_recurrence.py [--preset ptb] [--batch 32] [--batches 4] [--repeats 3]
[--threads 1] [--slots 5 10 15 20]``.

Measured (``--batches 2 --repeats 3``, 2-core x86 VM shared with other jobs, so the ratios are noisy: an
earlier run with 2 repeats gave 2.6x / 3.2x), dSOM ptb preset, 993 tokens:

    setting   fast tok/s  slot-by-slot tok/s  speed-up
    eval             326                  67     4.87x
    train             53                  20     2.71x

    activation memory of one train forward (32 sentences): N = 5: 169.7 MiB, 10: 229.4, 15: 283.1, 20: 336.9
    (about 11 MiB per slot on top of ~115 MiB that does not depend on N, mostly the [B, T, V] logits)

Again with ``--batches 1 --repeats 3`` (619 tokens) while the machine ran ~15 other jobs (load 13-17 on 2
cores): eval 57 vs 19 tok/s (3.00x), train 19 vs 5 tok/s (3.88x); the same activation memory per N.
"""

from __future__ import annotations

import argparse
import statistics
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import torch

from lightning_modules.data.dependency import read_conllu
from lightning_modules.families.som import encoding as enc
from lightning_modules.families.som import model as som
from lightning_modules.families.som.data import collate

EWT_DEV = Path(__file__).resolve().parents[2] / "shared" / "data" / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz"


def batches(n_slots: int, batch: int, count: int) -> list:
    """``count`` batches of ``batch`` EWT dev sentences of similar length (ids hashed into 10k types)."""
    deps = [dep for _, dep in read_conllu(EWT_DEV)]
    deps = sorted(deps[: batch * count * 4], key=len)[batch * count: batch * count * 2]
    rows = [enc.encode([3 + zlib.crc32(w.encode()) % 9997 for w in d.forms], enc.binary_shape(enc.gamma(d)),
                       n_slots, 1, 2) for d in deps]
    return [collate(rows[i: i + batch]) for i in range(0, len(rows), batch)]


def timed(run: Callable[[], None]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def saved_bytes(module: som.SOM, batch) -> int:
    """Bytes of the distinct storages autograd saves for the backward pass of a gold-decision forward."""
    storages: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        storages[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        module(batch.inputs, batch.slots, "gold")
    return sum(storages.values())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="ptb")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--batches", type=int, default=4)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--slots", type=int, nargs="+", default=[5, 10, 15, 20])
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from experiments.families import get_family

    models, _ = get_family("som").model_presets()
    config = {**models[args.preset], "vocab_size": 10000}
    torch.manual_seed(0)
    module = som.build(config)
    data = batches(module.config.n_slots, args.batch, args.batches)
    tokens = sum(int(b.lengths.sum()) for b in data)

    def fast_eval() -> None:
        with torch.no_grad():
            for b in data:
                module(b.inputs, b.slots, "argmax")

    def slow_eval() -> None:
        with torch.no_grad():
            for b in data:
                som.slot_by_slot(module, b.inputs, b.slots, "argmax")

    def fast_train() -> None:
        for b in data:
            module(b.inputs, b.slots, "gold").logits.logsumexp(-1).mean().backward()

    def slow_train() -> None:
        for b in data:
            som.slot_by_slot(module, b.inputs, b.slots, "gold").logits.logsumexp(-1).mean().backward()

    module.eval()
    print(f"dSOM preset {args.preset} (D = {sum(module.segments)}, N = {module.config.n_slots}), {len(data)} "
          f"batches of {args.batch} EWT dev sentences, {tokens} tokens, {args.threads} thread(s)")
    print(f"{'setting':8} {'fast tok/s':>11} {'slot-by-slot tok/s':>19} {'speed-up':>9}")
    for name, fast, slow in (("eval", fast_eval, slow_eval), ("train", fast_train, slow_train)):
        fast_times, slow_times = [], []
        for _ in range(args.repeats):
            fast_times.append(timed(fast))
            slow_times.append(timed(slow))
        f, s = tokens / statistics.median(fast_times), tokens / statistics.median(slow_times)
        print(f"{name:8} {f:11.0f} {s:19.0f} {f / s:8.2f}x")

    print("\nactivation memory of one train forward (one batch) vs the number of slots:")
    for n in args.slots:
        torch.manual_seed(0)
        sized = som.build({**config, "n_slots": n}).eval()
        print(f"  N = {n:2d}: {saved_bytes(sized, batches(n, args.batch, 1)[0]) / 2**20:8.1f} MiB")


if __name__ == "__main__":
    main()
