"""synbench's own comparison of the families: every family trained on the same sentences and scored on the same items.

No paper trains these models on one corpus: each compares its model with baselines under its own data and
conventions (DTG's Table 2 copies TG's and Pushdown's numbers, SOM's Table 3 Kim et al.'s). ``synbench
reproduce compare`` trains TXL (terminals), TXL (trees), TG, Pushdown-LM, Base-LM, the three DTG systems,
TXL (trans), AWD-LSTM, PaLM-U/S/RB, eSOM, dSOM and a standard transformer trained from scratch (``hf-scratch``)
on the same training sentences (the PTB sample's trees and their dependency conversions; at paper scale the
licensed PTB), with the same seeds, and scores them on the same test words, SyntaxGym items and BLiMP pairs;
pretrained ``hf:`` models named in a spec are evaluated beside them. It has no published numbers of its own
(``numbers_for`` is empty): its report is the table of the comparison itself
(``analysis.comparison``).
"""

from __future__ import annotations

from experiments.papers import Paper
from experiments.papers.tables import PaperNumber

CITATION = "synbench's comparison of every family on common data (no published numbers)"
# the model families the comparison trains (not its tools, the proposal parsers, nor the pretrained `hf:`
# models a spec may evaluate beside: their experiments are no comparison of families)
FAMILIES = ("tg", "txl-trees", "txl-terminals", "pushdown", "base-lm", "dtg", "txl-trans", "awd-lstm", "palm-u",
            "palm-s", "palm-rb", "som", "hf-scratch")
# row order: each paper's own order where they overlap (Pushdown's tables quote TG's, TG's and DTG's
# order their baselines after the model), then the strings and the standard transformer
MODEL_ORDER = ("pushdown", "base-lm", "tg", "txl-trees", "txl-terminals", "txl-trans", "dtg", "dtg-eager",
               "dtg-swift", "awd-lstm", "palm-u", "palm-rb", "palm-s", "esom", "dsom", "hf-scratch")


def numbers_for(model: str, metric: str, data: str | None = None) -> list[PaperNumber]:
    """No published numbers: the comparison's numbers are all ours."""
    return []


PAPER = Paper(
    key="compare",
    citation=CITATION,
    column="published",
    not_comparable=(
        "Every model here is trained on the same sentences with the same seeds and scored on the same items, "
        "so the rows compare with each other; at a reduced scale they are NOT comparable with any paper's "
        "numbers (smaller models, fewer steps, subsets of the evaluation items)."),
    provenance="No published numbers: every number of this comparison is ours.",
    families=FAMILIES,
    model_order=MODEL_ORDER,
    numbers_for=numbers_for,
    reproductions={"demo": "reproduce-compare-demo", "cpu-small": "reproduce-compare-cpu-small",
                   "paper": "reproduce-compare-paper"},
)
