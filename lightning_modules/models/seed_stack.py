"""S seeds of one model as one: parameters stacked on a leading seed axis, one vmapped forward for all seeds.

``SeedStack`` takes S modules of one config (each initialised from its own seed) and holds

* ``stacked``: a copy of the first module whose every parameter is the [S, ...] stack of the seeds' (a parameter
  shared between sub-modules stays shared), stored as slices of one flat [S, P] buffer per parameter group of
  the module's own optimizer (``configure_optimizers`` of ``stacked``, which also builds the scheduler of all
  seeds at once); that optimizer (``optimizer``, ``configured``) steps the flat buffers, fused where its class
  and the device have the kernel (capturable on CUDA). Adam(W) is element-wise, so seed s of the flat optimizer
  moves exactly as its solo optimizer would (the learning rate is the same at every step: the seeds step
  together); ``optimizer_state`` and ``load_optimizer_states`` convert a seed's state to and from the solo
  format (per parameter);
* ``template``: a copy of the first module, the functional form the forward runs through
  (``torch.func.functional_call`` under ``torch.func.vmap`` over the seed axis of the parameters, views of the
  flat buffers, so the gradients of all parameters land in one flat gradient buffer per group).

Gradient clipping is per seed (``clip_per_seed``: each seed's global norm, as ``clip_grad_norm_`` on its solo
run: one norm over each flat gradient buffer's rows, one multiply). Buffers are shared, not stacked (the
families' buffers are fixed tables, equal across seeds; checked).

Batches: every seed draws its own batch; under vmap the S batches need one shape. The Transformer-XL core packs
them (``lightning_modules.models.packing``: single-chunk sentences several to a row, block-diagonal masks, no
memory columns; only longer sentences padded across seeds), a module whose ``StackedForm`` has a ``pack`` its own
way; other modules pad each chunk's tensors to the largest seed's (``stack_chunks``), with the values the
collate function pads with (padding attends to nothing and predicts nothing, so a seed's loss is unchanged). A
batch that is not a list of chunks (Pushdown's) is one chunk. What a module's batches hold, how they pad or
pack and what its training loss and validation NLL are is its ``StackedForm`` (``stacked_form``): a module
without one cannot be stacked.

FlexAttention has no ``vmap`` rule: a module configured for it (``attention: flex``, or ``auto``, which is flex on
CUDA) runs stacked on its dense path, the same score function through SDPA (equal outputs and gradients, tested
per family).

Attention runs through ``lightning_modules.layers.folded_attention``: under vmap the seed axis folds into the
batch axis of one ordinary SDPA call, forward and backward, so the group's attention uses the kernels a solo
batch of all seeds' rows would (SDPA's own vmap rules have no backward through its fused kernels).

Dropout under vmap draws one mask per seed from the one torch generator (``randomness="different"``): with
dropout the masks are not those of the seed's solo run (see ``experiments.seed_group``).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# (module, chunks) -> (the training loss its solo run minimises, validation NLL sum, validation token count)
Terms = Callable[[nn.Module, Sequence[Mapping[str, Tensor]]], tuple[Tensor, Tensor, Tensor]]


# (S seeds' batches, ``SeedStack.stack_chunks``, static) -> one group batch whose tensors have a leading seed
# axis; static: its shapes from a small set of bucketed layouts (a compiled group: ``SeedStack.compile``)
Pack = Callable[[Sequence[Any], Callable[[Sequence[Any]], list[dict[str, Tensor]]], bool], Any]


@dataclass(frozen=True)
class StackedForm:
    """How a module trains stacked: its chunk fields with the values its collate pads them with, ``terms``, and
    optionally ``pack``, how S seeds' batches become one group batch (default: ``stack_chunks``, padding). A
    ``pack`` returns ``packing.Part``s, whose ``terms`` add up: the loss is the NLL sum / the count."""

    padding: Mapping[str, int | bool]
    terms: Terms
    pack: Pack | None = None


def _txl_terms(module: nn.Module, chunks: Sequence[Mapping[str, Tensor]]) -> tuple[Tensor, Tensor, Tensor]:
    """TG / TXL: mean NLL per predicted token; validation the token-level NLL (``TransformerGrammarLM``). Per part
    of a packed batch (``packing.pack``): ``SeedStack.losses`` adds the parts' sums and counts."""
    total, count = module.nll(chunks)
    return total / count.clamp(min=1), total, count


def _txl_pack(batches: Sequence[Any], stack: Callable[[Sequence[Any]], list[dict[str, Tensor]]],
              static: bool = False) -> Any:
    """``packing.pack``, every chunk given ``label_index``: each seed's labelled positions, computed here on the
    host, so the vmapped loss gathers them (``labelled_loss``; ``static``: padded to every position, so their
    count is no dimension of the layout)."""
    from lightning_modules.models.labelled_loss import padded_label_index
    from lightning_modules.models.packing import pack

    parts = pack([as_chunks(b) for b in batches], TXL_CHUNK_PADDING, _field, stack, static)
    for part in parts:
        for chunk in part.chunks:
            chunk["label_index"] = padded_label_index(chunk["labels"], full=static)
    return parts


# The chunk fields of the Transformer-XL core models (``txl_lm``); other modules declare their own stacked form
# as the class attribute ``seed_stack_form`` (a family's model file), so this module names no family.
TXL_CHUNK_PADDING: dict[str, int | bool] = {
    "inputs": 0, "labels": 0, "compose": False, "attn_mask": False, "relpos": 0, "mem_src": -1, "reset": False,
    "added": 0,
}


def stacked_form(module: nn.Module) -> StackedForm | None:
    """The stacked form of a module, or None (it cannot be stacked)."""
    from lightning_modules.models.txl_lm import TransformerGrammarLM

    if isinstance(module, TransformerGrammarLM):
        return StackedForm(TXL_CHUNK_PADDING, _txl_terms, _txl_pack)
    form = getattr(module, "seed_stack_form", None)
    return form if isinstance(form, StackedForm) else None


def stackable(module: nn.Module) -> bool:
    """Whether seeds of this module can train as one ``SeedStack``."""
    return stacked_form(module) is not None


def as_chunks(batch: Any) -> list[Any]:
    """A batch as a list of chunks (a batch that is not a list is one chunk)."""
    return list(batch) if isinstance(batch, list | tuple) else [batch]


class _Loss(nn.Module):
    """The module's ``StackedForm.terms`` of a batch, as its ``forward`` (what ``functional_call`` runs)."""

    def __init__(self, module: nn.Module, terms: Terms):
        super().__init__()
        self.module = module
        self.terms = terms

    def forward(self, batch: Any) -> tuple[Tensor, Tensor, Tensor]:
        return self.terms(self.module, batch)


class SeedStack:
    """S modules of one config trained as one (see the module docstring); ``modules`` are not modified."""

    def __init__(self, modules: Sequence[nn.Module], terms: Terms | None = None):
        """``terms``: the loss terms to run instead of the module's ``StackedForm.terms`` (a benchmark's
        reference)."""
        if not modules:
            raise ValueError("a seed stack needs at least one module")
        first = modules[0]
        form = stacked_form(first)
        if form is None:
            raise ValueError(f"{type(first).__name__} cannot be stacked over seeds")
        self.padding = form.padding
        self._pack = form.pack
        self.static = False  # bucketed layouts (``compile``)
        # seeds per forward and backward: on a CPU, a group's working set beyond a few seeds outgrows the caches
        device = next(first.parameters()).device
        self.slice_size = min(CPU_SLICE, len(modules)) if device.type == "cpu" else len(modules)
        self.size = len(modules)
        for name, buffer in first.named_buffers():
            for other in modules[1:]:
                if not torch.equal(dict(other.named_buffers())[name], buffer):
                    raise ValueError(f"buffer {name} differs between seeds: it cannot be shared")
        self.template = copy.deepcopy(first)
        for sub in self.template.modules():  # no branches on tensor values under vmap
            if hasattr(sub, "shortcuts"):
                sub.shortcuts = False
        config = getattr(self.template, "config", None)
        if getattr(config, "attention", "dense") in ("flex", "auto"):  # FlexAttention has no vmap rule: the
            self.template.config = replace(config, attention="dense")  # dense path of the same score function
        self._loss = _Loss(self.template, terms or form.terms)
        self.stacked = copy.deepcopy(first)
        names = dict(first.named_parameters())  # shared parameters appear once
        replacement: dict[int, nn.Parameter] = {}
        for name in names:
            stacked = torch.stack([dict(m.named_parameters())[name].detach() for m in modules])
            replacement[id(dict(self.stacked.named_parameters())[name])] = nn.Parameter(stacked)
        _replace_parameters(self.stacked, replacement)
        self._flatten()

    def _flatten(self) -> None:
        """One flat [S, P] buffer per parameter group of the module's own optimizer (``configure_optimizers`` of
        ``stacked``), its parameters re-pointed at them; ``stacked``'s parameters become views of the buffers."""
        configured = self.stacked.configure_optimizers()
        optimizer = configured.get("optimizer") if isinstance(configured, Mapping) else configured
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise ValueError(f"{type(self.stacked).__name__}.configure_optimizers gives no single optimizer")
        named = dict(self.stacked.named_parameters())
        name_of = {id(p): n for n, p in named.items()}
        groups = [[name_of[id(p)] for p in group["params"]] for group in optimizer.param_groups]
        grouped = {n for names in groups for n in names}
        rest = [n for n in named if n not in grouped]  # trained by no group (none in the families today)
        self._solo_groups = copy.deepcopy(optimizer.state_dict()["param_groups"])
        self._layout: list[list[tuple[str, torch.Size]]] = []
        self._flats: list[nn.Parameter] = []
        replacement: dict[int, nn.Parameter] = {}
        for names in groups + ([rest] if rest else []):
            flat = nn.Parameter(torch.cat([named[n].detach().flatten(1) for n in names], dim=1),
                                requires_grad=any(named[n].requires_grad for n in names))
            layout = [(n, named[n].shape[1:]) for n in names]
            for (n, shape), piece in zip(layout, flat.detach().split([shape.numel() for _, shape in layout], 1),
                                         strict=True):
                replacement[id(named[n])] = nn.Parameter(piece.view(self.size, *shape), requires_grad=False)
            self._flats.append(flat)
            self._layout.append(layout)
        _replace_parameters(self.stacked, replacement)
        flags = _fused_flags(optimizer, self._flats[0].device)
        for group, flat in zip(optimizer.param_groups, self._flats, strict=False):
            group["params"] = [flat]
            group.update(flags)
        self.configured = configured
        self.optimizer = optimizer

    # ---- parameters and state per seed -------------------------------------------------------------------
    def parameters(self) -> dict[str, nn.Parameter]:
        """The stacked [S, ...] parameters by name (each shared parameter once): views of the flat buffers, for
        reading (what trains is the flat buffers, ``optimizer``'s; their gradients: ``grads``)."""
        return dict(self.stacked.named_parameters())

    def _views(self, seeds: slice = slice(None)) -> dict[str, Tensor]:
        """The stacked parameters (of the seeds ``seeds``) by name as differentiable views of the flat buffers
        (what the forward uses, so their gradients land in the flat gradient buffers, one per group)."""
        out = {}
        for flat, layout in zip(self._flats, self._layout, strict=True):
            rows = flat[seeds]
            pieces = rows.split([shape.numel() for _, shape in layout], dim=1)
            out.update({n: piece.view(rows.shape[0], *shape)
                        for (n, shape), piece in zip(layout, pieces, strict=True)})
        return out

    def grads(self) -> dict[str, Tensor]:
        """The stacked gradients by name ([S, ...] views of the flat gradient buffers; absent before a backward)."""
        out = {}
        for flat, layout in zip(self._flats, self._layout, strict=True):
            if flat.grad is not None:
                pieces = flat.grad.split([shape.numel() for _, shape in layout], dim=1)
                out.update({n: p.view(self.size, *shape) for (n, shape), p in zip(layout, pieces, strict=True)})
        return out

    def optimizer_state(self, seed: int) -> dict[str, Any]:
        """Seed ``seed``'s optimizer state dict as its solo run's optimizer writes it (per parameter, in the solo
        parameter order and groups; its slices of the flat buffers' state)."""
        live = self.optimizer.state_dict()
        groups = []
        for solo, group in zip(self._solo_groups, live["param_groups"], strict=False):
            groups.append({**solo, **{k: _plain(v) for k, v in group.items() if k not in _FLAT_KEYS}})
        state: dict[int, dict[str, Any]] = {}
        index = 0
        for g, layout in enumerate(self._layout[:len(self._solo_groups)]):
            flat_state = live["state"].get(g, {})
            offset = 0
            for _, shape in layout:
                n = shape.numel()
                if flat_state:
                    state[index] = {k: (v[seed, offset:offset + n].view(shape).clone() if v.dim() > 0
                                        else v.detach().to("cpu", torch.float32).clone())
                                    for k, v in flat_state.items()}
                offset += n
                index += 1
        return {"state": state, "param_groups": groups}

    def load_optimizer_states(self, states: Sequence[Mapping[str, Any]]) -> None:
        """Set the optimizer from every seed's solo optimizer state dict (``optimizer_state``'s form)."""
        first = states[0]
        groups = []
        for g, (solo, group) in enumerate(zip(first["param_groups"], self.optimizer.param_groups, strict=False)):
            groups.append({**{k: v for k, v in solo.items() if k not in _FLAT_KEYS},
                           **{k: group[k] for k in _FLAT_KEYS if k in group}, "params": [g]})
        flat_state: dict[int, dict[str, Tensor]] = {}
        index = 0
        for g, layout in enumerate(self._layout[:len(groups)]):
            indices = list(range(index, index + len(layout)))
            index += len(layout)
            if indices[0] not in first["state"]:
                continue
            flat_state[g] = {}
            for key, value in first["state"][indices[0]].items():
                if value.dim() == 0:
                    flat_state[g][key] = value
                    continue
                flat_state[g][key] = torch.stack([torch.cat([s["state"][k][key].flatten() for k in indices])
                                                  for s in states]).to(self._flats[g])
        rates = [group["lr"] for group in self.optimizer.param_groups]
        self.optimizer.load_state_dict({"state": flat_state, "param_groups": groups})
        for rate, group in zip(rates, self.optimizer.param_groups, strict=True):
            if isinstance(rate, Tensor):  # a compiled update reads this tensor: keep it, with the loaded rate
                rate.fill_(float(group["lr"]))
                group["lr"] = rate

    def state_dict(self, seed: int) -> dict[str, Tensor]:
        """Seed ``seed``'s (index in the stack) state dict, as its solo module's ``state_dict()``."""
        return {k: (v[seed] if isinstance(v, nn.Parameter) else v).detach().clone()
                for k, v in self.stacked.state_dict(keep_vars=True).items()}

    def load_state_dict(self, seed: int, state: Mapping[str, Tensor]) -> None:
        """Set seed ``seed``'s parameters from its solo state dict."""
        with torch.no_grad():
            for k, v in self.stacked.state_dict(keep_vars=True).items():
                if isinstance(v, nn.Parameter):
                    v[seed].copy_(state[k])

    def solo_module(self, seed: int) -> nn.Module:
        """A solo module holding seed ``seed``'s current parameters (a copy)."""
        module = copy.deepcopy(self.template)
        for sub in module.modules():
            if hasattr(sub, "shortcuts"):
                sub.shortcuts = True
        module.load_state_dict(self.state_dict(seed))
        return module

    # ---- forward -----------------------------------------------------------------------------------------
    def losses(self, batch: Any, batched: bool = True, seeds: slice = slice(None)) -> tuple[Tensor, Tensor, Tensor]:
        """Every seed's training loss [S], validation NLL sum [S] and token count [S] (``StackedForm.terms``):
        ``batch`` the group's batch of stacked [S, ...] tensors (``batch``; ``batched=False``: one batch, the
        same for every seed, ``single``, e.g. validation). A packed batch (a list of ``packing.Part``) runs
        each part on its seeds' parameters; a seed's loss is then its NLL sum over the parts / its count.
        ``seeds``: only these seeds' (``batch`` then holds theirs alone)."""
        from torch.func import functional_call, vmap

        from lightning_modules.models.packing import Part

        def one(params: dict[str, Tensor], chunks: Any) -> tuple[Tensor, Tensor, Tensor]:
            named = {f"module.{k}": v for k, v in params.items()}
            return functional_call(self._loss, named, (chunks,))

        def run(params: dict[str, Tensor], batch: Any) -> tuple[Tensor, Tensor, Tensor]:
            if not (isinstance(batch, list) and batch and isinstance(batch[0], Part)):
                return vmap(one, in_dims=(0, 0 if batched else None), randomness="different")(params, batch)
            first = next(iter(params.values()))
            total = first.new_zeros(first.shape[0])
            count = torch.zeros(first.shape[0], dtype=torch.long, device=first.device)
            for part in batch:
                if batched and part.seeds is not None:
                    seeds = torch.tensor(part.seeds, device=first.device)
                    sub = {k: v[seeds] for k, v in params.items()}
                    _, t, c = vmap(one, randomness="different")(sub, part.chunks)
                    total, count = total.index_add(0, seeds, t), count.index_add(0, seeds, c)
                else:
                    _, t, c = vmap(one, in_dims=(0, 0 if batched else None), randomness="different")(
                        params, part.chunks)
                    total, count = total + t, count + c
            return total / count.clamp(min=1), total, count

        self.template.train(self.stacked.training)
        return run(self._views(seeds), batch)

    def outputs(self, *inputs: Any) -> Any:
        """The network's forward on ``inputs`` (the same for every seed) with each seed's parameters: its
        outputs with a leading seed axis (one vmapped forward, attention folded into SDPA's batch as in
        ``losses``). Scoring the same inputs with every seed at once."""
        from torch.func import functional_call, vmap

        def one(params: dict[str, Tensor]) -> Any:
            return functional_call(self.template, params, inputs)

        self.template.train(self.stacked.training)
        return vmap(one)(self._views())

    def compile(self, mode: str, backend: str = "inductor") -> SeedStack:
        """``runtime.compile`` (``lightning_modules.models.compiled``) for the group: ``losses`` (the vmapped
        forward of all seeds; its backward with it) and ``update`` (clipping and the optimizer) through
        ``torch.compile``, each specialised to static shapes (``dynamic=False``), which the packing then keeps to
        a small set of bucketed layouts (``static``), so after every layout has been seen once nothing
        recompiles. Under ``reduce-overhead`` each compiled layout is replayed as CUDA graphs (forward, backward,
        update), with no host sync inside a step. The learning rate becomes a tensor (filled in place by the
        scheduler), so a new rate is not a new graph. The modules given stay eager."""
        from lightning_modules.models.compiled import compile_options

        if mode == "none":
            return self
        self.static = True
        options = {**compile_options(self.template, mode, backend), "dynamic": False}
        torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, LAYOUT_LIMIT)
        self.losses = torch.compile(self.losses, **options)
        self._tensor_rates()
        self.update = torch.compile(self.update, **options)
        return self

    def _tensor_rates(self) -> None:
        """Every optimizer group's learning rate as a 0-dim tensor on the parameters' device (what the fused and
        capturable optimizers read on the device; the scheduler fills it in place)."""
        for group in self.optimizer.param_groups:
            if not isinstance(group["lr"], Tensor):
                group["lr"] = torch.tensor(float(group["lr"]), device=group["params"][0].device)

    def _slices(self) -> list[slice]:
        """The seeds of each forward and backward: ``slice_size`` at a time."""
        return [slice(a, min(a + self.slice_size, self.size)) for a in range(0, self.size, self.slice_size)]

    def step_batches(self, batches: Sequence[Any]) -> list[Any]:
        """Host work of a step: ``batches`` (each seed's own, as collated, on the host) as the group batch of each
        slice of ``slice_size`` seeds (``batch``: packed among that slice's seeds), moved to the group's device
        (one asynchronous copy per tensor on CUDA)."""
        device = self._flats[0].device
        return [group_batch_to(self.batch(batches[seeds]), device) for seeds in self._slices()]

    def backward(self, slices: Sequence[Any], weights: Tensor,
                 autocast: Callable[[], AbstractContextManager] = nullcontext) -> Tensor:
        """Device work of a step: the forward and backward of each slice's batch (``step_batches``), one slice
        after another (each slice's activations freed by its backward before the next slice's forward); the
        gradient is that of sum_s weights[s] * loss[s] (a seed's weight: 1 / the accumulated batches, 0 once it
        failed). ``autocast``: the forward's (bf16-mixed), the backward outside it, as torch advises. Returns the
        losses [S], detached, on the device (no host sync: the caller reads them when it logs)."""
        out = []
        for seeds, batch in zip(self._slices(), slices, strict=True):
            with autocast():
                loss, _, _ = self.losses(batch, seeds=seeds)
            weight = weights[seeds]
            torch.where(weight > 0, loss * weight, torch.zeros_like(loss)).sum().backward()
            out.append(loss.detach())
        return out[0] if len(out) == 1 else torch.cat(out)

    def update(self, max_norm: float) -> None:
        """The optimizer step after ``backward``: each seed's gradients clipped to ``max_norm``
        (``clip_per_seed``), then the family's optimizer over the flat buffers."""
        self.clip_per_seed(max_norm)
        self.optimizer.step()

    def train(self, mode: bool = True) -> SeedStack:
        """Training (dropout on) or evaluation mode."""
        self.stacked.train(mode)
        return self

    def clip_per_seed(self, max_norm: float) -> Tensor:
        """Scale each seed's gradients to global norm <= ``max_norm`` (``clip_grad_norm_`` per seed): one norm
        per seed over its row of each flat gradient buffer, one multiply per buffer; returns the norms [S]."""
        grads = [flat.grad for flat in self._flats if flat.grad is not None]
        norms = torch.linalg.vector_norm(grads[0], dim=1)
        if len(grads) > 1:
            norms = torch.linalg.vector_norm(torch.stack([norms, *(torch.linalg.vector_norm(g, dim=1)
                                                                   for g in grads[1:])]), dim=0)
        coef = (max_norm / (norms + 1e-6)).clamp(max=1.0)[:, None]
        for g in grads:
            g.mul_(coef)
        return norms

    def batch(self, batches: Sequence[Any]) -> Any:
        """S batches (one per seed) -> the group's batch for ``losses``: the module's ``pack`` (the
        Transformer-XL core's: ``packing.pack``), else ``stack_chunks``."""
        return self._pack(batches, self.stack_chunks, self.static) if self._pack else self.stack_chunks(batches)

    def single(self, batch: Any) -> Any:
        """One batch for every seed (validation): ``batch`` in the group's form without the seed axis, for
        ``losses(..., batched=False)``."""
        from torch.utils._pytree import tree_map

        from lightning_modules.models.packing import Part

        group = self.batch([batch])
        if group and isinstance(group[0], Part):
            return [Part(None, tree_map(lambda t: t[0], part.chunks)) for part in group]
        return tree_map(lambda t: t[0], group)

    def stack_chunks(self, batches: Sequence[Any]) -> list[dict[str, Tensor]]:
        """S batches (one per seed: a list of chunks, or one chunk) -> one list of chunks of [S, ...] tensors,
        each field padded to the largest seed's shape and the shorter batches given empty chunks (rows that
        attend to and predict nothing, as the collate function's empty rows)."""
        batches = [as_chunks(b) for b in batches]
        n_chunks = max(len(b) for b in batches)
        out = []
        for c in range(n_chunks):
            present = [b[c] for b in batches if c < len(b)]
            fields = [n for n in self.padding if _field(present[0], n) is not None]
            chunk = {}
            for name in fields:
                tensors = [_field(b[c], name) if c < len(b) else None for b in batches]
                reference = next(t for t in tensors if t is not None)
                shape = [max(t.shape[d] for t in tensors if t is not None) for d in range(reference.dim())]
                chunk[name] = torch.stack([_padded(t, shape, self.padding[name], reference) for t in tensors])
            out.append(chunk)
        return out


# seeds per forward and backward on a CPU (``SeedStack.backward``): cpu-small TG, batch 16 per seed, 1 thread,
# 2026-11-29 (docs/gpu-and-scale.md): 16 seeds in one pass do 0.55x the seed-steps/s of solo loops, in slices of
# 2 / 4 / 8 seeds 1.05x / 1.04x / 0.83x; benchmarks/seed_group.py at 4: 1.09x
CPU_SLICE = 4

# the compiled layouts a group may hold (bucketed: a few dozen per preset; torch's default limit is 8)
LAYOUT_LIMIT = 256

# optimizer settings of the flat buffers that a solo run's optimizer state does not have
_FLAT_KEYS = ("params", "fused", "foreach", "capturable")


def group_batch_to(batch: Any, device: torch.device) -> Any:
    """A group batch (``SeedStack.batch``: ``packing.Part``s, lists and dicts of tensors, chunk objects) built
    on the host, moved to ``device``: one copy per tensor, from pinned memory and asynchronous on CUDA."""
    from lightning_modules.models.packing import Part

    if device.type == "cpu":
        return batch
    if isinstance(batch, Tensor):
        return batch.pin_memory().to(device, non_blocking=True) if batch.device.type == "cpu" else batch.to(device)
    if isinstance(batch, Part):
        return replace(batch, chunks=group_batch_to(batch.chunks, device))
    if isinstance(batch, Mapping):
        return {k: group_batch_to(v, device) for k, v in batch.items()}
    if isinstance(batch, list | tuple):
        return type(batch)(group_batch_to(v, device) for v in batch)
    return batch.to(device) if hasattr(batch, "to") else batch


def _plain(value: Any) -> Any:
    """A 0-dim tensor setting (a compiled group's learning rate) as the float a solo run's state holds."""
    return float(value) if isinstance(value, Tensor) and value.dim() == 0 else value


def plain_state(state: Mapping[str, Any]) -> dict[str, Any]:
    """A scheduler's state dict with 0-dim tensor rates (a compiled group's) as the floats a solo run writes."""
    return {k: [_plain(v) for v in value] if isinstance(value, list) else _plain(value) for k, value in state.items()}


def _fused_flags(optimizer: torch.optim.Optimizer, device: torch.device) -> dict[str, Any]:
    """The group settings that make ``optimizer`` fused on ``device`` (and capturable on CUDA), where its class
    and the device support it (checked by building one on a one-element tensor); else none."""
    if "fused" not in optimizer.defaults:
        return {}
    try:
        type(optimizer)([nn.Parameter(torch.zeros(1, device=device))], fused=True)
    except (RuntimeError, TypeError, ValueError):
        return {}
    flags: dict[str, Any] = {"fused": True, "foreach": False}
    if device.type == "cuda" and "capturable" in optimizer.defaults:
        flags["capturable"] = True
    return flags


def _replace_parameters(module: nn.Module, replacement: Mapping[int, nn.Parameter]) -> None:
    """Swap the parameters of ``module`` (and its sub-modules) by id (a shared parameter stays shared)."""
    for sub in module.modules():
        for key, param in list(sub._parameters.items()):
            if param is not None and id(param) in replacement:
                sub._parameters[key] = replacement[id(param)]


def _field(chunk: Any, name: str) -> Tensor | None:
    if isinstance(chunk, Mapping):
        return chunk.get(name)
    return getattr(chunk, name, None)


def _padded(t: Tensor | None, shape: list[int], value: int | bool, reference: Tensor) -> Tensor:
    """``t`` padded at the end of every dimension to ``shape`` with ``value`` (None: all ``value``)."""
    if t is None:
        return torch.full(shape, value, dtype=reference.dtype, device=reference.device)
    pad: list[int] = []
    for d in reversed(range(t.dim())):
        pad += [0, shape[d] - t.shape[d]]
    if not any(pad):
        return t
    if t.dtype == torch.bool:
        return F.pad(t.to(torch.uint8), pad, value=int(value)).bool()
    return F.pad(t, pad, value=value)
