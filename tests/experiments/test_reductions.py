"""What a smaller-scale spec reduces from its ``compare_to`` full protocol, for the shipped reproductions."""

from experiments.experiment_spec import load_spec
from experiments.reductions import reduced_settings


def test_reduced_settings_of_the_shipped_tg_scales():
    demo = reduced_settings(load_spec("reproduce-tg-demo"))
    assert demo[0] == "2 seeds per model (full protocol: 100)"
    assert any("probing:" in line and "layers [1, 2]" in line for line in demo)
    assert reduced_settings(load_spec("reproduce-tg-paper")) == []
    cpu = reduced_settings(load_spec("reproduce-tg-cpu-small"), seeds="0-4")
    assert cpu[0].startswith("5 seeds")
    # what an absent setting of the full protocol does: proposals (it names a parser), whose method reads no
    # beam, and N = 300, the default of the families' proposals method
    assert ("evaluation ppl (tg, txl-trees, txl-terminals): limit 100 (full protocol: all), method beam (full "
            "protocol: proposals), beam 20 (full protocol: not used), word_beam 5 (full protocol: not used), "
            "max_actions 8 (full protocol: not used), n 10 (full protocol: 300)") in cpu
    # a second way of scoring one task is an addition, not a reduction of the full protocol's entry
    assert ("evaluation ppl@gold (tg, txl-trees): not in the full protocol (added: split test, limit 100, "
            "method gold)") in cpu


def test_a_reduction_from_a_default_is_stated_against_the_papers_value():
    """The DTG paper spec leaves Pushdown-LM's beam to its method: 300, the paper's; cpu-small states its 20."""
    lines = reduced_settings(load_spec("reproduce-dtg-cpu-small"))
    assert any(line.startswith("evaluation sg (txl-tokens, tg, pushdown): beam 20 (full protocol: 300)")
               for line in lines)


def test_reduced_settings_of_the_pushdown_demo():
    lines = reduced_settings(load_spec("reproduce-pushdown-demo"))
    assert lines[0] == "2 seeds per model (full protocol: 5)"
    assert any(line.startswith("pushdown: data.corpus ptb-sample (full protocol: bllip-lg)") and
               "model.n_layers 2 (full protocol: 16)" in line for line in lines)
    assert "evaluation sg: items_per_suite 1 (full protocol: all), beam 4 (full protocol: 300)" in lines


def test_reduced_settings_of_the_som_scales():
    lines = reduced_settings(load_spec("reproduce-som-demo"))
    assert lines[0] == "2 seeds per model (full protocol: 3)"
    # the full protocol's models a smaller scale does not train
    assert {"model esom-no-lm-loss: not trained", "model esom-ptb-trees: not trained",
            "model dsom-ptb-trees: not trained"} <= set(lines)
    assert any(line.startswith("dsom: data.corpus ptb-sample-ud (full protocol: ptb-ud)")
               and "model.d_sem 16 (full protocol: 300)" in line and "model.n_slots 12 (full protocol: 15)" in line
               for line in lines)
    # labelled entries are compared with the full protocol's entry of the same label
    assert "evaluation ppl@gum (dsom, dsom-left-branching): limit 5 (full protocol: all)" in lines
    assert "evaluation ppl@ewt: not run" in lines
    assert ("evaluation parse@ptb-trees (dsom): corpus ptb-sample (full protocol: ptb), limit 10 (full protocol: "
            "all)") in lines
    assert reduced_settings(load_spec("reproduce-som-paper")) == []
    cpu = reduced_settings(load_spec("reproduce-som-cpu-small"))
    assert "evaluation ppl@pud (esom, dsom, dsom-left-branching): limit 100 (full protocol: all)" in cpu


def test_the_compare_demo_states_its_marvin_linzen_subset():
    """Marvin & Linzen in the comparison: all cases at paper scale, one per construction in the demo (a reduction)."""
    lines = reduced_settings(load_spec("reproduce-compare-demo"))
    assert ("evaluation marvin-linzen (txl-terminals, base-lm, awd-lstm, palm-u, palm-s, palm-rb, esom, dsom, "
            "hf-scratch): pairs_per_construction 1 (full protocol: all)") in lines
    assert ("evaluation marvin-linzen (tg, txl-trees): pairs_per_construction 1 (full protocol: all), n 4 (full "
            "protocol: 300)") in lines
    assert not any("marvin-linzen" in line for line in reduced_settings(load_spec("reproduce-compare-paper")))
