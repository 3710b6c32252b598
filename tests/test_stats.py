"""Bootstrap confidence intervals, areas under curves and slopes, on cases with known answers."""

import numpy as np
import pytest

from neurd.stats import (
    area_under_curve,
    bootstrap_mean_ci,
    first_crossing,
    loglog_slope,
    mean_height,
)


def test_constant_samples_have_a_zero_width_interval_for_every_method():
    data = np.full((50, 3), 2.5)
    for method in ("percentile", "basic", "BCa"):
        mean, low, high = bootstrap_mean_ci(data, resamples=200, method=method, seed=0)
        np.testing.assert_array_equal(mean, 2.5)
        np.testing.assert_array_equal(low, 2.5)
        np.testing.assert_array_equal(high, 2.5)


def test_interval_matches_the_normal_theory_interval_for_a_large_sample():
    rng = np.random.default_rng(0)
    x = rng.normal(loc=1.0, scale=2.0, size=2000)
    mean, low, high = bootstrap_mean_ci(x, resamples=2000, seed=1)
    half = 1.959964 * x.std(ddof=1) / np.sqrt(x.size)
    assert mean == pytest.approx(x.mean())
    assert low < mean < high
    # Monte Carlo error of 2000 resamples on the 2.5% quantiles is a few percent.
    assert (high - low) / (2 * half) == pytest.approx(1.0, abs=0.08)
    assert (low + high) / 2 == pytest.approx(x.mean(), abs=0.1 * half)


def test_95_percent_intervals_cover_the_true_mean_about_95_percent_of_the_time():
    # 400 independent data sets (columns) of 100 exponential draws, true mean 1.
    rng = np.random.default_rng(2)
    data = rng.exponential(size=(100, 400))
    _, low, high = bootstrap_mean_ci(data, resamples=1000, seed=3)
    coverage = np.mean((low <= 1.0) & (1.0 <= high))
    # Binomial sd of the coverage is 0.011; percentile intervals of a skewed
    # mean undercover slightly at n = 100.
    assert 0.90 <= coverage <= 0.98


def test_every_column_is_resampled_with_the_same_trajectories():
    x = np.random.default_rng(4).normal(size=(30, 1))
    _, low, high = bootstrap_mean_ci(np.hstack([x, x, 2 * x]), resamples=500, seed=5)
    assert low[0] == low[1] and high[0] == high[1]
    assert low[2] == pytest.approx(2 * low[0]) and high[2] == pytest.approx(2 * high[0])


def test_intervals_are_deterministic_under_the_seed():
    x = np.random.default_rng(6).normal(size=(40, 5))
    a = bootstrap_mean_ci(x, resamples=300, seed=7)
    np.testing.assert_array_equal(a, bootstrap_mean_ci(x, resamples=300, seed=7))
    assert not np.array_equal(a[1], bootstrap_mean_ci(x, resamples=300, seed=8)[1])


def test_bad_arguments_are_refused():
    x = np.ones((10, 2))
    with pytest.raises(ValueError, match="'bca'"):
        bootstrap_mean_ci(x, method="bca")
    with pytest.raises(ValueError, match="1.5"):
        bootstrap_mean_ci(x, confidence=1.5)
    with pytest.raises(ValueError, match="0"):
        bootstrap_mean_ci(x, resamples=0)
    with pytest.raises(ValueError, match="n >= 2"):
        bootstrap_mean_ci(np.ones((1, 3)))
    with pytest.raises(ValueError, match="finite"):
        bootstrap_mean_ci(np.array([1.0, np.nan, 2.0]))


def test_area_under_curve_known_values():
    x = np.linspace(0.0, 2.0, 11)
    assert area_under_curve(x, 3 * x + 1) == pytest.approx(8.0, abs=1e-12)  # exact for lines
    fine = np.linspace(0.0, 1.0, 2001)
    assert area_under_curve(fine, fine**2) == pytest.approx(1 / 3, abs=1e-6)
    assert mean_height(x, np.full_like(x, 4.0)) == pytest.approx(4.0)
    with pytest.raises(ValueError, match="increasing"):
        area_under_curve([0.0, 2.0, 1.0], [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="same length"):
        area_under_curve([0.0, 1.0], [1.0])


def test_loglog_slope_and_first_crossing():
    x = np.arange(1.0, 1001.0)
    assert loglog_slope(x, 5.0 * x**-0.5) == pytest.approx(-0.5, abs=1e-12)
    assert loglog_slope(x, np.full_like(x, 3.0)) == pytest.approx(0.0, abs=1e-12)
    assert first_crossing(x, 100.0 / x, 0.5) == 200.0
    assert np.isnan(first_crossing(x, 100.0 / x, 0.01))
    with pytest.raises(ValueError, match="positive"):
        loglog_slope([1.0, 2.0], [1.0, 0.0])


def test_a_paired_difference_sees_what_two_means_cannot():
    """Five seeds whose spread (between seeds) dwarfs a small, consistent gap: the unpaired
    means cannot order them, the paired difference can; a gap of either sign across seeds
    is a tie."""
    from neurd.audit import paired_verdict
    from neurd.stats import paired_difference_ci

    base = np.array([1.0, 3.0, 5.0, 7.0, 9.0])
    first, second = base - 0.1 - np.array([0.0, 0.01, 0.02, 0.01, 0.0]), base
    mean, low, high = paired_difference_ci(first, second, resamples=1000, seed=0)
    assert mean == pytest.approx(-0.108) and high < 0 and paired_verdict(low, high) == "pass"
    _, low, high = paired_difference_ci(second, first, resamples=1000, seed=0)
    assert paired_verdict(low, high) == "fail"
    mixed = base + np.array([0.3, -0.2, 0.1, -0.3, 0.2])
    _, low, high = paired_difference_ci(mixed, base, resamples=1000, seed=0)
    assert low < 0 < high and paired_verdict(low, high) == "tie"
    with pytest.raises(ValueError, match="paired"):
        paired_difference_ci(base, base[:4])
