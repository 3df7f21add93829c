#!/usr/bin/env python
"""How good is each reward baseline? Its error against the true context mean, and the variance of the gradient it gives.

1. Simulated random-effects rewards, mu_i ~ N(0, tau^2), r_ik | mu_i ~ N(mu_i, sigma^2), over a grid of
   tau^2/sigma^2, sigma^2, B (contexts) and K (samples per context, the paper's K = 2 included). For each
   baseline (none, rloo, xctx, js, and js with the TRUE shrinkage as a reference that no real run can
   have) the MSE E[(b_ik - mu_i)^2], with its standard error over batches, computed on the same batches
   for every baseline so that differences are paired. The claim under test: MSE(js) < MSE(rloo),
   strictly, for every B >= 3 (js needs B >= 3). Plot: MSE / sigma^2 vs tau^2/sigma^2, one panel per (B, K).
2. The REINFORCE gradient on the analytic world: a fixed policy (the untrained instance policy, whose
   mean schedule is the default; or --policy PATH), many independent batches; for every batch the
   gradient of the training loss under each baseline on the same samples. Reported: the total variance
   tr Cov(g) = E||g - E g||^2, relative to RLOO's, and how far each mean gradient is from the
   no-baseline one (all are unbiased; the distance should be within noise).

    python scripts/bench_baselines.py                      # table + bench/results/baselines.json + baselines_mse.png
    python scripts/bench_baselines.py --reps 500 --grad-batches 50   # quick
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from jsbench.baselines import js_baseline, js_shrink, none_baseline, rloo_baseline, xctx_baseline  # noqa: E402

BASELINES = {"none": none_baseline, "rloo": rloo_baseline, "xctx": xctx_baseline, "js": js_baseline}
COLOURS = {"none": "#999999", "rloo": "#1f77b4", "xctx": "#2ca02c", "js": "#d62728", "js (true λ)": "#d62728"}


# ----------------------------------------------------------------------------------------- 1. MSE grid


def mse_point(tau2: float, sigma2: float, B: int, K: int, reps: int, gen: torch.Generator) -> dict:
    """Per-batch MSE of every baseline on the same `reps` simulated batches."""
    mu = math.sqrt(tau2) * torch.randn(reps, B, 1, generator=gen, dtype=torch.float64)
    r = mu + math.sqrt(sigma2) * torch.randn(reps, B, K, generator=gen, dtype=torch.float64)
    per_batch = {}
    for name, fn in BASELINES.items():
        b = torch.vmap(fn)(r)
        per_batch[name] = (b - mu).square().mean(dim=(1, 2))  # [reps]
    lam = (sigma2 / (K - 1)) / (sigma2 / (K - 1) + tau2)
    per_batch["js (true λ)"] = (torch.vmap(lambda x: js_shrink(x, lam))(r) - mu).square().mean(dim=(1, 2))
    out = {"tau2": tau2, "sigma2": sigma2, "ratio": tau2 / sigma2, "B": B, "K": K, "reps": reps, "true_lambda": lam, "mse": {}, "stderr": {}}
    for name, v in per_batch.items():
        out["mse"][name] = float(v.mean())
        out["stderr"][name] = float(v.std() / math.sqrt(reps))
    d = per_batch["js"] - per_batch["rloo"]
    out["js_minus_rloo"] = float(d.mean())
    out["js_minus_rloo_stderr"] = float(d.std() / math.sqrt(reps))
    d = per_batch["js"] - per_batch["xctx"]
    out["js_minus_xctx"] = float(d.mean())
    out["js_minus_xctx_stderr"] = float(d.std() / math.sqrt(reps))
    return out


def mse_grid(ratios, sigma2s, Bs, Ks, reps, seed) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for sigma2 in sigma2s:
        for B in Bs:
            for K in Ks:
                for ratio in ratios:
                    rows.append(mse_point(ratio * sigma2, sigma2, B, K, reps, gen))
    return rows


def plot_mse(rows: list[dict], path: Path, sigma2: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sel = [r for r in rows if r["sigma2"] == sigma2]
    Bs = sorted({r["B"] for r in sel})
    Ks = sorted({r["K"] for r in sel})
    fig, axes = plt.subplots(len(Ks), len(Bs), figsize=(3.1 * len(Bs), 2.7 * len(Ks)), sharex=True, sharey=True, squeeze=False)
    for i, K in enumerate(Ks):
        for j, B in enumerate(Bs):
            ax = axes[i][j]
            pts = sorted((r for r in sel if r["B"] == B and r["K"] == K), key=lambda r: r["ratio"])
            x = [r["ratio"] for r in pts]
            for name in ["none", "xctx", "rloo", "js", "js (true λ)"]:
                y = [r["mse"][name] / sigma2 for r in pts]
                style = dict(color=COLOURS[name], lw=1.6 if name == "js" else 1.1, ls=":" if name == "js (true λ)" else "-")
                ax.plot(x, y, label=name, **style)
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"B={B}, K={K}", fontsize=9)
            ax.grid(alpha=0.3, which="both", lw=0.4)
            if i == len(Ks) - 1:
                ax.set_xlabel("τ² / σ²")
            if j == 0:
                ax.set_ylabel("MSE(b, μ) / σ²")
    axes[0][0].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Baseline error vs the true context mean (simulated random effects, σ²={sigma2:g})", fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


# --------------------------------------------------------------------------------- 2. gradient variance


def gradient_variance(steps: int, B: int, K: int, batches: int, seed: int, policy_path: str | None) -> dict:
    from jsbench.baselines import advantages
    from jsbench.train import TrainConfig, Trainer

    trainer = Trainer(TrainConfig(steps=steps, contexts=B, samples=K, baseline="js", seed=seed, iters=1), ROOT / "runs" / "bench-gradvar")
    policy = trainer.policy
    if policy_path:
        from jsbench.policy import load_policy

        policy, _ = load_policy(policy_path, backbone=trainer.backbone, steps=steps)
        policy.train()
    params = [p for p in policy.parameters() if p.requires_grad]
    names = list(BASELINES)
    grads_per_batch = {n: [] for n in names}
    rewards_all = []
    for it in range(batches):
        prompts, seeds, torch_seed = trainer.contexts_for(it)
        cond = trainer.backbone.encode(prompts)
        x_T = trainer.backbone.initial_noise(seeds)
        torch.manual_seed(torch_seed)
        simplex = policy.sample_simplex(x_T, cond.pooled, K)
        sigmas = policy.sigmas(simplex).reshape(-1, steps + 1)
        rows = torch.arange(B).repeat_interleave(K)
        images = trainer.backbone.sample(x_T[rows], cond.take(rows), sigmas.to(x_T.dtype))
        rewards = trainer.reward(images, [prompts[i] for i in rows.tolist()]).view(B, K).double()
        rewards_all.append(rewards)
        log_prob = policy.log_prob(x_T, cond.pooled, simplex)
        for n in names:
            adv, _ = advantages(n, rewards)
            loss = -(adv.to(log_prob.dtype) * log_prob).mean()
            g = torch.autograd.grad(loss, params, retain_graph=True, allow_unused=True)
            flat = torch.cat([(x if x is not None else torch.zeros_like(p)).reshape(-1) for x, p in zip(g, params)]).double()
            grads_per_batch[n].append(flat)
    out = {"steps": steps, "B": B, "K": K, "batches": batches, "policy": policy_path or "untrained instance policy (default schedule)"}
    r = torch.stack(rewards_all)
    out["reward_mean"] = float(r.mean())
    # random-effects view of the analytic rewards themselves: within-context and between-context variance
    within = float(r.var(dim=2, unbiased=True).mean())
    between = float(r.mean(dim=2).var(dim=1, unbiased=True).mean()) - within / K
    out["sigma2_hat"], out["tau2_hat"] = within, max(between, 0.0)
    G = {n: torch.stack(v) for n, v in grads_per_batch.items()}  # [batches, P]
    ref_mean = G["none"].mean(0)
    for n in names:
        mean = G[n].mean(0)
        dev = G[n] - mean
        var = float(dev.square().sum(1).mean() * batches / (batches - 1))
        out.setdefault("total_variance", {})[n] = var
        out.setdefault("mean_grad_norm", {})[n] = float(mean.norm())
        # distance of the mean gradient from the no-baseline one, in units of its standard error
        diff = G[n] - G["none"]
        se = float((diff.var(0, unbiased=True).sum() / batches).sqrt()) if n != "none" else 0.0
        out.setdefault("mean_minus_none_norm", {})[n] = float((mean - ref_mean).norm())
        out.setdefault("mean_minus_none_stderr", {})[n] = se
    out["variance_over_rloo"] = {n: out["total_variance"][n] / out["total_variance"]["rloo"] for n in names}
    return out


# ----------------------------------------------------------------------------------------------- main


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=4000, help="simulated batches per grid point")
    ap.add_argument("--ratios", type=float, nargs="+", default=[10 ** (k / 4) for k in range(-8, 9)], help="tau^2/sigma^2 values")
    ap.add_argument("--sigma2", type=float, nargs="+", default=[1.0, 0.25])
    ap.add_argument("--B", type=int, nargs="+", default=[3, 4, 6, 8, 12, 16, 32, 64])
    ap.add_argument("--K", type=int, nargs="+", default=[2, 4, 8])
    ap.add_argument("--grad-batches", type=int, default=300, help="batches for the gradient variance on the analytic world (0: skip)")
    ap.add_argument("--grad-K", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--grad-B", type=int, default=16)
    ap.add_argument("--grad-steps", type=int, default=3)
    ap.add_argument("--policy", default=None, help="policy folder for the gradient variance (default: untrained instance policy)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "baselines.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    t0 = time.perf_counter()

    rows = mse_grid(args.ratios, args.sigma2, args.B, args.K, args.reps, args.seed)
    t_mse = time.perf_counter() - t0

    # where does js beat rloo? paired difference, strictly below = the whole 95% interval below zero
    verdict = []
    for r in rows:
        upper = r["js_minus_rloo"] + 1.96 * r["js_minus_rloo_stderr"]
        verdict.append(upper < 0)
    n_strict = sum(verdict)
    fails = [r for r, v in zip(rows, verdict) if not v]
    worst = max(rows, key=lambda r: r["js_minus_rloo"] / r["mse"]["rloo"])

    print(f"\n1. baseline MSE vs the true context mean, simulated random effects ({args.reps} batches per point), σ² = {args.sigma2[0]:g}")
    print("   MSE/σ² (lower is better); js/rloo = MSE(js)/MSE(rloo)")
    head = f"{'B':>4}{'K':>3}{'τ²/σ²':>8}{'none':>9}{'rloo':>9}{'xctx':>9}{'js':>9}{'js true λ':>11}{'js/rloo':>9}{'js/xctx':>9}"
    print(head)
    print("-" * len(head))
    show = [0.01, 0.1, 1.0, 10.0, 100.0]
    for r in rows:
        if r["sigma2"] != args.sigma2[0] or not any(abs(r["ratio"] - s) / s < 1e-6 for s in show):
            continue
        m = {k: v / r["sigma2"] for k, v in r["mse"].items()}
        print(f"{r['B']:>4}{r['K']:>3}{r['ratio']:>8.2g}{m['none']:>9.3f}{m['rloo']:>9.3f}{m['xctx']:>9.3f}{m['js']:>9.3f}{m['js (true λ)']:>11.3f}"
              f"{r['mse']['js'] / r['mse']['rloo']:>9.3f}{r['mse']['js'] / r['mse']['xctx']:>9.3f}")
    print(f"\n   claim 'MSE(js) < MSE(rloo) for B >= 3': strictly below (95% paired interval) at {n_strict}/{len(rows)} grid points")
    print(f"   worst point: B={worst['B']} K={worst['K']} τ²/σ²={worst['ratio']:.3g} σ²={worst['sigma2']:g}: "
          f"js/rloo = {worst['mse']['js'] / worst['mse']['rloo']:.3f} (diff {worst['js_minus_rloo']:+.4f} ± {worst['js_minus_rloo_stderr']:.4f})")
    for r in fails[:10]:
        print(f"   not strictly below: B={r['B']} K={r['K']} τ²/σ²={r['ratio']:.3g} σ²={r['sigma2']:g}: diff {r['js_minus_rloo']:+.4f} ± {r['js_minus_rloo_stderr']:.4f}")

    plots = []
    for s2 in args.sigma2[:1]:
        png = args.out.with_name("baselines_mse.png")
        plot_mse(rows, png, s2)
        plots.append(str(png.relative_to(ROOT) if png.is_relative_to(ROOT) else png))

    grad = []
    t1 = time.perf_counter()
    if args.grad_batches > 0:
        for K in args.grad_K:
            grad.append(gradient_variance(args.grad_steps, args.grad_B, K, args.grad_batches, args.seed, args.policy))
        print(f"\n2. REINFORCE gradient on the analytic world: {grad[0]['policy']}, {args.grad_steps} steps, B={args.grad_B}, "
              f"{args.grad_batches} independent batches per K")
        head = f"{'K':>3}{'baseline':>10}{'tr Cov(g)':>12}{'/ rloo':>9}{'|E g|':>10}{'|E g - E g_none|':>18}{'± se':>9}"
        print(head)
        print("-" * len(head))
        for g in grad:
            for n in BASELINES:
                print(f"{g['K']:>3}{n:>10}{g['total_variance'][n]:>12.3e}{g['variance_over_rloo'][n]:>9.3f}{g['mean_grad_norm'][n]:>10.3e}"
                      f"{g['mean_minus_none_norm'][n]:>18.3e}{g['mean_minus_none_stderr'][n]:>9.1e}")
            print(f"    rewards: mean {g['reward_mean']:.3f}, within-context σ̂² {g['sigma2_hat']:.3f}, between-context τ̂² {g['tau2_hat']:.3f}")
    t_grad = time.perf_counter() - t1

    record = {
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": platform.node(), "python": platform.python_version(),
        "torch": torch.__version__, "threads": args.threads, "command": "python scripts/bench_baselines.py " + " ".join(argv or sys.argv[1:]),
        "seconds": {"mse_grid": t_mse, "gradient_variance": t_grad},
        "claim": {"statement": "MSE(js) < MSE(rloo) strictly for B >= 3", "points": len(rows), "strictly_below_95": n_strict,
                  "not_strictly_below": [{k: r[k] for k in ("B", "K", "ratio", "sigma2", "js_minus_rloo", "js_minus_rloo_stderr")} for r in fails],
                  "worst_js_over_rloo": worst["mse"]["js"] / worst["mse"]["rloo"]},
        "mse_grid": rows, "gradient_variance": grad, "plots": plots,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.out.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(record, indent=1))
    tmp.replace(args.out)
    print(f"\nwrote {args.out.relative_to(ROOT) if args.out.is_relative_to(ROOT) else args.out} and {', '.join(plots)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
