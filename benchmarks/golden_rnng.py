"""Golden values of the official batched fixed-stack RNNG (aistairc/rnng-pytorch), for the CI parity tests.

Run by hand, outside CI, against an extracted checkout of aistairc/rnng-pytorch (commit f30c0ed):
``python -m benchmarks.golden_rnng --official /tmp/rnng-official --out tests/golden/rnng``.

For the first 20 cleaned PTB-sample trees (``benchmarks.parity_common``; POS tags kept, as the official
preprocessing reads them) it writes ``golden.json``: each tree's bracketed text, the official top-down
(``preprocess.get_actions``) and in-order (``utils.get_in_order_actions``) action sequences, their max stack
sizes, the nonterminals (``preprocess.find_nts_in_tree``), the word vocabulary ``preprocess.make_vocab`` builds
from the 20 trees with the README's PTB setting (``--vocabminfreq 2 --unkmethod berkeleyrule``), each
sentence's token ids; and a small random official ``FixedStackRNNG`` (top-down, LSTM composition, 2 layers,
w_dim = h_dim = 16, dropout 0, torch seed 1234, fp32 on the CPU): its per-action log-probabilities over the 20
sentences in one batch (``-a_loss``, plus ``-w_loss`` on SHIFTs: log p(action) + log p(word)), for the first
6 sentences the official ``word_sync_beam_search`` (beam 10, word beam 3, shift size 1, as ``beam_search.py``
calls it: its surprisals and final parses with their scores) and, in ``model.pt``, its state_dict; the same
for the official in-order ``FixedStackInOrderRNNG`` (same seed and sizes, its default ``max_cons_nts`` 3:
``in_order_logprobs``, ``in_order_beam``, ``model_in_order.pt``). Run it with ``PYTHONHASHSEED=0``: the
official vocabulary orders the unknown-word classes as a Python ``set``.
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
SIZE = {"w_dim": 16, "h_dim": 16, "num_layers": 2}
BEAM = {"beam_size": 10, "word_beam_size": 3, "shift_size": 1}  # the official word-synchronous beam recorded
BEAM_SENTENCES = 6


def main(argv: list[str] | None = None) -> int:
    p = parser(__doc__.splitlines()[0], "an extracted aistairc/rnng-pytorch checkout (commit f30c0ed)")
    p.add_argument("--out", required=True, type=Path, help="the golden folder (tests/golden/rnng)")
    args = p.parse_args(argv)
    if not (args.official / "fixed_stack_models.py").is_file():
        fail(f"{args.official} is not an rnng-pytorch checkout (no fixed_stack_models.py)")
    sys.path.insert(0, str(args.official))
    import preprocess  # the official modules
    import torch
    import utils as official_utils
    from action_dict import InOrderActionDict, TopDownActionDict
    from fixed_stack_in_order_models import FixedStackInOrderRNNG
    from fixed_stack_models import FixedStackRNNG

    trees = [to_bracketed(clean(tree)) for _, tree in ptb_sample_trees(args.data_dir)[:SENTENCES]]
    with tempfile.NamedTemporaryFile("wt", suffix=".txt") as f:
        f.write("".join(t + "\n" for t in trees))
        f.flush()
        vocab = preprocess.make_vocab(f.name, 300, 0, False, False, 0, 2, "berkeleyrule", 1)
    nts = sorted({nt for t in trees for nt in preprocess.find_nts_in_tree(t)})
    action_dict, in_order_dict = TopDownActionDict(nts), InOrderActionDict(nts)
    sentences = []
    for tree in trees:
        tags, tokens, _ = preprocess.get_tags_tokens_lowercase(tree)
        top_down = preprocess.get_actions(tree)
        in_order = official_utils.get_in_order_actions(tree)
        sentences.append({
            "tree": tree, "tokens": tokens, "tags": tags, "token_ids": [vocab.get_id(t) for t in tokens],
            "top_down": top_down, "in_order": in_order,
            "top_down_max_stack_size": official_utils.get_top_down_max_stack_size(top_down),
            "in_order_max_stack_size": official_utils.get_in_order_max_stack_size(in_order, tokens),
            "action_ids": action_dict.to_id(top_down), "in_order_action_ids": in_order_dict.to_id(in_order)})

    x = torch.tensor([s["token_ids"] + [0] * (max(len(t["token_ids"]) for t in sentences) - len(s["token_ids"]))
                      for s in sentences])
    models = {}
    for name, cls, actions_key, ids_key, dictionary in (
            ("", FixedStackRNNG, "top_down", "action_ids", action_dict),
            ("in_order_", FixedStackInOrderRNNG, "in_order", "in_order_action_ids", in_order_dict)):
        torch.manual_seed(SEED)
        model = cls(dictionary, vocab=len(vocab.i2w), dropout=0.0, **SIZE).eval()
        actions = dictionary.mk_action_tensor([s[actions_key] for s in sentences])
        with torch.no_grad():
            loss, a_loss, w_loss, _ = model(x, actions, subword_end_mask=x != 0)  # words: every one ends
        a_loss, w_loss = a_loss.tolist(), w_loss.tolist()
        for s in sentences:
            logprobs = []
            for a in s[ids_key]:
                value = -a_loss.pop(0)
                if a == dictionary.a2i["SHIFT"]:
                    value -= w_loss.pop(0)
                logprobs.append(value)
            s[f"{name}logprobs"] = logprobs
        assert not a_loss and not w_loss
        with torch.no_grad():  # the official beam_search.py's call (stack_size_bound -1: max(100, n + 10))
            rows = x[:BEAM_SENTENCES]
            rows = rows[:, : int((rows != 0).sum(1).max())]
            parses, surprisals = model.word_sync_beam_search(rows, rows != 0, stack_size_bound=-1, **BEAM)
        for s, found, surprisal in zip(sentences, parses, surprisals):
            s[f"{name}beam"] = {"surprisals": [float(v) for v in surprisal],
                                "parses": [[list(actions), float(score)] for actions, score in found]}
        models[name] = (model, loss.item())
    args.out.mkdir(parents=True, exist_ok=True)
    torch.save(models[""][0].state_dict(), args.out / "model.pt")
    torch.save(models["in_order_"][0].state_dict(), args.out / "model_in_order.pt")
    golden = {"source": "aistairc/rnng-pytorch f30c0ed", "seed": SEED, "model": {**SIZE, "dropout": 0.0},
              "beam": BEAM, "nonterminals": nts, "i2w": vocab.i2w, "specials": vocab.specials,
              "loss": models[""][1], "in_order_loss": models["in_order_"][1], "sentences": sentences}
    (args.out / "golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    print(f"wrote {args.out}/golden.json and model.pt: {len(sentences)} sentences, {len(vocab.i2w)} words, "
          f"{len(nts)} nonterminals, loss {models[''][1]:.4f} (in-order {models['in_order_'][1]:.4f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
