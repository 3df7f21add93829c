#!/usr/bin/env python
"""Paired comparisons of the shipped detail-world policies (issue 14's positive control) at 3 steps.

    OMP_NUM_THREADS=1 python scripts/eval_detail.py [--seeds 16] [--write | --out PATH]

Evaluates default, the learned global, js (prompt + noise), js (prompt-only) and rloo rows in
policies/detail/ (each the mean of its training seeds, <row>/seed<S>/, as `jsbench compare` evaluates it)
and the ceiling on the held-out prompts with the images `jsbench compare` scores, then prints GenEval
overall (mean of task means) per method and paired differences (same prompts and images, seed s against
seed s) with their two-level SEs and 95 % Student-t intervals:
- on every held-out prompt (GenEval overall), and
- on the prompts whose texture the noise decides ("with stripes", "with mixed stripes": where the world
  puts per-noise headroom) and on the prompts that name their texture (share of images correct).
Writes JSON only when told: --write replaces bench/results/detail_policies.json, --out PATH writes elsewhere.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from jsbench.backbones import load_backbone
from jsbench.report.compare import evaluate_learned_row, shipped_policies
from jsbench.evaluation.evaluate import EvalRun, evaluate, mean_over_seeds, resolve_schedule
from jsbench.io import add_result_options, write_result
from jsbench.stats import Estimate, cluster_mean, two_level_estimate, weighted_overall
from jsbench.suites import load_suite
from jsbench.world.detail import OPEN_PHRASES

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "detail_policies.json"
METHODS = {"global": "global-n3", "js": "js-n3", "js-prompt": "js-prompt-n3", "rloo": "rloo-n3"}
PAIRS = [("js", "global"), ("js", "js-prompt"), ("js", "rloo"), ("js-prompt", "global"), ("global", "default"), ("js", "default")]


def _estimate(run, keep, by_task: bool, metric: str = "correct") -> Estimate:
    """The mean of `metric` over the images of `run` whose item `keep` accepts, with its prompt-clustered SE:
    GenEval overall (mean of task means) when `by_task`, else the plain mean. A learned row of several
    training seeds: the mean over seeds with the two-level SE and its Satterthwaite df (jsbench.stats)."""
    rows = run.rows()
    idx = [i for i, (it, _) in enumerate(rows) if keep(it)]

    def one(scores) -> Estimate:
        values = [scores[i][metric] for i in idx]
        prompts = [rows[i][0].prompt for i in idx]
        if not by_task:
            return cluster_mean(values, prompts)
        by: dict[str, tuple[list, list]] = {}
        for i, v, p in zip(idx, values, prompts):
            by.setdefault(rows[i][0].task, ([], []))
            by[rows[i][0].task][0].append(v)
            by[rows[i][0].task][1].append(p)
        return weighted_overall([cluster_mean(v, p) for v, p in by.values()])

    image = one(run.scores)
    if run.train_seeds == 1:
        return image
    return two_level_estimate([one(s).value for s in run.seed_scores], image)


def _difference(a, b) -> EvalRun:
    """Per image a − b, each training seed against the same seed (a row of one seed against every seed)."""
    diff = lambda x, y: [{"correct": p["correct"] - q["correct"]} for p, q in zip(x, y)]  # noqa: E731
    sa, sb = a.per_seed(), b.per_seed()
    if len(sa) == len(sb):
        seeds = [diff(x, y) for x, y in zip(sa, sb)]
    else:
        seeds = [diff(x, b.scores) for x in sa] if len(sb) == 1 else [diff(a.scores, y) for y in sb]
    run = mean_over_seeds([EvalRun(items=a.items, seeds=a.seeds, scores=s) for s in seeds]) if len(seeds) > 1 else EvalRun(a.items, a.seeds, seeds[0])
    return run


def _cell(e: Estimate, signed: bool = False) -> str:
    lo, hi = e.interval()
    v = f"{e.value:+.3f}" if signed else f"{e.value:.3f}"
    return f"{v} ± {e.stderr:.3f} [{lo:+.3f}, {hi:+.3f}]"


def _record(e: Estimate) -> dict:
    lo, hi = e.interval()
    return {"value": e.value, "stderr": e.stderr, "df": e.df, "ci_low": lo, "ci_high": hi}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--policies", type=Path, default=ROOT / "policies" / "detail")
    add_result_options(ap, str(COMMITTED.relative_to(ROOT)))
    args = ap.parse_args(argv)
    bb = load_backbone("detail")
    suite = load_suite("geneval", bb)
    runs = {"default": evaluate(bb, suite, resolve_schedule("default", bb, 3), seeds_per_prompt=args.seeds, progress=False)}
    for name, folder in METHODS.items():
        [seeds] = [r for r in shipped_policies(args.policies.parent, "detail", 3) if r[0].parent.name == folder] or [[]]
        if not seeds:
            raise SystemExit(f"error: {args.policies / folder} holds no trained policy")
        runs[name] = evaluate_learned_row(bb, suite, seeds, 3, seeds=args.seeds, seed_base=0)[1]
        print(f"  {name} done ({len(seeds)} training seeds)", flush=True)
    runs["ceiling"] = evaluate(bb, suite, resolve_schedule("ceiling", bb, 3), seeds_per_prompt=args.seeds, progress=False)
    is_open = lambda it: it.metadata["texture"] in OPEN_PHRASES  # noqa: E731
    subsets = {"overall": (lambda it: True, True), "open": (is_open, False), "named": (lambda it: not is_open(it), False)}
    n_prompts = len(runs["default"].items)
    n_open = sum(is_open(it) for it in runs["default"].items)
    result = {"command": "python scripts/eval_detail.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "seeds": args.seeds, "prompts": n_prompts, "open_prompts": n_open,
              "train_seeds": {k: r.train_seeds for k, r in runs.items()}, "methods": {}, "paired": {}}
    print(f"\ndetail world, 3 steps: {n_prompts} held-out prompts x {args.seeds} images ({n_open} prompts whose texture the noise decides)")
    for name, run in runs.items():
        ests = {k: _estimate(run, keep, by_task) for k, (keep, by_task) in subsets.items()}
        result["methods"][name] = {k: _record(e) for k, e in ests.items()}
        print(f"{name:<11} overall {_cell(ests['overall'])}  open {_cell(ests['open'])}  named {_cell(ests['named'])}")
    print("± one SE clustered by prompt (learned rows: two-level, counting the training seeds); [lo, hi] 95 % t")
    for a, b in PAIRS:
        d = _difference(runs[a], runs[b])
        ests = {k: _estimate(d, keep, by_task) for k, (keep, by_task) in subsets.items()}
        result["paired"][f"{a} - {b}"] = {k: _record(e) for k, e in ests.items()}
        print(f"  {a + ' - ' + b:<20} overall {_cell(ests['overall'], True)}  open {_cell(ests['open'], True)}  named {_cell(ests['named'], True)}")
    write_result(result, write=args.write, out=args.out, committed=COMMITTED, root=ROOT, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
