#!/usr/bin/env python
"""Measure what the image tolerance of the parity tests must admit and what it must catch (CPU).

For each tiny pipeline (tests/tiny_pipelines.py builds the same ones), in float32 and bfloat16, with the
pipeline's default schedule at 4 steps on three prompts:
  same_latents   max |our decode of the pipeline's final latents - the pipeline's own image|
  one_ulp        max image change when every decoder input moves by one ulp of the dtype (what one
                 rounding difference upstream, e.g. another kernel on CUDA, can do to an image)
  no_shift       max image change when the VAE's `shift_factor` is dropped (SD3.5, Flux; SD-XL has none)
  *_mean         the same as a mean absolute change over all pixels
Images are in [0, 1]. Prints one JSON object; `--out FILE` also writes it (atomically).

    python scripts/parity_bounds.py            # ~30 s on one core
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.backbones import load_backbone  # noqa: E402
from jsbench.backbones.tiny import TINY_KINDS, TINY_SAMPLING, save_tiny_pipeline  # noqa: E402
from jsbench.io import write_json_atomic  # noqa: E402

PROMPTS = ["a red cat", "two blue dogs next to a car", "a sign that says hello world"]
SEEDS = [11, 12, 13]
STEPS = 4


def _max_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float().cpu() - b.float().cpu()).abs().max().item()


def _mean_abs(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float().cpu() - b.float().cpu()).abs().mean().item()


def _one_ulp_up(t: torch.Tensor) -> torch.Tensor:
    return torch.nextafter(t, torch.full_like(t, float("inf")))


def measure(bb) -> dict:
    x = bb.initial_noise(SEEDS)
    kw = dict(TINY_SAMPLING[bb.name], num_inference_steps=STEPS)
    ref_lat = bb.pipe(PROMPTS, latents=x.clone(), output_type="latent", **kw).images
    ref_img = bb.pipe(PROMPTS, latents=x.clone(), output_type="pt", **kw).images
    ours = bb.decode(ref_lat)
    bumped = bb.decode(_one_ulp_up(ref_lat))
    row = {
        "same_latents": _max_abs(ours, ref_img), "one_ulp": _max_abs(bumped, ours), "one_ulp_mean": _mean_abs(bumped, ours),
    }
    cfg = bb.pipe.vae.config
    if getattr(cfg, "shift_factor", None):
        saved = cfg.shift_factor
        try:
            bb.pipe.vae.register_to_config(shift_factor=0.0)
            dropped = bb.decode(ref_lat)
            row["no_shift"] = _max_abs(dropped, ours)
            row["no_shift_mean"] = _mean_abs(dropped, ours)
        finally:
            bb.pipe.vae.register_to_config(shift_factor=saved)
    else:
        row["no_shift"] = row["no_shift_mean"] = None
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    result: dict = {"device": "cpu", "torch": torch.__version__, "steps": STEPS, "kinds": {}}
    with tempfile.TemporaryDirectory(prefix="jsbench-bounds-") as tmp:
        for kind in TINY_KINDS:
            folder = save_tiny_pipeline(kind, Path(tmp) / kind)
            result["kinds"][kind] = {
                name: measure(load_backbone(kind, model=str(folder), device="cpu", dtype=dtype))
                for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))
            }
    rows = [r for k in result["kinds"].values() for r in k.values()]
    bf16 = [k["bf16"] for k in result["kinds"].values()]
    result["summary"] = {
        "max_same_latents": max(r["same_latents"] for r in rows),
        "max_one_ulp_bf16": max(r["one_ulp"] for r in bf16),
        "min_no_shift": min(r["no_shift"] for r in rows if r["no_shift"] is not None),
        "max_one_ulp_mean_bf16": max(r["one_ulp_mean"] for r in bf16),
        "min_no_shift_mean": min(r["no_shift_mean"] for r in rows if r["no_shift_mean"] is not None),
    }
    print(json.dumps(result, indent=1))
    if args.out:
        write_json_atomic(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
