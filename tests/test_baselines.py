"""Reward baselines: exact values, leave-one-out, MSE ordering, unbiased policy gradients, errors."""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from jsbench import JsbenchError
from jsbench.baselines import (
    BASELINES,
    BaselineError,
    BaselineResult,
    advantages,
    compute_baseline,
    js_baseline,
    js_plugin_baseline,
    js_plugin_shrinkage,
    js_shrink,
    js_shrinkage,
    js_target,
    jspo_baseline,
    jspo_shrinkage,
    none_baseline,
    rloo_baseline,
    validate_baseline,
    xctx_baseline,
)

# the plain [B, K] -> [B, K] form of every baseline, for torch.vmap over Monte-Carlo replicates
TENSOR_BASELINES = {
    "none": none_baseline,
    "rloo": rloo_baseline,
    "xctx": xctx_baseline,
    "js": js_baseline,
    "js-plugin": js_plugin_baseline,
    "jspo": jspo_baseline,
}
SHRINKAGE = {"js": js_shrinkage, "js-plugin": js_plugin_shrinkage}


def _rewards(b: int, k: int, seed: int, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, 1, generator=g) * 2 + torch.randn(b, k, generator=g)).to(dtype)


# ---------------------------------------------------------------------------------------------
# (a) exact values


def _brute_rloo(r: list[list[float]]) -> list[list[float]]:
    return [[sum(row[l] for l in range(len(row)) if l != k) / (len(row) - 1) for k in range(len(row))] for row in r]


def _brute_xctx(r: list[list[float]]) -> list[list[float]]:
    flat = [(i, k, x) for i, row in enumerate(r) for k, x in enumerate(row)]
    return [
        [sum(x for (j, l, x) in flat if (j, l) != (i, k)) / (len(flat) - 1) for k in range(len(r[i]))]
        for i in range(len(r))
    ]


def _brute_js(r: list[list[float]]) -> tuple[list[list[float]], list[list[float]], list[list[float]]]:
    """The documented js (c, zbar, b), one (i, k) at a time, written straight from the formulas."""
    b, k = len(r), len(r[0])

    def ss(xs):
        m = sum(xs) / len(xs)
        return sum((x - m) ** 2 for x in xs)

    cs, targets, outs = [], [], []
    for i in range(b):
        crow, trow, orow = [], [], []
        for kk in range(k):
            rest = [r[i][l] for l in range(k) if l != kk]
            big_r = sum(rest) / len(rest)
            z = [big_r if j == i else sum(r[j]) / k for j in range(b)]
            zbar = sum(z) / b
            spread = sum((x - zbar) ** 2 for x in z)
            nu = b * (k - 1) - 1
            s2 = (sum(ss(r[j]) for j in range(b) if j != i) + ss(rest)) / nu
            others_ss = [ss(r[j]) for j in range(b) if j != i]
            var_s2 = ss(others_ss) / (b - 2) * ((b - 1) + (k - 2) / (k - 1)) / nu**2
            f = nu / (nu + 2) if s2 * s2 + var_s2 == 0 else min(nu / (nu + 2), s2 * s2 / (s2 * s2 + var_s2))
            c = 0.0 if spread == 0 else min(1.0, max(0.0, (b - 3) * f * s2 / (k - 1) / spread))
            crow.append(c)
            trow.append(zbar)
            orow.append(c * zbar + (1 - c) * big_r)
        cs.append(crow)
        targets.append(trow)
        outs.append(orow)
    return cs, targets, outs


def _brute_lam(r: list[list[float]]) -> list[list[float]]:
    """The documented js-plugin shrinkage, one (i, k) at a time from the other rewards only."""
    b, k = len(r), len(r[0])

    def ss(xs):
        m = sum(xs) / len(xs)
        return sum((x - m) ** 2 for x in xs)

    out = []
    for i in range(b):
        row = []
        for kk in range(k):
            others = [r[i][l] for l in range(k) if l != kk]
            s2 = (sum(ss(r[j]) for j in range(b) if j != i) + ss(others)) / ((b - 1) * (k - 1) + (k - 2))
            means = [sum(r[j]) / k for j in range(b) if j != i]
            v = ss(means) / (len(means) - 1)
            noise = s2 / (k - 1)
            delta2 = max(0.0, v - s2 / k)
            row.append(1.0 if noise + delta2 == 0 else noise / (noise + delta2))
        out.append(row)
    return out


@pytest.mark.parametrize("b,k", [(1, 2), (3, 2), (5, 3), (8, 5)])
def test_rloo_and_xctx_match_brute_force(b, k):
    r = _rewards(b, k, seed=10 * b + k)
    torch.testing.assert_close(rloo_baseline(r), torch.tensor(_brute_rloo(r.tolist()), dtype=r.dtype))
    torch.testing.assert_close(xctx_baseline(r), torch.tensor(_brute_xctx(r.tolist()), dtype=r.dtype))
    assert torch.equal(none_baseline(r), torch.zeros_like(r))


@pytest.mark.parametrize("b,k", [(3, 2), (4, 3), (7, 5)])
def test_js_plugin_shrinkage_matches_brute_force(b, k):
    r = _rewards(b, k, seed=100 + 10 * b + k)
    lam = js_plugin_shrinkage(r)
    torch.testing.assert_close(lam, torch.tensor(_brute_lam(r.tolist()), dtype=r.dtype))
    assert ((lam >= 0) & (lam <= 1)).all()
    expected = lam * xctx_baseline(r) + (1 - lam) * rloo_baseline(r)
    torch.testing.assert_close(js_plugin_baseline(r), expected)


@pytest.mark.parametrize("b,k,scale", [(4, 2, 2.0), (5, 3, 0.3), (8, 5, 0.1), (12, 2, 0.05), (6, 4, 1.0)])
def test_js_matches_brute_force(b, k, scale):
    # scale sets how far apart the contexts sit (small: c clipped at 1; large: c near 0)
    g = torch.Generator().manual_seed(500 + 10 * b + k)
    r = torch.randn(b, 1, generator=g, dtype=torch.float64) * scale + torch.randn(b, k, generator=g, dtype=torch.float64)
    c, target, out = (torch.tensor(x, dtype=r.dtype) for x in _brute_js(r.tolist()))
    torch.testing.assert_close(js_shrinkage(r), c)
    torch.testing.assert_close(js_target(r), target)
    torch.testing.assert_close(js_baseline(r), out)
    assert ((c >= 0) & (c <= 1)).all() and (c > 0).any()


@pytest.mark.parametrize("k", [2, 3, 8])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_js_is_exactly_rloo_at_three_contexts(k, dtype):
    # (B - 3) = 0: nothing to shrink towards that the B values can estimate, bit for bit RLOO
    for seed in range(5):
        r = _rewards(3, k, seed=seed, dtype=dtype)
        assert torch.equal(js_baseline(r), rloo_baseline(r))
        assert torch.equal(js_shrinkage(r), torch.zeros_like(r))
        assert compute_baseline("js", r).shrinkage == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_js_endpoints_are_exactly_rloo_and_xctx(dtype):
    r = _rewards(6, 4, seed=3, dtype=dtype)
    assert torch.equal(js_shrink(r, 0.0), rloo_baseline(r))
    assert torch.equal(js_shrink(r, 1.0), xctx_baseline(r))
    assert torch.equal(js_plugin_baseline(r, shrinkage=0.0), rloo_baseline(r))
    assert torch.equal(js_plugin_baseline(r, shrinkage=torch.ones(6, 4, dtype=dtype)), xctx_baseline(r))
    assert torch.equal(js_baseline(r, shrinkage=0.0), rloo_baseline(r))
    assert torch.equal(js_baseline(r, shrinkage=torch.ones(6, 4, dtype=dtype)), js_target(r))
    # a per-sample lam mixes per sample
    lam = torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=dtype).expand(6, 4)
    mixed = js_shrink(r, lam)
    assert torch.equal(mixed[:, 0], rloo_baseline(r)[:, 0]) and torch.equal(mixed[:, 1], xctx_baseline(r)[:, 1])
    for name in BASELINES:
        assert compute_baseline(name, r).baseline.dtype == dtype


def test_registry_results_and_advantages():
    r = _rewards(5, 3, seed=4)
    assert list(BASELINES) == ["none", "rloo", "xctx", "js", "js-plugin", "jspo"]
    for name, fn in TENSOR_BASELINES.items():
        res = compute_baseline(name, r)
        assert isinstance(res, BaselineResult)
        assert torch.equal(res.baseline, fn(r))
        adv, shrink = advantages(name, r)
        assert torch.equal(adv, r - res.baseline)
        assert shrink == res.shrinkage
        if name in SHRINKAGE or name == "jspo":
            lam = SHRINKAGE[name](r) if name in SHRINKAGE else jspo_shrinkage(r)
            assert shrink == pytest.approx(lam.mean().item()) and 0.0 <= shrink <= 1.0
        else:
            assert shrink is None


def test_degenerate_rewards():
    # no spread at all: every baseline is the common value (js-plugin's lam = 1 by convention; js has
    # S = 0, nothing to shrink across, c = 0)
    r = torch.full((4, 3), 0.5)
    assert torch.equal(js_plugin_shrinkage(r), torch.ones(4, 3))
    torch.testing.assert_close(js_plugin_baseline(r), r)
    assert torch.equal(js_shrinkage(r), torch.zeros(4, 3))
    assert torch.equal(js_baseline(r), r)
    # no within-context noise but distinct contexts: nothing to shrink, both are rloo
    r = torch.arange(4.0).unsqueeze(1).expand(4, 3).contiguous()
    assert torch.equal(js_plugin_shrinkage(r), torch.zeros(4, 3))
    assert torch.equal(js_plugin_baseline(r), rloo_baseline(r))
    assert torch.equal(js_shrinkage(r), torch.zeros(4, 3))
    assert torch.equal(js_baseline(r), rloo_baseline(r))
    # integer rewards are treated as floats; rewards carrying gradients give a detached baseline
    for name in SHRINKAGE:
        assert compute_baseline(name, torch.ones(4, 2, dtype=torch.int64)).baseline.is_floating_point()
        rg = _rewards(4, 2, seed=5).requires_grad_()
        assert not compute_baseline(name, rg).baseline.requires_grad


# ---------------------------------------------------------------------------------------------
# (b) leave-one-out: b_ik is a function of the other rewards only (bit for bit, by construction)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    b=st.integers(3, 8),
    k=st.integers(2, 5),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_baseline_does_not_depend_on_own_reward(data, b, k, dtype):
    values = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=32)
    r = torch.tensor(data.draw(st.lists(values, min_size=b * k, max_size=b * k)), dtype=dtype).reshape(b, k)
    i = data.draw(st.integers(0, b - 1))
    kk = data.draw(st.integers(0, k - 1))
    r2 = r.clone()
    r2[i, kk] = data.draw(st.floats(-1e4, 1e4, allow_nan=False, width=32))
    for name in BASELINES:
        before = compute_baseline(name, r).baseline
        after = compute_baseline(name, r2).baseline
        assert torch.equal(before[i, kk], after[i, kk]), name
    for name, shrinkage in SHRINKAGE.items():
        assert torch.equal(shrinkage(r)[i, kk], shrinkage(r2)[i, kk]), name
    assert torch.equal(js_target(r)[i, kk], js_target(r2)[i, kk])
    # js lies between rloo and its target zbar, js-plugin between rloo and xctx
    tol = 1e-5 * (1 + r.abs().max()) if dtype == torch.float32 else 1e-12 * (1 + r.abs().max())
    for est, end in ((js_baseline(r), js_target(r)), (js_plugin_baseline(r), xctx_baseline(r))):
        lo = torch.minimum(rloo_baseline(r), end)
        hi = torch.maximum(rloo_baseline(r), end)
        assert ((est >= lo - tol) & (est <= hi + tol)).all()


# ---------------------------------------------------------------------------------------------
# (c) error of b_ik as an estimate of the context mean mu_i under the random-effects model
#
# Paired over the same simulated batches: for every grid point, the per-batch MSE of each baseline,
# and the mean and standard error of the per-batch difference to RLOO.

MSE_REPS = 1500
MSE_BS = (4, 8, 16)
MSE_KS = (2, 4)
RATIOS = {"gaussian": (0.0, 0.1, 1.0, 4.0, 16.0), "binary": (0.0, 0.1, 1.0, 4.0)}  # tau^2 / sigma^2
BINARY_MEAN = 0.3


def _simulate(kind: str, b: int, k: int, ratio: float, reps: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(mu [reps, B, 1], rewards [reps, B, K]) with tau^2/sigma^2 = ratio.

    gaussian: mu_i ~ N(0, ratio), r_ik ~ N(mu_i, 1). binary (0/1 rewards): p_i ~ Beta with mean 0.3 and
    alpha + beta = 1/ratio (then Var p / E[p(1-p)] = ratio), r_ik ~ Bernoulli(p_i)."""
    g = torch.Generator().manual_seed(seed)
    if kind == "gaussian":
        mu = torch.randn(reps, b, 1, generator=g, dtype=torch.float64) * ratio**0.5
        return mu, mu + torch.randn(reps, b, k, generator=g, dtype=torch.float64)
    if ratio == 0:
        p = torch.full((reps, b, 1), BINARY_MEAN, dtype=torch.float64)
    else:
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            beta = torch.distributions.Beta(torch.tensor(BINARY_MEAN / ratio), torch.tensor((1 - BINARY_MEAN) / ratio))
            p = beta.sample((reps, b, 1)).double()
    return p, (torch.rand(reps, b, k, generator=g, dtype=torch.float64) < p).double()


def _mse_point(kind: str, b: int, k: int, ratio: float, reps: int, seed: int) -> dict:
    mu, r = _simulate(kind, b, k, ratio, reps, seed)
    per_batch = {
        name: (torch.vmap(TENSOR_BASELINES[name])(r) - mu).square().mean(dim=(1, 2))
        for name in ("rloo", "xctx", "js", "js-plugin")
    }
    row = {"mse": {n: v.mean().item() for n, v in per_batch.items()}}
    if b >= 8:
        row["c"] = torch.vmap(js_shrinkage)(r).mean().item()
    for name in ("js", "js-plugin"):
        d = per_batch[name] - per_batch["rloo"]
        row[f"z_{name}"] = (d.mean() / (d.std() / reps**0.5)).item()  # paired standard errors above RLOO
    return row


@pytest.fixture(scope="module")
def mse_grid() -> dict[tuple, dict]:
    grid = {}
    seeds = itertools.count(2024)
    for kind, ratios in RATIOS.items():
        for b, k, ratio in itertools.product(MSE_BS, MSE_KS, ratios):
            grid[(kind, b, k, ratio)] = _mse_point(kind, b, k, ratio, MSE_REPS, next(seeds))
    return grid


@pytest.mark.slow  # the module's MSE grid: ~7 s once
@pytest.mark.parametrize("kind", list(RATIOS))
@pytest.mark.parametrize(
    "name",
    [
        "js",
        pytest.param("js-plugin", marks=pytest.mark.xfail(strict=True, reason="the paper's plug-in over-shrinks (E[1/chi^2])")),
    ],
)
def test_mse_not_above_rloo(mse_grid, kind, name):
    # the promise js makes: never worse than RLOO, at any B >= 4, K and tau^2/sigma^2 (3 paired standard
    # errors of slack, the differences are exact ties where tau^2 >> sigma^2). js-plugin breaks it: up to
    # several times RLOO's error at B = 4 and tau^2/sigma^2 >= 1
    bad = {key[1:]: round(row[f"z_{name}"], 1) for key, row in mse_grid.items() if key[0] == kind and row[f"z_{name}"] > 3}
    assert not bad, f"{name} above RLOO by more than 3 paired SE at (B, K, tau^2/sigma^2): {bad}"


@pytest.mark.xfail(
    strict=True,
    reason=(
        "known limit, not MC noise: 0/1 rewards whose contexts are nearly all-0 or all-1 (tau^2/sigma^2 = 16, B <= 16, "
        "K <= 4) leave the pooled within-context variance resting on one or two mixed contexts; js then costs 0.7-2.4% "
        "over RLOO (bench/results/baselines.json), down from 3-7% for the textbook factor nu/(nu+2)"
    ),
)
def test_mse_not_above_rloo_binary_near_deterministic():
    row = _mse_point("binary", 8, 2, 16.0, 3000, seed=77)
    assert row["z_js"] <= 3, row


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(RATIOS))
def test_js_gains_where_contexts_look_alike(mse_grid, kind):
    # and it is not RLOO in disguise: where contexts barely differ it removes most of RLOO's error
    for b, k in itertools.product((8, 16), MSE_KS):
        row = mse_grid[(kind, b, k, 0.0)]
        assert row["mse"]["js"] < 0.35 * row["mse"]["rloo"], (b, k, row)


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(RATIOS))
def test_js_not_above_xctx_where_contexts_differ(mse_grid, kind):
    for b, k in itertools.product(MSE_BS, MSE_KS):
        row = mse_grid[(kind, b, k, 4.0)]
        assert row["mse"]["js"] < row["mse"]["xctx"], (b, k, row)


@pytest.mark.slow
def test_shrinkage_tracks_regime(mse_grid):
    for kind, ratios in RATIOS.items():
        for b, k in itertools.product((8, 16), MSE_KS):
            c = [mse_grid[(kind, b, k, ratio)]["c"] for ratio in ratios]
            assert c[0] > 0.5 and c[-1] < 0.2 and all(x > y for x, y in zip(c, c[1:])), (kind, b, k, c)


# ---------------------------------------------------------------------------------------------
# (d) unbiased policy gradients on a softmax bandit with a closed-form gradient


def _bandit_gradients(baseline, b: int, k: int, reps: int, seed: int):
    """Per-replicate REINFORCE gradients [reps, A] for a shared-logit softmax bandit, and the truth.

    Context i plays arms a ~ softmax(theta + offset_i); reward r = q[i, a] + N(0, 1), with context
    levels that differ a lot (so baselines matter). J(theta) = mean_i sum_a pi_i(a) q[i, a], hence
    dJ/dtheta = mean_i pi_i * (q_i - pi_i . q_i). Estimator: mean_ik (r_ik - b_ik)(onehot(a_ik) - pi_i).
    """
    g = torch.Generator().manual_seed(seed)
    arms = 3
    theta = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64)
    offset = torch.randn(b, arms, generator=g, dtype=torch.float64)
    level = 3.0 * torch.randn(b, 1, generator=g, dtype=torch.float64)
    q = level + torch.randn(b, arms, generator=g, dtype=torch.float64)
    pi = torch.softmax(theta + offset, dim=-1)  # [B, A]
    true = (pi * (q - (pi * q).sum(-1, keepdim=True))).mean(0)

    a = torch.multinomial(pi.repeat(reps, 1), k, replacement=True, generator=g).reshape(reps, b, k)
    r = torch.gather(q.expand(reps, b, arms), 2, a) + torch.randn(reps, b, k, generator=g, dtype=torch.float64)
    adv = r - torch.vmap(baseline)(r)  # [reps, B, K]
    score = torch.nn.functional.one_hot(a, arms).to(r.dtype) - pi.unsqueeze(1)  # [reps, B, K, A]
    grads = (adv.unsqueeze(-1) * score).mean(dim=(1, 2))  # [reps, A]
    return grads, true


def _z_scores(grads: torch.Tensor, true: torch.Tensor) -> torch.Tensor:
    se = grads.std(dim=0) / grads.shape[0] ** 0.5
    return (grads.mean(dim=0) - true) / se


@pytest.mark.parametrize("b,k", [(3, 2), (6, 4)])
@pytest.mark.parametrize("name", list(TENSOR_BASELINES))
def test_policy_gradient_is_unbiased(name, b, k):
    grads, true = _bandit_gradients(TENSOR_BASELINES[name], b, k, reps=20000, seed=7 * b + k)
    z = _z_scores(grads, true)
    assert (z.abs() < 4).all(), (name, z, true)


def _random_bandit_error(baseline, b: int, k: int, reps: int, seed: int, level_sd: float = 3.0) -> torch.Tensor:
    """Per-replicate squared gradient error ||g - dJ/dtheta||^2 [reps] on the softmax bandit above, with
    the B contexts (arm offsets, levels, arm values) drawn afresh for every replicate: the error a
    baseline gives on average over contexts, as in training. Same draws for every baseline (paired)."""
    g = torch.Generator().manual_seed(seed)
    arms = 3
    theta = torch.tensor([0.3, -0.2, 0.1], dtype=torch.float64)
    offset = torch.randn(reps, b, arms, generator=g, dtype=torch.float64)
    q = level_sd * torch.randn(reps, b, 1, generator=g, dtype=torch.float64) + torch.randn(reps, b, arms, generator=g, dtype=torch.float64)
    pi = torch.softmax(theta + offset, dim=-1)  # [reps, B, A]
    true = (pi * (q - (pi * q).sum(-1, keepdim=True))).mean(1)  # [reps, A]
    a = torch.multinomial(pi.reshape(-1, arms), k, replacement=True, generator=g).reshape(reps, b, k)
    r = torch.gather(q, 2, a) + torch.randn(reps, b, k, generator=g, dtype=torch.float64)
    adv = r - torch.vmap(baseline)(r)
    score = torch.nn.functional.one_hot(a, arms).to(r.dtype) - pi.unsqueeze(2)
    grads = (adv.unsqueeze(-1) * score).mean(dim=(1, 2))
    return (grads - true).square().sum(-1)


@pytest.mark.parametrize("b,k", [(4, 2), (4, 4), (6, 2)])
@pytest.mark.parametrize(
    "name",
    ["js", pytest.param("js-plugin", marks=pytest.mark.xfail(strict=True, reason="plug-in: 1.03-1.25x RLOO's gradient error here"))],
)
def test_gradient_error_not_above_rloo(name, b, k):
    # small batches with contexts far apart (level sd 3 vs noise 1) are where the plug-in over-shrinks
    seed = 31 * b + k
    err = _random_bandit_error(TENSOR_BASELINES[name], b, k, reps=20000, seed=seed)
    ref = _random_bandit_error(rloo_baseline, b, k, reps=20000, seed=seed)
    d = err - ref
    z = (d.mean() / (d.std() / d.numel() ** 0.5)).item()
    assert z <= 3, (name, b, k, z, (err.mean() / ref.mean()).item())


def test_bandit_detects_a_biased_baseline():
    # control: a context mean that includes r_ik shrinks the expected gradient by (1 - 1/K)
    def own_mean(r):
        return r.mean(dim=1, keepdim=True).expand_as(r)

    grads, true = _bandit_gradients(own_mean, 6, 4, reps=20000, seed=7 * 6 + 4)
    assert (_z_scores(grads, true).abs() > 4).any()


def test_baselines_reduce_gradient_variance():
    # what the baselines are for: with context levels far apart, the context-aware baselines cut the
    # gradient variance several-fold against none and xctx (one level for all contexts)
    var = {}
    for name, fn in TENSOR_BASELINES.items():
        grads, _ = _bandit_gradients(fn, 6, 4, reps=20000, seed=99)
        var[name] = grads.var(dim=0).sum().item()
    assert max(var["js"], var["rloo"]) < 0.5 * min(var["none"], var["xctx"]), var


# ---------------------------------------------------------------------------------------------
# (e) errors


def _one_line(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("name", ["rloo", "xctx", "js", "js-plugin"])
def test_too_few_samples(name):
    with pytest.raises(BaselineError) as exc:
        compute_baseline(name, torch.zeros(4, 1))
    msg = _one_line(exc)
    assert name in msg and "K=1" in msg and "2 samples" in msg
    assert isinstance(exc.value, JsbenchError) and isinstance(exc.value, ValueError)
    with pytest.raises(BaselineError):
        validate_baseline(name, 8, 1)
    with pytest.raises(ValueError):
        TENSOR_BASELINES[name](torch.zeros(4, 1))


@pytest.mark.parametrize("name", ["js", "js-plugin"])
@pytest.mark.parametrize("contexts", [1, 2])
def test_js_needs_three_contexts(name, contexts):
    with pytest.raises(BaselineError) as exc:
        compute_baseline(name, torch.zeros(contexts, 4))
    msg = _one_line(exc)
    assert repr(name) in msg and f"B={contexts}" in msg and "3 contexts" in msg
    with pytest.raises(BaselineError):
        validate_baseline(name, contexts, 4)
    for fn in (SHRINKAGE[name], TENSOR_BASELINES[name], lambda r: js_shrink(r, 0.5), js_target):
        with pytest.raises(ValueError):
            fn(torch.zeros(contexts, 4))
    validate_baseline(name, 3, 2)  # the smallest valid shape
    for name in ("none", "rloo", "xctx"):  # only js and js-plugin need several contexts
        validate_baseline(name, contexts, 2)
        compute_baseline(name, torch.zeros(contexts, 2))


def test_unknown_baseline_and_bad_shapes():
    with pytest.raises(BaselineError) as exc:
        compute_baseline("ppo", torch.zeros(4, 2))
    msg = _one_line(exc)
    assert "'ppo'" in msg and all(name in msg for name in BASELINES)
    with pytest.raises(BaselineError):
        validate_baseline("ppo", 4, 2)
    with pytest.raises(BaselineError):
        advantages("ppo", torch.zeros(4, 2))
    with pytest.raises(BaselineError) as exc:
        compute_baseline("rloo", torch.zeros(8))
    assert "[contexts, samples]" in _one_line(exc)
    validate_baseline("none", 1, 1)  # plain REINFORCE runs on anything


# ---------------------------------------------------------------------------------------------
# (f) jspo: JSPO's two-level leave-one-out shrinkage (arXiv 2511.03710, its official implementation)


def _brute_jspo(r: list[list[float]]) -> list[list[float]]:
    """The definition, one sample at a time: rloo within context i, every shrinkage statistic over j != i."""
    out = []
    for i, row in enumerate(r):
        others = [x for j, x in enumerate(r) if j != i]
        k = len(row)
        means = [sum(x) / k for x in others]
        m = sum(means) / len(means)
        v2 = sum(sum((y - sum(x) / k) ** 2 for y in x) / (k - 1) / k for x in others) / len(others)
        s2 = sum((mu - m) ** 2 for mu in means) / len(means)
        lam = v2 / (v2 + s2 + 1e-6)
        out.append([(1 - lam) * sum(row[l] for l in range(k) if l != kk) / (k - 1) + lam * m for kk in range(k)])
    return out


@pytest.mark.parametrize("b,k", [(2, 2), (3, 4), (7, 3)])
def test_jspo_matches_its_definition(b, k):
    r = _rewards(b, k, seed=10 * b + k)
    torch.testing.assert_close(jspo_baseline(r), torch.tensor(_brute_jspo(r.tolist()), dtype=r.dtype), rtol=1e-12, atol=1e-12)
    lam = jspo_shrinkage(r)
    assert lam.shape == (b, 1) and ((lam >= 0) & (lam < 1)).all()


def test_jspo_leaves_out_the_own_reward_and_the_own_context_in_its_shrinkage():
    r = _rewards(6, 3, seed=21)
    for i, kk in itertools.product(range(6), range(3)):
        r2 = r.clone()
        r2[i, kk] += 37.5
        assert torch.equal(jspo_baseline(r)[i, kk], jspo_baseline(r2)[i, kk])  # b_ik never uses r_ik
        assert torch.equal(jspo_shrinkage(r)[i], jspo_shrinkage(r2)[i])  # lam_i never uses context i
    with pytest.raises(BaselineError) as exc:
        compute_baseline("jspo", torch.zeros(1, 4))
    assert "B=1" in _one_line(exc)
