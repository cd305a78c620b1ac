"""Golden forward values of the official DTG and TXL (trans) networks, for ``tests/golden/dtg`` (run by hand).

From a user's checkout of zhaoyd1/Dep_Transformer_Grammars (written against commit 6e8b679, "Update
README.md", 6e8b67966490dfb28a4db1fbea135caea92478eb), this builds SMALL official models (2 layers, w_dim 32, 2
heads of 16, d_inner 64) with random weights from a fixed seed: ``model_dep_gen_first.TransformerGrammar``
(DTG, ``--attn_mask sub+action``, as ``scripts/train_bllip_dep_gen.sh``) and ``model_bllip_dep.TransformerGrammar``
(TXL (trans), ``--attn_mask txl_arc``, as ``scripts/train_bllip_txl_dep.sh``), both initialised by the official
``weights_init`` and embedding rule, then every parameter shifted by small seeded noise (so that zero biases and
unit layer-norm gains cannot hide a convention). Each is saved exactly as the official training scripts save
their best model (``{'args', 'model': the whole module, 'vocab', 'optimizer', 'scheduler', 'warm_up_scheduler'}``
through ``torch.save``), beside the SentencePiece model and ``.vocab`` file the official
``data_scripts/tokenizer_build.py`` settings give (pad 0, ``<s>`` 1, ``</s>`` 2, ``<unk>`` 3, user-defined
symbols ``left_arc,right_arc,pop_root``), trained here on the action lines of the sample (with the ``identity``
normaliser instead of ``nmt_nfkc``, whose table would make the model file 240 kB; no sample text changes).

Sentences: the first 20 projective test sentences of ``ptb-sample-dep`` (the PTB sample, Collins head rules)
of at most 25 words. Their action lines come from the official oracle ``data_scripts/conll_to_dep.py``; the
ids are the pieces of each line as the official data README prepares them (TG's ``sp_utils`` post-processing
changed for arcs: no lone ``▁`` before a transition), and the official ``add_to_all`` and ``forward_prepare``
(DTG) or the TXL model's
own ``forward`` build the batch (one sentence per batch, CPU: ``.cuda()`` is a no-op here), dropout 0, eval
mode, max/min relative length 62/-1. Per token: the input and target pieces, the official log-probability
(DTG: ``log p_action(class)`` plus, for a non-arc target, the word log-softmax; TXL: the word log-softmax) and
its parts; the loss of a token is minus its log-probability, and their sum is checked against the loss the
official forward returns (``official_loss``, also recorded).

Run: ``python -m benchmarks.golden_dtg_network --official DIR --out tests/golden/dtg [--data-dir DIR]``.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

COMMIT = "6e8b67966490dfb28a4db1fbea135caea92478eb"
SIZE = {"w_dim": 32, "n_head": 2, "d_head": 16, "d_inner": 64, "num_layers": 2}
SEED = 20261128
N_SENTENCES = 20
MAX_WORDS = 15
SP_VOCAB = 160
MAX_REL, MIN_REL = 62, -1
ARCS = ("left_arc", "right_arc", "pop_root")
CONFIGS = {"dtg": ("model_dep_gen_first", "train_dep_gen", "sub+action"),
           "txl-trans": ("model_bllip_dep", "train_dep", "txl_arc")}


def import_official(official: Path, build_dir: Path) -> dict[str, types.ModuleType]:
    """The official modules, importable from ``official`` with the masking library built into ``build_dir``."""
    from benchmarks.parity_tg_masking import build_library

    sys.path.insert(0, str(build_library(official, build_dir, Path("masking_bllip"), "Dep_Transformer_Grammars")))
    sys.path.insert(0, str(official))
    import cpp_masking  # noqa: F401  (the extension just built)
    import masking_bllip

    sys.modules["masking_bllip.cpp_masking"] = cpp_masking
    masking_bllip.cpp_masking = cpp_masking  # type: ignore[attr-defined]
    torch.Tensor.cuda = lambda self, *a, **k: self  # type: ignore[method-assign]  # CPU: .cuda() is a no-op
    torch.nn.Module.cuda = lambda self, *a, **k: self  # type: ignore[method-assign]
    import importlib

    names = ["model_dep_gen_first", "model_bllip_dep", "train_dep_gen", "train_dep", "masking_bllip.utils"]
    return {n: importlib.import_module(n) for n in names}


def sentences(data_dir: str | None) -> list[tuple[str, Any]]:
    """The first ``N_SENTENCES`` projective ``ptb-sample-dep`` test trees of at most ``MAX_WORDS`` words."""
    from lightning_modules.data.corpora import load_corpus

    trees = load_corpus("ptb-sample-dep", data_dir).sentences("test")
    kept = [(loc, t) for loc, t in trees if t.is_projective() and len(t) <= MAX_WORDS]
    return kept[:N_SENTENCES]


def tokenizer(lines: Sequence[str], out: Path) -> Any:
    """A SentencePiece model with the official ``tokenizer_build.py`` settings, trained on ``lines``; writes
    ``spm.model`` and ``spm.vocab`` (the official vocab file: ``piece<TAB>score`` lines) into ``out``."""
    import sentencepiece as spm

    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, vocab_size=SP_VOCAB,
                                   character_coverage=1.0, pad_id=0, bos_id=1, eos_id=2, unk_id=3,
                                   user_defined_symbols="left_arc,right_arc,pop_root", max_sentence_length=100000,
                                   shuffle_input_sentence=False, seed_sentencepiece_size=100000,
                                   hard_vocab_limit=False, num_threads=1, normalization_rule_name="identity")
    (out / "spm.model").write_bytes(model.getvalue())
    sp = spm.SentencePieceProcessor(model_proto=model.getvalue())
    (out / "spm.vocab").write_text("".join(f"{sp.id_to_piece(i)}\t{sp.get_score(i)}\n" for i in range(len(sp))),
                                   encoding="utf-8")
    return sp


def encode(sp: Any, line: str) -> list[int]:
    """The ids of an action line as the official data README prepares them: SentencePiece, then TG's
    ``sp_utils`` post-processing with the README's DTG change (a transition is one token; the lone ``▁`` piece
    SentencePiece emits before it is dropped). Each word encoded alone gives exactly that."""
    return [i for item in line.split(" ")
            for i in ([sp.piece_to_id(item)] if item in ARCS else sp.encode(item))]


def build_model(mods: dict[str, types.ModuleType], family: str, vocab_file: Path, seed: int) -> tuple[Any, ...]:
    """The official model (as its training script builds and initialises it, then seeded noise), its args and
    its vocabulary tuple (``load_vocab``)."""
    model_mod, train, mask = mods[CONFIGS[family][0]], mods[CONFIGS[family][1]], CONFIGS[family][2]
    args = train.parser.parse_args([
        "--vocab_file", str(vocab_file), "--sentence_level", "--attn_mask", mask, "--emb_lr_multiplier", "2.0",
        "--w_dim", str(SIZE["w_dim"]), "--n_head", str(SIZE["n_head"]), "--d_head", str(SIZE["d_head"]),
        "--d_inner", str(SIZE["d_inner"]), "--num_layers", str(SIZE["num_layers"]),
        "--max_relative_length", str(MAX_REL), "--min_relative_length", str(MIN_REL), "--seed", str(seed),
        "--weight_decay", "0", "--optimizer", "adamw", "--scheduler", "cosine", "--dropout", "0.0",
        "--dropoutatt", "0"])
    vocab = train.load_vocab(args.vocab_file)
    vocab_size, pad_id, bos_id, eos_id, left_arc, right_arc, pop_root, startofword_id, words = vocab
    np.random.seed(seed)
    torch.manual_seed(seed)
    model = model_mod.TransformerGrammar(vocab_size, args.w_dim, args.n_head, args.d_head, args.d_inner,
                                         args.num_layers, args.dropout, args.dropoutatt, pad_id, bos_id, eos_id,
                                         left_arc, right_arc, pop_root, startofword_id, args.pre_lnorm)
    train.args = args  # weights_init reads the script's global args
    model.apply(train.weights_init)
    fan_in = torch.nn.init._calculate_correct_fan(model.emb.weight, "fan_in")
    torch.nn.init.uniform_(model.emb.weight, -np.sqrt(3 / fan_in), np.sqrt(3 / fan_in))
    with torch.no_grad():  # seeded noise: zero biases and unit gains must not hide a convention
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model, args, vocab


def checkpoint(model: Any, args: Any, words: list[str], vocab_size: int) -> dict[str, Any]:
    """What the official training scripts ``torch.save`` as the best model (their optimizer and schedulers)."""
    nonemb = [p for p in model.parameters() if p.size() != (vocab_size, args.w_dim)]
    optimizer = torch.optim.AdamW([{"params": p, "lr": lr} for p, lr in
                                   zip([nonemb, list(model.emb.parameters())], [1, args.emb_lr_multiplier])],
                                  weight_decay=args.weight_decay)
    scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=1000, eta_min=args.eta_min)
    warm = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda=lambda step: args.start_lr, last_epoch=-1)
    return {"args": args, "model": model.cpu(), "vocab": words, "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(), "warm_up_scheduler": warm.state_dict()}


@torch.no_grad()
def dtg_values(mods: dict[str, types.ModuleType], model: Any, vocab: tuple, sent: list[int]) -> dict[str, Any]:
    """Per-token official values of one DTG sentence (``forward_prepare``, ``sub+action``)."""
    vocab_size, pad_id, bos_id, eos_id, left_arc, right_arc, pop_root, startofword_id, words = vocab
    train = mods["train_dep_gen"]
    data, startofword, lengths = train.add_to_all([[list(sent)]], vocab_size, pad_id, bos_id, eos_id, left_arc,
                                                  right_arc, startofword_id, pop_root)
    ranges = mods["masking_bllip.utils"].TokenTypeRanges(bos_id, pad_id, vocab_size, left_arc, right_arc)
    seen: dict[str, Any] = {}

    def recording(*a: Any) -> Any:
        seen["args"] = a
        return model(*a)

    official = mods["model_dep_gen_first"].forward_prepare(
        recording, pad_id, left_arc, right_arc, pop_root, ranges, data[0], startofword[0], lengths[0],
        "sub+action", False, True, MAX_REL, MIN_REL)
    loss, hidden = official
    original, indicator, inputs, targets, targets_action = seen["args"][:5]
    act = model.action_mlp(hidden).log_softmax(-1)[:, 0]
    word = model.projection(hidden).log_softmax(-1)[:, 0]
    out: dict[str, list] = {k: [] for k in ("inputs", "arc_inputs", "targets", "action_logprob", "word_logprob",
                                            "logprob")}
    for t in range(inputs.shape[1]):
        cls, target = int(targets_action[0, t]), int(targets[0, t])
        if cls == 0:  # nothing predicted (LA1/RA1, padding)
            continue
        a = float(act[t, cls])
        w = float(word[t, target]) if cls == 3 else None
        out["inputs"].append(words[int(inputs[0, t])])
        out["arc_inputs"].append(words[int(original[0, t])] if bool(indicator[0, t]) else None)
        out["targets"].append(words[{1: left_arc, 2: right_arc}.get(cls, target)])
        out["action_logprob"].append(a)
        out["word_logprob"].append(w)
        out["logprob"].append(a + (w or 0.0))
    return {**out, "official_loss": float(loss[0])}


@torch.no_grad()
def txl_values(model: Any, vocab: tuple, sent: list[int]) -> dict[str, Any]:
    """Per-token official values of one TXL (trans) sentence (the model's ``forward``, ``txl_arc``)."""
    vocab_size, pad_id, bos_id, eos_id, left_arc, right_arc, pop_root, startofword_id, words = vocab
    full = [bos_id, *sent, eos_id]
    startofword = [vocab_size if startofword_id[w] == 1 else w for w in full]
    loss, hidden = model([full], [startofword], len(full), "txl_arc", False, True, MAX_REL, MIN_REL)
    logp = model.projection(hidden).log_softmax(-1)[:, 0]
    n = len(full) - 1
    return {"inputs": [words[i] for i in full[:-1]], "targets": [words[i] for i in full[1:]],
            "logprob": [float(logp[t, full[t + 1]]) for t in range(n)], "official_loss": float(loss[0])}


def rounded(value: Any) -> Any:
    """``value`` with every float to 9 significant digits (far below the tests' 1e-5 tolerance)."""
    if isinstance(value, float):
        return float(f"{value:.9g}")
    if isinstance(value, list):
        return [rounded(v) for v in value]
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    return value


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--official", required=True, type=Path, metavar="DIR",
                   help="a checkout of zhaoyd1/Dep_Transformer_Grammars")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="where the golden files go")
    p.add_argument("--data-dir", metavar="DIR", help="where ptb-sample is (default: synbench's data folder)")
    p.add_argument("--build-dir", type=Path, default=Path(tempfile.gettempdir()) / "synbench-parity-dtg")
    args = p.parse_args(argv)
    from benchmarks.parity_dtg_encoding import Official

    mods = import_official(args.official.resolve(), args.build_dir)
    trees = sentences(args.data_dir)
    lines = [" ".join(a) for a in Official(args.official, args.build_dir).actions([t for _, t in trees])]
    if len(lines) != len(trees):
        raise SystemExit(f"the official oracle kept {len(lines)} of {len(trees)} sentences")
    args.out.mkdir(parents=True, exist_ok=True)
    sp = tokenizer(lines, args.out)
    ids = [encode(sp, line) for line in lines]
    for family, seed in (("dtg", SEED), ("txl-trans", SEED + 1)):
        model, margs, vocab = build_model(mods, family, args.out / "spm.vocab", seed)
        model.eval()
        values = []
        for (location, tree), line, sent in zip(trees, lines, ids):
            got = dtg_values(mods, model, vocab, sent) if family == "dtg" else txl_values(model, vocab, sent)
            total = -sum(got["logprob"])
            if abs(total - got["official_loss"]) > 1e-4 * max(1.0, abs(total)):
                raise SystemExit(f"{family} {location}: per-token losses sum to {total}, the official forward "
                                 f"returned {got['official_loss']}")
            values.append({"location": "/".join(location.split("/")[-2:]), "forms": list(tree.forms),
                           "heads": list(tree.heads), "actions": line, "pieces": [vocab[-1][i] for i in sent],
                           **got})
        torch.save(checkpoint(model, margs, vocab[-1], vocab[0]), args.out / f"{family}.pt")
        meta = {"commit": COMMIT, "family": family, "model_class": f"{CONFIGS[family][0]}.TransformerGrammar",
                "attn_mask": CONFIGS[family][2], **SIZE, "max_relative_length": MAX_REL,
                "min_relative_length": MIN_REL, "seed": seed, "dropout": 0.0, "sentences": values}
        text = json.dumps(rounded(meta), ensure_ascii=False, separators=(",", ":"))
        (args.out / f"{family}.json").write_text(text + "\n", encoding="utf-8")
        print(f"{family}: {len(values)} sentences, {sum(len(v['logprob']) for v in values)} tokens -> "
              f"{args.out / (family + '.pt')}, {args.out / (family + '.json')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
