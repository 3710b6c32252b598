"""NeuRD's readings of its logits along a state's common mode (the direction the softmax
cannot see): the raw reading pushes it, the centred one cannot (neurd.neural.losses)."""

import jax.numpy as jnp
import numpy as np
import pytest

from neurd.neural.losses import (
    CENTRINGS,
    advantages,
    common_mode_gradient,
    neurd_loss,
    threshold_mask,
)
from neurd.precision import float64

# Three states of three actions: the third state's last action illegal; a policy far from
# uniform, so that the advantage (centred under the policy) does not sum to 0 over the actions
LOGITS = np.array([[1.5, -0.5, 0.2], [0.3, 0.0, -1.9], [1.0, -1.2, 0.0]])
Q = np.array([[1.0, -2.0, 0.5], [0.2, 0.7, -1.0], [2.0, -1.0, 0.0]])
LEGAL = np.array([[True, True, True], [True, True, True], [True, True, False]])
WEIGHTS = np.array([0.5, 0.3, 0.2])


def _gradient(reading: str, logits=LOGITS, beta: float = 2.0) -> np.ndarray:
    with float64():
        return np.asarray(common_mode_gradient(
            jnp.asarray(logits), jnp.asarray(Q), jnp.asarray(LEGAL), jnp.asarray(WEIGHTS),
            beta, CENTRINGS[reading]))


def test_the_raw_readings_common_mode_gradient_is_minus_the_summed_advantage():
    with float64():
        advantage = np.asarray(advantages(jnp.asarray(LOGITS), jnp.asarray(Q),
                                          jnp.asarray(LEGAL)))
    raw = _gradient("raw")
    np.testing.assert_allclose(raw, -WEIGHTS * advantage.sum(axis=-1), rtol=1e-12)
    assert np.all(np.abs(raw) > 1e-3), raw  # not zero: A is centred under pi, not uniformly


def test_the_centred_readings_common_mode_gradient_is_zero_to_rounding():
    assert np.all(np.abs(_gradient("raw")) > 1e-3)
    np.testing.assert_allclose(_gradient("centred"), 0.0, atol=1e-15)


def test_centred_over_all_actions_still_pushes_the_legal_common_mode_where_some_are_illegal():
    """OpenSpiel's BatchNeuRDLoss centres over every output: adding ``c`` to the legal ones
    moves its ``y`` by ``c (1 - L/A)``; blind to it only where every action is legal."""
    gradient = _gradient("centred_all")
    np.testing.assert_allclose(gradient[:2], 0.0, atol=1e-15)
    np.testing.assert_allclose(gradient[2], _gradient("raw")[2] * (1 - 2 / 3), rtol=1e-12)


def test_the_threshold_makes_even_a_policy_centred_advantage_push_the_raw_common_mode():
    """Where the threshold blocks a push, the raw reading's common-mode gradient is minus the
    sum of the advantages let through (the blocked one left out); the centred reading's is
    still zero."""
    logits = LOGITS.copy()
    logits[0] = [4.0, 0.0, -1.0]  # centred [3, -1, -2]: action 0 past beta = 2, A > 0
    with float64():
        advantage = np.asarray(advantages(jnp.asarray(logits), jnp.asarray(Q),
                                          jnp.asarray(LEGAL)))
        allowed = np.asarray(threshold_mask(jnp.asarray(logits), jnp.asarray(advantage),
                                            jnp.asarray(LEGAL), 2.0))
    assert advantage[0, 0] > 0 and not allowed[0, 0]  # pushed up past +beta: blocked
    assert allowed[0, 1]
    raw = _gradient("raw", logits)
    np.testing.assert_allclose(raw, -WEIGHTS * np.where(allowed, advantage, 0).sum(-1),
                               rtol=1e-12)
    assert abs(raw[0]) > 1e-3
    np.testing.assert_allclose(_gradient("centred", logits), 0.0, atol=1e-15)


@pytest.mark.parametrize("reading", sorted(CENTRINGS))
def test_every_reading_gives_the_softmax_the_same_centred_step_on_a_table(reading):
    """On a table (one logit per state and action), every reading's gradient centred over the
    legal actions is the same: the readings differ only along the common mode (and, for
    centred_all, where some actions are illegal, along the illegal outputs)."""
    def loss(logits, centre):
        return neurd_loss(logits, jnp.asarray(Q), jnp.asarray(LEGAL), jnp.asarray(WEIGHTS),
                          2.0, centre)[0]
    import jax

    with float64():
        grads = {r: np.asarray(jax.grad(loss)(jnp.asarray(LOGITS), CENTRINGS[r]))
                 for r in CENTRINGS}

    def centred(g):
        g = np.where(LEGAL, g, 0.0)
        return np.where(LEGAL, g - g.sum(-1, keepdims=True) / LEGAL.sum(-1, keepdims=True), 0)
    np.testing.assert_allclose(centred(grads[reading]), centred(grads["raw"]), atol=1e-14)
