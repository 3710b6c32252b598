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
from typing import Mapping

import jax.numpy as jnp
import numpy as np
import pandas as pd

from neurd.config import load_snapshot
from neurd.dynamics import (
    euler_time_average_nash_conv,
    integrate_flow,
    policy_velocity,
    sample_initial_policies,
    speed_ratio,
)
from neurd.matrix_games import (
    RPS_ACTIONS,
    biased_rps,
    biased_rps_nash,
    symmetric_equilibrium_bounds,
)
from neurd.pipeline._steps import add_step
from neurd.stats import bootstrap_mean_ci
from neurd.tables import write_table

log = logging.getLogger(__name__)

ALGORITHMS = ("neurd", "spg")
PROBABILITY_COLUMNS = ("rock", "paper", "scissors")
# Independent draws of initial policies from the one global seed.
STREAMS = {"biased": 1, "nonstationary": 2}

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
}


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


def portrait_starts(cfg: Mapping) -> np.ndarray:
    """The initial policies of Fig 3's trajectories, checked, ``[N, 3]``."""
    starts = np.asarray(cfg["portraits"]["starts"], dtype=np.float64)
    if starts.ndim != 2 or starts.shape[1] != 3:
        raise ValueError("rps.portraits.starts must be a list of [R, P, S] policies, "
                         f"got {starts.tolist()}")
    bad = [s.tolist() for s in starts if np.any(s <= 0.0) or not np.isclose(s.sum(), 1.0)]
    if bad:
        raise ValueError(f"rps.portraits.starts must be interior policies summing to 1; bad: {bad}")
    return starts


def _flow_frame(panel, algorithm, nu, times, series, values) -> pd.DataFrame:
    """Tidy rows from ``values[start, time, action]``."""
    n_starts, n_times, _ = values.shape
    frame = pd.DataFrame({
        "panel": panel, "algorithm": algorithm, "nu": float(nu),
        "start": np.repeat(np.arange(n_starts), n_times),
        "time": np.tile(times, n_starts), "series": series,
    })
    for a, column in enumerate(PROBABILITY_COLUMNS):
        frame[column] = values[:, :, a].ravel()
    return frame


def flows(cfg: Mapping) -> pd.DataFrame:
    """Fig 3a-d: trajectories (a, b) and time-averaged trajectories (c, d)."""
    p = cfg["portraits"]
    starts = portrait_starts(cfg)
    if not p["average_time"] > p["flow_time"]:
        raise ValueError(f"rps.portraits.average_time ({p['average_time']}) must exceed "
                         f"rps.portraits.flow_time ({p['flow_time']})")
    flow_times = np.linspace(0.0, p["flow_time"], p["samples"])
    # Time averages move fast early and slowly late: sample them geometrically,
    # and the current policy also densely over its first cycles.
    average_times = np.unique(np.concatenate([
        flow_times, np.geomspace(p["flow_time"], p["average_time"], p["samples"])]))
    panels = [("a", "neurd", p["flow_nu"], flow_times), ("b", "spg", p["flow_nu"], flow_times),
              ("c", "neurd", p["biased_nu"], average_times),
              ("d", "spg", p["biased_nu"], average_times)]
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


def simplex_grid(resolution: int) -> np.ndarray:
    """Interior points ``(i, j, k) / resolution`` with ``i, j, k >= 1``, ``[K, 3]``."""
    if resolution < 3:
        raise ValueError(f"simplex grid resolution must be >= 3, got {resolution!r}")
    points = [(i, j, resolution - i - j) for i in range(1, resolution - 1)
              for j in range(1, resolution - i)]
    return np.asarray(points, dtype=np.float64) / resolution


def vector_field(cfg: Mapping) -> pd.DataFrame:
    """Policy velocities of both flows on a coarse grid, for the portraits' arrows."""
    p = cfg["portraits"]
    grid = simplex_grid(p["field_resolution"])
    frames = []
    for nu in dict.fromkeys((float(p["flow_nu"]), float(p["biased_nu"]))):
        for algorithm in ALGORITHMS:
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
    return pd.DataFrame({
        "algorithm": algorithm,
        "trajectory": np.repeat(np.arange(n_traj), n_iter),
        "iteration": np.tile(np.arange(1, n_iter + 1), n_traj),
        "phase": np.tile(phases, n_traj),
        "nu": np.tile(nus, n_traj),
        "nash_conv": nash_conv.ravel(),
    })


def phase_schedule(nus, phase_iterations: int) -> tuple[np.ndarray, np.ndarray]:
    """Phase number (1-based) and nu of every iteration, ``-> ([T], [T])``."""
    if int(phase_iterations) != phase_iterations or phase_iterations < 1:
        raise ValueError(f"phase_iterations must be a positive integer, got {phase_iterations!r}")
    if len(nus) < 1:
        raise ValueError("need at least one phase (nus is empty)")
    phases = np.repeat(np.arange(1, len(nus) + 1), int(phase_iterations))
    return phases, np.asarray(nus, dtype=np.float64)[phases - 1]


def run_schedule(cfg: Mapping, nus_by_iteration, phases, restart, stream: str) -> dict:
    """NashConv ``[N, T]`` of both learners from the same initial policies."""
    starts = sample_initial_policies(cfg["seed"], cfg["trajectories"], 3, STREAMS[stream])
    payoffs = np.stack([biased_rps(nu) for nu in nus_by_iteration])
    results = {}
    for algorithm in ALGORITHMS:
        start = time.perf_counter()
        results[algorithm] = euler_time_average_nash_conv(starts, payoffs, restart, cfg["dt"],
                                                          algorithm)
        log.info("%s %s: %d trajectories x %d iterations (dt=%g) in %.1fs; final mean "
                 "NashConv %.4g", stream, algorithm, len(starts), len(phases), cfg["dt"],
                 time.perf_counter() - start, results[algorithm][:, -1].mean())
    return results


def biased_nash_conv(cfg: Mapping) -> pd.DataFrame:
    """Fig 4a: NashConv of the time-average policy in biased RPS, every iteration."""
    b = cfg["biased"]
    phases, nus = phase_schedule([b["nu"]], b["iterations"])
    restart = np.zeros(len(phases), dtype=bool)
    restart[0] = True
    results = run_schedule(cfg, nus, phases, restart, "biased")
    frames = [_nash_conv_frame(a, results[a], phases, nus) for a in ALGORITHMS]
    return pd.concat(frames, ignore_index=True)[list(NASHCONV_COLUMNS)]


def phase_restarts(phases: np.ndarray, restart_average: bool) -> np.ndarray:
    """Where the time average starts afresh: iteration 1, and each switch if asked."""
    restart = np.zeros(len(phases), dtype=bool)
    restart[0] = True
    if restart_average:
        restart[1:] = phases[1:] != phases[:-1]
    return restart


def nonstationary_nash_conv(cfg: Mapping) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Fig 5: phases of nu, learning carried over; the table and both readings' means."""
    n = cfg["nonstationary"]
    phases, nus = phase_schedule(n["nus"], n["phase_iterations"])
    chosen = bool(n["restart_average"])
    table, readings = None, []
    for restart_average in (chosen, not chosen):
        results = run_schedule(cfg, nus, phases, phase_restarts(phases, restart_average),
                               "nonstationary")
        if restart_average == chosen:
            frames = [_nash_conv_frame(a, results[a], phases, nus) for a in ALGORITHMS]
            table = pd.concat(frames, ignore_index=True)[list(NASHCONV_COLUMNS)]
        for algorithm in ALGORITHMS:
            readings.append(pd.DataFrame({
                "restart_average": restart_average, "algorithm": algorithm,
                "iteration": np.arange(1, len(phases) + 1), "phase": phases, "nu": nus,
                "mean_nash_conv": results[algorithm].mean(axis=0),
            }))
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


def _nash_step(args) -> None:
    cfg = load_snapshot(args.config)
    write_table(nash_sets(cfg), args.out, columns=NASH_COLUMNS, config=cfg,
                extra={"solver": "scipy.optimize.linprog (HiGHS) over {pi : M pi <= 0}"})


def _portraits_step(args) -> None:
    cfg = load_snapshot(args.config)
    solver = {"solver": "scipy.integrate.solve_ivp DOP853", "rtol": cfg["portraits"]["rtol"]}
    write_table(flows(cfg), args.flows, columns=FLOW_COLUMNS, config=cfg, extra=solver)
    write_table(vector_field(cfg), args.field, columns=FIELD_COLUMNS, config=cfg)
    write_table(speed_ratios(cfg), args.speed, columns=SPEED_COLUMNS, config=cfg)


def _biased_step(args) -> None:
    cfg = load_snapshot(args.config)
    write_table(biased_nash_conv(cfg), args.out, columns=NASHCONV_COLUMNS, config=cfg,
                extra={"integrator": "explicit Euler", "initial_policies": "Dirichlet(1,1,1), "
                       f"jax.random stream {STREAMS['biased']} of the seed"})


def _nonstationary_step(args) -> None:
    cfg = load_snapshot(args.config)
    table, readings = nonstationary_nash_conv(cfg)
    extra = {"integrator": "explicit Euler", "initial_policies": "Dirichlet(1,1,1), "
             f"jax.random stream {STREAMS['nonstationary']} of the seed",
             "restart_average": cfg["nonstationary"]["restart_average"]}
    write_table(table, args.out, columns=NASHCONV_COLUMNS, config=cfg, extra=extra)
    write_table(readings, args.readings, columns=READING_COLUMNS, config=cfg, extra=extra)


def _ci_step(args) -> None:
    cfg = load_snapshot(args.config)
    table = pd.read_parquet(args.table)
    write_table(confidence_intervals(table, cfg), args.out, columns=CI_COLUMNS, config=cfg,
                extra=ci_metadata(cfg))


def register(sub) -> None:
    """Add this stage's steps to the ``neurd`` command line."""
    p = add_step(sub, "rps-nash", "where the Nash equilibria of each RPS game lie",
                 _nash_step, "rps")
    p.add_argument("--out", required=True, help="output: nash_sets.parquet")

    p = add_step(sub, "rps-portraits", "Fig 3 tables: flows, vector field, speed ratio",
                 _portraits_step, "rps")
    p.add_argument("--flows", required=True, help="output: flows.parquet")
    p.add_argument("--field", required=True, help="output: vector_field.parquet")
    p.add_argument("--speed", required=True, help="output: speed_ratio.parquet")

    p = add_step(sub, "rps-biased", "Fig 4a table: NashConv of time averages, biased RPS",
                 _biased_step, "rps")
    p.add_argument("--out", required=True, help="output: nashconv_biased.parquet")

    p = add_step(sub, "rps-nonstationary", "Fig 5 tables: NashConv through phases of nu",
                 _nonstationary_step, "rps")
    p.add_argument("--out", required=True, help="output: nashconv_nonstationary.parquet")
    p.add_argument("--readings", required=True, help="output: nonstationary_readings.parquet")

    p = add_step(sub, "rps-ci", "bootstrap CI of mean NashConv per iteration",
                 _ci_step, "rps")
    p.add_argument("--table", required=True, help="input: a nashconv_*.parquet table")
    p.add_argument("--out", required=True, help="output: the matching *_ci.parquet")
