"""The cross-attention policy (issue 28): sizes at full scale, the default schedule untrained, the prompt's
tokens read through cross-attention, bf16 and the meta device, the architecture train builds and records."""

from __future__ import annotations

import json

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.policy.schedule_policy import (
    CrossAttentionSchedulePolicy,
    DirichletSchedulePolicy,
    PolicyError,
    load_policy,
    make_policy,
)

from tiny_pipelines import PROMPTS, one_thread, tiny_backbone, tiny_dir  # noqa: F401 (one_thread: a fixture)

pytestmark = pytest.mark.usefixtures("one_thread")

REAL = ["flux-dev", "sd35", "sdxl"]


def _scramble_head(policy, seed: int = 0):
    """A trained-looking head: the zero head hides every input, so a test of what the policy reads needs one."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        policy.head.weight.copy_(torch.randn(policy.head.weight.shape, generator=g, device="cpu"))
    return policy


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
@pytest.mark.parametrize("name", ["flux-dev", "sd35-large", "sdxl"])
def test_full_size_policy_is_20m_parameters_reads_tokens_and_costs_under_1_percent(name):
    from jsbench.policy.size import policy_size

    row = policy_size(name)
    assert row["arch"] == "xattn"
    assert 10e6 <= row["params"] <= 40e6, row
    assert any(r.startswith("tokens[") for r in row["reads"]), row["reads"]
    assert 0 < row["sampler_share"] <= 0.01, row
    assert row["gflops_per_row"] > 0.1  # a real count, not an empty forward
    small = policy_size(name, arch="small", sampler=False)
    assert small["params"] < 2e6 and not any(r.startswith("tokens[") for r in small["reads"])


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_policies_size_cli_json_and_refusals(cli):
    code, out, err = cli("policies", "size", "--backbone", "sdxl", "--steps", "4", "--format", "json")
    assert code == 0, err
    row = json.loads(out)
    assert set(row) >= {"params", "reads", "gflops_per_row", "sampler_share"} and row["steps"] == 4
    assert "tokens[77,2048] (CLIP 77)" in row["reads"]
    code, out, err = cli("policies", "size", "--backbone", "sd35-medium", "--format", "json")
    assert code == 0 and json.loads(out)["params"] == json.loads(cli("policies", "size", "--backbone", "sd35", "--format", "json")[1])["params"]
    for name in ("analytic", "scenes-dit"):  # no published full-size shapes
        code, out, err = cli("policies", "size", "--backbone", name)
        assert code == 2 and len(err.strip().splitlines()) == 1 and "full-size" in err
    code, out, err = cli("policies", "size", "--backbone", "sdxl", "--policy-arch", "big")
    assert code == 2 and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("kind", REAL + ["detail"])
def test_untrained_xattn_policy_is_the_default_schedule(kind):
    bb = load_backbone("detail") if kind == "detail" else tiny_backbone(kind)
    torch.manual_seed(0)
    policy = make_policy(bb, 4, arch="xattn")
    assert isinstance(policy, CrossAttentionSchedulePolicy)
    x = bb.initial_noise([0, 1, 2])
    cond = bb.encode(PROMPTS if kind != "detail" else ["a photo of a circle with fine stripes"] * 3)
    expected = bb.default_sigmas(4, x).to(torch.float32)
    assert torch.allclose(policy.mean_sigmas(x, cond.pooled, cond.tokens, cond.token_mask), expected, atol=1e-5)


@pytest.mark.parametrize("kind", REAL)
def test_conditions_carry_masked_tokens_of_the_declared_width(kind):
    bb = tiny_backbone(kind)
    cond = bb.encode(PROMPTS)
    assert cond.tokens.shape[0] == 3 and cond.tokens.shape[2] == bb.token_dim
    assert cond.token_mask.dtype == torch.bool and cond.token_mask.shape == cond.tokens.shape[:2]
    lengths = cond.token_mask.sum(1)
    assert (lengths > 0).all() and (lengths < cond.tokens.shape[1]).all()  # padding is masked out
    assert lengths[1] > lengths[0]  # the longer prompt has more tokens
    taken = cond.take([2, 0])
    assert torch.equal(taken.tokens[1], cond.tokens[0]) and torch.equal(taken.token_mask[0], cond.token_mask[2])


@pytest.mark.parametrize("kind", REAL + ["detail"])
def test_output_follows_the_prompt_tokens_with_the_pooled_vector_fixed(kind):
    bb = load_backbone("detail") if kind == "detail" else tiny_backbone(kind)
    prompts = ["a photo of a circle with fine stripes", "a photo of two squares with broad stripes"] if kind == "detail" else PROMPTS[:2]
    torch.manual_seed(0)
    policy = _scramble_head(make_policy(bb, 4, arch="xattn"))
    x = bb.initial_noise([0, 0])
    a, b = bb.encode(prompts[:1] * 2), bb.encode(prompts[1:] * 2)
    with torch.no_grad():
        base = policy.concentration(x, a.pooled, a.tokens, a.token_mask)
        swapped = policy.concentration(x, a.pooled, b.tokens, b.token_mask)  # only the tokens differ
        padded = a.tokens.clone()
        padded[~a.token_mask] = 7.0  # padding positions carry no weight
        same = policy.concentration(x, a.pooled, padded, a.token_mask)
    assert (base - swapped).abs().max() > 1e-4
    assert torch.allclose(base, same, atol=1e-6)


def test_gradients_reach_the_cross_attention(tmp_path):
    from jsbench.train.reinforce import TrainConfig, Trainer

    config = TrainConfig(backbone="detail", steps=3, iters=4, contexts=16, samples=4, seed=0, policy_arch="xattn")
    trainer = Trainer(config, tmp_path / "pol")
    cross = trainer.policy.features.blocks[0].cross
    before = {n: p.detach().clone() for n, p in cross.named_parameters()}
    trainer.train(progress=False)
    moved = [n for n, p in cross.named_parameters() if not torch.equal(p, before[n])]
    assert {"q.weight", "kv.weight"} <= set(moved), moved
    # and the loss's gradient reaches them directly once the head is non-zero
    ro = trainer.rollout(4)
    trainer.policy.zero_grad()
    trainer.policy_loss(ro)[0].backward()
    assert cross.kv.weight.grad.abs().sum() > 0 and trainer.policy.features.text_in.weight.grad.abs().sum() > 0


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_train_builds_xattn_on_real_backbones_and_small_on_the_embedded_worlds(tmp_path, monkeypatch):
    import jsbench.train.reinforce as train_mod
    from jsbench.train.reinforce import TrainConfig, Trainer

    monkeypatch.setattr(train_mod, "load_reward", lambda name, backbone=None: (lambda images, prompts: images.mean((1, 2, 3))))
    for kind in REAL:
        config = TrainConfig(backbone=kind, model=str(tiny_dir(kind)), steps=3, suite="ocr", reward="ocr", iters=1, contexts=2, samples=2, baseline="rloo")
        trainer = Trainer(config, tmp_path / kind, backbone=tiny_backbone(kind))
        assert isinstance(trainer.policy, CrossAttentionSchedulePolicy), kind
        record = trainer.step(0)
        assert "skipped" not in record
        trainer.iteration = 1
        path = trainer.save_policy()
        manifest = json.loads((path / "manifest.json").read_text())
        assert manifest["config"]["arch"] == "xattn" and manifest["config"]["token_dim"] == tiny_backbone(kind).token_dim
        loaded, _ = load_policy(path, tiny_backbone(kind), 3)  # rebuilt from the manifest
        assert isinstance(loaded, CrossAttentionSchedulePolicy)
        for a, b in zip(loaded.parameters(), trainer.policy.parameters()):
            assert torch.equal(a, b)
    small = Trainer(TrainConfig(backbone="sdxl", model=str(tiny_dir("sdxl")), steps=3, suite="ocr", reward="ocr", iters=1, contexts=2, samples=2,
                                baseline="rloo", policy_arch="small"), tmp_path / "small", backbone=tiny_backbone("sdxl"))
    assert isinstance(small.policy, DirichletSchedulePolicy) and small.policy.config.width == 128
    for name in ("analytic", "detail"):
        trainer = Trainer(TrainConfig(backbone=name, steps=3, iters=1, contexts=4, samples=2), tmp_path / name)
        assert isinstance(trainer.policy, DirichletSchedulePolicy) and trainer.policy.config.arch == "small"


def test_a_manifest_without_an_arch_loads_as_the_small_policy(tmp_path):
    """Policies saved before --policy-arch have no arch field in their manifests: they load as the small policy
    (a shipped detail policy with the field taken out of its manifest)."""
    import shutil
    from pathlib import Path

    shipped = Path(__file__).resolve().parents[1] / "policies" / "detail" / "js-n3" / "seed0"
    older = tmp_path / "older"
    shutil.copytree(shipped, older)
    m = json.loads((older / "manifest.json").read_text())
    assert m["kind"] == "instance" and m["config"].pop("arch") == "small"
    (older / "manifest.json").write_text(json.dumps(m, indent=2, sort_keys=True) + "\n")
    policy, _ = load_policy(older, load_backbone("detail"))
    assert isinstance(policy, DirichletSchedulePolicy) and policy.config.arch == "small"


def test_xattn_refuses_what_it_cannot_read():
    bb = load_backbone("detail")
    with pytest.raises(PolicyError, match="prompt policy takes arch small"):
        make_policy(bb, 3, kind="prompt", arch="xattn")
    policy = make_policy(bb, 3, arch="xattn")
    x = bb.initial_noise([0])
    with pytest.raises(PolicyError, match="tokens"):
        policy.mean_sigmas(x, bb.encode(["a photo of a circle with fine stripes"]).pooled)


def test_embedded_token_rows_are_the_words_of_every_prompt():
    from jsbench.suites import load_suite
    from jsbench.world import TOKEN_LENGTH

    for name in ("analytic", "detail"):
        bb = load_backbone(name)
        prompts = [it.prompt for it in load_suite("geneval", bb).items("all")]
        cond = bb.encode(prompts)
        assert torch.allclose(cond.tokens.sum(1), cond.pooled)  # one row per word: they sum to the bag of words
        assert cond.token_mask.sum(1).max() < TOKEN_LENGTH  # no prompt is cut


def test_bf16_backbone_float32_policy(tmp_path):
    bb = load_backbone("flux-dev", model=str(tiny_dir("flux-dev")), device="cpu", dtype="bf16")
    cond = bb.encode(PROMPTS)
    assert cond.tokens.dtype == torch.bfloat16
    torch.manual_seed(0)
    policy = _scramble_head(make_policy(bb, 28, arch="xattn"))
    assert all(p.dtype == torch.float32 for p in policy.parameters())
    x = bb.initial_noise([0, 1, 2])
    simplex = policy.sample_simplex(x, cond.pooled, 2, cond.tokens, cond.token_mask)
    sig = policy.sigmas(simplex)
    assert sig.dtype == torch.float32 and torch.isfinite(policy.log_prob(x, cond.pooled, simplex, cond.tokens, cond.token_mask)).all()


def test_policy_built_on_the_backbone_device_under_a_meta_default():
    """As test_gpu_path's stand-in: with meta as torch's default device, the xattn policy and its forward
    still live on the backbone's device (no tensor created without `device=`)."""
    from jsbench.policy.schedule_policy import build_policy_on

    bb = tiny_backbone("sd35")
    x, cond = bb.initial_noise([0, 1]), bb.encode(PROMPTS[:2])  # the backbone's own calls run with the CPU default
    config = make_policy(bb, 3, arch="xattn").config
    with torch.device("meta"):
        policy = _scramble_head(build_policy_on(config, bb))
        sig = policy.mean_sigmas(x, cond.pooled, cond.tokens, cond.token_mask)
        simplex = policy.sample_simplex(x, cond.pooled, 2, cond.tokens, cond.token_mask)
        assert torch.isfinite(policy.log_prob(x, cond.pooled, simplex, cond.tokens, cond.token_mask)).all()
    assert {p.device for p in policy.parameters()} == {bb.device} and sig.device == bb.device


def test_flux_patch_tokens_are_read_on_their_2d_grid():
    """The encoder unpacks Flux's packed 2x2 patches to the latent image they hold (diffusers' own packing,
    and a transcription of it), so its convolutions see 2-D neighbourhoods; a grid that is not square is
    refused in one line."""
    from diffusers import FluxPipeline

    from jsbench import JsbenchError
    from jsbench.policy.xattn import NoiseEncoder, patch_grid, unpack_patch_tokens

    x = torch.randn(2, 16, 8, 8)
    packed = FluxPipeline._pack_latents(x, 2, 16, 8, 8)
    # token (i, j) holds channel c of latent pixel (2i + a, 2j + b) at 4c + 2a + b, row-major over (i, j)
    mine = torch.stack([x[:, :, 2 * i:2 * i + 2, 2 * j:2 * j + 2].reshape(2, 64) for i in range(4) for j in range(4)], dim=1)
    assert torch.equal(packed, mine)
    assert patch_grid(packed.shape[1:]) == (16, 8, 8) and torch.equal(unpack_patch_tokens(packed, (16, 8, 8)), x)
    encoder = NoiseEncoder(packed.shape[1:], 64)
    assert isinstance(encoder.stem, torch.nn.Conv2d) and encoder.stem.in_channels == 16
    assert encoder(packed).shape[0] == 2
    with pytest.raises(JsbenchError, match="not one"):
        NoiseEncoder((12, 64), 64)  # 12 patches: no square grid
