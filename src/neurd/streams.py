"""Named random streams: every random draw of the pipeline, from the one global seed.

Each experiment that draws random numbers owns a stream, a fixed number
folded into the global seed's key; further indices (a run's seed, its
configuration) are folded in after it.  Streams are listed here, once, so
two experiments can never draw the same numbers by accident, and a draw
depends only on (seed, stream, indices) -- never on how many other draws
were made before it or on how the work is split between jobs.
"""

from __future__ import annotations

# stream name -> the number folded into the global seed's key.  Never reuse or
# renumber one: the tables of earlier runs were drawn from these.
STREAMS = {
    "rps.biased": 1,  # Fig 4a's initial policies
    "rps.nonstationary": 2,  # Fig 5's initial policies
    "neural.init": 3,  # Fig 6: network weights, per run seed
    "neural.train": 4,  # Fig 6: trajectories sampled during training, per configuration
}


def key(seed: int, stream: str, *indices: int):
    """The PRNG key of ``stream`` under the global ``seed``, with ``indices`` folded in."""
    import jax

    if stream not in STREAMS:
        raise ValueError(f"unknown random stream {stream!r}; streams are listed in "
                         f"neurd.streams.STREAMS: {sorted(STREAMS)}")
    result = jax.random.fold_in(jax.random.PRNGKey(seed), STREAMS[stream])
    for index in indices:
        result = jax.random.fold_in(result, index)
    return result
