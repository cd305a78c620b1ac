"""What the ``synbench eval TASK`` sub-commands share: the ``--limit`` option, running an evaluation the
model's family runs itself (its ``evaluations`` part: ``terminals``, ``dyck``, ``uas-rerank``), and how a result
is printed (JSON or text on stdout, what was computed now versus cached on stderr). Each task's own module adds
its sub-command (``add_command``); the registry (``experiments.evaluate.tasks``) names it and
``experiments.commands.eval`` asks the registry.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from experiments.cli_options import positive_int


def add_limit_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=positive_int, metavar="K", help="evaluate the first K sentences only")


def family_evaluation(need: str, options: Mapping[str, Any]) -> tuple[dict[str, Any], int, int]:
    """(result, items computed now, items) of the evaluation serving ``need`` (a capability) that the family of
    the checkpoint ``options["checkpoint"]`` runs itself, with the sub-command's options as plain values."""
    adapter, _ = checked_family(need, options["checkpoint"], options.get("device", "cpu"))
    return adapter.evaluate(need, dict(options))


def checked_family(need: str, checkpoint: str | Path, device: str) -> tuple[Any, dict[str, Any]]:
    """The family adapter and metadata of ``checkpoint``, after checking the device, that the file is there and
    that a run of its config offers ``need`` (the capability a task needs)."""
    from experiments.cli_options import checked_device
    from experiments.families import checkpoint_family
    from lightning_modules.errors import InputError

    checked_device(device)
    if not Path(checkpoint).is_file():
        raise InputError("model file not found", str(checkpoint))
    adapter, meta = checkpoint_family(checkpoint)
    if need not in adapter.capabilities(meta["config"]):
        raise InputError(f"a {adapter.name} checkpoint of this config has no {need} evaluation", str(checkpoint))
    return adapter, meta


def print_result(as_json: bool, result: dict, computed: int, total: int, report: Callable[[dict], str]) -> int:
    """The result on stdout (JSON, or ``report(result)``); what was computed now versus cached on stderr."""
    if as_json:
        json.dump(result, sys.stdout, sort_keys=True)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(report(result))
    print(f"synbench: computed {computed} of {total} items ({total - computed} cached) -> {result['out']}",
          file=sys.stderr)
    return 0


def bracket_report(result: dict, names: tuple[str, ...]) -> str:
    """One EVALB line per scored parse set of ``names`` (those present), then the headline."""
    rows = []
    for name in names:
        m = result["metrics"][name]
        if m is not None:
            a = m["all"]
            rows.append(f"{name:15} F1 {a['bracket_f1']}  recall {a['bracket_recall']}  "
                        f"precision {a['bracket_precision']}  (len<=40 F1 {m['len40']['bracket_f1']})")
    return "\n".join(rows + [result["headline"]]) + "\n"
