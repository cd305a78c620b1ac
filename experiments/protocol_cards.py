"""Protocol cards: what a paper's protocol is, setting by setting, with the source of every value.

A card is data (``experiments/papers/cards/KEY.yaml``, owned by the paper registered as KEY): for the models
of the paper's paper-scale spec, each training and evaluation setting with the paper's value and where the
paper (section, table) or its official code (file and line) states it. Where our spec deliberately differs
(e.g. fewer seeds, our own proposal parser), the line states ``ours`` and ``why``::

    spec: reproduce-tg-paper
    settings:
      - {models: [tg, txl-trees], setting: model.n_layers, paper: 16, source: "TG §3, Experimental Details"}
      - {models: [tg], setting: seeds, paper: 100, ours: 3, source: "TG §3", why: "GPU time"}

A model's setting is a dotted key of its resolved config (``model.d_model``, ``train.max_steps``) or
``seeds`` (how many); an evaluation's is ``eval.TASK.OPTION`` (``eval.sg@label.beam``) and resolves as the
evaluation runs it: the entry's value, else the default its family's method declares, else ``all`` for a
subset size. ``synbench reproduce PAPER --scale paper --protocol`` prints every line as
``MODEL SETTING VALUE (paper: VALUE, SOURCE)``; ``check`` lists every line the spec does not match, so a
spec cannot drift from its card silently.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from experiments.evaluate import tasks
from experiments.evaluate.inference_dtype import INFERENCE_DTYPES
from experiments.evaluation_plan import evaluations, method_options, reads_proposals, scoring_method
from experiments.experiment_runs import experiment_runs
from experiments.experiment_spec import ExperimentSpec, load_spec
from experiments.reductions import config_settings, first_runs
from lightning_modules.errors import InputError

CARDS_DIR = Path(__file__).parent / "papers" / "cards"
LINE_KEYS = ("models", "setting", "paper", "source", "ours", "why")
# entry options that are not settings of the protocol (which models, the entry's name)
NOT_SETTINGS = ("name", "models", "label")
# the settings whose default a family's method declares: a card states each one the spec's evaluations use
METHOD_DEFAULTS = ("n", "beam", "word_beam", "max_actions", "fast_track", "pop_root")
SUBSETS = ("limit", "items_per_suite", "suites", "pairs_per_paradigm", "paradigms", "sets", "size")


@dataclass(frozen=True)
class CardLine:
    """One setting of some models: the paper's value and its source; ``ours`` where the spec differs."""

    models: tuple[str, ...]
    setting: str
    paper: Any
    source: str
    ours: Any = None
    why: str | None = None

    @property
    def expected(self) -> Any:
        """The value the spec must resolve to: the paper's, or ours where the card states a deviation."""
        return self.paper if self.why is None else self.ours


@dataclass(frozen=True)
class Card:
    paper: str
    spec: str
    lines: tuple[CardLine, ...]


def card_path(paper: str) -> Path:
    return CARDS_DIR / f"{paper}.yaml"


def has_card(paper: str) -> bool:
    return card_path(paper).is_file()


def load_card(paper: str) -> Card:
    """The card of the paper registered as ``paper``; a malformed card names its file."""
    path = card_path(paper)
    if not path.is_file():
        raise InputError(f"paper {paper!r} has no protocol card ({path.name})", "--protocol")
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict) or not isinstance(data.get("spec"), str) or not isinstance(data.get("settings"),
                                                                                               list):
        raise InputError("expected a mapping with 'spec' and a list 'settings'", str(path))
    from experiments.experiment_spec import family_entry_files

    # the lines of the models the families ship for the spec (their file's ``card``: ``family_entries``)
    sources = [(path, "settings", data["settings"])]
    for file in family_entry_files(data["spec"]):
        shipped = (yaml.safe_load(file.read_text(encoding="utf-8")) or {}).get("card", [])
        if not isinstance(shipped, list):
            raise InputError("card: expected a list of card lines", str(file))
        sources.append((file, "card", shipped))
    lines = []
    for path, key, i, entry in ((p, k, i, e) for p, k, entries in sources for i, e in enumerate(entries)):
        where = f"{path}: {key}[{i}]"
        if not isinstance(entry, dict) or set(entry) - set(LINE_KEYS) or not {"models", "setting", "paper",
                                                                               "source"} <= set(entry):
            raise InputError(f"expected models, setting, paper, source (and ours with why), got {entry!r}", where)
        if ("ours" in entry) != ("why" in entry):
            raise InputError("'ours' and 'why' go together: a deviation says why", where)
        models = entry["models"]
        if not isinstance(models, list) or not models or not all(isinstance(m, str) for m in models):
            raise InputError(f"models: expected a list of model labels, got {models!r}", where)
        lines.append(CardLine(tuple(models), str(entry["setting"]), entry["paper"], str(entry["source"]),
                              entry.get("ours"), entry.get("why")))
    return Card(paper, data["spec"], tuple(lines))


def resolved_settings(spec: ExperimentSpec) -> dict[str, dict[str, Any]]:
    """Every setting of every model of ``spec`` as it runs: model label -> setting -> value (``seeds``, the
    dotted keys of its resolved config, and ``eval.TASK.OPTION`` of each evaluation that applies to it)."""
    runs = first_runs(spec)
    counts: dict[str, int] = {}
    for run in experiment_runs(spec, None):
        counts[run.model] = counts.get(run.model, 0) + 1
    out = {label: {"seeds": counts[label], **config_settings(run.config)} for label, run in runs.items()}
    for entry in evaluations(spec):
        prefix = f"eval.{tasks.labelled(entry.name, entry.options.get('label'))}."
        task = entry.task
        for label, run in runs.items():
            if not entry.applies_to(run):
                continue
            # scoring options as the method reads them, below (a task that scores nothing, Dyck, owns its beam)
            settings = {k: v for k, v in entry.options.items() if k not in NOT_SETTINGS
                        and (k not in tasks.SCORING_OPTIONS or (k == "beam" and not task.scored))}
            if task.default_split is not None:
                settings.setdefault("split", task.default_split)
            for key in SUBSETS:
                if key in task.options:
                    settings.setdefault(key, "all")
            method = scoring_method(entry, run)
            if method is not None:  # the scoring settings as the method reads them (none a string model ignores)
                settings["method"] = method
                if reads_proposals(entry, run):
                    settings["proposals"] = entry.options["proposals"]
                settings.update(method_options(entry, run))
            if "inference_dtype" in task.options:  # recorded as every result records it, the default included
                settings.setdefault("inference_dtype", INFERENCE_DTYPES[0])
            out[label].update({prefix + k: v for k, v in settings.items()})
    return out


def card_lines(card: Card, spec: ExperimentSpec) -> list[str]:
    """The printed card: ``MODEL SETTING VALUE (paper: VALUE, SOURCE)`` per model and setting, in the spec's
    model order, with the resolved value (a deviation's reason after the source)."""
    resolved = resolved_settings(spec)
    out = []
    for model in resolved:
        for line in card.lines:
            if model not in line.models:
                continue
            value = resolved[model].get(line.setting, "unset")
            why = f"; ours: {line.why}" if line.why else ""
            out.append(f"{model} {line.setting} {_show(value)} (paper: {_show(line.paper)}, {line.source}{why})")
    return out


def check(card: Card, spec: ExperimentSpec) -> list[str]:
    """Every way ``spec`` disagrees with ``card``: a card model the spec lacks, a setting it resolves to another
    value, an evaluation setting with a declared default (N, beams, action limit, fast-track, pop_root) or a spec
    model the card omits."""
    resolved = resolved_settings(spec)
    problems = []
    covered: dict[str, set[str]] = {model: set() for model in resolved}
    for line in card.lines:
        for model in line.models:
            if model not in resolved:
                problems.append(f"{line.setting}: the card names model {model!r}, which {spec.name} does not have")
                continue
            covered[model].add(line.setting)
            value = resolved[model].get(line.setting, "unset")
            if value != line.expected:
                problems.append(f"{model} {line.setting}: {spec.name} resolves to {_show(value)}, the card says "
                                f"{_show(line.expected)} ({line.source})")
    for model, settings in resolved.items():
        if not covered[model]:
            problems.append(f"{model}: on no line of the card")
        for key in settings:
            if key.startswith("eval.") and key.rsplit(".", 1)[1] in METHOD_DEFAULTS and key not in covered[model]:
                problems.append(f"{model} {key}: a scoring setting the card does not state")
    return problems


def protocol_card(paper: str, spec: ExperimentSpec) -> str:
    """``synbench reproduce PAPER --scale S --protocol``: the card's lines for ``spec`` (the card's own spec or
    a smaller scale of it, whose values then show what it reduces), after a header naming both."""
    card = load_card(paper)
    header = f"protocol card of {paper} ({card_path(paper).name}): {spec.name}"
    if spec.name != card.spec:
        header += f" (the card describes {card.spec}; values here are this spec's)"
    return "\n".join([header, *card_lines(card, spec)]) + "\n"


def paper_spec(paper: str) -> ExperimentSpec:
    return load_spec(load_card(paper).spec)


def _show(value: Any) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return "none" if value is None else str(value)


PAGE = Path(__file__).resolve().parents[1] / "docs" / "protocol-cards.md"


def page() -> str:
    """``docs/protocol-cards.md``: every registered paper's card as a table (the value every model of the line
    takes in the paper-scale spec, checked against it by the tests; the page is generated from the cards)."""
    from experiments import papers

    out = ["# Protocol cards", "",
           "Generated from `experiments/papers/cards/*.yaml` by `python -m experiments.protocol_cards` (a test "
           "fails when this page is out of date). One card per paper: each setting of its paper-scale spec with "
           "the paper's value and where the paper or its official code states it; `ours` marks a deliberate "
           "difference, with the reason. `synbench reproduce PAPER --scale S --protocol` prints the card with "
           "the values of any scale (the smaller scales' values show what they reduce).", ""]
    for paper in papers.papers():
        if not has_card(paper.key):
            continue
        card = load_card(paper.key)
        out += [f"## {paper.key}: {paper.citation}", "", f"Spec `{card.spec}`.", "",
                "| models | setting | ours | paper | source |", "|---|---|---|---|---|"]
        for line in card.lines:
            ours = _show(line.expected) + (f" ({line.why})" if line.why else "")
            out.append(f"| {', '.join(line.models)} | `{line.setting}` | {_cell(ours)} | {_cell(_show(line.paper))} "
                       f"| {_cell(line.source)} |")
        out.append("")
    return "\n".join(out)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


if __name__ == "__main__":
    PAGE.parent.mkdir(exist_ok=True)
    PAGE.write_text(page(), encoding="utf-8")
    print(PAGE)
