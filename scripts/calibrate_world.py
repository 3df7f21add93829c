#!/usr/bin/env python
"""Print the embedded world's calibration table: default, uniform, shift 3, searched global, searched
per prompt and the 200-step ceiling at N = 3, 4, 5 on the held-out prompts.

    python scripts/calibrate_world.py [--search-seeds 16] [--report-seeds 16] [--steps 3 4 5]
    python scripts/calibrate_world.py --backbone scenes-dit --search-seeds 8 --grid-points 10 --shifts 12 \
        --random-count 40 --ceiling-steps 50 --write

Global and per-prompt schedules are chosen on search seeds and reported on fresh seeds. Prints the
table; --write replaces the committed bench/results/calibration.json (calibration-<backbone>.json for
another backbone), --out PATH writes elsewhere. Takes about 10-20 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import asdict
from pathlib import Path

import torch
from rich.console import Console
from rich.table import Table

from jsbench.backbones import load_backbone
from jsbench.io import add_result_options, write_result
from jsbench.suites import load_suite
from jsbench.world.calibration import calibrate_budget, score_grid

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[3, 4, 5])
    parser.add_argument("--search-seeds", type=int, default=16)
    parser.add_argument("--report-seeds", type=int, default=16)
    add_result_options(parser, "bench/results/calibration[-<backbone>].json")
    parser.add_argument("--backbone", default="analytic", help="any backbone that draws the embedded world (analytic, scenes-dit)")
    parser.add_argument("--ceiling-steps", type=int, default=200)
    parser.add_argument("--grid-points", type=int, default=20, help="N=3 candidates: every pair of this many interior points")
    parser.add_argument("--shifts", type=int, default=24, help="shifted-grid candidates")
    parser.add_argument("--random-count", type=int, default=120, help="N>3 candidates: Dirichlet draws")
    args = parser.parse_args()
    console = Console()
    backbone = load_backbone(args.backbone)
    candidates = dict(grid_points=args.grid_points, shifts=args.shifts, random_count=args.random_count)
    suite = load_suite("geneval", backbone)  # scores as evaluation does: the world's exact detector, GenEval's rules
    items = suite.items("test")
    search = list(range(10_000, 10_000 + args.search_seeds))
    report = list(range(20_000, 20_000 + args.report_seeds))
    start = time.perf_counter()
    ceiling = float(score_grid(backbone, suite, items, report, backbone.default_sigmas(args.ceiling_steps, torch.zeros(1, 1)).cpu()).mean())
    rows = []
    for n in args.steps:
        rows.append(calibrate_budget(backbone, suite, items, n, search, report, ceiling, candidates))
        console.print(f"N={n} done ({time.perf_counter() - start:.0f} s)", style="dim")
    table = Table(title=f"{args.backbone} calibration · {len(items)} held-out prompts × {len(report)} seeds (GenEval correct)")
    for col in ("N", "default", "uniform", "shift 3", "searched global", "searched per prompt", "per-prompt − global", f"ceiling ({args.ceiling_steps})"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            str(r.steps), f"{r.default:.3f}", f"{r.uniform:.3f}", f"{r.shift3:.3f}", f"{r.searched_global:.3f}",
            f"{r.searched_per_prompt:.3f}", f"{r.per_prompt_gain:+.3f} ± {r.per_prompt_gain_stderr:.3f}", f"{r.ceiling:.3f}",
        )
    console.print(table)
    committed = ROOT / "bench" / "results" / ("calibration.json" if args.backbone == "analytic" else f"calibration-{args.backbone}.json")
    payload = {"backbone": args.backbone, "ceiling_steps": args.ceiling_steps, "candidates": candidates,
               "rows": [asdict(r) for r in rows], "seconds": time.perf_counter() - start}
    write_result(payload, write=args.write, out=args.out, committed=committed, root=ROOT, log=console.print, indent=2)


if __name__ == "__main__":
    main()
