#!/usr/bin/env python
"""Print the embedded world's calibration table: default, uniform, shift 3, searched global, searched
per prompt and the 200-step ceiling at N = 3, 4, 5 on the held-out prompts.

    python scripts/calibrate_world.py [--search-seeds 16] [--report-seeds 16] [--steps 3 4 5]

Global and per-prompt schedules are chosen on search seeds and reported on fresh seeds. Writes
bench/results/calibration.json. Takes about 10-20 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict
from pathlib import Path

from rich.console import Console
from rich.table import Table

from jsbench.backbones import load_backbone
from jsbench.leaderboard import write_text_atomic
from jsbench.schedule import uniform_sigmas
from jsbench.world.calibration import calibrate_budget, score_grid
from jsbench.world.scenes import make_prompts, split_prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, nargs="+", default=[3, 4, 5])
    parser.add_argument("--search-seeds", type=int, default=16)
    parser.add_argument("--report-seeds", type=int, default=16)
    parser.add_argument("--out", type=Path, default=Path("bench/results/calibration.json"))
    args = parser.parse_args()
    console = Console()
    backbone = load_backbone("analytic")
    metas = split_prompts(make_prompts(), "test")
    search = list(range(10_000, 10_000 + args.search_seeds))
    report = list(range(20_000, 20_000 + args.report_seeds))
    start = time.perf_counter()
    ceiling = float(score_grid(backbone, metas, report, uniform_sigmas(200)).mean())
    rows = []
    for n in args.steps:
        rows.append(calibrate_budget(backbone, metas, n, search, report, ceiling))
        console.print(f"N={n} done ({time.perf_counter() - start:.0f} s)", style="dim")
    table = Table(title=f"analytic world calibration · {len(metas)} held-out prompts × {len(report)} seeds (GenEval correct)")
    for col in ("N", "default", "uniform", "shift 3", "searched global", "searched per prompt", "per-prompt − global", "ceiling (200)"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            str(r.steps), f"{r.default:.3f}", f"{r.uniform:.3f}", f"{r.shift3:.3f}", f"{r.searched_global:.3f}",
            f"{r.searched_per_prompt:.3f}", f"{r.per_prompt_gain:+.3f} ± {r.per_prompt_gain_stderr:.3f}", f"{r.ceiling:.3f}",
        )
    console.print(table)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(args.out, json.dumps({"rows": [asdict(r) for r in rows], "seconds": time.perf_counter() - start}, indent=2) + "\n")
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
