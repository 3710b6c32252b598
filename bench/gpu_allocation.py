"""One short GPU allocation's work for the paper-scale Fig 6, in one command.

    make gpu-allocation MINUTES=9.5 OUT=<folder that comes back>
    python3 bench/gpu_allocation.py --minutes 9.5 --out OUT      # the same, without make

GPU time comes as short allocations: one machine, about ten minutes of one
command, nothing kept afterwards but the files the command writes (a few, of at
most 16 MiB).  Within ``--minutes`` this command

1. **checks** the device (at most ``--check-minutes``): three learning cycles of
   every game and critic on the CPU and twice on the GPU, a process each, all at once --
   every leaf finite, the
   two GPU runs bitwise equal, CPU and GPU within the bound (``bench/gpu_check.py``'s
   first part).  If the check fails, no job starts.
2. **measures** (when no throughput table of this device is given, or
   ``--measure always``; at most ``--measure-minutes``): ms per learning cycle
   of each game at N = 12, 60, 120, 240, 480 configurations with 1, 2 and 3 jobs
   sharing the GPU, the checkpoint evaluation and the start-up of a job; the same
   for ``--baseline`` (an older ``src`` tree) with one job; a profile trace
   (``jax.profiler``) of a short Leduc and Goofspiel segment.  Programs are
   compiled once, in parallel, into a compilation cache the jobs then share.
   What prices the plan comes first: every game at N = 480 and 12 with 1, 2 and 3
   jobs, then the other sizes, then the baseline; each round keeps the cells it
   timed when the budget ends it, so a short budget still prices every block.
3. **plans** (:func:`neurd.allocation.plan`): the seed blocks that fit what is
   left, the paper's length first (every game with a seed) then seeds, from the
   measured (or given) throughput and the seeds the publication already has;
   every block predicted to finish, none started that would not.
4. **runs** them (``neurd neural-run --seeds``), several at once on the GPU as
   planned, each killed only at the hard deadline (its block is then lost).
5. **packs** the finished blocks (``blocks.json`` and ``blocks.tar.NNN``, every
   part and file with its SHA-256), with this allocation's report in the index.

Writes into ``--out``: ``allocation.json`` (the report, rewritten as it goes: device,
check, throughput, plan, jobs, the plan for the rest), ``blocks.json`` and its parts,
and ``profile.tar.gz`` when a trace was taken.  Back on a CPU machine,
``make publish-blocks FROM=<that folder>`` checks and publishes the blocks.

Needs jax (CUDA), flax, optax, numpy, pandas, pyarrow; not Snakemake nor OpenSpiel:
the config snapshot and the compiled games come with the working tree
(``make gpu-allocation-inputs`` makes them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tarfile
import threading
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # this process never takes the GPU

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
# a timing worker imports the package from the tree its PYTHONPATH names (this one, or the
# --baseline tree it times); every other use of this file takes this tree's
if sys.argv[1:2] != ["worker"]:
    sys.path.insert(0, str(SRC))
sys.path.insert(0, str(ROOT / "bench"))

import gpu_check  # noqa: E402  (bench/gpu_check.py: the check's workers and comparison)
from segment_timing import make_spec, time_segments, worker_env  # noqa: E402  (bench/)

if TYPE_CHECKING:
    from neurd import allocation

SIZES = (12, 60, 120, 240, 480)
PARALLEL = (1, 2, 3)
# The order in which the sizes are timed, and the sizes of the first round of timings: the plan
# prices a block linearly between measured sizes, below the smallest at the smallest's time and
# never above the largest, so N = 480 alone prices every block (high), and N = 12 prices the
# one-seed blocks that put the paper's length first; the sizes in between sharpen the prices.
SIZE_ORDER = (480, 12, 120, 240, 60)
FIRST_SIZES = (480, 12)
GAMES = ("kuhn", "leduc", "goofspiel")
EXIT_STOPPED = 75  # neurd neural-run stopped at its wall-time budget, its state saved


class Report:
    """``allocation.json``, rewritten at every step, and a line on the console per event."""

    def __init__(self, out: Path, minutes: float):
        self.out, self.start, self.minutes = out, time.monotonic(), minutes
        self.data = {"minutes": minutes, "steps": [], "check": [], "throughput": [],
                     "jobs": [], "plan": None}
        self.lock = threading.Lock()
        out.mkdir(parents=True, exist_ok=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return 60.0 * self.minutes - self.elapsed()

    def say(self, text: str) -> None:
        print(f"[{self.elapsed() / 60:5.2f} min] {text}", flush=True)

    def step(self, name: str, **fields) -> None:
        with self.lock:
            self.data["steps"].append({"step": name, "at_seconds": round(self.elapsed(), 1),
                                       **fields})
        self.save()
        self.say(f"{name}: {fields}" if fields else name)

    def save(self) -> None:
        with self.lock:
            text = json.dumps(self.data, indent=1, sort_keys=True, default=str)
        tmp = self.out / ".allocation.json.tmp"
        tmp.write_text(text + "\n")
        os.replace(tmp, self.out / "allocation.json")


def _env(platform: str, src: Path = SRC, cache: Path | None = None, fraction=None) -> dict:
    env = worker_env(platform, True, src)
    if cache is not None:
        env["JAX_COMPILATION_CACHE_DIR"] = str(cache)
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    if fraction is not None:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true"
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{fraction:.2f}"
    return env


# --- 1. the check ---------------------------------------------------------------------------


def _run_all(jobs: list[tuple[list[str], dict]], seconds: float, limit: int = 12
             ) -> list[subprocess.CompletedProcess | None]:
    """Run commands (``(argv, env)``), at most ``limit`` at once, all within ``seconds``;
    each one's result (its wall time from start to end in ``.seconds``), or None where it did
    not finish in time (it is killed)."""
    deadline = time.monotonic() + seconds
    results: list = [None] * len(jobs)
    pending, running, started = list(range(len(jobs))), {}, {}
    while pending or running:
        while pending and len(running) < limit:
            k = pending.pop(0)
            started[k] = time.monotonic()
            running[k] = subprocess.Popen(jobs[k][0], env=jobs[k][1], stdout=subprocess.PIPE,
                                          stderr=subprocess.STDOUT, text=True)
        for k, process in list(running.items()):
            if process.poll() is not None:
                results[k] = subprocess.CompletedProcess(jobs[k][0], process.returncode,
                                                         process.stdout.read())
                results[k].seconds = round(time.monotonic() - started[k], 2)
                del running[k]
        if time.monotonic() > deadline:
            for process in running.values():
                process.kill()
            break
        time.sleep(0.1)
    return results


def check_device(report: Report, games_dir: Path, platform: str, seconds: float,
                 games: list[str]) -> bool:
    """gpu_check's cycles, a process per game and device, on the CPU and twice on the
    device, all at once; compared here."""
    import numpy as np

    work = report.work / "check"
    work.mkdir(exist_ok=True)
    runs = [(where, game, critic) for where in ("cpu", "a", "b") for game in games
            for critic in (("learned", "exact") if game in gpu_check.EXACT else ("learned",))]
    jobs = [([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "cycles", "--games",
              str(games_dir), "--game", game, "--critic", critic, "--out",
              str(work / f"{where}_{game}_{critic}.npz")],
             _env("cpu" if where == "cpu" else platform)) for where, game, critic in runs]
    for (where, game, critic), done in zip(runs, _run_all(jobs, seconds, limit=16)):
        if done is None or done.returncode != 0:
            report.step("check", ok=False, why=f"the {game} {critic} run ({where}) "
                        + ("took too long" if done is None else "failed"),
                        output=None if done is None else done.stdout[-3000:])
            return False
    merged = {}
    for where in ("cpu", "a", "b"):
        arrays = {}
        for _, game, critic in [r for r in runs if r[0] == where]:
            with np.load(work / f"{where}_{game}_{critic}.npz") as data:
                arrays.update({k: data[k] for k in data.files if k != "platform"})
                arrays["platform"] = data["platform"]
        merged[where] = work / f"{where}.npz"
        np.savez(merged[where], **arrays)

    checks = Checks()
    gpu_check.compare_cycles(checks, merged["cpu"], [merged["a"], merged["b"]], games_dir)
    report.data["check"] += checks.rows
    for row in checks.rows:
        report.say(f"[{'ok' if row['ok'] else 'FAIL'}] {row['check']}")
    report.step("check", ok=checks.ok())
    return checks.ok()


class Checks:
    """What :func:`gpu_check.compare_cycles` finds, as rows (its ``check(name, ok,
    measured)``)."""

    def __init__(self):
        self.rows: list[dict] = []

    def check(self, name: str, ok: bool, measured) -> None:
        self.rows.append({"check": name, "ok": bool(ok), "measured": measured})

    def ok(self) -> bool:
        return bool(self.rows) and all(r["ok"] for r in self.rows)


def check_variants(report: Report, games: list[str], platform: str, cache: Path,
                   seconds: float) -> str:
    """The cycle variant the allocation runs: each candidate (:func:`neurd.neural.variants.
    candidates`) checked on every game as the device was (its learned critic's cycles twice
    on the device, against the device check's CPU run) and timed at N = 480; the one with the
    least summed ms per cycle among those that passed for every game (the default where none
    did better, or no time was left)."""
    from neurd.neural import variants

    work = report.work / "variants"
    work.mkdir(parents=True, exist_ok=True)
    candidates = variants.candidates(gpu=platform != "cpu")
    jobs, what = [], []
    for variant in candidates:
        env = _env(platform, SRC, cache)
        env["XLA_FLAGS"] = variants.xla_flags(variant, env["XLA_FLAGS"])
        jobs.append(([sys.executable, str(Path(__file__).resolve()), "worker", "--games",
                      str(report.games_dir), "--out", str(work / f"time_{variant.name}.json"),
                      "--variant", variant.name, "--cells",
                      *[f"{g}:learned:{max(SIZES)}" for g in games]], env))
        what.append(None)
        for game in games:
            for where in ("a", "b"):
                jobs.append(([sys.executable, str(ROOT / "bench" / "gpu_check.py"), "cycles",
                              "--games", str(report.games_dir), "--game", game, "--critic",
                              "learned", "--variant", variant.name, "--out",
                              str(work / f"{variant.name}_{where}_{game}.npz")], env))
                what.append((variant.name, game, where))
    done = _run_all(jobs, seconds)
    passed, ms = {}, {}
    for variant in candidates:
        name = variant.name
        runs = {(w[1], w[2]): d for w, d in zip(what, done) if w and w[0] == name}
        ok = all(d is not None and d.returncode == 0 for d in runs.values())
        for game in games if ok else []:
            checks = Checks()
            gpu_check.compare_cycles(
                checks, report.work / "check" / f"cpu_{game}_learned.npz",
                [work / f"{name}_{w}_{game}.npz" for w in ("a", "b")], report.games_dir)
            ok = ok and checks.ok()
        timed = work / f"time_{name}.json"
        rows = json.loads(timed.read_text()) if timed.is_file() else []
        passed[name] = ok and len(rows) == len(games) and all(r["finite"] for r in rows)
        ms[name] = sum(r["ms_per_cycle"] for r in rows) if passed[name] else None
    chosen = variants.choose(passed, ms)
    report.data["variants"] = {"chosen": chosen, "checked": [
        {"variant": v.name, "passed": passed[v.name], "summed_ms_per_cycle": ms[v.name]}
        for v in candidates]}
    report.step("variants", chosen=chosen, passed=sum(passed.values()), of=len(candidates))
    return chosen


# --- 2. the measurement ---------------------------------------------------------------------


def worker(args) -> int:
    """Time cells ``game:critic:N`` in order (``--sync``: wait for ``--parallel`` workers
    before each, so that they share the GPU), or only compile them (``--compile-only``)."""
    import jax
    import numpy as np

    from neurd import games
    from neurd.neural import train

    rows = []
    out = Path(args.out)
    _save_rows(out, rows)
    for cell in args.cells:
        name, critic, n = cell.split(":")
        compiled = games.load(Path(args.games) / name / "game.npz")
        # this tree's own variants (a baseline tree has none)
        spec = make_spec("float32", critic, args.variant)
        count = (max(20, round(args.cycles_times_n / int(n))) if args.cycles_times_n
                 else 40 if int(n) >= 240 else 100)
        timed = time_segments(compiled, name, spec, int(n) // 12, count,
                              0 if args.compile_only else 2,
                              ready=None if not args.sync else partial(_partners, args, cell),
                              evaluation=args.evaluation)
        if timed is None:
            # a partner is gone (it failed): what this one times alone is not kept
            print(f"{cell}: the other jobs did not come; stopped", flush=True)
            return 0
        row = {"game": name, "critic": critic, "configurations": int(n),
               "parallel": args.parallel, "variant": args.variant,
               "first_segment_seconds": round(timed.setup_seconds + timed.first_seconds, 2)}
        if not args.compile_only:
            row["ms_per_cycle"] = round(1e3 * min(timed.seconds) / count, 4)
            row["finite"] = timed.finite
            if args.evaluation:
                row["checkpoint_seconds"] = round(timed.checkpoint_seconds, 4)
        rows.append(row)
        _save_rows(out, rows)
        print(json.dumps(row), flush=True)
        if (args.profile and name in ("leduc", "goofspiel") and critic == "learned"
                and int(n) == max(SIZES)):
            with jax.profiler.trace(str(Path(args.profile) / f"{name}-{n}")):
                jax.block_until_ready(train.run_segment(spec, timed.game, timed.states,
                                                        timed.keys, timed.etas, 500, 20,
                                                        np.float32(1.0)))
    return 0


def _save_rows(out: Path, rows: list[dict]) -> None:
    """A worker's rows, rewritten after every cell: one stopped at a deadline keeps what it
    timed."""
    tmp = out.with_name(out.name + ".tmp")
    tmp.write_text(json.dumps(rows))
    os.replace(tmp, out)


def _partners(args, cell: str) -> bool:
    """Wait (at most ``--sync-seconds``) until the ``--parallel`` workers sharing the device
    have all reached ``cell``; whether they did."""
    ready = Path(args.sync) / cell
    ready.mkdir(parents=True, exist_ok=True)
    (ready / f"{args.slot}").touch()
    wait_until = time.monotonic() + args.sync_seconds
    while len(list(ready.iterdir())) < args.parallel and time.monotonic() < wait_until:
        time.sleep(0.005)
    return len(list(ready.iterdir())) >= args.parallel


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


def _timed_by_all(rows: list[dict], parallel: int) -> list[dict]:
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


def _workers(report: Report, what: str, cells: list[str], env: dict, parallel: int, extra,
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
        command = [sys.executable, str(Path(__file__).resolve()), "worker", "--games",
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
    return _timed_by_all(rows, parallel)


def _variant_env(platform: str, src: Path, cache: Path | None, variant: str,
                 fraction=None) -> dict:
    """:func:`_env` with the cycle variant's XLA flags (none for another tree)."""
    env = _env(platform, src, cache, fraction)
    if src == SRC and variant != "default":
        from neurd.neural import variants

        env["XLA_FLAGS"] = variants.xla_flags(variants.parse(variant), env["XLA_FLAGS"])
    return env


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
            compiling.append((code, out, [sys.executable, str(Path(__file__).resolve()),
                                          "worker", "--games", str(games), "--out",
                                          str(out), "--compile-only", "--cells", cell]
                              + (mine if code == "this" else []),
                              _variant_env(platform, src, cache, variant)))
    done = _run_all([(c, e) for _, _, c, e in compiling],
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
        got = _workers(report, what, cells if tier is None else tiers[tier],
                       _variant_env(platform, src, cache, variant), parallel, extra, left,
                       games)
        for row in got:
            row["code"] = code
            row["startup_seconds"] = startups.get(
                (code, row["game"], row["critic"], row["configurations"]))
        rows += got
        report.data["throughput"] = rows
        report.step(f"measure {what}", rows=len(got))
    return rows


def pack_profile(report: Report) -> None:
    folder = report.work / "profile"
    if not folder.is_dir():
        return
    target = report.out / "profile.tar.gz"
    # the whole trace; over the size that comes back, the XPlane files alone (what xprof
    # reads; the Chrome trace is derived from them)
    for left_out in ((), (".trace.json.gz",)):
        with tarfile.open(target, "w:gz") as tar:
            tar.add(folder, arcname="profile", filter=lambda member, ends=left_out: None
                    if member.name.endswith(ends) else member)
        if target.stat().st_size <= 15 * 2**20:
            report.step("profile", bytes=target.stat().st_size, left_out=list(left_out))
            return
    target.unlink()
    report.step("profile", dropped="over 15 MiB")


# --- 3-5. plan, run, pack ---------------------------------------------------------------------


def published_seeds(publication: Path) -> dict[str, list[int]]:
    manifest = publication / "manifest.json"
    if not manifest.is_file():
        return {}
    games = json.loads(manifest.read_text()).get("games", {})
    return {g: list(e.get("seeds", [])) for g, e in games.items()}


def published_progress(publication: Path, cfg: dict) -> tuple[list, float]:
    """The publication's blocks in progress (each with the share of its cycles done), and the
    bytes the paper-scale run may still add to the repository's history."""
    from neurd import allocation
    from neurd.neural.plan import checkpoint_grid
    from neurd.neural.runs import parse_block
    from neurd.resume_states import state_folder

    path = publication / "manifest.json"
    if not path.is_file():
        return [], float(allocation.HISTORY_CAP)
    manifest = json.loads(path.read_text())
    out = []
    for game, entry in manifest.get("games", {}).items():
        iterations = checkpoint_grid(int(cfg["phase_iterations"][game]), int(cfg["phases"]),
                                     int(cfg["checkpoints"]["geometric"]),
                                     int(cfg["checkpoints"]["linear"]),
                                     int(cfg["critic_updates_per_policy_update"]))[0]
        for name in entry.get("in_progress", []):
            meta = json.loads((publication / state_folder(game, name) / "meta.json").read_text())
            done = int(iterations[meta["next_row"] - 1]) / int(iterations[-1])
            out.append(allocation.InProgress(game, *parse_block(name), done=done))
    used = manifest.get("history_bytes", manifest.get("bytes", 0))
    return out, float(allocation.HISTORY_CAP - used)


def repository_bytes(results: Path, cfg: dict):
    """Bytes per seed of a finished block and of a block-in-progress state, per game."""
    from neurd import allocation, games
    from neurd.resume_states import bytes_per_seed

    sizes = {g: bytes_per_seed(cfg, g, games.load(results / f"neural/{g}/game.npz"))
             for g in cfg["games"]}
    return allocation.Bytes(block={g: b for g, (b, _) in sizes.items()},
                            state={g: s for g, (_, s) in sizes.items()})


def run_block(report: Report, cfg: dict, block, results: Path, env: dict,
              hard_deadline: float, publication: Path, variant: str,
              work: Path | None = None, stop: threading.Event | None = None) -> dict:
    """Run one planned block (a published block in progress resumed from its state) in
    ``work`` (default ``results/allocation``); its record for the report, with ``folder`` (its
    tables) and ``state`` (its saved state).  The job is killed at ``hard_deadline`` or once
    ``stop`` is set; a job of one critic killed so comes back in progress from the state it
    saved last (its checkpoint folder's, at most ``--checkpoint-minutes`` old)."""
    from neurd.allocation import MIN_PIECE_SECONDS, SAVE_SECONDS
    from neurd.neural.runs import critics
    from neurd.resume_states import state_folder, to_checkpoint

    work = results / "allocation" if work is None else work
    left = hard_deadline - time.monotonic()
    record = {"block": f"{block.game}/{block.name}", "slot": block.slot,
              "predicted_seconds": block.predicted_seconds}
    # a block that may stop (one critic) starts if a piece worth its start-up fits; one that
    # must finish (a seed is published with every critic at once), if all of it does
    may_stop = len(critics(cfg, block.game)) == 1
    needs = (block.predicted_seconds if not may_stop else
             min(block.predicted_seconds, MIN_PIECE_SECONDS + SAVE_SECONDS + 60.0))
    if needs > left:
        record["status"] = f"not started: needs {needs:.0f} s, {left:.0f} s left"
        return record
    folder = work / f"neural/{block.game}/blocks/{block.name}"
    folder.mkdir(parents=True, exist_ok=True)
    state = work / state_folder(block.game, block.name)
    if block.done_before > 0:  # the published block in progress, resumed
        to_checkpoint(publication / state_folder(block.game, block.name), state)
    command = [sys.executable, "-m", "neurd.cli", "neural-run",
               "--config", str(results / "config/neural.json"), "--game", block.game,
               "--critic", block.critic, "--seeds", f"{block.first}-{block.last}",
               "--compiled", str(results / f"neural/{block.game}/game.npz"),
               "--curves", str(folder / "curves.parquet"),
               "--policies", str(folder / "policies.parquet"),
               "--checkpoint", str(state), "--variant", variant]
    if may_stop:
        budget = hard_deadline - time.monotonic() - SAVE_SECONDS
        command += ["--stop-after-minutes", f"{max(budget, 1.0) / 60:.4f}"]
    report.say(f"{record['block']}: started on slot {block.slot} (predicted "
               f"{block.predicted_seconds / 60:.1f} min, {left / 60:.1f} min left)")
    start = time.monotonic()
    with open(folder / "run.log", "w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   cwd=ROOT)
        killed = False
        while process.poll() is None:
            if time.monotonic() >= hard_deadline or (stop is not None and stop.is_set()):
                process.kill()
                killed = True
            time.sleep(0.2)
    record.update(seconds=round(time.monotonic() - start, 1), returncode=process.returncode)
    ok = process.returncode == 0 and (folder / "curves.parquet").is_file()
    saved = (state / "meta.json").is_file()
    paused = saved and (process.returncode == EXIT_STOPPED or (killed and may_stop))
    record["status"] = ("finished" if ok else "in progress (stopped at the end of its slot, "
                        "state saved)" if paused and not killed else "in progress (killed, "
                        "with the state it saved last)" if paused
                        else "lost (killed at the deadline)" if killed
                        else f"failed (exit {process.returncode}): "
                        f"{_last_error(folder / 'run.log')}")
    if not ok:
        record["log"] = (folder / "run.log").read_text()[-2000:]
    if paused:
        shutil.copyfile(folder / "run.log", state / "run.log")
    return dict(record, folder=folder if ok else None, state=state if paused else None)


def _last_error(log: Path) -> str:
    """The last line of a job's log that says what went wrong (its last line otherwise)."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines()
             if line.strip()]
    said = [line for line in lines if "Error" in line or "error" in line]
    return (said or lines or ["(an empty log)"])[-1][:300]


def run_jobs(report: Report, cfg: dict, step: allocation.Allocation, results: Path, platform: str,
             cache: Path, hard_deadline: float, publication: Path, variant: str = "default"
             ) -> tuple[list, list]:
    """The plan's blocks, ``step.parallel`` at a time (one queue per slot); ``(finished,
    stopped)``: the folders of the blocks that finished, and of the states of those stopped
    at the end of their slot (blocks in progress for the next allocation)."""
    shutil.rmtree(results / "allocation/neural", ignore_errors=True)  # nothing earlier packed
    finished, stopped = [], []
    env = _variant_env(platform, SRC, cache, variant, 0.9 / step.parallel)

    def slot_queue(slot: int) -> None:
        for block in [b for b in step.blocks if b.slot == slot]:
            record = run_block(report, cfg, block, results, env, hard_deadline, publication,
                               variant)
            folder, state = record.pop("folder", None), record.pop("state", None)
            with report.lock:
                report.data["jobs"].append(record)
                finished.extend([folder] if folder else [])
                stopped.extend([state] if state else [])
            report.save()
            report.say(f"{record['block']}: {record['status']}"
                       + (f" in {record['seconds']:.0f} s" if "seconds" in record else ""))

    threads = [threading.Thread(target=slot_queue, args=(k,)) for k in range(step.parallel)]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        wake = time.monotonic() + 30.0  # a line every 30 s; on to packing as the last one ends
        for thread in threads:
            thread.join(timeout=max(wake - time.monotonic(), 0.0))
        if any(t.is_alive() for t in threads):
            report.say(f"jobs: {len(report.data['jobs'])} of {len(step.blocks)} done, "
                       f"{max(hard_deadline - time.monotonic(), 0) / 60:.1f} min to the "
                       "deadline")
    return finished, stopped


def pack_blocks(report: Report, cfg: dict, results: Path, finished: list[Path],
                stopped: list[Path], work: Path | None = None) -> None:
    """Pack the finished blocks' tables and the stopped blocks' states (with their logs), run in
    ``work`` (default ``results/allocation``), into ``blocks.json`` and its parts in the folder
    that comes back, with the report."""
    from neurd.packs import pack
    from neurd.resume_states import state_files
    from neurd.tables import config_hash

    files = {}
    for folder, names in [(f, ("curves.parquet", "policies.parquet")) for f in finished] + [
            (f, state_files(f)) for f in stopped]:
        for name in [*names, "run.log"]:
            files[folder.relative_to(work or results / "allocation").as_posix()
                  + f"/{name}"] = (
                folder / name)
    if files:
        pack(files, report.out, "blocks", extra={"config_hash": config_hash(cfg),
                                                  "allocation": report.data})


def table(report: dict) -> str:
    """The throughput of an allocation's report as the Markdown table of bench/NEURAL.md."""
    rows = report.get("throughput", [])
    lines = [f"{report.get('device', '?')} ({report.get('nvidia_smi', '')}), "
             f"{report.get('date', '')}, code {report.get('code_revision', '?')}, revision "
             f"{(report.get('revision') or {}).get('commit')}", "",
             "| code | game | critic | N | jobs on the GPU | ms/cycle | checkpoint s | "
             "start-up s | one run of every phase, min |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    cycles = {g: 3 * 330_000 // 4 for g in GAMES}
    keyed = {}
    for row in rows:  # the slowest of the jobs timed together
        key = (row.get("code"), row["game"], row.get("critic"), row["configurations"],
               row["parallel"])
        if key not in keyed or row["ms_per_cycle"] > keyed[key]["ms_per_cycle"]:
            keyed[key] = row
    for key in sorted(keyed, key=lambda k: (k[0] != "this", GAMES.index(k[1]), k[2], k[4],
                                            k[3])):
        row = keyed[key]
        minutes = cycles[row["game"]] * row["ms_per_cycle"] / 6e4
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | "
                     f"{row['ms_per_cycle']:.3f} | {row.get('checkpoint_seconds') or '-'} | "
                     f"{row.get('startup_seconds') or '-'} | {minutes:.1f} |")
    return "\n".join(lines) + "\n"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode")
    t = sub.add_parser("table", help="an allocation report's throughput as Markdown")
    t.add_argument("report", help="allocation.json, or a report kept in bench/gpu/allocations")
    w = sub.add_parser("worker")
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
    parser.add_argument("--results", default="results/paper",
                        help="the scale's results folder: config/neural.json and "
                             "neural/<game>/game.npz (make gpu-allocation-inputs)")
    parser.add_argument("--publication", default="published/paper",
                        help="the publication whose seeds are done")
    parser.add_argument("--out", required=False, help="the folder that comes back")
    parser.add_argument("--minutes", type=float, default=9.5, help="the allocation's budget")
    parser.add_argument("--check-minutes", type=float, default=2.5,
                        help="the most the check may take (it should take about a minute on "
                             "a GPU machine, and what it does not use goes to the jobs; if it "
                             "overruns, no job starts)")
    parser.add_argument("--measure", choices=("auto", "always", "never"), default="auto",
                        help="auto: measure unless --throughput holds rows of this device")
    parser.add_argument("--measure-minutes", type=float, default=3.0)
    parser.add_argument("--throughput", action="append", default=[],
                        help="a throughput table: an earlier allocation's report (repeat); "
                             "its rows of this device's kind are used")
    parser.add_argument("--baseline", default=None, help="an older src tree timed beside")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--no-variants", action="store_true",
                        help="measure and run the default cycle variant only")
    parser.add_argument("--reserve-minutes", type=float, default=0.5,
                        help="kept at the end for packing")
    parser.add_argument("--max-parallel", type=int, default=3)
    parser.add_argument("--platform", default="cuda",
                        help="the JAX platform of the jobs (cpu: a dry run on a CPU)")
    return parser


def _inputs(parser: argparse.ArgumentParser, args) -> tuple[Path, dict]:
    """The results folder and its config snapshot, checked, before anything runs."""
    for key in ("minutes", "check_minutes", "measure_minutes", "reserve_minutes"):
        value = getattr(args, key)
        if not (value == value and 0 <= value < 1e4):
            parser.error(f"--{key.replace('_', '-')} must be a number of minutes, got {value}")
    if args.minutes <= 0 or args.max_parallel < 1:
        parser.error("--minutes must be positive and --max-parallel at least 1")
    if not args.out:
        parser.error("--out is required")
    results = Path(args.results)
    snapshot = results / "config/neural.json"
    if not snapshot.is_file():
        parser.error(f"{snapshot} is missing: make gpu-allocation-inputs (on a machine with "
                     "Snakemake and OpenSpiel) and carry results/paper here")
    cfg = json.loads(snapshot.read_text())
    missing = [g for g in cfg["games"] if not (results / f"neural/{g}/game.npz").is_file()]
    if missing:
        parser.error(f"compiled games missing in {results}/neural: {missing}")
    return results, cfg


def _start(args, results: Path, cfg: dict) -> tuple[Report, str]:
    """The report, its working folders and the device it describes; the device's kind."""
    from neurd.revision import REVISION_FILE_VARIABLE, git_revision, source_hash
    from neurd.tables import config_hash

    report = Report(Path(args.out), args.minutes)
    # only what comes back is written to --out (a few files); the rest works beside the jobs
    report.work = results / "allocation" / "work"
    shutil.rmtree(report.work, ignore_errors=True)
    report.work.mkdir(parents=True)
    report.games_dir = results / "neural"
    report.profile = not args.no_profile
    report.cache = results / "allocation" / "jax-cache"
    report.cache.mkdir(parents=True, exist_ok=True)
    info, smi = gpu_check.describe_device(_env(args.platform))
    if (results / "revision.json").is_file():
        os.environ[REVISION_FILE_VARIABLE] = str((results / "revision.json").resolve())
    report.data.update({
        "device": info.stdout.strip(), "nvidia_smi": smi,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "revision": git_revision(ROOT), "config_hash": config_hash(cfg),
        # what a cycle runs: throughput measured under another code is measured again
        "code_revision": source_hash(SRC / "neurd" / "neural", SRC / "neurd" / "tabular")})
    report.step("start", device=info.stdout.strip() or info.stderr[-300:])
    return report, info.stdout


def _throughput(args, report: Report, cfg: dict, kind: str) -> tuple[list[dict], str]:
    """The throughput rows the plan prices blocks with and the cycle variant the jobs run:
    the given reports' of this card and code, else measured here (variants first)."""
    rows = []
    for path in args.throughput:
        given = json.loads(Path(path).read_text())
        rows += [dict(r, source=Path(path).name) for r in given.get("throughput", [])
                 if kind and r.get("device") == kind and r.get("code") == "this"
                 and r.get("revision_code") == report.data["code_revision"]]
    variant = given_variant(rows)
    rows = [r for r in rows if str(r.get("variant", "default")) == variant]
    if args.measure == "always" or (args.measure == "auto" and not rows):
        cells = [f"{g}:{c}:{n}" for g in cfg["games"]
                 for c in (("learned", "exact") if g in cfg["exact_critic_games"]
                           else ("learned",)) for n in SIZES]
        budget = min(60 * args.measure_minutes, report.left() - 120)
        start = time.monotonic()
        variant = "default" if args.no_variants else check_variants(
            report, list(cfg["games"]), args.platform, report.cache, budget / 3)
        rows = measure(report, cells, budget - (time.monotonic() - start), report.cache,
                       args.platform, Path(args.baseline) if args.baseline else None,
                       variant)
        for row in rows:
            row["device"], row["revision_code"] = kind, report.data["code_revision"]
        pack_profile(report)
    report.data["throughput"], report.data["variant"] = rows, variant
    return rows, variant


def _plan(args, report: Report, cfg: dict, results: Path, rows: list[dict], checked: float):
    """This allocation's plan and the schedule for the rest, into the report."""
    from neurd import allocation

    publication = Path(args.publication)
    published = published_seeds(publication)
    in_progress, history_left = published_progress(publication, cfg)
    best = allocation.schedule(
        cfg, published, allocation.Throughput(rows), report.left() - 60 * args.reserve_minutes,
        later_seconds=60 * (args.minutes - args.reserve_minutes) - checked - 30,
        in_progress=in_progress, bytes_=repository_bytes(results, cfg),
        history_left=history_left, max_parallel=args.max_parallel)
    step = best.plans[0]
    report.data["plan"] = step.to_json()
    report.data["rest"] = {"allocations": len(best.plans), "sizes": best.sizes,
                           "parallel": best.parallel, "first": best.first, "full": best.full,
                           "gpu_minutes": round(best.gpu_seconds / 60, 1),
                           "history_mib": round(best.history_bytes / 2**20, 1),
                           "history_left_mib": round(history_left / 2**20, 1),
                           "words": allocation.describe(cfg, published, best)}
    report.step("plan", blocks=[f"{b.game}/{b.name}@{b.slot}" for b in step.blocks],
                parallel=step.parallel, notes=step.notes)
    return step


def main(argv=None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.mode == "worker":
        return worker(args)
    if args.mode == "table":
        print(table(json.loads(Path(args.report).read_text())), end="")
        return 0
    results, cfg = _inputs(parser, args)
    report, device = _start(args, results, cfg)
    if args.platform != "cpu" and "gpu" not in device:
        report.step("no GPU visible to JAX: nothing run")
        return 1
    if not check_device(report, results / "neural", args.platform, 60 * args.check_minutes,
                        list(cfg["games"])):
        return 1
    checked = report.elapsed()  # what the next allocations' check is expected to take
    rows, variant = _throughput(args, report, cfg, device.split("|")[-1].strip())
    step = _plan(args, report, cfg, results, rows, checked)
    hard = time.monotonic() + report.left() - 60 * args.reserve_minutes
    finished, stopped = run_jobs(report, cfg, step, results, args.platform, report.cache,
                                 hard, Path(args.publication), variant)
    report.step("pack", blocks=len(finished), in_progress=len(stopped))
    pack_blocks(report, cfg, results, finished, stopped)
    report.step("done", blocks=[str(f.relative_to(results / "allocation")) for f in finished],
                in_progress=[str(f.relative_to(results / "allocation")) for f in stopped])
    return 0


if __name__ == "__main__":
    sys.exit(main())
