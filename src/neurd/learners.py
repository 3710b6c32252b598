"""The paper's local learners as logit steps on softmax policies.

Every learner here holds logits ``y`` over a discrete action set, plays
``pi = softmax(y)`` and moves its logits by the advantage
``A(a) = q(a) - v``, ``v = sum_a pi(a) q(a)`` (or, inside CFR, by the
counterfactual regret, which is the advantage weighted by the opponents'
reach).  The two learners the paper compares differ in one line:

====================  ===========================  ============================
learner               logit step                   paper
====================  ===========================  ============================
NeuRD / Hedge / RD    ``y + eta * A``              eq. (nerd_discrete), Stmt. 1
SPG (all-actions)     ``y + eta * pi * A``         eq. (tabular_all_actions_pg)
====================  ===========================  ============================

Regret matching (Zinkevich et al. 2008) is kept as the reference learner of
CFR.  All functions are pure, work on the last axis and broadcast over any
leading batch axes, so they ``vmap``/``scan`` without change.  Illegal actions
(``legal_mask == False``) get probability zero and are never updated.

Shapes: ``logits``, ``q``, ``advantages``, ``legal_mask``: ``[..., A]``;
``step_size``: scalar or broadcastable to ``[..., 1]``.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from neurd.names import LEARNERS, NEURD, SPG, check_name


def policy(logits: jax.Array, legal_mask: jax.Array | None = None) -> jax.Array:
    """Softmax policy over the legal actions, ``[..., A] -> [..., A]``."""
    if legal_mask is not None:
        logits = jnp.where(legal_mask, logits, -jnp.inf)
    return jax.nn.softmax(logits, axis=-1)


def advantage(pi: jax.Array, q: jax.Array) -> jax.Array:
    """``A(a) = q(a) - sum_b pi(b) q(b)``: action values minus the policy's value."""
    return q - jnp.sum(pi * q, axis=-1, keepdims=True)


def neurd_step(
    logits: jax.Array,
    advantages: jax.Array,
    step_size: jax.Array | float,
    legal_mask: jax.Array | None = None,
) -> jax.Array:
    """NeuRD (= Hedge = discrete-time RD in the tabular case): ``y + eta * A``."""
    del legal_mask  # the step is the same for every action; illegal A are 0
    return logits + step_size * advantages


def spg_step(
    logits: jax.Array,
    advantages: jax.Array,
    step_size: jax.Array | float,
    legal_mask: jax.Array | None = None,
) -> jax.Array:
    """Softmax policy gradient (all actions): ``y + eta * pi * A``.

    ``pi * A`` is the gradient of ``pi . q`` with respect to the logits
    (paper, appendix A.1): the only difference from :func:`neurd_step`.
    """
    return logits + step_size * policy(logits, legal_mask) * advantages


LOGIT_STEPS = {NEURD: neurd_step, SPG: spg_step}


def logit_step(name: str):
    """The logit step of learner ``name`` (``"neurd"`` or ``"spg"``)."""
    return LOGIT_STEPS[check_name(name, LEARNERS, "learner")]


# --- reference learners -----------------------------------------------------


def hedge_policy(cumulative_utilities: jax.Array, step_size) -> jax.Array:
    """Hedge / exponential weights, eq. (hedge): ``softmax(eta * sum_t u_t)``."""
    return jax.nn.softmax(step_size * cumulative_utilities, axis=-1)


def discrete_replicator_step(pi: jax.Array, q: jax.Array, step_size=1.0) -> jax.Array:
    """Standard discrete-time RD (Cressman 2003; paper appendix A.5).

    ``pi'(a) = pi(a) exp(eta q(a)) / sum_b pi(b) exp(eta q(b))``; the paper
    writes it for ``eta = 1``.  Computed in log space for stability.
    """
    log_weights = jnp.log(pi) + step_size * q
    return jax.nn.softmax(log_weights, axis=-1)


def regret_matching_policy(
    cumulative_regrets: jax.Array, legal_mask: jax.Array | None = None
) -> jax.Array:
    """Regret matching: play in proportion to positive cumulative regret.

    Falls back to uniform over the legal actions when no regret is positive,
    exactly as OpenSpiel's ``CFRSolver``.
    """
    if legal_mask is None:
        legal_mask = jnp.ones(cumulative_regrets.shape, dtype=bool)
    positive = jnp.where(legal_mask, jnp.maximum(cumulative_regrets, 0.0), 0.0)
    total = jnp.sum(positive, axis=-1, keepdims=True)
    uniform = legal_mask / jnp.sum(legal_mask, axis=-1, keepdims=True)
    return jnp.where(total > 0.0, positive / jnp.where(total > 0.0, total, 1.0), uniform)
