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
        try:
            game = pyspiel.load_game(game_string)
        except pyspiel.SpielError as error:
            # OpenSpiel's message for an unknown game lists every game: keep line one.
            reason = str(error).splitlines()[0] if str(error) else type(error).__name__
            raise GameError(f"OpenSpiel cannot load game {game_string!r}: {reason}") from None
    if game.get_type().dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS:
        game = pyspiel.convert_to_turn_based(game)
    problems = game_type_problems(game)
    if problems:
        raise GameError(f"game {game_string!r} cannot be compiled: " + "; ".join(problems))
    return game
