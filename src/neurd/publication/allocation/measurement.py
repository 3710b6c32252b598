"""The throughput table: ms per learning cycle of every game at N configurations with 1, 2
and 3 jobs sharing the device (and a ``--baseline`` tree's with one), timed by worker
processes, what prices the schedule first; the profile trace of a Leduc and a Goofspiel segment."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from neurd.publication.allocation.places import SRC, TIMING, environment
from neurd.publication.allocation.processes import run_all
from neurd.publication.allocation.report import Report
from neurd.publication.allocation.timing import SIZES

PARALLEL = (1, 2, 3)
# The order in which the sizes are timed, and the sizes of the first round of timings: the schedule
# prices a block linearly between measured sizes, below the smallest at the smallest's time and
# never above the largest, so N = 480 alone prices every block (high), and N = 12 prices the
# one-seed blocks that put the paper's length first; the sizes in between sharpen the prices.
SIZE_ORDER = (480, 12, 120, 240, 60)
FIRST_SIZES = (480, 12)


def given_variant(rows: list[dict]) -> str:
    """The cycle variant of throughput rows given by earlier allocations (the default for rows
    older than variants); of several, the one with the least summed ms per cycle of one job
    at the largest N."""
    ours = [r for r in rows if r.get("code") == "this"]
    found = {str(r.get("variant", "default")) for r in ours}
    if len(found) <= 1:
        return found.pop() if found else "default"

    def summed(name):
        top = [r for r in ours if str(r.get("variant", "default")) == name
               and int(r["parallel"]) == 1 and int(r["configurations"]) == max(SIZES)]
        return (-len(top), sum(float(r["ms_per_cycle"]) for r in top))

    return min(sorted(found), key=summed)


def timed_by_all(rows: list[dict], parallel: int) -> list[dict]:
    """The rows of the cells every one of ``parallel`` workers timed (a cell timed by some of
    them only, the others stopped, was not timed with the GPU shared ``parallel`` ways)."""
    count: dict[tuple, int] = {}
    for row in rows:
        key = (row["game"], row["critic"], row["configurations"])
        count[key] = count.get(key, 0) + 1
    return [r for r in rows if count[(r["game"], r["critic"], r["configurations"])] >= parallel]


def measurement_order(cells: list[str]) -> list[list[str]]:
    """Cells ``game:critic:N`` as rounds of timing: first every game and critic at
    ``FIRST_SIZES``, then at the other sizes, each in ``SIZE_ORDER``."""
    def size(cell: str) -> int:
        return int(cell.rsplit(":", 1)[1])

    ordered = sorted(cells, key=lambda c: (SIZE_ORDER.index(size(c)), cells.index(c)))
    first = [c for c in ordered if size(c) in FIRST_SIZES]
    return [r for r in (first, [c for c in ordered if c not in first]) if r]


def workers(report: Report, what: str, cells: list[str], env: dict, parallel: int, extra,
             seconds: float, games: Path | None = None) -> list[dict]:
    """``parallel`` workers over ``cells`` (games compiled in ``games``, by default the
    allocation's) at once; the rows of the cells they all timed before they ended or were
    stopped at the end of ``seconds``."""
    work = report.work / "measure" / what.replace(" ", "_")
    work.mkdir(parents=True, exist_ok=True)
    sync = work / "sync"
    processes = []
    for slot in range(parallel):
        out = work / f"rows_{slot}.json"
        command = [sys.executable, str(TIMING), "cells", "--games",
                   str(games or report.games_dir), "--out", str(out), "--parallel", str(parallel),
                   "--slot", str(slot), "--sync", str(sync), "--cells", *cells, *extra]
        processes.append((out, subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                                                stderr=subprocess.STDOUT, text=True)))
    deadline = time.monotonic() + seconds
    for _, process in processes:
        try:
            output, _ = process.communicate(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            for _, p in processes:
                p.kill()
                p.wait()
            report.step(f"measure {what}", stopped=f"at the end of its {seconds:.0f} s")
            break
        if process.returncode != 0:
            report.step(f"measure {what}", failed=output[-2000:])
    rows = []
    for out, _ in processes:  # each worker rewrites its file after every cell it times
        if out.is_file():
            rows += json.loads(out.read_text())
    return timed_by_all(rows, parallel)


def measure(report: Report, cells: list[str], seconds: float, cache: Path, platform: str,
            baseline: Path | None, variant: str = "default") -> list[dict]:
    """The throughput table (see the module docstring), within ``seconds``: what matters most
    first (:func:`measurement_order`), so that a budget too short for all of it still prices
    every block; each round keeps the cells it timed before the budget ran out.  This tree's
    cycle runs as ``variant``."""
    deadline = time.monotonic() + seconds
    mine = ["--variant", variant]
    trees = [("this", SRC, report.games_dir)]
    if baseline:
        # the baseline's own games: a tree reads the compiled-game format of its day
        src = baseline / "src" if (baseline / "src").is_dir() else baseline
        needed = {c.split(":")[0] for c in cells}
        if all((src.parent / f"neural/{g}/game.npz").is_file() for g in needed):
            trees.append(("baseline", src, src.parent / "neural"))
        else:
            report.step("measure baseline", skipped=f"no games compiled by it in "
                        f"{src.parent / 'neural'} (make gpu-allocation-inputs makes them)")
    tiers = measurement_order(cells)
    cells = [c for tier in tiers for c in tier]
    # compile every program once, a process per program, a dozen at once, in that order
    compiling = []
    for code, src, games in trees:
        for cell in cells:
            out = report.work / "measure" / f"compile_{code}_{cell.replace(':', '_')}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            compiling.append((code, out, [sys.executable, str(TIMING),
                                          "cells", "--games", str(games), "--out",
                                          str(out), "--compile-only", "--cells", cell]
                              + (mine if code == "this" else []),
                              environment(platform, src, cache, variant)))
    done = run_all([(c, e) for _, _, c, e in compiling],
                    max(deadline - time.monotonic() - 60, 1.0))
    startups = {}
    for (code, out, _, _), result in zip(compiling, done):
        if result is not None and result.returncode == 0:
            for row in json.loads(out.read_text()):  # the whole process: a job's start-up
                startups[(code, row["game"], row["critic"], row["configurations"])] = \
                    result.seconds
    report.step("measure: compiled", programs=len(startups))
    rows = []
    rounds = ([("this", SRC, report.games_dir, p, k) for k in range(len(tiers))
               for p in PARALLEL] + [(code, src, games, 1, None) for code, src, games in trees[1:]])
    for code, src, games, parallel, tier in rounds:
        what = f"{code} x{parallel}" + (f" sizes {tier + 1}" if tier is not None else "")
        left = deadline - time.monotonic()
        if left < 20:
            report.step(f"measure {what}", skipped=f"{left:.0f} s left")
            continue
        extra = (["--evaluation"] if (code, parallel) == ("this", 1) else []) + (
            mine if code == "this" else [])
        if (code, parallel) == ("this", 1) and report.profile:
            extra += ["--profile", str(report.work / "profile")]
        got = workers(report, what, cells if tier is None else tiers[tier],
                       environment(platform, src, cache, variant), parallel, extra, left,
                       games)
        for row in got:
            row["code"] = code
            row["startup_seconds"] = startups.get(
                (code, row["game"], row["critic"], row["configurations"]))
        rows += got
        report.data["throughput"] = rows
        report.step(f"measure {what}", rows=len(got))
    return rows

