"""Packed seed-group batches of the proposal parsers (``lightning_modules/families/parser/packing.py``), for
``proposal-parser`` (PTB-sample trees) and ``dep-parser`` (UD English EWT sentences): a packed row's gold-action
log-probabilities are each sentence's solo ones, and every seed of a packed group trains as its solo run:
per-step losses over 60 steps (within 1e-5, or within twice what the solo run's own rounding moves them) and the
gradients of the first and last steps (dropout 0, fp32), with seeds whose batches differ in length and rows
holding several sentences."""

from __future__ import annotations

import gzip

import pytest
import torch

from lightning_modules.data.tree import read_bracketed, to_bracketed
from tests.lightning_modules.models.group_equivalence import offsets, packed_alone, trains_as_solo
from tests.tolerances import FLOAT32

TINY = ["model.d_model=32", "model.n_encoder_layers=1", "model.n_decoder_layers=2", "model.n_heads=2",
        "model.d_ff=64", "model.max_depth=40", "model.warmup_steps=4", "model.total_steps=20",
        "data.min_count=1"]
FAMILIES = ["proposal-parser", "dep-parser"]
STEPS = 60
BATCH = 4


@pytest.fixture(scope="module")
def corpora(tmp_path_factory, shared_data) -> dict[str, str]:
    """Per family a corpus file: 60 PTB-sample trees, 60 UD English EWT (dev) sentences; 1 to 40 words and
    more."""
    root = tmp_path_factory.mktemp("parser-packing")
    files = sorted((shared_data / "ptb_nltk_sample" / "combined").glob("wsj_00*.mrg"))[:8]
    trees = [t for f in files for _, t in read_bracketed(f)][:60]
    (root / "trees.mrg").write_text("".join(to_bracketed(t) + "\n" for t in trees))
    ewt = shared_data / "ud" / "UD_English-EWT" / "en_ewt-ud-dev.conllu.gz"
    blocks = gzip.open(ewt, "rt", encoding="utf-8").read().strip().split("\n\n")[:60]
    (root / "sentences.conllu").write_text("\n\n".join(blocks) + "\n\n", encoding="utf-8")
    return {"proposal-parser": str(root / "trees.mrg"), "dep-parser": str(root / "sentences.conllu")}


def setup(family: str, corpora: dict[str, str]) -> tuple[dict, object]:
    from experiments.config import resolve_train_config
    from experiments.families import get_family
    from experiments.seed_grouping import dropout_settings

    overrides = [*TINY, f"data.corpus={corpora[family]}", "data.train_split=file", "data.valid_split=file"]
    cfg = resolve_train_config(family, "cpu-small", overrides)
    cfg = resolve_train_config(family, "cpu-small", overrides + [f"model.{k}=0" for k in dropout_settings(cfg)])
    return cfg, get_family(family).build_data(cfg)


def gold_logprobs(module: torch.nn.Module, batch: dict) -> torch.Tensor:
    """log q of each gold action [B, T] under the allowed-action mask (0 where there is none)."""
    logits = module(batch).float().masked_fill(~batch["mask"], -torch.inf).log_softmax(-1)
    gold = logits.gather(-1, batch["actions"][..., None])[..., 0]
    return torch.where(batch["actions"] != 0, gold, torch.zeros_like(gold))


@pytest.mark.parametrize("family", FAMILIES)
def test_a_packed_row_scores_each_sentence_as_its_solo_batch(family, corpora):
    from lightning_modules.families.parser.packing import pack

    cfg, data = setup(family, corpora)
    module, sentences, batch, packed, layout = packed_alone(family, cfg, data, pack, len)
    lengths = [len(sentence) for sentence in sentences]
    where, sources = offsets(layout, lengths), offsets(layout, [len(sentence.source) for sentence in sentences])
    with torch.no_grad():
        scores = gold_logprobs(module, packed)
        for k, sentence in enumerate(sentences):
            alone = gold_logprobs(module, data.collate([sentence]))
            (r, o), (_, s), n = where[k], sources[k], lengths[k]
            assert torch.equal(packed["actions"][r, o:o + n], batch["actions"][k, :n])
            assert torch.equal(packed["source"][r, s:s + len(sentence.source)], torch.tensor(sentence.source))
            torch.testing.assert_close(scores[r, o:o + n], alone[0, :n], **FLOAT32)
        assert float(scores.sum()) == pytest.approx(float(gold_logprobs(module, batch).sum()), rel=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_each_seed_of_a_packed_group_trains_as_its_solo_run(family, corpora):
    from experiments.batching import StepBatches

    cfg, data = setup(family, corpora)
    seeds = [0, 1, 2]
    batches = [[b for _, b in zip(range(STEPS), StepBatches(data.train, BATCH, s, data.collate))] for s in seeds]

    def loss_of(module, batch):
        nll, count, _ = module.loss_terms(batch)
        return nll / count.clamp(min=1)

    group = trains_as_solo(family, cfg, data, seeds, batches, loss_of, float(cfg["model"]["grad_clip_norm"]))
    shared = sum(int(batch[0]["segments"].amax()) > 1 for batch in group)  # rows shared by several sentences
    assert shared >= 0.9 * len(group), shared  # in nearly every step (a batch of long sentences has none)
    lengths = [[own[step]["inputs"].shape[1] for own in batches] for step in range(STEPS)]
    assert any(len(set(row)) > 1 for row in lengths)  # the seeds' batches differ in length
