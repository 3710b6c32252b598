"""The sequence form of a compiled game, as JAX arrays, and its two sweeps.

Each player ``i`` sees the game as a tree of their own information states
``s`` and *sequences* ``(s, a)``: the last own information state and action
before a history (von Stengel 1996; Koller, Megiddo & von Stengel 1994).
Perfect recall makes the parent sequence of every information state unique.
A behavioural policy ``pi_i`` gives the **realization plan**
``x_i(s, a) = x_i(parent(s)) pi_i(a|s)`` (the player's own reach times the
policy, ``rho_i(s) pi_i(a|s)`` in the paper), and the game's value is a
bilinear form over terminals ``z``:

    v_0 = sum_z c(z) u_0(z) x_0(seq_0(z)) x_1(seq_1(z)),

with ``c(z)`` the chance reach.  The **counterfactual value** of a sequence
(the paper's ``beta_{-i}(s) q_i(s, a)``, Section 4) is then one bottom-up
sweep over player ``i``'s own tree:

    Q_i(s, a) = g_i(s, a) + sum_{s' after (s, a)} V_i(s'),  V_i(s) = sum_a pi_i(a|s) Q_i(s, a),
    g_i(sigma) = sum_{z: seq_i(z) = sigma} c(z) u_i(z) x_{-i}(seq_{-i}(z)),

and a best response replaces the policy-weighted sum by a max over legal
actions.  Both sweeps run level by level (a level holds the information
states after the same number of own actions); levels are contiguous slices,
so each is a gather or a segment sum of static size.

Sequence numbering of player ``i``: ``(s, a) -> local(s) * A + a`` for the
``I_i`` information states of player ``i`` in the compiled order, and the
empty sequence last, at ``I_i * A``.  Policies are ``[I, A]`` arrays over the
information states of both players (player 0's rows first), zero at illegal
actions.  Every function here is pure and ``vmap``-able over policies.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from neurd.games import CompiledGame
from neurd.precision import float64


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class PlayerTree:
    """One player's information states and sequences, level by level.

    ``parent_in_level[s]``: position of the parent sequence of ``s`` in the
    flattened ``[n_{d-1} * A]`` block of the previous level (0 at level 0,
    whose parent is the empty sequence).
    """

    legal: jax.Array  # bool [I_i, A]
    parent_in_level: jax.Array  # int32 [I_i]
    num_infostates: int = field(metadata=dict(static=True))
    offset: int = field(metadata=dict(static=True))  # first global info state index
    level_bounds: tuple[int, ...] = field(metadata=dict(static=True))  # [L + 1]

    @property
    def num_sequences(self) -> int:
        """Sequences including the empty one: ``I_i * A + 1``."""
        return self.num_infostates * self.legal.shape[1] + 1

    def levels(self):
        """``(start, stop)`` local index ranges of the levels, root level first."""
        return list(zip(self.level_bounds[:-1], self.level_bounds[1:]))


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class SequenceForm:
    """Both players' trees and the chance-weighted terminal payoffs.

    ``terminal_sequence[i, k]``: player ``i``'s sequence at terminal entry
    ``k``; ``terminal_payoff[k] = c(z) u_0(z)`` (player 1 gets its negative:
    the game is zero-sum).
    """

    players: tuple[PlayerTree, PlayerTree]
    terminal_sequence: jax.Array  # int32 [2, Z]
    terminal_payoff: jax.Array  # float64 [Z]
    num_actions: int = field(metadata=dict(static=True))

    @property
    def num_infostates(self) -> int:
        return sum(p.num_infostates for p in self.players)

    @property
    def legal(self) -> jax.Array:
        """``[I, A]`` legal-action mask of every information state."""
        return jnp.concatenate([p.legal for p in self.players])


def _player_tree(game: CompiledGame, player: int) -> PlayerTree:
    """The tree of ``player`` from the compiled arrays."""
    ids = np.flatnonzero(game.infostate_player == player)
    offset, count = (int(ids[0]) if len(ids) else 0), len(ids)
    if not np.array_equal(ids, offset + np.arange(count)):
        raise ValueError("compiled game: a player's information states must be contiguous")
    level = game.infostate_level[ids]
    if np.any(np.diff(level) < 0):
        raise ValueError("compiled game: information states must be sorted by level")
    bounds = np.searchsorted(level, np.arange(level.max() + 2 if count else 1))
    starts = bounds[np.clip(level - 1, 0, None)]  # local start of each parent's level
    parent = game.infostate_parent[ids] - offset
    action = game.infostate_parent_action[ids]
    A = game.num_actions
    parent_in_level = np.where(level > 0, (parent - starts) * A + action, 0)
    return PlayerTree(
        legal=jnp.asarray(game.infostate_legal[ids]),
        parent_in_level=jnp.asarray(parent_in_level, dtype=jnp.int32),
        num_infostates=count, offset=offset,
        level_bounds=tuple(int(b) for b in bounds),
    )


def _terminal_sequences(game: CompiledGame, trees) -> np.ndarray:
    """``[2, Z]`` flat local sequence index of each player at each terminal."""
    A = game.num_actions
    columns = []
    for player, tree in enumerate(trees):
        info = game.terminal_infostate[:, player]
        flat = (info - tree.offset) * A + game.terminal_action[:, player]
        columns.append(np.where(info >= 0, flat, tree.num_infostates * A))
    return np.stack(columns).astype(np.int32)


@float64
def sequence_form(game: CompiledGame) -> SequenceForm:
    """The JAX layout of a compiled game (one pass of NumPy, no tree walk).

    Terminals that share both players' sequences (possible when chance moves
    after both players' last actions) are merged by summing their
    chance-weighted payoffs, so the terminal sweep touches each cell of the
    sparse sequence-form payoff matrix once.  In the paper's three games every
    terminal is its own cell (Kuhn 30, Leduc 5520, Goofspiel 14400).
    """
    trees = tuple(_player_tree(game, p) for p in (0, 1))
    sequences = _terminal_sequences(game, trees)
    payoff = game.terminal_chance_reach * game.terminal_returns[:, 0]
    cells, inverse = np.unique(sequences, axis=1, return_inverse=True)
    merged = np.zeros(cells.shape[1])
    np.add.at(merged, inverse.ravel(), payoff)
    return SequenceForm(
        players=trees,
        terminal_sequence=jnp.asarray(cells, dtype=jnp.int32),
        terminal_payoff=jnp.asarray(merged, dtype=jnp.float64),
        num_actions=game.num_actions,
    )


def split(policy: jax.Array, form: SequenceForm) -> tuple[jax.Array, jax.Array]:
    """``[I, A]`` policy of both players -> (player 0's rows, player 1's rows)."""
    first = form.players[0].num_infostates
    return policy[..., :first, :], policy[..., first:, :]


def realization_plan(tree: PlayerTree, pi: jax.Array) -> jax.Array:
    """``x_i``: own reach times policy of every sequence, ``[I_i, A] -> [I_i*A + 1]``.

    Top-down: ``x(s, a) = x(parent(s)) pi(a|s)``; the empty sequence has 1.
    """
    blocks, previous = [], None
    for start, stop in tree.levels():
        if previous is None:
            block = pi[start:stop]
        else:
            block = previous[tree.parent_in_level[start:stop], None] * pi[start:stop]
        blocks.append(block)
        previous = block.reshape(-1)
    blocks.append(jnp.ones((1,), pi.dtype))
    return jnp.concatenate([b.reshape(-1) for b in blocks])


def terminal_values(form: SequenceForm, player: int, x_other: jax.Array) -> jax.Array:
    """``g_i``: chance- and opponent-weighted payoff per own sequence, ``[I_i*A + 1]``."""
    own = form.terminal_sequence[player]
    other = form.terminal_sequence[1 - player]
    sign = 1.0 if player == 0 else -1.0
    contributions = sign * form.terminal_payoff * x_other[other]
    return jax.ops.segment_sum(contributions, own,
                               num_segments=form.players[player].num_sequences)


def counterfactual_values(tree: PlayerTree, pi: jax.Array, g: jax.Array,
                          best_response: bool = False):
    """Bottom-up sweep: ``Q_i [I_i, A]``, ``V_i [I_i]`` and the root value.

    ``Q_i(s, a) = beta_{-i}(s) q_i(s, a)`` and ``V_i(s) = beta_{-i}(s) v_i(s)``
    (paper, Section 4); with ``best_response`` the player maximises over
    legal actions instead of following ``pi``, and ``V_i`` is the
    counterfactual best-response value.
    """
    A = tree.legal.shape[1]
    q_blocks, v_blocks, below = [], [], None
    for start, stop in reversed(tree.levels()):
        q = g[start * A:stop * A].reshape(stop - start, A)
        if below is not None:
            q = q + below
        if best_response:
            v = jnp.max(jnp.where(tree.legal[start:stop], q, -jnp.inf), axis=-1)
        else:
            v = jnp.sum(pi[start:stop] * q, axis=-1)
        q_blocks.append(q)
        v_blocks.append(v)
        if start > 0:
            parent_start, _ = _previous_level(tree, start)
            below = jax.ops.segment_sum(
                v, tree.parent_in_level[start:stop], num_segments=(start - parent_start) * A
            ).reshape(start - parent_start, A)
    root = g[-1] + (jnp.sum(v_blocks[-1]) if v_blocks else 0.0)
    q_all = jnp.concatenate(q_blocks[::-1]) if q_blocks else jnp.zeros((0, A), g.dtype)
    v_all = jnp.concatenate(v_blocks[::-1]) if v_blocks else jnp.zeros((0,), g.dtype)
    return q_all, v_all, root


def _previous_level(tree: PlayerTree, start: int) -> tuple[int, int]:
    index = tree.level_bounds.index(start)
    return tree.level_bounds[index - 1], start
