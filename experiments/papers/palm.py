"""PaLM (Peng, Schwartz & Smith 2019, "PaLM: A Hybrid Parser and Language Model", EMNLP): Tables 1, 3 and 4.

Table 1: PTB perplexity (dev and test) of AWD-LSTM, PaLM-U, PaLM-RB and PaLM-S, ~24M parameters each, one
run each (no seeds or sd published), stream-level as AWD-LSTM reports it: ours is ``ppl_stream`` (test) and
``val_ppl`` (dev), the training run's final metrics. Table 3: unlabeled unsupervised-parsing F1 on WSJ-40 test
(sentence-level, punctuation removed, trivial spans dropped): PaLM-U 42.0 and the right-branching baseline 40.7
(ours: ``eval unsupervised-f1``'s ``unsupervised_f1`` and ``unsupervised_f1_right_branching``). Table 4: the
percentage of left and right splits of the greedy trees on WSJ-40 test: 25 randomly initialised PaLM models
without training (mean ± sd), PaLM-U, and the gold trees (ours: ``splits.left``/``splits.right`` of each model,
``gold_splits.*`` of the binarized gold trees). WikiText-2 (Table 2) has its own spec
(``reproduce-palm-wikitext2``, ``TABLE2``) on a user-registered copy; it is not a scale of ``reproduce palm``.

Like with like: PaLM's AWD-LSTM row (60.0 / 57.3) is Merity et al.'s *finetuned* model; the same paper gives
60.7 / 58.8 without finetuning (Merity et al. 2018, Table 1, "– fine-tuning"). Our ``awd-lstm`` runs without
the finetuning stage (``model.finetune_at`` 0) and is shown beside the latter; a model labelled
``awd-lstm-finetuned`` (preset ``ptb-finetuned``: finetune.py's stage from epoch 500) beside the former.
"""

from __future__ import annotations

from experiments.papers import Paper
from experiments.papers.tables import Column, PaperClaim, PaperNumber

CITATION = "Peng, Schwartz and Smith (2019), PaLM: A Hybrid Parser and Language Model, EMNLP"
PTB = "PTB (Mikolov's preprocessing, ~1M words)"
WSJ40 = "WSJ-40 test (punctuation removed, <= 40 words)"
COLUMNS = {
    "test": Column("palm_ppl_test", "PTB perplexity (test)", "ppl_stream", PTB, "stream", "24M", "perplexity"),
    "dev": Column("palm_ppl_dev", "PTB perplexity (dev)", "val_ppl", PTB, "stream", "24M", "perplexity"),
    "f1": Column("palm_f1", "WSJ-40 unlabeled F1", "unsupervised_f1", WSJ40, "sentence", "24M", "percent"),
    "f1_rb": Column("palm_f1_rb", "WSJ-40 unlabeled F1 (right-branching)", "unsupervised_f1_right_branching",
                    WSJ40, "sentence", "-", "percent"),
    "left": Column("palm_left", "% left splits", "splits.left", WSJ40, "sentence", "24M", "percent"),
    "right": Column("palm_right", "% right splits", "splits.right", WSJ40, "sentence", "24M", "percent"),
    "gold_left": Column("palm_gold_left", "% left splits (gold)", "gold_splits.left", WSJ40, "sentence", "-",
                        "percent"),
    "gold_right": Column("palm_gold_right", "% right splits (gold)", "gold_splits.right", WSJ40, "sentence", "-",
                         "percent"),
}
# Table 1: (dev, test)
TABLE1 = {"AWD-LSTM": (60.0, 57.3), "PaLM-U": (58.6, 56.4), "PaLM-RB": (60.1, 57.5), "PaLM-S": (57.9, 55.5)}
# Merity, Keskar & Socher (2018), Table 1: AWD-LSTM on PTB without finetuning (dev, test), 24M parameters
MERITY_NO_FINETUNING = ("AWD-LSTM (no finetuning)", (60.7, 58.8))
MERITY_TABLE = "Merity et al. 2018 Table 1"
# Table 2 (WikiText-2, 36M parameters): (dev, test). Its AWD-LSTM row (68.6 / 65.8, 33M) is Merity et al.'s
# finetuned model, whose WikiText-2 number without finetuning is not shown here: our awd-lstm gets none.
TABLE2 = {"PaLM-U": (68.4, 65.4), "PaLM-S": (65.5, 63.2)}
TABLE3 = {"PaLM-U": 42.0, "Right Branching": 40.7}
# Table 4: (% left, % right) as (mean, sd or None), with the number of models
TABLE4 = {"Random": (((39.3, 10.5), (41.2, 8.8)), 25), "PaLM-U": (((1.1, None), (85.6, None)), 1),
          "Gold": (((6.5, None), (52.7, None)), 1)}
# our model label -> the paper's row; `palm-u-init` is PaLM-U with train.max_steps 0 (Table 4's random row)
ROWS = {"awd-lstm": MERITY_NO_FINETUNING[0], "awd-lstm-finetuned": "AWD-LSTM", "palm-u": "PaLM-U",
        "palm-rb": "PaLM-RB", "palm-s": "PaLM-S", "palm-u-init": "Random"}
WT2 = "WikiText-2 (Merity et al.'s copy, 2M words)"
WT2_COLUMNS = {"test": Column("palm_wt2_ppl_test", "WikiText-2 perplexity (test)", "ppl_stream", WT2, "stream", "36M",
                              "perplexity"),
               "dev": Column("palm_wt2_ppl_dev", "WikiText-2 perplexity (dev)", "val_ppl", WT2, "stream", "36M",
                             "perplexity")}
PARSERS = ("palm-u", "palm-s", "palm-rb", "palm-u-init")  # models whose right-branching/gold numbers we show


def table_numbers() -> list[PaperNumber]:
    """Every number of Tables 1, 3 and 4 (one run each except Table 4's 25 random models), and Merity et al.'s
    AWD-LSTM without finetuning (our ``awd-lstm``'s like)."""
    out = []
    table1 = [(row, numbers, "Table 1") for row, numbers in TABLE1.items()]
    for row, (dev, test), table in [*table1, (*MERITY_NO_FINETUNING, MERITY_TABLE)]:
        out += [PaperNumber(row, COLUMNS["dev"], table, "validation", dev, None, seeds=1),
                PaperNumber(row, COLUMNS["test"], table, "test", test, None, seeds=1)]
    out += [PaperNumber("PaLM-U", COLUMNS["f1"], "Table 3", "test", TABLE3["PaLM-U"], None, seeds=1),
            PaperNumber("Right Branching", COLUMNS["f1_rb"], "Table 3", "test", TABLE3["Right Branching"], None,
                        seeds=1)]
    for row, ((left, right), seeds) in TABLE4.items():
        prefix = "gold_" if row == "Gold" else ""
        out += [PaperNumber(row, COLUMNS[prefix + "left"], "Table 4", "test", *left, seeds=seeds),
                PaperNumber(row, COLUMNS[prefix + "right"], "Table 4", "test", *right, seeds=seeds)]
    return out


# metrics of every parsing model that the paper gives once: the right-branching baseline, the gold splits (shown
# beside the gold trees' and the models' own splits)
SHARED = {"unsupervised_f1_right_branching": "unsupervised_f1_right_branching", "gold_splits.left":
          "gold_splits.left", "gold_splits.right": "gold_splits.right", "splits.left": "gold_splits.left",
          "splits.right": "gold_splits.right"}


def table2_numbers() -> list[PaperNumber]:
    """Table 2's PaLM rows (WikiText-2 perplexity, dev and test, one run each)."""
    return [PaperNumber(row, WT2_COLUMNS[split], "Table 2", name, value, None, seeds=1)
            for row, values in TABLE2.items() for split, name, value in zip(("dev", "test"), ("validation", "test"),
                                                                             values)]


def numbers_for(model: str, metric: str, data: str | None = None) -> list[PaperNumber]:
    """The published numbers beside our ``metric`` of ``model``: its own row of Tables 1, 3 and 4, and for
    every parsing model the right-branching baseline (Table 3) and the gold trees' splits (Table 4); on
    WikiText-2 (``data`` names it) Table 2's row instead."""
    row = ROWS.get(model)
    if row is None:
        return []
    if "wikitext" in (data or "").lower():
        return [n for n in table2_numbers() if n.column.metric == metric and n.row == row]
    own = [n for n in table_numbers() if n.column.metric == metric and n.row == row]
    shared = SHARED.get(metric) if model in PARSERS else None
    return own + [n for n in table_numbers() if shared is not None and n.column.metric == shared]


# The directions §3 states, with Tables 1, 3 and 4 behind them: PTB test perplexity (stream-level in the paper;
# checked on ``eval ppl``'s, which every reproduction of PaLM and the comparison of every family score) against
# Table 1's AWD-LSTM, Merity et al.'s finetuned model (our ``awd-lstm-finetuned``); WSJ-40 F1 against the
# right-branching trees of the same sentences and the splits against the gold trees' (metrics of each PaLM run)
LM, PARSING, SPLITS = "§3, Table 1 (PTB test)", "§3, Table 3 (WSJ-40 test)", "§3, Table 4 (WSJ-40 test)"
CLAIMS = (
    PaperClaim("palm-u", "awd-lstm-finetuned", ("ppl",), True, LM, (TABLE1["PaLM-U"][1], TABLE1["AWD-LSTM"][1]),
               "the unsupervised configuration (PaLM-U) outperforms AWD-LSTM"),
    PaperClaim("palm-s", "palm-u", ("ppl",), True, LM, (TABLE1["PaLM-S"][1], TABLE1["PaLM-U"][1]),
               "PaLM-S further reduces the perplexity: supervised span attention helps language modeling"),
    PaperClaim("awd-lstm-finetuned", "palm-rb", ("ppl",), True, LM, (TABLE1["AWD-LSTM"][1], TABLE1["PaLM-RB"][1]),
               "naively promoting right-branching attention (PaLM-RB) yields no improvement over AWD-LSTM",
               strict=False),
    PaperClaim("palm-u", "palm-u", ("unsupervised_f1",), False, PARSING,
               (TABLE3["PaLM-U"], TABLE3["Right Branching"]), "PaLM outperforms the right-branching baseline",
               against="unsupervised_f1_right_branching"),
    PaperClaim("palm-u", "palm-u", ("splits.right",), False, SPLITS,
               (TABLE4["PaLM-U"][0][1][0], TABLE4["Gold"][0][1][0]),
               "PaLM-U shows a clear right-skewness: much more right-branching splits than the gold annotation",
               against="gold_splits.right"),
    PaperClaim("palm-u", "palm-u", ("splits.left",), True, SPLITS,
               (TABLE4["PaLM-U"][0][0][0], TABLE4["Gold"][0][0][0]),
               "PaLM-U shows a clear right-skewness: fewer left-branching splits than the gold annotation",
               against="gold_splits.left"),
    PaperClaim("palm-u", "palm-u-init", ("splits.right",), False, SPLITS,
               (TABLE4["PaLM-U"][0][1][0], TABLE4["Random"][0][1][0]),
               "untrained models favour no branching direction; after language-model training PaLM-U is right-skewed"),
)

PAPER = Paper(
    key="palm",
    citation=CITATION,
    column="paper (PTB full scale, 1 run; Table 4 random: 25 models)",
    not_comparable=(
        "These results are at a reduced scale and are NOT comparable to the paper's (3-layer LSTMs of 1020-1150 "
        "units, ~24M parameters, trained for hundreds of epochs on the full Mikolov PTB; parsing on WSJ-40 test, "
        "2,416 sentences). The paper's numbers are shown for orientation only, marked as a different scale."),
    provenance=(
        f"Paper numbers: {CITATION}, Table 1 (PTB perplexity, dev and test, stream-level; one run each, no sd; "
        "its AWD-LSTM row is Merity et al.'s finetuned model: our awd-lstm, trained without finetuning, is "
        "shown beside Merity et al. 2018 Table 1's AWD-LSTM without finetuning, 60.7 / 58.8), "
        "Table 3 (unlabeled F1 on WSJ-40 test: PaLM-U and the right-branching baseline) and Table 4 (% left / "
        "right splits of the greedy trees on WSJ-40 test, trivial splits excluded: 25 untrained PaLM models, "
        "mean ± sd; PaLM-U; the gold trees). Ours: ppl_stream / val_ppl are stream-level as the paper's; eval "
        "ppl's sentence-level ppl is the shared protocol's and has no paper number. Different data, scale and "
        "seeds from ours."),
    families=("awd-lstm", "palm-u", "palm-s", "palm-rb"),
    model_order=tuple(ROWS),
    numbers_for=numbers_for,
    claims=CLAIMS,
    reproductions={"demo": "reproduce-palm-demo", "cpu-small": "reproduce-palm-cpu-small",
                   "paper": "reproduce-palm-paper"},
)
