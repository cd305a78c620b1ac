"""MDL probing of trained checkpoints (TG §4.3): the code-length table (``mdl.csv``) from checkpoints, trees.

For every model, representation, task, layer and probe (each once): the features of the probing training and
dev trees (``analysis.features``, cached), the task's targets (``analysis.probing_tasks``), and the online
code length of the training labels (``analysis.mdl``, blocks over sentences, bits). Representations: ``word``
for ``pos``; for the constituent tasks ``compose`` and ``stack`` (TG), ``closing`` (TXL trees) and
``first+last`` (TXL terminals). The same ``seed`` shuffles and initialises every row, so a row does not depend
on which other rows were computed.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis.mdl import BITS, PAPER_FRACTIONS, online_code
from analysis.probes import PROBE_KINDS, ProbeSettings
from analysis.probing_tasks import NODE_KIND, TASKS, TaskSettings, build_tasks
from lightning_modules.data.tree import Tree, clean
from lightning_modules.errors import InputError

COLUMNS = ("model", "representation", "task", "layer", "probe", "n", "n_classes", "uniform_bits",
           "online_bits", "compression", "dev_accuracy")


def run_probing(models: Mapping[str, str | Path], train_trees: Sequence[Tree], dev_trees: Sequence[Tree],
                tasks: Sequence[str] = TASKS, layers: Sequence[int] | None = None,
                probes: Sequence[str] = PROBE_KINDS, *, task_settings: TaskSettings | None = None,
                probe_settings: ProbeSettings | None = None, fractions: Sequence[float] = PAPER_FRACTIONS,
                cache_dir: str | Path | None = None, seed: int = 0, batch_size: int = 32,
                progress: bool | None = None) -> Any:
    """The MDL table (pandas DataFrame with ``COLUMNS``) of ``models`` = {label: checkpoint path}.

    ``layers`` None probes every layer (0 = embeddings .. n_layers). ``progress`` None shows a progress bar
    when stderr is a terminal. The settings and per-task counts are in ``frame.attrs["probing"]``.
    """
    import pandas as pd

    from analysis.features import extract_features

    if not models:
        raise InputError("no models to probe", "models")
    for kind in probes:
        if kind not in PROBE_KINDS:
            raise InputError(f"unknown probe {kind!r} (expected one of {', '.join(PROBE_KINDS)})", "probes")
    probe_settings = (probe_settings or ProbeSettings()).validate()
    task_settings = (task_settings or TaskSettings()).validate()
    train_trees = [clean(t) for t in train_trees]
    dev_trees = [clean(t) for t in dev_trees]
    if not train_trees or not dev_trees:
        raise InputError("probing needs training and dev trees", "trees")
    data = build_tasks(train_trees, dev_trees, tasks, task_settings)
    rows: list[dict[str, Any]] = []
    with _Progress(progress) as bar:
        for label, checkpoint in models.items():
            bar.describe(f"{label}: features")
            train = extract_features(checkpoint, train_trees, layers, cache_dir, batch_size)
            dev = extract_features(checkpoint, dev_trees, layers, cache_dir, batch_size)
            jobs = [(task, rep, layer, kind) for task in tasks
                    for rep in train.representations(NODE_KIND[task])
                    for layer in train.layers for kind in probes]
            bar.add(len(jobs))
            for task, rep, layer, kind in jobs:
                bar.describe(f"{label} {rep} {task} layer {layer} {kind}")
                tr, dv = data[task]
                result = online_code(
                    train.matrix(rep, layer, tr.sentence, tr.node), tr.labels, tr.n_classes,
                    dev.matrix(rep, layer, dv.sentence, dv.node), dv.labels, groups=tr.sentence,
                    fractions=tuple(fractions), kind=kind, seed=seed, settings=probe_settings)
                rows.append({"model": label, "representation": rep, "task": task, "layer": layer,
                             "probe": kind, "n": result.n, "n_classes": result.n_classes,
                             "uniform_bits": result.uniform_bits, "online_bits": result.online_bits,
                             "compression": result.compression, "dev_accuracy": result.dev_accuracy})
                bar.advance()
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame.attrs["probing"] = {
        "units": BITS, "fractions": list(fractions), "seed": seed, "probe": probe_settings.to_dict(),
        "tasks": {"top_k": task_settings.top_k, "word_content_k": task_settings.word_content_k,
                  "word_content_start": task_settings.word_content_start},
        "counts": {task: {"train": len(tr), "dev": len(dv), "n_classes": tr.n_classes,
                          "dev_dropped": dv.dropped} for task, (tr, dv) in data.items()},
        "train_sentences": len(train_trees), "dev_sentences": len(dev_trees),
    }
    return frame


class _Progress:
    """A rich progress bar on stderr when wanted (default: stderr is a terminal), else nothing."""

    def __init__(self, enabled: bool | None):
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self.bar: Any = None
        self.task: Any = None

    def __enter__(self) -> _Progress:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("probing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("{task.description}"), console=Console(stderr=True))
            self.bar.__enter__()
            self.task = self.bar.add_task("", total=0)
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def describe(self, text: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=text)

    def add(self, n: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, total=self.bar.tasks[0].total + n)

    def advance(self) -> None:
        if self.bar is not None:
            self.bar.advance(self.task)
