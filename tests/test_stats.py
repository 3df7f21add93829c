"""jsbench.stats against hand-computed cases: clustered SE, weighted overall, two-level SE and its
Satterthwaite df, Student's t (table values), t intervals and p-values, bootstrap CI."""

from __future__ import annotations

import math

import pytest

from jsbench.stats import (Estimate, cluster_bootstrap_ci, cluster_mean, naive_mean, paired_two_level, paired_two_level_estimate, satterthwaite_df,
                           t_cdf, t_interval, t_p_value, t_quantile, two_level, two_level_estimate, weighted_overall)
from jsbench.suites.base import EvalItem, aggregate_by_task


def test_clustered_se_exceeds_naive_when_images_of_a_prompt_agree():
    # prompt a: 1, 1; prompt b: 0, 0. mean 0.5.
    # naive: var = 4 * 0.25 / 3 = 1/3, SE = sqrt(1/3 / 4) = 0.288675
    # clustered: residual sums +1, -1; G/(G-1) * (1 + 1) / n^2 = 2 * 2 / 16 = 0.25, SE = 0.5
    values, prompts = [1.0, 1.0, 0.0, 0.0], ["a", "a", "b", "b"]
    assert naive_mean(values).stderr == pytest.approx(math.sqrt(1 / 12))
    clustered = cluster_mean(values, prompts)
    assert clustered.value == 0.5 and clustered.stderr == pytest.approx(0.5)
    assert clustered.stderr > naive_mean(values).stderr
    assert (clustered.n, clustered.clusters) == (4, 2)


def test_clustered_se_below_naive_when_images_of_a_prompt_disagree():
    # a: 1, 0; b: 1, 0 -> residual sums 0, 0: the prompt means agree exactly, SE 0
    assert cluster_mean([1.0, 0.0, 1.0, 0.0], ["a", "a", "b", "b"]).stderr == 0.0


def test_clustered_equals_naive_with_one_image_per_prompt():
    values = [0.3, 0.9, 0.4, 0.0, 1.0]
    assert cluster_mean(values, list("abcde")).stderr == pytest.approx(naive_mean(values).stderr)


def test_clustered_with_unequal_clusters_by_hand():
    # a: 1, 1, 1; b: 0; c: 1, 0. n = 6, mean = 4/6
    # residual sums: a 3 - 2 = 1; b -2/3; c 1 - 4/3 = -1/3. ss = 1 + 4/9 + 1/9 = 14/9
    # SE^2 = 3/2 * 14/9 / 36 = 7/108
    est = cluster_mean([1, 1, 1, 0, 1, 0], ["a", "a", "a", "b", "c", "c"])
    assert est.value == pytest.approx(4 / 6) and est.stderr == pytest.approx(math.sqrt(7 / 108))


def test_cluster_mean_undefined_cases():
    assert math.isnan(cluster_mean([], []).value)
    assert math.isnan(cluster_mean([1.0, 0.0], ["a", "a"]).stderr)  # one cluster: no error
    with pytest.raises(ValueError):
        cluster_mean([1.0], ["a", "b"])


def test_weighted_overall_by_hand():
    a, b = Estimate(0.2, 0.1, 4, 2), Estimate(0.8, 0.3, 6, 3)
    eq = weighted_overall([a, b])
    assert eq.value == pytest.approx(0.5) and eq.stderr == pytest.approx(math.sqrt(0.25 * 0.01 + 0.25 * 0.09))
    w = weighted_overall([a, b], [3, 1])  # normalised to 0.75, 0.25
    assert w.value == pytest.approx(0.75 * 0.2 + 0.25 * 0.8)
    assert w.stderr == pytest.approx(math.sqrt(0.75**2 * 0.01 + 0.25**2 * 0.09))


def test_aggregate_by_task_uses_the_clustered_se_and_the_weights():
    items = [EvalItem("a1", "A"), EvalItem("a2", "A"), EvalItem("b1", "B"), EvalItem("b2", "B")]
    rows = [it for it in items for _ in range(2)]
    scores = [{"m": v} for v in [1, 1, 0, 0, 1, 0, 1, 0]]
    by = {m.task: m for m in aggregate_by_task(scores, rows)}
    assert by["A"].stderr == pytest.approx(0.5) and by["B"].stderr == pytest.approx(0.0)
    assert by["overall"].value == pytest.approx(0.5) and by["overall"].stderr == pytest.approx(0.25)
    weighted = {m.task: m for m in aggregate_by_task(scores, rows, weights={"A": 1, "B": 3})}
    assert weighted["overall"].value == pytest.approx(0.25 * 0.5 + 0.75 * 0.5)
    assert weighted["overall"].stderr == pytest.approx(0.25 * 0.5)


def test_two_level_adds_the_training_seed_variance():
    # seeds 0.4, 0.5, 0.6: var 0.01, /3; images SE 0.02 -> sqrt(0.0004 + 0.01/3)
    m, se = two_level([0.4, 0.5, 0.6], 0.02)
    assert m == pytest.approx(0.5) and se == pytest.approx(math.sqrt(0.0004 + 0.01 / 3))
    assert two_level([0.7], 0.03) == pytest.approx((0.7, 0.03))  # one seed: the images' SE alone


def test_paired_two_level_pairs_seeds_or_adds_both_variances():
    m, se = paired_two_level([0.5, 0.6], [0.4, 0.4], 0.01)  # per-seed differences 0.1, 0.2: var 0.005
    assert m == pytest.approx(0.15) and se == pytest.approx(math.sqrt(0.0001 + 0.005 / 2))
    m, se = paired_two_level([0.5, 0.6], [0.4], 0.01)  # against a one-seed reference: a's seed variance only
    assert m == pytest.approx(0.15) and se == pytest.approx(math.sqrt(0.0001 + 0.005 / 2))


def test_bootstrap_ci_is_seeded_and_covers_the_mean():
    values = [1, 1, 0, 0, 1, 0, 1, 1, 0, 1, 1, 1]
    prompts = [i // 2 for i in range(12)]
    ci = cluster_bootstrap_ci(values, prompts, seed=3, resamples=500)
    assert ci == cluster_bootstrap_ci(values, prompts, seed=3, resamples=500)
    assert ci[0] < sum(values) / 12 < ci[1]
    # resampling whole prompts of identical images: the CI can only hold prompt-mean averages
    same = cluster_bootstrap_ci([1, 1, 0, 0], ["a", "a", "b", "b"], resamples=200)
    assert same[0] in (0.0, 0.5, 1.0) and same[1] in (0.0, 0.5, 1.0)
    with pytest.raises(ValueError):
        cluster_bootstrap_ci(values, prompts, level=1.5)


@pytest.mark.parametrize("df, quantile", [(1, 12.706205), (2, 4.302653), (2.8, 3.314991), (10, 2.228139), (30, 2.042272),
                                          (1e9, 1.959964), (math.inf, 1.959964)])
def test_t_quantile_matches_the_table(df, quantile):
    # printed t tables (and scipy.stats.t.ppf for the fractional df 2.8)
    assert t_quantile(0.975, df) == pytest.approx(quantile, abs=1e-6)
    assert t_quantile(0.025, df) == pytest.approx(-quantile, abs=1e-6)
    assert t_cdf(t_quantile(0.975, df), df) == pytest.approx(0.975, abs=1e-9)


def test_t_cdf_by_hand():
    assert t_cdf(0.0, 3) == 0.5
    assert t_cdf(1.0, 1) == pytest.approx(0.75)  # Cauchy: 1/2 + atan(1)/pi
    assert t_cdf(-1.5, 4) == pytest.approx(0.104, abs=1e-9)  # df 4: 1/2 - t(6 + t^2)/(2 (4 + t^2)^1.5) exactly 0.104
    assert t_cdf(1.0, math.inf) == pytest.approx(0.841344746)
    with pytest.raises(ValueError):
        t_cdf(1.0, 0)
    with pytest.raises(ValueError):
        t_quantile(1.0, 3)


def test_t_interval_and_p_value():
    lo, hi = t_interval(0.5, 0.1, 2)
    assert (lo, hi) == pytest.approx((0.5 - 0.4302653, 0.5 + 0.4302653))
    assert t_p_value(0.15, 0.1, 4) == pytest.approx(0.208, abs=1e-9)  # 2 * 0.104
    assert t_p_value(-0.15, 0.1, 4) == pytest.approx(0.208, abs=1e-9)
    assert t_interval(0.3, 0.0, 2) == (0.3, 0.3) and t_p_value(0.3, 0.0, 2) == 0.0
    assert all(math.isnan(x) for x in t_interval(0.3, math.nan, 2)) and math.isnan(t_p_value(0.3, 0.1, math.nan))


def test_satterthwaite_df_by_hand():
    assert satterthwaite_df([(0.25 * 0.01, 1), (0.25 * 0.09, 2)]) == pytest.approx(2.4096386)  # 0.025^2 / (0.0025^2 + 0.0225^2 / 2)
    assert satterthwaite_df([(0.0004, 71), (0.0, 2)]) == 71  # a term of zero weight drops out
    assert satterthwaite_df([(0.0, 71), (0.0, 2)]) == 2  # nothing varies: the smallest df
    assert satterthwaite_df([(0.01, math.inf)]) == math.inf


def test_clustered_and_weighted_estimates_carry_their_df():
    assert cluster_mean([1, 1, 0, 0, 1, 0], list("aabbcc")).df == 2  # G - 1
    assert naive_mean([1.0, 2.0, 4.0]).df == 2
    a, b = Estimate(0.2, 0.1, 4, 2, df=1), Estimate(0.8, 0.3, 6, 3, df=2)
    assert weighted_overall([a, b]).df == pytest.approx(2.4096386)
    est = cluster_mean([1.0, 0.0, 1.0, 1.0], list("abcd"))
    assert (est.ci_low, est.ci_high) == pytest.approx(t_interval(est.value, est.stderr, 3))
    assert est.p == pytest.approx(t_p_value(0.75, est.stderr, 3))


def test_two_level_df_is_the_satterthwaite_of_prompts_and_seeds():
    # seeds 0.4, 0.5, 0.6: b = 0.01 / 3; prompts a = 0.02^2 with 71 df
    est = two_level_estimate([0.4, 0.5, 0.6], Estimate(0.0, 0.02, 144, 72, df=71))
    a, b = 0.02**2, 0.01 / 3
    assert est.value == pytest.approx(0.5) and est.stderr == pytest.approx(math.sqrt(a + b))
    assert est.df == pytest.approx((a + b) ** 2 / (a**2 / 71 + b**2 / 2))
    assert (est.n, est.clusters) == (144, 72)
    one = two_level_estimate([0.7], Estimate(0.0, 0.03, 144, 72, df=71))  # one seed: the prompt term alone
    assert (one.value, one.stderr, one.df) == pytest.approx((0.7, 0.03, 71))
    # the tuple API is the same numbers
    assert two_level([0.4, 0.5, 0.6], 0.02) == pytest.approx((est.value, est.stderr))


def test_three_seeds_make_a_two_and_a_half_se_difference_not_significant():
    # per-seed differences 0.04, 0.10, 0.16: var_s 0.0036, b = 0.0012; prompts SE 0.02 (a = 0.0004, 71 df)
    # SE = sqrt(0.0016) = 0.04, so the difference 0.10 is 2.5 SE: the normal interval 0.1 -+ 0.0784 excludes 0
    # df = 0.0016^2 / (0.0004^2 / 71 + 0.0012^2 / 2) = 3.5445, t_{0.975} = 2.9230: 0.1 -+ 0.1169 covers 0, p = 0.0748
    est = paired_two_level_estimate([0.54, 0.60, 0.66], [0.50, 0.50, 0.50], Estimate(0.0, 0.02, 144, 72, df=71))
    assert est.value == pytest.approx(0.10) and est.stderr == pytest.approx(0.04)
    assert est.value / est.stderr == pytest.approx(2.5)
    assert est.df == pytest.approx(3.5444618, rel=1e-6)
    assert est.p == pytest.approx(0.0747946, abs=1e-6) and est.p > 0.05
    assert est.ci_low == pytest.approx(0.1 - 2.9229965 * 0.04, abs=1e-6) and est.ci_low < 0 < est.ci_high
    normal = Estimate(est.value, est.stderr, est.n, est.clusters)  # df inf: what 1.96 says
    assert normal.ci_low > 0 and normal.p < 0.05


def test_paired_two_level_estimate_with_unequal_seeds_adds_each_rows_term():
    # a: 0.5, 0.6 (var 0.005, /2, 1 df); b: 0.4 alone (no seed term); images 0.01 with 50 df
    est = paired_two_level_estimate([0.5, 0.6], [0.4], Estimate(0.0, 0.01, 100, 51, df=50))
    a, b = 0.0001, 0.0025
    assert est.value == pytest.approx(0.15) and est.stderr == pytest.approx(math.sqrt(a + b))
    assert est.df == pytest.approx((a + b) ** 2 / (a**2 / 50 + b**2 / 1))
