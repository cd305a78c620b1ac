"""``synbench import FAMILY CHECKPOINT``, end to end for every family with an importer, from the official golden
files under ``tests/golden/`` (the per-token parity of each is in its family's ``test_*_official.py``; the
Pushdown family's, through this command, in ``test_pushdown_official.py``): the
run folder records the sha256 of every source file, loads with the family's one loader and ``synbench eval ppl``
scores it; the command never names a
family (the registry's ``importing`` parts), and a family without an importer is one error line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from experiments.cli import main
from experiments.families import get_family, names
from lightning_modules.data.checksums import file_sha256

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
# family: (checkpoint, --vocab, --tokenizer, eval ppl arguments)
PTB = ["--corpus", "ptb-sample", "--split", "train", "--limit", "2"]
CASES = {
    "tg": ("tg/tg.pkl", "tg/dictionary.txt", None, [*PTB, "--method", "gold"]),
    "txl-trees": ("tg/txl-trees.npz", "tg/dictionary.txt", None, [*PTB, "--method", "gold"]),
    "txl-terminals": ("tg/txl-terminals.npz", "tg/terminals.txt", None, PTB),
    "dtg": ("dtg/dtg.pt", None, "dtg/spm.model", ["--corpus", "ud-ewt", "--split", "dev", "--limit", "2",
                                                   "--method", "gold"]),
    "txl-trans": ("dtg/txl-trans.pt", None, "dtg/spm.model", ["--corpus", "ud-ewt", "--split", "dev", "--limit",
                                                             "2", "--method", "gold"]),
    "palm-u": ("palm/palm-u/state_dict.pt", "palm/vocab.txt", None, PTB),
    "palm-s": ("palm/palm-s/state_dict.pt", "palm/vocab.txt", None, PTB),
    "awd-lstm": ("palm/awd-lstm/state_dict.pt", "palm/vocab.txt", None, PTB),
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_an_imported_run_loads_and_is_evaluated(family, tmp_path, capsys):
    checkpoint, vocab, tokenizer, eval_args = CASES[family]
    out = tmp_path / "run"
    argv = ["import", family, str(GOLDEN / checkpoint), "--out", str(out)]
    argv += ["--vocab", str(GOLDEN / vocab)] if vocab else []
    argv += ["--tokenizer", str(GOLDEN / tokenizer)] if tokenizer else []
    assert main(argv) == 0, capsys.readouterr().err
    done = json.loads((out / "DONE").read_text())
    assert done["family"] == family and done["imported"]["official"] == get_family(family).importing().official
    sources = {"checkpoint": checkpoint, "vocab": vocab, "tokenizer": tokenizer}
    assert done["imported"]["files"] == {name: file_sha256(GOLDEN / path) for name, path in sources.items() if path}
    best = out / "checkpoints" / "best.ckpt"
    get_family(family).load(best)
    capsys.readouterr()
    assert main(["eval", "ppl", str(best), *eval_args, "--json"]) == 0, capsys.readouterr().err
    result = json.loads(capsys.readouterr().out)
    assert math.isfinite(result["metrics"]["word_ppl"]) and result["metrics"]["word_ppl"] > 1


def test_a_family_without_an_importer_is_one_error_line(tmp_path, capsys):
    without = [name for name in names() if get_family(name).importing() is None]
    assert without  # e.g. the proposal parsers
    assert main(["import", without[0], str(tmp_path / "x.pt"), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("synbench: error: ") and "has no importer" in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()
