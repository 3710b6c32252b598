"""Side-by-side benchmark of the exact engine against OpenSpiel, one process, interleaved.

For each game: CFR iterations per second of ``neurd`` (regret matching, the
same algorithm step for step) against ``pyspiel.CFRSolver``, NashConv
evaluations per second against ``pyspiel.nash_conv``, and Fig 4b's
yardsticks: the engine's CFR and CFR+ (``neurd.tabular.solvers``, OpenSpiel's
operations in OpenSpiel's order, bit for bit) against ``pyspiel.CFRSolver``
and ``pyspiel.CFRPlusSolver``.  Setup (walking the
game, building solvers) and JIT compilation are timed apart from the steady
state.  Rounds alternate between the two implementations so that machine
load affects both alike; the table reports medians over rounds.

    python bench/bench_engine.py                 # writes bench/RESULTS.md
    python bench/bench_engine.py --games leduc --rounds 3 --out /tmp/results.md

The file's sections from :data:`KEPT` on (measurements of the whole pipeline,
made by hand) are kept when it is written again.
"""

from __future__ import annotations

import argparse
import datetime
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import pyspiel
from _machine import describe  # bench/_machine.py, beside this script

from neurd.games import compile_game, openspiel_game
from neurd.names import GAMES
from neurd.precision import float64
from neurd.tabular import cfr, evaluation, solvers
from neurd.tabular.policies import random_policies, to_openspiel
from neurd.tabular.sequence_form import sequence_form

KEPT = "\n## The whole pipeline"


def timed(function, *args):
    start = time.perf_counter()
    result = function(*args)
    jax.block_until_ready(result)
    return time.perf_counter() - start, result


def setup(name: str) -> dict:
    string = GAMES[name].string
    times = {}
    times["compile_game"], compiled = timed(compile_game, string)
    times["sequence_form"], form = timed(sequence_form, compiled)
    game = openspiel_game(string)
    times["pyspiel_solver_setup"], _ = timed(pyspiel.CFRSolver, game)
    times["solver_tree"], tree = timed(solvers.solver_tree, compiled)
    return dict(name=name, compiled=compiled, form=form, game=game, tree=tree, setup=times)


def interleaved(ours, solver, rounds: int, ours_iterations: int, their_seconds: float) -> dict:
    """Seconds per iteration of ``ours(iterations)`` and of OpenSpiel's ``solver``, timed in
    turns (``rounds`` medians), and our first call's extra time (JIT)."""
    first, _ = timed(ours, ours_iterations)
    solver.evaluate_and_update_policy()
    start = time.perf_counter()
    solver.evaluate_and_update_policy()
    their_iterations = max(3, int(their_seconds / (time.perf_counter() - start)))
    mine, theirs = [], []
    for _ in range(rounds):
        elapsed, _ = timed(ours, ours_iterations)
        mine.append(elapsed / ours_iterations)
        start = time.perf_counter()
        for _ in range(their_iterations):
            solver.evaluate_and_update_policy()
        theirs.append((time.perf_counter() - start) / their_iterations)
    ours_s, theirs_s = statistics.median(mine), statistics.median(theirs)
    return dict(ours=ours_s, theirs=theirs_s, speedup=theirs_s / ours_s,
                jit=first - ours_s * ours_iterations)


def bench_cfr(case: dict, rounds: int, ours_iterations: int, their_seconds: float) -> dict:
    form = case["form"]
    return interleaved(lambda n: cfr.run(form, "rm", 1.0, n), pyspiel.CFRSolver(case["game"]),
                       rounds, ours_iterations, their_seconds)


def bench_yardsticks(case: dict, rounds: int, ours_iterations: int, their_seconds: float
                     ) -> dict:
    """Per solver: seconds per iteration of the engine's and of OpenSpiel's, and JIT time."""
    tree, game = case["tree"], case["game"]
    return {name: interleaved(lambda n, name=name: solvers.run(tree, name, n), cls(game),
                              rounds, ours_iterations, their_seconds)
            for name, cls in (("cfr_rm", pyspiel.CFRSolver), ("cfr_plus", pyspiel.CFRPlusSolver))}


def bench_nash_conv(case: dict, rounds: int, calls: int, batch: int) -> dict:
    form, game, compiled = case["form"], case["game"], case["compiled"]
    policies = random_policies(compiled, batch, seed=0)
    single = jax.jit(evaluation.nash_conv)
    batched = jax.jit(jax.vmap(evaluation.nash_conv, in_axes=(None, 0)))
    policy = jnp.asarray(policies[0])
    first, _ = timed(single, form, policy)
    first_batch, _ = timed(batched, form, jnp.asarray(policies))
    tabular = pyspiel.TabularPolicy(to_openspiel(compiled, policies[0]))
    start = time.perf_counter()
    pyspiel.nash_conv(game, tabular)
    their_calls = max(2, int(0.3 / (time.perf_counter() - start)))
    ours, ours_batch, theirs = [], [], []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            jax.block_until_ready(single(form, policy))
        ours.append((time.perf_counter() - start) / calls)
        elapsed, _ = timed(batched, form, jnp.asarray(policies))
        ours_batch.append(elapsed / batch)
        start = time.perf_counter()
        for _ in range(their_calls):
            pyspiel.nash_conv(game, tabular)
        theirs.append((time.perf_counter() - start) / their_calls)
    ours_s, batch_s, theirs_s = map(statistics.median, (ours, ours_batch, theirs))
    return dict(ours=ours_s, ours_batch=batch_s, theirs=theirs_s, speedup=theirs_s / ours_s,
                speedup_batch=theirs_s / batch_s, jit=first - ours_s,
                jit_batch=first_batch - batch_s * batch)


def machine() -> str:
    return describe(("jax", "jaxlib", "open_spiel", "numpy")) + ", float64"


def fmt_time(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def report(results: list[dict], command: str) -> str:
    lines = [
        "# Engine benchmark: neurd (JAX, sequence form) vs OpenSpiel (C++ tree walk)",
        "",
        f"Command: `{command}`  ",
        f"Date: {datetime.date.today().isoformat()}  ",
        f"Machine: {machine()}",
        "",
        "Both implementations run in one process, rounds interleaved; times are medians "
        "over rounds. CFR is regret matching with alternating updates in both (the same "
        "iterates: `tests/test_tabular.py` checks them equal to 1e-12). NashConv is of one "
        "fixed random policy; OpenSpiel gets it as a prebuilt `pyspiel.TabularPolicy`. "
        "\"batched\" evaluates a batch of policies in one vmapped call (time per policy).",
        "",
        "## Steady state",
        "",
        "| game | CFR iteration: neurd | CFR iteration: OpenSpiel | speed-up | NashConv: neurd "
        "| NashConv: neurd batched | NashConv: OpenSpiel | speed-up | speed-up batched |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        c, n = r["cfr"], r["nash_conv"]
        lines.append(
            f"| {r['name']} | {fmt_time(c['ours'])} | {fmt_time(c['theirs'])} | "
            f"{c['speedup']:.0f}x | {fmt_time(n['ours'])} | {fmt_time(n['ours_batch'])} | "
            f"{fmt_time(n['theirs'])} | {n['speedup']:.0f}x | {n['speedup_batch']:.0f}x |")
    return "\n".join(lines + _yardsticks_and_setup(results)) + "\n"


def _yardsticks_and_setup(results: list[dict]) -> list[str]:
    """The report's tables of Fig 4b's yardsticks and of the set-up and compile times."""
    lines = [
        "",
        "## Fig 4b's yardsticks: CFR and CFR+ as OpenSpiel computes them",
        "",
        "The engine's `neurd.tabular.solvers` walks the history tree level by level with "
        "OpenSpiel's floating-point operations in OpenSpiel's order (bit for bit equal: "
        "`tests/test_solvers.py`); OpenSpiel's C++ `CFRSolver` and `CFRPlusSolver` walk it "
        "recursively, looking information states up by string.",
        "",
        "| game | CFR: neurd | CFR: OpenSpiel | speed-up | CFR+: neurd | CFR+: OpenSpiel "
        "| speed-up | JIT (one program for both) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        rm, plus = r["yardsticks"]["cfr_rm"], r["yardsticks"]["cfr_plus"]
        lines.append(
            f"| {r['name']} | {fmt_time(rm['ours'])} | {fmt_time(rm['theirs'])} | "
            f"{rm['speedup']:.0f}x | {fmt_time(plus['ours'])} | {fmt_time(plus['theirs'])} | "
            f"{plus['speedup']:.0f}x | {fmt_time(rm['jit'])} |")
    lines += [
        "",
        "## Setup and compilation (once per game and process)",
        "",
        "| game | walk OpenSpiel tree to arrays | build JAX layout | JIT: CFR loop "
        "| JIT: NashConv | JIT: NashConv batched | OpenSpiel CFRSolver setup "
        "| yardsticks' layout |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        s, c, n = r["setup"], r["cfr"], r["nash_conv"]
        lines.append(
            f"| {r['name']} | {fmt_time(s['compile_game'])} | {fmt_time(s['sequence_form'])} | "
            f"{fmt_time(c['jit'])} | {fmt_time(n['jit'])} | {fmt_time(n['jit_batch'])} | "
            f"{fmt_time(s['pyspiel_solver_setup'])} | {fmt_time(s['solver_tree'])} |")
    return lines


@float64  # the engine's precision: its NashConv matches OpenSpiel's to 1e-10
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--games", nargs="+", default=["kuhn", "leduc", "goofspiel"],
                        choices=sorted(GAMES))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--iterations", type=int, default=2000,
                        help="neurd CFR iterations per round")
    parser.add_argument("--openspiel-seconds", type=float, default=0.5,
                        help="approximate OpenSpiel CFR time per round")
    parser.add_argument("--solver-iterations", type=int, default=500,
                        help="iterations of the engine's CFR and CFR+ per round")
    parser.add_argument("--calls", type=int, default=200, help="neurd NashConv calls per round")
    parser.add_argument("--batch", type=int, default=64, help="policies per batched call")
    parser.add_argument("--out", default=str(Path(__file__).with_name("RESULTS.md")))
    args = parser.parse_args(argv)
    results = []
    for name in args.games:
        case = setup(name)
        case["cfr"] = bench_cfr(case, args.rounds, args.iterations, args.openspiel_seconds)
        case["nash_conv"] = bench_nash_conv(case, args.rounds, args.calls, args.batch)
        case["yardsticks"] = bench_yardsticks(case, args.rounds, args.solver_iterations,
                                              args.openspiel_seconds)
        print(f"{name}: CFR {case['cfr']['speedup']:.0f}x, NashConv "
              f"{case['nash_conv']['speedup']:.0f}x, yardsticks "
              f"{case['yardsticks']['cfr_rm']['speedup']:.0f}x and "
              f"{case['yardsticks']['cfr_plus']['speedup']:.0f}x", file=sys.stderr)
        results.append(case)
    command = "python bench/bench_engine.py " + " ".join(argv if argv is not None
                                                         else sys.argv[1:])
    text = report(results, command.strip())
    out = Path(args.out)
    kept = out.read_text().partition(KEPT)[1:] if out.exists() else ("", "")
    out.write_text(text + "".join(kept))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
