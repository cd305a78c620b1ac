"""The papers' published numbers with their provenance, mapped to our metrics and models.

Which paper a report shows beside an experiment is ``paper_for(families)``: Pushdown Layers (Murty et al. 2023,
Tables 2 and 4) when the experiment has a Pushdown-family model, Transformer Grammars otherwise.

Sartran et al. (2022), "Transformer Grammars: Augmenting Transformer Language Models with Syntactic Inductive
Biases at Scale", TACL: Table 1 (test sets), Table 2 (validation sets, ablations) and the §4.2 regressions.
Every number is the mean and sample standard deviation over 100 random initialisations of 16-layer models with
12M parameters (PTB) or 252M parameters (BLLIP-LG). Our runs are at another scale, on other data, with fewer
seeds: outputs always show these numbers as "paper, different scale", never as a target we should hit.

Units are the paper's: perplexities, and SG and F1 in percent. Our ``sg`` and ``blimp`` are fractions; the
report displays them (and ``sg.circuit.*``, ``blimp.phenomenon.*``) in percent, ``percent_scale`` says by how
much to multiply. Perplexities of TG and TXL (trees) are upper bounds (approximate marginalisation over
N = 300 proposal trees from an RNNG).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

PAPER = "Sartran et al. (2022), Transformer Grammars, TACL"
PAPER_SCALE = "paper (BLLIP/PTB full scale, 100 seeds)"
SEEDS = 100

# Our model labels, in the order tables and figures show them (others follow, sorted).
MODEL_ORDER = (
    "pushdown", "base-lm", "tg", "txl-trees", "txl-terminals", "tg-doc", "txl-trees-doc", "txl-terminals-doc",
    "tg-no-pos", "tg-linear-pos", "tg-left-branching", "tg-right-branching", "tg-reversed",
    "txl-trees-no-pos", "txl-trees-left-branching", "txl-trees-right-branching", "txl-trees-reversed",
    "txl-terminals-no-pos",
)

# Our metric names: the paper's title and whether we store a fraction the report shows in percent.
METRIC_TITLES = {
    "ppl": "perplexity (test)",
    "val_ppl": "perplexity (validation)",
    "sg": "SG score (%)",
    "blimp": "BLiMP accuracy (%)",
    "f1": "bracket F1 (%)",
    "parse_f1": "unlabeled F1 (%)",
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
    return f"{metric} (%)" if percent_scale(metric) == 100.0 else metric


def model_order(labels) -> list[str]:
    """``labels`` (deduplicated) in the paper's order, unknown labels after them, sorted."""
    labels = set(labels)
    known = [label for label in MODEL_ORDER if label in labels]
    return known + sorted(labels - set(known))


@dataclass(frozen=True)
class Column:
    """A column of Tables 1-2: what was measured, on which data, with which models."""

    key: str
    title: str
    metric: str  # our metric name on the test split (Table 1); Table 2 is the validation split
    dataset: str
    level: str  # sentence | document
    parameters: str
    unit: str


PTB = "PTB (~1M words)"
BLLIP = "BLLIP-LG (~40M words)"
SYNTAXGYM = "SyntaxGym, 31 suites (models trained on BLLIP-LG sentences)"
COLUMNS = {
    "ptb_ppl": Column("ptb_ppl", "PTB perplexity", "ppl", PTB, "sentence", "12M", "perplexity"),
    "bllip_sent_ppl": Column("bllip_sent_ppl", "BLLIP sent. perplexity", "ppl", BLLIP, "sentence", "252M",
                             "perplexity"),
    "bllip_doc_ppl": Column("bllip_doc_ppl", "BLLIP doc. perplexity", "ppl", BLLIP, "document", "252M",
                            "perplexity"),
    "sg": Column("sg", "SG (BLLIP sent.)", "sg", SYNTAXGYM, "sentence", "252M", "percent"),
    "f1": Column("f1", "PTB F1", "f1", "PTB (reranking 300 RNNG samples)", "sentence", "12M", "percent"),
}
COLUMN_KEYS = ("ptb_ppl", "bllip_sent_ppl", "bllip_doc_ppl", "sg", "f1")

# (mean, sd) per column in COLUMN_KEYS order; None where the paper has "n/a".
TABLE1_TEST = {
    "TG": ((61.8, 0.2), (30.3, 0.5), (26.3, 0.1), (82.5, 1.6), (93.7, 0.1)),
    "TXL (trees)": ((61.2, 0.3), (29.8, 0.4), (22.1, 0.1), (80.2, 1.6), (93.6, 0.1)),
    "TXL (terminals)": ((62.6, 0.2), (31.2, 0.4), (23.1, 0.1), (69.5, 2.1), None),
}
TABLE2_VALIDATION = {
    "TG": ((76.1, 0.3), (31.5, 0.6), (26.9, 0.1), (82.5, 1.6), (92.4, 0.1)),
    "TG (no position info.)": ((77.5, 0.3), (31.9, 0.4), (27.2, 0.1), (82.8, 1.4), (92.3, 0.1)),
    "TG (diff. in linear positions)": ((76.3, 0.3), (31.5, 0.6), (26.2, 0.1), (82.6, 1.8), (92.4, 0.1)),
    "TG (left-branching)": ((134.0, 0.8), (45.4, 0.6), (41.3, 0.2), (57.2, 2.2), None),
    "TG (right-branching)": ((91.2, 0.4), (34.2, 0.6), (29.2, 0.1), (52.1, 3.8), None),
    "TG (reversed trees)": ((239.7, 11.5), (49.3, 2.5), (43.7, 0.6), (53.9, 3.2), (82.0, 0.2)),
    "TXL (trees)": ((74.9, 0.3), (30.9, 0.4), (22.3, 0.1), (80.2, 1.6), (92.3, 0.1)),
    "TXL (trees, no position info.)": ((80.4, 0.3), (31.9, 0.3), (31.5, 0.6), (80.2, 1.8), (92.0, 0.1)),
    "TXL (trees, left-branching)": ((101.0, 0.9), (34.3, 0.2), (25.2, 0.2), (64.3, 3.2), None),
    "TXL (trees, right-branching)": ((97.4, 0.4), (33.6, 0.3), (24.4, 0.1), (53.4, 3.6), None),
    "TXL (trees, reversed trees)": ((129.3, 1.4), (38.5, 2.6), (28.3, 0.2), (57.3, 3.4), (87.3, 0.2)),
    "TXL (terminals)": ((77.3, 0.3), (32.2, 0.5), (23.3, 0.1), (69.5, 2.1), None),
    "TXL (terminals, no position info.)": ((80.5, 0.3), (32.9, 0.2), (25.7, 0.2), (68.7, 2.0), None),
}

# Our label -> (paper row, level). Document-level labels compare with the "BLLIP doc." column only.
PAPER_ROWS = {
    "tg": ("TG", "sentence"),
    "txl-trees": ("TXL (trees)", "sentence"),
    "txl-terminals": ("TXL (terminals)", "sentence"),
    "tg-doc": ("TG", "document"),
    "txl-trees-doc": ("TXL (trees)", "document"),
    "txl-terminals-doc": ("TXL (terminals)", "document"),
    "tg-no-pos": ("TG (no position info.)", "sentence"),
    "tg-linear-pos": ("TG (diff. in linear positions)", "sentence"),
    "tg-left-branching": ("TG (left-branching)", "sentence"),
    "tg-right-branching": ("TG (right-branching)", "sentence"),
    "tg-reversed": ("TG (reversed trees)", "sentence"),
    "txl-trees-no-pos": ("TXL (trees, no position info.)", "sentence"),
    "txl-trees-left-branching": ("TXL (trees, left-branching)", "sentence"),
    "txl-trees-right-branching": ("TXL (trees, right-branching)", "sentence"),
    "txl-trees-reversed": ("TXL (trees, reversed trees)", "sentence"),
    "txl-terminals-no-pos": ("TXL (terminals, no position info.)", "sentence"),
}


@dataclass(frozen=True)
class PaperNumber:
    """One published mean ± sd with where it comes from."""

    row: str
    column: Column
    table: str  # "Table 1" | "Table 2"
    split: str  # test | validation
    mean: float
    sd: float | None  # None: the paper gives the mean only
    seeds: int = SEEDS

    @property
    def upper_bound(self) -> bool:
        """Perplexities of the joint models (TG, TXL (trees), all variants, Pushdown-LM) are upper bounds."""
        return self.column.unit == "perplexity" and not self.row.startswith(("TXL (terminals", "Base-LM"))

    @property
    def source(self) -> str:
        """``Table 1, PTB, test, 12M params, 100 seeds`` (and ``upper bound`` where it is one)."""
        bound = ", upper bound" if self.upper_bound else ""
        data = self.column.dataset.split(" (")[0]
        return f"{self.table}, {data}, {self.split}, {self.column.parameters} params, {self.seeds} seeds{bound}"

    def text(self) -> str:
        """``61.8 ± 0.2`` with the paper's one decimal (``75.6`` where the paper gives no sd)."""
        return f"{self.mean:.1f}" if self.sd is None else f"{self.mean:.1f} ± {self.sd:.1f}"


def table_numbers(table: str) -> list[PaperNumber]:
    """Every number of ``"Table 1"`` (test) or ``"Table 2"`` (validation), row by row."""
    if table not in ("Table 1", "Table 2"):
        raise ValueError(f"unknown table {table!r}: Table 1 or Table 2")
    rows, split = (TABLE1_TEST, "test") if table == "Table 1" else (TABLE2_VALIDATION, "validation")
    return [
        PaperNumber(row, COLUMNS[key], table, split, *cell)
        for row, cells in rows.items()
        for key, cell in zip(COLUMN_KEYS, cells, strict=True)
        if cell is not None
    ]


def paper_numbers_for(model: str, metric: str, data: str | None = None, paper: Paper | None = None
                      ) -> list[PaperNumber]:
    """The published numbers of ``paper`` (default TG's) to show beside our ``metric`` of ``model`` (empty when
    the paper has none).

    Pushdown Layers: Table 2 (BLiMP, SG, BLLIP-LG perplexity, test) and Table 4 (``parse_f1``, PTB test). TG:
    ``ppl`` compares with Table 1 (test), ``val_ppl`` with Table 2 (validation), ``sg`` and ``f1`` with
    Table 1. Sentence-level models get the PTB and BLLIP sent. perplexities (only the one matching ``data``
    when it names ``ptb`` or ``bllip``), document-level models the BLLIP doc. one. The paper's SG and F1 are
    sentence-level models only.
    """
    if paper is not None and paper.key == "pushdown":
        return [n for n in pushdown_numbers() if n.column.metric == metric and PUSHDOWN_ROWS.get(model) == n.row]
    if model not in PAPER_ROWS:
        return []
    row, level = PAPER_ROWS[model]
    table = "Table 2" if metric == "val_ppl" else "Table 1"
    wanted = "ppl" if metric in ("ppl", "val_ppl") else metric
    corpus = (data or "").lower()
    out = []
    for number in table_numbers(table):
        column = number.column
        if number.row != row or column.metric != wanted or column.level != level:
            continue
        is_ptb = column.key == "ptb_ppl"
        other_corpus = ("ptb" in corpus and not is_ptb) or ("bllip" in corpus and is_ptb)
        if wanted == "ppl" and level == "sentence" and other_corpus:
            continue
        out.append(number)
    return out


@dataclass(frozen=True)
class PaperRegression:
    """A §4.2 OLS regression of Δ_i = log p_TG(a_i | a_<i) − log p_TXL(trees)(a_i | a_<i) on indicators."""

    name: str
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


def _indicator_key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


ENSEMBLES = f"ensembles of {SEEDS} TG and {SEEDS} TXL (trees), 252M params"
REGRESSIONS = {
    "frequency": PaperRegression(
        "frequency",
        "§4.2.1",
        "Δ ~ HighFreq + MediumFreq + LowFreq",
        0.039,
        {"HighFreq": -0.0488, "MediumFreq": -0.2419, "LowFreq": -0.5481},
        "all p < 1e-3",
        "BLLIP-LG validation set; unigram frequencies from the BLLIP-LG documents training split "
        f"(high f ≥ 1e-3, medium 1e-5 ≤ f < 1e-3, low f < 1e-5); {ENSEMBLES}",
    ),
    "copying": PaperRegression(
        "copying",
        "§4.2.2",
        "Δ ~ InContextPrevSentences + InContextCurSentence + NotInContext",
        0.010,
        {"InContextPrevSentences": -0.2871, "InContextCurSentence": -0.1003, "NotInContext": -0.1340},
        "all p < 1e-3",
        f"BLLIP-LG documents, validation set; {ENSEMBLES}",
    ),
}


# -- Pushdown Layers (Murty et al. 2023) ---------------------------------------------------------------------
PUSHDOWN_CITATION = "Murty et al. (2023), Pushdown Layers, EMNLP"
PUSHDOWN_SEEDS = 3  # §4.2: "averaged across 3 seeds"; Table 2 gives means only
BLLIP_16 = "252M"  # TG's BLLIP-LG size (Pushdown-LM: the same hyper-parameters, §4.2)
PUSHDOWN_COLUMNS = (
    Column("pd_blimp", "BLiMP", "blimp", "BLiMP (models trained on BLLIP-LG sentences)", "sentence", BLLIP_16,
           "percent"),
    Column("pd_sg", "SG test suites", "sg", SYNTAXGYM, "sentence", BLLIP_16, "percent"),
    Column("pd_ppl", "BLLIP-LG perplexity", "ppl", BLLIP, "sentence", BLLIP_16, "perplexity"),
    Column("pd_parse_f1", "PTB unlabeled F1", "parse_f1", "PTB test (2,335 sentences without unknown words)",
           "sentence", BLLIP_16, "percent"),
)
# Table 2 (BLiMP, SG, PPL) and Table 4 (PTB unlabeled F1); None where the paper has no number. TG's row is
# Sartran et al.'s, as Table 2 quotes it; Pushdown-LM's perplexity is a beam-300 bound.
PUSHDOWN_TABLE = {
    "Pushdown-LM": (75.6, 82.3, 19.9, 95.3),
    "Base-LM": (70.1, 69.5, 20.1, None),
    "TG": (None, 82.5, 30.3, None),
}
PUSHDOWN_ROWS = {"pushdown": "Pushdown-LM", "base-lm": "Base-LM", "tg": "TG"}


def pushdown_numbers() -> list[PaperNumber]:
    """Every number of Pushdown Layers' Table 2 and Table 4 (means over 3 seeds; no sd published)."""
    return [PaperNumber(row, column, "Table 4" if column.key == "pd_parse_f1" else "Table 2", "test", mean, None,
                        PUSHDOWN_SEEDS)
            for row, cells in PUSHDOWN_TABLE.items()
            for column, mean in zip(PUSHDOWN_COLUMNS, cells, strict=True) if mean is not None]


@dataclass(frozen=True)
class Paper:
    """Whose numbers a report shows beside ours, and the words that keep them apart from ours."""

    key: str
    citation: str
    column: str  # header of the paper's column
    not_comparable: str
    provenance: str


TG_PAPER = Paper(
    "tg", PAPER, PAPER_SCALE,
    "These results are at a reduced scale and are NOT comparable to the paper's (16-layer models with 12M "
    "parameters on PTB and 252M on BLLIP-LG, 100 seeds per model). The paper's numbers are shown for "
    "orientation only, marked as a different scale.",
    f"Paper numbers: {PAPER}, Table 1 (test sets) and Table 2 (validation sets): mean ± sample sd over 100 "
    "random initialisations; 16-layer models, 12M parameters on PTB (~1M words), 252M on BLLIP-LG (~40M "
    "words); SG on models trained on BLLIP-LG sentences, F1 by reranking 300 RNNG samples on PTB; TG and TXL "
    "(trees) perplexities are upper bounds (300 proposal trees). Different data, scale and seeds from ours.",
)
PUSHDOWN_PAPER = Paper(
    "pushdown", PUSHDOWN_CITATION, "paper (BLLIP-LG full scale, 3 seeds)",
    "These results are at a reduced scale and are NOT comparable to the paper's (16-layer models trained on "
    "BLLIP-LG sentences, beam 300 over attachment decisions, 3 seeds per model). The paper's numbers are shown "
    "for orientation only, marked as a different scale.",
    f"Paper numbers: {PUSHDOWN_CITATION}, Table 2 (BLiMP, SG test suites, BLLIP-LG test perplexity; means over "
    "3 seeds, no sd published; its TG row quotes Sartran et al. 2022) and Table 4 (unlabeled F1 against binarized "
    "PTB test trees, 2,335 sentences without unknown words); 16-layer models on BLLIP-LG; Pushdown-LM's "
    "perplexity is a bound from a beam of 300. Different data, scale and seeds from ours.",
)


def paper_for(families: Iterable[str]) -> Paper:
    """Pushdown Layers' tables for an experiment with a Pushdown-family model, TG's otherwise."""
    return PUSHDOWN_PAPER if set(families) & {"pushdown", "base-lm"} else TG_PAPER
