"""``hf:ORG/NAME@REV``: a tiny GPT-2 laid out as huggingface_hub's cache lays out a download, read offline."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from experiments.cli import main
from experiments.evaluate.cache import run_dir_of
from experiments.evaluate.results import file_sha256
from experiments.evaluate.scorers import hf, hub
from experiments.experiment_spec import parse_spec
from lightning_modules.errors import InputError
from tests.experiments.evaluate.test_hf_scorer import build_tiny_gpt2

REPO = "synbench-tests/tiny-gpt2"
MAIN, OTHER = "a" * 40, "b" * 40  # commit hashes
SENTENCES = [["The", "dog", "barked", "."], ["Pierre", "Vinken", "will", "join", "the", "board", "."]]


def add_snapshot(cache: Path, repo: str, commit: str, files: Path, refs: tuple[str, ...]) -> None:
    """``files`` as a download of ``repo`` at ``commit`` into the hub cache ``cache``: each file a blob named by
    its hash, the snapshot's entries relative links to the blobs, and each ref a file holding the commit."""
    storage = cache / ("models--" + repo.replace("/", "--"))
    snapshot = storage / "snapshots" / commit
    (storage / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True)
    for path in sorted(files.iterdir()):
        blob = storage / "blobs" / hashlib.sha256(path.read_bytes()).hexdigest()
        blob.write_bytes(path.read_bytes())
        (snapshot / path.name).symlink_to(Path("..", "..", "blobs", blob.name))
    for ref in refs:
        (storage / "refs" / ref).parent.mkdir(parents=True, exist_ok=True)
        (storage / "refs" / ref).write_text(commit)  # as the hub writes it: no newline


@pytest.fixture(scope="module")
def folders(shared_data: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The model as ``save_pretrained`` wrote it, a second version (other weights), and a cache holding both
    (``main`` -> the first, the branch ``other`` -> the second)."""
    root = tmp_path_factory.mktemp("hub")
    first = build_tiny_gpt2(root / "first", shared_data)
    from transformers import GPT2LMHeadModel

    second = root / "second"
    model = GPT2LMHeadModel.from_pretrained(first, local_files_only=True)
    with torch.no_grad():
        model.lm_head.weight.mul_(2.0)
    model.save_pretrained(second)
    for path in first.iterdir():
        if path.name.startswith("tokenizer") or path.name in ("vocab.json", "merges.txt", "special_tokens_map.json"):
            (second / path.name).write_bytes(path.read_bytes())
    add_snapshot(root / "cache", REPO, MAIN, first, ("main",))
    add_snapshot(root / "cache", REPO, OTHER, second, ("other",))
    return {"first": first, "second": second, "cache": root / "cache"}


@pytest.fixture
def cache(folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HF_HUB_CACHE", str(folders["cache"]))
    return folders["cache"]


def logprobs(scorer: hf.HFScorer) -> list[tuple[float, ...]]:
    return [s.word_logprobs for s in scorer.score(SENTENCES)]


def test_a_cached_hub_model_scores_as_its_folder_and_records_its_commit(folders: dict[str, Path], cache: Path):
    from huggingface_hub import try_to_load_from_cache

    # the layout is huggingface_hub's own: its reader finds the files where the scorer read them
    found = Path(try_to_load_from_cache(REPO, "config.json", cache_dir=cache, revision="main"))
    assert found.parent == cache / f"models--{REPO.replace('/', '--')}" / "snapshots" / MAIN
    local = hf.load(f"hf:{folders['first']}")
    for source in (f"hf:{REPO}", f"hf:{REPO}@main", f"hf:{REPO}@{MAIN}"):
        scorer = hf.load(source)
        assert scorer.folder == found.parent and logprobs(scorer) == logprobs(local)
        identity = scorer.identity()
        assert identity["hub"] == {"repo": REPO, "revision": source.partition("@")[2] or "main", "commit": MAIN}
        assert identity["files"] == local.identity()["files"]
        assert identity["files"]["model.safetensors"] == file_sha256(folders["first"] / "model.safetensors")
        assert scorer.name == f"hf:{REPO}@{MAIN}" and scorer.description().endswith(f", {REPO}@{MAIN[:12]}")
    assert "hub" not in local.identity()
    other = hf.load(f"hf:{REPO}@other")
    assert other.identity()["hub"]["commit"] == OTHER
    assert logprobs(other) == logprobs(hf.load(f"hf:{folders['second']}")) != logprobs(local)


def test_an_evaluation_records_the_commit_and_file_hashes(capsys: pytest.CaptureFixture, cache: Path,
                                                          tmp_path: Path, prepared_data_dir: Path):
    out = tmp_path / "ppl"
    assert main(["eval", "ppl", f"hf:{REPO}@other", "--corpus", "ptb-sample", "--split", "test", "--limit", "2",
                 "--out", str(out), "--data-dir", str(prepared_data_dir), "--json"]) == 0
    capsys.readouterr()
    record = json.loads((out / "results.json").read_text())
    assert record["config"]["hub"] == {"repo": REPO, "revision": "other", "commit": OTHER}
    assert set(record["config"]["files"]) >= {"config.json", "model.safetensors", "tokenizer.json"}
    assert record["settings"]["source"] == f"hf:{REPO}@other"


def test_a_model_not_in_the_cache_is_one_error_line(capsys: pytest.CaptureFixture, cache: Path, tmp_path: Path):
    text = tmp_path / "text.txt"
    text.write_text("The dog barked .\n")
    for source, download in ((f"hf:{REPO}@v2", f"huggingface-cli download {REPO} --revision v2"),
                             ("hf:nobody/nothing", "huggingface-cli download nobody/nothing`")):
        assert main(["surprisals", source, str(text), "--out", str(tmp_path / "s.tsv")]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"synbench: error: {source}: not in the local Hugging Face cache (HF_HUB_CACHE={cache}")
        assert download in err and err.count("\n") == 1
    assert not (tmp_path / "s.tsv").exists()


def test_folders_win_and_only_org_name_is_a_hub_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(tmp_path)
    assert hub.hub_model("hf:org/name@v1.0") == hub.HubModel("org/name", "v1.0")
    assert hub.hub_model("hf:org/name").revision == "main" and hub.hub_model("hf:org/name").source == "hf:org/name"
    assert hub.hub_model("hf:org/name@refs/pr/3") == hub.HubModel("org/name", "refs/pr/3")
    for folder in ("gpt2", "a/b/c", "org/na--me", "./org/name", "org/name@"):
        assert hub.hub_model(f"hf:{folder}") is None
    (tmp_path / "org" / "name").mkdir(parents=True)  # an existing path is a folder, whatever it looks like
    assert hub.hub_model("hf:org/name") is None
    with pytest.raises(InputError, match="org/name: not a transformers model folder"):
        hf.load("hf:org/name")
    # results of a Hub model go under the runs folder, never into the shared cache
    monkeypatch.setenv("SYNBENCH_RUNS", str(tmp_path / "runs"))
    assert run_dir_of("hf:org/other@v1") == tmp_path / "runs" / "hub" / "org--other"


def test_a_spec_model_from_the_hub_is_labelled_by_name_and_revision(tmp_path: Path):
    spec = parse_spec({"models": [{"source": "hf:org/tiny-lm@v1.0"}, {"source": "hf:org/tiny-lm"}], "seeds": 1},
                      tmp_path / "spec.yaml")
    assert [(m.name, m.source) for m in spec.models] == [("hf-tiny-lm-v1.0", "hf:org/tiny-lm@v1.0"),
                                                        ("hf-tiny-lm", "hf:org/tiny-lm")]

