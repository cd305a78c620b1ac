"""The TXL core: parameter count, memory semantics (chunked == unchunked), Jacobian, padding, two attn fns."""

from __future__ import annotations

import pytest
import torch
from tg_golden import GOLDEN_LABELS, golden_chunks, golden_full_chunk

from lightning_modules.layers.txl_core import TransformerXL, gather_memory

pytestmark = pytest.mark.filterwarnings("ignore:flex_attention called without torch.compile")

SMALL = dict(vocab_size=13, d_model=16, n_layers=3, n_heads=2, d_ff=24, embedding_dropout=0.1,
             core_dropout=0.1, core_output_dropout=0.1, attention_dropout=0.1)


def small(memory_length: int, min_rel: int = -1, max_rel: int = 62, seed: int = 0, **kw) -> TransformerXL:
    torch.manual_seed(seed)
    net = TransformerXL(**{**SMALL, **kw}, memory_length=memory_length, min_rel=min_rel, max_rel=max_rel)
    return net.eval()


def run_chunks(net: TransformerXL, chunks, flex: bool = False) -> torch.Tensor:
    memory, outs = None, []
    for c in chunks:
        logits, memory = net(c["inputs"], c["attn_mask"], c["relpos"], c["mem_src"], c["reset"], memory,
                             compose=c["compose"], flex=flex)
        outs.append(logits)
    return torch.cat(outs, 1)


def test_official_large_config_has_251_887_616_parameters():
    with torch.device("meta"):
        net = TransformerXL(vocab_size=32768, d_model=1024, n_layers=16, n_heads=8, d_ff=4096,
                            embedding_dropout=0.1, core_dropout=0.1, core_output_dropout=0.1,
                            attention_dropout=0.1, memory_length=256, min_rel=-1, max_rel=62)
    assert sum(p.numel() for p in net.parameters()) == 251_887_616


def test_parameter_count_formula_and_variants():
    d, f, V, n = 16, 24, 13, 3
    per_attention = 4 * d * d + 2 * d + d * d + d  # Q, K, V, relative keys; u, v; output with bias
    per_layer = per_attention + (d * f + f) + (f * d + d) + 4 * d
    count = lambda net: sum(p.numel() for p in net.parameters())  # noqa: E731
    assert count(small(4)) == V * d + V + n * per_layer
    assert count(small(4, n_attention_fns=2)) == V * d + V + n * (per_layer + per_attention)
    assert count(small(4, relative=False)) == V * d + V + n * (per_layer - d * d - 2 * d)


def test_gather_memory_equals_the_official_einsum_update():
    g = torch.Generator().manual_seed(0)
    B, M, L, D = 3, 4, 4, 5
    memory, h = torch.randn(B, M, D, generator=g), torch.randn(B, L, D, generator=g)
    mem_src = torch.tensor([[4, 5, 6, 7], [-1, 0, 1, 6], [1, 2, 3, -1]])
    # Official: new = einsum(old, mem_from_mem [M, M]) + einsum(h, mem_from_seq [L, M]) with 0/1 matrices.
    from_mem = torch.zeros(B, M, M)
    from_seq = torch.zeros(B, L, M)
    for b in range(B):
        for slot, src in enumerate(mem_src[b].tolist()):
            if 0 <= src < M:
                from_mem[b, src, slot] = 1
            elif src >= M:
                from_seq[b, src - M, slot] = 1
    official = torch.einsum("bmd,bmn->bnd", memory, from_mem) + torch.einsum("btd,btn->bnd", h, from_seq)
    torch.testing.assert_close(gather_memory(memory, h, mem_src), official)


def test_identity_gather_equals_plain_txl_memory():
    g = torch.Generator().manual_seed(1)
    memory, h = torch.randn(2, 4, 3, generator=g), torch.randn(2, 4, 3, generator=g)
    plain = torch.cat([memory, h], 1)[:, -4:]  # TXL: the last M layer inputs
    identity = torch.arange(4, 8).expand(2, 4)
    torch.testing.assert_close(gather_memory(memory, h, identity), plain, rtol=0, atol=0)


@pytest.mark.parametrize("n_attention_fns", [1, 2])
def test_smart_memory_chunks_equal_the_unchunked_sequence(n_attention_fns):
    """The official library's chunks (L = M = 4, smart memory) must give the same predictions as the whole
    sequence in one chunk: the stack gathered into memory holds exactly what each position may attend."""
    chunked = small(4, n_attention_fns=n_attention_fns)
    whole = small(0, n_attention_fns=n_attention_fns)
    whole.load_state_dict(chunked.state_dict())
    with torch.no_grad():
        per_chunk = run_chunks(chunked, golden_chunks())[:, :14]
        full = run_chunks(whole, [golden_full_chunk()])
    has_label = torch.tensor(GOLDEN_LABELS) != 0
    torch.testing.assert_close(per_chunk[0, has_label], full[0, has_label], rtol=1e-5, atol=1e-5)


def txl_chunks(tokens: list[int], L: int, M: int) -> list[dict[str, torch.Tensor]]:
    """Causal TXL chunks with plain memory (M = L, or none) and relpos i - j, built by hand."""
    ids = torch.tensor(tokens + [0] * (-len(tokens) % L))
    out = []
    for start in range(0, len(ids), L):
        q = torch.arange(start, start + L)[:, None]
        k = torch.arange(start - M, start + L)[None, :]
        mask = (k >= 0) & (k <= q) & (ids[k.clamp(min=0)] != 0) & (ids[start:start + L] != 0)[:, None]
        out.append({
            "inputs": ids[None, start:start + L], "attn_mask": mask[None], "relpos": ((q - k) * mask)[None],
            "mem_src": torch.arange(L, L + M)[None], "reset": torch.tensor([start == 0]),
            "compose": torch.zeros(1, L, dtype=torch.bool),
        })
    return out


def test_plain_memory_chunks_equal_the_unchunked_causal_sequence():
    """With plain memory a query of chunk c sees keys from the start of chunk c-1 on; the whole sequence
    with that window in its mask must give the same logits (memory = the previous chunk's layer inputs)."""
    tokens = [1, 5, 7, 2, 9, 3, 3, 11, 4, 6, 8]
    L = 4
    chunked = small(L, min_rel=-12, max_rel=24)
    whole = small(0, min_rel=-12, max_rel=24)
    whole.load_state_dict(chunked.state_dict())
    full = txl_chunks(tokens, 12, 0)[0]
    q, k = torch.arange(12)[:, None], torch.arange(12)[None, :]
    full["attn_mask"] &= (k >= (q // L) * L - L)[None]
    full["relpos"] *= full["attn_mask"]
    with torch.no_grad():
        per_chunk = run_chunks(chunked, txl_chunks(tokens, L, L))[:, : len(tokens)]
        reference = run_chunks(whole, [full])[:, : len(tokens)]
    torch.testing.assert_close(per_chunk, reference, rtol=1e-5, atol=1e-5)


def test_dense_and_flex_agree_through_the_core_with_memory():
    net = small(4, n_attention_fns=2)
    with torch.no_grad():
        dense = run_chunks(net, golden_chunks(batch=2))
        flex = run_chunks(net, golden_chunks(batch=2), flex=True)
    torch.testing.assert_close(flex, dense, rtol=1e-5, atol=1e-5)


def test_reset_clears_the_memory():
    net = small(4)
    chunks = golden_chunks()
    with torch.no_grad():
        _, memory = net(**{k: chunks[0][k] for k in ("inputs", "attn_mask", "relpos", "mem_src", "reset")},
                        memory=None)
        fresh, _ = net(**{k: chunks[0][k] for k in ("inputs", "attn_mask", "relpos", "mem_src", "reset")},
                       memory=None)
        again, _ = net(**{k: chunks[0][k] for k in ("inputs", "attn_mask", "relpos", "mem_src", "reset")},
                       memory=memory.mul(100.0))
    torch.testing.assert_close(again, fresh, rtol=0, atol=0)


def test_memory_is_detached_and_holds_layer_inputs():
    net = small(4).train()
    c = golden_chunks()[0]
    logits, memory = net(c["inputs"], c["attn_mask"], c["relpos"], c["mem_src"], c["reset"], None)
    assert memory.shape == (3, 1, 4, 16) and not memory.requires_grad
    net.eval()
    captured = []
    hooks = [layer.register_forward_pre_hook(lambda m, args: captured.append(args[0]))
             for layer in net.layers]
    _, memory = net(c["inputs"], c["attn_mask"], c["relpos"], c["mem_src"], c["reset"], None)
    for hook in hooks:
        hook.remove()
    torch.testing.assert_close(memory, torch.stack(captured))


def test_predictions_do_not_depend_on_unreachable_inputs():
    """Jacobian through the whole 3-layer core: an output can depend on an input only through a chain of at
    most 3 allowed attention edges (plus the residual path)."""
    net = small(0).double()
    full = golden_full_chunk()
    mask = full["attn_mask"][0]
    emb = net.embedding(full["inputs"]).detach()

    def f(e):
        hook = net.embedding.register_forward_hook(lambda module, args, out: e)
        logits, _ = net(full["inputs"], full["attn_mask"], full["relpos"], full["mem_src"], full["reset"],
                        None)
        hook.remove()
        return logits

    jac = torch.autograd.functional.jacobian(f, emb, vectorize=True)  # [1, T, V, 1, T, D]
    dependence = jac[0, :, :, 0].abs().sum(dim=(1, 3)) > 0
    step = (mask | torch.eye(14, dtype=torch.bool)).long()
    reach = torch.eye(14, dtype=torch.long)
    for _ in range(3):
        reach = ((reach @ step) > 0).long()
    assert not (dependence & (reach == 0)).any()
    assert dependence[mask].all()


def test_padding_rows_are_finite_in_training_mode():
    net = small(4).train()
    chunks = golden_chunks(batch=2)
    chunks[-1]["inputs"][1] = 0
    chunks[-1]["attn_mask"][1] = False  # a chunk that is all padding for one sequence
    logits = run_chunks(net, chunks)
    logits.sum().backward()
    assert torch.isfinite(logits).all()
    assert all(torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None)


def test_second_attention_function_acts_only_at_compose_positions():
    net = small(0, n_layers=1, n_attention_fns=2)
    full = golden_full_chunk()
    with torch.no_grad():
        before = run_chunks(net, [full])
        for p in net.layers[0].attentions[1].parameters():
            p.add_(0.5)
        after = run_chunks(net, [full])
    changed = (before - after).abs().amax(-1)[0] > 1e-6
    assert changed.tolist() == full["compose"][0].tolist()


@pytest.mark.parametrize("dtg_options", [False, True])
def test_step_equals_forward_token_by_token(dtg_options):
    """Incremental decoding (``step`` over a key/value pool) gives the logits of the full causal pass at every
    position, also with DTG's options: embeddings scaled by sqrt(d), one u/v for all layers, added arc ids."""
    torch.manual_seed(5)
    net = TransformerXL(**SMALL, memory_length=0, min_rel=-8, max_rel=8, shared_relative_bias=dtg_options,
                        scale_embeddings=dtg_options).double().eval()
    length = 7
    tokens = torch.randint(1, SMALL["vocab_size"], (1, length))
    added = torch.tensor([[0, 0, 3, 0, 5, 0, 0]]) if dtg_options else None
    causal = torch.ones(length, length, dtype=torch.bool).tril()[None]
    relpos = (torch.arange(length)[:, None] - torch.arange(length)[None, :])[None]
    full, _ = net(tokens, causal, relpos, torch.full((1, 0), -1), torch.ones(1, dtype=torch.bool), None,
                  added=added)
    pool = net.new_pool(4)
    for t in range(length):
        rows = pool.allocate(1)
        logits = net.step(tokens[:, t], pool, rows, torch.arange(t + 1)[None], torch.arange(t, -1, -1)[None],
                          added=None if added is None else added[:, t])
        torch.testing.assert_close(logits, full[:, t], atol=1e-9, rtol=1e-9)


def test_step_with_two_attention_functions_and_same_step_keys():
    """``step`` with a second attention function (COMPOSE rows), several tokens of one sequence in one step
    (the later attending the earlier's keys, written first), keys newest first with padding and relative
    positions below ``min_rel`` (the table's zero row): the full causal pass's logits."""
    torch.manual_seed(7)
    net = TransformerXL(**SMALL, memory_length=0, min_rel=1, max_rel=4, n_attention_fns=2).double().eval()
    length = 8
    tokens = torch.randint(1, SMALL["vocab_size"], (1, length))
    compose = torch.tensor([[False, False, True, False, True, True, False, True]])
    causal = torch.ones(length, length, dtype=torch.bool).tril()[None]
    relpos = (torch.arange(length)[:, None] - torch.arange(length)[None, :])[None]
    full, _ = net(tokens, causal, relpos, torch.full((1, 0), -1), torch.ones(1, dtype=torch.bool), None,
                  compose=compose)
    pool, params = net.new_pool(2), net.step_parameters()
    done = 0
    for count in (1, 2, 1, 3, 1):  # tokens per step; the pool grows past its capacity
        rows = pool.allocate(count)
        t = torch.arange(done, done + count)
        key_rows = torch.full((count, length + 1), -1)
        rel = torch.zeros((count, length + 1), dtype=torch.long)
        for b, q in enumerate(t.tolist()):
            keys = torch.arange(q, -1, -1)  # newest first, then padding
            key_rows[b, : q + 1], rel[b, : q + 1] = keys, q - keys
        logits = net.step(tokens[0, t], pool, rows, key_rows, rel, compose[0, t], params)
        torch.testing.assert_close(logits, full[0, t], atol=1e-9, rtol=1e-9)
        done += count
    assert net.step(tokens[0, :1], net.new_pool(1), torch.tensor([0]), torch.tensor([[0]]), torch.tensor([[0]]),
                    compose[0, :1], params, False) is None
