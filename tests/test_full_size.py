"""jsbench.backbones.full_size: the real denoisers from their declared configs, one step's inputs (issue 27)."""

from __future__ import annotations

import pytest
import torch

from jsbench.backbones.full_size import FULL_SIZE, full_size, measure_denoiser_step

# published parameter counts of the denoisers (billions): SD-XL UNet 2.6, SD3.5 Medium 2.2 / Large 8.1, FLUX.1 11.9
PARAMS_B = {"sdxl": 2.57, "sd35": 2.24, "sd35-large": 8.06, "flux-dev": 11.90, "flux-schnell": 11.89}


@pytest.mark.parametrize("kind", sorted(FULL_SIZE))
def test_full_size_step_on_meta(kind):
    row = measure_denoiser_step(kind, "meta", torch.bfloat16)
    assert abs(row["params"] / 1e9 - PARAMS_B[kind]) < 0.01, row["params"]
    spec = full_size(kind)
    assert row["output_shape"] == [spec["cfg_batch"], *spec["latent"]]
    assert row["seconds_per_step"] is None and row["peak_gib"] is None  # timed and measured on CUDA only


# Published sizes (parameters, or the entries a checkpoint stores), each with its source. A config that drifted
# from the real one moves its count far more than the 2 % the rounding of these figures leaves.
PUBLISHED = {
    # Podell et al. 2023, "SDXL" (arXiv:2307.01952), Table 1: UNet 2.6B
    "unet-sdxl": 2.6e9,
    # stabilityai/stable-diffusion-3.5-medium model card: "MMDiT-X ... 2.5 billion parameters" (with the stored
    # 384x384x1536 positional table, 226M entries: 2.24B parameters alone)
    "mmdit-sd35-medium": 2.5e9,
    # stabilityai/stable-diffusion-3.5-large model card: "8.1 billion parameters"
    "mmdit-sd35-large": 8.1e9,
    # black-forest-labs/FLUX.1-dev and -schnell model cards: "12 billion parameter rectified flow transformer"
    # (flux1-dev.safetensors, 23.8 GB of bf16: 11.9B)
    "flux": 11.9e9,
    # OpenCLIP docs/model_profile.csv, text parameters: ViT-L-14 123.65M (with its projection), ViT-bigG-14 694.66M;
    # the SDXL paper's 817M of text encoders is 123.06M (CLIP-L without projection) + 694.66M
    "clip-l": 123.06e6, "clip-l-proj": 123.65e6, "clip-g": 694.66e6,
    # Esser et al. 2024, "Scaling Rectified Flow Transformers" (SD3, arXiv:2403.03206), section 5.2: T5-XXL encoder, 4.7B
    "t5-xxl": 4.7e9,
    # stabilityai/sdxl-vae and FLUX.1's ae.safetensors: 335 MB of float32 each, 83.7M entries
    "vae": 83.7e6,
}
DENOISERS = {"sdxl": "unet-sdxl", "sd35": "mmdit-sd35-medium", "sd35-large": "mmdit-sd35-large", "flux-dev": "flux", "flux-schnell": "flux"}


@pytest.mark.parametrize("kind", sorted(FULL_SIZE))
def test_full_size_components_have_their_published_sizes(kind):
    from jsbench.backbones.full_size import component_sizes

    sizes = component_sizes(kind)
    assert sizes["denoiser"] == pytest.approx(PUBLISHED[DENOISERS[kind]], rel=0.02)
    assert sizes["vae"] == pytest.approx(PUBLISHED["vae"], rel=0.02)
    for name, n in sizes["text_encoders"].items():
        assert n == pytest.approx(PUBLISHED[name], rel=0.02 if name == "t5-xxl" else 0.0001), name
    expected = {"sdxl": ["clip-l", "clip-g"], "flux-dev": ["clip-l", "t5-xxl"], "flux-schnell": ["clip-l", "t5-xxl"]}
    assert list(sizes["text_encoders"]) == expected.get(kind, ["clip-l-proj", "clip-g", "t5-xxl"])


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
@pytest.mark.parametrize("kind", ["sdxl", "sd35-medium", "flux-dev"])
def test_full_size_random_backbone_is_built_on_its_device_without_weights(kind):
    """`--model full-size-random`: the whole pipeline, the published classes and configs with the small offline
    tokenizers, created on the requested device (meta here: nothing is materialised on the CPU)."""
    from jsbench.backbones import load_backbone
    from jsbench.backbones.full_size import FULL_SIZE_RANDOM, component_sizes, full_size_owner, stored_numel

    bb = load_backbone(kind, model=FULL_SIZE_RANDOM, device="meta", dtype="bf16")
    modules = {k: v for k, v in bb.pipe.components.items() if isinstance(v, torch.nn.Module)}
    assert {t.device.type for m in modules.values() for t in m.parameters()} == {"meta"}
    assert {t.dtype for m in modules.values() for t in m.parameters()} == {torch.bfloat16}
    sizes = component_sizes(full_size_owner(kind))
    denoiser = modules.get("unet", modules.get("transformer"))
    assert stored_numel(denoiser) == sizes["denoiser"] and stored_numel(bb.pipe.vae) == sizes["vae"]
    assert (bb.height, bb.width) == (1024, 1024) and bb.latent_shape[-1] in (64, 128)
    ids = bb.pipe.tokenizer(["a red cat on a blue car"], padding="max_length", max_length=77).input_ids
    assert max(ids[0]) < bb.pipe.text_encoder.config.vocab_size


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_policies_size_reports_the_backbone_per_component(cli):
    import json

    code, out, err = cli("policies", "size", "--backbone", "sd35-medium", "--format", "json")
    assert code == 0, err
    sizes = json.loads(out)["backbone_params"]
    assert set(sizes) == {"denoiser", "text_encoders", "vae"} and set(sizes["text_encoders"]) == {"clip-l-proj", "clip-g", "t5-xxl"}
    assert sizes["denoiser"] == pytest.approx(2.47e9, rel=0.01)
