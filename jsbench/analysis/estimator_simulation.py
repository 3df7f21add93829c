"""The baselines' simulated checks (scripts/bench_baselines.py): every registered baseline's error on
random-effects rewards whose context means are known, and on a softmax bandit whose gradient is known;
paired against rloo on the same simulated batches."""

from __future__ import annotations

import math

import torch

from jsbench.stats import mean_stderr

__all__ = ["ORACLE", "BINARY_MEAN", "Z_SLACK", "simulate_rewards", "simulated_mse_point", "simulated_mse_grid", "z_over_rloo",
           "mse_claim", "bandit_gradient_error"]

ORACLE = "plug-in, true λ"  # the plug-in form with the TRUE shrinkage, a reference no real run can have
BINARY_MEAN = 0.3
Z_SLACK = 3.0  # paired standard errors allowed above RLOO


def simulate_rewards(kind: str, ratio: float, sigma2: float | None, B: int, K: int, reps: int, gen: torch.Generator):
    """(mu [reps, B, 1], rewards [reps, B, K], sigma^2) of random-effects rewards with tau^2/sigma^2 = ratio:
    Gaussian (mu_i ~ N(0, tau^2), r_ik ~ N(mu_i, sigma^2)) or 0/1 (p_i ~ Beta with mean BINARY_MEAN and
    alpha + beta = 1/ratio, r_ik ~ Bernoulli(p_i); sigma^2 is then E[p(1-p)])."""
    if kind == "gaussian":
        mu = math.sqrt(ratio * sigma2) * torch.randn(reps, B, 1, generator=gen, dtype=torch.float64)
        return mu, mu + math.sqrt(sigma2) * torch.randn(reps, B, K, generator=gen, dtype=torch.float64), sigma2
    if ratio == 0:
        p = torch.full((reps, B, 1), BINARY_MEAN, dtype=torch.float64)
    else:
        seed = int(torch.randint(2**62, (1,), generator=gen))  # Beta via torch's global RNG, seeded from `gen`
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            beta = torch.distributions.Beta(torch.tensor(BINARY_MEAN / ratio), torch.tensor((1 - BINARY_MEAN) / ratio))
            p = beta.sample((reps, B, 1)).double()
    r = (torch.rand(reps, B, K, generator=gen, dtype=torch.float64) < p).double()
    return p, r, BINARY_MEAN * (1 - BINARY_MEAN) / (1 + ratio)


def simulated_mse_point(kind: str, ratio: float, sigma2: float | None, B: int, K: int, reps: int, gen: torch.Generator) -> dict:
    """E[(b_ik - mu_i)^2] of every registered baseline (and the true-lambda plug-in) on the same simulated
    batches, with paired differences of js and js-plugin against rloo and xctx."""
    from jsbench.baselines import BASELINE_VALUES, js_shrink

    mu, r, s2 = simulate_rewards(kind, ratio, sigma2, B, K, reps, gen)
    per_batch = {name: (torch.vmap(fn)(r) - mu).square().mean(dim=(1, 2)) for name, fn in BASELINE_VALUES.items()}
    tau2 = ratio * s2
    lam = (s2 / (K - 1)) / (s2 / (K - 1) + tau2) if s2 > 0 else 1.0
    per_batch[ORACLE] = (torch.vmap(lambda x: js_shrink(x, lam))(r) - mu).square().mean(dim=(1, 2))
    stats = {n: mean_stderr(v) for n, v in per_batch.items()}
    out = {"rewards": kind, "tau2": tau2, "sigma2": s2, "ratio": ratio, "B": B, "K": K, "reps": reps, "true_lambda": lam,
           "mse": {n: m for n, (m, _) in stats.items()}, "stderr": {n: se for n, (_, se) in stats.items()}}
    for name in ("js", "js-plugin"):
        for ref in ("rloo", "xctx"):
            out[f"{name}_minus_{ref}"], out[f"{name}_minus_{ref}_stderr"] = mean_stderr(per_batch[name] - per_batch[ref])
    return out


def simulated_mse_grid(kinds, ratios, sigma2s, Bs, Ks, reps, seed) -> list[dict]:
    gen = torch.Generator().manual_seed(seed)
    return [simulated_mse_point(kind, ratio, sigma2, B, K, reps, gen)
            for kind in kinds for sigma2 in (sigma2s if kind == "gaussian" else [None]) for B in Bs for K in Ks for ratio in ratios]


def z_over_rloo(row: dict, name: str) -> float:
    d, se = row[f"{name}_minus_rloo"], row[f"{name}_minus_rloo_stderr"]
    return d / se if se > 0 else (0.0 if d == 0 else math.copysign(math.inf, d))


def mse_claim(rows: list[dict], name: str) -> dict:
    """Where is MSE(name) above MSE(rloo) by more than Z_SLACK paired standard errors (B >= 4)?"""
    pts = [r for r in rows if r["B"] >= 4]
    above = [r for r in pts if z_over_rloo(r, name) > Z_SLACK]
    worst = max(pts, key=lambda r: r["mse"][name] / r["mse"]["rloo"]) if pts else None
    keys = ("rewards", "B", "K", "ratio")
    return {
        "statement": f"MSE({name}) <= MSE(rloo) within {Z_SLACK:g} paired standard errors for B >= 4",
        "points": len(pts), "holds_at": len(pts) - len(above),
        "above": [{k: r[k] for k in keys} | {"over_rloo": r["mse"][name] / r["mse"]["rloo"], "z": z_over_rloo(r, name)} for r in above],
        "worst": None if worst is None else {k: worst[k] for k in keys} | {"over_rloo": worst["mse"][name] / worst["mse"]["rloo"]},
    }


def bandit_gradient_error(B: int, K: int, reps: int, level_sd: float, seed: int) -> dict:
    """E||g - dJ/dtheta||^2 of every registered baseline on a 3-armed softmax bandit with a known gradient
    (context levels N(0, level_sd^2), drawn afresh per batch), relative to rloo's, paired."""
    from jsbench.baselines import BASELINE_VALUES

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
    for name, fn in BASELINE_VALUES.items():
        grads = ((r - torch.vmap(fn)(r)).unsqueeze(-1) * score).mean(dim=(1, 2))
        err[name] = (grads - true).square().sum(-1)
    out = {"B": B, "K": K, "reps": reps, "level_sd": level_sd, "error": {n: float(v.mean()) for n, v in err.items()},
           "over_rloo": {n: float(v.mean() / err["rloo"].mean()) for n, v in err.items()}}
    for name in ("js", "js-plugin"):
        out[f"{name}_minus_rloo"], out[f"{name}_minus_rloo_stderr"] = mean_stderr(err[name] - err["rloo"])
    return out
