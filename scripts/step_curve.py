#!/usr/bin/env python
"""GenEval correctness of a backbone's own default schedule at each step budget, on the held-out prompts.

The few-step vs many-step table of a backbone that draws the embedded world: where its default
sampler fails, and the budget at which it stops improving (its ceiling).

    python scripts/step_curve.py --backbone scenes-dit --steps 3 4 5 8 14 28 50 100 --seeds 4 --write

Same seeds for every budget, so differences are paired. Prints the table; --write replaces the committed
bench/results/step-curve-<backbone>.json, --out PATH writes elsewhere.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from jsbench.backbones import load_backbone
from jsbench.io import add_result_options, write_result
from jsbench.stats import mean_stderr
from jsbench.suites import load_suite
from jsbench.world.calibration import score_grid

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backbone", default="scenes-dit")
    parser.add_argument("--steps", type=int, nargs="+", default=[3, 4, 5, 8, 14, 28, 50, 100])
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--chunk", type=int, default=128, help="images per sampler call")
    add_result_options(parser, "bench/results/step-curve-<backbone>.json")
    args = parser.parse_args(argv)
    committed = ROOT / "bench" / "results" / f"step-curve-{args.backbone}.json"
    console = Console()
    backbone = load_backbone(args.backbone)
    suite = load_suite("geneval", backbone)  # the world's exact detector and GenEval's rules
    items = suite.items("test")
    seeds = list(range(30_000, 30_000 + args.seeds))
    rows = []
    for n in args.steps:
        start = time.perf_counter()
        sig = backbone.default_sigmas(n, torch.zeros(1, 1)).cpu()
        correct = score_grid(backbone, suite, items, seeds, sig, chunk=args.chunk)[0]  # [P, S]
        per_prompt = correct.mean(-1)
        stderr = mean_stderr(per_prompt)[1]
        rows.append({"steps": n, "correct": float(correct.mean()), "stderr": stderr, "seconds": time.perf_counter() - start,
                     "sigmas": [round(float(v), 4) for v in sig[0]]})
        console.print(f"{n:>4} steps: {rows[-1]['correct']:.3f} ± {stderr:.3f}  ({rows[-1]['seconds']:.0f} s)")
    table = Table(title=f"{args.backbone}: default schedule by step budget · {len(items)} held-out prompts × {len(seeds)} seeds")
    table.add_column("steps")
    table.add_column("GenEval correct")
    for r in rows:
        table.add_row(str(r["steps"]), f"{r['correct']:.3f} ± {r['stderr']:.3f}")
    console.print(table)
    write_result({"backbone": args.backbone, "model_id": backbone.model_id, "seeds": seeds, "rows": rows},
                 write=args.write, out=args.out, committed=committed, root=ROOT, log=console.print, indent=2)


if __name__ == "__main__":
    main()
