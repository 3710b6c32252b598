"""Loading an OpenSpiel game and refusing the ones the exact engine cannot solve.

The engine needs a finite two-player zero-sum game with perfect recall whose
chance outcomes can be enumerated and whose information states have an
OpenSpiel string.  The information-state tensor is kept where the game
provides one (the neural stage feeds it to networks and refuses a game
without it); exact evaluation and CFR do not need it.  Simultaneous-move games
are accepted and turned into turn-based ones with ``pyspiel.convert_to_turn_based``,
as the paper does for Goofspiel.
Perfect recall is not part of OpenSpiel's game type; the compiler checks it
while it walks the tree (:mod:`neurd.games.compile`).
"""

from __future__ import annotations

import contextlib
import difflib
import os
import sys

import pyspiel

from neurd.games.compiled import GameError  # noqa: F401  (raised here; defined without pyspiel)


def game_type_problems(game: pyspiel.Game) -> list[str]:
    """Why ``game`` (already turn-based) cannot be compiled; empty when it can."""
    kind = game.get_type()
    problems = []
    if game.num_players() != 2:
        problems.append(f"it has {game.num_players()} players, the engine needs 2")
    if kind.utility != pyspiel.GameType.Utility.ZERO_SUM:
        problems.append(f"its utility is {kind.utility.name}, the engine needs ZERO_SUM")
    if kind.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
        problems.append(f"its dynamics are {kind.dynamics.name}, the engine needs SEQUENTIAL "
                        "(or SIMULTANEOUS, converted to turn-based)")
    if kind.chance_mode == pyspiel.GameType.ChanceMode.SAMPLED_STOCHASTIC:
        problems.append("its chance outcomes are sampled, not enumerable (SAMPLED_STOCHASTIC)")
    if not kind.provides_information_state_string:
        problems.append("it does not provide information_state_string")
    return problems


def openspiel_game(game: str | pyspiel.Game) -> pyspiel.Game:
    """The OpenSpiel game (a game string or a loaded ``pyspiel.Game``), turn-based, checked.

    Raises :class:`GameError` naming the game and every reason it is refused.
    """
    if isinstance(game, pyspiel.Game):
        game_string = str(game)
    elif not isinstance(game, str) or not game.strip():
        raise GameError(f"game must be a non-empty game string or a pyspiel.Game, got {game!r}")
    else:
        game_string = game
        _check_registered(game_string)
        try:
            with _quiet_stderr():  # OpenSpiel's C++ also prints each error to stderr
                game = pyspiel.load_game(game_string)
        except pyspiel.SpielError as error:
            reason = " ".join(str(error).splitlines()[:1]) or type(error).__name__
            raise GameError(f"OpenSpiel cannot load game {game_string!r}: {reason}") from None
    if game.get_type().dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS:
        game = pyspiel.convert_to_turn_based(game)
    problems = game_type_problems(game)
    if problems:
        raise GameError(f"game {game_string!r} cannot be compiled: " + "; ".join(problems))
    return game


def _check_registered(game_string: str) -> None:
    """Refuse a game name OpenSpiel does not register, in one line with the closest names
    (OpenSpiel's own message lists all of its games, one a line)."""
    name = game_string.split("(", 1)[0].strip()
    registered = pyspiel.registered_names()
    if name not in registered:
        close = difflib.get_close_matches(name, registered, n=3, cutoff=0.5)
        raise GameError(f"OpenSpiel cannot load game {game_string!r}: it has no game {name!r}; "
                        f"the closest registered names: {', '.join(map(repr, close)) or 'none'}")


@contextlib.contextmanager
def _quiet_stderr():
    """File descriptor 2 sent to the null device for the duration (what the C++ prints)."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no descriptor 2 to silence
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
