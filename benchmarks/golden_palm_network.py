"""Golden forward values of the official PaLM and AWD-LSTM networks (run by hand, outside CI).

    python -m benchmarks.golden_palm_network --official PALM_DIR --awd-lstm AWD_DIR --out tests/golden/palm

``PALM_DIR`` is a checkout of Noahs-ARK/PaLM and ``AWD_DIR`` one of salesforce/awd-lstm-lm (the commits used
are in ``tests/golden/palm/README.md``). For each of three SMALL models (``palm-u``, ``palm-s``, ``awd-lstm``)
the official ``RNNModel`` is built with a fixed seed, its weights perturbed (the official initialisation
zeroes every bias, which would hide a wrong bias mapping), and written in the official forms:

- ``FAMILY/model.pt``: what the official ``main.py`` saves (``torch.save([model, criterion, optimizer])``, whole
  pickled modules; only loadable by running the official code, so synbench never reads it);
- ``FAMILY/state_dict.pt``: ``model.state_dict()`` of the same model, what ``synbench import`` reads
  (``torch.load(weights_only=True)``);
- ``FAMILY/args.json``: the official command-line values (sizes, dropouts, ``max_span_length``), which the
  converter reads for what the weights do not carry;
- ``vocab.txt`` (the official ``Dictionary.idx2word``, one token a line) and ``corpus/train.txt`` (the 20
  sentences in the official corpus format: Mikolov text, one sentence a line, words seen once -> ``<unk>``);
- ``FAMILY/golden.json``: in eval mode (dropout off), fp32, the official per-token log-probabilities and
  losses (through the official ``SplitCrossEntropyLoss``) of each sentence read as ``<eos> w_1 … w_n`` from the
  official zero state (batch 1) predicting ``w_1 … w_n <eos>``, and of the 20 sentences as one stream read in
  windows of ``STREAM_BPTT`` with the LSTM and span states carried (the official ``evaluate``); PaLM models
  also give the official span attention (``SpanScorer``'s distribution over the max_span_length − 1 spans
  ending at the previous token, longest first) at every position of each sentence.

``palm-s/golden.json`` also holds, for each sentence, the official gold span target rows (PaLM's
``data.Corpus``: the tree made Chomsky normal form by NLTK, brackets of its word-only nested lists). The
released code has no span loss (``main.py`` never reads them), so there is no official span-loss value.

Runtime shims (the official files are never edited): the official ``data.py`` of PaLM reads NLTK's PTB at
import; for the target rows ``nltk.corpus.ptb`` is replaced by a reader of the 20 trees (``TreebankShim``),
and ``nltk.treetransforms`` is imported first (NLTK 3.x no longer imports it with ``nltk``).
The dictionary is built by AWD-LSTM's ``data.Corpus`` (the same reading as PaLM's: ``line.split() +
['<eos>']``, in order of first appearance). Nothing else needed patching under torch 2.x.
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import torch

SENTENCES = 20
STREAM_BPTT = 7
OFFICIAL_MODULES = ("model", "span_parser", "rrnn", "utils", "weight_drop", "locked_dropout", "embed_regularize",
                    "splitcross", "data")
# small official configurations: (seed, argparser values)
PALM_MODELS = {
    "palm-u": (31415, {"emsize": 12, "nhid": 20, "nlayers": 3, "rrnn_size": 16, "cxtsize": 16, "parser_size": 10,
                       "max_span_length": 6}),
    "palm-s": (2718, {"emsize": 10, "nhid": 16, "nlayers": 2, "rrnn_size": 12, "cxtsize": 12, "parser_size": 8,
                      "max_span_length": 5}),
}
AWD_MODEL = (1111, {"emsize": 12, "nhid": 20, "nlayers": 3})
DROPOUTS = {"dropout": 0.4, "dropouth": 0.2, "dropouti": 0.4, "dropoute": 0.1, "wdrop": 0.45}


def official_modules(directory: Path) -> dict[str, ModuleType]:
    """Import the official modules of one checkout (dropping those of the other, which share names)."""
    for name in OFFICIAL_MODULES:
        sys.modules.pop(name, None)
    sys.path.insert(0, str(directory))
    try:
        return {name: importlib.import_module(name) for name in ("model", "splitcross")}
    finally:
        sys.path.remove(str(directory))


def commit(directory: Path) -> str:
    """The checkout's commit (``unknown`` outside git)."""
    out = subprocess.run(["git", "-C", str(directory), "rev-parse", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


def corpus_lines(data_dir: str | None) -> tuple[list[str], list[str]]:
    """The first 20 PTB-sample sentences of at most 25 words as Mikolov text (words seen once are ``<unk>``: a
    capped vocabulary), and their raw trees (one-line brackets)."""
    from benchmarks.parity_common import ptb_sample_trees
    from lightning_modules.data.tree import to_bracketed
    from lightning_modules.families.palm.data import stream_sentence

    sentences, trees = [], []
    for _, tree in ptb_sample_trees(data_dir):
        s = stream_sentence(tree)
        if s is not None and len(s.words) <= 25:
            sentences.append(s.words)
            trees.append(to_bracketed(tree))
        if len(sentences) == SENTENCES:
            break
    counts = Counter(w for words in sentences for w in words)
    return [" ".join(w if counts[w] > 1 else "<unk>" for w in words) for words in sentences], trees


class TreebankShim:
    """Stands in for NLTK's PTB reader (``nltk.corpus.ptb``), which the official PaLM ``data.py`` reads at
    import: one file holding the given trees."""

    def __init__(self, trees: list[str]):
        self.trees = trees

    def fileids(self) -> list[str]:
        return ["WSJ/00/WSJ_0001.MRG"]

    def parsed_sents(self, file_id: str) -> list[Any]:
        import nltk

        return [nltk.Tree.fromstring(t) for t in self.trees]


def official_span_targets(official: Path, lines: list[str], trees: list[str], msl: int,
                          scratch: Path) -> list[list[list[float]]]:
    """The official PaLM-S target rows (``data.Corpus``'s ``train_trees``) of each sentence: one row per token of
    ``w_1 … w_n <eos>`` as input, over the ``msl − 1`` spans ending at the token before, value
    ``msl − 1 − column`` where a gold span is. The official ``train_ptb`` pairs line n with tree n − 1 (line 0,
    blank here, gets zeros)."""
    import nltk
    import nltk.treetransforms  # noqa: F401 - NLTK 3.x no longer imports it with the package (data.py uses it)

    nltk.corpus.ptb = TreebankShim(trees)  # the runtime shim: no NLTK PTB install
    scratch.mkdir(parents=True, exist_ok=True)
    (scratch / "train_ptb").write_text("\n" + "".join(line + "\n" for line in lines))
    for split in ("valid.txt", "test.txt"):
        (scratch / split).write_text("")
    sys.modules.pop("data", None)  # AWD-LSTM's; the other PaLM modules stay (the models pickle by them)
    sys.path.insert(0, str(official))
    try:
        corpus = importlib.import_module("data").Corpus(str(scratch), max_span_length=msl)
    finally:
        sys.path.remove(str(official))
    rows = corpus.train_trees[1:]  # without the blank line's row
    out, start = [], 0
    for line in lines:
        n = len(line.split()) + 1
        out.append([[float(x) for x in row] for row in rows[start : start + n]])
        start += n
    return out


def perturb(model: torch.nn.Module, seed: int) -> None:
    """Add N(0, 0.2²) to every parameter (biases included) so no mapping hides behind a zero, and sharpen the
    span scores (× 10 on the scorer's output vector) so the attention is far from uniform."""
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.add_(0.2 * torch.randn(p.shape, generator=g))
            if name == "_att_._w2_":
                p.mul_(10.0)


def token_losses(criterion: Any, model: Any, output: torch.Tensor, targets: torch.Tensor) -> list[float]:
    """The official criterion's loss of each token alone (its ``logprob`` breaks without splits)."""
    return [float(criterion(model.decoder.weight, model.decoder.bias, output[t : t + 1], targets[t : t + 1]))
            for t in range(len(targets))]


def run_model(model: Any, criterion: Any, ids: list[int], palm: bool,
              state: tuple[Any, Any] | None = None) -> tuple[list[float], float, Any, tuple[Any, Any]]:
    """One official forward of inputs ``ids[:-1]`` predicting ``ids[1:]`` (batch 1, eval, no grad)."""
    data = torch.tensor(ids[:-1], dtype=torch.long)[:, None]
    targets = torch.tensor(ids[1:], dtype=torch.long)
    if palm:
        hidden, c_hidden = state if state is not None else (model.init_hidden(1), model.init_c_hidden(1))
        output, span_dist, hidden, c_hidden = model(data, hidden, c_hidden)
    else:
        hidden = state[0] if state is not None else model.init_hidden(1)
        (output, hidden), span_dist, c_hidden = model(data, hidden), None, None
    losses = token_losses(criterion, model, output, targets)
    loss = float(criterion(model.decoder.weight, model.decoder.bias, output, targets))
    return [-x for x in losses], loss, span_dist, (hidden, c_hidden)


def golden(model: Any, criterion: Any, lines: list[str], index: dict[str, int], palm: bool) -> dict[str, Any]:
    """Per-sentence and stream values of one official model."""
    eos = index["<eos>"]
    sentences = []
    for line in lines:
        ids = [eos] + [index[w] for w in line.split()] + [eos]
        logprobs, loss, span_dist, _ = run_model(model, criterion, ids, palm)
        item: dict[str, Any] = {"text": line, "ids": ids, "logprobs": logprobs, "loss": loss}
        if palm:  # [L, 1, msl − 1] -> per input position, longest span first
            item["span_attention"] = [[round(float(x), 8) for x in row] for row in span_dist[:, 0]]
        sentences.append(item)
    stream = [index[w] for line in lines for w in line.split() + ["<eos>"]]
    logprobs, state = [], None
    for start in range(0, len(stream) - 1, STREAM_BPTT):
        window = stream[start : start + STREAM_BPTT + 1]
        values, _, _, state = run_model(model, criterion, window, palm, state)
        logprobs.extend(values)
    return {"sentences": sentences,
            "stream": {"ids": stream, "bptt": STREAM_BPTT, "logprobs": logprobs,
                       "loss": -sum(logprobs) / len(logprobs)}}


def write(out: Path, name: str, model: Any, criterion: Any, info: dict[str, Any], values: dict[str, Any]) -> None:
    """The official checkpoint forms, the command-line values the weights do not carry (``args.json``, read by
    the converter) and the golden values of one model."""
    folder = out / name
    folder.mkdir(parents=True, exist_ok=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=30.0)
    with open(folder / "model.pt", "wb") as f:  # the official model_save
        torch.save([model, criterion, optimizer], f)
    torch.save(model.state_dict(), folder / "state_dict.pt")
    (folder / "args.json").write_text(json.dumps(info["official"]["args"], indent=1) + "\n")
    (folder / "golden.json").write_text(json.dumps({**info, **values}, separators=(",", ":")) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--official", required=True, type=Path, metavar="DIR", help="a checkout of Noahs-ARK/PaLM")
    p.add_argument("--awd-lstm", required=True, type=Path, metavar="DIR", help="a checkout of salesforce/awd-lstm-lm")
    p.add_argument("--out", required=True, type=Path, metavar="DIR")
    p.add_argument("--data-dir", metavar="DIR", help="where ptb-sample is (see benchmarks.parity_common)")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    out: Path = args.out
    corpus = out / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    lines, trees = corpus_lines(args.data_dir)
    (corpus / "train.txt").write_text("".join(line + "\n" for line in lines))
    for split in ("valid.txt", "test.txt"):
        (corpus / split).write_text("")

    sys.path.insert(0, str(args.awd_lstm))  # the official dictionary (see the module doc)
    sys.modules.pop("data", None)
    dictionary = importlib.import_module("data").Corpus(str(corpus)).dictionary
    sys.path.remove(str(args.awd_lstm))
    (out / "vocab.txt").write_text("".join(w + "\n" for w in dictionary.idx2word))
    index = dict(dictionary.word2idx)

    palm = official_modules(args.official)
    for name, (seed, sizes) in PALM_MODELS.items():
        torch.manual_seed(seed)
        namespace = SimpleNamespace(**sizes, **DROPOUTS, tie_weights=True)
        model = palm["model"].RNNModel(len(index), namespace)
        perturb(model, seed)
        model.eval()
        criterion = palm["splitcross"].SplitCrossEntropyLoss(sizes["emsize"], splits=[], verbose=False)
        info = {"official": {"repository": "Noahs-ARK/PaLM", "commit": commit(args.official),
                             "args": {**sizes, **DROPOUTS, "tie_weights": True}, "seed": seed,
                             "ntokens": len(index)}}
        with torch.no_grad():
            values = golden(model, criterion, lines, index, palm=True)
        if name == "palm-s":  # the gold span targets PaLM-S is trained on (the official code has no span loss)
            targets = official_span_targets(args.official, lines, trees, sizes["max_span_length"], out / ".scratch")
            for item, rows, tree in zip(values["sentences"], targets, trees):
                item["span_targets"], item["tree"] = rows, tree
        write(out, name, model, criterion, info, values)

    awd = official_modules(args.awd_lstm)
    seed, sizes = AWD_MODEL
    torch.manual_seed(seed)
    model = awd["model"].RNNModel("LSTM", len(index), sizes["emsize"], sizes["nhid"], sizes["nlayers"],
                                  DROPOUTS["dropout"], DROPOUTS["dropouth"], DROPOUTS["dropouti"],
                                  DROPOUTS["dropoute"], DROPOUTS["wdrop"], tie_weights=True)
    perturb(model, seed)
    model.eval()
    criterion = awd["splitcross"].SplitCrossEntropyLoss(sizes["emsize"], splits=[], verbose=False)
    info = {"official": {"repository": "salesforce/awd-lstm-lm", "commit": commit(args.awd_lstm),
                         "args": {"model": "LSTM", **sizes, **DROPOUTS, "tie_weights": True}, "seed": seed,
                         "ntokens": len(index)}}
    with torch.no_grad():
        write(out, "awd-lstm", model, criterion, info, golden(model, criterion, lines, index, palm=False))
    shutil.rmtree(out / ".scratch", ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
