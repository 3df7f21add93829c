#!/usr/bin/env python
"""Paired comparisons of the shipped detail-world policies (issue 14's positive control) at 3 steps.

    OMP_NUM_THREADS=1 python scripts/eval_detail.py [--seeds 16] [--write | --out PATH]

Evaluates default, the learned global, js (prompt + noise), js (prompt-only) and rloo policies in
policies/detail/ and the ceiling on the held-out prompts with the evaluation seeds `jsbench compare`
uses (the same images it scores), then prints GenEval overall (mean of task means) per method and paired
differences (same prompts, same seeds) with standard errors:
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
from jsbench.evaluate import evaluate, resolve_schedule
from jsbench.io import add_result_options, write_result
from jsbench.stats import cluster_mean, weighted_overall
from jsbench.suites import load_suite
from jsbench.world.detail import OPEN_PHRASES

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "detail_policies.json"
METHODS = {"global": "global-n3", "js": "js-n3", "js-prompt": "js-prompt-n3", "rloo": "rloo-n3"}
PAIRS = [("js", "global"), ("js", "js-prompt"), ("js", "rloo"), ("js-prompt", "global"), ("global", "default"), ("js", "default")]


def overall(rows: list[tuple[str, str, float]]) -> tuple[float, float]:
    """GenEval overall (mean of task means) of (task, prompt, value) rows and its standard error from the
    per-task prompt-clustered standard errors (jsbench.stats)."""
    by_task: dict[str, list[tuple[str, float]]] = {}
    for task, prompt, v in rows:
        by_task.setdefault(task, []).append((prompt, v))
    est = weighted_overall([cluster_mean([v for _, v in pv], [p for p, _ in pv]) for pv in by_task.values()])
    return est.value, est.stderr


def clustered(rows: list[tuple[str, float]]) -> tuple[float, float]:
    """Mean of (prompt, value) rows with its prompt-clustered standard error."""
    est = cluster_mean([v for _, v in rows], [p for p, _ in rows])
    return est.value, est.stderr


def _in_se(mean_se) -> str:
    """A difference in standard errors; a zero standard error (one seed, or identical images) has none."""
    mean, se = mean_se
    return f"{mean / se:+.1f} se" if se > 0 else "no spread"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=16)
    ap.add_argument("--policies", type=Path, default=ROOT / "policies" / "detail")
    add_result_options(ap, str(COMMITTED.relative_to(ROOT)))
    args = ap.parse_args(argv)
    bb = load_backbone("detail")
    suite = load_suite("geneval", bb)
    specs = {"default": "default", **{k: f"policy:{args.policies / v}" for k, v in METHODS.items()}, "ceiling": "ceiling"}
    scores: dict[str, list[tuple[str, bool, float, str]]] = {}
    for name, spec in specs.items():
        run = evaluate(bb, suite, resolve_schedule(spec, bb, 3), seeds_per_prompt=args.seeds, progress=False)
        scores[name] = [(it.task, it.metadata["texture"] in OPEN_PHRASES, sc["correct"], it.prompt) for (it, _), sc in zip(run.rows(), run.scores)]
        print(f"  {name} done", flush=True)
    n_open = sum(o for _, o, _, _ in scores["default"]) // args.seeds
    n_prompts = len(scores["default"]) // args.seeds
    result = {"command": "python scripts/eval_detail.py " + " ".join(argv if argv is not None else sys.argv[1:]),
              "seeds": args.seeds, "prompts": n_prompts, "open_prompts": n_open, "methods": {}, "paired": {}}
    print(f"\ndetail world, 3 steps: {n_prompts} held-out prompts x {args.seeds} seeds ({n_open} prompts whose texture the noise decides)")
    print(f"{'method':<12}{'overall':>18}{'open prompts':>18}{'named texture':>18}")
    for name, rows in scores.items():
        o = overall([(t, p, v) for t, _, v, p in rows])
        op = clustered([(p, v) for _, is_open, v, p in rows if is_open])
        cl = clustered([(p, v) for _, is_open, v, p in rows if not is_open])
        result["methods"][name] = {"overall": o, "open": op, "named": cl}
        print(f"{name:<12}{o[0]:>10.3f} ± {o[1]:.3f}{op[0]:>10.3f} ± {op[1]:.3f}{cl[0]:>10.3f} ± {cl[1]:.3f}")
    print("± is one standard error, clustered by prompt. paired differences (same prompts and images):")
    for a, b in PAIRS:
        diff = [(t, x - y, is_open, p) for (t, is_open, x, p), (_, _, y, _) in zip(scores[a], scores[b])]
        o = overall([(t, p, d) for t, d, _, p in diff])
        op = clustered([(p, d) for _, d, is_open, p in diff if is_open])
        cl = clustered([(p, d) for _, d, is_open, p in diff if not is_open])
        result["paired"][f"{a} - {b}"] = {"overall": o, "open": op, "named": cl}
        print(f"  {a + ' - ' + b:<22}overall {o[0]:+.3f} ± {o[1]:.3f} ({_in_se(o)})   open {op[0]:+.3f} ± {op[1]:.3f} "
              f"({_in_se(op)})   named {cl[0]:+.3f} ± {cl[1]:.3f}")
    write_result(result, write=args.write, out=args.out, committed=COMMITTED, root=ROOT, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
