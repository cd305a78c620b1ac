"""Dependency Transformer Grammars (Zhao et al. 2024) and their Transformer-XL (trans) baseline: the adapter.

``dtg`` generates a sentence with its projective dependency tree as a generative arc-standard, arc-eager or
arc-swift transition sequence (``model.system``), with STACK/COMPOSE attention; ``txl-trans`` is a
Transformer-XL over the same (undoubled) transitions with causal attention and linear relative positions.
Both are joint models p(x, y). Training reads dependency corpora (UD, or a constituency corpus converted:
``NAME-sd``, Stanford basic dependencies, the paper's scheme and the ``ptb``/``bllip`` presets'; ``NAME-dep``,
the Collins head rules, an override). A loaded checkpoint scores given dependency trees and their marginal
(``scorers.DTGModel`` with ``TreeScorer``): ``eval ppl --method gold`` gives the gold-tree bound on a
dependency corpus; ``--method proposals --parser CKPT`` marginalises over N distinct trees per sentence drawn
without replacement from a ``dep-parser`` checkpoint (found through the registry: its family's proposing
part). ``synbench import dtg|txl-trans CHECKPOINT --tokenizer DIR`` converts a checkpoint of the official code
(``importing``; ``lightning_modules/families/dtg/official.py``), its network reproduced by the presets' settings.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from experiments.evaluate.word_prob import WORD_PROBS, describe, method_options
from experiments.families import register
from experiments.families.adapter import (
    Family,
    ImportedModel,
    Importing,
    Inspection,
    InspectOption,
    Method,
    Scoring,
    ScoringRequest,
)
from experiments.families.dependency_presets import dependency_presets
from lightning_modules.errors import InputError

# the official code's SG beam (beam_search_standard.py: BEAM 100, WORD_BEAM 10, SHIFT 0, 15 token steps per
# terminal; the paper's text says a beam of 300): the only defaults of the DTG beam (beam.py has none)
BEAM = Method("beam", {"beam": 100, "word_beam": 10, "max_actions": 15, "fast_track": 0,
                       # when pop_root may come: the official beam's rule, on any stack (encoding.POP_ROOT_RULES)
                       "pop_root": "official"})
OFFICIAL = ("zhaoyd1/Dep_Transformer_Grammars checkpoint (train_dep_gen.py / train_dep.py torch.save: the whole "
            "module, args, vocab) with its SentencePiece tokenizer/spm.model")
N = 300  # DTG §4.1: 300 proposal trees per sentence sampled without replacement from the biaffine parser
METHODS = (BEAM, Method("proposals", {"n": N}, trees="dependency"), Method("gold", trees="dependency"))


@register
class DTGFamily(Family):
    """Dependency Transformer Grammars (Zhao et al. 2024): generative transition sequences over CoNLL-U trees."""

    names = ("dtg", "txl-trans")
    stacks_seeds = True

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "joint"

    # -- training ------------------------------------------------------------------------------------------
    def train_presets(self) -> dict[str, Any]:
        return dependency_presets(super().train_presets(), pieces=True)

    def build_data(self, cfg: dict[str, Any]) -> Any:
        from lightning_modules.families.dtg import data as dtg_data

        return dtg_data.build(self.name, cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from lightning_modules.families.dtg.model import ARC_STANDARD_TRANSITIONS, build, split_head

        module = build({**cfg["model"], "vocab_size": data.vocab_size})
        transitions = tuple(data.vocab["actions"]["closing"])
        if split_head(module.config) and transitions != ARC_STANDARD_TRANSITIONS:
            raise InputError(f"the split output head needs every arc-standard transition in the training data "
                             f"({', '.join(ARC_STANDARD_TRANSITIONS)}; got {', '.join(transitions)})",
                             "model.output_head")
        return module

    def final_metrics(self, module: Any, data: Any, best_path: str) -> dict[str, Any]:
        from lightning_modules.models.txl_lm import validation_metrics

        return validation_metrics(self.kind(), module, data, best_path)

    # -- checkpoints and scoring ---------------------------------------------------------------------------
    def methods(self, config: dict[str, Any] | None = None) -> tuple[Method, ...]:
        word_prob = method_options(config)  # pieces: the beam and proposal marginals take --word-prob too
        return (*(Method(m.name, {**m.options, **word_prob}, m.trees) for m in METHODS[:2]), METHODS[2])

    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        """A ``DTGModel``: the network with its vocabularies, scoring given dependency trees (TreeModel)."""
        from experiments.families.dtg.scorers import DTGModel

        return DTGModel.load(str(checkpoint), device)

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        """``beam``: the official word-synchronous beam over the system's transitions (``beam.py``; SG, BLiMP;
        ``max_actions`` counts token steps per word, an arc two of them; ``pop_root``: ``official``, on any stack, or
        ``single-word``, arc-standard's rule of when pop_root may come);
        ``proposals``: log of the summed p(x, y) over N distinct proposal trees (``--parser`` a dep-parser
        checkpoint, DTG §4), a lower bound on log p(x); ``gold``: log p(x, y_gold) of the corpus's dependency
        trees (non-projective ones lifted), a bound."""
        from experiments.evaluate.scorers.tree_marginal import TreeScorer

        o = request.options
        word_prob = o.get("word_prob", WORD_PROBS[0])
        corrected = {} if word_prob == WORD_PROBS[0] else {"word_prob": word_prob}
        stated = f", {describe(word_prob)}" if corrected else ""
        if request.method == "beam":
            from experiments.families.dtg.beam import DTGBeamScorer

            model = self.load(checkpoint, request.device)
            scorer = DTGBeamScorer(model, o["beam"], o["word_beam"], o["max_actions"], o["fast_track"],
                                   pop_root=o["pop_root"], word_prob=word_prob)
            # max_actions counts token steps (the official loop's): an arc is two tokens, the word one
            identity: dict[str, Any] = {"beam": o["beam"], "word_beam": o["word_beam"],
                                        "max_actions": o["max_actions"], "max_actions_counts": "tokens",
                                        "fast_track": o["fast_track"], **corrected}
            if model.system == "standard":  # pop_root is arc-standard's
                identity["pop_root"] = o["pop_root"]
            pieces = ""
            if model.pieces:  # the official loop over pieces: a word's later pieces forced, word beam after each
                identity["later_pieces"] = "forced, word beam after each"
                pieces = ", a word's later pieces forced (word beam after each)"
            rule = f", pop_root {o['pop_root']}" if "pop_root" in identity else ""
            return Scoring(scorer, identity, f"beam {o['beam']}/{o['word_beam']}, fast-track {o['fast_track']}, "
                           f"<= {o['max_actions']} token steps per word{pieces}{rule} (official code: 100/10, "
                           f"fast-track 0, 15, pop_root on any stack; paper text: beam 300){stated}", 8)
        if request.method == "proposals":
            if request.proposals is None:
                raise InputError("--method proposals needs --parser CKPT (a dep-parser checkpoint)", "--method")
            model = self.load(checkpoint, request.device)
            scorer = TreeScorer(model, model.known_trees(request.proposals), method="proposals", n=o["n"],
                                batch_size=request.batch_size, source_name=request.source_name, word_prob=word_prob)
            return Scoring(scorer, {"n_proposals": o["n"], **corrected}, f"N = {o['n']} proposals from "
                           f"{request.source_name} (paper: {N} from a biaffine parser){stated}")
        if request.gold is None:
            raise InputError("--method gold needs the gold trees of a corpus (eval ppl)", "--method")
        scorer = TreeScorer(self.load(checkpoint, request.device), request.gold, method="gold",
                            batch_size=request.batch_size,
                            source_name=request.source_name or "gold dependency trees of the corpus")
        return Scoring(scorer, {}, "gold dependency trees (non-projective ones lifted), log p(x, y_gold)")

    def evaluations(self, config: dict[str, Any] | None = None) -> Mapping[str, Any]:
        """``dependency_parse``: UAS by reranking dependency proposals (``rerank.py``, DTG Table 3)."""
        def uas_rerank(options: Mapping[str, Any]) -> tuple[dict[str, Any], int, int]:
            from experiments.families.dtg import rerank

            n = self.method("proposals").resolve(options)["n"]  # unset: the proposals method's default
            return rerank.evaluate(self.load(options["checkpoint"], options.get("device", "cpu")), {**options, "n": n})

        return {"dependency_parse": uas_rerank}

    # -- official checkpoints -----------------------------------------------------------------------------
    def importing(self) -> Importing:
        """Checkpoints of zhaoyd1/Dep_Transformer_Grammars (``lightning_modules/families/dtg/official.py``):
        ``train_dep_gen.py``'s (DTG) for ``dtg``, ``train_dep.py``'s (TXL (trans)) for ``txl-trans``; the
        tokenizer is the official ``tokenizer/`` folder (or its ``spm.model``)."""
        family = self.name
        return Importing(OFFICIAL, lambda checkpoint, vocab, tokenizer: import_official(family, checkpoint, vocab,
                                                                                         tokenizer),
                         takes_tokenizer=True)

    # -- inspect, model size -------------------------------------------------------------------------------
    def inspection(self) -> Inspection:
        def record(name: str, item: Any, options: Mapping[str, Any]) -> dict[str, Any]:
            from experiments.families.dtg.inspect import inspect_sentence

            return inspect_sentence(item, options.get("system") or "standard")

        def sources(tree: str | None, trees_file: str | None) -> list[tuple[str, Any]]:
            from experiments.families.dtg.inspect import read_sources

            return read_sources(tree, trees_file)

        system = InspectOption("--system", {"choices": ("standard", "eager", "swift"),
                                            "help": "dtg: transition system (default: standard, the official code's)"})
        return Inspection(("dtg",), record, (system,), sources, one_input_per_file=True)

    def model_info(self, config: dict[str, Any], prefix: str) -> dict[str, Any]:
        from dataclasses import asdict

        import torch

        from lightning_modules.families.dtg import model as dtg
        from lightning_modules.models import txl_lm

        cfg = dtg.config_from_dict(config, prefix=prefix)
        with torch.device("meta"):
            module = dtg.build(cfg)
        parts = txl_lm.parameter_breakdown(module)
        head = getattr(module.network, "action_head", None)  # output_head: split (the official action MLP)
        if head is not None:
            parts["action_head"] = sum(p.numel() for p in head.parameters())
        return {"parameters": txl_lm.parameter_count(module), "parts": parts, "config": asdict(cfg)}


def sentencepiece_model(tokenizer: Path | None, checkpoint: Path) -> tuple[bytes, Path]:
    """The official SentencePiece model's bytes (``tokenizer``: the official ``tokenizer/`` folder holding
    ``spm.model``, or that file) and where they were read."""
    if tokenizer is None:
        raise InputError("an official DTG checkpoint needs its SentencePiece model: --tokenizer DIR (the official "
                         "tokenizer/ folder) or its spm.model", str(checkpoint))
    path = tokenizer / "spm.model" if tokenizer.is_dir() else tokenizer
    if not path.is_file():
        raise InputError("no SentencePiece model (spm.model) there", str(tokenizer))
    return path.read_bytes(), path


def import_official(family: str, checkpoint: Path, vocab: Path | None, tokenizer: Path | None) -> ImportedModel:
    """An official checkpoint as a run of ``family``: the ``bllip`` preset's config (the paper's, SentencePiece
    terminals) with the converted model section, the vocabularies as a trained run records them (the official
    SentencePiece model embedded; its pieces must be the checkpoint's vocabulary), and our module's state_dict
    (loaded strictly, so every parameter is accounted for)."""
    import base64
    from dataclasses import asdict

    import sentencepiece as spm

    from experiments.config import resolve_train_config
    from lightning_modules.data.encodings.choe_charniak import ActionVocab
    from lightning_modules.families.dtg import official
    from lightning_modules.families.dtg.data import UNKNOWN_PIECE
    from lightning_modules.families.dtg.model import build

    checkpoint = Path(checkpoint)
    model_bytes, model_path = sentencepiece_model(None if tokenizer is None else Path(tokenizer), checkpoint)
    listed = None if tokenizer is None else Path(tokenizer) / "spm.vocab"
    if vocab is None and listed is not None and listed.is_file():  # the official tokenizer/ folder's vocab file
        vocab = listed
    converted, terminals, transitions, state = official.convert(checkpoint, None if vocab is None else Path(vocab))
    if converted.family != family:
        other = "TXL (trans)" if converted.family == "txl-trans" else "DTG"
        raise InputError(f"a {other} checkpoint ({converted.family}); import it as {converted.family}",
                         str(checkpoint))
    try:
        sp = spm.SentencePieceProcessor(model_proto=model_bytes)
        pieces = [sp.id_to_piece(i) for i in range(len(sp))]
    except Exception as e:  # noqa: BLE001  (sentencepiece raises plain RuntimeErrors)
        raise InputError(f"not a SentencePiece model ({type(e).__name__})", str(model_path)) from None
    if pieces != converted.vocab:
        raise InputError(f"its {len(pieces)} pieces are not the checkpoint's vocabulary ({len(converted.vocab)})",
                         str(model_path))
    config = resolve_train_config(family, "bllip")
    model = {k: v for k, v in asdict(converted.config).items() if k != "vocab_size"}
    config["model"] = {**config["model"], **model}
    config["data"] = {**config["data"], "terminals": "sentencepiece", "sp_text": "transitions",
                      "sp_vocab_size": len(pieces)}
    actions = ActionVocab(terminals, (), transitions)
    module = build({**config["model"], "vocab_size": len(actions)})
    module.load_state_dict(state, strict=True)
    payload = {"terminals": "sentencepiece", "unknown": UNKNOWN_PIECE,
               "sentencepiece": base64.b64encode(model_bytes).decode("ascii"), "actions": actions.to_json(),
               "system": "standard"}
    source = {"official_class": next(k for k, v in official.MODEL_CLASSES.items() if v == family),
              "file": str(checkpoint), "tokenizer": str(model_path),
              "vocab_file": None if vocab is None else str(vocab),
              "official_args": converted.args,
              "settings": {k: model[k] for k in ("scale_embeddings", "ffn_activation", "attention_output_bias",
                                                 "output_head", "shared_relative_bias")},
              "unseen_rows": "zero embedding, output bias -1e4 (the placeholder, transitions spelled as pieces)"}
    return ImportedModel(config=config, vocab=payload, state_dict=module.state_dict(), source=source)
