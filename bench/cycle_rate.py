"""The learning cycle's arithmetic rate against the same process's plain product rate.

A cycle does its networks' products (``bench_cycle.cycle_flop``) and much besides: the
sampler, the reductions over the actions, the stacking of each configuration's gradient, the
optimiser.  Its useful rate (the products' FLOP over the cycle's wall time) is set here against
what the same process gets from one plain ``[2048, 2048] x [2048, 2048]`` float32 product,
timed interleaved with the cycle so that load on a shared machine falls on both alike.  The
share is the median over rounds of (cycle GFLOP/s) / (product GFLOP/s).
Beside it, the same layout's passes over every information state run alone (nothing else of
the cycle): the share the cycle would reach if all the rest took no time.  And the same
cycle compiled with XLA's defaults, without the learning programs' compiler options
(:func:`neurd.neural.programs.compiler_options`), timed in the same rounds: what the options
gain.

Each instruction set is measured in its own process (XLA reads ``XLA_FLAGS`` once): the
native one, and XLA limited to AVX2 (``--xla_cpu_max_isa=AVX2``: the code a laptop without
AVX-512 gets); and each with the configurations on one CPU device (XLA splitting each
operation between the cores) and shared between one device per core, as a neural job runs
them (:func:`neurd.neural.device.use_cores`).  Goal (the "every CPU" issue): Goofspiel at 60
configurations at 50% or more of the product rate under both instruction sets.

    python bench/cycle_rate.py                      # writes its section of bench/NEURAL.md
    python bench/cycle_rate.py --games kuhn --rounds 2 --devices 1 --out rate.md
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HEADING = "## The cycle against the product rate, CPU"
ISAS = ("native", "AVX2")
ENTROPIES = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0)
PRODUCT = 2048


def _product_rate(seconds: float):
    """``rate()``: the GFLOP/s of one plain ``[PRODUCT, PRODUCT]`` float32 product, timed
    for about ``seconds / 2``."""
    import jax
    import jax.numpy as jnp

    a = jax.random.normal(jax.random.key(0), (PRODUCT, PRODUCT), jnp.float32)
    b = jax.random.normal(jax.random.key(1), (PRODUCT, PRODUCT), jnp.float32)
    product = jax.jit(jnp.matmul)
    jax.block_until_ready(product(a, b))

    def rate() -> float:
        reps, start = 0, time.perf_counter()
        while reps < 3 or time.perf_counter() - start < seconds / 2:
            jax.block_until_ready(product(a, b))
            reps += 1
        return 2.0 * PRODUCT**3 * reps / (time.perf_counter() - start) / 1e9

    return rate


def _timed(function, cycles: int, clock=time.perf_counter) -> float:
    """Seconds of ``function(cycles)``."""
    start = clock()
    function(cycles)
    return clock() - start


def per_cycle(function, cycles: int, repeats: int = 3,
              clock=time.perf_counter) -> tuple[float, float]:
    """``(seconds a cycle, seconds a segment)`` of ``function(cycles)``, a segment of
    ``cycles`` cycles: a cycle is what one more cycle of a segment costs, ``function(cycles)``
    less a segment's fixed cost (``function(0)``, the median of ``repeats``: the call, the
    configurations' sharing between the devices, the policy table of the segment's end), which
    a neural job pays once a segment, a segment being the cycles between two checkpoints
    (about a thousand on average at the paper's length)."""
    fixed = statistics.median(_timed(function, 0, clock) for _ in range(repeats))
    return max(_timed(function, cycles, clock) - fixed, 0.0) / cycles, fixed


def _measure_game(name: str, n: int, rounds: int, seconds: float, product_rate) -> dict:
    """One game's row: the cycle's and its passes' rates against the product's, ``rounds``
    times interleaved, medians."""
    import jax
    import numpy as np
    from bench_cycle import cycle_flop, passes_flop

    from neurd import games as neurd_games
    from neurd.machine import xla_isa
    from neurd.names import GAMES
    from neurd.neural import programs, train, visited
    from neurd.neural.device import cpu_devices

    compiled = neurd_games.compile_game(GAMES[name].string)
    game, spec = train.neural_game(compiled), train.Spec()
    seeds = tuple(range(n // (2 * len(ENTROPIES))))
    states, keys, etas = train.batch_inputs(spec, game, 0, name, seeds, ENTROPIES)

    def run(cycles):
        return jax.block_until_ready(train.run_segment(spec, game, states, keys, etas, 0,
                                                       cycles, np.float32(1.0)))

    # the same cycle compiled with XLA's defaults (neurd.neural.programs: no options)
    defaults = train.run_segment.defaults

    def run_defaults(cycles):
        return jax.block_until_ready(defaults(spec, game, states, keys, etas, 0, cycles,
                                              np.float32(1.0)))

    alone = _passes_alone(spec, game, states, train.by_core)
    run(2), alone(2), run_defaults(2)  # compile
    cycles = max(2, int(seconds / max(per_cycle(run, 2)[0], 1e-6)))
    resolved = train.Spec(layout=visited.cycle_layout(spec, game).name)
    flop, alone_flop = cycle_flop(compiled, resolved, n), passes_flop(compiled, resolved, n)
    rounds_measured = []
    for _ in range(rounds):
        before = product_rate()
        (wall, fixed), (alone_wall, _) = per_cycle(run, cycles), per_cycle(alone, cycles)
        defaults_wall, _ = per_cycle(run_defaults, cycles)
        plain = (before + product_rate()) / 2
        rounds_measured.append(dict(share=flop / wall / 1e9 / plain, cycle=flop / wall / 1e9,
                                    product=plain, ms=wall * 1e3, fixed_ms=fixed * 1e3,
                                    alone_ms=alone_wall * 1e3,
                                    alone_share=alone_flop / alone_wall / 1e9 / plain,
                                    defaults_ms=defaults_wall * 1e3,
                                    speedup=defaults_wall / wall))

    def median(key):
        return statistics.median(r[key] for r in rounds_measured)

    return dict(game=name, configurations=n, processor=processor_name(), xla_isa=xla_isa(),
                cpu_devices=cpu_devices(), variant=resolved.layout, gflop=flop / 1e9,
                ms_per_cycle=median("ms"), segment_ms=median("fixed_ms"),
                cycle_gflops=median("cycle"), product_gflops=median("product"),
                share=median("share"), shares=[r["share"] for r in rounds_measured],
                passes_ms=median("alone_ms"), passes_share=median("alone_share"),
                defaults_ms=median("defaults_ms"), options_speedup=median("speedup"),
                compiler_options=programs.described(jax.default_backend(), spec.critic))


def _measure(games: list[str], n: int, rounds: int, seconds: float) -> list[dict]:
    """In this process: per game, the cycle's and the product's rates, ``rounds`` times."""
    product_rate = _product_rate(seconds)
    rows = []
    for name in games:
        rows.append(_measure_game(name, n, rounds, seconds, product_rate))
        print(json.dumps(rows[-1]), file=sys.stderr)
    return rows


def _passes_alone(spec, game, states, by_core):
    """``run(cycles)``: the cycle's passes over the information states alone, as the
    layout lays them out (the policy's pass and its pullback, the critic's pass; the last
    two over as many states as the policy update's episodes can visit, for a layout of the visited
    states), nothing
    else of the cycle: no sampler, critic updates, losses or optimiser; the configurations
    shared between the CPU devices as a segment shares them (``by_core``).  Each cycle
    feeds the next (a small step on the weights), so that XLA hoists nothing out of the
    loop."""
    import jax
    import jax.numpy as jnp

    from neurd.neural import train, visited

    layout, net = visited.cycle_layout(spec, game), train.network_pass(spec, game)
    algorithms = sorted(states)
    policy = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs),
                                    *[states[a].policy for a in algorithms])
    critic = jax.tree_util.tree_map(lambda *xs: jnp.concatenate(xs),
                                    *[states[a].critic for a in algorithms])
    # a layout of the visited states: step 2's passes on as many rows as the most the policy
    # batch can visit (which rows changes no shape)
    count = jax.tree_util.tree_leaves(policy)[0].shape[0]
    capacity = visited.visited_capacity(spec, game) if layout.visited else None
    rows = None if capacity is None else jnp.tile(
        jnp.arange(capacity, dtype=jnp.int32) % game.tree.num_infostates, (count, 1))

    def loop(cycles, policy, critic, rows=None):
        def body(_, weights):
            policy, critic = weights
            if rows is None:
                logits, pullback = layout.with_pullback(net, policy)
                values = layout.every(net, critic)
            else:
                logits = jax.vmap(lambda x, r: x[r])(layout.every(net, policy), rows)
                pullback = layout.pullback_at(net, policy, rows)
                values = layout.every_at(net, critic, rows)
            grads = pullback(logits - values)
            return (jax.tree_util.tree_map(lambda w, g: w - 1e-6 * g, policy, grads),
                    jax.tree_util.tree_map(lambda w: w * (1 - 1e-7), critic))

        return jax.lax.fori_loop(0, cycles, body, (policy, critic))

    @jax.jit
    def program(cycles, policy, critic):
        batched = (policy, critic) if rows is None else (policy, critic, rows)
        return by_core(lambda *xs: loop(cycles, *xs), *batched)

    return lambda cycles: jax.block_until_ready(program(jnp.int32(cycles), policy, critic))


def processor_name() -> str:
    """The processor as the table names it: its model, its family, model and stepping numbers
    (:func:`neurd.machine.processor_id`) and the instruction set XLA would use on it unlimited
    (``AMD EPYC (family 26 model 2 stepping 1), AVX512_BF16``), so that two processors of one
    model name, of different generations or instruction sets, keep rows of their own."""
    from neurd.machine import processor_id, processor_model, xla_isa

    found = processor_id()
    return f"{processor_model()}{f' ({found})' if found else ''}, {xla_isa('')}"


def _in_process(isa: str, devices: int, games, n: int, rounds: int,
                seconds: float) -> list[dict]:
    """Run :func:`_measure` in a fresh process under ``isa`` (XLA_FLAGS set before JAX loads)
    on ``devices`` CPU devices."""
    env = dict(os.environ)
    flags = [f for f in env.get("XLA_FLAGS", "").split() if not f.startswith(
        "--xla_cpu_max_isa")]
    if isa != "native":
        flags.append(f"--xla_cpu_max_isa={isa}")
    env["XLA_FLAGS"] = " ".join(flags)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).parent),
                                         env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    out = subprocess.run([sys.executable, __file__, "--worker", "--games", *games,
                          "--configurations", str(n), "--rounds", str(rounds),
                          "--seconds", str(seconds), "--devices", str(devices)], env=env,
                         check=True,
                         stdout=subprocess.PIPE, text=True)
    return [dict(r, isa=isa) for r in json.loads(out.stdout)]


def _options(rows: list[dict]) -> str:
    """The compiler options the rows' cycles ran under (``none`` for XLA's defaults)."""
    found = sorted({r.get("compiler_options") or "none" for r in rows})
    return ", ".join(found) if found else "none"


SEGMENT = "segment's fixed ms"  # a segment's cost beside its cycles' (per_cycle)
COLUMNS = ("processor", "ISA", "CPU devices", "game", "N", "variant", "GFLOP/cycle",
           "ms/cycle", SEGMENT, "cycle GFLOP/s", "product GFLOP/s", "share", "passes alone, ms",
           "passes alone, share", "XLA's defaults, ms/cycle", "options' speed-up", "date")
RIGHT = {"CPU devices", "N", "GFLOP/cycle", "ms/cycle", SEGMENT, "cycle GFLOP/s", "product GFLOP/s",
         "share", "passes alone, ms", "passes alone, share", "XLA's defaults, ms/cycle",
         "options' speed-up"}


def _cells(r: dict, date: str) -> dict:
    """A measured row as the table prints it, by column."""
    return dict(zip(COLUMNS, (
        r["processor"], r["xla_isa"], str(r["cpu_devices"]), r["game"],
        str(r["configurations"]), r["variant"], f"{r['gflop']:.3g}",
        f"{r['ms_per_cycle']:.1f}", f"{r['segment_ms']:.0f}",
        f"{r['cycle_gflops']:.0f}", f"{r['product_gflops']:.0f}",
        f"{r['share']:.0%}", f"{r['passes_ms']:.1f}", f"{r['passes_share']:.0%}",
        f"{r['defaults_ms']:.1f}", f"{r['options_speedup']:.2f}x", date)))


def earlier_rows(text: str) -> list[dict]:
    """The rows of the section's table in ``text`` (an earlier run's), by column; a row of a
    table without a date column takes the section's date, one without the segment's fixed
    cost ``-`` there (its cycle timed as whole segments of about a second, that cost in)."""
    if HEADING not in text:
        return []
    body = text.split(HEADING, 1)[1].split("\n## ", 1)[0]
    dated = [line for line in body.splitlines() if line.startswith("Date: ")]
    fallback = dated[0].removeprefix("Date: ").strip() if dated else ""
    lines = [line for line in body.splitlines() if line.startswith("|")]
    if len(lines) < 2:
        return []
    names = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = [dict(zip(names, (c.strip() for c in line.strip("|").split("|"))))
            for line in lines[2:]]
    optional = {"date": fallback, SEGMENT: "-"}
    return [dict(optional, **r) for r in rows if set(COLUMNS) - set(optional) <= set(r)]


def merged(earlier: list[dict], new: list[dict]) -> list[dict]:
    """The new rows and the earlier rows of the processors this run did not measure (a run
    replaces its own processor's rows and keeps the others'), grouped by processor."""
    measured = {r["processor"] for r in new}
    kept = [r for r in earlier if r["processor"] not in measured]
    order = list(dict.fromkeys(r["processor"] for r in kept + new))
    return sorted(kept + new, key=lambda r: order.index(r["processor"]))


def section(rows: list[dict], command: str, load_before: str, load_after: str,
            earlier: list[dict] | None = None) -> str:
    """The section: this run's rows (``rows``, as measured) beside the ``earlier`` rows (by
    column, as :func:`earlier_rows` reads them) of the processors it did not measure."""
    today = datetime.date.today().isoformat()
    table = merged(earlier or [], [_cells(r, today) for r in rows])
    this = "; ".join(sorted({r["processor"] for r in rows}))
    lines = [HEADING, "", f"Command: `{command}`  ",
             f"Date: {today} ({this}; the rows of other processors are of the dates they "
             "give)  ",
             f"Load average (1, 5, 15 min) before: {load_before}; after: {load_after}", "",
             "A learning cycle's useful rate (its networks' products, `bench_cycle.cycle_flop`, "
             "over its wall time; default spec and variant, learned critic) against the rate "
             f"of one plain `[{PRODUCT}, {PRODUCT}]` float32 product in the same process, timed "
             "before and after each round of cycles; the share is the median over rounds. "
             "Each instruction set in its own process (`XLA_FLAGS=--xla_cpu_max_isa=AVX2` for "
             "AVX2), on one CPU device (XLA splitting each operation between the cores) and "
             "on one device per core, each running its share of the configurations (how a "
             "neural job runs them). A cycle's time is what one more cycle of a segment "
             "costs (`per_cycle`): a segment of about a second of cycles, less a segment's "
             "fixed cost, timed beside it (*segment's fixed ms*: the call, the sharing of the "
             "configurations between the devices, the policy table at the segment's end), "
             "which a neural job pays once between two checkpoints, about a thousand cycles "
             "apart on average at the paper's length; a row with `-` there timed whole "
             "segments of about a second, that cost included. "
             "Goal: Goofspiel at 60 configurations at 50% or more "
             "under both instruction sets. "
             "*Passes alone*: the same layout's passes over every information state (the "
             "policy's pass and its pullback, the critic's pass) run by themselves, cycle "
             "after cycle, with nothing else of the cycle (no sampler, critic updates, "
             "losses or optimiser), and their FLOP's share of the product rate: what the "
             "cycle would reach if everything but these passes took no time. "
             "*XLA's defaults*: the same cycle compiled without the learning programs' "
             "compiler options (`neurd.neural.programs.compiler_options`: "
             f"`{_options(rows)}`), timed in the same rounds; *options' speed-up*: the "
             "median over rounds of its time over the cycle's. A run replaces the rows of "
             "the processor it ran on and keeps the other processors' rows (each row's "
             "*date*), so that the table holds every processor measured; a processor is "
             "named by its model, its family, model and stepping numbers where the system "
             "gives them (`neurd.machine.processor_id`; rows named without them are of "
             "earlier runs) and the instruction set XLA uses on it unlimited (two processors "
             "of one model name may differ in both).", "",
             "| " + " | ".join(COLUMNS) + " |",
             "| " + " | ".join("---:" if c in RIGHT else "---" for c in COLUMNS) + " |"]
    lines += ["| " + " | ".join(r[c] for c in COLUMNS) + " |" for r in table]
    return "\n".join(lines + [""])


def main(argv=None) -> int:
    from neurd.machine import threads
    from neurd.names import GAMES
    from neurd.neural.device import use_cores

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=["goofspiel", "leduc"],
                        choices=sorted(GAMES))
    parser.add_argument("--configurations", type=int, default=60)
    parser.add_argument("--isas", nargs="+", default=list(ISAS), choices=ISAS)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=2.0, help="per round, each part")
    parser.add_argument("--out", default=str(Path(__file__).with_name("NEURAL.md")))
    parser.add_argument("--devices", nargs="+", default=["1", "cores"],
                        help="CPU devices to share the configurations between: numbers, or "
                        "'cores' (one per core, as a neural job; default: 1 and cores)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    try:
        devices = sorted({threads() if d == "cores" else int(d) for d in args.devices})
    except ValueError:
        parser.error(f"--devices: {args.devices} are not numbers or 'cores'")
    if devices[0] < 1:
        parser.error(f"--devices: {devices[0]} is not a positive number of devices")
    if args.configurations <= 0 or args.configurations % (2 * len(ENTROPIES)):
        parser.error(f"--configurations: {args.configurations} is not a positive multiple "
                     f"of {2 * len(ENTROPIES)}")
    if args.rounds < 1 or not args.seconds > 0:
        parser.error("--rounds must be at least 1 and --seconds positive")
    if args.worker:
        use_cores(devices[0])
        print(json.dumps(_measure(args.games, args.configurations, args.rounds,
                                  args.seconds)))
        return 0
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_cycle import with_section

    load_before = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    rows = [r for isa in args.isas for count in devices
            for r in _in_process(isa, count, args.games, args.configurations, args.rounds,
                                 args.seconds)]
    load_after = " ".join(Path("/proc/loadavg").read_text().split()[:3])
    command = "python bench/cycle_rate.py " + " ".join(argv if argv is not None
                                                       else sys.argv[1:])
    out = Path(args.out)
    text = out.read_text() if out.exists() else ""
    new = section(rows, command.strip(), load_before, load_after, earlier_rows(text))
    out.write_text(with_section(text, new, HEADING))
    print(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
