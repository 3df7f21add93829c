"""`scenes-dit`: the shipped SD3-style pipeline with learned weights, trained on the scene world.

What a user relies on: it loads from the repository with no download, it is served by the SD3.5 adapter
with nothing special above the protocol (same parity with the diffusers pipeline as the tiny SD3.5),
the world's GenEval suite scores it, its weights are safetensors under 20 MB, many steps draw the world
far better than the pipeline's default few steps, and the script that trained it resumes exactly.
"""

from __future__ import annotations

import importlib.util
import json
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest
import torch

from jsbench.backbones import Backbone, load_backbone
from jsbench.backbones._diffusers import BackboneWeightsMissing
from jsbench.backbones.scenes_dit import SHIPPED_WEIGHTS
from jsbench.schedule import sigmas_from_increments
from jsbench.suites import load_suite
from jsbench.suites.geneval import GenEvalSuite

from tiny_pipelines import one_thread  # noqa: F401  (fixture)


def pipeline_kwargs(steps: int) -> dict:
    """The reference call's settings, read from the shipped folder's jsbench.json (the model's own sampling
    card), never from the adapter: an adapter whose guidance, size or T5 length drifted fails parity."""
    card = json.loads((SHIPPED_WEIGHTS / "jsbench.json").read_text())
    keys = ("height", "width", "max_sequence_length", "guidance_scale")
    return dict({k: card[k] for k in keys}, num_inference_steps=steps)

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["a photo of a red circle", "a photo of two black squares", "a photo of a blue triangle left of a yellow ring"]
SEEDS = [3, 4, 5]


@lru_cache(maxsize=None)
def shipped():
    return load_backbone("scenes-dit", device="cpu")


def _max_rel(a, b) -> float:
    return ((a.float() - b.float()).abs().max() / b.float().abs().max()).item()


def test_shipped_weights_are_safetensors_under_20_mb():
    files = [f for f in SHIPPED_WEIGHTS.rglob("*") if f.is_file()]
    assert sum(f.stat().st_size for f in files) < 20 * 2**20
    weights = [f for f in files if f.suffix in {".safetensors", ".bin", ".pt", ".pth", ".pkl", ".ckpt"}]
    assert weights and all(f.suffix == ".safetensors" for f in weights)  # nothing that unpickles
    index = json.loads((SHIPPED_WEIGHTS / "model_index.json").read_text())
    assert index["_class_name"] == "StableDiffusion3Pipeline"
    meta = json.loads((SHIPPED_WEIGHTS / "jsbench.json").read_text())
    assert meta["trained_by"].startswith("python scripts/train_scene_backbone.py")


def test_served_by_the_sd35_adapter_through_the_protocol():
    from jsbench.backbones.sd35 import SD35Backbone

    bb = shipped()
    assert isinstance(bb, Backbone) and isinstance(bb, SD35Backbone)
    assert type(bb)._velocity is SD35Backbone._velocity and type(bb).sample_latents is SD35Backbone.sample_latents
    assert (bb.height, bb.width) == (48, 48) and bb.guidance_scale > 1
    assert bb.model_id == "jsbench/scenes-dit"  # records name the weights, not this machine's folder
    from jsbench.evaluation.evaluate import resolve_schedule

    assert resolve_schedule("ceiling", bb, 3).steps == bb.ceiling_steps == 50
    x = bb.initial_noise(SEEDS)
    cond = bb.encode(PROMPTS)
    images = bb.sample(x, cond, bb.default_sigmas(3, x))
    assert images.shape == (3, 3, 48, 48) and 0 <= images.min() and images.max() <= 1


def test_default_schedule_parity_with_the_diffusers_pipeline():
    bb = shipped()
    x = bb.initial_noise(SEEDS)
    lat = bb.sample_latents(x, bb.encode(PROMPTS), bb.default_sigmas(4, x))
    ref = bb.pipe(PROMPTS, latents=x.clone(), output_type="latent", **pipeline_kwargs(4)).images
    assert _max_rel(lat, ref) <= 1e-6


def test_per_row_schedules_match_single_row_pipeline_calls():
    bb = shipped()
    x = bb.initial_noise(SEEDS)
    inc = torch.from_numpy(np.random.default_rng(0).dirichlet(np.full(4, 1.5), size=3))
    sig = sigmas_from_increments(0.02 + (1 - 0.08) * inc).to(torch.float32)
    lat = bb.sample_latents(x, bb.encode(PROMPTS), sig)
    kw = pipeline_kwargs(4)
    kw.pop("num_inference_steps")
    for b in range(3):
        ref = bb.pipe([PROMPTS[b]], latents=x[b : b + 1].clone(), sigmas=bb.pipeline_sigmas(sig[b]), output_type="latent", **kw).images
        assert _max_rel(lat[b : b + 1], ref) <= 2e-5, f"row {b}"


def test_the_worlds_geneval_suite_scores_it():
    suite = load_suite("geneval", shipped())
    assert isinstance(suite, GenEvalSuite)  # the world's prompts and exact detector, not OWLv2


@pytest.mark.slow  # hundreds of DiT forwards
def test_many_steps_draw_the_world_better_than_few_default_steps():
    """The pipeline's own 28 steps draw the held-out prompts clearly better than its 3 default steps
    (the headroom a learned schedule works with). Seeds are fixed, so the numbers are too: 0.243 vs 0.083
    on the 72 held-out prompts (0.226 vs 0.132 on the 53 of the earlier split); the bounds leave room for platform round-off only."""
    bb = shipped()
    suite = load_suite("geneval", bb)
    reps = [it for it in suite.items("test") for _ in range(2)]  # all 72 held-out prompts, 2 seeds each
    prompts = [it.prompt for it in reps]
    x = bb.initial_noise(list(range(len(prompts))))
    cond = bb.encode(prompts)

    def correct(steps: int) -> float:
        images = torch.cat([bb.sample(x[i : i + 64], cond.take(list(range(i, min(i + 64, len(reps))))), bb.default_sigmas(steps, x[i : i + 64]))
                            for i in range(0, len(reps), 64)])
        return float(np.mean([s["correct"] for s in suite.score(images, reps)]))

    many, few = correct(28), correct(3)
    assert many >= 0.18 and few <= many - 0.05, (many, few)


def test_missing_shipped_weights_are_one_line_with_how_to_restore(monkeypatch, tmp_path):
    import jsbench.backbones.scenes_dit as mod

    monkeypatch.setattr(mod, "SHIPPED_WEIGHTS", tmp_path / "gone")
    with pytest.raises(BackboneWeightsMissing) as info:
        load_backbone("scenes-dit")
    msg = str(info.value)
    assert "\n" not in msg and "git checkout" in msg and "scripts/train_scene_backbone.py" in msg


def _script():
    spec = importlib.util.spec_from_file_location("train_scene_backbone", ROOT / "scripts" / "train_scene_backbone.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_training_script_resumes_to_the_same_pipeline(tmp_path):
    """A run stopped part-way (in each stage) and rerun ends bit-identical to an uninterrupted run."""
    mod = _script()
    small = ["--vae-steps", "3", "--decoder-steps", "2", "--dit-steps", "4", "--data", "64", "--checkpoint-every", "100", "--no-progress", "--threads", "1"]
    assert mod.main([*small, "--out", str(tmp_path / "a"), "--work", str(tmp_path / "wa")]) == 0
    for stop in ("2", "3", "3"):  # stops inside the VAE stage, the DiT stage, then the decoder stage
        assert mod.main([*small, "--out", str(tmp_path / "b"), "--work", str(tmp_path / "wb"), "--stop-after", stop]) == 0
        assert not (tmp_path / "b").exists()
    assert mod.main([*small, "--out", str(tmp_path / "b"), "--work", str(tmp_path / "wb")]) == 0
    from safetensors.torch import load_file

    for part in ("transformer", "vae", "text_encoder"):
        (fa,) = (tmp_path / "a" / part).glob("*.safetensors")
        (fb,) = (tmp_path / "b" / part).glob("*.safetensors")
        a, b = load_file(fa), load_file(fb)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), part
    bb = load_backbone("scenes-dit", model=str(tmp_path / "b"), device="cpu")  # what it wrote is servable
    assert bb.latent_shape == shipped().latent_shape


def test_training_script_refuses_a_corrupt_checkpoint(tmp_path):
    mod = _script()
    work = tmp_path / "w"
    work.mkdir()
    (work / "vae.pt").write_bytes(b"\x80\x02not a checkpoint")  # protocol 2, torch.load's own
    with pytest.raises(SystemExit) as info:
        mod.main(["--vae-steps", "2", "--dit-steps", "2", "--data", "64", "--no-progress", "--out", str(tmp_path / "o"), "--work", str(work)])
    assert "corrupt" in str(info.value) and "vae.pt" in str(info.value)


@pytest.mark.slow
def test_step_curve_script_writes_its_table(tmp_path):
    spec = importlib.util.spec_from_file_location("step_curve", ROOT / "scripts" / "step_curve.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "curve.json"
    mod.main(["--backbone", "scenes-dit", "--steps", "2", "4", "--seeds", "1", "--out", str(out)])
    rows = json.loads(out.read_text())["rows"]
    assert [r["steps"] for r in rows] == [2, 4] and all(0 <= r["correct"] <= 1 for r in rows)


def test_leaderboard_page_links_every_backbones_figures(tmp_path):
    """A compare on one backbone rewrites geneval.md, whose tables cover every backbone: so must its figures."""
    from jsbench.report.compare import figure_links

    figs = tmp_path / "figures"
    figs.mkdir()
    for name in ["geneval-scenes-dit-n3-images", "geneval-analytic-n5-schedules", "geneval-analytic-n3-training",
                 "geneval-analytic-n3-schedules", "ocr-analytic-n3-images", "geneval-notes"]:
        (figs / f"{name}.png").write_bytes(b"png")
    titles = [t for t, _ in figure_links(tmp_path, "geneval")]
    assert titles == ["analytic · 3 steps · schedules", "analytic · 3 steps · training", "analytic · 5 steps · schedules",
                      "scenes-dit · 3 steps · images (image 0 of each prompt)"]
