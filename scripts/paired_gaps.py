#!/usr/bin/env python
"""Paired comparisons of the shipped analytic policies on held-out prompts and seeds (issue 2's numbers).

    python scripts/paired_gaps.py [--steps 3 5] [--seeds 16]

For each budget: overall GenEval score of default, global, js (prompt + noise), js (prompt-only), rloo,
xctx and the 200-step ceiling; paired differences (same prompts, same seeds) with standard errors;
and the share of the default-to-ceiling gap each method recovers. Writes bench/results/paired_gaps.json.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

from jsbench.backbones import load_backbone
from jsbench.evaluate import evaluate, resolve_schedule
from jsbench.leaderboard import write_text_atomic
from jsbench.suites import load_suite


def overall_and_task_scores(run, suite):
    """Per-image correctness weighted so that its mean is GenEval's overall (mean of task means)."""
    rows = run.rows()
    tasks = {it.task for it, _ in rows}
    counts = {t: sum(1 for it, _ in rows if it.task == t) for t in tasks}
    return [s["correct"] * len(rows) / (len(tasks) * counts[it.task]) for (it, _), s in zip(rows, run.scores)]


def mean_se(xs):
    m = sum(xs) / len(xs)
    v = sum((x - m) ** 2 for x in xs) / (len(xs) - 1)
    return m, math.sqrt(v / len(xs))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, nargs="+", default=[3, 5])
    p.add_argument("--seeds", type=int, default=16)
    p.add_argument("--policies", type=Path, default=Path("policies/analytic"))
    args = p.parse_args()
    bb = load_backbone("analytic")
    suite = load_suite("geneval", bb)
    ceiling_run = evaluate(bb, suite, resolve_schedule("ceiling", bb, 200), args.seeds, progress=False)
    ceiling = overall_and_task_scores(ceiling_run, suite)
    report = {}
    for n in args.steps:
        specs = {"default": "default"}
        for name in ("global", "js", "js-prompt", "rloo", "xctx"):
            if (args.policies / f"{name}-n{n}" / "manifest.json").exists():
                specs[name] = f"policy:{args.policies / f'{name}-n{n}'}"
        scores = {k: overall_and_task_scores(evaluate(bb, suite, resolve_schedule(v, bb, n), args.seeds, progress=False), suite) for k, v in specs.items()}
        c_mean = sum(ceiling) / len(ceiling)
        d_mean = sum(scores["default"]) / len(scores["default"])
        rows = {}
        print(f"\n== {n} steps ({len(ceiling)} images; ceiling {c_mean:.3f})")
        for k, xs in scores.items():
            m, se = mean_se(xs)
            rows[k] = {"overall": m, "stderr": se, "gap_recovered": (m - d_mean) / (c_mean - d_mean)}
            print(f"  {k:<10} {m:.3f} ± {se:.3f}   gap recovered {rows[k]['gap_recovered']:.1%}")
        pairs = [("global", "default"), ("js", "global"), ("js", "default"), ("js", "js-prompt"), ("js", "rloo"), ("js", "xctx")]
        for a, b in pairs:
            if a in scores and b in scores:
                m, se = mean_se([x - y for x, y in zip(scores[a], scores[b])])
                rows[f"{a} - {b}"] = {"diff": m, "stderr": se, "outside_2se": abs(m) > 2 * se}
                print(f"  {a} − {b}: {m:+.3f} ± {se:.3f}{'  (outside 2 SE)' if abs(m) > 2 * se else ''}")
        report[n] = {"ceiling": c_mean, **rows}
    out = Path("bench/results/paired_gaps.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(out, json.dumps(report, indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
