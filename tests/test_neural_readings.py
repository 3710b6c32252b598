"""The readings of Fig 6's learner the paper leaves open, each a config key.

``neural.neurd_logits`` (raw or centred logits in NeuRD's loss),
``neural.loss_normalisation`` (per player's visits, Algorithm 1's sum, per trajectory),
``neural.networks`` (one network for both players or one per player): each does what it
says, and the defaults are today's learner, number for number.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from neurd import learners
from neurd.games import compile_game
from neurd.names import NEURD, SPG
from neurd.neural import algorithms, experiment, losses, train
from neurd.neural.networks import MLP, PlayerMLP, network
from neurd.precision import float64


def test_centred_neurd_on_a_table_moves_the_policy_as_raw_neurd():
    """A table (one-hot input, linear layer): centring the logits adds a common-mode shift to
    the step, which the softmax does not see; the policies after one step agree."""
    with float64():
        rng = np.random.default_rng(0)
        legal = jnp.asarray([[True, False, True, True]])
        table = jnp.asarray(rng.normal(size=(1, 4)) * 0.3)
        q = jnp.asarray(rng.normal(size=(1, 4)))
        x = jnp.ones((1, 1))

        def step(centre):
            grad = jax.grad(lambda t: losses.neurd_loss(x @ t, q, legal, jnp.ones(1), 100.0,
                                                        centre)[0])(table)
            return table - 0.7 * grad

        raw, centred = step(False), step(True)
        assert not np.allclose(raw, centred)  # the logits differ by a common shift ...
        shift = np.asarray(centred - raw)[0][np.asarray(legal[0])]
        np.testing.assert_allclose(shift, shift[0], atol=1e-14)
        np.testing.assert_allclose(learners.policy(raw[0], legal[0]),  # ... the policy not
                                   learners.policy(centred[0], legal[0]), atol=1e-14)


def test_centred_neurd_gradient_is_minus_the_centred_advantage():
    with float64():
        rng = np.random.default_rng(3)
        logits, q = jnp.asarray(rng.normal(size=(5, 4))), jnp.asarray(rng.normal(size=(5, 4)))
        legal = jnp.asarray(rng.random((5, 4)) < 0.7).at[:, 0].set(True)
        weights = jnp.asarray(rng.random(5))
        advantage = np.asarray(losses.advantages(logits, q, legal))
        count = np.asarray(legal).sum(-1, keepdims=True)
        want = -weights[:, None] * np.where(legal, advantage - advantage.sum(-1, keepdims=True)
                                            / count, 0.0)
        grad = jax.grad(lambda y: losses.neurd_loss(y, q, legal, weights, 100.0, True)[0])(logits)
        np.testing.assert_allclose(grad, want, atol=1e-14)
        # SPG takes no reading (nor threshold): the softmax is blind to the common mode
        assert algorithms.get(SPG).options == () and "centre" in algorithms.get(NEURD).options


def test_loss_normalisations_weight_the_visits_as_they_say():
    counts = jnp.asarray([3.0, 1.0, 0.0, 4.0])
    players = jnp.asarray([0, 0, 1, 1])
    np.testing.assert_allclose(losses.state_weights(counts, players, "player_mean", 8),
                               [0.75, 0.25, 0.0, 1.0])
    np.testing.assert_allclose(losses.state_weights(counts, players, "batch_sum", 8), counts)
    np.testing.assert_allclose(losses.state_weights(counts, players, "trajectory_mean", 8),
                               counts / 8)
    with pytest.raises(ValueError, match="normalisation"):
        losses.state_weights(counts, players, "per_step", 8)


def test_one_network_per_player_reads_each_state_with_its_players():
    x = jnp.asarray(np.random.default_rng(0).normal(size=(6, 5)), jnp.float32)
    player = jnp.asarray([0, 1, 0, 1, 1, 0])
    net = PlayerMLP((8,), 3)
    params = net.init(jax.random.PRNGKey(0), x, player)
    out = net.apply(params, x, player)
    single = MLP((8,), 3)
    for p in (0, 1):
        own = single.apply({"params": params["params"][f"player_{p}"]}, x)
        np.testing.assert_array_equal(out[np.asarray(player) == p], own[np.asarray(player) == p])
    # a loss on player 0's states moves player 0's network only
    grads = jax.grad(lambda prm: jnp.sum(net.apply(prm, x, player) * (player == 0)[:, None]))(
        params)
    assert all(float(jnp.abs(g).max()) == 0 for g in
               jax.tree_util.tree_leaves(grads["params"]["player_1"]))
    assert any(float(jnp.abs(g).max()) > 0 for g in
               jax.tree_util.tree_leaves(grads["params"]["player_0"]))


def test_the_shared_network_ignores_the_player_and_keeps_its_parameters():
    x = jnp.ones((2, 4))
    key = jax.random.PRNGKey(1)
    shared = network("shared", (8,), 2)
    assert isinstance(shared, MLP)
    with_player = shared.init(key, x, jnp.asarray([0, 1]))
    assert jax.tree_util.tree_all(jax.tree_util.tree_map(
        lambda a, b: bool(jnp.array_equal(a, b)), with_player, MLP((8,), 2).init(key, x)))


@pytest.fixture(scope="module")
def kuhn():
    return compile_game("kuhn_poker")


def _run(compiled, **reading):
    spec = train.Spec(**reading)
    plan = experiment.Plan(game="kuhn", spec=spec, entropies=(0.0, 0.1), run_seeds=(0,),
                           seed=0, phase_iterations=40, phases=1, geometric=1, linear=1,
                           seeds_per_batch=1)
    return experiment.run(compiled, plan)


@pytest.mark.parametrize("reading", [{"neurd_logits": "raw"},
                                     {"loss_normalisation": "batch_sum"},
                                     {"loss_normalisation": "trajectory_mean"},
                                     {"networks": "per_player"}])
def test_every_reading_runs_end_to_end_and_changes_the_numbers(kuhn, reading):
    """Each reading gives finite NashConv curves that differ from the default's (for NeuRD
    at least; SPG is blind to centring)."""
    default = _run(kuhn)
    other = _run(kuhn, **reading)
    assert np.isfinite(other["nash_conv"]).all()
    assert not np.array_equal(default["nash_conv"][-1], other["nash_conv"][-1])
    if reading == {"neurd_logits": "raw"}:  # SPG's configurations (the last two) agree
        np.testing.assert_array_equal(default["nash_conv"][:, 2:], other["nash_conv"][:, 2:])


def test_the_config_keys_reach_the_learner():
    from neurd.neural.runs import spec

    cfg = {"algorithms": [NEURD, SPG], "hidden_sizes": [128, 128], "critic_batch": 4,
           "policy_batch": 256, "critic_updates_per_policy_update": 4,
           "policy_learning_rate": 0.002, "critic_learning_rate": 0.01, "optimizer": "sgd",
           "beta": 2.0, "matmul_precision": "float32", "neurd_logits": "raw",
           "loss_normalisation": "batch_sum", "networks": "per_player"}
    made = spec(cfg, "learned")
    assert (made.neurd_logits, made.loss_normalisation, made.networks, made.hidden) == (
        "raw", "batch_sum", "per_player", (128, 128))


def test_algorithm_1s_plain_sum_diverges_under_the_raw_reading_at_the_papers_rates():
    """docs/readings.md's account of the plain sum over the batch's steps: with the paper's
    learning rates its steps are 256x the per-trajectory ones, and under the raw reading
    NeuRD's network on Leduc at entropy 0.1 goes to NaN within two phases of 400 iterations
    (recorded as diverged: NaN from there on, tests/test_neural_divergence.py); SPG's do
    not, nor does the per-player mean, nor the plain sum under the default (centred)
    reading.  At entropy 0 the raw run swings wildly and diverges later, at an iteration
    that moves with the processor's float rounding (the run is chaotic); it is not asserted
    here."""
    leduc = compile_game("leduc_poker")

    def plan(normalisation, reading):
        return experiment.Plan(game="leduc", spec=train.Spec(loss_normalisation=normalisation,
                                                             neurd_logits=reading),
                               entropies=(0.0, 0.1), run_seeds=(0,), seed=0,
                               phase_iterations=400, phases=2, geometric=2, linear=4,
                               seeds_per_batch=1)

    configurations = plan("batch_sum", "raw").configurations
    diverged = experiment.diverged(experiment.run(leduc, plan("batch_sum", "raw")), 10**6)
    lost = {c for c, gone in zip(configurations, diverged) if gone}
    assert (NEURD, 0.1, 0) in lost and not {c for c in lost if c[0] != NEURD}, lost
    for normalisation, reading in (("player_mean", "raw"), ("batch_sum", "centred")):
        whole = experiment.run(leduc, plan(normalisation, reading))
        assert np.isfinite(whole["nash_conv"]).all(), (normalisation, reading)


def test_logged_logits_are_the_centred_log_policy_and_change_no_other_number(kuhn):
    """``neural.logits_log`` keeps the named runs' centred logits at every checkpoint: at a
    phase's end they are the centred ``log pi`` of the policies table, their share at the
    threshold is the diagnostics' ``at_threshold``, and every other result is bitwise what
    a run logging nothing gives."""
    from neurd.pipeline.neural import LOGITS_COLUMNS, logits_table
    from neurd.tabular.histories import PI_FLOOR

    def plan(**logged):
        return experiment.Plan(game="kuhn", spec=train.Spec(), entropies=(0.0, 0.1),
                               run_seeds=(0, 1), seed=0, phase_iterations=40, phases=2,
                               geometric=1, linear=2, seeds_per_batch=2, **logged)

    quiet, logging = plan(), plan(logits_seeds=(1,), logits_entropies=(0.1,))
    assert quiet.logged == [] and logging.logged == [3, 7]
    assert [logging.configurations[c] for c in logging.logged] == [(NEURD, 0.1, 1),
                                                                   (SPG, 0.1, 1)]
    plain, logged = experiment.run(kuhn, quiet), experiment.run(kuhn, logging)
    for key in plain:
        if key not in ("pieces", "logits"):
            np.testing.assert_array_equal(plain[key], logged[key], err_msg=key)
    legal = np.asarray(kuhn.infostate_legal)
    assert plain["logits"].shape == (len(plain["iteration"]), 0, legal.sum())
    logits = logged["logits"]
    assert logits.dtype == np.float64 and logits.shape == (len(plain["iteration"]), 2,
                                                           legal.sum())
    assert np.isfinite(logits).all()
    for p in (1, 2):
        row = int(np.flatnonzero((logged["iteration"] == 40 * p) & (logged["phase"] == p))[0])
        for k, c in enumerate(logging.logged):
            log_pi = np.where(legal, np.log(np.maximum(logged["policies"][p - 1, c], PI_FLOOR)),
                              0.0)
            centred = log_pi - log_pi.sum(-1, keepdims=True) / legal.sum(-1, keepdims=True)
            np.testing.assert_allclose(logits[row, k], centred[legal], rtol=0, atol=1e-12)
    np.testing.assert_array_equal(np.mean(np.abs(logits) >= 2.0, axis=-1),
                                  logged["at_threshold"][:, logging.logged])
    table = logits_table("kuhn", "learned", kuhn, logged, logging)
    assert list(table.columns) == list(LOGITS_COLUMNS)
    assert len(table) == logits.size and set(table.seed) == {1} and set(table.entropy) == {0.1}
    first = table[(table.algorithm == SPG) & (table.iteration == 0)]
    np.testing.assert_array_equal(first.centred_logit, logits[0, 1])
    empty = logits_table("kuhn", "learned", kuhn, plain, quiet)
    assert list(empty.columns) == list(LOGITS_COLUMNS) and empty.empty
