"""PTB-style tokenization of raw evaluation text, with character offsets."""

from __future__ import annotations

import json

import pytest

from experiments.evaluate.tokenize import tokenize
from tests.conftest import SHARED_DATA


@pytest.mark.parametrize(("text", "tokens"), [
    ("I didn't know that the dogs' owner can't swim.",
     ["I", "did", "n't", "know", "that", "the", "dogs", "'", "owner", "ca", "n't", "swim", "."]),
    ('He said, "Mr. Smith won\'t pay $1,000 (or 50%) at 10:30..."',
     ["He", "said", ",", "``", "Mr.", "Smith", "wo", "n't", "pay", "$", "1,000", "-LRB-", "or", "50", "%",
      "-RRB-", "at", "10:30", "...", "''"]),
    ("The U.S. economy grew 3.5% -- or so they're saying.",
     ["The", "U.S.", "economy", "grew", "3.5", "%", "--", "or", "so", "they", "'re", "saying", "."]),
    ("I cannot go; we'll see.", ["I", "can", "not", "go", ";", "we", "'ll", "see", "."]),
    ("Who should Derek hug after shocking Richard?",
     ["Who", "should", "Derek", "hug", "after", "shocking", "Richard", "?"]),
    ("It's 'quoted' text!", ["It", "'s", "`", "quoted", "'", "text", "!"]),
    ("Mary's cat isn't here", ["Mary", "'s", "cat", "is", "n't", "here"]),
])
def test_ptb_tokens(text: str, tokens: list[str]) -> None:
    assert [t.text for t in tokenize(text)] == tokens


def test_offsets_point_into_the_raw_text() -> None:
    text = '  "Don\'t" (he said).'
    toks = tokenize(text)
    assert [(t.text, text[t.start:t.end]) for t in toks] == [
        ("``", '"'), ("Do", "Do"), ("n't", "n't"), ("''", '"'), ("-LRB-", "("), ("he", "he"),
        ("said", "said"), ("-RRB-", ")"), (".", "."),
    ]


SG = SHARED_DATA / "syntaxgym_hu2020/json"
BLIMP = SHARED_DATA / "blimp/data"


def test_syntaxgym_sentences_tokenize_within_regions() -> None:
    from experiments.evaluate.sg import condition_text, load_suites, region_sums

    n = 0
    for suite in load_suites(SG).values():
        for item in suite.items:
            for contents in item.conditions.values():
                text, spans = condition_text(contents)
                toks = tokenize(text)
                assert all(text[t.start:t.end] for t in toks)
                # raises if a token straddles a region boundary
                region_sums(spans, [(t.start, t.end) for t in toks], [0.0] * len(toks))
                n += 1
    assert n > 3000


def test_blimp_sentences() -> None:
    import gzip

    with gzip.open(BLIMP / "anaphor_number_agreement.jsonl.gz", "rt") as f:
        pair = json.loads(f.readline())
    toks = [t.text for t in tokenize(pair["sentence_good"])]
    assert toks[-1] == "." and "." not in toks[:-1]
    with gzip.open(BLIMP / "determiner_noun_agreement_1.jsonl.gz", "rt") as f:
        sentences = [json.loads(line)["sentence_good"] for line in f]
    for s in sentences:
        toks = tokenize(s)
        assert "".join(s[t.start:t.end] for t in toks) == s.replace(" ", "")
