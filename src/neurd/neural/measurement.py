"""The exact, float64 measurement of the networks' policies at a checkpoint.

Each configuration's **current** policy (the network evaluated on every
information state, renormalised in float64) is measured exactly: its NashConv
in the game active in its phase (the payoff negated in even phases) by the
sequence-form engine, the reach-weighted RMS error of its critic against the
exact regularised continuation values of that policy, its entropy and the share
of its centred logits at NeuRD's threshold.  The networks compute in float32;
everything here is float64 (call it in a float64 scope).
"""

from __future__ import annotations

import dataclasses
from functools import partial

import jax
import jax.numpy as jnp

from neurd.games import CompiledGame
from neurd.neural import train
from neurd.precision import float64
from neurd.tabular.evaluation import nash_conv
from neurd.tabular.histories import PI_FLOOR, action_values, history_tree, infostate_reach
from neurd.tabular.sequence_form import sequence_form

# the results measured at each checkpoint row, per configuration
MEASURED = ("nash_conv", "critic_rmse", "blocked", "critic_loss", "policy_entropy",
            "at_threshold")
# what grows before a network diverges, per checkpoint row and configuration
# (:func:`logit_growth`, :func:`weight_norms`); a run that diverges keeps its row of the
# divergence as measured, so that the quantities that stopped being finite there are named
GROWTH = ("common_mode", "centred_logit", "policy_weight_norm", "critic_weight_norm")


@float64
def exact_setup(compiled: CompiledGame):
    """The game's sequence form and history tree, in float64: what every exact number of
    a policy is computed on."""
    return sequence_form(compiled), history_tree(compiled)


def exact_policies(tables: jax.Array, legal: jax.Array) -> jax.Array:
    """The network's float32 policy tables in float64, renormalised over the legal actions.

    Traceable; call in a float64 scope.  This is the policy every exact
    number (NashConv, the policies table) is of.
    """
    policy = jnp.where(legal, jnp.asarray(tables, dtype=jnp.float64), 0.0)
    return policy / jnp.sum(policy, axis=-1, keepdims=True)


def centred_log_policy(policy, legal, count):
    """``(log pi, its centred logits)`` ``[..., I, A]`` of float64 policies: ``log pi``
    (``pi`` floored at :data:`PI_FLOOR`, 0 off the legal actions) and ``log pi`` minus its
    mean over the ``count`` legal actions of each state: what the softmax keeps of the
    network's logits.  Traceable."""
    log_pi = jnp.where(legal, jnp.log(jnp.maximum(policy, PI_FLOOR)), 0.0)
    return log_pi, log_pi - jnp.sum(log_pi, -1, keepdims=True) / count[..., None]


@jax.jit
def centred_logits(tables, legal):
    """Float64 centred logits ``[N, I, A]`` of float32 policy tables ``[N, I, A]`` (0 off the
    legal actions), as :func:`measure` computes them; a float64 scope."""
    count = jnp.maximum(jnp.sum(legal, axis=-1), 1)
    return jax.vmap(lambda table: jnp.where(
        legal, centred_log_policy(exact_policies(table, legal), legal, count)[1], 0.0))(tables)


def signed_form(form, sign):
    """The sequence form with the payoffs times ``sign`` (the negated game for ``-1``)."""
    return dataclasses.replace(form, terminal_payoff=sign * form.terminal_payoff)


@partial(jax.jit, static_argnames=("beta",))
def measure(form, tree, tables, critics, etas, sign, beta=2.0):
    """Per configuration ``[C]``: NashConv, the critic's RMS error, the policy's entropy and
    the share of its logits at NeuRD's threshold, of the current policies.

    ``tables`` and ``critics`` are the networks' float32 outputs; everything
    here is float64 (call in a float64 scope).  The entropy (nats) is the mean
    over information states weighted by the policy's own reach; the centred
    logits are ``log pi`` centred over the legal actions (what the softmax
    keeps of the network's logits; ``pi`` floored at :data:`PI_FLOOR`), and the
    share is over the legal (state, action) pairs of ``|centred logit| >= beta``:
    how much of the policy sits where NeuRD's threshold stops pushing.
    """
    legal = tree.legal
    game = signed_form(form, sign)

    def one(table, critic, eta):
        policy = exact_policies(table, legal)
        continuation = action_values(tree, policy, eta, sign)[1]
        weight = infostate_reach(tree, policy)
        count = jnp.maximum(jnp.sum(legal, axis=-1), 1)
        error = jnp.sum(jnp.where(legal, jnp.square(critic - continuation), 0.0), -1) / count
        log_pi, centred = centred_log_policy(policy, legal, count)
        entropy = -jnp.sum(jnp.where(legal, policy * log_pi, 0.0), -1)
        at_threshold = jnp.sum(legal & (jnp.abs(centred) >= beta)) / jnp.sum(legal)
        return (nash_conv(game, policy), jnp.sqrt(jnp.sum(weight * error) / jnp.sum(weight)),
                jnp.sum(weight * entropy) / jnp.sum(weight), at_threshold)

    return jax.vmap(one)(tables, jnp.asarray(critics, jnp.float64), etas)


@jax.jit
def logit_growth(tree, tables, outputs):
    """``(common mode, largest centred logit)`` ``[C]`` of the policy networks' raw float32
    ``outputs`` ``[C, I, A]``, over the information states their policies ``tables`` visit
    (reach above 0; a state of NaN reach counts): the largest size of a state's mean raw
    output over its legal actions (the part of the logits the softmax cannot see, which
    nothing bounds in NeuRD's raw reading), and the largest size of a raw output minus that
    mean (what NeuRD's threshold bounds).  Float64; call in a float64 scope."""
    legal = tree.legal
    count = jnp.maximum(jnp.sum(legal, axis=-1), 1)

    def one(table, output):
        output = jnp.asarray(output, jnp.float64)
        visited = ~(infostate_reach(tree, exact_policies(table, legal)) <= 0.0)
        mean = jnp.sum(jnp.where(legal, output, 0.0), -1) / count
        centred = jnp.where(legal, output - mean[:, None], 0.0)
        largest = jnp.max(jnp.where(legal, jnp.abs(centred), 0.0), -1)
        return (jnp.max(jnp.where(visited, jnp.abs(mean), 0.0)),
                jnp.max(jnp.where(visited, largest, 0.0)))

    return jax.vmap(one)(tables, outputs)


def weight_norms(params) -> jax.Array:
    """``[N]``: the L2 norm, in float64, of every weight of each of ``N`` networks
    (``params`` batched on the leading axis); not finite once a weight is not."""
    leaves = [jnp.asarray(x, jnp.float64).reshape(x.shape[0], -1)
              for x in jax.tree_util.tree_leaves(params)]
    return jnp.sqrt(sum(jnp.sum(jnp.square(x), axis=1) for x in leaves))


@partial(jax.jit, static_argnames=("spec",))
def network_nash_conv(spec: train.Spec, form, tensors, legal, params, sign=1.0, players=None):
    """NashConv ``[N]`` of policy networks ``params`` (batched), and the policies ``[N, I, A]``
    it is of: the network evaluated on every information-state tensor at once (float32),
    renormalised in float64, then the exact tree computation.  Call in a float64 scope.
    ``players`` ``[I]``: each state's player (needed by one network per player)."""
    if spec.networks != "shared" and players is None:
        raise ValueError("network_nash_conv: one network per player needs the players")
    net = train.network(spec.networks, spec.hidden, legal.shape[-1], spec.precision)
    game = signed_form(form, sign)

    def one(p):
        logits = net.apply({"params": p}, jnp.asarray(tensors, jnp.float32), players)
        policy = exact_policies(train.masked_policy(logits, legal), legal)
        return nash_conv(game, policy), policy

    return jax.vmap(one)(params)


@jax.jit
def phase_policies(tables, legal):
    """Float64 policies ``[P, C, I, A]`` of the float32 phase-end tables (a float64 scope)."""
    return exact_policies(tables, legal)
