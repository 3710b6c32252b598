"""Matrix games of the paper: repeated matching pennies (Figs 1-2).

The "even" player's utility vector for one round of matching pennies, given
the "odd" player's action, over the actions (H, T) or (H, T, Forfeit).  The
paper states rewards of +1 (match) and -1 (mismatch); Forfeit always loses.
``win`` and ``loss`` are parameters because the paper's own numbers (Fig 2's
step size, footnote 2's regret bound) are reproduced with win = 1, loss = 0,
which is the same game up to an affine change of rewards (see the README).
"""

from __future__ import annotations

import jax.numpy as jnp

HEADS, TAILS, FORFEIT = 0, 1, 2
ACTION_NAMES = ("H", "T", "F")


def matching_pennies_utilities(
    odd_plays_heads: jnp.ndarray, forfeit: bool, win: float = 1.0, loss: float = -1.0
) -> jnp.ndarray:
    """Utilities of the even player, ``[...] (bool) -> [..., 2 or 3]``.

    H wins when odd plays H, T wins when odd plays T, F always loses.
    """
    heads = jnp.where(odd_plays_heads, win, loss)
    tails = jnp.where(odd_plays_heads, loss, win)
    columns = [heads, tails]
    if forfeit:
        columns.append(jnp.full_like(heads, loss))
    return jnp.stack(columns, axis=-1)
