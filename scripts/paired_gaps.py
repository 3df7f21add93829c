#!/usr/bin/env python
"""Paired comparisons of the shipped analytic policies on held-out prompts and seeds (issue 2's numbers).

    python scripts/paired_gaps.py [--steps 3 5] [--seeds 16] [--write | --out PATH]

For each budget: overall GenEval score of default, global, js (prompt + noise), js (prompt-only), rloo,
xctx and the 200-step ceiling; paired differences (same prompts, same seeds) with standard errors;
and the share of the default-to-ceiling gap each method recovers. Prints them; writes JSON only when told:
--write replaces the committed bench/results/paired_gaps.json, --out PATH writes elsewhere.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from jsbench.backbones import load_backbone
from jsbench.evaluate import evaluate, resolve_schedule
from jsbench.io import add_result_options, write_result
from jsbench.stats import cluster_mean, weighted_overall
from jsbench.suites import load_suite

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "paired_gaps.json"


def task_scores(run):
    """{task: [(prompt, correct) per image]} in a fixed (prompt, image) order."""
    out: dict[str, list[tuple[str, float]]] = {}
    for (it, _), sc in zip(run.rows(), run.scores):
        out.setdefault(it.task, []).append((it.prompt, sc["correct"]))
    return out


def overall(per_task):
    """GenEval's overall (mean of task means) and its standard error from the per-task prompt-clustered
    standard errors (jsbench.stats)."""
    est = weighted_overall([cluster_mean([v for _, v in xs], [p for p, _ in xs]) for xs in per_task.values()])
    return est.value, est.stderr


def paired(a, b):
    return overall({t: [(p, x - y) for (p, x), (_, y) in zip(a[t], b[t])] for t in a})


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, nargs="+", default=[3, 5])
    p.add_argument("--seeds", type=int, default=16)
    p.add_argument("--policies", type=Path, default=ROOT / "policies" / "analytic")
    add_result_options(p, "bench/results/paired_gaps.json")
    args = p.parse_args(argv)
    bb = load_backbone("analytic")
    suite = load_suite("geneval", bb)
    ceiling_run = evaluate(bb, suite, resolve_schedule("ceiling", bb, 200), args.seeds, progress=False)
    c_mean, _ = overall(task_scores(ceiling_run))
    report = {}
    for n in args.steps:
        specs = {"default": "default"}
        for name in ("global", "js", "js-prompt", "rloo", "xctx"):
            if (args.policies / f"{name}-n{n}" / "manifest.json").exists():
                specs[name] = f"policy:{args.policies / f'{name}-n{n}'}"
        scores = {k: task_scores(evaluate(bb, suite, resolve_schedule(v, bb, n), args.seeds, progress=False)) for k, v in specs.items()}
        d_mean, _ = overall(scores["default"])
        rows = {}
        print(f"\n== {n} steps ({sum(map(len, scores['default'].values()))} images; ceiling {c_mean:.3f})")
        for k, xs in scores.items():
            m, se = overall(xs)
            rows[k] = {"overall": m, "stderr": se, "gap_recovered": (m - d_mean) / (c_mean - d_mean)}
            print(f"  {k:<10} {m:.3f} ± {se:.3f}   gap recovered {rows[k]['gap_recovered']:.1%}")
        pairs = [("global", "default"), ("js", "global"), ("js", "default"), ("js", "js-prompt"), ("js", "rloo"), ("js", "xctx")]
        for a, b in pairs:
            if a in scores and b in scores:
                m, se = paired(scores[a], scores[b])
                rows[f"{a} - {b}"] = {"diff": m, "stderr": se, "outside_2se": abs(m) > 2 * se}
                print(f"  {a} − {b}: {m:+.3f} ± {se:.3f}{'  (outside 2 SE)' if abs(m) > 2 * se else ''}")
        report[n] = {"ceiling": c_mean, **rows}
    print("± is one standard error, clustered by prompt.\n")
    write_result(report, write=args.write, out=args.out, committed=COMMITTED, root=ROOT, indent=2)


if __name__ == "__main__":
    main()
