"""Tabular policies as ``[I, A]`` arrays: checks, random draws, OpenSpiel conversion.

A policy of a compiled game is an array ``[I, A]`` over the information
states of both players in the compiled order (player 0's first), with
``pi[s, a] >= 0``, zero at illegal actions and rows summing to one.
OpenSpiel keys policies by information-state string; :func:`to_openspiel`
and :func:`from_openspiel` convert, so any policy can be checked against
``pyspiel.nash_conv`` and OpenSpiel's solvers can be evaluated here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from neurd.games import CompiledGame

NORMALIZATION_TOLERANCE = 1e-9


def check_policy(game, policy) -> np.ndarray:
    """``policy`` as a float64 array, or ``ValueError`` naming what is wrong.

    ``game``: a :class:`CompiledGame` (errors then name the information
    state) or a :class:`~neurd.tabular.sequence_form.SequenceForm`.
    Accepts ``[I, A]`` or a batch ``[N, I, A]``.
    """
    array = np.asarray(policy, dtype=np.float64)
    if isinstance(game, CompiledGame):
        legal, strings = game.infostate_legal, game.infostate_string
    else:
        legal, strings = np.asarray(game.legal), None
    if array.ndim not in (2, 3) or array.shape[-2:] != legal.shape:
        raise ValueError(f"policy must have shape {legal.shape} (or [N, *{legal.shape}]), "
                         f"got {array.shape}")
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        raise ValueError("policy has negative or non-finite probabilities")
    illegal = np.broadcast_to(~legal, array.shape)
    if np.any(array[illegal] != 0):
        index = np.argwhere(illegal & (array != 0))[0]
        where = "" if strings is None else f" (information state {strings[index[-2]]!r})"
        raise ValueError(f"policy puts probability on an illegal action at index "
                         f"{tuple(int(i) for i in index)}{where}")
    sums = array.sum(axis=-1)
    if np.any(np.abs(sums - 1) > NORMALIZATION_TOLERANCE):
        index = np.unravel_index(np.argmax(np.abs(sums - 1)), sums.shape)
        raise ValueError(f"policy rows must sum to 1; row {index} sums to {sums[index]}")
    return array


def random_policies(game: CompiledGame, num: int, seed: int) -> np.ndarray:
    """``[num, I, A]`` policies drawn uniformly from each information state's simplex.

    Uniform on the simplex of legal actions = Dirichlet(1, ..., 1), drawn as
    normalised exponentials with ``numpy.random.default_rng(seed)``.
    """
    rng = np.random.default_rng(seed)
    weights = rng.exponential(size=(num, game.num_infostates, game.num_actions))
    weights *= game.infostate_legal
    return weights / weights.sum(axis=-1, keepdims=True)


def to_openspiel(game: CompiledGame, policy) -> dict[str, list[tuple[int, float]]]:
    """``{information state string: [(action, probability), ...]}`` for pyspiel.

    Feeds ``pyspiel.nash_conv(game, table)`` or ``pyspiel.TabularPolicy(table)``.
    """
    array = check_policy(game, policy)
    if array.ndim != 2:
        raise ValueError("to_openspiel converts one policy [I, A], not a batch")
    table = {}
    for row, key, legal in zip(array, game.infostate_string, game.infostate_legal):
        actions = np.flatnonzero(legal)
        table[str(key)] = [(int(a), float(row[a])) for a in actions]
    return table


def _states_by_infostate(openspiel_game, wanted: set[str]) -> dict:
    """A state of every wanted information state, found by walking the OpenSpiel game."""
    found, stack = {}, [openspiel_game.new_initial_state()]
    while stack and len(found) < len(wanted):
        state = stack.pop()
        if state.is_terminal():
            continue
        if not state.is_chance_node():
            key = state.information_state_string(state.current_player())
            if key in wanted:
                found.setdefault(key, state)
        actions = ([a for a, _ in state.chance_outcomes()] if state.is_chance_node()
                   else state.legal_actions())
        stack.extend(state.child(a) for a in actions)
    return found


def from_openspiel(game: CompiledGame, policy) -> np.ndarray:
    """``[I, A]`` array of an OpenSpiel policy.

    ``policy``: a table dict ``{information state string: [(action, probability)]}``,
    a ``pyspiel.Policy`` (``pyspiel.TabularPolicy``, a C++ solver's average
    policy; asked through ``get_state_policy(string)``), or a Python
    ``open_spiel.python.policy.Policy`` (``TabularPolicy``, ``UniformRandomPolicy``,
    a solver's policy; asked through ``action_probabilities(state)`` at a state
    of each information state, found in ``policy.game``).  Every information
    state of the game must be covered.
    """
    from open_spiel.python import policy as python_policy

    array = np.zeros((game.num_infostates, game.num_actions))
    keys = [str(key) for key in game.infostate_string]
    states = None
    if isinstance(policy, python_policy.Policy):
        states = _states_by_infostate(policy.game, set(keys))
    for index, key in enumerate(keys):
        if isinstance(policy, Mapping):
            if key not in policy:
                raise ValueError(f"policy has no entry for information state {key!r}")
            entries = policy[key]
        elif states is not None:
            if key not in states:
                raise ValueError(f"information state {key!r} does not occur in the policy's "
                                 f"game {policy.game}")
            entries = policy.action_probabilities(states[key]).items()
        else:
            entries = policy.get_state_policy(key)
        for action, probability in entries:
            array[index, action] = probability
    return check_policy(game, array)
