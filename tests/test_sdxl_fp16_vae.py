"""SD-XL in fp16 decodes in float32 when the VAE config says `force_upcast`, as the pipeline does (issue 23)."""

from __future__ import annotations

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.backbones.tiny import save_tiny_pipeline


@pytest.fixture(scope="module")
def overflowing_sdxl(tmp_path_factory):
    """The tiny SD-XL pipeline whose VAE decoder overflows fp16: its first conv scaled by 1e4 (the next
    GroupNorm undoes the scale in float32, so the float32 image is an ordinary one)."""
    folder = save_tiny_pipeline("sdxl", tmp_path_factory.mktemp("sdxl-fp16") / "sdxl")
    from diffusers import AutoencoderKL

    vae = AutoencoderKL.from_pretrained(folder / "vae")
    assert vae.config.force_upcast  # SD-XL base's VAE config sets it too
    with torch.no_grad():
        vae.decoder.conv_in.weight.mul_(1e4)
        vae.decoder.conv_in.bias.mul_(1e4)
    vae.save_pretrained(folder / "vae", safe_serialization=True)
    return folder


def test_fp16_sdxl_upcasts_an_overflowing_vae(overflowing_sdxl):
    bb = load_backbone("sdxl", str(overflowing_sdxl), device="cpu", dtype="fp16")
    assert bb.vae_upcast and bb.pipe.vae.dtype == torch.float32 and bb.pipe.unet.dtype == torch.float16
    cond, x = bb.encode(["a red cat", "a blue dog"]), bb.initial_noise([0, 1])
    latents = bb.sample_latents(x, cond, bb.default_sigmas(2, x))
    assert latents.dtype == torch.float16
    images = bb.decode(latents)
    assert torch.isfinite(images).all() and images.std() > 0
    # the control: the same VAE decoding in fp16 overflows (so the check above can fail)
    vae16 = bb.pipe.vae.to(torch.float16)
    with torch.no_grad():
        raw = vae16.decode(latents / vae16.config.scaling_factor, return_dict=False)[0]
    assert not torch.isfinite(raw).all()


def test_fp32_and_bf16_keep_the_vae_dtype(overflowing_sdxl):
    for dtype, expect in (("fp32", torch.float32), ("bf16", torch.bfloat16)):
        bb = load_backbone("sdxl", str(overflowing_sdxl), device="cpu", dtype=dtype)
        assert not bb.vae_upcast and bb.pipe.vae.dtype == expect
