"""results.json / items.jsonl writing."""

from __future__ import annotations

import json
from pathlib import Path

from experiments.evaluate.results import canonical_hash, write_results
from lightning_modules.data.checksums import file_sha256


def test_write_results(tmp_path: Path) -> None:
    data = tmp_path / "data.txt"
    data.write_text("hello\n")
    items = [{"uid": "a", "correct": True}, {"uid": "b", "correct": False}]
    path = write_results(tmp_path / "out", "blimp", {"accuracy": 0.75}, "pair correct iff ...",
                         {"pairs_per_paradigm": 100}, items, config={"model": "tg", "seed": 1},
                         data={"blimp": data})
    record = json.loads(path.read_text())
    assert record["metrics"] == {"accuracy": 0.75} and record["settings"] == {"pairs_per_paradigm": 100}
    assert record["n_items"] == 2 and record["config_hash"] == canonical_hash({"seed": 1, "model": "tg"})
    sha256_of_hello = "5891b5b522d5df086d0ff0b110fbd9d21bb4fc7163af34d08286a2e846f6be03"
    assert record["data"]["blimp"]["sha256"] == sha256_of_hello
    assert record["versions"]["python"] and "torch" in record["versions"]
    lines = (tmp_path / "out" / "items.jsonl").read_text().splitlines()
    assert [json.loads(line)["uid"] for line in lines] == ["a", "b"]
    assert not [p for p in (tmp_path / "out").iterdir() if p.name.startswith(".")]  # no temporary files left


def test_folder_checksum_depends_on_names_and_contents(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x").write_text("1")
    first = file_sha256(tmp_path / "a")
    (tmp_path / "a" / "x").write_text("2")
    assert file_sha256(tmp_path / "a") != first
