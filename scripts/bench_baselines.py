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
3. The REINFORCE gradient on the analytic world: a fixed policy (the untrained instance policy, whose
   mean schedule is the default; or --policy PATH), many independent batches; the total variance
   tr Cov(g) under each baseline on the same samples, relative to RLOO's, and how far each mean
   gradient is from the no-baseline one (all are unbiased; the distance should be within noise).

Nothing is written unless asked: --write writes bench/results/baselines.json and the plots beside it,
--out PATH writes there instead.

    python scripts/bench_baselines.py --write              # the committed results (~10 min on 1 thread)
    python scripts/bench_baselines.py --reps 300 --grad-batches 20 --B 4 16 --K 2    # quick look, nothing written
"""

from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "bench" / "results" / "baselines.json"
sys.path.insert(0, str(ROOT))

from jsbench.baselines import (  # noqa: E402
    js_baseline,
    js_plugin_baseline,
    js_shrink,
    none_baseline,
    rloo_baseline,
    xctx_baseline,
)
from jsbench.io import replacing, result_target, shown_path, write_result  # noqa: E402
from jsbench.splits import mean_stderr  # noqa: E402

BASELINES = {"none": none_baseline, "rloo": rloo_baseline, "xctx": xctx_baseline, "js": js_baseline, "js-plugin": js_plugin_baseline}
ORACLE = "plug-in, true λ"
COLOURS = {"none": "#999999", "rloo": "#1f77b4", "xctx": "#2ca02c", "js": "#d62728", "js-plugin": "#ff7f0e", ORACLE: "#7f7f7f"}
BINARY_MEAN = 0.3
Z_SLACK = 3.0  # paired standard errors allowed above RLOO


# ----------------------------------------------------------------------------------------- 1. MSE grid


def simulate(kind: str, ratio: float, sigma2: float, B: int, K: int, reps: int, gen: torch.Generator):
    """(mu [reps, B, 1], rewards [reps, B, K], sigma^2) for one grid point."""
    if kind == "gaussian":
        mu = math.sqrt(ratio * sigma2) * torch.randn(reps, B, 1, generator=gen, dtype=torch.float64)
        return mu, mu + math.sqrt(sigma2) * torch.randn(reps, B, K, generator=gen, dtype=torch.float64), sigma2
    if ratio == 0:
        p = torch.full((reps, B, 1), BINARY_MEAN, dtype=torch.float64)
    else:
        # Beta draws through Gamma draws seeded from `gen` (torch's Beta sampler takes no generator)
        seed = int(torch.randint(2**62, (1,), generator=gen))
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            beta = torch.distributions.Beta(torch.tensor(BINARY_MEAN / ratio), torch.tensor((1 - BINARY_MEAN) / ratio))
            p = beta.sample((reps, B, 1)).double()
    r = (torch.rand(reps, B, K, generator=gen, dtype=torch.float64) < p).double()
    return p, r, BINARY_MEAN * (1 - BINARY_MEAN) / (1 + ratio)  # E[p(1-p)]


def mse_point(kind: str, ratio: float, sigma2: float, B: int, K: int, reps: int, gen: torch.Generator) -> dict:
    """Per-batch MSE of every baseline on the same `reps` simulated batches."""
    mu, r, s2 = simulate(kind, ratio, sigma2, B, K, reps, gen)
    per_batch = {name: (torch.vmap(fn)(r) - mu).square().mean(dim=(1, 2)) for name, fn in BASELINES.items()}
    tau2 = ratio * s2
    lam = (s2 / (K - 1)) / (s2 / (K - 1) + tau2) if s2 > 0 else 1.0
    per_batch[ORACLE] = (torch.vmap(lambda x: js_shrink(x, lam))(r) - mu).square().mean(dim=(1, 2))
    stats = {n: mean_stderr(v) for n, v in per_batch.items()}  # v: [reps] float64
    out = {"rewards": kind, "tau2": tau2, "sigma2": s2, "ratio": ratio, "B": B, "K": K, "reps": reps, "true_lambda": lam,
           "mse": {n: m for n, (m, _) in stats.items()},
           "stderr": {n: se for n, (_, se) in stats.items()}}
    for name in ("js", "js-plugin"):
        for ref in ("rloo", "xctx"):
            out[f"{name}_minus_{ref}"], out[f"{name}_minus_{ref}_stderr"] = mean_stderr(per_batch[name] - per_batch[ref])  # paired
    return out


def mse_grid(kinds, ratios, sigma2s, Bs, Ks, reps, seed) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for kind in kinds:
        for sigma2 in sigma2s if kind == "gaussian" else [None]:
            for B in Bs:
                for K in Ks:
                    for ratio in ratios:
                        rows.append(mse_point(kind, ratio, sigma2, B, K, reps, gen))
    return rows


def z_over_rloo(row: dict, name: str) -> float:
    d, se = row[f"{name}_minus_rloo"], row[f"{name}_minus_rloo_stderr"]
    return d / se if se > 0 else (0.0 if d == 0 else math.copysign(math.inf, d))


def claim(rows: list[dict], name: str) -> dict:
    """Where is MSE(name) above MSE(rloo) by more than Z_SLACK paired standard errors (B >= 4)?"""
    pts = [r for r in rows if r["B"] >= 4]
    above = [r for r in pts if z_over_rloo(r, name) > Z_SLACK]
    worst = max(pts, key=lambda r: r["mse"][name] / r["mse"]["rloo"]) if pts else None
    return {
        "statement": f"MSE({name}) <= MSE(rloo) within {Z_SLACK:g} paired standard errors for B >= 4",
        "points": len(pts), "holds_at": len(pts) - len(above),
        "above": [{k: r[k] for k in ("rewards", "B", "K", "ratio")} | {"over_rloo": r["mse"][name] / r["mse"]["rloo"], "z": z_over_rloo(r, name)}
                  for r in above],
        "worst": None if worst is None else {k: worst[k] for k in ("rewards", "B", "K", "ratio")} | {"over_rloo": worst["mse"][name] / worst["mse"]["rloo"]},
    }


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


# ------------------------------------------------------------------------------ 2. bandit gradient error


def bandit_gradient_error(B: int, K: int, reps: int, level_sd: float, seed: int) -> dict:
    """E||g - dJ/dtheta||^2 per baseline on a 3-armed softmax bandit, contexts drawn afresh per batch."""
    g = torch.Generator().manual_seed(seed)
    arms = 3
    theta = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64)
    offset = torch.randn(reps, B, arms, generator=g, dtype=torch.float64)
    q = level_sd * torch.randn(reps, B, 1, generator=g, dtype=torch.float64) + torch.randn(reps, B, arms, generator=g, dtype=torch.float64)
    pi = torch.softmax(theta + offset, dim=-1)
    true = (pi * (q - (pi * q).sum(-1, keepdim=True))).mean(1)  # [reps, A]: dJ/dtheta per batch
    a = torch.multinomial(pi.reshape(-1, arms), K, replacement=True, generator=g).reshape(reps, B, K)
    r = torch.gather(q, 2, a) + torch.randn(reps, B, K, generator=g, dtype=torch.float64)
    score = torch.nn.functional.one_hot(a, arms).to(r.dtype) - pi.unsqueeze(2)
    err = {}
    for name, fn in BASELINES.items():
        grads = ((r - torch.vmap(fn)(r)).unsqueeze(-1) * score).mean(dim=(1, 2))
        err[name] = (grads - true).square().sum(-1)
    out = {"B": B, "K": K, "reps": reps, "level_sd": level_sd, "error": {n: float(v.mean()) for n, v in err.items()},
           "over_rloo": {n: float(v.mean() / err["rloo"].mean()) for n, v in err.items()}}
    for name in ("js", "js-plugin"):
        d, se = mean_stderr(err[name] - err["rloo"])  # paired
        out[f"{name}_minus_rloo"], out[f"{name}_minus_rloo_stderr"] = d, se
    return out


# --------------------------------------------------------------------------------- 3. gradient variance


def gradient_variance(steps: int, B: int, K: int, batches: int, seed: int, policy_path: str | None) -> dict:
    from jsbench.distributed import DistContext
    from jsbench.train import TrainConfig, Trainer

    trainer = Trainer(TrainConfig(steps=steps, contexts=B, samples=K, baseline="js", seed=seed, iters=1), ROOT / "runs" / "bench-gradvar", dist=DistContext())
    if policy_path:
        from jsbench.policy import load_policy

        trainer.policy, _ = load_policy(policy_path, backbone=trainer.backbone, steps=steps)  # rolled out and differentiated; never stepped
        trainer.policy.train()
    params = [p for p in trainer.policy.parameters() if p.requires_grad]
    names = list(BASELINES)
    grads_per_batch = {n: [] for n in names}
    rewards_all = []
    for it in range(batches):
        ro = trainer.rollout(it)  # the training loop's own rollout of update `it`: same contexts, draws, images, rewards
        rewards_all.append(ro.rewards)
        for n in names:
            loss, _ = trainer.policy_loss(ro, baseline=n)
            g = torch.autograd.grad(loss, params, allow_unused=True)
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

    rows = mse_grid(args.rewards, args.ratios, args.sigma2, args.B, args.K, args.reps, args.seed)
    t_mse = time.perf_counter() - t0
    claims = {name: claim(rows, name) for name in ("js", "js-plugin")}

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
        print(f"\n3. REINFORCE gradient on the analytic world: {grad[0]['policy']}, {args.grad_steps} steps, B={args.grad_B}, "
              f"{args.grad_batches} independent batches per K")
        head = f"{'K':>3}{'baseline':>11}{'tr Cov(g)':>12}{'/ rloo':>9}{'|E g|':>10}{'|E g - E g_none|':>18}{'± se':>9}"
        print(head)
        print("-" * len(head))
        for g in grad:
            for n in BASELINES:
                print(f"{g['K']:>3}{n:>11}{g['total_variance'][n]:>12.3e}{g['variance_over_rloo'][n]:>9.3f}{g['mean_grad_norm'][n]:>10.3e}"
                      f"{g['mean_minus_none_norm'][n]:>18.3e}{g['mean_minus_none_stderr'][n]:>9.1e}")
            print(f"    rewards: mean {g['reward_mean']:.3f}, within-context σ̂² {g['sigma2_hat']:.3f}, between-context τ̂² {g['tau2_hat']:.3f}")
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
