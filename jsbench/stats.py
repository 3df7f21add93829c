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

Degrees of freedom and intervals. Every `Estimate` carries the degrees of freedom of its SE: G-1 for a
prompt-clustered mean (n-1 for the naive one), and for a sum of independent variance terms v_k, each
with df_k, the Welch-Satterthwaite effective df (`satterthwaite_df`):

    df = ( sum_k v_k )^2 / sum_k ( v_k^2 / df_k )        (a term with v_k = 0 drops out)

so a task-weighted overall has v_t = w_t^2 SE_t^2, df_t = G_t - 1, and a learned row of S seeds

    df = SE^4 / ( a^2 / df_prompt + b^2 / (S-1) ),   a = SE_prompt^2, b = var_s / S

(S = 1: the prompt term alone). With S = 3 the seed term, when it dominates, leaves df near 2, where the
95 % quantile of Student's t is 4.30, not 1.96. The 95 % interval is value -+ t_{0.975, df} SE and the
p-value the two-sided one of value / SE against t_df (H0: 0), both from Student's t written out here
(`t_cdf`, `t_quantile`: the regularized incomplete beta; fractional df; no scipy, which the GPU image
lacks): df = inf is the normal.

Bootstrap CIs resample prompts (within each task) with a seeded generator, percentile intervals.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist
from typing import Any, Callable, Hashable, Iterable, Sequence

__all__ = ["Estimate", "cluster_mean", "naive_mean", "weighted_overall", "two_level", "paired_two_level", "two_level_estimate", "sample_variance",
           "paired_two_level_estimate", "satterthwaite_df", "t_cdf", "t_quantile", "t_interval", "t_p_value", "cluster_bootstrap_ci",
           "mean_stderr", "overall_of_tasks", "LEVEL", "SE_LEGEND", "TWO_LEVEL_LEGEND", "T_LEGEND"]

LEVEL = 0.95  # the level of every printed interval

# one line under every table (each fits 80 columns)
SE_LEGEND = "± is one standard error, clustered by prompt (its images are not independent)."
TWO_LEVEL_LEGEND = "Learned rows: mean of train_seeds policies; SE² = SE_prompt² + var_seeds / S."
T_LEGEND = "[lo, hi]: 95 % interval, Student t at the Satterthwaite df of the two terms."


@dataclass(frozen=True)
class Estimate:
    """A mean (or a difference of means) with its standard error, the SE's degrees of freedom and counts;
    `ci_low`, `ci_high` and `p` are its 95 % t interval and two-sided p-value (H0: 0)."""

    value: float
    stderr: float
    n: int  # observations (images)
    clusters: int  # prompts
    df: float = math.inf  # of the SE (inf: known exactly, the normal interval; nan: unknown)

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        return t_interval(self.value, self.stderr, self.df, level)

    @property
    def ci_low(self) -> float:
        return self.interval()[0]

    @property
    def ci_high(self) -> float:
        return self.interval()[1]

    @property
    def p(self) -> float:
        return t_p_value(self.value, self.stderr, self.df)


# --- Student's t -------------------------------------------------------------------------------------

_NORMAL_DF = 1e7  # beyond it t is the normal to 1e-7: the continued fraction slows as df grows


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the incomplete beta (modified Lentz), converging for x < (a+1)/(a+b+2)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)), -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def _betainc(a: float, b: float, x: float, y: float) -> float:
    """I_x(a, b), the regularized incomplete beta, with y = 1 - x given exactly (no cancellation near 1)."""
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    front = math.exp(a * math.log(x) + b * math.log(y) + math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, y) / b


def _two_sided_tail(t: float, df: float) -> float:
    """P(|T_df| >= |t|) = I_{df/(df+t^2)}(df/2, 1/2)."""
    if df > _NORMAL_DF:
        return math.erfc(abs(t) / math.sqrt(2.0))
    t2 = t * t
    return _betainc(df / 2.0, 0.5, df / (df + t2), t2 / (df + t2))


def t_cdf(t: float, df: float) -> float:
    """P(T_df <= t), Student's t with df > 0 degrees of freedom (fractional allowed; inf: the normal)."""
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if math.isnan(t):
        return math.nan
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    half_tail = _two_sided_tail(t, df) / 2.0
    return 1.0 - half_tail if t > 0 else half_tail


@lru_cache(maxsize=4096)
def t_quantile(q: float, df: float) -> float:
    """The q quantile of Student's t with df degrees of freedom, by bisection on `t_cdf` (to 1e-12)."""
    if not 0.0 < q < 1.0:
        raise ValueError(f"quantile level must be in (0, 1), got {q}")
    if not df > 0:
        raise ValueError(f"degrees of freedom must be > 0, got {df}")
    if df > _NORMAL_DF:
        return NormalDist().inv_cdf(q)
    if q == 0.5:
        return 0.0
    tail = 2.0 * min(q, 1.0 - q)  # the two-sided tail of |t|
    lo, hi = 0.0, 2.0
    while _two_sided_tail(hi, df) > tail:
        lo, hi = hi, hi * 2.0
    while hi - lo > 1e-12 * max(1.0, hi):
        mid = (lo + hi) / 2.0
        if _two_sided_tail(mid, df) > tail:
            lo = mid
        else:
            hi = mid
    t = (lo + hi) / 2.0
    return t if q > 0.5 else -t


def t_interval(value: float, stderr: float, df: float, level: float = LEVEL) -> tuple[float, float]:
    """value -+ t_{(1+level)/2, df} stderr; (value, value) for a zero SE, nan where SE or df is unknown."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    if stderr == 0.0:
        return value, value
    if math.isnan(stderr) or math.isnan(df) or not df > 0:
        return math.nan, math.nan
    half = t_quantile((1.0 + level) / 2.0, float(df)) * stderr
    return value - half, value + half


def t_p_value(value: float, stderr: float, df: float) -> float:
    """Two-sided p-value of value / stderr against Student's t with df (H0: the true value is 0)."""
    if math.isnan(value) or math.isnan(stderr) or math.isnan(df) or not df > 0:
        return math.nan
    if stderr == 0.0:
        return 1.0 if value == 0.0 else 0.0
    return min(1.0, _two_sided_tail(value / stderr, float(df)))


def satterthwaite_df(terms: Sequence[tuple[float, float]]) -> float:
    """The Welch-Satterthwaite df of a sum of independent variance terms, each (variance, its df):
    (sum v)^2 / sum v^2 / df. A term of zero (or nan) variance drops out, one of infinite df adds no
    uncertainty of its own; with no term left, the smallest df given (nan for none)."""
    used = [(v, d) for v, d in terms if v == v and v > 0]
    if not used:
        dfs = [d for _, d in terms if d == d]
        return min(dfs) if dfs else math.nan
    if any(d != d for _, d in used):
        return math.nan  # a term of unknown df: the sum's is unknown too
    denominator = math.fsum(v * v / d for v, d in used if not math.isinf(d))
    total = math.fsum(v for v, _ in used)
    return math.inf if denominator == 0 else total * total / denominator


def naive_mean(values: Sequence[float]) -> Estimate:
    """Mean with the i.i.d. standard error sqrt(var / n) (unbiased var): for comparison with the clustered one."""
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, 0, 0)
    m = math.fsum(values) / n
    if n < 2:
        return Estimate(m, math.nan, n, n)
    return Estimate(m, math.sqrt(sample_variance(values) / n), n, n, df=n - 1)


# --- the plain mean and GenEval's overall, in the arithmetic the committed numbers were computed with -----
# (naive_mean and weighted_overall give the same quantities with math.fsum and Estimates; these keep their
# callers' bits: Python's sum() for a sequence, the array library's own reduction for a tensor or array)


def mean_stderr(values: Any) -> tuple[float, float]:
    """The mean and its standard error (unbiased sample std / sqrt(n)); nan where undefined (n = 0, or n = 1
    for the error).

    `values` is a sequence of numbers (summed in Python floats: the error is sqrt(var / n)), or a torch tensor
    or numpy array, which is reduced by its own library in its own dtype (the error is float(std / sqrt(n)),
    std with Bessel's correction): pass `x.double()` for float64 arithmetic on a float32 tensor. Neither
    torch nor numpy is imported here; an array is recognised by the module of its type.
    """
    library = type(values).__module__.partition(".")[0]
    if library in ("torch", "numpy"):
        n = int(values.numel()) if library == "torch" else int(values.size)
        if n == 0:
            return float("nan"), float("nan")
        mean = float(values.mean())
        if n < 2:
            return mean, float("nan")
        std = values.std(unbiased=True) if library == "torch" else values.std(ddof=1)
        return mean, float(std / math.sqrt(n))
    n = len(values)
    if n == 0:
        return float("nan"), float("nan")
    mean = sum(values) / n
    if n < 2:
        return mean, float("nan")
    var = sum((v - mean) ** 2 for v in values) / (n - 1)
    return mean, math.sqrt(var / n)


def overall_of_tasks(task_stats: Iterable[tuple[float, float]]) -> tuple[float, float]:
    """GenEval's overall: the mean of the task means, and its standard error from the per-task standard
    errors (tasks are independent samples): sqrt(sum se_t^2) / T. A task without an error (nan: one image)
    adds none. `task_stats` holds one (mean, stderr) per task, e.g. `mean_stderr` of each task's values;
    (nan, nan) where there are no tasks."""
    stats = list(task_stats)
    if not stats:
        return float("nan"), float("nan")
    value = sum(m for m, _ in stats) / len(stats)
    # `** 2` as the leaderboards have always computed it (x ** 2 and x * x differ in the last bit for ~0.1% of floats)
    se = math.sqrt(sum((s if s == s else 0.0) ** 2 for _, s in stats)) / len(stats)
    return value, se


def cluster_mean(values: Sequence[float], clusters: Sequence[Hashable]) -> Estimate:
    """The mean of `values` and its cluster-robust (CR1) standard error over `clusters` (one label per
    value, e.g. the prompt), with G-1 degrees of freedom: nan where undefined (no values; fewer than 2
    clusters)."""
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
        return Estimate(m, math.nan, n, G, df=math.nan)
    ss = math.fsum(math.fsum(r) ** 2 for r in sums.values())
    return Estimate(m, math.sqrt(G / (G - 1) * ss) / n, n, G, df=G - 1)


def weighted_overall(task_estimates: Sequence[Estimate], weights: Sequence[float] | None = None) -> Estimate:
    """sum_t w_t * mean_t (equal weights 1/T by default) and sqrt(sum_t w_t^2 SE_t^2): tasks hold disjoint
    prompts, so their errors are independent. A task without an error (nan) adds none. df: the
    Satterthwaite df of the terms w_t^2 SE_t^2, each with its task's df."""
    ests = list(task_estimates)
    if not ests:
        return Estimate(math.nan, math.nan, 0, 0)
    w = [1.0] * len(ests) if weights is None else [float(x) for x in weights]
    if len(w) != len(ests):
        raise ValueError(f"{len(w)} weights for {len(ests)} tasks")
    total = sum(w)
    # sum(w v) / sum(w), sqrt(sum (w se)^2) / sum(w): with equal weights the sum of the task means over T
    value = sum(wi * e.value for wi, e in zip(w, ests)) / total
    terms = [((wi * e.stderr / total) ** 2, e.df) for wi, e in zip(w, ests) if e.stderr == e.stderr]
    se = math.sqrt(math.fsum(v for v, _ in terms))
    return Estimate(value, se, sum(e.n for e in ests), sum(e.clusters for e in ests), df=satterthwaite_df(terms))


def sample_variance(values: Sequence[float]) -> float:
    """The unbiased sample variance (n - 1), summed with math.fsum; 0 for fewer than two values."""
    vals = [float(v) for v in values]
    n = len(vals)
    if n < 2:
        return 0.0
    m = math.fsum(vals) / n
    return math.fsum((v - m) ** 2 for v in vals) / (n - 1)


def two_level_estimate(per_seed_values: Sequence[float], images: Estimate) -> Estimate:
    """A row trained with S seeds: the mean over seeds, SE^2 = a + b with a = images.stderr^2 (the prompt-
    clustered SE of the per-image mean over seeds) and b = var_s / S (var_s the sample variance of the
    per-seed values, 0 for one seed), and df = (a + b)^2 / (a^2 / images.df + b^2 / (S-1))."""
    vals = [float(v) for v in per_seed_values]
    if not vals:
        return Estimate(math.nan, math.nan, images.n, images.clusters, df=math.nan)
    S = len(vals)
    return _summed(math.fsum(vals) / S, [(images.stderr, images.df), (math.sqrt(sample_variance(vals) / S), S - 1)], images)


def paired_two_level_estimate(a_seeds: Sequence[float], b_seeds: Sequence[float], images: Estimate) -> Estimate:
    """Difference of two rows' means over seeds with its two-level SE and df. Same number of seeds: the per-
    seed differences (seed s of a minus seed s of b) enter `two_level_estimate`; else each row's seed term
    is added, with its own S-1 df. `images`: the prompt-clustered estimate of the per-image difference of
    the seed means (its SE and df)."""
    a, b = [float(x) for x in a_seeds], [float(x) for x in b_seeds]
    if len(a) == len(b):
        return two_level_estimate([x - y for x, y in zip(a, b)], images)
    no_images = Estimate(0.0, 0.0, 0, 0)
    ea, eb = two_level_estimate(a, no_images), two_level_estimate(b, no_images)
    return _summed(ea.value - eb.value, [(images.stderr, images.df), (ea.stderr, len(a) - 1), (eb.stderr, len(b) - 1)], images)


def _summed(value: float, terms: list[tuple[float, float]], images: Estimate) -> Estimate:
    """`value` with the SE of independent terms (SE_k, df_k) and their Satterthwaite df; a term of unknown
    (nan) SE adds nothing, as the images' SE of a single prompt does."""
    variances = [(se * se, df) for se, df in terms if se == se]
    return Estimate(value, math.sqrt(math.fsum(v for v, _ in variances)), images.n, images.clusters, df=satterthwaite_df(variances))


def two_level(per_seed_values: Sequence[float], images_se: float) -> tuple[float, float]:
    """(mean over seeds, SE) of `two_level_estimate`, for callers with only the images' SE."""
    est = two_level_estimate(per_seed_values, Estimate(0.0, images_se, 0, 0))
    return est.value, est.stderr


def paired_two_level(a_seeds: Sequence[float], b_seeds: Sequence[float], images_se: float) -> tuple[float, float]:
    """(difference, SE) of `paired_two_level_estimate`, for callers with only the images' SE."""
    est = paired_two_level_estimate(a_seeds, b_seeds, Estimate(0.0, images_se, 0, 0))
    return est.value, est.stderr


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
