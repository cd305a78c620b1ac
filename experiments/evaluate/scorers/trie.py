"""Label log-probs of many encoded sequences with shared prefixes from one forward pass over their trie.

The N proposal trees of a sentence share most of their action prefixes, and the networks built on the shared
Transformer-XL core are causal over their sequence: what position t computes (its input, its attention keys
and their relative positions, COMPOSE or not, added ids) depends only on the tokens up to t. So two sequences
that agree up to t compute the same hidden states there, and a shared prefix needs to be computed once.

**The trie.** Each sequence is inserted position by position; a position becomes a *node* keyed by its parent
node and everything the network reads at that position in the sequence's *solo* forward (the one
``TXLModel.label_logprobs`` runs): token, COMPOSE flag, added id, and its attention row — the absolute key
positions and raw relative positions of the segmented solo sequence (``segmentation.chunk_attention`` of each
chunk: keys restricted to the chunk and its memory, plain or smart, exactly as scoring the sequence alone).
Keying on the row itself (not only on the token) makes sharing safe by construction: two sequences share a
node only where the solo forwards would read the same inputs.

**The packed row.** Every distinct node gets one position in a packed sequence (preorder of the trie: parents
before children); node u at depth t attends to the ancestors of u at the depths of its solo keys, with the solo
relative positions. Memory in a segmented solo forward holds earlier positions' layer inputs, which in the
packed row are those ancestors' own hidden states, so one chunk with an arbitrary pattern and empty memory
computes the same values for sequences longer than the segment length too. Dense attention over a row costs
the square of its length, so a group's sequences are split (in lexicographic order, which keeps subtries
together) into rows of at most ``max_nodes`` nodes (or one sequence when it is longer); rows of all groups of
a call are padded into one batch.

**Reading off.** A node's logits are shared by all sequences through it, but its label differs per sequence
(label t is token t + 1): each sequence's label log-probs are gathered along its own path with its own labels,
float32 log-softmax as ``label_logprobs.picked_logprobs``, returned as float64 (0 where the label is 0).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from lightning_modules.data.encodings.segmentation import Segmentation, chunk_attention

PREFIX_SHARING = ("trie", "off")  # TreeScorer's setting: score candidates through the trie, or each alone
DEFAULT_MAX_NODES = 256  # the longest packed row, unless one sequence is longer (dense attention: quadratic)
DEFAULT_MAX_LENGTH = 1024  # ``TXLModel.grouped_label_logprobs``: a group with a longer sequence is scored alone


def solo_attention(example: Any, seg: Segmentation) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The attention of every position of ``example`` in its segmented solo forward, in CSR form:
    (ptr [N+1], absolute key positions, raw relpos), keys ascending per query."""
    n = len(example)
    counts = np.zeros(n, dtype=np.int64)
    keys, rels, queries = [], [], []
    for c in range(len(seg)):
        att = chunk_attention(example, seg, c)
        start = int(seg.starts[c])
        order = np.lexsort((att.key, att.query))  # by query, then key (memory slots are not key-ordered)
        queries.append(att.query[order] + start)
        keys.append(att.key[order])
        rels.append(att.relpos[order])
    query = np.concatenate(queries)
    np.add.at(counts, query, 1)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, np.concatenate(keys), np.concatenate(rels)


@dataclass
class Trie:
    """The distinct positions (nodes) of some sequences, in insertion order (parents before children).

    Per node: ``tokens``, ``compose``, ``added`` (the per-position inputs), ``columns`` (the nodes it attends,
    itself included) and ``relpos`` (their raw relative positions); ``paths[i]`` the nodes of sequence i.
    """

    tokens: list[int] = field(default_factory=list)
    compose: list[bool] = field(default_factory=list)
    added: list[int] = field(default_factory=list)
    columns: list[np.ndarray] = field(default_factory=list)
    relpos: list[np.ndarray] = field(default_factory=list)
    paths: list[np.ndarray] = field(default_factory=list)
    _index: dict[tuple, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tokens)

    def insert(self, example: Any, seg: Segmentation) -> np.ndarray:
        """Add one encoded sequence; returns its path (node of each position)."""
        ptr, keys, rels = solo_attention(example, seg)
        added = getattr(example, "added", None)
        path = np.empty(len(example), dtype=np.int64)
        parent = -1
        tokens, compose = example.tokens.tolist(), example.compose.tolist()
        added_ids = [0] * len(example) if added is None else added.tolist()
        for t in range(len(example)):
            k, r = keys[ptr[t] : ptr[t + 1]], rels[ptr[t] : ptr[t + 1]]
            key = (parent, tokens[t], compose[t], added_ids[t], k.tobytes(), r.tobytes())
            node = self._index.get(key)
            if node is None:
                node = len(self.tokens)
                self._index[key] = node
                path[t] = node  # a position may attend itself: its own column is the new node
                self.tokens.append(tokens[t])
                self.compose.append(compose[t])
                self.added.append(added_ids[t])
                self.columns.append(path[k])
                self.relpos.append(r)
            path[t] = node
            parent = node
        self.paths.append(path)
        return path


def rows_of(examples: Sequence[Any], max_nodes: int) -> list[list[int]]:
    """The example indices of each packed row: lexicographic order by tokens, a new row when the next
    example's new nodes (its length minus its longest common token prefix with the previous one) would make
    the row longer than ``max_nodes`` (an estimate of the trie's size; the trie itself decides sharing)."""
    order = sorted(range(len(examples)), key=lambda i: examples[i].tokens.tolist())
    rows: list[list[int]] = []
    size, previous = 0, None
    for i in order:
        tokens = examples[i].tokens
        shared = 0
        if previous is not None:
            m = min(len(tokens), len(previous))
            diff = np.flatnonzero(tokens[:m] != previous[:m])
            shared = int(diff[0]) if len(diff) else m
        new = len(tokens) - shared
        if not rows or size + new > max_nodes:
            rows.append([])
            size, new = 0, len(tokens)
        rows[-1].append(i)
        size += new
        previous = tokens
    return rows


def pack(tries: Sequence[Trie], memory_length: int, device: torch.device) -> dict[str, torch.Tensor]:
    """One chunk of B = len(tries) rows (the network's chunk contract, ``models/txl_lm.py``): every row a new
    sequence (``reset``), an empty memory (all memory columns masked, ``mem_src`` -1), node i of a row at
    position i, padding attending nothing."""
    batch, length = len(tries), max(len(t) for t in tries)
    width = memory_length + length
    inputs = np.zeros((batch, length), dtype=np.int64)
    compose = np.zeros((batch, length), dtype=bool)
    added = np.zeros((batch, length), dtype=np.int64)
    flat, rel = [], []
    for b, trie in enumerate(tries):
        n = len(trie)
        inputs[b, :n], compose[b, :n], added[b, :n] = trie.tokens, trie.compose, trie.added
        counts = np.fromiter((len(c) for c in trie.columns), dtype=np.int64, count=n)
        query = np.repeat(np.arange(n, dtype=np.int64), counts)
        flat.append((b * length + query) * width + memory_length + np.concatenate(trie.columns))
        rel.append(np.concatenate(trie.relpos).astype(np.int64))
    mask = np.zeros(batch * length * width, dtype=bool)
    relpos = np.zeros(batch * length * width, dtype=np.int64)
    index = np.concatenate(flat)
    mask[index] = True
    relpos[index] = np.concatenate(rel)
    chunk = {
        "inputs": inputs, "labels": np.zeros_like(inputs), "compose": compose,
        "attn_mask": mask.reshape(batch, length, width), "relpos": relpos.reshape(batch, length, width),
        "mem_src": np.full((batch, memory_length), -1, dtype=np.int64), "reset": np.ones(batch, dtype=bool),
    }
    if any(any(t.added) for t in tries):
        chunk["added"] = added
    return {k: torch.from_numpy(v).to(device) for k, v in chunk.items()}


@dataclass
class TrieStats:
    """What one call shared: distinct nodes over all sequences' positions, and the packed rows."""

    nodes: int = 0
    positions: int = 0
    rows: int = 0


def trie_label_logprobs(groups: Sequence[Sequence[Any]], segmentation: Callable[[Any], Segmentation],
                        forward: Callable[[dict[str, torch.Tensor]], torch.Tensor], memory_length: int,
                        device: torch.device, max_nodes: int = DEFAULT_MAX_NODES,
                        stats: TrieStats | None = None) -> list[list[np.ndarray]]:
    """Each group's examples' label log-probs (as ``TXLModel.label_logprobs``: float64, entry j = log p(token
    j+1 | tokens <= j), 0 where the label is 0) from one forward over the packed tries (module docstring).

    ``segmentation`` cuts an example as its solo forward would; ``forward`` maps one packed chunk to its logits
    [B, L, V]. Sequences of different groups are never packed together (groups are sentences)."""
    tries: list[Trie] = []
    where: list[list[tuple[int, int]]] = []  # per group, per example: (row, index of its path in the row)
    for examples in groups:
        place: list[tuple[int, int] | None] = [None] * len(examples)
        for row in rows_of(examples, max_nodes):
            trie = Trie()
            for i in row:
                trie.insert(examples[i], segmentation(examples[i]))
                place[i] = (len(tries), len(trie.paths) - 1)
            tries.append(trie)
        where.append(place)  # type: ignore[arg-type]
    logits = forward(pack(tries, memory_length, device)).float()
    lse = torch.logsumexp(logits, -1)
    rows, columns, labels = [], [], []
    for examples, place in zip(groups, where):
        for e, (r, p) in zip(examples, place):
            path = tries[r].paths[p]
            rows.append(np.full(len(path), r, dtype=np.int64))
            columns.append(path)
            labels.append(np.asarray(e.labels, dtype=np.int64))
    row_t, col_t, lab_t = (torch.from_numpy(np.concatenate(a)).to(logits.device) for a in (rows, columns, labels))
    picked = (logits[row_t, col_t, lab_t] - lse[row_t, col_t]).masked_fill(lab_t == 0, 0.0)
    flat = picked.cpu().numpy().astype(np.float64)
    if stats is not None:
        stats.nodes += sum(len(t) for t in tries)
        stats.positions += len(flat)
        stats.rows += len(tries)
    out, start = [], 0
    for examples in groups:
        lps = []
        for e in examples:
            lps.append(flat[start : start + len(e)])
            start += len(e)
        out.append(lps)
    return out
