"""The neural stage on any device: no out-of-range index, one rule at a zero probability, the
merged sampler and counts equal to the separate ones, checkpoints in files under 16 MiB that
move between machines, a wall-time budget whose pieces add up to one run, and the GPU check.

The tests marked ``gpu`` need a GPU visible to JAX and are skipped (not failed) without one.
"""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from jax.experimental import checkify

from neurd import games
from neurd.names import GAMES
from neurd.neural import checkpoint, experiment, layouts, measurement, sampler, train, visited
from neurd.precision import float64
from neurd.publication.allocation import device_check
from neurd.tabular import histories

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def compiled():
    return {name: games.compile_game(game.string) for name, game in GAMES.items()}


def _setup(spec, game, name, seeds=1):
    return train.batch_inputs(spec, game, 0, name, tuple(range(seeds)), (0.0, 0.1))


# --- 1. correct: every index in range ---------------------------------------------------------


@pytest.mark.parametrize("name, critic", [("kuhn", "learned"), ("kuhn", "exact"),
                                          ("leduc", "learned"), ("leduc", "exact"),
                                          ("goofspiel", "learned")])
def test_a_learning_cycle_indexes_nothing_out_of_range(compiled, name, critic, monkeypatch):
    """checkify's index checks over one whole cycle (sampler, critic and policy steps and
    their gradients): chance outcomes and child slots >= the number of actions never reach
    a gather or its transposed scatter (XLA's deterministic scatter does not drop them).

    checkify cannot check a scatter under ``vmap`` (JAX 0.10: its out-of-range rule fails on
    a batched scatter's dimensions), and the cycle's one scatter, the CPU's count of visits,
    is under the cycle's ``vmap``; so one configuration's sampling, critic steps and visit
    counts are checked unbatched, and the whole cycle with the visits counted as on an
    accelerator (no scatter: the test below shows it the same cycle bit for bit)."""
    game = train.neural_game(compiled[name])
    # the layout this game runs by default on a CPU (Goofspiel's: map_visited)
    spec = train.Spec(critic=critic)
    spec = train.Spec(critic=critic, layout=visited.cycle_layout(spec, game).name)
    states, keys, _ = _setup(spec, game, name)
    checks = checkify.index_checks
    # each program compiled once and run for every algorithm (its index is an argument)
    steps = jax.jit(checkify.checkify(partial(train.critic_steps, spec, game,
                                              eta=jnp.float32(0.1), sign=jnp.float32(-1.0)),
                                      errors=checks))

    def one(state, key, index):
        return train.cycle(spec, game, state, key, jnp.full((1,), 0.1, jnp.float32),
                           jnp.float32(-1.0), index)

    with monkeypatch.context() as patched:
        patched.setattr(jax, "default_backend", lambda: "gpu")
        cycle = jax.jit(checkify.checkify(one, errors=checks)).lower(
            jax.tree_util.tree_map(lambda x: x[1:2], states[spec.algorithms[0]]),
            keys[spec.algorithms[0]][1:2], jnp.zeros((1,), jnp.int32)).compile()
    for index, algorithm in enumerate(spec.algorithms):
        state = jax.tree_util.tree_map(lambda x: x[1], states[algorithm])
        error, out = steps(state, state.table, keys[algorithm][1])
        error.throw()
        assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(out))
        error, out = cycle(jax.tree_util.tree_map(lambda x: x[1:2], states[algorithm]),
                           keys[algorithm][1:2], jnp.full((1,), index, jnp.int32))
        error.throw()
        assert all(np.all(np.isfinite(np.asarray(x))) for x in jax.tree_util.tree_leaves(out))


@pytest.mark.parametrize("name", ["kuhn", "leduc"])
def test_the_exact_evaluation_indexes_nothing_out_of_range(compiled, name):
    """The float64 checkpoint evaluation (NashConv, exact q, reach) under the index checks:
    a history below a chance node reads column 0 of the policy, not its chance outcome."""
    game = compiled[name]
    form, tree = measurement.exact_setup(game)
    rng = np.random.default_rng(0)
    tables = rng.random((2,) + game.infostate_legal.shape).astype(np.float32)
    tables = np.where(game.infostate_legal, tables, 0)
    tables /= tables.sum(-1, keepdims=True)
    with float64():
        measure = checkify.checkify(measurement.measure.__wrapped__,
                                    errors=checkify.index_checks)
        error, (value, rmse, entropy, at) = jax.jit(measure)(
            form, tree, tables, np.zeros_like(tables), jnp.asarray([0.0, 0.3]), -1.0)
        error.throw()
        assert np.all(np.isfinite(np.asarray(value))) and np.all(np.isfinite(np.asarray(rmse)))
        assert np.all((np.asarray(entropy) > 0) & (np.asarray(entropy) <= np.log(3) + 1e-12))
        assert np.all((np.asarray(at) >= 0) & (np.asarray(at) <= 1))
        assert int(jnp.max(tree.action)) < game.num_actions


def test_the_taken_action_value_is_a_one_hot_product():
    values = jnp.asarray([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    np.testing.assert_array_equal(train.taken_values(values, jnp.asarray([2, 7])), [3.0, 0.0])
    grad = jax.grad(lambda v: jnp.sum(train.taken_values(v, jnp.asarray([1, 3]))))(values)
    np.testing.assert_array_equal(grad, [[0, 1, 0], [0, 0, 0]])


def test_one_rule_for_the_entropy_term_at_a_zero_probability(compiled):
    """A legal action of probability 0 (underflowed): learner and exact evaluation floor pi
    at PI_FLOOR alike, so the learned critic's q and the exact q add the same own term."""
    game = compiled["kuhn"]
    eta = 0.3
    policy = np.where(game.infostate_legal, 0.5, 0.0)
    policy[0] = [1.0, 0.0]  # the second action of infostate 0 has probability 0
    tree32 = histories.history_tree(game, jnp.float32)
    learner = np.asarray(train.own_terms(jnp.asarray(policy, jnp.float32), tree32.num_legal,
                                         tree32.legal, eta))
    with float64():
        tree = histories.history_tree(game)
        exact = np.asarray(histories._own_term(tree, jnp.asarray(policy), eta))
        q, continuation = (np.asarray(x) for x in histories.action_values(
            tree, jnp.asarray(policy), eta))
    expected = -eta * np.log(histories.PI_FLOOR * 2)
    assert exact[0, 1] == pytest.approx(expected, rel=1e-12)
    assert learner[0, 1] == pytest.approx(expected, rel=1e-6)
    np.testing.assert_allclose(learner, exact, rtol=1e-6)
    # q = continuation + own term at the zero-probability action too, and finite
    assert np.all(np.isfinite(q)) and q[0, 1] == pytest.approx(continuation[0, 1] + expected)


# --- the merged sampler and the counts -----------------------------------------------------------


@pytest.mark.parametrize("name", ["kuhn", "leduc", "goofspiel"])
def test_one_sampler_pass_draws_the_separate_batches(compiled, name):
    game = compiled[name]
    tree = histories.history_tree(game, jnp.float32)
    policy = jnp.asarray(np.where(game.infostate_legal, 1.0, 0.0) /
                         game.infostate_legal.sum(-1, keepdims=True), jnp.float32)
    # three batches of one size (drawn in one vmapped call), one of another, one alone again
    keys = list(jax.random.split(jax.random.PRNGKey(3), 5))
    sizes = (4, 4, 4, 64, 4)
    merged = sampler.sample_batches(tree, policy, keys, sizes, 0.1, -1.0)
    for key, size, batch in zip(keys, sizes, merged):
        alone = sampler.sample(tree, policy, key, size, 0.1, -1.0)
        for x, y in zip(jax.tree_util.tree_leaves(alone), jax.tree_util.tree_leaves(batch)):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_visit_counts_by_comparison_equal_the_segment_sum(compiled):
    """The accelerator's way (a comparison summed, no scatter) against the CPU's."""
    game = compiled["leduc"]
    tree = histories.history_tree(game, jnp.float32)
    policy = jnp.asarray(np.where(game.infostate_legal, 1.0, 0.0) /
                         game.infostate_legal.sum(-1, keepdims=True), jnp.float32)
    episodes = sampler.sample(tree, policy, jax.random.PRNGKey(0), 512)
    index, valid = episodes.infostate.ravel(), episodes.valid.ravel()
    by_scatter = sampler.counts_by_scatter(index, valid, game.num_infostates)
    by_compare = sampler.counts_by_comparison(index, valid, game.num_infostates)
    np.testing.assert_array_equal(np.asarray(by_scatter), np.asarray(by_compare))
    assert float(by_scatter.sum()) == float(valid.sum()) > 0


@pytest.mark.parametrize("name", ["kuhn", "leduc", "goofspiel"])
def test_visit_counts_by_depth_equal_the_segment_sum(compiled, name):
    """The accelerator's way where every information state lies at one depth (the three
    games): each step compared with its depth's states only, the counts put in place by a
    gather that checkify finds in range; equal to the segment sum, batched as in a cycle."""
    game = compiled[name]
    index = sampler.depth_index(game)
    assert index is not None
    assert sorted(np.concatenate([np.asarray(i) for i in index.infostates]).tolist()) == list(
        range(game.num_infostates))
    tree = histories.history_tree(game, jnp.float32)
    policy = jnp.asarray(np.where(game.infostate_legal, 1.0, 0.0) /
                         game.infostate_legal.sum(-1, keepdims=True), jnp.float32)
    keys = jax.random.split(jax.random.PRNGKey(1), 3)
    episodes = jax.vmap(lambda k: sampler.sample(tree, policy, k, 256))(keys)

    def both(episodes):
        return (sampler.counts_by_depth(episodes.infostate, episodes.valid, index),
                sampler.counts_by_scatter(episodes.infostate.ravel(), episodes.valid.ravel(),
                                          game.num_infostates))

    error, (by_depth, by_scatter) = jax.jit(jax.vmap(checkify.checkify(
        both, errors=checkify.index_checks)))(episodes)
    error.throw()
    np.testing.assert_array_equal(np.asarray(by_depth), np.asarray(by_scatter))
    assert np.all(np.asarray(by_depth).sum(-1) == np.asarray(episodes.valid).sum((1, 2)))
    assert np.asarray(by_depth).max() > 0


@pytest.mark.parametrize("name", ["leduc", "goofspiel"])
def test_a_cycle_counting_visits_the_accelerators_way_is_the_same_cycle(compiled, name,
                                                                       monkeypatch):
    """One cycle traced as for an accelerator (visits counted by depth, no scatter) gives
    the CPU's cycle bit for bit (counts are exact small integers either way), and indexes
    nothing out of range."""
    game = train.neural_game(compiled[name])
    # the CPU's own cycle variant named, so that tracing as for a GPU changes only how the
    # visits are counted (``auto`` would resolve to the GPU's variant there)
    spec = train.Spec(layout=layouts.resolve(layouts.DEFAULT))
    states, keys, _ = _setup(spec, game, name)
    state = jax.tree_util.tree_map(lambda x: x[1:2], states["neurd"])

    def one(state, key):
        return train.cycle(spec, game, state, key, jnp.full((1,), 0.1, jnp.float32),
                           jnp.float32(1.0), jnp.full((1,), spec.algorithms.index("neurd"),
                                                      jnp.int32))

    cpu = jax.jit(one)(state, keys["neurd"][1:2])
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    traced = str(jax.make_jaxpr(lambda s, k: one(s, k))(state, keys["neurd"][1:2]))
    assert "scatter" not in traced and "eq" in traced
    error, accelerator = jax.jit(checkify.checkify(one, errors=checkify.index_checks))(
        state, keys["neurd"][1:2])
    error.throw()
    for a, b in zip(jax.tree_util.tree_leaves(cpu), jax.tree_util.tree_leaves(accelerator)):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_a_state_at_two_depths_has_no_depth_index(compiled):
    """A game whose information state is at decisions of two depths gets none (the
    comparison over every step is used there)."""
    game = compiled["kuhn"]
    decisions = np.flatnonzero((game.history_player >= 0) & (game.history_infostate >= 0))
    depth = histories.history_depths(game)
    first = decisions[depth[decisions] == depth[decisions].min()][0]
    deeper = decisions[depth[decisions] > depth[first]][0]
    moved = game.history_infostate.copy()
    moved[deeper] = moved[first]
    assert sampler.depth_index(dataclasses.replace(game, history_infostate=moved)) is None


def test_every_algorithm_in_one_vmap_gives_each_its_own_numbers(compiled):
    """NeuRD and SPG batched together: each the same numbers as run alone."""
    game = train.neural_game(compiled["kuhn"])
    both = train.Spec()
    states, keys, etas = _setup(both, game, "kuhn")
    together = train.run_segment(both, game, states, keys, etas, 0, 5, np.float32(1.0))
    for algorithm in both.algorithms:
        alone_spec = train.Spec(algorithms=(algorithm,))
        alone = train.run_segment(alone_spec, game, {algorithm: states[algorithm]},
                                  {algorithm: keys[algorithm]}, {algorithm: etas[algorithm]}, 0,
                                  5, np.float32(1.0))
        for x, y in zip(jax.tree_util.tree_leaves(alone[algorithm]),
                        jax.tree_util.tree_leaves(together[algorithm])):
            np.testing.assert_allclose(np.asarray(x), np.asarray(y), rtol=0, atol=1e-6)
    assert not np.allclose(np.asarray(together["neurd"].table),
                           np.asarray(together["spg"].table))


# --- 5. checkpoints and the wall-time budget -----------------------------------------------


def _plan(name="kuhn", length=40):
    return experiment.Plan(game=name, spec=train.Spec(), entropies=(0.0, 0.1), run_seeds=(0, 1),
                           seed=0, phase_iterations=length, phases=2, geometric=1, linear=3,
                           seeds_per_batch=2)


def test_a_checkpoint_is_cut_into_files_and_restored_exactly(tmp_path, compiled, monkeypatch):
    monkeypatch.setattr(checkpoint, "PART_BYTES", 4096)
    game = train.neural_game(compiled["leduc"])
    spec = train.Spec()
    states, _, _ = _setup(spec, game, "leduc")
    results = {"nash_conv": np.arange(12.0).reshape(3, 4),
               "phase_tables": np.ones((1, 4, 7), np.float32)}
    saver = checkpoint.Checkpoint(tmp_path / "ck", {"job": 1})
    saver.save([states], 2, results, [{"piece": 0}])
    saver.save([states], 3, results, [{"piece": 0}, {"piece": 1}])  # a second generation
    parts = sorted(p.name for p in (tmp_path / "ck").iterdir() if p.name != checkpoint.MARKER)
    assert "meta.json" in parts and len(parts) > 10
    assert all(p.startswith("part-1-") for p in parts if p != "meta.json")  # first one gone
    assert max((tmp_path / "ck" / p).stat().st_size for p in parts if p != "meta.json") < \
        4096 + 2048
    restored, row, out, pieces = saver.restore([states])
    assert row == 3 and pieces == [{"piece": 0}, {"piece": 1}]
    for x, y in zip(jax.tree_util.tree_leaves([states]), jax.tree_util.tree_leaves(restored)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
    for key, value in results.items():
        np.testing.assert_array_equal(out[key], value)
    # another job's checkpoint, or one whose leaves do not fit the job, is not used
    assert checkpoint.Checkpoint(tmp_path / "ck", {"job": 2}).restore([states]) is None
    other = train.initial_states(train.Spec(hidden=(8,)), game, 0, "leduc", (0,), 2)
    assert saver.restore([{a: other for a in spec.algorithms}]) is None


@pytest.mark.parametrize("name", ["kuhn", "leduc", "goofspiel"])
def test_a_paper_scale_checkpoint_fits_files_of_16_mib(compiled, name):
    """The paper scale's jobs (paper.yaml: 20 seeds, 240 configurations) hold at most 64 MiB
    of state, each file under 16 MiB; counted from the arrays a checkpoint saves, at its
    largest (two phases of policies kept, the third running)."""
    import yaml

    paper = yaml.safe_load(open(ROOT / "workflow/config/paper.yaml"))["neural"]
    game = compiled[name]
    spec = train.Spec()
    net = train.neural_game(game)
    one = train.initial_states(spec, net, 0, name, (0,), 1)
    per_config = sum(np.asarray(x).nbytes for x in jax.tree_util.tree_leaves(one))
    configs = 2 * 6 * paper["seeds_per_job"]  # algorithms x entropy levels x seeds
    checkpoints = 3 * (1 + paper["checkpoints"]["geometric"] + paper["checkpoints"]["linear"])
    results = (4 * checkpoints * configs * 8
               + 2 * configs * int(game.infostate_legal.sum()) * 4)
    total = configs * per_config + results
    assert total <= 64 * 2**20, f"{name}: {total / 2**20:.1f} MiB"
    assert checkpoint.PART_BYTES < 16 * 2**20


def _config(tmp_path, **neural):
    """Kuhn, 2 entropy levels x 2 seeds, 3 phases of 160 iterations, 3 geometric and 6 linear
    checkpoints a phase; ``neural``: other values of the config's neural keys."""
    import yaml

    from neurd.stages import snapshot, validate

    config = yaml.safe_load(open(ROOT / "workflow/config/default.yaml"))
    config["neural"].update({"games": ["kuhn"], "entropies": [0.0, 0.1], "seeds": 2,
                             "seeds_per_job": 2, "seeds_per_batch": 2,
                             "phase_iterations": {"kuhn": 160},
                             "checkpoints": {"geometric": 3, "linear": 6}, **neural})
    validate(config, str(ROOT / "workflow/schemas"))
    path = tmp_path / "neural.json"
    path.write_text(json.dumps(snapshot(config, "neural")))
    return path


def _job(cfg, game_file, out, checkpoint, *extra):
    out.mkdir(parents=True, exist_ok=True)
    return subprocess.run(
        [sys.executable, "-m", "neurd.cli", "neural-run", "--config", str(cfg), "--game",
         "kuhn", "--critic", "learned", "--chunk", "0", "--compiled", str(game_file),
         "--curves", str(out / "curves.parquet"), "--policies", str(out / "policies.parquet"),
         "--checkpoint", str(checkpoint), "--checkpoint-minutes", "60", *extra],
        capture_output=True, text=True,
        env=dict(os.environ, JAX_PLATFORMS="cpu"))


def _data_bytes(path):
    """A Parquet table's data, without its metadata (which records each piece's wall time)."""
    table = pq.read_table(path).replace_schema_metadata(None)
    return pd.DataFrame(table.to_pandas()).to_parquet(index=False)


@pytest.mark.workflow
def test_pieces_stopped_by_a_budget_and_moved_make_one_run(tmp_path, compiled):
    """Stopped by --stop-after-minutes at least three times (exit 75), the checkpoint folder
    moved to a new place before each resumption (another machine), the job writes the
    tables of an uninterrupted run, byte for byte; its provenance lists every piece."""
    # 3 checkpoints a phase: a piece runs two segments (the first includes the compilation,
    # the second gives the pace), so the job comes in five pieces, each a process
    cfg = _config(tmp_path, checkpoints={"geometric": 1, "linear": 1}, final_checkpoints=1)
    game_file = tmp_path / "kuhn.npz"
    games.save(compiled["kuhn"], game_file)
    once = _job(cfg, game_file, tmp_path / "once", tmp_path / "once" / "ck")
    assert once.returncode == 0, once.stderr[-2000:]
    place, pieces = tmp_path / "m0" / "ck", 0
    while True:
        done = _job(cfg, game_file, tmp_path / "pieces", place, "--stop-after-minutes", "1e-6")
        pieces += 1
        if done.returncode == 0:
            break
        assert done.returncode == 75, done.stderr[-2000:]
        assert "run again to resume" in done.stderr
        assert not (tmp_path / "pieces" / "curves.parquet").exists()  # never a partial table
        assert all(p.stat().st_size < 16 * 2**20 for p in place.iterdir())
        moved = tmp_path / f"m{pieces}" / "ck"
        moved.parent.mkdir()
        shutil.move(place, moved)
        place = moved
        assert pieces < 40
    assert pieces >= 3 and not place.exists()
    for name in ("curves", "policies"):
        assert _data_bytes(tmp_path / "once" / f"{name}.parquet") == \
            _data_bytes(tmp_path / "pieces" / f"{name}.parquet")
    meta = json.loads(pq.read_schema(tmp_path / "pieces" / "curves.parquet")
                      .metadata[b"neurd.pieces"])
    assert len(meta) == pieces
    assert sum(p["iterations"] for p in meta) == 3 * 160
    assert {"device", "platform", "jax", "revision", "seconds"} <= set(meta[0])


def test_a_budget_must_be_a_positive_number(tmp_path, compiled):
    cfg = _config(tmp_path)
    game_file = tmp_path / "kuhn.npz"
    games.save(compiled["kuhn"], game_file)
    for bad in ("nan", "0", "-1", "inf"):
        done = _job(cfg, game_file, tmp_path / "x", tmp_path / "ck", "--stop-after-minutes", bad)
        assert done.returncode != 0 and "--stop-after-minutes" in done.stderr


# --- 3. the GPU check --------------------------------------------------------------------------


def _gpu_present() -> bool:
    try:
        return bool(jax.devices("gpu"))
    except RuntimeError:
        return False


def _games_folder(tmp_path, compiled):
    for name in GAMES:
        (tmp_path / "games" / name).mkdir(parents=True)
        games.save(compiled[name], tmp_path / "games" / name / "game.npz")
    return tmp_path / "games"


CHECK = [sys.executable, "-m", "neurd.publication.allocation.device_check"]  # make gpu-check's


@pytest.mark.long  # the GPU check end to end: minutes on two cores
def test_the_gpu_check_runs_its_steps_on_the_cpu(tmp_path, compiled):
    """The check itself, dry run on the CPU (--platform cpu): its comparisons pass there
    trivially (CPU against CPU), and a real mismatch is caught (a planted one). On Kuhn only:
    its steps are the same for every game (each game's are checked on the card itself)."""
    folder = _games_folder(tmp_path, compiled)
    out = tmp_path / "check"
    done = subprocess.run([*CHECK, "--platform", "cpu", "--games",
                           str(folder), "--out", str(out), "--configs", "24", "--deadline",
                           "600", "--game", "kuhn", "--no-throughput"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    names = [c["check"] for c in report["checks"]]
    assert "two GPU runs bitwise equal" in names and all(c["ok"] for c in report["checks"])
    # plant a difference in the second "GPU" run: the check must fail
    data = dict(np.load(out / "cycles_gpu_b.npz"))
    key = next(k for k in data if k.startswith("kuhn/learned/neurd/"))
    data[key] = data[key] + np.float32(1e-3)
    np.savez(out / "cycles_gpu_b.npz", **data)
    check = device_check.Check(tmp_path / "again", 100.0)
    device_check.compare_cycles(check, out / "cycles_cpu.npz",
                             [out / "cycles_gpu_a.npz", out / "cycles_gpu_b.npz"], folder)
    assert not next(c for c in check.report["checks"]
                    if c["check"] == "two GPU runs bitwise equal")["ok"]


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu_present(), reason="no GPU visible to JAX")
def test_the_gpu_check_passes_on_this_gpu(tmp_path, compiled):
    """make gpu-check's steps on the GPU: finite, bitwise repeatable, CPU agreement, the real
    neural-run stopped and resumed (throughput is timed by make gpu-check, not here)."""
    folder = _games_folder(tmp_path, compiled)
    cfg = _config(tmp_path)
    done = subprocess.run([*CHECK, "--games",
                           str(folder), "--config", str(cfg), "--out", str(tmp_path / "check"),
                           "--deadline", "300", "--configs", "24", "--no-throughput"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]


def test_checkpoint_minutes_must_be_a_number_of_minutes(tmp_path, compiled):
    """--checkpoint-minutes (default $NEURD_CHECKPOINT_MINUTES): NaN, infinities and negative
    values are refused before the job starts; 0 (save at every checkpoint) is a cadence."""
    cfg = _config(tmp_path)
    game_file = tmp_path / "kuhn.npz"
    games.save(compiled["kuhn"], game_file)
    for bad in ("nan", "-1", "inf", "-inf"):
        done = _job(cfg, game_file, tmp_path / "x", tmp_path / "ck", "--checkpoint-minutes", bad)
        assert done.returncode != 0 and "--checkpoint-minutes" in done.stderr, bad
        assert not (tmp_path / "x" / "curves.parquet").exists()
