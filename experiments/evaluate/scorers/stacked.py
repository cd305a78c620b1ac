"""Seed-stacked scoring: the S checkpoints of one config score the same inputs in one vmapped forward.

An eval group (``experiments.eval_group``: S seeds of one (model, data) cell in one process) runs each member's
``synbench eval`` one after another. Members of one spec entry differ only in their checkpoint and ``--out``: they
score the same sentences, proposal trees or gold trees, in the same batches. With stacked scoring on, the first
member to reach a batch runs ONE forward of all S seeds' parameters (the family's batched form of its seeds'
networks, ``Family.seed_stack``, as a training seed group runs them: parameters stacked on a leading seed axis,
the batch shared), returns its own seed's label log-probs and keeps the others' in their seeds' caches, keyed by the
exact inputs (the encoded examples' arrays, on the host: the chunks are built, on the device, only for a
forward); a later member making the same call gets its result from the cache (popped: memory is freed as it is
consumed) without a forward. A call not cached is
computed again (correct, only slower), so resumed members and other call orders stay right. Cached results are
the float32 log-probs the solo path casts to float64, so only the forward itself differs from solo scoring.

What is stacked: ``TXLModel.label_logprobs`` (``txl_model``), the scoring hot path of the families built on the
shared Transformer-XL module (TG, TXL (trees), TXL (terminals), DTG, TXL (trans)), for the methods that score
given inputs: ``exact``, ``gold`` and ``proposals`` (the tree marginal, ``tree_marginal.TreeScorer``; also
``eval rerank``, whose method is proposals). Not
stacked, solo within the group: beam searches (TG and DTG ``beam``, the beam-proposal union, Pushdown's), whose
inputs differ per seed, so every seed's share of a stacked forward would be wasted; ``distributions`` (used by
the beams only); recurrent families (AWD-LSTM/PaLM, SOM) and ``hf:`` models, which are not ``TXLModel``s.
A stack whose checkpoints differ in family, config (``runtime`` aside) or vocabulary (or whose buffers differ) falls
back to solo scoring.

The setting ``--stacked-scoring {auto,on,off}`` (``synbench evaluate``; ``MODES``): ``auto`` (the default) stacks
on CUDA only, where one vmapped forward of S seeds replaces S forwards; on the CPU vmapped products are not
faster (measured: 1.5x slower on 2 cores for S = 4 cpu-small TGs). Every result of a checkpoint records
``stacked_scoring`` (true or false) in its ``settings``; it is not in the task identity: a stacked result is the
solo result up to float rounding (vmapped matmuls may reduce in another order; on the CPU metrics agree with solo
within a relative 1e-7, tested at 1e-5: tests/experiments/evaluate/scorers/test_stacked.py), and an item cache may
hold items of both. Attention runs as the network's config says, except that FlexAttention (``attention: flex``,
or ``auto`` on CUDA) has no ``vmap`` rule: ``SeedStack`` runs the dense SDPA path, the reference, instead.

Memory: the S seeds' parameters twice while the stack is built, then once stacked; each forward's logits for all
S seeds (reduce ``--batch-size`` if S seeds do not fit); the cached log-probs of the seeds not yet run (an
entry's whole results for S - 1 seeds at most). A stack is dropped after its last member ran.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    import torch


MODES = ("auto", "on", "off")  # --stacked-scoring: auto = on where the eval device is CUDA
STACKED_METHODS = ("exact", "gold", "proposals")  # scoring given inputs, the same for every seed

# forwards: stacked forwards run; served: calls answered from a seed's cache (for tests and logs)
stats = {"forwards": 0, "served": 0}


def checkpoint_key(checkpoint: str) -> str:
    """A checkpoint as stacks name it (its absolute path)."""
    return os.path.abspath(checkpoint)


class StackedScorer:
    """The S seeds of one stack as one network, and each seed's cache of results computed for it by others."""

    def __init__(self, seeds: Any, size: int):
        self.seeds = seeds  # the family's batched form of the S networks (``Family.seed_stack``)
        self.seeds.train(False)
        self.pending: list[dict[bytes, np.ndarray]] = [{} for _ in range(size)]

    def label_logprobs(self, index: int, examples: Sequence[Any], chunks_of: Callable[[], list[Any]]
                       ) -> list[np.ndarray]:
        """Seed ``index``'s ``TXLModel.label_logprobs`` of ``examples``: from its cache, else from one forward of
        every seed over ``chunks_of()`` (the examples as the network reads them, built only then; the others'
        results cached). Called under ``torch.no_grad``."""
        from experiments.evaluate.scorers.label_logprobs import per_example, picked_logprobs

        key = _key(examples)
        cached = self.pending[index].pop(key, None)
        if cached is not None:
            stats["served"] += 1
            return per_example(cached, examples)
        chunks = chunks_of()
        logits = self._forward(chunks)
        stats["forwards"] += 1
        mine = None
        for seed in range(self.seeds.size):
            lp = picked_logprobs([chunk_logits[seed] for chunk_logits in logits], chunks)
            if seed == index:
                mine = lp
            else:
                self.pending[seed][key] = lp
        assert mine is not None
        return per_example(mine, examples)

    def _forward(self, chunks: list[Any]) -> list[torch.Tensor]:
        """Logits [S, B, L, V] per chunk: one forward of every seed's parameters (``SeedStack.outputs``)."""
        return self.seeds.outputs(chunks)[0]


def _key(examples: Sequence[Any]) -> bytes:
    """The exact inputs of a forward: every array field (name, dtype, shape, bytes) of every encoded example, on
    the host. The seeds of a stack share their whole config (``compatible``), so the same examples are the same
    chunks for every seed."""
    import numpy as np

    digest = hashlib.sha256()
    for example in examples:
        for name, value in sorted(vars(example).items()):
            if isinstance(value, np.ndarray):
                digest.update(f"{name}{value.dtype}{value.shape}".encode())
                digest.update(np.ascontiguousarray(value).tobytes())
        digest.update(b"\0")
    return digest.digest()


def compatible(models: Sequence[Any]) -> bool:
    """Whether the models are seeds of one config: one class and family, one config (but where they run), one
    vocabulary, and the same parameter names and shapes (buffers are checked by ``SeedStack``)."""
    first = models[0]
    shapes = {k: v.shape for k, v in first.module.state_dict().items()}

    def config(model: Any) -> dict[str, Any]:
        return {k: v for k, v in model.config.items() if k != "runtime"}

    return all(type(m) is type(first) and m.family == first.family and config(m) == config(first)
               and m.vocab.to_json() == first.vocab.to_json()
               and {k: v.shape for k, v in m.module.state_dict().items()} == shapes for m in models[1:])


@dataclass
class _Registry:
    """The stacks of this process: the one of the member running now (``active``, with the mode) and those
    built (by their checkpoints); ``attached``: the checkpoints loaded stacked by the running member."""

    active: tuple[tuple[str, ...], str] | None = None
    built: dict[tuple[str, ...], StackedScorer | None] = field(default_factory=dict)  # None: scored solo
    attached: set[str] = field(default_factory=set)


_registry = _Registry()


class GroupStacks:
    """The stacks of one eval group's members (each member's checkpoints or None: ``eval_group.member_stacks``),
    made active member by member."""

    def __init__(self, stacks: Sequence[tuple[str, ...] | None], mode: str):
        if mode not in MODES:
            raise ValueError(f"stacked scoring must be one of {', '.join(MODES)}, not {mode!r}")
        self.mode = mode
        self.stacks = list(stacks) if mode != "off" else [None] * len(stacks)
        self.last = {stack: i for i, stack in enumerate(self.stacks) if stack is not None}

    @contextmanager
    def member(self, index: int) -> Iterator[None]:
        """Run member ``index`` with its stack active; its stack is dropped after its last member."""
        stack = self.stacks[index]
        _registry.active = (stack, self.mode) if stack is not None else None
        _registry.attached.clear()
        try:
            yield
        finally:
            _registry.active = None
            _registry.attached.clear()
            if stack is not None and self.last[stack] == index:
                _registry.built.pop(stack, None)


def attach(model: Any, checkpoint: str, device: str) -> None:
    """Route ``model``'s label log-probs through its stack when ``checkpoint`` is in the running member's stack
    (and the mode and device call for it); the stack is built on first use, solo when its seeds differ."""
    if _registry.active is None:
        return
    checkpoints, mode = _registry.active
    path = checkpoint_key(checkpoint)
    import torch

    if path not in checkpoints or (mode == "auto" and torch.device(device).type != "cuda"):
        return
    if checkpoints not in _registry.built:
        from experiments.families import get_family
        from lightning_modules.errors import InputError

        try:
            models = [model if c == path else type(model).load_solo(c, device) for c in checkpoints]
            seeds = get_family(model.family).seed_stack([m.module for m in models]) if compatible(models) else None
            _registry.built[checkpoints] = StackedScorer(seeds, len(models)) if seeds is not None else None
        except (InputError, ValueError):  # another family's checkpoint; buffers that differ between seeds
            _registry.built[checkpoints] = None
    stack = _registry.built[checkpoints]
    if stack is not None:
        model.seed_stack = (stack, checkpoints.index(path))
        _registry.attached.add(path)


def scored_stacked(checkpoint: str) -> bool:
    """Whether the running member loaded ``checkpoint`` stacked (recorded in its results' settings)."""
    return checkpoint_key(checkpoint) in _registry.attached
