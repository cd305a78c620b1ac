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
from dataclasses import dataclass, replace
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

# (module, chunks) -> (the training loss its solo run minimises, validation NLL sum, validation token count)
Terms = Callable[[nn.Module, Sequence[Mapping[str, Tensor]]], tuple[Tensor, Tensor, Tensor]]


# (S seeds' batches, ``SeedStack.stack_chunks``) -> one group batch whose tensors have a leading seed axis
Pack = Callable[[Sequence[Any], Callable[[Sequence[Any]], list[dict[str, Tensor]]]], Any]


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


def _txl_pack(batches: Sequence[Any], stack: Callable[[Sequence[Any]], list[dict[str, Tensor]]]) -> Any:
    """``packing.pack``, every chunk given ``label_index``: each seed's labelled positions, computed here on the
    host, so the vmapped loss gathers them (``labelled_loss``)."""
    from lightning_modules.models.labelled_loss import padded_label_index
    from lightning_modules.models.packing import pack

    parts = pack([as_chunks(b) for b in batches], TXL_CHUNK_PADDING, _field, stack)
    for part in parts:
        for chunk in part.chunks:
            chunk["label_index"] = padded_label_index(chunk["labels"])
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

    def _views(self) -> dict[str, Tensor]:
        """The stacked parameters by name as differentiable views of the flat buffers (what the forward uses, so
        their gradients land in the flat gradient buffers, one per group)."""
        out = {}
        for flat, layout in zip(self._flats, self._layout, strict=True):
            pieces = flat.split([shape.numel() for _, shape in layout], dim=1)
            out.update({n: piece.view(self.size, *shape) for (n, shape), piece in zip(layout, pieces, strict=True)})
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
            groups.append({**solo, **{k: v for k, v in group.items() if k not in _FLAT_KEYS}})
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
        self.optimizer.load_state_dict({"state": flat_state, "param_groups": groups})

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
    def losses(self, batch: Any, batched: bool = True) -> tuple[Tensor, Tensor, Tensor]:
        """Every seed's training loss [S], validation NLL sum [S] and token count [S] (``StackedForm.terms``):
        ``batch`` the group's batch of stacked [S, ...] tensors (``batch``; ``batched=False``: one batch, the
        same for every seed, ``single``, e.g. validation). A packed batch (a list of ``packing.Part``) runs
        each part on its seeds' parameters; a seed's loss is then its NLL sum over the parts / its count."""
        from torch.func import functional_call, vmap

        from lightning_modules.models.packing import Part

        def one(params: dict[str, Tensor], chunks: Any) -> tuple[Tensor, Tensor, Tensor]:
            named = {f"module.{k}": v for k, v in params.items()}
            return functional_call(self._loss, named, (chunks,))

        def run(params: dict[str, Tensor], batch: Any) -> tuple[Tensor, Tensor, Tensor]:
            if not (isinstance(batch, list) and batch and isinstance(batch[0], Part)):
                return vmap(one, in_dims=(0, 0 if batched else None), randomness="different")(params, batch)
            first = next(iter(params.values()))
            total = first.new_zeros(self.size)
            count = torch.zeros(self.size, dtype=torch.long, device=first.device)
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
        return run(self._views(), batch)

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
        """``runtime.compile`` (``lightning_modules.models.compiled``) for the group: ``losses``, the vmapped
        forward of all seeds, through ``torch.compile`` as one function (the modules given stay eager)."""
        from lightning_modules.models.compiled import compile_options

        if mode != "none":
            self.losses = torch.compile(self.losses, **compile_options(self.template, mode, backend))
        return self

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
        return self._pack(batches, self.stack_chunks) if self._pack else self.stack_chunks(batches)

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


# optimizer settings of the flat buffers that a solo run's optimizer state does not have
_FLAT_KEYS = ("params", "fused", "foreach", "capturable")


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
