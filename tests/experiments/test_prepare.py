"""``synbench prepare``: staging from a local copy and by HTTP, pins, idempotence, corruption, treebanks."""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import json
import pickle
import shutil
import threading
import zipfile
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from experiments.cli import main
from experiments.prepare import MANIFEST_FILE, load_registry, prepare, register_treebank
from lightning_modules.data.corpora import BUILTIN, load_corpus, registered_treebanks
from lightning_modules.errors import InputError

REGISTRY = load_registry()
PRONOUNS = REGISTRY["datasets"]["ud-pronouns"]["files"]
PRONOUNS_CONLLU = "ud/UD_English-Pronouns/en_pronouns-ud-test.conllu"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    """A real HTTP server on localhost serving a temporary folder: (folder, base URL)."""
    root = tmp_path / "www"
    root.mkdir()
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_QuietHandler, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def mirror_pronouns(shared: Path, www: Path) -> None:
    """Lay out UD Pronouns as raw GitHub serves it: plain files under owner/repo/commit/path."""
    for entry in PRONOUNS:
        local = shared / entry["local"]["path"]
        data = local.read_bytes()
        target = www / entry["upstream"]["url"]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(gzip.decompress(data) if local.suffix == ".gz" else data)


def copy_pronouns(shared: Path, dest: Path) -> Path:
    folder = "ud/UD_English-Pronouns"
    shutil.copytree(shared / folder, dest / folder)
    return dest / folder / "en_pronouns-ud-test.conllu.gz"


# -- the shared prepared directory ---------------------------------------------------------------------
def test_every_pinned_file_is_staged(prepared_data_dir: Path) -> None:
    for name, spec in REGISTRY["datasets"].items():
        for entry in spec["files"]:
            staged = prepared_data_dir / entry["path"]
            assert sha(staged.read_bytes()) == entry["sha256"], (name, entry["path"])
    manifest = json.loads((prepared_data_dir / MANIFEST_FILE).read_text())
    assert set(manifest["datasets"]) == set(REGISTRY["datasets"])
    assert all(d["complete"] for d in manifest["datasets"].values())
    ewt = manifest["datasets"]["ud-ewt"]["files"]["ud/UD_English-EWT/en_ewt-ud-train.conllu"]
    assert ewt["source"].endswith("ud/UD_English-EWT/en_ewt-ud-train.conllu.gz")
    assert (
        ewt["source_sha256"] == "bd47e08c9e18ec12d319e84df2ccdb272ff6de1d0dba5761117d3caf8b358f7b"
    )  # SOURCE.md
    assert ewt["sha256"] == "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b"  # uncompressed


def test_registry_pins_both_sources_and_covers_every_corpus_file() -> None:
    paths = set()
    for spec in REGISTRY["datasets"].values():
        for entry in spec["files"]:
            paths.add(entry["path"])
            assert entry["upstream"]["sha256"] and entry["local"]["sha256"] and entry["sha256"]
            assert not entry["path"].endswith(".gz")
    corpus_files = {p for _, splits in BUILTIN.values() for files in splits.values() for p in files}
    assert corpus_files <= paths
    ptb = REGISTRY["datasets"]["ptb-sample"]["files"]
    zip_pin = "9da92d76c3666cfb6cddeaed0f7e86b344cce0f0928a286d439e555f19c37399"  # treebank.zip, SOURCE.md
    assert all(e["upstream"]["sha256"] == zip_pin for e in ptb)
    ml = [e for e in REGISTRY["datasets"]["marvin-linzen"]["files"] if e["path"].endswith(".json")]
    assert len(ml) == 22 and all(e["upstream"]["convert"] == "pickle-json" for e in ml)


def test_second_run_only_verifies(prepared_data_dir: Path, shared_data: Path) -> None:
    manifest = (prepared_data_dir / MANIFEST_FILE).read_text()
    staged = prepared_data_dir / PRONOUNS_CONLLU
    mtime = staged.stat().st_mtime_ns
    reports = prepare(prepared_data_dir, source=shared_data)
    assert all(not r.staged and not r.restaged and not r.problems for r in reports)
    assert sum(len(r.verified) for r in reports) == sum(
        len(s["files"]) for s in REGISTRY["datasets"].values()
    )
    assert staged.stat().st_mtime_ns == mtime
    assert (prepared_data_dir / MANIFEST_FILE).read_text() == manifest


# -- corruption ----------------------------------------------------------------------------------------
def test_corrupted_local_file_is_reported_and_not_staged(
    shared_data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source, data_dir = tmp_path / "copy", tmp_path / "data"
    corrupted = copy_pronouns(shared_data, source)
    blob = bytearray(corrupted.read_bytes())
    blob[100] ^= 0xFF
    corrupted.chmod(0o644)
    corrupted.write_bytes(bytes(blob))

    code = main(["prepare", "--from", str(source), "--data-dir", str(data_dir), "--only", "ud-pronouns"])
    err = capsys.readouterr().err.splitlines()
    assert code == 2
    assert err == [line for line in err if line.startswith(f"synbench: error: {corrupted}: sha256 mismatch")]
    assert len(err) == 1
    assert not (data_dir / PRONOUNS_CONLLU).exists()
    assert (data_dir / "ud/UD_English-Pronouns/LICENSE.txt").is_file()  # the good files are staged
    manifest = json.loads((data_dir / MANIFEST_FILE).read_text())["datasets"]["ud-pronouns"]
    assert manifest["complete"] is False and PRONOUNS_CONLLU not in manifest["files"]
    with pytest.raises(InputError, match="not prepared"):
        load_corpus("ud-pronouns", data_dir)


def test_corrupted_staged_file_is_staged_again(shared_data: Path, tmp_path: Path) -> None:
    prepare(tmp_path, source=shared_data, only=["ud-pronouns"])
    staged = tmp_path / PRONOUNS_CONLLU
    good = staged.read_bytes()
    staged.write_bytes(good.replace(b"PRON", b"NOUN", 1))
    [report] = prepare(tmp_path, source=shared_data, only=["ud-pronouns"])
    assert report.restaged == [PRONOUNS_CONLLU] and not report.problems
    assert staged.read_bytes() == good


def test_corrupted_staged_file_without_good_source_is_removed(shared_data: Path, tmp_path: Path) -> None:
    source, data_dir = tmp_path / "copy", tmp_path / "data"
    conllu = copy_pronouns(shared_data, source)
    prepare(data_dir, source=source, only=["ud-pronouns"])
    conllu.unlink()
    (data_dir / PRONOUNS_CONLLU).write_text("corrupted\n")
    [report] = prepare(data_dir, source=source, only=["ud-pronouns"])
    assert [str(p) for p in report.problems] == [
        f"{conllu}: file missing from the local copy; not staged",
        f"{data_dir / PRONOUNS_CONLLU}: staged file was corrupted; removed",
    ]
    assert not (data_dir / PRONOUNS_CONLLU).exists()


def test_missing_source_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"no such directory \(--from\)"):
        prepare(tmp_path / "data", source=tmp_path / "nowhere")


def test_unknown_dataset(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="unknown dataset 'ptb'"):
        prepare(tmp_path, source=tmp_path, only=["ptb"])


# -- downloads -----------------------------------------------------------------------------------------
def test_download_from_mirror_with_the_real_pins(
    shared_data: Path, tmp_path: Path, http_server: tuple[Path, str]
) -> None:
    www, url = http_server
    mirror_pronouns(shared_data, www)
    [report] = prepare(tmp_path / "data", mirror=url, only=["ud-pronouns"])
    assert sorted(report.staged) == sorted(e["path"] for e in PRONOUNS) and not report.problems
    assert len(load_corpus("ud-pronouns", tmp_path / "data").sentences("test")) == 285
    files = json.loads((tmp_path / "data" / MANIFEST_FILE).read_text())["datasets"]["ud-pronouns"]["files"]
    assert files[PRONOUNS_CONLLU]["source"].startswith(f"{url}/UniversalDependencies/UD_English-Pronouns/")


def test_download_checksum_mismatch_and_http_error(
    shared_data: Path, tmp_path: Path, http_server: tuple[Path, str]
) -> None:
    www, url = http_server
    mirror_pronouns(shared_data, www)
    by_path = {e["path"]: e for e in PRONOUNS}
    served = www / by_path[PRONOUNS_CONLLU]["upstream"]["url"]
    served.write_bytes(served.read_bytes().replace(b"PRON", b"NOUN", 1))
    (www / by_path["ud/UD_English-Pronouns/stats.xml"]["upstream"]["url"]).unlink()
    [report] = prepare(tmp_path, mirror=url, only=["ud-pronouns"])
    problems = {p.location: p.message for p in report.problems}
    assert problems[f"{url}/{by_path[PRONOUNS_CONLLU]['upstream']['url']}"].startswith("sha256 mismatch")
    stats_url = f"{url}/{by_path['ud/UD_English-Pronouns/stats.xml']['upstream']['url']}"
    assert problems[stats_url].startswith("download failed: HTTP 404")
    assert sorted(report.staged) == ["ud/UD_English-Pronouns/LICENSE.txt", "ud/UD_English-Pronouns/README.md"]
    assert not (tmp_path / PRONOUNS_CONLLU).exists()


def test_cli_uses_synbench_mirror(
    shared_data: Path, tmp_path: Path, http_server: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    www, url = http_server
    mirror_pronouns(shared_data, www)
    monkeypatch.setenv("SYNBENCH_MIRROR", url)
    assert main(["prepare", "--data-dir", str(tmp_path), "--only", "ud-pronouns"]) == 0
    assert (tmp_path / PRONOUNS_CONLLU).is_file()


def test_unreachable_server_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["prepare", "--data-dir", str(tmp_path), "--only", "ud-pronouns", "--mirror", "http://127.0.0.1:9"]
    )
    err = capsys.readouterr().err.splitlines()
    assert code == 2 and len(err) == 1
    assert (
        err[0].startswith("synbench: error: http://127.0.0.1:9/UniversalDependencies/") and "--from" in err[0]
    )


class _Exploit:
    def __reduce__(self):
        return (open, ("/nonexistent/exploit-marker", "w"))


def test_zip_members_and_restricted_pickles(tmp_path: Path, http_server: tuple[Path, str]) -> None:
    """Custom registry: zip members, a plain pickle staged as JSON, a pickle that would call a function."""
    www, url = http_server
    members = {"corpus/a.mrg": b"(S (NN a))\n", "corpus/b.mrg": b"(S (NN b))\n"}
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as z:
        for name, data in members.items():
            z.writestr(name, data)
    (www / "corpus.zip").write_bytes(archive.getvalue())
    templates = {"sing": [("the author laughs", "the author laugh")]}
    (www / "plain.pickle").write_bytes(pickle.dumps(templates, protocol=2))
    (www / "evil.pickle").write_bytes(pickle.dumps({"x": _Exploit()}))
    as_json = json.dumps({"sing": [["the author laughs", "the author laugh"]]}, indent=0).encode()

    def file(path: str, data: bytes, upstream: dict) -> dict:
        return {
            "path": path,
            "sha256": sha(data),
            "local": {"path": path, "sha256": sha(data)},
            "upstream": upstream,
        }

    def remote(name: str, **extra: str) -> dict:
        return {"url": name, "sha256": sha((www / name).read_bytes()), **extra}

    registry = {
        "format": 1,
        "base_url": "unused",
        "datasets": {
            "toy": {
                "title": "t",
                "licence": "l",
                "files": [
                    file("toy/a.mrg", members["corpus/a.mrg"], remote("corpus.zip", member="corpus/a.mrg")),
                    file("toy/b.mrg", members["corpus/b.mrg"], remote("corpus.zip", member="corpus/b.mrg")),
                    file("toy/missing.mrg", b"", remote("corpus.zip", member="corpus/missing.mrg")),
                    file("toy/plain.json", as_json, remote("plain.pickle", convert="pickle-json")),
                    file("toy/evil.json", b"{}", remote("evil.pickle", convert="pickle-json")),
                ],
            }
        },
    }
    [report] = prepare(tmp_path / "data", mirror=url, registry=registry)
    assert report.staged == ["toy/a.mrg", "toy/b.mrg", "toy/plain.json"]
    assert (tmp_path / "data/toy/plain.json").read_bytes() == as_json
    assert [(p.location, p.message.split(" (")[0]) for p in report.problems] == [
        (f"{url}/corpus.zip#corpus/missing.mrg", "member missing from the archive; not staged"),
        (f"{url}/evil.pickle", "not a plain-data pickle"),
    ]
    assert "refusing to load" in report.problems[1].message and not (tmp_path / "data/toy/evil.json").exists()


# -- licensed treebanks --------------------------------------------------------------------------------
def test_register_treebank_file_and_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data_dir = tmp_path / "data"
    trees = tmp_path / "mine.txt"
    trees.write_text("(TOP (S (NP (PRP I)) (VP (VBP see))))\n(TOP (S (NP (PRP You)) (VP (VBP go))))\n")
    assert main(["prepare", "--data-dir", str(data_dir), "--treebank", f"my-ptb={trees}"]) == 0
    assert "registered constituency treebank 'my-ptb' (file 2 sentences)" in capsys.readouterr().out
    assert len(load_corpus("my-ptb", data_dir).sentences("file")) == 2

    folder = tmp_path / "splits"
    folder.mkdir()
    for split, n in (("train", 2), ("valid", 1), ("test", 1)):
        (folder / f"ptb.{split}.txt").write_text("(S (NP (NN x)) (VP (VBZ y)))\n" * n)
    name, entry = register_treebank(data_dir, f"full-ptb={folder}")
    assert entry["sentences"] == {"train": 2, "valid": 1, "test": 1} and entry["kind"] == "constituency"
    assert set(registered_treebanks(data_dir)) == {"my-ptb", "full-ptb"}
    assert list(load_corpus("full-ptb", data_dir).splits) == ["train", "valid", "test"]


def test_register_treebank_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text("(S (NP (NN x)) (VP (VBZ y)))\n(S (NP (NN x)\n")
    assert main(["prepare", "--data-dir", str(tmp_path), "--treebank", f"mine={bad}"]) == 2
    assert capsys.readouterr().err == f"synbench: error: {bad}:2: unbalanced brackets: '(' is never closed\n"
    assert not registered_treebanks(tmp_path)
    for spec, message in (
        (f"ptb-sample={bad}", "is a built-in corpus or dataset"),
        (f"blimp={bad}", "is a built-in corpus or dataset"),
        (f"../x={bad}", "bad treebank name"),
        ("mine", "expects NAME=PATH"),
        (f"mine={tmp_path / 'none.txt'}", "no such file or directory"),
    ):
        with pytest.raises(InputError, match=message):
            register_treebank(tmp_path, spec)
