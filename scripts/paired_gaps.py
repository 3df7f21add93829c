#!/usr/bin/env python
"""Paired comparisons of the shipped analytic policies on held-out prompts and
seeds (issue 2's numbers).

    python scripts/paired_gaps.py [--steps 3 5] [--seeds 16] [--write | --out F]

For each budget: overall GenEval score of default, every learned row under
policies/analytic/ (each the mean of its training seeds' policies,
<row>/seed<S>/, as `jsbench compare` evaluates it) and the 200-step ceiling;
the paired differences the leaderboard does not show (js − rloo, js − js
(prompt-only), js − xctx, beside global − default, js − global, js − default)
on the same prompts and seeds, each with its two-level SE, that SE's degrees of
freedom and the 95 % Student-t interval (jsbench.stats); and the share of the
default-to-ceiling gap each method recovers. A difference is "resolved" when
its t interval excludes 0: with three training seeds the seed term leaves few
df, so a difference of 2-3 SE often is not. Prints them; writes JSON only when
told: --write replaces the committed bench/results/paired_gaps.json, --out PATH
writes elsewhere.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from jsbench.backbones import load_backbone
from jsbench.report.compare import evaluate_learned_row, shipped_policies
from jsbench.evaluation.evaluate import EVAL_SEED_BASE, evaluate, resolve_schedule
from jsbench.io import add_result_options, write_result
from jsbench.evaluation.results import paired_estimates, run_metrics
from jsbench.stats import Estimate
from jsbench.suites import load_suite

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "paired_gaps.json"
# (a, b) contrasts a − b, by row label; a pair with a row not shipped at a budget is left out
PAIRS = [("global", "default"), ("js", "global"), ("js", "default"), ("js", "js (prompt-only)"), ("js", "rloo"), ("js", "xctx")]


def overall(suite, run) -> Estimate:
    """The run's overall score: GenEval's mean of task means, its prompt-clustered SE (two-level for a learned
    row of several training seeds) and that SE's df."""
    m = run_metrics(suite, run)[("overall", suite.primary_metric)]
    return Estimate(m.value, m.stderr, m.n_images, m.n_prompts, df=m.df)


def summary(est: Estimate) -> dict:
    lo, hi = est.interval()
    return {"stderr": est.stderr, "df": est.df, "ci95": [lo, hi]}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, nargs="+", default=[3, 5])
    p.add_argument("--seeds", type=int, default=16, help="images per prompt")
    p.add_argument("--policies", type=Path, default=ROOT / "policies", help="the policies root (rows under <root>/analytic/)")
    add_result_options(p, "bench/results/paired_gaps.json")
    args = p.parse_args(argv)
    bb = load_backbone("analytic")
    suite = load_suite("geneval", bb)

    def run_of(spec, n):
        return evaluate(bb, suite, resolve_schedule(spec, bb, n), args.seeds, seed_base=EVAL_SEED_BASE, progress=False)

    c_mean = overall(suite, run_of("ceiling", 200)).value
    report = {}
    for n in args.steps:
        runs = {"default": run_of("default", n)}
        train_seeds = {"default": None}
        for seed_folders in shipped_policies(args.policies, bb.name, n, suite.name):
            source, run = evaluate_learned_row(bb, suite, seed_folders, n, seeds=args.seeds, seed_base=EVAL_SEED_BASE)
            runs[source.label], train_seeds[source.label] = run, run.train_seeds
        d_mean = overall(suite, runs["default"]).value
        rows = {}
        print(f"\n== {n} steps ({len(runs['default'].scores)} images; ceiling {c_mean:.3f})")
        for k, run in runs.items():
            est = overall(suite, run)
            lo, hi = est.interval()
            rows[k] = {"overall": est.value, **summary(est), "train_seeds": train_seeds[k], "gap_recovered": (est.value - d_mean) / (c_mean - d_mean)}
            seeds = f"  ({train_seeds[k]} training seeds)" if train_seeds[k] else ""
            print(f"  {k:<17} {est.value:.3f} ± {est.stderr:.3f} [{lo:.3f}, {hi:.3f}]   gap recovered {rows[k]['gap_recovered']:.1%}{seeds}")
        for a, b in PAIRS:
            if a in runs and b in runs:
                est = paired_estimates(suite, runs[a], runs[b])[("overall", suite.primary_metric)]
                lo, hi = est.interval()
                resolved = lo > 0 or hi < 0
                rows[f"{a} - {b}"] = {"diff": est.value, **summary(est), "p": est.p, "resolved": resolved}
                print(f"  {a} − {b}: {est.value:+.3f} ± {est.stderr:.3f} [{lo:+.3f}, {hi:+.3f}] df {est.df:.1f} p {est.p:.3f}"
                      + ("  (resolved)" if resolved else ""))
        report[n] = {"ceiling": c_mean, **rows}
    print("± is one standard error, clustered by prompt, two-level for learned rows; [lo, hi]: 95 % Student-t interval\n"
          "at the SE's Satterthwaite df; resolved: the interval excludes 0.\n")
    write_result(report, write=args.write, out=args.out, committed=COMMITTED, root=ROOT, indent=2)


if __name__ == "__main__":
    main()
