"""The proposal parsers q(y | x): tools of the protocol, not models under evaluation.

``proposal-parser`` (TG §3.1) draws the N constituency trees joint models are marginalised over (``synbench
propose``, ``eval ... --parser``) and its greedy parses are reranked (``eval rerank``); ``dep-parser`` draws
the dependency trees of DTG's proposals and UAS reranking (``dep_proposals.py``). Both are the same seq2seq
network over actions, trained like any family and evaluated by nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from experiments.families import register
from experiments.families.adapter import Family, ProposeRequest, Proposing
from experiments.families.dependency_presets import dependency_presets

N = 300  # TG §3.1: N = 300 constituency trees per sentence, sampled without replacement
DEP_N = 300  # DTG §4.1: 300 dependency trees per sentence, sampled without replacement


@register
class ParserFamily(Family):
    """The proposal parser q(y | x) that draws the trees joint models are marginalised over (TG §3.1)."""

    names = ("proposal-parser",)
    stacks_seeds = True

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "tool"

    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.parser import data as parser_data

        return parser_data.build(cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from lightning_modules.families.parser.model import build

        return build({**cfg["model"], "source_vocab_size": data.stats["source_vocab_size"],
                      "action_vocab_size": data.vocab_size})

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        """Validation action NLL and accuracy (teacher forcing) and EVALB F1 of greedy parses.

        Greedy decoding is the width-1 beam; the parses and the gold trees get the gold POS tags back for
        EVALB (COLLINS.prm), which needs preterminals to delete punctuation.
        """
        from experiments.evaluate.evalb import COLLINS, evaluate_lines
        from experiments.evaluate.proposal_files import with_tags
        from experiments.families.parser.proposals import propose

        out = action_metrics(module, data, best_path)
        sentences = [t.leaves() for t in data.valid_trees]
        parses = propose(module, data.vocab, sentences, n=1, method="beam", max_rows=64)
        gold = [str(with_tags(t, tags)) for t, tags in zip(data.valid_trees, data.valid_tags, strict=True)]
        test = [str(with_tags(p.trees[0], tags)) for p, tags in zip(parses, data.valid_tags, strict=True)]
        evalb = evaluate_lines(gold, test, COLLINS).as_dict()
        out.update({
            "val_greedy_f1": evalb["all"]["bracket_f1"],
            "val_greedy_f1_convention": "EVALB COLLINS.prm, greedy parses, gold POS tags reinserted",
            "val_greedy_complete_match": evalb["all"]["complete_match"],
        })
        out.update(data.stats)
        return out

    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        """(parser module in eval mode, vocabulary payload)."""
        from experiments.families.parser.proposals import load_parser

        return load_parser(checkpoint)

    def proposing(self, config: dict[str, Any] | None = None) -> Proposing:
        return parser_proposing("experiments.families.parser.proposals", lambda found: found.trees, N)


@register
class DepParserFamily(Family):
    """The dependency proposal parser q(y | x): the seq2seq parser network writing canonical arc-standard
    actions (``lightning_modules/families/parser/dep_encoding.py``); a tool that draws DTG's proposal trees
    (``dep_proposals.py``)."""

    names = ("dep-parser",)
    stacks_seeds = True

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "tool"

    def train_presets(self) -> dict[str, Any]:
        return dependency_presets(super().train_presets())

    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.parser import dep_data as dep_parser_data

        return dep_parser_data.build(cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from lightning_modules.families.parser.model import build

        return build({**cfg["model"], "source_vocab_size": data.stats["source_vocab_size"],
                      "action_vocab_size": data.vocab_size})

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        """Validation action NLL and accuracy (teacher forcing) and the UAS of greedy parses (punctuation not
        scored by ``experiments.evaluate.uas``'s default rule)."""
        from experiments.evaluate.uas import DEFAULT_PUNCTUATION, PUNCTUATION_RULES, attachment_counts
        from experiments.families.parser.dep_proposals import propose

        out = action_metrics(module, data, best_path)
        parses = propose(module, data.vocab, [list(t.forms) for t in data.valid_trees], n=1, method="beam",
                         max_rows=64)
        words, heads = attachment_counts(data.valid_trees, [p.heads[0] for p in parses])
        out.update(val_greedy_uas=100.0 * heads / max(words, 1),
                   val_greedy_uas_convention=f"greedy parses, {PUNCTUATION_RULES[DEFAULT_PUNCTUATION]}")
        out.update(data.stats)
        return out

    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        """(parser network in eval mode, vocabulary payload)."""
        from experiments.families.parser.dep_proposals import load_parser

        return load_parser(checkpoint)

    def proposing(self, config: dict[str, Any] | None = None) -> Proposing:
        return parser_proposing("experiments.families.parser.dep_proposals", lambda found: found.trees(), DEP_N)


def parser_proposing(module: str, trees: Callable[[Any], list[Any]], n: int) -> Proposing:
    """The ``proposing`` part of a parser whose search module (imported when used: it needs torch) has
    ``load_parser``, ``propose`` and ``write``; ``trees`` reads one sentence's trees from what it found; ``n``
    is the paper's number of trees per sentence."""

    def proposer(checkpoint: str | Path, method: str = "sample") -> Any:
        search = importlib.import_module(module)
        model, payload = search.load_parser(checkpoint)
        return lambda sentences, n, seed: [trees(found) for found in search.propose(model, payload, sentences, n,
                                                                                     method, seed)]

    def write(request: ProposeRequest) -> str:
        return importlib.import_module(module).write(request)

    return Proposing(proposer, write, n)


def action_metrics(module: Any, data: Any, best_path: str) -> dict[str, Any]:
    """Teacher-forced validation action NLL and accuracy of a parser network (the best checkpoint's weights
    loaded, left on the CPU in eval mode); shared by the parsers over constituency and dependency actions."""
    import torch

    if best_path:
        module.load_state_dict(torch.load(best_path, map_location="cpu", weights_only=True)["state_dict"])
    module.eval()
    nll, count, correct = 0.0, 0, 0
    with torch.no_grad():
        for batch in data.valid_batches(32):
            terms = module.loss_terms({k: v.to(module.device) for k, v in batch.items()})
            nll, count, correct = nll + float(terms[0]), count + int(terms[1]), correct + int(terms[2])
    module.cpu()
    return {"val_actions": count, "val_action_nll": nll / max(count, 1),
            "val_action_accuracy": correct / max(count, 1)}
