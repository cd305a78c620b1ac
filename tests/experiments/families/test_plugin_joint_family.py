"""A joint model family p(x, y) (trees, proposals, a bound) plugs in from files of its own, no synbench file changed.

The test writes the family exactly as docs/adding-a-family.md lists its files, in two packages of
its own that mirror the built-in layout (``lightning_modules/families/NAME`` -> ``toyjoint_modules``, what
becomes tensors; ``experiments/families/NAME`` -> ``toyjoint``, what the harness asks), and names the
adapter's package in ``$SYNBENCH_PLUGINS``. The family is a bracket-bigram: p(next token | token) over the
sequence ``<s> (S (NP the cat ) (VP sleeps ) ) </s>``, the smallest model of words and trees together. It
trains through ``synbench train``; ``synbench eval ppl`` bounds log p(x) by marginalising it over proposal
trees (the shared tree-marginal scorer) and scores the gold trees; the bound over proposals that contain the
gold tree is no looser than the gold tree's own value, sentence by sentence.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

ENCODING = '''"""Trees as bracket sequences: ``<s> (S (NP the cat ) (VP sleeps ) )`` and ``</s>`` predicted last.

Each constituent opens with ``(LABEL`` and closes with ``)``; words are terminals. The model reads ``tokens``
and predicts ``labels`` (the next token at every position), so the sum of its label log-probs is log p(x, y).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lightning_modules.data.tree import Tree

SPECIALS = ("<pad>", "<unk>", "<s>", "</s>", ")")
PAD, UNK, BOS, EOS, CLOSE = range(len(SPECIALS))


@dataclass(frozen=True, eq=False)
class Example:
    tokens: np.ndarray  # ids read: <s>, then the brackets and words
    labels: np.ndarray  # the id predicted at each position: the next token, </s> last
    word_index: np.ndarray  # the word (0-based) at each position, -1 for <s> and brackets

    def __len__(self) -> int:
        return len(self.tokens)


def symbols(tree: Tree) -> list[tuple[str, bool]]:
    """The bracket sequence of a POS-free tree: (symbol, is a word)."""
    out: list[tuple[str, bool]] = []

    def walk(node: Tree) -> None:
        out.append((f"({node.label}", False))
        for child in node.children:
            walk(child) if isinstance(child, Tree) else out.append((child, True))
        out.append((")", False))

    walk(tree)
    return out


def encode(tree: Tree, index: dict[str, int]) -> Example:
    ids, word_index, words = [BOS], [-1], 0
    for symbol, is_word in symbols(tree):
        ids.append(index.get(symbol, UNK))
        word_index.append(words if is_word else -1)
        words += is_word
    return Example(np.array(ids), np.array(ids[1:] + [EOS]), np.array(word_index))
'''

DATA = '''"""Corpus -> training data: POS-free constituency trees of the configured splits, one vocabulary of words and
bracket labels built on the training split."""

from __future__ import annotations

from collections import Counter
from typing import Any

import torch

from lightning_modules.data.corpora import read_split
from lightning_modules.data.train_data import TrainData
from lightning_modules.data.tree import drop_pos_tags
from toyjoint_modules.encoding import PAD, SPECIALS, Example, encode, symbols


def collate(examples: list[Example]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, examples))

    def pad(rows: list) -> torch.Tensor:
        return torch.tensor([list(r) + [PAD] * (width - len(r)) for r in rows])

    return pad([e.tokens for e in examples]), pad([e.labels for e in examples])


def build(cfg: dict[str, Any]) -> TrainData:
    data = cfg["data"]
    trees = {key: [drop_pos_tags(s.tree) for s in read_split(data["corpus"], data[key], kind="constituency",
                                                               data_dir=cfg["runtime"].get("data_dir"))[1]]
             for key in ("train_split", "valid_split")}
    counts = Counter(w for t in trees["train_split"] for w in t.leaves())
    labels = {s for ts in trees.values() for t in ts for s, word in symbols(t) if not word and s != ")"}
    # a V x V table: the 1,000 most frequent words only (Adam over all ~5,000 words' table is most of a step)
    tokens = [*SPECIALS, *sorted(labels), *sorted(w for w, c in counts.most_common(1000) if c >= data["min_count"])]
    index = {t: i for i, t in enumerate(tokens)}
    train, valid = ([encode(t, index) for t in trees[key]] for key in ("train_split", "valid_split"))
    return TrainData(train, valid, collate, {"tokens": tokens}, len(tokens),
                     valid_words=sum(len(t.leaves()) for t in trees["valid_split"]))
'''

MODEL = '''"""The bracket-bigram: a table of next-token logits per token, over words and brackets alike."""

from __future__ import annotations

import pytorch_lightning as pl
import torch
from torch import nn

from toyjoint_modules.encoding import PAD


class BracketBigram(pl.LightningModule):
    def __init__(self, vocab_size: int, lr: float):
        super().__init__()
        self.save_hyperparameters()
        self.table = nn.Embedding(vocab_size, vocab_size)
        nn.init.normal_(self.table.weight, std=0.01)

    def label_logprobs(self, tokens: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        """log p(labels[b, t] | tokens[b, t]) at every position, [B, T]."""
        return self.table(tokens).log_softmax(-1).gather(-1, labels[..., None]).squeeze(-1)

    def loss(self, batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        tokens, labels = batch
        mask = labels != PAD
        return -(self.label_logprobs(tokens, labels) * mask).sum() / mask.sum()

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        loss = self.loss(batch)
        self.log("train/loss", loss, batch_size=len(batch[0]))
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> None:
        self.log("val/loss", self.loss(batch), batch_size=len(batch[0]))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
'''

SCORERS = '''"""The trained bracket-bigram as the shared tree-marginal scorer needs it (``TreeModel``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from lightning_modules.data.tree import Tree, clean, drop_pos_tags, to_bracketed
from lightning_modules.errors import InputError
from toyjoint_modules.data import collate
from toyjoint_modules.encoding import PAD, Example, encode
from toyjoint_modules.model import BracketBigram


class BracketModel:
    joint = True

    def __init__(self, module: BracketBigram, tokens: list[str], name: str):
        self.module, self.name = module.eval(), name
        self.index = {t: i for i, t in enumerate(tokens)}

    def model_tree(self, tree: Any, pos_tags: bool, location: str) -> Tree:
        if not isinstance(tree, Tree):
            raise InputError(f"{self.name} scores constituency trees", location)
        tree = clean(tree)
        return drop_pos_tags(tree) if pos_tags else tree

    def tree_words(self, tree: Tree) -> list[str]:
        return tree.leaves()

    def tree_text(self, tree: Tree) -> str:
        return to_bracketed(tree)

    def encode_tree(self, tree: Tree) -> Example:
        return encode(tree, self.index)

    @torch.no_grad()
    def label_logprobs(self, examples: Sequence[Example]) -> list[np.ndarray]:
        tokens, labels = collate(list(examples))
        logprobs = self.module.label_logprobs(tokens, labels).double().masked_fill(labels == PAD, 0.0)
        return [logprobs[b, : len(e)].numpy() for b, e in enumerate(examples)]

    def is_unknown(self, word: str) -> bool:
        return word not in self.index
'''

ADAPTER = '''"""The toy joint family's adapter: a joint model p(x, y), bounded over proposal trees or scored on gold
trees."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from experiments.checkpoints import read_checkpoint
from experiments.evaluate.scorers.tree_marginal import TreeScorer
from experiments.families import register
from experiments.families.adapter import Family, Method, Scoring, ScoringRequest
from lightning_modules.errors import InputError


@register
class ToyJointFamily(Family):
    names = ("toy-joint",)

    def kind(self, config: dict[str, Any] | None = None) -> str:
        return "joint"

    def build_data(self, cfg: dict[str, Any]) -> Any:
        from toyjoint_modules.data import build

        return build(cfg)

    def build_module(self, cfg: dict[str, Any], data: Any) -> Any:
        from toyjoint_modules.model import BracketBigram

        return BracketBigram(data.vocab_size, cfg["model"]["lr"])

    def load(self, checkpoint: str | Path, device: str = "cpu") -> Any:
        from toyjoint.scorers import BracketModel
        from toyjoint_modules.model import BracketBigram

        ckpt = read_checkpoint(checkpoint, self.names)
        meta = ckpt["synbench"]
        module = BracketBigram(len(meta["vocab"]["tokens"]), meta["config"]["model"]["lr"])
        module.load_state_dict(ckpt["state_dict"])
        return BracketModel(module, meta["vocab"]["tokens"], meta["family"])

    def methods(self, config: dict[str, Any] | None = None) -> tuple[Method, ...]:
        return Method("proposals", {"n": 300}, trees="constituency"), Method("gold", trees="constituency")

    def scoring(self, checkpoint: str | Path, meta: dict[str, Any], request: ScoringRequest) -> Scoring:
        model = self.load(checkpoint, request.device)
        if request.method == "gold":
            if request.gold is None:
                raise InputError("--method gold needs gold trees: evaluate a treebank corpus", "--method")
            return Scoring(TreeScorer(model, request.gold, method="gold", pos_tags=request.pos_tags,
                                      source_name=request.source_name or "gold trees of the corpus"),
                           {}, "gold trees, log p(x, y_gold)")
        if request.proposals is None:
            raise InputError("--method proposals needs --proposals FILE or --parser CKPT", "--method")
        n = request.options["n"]
        return Scoring(TreeScorer(model, request.proposals, method="proposals", n=n, pos_tags=request.pos_tags,
                                  source_name=request.source_name),
                       {"n_proposals": n}, f"N = {n} proposals from {request.source_name}")
'''

PRESETS = """# The toy joint family's model presets (data and loop: configs/train.yaml's preset of the same name)
cpu-small:
  lr: 0.1
"""

FILES = {  # toyjoint_modules is a namespace package: no __init__.py
    "toyjoint_modules/encoding.py": ENCODING,
    "toyjoint_modules/data.py": DATA,
    "toyjoint_modules/model.py": MODEL,
    "toyjoint/__init__.py": ADAPTER,
    "toyjoint/scorers.py": SCORERS,
    "toyjoint/presets/toy-joint.yaml": PRESETS,
}


def write_family(root: Path) -> None:
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def synbench(*args: str, env: dict[str, str], status: int = 0) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "experiments.cli", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == status, f"synbench {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done


def right_branching(words: list[str]) -> str:
    """A proposal tree PTB-style (a preterminal over every word): (S (XX w1) (X (XX w2) ...))."""
    inner = f"(XX {words[-1]})"
    for word in reversed(words[1:-1]):
        inner = f"(X (XX {word}) {inner})"
    return f"(S (XX {words[0]}) {inner})" if len(words) > 1 else f"(S {inner})"


def test_the_docs_list_the_files_a_family_is(tmp_path):
    """docs/adding-a-family.md names exactly the files this plug-in writes (the contract it tests)."""
    page = (REPO / "docs" / "adding-a-family.md").read_text()
    assert page.startswith("# Adding a model family\n")  # the page is the section, moved verbatim from the README
    listed = set(re.findall(r"`(toyjoint(?:_modules)?/[^`]+)`", page))
    assert listed == set(FILES)


@pytest.mark.slow
def test_a_joint_plugin_family_trains_and_is_bounded_over_proposals(tmp_path, prepared_data_dir):
    from lightning_modules.data.corpora import read_split

    plugin = tmp_path / "plugin"
    write_family(plugin)
    env = {**os.environ, "SYNBENCH_PLUGINS": "toyjoint", "PYTHONPATH": f"{REPO}{os.pathsep}{plugin}",
           "SYNBENCH_DATA": str(prepared_data_dir), "WANDB_MODE": "offline"}
    run = tmp_path / "run"
    synbench("train", "toy-joint", "--preset", "cpu-small", "--seed", "0", "--run-dir", str(run),
             "train.max_steps=60", "train.val_every=30", "train.ckpt_every=30", "runtime.wandb=disabled", env=env)
    done = json.loads((run / "DONE").read_text())
    assert done["family"] == "toy-joint" and done["global_step"] == 60
    checkpoint = str(run / "checkpoints" / "best.ckpt")

    # proposals: the gold tree (POS tags and all) and a right-branching tree per sentence
    _, sentences = read_split("ptb-sample", "test", limit=6, data_dir=prepared_data_dir)
    proposals = tmp_path / "proposals.jsonl"
    proposals.write_text("".join(json.dumps({"sentence": k, "trees": [str(s.tree), right_branching(s.words)]}) + "\n"
                                 for k, s in enumerate(sentences)))
    corpus = ["--corpus", "ptb-sample", "--split", "test", "--limit", "6", "--json"]
    gold = json.loads(synbench("eval", "ppl", checkpoint, "--method", "gold", *corpus, "--out",
                               str(tmp_path / "gold"), env=env).stdout)
    bound = json.loads(synbench("eval", "ppl", checkpoint, "--method", "proposals", "--proposals", str(proposals),
                                *corpus, "--out", str(tmp_path / "bound"), env=env).stdout)
    assert gold["settings"]["scorer_convention"]["bound"] and bound["settings"]["scorer_convention"]["bound"]
    assert bound["settings"]["n_proposals"] == 2 and bound["metrics"]["sentences"] == 6  # the file's N
    assert bound["metrics"]["word_ppl"] <= gold["metrics"]["word_ppl"]

    def totals(folder: Path) -> list[float]:
        items = [json.loads(line) for line in (folder / "items.jsonl").read_text().splitlines()]
        return [item["logprob"] for item in sorted(items, key=lambda item: int(item["id"]))]

    assert all(b >= g - 1e-9 for b, g in zip(totals(tmp_path / "bound"), totals(tmp_path / "gold"), strict=True))
    # a method the family does not declare is one error line naming the ones it has
    wrong = synbench("eval", "ppl", checkpoint, "--method", "beam", *corpus, env=env, status=2)
    assert wrong.stderr.startswith("synbench: error:") and "proposals or gold" in wrong.stderr
