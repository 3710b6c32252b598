"""Whole episodes sampled on the compiled game, in JAX, with the regularised returns.

An episode starts at the root history and takes one step per depth level
(``lax.scan`` over the game's depth; ``vmap`` over episodes): chance picks a
child by its probabilities, a player picks an action from the policy table
``[I, A]`` (the network evaluated once on every information state) at its
information state, and a terminal history stays put.  One uniform number per
step picks the child by inverting the cumulative probabilities.

Per step the episode keeps the information state, player, action, whether
the step is a decision (``valid``), the acting player's own regularisation
term ``-eta log(pi(a|x)/mu(a|x))`` (``mu`` uniform over the legal actions,
Perolat et al. 2020), the acting player's **return** from that step on
(``sign`` times the terminal payoff plus every regularisation reward from the
step on: the player's own terms count ``+``, the opponent's ``-``, so the game
stays zero-sum) and the **continuation**, the return after the step's own
term (what the critic regresses on).

Shapes: ``N`` episodes, ``D`` the game's depth (steps, decisions or not).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace

import jax
import jax.numpy as jnp
import numpy as np

from neurd.games import TERMINAL
from neurd.tabular.histories import HistoryTree, history_depths


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Episodes:
    """``N`` sampled episodes, ``[N, D]`` per step unless stated."""

    infostate: jax.Array  # int32: information state of the step (0 where not a decision)
    player: jax.Array  # int32: 0, 1, chance (-1) or terminal (-2)
    action: jax.Array  # int32: action (or chance outcome) taken
    valid: jax.Array  # bool: a player acted
    own_term: jax.Array  # float: -eta log(pi(a|x)/mu(a|x)) of the acting player, 0 elsewhere
    returns: jax.Array  # float: the acting player's regularised return from the step on
    continuation: jax.Array  # float: returns - own_term
    terminal: jax.Array  # int32 [N]: the terminal history reached
    value: jax.Array  # float [N]: player 0's regularised return of the whole episode


def uniforms(key: jax.Array, depth: int, num: int, dtype=jnp.float32) -> jax.Array:
    """``[D, num]``: the uniform numbers of ``num`` episodes drawn from ``key``."""
    return jax.random.uniform(key, (depth, num), dtype=dtype)


def sample(tree: HistoryTree, policy: jax.Array, key: jax.Array, num: int, eta=0.0,
           sign=1.0) -> Episodes:
    """``num`` episodes under the policy table ``policy [I, A]`` (rows sum to 1 on legal)."""
    return sample_uniforms(tree, policy, uniforms(key, tree.depth, num, policy.dtype), eta, sign)


def sample_batches(tree: HistoryTree, policy: jax.Array, keys, sizes, eta=0.0, sign=1.0
                   ) -> list[Episodes]:
    """Several batches under one policy table in one pass: batch ``j`` has ``sizes[j]``
    episodes drawn from ``keys[j]``, the very episodes :func:`sample` draws from that key."""
    drawn = jnp.concatenate(batch_uniforms(keys, sizes, tree.depth, policy.dtype), axis=1)
    return split_tree(sample_uniforms(tree, policy, drawn, eta, sign), sizes)


def batch_uniforms(keys, sizes, depth: int, dtype=jnp.float32) -> list[jax.Array]:
    """``[D, sizes[j]]`` per batch: :func:`uniforms` of ``keys[j]``, the batches of one size
    next to each other drawn in one vmapped call (the same numbers as a call per batch: a
    cycle's four critic updates' episodes are one draw of the random-number generator, not four)."""
    drawn = []
    for size, group in itertools.groupby(zip(keys, sizes), key=lambda pair: pair[1]):
        same = [key for key, _ in group]
        if len(same) == 1:
            drawn.append(uniforms(same[0], depth, size, dtype))
        else:  # [G, D, size], one batch a row
            drawn.extend(jax.vmap(lambda k, n=size: uniforms(k, depth, n, dtype))(
                jnp.stack(same)))
    return drawn


def split_tree(tree, sizes) -> list:
    """A pytree cut along the leading axis of every leaf into pieces of ``sizes``."""
    bounds = np.cumsum(sizes)[:-1].tolist()
    parts = [jnp.split(x, bounds, axis=0) for x in jax.tree_util.tree_leaves(tree)]
    treedef = jax.tree_util.tree_structure(tree)
    return [jax.tree_util.tree_unflatten(treedef, [p[j] for p in parts])
            for j in range(len(sizes))]


def sample_uniforms(tree: HistoryTree, policy: jax.Array, uniform: jax.Array, eta=0.0,
                    sign=1.0) -> Episodes:
    """Episodes driven by the uniform numbers ``uniform [D, N]`` (one per step and episode).

    Every index into an array stays in range: a step's choice is at most the
    last child slot, and a non-decision step reads information state 0.
    """
    width = tree.children.shape[1]
    actions = policy.shape[-1]

    def step(history, uniform):
        player = tree.player[history]
        infostate = tree.infostate[history]
        decision = player >= 0
        children = tree.children[history]  # [N, B]
        by_policy = jnp.pad(policy[infostate], ((0, 0), (0, width - actions)))
        by_chance = jnp.where(tree.child_valid[history], tree.chance_probability[children], 0.0)
        probabilities = jnp.where(decision[:, None], by_policy, by_chance.astype(policy.dtype))
        cumulative = jnp.cumsum(probabilities, axis=-1)
        threshold = uniform * cumulative[:, -1]
        choice = jnp.sum(cumulative <= threshold[:, None], axis=-1)
        choice = jnp.minimum(choice, width - 1)
        pick = jnp.arange(width) == choice[:, None]  # one-hot of the choice: no gather
        taken = jnp.sum(jnp.where(pick, probabilities, 0.0), axis=-1)
        ratio = taken * tree.num_legal[infostate].astype(policy.dtype)
        own = jnp.where(decision, -eta * jnp.log(jnp.where(decision, ratio, 1.0)), 0.0)
        following = jnp.where(player == TERMINAL, history,
                              jnp.sum(jnp.where(pick, children, 0), axis=-1))
        record = (jnp.where(decision, infostate, 0), player, choice, decision, own)
        return following, record

    num = uniform.shape[1]
    start = jnp.zeros((num,), jnp.int32)
    # unrolled: a handful of levels, and a rolled loop costs a GPU a host round trip per level
    terminal, (infostate, player, action, valid, own) = jax.lax.scan(step, start, uniform,
                                                                     unroll=True)
    infostate, player, action, valid, own = (x.T for x in (infostate, player, action, valid, own))
    payoff = (sign * tree.terminal_return[terminal]).astype(own.dtype)
    # Player 0's reward on each step, and everything player 0 receives from the step on.
    reward0 = jnp.where(player == 0, own, -own)
    from_step = payoff[:, None] + jnp.cumsum(reward0[:, ::-1], axis=1)[:, ::-1]
    returns = jnp.where(player == 1, -from_step, from_step)
    returns = jnp.where(valid, returns, 0.0)
    return Episodes(
        infostate=infostate, player=player, action=action, valid=valid, own_term=own,
        returns=returns, continuation=jnp.where(valid, returns - own, 0.0), terminal=terminal,
        value=from_step[:, 0],
    )


def counts_by_scatter(index: jax.Array, valid: jax.Array, num: int) -> jax.Array:
    """``[num]``: how many ``valid`` entries each index has, by a segment sum (a scatter-add)."""
    return jax.ops.segment_sum(valid.astype(jnp.float32), index, num_segments=num)


def counts_by_comparison(index: jax.Array, valid: jax.Array, num: int) -> jax.Array:
    """``[num]``: the same counts as :func:`counts_by_scatter`, by a comparison summed over
    the entries (no scatter; ``num`` x entries work, one fused reduction)."""
    hits = (index[None, :] == jnp.arange(num)[:, None]) & valid[None, :]
    return jnp.sum(hits, axis=1, dtype=jnp.int32).astype(jnp.float32)


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class DepthIndex:
    """Which information states a decision at each depth can be at, for
    :func:`counts_by_depth` (a game where every information state lies at one depth).

    ``infostates[d]``: int32 ``[I_d]``, the information states of the decisions
    at depth ``d`` (step ``d`` of an episode); ``order``: int32 ``[I]``, the
    place of each information state in the concatenation of the ``infostates``
    (a state no decision is at points at one place past them, which holds 0).
    """

    infostates: tuple
    order: jax.Array


def depth_index(game) -> DepthIndex | None:
    """The :class:`DepthIndex` of a compiled game, or ``None`` where an information state is
    at decisions of more than one depth."""
    depth = history_depths(game)
    steps = int(depth.max())  # an episode's steps (HistoryTree.depth)
    decision = game.history_player >= 0
    depths = np.zeros(game.num_infostates, np.int64) - 1
    for x, d in set(zip(game.history_infostate[decision].tolist(), depth[decision].tolist())):
        if depths[x] >= 0:
            return None
        depths[x] = d
    groups = [np.flatnonzero(depths == d).astype(np.int32) for d in range(steps)]
    place = np.full(game.num_infostates, sum(len(g) for g in groups), np.int32)
    place[np.concatenate(groups)] = np.arange(sum(len(g) for g in groups), dtype=np.int32)
    return DepthIndex(infostates=tuple(jnp.asarray(g) for g in groups), order=jnp.asarray(place))


def counts_by_depth(infostate: jax.Array, valid: jax.Array, index: DepthIndex) -> jax.Array:
    """``[I]``: the counts of :func:`counts_by_comparison` from ``[N, D]`` steps, comparing
    the steps at depth ``d`` with the information states at that depth only (``N`` x ``I``
    comparisons in all, not ``N`` x ``D`` x ``I``; no scatter: the counts are put in place
    by a gather of in-range indices)."""
    parts = [jnp.sum((infostate[:, d, None] == ids[None, :]) & valid[:, d, None], axis=0,
                     dtype=jnp.int32)
             for d, ids in enumerate(index.infostates) if ids.shape[0]]
    counts = jnp.concatenate(parts + [jnp.zeros((1,), jnp.int32)])
    return counts[index.order].astype(jnp.float32)


def action_shares(episodes: Episodes, num_infostates: int, num_actions: int,
                  index: DepthIndex | None = None) -> jax.Array:
    """``[I, A]``: the share of the episodes' steps at each information state that took
    each action (a visited state's row sums to 1; 0 where none was taken): one
    :func:`visit_counts` per action, so by the backend's way."""
    counts = jnp.stack([visit_counts(replace(episodes, valid=episodes.valid
                                             & (episodes.action == a)), num_infostates, index)
                        for a in range(num_actions)], axis=-1)
    total = jnp.sum(counts, axis=-1, keepdims=True)
    return counts / jnp.maximum(total, 1.0)


def visit_counts(episodes: Episodes, num_infostates: int, index: DepthIndex | None = None
                 ) -> jax.Array:
    """``[I]``: how many steps of the episodes were taken at each information state.

    Counts are small integers, exact in float32 whichever way they are added,
    so the ways give the same numbers: a segment sum on the CPU, and on an
    accelerator a comparison summed over the steps, which needs no scatter
    (XLA's deterministic scatter sorts its indices, slow at every cycle), by
    depth where ``index`` is given (:func:`counts_by_depth`).  The way is chosen
    when the program is traced, for the backend it compiles for (a
    ``lax.platform_dependent`` keeps both and costs the CPU a fifth of its
    speed).
    """
    if jax.default_backend() == "cpu":
        return counts_by_scatter(episodes.infostate.ravel(), episodes.valid.ravel(),
                                 num_infostates)
    if index is not None:
        return counts_by_depth(episodes.infostate, episodes.valid, index)
    return counts_by_comparison(episodes.infostate.ravel(), episodes.valid.ravel(),
                                num_infostates)
