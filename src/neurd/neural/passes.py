"""A network's pass over every information state: the arithmetic the layouts are made of.

:mod:`neurd.neural.layouts` lays a cycle's passes out for ``N`` configurations at
once; the functions here compute them as flax's modules
(:mod:`neurd.neural.networks`) do, written out so that a layout can choose the
columns of the information-state tensor it reads (:func:`used_columns`), join
every configuration's first layer into one product (:func:`apply_all`), or form
the first layer's weight gradient as ``X^T G`` (:func:`first_product`); a kernel is cut
to the columns read by one gather (:func:`kernel_rows`).
"""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from neurd.neural.networks import PRECISIONS


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


def columns(tensors: jax.Array, runs) -> jax.Array:
    """``tensors [I, T]`` on the columns ``runs`` only (:func:`used_columns`)."""
    return _columns(tensors, runs, 1)


def _columns(array: jax.Array, runs, axis: int) -> jax.Array:
    return jnp.concatenate([jax.lax.slice_in_dim(array, a, b, axis=axis) for a, b in runs],
                           axis=axis)


def _index(runs) -> np.ndarray:
    """The columns of ``runs`` as one index, in order."""
    return np.concatenate([np.arange(a, b) for a, b in runs])


def kernel_rows(kernel: jax.Array, runs) -> jax.Array:
    """``kernel [T, H]`` on the rows ``runs`` only (:func:`used_columns`), in order: one
    gather, where a slice per run and their concatenation are some tens of operations in
    every configuration's pass (Goofspiel's 50 columns are 14 runs); its pullback puts the
    gradient back in place with a gather too (a zero row for the rows not read), not a
    scatter.  The same numbers as the slices, bit for bit."""
    return _kernel_rows(kernel, runs, kernel.shape[0])


@partial(jax.custom_vjp, nondiff_argnums=(1, 2))
def _kernel_rows(kernel, runs, total):
    return kernel[_index(runs)]


def _rows_forward(kernel, runs, total):
    return _kernel_rows(kernel, runs, total), None


def _rows_pullback(runs, total, _, by_rows):
    index = _index(runs)
    back = np.full(total, index.size)  # the rows not read take the zero row
    back[index] = np.arange(index.size)
    padded = jnp.concatenate([by_rows, jnp.zeros((1, *by_rows.shape[1:]), by_rows.dtype)])
    return (padded[back],)


_kernel_rows.defvjp(_rows_forward, _rows_pullback)


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
            own_pullback: bool = False, sliced: bool = False) -> jax.Array:
    """``[I, outputs]``: one configuration's MLP on every row of ``tensors [I, T]``, on the
    columns ``runs`` only (``None``: all), as flax's ``MLP`` computes it otherwise.

    ``own_pullback``: the first layer is :func:`first_product` (the mapped layouts; under
    ``vmap`` XLA's own pullback is faster); ``sliced``: ``tensors`` hold the columns
    ``runs`` already (:func:`columns`), only the first layer's kernel is cut to them."""
    layers = _layers(params)
    (kernel, bias), rest = layers[0], layers[1:]
    if runs is not None:
        kernel = kernel_rows(kernel, runs)
        tensors = tensors if sliced else _columns(tensors, runs, 1)
    if own_pullback:
        x = first_product(tensors, kernel, precision) + bias
    else:
        x = jnp.dot(tensors, kernel, precision=PRECISIONS[precision]) + bias
    for kernel, bias in rest:
        x = jnp.dot(jax.nn.relu(x), kernel, precision=PRECISIONS[precision]) + bias
    return x


def apply_one(networks: str, params: dict, tensors: jax.Array, players: jax.Array,
              precision: str, runs=None, own_pullback: bool = False,
              sliced: bool = False) -> jax.Array:
    """``[I, A]``: one configuration's network (``neural.networks``) on every information
    state, as :func:`neurd.neural.networks.network`'s module gives it (``runs``,
    ``own_pullback``, ``sliced``: :func:`mlp_one`'s)."""
    if networks == "shared":
        return mlp_one(params, tensors, precision, runs, own_pullback, sliced)
    first, second = (mlp_one(params[f"player_{p}"], tensors, precision, runs, own_pullback,
                             sliced) for p in (0, 1))
    return jnp.where((players == 1)[:, None], second, first)
