"""What a paper publishes, as the report shows it beside our results: columns, numbers and regressions.

Units are the papers': perplexities, and accuracies and F1 in percent. Our ``sg`` and ``blimp`` are fractions;
the report displays them (and ``sg.circuit.*``, ``blimp.phenomenon.*``) in percent, ``percent_scale`` says by
how much to multiply, and ``metric_title`` names a metric with its display unit.
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
    "f1": "bracket F1 (%)",
    "parse_f1": "unlabeled F1 (%)",
    "decision_accuracy.p": "p accuracy",
    "decision_accuracy.p_prime": "p' accuracy",
    "uas_rerank": "UAS by reranking (%)",
}
FRACTION_PREFIXES = ("sg", "blimp")  # sg, blimp, sg.circuit.*, blimp.phenomenon.*


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


@dataclass(frozen=True)
class PaperClaim:
    """A direction a paper states between two of its models: ``better`` beats ``worse`` on ``metrics``.

    The report checks it on any experiment that has both models (``analysis.claims``): at our scale a claim
    may hold, point the same way without significance, or turn over, and each paper's reproduction says
    which, with seed statistics. ``published`` is the paper's (better, worse) pair behind the claim, in the
    paper's units; ``metrics`` are ours, each checked where the experiment has it.
    """

    better: str  # our model label
    worse: str
    metrics: tuple[str, ...]
    lower_is_better: bool
    where: str  # "Table 1, PTB test" or "§3.1"
    published: tuple[float, float]
    statement: str  # the claim in the paper's words, shortened

    def text(self) -> str:
        """``tg < txl-terminals`` (the sign of the claimed means' order)."""
        return f"{self.better} {'<' if self.lower_is_better else '>'} {self.worse}"


def _indicator_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())
