"""Reward baselines for REINFORCE: pure functions of a [B, K] reward tensor.

Rewards r[i, k] come from B contexts (prompt + initial noise) with K sampled schedules each. A
baseline b[i, k] is subtracted from r[i, k] before it multiplies grad log pi(a_ik | context i).

Why every baseline here is *leave-one-out*: the policy gradient E[(r_ik - b_ik) grad log pi(a_ik)]
equals the true gradient exactly when b_ik does not depend on a_ik. The K samples are drawn
independently, so any function of the *other* rewards qualifies, but a baseline that uses r_ik itself
(a plain batch mean, or a variance estimated over all rewards) biases the gradient by
E[b_ik grad log pi(a_ik)] != 0. So each b_ik here is computed from r with r_ik removed, every statistic
included, and the tests check it by perturbing r_ik.

- ``none``: b = 0. Unbiased, high variance.
- ``rloo``: b_ik = mean of the other K-1 rewards of context i. Tracks context i's mean reward, but its
  own noise is sigma^2/(K-1), large for small K.
- ``xctx``: b_ik = mean of every other reward in the batch. Low noise, but it ignores that contexts
  differ: its error is the spread of context means tau^2.
- ``js``: the James-Stein compromise. Under the random-effects model mu_i ~ N(m, tau^2),
  r_ik | mu_i ~ N(mu_i, sigma^2), the best linear predictor of mu_i from rloo_ik and m is (m taken as known)
  ``b = lam * m + (1 - lam) * rloo`` with lam = (sigma^2/(K-1)) / (sigma^2/(K-1) + tau^2), the share of
  rloo's variance that is noise. lam = 0 is RLOO, lam = 1 is XCTX; js interpolates, shrinking hard when
  contexts look alike and trusting each context when they differ. sigma^2 and tau^2 are estimated
  from the batch, again leaving r_ik out, with the positive part max(0, .) on tau^2 (James-Stein).

What js buys, measured on simulated random-effects rewards (B = 16, tests/test_baselines.py): its
error E[(b_ik - mu_i)^2] is below RLOO's at every tau^2/sigma^2, and below XCTX's except when contexts
differ little (tau^2/sigma^2 below about 0.2 for K = 2, 0.07 for K = 4): there XCTX's one-mean model is
nearly right, and the noise in lam estimated from B - 1 contexts costs js a share of RLOO's much larger
error (+73% over XCTX at tau^2/sigma^2 = 0.01, K = 2). With the true lam js beats both everywhere; the
gap is the price of estimating lam.

Under data parallelism these are computed on the all-gathered global [B, K] rewards.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from jsbench import JsbenchError

__all__ = [
    "BaselineError",
    "BaselineResult",
    "BASELINES",
    "available_baselines",
    "validate_baseline",
    "compute_baseline",
    "advantages",
    "none_baseline",
    "rloo_baseline",
    "xctx_baseline",
    "js_shrinkage",
    "js_shrink",
    "js_baseline",
]


class BaselineError(JsbenchError, ValueError):
    """An unknown baseline, or a batch shape that a baseline cannot work with."""


@dataclass(frozen=True)
class BaselineResult:
    """A [B, K] baseline and, for ``js``, the batch-mean estimated shrinkage lam (None otherwise)."""

    baseline: torch.Tensor
    shrinkage: float | None = None


# smallest K (samples per context) and B (contexts) each baseline needs
_MIN_SAMPLES = {"none": 1, "rloo": 2, "xctx": 2, "js": 2}
_MIN_CONTEXTS = {"none": 1, "rloo": 1, "xctx": 1, "js": 3}
_WHY_SAMPLES = {
    "rloo": " (it averages the other samples of the same context)",
    "js": " (it shrinks the leave-one-out mean of the other samples of the same context)",
}


def available_baselines() -> list[str]:
    return list(BASELINES)


def _check_name(name: str) -> None:
    if name not in BASELINES:
        raise BaselineError(f"unknown baseline {name!r}; choose one of: {', '.join(BASELINES)}")


def validate_baseline(name: str, contexts: int, samples: int) -> None:
    """Fail early, with one line, if baseline `name` cannot run on `contexts` x `samples` rewards.

    Meant to be called on the configuration before any sampling (B = global batch of contexts).
    """
    _check_name(name)
    if samples < _MIN_SAMPLES[name]:
        raise BaselineError(
            f"baseline {name!r} needs at least {_MIN_SAMPLES[name]} samples per context"
            f"{_WHY_SAMPLES.get(name, '')}, got K={samples}"
        )
    if contexts < _MIN_CONTEXTS[name]:
        raise BaselineError(
            f"baseline {name!r} needs at least {_MIN_CONTEXTS[name]} contexts per (global) batch to estimate the "
            f"between-context variance leaving one context out, got B={contexts}"
        )


def _rewards(name: str, rewards: torch.Tensor) -> torch.Tensor:
    """Check shape and return a detached floating [B, K] tensor (baselines never carry gradients)."""
    if not isinstance(rewards, torch.Tensor) or rewards.dim() != 2:
        shape = tuple(rewards.shape) if isinstance(rewards, torch.Tensor) else type(rewards).__name__
        raise BaselineError(f"baseline {name!r} needs rewards of shape [contexts, samples], got {shape}")
    validate_baseline(name, rewards.shape[0], rewards.shape[1])
    r = rewards.detach()
    if not r.is_floating_point():
        r = r.to(torch.get_default_dtype())
    return r


def none_baseline(rewards: torch.Tensor) -> torch.Tensor:
    """b = 0: plain REINFORCE."""
    r = _rewards("none", rewards)
    return torch.zeros_like(r)


def _sum_others(x: torch.Tensor, dim: int) -> torch.Tensor:
    """out[..., j, ...] = sum of x along `dim` leaving index j out.

    Built from prefix and suffix sums rather than `total - x`, so a huge x_j cannot swamp the sum of
    the others by cancellation: the result is computed from the other entries only.
    """
    n = x.shape[dim]
    zero = torch.zeros_like(x.narrow(dim, 0, 1))
    prefix = torch.cumsum(x, dim).narrow(dim, 0, n - 1)
    suffix = torch.flip(torch.cumsum(torch.flip(x, (dim,)), dim), (dim,)).narrow(dim, 1, n - 1)
    return torch.cat([zero, prefix], dim) + torch.cat([suffix, zero], dim)


def _rloo(r: torch.Tensor) -> torch.Tensor:
    return _sum_others(r, 1) / (r.shape[1] - 1)


def _xctx(r: torch.Tensor) -> torch.Tensor:
    n = r.numel()
    return _sum_others(r.reshape(-1), 0).reshape(r.shape) / (n - 1)


def rloo_baseline(rewards: torch.Tensor) -> torch.Tensor:
    """b_ik = mean_{l != k} r_il: the context's own mean, leaving r_ik out (REINFORCE leave-one-out)."""
    return _rloo(_rewards("rloo", rewards))


def xctx_baseline(rewards: torch.Tensor) -> torch.Tensor:
    """b_ik = mean of all B*K - 1 other rewards: one shared level for every context, leaving r_ik out."""
    return _xctx(_rewards("xctx", rewards))


def js_shrink(rewards: torch.Tensor, lam: torch.Tensor | float) -> torch.Tensor:
    """The js baseline for a given shrinkage: b = lam * xctx + (1 - lam) * rloo.

    `lam` is a float or anything broadcastable to [B, K]. Written as a convex combination (not
    m + (1 - lam)(rloo - m)) so that lam = 0 gives RLOO and lam = 1 gives XCTX bit for bit. The result
    stays leave-one-out as long as lam_ik itself does not depend on r_ik.
    """
    r = _rewards("js", rewards)
    lam = torch.as_tensor(lam, dtype=r.dtype, device=r.device).clamp(0.0, 1.0)
    return lam * _xctx(r) + (1.0 - lam) * _rloo(r)


def js_shrinkage(rewards: torch.Tensor) -> torch.Tensor:
    """Estimated James-Stein shrinkage lam_ik in [0, 1], [B, K], each computed without r_ik.

    lam = (s2 / (K-1)) / (s2 / (K-1) + delta2), delta2 = max(0, V - s2 / K), where, for sample (i, k):
    - s2 is the pooled within-context variance (an estimate of sigma^2): squared deviations of every
      other context j != i around its own mean, plus those of context i's other K-1 samples around
      their mean (rloo_ik), over their (B-1)(K-1) + (K-2) degrees of freedom;
    - V is the sample variance of the B-1 context means of the other contexts j != i, an estimate of
      tau^2 + sigma^2 / K, so delta2 estimates tau^2 (positive part, as in positive-part James-Stein).
    When s2 / (K-1) + delta2 is 0 (no spread at all) lam is 1. Needs B >= 3 and K >= 2.

    Every sum that enters lam_ik is formed from the other rewards only (prefix/suffix sums and masked
    tables, never `total - r_ik`), so lam_ik and b_ik do not depend on r_ik even in the last bit.
    """
    r = _rewards("js", rewards)
    b, k = r.shape
    # within-context sums of squares, two-pass (deviations from each context's own mean)
    mean_i = r.mean(dim=1)  # [B]
    ss_i = (r - mean_i.unsqueeze(1)).square().sum(dim=1)  # [B]
    ss_others = _sum_others(ss_i, 0).unsqueeze(1)  # [B, 1]: contexts j != i
    # context i without sample k: the other K-1 samples around their own mean, which is rloo_ik
    others_k = ~torch.eye(k, dtype=torch.bool, device=r.device)  # [k, l] = (l != k)
    zero = torch.zeros((), dtype=r.dtype, device=r.device)
    dev = torch.where(others_k, r.unsqueeze(1) - _rloo(r).unsqueeze(2), zero)
    ss_i_minus_k = dev.square().sum(dim=2)  # [B, K]
    df = (b - 1) * (k - 1) + (k - 2)
    s2 = (ss_others + ss_i_minus_k) / df  # [B, K], estimates sigma^2

    # sample variance of the B-1 other context means, two-pass around their own mean; a [B, B] table
    # (row i: deviations of the means j != i) costs B^2 memory, small for any realistic global batch
    others_j = ~torch.eye(b, dtype=torch.bool, device=r.device)
    centre = _sum_others(mean_i, 0) / (b - 1)  # [B]
    dev_b = torch.where(others_j, mean_i.unsqueeze(0) - centre.unsqueeze(1), zero)
    v = (dev_b.square().sum(dim=1) / (b - 2)).unsqueeze(1)  # [B, 1], estimates tau^2 + sigma^2 / K

    noise = s2 / (k - 1)  # variance of rloo_ik around mu_i
    delta2 = (v - s2 / k).clamp(min=0.0)  # [B, K], estimates tau^2 (positive part)
    denom = noise + delta2
    positive = denom > 0
    one = torch.ones_like(denom)
    lam = torch.where(positive, noise / torch.where(positive, denom, one), one)
    return lam.clamp(0.0, 1.0)


def js_baseline(rewards: torch.Tensor, shrinkage: torch.Tensor | float | None = None) -> torch.Tensor:
    """The James-Stein baseline; `shrinkage` overrides the estimated lam (0 -> RLOO, 1 -> XCTX)."""
    lam = js_shrinkage(rewards) if shrinkage is None else shrinkage
    return js_shrink(rewards, lam)


def _none(rewards: torch.Tensor) -> BaselineResult:
    return BaselineResult(none_baseline(rewards), None)


def _rloo_result(rewards: torch.Tensor) -> BaselineResult:
    return BaselineResult(rloo_baseline(rewards), None)


def _xctx_result(rewards: torch.Tensor) -> BaselineResult:
    return BaselineResult(xctx_baseline(rewards), None)


def _js_result(rewards: torch.Tensor) -> BaselineResult:
    lam = js_shrinkage(rewards)
    return BaselineResult(js_shrink(rewards, lam), float(lam.mean()))


BASELINES: dict[str, Callable[[torch.Tensor], BaselineResult]] = {
    "none": _none,
    "rloo": _rloo_result,
    "xctx": _xctx_result,
    "js": _js_result,
}


def compute_baseline(name: str, rewards: torch.Tensor) -> BaselineResult:
    """Baseline `name` for [B, K] rewards; `shrinkage` is the batch-mean lam for js, else None."""
    _check_name(name)
    return BASELINES[name](rewards)


def advantages(name: str, rewards: torch.Tensor) -> tuple[torch.Tensor, float | None]:
    """(r - b, shrinkage): the [B, K] advantages REINFORCE multiplies with grad log pi."""
    result = compute_baseline(name, rewards)
    r = rewards.detach()
    if not r.is_floating_point():
        r = r.to(result.baseline.dtype)
    return r - result.baseline, result.shrinkage
