"""Corpus registry: named treebanks (built-in and user-registered) and treebank files, split into documents.

``load_corpus(name_or_path)`` resolves, in this order:

1. a built-in corpus staged by ``synbench prepare`` into the data directory: ``ptb-sample`` (NLTK's WSJ
   sample; ``train`` wsj_0001-0159, ``valid`` wsj_0160-0179, ``test`` wsj_0180-0199, one document per
   ``.mrg`` file), ``ud-ewt`` (``train``/``dev``/``test``) and the UD test sets ``ud-gum``, ``ud-partut``,
   ``ud-lines``, ``ud-pud``, ``ud-pronouns`` (split ``test``);
2. a treebank registered with ``synbench prepare --treebank NAME=PATH`` (kept in ``DATA_DIR/treebanks.json``):
   a file gives the single split ``file``; a directory gives one split per file named with a ``train``,
   ``valid``, ``dev`` or ``test`` token (``en_ewt-ud-dev.conllu``, ``ptb.train.txt``, ``test.trees``);
3. ``NAME-dep``, ``NAME-sd`` and ``NAME-ud`` for a constituency corpus ``NAME`` of 1. or 2.
   (``ptb-sample-dep``): the same sentences and splits as dependency trees, converted with the Collins head
   table (``head_rules.to_dependency``; cleaned first), to Stanford basic dependencies (``-sd``) or to
   Universal Dependencies (``-ud``) as CoreNLP converts (``dependency_schemes``), so every family can be
   compared on the same sentences;
4. a path to a bracketed (``.mrg``, one tree per line) or CoNLL-U file, with the single split ``file``.

A **text** corpus (kind ``"text"``) is plain tokenized text without trees, for string models: files named
``*.tokens`` (a user's WikiText-2 copy: ``wiki.train.tokens``, ``wiki.valid.tokens``, ``wiki.test.tokens``),
registered or read like a treebank. As AWD-LSTM reads WikiText, every line is a sentence (blank lines and
`` = Heading = `` lines included) whose words are its whitespace-separated tokens, kept exactly as written
(WikiText's own ``<unk>`` and ``@-@``); a sentence is a flat ``Tree("TEXT", words)`` (a blank line has no
word).

Trees are returned raw, as read (cleaning is a separate step, e.g. ``tree.clean``). CoNLL-U documents follow
``# newdoc id = ...`` comments; a bracketed file is one document. Parsed files are cached per process, keyed
by path, size and modification time; converted dependency trees also on disk (``conversion_cache``).

The data directory is ``--data-dir``, else ``$SYNBENCH_DATA``, else ``~/.cache/synbench/data``.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from lightning_modules.data.conversion_cache import cached_conversion
from lightning_modules.data.dependency import DepTree, parse_conllu
from lightning_modules.data.dependency_schemes import convert as convert_scheme
from lightning_modules.data.head_rules import to_dependency
from lightning_modules.data.tree import Tree, _read_text, clean, parse_bracketed
from lightning_modules.errors import InputError

Sentence = tuple[str, Tree | DepTree]  # (source location "FILE:LINE", raw tree)

SPLIT_TOKENS = ("train", "valid", "dev", "test")
REGISTRY_FILE = "treebanks.json"
# NAME-dep / NAME-sd / NAME-ud: constituency corpus NAME converted to dependency trees by this scheme
DEPENDENCY_SUFFIXES = {"-dep": "collins", "-sd": "sd", "-ud": "ud"}


@dataclass(frozen=True)
class Document:
    """One document: a PTB ``.mrg`` file, a UD ``newdoc`` section, or a whole treebank file."""

    name: str
    sentences: tuple[Sentence, ...]


@dataclass(frozen=True)
class Corpus:
    """A treebank split into named splits of documents."""

    name: str
    kind: str  # "constituency" | "dependency" | "text"
    splits: dict[str, list[Document]]

    def documents(self, split: str, location: str) -> list[Document]:
        """The documents of one split; an unknown split is an ``InputError`` at ``location`` (the config key
        or option that named it)."""
        if split not in self.splits:
            raise InputError(f"corpus {self.name!r} has no split {split!r} (splits: {', '.join(self.splits)})",
                             location)
        return self.splits[split]

    def sentences(self, split: str, location: str = "--split") -> list[Sentence]:
        """All sentences of one split, in document order."""
        return [s for doc in self.documents(split, location) for s in doc.sentences]


@dataclass(frozen=True)
class WordSentence:
    """A sentence as evaluations read it: its overt words and their tags, with its (cleaned) tree."""

    document: int  # index of its document in the split
    location: str  # "FILE:LINE"
    words: list[str]
    tags: list[str]  # POS tags (constituency: preterminals; dependency: XPOS, else UPOS)
    tree: Tree | DepTree  # the cleaned constituency tree (no -NONE-), or the dependency tree


def read_split(corpus: str | Path, split: str, limit: int | None = None, data_dir: str | Path | None = None,
               kind: str | None = None) -> tuple[Corpus, list[WordSentence]]:
    """The first ``limit`` (default all) sentences of a corpus split, of either kind unless ``kind`` is
    required; errors name ``--corpus``/``--split`` or the sentence's ``FILE:LINE``."""
    if limit is not None and limit < 1:
        raise InputError("must be at least 1", "--limit")
    loaded = load_corpus(corpus, data_dir)
    if kind is not None and loaded.kind != kind:
        raise InputError(f"corpus {loaded.name!r} has {loaded.kind} trees; this needs {kind} trees", "--corpus")
    out = []
    numbered = [(d, s) for d, doc in enumerate(loaded.documents(split, "--split")) for s in doc.sentences]
    for document, (location, tree) in numbered[:limit]:
        if isinstance(tree, DepTree):
            words, tags = list(tree.forms), list(tree.xpos if any(x != "_" for x in tree.xpos) else tree.upos)
        else:
            try:
                tree = clean(tree)
            except InputError as e:
                raise InputError(e.message, e.location or location) from None
            pairs = tree.pos()
            words, tags = [w for w, _ in pairs], [t for _, t in pairs]
        if not words:
            raise InputError("sentence without overt words", location)
        out.append(WordSentence(document, location, words, tags, tree))
    if not out:
        raise InputError(f"split {split!r} has no sentences", "--split")
    return loaded, out


# -- built-in corpora: staged paths relative to the data directory ------------------------------------
def _ptb_split(first: int, last: int) -> list[str]:
    return [f"ptb_nltk_sample/combined/wsj_{i:04d}.mrg" for i in range(first, last + 1)]


def _ud(repo: str, prefix: str, splits: tuple[str, ...]) -> dict[str, list[str]]:
    return {s: [f"ud/{repo}/{prefix}-ud-{s}.conllu"] for s in splits}


BUILTIN: dict[str, tuple[str, dict[str, list[str]]]] = {
    "ptb-sample": (
        "constituency",
        {"train": _ptb_split(1, 159), "valid": _ptb_split(160, 179), "test": _ptb_split(180, 199)},
    ),
    "ud-ewt": ("dependency", _ud("UD_English-EWT", "en_ewt", ("train", "dev", "test"))),
    "ud-gum": ("dependency", _ud("UD_English-GUM", "en_gum", ("test",))),
    "ud-partut": ("dependency", _ud("UD_English-ParTUT", "en_partut", ("test",))),
    "ud-lines": ("dependency", _ud("UD_English-LinES", "en_lines", ("test",))),
    "ud-pud": ("dependency", _ud("UD_English-PUD", "en_pud", ("test",))),
    "ud-pronouns": ("dependency", _ud("UD_English-Pronouns", "en_pronouns", ("test",))),
}


def resolve_data_dir(data_dir: str | Path | None = None) -> Path:
    """``data_dir`` if given, else ``$SYNBENCH_DATA``, else ``~/.cache/synbench/data``."""
    if data_dir is not None:
        return Path(data_dir).expanduser()
    env = os.environ.get("SYNBENCH_DATA")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "synbench" / "data"


def load_corpus(name_or_path: str | Path, data_dir: str | Path | None = None) -> Corpus:
    """Load a built-in corpus, a registered treebank, or a treebank file or directory (see the module doc)."""
    root = resolve_data_dir(data_dir)
    name = str(name_or_path)
    registered = registered_treebanks(root)
    if name in BUILTIN or name in registered:
        return _build(name, *_named_files(name, root, registered))
    for suffix, scheme in DEPENDENCY_SUFFIXES.items():
        stem = name.removesuffix(suffix)
        if stem != name and (stem in BUILTIN or stem in registered):
            kind, split_files = _named_files(stem, root, registered)
            if kind != "constituency":
                raise InputError(f"corpus {stem!r} already has dependency trees: use {stem!r}")
            return _build(name, "dependency", split_files, scheme=scheme)
    path = Path(name_or_path).expanduser()
    if path.is_file() or path.is_dir():
        splits = treebank_splits(path)
        kind = treebank_kind(splits)
        return _build(str(path), kind, {s: [p] for s, p in splits.items()})
    known = ", ".join([*BUILTIN, *registered])
    raise InputError(f"unknown corpus {name!r}: not a corpus name ({known}) and no such file or directory")


def _named_files(name: str, root: Path, registered: dict[str, dict]) -> tuple[str, dict[str, list[Path]]]:
    """Kind and split files of a built-in or registered corpus."""
    if name in BUILTIN:
        kind, splits = BUILTIN[name]
        missing = [p for files in splits.values() for p in files if not (root / p).is_file()]
        if missing:
            raise InputError(
                f"corpus {name!r} is not prepared in {root} (missing {missing[0]}): run `synbench prepare` "
                "(or `synbench prepare --from DIR` with a local copy of the data)"
            )
        return kind, {s: [root / p for p in files] for s, files in splits.items()}
    entry = registered[name]
    return entry["kind"], {s: [Path(p)] for s, p in entry["splits"].items()}


def _build(name: str, kind: str, split_files: dict[str, list[Path]], scheme: str | None = None) -> Corpus:
    splits = {}
    for split, files in split_files.items():
        splits[split] = [doc for path in files for doc in _read_documents(path, kind, scheme)]
    return Corpus(name, kind, splits)


# -- reading files (cached) ---------------------------------------------------------------------------
_CACHE: dict[tuple[str, int, int, str | None], tuple[Document, ...]] = {}


def _read_documents(path: Path, kind: str, scheme: str | None = None) -> tuple[Document, ...]:
    """The documents of one file; ``scheme`` (``collins``, ``sd``, ``ud``): a bracketed file read as
    dependency trees of that scheme."""
    try:
        st = path.stat()
    except OSError as e:
        raise InputError(f"cannot read file: {e.strerror}", str(path)) from None
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns, scheme)
    if key not in _CACHE:
        if scheme is not None:
            _CACHE[key] = cached_conversion(
                path, scheme, lambda: tuple(_converted(doc, scheme) for doc in _read_documents(path, "constituency")),
                Document)
        else:
            read = {"dependency": _conllu_documents, "text": _text_document}.get(kind, _bracketed_document)
            _CACHE[key] = read(path, _read_text(path))
    return _CACHE[key]


def to_scheme(tree: Tree, scheme: str) -> DepTree:
    """A raw constituency tree as a dependency tree of ``scheme``: ``collins`` (the head table of
    ``head_rules``), ``sd`` or ``ud`` (CoreNLP's Stanford basic / Universal dependencies)."""
    if scheme == "collins":
        return to_dependency(tree)
    return convert_scheme(tree, scheme)


def _converted(doc: Document, scheme: str) -> Document:
    sentences = []
    for location, tree in doc.sentences:
        try:
            sentences.append((location, to_scheme(tree, scheme)))  # type: ignore[arg-type]
        except InputError as e:
            raise InputError(e.message, e.location or location) from None
    return Document(doc.name, tuple(sentences))


def _doc_name(path: Path) -> str:
    name = path.name
    for suffix in (".gz", ".conllu", ".mrg"):
        name = name.removesuffix(suffix)
    return name


def _bracketed_document(path: Path, text: str) -> tuple[Document, ...]:
    trees = parse_bracketed(text, str(path))
    if not trees:
        raise InputError("no trees found (empty file)", f"{path}:1")
    return (Document(_doc_name(path), tuple((f"{path}:{line}", t) for line, t in trees)),)


TEXT_LABEL = "TEXT"  # the label of a text corpus's flat sentences
TEXT_SUFFIXES = (".tokens",)


def _text_document(path: Path, text: str) -> tuple[Document, ...]:
    lines = text.split("\n")
    if lines and lines[-1] == "":  # the final newline ends the last line; it starts no new one
        lines.pop()
    if not lines:
        raise InputError("no text found (empty file)", f"{path}:1")
    return (Document(_doc_name(path), tuple((f"{path}:{n}", Tree(TEXT_LABEL, tuple(line.split())))
                                            for n, line in enumerate(lines, start=1))),)


_NEWDOC = re.compile(r"^# newdoc(?: id = (.*))?$")


def _conllu_documents(path: Path, text: str) -> tuple[Document, ...]:
    sentences = parse_conllu(text, str(path))
    if not sentences:
        raise InputError("no sentences found (empty file)", f"{path}:1")
    docs: list[tuple[str, list[Sentence]]] = []
    for line, tree in sentences:
        newdoc = next((m for c in tree.comments if (m := _NEWDOC.match(c))), None)
        if newdoc or not docs:
            name = newdoc.group(1) if newdoc and newdoc.group(1) else f"{_doc_name(path)}#{len(docs) + 1}"
            docs.append((name, []))
        docs[-1][1].append((f"{path}:{line}", tree))
    return tuple(Document(name, tuple(sents)) for name, sents in docs)


def detect_kind(path: Path) -> str:
    """``"dependency"`` for CoNLL-U, ``"constituency"`` for bracketed trees, ``"text"`` for ``*.tokens``; by
    extension, else content."""
    name = path.name.removesuffix(".gz")
    if name.endswith(TEXT_SUFFIXES):
        return "text"
    if name.endswith((".conllu", ".conll")):
        return "dependency"
    if name.endswith(".mrg"):
        return "constituency"
    line = _first_line(path)
    if line.startswith("("):
        return "constituency"
    if line.startswith("#") or len(line.split("\t")) == 10:
        return "dependency"
    what = "empty file" if not line else "cannot tell the format: neither bracketed trees nor CoNLL-U"
    raise InputError(what, f"{path}:1")


def _first_line(path: Path) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8", errors="replace") as f:
            return next((line.strip() for line in f if line.strip()), "")
    except (OSError, EOFError) as e:
        raise InputError(f"cannot read file: {e}", str(path)) from None


def treebank_kind(splits: dict[str, Path]) -> str:
    """The kind shared by all split files; ``InputError`` when bracketed and CoNLL-U files are mixed."""
    kinds = {split: detect_kind(p) for split, p in splits.items()}
    if len(set(kinds.values())) > 1:
        mixed = ", ".join(f"{splits[s].name} is {k}" for s, k in kinds.items())
        folder = next(iter(splits.values())).parent
        raise InputError(f"split files mix treebank formats: {mixed}", str(folder))
    return next(iter(kinds.values()))


def treebank_splits(path: Path) -> dict[str, Path]:
    """Split files of a treebank path: ``{"file": path}`` for a file; by name tokens for a directory."""
    if path.is_file():
        return {"file": path}
    found: dict[str, list[Path]] = {}
    for f in sorted(path.iterdir()):
        tokens = set(re.split(r"[-_.]", f.name))
        hits = [s for s in SPLIT_TOKENS if s in tokens]
        if f.is_file() and len(hits) == 1:
            found.setdefault(hits[0], []).append(f)
    if not found:
        raise InputError(
            "directory has no split files (names with a train, valid, dev or test token, e.g. ptb.train.txt)",
            str(path),
        )
    for split, files in found.items():
        if len(files) > 1:
            names = ", ".join(f.name for f in files)
            raise InputError(f"several files for split {split!r}: {names}", str(path))
    return {s: found[s][0] for s in SPLIT_TOKENS if s in found}


# -- registered treebanks -----------------------------------------------------------------------------
def registered_treebanks(data_dir: str | Path | None = None) -> dict[str, dict]:
    """Treebanks registered in ``DATA_DIR/treebanks.json``: name -> entry with ``kind`` and ``splits``."""
    path = resolve_data_dir(data_dir) / REGISTRY_FILE
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read the treebank registry: {e}", str(path)) from None


# -- statistics ---------------------------------------------------------------------------------------
def corpus_stats(corpus: Corpus) -> dict[str, dict]:
    """``{split: counts, ..., "total": counts}`` with ``documents``, ``sentences`` and ``words`` per split.

    Words are overt tokens (``-NONE-`` excluded) of constituency trees and syntactic words (integer IDs) of
    CoNLL-U. Constituency corpora add, computed on the *cleaned* trees (``tree.clean``: -NONE- removed,
    function tags stripped, root unwrapped): ``phrase_labels`` and ``pos_tags`` (label -> raw count of nodes)
    and ``max_depth`` (the largest tree height as nltk defines it: a preterminal has height 2).
    """
    out = {split: _split_stats(corpus, docs) for split, docs in corpus.splits.items()}
    total: dict = {}
    for counts in out.values():
        for key, value in counts.items():
            if isinstance(value, dict):
                merged = total.setdefault(key, {})
                for label, n in value.items():
                    merged[label] = merged.get(label, 0) + n
            elif key == "max_depth":
                total[key] = max(total.get(key, 0), value)
            else:
                total[key] = total.get(key, 0) + value
    out["total"] = {k: dict(sorted(v.items())) if isinstance(v, dict) else v for k, v in total.items()}
    return out


def _split_stats(corpus: Corpus, docs: list[Document]) -> dict:
    sentences = [s for doc in docs for s in doc.sentences]
    counts: dict = {"documents": len(docs), "sentences": len(sentences)}
    if corpus.kind == "dependency":
        counts["words"] = sum(len(tree) for _, tree in sentences)
        return counts
    if corpus.kind == "text":
        counts["words"] = sum(len(tree.children) for _, tree in sentences)
        return counts
    phrases: dict[str, int] = {}
    tags: dict[str, int] = {}
    words = max_depth = 0
    for location, tree in sentences:
        try:
            cleaned = clean(tree)
        except InputError as e:
            raise InputError(e.message, location) from None
        for node in cleaned.subtrees():
            inventory = tags if node.is_preterminal else phrases
            inventory[node.label] = inventory.get(node.label, 0) + 1
        words += len(cleaned.leaves())
        max_depth = max(max_depth, cleaned.height())
    counts.update(
        words=words,
        max_depth=max_depth,
        phrase_labels=dict(sorted(phrases.items())),
        pos_tags=dict(sorted(tags.items())),
    )
    return counts
