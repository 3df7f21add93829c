#!/usr/bin/env python
"""How good is each reward baseline? Its error against the true context mean, and the error of the gradient it gives.

1. MSE grid. Simulated random-effects rewards over tau^2/sigma^2, B (contexts) and K (samples per
   context): Gaussian (mu_i ~ N(0, tau^2), r_ik ~ N(mu_i, sigma^2)) and 0/1 (p_i ~ Beta with mean 0.3
   and alpha + beta = sigma^2/tau^2, r_ik ~ Bernoulli(p_i), so Var p / E[p(1-p)] = tau^2/sigma^2).
   For each baseline (none, rloo, xctx, js, js-plugin, and the plug-in form with the TRUE lam as a
   reference no real run can have) the MSE E[(b_ik - mu_i)^2] on the same batches, so that differences
   are paired. The claim under test: MSE(js) <= MSE(rloo) within 3 paired standard errors for B >= 4
   (js is exactly RLOO at B = 3). Plot: MSE / sigma^2 vs tau^2/sigma^2, one panel per (B, K).
2. Gradient error on a softmax bandit with a known gradient (3 arms, context levels N(0, level_sd^2),
   contexts drawn afresh per batch): E||g - dJ/dtheta||^2 of the REINFORCE estimate under each
   baseline, relative to RLOO's, paired.
3. The REINFORCE gradient on the analytic world: the estimator lab (`jsbench estimators`,
   jsbench/analysis/estimators.py) at a fixed policy (the untrained instance policy, whose mean schedule is the
   default; or --policy PATH): tr Cov(g) and the gradient MSE under each baseline on the same batches,
   relative to RLOO's, with paired-bootstrap 90 % CIs.

Sections 1 and 2 are jsbench.analysis.estimator_simulation's checks, on the baselines of the registry.

Nothing is written unless asked: --write writes bench/results/baselines.json and the plots beside it,
--out PATH writes there instead.

    python scripts/bench_baselines.py --write              # the committed results (~10 min on 1 thread)
    python scripts/bench_baselines.py --reps 300 --grad-batches 20 --B 4 16 --K 2    # quick look, nothing written
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "baselines.json"
sys.path.insert(0, str(ROOT))

from jsbench.analysis.estimator_rendering import lab_table  # noqa: E402  the lab's own code: gradient variance, its table
from jsbench.analysis.estimator_simulation import (  # noqa: E402  simulation, claims, bandit
    BINARY_MEAN,
    ORACLE,
    bandit_gradient_error,
    mse_claim,
    simulated_mse_grid,
    z_over_rloo,
)
from jsbench.analysis.estimators import LabConfig, run_lab  # noqa: E402
from jsbench.io import replacing, result_target, shown_path, write_result  # noqa: E402

COLOURS = {"none": "#999999", "rloo": "#1f77b4", "xctx": "#2ca02c", "js": "#d62728", "js-plugin": "#ff7f0e", ORACLE: "#7f7f7f"}


# ----------------------------------------------------------------------------------------- 1. MSE grid


def plot_mse(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    Bs = sorted({r["B"] for r in rows})
    Ks = sorted({r["K"] for r in rows})
    fig, axes = plt.subplots(len(Ks), len(Bs), figsize=(2.9 * len(Bs), 2.6 * len(Ks)), sharex=True, sharey=True, squeeze=False)
    floor = min(min(r["ratio"] for r in rows if r["ratio"] > 0), 1.0) / 3 if any(r["ratio"] > 0 for r in rows) else 1e-3
    for i, K in enumerate(Ks):
        for j, B in enumerate(Bs):
            ax = axes[i][j]
            pts = sorted((r for r in rows if r["B"] == B and r["K"] == K), key=lambda r: r["ratio"])
            x = [max(r["ratio"], floor) for r in pts]  # tau^2 = 0 drawn at the left edge
            for name in ["none", "xctx", "rloo", "js-plugin", ORACLE, "js"]:
                y = [r["mse"][name] / r["sigma2"] for r in pts]
                style = dict(color=COLOURS[name], lw=1.8 if name == "js" else 1.0, ls=":" if name == ORACLE else ("--" if name == "js-plugin" else "-"))
                ax.plot(x, y, label=name, **style)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"B={B}, K={K}", fontsize=9)
            ax.grid(alpha=0.3, which="both", lw=0.4)
            if i == len(Ks) - 1:
                ax.set_xlabel(f"τ² / σ²  (leftmost: 0)")
            if j == 0:
                ax.set_ylabel("MSE(b, μ) / σ²")
    axes[0][0].legend(fontsize=6, loc="lower left")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    with replacing(path, ".tmp" + path.suffix) as tmp:
        fig.savefig(tmp, dpi=100)
    plt.close(fig)


# --------------------------------------------------------------------------------- 3. gradient variance


def gradient_variance(steps: int, B: int, K: int, batches: int, seed: int, policy_path: str | None) -> dict:
    """The estimator lab (jsbench estimators) on the analytic world: every baseline on the same batches."""
    record = run_lab(LabConfig(backbone="analytic", steps=steps, contexts=B, samples=K, rollouts=batches, seed=seed,
                               policy=policy_path, mean_rollouts=0, bootstrap=1000), progress=False)
    rows = {r["baseline"]: r for r in record["rows"]}
    return {"steps": steps, "B": B, "K": K, "batches": batches, "policy": policy_path or "untrained instance policy (default schedule)",
            "reward_mean": record["reward_mean"], "total_variance": {n: r["grad_var"] for n, r in rows.items()},
            "variance_over_rloo": {n: r["grad_var_ratio"] for n, r in rows.items()},
            "variance_over_rloo_ci": {n: r["grad_var_ci"] for n, r in rows.items()}, "lab": record}


# ----------------------------------------------------------------------------------------------- main


def print_mse(rows: list[dict], show_ratios: list[float]) -> None:
    head = f"{'rewards':>9}{'B':>4}{'K':>3}{'τ²/σ²':>7}{'rloo':>9}{'xctx':>9}{'js':>9}{'plugin':>9}{'js/rloo':>9}{'z':>7}{'plug/rloo':>10}{'z':>7}"
    print(head)
    print("-" * len(head))
    for r in rows:
        if not any(abs(r["ratio"] - s) <= 1e-9 + 1e-6 * s for s in show_ratios):
            continue
        m = {k: v / r["sigma2"] for k, v in r["mse"].items()}
        print(f"{r['rewards']:>9}{r['B']:>4}{r['K']:>3}{r['ratio']:>7.3g}{m['rloo']:>9.4f}{m['xctx']:>9.4f}{m['js']:>9.4f}{m['js-plugin']:>9.4f}"
              f"{r['mse']['js'] / r['mse']['rloo']:>9.3f}{z_over_rloo(r, 'js'):>7.1f}"
              f"{r['mse']['js-plugin'] / r['mse']['rloo']:>10.3f}{z_over_rloo(r, 'js-plugin'):>7.1f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=2000, help="simulated batches per grid point")
    ap.add_argument("--rewards", nargs="+", default=["gaussian", "binary"], choices=["gaussian", "binary"])
    ap.add_argument("--ratios", type=float, nargs="+", default=[0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 2.0, 4.0, 8.0, 16.0], help="tau^2/sigma^2 values")
    ap.add_argument("--sigma2", type=float, nargs="+", default=[1.0], help="sigma^2 of the Gaussian rewards (the estimators are scale-equivariant)")
    ap.add_argument("--B", type=int, nargs="+", default=[3, 4, 6, 8, 16, 32, 64])
    ap.add_argument("--K", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--show-ratios", type=float, nargs="+", default=[0.0, 0.1, 1.0, 4.0, 16.0], help="ratios printed in the MSE table")
    ap.add_argument("--bandit-reps", type=int, default=20000, help="batches per bandit gradient-error point (0: skip)")
    ap.add_argument("--bandit-B", type=int, nargs="+", default=[3, 4, 6, 8, 16])
    ap.add_argument("--bandit-K", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--bandit-level-sd", type=float, nargs="+", default=[0.3, 3.0], help="sd of the context levels (noise sd 1)")
    ap.add_argument("--grad-batches", type=int, default=300, help="batches for the gradient variance on the analytic world (0: skip)")
    ap.add_argument("--grad-K", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--grad-B", type=int, default=16)
    ap.add_argument("--grad-steps", type=int, default=3)
    ap.add_argument("--policy", default=None, help="policy folder for the gradient variance (default: untrained instance policy)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--write", action="store_true", help="write bench/results/baselines.json and its plots")
    ap.add_argument("--out", type=Path, default=None, help="write the JSON (and plots beside it) here instead")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()

    rows = simulated_mse_grid(args.rewards, args.ratios, args.sigma2, args.B, args.K, args.reps, args.seed)
    t_mse = time.perf_counter() - t0
    claims = {name: mse_claim(rows, name) for name in ("js", "js-plugin")}

    print(f"\n1. baseline MSE vs the true context mean, simulated random effects ({args.reps} batches per point)")
    print("   MSE/σ² (lower is better); js/rloo = MSE(js)/MSE(rloo); z = paired difference / its standard error")
    print_mse(rows, args.show_ratios)
    for name, c in claims.items():
        w = c["worst"]
        print(f"\n   claim '{c['statement']}': holds at {c['holds_at']}/{c['points']} grid points"
              + (f"; worst {name}/rloo = {w['over_rloo']:.3f} ({w['rewards']}, B={w['B']}, K={w['K']}, τ²/σ²={w['ratio']:g})" if w else ""))
        for a in c["above"][:12]:
            print(f"     above: {a['rewards']} B={a['B']} K={a['K']} τ²/σ²={a['ratio']:g}: {name}/rloo = {a['over_rloo']:.3f} (z {a['z']:+.1f})")
        if len(c["above"]) > 12:
            print(f"     ... and {len(c['above']) - 12} more")

    bandit = []
    t1 = time.perf_counter()
    if args.bandit_reps > 0:
        seeds = iter(range(args.seed * 1000 + 1, args.seed * 1000 + 1000))
        for level_sd in args.bandit_level_sd:
            for B in args.bandit_B:
                for K in args.bandit_K:
                    bandit.append(bandit_gradient_error(B, K, args.bandit_reps, level_sd, next(seeds)))
        print(f"\n2. gradient error E||g - ∇J||² on a 3-armed softmax bandit with known gradient, contexts drawn per batch "
              f"({args.bandit_reps} batches per point), relative to RLOO's")
        head = f"{'level sd':>9}{'B':>4}{'K':>3}{'none':>8}{'xctx':>8}{'js':>8}{'z':>7}{'plugin':>8}{'z':>7}"
        print(head)
        print("-" * len(head))
        for b in bandit:
            o = b["over_rloo"]
            zj = b["js_minus_rloo"] / b["js_minus_rloo_stderr"] if b["js_minus_rloo_stderr"] > 0 else 0.0
            zp = b["js-plugin_minus_rloo"] / b["js-plugin_minus_rloo_stderr"] if b["js-plugin_minus_rloo_stderr"] > 0 else 0.0
            print(f"{b['level_sd']:>9g}{b['B']:>4}{b['K']:>3}{o['none']:>8.3f}{o['xctx']:>8.3f}{o['js']:>8.3f}{zj:>7.1f}{o['js-plugin']:>8.3f}{zp:>7.1f}")
    t_bandit = time.perf_counter() - t1

    grad = []
    t2 = time.perf_counter()
    if args.grad_batches > 0:
        for K in args.grad_K:
            grad.append(gradient_variance(args.grad_steps, args.grad_B, K, args.grad_batches, args.seed, args.policy))
        print(f"\n3. REINFORCE gradient on the analytic world (the estimator lab, jsbench estimators): {grad[0]['policy']}")
        for g in grad:
            print(f"   K={g['K']}: " + lab_table(g["lab"]).replace("\n", "\n   ").rstrip())
    t_grad = time.perf_counter() - t2

    print()
    # --out wins over --write here (they are not exclusive options in this script)
    out_path = result_target(write=args.write and args.out is None, out=args.out, committed=COMMITTED, root=ROOT, companions=" and its plots")
    if out_path is None:
        return 0
    out_path.parent.mkdir(parents=True, exist_ok=True)
    plots = []
    for kind in args.rewards:
        sel = [r for r in rows if r["rewards"] == kind and (kind != "gaussian" or r["sigma2"] == args.sigma2[0])]
        png = out_path.with_name("baselines_mse.png" if kind == "gaussian" else f"baselines_mse_{kind}.png")
        what = "Gaussian rewards" if kind == "gaussian" else f"0/1 rewards (mean {BINARY_MEAN})"
        plot_mse(sel, png, f"Baseline error vs the true context mean, simulated random effects, {what}")
        plots.append(shown_path(png, ROOT))
    record = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "python": platform.python_version(),
        "torch": torch.__version__, "threads": args.threads,
        "command": "python scripts/bench_baselines.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "seconds": {"mse_grid": t_mse, "bandit_gradient_error": t_bandit, "gradient_variance": t_grad},
        "claims": claims, "mse_grid": rows, "bandit_gradient_error": bandit, "gradient_variance": grad, "plots": plots,
    }
    write_result(record, write=False, out=out_path, committed=COMMITTED, root=ROOT, indent=2, sort_keys=True, also=plots)
    return 0


if __name__ == "__main__":
    sys.exit(main())
