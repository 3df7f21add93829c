"""The peer methods as policies (docs/peer-methods.md): --policy tpdm and --policy indis, and the per-step
sampler path they need (a backbone's `euler_stepper`)."""

import json
import math
from functools import lru_cache

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.policy.schedule_policy import load_policy, make_policy
from jsbench.train.reinforce import TrainConfig, Trainer
from jsbench.train.peers import indis_loss, teacher_endpoints



@lru_cache(maxsize=None)
def backbone(name):
    return load_backbone(name, device="cpu")


@lru_cache(maxsize=None)
def prompts_of(name):
    from jsbench.suites import load_suite

    items = load_suite("geneval", backbone(name)).items("train")
    return [items[(i * 37) % len(items)].prompt for i in range(6)]


def rows(bb, n=6):
    prompts = [prompts_of(bb.name)[i % 6] for i in range(n)]
    return bb.encode(prompts), bb.initial_noise(range(100, 100 + n))


def step_through(bb, cond, x_T, sigmas):
    stepper = bb.euler_stepper(cond)
    return stepper.latents(stepper.run(x_T, sigmas))


@pytest.mark.parametrize("name", ["analytic", "detail"])
def test_stepping_along_fixed_times_is_sample_latents_bit_for_bit(name):
    bb = backbone(name)
    cond, x_T = rows(bb)
    for sigmas in (bb.default_sigmas(4, x_T), torch.tensor([[1.0, 0.7, 0.2, 0.05, 0.0]] * 6)):
        assert torch.equal(step_through(bb, cond, x_T, sigmas), bb.sample_latents(x_T, cond, sigmas))


def test_stepping_is_differentiable_and_equal_in_value_under_grad():
    bb = backbone("analytic")
    cond, x_T = rows(bb)
    sigmas = bb.default_sigmas(3, x_T).clone().requires_grad_(True)
    x = step_through(bb, cond, x_T, sigmas)
    assert torch.equal(x.detach(), bb.sample_latents(x_T, cond, sigmas.detach()))
    x.square().sum().backward()
    assert torch.isfinite(sigmas.grad).all() and sigmas.grad[:, 1:-1].abs().sum() > 0


def test_untrained_tpdm_is_the_default_schedule():
    bb = backbone("analytic")
    policy = make_policy(bb, 5, "tpdm")
    cond, x_T = rows(bb)
    got = policy.schedule_for(x_T, cond, bb)
    torch.testing.assert_close(got, bb.default_sigmas(5, x_T), atol=1e-6, rtol=0)
    assert got[:, -1].eq(0).all()
    # its draws scatter around the default (a high concentration), every one a valid schedule
    torch.manual_seed(0)
    _, drawn, states, ratios = policy.rollout(bb.euler_stepper(cond), x_T, cond.pooled, sample=True)
    assert len(states) == 4 and ratios.shape == (6, 4)
    assert (drawn[:, :-1] - drawn[:, 1:] > 0).all() and (drawn - got).abs().max() < 0.3


def test_tpdm_log_prob_is_the_sum_of_its_beta_log_probs():
    bb = backbone("analytic")
    policy = make_policy(bb, 3, "tpdm", concentration=20.0)
    with torch.no_grad():  # a network that reads its inputs
        for p in policy.parameters():
            p.add_(0.05 * torch.randn_like(p))
    cond, x_T = rows(bb, 2)
    torch.manual_seed(1)
    _, sigmas, states, ratios = policy.rollout(bb.euler_stepper(cond), x_T, cond.pooled)
    got = policy.trajectory_log_prob(states, sigmas, ratios, cond.pooled)
    for r in range(2):
        want = 0.0
        for n in range(2):
            a, b = (v[0].item() for v in policy.beta(states[n][r : r + 1], sigmas[r : r + 1, n], cond.pooled[r : r + 1], n))
            x = ratios[r, n].item()
            want += (a - 1) * math.log(x) + (b - 1) * math.log(1 - x) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
        assert got[r].item() == pytest.approx(want, rel=1e-4, abs=1e-4)
    # the sigmas are the ratios' products, ending at 0
    torch.testing.assert_close(sigmas[:, 1], ratios[:, 0])
    torch.testing.assert_close(sigmas[:, 2], ratios[:, 0] * ratios[:, 1])
    assert sigmas[:, 3].eq(0).all()


def test_indis_loss_decreases_over_a_few_updates():
    bb = backbone("analytic")
    torch.manual_seed(0)
    policy = make_policy(bb, 3, "indis")
    cond, x_T = rows(bb, 12)
    teacher = teacher_endpoints(bb, x_T, cond)
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    losses = []
    for _ in range(10):
        loss = indis_loss(policy, bb, x_T, cond, teacher)
        losses.append(float(loss.detach()))
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert losses[-1] < 0.7 * losses[0] and min(losses[-3:]) < min(losses[:3]), losses


@pytest.mark.parametrize("kind", ["tpdm", "indis"])
def test_train_then_eval_round_trip_on_analytic(cli, tmp_path, kind):
    out = tmp_path / kind
    code, _, err = cli("train", "--policy", kind, "--backbone", "analytic", "--steps", "3", "-B", "4", "--iters", "3",
                       "--heldout", "4", "--threads", "1", "--out", str(out), "--no-progress")
    assert code == 0, err
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["kind"] == kind and manifest["config"]["kind"] == kind
    log = [json.loads(ln) for ln in (out / "train_log.jsonl").read_text().splitlines()]
    assert len(log) == 3 and all("skipped" not in r and math.isfinite(r["loss"]) for r in log)
    policy, _ = load_policy(out, backbone=backbone("analytic"), steps=3)
    assert type(policy).__name__ == ("TPDMPolicy" if kind == "tpdm" else "DirichletSchedulePolicy")
    code, stdout, err = cli("eval", "--backbone", "analytic", "--steps", "3", "--schedule", f"policy:{out}", "--seeds", "1",
                            "--limit", "1", "--no-progress", "--out", str(tmp_path / f"{kind}.jsonl"))
    assert code == 0, err
    rec = [json.loads(ln) for ln in (tmp_path / f"{kind}.jsonl").read_text().splitlines()]
    assert rec and rec[0]["method"] == ("tpdm (js)" if kind == "tpdm" else "indis")


@pytest.mark.parametrize("args,words", [
    (["--policy", "indis", "--baseline", "rloo"], "--baseline means nothing for --policy indis"),
    (["--policy", "indis", "-K", "2"], "--samples means nothing for --policy indis"),
    (["--policy", "tpdm", "--policy-arch", "xattn"], "small network"),
])
def test_refusals_are_one_line(cli, tmp_path, args, words):
    code, _, err = cli("train", *args, "--iters", "1", "--out", str(tmp_path / "x"), "--no-progress")
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1, err


def test_an_unknown_policy_kind_names_the_peer_methods(cli, tmp_path):
    code, _, err = cli("train", "--policy", "bogus", "--out", str(tmp_path / "x"))
    assert code == 2 and "'tpdm', 'indis'" in err


def test_refused_on_a_backbone_without_a_flow_velocity():
    from types import SimpleNamespace

    from jsbench.backbones.sdxl import SDXLBackbone
    from jsbench.distributed import DistContext
    from jsbench.train.peers import PeerRunError, check_peer_run

    sdxl = SimpleNamespace(name="sdxl", velocity=SDXLBackbone.velocity, clock_kind=SDXLBackbone.clock_kind)
    for kind in ("tpdm", "indis"):
        with pytest.raises(PeerRunError, match="needs a flow velocity: backbone sdxl has none"):
            check_peer_run(TrainConfig(backbone="sdxl", policy=kind), sdxl, DistContext())


def test_tpdm_and_indis_train_on_scenes_dit():
    bb = backbone("scenes-dit")
    cond, x_T = rows(bb, 2)
    sigmas = bb.default_sigmas(3, x_T)
    assert torch.equal(step_through(bb, cond, x_T, sigmas), bb.sample_latents(x_T, cond, sigmas))
    for kind in ("tpdm", "indis"):
        cfg = TrainConfig(backbone="scenes-dit", policy=kind, steps=3, contexts=3, samples=4 if kind == "indis" else 2,
                          iters=1, heldout_prompts=0, baseline="js" if kind == "indis" else "rloo")
        tr = Trainer(cfg, "/nonexistent-unused", backbone=bb)
        record = tr.step(0)  # (tpdm's 0/1 rewards may tie on 3 contexts: then its step moves nothing)
        assert "skipped" not in record and math.isfinite(record["loss"]), record
        if kind == "indis":
            assert record["loss"] > 0 and record["grad_norm"] > 0
            assert all(p.grad is None for p in bb.net_parameters())  # the frozen backbone gets no gradient
        if kind == "tpdm":
            assert tr.policy.schedule_for(x_T, cond, bb).shape == (2, 4)
