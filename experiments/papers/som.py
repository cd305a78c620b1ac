"""Syntactic Ordered Memory (Shen et al. 2021, NAACL): Tables 2, 3, 5 and 8, with provenance.

Every number is one model of the paper (no seeds or sd published), trained on PTB (WSJ 2-21; validation 24,
test 23) with Table 6's sizes. Table 2: the PTB test perplexity, the p and p' accuracies (of the one-step and
zero-step look-ahead parsers against Algorithm 1's labels, as fractions) and UF1 against Γ (the binary tree
converted from the UD tree of each sentence) of eSOM, dSOM and the ablations; Table 3 repeats eSOM's and dSOM's
perplexities. Table 5: models trained on PTB, tested on six English UD treebanks (perplexity and UF1 against
their Γ; "LB" is dSOM with left-branching tree labels). Table 8 (Appendix B.1): UF1 of models trained on the
original PTB constituency trees against those n-ary trees, beside the F1 of the oracle binary trees (the
ceiling of a binary parser). SOM's perplexity is exact with greedy structure (no bound). The paper does not say
whether its perplexities count the end of sentence as a token; Table 3 sets them beside Kim et al. (2019)'s,
which count it in the sum and in the count: our ``ppl_end_counted``. Our headline ``ppl`` (TG §3.1) sums it but
counts words only; the paper's numbers are mapped to both.

Our metrics: ``ppl`` (test perplexity of the run's own corpus), ``parse_f1`` (``eval parse``: UF1 against Γ, or
against the n-ary trees for a model trained on a constituency treebank), ``decision_accuracy.p`` /
``decision_accuracy.p_prime``, ``parse_f1_oracle`` (the ceiling), and the labelled evaluations
``ppl@<set>`` / ``parse_f1@<set>`` of Table 5 (labels ``gum ewt partut lines pronouns pud``), Table 5's SG
accuracy ``sg`` (the models trained on PTB; the paper's suites, Hu et al. (2020)'s, ours: ``experiments.evaluate.sg``'s
set), ``parse_f1@ptb-trees`` (a model trained on Γ parsed against the original trees, our stand-in for Table 8
where the constituency-trained models are not trained), and Table 2's "– Predicted tree + Gold tree" row as dSOM
evaluated with the gold decisions (label ``gold-tree``: ``ppl@gold-tree`` from ``eval ppl --method gold``, and
``decision_accuracy.p@gold-tree`` / ``decision_accuracy.p_prime@gold-tree`` from ``eval parse --method gold``: its
parsers' predictions under the gold history).
"""

from __future__ import annotations

from experiments.papers import Paper
from experiments.papers.tables import Column, PaperClaim, PaperNumber

CITATION = "Shen et al. (2021), Explicitly Modeling Syntax in Language Models with Incremental Parsing and a " \
           "Dynamic Oracle (Syntactic Ordered Memory), NAACL"
SEEDS = 1  # one model per row; the paper gives no seeds or sd
PTB = "PTB (WSJ 2-21 train, 23 test; Γ from UD trees)"

# Table 2 (and Table 3's perplexities): rows, parameters, (ppl, p acc, UF1 vs Γ, p' acc); None where "–".
TABLE2 = {
    "eSOM": ("17.7M", (77.68, 0.927, 87.96, 0.870)),
    "dSOM": ("16.3M", (78.93, 0.922, 86.81, 0.864)),
    "eSOM – Language model loss": ("17.7M", (None, 0.925, 86.26, 0.863)),
    "dSOM – Adaptive structure loss + Structural teacher forcing loss": ("16.3M", (129.27, 0.913, 86.58, 0.849)),
    "dSOM – Prediction network": ("13.0M", (83.63, 0.923, 87.09, None)),
    "dSOM – Gold tree labels + Left-branching tree labels": ("16.3M", (82.01, None, None, None)),
    "dSOM – Predicted tree + Gold tree": ("16.3M", (60.87, 0.947, None, 0.884)),
}
TABLE2_METRICS = (("ppl", "PTB test perplexity", "perplexity"), ("decision_accuracy.p", "p acc", "fraction"),
                  ("parse_f1", "UF1 vs Γ", "percent"), ("decision_accuracy.p_prime", "p' acc", "fraction"))
TABLE3 = {"eSOM": 77.68, "dSOM": 78.93}  # "Perplexities on Penn Treebank datasets" (with annotations)
# the end of sentence in the sum and the count (Kim et al. 2019, Table 3's baselines), or in the sum only
PPL_METRICS = ("ppl", "ppl_end_counted")
# Table 2's "– Predicted tree + Gold tree": dSOM with the gold decisions, an evaluation label of our dsom
GOLD_TREE_ROW, GOLD_TREE_LABEL = "dSOM – Predicted tree + Gold tree", "gold-tree"

# Table 5: our evaluation label -> (the UD treebank, its test set); per row (ppl, UF1) per set; LB: ppl only.
OOD_SETS = {"gum": "GUM", "ewt": "EWT", "partut": "ParTUT", "lines": "LinES", "pronouns": "Pronouns", "pud": "PUD"}
TABLE5 = {
    "eSOM": ((351.5, 67.0), (400.7, 73.1), (282.6, 76.5), (253.3, 67.2), (552.1, 87.1), (281.0, 75.6)),
    "dSOM": ((350.3, 66.4), (403.0, 72.3), (269.8, 74.3), (252.1, 66.6), (565.8, 87.3), (280.3, 75.1)),
    "LB": ((375.5, None), (436.5, None), (300.9, None), (267.5, None), (620.4, None), (300.7, None)),
}
TABLE5_SG = {"eSOM": 61.4, "dSOM": 58.1, "LB": 51.3}  # "SG acc" (0.614, ...), in percent as our report shows sg

# Table 8 (Appendix B.1): UF1 against the original (n-ary) PTB test trees; the oracle binary trees' F1.
TABLE8 = {"dSOM": 66.83, "eSOM": 67.27}
ORACLE_BINARY = 82.5

# our model label -> the paper's row (Tables 2, 3, 5); the Table 8 models are trained on constituency trees
ROWS = {
    "esom": "eSOM",
    "dsom": "dSOM",
    "esom-no-lm-loss": "eSOM – Language model loss",
    "dsom-teacher-forcing": "dSOM – Adaptive structure loss + Structural teacher forcing loss",
    "dsom-no-prediction-network": "dSOM – Prediction network",
    "dsom-left-branching": "dSOM – Gold tree labels + Left-branching tree labels",
}  # "– Predicted tree + Gold tree" is dsom's evaluation with the gold decisions (GOLD_TREE_LABEL)
TABLE5_ROWS = {"esom": "eSOM", "dsom": "dSOM", "dsom-left-branching": "LB"}
TABLE8_ROWS = {"esom-ptb-trees": "eSOM", "dsom-ptb-trees": "dSOM"}
# a model trained on Γ, parsed against the original trees (our stand-in for Table 8 at reduced scales)
TABLE8_STANDIN = {"esom": "eSOM", "dsom": "dSOM"}
TREES_LABEL = "ptb-trees"


def _number(row: str, table: str, key: str, title: str, metric: str, dataset: str, params: str, unit: str,
            mean: float) -> PaperNumber:
    return PaperNumber(row, Column(key, title, metric, dataset, "sentence", params, unit), table, "test", mean,
                       None, seeds=SEEDS)


def table_numbers() -> list[PaperNumber]:
    """Every published number of Tables 2, 3, 5 and 8 this reproduction maps (one model each, no sd)."""
    out = []
    for row, (params, cells) in TABLE2.items():
        gold = row == GOLD_TREE_ROW
        for (metric, title, unit), mean in zip(TABLE2_METRICS, cells, strict=True):
            if mean is None:
                continue
            for name in PPL_METRICS if metric == "ppl" else (metric,):
                if gold:
                    name = f"{name}@{GOLD_TREE_LABEL}"
                out.append(_number(row, "Table 2", f"t2_{name}", f"{title}, gold decisions" if gold else title,
                                   name, PTB, params, unit, mean))
    for row, mean in TABLE3.items():
        for name in PPL_METRICS:
            out.append(_number(row, "Table 3", f"t3_{name}", "PTB perplexity", name, PTB, TABLE2[row][0],
                               "perplexity", mean))
    for row, cells in TABLE5.items():
        params = TABLE2["dSOM" if row == "LB" else row][0]
        for (label, name), (ppl, uf1) in zip(OOD_SETS.items(), cells, strict=True):
            dataset = f"UD English {name} test (trained on PTB)"
            for metric in PPL_METRICS:
                out.append(_number(row, "Table 5", f"t5_{metric}_{label}", f"{name} perplexity", f"{metric}@{label}",
                                   dataset, params, "perplexity", ppl))
            if uf1 is not None:
                out.append(_number(row, "Table 5", f"t5_uf1_{label}", f"{name} UF1", f"parse_f1@{label}", dataset,
                                   params, "percent", uf1))
        out.append(_number(row, "Table 5", "t5_sg", "SG acc", "sg", "SyntaxGym test suites (Hu et al. 2020), "
                           "models trained on PTB", params, "percent", TABLE5_SG[row]))
    trees = "PTB test, original n-ary trees"
    for row, mean in TABLE8.items():
        out.append(_number(row, "Table 8", "t8_uf1", "PTB UF1 (n-ary trees)", "parse_f1", trees, TABLE2[row][0],
                           "percent", mean))
        out.append(_number(row, "Table 8", "t8_oracle", "Oracle Binary Trees", "parse_f1_oracle", trees,
                           TABLE2[row][0], "percent", ORACLE_BINARY))
    return out


def numbers_for(model: str, metric: str, data: str | None = None) -> list[PaperNumber]:
    """The published numbers beside our ``metric`` of ``model``: Tables 2 and 3 for the models trained on Γ
    (``ppl``, ``decision_accuracy.*``, ``parse_f1``), Table 5 for ``ppl@<set>`` / ``parse_f1@<set>``, Table 8 for
    the models trained on constituency trees (``parse_f1``, ``parse_f1_oracle``) and for ``parse_f1@ptb-trees``
    / ``parse_f1_oracle@ptb-trees`` of the Γ-trained eSOM and dSOM (Table 8's models are trained on the trees
    themselves), Table 5 for ``sg`` too, and Table 2's gold-decision row for dSOM's ``*@gold-tree``. A
    perplexity is mapped to ``ppl`` and ``ppl_end_counted`` alike (module docstring). ``data`` is not needed
    (each model's corpus fixes its table)."""
    numbers = table_numbers()
    if model in TABLE8_ROWS:
        return [n for n in numbers if n.table == "Table 8" and n.row == TABLE8_ROWS[model]
                and n.column.metric == metric]
    base, _, label = metric.partition("@")
    if label == TREES_LABEL:
        return [n for n in numbers if n.table == "Table 8" and n.row == TABLE8_STANDIN.get(model)
                and n.column.metric == base]
    if label == GOLD_TREE_LABEL:
        return [n for n in numbers if n.row == GOLD_TREE_ROW and model == "dsom" and n.column.metric == metric]
    if label or metric == "sg":
        return [n for n in numbers if n.table == "Table 5" and n.row == TABLE5_ROWS.get(model)
                and n.column.metric == metric]
    return [n for n in numbers if n.table in ("Table 2", "Table 3") and n.row == ROWS.get(model)
            and n.column.metric == metric]


# The directions §4.1 states about Table 2 (PTB test perplexity of the ablations) and Table 5 (out-of-domain
# perplexity), Table 5's caption and §4.2 (the left-branching baseline: perplexity on the six UD sets, SG over the
# suites of Hu et al.'s analysis, our ``sg``) and §4.3 (Table 2's UF1 against Γ)
SG_SUITES = ("hu2020-31", "hu2020-31")


def _ood(row: str, label: str) -> float:
    """Table 5's perplexity of ``row`` on the UD set of evaluation label ``label``."""
    return TABLE5[row][list(OOD_SETS).index(label)][0]


def _uf1(row: str) -> float:
    """Table 2's UF1 against Γ of ``row``."""
    return TABLE2[row][1][2]


# dSOM's out-of-domain perplexity is below eSOM's on four of Table 5's six sets (EWT and Pronouns go the other way)
DSOM_BETTER_OOD = tuple(label for label in OOD_SETS if _ood("dSOM", label) < _ood("eSOM", label))
CLAIMS = (
    PaperClaim("esom", "dsom", ("ppl",), True, "§4.1, Table 2 (PTB test)", (77.68, 78.93),
               "among the proposed models, eSOM has the best performance on the in-domain PTB test set"),
    PaperClaim("dsom", "dsom-teacher-forcing", ("ppl",), True, "§4.1, Table 2 (PTB test)", (78.93, 129.27),
               "the biggest drop comes from replacing the adaptive structure loss with teacher forcing"),
    PaperClaim("dsom", "dsom-no-prediction-network", ("ppl",), True, "§4.1, Table 2 (PTB test)", (78.93, 83.63),
               "predicting the attaching nodes of the next phrase helps to predict the next token"),
    PaperClaim("dsom", "dsom-left-branching", ("ppl",), True, "§4.1, Table 2 (PTB test)", (78.93, 82.01),
               "left-branching tree labels hurt perplexity: syntactic structure helps language modeling"),
    *(PaperClaim("dsom", "esom", (f"ppl@{label}",), True, f"§4.1, Table 5 ({OOD_SETS[label]} test)",
                 (_ood("dSOM", label), _ood("eSOM", label)),
                 "dSOM slightly outperforms eSOM in perplexity on out-of-domain test sets: the autonomous syntax "
                 "component helps generalization (Table 5: on GUM, ParTUT, LinES and PUD; EWT and Pronouns go "
                 "the other way)") for label in DSOM_BETTER_OOD),
    *(PaperClaim(model, "dsom-left-branching", (f"ppl@{label}",), True,
                 f"§4.2, Table 5 and its caption ({OOD_SETS[label]} test)", (_ood(row, label), _ood("LB", label)),
                 "thanks to the structure information, our models generalize much better than the left-branching "
                 "baseline") for model, row in (("esom", "eSOM"), ("dsom", "dSOM")) for label in OOD_SETS),
    *(PaperClaim(model, "dsom-left-branching", ("sg",), False, "§4.2, Table 5 (SG)", (TABLE5_SG[row], TABLE5_SG["LB"]),
                 "gold tree labels generalize better than left-branching ones", suites=SG_SUITES)
      for model, row in (("dsom", "dSOM"), ("esom", "eSOM"))),
    PaperClaim("dsom", "dsom-teacher-forcing", ("parse_f1",), False, "§4.3, Table 2 (UF1 vs Γ)",
               (_uf1("dSOM"), _uf1("dSOM – Adaptive structure loss + Structural teacher forcing loss")),
               "the teacher forcing loss gives the worst parser: the adaptive structure loss helps learn a better one"),
    *(PaperClaim("esom", worse, ("parse_f1",), False, "§4.3, Table 2 (UF1 vs Γ)", (_uf1("eSOM"), _uf1(ROWS[worse])),
                 "eSOM provides the best parsing performance: it can allocate more capacity to the parsing component")
      for worse in ("dsom", "dsom-no-prediction-network")),
    PaperClaim("esom", "esom-no-lm-loss", ("parse_f1",), False, "§4.3, Table 2 (UF1 vs Γ)",
               (_uf1("eSOM"), _uf1("eSOM – Language model loss")),
               "without the language model loss UF1 drops 1.7 points: it helps learn better representations for "
               "syntax"),
)

PAPER = Paper(
    key="som",
    citation=CITATION,
    column="paper (PTB full scale, one model)",
    not_comparable=(
        "These results are at a reduced scale and are NOT comparable to the paper's (Table 6's models, D_sem 300 "
        "/ D_syn 100, 15 slots, trained on the full PTB WSJ 2-21 converted to UD; one model per row). The paper's "
        "numbers are shown for orientation only, marked as a different scale."),
    provenance=(
        f"Paper numbers: {CITATION}: Table 2 (PTB test perplexity, p / p' accuracy as fractions, UF1 against Γ; "
        "eSOM, dSOM and ablations), Table 3 (the same perplexities), Table 5 (trained on PTB, tested on the UD "
        "English GUM, EWT, ParTUT, LinES, Pronouns and PUD test sets: perplexity and UF1 against Γ; LB = "
        "left-branching tree labels; SG accuracy on Hu et al. (2020)'s suites, in percent here) and Table 8 "
        "(trained on the original PTB trees, UF1 against them; oracle binary trees 82.5). Table 2's \"– Predicted "
        "tree + Gold tree\" is our dsom evaluated with the gold decisions (@gold-tree). One model per row, no seeds "
        "or sd; SOM's perplexity is exact with greedy structure. The paper does not say whether its perplexities "
        "count the end of sentence; Table 3 compares them with Kim et al. (2019)'s, which count it in the sum and "
        "the number of tokens (our ppl_end_counted, under All metrics); our ppl counts it in the sum only. "
        "Different data, scale and seeds from ours."),
    families=("som",),
    model_order=(*ROWS, *TABLE8_ROWS),
    numbers_for=numbers_for,
    claims=CLAIMS,
    reproductions={"demo": "reproduce-som-demo", "cpu-small": "reproduce-som-cpu-small",
                   "paper": "reproduce-som-paper"},
)
