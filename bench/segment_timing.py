"""How the bench scripts time the learning program: one routine for every timing worker.

A worker (``gpu_check.py throughput``, ``gpu_allocation.py worker``) runs in a
subprocess whose ``PYTHONPATH`` names the source tree it times -- this one, or
an older ``--baseline`` tree -- so this module imports nothing of ``neurd`` at
module level, and the timing itself uses only what older trees have too
(``train.initial_states``, ``train.configuration_keys``, ``train.run_segment``);
the checkpoint evaluation (:func:`checkpoint_seconds`) is this tree's only.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
ENTROPIES = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0)  # the paper's six levels, per run seed


def worker_env(platform: str, flag: bool = True, src: Path = SRC) -> dict:
    """The environment of a worker of the source tree ``src`` on JAX's ``platform``, with
    the neural jobs' deterministic-ops flag (or without it: ``flag=False``): this tree's
    :func:`neurd.neural.environment.job_environment` (called by the process that starts
    the worker, which imports this tree)."""
    from neurd.neural.environment import job_environment

    return job_environment(platform, src, deterministic=flag)


def make_spec(precision: str = "float32", critic: str | None = None,
              variant: str = "default"):
    """The learning spec timed: ``critic`` where given, ``precision`` where the tree's spec
    has the field, the cycle ``variant`` (this tree's own; ``default`` for another tree)."""
    from neurd.neural import train

    fields = {f.name for f in dataclasses.fields(train.Spec)}
    spec = train.Spec(**({"critic": critic} if critic else {}),
                      **({"precision": precision} if "precision" in fields else {}))
    if variant != "default":
        from neurd.neural import variants

        spec = variants.apply(spec, variants.parse(variant))
    return spec


def batch(seeds: int, name: str, spec, game):
    """Batched ``(states, keys, etas)`` of ``seeds`` x the six entropy levels x each
    algorithm.

    Built here rather than by ``train.batch_inputs`` so that a ``--baseline`` tree older
    than that function can be timed."""
    import jax.numpy as jnp
    import numpy as np

    from neurd.neural import train

    entropies = np.asarray(ENTROPIES, np.float32)
    run_seeds = np.repeat(np.arange(seeds), len(entropies))
    entropy_index = np.tile(np.arange(len(entropies)), seeds)
    states = {a: train.initial_states(spec, game, 0, name, tuple(range(seeds)), len(entropies))
              for a in spec.algorithms}
    keys = {a: train.configuration_keys(0, name, a, entropy_index, run_seeds)
            for a in spec.algorithms}
    etas = {a: jnp.asarray(entropies[entropy_index]) for a in spec.algorithms}
    return states, keys, etas


@dataclasses.dataclass
class Timing:
    """What :func:`time_segments` measured, and the states it left (for a profile)."""

    spec: object
    game: object
    states: dict
    keys: dict
    etas: dict
    configurations: int
    setup_seconds: float  # the batch's initial states, keys and etas
    first_seconds: float  # the first segment (two cycles), its compilation included
    seconds: list[float]  # each timed segment's wall seconds
    next_cycle: int  # the cycle the next segment starts at
    finite: bool | None = None  # every leaf of the states finite (after the timed segments)
    checkpoint_seconds: float | None = None


def time_segments(compiled, name: str, spec, seeds: int, cycles: int, rounds: int,
                  ready: Callable[[], bool] | None = None, evaluation: bool = False
                  ) -> Timing | None:
    """Time the learning program of ``compiled`` (game ``name``) at ``seeds`` x 6 entropy
    levels x each algorithm: a first segment of two cycles (it compiles), then ``rounds``
    segments of ``cycles`` cycles each.

    ``ready()``, called between the first segment and the timed ones, may wait (for other
    workers sharing the device); if it returns False, nothing is timed and the result is
    None.  With ``rounds`` 0 only the first segment runs (a compilation).  ``evaluation``:
    also time one checkpoint's exact evaluation (:func:`checkpoint_seconds`).
    """
    import jax
    import numpy as np

    from neurd.neural import train

    game = train.neural_game(compiled)
    start = time.perf_counter()
    states, keys, etas = batch(seeds, name, spec, game)
    setup = time.perf_counter() - start
    states = jax.block_until_ready(train.run_segment(spec, game, states, keys, etas, 0, 2,
                                                     np.float32(1.0)))
    timing = Timing(spec, game, states, keys, etas, sum(k.shape[0] for k in keys.values()),
                    setup, time.perf_counter() - start - setup, [], 2)
    if not rounds:
        return timing
    if ready is not None and not ready():
        return None
    for _ in range(rounds):
        start = time.perf_counter()
        timing.states = jax.block_until_ready(train.run_segment(
            spec, game, timing.states, keys, etas, timing.next_cycle, cycles, np.float32(1.0)))
        timing.seconds.append(time.perf_counter() - start)
        timing.next_cycle += cycles
    timing.finite = bool(all(np.all(np.isfinite(np.asarray(x)))
                             for x in jax.tree_util.tree_leaves(timing.states)))
    if evaluation:
        timing.checkpoint_seconds = checkpoint_seconds(compiled, spec, game, timing.states,
                                                       etas)
    return timing


def checkpoint_seconds(compiled, spec, game, states, etas) -> float:
    """Seconds of one checkpoint's evaluation of every configuration (exact, float64): the
    median of three."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from neurd.neural import train
    from neurd.neural.measurement import exact_setup, measure
    from neurd.precision import float64

    form, tree64 = exact_setup(compiled)
    algorithms = list(states)
    timings = []
    for _ in range(3):
        start = time.perf_counter()
        critics = train.critic_tables(spec, game, states)
        tables = np.concatenate([np.asarray(states[a].table) for a in algorithms])
        critic = np.concatenate([np.asarray(critics[a]) for a in algorithms])
        eta = np.concatenate([np.asarray(etas[a]) for a in algorithms]).astype(np.float64)
        with float64():
            jax.block_until_ready(measure(form, tree64, tables, critic, jnp.asarray(eta), 1.0))
        timings.append(time.perf_counter() - start)
    return sorted(timings)[1]
