"""Compiling OpenSpiel games to arrays: counts, fidelity to OpenSpiel, file format, refusals."""

import numpy as np
import pyspiel
import pytest

from neurd.games import (
    CHANCE,
    FORMAT_VERSION,
    NO_INDEX,
    TERMINAL,
    GameError,
    GameFileError,
    compile_game,
    load,
    openspiel_game,
    save,
)
from neurd.names import GAMES


@pytest.fixture(scope="session")
def compiled():
    return {name: compile_game(game.string) for name, game in GAMES.items()}


@pytest.mark.parametrize("name", sorted(GAMES))
def test_information_state_counts_are_the_papers(compiled, name):
    game, expected = compiled[name], GAMES[name].infostates
    assert game.num_infostates == expected  # paper: 12, 936, 2124
    assert sum(game.infostates_per_player) == expected
    assert len(set(game.infostate_string)) == expected  # one row per OpenSpiel string


def _playout(openspiel_game, game, rng):
    """Follow one random path in OpenSpiel and in the arrays side by side."""
    state, node, reach = openspiel_game.new_initial_state(), 0, 1.0
    while True:
        if state.is_terminal():
            assert game.history_player[node] == TERMINAL
            np.testing.assert_array_equal(game.history_returns[node], state.returns())
            row = np.flatnonzero(game.terminal_history == node)
            assert len(row) == 1 and game.terminal_chance_reach[row[0]] == pytest.approx(reach)
            return
        if state.is_chance_node():
            assert game.history_player[node] == CHANCE
            outcomes = state.chance_outcomes()
            action, probability = outcomes[rng.integers(len(outcomes))]
            reach *= probability
        else:
            player = state.current_player()
            info = game.history_infostate[node]
            assert game.history_player[node] == player == game.infostate_player[info]
            assert game.infostate_string[info] == state.information_state_string(player)
            np.testing.assert_array_equal(game.infostate_tensor[info],
                                          state.information_state_tensor(player))
            assert list(np.flatnonzero(game.infostate_legal[info])) == state.legal_actions()
            action = rng.choice(state.legal_actions())
        child = game.history_children[node, action]
        assert game.history_parent[child] == node and game.history_action[child] == action
        if state.is_chance_node():
            assert game.history_chance_probability[child] == probability
        state.apply_action(int(action))
        node = child


@pytest.mark.parametrize("name", sorted(GAMES))
def test_arrays_follow_openspiel_along_random_paths(compiled, name):
    game = compiled[name]
    game_of_openspiel = openspiel_game(GAMES[name].string)
    rng = np.random.default_rng(0)
    for _ in range(30):
        _playout(game_of_openspiel, game, rng)


@pytest.mark.parametrize("name", sorted(GAMES))
def test_sequences_are_each_players_last_own_action(compiled, name):
    """Terminal sequences and info-state parents, recomputed by walking up the tree."""
    game = compiled[name]
    rng = np.random.default_rng(1)
    for row in rng.choice(game.num_terminals, size=min(200, game.num_terminals), replace=False):
        node, last, reach = game.terminal_history[row], [None, None], 1.0
        while game.history_parent[node] != NO_INDEX:
            parent = game.history_parent[node]
            player = game.history_player[parent]
            if player in (0, 1) and last[player] is None:
                last[player] = (game.history_infostate[parent], game.history_action[node])
            reach *= game.history_chance_probability[node]
            node = parent
        for player in (0, 1):
            expected = last[player] or (NO_INDEX, NO_INDEX)
            assert (game.terminal_infostate[row, player], game.terminal_action[row, player]) \
                == expected
        assert game.terminal_chance_reach[row] == pytest.approx(reach, rel=1e-14)
    # levels count own earlier actions: a parent sequence sits one level up
    has_parent = game.infostate_parent != NO_INDEX
    np.testing.assert_array_equal(game.infostate_level[has_parent],
                                  game.infostate_level[game.infostate_parent[has_parent]] + 1)
    assert np.all(game.infostate_level[~has_parent] == 0)


def test_save_load_round_trip(compiled, tmp_path):
    game = compiled["leduc"]
    path = tmp_path / "leduc.npz"
    save(game, path)
    with np.load(path, allow_pickle=False) as data:  # no object arrays anywhere
        assert int(data["format_version"]) == FORMAT_VERSION
        assert all(data[name].dtype != object for name in data.files)
    again = load(path)
    assert again.game_string == game.game_string and again.num_actions == game.num_actions
    for name in ("history_children", "infostate_string", "infostate_tensor", "terminal_action"):
        np.testing.assert_array_equal(getattr(again, name), getattr(game, name))


def _rewrite(path, out, **changes):
    with np.load(path, allow_pickle=False) as data:
        arrays = {name: data[name] for name in data.files}
    arrays.update(changes)
    arrays = {k: v for k, v in arrays.items() if v is not None}
    np.savez(out, **arrays)
    return out


@pytest.mark.parametrize("changes, message", [
    ({"format_version": np.array(FORMAT_VERSION + 1)}, "format version"),
    ({"format": np.array("something-else")}, "not a compiled game"),
    ({"infostate_tensor": None}, "missing ['infostate_tensor']"),
    ({"infostate_legal": np.ones((5, 3), dtype=bool)}, "infostate_legal: dimension I"),
    ({"history_parent": np.zeros(58, dtype=np.float64)}, "history_parent: expected"),
    ({"history_infostate": np.full(58, 99, dtype=np.int32)}, "history_infostate: values"),
])
def test_load_refuses_a_bad_file(compiled, tmp_path, changes, message):
    path = tmp_path / "kuhn.npz"
    save(compiled["kuhn"], path)
    bad = _rewrite(path, tmp_path / "bad.npz", **changes)
    with pytest.raises(GameFileError, match=__import__("re").escape(message)):
        load(bad)


@pytest.mark.parametrize("string, reason", [
    ("kuhn_poker(players=3)", "3 players"),
    ("goofspiel(num_cards=3,returns_type=total_points)", "GENERAL_SUM"),
    ("tiny_hanabi", "IDENTICAL"),
    ("dark_hex_ir(num_rows=2,num_cols=2)", "does not have perfect recall"),
    ("no_such_game", "cannot load"),
    ("", "non-empty"),
])
def test_refused_games_name_the_reason(string, reason):
    with pytest.raises(GameError, match=reason):
        compile_game(string)


def test_history_limit_is_enforced():
    with pytest.raises(GameError, match="more than 100 histories"):
        compile_game("leduc_poker", max_histories=100)


@pytest.mark.parametrize("string", [
    "matrix_rps",  # simultaneous, made turn-based
    "goofspiel(num_cards=3)",  # simultaneous with chance (random point order)
    "liars_dice(dice_sides=3)",
    "dark_hex(num_rows=2,num_cols=2)",
])
def test_other_two_player_zero_sum_games_compile(string):
    game = compile_game(string)
    assert game.num_infostates > 0 and game.num_terminals > 0
    assert np.all(game.terminal_returns.sum(axis=1) == 0)
    assert pyspiel.load_game(string).num_players() == 2
