"""TG-shaped test inputs: a tiny STACK/COMPOSE simulation and the official masking library's golden chunks.

``stack_compose`` replays Algorithm 1 of the TG paper with the official conventions (a CNT2 attends to itself;
depth of CNT1/CNT2 = depth of their ONT; relpos = depth difference) so the network tests do not depend on the
encoding package. ``GOLDEN_CHUNKS`` are the chunks that the official library produces for
``(S (NP the hungry cat) (VP meows))`` with L = M = 4 and smart memory (reference-impls.md §1.4).
"""

from __future__ import annotations

import torch

# The transformed sequence of (S (NP the hungry cat) (VP meows)) and its full-sequence attention
# (position: relpos), produced by the official C++ library (reference-impls.md §1.4).
GOLDEN_FULL = [
    {0: 0}, {0: 1, 1: 0}, {0: 2, 1: 1, 2: 0}, {0: 3, 1: 2, 2: 1, 3: 0}, {0: 3, 1: 2, 2: 1, 3: 0, 4: 0},
    {0: 3, 1: 2, 2: 1, 3: 0, 4: 0, 5: 0}, {2: 0, 3: -1, 4: -1, 5: -1, 6: 0}, {0: 2, 1: 1, 6: 0, 7: 0},
    {0: 2, 1: 1, 6: 0, 8: 0}, {0: 3, 1: 2, 6: 1, 8: 1, 9: 0}, {8: 0, 9: -1, 10: 0},
    {0: 2, 1: 1, 6: 0, 10: 0, 11: 0}, {1: 0, 6: -1, 10: -1, 12: 0}, {0: 1, 12: 0, 13: 0},
]
GOLDEN_INPUTS = [1, 2, 3, 4, 5, 6, 7, 7, 8, 9, 10, 10, 11, 11]
GOLDEN_LABELS = [2, 3, 4, 5, 6, 7, 0, 8, 9, 10, 0, 11, 0, 0]
GOLDEN_COMPOSE = [6, 10, 12]

# Chunks with L = M = 4, smart memory: masks as bit rows over [memory | chunk], relpos rows, and the
# smart-memory gather as mem_src (from the official smartmem_mem_from_seq / _mem_from_mem matrices).
GOLDEN_CHUNKS = [
    dict(inputs=[1, 2, 3, 4], labels=[2, 3, 4, 5], compose=[0, 0, 0, 0], reset=True,
         mask=["00001000", "00001100", "00001110", "00001111"],
         relpos=[[0] * 8, [0, 0, 0, 0, 1, 0, 0, 0], [0, 0, 0, 0, 2, 1, 0, 0], [0, 0, 0, 0, 3, 2, 1, 0]],
         mem_src=[4, 5, 6, 7]),
    dict(inputs=[5, 6, 7, 7], labels=[6, 7, 0, 8], compose=[0, 0, 1, 0], reset=False,
         mask=["11111000", "11111100", "00111110", "11000011"],
         relpos=[[3, 2, 1, 0, 0, 0, 0, 0], [3, 2, 1, 0, 0, 0, 0, 0], [0, 0, 0, -1, -1, -1, 0, 0],
                 [2, 1, 0, 0, 0, 0, 0, 0]],
         mem_src=[-1, 0, 1, 6]),
    dict(inputs=[8, 9, 10, 10], labels=[9, 10, 0, 11], compose=[0, 0, 1, 0], reset=False,
         mask=["01111000", "01111100", "00001110", "01110011"],
         relpos=[[0, 2, 1, 0, 0, 0, 0, 0], [0, 3, 2, 1, 1, 0, 0, 0], [0, 0, 0, 0, 0, -1, 0, 0],
                 [0, 2, 1, 0, 0, 0, 0, 0]],
         mem_src=[1, 2, 3, 6]),
    dict(inputs=[11, 11, 0, 0], labels=[0, 0, 0, 0], compose=[1, 0, 0, 0], reset=False,
         mask=["01111000", "10001100", "00000000", "00000000"],
         relpos=[[0, 0, -1, -1, 0, 0, 0, 0], [1, 0, 0, 0, 0, 0, 0, 0], [0] * 8, [0] * 8],
         mem_src=[-1, -1, 0, 4]),
]


def golden_chunks(batch: int = 1) -> list[dict[str, torch.Tensor]]:
    """The golden chunks as tensors (each repeated ``batch`` times)."""
    out = []
    for c in GOLDEN_CHUNKS:
        mask = torch.tensor([[ch == "1" for ch in row] for row in c["mask"]])
        chunk = {
            "inputs": torch.tensor(c["inputs"]), "labels": torch.tensor(c["labels"]), "attn_mask": mask,
            "relpos": torch.tensor(c["relpos"]), "mem_src": torch.tensor(c["mem_src"]),
            "compose": torch.tensor(c["compose"]).bool(), "reset": torch.tensor(c["reset"]),
        }
        out.append({k: v.unsqueeze(0).expand(batch, *v.shape).clone() for k, v in chunk.items()})
    return out


def golden_full_chunk() -> dict[str, torch.Tensor]:
    """The whole golden sequence as one chunk without memory (B = 1)."""
    n = len(GOLDEN_FULL)
    mask = torch.zeros(n, n, dtype=torch.bool)
    relpos = torch.zeros(n, n, dtype=torch.long)
    for i, row in enumerate(GOLDEN_FULL):
        for j, r in row.items():
            mask[i, j] = True
            relpos[i, j] = r
    compose = torch.zeros(n, dtype=torch.bool)
    compose[GOLDEN_COMPOSE] = True
    return {"inputs": torch.tensor([GOLDEN_INPUTS]), "labels": torch.tensor([GOLDEN_LABELS]),
            "attn_mask": mask[None], "relpos": relpos[None], "mem_src": torch.zeros(1, 0, dtype=torch.long),
            "compose": compose[None], "reset": torch.tensor([True])}


def stack_compose(tokens: list[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Algorithm 1 on a transformed action sequence -> (mask [T,T] bool, relpos [T,T], compose [T] bool).

    Tokens: ``<s>``, ``(X`` (ONT), ``X)`` twice in a row (CNT1 then CNT2), anything else a terminal.
    """
    n = len(tokens)
    mask = torch.zeros(n, n, dtype=torch.bool)
    compose = torch.zeros(n, dtype=torch.bool)
    depth = [0] * n
    kinds = []
    for i, tok in enumerate(tokens):
        if tok.endswith(")") and len(tok) > 1:
            kinds.append("CNT2" if kinds and kinds[-1] == "CNT1" and tokens[i - 1] == tok else "CNT1")
        else:
            kinds.append("ONT" if tok.startswith("(") else "T")
    parents: list[int] = []  # open constituents, for depth
    stack: list[int] = []
    for i, kind in enumerate(kinds):
        if i == 0:
            depth[i] = 0
            parents.append(0)
        elif kind == "CNT1":
            parents.pop()
            depth[i] = depth[parents[-1]] + 1
        elif kind == "CNT2":
            depth[i] = depth[i - 1]
        else:
            depth[i] = depth[parents[-1]] + 1
            if kind == "ONT":
                parents.append(i)
        if kind == "CNT1":
            compose[i] = True
            mask[i, i] = True
            j = stack.pop()
            while kinds[j] != "ONT":
                mask[i, j] = True
                j = stack.pop()
            mask[i, j] = True
            stack.append(i)
        else:
            if kind != "CNT2":
                stack.append(i)
            mask[i, stack] = True
            mask[i, i] = True
    d = torch.tensor(depth)
    relpos = (d[:, None] - d[None, :]) * mask
    return mask, relpos, compose


def duplicate_closings(actions: str) -> list[str]:
    """``"<s> (S (NP the cat NP) S)"`` -> the TG sequence with each closing nonterminal doubled."""
    out = []
    for tok in actions.split():
        out.extend([tok, tok] if tok.endswith(")") else [tok])
    return out
