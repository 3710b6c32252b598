"""The engine's CFR and CFR+ (Fig 4b's yardsticks) against OpenSpiel's own C++ solvers.

:mod:`neurd.tabular.solvers` computes OpenSpiel's ``CFRSolver`` and
``CFRPlusSolver`` operation for operation, so the two agree bit for bit: the
cumulative regrets, current and cumulative policies equal OpenSpiel's
serialized state exactly, and the NashConv and average policy agree at
every checkpoint, on Kuhn, Leduc and Goofspiel (where summing in another
order breaks exact ties differently and parts from the first iteration on).
"""

import numpy as np
import pandas as pd
import pyspiel
import pytest

from neurd.games import compile_game, openspiel_game
from neurd.names import GAMES, REFERENCE_SOLVERS
from neurd.pipeline import tabular as stage
from neurd.tabular import cfr, solvers
from neurd.tabular.policies import from_openspiel
from neurd.tabular.reference import SOLVERS, solver_nash_conv
from neurd.tabular.sequence_form import sequence_form

pytestmark = pytest.mark.usefixtures("float64")

# iterations compared bit for bit, and checkpoints compared to 1e-9, per game
STATE_ITERATIONS = {"kuhn": 300, "leduc": 60, "goofspiel": 25}
CURVE_CHECKPOINTS = {"kuhn": [1, 2, 5, 10, 30, 100, 300, 1000], "leduc": [1, 3, 10, 30, 100, 300],
                     "goofspiel": [1, 2, 5, 10, 30, 100]}


@pytest.fixture(scope="module")
def games():
    return {name: compile_game(game.string) for name, game in GAMES.items()}


def _openspiel_state(solver) -> dict[str, list[np.ndarray]]:
    """OpenSpiel's serialized solver: info state -> [regrets, cumulative policy, policy],
    read from the exact (hexadecimal) floats."""
    body = solver.__getstate__().split("[SolverValuesTable]\n", 1)[1]
    parts = body.split("<~>")
    return {key: [np.array([float.fromhex(x) for x in field.split(",")])
                  for field in values.split(";")[1:]]
            for key, values in zip(parts[0::2], parts[1::2])}


@pytest.mark.parametrize("solver", REFERENCE_SOLVERS)
@pytest.mark.parametrize("name", sorted(GAMES))
def test_state_equals_openspiels_bit_for_bit(games, name, solver):
    game, iterations = games[name], STATE_ITERATIONS[name]
    theirs = SOLVERS[solver](openspiel_game(GAMES[name].string))
    for _ in range(iterations):
        theirs.evaluate_and_update_policy()
    table = _openspiel_state(theirs)
    ours = solvers.run(game, solver, iterations)
    assert int(ours.iteration) == iterations
    arrays = [np.asarray(a) for a in (ours.regrets, ours.cumulative_policy, ours.policy)]
    for index, key in enumerate(game.infostate_string):
        legal = game.infostate_legal[index]
        for what, ours_row, theirs_row in zip(("regrets", "cumulative policy", "policy"),
                                               (a[index, legal] for a in arrays), table[str(key)]):
            assert np.array_equal(ours_row, theirs_row), (key, what, ours_row - theirs_row)


@pytest.mark.parametrize("name", sorted(GAMES))
def test_nash_conv_and_average_policy_equal_openspiels_at_every_checkpoint(games, name):
    """Both solvers from one compiled program, against OpenSpiel's NashConv and policies."""
    game, points = games[name], CURVE_CHECKPOINTS[name]
    values, policies = solvers.solver_curves(game, list(REFERENCE_SOLVERS), points,
                                             policies=True)
    assert values.shape == (2, len(points)) and policies.shape[:2] == (2, len(points))
    for s, solver in enumerate(REFERENCE_SOLVERS):
        theirs, their_policies = solver_nash_conv(GAMES[name].string, solver, points, game)
        np.testing.assert_allclose(values[s], theirs, rtol=0, atol=1e-9)
        np.testing.assert_allclose(policies[s], their_policies, rtol=0, atol=1e-9)
    # the yardsticks are not the learners: CFR+ ends below CFR
    assert values[1, -1] < values[0, -1]


def test_summing_in_the_sequence_forms_order_parts_on_goofspiel(games):
    """Why the order matters: the sequence-form CFR(RM) sums the same regrets per
    information state and parts from OpenSpiel on Goofspiel at once, the walk here does not."""
    game = games["goofspiel"]
    form = sequence_form(game)
    points = [1, 2, 3, 5, 10]
    theirs = solver_nash_conv(GAMES["goofspiel"].string, "cfr_rm", points)
    sequence = cfr.cfr_sweep(form, ["rm"], [1.0], points)[0, 0]
    walk = solvers.solver_curves(game, ["cfr_rm"], points)[0]
    assert np.max(np.abs(sequence - theirs)) > 1e-6
    np.testing.assert_allclose(walk, theirs, rtol=0, atol=1e-12)


def test_bad_solver_names_and_checkpoints_are_refused(games):
    with pytest.raises(ValueError, match="unknown reference solver 'cfr'"):
        solvers.run(games["kuhn"], "cfr", 3)
    with pytest.raises(ValueError, match="strictly increasing"):
        solvers.solver_curves(games["kuhn"], ["cfr_rm"], [3, 2])


def _section(**changes):
    cfg = {"seed": 0, "games": ["kuhn"], "game_strings": {"kuhn": "kuhn_poker"},
           "expected_infostates": {"kuhn": 12}, "figure_game": "kuhn", "iterations": 200,
           "step_sizes": [0.5, 2.0], "learners": ["neurd", "spg"], "checkpoints": 12,
           "reference_solvers": ["cfr_rm", "cfr_plus"], "reference_iterations": None,
           "openspiel_check_iterations": 50, "interval": 0.95, "audit_fractions": [0.3]}
    cfg.update(changes)
    return cfg


def test_openspiel_check_passes_the_drawn_curve_and_stops_a_curve_that_parts(games):
    cfg = _section()
    drawn = stage.reference(cfg, "kuhn", games["kuhn"])
    points = stage.checkpoints(cfg)
    assert list(drawn) == ["cfr_rm", "cfr_plus"]
    assert list(drawn["cfr_plus"].iteration) == list(points)
    assert list(stage.check_points(cfg)) == [p for p in points if p <= 50]
    check = stage.openspiel_check(cfg, "kuhn", "cfr_plus", games["kuhn"], drawn["cfr_plus"])
    assert list(check.columns) == list(stage.CHECK_COLUMNS)
    assert list(check.iteration) == list(stage.check_points(cfg))
    assert (check.nash_conv - check.nash_conv_drawn).abs().max() <= 1e-12
    assert check.policy_difference.max() <= 1e-12
    parted = drawn["cfr_plus"].copy()
    parted.loc[parted.iteration == points[4], "nash_conv"] += 2e-9
    with pytest.raises(stage.ReferenceMismatch, match=rf"cfr_plus on kuhn parts from "
                                                      rf"OpenSpiel's own solver at iteration "
                                                      rf"{points[4]}: NashConv"):
        stage.openspiel_check(cfg, "kuhn", "cfr_plus", games["kuhn"], parted)
    # null checks the whole run; the prefix always holds the first checkpoint
    assert list(stage.check_points(_section(openspiel_check_iterations=None))) == list(points)
    assert list(stage.check_points(_section(openspiel_check_iterations=1))) == [1]
    cut = _section(reference_iterations=30, openspiel_check_iterations=None)
    assert stage.check_points(cut)[-1] <= 30
    with pytest.raises(Exception, match="no row at checkpoints"):
        stage.openspiel_check(cfg, "kuhn", "cfr_rm", games["kuhn"],
                              pd.DataFrame(drawn["cfr_rm"].iloc[:2]))


def test_the_average_policy_is_openspiels_normalisation(games):
    game = games["leduc"]
    theirs = SOLVERS["cfr_plus"](openspiel_game(GAMES["leduc"].string))
    for _ in range(7):
        theirs.evaluate_and_update_policy()
    state = solvers.run(game, "cfr_plus", 7)
    ours = np.asarray(solvers.average_policy(state.cumulative_policy, game.infostate_legal))
    assert np.array_equal(ours, from_openspiel(game, theirs.average_policy()))
    assert pyspiel.nash_conv(openspiel_game(GAMES["leduc"].string), theirs.average_policy()) > 0


def test_the_figures_table_needs_every_yardstick_checked_and_passed(games, tmp_path, caplog):
    """neurd tabular-table refuses a yardstick without OpenSpiel's check, or one that failed it."""
    import json

    from neurd.cli import main
    from neurd.tables import write_table

    cfg = _section(iterations=20, checkpoints=5)
    (tmp_path / "tabular.json").write_text(json.dumps(cfg))
    drawn = stage.reference(cfg, "kuhn", games["kuhn"])
    paths = {}
    for solver, table in drawn.items():
        paths[solver] = tmp_path / f"reference_{solver}.parquet"
        write_table(table, paths[solver], columns=stage.NASHCONV_COLUMNS, config=cfg)
        check = stage.openspiel_check(cfg, "kuhn", solver, games["kuhn"], table)
        write_table(check, tmp_path / f"openspiel_{solver}.parquet", columns=stage.CHECK_COLUMNS,
                    config=cfg)
    sweep = stage.sweep(cfg, "kuhn", games["kuhn"])
    write_table(sweep, tmp_path / "sweep.parquet", columns=stage.NASHCONV_COLUMNS, config=cfg)

    def table(*checks):
        return main(["tabular-table", "--config", str(tmp_path / "tabular.json"), "--game",
                     "kuhn", "--sweep", str(tmp_path / "sweep.parquet"), "--reference",
                     *map(str, paths.values()), "--checks",
                     *[str(tmp_path / f"openspiel_{s}.parquet") for s in checks],
                     "--out", str(tmp_path / "nashconv.parquet")])

    assert table("cfr_rm", "cfr_plus") == 0
    assert table("cfr_rm") == 2 and "every yardstick needs OpenSpiel's check" in caplog.text
    failed = pd.read_parquet(tmp_path / "openspiel_cfr_plus.parquet")
    failed.loc[2, "policy_difference"] = 1e-6
    write_table(failed, tmp_path / "openspiel_cfr_plus.parquet", columns=stage.CHECK_COLUMNS,
                config=cfg)
    caplog.clear()
    assert table("cfr_rm", "cfr_plus") == 2 and "parts from OpenSpiel's own solver" in caplog.text


def _cfr_plus_averaged(game, points, weight):
    """CFR+ whose average policy weighs iteration t by ``weight(t)`` (OpenSpiel: t)."""
    import jax
    import jax.numpy as jnp

    from neurd.tabular.evaluation import nash_conv

    def iterate(tree, state):
        t = state.iteration + 1
        state = solvers.SolverState(state.regrets, state.policy, state.cumulative_policy, t)
        for player in (0, 1):
            state = solvers._update(tree, state, player, weight(t.astype(jnp.float64)))
            regrets = jnp.maximum(state.regrets, 0.0)
            state = solvers.SolverState(regrets, solvers.regret_matching(regrets, tree.legal),
                                        state.cumulative_policy, t)
        return state

    advance = jax.jit(lambda tree, state, n: jax.lax.fori_loop(
        0, n, lambda _, s: iterate(tree, s), state))
    tree, form = solvers.solver_tree(game), sequence_form(game)
    state, done, values = solvers.init(tree), 0, []
    for point in points:
        state, done = advance(tree, state, int(point) - done), int(point)
        average = solvers.average_policy(state.cumulative_policy, tree.legal)[tree.restore]
        values.append(float(nash_conv(form, average)))
    return np.asarray(values)


@pytest.mark.parametrize("mistake, weight", [
    ("uniform average", lambda t: 1.0 + 0.0 * t),
    ("weight t - 1", lambda t: t - 1.0),
    ("a delay of 10 iterations", lambda t: (t - 10.0) * (t > 10.0)),
])
def test_the_check_stops_a_cfr_plus_with_another_average(games, mistake, weight):
    cfg = _section()
    points = stage.check_points(cfg)
    drawn = pd.DataFrame({"game": "kuhn", "algorithm": "cfr_plus", "step_size": np.nan,
                          "iteration": points,
                          "nash_conv": _cfr_plus_averaged(games["kuhn"], points, weight)})
    with pytest.raises(stage.ReferenceMismatch, match="at iteration [23]:"):
        stage.openspiel_check(cfg, "kuhn", "cfr_plus", games["kuhn"], drawn)


def test_the_default_prefix_is_long_enough_to_see_another_summation_order(games):
    """The subtlest mistake known: CFR summed in the sequence form's order equals OpenSpiel's
    to 1e-9 on Leduc until iteration 588, within the default 1000 iterations checked."""
    cfg = _section(games=["leduc"], game_strings={"leduc": "leduc_poker"},
                   expected_infostates={"leduc": 936}, figure_game="leduc", iterations=10000,
                   checkpoints=40, openspiel_check_iterations=1000)
    points = stage.check_points(cfg)
    assert points[-1] == 943  # the last default checkpoint within the first 1000 iterations
    form = sequence_form(games["leduc"])
    sequence = cfr.cfr_sweep(form, ["rm"], [1.0], points)[0, 0]
    drawn = pd.DataFrame({"game": "leduc", "algorithm": "cfr_rm", "step_size": np.nan,
                          "iteration": points, "nash_conv": sequence})
    with pytest.raises(stage.ReferenceMismatch, match="at iteration 588:"):
        stage.openspiel_check(cfg, "leduc", "cfr_rm", games["leduc"], drawn)
