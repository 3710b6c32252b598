"""Regret in repeated matching pennies (Figs 1-2): engine vs a plain loop, closed forms."""

import numpy as np
import pandas as pd
import pytest

from neurd import regret
from neurd.pipeline import matrix
from neurd.stats import refined_optimum

pytestmark = pytest.mark.usefixtures("float64")


def _reference_regret(horizon, step_size, algorithm, forfeit, fraction=0.4, win=1.0, loss=-1.0):
    """A plain NumPy loop over rounds, written from the paper's text."""
    n = 3 if forfeit else 2
    logits, total_u, total_value = np.zeros(n), np.zeros(n), 0.0
    switch = int(np.floor(round(fraction * horizon, 9)))
    for t in range(horizon):
        heads = t < switch
        u = np.array([win if heads else loss, loss if heads else win, loss][:n])
        pi = np.exp(logits - logits.max())
        pi /= pi.sum()
        value = pi @ u
        total_u += u
        total_value += value
        adv = u - value
        logits = logits + step_size * (adv if algorithm == "hedge" else pi * adv)
    return total_u.max() - total_value


@pytest.mark.parametrize("algorithm", ["hedge", "spg"])
@pytest.mark.parametrize("forfeit", [False, True])
def test_grid_matches_plain_loop(algorithm, forfeit):
    horizons = [5, 10, 37, 100]
    etas = [0.01, 0.21, 1.0, 7.5]
    grid = regret.regret_grid(horizons, etas, algorithm=algorithm, forfeit=forfeit)
    for i, h in enumerate(horizons):
        for j, eta in enumerate(etas):
            assert grid[i, j] == pytest.approx(
                _reference_regret(h, eta, algorithm, forfeit), abs=1e-10
            )


def test_hedge_with_a_huge_step_follows_the_leader():
    """Closed form: with eta -> infinity Hedge is follow-the-leader, whose regret here is
    2 (one uniform first round, one tie round at 0.8T), and 2 + 1/3 with Forfeit."""
    horizons = [10, 100, 1000]
    assert np.allclose(regret.regret_grid(horizons, [1e4], algorithm="hedge", forfeit=False), 2.0)
    assert np.allclose(regret.regret_grid(horizons, [1e4], algorithm="hedge", forfeit=True), 7 / 3)


@pytest.mark.parametrize("algorithm", ["hedge", "spg"])
def test_tiny_step_plays_uniform(algorithm):
    """eta -> 0: uniform play earns 0 per round (-1/3 with Forfeit); best action T earns 0.2T."""
    t = np.array([10, 100, 1000])
    r = regret.regret_grid(t, [1e-12], algorithm=algorithm, forfeit=False)[:, 0]
    np.testing.assert_allclose(r, 0.2 * t, rtol=1e-6)
    r = regret.regret_grid(t, [1e-12], algorithm=algorithm, forfeit=True)[:, 0]
    np.testing.assert_allclose(r, 0.2 * t + t / 3, rtol=1e-6)


@pytest.mark.parametrize("algorithm", ["hedge", "spg"])
def test_affine_rewards_rescale_regret(algorithm):
    """Rewards (1, 0) instead of (1, -1) halve the advantages: with twice the step
    size the policies are identical and the regret is exactly half."""
    h, eta = [20, 100], np.array([0.05, 0.3, 2.0])
    stated = regret.regret_grid(h, eta, algorithm=algorithm, forfeit=True)
    shifted = regret.regret_grid(h, 2 * eta, algorithm=algorithm, forfeit=True, win=1.0, loss=0.0)
    np.testing.assert_allclose(shifted, stated / 2, rtol=1e-12)


def test_switch_rounds_are_exact_integers():
    np.testing.assert_array_equal(regret.switch_rounds([10, 35, 100, 101], 0.4), [4, 14, 40, 40])


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="horizons"):
        regret.regret_grid([10, 0], [1.0], algorithm="spg", forfeit=False)
    with pytest.raises(ValueError, match="step sizes"):
        regret.regret_grid([10], [-1.0], algorithm="spg", forfeit=False)
    with pytest.raises(ValueError, match="'adam'"):
        regret.regret_grid([10], [1.0], algorithm="adam", forfeit=False)


@pytest.mark.parametrize("algorithm", ["hedge", "neurd", "spg"])
def test_trajectory_matches_the_loop(algorithm):
    logits, probs = regret.trajectory(100, 0.21, algorithm=algorithm, forfeit=True)
    assert logits.shape == probs.shape == (101, 3)
    np.testing.assert_array_equal(logits[0], 0.0)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-14)
    # regret from the recorded policies equals the engine's
    switch = 40
    u = np.where(np.arange(100)[:, None] < switch, [1.0, -1.0, -1.0], [-1.0, 1.0, -1.0])
    from_trajectory = u.sum(axis=0).max() - np.sum(probs[:-1] * u)
    engine = "hedge" if algorithm in ("hedge", "neurd") else "spg"
    expected = regret.regret_grid([100], [0.21], algorithm=engine, forfeit=True)[0, 0]
    assert from_trajectory == pytest.approx(expected, abs=1e-10)
    if algorithm == "hedge":
        np.testing.assert_allclose(logits[1:], 0.21 * np.cumsum(u, axis=0), atol=1e-12)


def test_tuned_breaks_ties_towards_the_smallest_step():
    sweep = pd.DataFrame({
        "algorithm": "hedge", "forfeit": False, "horizon": 10,
        "step_size": [1.0, 2.0, 3.0, 4.0], "regret": [3.0, 2.0 + 1e-13, 2.0, 2.5],
    })
    best = matrix.tuned(sweep)
    assert len(best) == 1 and best.step_size.iloc[0] == 2.0


def test_refined_optimum_finds_a_parabola_vertex():
    eta = np.logspace(-2, 2, 41)
    regrets = (np.log10(eta) - np.log10(0.2086)) ** 2 + 5
    optimum, inside = refined_optimum(eta, regrets)
    assert inside and optimum == pytest.approx(0.2086, rel=1e-9)
    optimum, inside = refined_optimum(eta, -np.log10(eta))
    assert not inside and optimum == pytest.approx(100.0)


@pytest.mark.parametrize("call", [
    lambda: regret.regret_grid([10], [0.1, np.nan], algorithm="spg", forfeit=False),
    lambda: regret.regret_grid([10], [np.inf], algorithm="hedge", forfeit=True),
    lambda: regret.regret_grid([10], [0.1], algorithm="spg", forfeit=False, win=np.nan),
    lambda: regret.regret_grid([10], [0.1], algorithm="spg", forfeit=False,
                               switch_fraction=np.nan),
    lambda: regret.trajectory(10, np.nan, algorithm="spg", forfeit=True),
    lambda: regret.trajectory(10, np.inf, algorithm="hedge", forfeit=True),
    lambda: regret.trajectory(10, 0.1, algorithm="neurd", forfeit=True, loss=-np.inf),
    lambda: regret.trajectory(0, 0.1, algorithm="neurd", forfeit=True),
])
def test_non_finite_inputs_are_refused(call):
    with pytest.raises(ValueError, match="finite|positive|switch_fraction"):
        call()
