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
- ``js``: positive-part James-Stein with an estimated grand mean (Efron-Morris), leaving r_ik out.
  For sample (i, k) the B context means are known up to noise: the other contexts' full means
  ybar_j (variance sigma^2/K each) and context i's leave-one-out mean R = rloo_ik (variance
  sigma^2/(K-1)). Write z for these B numbers (R in context i's place), zbar = mean(z), and
  S = sum_j (z_j - zbar)^2 = sum_{j != i} (ybar_j - ybar_{-i})^2 + (B-1)/B (R - ybar_{-i})^2
  (ybar_{-i} = mean of the other contexts' means; the second term is context i's own deviation, the
  Stein self-correction that keeps an outlying context from being pulled in). Then
      c = min(1, (B - 3) * f * (s2 / (K - 1)) / S),     b_ik = c * zbar + (1 - c) * R,
  with s2 the pooled within-context variance without r_ik (nu = B(K-1) - 1 degrees of freedom) and
  f = nu/(nu + 2) the classical factor for an estimated sigma^2 (the multiplier a minimising
  E(a s2 - sigma^2)^2 is sigma^4 / (sigma^4 + Var s2), = nu/(nu+2) for Gaussian rewards). Why this
  and not a plug-in lam: E[1/chi^2_m] = 1/(m - 2), so (B - 3)/S is the unbiased estimate of
  1/(tau^2 + sigma^2/(K-1)) over the B values, while a plug-in built from the other B - 1 contexts
  alone over-shrinks and hands an outlying context XCTX's full error (``js-plugin`` below).
  One refinement of ours over the textbook rule: f uses the *effective* degrees of freedom of s2
  (Satterthwaite, nu_eff = 2 s2^2 / Var(s2), Var(s2) estimated from how the within-context sums of
  squares of the other contexts vary), capped at nu. Gaussian rewards give nu_eff ~ nu (no change);
  0/1 rewards whose contexts are mostly all-0 or all-1 make s2 rest on a few mixed contexts, and
  there the textbook rule shrinks too often by too much (about 1.07x RLOO's MSE at B = 8, K = 2,
  tau^2/sigma^2 = 16; this version 1.02x). At B = 3, c = 0 and js is exactly RLOO.
- ``js-plugin``: the paper's plug-in: b = lam * xctx + (1 - lam) * rloo with
  lam = (s2/(K-1)) / (s2/(K-1) + delta2), delta2 = max(0, V - s2/K) from the sample variance V of the
  other B - 1 context means. Kept for comparison: it can be many times worse than RLOO (B <= 8, or
  0/1 rewards), see scripts/bench_baselines.py.

What js buys, measured on simulated random-effects rewards (`python scripts/bench_baselines.py --write`,
bench/results/baselines.json; the tests in tests/test_baselines.py check it): its error
E[(b_ik - mu_i)^2] is below RLOO's with Gaussian rewards at every B >= 4, K in {2, 4, 8} and
tau^2/sigma^2 in [0, 16] (at most 0.997x), far below it when contexts look alike (0.10x at B = 16, K = 4,
tau = 0); with 0/1 rewards the same except where contexts are nearly all-0 or all-1 (tau^2/sigma^2 = 16)
at B <= 16, K <= 4: 1.007-1.024x RLOO there (the plug-in: up to 35x). Where contexts differ little,
XCTX's single mean is nearly exact and js pays for estimating c: 1.2-3x js-plugin's error at
tau^2/sigma^2 <= 0.01, B >= 8 (both far below RLOO).

- ``jspo``: the James-Stein baseline of JSPO ("Shrinking the Variance", Zeng, Zhou, Arora, Zanette,
  arXiv 2511.03710), as its official implementation (github.com/guanning03/JSPO-Official,
  verl/trainer/ppo/core_algos.py, `compute_jspo_outcome_advantage`) defines it: two levels of leaving out.
  The sample's own context keeps RLOO (r_ik left out); every statistic of the shrinkage leaves the whole
  context i out. Over the other contexts j != i: m = mean of their rewards, v2 = mean of their
  var_j / K (unbiased sample variance of context j over K: the noise of a context mean), s2 = mean of
  (ybar_j - m)^2 (their means' spread, noise included); lam = v2 / (v2 + s2 + 1e-6) and
  b_ik = (1 - lam) * rloo_ik + lam * m. Unlike js-plugin, the target m excludes context i entirely, and
  lam compares the noise of a K-sample mean (not of rloo's K-1) with the raw spread of the means.

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
    "Baseline",
    "BASELINES",
    "BASELINE_VALUES",
    "BASELINE_GROUP",
    "available_baselines",
    "baseline_record",
    "registered_baselines",
    "validate_baseline",
    "compute_baseline",
    "advantages",
    "none_baseline",
    "rloo_baseline",
    "xctx_baseline",
    "js_shrinkage",
    "js_target",
    "js_baseline",
    "js_shrink",
    "js_plugin_shrinkage",
    "js_plugin_baseline",
    "jspo_shrinkage",
    "jspo_baseline",
]


class BaselineError(JsbenchError, ValueError):
    """An unknown baseline, or a batch shape that a baseline cannot work with."""


@dataclass(frozen=True)
class BaselineResult:
    """A [B, K] baseline and, for ``js`` / ``js-plugin``, the batch-mean estimated shrinkage (None otherwise)."""

    baseline: torch.Tensor
    shrinkage: float | None = None


BASELINE_GROUP = "jsbench.baselines"  # the entry-point group of other packages' baselines


@dataclass(frozen=True)
class Baseline:
    """What a baseline declares. `values(rewards [B, K]) -> [B, K]` (torch.vmap-able: the lab simulates with
    it); `result(rewards) -> BaselineResult` when it also reports a shrinkage (else the values alone); the
    smallest samples per context K and contexts B it runs on, each with why (`validate_baseline`'s one line);
    `leave_one_out`: b_ik does not depend on r_ik (the protocol test perturbs r_ik to check it); `lab_order`:
    its place in the estimator lab and in listings; `shrinkage`: it estimates a shrinkage (reported)."""

    name: str
    values: Callable[[torch.Tensor], torch.Tensor]
    result: Callable[[torch.Tensor], BaselineResult] | None = None
    min_samples: int = 1
    min_contexts: int = 1
    why_samples: str = ""
    why_contexts: str = ""
    description: str = ""
    lab_order: float = 100
    shrinkage: bool = False
    leave_one_out: bool = True
    origin: str = "jsbench"

    def compute(self, rewards: torch.Tensor) -> BaselineResult:
        if self.result is not None:
            return self.result(rewards)
        validate_baseline(self.name, *rewards.shape) if isinstance(rewards, torch.Tensor) and rewards.dim() == 2 else None
        return BaselineResult(self.values(rewards), None)


_PLUGINS: dict[str, Baseline] = {}


def _plugin_baseline(name: str) -> "Baseline | None":
    """Plugin `name`'s record (entry-point group jsbench.baselines), loaded once; None if no package declares it."""
    from jsbench.registry import plugin_record

    def admit(entry, record) -> Baseline:
        if not isinstance(record, Baseline) or record.name != name or not callable(record.values):
            raise entry.refuse(f"names {record!r}, not a jsbench.baselines.Baseline named {name!r} with callable values", BaselineError)
        return Baseline(**{**record.__dict__, "origin": entry.origin})

    return plugin_record(BASELINE_GROUP, name, _PLUGINS, BaselineError, admit)


def baseline_record(name: str) -> "Baseline":
    """The declaration of baseline `name`: jsbench's, else an installed plugin's."""
    record = BASELINES.get(name) or _plugin_baseline(name)
    if record is None:
        raise BaselineError(f"unknown baseline {name!r}; choose one of: {', '.join(available_baselines())}")
    return record


def available_baselines() -> list[str]:
    """jsbench's baselines in lab order, then the installed plugins' (by name, not loaded)."""
    from jsbench.registry import plugin_entries

    return list(BASELINES) + [e.name for e in plugin_entries(BASELINE_GROUP) if e.name not in BASELINES]


def registered_baselines(errors: list[str] | None = None) -> list["Baseline"]:
    """Every baseline's record in estimator-lab order (jsbench's, then the plugins'). A plugin that does not
    load is left out with its one line appended to `errors` (raised when `errors` is None)."""
    from jsbench.registry import load_each

    return sorted(load_each(available_baselines(), baseline_record, errors), key=lambda b: (b.lab_order, b.name))


def validate_baseline(name: str, contexts: int, samples: int) -> None:
    """Fail early, with one line, if baseline `name` cannot run on `contexts` x `samples` rewards.

    Meant to be called on the configuration before any sampling (B = global batch of contexts).
    """
    record = baseline_record(name)
    if samples < record.min_samples:
        raise BaselineError(
            f"baseline {name!r} needs at least {record.min_samples} samples per context"
            f"{record.why_samples}, got K={samples}"
        )
    if contexts < record.min_contexts:
        raise BaselineError(
            f"baseline {name!r} needs at least {record.min_contexts} contexts per (global) batch"
            f"{record.why_contexts}, got B={contexts}"
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


def _masked_ss_others(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For a [B] vector: (mean of x_j over j != i, sum over j != i of (x_j - that mean)^2), each [B].

    Two-pass on a [B, B] table whose row i holds the deviations of the entries j != i (B^2 memory, small
    for any realistic global batch); entry i never enters row i, not even multiplied by zero."""
    b = x.shape[0]
    centre = _sum_others(x, 0) / (b - 1)
    others = ~torch.eye(b, dtype=torch.bool, device=x.device)
    dev = torch.where(others, x.unsqueeze(0) - centre.unsqueeze(1), torch.zeros((), dtype=x.dtype, device=x.device))
    return centre, dev.square().sum(dim=1)


def _js_parts(r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(c, zbar, R), each [B, K]: the Efron-Morris shrinkage, target and leave-one-out mean (module doc)."""
    b, k = r.shape
    zero = torch.zeros((), dtype=r.dtype, device=r.device)
    rloo = _rloo(r)  # R
    mean_i = r.mean(dim=1)  # [B]; entry i is only ever used for the other contexts' rows
    centre, ss_means = _masked_ss_others(mean_i)  # ybar_{-i}, sum_{j != i} (ybar_j - ybar_{-i})^2
    centre, ss_means = centre.unsqueeze(1), ss_means.unsqueeze(1)
    spread = ss_means + (b - 1) / b * (rloo - centre).square()  # S, [B, K]
    target = ((b - 1) * centre + rloo) / b  # zbar, [B, K]

    # pooled within-context variance without r_ik: contexts j != i in full, context i's other K-1 samples
    ss_i = (r - mean_i.unsqueeze(1)).square().sum(dim=1)  # [B]
    others_k = ~torch.eye(k, dtype=torch.bool, device=r.device)  # [k, l] = (l != k)
    dev = torch.where(others_k, r.unsqueeze(1) - rloo.unsqueeze(2), zero)
    ss_i_minus_k = dev.square().sum(dim=2)  # [B, K]
    nu = b * (k - 1) - 1
    s2 = (_sum_others(ss_i, 0).unsqueeze(1) + ss_i_minus_k) / nu  # [B, K]

    # f = nu_eff / (nu_eff + 2) <= nu / (nu + 2): Var(s2) from the spread of the other contexts' sums of
    # squares (each has K-1 degrees of freedom; context i's remainder K-2, so its variance scales by (K-2)/(K-1))
    _, ss_of_ss = _masked_ss_others(ss_i)
    var_ss = (ss_of_ss / (b - 2)).unsqueeze(1)  # [B, 1]
    var_s2 = var_ss * ((b - 1) + (k - 2) / (k - 1)) / nu**2
    s4 = s2.square()
    denom = s4 + var_s2
    f_cap = nu / (nu + 2)
    f = torch.where(denom > 0, s4 / torch.where(denom > 0, denom, torch.ones_like(denom)), torch.full_like(denom, f_cap))
    f = f.clamp(max=f_cap)

    # c = min(1, (B-3) f s2/(K-1) / S); S = 0 (all B values equal, so zbar = R) shrinks nothing
    positive = spread > 0
    c = (b - 3) * f * (s2 / (k - 1)) / torch.where(positive, spread, torch.ones_like(spread))
    c = torch.where(positive, c, zero).clamp(0.0, 1.0)
    return c, target, rloo


def js_shrinkage(rewards: torch.Tensor) -> torch.Tensor:
    """The js shrinkage c_ik in [0, 1], [B, K], each computed without r_ik (see the module doc).

    c = 0 is RLOO; c = 1 is zbar, the mean of the B context means with R in context i's place. Needs
    B >= 3 (B = 3 gives c = 0) and K >= 2. Every sum is formed from the other rewards only (prefix and
    suffix sums and masked tables, never `total - r_ik`), so c_ik and b_ik do not depend on r_ik even in
    the last bit."""
    return _js_parts(_rewards("js", rewards))[0]


def js_target(rewards: torch.Tensor) -> torch.Tensor:
    """zbar_ik, [B, K]: the grand mean js shrinks towards, ((B-1) * ybar_{-i} + rloo_ik) / B, free of r_ik."""
    return _js_parts(_rewards("js", rewards))[1]


def js_baseline(rewards: torch.Tensor, shrinkage: torch.Tensor | float | None = None) -> torch.Tensor:
    """The js baseline b = c * zbar + (1 - c) * rloo; `shrinkage` overrides the estimated c.

    Written as a convex combination so that c = 0 gives RLOO bit for bit (and so does B = 3)."""
    r = _rewards("js", rewards)
    c, target, rloo = _js_parts(r)
    if shrinkage is not None:
        c = torch.as_tensor(shrinkage, dtype=r.dtype, device=r.device).clamp(0.0, 1.0)
    return c * target + (1.0 - c) * rloo


def js_shrink(rewards: torch.Tensor, lam: torch.Tensor | float) -> torch.Tensor:
    """The js-plugin form for a given shrinkage: b = lam * xctx + (1 - lam) * rloo.

    `lam` is a float or anything broadcastable to [B, K]. Written as a convex combination (not
    m + (1 - lam)(rloo - m)) so that lam = 0 gives RLOO and lam = 1 gives XCTX bit for bit. The result
    stays leave-one-out as long as lam_ik itself does not depend on r_ik.
    """
    r = _rewards("js-plugin", rewards)
    lam = torch.as_tensor(lam, dtype=r.dtype, device=r.device).clamp(0.0, 1.0)
    return lam * _xctx(r) + (1.0 - lam) * _rloo(r)


def js_plugin_shrinkage(rewards: torch.Tensor) -> torch.Tensor:
    """The paper's plug-in shrinkage lam_ik in [0, 1], [B, K], each computed without r_ik.

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
    r = _rewards("js-plugin", rewards)
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


def js_plugin_baseline(rewards: torch.Tensor, shrinkage: torch.Tensor | float | None = None) -> torch.Tensor:
    """The paper's plug-in baseline; `shrinkage` overrides the estimated lam (0 -> RLOO, 1 -> XCTX)."""
    lam = js_plugin_shrinkage(rewards) if shrinkage is None else shrinkage
    return js_shrink(rewards, lam)


JSPO_EPSILON = 1e-6  # the official implementation's guard in lam = v2 / (v2 + s2 + eps)


def _jspo_parts(r: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(lam [B, 1], m [B, 1]): JSPO's shrinkage and target for context i, from the contexts j != i only."""
    b, k = r.shape
    mean_i = r.mean(dim=1)  # [B]
    noise_i = r.var(dim=1, unbiased=True) / k  # [B]: var_j / K
    centre, ss_means = _masked_ss_others(mean_i)  # mean of the other contexts' means (= of their rewards), spread
    v2 = _sum_others(noise_i, 0) / (b - 1)
    s2 = ss_means / (b - 1)
    lam = v2 / (v2 + s2 + JSPO_EPSILON)
    return lam.unsqueeze(1), centre.unsqueeze(1)


def jspo_shrinkage(rewards: torch.Tensor) -> torch.Tensor:
    """JSPO's lam_i in [0, 1), [B, 1]: the same for every sample of context i, computed without context i."""
    return _jspo_parts(_rewards("jspo", rewards))[0]


def jspo_baseline(rewards: torch.Tensor) -> torch.Tensor:
    """JSPO's baseline b_ik = (1 - lam_i) * rloo_ik + lam_i * m_i (see the module doc); free of r_ik."""
    r = _rewards("jspo", rewards)
    lam, target = _jspo_parts(r)
    return (1.0 - lam) * _rloo(r) + lam * target


def _none(rewards: torch.Tensor) -> BaselineResult:
    return BaselineResult(none_baseline(rewards), None)


def _rloo_result(rewards: torch.Tensor) -> BaselineResult:
    return BaselineResult(rloo_baseline(rewards), None)


def _xctx_result(rewards: torch.Tensor) -> BaselineResult:
    return BaselineResult(xctx_baseline(rewards), None)


def _js_result(rewards: torch.Tensor) -> BaselineResult:
    r = _rewards("js", rewards)
    c, target, rloo = _js_parts(r)
    return BaselineResult(c * target + (1.0 - c) * rloo, float(c.mean()))


def _js_plugin_result(rewards: torch.Tensor) -> BaselineResult:
    lam = js_plugin_shrinkage(rewards)
    return BaselineResult(js_shrink(rewards, lam), float(lam.mean()))


def _jspo_result(rewards: torch.Tensor) -> BaselineResult:
    r = _rewards("jspo", rewards)
    lam, target = _jspo_parts(r)
    return BaselineResult((1.0 - lam) * _rloo(r) + lam * target, float(lam.mean()))


_SAME_CONTEXT = " (it shrinks the leave-one-out mean of the other samples of the same context)"

# jsbench's baselines, in estimator-lab order; a plugin's record comes through the entry-point group
BASELINES: dict[str, Baseline] = {b.name: b for b in (
    Baseline("none", none_baseline, _none, description="b = 0: plain REINFORCE", lab_order=0),
    Baseline("rloo", rloo_baseline, _rloo_result, min_samples=2, why_samples=" (it averages the other samples of the same context)",
             description="the mean of the context's other K-1 rewards (REINFORCE leave-one-out)", lab_order=1),
    Baseline("xctx", xctx_baseline, _xctx_result, min_samples=2, description="the mean of every other reward in the batch", lab_order=2),
    Baseline("js", js_baseline, _js_result, min_samples=2, min_contexts=3, why_samples=_SAME_CONTEXT,
             why_contexts=" (its shrinkage factor is (B-3)/S over the B context means; B = 3 is exactly RLOO)",
             description="positive-part James-Stein (Efron-Morris), leave-one-out; needs B >= 3", lab_order=3, shrinkage=True),
    Baseline("js-plugin", js_plugin_baseline, _js_plugin_result, min_samples=2, min_contexts=3, why_samples=_SAME_CONTEXT,
             why_contexts=" (it estimates the between-context variance from the other B-1 contexts)",
             description="the paper's plug-in lam * xctx + (1 - lam) * rloo (over-shrinks at small B)", lab_order=4, shrinkage=True),
    Baseline("jspo", jspo_baseline, _jspo_result, min_samples=2, min_contexts=2, why_samples=_SAME_CONTEXT,
             why_contexts=" (it shrinks toward the mean of the other contexts)",
             description="JSPO's James-Stein baseline (Zeng et al. 2025), the other contexts' statistics", lab_order=5, shrinkage=True),
)}


# the [B, K] -> [B, K] baseline values alone, for torch.vmap over many simulated batches (no shrinkage float)
BASELINE_VALUES: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {name: b.values for name, b in BASELINES.items()}


def compute_baseline(name: str, rewards: torch.Tensor) -> BaselineResult:
    """Baseline `name` for [B, K] rewards; `shrinkage` is the batch-mean c (js) or lam (js-plugin), else None."""
    return baseline_record(name).compute(rewards)


def advantages(name: str, rewards: torch.Tensor) -> tuple[torch.Tensor, float | None]:
    """(r - b, shrinkage): the [B, K] advantages REINFORCE multiplies with grad log pi."""
    result = compute_baseline(name, rewards)
    r = rewards.detach()
    if not r.is_floating_point():
        r = r.to(result.baseline.dtype)
    return r - result.baseline, result.shrinkage
