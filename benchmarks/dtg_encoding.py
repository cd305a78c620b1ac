"""Throughput of the DTG encoding (CoNLL-U trees -> the batch tensors a DTG trains on), against the official
DTG code's approach rebuilt in Python, measured in the same run, interleaved.

Both sides start from parsed UD EWT trees (dev + test; projective only, both sides drop the rest) and end
with what the network reads per batch of ``--batch`` sentences: token ids, labels, the arc tokens' head
ids, the attention mask and the relative positions.

- ``synbench``: what ``dtg_data.build`` + ``collate_sentences`` do for ``--system standard|eager|swift``: the
  projectivity check, the oracle, ``dtg.encode_transitions`` (one walk of ``DTGState``; per token its sorted
  attend list in CSR form) and the ids, then per batch ``segment`` + ``collate_sentences`` with
  ``attn_mask`` [B,T,M+T] and ``relpos`` materialised (M = L = ``--length``, T = the batch's longest sentence).
- ``reference`` (zhaoyd1/Dep_Transformer_Grammars): ``data_scripts/conll_to_dep.py``'s oracle (its own loop,
  with its single-root check), the ids and token types of ``masking_bllip/utils.py`` (``TokenTypeRanges``),
  then per sentence ``masking_bllip/masking_rules.cc`` as the official ``forward_prepare`` calls it
  (``StackComposeDoubleClosingNT``, sequence = memory = 512, smart memory): ``Transform`` doubles the arcs into
  arrays padded to a multiple of 512, ``ComputeAttentionQuantities`` walks the stack by token types (word
  units = SOW/LA/RA/SOS; ``cur_depth``/``all_stack_depth`` relative positions; ``composed_position``), and
  ``MakeChunks`` writes the dense 512x512 mask, 512x1024 relpos, 512x512 memory mask and the two 512x512
  memory-update matrices, zero-filled as Eigen's ``Zero()`` does, then fills them position by position; then
  ``forward_prepare``'s Python: chunk 0, the diagonal forced to 1, inputs gathered at the composed positions,
  mask and relpos sliced to the batch's length and stacked. The C++ parts are rebuilt here in Python, the
  same algorithm loop for loop. The official code has only arc-standard: for ``eager``/``swift`` the reference
  is the same dense chunk building and ``forward_prepare`` over the attend lists of a ``DTGState`` walk (the
  simple approach, not an official one).
- ``--official DIR`` (arc-standard) adds a third side: the same with the official masking library itself
  (``chunks_for_sequence``, built as ``parity_dtg_encoding.py`` builds it) in place of its rebuild.

The outputs of every side are checked equal (every real token's ids, labels, head ids, mask row and relpos
row) before timing. Batches are streamed (one batch's tensors alive at a time, as in training). Times are
the best of ``--repeats`` runs per side, the sides alternating within each repeat.

    PYTHONPATH=. python benchmarks/dtg_encoding.py [--system standard] [--repeats 3] [--official DIR]

Measured 2026-11-24 15:05-15:07 UTC on this machine's CPU (2 cores shared with three other agents' jobs, load
average 1.5-1.7 while measuring; one torch thread), UD EWT dev + test, 4,021 projective of 4,078 sentences,
batch 64, synbench L = M = 512, best of 3, interleaved:

    system     DTG tokens   synbench          reference (rebuilt)   ratio   official library itself   ratio
    standard   145,944      2,012 sent/s      1,344 sent/s          1.5x    573 sent/s                3.5x
    eager      175,528      1,817 sent/s      1,025 sent/s          1.8x    (no official code)
    swift      149,965      1,928 sent/s      1,055 sent/s          1.8x    (no official code)

The official library is slower than its Python rebuild, which writes the same dense matrices; the library also
copies each one out of Eigen into NumPy (the likely cause; not profiled further). Where synbench's time goes
(cProfile, standard): ``dtg.encode_transitions`` (the ``DTGState`` walk) 44%, the projectivity check
(``non_projective_arcs``, quadratic) 21%, densifying ``relpos`` [B,T,M+T] (M = 512 memory columns a
sentence-level DTG never attends to) 13%. A first run that kept every batch's dense tensors alive measured
page faults, not the encoding (eager 0.8x): batches are streamed since.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from lightning_modules.data.corpora import load_corpus
from lightning_modules.data.dependency import DepTree
from lightning_modules.data.encodings.choe_charniak import ActionVocab
from lightning_modules.data.encodings.segmentation import segment
from lightning_modules.data.vocab import WordVocab
from lightning_modules.families.dtg import data as dtg_data
from lightning_modules.families.dtg import encoding as dtg
from lightning_modules.families.dtg.encoding import DTGType as T

OFFICIAL_LENGTH = 512  # the official forward_prepare's sequence_length = memory_length
UNITS = (T.W, T.LA, T.RA, T.SOS)  # the official walk's word units (SOW, LEFTARC, RIGHTARC, SOS)


def ud_trees(data_dir: str | None, splits: Sequence[str] = ("dev", "test")) -> list[DepTree]:
    """The UD EWT trees of ``splits`` from the prepared data (``synbench prepare``)."""
    corpus = load_corpus("ud-ewt", data_dir)
    return [tree for split in splits for _, tree in corpus.sentences(split)]


def vocabularies(trees: Sequence[DepTree], system: str) -> tuple[ActionVocab, WordVocab]:
    """Word and action vocabularies over ``trees`` as ``dtg_data.build`` makes them (min count 2)."""
    words = WordVocab.build([w for t in trees for w in t.forms], 2)
    transitions = sorted({t.token() for tree in trees if tree.is_projective()
                          for t in dtg.oracle(tree.heads, system) if t.action != "gen"})
    return ActionVocab(tuple(words.tokens), (), tuple(transitions)), words


# -- synbench ----------------------------------------------------------------------------------------------
def synbench(trees: Sequence[DepTree], system: str, vocab: ActionVocab, words: WordVocab, length: int,
             batch: int) -> Iterator[dtg_data.DTGBatch]:
    """The batches, one at a time (a training loop holds one batch's dense tensors at a time)."""
    encode = dtg_data.example_encoder("dtg", system, "w+arc", vocab, words)
    examples = [encode(t, dtg.oracle(t.heads, system)) for t in trees if t.is_projective()]
    for lo in range(0, len(examples), batch):
        rows = [(e, segment(e, length, length, "plain")) for e in examples[lo : lo + batch]]
        (chunk,) = dtg_data.collate_sentences(rows)
        chunk.attn_mask, chunk.relpos  # noqa: B018 -- materialise the dense tensors, as training does
        yield chunk


# -- the reference: the official pipeline, rebuilt ---------------------------------------------------------
def official_oracle(words: Sequence[tuple[str, int]]) -> list[str] | None:
    """The oracle of ``conll_to_dep.py``, step for step: (form, 0-based head, -1 = root) -> the action list,
    None when the stack does not reduce to the root word (the script then drops the sentence)."""
    n = len(words)
    last_dependent = [0] * n
    for d, (_, head) in enumerate(words):
        if head != -1:
            last_dependent[head] = d
    stack: list[int] = []
    out: list[str] = []
    nxt = stalled_at = 0
    while nxt < n or len(stack) != 1:
        if nxt == n and len(stack) != 1:  # no word left: stop once a pass changes nothing
            if stalled_at == len(stack):
                break
            stalled_at = len(stack)
        if len(stack) < 2 and nxt < n:
            stack.append(nxt)
            out.append(words[nxt][0])
            nxt += 1
        if len(stack) < 2:
            continue
        s1, s0 = stack[-2], stack[-1]
        shift = False
        if words[s1][1] == s0:
            del stack[-2]
            out.append(dtg.LEFT_ARC)
        elif words[s0][1] == s1 and last_dependent[s0] < nxt:
            stack.pop()
            out.append(dtg.RIGHT_ARC)
        else:
            shift = nxt < n
        if shift:
            stack.append(nxt)
            out.append(words[nxt][0])
            nxt += 1
    if len(stack) == 1 and words[stack[0]][1] == -1:
        return [*out, dtg.POP_ROOT]
    return None


class Reference:
    """The official pipeline over our vocabularies: ids, types, the masking library's walk, dense chunks."""

    def __init__(self, system: str, vocab: ActionVocab, words: WordVocab):
        self.system, self.vocab, self.words = system, vocab, words
        self.sos, self.eos = vocab.id(dtg.BOS), vocab.id(dtg.EOS)
        ids = {name: vocab.id(name) if name in vocab else -1 for name in (dtg.LEFT_ARC, dtg.RIGHT_ARC, dtg.POP_ROOT)}
        self.left_arc, self.right_arc, self.pop_root = ids[dtg.LEFT_ARC], ids[dtg.RIGHT_ARC], ids[dtg.POP_ROOT]
        # the doubled tokens: left_arc/right_arc (arc-swift: every reach, left_arc[k] and right_arc[k])
        self.arcs = {vocab.id(tok) for tok in vocab.tokens if tok.partition("[")[0] in (dtg.LEFT_ARC, dtg.RIGHT_ARC)}
        self.word_ids = np.zeros(len(vocab), dtype=bool)  # the official startofword_id table (word level: all)
        self.word_ids[[vocab.id(w) for w in words.tokens]] = True

    def sentences(self, trees: Sequence[DepTree]) -> list[tuple[np.ndarray, tuple]]:
        """Per kept sentence: its ids (``<s>`` ... ``</s>``) and what ``chunk`` needs: the ``Transform``-ed
        (inputs, labels) and per doubled position (to_attend, relative positions, composed position, stack)."""
        out = []
        for tree in trees:
            if self.system == "standard":
                actions = official_oracle([(f, h - 1) for f, h in zip(tree.forms, tree.heads)])
                if actions is None:
                    continue
                ids = np.array([self.sos, *(self.vocab.id(a) if a in (dtg.LEFT_ARC, dtg.RIGHT_ARC, dtg.POP_ROOT)
                                            else self.vocab.id(self.words.unkify(a)) for a in actions), self.eos])
                work = self.prepare(ids)
            else:
                if not tree.is_projective():
                    continue
                transitions = dtg.oracle(tree.heads, self.system)
                forms = [self.words.unkify(w) for w in tree.forms]
                ids = np.array([self.sos, *self.vocab.ids(dtg.items(forms, transitions)), self.eos])
                inputs, labels, _ = self.transform(ids, np.zeros_like(ids))
                work = (inputs, labels, state_attention(transitions, self.system))
            out.append((ids, work))
        return out

    def prepare(self, ids: np.ndarray) -> tuple:
        """What ``chunk`` needs of an arc-standard sentence: ``Transform`` and the library's walk."""
        inputs, labels, types = self.transform(ids, self.types(ids))
        return inputs, labels, official_attention(types)

    def chunk(self, work: tuple) -> dict[str, np.ndarray]:
        """Chunk 0 of one sentence (``MakeChunks``)."""
        return dense_chunk(*work)

    def types(self, ids: np.ndarray) -> np.ndarray:
        """``TokenTypeRanges.token_type_from_token`` on the start-of-word sequence."""
        result = np.full_like(ids, 3, dtype=np.int32)  # TERMINAL
        result[ids == self.sos] = T.SOS
        result[ids == 0] = T.PAD
        result[self.word_ids[ids]] = T.W
        result[ids == self.left_arc] = T.LA
        result[ids == self.right_arc] = T.RA
        result[ids == self.pop_root] = T.POP
        return result

    def transform(self, ids: np.ndarray, types: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``Transform`` of (inputs = ids[:-1], labels = ids[1:]): each arc doubled, the first copy without a
        label; arrays padded to a multiple of 512."""
        size = -(-2 * (len(ids) - 1) // OFFICIAL_LENGTH) * OFFICIAL_LENGTH
        inputs, labels, out_types = (np.zeros(size, dtype=np.int64) for _ in range(3))
        j = 0
        for token, label, ttype in zip(ids[:-1].tolist(), ids[1:].tolist(), types[:-1].tolist()):
            if token in self.arcs:
                inputs[j] = inputs[j + 1] = token
                out_types[j], out_types[j + 1] = ttype, T.LA2 if ttype == T.LA else T.RA2
                labels[j + 1] = label
                j += 2
            else:
                inputs[j], labels[j], out_types[j] = token, label, ttype
                j += 1
        return inputs, labels, out_types[:j]

    def batch(self, sentences: Sequence[tuple]) -> dict[str, torch.Tensor]:
        """``forward_prepare`` (``sub+action``) over one batch: chunk 0 of each sentence, sliced and stacked."""
        length = max(len(ids) + sum(1 for t in ids.tolist() if t in self.arcs) for ids, _ in sentences)
        fields: dict[str, list[np.ndarray]] = {k: [] for k in ("original", "inputs", "labels", "mask", "relpos")}
        for _, work in sentences:
            chunk = self.chunk(work)
            src = chunk["inputs"][: length - 1]
            composed = chunk["composed_position"][: length - 1]
            fields["original"].append(np.array(src))
            fields["inputs"].append(np.array(src[composed]))
            fields["labels"].append(np.array(chunk["labels"][: length - 1]))
            mask = chunk["attention_mask"][: length - 1, : length - 1]
            for i in range(len(mask)):
                mask[i, i] = 1
            fields["mask"].append(np.array(mask))
            width = chunk["attention_mask"].shape[1]
            fields["relpos"].append(np.array(chunk["relpos"][: len(mask), width : width + len(mask)]))
        return {k: torch.as_tensor(np.array(v)) for k, v in fields.items()}

    def run(self, trees: Sequence[DepTree], batch: int) -> Iterator[dict[str, torch.Tensor]]:
        """The batches, one at a time."""
        kept = self.sentences(trees)
        for lo in range(0, len(kept), batch):
            yield self.batch(kept[lo : lo + batch])


class LibraryReference(Reference):
    """The reference with the official masking library itself (a user's checkout, ``--official``) in place of
    its rebuild: ``chunks_for_sequence`` per sentence, as ``forward_prepare`` calls it (arc-standard only)."""

    def __init__(self, vocab: ActionVocab, words: WordVocab, rules: Any):
        super().__init__("standard", vocab, words)
        self.rules = rules

    def prepare(self, ids: np.ndarray) -> tuple:
        return ids.astype(np.int32), self.types(ids)

    def chunk(self, work: tuple) -> dict[str, np.ndarray]:
        ids, types = work
        chunk = self.rules.chunks_for_sequence(ids[:-1], types[:-1], ids[1:], types[1:])[0]
        return {"inputs": chunk[0], "labels": chunk[2], "attention_mask": chunk[4], "relpos": chunk[5],
                "composed_position": chunk[11]}


def official_attention(types: np.ndarray) -> list[tuple]:
    """``ComputeAttentionQuantities``: per position (to_attend, relative positions, composed position, stack)."""
    types_ = types.tolist()
    stack: list[int] = []
    on_stack: set[int] = set()
    cur_depth: list[int] = []
    all_depth: list[int] = []
    composed: list[int] = []
    stack_depth = -1
    prev_composition = -1
    result = []
    for pos, ttype in enumerate(types_):
        cur_depth.append(0)
        all_depth.append(0)
        composed.append(pos)
        cp = pos
        if ttype in (T.LA, T.RA, T.POP):
            right_index = left_index = -1
            for i in range(len(stack) - 1, -1, -1):
                if types_[stack[i]] in UNITS:
                    if right_index == -1:
                        right_index = i
                    else:
                        left_index = i
                        break
            if left_index == -1:
                raise ValueError("left == nullptr || right == nullptr")
            stack_depth -= 1
            all_depth[pos] = stack_depth
            to_attend = []
            for i in range(left_index, len(stack)):
                node = stack[i]
                if ttype == T.LA and i < right_index:
                    cur_depth[node] = 1
                if ttype != T.LA and i >= right_index:
                    cur_depth[node] = 1
                if ttype == T.LA and i >= right_index:
                    all_depth[node] = stack_depth
                if ttype != T.LA and i < right_index:
                    all_depth[node] = stack_depth
                if node in on_stack:
                    to_attend.append(node)
            cp = composed[stack[-1]] if ttype == T.LA else composed[stack[right_index - 1]]
            composed[pos] = prev_composition = cp
            del stack[len(stack) - len(to_attend):]
            on_stack.difference_update(to_attend)
            to_attend.append(pos)
            stack.append(pos)
            on_stack.add(pos)
        else:
            to_attend = [*stack, pos]
            if ttype not in (T.LA2, T.RA2):
                if prev_composition != -1:
                    raise ValueError("prev_composition != -1")
                stack.append(pos)
                if ttype in (T.W, T.SOS):
                    stack_depth += 1
                all_depth[pos] = stack_depth
                on_stack.add(pos)
            else:
                if prev_composition == -1:
                    raise ValueError("prev_composition == -1")
                cp = composed[pos] = prev_composition
                all_depth[pos] = all_depth[pos - 1]
                prev_composition = -1
        relpos = [cur_depth[pos] - cur_depth[k] if cur_depth[k] else all_depth[pos] - all_depth[k]
                  for k in to_attend]
        result.append((to_attend, relpos, cp, list(stack)))
    return result


def state_attention(transitions: Sequence[dtg.Transition], system: str) -> list[tuple]:
    """The same per-position quantities from a ``DTGState`` walk (arc-eager/-swift: no official code)."""
    state = dtg.DTGState(system)
    tokens = [state.start()]
    stacks = [state.units()]
    for t in transitions:
        made = state.apply(t)
        tokens += made
        stacks += [state.units()] * len(made)
    return [(tok.keys, tok.relpos, p if tok.arc_head is None else tok.arc_head, stack)
            for p, (tok, stack) in enumerate(zip(tokens, stacks))]


def dense_chunk(inputs: np.ndarray, labels: np.ndarray, info: list[tuple]) -> dict[str, np.ndarray]:
    """``MakeChunks`` for chunk 0 (the only one the official code reads), smart memory, L = M = 512."""
    n = OFFICIAL_LENGTH
    chunk = {"inputs": np.zeros(n, dtype=np.int64), "labels": np.zeros(n, dtype=np.int64)}
    chunk["inputs"][: min(n, len(inputs))] = inputs[:n]
    chunk["labels"][: min(n, len(labels))] = labels[:n]
    for name, shape in (("attention_indicator", (n,)), ("attention_mask", (n, n)), ("relpos", (n, 2 * n)),
                        ("memory_attention_mask", (n, n)), ("memory_padding_mask", (n,)),
                        ("memory_position", (n,)), ("depth", (n,)), ("composed_position", (n,)),
                        ("update_memory_from_sequence", (n, n)), ("update_memory_from_memory", (n, n))):
        chunk[name] = np.full(shape, 0, dtype=np.int32)  # written, as Eigen's Zero() does
    chunk["memory_position"][:] = -1
    last = 0
    for i in range(n):
        if i >= len(info):  # padding: an empty attention info
            continue
        to_attend, relpos, composed, _ = info[i]
        if chunk["inputs"][i] > 0:
            last = i
        chunk["composed_position"][i] = composed
        for key, rel in zip(to_attend, relpos):
            if key < n:
                chunk["attention_mask"][i, key] = 1
                chunk["relpos"][i, n + key] = rel
    memory = n - 1
    for position in reversed(info[last][3]):  # the smart memory: the stack after the last token, top first
        if memory < 0:
            break
        chunk["update_memory_from_sequence"][position, memory] = 1
        memory -= 1
    return chunk


# -- comparison and timing ---------------------------------------------------------------------------------
def check_equal(ours: Iterable[dtg_data.DTGBatch], reference: Iterable[dict[str, torch.Tensor]]
                ) -> tuple[int, int]:
    """Assert equal outputs on every real token; return the numbers of sentences and tokens compared."""
    count = tokens = 0
    for chunk, ref in zip(ours, reference, strict=True):
        assert chunk.inputs.shape[0] == ref["inputs"].shape[0]
        memory = chunk.mem_src.shape[1]
        for r in range(chunk.inputs.shape[0]):
            n = int((chunk.inputs[r] > 0).sum())
            arcs = chunk.added[r, :n] > 0
            assert torch.equal(chunk.inputs[r, :n], ref["original"][r, :n]), r
            assert torch.equal(chunk.added[r, :n][arcs], ref["inputs"][r, :n][arcs]), r
            assert torch.equal(chunk.labels[r, :n], ref["labels"][r, :n]), r
            assert torch.equal(chunk.attn_mask[r, :n, memory : memory + n], ref["mask"][r, :n, :n].bool()), r
            assert torch.equal(chunk.relpos[r, :n, memory : memory + n], ref["relpos"][r, :n, :n].long()), r
            count += 1
            tokens += n
    return count, tokens


def interleaved(repeats: int, sides: dict[str, Callable[[], Any]]) -> dict[str, float]:
    """Best time of each side over ``repeats`` rounds, the order alternating round by round."""
    best = {name: float("inf") for name in sides}
    names = list(sides)
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            sides[name]()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def main(argv: Sequence[str] | None = None) -> dict[str, float]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--system", choices=dtg.SYSTEMS, default="standard")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64, help="sentences per batch (the official recipe's 64)")
    ap.add_argument("--length", type=int, default=512, help="synbench's segment L = M (the official 512)")
    ap.add_argument("--sentences", type=int, help="only the first N trees")
    ap.add_argument("--data-dir", help="where `synbench prepare` staged ud-ewt (default: $SYNBENCH_DATA, ...)")
    ap.add_argument("--official", type=Path, metavar="DIR",
                    help="a checkout of zhaoyd1/Dep_Transformer_Grammars: also time its masking library itself "
                         "(built as parity_dtg_encoding.py builds it; arc-standard)")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    trees = ud_trees(args.data_dir)[: args.sentences]
    vocab, words = vocabularies(trees, args.system)
    reference = Reference(args.system, vocab, words)
    kept, tokens = check_equal(synbench(trees, args.system, vocab, words, args.length, args.batch),
                               reference.run(trees, args.batch))
    sides = {"synbench": lambda: deque(synbench(trees, args.system, vocab, words, args.length, args.batch), 0),
             "reference": lambda: deque(reference.run(trees, args.batch), 0)}
    if args.official is not None:
        if args.system != "standard":
            raise SystemExit("error: the official library has arc-standard only")
        from benchmarks.parity_dtg_encoding import Official

        official = Official(args.official, Path(tempfile.gettempdir()) / "synbench-parity-dtg")
        library = LibraryReference(vocab, words, official.rules())
        check_equal(synbench(trees, args.system, vocab, words, args.length, args.batch), library.run(trees, args.batch))
        sides["library"] = lambda: deque(library.run(trees, args.batch), 0)
    print(f"UD EWT dev+test: {kept:,} projective of {len(trees):,} sentences, {tokens:,} DTG tokens "
          f"(arc-{args.system}); batch {args.batch}, synbench L = M = {args.length}, official 512; outputs "
          f"checked equal; best of {args.repeats}, interleaved; 1 torch thread")
    times = interleaved(args.repeats, sides)
    rate = {k: kept / v for k, v in times.items()}
    name = "official DTG pipeline rebuilt" if args.system == "standard" else "DTGState walk + official dense chunks"
    print(f"  synbench (encode + collate): {rate['synbench']:9.0f} sentences/s ({times['synbench']:.2f} s)")
    print(f"  reference ({name}): {rate['reference']:9.0f} sentences/s ({times['reference']:.2f} s)")
    print(f"  ratio: {rate['synbench'] / rate['reference']:.1f}x")
    if "library" in rate:
        print(f"  official library itself ({args.official}): {rate['library']:9.0f} sentences/s "
              f"({times['library']:.2f} s); ratio: {rate['synbench'] / rate['library']:.1f}x")
    return rate


if __name__ == "__main__":
    main()
