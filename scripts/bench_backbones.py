#!/usr/bin/env python
"""Cost of per-instance schedules on the real backbones' code paths, and of the policy next to the sampler.

Two questions (issue 3), answered per backbone:

1. Does a different schedule per row cost anything? One batched call of `backbone.sample` with a
   distinct schedule on every row, over the same call with one shared schedule on every row (goal
   <= 1.05x). Both run on the tiny random-weight pipelines on CPU, interleaved, median of repeats, in one
   process. For context it also times the diffusers pipeline over the same batch (one shared schedule,
   embeddings precomputed), and the naive way to get per-row schedules from it: one call per row.
2. What does the policy cost? (a) measured on the tiny pipelines: the policy's forward over the
   sampler call; (b) at full size, where neither can run here: FLOPs of the policy train builds
   (`jsbench policies size`) at the real shapes over FLOPs of one full-size backbone step (real configs instantiated on the
   meta device, counted with torch's FlopCounterMode: no weights, no memory), per step and per sampler
   call at the backbone's default step count (goal <= 1% per step).

    python scripts/bench_backbones.py                     # all four, the table (--write: bench/results/backbones.json)
    python scripts/bench_backbones.py --kinds flux-dev --repeats 11 --batch 8 --steps 8
    python scripts/bench_backbones.py --flops-only --write   # recount the full-size FLOPs, keep the committed timings

Beside each full-size denoiser step it counts, per image, the text encoders on the prompt (and the negative
prompt under guidance) and one VAE decode at 1024^2: what `--plan` adds to the sampler's FLOPs.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.analysis.backbone_costs import FULL_SIZE, backbone_step_flops, bench_one, full_size, full_size_policy  # noqa: E402
from jsbench.backbones.full_size import text_encode_flops, vae_decode_flops  # noqa: E402
from jsbench.backbones.tiny import TINY_KINDS, save_tiny_pipeline  # noqa: E402
from jsbench.io import add_result_options, write_result  # noqa: E402



def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kinds", nargs="+", default=list(TINY_KINDS), choices=list(TINY_KINDS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=8, help="steps per call (a timestep-distilled sampler, flux-schnell: at most its default 4)")
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: least noise on a shared CPU)")
    ap.add_argument("--no-naive", action="store_true", help="skip the one-pipeline-call-per-row comparison")
    ap.add_argument("--no-flops", action="store_true", help="skip the full-size FLOP estimate")
    ap.add_argument("--flops-only", action="store_true",
                    help="only the full-size FLOP estimate; the tiny timings are kept from the committed JSON")
    add_result_options(ap, "bench/results/backbones.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    if args.flops_only and args.no_flops:
        print("bench_backbones: --flops-only and --no-flops exclude each other", file=sys.stderr)
        return 2
    committed = ROOT / "bench" / "results" / "backbones.json"
    kept = json.loads(committed.read_text()) if args.flops_only else {}
    rows = list(kept.get("tiny", []))
    with tempfile.TemporaryDirectory(prefix="jsbench-bench-") as tmp:
        for kind in [] if args.flops_only else args.kinds:
            folder = save_tiny_pipeline(kind, Path(tmp) / kind)
            rows.append(bench_one(kind, folder, args.batch, args.steps, args.repeats, naive=not args.no_naive))

    full = []
    if not args.no_flops:
        for kind in FULL_SIZE:
            step_flops, net_params = backbone_step_flops(kind)
            steps = full_size(kind)["default_steps"]
            pol_flops, pol_params = full_size_policy(kind, steps)
            full.append({
                "backbone": kind, "network_params": net_params, "step_flops": step_flops,
                "cfg_batch": FULL_SIZE[kind]["cfg_batch"], "default_steps": steps,
                "policy_params": pol_params, "policy_flops": pol_flops,
                "policy_over_step": pol_flops / step_flops, "policy_over_sampler": pol_flops / (steps * step_flops),
                "text_encode_flops": text_encode_flops(kind), "vae_decode_flops": vae_decode_flops(kind),
            })

    print(f"\nper-instance schedules on tiny pipelines (CPU, {args.threads} thread(s), batch {args.batch}, median of {args.repeats})")
    head = f"{'backbone':<13}{'steps':>6}{'shared ms':>11}{'per-row ms':>12}{'per/shared':>12}{'pipeline ms':>13}{'naive/per':>11}{'policy/sampler':>16}"
    print(head)
    print("-" * len(head))
    for r in rows:
        s = r["seconds_median"]
        naive = f"{r['naive_over_per_row']:.2f}x" if r["naive_over_per_row"] else "-"
        print(f"{r['backbone']:<13}{r['steps']:>6}{1e3 * s['shared']:>11.1f}{1e3 * s['per_row']:>12.1f}"
              f"{r['per_row_over_shared_median']:>11.3f}x{1e3 * s['pipeline_shared']:>13.1f}{naive:>11}"
              f"{100 * r['tiny_policy_over_sampler']:>15.2f}%")
    if full:
        print("\nfull size at 1024 px (FLOPs counted on the meta device; the policy train builds, one forward per sample)")
        head = (f"{'backbone':<14}{'net params':>11}{'step TFLOPs':>13}{'policy params':>15}{'policy GFLOPs':>15}{'policy/step':>13}"
                f"{'policy/call':>13}{'text TFLOPs':>13}{'VAE TFLOPs':>12}")
        print(head)
        print("-" * len(head))
        for f in full:
            print(f"{f['backbone']:<14}{f['network_params'] / 1e9:>10.2f}B{f['step_flops'] / 1e12:>13.2f}{f['policy_params'] / 1e6:>14.1f}M"
                  f"{f['policy_flops'] / 1e9:>15.2f}{100 * f['policy_over_step']:>12.3f}%{100 * f['policy_over_sampler']:>12.4f}%"
                  f"{f['text_encode_flops'] / 1e12:>13.2f}{f['vae_decode_flops'] / 1e12:>12.2f}")

    record = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(), "python": platform.python_version(), "torch": torch.__version__,
        "threads": args.threads, "repeats": args.repeats,
        "tiny": rows, "full_size_estimate": full,
        "goals": {"per_row_over_shared": 1.05, "policy_over_step": 0.01},
    }
    if args.flops_only:  # the timings are the committed run's: keep its record of where they were taken
        record.update({k: kept[k] for k in ("when", "host", "python", "threads", "repeats") if k in kept}, flops_counted=record["when"])
    print()
    write_result(record, write=args.write, out=args.out, committed=ROOT / "bench" / "results" / "backbones.json", root=ROOT, newline=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
