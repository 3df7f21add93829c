#!/usr/bin/env python
"""GPU smoke check of the real backbones (called by scripts/gpu_smoke.sh; usable alone).

For each backbone: the tiny random-weight pipeline in bf16 on CUDA, then the real weights where they
are already on this machine (HF cache, or a folder given as NAME=PATH), each sampled once with a
different schedule per row. Prints load time, per-step latency, peak CUDA memory and a pass/fail per
backbone; exits non-zero if any check fails. Keeps to a wall-clock budget (--budget seconds): a real
model is only loaded when enough of the budget is left for it.

    python scripts/gpu_smoke.py                      # tiny + every cached real model
    python scripts/gpu_smoke.py --no-real            # tiny only
    python scripts/gpu_smoke.py flux-dev=/data/FLUX.1-dev sdxl=/data/sdxl-base
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.backbones import load_backbone  # noqa: E402
from jsbench.backbones._diffusers import _cached_file  # noqa: E402
from jsbench.backbones.tiny import TINY_KINDS, save_tiny_pipeline  # noqa: E402
from jsbench.schedule import increments_from_sigmas, sigmas_from_increments  # noqa: E402

REAL = {
    "sdxl": "stabilityai/stable-diffusion-xl-base-1.0",
    "sd35": "stabilityai/stable-diffusion-3.5-medium",
    "sd35-large": "stabilityai/stable-diffusion-3.5-large",
    "flux-schnell": "black-forest-labs/FLUX.1-schnell",
    "flux-dev": "black-forest-labs/FLUX.1-dev",
}
#: rough seconds to load and run a real model once (skip it when less budget than this is left)
REAL_COST = {"sdxl": 45, "sd35": 45, "sd35-large": 90, "flux-schnell": 90, "flux-dev": 90}
PROMPTS = ["a red cat sitting on a blue car", "a sign that says hello world", "three green apples", "a lighthouse at dusk"]


def _per_row(default: torch.Tensor) -> torch.Tensor:
    inc = increments_from_sigmas(default.cpu().double())
    g = torch.Generator().manual_seed(0)
    draws = torch._sample_dirichlet(40.0 * inc, generator=g)
    n = inc.shape[-1]
    return sigmas_from_increments(0.1 / n + (1 - 0.1) * draws).float()


def run(bb, batch: int, steps: int) -> dict:
    """Encode, sample (per-row schedules) and decode once warm; time the sampler loop per step."""
    x = bb.initial_noise(list(range(batch)))
    cond = bb.encode([PROMPTS[i % len(PROMPTS)] for i in range(batch)])
    sig = _per_row(bb.default_sigmas(steps, x))
    bb.sample_latents(x, cond, sig[:, [0, -1]] if steps > 1 else sig)  # warm-up: one step, kernels chosen
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t = time.perf_counter()
    lat = bb.sample_latents(x, cond, sig)
    torch.cuda.synchronize()
    loop = time.perf_counter() - t
    t = time.perf_counter()
    img = bb.decode(lat)
    torch.cuda.synchronize()
    dec = time.perf_counter() - t
    ok = bool(torch.isfinite(img).all()) and img.shape == (batch, 3, bb.height, bb.width)
    ok = ok and 0.0 <= img.min().item() and img.max().item() <= 1.0 and img.std().item() > 0
    return {
        "ok": ok, "batch": batch, "steps": steps, "res": f"{bb.height}x{bb.width}",
        "ms_per_step": 1e3 * loop / steps, "decode_ms": 1e3 * dec,
        "peak_gib": torch.cuda.max_memory_allocated() / 2**30,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("models", nargs="*", help="NAME=PATH real pipelines to check besides the cached ones")
    ap.add_argument("--no-real", action="store_true")
    ap.add_argument("--budget", type=float, default=200.0, help="seconds this script may take in all")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("gpu_smoke: no CUDA device; nothing checked")
        return 0
    start = time.perf_counter()
    torch.backends.cuda.matmul.allow_tf32 = False  # bf16 models; keep fp32 bits (sigmas, Euler state) exact
    print(f"gpu_smoke on {torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    rows, failures = [], 0
    with tempfile.TemporaryDirectory(prefix="jsbench-smoke-") as tmp:
        for kind in TINY_KINDS:
            folder = save_tiny_pipeline(kind, Path(tmp) / kind)
            t = time.perf_counter()
            bb = load_backbone(kind, model=str(folder), device="cuda")
            load = time.perf_counter() - t
            assert bb.dtype == torch.bfloat16, bb.dtype
            r = run(bb, batch=4, steps=8 if kind != "flux-schnell" else 4)
            rows.append({"backbone": f"{kind} (tiny)", "load_s": load, **r})
            failures += not r["ok"]
            del bb
        wanted = {} if args.no_real else {k: v for k, v in REAL.items() if _cached_file(v, "model_index.json")}
        for spec in args.models:
            name, _, path = spec.partition("=")
            wanted[name] = path
        for name, model in wanted.items():
            left = args.budget - (time.perf_counter() - start)
            if left < REAL_COST.get(name, 90):
                rows.append({"backbone": name, "ok": None, "note": f"skipped: {left:.0f}s of budget left"})
                continue
            gc.collect()
            torch.cuda.empty_cache()
            t = time.perf_counter()
            try:
                bb = load_backbone(name, model=model, device="cuda")
            except Exception as exc:  # report, keep going
                rows.append({"backbone": name, "ok": False, "note": f"load failed: {str(exc).splitlines()[0][:120]}"})
                failures += 1
                continue
            load = time.perf_counter() - t
            r = run(bb, batch=2, steps=4)
            rows.append({"backbone": name, "load_s": load, **r})
            failures += not r["ok"]
            del bb
            gc.collect()
            torch.cuda.empty_cache()

    head = f"{'backbone':<22}{'ok':>5}{'load s':>8}{'batch':>6}{'steps':>6}{'res':>11}{'ms/step':>10}{'decode ms':>11}{'peak GiB':>10}"
    print(head)
    print("-" * len(head))
    for r in rows:
        if "ms_per_step" not in r:
            print(f"{r['backbone']:<22}{str(r['ok']):>5}  {r.get('note', '')}")
            continue
        print(f"{r['backbone']:<22}{'yes' if r['ok'] else 'NO':>5}{r['load_s']:>8.1f}{r['batch']:>6}{r['steps']:>6}{r['res']:>11}"
              f"{r['ms_per_step']:>10.1f}{r['decode_ms']:>11.1f}{r['peak_gib']:>10.2f}")
    print(f"gpu_smoke: {len(rows)} rows, {failures} failed, {time.perf_counter() - start:.0f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
