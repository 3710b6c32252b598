"""A game too large for the engine is refused within seconds, before its walk fills the
machine: the histories are estimated from random playouts first (Knuth's estimator), and the
walk stops past its cap or past most of the memory the machine had available."""

import time

import pytest

from neurd import engine
from neurd.games import GameError
from neurd.games import compile as compiler
from neurd.games.openspiel import openspiel_game


@pytest.mark.parametrize("game, histories", [("kuhn_poker", 58), ("leduc_poker", 9457)])
def test_the_estimate_is_near_the_count_of_small_games(game, histories):
    estimate = compiler.estimate_histories(openspiel_game(game), probes=400)
    assert 0.5 * histories < estimate < 2.0 * histories, estimate
    assert engine.compile_game(game).num_histories == histories


@pytest.mark.parametrize("game", ["chess", "hex(board_size=4)",
                                  "goofspiel(num_cards=8,imp_info=True)"])
def test_a_game_far_too_large_is_refused_in_seconds_naming_its_size(game):
    start = time.monotonic()
    with pytest.raises(GameError, match=r"has about [\d.e+inf]+ histories \(estimated from 64 "
                                        r"random playouts\), far more than max_histories = "
                                        r"2,000,000"):
        engine.compile_game(game)
    assert time.monotonic() - start < 10


def test_the_walk_stops_before_the_machine_runs_out_of_memory(monkeypatch):
    """With the machine's available memory all but used (here: as if only a few MiB were
    left), the walk stops at its next look, naming the histories walked and the memory."""
    monkeypatch.setattr(compiler, "available_memory_bytes", lambda: 4 * 2**20)
    monkeypatch.setattr(compiler, "MEMORY_EVERY", 1000)
    real = compiler._resident_bytes
    monkeypatch.setattr(compiler, "_resident_bytes",
                        lambda: real() + (0 if _calls.append(1) or len(_calls) == 1
                                          else 64 * 2**20))
    _calls.clear()
    with pytest.raises(GameError, match=r"leduc_poker'?: after 1,000 histories its walk holds "
                                        r"[\d.]+ GiB, past 80% of the 0.0 GiB this machine had "
                                        r"available"):
        engine.compile_game("leduc_poker")


_calls: list = []


def test_the_config_check_refuses_from_the_estimate_too():
    from neurd.limits import game_size

    start = time.monotonic()
    with pytest.raises(GameError, match="limits.max_histories"):
        game_size("chess", 2_000_000)
    assert time.monotonic() - start < 10
