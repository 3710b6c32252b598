"""Walk an OpenSpiel game once and store it as arrays (:class:`CompiledGame`).

The walk is depth-first and visits every history once.  Along the way it
keeps each player's current *sequence* (their last own information state
and action), which both gives the sequence form and checks perfect recall:
every history of an information state must share the acting player's
sequence and legal actions, otherwise the game is refused.
"""

from __future__ import annotations

import logging
import os
import time

import numpy as np
import pyspiel

from neurd.games.compiled import CHANCE, NO_INDEX, TERMINAL, CompiledGame
from neurd.games.openspiel import GameError, openspiel_game
from neurd.machine import available_memory_bytes

log = logging.getLogger(__name__)

DEFAULT_MAX_HISTORIES = 2_000_000
# Before the walk, the histories are estimated from random playouts (Knuth's estimator: the
# sum over a playout's depths of the product of the branching factors above, unbiased); a game
# estimated at more than ESTIMATE_MARGIN x max_histories is refused at once (the estimator is
# noisy on unbalanced trees: a game near the cap is walked, and the walk's own count decides).
ESTIMATE_PROBES = 64
ESTIMATE_MARGIN = 100.0
ESTIMATE_MAX_DEPTH = 10_000
# During the walk, the process's memory is looked at every MEMORY_EVERY histories, and the walk
# stops past MEMORY_SHARE of the memory the machine had available when it began.
MEMORY_EVERY = 20_000
MEMORY_SHARE = 0.8


def estimate_histories(game: pyspiel.Game, probes: int = ESTIMATE_PROBES, seed: int = 0
                       ) -> float:
    """Knuth's estimate of the number of histories of ``game`` (turn-based): the mean over
    ``probes`` uniformly random playouts of the sum, over each playout's depths, of the
    product of the branching factors (actions or chance outcomes) above.  ``inf`` where a
    playout passes :data:`ESTIMATE_MAX_DEPTH` edges."""
    rng = np.random.default_rng(seed)
    total = 0.0
    for _ in range(probes):
        state, weight, found = game.new_initial_state(), 1.0, 1.0
        for _ in range(ESTIMATE_MAX_DEPTH):
            if state.is_terminal():
                break
            actions = ([a for a, _ in state.chance_outcomes()] if state.is_chance_node()
                       else state.legal_actions())
            weight *= len(actions)
            found += weight
            state.apply_action(actions[int(rng.integers(len(actions)))])
        else:
            return float("inf")
        total += found
    return total / probes


def _resident_bytes() -> float | None:
    """This process's resident memory (``/proc/self/statm``)."""
    try:
        pages = int(open("/proc/self/statm", encoding="ascii").read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * float(os.sysconf("SC_PAGE_SIZE"))


class _InfostateTable:
    """Information states in order of first visit, with their checks."""

    def __init__(self, with_tensor: bool = True):
        self.with_tensor = with_tensor
        self.index: dict[str, int] = {}
        self.player, self.parent, self.level = [], [], []
        self.legal, self.string, self.tensor = [], [], []

    def visit(self, state, player: int, sequence: tuple[int, int] | None,
              level: int, game_string: str) -> int:
        key = state.information_state_string(player)
        legal = tuple(state.legal_actions(player))
        found = self.index.get(key)
        if found is None:
            found = self.index[key] = len(self.string)
            self.player.append(player)
            self.parent.append(sequence)
            self.level.append(level)
            self.legal.append(legal)
            self.string.append(key)
            self.tensor.append(state.information_state_tensor(player) if self.with_tensor
                               else [])
            return found
        if self.parent[found] != sequence or self.level[found] != level:
            raise GameError(
                f"game {game_string!r} does not have perfect recall: information state "
                f"{key!r} of player {player} is reached after different own actions")
        if self.legal[found] != legal:
            raise GameError(
                f"game {game_string!r}: information state {key!r} has different legal "
                f"actions in different histories ({self.legal[found]} vs {legal})")
        return found


def _walk(game: pyspiel.Game, game_string: str, max_histories: int):
    """Depth-first preorder walk; returns per-history lists and the info-state table.  Stops
    with a :class:`GameError` past ``max_histories`` histories or past :data:`MEMORY_SHARE` of
    the memory available when it began."""
    width = max(game.num_distinct_actions(), game.max_chance_outcomes())
    available, resident = available_memory_bytes(), _resident_bytes()
    memory_cap = None if available is None or resident is None else (
        resident + MEMORY_SHARE * available)
    table = _InfostateTable(game.get_type().provides_information_state_tensor)
    h_parent, h_action, h_player, h_info, h_prob, h_returns = [], [], [], [], [], []
    children: list[list[int]] = []
    terminals = []  # (history, chance reach, sequence of player 0, of player 1)
    # stack entries: state, parent id, action, edge probability, chance reach,
    # each player's sequence (info state, action) or None, each player's level
    stack = [(game.new_initial_state(), NO_INDEX, NO_INDEX, 1.0, 1.0, (None, None), (0, 0))]
    while stack:
        state, parent, action, prob, reach, seqs, levels = stack.pop()
        node = len(h_parent)
        if node >= max_histories:
            raise GameError(f"game {game_string!r} has more than {max_histories} histories; "
                            "pass a larger max_histories (engine.compile_game(..., "
                            "max_histories=N)) to compile it anyway")
        if memory_cap is not None and node % MEMORY_EVERY == 0 and node:
            used = _resident_bytes()
            if used is not None and used > memory_cap:
                raise GameError(
                    f"game {game_string!r}: after {node:,} histories its walk holds "
                    f"{used / 2**30:.1f} GiB, past {MEMORY_SHARE:.0%} of the "
                    f"{available / 2**30:.1f} GiB this machine had available; it is too large "
                    "to compile here")
        h_parent.append(parent)
        h_action.append(action)
        h_prob.append(prob)
        children.append([NO_INDEX] * width)
        if parent != NO_INDEX:
            children[parent][action] = node
        info, returns = NO_INDEX, (0.0, 0.0)
        if state.is_terminal():
            player = TERMINAL
            returns = tuple(state.returns())
            terminals.append((node, reach, seqs[0], seqs[1]))
            pushes = []
        elif state.is_chance_node():
            player = CHANCE
            pushes = [(a, p, reach * p, seqs, levels) for a, p in state.chance_outcomes()]
        else:
            player = state.current_player()
            info = table.visit(state, player, seqs[player], levels[player], game_string)
            pushes = []
            for a in state.legal_actions():
                new_seqs = tuple((info, a) if q == player else seqs[q] for q in (0, 1))
                new_levels = tuple(levels[q] + (q == player) for q in (0, 1))
                pushes.append((a, 1.0, reach, new_seqs, new_levels))
        h_player.append(player)
        h_info.append(info)
        h_returns.append(returns)
        # reversed, so that children are numbered in action order
        for a, p, r, s, lv in reversed(pushes):
            stack.append((state.child(a), node, a, p, r, s, lv))
    histories = (h_parent, h_action, h_player, h_info, h_prob, children, h_returns)
    return histories, table, terminals


def _order(table: _InfostateTable) -> np.ndarray:
    """New position of each info state: by player, then level, then first visit."""
    keys = np.lexsort((np.arange(len(table.player)), table.level, table.player))
    position = np.empty(len(keys), dtype=np.int64)
    position[keys] = np.arange(len(keys))
    return position


def _sequence_arrays(sequences, position: np.ndarray):
    """(info state, action) pairs or None -> two int32 arrays, renumbered."""
    infostate = np.array([NO_INDEX if s is None else position[s[0]] for s in sequences],
                         dtype=np.int32)
    action = np.array([NO_INDEX if s is None else s[1] for s in sequences], dtype=np.int32)
    return infostate, action


def compile_game(game: str | pyspiel.Game,
                 max_histories: int = DEFAULT_MAX_HISTORIES) -> CompiledGame:
    """Compile an OpenSpiel game (string or ``pyspiel.Game``; see :mod:`neurd.games.compiled`).

    Simultaneous-move games are made turn-based first.  A game that provides
    no information-state tensor compiles with empty tensors (``[I, 0]``).
    ``max_histories`` caps the walk (a game with more histories is refused): a game whose
    estimated histories (:func:`estimate_histories`, a fraction of a second) pass it a
    hundredfold is refused before the walk, and the walk stops past the count, or past
    :data:`MEMORY_SHARE` of the memory the machine had available.
    Raises :class:`GameError` for a game the engine cannot solve exactly.
    """
    start = time.perf_counter()
    game_string = str(game)
    game = openspiel_game(game)
    estimate = estimate_histories(game)
    if estimate > ESTIMATE_MARGIN * max_histories:
        raise GameError(f"game {game_string!r} has about {estimate:.3g} histories (estimated "
                        f"from {ESTIMATE_PROBES} random playouts), far more than "
                        f"max_histories = {max_histories:,}; it is refused before its walk "
                        "(engine.compile_game(..., max_histories=N) raises the cap)")
    histories, table, terminals = _walk(game, game_string, max_histories)
    h_parent, h_action, h_player, h_info, h_prob, children, h_returns = histories
    returns = np.asarray(h_returns, dtype=np.float64)
    scale = max(1.0, float(np.abs(returns).max()))
    if np.abs(returns.sum(axis=1)).max() > 1e-12 * scale:
        raise GameError(f"game {game_string!r} declares zero-sum utility but some terminal "
                        "returns do not sum to zero")
    position = _order(table)
    order = np.argsort(position)
    num_actions = game.num_distinct_actions()
    legal = np.zeros((len(order), num_actions), dtype=bool)
    for new, old in enumerate(order):
        legal[new, list(table.legal[old])] = True
    parent_info, parent_action = _sequence_arrays([table.parent[i] for i in order], position)
    h_info = np.asarray(h_info, dtype=np.int64)
    seq0 = _sequence_arrays([t[2] for t in terminals], position)
    seq1 = _sequence_arrays([t[3] for t in terminals], position)
    compiled = CompiledGame(
        game_string=str(game),
        requested=game_string,
        num_actions=num_actions,
        history_parent=np.asarray(h_parent, dtype=np.int32),
        history_action=np.asarray(h_action, dtype=np.int32),
        history_player=np.asarray(h_player, dtype=np.int8),
        history_infostate=np.where(h_info >= 0, position[h_info], NO_INDEX).astype(np.int32),
        history_chance_probability=np.asarray(h_prob, dtype=np.float64),
        history_children=np.asarray(children, dtype=np.int32),
        history_returns=returns,
        infostate_player=np.asarray(table.player, dtype=np.int8)[order],
        infostate_level=np.asarray(table.level, dtype=np.int32)[order],
        infostate_parent=parent_info,
        infostate_parent_action=parent_action,
        infostate_legal=legal,
        infostate_string=np.asarray(table.string, dtype=str)[order],
        infostate_tensor=np.asarray(table.tensor, dtype=np.float64)[order],
        terminal_history=np.asarray([t[0] for t in terminals], dtype=np.int32),
        terminal_chance_reach=np.asarray([t[1] for t in terminals], dtype=np.float64),
        terminal_infostate=np.stack([seq0[0], seq1[0]], axis=1),
        terminal_action=np.stack([seq0[1], seq1[1]], axis=1),
    )
    log.info("compiled %s: %d histories, %d information states %s, %d terminals in %.1fs",
             compiled.game_string, compiled.num_histories, compiled.num_infostates,
             compiled.infostates_per_player, compiled.num_terminals,
             time.perf_counter() - start)
    return compiled


def compile_configured(name: str, game_strings, expected_infostates, section: str
                       ) -> CompiledGame:
    """Compile the game a config section calls ``name``; check its information states.

    ``game_strings``: short name -> OpenSpiel string; ``expected_infostates``:
    short name -> count (games not listed are not checked).  Errors name
    ``<section>.game_strings`` / ``<section>.expected_infostates``.
    """
    if name not in game_strings:
        raise GameError(f"game {name!r} has no entry in config {section}.game_strings "
                        f"{sorted(game_strings)}")
    try:
        compiled = compile_game(game_strings[name])
    except GameError as error:
        raise GameError(f"config key '{section}.game_strings.{name}': {error}") from None
    expected = (expected_infostates or {}).get(name)
    if expected is not None and compiled.num_infostates != expected:
        raise GameError(f"game {name!r} ({compiled.game_string}) has "
                        f"{compiled.num_infostates} information states, config "
                        f"{section}.expected_infostates says {expected}")
    return compiled
