"""Figures 3, 4a and 5 data: learning dynamics in (biased, nonstationary) RPS.

Tables (columns documented below and in each file's metadata):

* ``nash_sets``: where the symmetric Nash equilibria of each RPS game used
  lie (closed form and the per-action range over all equilibria, by LP);
* ``flows``: Fig 3a-d, RD/NeuRD and SPG trajectories and their continuous
  time averages from a few starts, solved with ``solve_ivp``;
* ``vector_field``: policy velocities of both flows on a coarse simplex grid
  (the arrows of Fig 3a-d);
* ``speed_ratio``: Fig 3e, ``||pi_dot_RD|| / ||pi_dot_PG||`` on a fine grid;
* ``nashconv_biased``: Fig 4a, NashConv of the time-average policy of every
  Euler-integrated trajectory, iteration by iteration;
* ``nashconv_nonstationary``: Fig 5, the same through phases nu = 20, 0, 20;
* ``nonstationary_readings``: Fig 5's mean curves under both readings of the
  time average (restarted at each phase switch or not), for the audit;
* ``*_ci``: mean and bootstrap confidence interval per (algorithm, iteration).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd import streams
from neurd.config import require
from neurd.matrix_games import (
    RPS_ACTIONS,
    biased_rps,
    biased_rps_nash,
    symmetric_equilibrium_bounds,
)
from neurd.names import LEARNERS, NEURD, SPG
from neurd.stage import Figure, Stage
from neurd.stats import bootstrap_mean_ci
from neurd.tables import read_table, tidy, write_table

log = logging.getLogger(__name__)

PROBABILITY_COLUMNS = ("rock", "paper", "scissors")
MAX_ROWS = 50_000_000  # rows of one table (a few GB in memory while it is built)

_LEARNER_DOC = ("learner: 'neurd' (= RD, dy/dt = A, eq. nerd_continuous) or 'spg' "
                "(= QPG, dy/dt = pi*A, eq. qpg)")
_POLICY_DOCS = {c: f"probability of {c.capitalize()}" for c in PROBABILITY_COLUMNS}

NASH_COLUMNS = {
    "nu": "bias of the RPS game (payoff of R against S; nu = 1 is standard RPS)",
    "action": "action: 'R', 'P' or 'S'",
    "closed_form": "probability of the action in the closed-form Nash (1, nu, 1)/(nu + 2)",
    "lower": "smallest probability of the action over all symmetric Nash policies (LP)",
    "upper": "largest probability of the action over all symmetric Nash policies (LP)",
    "unique": "whether the symmetric Nash policy is unique (every action's range below 1e-9)",
}
FLOW_COLUMNS = {
    "panel": "panel of Fig 3: 'a','b' (flows, nu = portraits.flow_nu), 'c','d' "
             "(time averages, nu = portraits.biased_nu)",
    "algorithm": _LEARNER_DOC,
    "nu": "bias of the RPS game",
    "start": "index of the initial policy in portraits.starts",
    "time": "continuous time t (one Euler iteration of Figs 4a/5 is dt = 0.1)",
    "series": "'policy': pi(t); 'time_average': (1/t) int_0^t pi(s) ds (pi(0) at t = 0)",
    **_POLICY_DOCS,
}
FIELD_COLUMNS = {
    "nu": "bias of the RPS game",
    "algorithm": _LEARNER_DOC,
    **_POLICY_DOCS,
    "d_rock": "d pi(R)/dt: eq. (rd) for neurd, eq. (qpg) for spg",
    "d_paper": "d pi(P)/dt",
    "d_scissors": "d pi(S)/dt",
    "speed": "Euclidean norm of the policy velocity",
}
SPEED_COLUMNS = {
    "nu": "bias of the RPS game",
    **_POLICY_DOCS,
    "speed_rd": "||pi_dot|| under RD (eq. rd)",
    "speed_pg": "||pi_dot|| under SPG/QPG (eq. qpg)",
    "ratio": "speed_rd / speed_pg; NaN where both vanish (at the Nash)",
}
NASHCONV_COLUMNS = {
    "algorithm": _LEARNER_DOC,
    "trajectory": "index of the initial policy (Dirichlet(1,1,1) draw; shared by both learners)",
    "iteration": "Euler iterations so far, 1-based (one iteration = dt of continuous time)",
    "phase": "game phase, 1-based (always 1 for the fixed biased game)",
    "nu": "bias of the game played in this iteration",
    "nash_conv": "NashConv (eq. nashconv) of the time-average policy against this iteration's "
                 "game: 2 max_a (M pibar)_a",
}
CI_COLUMNS = {
    "algorithm": _LEARNER_DOC,
    "iteration": "Euler iterations so far, 1-based",
    "phase": "game phase, 1-based",
    "mean": "mean NashConv over trajectories",
    "ci_low": "lower end of the bootstrap confidence interval of the mean",
    "ci_high": "upper end of the bootstrap confidence interval of the mean",
}
READING_COLUMNS = {
    "restart_average": "whether the time average restarts at each phase switch",
    "algorithm": _LEARNER_DOC,
    "iteration": "Euler iterations so far, 1-based",
    "phase": "game phase, 1-based",
    "nu": "bias of the game played in this iteration",
    "mean_nash_conv": "mean NashConv of the time-average policy over trajectories",
    "ci_low": "lower end of the bootstrap confidence interval of the mean (rps.bootstrap)",
    "ci_high": "upper end of the bootstrap confidence interval of the mean",
}


def check(cfg: Mapping) -> None:
    """Cross-field checks of the ``rps`` section (the schema has checked each value)."""
    portraits = cfg["portraits"]
    require(portraits["average_time"] > portraits["flow_time"], "rps.portraits.average_time",
            f"must exceed rps.portraits.flow_time ({portraits['flow_time']}), "
            f"got {portraits['average_time']}")
    for i, start in enumerate(portraits["starts"]):
        require(abs(sum(start) - 1.0) < 1e-9, f"rps.portraits.starts[{i}]",
                f"must sum to 1 (a policy over R, P, S), got {start}")
    # Figs 4a and 5 keep NashConv per (algorithm, trajectory, iteration): bound the tables.
    iterations = max(cfg["biased"]["iterations"],
                     len(cfg["nonstationary"]["nus"]) * cfg["nonstationary"]["phase_iterations"])
    rows = 2 * cfg["trajectories"] * iterations
    require(rows <= MAX_ROWS, "rps.trajectories",
            f"{cfg['trajectories']} trajectories x {iterations} iterations x 2 learners is "
            f"{rows:.3g} rows per table, more than {MAX_ROWS:.0e}")


# --- Nash equilibria ----------------------------------------------------------


def game_nus(cfg: Mapping) -> list[float]:
    """Every nu the RPS stage plays, in first-use order without repeats."""
    nus = [cfg["portraits"]["flow_nu"], cfg["portraits"]["biased_nu"], cfg["biased"]["nu"],
           *cfg["nonstationary"]["nus"]]
    return list(dict.fromkeys(float(nu) for nu in nus))


def nash_sets(cfg: Mapping) -> pd.DataFrame:
    """Closed-form Nash and the range of each action over all symmetric Nash policies."""
    rows = []
    for nu in game_nus(cfg):
        lower, upper = symmetric_equilibrium_bounds(biased_rps(nu))
        # LP solutions carry rounding of order 1e-12 (and signed zeros).
        lower, upper = np.clip(lower, 0.0, 1.0) + 0.0, np.clip(upper, 0.0, 1.0) + 0.0
        closed = biased_rps_nash(nu)
        unique = bool(np.all(upper - lower < 1e-9))
        for a, action in enumerate(RPS_ACTIONS):
            rows.append({"nu": nu, "action": action, "closed_form": closed[a],
                         "lower": lower[a], "upper": upper[a], "unique": unique})
        log.info("nu=%g: Nash (closed form) %s; per-action range %s; unique=%s", nu,
                 np.round(closed, 4), np.round(np.stack([lower, upper], 1), 4).tolist(), unique)
    return pd.DataFrame(rows, columns=list(NASH_COLUMNS))


# --- Fig 3: phase portraits, vector field, speed ratio ------------------------


def _flow_frame(panel, algorithm, nu, times, series, values) -> pd.DataFrame:
    """Tidy rows from ``values[start, time, action]``."""
    return tidy([{"start": np.arange(values.shape[0])}, {"time": times}],
                {c: values[:, :, a] for a, c in enumerate(PROBABILITY_COLUMNS)},
                panel=panel, algorithm=algorithm, nu=float(nu), series=series)


def flows(cfg: Mapping) -> pd.DataFrame:
    """Fig 3a-d: trajectories (a, b) and time-averaged trajectories (c, d)."""
    from neurd.dynamics import integrate_flow

    p = cfg["portraits"]
    starts = np.asarray(p["starts"], dtype=np.float64)
    flow_times = np.linspace(0.0, p["flow_time"], p["samples"])
    # Time averages move fast early and slowly late: sample them geometrically,
    # and the current policy also densely over its first cycles.
    average_times = np.unique(np.concatenate([
        flow_times, np.geomspace(p["flow_time"], p["average_time"], p["samples"])]))
    panels = [("a", NEURD, p["flow_nu"], flow_times), ("b", SPG, p["flow_nu"], flow_times),
              ("c", NEURD, p["biased_nu"], average_times),
              ("d", SPG, p["biased_nu"], average_times)]
    frames = []
    for panel, algorithm, nu, times in panels:
        start = time.perf_counter()
        policies, averages = integrate_flow(starts, biased_rps(nu), algorithm, times,
                                            rtol=p["rtol"], atol=p["rtol"])
        frames.append(_flow_frame(panel, algorithm, nu, times, "policy", policies))
        frames.append(_flow_frame(panel, algorithm, nu, times, "time_average", averages))
        log.info("flow (%s) %s nu=%g: %d starts to t=%g in %.1fs", panel, algorithm, nu,
                 len(starts), times[-1], time.perf_counter() - start)
    return pd.concat(frames, ignore_index=True)[list(FLOW_COLUMNS)]


def vector_field(cfg: Mapping) -> pd.DataFrame:
    """Policy velocities of both flows on a coarse grid, for the portraits' arrows."""
    import jax.numpy as jnp

    from neurd.dynamics import policy_velocity, simplex_grid

    p = cfg["portraits"]
    grid = simplex_grid(p["field_resolution"])
    frames = []
    for nu in dict.fromkeys((float(p["flow_nu"]), float(p["biased_nu"]))):
        for algorithm in LEARNERS:
            velocity = np.asarray(policy_velocity(jnp.log(grid), jnp.asarray(biased_rps(nu)),
                                                  algorithm))
            frame = pd.DataFrame({
                "nu": nu, "algorithm": algorithm,
                **{c: grid[:, a] for a, c in enumerate(PROBABILITY_COLUMNS)},
                **{f"d_{c}": velocity[:, a] for a, c in enumerate(PROBABILITY_COLUMNS)},
                "speed": np.linalg.norm(velocity, axis=1),
            })
            frames.append(frame)
    return pd.concat(frames, ignore_index=True)[list(FIELD_COLUMNS)]


def speed_ratios(cfg: Mapping) -> pd.DataFrame:
    """Fig 3e: ``||pi_dot_RD|| / ||pi_dot_PG||`` on a fine interior grid."""
    from neurd.dynamics import simplex_grid, speed_ratio

    p = cfg["portraits"]
    nu = float(p["biased_nu"])
    grid = simplex_grid(p["ratio_resolution"])
    rd, pg = speed_ratio(grid, biased_rps(nu))
    # At the Nash both speeds vanish and their ratio is 0/0 (rounding noise).
    defined = np.maximum(rd, pg) > 1e-12
    ratio = np.where(defined, rd / np.where(defined, pg, 1.0), np.nan)
    log.info("speed ratio nu=%g on %d points: %.3g .. %.3g", nu, len(grid),
             np.nanmin(ratio), np.nanmax(ratio))
    return pd.DataFrame({"nu": nu, **{c: grid[:, a] for a, c in enumerate(PROBABILITY_COLUMNS)},
                         "speed_rd": rd, "speed_pg": pg, "ratio": ratio})[list(SPEED_COLUMNS)]


# --- Figs 4a and 5: Euler-integrated NeuRD vs SPG over 100 starts ------------


def _nash_conv_frame(algorithm, nash_conv, phases, nus) -> pd.DataFrame:
    """Tidy rows from ``nash_conv[trajectory, iteration]``."""
    n_traj, n_iter = nash_conv.shape
    return tidy([{"trajectory": np.arange(n_traj)},
                 {"iteration": np.arange(1, n_iter + 1), "phase": phases, "nu": nus}],
                {"nash_conv": nash_conv}, algorithm=algorithm)


def run_schedule(cfg: Mapping, nus_by_iteration, phases, restart, experiment: str) -> dict:
    """NashConv ``[N, T]`` of both learners from the same initial policies."""
    from neurd.dynamics import euler_time_average_nash_conv, sample_initial_policies

    key = streams.key(cfg["seed"], f"rps.{experiment}")
    starts = sample_initial_policies(key, cfg["trajectories"], 3)
    payoffs = np.stack([biased_rps(nu) for nu in nus_by_iteration])
    results = {}
    for algorithm in LEARNERS:
        start = time.perf_counter()
        results[algorithm] = euler_time_average_nash_conv(starts, payoffs, restart, cfg["dt"],
                                                          algorithm)
        log.info("%s %s: %d trajectories x %d iterations (dt=%g) in %.1fs; final mean "
                 "NashConv %.4g", experiment, algorithm, len(starts), len(phases), cfg["dt"],
                 time.perf_counter() - start, results[algorithm][:, -1].mean())
    return results


def biased_nash_conv(cfg: Mapping) -> pd.DataFrame:
    """Fig 4a: NashConv of the time-average policy in biased RPS, every iteration."""
    from neurd.dynamics import phase_schedule

    b = cfg["biased"]
    phases, nus = phase_schedule([b["nu"]], b["iterations"])
    restart = np.zeros(len(phases), dtype=bool)
    restart[0] = True
    results = run_schedule(cfg, nus, phases, restart, "biased")
    frames = [_nash_conv_frame(a, results[a], phases, nus) for a in LEARNERS]
    return pd.concat(frames, ignore_index=True)[list(NASHCONV_COLUMNS)]


def nonstationary_nash_conv(cfg: Mapping) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig 5: phases of nu, learning carried over; the table and both readings' means."""
    from neurd.dynamics import phase_restarts, phase_schedule

    n = cfg["nonstationary"]
    phases, nus = phase_schedule(n["nus"], n["phase_iterations"])
    chosen = bool(n["restart_average"])
    table, readings = None, []
    for restart_average in (chosen, not chosen):
        results = run_schedule(cfg, nus, phases, phase_restarts(phases, restart_average),
                               "nonstationary")
        if restart_average == chosen:
            frames = [_nash_conv_frame(a, results[a], phases, nus) for a in LEARNERS]
            table = pd.concat(frames, ignore_index=True)[list(NASHCONV_COLUMNS)]
        for algorithm in LEARNERS:
            b = cfg["bootstrap"]
            mean, low, high = bootstrap_mean_ci(
                results[algorithm], resamples=b["resamples"], confidence=b["confidence"],
                method=b["method"], seed=cfg["seed"])
            readings.append(tidy(
                [{"iteration": np.arange(1, len(phases) + 1), "phase": phases, "nu": nus}],
                {"mean_nash_conv": mean, "ci_low": low, "ci_high": high},
                restart_average=restart_average, algorithm=algorithm))
    return table, pd.concat(readings, ignore_index=True)[list(READING_COLUMNS)]


def confidence_intervals(table: pd.DataFrame, cfg: Mapping) -> pd.DataFrame:
    """Mean and bootstrap CI of NashConv per (algorithm, iteration), over trajectories."""
    b = cfg["bootstrap"]
    frames = []
    for algorithm, rows in table.groupby("algorithm", sort=False):
        start = time.perf_counter()
        wide = rows.pivot(index="trajectory", columns="iteration", values="nash_conv")
        mean, low, high = bootstrap_mean_ci(
            wide.to_numpy(), resamples=b["resamples"], confidence=b["confidence"],
            method=b["method"], seed=cfg["seed"])
        phase = rows.drop_duplicates("iteration").set_index("iteration").phase
        frames.append(pd.DataFrame({
            "algorithm": algorithm, "iteration": wide.columns.to_numpy(),
            "phase": phase.loc[wide.columns].to_numpy(),
            "mean": mean, "ci_low": low, "ci_high": high,
        }))
        log.info("bootstrap %s: %d iterations x %d trajectories, %d resamples (%s) in %.1fs",
                 algorithm, wide.shape[1], wide.shape[0], b["resamples"], b["method"],
                 time.perf_counter() - start)
    return pd.concat(frames, ignore_index=True)[list(CI_COLUMNS)]


def ci_metadata(cfg: Mapping) -> dict:
    b = cfg["bootstrap"]
    return {"bootstrap": {
        "method": b["method"], "resamples": b["resamples"], "confidence": b["confidence"],
        "statistic": "mean over trajectories", "resampled": "trajectories (whole curves)",
        "implementation": "scipy.stats.bootstrap (vectorised over iterations)",
        "seed": cfg["seed"],
    }}


# --- command-line steps -------------------------------------------------------


def _initial_policies(experiment: str) -> str:
    return (f"Dirichlet(1,1,1), jax.random stream {streams.STREAMS['rps.' + experiment]} "
            "of the seed (neurd.streams)")


def _nash_step(args, cfg) -> None:
    write_table(nash_sets(cfg), args.out, columns=NASH_COLUMNS, config=cfg,
                extra={"solver": "scipy.optimize.linprog (HiGHS) over {pi : M pi <= 0}"})


def _portraits_step(args, cfg) -> None:
    solver = {"solver": "scipy.integrate.solve_ivp DOP853", "rtol": cfg["portraits"]["rtol"]}
    write_table(flows(cfg), args.flows, columns=FLOW_COLUMNS, config=cfg, extra=solver)
    write_table(vector_field(cfg), args.field, columns=FIELD_COLUMNS, config=cfg)
    write_table(speed_ratios(cfg), args.speed, columns=SPEED_COLUMNS, config=cfg)


def _biased_step(args, cfg) -> None:
    write_table(biased_nash_conv(cfg), args.out, columns=NASHCONV_COLUMNS, config=cfg,
                extra={"integrator": "explicit Euler",
                       "initial_policies": _initial_policies("biased")})


def _nonstationary_step(args, cfg) -> None:
    table, readings = nonstationary_nash_conv(cfg)
    extra = {"integrator": "explicit Euler", "initial_policies": _initial_policies("nonstationary"),
             "restart_average": cfg["nonstationary"]["restart_average"]}
    write_table(table, args.out, columns=NASHCONV_COLUMNS, config=cfg, extra=extra)
    write_table(readings, args.readings, columns=READING_COLUMNS, config=cfg, extra=extra)


def _ci_step(args, cfg) -> None:
    table = read_table(args.table)
    write_table(confidence_intervals(table, cfg), args.out, columns=CI_COLUMNS, config=cfg,
                extra=ci_metadata(cfg))


def register(stage: Stage, sub) -> None:
    """Add this stage's steps to the ``neurd`` command line."""
    p = stage.add_step(sub, "rps-nash", "where the Nash equilibria of each RPS game lie",
                       _nash_step)
    p.add_argument("--out", required=True, help="output: nash_sets.parquet")

    p = stage.add_step(sub, "rps-portraits", "Fig 3 tables: flows, vector field, speed ratio",
                       _portraits_step)
    p.add_argument("--flows", required=True, help="output: flows.parquet")
    p.add_argument("--field", required=True, help="output: vector_field.parquet")
    p.add_argument("--speed", required=True, help="output: speed_ratio.parquet")

    p = stage.add_step(sub, "rps-biased", "Fig 4a table: NashConv of time averages, biased RPS",
                       _biased_step)
    p.add_argument("--out", required=True, help="output: nashconv_biased.parquet")

    p = stage.add_step(sub, "rps-nonstationary", "Fig 5 tables: NashConv through phases of nu",
                       _nonstationary_step)
    p.add_argument("--out", required=True, help="output: nashconv_nonstationary.parquet")
    p.add_argument("--readings", required=True, help="output: nonstationary_readings.parquet")

    p = stage.add_step(sub, "rps-ci", "bootstrap CI of mean NashConv per iteration", _ci_step)
    p.add_argument("--table", required=True, help="input: a nashconv_*.parquet table")
    p.add_argument("--out", required=True, help="output: the matching *_ci.parquet")


STAGE = Stage(
    section="rps",
    check=check,
    figures=lambda cfg: [Figure(name, name) for name in ("fig3", "fig4a", "fig5")],
    register=register,
)
