"""Parity of ``synbench evalb`` with the official EVALB program on generated tree pairs from the PTB sample.

The official side is a user's copy of EVALB (a folder with ``evalb.c`` and ``COLLINS.prm``, e.g.
``EVALB/`` of nikitakit/self-attentive-parser), compiled as its Makefile does (``gcc -Wall -g``) into
``--build-dir``. The parameter files are its ``COLLINS.prm`` (``--param collins``) and the same file with
``LABELED 0`` (``--param unlabeled``); EVALB runs with ``-e`` raised so that it does not exit after
MAX_ERROR error sentences, which ``synbench evalb`` never does.

Pairs: every raw PTB-sample tree on one line (the ``( (S ...) )`` wrapper, ``-NONE-`` elements, function tags
and indices kept) is the gold line of one pair per perturbation kind (``KINDS``), each test line generated
deterministically from the tree (seeded by the kind and the tree's index): the identical tree, the cleaned
tree, relabelled constituents (including EQ_LABEL, deleted and function-tagged labels), moved bracket
boundaries, dropped and added constituents, changed POS tags (punctuation tags included, so some pairs become
length errors), changed or dropped words (error sentences) and empty lines (skip sentences), flat and
branching trees as unlabeled parsers print them, and mixtures of several edits. Pairs that EVALB cannot
read (lines of 5,000 bytes or more, over 200 words or brackets; ``synbench evalb`` reads them whole) are left
out and counted. For each parameter file, each kind's file and the file of all pairs are scored by both
programs, and their standard outputs are compared line by line: the per-sentence rows, the totals line and
both summary blocks (All, len<=40).

Run: ``python -m benchmarks.parity_evalb --official EVALB_DIR [--data-dir DIR]``. Exit status 1 on any
difference.
"""

from __future__ import annotations

import random
import subprocess
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from benchmarks.parity_common import Report, fail, parser, ptb_sample_trees, synbench_stdout
from experiments.evaluate.evalb import PARAMS, parse_line
from lightning_modules.data.tree import Tree, clean, to_bracketed

Node = Tree | str
Path_ = tuple[int, ...]
# EVALB's fixed buffers (evalb.c): fgets(buff, 5000), MAX_WORD_IN_SENT, MAX_BRACKET_IN_SENT, MAX_WORD_LEN
MAX_LINE, MAX_WORDS, MAX_BRACKETS, MAX_WORD_LEN = 4998, 200, 200, 99
EXTRA_LABELS = ("ADVP", "PRT", "TOP", "", ",", ".", "``", "-NONE-", "NP-SBJ", "NP=2", "S-TPC-1", "PP-LOC-CLR")
PUNCT_TAGS = (",", ".", ":", "``", "''")


# -- editing trees -------------------------------------------------------------------------------------
def phrases(tree: Tree, path: Path_ = ()) -> Iterator[tuple[Path_, Tree]]:
    """(path, node) of every node that is not a preterminal, in pre-order (the root has path ())."""
    if tree.is_preterminal:
        return
    yield path, tree
    for i, child in enumerate(tree.children):
        if isinstance(child, Tree):
            yield from phrases(child, (*path, i))


def preterminals(tree: Tree, path: Path_ = ()) -> Iterator[tuple[Path_, Tree]]:
    if tree.is_preterminal:
        yield path, tree
        return
    for i, child in enumerate(tree.children):
        if isinstance(child, Tree):
            yield from preterminals(child, (*path, i))


def replace(tree: Tree, path: Path_, new: Callable[[Tree], Sequence[Node]]) -> Tree:
    """``tree`` with the node at ``path`` replaced by the nodes ``new(node)`` (none: removed, several: spliced)."""
    if not path:
        (root,) = new(tree)
        return root  # type: ignore[return-value]
    i, rest = path[0], path[1:]
    child = tree.children[i]
    assert isinstance(child, Tree)
    middle = [replace(child, rest, new)] if rest else list(new(child))
    return Tree(tree.label, (*tree.children[:i], *middle, *tree.children[i + 1 :]))


def relabel(tree: Tree, rng: random.Random, labels: Sequence[str]) -> Tree:
    path, _ = rng.choice(list(phrases(tree)))
    return replace(tree, path, lambda n: [Tree(rng.choice(labels), n.children)])


def drop(tree: Tree, rng: random.Random, labels: Sequence[str]) -> Tree:
    inner = [p for p, _ in phrases(tree) if p]
    if not inner:
        return tree
    return replace(tree, rng.choice(inner), lambda n: list(n.children))


def add(tree: Tree, rng: random.Random, labels: Sequence[str]) -> Tree:
    """Group a run of adjacent children of some node under a new node (a unary node when the run is one)."""
    path, node = rng.choice(list(phrases(tree)))
    a = rng.randrange(len(node.children))
    b = rng.randrange(a, len(node.children)) + 1
    label = rng.choice(labels)
    return replace(tree, path, lambda n: [Tree(n.label, (*n.children[:a], Tree(label, n.children[a:b]),
                                                         *n.children[b:]))])


def move(tree: Tree, rng: random.Random, labels: Sequence[str]) -> Tree:
    """Move one bracket boundary: the last child of a phrase goes to the next sibling phrase, or back."""
    options = [(p, i) for p, n in phrases(tree) for i in range(len(n.children) - 1)
               if all(isinstance(c, Tree) and not c.is_preterminal and len(c.children) > 1
                      for c in n.children[i : i + 2])]
    if not options:
        return add(tree, rng, labels)
    path, i = rng.choice(options)
    forward = rng.random() < 0.5

    def edit(n: Tree) -> list[Tree]:
        left, right = n.children[i], n.children[i + 1]
        assert isinstance(left, Tree) and isinstance(right, Tree)
        if forward:
            left, right = Tree(left.label, left.children[:-1]), Tree(right.label, (left.children[-1], *right.children))
        else:
            left, right = Tree(left.label, (*left.children, right.children[0])), Tree(right.label, right.children[1:])
        return [Tree(n.label, (*n.children[:i], left, right, *n.children[i + 2 :]))]

    return replace(tree, path, edit)


def retag(tree: Tree, rng: random.Random, labels: Sequence[str]) -> Tree:
    path, leaf = rng.choice(list(preterminals(tree)))
    deleted = rng.random() < 0.2  # a punctuation or empty-element tag changes the words EVALB compares
    tag = rng.choice([*PUNCT_TAGS, "-NONE-"] if deleted else ["NN", "JJ", "VBZ", "PRP$", leaf.label + "X"])
    return replace(tree, path, lambda n: [Tree(tag, n.children)])


def reword(tree: Tree, rng: random.Random, labels: Sequence[str]) -> Tree:
    """Change one word, or drop one preterminal (an error sentence unless the word is deleted anyway)."""
    leaves = list(preterminals(tree))
    path, _ = rng.choice(leaves)
    if rng.random() < 0.5 or len(leaves) == 1:
        return replace(tree, path, lambda n: [Tree(n.label, (str(n.children[0]) + "x",))])
    return prune(replace(tree, path, lambda n: []))


def prune(tree: Tree) -> Tree:
    """Remove the phrases left without children (EVALB would read ``(NP)`` as a zero-width bracket)."""
    kept = tuple(c if isinstance(c, str) else prune(c) for c in tree.children
                 if isinstance(c, str) or any(True for _ in preterminals(c)))
    return Tree(tree.label, kept)


def flat(tree: Tree, rng: random.Random, labels: Sequence[str]) -> Tree:
    return Tree("S", tuple(leaf for _, leaf in preterminals(tree)))


def branching(tree: Tree, rng: random.Random, labels: Sequence[str]) -> Tree:
    """A right-branching binary tree over the preterminals with X nodes, or a left-branching one."""
    leaves: list[Node] = [leaf for _, leaf in preterminals(tree)]
    if rng.random() < 0.5:
        out = leaves[-1]
        for leaf in reversed(leaves[:-1]):
            out = Tree("X", (leaf, out))
    else:  # labelled as a parser might, so that labeled matches occur too
        out = leaves[0]
        for leaf in leaves[1:]:
            out = Tree(rng.choice(labels), (out, leaf))
    return out if isinstance(out, Tree) and not out.is_preterminal else Tree("X", (out,))


EDITS = {"relabel": relabel, "move": move, "drop": drop, "add": add, "retag": retag}


def perturb(kind: str, tree: Tree, index: int, labels: Sequence[str]) -> str:
    """The test line of the pair (kind, tree): deterministic in the kind and the tree's index."""
    rng = random.Random(f"{kind}:{index}")
    if kind == "identical":
        return to_bracketed(tree)
    if kind == "cleaned":
        return to_bracketed(clean(tree))
    if kind == "skip":  # an empty line for every third tree, else a flat tree
        return "" if index % 3 == 0 else to_bracketed(flat(tree, rng, labels))
    if kind == "mixed":
        for _ in range(rng.randint(2, 5)):
            tree = rng.choice(list(EDITS.values()))(tree, rng, labels)
        return to_bracketed(tree)
    edit = {**EDITS, "reword": reword, "branching": branching}[kind]
    for _ in range(rng.randint(1, 3) if kind in ("relabel", "drop", "add", "retag") else 1):
        tree = edit(tree, rng, labels)
    return to_bracketed(tree)


KINDS = ("identical", "cleaned", "relabel", "move", "drop", "add", "retag", "reword", "skip", "branching",
         "mixed")


def readable(line: str) -> bool:
    """Whether EVALB's fixed buffers hold the line (else it truncates it or writes past its arrays)."""
    if len(line.encode()) > MAX_LINE:
        return False
    b = parse_line(line, PARAMS["collins"], "pair")
    return (len(b.words) <= MAX_WORDS and len(b.brackets) <= MAX_BRACKETS
            and all(len(w.encode()) <= MAX_WORD_LEN for w in b.words))


def make_pairs(trees: Sequence[Tree]) -> tuple[dict[str, list[tuple[str, str]]], int]:
    """``{kind: [(gold line, test line)]}`` and the number of pairs left out as unreadable by EVALB."""
    labels = sorted({n.label for t in trees for _, n in phrases(t)} | set(EXTRA_LABELS))
    pairs: dict[str, list[tuple[str, str]]] = {k: [] for k in KINDS}
    left_out = 0
    for index, tree in enumerate(trees):
        gold = to_bracketed(tree)
        for kind in KINDS:
            test = perturb(kind, tree, index, labels)
            if readable(gold) and readable(test):
                pairs[kind].append((gold, test))
            else:
                left_out += 1
    return pairs, left_out


# -- running both programs -----------------------------------------------------------------------------
def build_evalb(official: Path, build_dir: Path) -> tuple[Path, dict[str, Path]]:
    """Compile ``evalb.c`` and write the two parameter files; returns (binary, {param name: file})."""
    source, collins = official / "evalb.c", official / "COLLINS.prm"
    if not (source.is_file() and collins.is_file()):
        fail(f"not an EVALB folder: {official} needs evalb.c and COLLINS.prm")
    build_dir.mkdir(parents=True, exist_ok=True)
    binary = build_dir / "evalb"
    done = subprocess.run(["gcc", "-Wall", "-g", "-o", str(binary), str(source)], capture_output=True, text=True)
    if done.returncode != 0:
        fail(f"gcc failed ({done.returncode}):\n{done.stderr[-3000:]}")
    unlabeled = build_dir / "unlabeled.prm"
    unlabeled.write_text(unlabeled_prm(collins.read_text(), str(collins)))
    return binary, {"collins": collins, "unlabeled": unlabeled}


def unlabeled_prm(collins: str, source: str = "COLLINS.prm") -> str:
    """COLLINS.prm with ``LABELED 0``: what ``synbench evalb --param unlabeled`` implements."""
    lines = collins.splitlines(keepends=True)
    labeled = [i for i, line in enumerate(lines) if line.split()[:1] == ["LABELED"]]
    if len(labeled) != 1:
        fail(f"{source}: expected one LABELED line")
    lines[labeled[0]] = "LABELED 0\n"
    return "".join(lines)


def official_output(binary: Path, prm: Path, gold: Path, test: Path) -> str:
    done = subprocess.run([str(binary), "-p", str(prm), "-e", str(10**9), str(gold), str(test)],
                          capture_output=True, text=True, errors="surrogateescape")
    if done.returncode != 0:
        fail(f"evalb exited with {done.returncode}: {done.stderr[-1000:]}")
    return done.stdout


def compare_outputs(check: str, ours: str, theirs: str, pairs: Sequence[tuple[str, str]], report: Report) -> None:
    """Count the per-sentence rows and the summary (totals line + both blocks) as separate checks."""
    a, b = ours.splitlines(), theirs.splitlines()
    n = len(pairs)
    rows_a, rows_b = a[3 : 3 + n], b[3 : 3 + n]
    for i in range(n):
        row_a = rows_a[i] if i < len(rows_a) else "(missing)"
        row_b = rows_b[i] if i < len(rows_b) else "(missing)"
        report.add(f"{check} rows", row_a == row_b, None if row_a == row_b else
                   f"gold: {pairs[i][0][:160]}\ntest: {pairs[i][1][:160]}\nours:     {row_a}\nofficial: {row_b}")
    tail_a, tail_b = a[3 + n :], b[3 + n :]
    diff = [f"ours:     {x}\nofficial: {y}" for x, y in zip(tail_a, tail_b) if x != y]
    if len(tail_a) != len(tail_b):
        diff.append(f"summary lengths: ours {len(tail_a)} lines, official {len(tail_b)}")
    report.add(f"{check} summaries", not diff, "\n".join(diff[:6]))


def compare(pairs: dict[str, list[tuple[str, str]]], official: Callable[[str, Path, Path], str],
            report: Report) -> None:
    """Score every kind's file and the file of all pairs with both programs, for both parameter files."""
    files = {**pairs, "all kinds": [p for kind in KINDS for p in pairs.get(kind, [])]}
    with tempfile.TemporaryDirectory() as tmp:
        for kind, kind_pairs in files.items():
            gold, test = Path(tmp) / f"{kind}.gold", Path(tmp) / f"{kind}.test"
            gold.write_text("".join(g + "\n" for g, _ in kind_pairs), encoding="utf-8")
            test.write_text("".join(t + "\n" for _, t in kind_pairs), encoding="utf-8")
            for param in PARAMS:
                ours = synbench_stdout(["evalb", str(gold), str(test), "--param", param])
                check = f"{param} {kind}" if kind == "all kinds" else param
                compare_outputs(check, ours, official(param, gold, test), kind_pairs, report)


def main(argv: Sequence[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0], "an EVALB folder with evalb.c and COLLINS.prm")
    p.add_argument("--build-dir", type=Path, default=Path(tempfile.gettempdir()) / "synbench-parity-evalb",
                   help="where evalb is compiled and the unlabeled parameter file written")
    p.add_argument("--limit", type=int, help="only the first N trees")
    args = p.parse_args(argv)
    binary, prms = build_evalb(args.official, args.build_dir)
    trees = [tree for _, tree in ptb_sample_trees(args.data_dir)[: args.limit]]
    pairs, left_out = make_pairs(trees)
    report = Report(show=args.show)
    report.notes.append(f"{sum(map(len, pairs.values())):,} pairs in {len(KINDS)} kinds "
                        f"({', '.join(f'{k} {len(v):,}' for k, v in pairs.items())}); {left_out} left out as "
                        "unreadable by EVALB's fixed buffers")
    compare(pairs, lambda param, gold, test: official_output(binary, prms[param], gold, test), report)
    return report.finish(f"synbench evalb vs the official EVALB ({args.official}), pairs from {len(trees):,} "
                         "PTB-sample trees; rows compared per kind file, summaries per file:")


if __name__ == "__main__":
    raise SystemExit(main())
