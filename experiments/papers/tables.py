"""What a paper publishes, as the report shows it beside our results: columns, numbers and regressions.

Units are the papers': perplexities, and accuracies and F1 in percent. Our ``sg``, ``blimp``, ``marvin_linzen``,
``pairs`` and ``dyck.*`` are fractions; the report displays them (and ``sg.circuit.*``, ``blimp.phenomenon.*``) in
percent, ``percent_scale`` says by how much to multiply, and ``metric_title`` names a metric with its display unit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# Our metric names: the papers' title and whether we store a fraction the report shows in percent.
METRIC_TITLES = {
    "ppl": "perplexity (test)",
    "val_ppl": "perplexity (validation)",
    "ppl_stream": "perplexity (test, stream-level)",
    "unsupervised_f1": "unlabeled F1, sentence-level (%)",
    "unsupervised_f1_right_branching": "unlabeled F1, right-branching (%)",
    "splits.left": "% left splits",
    "splits.right": "% right splits",
    "gold_splits.left": "% left splits (gold)",
    "gold_splits.right": "% right splits (gold)",
    "gold_splits_nary.left": "% left splits (gold, unbinarized)",
    "gold_splits_nary.right": "% right splits (gold, unbinarized)",
    "sg": "SG score (%)",
    "blimp": "BLiMP accuracy (%)",
    "marvin_linzen": "Marvin & Linzen accuracy (%)",
    "pairs": "minimal-pair accuracy (%)",
    "f1": "bracket F1 (%)",
    "parse_f1": "unlabeled F1 (%)",
    "decision_accuracy.p": "p accuracy",
    "decision_accuracy.p_prime": "p' accuracy",
    "uas_rerank": "UAS by reranking (%)",
}
# sg, blimp, sg.circuit.*, blimp.phenomenon.*, dyck.SET, marvin_linzen.construction.*, pairs.KEY.VALUE
FRACTION_PREFIXES = ("sg", "blimp", "dyck", "marvin_linzen", "pairs")


def percent_scale(metric: str) -> float:
    """100 for metrics we store as fractions (SG, BLiMP and their breakdowns), else 1."""
    head = metric.split(".", 1)[0]
    return 100.0 if head in FRACTION_PREFIXES else 1.0


def metric_title(metric: str) -> str:
    """A readable name for ``metric`` with its display unit (``SG score (%)``, ``sg.circuit.X (%)``)."""
    if metric in METRIC_TITLES:
        return METRIC_TITLES[metric]
    if "@" in metric:  # a labelled evaluation entry's metric (``experiments.evaluation_plan``): ppl@gum
        base, label = metric.split("@", 1)
        return f"{metric_title(base)} on {label}"
    return f"{metric} (%)" if percent_scale(metric) == 100.0 else metric


@dataclass(frozen=True)
class Column:
    """A column of a published table: what was measured, on which data, with which models."""

    key: str
    title: str
    metric: str  # our metric name it compares with
    dataset: str
    level: str  # sentence | document
    parameters: str
    unit: str  # perplexity | percent | fraction (shown with three decimals, as the paper prints accuracies)


@dataclass(frozen=True)
class PaperNumber:
    """One published mean ± sd with where it comes from."""

    row: str
    column: Column
    table: str  # "Table 1", ...
    split: str  # test | validation
    mean: float
    sd: float | None  # None: the paper gives the mean only
    seeds: int
    upper_bound: bool = False  # a joint model's perplexity (a bound on the marginal likelihood)

    @property
    def source(self) -> str:
        """``Table 1, PTB, test, 12M params, 100 seeds`` (and ``upper bound`` where it is one)."""
        bound = ", upper bound" if self.upper_bound else ""
        data = self.column.dataset.split(" (")[0]
        return f"{self.table}, {data}, {self.split}, {self.column.parameters} params, {self.seeds} seeds{bound}"

    def text(self) -> str:
        """``61.8 ± 0.2`` with the paper's one decimal (``75.6`` where the paper gives no sd; fractions with
        three: ``0.927``)."""
        digits = 3 if self.column.unit == "fraction" else 1
        return f"{self.mean:.{digits}f}" if self.sd is None else f"{self.mean:.{digits}f} ± {self.sd:.{digits}f}"


@dataclass(frozen=True)
class PaperRegression:
    """A published OLS regression of log-probability differences on indicators (TG §4.2)."""

    name: str  # the name of our regression (``analysis.regressions`` in a spec) it compares with
    section: str
    formula: str
    adj_r2: float
    coefficients: dict[str, float]
    p_values: str
    data: str

    def coefficient(self, name: str) -> float | None:
        """The paper's coefficient of indicator ``name`` (case and punctuation ignored), or None."""
        by_key = {_indicator_key(k): v for k, v in self.coefficients.items()}
        return by_key.get(_indicator_key(name))


# Our SyntaxGym metrics -> the suite set each averages (``experiments.evaluate.sg.SUITE_SETS``): ``sg`` over the
# 31 suites of Hu et al. (2020)'s analysis (TG's, Pushdown Layers' and SOM's numbers), ``sg.all_34`` over all 34
# of their release (the official DTG script's)
SG_SUITE_SETS = {"sg": "hu2020-31", "sg.all_34": "all-34"}


@dataclass(frozen=True)
class PaperClaim:
    """A direction a paper states between two of its models: ``better`` beats ``worse`` on ``metrics``.

    The report checks it on any experiment that has both models (``analysis.claims``): at our scale a claim
    may hold, point the same way without significance, or turn over, and each paper's reproduction says
    which, with seed statistics. ``published`` is the paper's (better, worse) pair behind the claim, in the
    paper's units; ``metrics`` are ours, each checked where the experiment has it. ``where`` starts with the
    section that states it (``§4.1, Table 2 (PTB test)``).

    An SG claim names the suite sets of its published pair (``suites``, ``SG_SUITE_SETS``' names) and is checked on
    one of them: every metric of the claim averages that set, for both models. ``against``: the worse side is
    another metric of the runs (a baseline each run computes, e.g. the right-branching trees' F1), then
    ``worse`` is usually ``better`` itself. ``strict`` False: the claim is only that ``worse`` is no better
    ("PaLM-RB yields no improvement over AWD-LSTM"), refuted only by a significant difference the other way.
    """

    better: str  # our model label
    worse: str
    metrics: tuple[str, ...]
    lower_is_better: bool
    where: str  # "§3.1, Table 1 (PTB test)"
    published: tuple[float, float]
    statement: str  # the claim in the paper's words, shortened
    suites: tuple[str, str] = ()  # SG claims: the suite sets of the published (better, worse) numbers
    against: str | None = None  # the worse side's metric when it is not the claim's own
    strict: bool = True

    def __post_init__(self) -> None:
        if not self.where.startswith("§"):
            raise ValueError(f"claim {self.text()}: where {self.where!r} must start with its section (§N.M)")
        sets = {SG_SUITE_SETS[m] for m in (*self.metrics, self.against or "") if m in SG_SUITE_SETS}
        if sets and (len(sets) > 1 or len(self.suites) != 2 or sets.pop() not in self.suites):
            raise ValueError(f"claim {self.text()}: its SG metrics must average one suite set, one of its "
                             f"published numbers' suites {self.suites}")
        if self.suites and not set(self.suites) <= set(SG_SUITE_SETS.values()):
            raise ValueError(f"claim {self.text()}: unknown suite set in {self.suites}")

    @property
    def suite_set(self) -> str | None:
        """The SyntaxGym suite set our numbers of this claim average (None: not an SG claim)."""
        return next((SG_SUITE_SETS[m] for m in self.metrics if m in SG_SUITE_SETS), None)

    def text(self) -> str:
        """``tg < txl-terminals`` (the sign of the claimed means' order; ``<=`` for a claim of no improvement;
        ``palm-u > palm-u's unsupervised_f1_right_branching`` against another metric)."""
        sign = ("<" if self.lower_is_better else ">") + ("" if self.strict else "=")
        return f"{self.better} {sign} {self.worse}" + (f"'s {self.against}" if self.against else "")


def _indicator_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())
