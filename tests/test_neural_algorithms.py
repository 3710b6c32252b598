"""The registry of neural algorithms: each built-in loss's gradient in the logits is its
written-out formula on a hand-made case (OpenSpiel's definitions of QPG, RM and RPG
written out beside them), a user's algorithm registers from Python or an entry point and
runs beside NeuRD without changing NeuRD's numbers, and a config names only registered
algorithms."""

from functools import partial

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
    options = algorithms.options_for(name, beta=beta)
    return np.asarray(jax.grad(lambda y: loss(y, Q, LEGAL, WEIGHTS, **options)[0])(LOGITS))


def test_the_built_in_algorithms_are_registered_the_papers_first():
    assert algorithms.registered()[:5] == (NEURD, SPG, "rmpg", "rpg", "a2c")
    assert [algorithms.get(a).label for a in ("rmpg", "rpg", "a2c")] == ["RMPG", "RPG", "A2C"]
    assert [algorithms.get(a).sampled for a in algorithms.registered()[:5]] == [
        False, False, False, False, True]


@pytest.mark.parametrize("name, formula", [
    # NeuRD's default reading: its logits centred over the legal actions (the advantage
    # minus its mean over them; the raw reading's is -w A: tests/test_common_mode.py)
    (NEURD, lambda pi, a, w: -w * (a - a.sum(1, keepdims=True)
                                   / np.asarray(LEGAL).sum(1, keepdims=True))),
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


# the policy batch's actions at the two states: 3 steps at the first (actions 0, 2, 2), one
# at the second (action 1): the shares of the actions taken
TAKEN = jnp.array([[1 / 3, 0.0, 2 / 3], [0.0, 1.0, 0.0]], jnp.float32)


def _a2c_gradient(taken):
    loss = algorithms.get("a2c").function()
    return np.asarray(jax.grad(lambda y: loss(y, Q, LEGAL, WEIGHTS, taken=taken)[0])(
        LOGITS))


def test_a2c_moves_the_logits_by_its_written_out_formula_and_is_spg_in_expectation():
    """d/dy_b of -w sum_a t(a) log pi(a) A(a) is -w (t(b) A(b) - pi(b) sum_a t(a) A(a));
    with the actions taken in proportion to the policy (t = pi) it is SPG's gradient."""
    pi, advantage, w = _written_out()
    taken = np.asarray(TAKEN, np.float64)
    expected = -w * (taken * advantage - pi * (taken * advantage).sum(1, keepdims=True))
    np.testing.assert_allclose(_a2c_gradient(TAKEN), np.where(np.asarray(LEGAL), expected, 0),
                               rtol=2e-6, atol=1e-7)
    assert np.all(_a2c_gradient(TAKEN)[~np.asarray(LEGAL)] == 0.0)
    np.testing.assert_allclose(_a2c_gradient(jnp.asarray(pi, jnp.float32)), _gradient(SPG),
                               rtol=1e-5, atol=1e-7)


def test_openspiels_a2c_is_a2c_on_the_sampled_steps():
    """OpenSpiel's ``BatchA2CLoss``: the mean over the sampled steps of the cross-entropy of
    the taken action times its advantage (here ``q(x, a) - v(x)``), written out step by
    step; the registry's a2c on the states' shares of the actions, each state weighted by
    its share of the steps, is the same loss and gradient."""
    steps = [(0, 0), (0, 2), (0, 2), (1, 1)]

    def theirs(logits):
        pi = jax.nn.softmax(jnp.where(LEGAL, logits, -jnp.inf), axis=1)
        q = jnp.where(LEGAL, Q, 0.0)
        advantages = jax.lax.stop_gradient(q - jnp.sum(pi * q, axis=1, keepdims=True))
        log_pi = jax.nn.log_softmax(jnp.where(LEGAL, logits, -1e30), axis=1)
        return jnp.mean(jnp.stack([-log_pi[x, a] * advantages[x, a] for x, a in steps]))

    weights = jnp.array([3 / 4, 1 / 4], jnp.float32)
    ours = algorithms.get("a2c").function()

    def mine(logits):
        return ours(logits, Q, LEGAL, weights, taken=TAKEN)[0]

    assert float(theirs(LOGITS)) == pytest.approx(float(mine(LOGITS)), rel=1e-6)
    np.testing.assert_allclose(np.asarray(jax.grad(theirs)(LOGITS)),
                               np.asarray(jax.grad(mine)(LOGITS)), rtol=1e-5, atol=1e-7)


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
        float(ours(LOGITS, Q, LEGAL, WEIGHTS)[0]), rel=1e-6)
    np.testing.assert_allclose(np.asarray(jax.grad(theirs)(LOGITS)), _gradient(name, 2.0),
                               rtol=1e-6, atol=1e-7)


def test_registering_checks_the_name_and_keeps_a_name_to_one_loss():
    with pytest.raises(ValueError, match="lower-case letters"):
        algorithms.register("My Algo", losses.spg_loss)
    with pytest.raises(ValueError, match="not callable"):
        algorithms.register("broken", 3)
    with pytest.raises(ValueError, match="sampled 1 is not True or False"):
        algorithms.register("broken", losses.spg_loss, sampled=1)
    with pytest.raises(ValueError, match="built in and cannot be replaced"):
        algorithms.register(SPG, losses.neurd_loss)
    with pytest.raises(ValueError, match=r"'adam' is not registered \(registered: neurd, spg"):
        algorithms.get("adam")


def _half_neurd(logits, q, legal, weights, beta=2.0, centre=False):
    loss, blocked = losses.neurd_loss(logits, q, legal, weights, beta, centre)
    return 0.5 * loss, blocked


@pytest.fixture(scope="module")
def half():
    return algorithms.register("half_neurd", _half_neurd, "NeuRD / 2",
                               options=("beta", "centre"))


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


def test_a2c_runs_beside_the_papers_two_and_changes_none_of_their_numbers():
    """A2C reads the sampled actions (its shares counted only when a run names it): the
    paper's two keep their numbers bit for bit, and A2C's own learning is finite and not
    SPG's."""
    kuhn = compile_game("kuhn_poker")
    paper = experiment.run(kuhn, _plan((NEURD, SPG)))
    three = experiment.run(kuhn, _plan((NEURD, SPG, "a2c")))
    np.testing.assert_array_equal(three["nash_conv"][:, :4], paper["nash_conv"])
    assert np.isfinite(three["nash_conv"]).all()
    assert not np.array_equal(three["nash_conv"][:, 4:], paper["nash_conv"][:, 2:])


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


@pytest.mark.long
def test_a_third_algorithm_goes_through_the_stage_to_its_tables(tmp_path):
    """A config naming A2C beside the paper's two: the stage's job and table steps run it
    (`neurd neural-run`, `neurd neural-table`), and every table holds its rows beside
    NeuRD's and SPG's."""
    import json
    import subprocess
    import sys

    import pandas as pd
    import yaml

    from neurd import games
    from neurd.stages import snapshot, validate

    config = yaml.safe_load(open("workflow/config/default.yaml"))
    config["neural"].update({"games": ["kuhn"], "entropies": [0.0, 0.1], "seeds": 2,
                             "seeds_per_job": 2, "seeds_per_batch": 2,
                             "algorithms": [NEURD, SPG, "a2c"], "hidden_sizes": [16],
                             "phase_iterations": {"kuhn": 80},
                             "checkpoints": {"geometric": 2, "linear": 4},
                             "final_checkpoints": 2})
    validate(config, "workflow/schemas")
    cfg = tmp_path / "neural.json"
    cfg.write_text(json.dumps(snapshot(config, "neural")))
    game_file = tmp_path / "kuhn.npz"
    games.save(compile_game("kuhn_poker"), game_file)
    run = [sys.executable, "-m", "neurd.cli"]
    subprocess.run(run + ["neural-run", "--config", str(cfg), "--game", "kuhn", "--critic",
                          "learned", "--chunk", "0", "--compiled", str(game_file),
                          "--curves", str(tmp_path / "curves.parquet"),
                          "--policies", str(tmp_path / "policies.parquet"),
                          "--checkpoint", str(tmp_path / "checkpoint")],
                   check=True, capture_output=True)
    tables = {name: tmp_path / f"{name}.parquet"
              for name in ("nashconv", "diagnostics", "summary", "ci")}
    subprocess.run(run + ["neural-table", "--config", str(cfg), "--game", "kuhn",
                          "--compiled", str(game_file),
                          "--curves", str(tmp_path / "curves.parquet"),
                          "--policies", str(tmp_path / "policies.parquet"),
                          "--policies-out", str(tmp_path / "policies_out.parquet")]
                   + [x for name, path in tables.items() for x in (f"--{name}", str(path))],
                   check=True, capture_output=True)
    for name, path in tables.items():
        found = set(pd.read_parquet(path)["algorithm"])
        assert found == {NEURD, SPG, "a2c"}, (name, found)
    summary = pd.read_parquet(tables["summary"])
    assert summary["final_nash_conv"].notna().all()


def test_the_shares_of_the_actions_taken_are_counted_from_the_episodes(monkeypatch):
    """``sampler.action_shares``, what A2C reads: the share of each state's sampled steps
    that took each action, counted here step by step from the same episodes, by the CPU's
    way and by the accelerators' (no scatter)."""
    from neurd.neural import sampler
    from neurd.neural.networks import masked_policy

    game = train.neural_game(compile_game("leduc_poker"))
    legal = game.tree.legal
    table = masked_policy(jnp.zeros(legal.shape, jnp.float32), legal)
    episodes = sampler.sample_batches(game.tree, table, [jax.random.key(3)], (64,),
                                      jnp.float32(0.0), jnp.float32(1.0))[0]
    counts = np.zeros(legal.shape)
    for x, a, valid in zip(*(np.asarray(v).ravel() for v in (
            episodes.infostate, episodes.action, episodes.valid))):
        if valid:  # a decision (elsewhere the action is a chance outcome or a child slot)
            counts[x, a] += 1
    expected = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    assert counts.sum() > 64 and np.all(np.asarray(legal)[counts > 0])
    shares = sampler.action_shares(episodes, *legal.shape, game.depth_index)
    np.testing.assert_allclose(np.asarray(shares), expected, rtol=1e-6, atol=0)
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")  # traced as for a GPU
    for index in (None, game.depth_index):
        shares = jax.jit(partial(sampler.action_shares, num_infostates=legal.shape[0],
                                 num_actions=legal.shape[1], index=index))(episodes)
        np.testing.assert_allclose(np.asarray(shares), expected, rtol=1e-6, atol=0)
