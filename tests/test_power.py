"""The power statement: seeds that resolve a difference, checked against its definition."""

import math

import pytest
from scipy.stats import t

from jsbench.report.power import seeds_to_resolve
from jsbench.stats import satterthwaite_df


def _resolves(d, image_se, seed_var, image_df, S):
    se = math.sqrt(image_se**2 + seed_var / S)
    df = satterthwaite_df([(image_se**2, image_df), (seed_var / S, S - 1)])
    return (t.ppf(0.975, df) + t.ppf(0.8, df)) * se <= d


@pytest.mark.parametrize("image_se,seed_var", [(0.004, 0.0004), (0.0, 0.001), (0.006, 0.00002), (0.001, 0.01)])
def test_the_smallest_resolving_seed_count(image_se, seed_var):
    S = seeds_to_resolve(0.02, image_se, seed_var, image_df=71)
    assert S is not None and _resolves(0.02, image_se, seed_var, 71, S)
    assert S == 2 or not _resolves(0.02, image_se, seed_var, 71, S - 1)


def test_by_hand_without_an_image_part():
    # var_s = 0.001, no image part: df = S - 1, need (t.975 + t.8)(S-1) * sqrt(0.001 / S) <= 0.02
    S = seeds_to_resolve(0.02, 0.0, 0.001, image_df=71)
    assert S == min(s for s in range(2, 200) if (t.ppf(0.975, s - 1) + t.ppf(0.8, s - 1)) * math.sqrt(0.001 / s) <= 0.02)
    assert 18 <= S <= 25  # the normal approximation says (1.96 + 0.84)^2 * 0.001 / 0.02^2 = 19.6


def test_an_image_part_too_large_for_any_seed_count():
    # (1.96 + 0.84) * 0.008 > 0.02: more images, not more seeds
    assert seeds_to_resolve(0.02, 0.008, 0.0001, image_df=71) is None


def test_bad_input_is_refused():
    with pytest.raises(ValueError):
        seeds_to_resolve(0.0, 0.01, 0.01, image_df=9)
    with pytest.raises(ValueError):
        seeds_to_resolve(0.02, -1.0, 0.01, image_df=9)
