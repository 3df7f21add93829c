"""jsbench.stats against hand-computed cases: clustered SE, weighted overall, two-level SE, bootstrap CI."""

from __future__ import annotations

import math

import pytest

from jsbench.stats import Estimate, cluster_bootstrap_ci, cluster_mean, naive_mean, paired_two_level, two_level, weighted_overall
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
