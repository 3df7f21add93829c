#!/usr/bin/env python
"""Sample efficiency: reward vs policy updates for each baseline on an embedded world (analytic by default).

Every baseline trains the same instance policy from the same initialisation on the same contexts (a
run's contexts and draws come from (seed, update) only), so curves differ only through the baseline.
Settings follow scripts/train_policies.sh (geneval reward and prompts, B = 16, lr 0.01) at 3 steps,
for K = 2 and K = 4, 3 seeds each. Reported per (K, baseline):
- the training reward curve (mean over the B*K sampled schedules of each update), averaged over seeds
  and smoothed with a centred window (no lag);
- RLOO's final reward (seed mean of its last `window` updates) as the target, and the first update
  at which each baseline's smoothed curve reaches it; the claim under test is that js needs at most
  50% of the updates RLOO needs (`js / rloo` below). When the curves plateau, when a curve first
  touches the plateau is mostly noise, so the table also gives the updates needed to cover 90% of
  RLOO's gain over the common starting reward, which measures the rising phase;
- the held-out GenEval score of each final policy (its deterministic mean schedule on the test prompts).

    python scripts/bench_sample_efficiency.py                 # prints the table; --write: bench/results/sample_efficiency.json|.png
    python scripts/bench_sample_efficiency.py --iters 60 --seeds 0 --K 2    # quick
    python scripts/bench_sample_efficiency.py --backbone detail --K 4 --baselines rloo js --write   # -> sample_efficiency-detail.json

Finished runs are cached under runs/bench-sample-efficiency/ (keyed by their settings), so an
interrupted benchmark resumes where it stopped; --fresh ignores the cache.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "sample_efficiency.json"
sys.path.insert(0, str(ROOT))

from jsbench.io import add_result_options, result_target, write_result, write_text_atomic
from jsbench.train import TrainConfig, Trainer  # noqa: E402

BASELINES = ["none", "rloo", "xctx", "js"]
COLOURS = {"none": "#999999", "rloo": "#1f77b4", "xctx": "#2ca02c", "js": "#d62728"}
CACHE = ROOT / "runs" / "bench-sample-efficiency"


def run_one(cfg: TrainConfig, eval_seeds: int, fresh: bool) -> dict:
    key = hashlib.sha256(json.dumps(cfg.__dict__, sort_keys=True).encode() + f"|{eval_seeds}".encode()).hexdigest()[:16]
    path = CACHE / f"{cfg.baseline}-K{cfg.samples}-s{cfg.seed}-{key}.json"
    if path.exists() and not fresh:
        return json.loads(path.read_text())
    from jsbench.distributed import DistContext
    from jsbench.evaluate import evaluate, policy_source
    from jsbench.suites import load_suite

    trainer = Trainer(cfg, CACHE / "scratch", dist=DistContext())
    rewards, seconds = [], []
    for it in range(cfg.iters):
        t = time.perf_counter()
        rec = trainer.step(it)
        seconds.append(time.perf_counter() - t)
        rewards.append(rec["reward"])
    held_out = None
    if eval_seeds > 0:
        suite = load_suite(cfg.suite, trainer.backbone)
        # the trained policy's deterministic mean schedule, without writing it to disk
        run = evaluate(trainer.backbone, suite, policy_source(trainer.policy, label=cfg.baseline), eval_seeds, progress=False)
        metrics = {m.task: (m.value, m.stderr) for m in suite.aggregate(run.scores, [it for it, _ in run.rows()]) if m.metric == suite.primary_metric}
        held_out = {"value": metrics["overall"][0], "stderr": metrics["overall"][1], "images": len(run.scores)}
    out = {"config": cfg.__dict__, "rewards": rewards, "seconds_per_update": sum(seconds) / len(seconds), "held_out": held_out}
    write_text_atomic(path, json.dumps(out))
    return out


def smoothed(values: list[float], window: int) -> list[float]:
    """Centred moving average (truncated at the ends): no lag, so reach times are not shifted by the window."""
    half = window // 2
    out = []
    for i in range(len(values)):
        part = values[max(0, i - half) : i + half + 1]
        out.append(sum(part) / len(part))
    return out


def first_reach(curve: list[float], target: float) -> int | None:
    """1-based number of updates after which the curve first reaches target (None: never)."""
    for i, v in enumerate(curve):
        if v >= target - 1e-12:
            return i + 1
    return None


def summarise(runs: dict, K: int, window: int, gain_frac: float = 0.9, baselines: list[str] = BASELINES) -> dict:
    curves = {}
    for b in baselines:
        seeds = [r["rewards"] for r in runs[(K, b)]]
        mean = [sum(v) / len(v) for v in zip(*seeds)]
        curves[b] = {"mean": mean, "smoothed": smoothed(mean, window), "per_seed_smoothed": [smoothed(s, window) for s in seeds]}
    T = len(curves["rloo"]["mean"])
    target = sum(curves["rloo"]["mean"][-window:]) / window
    reach = {b: first_reach(curves[b]["smoothed"], target) for b in baselines}
    # a steadier view of speed: updates to cover `gain_frac` of RLOO's improvement over the common start
    start = curves["rloo"]["smoothed"][0]
    gain_target = start + gain_frac * (target - start)
    reach_gain = {b: first_reach(curves[b]["smoothed"], gain_target) for b in baselines}
    finals = {b: sum(curves[b]["mean"][-window:]) / window for b in baselines}
    # per seed: the seed's own rloo final as target, so the spread of the ratio is visible
    per_seed = []
    for s in range(len(runs[(K, "rloo")])):
        rl = runs[(K, "rloo")][s]["rewards"]
        tgt = sum(rl[-window:]) / window
        u_r = first_reach(smoothed(rl, window), tgt)
        u_j = first_reach(smoothed(runs[(K, "js")][s]["rewards"], window), tgt)
        rl_s = smoothed(rl, window)
        g_t = rl_s[0] + gain_frac * (tgt - rl_s[0])
        g_r, g_j = first_reach(rl_s, g_t), first_reach(smoothed(runs[(K, "js")][s]["rewards"], window), g_t)
        per_seed.append({"seed": runs[(K, "rloo")][s]["config"]["seed"], "target": tgt, "rloo": u_r, "js": u_j,
                         "js_over_rloo": (u_j / u_r) if (u_j and u_r) else None,
                         "gain_rloo": g_r, "gain_js": g_j, "gain_js_over_rloo": (g_j / g_r) if (g_j and g_r) else None})
    held = {}
    for b in baselines:
        vals = [r["held_out"]["value"] for r in runs[(K, b)] if r.get("held_out")]
        if vals:
            # not splits.mean_stderr: that takes sqrt(var / n), this sd / sqrt(n), which differs in the last bit
            # for about a third of inputs and would change the committed seed_stderr values
            m = sum(vals) / len(vals)
            sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else float("nan")
            held[b] = {"mean": m, "seed_stderr": sd / math.sqrt(len(vals)), "per_seed": vals}
    u_js, u_rloo = reach["js"], reach["rloo"]
    return {
        "K": K, "baselines": list(baselines), "updates": T, "window": window, "rloo_final": target, "final": finals, "updates_to_rloo_final": reach,
        "js_over_rloo": (u_js / u_rloo) if (u_js and u_rloo) else None,
        "js_over_total": (u_js / T) if u_js else None,
        "gain_fraction": gain_frac, "gain_target": gain_target, "updates_to_gain": reach_gain,
        "gain_js_over_rloo": (reach_gain["js"] / reach_gain["rloo"]) if (reach_gain["js"] and reach_gain["rloo"]) else None,
        "per_seed": per_seed, "held_out": held, "curves": curves,
        "seconds_per_update": {b: sum(r["seconds_per_update"] for r in runs[(K, b)]) / len(runs[(K, b)]) for b in baselines},
    }


def plot(summaries: list[dict], path: Path, backbone: str = "analytic") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(summaries), figsize=(5.2 * len(summaries), 3.8), squeeze=False)
    for ax, s in zip(axes[0], summaries):
        x = list(range(1, s["updates"] + 1))
        for b in s["baselines"]:
            c = s["curves"][b]
            ax.plot(x, c["smoothed"], color=COLOURS[b], lw=1.8 if b == "js" else 1.2, label=b)
            lo = [min(v) for v in zip(*c["per_seed_smoothed"])]
            hi = [max(v) for v in zip(*c["per_seed_smoothed"])]
            ax.fill_between(x, lo, hi, color=COLOURS[b], alpha=0.08, lw=0)
        ax.axhline(s["rloo_final"], color=COLOURS["rloo"], ls="--", lw=0.8)
        for b in ("rloo", "js"):
            u = s["updates_to_rloo_final"][b]
            if u:
                ax.axvline(u, color=COLOURS[b], ls=":", lw=0.9)
        ratio = f"{s['js_over_rloo']:.2f}" if s["js_over_rloo"] else "not reached"
        ax.set_title(f"K={s['K']}: js updates to RLOO's final / RLOO's = {ratio}", fontsize=9)
        ax.set_xlabel("policy update")
        ax.set_ylabel(f"training reward (seed mean, centred {s['window']})")
        ax.grid(alpha=0.3, lw=0.4)
    axes[0][0].legend(fontsize=8, loc="lower right")
    fig.suptitle(f"Sample efficiency on the {backbone} world (GenEval reward, 3 steps, B=16; band: seed min-max)", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--K", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--contexts", type=int, default=16)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--policy", default="instance")
    ap.add_argument("--backbone", default="analytic", help="an embedded-world backbone: analytic, or detail (the positive control)")
    ap.add_argument("--baselines", nargs="+", default=BASELINES, choices=BASELINES, help="baselines to train (rloo and js are required)")
    ap.add_argument("--window", type=int, default=20, help="centred smoothing window, and the number of last updates whose mean is the 'final reward'")
    ap.add_argument("--eval-seeds", type=int, default=4, help="seeds per held-out prompt for the final policies (0: skip)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--fresh", action="store_true", help="ignore cached finished runs")
    add_result_options(ap, f"{COMMITTED.relative_to(ROOT)} (sample_efficiency-<backbone>.json for another backbone)", also=" and the .png")
    args = ap.parse_args(argv)
    if not {"rloo", "js"} <= set(args.baselines):
        ap.error("--baselines must include rloo and js (the comparison this benchmark makes)")
    baselines = [b for b in BASELINES if b in args.baselines]
    committed = COMMITTED if args.backbone == "analytic" else COMMITTED.with_name(f"sample_efficiency-{args.backbone}.json")
    torch.set_num_threads(args.threads)
    start = time.perf_counter()

    runs: dict = {}
    total = len(args.K) * len(baselines) * len(args.seeds)
    done = 0
    for K in args.K:
        for seed in args.seeds:
            for b in baselines:
                cfg = TrainConfig(backbone=args.backbone, steps=args.steps, baseline=b, reward="geneval", suite="geneval", policy=args.policy,
                                  iters=args.iters, contexts=args.contexts, samples=K, lr=args.lr, seed=seed, checkpoint_every=10**9)
                t = time.perf_counter()
                r = run_one(cfg, args.eval_seeds, args.fresh)
                runs.setdefault((K, b), []).append(r)
                done += 1
                print(f"  [{done}/{total}] K={K} seed={seed} {b:<5} final reward {sum(r['rewards'][-args.window:]) / args.window:.3f}"
                      f"  held-out {r['held_out']['value'] if r['held_out'] else float('nan'):.3f}  ({time.perf_counter() - t:.0f}s)", flush=True)

    summaries = [summarise(runs, K, args.window, baselines=baselines) for K in args.K]
    print(f"\nsample efficiency, {args.backbone} world, {args.steps} steps, B={args.contexts}, {args.iters} updates, seeds {args.seeds}, "
          f"lr {args.lr}, smoothing {args.window}")
    head = f"{'K':>3}{'baseline':>10}{'final':>8}{'held-out':>16}{'updates to RLOO final':>24}{'/ rloo':>8}{'to 90% of RLOO gain':>22}{'/ rloo':>8}"
    print(head)
    print("-" * len(head))
    for s in summaries:
        for b in baselines:
            u = s["updates_to_rloo_final"][b]
            ratio = f"{u / s['updates_to_rloo_final']['rloo']:.2f}" if (u and s["updates_to_rloo_final"]["rloo"]) else "-"
            h = s["held_out"].get(b)
            held = f"{h['mean']:.3f} ± {h['seed_stderr']:.3f}" if h else "-"
            g, gr = s["updates_to_gain"][b], s["updates_to_gain"]["rloo"]
            print(f"{s['K']:>3}{b:>10}{s['final'][b]:>8.3f}{held:>16}{(str(u) if u else 'not reached'):>24}{ratio:>8}"
                  f"{(str(g) if g else 'not reached'):>22}{(f'{g / gr:.2f}' if (g and gr) else '-'):>8}")
        per = ", ".join(f"seed {p['seed']}: {p['js_over_rloo']:.2f}" if p["js_over_rloo"] else f"seed {p['seed']}: not reached" for p in s["per_seed"])
        print(f"    K={s['K']}: RLOO final {s['rloo_final']:.3f}; js reaches it after "
              f"{s['updates_to_rloo_final']['js'] or 'never'} updates, RLOO after {s['updates_to_rloo_final']['rloo']}: "
              f"ratio {s['js_over_rloo'] if s['js_over_rloo'] is None else round(s['js_over_rloo'], 3)} (goal <= 0.50); per seed: {per}")
        per = ", ".join(f"seed {p['seed']}: {p['gain_js_over_rloo']:.2f}" if p["gain_js_over_rloo"] else f"seed {p['seed']}: not reached" for p in s["per_seed"])
        print(f"    K={s['K']}: 90% of RLOO's gain ({s['gain_target']:.3f}): js after {s['updates_to_gain']['js']}, RLOO after "
              f"{s['updates_to_gain']['rloo']} updates: ratio {s['gain_js_over_rloo'] if s['gain_js_over_rloo'] is None else round(s['gain_js_over_rloo'], 3)}; per seed: {per}")

    print()
    out = result_target(write=args.write, out=args.out, committed=committed, root=ROOT, companions=" and its .png")
    if out is None:
        return 0
    png = out.with_suffix(".png")
    plot(summaries, png, args.backbone)
    record = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "python": platform.python_version(), "torch": torch.__version__,
        "threads": args.threads, "command": "python scripts/bench_sample_efficiency.py " + " ".join(argv or sys.argv[1:]),
        "settings": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
        "seconds_this_invocation": time.perf_counter() - start,
        "training_seconds_of_all_runs": sum(r["seconds_per_update"] * len(r["rewards"]) for v in runs.values() for r in v),
        "goal": {"js_over_rloo": 0.5},
        "summaries": summaries,
    }
    write_result(record, write=False, out=out, committed=committed, root=ROOT, newline=False, also=[png])
    return 0


if __name__ == "__main__":
    sys.exit(main())
