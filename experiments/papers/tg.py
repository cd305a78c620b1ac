"""Transformer Grammars (Sartran et al. 2022, TACL): Tables 1-2 and the §4.2 regressions, with provenance.

"Transformer Grammars: Augmenting Transformer Language Models with Syntactic Inductive Biases at Scale":
Table 1 (test sets), Table 2 (validation sets, ablations) and the §4.2 regressions. Every number is the mean
and sample standard deviation over 100 random initialisations of 16-layer models with 12M parameters (PTB) or
252M parameters (BLLIP-LG). Our runs are at another scale, on other data, with fewer seeds: outputs always
show these numbers as "paper, different scale", never as a target we should hit. Perplexities of TG and TXL
(trees) are upper bounds (approximate marginalisation over N = 300 proposal trees from an RNNG).
"""

from __future__ import annotations

from experiments.papers import Paper
from experiments.papers.tables import Column, PaperClaim, PaperNumber, PaperRegression

CITATION = "Sartran et al. (2022), Transformer Grammars, TACL"
SCALE = "paper (BLLIP/PTB full scale, 100 seeds)"
SEEDS = 100

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

# Our label -> (paper row, level), in the tables' order. Document-level labels compare with the "BLLIP doc."
# column only.
ROWS = {
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


def table_numbers(table: str) -> list[PaperNumber]:
    """Every number of ``"Table 1"`` (test) or ``"Table 2"`` (validation), row by row."""
    if table not in ("Table 1", "Table 2"):
        raise ValueError(f"unknown table {table!r}: Table 1 or Table 2")
    rows, split = (TABLE1_TEST, "test") if table == "Table 1" else (TABLE2_VALIDATION, "validation")
    return [
        PaperNumber(row, COLUMNS[key], table, split, *cell, seeds=SEEDS,
                    upper_bound=COLUMNS[key].unit == "perplexity" and not row.startswith("TXL (terminals"))
        for row, cells in rows.items()
        for key, cell in zip(COLUMN_KEYS, cells, strict=True)
        if cell is not None
    ]


def numbers_for(model: str, metric: str, data: str | None = None) -> list[PaperNumber]:
    """The published numbers to show beside our ``metric`` of ``model`` (empty when the paper has none).

    ``ppl`` compares with Table 1 (test), ``val_ppl`` with Table 2 (validation), ``sg`` and ``f1`` with
    Table 1. Sentence-level models get the PTB and BLLIP sent. perplexities (only the one matching ``data``
    when it names ``ptb`` or ``bllip``), document-level models the BLLIP doc. one. The paper's SG and F1 are
    sentence-level models only.
    """
    if model not in ROWS:
        return []
    row, level = ROWS[model]
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


ENSEMBLES = f"ensembles of {SEEDS} TG and {SEEDS} TXL (trees), 252M params"
REGRESSIONS = (
    PaperRegression(
        "frequency",
        "§4.2.1",
        "Δ ~ HighFreq + MediumFreq + LowFreq",
        0.039,
        {"HighFreq": -0.0488, "MediumFreq": -0.2419, "LowFreq": -0.5481},
        "all p < 1e-3",
        "BLLIP-LG validation set; unigram frequencies from the BLLIP-LG documents training split "
        f"(high f ≥ 1e-3, medium 1e-5 ≤ f < 1e-3, low f < 1e-5); {ENSEMBLES}",
    ),
    PaperRegression(
        "copying",
        "§4.2.2",
        "Δ ~ InContextPrevSentences + InContextCurSentence + NotInContext",
        0.010,
        {"InContextPrevSentences": -0.2871, "InContextCurSentence": -0.1003, "NotInContext": -0.1340},
        "all p < 1e-3",
        f"BLLIP-LG documents, validation set; {ENSEMBLES}",
    ),
)

# The directions §3 states, with Table 1's test numbers behind them (PTB perplexity, SG of the BLLIP sentence
# models over Hu et al.'s 31 suites, PTB F1 of reranking, BLLIP doc. perplexity for the document-level models),
# and those §4.1.1 states about the transformed trees, with Table 2's validation numbers (PTB perplexity, SG, F1;
# ours are the test sets')
SG_SUITES = ("hu2020-31", "hu2020-31")
TRANSFORMS = {"tg-left-branching": "TG (left-branching)", "tg-right-branching": "TG (right-branching)",
              "tg-reversed": "TG (reversed trees)"}
TRANSFORMED = "§4.1.1, Table 2 (PTB validation; ours: test)"


def _validation(row: str, column: str) -> float:
    """The mean of Table 2's ``row`` in ``column`` (a key of COLUMN_KEYS)."""
    return TABLE2_VALIDATION[row][COLUMN_KEYS.index(column)][0]


CLAIMS = (
    PaperClaim("tg", "txl-terminals", ("ppl",), True, "§3.1, Table 1 (PTB test)", (61.8, 62.6),
               "TG and TXL (trees) achieve a lower perplexity than TXL (terminals), although theirs is a bound"),
    PaperClaim("txl-trees", "txl-terminals", ("ppl",), True, "§3.1, Table 1 (PTB test)", (61.2, 62.6),
               "joint modelling of trees and strings improves perplexity"),
    PaperClaim("txl-trees", "tg", ("ppl",), True, "§3.1, Table 1 (PTB test)", (61.2, 61.8),
               "TXL (trees) slightly outperforms the more biased TG in perplexity"),
    PaperClaim("tg", "txl-terminals", ("sg",), False, "§3.3, Table 1 (SG)", (82.5, 69.5),
               "recursive syntactic composition benefits syntactic generalization", suites=SG_SUITES),
    PaperClaim("tg", "txl-trees", ("sg",), False, "§3.3, Table 1 (SG)", (82.5, 80.2),
               "TG generalizes better than TXL (trees), which has no composition", suites=SG_SUITES),
    PaperClaim("txl-trees", "txl-terminals", ("sg",), False, "§3.3, Table 1 (SG)", (80.2, 69.5),
               "modelling the trees at all improves syntactic generalization", suites=SG_SUITES),
    PaperClaim("txl-terminals-doc", "tg-doc", ("ppl",), True, "§3.1, Table 1 (BLLIP doc. test)", (23.1, 26.3),
               "on documents TG substantially underperforms TXL (terminals)"),
    PaperClaim("txl-trees-doc", "txl-terminals-doc", ("ppl",), True, "§3.1, Table 1 (BLLIP doc. test)",
               (22.1, 23.1), "on documents TXL (trees) again outperforms TXL (terminals)"),
    PaperClaim("txl-trees-doc", "tg-doc", ("ppl",), True, "§3.1, Table 1 (BLLIP doc. test)", (22.1, 26.3),
               "at the document level TG's perplexity suffers by about 4 points against TXL (trees)'s"),
    PaperClaim("tg", "txl-trees", ("f1",), False, "§3.2, Table 1 (PTB F1, reranking)", (93.7, 93.6),
               "TG does slightly better than TXL (trees) at reranking the RNNG samples (significant, p < 1e-3)"),
    *(PaperClaim("tg", label, ("ppl",), True, TRANSFORMED, (_validation("TG", "ptb_ppl"),
                                                            _validation(row, "ptb_ppl")),
                 "for TG, perplexity is much worse, regardless of the transformation, than with the original trees")
      for label, row in TRANSFORMS.items()),
    *(PaperClaim("tg", label, ("sg",), False, "§4.1.1, Table 2 (SG)", (_validation("TG", "sg"),
                                                                                  _validation(row, "sg")),
                 "for TG, syntactic generalization is much worse, regardless of the transformation",
                 suites=SG_SUITES)
      for label, row in TRANSFORMS.items()),
    PaperClaim("tg", "tg-reversed", ("f1",), False, "§4.1.1, Table 2 (PTB F1, validation)",
               (_validation("TG", "f1"), _validation("TG (reversed trees)", "f1")),
               "for TG, bracketing F1 is much worse on reversed trees than on the original ones"),
    PaperClaim("tg-left-branching", "tg-reversed", ("ppl",), True, TRANSFORMED,
               (_validation("TG (left-branching)", "ptb_ppl"), _validation("TG (reversed trees)", "ptb_ppl")),
               "perplexity is most impacted on reversed trees, more than on left-branching trees"),
    PaperClaim("tg-right-branching", "tg-left-branching", ("ppl",), True, TRANSFORMED,
               (_validation("TG (right-branching)", "ptb_ppl"), _validation("TG (left-branching)", "ptb_ppl")),
               "right-branching trees have the least impact on perplexity"),
)

PAPER = Paper(
    key="tg",
    citation=CITATION,
    column=SCALE,
    not_comparable=(
        "These results are at a reduced scale and are NOT comparable to the paper's (16-layer models with 12M "
        "parameters on PTB and 252M on BLLIP-LG, 100 seeds per model). The paper's numbers are shown for "
        "orientation only, marked as a different scale."),
    provenance=(
        f"Paper numbers: {CITATION}, Table 1 (test sets) and Table 2 (validation sets): mean ± sample sd over 100 "
        "random initialisations; 16-layer models, 12M parameters on PTB (~1M words), 252M on BLLIP-LG (~40M "
        "words); SG on models trained on BLLIP-LG sentences, F1 by reranking 300 RNNG samples on PTB; TG and TXL "
        "(trees) perplexities are upper bounds (300 proposal trees). Different data, scale and seeds from ours."),
    families=("tg", "txl-trees", "txl-terminals"),
    model_order=tuple(ROWS),
    numbers_for=numbers_for,
    regressions=REGRESSIONS,
    claims=CLAIMS,
    reproductions={"demo": "reproduce-tg-demo", "cpu-small": "reproduce-tg-cpu-small", "paper": "reproduce-tg-paper"},
)
