"""What a local learner must give, checked at the engine's door (:mod:`neurd.engine`).

A user's :class:`~neurd.tabular.cfr.LocalLearner` is code the engine runs inside one jitted
loop: a step of the wrong shape would fail there as a broadcasting error deep in XLA, and one
that returns NaN would run to the end and report the NashConv of whatever the NaN left.  So
:func:`check_learner` runs its ``init``, ``step`` and ``policy`` once, eagerly, on each
player's information states before anything is compiled, and :func:`check_run` looks at the
state a run ended in; each refusal names the learner, the function, the player and what is
wrong (for a run, the first iteration whose state is not finite and its first bad value).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from neurd.tabular.cfr import CFRState, LocalLearner
from neurd.tabular.sequence_form import SequenceForm


class LearnerError(ValueError):
    """A local learner broke its contract (the message names it and what it gave)."""


def _array(value, where: str, shape: tuple[int, int]) -> np.ndarray:
    try:
        out = np.asarray(value)
    except (TypeError, ValueError) as error:
        raise LearnerError(f"{where} returned {type(value).__name__}, not an array ({error})"
                           ) from None
    if out.shape != shape:
        raise LearnerError(f"{where} returned shape {out.shape}, not {shape} (the player's "
                           "information states x actions)")
    if not np.issubdtype(out.dtype, np.floating):
        raise LearnerError(f"{where} returned dtype {out.dtype}, not a float")
    bad = np.flatnonzero(~np.isfinite(out))
    if bad.size:
        row, column = divmod(int(bad[0]), shape[1])
        raise LearnerError(f"{where} returned {out.flat[bad[0]]} at information state {row}, "
                           f"action {column} ({bad.size} values not finite)")
    return out


def check_learner(function: str, form: SequenceForm, learner: LocalLearner) -> None:
    """Run ``learner`` once, eagerly, on each player: ``init(legal)``, ``step(params,
    regrets, step_size, legal)`` on regrets of ones, ``policy(params, legal)``; each must give a
    finite float array ``[I_i, A]``, the policy a distribution over the legal actions."""
    for player, tree in enumerate(form.players):
        shape = tuple(tree.legal.shape)
        name = f"engine.{function}: learner {learner.name!r}"
        try:
            params = _array(learner.init(tree.legal), f"{name}: init (player {player})", shape)
            regrets = jnp.where(tree.legal, 1.0, 0.0)
            eta = jnp.ones((shape[0], 1), jnp.float64)
            stepped = _array(learner.step(jnp.asarray(params), regrets, eta, tree.legal),
                             f"{name}: step (player {player})", shape)
            policy = _array(learner.policy(jnp.asarray(stepped), tree.legal),
                            f"{name}: policy (player {player})", shape)
        except LearnerError:
            raise
        except Exception as error:  # the user's code itself raised: say whose it is
            raise LearnerError(f"{name} raised {type(error).__name__} on player {player}'s "
                               f"{shape[0]} information states: {error}") from error
        legal = np.asarray(tree.legal)
        sums = policy.sum(axis=1)
        if (policy < -1e-12).any() or (policy[~legal] != 0).any() or not np.allclose(
                sums[legal.any(axis=1)], 1.0, atol=1e-9):
            raise LearnerError(f"{name}: policy (player {player}) is not a distribution over "
                               "the legal actions (non-negative, zero on illegal actions, "
                               "summing to 1)")


def _first_bad(state: CFRState) -> tuple[str, int, int, int, float] | None:
    """The first non-finite value of a state: (field, player, state, action, value)."""
    for field in ("params", "policy", "cumulative_policy"):
        for player, array in enumerate(getattr(state, field)):
            values = np.asarray(array)
            bad = np.flatnonzero(~np.isfinite(values))
            if bad.size:
                row, column = divmod(int(bad[0]), values.shape[1])
                return field, player, row, column, float(values.flat[bad[0]])
    return None


def check_run(function: str, learner: LocalLearner, state: CFRState, iterations: int,
              rerun: Callable[[int], CFRState]) -> CFRState:
    """``state`` (after ``iterations``) if every value is finite; else a :class:`LearnerError`
    naming the learner, the first iteration whose state holds a value that is not finite
    (found by running again, ``rerun(k)`` giving the state after ``k`` iterations, halving),
    and that value."""
    if _first_bad(state) is None:
        return state
    good, bad = 0, int(iterations)
    while bad - good > 1:
        middle = (good + bad) // 2
        if _first_bad(jax.block_until_ready(rerun(middle))) is None:
            good = middle
        else:
            bad = middle
    field, player, row, column, value = _first_bad(rerun(bad))
    raise LearnerError(f"engine.{function}: learner {learner.name!r} gave {value} at iteration "
                       f"{bad} (of {iterations}): its {field.replace('_', ' ')} of player "
                       f"{player}, information state {row}, action {column}; every value "
                       "before was finite")
