"""Where a learning cycle spends its time: XLA's operations of one cycle, timed by JAX's profiler.

A cycle (:func:`neurd.neural.train.run_segment`, default spec but for the
variant) runs a few times under :mod:`jax.profiler`; the Perfetto trace's
events of each XLA operation (a thunk on a CPU, a kernel on a GPU) are summed,
less the operations nested in them (a ``while`` loop's own time is its control, not its
body's), and divided by the cycles.  Each operation is described from the compiled
program's HLO: its result's shape and the JAX operation it came from (the last
parts of its ``op_name``: ``vmap(transpose(jvp()))/dot_general`` is a weight
gradient's product).  The profiler adds its own cost, so the times under it
are higher than the cycle's own (both are printed): read the shares.

    python bench/profile_cycle.py                  # its section of bench/NEURAL.md
    python bench/profile_cycle.py --games goofspiel --seeds 40 --variant vmap --out -
    python bench/profile_cycle.py --devices cores    # shared between one device per core

``--devices``: the CPU devices the configurations are shared between, as a neural job shares
them (:func:`neurd.neural.device.use_cores`; default: JAX's own count, or
``$JAX_NUM_CPU_DEVICES``); every device's operations are summed.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import gzip
import json
import re
import sys
import tempfile
import time
from pathlib import Path

import bench_cycle  # bench/bench_cycle.py, beside this script
import jax
import jax.numpy as jnp
import numpy as np
from _machine import describe  # bench/_machine.py, beside this script

from neurd import games
from neurd.machine import threads
from neurd.names import GAMES
from neurd.neural import layouts, train, visited
from neurd.neural.device import cpu_devices, use_cores
from neurd.neural.networks import PRECISIONS

ENTROPIES = bench_cycle.ENTROPIES  # the paper's six levels, per run seed
HEADING = "## A cycle's operations, CPU"
INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?([\w.-]+) = (\S+)")
OP_NAME = re.compile(r'op_name="([^"]*)"')


def hlo_descriptions(hlo_text: str) -> dict[str, tuple[str, str]]:
    """``{instruction: (result shape, origin)}`` of an optimised HLO module's text; the
    origin is the last two parts of the instruction's ``op_name`` ('' where it has none)."""
    out = {}
    for line in hlo_text.splitlines():
        found = INSTRUCTION.match(line)
        if not found:
            continue
        name = OP_NAME.search(line)
        origin = "/".join(name.group(1).split("/")[-2:]) if name else ""
        out[found.group(1)] = (found.group(2).split("{")[0], origin)
    return out


def operation_times(trace: dict, known: set[str]) -> tuple[dict, dict]:
    """``({operation: microseconds of its own}, {operation: count})`` of a Perfetto trace's
    complete events that are XLA operations: an event naming its ``hlo_op`` (a GPU kernel),
    or one whose name is an instruction of ``known`` (a CPU thunk).  An operation's own time
    is its events' durations less those of the operations nested in them on the same thread
    (a ``while`` loop's body, a called computation's operations), so that no time is
    counted twice."""
    total, count = collections.Counter(), collections.Counter()
    threads = collections.defaultdict(list)
    for event in trace.get("traceEvents", []):
        if event.get("ph") != "X":
            continue
        name = (event.get("args") or {}).get("hlo_op") or event.get("name", "")
        if name in known or (event.get("args") or {}).get("hlo_op"):
            duration = float(event.get("dur", 0.0))
            total[name] += duration
            count[name] += 1
            if "ts" in event:
                threads[(event.get("pid"), event.get("tid"))].append(
                    (float(event["ts"]), duration, name))
    for events in threads.values():
        events.sort(key=lambda e: (e[0], -e[1]))
        open_ = []  # the events that contain the current one, outermost first
        for start, duration, name in events:
            while open_ and open_[-1][0] + open_[-1][1] <= start:
                open_.pop()
            if open_:
                total[open_[-1][2]] -= duration
            open_.append((start, duration, name))
    return dict(total), dict(count)


def first_product_rate(game, spec, repeats: int = 50) -> tuple[str, float]:
    """``(shape, GFLOP/s)``: one configuration's first-layer product on every information
    state (the columns the variant uses), alone, jitted; the fastest of ``repeats``."""
    tensors = np.asarray(game.tensors)
    if visited.cycle_layout(spec, game).used_columns:
        tensors = np.concatenate([tensors[:, a:b] for a, b in game.used_columns], axis=1)
    rows, columns = tensors.shape
    width = spec.hidden[0] if spec.hidden else game.num_actions
    kernel = np.ones((columns, width), np.float32)
    product = jax.jit(lambda x, w: jnp.dot(x, w, precision=PRECISIONS[spec.precision]))
    x, w = jax.device_put(tensors), jax.device_put(kernel)
    jax.block_until_ready(product(x, w))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(product(x, w))
        best = min(best, time.perf_counter() - start)
    shape = f"`[{rows}, {columns}] x [{columns}, {width}]`"
    return shape, 2.0 * rows * columns * width / best / 1e9


def _inputs(game_name: str, seeds: int, variant: str):
    compiled = games.compile_game(GAMES[game_name].string)
    game = train.neural_game(compiled)
    spec = train.Spec(layout=variant)
    states, keys, etas = train.batch_inputs(spec, game, 0, game_name, tuple(range(seeds)),
                                            ENTROPIES)
    return spec, game, states, keys, etas


def profile(game_name: str, seeds: int, variant: str, cycles: int, top: int) -> str:
    """A markdown section: the cycle's time, then its ``top`` operations by time."""
    spec, game, states, keys, etas = _inputs(game_name, seeds, variant)
    sign = np.float32(1.0)
    lowered = train.run_segment.lower(spec, game, states, keys, etas, 0, cycles, sign)
    described = hlo_descriptions(lowered.compile().as_text())

    def run():
        return jax.block_until_ready(
            train.run_segment(spec, game, states, keys, etas, 0, cycles, sign))

    run()
    start = time.perf_counter()
    run()
    plain = (time.perf_counter() - start) / cycles * 1e3
    with tempfile.TemporaryDirectory() as folder:
        jax.profiler.start_trace(folder, create_perfetto_trace=True)
        start = time.perf_counter()
        run()
        traced = (time.perf_counter() - start) / cycles * 1e3
        jax.profiler.stop_trace()
        path = max(Path(folder).rglob("*.trace.json.gz"), key=lambda p: p.stat().st_mtime)
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            total, count = operation_times(json.load(handle), set(described))
    summed = sum(total.values()) / cycles / 1e3
    product = first_product_rate(game, spec)
    configurations = 2 * len(ENTROPIES) * seeds
    resolved = visited.cycle_layout(spec, game).name
    lines = [f"### {game_name}, N = {configurations}, variant `{resolved}`, "
             f"{cpu_devices()} CPU device{'s' if cpu_devices() > 1 else ''}",
             "", f"{plain:.1f} ms a cycle; {traced:.1f} ms under the profiler, of which the "
             f"operations below and the others sum to {summed:.1f} ms (on several threads "
             "at once where XLA splits an operation). One first-layer product of the "
             f"variant alone ({product[0]}), timed apart: {product[1]:.0f} GFLOP/s.", "",
             "| operation | ms/cycle | share | calls/cycle | result | from |",
             "| --- | ---: | ---: | ---: | --- | --- |"]
    for name, micro in sorted(total.items(), key=lambda item: -item[1])[:top]:
        shape, origin = described.get(name, ("", ""))
        lines.append(f"| `{name}` | {micro / cycles / 1e3:.2f} | "
                     f"{micro / cycles / 1e3 / summed:.0%} | {count[name] / cycles:g} | "
                     f"`{shape}` | {origin or '-'} |")
    return "\n".join(lines) + "\n"


def with_section(text: str, new: str) -> str:
    """``text`` with its :data:`HEADING` section replaced by ``new`` (appended if none)."""
    if HEADING not in text:
        return text.rstrip() + "\n\n" + new
    return bench_cycle.with_section(text, new, HEADING)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=["goofspiel", "leduc"],
                        choices=sorted(GAMES))
    parser.add_argument("--seeds", type=int, default=5,
                        help="seeds: N = seeds x 2 algorithms x 6 entropy levels (default 5)")
    parser.add_argument("--variant", default=layouts.DEFAULT, choices=layouts.names())
    parser.add_argument("--cycles", type=int, default=10)
    parser.add_argument("--top", type=int, default=12)
    parser.add_argument("--devices", default=None,
                        help="CPU devices to share the configurations between: a number, or "
                        "'cores' (one per core, as a neural job); default: JAX's own")
    parser.add_argument("--out", default=str(Path(__file__).with_name("NEURAL.md")),
                        help="the markdown file whose section to replace; - prints only")
    args = parser.parse_args(argv)
    if args.seeds < 1 or args.cycles < 1 or args.top < 1:
        parser.error("--seeds, --cycles and --top must be at least 1")
    if args.devices is not None:
        try:
            use_cores(threads() if args.devices == "cores" else int(args.devices))
        except ValueError as error:
            parser.error(f"--devices {args.devices!r}: {error}")
    command = " ".join(["python bench/profile_cycle.py",
                        *(argv if argv is not None else sys.argv[1:])])
    parts = [HEADING, "", f"Command: `{command}`  ",
             f"Date: {datetime.date.today().isoformat()}  ",
             f"Machine: {describe(('jax', 'jaxlib', 'flax', 'optax'))}", "",
             "Each game's cycle (default spec, the variant named) timed by JAX's profiler, "
             "its XLA operations' own time per cycle (less that of the operations nested in "
             "them: a `while` loop's is its control's), the longest first; `result` and `from` "
             "are the operation's HLO (its shape, and the JAX operation it came from). "
             "Several threads run at once, so the shares are of the operations' summed time.",
             ""]
    parts += [profile(name, args.seeds, args.variant, args.cycles, args.top)
              for name in args.games]
    new = "\n".join(parts)
    if args.out != "-":
        out = Path(args.out)
        out.write_text(with_section(out.read_text() if out.exists() else "", new))
    print(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
