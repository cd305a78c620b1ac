"""``synbench eval TASK ...``: the evaluation protocol, one sub-command per registered task.

``ppl``, ``sg``, ``blimp`` and ``rerank`` score a model (a checkpoint of any family, an n-gram JSON or
``hf:DIR``) through the Scorer protocol and write ``results.json`` + ``items.jsonl`` into ``--out`` (default
``RUN_DIR/eval/TASK-HASH``); a re-run computes only the items missing there. ``parse`` scores the model's
own parses against the gold trees as its family shapes them. ``terminals`` writes the per-terminal
log-probabilities on gold trees that TG §4.2's regressions compare, ``dyck`` the closing-bracket accuracy of a
Dyck run (Pushdown Layers §4.1); the model's family evaluates both. ``sg --surprisals FILE`` scores SyntaxGym
from a file of region surprisals; ``uas`` compares two CoNLL-U files. The tasks and what each needs of a
model: ``experiments.evaluate.tasks``. Each task's own module adds its sub-command (``add_command``: the
evaluators in ``experiments/evaluate/``, a family's own tasks in its family folder); this command only asks the
registry.

Tasks from data files: ``pairs FILE.jsonl MODEL...`` scores any file of minimal pairs as BLiMP's, ``sg --suites
DIR`` any folder of SyntaxGym suites; ``marvin-linzen`` scores the Marvin & Linzen (2018) constructions.
"""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    from experiments.evaluate.tasks import tasks as registered_tasks

    p = subparsers.add_parser("eval", help="evaluate: perplexity, SyntaxGym, BLiMP, reranking, parsing, UAS, Dyck",
                              description=__doc__)
    subparsers = p.add_subparsers(dest="task", required=True, metavar="TASK")
    for task in registered_tasks():
        task.add_command(subparsers)
