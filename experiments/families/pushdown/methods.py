"""The Pushdown family's scoring methods and their defaults, the paper's protocol, declared once.

The adapter offers them; the beam scorer, the Dyck evaluation, the CLI's help and experiment specs read these
defaults.
"""

from __future__ import annotations

from experiments.families.adapter import Method

# beam 300 over attachment decisions: §4.2 ("We fix the beam size at 300", BLiMP and SG) and §5 (parsing); the
# official eval_beam's BeamSearchDepthBased(300). The only default: the scorer, the CLI and experiment specs read it.
BEAM = Method("beam", {"beam": 300})
# the beam of the Dyck evaluation (§4.1): the official eval_dyck.py's, 50 (the paper does not state it)
DYCK_BEAM = 50
GOLD = Method("gold", trees="constituency")  # log p(x, y_gold): the value the beam's bound is set beside
