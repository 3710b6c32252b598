"""NeuRD's loss readings at the paper's length: which reading of Algorithm 1's logits holds
for three phases of 330,000 iterations (``make readings-paper``; docs/readings.md).

The published Fig 6 at the paper's length diverged for NeuRD in Leduc (and in Kuhn with the
exact critic) under the raw reading, the loss ``-sum_a y A`` on the network's raw outputs.
This study runs NeuRD under each reading of ``y`` (:data:`READINGS`) beside SPG, the control,
at the paper's length, with the growth diagnostics of every checkpoint (the logits' common
mode, the largest centred logit, each network's weight norm:
:data:`neurd.neural.results.GROWTH_COLUMNS`), in **cells** (:class:`Cell`): one game,
critic, reading and number of phases each, every entropy level of :data:`ENTROPIES` and the
run seeds ``0..SEEDS-1`` in one job.

It runs in the background, at the lowest priority, from a frozen copy of the code
(:func:`start`); a cell saves its state every two minutes and resumes from it; ``publish``
copies the finished cells' curves and the unfinished cells' states into the repository's
``published/readings/paper-length`` (a later session, on another machine, resumes them
there); ``report`` draws the figure and writes the table docs/readings.md quotes;
``raw-logits`` draws the raw reading's paper-scale publication and counts its divergences
(:mod:`neurd.paper_readings_raw`).

The cells' settings are the paper config's where the study does not name them (learning
rates, batches, threshold, the checkpoint grid), read by the same code as ``compare()``
(:func:`neurd.comparison.compare`): each cell is a ``compare()`` call that can be resumed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import neurd
from neurd import games
from neurd.comparison import neural_section
from neurd.names import GAMES, NEURD, SPG
from neurd.neural import runs
from neurd.neural.environment import job_flags
from neurd.neural.results import CURVES_COLUMNS, run_table
from neurd.paper_readings_raw import report as raw_logits_report
from neurd.paper_readings_report import report
from neurd.revision import git_revision, source_hash
from neurd.tables import config_hash, write_table

ROOT = Path(__file__).resolve().parents[2]
STUDY = "readings-paper"
PUBLISHED = Path("published/readings/paper-length")
WORK = Path("results/readings-paper")

# the study's scale: the paper's phase length, four run seeds, five entropy levels
PHASE_ITERATIONS = 330_000
SEEDS = 4
ENTROPIES = (0.0, 0.03, 0.1, 0.3, 1.0)
CHECKPOINTS = {"geometric": 20, "linear": 50}  # the paper config's grid (paper.yaml)
SEED = 0
# neural.neurd_logits -> what the figure and the table call it
READINGS = {"raw": "raw outputs (ours until decided)",
            "centred": "centred over the legal actions (R-NaD, OpenSpiel's NeuRD)",
            "centred_all": "centred over all actions (OpenSpiel's BatchNeuRDLoss)"}
GAME_STRINGS = {name: game.string for name, game in GAMES.items()}
CHECKPOINT_SECONDS = 120.0


@dataclass(frozen=True)
class Cell:
    """One job of the study: a game, its critic, NeuRD's reading and the phases run.  The
    raw reading's cell runs SPG beside NeuRD (SPG's loss does not read NeuRD's logits:
    the control of every reading); the others NeuRD alone, on the same streams (a
    configuration's stream is its algorithm's name's: every reading's NeuRD starts from the
    same weights and draws the same random numbers)."""

    game: str
    critic: str
    reading: str
    phases: int

    @property
    def algorithms(self) -> tuple[str, ...]:
        return (NEURD, SPG) if self.reading == "raw" else (NEURD,)

    @property
    def name(self) -> str:
        return f"{self.game}-{self.critic}-{self.reading}-{self.phases}phase"


# In the order they run: Kuhn's first phase (minutes), then the whole length where the
# published raw runs diverged (Leduc; Kuhn with the exact critic), then Goofspiel, then the
# reading centred over all actions where it differs from the legal one (Kuhn's two actions
# are always legal: the same numbers there).
CELLS = (
    Cell("kuhn", "learned", "raw", 1),
    Cell("kuhn", "learned", "centred", 1),
    Cell("leduc", "learned", "raw", 3),
    Cell("leduc", "learned", "centred", 3),
    Cell("kuhn", "exact", "raw", 3),
    Cell("kuhn", "exact", "centred", 3),
    Cell("goofspiel", "learned", "raw", 1),
    Cell("goofspiel", "learned", "centred", 1),
    Cell("leduc", "learned", "centred_all", 1),
    Cell("goofspiel", "learned", "centred_all", 1),
)


def cell_named(name: str) -> Cell:
    for cell in CELLS:
        if cell.name == name:
            return cell
    raise ValueError(f"no cell {name!r} in the study; its cells: {[c.name for c in CELLS]}")


def section(cell: Cell, game_string: str, iterations: int = PHASE_ITERATIONS) -> dict:
    """The cell's ``neural`` section (and ``seed``), checked as ``compare()`` checks its
    arguments; ``iterations`` per phase (the paper's; fewer in the tests)."""
    cfg = neural_section(cell.game, iterations, cell.phases, SEEDS, ENTROPIES, SEED,
                   cell.critic, CHECKPOINTS["linear"], CHECKPOINTS["geometric"],
                   {"algorithms": list(cell.algorithms), "neurd_logits": cell.reading})
    cfg["game_strings"] = {cell.game: game_string}
    return cfg


# ---------------------------------------------------------------------------------- running

def _atomic_copy(source: Path, target: Path) -> None:
    """Copy the file or folder ``source`` to ``target`` whole or not at all."""
    tmp = target.with_name(f".{target.name}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.unlink(missing_ok=True) if tmp.is_file() else None
    if source.is_dir():
        shutil.copytree(source, tmp)
    else:
        shutil.copy2(source, tmp)
    if target.is_dir():
        old = target.with_name(f".{target.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old)
    else:
        os.replace(tmp, target)


def finished(cell: Cell, work: Path, published: Path) -> Path | None:
    """The cell's curves, where a run or the publication holds them."""
    for folder in (published / "cells", work / "cells"):
        path = folder / cell.name / "curves.parquet"
        if path.is_file():
            return path
    return None


def run_cell(cell: Cell, work: Path, published: Path, seconds: float | None,
             iterations: int = PHASE_ITERATIONS) -> str:
    """Run (or resume) one cell; ``'finished'``, ``'stopped'`` (its state saved) or
    ``'published'`` (done before)."""
    from neurd.neural import experiment  # JAX, put off

    if finished(cell, work, published):
        return "published"
    out = work / "cells" / cell.name
    out.mkdir(parents=True, exist_ok=True)
    state = out / "state"
    kept = published / "in-progress" / cell.name
    if not state.exists() and kept.is_dir():
        shutil.copytree(kept, state)
    compiled = games.compile_game(GAME_STRINGS[cell.game])
    cfg = section(cell, compiled.game_string, iterations)
    plan = runs.plan(cfg, cell.game, cell.critic, 0)
    identity = {"study": STUDY, "cell": cell.name, "config_hash": config_hash(cfg),
                "source_hash": source_hash()}
    revision = git_revision(ROOT)
    try:
        results = experiment.run(compiled, plan, checkpoint_path=state,
                                 checkpoint_seconds=CHECKPOINT_SECONDS, identity=identity,
                                 stop_after_seconds=seconds,
                                 revision=str(revision.get("commit")))
    except experiment.Stopped as stopped:
        print(f"{cell.name}: {stopped}", flush=True)
        return "stopped"
    curves = run_table(cfg, cell.game, cell.critic, results, plan.configurations)
    tmp = out / ".curves.parquet.tmp"
    write_table(curves, tmp, columns=CURVES_COLUMNS, config=cfg,
                extra={"study": STUDY, "cell": cell.name, "reading": cell.reading,
                       "pieces": results["pieces"], "revision": revision,
                       "source_hash": identity["source_hash"]})
    os.replace(tmp, out / "curves.parquet")
    return "finished"


STOPPED = 3  # a cell process's exit status when its time ran out (its state saved)


def one_cell(name: str, work: Path, published: Path, seconds: float,
             iterations: int = PHASE_ITERATIONS) -> int:
    """A cell in a process of its own: the CPU devices its critic's jobs use
    (:func:`neurd.neural.device.job_devices`) are set before JAX starts."""
    from neurd.neural.device import job_devices, use_cores

    cell = cell_named(name)
    use_cores(job_devices(cell.critic))
    print(f"cell {name}: neurd from {Path(neurd.__file__).parent}", flush=True)
    outcome = run_cell(cell, work, published, seconds, iterations)
    return STOPPED if outcome == "stopped" else 0


def run(work: Path, published: Path, minutes: float, iterations: int = PHASE_ITERATIONS,
        cells: list[str] | None = None) -> int:
    """Every cell not yet finished (of ``cells``, default all), in order, each in a process
    of its own, until ``minutes`` are spent."""
    ends = time.monotonic() + 60.0 * minutes
    chosen = [cell_named(name) for name in cells] if cells else list(CELLS)
    for cell in chosen:
        if finished(cell, work, published):
            continue
        left = ends - time.monotonic()
        if left < 60:
            print(f"time is up; next: {cell.name}", flush=True)
            return 0
        print(f"{time.strftime('%H:%M:%S')} cell {cell.name} ({left / 60:.0f} min left)",
              flush=True)
        code = subprocess.run([sys.executable, "-m", "neurd.paper_readings", "cell",
                               "--name", cell.name, "--seconds", f"{left:.0f}", "--work",
                               str(work), "--published", str(published),
                               "--iterations", str(iterations)]).returncode
        print(f"{time.strftime('%H:%M:%S')} cell {cell.name}: "
              f"{ {0: 'finished', STOPPED: 'stopped, its state saved'}.get(code, code)}",
              flush=True)
        if code != 0:
            return 0 if code == STOPPED else code
    print("every cell is finished", flush=True)
    return 0


# ------------------------------------------------------------------------------ background

def lowest_priority() -> None:
    """nice 19, the session's scheduling group at 19 too, and Linux's idle policy (see
    ``neurd.publication.allocation.background``, whose CPU allocation runs so)."""
    os.nice(19)
    try:
        with open("/proc/self/autogroup", "w") as group:
            group.write("19")
    except OSError:
        pass
    if hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass


def _lock(work: Path) -> Path:
    return work / "running.json"


def running(work: Path) -> dict | None:
    """The running study's record, None if none runs; a lock that cannot be read is said and
    taken as running (``stop`` clears it)."""
    lock = _lock(work)
    if not lock.exists():
        return None
    try:
        record = json.loads(lock.read_text())
        pid = int(record["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return {"pid": None, "unreadable": str(lock)}
    try:
        os.kill(pid, 0)
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        lock.unlink(missing_ok=True)
        return None
    return record if b"paper_readings" in command else (lock.unlink(missing_ok=True) or None)


def _save_json(path: Path, data) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


CODE_RECORD = "code.json"  # the commit the study's cells run, in its publication and work


def _git(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, **kwargs)


def pinned_commit(published: Path) -> str | None:
    """The commit the published cells ran (:data:`CODE_RECORD`), where the repository has it:
    a later start runs the same code, so that a cell in progress resumes (its state is tied to
    the code's source) and every cell is of one code."""
    try:
        commit = json.loads((published / CODE_RECORD).read_text())["commit"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    found = _git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", text=True)
    return found.stdout.strip() or None


def start(work: Path, published: Path, minutes: float, iterations: int = PHASE_ITERATIONS,
          cells: list[str] | None = None, commit: str | None = None) -> int:
    """Freeze a commit's code into ``work/code`` and run the study from it, detached, at the
    lowest priority; return at once.  ``commit``: default the one the published cells ran
    (:func:`pinned_commit`), else the one checked out."""
    if not (minutes == minutes and 0 < minutes < 1e5):
        print(f"--minutes must be a positive number, got {minutes}", file=sys.stderr)
        return 2
    record = running(work)
    if record is not None:
        print(f"the study runs already ({record}); `make readings-paper-status` shows it, "
              "`make readings-paper-stop` stops it", file=sys.stderr)
        return 2
    work.mkdir(parents=True, exist_ok=True)
    code = work / "code"
    shutil.rmtree(code, ignore_errors=True)
    code.mkdir()
    pinned = pinned_commit(published)
    found = _git("rev-parse", "--verify", "--quiet", f"{commit or pinned or 'HEAD'}^{{commit}}",
                 text=True).stdout.strip()
    if not found:
        print(f"--commit {commit!r} is no commit of this repository", file=sys.stderr)
        return 2
    commit = found
    archive = _git("archive", "--format=tar", commit, "src", "workflow", check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(code)], input=archive, check=True)
    _save_json(work / CODE_RECORD, {"commit": commit})
    head = _git("rev-parse", "HEAD", text=True).stdout.strip()
    if commit != head:
        print(f"note: the study runs commit {commit[:10]}"
              + (", the one its published cells ran" if commit == pinned else "")
              + f", not the one checked out ({head[:10]}): --commit HEAD runs that one (a "
              "cell in progress then starts over)")
    elif _git("status", "--porcelain", "--", "src", "workflow", text=True).stdout.strip():
        print(f"note: the study runs the commit checked out ({commit[:10]}); uncommitted "
              "changes to src/ and workflow/ are not in it")
    # the neural jobs' XLA flags: at the lowest priority a CPU device may wait for the other
    # far longer than XLA's default allows before it aborts the cell
    env = {**os.environ, "PYTHONPATH": str(code / "src"), "NEURD_PROGRESS_SECONDS": "300",
           "PYTHONUNBUFFERED": "1", "XLA_FLAGS": job_flags(os.environ.get("XLA_FLAGS", ""))}
    log = open(work / "log.txt", "a")
    process = subprocess.Popen(
        [sys.executable, "-m", "neurd.paper_readings", "run", "--minutes", str(minutes),
         "--work", str(work.resolve()), "--published", str(published.resolve()),
         "--iterations", str(iterations), *(["--cells", *cells] if cells else [])],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        preexec_fn=lowest_priority)
    _save_json(_lock(work), {"pid": process.pid, "commit": commit, "minutes": minutes,
                             "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())})
    print(f"the study runs in the background (pid {process.pid}, {minutes:g} minutes, commit "
          f"{commit[:10]}); log: {work / 'log.txt'}")
    return 0


def status(work: Path, published: Path) -> int:
    record = running(work)
    print("running: " + (json.dumps(record) if record else "no"))
    for cell in CELLS:
        where = finished(cell, work, published)
        state = work / "cells" / cell.name / "state"
        kept = published / "in-progress" / cell.name
        said = ("finished" + (" (published)" if where and published in where.parents else "")
                if where else "in progress (state saved)" if state.exists()
                else "in progress (published state)" if kept.exists() else "to do")
        print(f"  {cell.name}: {said}")
    log = work / "log.txt"
    if log.exists():
        lines = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
        print("last of the log:\n  " + "\n  ".join(lines[-3:]))
    return 0


def stop(work: Path) -> int:
    """Stop the study (its cell keeps the state saved at its last checkpoint, at most two
    minutes of work before)."""
    record = running(work)
    if record is None:
        print("the study is not running")
        return 0
    if record.get("pid"):
        os.killpg(int(record["pid"]), signal.SIGTERM)
        for _ in range(60):
            if running(work) is None:
                break
            time.sleep(1)
    _lock(work).unlink(missing_ok=True)
    print("stopped")
    return 0


def publish(work: Path, published: Path) -> int:
    """Copy the finished cells' curves and the unfinished cells' saved states into
    ``published`` (while the study runs, its finished cells' only); the states of finished
    cells are removed from it."""
    busy = running(work) is not None
    if busy:
        print("the study is running: its finished cells are published, its saved states are not "
              "(stop it first for those: a state may be written as it is copied)")
    if (work / CODE_RECORD).is_file():
        published.mkdir(parents=True, exist_ok=True)
        _atomic_copy(work / CODE_RECORD, published / CODE_RECORD)
    for cell in CELLS:
        done = work / "cells" / cell.name / "curves.parquet"
        state = work / "cells" / cell.name / "state"
        kept = published / "in-progress" / cell.name
        if done.is_file():
            (published / "cells" / cell.name).mkdir(parents=True, exist_ok=True)
            _atomic_copy(done, published / "cells" / cell.name / "curves.parquet")
            shutil.rmtree(kept, ignore_errors=True)
            print(f"{cell.name}: published")
        elif not busy and state.is_dir() and any(state.iterdir()):
            kept.parent.mkdir(parents=True, exist_ok=True)
            _atomic_copy(state, kept)
            print(f"{cell.name}: its state kept in {kept}")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m neurd.paper_readings",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["start", "run", "cell", "status", "stop",
                                            "publish", "report", "raw-logits"])
    parser.add_argument("--minutes", type=float, default=600.0)
    parser.add_argument("--name", help="cell: the cell's name")
    parser.add_argument("--seconds", type=float, help="cell: its wall-time budget")
    parser.add_argument("--cells", nargs="*", help="start, run: only these cells (default all)")
    parser.add_argument("--commit", help="start: the commit whose code runs (default: the one "
                        "the published cells ran, else the one checked out)")
    parser.add_argument("--iterations", type=int, default=PHASE_ITERATIONS,
                        help="iterations per phase (default the paper's; fewer: a trial)")
    parser.add_argument("--work", type=Path, default=WORK)
    parser.add_argument("--published", type=Path, default=PUBLISHED)
    args = parser.parse_args(argv)
    if args.command == "start":
        return start(args.work, args.published, args.minutes, args.iterations, args.cells,
                     args.commit)
    if args.command == "run":
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
        return run(args.work, args.published, args.minutes, args.iterations, args.cells)
    if args.command == "cell":
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                            datefmt="%H:%M:%S", stream=sys.stdout)
        return one_cell(args.name, args.work, args.published, args.seconds, args.iterations)
    if args.command == "status":
        return status(args.work, args.published)
    if args.command == "stop":
        return stop(args.work)
    if args.command == "publish":
        return publish(args.work, args.published)
    if args.command == "raw-logits":
        return raw_logits_report(args.published)
    return report(args.published)


if __name__ == "__main__":
    sys.exit(main())
