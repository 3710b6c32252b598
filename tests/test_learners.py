"""The paper's statements about the learners, checked numerically."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from neurd import learners

pytestmark = pytest.mark.usefixtures("float64")


def _random_utilities(seed, rounds=200, actions=4, scale=3.0):
    return np.random.default_rng(seed).uniform(-scale, scale, size=(rounds, actions))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("step_size", [0.05, 1.0, 2.5])
def test_statement_1_hedge_rd_and_tabular_neurd_play_the_same_policies(seed, step_size):
    """Statement 1: Hedge, standard discrete-time RD and single-state NeuRD coincide."""
    utilities = _random_utilities(seed)
    n = utilities.shape[1]
    logits = jnp.zeros(n)  # NeuRD
    rd_policy = jnp.full(n, 1.0 / n)  # discrete-time RD (Cressman), started uniform
    cumulative = jnp.zeros(n)  # Hedge
    for u in utilities:
        hedge = learners.hedge_policy(cumulative, step_size)
        neurd_pi = learners.policy(logits)
        np.testing.assert_allclose(neurd_pi, hedge, rtol=0, atol=1e-12)
        np.testing.assert_allclose(rd_policy, hedge, rtol=0, atol=1e-12)
        # each learner sees the utility vector of the round and updates
        logits = learners.neurd_step(logits, learners.advantage(neurd_pi, u), step_size)
        rd_policy = learners.discrete_replicator_step(rd_policy, u, step_size)
        cumulative = cumulative + u


def test_statement_1_fails_for_spg():
    """The same check distinguishes SPG, so the test above can fail."""
    u = _random_utilities(0, rounds=5)
    logits = jnp.zeros(4)
    for row in u:
        logits = learners.spg_step(logits, learners.advantage(learners.policy(logits), row), 1.0)
    hedge = learners.hedge_policy(u.sum(axis=0), 1.0)
    assert np.max(np.abs(learners.policy(logits) - hedge)) > 1e-3


@pytest.mark.parametrize("seed", range(10))
def test_spg_step_is_the_gradient_of_expected_value_wrt_logits(seed):
    """Appendix A.1: grad_y (softmax(y) . u) = pi * (u - pi . u)."""
    rng = np.random.default_rng(seed)
    y, u = rng.normal(size=5) * 2, rng.normal(size=5)
    grad = jax.grad(lambda z: jnp.dot(jax.nn.softmax(z), u))(y)
    direction = learners.spg_step(y, learners.advantage(learners.policy(y), u), 1.0) - y
    np.testing.assert_allclose(direction, grad, rtol=0, atol=1e-14)


@pytest.mark.parametrize("seed", range(10))
def test_neurd_direction_is_the_natural_gradient(seed):
    """Theorem (NeuRD = NPG at the softmax): F A = grad_y(pi . q), and F^+ grad = A - mean(A).

    The Fisher matrix of the softmax w.r.t. its logits, F = diag(pi) - pi pi^T, is
    singular along the all-ones direction (logit shifts do not change pi), so the
    natural direction is defined up to that shift: it equals the advantage after
    centring, and it moves the policy exactly as the NeuRD step does.
    """
    rng = np.random.default_rng(seed)
    y, q = rng.normal(size=6), rng.normal(size=6)
    pi = learners.policy(y)
    fisher = jax.jacfwd(lambda z: jax.nn.log_softmax(z))(y)  # d log pi(c) / d y(a)
    fisher = (fisher * pi[:, None]).T @ fisher  # sum_c pi(c) dlogpi dlogpi^T
    np.testing.assert_allclose(fisher, jnp.diag(pi) - jnp.outer(pi, pi), atol=1e-14)
    a = learners.advantage(pi, q)
    gradient = jax.grad(lambda z: jnp.dot(jax.nn.softmax(z), q))(y)
    np.testing.assert_allclose(fisher @ a, gradient, atol=1e-14)
    natural = jnp.linalg.pinv(fisher) @ gradient
    np.testing.assert_allclose(natural, a - a.mean(), atol=1e-10)
    eta = 0.7
    np.testing.assert_allclose(
        learners.policy(y + eta * natural),
        learners.policy(learners.neurd_step(y, a, eta)),
        atol=1e-12,
    )


def test_legal_mask_gives_zero_probability_and_no_update():
    y = jnp.array([0.3, -1.0, 2.0])
    mask = jnp.array([True, False, True])
    pi = learners.policy(y, mask)
    assert pi[1] == 0.0 and np.isclose(pi.sum(), 1.0)
    a = jnp.where(mask, learners.advantage(pi, jnp.array([1.0, 5.0, -1.0])), 0.0)
    new = learners.spg_step(y, a, 1.0, mask)
    assert new[1] == y[1]


def test_regret_matching_policy():
    mask = jnp.array([True, True, True, False])
    np.testing.assert_allclose(
        learners.regret_matching_policy(jnp.array([1.0, -2.0, 3.0, 9.0]), mask), [0.25, 0, 0.75, 0]
    )
    np.testing.assert_allclose(
        learners.regret_matching_policy(jnp.array([-1.0, 0.0, -3.0, 9.0]), mask), [1 / 3] * 3 + [0]
    )


def test_unknown_learner_is_named():
    with pytest.raises(ValueError, match="'adam'"):
        learners.logit_step("adam")
