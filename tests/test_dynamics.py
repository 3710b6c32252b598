"""Continuous-time NeuRD/RD and SPG/QPG flows (paper eqs. rd, qpg, nerd_continuous)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from neurd import streams
from neurd.dynamics import (
    euler_time_average_nash_conv,
    integrate_flow,
    logit_velocity,
    phase_restarts,
    phase_schedule,
    policy_velocity,
    sample_initial_policies,
    simplex_grid,
    speed_ratio,
)
from neurd.matrix_games import biased_rps, biased_rps_nash

pytestmark = pytest.mark.usefixtures("float64")


def random_antisymmetric(rng, n):
    a = rng.normal(size=(n, n))
    return a - a.T


@pytest.fixture
def cases():
    """(logits [A], payoff [A, A]) pairs: biased RPS and random symmetric zero-sum games."""
    rng = np.random.default_rng(7)
    out = [(rng.normal(size=3) * 2, biased_rps(nu)) for nu in (0.0, 1.0, 3.0, 20.0)]
    out += [(rng.normal(size=n) * 2, random_antisymmetric(rng, n)) for n in (2, 4, 5)]
    return out


def softmax_jacobian(logits):
    return np.asarray(jax.jacobian(jax.nn.softmax)(jnp.asarray(logits)))


def test_neurd_flow_through_softmax_jacobian_is_replicator_dynamics(cases):
    for logits, payoff in cases:
        pi = np.exp(logits) / np.exp(logits).sum()
        q = payoff @ pi
        rd = pi * (q - pi @ q)  # eq. (rd)
        y_dot = np.asarray(logit_velocity(jnp.asarray(logits), jnp.asarray(payoff), "neurd"))
        np.testing.assert_allclose(softmax_jacobian(logits) @ y_dot, rd, rtol=0, atol=1e-14)
        np.testing.assert_allclose(
            policy_velocity(jnp.asarray(logits), jnp.asarray(payoff), "neurd"), rd,
            rtol=0, atol=1e-14)


def test_spg_flow_through_softmax_jacobian_is_qpg(cases):
    for logits, payoff in cases:
        pi = np.exp(logits) / np.exp(logits).sum()
        q = payoff @ pi
        adv = q - pi @ q
        qpg = pi * (pi * adv - np.sum(pi**2 * adv))  # eq. (qpg)
        y_dot = np.asarray(logit_velocity(jnp.asarray(logits), jnp.asarray(payoff), "spg"))
        np.testing.assert_allclose(softmax_jacobian(logits) @ y_dot, qpg, rtol=0, atol=1e-14)
        np.testing.assert_allclose(
            policy_velocity(jnp.asarray(logits), jnp.asarray(payoff), "spg"), qpg,
            rtol=0, atol=1e-14)


def test_logit_velocities_are_advantage_and_policy_times_advantage(cases):
    for logits, payoff in cases:
        pi = np.exp(logits) / np.exp(logits).sum()
        adv = payoff @ pi - pi @ payoff @ pi
        y = jnp.asarray(logits)
        np.testing.assert_allclose(logit_velocity(y, payoff, "neurd"), adv, atol=1e-14)
        np.testing.assert_allclose(logit_velocity(y, payoff, "spg"), pi * adv, atol=1e-14)


def test_flows_broadcast_over_a_batch_of_logits():
    payoff = jnp.asarray(biased_rps(3.0))
    logits = jnp.asarray(np.random.default_rng(0).normal(size=(6, 3)))
    for learner in ("neurd", "spg"):
        batch = policy_velocity(logits, payoff, learner)
        rows = jnp.stack([policy_velocity(y, payoff, learner) for y in logits])
        np.testing.assert_allclose(batch, rows, atol=1e-15)


def test_speed_ratio_at_the_centre_is_three():
    # At pi = 1/3: RD gives pi*A = A/3; QPG gives pi*(pi*A - sum pi^2 A) = A/9 (sum pi A = 0).
    for nu in (0.5, 3.0, 20.0):
        rd, pg = speed_ratio(np.full((1, 3), 1 / 3), biased_rps(nu))
        assert rd[0] / pg[0] == pytest.approx(3.0, rel=1e-12)


def reference_time_average_run(pi0, payoffs, restart, dt, learner):
    """Plain numpy loop: play pi_t, average it, record NashConv, then Euler-step the logits."""
    y = np.log(pi0)
    total, count, out = np.zeros_like(pi0), 0, []
    for payoff, reset in zip(payoffs, restart):
        if reset:
            total, count = np.zeros_like(pi0), 0
        pi = np.exp(y - y.max())
        pi /= pi.sum()
        total, count = total + pi, count + 1
        out.append(2 * np.max(payoff @ (total / count)))
        adv = payoff @ pi - pi @ payoff @ pi
        y = y + dt * (adv if learner == "neurd" else pi * adv)
    return np.array(out)


@pytest.mark.parametrize("learner", ["neurd", "spg"])
def test_euler_runs_match_a_plain_loop_with_phase_restarts(learner):
    phases, nus = phase_schedule([20.0, 0.0, 3.0], 40)
    payoffs = np.stack([biased_rps(nu) for nu in nus])
    restart = phase_restarts(phases, restart_average=True)
    starts = sample_initial_policies(jax.random.PRNGKey(3), 5)
    got = euler_time_average_nash_conv(starts, payoffs, restart, 0.1, learner)
    assert got.shape == (5, 120)
    for i, pi0 in enumerate(starts):
        want = reference_time_average_run(pi0, payoffs, restart, 0.1, learner)
        np.testing.assert_allclose(got[i], want, rtol=1e-12, atol=1e-12)


def test_restart_changes_only_later_phases():
    phases, nus = phase_schedule([3.0, 1.0], 50)
    payoffs = np.stack([biased_rps(nu) for nu in nus])
    starts = sample_initial_policies(jax.random.PRNGKey(0), 4)
    kept = euler_time_average_nash_conv(
        starts, payoffs, phase_restarts(phases, False), 0.1, "neurd")
    fresh = euler_time_average_nash_conv(
        starts, payoffs, phase_restarts(phases, True), 0.1, "neurd")
    np.testing.assert_array_equal(kept[:, :50], fresh[:, :50])
    assert np.max(np.abs(kept[:, 50:] - fresh[:, 50:])) > 1e-3


def test_initial_policies_are_seeded_and_uniform_on_the_simplex():
    a = sample_initial_policies(streams.key(0, "rps.biased"), 4000)
    np.testing.assert_array_equal(a, sample_initial_policies(streams.key(0, "rps.biased"), 4000))
    assert not np.allclose(a, sample_initial_policies(streams.key(0, "rps.nonstationary"), 4000))
    assert not np.allclose(a, sample_initial_policies(streams.key(1, "rps.biased"), 4000))
    assert a.shape == (4000, 3) and np.all(a > 0) and np.allclose(a.sum(axis=1), 1.0)
    # Uniform on the 2-simplex = Dirichlet(1,1,1): each coordinate is Beta(1, 2),
    # and the four triangles of the midpoint subdivision (equal areas) are
    # equally likely.  alpha = 1e-3 per check: the chance a correct sampler
    # fails it with another seed.
    for k in range(3):
        assert stats.kstest(a[:, k], stats.beta(1, 2).cdf).pvalue > 1e-3
    corner = np.argmax(a >= 0.5, axis=1) + 3 * ~np.any(a >= 0.5, axis=1)  # 0,1,2 or 3 (middle)
    counts = np.bincount(corner, minlength=4)
    assert stats.chisquare(counts).pvalue > 1e-3


def test_rd_conserves_kl_to_the_interior_nash_and_spg_does_not():
    # Hofbauer & Sigmund: KL(x*||pi) is a constant of motion of RD in zero-sum
    # games with an interior Nash x*; a failing integrator or flow breaks it.
    times = np.linspace(0.0, 40.0, 400)
    starts = np.array([[0.6, 0.2, 0.2], [0.1, 0.3, 0.6]])
    for nu in (1.0, 3.0):
        x = biased_rps_nash(nu)
        for learner, conserved in (("neurd", True), ("spg", False)):
            pi, _ = integrate_flow(starts, biased_rps(nu), learner, times, rtol=1e-10, atol=1e-10)
            kl = np.sum(x * np.log(x / pi), axis=-1)
            drift = np.max(np.abs(kl - kl[:, :1]) / kl[:, :1])
            assert (drift < 1e-6) if conserved else (drift > 1e-2), (nu, learner, drift)


def test_continuous_time_average_matches_quadrature_and_converges_for_rd():
    times = np.linspace(0.0, 300.0, 30001)
    start = np.array([[0.6, 0.2, 0.2]])
    pi, avg = integrate_flow(start, biased_rps(3.0), "neurd", times, rtol=1e-10, atol=1e-10)
    quadrature = np.trapezoid(pi[0], times, axis=0) / times[-1]
    np.testing.assert_allclose(avg[0, -1], quadrature, atol=1e-6)
    np.testing.assert_allclose(avg[0, 0], start[0])
    assert np.linalg.norm(avg[0, -1] - biased_rps_nash(3.0)) < 0.01


def test_bad_inputs_are_refused_with_the_value():
    payoffs = np.stack([biased_rps(1.0)] * 3)
    ok_restart = np.array([True, False, False])
    starts = sample_initial_policies(jax.random.PRNGKey(0), 2)
    with pytest.raises(ValueError, match="'rd'"):
        euler_time_average_nash_conv(starts, payoffs, ok_restart, 0.1, "rd")
    with pytest.raises(ValueError, match="-0.1"):
        euler_time_average_nash_conv(starts, payoffs, ok_restart, -0.1, "neurd")
    with pytest.raises(ValueError, match="interior"):
        euler_time_average_nash_conv(np.array([[1.0, 0.0, 0.0]]), payoffs, ok_restart, 0.1, "neurd")
    with pytest.raises(ValueError, match="restart"):
        euler_time_average_nash_conv(starts, payoffs, ~ok_restart, 0.1, "neurd")
    with pytest.raises(ValueError, match="antisymmetric"):
        euler_time_average_nash_conv(starts, np.abs(payoffs), ok_restart, 0.1, "neurd")
    with pytest.raises(ValueError, match="interior"):
        integrate_flow([[0.5, 0.5, 0.0]], biased_rps(1.0), "spg", [0.0, 1.0])
    with pytest.raises(ValueError, match="increasing"):
        integrate_flow([[0.4, 0.3, 0.3]], biased_rps(1.0), "spg", [1.0, 0.5])
    with pytest.raises(ValueError, match="smallest"):
        speed_ratio(np.array([[1.0, 0.0, 0.0]]), biased_rps(1.0))
    with pytest.raises(ValueError, match="tolerances"):
        integrate_flow([[0.4, 0.3, 0.3]], biased_rps(1.0), "spg", [0.0, 1.0], rtol=np.nan)


def test_simplex_grid_is_interior_and_complete():
    grid = simplex_grid(10)
    assert len(grid) == 36  # (i, j, k) >= 1 with i + j + k = 10: C(9, 2)
    assert np.all(grid > 0) and np.allclose(grid.sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="2"):
        simplex_grid(2)
