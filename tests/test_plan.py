"""`--plan`: rows, images, denoiser evaluations and GPU-hours of a run, offline and without weights."""

from __future__ import annotations

import json

import pytest

from jsbench import JsbenchError
from jsbench.report.plan import (GPU_PEAK_TFLOPS, RECIPES, SUSTAINED_SHARE, apply_recipe, full_size_costs, plan_compare, plan_eval,
                          plan_train, throughput)
from jsbench.evaluation.protocol import default_seeds, default_zoo, first_per_task
from jsbench.train.config import TrainConfig


def test_flux_dev_geneval_default_compare_plans_2212_images_a_row_and_under_8_h100_hours(cli):
    code, out, err = cli("compare", "--backbone", "flux-dev", "--suite", "geneval", "--steps", "5", "--plan", "--format", "json")
    assert code == 0, err
    plan = json.loads(out)
    assert set(plan) >= {"gpu", "gpu_hours", "rows"} and plan["gpu"] == "h100"
    rows = {r["method"]: r for r in plan["rows"]}
    assert set(rows) == {"default", "karras", "ceiling (28 steps, pipeline default)"}  # no teacher rows by default
    assert rows["default"]["images"] == 553 * 4 == 2212
    assert rows["default"]["nfe"] == 2212 * 5  # guidance-distilled: one network call per step
    assert rows["ceiling (28 steps, pipeline default)"]["steps"] == 28
    assert 0 < plan["gpu_hours"] <= 8
    assert plan["gpu_hours"] == pytest.approx(sum(r["gpu_hours"] for r in plan["rows"]))
    # GPU-hours follow from the committed FLOP counts and the stated throughput: 5 denoiser steps per image, and
    # once per image its prompt's T5 + CLIP encoding (~4.9 TFLOP) and its VAE decode (~10.5 TFLOP at 1024²)
    entry = full_size_costs()["flux-dev"]
    tflops = GPU_PEAK_TFLOPS["h100"] * SUSTAINED_SHARE
    assert 4.5e12 < entry["text_encode_flops"] < 5.5e12 and 10e12 < entry["vae_decode_flops"] < 11e12
    per_image = 5 * entry["step_flops"] + entry["text_encode_flops"] + entry["vae_decode_flops"]
    assert rows["default"]["gpu_hours"] == pytest.approx(2212 * per_image / (tflops * 1e12) / 3600)
    assert "issue 27" in plan["throughput"] and "assumed: 40%" in plan["throughput"]  # the assumption names its source


def test_cfg_counts_two_evaluations_per_step_and_gpu_class_scales_hours():
    sdxl = plan_compare("geneval", "sdxl", [5], gpu="h100")
    default = next(r for r in sdxl.rows if r.method == "default")
    assert default.nfe == 2212 * 5 * 2
    assert [r.method for r in sdxl.rows] == ["default", "karras", "ays", "ceiling (50 steps, pipeline default)"]
    a100 = plan_compare("geneval", "sdxl", [5], gpu="a100")
    assert a100.gpu_hours == pytest.approx(sdxl.gpu_hours * GPU_PEAK_TFLOPS["h100"] / GPU_PEAK_TFLOPS["a100"])


def test_teacher_rows_are_opt_in_on_real_models_and_cost_more():
    plain = plan_compare("geneval", "sd35-large", [5])
    with_teacher = plan_compare("geneval", "sd35-large", [5], zoo=["karras", "oss", "searched"])
    oss = next(r for r in with_teacher.rows if r.method == "oss")
    # 16 prompts x 2 seeds, a 200-step teacher: its 200 steps, then 200 sources at each of the 5 levels of the
    # per-sample DP (free start), CFG doubling them, beside the 2212 images
    assert oss.nfe == 2212 * 5 * 2 + 32 * (200 + 5 * 200) * 2
    per_image = next(r for r in plan_compare("geneval", "sd35-large", [5], zoo=["oss-image"]).rows if r.method == "oss-image")
    assert per_image.nfe == 2212 * 5 * 2 + 2212 * (200 + 5 * 200) * 2  # the DP on every evaluated image
    assert with_teacher.gpu_hours > plain.gpu_hours
    assert default_zoo(real=True) == ["karras", "ays"] and default_zoo(real=False) == ["karras", "ays", "oss", "oss-image", "searched"]


def test_embedded_worlds_keep_their_defaults_and_have_no_gpu_hours():
    plan = plan_compare("geneval", "analytic", [3], zoo=[])
    assert default_seeds("geneval", real=False) == 16
    rows = {r.method: r for r in plan.rows}
    assert rows["ceiling (200 steps)"].steps == 200 and rows["default"].images % 16 == 0
    assert plan.gpu_hours is None and all(r.gpu_hours is None for r in plan.rows)


def test_suite_protocols_and_limit():
    assert (default_seeds("geneval", True), default_seeds("hpdv2", True), default_seeds("ocr", True)) == (4, 1, 4)
    limited = plan_eval("geneval", "flux-dev", 5, "default", limit=2)
    assert limited.rows[0].images == 6 * 2 * 4  # six GenEval tasks, two prompts each, four images
    hpd = plan_eval("hpdv2", "flux-dev", 5, "default")
    assert hpd.rows[0].images == 800  # 200 held-out prompts of each of the 4 styles, one image each


def test_first_per_task_keeps_order_and_is_the_same_for_every_call():
    class It:
        def __init__(self, task, prompt):
            self.task, self.prompt = task, prompt

    items = [It(t, f"{t}{i}") for t in "abc" for i in range(3)] + [It("a", "a9")]
    got = [it.prompt for it in first_per_task(items, 2)]
    assert got == ["a0", "a1", "b0", "b1", "c0", "c1"]
    assert first_per_task(items, None) == items
    with pytest.raises(JsbenchError):
        first_per_task(items, 0)


def test_measured_gpu_smoke_throughput_replaces_the_assumption(tmp_path):
    smoke = tmp_path / "gpu_smoke.json"
    smoke.write_text(json.dumps({"device": "NVIDIA H200", "real_size": {"flux-dev": {"seconds_per_step": 0.5, "images": 2}}}))
    tflops, source = throughput("h200", "flux-dev", 100e12, smoke)
    assert tflops == pytest.approx(400.0) and "measured" in source and "H200" in source
    nested = tmp_path / "nested.json"  # a family's entry holding its real-size measurement, or a list of them
    nested.write_text(json.dumps({"device": "NVIDIA H200", "families": {"flux-dev": {"real_size": {"seconds_per_step": 1.0}},
                                                                         "sdxl": {"real_size": {"seconds_per_step": 9.0}}}}))
    assert throughput("h200", "flux-dev", 100e12, nested)[0] == pytest.approx(100.0)
    nested.write_text(json.dumps({"device": "NVIDIA H200", "real": [{"backbone": "sdxl", "seconds_per_step": 9.0},
                                                                    {"backbone": "flux-dev", "seconds_per_step": 0.25}]}))
    assert throughput("h200", "flux-dev", 100e12, nested)[0] == pytest.approx(400.0)
    tflops, source = throughput("a100", "flux-dev", 100e12, smoke)  # another GPU class: the stated assumption
    assert tflops == pytest.approx(GPU_PEAK_TFLOPS["a100"] * SUSTAINED_SHARE) and "assumed" in source


def test_a_measured_guidance_step_counts_images_not_network_rows(tmp_path):
    """step_flops is one image's step with the guidance pair already in it, so SD-XL's step of ONE image (two
    UNet rows) in 0.1 s is 13.5 TFLOP / 0.1 s = 135 TFLOP/s, not 270: as gpu_smoke's `measure_denoiser_step`
    records it (`rows` = cfg_batch = 2 for one image) and as a device run records a batch (`images`)."""
    from jsbench.backbones.full_size import measure_denoiser_step

    flops = full_size_costs()["sdxl"]["step_flops"]
    meta = measure_denoiser_step("sdxl", "meta")  # the fields a real-size measurement carries, shapes only
    assert meta["rows"] == 2 and meta["images"] == 1
    smoke = tmp_path / "gpu_smoke.json"
    smoke.write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "denoiser_step": {"sdxl": {**meta, "seconds_per_step": 0.1}}}))
    assert throughput("h100", "sdxl", flops, smoke)[0] == pytest.approx(flops / 0.1 / 1e12) == pytest.approx(135.2, abs=0.1)
    smoke.write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "sdxl": {"rows": 2, "seconds_per_step": 0.1}}))  # no images field
    assert throughput("h100", "sdxl", flops, smoke)[0] == pytest.approx(135.2, abs=0.1)
    smoke.write_text(json.dumps({"device": "NVIDIA H100 80GB HBM3", "sdxl": {"batch1": {"images": 1, "seconds_per_step": 0.1},
                                                                            "batch8": {"images": 8, "seconds_per_step": 0.6}}}))
    assert throughput("h100", "sdxl", flops, smoke)[0] == pytest.approx(8 * flops / 0.6 / 1e12)  # the fastest per image
    # and through a whole plan: the measured hours are the FLOPs over the measured rate, the pair counted once
    plan = plan_eval("geneval", "sdxl", 5, "default", gpu="h100", limit=1)
    row = plan.rows[0]
    assert row.nfe == row.images * 5 * 2


def test_sd35_medium_is_costed_and_measured_as_sd35(tmp_path, monkeypatch):
    """sd35-medium inherits sd35's published size: the FLOP count of sd35's entry, and a device run's measurement
    recorded under either name."""
    import jsbench.report.plan

    costs = full_size_costs()
    assert costs["sd35-medium"] is costs["sd35"] and "scenes-dit" not in costs and "analytic" not in costs
    medium, sd35 = plan_compare("geneval", "sd35-medium", [5]), plan_compare("geneval", "sd35", [5])
    assert medium.gpu_hours == pytest.approx(sd35.gpu_hours)
    run = tmp_path / "gpu_day_one.json"
    run.write_text(json.dumps({"device": "NVIDIA H200", "families": {"sd35-medium": {"steps": {"batch1": {"images": 1, "seconds_per_step": 0.5}}}}}))
    monkeypatch.setattr(jsbench.report.plan, "MEASUREMENTS", (run,))
    for name in ("sd35", "sd35-medium"):
        tflops, source = throughput("h200", name, costs[name]["step_flops"], jsbench.report.plan.MEASUREMENTS)
        assert tflops == pytest.approx(costs["sd35"]["step_flops"] / 0.5 / 1e12) and "gpu_day_one.json" in source
    assert throughput("h200", "sd35-large", costs["sd35-large"]["step_flops"], run)[1].startswith("assumed")


def test_recipe_paper_sets_the_papers_settings_and_refuses_conflicts():
    defaults = {f: getattr(TrainConfig(), f) for f in TrainConfig.__dataclass_fields__}
    for backbone, B in (("flux-dev", 16), ("sd35-large", 16), ("sdxl", 32), ("sd35-medium", 32)):
        got = apply_recipe({**defaults, "backbone": backbone, "recipe": "paper"}, "paper", defaults)
        assert (got["contexts"], got["samples"], got["weight_decay"], got["grad_clip"], got["reward"], got["suite"]) == (B, 2, 1e-4, 1.0, "hps", "hpdv2")
    with pytest.raises(JsbenchError, match="--samples 3 conflicts"):
        apply_recipe({**defaults, "backbone": "sdxl", "samples": 3}, "paper", defaults)
    with pytest.raises(JsbenchError, match="not 'analytic'"):
        apply_recipe(dict(defaults), "paper", defaults)
    with pytest.raises(JsbenchError, match="--steps 7 is not one"):
        apply_recipe({**defaults, "backbone": "sdxl", "steps": 7}, "paper", defaults)
    plan = plan_train("flux-dev", 5, 200, 16, 2, recipe="paper")
    assert [r.steps for r in plan.rows] == list(RECIPES["paper"]["budgets"]) == [5, 10, 20, 40, 80]
    assert plan.rows[0].images == 200 * 16 * 2 and plan.rows[-1].nfe == 200 * 32 * 80


def test_train_plan_cli_and_manifest_field(cli):
    code, out, err = cli("train", "--backbone", "sdxl", "--recipe", "paper", "--plan")
    assert code == 0, err
    assert out.count("train paper") == 5 and "B=32, K=2, 200 updates" in out
    assert all(len(line) <= 80 for line in out.splitlines())
    code, out, err = cli("train", "--backbone", "sdxl", "--recipe", "paper", "--samples", "3", "--plan")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "conflicts with --recipe paper" in err
    code, _, err = cli("train", "--steps", "3")
    assert code == 2 and "--out" in err
    assert "recipe" in TrainConfig.__dataclass_fields__  # the manifest's "train" (asdict of the config) records it


def test_plan_refusals_are_one_line(cli):
    code, _, err = cli("compare", "--backbone", "flux-dev", "--steps", "5", "--plan", "--gpu", "tpu")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "unknown --gpu 'tpu'" in err


@pytest.mark.parametrize("args, fragment", [
    (["compare", "--backbone", "flux-dev", "--steps", "5", "--plan", "--seeds", "0"], "--seeds must be at least 1"),
    (["eval", "--backbone", "flux-dev", "--suite", "hpdv2", "--plan", "--limit", "0"], "--limit must be at least 1"),
    (["eval", "--steps", "3", "--limit", "0"], "--limit must be at least 1"),
    (["compare", "--steps", "3", "--limit", "0", "--zoo", "none"], "--limit must be at least 1"),
    (["schedules", "export", "--steps", "3", "--seeds", "0"], "--seeds must be at least 1"),
    (["train", "--backbone", "analytic", "--recipe", "paper", "--plan"], "not 'analytic'"),
])
def test_bad_counts_are_refused_in_one_line(cli, args, fragment):
    code, _, err = cli(*args)
    assert code == 2 and len(err.strip().splitlines()) == 1 and fragment in err, err


def test_the_manifest_records_the_recipe(cli, monkeypatch, tmp_path):
    """A recipe's settings reach the trained policy's manifest, with the recipe's name (a test recipe for the
    embedded world: the paper's needs HPSv2 and HPDv2's prompts)."""
    import jsbench.report.plan

    monkeypatch.setitem(jsbench.report.plan.RECIPES, "tiny", {
        "samples": 2, "weight_decay": 1e-4, "grad_clip": 0.5, "reward": "geneval", "suite": "geneval",
        "contexts": {"analytic": 4}, "budgets": (3,)})
    code, out, err = cli("train", "--recipe", "tiny", "--steps", "3", "--iters", "2", "--out", tmp_path / "run", "--no-progress")
    assert code == 0, err
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    train = manifest["train"]
    assert (train["recipe"], train["samples"], train["contexts"], train["weight_decay"], train["grad_clip"]) == ("tiny", 2, 4, 1e-4, 0.5)
