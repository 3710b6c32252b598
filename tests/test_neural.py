"""Neural NeuRD and SPG (Fig 6): exact history evaluation, the sampler against it, the losses
against the tabular steps and their formulas, the regularised and negated games, shared
initial weights, seed splitting, resume after a kill, NashConv against OpenSpiel."""

import json
import os
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pyspiel
import pytest
from scipy import stats

from neurd import engine, games, learners
from neurd.names import GAMES, NEURD, SPG
from neurd.neural import algorithms, experiment, losses, measurement, sampler, train
from neurd.neural.plan import checkpoint_grid
from neurd.precision import float64
from neurd.tabular import histories
from neurd.tabular.evaluation import realization_plans
from neurd.tabular.policies import to_openspiel
from neurd.tabular.sequence_form import counterfactual_values, split, terminal_values

ALPHA = 1e-3  # family-wise: the chance a correct implementation fails a statistical check


@pytest.fixture(scope="module")
def compiled():
    return {name: games.compile_game(game.string) for name, game in GAMES.items()}


def _random_policy(game, seed):
    return engine.random_policies(game, 1, seed=seed)[0]


# --- exact evaluation on the history tree -------------------------------------------------


@pytest.mark.parametrize("name", ["kuhn", "leduc"])
def test_history_values_are_the_sequence_forms(compiled, name):
    """Root value = expected value; q times the others' reach = counterfactual values."""
    game = compiled[name]
    with float64():
        form, tree = engine.sequence_form(game), histories.history_tree(game)
        policy = jnp.asarray(_random_policy(game, 3))
        root = float(histories.values(tree, policy)[0])
        assert root == pytest.approx(float(engine.expected_values(game, policy)[0]), abs=1e-13)
        q, _ = histories.action_values(tree, policy)
        plans = realization_plans(form, policy)
        for player, part in enumerate(form.players):
            g = terminal_values(form, player, plans[1 - player])
            cf, _, _ = counterfactual_values(part, split(policy, form)[player], g)
            others = jnp.where(tree.decision & (tree.player == player),
                               histories.reach(tree, policy, without_player=player), 0.0)
            beta = jax.ops.segment_sum(others, tree.infostate, num_segments=game.num_infostates)
            rows = slice(part.offset, part.offset + part.num_infostates)
            np.testing.assert_allclose(np.asarray(q[rows] * beta[rows, None]) * part.legal,
                                       np.asarray(cf), rtol=0, atol=1e-12)


def _brute_force_regularised(state, policy, game, eta, reach):
    """Both players' expected regularised returns below ``state``, by OpenSpiel's own tree,
    with the reward transformation written as FIGURES.md states it."""
    if state.is_terminal():
        return np.array(state.returns())
    if state.is_chance_node():
        return sum(p * _brute_force_regularised(state.child(a), policy, game, eta, reach * p)
                   for a, p in state.chance_outcomes())
    k = state.current_player()
    row = list(game.infostate_string).index(state.information_state_string(k))
    legal = state.legal_actions()
    total = np.zeros(2)
    for a in legal:
        pi, mu = policy[row, a], 1.0 / len(legal)
        reward = np.array([-eta * np.log(pi / mu) if i == k else eta * np.log(pi / mu)
                           for i in (0, 1)])
        total += pi * (reward + _brute_force_regularised(state.child(a), policy, game, eta,
                                                         reach * pi))
    return total


def test_regularised_game_is_zero_sum_and_matches_a_brute_force(compiled):
    game = compiled["kuhn"]
    policy = _random_policy(game, 5)
    both = _brute_force_regularised(pyspiel.load_game("kuhn_poker").new_initial_state(),
                                    policy, game, 0.3, 1.0)
    assert abs(both.sum()) < 1e-12  # zero-sum with the regularisation terms
    with float64():
        tree = histories.history_tree(game)
        assert float(histories.values(tree, jnp.asarray(policy), 0.3)[0]) == pytest.approx(
            both[0], abs=1e-12)
        assert abs(both[0] - float(engine.expected_values(game, policy)[0])) > 1e-3


def test_negation_flips_the_payoff_and_not_the_regularisation(compiled):
    game = compiled["leduc"]
    with float64():
        tree, policy = histories.history_tree(game), jnp.asarray(_random_policy(game, 1))
        plus = float(histories.values(tree, policy, 0.2, 1.0)[0])
        minus = float(histories.values(tree, policy, 0.2, -1.0)[0])
        payoff = float(histories.values(tree, policy, 0.0, 1.0)[0])
        regularisation = float(histories.values(tree, policy, 0.2, 0.0)[0])
    assert (plus - minus) / 2 == pytest.approx(payoff, abs=1e-12)
    assert (plus + minus) / 2 == pytest.approx(regularisation, abs=1e-12)
    assert abs(regularisation) > 1e-3
    assert float(engine.nash_conv(games.negated(game), engine.uniform_policy(game))) != \
        pytest.approx(float(engine.nash_conv(game, engine.uniform_policy(game))))


# --- the sampler against the exact values -------------------------------------------------


@pytest.mark.parametrize("name", ["kuhn", "leduc", "goofspiel"])
def test_sampler_visits_and_returns_agree_with_the_exact_values(compiled, name):
    """Visit counts: an exact two-sided binomial test per information state; mean return: a
    z-test; together at family-wise level ALPHA (Bonferroni)."""
    game, eta, sign, n = compiled[name], 0.2, -1.0, 200_000
    policy = _random_policy(game, 7).astype(np.float32)
    policy = policy / policy.sum(axis=-1, keepdims=True)
    with float64():
        tree64 = histories.history_tree(game)
        exact = jnp.asarray(policy, dtype=jnp.float64)
        p = np.clip(np.asarray(histories.infostate_reach(tree64, exact)), 0.0, 1.0)
        value = float(histories.values(tree64, exact, eta, sign)[0])
    tree = histories.history_tree(game, jnp.float32)
    episodes = jax.jit(lambda k: sampler.sample(tree, jnp.asarray(policy), k, n, eta, sign))(
        jax.random.PRNGKey(0))
    counts = np.asarray(sampler.visit_counts(episodes, game.num_infostates)).round()
    level = ALPHA / (game.num_infostates + 1)
    tails = np.minimum(stats.binom.cdf(counts, n, p), stats.binom.sf(counts - 1, n, p))
    assert np.min(np.minimum(1.0, 2 * tails)) > level
    returns = np.asarray(episodes.value, dtype=np.float64)
    z = (returns.mean() - value) / (returns.std(ddof=1) / np.sqrt(n))
    assert abs(z) < stats.norm.isf(level / 2)
    # the sampler's per-step bookkeeping: zero-sum returns, continuation = return - own term
    steps = np.asarray(episodes.valid)
    np.testing.assert_allclose(np.asarray(episodes.continuation)[steps],
                               (np.asarray(episodes.returns) - np.asarray(episodes.own_term))
                               [steps], rtol=0, atol=1e-5)
    # where player 0 makes the first decision, its return from there is the whole episode's
    first = np.argmax(steps, axis=1)
    opens = np.asarray(episodes.player)[np.arange(n), first] == 0
    at_first = np.asarray(episodes.returns)[np.arange(n), first]
    assert opens.sum() > n / 10
    np.testing.assert_allclose(at_first[opens], returns[opens], rtol=0, atol=1e-4)


# --- the losses -----------------------------------------------------------------------------


@pytest.mark.parametrize("algorithm, step", [(NEURD, learners.neurd_step),
                                             (SPG, learners.spg_step)])
def test_one_step_of_a_table_network_is_the_tabular_step(algorithm, step):
    """One information state, one-hot input, a linear 'network' (a table): one gradient step
    of learning rate eta gives the tabular NeuRD / SPG logit step of step size eta."""
    with float64():
        rng = np.random.default_rng(0)
        legal = jnp.asarray([True, False, True, True])
        table = jnp.asarray(rng.normal(size=(1, 4)) * 0.3)  # logits = one_hot @ table
        q = jnp.asarray(rng.normal(size=(1, 4)))
        eta, x = 0.7, jnp.ones((1, 1))

        def loss(t):
            return algorithms.get(algorithm).function()(
                x @ t, q, legal[None], jnp.ones(1),
                **algorithms.options_for(algorithm, beta=100.0))[0]

        stepped = table - eta * jax.grad(loss)(table)
        pi = learners.policy(table[0], legal)
        want = step(table[0], jnp.where(legal, learners.advantage(pi, jnp.where(legal, q[0], 0)),
                                        0.0), eta, legal)
        np.testing.assert_allclose(learners.policy(stepped[0], legal),
                                   learners.policy(want, legal), rtol=0, atol=1e-14)


def test_loss_gradients_are_their_formulas():
    with float64():
        rng = np.random.default_rng(1)
        logits, q = jnp.asarray(rng.normal(size=(6, 3))), jnp.asarray(rng.normal(size=(6, 3)))
        legal = jnp.asarray(rng.random((6, 3)) < 0.8).at[:, 0].set(True)
        weights = jnp.asarray(rng.random(6))
        pi = np.asarray(learners.policy(logits, legal))
        q_legal = np.where(legal, q, 0.0)
        advantage = np.where(legal, q_legal - (pi * q_legal).sum(-1, keepdims=True), 0.0)
        grad = jax.grad(lambda y: losses.neurd_loss(y, q, legal, weights, 100.0, False)[0])(logits)
        np.testing.assert_allclose(grad, -weights[:, None] * advantage, atol=1e-14)
        grad = jax.grad(lambda y: losses.spg_loss(y, q, legal, weights)[0])(logits)
        np.testing.assert_allclose(grad, -weights[:, None] * pi * advantage, atol=1e-14)


def test_neurd_threshold_stops_pushing_out_but_lets_logits_move_back():
    logits = jnp.asarray([[2.5, -2.5, 0.0]])  # centred: +2.5, -2.5, 0
    legal = jnp.ones((1, 3), bool)
    grad = lambda q: jax.grad(  # noqa: E731
        lambda y: losses.neurd_loss(y, jnp.asarray([q]), legal, jnp.ones(1), 2.0, False)[0])(
            logits)
    out = np.asarray(grad([3.0, -3.0, 0.0]))  # would push both further out
    assert out[0, 0] == 0 and out[0, 1] == 0 and out[0, 2] != 0
    back = np.asarray(grad([-3.0, 3.0, 0.0]))  # moves both back towards the centre
    assert back[0, 0] > 0 and back[0, 1] < 0
    _, blocked = losses.neurd_loss(logits, jnp.asarray([[3.0, -3.0, 0.0]]), legal, jnp.ones(1),
                                   2.0)
    assert float(blocked) == pytest.approx(2 / 3)


# --- initial weights, seeds, resumption ---------------------------------------------------


def _plan(seeds, critic="learned", batch=1, name="kuhn", length=80):
    return experiment.Plan(game=name, spec=train.Spec(critic=critic), entropies=(0.0, 0.1),
                           run_seeds=seeds, seed=0, phase_iterations=length, phases=2,
                           geometric=2, linear=2, seeds_per_batch=batch)


def test_initial_weights_are_shared_by_algorithms_and_entropy_levels(compiled):
    game = train.neural_game(compiled["kuhn"])
    spec = train.Spec()
    a = train.initial_states(spec, game, 0, "kuhn", (0, 1), 3)
    b = train.initial_states(spec, game, 0, "kuhn", (1,), 3)
    differ = []
    for x, y in zip(jax.tree_util.tree_leaves((a.policy, a.critic)),
                    jax.tree_util.tree_leaves((b.policy, b.critic))):
        x, y = np.asarray(x), np.asarray(y)
        assert np.array_equal(x[3], x[5]) and np.array_equal(x[3:], y)  # levels share weights
        differ.append(not np.array_equal(x[0], x[3]))
    assert any(differ)  # seeds do not (biases start at 0 for every seed)


def test_splitting_the_seeds_into_jobs_changes_no_number(compiled):
    whole = experiment.run(compiled["kuhn"], _plan((0, 1, 2)))
    part = experiment.run(compiled["kuhn"], _plan((1,)))
    columns = [_plan((0, 1, 2)).configurations.index(c) for c in _plan((1,)).configurations]
    for key in ("nash_conv", "critic_rmse", "blocked", "critic_loss"):
        np.testing.assert_array_equal(whole[key][:, columns], part[key])
    np.testing.assert_array_equal(whole["policies"][:, columns], part["policies"])
    assert np.all(np.isfinite(whole["nash_conv"]))


def test_exact_critic_runs_and_its_critic_error_is_not_reported(compiled):
    result = experiment.run(compiled["kuhn"], _plan((0,), critic="exact"))
    assert np.all(np.isnan(result["critic_rmse"])) and np.all(np.isfinite(result["nash_conv"]))


def test_checkpoint_grid_resolves_each_phase_and_ends_it():
    iterations, phases = checkpoint_grid(1000, 3, 5, 4, 4)
    assert np.all(iterations % 4 == 0)
    for p in (1, 2, 3):
        mine = iterations[phases == p]
        assert mine[0] == (p - 1) * 1000 and mine[-1] == p * 1000
        assert mine[1] - mine[0] == 4  # one policy update after the phase starts
        assert np.all(np.diff(mine) > 0)
    with pytest.raises(ValueError, match="multiple"):
        checkpoint_grid(1002, 3, 5, 4, 4)


def test_network_policy_nash_conv_equals_openspiels(compiled):
    """The network evaluated on every information state, then the exact computation in
    float64: OpenSpiel's NashConv of the same policy, to 1e-9, in the game and its negation."""
    for name in ("kuhn", "leduc"):
        game = compiled[name]
        spec = train.Spec()
        state = train.initial_states(spec, train.neural_game(game), 0, name, (4, 5), 1)
        form, _ = measurement.exact_setup(game)
        legal = jnp.asarray(game.infostate_legal)
        with float64():
            values, policies = measurement.network_nash_conv(
                spec, form, game.infostate_tensor, legal, state.policy)
            negated, _ = measurement.network_nash_conv(
                spec, form, game.infostate_tensor, legal, state.policy, -1.0)
        openspiel_game = pyspiel.load_game(GAMES[name].string)
        for value, policy in zip(np.asarray(values), np.asarray(policies)):
            theirs = pyspiel.nash_conv(openspiel_game,
                                       pyspiel.TabularPolicy(to_openspiel(game, policy)))
            assert value == pytest.approx(theirs, abs=1e-9)
        np.testing.assert_allclose(np.asarray(negated), engine.nash_conv(
            games.negated(game), np.asarray(policies)), rtol=0, atol=1e-12)
        assert np.all(np.abs(np.asarray(negated) - np.asarray(values)) > 1e-3)


def _neural_config(tmp_path, **changes):
    import yaml

    from neurd.stages import snapshot, validate

    config = yaml.safe_load(open("workflow/config/default.yaml"))
    config["neural"].update({"games": ["leduc"], "entropies": [0.0, 0.1], "seeds": 2,
                             "seeds_per_job": 2, "seeds_per_batch": 2,
                             "phase_iterations": {"leduc": 1200},
                             "checkpoints": {"geometric": 6, "linear": 12}, **changes})
    validate(config, "workflow/schemas")
    path = tmp_path / "neural.json"
    path.write_text(json.dumps(snapshot(config, "neural")))
    return path


def _run_job(tmp_path, folder, cfg, game_file):
    out = tmp_path / folder
    out.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "neurd.cli", "neural-run", "--config", str(cfg),
               "--game", "leduc", "--critic", "learned", "--chunk", "0",
               "--compiled", str(game_file), "--curves", str(out / "curves.parquet"),
               "--policies", str(out / "policies.parquet"),
               "--checkpoint", str(out / "checkpoint"), "--checkpoint-minutes", "0"]
    return out, command


@pytest.mark.workflow
def test_a_killed_job_resumes_to_identical_tables(tmp_path, compiled):
    cfg = _neural_config(tmp_path)
    game_file = tmp_path / "leduc.npz"
    games.save(compiled["leduc"], game_file)
    out, command = _run_job(tmp_path, "once", cfg, game_file)
    subprocess.run(command, check=True, capture_output=True)
    assert not (out / "checkpoint").exists()  # removed when the job finishes
    killed, command = _run_job(tmp_path, "killed", cfg, game_file)
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while not (killed / "checkpoint" / "meta.json").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # a few more segments past the first save
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert (killed / "checkpoint" / "meta.json").exists(), "the job never saved its state"
    assert not (killed / "curves.parquet").exists(), "the job finished before it was killed"
    subprocess.run(command, check=True, capture_output=True)
    for name in ("curves", "policies"):
        pd.testing.assert_frame_equal(pd.read_parquet(out / f"{name}.parquet"),
                                      pd.read_parquet(killed / f"{name}.parquet"),
                                      check_exact=True)
    assert not (killed / "checkpoint").exists()


# --- the stage's bookkeeping --------------------------------------------------------------


def test_average_nash_conv_is_the_area_over_the_length_within_phases():
    from neurd.neural.results import average_nash_conv

    iteration = np.array([0, 50, 100, 100, 150, 200])
    phase = np.array([1, 1, 1, 2, 2, 2])
    assert average_nash_conv(iteration, phase, np.full(6, 2.5)) == pytest.approx(2.5)
    # phase 1 falls 2 -> 0, phase 2 sits at 4 (the jump at the boundary has no width)
    value = average_nash_conv(iteration, phase, np.array([2.0, 1.0, 0.0, 4.0, 4.0, 4.0]))
    assert value == pytest.approx((100.0 + 400.0) / 200.0)


def test_jobs_split_the_seeds_and_add_the_exact_critic_runs():
    from neurd.neural.runs import jobs, seed_chunks

    cfg = {"games": ["kuhn", "leduc"], "exact_critic_games": ["kuhn"], "seeds": 5,
           "seeds_per_job": 2}
    assert seed_chunks(cfg) == [(0, 1), (2, 3), (4,)]
    assert jobs(cfg) == [("kuhn", "learned", 0), ("kuhn", "learned", 1), ("kuhn", "learned", 2),
                         ("kuhn", "exact", 0), ("kuhn", "exact", 1), ("kuhn", "exact", 2),
                         ("leduc", "learned", 0), ("leduc", "learned", 1),
                         ("leduc", "learned", 2)]


@pytest.mark.parametrize("changes, key", [
    ({"seeds_per_job": 3, "seeds_per_batch": 2}, "neural.seeds_per_job"),
    ({"phase_iterations": {"leduc": 1202}}, "neural.phase_iterations.leduc"),
    ({"games": ["leduc", "kuhn3"], "game_strings": {"kuhn3": "kuhn_poker(players=2)"}},
     "neural.phase_iterations.kuhn3"),
    ({"exact_critic_games": ["kuhm"]}, "neural.exact_critic_games"),
    ({"final_checkpoints": 50}, "neural.final_checkpoints"),
])
def test_section_cross_checks_name_the_key(tmp_path, changes, key):
    from neurd.config import ConfigError

    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        _neural_config(tmp_path, **changes)


def test_the_blocked_share_counts_a_push_once_however_its_advantage_rounds():
    """A push whose advantage is float32 rounding of 0 (an all but deterministic policy) is no
    push: the share blocked is at most 1 even where the advantages are computed again with
    other rounding for the blocked and for the pushed (as XLA may, fusion by fusion; a share
    of 1.13 came out so); here the two readings differ at exactly such entries."""
    import jax.numpy as jnp

    from neurd.neural.losses import PUSH_FLOOR, blocked_share

    legal = jnp.ones((3, 2), bool)
    logits = jnp.array([[5.0, -5.0], [5.0, -5.0], [0.0, 0.0]])
    weights = jnp.array([0.5, 0.25, 0.25])
    tiny = jnp.array([[3e-8, -1.0], [-2e-8, -3.0], [0.5, -0.5]])
    share = float(blocked_share(logits, tiny, legal, weights, 2.0))
    # state 0's and 1's first actions are no pushes: blocked are their second actions
    # (pushed down at -beta) and nothing of state 2 (logits within the threshold)
    assert share == pytest.approx((0.5 + 0.25) / (0.5 + 0.25 + 2 * 0.25))
    assert PUSH_FLOOR > 3e-8
    for scale in (0.0, 1e-9, 1e-7):
        noisy = tiny.at[:, 0].set(jnp.where(jnp.abs(tiny[:, 0]) < 1e-6, scale, tiny[:, 0]))
        assert 0.0 <= float(blocked_share(logits, noisy, legal, weights, 2.0)) <= 1.0
