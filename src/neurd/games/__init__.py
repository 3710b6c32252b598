"""OpenSpiel games compiled once into flat arrays (``.npz``, no pickles).

* :func:`compile_game` walks an OpenSpiel game and returns a
  :class:`CompiledGame`;
* :func:`save` / :func:`load` write and read it (format name and version
  checked on load);
* :func:`openspiel_game` loads the OpenSpiel game itself (turn-based), the
  one the compiler walks and the reference solvers run on.

The paper's three games, their strings and information-state counts are
:data:`neurd.names.GAMES`.

Loading a compiled game needs no OpenSpiel: the names that walk or load an
OpenSpiel game import it on first use, so a GPU node with only the runtime
packages (JAX, flax, optax, pandas, pyarrow) runs the neural jobs from the
compiled ``.npz`` files.
"""

import importlib

from neurd.games.compiled import (
    CHANCE,
    FORMAT,
    FORMAT_VERSION,
    NO_INDEX,
    TERMINAL,
    CompiledGame,
    GameError,
    GameFileError,
    content_hash,
    load,
    load_configured,
    negated,
    save,
)

_LAZY = {
    "DEFAULT_MAX_HISTORIES": "neurd.games.compile",
    "compile_configured": "neurd.games.compile",
    "compile_game": "neurd.games.compile",
    "openspiel_game": "neurd.games.openspiel",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "CHANCE", "DEFAULT_MAX_HISTORIES", "FORMAT", "FORMAT_VERSION", "NO_INDEX", "TERMINAL",
    "CompiledGame", "GameError", "GameFileError", "compile_configured", "compile_game",
    "content_hash", "load", "load_configured", "negated", "openspiel_game",
    "save",
]
