"""Step 2 over the visited information states only (``map_visited``, ``vmap_visited``:
:mod:`neurd.neural.layouts`): the bound on the states a policy batch visits, the rows that
hold every state of positive weight, the algorithms' promise that a state of weight 0 adds
nothing to the gradient, and the refusals where that does not hold."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from neurd import games
from neurd.names import GAMES, NEURD, SPG
from neurd.neural import algorithms, layouts, sampler, train, visited


@pytest.fixture(scope="module")
def neural():
    return {name: train.neural_game(games.compile_game(game.string))
            for name, game in GAMES.items()}


def test_the_visited_states_are_bounded_by_depth(neural):
    """At each depth, the states there or the batch's episodes, whichever is fewer:
    Goofspiel's 2124 states hold at most 800 visited by 256 episodes (the two deepest
    decisions' 918 states each capped at 256), Leduc's 922 of 936, Kuhn's all 12; the share
    decides the default layout."""
    spec = train.Spec()
    found = {name: (visited.visited_capacity(spec, game), game.tree.num_infostates)
             for name, game in neural.items()}
    assert found == {"kuhn": (12, 12), "leduc": (922, 936), "goofspiel": (800, 2124)}
    small = dataclasses.replace(spec, policy_batch=8)
    assert visited.visited_capacity(small, neural["goofspiel"]) == 1 + 1 + 8 * 6
    if jax.default_backend() == "cpu":
        chosen = {name: visited.cycle_layout(spec, game).name for name, game in neural.items()}
        assert chosen == {"kuhn": "map_used", "leduc": "map_used", "goofspiel": "map_visited"}


@pytest.mark.parametrize("name", ["goofspiel", "leduc"])
@pytest.mark.parametrize("batch", [256, 2000])
def test_the_rows_hold_every_visited_state_once(neural, name, batch):
    """Sampled from a uniform policy and from a near-deterministic one, every state of
    positive weight is among the kept rows exactly once; a row not kept has weight 0 where
    it is used (it only fills the array).  With 2000 episodes, more than some depths'
    states: whole groups, no selection there."""
    game = neural[name]
    spec = dataclasses.replace(train.Spec(), policy_batch=batch)
    legal = np.asarray(game.tree.legal, np.float32)
    rng = np.random.default_rng(1)
    sharp = np.where(legal > 0, np.exp(4.0 * rng.standard_normal(legal.shape)), 0.0)
    for table in (legal / legal.sum(-1, keepdims=True), sharp / sharp.sum(-1, keepdims=True)):
        episodes = sampler.sample_batches(game.tree, jnp.asarray(table, jnp.float32),
                                          [jax.random.key(3)], (batch,), jnp.float32(0.0),
                                          jnp.float32(1.0))[0]
        counts = np.asarray(sampler.visit_counts(episodes, game.tree.num_infostates))
        rows, kept = map(np.asarray, jax.jit(
            lambda w: visited.visited_rows(spec, game, w))(jnp.asarray(counts / batch)))
        assert rows.shape == kept.shape == (visited.visited_capacity(spec, game),)
        assert (0 <= rows).all() and (rows < game.tree.num_infostates).all()
        held = rows[kept]
        assert len(set(held.tolist())) == len(held)  # no state twice
        assert set(np.flatnonzero(counts > 0).tolist()) <= set(held.tolist())


@pytest.mark.parametrize("name", [a for a in algorithms.registered()
                                  if algorithms.get(a).weighted])
def test_a_weighted_algorithm_gives_a_state_of_weight_0_no_gradient(name):
    """The promise ``weighted=True`` makes, on random logits and values: the gradient in
    the logits is exactly 0 at every state of weight 0, and the loss, its gradient at the
    others and the share blocked are those of the weighted states alone."""
    chosen = algorithms.get(name)
    rng = np.random.default_rng(7)
    states, actions = 40, 5
    logits = jnp.asarray(3 * rng.standard_normal((states, actions)), jnp.float32)
    q = jnp.asarray(rng.standard_normal((states, actions)), jnp.float32)
    legal = jnp.asarray(rng.random((states, actions)) < 0.8).at[:, 0].set(True)
    weights = np.where(rng.random(states) < 0.5, rng.random(states), 0.0).astype(np.float32)
    taken = jnp.asarray(rng.dirichlet(np.ones(actions), states), jnp.float32)
    extra = {"taken": taken} if chosen.sampled else {}

    def loss(y, w, rows):
        value, blocked = chosen.function()(
            y, q[rows], legal[rows], w, **algorithms.options_for(chosen.name, beta=1.0),
            **({"taken": taken[rows]} if extra else {}))
        return value, blocked

    every = np.arange(states)
    (value, blocked), grad = jax.value_and_grad(loss, has_aux=True)(logits, jnp.asarray(weights),
                                                                    every)
    assert np.count_nonzero(weights == 0) > 5
    np.testing.assert_array_equal(np.asarray(grad)[weights == 0], 0.0)
    kept = np.flatnonzero(weights > 0)
    (value_kept, blocked_kept), grad_kept = jax.value_and_grad(loss, has_aux=True)(
        logits[kept], jnp.asarray(weights[kept]), kept)
    np.testing.assert_allclose(value_kept, value, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(blocked_kept, blocked, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(np.asarray(grad_kept), np.asarray(grad)[kept], rtol=1e-6,
                               atol=1e-7)


def test_every_built_in_algorithm_is_weighted_and_a_users_is_not_by_default():
    assert all(algorithms.get(a).weighted for a in algorithms.registered()[:5])
    with pytest.raises(ValueError, match="weighted 1 is not True or False"):
        algorithms.register("weighted_check", lambda *a: a, weighted=1)


def _everywhere(logits, q, legal, weights):
    """SPG plus a penalty on every state's logits, weighted or not: not a weighted loss."""
    value, blocked = algorithms.get(SPG).function()(logits, q, legal, weights)
    return value + 1e-3 * jnp.sum(jnp.where(legal, logits, 0.0) ** 2), blocked


def test_a_run_with_an_unweighted_algorithm_passes_over_every_state(neural):
    """``auto`` never lays step 2 over the visited states for a spec naming an algorithm
    not weighted; asked for by name, such a layout is refused, naming the algorithm; a game
    with no bound on its visited states (an information state at several depths) refuses
    it too."""
    algorithms.register("everywhere_penalty", _everywhere)
    game = neural["goofspiel"]
    spec = train.Spec(algorithms=(NEURD, "everywhere_penalty"))
    assert visited.visited_share(spec, game) is None
    assert not visited.cycle_layout(spec, game).visited
    with pytest.raises(ValueError, match="'everywhere_penalty' may read the others"):
        visited.cycle_layout(dataclasses.replace(spec, layout="map_visited"), game)
    unbounded = dataclasses.replace(game, depth_index=None)
    assert visited.visited_share(train.Spec(), unbounded) is None
    assert visited.cycle_layout(train.Spec(), unbounded).name == layouts.resolve("auto")
    with pytest.raises(ValueError, match="lies at one depth"):
        visited.cycle_layout(train.Spec(layout="vmap_visited"), unbounded)


def test_the_visited_layout_gives_every_states_numbers_within_rounding(neural):
    """Goofspiel, ten cycles of NeuRD and SPG at two entropy levels: ``map_visited`` against
    ``map_used`` (the same passes over every state) within the layouts' 1e-5, and not bit
    for bit (its products are other sizes, so other orders of sums: it did run)."""
    game = neural["goofspiel"]
    out = {}
    for layout in ("map_used", "map_visited"):
        spec = train.Spec(layout=layout)
        states, keys, etas = train.batch_inputs(spec, game, 0, "goofspiel", (0,), (0.0, 0.1))
        out[layout] = jax.tree_util.tree_map(np.asarray, train.run_segment(
            spec, game, states, keys, etas, 0, 10, np.float32(1.0)))
    pairs = list(zip(jax.tree_util.tree_leaves(out["map_used"]),
                     jax.tree_util.tree_leaves(out["map_visited"])))
    for a, b in pairs:
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-5)
    assert not all(np.array_equal(a, b) for a, b in pairs)
