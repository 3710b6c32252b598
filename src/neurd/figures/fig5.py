"""Figure 5: NashConv of time-average NeuRD and SPG policies in nonstationary RPS.

The bias nu switches between phases (paper: 20, 0, 20, 1000 iterations
each); learning carries over the switches and NashConv is taken against the
current phase's game.  Left: the configured reading of the time average
(``rps.nonstationary.restart_average``) with its bootstrap band, phases
separated by red dashes as in the paper.  Right: the mean curves under the
other reading, for comparison.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd import names
from neurd.audit import Check, Claim, fmt, paired_check
from neurd.figures import style
from neurd.matrix_games import biased_rps
from neurd.names import NEURD, SPG
from neurd.stats import MIN_CI_SAMPLES, loglog_slope, mean_height, paired_difference_ci

FIGURE = "fig5"
INPUTS = {
    "nashconv": "rps/nashconv_nonstationary.parquet",
    "ci": "rps/nashconv_nonstationary_ci.parquet",
    "readings": "rps/nonstationary_readings.parquet",
    "nash": "rps/nash_sets.parquet",
}
ALGORITHMS = names.LEARNERS

# Audit thresholds, fixed before looking at the results (as Fig 4a, over the
# second half of each phase): slope <= -0.25 "decreasing", |slope| <= 0.1 "plateau".
FALLING_SLOPE = -0.25
PLATEAU_SLOPE = 0.1
CENTRE = np.full(3, 1.0 / 3.0)
VERTICES = np.eye(3)


def _reading_name(restart: bool) -> str:
    return "time average restarts each phase" if restart else "time average over all iterations"


def phase_bounds(frame: pd.DataFrame) -> list[tuple[int, float, int, int]]:
    """``(phase, nu, first iteration, last iteration)`` of every phase, in order."""
    g = frame.groupby("phase").agg(nu=("nu", "first"), first=("iteration", "min"),
                                   last=("iteration", "max"))
    return [(int(p), float(r.nu), int(r["first"]), int(r["last"])) for p, r in g.iterrows()]


def _phase_lines(ax, bounds) -> None:
    for phase, nu, first, last in bounds:
        if first > 1:
            ax.axvline(first - 0.5, **style.PHASE_LINE)
        ax.text((first + last) / 2, 0.98, rf"phase {phase}: $\nu$ = {nu:g}", ha="center",
                va="top", fontsize=8, transform=ax.get_xaxis_transform(),
                bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})


# The paper's sizes (Fig 5's text, and Fig 4a's setup it reuses): 100 starts, 1000 bootstrap
# resamples, 1000 iterations per phase.
PAPER_STARTS, PAPER_RESAMPLES, PAPER_PHASE = 100, 1000, 1000


def scale_text(cfg: Mapping, n_trajectories: int) -> str:
    """Fig 5's sizes against the paper's."""
    phase = cfg["nonstationary"]["phase_iterations"]
    return (f"{style.versus(n_trajectories, PAPER_STARTS, 'starts')}, "
            f"{style.versus(cfg['bootstrap']['resamples'], PAPER_RESAMPLES, 'resamples')}, "
            f"{style.versus(phase, PAPER_PHASE, 'iterations per phase')}")


def plot(ci: pd.DataFrame, readings: pd.DataFrame, cfg: Mapping, n_trajectories: int,
         scale: str | None = None):
    import matplotlib.pyplot as plt

    style.setup()
    restart = bool(cfg["nonstationary"]["restart_average"])
    fig, (main, other) = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
    band = n_trajectories >= MIN_CI_SAMPLES
    # One line per phase: NashConv jumps at a switch (a new game), it is not a path.
    for algorithm in ALGORITHMS:
        color = style.PALETTE[algorithm]
        for phase, c in ci[ci.algorithm == algorithm].groupby("phase"):
            c = c.sort_values("iteration")
            main.plot(c.iteration, c["mean"], color=color,
                      label=style.LABELS[algorithm] if phase == 1 else None)
            if band:
                main.fill_between(c.iteration, c.ci_low, c.ci_high, color=color, alpha=0.25,
                                  linewidth=0)
        r = readings[(readings.algorithm == algorithm) & (readings.restart_average != restart)]
        for phase, c in r.groupby("phase"):
            other.plot(c.iteration, c.mean_nash_conv, color=color,
                       label=style.LABELS[algorithm] if phase == 1 else None)
            if band:
                other.fill_between(c.iteration, c.ci_low, c.ci_high, color=color, alpha=0.25,
                                   linewidth=0)
    bands = style.band_text(n_trajectories, "starts", cfg["bootstrap"])
    main.set(yscale="log", xlabel="iteration", ylabel="NashConv of the time-average policy",
             title=f"{_reading_name(restart)} (configured)\nmean of {n_trajectories} starts, "
                   f"{bands}")
    other.set(xlabel="iteration", title=f"{_reading_name(not restart)} (other reading)\n"
                                          f"mean of {n_trajectories} starts, {bands}")
    bounds = phase_bounds(readings)
    for ax in (main, other):
        ax.set_xlim(0, bounds[-1][3] + 1)
        _phase_lines(ax, bounds)
    style.scale_note(fig, scale, scale_text(cfg, n_trajectories))
    fig.tight_layout()
    style.place_legend(main)
    return fig


# --- claims -----------------------------------------------------------------


def second_half_slope(curve: pd.DataFrame, first: int, last: int, column: str = "mean") -> float:
    """Log-log slope of ``column`` against the iteration within the phase, second half."""
    k = curve.iteration - first + 1
    half = curve[(k >= (last - first + 1) / 2.0) & (curve.iteration <= last)]
    return loglog_slope(half.iteration - first + 1, half[column])


def weakly_dominated(payoff: np.ndarray) -> list[tuple[str, str]]:
    """Pairs ``(a, b)`` of RPS actions where row ``b`` weakly dominates row ``a``."""
    pairs = []
    for i, a in enumerate("RPS"):
        for j, b in enumerate("RPS"):
            if i != j and np.all(payoff[j] >= payoff[i]) and np.any(payoff[j] > payoff[i]):
                pairs.append((a, b))
    return pairs


# What the paper says about each phase's Nash, by the phase's nu.
PAPER_NASH = {
    20.0: ("'This effectively biases the Nash towards one of the simplex corners (see Fig 3c) "
           "... then again towards the corner'", "corner"),
    0.0: ("'... then to the center (Fig 3a)'", "centre"),
}


def _nash_claims(nash: pd.DataFrame, bounds) -> list[Claim]:
    rows = []
    for phase, nu, _, _ in bounds:
        g = nash[np.isclose(nash.nu, nu)].set_index("action").loc[["R", "P", "S"]]
        point, lower, upper = g.closed_form.to_numpy(), g.lower.to_numpy(), g.upper.to_numpy()
        unique = bool(g.unique.iloc[0])
        to_centre = np.linalg.norm(point - CENTRE)
        to_vertex = np.min(np.linalg.norm(point - VERTICES, axis=1))
        paper_says, where = PAPER_NASH.get(nu, ("(not a phase of the paper)", None))
        checks = [Check("unique Nash (1: yes, 0: no)", float(unique), "==", 1)]
        if where == "centre":
            criterion = "unique Nash at the centre (1/3, 1/3, 1/3), to 1e-9"
            checks.append(Check("distance of the Nash to the centre", to_centre, "<", 1e-9))
        elif where == "corner":
            criterion = "unique Nash, nearer a vertex than the centre"
            checks.append(Check("distance of the Nash to the nearest vertex (threshold: to the "
                                "centre)", to_vertex, "<", to_centre))
        else:
            criterion = "unique Nash"
        ranges = ", ".join(f"{a} in [{fmt(lo, 4)}, {fmt(hi, 4)}]"
                           for a, lo, hi in zip("RPS", lower, upper))
        set_text = "unique" if unique else f"NOT unique: the Nash policies are {ranges} (M pi <= 0)"
        never = [a for a, hi in zip("RPS", upper) if hi < 1e-9]
        if never:
            set_text += f"; on the simplex boundary ({', '.join(never)} never played)"
        dominated = weakly_dominated(biased_rps(nu))
        if dominated:
            set_text += "; " + ", ".join(f"{b} weakly dominates {a}" for a, b in dominated)
        rows.append(Claim(
            FIGURE, f"phase {phase} (nu = {nu:g}): where the Nash lies", paper_says,
            f"closed form (1, nu, 1)/(nu + 2) = {np.round(point, 4).tolist()}; {set_text}; "
            f"distance to centre {fmt(to_centre)}, to the nearest vertex "
            f"({'RPS'[int(np.argmin(np.linalg.norm(point - VERTICES, axis=1)))]}) {fmt(to_vertex)}",
            criterion, tuple(checks), "differs"))
    return rows


def _paired_end(nashconv: pd.DataFrame, phase: int, last: int, cfg: Mapping):
    """CI of the mean paired difference NeuRD - SPG at the phase's last iteration, trajectory
    by trajectory (both learners start each trajectory from the same policy)."""
    at = nashconv[(nashconv.phase == phase) & (nashconv.iteration == last)]
    value = {a: at[at.algorithm == a].set_index("trajectory").nash_conv.sort_index()
             for a in ALGORITHMS}
    both = value[NEURD].index.intersection(value[SPG].index)
    boot = cfg["bootstrap"]
    return paired_difference_ci(value[NEURD].loc[both], value[SPG].loc[both],
                                resamples=int(boot["resamples"]),
                                confidence=float(boot["confidence"]), method=boot["method"],
                                seed=int(cfg["seed"])), len(both)


def _trend_rows(ci: pd.DataFrame, nashconv: pd.DataFrame, bounds, cfg: Mapping) -> list[Claim]:
    return [claim for bound in bounds for claim in _phase_trend(ci, nashconv, bound, cfg)]


def _phase_trend(ci: pd.DataFrame, nashconv: pd.DataFrame, bound, cfg: Mapping
                 ) -> tuple[Claim, Claim, Claim]:
    """A phase's claims: NeuRD's NashConv decreases, SPG's plateaus, NeuRD ends below SPG."""
    phase, nu, first, last = bound
    claims = []
    curves = {a: ci[(ci.algorithm == a) & (ci.phase == phase)].sort_values("iteration")
              for a in ALGORITHMS}
    slope = {a: second_half_slope(c, first, last) for a, c in curves.items()}
    start = {a: float(c["mean"].iloc[0]) for a, c in curves.items()}
    end = {a: c.iloc[-1] for a, c in curves.items()}
    mid = (first + last) // 2
    tag = f"phase {phase} (nu = {nu:g})"
    claims.append(Claim(
        FIGURE, f"{tag}: NeuRD's NashConv decreases",
        "'Despite the changing payoffs, the NeuRD NashConv decreases in each of the phases'",
        f"mean {fmt(start[NEURD])} at iteration {first} -> {fmt(end[NEURD]['mean'])} at "
        f"{last}; log-log slope over iterations {mid}-{last} of the phase "
        f"{fmt(slope[NEURD])}", f"end < start and slope <= {FALLING_SLOPE}",
        (Check("NeuRD's mean at the phase's end (threshold: at its start)",
               end[NEURD]["mean"], "<", start[NEURD]),
         Check("log-log slope of NeuRD's mean over the second half", slope[NEURD], "<=",
               FALLING_SLOPE))))
    claims.append(Claim(
        FIGURE, f"{tag}: SPG's NashConv plateaus",
        "'while SPG plateaus'",
        f"mean {fmt(start[SPG])} at iteration {first} -> {fmt(end[SPG]['mean'])} at "
        f"{last}; log-log slope over the second half {fmt(slope[SPG])}",
        f"|slope| <= {PLATEAU_SLOPE}",
        (Check("|log-log slope| of SPG's mean over the second half", abs(slope[SPG]), "<=",
               PLATEAU_SLOPE),)))
    heights = {a: mean_height(c.iteration, c["mean"]) for a, c in curves.items()}
    (mean, low, high), pairs = _paired_end(nashconv, phase, last, cfg)
    claims.append(Claim(
        FIGURE, f"{tag}: NeuRD ends the phase below SPG",
        "Fig 5: NeuRD's curve below SPG's in each phase",
        f"at iteration {last}: NeuRD {fmt(end[NEURD]['mean'])} "
        f"[{fmt(end[NEURD]['ci_low'])}, {fmt(end[NEURD]['ci_high'])}], SPG "
        f"{fmt(end[SPG]['mean'])} [{fmt(end[SPG]['ci_low'])}, "
        f"{fmt(end[SPG]['ci_high'])}]; paired difference NeuRD - SPG over {pairs} "
        f"trajectories {fmt(mean)}, CI [{fmt(low)}, {fmt(high)}]; mean over the phase "
        f"(area / width) NeuRD {fmt(heights[NEURD])}, SPG {fmt(heights[SPG])}",
        "at the phase's end, the bootstrap CI of the mean paired difference NeuRD - SPG "
        "lies below 0 (tie: it covers 0)",
        (paired_check("CI of the mean paired difference NeuRD - SPG at the phase's end",
                      low, high),)))
    return tuple(claims)


def _other_reading_claim(readings: pd.DataFrame, bounds, restart: bool) -> Claim:
    other = readings[readings.restart_average != restart]
    parts, checks, held = [], [], 0
    for phase, _, first, last in bounds:
        c = {a: other[(other.algorithm == a) & (other.phase == phase)].sort_values("iteration")
             for a in ALGORITHMS}
        slope = second_half_slope(c[NEURD], first, last, "mean_nash_conv")
        end = {a: float(c[a].mean_nash_conv.iloc[-1]) for a in ALGORITHMS}
        start = float(c[NEURD].mean_nash_conv.iloc[0])
        this = (Check(f"phase {phase}: NeuRD's mean at the end (threshold: at the start)",
                      end[NEURD], "<", start),
                Check(f"phase {phase}: log-log slope of NeuRD's mean over the second half",
                      slope, "<=", FALLING_SLOPE),
                Check(f"phase {phase}: NeuRD's mean at the end (threshold: SPG's)", end[NEURD],
                      "<", end[SPG]))
        checks += this
        held += all(c.outcome == "pass" for c in this)
        parts.append(f"phase {phase}: NeuRD {fmt(start)} -> {fmt(end[NEURD])} (slope "
                     f"{fmt(slope)}), SPG ends {fmt(end[SPG])}")
    return Claim(
        FIGURE, f"the same claims under the other reading ({_reading_name(not restart)})",
        "the paper does not say whether the time average restarts at a phase switch",
        "; ".join(parts),
        f"in every phase NeuRD's mean ends below its start, falls (slope <= {FALLING_SLOPE}) "
        "and ends below SPG's",
        tuple(checks), "fail", float(held), _reading_name(not restart), EVERY_PHASE, True)


EVERY_PHASE = "every_phase_falls_below_spg"  # the key of the claims under both readings


def reading_claims(ci, readings, cfg, nashconv) -> tuple[Claim, Claim]:
    """Fig 5's claim under each reading of the time average, for the readings study: in
    every phase NeuRD's NashConv falls and ends below SPG's.  Under the configured reading,
    from the phases' own claims (value: the phases where both pass); under the other, the
    audit's row (:func:`_other_reading_claim`)."""
    restart = bool(cfg["nonstationary"]["restart_average"])
    bounds = phase_bounds(readings)
    trends = [_phase_trend(ci, nashconv, bound, cfg) for bound in bounds]
    phases = [claim for falls, _, below in trends for claim in (falls, below)]
    held = sum(falls.verdict == "pass" and below.verdict == "pass"
               for falls, _, below in trends)
    configured = Claim(
        FIGURE, "in every phase NeuRD's NashConv falls and ends below SPG's",
        "'Despite the changing payoffs, the NeuRD NashConv decreases in each of the phases'",
        "; ".join(f"{c.claim}: {c.verdict}" for c in phases),
        "every phase's claims that NeuRD's NashConv decreases and ends below SPG's pass",
        tuple(Check(f"{c.claim}: passes (1: yes)", float(c.verdict == "pass"), "==", 1.0)
              for c in phases), "fail", float(held), _reading_name(restart), EVERY_PHASE)
    return configured, _other_reading_claim(readings, bounds, restart)


def claims(ci, readings, nash, cfg, nashconv) -> list[Claim]:
    restart = bool(cfg["nonstationary"]["restart_average"])
    bounds = phase_bounds(readings)
    return [*_nash_claims(nash, bounds), *_trend_rows(ci, nashconv, bounds, cfg),
            _other_reading_claim(readings, bounds, restart)]


def make(tables: Mapping[str, pd.DataFrame], cfg: Mapping, name: str = FIGURE,
         scale: str | None = None):
    """Figure and claims from the tables named in :data:`INPUTS` (``name``: this figure's;
    ``scale``: the config's, said on the figure)."""
    ci, readings = tables["ci"], tables["readings"]
    n = tables["nashconv"].trajectory.nunique()
    return (plot(ci, readings, cfg, n, scale),
            claims(ci, readings, tables["nash"], cfg, tables["nashconv"]))
