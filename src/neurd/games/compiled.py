"""A game compiled to flat arrays, and its ``.npz`` file format.

:class:`CompiledGame` holds the whole game tree of a two-player zero-sum
game with perfect recall, walked once from OpenSpiel
(:func:`neurd.games.compile.compile_game`):

* **histories** ``[H]`` in depth-first preorder (a parent before its
  children): parent, action from the parent, player (0, 1, :data:`CHANCE`,
  :data:`TERMINAL`), information state, probability chance gave the edge into
  the history, children by action id, terminal returns;
* **information states** ``[I]`` of both players, ordered by player, then by
  level (the number of the player's own earlier actions), then by first
  visit: player, level, the player's previous own (information state,
  action) -- the parent *sequence* of the sequence form --, legal-action
  mask over the ``A`` distinct actions, OpenSpiel string and tensor;
* **terminals** ``[Z]`` (the sequence form): history, chance reach, and each
  player's last own (information state, action) before it.

The file is a plain ``.npz`` (no pickles: load with ``allow_pickle=False``)
with a format name and version; :func:`load` checks both and every array's
dtype and shape, so a stale or foreign file is refused with a message naming
what is wrong.
"""

from __future__ import annotations

import hashlib
import os
import zipfile
from dataclasses import dataclass, fields, replace

import numpy as np

from neurd.tables import atomic_path

FORMAT = "neurd-game"
FORMAT_VERSION = 2  # 2: the game string the config asked for (``requested``)
CHANCE = -1  # history_player of a chance history
TERMINAL = -2  # history_player of a terminal history
NO_INDEX = -1  # "none": the root's parent, a non-decision history's info state, ...


class GameError(ValueError):
    """A game the exact engine refuses, with the reason and the game string."""


class GameFileError(ValueError):
    """A compiled-game file that is not one this version can read."""


@dataclass(frozen=True, eq=False)
class CompiledGame:
    """The arrays of one compiled game; see the module docstring for the layout."""

    game_string: str
    num_actions: int
    history_parent: np.ndarray  # int32 [H]
    history_action: np.ndarray  # int32 [H]
    history_player: np.ndarray  # int8 [H]
    history_infostate: np.ndarray  # int32 [H]
    history_chance_probability: np.ndarray  # float64 [H]
    history_children: np.ndarray  # int32 [H, B], B = max(A, max chance outcomes)
    history_returns: np.ndarray  # float64 [H, 2]
    infostate_player: np.ndarray  # int8 [I]
    infostate_level: np.ndarray  # int32 [I]
    infostate_parent: np.ndarray  # int32 [I]
    infostate_parent_action: np.ndarray  # int32 [I]
    infostate_legal: np.ndarray  # bool [I, A]
    infostate_string: np.ndarray  # str [I]
    infostate_tensor: np.ndarray  # float64 [I, T]
    terminal_history: np.ndarray  # int32 [Z]
    terminal_chance_reach: np.ndarray  # float64 [Z]
    terminal_infostate: np.ndarray  # int32 [Z, 2]
    terminal_action: np.ndarray  # int32 [Z, 2]
    # the string the game was compiled from, as a config gives it (OpenSpiel's own
    # ``game_string`` may spell it otherwise): what a step checks its config against
    requested: str = ""

    def __post_init__(self):
        validate(self)

    @property
    def num_histories(self) -> int:
        return len(self.history_parent)

    @property
    def num_infostates(self) -> int:
        """Information states of both players together (Kuhn 12, Leduc 936)."""
        return len(self.infostate_player)

    @property
    def num_terminals(self) -> int:
        return len(self.terminal_history)

    @property
    def infostates_per_player(self) -> tuple[int, int]:
        return tuple(int(np.sum(self.infostate_player == p)) for p in (0, 1))

    @property
    def terminal_returns(self) -> np.ndarray:
        """``[Z, 2]`` returns of both players at each terminal."""
        return self.history_returns[self.terminal_history]

    @property
    def utility_range(self) -> float:
        """``Delta_u = max_{z,z'} |u(z) - u(z')|`` over both players' returns."""
        u = self.terminal_returns
        return float(np.max(u.max(axis=0) - u.min(axis=0)))


# name -> (dtype kind, number of dimensions, names of the dimensions)
_ARRAYS = {
    "history_parent": ("i", ("H",)),
    "history_action": ("i", ("H",)),
    "history_player": ("i", ("H",)),
    "history_infostate": ("i", ("H",)),
    "history_chance_probability": ("f", ("H",)),
    "history_children": ("i", ("H", "B")),
    "history_returns": ("f", ("H", "2")),
    "infostate_player": ("i", ("I",)),
    "infostate_level": ("i", ("I",)),
    "infostate_parent": ("i", ("I",)),
    "infostate_parent_action": ("i", ("I",)),
    "infostate_legal": ("b", ("I", "A")),
    "infostate_string": ("U", ("I",)),
    "infostate_tensor": ("f", ("I", "T")),
    "terminal_history": ("i", ("Z",)),
    "terminal_chance_reach": ("f", ("Z",)),
    "terminal_infostate": ("i", ("Z", "2")),
    "terminal_action": ("i", ("Z", "2")),
}


def validate(game: CompiledGame) -> None:
    """Check dtypes, shapes and index ranges; raise :class:`GameFileError`."""
    sizes = {"2": 2, "A": game.num_actions}
    for name, (kind, dims) in _ARRAYS.items():
        array = getattr(game, name)
        if not isinstance(array, np.ndarray) or array.dtype.kind != kind:
            raise GameFileError(f"{name}: expected a numpy array of kind {kind!r}, "
                                f"got {type(array).__name__} {getattr(array, 'dtype', '')}")
        if array.ndim != len(dims):
            raise GameFileError(f"{name}: expected {len(dims)} dimensions {dims}, "
                                f"got shape {array.shape}")
        for dim, size in zip(dims, array.shape):
            if sizes.setdefault(dim, size) != size:
                raise GameFileError(f"{name}: dimension {dim} is {size}, other arrays say "
                                    f"{sizes[dim]} (shape {array.shape})")
    _check_range(game.history_parent, -1, sizes["H"], "history_parent")
    _check_range(game.history_infostate, -1, sizes["I"], "history_infostate")
    _check_range(game.history_children, -1, sizes["H"], "history_children")
    _check_range(game.infostate_player, 0, 2, "infostate_player")
    _check_range(game.infostate_parent, -1, sizes["I"], "infostate_parent")
    _check_range(game.infostate_parent_action, -1, game.num_actions, "infostate_parent_action")
    _check_range(game.terminal_history, 0, sizes["H"], "terminal_history")
    _check_range(game.terminal_infostate, -1, sizes["I"], "terminal_infostate")
    _check_range(game.terminal_action, -1, game.num_actions, "terminal_action")
    if sizes["B"] < game.num_actions:
        raise GameFileError(f"history_children has {sizes['B']} columns, fewer than the "
                            f"{game.num_actions} actions")


def _check_range(array: np.ndarray, low: int, high: int, name: str) -> None:
    if array.size and (array.min() < low or array.max() >= high):
        raise GameFileError(f"{name}: values must lie in [{low}, {high}), "
                            f"got [{array.min()}, {array.max()}]")


def save(game: CompiledGame, path: str | os.PathLike) -> None:
    """Write ``game`` to ``path`` (``.npz``), atomically."""
    arrays = {f.name: getattr(game, f.name) for f in fields(game)}
    arrays["game_string"] = np.array(game.game_string)
    arrays["requested"] = np.array(game.requested)
    arrays["num_actions"] = np.array(game.num_actions, dtype=np.int64)
    arrays["format"] = np.array(FORMAT)
    arrays["format_version"] = np.array(FORMAT_VERSION, dtype=np.int64)
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        np.savez_compressed(handle, **arrays)


def load(path: str | os.PathLike) -> CompiledGame:
    """Read a game written by :func:`save`; checks format, version, dtypes, shapes."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
    except FileNotFoundError:
        raise
    except (zipfile.BadZipFile, EOFError, OSError, ValueError, KeyError) as error:
        raise GameFileError(f"{path} cannot be read ({type(error).__name__}: {error}); it is "
                            "truncated or corrupt: delete it and rerun, and Snakemake compiles "
                            "the game again") from None
    fmt = str(arrays.pop("format", ""))
    version = int(arrays.pop("format_version", -1))
    if fmt != FORMAT:
        raise GameFileError(f"{path}: not a compiled game (format {fmt!r}, expected {FORMAT!r})")
    if version != FORMAT_VERSION:
        raise GameFileError(f"{path}: format version {version}, this neurd reads "
                            f"{FORMAT_VERSION}; recompile the game")
    expected = {f.name for f in fields(CompiledGame)}
    missing, unexpected = sorted(expected - set(arrays)), sorted(set(arrays) - expected)
    if missing or unexpected:
        raise GameFileError(f"{path}: arrays missing {missing}, unexpected {unexpected}")
    arrays["game_string"] = str(arrays["game_string"])
    arrays["requested"] = str(arrays["requested"])
    arrays["num_actions"] = int(arrays["num_actions"])
    try:
        return CompiledGame(**arrays)
    except GameFileError as error:
        raise GameFileError(f"{path}: {error}") from None


def content_hash(game: CompiledGame) -> str:
    """First 16 hex digits of a SHA-256 over every field of ``game`` (name, dtype, shape and
    bytes of each array): the same game compiled on any machine has the same hash."""
    digest = hashlib.sha256()
    for f in sorted(fields(game), key=lambda f: f.name):
        value = np.asarray(getattr(game, f.name))
        digest.update(f"{f.name}:{value.dtype.str}:{value.shape}:".encode())
        digest.update(np.ascontiguousarray(value).tobytes())
    return digest.hexdigest()[:16]


def load_configured(path: str | os.PathLike, name: str, game_strings, section: str
                    ) -> CompiledGame:
    """:func:`load`, then check that the file is the game config ``<section>.game_strings``
    calls ``name``; else :class:`GameFileError` naming the file and the key."""
    game = load(path)
    expected = dict(game_strings).get(name)
    if expected is None:
        raise GameFileError(f"{path}: game {name!r} has no entry in config "
                            f"{section}.game_strings {sorted(game_strings)}")
    if game.requested != expected:
        raise GameFileError(f"{path} is the compiled game {game.requested!r}, but config key "
                            f"'{section}.game_strings.{name}' is {expected!r}: give the file "
                            "compiled from that key (or delete it, and Snakemake compiles it "
                            "again)")
    return game


def negated(game: CompiledGame) -> CompiledGame:
    """The same game with every payoff negated (Fig 6's even phases)."""
    return replace(game, history_returns=-game.history_returns,
                   game_string=f"negated({game.game_string})")
