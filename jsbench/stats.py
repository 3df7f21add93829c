"""The one place jsbench computes a mean, a paired difference and their uncertainty (bottom layer).

Images are clustered by prompt: the images of one prompt share its difficulty, so they are not
independent draws. Every standard error here is the cluster-robust (CR1) one over prompts:

    mean  = sum_i y_i / n
    SE^2  = G/(G-1) * sum_g ( sum_{i in g} (y_i - mean) )^2 / n^2        (G prompts, n images)

which with equal images per prompt is the standard error of the G prompt means (s_means^2 / G), and
with one image per prompt the naive sqrt(var / n). A suite's headline `overall` is the weighted mean of
its task means (GenEval: weight 1/T each); tasks hold disjoint prompts, so SE(overall)^2 =
sum_t w_t^2 SE_t^2.

A learned row is several trained policies (training seeds s = 1..S) scored on the same images. Its
value is the mean over seeds, and its SE counts both levels (`two_level`):

    SE^2 = SE_prompts( per-image mean over seeds )^2 + var_s( per-seed value ) / S

the first term the evaluation images' share, the second the training seeds' (var_s with S-1; 0 for
S = 1). A paired difference of such rows is the same formula applied to the per-seed differences.

Bootstrap CIs resample prompts (within each task) with a seeded generator, percentile intervals.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Callable, Hashable, Sequence

__all__ = ["Estimate", "cluster_mean", "naive_mean", "weighted_overall", "two_level", "paired_two_level", "cluster_bootstrap_ci",
           "SE_LEGEND", "TWO_LEVEL_LEGEND"]

# one line under every table (each fits 80 columns)
SE_LEGEND = "± is one standard error, clustered by prompt (its images are not independent)."
TWO_LEVEL_LEGEND = "Learned rows: mean of train_seeds policies; SE² = SE_prompt² + var_seeds / S."


@dataclass(frozen=True)
class Estimate:
    """A mean (or a difference of means) with its standard error and counts."""

    value: float
    stderr: float
    n: int  # observations (images)
    clusters: int  # prompts


def naive_mean(values: Sequence[float]) -> Estimate:
    """Mean with the i.i.d. standard error sqrt(var / n) (unbiased var): for comparison with the clustered one."""
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, 0, 0)
    m = math.fsum(values) / n
    if n < 2:
        return Estimate(m, math.nan, n, n)
    var = math.fsum((v - m) ** 2 for v in values) / (n - 1)
    return Estimate(m, math.sqrt(var / n), n, n)


def cluster_mean(values: Sequence[float], clusters: Sequence[Hashable]) -> Estimate:
    """The mean of `values` and its cluster-robust (CR1) standard error over `clusters` (one label per
    value, e.g. the prompt): nan where undefined (no values; fewer than 2 clusters)."""
    if len(values) != len(clusters):
        raise ValueError(f"{len(values)} values but {len(clusters)} cluster labels")
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, 0, 0)
    m = math.fsum(values) / n
    sums: dict[Hashable, list[float]] = {}
    for v, g in zip(values, clusters):
        sums.setdefault(g, []).append(v - m)
    G = len(sums)
    if G < 2:
        return Estimate(m, math.nan, n, G)
    ss = math.fsum(math.fsum(r) ** 2 for r in sums.values())
    return Estimate(m, math.sqrt(G / (G - 1) * ss) / n, n, G)


def weighted_overall(task_estimates: Sequence[Estimate], weights: Sequence[float] | None = None) -> Estimate:
    """sum_t w_t * mean_t (equal weights 1/T by default) and sqrt(sum_t w_t^2 SE_t^2): tasks hold disjoint
    prompts, so their errors are independent. A task without an error (nan) adds none."""
    ests = list(task_estimates)
    if not ests:
        return Estimate(math.nan, math.nan, 0, 0)
    w = [1.0] * len(ests) if weights is None else [float(x) for x in weights]
    if len(w) != len(ests):
        raise ValueError(f"{len(w)} weights for {len(ests)} tasks")
    total = sum(w)
    # sum(w v) / sum(w), sqrt(sum (w se)^2) / sum(w): with equal weights the sum of the task means over T
    value = sum(wi * e.value for wi, e in zip(w, ests)) / total
    se = math.sqrt(sum((wi * e.stderr) ** 2 for wi, e in zip(w, ests) if e.stderr == e.stderr)) / total
    return Estimate(value, se, sum(e.n for e in ests), sum(e.clusters for e in ests))


def two_level(per_seed_values: Sequence[float], images_se: float) -> tuple[float, float]:
    """(mean over seeds, SE) of a row trained with S seeds: SE^2 = images_se^2 + var_s / S, `images_se` the
    prompt-clustered SE of the per-image mean over seeds, var_s the sample variance of the per-seed values
    (0 for one seed)."""
    vals = [float(v) for v in per_seed_values]
    if not vals:
        return math.nan, math.nan
    S = len(vals)
    m = math.fsum(vals) / S
    var = math.fsum((v - m) ** 2 for v in vals) / (S - 1) if S > 1 else 0.0
    base = images_se if images_se == images_se else 0.0
    return m, math.sqrt(base**2 + var / S)


def paired_two_level(a_seeds: Sequence[float], b_seeds: Sequence[float], images_se: float) -> tuple[float, float]:
    """Difference of two rows' means over seeds with its two-level SE. Same number of seeds: the per-seed
    differences (seed s of a minus seed s of b) enter `two_level`; else each row's seed variance is added.
    `images_se`: the prompt-clustered SE of the per-image difference of the seed means."""
    a, b = [float(x) for x in a_seeds], [float(x) for x in b_seeds]
    if len(a) == len(b):
        return two_level([x - y for x, y in zip(a, b)], images_se)
    ma, sa = two_level(a, 0.0)
    mb, sb = two_level(b, 0.0)
    base = images_se if images_se == images_se else 0.0
    return ma - mb, math.sqrt(base**2 + sa**2 + sb**2)


def cluster_bootstrap_ci(values: Sequence[float], clusters: Sequence[Hashable], statistic: Callable[[list[float], list], float] | None = None,
                         strata: Sequence[Hashable] | None = None, level: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """Percentile CI of `statistic(values, clusters)` (default: the mean) resampling whole clusters with
    replacement, within each stratum (e.g. the task) when given; seeded, so the same call gives the same CI."""
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level}")
    stat = statistic or (lambda v, c: math.fsum(v) / len(v))
    strata = list(strata) if strata is not None else [0] * len(values)
    members: dict[Hashable, dict[Hashable, list[int]]] = {}
    for i, (g, t) in enumerate(zip(clusters, strata)):
        members.setdefault(t, {}).setdefault(g, []).append(i)
    rng = random.Random(seed)
    draws = []
    for _ in range(resamples):
        idx: list[int] = []
        labels: list = []
        for t, groups in members.items():
            keys = list(groups)
            for j in range(len(keys)):
                g = keys[rng.randrange(len(keys))]
                idx += groups[g]
                labels += [(t, j)] * len(groups[g])
        draws.append(stat([values[i] for i in idx], labels))
    draws.sort()
    lo = draws[int(math.floor((1 - level) / 2 * (resamples - 1)))]
    hi = draws[int(math.ceil((1 + level) / 2 * (resamples - 1)))]
    return lo, hi
