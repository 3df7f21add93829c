"""--guidance on train / eval / compare and the weights-vs-variant check (issue 23), on the tiny pipelines."""

from __future__ import annotations

import json

import pytest
import torch

from jsbench import JsbenchError
from jsbench.backbones import load_backbone, recorded_guidance
from jsbench.backbones.tiny import save_tiny_pipeline
from jsbench.suites.base import TASK_MEAN_RULE, Suite


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("guidance")
    return {kind: save_tiny_pipeline(kind, root / kind) for kind in ("flux-dev", "flux-schnell", "sd35")}


def test_default_is_the_pipelines_own_and_guidance_changes_it(folders):
    dev = load_backbone("flux-dev", str(folders["flux-dev"]), device="cpu")
    assert dev.guidance_scale == 3.5 and recorded_guidance(dev) == "3.5"
    sd = load_backbone("sd35", str(folders["sd35"]), device="cpu", guidance=4.5)
    assert sd.guidance_scale == 4.5 and recorded_guidance(sd) == "4.5" and sd.do_cfg
    cond, x = sd.encode(["a red cat"]), sd.initial_noise([0])
    sigmas = sd.default_sigmas(2, x)
    at_7 = load_backbone("sd35", str(folders["sd35"]), device="cpu")
    assert at_7.guidance_scale == 7.0
    assert not torch.equal(sd.sample_latents(x, cond, sigmas), at_7.sample_latents(x, at_7.encode(["a red cat"]), sigmas))


def test_schnell_takes_no_guidance(folders):
    schnell = load_backbone("flux-schnell", str(folders["flux-schnell"]), device="cpu")
    assert recorded_guidance(schnell) is None
    with pytest.raises(JsbenchError, match="takes no guidance scale"):
        load_backbone("flux-schnell", str(folders["flux-schnell"]), device="cpu", guidance=3.5)
    with pytest.raises(JsbenchError, match="no --guidance option"):
        load_backbone("analytic", device="cpu", guidance=2.0)
    with pytest.raises(JsbenchError, match="finite number"):
        load_backbone("flux-dev", str(folders["flux-dev"]), device="cpu", guidance=-1.0)


@pytest.mark.parametrize("name, folder, other", [("flux-schnell", "flux-dev", "flux-dev"), ("flux-dev", "flux-schnell", "flux-schnell")])
def test_weights_of_the_other_flux_variant_are_refused(folders, name, folder, other):
    with pytest.raises(JsbenchError, match=f"these are {other} weights; use --backbone {other}"):
        load_backbone(name, str(folders[folder]), device="cpu")


def test_sd35_large_refuses_medium_weights(folders, tmp_path):
    """The tiny SD3.5 transformer given dual-attention layers stands for Medium's MMDiT-X."""
    from diffusers import SD3Transformer2DModel

    import shutil

    folder = tmp_path / "medium-like"
    shutil.copytree(folders["sd35"], folder)
    cfg = json.loads((folder / "transformer" / "config.json").read_text())
    cfg["dual_attention_layers"] = [0]
    SD3Transformer2DModel.from_config(cfg).save_pretrained(folder / "transformer", safe_serialization=True)
    with pytest.raises(JsbenchError, match="SD3.5 Medium weights; use --backbone sd35-medium"):
        load_backbone("sd35-large", str(folder), device="cpu")
    assert load_backbone("sd35-medium", str(folder), device="cpu").name == "sd35-medium"


class _ContrastSuite(Suite):
    name = "guidance-contrast"
    primary_metric = "contrast"
    protocol_seeds = 1
    overall_rule = TASK_MEAN_RULE

    def __init__(self, backbone=None, **options):
        pass

    def items(self, split: str = "test"):
        from jsbench.suites.base import EvalItem

        return [EvalItem(p, "contrast") for p in ("a red cat", "a blue dog")]

    def score(self, images, items):
        return [{"contrast": float(v)} for v in images.float().mean(1).flatten(1).std(1)]

    def aggregate(self, scores, items):
        from jsbench.suites.base import aggregate_by_task

        return aggregate_by_task(scores, items)


def _register():
    from jsbench.rewards import register_reward
    from jsbench.suites import available_suites, register_suite

    if "guidance-contrast" not in available_suites():
        register_suite("guidance-contrast")(_ContrastSuite)
        register_reward("guidance-contrast")(lambda backbone=None: (lambda images, prompts: images.float().mean(1).flatten(1).std(1)))


def test_guidance_on_the_command_line(folders, tmp_path, cli):
    """`eval --guidance` samples at that scale and its records carry it; a model without guidance refuses it."""
    _register()
    out = tmp_path / "records.jsonl"
    code, stdout, stderr = cli("eval", "--backbone", "flux-dev", "--model", str(folders["flux-dev"]), "--suite", "guidance-contrast",
                               "--steps", "2", "--seeds", "1", "--guidance", "2.5", "--device", "cpu", "--out", str(out), "--no-progress")
    assert code == 0, stdout + stderr
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records and all(r["guidance"] == "2.5" for r in records)
    code, stdout, stderr = cli("eval", "--backbone", "flux-schnell", "--model", str(folders["flux-schnell"]), "--suite",
                               "guidance-contrast", "--steps", "2", "--guidance", "1", "--device", "cpu", "--out", str(out), "--no-progress")
    assert code == 2 and "takes no guidance scale" in stderr and len(stderr.strip().splitlines()) == 1, stderr


def test_train_manifest_records_the_guidance(folders, tmp_path):
    from jsbench.train.reinforce import TrainConfig, Trainer

    _register()
    config = TrainConfig(backbone="flux-dev", model=str(folders["flux-dev"]), steps=2, suite="guidance-contrast",
                         reward="guidance-contrast", iters=1, contexts=3, samples=2, baseline="js", device="cpu", guidance=2.0)
    trainer = Trainer(config, tmp_path / "run")
    assert trainer.backbone.guidance_scale == 2.0
    trainer.train(progress=False)
    manifest = json.loads((trainer.save_policy() / "manifest.json").read_text())
    assert manifest["guidance"] == "2" and manifest["train"]["guidance"] == 2.0
