"""How a cycle's passes over every information state are laid out: the **layouts**.

A learning cycle (:func:`neurd.neural.train.cycle`) evaluates the policy
network of every configuration on every information state, pulls its gradient
back through that pass, and evaluates the critic on every information state.
The input of these passes, the information-state tensor ``X [I, T]``, is the
same for every configuration; only the weights differ.  A **layout** is how
those passes are computed for ``N`` configurations at once: an object with
three methods (:class:`Layout`), registered by name in :data:`LAYOUTS`.  The
config-free run-time knob ``Spec.layout`` names one (the default,
``auto``, is the layout :data:`AUTO` names for the backend: ``map_used`` on a
CPU, and ``vmap``, the program as it was first written, on the backends it
names none for).  Every layout computes the same function of the same weights,
in float32: they differ by float rounding only (the order of a product's sums),
and each repeats bit for bit on the same machine.

* ``vmap``: each configuration's pass under one ``vmap`` (flax's modules).
  XLA's CPU backend (JAX 0.10) already turns the vmapped first layer into one
  product of ``X`` with every configuration's weights side by side, and its
  weight gradient into one product too.
* ``vmap_used``: ``vmap``, on the columns of ``X`` that are non-zero at some
  information state only.  The others multiply their weights by exact zeros
  (their weights get a zero gradient and never move), so dropping them changes
  no number but the order of sums; Goofspiel's tensor has 50 such columns of
  101, Leduc's 25 of 30, Kuhn's 8 of 11.
* ``joined``: the first layer written explicitly as one product of ``X`` with
  every configuration's first-layer weights side by side, ``[T, N*H]`` (its
  pullback, the weight gradient, one product ``X^T [I, N*H]``); later layers
  are products batched over the configurations.
* ``joined_used``: ``joined`` on the non-zero columns only.
* ``map``: one configuration at a time (``lax.map``), so that a
  configuration's hidden layer (``I x H``, 1 MiB for Goofspiel) stays in the
  CPU's cache, where the products of every configuration at once (``I x N x
  H``, 65 MiB at ``N = 60``) go through memory; the pullback maps over the
  configurations too, recomputing each one's forward pass (cheaper than storing
  it).  The first layer's weight gradient is formed as ``X^T G``
  (:func:`neurd.neural.passes.first_product`), ``G`` in the layout the pass
  left it in: XLA's own transpose rule forms ``(G^T X)^T``, a copy of ``G``
  and a product that XLA's CPU backend runs several times slower
  (``bench/profile_cycle.py``; ``bench/NEURAL.md``).  One configuration a step,
  as a batch of one (``lax.map``'s ``batch_size=1``): XLA's CPU backend runs
  that program faster than the unbatched one, and faster than batches of
  several configurations, whose batched products of the pullback take slow
  paths (a cycle's operations under either: ``bench/profile_cycle.py``).
* ``map_used``: ``map`` on the non-zero columns only.
* ``map_visited``: ``map_used``, and step 2's passes (the critic's pass, the
  policy's pullback with its recomputed forward pass) over the information states the
  policy update's episodes visited only, not every one: the policy loss weights each state by
  its visits, and for a *weighted* algorithm (:mod:`neurd.neural.algorithms`, every
  built-in one) a state of weight 0 adds nothing to the loss nor to its gradient, so
  the others add exact zeros to the gradient (a run naming another algorithm passes
  over every state).
  The cycle's first pass (the policy table the episodes are sampled from) still covers
  every state.  The visited states are at most, at each depth of an episode, the
  states there or the update's episodes, whichever is fewer
  (:func:`neurd.neural.visited.visited_capacity`, a static size): for Goofspiel's
  2124 information states and an update of 256 episodes 800, for Leduc 922 of 936,
  for Kuhn all 12.  Only a game where every information state lies at one depth
  has that bound (``NeuralGame.depth_index``); elsewhere the layout is refused.
* ``vmap_visited``: ``vmap_used``, step 2's passes over the visited states only
  (for a GPU allocation to time).

``auto`` on a CPU is ``map_visited`` for a game where the visited states are at
most :data:`VISITED_SHARE` of every one (Goofspiel's cycle, ``bench/NEURAL.md``), else
``map_used`` (Leduc's bound, 922 of 936, saves nothing and its gathers cost time).

On the CPU the joined layouts are slower than the vmapped ones
(``bench/NEURAL.md``): the product is the same one XLA forms, and the hidden
layer's ``[I, N, H]`` layout costs transposes; they are kept for backends
where XLA does not join the products itself.  The per-player networks
(``neural.networks: per_player``) are two MLPs per configuration: the joined
layouts treat them as ``2N`` configurations.

**A layout of your own** is one subclass of :class:`Layout` (its
:meth:`~Layout.every`, and :meth:`~Layout.with_pullback` where the
differentiated :meth:`~Layout.every` is not the program wanted), registered with
:func:`register`; ``Spec(layout=<its name>)`` then runs it, and
``tests/test_neural_variants.py`` checks it against ``vmap`` when it is listed
there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

import flax.linen as nn
import jax

from neurd.neural import passes


@dataclass(frozen=True)
class Pass:
    """One network's pass over every information state: what a layout reads.

    ``module``: the flax module (policy and critic are the same shape);
    ``networks``: ``neural.networks`` (``shared`` or ``per_player``);
    ``precision``: the products' (:data:`neurd.neural.networks.PRECISIONS`);
    ``tensors [I, T]`` and ``players [I]``: the game's; ``columns``: the runs of the
    tensor's non-zero columns (:func:`neurd.neural.passes.used_columns`).
    """

    module: nn.Module
    networks: str
    precision: str
    tensors: jax.Array
    players: jax.Array
    columns: tuple
    sliced: bool = False  # tensors hold the columns already (at_rows)


class Layout:
    """A layout of the passes (see the module).  ``name``: its registry key; ``summary``:
    one line; ``used_columns``: whether its passes read the tensor's non-zero columns only;
    ``visited``: whether step 2's passes (the critic's, the policy's pullback) cover the
    policy update's visited states only (:meth:`every_at`, :meth:`pullback_at`).

    ``params`` below are one configuration's network weights for :meth:`one`, and ``N``
    configurations' (batched on a leading axis) for :meth:`every` and
    :meth:`with_pullback`.
    """

    def __init__(self, name: str, summary: str, used_columns: bool = False,
                 visited: bool = False):
        self.name, self.summary, self.used_columns = name, summary, used_columns
        self.visited = visited

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def runs(self, net: Pass):
        """The column runs the passes read (``None``: every column)."""
        return net.columns if self.used_columns else None

    def one(self, net: Pass, params: dict) -> jax.Array:
        """``[I, A]``: one configuration's network on every information state."""
        if not self.used_columns:
            return net.module.apply({"params": params}, net.tensors, net.players)
        return passes.apply_one(net.networks, params, net.tensors, net.players,
                                net.precision, self.runs(net), sliced=net.sliced)

    def every(self, net: Pass, params: dict) -> jax.Array:
        """``[N, I, A]``: each of ``N`` configurations' network on every information state."""
        return jax.vmap(partial(self.one, net))(params)

    def with_pullback(self, net: Pass, params: dict) -> tuple[jax.Array, Callable]:
        """``(outputs [N, I, A], pullback)``: :meth:`every`, and the function taking a
        gradient in its outputs to one in ``params`` (the policy's in a cycle)."""
        outputs, pullback = jax.vjp(partial(self.every, net), params)
        return outputs, lambda by_outputs: pullback(by_outputs)[0]

    def every_at(self, net: Pass, params: dict, rows: jax.Array) -> jax.Array:
        """``[N, R, A]``: each of ``N`` configurations' network on its own ``R`` information
        states ``rows [N, R]`` (the visited ones: :func:`neurd.neural.visited.visited_rows`)."""
        return jax.vmap(lambda p, r: self.one(at_rows(net, r, self.runs(net)), p))(params,
                                                                                    rows)

    def pullback_at(self, net: Pass, params: dict, rows: jax.Array) -> Callable:
        """The function taking a gradient in :meth:`every_at`'s outputs to one in
        ``params``, the forward pass on the rows recomputed."""
        return lambda by_outputs: jax.vjp(lambda p: self.every_at(net, p, rows), params)[1](
            by_outputs)[0]


def at_rows(net: Pass, rows: jax.Array, runs=None) -> Pass:
    """``net`` on the information states ``rows`` only (their tensors and players); with
    ``runs`` (the columns a layout reads), the tensors on those columns, cut before the rows
    are gathered (so that the cut, the same for every configuration, is made once)."""
    if runs is None:
        return Pass(net.module, net.networks, net.precision, net.tensors[rows],
                    net.players[rows], net.columns)
    return Pass(net.module, net.networks, net.precision,
                passes.columns(net.tensors, runs)[rows], net.players[rows], net.columns,
                sliced=True)


class Vmapped(Layout):
    """Each configuration's pass under one ``vmap`` (:class:`Layout`'s own methods)."""


class Joined(Layout):
    """The first layer one product of the tensor with every configuration's weights side by
    side (:func:`neurd.neural.passes.apply_all`)."""

    def every(self, net: Pass, params: dict) -> jax.Array:
        return passes.apply_all(net.networks, params, net.tensors, net.players, net.precision,
                                self.runs(net))


class Mapped(Layout):
    """One configuration at a time (``lax.map``, ``group`` configurations to a step of its
    loop: its ``batch_size``, a word this project keeps for a program's configurations), the
    pullback recomputing each configuration's forward pass, the first layer's weight
    gradient formed as ``X^T G`` (:func:`neurd.neural.passes.first_product`)."""

    def __init__(self, name: str, summary: str, used_columns: bool = False,
                 visited: bool = False, group: int = 1):
        super().__init__(name, summary, used_columns, visited)
        self.group = group

    def one(self, net: Pass, params: dict) -> jax.Array:
        return passes.apply_one(net.networks, params, net.tensors, net.players, net.precision,
                                self.runs(net), own_pullback=True, sliced=net.sliced)

    def every(self, net: Pass, params: dict) -> jax.Array:
        return jax.lax.map(partial(self.one, net), params, batch_size=self.group)

    def with_pullback(self, net: Pass, params: dict) -> tuple[jax.Array, Callable]:
        one = partial(self.one, net)

        def pullback(by_outputs):
            return jax.lax.map(lambda pair: jax.vjp(one, pair[0])[1](pair[1])[0],
                               (params, by_outputs), batch_size=self.group)

        return self.every(net, params), pullback

    def every_at(self, net: Pass, params: dict, rows: jax.Array) -> jax.Array:
        runs = self.runs(net)
        return jax.lax.map(lambda pair: self.one(at_rows(net, pair[1], runs), pair[0]),
                           (params, rows), batch_size=self.group)

    def pullback_at(self, net: Pass, params: dict, rows: jax.Array) -> Callable:
        runs = self.runs(net)

        def one(params, rows, by_outputs):
            return jax.vjp(lambda p: self.one(at_rows(net, rows, runs), p),
                           params)[1](by_outputs)[0]

        return lambda by_outputs: jax.lax.map(lambda t: one(*t), (params, rows, by_outputs),
                                              batch_size=self.group)


LAYOUTS: dict[str, Layout] = {}


def register(layout: Layout) -> Layout:
    """Add ``layout`` to :data:`LAYOUTS` under its name (refused if the name is taken or is
    ``auto``); returns it."""
    if not isinstance(layout, Layout):
        raise TypeError(f"{layout!r} is not a neurd.neural.layouts.Layout")
    if layout.name == DEFAULT or layout.name in LAYOUTS:
        raise ValueError(f"a layout named {layout.name!r} is already registered")
    LAYOUTS[layout.name] = layout
    return layout


DEFAULT = "auto"
for _layout in (
        Vmapped("vmap", "each configuration's passes under one vmap (flax's modules), as the "
                "cycle was first written"),
        Vmapped("vmap_used", "vmap, the passes over every information state on the "
                "information-state tensor's non-zero columns only", used_columns=True),
        Joined("joined", "the passes over every information state as one explicit product "
               "for all configurations ([T, N*H]), outside the vmap"),
        Joined("joined_used", "joined, on the information-state tensor's non-zero columns "
               "only", used_columns=True),
        # a batch of one, not lax.map's unbatched default (see the module docstring)
        Mapped("map", "the passes over every information state one configuration at a time "
               "(lax.map), the pullback recomputing its configuration's forward pass and "
               "forming the first layer's weight gradient as X^T G"),
        Mapped("map_used", "map, on the information-state tensor's non-zero columns only",
               used_columns=True),
        Mapped("map_visited", "map_used, the critic's pass and the policy's pullback over "
               "the information states the policy update's episodes visited only",
               used_columns=True, visited=True),
        Vmapped("vmap_visited", "vmap_used, the critic's pass and the policy's pullback "
                "over the information states the policy update's episodes visited only",
                used_columns=True, visited=True)):
    register(_layout)

# the default: the layout named here for the backend the program is compiled for.  On a
# CPU, map_used runs Goofspiel's and Leduc's cycles fastest of the layouts over every
# information state at every size measured (bench/NEURAL.md), and map_visited Goofspiel's
# faster still (VISITED); a GPU allocation times every layout on its card and picks one
AUTO: dict[str, str] = {"cpu": "map_used"}
AUTO_ELSEWHERE = "vmap"  # as measured on a GPU before the layouts existed
# where the visited states are at most this share of every one, auto is the backend's
# VISITED layout: step 2's passes then cost at most this share of theirs over every state
VISITED: dict[str, str] = {"cpu": "map_visited"}
VISITED_SHARE = 0.75


def names() -> tuple[str, ...]:
    """Every name a run may give: ``auto`` first, then the registered layouts, sorted."""
    return (DEFAULT, *sorted(LAYOUTS))


def check(name) -> str:
    """``name`` if it names a layout (or ``auto``); ValueError naming the choices."""
    if not (isinstance(name, str) and name in names()):
        raise ValueError(f"unknown cycle variant {name!r}: one of {sorted(LAYOUTS)} "
                         f"or {DEFAULT!r}")
    return name


def _check_share(visited_share) -> None:
    if visited_share is not None and not (isinstance(visited_share, (int, float))
                                          and not isinstance(visited_share, bool)
                                          and 0 < visited_share <= 1):
        raise ValueError(f"visited_share {visited_share!r} is not a share in (0, 1] "
                         "(neurd.neural.visited.visited_share) or None")


def resolve(name: str, visited_share: float | None = None) -> str:
    """The layout a program runs: ``auto`` is :data:`AUTO`'s for the default backend
    (decided when the program is traced, as :func:`neurd.neural.sampler.visit_counts`), or
    its :data:`VISITED` layout where the game's visited states are at most
    :data:`VISITED_SHARE` of every one.  ``visited_share``: that share
    (:func:`neurd.neural.visited.visited_share`; ``None``: none)."""
    check(name)
    _check_share(visited_share)
    if name != DEFAULT:
        return name
    backend = jax.default_backend()
    if visited_share is not None and visited_share <= VISITED_SHARE and backend in VISITED:
        return VISITED[backend]
    return AUTO.get(backend, AUTO_ELSEWHERE)


def get(name: str, visited_share: float | None = None) -> Layout:
    """The :class:`Layout` ``name`` resolves to (:func:`resolve`)."""
    return LAYOUTS[resolve(name, visited_share)]
