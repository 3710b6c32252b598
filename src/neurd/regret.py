"""Regret of Hedge and SPG in repeated matching pennies (paper Section 1.1, Figs 1-2).

The even player learns in the all-actions setting from logits 0; the odd
player plays Heads for the first ``floor(switch_fraction * T)`` rounds of a
``T``-round game and Tails afterwards.  Regret after ``T`` rounds is
``R_T = max_a sum_t u_t(a) - sum_t pi_t . u_t`` where ``pi_t`` is the policy
played in round ``t`` (before it sees ``u_t``).

:func:`regret_grid` evaluates every (horizon, step size) pair in one jitted
``lax.scan`` over rounds, with horizons and step sizes as array axes: horizons
shorter than the longest stop updating once their game is over.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from neurd.learners import advantage, logit_step, policy
from neurd.matrix_games import ACTION_NAMES, matching_pennies_utilities
from neurd.names import HEDGE, NEURD, SPG, TRAJECTORY_ALGORITHMS, check_name
from neurd.precision import float64

# The learner behind each algorithm of the sweep: Hedge is NeuRD in the
# single-state all-actions case (Statement 1).
LEARNER_OF = {HEDGE: NEURD, SPG: SPG}


def switch_rounds(horizons, switch_fraction: float) -> np.ndarray:
    """Number of rounds the odd player plays Heads, per horizon."""
    horizons = np.asarray(horizons, dtype=np.float64)
    # round() first so that 0.4 * 10 = 4.000000000000001 and 0.4 * 35 =
    # 13.999999999999998 both give the intended integer.
    return np.floor(np.round(switch_fraction * horizons, 9)).astype(np.int64)


@partial(jax.jit, static_argnames=("algorithm", "forfeit", "max_horizon"))
def _regret_grid(horizons, switches, step_sizes, win, loss, *, algorithm, forfeit, max_horizon):
    step = logit_step(LEARNER_OF[algorithm])
    n_actions = 3 if forfeit else 2
    etas = step_sizes[None, :, None]

    def one_round(carry, t):
        logits, cumulative_utility, cumulative_value = carry
        active = t < horizons  # [H]
        u = matching_pennies_utilities(t < switches, forfeit, win, loss)  # [H, n]
        pi = policy(logits)  # [H, E, n]
        value = jnp.sum(pi * u[:, None, :], axis=-1)  # [H, E]
        new_logits = step(logits, advantage(pi, u[:, None, :]), etas)
        logits = jnp.where(active[:, None, None], new_logits, logits)
        cumulative_utility += jnp.where(active[:, None], u, 0.0)
        cumulative_value += jnp.where(active[:, None], value, 0.0)
        return (logits, cumulative_utility, cumulative_value), None

    n_h, n_e = horizons.shape[0], step_sizes.shape[0]
    init = (
        jnp.zeros((n_h, n_e, n_actions), jnp.float64),
        jnp.zeros((n_h, n_actions), jnp.float64),
        jnp.zeros((n_h, n_e), jnp.float64),
    )
    (_, cumulative_utility, cumulative_value), _ = jax.lax.scan(
        one_round, init, jnp.arange(max_horizon), unroll=8
    )
    return jnp.max(cumulative_utility, axis=-1)[:, None] - cumulative_value


def _check_game(switch_fraction, win, loss) -> None:
    if not (np.isfinite(switch_fraction) and 0 < switch_fraction < 1):
        raise ValueError(f"switch_fraction must lie in (0, 1), got {switch_fraction!r}")
    if not (np.isfinite(win) and np.isfinite(loss)):
        raise ValueError(f"rewards must be finite, got win={win!r}, loss={loss!r}")


@float64
def regret_grid(
    horizons,
    step_sizes,
    *,
    algorithm: str,
    forfeit: bool,
    switch_fraction: float = 0.4,
    win: float = 1.0,
    loss: float = -1.0,
) -> np.ndarray:
    """Final regret ``R_T`` for every horizon x step size: ``[H], [E] -> [H, E]``."""
    check_name(algorithm, LEARNER_OF, "algorithm")
    horizons = np.asarray(horizons, dtype=np.int64)
    if horizons.ndim != 1 or horizons.size == 0 or np.any(horizons <= 0):
        raise ValueError("horizons must be a non-empty list of positive integers, "
                         f"got {horizons!r}")
    step_sizes = np.asarray(step_sizes, dtype=np.float64)
    if step_sizes.ndim != 1 or step_sizes.size == 0 or not np.all(
            np.isfinite(step_sizes) & (step_sizes > 0)):
        raise ValueError("step sizes must be a non-empty list of finite positive numbers, "
                         f"got {step_sizes!r}")
    _check_game(switch_fraction, win, loss)
    regret = _regret_grid(
        jnp.asarray(horizons),
        jnp.asarray(switch_rounds(horizons, switch_fraction)),
        jnp.asarray(step_sizes),
        float(win),
        float(loss),
        algorithm=algorithm,
        forfeit=bool(forfeit),
        max_horizon=int(horizons.max()),
    )
    return np.asarray(regret)


@float64
def trajectory(
    horizon: int,
    step_size: float,
    *,
    algorithm: str,
    forfeit: bool,
    switch_fraction: float = 0.4,
    win: float = 1.0,
    loss: float = -1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Logits and policies after each round: two ``[horizon + 1, n_actions]`` arrays.

    Row ``t`` holds the state after ``t`` rounds (row 0: logits 0, uniform).
    ``algorithm`` picks the logits as each learner keeps them: ``"hedge"``
    accumulates utilities, ``y_t = eta * sum_s u_s`` (eq. hedge); ``"neurd"``
    accumulates advantages, ``y + eta * A``; ``"spg"``, ``y + eta * pi * A``.
    Hedge and NeuRD logits differ by a shift common to all actions, so their
    policies are the same (Statement 1).
    """
    check_name(algorithm, TRAJECTORY_ALGORITHMS, "algorithm")
    if isinstance(horizon, bool) or int(horizon) != horizon or horizon < 1:
        raise ValueError(f"horizon must be a positive integer, got {horizon!r}")
    if not (np.isfinite(step_size) and step_size > 0):
        raise ValueError(f"step size must be a finite positive number, got {step_size!r}")
    _check_game(switch_fraction, win, loss)
    switch = int(switch_rounds([horizon], switch_fraction)[0])
    rounds = jnp.arange(horizon)
    n_actions = 3 if forfeit else 2
    init = jnp.zeros(n_actions, jnp.float64)
    if algorithm == HEDGE:
        utilities = matching_pennies_utilities(rounds < switch, forfeit, win, loss)
        logits = step_size * jnp.cumsum(utilities, axis=0)
    else:
        step = logit_step(algorithm)

        def one_round(logits, t):
            u = matching_pennies_utilities(t < switch, forfeit, win, loss)
            logits = step(logits, advantage(policy(logits), u), step_size)
            return logits, logits

        _, logits = jax.lax.scan(one_round, init, rounds)
    logits = np.vstack([np.zeros((1, n_actions)), np.asarray(logits)])
    return logits, np.asarray(policy(jnp.asarray(logits)))


def action_names(forfeit: bool) -> tuple[str, ...]:
    return ACTION_NAMES[: 3 if forfeit else 2]
