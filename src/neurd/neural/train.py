"""Neural NeuRD vs SPG (Algorithm 1, Fig 6): every configuration of a game in one jitted program.

A **configuration** is (algorithm, entropy level, seed).  Its learning loop,
readable top to bottom in :func:`cycle`:

0. evaluate the policy network on every information state: the policy table
   the cycle samples from (the cycle's only pass of the policy network: the
   policy step pulls its gradient back through this pass);
1. ``critic_updates`` times (a *learning iteration* each): sample
   ``critic_batch`` episodes with the current policy table, and take one
   optimiser step of the critic ``Q(x, a)`` on the regression of the taken
   action's value on the sampled continuation (Monte-Carlo targets);
2. sample ``policy_batch`` fresh episodes; count the visits of each
   information state; take one optimiser step of the policy on the
   all-actions loss of its algorithm (:mod:`neurd.neural.losses`) at every
   information state at once, weighted by the visits (the same gradient as
   summing over the sampled steps, in one pass over at most a few thousand
   rows), with ``q(x, a) = Q(x, a) - eta log(pi(a|x)/mu(a|x))``: the critic's
   continuation plus the acting player's own regularisation term, added for
   every legal action; or, with ``critic = "exact"``, the exact regularised
   ``q`` of the current policy (:mod:`neurd.tabular.histories`).

:func:`cycle` runs one cycle of ``N`` configurations at once: the passes of
the networks over every information state laid out for all of them by a
**layout** (:mod:`neurd.neural.layouts`), each configuration's own arithmetic
(its samples, its critic's steps, its ``q``, its algorithm's loss, its
optimiser's step) under ``vmap``.  :func:`run_segment` runs ``n`` cycles of
every configuration of every algorithm: a ``lax.fori_loop`` over
:func:`cycle`, in float32.  A cycle's five batches of episodes are drawn in
one pass of the sampler (they sample the same policy table; each batch from
its own key, the very episodes a separate call would draw), and nothing in
it indexes out of range or scatters: on a GPU it runs under XLA's
deterministic flag and repeats bit for bit.  Random numbers derive from (seed, configuration,
cycle) (:mod:`neurd.streams`), and initial weights from (seed, run seed)
only, so NeuRD and SPG at every entropy level start from the same networks,
and splitting the seeds between jobs changes no number.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field, make_dataclass, replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
import optax

from neurd import streams
from neurd.games import CompiledGame
from neurd.neural import algorithms, layouts, losses, passes, sampler, settings
from neurd.neural.device import cpu_devices
from neurd.neural.improvement import (  # noqa: F401  (step 2's names re-exported)
    check_losses,
    improve,
    logit_gradient,
    optimizers,
    policy_q,
    policy_step,
)
from neurd.neural.networks import MLP, masked_policy, network  # noqa: F401  (re-exported)
from neurd.neural.programs import learning_program
from neurd.neural.visited import cycle_layout
from neurd.tabular.histories import (  # noqa: F401  (own_terms re-exported)
    HistoryTree,
    action_values,
    history_tree,
    own_terms,
)


def _check_layout(spec) -> None:
    layouts.check(spec.layout)


# Every hyperparameter of the learning loop (static: one compiled program per spec). Its
# settings are the config section neural's keys marked x-spec in its schema, with their
# types and defaults from there (neurd.neural.settings: declared once); then two run-time
# knobs, not config keys: ``layout``, how a cycle's passes are laid out (a
# neurd.neural.layouts name; only float rounding changes), and ``unroll``, cycles per
# iteration of the compiled cycle loop (neurd.neural.variants; the same numbers up to float
# rounding).
Spec = make_dataclass(
    "Spec",
    [(name, kind, field(default=default)) for name, kind, default in settings.spec_fields()]
    + [("layout", str, field(default=layouts.DEFAULT)), ("unroll", int, field(default=1))],
    frozen=True,
    namespace={"__post_init__": _check_layout,
               "__doc__": "Every hyperparameter of the learning loop (static: one compiled "
                          "program per spec): the settings of neurd.neural.settings, then "
                          "the run-time knobs layout and unroll."})
Spec.__module__ = __name__


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class NeuralGame:
    """The arrays of a game the learner needs (float32): histories, tensors, players."""

    tree: HistoryTree
    tensors: jax.Array  # float32 [I, T]
    infostate_player: jax.Array  # int32 [I]
    depth_index: sampler.DepthIndex | None  # for the visit counts on an accelerator
    num_actions: int = field(metadata=dict(static=True))
    # the tensor's columns non-zero somewhere, as runs (passes.used_columns)
    used_columns: tuple = field(default=(), metadata=dict(static=True))


def neural_game(game: CompiledGame) -> NeuralGame:
    if game.infostate_tensor.shape[1] == 0:
        raise ValueError(f"game {game.game_string!r} provides no information-state tensor: "
                         "the networks have no input")
    return NeuralGame(
        tree=history_tree(game, jnp.float32),
        tensors=jnp.asarray(game.infostate_tensor, dtype=jnp.float32),
        infostate_player=jnp.asarray(game.infostate_player, dtype=jnp.int32),
        depth_index=sampler.depth_index(game),
        num_actions=game.num_actions,
        used_columns=passes.used_columns(game.infostate_tensor),
    )


@jax.tree_util.register_dataclass
@dataclass(frozen=True)
class RunState:
    """One configuration's learner: networks, optimiser states, policy table, segment metrics."""

    policy: dict
    critic: dict
    policy_opt: tuple
    critic_opt: tuple
    table: jax.Array  # [I, A] current policy
    blocked: jax.Array  # summed share of NeuRD pushes the threshold blocked, this segment
    critic_loss: jax.Array  # summed critic loss, this segment
    updates: jax.Array  # policy updates this segment


def _networks(spec: Spec, game: NeuralGame):
    """The policy and the critic modules; both are applied as ``apply(params, x, player)``."""
    return (network(spec.networks, spec.hidden, game.num_actions, spec.precision),
            network(spec.networks, spec.hidden, game.num_actions, spec.precision))


def init_weights(spec: Spec, game: NeuralGame, key: jax.Array) -> tuple[dict, dict]:
    """Policy and critic weights drawn from ``key`` (one run seed)."""
    policy_net, critic_net = _networks(spec, game)
    policy_key, critic_key = jax.random.split(key)
    x, player = game.tensors[:1], game.infostate_player[:1]
    return (policy_net.init(policy_key, x, player)["params"],
            critic_net.init(critic_key, x, player)["params"])


def init_state(spec: Spec, game: NeuralGame, policy: dict, critic: dict) -> RunState:
    policy_opt, critic_opt = optimizers(spec)
    zero = jnp.zeros((), jnp.float32)
    return RunState(
        policy=policy, critic=critic, policy_opt=policy_opt.init(policy),
        critic_opt=critic_opt.init(critic),
        table=policy_table(spec, game, policy),
        blocked=zero, critic_loss=zero, updates=zero)


def taken_values(values: jax.Array, action: jax.Array) -> jax.Array:
    """``values [M, A]`` at ``action [M]``, 0 where the action is not one of the ``A``.

    A one-hot product, not a gather: at chance and terminal steps ``action``
    is a chance outcome or a child slot, possibly ``>= A``, and the transpose
    of an out-of-range gather is a scatter whose out-of-range updates XLA's
    deterministic scatter does not drop (NaN everywhere on a GPU).
    """
    return jnp.sum(values * jax.nn.one_hot(action, values.shape[-1], dtype=values.dtype), -1)


def critic_steps(spec: Spec, game: NeuralGame, state: RunState, table: jax.Array,
                 key: jax.Array, eta, sign):
    """One configuration's step 1 (``critic_updates`` critic steps on batches sampled from
    ``table``) and the policy update's weights of step 2: ``(critic, critic optimiser state,
    summed critic loss, [I] state weights, [I, A] shares of the actions taken)``, the shares
    ``None`` unless an algorithm of ``spec`` reads the sampled actions."""
    _, critic_net = _networks(spec, game)
    _, critic_opt = optimizers(spec)
    tree, tensors = game.tree, game.tensors
    keys = jax.random.split(key, spec.critic_updates + 1)
    # every batch of the cycle samples the same policy table: one pass of the sampler
    sizes = (spec.critic_batch,) * spec.critic_updates + (spec.policy_batch,)
    batches = sampler.sample_batches(tree, table, list(keys), sizes, eta, sign)

    # 1. policy evaluation: the critic regresses Q(x, a) on sampled continuations
    critic, critic_state, critic_loss = state.critic, state.critic_opt, state.critic_loss
    for episodes in batches[:-1]:
        inputs = tensors[episodes.infostate.ravel()]

        def loss(params, episodes=episodes, inputs=inputs):
            values = critic_net.apply({"params": params}, inputs, episodes.player.ravel())
            taken = taken_values(values, episodes.action.ravel())
            return losses.critic_loss(taken, episodes.continuation.ravel(),
                                      episodes.player.ravel(), episodes.valid.ravel())

        value, grads = jax.value_and_grad(loss)(critic)
        updates, critic_state = critic_opt.update(grads, critic_state, critic)
        critic = optax.apply_updates(critic, updates)
        critic_loss = critic_loss + value

    weights = losses.state_weights(sampler.visit_counts(batches[-1], tree.num_infostates,
                                                        game.depth_index),
                                   game.infostate_player, spec.loss_normalisation,
                                   spec.policy_batch)
    taken = None
    if any(algorithms.get(a).sampled for a in spec.algorithms):
        taken = sampler.action_shares(batches[-1], tree.num_infostates, game.num_actions,
                                      game.depth_index)
    return critic, critic_state, critic_loss, weights, taken


def cycle(spec: Spec, game: NeuralGame, state: RunState, key: jax.Array, eta, sign,
          algorithm) -> RunState:
    """One learning cycle of ``N`` configurations (see the module docstring): ``state``,
    ``key [N, 2]``, ``eta [N]`` and ``algorithm [N]`` (each configuration's algorithm, its
    index in ``spec.algorithms``: :func:`logit_gradient`) batched.  The passes over every
    information state are laid out for all configurations at once by the layout
    ``spec.layout`` names (:mod:`neurd.neural.layouts`; :mod:`neurd.neural.visited`); the
    rest is each configuration's own arithmetic, under ``vmap``."""
    layout, net = cycle_layout(spec, game), network_pass(spec, game)
    each = partial(jax.vmap, in_axes=(0, 0, 0, 0, None))
    # 0. the policy network's one pass of the cycle: its outputs give the table every batch
    #    samples from, and its pullback the policy's gradient in step 2
    logits, pullback = layout.with_pullback(net, state.policy)
    table = masked_policy(logits, game.tree.legal)
    # 1. policy evaluation (the critic's steps) and the policy update's state weights
    critic, critic_state, critic_loss, weights, taken = each(
        partial(critic_steps, spec, game))(state, table, key, eta, sign)
    # 2. policy improvement at every visited information state, weighted by its visits
    #    (neurd.neural.improvement)
    grads, blocked = improve(spec, game, layout, net, state.policy, pullback, logits, table,
                             critic, weights, taken, eta, sign, algorithm)
    policy, policy_state = jax.vmap(partial(policy_step, spec))(state, grads)
    # the table stays the one this cycle sampled from: the next cycle's pass (or, after the
    # last cycle of a segment, run_segment's) makes the new one
    return RunState(policy=policy, critic=critic, policy_opt=policy_state,
                    critic_opt=critic_state, table=table, blocked=state.blocked + blocked,
                    critic_loss=critic_loss, updates=state.updates + 1)


def network_pass(spec: Spec, game: NeuralGame) -> layouts.Pass:
    """What a layout's passes read: the network (policy and critic: the same shape) and
    the game's tensors."""
    net, _ = _networks(spec, game)
    return layouts.Pass(net, spec.networks, spec.precision, game.tensors,
                        game.infostate_player, game.used_columns)


def every_state(spec: Spec, game: NeuralGame, params: dict) -> jax.Array:
    """``[N, I, A]``: the network of each of ``N`` configurations (``params`` batched) on
    every information state, laid out as ``spec.layout`` says."""
    return cycle_layout(spec, game).every(network_pass(spec, game), params)


def policy_table(spec: Spec, game: NeuralGame, policy: dict) -> jax.Array:
    """``[I, A]``: the policy table of one configuration's policy weights."""
    policy_net, _ = _networks(spec, game)
    return masked_policy(policy_net.apply({"params": policy}, game.tensors,
                                          game.infostate_player), game.tree.legal)


# the unit roundoff of the products' precision (networks.PRECISIONS): float32's 24-bit
# significand, TensorFloat-32's 11 (its products' inputs; their sums are float32)
UNIT_ROUNDOFF = {"float32": 2.0**-24, "tensorfloat32": 2.0**-11}


def policy_table_rounding(spec: Spec, game: NeuralGame, policy: dict) -> jax.Array:
    """``[I]``: at each information state, a bound on how far two float32 evaluations of
    :func:`policy_table` from the same weights can differ, whatever the order of the
    products' sums (the layout, the instruction set, the processor, with or without fused
    multiply-adds).

    Forward error analysis of the network (Higham, *Accuracy and Stability of Numerical
    Algorithms*, 2002, sec. 3.5): a sum of ``n`` products ``x_k w_k`` computed in any order
    is within ``n u sum_k |x_k w_k|`` of the exact one (to first order, ``u`` the unit
    roundoff), and ReLU passes an error on no larger, so each evaluation's logits are within
    ``sum_l (n_l + 2) u M`` of the exact ones, ``n_l`` a layer's inputs and ``M`` the network
    evaluated on the absolute values of its weights and inputs (every term counted with its
    size: what cancels in the logits is still rounded).  Two evaluations' logits are within
    twice that, and a softmax's outputs move by at most half its inputs' largest move (its
    Jacobian's rows sum to ``2 p (1 - p) <= 1/2`` in absolute value): the table's bound at a
    state is ``sum_l (n_l + 2) u M`` at its largest legal action."""
    policy_net, _ = _networks(spec, game)
    size = policy_net.apply({"params": jax.tree_util.tree_map(jnp.abs, policy)},
                            jnp.abs(game.tensors), game.infostate_player)
    widths = (game.tensors.shape[1], *spec.hidden)
    terms = sum(n + 2 for n in widths)
    largest = jnp.max(jnp.where(game.tree.legal, size, 0.0), axis=-1)
    return terms * UNIT_ROUNDOFF[spec.precision] * largest


def by_core(function, *batched):
    """``function(*batched)`` (pytrees batched on the configurations' leading axis), with
    the configurations shared between the CPU's devices
    (:func:`neurd.neural.device.cpu_devices`), each running its
    share in one program of its own (``shard_map``): a cycle's operations are small, and one
    configuration's on each core does more than each operation split between the cores.
    The batch is padded to a multiple of the devices with copies of its first
    configurations, which are dropped again.  Each configuration's arithmetic is the same
    on any number of devices (its own operations; the products' shapes are per
    configuration or per batch row): only XLA's choice of kernels for the smaller batch
    can change float rounding."""
    sizes = {leaf.shape[0] if leaf.ndim else None for leaf in jax.tree_util.tree_leaves(batched)}
    if len(sizes) != 1 or None in sizes:
        raise ValueError(f"by_core: the arrays are not batched on one leading axis (sizes "
                         f"{sorted(sizes, key=str)})")
    (n,) = sizes
    count = min(cpu_devices(), n)
    if count <= 1:
        return function(*batched)
    extra = -n % count
    padded = jax.tree_util.tree_map(lambda x: jnp.concatenate([x, x[:extra]]), batched)
    mesh = jax.sharding.Mesh(np.array(jax.local_devices(backend="cpu")[:count]),
                             ("configurations",))
    shared = jax.sharding.PartitionSpec("configurations")
    out = jax.shard_map(function, mesh=mesh, in_specs=shared, out_specs=shared,
                        check_vma=False)(*padded)
    return jax.tree_util.tree_map(lambda x: x[:n], out)


@learning_program
def run_segment(spec: Spec, game: NeuralGame, states: dict, keys: dict, etas: dict,
                first_cycle, num_cycles, sign) -> dict:
    """``num_cycles`` cycles of every configuration (``{algorithm: batched RunState}``).

    ``keys[algorithm]`` ``[N, 2]`` and ``etas[algorithm]`` ``[N]`` are per
    configuration; cycle ``c`` draws from ``fold_in(key, c)``, so a run split
    into segments draws what it would in one.  Segment metrics restart at 0.
    Every algorithm's configurations run in one ``vmap`` (half the kernels of
    one per algorithm: a cycle's time on a GPU is mostly their launches).
    """
    zero = jnp.zeros((), jnp.float32)
    algorithms = [a for a in spec.algorithms if a in states]
    sizes = [keys[a].shape[0] for a in algorithms]

    def joined(parts):
        return jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs), *parts)

    def fresh(state):
        return RunState(state.policy, state.critic, state.policy_opt, state.critic_opt,
                        state.table, zero * state.blocked, zero * state.critic_loss,
                        zero * state.updates)

    state = fresh(joined([states[a] for a in algorithms]))
    key = jnp.concatenate([keys[a] for a in algorithms])
    eta = jnp.concatenate([etas[a] for a in algorithms])
    algorithm = jnp.concatenate([jnp.full((n,), spec.algorithms.index(a), jnp.int32)
                                 for a, n in zip(algorithms, sizes)])

    def cycles(state, key, eta, algorithm):
        def body(i, state):
            cycle_keys = jax.vmap(jax.random.fold_in, in_axes=(0, None))(key, first_cycle + i)
            return cycle(spec, game, state, cycle_keys, eta, sign, algorithm)

        if spec.unroll == 1:
            state = jax.lax.fori_loop(0, num_cycles, body, state)
        else:  # the loop's body holds spec.unroll cycles; the remainder, one at a time
            def unrolled(j, state):
                for u in range(spec.unroll):
                    state = body(j * spec.unroll + u, state)
                return state

            whole = num_cycles // spec.unroll
            state = jax.lax.fori_loop(0, whole, unrolled, state)
            state = jax.lax.fori_loop(whole * spec.unroll, num_cycles, body, state)
        # each cycle computes the table it samples from; the last weights' table is made here
        return replace(state, table=masked_policy(every_state(spec, game, state.policy),
                                                  game.tree.legal))

    state = by_core(cycles, state, key, eta, algorithm)
    return dict(zip(algorithms, sampler.split_tree(state, sizes)))


@learning_program
def critic_tables(spec: Spec, game: NeuralGame, states: dict) -> dict:
    """``{algorithm: [N, I, A]}``: every configuration's critic on every information state."""
    return {a: every_state(spec, game, s.critic) for a, s in states.items()}


@learning_program
def policy_outputs(spec: Spec, game: NeuralGame, states: dict) -> dict:
    """``{algorithm: [N, I, A]}``: every configuration's policy network's raw outputs on
    every information state (the logits its table is the masked softmax of)."""
    return {a: every_state(spec, game, s.policy) for a, s in states.items()}


def game_stream_index(game: str) -> int:
    """A stable number for a game's short name, folded into its random streams."""
    return zlib.crc32(game.encode()) & 0x7FFFFFFF


def configuration_keys(seed: int, game: str, algorithm: str, entropy_indices,
                       run_seeds) -> jax.Array:
    """``[N, 2]`` training keys of configurations (algorithm, entropy level, run seed).  The
    algorithm's part is its name's (:func:`neurd.neural.algorithms.stream_index`), not its
    place in the run's list: adding or removing an algorithm changes no other's numbers."""
    gid = game_stream_index(game)
    number = algorithms.stream_index(algorithm)
    return jnp.stack([streams.key(seed, "neural.train", gid, int(s), number, int(e))
                      for e, s in zip(entropy_indices, run_seeds)])


def batch_inputs(spec: Spec, game: NeuralGame, seed: int, game_name: str, run_seeds,
                 entropies) -> tuple[dict, dict, dict]:
    """One batch's ``(states, keys, etas)``, each ``{algorithm: batched}``: every run seed at
    every entropy level, seed-major (the order of :attr:`Plan.configurations` within it)."""
    entropies = np.asarray(entropies, dtype=np.float32)
    per_seed = len(entropies)
    seeds = np.repeat(run_seeds, per_seed)
    index = np.tile(np.arange(per_seed), len(run_seeds))
    states = {a: initial_states(spec, game, seed, game_name, tuple(run_seeds), per_seed)
              for a in spec.algorithms}
    keys = {a: configuration_keys(seed, game_name, a, index, seeds) for a in spec.algorithms}
    etas = {a: jnp.asarray(entropies[index]) for a in spec.algorithms}
    return states, keys, etas


def initial_states(spec: Spec, game: NeuralGame, seed: int, game_name: str, run_seeds,
                   count_per_seed: int) -> RunState:
    """Batched initial states: each run seed's weights, repeated ``count_per_seed`` times."""
    gid = game_stream_index(game_name)
    weights = [init_weights(spec, game, streams.key(seed, "neural.init", gid, int(s)))
               for s in run_seeds]
    states = [init_state(spec, game, p, c) for p, c in weights]
    stacked = jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *states)
    return jax.tree_util.tree_map(lambda x: jnp.repeat(x, count_per_seed, axis=0), stacked)

