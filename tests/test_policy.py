import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from jsbench.backbones import load_backbone
from jsbench.policy.schedule_policy import LOG_ALPHA_MAX, LOG_ALPHA_MIN, PolicyError, load_policy, make_policy
from jsbench.schedule import check_sigmas


@pytest.fixture(scope="module")
def backbone():
    return load_backbone("analytic")


def _batch(backbone, n=6):
    prompts = ["a photo of a circle", "a photo of two squares", "a photo of a red ring"] * (n // 3)
    return backbone.initial_noise(range(n)), backbone.encode(prompts)


@pytest.mark.parametrize("kind", ["instance", "prompt", "global"])
@pytest.mark.parametrize("steps", [1, 3, 5, 20])
def test_untrained_policy_reproduces_the_default_schedule(backbone, kind, steps):
    x, cond = _batch(backbone)
    policy = make_policy(backbone, steps, kind)
    expected = backbone.default_sigmas(steps, x)
    assert torch.allclose(policy.mean_sigmas(x, cond.pooled), expected, atol=1e-5)
    # and in expectation over samples, not only through the mean
    simplex = policy.sample_simplex(x, cond.pooled, 4000)
    mean_inc = policy.increments(simplex).mean(1)
    assert torch.allclose(mean_inc, expected[:, :-1] - expected[:, 1:], atol=0.01)


def test_samples_and_log_probs(backbone):
    x, cond = _batch(backbone)
    policy = make_policy(backbone, 5, "instance")
    simplex = policy.sample_simplex(x, cond.pooled, 3)
    assert simplex.shape == (6, 3, 5)
    lp = policy.log_prob(x, cond.pooled, simplex)
    assert lp.shape == (6, 3) and torch.isfinite(lp).all()
    lp.sum().backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.parameters())


def test_instance_policy_depends_on_noise_prompt_policy_does_not(backbone):
    x, cond = _batch(backbone)
    for kind, should_change in [("instance", True), ("prompt", False)]:
        policy = make_policy(backbone, 4, kind)
        torch.nn.init.normal_(policy.head.weight, std=0.5)
        a = policy.concentration(x, cond.pooled)
        b = policy.concentration(torch.randn_like(x), cond.pooled)
        assert (not torch.allclose(a, b)) == should_change


@settings(max_examples=60, deadline=None)
@given(st.floats(-80.0, 80.0), st.integers(2, 12))
def test_extreme_policy_outputs_are_clamped_and_schedules_stay_valid(bias, steps):
    # a head pushed to absurd values must neither underflow nor overflow the Dirichlet, and no schedule
    # with a zero step may come out
    bb = load_backbone("analytic")
    x, cond = _batch(bb)
    policy = make_policy(bb, steps, "instance")
    with torch.no_grad():
        policy.head.bias.copy_(torch.linspace(-bias, bias, steps))
    alpha = policy.concentration(x, cond.pooled)
    assert torch.isfinite(alpha).all()
    assert alpha.min() >= torch.tensor(LOG_ALPHA_MIN).exp() * 0.999
    assert alpha.max() <= torch.tensor(LOG_ALPHA_MAX).exp() * 1.001
    simplex = policy.sample_simplex(x, cond.pooled, 8)
    check_sigmas(policy.sigmas(simplex).reshape(-1, steps + 1))
    check_sigmas(policy.mean_sigmas(x, cond.pooled))
    assert torch.isfinite(policy.log_prob(x, cond.pooled, simplex)).all()


def test_save_load_roundtrip_and_manifest(backbone, tmp_path):
    x, cond = _batch(backbone)
    policy = make_policy(backbone, 3, "instance")
    torch.nn.init.normal_(policy.head.weight, std=0.1)
    policy.save(tmp_path / "p", {"backbone": "analytic", "baseline": "js", "reward": "geneval"})
    loaded, manifest = load_policy(tmp_path / "p", backbone=backbone, steps=3)
    assert manifest["baseline"] == "js" and manifest["steps"] == 3 and len(manifest["checksum"]) == 64
    assert torch.equal(loaded.mean_sigmas(x, cond.pooled), policy.mean_sigmas(x, cond.pooled))


def test_load_refuses_wrong_backbone_steps_and_corruption(backbone, tmp_path):
    policy = make_policy(backbone, 3, "global")
    policy.save(tmp_path / "p", {"backbone": "analytic"})
    with pytest.raises(PolicyError, match="trained for 3 steps, not 5"):
        load_policy(tmp_path / "p", backbone=backbone, steps=5)
    manifest = json.loads((tmp_path / "p" / "manifest.json").read_text())
    manifest["backbone"] = "flux-dev"
    (tmp_path / "p" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(PolicyError, match="trained for backbone 'flux-dev'"):
        load_policy(tmp_path / "p", backbone=backbone)
    weights = tmp_path / "p" / "policy.safetensors"
    weights.write_bytes(weights.read_bytes()[:-7])
    with pytest.raises(PolicyError, match="corrupt"):
        load_policy(tmp_path / "p")
    with pytest.raises(PolicyError, match="missing"):
        load_policy(tmp_path / "nowhere")
