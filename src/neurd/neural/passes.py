"""A network's pass over every information state, for every configuration at once.

A cycle (:mod:`neurd.neural.train`) evaluates the policy network on every
information state, pulls its gradient back through that pass, and evaluates
the critic on every information state.  The input of these passes, the
information-state tensor ``X [I, T]``, is the same for every configuration;
only the weights differ.  How the passes are computed is a **variant**
(``Spec.cycle_variant``; :data:`VARIANTS`; the default, ``auto``, is the variant
:data:`AUTO` names for the backend: ``map_used`` on a CPU, and ``vmap``, the program as
it was before the variants, on the backends it names none for).  Every variant
computes the same function of the same weights, in float32: they differ by
float rounding only (the order of a product's sums), and each repeats bit for
bit on the same machine.

* ``vmap``: the cycle as first written: each configuration's whole cycle under
  one ``vmap``, its passes included (flax's modules).  XLA's CPU backend (JAX
  0.10) already turns the vmapped first layer into one product of ``X`` with
  every configuration's weights side by side, and its weight gradient into
  one product too.
* ``vmap_used``: ``vmap``, with the passes over every information state on
  the columns of ``X`` that are non-zero at some information state only.  The
  others multiply their weights by exact zeros (their weights get a zero
  gradient and never move), so dropping them changes no number but the order
  of sums; Goofspiel's tensor has 50 such columns of 101, Leduc's 25 of 30,
  Kuhn's 8 of 11.
* ``joined``: the passes taken out of the ``vmap`` and the first layer written
  explicitly as one product of ``X`` with every configuration's first-layer
  weights side by side, ``[T, N*H]`` (its pullback, the weight gradient, one
  product ``X^T [I, N*H]``); later layers are products batched over the
  configurations, the rest of the cycle under ``vmap``.
* ``joined_used``: ``joined`` on the non-zero columns only.
* ``map``: the passes taken out of the ``vmap`` and computed one
  configuration at a time (``lax.map``), so that a configuration's hidden
  layer (``I x H``, 1 MiB for Goofspiel) stays in the CPU's cache, where the
  products of every configuration at once (``I x N x H``, 65 MiB at
  ``N = 60``) go through memory; the pullback maps over the configurations
  too, recomputing each one's forward pass (cheaper than storing it).  The
  first layer's weight gradient is formed as ``X^T G`` (:func:`first_product`),
  ``G`` in the layout the pass left it in: XLA's own transpose rule forms
  ``(G^T X)^T``, a copy of ``G`` and a product that XLA's CPU backend runs
  several times slower (``bench/profile_cycle.py``; ``bench/NEURAL.md``).
  One configuration a step, as a batch of one (``lax.map``'s
  ``batch_size=1``): XLA's CPU backend runs that program faster than the
  unbatched one, and faster than batches of several configurations, whose
  batched products of the pullback take slow paths (``MAP_BATCH``; a cycle's
  operations under either: ``bench/profile_cycle.py``).
* ``map_used``: ``map`` on the non-zero columns only.

On the CPU the joined variants are slower than the vmapped ones
(``bench/NEURAL.md``): the product is the same one XLA forms, and the
hidden layer's ``[I, N, H]`` layout costs transposes; they are kept for
backends where XLA does not join the products itself.

The per-player networks (``neural.networks: per_player``) are two MLPs per
configuration: the joined variants treat them as ``2N`` configurations.
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from neurd.neural.networks import PRECISIONS

VARIANTS = {
    "vmap": "each configuration's cycle under one vmap, passes included (flax's modules)",
    "vmap_used": "vmap, the passes over every information state on the information-state "
                 "tensor's non-zero columns only",
    "joined": "the passes over every information state as one explicit product for all "
              "configurations ([T, N*H]), outside the vmap",
    "joined_used": "joined, on the information-state tensor's non-zero columns only",
    "map": "the passes over every information state one configuration at a time "
           "(lax.map), the pullback recomputing its configuration's forward pass and "
           "forming the first layer's weight gradient as X^T G",
    "map_used": "map, on the information-state tensor's non-zero columns only",
}
# the default: the variant named here for the backend the program is compiled for.  On a
# CPU, map_used runs Goofspiel's and Leduc's cycles fastest of the variants at every size
# measured (bench/NEURAL.md); a GPU allocation times every variant on its card and picks one
DEFAULT = "auto"
AUTO: dict[str, str] = {"cpu": "map_used"}
AUTO_ELSEWHERE = "vmap"  # as measured on a GPU before the variants existed


def resolve(variant: str) -> str:
    """The variant a program runs: ``auto`` is :data:`AUTO`'s for the default backend
    (decided when the program is traced, as :func:`neurd.neural.sampler.visit_counts`)."""
    if variant != DEFAULT:
        return variant
    return AUTO.get(jax.default_backend(), AUTO_ELSEWHERE)


def is_vmapped(variant: str) -> bool:
    """Whether the variant runs each configuration's whole cycle under one ``vmap``."""
    return resolve(variant).startswith("vmap")


def is_joined(variant: str) -> bool:
    """Whether the variant's passes are one product for all configurations."""
    return resolve(variant).startswith("joined")


def is_mapped(variant: str) -> bool:
    """Whether the variant's passes loop over the configurations."""
    return resolve(variant).startswith("map")


def uses_columns(variant: str) -> bool:
    """Whether the variant's passes use the tensor's non-zero columns only."""
    return resolve(variant).endswith("_used")


# configurations per step of a mapped variant's loop, passed as lax.map's batch_size: a
# batch of one, not lax.map's unbatched default (see the module docstring)
MAP_BATCH = 1


def check_variant(variant: str) -> str:
    if variant != DEFAULT and variant not in VARIANTS:
        raise ValueError(f"unknown cycle variant {variant!r}: one of {sorted(VARIANTS)}")
    return variant


def used_columns(tensors) -> tuple[tuple[int, int], ...]:
    """The runs ``(start, stop)`` of the columns of ``tensors [I, T]`` non-zero somewhere
    (static: the slices' transposes are pads, so the pullback needs no scatter)."""
    used = np.flatnonzero(np.any(np.asarray(tensors) != 0, axis=0))
    if used.size == 0:
        return ()
    breaks = np.flatnonzero(np.diff(used) > 1)
    starts = np.concatenate([[used[0]], used[breaks + 1]])
    stops = np.concatenate([used[breaks], [used[-1]]]) + 1
    return tuple((int(a), int(b)) for a, b in zip(starts, stops))


def _columns(array: jax.Array, runs, axis: int) -> jax.Array:
    return jnp.concatenate([jax.lax.slice_in_dim(array, a, b, axis=axis) for a, b in runs],
                           axis=axis)


def _layers(params: dict) -> list[tuple[jax.Array, jax.Array]]:
    """An MLP's ``(kernel, bias)`` per layer, in order (flax's ``Dense_0``, ``Dense_1``...)."""
    names = sorted(params, key=lambda name: int(name.rsplit("_", 1)[1]))
    return [(params[name]["kernel"], params[name]["bias"]) for name in names]


def mlp_all(params: dict, tensors: jax.Array, precision: str, runs=None) -> jax.Array:
    """``[N, I, outputs]``: the MLP of each of ``N`` configurations (``params`` batched on
    a leading axis) on every row of ``tensors [I, T]``, the first layer one product.

    ``runs``: the tensor's columns to use (:func:`used_columns`), or ``None`` for all.
    """
    layers = _layers(params)
    (kernel, bias), rest = layers[0], layers[1:]
    if runs is not None:
        tensors, kernel = _columns(tensors, runs, 1), _columns(kernel, runs, 1)
    n, t, h = kernel.shape
    side_by_side = jnp.moveaxis(kernel, 0, 1).reshape(t, n * h)
    x = jnp.dot(tensors, side_by_side, precision=PRECISIONS[precision])
    x = x.reshape(tensors.shape[0], n, h) + bias  # [I, N, H]
    for kernel, bias in rest:
        x = jnp.einsum("inh,nho->ino", jax.nn.relu(x), kernel,
                       precision=PRECISIONS[precision]) + bias
    return jnp.moveaxis(x, 1, 0)


def apply_all(networks: str, params: dict, tensors: jax.Array, players: jax.Array,
              precision: str, runs=None) -> jax.Array:
    """``[N, I, A]``: what :func:`neurd.neural.networks.network`'s module gives each of
    ``N`` configurations (``params`` batched) on every information state."""
    if networks == "shared":
        return mlp_all(params, tensors, precision, runs)
    n = jax.tree_util.tree_leaves(params)[0].shape[0]
    both = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a, b]), params["player_0"],
                                  params["player_1"])
    out = mlp_all(both, tensors, precision, runs)
    return jnp.where((players == 1)[None, :, None], out[n:], out[:n])


@partial(jax.custom_vjp, nondiff_argnums=(2,))
def first_product(tensors: jax.Array, kernel: jax.Array, precision: str) -> jax.Array:
    """``tensors [I, T] @ kernel [T, H]``, whose pullback forms the weight gradient as
    ``tensors^T G`` (``G [I, H]`` as it comes); the tensors get no gradient (a constant)."""
    return jnp.dot(tensors, kernel, precision=PRECISIONS[precision])


def _first_forward(tensors, kernel, precision):
    return first_product(tensors, kernel, precision), tensors


def _first_pullback(precision, tensors, by_output):
    return (jnp.zeros_like(tensors),
            jnp.dot(tensors.T, by_output, precision=PRECISIONS[precision]))


first_product.defvjp(_first_forward, _first_pullback)


def mlp_one(params: dict, tensors: jax.Array, precision: str, runs=None,
            own_pullback: bool = False) -> jax.Array:
    """``[I, outputs]``: one configuration's MLP on every row of ``tensors [I, T]``, on the
    columns ``runs`` only (``None``: all), as flax's ``MLP`` computes it otherwise.

    ``own_pullback``: the first layer is :func:`first_product` (the mapped variants; under
    ``vmap`` XLA's own pullback is faster)."""
    layers = _layers(params)
    (kernel, bias), rest = layers[0], layers[1:]
    if runs is not None:
        tensors, kernel = _columns(tensors, runs, 1), _columns(kernel, runs, 0)
    if own_pullback:
        x = first_product(tensors, kernel, precision) + bias
    else:
        x = jnp.dot(tensors, kernel, precision=PRECISIONS[precision]) + bias
    for kernel, bias in rest:
        x = jnp.dot(jax.nn.relu(x), kernel, precision=PRECISIONS[precision]) + bias
    return x


def apply_one(networks: str, params: dict, tensors: jax.Array, players: jax.Array,
              precision: str, runs=None, own_pullback: bool = False) -> jax.Array:
    """``[I, A]``: one configuration's network (``neural.networks``) on every information
    state, as :func:`neurd.neural.networks.network`'s module gives it (``runs``,
    ``own_pullback``: :func:`mlp_one`'s)."""
    if networks == "shared":
        return mlp_one(params, tensors, precision, runs, own_pullback)
    first, second = (mlp_one(params[f"player_{p}"], tensors, precision, runs, own_pullback)
                     for p in (0, 1))
    return jnp.where((players == 1)[:, None], second, first)
