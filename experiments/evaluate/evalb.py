"""Bracket scoring with the semantics of EVALB (Sekine & Collins 1997) and its parameter files.

EVALB reads the gold and the test file line by line (one tree per line) and, for each pair of lines:

* collects the preterminals as (word, tag) terminals, except preterminals whose tag is a DELETE_LABEL
  (punctuation, ``-NONE-``): those words vanish, together with their brackets;
* counts the sentence *length* over all preterminals except DELETE_LABEL_FOR_LENGTH ones (``-NONE-``), so
  punctuation counts towards the ``len<=40`` cut-off although it is never scored;
* calls a pair a **skip** when the test line has no (undeleted) words, and an **error** when the numbers of
  words differ or a word differs; both are counted but score nothing;
* otherwise drops zero-width brackets and brackets whose label (cut at the first ``-`` or ``=``, so
  ``NP-SBJ`` is ``NP``) is a DELETE_LABEL (``TOP``), and matches gold brackets to test brackets one to one
  on span and, when labeled, on label (EQ_LABEL pairs such as ADVP = PRT count as equal). The PTB wrapper
  ``( (S ...) )`` is a bracket with an empty label and is scored like any other, as EVALB does.

Differences from the C program, all on inputs it cannot handle: it never aborts after MAX_ERROR error
sentences; a malformed line (unbalanced brackets, a word outside a preterminal, an empty bracket, two trees
on one line) is an ``InputError`` with ``FILE:LINE`` where EVALB would loop on its error counter; lines
longer than EVALB's 5000-byte buffer and sentences over its 200 words/brackets are read whole instead of
being split or overflowing.

Percentages are reported as EVALB prints them (``%6.2f``): the JSON carries the printed value, rounded to
two decimals, and ``null`` where EVALB prints ``nan`` (F-measure with recall = precision = 0).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from lightning_modules.errors import InputError

# C's isspace in the "C" locale: EVALB's word and label boundaries.
_SPACE = frozenset(" \t\n\v\f\r")
_TERMINATORS = _SPACE | {"(", ")"}

OK, ERROR, SKIP = 0, 1, 2  # EVALB's sentence status codes
STATUS_NAMES = {OK: "ok", ERROR: "error", SKIP: "skip"}


@dataclass(frozen=True)
class EvalbParams:
    """The settings of an EVALB parameter file that affect the scores."""

    name: str
    labeled: bool
    delete_labels: frozenset[str]
    delete_labels_for_length: frozenset[str]
    equal_labels: tuple[tuple[str, str], ...]
    cutoff_len: int = 40

    def same_label(self, a: str, b: str) -> bool:
        """EVALB's ``label_comp``: identical, or an EQ_LABEL pair (in either order)."""
        return a == b or any((a, b) in (pair, pair[::-1]) for pair in self.equal_labels)


# EVALB/COLLINS.prm, the standard setting (TG §3.2 reports labeled F1 with it).
COLLINS = EvalbParams(
    name="collins",
    labeled=True,
    delete_labels=frozenset({"TOP", "-NONE-", ",", ":", "``", "''", "."}),
    delete_labels_for_length=frozenset({"-NONE-"}),
    equal_labels=(("ADVP", "PRT"),),
)
# COLLINS.prm with LABELED 0 and nothing else changed: unlabeled bracket F1 as Pushdown Layers (§5) and SOM
# report it with EVALB (punctuation still deleted, TOP deleted, the sentence span and every unary bracket
# still scored; each bracket matches at most one bracket of the same span).
UNLABELED = replace(COLLINS, name="unlabeled", labeled=False)
PARAMS = {p.name: p for p in (COLLINS, UNLABELED)}


@dataclass
class Bracketing:
    """One line as EVALB sees it: undeleted terminals, brackets in opening order, and the length."""

    words: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    brackets: list[tuple[int, int, str]] = field(default_factory=list)  # (start, end, raw label)
    length: int = 0


@dataclass(frozen=True)
class SentenceResult:
    """One row of EVALB's per-sentence table."""

    id: int
    length: int
    status: int
    matched: int
    gold: int
    test: int
    crossing: int
    words: int
    correct_tags: int

    def as_dict(self) -> dict:
        return {
            "id": self.id,
            "length": self.length,
            "status": STATUS_NAMES[self.status],
            "recall": _printed(100.0 * self.matched / self.gold if self.gold else 0.0),
            "precision": _printed(100.0 * self.matched / self.test if self.test else 0.0),
            "matched": self.matched,
            "gold": self.gold,
            "test": self.test,
            "crossing": self.crossing,
            "words": self.words,
            "correct_tags": self.correct_tags,
            "tagging_accuracy": _printed(100.0 * self.correct_tags / self.words if self.words else 0.0),
        }


# -- reading ------------------------------------------------------------------------------------------
def parse_line(line: str, params: EvalbParams, location: str) -> Bracketing:
    """Read one line the way EVALB's ``read_line`` does; a blank line has no words and no brackets."""
    out = Bracketing()
    stack: list[int] = []
    closed_trees = 0
    n = len(line)
    i = 0
    while i < n:
        c = line[i]
        if c in _SPACE:
            i += 1
        elif c == "(":
            if not stack and closed_trees:
                raise InputError("more than one tree on the line", location)
            j = i + 1
            while j < n and line[j] not in _TERMINATORS:
                j += 1
            label = line[i + 1 : j]
            k = j
            while k < n and line[k] in _SPACE:
                k += 1
            w = k
            while w < n and line[w] not in _TERMINATORS:
                w += 1
            word = line[k:w]
            if word:  # a preterminal "(TAG word)"
                if w >= n or line[w] != ")":
                    raise InputError(f"more than one element in the bracket ({label} {word} ...)", location)
                if label not in params.delete_labels_for_length:
                    out.length += 1
                if label not in params.delete_labels:
                    out.words.append(word)
                    out.tags.append(label)
                if not stack:
                    closed_trees += 1
                i = w + 1
            elif k < n and line[k] == "(":  # a constituent
                stack.append(len(out.brackets))
                out.brackets.append((len(out.words), -1, label))
                i = j
            else:
                raise InputError(f"empty bracket ({label})", location)
        elif c == ")":
            if not stack:
                raise InputError("unbalanced brackets: ')' without a matching '('", location)
            b = stack.pop()
            start, _, label = out.brackets[b]
            out.brackets[b] = (start, len(out.words), label)
            if not stack:
                closed_trees += 1
            i += 1
        else:
            j = i
            while j < n and line[j] not in _TERMINATORS:
                j += 1
            raise InputError(f"text outside a preterminal: {line[i:j]!r}", location)
    if stack:
        raise InputError("unbalanced brackets: '(' is never closed", location)
    return out


def read_lines(path: str | Path) -> list[str]:
    """The lines of a tree file as ``fgets`` returns them (a final newline does not start a line)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read file: {e.strerror or e}", str(path)) from None
    text = data.decode("utf-8", errors="surrogateescape")  # EVALB compares bytes; keep every byte
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# -- scoring ------------------------------------------------------------------------------------------
def _scored_brackets(brackets: list[tuple[int, int, str]], params: EvalbParams) -> list[tuple[int, int, str]]:
    """EVALB's ``massage_data``: drop zero-width brackets and deleted labels, cut labels at '-' / '='."""
    kept = []
    for start, end, label in brackets:
        if start == end:
            continue
        label = _modify_label(label)
        if any(params.same_label(label, d) for d in params.delete_labels):
            continue
        kept.append((start, end, label))
    return kept


def _modify_label(label: str) -> str:
    for i, ch in enumerate(label):
        if ch in "-=":
            return label[:i]
    return label


def score_sentence(sid: int, gold: Bracketing, test: Bracketing, params: EvalbParams) -> SentenceResult:
    """Score one pair of lines (``sid`` is the 1-based line number)."""
    if not test.words:
        return SentenceResult(sid, gold.length, SKIP, 0, 0, 0, 0, 0, 0)
    if len(gold.words) != len(test.words) or gold.words != test.words:
        return SentenceResult(sid, gold.length, ERROR, 0, 0, 0, 0, 0, 0)
    g = _scored_brackets(gold.brackets, params)
    t = _scored_brackets(test.brackets, params)
    used = [False] * len(t)
    matched = 0
    for gs, ge, gl in g:  # greedy one-to-one matching in file order, as EVALB does
        for j, (ts, te, tl) in enumerate(t):
            if not used[j] and gs == ts and ge == te and (not params.labeled or params.same_label(gl, tl)):
                used[j] = True
                matched += 1
                break
    crossing = sum(
        any((gs < ts < ge < te) or (ts < gs < te < ge) for gs, ge, _ in g) for ts, te, _ in t
    )
    correct = sum(params.same_label(a, b) for a, b in zip(gold.tags, test.tags))
    return SentenceResult(sid, gold.length, OK, matched, len(g), len(t), crossing, len(gold.words), correct)


@dataclass(frozen=True)
class Totals:
    """EVALB's accumulated counts over a set of sentences and the statistics it derives from them."""

    sentences: int
    error_sentences: int
    skip_sentences: int
    valid_sentences: int
    matched: int
    gold: int
    test: int
    words: int
    correct_tags: int
    crossing: int
    complete: int
    no_crossing: int
    two_or_less_crossing: int

    @classmethod
    def of(cls, rows: Sequence[SentenceResult]) -> Totals:
        valid = [r for r in rows if r.status == OK]
        return cls(
            sentences=len(rows),
            error_sentences=sum(r.status == ERROR for r in rows),
            skip_sentences=sum(r.status == SKIP for r in rows),
            valid_sentences=len(valid),
            matched=sum(r.matched for r in valid),
            gold=sum(r.gold for r in valid),
            test=sum(r.test for r in valid),
            words=sum(r.words for r in valid),
            correct_tags=sum(r.correct_tags for r in valid),
            crossing=sum(r.crossing for r in valid),
            complete=sum(r.gold == r.test == r.matched for r in valid),
            no_crossing=sum(r.crossing == 0 for r in valid),
            two_or_less_crossing=sum(r.crossing <= 2 for r in valid),
        )

    def statistics(self) -> dict[str, float]:
        """Full-precision values of EVALB's summary lines (nan where it prints nan), same operation order."""
        n = self.valid_sentences
        recall = 100.0 * self.matched / self.gold if self.gold > 0 else 0.0
        precision = 100.0 * self.matched / self.test if self.test > 0 else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall > 0 else math.nan
        return {
            "bracket_recall": recall,
            "bracket_precision": precision,
            "bracket_f1": f1,
            "complete_match": 100.0 * self.complete / n if n > 0 else 0.0,
            "average_crossing": 1.0 * self.crossing / n if n > 0 else 0.0,
            "no_crossing": 100.0 * self.no_crossing / n if n > 0 else 0.0,
            "two_or_less_crossing": 100.0 * self.two_or_less_crossing / n if n > 0 else 0.0,
            "tagging_accuracy": 100.0 * self.correct_tags / self.words if self.words > 0 else 0.0,
        }


def summarize(rows: Sequence[SentenceResult]) -> dict:
    """EVALB's summary block over ``rows`` (percentages as printed; ``null`` for nan)."""
    t = Totals.of(rows)
    return {
        "sentences": t.sentences,
        "error_sentences": t.error_sentences,
        "skip_sentences": t.skip_sentences,
        "valid_sentences": t.valid_sentences,
        **{k: _printed(v) for k, v in t.statistics().items()},
        "matched_brackets": t.matched,
        "gold_brackets": t.gold,
        "test_brackets": t.test,
        "words": t.words,
        "correct_tags": t.correct_tags,
    }


def _printed(x: float) -> float | None:
    """The value ``printf("%6.2f")`` shows (both round the exact binary value), ``None`` for nan."""
    return None if math.isnan(x) else float(f"{x:.2f}")


@dataclass
class EvalbResult:
    rows: list[SentenceResult]
    params: EvalbParams
    line_counts: tuple[int, int]  # (gold lines, test lines); EVALB scores the first min of them

    def as_dict(self) -> dict:
        """The ``synbench evalb --json`` object: ``{"all", "len40", "per_sentence"}``."""
        short = [r for r in self.rows if r.length <= self.params.cutoff_len]
        return {
            "all": summarize(self.rows),
            "len40": summarize(short),
            "per_sentence": [r.as_dict() for r in self.rows],
        }


def evaluate_lines(
    gold_lines: Sequence[str],
    test_lines: Sequence[str],
    params: EvalbParams = COLLINS,
    gold_source: str = "<gold>",
    test_source: str = "<test>",
) -> EvalbResult:
    """Score line pairs; like EVALB, only the first ``min(len(gold), len(test))`` lines are paired."""
    rows = []
    for sid, (g, t) in enumerate(zip(gold_lines, test_lines), start=1):
        gold = parse_line(g, params, f"{gold_source}:{sid}")
        test = parse_line(t, params, f"{test_source}:{sid}")
        rows.append(score_sentence(sid, gold, test, params))
    return EvalbResult(rows, params, (len(gold_lines), len(test_lines)))


def evaluate_files(gold: str | Path, test: str | Path, params: EvalbParams = COLLINS) -> EvalbResult:
    """Score two one-tree-per-line files."""
    return evaluate_lines(read_lines(gold), read_lines(test), params, str(gold), str(test))


# -- EVALB's text report ------------------------------------------------------------------------------
def _f(x: float) -> str:
    return f"{x:6.2f}" if not math.isnan(x) else "  -nan"


def format_report(result: EvalbResult) -> str:
    """The report EVALB prints to standard output, line for line."""
    out = [
        "  Sent.                        Matched  Bracket   Cross        Correct Tag",
        " ID  Len.  Stat. Recal  Prec.  Bracket gold test Bracket Words  Tags Accracy",
        "=" * 76,
    ]
    for r in result.rows:
        rec = 100.0 * r.matched / r.gold if r.gold else 0.0
        prec = 100.0 * r.matched / r.test if r.test else 0.0
        acc = 100.0 * r.correct_tags / r.words if r.words else 0.0
        out.append(
            f"{r.id:4d}  {r.length:3d}    {r.status:d}  {_f(rec)} {_f(prec)}   {r.matched:3d}    {r.gold:3d}"
            f"  {r.test:3d}    {r.crossing:3d}   {r.words:4d}  {r.correct_tags:4d}   {_f(acc)}"
        )
    out.append("=" * 76)
    t = Totals.of(result.rows)
    totals = ""
    if t.gold > 0 and t.test > 0:
        recall, precision = 100.0 * t.matched / t.gold, 100.0 * t.matched / t.test
        totals = f"{'':16}{_f(recall)} {_f(precision)} {t.matched:6d} {t.gold:5d} {t.test:5d}"
        totals += f"  {t.crossing:5d}"
    accuracy = 100.0 * t.correct_tags / t.words if t.words > 0 else 0.0
    out.append(totals + f"  {t.words:5d} {t.correct_tags:5d}   {_f(accuracy)}")
    out.append("=== Summary ===")
    short = [r for r in result.rows if r.length <= result.params.cutoff_len]
    for title, rows in (("All", result.rows), (f"len<={result.params.cutoff_len}", short)):
        out.extend(["", f"-- {title} --", *_summary_lines(rows)])
    return "\n".join(out) + "\n"


def _summary_lines(rows: Sequence[SentenceResult]) -> list[str]:
    t = Totals.of(rows)
    stats = t.statistics()
    return [
        f"Number of sentence        = {t.sentences:6d}",
        f"Number of Error sentence  = {t.error_sentences:6d}",
        f"Number of Skip  sentence  = {t.skip_sentences:6d}",
        f"Number of Valid sentence  = {t.valid_sentences:6d}",
        f"Bracketing Recall         = {_f(stats['bracket_recall'])}",
        f"Bracketing Precision      = {_f(stats['bracket_precision'])}",
        f"Bracketing FMeasure       = {_f(stats['bracket_f1'])}",
        f"Complete match            = {_f(stats['complete_match'])}",
        f"Average crossing          = {_f(stats['average_crossing'])}",
        f"No crossing               = {_f(stats['no_crossing'])}",
        f"2 or less crossing        = {_f(stats['two_or_less_crossing'])}",
        f"Tagging accuracy          = {_f(stats['tagging_accuracy'])}",
    ]
