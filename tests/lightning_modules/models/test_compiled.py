"""``runtime.compile``: a compiled Transformer-XL core trains to eager's losses; bad modes are one error line."""

from pathlib import Path

import pytest
import torch
from torch._dynamo.utils import counters

from experiments.batching import StepBatches, batch_indices
from experiments.config import resolve_train_config, run_id
from experiments.families import get_family
from experiments.train import train
from lightning_modules.data.tree import read_bracketed, to_bracketed
from lightning_modules.errors import InputError
from lightning_modules.models.compiled import compile_mode, compile_module
from lightning_modules.models.seed_stack import SeedStack

NO_DROPOUT = ["model.embedding_dropout=0.0", "model.core_dropout=0.0", "model.core_output_dropout=0.0",
              "model.attention_dropout=0.0"]
TINY = ["model.d_model=32", "model.n_layers=2", "model.n_heads=2", "model.d_ff=64", "model.peak_lr=3e-3",
        "model.warmup_steps=0", "train.batch_size=4", "runtime.wandb=disabled", "runtime.progress=false"]


@pytest.fixture(scope="module")
def treebank(tmp_path_factory, shared_data) -> Path:
    trees = [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0001.mrg")]
    trees += [t for _, t in read_bracketed(shared_data / "ptb_nltk_sample" / "combined" / "wsj_0003.mrg")]
    path = tmp_path_factory.mktemp("tb") / "small.mrg"
    path.write_text("".join(to_bracketed(t) + "\n" for t in trees[:20]))
    return path


def config(treebank: Path, *extra: str) -> dict:
    return resolve_train_config("tg", "cpu-small", [*TINY, f"data.corpus={treebank}", "data.train_split=file",
                                                    "data.valid_split=file", *extra])


def step_losses(cfg: dict, mode: str, steps: int = 3) -> list[float]:
    """Per-step training losses of a tiny TG (Adam, the module's own loss) with ``runtime.compile=mode``;
    aot_eager: torch.compile's graph capture and autograd without inductor's (slow on CPU) code generation."""
    family = get_family("tg")
    data = family.build_data(cfg)
    torch.manual_seed(0)
    module = compile_module(family.build_module(cfg, data).train(), mode, backend="aot_eager")
    optimizer = torch.optim.Adam(module.parameters(), lr=3e-3)
    losses = []
    for k in range(steps):  # shapes change between steps (each chunk trimmed to its longest sequence)
        chunks = data.collate([data.train[i] for i in batch_indices(len(data.train), 4, 0, k)])
        total, count = module.nll(chunks)
        loss = total / count
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(float(loss.detach()))
    return losses


def test_compiled_training_steps_match_eager(treebank):
    cfg = config(treebank, *NO_DROPOUT)
    eager = step_losses(cfg, "none")
    counters.clear()
    compiled = step_losses(cfg, "default")
    assert counters["stats"]["unique_graphs"] >= 2  # the network ran compiled (one host sync splits a chunk)
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=0)
    assert eager[-1] < eager[0]  # it trains


def test_a_compiled_seed_group_gives_the_eager_losses_and_gradients(treebank):
    cfg = config(treebank, *NO_DROPOUT)
    family = get_family("tg")
    data = family.build_data(cfg)
    modules = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        modules.append(family.build_module(cfg, data).train())
    streams = [iter(StepBatches(data.train, 4, seed, data.collate)) for seed in (0, 1)]
    results = []
    counters.clear()
    for mode in ("none", "default"):
        stack = SeedStack(modules).compile(mode, backend="aot_eager")
        loss, _, _ = stack.losses(stack.batch([next(s) for s in streams]))
        loss.sum().backward()
        results.append((loss.detach(), stack.grads()))
        streams = [iter(StepBatches(data.train, 4, seed, data.collate)) for seed in (0, 1)]
    assert counters["stats"]["unique_graphs"] >= 1  # the group's loss ran compiled
    (eager, eager_grads), (compiled, compiled_grads) = results
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=0)
    for name, grad in eager_grads.items():
        torch.testing.assert_close(compiled_grads[name], grad, rtol=1e-4, atol=1e-6, msg=name)


def test_a_compiled_group_compiles_each_layout_once_and_steps_as_eager(treebank):
    """A compiled group (``SeedStack.compile``): its losses and its update (clipping and Adam) are compiled for
    static shapes, and the packing keeps to bucketed layouts, so a step whose layout was seen before compiles
    nothing, also while the warm-up schedule changes the learning rate every step (a tensor, filled in place);
    the losses are eager's."""
    cfg = config(treebank, *NO_DROPOUT, "model.warmup_steps=10")
    family = get_family("tg")
    data = family.build_data(cfg)

    def run(mode: str) -> list[tuple[tuple, int, list[float]]]:
        modules = []
        for seed in (0, 1):
            torch.manual_seed(seed)
            modules.append(family.build_module(cfg, data).train())
        stack = SeedStack(modules).compile(mode, backend="aot_eager")
        stack.static = True  # eager too: the same layouts
        scheduler = stack.configured["lr_scheduler"]["scheduler"]
        streams = [iter(StepBatches(data.train, 4, seed, data.collate)) for seed in (0, 1)]
        steps = []
        for _ in range(8):
            batches = [next(s) for s in streams]
            layout = tuple(tuple(t.shape) for part in stack.batch(batches) for chunk in part.chunks
                           for t in chunk.values())
            before = counters["stats"]["unique_graphs"]
            loss = stack.backward(stack.step_batches(batches), torch.ones(2))
            stack.update(1.0)
            stack.optimizer.zero_grad(set_to_none=True)
            scheduler.step()
            steps.append((layout, counters["stats"]["unique_graphs"] - before, loss.tolist()))
        return steps

    eager = run("none")
    counters.clear()
    compiled = run("default")
    seen = set()
    for layout, graphs, _ in compiled:
        assert (graphs == 0) == (layout in seen), (layout in seen, graphs)  # compiled once per layout, at first
        seen.add(layout)
    assert len(seen) < len(compiled)  # a layout came back
    torch.testing.assert_close([loss for *_, loss in compiled], [loss for *_, loss in eager], rtol=1e-5, atol=0)


def test_compiling_keeps_parameter_names(treebank):
    cfg = config(treebank)
    family = get_family("tg")
    module = family.build_module(cfg, family.build_data(cfg))
    names = list(module.state_dict())
    assert list(compile_module(module, "default").state_dict()) == names  # checkpoints load either way


def test_compile_mode_is_checked_and_part_of_the_run_id(treebank, tmp_path):
    for runtime, message in [({"compile": "fast"}, "unknown compile mode 'fast'"),
                             ({"compile": "reduce-overhead", "accelerator": "cpu"}, "needs a CUDA device")]:
        with pytest.raises(InputError, match=message) as e:
            compile_mode(runtime)
        assert e.value.location == "runtime.compile"
    with pytest.raises(InputError, match="unknown compile mode") as e:  # before any data is built
        train(config(treebank, "runtime.compile=fast"), seed=0, run_dir=tmp_path / "run")
    assert str(e.value).startswith("runtime.compile: ")
    assert compile_mode({}) == "none"
    assert run_id(config(treebank), 0) == run_id(config(treebank, "runtime.compile=none"), 0)
    assert run_id(config(treebank), 0) != run_id(config(treebank, "runtime.compile=default"), 0)
