"""Parity of ``synbench inspect pushdown`` with the official Pushdown Layers preprocessing on the PTB sample.

The official side is a user's checkout of MurtyShikhar/Pushdown-Layers, run as its BLLIP pipeline runs:
``data_utils/process_bllip.post_process_op`` (collapse unary chains, one node per word piece,
``chomsky_normal_form``), the tree written on one line and read back, then ``text_helpers.flatten`` (the
input string + `` <eos>``), ``compute_attachment_labels_text`` and ``compute_stack_tape(...,
with_depth_info=True)``. The official pipeline splits words with the GPT-2 tokenizer; ``inspect pushdown``
encodes words, so the tokenizer is replaced by one that keeps every word whole (the only stand-in; the
imports the functions above do not use, HF ``datasets`` and the training-only ``sequence`` module, are stubbed
so that no GPU stack is needed). Both sides get each PTB-sample tree after ``tree.clean`` (``-NONE-`` removed,
function tags stripped, root unwrapped). Compared per tree: ``tokens`` (``<s>``, words, ``<eos>``), the
attachment labels and the depth stack tape. A second check ("word pieces") covers what ``inspect`` does not
print, the encoding of words split into several pieces (Appendix C; synbench's SentencePiece training data):
both sides split every word into pieces of at most 3 characters (``Ġ`` marking the official tokenizer's
prefix space) and ``lightning_modules.families.pushdown.encoding.encode(tree, split)`` is compared with the
official pipeline.

Run: ``python -m benchmarks.parity_pushdown_encoding --official DIR [--data-dir DIR]`` (needs ``nltk``).
Exit status 1 if any record differs.
"""

from __future__ import annotations

import importlib
import json
import re
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from benchmarks.parity_common import (
    Report,
    fail,
    first_difference,
    parser,
    ptb_sample_trees,
    stub_modules,
    synbench_stdout,
)
from lightning_modules.data.tree import clean, parse_tree, to_bracketed
from lightning_modules.families.pushdown.encoding import encode


class WholeWordTokenizer:
    """Stands in for ``GPT2Tokenizer.from_pretrained("gpt2")``: every word is one piece."""

    @classmethod
    def from_pretrained(cls, name: str) -> WholeWordTokenizer:
        return cls()

    def tokenize(self, text: str, add_prefix_space: bool = False) -> list[str]:
        return [text]


class PieceTokenizer(WholeWordTokenizer):
    """A deterministic stand-in for GPT-2 BPE: pieces of at most 3 characters, ``Ġ`` marking a prefix space."""

    def tokenize(self, text: str, add_prefix_space: bool = False) -> list[str]:
        return word_pieces(text, add_prefix_space)


def word_pieces(word: str, prefix_space: bool) -> list[str]:
    """Pieces of 3 characters, a backslash escape (PTB's ``\\/``) counting as one: nltk, which the official
    pipeline reads its trees back with, would take a piece ending in a backslash as escaping the ``)``."""
    units = re.findall(r"\\.|.", word, flags=re.DOTALL)
    pieces = ["".join(units[i : i + 3]) for i in range(0, len(units), 3)]
    return ["Ġ" + pieces[0], *pieces[1:]] if prefix_space else pieces


def pieces_record(tree_text: str) -> dict:
    """Our encoding of a tree whose words are split as ``PieceTokenizer`` splits them (Appendix C)."""
    example = encode(clean(parse_tree(tree_text)), lambda word, index: word_pieces(word, index > 0))
    return {"tokens": example.tokens, "attachment": example.attachment.tolist(),
            "stack_tape": example.stack_tape().tolist()}


class Official:
    """The official preprocessing functions, imported from a checkout."""

    def __init__(self, official: Path):
        helpers = official / "data_utils" / "text_helpers.py"
        if not helpers.is_file():
            fail(f"not a Pushdown-Layers checkout: {helpers} missing")
        stub_modules({"transformers": {"GPT2Tokenizer": WholeWordTokenizer}, "datasets": {"Dataset": object},
                      "sequence": {}})
        sys.path[:0] = [str(official), str(official / "data_utils")]
        try:
            self.nltk_tree = importlib.import_module("nltk").Tree
            self.bllip = importlib.import_module("process_bllip")
            self.helpers = importlib.import_module("text_helpers")
        except ImportError as e:
            fail(f"the official preprocessing needs {e.name}: pip install {e.name}")

    def record(self, tree_text: str, tokenizer: WholeWordTokenizer | None = None) -> dict:
        """``{"tokens", "attachment", "stack_tape"}`` as the official BLLIP pipeline computes them."""
        self.bllip.tokenizer = tokenizer or WholeWordTokenizer()  # the module-level GPT-2 tokenizer
        tree = self.bllip.post_process_op(self.nltk_tree.fromstring(tree_text))
        parse = self.nltk_tree.fromstring(" ".join(str(tree).split()))  # written to file and read back
        sentence = self.helpers.flatten(parse, add_eos=True)
        info = self.helpers.compute_attachment_labels_text(parse, sentence)
        tape = self.helpers.compute_stack_tape(info["attachment_labels"], info["cstart_info"], type_labels=None,
                                               with_depth_info=True)
        return {"tokens": ["<s>", *sentence.split(" ")], "attachment": list(info["attachment_labels"]),
                "stack_tape": tape.astype(int).tolist()}


def compare(trees: Sequence[tuple[str, object]], reference: Callable[[str], dict], report: Report,
            pieces_reference: Callable[[str], dict] | None = None) -> None:
    """Compare ``synbench inspect pushdown`` with ``reference(tree_text)`` on every tree, and, given
    ``pieces_reference``, the encoding of the trees with words split into pieces with it."""
    texts = [to_bracketed(clean(tree)) for _, tree in trees]  # type: ignore[arg-type]
    with tempfile.TemporaryDirectory() as tmp:
        trees_file = Path(tmp) / "trees.txt"
        trees_file.write_text("".join(t + "\n" for t in texts), encoding="utf-8")
        lines = synbench_stdout(["inspect", "pushdown", "--trees-file", str(trees_file), "--jsonl"]).splitlines()
    for (location, _), text, line in zip(trees, texts, lines, strict=True):
        checks = [("", json.loads(line), reference(text))]
        if pieces_reference is not None:
            checks.append(("word pieces: ", pieces_record(text), pieces_reference(text)))
        for prefix, ours, theirs in checks:
            for key in ("tokens", "attachment", "stack_tape"):
                same = ours[key] == theirs[key]
                report.add(prefix + key, same, None if same else
                           f"{location}  {text[:200]}\n{first_difference(ours[key], theirs[key], key)}")


def main(argv: Sequence[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0], "a checkout of MurtyShikhar/Pushdown-Layers")
    p.add_argument("--limit", type=int, help="only the first N trees")
    args = p.parse_args(argv)
    official = Official(args.official)
    trees = ptb_sample_trees(args.data_dir)[: args.limit]
    report = Report(show=args.show)
    compare(trees, official.record, report, lambda text: official.record(text, PieceTokenizer()))
    return report.finish(f"synbench inspect pushdown vs the official Pushdown Layers preprocessing "
                         f"({args.official}), {len(trees):,} PTB-sample trees, fields compared per tree:")


if __name__ == "__main__":
    raise SystemExit(main())
