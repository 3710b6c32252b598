"""Exact evaluation of tabular policies: expected values, best responses, NashConv.

NashConv (paper, eq. nashconv) is the sum over players of what a best
response gains over the current policy,

    NashConv(pi) = sum_i [ max_{pi_i'} u_i(pi_i', pi_{-i}) - u_i(pi) ],

computed exactly in the sequence form (:mod:`neurd.tabular.sequence_form`):
one top-down sweep per player for the realization plans, one pass over the
terminals and one bottom-up max-sweep per player.  Every function takes a
policy ``[I, A]`` over both players' information states (zero at illegal
actions, rows summing to one) and is pure, so ``jax.vmap`` evaluates a batch
of policies ``[N, I, A]`` at once.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from neurd.tabular.sequence_form import (
    SequenceForm,
    counterfactual_values,
    realization_plan,
    split,
    terminal_values,
)


def realization_plans(form: SequenceForm, policy: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Both players' realization plans ``x_i [I_i*A + 1]`` of a policy ``[I, A]``."""
    return tuple(realization_plan(tree, pi) for tree, pi in zip(form.players, split(policy, form)))


def expected_values(form: SequenceForm, policy: jax.Array) -> jax.Array:
    """``[2]``: each player's expected return ``u_i(pi)`` (zero-sum: ``u_1 = -u_0``)."""
    x0, x1 = realization_plans(form, policy)
    v0 = jnp.dot(terminal_values(form, 0, x1), x0)
    return jnp.stack([v0, -v0])


def best_response_values(form: SequenceForm, policy: jax.Array) -> jax.Array:
    """``[2]``: ``max_{pi_i'} u_i(pi_i', pi_{-i})`` for each player ``i``."""
    plans = realization_plans(form, policy)
    values = []
    for player, tree in enumerate(form.players):
        g = terminal_values(form, player, plans[1 - player])
        _, _, root = counterfactual_values(tree, None, g, best_response=True)
        values.append(root)
    return jnp.stack(values)


def nash_conv(form: SequenceForm, policy: jax.Array) -> jax.Array:
    """NashConv of ``policy`` (paper, eq. nashconv); scalar, ``>= 0``."""
    return jnp.sum(best_response_values(form, policy) - expected_values(form, policy))


def best_response(form: SequenceForm, policy: jax.Array, player: int) -> jax.Array:
    """A deterministic best response of ``player`` to ``policy``: ``[I_i, A]`` one-hot.

    At every information state the action with the highest counterfactual
    best-response value (the lowest action id among ties).
    """
    tree = form.players[player]
    plans = realization_plans(form, policy)
    g = terminal_values(form, player, plans[1 - player])
    q, _, _ = counterfactual_values(tree, None, g, best_response=True)
    best = jnp.argmax(jnp.where(tree.legal, q, -jnp.inf), axis=-1)
    return jax.nn.one_hot(best, form.num_actions, dtype=q.dtype)


def uniform_policy(form: SequenceForm) -> jax.Array:
    """``[I, A]``: uniform over the legal actions of every information state."""
    legal = form.legal.astype(jnp.float64)
    return legal / jnp.sum(legal, axis=-1, keepdims=True)


def normalize(weights: jax.Array, legal: jax.Array) -> jax.Array:
    """Weights ``[..., A] >= 0`` -> policy; uniform over legal where they sum to 0.

    The average policy of CFR (paper, Corollary: ``pibar_i(s) ∝ sum_t
    rho_i(s) pi_{i,t}(s)``) and OpenSpiel's ``CFRAveragePolicy`` both fall
    back to uniform at information states the player never reached.
    """
    total = jnp.sum(weights, axis=-1, keepdims=True)
    uniform = legal / jnp.sum(legal, axis=-1, keepdims=True)
    return jnp.where(total > 0, weights / jnp.where(total > 0, total, 1.0), uniform)
