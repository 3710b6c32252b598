"""Figure 1: regret vs horizon in repeated matching pennies, Hedge vs SPG.

Left: the paper's view, linear axes, with the dashed least-squares line fitted
to SPG-with-forfeit.  Right: the same curves on log-log axes with the fitted
growth rates (slopes) in the legend, which is what the claims are about.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd.audit import IN, Check, Claim, fmt
from neurd.figures import style
from neurd.matrix_games import matching_pennies_utilities
from neurd.names import HEDGE, SPG
from neurd.stats import loglog_slope

FIGURE = "fig1"
CURVES = [(SPG, False), (SPG, True), (HEDGE, False), (HEDGE, True)]
# The values of playing H or T per round, -0.2 and 0.2, are sums of win/loss over T rounds:
# equal to them up to float rounding (numpy.allclose's default tolerance at 0.2).
VALUE_TOLERANCE = 1e-8 + 1e-5 * 0.2


def _label(algorithm: str, forfeit: bool) -> str:
    return f"{style.LABELS[algorithm]}, {'with' if forfeit else 'no'} forfeit"


def _curve(tuned: pd.DataFrame, algorithm: str, forfeit: bool) -> pd.DataFrame:
    rows = tuned[(tuned.algorithm == algorithm) & (tuned.forfeit == forfeit)]
    return rows.sort_values("horizon")


def linear_fit(horizon, regret) -> tuple[float, float, float]:
    """Least-squares line ``regret = a*T + b``; returns ``(a, b, R^2)``."""
    horizon, regret = np.asarray(horizon, float), np.asarray(regret, float)
    a, b = np.polyfit(horizon, regret, 1)
    residual = regret - (a * horizon + b)
    total = np.sum((regret - regret.mean()) ** 2)
    return float(a), float(b), float(1.0 - np.sum(residual**2) / total)


def _rewards(cfg: Mapping) -> str:
    r = cfg["rewards"]
    return f"win {r['win']:g}, loss {r['loss']:g}"


def scale_text(cfg: Mapping) -> str:
    """The sizes Fig 1 was computed at (the paper states neither its horizons nor its grid)."""
    horizons, steps = sorted(cfg["horizons"]), cfg["step_sizes"]
    return (f"horizons T = {style.size(horizons[0])} .. {style.size(horizons[-1])} "
            f"({len(horizons)} values), {steps['num']} step sizes {steps['min']:g} .. "
            f"{steps['max']:g} per T (the paper states neither)")


def plot(tuned: pd.DataFrame, readings: pd.DataFrame, cfg: Mapping, scale: str | None = None):
    import matplotlib.pyplot as plt

    style.setup()
    fig, (lin, log) = plt.subplots(1, 2, figsize=(11, 4.4))
    for algorithm, forfeit in CURVES:
        c = _curve(tuned, algorithm, forfeit)
        fitted = c[c.horizon >= cfg["fit_min_horizon"]]
        slope = loglog_slope(fitted.horizon, fitted.regret)
        kw = dict(color=style.PALETTE[algorithm], marker="o" if forfeit else "s",
                  linestyle="-" if forfeit else ":", markersize=4)
        lin.plot(c.horizon, c.regret, label=_label(algorithm, forfeit), **kw)
        log.plot(c.horizon, c.regret, label=f"{_label(algorithm, forfeit)}: slope {slope + 0.0:.2f}"
                 .replace("-0.00", "0.00"),
                 **kw)
    # The other readings of the rewards: the lowest regret per horizon, thin and faded.
    for _, table in readings.groupby("reading", sort=False):
        r = table.iloc[0]
        best = table.groupby(["algorithm", "forfeit", "horizon"]).regret.min().reset_index()
        for algorithm, forfeit in CURVES:
            c = best[(best.algorithm == algorithm) & (best.forfeit == forfeit)]
            log.plot(c.horizon, c.regret, color=style.PALETTE[algorithm], alpha=0.45,
                     linewidth=0.9, linestyle="-" if forfeit else ":",
                     label=f"faded: rewards win {r.win:g}, loss {r.loss:g} (another reading)"
                     if (algorithm, forfeit) == CURVES[0] else None)
    spg_f = _curve(tuned, SPG, True)
    a, b, r2 = linear_fit(spg_f.horizon, spg_f.regret)
    t = np.linspace(0, spg_f.horizon.max(), 200)
    lin.plot(t, a * t + b, "k--", linewidth=1, label=f"least-squares fit: {a:.3f} T + {b:.1f}")
    lin.set(xlabel="horizon T (rounds)", ylabel="regret $R_T$ (tuned step size)",
            title=f"Repeated matching pennies (rewards {_rewards(cfg)})")
    log.set(xscale="log", yscale="log", xlabel="horizon T (rounds)",
            ylabel="regret $R_T$ (tuned step size)",
            title=f"log-log; slopes fitted for T >= {cfg['fit_min_horizon']};\n"
                  "faded: the other reward reading")
    style.scale_note(fig, scale, scale_text(cfg))
    fig.tight_layout()
    style.place_legend(lin, fontsize=8)
    style.place_legend(log, fontsize=7)
    return fig


def local_slopes(curve: pd.DataFrame) -> str:
    """Log-log slope between consecutive horizons, for the audit's evidence."""
    h, r = curve.horizon.to_numpy(float), curve.regret.to_numpy(float)
    parts = [f"[{int(h[i])},{int(h[i + 1])}]: {loglog_slope(h[i:i + 2], r[i:i + 2]):.2f}"
             for i in range(len(h) - 1)]
    return "; ".join(parts)


def _slope_claim(tuned, cfg, algorithm, forfeit, claim, paper_says, low, high) -> Claim:
    curve = _curve(tuned, algorithm, forfeit)
    c = curve[curve.horizon >= cfg["fit_min_horizon"]]
    slope = loglog_slope(c.horizon, c.regret)
    check = Check(f"log-log slope of the tuned regret over T >= {cfg['fit_min_horizon']}",
                  slope, IN, (low, high))
    evidence = ("" if check.outcome == "pass"
                else f"; slope between consecutive horizons {local_slopes(curve)}")
    return Claim(
        FIGURE, claim, paper_says,
        f"log-log slope {fmt(slope)} over T in [{c.horizon.min()}, {c.horizon.max()}]; "
        f"regret {fmt(c.regret.iloc[0])} -> {fmt(c.regret.iloc[-1])}{evidence}",
        f"slope in [{low}, {high}]", (check,),
    )


def _grid_claim(tuned: pd.DataFrame, sweep: pd.DataFrame, cfg: Mapping) -> Claim:
    """The tuned step sizes must be interior to the grid where slopes are fitted."""
    lo, hi = sweep.step_size.min(), sweep.step_size.max()
    fitted = tuned[(tuned.horizon >= cfg["fit_min_horizon"]) & (tuned.algorithm == SPG)]
    edge = fitted[(fitted.step_size <= lo) | (fitted.step_size >= hi)]
    where = ", ".join(f"{r.algorithm}/forfeit={r.forfeit}/T={r.horizon}" for r in edge.itertuples())
    return Claim(
        FIGURE, "SPG's tuned step sizes lie inside the searched grid",
        "'even if the step size is independently tuned for each T'",
        f"grid [{fmt(lo)}, {fmt(hi)}]; tuned SPG step sizes for T >= {cfg['fit_min_horizon']} "
        f"in [{fmt(fitted.step_size.min())}, {fmt(fitted.step_size.max())}]"
        + (f"; at the edge: {where}" if len(edge) else ""),
        "no tuned step size at an end of the grid (else the tuning is cut short)",
        (Check(f"tuned SPG step sizes (T >= {cfg['fit_min_horizon']}) at an end of the grid",
               len(edge), "==", 0),),
    )


def _hedge_bound_claim(table: pd.DataFrame, reading: str, alternative: bool = False) -> Claim:
    hedge = table[(table.algorithm == HEDGE) & (~table.forfeit)]
    largest = hedge[hedge.step_size == hedge.step_size.max()]
    worst = float(largest.regret.max())
    best_tuned = float(hedge.groupby("horizon").regret.min().max())
    return Claim(
        FIGURE,
        f"Hedge regret is at most 1 for every T with a large step size ({reading})",
        "footnote 2: 'at most a constant regret of 1 for any horizon length T ... by "
        "simply choosing a large step size'",
        f"max over T of regret at the largest step size {fmt(largest.step_size.iloc[0])}: "
        f"{fmt(worst, 6)}; tuned per T: at most {fmt(best_tuned, 6)}",
        "regret <= 1 at every horizon (to 1e-9, the float tolerance)",
        (Check("largest regret over T at the largest step size", worst, "<=", 1.0 + 1e-9),),
        "differs", worst, reading, "hedge_bound", alternative,
    )


def claims(sweep: pd.DataFrame, tuned: pd.DataFrame, readings: pd.DataFrame,
           cfg: Mapping) -> list[Claim]:
    win, loss = cfg["rewards"]["win"], cfg["rewards"]["loss"]
    rows = [
        _slope_claim(tuned, cfg, SPG, False, "SPG regret grows like sqrt(T) without forfeit",
                     "'growth rate is roughly a function of sqrt(T)'", 0.35, 0.65),
        _slope_claim(tuned, cfg, SPG, True, "SPG regret grows linearly with the forfeit action",
                     "'drastically increases the regret growth-rate for SPG to linear'",
                     0.85, 1.15),
        _slope_claim(tuned, cfg, HEDGE, False, "Hedge regret stays constant (no forfeit)",
                     "'Hedge has near-constant regret'", -0.1, 0.1),
        _slope_claim(tuned, cfg, HEDGE, True, "Hedge regret stays constant (with forfeit)",
                     "'In practice, Hedge's regret remains constant'", -0.1, 0.1),
    ]
    rows.append(_grid_claim(tuned, sweep, cfg))
    spg_f = _curve(tuned, SPG, True)
    a, b, r2 = linear_fit(spg_f.horizon, spg_f.regret)
    rows.append(Claim(
        FIGURE, "the dashed line is a linear least-squares fit of SPG-with-forfeit regret",
        "caption: 'The dashed line is a linear least-squares fit'",
        f"regret = {fmt(a, 4)} T + {fmt(b, 4)}, R^2 = {fmt(r2, 5)}", "R^2 >= 0.99",
        (Check("R^2 of the least-squares line", r2, ">=", 0.99),),
    ))
    # The stated values of the fixed pure strategies, from the game itself, under the
    # default rewards and every other reading: the text's numbers hold for +1/-1.
    horizons = np.asarray(sorted(cfg["horizons"]))
    from neurd.regret import switch_rounds

    parts, deviations = [], []
    for rewards in [cfg["rewards"], *cfg["alternative_rewards"]]:
        values = []
        for h, s in zip(horizons, switch_rounds(horizons, cfg["switch_fraction"])):
            u = np.asarray(matching_pennies_utilities(np.arange(h) < s, False,
                                                      rewards["win"], rewards["loss"]))
            values.append(u.sum(axis=0) / h)
        values = np.array(values)
        deviations.append(float(np.max(np.abs(values - [[-0.2, 0.2]]))))
        parts.append(f"win={rewards['win']:g}, loss={rewards['loss']:g}: H "
                     f"{fmt(values[:, 0].min())}T..{fmt(values[:, 0].max())}T, T "
                     f"{fmt(values[:, 1].min())}T..{fmt(values[:, 1].max())}T")
    rows.append(Claim(
        FIGURE, "playing H for T rounds is worth -0.2T and T is worth 0.2T",
        "Section 1.1: 'Playing H over T-rounds achieves a value of -0.2T, while playing T "
        "achieves 0.2T' (with the text's rewards +1/-1)",
        "; ".join(parts),
        f"equal to -0.2T and 0.2T at every horizon under one of the readings (to "
        f"{VALUE_TOLERANCE:g} T)",
        (Check("smallest over the readings of the largest |value / T - (-0.2, 0.2)| over the "
               "horizons", min(deviations), "<=", VALUE_TOLERANCE),),
    ))
    rows.append(_hedge_bound_claim(sweep, f"default rewards win={win:g}, loss={loss:g}"))
    for name, table in readings.groupby("reading", sort=False):
        r = table.iloc[0]
        rows.append(_hedge_bound_claim(table, f"reading '{name}': win={r.win}, loss={r.loss}",
                                       alternative=True))
    return rows


INPUTS = {
    "sweep": "matrix/regret_sweep.parquet",
    "tuned": "matrix/regret_vs_horizon.parquet",
    "readings": "matrix/reward_readings.parquet",
}


def make(tables: Mapping[str, pd.DataFrame], cfg: Mapping, name: str = FIGURE,
         scale: str | None = None):
    """Figure and claims from the tables named in :data:`INPUTS` (``name``: this figure's;
    ``scale``: the config's, said on the figure)."""
    return (plot(tables["tuned"], tables["readings"], cfg, scale),
            claims(tables["sweep"], tables["tuned"], tables["readings"], cfg))
