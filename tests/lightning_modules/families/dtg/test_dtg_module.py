"""The DTG / TXL (trans) module: config checks, u/v shared across layers, embedding scale and learning rate,
arc representations through ``added``, and learning on DTG batches of every system."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from lightning_modules.errors import InputError
from lightning_modules.families.dtg import data as dtg_data
from lightning_modules.families.dtg import model as dtg
from lightning_modules.models import txl_lm as tg

SMALL = {"vocab_size": 50, "d_model": 16, "n_layers": 3, "n_heads": 2, "d_ff": 32, "segment_length": 64,
         "memory_length": 64, "attention": "dense", "embedding_dropout": 0.0, "core_dropout": 0.0,
         "core_output_dropout": 0.0, "attention_dropout": 0.0, "warmup_steps": 0, "peak_lr": 3e-3}


def test_config_checks() -> None:
    with pytest.raises(InputError, match="must be one of standard, eager, swift") as info:
        dtg.config_from_dict({"system": "hybrid"})
    assert info.value.location == "model.system"
    with pytest.raises(InputError) as info:
        dtg.config_from_dict({"arc_input": "head"})
    assert info.value.location == "model.arc_input"
    with pytest.raises(InputError) as info:
        dtg.config_from_dict({"emb_lr_multiplier": 0})
    assert info.value.location == "model.emb_lr_multiplier"


def test_relative_biases_are_shared_across_layers() -> None:
    shared = dtg.build(SMALL)
    layers = shared.network.layers
    assert all(layer.attentions[0].r_w_bias is layers[0].attentions[0].r_w_bias for layer in layers)
    assert all(layer.attentions[0].r_r_bias is layers[0].attentions[0].r_r_bias for layer in layers)
    separate = tg.build({k: v for k, v in SMALL.items()})
    # (n_layers - 1) copies of u and v (d_model values each) fewer; the breakdown adds up to the total
    assert tg.parameter_count(separate) - tg.parameter_count(shared) == 2 * 2 * 16
    assert sum(tg.parameter_breakdown(shared).values()) == tg.parameter_count(shared)
    unshared = dtg.build({**SMALL, "shared_relative_bias": False})
    assert tg.parameter_count(unshared) == tg.parameter_count(separate)


def test_embedding_scale_and_learning_rate_groups() -> None:
    module = dtg.build(SMALL)
    assert module.network.embedding_scale == pytest.approx(math.sqrt(16))
    assert dtg.build({**SMALL, "scale_embeddings": False}).network.embedding_scale == 1.0
    optimizer = module.configure_optimizers()["optimizer"]
    (rest, embedding) = optimizer.param_groups
    assert embedding["params"] == [module.network.embedding.weight]
    assert embedding["initial_lr"] == pytest.approx(2 * rest["initial_lr"]) == pytest.approx(6e-3)
    assert sum(p.numel() for g in optimizer.param_groups for p in g["params"]) == tg.parameter_count(module)


def test_added_ids_add_their_embeddings() -> None:
    torch.manual_seed(0)
    net = dtg.build({**SMALL, "memory_length": 0}).network.eval()
    inputs = torch.tensor([[1, 5, 6, 7]])
    mask = torch.tril(torch.ones(4, 4, dtype=torch.bool))[None]
    relpos = torch.zeros(1, 4, 4, dtype=torch.long)
    args = (mask, relpos, torch.full((1, 0), -1), torch.ones(1, dtype=torch.bool), None)
    with torch.no_grad():
        plain, _ = net(inputs, *args)
        zeros, _ = net(inputs, *args, added=torch.zeros_like(inputs))
        added, _ = net(inputs, *args, added=torch.tensor([[0, 0, 0, 9]]))
        # the same as an embedding table whose row 7 is E[7] + E[9]
        net.embedding.weight[7] += net.embedding.weight[9]
        summed, _ = net(inputs, *args)
    assert torch.equal(plain, zeros)
    assert torch.allclose(added[:, :3], plain[:, :3]) and not torch.allclose(added[:, 3], plain[:, 3])
    # the output projection is tied: only the logit of row 7 changed, the others see the same hidden states
    assert torch.allclose(summed[..., :7], added[..., :7], atol=1e-5)


@pytest.mark.parametrize(("family", "system"), [("dtg", "standard"), ("dtg", "eager"), ("dtg", "swift"),
                                                ("txl-trans", "standard")])
def test_learns_a_small_corpus(tmp_path: Path, family: str, system: str) -> None:
    row = "{i}\t{w}\t_\t_\t_\t_\t{h}\t_\t_\t_\n"
    sentences = [("the cat sat .", (2, 3, 0, 3)), ("a dog ran home .", (2, 3, 0, 3, 3)),
                 ("the dog sat .", (2, 3, 0, 3))]
    path = tmp_path / "small.conllu"
    path.write_text("".join("".join(row.format(i=i, w=w, h=h) for i, (w, h) in enumerate(zip(s.split(), hs), 1))
                            + "\n" for s, hs in sentences))
    cfg = {"data": {"corpus": str(path), "train_split": "file", "valid_split": "file", "min_count": 1},
           "model": {**SMALL, "system": system, "arc_input": "w+arc"}, "runtime": {"data_dir": None}}
    if family == "txl-trans":
        cfg["model"].update(relpos="linear", min_rel=-63, max_rel=128)
    data = dtg_data.build(family, cfg)
    torch.manual_seed(0)
    module = dtg.build({**cfg["model"], "vocab_size": data.vocab_size})
    batch = data.collate(list(data.train))
    optimizer = torch.optim.Adam(module.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        total, count = module.nll(batch)
        loss = total / count
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
