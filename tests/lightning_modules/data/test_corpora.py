"""Corpus registry: built-in corpora from a prepared data dir, treebank files and directories, stats."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from lightning_modules.data.corpora import (
    BUILTIN,
    corpus_stats,
    detect_kind,
    load_corpus,
    resolve_data_dir,
    treebank_splits,
)
from lightning_modules.data.dependency import DepTree
from lightning_modules.data.tree import Tree
from lightning_modules.errors import InputError

# Sentence counts recorded in each dataset's SOURCE.md (verified there independently of this project).
UD_TEST_SENTENCES = {"ud-gum": 1464, "ud-partut": 153, "ud-lines": 1121, "ud-pud": 1000, "ud-pronouns": 285}

CONLLU = (
    "# newdoc id = d1\n# text = Dogs bark\n"
    "1\tDogs\tdog\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n2\tbark\tbark\tVERB\tVBP\t_\t0\troot\t_\t_\n\n"
    "# text = Cats sleep\n"
    "1\tCats\tcat\tNOUN\tNNS\t_\t2\tnsubj\t_\t_\n2\tsleep\tsleep\tVERB\tVBP\t_\t0\troot\t_\t_\n\n"
    "# newdoc id = d2\n# text = It rains\n"
    "1-2\tIt's\t_\t_\t_\t_\t_\t_\t_\t_\n"
    "1\tIt\tit\tPRON\tPRP\t_\t2\texpl\t_\t_\n2\trains\train\tVERB\tVBZ\t_\t0\troot\t_\t_\n\n"
)
BRACKETED = "(S (NP (DT The) (NN dog)) (VP (VBZ barks)))\n(S (NP-SBJ (-NONE- *)) (VP (VB Go)) (. .))\n"


def test_ptb_sample_splits_and_documents(prepared_data_dir: Path) -> None:
    corpus = load_corpus("ptb-sample", prepared_data_dir)
    assert corpus.kind == "constituency"
    docs = corpus.splits
    assert [len(docs[s]) for s in ("train", "valid", "test")] == [159, 20, 20]
    assert (docs["train"][0].name, docs["train"][-1].name) == ("wsj_0001", "wsj_0159")
    assert (docs["valid"][0].name, docs["test"][0].name, docs["test"][-1].name) == (
        "wsj_0160",
        "wsj_0180",
        "wsj_0199",
    )
    assert sum(len(corpus.sentences(s)) for s in corpus.splits) == 3914
    location, tree = corpus.sentences("train")[0]
    assert isinstance(tree, Tree) and tree.label == ""  # raw: the PTB wrapper is still there
    path, line = location.rsplit(":", 1)
    assert path.endswith("ptb_nltk_sample/combined/wsj_0001.mrg") and int(line) >= 1
    assert "Pierre" in tree.leaves()


def test_ud_ewt_splits_and_newdoc_documents(prepared_data_dir: Path) -> None:
    corpus = load_corpus("ud-ewt", prepared_data_dir)
    assert corpus.kind == "dependency"
    assert {s: len(corpus.sentences(s)) for s in corpus.splits} == {"train": 12544, "dev": 2001, "test": 2077}
    first = corpus.splits["train"][0]
    assert first.name == "weblog-juancole.com_juancole_20051126063000_ENG_20051126_063000"
    assert isinstance(first.sentences[0][1], DepTree)
    assert first.sentences[0][0].endswith("en_ewt-ud-train.conllu:1")


@pytest.mark.parametrize("name", sorted(UD_TEST_SENTENCES))
def test_ud_test_sets(prepared_data_dir: Path, name: str) -> None:
    corpus = load_corpus(name, prepared_data_dir)
    assert list(corpus.splits) == ["test"]
    assert len(corpus.sentences("test")) == UD_TEST_SENTENCES[name]


def test_unprepared_corpus_says_how_to_prepare(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"not prepared .*synbench prepare"):
        load_corpus("ud-ewt", tmp_path)


def test_unknown_name(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown corpus 'no-such-corpus'"):
        load_corpus("no-such-corpus", tmp_path)


def test_data_dir_resolution(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("SYNBENCH_DATA", raising=False)
    assert resolve_data_dir() == Path.home() / ".cache" / "synbench" / "data"
    monkeypatch.setenv("SYNBENCH_DATA", str(tmp_path / "env"))
    assert resolve_data_dir() == tmp_path / "env"
    assert resolve_data_dir(tmp_path / "arg") == tmp_path / "arg"


def test_builtin_names_cover_the_issue() -> None:
    assert set(BUILTIN) == {"ptb-sample", "ud-ewt", *UD_TEST_SENTENCES}


def test_file_argument_gives_split_file(tmp_path: Path) -> None:
    path = tmp_path / "two.mrg"
    path.write_text(BRACKETED)
    corpus = load_corpus(path, tmp_path)
    assert corpus.kind == "constituency" and list(corpus.splits) == ["file"]
    assert [loc for loc, _ in corpus.sentences("file")] == [f"{path}:1", f"{path}:2"]


def test_conllu_documents_follow_newdoc(tmp_path: Path) -> None:
    path = tmp_path / "small.conllu.gz"
    path.write_bytes(gzip.compress(CONLLU.encode()))
    corpus = load_corpus(str(path), tmp_path)
    assert corpus.kind == "dependency"
    assert [(d.name, len(d.sentences)) for d in corpus.splits["file"]] == [("d1", 2), ("d2", 1)]
    assert corpus.splits["file"][1].sentences[0][0] == f"{path}:10"


def test_kind_detected_from_content(tmp_path: Path) -> None:
    trees, conllu, other, empty = (tmp_path / n for n in ("a.txt", "b.txt", "c.txt", "d.txt"))
    trees.write_text("\n" + BRACKETED)
    conllu.write_text(CONLLU)
    other.write_text("just words\n")
    empty.write_text("\n\n")
    assert detect_kind(trees) == "constituency"
    assert detect_kind(conllu) == "dependency"
    with pytest.raises(InputError, match="cannot tell the format") as e:
        detect_kind(other)
    assert e.value.location == f"{other}:1"
    with pytest.raises(InputError, match="empty file"):
        detect_kind(empty)


def test_directory_splits(tmp_path: Path) -> None:
    for split in ("train", "dev", "test"):
        (tmp_path / f"toy-ud-{split}.conllu").write_text(CONLLU)
    (tmp_path / "README.md").write_text("not a split\n")
    assert list(treebank_splits(tmp_path)) == ["train", "dev", "test"]
    corpus = load_corpus(tmp_path, tmp_path)
    assert {s: len(corpus.sentences(s)) for s in corpus.splits} == {"train": 3, "dev": 3, "test": 3}


def test_directory_errors(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no split files"):
        treebank_splits(tmp_path)
    (tmp_path / "a.train.txt").write_text(BRACKETED)
    (tmp_path / "b.train.txt").write_text(BRACKETED)
    with pytest.raises(InputError, match="several files for split 'train': a.train.txt, b.train.txt"):
        treebank_splits(tmp_path)
    (tmp_path / "b.train.txt").unlink()
    (tmp_path / "x-test.conllu").write_text(CONLLU)
    with pytest.raises(InputError, match="mix treebank formats"):
        load_corpus(tmp_path, tmp_path)


def test_malformed_file_reports_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.mrg"
    path.write_text("(S (NP (DT a) (NN b)))\n(S (NP (DT a)\n")
    with pytest.raises(InputError) as e:
        load_corpus(path, tmp_path)
    assert e.value.location == f"{path}:2" and "unbalanced" in e.value.message


def test_parsed_files_are_cached_until_they_change(tmp_path: Path) -> None:
    path = tmp_path / "t.mrg"
    path.write_text(BRACKETED)
    first = load_corpus(path, tmp_path).splits["file"][0]
    assert load_corpus(path, tmp_path).splits["file"][0] is first
    path.write_text(BRACKETED + "(S (NP (PRP It)) (VP (VBZ works)))\n")
    os.utime(path, ns=(0, 0))  # a different mtime and size: the cache key changes
    assert len(load_corpus(path, tmp_path).sentences("file")) == 3


def test_constituency_stats_use_cleaned_trees(tmp_path: Path) -> None:
    path = tmp_path / "t.mrg"
    path.write_text(BRACKETED)
    stats = corpus_stats(load_corpus(path, tmp_path))
    expected = {
        "documents": 1,
        "sentences": 2,
        "words": 5,  # The dog barks / Go .   (the -NONE- element is not a word)
        "max_depth": 4,  # (S (NP (DT The)))...: S -> NP -> DT -> word
        "phrase_labels": {"NP": 1, "S": 2, "VP": 2},  # NP-SBJ with only -NONE- inside is removed
        "pos_tags": {".": 1, "DT": 1, "NN": 1, "VB": 1, "VBZ": 1},
    }
    assert stats == {"file": expected, "total": expected}


def test_dependency_stats_count_syntactic_words(tmp_path: Path) -> None:
    path = tmp_path / "t.conllu"
    path.write_text(CONLLU)
    stats = corpus_stats(load_corpus(path, tmp_path))
    assert stats["file"] == {"documents": 2, "sentences": 3, "words": 6}  # the 1-2 range line is no word
    assert stats["total"] == stats["file"]


def test_stats_error_carries_the_sentence_location(tmp_path: Path) -> None:
    path = tmp_path / "t.mrg"
    path.write_text(BRACKETED + "(S (-NONE- *T*))\n")
    with pytest.raises(InputError) as e:
        corpus_stats(load_corpus(path, tmp_path))
    assert e.value.location == f"{path}:3"


def test_ptb_sample_dep_is_the_ptb_sample_converted_by_head_rules(prepared_data_dir: Path) -> None:
    corpus = load_corpus("ptb-sample-dep", prepared_data_dir)
    assert corpus.kind == "dependency" and corpus.name == "ptb-sample-dep"
    source = load_corpus("ptb-sample", prepared_data_dir)
    assert {s: len(corpus.sentences(s)) for s in corpus.splits} == {"train": 3396, "valid": 273, "test": 245}
    assert [loc for loc, _ in corpus.sentences("test")] == [loc for loc, _ in source.sentences("test")]
    location, first = corpus.sentences("train")[0]
    assert isinstance(first, DepTree) and location.endswith("wsj_0001.mrg:2")  # line 1 is blank
    assert first.forms[:3] == ("Pierre", "Vinken", ",") and first.heads[:3] == (2, 8, 2)
    words = corpus_stats(corpus)["total"]["words"]
    assert words == corpus_stats(source)["total"]["words"]


def test_registered_constituency_treebank_comes_as_dependency_trees(tmp_path: Path) -> None:
    from experiments.prepare import register_treebank

    trees = tmp_path / "mine.txt"
    trees.write_text("(S (NP (PRP I)) (VP (VBP see) (NP (PRP you))))\n(S (NP-SBJ (NNS dogs)) (VP (VBP bark)))\n")
    register_treebank(tmp_path, f"mine={trees}")
    corpus = load_corpus("mine-dep", tmp_path)
    assert [t.heads for _, t in corpus.sentences("file")] == [(2, 0, 2), (2, 0)]
    conllu = tmp_path / "mine.conllu"
    conllu.write_text(CONLLU)
    register_treebank(tmp_path, f"deps={conllu}")
    with pytest.raises(InputError, match="already has dependency trees"):
        load_corpus("deps-dep", tmp_path)


def test_conversion_error_names_the_sentence(tmp_path: Path) -> None:
    from experiments.prepare import register_treebank

    trees = tmp_path / "odd.txt"
    trees.write_text("(S (NP (NN x)) (VP (VBZ y)))\n(FOO (NN a) (NN b))\n")
    register_treebank(tmp_path, f"odd={trees}")
    with pytest.raises(InputError, match="no head rule for constituent label 'FOO'") as info:
        load_corpus("odd-dep", tmp_path)
    assert info.value.location == f"{trees}:2"


def test_an_unknown_split_names_the_key_that_asked_for_it(tmp_path: Path) -> None:
    for split in ("train", "dev"):
        (tmp_path / f"toy-ud-{split}.conllu").write_text(CONLLU)
    corpus = load_corpus(tmp_path, tmp_path)
    with pytest.raises(InputError) as e:
        corpus.documents("valid", "data.valid_split")
    assert e.value.location == "data.valid_split"
    assert e.value.message == f"corpus {corpus.name!r} has no split 'valid' (splits: train, dev)"
    assert len(corpus.sentences("dev")) == 3


# WikiText-2's format (Merity et al. 2017): blank lines, " = Heading = " lines, tokens with @-@ and <unk>
WIKITEXT = [" ", " = Valkyria Chronicles III = ", " ",
            " Senjō Valkyria 3 : <unk> Chronicles is a tactical role @-@ playing video game . ",
            " The game began development in 2010 . "]


def write_wikitext(folder: Path) -> Path:
    """A directory with a WikiText-2-style copy (wiki.{train,valid,test}.tokens) written by the test."""
    folder.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        (folder / f"wiki.{split}.tokens").write_text("\n".join(WIKITEXT) + "\n", encoding="utf-8")
    return folder


def test_a_wikitext_copy_is_a_text_corpus_one_line_one_sentence(tmp_path: Path) -> None:
    corpus = load_corpus(write_wikitext(tmp_path / "wikitext-2"))
    assert corpus.kind == "text" and list(corpus.splits) == ["train", "valid", "test"]
    sentences = corpus.sentences("train")
    assert [tree.leaves() for _, tree in sentences] == [line.split() for line in WIKITEXT]
    assert sentences[3][1].leaves()[4:6] == ["<unk>", "Chronicles"] and sentences[0][1].leaves() == []
    assert sentences[3][0].endswith("wiki.train.tokens:4")
    stats = corpus_stats(corpus)
    assert stats["train"] == {"documents": 1, "sentences": 5, "words": sum(len(x.split()) for x in WIKITEXT)}
    with pytest.raises(InputError, match="empty file"):
        (tmp_path / "empty.tokens").write_text("")
        load_corpus(tmp_path / "empty.tokens")
