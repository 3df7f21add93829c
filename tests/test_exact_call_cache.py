"""The exact call cache (`jsbench.backbones._call_cache`) and where scenes-dit uses it.

What a user relies on: a cached result is bit for bit the result the call returns, so a leaderboard sampled
with the cache is the one sampled without it; a key changes with every input the call reads (each tensor's
bytes, shape and dtype, the network's weights, the thread count, the settings), so different prompts,
noise or schedules never collide; the cache stays within its byte budget.
"""

from __future__ import annotations

from functools import lru_cache

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.backbones._call_cache import ExactCallCache, call_key

from tiny_pipelines import one_thread  # noqa: F401  (fixture)

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

PROMPTS = ["a photo of a red circle", "a photo of two black squares", "a photo of a blue triangle left of a yellow ring"]


@lru_cache(maxsize=None)
def shipped():
    return load_backbone("scenes-dit", device="cpu")


# ---- call_key -----------------------------------------------------------------------------------------


def test_key_is_the_same_for_equal_inputs_and_changes_with_each_tensor_byte_shape_and_dtype():
    a = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    key = call_key([a, None], settings=("s", 1.0))
    assert call_key([a.clone(), None], settings=("s", 1.0)) == key
    nudged = a.clone()
    nudged[2, 3] = torch.nextafter(nudged[2, 3], torch.tensor(100.0))  # one ulp of one element
    assert call_key([nudged, None]) != call_key([a, None])
    assert call_key([a.reshape(4, 3), None]) != call_key([a, None])
    assert call_key([a.double(), None]) != call_key([a, None])
    assert call_key([a, a]) != call_key([a, None])
    assert call_key([a], settings=("s", 2.0)) != call_key([a], settings=("s", 1.0))


def test_key_changes_when_a_weight_is_written_in_place_or_the_module_is_another():
    net = torch.nn.Linear(3, 2)
    key = call_key([], [net])
    assert call_key([], [net]) == key
    with torch.no_grad():
        net.weight.add_(0.0)  # even a write that leaves the values as they were: the version counts writes
    assert call_key([], [net]) != key
    assert call_key([], [torch.nn.Linear(3, 2)]) != call_key([], [net])


def test_key_changes_with_the_thread_count():
    before = torch.get_num_threads()
    key = call_key([torch.ones(2)])
    try:
        torch.set_num_threads(2 if before != 2 else 1)
        assert call_key([torch.ones(2)]) != key
    finally:
        torch.set_num_threads(before)


# ---- ExactCallCache -----------------------------------------------------------------------------------


def test_cache_computes_once_per_key_and_returns_the_stored_result():
    cache = ExactCallCache(max_bytes=1 << 20)
    calls = []

    def compute():
        calls.append(1)
        return torch.full((4,), float(len(calls)))

    first = cache.get_or_compute("k", compute)
    again = cache.get_or_compute("k", compute)
    assert again is first and len(calls) == 1 and (cache.hits, cache.misses) == (1, 1)
    other = cache.get_or_compute("other", compute)
    assert len(calls) == 2 and torch.equal(other, torch.full((4,), 2.0))


def test_cache_drops_least_recently_used_past_its_budget_and_never_stores_an_oversized_result():
    row = 4 * 100  # bytes of a float32 tensor of 100 elements
    cache = ExactCallCache(max_bytes=2 * row)
    cache.get_or_compute("a", lambda: torch.zeros(100))
    cache.get_or_compute("b", lambda: torch.zeros(100))
    cache.get_or_compute("a", lambda: torch.zeros(100))  # a is now the most recently used
    cache.get_or_compute("c", lambda: torch.zeros(100))
    assert "a" in cache and "c" in cache and "b" not in cache and cache.bytes == 2 * row
    big = cache.get_or_compute("big", lambda: torch.zeros(1000))
    assert big.numel() == 1000 and "big" not in cache and cache.bytes <= cache.max_bytes


# ---- scenes-dit ---------------------------------------------------------------------------------------


def test_scenes_dit_keeps_a_cache_and_the_big_backbones_do_not():
    from jsbench.backbones import backbone_class

    assert shipped()._call_cache is not None
    for name in ("sd35", "sd35-large", "flux-dev", "flux-schnell", "sdxl"):
        assert backbone_class(name).call_cache_mib == 0, name


def test_cached_encoding_is_exactly_the_fresh_encoding_and_keyed_by_the_whole_batch():
    bb = shipped()
    cached = bb.encode(PROMPTS)
    again = bb.encode(PROMPTS)
    fresh = bb._encode_prompts(PROMPTS)
    for got in (cached, again):
        assert got.prompts == PROMPTS
        assert torch.equal(got.pooled, fresh.pooled) and torch.equal(got.tokens, fresh.tokens)
        assert torch.equal(got.token_mask, fresh.token_mask)
        assert got.tensors.keys() == fresh.tensors.keys()
        assert all(torch.equal(got.tensors[k], fresh.tensors[k]) for k in fresh.tensors)
    assert again is not cached and again.prompts is not cached.prompts  # the caller's own lists and dicts
    # other prompts, or the same prompts in another order or batch, are other entries, each its own encoding
    for batch in (PROMPTS[::-1], PROMPTS[:2], ["a photo of a green ring"]):
        got, want = bb.encode(batch), bb._encode_prompts(batch)
        assert got.prompts == batch and torch.equal(got.tokens, want.tokens) and torch.equal(got.pooled, want.pooled)


def _images_without_cache(bb, x_T, cond, sigmas):
    cache, bb._call_cache = bb._call_cache, None
    try:
        return bb.sample(x_T, cond, sigmas)
    finally:
        bb._call_cache = cache


def test_rows_that_share_the_first_step_sample_exactly_the_uncached_images():
    bb = shipped()
    cond = bb.encode(PROMPTS)
    x_T = bb.initial_noise([11, 12, 13])
    default = bb.default_sigmas(3, x_T)
    other = default.clone()
    other[:, 1:3] = torch.tensor([0.8, 0.4])  # another schedule from the same start: the first velocity is shared
    free_start = default.clone()
    free_start[:, 0] = 0.95  # starts lower: another first call
    misses = bb._call_cache.misses
    for sigmas in (default, other, free_start, default):
        assert torch.equal(bb.sample(x_T, cond, sigmas), _images_without_cache(bb, x_T, cond, sigmas))
    assert bb._call_cache.misses - misses == 2  # the first velocity at sigma 1 and at 0.95; the rest reused


def test_first_velocity_is_keyed_by_noise_prompts_and_guidance():
    bb = shipped()
    cond = bb.encode(PROMPTS)
    x_T = bb.initial_noise([21, 22, 23])
    sigmas = bb.default_sigmas(3, x_T)
    images = bb.sample(x_T, cond, sigmas)
    assert not torch.equal(bb.sample(bb.initial_noise([21, 22, 24]), cond, sigmas)[2], images[2])
    swapped = bb.encode([PROMPTS[0], PROMPTS[2], PROMPTS[1]])
    assert torch.equal(bb.sample(x_T, swapped, sigmas), _images_without_cache(bb, x_T, swapped, sigmas))
    scale = bb.guidance_scale
    try:
        bb.guidance_scale = scale + 1.0
        assert torch.equal(bb.sample(x_T, cond, sigmas), _images_without_cache(bb, x_T, cond, sigmas))
    finally:
        bb.guidance_scale = scale
    assert torch.equal(bb.sample(x_T, cond, sigmas), images)
