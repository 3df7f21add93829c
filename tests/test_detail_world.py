"""The detail world (`--backbone detail`): the positive control where instance-level schedules must win.

Its invariants: valid schedules, a high many-step ceiling, an evaluator that requires the texture (the
blurry posterior mean fails, a true sample passes), the best schedule follows the prompt's texture
scale, and for the open phrases the noise decides the texture, so the best schedule follows the noise.
"""

import collections

import pytest
import torch

from jsbench import JsbenchError
from jsbench.backbones import load_backbone
from jsbench.scoring.geneval import evaluate_detections
from jsbench.schedule import check_sigmas
from jsbench.world.detail import (
    DETAIL_DIM,
    LATENT_DIM,
    OPEN_PHRASES,
    PHRASES,
    TEXTURE_DIM,
    TEXTURES,
    detail_mixture,
    detail_strength,
    detect_detail,
    embed_detail_prompt,
    interior_mask,
    make_detail_prompts,
    noise_mode,
    parse_detail_prompt,
    render_detail,
    texture_strength,
)
from jsbench.world.detail_calibration import candidate_grid, score_rows
from jsbench.world.mixture import MixtureTable


@pytest.fixture(scope="module")
def backbone():
    return load_backbone("detail")


def _items(metas: list[dict]) -> list:
    from jsbench.suites.base import EvalItem

    return [EvalItem(m["prompt"], m["tag"], m) for m in metas]


def _scored(backbone, metas, seeds, sigmas):
    """The calibration's scoring of (metas[r], seeds[r]) rows, through the geneval suite as calibrate_detail.py passes it."""
    from jsbench.suites import load_suite

    return score_rows(backbone, load_suite("geneval", backbone), _items(metas), seeds, sigmas)


def _single(texture: str, shape: str = "circle") -> dict:
    return next(m for m in make_detail_prompts() if m["tag"] == "single_object" and shape in m["prompt"] and m["texture"] == texture)


def test_prompts_cover_every_task_and_phrase():
    prompts = make_detail_prompts()
    assert len({p["prompt"] for p in prompts}) == len(prompts)
    by_task = collections.defaultdict(set)
    for p in prompts:
        by_task[p["tag"]].add(p["texture"])
        assert p["prompt"].endswith(f"with {p['texture']}")
        assert parse_detail_prompt("  " + p["prompt"].upper() + " ") == p
    assert set(by_task) == {"single_object", "two_object", "counting", "colors", "position", "color_attr"}
    assert all(phrases == set(PHRASES) for phrases in by_task.values())


def test_unknown_prompt_is_one_clear_error(backbone):
    with pytest.raises(JsbenchError, match="detail world cannot draw"):
        backbone.encode(["a photo of a circle with polka dots"])


def test_policy_reads_the_texture_words():
    a = embed_detail_prompt(_single("hairline stripes")["prompt"])
    b = embed_detail_prompt(_single("broad stripes")["prompt"])
    c = embed_detail_prompt(_single("stripes")["prompt"])
    assert not torch.equal(a, b) and not torch.equal(b, c) and not torch.equal(a, c)


def test_mixture_shapes_and_open_phrases_hold_both_textures():
    closed = detail_mixture(_single("fine stripes")["prompt"])
    open_ = detail_mixture(_single("stripes")["prompt"])
    assert closed.means.shape[1] == LATENT_DIM == TEXTURE_DIM + 1 + DETAIL_DIM
    assert open_.means.shape[0] == 2 * closed.means.shape[0]
    k = closed.means.shape[0]
    assert torch.allclose(torch.logsumexp(open_.log_weights[:k], 0).exp(), torch.tensor(0.5, dtype=torch.float64))
    # the detail dims of a texture are centred at 0 with that texture's scale; scene dims are the scene world's
    assert torch.all(closed.means[:, TEXTURE_DIM + 1 :] == 0)
    assert torch.allclose(closed.spread_tensor()[:, TEXTURE_DIM + 1 :], torch.tensor(0.08, dtype=torch.float64))
    assert torch.equal(open_.means[:k, :TEXTURE_DIM], open_.means[k:, :TEXTURE_DIM])


def test_backbone_schedules_are_valid(backbone):
    x = backbone.initial_noise([0, 1])
    for n in (1, 3, 5, 200):
        check_sigmas(backbone.default_sigmas(n, x))
    grid = candidate_grid(6)
    check_sigmas(grid)
    assert len(grid) == 15
    assert backbone.latent_shape == (LATENT_DIM,)


def test_evaluator_requires_detail_true_sample_passes_blurry_mean_fails(backbone):
    metas = [_single(t, s) for t in ("hairline stripes", "broad stripes", "stripes") for s in ("circle", "square", "triangle", "ring")]
    table = MixtureTable([detail_mixture(m["prompt"]) for m in metas], dtype=torch.float64)
    rows = torch.arange(len(metas)).repeat_interleave(4)
    x0 = table.sample_data(rows, torch.Generator().manual_seed(0))
    row_metas = [metas[int(r)] for r in rows]
    true_pass = [evaluate_detections(d, m)[0] for d, m in zip(detect_detail(render_detail(x0)), row_metas)]
    assert sum(true_pass) >= 0.95 * len(true_pass)
    blurry = x0.clone()
    blurry[:, TEXTURE_DIM + 1 :] = 0.0  # the posterior mean of the detail dims: same objects, no texture
    assert not any(evaluate_detections(d, m)[0] for d, m in zip(detect_detail(render_detail(blurry)), row_metas))
    # ... and the scene world's own detector, which does not ask for texture, passes both
    from jsbench.world.detect import detect

    assert sum(evaluate_detections(d, m)[0] for d, m in zip(detect(render_detail(blurry)), row_metas)) >= 0.95 * len(rows)


def test_measured_texture_matches_the_latent():
    metas = [_single(t) for t in ("hairline stripes", "fine stripes", "medium stripes", "broad stripes")]
    table = MixtureTable([detail_mixture(m["prompt"]) for m in metas], dtype=torch.float64)
    rows = torch.arange(4).repeat_interleave(8)
    x0 = table.sample_data(rows, torch.Generator().manual_seed(1))
    x0[:, TEXTURE_DIM + 1 :] *= torch.linspace(0.0, 1.2, len(rows), dtype=torch.float64)[:, None]  # every detail level
    images = render_detail(x0)
    contrast, interior = interior_mask(images)
    from jsbench.world.detect import detect

    want = detail_strength(x0)
    for b, dets in enumerate(detect(images)):
        assert len(dets) == 1
        strength, cls = texture_strength(contrast[b], interior[b], dets[0].box)
        assert abs(strength - float(want[b])) < 0.05
        if want[b] > 0.3:
            assert cls == int(rows[b])  # the matched filter names the texture class


def test_one_step_sample_fails_and_ceiling_passes(backbone):
    metas = [_single(t, s) for t in PHRASES for s in ("circle", "square")]
    seeds = list(range(len(metas)))
    x = backbone.initial_noise(seeds)
    one = _scored(backbone, metas, seeds, backbone.default_sigmas(1, x)[0])
    assert one.sum() == 0  # one step lands on the mixture mean: blurry and between modes
    ceiling = _scored(backbone, metas, seeds, backbone.default_sigmas(60, x)[0])
    assert ceiling.mean() >= 0.9


@pytest.mark.slow
def test_best_schedule_follows_the_prompts_texture_scale(backbone):
    # late steps resolve hairline texture, early steps broad texture: per-prompt best schedules differ
    late, early = torch.tensor([1.0, 0.1, 0.025, 0.0]), torch.tensor([1.0, 0.45, 0.2, 0.0])
    scores = {}
    for texture in ("hairline stripes", "broad stripes"):
        metas = [_single(texture, s) for s in ("circle", "square", "triangle", "ring") for _ in range(24)]
        seeds = list(range(7000, 7000 + len(metas)))
        scores[texture] = [float(_scored(backbone, metas, seeds, sig).mean()) for sig in (late, early)]
    # measured: hairline 0.42 late vs 0.00 early; broad 0.00 late vs 0.66 early (96 images each)
    assert scores["hairline stripes"][0] - scores["hairline stripes"][1] >= 0.25, scores
    assert scores["broad stripes"][1] - scores["broad stripes"][0] >= 0.3, scores


@pytest.mark.slow
def test_noise_decides_the_texture_of_open_prompts(backbone):
    # "with stripes" is fine or broad; which one, x_T decides (noise_mode), and so which schedule resolves it
    metas = [_single("stripes", s) for s in ("circle", "square", "triangle", "ring") for _ in range(16)]
    seeds = list(range(9000, 9000 + len(metas)))
    x = backbone.initial_noise(seeds)
    mode = noise_mode(x, [m["prompt"] for m in metas])
    assert 0.25 < mode.float().mean() < 0.75
    lat = backbone.sample_latents(x, backbone.encode([m["prompt"] for m in metas]), backbone.default_sigmas(40, x))
    fine, broad = TEXTURES.index("fine"), TEXTURES.index("broad")
    anchors = torch.tensor([-4.5, -1.5, 1.5, 4.5])
    landed = (lat[:, TEXTURE_DIM, None] - anchors).abs().argmin(1)
    assert (landed == torch.where(mode == 1, broad, fine)).float().mean() >= 0.95
    fine_sched, broad_sched = torch.tensor([1.0, 0.17, 0.06, 0.0]), torch.tensor([1.0, 0.45, 0.2, 0.0])
    s_fine = _scored(backbone, metas, seeds, fine_sched)
    s_broad = _scored(backbone, metas, seeds, broad_sched)
    per_mode = torch.where(mode == 1, s_broad, s_fine).mean()
    assert per_mode - max(s_fine.mean(), s_broad.mean()) >= 0.15


def test_geneval_suite_and_reward_run_on_detail(backbone):
    from jsbench.rewards import load_reward
    from jsbench.suites import load_suite

    suite = load_suite("geneval", backbone)
    test = suite.items("test")
    assert {it.task for it in test} == {"single_object", "two_object", "counting", "colors", "position", "color_attr"}
    assert all(" with " in it.prompt and it.metadata["texture"] in PHRASES for it in test)
    assert not set(it.prompt for it in test) & set(it.prompt for it in suite.items("train"))
    assert suite.provenance()["detector"] == "embedded-exact+texture"
    assert any(it.metadata["texture"] in OPEN_PHRASES for it in test)
    reward = load_reward("geneval", backbone)
    prompts = [it.prompt for it in test[:4]]
    x = backbone.initial_noise([0, 1, 2, 3])
    r = reward(backbone.sample(x, backbone.encode(prompts), backbone.default_sigmas(40, x)), prompts)
    assert r.shape == (4,) and set(r.tolist()) <= {0.0, 1.0}
    # the analytic world's suite is untouched
    analytic = load_suite("geneval", load_backbone("analytic"))
    assert not any("stripes" in it.prompt for it in analytic.items("all"))


def test_prompts_cli_lists_the_detail_world():
    from typer.testing import CliRunner

    from jsbench.cli import app

    out = CliRunner().invoke(app, ["prompts", "--backbone", "detail", "--split", "test"])
    assert out.exit_code == 0, out.output
    assert "stripes" in out.output


def _load_script(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "scripts" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_sample_efficiency_bench_runs_on_detail(tmp_path, monkeypatch):
    import json

    mod = _load_script("bench_sample_efficiency")
    monkeypatch.setattr(mod, "CACHE", tmp_path / "cache")
    out = tmp_path / "se.json"
    mod.main(["--backbone", "detail", "--baselines", "rloo", "js", "--iters", "3", "--K", "2", "--seeds", "0", "--contexts", "4",
              "--window", "2", "--eval-seeds", "0", "--out", str(out)])
    s = json.loads(out.read_text())["summaries"][0]
    assert list(s["baselines"]) == ["rloo", "js"] and set(s["paired_vs_reference"]) == {"js"}
    assert all(json.loads(p.read_text())["config"]["backbone"] == "detail" for p in (tmp_path / "cache").glob("*.json"))


def test_calibration_picks_schedules_per_prompt_and_per_noise_mode(backbone):
    from jsbench.suites import load_suite
    from jsbench.world.detail_calibration import calibrate_detail

    metas = [_single("hairline stripes"), _single("broad stripes"), _single("mixed stripes")]
    cands = torch.tensor([[1.0, 0.1, 0.025, 0.0], [1.0, 0.45, 0.2, 0.0]])
    cal = calibrate_detail(backbone, load_suite("geneval", backbone), _items(metas), search_seeds=6, report_seeds=2, candidates=cands, ceiling_steps=10)
    sched = cal.per_prompt_schedules
    assert sched[metas[0]["prompt"]] == [0.1, 0.025] and sched[metas[1]["prompt"]] == [0.45, 0.2]
    assert set(cal.per_instance_schedules) == {metas[2]["prompt"]}
    assert set(cal.rows) == {"default", "uniform", "searched global", "searched per prompt", "searched per instance", "ceiling (10 steps)"}
    assert cal.n_open_prompts == 1 and cal.rows["searched per prompt"]["all"][0] >= cal.rows["searched global"]["all"][0] - 1e-9
