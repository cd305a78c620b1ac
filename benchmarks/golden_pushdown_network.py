"""Golden forward values of the official Pushdown Layers network, for the parity tests of ``synbench import``.

Run by hand, outside CI, against a checkout of MurtyShikhar/Pushdown-Layers:
``python -m benchmarks.golden_pushdown_network --official DIR --out tests/golden/pushdown``.

For Pushdown-LM (``pushdown``) and Base-LM (``base-lm``: the same network with plain attention) it builds a
SMALL official model as the official ``util.get_base_transformer_lm`` builds it (``transformer_helpers.create_lm``
with ``train.n_heads`` as the feed-forward multiplier and the attachment head's head count, 8 transformer heads,
``stack_type_vocab`` = ``max_depth`` = 50, ``recursive_layer`` as ``bllip_config.yaml``), with random weights
from a fixed seed (every parameter perturbed, so that no layer norm or bias keeps a trivial value), and writes
per family ``FAMILY/model.pt`` (its ``state_dict``), ``FAMILY/vocab.pkl`` (the pickled ``WordVocabulary`` as
the official training pickles it) and ``FAMILY/golden.json``: for the first 20 PTB-sample trees (``synbench
prepare --from ../shared/data``; ``benchmarks.parity_common``), preprocessed by the official BLLIP pipeline
(``process_bllip.post_process_op``, ``text_helpers.flatten``), the official per-token log-probabilities
(``pushdown_util.make_preds_with_given_trees``: words, ``<eos>`` and ``</s>``), the attachment log-probabilities
(words and ``<eos>``'s own attachment to ``<s>``) and the official training losses
(``TransformerLMInterface``, mean LM and mean attachment cross-entropy over the 20 sentences), dropout off;
for Pushdown-LM over words also the final beam of the official ``eval_beam`` search (``BeamSearchDepthBased``, width 5:
each hypothesis' joint log p(x, y) and attachment decisions), the reference for a beam parity.

The official code is run on the CPU: its hard-coded ``cuda:0`` devices are redirected, and the GPU-stack
imports it does not use here (HF ``datasets``, the training-only ``sequence`` module) are stubbed as in
``benchmarks.parity_pushdown_encoding``. Words are whole tokens by default (``WholeWordTokenizer``); the
released BLLIP model reads GPT-2 BPE pieces: ``--tokenizer DIR`` splits them with ``GPT2Tokenizer`` from a
local tokenizer directory instead.
"""

from __future__ import annotations

import importlib
import json
import pickle
import sys
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.parity_common import fail, parser, ptb_sample_trees, stub_modules
from benchmarks.parity_pushdown_encoding import WholeWordTokenizer
from lightning_modules.data.tree import clean, to_bracketed

SEED = 1234
SENTENCES = 20
BEAM = 5  # the width of the official beam search recorded (eval_beam: 300)
# a small official model: train.vec_dim, train.encoder_n_layers, train.n_heads (the FFN multiplier and the
# attachment head's heads: d_ff = 2 x 16, attachment depth embedding 16 / 2; 8 heads of 2)
SIZE = {"vec_dim": 16, "encoder_n_layers": 2, "n_heads": 2}
FAMILIES = {"pushdown": True, "base-lm": False}  # family -> train.use_stack_tape


class _CpuTorch(types.ModuleType):
    """``torch`` for the official modules that hard-code ``torch.device("cuda:N")``: every device is the CPU."""

    def __init__(self, torch: Any):
        super().__init__("torch")
        self._torch = torch

    def __getattr__(self, name: str) -> Any:
        return getattr(self._torch, name)

    def device(self, *args: Any, **kwargs: Any) -> Any:
        return self._torch.device("cpu")


def _local_gpt2(gpt2: Any, directory: Path) -> Any:
    """``GPT2Tokenizer`` read from a local directory, with the ``add_prefix_space`` keyword of ``tokenize`` as
    transformers 4 (the official environment) applies it: a leading space (transformers 5 ignores it)."""

    class LocalGPT2:
        def __init__(self) -> None:
            self.tokenizer = gpt2.from_pretrained(str(directory))

        @classmethod
        def from_pretrained(cls, name: str) -> LocalGPT2:
            return cls()

        def tokenize(self, text: str, add_prefix_space: bool = False) -> list[str]:
            return self.tokenizer.tokenize(" " + text if add_prefix_space else text)

    return LocalGPT2


class Official:
    """The official model, preprocessing and scoring functions, imported from a checkout."""

    def __init__(self, official: Path, tokenizer_dir: Path | None):
        if not (official / "models" / "pushdown_transformer_lm.py").is_file():
            fail(f"not a Pushdown-Layers checkout: {official / 'models' / 'pushdown_transformer_lm.py'} missing")
        import torch

        tokenizer: Any = WholeWordTokenizer
        if tokenizer_dir is not None:
            try:
                from transformers import GPT2Tokenizer
            except ImportError:
                fail("--tokenizer needs transformers: pip install transformers")
            tokenizer = _local_gpt2(GPT2Tokenizer, tokenizer_dir)
        stub_modules({"transformers": {"GPT2Tokenizer": tokenizer}, "datasets": {"Dataset": object}, "sequence": {}})
        sys.path[:0] = [str(official), str(official / "data_utils")]
        try:
            self.nltk_tree = importlib.import_module("nltk").Tree
            self.bllip = importlib.import_module("process_bllip")
            self.helpers = importlib.import_module("text_helpers")
            self.vocabulary = importlib.import_module("vocabulary")
            self.create_lm = importlib.import_module("transformer_helpers").create_lm
            self.pushdown_util = importlib.import_module("pushdown_util")
            self.interfaces = importlib.import_module("interfaces")
            self.collate = importlib.import_module("collate")
            self.beam_search = importlib.import_module("beam_search_util")
        except ImportError as e:
            fail(f"the official code needs {e.name}: pip install {e.name}")
        self.pushdown_util.torch = _CpuTorch(torch)
        self.beam_search.torch = _CpuTorch(torch)
        self.torch = torch

    def preprocess(self, tree_text: str) -> tuple[Any, str]:
        """(binarized tree, ``w_1 .. w_n <eos>``) as the official BLLIP pipeline writes and reads them."""
        tree = self.bllip.post_process_op(self.nltk_tree.fromstring(tree_text))
        parse = self.nltk_tree.fromstring(" ".join(str(tree).split()))
        return parse, self.helpers.flatten(parse, add_eos=True)

    def build(self, vocab_size: int, use_stack_tape: bool) -> Any:
        """The official ``PushdownLM`` as ``util.get_base_transformer_lm`` builds it for ``bllip_config.yaml``."""
        recursive = {"depth_embed_init": 0.0, "fixed_depth_embed": False,
                     "rec_layers": list(range(SIZE["encoder_n_layers"])),
                     "stack_pred_layer": SIZE["encoder_n_layers"], "attachment_decisions": True,
                     "compose_keys_and_stack_info": True, "stack_type_vocab": 50}
        return self.create_lm({"dropout": 0.1}, vocab_size, SIZE["vec_dim"], SIZE["n_heads"],
                              SIZE["encoder_n_layers"], ff_multiplier=1, use_stack_tape=use_stack_tape,
                              recursive_layer_args=recursive)


def randomise(lm: Any, torch: Any) -> None:
    """Every parameter moved off its initial value by seeded noise (layer norms, biases and all)."""
    with torch.no_grad():
        for _, p in sorted(lm.named_parameters()):
            p.add_(torch.randn_like(p) * 0.05)


def shorten_buffers(lm: Any, torch: Any) -> None:
    """The constant buffers (sinusoid tables of 4,095 rows, ``int_seq`` of 5,000) cut to what 64 positions need,
    so that ``model.pt`` stays small: the official ``get_pos`` regenerates a table that is too short, and the
    values computed here are the official code's on exactly the weights saved."""
    for module in lm.modules():
        if "pos_encoding" in module._buffers:
            module.pos_encoding = module._create_buffer(64)
        if "int_seq" in module._buffers:
            module.int_seq = torch.arange(128, dtype=torch.long)


def losses(official: Official, lm: Any, vocab: Any, sentences: Sequence[str], parses: Sequence[Any]
           ) -> dict[str, float]:
    """The official training losses of the batch (``TransformerLMInterface``): mean LM and attachment CE."""
    torch = official.torch
    rows = []
    for sentence, parse in zip(sentences, parses):
        info = official.helpers.compute_attachment_labels_text(parse, sentence)
        ids = vocab(sentence)
        tape = official.helpers.compute_stack_tape(info["attachment_labels"], info["cstart_info"],
                                                   type_labels=None, with_depth_info=True)
        rows.append({"in": ids, "in_len": len(ids), "attachment_labels": info["attachment_labels"][1:],
                     "stack_tape": tape})
    data = official.collate.VarLengthCollate(None)(rows)
    interface = official.interfaces.TransformerLMInterface(lm, in_vocab=vocab)
    with torch.no_grad():
        out = interface(data, normalize=True)
    return {"lm": float(out["lm_out"].loss), "attachment": float(out["attachment_loss"])}


def tiny_tokenizer(trees: Sequence[str], folder: Path) -> Path:
    """A small GPT-2-format byte-level BPE (``vocab.json``, ``merges.txt``) trained on the trees' words."""
    from tokenizers import ByteLevelBPETokenizer

    from lightning_modules.data.tree import parse_tree

    words = [" " + w for t in trees for w in parse_tree(t).leaves()]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(words, vocab_size=400, min_frequency=2, show_progress=False)
    folder.mkdir(parents=True, exist_ok=True)
    bpe.save_model(str(folder))
    return folder


def golden(official: Official, family: str, trees: Sequence[str], out: Path, suffix: str = "") -> dict[str, Any]:
    """Write ``FAMILY[SUFFIX]/model.pt``, ``vocab.pkl`` and ``golden.json``; return the golden record."""
    torch = official.torch
    parsed = [official.preprocess(t) for t in trees]
    sentences = [s for _, s in parsed]
    parses = [p for p, _ in parsed]
    vocab = official.vocabulary.WordVocabulary(sentences, split_punctuation=False)
    torch.manual_seed(SEED)
    lm = official.build(len(vocab), FAMILIES[family])
    randomise(lm, torch)
    shorten_buffers(lm, torch)
    lm.eval()
    folder = out / (family + suffix)
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(lm.state_dict(), folder / "model.pt")
    with open(folder / "vocab.pkl", "wb") as f:
        pickle.dump(vocab, f)

    def tokenizer(s: str) -> list[int]:
        return [lm.encoder_sos] + vocab(s)

    lm_logprobs, attachment_logprobs = official.pushdown_util.make_preds_with_given_trees(
        lm, tokenizer, sentences, parses, stack_type_info="depth")
    beams = {}
    if FAMILIES[family] and not suffix:  # the official eval_beam's search at a small width, over words only
        search = official.beam_search.BeamSearchDepthBased(BEAM)
        with torch.no_grad():
            beams = {k: search(lm, tokenizer, sentence, 0) for k, sentence in enumerate(sentences)}
    records = []
    for k, (tree, sentence, parse, lp, ap) in enumerate(zip(trees, sentences, parses, lm_logprobs,
                                                            attachment_logprobs)):
        info = official.helpers.compute_attachment_labels_text(parse, sentence)
        records.append({"tree": tree, "sentence": sentence, "attachment_labels": list(info["attachment_labels"]),
                        "lm_logprobs": [float(x) for x in lp], "attachment_logprobs": [float(x) for x in ap],
                        "gold_joint_logprob": float(sum(lp) + sum(ap))})
        if k in beams:  # the final beam, best first: joint log p(x, y) and the attachment decisions
            records[-1]["beam"] = [{"score": float(score), "attachments": [int(a) for a in decisions]}
                                   for score, decisions, _ in beams[k]]
    result = {
        "family": family,
        "official": "MurtyShikhar/Pushdown-Layers",
        "size": SIZE, "seed": SEED, "use_stack_tape": FAMILIES[family],
        "vocab_size": len(vocab), "encoder_eos": lm.encoder_eos, "encoder_sos": lm.encoder_sos,
        "conventions": {
            "lm_logprobs": "per input position: log p(next token): the words, <eos>, then </s> after <eos>",
            "attachment_logprobs": "per word and <eos> (attached to <s>, label 0); none for </s>",
            "gold_joint_logprob": "eval_gold: sum of both lists",
            "losses": "TransformerLMInterface, normalize=True, the 20 sentences in one batch",
            "beam": f"Pushdown-LM: BeamSearchDepthBased({BEAM}) final beam, best first (eval_beam's search)",
        },
        "losses": losses(official, lm, vocab, sentences, parses),
        "sentences": records,
    }
    (folder / "golden.json").write_text(json.dumps(result) + "\n", encoding="utf-8")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0], "a checkout of MurtyShikhar/Pushdown-Layers")
    p.add_argument("--out", required=True, type=Path, metavar="DIR", help="where the golden files go")
    p.add_argument("--tokenizer", type=Path, metavar="DIR",
                   help="a local GPT-2 tokenizer directory (default: every word one token)")
    p.add_argument("--tiny-tokenizer", action="store_true",
                   help="train a small byte-level BPE (GPT-2 format, 400 pieces) on the sentences' words into "
                        "OUT/gpt2-tiny and use it: the golden values of a model reading GPT-2 pieces")
    args = p.parse_args(argv)
    trees = [to_bracketed(clean(tree)) for _, tree in ptb_sample_trees(args.data_dir)[:SENTENCES]]
    tokenizer, suffix = args.tokenizer, ""
    if args.tiny_tokenizer:
        tokenizer = tiny_tokenizer(trees, args.out / "gpt2-tiny")
    if tokenizer is not None:
        suffix = "-gpt2"
    official = Official(args.official, tokenizer)
    for family in (["pushdown"] if suffix else FAMILIES):
        result = golden(official, family, trees, args.out, suffix)
        print(f"{family}: {len(result['sentences'])} sentences, vocabulary {result['vocab_size']}, "
              f"losses {result['losses']} -> {args.out / (family + suffix)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
