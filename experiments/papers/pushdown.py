"""Pushdown Layers (Murty et al. 2023, EMNLP): Tables 2 and 4, with provenance.

Table 2 (§4.2): BLiMP, SyntaxGym test suites and BLLIP-LG test perplexity of 16-layer models trained on
BLLIP-LG sentences with TG's hyper-parameters, means over 3 seeds (no sd published); its TG row quotes
Sartran et al. (2022). Table 4 (§5): unlabeled F1 of the Pushdown-LM's beam parses against binarized PTB test
trees. Pushdown-LM's perplexity is a bound from a beam of 300 over attachment decisions; Base-LM's is exact.
"""

from __future__ import annotations

from experiments.papers import Paper
from experiments.papers.tables import Column, PaperClaim, PaperNumber

CITATION = "Murty et al. (2023), Pushdown Layers, EMNLP"
SEEDS = 3  # §4.2: "averaged across 3 seeds"; Table 2 gives means only
PARAMETERS = "252M"  # TG's BLLIP-LG size (Pushdown-LM: the same hyper-parameters, §4.2)
COLUMNS = (
    Column("pd_blimp", "BLiMP", "blimp", "BLiMP (models trained on BLLIP-LG sentences)", "sentence", PARAMETERS,
           "percent"),
    Column("pd_sg", "SG test suites", "sg", "SyntaxGym, 31 suites (models trained on BLLIP-LG sentences)",
           "sentence", PARAMETERS, "percent"),
    Column("pd_ppl", "BLLIP-LG perplexity", "ppl", "BLLIP-LG (~40M words)", "sentence", PARAMETERS, "perplexity"),
    Column("pd_parse_f1", "PTB unlabeled F1", "parse_f1", "PTB test (2,335 sentences without unknown words)",
           "sentence", PARAMETERS, "percent"),
)
# Table 2 (BLiMP, SG, PPL) and Table 4 (PTB unlabeled F1); None where the paper has no number.
TABLE = {
    "Pushdown-LM": (75.6, 82.3, 19.9, 95.3),
    "Base-LM": (70.1, 69.5, 20.1, None),
    "TG": (None, 82.5, 30.3, None),
}
ROWS = {"pushdown": "Pushdown-LM", "base-lm": "Base-LM", "tg": "TG"}  # our label -> paper row
EXACT = ("Base-LM",)  # the string model: its perplexity is exact, the others' bounds


def table_numbers() -> list[PaperNumber]:
    """Every number of Table 2 and Table 4 (means over 3 seeds; no sd published)."""
    return [PaperNumber(row, column, "Table 4" if column.key == "pd_parse_f1" else "Table 2", "test", mean, None,
                        seeds=SEEDS, upper_bound=column.unit == "perplexity" and row not in EXACT)
            for row, cells in TABLE.items()
            for column, mean in zip(COLUMNS, cells, strict=True) if mean is not None]


def numbers_for(model: str, metric: str, data: str | None = None) -> list[PaperNumber]:
    """The published numbers beside our ``metric`` of ``model``: Table 2 (``blimp``, ``sg``, ``ppl``) and Table 4
    (``parse_f1``); ``data`` is not needed (one corpus per column)."""
    return [n for n in table_numbers() if n.column.metric == metric and ROWS.get(model) == n.row]


# The directions §4.1 states about Table 1 (Dyck closing-bracket accuracy of the 6-layer models; ours
# ``dyck.SET``, the sets of ``eval dyck``) and §4.2 about Table 2 (means over 3 seeds; SG over Hu et al.'s 31
# suites, our ``sg``)
SG_SUITES = ("hu2020-31", "hu2020-31")
# Table 1: our Dyck test set -> (Base-LM, Pushdown-LM) accuracy in percent
TABLE1_DYCK = {"long-50": (90.0, 96.5), "long-100": (81.0, 88.0), "long-200": (40.6, 61.2),
               "long-300": (14.1, 42.9), "depth": (40.6, 68.3)}
CLAIMS = (
    PaperClaim("pushdown", "base-lm", ("sg",), False, "§4.2, Table 2 (SG test suites)", (82.3, 69.5),
               "models with an explicit notion of structure have much better syntactic generalization",
               suites=SG_SUITES),
    PaperClaim("pushdown", "base-lm", ("blimp",), False, "§4.2, Table 2 (BLiMP)", (75.6, 70.1),
               "Pushdown-LM achieves better syntactic generalization on BLiMP"),
    PaperClaim("pushdown", "base-lm", ("ppl",), True, "§4.2, Table 2 (BLLIP-LG test)", (19.9, 20.1),
               "Pushdown-LM achieves slight gains in perplexity compared to Base-LM"),
    *(PaperClaim("pushdown", "base-lm", (f"dyck.{name}",), False, f"§4.1, Table 1 (Dyck, {name})",
                 (pushdown, base), "Pushdown-LM improves over the standard LM at generalizing to deeper structure "
                 "and to longer-range dependencies") for name, (base, pushdown) in TABLE1_DYCK.items()),
)

PAPER = Paper(
    key="pushdown",
    citation=CITATION,
    column="paper (BLLIP-LG full scale, 3 seeds)",
    not_comparable=(
        "These results are at a reduced scale and are NOT comparable to the paper's (16-layer models trained on "
        "BLLIP-LG sentences, beam 300 over attachment decisions, 3 seeds per model). The paper's numbers are "
        "shown for orientation only, marked as a different scale."),
    provenance=(
        f"Paper numbers: {CITATION}, Table 2 (BLiMP, SG test suites, BLLIP-LG test perplexity; means over 3 seeds, "
        "no sd published; its TG row quotes Sartran et al. 2022) and Table 4 (unlabeled F1 against binarized PTB "
        "test trees, 2,335 sentences without unknown words); 16-layer models on BLLIP-LG; Pushdown-LM's "
        "perplexity is a bound from a beam of 300. Different data, scale and seeds from ours."),
    families=("pushdown", "base-lm"),
    model_order=tuple(ROWS),
    numbers_for=numbers_for,
    claims=CLAIMS,
    reproductions={"demo": "reproduce-pushdown-demo", "cpu-small": "pushdown-ptb-cpu", "paper": "pushdown-table2"},
)
