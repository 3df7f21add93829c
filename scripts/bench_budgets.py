#!/usr/bin/env python
"""Step-budget sweep on the analytic world: default vs learned global vs learned js (instance) schedules
at 3, 5, 10 and 20 steps, against the many-step ceiling (200 default steps).

For each budget N: the default schedule, a learned global schedule (GlobalSchedulePolicy, js baseline)
and a learned instance-level policy (js baseline) are evaluated on the held-out GenEval prompts with
the same seeds; the ceiling once. Reported: GenEval overall ± stderr, the paired difference to the
default, and the gap recovered, (method - default) / (ceiling - default).

Policies: every budget's are trained here alike (B=16, K=4, lr 0.01, seed 0, the same --iters at every
budget, so the budgets compare like for like; the shipped rows of policies/ train 3 and 5 steps for other
counts) and cached under runs/bench-budgets/ (--retrain to redo); the JSON records each one's settings.

    python scripts/bench_budgets.py                   # prints the table; --write: bench/results/budgets.json|.png
    python scripts/bench_budgets.py --steps 3 5 --iters 100 --seeds 4    # quick
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "budgets.json"
sys.path.insert(0, str(ROOT))

from jsbench.io import add_result_options, result_target, write_result
from jsbench.backbones import load_backbone  # noqa: E402
from jsbench.evaluation.evaluate import CEILING_STEPS, evaluate, resolve_schedule  # noqa: E402
from jsbench.evaluation.results import make_records  # noqa: E402
from jsbench.stats import satterthwaite_df, t_interval, t_quantile  # noqa: E402
from jsbench.suites import load_suite  # noqa: E402

CACHE = ROOT / "runs" / "bench-budgets"
METHODS = {"global": ("global", "js"), "js": ("instance", "js")}  # name -> (policy kind, baseline)


def policy_for(name: str, steps: int, args) -> tuple[Path, str]:
    """(folder, where it came from): trained here, or cached from an earlier run of the same settings."""
    kind, baseline = METHODS[name]
    from jsbench.distributed import DistContext
    from jsbench.train.reinforce import TrainConfig, Trainer

    cfg = TrainConfig(backbone="analytic", steps=steps, baseline=baseline, reward="geneval", suite="geneval", policy=kind,
                      iters=args.iters, contexts=16, samples=4, lr=0.01, seed=0, checkpoint_every=10**9)
    out = CACHE / f"{name}-n{steps}"
    manifest = out / "manifest.json"
    if manifest.is_file() and not args.retrain and json.loads(manifest.read_text()).get("train") == asdict(cfg):
        return out, "trained here (cached)"
    if out.exists():
        for p in out.iterdir():
            p.unlink()
    t = time.perf_counter()
    trainer = Trainer(cfg, out, dist=DistContext())
    trainer.train(progress=False)
    trainer.save_policy()
    (out / "checkpoint.pt").unlink(missing_ok=True)
    print(f"    trained {name}-n{steps}: {args.iters} updates in {time.perf_counter() - t:.0f}s", flush=True)
    return out, "trained here"


def overall(records, metric):
    return next(r for r in records if r.task == "overall" and r.metric == metric)


def plot(rows: list[dict], ceiling: float, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    steps = [r["steps"] for r in rows]
    colours = {"default": "#999999", "global": "#1f77b4", "js": "#d62728"}
    for m in ("default", "global", "js"):
        y = [r[m]["value"] for r in rows]
        e = [t_quantile(0.975, r[m]["df"]) * r[m]["stderr"] for r in rows]  # the 95 % t interval's half-width
        axes[0].errorbar(steps, y, yerr=e, marker="o", ms=4, capsize=2, color=colours[m], label=m)
    axes[0].axhline(ceiling, color="k", ls="--", lw=0.9, label=f"ceiling ({CEILING_STEPS} steps)")
    axes[0].set_xscale("log")
    axes[0].set_xticks(steps, [str(s) for s in steps])
    axes[0].set_xlabel("steps")
    axes[0].set_ylabel("GenEval overall (held-out)")
    axes[0].legend(fontsize=8)
    for m in ("global", "js"):
        pts = [r for r in rows if r["gap_resolvable"]]
        y = [100 * r[m]["gap_recovered"] for r in pts]
        e = [100 * t_quantile(0.975, r[m]["delta_df"]) * r[m]["gap_recovered_stderr"] for r in pts]
        axes[1].errorbar([r["steps"] for r in pts], y, yerr=e, marker="o", ms=4, capsize=2, color=colours[m], label=m)
    axes[1].axhline(0, color="#999999", lw=0.8)
    axes[1].axhline(100, color="k", ls="--", lw=0.8)
    axes[1].set_xscale("log")
    axes[1].set_xticks(steps, [str(s) for s in steps])
    axes[1].set_xlabel("steps")
    axes[1].set_ylabel("gap to ceiling recovered (%)\n(budgets where the default trails it)")
    axes[1].legend(fontsize=8)
    from matplotlib.ticker import NullFormatter

    for ax in axes:
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.grid(alpha=0.3, lw=0.4)
    fig.suptitle("Step budgets on the analytic world: learned schedules vs default and the many-step ceiling", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, nargs="+", default=[3, 5, 10, 20])
    ap.add_argument("--seeds", type=int, default=16, help="seeds per held-out prompt")
    ap.add_argument("--iters", type=int, default=300, help="updates for policies trained here")
    ap.add_argument("--retrain", action="store_true", help="ignore policies cached under runs/bench-budgets/")
    ap.add_argument("--threads", type=int, default=1)
    add_result_options(ap, str(COMMITTED.relative_to(ROOT)), also=" and the .png")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()

    bb = load_backbone("analytic")
    suite = load_suite("geneval", bb)
    metric = suite.primary_metric

    def run(spec, steps):
        src = resolve_schedule(spec, bb, steps)
        t = time.perf_counter()
        r = evaluate(bb, suite, src, args.seeds, progress=False)
        return src, r, time.perf_counter() - t

    src, ceil_run, ceil_s = run("ceiling", 1)
    ceiling = overall(make_records(bb, suite, src, ceil_run), metric)
    print(f"  ceiling ({CEILING_STEPS} steps): {ceiling.value:.3f} ± {ceiling.stderr:.3f} ({ceil_s:.0f}s)", flush=True)

    rows = []
    for n in args.steps:
        src_d, default_run, _ = run("default", n)
        d = overall(make_records(bb, suite, src_d, default_run), metric)
        gap = ceiling.value - d.value
        gap_se = (d.stderr ** 2 + ceiling.stderr ** 2) ** 0.5
        gap_df = satterthwaite_df([(d.stderr ** 2, d.df), (ceiling.stderr ** 2, ceiling.df)])
        resolvable = t_interval(gap, gap_se, gap_df)[0] > 0  # else the default is at the ceiling within noise: nothing to recover
        row = {"steps": n, "default": {"value": d.value, "stderr": d.stderr, "df": d.df}, "gap": gap, "gap_stderr": gap_se, "gap_df": gap_df,
               "gap_resolvable": resolvable}
        for name in METHODS:
            folder, origin = policy_for(name, n, args)
            src, r, secs = run(f"policy:{folder}", n)
            rec = overall(make_records(bb, suite, src, r, reference=default_run), metric)
            manifest = json.loads((folder / "manifest.json").read_text())
            row[name] = {
                "value": rec.value, "stderr": rec.stderr, "df": rec.df, "delta": rec.delta_vs_default, "delta_stderr": rec.delta_stderr,
                "delta_df": rec.delta_df,
                "gap_recovered": rec.delta_vs_default / gap if resolvable else None,
                "gap_recovered_stderr": rec.delta_stderr / gap if resolvable else None,
                "policy": str(folder.relative_to(ROOT) if folder.is_relative_to(ROOT) else folder), "origin": origin, "checksum": manifest.get("checksum"),
                "train": manifest.get("train"),
            }
        rows.append(row)
        print(f"  {n:>3} steps: default {d.value:.3f}  global {row['global']['value']:.3f}  js {row['js']['value']:.3f}", flush=True)

    print(f"\nstep budgets, analytic world, GenEval overall on {len(suite.items('test'))} held-out prompts x {args.seeds} seeds "
          f"(ceiling {ceiling.value:.3f} ± {ceiling.stderr:.3f} at {CEILING_STEPS} steps)")
    head = f"{'steps':>5}{'default':>15}{'global':>15}{'js':>15}{'gap':>7}{'global recovers':>17}{'js recovers':>14}{'js - global':>18}"
    print(head)
    print("-" * len(head))
    for r in rows:
        f = lambda m: f"{r[m]['value']:.3f} ± {r[m]['stderr']:.3f}"
        g = lambda m: f"{100 * r[m]['gap_recovered']:.0f} ± {100 * r[m]['gap_recovered_stderr']:.0f}%" if r["gap_resolvable"] else "no gap"
        diff = r["js"]["delta"] - r["global"]["delta"]
        print(f"{r['steps']:>5}{f('default'):>15}{f('global'):>15}{f('js'):>15}{r['gap']:>7.3f}{g('global'):>17}{g('js'):>14}{diff:>+18.3f}")
    origins = {f"{m}-n{r['steps']}": r[m]["origin"] for r in rows for m in METHODS}
    print("  policies: " + ", ".join(f"{k} {v}" for k, v in origins.items()))
    print("  gap = ceiling - default; 'no gap': its 95 % t interval reaches 0 (the default is at the ceiling within noise)")

    print()
    out = result_target(write=args.write, out=args.out, committed=COMMITTED, root=ROOT, companions=" and its .png")
    if out is None:
        return 0
    png = out.with_suffix(".png")
    plot(rows, ceiling.value, png)
    record = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "python": platform.python_version(), "torch": torch.__version__,
        "threads": args.threads, "command": "python scripts/bench_budgets.py " + " ".join(argv or sys.argv[1:]),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "metric": metric, "prompts": len(suite.items("test")),
        "ceiling": {"steps": CEILING_STEPS, "value": ceiling.value, "stderr": ceiling.stderr},
        "rows": rows, "seconds": time.perf_counter() - start,
    }
    write_result(record, write=False, out=out, committed=COMMITTED, root=ROOT, newline=False, also=[png])
    return 0


if __name__ == "__main__":
    sys.exit(main())
