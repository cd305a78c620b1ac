"""Checkpoints of the official Pushdown Layers code (MurtyShikhar/Pushdown-Layers) converted to synbench's.

The official training writes ``model.pt`` (the ``PushdownLM`` state_dict, or ``{"state_dict": ...}``) and
``vocab.pkl`` (its pickled ``vocabulary.WordVocabulary``: ``<pad>`` = 0, the words of the training sentences,
``<eos>`` among them; ``</s>`` = V and ``<s>`` = V + 1 exist only as embedding rows). Nothing from the files
runs: ``torch.load(weights_only=True)``, and the vocabulary through ``VocabularyUnpickler``, which rebuilds the
``WordVocabulary`` as plain data and refuses a pickle that names any other class or function.

The configuration is read from the tensor shapes: ``d_model`` and the vocabulary from the embedding, layers
from ``trafo.encoder.layers.N``, ``d_ff`` from ``linear1``, the Pushdown Layers (which must be the last ones)
and the depth table from their ``depth_embed``, whose width gives the head count (the official layers always
have 8 heads: a Base-LM's, without depth embeddings, are taken as 8), the attachment head's depth width from
its own ``depth_embed``. Tensors map one to one, except ``data_to_kv`` (per head: keys then values) split into
our key and value projections, and the vocabulary rows reordered into synbench's ids (``<pad>``, ``<s>``,
``<eos>``, the words, then ``</s>`` and ``UNK``). ``UNK`` has no official row: its embedding is 0 and its
output bias ``UNKNOWN_BIAS`` (-10,000), so it takes no probability (exp(-10⁴) is 0 in fp32) and every other
token's log-probability is the official one; a word outside the vocabulary is flagged unknown. Constant
buffers (sinusoid tables, ``int_seq``) and the attachment head's unused inherited parameters (``data_to_q``,
``multi_head_merge``, ``global_pos_bias``) are checked to be there and dropped.

The official sentence end is kept as the model setting ``sentence_end: official`` (``model.SENTENCE_ENDS``):
gold-tree scores count log p(``</s>`` | ..., ``<eos>``) and ``<eos>``'s attachment to ``<s>``, as the official
``eval_gold`` does, and the beam ends as the official ``eval_beam`` (``scorers.BeamScorer``).
``official_logprobs`` computes the official per-token values with our network.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from lightning_modules.errors import InputError

OFFICIAL = "MurtyShikhar/Pushdown-Layers model.pt + vocab.pkl (WordVocabulary)"
UNKNOWN_BIAS = -1.0e4
END = "</s>"  # the official encoder_eos, predicted after <eos>
OFFICIAL_HEADS = 8  # the official Transformer's default, which create_lm never overrides
LAYER = "trafo.encoder.layers."
# constant buffers and parameters the attachment head inherits but never uses
IGNORED = ("int_seq", "attachment_head.int_seq", "attachment_head.pos_encoding", "attachment_head.data_to_q.weight",
           "attachment_head.multi_head_merge.weight", "attachment_head.global_pos_bias")
HEAD = {  # synbench attachment head <- official StackPredictor
    "query.weight": "data_to_q_prime.weight", "key.weight": "data_to_k_prime.weight",
    "position.weight": "pos_to_pq_stack.weight", "depth.weight": "depth_embed.weight",
    **{f"{ours}.{i}.{p}": f"{theirs}.{i}.{p}" for ours, theirs in (
        ("query_mlp", "q_next_word_mlp"), ("self_key_mlp", "k_next_word_mlp"),
        ("compose", "key_and_stack_info_composer")) for i in (0, 3) for p in ("weight", "bias")},
}
BLOCK = {  # synbench block <- official TransformerEncoderLayer (besides the key/value split and depth_embed)
    "attention.query.weight": "self_attn.data_to_q.weight", "attention.position.weight": "self_attn.pos_to_pq.weight",
    "attention.output.weight": "self_attn.multi_head_merge.weight",
    **{f"{ours}.{p}": f"{theirs}.{p}" for ours, theirs in (
        ("inner", "linear1"), ("outer", "linear2"), ("ln1", "norm1"), ("ln2", "norm2")) for p in ("weight", "bias")},
}


# -- the vocabulary ------------------------------------------------------------------------------------------
class WordVocabularyData:
    """What a pickled official ``WordVocabulary`` holds, as plain attributes (no method of the original)."""

    words: Any
    inv_words: Any


class VocabularyUnpickler(pickle.Unpickler):
    """Reads a pickled ``vocabulary.WordVocabulary`` and nothing else: the class is replaced by
    ``WordVocabularyData``; builtins containers need no lookup; every other global is refused before it is
    resolved, so no code named by the file runs."""

    ALLOWED = {("vocabulary", "WordVocabulary"): WordVocabularyData}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.ALLOWED:
            return self.ALLOWED[(module, name)]
        if (module, name) in (("copyreg", "_reconstructor"), ("builtins", "object")):  # protocols 0 and 1
            import copyreg

            return copyreg._reconstructor if name == "_reconstructor" else object
        raise pickle.UnpicklingError(f"it names {module}.{name}; only vocabulary.WordVocabulary is read")


def read_vocab(path: Path) -> list[str]:
    """The official vocabulary's words by id (0 = ``<pad>``), read without running code from the file."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"cannot read the vocabulary ({e.strerror})", str(path)) from None
    try:
        value = VocabularyUnpickler(io.BytesIO(data)).load()
    except pickle.UnpicklingError as e:
        raise InputError(f"not an official vocab.pkl: {e}", str(path)) from None
    except Exception as e:  # truncated or not a pickle at all
        raise InputError(f"not an official vocab.pkl ({type(e).__name__}: {str(e)[:120]})", str(path)) from None
    words = getattr(value, "words", None) if isinstance(value, WordVocabularyData) else None
    if not isinstance(words, dict) or not all(isinstance(w, str) and type(i) is int for w, i in words.items()):
        raise InputError("not an official vocab.pkl: no WordVocabulary with a words table of str -> int", str(path))
    ordered = sorted(words, key=words.__getitem__)
    if [words[w] for w in ordered] != list(range(len(ordered))) or not ordered or ordered[0] != "<pad>":
        raise InputError("not an official vocab.pkl: word ids must be 0..V-1 with <pad> = 0", str(path))
    if "<eos>" not in words:
        raise InputError("the vocabulary has no <eos> (official sentences end with it)", str(path))
    return ordered


def official_payload(words: Sequence[str], tokenizer: Path | None) -> tuple[dict[str, Any], list[int]]:
    """The vocabulary payload of the imported checkpoint and, per synbench id, the official row (-1: none).

    synbench ids: ``<pad>``, ``<s>`` (official V + 1), ``<eos>``, the other words in official order, ``</s>``
    (official V), ``UNK``. Whole words (``terminals: words``, every official word known), or with a GPT-2
    tokenizer directory the official pieces (``terminals: gpt2-bpe``, ``tokens.gpt2_payload``).
    """
    from lightning_modules.data.vocab import PAD, SOS, SPECIALS, UNK, WordVocab

    position = {w: i for i, w in enumerate(words)}
    clash = [w for w in (END, UNK, SOS) if w in position]
    if clash:
        raise InputError(f"the official vocabulary has a word {clash[0]!r}, which synbench reserves", "--vocab")
    terminals = [w for w in words if w not in (PAD, "<eos>")] + [END, UNK]
    order = [0, len(words) + 1, position["<eos>"], *(position[w] for w in terminals[:-2]), len(words), -1]
    if tokenizer is None:
        vocab = WordVocab([(t, 0) for t in terminals], terminals[:-2], 1)
        payload: dict[str, Any] = {"terminals": "words", "words": vocab.to_dict()}
    else:
        from experiments.families.pushdown.tokens import gpt2_payload

        payload = {**gpt2_payload(tokenizer, terminals[:-2]), "unknown": UNK}
    payload["tokens"] = [*SPECIALS, *terminals]
    return payload, order


# -- the weights ---------------------------------------------------------------------------------------------
def read_state_dict(path: Path) -> dict[str, Any]:
    """The official ``model.pt`` state_dict (bare, or under ``state_dict``), loaded with ``weights_only=True``."""
    import torch

    if not path.is_file():
        raise InputError("checkpoint not found", str(path))
    try:
        loaded = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # truncated, corrupted, or not a torch file
        raise InputError(f"cannot read the checkpoint ({type(e).__name__}: {str(e).splitlines()[0][:120]})",
                         str(path)) from None
    if isinstance(loaded, dict) and "synbench" in loaded:
        raise InputError("a synbench checkpoint, not an official Pushdown-Layers model.pt (use it as it is)",
                         str(path))
    state = loaded.get("state_dict", loaded) if isinstance(loaded, dict) else None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise InputError("not an official Pushdown-Layers model.pt (expected a state_dict of tensors)", str(path))
    if "input_embedding.weight" not in state or f"{LAYER}0.self_attn.data_to_kv.weight" not in state:
        raise InputError("not an official Pushdown-Layers model.pt (no input_embedding / trafo.encoder.layers)",
                         str(path))
    return state


def read_config(state: dict[str, Any], family: str, vocab_size: int, where: str, vocab_where: str
                ) -> dict[str, Any]:
    """Our flat model config from the official tensor shapes (the module docstring)."""
    rows, d_model = state["input_embedding.weight"].shape
    if rows != vocab_size + 2:
        raise InputError(f"the vocabulary has {vocab_size} entries but the checkpoint's embedding {rows} rows "
                         f"(expected entries + 2 for </s> and <s>): not this model's vocabulary", vocab_where)
    n_layers = 0
    while f"{LAYER}{n_layers}.self_attn.data_to_kv.weight" in state:
        n_layers += 1
    pushdown = [k for k in range(n_layers) if f"{LAYER}{k}.self_attn.depth_embed.weight" in state]
    if pushdown != list(range(n_layers - len(pushdown), n_layers)):
        raise InputError(f"Pushdown Layers at {pushdown}: synbench supports the last k layers only", where)
    if family == "pushdown" and not pushdown:
        raise InputError("a Base-LM checkpoint (no depth embeddings): import it as base-lm", where)
    if family == "base-lm" and pushdown:
        raise InputError("a Pushdown-LM checkpoint (depth embeddings): import it as pushdown", where)
    depths = {tuple(state[f"{LAYER}{k}.self_attn.depth_embed.weight"].shape) for k in pushdown}
    heads = d_model // depths.pop()[1] if len(depths) == 1 else OFFICIAL_HEADS
    if depths:
        raise InputError("the layers' depth embeddings differ in shape", where)
    if "attachment_head.key_and_stack_info_composer.0.weight" not in state:
        raise InputError("the attachment head does not compose keys with depths (compose_keys_and_stack_info): "
                         "not supported", where)
    head_depth = state["attachment_head.depth_embed.weight"].shape
    depth_vocab = state[f"{LAYER}{pushdown[0]}.self_attn.depth_embed.weight"].shape[0] if pushdown else head_depth[0]
    if head_depth[0] != depth_vocab:
        raise InputError(f"the attachment head's depth table has {head_depth[0]} rows, the layers' {depth_vocab}",
                         where)
    return {"vocab_size": vocab_size + 2, "d_model": int(d_model), "n_layers": n_layers, "n_heads": int(heads),
            "d_ff": int(state[f"{LAYER}0.linear1.weight"].shape[0]), "pushdown_layers": len(pushdown),
            "depth_vocab": int(depth_vocab), "attachment_loss": True, "attachment_depth_dim": int(head_depth[1]),
            "sentence_end": "official"}


def convert_state(state: dict[str, Any], config: dict[str, Any], order: Sequence[int], where: str
                  ) -> dict[str, Any]:
    """Our state_dict: official tensors renamed, ``data_to_kv`` split, vocabulary rows in ``order`` (-1: UNK)."""
    import torch

    used: set[str] = set()

    def take(key: str) -> Any:
        if key not in state:
            raise InputError(f"not an official Pushdown-Layers model.pt: {key} missing", where)
        used.add(key)
        return state[key].float()

    index = torch.tensor([max(i, 0) for i in order])
    missing = torch.tensor([i < 0 for i in order])
    embedding = take("input_embedding.weight")[index].masked_fill(missing[:, None], 0.0)
    bias = take("output_map.bias")[index].masked_fill(missing, UNKNOWN_BIAS)
    out: dict[str, Any] = {"embedding.weight": embedding, "output_bias": bias}
    d_model, heads = config["d_model"], config["n_heads"]
    for k in range(config["n_layers"]):
        prefix = f"{LAYER}{k}."
        for ours, theirs in BLOCK.items():
            out[f"blocks.{k}.{ours}"] = take(prefix + theirs)
        kv = take(prefix + "self_attn.data_to_kv.weight").view(heads, 2, d_model // heads, d_model)
        out[f"blocks.{k}.attention.key.weight"] = kv[:, 0].reshape(d_model, d_model).clone()
        out[f"blocks.{k}.attention.value.weight"] = kv[:, 1].reshape(d_model, d_model).clone()
        if prefix + "self_attn.depth_embed.weight" in state:
            out[f"blocks.{k}.attention.depth.weight"] = take(prefix + "self_attn.depth_embed.weight")
        used.add(prefix + "self_attn.pos_encoding")
    for ours, theirs in HEAD.items():
        out[f"attachment_head.{ours}"] = take(f"attachment_head.{theirs}")
    extra = sorted(set(state) - used - set(IGNORED))
    if extra:
        raise InputError(f"not an official Pushdown-Layers model.pt of this form: unexpected {extra[0]}", where)
    return out


def convert(family: str, checkpoint: Path, vocab: Path | None, tokenizer: Path | None) -> Any:
    """``Importing.convert`` of ``pushdown`` and ``base-lm``: the run's config, vocabulary and weights."""
    from experiments.families.adapter import ImportedModel
    from lightning_modules.families.pushdown.model import build

    if vocab is None:
        raise InputError("the official vocabulary is a separate file: give --vocab vocab.pkl", "--vocab")
    state = read_state_dict(checkpoint)
    words = read_vocab(vocab)
    model = read_config(state, family, len(words), str(checkpoint), str(vocab))
    payload, order = official_payload(words, tokenizer)
    model["vocab_size"] = len(order)
    converted = convert_state(state, model, order, str(checkpoint))
    model = _with_defaults(family, model)
    module = build(model, family)
    try:
        module.load_state_dict(converted)
    except RuntimeError as e:
        raise InputError(f"the tensors do not fit the model read from their shapes ({str(e)[:160]})",
                         str(checkpoint)) from None
    config = _run_config(family, model, payload)
    source = {"sentence_end": "official",
              "conventions": ["vocabulary rows reordered into synbench ids; UNK added (embedding 0, bias -1e4)",
                              "</s> after <eos> and <eos>'s attachment to <s> counted (sentence_end: official)"]}
    return ImportedModel(config=config, vocab=payload, state_dict=module.state_dict(), source=source)


def _with_defaults(family: str, model: dict[str, Any]) -> dict[str, Any]:
    """The shapes read over the family's ``bllip-official`` preset (dropouts and optimiser: the official run's)."""
    from experiments.families import get_family

    presets, _ = get_family(family).model_presets()
    return {**presets["bllip-official"], **model}


def _run_config(family: str, model: dict[str, Any], payload: dict[str, Any]) -> dict[str, Any]:
    """A resolved run config as ``synbench train`` writes it, the model section the imported one."""
    from experiments.config import resolve_train_config

    config = resolve_train_config(family, "bllip", [])
    config["preset"] = None
    config["model"] = model
    config["data"] = {**config["data"], "terminals": payload["terminals"]}
    config["train"] = {**config["train"], "max_steps": 0}
    return config


# -- the official sentence end -------------------------------------------------------------------------------
def official_logprobs(module: Any, sentences: Sequence[Any], end_id: int) -> list[tuple[Any, Any]]:
    """Per sentence (``batch.PushdownSentence``, ``<s> x_1..x_n <eos>``), as the official ``eval_gold``: the
    log-probabilities of x_1..x_n, ``<eos>`` and ``</s>`` (id ``end_id``) [n + 2], and of the gold attachments
    of x_1..x_n and of ``<eos>`` to ``<s>`` [n + 1]; one forward of our network over ``<s> x_1..x_n <eos>``."""
    import numpy as np
    import torch

    from lightning_modules.families.pushdown.batch import PushdownSentence, collate

    rows = [PushdownSentence(np.append(s.ids, end_id), np.append(s.attachment, 0), s.spans, s.words)
            for s in sentences]
    batch = collate(rows).to(module.device)
    with torch.no_grad():
        word_logits, attach_logits = module(batch)
        words = word_logits.float().log_softmax(-1).gather(-1, batch.targets[..., None])[..., 0]
        attach = attach_logits.float().log_softmax(-1).gather(-1, batch.attachment[..., None])[..., 0]
    words, attach = words.double().cpu().numpy(), attach.double().cpu().numpy()
    return [(words[b, : len(s.ids)], attach[b, : len(s.ids) - 1]) for b, s in enumerate(sentences)]
