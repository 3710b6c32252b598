"""The timing workers: one routine that times the learning program, and the two workers
that run it, each a process of its own.

    python <this file> cells --games G --out F --cells kuhn:learned:480 ...  # the allocation's
    python <this file> throughput --games G --out F --configs 480 ...        # the GPU check's

A worker runs in a subprocess whose ``PYTHONPATH`` names the source tree it times -- this
one, or an older ``--baseline`` tree -- and is started as this file (not as a module of the
package, which an older tree may not have), so this module imports nothing at module level
but the standard library and numpy, nothing of its package, and ``neurd`` only inside its
functions; the
timing itself uses only what older trees have too (``train.initial_states``,
``train.configuration_keys``, ``train.run_segment``); the checkpoint evaluation
(:func:`checkpoint_seconds`) is this tree's only.  :mod:`.measurement` (the allocation's
throughput table) and :mod:`.device_check` (the GPU check) start them.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import glob
import json
import os
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

SRC = Path(__file__).resolve().parents[3]  # this tree's src/
ENTROPIES = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0)  # the paper's six levels, per run seed
SIZES = (12, 60, 120, 240, 480)  # the configurations of a job the allocation's table times
PAPER_CYCLES = 3 * 330_000 // 4  # policy updates of one paper-scale configuration
PAPER_CHECKPOINTS = 3 * 71  # evaluations of one paper-scale job (3 phases x 71 points)

if __name__ == "__main__" and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    del sys.path[0]  # run as a file: its folder's modules must not shadow any of the tree's


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


# --- the workers ----------------------------------------------------------------------------


def time_cells(args) -> int:
    """Time cells ``game:critic:N`` in order (``--sync``: wait for ``--parallel`` workers
    before each, so that they share the GPU), or only compile them (``--compile-only``)."""
    import jax

    from neurd import games
    from neurd.neural import train
    from neurd.neural.device import cpu_devices, job_devices, use_cores

    critics_timed = {cell.split(":")[1] for cell in args.cells}
    if os.environ.get("JAX_PLATFORMS") == "cpu" and len(critics_timed) == 1:
        use_cores(job_devices(critics_timed.pop()))  # the CPU devices its jobs make
    rows = []
    out = Path(args.out)
    save_rows(out, rows)
    for cell in args.cells:
        name, critic, n = cell.split(":")
        compiled = games.load(Path(args.games) / name / "game.npz")
        # this tree's own variants (a baseline tree has none)
        spec = make_spec("float32", critic, args.variant)
        count = (max(20, round(args.cycles_times_n / int(n))) if args.cycles_times_n
                 else 40 if int(n) >= 240 else 100)
        timed = time_segments(compiled, name, spec, int(n) // 12, count,
                              0 if args.compile_only else 2,
                              ready=None if not args.sync else partial(partners, args, cell),
                              evaluation=args.evaluation)
        if timed is None:
            # a partner is gone (it failed): what this one times alone is not kept
            print(f"{cell}: the other jobs did not come; stopped", flush=True)
            return 0
        row = {"game": name, "critic": critic, "configurations": int(n),
               "parallel": args.parallel, "variant": args.variant,
               "cpu_devices": cpu_devices(),
               "first_segment_seconds": round(timed.setup_seconds + timed.first_seconds, 2)}
        if not args.compile_only:
            row["ms_per_cycle"] = round(1e3 * min(timed.seconds) / count, 4)
            row["finite"] = timed.finite
            if args.evaluation:
                row["checkpoint_seconds"] = round(timed.checkpoint_seconds, 4)
        rows.append(row)
        save_rows(out, rows)
        print(json.dumps(row), flush=True)
        if (args.profile and name in ("leduc", "goofspiel") and critic == "learned"
                and int(n) == max(SIZES)):
            with jax.profiler.trace(str(Path(args.profile) / f"{name}-{n}")):
                jax.block_until_ready(train.run_segment(spec, timed.game, timed.states,
                                                        timed.keys, timed.etas, 500, 20,
                                                        np.float32(1.0)))
    return 0


def save_rows(out: Path, rows: list[dict]) -> None:
    """A worker's rows, rewritten after every cell: one stopped at a deadline keeps what it
    timed."""
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(rows))
    os.replace(tmp, out)


def partners(args, cell: str) -> bool:
    """Wait (at most ``--sync-seconds``) until the ``--parallel`` workers sharing the device
    have all reached ``cell``; whether they did."""
    ready = Path(args.sync) / cell
    ready.mkdir(parents=True, exist_ok=True)
    (ready / f"{args.slot}").touch()
    wait_until = time.monotonic() + args.sync_seconds
    while len(list(ready.iterdir())) < args.parallel and time.monotonic() < wait_until:
        time.sleep(0.005)
    return len(list(ready.iterdir())) >= args.parallel


def throughput(args) -> int:
    """The GPU check's timing: configuration-iterations per second of each game at
    ``--configs`` configurations, and the paper-scale minutes they project."""
    import jax

    from neurd import games
    from neurd.neural import train

    rows = []
    for name in args.game:
        compiled = games.load(Path(args.games) / name / "game.npz")
        spec = make_spec(args.precision)
        timed = time_segments(compiled, name, spec, args.configs // 12, args.cycles,
                              args.rounds, evaluation=args.measure)
        if args.profile:  # one segment of two cycles between cudaProfilerStart and Stop (ncu)
            runtime = _cudart()
            runtime.cudaProfilerStart()
            jax.block_until_ready(train.run_segment(spec, timed.game, timed.states, timed.keys,
                                                    timed.etas, timed.next_cycle, 2,
                                                    np.float32(1.0)))
            runtime.cudaProfilerStop()
        seconds = sorted(timed.seconds)[len(timed.seconds) // 2]
        ms_cycle = 1e3 * seconds / args.cycles
        row = {"game": name, "precision": getattr(spec, "precision", "default"),
               "configurations": timed.configurations, "cycles": args.cycles,
               "ms_per_cycle": round(ms_cycle, 4),
               "configuration_iterations_per_second": round(
                   timed.configurations * args.cycles * spec.critic_updates / seconds),
               "compile_and_first_seconds": round(timed.first_seconds, 1),
               "finite": timed.finite}
        if args.measure:
            row["checkpoint_seconds"] = round(timed.checkpoint_seconds, 4)
        paper = PAPER_CYCLES * ms_cycle / 1e3 + PAPER_CHECKPOINTS * row.get(
            "checkpoint_seconds", 0.0)
        row["paper_scale_minutes"] = round(paper / 60.0, 2)
        rows.append(row)
        print(json.dumps(row), flush=True)
    Path(args.out).write_text(json.dumps(rows))
    return 0


def _cudart():
    """The CUDA runtime library JAX loaded (for ``cudaProfilerStart``/``Stop``)."""
    for folder in sys.path:
        for path in sorted(glob.glob(os.path.join(folder, "nvidia", "**", "libcudart.so*"),
                                     recursive=True)):
            return ctypes.CDLL(path)
    return ctypes.CDLL("libcudart.so")


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    w = sub.add_parser("cells", help="time cells game:critic:N (the allocation's table)")
    w.add_argument("--games", required=True)
    w.add_argument("--cells", nargs="+", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--parallel", type=int, default=1)
    w.add_argument("--slot", type=int, default=0)
    w.add_argument("--sync", default=None)
    w.add_argument("--sync-seconds", type=float, default=60.0)
    w.add_argument("--compile-only", action="store_true")
    w.add_argument("--evaluation", action="store_true")
    w.add_argument("--profile", default=None)
    w.add_argument("--variant", default="default", help="the cycle variant timed")
    w.add_argument("--cycles-times-n", type=float, default=None,
                   help="learning cycles per timed segment times N (at least 20 cycles; "
                        "default: 100 cycles, 40 from N = 240)")
    t = sub.add_parser("throughput", help="each game at --configs (the GPU check's)")
    t.add_argument("--games", required=True)
    t.add_argument("--game", nargs="+", default=["kuhn", "leduc", "goofspiel"])
    t.add_argument("--configs", type=int, default=480)
    t.add_argument("--cycles", type=int, default=200)
    t.add_argument("--rounds", type=int, default=3)
    t.add_argument("--precision", default="float32")
    t.add_argument("--measure", action="store_true")
    t.add_argument("--profile", action="store_true", help="mark two cycles for ncu")
    t.add_argument("--out", required=True)
    return parser


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    return time_cells(args) if args.mode == "cells" else throughput(args)


if __name__ == "__main__":
    sys.exit(main())
