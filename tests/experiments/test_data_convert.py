"""``synbench data convert``: CoNLL-U per input tree in file order, each scheme, errors as FILE:LINE (exit 2);
the ``NAME-sd`` / ``NAME-ud`` corpora (built-in and registered) read by ``data stats``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.cli import main
from lightning_modules.data.dependency import parse_conllu

TREES = ("( (S (NP-SBJ (NNP Mr.) (NNP Vinken)) (VP (VBZ is) (NP-PRD (NN chairman))) (. .)) )\n"
         "(S (NP-SBJ (-NONE- *)) (VP (VB Go) (PP (TO to) (NP (NN school)))) (. .))\n")


def convert(capsys: pytest.CaptureFixture[str], path: Path, scheme: str) -> list:
    assert main(["data", "convert", str(path), "--scheme", scheme]) == 0
    return [tree for _, tree in parse_conllu(capsys.readouterr().out)]


def test_each_scheme_prints_one_conllu_sentence_per_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.mrg"
    path.write_text(TREES)
    sd, go_sd = convert(capsys, path, "sd")
    assert sd.forms == ("Mr.", "Vinken", "is", "chairman", ".")
    assert sd.heads == (2, 4, 4, 0, 4) and sd.deprels == ("nn", "nsubj", "cop", "root", "punct")
    assert sd.xpos == ("NNP", "NNP", "VBZ", "NN", ".") and sd.upos == ("PROPN", "PROPN", "AUX", "NOUN", "PUNCT")
    assert go_sd.forms == ("Go", "to", "school", ".") and go_sd.deprels == ("root", "prep", "pobj", "punct")
    _, go_ud = convert(capsys, path, "ud")
    assert go_ud.heads == (0, 3, 1, 1) and go_ud.deprels == ("root", "case", "obl", "punct")
    collins, _ = convert(capsys, path, "collins")
    assert collins.heads == (2, 3, 0, 3, 3) and set(collins.deprels) == {"root", "dep"}


def test_a_malformed_tree_is_one_error_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.mrg"
    path.write_text(TREES + "(S (FOO (NN a) (NN b)) (VP (VBZ c)))\n")
    assert main(["data", "convert", str(path), "--scheme", "ud"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (f"synbench: error: {path}:3: no head rule for constituent label 'FOO' "
                            "(CoreNLP's semantic head finder)\n")
    path.write_text("(S (NP (NN a))\n")
    assert main(["data", "convert", str(path), "--scheme", "sd"]) == 2
    assert capsys.readouterr().err.startswith(f"synbench: error: {path}:1: ")


def test_registered_treebank_comes_as_sd_and_ud_corpora(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.prepare import register_treebank
    from lightning_modules.data.corpora import load_corpus

    path = tmp_path / "mine.txt"
    path.write_text(TREES)
    register_treebank(tmp_path, f"mine={path}")
    for scheme in ("sd", "ud"):
        corpus = load_corpus(f"mine-{scheme}", tmp_path)
        assert corpus.kind == "dependency" and [loc for loc, _ in corpus.sentences("file")] == [
            f"{path}:1", f"{path}:2"]
    assert main(["data", "stats", "mine-ud", "--data-dir", str(tmp_path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"] == {"documents": 1, "sentences": 2, "words": 9}


def test_built_in_corpus_comes_as_sd_and_ud_with_its_splits(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "ptb_nltk_sample" / "combined"  # ptb-sample's staged layout, every file the two trees
    folder.mkdir(parents=True)
    for i in range(1, 200):
        (folder / f"wsj_{i:04d}.mrg").write_text(TREES)
    for name in ("ptb-sample-sd", "ptb-sample-ud"):
        assert main(["data", "stats", name, "--data-dir", str(tmp_path), "--json"]) == 0
        stats = json.loads(capsys.readouterr().out)
        assert {s: stats[s]["sentences"] for s in ("train", "valid", "test")} == {"train": 318, "valid": 40,
                                                                                    "test": 40}
