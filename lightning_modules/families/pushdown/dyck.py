"""Dyck languages for the Pushdown Layers warm-up (Murty et al. 2023, §4.1), as the official code has them.

- **Tokens.** k bracket types named ``a`` .. ``z``, ``aa`` .. ``zz``, ... (``get_identifier_iterator``);
  type ``a`` opens with ``(a`` and closes with ``a)``. Files hold one string per line, tokens separated by
  single spaces, ending in ``END`` (the official ``k-20_d-10_*.txt``); ``END`` is a file marker only, the
  official reader drops it before training.
- **Sampler.** The official PDFA ``DyckPDFA(m, k)``: at an empty stack every opening bracket has
  probability 1/(2k) and ``END`` 1/2 (an ``END`` drawn before ``min_length`` tokens is redrawn); below
  depth m every opening bracket 1/(2k) and the closing bracket of the top 1/2; at depth m that closing
  bracket. The official ``length_max`` is ignored; its readers drop strings over 500 (or 600) tokens, which
  ``max_length`` reproduces. ``min_length`` defaults to 6: the ~700 lines we read of the official
  ``k-20_d-10_val.txt`` (its first and last 16 kB) have none shorter than 6 tokens and many of 6, where
  a minimum of 4 would make about one string in five 4 tokens long. ``held_out_sets`` is the official
  iid/ood split (``get_test_data``), which the val/test files appear to come from.
- **Silver parse** (``get_stack_info`` + ``compute_stack_labels``): a closing bracket reduces, right to
  left, with every constituent completed since its opening bracket and then with the opening bracket, so a
  matched pair is the node ``(a  C1 .. Cn  a)`` right-factored, and an opening bracket only shifts. The
  top-level constituents are never joined: the official labels stop at the last bracket and ``<eos>``
  closes the stack unwritten. ``encode_dyck`` gives exactly that encoding (for prefixes too, whose open
  brackets stay on the stack); ``encode(silver_parse(s))`` equals it when s is one constituent, and
  otherwise differs at the last bracket, which a single tree makes close the whole stack.
- **Test sets** (``eval_utils/eval_dyck.py``): ``long_range_set`` (``get_all_prefixes(min_dep_length=L)``
  on Dyck_{20,40} strings) and ``depth_generalization_set`` (``get_depth_gen_data``: a nest of depth
  15..49 with a Dyck_{20,10} string spliced in).
- **Metric.** ``closing_bracket_accuracy``: the argmax of the next-token scores restricted to the closing
  brackets, as both official evaluations do.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from itertools import count
from pathlib import Path

import numpy as np

from lightning_modules.data.atomic import atomic_write_text
from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown.encoding import PushdownExample, encode

END = "END"
# the test sets of §4.1 / Table 1: dependency length >= L ("long-L"), and deeper nesting
LONG_RANGE = {"long-50": 50, "long-100": 100, "long-200": 200, "long-300": 300}
TEST_SETS = (*LONG_RANGE, "depth")
ROOT = "S"  # label of the node over the top-level constituents in ``silver_parse``
_TOKEN = re.compile(r"\(([a-z]+)|([a-z]+)\)")


# -- tokens -------------------------------------------------------------------------------------------
def bracket_types(k: int) -> list[str]:
    """The names of the first k bracket types: ``a`` .. ``z``, then ``aa`` .. ``zz``, and so on."""
    if k < 1:
        raise ValueError(f"a Dyck language needs at least one bracket type, not {k}")
    names = (letter * repeat for repeat in count(1) for letter in string.ascii_lowercase)
    return [next(names) for _ in range(k)]


def open_bracket(name: str) -> str:
    return "(" + name


def close_bracket(name: str) -> str:
    return name + ")"


def bracket(token: str) -> tuple[bool, str]:
    """(is_opening, type name) of a bracket token; ``ValueError`` for anything else."""
    match = _TOKEN.fullmatch(token)
    if match is None:
        raise ValueError(f"not a bracket: {token!r}")
    return (True, match[1]) if match[1] else (False, match[2])


def open_stack(tokens: Sequence[str]) -> list[tuple[str, int]]:
    """The brackets still open after a Dyck prefix, as (type, position), bottom first.

    ``ValueError`` on a token that is no bracket or a closing bracket that does not match.
    """
    stack: list[tuple[str, int]] = []
    for i, token in enumerate(tokens):
        is_open, name = bracket(token)
        if is_open:
            stack.append((name, i))
        elif not stack:
            raise ValueError(f"unbalanced bracket {token!r} at token {i + 1}: nothing is open")
        elif stack[-1][0] != name:
            raise ValueError(f"unbalanced bracket {token!r} at token {i + 1}: expected "
                             f"{close_bracket(stack[-1][0])!r}")
        else:
            stack.pop()
    return stack


def check_string(tokens: Sequence[str]) -> None:
    """``ValueError`` unless ``tokens`` is a non-empty, balanced Dyck string."""
    if not tokens:
        raise ValueError("empty string")
    left = open_stack(tokens)
    if left:
        raise ValueError(f"unbalanced brackets: {len(left)} left open "
                         f"({' '.join(open_bracket(name) for name, _ in left)})")


def max_depth(tokens: Sequence[str]) -> int:
    """The largest number of brackets open at once."""
    depth = deepest = 0
    for token in tokens:
        depth += 1 if bracket(token)[0] else -1
        deepest = max(deepest, depth)
    return deepest


def dependencies(tokens: Sequence[str]) -> list[tuple[int, int]]:
    """(opening, closing) positions of every matched pair, in the order of the closing brackets."""
    stack: list[int] = []
    pairs = []
    for i, token in enumerate(tokens):
        if bracket(token)[0]:
            stack.append(i)
        else:
            pairs.append((stack.pop(), i))
    return pairs


def next_closing(prefix: Sequence[str]) -> str:
    """The closing bracket that a Dyck prefix with something open must take next to close its top."""
    stack = open_stack(prefix)
    if not stack:
        raise ValueError("nothing is open: no closing bracket can follow")
    return close_bracket(stack[-1][0])


# -- the PDFA -----------------------------------------------------------------------------------------
def pdfa_distribution(stack: Sequence[str], k: int, m: int, length: int, min_length: int
                      ) -> dict[str, float]:
    """The official PDFA's next-token distribution at a stack of open types after ``length`` tokens.

    Tokens with probability 0 are left out. ``END`` is allowed at the empty stack from ``min_length``
    tokens on (before that the official sampler redraws it, so the opening brackets share its mass).
    """
    opens = [open_bracket(name) for name in bracket_types(k)]
    if not stack:
        if length < min_length:
            return dict.fromkeys(opens, 1 / k)
        return {**dict.fromkeys(opens, 1 / (2 * k)), END: 0.5}
    if len(stack) >= m:
        return {close_bracket(stack[-1]): 1.0}
    return {**dict.fromkeys(opens, 1 / (2 * k)), close_bracket(stack[-1]): 0.5}


def sample_string(rng: np.random.Generator, k: int, m: int, min_length: int) -> list[str]:
    """One string of the official Dyck_{k,m} PDFA (without ``END``); see ``pdfa_distribution``.

    One uniform u per step: below 1/2 it closes the top (or ends, at an empty stack), otherwise it opens
    type floor((u - 1/2) 2k). Uniforms are drawn in blocks, so a string costs a few numpy calls.
    """
    names = bracket_types(k)
    tokens: list[str] = []
    stack: list[str] = []
    block, at = rng.random(256), 0
    while True:
        if at == len(block):
            block, at = rng.random(256), 0
        u = block[at]
        at += 1
        if len(stack) == m or (stack and u < 0.5):
            tokens.append(close_bracket(stack.pop()))
        elif u < 0.5:
            if len(tokens) >= min_length:
                return tokens
        else:
            name = names[min(int((u - 0.5) * 2 * k), k - 1)]
            stack.append(name)
            tokens.append(open_bracket(name))


def sample_strings(n: int, k: int = 20, m: int = 10, min_length: int = 6, max_length: int | None = None,
                   seed: int = 0) -> list[list[str]]:
    """n strings of Dyck_{k,m} from the PDFA, the same for the same arguments.

    Strings longer than ``max_length`` are dropped and replaced by further samples, as the official readers
    drop them (500 tokens in ``read_dyck_data``, 600 in ``build_datasets_dyck``).
    """
    if m < 1 or min_length < 1:  # the PDFA may end at once: min_length 0 allows the empty string
        raise ValueError(f"need m >= 1 and min_length >= 1, not m={m}, min_length={min_length}")
    if max_length is not None and max_length < max(min_length, 2):
        raise ValueError(f"max_length {max_length} leaves no string of at least {min_length} tokens")
    rng = np.random.default_rng(seed)
    out: list[list[str]] = []
    while len(out) < n:
        tokens = sample_string(rng, k, m, min_length)
        if max_length is None or len(tokens) <= max_length:
            out.append(tokens)
    return out


def stack_paths(tokens: Sequence[str]) -> list[tuple[int, ...]]:
    """Per top-level constituent, the stack depths after each of its tokens but the last (``sample``'s
    ``stack_paths``: its state hash keeps only the depth)."""
    paths: list[tuple[int, ...]] = []
    path: list[int] = []
    depth = 0
    for token in tokens:
        depth += 1 if bracket(token)[0] else -1
        if depth:
            path.append(depth)
        else:
            paths.append(tuple(path))
            path = []
    return paths


def held_out_sets(train: Sequence[Sequence[str]], size: int, k: int = 20, m: int = 10, min_length: int = 6,
                  seed: int = 1) -> tuple[list[list[str]], list[list[str]]]:
    """``get_test_data``: (iid, ood) sets of ``size`` fresh PDFA strings each.

    A string is ood when one of its ``stack_paths`` occurs in no training string, iid when all do and it is
    not itself a training string (the official val/test files look like iid sets: short strings, shallow,
    far from the raw PDFA's length and depth distribution).
    """
    seen = {path for tokens in train for path in stack_paths(tokens)}
    train_strings = {tuple(tokens) for tokens in train}
    rng = np.random.default_rng(seed)
    iid: list[list[str]] = []
    ood: list[list[str]] = []
    while len(iid) < size or len(ood) < size:
        tokens = sample_string(rng, k, m, min_length)
        if all(path in seen for path in stack_paths(tokens)):
            if tuple(tokens) not in train_strings and len(iid) < size:
                iid.append(tokens)
        elif len(ood) < size:
            ood.append(tokens)
    return iid, ood


# -- silver parse -------------------------------------------------------------------------------------
def silver_stack(tokens: Sequence[str]) -> list[Tree | str]:
    """The official parser's stack after a Dyck prefix: completed pairs as trees, open brackets as tokens.

    A pair is the node ``Tree(type, (open, C1, .., Cn, close))`` over the constituents completed inside it.
    """
    open_stack(tokens)  # validates
    frames: list[tuple[str, list[Tree | str]]] = [("", [])]  # (type, items since its opening bracket)
    for token in tokens:
        is_open, name = bracket(token)
        if is_open:
            frames.append((name, [token]))
        else:
            _, items = frames.pop()
            frames[-1][1].append(Tree(name, (*items, token)))
    return [item for _, items in frames for item in items]


def silver_parse(tokens: Sequence[str]) -> Tree:
    """The silver tree of a balanced Dyck string: ``Tree("S", top-level constituents)``.

    ``encode`` right-factors the root, so when there are several top-level constituents its last bracket
    closes the whole stack where the official labels leave that to ``<eos>``: use ``encode_dyck`` for the
    training encoding.
    """
    check_string(tokens)
    return Tree(ROOT, tuple(silver_stack(tokens)))


def encode_dyck(tokens: Sequence[str]) -> PushdownExample:
    """The official Pushdown encoding of a Dyck string or prefix (``compute_stack_labels`` + tape).

    Each item on ``silver_stack`` is encoded on its own (``encodings.pushdown.encode``) and shifted to its
    place: opening brackets shift, a closing bracket attaches to its opening bracket, and nothing joins
    the items, which ``<eos>`` closes (label 0, tape row a copy of the last, as for any sentence).
    """
    if not tokens:
        raise ValueError("empty string")
    attachment = [0]
    spans = []
    for item in silver_stack(tokens):
        offset = len(attachment) - 1
        if isinstance(item, str):
            attachment.append(offset + 1)
        else:
            example = encode(item)
            attachment.extend((example.attachment[1:-1] + offset).tolist())
            spans.append(example.spans + offset)
    attachment.append(0)
    span_array = np.concatenate(spans) if spans else np.zeros((0, 2), dtype=np.int64)
    return PushdownExample(tuple(tokens), np.array(attachment, dtype=np.int64), span_array)


# -- test sets ----------------------------------------------------------------------------------------
def closing_prefixes(tokens: Sequence[str], min_distance: int = 0) -> Iterator[tuple[list[str], str]]:
    """(prefix, closing bracket) before every closing bracket whose opening one is >= min_distance back.

    The distance is position(closing) - position(opening), as ``get_all_prefixes(min_dep_length=...)``.
    """
    for start, end in dependencies(tokens):
        if end - start >= min_distance:
            yield list(tokens[:end]), tokens[end]


def long_range_set(strings: Iterable[Sequence[str]], min_distance: int, size: int = 50,
                   max_prefix_length: int = 600) -> tuple[list[list[str]], list[str]]:
    """The long-range dependency test set of §4.1 (``get_long_range_dependencies_data``).

    Goes through ``strings`` (officially the Dyck_{20,40} training strings of at most 500 tokens) in
    order, takes every prefix closing a dependency of length >= ``min_distance`` and at most
    ``max_prefix_length`` tokens, and stops after the string that brings the count to ``size`` (so the
    set may hold a few more). Returns (prefixes, targets).
    """
    prefixes: list[list[str]] = []
    targets: list[str] = []
    for tokens in strings:
        for prefix, target in closing_prefixes(tokens, min_distance):
            if len(prefix) <= max_prefix_length:
                prefixes.append(prefix)
                targets.append(target)
        if len(prefixes) >= size:
            break
    return prefixes, targets


def depth_generalization_set(fillers: Sequence[Sequence[str]], seed: int = 0,
                             depths: Sequence[int] = range(15, 50), alphabet: Sequence[str] | None = None,
                             size: int = 100) -> tuple[list[list[str]], list[str]]:
    """The deeper-nesting test set of §4.1 (``get_depth_gen_data``).

    Rounds over ``depths`` (officially 15..49) until ``size`` examples (3 rounds, 105 examples): for depth
    d, d opening brackets of types drawn uniformly from ``alphabet`` (officially the first 10 types) and
    their closing brackets; the last one is the target, and a string drawn from ``fillers`` (officially
    the Dyck_{20,10} test strings) is spliced in at a uniform position 0..2d-1 of the rest. The prefix's
    depth is between d and d + the filler's depth; the target closes the outermost bracket.
    """
    if not fillers or not depths or min(depths) < 1:
        raise ValueError("need filler strings and depths >= 1")
    alphabet = list(alphabet) if alphabet is not None else bracket_types(10)
    rng = np.random.default_rng(seed)
    prefixes: list[list[str]] = []
    targets: list[str] = []
    while len(prefixes) < size:
        for d in depths:
            chosen = [alphabet[i] for i in rng.integers(len(alphabet), size=d)]
            nest = [open_bracket(t) for t in chosen] + [close_bracket(t) for t in reversed(chosen)]
            at = int(rng.integers(len(nest)))  # 0 .. 2d - 1 positions of the 2d - 1 kept tokens
            filler = list(fillers[int(rng.integers(len(fillers)))])
            prefixes.append(nest[:at] + filler + nest[at:-1])
            targets.append(nest[-1])
    return prefixes, targets


# -- metric -------------------------------------------------------------------------------------------
def closing_bracket_accuracy(predict: Callable[[list[list[str]]], Sequence[Mapping[str, float]]],
                             prefixes: Sequence[Sequence[str]], targets: Sequence[str],
                             batch_size: int = 64) -> float:
    """The fraction of prefixes whose best closing bracket under ``predict`` is the target.

    ``predict`` maps a batch of prefixes to one next-token score mapping each (probabilities or
    log-probabilities over the vocabulary); only the closing brackets among its keys compete, as in the
    official ``eval_dyck.py`` and ``dyck_callback.py``, and a tie goes to the first in the mapping's order
    (``argmax`` over vocabulary order).
    """
    if len(prefixes) != len(targets):
        raise ValueError(f"{len(prefixes)} prefixes but {len(targets)} targets")
    if not prefixes:
        raise ValueError("no prefixes to evaluate")
    correct = 0
    for start in range(0, len(prefixes), batch_size):
        batch = [list(p) for p in prefixes[start:start + batch_size]]
        scores = predict(batch)
        if len(scores) != len(batch):
            raise ValueError(f"predict returned {len(scores)} score mappings for {len(batch)} prefixes")
        for row, target in zip(scores, targets[start:start + batch_size], strict=True):
            closing = {token: score for token, score in row.items() if _is_closing(token)}
            if target not in closing:
                raise ValueError(f"the scores have no entry for the target {target!r}")
            best = max(closing, key=closing.__getitem__)  # first maximum in mapping order
            correct += best == target
    return correct / len(prefixes)


def _is_closing(token: str) -> bool:
    match = _TOKEN.fullmatch(token)
    return match is not None and match[2] is not None


# -- files --------------------------------------------------------------------------------------------
def write_strings(path: Path, strings: Sequence[Sequence[str]]) -> None:
    """One string per line ending in ``END``, as the official ``k-20_d-10_*.txt`` (written atomically)."""
    atomic_write_text(Path(path), "".join(" ".join([*s, END]) + "\n" for s in strings))


def read_strings(path: Path) -> list[list[str]]:
    """Balanced Dyck strings, one per line; a final ``END`` is dropped (the official files have one).

    Raises ``InputError`` at ``FILE:LINE`` on an empty line, a token that is no bracket, ``END`` before
    the end, or unbalanced brackets.
    """
    out = []
    for line, tokens in _lines(path):
        if tokens[-1] == END:
            tokens = tokens[:-1]
        _check(path, line, check_string, tokens)
        out.append(tokens)
    return out


def write_prefixes(path: Path, prefixes: Sequence[Sequence[str]], targets: Sequence[str]) -> None:
    """One test example per line: the prefix followed by its target (the official ``full_target``)."""
    if len(prefixes) != len(targets):
        raise ValueError(f"{len(prefixes)} prefixes but {len(targets)} targets")
    atomic_write_text(Path(path), "".join(" ".join([*p, t]) + "\n" for p, t in zip(prefixes, targets,
                                                                                     strict=True)))


def read_prefixes(path: Path) -> tuple[list[list[str]], list[str]]:
    """(prefixes, targets) from ``write_prefixes`` lines; the last token must close the prefix's top one.

    Raises ``InputError`` at ``FILE:LINE`` on malformed lines.
    """
    prefixes, targets = [], []
    for line, tokens in _lines(path):
        _check(path, line, _check_example, tokens)
        prefixes.append(tokens[:-1])
        targets.append(tokens[-1])
    return prefixes, targets


def _check_example(tokens: list[str]) -> None:
    open_stack(tokens)  # every token a bracket, every closing bracket (the target too) matching
    if bracket(tokens[-1])[0]:
        raise ValueError(f"the target {tokens[-1]!r} is not a closing bracket")


def _lines(path: Path) -> Iterator[tuple[int, list[str]]]:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise InputError(f"cannot read Dyck data: {err}", str(path)) from err
    for line, raw in enumerate(text.splitlines(), start=1):
        tokens = raw.split()
        if not tokens:
            raise InputError("empty line", f"{path}:{line}")
        if END in tokens[:-1]:
            raise InputError(f"{END} before the end of the line", f"{path}:{line}")
        yield line, tokens


def _check(path: Path, line: int, check: Callable[[list[str]], None], tokens: list[str]) -> None:
    try:
        check(tokens)
    except ValueError as err:
        raise InputError(str(err), f"{path}:{line}") from err
