"""The report's setup section: the experiment, its models, every setting reduced from the full protocol, the
analyses the pipeline skipped and its notes.

The reduced settings (``settings.json["reduced"]``, ``experiments.reductions``: one line per model listing its
``KEY VALUE (full protocol: VALUE)`` differences, one per evaluation entry with its models, then the seeds,
probing and regressions) become one table, a row per (setting, value, full protocol's value) with the models
that share it, so a setting every model reduces the same way is one row, not one per model; the other lines
(and any that does not read as such pairs) stay as written.
"""

from __future__ import annotations

import re

from analysis.report import formatting as fmt
from analysis.report.blocks import Block, Bullets, Heading, Paragraph, Table
from analysis.report.figure_block import skipped_reasons
from analysis.report.headline_section import context
from analysis.report.sources import Sources
from experiments.papers import model_order

_SETTING = re.compile(r"([\w.\-]+) (.+?) \(full protocol: (.*?)\)(?:, |$)")
_EVALUATION = re.compile(r"evaluation (\S+)(?: \((.+)\))?")
EVERY_MODEL = "every model"
MODEL_FACTS = ("family", "level", "parameters")  # a model's columns in the setup, where settings.json has them


def _settings_of(line: str) -> list[tuple[str, str, str]] | None:
    """``[(key, ours, full), ...]`` of a model's line's rest (``KEY VALUE (full protocol: VALUE), ...``), or None
    when it does not read as such pairs."""
    found, at = [], 0
    for match in _SETTING.finditer(line):
        if match.start() != at:
            return None
        found.append((match[1], match[2], match[3]))
        at = match.end()
    return found if found and at == len(line) else None


def _line(line: str, labels: list[str]) -> tuple[str, list[str] | None, list[tuple[str, str, str]]] | None:
    """(setting prefix, its models or None for every model, its pairs) of a model's or an evaluation's line of
    reduced settings, or None for any other line."""
    label, _, rest = line.partition(": ")
    evaluation = _EVALUATION.fullmatch(label)
    if label in labels:
        prefix, models = "", [label]
    elif evaluation:
        prefix = f"eval {evaluation[1]}: "
        models = evaluation[2].split(", ") if evaluation[2] else None
    else:
        return None
    pairs = _settings_of(rest)
    return None if pairs is None else (prefix, models, pairs)


def reduced_settings(lines: list[str], labels: list[str]) -> list[Block]:
    """The reduced settings: the models' and evaluations' as one table (``setting, here, full protocol,
    models``), the other lines as bullets."""
    rows: dict[tuple[str, str, str], list[str | None]] = {}
    others = []
    for line in lines:
        parsed = _line(line, labels)
        if parsed is None:
            others.append(line)
            continue
        prefix, models, pairs = parsed
        for key, ours, full in pairs:
            rows.setdefault((prefix + key, ours, full), []).extend(models or [None])
    blocks: list[Block] = [Bullets(others)] if others else []
    if rows:
        body = [[key, ours, full, _models(models, set(labels))] for (key, ours, full), models in rows.items()]
        blocks += [Paragraph("Settings that differ from the full protocol, with the models they apply to:"),
                   Table(["setting", "here", "full protocol", "models"], body)]
    return blocks or [Paragraph("None recorded.")]


def _models(models: list[str | None], universe: set[str]) -> str:
    """The models of ``universe`` (the experiment's) a setting row applies to: ``every model`` (None among them:
    an evaluation of every model), ``every model but A, B`` when fewer are left out than named, else the
    models, in the papers' order."""
    named = set(models) - {None}
    if None in models or named >= universe:
        return EVERY_MODEL
    left_out = universe - named
    if len(universe) > 2 and len(left_out) < len(named):
        return f"{EVERY_MODEL} but {', '.join(model_order(left_out))}"
    return ", ".join(model_order(named))


def setup(sources: Sources) -> list[Block]:
    """The experiment's facts, its models, the reduced settings, skipped analyses and notes."""
    heading = Heading("Setup: scale, seeds, data, models and every reduced setting")
    if "settings" in sources.problems:
        return [heading, Paragraph(f"settings: {sources.problems['settings']}.")]
    settings = sources.settings
    facts = [f"experiment: {settings.get('experiment', sources.analysis_dir.parent.name)}",
             f"scale: {settings.get('scale', 'unknown')}", *context(settings)]
    if settings.get("description"):
        facts.insert(1, f"description: {settings['description']}")
    if "created" in settings:
        facts.append(f"created: {settings['created']}")
    models = {label: info if isinstance(info, dict) else {} for label, info in (settings.get("models") or {}).items()}
    labels = model_order(models)
    blocks: list[Block] = [heading, Bullets(facts)]
    if labels:
        columns = [key for key in MODEL_FACTS if any(key in info for info in models.values())]
        rows = [[label, *(fmt.readable(models[label].get(key, "")) for key in columns)] for label in labels]
        blocks.append(Table(["model", *columns], rows))
    blocks += [Heading("Reduced settings (vs the paper)", 3),
               *reduced_settings([str(r) for r in settings.get("reduced") or []], labels)]
    skipped = skipped_reasons(sources)
    if skipped:
        blocks += [Heading("Skipped analyses", 3), Bullets([f"{k}: {v}" for k, v in skipped.items()])]
    notes = settings.get("notes")
    if isinstance(notes, list) and notes:
        blocks += [Heading("Notes", 3), Bullets([str(n) for n in notes])]
    return blocks
