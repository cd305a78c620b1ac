"""The CAG family's scoring methods and their defaults, declared once (the adapter, the beam class, the CLI's
help and experiment specs read them)."""

from __future__ import annotations

from experiments.families.adapter import Method

# the official README's beam_search.py command: --beam_size 100 --word_beam_size 10 --shift_size 5
BEAM = Method("beam", {"beam": 100, "word_beam": 10, "fast_track": 5})
PROPOSALS = Method("proposals", {"n": 300}, trees="constituency")  # the harness's N (TG §3.1)
GOLD = Method("gold", trees="constituency")
