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
    js_shrink,
    js_shrinkage,
    none_baseline,
    rloo_baseline,
    validate_baseline,
    xctx_baseline,
)

# the plain [B, K] -> [B, K] form of every baseline, for torch.vmap over Monte-Carlo replicates
TENSOR_BASELINES = {"none": none_baseline, "rloo": rloo_baseline, "xctx": xctx_baseline, "js": js_baseline}


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


def _brute_lam(r: list[list[float]]) -> list[list[float]]:
    """The documented js shrinkage, one (i, k) at a time from the other rewards only."""
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
def test_js_shrinkage_matches_brute_force(b, k):
    r = _rewards(b, k, seed=100 + 10 * b + k)
    lam = js_shrinkage(r)
    torch.testing.assert_close(lam, torch.tensor(_brute_lam(r.tolist()), dtype=r.dtype))
    assert ((lam >= 0) & (lam <= 1)).all()
    expected = lam * xctx_baseline(r) + (1 - lam) * rloo_baseline(r)
    torch.testing.assert_close(js_baseline(r), expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_js_endpoints_are_exactly_rloo_and_xctx(dtype):
    r = _rewards(6, 4, seed=3, dtype=dtype)
    assert torch.equal(js_shrink(r, 0.0), rloo_baseline(r))
    assert torch.equal(js_shrink(r, 1.0), xctx_baseline(r))
    assert torch.equal(js_baseline(r, shrinkage=0.0), rloo_baseline(r))
    assert torch.equal(js_baseline(r, shrinkage=torch.ones(6, 4, dtype=dtype)), xctx_baseline(r))
    # a per-sample lam mixes per sample
    lam = torch.tensor([0.0, 1.0, 0.0, 1.0], dtype=dtype).expand(6, 4)
    mixed = js_shrink(r, lam)
    assert torch.equal(mixed[:, 0], rloo_baseline(r)[:, 0]) and torch.equal(mixed[:, 1], xctx_baseline(r)[:, 1])
    for name in BASELINES:
        assert compute_baseline(name, r).baseline.dtype == dtype


def test_registry_results_and_advantages():
    r = _rewards(5, 3, seed=4)
    assert list(BASELINES) == ["none", "rloo", "xctx", "js"]
    for name, fn in TENSOR_BASELINES.items():
        res = compute_baseline(name, r)
        assert isinstance(res, BaselineResult)
        assert torch.equal(res.baseline, fn(r))
        adv, shrink = advantages(name, r)
        assert torch.equal(adv, r - res.baseline)
        assert shrink == res.shrinkage
        if name == "js":
            assert shrink == pytest.approx(js_shrinkage(r).mean().item()) and 0.0 <= shrink <= 1.0
        else:
            assert shrink is None


def test_degenerate_rewards():
    # no spread at all: lam = 1 by convention and every baseline is the common value
    r = torch.full((4, 3), 0.5)
    assert torch.equal(js_shrinkage(r), torch.ones(4, 3))
    torch.testing.assert_close(js_baseline(r), r)
    # no within-context noise but distinct contexts: nothing to shrink, lam = 0, js is rloo
    r = torch.arange(4.0).unsqueeze(1).expand(4, 3).contiguous()
    assert torch.equal(js_shrinkage(r), torch.zeros(4, 3))
    assert torch.equal(js_baseline(r), rloo_baseline(r))
    # integer rewards are treated as floats; rewards carrying gradients give a detached baseline
    assert compute_baseline("js", torch.ones(3, 2, dtype=torch.int64)).baseline.is_floating_point()
    rg = _rewards(3, 2, seed=5).requires_grad_()
    assert not compute_baseline("js", rg).baseline.requires_grad


# ---------------------------------------------------------------------------------------------
# (b) leave-one-out: b_ik is a function of the other rewards only (bit for bit, by construction)


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
    assert torch.equal(js_shrinkage(r)[i, kk], js_shrinkage(r2)[i, kk])
    # and js always lies between rloo and xctx
    lo = torch.minimum(rloo_baseline(r), xctx_baseline(r))
    hi = torch.maximum(rloo_baseline(r), xctx_baseline(r))
    js = js_baseline(r)
    tol = 1e-5 * (1 + r.abs().max()) if dtype == torch.float32 else 1e-12 * (1 + r.abs().max())
    assert ((js >= lo - tol) & (js <= hi + tol)).all()


# ---------------------------------------------------------------------------------------------
# (c) error of b_ik as an estimate of the context mean mu_i under the random-effects model

REPS = 4000
MSE_B = 16
TAU2 = {"low": 0.01, "medium": 1.0, "high": 100.0}  # tau^2 / sigma^2, sigma = 1


@pytest.fixture(scope="module")
def mse_table() -> dict[tuple[int, str], dict[str, float]]:
    """MSE E[(b_ik - mu_i)^2] per (K, regime) and baseline; 'oracle' is js with the true lam."""
    table = {}
    for (k, regime), seed in zip(itertools.product((2, 4), TAU2), itertools.count(2024)):
        tau2 = TAU2[regime]
        g = torch.Generator().manual_seed(seed)
        mu = torch.randn(REPS, MSE_B, 1, generator=g, dtype=torch.float64) * tau2**0.5
        r = mu + torch.randn(REPS, MSE_B, k, generator=g, dtype=torch.float64)
        lam = torch.vmap(js_shrinkage)(r)
        true_lam = (1 / (k - 1)) / (1 / (k - 1) + tau2)
        estimates = {
            "rloo": torch.vmap(rloo_baseline)(r),
            "xctx": torch.vmap(xctx_baseline)(r),
            "js": torch.vmap(js_shrink)(r, lam),  # = js_baseline, lam computed once
            "oracle": torch.vmap(lambda x: js_shrink(x, true_lam))(r),
        }
        row = {name: ((b - mu) ** 2).mean().item() for name, b in estimates.items()}
        row["mean_lam"] = lam.mean().item()
        table[(k, regime)] = row
    return table


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("regime", list(TAU2))
def test_js_mse_not_above_rloo(mse_table, k, regime):
    # James-Stein dominance: shrinking the leave-one-out mean does not cost, at any tau (no slack). At
    # high tau js ~ rloo and the gain is small (0.1-0.5%), but it is systematic: the paired difference
    # sits 1.5-7 standard errors below zero over 20 seeds tried, never above
    row = mse_table[(k, regime)]
    assert row["js"] <= row["rloo"], row


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("regime", ["medium", "high"])
def test_js_mse_not_above_xctx(mse_table, k, regime):
    row = mse_table[(k, regime)]
    assert row["js"] <= row["xctx"], row


@pytest.mark.xfail(
    strict=True,
    reason=(
        "known limit, not MC noise: at tau^2/sigma^2 = 0.01 XCTX's model (one mean for all) is nearly exact, "
        "and lam estimated from B-1 = 15 contexts falls below 1 often enough to cost js 37% (K=4) to 73% (K=2) "
        "over XCTX (paired z ~ 30). Any estimator shrinking hard enough to fix this loses to RLOO at "
        "tau^2/sigma^2 = 1 (K=4); with the true lam (test_oracle_js_beats_both) js wins."
    ),
)
@pytest.mark.parametrize("k", [2, 4])
def test_js_mse_not_above_xctx_near_homogeneous(mse_table, k):
    row = mse_table[(k, "low")]
    assert row["js"] <= row["xctx"], row


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("regime", list(TAU2))
def test_oracle_js_beats_both(mse_table, k, regime):
    # with the true lam the interpolation is never worse than either end (no slack needed: the
    # smallest margin, low tau vs XCTX, is 0.2-1.1% at ~15 paired standard errors)
    row = mse_table[(k, regime)]
    assert row["oracle"] <= min(row["rloo"], row["xctx"]), row


def test_estimated_lam_tracks_regime(mse_table):
    for k in (2, 4):
        lams = [mse_table[(k, regime)]["mean_lam"] for regime in TAU2]
        assert lams[0] > 0.8 and lams[2] < 0.02 and lams[0] > lams[1] > lams[2], lams


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


@pytest.mark.parametrize("name", ["rloo", "xctx", "js"])
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


@pytest.mark.parametrize("contexts", [1, 2])
def test_js_needs_three_contexts(contexts):
    with pytest.raises(BaselineError) as exc:
        compute_baseline("js", torch.zeros(contexts, 4))
    msg = _one_line(exc)
    assert "js" in msg and f"B={contexts}" in msg and "3 contexts" in msg
    with pytest.raises(ValueError):
        js_shrinkage(torch.zeros(contexts, 4))
    with pytest.raises(ValueError):
        js_shrink(torch.zeros(contexts, 4), 0.5)
    validate_baseline("js", 3, 2)  # the smallest valid shape
    for name in ("none", "rloo", "xctx"):  # only js needs several contexts
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
