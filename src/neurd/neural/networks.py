"""The policy and the critic: MLPs on the information-state tensor (flax).

The paper: "a two-layer neural network (128 hidden units)".  Reading: two
layers of weights, i.e. one hidden layer of 128 ReLU units, as OpenSpiel's own
policy-gradient examples use; ``hidden`` is the config key
``neural.hidden_sizes``.  The policy outputs one logit per action of the game
(masked to the legal ones by the softmax); the critic is a separate network of
the same shape with one action value per action (no shared torso).  Both
compute in float32, matrix products included: ``precision`` (config key
``neural.matmul_precision``) ``"float32"`` asks XLA for true float32 products
everywhere; ``"tensorfloat32"`` leaves XLA its default, which on an NVIDIA GPU
since Ampere rounds the products' inputs to TF32 (10-bit mantissa) and on a CPU
is float32 all the same.

``neural.networks``: one network for both players (``shared``, the default:
the information-state tensor tells the player) or one per player
(``per_player``, :class:`PlayerMLP`): two MLPs of the same shape, each state
read by its player's.
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

PRECISIONS = {"float32": jax.lax.Precision.HIGHEST, "tensorfloat32": jax.lax.Precision.DEFAULT}


class MLP(nn.Module):
    """``[..., T] -> [..., outputs]``: ReLU hidden layers, linear output (``player``, if
    given, is ignored: one network for both players)."""

    hidden: Sequence[int]
    outputs: int
    precision: str = "float32"

    @nn.compact
    def __call__(self, x: jax.Array, player: jax.Array | None = None) -> jax.Array:
        dense = dict(dtype=jnp.float32, param_dtype=jnp.float32,
                     precision=PRECISIONS[self.precision])
        for width in self.hidden:
            x = nn.relu(nn.Dense(width, **dense)(x))
        return nn.Dense(self.outputs, **dense)(x)


class PlayerMLP(nn.Module):
    """One :class:`MLP` per player: ``(x [..., T], player [...]) -> [..., outputs]``."""

    hidden: Sequence[int]
    outputs: int
    precision: str = "float32"

    @nn.compact
    def __call__(self, x: jax.Array, player: jax.Array) -> jax.Array:
        first, second = (MLP(self.hidden, self.outputs, self.precision, name=f"player_{p}")(x)
                         for p in (0, 1))
        return jnp.where((player == 1)[..., None], second, first)


NETWORKS = ("shared", "per_player")


def network(networks: str, hidden: Sequence[int], outputs: int, precision: str = "float32"):
    """The module of ``neural.networks``; call it as ``apply(params, x, player)`` either way."""
    if networks == "shared":
        return MLP(hidden, outputs, precision)
    if networks == "per_player":
        return PlayerMLP(hidden, outputs, precision)
    raise ValueError(f"unknown networks {networks!r}: one of {NETWORKS}")


def masked_policy(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Softmax over the legal actions, ``[..., A] -> [..., A]`` (zero at illegal ones)."""
    return jax.nn.softmax(jnp.where(legal, logits, -jnp.inf), axis=-1)
