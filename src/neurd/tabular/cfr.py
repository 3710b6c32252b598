"""Counterfactual regret minimisation with a pluggable local learner.

CFR (Zinkevich et al. 2008) runs a regret minimiser at every information
state on the **counterfactual regret** ``beta_{-i}(s) (q_i(s, a) - v_i(s))``
(:func:`neurd.tabular.sequence_form.counterfactual_values`).  The paper's
Corollary (Section 4) takes NeuRD as that local learner,

    y_{i,t}(s, a) = y_{i,t-1}(s, a) + eta * beta_{-i}(s) (q_i(s, a) - v_i(s)),

which is CFR(Hedge); SPG multiplies the step by ``pi(a|s)``
(eq. tabular_all_actions_pg_update); regret matching gives the original CFR.
The logit steps and policies come from :mod:`neurd.learners`.

Updates alternate as in OpenSpiel's ``CFRSolver`` and the paper (Section 5,
after Burch 2017): in every iteration player 0 is updated against player 1's
current policy and its policy recomputed, then player 1 is updated against
player 0's *new* policy.  The evaluated policy is the sequence-probability
average ``pibar_i(s) ∝ sum_t rho_i^{pi_t}(s) pi_{i,t}(s)`` (Corollary), i.e.
the sum of the player's realization plans, accumulated during the player's
own update exactly as OpenSpiel accumulates ``cumulative_policy``.

Everything is a pure function of arrays: :func:`cfr_sweep` runs a grid of
step sizes as one jitted program, a ``lax.scan`` over checkpoints whose body
runs a ``vmap`` over the step sizes of a ``lax.fori_loop`` over iterations;
the scan returns its metrics stacked and is called a chunk of checkpoints at
a time, with progress logged between chunks (:mod:`neurd.progress`).

Logit magnitudes.  Starting from zero, NeuRD's logits are ``eta`` times the
cumulative counterfactual regrets, and a counterfactual regret is at most
``beta_{-i}(s) Delta_u <= Delta_u`` in size, so ``|y| <= eta T Delta_u``
(SPG's steps are smaller still, being weighted by ``pi <= 1``).  The paper's
longest runs (``eta = 4``, ``T = 10^5``, Leduc ``Delta_u = 26``) stay below
``1.04e7``: finite by far in float64, and :func:`neurd.learners.policy`
subtracts the largest logit before exponentiating, so nothing overflows.
Probabilities are then exact up to the rounding of the logit differences,
a relative ``2^-52 |y| <~ 2e-9`` at that size; an action more than ~745
below the best underflows to probability exactly zero.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from neurd import learners, names
from neurd.precision import float64
from neurd.progress import Progress, scan_in_chunks
from neurd.tabular.evaluation import nash_conv, normalize
from neurd.tabular.sequence_form import (
    SequenceForm,
    counterfactual_values,
    realization_plan,
    terminal_values,
)

log = logging.getLogger(__name__)


class LocalLearner(NamedTuple):
    """A learner run at every information state of a player.

    ``init(legal) -> params``; ``step(params, regrets, step_size, legal) ->
    params``; ``policy(params, legal) -> pi``.  Shapes: ``legal``, ``params``,
    ``regrets``, ``pi``: ``[I_i, A]``; ``step_size``: ``[I_i, 1]``.
    """

    name: str
    init: Callable
    step: Callable
    policy: Callable


def _zeros(legal):
    return jnp.zeros(legal.shape, jnp.float64)


# Checkpoints per jitted call of the sweep: progress is logged between calls.
CHECKPOINTS_PER_CHUNK = 8


def _regret_matching_step(cumulative_regrets, regrets, step_size, legal):
    del step_size, legal  # regret matching is scale-free
    return cumulative_regrets + regrets


def _logit_learner(name: str) -> LocalLearner:
    step = learners.logit_step(name)
    return LocalLearner(name, _zeros, step, learners.policy)


LEARNERS = {
    names.RM: LocalLearner(names.RM, _zeros, _regret_matching_step,
                           learners.regret_matching_policy),
    names.NEURD: _logit_learner(names.NEURD),
    names.SPG: _logit_learner(names.SPG),
}


def local_learner(learner: str | LocalLearner) -> LocalLearner:
    """A built-in learner by name (``rm``, ``neurd``, ``spg``) or ``learner`` itself."""
    if isinstance(learner, LocalLearner):
        return learner
    try:
        return LEARNERS[learner]
    except (KeyError, TypeError):
        raise ValueError(f"unknown local learner {learner!r}; expected one of "
                         f"{sorted(LEARNERS)} or a LocalLearner") from None


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class CFRState:
    """Per player (tuples of two): learner parameters (logits or cumulative
    regrets) ``[I_i, A]``, current policy ``[I_i, A]``, its realization plan
    ``[I_i*A + 1]`` and the cumulative sequence weights ``[I_i, A]``."""

    params: tuple[jax.Array, jax.Array]
    policy: tuple[jax.Array, jax.Array]
    plan: tuple[jax.Array, jax.Array]
    cumulative_policy: tuple[jax.Array, jax.Array]
    iteration: jax.Array


def init(form: SequenceForm, learner: LocalLearner) -> CFRState:
    """The learner's initial state (every built-in learner starts uniform), no history."""
    params = tuple(learner.init(tree.legal) for tree in form.players)
    policy = tuple(learner.policy(p, tree.legal) for p, tree in zip(params, form.players))
    plan = tuple(realization_plan(tree, pi) for tree, pi in zip(form.players, policy))
    cumulative = tuple(_zeros(tree.legal) for tree in form.players)
    return CFRState(params, policy, plan, cumulative, jnp.zeros((), jnp.int64))


def _per_player(form: SequenceForm, step_size) -> tuple[jax.Array, jax.Array]:
    """A step size (scalar, or ``[I, 1]`` per information state) -> ``[I_i, 1]`` each."""
    eta = jnp.broadcast_to(jnp.asarray(step_size, jnp.float64), (form.num_infostates, 1))
    first = form.players[0].num_infostates
    return eta[:first], eta[first:]


def update_player(form: SequenceForm, learner: LocalLearner, state: CFRState, player: int,
                  step_size: jax.Array) -> CFRState:
    """One player's CFR update against the opponent's current policy.

    The counterfactual regret ``beta_{-i}(s) (q_i(s, a) - v_i(s)) = Q_i(s, a) - V_i(s)``
    (paper, Corollary after Statement 1) drives the learner's step.
    Accumulates the player's realization plan into the average, steps its
    learner on the counterfactual regrets and recomputes its policy.
    """
    tree = form.players[player]
    g = terminal_values(form, player, state.plan[1 - player])
    q, v, _ = counterfactual_values(tree, state.policy[player], g)
    regrets = jnp.where(tree.legal, q - v[:, None], 0.0)
    params = learner.step(state.params[player], regrets, step_size, tree.legal)
    policy = learner.policy(params, tree.legal)
    cumulative = state.cumulative_policy[player] + state.plan[player][:-1].reshape(q.shape)

    def replace(pair, value):
        return tuple(value if p == player else pair[p] for p in (0, 1))

    return CFRState(replace(state.params, params), replace(state.policy, policy),
                    replace(state.plan, realization_plan(tree, policy)),
                    replace(state.cumulative_policy, cumulative), state.iteration)


def one_iteration(form: SequenceForm, learner: LocalLearner, state: CFRState,
                  step_size) -> CFRState:
    """One alternating CFR iteration: player 0, then player 1 against the new policy."""
    etas = _per_player(form, step_size)
    for player in (0, 1):
        state = update_player(form, learner, state, player, etas[player])
    return CFRState(state.params, state.policy, state.plan, state.cumulative_policy,
                    state.iteration + 1)


def current_policy(state: CFRState) -> jax.Array:
    """``[I, A]``: the policy of the last iteration, both players."""
    return jnp.concatenate(state.policy)


def average_policy(form: SequenceForm, state: CFRState) -> jax.Array:
    """``[I, A]``: the sequence-probability average policy (uniform where unreached)."""
    return normalize(jnp.concatenate(state.cumulative_policy), form.legal)


@float64
def run(form: SequenceForm, learner: str | LocalLearner, step_size,
        num_iterations: int) -> CFRState:
    """``num_iterations`` CFR iterations from the learner's initial state."""
    learner = local_learner(learner)
    return _run(form, learner, jnp.asarray(step_size, jnp.float64),
                jnp.asarray(num_iterations, jnp.int64))


@jax.jit(static_argnames=("learner",))
def _run(form, learner, step_size, num_iterations):
    return advance(form, learner, init(form, learner), step_size, num_iterations)


def checkpoint_segments(checkpoints: Sequence[int]) -> np.ndarray:
    """Iterations between consecutive checkpoints; checks they increase from >= 1."""
    points = np.asarray(checkpoints)
    if (points.ndim != 1 or len(points) == 0 or not np.issubdtype(points.dtype, np.integer)
            or points[0] < 1 or np.any(np.diff(points) <= 0)):
        raise ValueError(f"checkpoints must be strictly increasing integer iterations >= 1, "
                         f"got {list(checkpoints)}")
    return np.diff(points, prepend=0).astype(np.int64)


def advance(form: SequenceForm, learner: LocalLearner, state: CFRState, step_size,
            num_iterations) -> CFRState:
    """``num_iterations`` (may be traced) CFR iterations from ``state``."""
    body = lambda _, s: one_iteration(form, learner, s, step_size)  # noqa: E731
    return jax.lax.fori_loop(0, num_iterations, body, state)


@float64
def cfr_sweep(form: SequenceForm, learner_names: Sequence[str | LocalLearner], step_sizes,
              checkpoints: Sequence[int]) -> np.ndarray:
    """NashConv of the average policy, ``[learners, step sizes, checkpoints]``.

    One jitted program: a ``lax.scan`` over the checkpoints whose body runs,
    for each learner, a ``vmap`` over the step sizes of a ``lax.fori_loop``
    over the iterations up to the next checkpoint, then evaluates every
    average policy exactly.  It runs :data:`CHECKPOINTS_PER_CHUNK`
    checkpoints per call and logs progress (INFO) between calls.
    Raises ``FloatingPointError`` naming the run if a NashConv is not finite.
    """
    chosen = tuple(local_learner(name) for name in learner_names)
    etas = np.asarray(step_sizes, dtype=np.float64)
    if etas.ndim != 1 or len(etas) == 0 or not np.all(np.isfinite(etas) & (etas > 0)):
        raise ValueError(f"step sizes must be a non-empty list of positive numbers, "
                         f"got {list(np.atleast_1d(step_sizes))}")
    segments = checkpoint_segments(checkpoints)
    points = np.cumsum(segments)
    etas = jnp.asarray(etas)
    progress = Progress("CFR sweep", points[-1])

    def report(done, metrics):
        values, largest = metrics
        progress.update(points[done - 1], "; ".join(
            f"{learner.name} NashConv {np.min(v):.4g}..{np.max(v):.4g}, max |param| {m:.3g}"
            for learner, v, m in zip(chosen, values[-1], largest[-1])))

    _, (curves, _) = scan_in_chunks(
        lambda states, chunk: _sweep_chunk(form, chosen, etas, states, chunk),
        _sweep_init(form, chosen, etas), segments, chunk_size=CHECKPOINTS_PER_CHUNK,
        pad_value=0, on_chunk=report)
    curves = np.moveaxis(curves, 0, -1)  # [K, learners, etas] -> [learners, etas, K]
    bad = np.argwhere(~np.isfinite(curves))
    if len(bad):
        i, e, k = bad[0]
        raise FloatingPointError(
            f"NashConv is not finite for learner {chosen[i].name!r}, step size {etas[e]} "
            f"at checkpoint {points[k]}")
    return curves


def _advance(form, learner, length, state, eta):
    return advance(form, learner, state, eta, length)


def _average_nash_conv(form, state):
    return nash_conv(form, average_policy(form, state))


@jax.jit(static_argnames=("chosen",))
def _sweep_init(form, chosen, etas):
    return tuple(jax.vmap(lambda _, learner=learner: init(form, learner))(etas)
                 for learner in chosen)


@jax.jit(static_argnames=("chosen",))
def _sweep_chunk(form, chosen, etas, states, segments):
    """Scan over ``segments`` (iterations to the next checkpoint; 0 pads a chunk).

    Returns the states and, per checkpoint, NashConv ``[learners, etas]`` and
    the largest parameter magnitude per learner.
    """
    def segment(states, length):
        states = tuple(
            jax.vmap(functools.partial(_advance, form, learner, length))(state, etas)
            for learner, state in zip(chosen, states))
        values = jnp.stack([
            jax.vmap(functools.partial(_average_nash_conv, form))(state) for state in states])
        largest = jnp.stack([jnp.max(jnp.abs(jnp.concatenate(
            [p.reshape(p.shape[0], -1) for p in state.params], axis=1))) for state in states])
        return states, (values, largest)

    return jax.lax.scan(segment, states, segments)


@float64
def run_with_regret(form: SequenceForm, learner: str | LocalLearner, step_size,
                    num_iterations: int) -> tuple[CFRState, jax.Array]:
    """Run CFR and return each player's external regret ``R_{i,T}`` ``[2]``.

    ``R_{i,T} = max_{pi_i'} sum_t u_i(pi_i', pi_{-i}^t) - sum_t u_i(pi_i^t, pi_{-i}^t)``
    against the opponent policies each player was updated against (paper,
    Corollary after Statement 1).  Utility is linear in the opponent's
    realization plan, so the best fixed policy in hindsight is a best
    response to the summed terminal values ``sum_t g_i^t``.
    """
    learner = local_learner(learner)
    return _run_with_regret(form, learner, jnp.asarray(step_size, jnp.float64),
                            int(num_iterations))


@jax.jit(static_argnames=("learner", "num_iterations"))
def _run_with_regret(form, learner, step_size, num_iterations):
    etas = _per_player(form, step_size)

    def body(carry, _):
        state, summed_g, realized = carry
        summed_g, realized = list(summed_g), list(realized)
        for player in (0, 1):
            g = terminal_values(form, player, state.plan[1 - player])
            summed_g[player] = summed_g[player] + g
            realized[player] = realized[player] + jnp.dot(g, state.plan[player])
            state = update_player(form, learner, state, player, etas[player])
        return (state, tuple(summed_g), tuple(realized)), None

    zeros = tuple(jnp.zeros(tree.num_sequences, jnp.float64) for tree in form.players)
    start = (init(form, learner), zeros, (jnp.zeros((), jnp.float64), jnp.zeros((), jnp.float64)))
    (state, summed_g, realized), _ = jax.lax.scan(body, start, None, length=num_iterations)
    best = [counterfactual_values(tree, None, g, best_response=True)[2]
            for tree, g in zip(form.players, summed_g)]
    return state, jnp.stack(best) - jnp.stack(realized)
