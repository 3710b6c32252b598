"""Figure 4a: NashConv of the time-average NeuRD and SPG policies in biased RPS.

Continuous-time NeuRD (``dy/dt = A``) and SPG (``dy/dt = pi * A``) integrated
with explicit Euler (dt = one iteration) from initial policies drawn
uniformly from the simplex; mean NashConv over trajectories with its shaded
bootstrap confidence band, log-log axes.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd import names
from neurd.audit import Check, Claim, fmt
from neurd.figures import style
from neurd.names import NEURD, SPG
from neurd.stats import MIN_CI_SAMPLES, first_crossing, loglog_slope

FIGURE = "fig4a"
INPUTS = {
    "nashconv": "rps/nashconv_biased.parquet",
    "ci": "rps/nashconv_biased_ci.parquet",
}
ALGORITHMS = names.LEARNERS

# Audit thresholds, fixed before looking at the results: over the last decade
# of iterations a log-log slope <= -0.25 (NashConv falls >= 44% per decade) is
# "still falling"; |slope| <= 0.1 (changes < 26% per decade) is "plateau".
FALLING_SLOPE = -0.25
PLATEAU_SLOPE = 0.1
LEVELS = (0.5, 0.1)          # "faster": first iteration at these fractions of the start
STUCK = 1.0                  # a trajectory whose final NashConv exceeds this has not converged


# The paper's sizes (Fig 4a's text): 100 starts, 1000 bootstrap resamples, dt = 0.1.
PAPER_STARTS, PAPER_RESAMPLES, PAPER_DT = 100, 1000, 0.1


def scale_text(cfg: Mapping, n_trajectories: int, iterations: int) -> str:
    """Fig 4a's sizes against the paper's (it does not state the number of iterations)."""
    return (f"{style.versus(n_trajectories, PAPER_STARTS, 'starts')}, "
            f"{style.versus(cfg['bootstrap']['resamples'], PAPER_RESAMPLES, 'resamples')}, "
            f"dt = {cfg['dt']:g}" + (" (the paper's)" if cfg["dt"] == PAPER_DT else
                                      f" (the paper's: {PAPER_DT:g})")
            + f", {style.size(iterations)} iterations (the paper states none)")


def _curve(ci: pd.DataFrame, algorithm: str) -> pd.DataFrame:
    return ci[ci.algorithm == algorithm].sort_values("iteration")


def plot(ci: pd.DataFrame, cfg: Mapping, n_trajectories: int, scale: str | None = None):
    import matplotlib.pyplot as plt

    style.setup()
    fig, ax = plt.subplots(figsize=(5.5, 4))
    for algorithm in ALGORITHMS:
        c = _curve(ci, algorithm)
        color = style.PALETTE[algorithm]
        ax.plot(c.iteration, c["mean"], color=color, label=style.LABELS[algorithm])
        if n_trajectories >= MIN_CI_SAMPLES:
            ax.fill_between(c.iteration, c.ci_low, c.ci_high, color=color, alpha=0.25,
                            linewidth=0)
    ax.set(xscale="log", yscale="log", xlabel=f"iteration (Euler step dt = {cfg['dt']:g})",
           ylabel="NashConv of the time-average policy",
           title=rf"Biased RPS ($\nu$ = {cfg['biased']['nu']:g}): mean of {n_trajectories} "
                 f"starts,\n{style.band_text(n_trajectories, 'starts', cfg['bootstrap'])}")
    style.label_log_axis(ax.yaxis)
    style.scale_note(fig, scale, scale_text(cfg, n_trajectories, int(ci.iteration.max())))
    fig.tight_layout()
    style.place_legend(ax)
    return fig


def last_decade_slope(curve: pd.DataFrame) -> float:
    """Log-log slope of the mean over iterations ``[T/10, T]``."""
    tail = curve[curve.iteration >= curve.iteration.max() / 10.0]
    return loglog_slope(tail.iteration, tail["mean"])


def _faster_claim(ci: pd.DataFrame) -> Claim:
    curves = {a: _curve(ci, a) for a in ALGORITHMS}
    start = float(curves[NEURD]["mean"].iloc[0])
    reached = {a: [first_crossing(c.iteration, c["mean"], level * start) for level in LEVELS]
               for a, c in curves.items()}
    never = {a: [np.inf if np.isnan(x) else float(x) for x in r] for a, r in reached.items()}
    n, s = curves[NEURD].set_index("iteration"), curves[SPG].set_index("iteration")
    apart = n.ci_high < s.ci_low
    # First iteration from which NeuRD's band stays below SPG's to the end.
    tail_start = apart[::-1].cummin()[::-1]
    separated_from = tail_start.idxmax() if tail_start.any() else float("nan")

    def when(x):
        return "never" if np.isnan(x) else str(int(x))

    return Claim(
        FIGURE, "NeuRD approaches Nash faster than SPG",
        "'NeuRD not only converges towards the Nash equilibrium faster, but SPG eventually "
        "plateaus'",
        "; ".join(f"mean NashConv <= {lvl:g} x start ({fmt(lvl * start)}): NeuRD at iteration "
                  f"{when(a)}, SPG {when(b)}" for lvl, a, b in
                  zip(LEVELS, reached[NEURD], reached[SPG]))
        + f"; CIs disjoint (NeuRD below) from iteration {when(float(separated_from))} to the end",
        f"NeuRD reaches each level ({', '.join(f'{x:g}' for x in LEVELS)} x start) strictly "
        "before SPG (never: inf iterations, so NeuRD never reaching a level fails it)",
        tuple(Check(f"iteration NeuRD's mean first <= {lvl:g} x start (threshold: SPG's, inf: "
                    "never)", n, "<", s)
              for lvl, n, s in zip(LEVELS, never[NEURD], never[SPG])),
    )


def _trend_claims(ci: pd.DataFrame, nashconv: pd.DataFrame) -> list[Claim]:
    neurd, spg = _curve(ci, NEURD), _curve(ci, SPG)
    t = int(neurd.iteration.max())
    neurd_slope, spg_slope = last_decade_slope(neurd), last_decade_slope(spg)
    final = nashconv[nashconv.iteration == t]
    stuck = final[final.algorithm == SPG].nash_conv > STUCK
    worst_neurd = final[final.algorithm == NEURD].nash_conv.max()
    at = {k: neurd.set_index("iteration")["mean"].get(k) for k in (t // 10, t)}
    at_spg = {k: spg.set_index("iteration")["mean"].get(k) for k in (t // 10, t)}
    return [
        Claim(FIGURE, "NeuRD's NashConv keeps falling",
              "'NeuRD ... converges towards the Nash equilibrium'",
              f"mean {fmt(at[t // 10])} at iteration {t // 10} -> {fmt(at[t])} at {t}; "
              f"log-log slope over [{t // 10}, {t}] {fmt(neurd_slope)}; worst trajectory at "
              f"{t}: {fmt(worst_neurd)}",
              f"slope <= {FALLING_SLOPE}",
              (Check(f"log-log slope of NeuRD's mean over [{t // 10}, {t}]", neurd_slope, "<=",
                     FALLING_SLOPE),)),
        Claim(FIGURE, "SPG's NashConv plateaus",
              "'SPG eventually plateaus'",
              f"mean {fmt(at_spg[t // 10])} at iteration {t // 10} -> {fmt(at_spg[t])} at {t}; "
              f"log-log slope over [{t // 10}, {t}] {fmt(spg_slope)}; lowest mean "
              f"{fmt(spg['mean'].min())} at iteration "
              f"{int(spg.iteration.iloc[spg['mean'].argmin()])}; "
              f"{int(stuck.sum())} of "
              f"{len(stuck)} SPG trajectories end with NashConv > {STUCK:g} (max "
              f"{fmt(final[final.algorithm == SPG].nash_conv.max())})",
              f"|slope| <= {PLATEAU_SLOPE} and SPG's final mean above NeuRD's",
              (Check(f"|log-log slope| of SPG's mean over [{t // 10}, {t}]", abs(spg_slope),
                     "<=", PLATEAU_SLOPE),
               Check(f"SPG's mean at {t} (threshold: NeuRD's)", at_spg[t], ">", at[t]))),
    ]


def claims(nashconv: pd.DataFrame, ci: pd.DataFrame) -> list[Claim]:
    return [_faster_claim(ci), *_trend_claims(ci, nashconv)]


def make(tables: Mapping[str, pd.DataFrame], cfg: Mapping, name: str = FIGURE,
         scale: str | None = None):
    """Figure and claims from the tables named in :data:`INPUTS` (``name``: this figure's;
    ``scale``: the config's, said on the figure)."""
    nashconv, ci = tables["nashconv"], tables["ci"]
    return plot(ci, cfg, nashconv.trajectory.nunique(), scale), claims(nashconv, ci)
