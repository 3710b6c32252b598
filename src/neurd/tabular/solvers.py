"""OpenSpiel's CFR and CFR+ in the engine, operation for operation.

Figure 4b draws two yardsticks: OpenSpiel's ``CFRSolver`` (CFR with regret
matching; Zinkevich et al. 2008) and ``CFRPlusSolver`` (CFR+; Tammelin 2014).
This module computes both in JAX, float64, as OpenSpiel's C++
(``open_spiel/algorithms/cfr.cc``) computes them, every floating-point
operation in the same order, so that the two agree bit for bit
(``tests/test_solvers.py`` compares the cumulative regrets and policies with
OpenSpiel's serialized state, and the NashConv and average policy at every
checkpoint), in a fraction of the time of OpenSpiel's tree walk
(``bench/RESULTS.md``).

An iteration increments ``t`` (from 1) and updates player 0, then player 1
(alternating updates).  Updating player ``p`` walks the history tree with
every player's current policy and reach ``r = (r_0, r_1, r_c)`` (products of
the probabilities on the path, chance last):

* a history's value ``v_p(h)`` is ``u_p(h)`` at a terminal and otherwise
  ``0 + pi(a_1) v_p(h a_1) + pi(a_2) v_p(h a_2) + ...`` in the order of the
  children (legal actions ascending; chance outcomes as OpenSpiel lists them);
  a decision history that neither player reaches (``r_0 = r_1 = 0``) is
  skipped and has value 0;
* at every other history ``h`` of player ``p`` in information state ``s``, in
  depth-first order, the cumulative regret ``R(s, a) += (r_{-p} r_c) (v_p(h a)
  - v_p(h))`` and the cumulative policy ``S(s, a) += w r_p pi(a|s)``, with ``w
  = t`` for CFR+ (linear averaging, no delay) and no factor for CFR;
* after the walk CFR+ sets every negative ``R`` to 0 (regret matching+), and
  both recompute every current policy by regret matching: ``pi(a|s) = R(s,
  a)^+ / sum_b R(s, b)^+`` (the sum in action order), uniform where no regret
  is positive.

The average policy is ``S(s, .) / sum_a S(s, a)`` (uniform where the sum is 0),
as ``CFRAveragePolicy``; its NashConv is the engine's exact one
(:func:`neurd.tabular.evaluation.nash_conv`).

Why the order matters: Goofspiel's win/draw/loss payoffs make many regrets
exactly zero in exact arithmetic, rounding leaves some at 1e-17, and regret
matching turns such a residue into a whole probability; summing in another
order (as the sequence form of :mod:`neurd.tabular.cfr` does) sends the run
down another, equally valid path: its NashConv parts from OpenSpiel's by more
than 1e-9 at iteration 3 on Goofspiel and 588 on Leduc.  So the walk here
sums per history, in OpenSpiel's order; every sum that follows a product
goes through ``jnp.where`` (XLA's CPU compiler otherwise contracts ``a * b +
c`` into one fused multiply-add, which rounds once instead of twice) and
every division is of equal shapes (XLA turns a division by a broadcast into
a multiplication by the reciprocal).

The tree is laid out level by level (the histories at one depth: player 0's
decisions, player 1's, chance, terminals), so the walk is a few gathers per
level; an information state's per-history increments are added in
depth-first order, one rank (first history, second, ...) at a time, the
states with a ``k``-th history being a prefix of their player's block.  One
compiled program serves both solvers (which one is an argument); they run
one after the other, since XLA compiles a ``vmap`` over the two to other
floating-point operations.  Keep the tree an argument of the jitted
functions: as a constant, XLA folds the masks that keep its multiply-adds
apart.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np

from neurd.games import CHANCE, CompiledGame
from neurd.names import CFR_PLUS, REFERENCE_SOLVERS, check_name
from neurd.precision import float64
from neurd.progress import Progress, scan_in_chunks
from neurd.tabular.cfr import checkpoint_segments
from neurd.tabular.evaluation import nash_conv
from neurd.tabular.sequence_form import SequenceForm, sequence_form

log = logging.getLogger(__name__)

# Checkpoints per jitted call: progress is logged between calls.
CHECKPOINTS_PER_CHUNK = 8


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class Level:
    """The histories at one depth: player 0's decisions, player 1's, chance, terminals
    (``bounds``: where each group starts, and the end), each group in depth-first order.

    Top-down, per decision or chance history (a terminal's reach is never
    needed): ``parent`` (position in the level above),
    ``parent_player`` (0, 1, or -1 where the parent is chance or there is none)
    and ``parent_choice`` (flat index ``s * A + a`` of the parent's information
    state and action; 0 elsewhere).  Bottom-up, per decision or chance
    history and child slot in OpenSpiel's order: ``child`` (position in the
    level below; 0 in an empty slot), ``child_valid``, at decisions
    ``child_choice`` (flat policy index) and at chance ``child_probability``;
    ``returns [n_terminal, 2]``.  Per decision: ``chance_reach`` (``r_c``),
    ``infostate``, ``legal [., A]`` and ``action_child [., A]`` (position below
    of each action's child, 0 at an illegal action).
    """

    parent: jax.Array
    parent_player: jax.Array
    parent_choice: jax.Array
    child: jax.Array
    child_valid: jax.Array
    child_choice: jax.Array
    child_probability: jax.Array
    returns: jax.Array
    chance_reach: jax.Array
    infostate: jax.Array
    legal: jax.Array
    action_child: jax.Array
    bounds: tuple[int, int, int, int, int] = field(metadata=dict(static=True))

    def decisions(self, player: int) -> slice:
        """The positions of ``player``'s decisions (in this level and its per-decision arrays)."""
        return slice(self.bounds[player], self.bounds[player + 1])


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class SolverTree:
    """A compiled game laid out for :func:`iterate`.

    Its ``levels``; the information states in the solver's own order: per player
    a block (``blocks``: start and size), in it the states with the most
    histories first, so that the states with a ``k``-th history are a prefix of
    the block; ``legal [I, A]`` in that order and ``restore [I]``, the row of
    each compiled information state; per player and rank ``k``,
    ``rank_rows[p][k]``: the row, among the player's decisions (level by
    level), of the ``k``-th history in depth-first order of each state of the
    prefix.
    """

    levels: tuple[Level, ...]
    legal: jax.Array
    restore: jax.Array
    rank_rows: tuple[tuple[jax.Array, ...], tuple[jax.Array, ...]]
    blocks: tuple[tuple[int, int], tuple[int, int]] = field(metadata=dict(static=True))
    num_actions: int = field(metadata=dict(static=True))


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class SolverState:
    """OpenSpiel's per-information-state values, ``[I, A]`` over both players: cumulative
    regrets, current policy, cumulative policy; and the iterations done.  Rows in the
    compiled order where :func:`run` returns it, in the tree's order inside the loop."""

    regrets: jax.Array
    policy: jax.Array
    cumulative_policy: jax.Array
    iteration: jax.Array


def _depths(game: CompiledGame) -> np.ndarray:
    """Each history's depth (histories are in preorder: a parent before its children)."""
    depth = np.zeros(game.num_histories, dtype=np.int64)
    parent = game.history_parent.astype(np.int64)
    for _ in range(game.num_histories):
        below = depth[np.maximum(parent, 0)] + (parent >= 0)
        if np.array_equal(below, depth):
            return depth
        depth = below
    return depth


def _chance_reach(game: CompiledGame, depth: np.ndarray) -> np.ndarray:
    """``r_c(h)``: the chance probabilities on the path, multiplied root first (as OpenSpiel)."""
    reach = np.ones(game.num_histories)
    parent = game.history_parent.astype(np.int64)
    for d in range(1, int(depth.max()) + 1):
        nodes = np.flatnonzero(depth == d)
        above = reach[parent[nodes]]
        reach[nodes] = np.where(game.history_player[parent[nodes]] == CHANCE,
                                above * game.history_chance_probability[nodes], above)
    return reach


def _layout(game: CompiledGame, info: np.ndarray) -> tuple[np.ndarray, list]:
    """The solver's order of the information states (see :class:`SolverTree`): the compiled
    index of each row, and each player's block ``(start, size)``."""
    counts = np.bincount(info[info >= 0], minlength=game.num_infostates)
    order = np.lexsort((np.arange(game.num_infostates), -counts, game.infostate_player))
    sizes = [int(np.sum(game.infostate_player == p)) for p in (0, 1)]
    return order, [(0, sizes[0]), (sizes[0], sizes[1])]


def _rank_rows(rows: np.ndarray, histories: np.ndarray, block: tuple[int, int]):
    """Per rank ``k``: the decision rows of the ``k``-th histories (depth-first) of the
    block's first states, one per state in block order (``rows``: each decision's state)."""
    order = np.lexsort((histories, rows))
    first = np.searchsorted(rows[order], rows[order])
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order)) - first
    ranked = []
    for k in range(int(rank.max()) + 1 if len(rank) else 0):
        chosen = np.flatnonzero(rank == k)
        chosen = chosen[np.argsort(rows[chosen])]
        if not np.array_equal(rows[chosen], block[0] + np.arange(len(chosen))):
            raise AssertionError("information states are not ordered by history count")
        ranked.append(jnp.asarray(chosen, jnp.int32))
    return tuple(ranked)


def _levels_of(depth: np.ndarray, player: np.ndarray
               ) -> tuple[np.ndarray, list[np.ndarray], np.ndarray]:
    """``(group, levels, position)``: each history's group (0, 1: that player's decision; 2:
    chance; 3: terminal), the histories of every depth by group and by id within one, and
    each history's position in its level."""
    group = np.select([player == 0, player == 1, player == CHANCE], [0, 1, 2], 3)
    levels_of = [np.flatnonzero(depth == d) for d in range(int(depth.max()) + 1)]
    levels_of = [nodes[np.lexsort((nodes, group[nodes]))] for nodes in levels_of]
    position = np.empty(len(depth), dtype=np.int64)
    for nodes in levels_of:
        position[nodes] = np.arange(len(nodes))
    return group, levels_of, position


@float64
def solver_tree(game: CompiledGame) -> SolverTree:
    """The layout of ``game`` for :func:`iterate` (NumPy, once per game)."""
    A = game.num_actions
    depth = _depths(game)
    chance_reach = _chance_reach(game, depth)
    player = game.history_player.astype(np.int64)
    compiled_info = game.history_infostate.astype(np.int64)
    order, blocks = _layout(game, compiled_info)
    row = np.empty(game.num_infostates, dtype=np.int64)
    row[order] = np.arange(game.num_infostates)
    info = np.where(compiled_info >= 0, row[np.maximum(compiled_info, 0)], -1)
    group, levels_of, position = _levels_of(depth, player)
    children = game.history_children.astype(np.int64)
    empty = np.iinfo(np.int64).max
    decisions = ([], [])  # per player: its decision histories, level by level
    levels = []
    for d, nodes in enumerate(levels_of):
        bounds = tuple(int(b) for b in np.searchsorted(group[nodes], [0, 1, 2, 3])) + (
            len(nodes),)
        parent = np.maximum(game.history_parent[nodes].astype(np.int64), 0)
        parent_player = np.where((d > 0) & (player[parent] >= 0), player[parent], -1)
        parent_choice = np.where(parent_player >= 0, info[parent] * A
                                 + game.history_action[nodes], 0)
        inner = nodes[:bounds[3]]  # decisions and chance
        # child slots in the order OpenSpiel visits them: by history id (depth-first order),
        # as many as the level's widest node has
        slots = np.sort(np.where(children[inner] >= 0, children[inner], empty), axis=1)
        valid = slots != empty
        slots = np.where(valid, slots, 0)[:, :max(1, int(valid.sum(axis=1).max(initial=0)))]
        valid = valid[:, :slots.shape[1]]
        decision = inner[:bounds[2]]
        by_action = children[decision, :A]
        for p in (0, 1):
            decisions[p].append(nodes[bounds[p]:bounds[p + 1]])
        inner_parent = (position[parent] if d > 0 else np.zeros(len(nodes)))[:bounds[3]]
        levels.append(Level(
            parent=jnp.asarray(inner_parent, jnp.int32),
            parent_player=jnp.asarray(parent_player[:bounds[3]], jnp.int32),
            parent_choice=jnp.asarray(parent_choice[:bounds[3]], jnp.int32),
            child=jnp.asarray(np.where(valid, position[slots], 0), jnp.int32),
            child_valid=jnp.asarray(valid),
            child_choice=jnp.asarray(np.where(valid[:bounds[2]], info[decision][:, None] * A
                                              + game.history_action[slots[:bounds[2]]], 0),
                                     jnp.int32),
            child_probability=jnp.asarray(np.where(
                valid[bounds[2]:], game.history_chance_probability[slots[bounds[2]:]], 0.0),
                jnp.float64),
            returns=jnp.asarray(game.history_returns[nodes[bounds[3]:]], jnp.float64),
            chance_reach=jnp.asarray(chance_reach[decision], jnp.float64),
            infostate=jnp.asarray(info[decision], jnp.int32),
            legal=jnp.asarray(game.infostate_legal[compiled_info[decision]].reshape(-1, A)),
            action_child=jnp.asarray(np.where(by_action >= 0,
                                              position[np.maximum(by_action, 0)], 0).reshape(-1, A),
                                     jnp.int32),
            bounds=bounds,
        ))
    rank_rows = []
    for p in (0, 1):
        histories = np.concatenate(decisions[p]).astype(np.int64)
        rank_rows.append(_rank_rows(info[histories], histories, blocks[p]))
    return SolverTree(levels=tuple(levels), legal=jnp.asarray(game.infostate_legal[order]),
                      restore=jnp.asarray(row, jnp.int32), rank_rows=tuple(rank_rows),
                      blocks=tuple(blocks), num_actions=A)


def _uniform(legal: jax.Array) -> jax.Array:
    """``1.0 / |legal actions|`` at every legal action (as ``CFRInfoStateValues``), 0 elsewhere."""
    count = jnp.sum(legal, axis=-1, keepdims=True).astype(jnp.float64)
    return jnp.where(legal, 1.0 / count, 0.0)


def _sum_in_order(values: jax.Array) -> jax.Array:
    """``((0 + x_0) + x_1) + ...`` over the last axis, in action order (as OpenSpiel's loops)."""
    total = jnp.zeros(values.shape[:-1], values.dtype)
    for a in range(values.shape[-1]):
        total = total + values[..., a]
    return total


def _divide_columns(numerator: jax.Array, denominator: jax.Array) -> jax.Array:
    """``numerator [..., A] / denominator [...]``, one column at a time.

    XLA rewrites a division by a broadcast ``x / b[:, None]`` as a multiplication
    by the reciprocal, which rounds twice; a column over a vector of the same
    shape is divided exactly, as OpenSpiel divides.
    """
    return jnp.stack([numerator[..., a] / denominator for a in range(numerator.shape[-1])],
                     axis=-1)


def regret_matching(regrets: jax.Array, legal: jax.Array) -> jax.Array:
    """``CFRInfoStateValues::ApplyRegretMatching``: positive regrets normalised, else uniform."""
    positive = regrets > 0
    total = _sum_in_order(jnp.where(legal & positive, regrets, 0.0))
    share = jnp.where(positive, _divide_columns(regrets, jnp.where(total > 0, total, 1.0)), 0.0)
    return jnp.where(total[..., None] > 0, share, _uniform(legal))


def average_policy(cumulative_policy: jax.Array, legal: jax.Array) -> jax.Array:
    """``[I, A]``: ``CFRAveragePolicy``, the cumulative policy normalised (uniform where 0)."""
    total = _sum_in_order(jnp.where(legal, cumulative_policy, 0.0))
    share = _divide_columns(cumulative_policy, jnp.where(total == 0.0, 1.0, total))
    return jnp.where(total[..., None] == 0.0, _uniform(legal), share)


def _compiled_order(tree: SolverTree, state: SolverState) -> SolverState:
    """``state`` with its rows in the compiled order of the information states."""
    return SolverState(state.regrets[tree.restore], state.policy[tree.restore],
                       state.cumulative_policy[tree.restore], state.iteration)


def init(tree: SolverTree) -> SolverState:
    """A fresh solver: zero regrets and cumulative policy, uniform current policy."""
    zeros = jnp.zeros(tree.legal.shape, jnp.float64)
    return SolverState(zeros, _uniform(tree.legal), zeros, jnp.zeros((), jnp.int64))


def _reaches(tree: SolverTree, pi: jax.Array) -> list[tuple[jax.Array, jax.Array]]:
    """``(r_0, r_1)`` per level, top-down: a decision multiplies its player's reach."""
    first = tree.levels[0].bounds[3]
    reach = [(jnp.ones(first, jnp.float64), jnp.ones(first, jnp.float64))]
    for level in tree.levels[1:]:
        above = reach[-1]
        factor = pi[level.parent_choice]
        reach.append(tuple(above[q][level.parent] * jnp.where(level.parent_player == q,
                                                              factor, 1.0) for q in (0, 1)))
    return reach


def _values(tree: SolverTree, pi: jax.Array, reach, player: int) -> list[jax.Array]:
    """``v_p`` per level, bottom-up, children summed in OpenSpiel's order; 0 where pruned."""
    values = [None] * len(tree.levels)
    below = None
    for d in reversed(range(len(tree.levels))):
        level = tree.levels[d]
        parts = []
        if below is not None:
            _, _, chance, terminal, _ = level.bounds
            probability = jnp.concatenate([pi[level.child_choice], level.child_probability])
            # where(): no fused multiply-add in the sum (see the module docstring)
            value = _sum_in_order(jnp.where(level.child_valid,
                                            probability * below[level.child], 0.0))
            r0, r1 = reach[d][0][:chance], reach[d][1][:chance]
            parts += [jnp.where((r0 == 0.0) & (r1 == 0.0), 0.0, value[:chance]),
                      value[chance:]]
        parts.append(level.returns[:, player])
        values[d] = below = jnp.concatenate(parts)
    return values


def _update(tree: SolverTree, state: SolverState, player: int, weight) -> SolverState:
    """``CFRSolverBase::ComputeCounterFactualRegret`` for ``player``; the caller resets.

    ``weight``: the average policy's weight of this iteration (``t`` for CFR+, 1
    for CFR: ``1 * r_p`` is ``r_p`` exactly).
    """
    pi = state.policy.reshape(-1)
    reach = _reaches(tree, pi)
    values = _values(tree, pi, reach, player)
    rows = []  # per decision of the player: [regret increments, average-policy increments]
    for d, level in enumerate(tree.levels[:-1]):
        mine = level.decisions(player)
        own_reach, other_reach = reach[d][player][mine], reach[d][1 - player][mine]
        live = ~((own_reach == 0.0) & (other_reach == 0.0))
        mask = level.legal[mine] & live[:, None]
        counterfactual = other_reach * level.chance_reach[mine]
        child_values = values[d + 1][level.action_child[mine]]
        rows.append(jnp.where(jnp.concatenate([mask, mask], axis=1), jnp.concatenate([
            counterfactual[:, None] * (child_values - values[d][mine][:, None]),
            (weight * own_reach)[:, None] * state.policy[level.infostate[mine]]], axis=1), 0.0))
    rows = jnp.concatenate(rows)
    # each information state's increments added in depth-first order, one rank at a time;
    # the states with a k-th history are a prefix of the player's block
    start, size = tree.blocks[player]
    cumulative = jnp.concatenate([state.regrets, state.cumulative_policy], axis=1)
    block = cumulative[start:start + size]
    for ranked in tree.rank_rows[player]:
        prefix = block[:ranked.shape[0]] + rows[ranked]
        block = jax.lax.dynamic_update_slice(block, prefix, (0, 0))
    cumulative = jax.lax.dynamic_update_slice(cumulative, block, (start, 0))
    A = tree.num_actions
    return SolverState(cumulative[:, :A], state.policy, cumulative[:, A:], state.iteration)


def iterate(tree: SolverTree, state: SolverState, plus) -> SolverState:
    """One iteration of OpenSpiel's ``EvaluateAndUpdatePolicy``: ``t += 1``, then player 0,
    then player 1, each followed (``plus``: CFR+) by regret matching+'s reset and, for
    every information state, regret matching.  ``plus`` may be traced."""
    iteration = state.iteration + 1
    weight = jnp.where(plus, iteration.astype(jnp.float64), 1.0)
    state = SolverState(state.regrets, state.policy, state.cumulative_policy, iteration)
    for player in (0, 1):
        state = _update(tree, state, player, weight)
        regrets = jnp.where(plus & (state.regrets < 0.0), 0.0, state.regrets)
        state = SolverState(regrets, regret_matching(regrets, tree.legal),
                            state.cumulative_policy, iteration)
    return state


def _advance(tree, state, plus, length):
    """``length`` (traced) iterations of one solver (``plus``, traced: CFR+ or CFR)."""
    return jax.lax.fori_loop(0, length, lambda _, s: iterate(tree, s, plus), state)


@jax.jit
def _run(tree, state, plus, length):
    return _advance(tree, state, plus, length)


def _is_plus(solver: str) -> jax.Array:
    """Whether ``solver`` is CFR+ (``cfr_plus``) rather than CFR (``cfr_rm``); name checked."""
    return jnp.asarray(check_name(solver, REFERENCE_SOLVERS, "reference solver") == CFR_PLUS)


@float64
def run(game: CompiledGame | SolverTree, solver: str, iterations: int) -> SolverState:
    """``iterations`` iterations of ``solver`` (``cfr_rm``: ``CFRSolver``, ``cfr_plus``:
    ``CFRPlusSolver``) from the start; the state as OpenSpiel's solver holds it."""
    plus = _is_plus(solver)
    tree = game if isinstance(game, SolverTree) else solver_tree(game)
    state = _run(tree, init(tree), plus, jnp.asarray(int(iterations), jnp.int64))
    return _compiled_order(tree, state)


@jax.jit(static_argnames=("policies",))
def _chunk(tree, form, state, plus, segments, policies):
    def segment(state, length):
        state = _advance(tree, state, plus, length)
        average = average_policy(state.cumulative_policy, tree.legal)[tree.restore]
        return state, (nash_conv(form, average), average if policies else jnp.zeros(()))

    return jax.lax.scan(segment, state, segments)


@float64
def solver_curves(game: CompiledGame, solvers, checkpoints, policies: bool = False,
                  form: SequenceForm | None = None):
    """NashConv ``[S, K]`` of each solver's average policy after each checkpoint iteration
    (and, with ``policies``, the average policies ``[S, K, I, A]``), as OpenSpiel's
    ``CFRSolver`` (``cfr_rm``) and ``CFRPlusSolver`` (``cfr_plus``) give them.

    One jitted program serves every solver (which one is an argument), called a
    chunk of checkpoints at a time, progress logged (INFO) between calls.  The
    solvers run one after the other, not side by side in a ``vmap``: XLA
    compiles a batched program to other floating-point operations.
    """
    flags = [_is_plus(solver) for solver in solvers]
    segments = checkpoint_segments(checkpoints)
    points = np.cumsum(segments)
    tree, form = solver_tree(game), form if form is not None else sequence_form(game)
    values, averages = [], []
    for solver, plus in zip(solvers, flags):
        progress = Progress(f"{solver} on {game.game_string}", points[-1])

        def report(done, metrics, progress=progress):
            progress.update(points[done - 1], f"NashConv {metrics[0][-1]:.6g}")

        _, (curve, policy) = scan_in_chunks(
            lambda state, chunk, plus=plus: _chunk(tree, form, state, plus, chunk, policies),
            init(tree), segments, chunk_size=CHECKPOINTS_PER_CHUNK, pad_value=0,
            on_chunk=report)
        bad = np.flatnonzero(~np.isfinite(curve))
        if len(bad):
            raise FloatingPointError(f"{solver}: NashConv is not finite at checkpoint "
                                     f"{points[bad[0]]}")
        values.append(curve)
        averages.append(policy)
    values = np.stack(values)
    return (values, np.stack(averages)) if policies else values
