"""Exact evaluation on the history tree: reach top-down, values bottom-up, rewards on edges.

The sequence form (:mod:`~neurd.tabular.sequence_form`) pays at terminals only.
The neural stage's entropy-regularised game (Perolat et al. 2020, "From
Poincaré Recurrence to Convergence in Imperfect Information Games") also pays
at every decision: when player ``k`` takes action ``a`` at information state
``x`` under policy ``pi`` with reference policy ``mu`` (uniform over the legal
actions), player ``i`` receives

    r_i = -eta log(pi(a|x) / mu(a|x))   if i == k,     r_i = +eta log(pi(a|x) / mu(a|x))   else,

so the game stays zero-sum.  This module evaluates a policy on the compiled
game's histories directly, every quantity exact and ``vmap``-able over
policies:

* ``reach(h)``: the product of chance and policy probabilities on the path
  to ``h``, computed top-down (one gather per depth level);
* ``V_0(h)``: player 0's expected return below ``h``, edge rewards included,
  computed bottom-up (one gather over the children per depth level);
* per information state ``x`` of player ``i``: its visit probability, and the
  action values ``q_i(x, a) = sum_{h in x} beta(h) [r_i(h, a) + V_i(ha)] /
  sum_{h in x} beta(h)``, where ``beta(h)`` is the reach of ``h`` by chance and
  the opponent (perfect recall makes the player's own reach the same for
  every ``h`` in ``x``).  ``continuation`` is ``q`` without the acting player's
  own term ``-eta log(pi(a|x)/mu(a|x))``: what a critic of the return after
  ``(x, a)`` learns.

``sign`` multiplies the terminal payoffs only (the negated game of Fig 6's
second phase), never the regularisation terms.

Shapes: ``H`` histories, ``I`` information states, ``A`` actions, ``B``
child slots (``max(A, chance outcomes)``); a policy is ``[I, A]``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from neurd.games import CHANCE, NO_INDEX, TERMINAL, CompiledGame

# The regularisation reward -eta log(pi(a|x)/mu(a|x)) of an action of probability 0 is
# +infinity.  Learner and exact evaluation both floor pi there, at the same value: 1e-30,
# below any probability a float32 policy carries short of underflow (a reward of at most
# eta (69 + log |A(x)|)).  The floor only matters at a legal action of probability 0
# (underflowed), whose edge then adds nothing to any value (its reach is 0) but whose
# action value q(x, a) is the one the learner pushes on, for learned and exact critic alike.
PI_FLOOR = 1e-30


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class HistoryTree:
    """A compiled game's histories as arrays for exact evaluation and sampling.

    Per history: ``parent`` (the root is its own parent), ``action`` from the
    parent where the parent is a decision (0 elsewhere: a chance outcome may
    exceed the policy's ``A`` columns, and every index here stays in range),
    ``parent_player`` and ``parent_infostate`` (0 where the parent is
    not a decision), ``chance_probability`` of the edge (1 where the parent is
    not chance), ``player``, ``infostate`` (0 where not a decision),
    ``children [H, B]`` (the history itself in empty slots) and
    ``child_valid [H, B]``, player 0's ``terminal_return`` (0 elsewhere).  Per
    information state: ``legal [I, A]`` and ``num_legal [I]``.
    """

    parent: jax.Array  # int32 [H]
    action: jax.Array  # int32 [H]
    parent_player: jax.Array  # int32 [H]
    parent_infostate: jax.Array  # int32 [H]
    chance_probability: jax.Array  # float [H]
    player: jax.Array  # int32 [H]
    infostate: jax.Array  # int32 [H]
    children: jax.Array  # int32 [H, B]
    child_valid: jax.Array  # bool [H, B]
    terminal_return: jax.Array  # float [H]
    legal: jax.Array  # bool [I, A]
    num_legal: jax.Array  # float [I]
    depth: int = field(metadata=dict(static=True))
    num_infostates: int = field(metadata=dict(static=True))

    @property
    def decision(self) -> jax.Array:
        """``[H]`` whether a player acts at the history."""
        return self.player >= 0


def history_depths(game: CompiledGame) -> np.ndarray:
    """``[H]``: each history's depth (edges from the root, the root at 0)."""
    parent = np.where(game.history_parent >= 0, game.history_parent, 0)
    depth = np.zeros(game.num_histories, dtype=np.int64)
    for h in range(1, game.num_histories):  # preorder: a parent comes before its children
        depth[h] = depth[parent[h]] + 1
    return depth


def history_tree(game: CompiledGame, dtype=jnp.float64) -> HistoryTree:
    """The history arrays of ``game``, real numbers in ``dtype`` (float64 or float32)."""
    parent = np.where(game.history_parent >= 0, game.history_parent, 0).astype(np.int32)
    player = game.history_player.astype(np.int32)
    parent_player = np.where(game.history_parent >= 0, player[parent], CHANCE).astype(np.int32)
    action = np.where((game.history_action >= 0) & (parent_player >= 0), game.history_action,
                      0).astype(np.int32)
    infostate = np.where(game.history_infostate >= 0, game.history_infostate, 0).astype(np.int32)
    chance = np.where(parent_player == CHANCE, game.history_chance_probability, 1.0)
    children = game.history_children
    valid = children != NO_INDEX
    own = np.arange(game.num_histories, dtype=np.int32)[:, None]
    depth = history_depths(game)
    terminal_return = np.where(player == TERMINAL, game.history_returns[:, 0], 0.0)
    legal = game.infostate_legal
    return HistoryTree(
        parent=jnp.asarray(parent),
        action=jnp.asarray(action),
        parent_player=jnp.asarray(parent_player),
        parent_infostate=jnp.asarray(infostate[parent]),
        chance_probability=jnp.asarray(chance, dtype=dtype),
        player=jnp.asarray(player),
        infostate=jnp.asarray(infostate),
        children=jnp.asarray(np.where(valid, children, own).astype(np.int32)),
        child_valid=jnp.asarray(valid),
        terminal_return=jnp.asarray(terminal_return, dtype=dtype),
        legal=jnp.asarray(legal),
        num_legal=jnp.asarray(legal.sum(axis=1), dtype=dtype),
        depth=int(depth.max()),
        num_infostates=game.num_infostates,
    )


def own_terms(policy: jax.Array, num_legal: jax.Array, legal: jax.Array, eta) -> jax.Array:
    """``[I, A]``: ``-eta log(pi(a|x) / mu(a|x))``, the acting player's own reward, at every
    legal action, ``pi`` floored at :data:`PI_FLOOR`; the learner's rule and the exact one."""
    ratio = jnp.maximum(policy, PI_FLOOR) * num_legal[:, None]
    return jnp.where(legal, -eta * jnp.log(ratio), 0.0)


def _own_term(tree: HistoryTree, policy: jax.Array, eta) -> jax.Array:
    return own_terms(policy, tree.num_legal, tree.legal, eta)


def edge_probabilities(tree: HistoryTree, policy: jax.Array) -> jax.Array:
    """``[H]``: probability of the edge into each history (1 at the root)."""
    by_policy = policy[tree.parent_infostate, tree.action]
    return jnp.where(tree.parent_player >= 0, by_policy, tree.chance_probability)


def edge_rewards(tree: HistoryTree, policy: jax.Array, eta) -> jax.Array:
    """``[H]``: player 0's regularisation reward on the edge into each history."""
    own = _own_term(tree, policy, eta)[tree.parent_infostate, tree.action]
    signed = jnp.where(tree.parent_player == 0, own, -own)
    return jnp.where(tree.parent_player >= 0, signed, 0.0)


def reach(tree: HistoryTree, policy: jax.Array, without_player: int | None = None) -> jax.Array:
    """``[H]``: reach probability of every history; ``without_player``'s own edges count 1."""
    p = edge_probabilities(tree, policy)
    if without_player is not None:
        p = jnp.where(tree.parent_player == without_player, 1.0, p)
    result = jnp.ones_like(p)
    for _ in range(tree.depth):
        result = p * result[tree.parent]
    return result


def values(tree: HistoryTree, policy: jax.Array, eta=0.0, sign=1.0) -> jax.Array:
    """``[H]``: player 0's expected return below each history, edge rewards included."""
    p = edge_probabilities(tree, policy)
    r = edge_rewards(tree, policy, eta)
    terminal = sign * tree.terminal_return
    weight = jnp.where(tree.child_valid, p[tree.children], 0.0)
    value = terminal
    for _ in range(tree.depth):
        below = jnp.sum(weight * (r + value)[tree.children], axis=-1)
        value = jnp.where(tree.player == TERMINAL, terminal, below)
    return value


def infostate_reach(tree: HistoryTree, policy: jax.Array) -> jax.Array:
    """``[I]``: probability that an episode visits each information state."""
    at = jnp.where(tree.decision, reach(tree, policy), 0.0)
    return jax.ops.segment_sum(at, tree.infostate, num_segments=tree.num_infostates)


def action_values(tree: HistoryTree, policy: jax.Array, eta=0.0, sign=1.0
                  ) -> tuple[jax.Array, jax.Array]:
    """``q [I, A]`` of each information state's player, and ``continuation [I, A]``.

    ``continuation`` leaves out the acting player's own term of the step
    itself.  Zero where the information state cannot be reached by chance
    and the opponent, or the action is illegal.
    """
    v0 = values(tree, policy, eta, sign)
    r0 = edge_rewards(tree, policy, eta)
    after = (r0 + v0)[tree.children[:, : policy.shape[-1]]]  # [H, A]: player 0's, via each action
    sign_of_player = jnp.where(tree.player == 1, -1.0, 1.0)[:, None]
    weight = jnp.where(tree.player == 0, reach(tree, policy, without_player=0),
                       reach(tree, policy, without_player=1))
    weight = jnp.where(tree.decision, weight, 0.0)
    num = jax.ops.segment_sum(weight[:, None] * sign_of_player * after, tree.infostate,
                              num_segments=tree.num_infostates)
    den = jax.ops.segment_sum(weight, tree.infostate, num_segments=tree.num_infostates)
    q = jnp.where((den[:, None] > 0) & tree.legal, num / jnp.where(den > 0, den, 1.0)[:, None],
                  0.0)
    return q, q - jnp.where(den[:, None] > 0, _own_term(tree, policy, eta), 0.0)
