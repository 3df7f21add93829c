#!/usr/bin/env python
"""The GPU check of the real-backbone path (issue 12), one call, one JSON. Run by scripts/gpu_smoke.sh.

On CUDA in bf16, for the four tiny random-weight families (sdxl, sd35, flux-dev, flux-schnell; the real
pipeline and component classes, a few thousand parameters wide):
  parity    our batched sampler vs the diffusers pipeline at the tests' tiny size: default schedule
            (latents, and the decoder on the same latents), and a different schedule per row against
            single-row pipeline calls; tolerances as in tests/tiny_pipelines.py
  train     3 REINFORCE updates (B=4 contexts x K=4 schedules, js baseline) at the real models' latent
            shapes (1024^2 -> 128x128 latents: 4096 Flux/SD3 tokens, mu = 1.15 for Flux-Dev) with
            chunked decoding; no update may be skipped or raise
  eval      one `policy:PATH` evaluation of the trained policy (8 images)
  cost      per-row schedules vs one shared schedule for the same batch (time ratio), the policy's share
            of sampling time, peak memory per image in the sampler and per update
plus one full-size random-weight denoiser step per family at 1024^2 (the real configs; seconds per step and
peak memory, weights included), the decoder of each VAE architecture at 1024^2 (the real SD3/Flux and SD-XL VAE configs, random
weights): peak memory per decoded image, the number the per-backbone `decode_chunk` defaults rest on,
and an --offload (model CPU offload) run checked against the resident one.
The reward is the images' contrast (std of grey), so nothing beyond torch + diffusers is needed.

    python scripts/gpu_smoke.py --out bench/results/gpu_smoke.json        # CUDA, bf16 (~1-3 min on an H200)
    python scripts/gpu_smoke.py --cpu --out /tmp/smoke.json              # every stage at toy sizes, fp32, on CPU
    python scripts/gpu_smoke.py --cpu --kinds --vae-side 64 --out /tmp/vae.json   # real-VAE decode memory, 512^2, CPU

Exit status 0 only if every stage passed; the JSON says which failed and why.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # device_packages sits beside this script
import device_packages  # noqa: E402  (standard library only)

#: what the stages import: the GPU image's packages plus diffusers (from .whl/); never scipy, OCR or CLIP extras
NEEDED = ("torch", "diffusers", "transformers", "accelerate", "safetensors")


def missing_packages(names=NEEDED) -> list[str]:
    """The packages of `names` that cannot be imported here (checked before any of them is imported)."""
    return device_packages.missing_packages(names)


if __name__ == "__main__":
    device_packages.exit_if_missing("gpu_smoke", NEEDED, "scripts/gpu_smoke.sh installs diffusers from .whl/")

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.backbones import backbone_class, load_backbone  # noqa: E402
from jsbench.backbones.full_size import measure_denoiser_step  # noqa: E402
from jsbench.backbones.tiny import REAL_LATENT_SAMPLING, REAL_VAE_FACTOR, TINY_KINDS, TINY_SAMPLING, TINY_VAE_FACTOR, save_tiny_pipeline  # noqa: E402
from jsbench.io import write_json_atomic  # noqa: E402
from jsbench.rewards import Reward, register_reward  # noqa: E402
from jsbench.schedule import check_sigmas, increments_from_sigmas, sigmas_from_increments  # noqa: E402
from jsbench.suites import register_suite  # noqa: E402
from jsbench.suites.base import TASK_MEAN_RULE, EvalItem, Suite, aggregate_by_task  # noqa: E402

PROMPTS = [
    "a red cat sitting on a blue car", "a sign that says hello world", "three green apples", "a lighthouse at dusk",
    "two dogs next to a tree", "a yellow house", "a black car below a white sign", "a small painting of a cat",
]
PARITY_SEEDS = [11, 12, 13]
IMAGE_TOL_BF16 = 2.0**-8  # tests/tiny_pipelines.py IMAGE_TOLERANCE_BF16 (see scripts/parity_bounds.py)
#: latent side of the real-VAE decode: the real models' default image (1024^2, as their adapters declare) / 8
REAL_VAE_SIDE = max(backbone_class(kind).default_image_size for kind in TINY_KINDS) // REAL_VAE_FACTOR
#: steps of the train/eval stage at the real latent shapes: the backbone's own default, at most SD3.5/Flux's 28
MAX_SMOKE_STEPS = 28


def _version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


# ---- a reward and a suite that need nothing but torch ------------------------------------------------------


def contrast(images: torch.Tensor) -> torch.Tensor:
    return images.float().mean(1).flatten(1).std(1).cpu()


class SmokeSuite(Suite):
    name = "smoke"
    primary_metric = "contrast"
    protocol_seeds = 1
    overall_rule = TASK_MEAN_RULE

    def __init__(self, backbone=None, **options):
        pass

    def items(self, split: str = "test"):
        return [EvalItem(p, "smoke") for p in PROMPTS]

    def score(self, images, items):
        return [{"contrast": float(v)} for v in contrast(images)]

    def aggregate(self, scores, items):
        return aggregate_by_task(scores, items)


class ContrastReward(Reward):
    """The images' contrast: a reward that needs nothing but torch and scores every prompt."""

    name = "smoke"

    def __call__(self, images, prompts):
        return contrast(images)


register_suite("smoke")(SmokeSuite)
register_reward("smoke")(lambda backbone=None: ContrastReward())


# ---- timing and memory ---------------------------------------------------------------------------------------


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def reset_peak(device: torch.device) -> int:
    """Reset the peak counter; returns the bytes in use now (CUDA: allocated; CPU: resident set)."""
    sync(device)
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device)
    try:  # Linux: writing 5 to clear_refs resets VmHWM (the resident high-water mark) to the current RSS
        Path("/proc/self/clear_refs").write_text("5")
        return _proc_kib("VmRSS") * 1024
    except OSError:
        return 0


def peak(device: torch.device) -> int | None:
    sync(device)
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device)
    try:
        return _proc_kib("VmHWM") * 1024
    except OSError:
        return None


def _proc_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise OSError(field)


def gib(n: float | None) -> float | None:
    return None if n is None else round(n / 2**30, 4)


def timed(device, fn, repeat: int = 1):
    """(result, best wall seconds over `repeat` runs)."""
    best, out = math.inf, None
    for _ in range(repeat):
        sync(device)
        t = time.perf_counter()
        out = fn()
        sync(device)
        best = min(best, time.perf_counter() - t)
    return out, best


# ---- stages ----------------------------------------------------------------------------------------------------


def _max_rel(a, b) -> float:
    a, b = a.float().cpu(), b.float().cpu()
    return ((a - b).abs().max() / b.abs().max().clamp(min=1e-12)).item()


def _custom_sigmas(batch: int, steps: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    inc = torch._sample_dirichlet(torch.full((batch, steps), 1.5, dtype=torch.float64), generator=g)
    return sigmas_from_increments(0.02 + (1 - 0.02 * steps) * inc).float()


def parity(kind: str, folder: str, device, dtype) -> dict:
    bb = load_backbone(kind, model=folder, device=str(device), dtype=dtype)
    steps = 4
    prompts = PROMPTS[:3]
    x = bb.initial_noise(PARITY_SEEDS)
    cond = bb.encode(prompts)
    kw = dict(TINY_SAMPLING[kind], num_inference_steps=steps)  # the harness's size; guidance etc.: the pipeline's own
    ref_lat = bb.pipe(prompts, latents=x.clone(), output_type="latent", **kw).images
    lat = bb.sample_latents(x, cond, bb.default_sigmas(steps, x))
    ref_img = bb.pipe(prompts, latents=x.clone(), output_type="pt", **kw).images
    img_diff = (bb.decode(ref_lat).float() - ref_img.float()).abs().max().item()
    sig = _custom_sigmas(3, steps).to(bb.device)
    per_row = bb.sample_latents(x, cond, sig)
    kw.pop("num_inference_steps")
    row_rel = max(
        _max_rel(per_row[b : b + 1], bb.pipe([prompts[b]], latents=x[b : b + 1].clone(), sigmas=bb.pipeline_sigmas(sig[b]), output_type="latent", **kw).images)
        for b in range(3)
    )
    bf16 = bb.dtype != torch.float32
    tol = {"latents": 5e-2 if bf16 else 1e-6, "custom_rows": 5e-2 if bf16 else 2e-5, "image": IMAGE_TOL_BF16 if bf16 else 1e-5}
    got = {"latents": _max_rel(lat, ref_lat), "custom_rows": row_rel, "image": img_diff}
    return {"ok": all(got[k] <= tol[k] for k in tol), "measured": got, "tolerance": tol, "dtype": str(bb.dtype)}


def train_eval_cost(kind: str, folder: str, device, dtype, steps: int, out: Path) -> dict:
    from jsbench.evaluation.evaluate import evaluate, resolve_schedule
    from jsbench.train.reinforce import TrainConfig, Trainer, read_log

    bb = load_backbone(kind, model=folder, device=str(device), dtype=dtype)
    row: dict = {"latent_shape": list(bb.latent_shape), "resolution": [bb.height, bb.width], "steps": steps, "decode_chunk": bb.decode_chunk}
    mu = bb.shift_mu()  # Flux-Dev's resolution-dependent shift; None where the shift is static
    if mu is not None:
        row["mu"] = round(mu, 6)
    B, K = 4, 4
    config = TrainConfig(backbone=kind, model=folder, steps=steps, suite="smoke", reward="smoke", iters=3, contexts=B, samples=K,
                         seed=0, checkpoint_every=3, baseline="js", batch_size=8)
    base = reset_peak(device)
    trainer = Trainer(config, out, backbone=bb)
    _, seconds = timed(device, lambda: trainer.train(progress=False))
    top = peak(device)
    log = read_log(out / "train_log.jsonl")
    trainer.save_policy()
    row["train"] = {
        "updates": [{k: r.get(k) for k in ("iteration", "reward", "loss", "grad_norm", "seconds", "skipped")} for r in log],
        "seconds": round(seconds, 3), "rows_per_update": B * K, "rows_per_sampler_call": 8,
        "peak_gib_per_image": gib(None if top is None else (top - base) / 8),
        "ok": len(log) == 3 and not any("skipped" in r for r in log) and all(math.isfinite(r.get("loss", math.nan)) for r in log),
        "policy_fp32_on_device": all(p.dtype == torch.float32 and p.device.type == bb.device.type for p in trainer.policy.parameters()),
    }
    row["train"]["ok"] &= row["train"]["policy_fp32_on_device"]

    suite = SmokeSuite()
    source = resolve_schedule(f"policy:{out}", bb, steps)
    base = reset_peak(device)
    run, seconds = timed(device, lambda: evaluate(bb, suite, source, seeds_per_prompt=2, items=suite.items()[:4], progress=False, batch_size=8))
    top = peak(device)
    row["eval"] = {
        "images": len(run.scores), "seconds": round(seconds, 3), "peak_gib_per_image": gib(None if top is None else (top - base) / 8),
        "ok": len(run.scores) == 8 and all(math.isfinite(s["contrast"]) for s in run.scores),
    }

    # cost: per-row schedules vs one shared schedule for the same 16 rows; the policy's share of sampling
    n = 16
    x = bb.initial_noise(list(range(100, 100 + n)))
    cond = bb.encode([PROMPTS[i % len(PROMPTS)] for i in range(n)])
    policy = trainer.policy
    torch.manual_seed(0)
    per_row = policy.sigmas(policy.sample_simplex(x, cond.pooled, 1, cond.tokens, cond.token_mask)[:, 0])
    shared = bb.default_sigmas(steps, x)
    check_sigmas(per_row)
    bb.sample_latents(x, cond, shared)  # warm-up
    base = reset_peak(device)
    _, t_rows = timed(device, lambda: bb.sample_latents(x, cond, per_row), repeat=2)
    top = peak(device)
    _, t_shared = timed(device, lambda: bb.sample_latents(x, cond, shared), repeat=2)
    _, t_policy = timed(device, lambda: policy.mean_sigmas(x, cond.pooled, cond.tokens, cond.token_mask), repeat=3)
    _, t_sample = timed(device, lambda: bb.sample(x, cond, per_row), repeat=1)
    row["cost"] = {
        "rows": n, "per_row_seconds": round(t_rows, 4), "shared_seconds": round(t_shared, 4),
        "per_row_over_shared": round(t_rows / t_shared, 4),
        "policy_seconds": round(t_policy, 5), "sample_and_decode_seconds": round(t_sample, 4),
        "policy_share": round(t_policy / (t_policy + t_sample), 5),
        "sampler_peak_gib_per_image": gib(None if top is None else (top - base) / n),
    }
    row["ok"] = row["train"]["ok"] and row["eval"]["ok"]
    return row


def real_vae(family: str):
    """The VAE architecture of the real models (random weights): SD3/Flux (16 latent channels, no quant
    convs) or SD-XL (4 channels, quant convs); both 128-256-512-512 wide, 8x downsampling."""
    from diffusers import AutoencoderKL

    sdxl = family == "sdxl"
    return AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 4, up_block_types=("UpDecoderBlock2D",) * 4,
        block_out_channels=(128, 256, 512, 512), layers_per_block=2, latent_channels=4 if sdxl else 16, norm_num_groups=32,
        use_quant_conv=sdxl, use_post_quant_conv=sdxl,
    )


def decode_memory(family: str, latent_side: int, device, dtype) -> dict:
    vae = real_vae(family).to(device=device, dtype=dtype).eval()
    c = vae.config.latent_channels
    out = {"pixels": latent_side * REAL_VAE_FACTOR, "dtype": str(dtype)}
    for batch in (1, 2):
        lat = torch.randn(batch, c, latent_side, latent_side, device=device, dtype=dtype)
        with torch.no_grad():
            vae.decode(lat)  # warm-up (kernel choice, allocator)
            base = reset_peak(device)
            _, seconds = timed(device, lambda: vae.decode(lat, return_dict=False)[0])
        top = peak(device)
        out[f"batch{batch}"] = {"peak_gib_above_weights": gib(None if top is None else top - base), "seconds": round(seconds, 4)}
    a, b = out["batch1"]["peak_gib_above_weights"], out["batch2"]["peak_gib_above_weights"]
    out["gib_per_image"] = a  # one image's decode peak above the weights
    out["gib_per_extra_image"] = None if a is None or b is None else round(b - a, 4)  # what a second image adds
    del vae
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return out


def offload_check(folder: str, device, dtype) -> dict:
    resident = load_backbone("flux-dev", model=folder, device=str(device), dtype=dtype)
    x = resident.initial_noise([0, 1, 2])
    cond = resident.encode(PROMPTS[:3])
    sig = resident.default_sigmas(4, x)
    want = resident.sample(x, cond, sig).cpu()
    del resident
    off = load_backbone("flux-dev", model=folder, device=str(device), dtype=dtype, offload=True)
    got = off.sample(off.initial_noise([0, 1, 2]), off.encode(PROMPTS[:3]), sig).cpu()
    diff = (got - want).abs().max().item()
    tol = IMAGE_TOL_BF16 if dtype != torch.float32 else 1e-5
    return {"ok": diff <= tol, "max_abs_image_diff": diff, "tolerance": tol}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gpu_smoke.json")
    ap.add_argument("--cpu", action="store_true", help="dry run on the CPU: every stage at toy sizes (32 px, 4 steps, fp32)")
    ap.add_argument("--kinds", nargs="*", default=list(TINY_KINDS), help="tiny families to check (none: only the VAE decode)")
    ap.add_argument("--vae-side", type=int, default=None,
                    help=f"latent side of the real-VAE decode (default {REAL_VAE_SIDE} = {REAL_VAE_FACTOR * REAL_VAE_SIDE}^2; 8 with --cpu)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    if args.cpu:
        device, dtype = torch.device("cpu"), torch.float32
    else:
        if not torch.cuda.is_available():
            print("gpu_smoke: no CUDA device (torch.cuda.is_available() is False); use --cpu for the dry run", file=sys.stderr)
            return 1
        device, dtype = torch.device("cuda"), torch.bfloat16
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 state (sigmas, Euler) stays exact
    import diffusers
    import transformers

    result: dict = {
        "device": device.type if args.cpu else torch.cuda.get_device_name(0), "dtype": str(dtype), "torch": torch.__version__,
        "diffusers": diffusers.__version__, "transformers": transformers.__version__, "python": platform.python_version(),
        "accelerate": _version("accelerate"), "huggingface_hub": _version("huggingface-hub"),
        "dry_run": args.cpu, "families": {}, "vae_decode": {}, "failures": [],
    }

    def stage(name, fn):
        try:
            value = fn()
        except Exception as exc:  # a stage that raises is a failed stage, reported and counted
            traceback.print_exc()
            value = {"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
        if isinstance(value, dict) and value.get("ok") is False:
            result["failures"].append(name)
        print(f"gpu_smoke: {name}: {'ok' if not (isinstance(value, dict) and value.get('ok') is False) else 'FAILED'}", flush=True)
        return value

    with tempfile.TemporaryDirectory(prefix="jsbench-smoke-") as tmp:
        tmp = Path(tmp)
        for kind in args.kinds:
            fam: dict = {}
            small = save_tiny_pipeline(kind, tmp / f"{kind}-tiny")
            fam["parity"] = stage(f"{kind} parity", lambda: parity(kind, str(small), device, dtype))
            if args.cpu:
                folder, steps = small, 4
            else:  # the real models' latent grid: 1024^2 -> 128 x 128 (tiny VAEs downsample by 2: 256 px)
                real = REAL_LATENT_SAMPLING[kind]
                folder = save_tiny_pipeline(kind, tmp / f"{kind}-real", sampling=real, max_latent_side=real["height"] // TINY_VAE_FACTOR)
                steps = min(MAX_SMOKE_STEPS, backbone_class(kind).default_steps)  # Flux-Schnell: its 4
            fam.update(stage(f"{kind} train/eval/cost", lambda: train_eval_cost(kind, str(folder), device, dtype, steps, tmp / f"{kind}-policy")))
            result["families"][kind] = fam
        if "flux-dev" in args.kinds:
            result["offload"] = stage("offload", lambda: offload_check(str(tmp / "flux-dev-tiny"), device, dtype))
        side = args.vae_side or (8 if args.cpu else REAL_VAE_SIDE)
        for family in ("sd3-flux", "sdxl"):
            result["vae_decode"][family] = stage(f"{family} VAE decode", lambda: decode_memory(family, side, device, dtype))
        # one full-size random-weight denoiser step per family at 1024^2 (issue 27): seconds, peak memory;
        # with --cpu on the meta device (shapes only: a 12B network does not fit a CPU dry run)
        result["denoiser_step"] = {}
        for kind in args.kinds:
            result["denoiser_step"][kind] = stage(
                f"{kind} full-size step", lambda: measure_denoiser_step(kind, "meta" if args.cpu else device, dtype))
    result["seconds"] = round(time.perf_counter() - start, 1)
    result["ok"] = not result["failures"]
    write_json_atomic(args.out, result)
    print(f"gpu_smoke: {'passed' if result['ok'] else 'FAILED: ' + ', '.join(result['failures'])} in {result['seconds']}s; wrote {args.out}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
