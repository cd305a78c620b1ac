"""Model families as training sees them: how a config becomes data, a module and final metrics.

Each family adapter turns a resolved config into ``TrainData`` (encoded sequences, a collate function, the
vocabularies stored in checkpoints) and a LightningModule. Families register in ``FAMILIES``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from lightning_modules.data.train_data import TrainData, unigram_nll
from lightning_modules.errors import InputError


class TGFamily:
    """Transformer Grammars and their Transformer-XL baselines (TG §2–§3)."""

    names = ("tg", "txl-trees", "txl-terminals")

    def __init__(self, name: str):
        self.name = name

    # -- data --------------------------------------------------------------------------------------------
    def build_data(self, cfg: dict[str, Any]) -> TrainData:
        from lightning_modules.data import tg_data

        return tg_data.build(self.name, cfg)

    # -- model -------------------------------------------------------------------------------------------
    def build_module(self, cfg: dict[str, Any], data: TrainData) -> Any:
        from lightning_modules.models.tg import build

        return build({**cfg["model"], "vocab_size": data.vocab_size})

    def final_metrics(self, module: Any, data: TrainData, best_path: str) -> dict[str, Any]:
        """Validation NLL of the best checkpoint per token and per word, beside a unigram baseline."""
        import torch

        if best_path:
            state = torch.load(best_path, map_location="cpu", weights_only=True)["state_dict"]
            module.load_state_dict(state)
        module.eval()
        total, count = 0.0, 0
        with torch.no_grad():
            for batch in data.valid_batches(32):
                nll, n = module.nll([chunk.to(module.device) for chunk in batch])
                total += float(nll)
                count += int(n)
        unigram = unigram_nll(data.train, data.valid, data.vocab_size)
        words = max(data.valid_words, 1)
        out = {
            "val_tokens": count,
            "val_words": data.valid_words,
            "val_token_nll": total / max(count, 1),
            "val_token_ppl": math.exp(total / max(count, 1)),
            "unigram_val_token_ppl": math.exp(unigram / max(count, 1)),
            # joint models: -log p(x, y_gold) >= -log p(x), so this is an upper bound on word perplexity
            "val_word_ppl": math.exp(total / words),
            "val_word_ppl_convention": (
                "exact, </s> predicted, denominator = words" if self.name == "txl-terminals"
                else "gold-tree bound exp(-log p(x, y_gold) / words)"),
            "unigram_val_word_ppl": math.exp(unigram / words),
        }
        out.update(data.stats)
        return out


class ParserFamily:
    """The proposal parser q(y | x) that draws the trees joint models are marginalised over (TG §3.1)."""

    names = ("proposal-parser",)

    def __init__(self, name: str):
        self.name = name

    def build_data(self, cfg: dict[str, Any]) -> TrainData:
        from lightning_modules.data import parser_data

        return parser_data.build(cfg)

    def build_module(self, cfg: dict[str, Any], data: TrainData) -> Any:
        from lightning_modules.models.parser import build

        return build({**cfg["model"], "source_vocab_size": data.stats["source_vocab_size"],
                      "action_vocab_size": data.vocab_size})

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        """Validation action NLL and accuracy (teacher forcing) and EVALB F1 of greedy parses.

        Greedy decoding is the width-1 beam; the parses and the gold trees get the gold POS tags back for
        EVALB (COLLINS.prm), which needs preterminals to delete punctuation.
        """
        import torch

        from experiments.evaluate.evalb import COLLINS, evaluate_lines
        from experiments.evaluate.proposals import propose, with_tags

        if best_path:
            state = torch.load(best_path, map_location="cpu", weights_only=True)["state_dict"]
            module.load_state_dict(state)
        module.eval()
        nll, count, correct = 0.0, 0, 0
        with torch.no_grad():
            for batch in data.valid_batches(32):
                terms = module.loss_terms({k: v.to(module.device) for k, v in batch.items()})
                nll, count, correct = nll + float(terms[0]), count + int(terms[1]), correct + int(terms[2])
        module.cpu()
        sentences = [t.leaves() for t in data.valid_trees]
        parses = propose(module, data.vocab, sentences, n=1, method="beam", max_rows=64)
        gold = [str(with_tags(t, tags)) for t, tags in zip(data.valid_trees, data.valid_tags, strict=True)]
        test = [str(with_tags(p.trees[0], tags)) for p, tags in zip(parses, data.valid_tags, strict=True)]
        evalb = evaluate_lines(gold, test, COLLINS).as_dict()
        out = {
            "val_actions": count,
            "val_action_nll": nll / max(count, 1),
            "val_action_accuracy": correct / max(count, 1),
            "val_greedy_f1": evalb["all"]["bracket_f1"],
            "val_greedy_f1_convention": "EVALB COLLINS.prm, greedy parses, gold POS tags reinserted",
            "val_greedy_complete_match": evalb["all"]["complete_match"],
        }
        out.update(data.stats)
        return out


class PushdownFamily:
    """Pushdown-LM and its Base-LM (Murty et al. 2023, §3–§4): sentences with attachment labels and tapes."""

    names = ("pushdown", "base-lm")

    def __init__(self, name: str):
        self.name = name

    def build_data(self, cfg: dict[str, Any]) -> TrainData:
        from lightning_modules.data import pushdown_data

        return pushdown_data.build(self.name, cfg)

    def build_module(self, cfg: dict[str, Any], data: TrainData) -> Any:
        from lightning_modules.models.pushdown import build

        return build({**cfg["model"], "vocab_size": data.vocab_size}, family=self.name)

    def final_metrics(self, module: Any, data: TrainData, best_path: str) -> dict[str, Any]:
        """Validation NLL of the best checkpoint: LM per token and word, attachments, and for ``pushdown``
        the gold-tree joint bound; beside a unigram baseline. (Beam-marginal perplexity is an evaluator's.)"""
        import torch

        if best_path:
            state = torch.load(best_path, map_location="cpu", weights_only=True)["state_dict"]
            module.load_state_dict(state)
        module.eval()
        sums = {"lm_nll": 0.0, "lm_count": 0, "attachment_nll": 0.0, "attachment_count": 0,
                "attachment_correct": 0}
        with torch.no_grad():
            for batch in data.valid_batches(32):
                terms = module.loss_terms(batch.to(module.device))
                for key in sums:
                    sums[key] += type(sums[key])(terms[key])
        tokens, words = max(sums["lm_count"], 1), max(data.valid_words, 1)
        attachments = max(sums["attachment_count"], 1)
        unigram = unigram_nll([(s, None) for s in data.train], [(s, None) for s in data.valid], data.vocab_size)
        out = {
            "val_tokens": sums["lm_count"],
            "val_words": data.valid_words,
            "val_token_nll": sums["lm_nll"] / tokens,
            "val_token_ppl": math.exp(sums["lm_nll"] / tokens),
            "unigram_val_token_ppl": math.exp(unigram / tokens),
            "unigram_val_word_ppl": math.exp(unigram / words),
        }
        if self.name == "pushdown":
            joint = sums["lm_nll"] + sums["attachment_nll"]
            # -log p(x, y_gold) >= -log p(x): an upper bound on word perplexity
            out["val_word_ppl"] = math.exp(joint / words)
            out["val_word_ppl_convention"] = "gold-tree bound exp(-log p(x, y_gold) / words), <eos> predicted"
        else:
            out["val_word_ppl"] = math.exp(sums["lm_nll"] / words)
            out["val_word_ppl_convention"] = "exact, <eos> predicted, denominator = words"
        if sums["attachment_count"]:
            out["val_attachment_nll"] = sums["attachment_nll"] / attachments
            out["val_attachment_accuracy"] = sums["attachment_correct"] / attachments
        out.update(data.stats)
        return out


FAMILIES: dict[str, Callable[[str], Any]] = {name: TGFamily for name in TGFamily.names}
FAMILIES.update({name: ParserFamily for name in ParserFamily.names})
FAMILIES.update({name: PushdownFamily for name in PushdownFamily.names})


def get_family(name: str) -> Any:
    """The adapter of family ``name``; unknown names are an error listing the known ones."""
    if name not in FAMILIES:
        raise InputError(f"unknown model family {name!r} (known: {', '.join(FAMILIES)})", "family")
    return FAMILIES[name](name)
