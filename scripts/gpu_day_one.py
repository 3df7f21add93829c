#!/usr/bin/env python
"""The real backbones at full size on one GPU (issue 40): one run, one JSON. Run by scripts/gpu_day_one.sh.

No weights can be downloaded, so every family is built with `--model full-size-random` (the published
architectures with random weights, created on the GPU in bf16: jsbench.backbones.full_size). Per family
(sdxl, sd35-medium, sd35-large, flux-dev, flux-schnell), at 1024^2:
  build     seconds to create the pipeline on the GPU, its weights in GiB, stored entries per component
  steps     seconds per sampler step (2 timed steps of `sample_latents`, the guidance pair included) at batch 1,
            2, 4, ... up to the largest batch that fits (or MAX_BATCH), with the peak memory of each: `images`
            images per step, the field `--plan` reads
  image     seconds per image at batch 1 and the family's default steps: prompt encoding, sampling, decoding
  vae       one VAE decode at 1024^2: seconds and peak memory above the weights
  policy    the xattn policy train builds, at the real latent and token shapes: forward+backward seconds
            for one row, and its forward's share of one image's sampling
  offload   peak memory and seconds of a 2-step batch-1 sample per offload mode (none, text; model for sdxl)
then a 2-update `jsbench train` and a 4-image `jsbench eval` of the trained policy through the CLI (sdxl, 4
steps, full-size random weights; the smoke suite and contrast reward of scripts/gpu_smoke.py).

Every stage is bounded: a step count, a batch cap, and a deadline (`--budget`, seconds) after which the
remaining optional measurements are skipped and say so. The reward needs nothing beyond torch + diffusers.

    python scripts/gpu_day_one.py --out bench/results/gpu_day_one.json    # CUDA, bf16 (scripts/gpu_day_one.sh)
    python scripts/gpu_day_one.py --cpu --out /tmp/day_one.json          # dry run: tiny pipelines, fp32, CPU

The dry run (`--cpu`) runs every stage on the tiny random-weight pipelines at their tiny sizes and builds each
family's full-size pipeline on the meta device (sizes, shapes; nothing materialised): every family's entry,
in under a minute. Exit status 0 only if every stage passed; the JSON says which failed and why.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # device_packages sits beside this script
import device_packages  # noqa: E402  (standard library only)

#: what the stages import: the GPU image's packages plus diffusers (from .whl/, scripts/gpu_wheels.sh)
NEEDED = ("torch", "diffusers", "transformers", "accelerate", "safetensors", "typer", "rich")


def missing_packages(names=NEEDED) -> list[str]:
    """The packages of `names` that cannot be imported here (checked before any of them is imported)."""
    return device_packages.missing_packages(names)


if __name__ == "__main__":
    device_packages.exit_if_missing("gpu_day_one", NEEDED, "fetch wheels with scripts/gpu_wheels.sh; scripts/gpu_day_one.sh installs them from .whl/")

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

import torch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from gpu_smoke import PROMPTS, gib, peak, reset_peak, sync  # noqa: E402  (registers the smoke suite and reward)

from jsbench.backbones import declaring_name, load_backbone  # noqa: E402
from jsbench.backbones.full_size import FULL_SIZE_RANDOM, component_sizes, full_size, full_size_owner  # noqa: E402
from jsbench.backbones.tiny import save_tiny_pipeline  # noqa: E402
from jsbench.io import write_json_atomic  # noqa: E402

FAMILIES = ("sdxl", "sd35-medium", "sd35-large", "flux-dev", "flux-schnell")
#: the largest batch the steps stage tries (doubling from 1); each try is 2 timed steps
MAX_BATCH = 16
#: the family whose pipeline the CLI's train and eval run (the smallest at full size: 3.5B in all)
CLI_FAMILY = "sdxl"
#: seconds of the budget the family stages leave to the CLI's train and eval (two SD-XL builds, 12 images)
CLI_RESERVE = 70.0
#: offload modes measured per family beside the resident pipeline; "model" builds on the CPU first: SD-XL only
OFFLOAD_MODES = {"sdxl": ("text", "model")}
DEFAULT_OFFLOAD = ("text",)


class OutOfTime(Exception):
    """The run's deadline passed: the stage is skipped, and says so."""


def _oom(exc: BaseException) -> bool:
    return isinstance(exc, torch.OutOfMemoryError) or "out of memory" in str(exc).lower()


def _free(device: torch.device) -> None:
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _timed(device, fn):
    sync(device)
    start = time.perf_counter()
    out = fn()
    sync(device)
    return out, time.perf_counter() - start


def _prompts(n: int) -> list[str]:
    return [PROMPTS[i % len(PROMPTS)] for i in range(n)]


class Run:
    """The deadline and the device shared by the stages."""

    def __init__(self, device: torch.device, dtype: torch.dtype, budget: float, dry: bool, reserve: float = 0.0):
        self.device, self.dtype, self.dry = device, dtype, dry
        self.deadline = time.perf_counter() + budget
        self.reserve = reserve  # seconds kept for the CLI stage, which runs last

    def left(self) -> float:
        return self.deadline - self.reserve - time.perf_counter()

    def check(self, need: float = 0.0) -> None:
        if self.left() < need:
            raise OutOfTime(f"skipped: the run's time budget left {max(0.0, self.left()):.0f}s, this stage needs ~{need:.0f}s")


def load(kind: str, model: str, run: Run, offload=None):
    return load_backbone(kind, model=model, device=str(run.device), dtype=run.dtype, offload=offload)


def steps_stage(bb, run: Run) -> dict:
    """Seconds per step and peak memory at batch 1, 2, 4, ... MAX_BATCH: the largest that fits."""
    rows, largest = [], None
    batch = 1
    while batch <= (2 if run.dry else MAX_BATCH):
        try:
            run.check(10.0)
        except OutOfTime as exc:
            rows.append({"images": batch, "skipped": str(exc)})
            break
        try:
            x = bb.initial_noise(list(range(batch)))
            cond = bb.encode(_prompts(batch))
            sigmas = bb.default_sigmas(2, x)
            bb.sample_latents(x, cond, sigmas)  # warm-up: kernel choice and the allocator
            base = reset_peak(run.device)
            _, seconds = _timed(run.device, lambda: bb.sample_latents(x, cond, sigmas))
            top = peak(run.device)
        except (torch.OutOfMemoryError, RuntimeError) as exc:
            if not _oom(exc):
                raise
            rows.append({"images": batch, "fits": False})
            _free(run.device)
            break
        rows.append({"images": batch, "fits": True, "seconds_per_step": round(seconds / 2, 5),
                     "seconds_per_image_step": round(seconds / 2 / batch, 5), "peak_gib": gib(top),
                     "activations_gib_per_image": gib(None if top is None else (top - base) / batch)})
        largest = batch
        del x, cond
        _free(run.device)
        batch *= 2
    return {"batches": rows, "largest_batch": largest, "ok": largest is not None}


def image_stage(bb, run: Run, steps: int) -> dict:
    """One image at batch 1 and `steps` steps: encoding, sampling and decoding, each timed."""
    run.check(5.0)
    x = bb.initial_noise([0])
    cond, t_encode = _timed(run.device, lambda: bb.encode(_prompts(1)))
    sigmas = bb.default_sigmas(steps, x)
    base = reset_peak(run.device)
    latents, t_sample = _timed(run.device, lambda: bb.sample_latents(x, cond, sigmas))
    images, t_decode = _timed(run.device, lambda: bb.decode(latents))
    top = peak(run.device)
    return {"steps": steps, "images": 1, "encode_seconds": round(t_encode, 4), "sample_seconds": round(t_sample, 4),
            "decode_seconds": round(t_decode, 4), "seconds_per_image": round(t_encode + t_sample + t_decode, 4),
            "peak_gib": gib(top), "image_shape": list(images.shape), "finite": bool(torch.isfinite(images.float()).all()), "ok": True}


def vae_stage(bb, run: Run) -> dict:
    run.check(3.0)
    c, h, w = bb._noise_shape()
    latents = torch.randn(1, c, h, w, device=run.device, dtype=run.dtype)
    with torch.no_grad():
        bb.vae.decode(latents / bb.vae.config.scaling_factor, return_dict=False)  # warm-up
        base = reset_peak(run.device)
        _, seconds = _timed(run.device, lambda: bb.vae.decode(latents / bb.vae.config.scaling_factor, return_dict=False))
    top = peak(run.device)
    return {"pixels": [h * bb.vae_scale_factor, w * bb.vae_scale_factor], "seconds": round(seconds, 4),
            "peak_gib_above_weights": gib(None if top is None else top - base), "ok": True}


def policy_stage(bb, run: Run, seconds_per_image: float | None) -> dict:
    """The xattn policy train builds for this backbone, at its real latent and token shapes: forward+backward
    seconds for one row, and the forward's share of one image's sampling."""
    from jsbench.policy.schedule_policy import PolicyConfig, build_policy
    from jsbench.policy.xattn import xattn_defaults

    run.check(3.0)
    steps = int(bb.default_steps)
    latent = tuple(bb.latent_shape)
    width, depth = xattn_defaults(latent)
    config = PolicyConfig(kind="instance", steps=steps, pooled_dim=int(bb.pooled_dim), latent_shape=latent,
                          default_increments=[1.0 / steps] * steps, width=width, depth=depth, arch="xattn", token_dim=int(bb.token_dim))
    policy = build_policy(config).to(run.device)
    x = bb.initial_noise([0]).float()
    cond = bb.encode(_prompts(1))
    tokens, mask = cond.tokens.float(), cond.token_mask
    with torch.no_grad():
        policy.log_alpha(x, cond.pooled, tokens, mask)  # warm-up
        _, forward = _timed(run.device, lambda: policy.log_alpha(x, cond.pooled, tokens, mask))

    def forward_backward():
        policy.zero_grad(set_to_none=True)
        policy.log_alpha(x, cond.pooled, tokens, mask).sum().backward()

    forward_backward()  # warm-up
    _, both = _timed(run.device, forward_backward)
    params = sum(p.numel() for p in policy.parameters())
    share = None if not seconds_per_image else round(forward / (forward + seconds_per_image), 6)
    return {"params": params, "tokens": list(tokens.shape[1:]), "latent": list(latent), "forward_seconds": round(forward, 5),
            "forward_backward_seconds": round(both, 5), "share_of_one_image": share, "ok": True}


def offload_stage(kind: str, model: str, run: Run, mode: str) -> dict:
    run.check(30.0)
    base = reset_peak(run.device)
    bb, t_build = _timed(run.device, lambda: load(kind, model, run, offload=mode))
    x = bb.initial_noise([0])
    cond = bb.encode(_prompts(1))
    _, seconds = _timed(run.device, lambda: bb.sample(x, cond, bb.default_sigmas(2, x)))
    top = peak(run.device)
    del bb
    _free(run.device)
    return {"mode": mode, "build_seconds": round(t_build, 2), "two_step_image_seconds": round(seconds, 4),
            "peak_gib": gib(top), "start_gib": gib(base), "ok": True}


def family(kind: str, model: str, run: Run, stage) -> dict:
    out: dict = {"backbone": kind, "model": model}
    owner = full_size_owner(kind)
    out["full_size"] = {"owner": owner, "weights": component_sizes(owner), "latent": list(full_size(owner)["latent"]),
                        "cfg_batch": full_size(owner)["cfg_batch"]}
    if run.dry:  # the full-size pipeline, built on meta: its construction and shapes, no memory
        out["meta_build"] = stage(f"{kind} full-size on meta", lambda: _meta_build(kind))
    base = reset_peak(run.device)
    built = stage(f"{kind} build", lambda: _build(kind, model, run, base))
    out["build"] = {k: v for k, v in built.items() if k != "backbone"} if isinstance(built, dict) else built
    bb = built.get("backbone") if isinstance(built, dict) else None
    if bb is None:
        return out
    steps = 4 if run.dry else int(bb.default_steps)
    out["steps"] = stage(f"{kind} steps", lambda: steps_stage(bb, run))
    out["image"] = stage(f"{kind} image", lambda: image_stage(bb, run, steps))
    out["vae"] = stage(f"{kind} vae", lambda: vae_stage(bb, run))
    per_image = out["image"].get("seconds_per_image") if isinstance(out["image"], dict) else None
    out["policy"] = stage(f"{kind} policy", lambda: policy_stage(bb, run, per_image))
    del bb, built
    _free(run.device)
    out["offload"] = {}
    for mode in OFFLOAD_MODES.get(kind, DEFAULT_OFFLOAD):
        out["offload"][mode] = stage(f"{kind} offload {mode}", lambda: offload_stage(kind, model, run, mode))
    return out


def _meta_build(kind: str) -> dict:
    bb = load_backbone(kind, model=FULL_SIZE_RANDOM, device="meta", dtype=torch.bfloat16)
    devices = {p.device.type for m in bb.pipe.components.values() if isinstance(m, torch.nn.Module) for p in m.parameters()}
    return {"latent_shape": list(bb.latent_shape), "resolution": [bb.height, bb.width], "devices": sorted(devices), "ok": devices == {"meta"}}


def _build(kind: str, model: str, run: Run, base: int) -> dict:
    run.check(20.0)
    bb, seconds = _timed(run.device, lambda: load(kind, model, run))
    weights = torch.cuda.memory_allocated(run.device) if run.device.type == "cuda" else None
    return {"backbone": bb, "seconds": round(seconds, 2), "weights_gib": gib(weights), "default_steps": int(bb.default_steps),
            "latent_shape": list(bb.latent_shape), "resolution": [bb.height, bb.width], "ok": True}


def cli_stage(model: str, run: Run, tmp: Path) -> dict:
    """A 2-update `jsbench train` and a 4-image `jsbench eval` of its policy, through the CLI."""
    from jsbench.cli import main as jsbench_main

    run.check(60.0)
    common = ["--backbone", CLI_FAMILY, "--model", model, "--device", str(run.device), "--dtype", "fp32" if run.dry else "bf16",
              "--steps", "4", "--no-progress"]
    policy = tmp / "cli-policy"
    train = ["train", *common, "--suite", "smoke", "--reward", "smoke", "--iters", "2", "--contexts", "4", "--samples", "2",
             "--out", str(policy)]
    evaluate = ["eval", *common, "--suite", "smoke", "--schedule", f"policy:{policy}", "--limit", "4", "--seeds", "1",
                "--out", str(tmp / "cli-eval.json")]
    out = {}
    for name, argv in (("train", train), ("eval", evaluate)):
        base = reset_peak(run.device)
        code, seconds = _timed(run.device, lambda: _exit_code(jsbench_main, argv))
        top = peak(run.device)
        out[name] = {"argv": ["jsbench", *argv], "exit": code, "seconds": round(seconds, 2), "peak_gib": gib(top), "start_gib": gib(base)}
        _free(run.device)
        if code != 0:
            break
    log = policy / "train_log.jsonl"
    updates = [json.loads(line) for line in log.read_text().splitlines()] if log.is_file() else []
    out["train"]["updates"] = len(updates)
    out["ok"] = all(out[k]["exit"] == 0 for k in out if k in ("train", "eval")) and len(updates) == 2 and "eval" in out
    return out


def _exit_code(main, argv) -> int:
    """The exit status of the `jsbench` entry point run on `argv` in this process (its refusals are exit 2)."""
    saved = sys.argv
    sys.argv = ["jsbench", *argv]
    try:
        main()
        return 0
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        sys.argv = saved


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gpu_day_one.json")
    ap.add_argument("--cpu", action="store_true", help="dry run on the CPU: tiny pipelines (fp32), full-size ones on meta")
    ap.add_argument("--families", nargs="+", default=list(FAMILIES), choices=FAMILIES)
    ap.add_argument("--budget", type=float, default=420.0, help="seconds after which optional stages are skipped (default 420)")
    ap.add_argument("--no-cli", action="store_true", help="skip the CLI's train and eval")
    args = ap.parse_args(argv)
    if args.budget <= 0:
        print(f"gpu_day_one: --budget must be positive, got {args.budget}", file=sys.stderr)
        return 2
    start = time.perf_counter()
    if args.cpu:
        device, dtype = torch.device("cpu"), torch.float32
    else:
        if not torch.cuda.is_available():
            print("gpu_day_one: no CUDA device (torch.cuda.is_available() is False); use --cpu for the dry run", file=sys.stderr)
            return 1
        device, dtype = torch.device("cuda"), torch.bfloat16
    run = Run(device, dtype, args.budget, args.cpu, reserve=0.0 if args.no_cli else CLI_RESERVE)
    import diffusers
    import transformers

    diffusers.utils.logging.disable_progress_bar()  # one line per stage, not a bar per component
    transformers.utils.logging.disable_progress_bar()
    result: dict = {
        "device": "cpu" if args.cpu else torch.cuda.get_device_name(0), "dtype": str(dtype), "dry_run": args.cpu,
        "torch": torch.__version__, "diffusers": diffusers.__version__, "transformers": transformers.__version__,
        "python": platform.python_version(), "resolution": 1024, "families": {}, "failures": [], "skipped": [],
    }

    def stage(name, fn):
        try:
            value = fn()
        except OutOfTime as exc:
            value = {"ok": None, "skipped": str(exc)}
            result["skipped"].append(name)
        except Exception as exc:  # a stage that raises is a failed stage, reported and counted
            traceback.print_exc()
            value = {"ok": False, "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:300] if str(exc) else ''}"}
            _free(device)
        if isinstance(value, dict) and value.get("ok") is False:
            result["failures"].append(name)
        state = {True: "ok", False: "FAILED", None: "skipped"}[value.get("ok", True) if isinstance(value, dict) else True]
        print(f"gpu_day_one: {name}: {state} ({time.perf_counter() - start:.0f}s)", flush=True)
        return value

    with tempfile.TemporaryDirectory(prefix="jsbench-day-one-") as tmp:
        tmp = Path(tmp)
        tiny: dict[str, Path] = {}

        def model_for(kind: str) -> str:
            if not args.cpu:
                return FULL_SIZE_RANDOM
            owner = declaring_name(kind, "tiny_sampling")  # the tiny pipeline its class runs (sd35's for both SD3.5s)
            if owner not in tiny:
                tiny[owner] = save_tiny_pipeline(owner, tmp / f"{owner}-tiny")
            return str(tiny[owner])

        for kind in args.families:
            result["families"][kind] = family(kind, model_for(kind), run, stage)
        if not args.no_cli:
            run.reserve = 0.0
            result["cli"] = stage("cli train and eval", lambda: cli_stage(model_for(CLI_FAMILY), run, tmp))
    result["seconds"] = round(time.perf_counter() - start, 1)
    result["ok"] = not result["failures"]
    write_json_atomic(args.out, result)
    skipped = f"; skipped for time: {', '.join(result['skipped'])}" if result["skipped"] else ""
    print(f"gpu_day_one: {'passed' if result['ok'] else 'FAILED: ' + ', '.join(result['failures'])} in {result['seconds']}s{skipped}; wrote {args.out}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
