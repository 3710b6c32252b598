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
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

PRECISIONS = {"float32": jax.lax.Precision.HIGHEST, "tensorfloat32": jax.lax.Precision.DEFAULT}


class MLP(nn.Module):
    """``[..., T] -> [..., outputs]``: ReLU hidden layers, linear output."""

    hidden: Sequence[int]
    outputs: int
    precision: str = "float32"

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        dense = dict(dtype=jnp.float32, param_dtype=jnp.float32,
                     precision=PRECISIONS[self.precision])
        for width in self.hidden:
            x = nn.relu(nn.Dense(width, **dense)(x))
        return nn.Dense(self.outputs, **dense)(x)


def masked_policy(logits: jax.Array, legal: jax.Array) -> jax.Array:
    """Softmax over the legal actions, ``[..., A] -> [..., A]`` (zero at illegal ones)."""
    return jax.nn.softmax(jnp.where(legal, logits, -jnp.inf), axis=-1)
