#!/usr/bin/env python
"""The table of planned GPU-hours in docs/real-backbones.md ("The plans, on an H100"), printed from jsbench.report.plan.

Per real backbone: `jsbench compare --suite geneval --steps 5 --plan` (its rows and total), the same with
`--zoo karras,ays,oss,searched`, `jsbench train --recipe paper --plan` (200 updates a budget) and
`jsbench eval --suite hpdv2 --steps 5 --plan`. Offline, no weights; a few seconds.

    python scripts/plan_table.py [--gpu h100]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.report.plan import RECIPES, plan_compare, plan_eval, plan_train  # noqa: E402

BACKBONES = ("flux-dev", "sd35-large", "sd35-medium", "sdxl")


def _row_name(method: str, steps: int) -> str:
    return f"ceiling ({steps})" if method.startswith("ceiling") else method


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h100")
    args = ap.parse_args(argv)
    print("| backbone | compare rows | compare GPU-h | + oss, searched | train --recipe paper (L = 5 … 80) | eval hpdv2 |")
    print("|---|---|---|---|---|---|")
    for name in BACKBONES:
        compare = plan_compare("geneval", name, [5], gpu=args.gpu)
        rows = ", ".join(f"{_row_name(r.method, r.steps)} {r.gpu_hours:.2f}" for r in compare.rows)
        teacher = plan_compare("geneval", name, [5], gpu=args.gpu, zoo=["karras", "ays", "oss", "searched"])
        has_oss = any(r.method == "oss" for r in teacher.rows)
        train = plan_train(name, 5, 200, RECIPES["paper"]["contexts"][name], RECIPES["paper"]["samples"], gpu=args.gpu, recipe="paper")
        hpd = plan_eval("hpdv2", name, 5, "default", gpu=args.gpu)
        print(f"| {name} | {rows} | {compare.gpu_hours:.2f} | {teacher.gpu_hours:.2f}{'' if has_oss else ' (no oss: not a flow clock)'} | "
              f"{train.rows[0].gpu_hours:.2f} … {train.rows[-1].gpu_hours:.2f}, {train.gpu_hours:.1f} in all | {hpd.gpu_hours:.2f} |")
    print(f"\nthroughput: {compare.throughput_source}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
