"""LatentFeatures: the policy's encoder of real latents (image [C,H,W], packed tokens [S,C], vectors [D])."""

from __future__ import annotations

import pytest
import torch

from jsbench.policy.features import (
    LatentFeatures,
    full_size_config,
    latent_features_flops,
    latent_kind,
    policy_parameter_count,
)

from tiny_pipelines import TINY_KINDS, one_thread, tiny_backbone

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.parametrize("shape", [(4, 16, 16), (16, 8, 12), (64, 16), (256, 64), (12,)])
def test_shapes_and_gradients(shape):
    torch.manual_seed(0)
    f = LatentFeatures(shape, width=32, text_dim=24)
    x = torch.randn(3, *shape, requires_grad=True)
    text = torch.randn(3, 24)
    y = f(x, text)
    assert y.shape == (3, 32) and torch.isfinite(y).all()
    y.square().sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    dead = [n for n, p in f.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not dead, dead
    assert f(x).shape == (3, 32)  # text is optional


def test_rows_are_independent_and_position_matters():
    torch.manual_seed(0)
    f = LatentFeatures((4, 16, 16), width=32).eval()
    x = torch.randn(2, 4, 16, 16)
    torch.testing.assert_close(f(x)[1:], f(x[1:]), atol=1e-5, rtol=1e-5)
    shifted = torch.roll(x, shifts=5, dims=-1)  # same values, different places
    assert not torch.allclose(f(x), f(shifted), atol=1e-4)


def test_wrong_shape_and_kind():
    f = LatentFeatures((4, 8, 8), width=16)
    with pytest.raises(ValueError):
        f(torch.randn(2, 4, 8, 9))
    with pytest.raises(ValueError):
        latent_kind((1, 2, 3, 4))
    assert latent_kind((4096, 64)) == "tokens"


@pytest.mark.parametrize("shape", [(4, 128, 128), (16, 128, 128), (4096, 64)])
def test_full_size_is_about_twenty_million(shape):
    """The paper-scale policy at the real latent sizes (SD-XL, SD3.5, Flux at 1024 px), counted on meta."""
    counts = policy_parameter_count(**full_size_config(shape), latent_shape=shape)
    assert 15e6 <= counts["total"] <= 25e6, counts
    assert latent_features_flops(shape, **full_size_config(shape)) > 0


@pytest.mark.parametrize("kind", TINY_KINDS)
def test_on_the_tiny_backbones_noise(kind):
    bb = tiny_backbone(kind)
    f = LatentFeatures(bb.latent_shape, width=16, text_dim=bb.pooled_dim)
    x = bb.initial_noise([0, 1])
    cond = bb.encode(["a red cat", "a blue dog"])
    y = f(x.cpu(), cond.pooled.cpu())
    assert y.shape == (2, 16) and y.dtype == torch.float32
