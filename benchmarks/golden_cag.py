"""Golden values of the official Composition Attention Grammar (osekilab/CAG), for the CI parity tests.

Run by hand, outside CI, against an extracted checkout of osekilab/CAG (commit d870345) with its patched
transformers 4.11.3 importable (the official ``scripts/transformers-v4.11.3-x.patch``: ``GPT2Model`` taking
and returning per-position keys and values); ``tests/golden/cag/README.md`` gives the exact commands:
``python -m benchmarks.golden_cag --official /tmp/cag-official --out tests/golden/cag``.

For the first 20 cleaned PTB-sample trees (``benchmarks.parity_common``; POS tags kept, as the official
preprocessing reads them) it writes ``golden.json``: each tree, the official top-down actions
(``preprocess.get_actions``), their max stack size, the nonterminals (``preprocess.find_nonterminals_in_tree``),
the word vocabulary ``preprocess.make_vocab`` builds from the 20 trees with ``--vocabminfreq 2 --unkmethod
berkeleyrule`` (an official option; the README's ``gpt2`` needs the pretrained GPT-2 tokenizer), each
sentence's token ids; and a small random official ``FixedStackCompositionAttentionGrammar`` (2 layers, 2
heads, w_dim = h_dim = 16, max_stack_size 100, dropout and embd_dropout 0, torch seed 1234, fp32 on the CPU):
its per-action log-probabilities over the 20 sentences in one batch (``-action_loss``, plus ``-word_loss`` on
SHIFTs), for the first 6 sentences its ``word_sync_beam_search`` (beam 10, word beam 3, shift size 1,
``stack_size_bound`` -1 as ``beam_search.py`` calls it: surprisals, final parses and their scores) and, in
``model.pt``, its state_dict. Run it with ``PYTHONHASHSEED=0``: the official vocabulary orders the
unknown-word classes as a Python ``set``.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from benchmarks.parity_common import fail, parser, ptb_sample_trees
from lightning_modules.data.tree import clean, to_bracketed

SEED = 1234
SENTENCES = 20
SIZE = {"word_dim": 16, "hidden_dim": 16, "num_layers": 2, "num_heads": 2, "max_stack_size": 100}
BEAM = {"beam_size": 10, "word_beam_size": 3, "shift_size": 1}  # the official word-synchronous beam recorded
BEAM_SENTENCES = 6


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0], "an extracted osekilab/CAG checkout (commit d870345)")
    p.add_argument("--out", required=True, type=Path, help="the golden folder (tests/golden/cag)")
    args = p.parse_args(argv)
    if not (args.official / "src" / "models.py").is_file():
        fail(f"{args.official} is not a CAG checkout (no src/models.py)")
    sys.path.insert(0, str(args.official / "src"))
    import torch
    import transformers

    if transformers.__version__ != "4.11.3":
        fail(f"the official CAG needs its patched transformers 4.11.3 (found {transformers.__version__})")
    import preprocess  # the official modules
    import utils as official_utils
    from action_dict import TopDownActionDict
    from models import FixedStackCompositionAttentionGrammar

    trees = [to_bracketed(clean(tree)) for _, tree in ptb_sample_trees(args.data_dir)[:SENTENCES]]
    with tempfile.NamedTemporaryFile("wt", suffix=".txt") as f:
        f.write("".join(t + "\n" for t in trees))
        f.flush()
        vocab = preprocess.make_vocab(f.name, 300, 0, False, False, 0, 2, "berkeleyrule", 1)
    nts = sorted({nt for t in trees for nt in preprocess.find_nonterminals_in_tree(t)})
    action_dict = TopDownActionDict(nts)
    sentences = []
    for tree in trees:
        tags, tokens, _ = preprocess.get_tags_tokens_lowercase(tree)
        actions = preprocess.get_actions(tree)
        sentences.append({"tree": tree, "tokens": tokens, "tags": tags, "token_ids": [vocab.get_id(t) for t in tokens],
                          "top_down": actions,
                          "top_down_max_stack_size": official_utils.get_top_down_max_stack_size(actions),
                          "action_ids": action_dict.to_id(actions)})

    width = max(len(s["token_ids"]) for s in sentences)
    x = torch.tensor([s["token_ids"] + [0] * (width - len(s["token_ids"])) for s in sentences])
    torch.manual_seed(SEED)
    model = FixedStackCompositionAttentionGrammar(action_dict, vocab_size=len(vocab.id2word), dropout=0.0,
                                                  embd_dropout=0.0, **SIZE).eval()
    actions = action_dict.make_action_tensor([s["top_down"] for s in sentences])
    with torch.no_grad():
        loss, a_loss, w_loss = model(x, actions, stack_size_bound=-1, subword_end_mask=x != 0)
    a_loss, w_loss = a_loss.tolist(), w_loss.tolist()
    for s in sentences:
        logprobs = []
        for a in s["action_ids"]:
            value = -a_loss.pop(0)
            if a == action_dict.action2id["SHIFT"]:
                value -= w_loss.pop(0)
            logprobs.append(value)
        s["logprobs"] = logprobs
    assert not a_loss and not w_loss
    with torch.no_grad():  # the official beam_search.py's call (stack_size_bound -1: a stack of 100)
        rows = x[:BEAM_SENTENCES]
        rows = rows[:, : int((rows != 0).sum(1).max())]
        parses, surprisals = model.word_sync_beam_search(rows, rows != 0, stack_size_bound=-1, **BEAM)
    for s, found, surprisal in zip(sentences, parses, surprisals):
        s["beam"] = {"surprisals": [float(v) for v in surprisal],
                     "parses": [[list(a), float(score)] for a, score in found]}
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), args.out / "model.pt")
    golden = {"source": "osekilab/CAG d870345 (transformers 4.11.3 with the official patch)", "seed": SEED,
              "model": {**SIZE, "dropout": 0.0, "embd_dropout": 0.0}, "beam": BEAM, "nonterminals": nts,
              "i2w": vocab.id2word, "specials": vocab.specials, "loss": loss.item(), "sentences": sentences}
    (args.out / "golden.json").write_text(json.dumps(golden, separators=(",", ":")) + "\n")  # compact: < 200 kB
    print(f"wrote {args.out}/golden.json and model.pt: {len(sentences)} sentences, {len(vocab.id2word)} words, "
          f"{len(nts)} nonterminals, loss {loss.item():.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
