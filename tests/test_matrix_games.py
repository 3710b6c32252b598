"""Biased RPS, its Nash equilibria and NashConv, against closed forms, linprog and OpenSpiel."""

import numpy as np
import pyspiel
import pytest
from open_spiel.python import policy as os_policy
from scipy.optimize import linprog

from neurd.matrix_games import (
    biased_rps,
    biased_rps_nash,
    bimatrix_nash_conv,
    check_symmetric_zero_sum,
    symmetric_equilibrium_bounds,
    symmetric_nash_conv,
)

NUS = (0.5, 1.0, 3.0, 20.0)


def openspiel_nash_conv(row_payoff, col_payoff, x, y) -> float:
    """NashConv of (x, y) computed by OpenSpiel on its own matrix-game implementation."""
    n_rows, n_cols = row_payoff.shape
    game = pyspiel.create_matrix_game(
        "test", "test", [str(i) for i in range(n_rows)], [str(j) for j in range(n_cols)],
        row_payoff.tolist(), col_payoff.tolist())
    game = pyspiel.convert_to_turn_based(game)
    table = os_policy.TabularPolicy(game)
    state = game.new_initial_state()
    for player, strategy in ((0, x), (1, y)):
        row = table.policy_for_key(state.information_state_string(player))
        assert state.legal_actions(player) == list(range(len(strategy)))
        row[:] = 0.0  # width is the larger action count; the rest are illegal
        row[:len(strategy)] = strategy
        state.apply_action(0)
    return pyspiel.nash_conv(game, os_policy.python_policy_to_pyspiel_policy(table))


def maximin(row_payoff):
    """Row player's maximin strategy and the game value by linprog: max v s.t. x.A >= v."""
    n_rows, n_cols = row_payoff.shape
    c = np.zeros(n_rows + 1)
    c[-1] = -1.0
    a_ub = np.hstack([-row_payoff.T, np.ones((n_cols, 1))])
    a_eq = np.hstack([np.ones((1, n_rows)), np.zeros((1, 1))])
    res = linprog(c, A_ub=a_ub, b_ub=np.zeros(n_cols), A_eq=a_eq, b_eq=[1.0],
                  bounds=[(0, 1)] * n_rows + [(None, None)], method="highs")
    assert res.success
    return res.x[:-1], res.x[-1]


def test_biased_rps_matrix():
    np.testing.assert_array_equal(biased_rps(1.0), [[0, -1, 1], [1, 0, -1], [-1, 1, 0]])
    np.testing.assert_array_equal(biased_rps(3.0), [[0, -1, 3], [1, 0, -1], [-3, 1, 0]])
    for nu in (0.0, *NUS):
        check_symmetric_zero_sum(biased_rps(nu))
    with pytest.raises(ValueError, match="inf"):
        biased_rps(float("inf"))


@pytest.mark.parametrize("nu", NUS)
def test_closed_form_nash_is_the_linprog_solution(nu):
    payoff = biased_rps(nu)
    x = biased_rps_nash(nu)
    strategy, value = maximin(payoff)
    assert value == pytest.approx(0.0, abs=1e-9)
    np.testing.assert_allclose(strategy, x, atol=1e-8)
    np.testing.assert_allclose(payoff @ x, 0.0, atol=1e-15)
    assert symmetric_nash_conv(payoff, x) == pytest.approx(0.0, abs=1e-15)
    assert openspiel_nash_conv(payoff, -payoff, x, x) == pytest.approx(0.0, abs=1e-12)


def test_known_nash_conv_values():
    # Pure R in RPS: P earns 1 against it, for each of the two players.
    assert symmetric_nash_conv(biased_rps(1.0), np.array([1.0, 0, 0])) == pytest.approx(2.0)
    # Uniform in nu = 3: M u = (2/3, 0, -2/3).
    assert symmetric_nash_conv(biased_rps(3.0), np.full(3, 1 / 3)) == pytest.approx(4 / 3)
    # Pure S in nu = 20: R earns nu.
    assert symmetric_nash_conv(biased_rps(20.0), np.array([0, 0, 1.0])) == pytest.approx(40.0)


def test_symmetric_nash_conv_is_the_two_player_one_with_both_playing_pi():
    rng = np.random.default_rng(1)
    for nu in NUS:
        payoff = biased_rps(nu)
        for pi in rng.dirichlet(np.ones(3), size=5):
            assert symmetric_nash_conv(payoff, pi) == pytest.approx(
                bimatrix_nash_conv(payoff, -payoff, pi, pi), abs=1e-13)


def test_two_player_nash_conv_matches_openspiel_on_general_sum_games():
    rng = np.random.default_rng(2)
    for shape in ((3, 3), (2, 4), (4, 3)):
        a, b = rng.normal(size=shape), rng.normal(size=shape)
        x, y = rng.dirichlet(np.ones(shape[0])), rng.dirichlet(np.ones(shape[1]))
        assert bimatrix_nash_conv(a, b, x, y) == pytest.approx(
            openspiel_nash_conv(a, b, x, y), abs=1e-12)


def test_nash_conv_broadcasts_over_a_batch():
    payoff = biased_rps(3.0)
    pis = np.random.default_rng(3).dirichlet(np.ones(3), size=7)
    batch = symmetric_nash_conv(payoff, pis)
    assert batch.shape == (7,)
    np.testing.assert_allclose(batch, [symmetric_nash_conv(payoff, p) for p in pis])


@pytest.mark.parametrize("nu", NUS)
def test_equilibrium_is_unique_and_interior_for_positive_nu(nu):
    lower, upper = symmetric_equilibrium_bounds(biased_rps(nu))
    np.testing.assert_allclose(lower, biased_rps_nash(nu), atol=1e-9)
    np.testing.assert_allclose(upper, biased_rps_nash(nu), atol=1e-9)


def test_equilibria_at_nu_zero_form_a_segment_on_the_rock_scissors_edge():
    # M pi = (-p, r - s, p) <= 0  <=>  p = 0 and r <= s: from (1/2, 0, 1/2) to pure S.
    payoff = biased_rps(0.0)
    lower, upper = symmetric_equilibrium_bounds(payoff)
    np.testing.assert_allclose(lower, [0.0, 0.0, 0.5], atol=1e-9)
    np.testing.assert_allclose(upper, [0.5, 0.0, 1.0], atol=1e-9)
    for r in np.linspace(0.0, 0.5, 6):
        pi = np.array([r, 0.0, 1 - r])
        assert symmetric_nash_conv(payoff, pi) == pytest.approx(0.0, abs=1e-15)
    assert symmetric_nash_conv(payoff, np.array([0.6, 0.0, 0.4])) > 0.1
    assert symmetric_nash_conv(payoff, np.full(3, 1 / 3)) > 0.5  # the centre is not a Nash


def test_bad_games_are_refused():
    with pytest.raises(ValueError, match="-1"):
        biased_rps_nash(-1.0)
    with pytest.raises(ValueError, match="antisymmetric"):
        check_symmetric_zero_sum(np.ones((3, 3)))
    with pytest.raises(ValueError, match="square"):
        check_symmetric_zero_sum(np.zeros((2, 3)))
