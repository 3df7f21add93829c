"""The embedded worlds' fast paths compute exactly what the plain formulas compute.

Each speed-up of the analytic and detail worlds (cached pair checks and arrangements read off by index,
the detector's own morphology and per-component sums, rendering only the rows a slot shows in, the
in-place posterior mean, cached prompt encodings, a one-shot import hook for --no-progress) is checked
here against the straightforward computation it replaces, bit for bit: the leaderboards and the shipped
training logs depend on these numbers not moving.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import numpy as np
import pytest
import torch

from jsbench.world import scenes
from jsbench.world.scenes import CLASSES, MAX_COMPONENTS, SLOTS, grid_cells, make_prompts


# ------------------------------------------------------------------------------------------ arrangements


def _reference_valid(meta, objects, cells, radii) -> bool:
    """`scenes._valid` as first written: every check computed afresh, nothing cached."""
    room = 3.0 * scenes.prompt_spread(meta) * scenes.PX_PER_UNIT * np.sqrt(2.0)
    for i, j in itertools.combinations(range(len(objects)), 2):
        dist = scenes.PX_PER_UNIT * np.hypot(cells[i][0] - cells[j][0], cells[i][1] - cells[j][1])
        if dist < radii[i] + radii[j] + 3.0 + room:
            return False
    first_of_group, idx = [], 0
    for req in meta["include"]:
        first_of_group.append(idx)
        idx += int(req["count"])
    for g, req in enumerate(meta["include"]):
        if "position" not in req:
            continue
        rel, target = req["position"]
        a, b = first_of_group[g], first_of_group[target]
        for shrink in (0.0, (1.0 + room) / scenes.PX_PER_UNIT):
            dx = cells[a][0] - cells[b][0]
            dy = cells[a][1] - cells[b][1]
            dx -= np.sign(dx) * min(abs(dx), shrink)
            dy -= np.sign(dy) * min(abs(dy), shrink)
            box_a = scenes.nominal_box(cells[b][0] + dx, cells[b][1] + dy, radii[a])
            box_b = scenes.nominal_box(*cells[b], radii[b])
            if rel not in scenes.relative_position(box_a, box_b):
                return False
    return True


def _reference_arrangements(meta, limit=MAX_COMPONENTS):
    """`scenes.arrangements` as first written: every (slot order, placement) pair considered and deduplicated."""
    objects = scenes._objects(meta)
    per_object = []
    for cls, color in objects:
        colors = (color,) if color else CLASSES[cls].colors
        per_object.append([(c, cell) for c in colors for cell in grid_cells(CLASSES[cls].grid)])
    radii = [CLASSES[c].radius for c, _ in objects]
    slot_orders = list(itertools.permutations(range(SLOTS), len(objects)))
    rng = np.random.default_rng(scenes.stable_hash(meta["prompt"]) % 2**32)
    total = len(slot_orders) * int(np.prod([len(o) for o in per_object]))
    found = {}

    def consider(slots, choice):
        if not _reference_valid(meta, objects, [cell for _, cell in choice], radii):
            return
        items = tuple(sorted((slot, cls, color, cell) for slot, (cls, _), (color, cell) in zip(slots, objects, choice)))
        if items not in found:
            found[items] = [(slot, cls, color, cell[0], cell[1]) for slot, cls, color, cell in items]

    if total <= 20000:
        for slots in slot_orders:
            for choice in itertools.product(*per_object):
                consider(slots, choice)
        keys = list(found)
        if len(keys) > limit:
            keep = rng.choice(len(keys), size=limit, replace=False)
            keys = [keys[i] for i in sorted(keep)]
        return [found[k] for k in keys]
    for _ in range(200 * limit):
        slots = slot_orders[rng.integers(len(slot_orders))]
        consider(slots, [o[rng.integers(len(o))] for o in per_object])
        if len(found) >= limit:
            break
    return list(found.values())


def _sample_of_prompts():
    """A few prompts of every task, including both of `arrangements`' paths and both kinds of objects."""
    prompts = make_prompts()
    return [p for tag in dict.fromkeys(p["tag"] for p in prompts) for p in [q for q in prompts if q["tag"] == tag][::9]]


@pytest.mark.parametrize("meta", _sample_of_prompts(), ids=lambda m: m["prompt"])
def test_arrangements_match_the_full_enumeration(meta):
    assert scenes.arrangements(meta) == _reference_arrangements(meta)


def test_arrangements_with_a_small_limit_draw_the_same_subset():
    meta = next(p for p in make_prompts() if p["tag"] == "position")
    assert scenes.arrangements(meta, limit=7) == _reference_arrangements(meta, limit=7)


def test_mixture_encodings_are_each_arrangements_slots():
    found = [[(0, "circle", "red", 0.1, -0.2)], [(1, "square", "blue", 0.0, 0.3), (3, "triangle", "green", -0.4, 0.0)]]
    means, spreads = scenes._encode_arrangements(found)
    assert means.dtype == spreads.dtype == torch.float64 and means.shape == spreads.shape == (2, scenes.LATENT_DIM)
    for n, arrangement in enumerate(found):
        filled = {slot for slot, *_ in arrangement}
        for slot, cls, color, x, y in arrangement:
            base = slot * scenes.SLOT_DIM
            s = scenes.CLASSES[cls].spread
            pos, attr = min(s, scenes.POSITION_SPREAD), min(s, scenes.ATTRIBUTE_SPREAD)
            anchors = [1.0, x, y, scenes.COLOR_ANCHORS[scenes.COLORS.index(color)], scenes.SHAPE_ANCHORS[scenes.SHAPES.index(cls)]]
            assert means[n, base : base + scenes.SLOT_DIM].tolist() == anchors
            assert spreads[n, base : base + scenes.SLOT_DIM].tolist() == [s, pos, pos, attr, attr]
        for slot in set(range(scenes.SLOTS)) - filled:  # absent: presence -1, the rest 0, every spread ABSENT_SPREAD
            base = slot * scenes.SLOT_DIM
            assert means[n, base : base + scenes.SLOT_DIM].tolist() == [-1.0, 0.0, 0.0, 0.0, 0.0]
            assert (spreads[n, base : base + scenes.SLOT_DIM] == scenes.ABSENT_SPREAD).all()
        assert torch.equal(scenes.encode_arrangement(arrangement), means[n])  # the one-arrangement encoders are its rows
        assert torch.equal(scenes.arrangement_spreads(arrangement), spreads[n])


def test_pair_checks_are_cached_per_argument_not_per_prompt():
    """The cached checks are keyed by everything they read: a different margin or size is a different entry."""
    a, b = (0.0, 0.0), (0.8, 0.0)
    tight, loose = scenes._apart(a, b, 4.0, 4.0, 0.0), scenes._apart(a, b, 4.0, 4.0, 10.0)
    assert (tight, loose) == (True, False)  # 14.4 px apart: enough without a margin (11 px), not with 10 px more
    assert scenes._apart(a, b, 6.0, 6.0, 0.0) is False  # larger objects at the same cells touch
    for args in [(a, b, 4.0, 4.0, 0.0), (a, b, 4.0, 4.0, 10.0)]:
        assert scenes._apart(*args) == scenes._apart.__wrapped__(*args)
    left = scenes._relation_holds("left of", (-0.8, 0.0), (0.8, 0.0), 4.0, 4.0, 1.0)
    assert left and not scenes._relation_holds("right of", (-0.8, 0.0), (0.8, 0.0), 4.0, 4.0, 1.0)


def test_valid_placements_follow_the_product_order():
    meta = next(p for p in make_prompts() if p["tag"] == "two_object")
    objects = scenes._objects(meta)
    per_object = [[(c, cell) for c in CLASSES[cls].colors for cell in grid_cells(CLASSES[cls].grid)] for cls, _ in objects]
    radii = [CLASSES[c].radius for c, _ in objects]
    placements = scenes._ValidPlacements(objects, per_object, lambda cells: _reference_valid(meta, objects, cells, radii))
    expected = [choice for choice in itertools.product(*per_object) if _reference_valid(meta, objects, [c for _, c in choice], radii)]
    assert [placements[i] for i in range(len(placements))] == expected


# ------------------------------------------------------------------------------------------------ detector


def _masks(seed: int = 0) -> np.ndarray:
    """[B, H, W] bool masks with blobs, holes (some open to the edge) and noise."""
    rng = np.random.default_rng(seed)
    masks = rng.random((6, 20, 24)) < 0.45
    masks[0] = False
    masks[1] = True
    masks[2, 3:12, 3:12] = True
    masks[2, 6:9, 6:9] = False  # a closed hole
    masks[3, :, :10] = True
    masks[3, 0:5, 4:6] = False  # a hole open to the top edge: not a hole
    return masks


def test_in_plane_morphology_matches_scipy():
    from scipy import ndimage

    from jsbench.world.detect import _PLANE_CROSS, erode_in_plane, fill_holes_in_plane

    for seed in range(4):
        masks = _masks(seed)
        assert np.array_equal(erode_in_plane(masks), ndimage.binary_erosion(masks, structure=_PLANE_CROSS))
        assert np.array_equal(fill_holes_in_plane(masks), ndimage.binary_fill_holes(masks, structure=_PLANE_CROSS))


def test_component_sums_match_scipy_bit_for_bit():
    from scipy import ndimage

    from jsbench.world.detect import _PLANE, _LabelSums

    masks = _masks(1)
    labels, count = ndimage.label(masks, structure=_PLANE)
    values = np.random.default_rng(2).random(masks.shape).astype(np.float32)
    index = np.arange(1, count + 1)
    sums = _LabelSums(labels, count)
    assert np.array_equal(sums.areas(), ndimage.sum_labels(np.ones_like(masks), labels, index))
    assert np.array_equal(sums.areas(values > 0.5), ndimage.sum_labels(values > 0.5, labels, index))
    assert np.array_equal(sums.sums(values) / sums.areas(), ndimage.mean(values, labels, index))
    assert np.array_equal(sums.maxima(values), ndimage.maximum(values, labels, index))
    assert sums.maxima(values).dtype == np.float32


def test_texture_mean_is_numpy_mean():
    from jsbench.world.detail import _mean

    rng = np.random.default_rng(3)
    for n in [1, 2, 7, 8, 9, 15, 16, 17, 127, 128, 129, 300]:
        for dtype in (np.float32, np.float64):
            x = rng.random(n).astype(dtype)
            assert _mean(x).tobytes() == x.mean().tobytes() and type(_mean(x)) is type(x.mean())


# ------------------------------------------------------------------------------------------------ renderer


def _reference_render(latents: torch.Tensor) -> torch.Tensor:
    """`render_scenes` as first written: every slot drawn on every row."""
    from jsbench.world import render as r

    latents = latents.detach().to(torch.float32)
    batch, canvas = latents.shape[0], scenes.CANVAS
    coords = torch.arange(canvas, dtype=torch.float32) + 0.5
    py, px = torch.meshgrid(coords, coords, indexing="ij")
    palette = torch.tensor(scenes.COLOR_RGB, dtype=torch.float32)
    radii = torch.tensor([CLASSES[s].radius for s in scenes.SHAPES], dtype=torch.float32)
    image = torch.tensor(scenes.BACKGROUND, dtype=torch.float32)[None, :, None, None].expand(batch, 3, canvas, canvas).clone()
    for slot in range(SLOTS):
        presence, x, y, color, shape = latents[:, slot * scenes.SLOT_DIM : (slot + 1) * scenes.SLOT_DIM].unbind(-1)
        alpha = (0.5 + 1.25 * presence).clamp(0.0, 1.0)
        rgb = r._hat_weights(color, torch.tensor(scenes.COLOR_ANCHORS, dtype=torch.float32)) @ palette
        shape_w = r._hat_weights(shape, torch.tensor(scenes.SHAPE_ANCHORS, dtype=torch.float32))
        radius = shape_w @ radii
        cx = (canvas / 2 + scenes.PX_PER_UNIT * x)[:, None, None]
        cy = (canvas / 2 + scenes.PX_PER_UNIT * y)[:, None, None]
        sdf = (shape_w[:, :, None, None] * r._shape_sdfs(px - cx, py - cy, radius)).sum(1)
        cover = (alpha[:, None, None] * (0.5 - sdf).clamp(0.0, 1.0))[:, None]
        image = image * (1.0 - cover) + rgb[:, :, None, None] * cover
    return image


def test_render_draws_shown_slots_in_windows_with_the_same_pixels():
    from jsbench.world.render import render_scenes

    g = torch.Generator().manual_seed(0)
    latents = torch.randn(256, scenes.LATENT_DIM, generator=g) * 0.8  # objects of every blend, some off the edges
    latents[:8, 0 : SLOTS * scenes.SLOT_DIM : scenes.SLOT_DIM] = -1.0  # every slot absent
    latents[8:16, 5] = -1.0  # slot 1 absent on some rows only
    latents[16, 0] = float("nan")  # a broken latent still renders as broken
    got, want = render_scenes(latents), _reference_render(latents)
    assert torch.equal(got[:16], want[:16]) and torch.equal(got[17:], want[17:])
    assert torch.equal(got[16].isnan(), want[16].isnan())


# ------------------------------------------------------------------------------------------ posterior mean


def test_in_place_posterior_mean_is_the_formula():
    from jsbench.world.detail import DetailWorld, make_detail_prompts

    world = DetailWorld()
    prompts = [p["prompt"] for p in make_detail_prompts()][:40:5]
    table, rows = world.table(prompts, dtype=torch.float64)
    g = torch.Generator().manual_seed(1)
    x_t = torch.randn(len(prompts), table.means.shape[-1], generator=g, dtype=torch.float64)
    t = torch.rand(len(prompts), generator=g, dtype=torch.float64)
    means, log_w, spread2 = table.means[rows], table.log_weights[rows], table.spreads[rows].square()
    tt = t[:, None, None]
    signal = 1.0 - tt
    var_t = signal.square() * spread2 + tt.square()
    resid = x_t[:, None, :] - signal * means
    logits = log_w - 0.5 * (resid.square() / var_t + var_t.log()).sum(-1)
    want = (torch.softmax(logits, dim=-1)[..., None] * (means + signal * spread2 / var_t * resid)).sum(1)
    assert torch.equal(table.posterior_mean(x_t, t, rows), want)


def _training_like_rows(world, n_prompts: int, samples: int, seed: int):
    """A training update's rows: each context (prompt, noise) repeated `samples` times at t = 1, as the
    sampler's first step sees them, beside a context whose noise is another context's under a new prompt."""
    from jsbench.world.detail import make_detail_prompts

    g = torch.Generator().manual_seed(seed)
    pool = [p["prompt"] for p in make_detail_prompts()]
    prompts = [pool[int(i)] for i in torch.randint(len(pool), (n_prompts,), generator=g)]
    noise = torch.randn(n_prompts, world.latent_dim, generator=g, dtype=torch.float64)
    noise[-1] = noise[0]  # the same noise under two prompts is two computations, not one
    x = noise.repeat_interleave(samples, 0)
    return [p for p in prompts for _ in range(samples)], x, torch.ones(len(x), dtype=torch.float64)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_sharing_mixture_state_and_time_are_computed_once_with_the_same_bits(seed, monkeypatch):
    from jsbench.world import mixture
    from jsbench.world.detail import DetailWorld

    world = DetailWorld()
    prompts, x, t = _training_like_rows(world, 12, 4, seed)
    table, rows = world.table(prompts, dtype=torch.float64)
    shared = table.gather(rows)
    plain = mixture.RowMixtures(shared.means, shared.log_weights, shared.spread2)  # no keys: every row computed
    computed = []
    original = mixture.RowMixtures.posterior_mean
    monkeypatch.setattr(mixture.RowMixtures, "posterior_mean", lambda self, x_t, t: computed.append(len(x_t)) or original(self, x_t, t))
    want = plain.shared_posterior_mean(x, t)
    got = shared.shared_posterior_mean(x, t)
    assert torch.equal(got, want)
    assert computed == [len(x), 12]  # 48 rows, one computation per context
    t_later = torch.rand(len(x), generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    assert torch.equal(shared.shared_posterior_mean(x, t_later), plain.posterior_mean(x, t_later))  # own times: no sharing
    assert computed[-2:] == [len(x), len(x)]


def test_row_sharing_tells_minus_zero_from_zero_and_leaves_autograd_alone():
    from jsbench.world.mixture import PromptMixture, MixtureTable

    table = MixtureTable([PromptMixture(means=torch.randn(3, 2, dtype=torch.float64), log_weights=torch.zeros(3, dtype=torch.float64), spreads=0.5)],
                         dtype=torch.float64)
    rows = torch.zeros(2, dtype=torch.long)
    shared = table.gather(rows)
    x = torch.tensor([[0.0, 1.0], [-0.0, 1.0]], dtype=torch.float64)
    assert shared._run_starts(x, torch.ones(2, dtype=torch.float64)) is None  # bitwise equality only
    same = torch.tensor([[0.3, 1.0], [0.3, 1.0]], dtype=torch.float64, requires_grad=True)
    assert shared._run_starts(same, torch.ones(2, dtype=torch.float64)) is None  # autograd sees every row
    with torch.no_grad():
        assert shared._run_starts(same, torch.ones(2, dtype=torch.float64)).tolist() == [True, False]


def test_one_schedule_row_still_broadcasts_over_the_batch():
    """A [1, N+1] schedule for B rows: its times are not one per row, so no sharing is tried (it broadcasts as before)."""
    from jsbench.backbones.analytic import AnalyticBackbone

    backbone = AnalyticBackbone()
    prompts = [p["prompt"] for p in scenes.make_prompts()[:2] for _ in range(2)]
    cond, x_T = backbone.encode(prompts), backbone.initial_noise([5, 5, 6, 6])
    row = backbone.default_sigmas(3, x_T)[:1]
    assert torch.equal(backbone.sample_latents(x_T, cond, row), backbone.sample_latents(x_T, cond, row.expand(4, -1)))


def test_detail_sampler_groups_are_the_tables_rows():
    """The detail sampler's per-prompt cached rows hold what a table of each size group's prompts gathers."""
    from jsbench.backbones.detail import DetailBackbone

    backbone = DetailBackbone()
    prompts, _, _ = _training_like_rows(backbone.world, 16, 4, seed=3)
    groups = backbone._mixture_groups(prompts)
    assert sorted(torch.cat([sel for sel, _ in groups]).tolist()) == list(range(len(prompts)))
    for sel, got in groups:
        names = [prompts[i] for i in sel.tolist()]
        table, rows = backbone.world.table(names, dtype=torch.float64)
        want = table.gather(rows)
        assert all(torch.equal(a, b) for a, b in zip((got.means, got.log_weights, got.spread2), (want.means, want.log_weights, want.spread2)))
        assert torch.equal(got.keys == got.keys[:, None], rows == rows[:, None])  # one key per prompt


# ------------------------------------------------------------------------------------------------ encoding


@pytest.mark.parametrize("name", ["analytic", "detail"])
def test_cached_encodings_equal_fresh_ones_and_stay_unchanged(name):
    from jsbench.backbones import load_backbone
    from jsbench.suites import load_suite
    from jsbench.world import token_features

    backbone = load_backbone(name)
    prompts = [it.prompt for it in load_suite("geneval", backbone).items("all")][:12]
    first = backbone.encode(prompts)
    first.pooled.add_(1.0)  # a caller writing into its condition must not reach the cache
    first.tokens.zero_()
    again = backbone.encode(list(reversed(prompts)))  # the same prompts in another order: looked up per prompt
    fresh = [(backbone.world.embed(p), *token_features(p, backbone.world.embed)) for p in reversed(prompts)]
    assert torch.equal(again.pooled, torch.stack([f[0] for f in fresh]))
    assert torch.equal(again.tokens, torch.stack([f[1] for f in fresh]))
    assert torch.equal(again.token_mask, torch.stack([f[2] for f in fresh]))


def test_encoding_caches_are_per_world():
    """The detail world counts texture words the scene world does not: a backbone's cache is its world's."""
    from jsbench.backbones import load_backbone

    detail_prompt = "a photo of a circle with fine stripes"
    detail = load_backbone("detail")
    analytic = load_backbone("analytic")
    detail.encode([detail_prompt])
    analytic.encode(["a photo of a circle"])
    assert not torch.equal(detail.encode([detail_prompt]).pooled[0], analytic.world.embed(detail_prompt))
    with pytest.raises(Exception):
        analytic.encode([detail_prompt])  # not a prompt of the scene world: refused, not served from another cache


def test_encoding_cache_stays_bounded(monkeypatch):
    from jsbench.backbones import analytic, load_backbone

    monkeypatch.setattr(analytic, "ENCODING_CACHE_SIZE", 2)
    backbone = load_backbone("analytic")
    prompts = ["a photo of a circle", "a photo of a square", "a photo of a ring"]
    cond = backbone.encode(prompts)
    assert len(backbone._encodings) <= 2
    assert torch.equal(cond.pooled, torch.stack([backbone.world.embed(p) for p in prompts]))


# ---------------------------------------------------------------------------------------------- no progress


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_no_progress_hides_bars_of_a_library_imported_later_without_importing_it():
    code = (
        "import sys\n"
        "from jsbench.progress import quiet_model_loading\n"
        "quiet_model_loading(show_bars=False)\n"
        "assert 'diffusers' not in sys.modules and 'transformers' not in sys.modules\n"
        "from diffusers.utils import logging as d\n"
        "from transformers.utils import logging as t\n"
        "assert not d.is_progress_bar_enabled() and not t.is_progress_bar_enabled()\n"
        "assert d.get_logger('x') is not None\n"
    )
    pytest.importorskip("diffusers")
    pytest.importorskip("transformers")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
