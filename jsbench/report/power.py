"""How many training seeds a comparison needs: the power statement under each headline contrast.

A learned row's difference Δ = a − b (paired by seed) has SE(S)² = SE_img² + var_s / S for S training seeds
(jsbench.stats: the images' prompt-clustered part, which more seeds do not shrink, and the seeds' part).
A true difference d is resolved with power 1 − β at level α (two-sided) when

    (t_{1−α/2, df(S)} + t_{1−β, df(S)}) · SE(S) ≤ d

with df(S) the Welch–Satterthwaite degrees of freedom of the two parts (the image part's own df, G − 1
for G prompts or Satterthwaite over a suite's tasks; S − 1 for the seeds). `seeds_to_resolve` is the smallest such S, or None when the image part alone is too
large (more images, not more seeds, would resolve d).
"""

from __future__ import annotations

import math

from jsbench.stats import satterthwaite_df, t_quantile

__all__ = ["RESOLVE_DIFFERENCE", "RESOLVE_POWER", "seeds_to_resolve"]

RESOLVE_DIFFERENCE = 0.02  # the difference a headline contrast is asked to resolve (2 points of GenEval overall)
RESOLVE_POWER = 0.8


def seeds_to_resolve(difference: float, image_se: float, seed_var: float, image_df: float, *, level: float = 0.95,
                     power: float = RESOLVE_POWER, max_seeds: int = 10_000) -> int | None:
    """The fewest training seeds S (at least 2) that resolve `difference` with `power` at `level`, given the
    image part of the SE (`image_se`, with `image_df` degrees of freedom) and the variance of the per-seed
    differences (`seed_var`); None when no S up to `max_seeds` does."""
    if difference <= 0:
        raise ValueError(f"the difference to resolve must be positive, got {difference}")
    if not (image_se >= 0 and seed_var >= 0) or not image_df > 0:
        raise ValueError("image_se and seed_var must be non-negative and image_df positive")
    image_var = image_se**2

    def resolves(S: int) -> bool:
        se = math.sqrt(image_var + seed_var / S)
        df = satterthwaite_df([(image_var, image_df), (seed_var / S, S - 1)])
        return (t_quantile(1 - (1 - level) / 2, df) + t_quantile(power, df)) * se <= difference

    if not resolves(max_seeds):
        return None
    lo, hi = 2, max_seeds  # resolves(S) only turns true as S grows: the SE and the t quantiles both fall
    if resolves(lo):
        return lo
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if resolves(mid) else (mid, hi)
    return hi
