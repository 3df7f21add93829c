#!/usr/bin/env python
"""What instance-level schedules cost, as ratios measured in one run on this machine.

1. Analytic backbone: one batched sampler call with a different schedule on every row, over the same
   call with one shared (default) schedule on every row; for context, one call per row. Interleaved
   repeats, medians, several budgets and batch sizes.
2. The policy next to the sampler: the instance policy's forward (its deterministic mean schedule, what
   evaluation runs) over the sampler call, and in training the policy's sampling + log-prob + backward
   over sampling + reward.
3. The tiny real backbones (SD-XL, SD3.5, Flux-Dev, Flux-Schnell on random-weight pipelines): the numbers
   of scripts/bench_backbones.py, read from bench/results/backbones.json (run that script to refresh).
4. Evaluation throughput, images/s, for every suite in `jsbench.suites.available_suites()`: sampling,
   scoring, and end to end through `evaluate`.
5. Scale: evaluation images/s and training updates/s with 2 processes (torchrun, gloo, one thread each)
   over 1 process (one thread), the world already built in each process. Also 1 process with as many
   threads as the 2 processes have in all.

    python scripts/bench_cost.py                  # the table (--write: bench/results/cost.json)
    python scripts/bench_cost.py --repeats 5 --no-scale     # quick
"""


from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.backbones import load_backbone  # noqa: E402
from jsbench.analysis.costs import bench_analytic, bench_scale, bench_suites, bench_training_split, machine, scale_worker  # noqa: E402
from jsbench.io import add_result_options, write_result  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[3, 5, 10, 20])
    ap.add_argument("--batches", type=int, nargs="+", default=[64, 512])
    ap.add_argument("--naive-batch", type=int, default=64, help="batch at which one-call-per-row is also timed")
    ap.add_argument("--repeats", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1, help="torch intra-op threads (1: least noise on a shared CPU)")
    ap.add_argument("--suite-seeds", type=int, default=4)
    ap.add_argument("--suite-steps", type=int, default=5)
    ap.add_argument("--no-scale", dest="scale", action="store_false", help="skip the 1 vs 2 process measurement")
    ap.add_argument("--scale-seeds", type=int, default=64)
    ap.add_argument("--scale-updates", type=int, default=100)
    ap.add_argument("--scale-contexts", type=int, default=16)
    ap.add_argument("--scale-eval-steps", type=int, default=5)
    ap.add_argument("--scale-train-steps", type=int, default=5)
    ap.add_argument("--scale-worker", default=None, help=argparse.SUPPRESS)
    add_result_options(ap, "bench/results/cost.json")
    args = ap.parse_args(argv)
    if args.scale_worker:
        return scale_worker(args)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    mach = machine()

    bb = load_backbone("analytic")
    print("  analytic sampling ...", flush=True)
    analytic = bench_analytic(bb, args.steps, args.batches, args.repeats, args.naive_batch)
    print("  training split ...", flush=True)
    training = [bench_training_split(n, 16, 4, 20, ROOT / "runs" / "bench-cost") for n in (3, 20)]
    print("  suites ...", flush=True)
    suites = bench_suites(bb, args.suite_steps, args.suite_seeds, 512)
    tiny_path = ROOT / "bench" / "results" / "backbones.json"
    tiny = json.loads(tiny_path.read_text()) if tiny_path.is_file() else None
    scale = None
    if args.scale:
        print("  scale (1 vs 2 processes) ...", flush=True)
        scale = bench_scale(args, str(Path(__file__).resolve()))

    print(f"\nmachine: {mach['cpu']}, {mach['usable_cpus']} usable of {mach['logical_cpus']} logical CPUs, torch {mach['torch']}, "
          f"{args.threads} intra-op thread(s), load average {', '.join(f'{v:.1f}' for v in mach['load_average'])} at start")
    print(f"\n1-2. analytic backbone: one batched call; per/shared = geometric mean of {2 * ((args.repeats + 1) // 2)} alternating pairs, times = medians")
    head = f"{'batch':>6}{'steps':>6}{'shared ms':>11}{'per-row ms':>12}{'per/shared':>12}{'1 call/row':>12}{'policy ms':>11}{'policy/sampler':>16}{'/latents only':>15}"
    print(head)
    print("-" * len(head))
    for r in analytic:
        s = r["seconds_median"]
        naive = f"{r['one_call_per_row_over_batched']:.1f}x" if r["one_call_per_row_over_batched"] else "-"
        print(f"{r['batch']:>6}{r['steps']:>6}{1e3 * s['shared']:>11.2f}{1e3 * s['per_row']:>12.2f}{r['per_row_over_shared']:>11.3f}x"
              f"{naive:>12}{1e3 * s['policy_mean_schedule']:>11.3f}{100 * r['policy_over_sampler']:>15.2f}%{100 * r['policy_over_sampler_latents']:>14.2f}%")
    print("\n    training update (B=16, K=4), medians:")
    for t in training:
        s = t["seconds_median"]
        print(f"    {t['steps']:>3} steps: policy (draw + log-prob + backward + AdamW) {1e3 * s['policy']:.1f} ms, sampler {1e3 * s['sampler']:.1f} ms, "
              f"reward {1e3 * s['reward']:.1f} ms: policy/sampler {100 * t['policy_over_sampler']:.1f}%, "
              f"policy/(sampler+reward) {100 * t['policy_over_sampler_and_reward']:.1f}%")
    if tiny:
        print(f"\n3. tiny real backbones (from {tiny_path.relative_to(ROOT)}, {tiny.get('when')}, {tiny.get('threads')} thread(s), batch {tiny['tiny'][0]['batch'] if tiny.get('tiny') else '?'})")
        for r in tiny.get("tiny", []):
            print(f"    {r['backbone']:<13} per-row/shared {r['per_row_over_shared_median']:.3f}x   tiny policy/sampler {100 * r['tiny_policy_over_sampler']:.2f}%")
        for f in tiny.get("full_size_estimate", []):
            print(f"    {f['backbone']:<13} full size (FLOPs): policy/step {100 * f['policy_over_step']:.3f}%   policy/sampler call {100 * f['policy_over_sampler']:.4f}%")
    else:
        print("\n3. tiny real backbones: bench/results/backbones.json missing; run python scripts/bench_backbones.py")
    print(f"\n4. evaluation throughput, analytic backbone, default schedule, {args.suite_steps} steps, test prompts x {args.suite_seeds} seeds, batch 512")
    head = f"{'suite':<9}{'images':>8}{'sampling img/s':>16}{'scoring img/s':>15}{'evaluate img/s':>16}{'scoring share':>15}{'first call s':>14}"
    print(head)
    print("-" * len(head))
    for s in suites:
        if "error" in s:
            print(f"{s['suite']:<9}  unavailable: {s['error']}")
            continue
        print(f"{s['suite']:<9}{s['images']:>8}{s['sampling_images_per_s']:>16.0f}{s['scoring_images_per_s']:>15.0f}{s['evaluate_images_per_s']:>16.0f}"
              f"{100 * s['scoring_share']:>14.0f}%{s['first_call_seconds']:>14.1f}")
    if scale:
        print(f"\n5. scale: geneval evaluation ({args.scale_eval_steps} steps, {args.scale_seeds} seeds) and training updates "
              f"(B={args.scale_contexts}, K=4, {args.scale_train_steps} steps), world built before timing")
        for label, r in scale["runs"].items():
            print(f"    {label:<24} eval {r['eval_images_per_s']:>7.0f} images/s   train {r['train_updates_per_s']:>6.2f} updates/s")
        print(f"    2 processes over 1 (1 thread each): eval {scale['eval_2proc_over_1proc']:.2f}x, train {scale['train_2proc_over_1proc']:.2f}x; "
              f"over 1 process with 2 threads: eval {scale['eval_2proc_over_1proc_2threads']:.2f}x, train {scale['train_2proc_over_1proc_2threads']:.2f}x")

    record = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "command": "python scripts/bench_cost.py " + " ".join(argv or sys.argv[1:]),
        "machine": mach, "load_average_end": os.getloadavg(), "threads": args.threads, "repeats": args.repeats,
        "analytic": analytic, "training": training, "suites": suites,
        "tiny_backbones": {"source": str(tiny_path.relative_to(ROOT)), "when": tiny.get("when"),
                           "rows": [{k: r[k] for k in ("backbone", "batch", "steps", "per_row_over_shared_median", "tiny_policy_over_sampler")} for r in tiny.get("tiny", [])],
                           "full_size_estimate": tiny.get("full_size_estimate", [])} if tiny else None,
        "scale": scale, "seconds": time.perf_counter() - start,
    }
    print()
    write_result(record, write=args.write, out=args.out, committed=ROOT / "bench" / "results" / "cost.json", root=ROOT, newline=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
