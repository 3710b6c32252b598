"""OpenSpiel games compiled once into flat arrays (``.npz``, no pickles).

* :func:`compile_game` walks an OpenSpiel game and returns a
  :class:`CompiledGame`;
* :func:`save` / :func:`load` write and read it (format name and version
  checked on load);
* :func:`openspiel_game` loads the OpenSpiel game itself (turn-based), the
  one the compiler walks and the reference solvers run on.

The paper's three games, their strings and information-state counts are
:data:`neurd.names.GAMES`.
"""

from neurd.games.compile import DEFAULT_MAX_HISTORIES, compile_configured, compile_game
from neurd.games.compiled import (
    CHANCE,
    FORMAT,
    FORMAT_VERSION,
    NO_INDEX,
    TERMINAL,
    CompiledGame,
    GameFileError,
    load,
    negated,
    save,
)
from neurd.games.openspiel import GameError, openspiel_game

__all__ = [
    "CHANCE", "DEFAULT_MAX_HISTORIES", "FORMAT", "FORMAT_VERSION", "NO_INDEX", "TERMINAL",
    "CompiledGame", "GameError", "GameFileError", "compile_configured", "compile_game", "load",
    "negated", "openspiel_game",
    "save",
]
