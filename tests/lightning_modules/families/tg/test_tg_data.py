"""Corpus -> TG-family training data, and the exactness of the training-time shortcuts."""

import pytest
import torch

from experiments.config import resolve_train_config
from lightning_modules.data.encodings.batch import collate_chunk
from lightning_modules.data.tree import read_bracketed, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.families.tg import data as tg_data
from lightning_modules.models.txl_lm import build


@pytest.fixture(scope="module")
def treebank(tmp_path_factory, shared_data):
    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0003.mrg")]
    path = tmp_path_factory.mktemp("tb") / "wsj3.mrg"
    path.write_text("".join(to_bracketed(t) + "\n" for t in trees))
    return path


def cfg(family, treebank, *extra):
    return resolve_train_config(family, "cpu-small", [f"data.corpus={treebank}", "data.train_split=file",
                                                      "data.valid_split=file", *extra])


@pytest.mark.parametrize("family", ["tg", "txl-trees", "txl-terminals"])
@pytest.mark.parametrize("memory", ["smart", "plain"])
def test_trimmed_batches_and_skipped_memory_are_exact(treebank, family, memory):
    """Trimming padding and skipping the (empty) memory at sequence starts must not change any score."""
    c = cfg(family, treebank, "model.segment_length=16", "model.memory_length=16", f"data.memory={memory}",
            "data.level=document")
    data = tg_data.build(family, c)
    torch.manual_seed(0)
    model = build({**c["model"], "vocab_size": data.vocab_size, "d_model": 32, "n_layers": 2, "n_heads": 2,
                   "d_ff": 64}).eval()
    examples, segs = [e for e, _ in data.train], [s for _, s in data.train]
    n_chunks = max(len(s) for s in segs)
    full = model.token_logprobs([collate_chunk(examples, segs, k) for k in range(n_chunks)])
    trimmed = model.token_logprobs([collate_chunk(examples, segs, k, trim=True) for k in range(n_chunks)])
    n = trimmed.shape[1]  # only the last chunk loses its trailing padding (label 0, log-prob 0)
    assert torch.allclose(full[:, :n], trimmed, atol=1e-6) and not full[:, n:].any()
    assert (trimmed != 0).sum() == sum(int((e.labels != 0).sum()) for e in examples)


def test_sentence_and_document_sequences(treebank):
    sent = tg_data.build("tg", cfg("tg", treebank))
    doc = tg_data.build("tg", cfg("tg", treebank, "data.level=document"))
    assert len(sent.train) == sum(1 for _ in read_bracketed(treebank)) and len(doc.train) == 1
    assert sent.valid_words == doc.valid_words > 0
    assert "(DOC" in doc.vocab["actions"]["opening"]


def test_sentencepiece_terminals(treebank):
    data = tg_data.build("txl-terminals", cfg("txl-terminals", treebank, "data.terminals=sentencepiece",
                                              "data.sp_vocab_size=200"))
    assert data.vocab["terminals"] == "sentencepiece" and data.vocab["sentencepiece"]
    assert data.train[0][0].word_index.max() >= 0


@pytest.mark.parametrize(("override", "key"), [
    ("data.level=paragraph", "data.level"), ("data.terminals=chars", "data.terminals"),
    ("data.train_split=dev", "data.train_split"), ("model.relpos=delta_depth", "model.relpos"),
    ("data.tree_transform=sideways", None),
])
def test_bad_data_config_names_the_key(treebank, override, key):
    family = "txl-trees" if override.startswith("model.relpos") else "tg"
    with pytest.raises(InputError) as e:
        tg_data.build(family, cfg(family, treebank, override))
    if key:
        assert e.value.location == key
