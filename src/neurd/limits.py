"""What a run will compute, allocate, write and ask a scheduler for, bounded before any job.

Each number of a config is bounded by its schema; their products are not: a
config of in-range values can still ask for tables of 10^10 rows, networks
that do not fit in memory, a game far too large to compile or a runtime of
10^300 minutes.  The stages' ``inspect`` hooks (:class:`neurd.stage.Stage`)
estimate each of these from the config and the games it names and compare it
with the top-level ``limits`` setting; a message gives the estimate, the cap
and the keys the estimate is made of.  They run when a config is validated
(the Snakefile, ``neurd check-config``), so a refusal comes before any job.

The games are loaded and walked here (OpenSpiel), once per game string and
process: type, players, zero-sum, dynamics (:func:`neurd.games.openspiel.openspiel_game`),
size against ``limits.max_histories`` (counted before anything is built),
perfect recall and the information-state count (the compiler's own checks).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from neurd.config import ConfigError, require
from neurd.games.compiled import GameError

MB = 2**20


@dataclass(frozen=True)
class GameSize:
    """What the estimates need to know of a compiled game."""

    histories: int
    infostates: int
    legal_pairs: int  # (information state, legal action) pairs
    actions: int  # A: distinct actions
    width: int  # B: children per history (max of A and the chance outcomes)
    tensor_size: int  # information-state tensor length (0: the game provides none)
    depth: int  # edges of the longest history


class _TooLarge(Exception):
    pass


def _count_histories(game, cap: int) -> int:
    """Histories of ``game`` (a turn-based ``pyspiel.Game``), stopping past ``cap``."""
    count, stack = 0, [game.new_initial_state()]
    while stack:
        state = stack.pop()
        count += 1
        if count > cap:
            raise _TooLarge
        if state.is_terminal():
            continue
        actions = ([a for a, _ in state.chance_outcomes()] if state.is_chance_node()
                   else state.legal_actions())
        stack.extend(state.child(a) for a in actions)
    return count


@lru_cache(maxsize=64)
def game_size(game_string: str, max_histories: int) -> GameSize:
    """Load, count and compile ``game_string``; :class:`neurd.games.GameError` if it cannot be
    used or has more than ``max_histories`` histories (counted before it is compiled)."""
    from neurd.games.compile import ESTIMATE_MARGIN, compile_game, estimate_histories
    from neurd.games.openspiel import openspiel_game

    game = openspiel_game(game_string)
    estimate = estimate_histories(game)
    if estimate > ESTIMATE_MARGIN * max_histories:
        raise GameError(f"game {game_string!r} has about {estimate:.3g} histories (estimated "
                        f"from random playouts), far more than {max_histories:,} "
                        "(limits.max_histories); raise that limit to run it")
    try:
        _count_histories(game, max_histories)
    except _TooLarge:
        raise GameError(f"game {game_string!r} has more than {max_histories:,} histories "
                        f"(limits.max_histories); raise that limit to run it") from None
    return size_of(compile_game(game, max_histories=max_histories + 1))


def size_of(compiled) -> GameSize:
    """What the estimates need to know of a compiled game (a :class:`CompiledGame`)."""
    parent = compiled.history_parent
    depth = np.zeros(len(parent), np.int64)
    for h in range(1, len(parent)):  # preorder: a parent comes before its children
        depth[h] = depth[parent[h]] + 1
    tensor = compiled.infostate_tensor
    return GameSize(histories=len(parent), infostates=int(compiled.num_infostates),
                    legal_pairs=int(compiled.infostate_legal.sum()),
                    actions=int(compiled.num_actions),
                    width=int(compiled.history_children.shape[1]),
                    tensor_size=int(tensor.shape[1]) if tensor.ndim == 2 else 0,
                    depth=int(depth.max()))


def check_games(section: str, cfg: Mapping, limits: Mapping, need_tensor: bool = False
                ) -> dict[str, GameSize]:
    """Every game of ``cfg["games"]``: loadable, usable and within ``limits.max_histories``,
    with the information-state count of ``expected_infostates``; errors name the key."""
    sizes = {}
    for name in cfg["games"]:
        key = f"{section}.game_strings.{name}"
        try:
            size = game_size(cfg["game_strings"][name], int(limits["max_histories"]))
        except GameError as error:
            raise ConfigError(f"config key '{key}': {error}") from None
        expected = (cfg.get("expected_infostates") or {}).get(name)
        require(expected is None or expected == size.infostates,
                f"{section}.expected_infostates.{name}",
                f"is {expected}, but {cfg['game_strings'][name]!r} ({key}) has "
                f"{size.infostates} information states")
        require(not need_tensor or size.tensor_size > 0, key,
                f"{cfg['game_strings'][name]!r} provides no information-state tensor, the "
                "networks' input")
        sizes[name] = size
    return sizes


def within(estimate: float, limits: Mapping, cap: str, key: str, what: str,
           unit: str = "") -> None:
    """Refuse, naming ``key``, when ``estimate`` exceeds ``limits[cap]``."""
    bound = limits[cap]
    require(estimate <= bound, key,
            f"{what} is {estimate:,.0f}{unit}, more than limits.{cap} = {bound:,}{unit}: lower "
            f"it, or raise limits.{cap} if the machine can take it")


def mlp_parameters(sizes) -> int:
    """Weights and biases of a dense network with layer widths ``sizes``."""
    sizes = list(sizes)
    return int(sum(a * b + b for a, b in zip(sizes[:-1], sizes[1:])))
