#!/usr/bin/env python
"""Sample efficiency: each baseline's training-reward AUC and held-out final reward, paired over seeds.

Every baseline trains the same policy from the same initialisation on the same contexts and draws, so
runs of one training seed are paired. Reported per (K, baseline), at K = 2 (the method's own setting)
beside K = 4: the AUC of the training reward (mean reward over the updates) and the held-out score of
the final policy, and per baseline the paired difference to RLOO over the seeds with its SE and 95%
Student-t interval (S - 1 df). Collapsed runs (final reward below half the starting one) are flagged and left out. The
logic is jsbench.analysis.sample_efficiency; settings follow scripts/train_policies.sh (geneval, lr 0.01).

    python scripts/bench_sample_efficiency.py --seeds 0 1 2 3 4 5 6 7          # the measurement (>= 8 seeds)
    python scripts/bench_sample_efficiency.py --iters 60 --seeds 0 1 --K 2     # quick
    python scripts/bench_sample_efficiency.py --backbone detail --write         # -> sample_efficiency-detail.json|.png

Finished runs are cached under runs/bench-sample-efficiency/ (keyed by their settings); --fresh ignores it.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "sample_efficiency.json"
sys.path.insert(0, str(ROOT))

from jsbench.io import add_result_options, result_target, write_result  # noqa: E402
from jsbench.analysis.sample_efficiency import summarise, train_and_score  # noqa: E402
from jsbench.train.reinforce import TrainConfig  # noqa: E402

BASELINES = ["none", "rloo", "xctx", "js"]
COLOURS = {"none": "#999999", "rloo": "#1f77b4", "xctx": "#2ca02c", "js": "#d62728"}
CACHE = ROOT / "runs" / "bench-sample-efficiency"


def _pm(d: dict | None, digits: int = 3) -> str:
    return "-" if not d or d["mean"] != d["mean"] else f"{d['mean']:.{digits}f} ± {d['se']:.{digits}f}" if d["se"] == d["se"] else f"{d['mean']:.{digits}f}"


def _ci(p: dict) -> str:
    return f"{p['mean']:+.3f} ± {p['se']:.3f}, 95% CI [{p['ci95'][0]:+.3f}, {p['ci95'][1]:+.3f}] over {len(p['seeds'])} seeds: {p['verdict']}"


def plot(summaries: list[dict], path: Path, backbone: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(summaries), figsize=(5.2 * len(summaries), 3.8), squeeze=False)
    for ax, s in zip(axes[0], summaries):
        for b, per in s["baselines"].items():
            if not per["curve"]:
                continue
            x = list(range(1, len(per["curve"]) + 1))
            ax.plot(x, per["curve"], color=COLOURS[b], lw=1.6 if b == "js" else 1.1, label=f"{b} (AUC {per['auc']['mean']:.3f})")
            lo, hi = [min(v) for v in zip(*per["per_seed_curves"])], [max(v) for v in zip(*per["per_seed_curves"])]
            ax.fill_between(x, lo, hi, color=COLOURS[b], alpha=0.08, lw=0)
        ax.set_title(f"K = {s['K']}, B = {s['B']}, {s['steps']} steps", fontsize=9)
        ax.set_xlabel("policy update")
        ax.set_ylabel("training reward (mean over seeds)")
        ax.grid(alpha=0.3, lw=0.4)
        ax.legend(fontsize=7, loc="lower right")
    seeds = len(next(iter(summaries[0]["baselines"].values()))["seeds"])
    fig.suptitle(f"Sample efficiency on the {backbone} world (GenEval reward; band: seed min-max; up to {seeds} seeds)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--K", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--seeds", type=int, nargs="+", default=list(range(8)), help="training seeds (the paired comparison wants >= 8)")
    ap.add_argument("--contexts", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--policy", default="instance")
    ap.add_argument("--backbone", default="analytic", help="an embedded-world backbone: analytic, or detail (the positive control)")
    ap.add_argument("--baselines", nargs="+", default=BASELINES, choices=BASELINES, help="baselines to train (rloo is the reference)")
    ap.add_argument("--window", type=int, default=20, help="updates at the start and end compared to flag a collapsed run")
    ap.add_argument("--eval-seeds", type=int, default=4, help="images per held-out prompt for the final policies (0: skip)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--fresh", action="store_true", help="ignore cached finished runs")
    add_result_options(ap, f"{COMMITTED.relative_to(ROOT)} (sample_efficiency-<backbone>.json for another backbone)", also=" and the .png")
    args = ap.parse_args(argv)
    if "rloo" not in args.baselines or len(args.baselines) < 2:
        ap.error("--baselines must include rloo (the reference) and another baseline")
    baselines = [b for b in BASELINES if b in args.baselines]
    committed = COMMITTED if args.backbone == "analytic" else COMMITTED.with_name(f"sample_efficiency-{args.backbone}.json")
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    runs: dict = {}
    total, done = len(args.K) * len(baselines) * len(args.seeds), 0
    for K in args.K:
        for seed in args.seeds:
            for b in baselines:
                cfg = TrainConfig(backbone=args.backbone, steps=args.steps, baseline=b, reward="geneval", suite="geneval", policy=args.policy,
                                  iters=args.iters, contexts=args.contexts, samples=K, lr=args.lr, seed=seed, checkpoint_every=10**9)
                r = train_and_score(cfg, args.eval_seeds, CACHE, args.fresh)
                runs.setdefault((K, b), []).append(r)
                done += 1
                print(f"  [{done}/{total}] K={K} seed={seed} {b:<5} mean reward {sum(r['rewards']) / len(r['rewards']):.3f}", flush=True)
    summaries = [summarise(runs, K, args.window, baselines) for K in args.K]
    print(f"\nsample efficiency, {args.backbone} world, {args.steps} steps, B={args.contexts}, {args.iters} updates, seeds {args.seeds}, lr {args.lr}")
    print(f"{'K':>3}{'baseline':>10}{'AUC ± SE':>18}{'held-out ± SE':>18}  collapsed seeds")
    for s in summaries:
        for b, per in s["baselines"].items():
            print(f"{s['K']:>3}{b:>10}{_pm(per['auc']):>18}{_pm(per['held_out']):>18}  {per['collapsed_seeds'] or '-'}")
        for b, p in s["paired_vs_reference"].items():
            print(f"    K={s['K']} {b} − rloo  AUC {_ci(p['auc'])}")
            if "held_out" in p:
                print(f"    K={s['K']} {b} − rloo  held-out {_ci(p['held_out'])}")
    print("± is the SE over training seeds; differences are paired by seed; collapsed runs are left out.\n")
    out = result_target(write=args.write, out=args.out, committed=committed, root=ROOT, companions=" and its .png")
    if out is None:
        return 0
    png = out.with_suffix(".png")
    plot(summaries, png, args.backbone)
    record = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "python": platform.python_version(), "torch": torch.__version__,
        "threads": args.threads, "command": "python scripts/bench_sample_efficiency.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "seconds_this_invocation": time.perf_counter() - start,
        "training_seconds_of_all_runs": sum(r["seconds_per_update"] * len(r["rewards"]) for v in runs.values() for r in v),
        "summaries": summaries,
    }
    write_result(record, write=False, out=out, committed=committed, root=ROOT, newline=False, also=[png])
    return 0


if __name__ == "__main__":
    sys.exit(main())
