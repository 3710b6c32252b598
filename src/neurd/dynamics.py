"""Continuous-time learning dynamics on the simplex (paper Section 3.1, Figs 3-5).

A single population plays the softmax policy ``pi = softmax(y)`` against
itself in a symmetric matrix game with payoff matrix ``M``: the action values
are ``q = M pi`` and the advantage is ``A = q - pi.q`` (:mod:`neurd.learners`).
The two flows of the paper live in logit space:

==============  ===================  ==============================
learner         logit velocity       policy velocity
==============  ===================  ==============================
NeuRD / RD      ``dy/dt = A``        eq. (rd): ``pi * A``
SPG / QPG       ``dy/dt = pi * A``   eq. (qpg): ``pi (pi A - sum_b pi_b^2 A_b)``
==============  ===================  ==============================

Each flow is the derivative of its learner's discrete logit step
(:func:`neurd.learners.logit_step`) with respect to the step size, so the
flow and the discrete learner cannot drift apart; the explicit Euler step of
the flow with step ``dt`` *is* that logit step with step size ``dt``.  The
policy velocity is the logit velocity pushed through the softmax Jacobian.

Two integrators:

* :func:`euler_time_average_nash_conv`: the paper's Figs 4a/5 setting, explicit
  Euler with ``dt`` per iteration, ``vmap`` over initial policies and
  ``lax.scan`` over iterations, recording the NashConv of the time-average
  policy against the game of each iteration;
* :func:`integrate_flow`: the phase portraits of Fig 3, the ODE solved with
  ``scipy.integrate.solve_ivp`` (adaptive Runge-Kutta), with the running
  integral of ``pi`` carried along to give the continuous time average.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

from neurd.learners import advantage, logit_step, policy
from neurd.matrix_games import symmetric_nash_conv
from neurd.names import LEARNERS, NEURD, SPG, check_name
from neurd.precision import float64


def action_values(payoff: jax.Array, pi: jax.Array) -> jax.Array:
    """``q = M pi``: each action's value against the population.

    Shapes: ``payoff`` ``[A, A]``, ``pi`` ``[..., A]`` -> ``[..., A]``.
    """
    return pi @ jnp.swapaxes(payoff, -1, -2)


@partial(jax.jit, static_argnames=("learner",))
def logit_velocity(logits: jax.Array, payoff: jax.Array, learner: str) -> jax.Array:
    """``dy/dt``: ``A`` for NeuRD (eq. nerd_continuous), ``pi * A`` for SPG.

    The velocity is the derivative of the learner's logit step in its step
    size.  Both steps are linear in the step size, so the JVP is exact and
    the flow is the learner's step by construction, not a second copy of it.

    Shapes: ``logits`` ``[..., A]``, ``payoff`` ``[A, A]`` -> ``[..., A]``.
    """
    step = logit_step(learner)
    pi = policy(logits)
    adv = advantage(pi, action_values(payoff, pi))
    _, velocity = jax.jvp(lambda eta: step(logits, adv, eta), (0.0,), (1.0,))
    return velocity


@partial(jax.jit, static_argnames=("learner",))
def policy_velocity(logits: jax.Array, payoff: jax.Array, learner: str) -> jax.Array:
    """``dpi/dt``: the logit velocity pushed through the softmax Jacobian.

    Gives eq. (rd) for NeuRD and eq. (qpg) for SPG (tested against both).
    Shapes: ``logits`` ``[..., A]``, ``payoff`` ``[A, A]`` -> ``[..., A]``.
    """
    _, pi_dot = jax.jvp(policy, (logits,), (logit_velocity(logits, payoff, learner),))
    return pi_dot


@float64
def speed_ratio(pi: np.ndarray, payoff: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Euclidean speeds ``||pi_dot_RD||`` and ``||pi_dot_PG||`` at interior policies.

    Fig 3e plots their ratio.  Shapes: ``pi`` ``[..., A]`` (all entries > 0),
    ``payoff`` ``[A, A]`` -> ``(speed_rd [...], speed_pg [...])``.
    """
    pi = np.asarray(pi, dtype=np.float64)
    if np.any(pi <= 0.0):
        raise ValueError("speed_ratio needs interior policies (every probability > 0); "
                         f"smallest given: {pi.min()!r}")
    logits = jnp.log(jnp.asarray(pi))
    payoff = jnp.asarray(payoff, dtype=jnp.float64)
    rd = jnp.linalg.norm(policy_velocity(logits, payoff, NEURD), axis=-1)
    pg = jnp.linalg.norm(policy_velocity(logits, payoff, SPG), axis=-1)
    return np.asarray(rd), np.asarray(pg)


# --- explicit Euler, as the paper integrates Figs 4a and 5 -------------------


@float64
def sample_initial_policies(key: jax.Array, count: int, num_actions: int = 3) -> np.ndarray:
    """``count`` policies drawn uniformly from the simplex (Dirichlet(1, ..., 1)), ``[count, A]``.

    ``key``: a JAX PRNG key, one per experiment (:func:`neurd.streams.key`).
    Drawn in float64.
    """
    if count < 1 or num_actions < 2:
        raise ValueError(f"need count >= 1 and num_actions >= 2, got count={count!r}, "
                         f"num_actions={num_actions!r}")
    return np.asarray(jax.random.dirichlet(key, jnp.ones(num_actions, jnp.float64), (count,),
                                           dtype=jnp.float64))


def simplex_grid(resolution: int) -> np.ndarray:
    """Interior points ``(i, j, k) / resolution`` with ``i, j, k >= 1``, ``[K, 3]``."""
    if resolution < 3:
        raise ValueError(f"simplex grid resolution must be >= 3, got {resolution!r}")
    points = [(i, j, resolution - i - j) for i in range(1, resolution - 1)
              for j in range(1, resolution - i)]
    return np.asarray(points, dtype=np.float64) / resolution


def phase_schedule(nus, phase_iterations: int) -> tuple[np.ndarray, np.ndarray]:
    """Phase number (1-based) and nu of every iteration, ``-> ([T], [T])``."""
    if int(phase_iterations) != phase_iterations or phase_iterations < 1:
        raise ValueError(f"phase_iterations must be a positive integer, got {phase_iterations!r}")
    if len(nus) < 1:
        raise ValueError("need at least one phase (nus is empty)")
    phases = np.repeat(np.arange(1, len(nus) + 1), int(phase_iterations))
    return phases, np.asarray(nus, dtype=np.float64)[phases - 1]


def phase_restarts(phases: np.ndarray, restart_average: bool) -> np.ndarray:
    """Where the time average starts afresh: iteration 1, and each switch if asked."""
    restart = np.zeros(len(phases), dtype=bool)
    restart[0] = True
    if restart_average:
        restart[1:] = phases[1:] != phases[:-1]
    return restart


def _time_average_run(logits, payoffs, restart, dt, learner):
    """One trajectory: NashConv of the time-average policy after each iteration.

    Iteration ``t`` plays ``pi_t = softmax(y_t)``, adds it to the running
    average (emptied first where ``restart[t]``), records the NashConv of the
    average against that iteration's game, then takes the Euler step
    ``y_{t+1} = y_t + dt * velocity(y_t)`` in that game.
    """
    step = logit_step(learner)

    def iteration(carry, inputs):
        y, total, count = carry
        payoff, reset = inputs
        total = jnp.where(reset, 0.0, total)
        count = jnp.where(reset, 0.0, count)
        pi = policy(y)
        total, count = total + pi, count + 1.0
        nash_conv = symmetric_nash_conv(payoff, total / count)
        y = step(y, advantage(pi, action_values(payoff, pi)), dt)
        return (y, total, count), nash_conv

    init = (logits, jnp.zeros_like(logits), jnp.zeros((), logits.dtype))
    _, nash_conv = jax.lax.scan(iteration, init, (payoffs, restart))
    return nash_conv


@partial(jax.jit, static_argnames=("learner",))
def _batched_runs(logits, payoffs, restart, dt, learner):
    return jax.vmap(_time_average_run, in_axes=(0, None, None, None, None))(
        logits, payoffs, restart, dt, learner)


@float64
def euler_time_average_nash_conv(
    initial_policies, payoffs, restart, dt: float, learner: str
) -> np.ndarray:
    """NashConv of the time-average policy, iteration by iteration, for many starts.

    Explicit Euler with step ``dt`` (one iteration), as in Figs 4a and 5 of
    the paper.  The game may change between iterations (Fig 5's phases); the
    NashConv of iteration ``t`` is taken against the game of iteration ``t``.

    Shapes: ``initial_policies`` ``[N, A]`` (interior), ``payoffs``
    ``[T, A, A]`` (antisymmetric), ``restart`` ``[T]`` bool (``restart[0]``
    must be True: the average starts there) -> ``[N, T]``.
    """
    initial_policies = np.asarray(initial_policies, dtype=np.float64)
    payoffs = np.asarray(payoffs, dtype=np.float64)
    restart = np.asarray(restart, dtype=bool)
    _check_run_inputs(initial_policies, payoffs, restart, dt, learner)
    logits = jnp.log(jnp.asarray(initial_policies))
    return np.asarray(_batched_runs(logits, jnp.asarray(payoffs), jnp.asarray(restart),
                                    float(dt), learner))


def _check_run_inputs(initial_policies, payoffs, restart, dt, learner) -> None:
    check_name(learner, LEARNERS, "learner")
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"dt must be a positive number, got {dt!r}")
    if initial_policies.ndim != 2 or np.any(initial_policies <= 0.0) or not np.allclose(
            initial_policies.sum(axis=-1), 1.0):
        raise ValueError("initial_policies must be [N, A] interior policies (positive, summing "
                         f"to 1); got shape {initial_policies.shape}, smallest entry "
                         f"{initial_policies.min()!r}")
    n_actions = initial_policies.shape[1]
    if payoffs.ndim != 3 or payoffs.shape[1:] != (n_actions, n_actions):
        raise ValueError(f"payoffs must be [T, {n_actions}, {n_actions}], got {payoffs.shape}")
    skew = np.abs(payoffs + np.swapaxes(payoffs, 1, 2)).max(axis=(1, 2))
    if np.any(skew > 1e-12):
        bad = int(np.argmax(skew > 1e-12))
        raise ValueError("payoffs must be antisymmetric (symmetric zero-sum); iteration "
                         f"{bad} is not:\n{payoffs[bad]}")
    if restart.shape != payoffs.shape[:1] or not restart[0]:
        raise ValueError(f"restart must be [T={payoffs.shape[0]}] with restart[0] True, "
                         f"got shape {restart.shape}")


# --- adaptive ODE solver, for the phase portraits of Fig 3 -------------------


@partial(jax.jit, static_argnames=("learner",))
def _augmented_velocity(state, payoff, learner):
    """``d/dt [y, Y] = [velocity(y), softmax(y)]`` on ``[N, 2A]``; ``Y(t)/t``: the time average."""
    logits, _ = jnp.split(state, 2, axis=-1)
    return jnp.concatenate([logit_velocity(logits, payoff, learner), policy(logits)], axis=-1)


@float64
def integrate_flow(
    initial_policies, payoff, learner: str, times, rtol: float = 1e-10, atol: float = 1e-10
) -> tuple[np.ndarray, np.ndarray]:
    """Solve the logit flow from interior policies with ``solve_ivp`` (DOP853).

    All starts are solved as one system (they do not interact; one solver
    call amortises the per-call overhead), in logit space, where the flow is
    smooth and never leaves the simplex.  Returns the policy ``pi(t)`` and its
    continuous time average ``(1/t) int_0^t pi(s) ds`` (``pi(0)`` at ``t = 0``).

    Shapes: ``initial_policies`` ``[N, A]``, ``payoff`` ``[A, A]``, ``times``
    ``[K]`` (increasing, >= 0) -> ``(policies [N, K, A], time_averages [N, K, A])``.
    """
    pi0 = np.asarray(initial_policies, dtype=np.float64)
    times = np.asarray(times, dtype=np.float64)
    if pi0.ndim != 2 or np.any(pi0 <= 0.0) or not np.allclose(pi0.sum(axis=-1), 1.0):
        raise ValueError(f"initial_policies must be [N, A] interior policies, got {pi0!r}")
    if times.ndim != 1 or times.size < 1 or np.any(times < 0.0) or np.any(np.diff(times) <= 0.0):
        raise ValueError(f"times must be increasing and non-negative, got {times!r}")
    check_name(learner, LEARNERS, "learner")
    if not all(np.isfinite(t) and t > 0 for t in (rtol, atol)):
        raise ValueError(f"solve_ivp tolerances must be finite and positive, got rtol={rtol!r}, "
                         f"atol={atol!r}")
    payoff_j = jnp.asarray(payoff, dtype=jnp.float64)
    shape = (pi0.shape[0], 2 * pi0.shape[1])

    def rhs(_, state):
        velocity = _augmented_velocity(jnp.asarray(state.reshape(shape)), payoff_j, learner)
        return np.asarray(velocity).ravel()

    state0 = np.concatenate([np.log(pi0), np.zeros_like(pi0)], axis=1).ravel()
    solution = solve_ivp(rhs, (0.0, times[-1]), state0, method="DOP853", t_eval=times,
                         rtol=rtol, atol=atol)
    if not solution.success:
        raise RuntimeError(f"solve_ivp failed ({learner}): {solution.message}")
    states = solution.y.T.reshape(times.size, *shape).transpose(1, 0, 2)   # [N, K, 2A]
    logits, integral = np.split(states, 2, axis=-1)
    policies = np.asarray(policy(jnp.asarray(logits)))
    safe_times = np.where(times > 0.0, times, 1.0)[None, :, None]
    averages = np.where(times[None, :, None] > 0.0, integral / safe_times, policies)
    return policies, averages
