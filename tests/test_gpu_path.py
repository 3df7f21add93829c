"""The real GPU path, proven on CPU proxies (issue 12).

- bf16 on CPU: a training update and a policy evaluation on tiny Flux-Dev, SD3.5 and SD-XL at N = 28, with
  Flux-Dev's dynamic shift at its 1024^2 value mu = 1.15 (tiny_mu_dir). Rounding sigmas to bf16 merged
  neighbouring steps near sigma = 1 there (ScheduleError) and made log_prob score a simplex other than the
  one that was run; schedules must reach the adapter in float32, exactly the policy's.
- A backbone on a device other than the default one: on a GPU, the default device (CPU) is not the
  backbone's, so a tensor our code creates without `device=` is on the wrong device. Here the roles are
  swapped: the backbone is on the CPU and our code runs with `meta` as the default device, so any tensor
  it creates implicitly is on meta, and a spy checks that every tensor reaching the backbone is on
  `backbone.device`. (Third-party code that relies on the CPU default, the backbone's own calls, the
  rewards and the optimizer's step counter, runs with the CPU default, as it does on a GPU machine.)
- --offload (diffusers' model CPU offload) and --dtype through the CLI; a missing relative --model path;
  the image tolerance of the CUDA parity tests against a dropped VAE shift_factor; scripts/gpu_smoke.sh.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from jsbench.backbones import load_backbone
from jsbench.schedule import check_sigmas

from tiny_pipelines import IMAGE_TOLERANCE_BF16, MU_TOKENS, PROMPTS, one_thread, pipeline_kwargs, tiny_dir, tiny_mu_dir

pytestmark = pytest.mark.usefixtures("one_thread")

ROOT = Path(__file__).resolve().parents[1]
N = 28


class Spy:
    """A backbone seen through a checkpoint: every tensor handed to it must be on `backbone.device` (sigmas
    also float32); the sigmas it samples are recorded. With `cpu_default`, the backbone's own calls run with
    the CPU as torch's default device (as on a GPU machine, where diffusers and tokenizers rely on it)."""

    def __init__(self, backbone, cpu_default: bool = False):
        self._bb = backbone
        self._cpu_default = cpu_default
        self.sigmas_seen: list[torch.Tensor] = []

    def __getattr__(self, name):
        return getattr(self._bb, name)

    def _ctx(self):
        return torch.device("cpu") if self._cpu_default else contextlib.nullcontext()

    def _check(self, *tensors):
        for t in tensors:
            assert t.device == self._bb.device, f"a tensor on {t.device} reached a backbone on {self._bb.device}"

    def _check_cond(self, cond):
        self._check(cond.pooled, *cond.tensors.values())

    def encode(self, prompts):
        with self._ctx():
            cond = self._bb.encode(prompts)
        self._check_cond(cond)
        return cond

    def initial_noise(self, seeds):
        with self._ctx():
            x = self._bb.initial_noise(seeds)
        self._check(x)
        return x

    def default_sigmas(self, steps, x_T):
        self._check(x_T)
        with self._ctx():
            return self._bb.default_sigmas(steps, x_T)

    def sample(self, x_T, cond, sigmas):
        self._check(x_T, sigmas)
        self._check_cond(cond)
        assert sigmas.dtype == torch.float32, f"sigmas reached the backbone as {sigmas.dtype}"
        self.sigmas_seen.append(sigmas.detach().clone())
        with self._ctx():
            return self._bb.sample(x_T, cond, sigmas)


class CpuDefault:
    """Run a reward or a suite's scoring with the CPU as the default device (they are not under test here)."""

    def __init__(self, inner):
        self._inner = inner

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            with torch.device("cpu"):
                return attr(*args, **kwargs)

        return call

    def __call__(self, *args, **kwargs):
        with torch.device("cpu"):
            return self._inner(*args, **kwargs)


def _ocr_or_skip():
    try:
        from jsbench.rewards import load_reward

        return load_reward("ocr", None)
    except Exception as exc:  # no OCR engine on this machine
        pytest.skip(f"no OCR engine here: {exc}")


def _record_log_prob(policy) -> list[torch.Tensor]:
    seen: list[torch.Tensor] = []
    inner = policy.log_prob

    def log_prob(x_T, pooled, simplex, *tokens):
        seen.append(simplex.detach().clone())
        return inner(x_T, pooled, simplex, *tokens)

    policy.log_prob = log_prob
    return seen


# ---- (a) bf16, N = 28, mu = 1.15 ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["flux-dev", "sd35", "sdxl"])
def test_bf16_training_update_and_policy_eval_at_28_steps(kind, tmp_path, cli):
    from jsbench.evaluation.evaluate import resolve_schedule
    from jsbench.suites import load_suite
    from jsbench.train.reinforce import TrainConfig, Trainer

    _ocr_or_skip()
    model = str(tiny_mu_dir(kind))
    bb = load_backbone(kind, model=model, device="cpu", dtype="bf16")
    assert bb.dtype == torch.bfloat16
    if kind == "flux-dev":
        assert bb.latent_shape[0] == MU_TOKENS and abs(bb._mu() - 1.15) < 1e-9  # Flux-Dev's 1024^2 shift
    spy = Spy(bb)
    config = TrainConfig(backbone=kind, model=model, steps=N, suite="ocr", reward="ocr", iters=1, contexts=2, samples=2, seed=0, dtype="bf16", baseline="rloo")
    trainer = Trainer(config, tmp_path / "pol", backbone=spy)
    assert all(p.dtype == torch.float32 and p.device == bb.device for p in trainer.policy.parameters())
    scored = _record_log_prob(trainer.policy)
    record = trainer.step(0)
    assert "skipped" not in record and math.isfinite(record["loss"]), record
    run = torch.cat(spy.sigmas_seen)
    assert run.dtype == torch.float32 and run.shape == (4, N + 1)
    check_sigmas(run)
    # log_prob scored exactly the simplex whose sigmas were run (bit for bit: no rounding in between)
    assert torch.equal(trainer.policy.sigmas(scored[0]).reshape(-1, N + 1), run)
    trainer.iteration = 1
    trainer.save_checkpoint()
    trainer.save_policy()

    # the policy's evaluation schedule reaches the sampler in float32 ...
    source = resolve_schedule(f"policy:{tmp_path / 'pol'}", spy, N)
    x = spy.initial_noise([0, 1])
    sig = source.make(x, spy.encode(PROMPTS[:2]))
    assert sig.dtype == torch.float32 and sig.device == bb.device
    check_sigmas(sig)
    # ... and `jsbench eval --schedule policy:PATH --dtype bf16` runs it end to end
    prompt = load_suite("ocr", bb).items("test")[0].prompt
    (tmp_path / "prompts.txt").write_text(prompt + "\n")
    code, out, err = cli(
        "eval", "--suite", "ocr", "--backbone", kind, "--model", model, "--steps", str(N), "--seeds", "2", "--dtype", "bf16",
        "--device", "cpu", "--schedule", f"policy:{tmp_path / 'pol'}", "--prompts-file", tmp_path / "prompts.txt",
        "--out", tmp_path / "rec.jsonl", "--no-progress",
    )
    assert code == 0, err
    records = [json.loads(line) for line in (tmp_path / "rec.jsonl").read_text().splitlines()]
    assert records and all(r["backbone"] == kind and r["steps"] == N for r in records)


def test_bf16_rounding_is_what_merged_the_steps():
    """Why schedules must stay float32: at N = 28 and mu = 1.15, the policy's draws (B = 16, K = 4, as in a
    default update) lose steps when rounded to bf16, and the surviving sigmas move by more than 1e-3."""
    from jsbench.policy.schedule_policy import make_policy
    from jsbench.schedule import ScheduleError

    bb = load_backbone("flux-dev", model=str(tiny_mu_dir("flux-dev")), device="cpu", dtype="bf16")
    policy = make_policy(bb, N)
    torch.manual_seed(0)
    x = bb.initial_noise(list(range(16)))
    sig = policy.sigmas(policy.sample_simplex(x, bb.encode(["a red cat"] * 16).pooled, 4)).reshape(-1, N + 1)
    assert sig.dtype == torch.float32
    check_sigmas(sig)
    with pytest.raises(ScheduleError, match="step of 0"):
        check_sigmas(sig.to(torch.bfloat16))
    assert (sig.to(torch.bfloat16).float() - sig).abs().max() > 1e-3
    with pytest.raises(ScheduleError, match="float32 or float64"):
        bb.sample(x[:1], bb.encode(PROMPTS[:1]), sig[:1].to(torch.bfloat16))


# ---- (b) every tensor reaching the backbone is on backbone.device ------------------------------------


@pytest.fixture
def fp32_flux():
    return load_backbone("flux-dev", model=str(tiny_dir("flux-dev")), device="cpu")


@pytest.mark.slow  # over 2 s (issue 42's fast lane: 90 s)
def test_train_resume_and_eval_with_the_backbone_off_the_default_device(fp32_flux, tmp_path, monkeypatch):
    import jsbench.train.reinforce as train_mod
    from jsbench.evaluation.evaluate import evaluate, resolve_schedule
    from jsbench.suites import load_suite
    from jsbench.train.reinforce import TrainConfig, Trainer

    reward = _ocr_or_skip()
    monkeypatch.setattr(train_mod, "load_reward", lambda name, backbone=None: CpuDefault(reward))
    spy = Spy(fp32_flux, cpu_default=True)
    config = TrainConfig(backbone="flux-dev", steps=3, suite="ocr", reward="ocr", iters=2, contexts=2, samples=2, seed=1, checkpoint_every=1, batch_size=3, baseline="rloo",
                         heldout_prompts=0)  # only the updates' sampler calls (held-out scoring samples too)
    out = tmp_path / "pol"
    with torch.device("meta"):  # our code's implicit tensors land on meta; the backbone is on the CPU
        trainer = Trainer(config, out, backbone=spy)
        assert {p.device for p in trainer.policy.parameters()} == {fp32_flux.device}
        opt_step = trainer.optimizer.step
        trainer.optimizer.step = lambda *a, **k: CpuDefault(opt_step)()  # torch keeps its step counter on the default device
        trainer.train(progress=False)
        assert [len(s) for s in spy.sigmas_seen] == [3, 1, 3, 1]  # 4 rows per update, 3 per sampler call
        trainer.save_policy()

        # resume: the checkpoint is loaded onto the policy's device
        loads = []
        real_load = torch.load
        monkeypatch.setattr(torch, "load", lambda *a, **k: loads.append(k.get("map_location")) or real_load(*a, **k))
        again = Trainer(config, out, backbone=spy)
        again.optimizer.step = lambda *a, **k: CpuDefault(opt_step)()
        again.resume()
        assert loads == [fp32_flux.device] and again.iteration == 2
        assert {p.device for p in again.policy.parameters()} == {fp32_flux.device}
        for a, b in zip(again.policy.parameters(), trainer.policy.parameters()):
            assert torch.equal(a, b)

        suite = CpuDefault(load_suite("ocr", fp32_flux))
        source = resolve_schedule(f"policy:{out}", spy, 3)
        items = load_suite("ocr", fp32_flux).items("test")[:2]
        spy.sigmas_seen.clear()
        run = evaluate(spy, suite, source, seeds_per_prompt=1, items=items, progress=False)
    assert len(run.scores) == 2 and spy.sigmas_seen and all(s.dtype == torch.float32 for s in spy.sigmas_seen)


def test_meta_stand_in_reproduces_the_old_failure(fp32_flux):
    """The stand-in catches the defect it is for: a policy built on the default device meets the backbone's noise."""
    from jsbench.policy.schedule_policy import build_policy, make_policy

    policy = make_policy(fp32_flux, 3)
    with torch.device("meta"):
        stray = build_policy(policy.config)  # what make_policy did before: the default device
    x = fp32_flux.initial_noise([0, 1])
    pooled = fp32_flux.encode(PROMPTS[:2]).pooled
    with pytest.raises((RuntimeError, NotImplementedError)):
        stray.sample_simplex(x, pooled, 2)
    assert policy.sample_simplex(x, pooled, 2).device == fp32_flux.device


# ---- memory options ------------------------------------------------------------------------------------


def test_chunked_decoding_and_offload_give_the_same_images(fp32_flux):
    x = fp32_flux.initial_noise([0, 1, 2])
    cond = fp32_flux.encode(PROMPTS)
    sig = fp32_flux.default_sigmas(3, x)
    whole = fp32_flux.decode(fp32_flux.sample_latents(x, cond, sig))
    try:
        fp32_flux.decode_chunk = 2
        calls = []
        decode = fp32_flux.decode
        fp32_flux.decode = lambda lat: calls.append(lat.shape[0]) or decode(lat)
        # the same images, up to the float round-off of a conv run at another batch size
        assert (fp32_flux.sample(x, cond, sig) - whole).abs().max().item() <= 1e-5
        assert calls == [2, 1]
    finally:
        del fp32_flux.decode
        fp32_flux.decode_chunk = type(fp32_flux).decode_chunk
    pytest.importorskip("accelerate")
    off = load_backbone("flux-dev", model=str(tiny_dir("flux-dev")), device="cpu", offload=True, decode_chunk=1)
    assert off.offload and off.decode_chunk == 1
    assert getattr(off.pipe, "_all_hooks", None), "enable_model_cpu_offload installed no hooks"
    images = off.sample(off.initial_noise([0, 1, 2]), off.encode(PROMPTS), sig)
    assert images.device.type == "cpu" and (images - whole).abs().max().item() <= 1e-5


@pytest.mark.parametrize("kind", ["sdxl", "sd35", "flux-dev", "flux-schnell"])
def test_backbones_declare_memory_defaults(kind):
    from jsbench.backbones.base import eval_batch_size, train_batch_size

    bb = load_backbone(kind, model=str(tiny_dir(kind)), device="cpu")
    assert 1 <= bb.decode_chunk <= 8
    assert 1 <= train_batch_size(bb) <= 64 and 1 <= eval_batch_size(bb) <= 64


def test_cli_dtype_is_checked_and_analytic_refuses_backbone_only_options(cli):
    code, _, err = cli("eval", "--backbone", "flux-dev", "--model", str(tiny_dir("flux-dev")), "--dtype", "fp8", "--no-progress")
    assert code != 0 and "--dtype" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("eval", "--backbone", "analytic", "--offload", "--no-progress")
    assert code != 0 and "--offload" in err and len(err.strip().splitlines()) == 1


def test_relative_model_path_that_does_not_exist_is_not_taken_as_a_hub_id(cli, tmp_path):
    code, _, err = cli("eval", "--backbone", "flux-dev", "--model", "models/flux-dev", "--no-progress")
    assert code != 0
    line = err.strip()
    assert "\n" not in line and "models/flux-dev" in line and "path does not exist" in line
    assert "hf download models/flux-dev" not in line


# ---- (d) the CUDA image tolerance catches a dropped shift_factor -----------------------------------------


@pytest.mark.parametrize("kind", ["sd35", "flux-dev", "flux-schnell"])
def test_image_tolerance_catches_a_dropped_shift_factor(kind):
    """IMAGE_TOLERANCE_BF16 (what the parity tests allow on CUDA) is below what dropping the VAE's
    shift_factor does to bf16 images of the same latents."""
    bb = load_backbone(kind, model=str(tiny_dir(kind)), device="cpu", dtype="bf16")
    x = bb.initial_noise([11, 12, 13])
    lat = bb.pipe(PROMPTS, latents=x.clone(), output_type="latent", **pipeline_kwargs(bb, 4)).images
    ours = bb.decode(lat)
    vae = bb.pipe.vae
    saved = vae.config.shift_factor
    try:
        vae.register_to_config(shift_factor=0.0)
        dropped = bb.decode(lat)
    finally:
        vae.register_to_config(shift_factor=saved)
    assert (dropped - ours).abs().max().item() > IMAGE_TOLERANCE_BF16


# ---- the GPU smoke script ------------------------------------------------------------------------------


def test_gpu_smoke_fails_when_its_probe_fails():
    env = {**os.environ, "PYTHON": "/nonexistent"}
    proc = subprocess.run(["bash", str(ROOT / "scripts" / "gpu_smoke.sh")], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "/nonexistent" in proc.stdout + proc.stderr


@pytest.mark.slow
def test_gpu_smoke_cpu_dry_run_writes_its_json(tmp_path):
    """`gpu_smoke.py --cpu` runs every stage of the GPU check at toy sizes on the CPU (so none of it is dead code).
    Two families run every line of the script: SD-XL (epsilon, two text encoders) and Flux-Dev (flow, and the
    offload stage); SD3.5's and Flux-Schnell's own paths are the adapters', on fake CUDA in test_fake_cuda.py."""
    out = tmp_path / "smoke.json"
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gpu_smoke.py"), "--cpu", "--kinds", "sdxl", "flux-dev", "--out", str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["ok"] is True and result["device"] == "cpu"
    fams = result["families"]
    assert set(fams) == {"sdxl", "flux-dev"} and set(result["denoiser_step"]) == {"sdxl", "flux-dev"}
    for kind, row in fams.items():
        assert row["parity"]["ok"], (kind, row["parity"])
        assert len(row["train"]["updates"]) == 3 and row["train"]["ok"] and row["eval"]["ok"]
        assert row["cost"]["per_row_over_shared"] > 0 and 0 < row["cost"]["policy_share"] < 1
    assert result["offload"]["ok"] and set(result["vae_decode"]) == {"sd3-flux", "sdxl"}
