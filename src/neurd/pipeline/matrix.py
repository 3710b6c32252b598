"""Figures 1-2 data: regret sweeps and trajectories in repeated matching pennies.

Tables (the audit surface; columns documented below and in each file's
metadata):

* ``regret_sweep``: every (algorithm, forfeit, horizon, step size) of the grid;
* ``regret_vs_horizon``: the step size with the lowest final regret per
  (algorithm, forfeit, horizon), i.e. Figure 1's curves;
* ``reward_readings``: the same sweep under the alternative reward reading of
  the config (win/loss other than the paper's +1/-1), the evidence the audit
  uses for the paper's stated numbers;
* ``trajectories``: Figure 2's logits and policies, round by round.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd import names
from neurd.config import require
from neurd.stage import Figure, Stage
from neurd.tables import tidy, write_table

log = logging.getLogger(__name__)

SWEEP_COLUMNS = {
    "algorithm": "learner: 'hedge' (= NeuRD, y += eta*A) or 'spg' (y += eta*pi*A)",
    "forfeit": "whether the even player also has the Forfeit action (always loses)",
    "horizon": "number of rounds T of the repeated game",
    "step_size": "constant step size eta",
    "regret": "final regret R_T = max_a sum_t u_t(a) - sum_t pi_t . u_t",
}
READING_COLUMNS = {
    "reading": "name of the reward reading",
    "win": "reward of the even player for a matching round",
    "loss": "reward for a mismatch, and for Forfeit",
    **SWEEP_COLUMNS,
}
TRAJECTORY_COLUMNS = {
    "algorithm": "learner and its logits: 'hedge' (eta * cumulative utility, eq. hedge), "
                 "'neurd' (y + eta*A; same policy as hedge), 'spg' (y + eta*pi*A)",
    "round": "rounds played so far (0: initial logits 0, uniform policy)",
    "action": "action of the even player: 'H', 'T' or 'F' (Forfeit)",
    "logit": "logit of the action after `round` rounds",
    "probability": "softmax probability of the action after `round` rounds",
}


def check(cfg: Mapping) -> None:
    """Cross-field checks of the ``matrix`` section (the schema has checked each value)."""
    grid = cfg["step_sizes"]
    require(grid["max"] > grid["min"], "matrix.step_sizes.max",
            f"must exceed matrix.step_sizes.min ({grid['min']}), got {grid['max']}")
    horizons = cfg["horizons"]
    require(cfg["fit_min_horizon"] < max(horizons), "matrix.fit_min_horizon",
            f"must be below the longest horizon ({max(horizons)}) so a slope can be fitted")
    require(sum(h >= cfg["fit_min_horizon"] for h in horizons) >= 2, "matrix.fit_min_horizon",
            "leaves fewer than two horizons to fit a growth rate on")
    require(cfg["figure2"]["horizon"] in horizons, "matrix.figure2.horizon",
            f"must be one of matrix.horizons {horizons}: the audit checks the step size "
            "the paper tuned at that horizon")
    rewards = cfg["rewards"]
    require(rewards["win"] > rewards["loss"], "matrix.rewards.win",
            f"must exceed matrix.rewards.loss, got win={rewards['win']} loss={rewards['loss']}")


def step_size_grid(cfg: Mapping) -> np.ndarray:
    grid = cfg["step_sizes"]
    return np.logspace(np.log10(grid["min"]), np.log10(grid["max"]), int(grid["num"]))


def sweep(cfg: Mapping, win: float, loss: float) -> pd.DataFrame:
    """Final regret at every grid point, for both learners, with and without Forfeit."""
    from neurd import regret

    horizons = np.asarray(sorted(cfg["horizons"]), dtype=np.int64)
    etas = step_size_grid(cfg)
    frames = []
    for forfeit in (False, True):
        for algorithm in names.MATRIX_ALGORITHMS:
            start = time.perf_counter()
            grid = regret.regret_grid(
                horizons, etas, algorithm=algorithm, forfeit=forfeit,
                switch_fraction=cfg["switch_fraction"], win=win, loss=loss,
            )
            log.info(
                "regret sweep %-5s forfeit=%-5s win=%g loss=%g: %d horizons x %d step sizes "
                "up to T=%d in %.1fs", algorithm, forfeit, win, loss, len(horizons),
                len(etas), horizons.max(), time.perf_counter() - start,
            )
            frames.append(tidy([{"horizon": horizons}, {"step_size": etas}], {"regret": grid},
                               algorithm=algorithm, forfeit=forfeit))
    return pd.concat(frames, ignore_index=True)[list(SWEEP_COLUMNS)]


def tuned(sweep_table: pd.DataFrame, rtol: float = 1e-9) -> pd.DataFrame:
    """Rows of the lowest final regret per (algorithm, forfeit, horizon).

    Hedge's regret is flat (to rounding) over a wide range of large steps;
    among the step sizes within ``rtol`` of the minimum the smallest is taken,
    so the choice does not depend on the last bits of a float.
    """
    def best(rows: pd.DataFrame) -> pd.Series:
        low = rows.regret.min()
        near = rows[rows.regret <= low + rtol * max(1.0, abs(low))]
        return near.loc[near.step_size.idxmin()]

    keys = ["algorithm", "forfeit", "horizon"]
    picked = [best(rows) for _, rows in sweep_table.groupby(keys, sort=True)]
    return pd.DataFrame(picked).reset_index(drop=True)[list(SWEEP_COLUMNS)].astype(
        sweep_table.dtypes.to_dict())


def readings(cfg: Mapping) -> pd.DataFrame:
    """The sweep under each alternative reward reading listed in the config."""
    frames = []
    for reading in cfg["alternative_rewards"]:
        table = sweep(cfg, reading["win"], reading["loss"])
        table.insert(0, "loss", reading["loss"])
        table.insert(0, "win", reading["win"])
        table.insert(0, "reading", reading["name"])
        frames.append(table)
    if not frames:
        return pd.DataFrame({c: [] for c in READING_COLUMNS})
    return pd.concat(frames, ignore_index=True)[list(READING_COLUMNS)]


def trajectories(cfg: Mapping) -> pd.DataFrame:
    """Figure 2: logits and policy of both learners, round by round."""
    from neurd import regret

    fig = cfg["figure2"]
    rewards = cfg["rewards"]
    frames = []
    for algorithm in names.TRAJECTORY_ALGORITHMS:
        logits, probs = regret.trajectory(
            fig["horizon"], fig["step_size"], algorithm=algorithm, forfeit=fig["forfeit"],
            switch_fraction=cfg["switch_fraction"], win=rewards["win"], loss=rewards["loss"],
        )
        rounds = np.arange(logits.shape[0])
        for i, name in enumerate(regret.action_names(fig["forfeit"])):
            frames.append(pd.DataFrame({
                "algorithm": algorithm, "round": rounds, "action": name,
                "logit": logits[:, i], "probability": probs[:, i],
            }))
    return pd.concat(frames, ignore_index=True)[list(TRAJECTORY_COLUMNS)]


# --- command-line steps -------------------------------------------------------


def _sweep_step(args, cfg) -> None:
    rewards = cfg["rewards"]
    table = sweep(cfg, rewards["win"], rewards["loss"])
    write_table(table, args.sweep, columns=SWEEP_COLUMNS, config=cfg)
    write_table(tuned(table), args.tuned, columns=SWEEP_COLUMNS, config=cfg,
                extra={"selection": "lowest final regret per (algorithm, forfeit, horizon)"})
    write_table(readings(cfg), args.readings, columns=READING_COLUMNS, config=cfg)


def _trajectories_step(args, cfg) -> None:
    write_table(trajectories(cfg), args.out, columns=TRAJECTORY_COLUMNS, config=cfg)


def register(stage: Stage, sub) -> None:
    """Add this stage's steps to the ``neurd`` command line."""
    p = stage.add_step(sub, "matrix-sweep", "Fig 1 tables: regret over horizons x step sizes",
                       _sweep_step)
    p.add_argument("--sweep", required=True, help="output: regret_sweep.parquet")
    p.add_argument("--tuned", required=True, help="output: regret_vs_horizon.parquet")
    p.add_argument("--readings", required=True, help="output: reward_readings.parquet")

    p = stage.add_step(sub, "matrix-trajectories", "Fig 2 table: logits and policies by round",
                       _trajectories_step)
    p.add_argument("--out", required=True, help="output: trajectories.parquet")


STAGE = Stage(
    section="matrix",
    check=check,
    figures=lambda cfg: [Figure("fig1", "fig1"), Figure("fig2", "fig2")],
    register=register,
)
