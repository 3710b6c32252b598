"""The all-actions policy losses of NeuRD and SPG, NeuRD's threshold, the critic's loss.

Algorithm 1 moves the policy parameters by, at every visited information
state ``x`` and for every legal action ``a``, the advantage
``A(x, a) = q(x, a) - v(x)``, ``v(x) = sum_a pi(a|x) q(x, a)``, times a
gradient.  The two learners differ in one line, as in :mod:`neurd.learners`:

====================  ===============================  ==========================
learner               loss (gradient descent on it)     parameter step
====================  ===============================  ==========================
NeuRD                 ``-sum_a y(x, a) A(x, a)``        ``eta sum_a grad y A``
SPG (all actions)     ``-sum_a pi(a|x) A(x, a)``        ``eta sum_a grad pi A``
====================  ===============================  ==========================

with ``A`` a constant (``stop_gradient``).  Beside them, OpenSpiel's other all-actions
policy-gradient losses (``rl_losses.py``), for comparison: RMPG (:func:`rmpg_loss`) and RPG
(:func:`rpg_loss`), and its sampled-action A2C (:func:`a2c_loss`); its QPG is SPG's loss
above.  The registry of the algorithms a run may
name is :mod:`neurd.neural.algorithms`.  Losses sum over the legal actions
and average over each player's valid steps (``weights``), then add the two
players: the learning rates mean a step per average visited state.

Two readings the paper leaves open are config keys (the README's readings
study measures each):

* ``neural.neurd_logits``: NeuRD's ``y`` is the network's raw output
  (``raw``, Algorithm 1 as written), its output centred over the legal actions
  (``centred``, the default, as R-NaD's ``get_loss_nerd`` and OpenSpiel's counterfactual
  NeuRD), or centred over all the network's outputs, legal or not
  (``centred_all``, as OpenSpiel's sample-based ``BatchNeuRDLoss``, which also
  thresholds those logits).  For a table the readings are the same step; for a
  shared network the raw reading's common-mode part ``-mean_a y(x, a) sum_a
  A(x, a)`` moves the output biases and nothing bounds it
  (:func:`common_mode_gradient`): at the paper's length NeuRD's raw runs diverge
  (docs/readings.md).  The keyword ``centre``'s default here is the config's
  (``CENTRINGS[default]``; tested).
* ``neural.loss_normalisation``: the policy loss weights each visited state
  by its visits divided by its player's visits (``player_mean``, the
  default), by its visits (``batch_sum``: Algorithm 1's sum over every step
  of the batch) or by its visits divided by the trajectories
  (``trajectory_mean``).

NeuRD's logits are not bounded by the softmax, so NeuRD is **thresholded**
(the paper's Remark; OpenSpiel's ``thresholded``; R-NaD's
``apply_force_with_threshold``): a logit, centred over the legal actions,
at or beyond ``+beta`` is not pushed further up and one at or beyond
``-beta`` not further down; it may always move back.

Shapes: ``logits``, ``q``, ``legal``: ``[N, A]``; ``weights``: ``[N]``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from neurd.neural.networks import masked_policy


def advantages(logits: jax.Array, q: jax.Array, legal: jax.Array) -> jax.Array:
    """``A = q - sum_a pi q`` on the legal actions (0 elsewhere), a constant."""
    pi = masked_policy(jax.lax.stop_gradient(logits), legal)
    q = jnp.where(legal, jax.lax.stop_gradient(q), 0.0)
    return jnp.where(legal, q - jnp.sum(pi * q, axis=-1, keepdims=True), 0.0)


def centred(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Logits minus their mean over the legal actions."""
    count = jnp.maximum(jnp.sum(legal, axis=-1, keepdims=True), 1)
    mean = jnp.sum(jnp.where(legal, logits, 0.0), axis=-1, keepdims=True) / count
    return logits - mean


def centred_all(logits: jax.Array) -> jax.Array:
    """Logits minus their mean over all the network's outputs, legal or not (OpenSpiel's
    ``BatchNeuRDLoss``: ``policy_logits - policy_logits.mean(-1, keepdim=True)``)."""
    return logits - jnp.mean(logits, axis=-1, keepdims=True)


# NeuRD's ``centre`` argument -> its ``y`` (``neural.neurd_logits``: raw, centred, centred_all)
CENTRINGS = {"raw": False, "centred": True, "centred_all": "all"}


def threshold_mask(logits: jax.Array, advantage: jax.Array, legal: jax.Array, beta: float,
                   centre: bool | str = True) -> jax.Array:
    """Where NeuRD may push: ``False`` for a centred logit at ``>= beta`` with ``A > 0``,
    or at ``<= -beta`` with ``A < 0``; the logits centred over the legal actions
    (``centre="all"``: over all the outputs, as OpenSpiel's ``BatchNeuRDLoss``)."""
    logits = jax.lax.stop_gradient(logits)
    y = centred_all(logits) if centre == "all" else centred(logits, legal)
    blocked = ((y >= beta) & (advantage > 0)) | ((y <= -beta) & (advantage < 0))
    return legal & ~blocked


def neurd_loss(logits, q, legal, weights, beta: float = 2.0, centre: bool | str = True):
    """NeuRD: ``-sum_x w(x) sum_a y(x, a) A(x, a)``, thresholded; also the share blocked.

    ``centre``: ``False``: ``y`` is the raw logits; ``True``: the logits centred over the
    legal actions; ``"all"``: centred over all the outputs, the threshold applied to those
    (:data:`CENTRINGS`)."""
    advantage = advantages(logits, q, legal)
    allowed = threshold_mask(logits, advantage, legal, beta, centre)
    y = centred_all(logits) if centre == "all" else centred(logits, legal) if centre else logits
    per_state = -jnp.sum(jnp.where(allowed, y * advantage, 0.0), axis=-1)
    return jnp.sum(weights * per_state), blocked_share(logits, advantage, legal, weights, beta,
                                                       centre)


def common_mode_gradient(logits, q, legal, weights, beta: float, centre: bool | str = True
                         ) -> jax.Array:
    """``[N]``: the gradient of NeuRD's loss along each state's common mode, the derivative
    in ``c`` of the loss at ``logits + c`` on the legal actions (the direction the softmax
    cannot see).  For the raw reading it is ``-w(x) sum_a A(x, a)`` over the actions the
    threshold lets through: not zero, since ``A`` is centred under the policy, not
    uniformly, and the threshold blocks some actions; for a centred reading it is zero."""
    def loss(shift):
        moved = logits + jnp.where(legal, shift[:, None], 0.0)
        return neurd_loss(moved, q, legal, weights, beta, centre)[0]
    return jax.grad(loss)(jnp.zeros(logits.shape[:-1], logits.dtype))


# An advantage this small is no push: A = q - sum_a pi q is then float32 rounding of a policy
# that is all but deterministic, and its sign is not a property of the game
PUSH_FLOOR = 1e-6


def blocked_share(logits, advantage, legal, weights, beta: float, centre: bool | str = True
                  ) -> jax.Array:
    """The share of NeuRD's pushes (visit-weighted; an advantage of at least
    :data:`PUSH_FLOOR` in size) that the threshold blocked.

    The pushed and the blocked are read from one array, floored: XLA may compute the
    advantages again inside each fusion that reads them, with other rounding, and a push of
    about 0 counted as blocked in one and not as pushed in another once gave a share of 1.13.
    An advantage near the floor can still be classed apart by two fusions, rarely; the
    publication's checks refuse a share outside [0, 1]."""
    floored = jnp.where(jnp.abs(advantage) >= PUSH_FLOOR, advantage, 0.0)
    pushed = legal & (floored != 0)
    blocked = pushed & ~threshold_mask(logits, floored, legal, beta, centre)
    return jnp.sum(weights[:, None] * blocked) / jnp.maximum(
        jnp.sum(weights[:, None] * pushed), 1e-30)


def spg_loss(logits, q, legal, weights):
    """SPG: ``-sum_x w(x) sum_a pi(a|x) A(x, a)`` (no option: the softmax is blind to the
    common mode; nothing is blocked)."""
    advantage = advantages(logits, q, legal)
    per_state = -jnp.sum(masked_policy(logits, legal) * advantage, axis=-1)  # the one line
    return jnp.sum(weights * per_state), jnp.zeros((), logits.dtype)


def rmpg_loss(logits, q, legal, weights):
    """RMPG (regret-matching policy gradient; OpenSpiel's ``BatchRMLoss``):
    ``-sum_x w(x) sum_a pi(a|x) [A(x, a)]^+`` with the clipped advantage a constant."""
    advantage = jnp.maximum(advantages(logits, q, legal), 0.0)
    per_state = -jnp.sum(masked_policy(logits, legal) * advantage, axis=-1)
    return jnp.sum(weights * per_state), jnp.zeros((), logits.dtype)


def a2c_loss(logits, q, legal, weights, *, taken):
    """A2C, the sampled-action form (OpenSpiel's ``BatchA2CLoss``, its advantage from this
    harness's ``q``): ``-sum_x w(x) sum_a taken(x, a) log pi(a|x) A(x, a)``, ``A`` a
    constant.  ``taken [I, A]``: the share of the policy update's sampled steps at ``x`` that took
    ``a`` (each visited state's row sums to 1).  OpenSpiel's advantage is the sampled
    return minus a learned state value; here it is the critic's (or the exact) ``q`` of the
    taken action minus ``v = sum_a pi q``, so the algorithms differ in their loss only.  In
    expectation over the taken actions (``taken = pi``) its gradient is SPG's."""
    advantage = advantages(logits, q, legal)
    masked = jnp.where(legal, logits, -jnp.inf)
    log_pi = jnp.where(legal, logits - jax.nn.logsumexp(masked, axis=-1, keepdims=True), 0.0)
    per_state = -jnp.sum(jnp.where(legal, taken, 0.0) * log_pi * advantage, axis=-1)
    return jnp.sum(weights * per_state), jnp.zeros((), logits.dtype)


def rpg_loss(logits, q, legal, weights):
    """RPG (regret policy gradient; OpenSpiel's ``BatchRPGLoss``): ``sum_x w(x) sum_a
    [q(x, a) - v(x)]^+``, the regrets, with ``q`` a constant and ``v = sum_a pi q`` carrying
    the gradient through the policy."""
    pi = masked_policy(logits, legal)
    q = jnp.where(legal, jax.lax.stop_gradient(q), 0.0)
    value = jnp.sum(pi * q, axis=-1, keepdims=True)
    per_state = jnp.sum(jnp.where(legal, jnp.maximum(q - value, 0.0), 0.0), axis=-1)
    return jnp.sum(weights * per_state), jnp.zeros((), logits.dtype)


NORMALISATIONS = ("player_mean", "batch_sum", "trajectory_mean")


def state_weights(counts: jax.Array, players: jax.Array, normalisation: str,
                  trajectories: int) -> jax.Array:
    """``[I]``: each information state's weight in the policy loss (``loss_normalisation``)."""
    if normalisation == "player_mean":
        return player_weights(counts, players)
    if normalisation == "batch_sum":
        return counts
    if normalisation == "trajectory_mean":
        return counts / trajectories
    raise ValueError(f"unknown loss normalisation {normalisation!r}: one of {NORMALISATIONS}")


def player_weights(counts: jax.Array, players: jax.Array) -> jax.Array:
    """``[I]``: visit counts divided by the visits of the state's player (0 if none)."""
    totals = jnp.stack([jnp.sum(jnp.where(players == p, counts, 0.0)) for p in (0, 1)])
    total = totals[jnp.clip(players, 0, 1)]
    return jnp.where(total > 0, counts / jnp.where(total > 0, total, 1.0), 0.0)


def critic_loss(values: jax.Array, targets: jax.Array, players: jax.Array, valid: jax.Array
                ) -> jax.Array:
    """``sum_p mean_{valid steps of p} (Q(x, a) - target)^2 / 2``, shapes ``[M]``."""
    error = 0.5 * jnp.square(values - jax.lax.stop_gradient(targets))
    total = jnp.zeros((), values.dtype)
    for p in (0, 1):
        mine = valid & (players == p)
        total += jnp.sum(jnp.where(mine, error, 0.0)) / jnp.maximum(jnp.sum(mine), 1)
    return total
