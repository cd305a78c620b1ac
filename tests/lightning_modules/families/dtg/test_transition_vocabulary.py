"""The transition vocabulary comes from the training split only (DTG issue 26, item 4): an arc-swift reach seen
only in validation gets no token (it would have an untrained embedding), and the validation sentences that need
it are left out and counted."""

from __future__ import annotations

from pathlib import Path

from lightning_modules.families.dtg import data as dtg_data

ROW = "{i}\t{w}\t_\t_\t_\t_\t{h}\t_\t_\t_\n"


def conllu(words: str, heads: tuple[int, ...]) -> str:
    return "".join(ROW.format(i=i, w=w, h=h) for i, (w, h) in enumerate(zip(words.split(), heads), 1)) + "\n"


def test_a_reach_seen_only_in_validation_gets_no_token(tmp_path: Path) -> None:
    near = conllu("dogs bark loudly", (2, 0, 2))  # swift: left_arc[1] right_arc[1] right_arc[1]
    far = conllu("cats dogs chase", (3, 1, 0))  # swift: right_arc[1] left_arc[2] right_arc[1]
    (tmp_path / "tiny-train.conllu").write_text(near * 2)
    (tmp_path / "tiny-dev.conllu").write_text(near + far)
    cfg = {"data": {"corpus": str(tmp_path), "train_split": "train", "valid_split": "dev", "min_count": 1},
           "model": {"system": "swift", "segment_length": 32, "arc_input": "w+arc"}, "runtime": {"data_dir": None}}
    data = dtg_data.build("dtg", cfg)
    transitions = data.vocab["actions"]["closing"]
    assert "left_arc[1]" in transitions and "left_arc[2]" not in transitions
    assert data.stats["valid_unknown_transitions"] == 1 and len(data.valid) == 1
