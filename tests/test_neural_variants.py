"""The cycle's layouts (``Spec.layout``, :mod:`neurd.neural.layouts`): every layout gives
the numbers of the first-written one (``vmap``) up to float rounding after 10 cycles on every
game, and each repeats bit for bit when compiled again; a layout of a user's own is one class
and one registration."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from neurd import games
from neurd.names import GAMES
from neurd.neural import arguments, layouts, passes, train, visited

CYCLES = 10
# quantities that sum a cycle's metric over the segment: compared relative to their size
SUMMED = ("blocked", "critic_loss", "updates")


@pytest.fixture(scope="module")
def compiled():
    return {name: games.compile_game(game.string) for name, game in GAMES.items()}


def _run(spec, game, name, seeds=(0, 1), entropies=(0.1, 1.0)):
    states, keys, etas = train.batch_inputs(spec, game, 0, name, seeds, entropies)
    out = train.run_segment(spec, game, states, keys, etas, 0, CYCLES, np.float32(1.0))
    critics = train.critic_tables(spec, game, out)
    return jax.tree_util.tree_map(np.asarray, (out, critics))


def _compare(reference, other, label):
    (ref_states, ref_critics), (states, critics) = reference, other
    for algorithm, state in states.items():
        for name in ("policy", "critic", "policy_opt", "critic_opt", "table"):
            for a, b in zip(jax.tree_util.tree_leaves(getattr(ref_states[algorithm], name)),
                            jax.tree_util.tree_leaves(getattr(state, name))):
                np.testing.assert_allclose(b, a, rtol=0, atol=1e-5, err_msg=f"{label} {name}")
        for name in SUMMED:
            np.testing.assert_allclose(getattr(state, name), getattr(ref_states[algorithm], name),
                                       rtol=1e-5, atol=1e-6, err_msg=f"{label} {name}")
        np.testing.assert_allclose(critics[algorithm], ref_critics[algorithm], rtol=0,
                                   atol=1e-5, err_msg=f"{label} critic tables")


def _bitwise(first, second):
    return all(np.array_equal(a, b) for a, b in zip(jax.tree_util.tree_leaves(first),
                                                     jax.tree_util.tree_leaves(second)))


# Kuhn in `make test`; the larger games, whose programs take longest to compile, in `make
# test-long` (each layout's code is the same for every game; only its sizes differ)
@pytest.mark.parametrize("name", [pytest.param(name, marks=() if name == "kuhn" else
                                               pytest.mark.long) for name in GAMES])
def test_variants_agree_after_ten_cycles_and_each_repeats_bitwise(compiled, name):
    """Every variant agrees with ``vmap`` on every game; compiled again, the variant this
    machine runs by default repeats bit for bit on every game, and ``vmap`` gives the
    reference's bits (each other variant's repeat: the test below)."""
    game = train.neural_game(compiled[name])
    reference = _run(train.Spec(layout="vmap"), game, name)
    default = layouts.resolve(layouts.DEFAULT, visited.visited_share(train.Spec(), game))
    for variant in layouts.LAYOUTS:
        spec = train.Spec(layout=variant)
        first = _run(spec, game, name)
        _compare(reference, first, f"{name} {variant}")
        if variant not in (default, "vmap"):
            continue
        jax.clear_caches()  # compiled again: the same numbers, bit for bit
        assert _bitwise(first, _run(spec, game, name)), f"{name} {variant} does not repeat"
        if variant == "vmap":
            assert _bitwise(first, reference)


@pytest.mark.long  # two compilations of each variant: make test-long
def test_every_variant_repeats_bitwise_when_compiled_again(compiled):
    """On Kuhn, each other variant compiled again gives its numbers bit for bit (a
    compilation of the larger games' again would double the minutes and show nothing
    Kuhn's do not)."""
    game = train.neural_game(compiled["kuhn"])
    default = layouts.resolve(layouts.DEFAULT, visited.visited_share(train.Spec(), game))
    for variant in layouts.LAYOUTS:
        if variant in (default, "vmap"):
            continue  # the test above
        spec = train.Spec(layout=variant)
        first = _run(spec, game, "kuhn")
        jax.clear_caches()
        assert _bitwise(first, _run(spec, game, "kuhn")), f"kuhn {variant} does not repeat"


@pytest.mark.long  # Leduc's programs: make test-long
def test_a_seed_in_a_batch_of_another_size_gives_its_numbers_within_rounding(compiled):
    """A seed's configurations run alone give, after ten cycles, their numbers in a batch of
    three seeds within the rounding the layouts are held to: XLA may choose other kernels for
    another batch size (Leduc's do), so splitting the seeds into jobs is bit for bit only
    where it chooses the same kernels (Kuhn: ``test_neural.py``'s
    ``test_splitting_the_seeds_into_jobs_changes_no_number``)."""
    game = train.neural_game(compiled["leduc"])
    whole = _run(train.Spec(), game, "leduc", seeds=(0, 1, 2))
    alone = _run(train.Spec(), game, "leduc", seeds=(1,))
    # seed-major (train.batch_inputs): seed 1's two entropy levels are rows 2 and 3
    in_whole = jax.tree_util.tree_map(lambda x: x[2:4], whole)
    _compare(alone, in_whole, f"leduc, seed 1 in a batch of three after {CYCLES} cycles")
    assert not np.allclose(whole[1]["neurd"][0], whole[1]["neurd"][2], atol=1e-3)


@pytest.mark.parametrize("setting", [dict(networks="per_player", hidden=(16, 8)),
                                     dict(critic="exact")])
def test_variants_agree_for_other_networks_and_the_exact_critic(compiled, setting):
    """Per-player networks of two hidden layers (one setting: each layout's per-player and
    later-layer code at once), and the exact critic (no critic pass)."""
    game = train.neural_game(compiled["kuhn"])
    reference = _run(train.Spec(layout="vmap", **setting), game, "kuhn")
    for variant in layouts.LAYOUTS:
        _compare(reference, _run(train.Spec(layout=variant, **setting), game, "kuhn"),
                 f"kuhn {setting} {variant}")


def test_the_default_is_a_variant_and_an_unknown_one_is_refused():
    assert train.Spec().layout == layouts.DEFAULT == "auto"
    assert set(layouts.AUTO.values()) | {layouts.AUTO_ELSEWHERE} <= set(layouts.LAYOUTS)
    assert layouts.resolve("auto") == layouts.AUTO.get(jax.default_backend(),
                                                       layouts.AUTO_ELSEWHERE)
    assert layouts.resolve("joined") == "joined"
    # the visited states' share of every one decides auto where the backend has a layout
    # for them (VISITED), and only at or below VISITED_SHARE
    backend = jax.default_backend()
    below, above = layouts.VISITED_SHARE, min(1.0, layouts.VISITED_SHARE + 0.01)
    assert layouts.resolve("auto", below) == layouts.VISITED.get(backend,
                                                                 layouts.resolve("auto"))
    assert layouts.resolve("auto", above) == layouts.resolve("auto", None) == layouts.resolve(
        "auto")
    assert layouts.resolve("map_used", 0.1) == "map_used"
    assert set(layouts.VISITED.values()) <= {n for n, x in layouts.LAYOUTS.items() if x.visited}
    for share in (0, -0.5, 1.5, float("nan"), float("inf"), True, "0.5"):
        with pytest.raises(ValueError, match="visited_share"):
            layouts.resolve("auto", share)
    assert layouts.names() == ("auto", *sorted(layouts.LAYOUTS))
    with pytest.raises(ValueError, match="unknown cycle variant 'fast'"):
        train.Spec(layout="fast")
    with pytest.raises(ValueError, match="already registered"):
        layouts.register(layouts.Mapped("map", "again"))
    with pytest.raises(ValueError, match="already registered"):
        layouts.register(layouts.Vmapped("auto", "the default's name"))
    with pytest.raises(TypeError, match="not a neurd.neural.layouts.Layout"):
        layouts.register("map")


def test_used_columns_are_the_non_zero_columns_as_runs(compiled):
    tensor = np.zeros((3, 9), np.float32)
    tensor[0, [1, 2, 5]] = 1.0
    tensor[2, 8] = 1.0
    assert passes.used_columns(tensor) == ((1, 3), (5, 6), (8, 9))
    for game in compiled.values():
        runs = passes.used_columns(game.infostate_tensor)
        used = np.concatenate([np.arange(a, b) for a, b in runs])
        np.testing.assert_array_equal(
            used, np.flatnonzero(np.any(game.infostate_tensor != 0, axis=0)))


def test_a_kernel_cut_by_one_gather_is_the_slices_bit_for_bit_and_so_is_its_gradient(compiled):
    """passes.kernel_rows (one gather, a gather back) against the runs' slices concatenated
    (whose transposes are pads): the same rows, and the same gradient, zero on the rows not
    read, under jit and vmap."""
    runs = passes.used_columns(compiled["goofspiel"].infostate_tensor)
    total = compiled["goofspiel"].infostate_tensor.shape[1]
    kernels = jnp.asarray(np.random.default_rng(5).standard_normal((3, total, 7)), jnp.float32)

    def by_slices(kernel):
        return jnp.concatenate([kernel[a:b] for a, b in runs])

    assert passes.kernel_rows(kernels[0], runs).shape == (50, 7)
    np.testing.assert_array_equal(jax.jit(lambda k: passes.kernel_rows(k, runs))(kernels[0]),
                                  by_slices(kernels[0]))

    def loss(cut):
        return lambda k: jnp.sum(jnp.sin(cut(k)) * jnp.arange(7.0))

    ours = jax.jit(jax.vmap(jax.grad(loss(lambda k: passes.kernel_rows(k, runs)))))(kernels)
    theirs = jax.jit(jax.vmap(jax.grad(loss(by_slices))))(kernels)
    np.testing.assert_array_equal(ours, theirs)
    unused = np.setdiff1d(np.arange(total), np.concatenate([np.arange(a, b) for a, b in runs]))
    assert unused.size == total - 50 and not np.any(np.asarray(ours)[:, unused])


class Unrolled(layouts.Layout):
    """Each configuration's pass in turn, stacked (a Python loop, unrolled when traced): a
    layout as a user would add one."""

    def every(self, net, params):
        count = jax.tree_util.tree_leaves(params)[0].shape[0]
        return jnp.stack([self.one(net, jax.tree_util.tree_map(lambda x, i=i: x[i], params))
                          for i in range(count)])


def test_a_layout_of_ones_own_is_one_class_and_one_registration(compiled, monkeypatch):
    """A subclass registered under a new name runs as ``Spec(layout=<name>)``, agrees
    with ``vmap`` and is accepted by the run-time check; the registry is the validation."""
    monkeypatch.setattr(layouts, "LAYOUTS", dict(layouts.LAYOUTS))
    with pytest.raises(ValueError, match="unknown cycle variant 'unrolled'"):
        train.Spec(layout="unrolled")
    layouts.register(Unrolled("unrolled", "each configuration's pass in turn, stacked"))
    assert "unrolled" in layouts.names()
    game = train.neural_game(compiled["kuhn"])
    reference = _run(train.Spec(layout="vmap"), game, "kuhn")
    mine = _run(train.Spec(layout="unrolled"), game, "kuhn")
    _compare(reference, mine, "kuhn unrolled")
    arguments.check_run_time(train.Spec(layout="unrolled"))


def _exact_table(params: dict, game) -> np.ndarray:
    """The shared MLP's policy table in float64 with numpy: an oracle independent of JAX."""
    layers = passes._layers(jax.tree_util.tree_map(lambda a: np.asarray(a, np.float64),
                                                   params))
    x = np.asarray(game.tensors, np.float64)
    for i, (kernel, bias) in enumerate(layers):
        x = x @ kernel + bias
        if i < len(layers) - 1:
            x = np.maximum(x, 0.0)
    legal = np.asarray(game.tree.legal)
    z = np.where(legal, x, -np.inf)
    p = np.exp(z - z.max(axis=-1, keepdims=True))
    return p / p.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize("scale", [1.0, 30.0, 1000.0])
def test_the_tables_rounding_bound_holds_for_every_layout(compiled, scale):
    """:func:`train.policy_table_rounding` bounds what float32 rounding can do to a policy
    table, whatever the order of sums: every layout's table (and flax's) is within half the
    bound of the float64 table (one evaluation's share; two evaluations, on two processors,
    within the bound), at the initial weights and at weights grown 30 and 1000 times, where
    large terms cancel in the logits.  At the initial weights the bound is below the fixed
    tolerance of earlier checks (1e-5): it loosens only where the weights are large."""
    game = train.neural_game(compiled["leduc"])
    spec = train.Spec()
    states, _, _ = train.batch_inputs(spec, game, 0, "leduc", (0, 1), (0.0, 1.0))
    rng = np.random.default_rng(0)
    policy = jax.tree_util.tree_map(  # grown, and the cancellations made uneven
        lambda a: jnp.asarray(np.asarray(a) * np.float32(scale ** 0.5)
                              * rng.uniform(0.5, 1.5, a.shape).astype(np.float32)),
        states["neurd"].policy)
    bound = np.asarray(jax.vmap(lambda p: train.policy_table_rounding(spec, game, p))(policy))
    assert np.all(np.isfinite(bound)) and np.all(bound > 0)
    if scale == 1.0:
        assert bound.max() < 1e-3, bound.max()
    exact = np.stack([_exact_table(jax.tree_util.tree_map(lambda a, i=i: a[i], policy), game)
                      for i in range(len(bound))])
    net = train.network_pass(spec, game)
    tables = {"flax": np.asarray(jax.vmap(lambda p: train.policy_table(spec, game, p))(policy))}
    for name, layout in layouts.LAYOUTS.items():
        tables[name] = np.asarray(train.masked_policy(layout.every(net, policy),
                                                      game.tree.legal))
    for name, table in tables.items():
        gap = np.max(np.abs(table - exact), axis=-1)
        assert np.all(gap <= bound / 2 + 1e-6), (name, float(np.max(gap - bound / 2)))
