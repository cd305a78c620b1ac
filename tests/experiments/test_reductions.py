"""What a smaller-scale spec reduces from its ``compare_to`` full protocol, for the shipped reproductions."""

from experiments.experiment_spec import load_spec
from experiments.reductions import reduced_settings


def test_reduced_settings_of_the_shipped_tg_scales():
    demo = reduced_settings(load_spec("reproduce-tg-demo"))
    assert demo[0] == "2 seeds per model (full protocol: 100)"
    assert any("probing:" in line and "layers [1, 2]" in line for line in demo)
    assert reduced_settings(load_spec("reproduce-tg-paper")) == []
    assert reduced_settings(load_spec("reproduce-tg-cpu-small"), seeds="0-4")[0].startswith("5 seeds")


def test_reduced_settings_of_the_pushdown_demo():
    lines = reduced_settings(load_spec("reproduce-pushdown-demo"))
    assert lines[0] == "2 seeds per model (full protocol: 5)"
    assert any(line.startswith("pushdown: data.corpus ptb-sample (full protocol: bllip-lg)") and
               "model.n_layers 2 (full protocol: 16)" in line for line in lines)
    assert "evaluation sg: items_per_suite 1 (full protocol: all), beam 4 (full protocol: 300)" in lines
