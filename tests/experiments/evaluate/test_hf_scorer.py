"""``hf:`` sources: a tiny GPT-2 built offline, scored exactly, batch-independent, aligned to words by offsets."""

from __future__ import annotations

import functools
import math
import random
import shutil
from pathlib import Path
from typing import Any

import pytest
import torch

from experiments.evaluate.scorer import Scorer, Text, TextScorer, score_texts, text_of_words
from experiments.evaluate.scorers import hf
from experiments.evaluate.sg import condition_text, region_sums
from experiments.evaluate.tokenize import tokenize
from lightning_modules.data.tree import clean, read_bracketed
from lightning_modules.errors import InputError
from tests.tolerances import close32

BOS = "<|endoftext|>"
SAMPLE = ["wsj_0001.mrg", "wsj_0002.mrg", "wsj_0003.mrg", "wsj_0004.mrg", "wsj_0005.mrg", "wsj_0006.mrg"]


def build_tiny_gpt2(folder: Path, shared_data: Path, n_positions: int = 128, eos_in_vocab: bool = True) -> Path:
    """A randomly initialised 2-layer GPT-2 with a byte-level BPE (vocab 500) trained on PTB-sample text, reading
    ``n_positions`` pieces; ``<|endoftext|>`` is in the BPE's vocabulary (id 0, as GPT-2's is in its own) or, with
    ``eos_in_vocab=False``, a token added after it (id 500)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import GPT2Config, GPT2LMHeadModel, GPT2TokenizerFast

    texts = [text_of_words(clean(tree).leaves()).text
             for name in SAMPLE for _, tree in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / name)]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = [BOS] if eos_in_vocab else []
    bpe.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=500, special_tokens=specials, show_progress=False,
                                                       initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tokenizer = GPT2TokenizerFast(tokenizer_object=bpe, bos_token=BOS, eos_token=BOS, unk_token=BOS)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_positions=n_positions, n_embd=32, n_layer=2,
                                       n_head=2, bos_token_id=tokenizer.bos_token_id,
                                       eos_token_id=tokenizer.eos_token_id))
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def gpt2(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_gpt2(tmp_path_factory.mktemp("tiny-gpt2"), shared_data)


@pytest.fixture(scope="module")
def scorer(gpt2: Path) -> hf.HFScorer:
    return hf.load(f"hf:{gpt2}")


@pytest.fixture(scope="module")
def texts(shared_data: Path) -> list[Text]:
    """PTB-sample sentences of many lengths (padding in every batch) and a few raw ones."""
    trees = read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0010.mrg")
    words = [clean(tree).leaves() for _, tree in trees][:12]
    raw = ["The dogs didn't bark, did they?", "Hi.", "“Quotes” and (brackets) -- cannot."]
    return [text_of_words(w) for w in words if len(w) < 40] + [text_of_words([t.text for t in tokenize(r)])
                                                               for r in raw]


@functools.cache
def reference_model(folder: Path) -> tuple[Any, Any]:
    from transformers import AutoTokenizer, GPT2LMHeadModel

    return (AutoTokenizer.from_pretrained(folder, local_files_only=True),
            GPT2LMHeadModel.from_pretrained(folder, local_files_only=True).eval())


def direct_piece_logprobs(folder: Path, text: str) -> tuple[list[int], list[tuple[int, int]], list[float]]:
    """The pieces, their offsets and log p(piece | <|endoftext|>, earlier pieces), one text at a time."""
    tokenizer, model = reference_model(folder)
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = encoded["input_ids"]
    with torch.no_grad():
        logits = model(torch.tensor([[tokenizer.convert_tokens_to_ids(BOS), *ids]])).logits[0, :-1]
    logprobs = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(ids)[:, None])[:, 0]
    return ids, [tuple(o) for o in encoded["offset_mapping"]], logprobs.tolist()


def test_protocols_convention_and_identity(scorer: hf.HFScorer, gpt2: Path):
    assert isinstance(scorer, Scorer) and isinstance(scorer, TextScorer)
    assert scorer.name == f"hf:{gpt2.name}"
    c = scorer.convention
    assert (c.method, c.bound, c.end_of_sentence, c.unit) == ("exact", False, False, "word")
    assert (c.bos, c.precision) == (BOS, "float32") and "(vocab 500)" in c.tokenizer
    assert scorer.description() == f"exact, minicons convention, tokenizer {c.tokenizer}, conditioned on {BOS}, float32"
    identity = scorer.identity()
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(identity["files"])
    assert "generation_config.json" not in identity["files"]
    assert (identity["precision"], identity["bos"], identity["hf_convention"]) == ("float32", BOS, "minicons")
    assert not scorer.model.training


def test_totals_equal_a_direct_transformers_computation(scorer: hf.HFScorer, gpt2: Path, texts: list[Text]):
    for text, got in zip(texts, scorer.score_texts(texts)):
        _, _, logprobs = direct_piece_logprobs(gpt2, text.text)
        assert got.total == close32(math.fsum(logprobs))
        assert got.end_logprob == 0.0 and got.unknown_words == 0 and got.words == text.words
        assert math.fsum(got.word_logprobs) == pytest.approx(got.total, abs=1e-9)
        assert len(got.word_logprobs) == len(text.words)


def test_independent_of_batch_size_and_order(gpt2: Path, texts: list[Text]):
    reference = hf.load(str(gpt2), batch_size=1).score_texts(texts)
    shuffled = list(range(len(texts)))
    random.Random(1).shuffle(shuffled)
    for batch_size in (3, 16):
        scorer = hf.load(str(gpt2), batch_size=batch_size)
        for got, want in zip(scorer.score_texts(texts), reference):
            assert got.word_logprobs == close32(want.word_logprobs)
        for k, got in zip(shuffled, scorer.score_texts([texts[k] for k in shuffled])):
            assert got.word_logprobs == close32(reference[k].word_logprobs)
            assert got.total == close32(reference[k].total)


def test_pieces_go_to_the_word_of_their_first_non_space_character(scorer: hf.HFScorer, gpt2: Path):
    raw = "The dogs didn't bark, did they?"
    tokens = tokenize(raw)
    assert [t.text for t in tokens] == ["The", "dogs", "did", "n't", "bark", ",", "did", "they", "?"]
    text = Text(raw, tuple(t.text for t in tokens), tuple((t.start, t.end) for t in tokens))
    word_at = {i: w for w, t in enumerate(tokens) for i in range(t.start, t.end)}  # every non-space character
    ids, offsets, logprobs = direct_piece_logprobs(gpt2, raw)
    expected = [word_at[start + (raw[start] == " ")] for start, _ in offsets]  # a piece starts with <= 1 space
    assert hf.align_pieces(text, offsets) == expected
    for w, token in enumerate(tokens):  # the pieces of a word spell it (after their leading space)
        assert "".join(raw[s:e] for (s, e), o in zip(offsets, expected) if o == w).strip() == token.text
    got = scorer.score_texts([text])[0]
    for w in range(len(tokens)):
        want = math.fsum(lp for lp, o in zip(logprobs, expected) if o == w)
        assert got.word_logprobs[w] == close32(want)


def test_lm_eval_choices_read_a_space_before_the_sentence(scorer: hf.HFScorer, gpt2: Path):
    """lm-eval's BLiMP requests score ``" " + sentence`` after the BOS; its pieces still go to the sentence's words.
    Other texts are rolling requests: for a short text and a tokenizer that adds no BOS, minicons' numbers."""
    raw = "The dogs didn't bark, did they?"
    tokens = tokenize(raw)
    text = Text(raw, tuple(t.text for t in tokens), tuple((t.start, t.end) for t in tokens))
    word_at = {i: w for w, t in enumerate(tokens) for i in range(t.start, t.end)}
    spaced = " " + raw
    ids, offsets, logprobs = direct_piece_logprobs(gpt2, spaced)
    owners = [word_at[start - 1 + (spaced[start] == " ")] for start, _ in offsets]  # a piece starts with <= 1 space
    lm_eval = hf.load(str(gpt2), convention="lm-eval")
    (got,) = lm_eval.score_choices([text])
    assert got.words == text.words and got.total == close32(math.fsum(logprobs))
    for w in range(len(tokens)):
        assert got.word_logprobs[w] == close32(math.fsum(lp for lp, o in zip(logprobs, owners) if o == w))
    (rolling,), (minicons,) = lm_eval.score_texts([text]), scorer.score_texts([text])
    assert rolling.word_logprobs == close32(minicons.word_logprobs)
    assert scorer.score_choices([text]) == [minicons]


def test_alignment_rule_for_spaces_and_characters_outside_words():
    text = Text("a  - bc ", ("a", "bc"), ((0, 1), (5, 7)))
    # "a", " " (whitespace: next word), " -" (first non-space "-" is in no word: next word), "" (empty: next word),
    # " bc", " " at the end (no next word: the last word)
    offsets = [(0, 1), (1, 2), (2, 4), (4, 4), (4, 7), (7, 8)]
    assert hf.align_pieces(text, offsets) == [0, 1, 1, 1, 1, 1]


def test_region_sums_are_sums_of_the_pieces_in_each_region(scorer: hf.HFScorer, gpt2: Path):
    raw, spans = condition_text(["The keys", "to the cabinet", "", "are", "on the table."])
    tokens = tokenize(raw)
    text = Text(raw, tuple(t.text for t in tokens), tuple((t.start, t.end) for t in tokens))
    got = scorer.score_texts([text])[0]
    sums = region_sums(spans, text.spans, got.word_logprobs)
    _, offsets, logprobs = direct_piece_logprobs(gpt2, raw)
    for r, span in enumerate(spans):
        inside = [lp for (s, e), lp in zip(offsets, logprobs)
                  if span is not None and span[0] <= s + (raw[s] == " ") and e <= span[1]]
        assert sums[r] == close32(math.fsum(inside))
    assert spans[2] is None and sums[2] == 0.0
    assert math.fsum(sums) == close32(math.fsum(logprobs))


def test_words_are_scored_as_their_text(scorer: hf.HFScorer):
    sentences = [["The", "-LRB-", "big", "-RRB-", "dog", "did", "n't", "bark", "."], ["``", "Yes", "''", "."]]
    by_words = scorer.score(sentences)
    by_text = score_texts(scorer, [text_of_words(s) for s in sentences])
    assert by_words == by_text
    assert [s.words for s in by_words] == [tuple(s) for s in sentences]


def test_a_tokenizer_that_adds_bos_itself_is_not_conditioned_twice(scorer: hf.HFScorer, gpt2: Path, tmp_path: Path):
    from transformers import AutoTokenizer

    folder = tmp_path / "adds-bos"  # like Llama's tokenizers: BOS first unless add_special_tokens=False
    shutil.copytree(gpt2, folder)
    tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True, add_bos_token=True)
    tokenizer.save_pretrained(folder)
    reloaded = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    assert reloaded("Hi .")["input_ids"][0] == reloaded.bos_token_id
    texts = [text_of_words(["Hi", "."]), text_of_words(["The", "dog", "barked", "."])]
    assert hf.load(str(folder)).score_texts(texts) == scorer.score_texts(texts)


def test_bad_sources_are_input_errors(gpt2: Path, tmp_path: Path, scorer: hf.HFScorer):
    from transformers import BertConfig, BertForMaskedLM

    def error(source: str, **kwargs) -> InputError:
        with pytest.raises(InputError) as e:
            hf.load(source, **kwargs)
        return e.value

    missing = tmp_path / "missing"
    assert (error(f"hf:{missing}").location, error(f"hf:{missing}").message) == (str(missing), "model folder not found")
    (tmp_path / "empty").mkdir()
    assert "config.json" in error(str(tmp_path / "empty")).message
    bert = tmp_path / "bert"
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                               intermediate_size=32)).save_pretrained(bert)
    assert "not a causal LM: config.json declares BertForMaskedLM" in error(f"hf:{bert}").message
    untokenized = tmp_path / "no-tokenizer"
    untokenized.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(gpt2 / name, untokenized / name)
    assert "no tokenizer in the folder" in error(str(untokenized)).message
    half = error(str(gpt2), precision="float16")
    assert half.location == str(gpt2) and "float16 needs a cuda device" in half.message
    assert "unknown precision 'float64'" in error(str(gpt2), precision="float64").message
    assert "unknown device 'tpu0'" in error(str(gpt2), device="tpu0").message
    assert "is not available" in error(str(gpt2), device="cuda:99").message
    with pytest.raises(InputError) as e:
        scorer.score_texts([text_of_words(["ok"]), text_of_words(["the"] * 200)])
    assert e.value.location == "sentence 1" and "at most 127 pieces" in e.value.message
