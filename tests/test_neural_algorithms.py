"""The registry of neural algorithms: each built-in loss's gradient in the logits is its
written-out formula on a hand-made case (OpenSpiel's definitions of QPG, RM and RPG
written out beside them), a user's algorithm registers from Python or an entry point and
runs beside NeuRD without changing NeuRD's numbers, and a config names only registered
algorithms."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from neurd.config import ConfigError
from neurd.games import compile_game
from neurd.names import NEURD, SPG
from neurd.neural import algorithms, experiment, losses, train
from neurd.neural.arguments import check_plan

# two information states, three actions; the second state's last action is illegal
LOGITS = jnp.array([[0.3, -0.2, 0.5], [1.0, 0.1, 7.0]], jnp.float32)
Q = jnp.array([[1.0, -0.5, 0.25], [0.2, 0.9, 5.0]], jnp.float32)
LEGAL = jnp.array([[True, True, True], [True, True, False]])
WEIGHTS = jnp.array([0.7, 1.3], jnp.float32)


def _written_out():
    """``(pi, A, w)`` of the hand-made case in float64, by hand."""
    logits, q = np.asarray(LOGITS, np.float64), np.asarray(Q, np.float64)
    legal = np.asarray(LEGAL)
    e = np.where(legal, np.exp(logits - logits.max(axis=1, keepdims=True)), 0.0)
    pi = e / e.sum(axis=1, keepdims=True)
    q = np.where(legal, q, 0.0)
    advantage = np.where(legal, q - (pi * q).sum(axis=1, keepdims=True), 0.0)
    return pi, advantage, np.asarray(WEIGHTS, np.float64)[:, None]


def _gradient(name, beta=100.0):
    loss = algorithms.get(name).function()
    return np.asarray(jax.grad(lambda y: loss(y, Q, LEGAL, WEIGHTS, beta)[0])(LOGITS))


def test_the_built_in_algorithms_are_registered_the_papers_first():
    assert algorithms.registered()[:4] == (NEURD, SPG, "rmpg", "rpg")
    assert [algorithms.get(a).label for a in ("rmpg", "rpg")] == ["RMPG", "RPG"]


@pytest.mark.parametrize("name, formula", [
    (NEURD, lambda pi, a, w: -w * a),
    (SPG, lambda pi, a, w: -w * pi * a),
    ("rmpg", lambda pi, a, w: -w * pi * (np.maximum(a, 0)
                                         - (pi * np.maximum(a, 0)).sum(1, keepdims=True))),
    ("rpg", lambda pi, a, w: -w * (a > 0).sum(1, keepdims=True) * pi * a),
])
def test_each_loss_moves_the_logits_by_its_written_out_formula(name, formula):
    pi, advantage, w = _written_out()
    expected = np.where(np.asarray(LEGAL), formula(pi, advantage, w), 0.0)
    np.testing.assert_allclose(_gradient(name), expected, rtol=2e-6, atol=1e-7)
    assert np.all(_gradient(name)[~np.asarray(LEGAL)] == 0.0)


def _openspiel_style(kind):
    """OpenSpiel's ``rl_losses`` (QPG, RM, RPG) written out in JAX on the legal actions, each
    state weighted by ``WEIGHTS`` (its batch mean's weights)."""
    def loss(logits):
        pi = jax.nn.softmax(jnp.where(LEGAL, logits, -jnp.inf), axis=1)
        q = jax.lax.stop_gradient(jnp.where(LEGAL, Q, 0.0))
        baseline = jnp.sum(pi * q, axis=1)  # backprop through pi, not q
        if kind == "rpg":
            regrets = jnp.where(LEGAL, jax.nn.relu(q - baseline[:, None]), 0.0)
            return jnp.sum(WEIGHTS * jnp.sum(regrets, axis=1))
        advantages = jnp.where(LEGAL, q - baseline[:, None], 0.0)
        if kind == "rm":
            advantages = jax.nn.relu(advantages)
        per_state = jnp.sum(-pi * jax.lax.stop_gradient(advantages), axis=1)
        return jnp.sum(WEIGHTS * per_state)
    return loss


@pytest.mark.parametrize("kind, name", [("qpg", SPG), ("rm", "rmpg"), ("rpg", "rpg")])
def test_openspiels_qpg_rm_and_rpg_are_spg_rmpg_and_rpg(kind, name):
    """QPG is this project's all-actions SPG: the same loss and gradient (no separate
    entry); RM and RPG are rmpg and rpg."""
    theirs = _openspiel_style(kind)
    ours = algorithms.get(name).function()
    assert float(theirs(LOGITS)) == pytest.approx(
        float(ours(LOGITS, Q, LEGAL, WEIGHTS, 2.0)[0]), rel=1e-6)
    np.testing.assert_allclose(np.asarray(jax.grad(theirs)(LOGITS)), _gradient(name, 2.0),
                               rtol=1e-6, atol=1e-7)


def test_registering_checks_the_name_and_keeps_a_name_to_one_loss():
    with pytest.raises(ValueError, match="lower-case letters"):
        algorithms.register("My Algo", losses.spg_loss)
    with pytest.raises(ValueError, match="not callable"):
        algorithms.register("broken", 3)
    with pytest.raises(ValueError, match="registered already"):
        algorithms.register(SPG, losses.neurd_loss)
    with pytest.raises(ValueError, match=r"'adam' is not registered \(registered: neurd, spg"):
        algorithms.get("adam")


def _half_neurd(logits, q, legal, weights, beta, centre=False):
    loss, blocked = losses.neurd_loss(logits, q, legal, weights, beta, centre)
    return 0.5 * loss, blocked


@pytest.fixture(scope="module")
def half():
    return algorithms.register("half_neurd", _half_neurd, "NeuRD / 2")


def _plan(names):
    return experiment.Plan(game="kuhn", spec=train.Spec(algorithms=names, hidden=(16,),
                                                        policy_batch=32),
                           entropies=(0.0, 0.1), run_seeds=(0,), seed=0, phase_iterations=40,
                           phases=2, geometric=1, linear=2)


def test_a_users_algorithm_runs_beside_neurd_and_changes_none_of_its_numbers(half):
    kuhn = compile_game("kuhn_poker")
    paper = experiment.run(kuhn, _plan((NEURD, SPG)))
    mine = experiment.run(kuhn, _plan((NEURD, half.name)))
    np.testing.assert_array_equal(mine["nash_conv"][:, :2], paper["nash_conv"][:, :2])
    assert not np.array_equal(mine["nash_conv"][:, 2:], paper["nash_conv"][:, :2])
    assert np.isfinite(mine["nash_conv"]).all()


def test_a_config_names_only_registered_algorithms(half):
    check_plan(_plan((NEURD, half.name)))
    with pytest.raises(ConfigError, match=r"plan.spec.algorithms.*'adam' is not registered"):
        check_plan(_plan((NEURD, "adam")))


def test_an_entry_point_registers_an_algorithm_when_a_config_names_it(monkeypatch):
    class Point:
        name, value = "doubled", "tests.doubled_spg"

        def load(self):
            algorithms.register("doubled_spg", lambda *a, **k: tuple(
                2 * x for x in losses.spg_loss(*a, **k)))

    monkeypatch.setattr(algorithms, "entry_points",
                        lambda group: [Point()] if group == algorithms.ENTRY_POINTS else [])
    algorithms.check_algorithms([NEURD, "doubled_spg"], "neural.algorithms")
    assert algorithms.get("doubled_spg").label == "DOUBLED_SPG"
    with pytest.raises(ConfigError, match=r"neural.algorithms\[1\]'.*'nope' is not registered"):
        algorithms.check_algorithms([NEURD, "nope"], "neural.algorithms")
