"""Step 2 of a cycle over the information states the policy update's episodes visited: which
they can be, and which layout a cycle runs.

The policy loss weights each information state by its visits in the policy update's episodes
(:mod:`neurd.neural.losses`); for a *weighted* algorithm (:mod:`neurd.neural.algorithms`)
a state of weight 0 adds nothing to the loss nor to its gradient, so step 2's passes (the
critic's, the policy's pullback) need only the visited states.  Their number is bounded
in advance where every information state lies at one depth of an episode (a game's
``depth_index``): at each depth, the states there or the batch's episodes, whichever is
fewer (:func:`visited_capacity`).  The layouts that use this (``map_visited``,
``vmap_visited``: :mod:`neurd.neural.layouts`) read the rows :func:`visited_rows` gives;
``auto`` picks one where the bound is a small enough share of the states
(:func:`visited_share`, :func:`cycle_layout`).  ``spec`` is a
:class:`neurd.neural.train.Spec` and ``game`` a :class:`neurd.neural.train.NeuralGame`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from neurd.neural import algorithms, layouts


def visited_capacity(spec, game) -> int | None:
    """How many information states a policy update's episodes can visit at most: at each depth, the
    states there or the batch's episodes, whichever is fewer (an episode takes one step
    at each depth); ``None`` for a game where an information state lies at several depths
    (no ``depth_index``)."""
    if game.depth_index is None:
        return None
    return sum(min(int(g.shape[0]), spec.policy_batch) for g in game.depth_index.infostates)


def visited_share(spec, game) -> float | None:
    """:func:`visited_capacity` over the game's information states, what ``auto`` reads
    (:func:`neurd.neural.layouts.resolve`); ``None`` where the game has no such bound or an
    algorithm of ``spec`` is not weighted (:mod:`neurd.neural.algorithms`: its loss may read
    the states of weight 0)."""
    capacity = visited_capacity(spec, game)
    if capacity is None or not all(algorithms.get(a).weighted for a in spec.algorithms):
        return None
    return capacity / game.tree.num_infostates


def cycle_layout(spec, game) -> layouts.Layout:
    """The layout ``spec.layout`` resolves to for ``game`` (:func:`neurd.neural.layouts.get`);
    a layout of the visited states is refused for a game with no bound on them and for a
    spec naming an algorithm that is not weighted."""
    share = visited_share(spec, game)
    layout = layouts.get(spec.layout, share)
    if layout.visited and visited_capacity(spec, game) is None:
        raise ValueError(f"layout {layout.name!r} passes over the visited information states "
                         "only, which needs a game where every information state lies at one "
                         "depth; this game has states at several: use another layout")
    if layout.visited and share is None:
        unweighted = [a for a in spec.algorithms if not algorithms.get(a).weighted]
        raise ValueError(f"layout {layout.name!r} passes over the visited information states "
                         f"only, and the loss of {', '.join(map(repr, unweighted))} may read "
                         "the others (registered without weighted=True: "
                         "neurd.neural.algorithms): use another layout")
    return layout


def visited_rows(spec, game, weights: jax.Array):
    """``(rows [R], kept [R])``: information states holding every one of positive
    ``weights [I]`` (``R``: :func:`visited_capacity`); ``kept`` is False where a row only
    fills the array (a copy of another, to be given no weight).  Gathers and comparisons
    only: nothing scatters (a GPU's deterministic scatter sorts its indices every cycle)."""
    rows, kept = [], []
    for group in game.depth_index.infostates:
        size = int(group.shape[0])
        if size <= spec.policy_batch:
            rows.append(group)
            kept.append(jnp.ones(size, bool))
            continue
        # the k-th visited state of the group is where the running count of visited ones
        # first reaches k: a binary search of gathers (no scatter, as jnp.nonzero's)
        running = jnp.cumsum(weights[group] > 0, dtype=jnp.int32)
        wanted = jnp.arange(1, spec.policy_batch + 1, dtype=jnp.int32)
        index = jnp.searchsorted(running, wanted, side="left", method="scan")
        rows.append(group[jnp.minimum(index, size - 1)])
        kept.append(wanted <= running[-1])
    return jnp.concatenate(rows), jnp.concatenate(kept)
