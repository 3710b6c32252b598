"""Statistics of the figures: bootstrap confidence intervals, areas under curves, the best
level of a grid.

The paper's RPS figures (4a, 5) show the mean NashConv over 100 trajectories
with "the 95% confidence interval computed with bootstrapping from 1000
samples".  :func:`bootstrap_mean_ci` computes that interval with
``scipy.stats.bootstrap`` for many iterations at once: the iterations are a
batch axis of one vectorised call, so 10^4 iterations cost seconds, not
minutes.  The default method is the percentile bootstrap, the one seaborn
uses for its ``errorbar=("ci", 95)`` bands (``n_boot=1000``), which is how we
read the paper's "1000 samples".
"""

from __future__ import annotations

import warnings

import numpy as np

# Fewer samples than this (seeds, starts) and a bootstrap interval is not given (a figure draws
# no band, an audit row judges nothing): the percentile bootstrap of a mean from n samples
# spans about the range of their resampled means, which for normal samples covers the mean in
# 50% (n = 2), 76% (3), 81% (4), 83% (5) of draws at a nominal 95% (docs/audit.md); a figure
# draws each sample instead, or says that no band is.
MIN_CI_SAMPLES = 5
METHODS = ("percentile", "basic", "BCa")

# Bytes of resampled data scipy may hold at once (it materialises
# batch x n x columns values); keeps 10^4 iterations x 100 trajectories
# within a laptop's memory at no loss of speed.
_MEMORY_BUDGET = 64 * 2**20


def bootstrap_mean_ci(
    samples,
    *,
    resamples: int = 1000,
    confidence: float = 0.95,
    method: str = "percentile",
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Mean and bootstrap confidence interval of the mean, column by column.

    ``samples[i, j]``: observation ``i`` (a trajectory) of quantity ``j`` (an
    iteration).  Every column is resampled with the same indices (rows are
    resampled whole), which is the usual paired bootstrap of a curve.  A
    column whose observations are all equal gets the interval ``(c, c)``:
    every resample has mean ``c`` (BCa would return NaN there).

    Shapes: ``samples`` ``[n]`` or ``[n, m]`` -> ``(mean, low, high)``, each
    ``[]`` or ``[m]``.
    """
    from scipy import stats  # 1 s to import; most steps never bootstrap

    samples = np.asarray(samples, dtype=np.float64)
    _check(samples, resamples, confidence, method)
    column = samples.ndim == 1
    data = samples[:, None] if column else samples
    n, m = data.shape
    batch = max(1, int(_MEMORY_BUDGET // (8 * n * m)))
    with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
        # Constant columns make BCa warn and return NaN; they are fixed below.
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(
            (data,), np.mean, axis=0, vectorized=True, n_resamples=resamples,
            confidence_level=confidence, method=method, batch=batch,
            rng=np.random.default_rng(seed),
        )
    mean = data.mean(axis=0)
    constant = np.all(data == data[:1], axis=0)
    low = np.where(constant, mean, result.confidence_interval.low)
    high = np.where(constant, mean, result.confidence_interval.high)
    if column:
        return mean[0], low[0], high[0]
    return mean, low, high


def paired_difference_ci(first, second, **bootstrap) -> tuple[float, float, float]:
    """Mean of ``first - second`` over paired observations (the same seeds) and its bootstrap
    confidence interval (:func:`bootstrap_mean_ci`'s keywords): the audit's test of "one
    learner ends below the other", which two unpaired means cannot make."""
    first, second = np.asarray(first, np.float64), np.asarray(second, np.float64)
    if first.shape != second.shape or first.ndim != 1 or len(first) < 2:
        raise ValueError(f"paired samples must be two 1-d arrays of the same length >= 2, got "
                         f"shapes {first.shape} and {second.shape}")
    mean, low, high = bootstrap_mean_ci(first - second, **bootstrap)
    return float(mean), float(low), float(high)


def _check(samples, resamples, confidence, method) -> None:
    if samples.ndim not in (1, 2) or samples.shape[0] < 2:
        raise ValueError(f"samples must be [n] or [n, m] with n >= 2, got shape {samples.shape}")
    if not np.all(np.isfinite(samples)):
        raise ValueError("samples must be finite")
    if int(resamples) != resamples or resamples < 1:
        raise ValueError(f"resamples must be a positive integer, got {resamples!r}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must lie in (0, 1), got {confidence!r}")
    if method not in METHODS:
        raise ValueError(f"unknown bootstrap method {method!r}; expected one of {METHODS}")


def area_under_curve(x, y) -> float:
    """Trapezoidal area under the curve ``y(x)``; ``x`` strictly increasing, ``[K], [K] -> []``."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError("x and y must be 1-D of the same length >= 2, "
                         f"got {x.shape} and {y.shape}")
    if np.any(np.diff(x) <= 0.0):
        raise ValueError("x must be strictly increasing")
    return float(np.trapezoid(y, x))


def mean_height(x, y) -> float:
    """Area under ``y(x)`` divided by the width of ``x``: the curve's average value."""
    x = np.asarray(x, dtype=np.float64)
    return area_under_curve(x, y) / float(x[-1] - x[0])


def loglog_slope(x, y) -> float:
    """Least-squares slope of ``log y`` against ``log x``, ``[K], [K] -> []``.

    The exponent of a power law: ``y ~ x^-1`` gives -1; a plateau gives 0.
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.ndim != 1 or x.shape != y.shape or x.size < 2:
        raise ValueError("x and y must be 1-D of the same length >= 2, "
                         f"got {x.shape} and {y.shape}")
    if np.any(x <= 0.0) or np.any(y <= 0.0):
        raise ValueError("a log-log slope needs positive x and y")
    return float(np.polyfit(np.log(x), np.log(y), 1)[0])


def first_crossing(x, y, level: float) -> float:
    """First ``x`` at which ``y <= level`` (NaN if never), ``[K], [K] -> []``."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    below = np.flatnonzero(y <= level)
    return float(x[below[0]]) if below.size else float("nan")


def refined_optimum(x, y) -> tuple[float, bool]:
    """The positive ``x`` minimising ``y(x)`` on a log grid, refined between grid points.

    Fits a parabola in ``log10(x)`` through the grid minimum and its two
    neighbours and returns its vertex, and whether the minimum lies inside the
    grid (``False``: it is at an end and is returned as is).  Fig 2's audit
    refines the tuned step size this way.  Shapes: ``[K], [K] -> ([], bool)``.
    """
    order = np.argsort(x)
    x = np.log10(np.asarray(x, float)[order])
    y = np.asarray(y, float)[order]
    i = int(np.argmin(y))
    if i == 0 or i == len(x) - 1:
        return float(10 ** x[i]), False
    a, b, _ = np.polyfit(x[i - 1:i + 2], y[i - 1:i + 2], 2)
    vertex = -b / (2 * a) if a > 0 else x[i]
    return float(10 ** np.clip(vertex, x[i - 1], x[i + 1])), True


def best_entropies(summary, game: str) -> dict[str, float]:
    """Per algorithm, the entropy level with the lowest mean final NashConv over seeds
    (``summary``: a table of per-run ``game, algorithm, entropy, final_nash_conv``).  Fig 6
    draws these levels and a publication keeps their policies.

    A level with a run that diverged (its final NashConv NaN) has no mean and is never
    chosen; an algorithm whose every level has one has no best level (it is left out)."""
    rows = summary[summary.game == game]
    levels = rows.groupby(["algorithm", "entropy"]).final_nash_conv
    means = levels.mean().where(~levels.apply(lambda v: v.isna().any()))
    return {a: float(means.loc[a].idxmin()) for a in means.index.get_level_values(0).unique()
            if means.loc[a].notna().any()}


def grid_margin(summary, game: str, algorithm: str) -> float:
    """How clearly the entropy grid brackets ``algorithm``'s best level in ``game``: the
    lower of the mean final NashConv at the grid's two ends minus the lowest at a level
    strictly inside it (means over seeds, as :func:`best_entropies`: a level with a
    diverged run has none, and is left out of both).  Positive: an inside level beats both
    ends by that much (the best lies inside); negative: an end beats every inside level by
    that much (the best lies on it); near 0: the ends and the best inside level are alike,
    and seed noise can move the best across the grid's end.  NaN for a grid of fewer than
    3 levels (nothing inside), or with no end or no inside level that has a mean."""
    rows = summary[(summary.game == game) & (summary.algorithm == algorithm)]
    grid = np.sort(rows.entropy.unique())
    if len(grid) < 3:
        return np.nan
    levels = rows.groupby("entropy").final_nash_conv
    means = levels.mean().where(levels.count() == levels.size())  # NaN: a run diverged
    ends, inside = means.reindex(grid[[0, -1]]).dropna(), means.reindex(grid[1:-1]).dropna()
    if ends.empty or inside.empty:
        return np.nan
    return float(ends.min() - inside.min())
