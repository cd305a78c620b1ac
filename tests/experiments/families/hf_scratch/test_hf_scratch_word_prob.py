"""``hf-scratch`` on SentencePiece pieces: ``synbench surprisals CKPT TEXT --word-prob corrected`` end to end (the
option declared by the exact method, passed to the scorer, stated in the output), each word equal to its summed
pieces times P(a word begins or the sentence ends) after it over the same before it, from the network's logits."""

from __future__ import annotations

import csv
import json

import torch

from experiments.cli import main
from experiments.families import get_family
from experiments.families.hf_scratch.scorers import ExactScorer
from lightning_modules.data.sentencepiece import BOUNDARY
from tests.experiments.families.hf_scratch.test_hf_scratch import TINY
from tests.tolerances import close32


def test_corrected_surprisals_of_a_sentencepiece_checkpoint(tmp_path, tiny_treebank, capsys):
    run = tmp_path / "run"
    assert main(["train", "hf-scratch", "--preset", "cpu-small", "--seed", "0", "--run-dir", str(run),
                 f"data.corpus={tiny_treebank}", "data.train_split=file", "data.valid_split=file",
                 "data.terminals=sentencepiece", "data.sp_vocab_size=120", *TINY, "train.max_steps=2",
                 "train.val_every=2", "train.ckpt_every=2"]) == 0
    checkpoint = run / "checkpoints" / "best.ckpt"
    sentences = [["The", "company", "said", "it", "expects", "profit", "."], ["Prices", "rose", "sharply", "."]]
    text = tmp_path / "text.txt"
    text.write_text("".join(" ".join(words) + "\n" for words in sentences))
    assert main(["surprisals", str(checkpoint), str(text), "--word-prob", "corrected", "--out",
                 str(tmp_path / "s.tsv")]) == 0
    lines = (tmp_path / "s.tsv").read_text().splitlines()
    settings = json.loads(next(line for line in lines if line.startswith("# settings: "))[len("# settings: "):])
    assert settings["word_prob"] == settings["scorer_convention"]["word_prob"] == "corrected"
    assert "word probabilities corrected (Pimentel & Meister 2024)" in settings["description"]
    rows = list(csv.DictReader([line for line in lines if not line.startswith("#")], delimiter="\t"))
    model = get_family("hf-scratch").load(checkpoint)
    plain = ExactScorer(model).score(sentences)
    begins = torch.tensor([t.startswith(BOUNDARY) or t == "</s>" for t in model.tokens])
    k = 0
    for words, summed in zip(sentences, plain, strict=True):
        example = model.encode(words)  # labels: the pieces, then </s>; position j predicts label j
        with torch.no_grad():
            logits = model.module.network(input_ids=torch.from_numpy(example.inputs)[None]).logits[0]
        boundary = logits.double().softmax(-1)[:, begins].sum(-1).log().tolist()
        index = example.word_index.tolist()
        for i in range(len(words)):
            first, last = index.index(i), len(index) - 1 - index[::-1].index(i)
            want = summed.word_logprobs[i] + boundary[last + 1] - boundary[first]
            assert -float(rows[k]["surprisal_nats"]) == close32(want), (words, i)
            k += 1
    assert k == len(rows)
    assert main(["surprisals", str(checkpoint), str(text), "--word-prob", "corrected", "--method", "beam"]) == 2
    assert "it is scored with --method exact, not beam" in capsys.readouterr().err
