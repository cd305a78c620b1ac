"""The ``hf`` family's settings, ``hf_convention`` and ``word_prob``: declared by its method, given by
``--hf-convention`` / ``--word-prob`` or a spec's source entry, refused elsewhere (the parity of each convention:
``test_hf_conventions.py``, ``test_word_prob.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from experiments.cli import main
from experiments.evaluation_plan import Planner
from experiments.experiment_runs import experiment_runs
from experiments.experiment_spec import load_spec
from experiments.families import get_family
from experiments.families.hf import CONVENTIONS
from lightning_modules.errors import InputError


def test_the_method_declares_the_convention_minicons_by_default():
    (method,) = get_family("hf").methods()
    assert CONVENTIONS == ("minicons", "lm-eval")
    assert method.name == "exact" and method.resolve() == {"hf_convention": "minicons", "word_prob": "sum-pieces"}
    assert method.resolve({"hf_convention": "lm-eval", "beam": 3}) == {"hf_convention": "lm-eval",
                                                                         "word_prob": "sum-pieces"}


def test_the_flag_is_for_hf_sources_only(capsys, tmp_path):
    for model in (tmp_path / "run" / "best.ckpt", tmp_path / "ngram.json"):
        code = main(["eval", "ppl", str(model), "--hf-convention", "lm-eval", "--corpus", "ptb-sample"])
        err = capsys.readouterr().err
        assert code == 2 and err == "synbench: error: --hf-convention: applies to hf: models only\n"
    assert main(["eval", "blimp", f"hf:{tmp_path}", "--hf-convention", "jiant"]) == 2
    assert "--hf-convention: invalid choice: 'jiant' (choose from 'minicons', 'lm-eval')" in capsys.readouterr().err


def _spec(tmp_path: Path, models: list[dict]) -> Path:
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump({"models": models, "seeds": 0, "evaluations": ["ppl", "blimp"]}, sort_keys=False))
    return path


def test_a_spec_source_entry_sets_the_convention_of_every_eval_of_it(tmp_path):
    spec = load_spec(_spec(tmp_path, [{"source": "hf:models/gpt2", "name": "gpt2-lm-eval", "hf_convention": "lm-eval"},
                                      {"source": "hf:models/gpt2", "name": "gpt2"},
                                      {"source": "hf:models/gpt2", "name": "gpt2-corrected",
                                       "word_prob": "corrected"}]))
    runs = experiment_runs(spec)
    configs = {r.model: r.config for r in runs}
    assert configs["gpt2-lm-eval"]["hf_convention"] == "lm-eval" and "hf_convention" not in configs["gpt2"]
    assert len({r.run_id for r in runs}) == 3  # three runs of one source: the settings are in the run's config
    for task in Planner(spec, runs, tmp_path / "runs", python="py").eval_tasks():
        argv = list(task.argv)
        assert argv[5] == "hf:models/gpt2"
        if "gpt2-lm-eval" in task.label:
            assert argv[argv.index("--hf-convention") + 1] == "lm-eval"
        else:
            assert "--hf-convention" not in argv  # the method's default: minicons
        if "gpt2-corrected" in task.label:
            assert argv[argv.index("--word-prob") + 1] == "corrected"
        else:
            assert "--word-prob" not in argv  # the method's default: sum-pieces


def test_a_bad_convention_in_a_spec_names_its_line(tmp_path):
    path = _spec(tmp_path, [{"source": "hf:models/gpt2", "hf_convention": "jiant"}])
    with pytest.raises(InputError, match=r"models\[0\]\.hf_convention: expected minicons or lm-eval, got 'jiant'") as e:
        load_spec(path)
    assert e.value.location == f"{path}:3"
    path = _spec(tmp_path, [{"source": "hf:models/gpt2", "word_prob": "exact"}])
    with pytest.raises(InputError, match=r"models\[0\]\.word_prob: expected sum-pieces or corrected, got 'exact'"):
        load_spec(path)
    path = _spec(tmp_path, [{"family": "tg", "hf_convention": "lm-eval"}])
    with pytest.raises(InputError, match=r"models\[0\]\.hf_convention: unknown key"):
        load_spec(path)
