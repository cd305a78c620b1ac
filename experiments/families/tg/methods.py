"""The TG family's scoring methods and their defaults, the paper's protocol, declared once.

The adapter offers them, and the beam classes, the CLI's help and experiment specs read these defaults.
"""

from __future__ import annotations

from experiments.families.adapter import Method

N = 300  # TG §3.1: N = 300 proposal trees per sentence, sampled without replacement from the proposal parser
PAPER_NOTE = f"paper: {N} proposals"
# The paper marginalises over proposals only; the family's word-synchronous beam takes the published search of a
# TG-style model, the official DTG beam (beam_search_standard.py: action beam 100, word beam 10, <= 15 actions
# between words), with every completion kept (fast_track None). With proposals it pools its trees with N of
# them. These are the only defaults: the beam classes, the CLI and experiment specs read them.
BEAM = Method("beam", {"beam": 100, "word_beam": 10, "max_actions": 15, "fast_track": None, "n": N},
              trees="constituency")
PROPOSALS = Method("proposals", {"n": N}, trees="constituency")
GOLD = Method("gold", trees="constituency")
