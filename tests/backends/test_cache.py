"""The slot KV cache serves exact block caches and Fast-dLLM-style prefix / dual caches."""

from __future__ import annotations

import torch

from dare.backends.models.cache import SlotKVCache


def _setup(model, length=12):
    ids = torch.randint(0, 250, (2, length), generator=torch.Generator().manual_seed(3))
    positions = torch.arange(length).expand(2, -1)
    return ids, positions


def test_prefix_cache_matches_full_forward(tiny_models):
    model = tiny_models["llada"]
    ids, positions = _setup(model)
    start, n = 5, ids.shape[1]
    cache = SlotKVCache(model.net.args.n_layers, 2, n, "cpu")
    with torch.no_grad():
        prefix_rows = (torch.arange(n) < start).expand(2, -1)
        full = model.net(ids, positions, None, cache.plan(torch.arange(n).expand(2, -1), prefix_rows, read=False))
        seen = cache.filled[:, None, None, :].expand(-1, 1, n - start, -1)
        mask = torch.cat([seen, torch.ones(2, 1, n - start, n - start, dtype=torch.bool)], -1)
        suffix = model.net(ids[:, start:], positions[:, start:], mask, cache.plan(read=True))
    assert cache.filled[:, :start].all() and not cache.filled[:, start:].any()
    assert (suffix - full[:, start:]).abs().max() < 1e-5


def test_dual_cache_overwrites_the_active_block(tiny_models):
    model = tiny_models["llada"]
    ids, positions = _setup(model)
    n, lo, hi = ids.shape[1], 4, 8
    every = torch.ones(2, n, dtype=torch.bool)
    block_index = torch.arange(lo, hi).expand(2, -1)
    in_block = (torch.arange(n) >= lo) & (torch.arange(n) < hi)
    # the active block's own slots are hidden; its fresh keys come in the new part and replace the slots
    seen = lambda c: (c.filled & ~in_block)[:, None, None, :].expand(-1, 1, hi - lo, -1)  # noqa: E731
    own = torch.ones(2, 1, hi - lo, hi - lo, dtype=torch.bool)
    changed = ids.clone()
    changed[:, lo:hi] = (changed[:, lo:hi] + 7) % 250
    cache = SlotKVCache(model.net.args.n_layers, 2, n, "cpu")
    reference = SlotKVCache(model.net.args.n_layers, 2, n, "cpu")
    with torch.no_grad():
        full = model.net(ids, positions, None, cache.plan(torch.arange(n).expand(2, -1), every, read=False))
        same = model.net(ids[:, lo:hi], positions[:, lo:hi], torch.cat([seen(cache), own], -1),
                         cache.plan(block_index, torch.ones(2, hi - lo, dtype=torch.bool)))
        assert (same - full[:, lo:hi]).abs().max() < 1e-5  # nothing changed: exact
        model.net(changed[:, lo:hi], positions[:, lo:hi], torch.cat([seen(cache), own], -1),
                  cache.plan(block_index, torch.ones(2, hi - lo, dtype=torch.bool)))
        model.net(changed, positions, None, reference.plan(torch.arange(n).expand(2, -1), every, read=False))
    # layer 0 keys of the block depend on the block's tokens only: the overwrite must equal a fresh pass
    assert torch.allclose(cache.k[0][:, :, lo:hi], reference.k[0][:, :, lo:hi], atol=1e-6)
    assert torch.equal(cache.k[0][:, :, :lo], reference.k[0][:, :, :lo])
