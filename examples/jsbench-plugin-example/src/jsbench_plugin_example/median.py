"""`median-loo`: b_ik = the median of context i's other K - 1 rewards. Leave-one-out (r_ik never enters b_ik),
so the policy gradient stays unbiased; a median, so one outlying reward of a context moves it little."""

from __future__ import annotations

from jsbench.baselines import Baseline


def median_loo_baseline(rewards):
    """[B, K] -> [B, K]; torch.vmap-able (a sort, no data-dependent control flow)."""
    import torch

    r = rewards.detach()
    if not r.is_floating_point():
        r = r.to(torch.get_default_dtype())
    k = r.shape[-1]
    others = torch.tensor([[j for j in range(k) if j != i] for i in range(k)], device=r.device)  # [K, K-1]
    ranked = r[..., others].sort(dim=-1).values  # [B, K, K-1]
    m = k - 1
    return ranked[..., m // 2] if m % 2 else (ranked[..., m // 2 - 1] + ranked[..., m // 2]) / 2


MEDIAN_LOO = Baseline(
    "median-loo", median_loo_baseline, min_samples=2, why_samples=" (it takes the median of the context's other samples)",
    description="the median of the context's other K-1 rewards (leave-one-out, robust to an outlier)", lab_order=10,
)
