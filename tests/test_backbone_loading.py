"""Loading real backbones: local folders and the HF cache only, one-line errors, registry, dtype.

Nothing here may touch the network: hub ids used are either not cached (checked first) or fake, and
HF_HUB_OFFLINE is set for the tests that name a hub id.
"""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from jsbench import JsbenchError
from jsbench.backbones import available_backbones, backbone_class, load_backbone
from jsbench.backbones._diffusers import BackboneLoadError, BackboneWeightsMissing, cached_hub_file

from tiny_pipelines import TINY_KINDS, one_thread, tiny_backbone, tiny_dir

pytestmark = pytest.mark.usefixtures("one_thread")

#: the real backbones and their default hub ids, as their classes declare them (pinned once, in
#: test_default_model_ids_and_step_defaults)
REAL = {name: backbone_class(name).default_model_id for name in ("sdxl", "sd35", "sd35-medium", "sd35-large", "flux-dev", "flux-schnell")}


def _one_line(exc: BaseException) -> str:
    msg = str(exc)
    assert "\n" not in msg, msg
    return msg


def test_registry_lists_the_real_backbones():
    names = available_backbones()
    for name in REAL:
        assert name in names


@pytest.mark.parametrize("name", sorted(REAL))
def test_missing_default_weights_give_one_line_with_id_and_fetch_command(name, monkeypatch):
    if cached_hub_file(REAL[name], "model_index.json") is not None:
        pytest.skip(f"{REAL[name]} is cached here; not loading a full-size model in a unit test")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(BackboneWeightsMissing) as info:
        load_backbone(name, device="cpu")
    msg = _one_line(info.value)
    assert REAL[name] in msg and f"hf download {REAL[name]}" in msg
    assert isinstance(info.value, JsbenchError)


def test_unknown_hub_id_is_not_fetched(monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("JSBENCH_ALLOW_DOWNLOAD", raising=False)
    with pytest.raises(BackboneWeightsMissing) as info:
        load_backbone("flux-dev", model="jsbench-tests/no-such-model", device="cpu")
    assert "jsbench-tests/no-such-model" in _one_line(info.value)


def test_missing_local_folder_and_non_pipeline_folder(tmp_path):
    with pytest.raises(BackboneWeightsMissing) as info:
        load_backbone("sdxl", model=str(tmp_path / "nope"), device="cpu")
    assert str(tmp_path / "nope") in _one_line(info.value)
    with pytest.raises(BackboneWeightsMissing) as info:
        load_backbone("sdxl", model=str(tmp_path), device="cpu")
    assert "model_index.json" in _one_line(info.value)


def test_incomplete_local_folder_names_the_fetch_command(tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_dir("flux-schnell"), broken)
    for f in (broken / "transformer").glob("*.safetensors"):
        f.unlink()
    with pytest.raises(BackboneWeightsMissing) as info:
        load_backbone("flux-schnell", model=str(broken), device="cpu")
    msg = _one_line(info.value)
    assert f"hf download {REAL['flux-schnell']} --local-dir {broken}" in msg


def test_wrong_pipeline_for_the_backbone():
    with pytest.raises(BackboneLoadError) as info:
        load_backbone("flux-dev", model=str(tiny_dir("sd35")), device="cpu")
    assert "StableDiffusion3Pipeline" in _one_line(info.value)


@pytest.mark.parametrize("kind", TINY_KINDS)
def test_local_folder_loads_with_its_sampling_defaults(kind):
    bb = tiny_backbone(kind)
    meta = json.loads((tiny_dir(kind) / "jsbench.json").read_text())
    assert (bb.height, bb.width) == (meta["height"], meta["width"])
    assert bb.name == kind and bb.model_id == str(tiny_dir(kind))
    if bb.device.type == "cpu":
        assert bb.dtype == torch.float32
        assert all(p.dtype == torch.float32 for p in bb.pipe.vae.parameters())
    else:
        assert bb.dtype == torch.bfloat16
    assert all(not p.requires_grad for p in bb.pipe.vae.parameters())


def test_default_model_ids_and_step_defaults():
    from jsbench.backbones.flux import FluxDevBackbone, FluxSchnellBackbone
    from jsbench.backbones.sd35 import SD35Backbone, SD35LargeBackbone
    from jsbench.backbones.sdxl import SDXLBackbone

    # the hub ids, pinned here once (everything else reads them from the classes)
    assert SDXLBackbone.default_model_id == "stabilityai/stable-diffusion-xl-base-1.0" and SDXLBackbone.default_steps == 50
    assert SD35Backbone.default_model_id == "stabilityai/stable-diffusion-3.5-medium"
    assert SD35LargeBackbone.default_model_id == "stabilityai/stable-diffusion-3.5-large"
    assert REAL["sd35-medium"] == SD35Backbone.default_model_id and backbone_class("sd35-large") is SD35LargeBackbone
    assert FluxDevBackbone.default_model_id == "black-forest-labs/FLUX.1-dev"
    assert FluxSchnellBackbone.default_model_id == "black-forest-labs/FLUX.1-schnell"
    assert FluxDevBackbone.default_steps == 28 and FluxDevBackbone.default_guidance == 3.5
    assert FluxSchnellBackbone.default_steps == 4 and FluxSchnellBackbone.default_guidance == 0.0
