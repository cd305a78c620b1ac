"""The ``evaluations:`` of an experiment spec as commands: proposal trees first, then one eval per (task, run).

An entry names a task and its protocol settings::

    evaluations:
      - {name: ppl, split: test, proposals: parser, n: 10}     # perplexity (bound for joint models)
      - {name: ppl, split: test, method: beam, beam: 20, word_beam: 5, proposals: parser, n: 10, label: union}
      - {name: sg, proposals: parser, n: 10, items_per_suite: 4}
      - {name: blimp, proposals: parser, n: 10, pairs_per_paradigm: 2}
      - {name: marvin-linzen, pairs_per_construction: 2}       # Marvin & Linzen (2018), per construction
      - {name: pairs, file: my-pairs.jsonl, group_by: [UID]}    # any minimal pairs, BLiMP's format
      - {name: sg, suites: my-suites/, label: mine}             # any folder of SyntaxGym suites
      - {name: rerank, split: test, proposals: parser, n: 10}  # joint sentence-level models
      - {name: terminals, split: valid}                          # per-terminal log-probs (TG §4.2)
      - {name: dyck, sets: [long-50, depth], size: 20, beam: 5}  # runs on the Dyck corpus (Pushdown §4.1)
      - {name: parse, split: test, beam: 8}                      # the models' own parses (Pushdown §5)

A task (``experiments.evaluate.tasks``) applies to a run when the run's family offers the capability it needs
(the family adapter's ``capabilities(config)``), so no family is named here; the task declares its options
and builds its ``eval`` arguments. Options: ``models`` (labels; default every
model the task applies to), ``corpus`` (default the run's ``data.corpus``), ``split``, ``limit`` (first K
sentences), ``method`` (one of the family's methods; default ``proposals`` when ``proposals`` is given and the
family is marginalised over proposals, else the family's default; ``method: beam`` with ``proposals``: the
union of the beam's trees and the proposals, for families whose beam pools them, the tightest bound of the
three), ``proposals`` (the label of a
model of the spec whose family has the ``propose`` capability: its first seed's best checkpoint draws the
trees once per sentence
set, shared by every evaluated run), ``n``, ``beam``, ``word_beam``, ``max_actions``, ``fast_track`` (passed
when the method reads them; unset, the method's own default applies, ``adapter.Method``; a source model's
``hf_convention`` comes from its model entry, i.e. its run config),
``inference_dtype`` (``float32``, the default, or ``bfloat16``: ``evaluate/inference_dtype.py``),
``items_per_suite``, ``suites`` (names, or a folder of any suites), ``pairs_per_paradigm``, ``paradigms``,
``pairs_per_construction``, ``constructions``; for ``pairs``: ``file`` and ``group_by`` (a data file or folder is
planned with its sha256, so a changed one is evaluated again); for ``dyck``: ``sets`` (default all),
``size``, ``seed`` (of the test sets) and ``beam`` (families with a beam). ``label`` tells apart several entries
of one task (e.g. ``{name: ppl, corpus: ud-gum, split: test, label: gum}``): they write ``RUN/eval/NAME@LABEL/``
and their metrics are named ``METRIC@LABEL`` (``ppl@gum``); two entries of a task for the same model need
different labels.

Each eval writes to ``RUN/eval/NAME/`` (``results.json`` marks it done; the item cache resumes it), and each
proposal set to ``EXPERIMENT/proposals/``. With ``--checkpoints all`` each checkpoint a run kept over training
(``train.keep_every``: ``checkpoints/step-NNNNNN.ckpt``) is evaluated too, into ``RUN/steps/step-NNNNNN/eval/NAME/``,
with the same proposal sets. Nothing here runs anything: ``stages.py`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.evaluate import inference_dtype, tasks
from experiments.evaluate.tasks import PlanInput, Task
from experiments.experiment_runs import experiment_dir, folder_of
from experiments.experiment_spec import NAME, ExperimentSpec, Run
from experiments.runs import CHECKPOINTS, kept_checkpoint, kept_checkpoints, kept_name, step_folder
from lightning_modules.errors import InputError

POSITIVE = ("limit", "n", "beam", "word_beam", "max_actions", "items_per_suite", "pairs_per_paradigm",
            "pairs_per_construction", "size")


MACHINE_OPTIONS = ("--device", "--data-dir")  # where a command runs, not what it computes


@dataclass(frozen=True)
class StageTask:
    """A command and where its output lives: ``done`` exists once it succeeded. The command that made it is
    recorded beside it (``command_file``), so a changed command (another proposal set, beam, N) is a task to
    run again, not a done one."""

    key: str  # unique, names the log file
    folder: Path  # the task's own folder (markers of the executor go there)
    argv: tuple[str, ...]
    done: Path
    label: str  # for progress displays
    needs: tuple[Path, ...] = ()  # files that must exist before it can run (checkpoint, proposals)

    def ready(self) -> bool:
        return all(p.is_file() for p in self.needs)

    @property
    def command(self) -> str:
        """The command as it decides the output: the interpreter and the machine's options left out."""
        kept, skip = [], False
        for arg in self.argv[1:]:
            if not skip and arg not in MACHINE_OPTIONS:
                kept.append(arg)
            skip = not skip and arg in MACHINE_OPTIONS
        return "\0".join(kept)

    @property
    def command_file(self) -> Path:
        return self.done.with_name(f".{self.done.name}.command")

    def is_done(self) -> bool:
        """``done`` exists and was made by this command (an output without its record counts as stale)."""
        try:
            return self.done.exists() and self.command_file.read_text(encoding="utf-8") == self.command
        except OSError:
            return False


@dataclass(frozen=True)
class Evaluation:
    """One validated ``evaluations:`` entry."""

    name: str
    options: dict[str, Any]
    where: str

    @property
    def task(self) -> Task:
        return tasks.get(self.name)

    def applies_to(self, run: Run) -> bool:
        """Whether the run's family offers what the task needs (and the entry names the run's model)."""
        models = self.options.get("models")
        if models is not None and run.model not in models:
            return False
        return self.task.needs in family_of(run).capabilities(run.config)


def family_of(run: Run) -> Any:
    from experiments.families import get_family

    return get_family(run.family)


def scoring_method(entry: Evaluation, run: Run) -> str | None:
    """The method an eval of ``entry`` uses for ``run``: the task's own (proposals for a task that requires
    them, also one the family evaluates itself), the entry's, else proposals when it names a parser and the
    family is marginalised over proposals, else the family's default (None for tasks the family evaluates
    itself)."""
    task = entry.task
    if task.requires_proposals:
        return "proposals"
    if not task.scored:
        return None
    methods = [m.name for m in family_of(run).methods(run.config)]
    wanted = entry.options.get("method")
    if wanted in methods:
        return wanted
    if entry.options.get("proposals") and "proposals" in methods:
        return "proposals"
    return methods[0] if methods else None


def reads_proposals(entry: Evaluation, run: Run) -> bool:
    """Whether an eval of ``entry`` for ``run`` reads the entry's proposal trees: its method is ``proposals``,
    or one that pools its own trees with them (a beam over the union, where the family offers it)."""
    if entry.options.get("proposals") is None:
        return False
    method = scoring_method(entry, run)
    return method == "proposals" or (method is not None and family_of(run).method(method, run.config).reads_proposals)


def method_options(entry: Evaluation, run: Run) -> dict[str, Any]:
    """The options of the method an eval of ``entry`` uses for ``run``: the entry's, else the method's defaults
    (none for a task the family evaluates itself)."""
    method = scoring_method(entry, run)
    if method is None:
        return {}
    return family_of(run).method(method, run.config).resolve(entry.options)


def evaluations(spec: ExperimentSpec) -> list[Evaluation]:
    """The spec's evaluation entries, validated (unknown task or option, bad value, unknown model label)."""
    from experiments.families import get_family

    labels = {m.name: m for m in spec.models}
    out = []
    covered: dict[str, set[str] | None] = {}  # eval folder name -> the models its entries name (None: all)
    for i, entry in enumerate(spec.evaluations):
        where = spec.where("evaluations", i)
        name = entry["name"]
        if name not in tasks.names():
            raise InputError(f"evaluations[{i}]: unknown task {name!r} (known: {', '.join(tasks.names())})", where)
        task = tasks.get(name)
        if task.arguments is None:
            raise InputError(f"evaluations[{i}]: task {name} cannot run in an experiment: {task.unplanned}", where)
        for key, value in entry.items():
            if key not in task.options:
                raise InputError(f"evaluations[{i}].{key}: not an option of the {name} task (its options: "
                                 f"{', '.join(task.options)})", spec.where("evaluations", i, key))
            if key in POSITIVE and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise InputError(f"evaluations[{i}].{key}: expected a positive integer, got {value!r}",
                                 spec.where("evaluations", i, key))
            if key == "inference_dtype" and value not in inference_dtype.INFERENCE_DTYPES:
                raise InputError(f"evaluations[{i}].inference_dtype: expected "
                                 f"{' or '.join(inference_dtype.INFERENCE_DTYPES)}, got {value!r}",
                                 spec.where("evaluations", i, key))
            if key == "seed" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InputError(f"evaluations[{i}].seed: expected an integer >= 0, got {value!r}",
                                 spec.where("evaluations", i, key))
        label = entry.get("label")
        if label is not None and (not isinstance(label, str) or not NAME.fullmatch(label)):
            raise InputError(f"evaluations[{i}].label: expected a name of letters, digits and -_.+, got {label!r}",
                             spec.where("evaluations", i, "label"))
        folder, models = tasks.labelled(name, label), entry.get("models")
        if folder in covered:
            before = covered[folder]
            if before is None or models is None or before & set(models):
                raise InputError(f"evaluations[{i}]: a second {name} entry{' labelled ' + repr(label) if label else ''}"
                                 " for the same models: give each entry of a task its own label", where)
            covered[folder] = before | set(models)
        else:
            covered[folder] = None if models is None else set(models)
        problem = task.check(entry) if task.check else None
        if problem:
            raise InputError(f"evaluations[{i}].{problem}", where)
        for label in entry.get("models") or []:
            if label not in labels:
                raise InputError(f"evaluations[{i}].models: no model {label!r} in the spec", where)
        parser = entry.get("proposals")
        if parser is not None and (parser not in labels or
                                   "propose" not in get_family(labels[parser].family).capabilities()):
            raise InputError(f"evaluations[{i}].proposals: {parser!r} is not a proposal parser model of the spec "
                             "(a model whose family draws proposal trees)",
                             spec.where("evaluations", i, "proposals"))
        method = entry.get("method")
        if method is not None and method not in task.methods:
            raise InputError(f"evaluations[{i}].method: expected {' or '.join(task.methods)} for the {name} task",
                             where)
        if (method == "proposals" or task.requires_proposals) and parser is None:
            what = name if task.requires_proposals else "method proposals"
            raise InputError(f"evaluations[{i}]: {what} needs 'proposals: PARSER-MODEL'", where)
        out.append(Evaluation(name, dict(entry), where))
    return out


def parser_checkpoint(spec: ExperimentSpec, runs: list[Run], root: Path, label: str) -> tuple[Run, Path]:
    """The run and best checkpoint of the proposal parser model ``label`` (its first seed)."""
    run = next((r for r in runs if r.model == label), None)
    if run is None:
        raise InputError(f"the spec has no run of model {label!r}", spec.where("models"))
    return run, folder_of(root, run) / "checkpoints" / "best.ckpt"


class Planner:
    """Turns the spec's evaluations into proposal tasks and eval tasks for the runs under ``root``."""

    def __init__(self, spec: ExperimentSpec, runs: list[Run], root: Path, data_dir: str | None = None,
                 python: str = "python", device: str = "cpu", checkpoints: str = "best",
                 inference_dtype: str | None = None):
        self.spec, self.runs, self.root, self.data_dir, self.python = spec, runs, Path(root), data_dir, python
        self.device = device  # where every eval runs (a setting of the machine, not of the task's identity)
        # the inference dtype of entries that name none (None: theirs, float32); it changes numbers, so it is
        # in each eval's command, and a changed one runs the eval again
        self.inference_dtype = inference_dtype
        self.checkpoints = checkpoints  # EVALUATED_CHECKPOINTS: best, or all (also those kept over training)
        self.entries = evaluations(spec)
        self.exp = experiment_dir(self.root, spec)

    def _cli(self, *args: str) -> tuple[str, ...]:
        extra = ("--data-dir", str(self.data_dir)) if self.data_dir else ()
        return (self.python, "-m", "experiments.cli", *args, *extra)

    # -- proposals ------------------------------------------------------------------------------------------
    def _proposal_key(self, entry: Evaluation, run: Run | None) -> tuple[str, str, str]:
        """(set name, corpus, split) of the sentences ``entry`` evaluates (corpus/split empty for sg/blimp)."""
        task = entry.task
        if task.sentence_set is not None:
            return f"{entry.name}-{_slug(task.sentence_set(entry.options))}", "", ""
        corpus = entry.options.get("corpus") or (run.config["data"]["corpus"] if run else "")
        split = entry.options.get("split", task.default_split)
        return f"{_slug(str(corpus))}-{split}", str(corpus), split

    def proposal_file(self, entry: Evaluation, run: Run) -> Path:
        parser_run, _ = parser_checkpoint(self.spec, self.runs, self.root, entry.options["proposals"])
        name, _, _ = self._proposal_key(entry, run)
        return self.exp / "proposals" / parser_run.run_id / f"{name}-n{method_options(entry, run)['n']}.jsonl"

    def proposal_tasks(self) -> list[StageTask]:
        """One ``synbench propose`` per (parser, sentence set, N) that some evaluation needs."""
        tasks: dict[Path, StageTask] = {}
        for entry in self.entries:
            if entry.options.get("proposals") is None:
                continue
            for run in self.runs:
                if not entry.applies_to(run) or not reads_proposals(entry, run):
                    continue
                out = self.proposal_file(entry, run)
                if out in tasks:
                    continue
                _, checkpoint = parser_checkpoint(self.spec, self.runs, self.root, entry.options["proposals"])
                name, corpus, split = self._proposal_key(entry, run)
                n = str(method_options(entry, run)["n"])
                if corpus:
                    source = ("--corpus", corpus, "--split", split)
                    logq = ("--logq", str(out.with_suffix(".logq.jsonl")))
                else:
                    source = ("--sentences", str(out.with_suffix(".sentences.txt")))
                    logq = ()
                argv = self._cli("propose", str(checkpoint), *source, "-n", n, "--out", str(out), *logq)
                tasks[out] = StageTask(f"propose-{out.parent.name}-{out.stem}", out.parent / f".{out.stem}", argv,
                                       out, f"proposals {name} (N = {n})", (checkpoint,))
        return list(tasks.values())

    def sentence_files(self) -> dict[Path, list[list[str]]]:
        """The word lists the sg/blimp proposal tasks read (written by the caller before they run)."""
        files: dict[Path, list[list[str]]] = {}
        for entry in self.entries:
            if entry.task.sentences is None or entry.options.get("proposals") is None:
                continue
            run = next((r for r in self.runs if entry.applies_to(r) and reads_proposals(entry, r)), None)
            if run is None:
                continue
            path = self.proposal_file(entry, run).with_suffix(".sentences.txt")
            if path not in files:
                files[path] = entry.task.sentences(entry.options, self.data_dir)
        return files

    # -- evaluations ----------------------------------------------------------------------------------------
    def eval_tasks(self) -> list[StageTask]:
        """One eval per (entry, applicable run), writing ``RUN/eval/NAME`` (and per kept checkpoint, see
        ``run_tasks``)."""
        return [task for _, task in self.run_tasks()]

    def run_tasks(self) -> list[tuple[Run, StageTask]]:
        """Each eval with its run: per (entry, applicable run) the best checkpoint's, then, with ``checkpoints``
        ``all``, each checkpoint the run kept over training (``train.keep_every``), in step order, writing
        ``RUN/steps/step-NNNNNN/eval/NAME``."""
        out = []
        for entry in self.entries:
            for run in self.runs:
                if entry.applies_to(run):
                    kept = (kept_checkpoints(folder_of(self.root, run))
                            if self.checkpoints == "all" and not run.config.get("source") else {})
                    out += [(run, self._eval_task(entry, run, step)) for step in (None, *kept)]
        return out

    def _eval_task(self, entry: Evaluation, run: Run, step: int | None = None) -> StageTask:
        o, task = entry.options, entry.task
        folder = folder_of(self.root, run)
        name = tasks.labelled(entry.name, o.get("label"))
        out = (folder if step is None else step_folder(folder, step)) / "eval" / name
        source = run.config.get("source")  # a pretrained model (hf:DIR) is scored as it is
        checkpoint = source or folder / CHECKPOINTS / ("best.ckpt" if step is None else kept_checkpoint(step))
        needs = [] if source else [checkpoint]
        family = family_of(run)
        method = scoring_method(entry, run)
        proposals = self.proposal_file(entry, run) if reads_proposals(entry, run) else None
        plan = PlanInput(o, str(o.get("corpus") or run.config["data"]["corpus"]),
                         str(o.get("split", task.default_split or "")), proposals,
                         tuple(m.name for m in family.methods(run.config)))
        assert task.arguments is not None  # evaluations() refuses unplanned tasks
        args: list[str] = ["eval", entry.name, str(checkpoint), "--out", str(out), *task.arguments(plan)]
        if self.device != "cpu":
            args += ["--device", self.device]
        if method is not None:
            if task.takes_method:
                args += ["--method", method]
            options = family.method(method, run.config).options
            if proposals is not None:
                needs.append(proposals)
                args += ["--proposals", str(proposals), "-n", str(method_options(entry, run)["n"])]
            for key in options:  # the entry's, else the run config's (a source's ``hf_convention``)
                given = o if key in o else run.config
                if key in given and key != "n":
                    args += [f"--{key.replace('_', '-')}", str(given[key])]
        dtype = o.get("inference_dtype") or self.inference_dtype or inference_dtype.INFERENCE_DTYPES[0]
        if dtype != inference_dtype.INFERENCE_DTYPES[0] and "inference_dtype" in task.options:
            args += ["--inference-dtype", str(dtype)]
        at = "" if step is None else f"-{kept_name(step)}"
        return StageTask(f"{run.run_id}-{name}{at}", out, self._cli(*args), out / "results.json",
                         f"{name} {run.model} seed {run.seed}{at.replace('-', ' ', 1)}", tuple(needs))


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in text)[-60:]
