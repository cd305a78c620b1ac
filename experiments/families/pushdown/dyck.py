"""Dyck generalization (Murty et al. 2023, §4.1, Table 1): closing-bracket accuracy on the test sets.

The test sets are built deterministically from the checkpoint's data config and the evaluation seed
(``dyck_data.test_set``: ``long-50`` .. ``long-300``, ``depth``). For every prefix the model's next-token
distribution is computed (``base-lm``: exact; ``pushdown``: the marginal over the final beam of attachment
histories of the prefix, ``BeamScorer.next_token_logprobs``), and the prediction is its argmax over the
closing brackets (``dyck.closing_bracket_accuracy``, as the official ``eval_dyck.py``). Items are prefixes,
cached in ``items.jsonl`` by ``SET/k`` with the closing brackets' log-probabilities.
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from experiments.cli_options import add_device_argument, natural, positive_int
from experiments.evaluate.cache import ItemCache, Record, default_out_dir
from experiments.evaluate.results import write_results
from experiments.evaluate.subcommands import family_evaluation, print_result
from experiments.evaluate.tasks import COMMON_OPTIONS, PlanInput, Task, flag, register
from experiments.families.pushdown.methods import DYCK_BEAM
from lightning_modules.data.checksums import file_sha256
from lightning_modules.errors import InputError
from lightning_modules.families.pushdown import dyck  # not dyck_data here: the CLI must not import torch
from lightning_modules.numeric import is_number

EXACT = "base-lm: exact log p(w | prefix), one pass"
MARGINAL = ("pushdown: the beam's marginal next-token distribution, log p(w | prefix) = logsumexp over the "
            "final beam of attachment histories y of the prefix of [log p(prefix, y) + log p(w | prefix, y)] - "
            f"logsumexp of log p(prefix, y) (the official eval_dyck.py reads the top hypothesis's distribution, "
            f"beam {DYCK_BEAM})")
SILVER = ("pushdown with --tape silver: the prefix's silver tape (its gold attachments, as the official training "
          "callback evaluates), not inferred: isolates the next-token predictor from the attachment decisions; "
          "attachments: the head's teacher-forced accuracy along the silver path (legal attachments only), also "
          "beyond the longest training string (data.max_length), and the fraction of prefixes it gets all right")
ACCURACY = ("closing-bracket accuracy: argmax of the next-token distribution restricted to the closing "
            "brackets (first in vocabulary order on ties) equals the bracket that closes the prefix's top")


def evaluate(model_path: str | Path, sets: Sequence[str] | None = None, size: int | None = None,
             beam: int = DYCK_BEAM, seed: int = 0, out: str | Path | None = None, tape: str = "beam",
             device: str = "cpu") -> tuple[dict[str, Any], int]:
    """Score every prefix of the chosen sets (only those missing from the cache); accuracy per set.

    ``tape`` (pushdown only): ``beam`` infers the attachments (the model's own prediction, the protocol);
    ``silver`` gives the prefix's gold tape (an oracle diagnostic).
    """
    from experiments.families.pushdown.scorers import BeamScorer, ExactScorer, PushdownModel
    from lightning_modules.families.pushdown import dyck_data

    sets = list(dict.fromkeys(sets or dyck_data.TEST_SETS))
    unknown = [s for s in sets if s not in dyck_data.TEST_SETS]
    if unknown:
        raise InputError(f"unknown Dyck test set {unknown[0]!r} (known: {', '.join(dyck_data.TEST_SETS)})",
                         "--set")
    if size is not None and size < 1:
        raise InputError(f"must be positive, got {size}", "--size")
    if seed < 0:
        raise InputError(f"must be >= 0, got {seed}", "--seed")
    model = PushdownModel.load(str(model_path), device)
    data = model.config.get("data", {})
    if data.get("corpus") != "dyck":
        raise InputError(f"not a Dyck run (data.corpus = {data.get('corpus')!r})", str(model_path))
    examples = {name: dyck_data.test_set(data, name, size, seed) for name in sets}
    prefixes = {f"{name}/{k}": (p, t) for name, (ps, ts) in examples.items()
                for k, (p, t) in enumerate(zip(ps, ts, strict=True))}
    checksum = hashlib.sha256(json.dumps(sorted(prefixes.items())).encode("utf-8")).hexdigest()

    pushdown = model.family == "pushdown"
    if tape not in ("beam", "silver"):
        raise InputError(f"expected beam or silver, not {tape!r}", "--tape")
    if tape == "silver" and not pushdown:
        raise InputError("--tape silver applies to pushdown checkpoints (Base-LM reads no tape)", "--tape")
    scorer = (SilverTape(model) if tape == "silver" else BeamScorer(model, beam)) if pushdown else ExactScorer(model)
    closing = [dyck.close_bracket(n) for n in dyck.bracket_types(dyck_data.language(data)["bracket_types"])]
    closing_ids = [model.ids[t] for t in closing]
    how_tape = ({"tape": "silver"} if tape == "silver" else {"beam": beam}) if pushdown else {}
    settings = {"sets": sets, "size": size, "seed": seed, "family": model.family, "prefixes": len(prefixes),
                **how_tape}
    identity = {"task": "dyck", "model_sha256": file_sha256(model_path), "family": model.family, "sets": sets,
                "size": size, "seed": seed, "data_sha256": checksum, **how_tape}
    out_dir = Path(out) if out is not None else default_out_dir(model_path, "dyck", identity)

    def valid(r: Record) -> bool:
        prefix, target = prefixes[r["id"]]
        row = r["closing_logprobs"]
        errors = r.get("attachment_errors")
        return (r["target"] == target and r["prefix_length"] == len(prefix) and isinstance(row, list)
                and len(row) == len(closing) and all(is_number(x) for x in row)
                and (tape != "silver" or (isinstance(errors, list) and all(isinstance(k, int) for k in errors))))

    def compute(wanted: list[str]) -> list[Record]:
        batch = [prefixes[i][0] for i in wanted]
        if isinstance(scorer, SilverTape):
            rows, errors = zip(*scorer.score(batch))
        else:
            rows, errors = scorer.next_token_logprobs(batch), [None] * len(batch)
        records = []
        for i, row, wrong in zip(wanted, rows, errors, strict=True):
            prefix, target = prefixes[i]
            scores = [float(row[c]) for c in closing_ids]
            records.append({"id": i, "set": i.split("/")[0], "prefix_length": len(prefix), "target": target,
                            "closing_logprobs": scores, **({} if wrong is None else {"attachment_errors": wrong})})
        return records

    cache = ItemCache(out_dir, valid, identity)
    cache.fill(list(prefixes), compute, chunk=4 if pushdown else 32)
    records = cache.ordered(list(prefixes))
    items, accuracy, counts, lengths = [], {}, {}, {}
    for name in sets:
        mine = [r for r in records if r["set"] == name]
        rows = iter(dict(zip(closing, r["closing_logprobs"], strict=True)) for r in mine)
        targets = [r["target"] for r in mine]
        accuracy[name] = dyck.closing_bracket_accuracy(lambda batch, rows=rows: [next(rows) for _ in batch],
                                                       [prefixes[r["id"]][0] for r in mine], targets)
        counts[name] = len(mine)
        lengths[name] = sum(r["prefix_length"] for r in mine) / len(mine)
        for r in mine:
            predicted = closing[max(range(len(closing)), key=r["closing_logprobs"].__getitem__)]
            items.append({**r, "predicted": predicted, "correct": predicted == r["target"]})
    how = ("silver tape" if tape == "silver" else f"beam {beam} marginal") if pushdown else "exact"
    headline = (f"Dyck closing-bracket accuracy ({model.family}, {how}, seed {seed}): "
                + ", ".join(f"{name} {accuracy[name]:.3f} (n={counts[name]})" for name in sets))
    metrics = {"accuracy": accuracy, "prefixes": counts, "mean_prefix_length": lengths, "headline": headline}
    if tape == "silver" and pushdown:
        metrics["attachments"] = attachment_diagnostics(records, sets, int(data["max_length"]))
    convention = f"{ACCURACY}; {(SILVER if tape == 'silver' else MARGINAL) if pushdown else EXACT}"
    write_results(out_dir, "dyck", metrics, convention, settings, items, config=identity)
    result = {"metrics": metrics, "settings": settings, "convention": convention, "headline": headline,
              "out": str(out_dir)}
    return result, cache.computed


def attachment_diagnostics(records: Sequence[Record], sets: Sequence[str], trained_length: int
                           ) -> dict[str, dict[str, float | None]]:
    """Per set, from the silver-tape records: the attachment head's accuracy over all decisions, over the
    positions beyond the longest training string, and the fraction of prefixes with no wrong decision (what
    the beam's tape needs: one wrong attachment changes every later tape row)."""
    out = {}
    for name in sets:
        mine = [r for r in records if r["set"] == name]
        total = sum(r["prefix_length"] for r in mine)
        wrong = sum(len(r["attachment_errors"]) for r in mine)
        beyond = sum(max(r["prefix_length"] - trained_length, 0) for r in mine)
        wrong_beyond = sum(k > trained_length for r in mine for k in r["attachment_errors"])
        out[name] = {"accuracy": 1.0 - wrong / total,
                     "accuracy_beyond_training_length": 1.0 - wrong_beyond / beyond if beyond else None,
                     "prefixes_without_error": sum(not r["attachment_errors"] for r in mine) / len(mine)}
    return out


class SilverTape:
    """A Pushdown-LM reading each prefix with its silver tape (oracle attachments), in one training-path pass.

    Gives the next-token log-probs after the prefix and, as a diagnostic of the attachment head, the positions
    where the head (teacher-forced along the silver path, its prediction restricted to the legal attachments as
    in the beam) does not pick the silver attachment.
    """

    def __init__(self, model: Any):
        self.model = model

    def score(self, prefixes: Sequence[Sequence[str]]) -> list[tuple[Any, list[int]]]:
        """Per prefix: (log p(w | prefix) [V], 1-based token positions whose attachment the head gets wrong)."""
        import numpy as np
        import torch

        from lightning_modules.data.vocab import EOS
        from lightning_modules.families.pushdown.batch import PushdownSentence, collate
        from lightning_modules.families.pushdown.stack_states import StackStates

        module, device = self.model.module, self.model.device
        out = []
        with torch.no_grad():
            for tokens in prefixes:
                n = len(tokens)
                example = dyck.encode_dyck(list(tokens))
                ids = np.array([*self.model.prefix_ids(tokens), self.model.ids[EOS]])
                batch = collate([PushdownSentence(ids, example.attachment, example.spans, n)]).to(device)
                words, attach = module(batch)
                logits = attach[0].double().cpu().numpy()
                states, wrong = StackStates(n), []
                for k in range(1, n + 1):  # row k - 1 predicts token k's attachment over columns 0..k
                    row = np.where(states.legal()[0], logits[k - 1, : k + 1], -np.inf)
                    if int(np.argmax(row)) != example.attachment[k]:
                        wrong.append(k)
                    states.attach([example.attachment[k]])
                out.append((words[0, n].double().log_softmax(-1).cpu().numpy(), wrong))
        return out


# -- synbench eval dyck: a task of the Pushdown family, registered here --------------------------------------
def add_command(tasks: argparse._SubParsersAction) -> None:
    p = tasks.add_parser(
        "dyck", help="closing-bracket accuracy of a Dyck run on the long-range and deeper test sets (§4.1)",
        description="Pushdown Layers §4.1 / Table 1: for each prefix of the test sets (built deterministically "
                    "from the checkpoint's data config and --seed: long-L = prefixes closing a dependency of "
                    "length >= L in Dyck_{k,40} strings, 50 each; depth = nests of depth 15-49 around a string "
                    "of the training language, 105), the argmax of the next-token distribution over the closing "
                    "brackets must be the bracket that closes the prefix. base-lm: exact distribution; "
                    "pushdown: marginal over the final beam of attachment histories of the prefix.")
    p.add_argument("checkpoint", help="pushdown or base-lm checkpoint of a Dyck run (RUN/checkpoints/best.ckpt)")
    p.add_argument("--set", dest="sets", action="append", metavar="SET",
                   help=f"a test set ({'|'.join(dyck.TEST_SETS)}); repeat for several (default: all)")
    p.add_argument("--size", type=positive_int, metavar="N",
                   help="prefixes per set (default: the paper's, 50 per long-range set and 100 for depth; the "
                        "long-range sets stop after the string that reaches N, the depth set after a round of 35)")
    p.add_argument("--beam", type=positive_int, default=DYCK_BEAM,
                   help=f"beam over attachment histories for pushdown checkpoints (default {DYCK_BEAM}, the "
                        "official eval_dyck.py's)")
    p.add_argument("--seed", type=natural, default=0, help="seed of the test sets (default 0)")
    add_device_argument(p)
    p.add_argument("--tape", default="beam", choices=("beam", "silver"),
                   help="pushdown: infer the attachments with the beam (default, the protocol) or read each "
                        "prefix's silver tape (an oracle that isolates the next-token predictor)")
    p.add_argument("--out", type=Path, metavar="DIR", help="results folder (default: RUN_DIR/eval/dyck-HASH)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """The family's ``dyck`` evaluation (``evaluate``, through the adapter's ``evaluations`` part)."""
    result, computed, total = family_evaluation("dyck", vars(args))
    return print_result(args.json, result, computed, total, format_report)


def format_report(result: dict) -> str:
    """Accuracy per test set, the teacher-forced attachment diagnostics (silver tape), then the headline."""
    m = result["metrics"]
    rows = [f"{name:10} {acc:.4f}  ({m['prefixes'][name]} prefixes, mean length "
            f"{m['mean_prefix_length'][name]:.1f})" for name, acc in m["accuracy"].items()]
    for name, a in (m.get("attachments") or {}).items():
        beyond = a["accuracy_beyond_training_length"]
        rows.append(f"{name:10} attachments (teacher-forced) {a['accuracy']:.4f}, beyond the training length "
                    f"{'-' if beyond is None else f'{beyond:.4f}'}, prefixes without error "
                    f"{a['prefixes_without_error']:.4f}")
    return "\n".join([*rows, result["headline"]]) + "\n"


def _check_options(options: Mapping[str, Any]) -> str | None:
    sets = options.get("sets", list(dyck.TEST_SETS))
    if not isinstance(sets, list) or not sets or any(s not in dyck.TEST_SETS for s in sets):
        return f"sets: expected a list of {', '.join(dyck.TEST_SETS)}, got {sets!r}"
    return None


def _arguments(p: PlanInput) -> list[str]:
    """``eval dyck``'s arguments of an entry; its ``beam`` is the task's own option (a Dyck run scores no text,
    so its family has no scoring method), read by pushdown checkpoints, left out of base-lm results' identity."""
    o = p.options
    return [*(a for s in o.get("sets") or [] for a in ("--set", s)), *flag(o, "size"), *flag(o, "seed"),
            *flag(o, "beam")]


def _flatten(m: Mapping[str, Any]) -> dict[str, float]:
    return {f"dyck.{name}": value for name, value in m["accuracy"].items()}


TASK = register(Task("dyck", "dyck", f"{__name__}:add_command", _flatten, tested=("dyck.*",),
                     options=COMMON_OPTIONS + ("sets", "size", "seed", "beam"), arguments=_arguments, scored=False,
                     methods=(), check=_check_options))
