"""OpenSpiel games compiled once into flat arrays (``.npz``, no pickles).

* :func:`compile_game` walks an OpenSpiel game and returns a
  :class:`CompiledGame`;
* :func:`save` / :func:`load` write and read it (format name and version
  checked on load);
* :data:`PAPER_GAMES` are the three games of the paper with the number of
  information states (both players together) the paper states.
"""

from neurd.games.compile import DEFAULT_MAX_HISTORIES, compile_game
from neurd.games.compiled import (
    CHANCE,
    FORMAT,
    FORMAT_VERSION,
    NO_INDEX,
    TERMINAL,
    CompiledGame,
    GameFileError,
    load,
    save,
)
from neurd.games.openspiel import GameError, load_game

# The paper's games (Section 5) and their information-state counts.  Goofspiel
# with the default points_order=random has 236,450 information states; the
# paper's 2124 is the descending point order, made turn-based.
PAPER_GAMES = {
    "kuhn_poker": ("kuhn_poker", 12),
    "leduc_poker": ("leduc_poker", 936),
    "goofspiel": ("goofspiel(num_cards=5,imp_info=True,points_order=descending)", 2124),
}

__all__ = [
    "CHANCE", "DEFAULT_MAX_HISTORIES", "FORMAT", "FORMAT_VERSION", "NO_INDEX", "PAPER_GAMES",
    "TERMINAL", "CompiledGame", "GameError", "GameFileError", "compile_game", "load",
    "load_game", "save",
]
