"""Milliseconds per learning cycle of every cycle variant, side by side, interleaved.

A cycle (:func:`neurd.neural.train.run_segment`, default spec but for the
variant) is 4 critic updates and 1 policy update of every configuration.  Per
game and number of configurations ``N`` (12, 60, 480: one, five, forty seeds
x 2 algorithms x 6 entropy levels), every
layout (:mod:`neurd.neural.layouts`) is compiled, then timed in rounds that
take the variants in turn, so load on a shared machine falls on all of them
alike; the ratio to the first variant is per round, then the median.  Wall
and CPU (user + sys of the process, every thread) times are both reported,
with the load average before and after.

    python bench/bench_cycle.py                 # writes its section of bench/NEURAL.md
    python bench/bench_cycle.py --games kuhn --sizes 12 --rounds 2 --out cycle.md
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from _machine import describe  # bench/_machine.py, beside this script

from neurd import games
from neurd.names import GAMES
from neurd.neural import layouts, passes, train, visited

HEADING = "## Cycle variants, CPU"
ENTROPIES = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0)


def cycle_flop(compiled, spec: train.Spec, configurations: int) -> float:
    """FLOP (2 x multiply-adds) of the networks in one cycle of ``configurations``:
    the critic's updates on the sampled steps (forward and backward), and
    :func:`passes_flop`."""
    widths = [compiled.infostate_tensor.shape[1], *spec.hidden, compiled.num_actions]
    full = sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    depth = train.history_tree(compiled, jnp.float32).depth
    rows = spec.critic_updates * spec.critic_batch * depth
    macs = rows * (3 * full - widths[0] * widths[1])  # no gradient for the inputs
    return 2.0 * macs * configurations + passes_flop(compiled, spec, configurations)


def passes_flop(compiled, spec: train.Spec, configurations: int) -> float:
    """FLOP of a cycle's passes over the information states: the policy's pass over every
    one, then the critic's pass and the policy's pullback (weight gradients; the input's is
    not needed) over every one, or over the policy update's visited ones (at most
    :func:`neurd.neural.visited.visited_capacity`) for a layout of the visited states; the
    first layer on the columns the variant uses (``spec.layout`` resolved for the game)."""
    game = train.neural_game(compiled)
    layout = visited.cycle_layout(spec, game)
    columns = compiled.infostate_tensor.shape[1]
    if layout.used_columns:
        columns = sum(b - a for a, b in passes.used_columns(compiled.infostate_tensor))
    widths = [compiled.infostate_tensor.shape[1], *spec.hidden, compiled.num_actions]
    full = sum(a * b for a, b in zip(widths[:-1], widths[1:]))
    first = columns * widths[1]
    later = full - widths[0] * widths[1]
    every = compiled.num_infostates
    step2 = visited.visited_capacity(spec, game) if layout.visited else every
    critic_pass = first + later if spec.critic == "learned" else 0
    return 2.0 * configurations * (every * (first + later)
                                   + step2 * (critic_pass + first + 2 * later))


def _inputs(spec, game, name, seeds):
    return train.batch_inputs(spec, game, 0, name, tuple(range(seeds)), ENTROPIES)


def bench_game(name: str, sizes, rounds: int, seconds: float, variants) -> list[dict]:
    compiled = games.compile_game(GAMES[name].string)
    game = train.neural_game(compiled)
    rows = []
    for n in sizes:
        seeds = n // (2 * len(ENTROPIES))
        specs = {v: train.Spec(layout=v) for v in variants}
        inputs = {v: _inputs(specs[v], game, name, seeds) for v in variants}

        def run(v, cycles, specs=specs, inputs=inputs):
            states, keys, etas = inputs[v]
            return jax.block_until_ready(train.run_segment(specs[v], game, states, keys, etas,
                                                           0, cycles, np.float32(1.0)))

        warm = {}
        for v in variants:
            run(v, 2)  # compiles
            start = time.perf_counter()
            run(v, 2)
            warm[v] = (time.perf_counter() - start) / 2
        cycles = max(2, int(seconds / max(warm.values())))
        wall = {v: [] for v in variants}
        cpu = {v: [] for v in variants}
        for _ in range(rounds):
            for v in variants:
                start, used = time.perf_counter(), os.times()
                run(v, cycles)
                after = os.times()
                wall[v].append((time.perf_counter() - start) / cycles * 1e3)
                cpu[v].append((after.user + after.system - used.user - used.system)
                              / cycles * 1e3)
        base = variants[0]
        for v in variants:
            rows.append(dict(
                game=name, configurations=n, variant=v, cycles=cycles,
                wall_ms=statistics.median(wall[v]), cpu_ms=statistics.median(cpu[v]),
                ratio=statistics.median(b / w for b, w in zip(wall[base], wall[v])),
                gflop=cycle_flop(compiled, specs[v], n) / 1e9))
            print(rows[-1], file=sys.stderr)
    return rows


def section(rows, command: str, load_before, load_after) -> str:
    base = rows[0]["variant"] if rows else ""
    lines = [HEADING, "",
             f"Command: `{command}`  ", f"Date: {datetime.date.today().isoformat()}  ",
             f"Machine: {describe(('jax', 'jaxlib', 'flax', 'optax'))}  ",
             f"Load average (1, 5, 15 min) before: {load_before}; after: {load_after}", "",
             "Milliseconds per learning cycle (4 critic updates and 1 policy update of every "
             "configuration; default spec, learned critic) of each cycle variant "
             "(`neurd.neural.layouts`; `Spec.layout`), medians over rounds "
             "that take the variants in turn. Speed-up: the median over rounds of the "
             f"`{base}` variant's wall time over the variant's, measured in the same round. "
             "CPU ms: user + sys of every thread. GFLOP: the networks' products in one cycle "
             "(`bench_cycle.cycle_flop`). On a loaded machine the absolute times are high "
             "and noisy; the speed-ups, measured interleaved, much less so.", "",
             "| game | N | variant | GFLOP/cycle | ms/cycle (wall) | ms/cycle (CPU) | "
             f"speed-up over {base} |",
             "| --- | ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['game']} | {r['configurations']} | {r['variant']} | "
                     f"{r['gflop']:.3g} | {r['wall_ms']:.1f} | {r['cpu_ms']:.1f} | "
                     f"{r['ratio']:.2f}x |")
    lines += ["", "Variants: " + "; ".join(f"`{k}`: {v.summary}"
                                           for k, v in layouts.LAYOUTS.items())
              + f". Default: `{layouts.DEFAULT}`, here {default_layouts()}.",
              ""]
    return "\n".join(lines)


def default_layouts() -> str:
    """What ``auto`` resolves to here for each game, e.g. "`map_used` (kuhn, leduc),
    `map_visited` (goofspiel)"."""
    spec, chosen = train.Spec(), {}
    for name, game in GAMES.items():
        layout = visited.cycle_layout(spec, train.neural_game(games.compile_game(game.string)))
        chosen.setdefault(layout.name, []).append(name)
    return ", ".join(f"`{k}` ({', '.join(v)})" for k, v in chosen.items())


def with_section(text: str, new: str, heading: str = HEADING) -> str:
    """``text`` with its section ``heading`` (the cycle section's unless named) replaced by
    ``new``; where it has none, ``new`` goes before its first later section."""
    if heading in text:
        head, rest = text.split(heading, 1)
        later = rest.find("\n## ")
        return head + new + ("\n" + rest[later + 1:] if later >= 0 else "")
    marker = "\n## "
    if marker in text:
        head, tail = text.split(marker, 1)
        return head.rstrip() + "\n\n" + new + "\n## " + tail
    return text.rstrip() + "\n\n" + new


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=list(GAMES), choices=sorted(GAMES))
    parser.add_argument("--sizes", nargs="+", type=int, default=[12, 60, 480])
    parser.add_argument("--variants", nargs="+", default=list(layouts.LAYOUTS),
                        choices=sorted(layouts.LAYOUTS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.0, help="per variant and round")
    parser.add_argument("--out", default=str(Path(__file__).with_name("NEURAL.md")))
    args = parser.parse_args(argv)
    for n in args.sizes:
        if n % (2 * len(ENTROPIES)):
            parser.error(f"--sizes: {n} is not a multiple of {2 * len(ENTROPIES)}")
    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    rows = [r for name in args.games
            for r in bench_game(name, args.sizes, args.rounds, args.seconds, args.variants)]
    load_after = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    command = "python bench/bench_cycle.py " + " ".join(argv if argv is not None
                                                        else sys.argv[1:])
    new = section(rows, command.strip(), load_before, load_after)
    out = Path(args.out)
    out.write_text(with_section(out.read_text() if out.exists() else "", new))
    print(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
