"""The paper-scale Fig 6 computed by this machine's CPU in the background, as work goes on.

    make cpu-allocation MINUTES=150     # starts it, detached, at nice 19; returns at once
    make cpu-allocation-status          # what it is doing: blocks, cycles, ETA
    make cpu-allocation-stop            # stop it now: its block stopped with its state, packed
    make publish-blocks FROM=results/paper/cpu-allocation-out    # then commit

The same as ``python bench/cpu_allocation.py start|status|stop``.  The CPU of a machine
where the project is worked on sits mostly idle while code is read and written; this
command puts it to work on the paper-scale run, seed block by seed block, as a GPU
allocation (``bench/gpu_allocation.py``) does, and packs what it made the same way.

``start`` checks the inputs (``make paper-inputs``), refuses when an allocation is running
already (naming it) or when ``--out`` holds a pack not yet published, copies the source of
the commit checked out (``git archive HEAD``; the working tree's uncommitted changes are not
in it, so that the code may change beside the run and every block records the commit that
made it), and starts ``run`` detached from the shell (its own process session, stdin closed), at the
lowest priority (``nice 19``), logging to ``<work>/log.txt``.  ``run``, within ``--minutes``:

1. **prices** the blocks with this processor's throughput (ms per learning cycle of each game
   and critic at N = 12, 24, 60, 120 configurations, the checkpoint evaluation, a job's
   start-up): the rows of this processor model, instruction set, jax and neural code in
   ``bench/cpu/<processor>.json``, else measured here (one program at a time, a few minutes)
   and added to that file, so that the next start on such a processor computes at once (kept
   only where nothing else kept the CPU busy meanwhile, other processes or the hypervisor
   taking its time (steal): a measurement at nice 19 beside busy work would price every
   later block too high);
2. **plans** (:func:`neurd.allocation.cpu_plan`): the published blocks in progress first,
   then Kuhn, Leduc and Goofspiel in that order, in blocks that finish in the time left, the
   last continuing in the next allocation if the repository has room for its state; after
   each block it plans again, from the time left and the pace of the last block against its
   prediction (the foreground work takes the CPU from a job at nice 19);
3. **runs** each block (``neurd neural-run --seeds``), saving its state every
   :data:`CHECKPOINT_MINUTES` minutes, stopping it before the end with its state saved (or at
   ``stop``: killed, with the state it saved last); a block of a game with several critics
   (Kuhn) is planned only where every critic finishes, and packed only then;
4. **packs** the finished blocks and the states of those stopped into ``--out``
   (``blocks.json``, ``blocks.tar.NNN``, ``allocation.json``: the report, rewritten as it goes).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
sys.path.insert(0, str(SRC))
sys.path.insert(0, str(ROOT / "bench"))

import gpu_allocation as alloc  # noqa: E402  (bench/: the report, the jobs, the pack)
from segment_timing import worker_env  # noqa: E402

from neurd.allocation import CPU_ORDER  # noqa: E402
from neurd.neural.runs import critics  # noqa: E402

SIZES = (12, 24, 60, 120)  # configurations timed: 1, 2, 5 and 10 seeds of the paper config
# learning cycles per timed segment, times N: about a second or more of a CPU of today at
# every N (a CPU's cycle takes about N times as long), so that the per-segment cost of Python
# and of starting the program weighs little, as in a job (whose segments, between checkpoint
# rows, are of about 1,650 cycles at the paper's length)
CYCLES_TIMES_N = {"kuhn": 12_000, "leduc": 2_400, "goofspiel": 1_200}
CHECKPOINT_MINUTES = 2.0  # a block's state saved this often: what a kill may lose at most
PACK_SECONDS = 60.0  # kept at the end for packing
HEARTBEAT_SECONDS = 60.0
# a measurement is kept for the next allocations only where the machine's other processes and
# the hypervisor's steal kept at most this many cores busy meanwhile (a nice 19 measurement
# beside busy work is slow)
QUIET_CORES = 0.25
# the pace of the last finished block against the table's (the predictions' factor): the
# foreground work slows a job at nice 19, a table measured under load makes it look fast
PACE_BOUNDS = (0.5, 5.0)
LOCK = "running.json"
CODE = ("src", "bench", "workflow")  # what the copy of the code holds (the config's schemas)


# --- where things are -------------------------------------------------------------------------


class Places:
    """The folders of one setting: inputs, publication, work, the pack, the throughput tables."""

    def __init__(self, args):
        self.results = Path(args.results).resolve()
        self.publication = Path(args.publication).resolve()
        self.work = Path(args.work).resolve()
        self.out = Path(args.out).resolve()
        self.tables = Path(args.tables).resolve()
        self.lock = self.work / LOCK
        self.log = self.work / "log.txt"
        self.code = self.work / "code"
        self.run = self.work / "run"


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs this command (not another that took its number)."""
    try:
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return True  # no /proc: a live process of that number is taken for it
    return "cpu_allocation.py" in command


def running(places: Places) -> dict | None:
    """The running allocation's lock record (pid, times, folders), or None; a lock left by
    a process that is gone is removed."""
    try:
        record = json.loads(places.lock.read_text())
    except (OSError, ValueError):
        return None
    if _alive(int(record.get("pid", -1))):
        return record
    places.lock.unlink(missing_ok=True)
    return None


def save_json(path: Path, data) -> None:
    """Write ``data`` as JSON whole or not at all (a temporary file renamed)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def _clock(epoch: float) -> str:
    return time.strftime("%H:%M UTC", time.gmtime(epoch))


def shown(path) -> str:
    """``path`` as a user reads it: relative to the current folder where it is inside it."""
    path = Path(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _describe(record: dict) -> str:
    return (f"pid {record['pid']}, started {_clock(record['started'])}, ends "
            f"{_clock(record['ends'])}; log {shown(record['log'])}")


def unpublished(out: Path, publication: Path) -> list[str]:
    """The blocks (finished, or states in progress) packed in ``out`` that the publication
    does not hold: a finished block not among its blocks, a state neither published as it is
    (the same ``meta.json``) nor finished since."""
    try:
        index = json.loads((out / "blocks.json").read_text())
    except (OSError, ValueError):
        return []
    try:
        manifest = json.loads((publication / "manifest.json").read_text())
    except (OSError, ValueError):
        manifest = {"games": {}, "files": {}}
    missing = []
    for member in index.get("members", []):
        parts = member["name"].split("/")
        if len(parts) != 5 or parts[0] != "neural":
            continue
        game, kind, name, file = parts[1:]
        entry = manifest["games"].get(game, {})
        if kind == "blocks" and file == "curves.parquet" and name not in entry.get("blocks", []):
            missing.append(f"{game}/{name}")
        elif kind == "in-progress" and file == "meta.json" and name not in entry.get(
                "blocks", []):
            published = manifest.get("files", {}).get(member["name"], {})
            if published.get("sha256") != member.get("sha256"):
                missing.append(f"{game}/{name} (in progress)")
    return missing


# --- start, status, stop ----------------------------------------------------------------------


def _frozen_code(places: Places, tree: bool = False) -> str:
    """The commit checked out, its :data:`CODE` copied into ``<work>/code`` with its revision
    file; what the working tree changes beside it is said, not copied (``tree``: the working
    tree's :data:`CODE` instead, recorded as the commit with changes if it has any)."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout

    from neurd.revision import git_revision, source_hash

    shutil.rmtree(places.code, ignore_errors=True)
    places.code.mkdir(parents=True)
    if tree:
        revision = git_revision(ROOT)
        for name in CODE:
            shutil.copytree(ROOT / name, places.code / name,
                            ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    else:
        revision = {"commit": git("rev-parse", "HEAD").strip(), "dirty": False}
        archive = subprocess.run(["git", "archive", "--format=tar", "HEAD", *CODE],
                                 cwd=ROOT, capture_output=True, check=True).stdout
        tar = places.code / "code.tar"
        tar.write_bytes(archive)
        with tarfile.open(tar) as members:
            members.extractall(places.code, filter="data")
        tar.unlink()
        if git("status", "--porcelain", "--", *CODE).strip():
            print(f"note: the allocation runs the commit checked out "
                  f"({str(revision['commit'])[:10]}); the working tree's uncommitted changes "
                  "to " + ", ".join(f"{c}/" for c in CODE) + " are not in it", flush=True)
    save_json(places.code / "revision.json", {
        "commit": revision["commit"], "dirty": revision["dirty"],
        "source_hash": source_hash(places.code / "src" / "neurd")})
    return str(revision["commit"])


def start(args, places: Places) -> int:
    """Check, copy the code, start ``run`` detached at nice 19; print where it logs."""
    for key in ("minutes", "checkpoint_minutes"):
        value = getattr(args, key)
        if not (value == value and 0 < value < 1e4):
            print(f"--{key.replace('_', '-')} must be a positive number of minutes, got "
                  f"{value}", file=sys.stderr)
            return 2
    record = running(places)
    if record is not None:
        print(f"a CPU allocation is running already: {_describe(record)}. See it with "
              "`make cpu-allocation-status`, stop it with `make cpu-allocation-stop`",
              file=sys.stderr)
        return 2
    snapshot = places.results / "config/neural.json"
    games = json.loads(snapshot.read_text())["games"] if snapshot.is_file() else []
    for path in [snapshot] + [places.results / f"neural/{g}/game.npz" for g in games]:
        if not path.is_file():
            print(f"{path} is missing: make paper-inputs", file=sys.stderr)
            return 2
    left = unpublished(places.out, places.publication)
    if left:
        print(f"{shown(places.out)} holds a pack not yet published ({', '.join(left)}): "
              f"publish it first (make publish-blocks FROM={shown(places.out)}) and commit, or "
              "give another "
              "OUT", file=sys.stderr)
        return 2
    places.work.mkdir(parents=True, exist_ok=True)
    try:  # the lock: only one allocation at a time, whoever starts it
        handle = os.open(places.lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        print(f"a CPU allocation is starting already ({places.lock})", file=sys.stderr)
        return 2
    os.close(handle)
    try:
        commit = _frozen_code(places, args.code == "tree")
        now = time.time()
        ends = now + 60.0 * args.minutes
        command = [sys.executable, str(places.code / "bench" / "cpu_allocation.py"), "run",
                   "--ends", f"{ends:.3f}", "--minutes", str(args.minutes),
                   "--checkpoint-minutes", str(args.checkpoint_minutes),
                   *[f"--{k}={getattr(places, k)}" for k in ("results", "publication", "work",
                                                             "out", "tables")]]
        with open(places.log, "w") as log:
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=lambda: os.nice(19), cwd=places.code)
        record = {"pid": process.pid, "started": now, "ends": ends, "minutes": args.minutes,
                  "commit": commit, "log": str(places.log), "out": str(places.out)}
        save_json(places.lock, record)
    except BaseException:
        places.lock.unlink(missing_ok=True)
        raise
    print(f"CPU allocation started: {_describe(record)}.\nSee it with `make "
          "cpu-allocation-status`; when it has ended, publish what it made with `make "
          f"publish-blocks FROM={shown(places.out)}` and commit.", flush=True)
    return 0


def status(places: Places) -> int:
    """What the allocation does now, or what the last one left."""
    record = running(places)
    try:
        report = json.loads((places.out / "allocation.json").read_text())
    except (OSError, ValueError):
        report = None
    if record is not None:
        print(f"CPU allocation running: {_describe(record)}; "
              f"{max(record['ends'] - time.time(), 0) / 60:.0f} min left")
    else:
        print("no CPU allocation is running")
    if report is None:
        return 0
    current = report.get("current") if record is not None else None
    if current:
        print(f"  now: {current['block']}: "
              f"{_last_progress(Path(current['log'])) or 'starting'}")
    jobs = report.get("jobs", [])
    if jobs:
        print("  jobs: " + "; ".join(f"{j['block']} {j['status'].split(' (')[0]}"
                                     + (f" in {j['seconds'] / 60:.1f} min" if "seconds" in j
                                        else "") for j in jobs))
    done = [s for s in report.get("steps", []) if s["step"] == "done"]
    if record is None and done:
        left = unpublished(places.out, places.publication)
        print(f"  the last one ended at {report.get('ended', '?')}: "
              + (f"{len(left)} packed, not yet published: make publish-blocks "
                 f"FROM={shown(places.out)}, then commit" if left
                 else "nothing left to publish"))
    print(f"  log: {shown(places.log)}")
    return 0


def stop(places: Places, wait: float = 180.0) -> int:
    """Stop the running allocation now: its job killed (a block of one critic keeps the state
    it saved last), what it made packed; wait for it to end."""
    record = running(places)
    if record is None:
        print("no CPU allocation is running")
        return 0
    os.kill(int(record["pid"]), signal.SIGTERM)
    until = time.monotonic() + wait
    while _alive(int(record["pid"])) and time.monotonic() < until:
        time.sleep(0.5)
    if _alive(int(record["pid"])):
        print(f"the allocation (pid {record['pid']}) has not ended after {wait:.0f} s; see "
              f"{shown(record['log'])}", file=sys.stderr)
        return 1
    print(f"stopped; what it made is packed in {shown(record['out'])}: make publish-blocks "
          f"FROM={shown(record['out'])}, then commit")
    return 0


# --- the background run -----------------------------------------------------------------------


def processor() -> dict:
    """This process's processor: model, instruction set XLA uses, threads, XLA flags; jax."""
    import jax

    from neurd.neural.device import cpu_description

    return {**cpu_description(), "jax": jax.__version__}


def table_path(tables: Path, cpu: dict) -> Path:
    """The throughput file of a processor model and instruction set."""
    slug = re.sub(r"[^a-z0-9]+", "-", f"{cpu['processor']} {cpu['isa']}".lower()).strip("-")
    return tables / f"{slug}.json"


def known_rows(tables: Path, cpu: dict, code: str) -> list[dict]:
    """The rows of this processor, instruction set, jax and neural code kept in ``tables``."""
    try:
        kept = json.loads(table_path(tables, cpu).read_text())
    except (OSError, ValueError):
        return []
    return [r for r in kept.get("rows", []) if r.get("revision_code") == code
            and r.get("jax") == cpu["jax"] and kept.get("isa") == cpu["isa"]]


def keep_rows(tables: Path, cpu: dict, rows: list[dict]) -> Path:
    """Add measured rows to the processor's throughput file (rows of another code kept)."""
    path = table_path(tables, cpu)
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        kept = {"processor": cpu["processor"], "isa": cpu["isa"], "rows": []}
    codes = {(r["revision_code"], r["jax"]) for r in rows}
    kept["rows"] = [r for r in kept["rows"] if (r.get("revision_code"), r.get("jax"))
                    not in codes] + rows
    tables.mkdir(parents=True, exist_ok=True)
    save_json(path, kept)
    return path


def busy_seconds() -> float | None:
    """CPU seconds every process of the machine has used since it started, and those the
    hypervisor gave to other machines (steal) (``/proc/stat``; None where the system does not
    say)."""
    try:
        fields = Path("/proc/stat").read_text().splitlines()[0].split()
    except (OSError, IndexError):
        return None
    if fields[0] != "cpu":
        return None
    ticks = [int(x) for x in fields[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle and waiting for I/O
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def others_share(busy_before: float | None, children_before: float, wall: float) -> float | None:
    """The cores kept busy on average by others since ``busy_before`` (:func:`busy_seconds`)
    and ``children_before`` (this process's waited-for children's CPU seconds), over ``wall``
    seconds: the machine's other processes and the hypervisor's steal, what took the CPU
    from a measurement."""
    import resource

    now = busy_seconds()
    if busy_before is None or now is None or wall <= 0:
        return None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = usage.ru_utime + usage.ru_stime - children_before
    return max(now - busy_before - mine, 0.0) / wall


def measure(report, places: Places, cfg: dict, env: dict, deadline: float,
            stop_event: threading.Event) -> list[dict]:
    """ms per cycle, checkpoint seconds and start-up of every game and critic at
    :data:`SIZES`, one program at a time (a worker per game, Kuhn first); each row says how
    many cores other processes kept busy meanwhile (``others_cores``)."""
    import resource

    rows = []
    folder = places.work / "measure"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for game in [g for g in CPU_ORDER if g in cfg["games"]]:
        cells = [f"{game}:{c}:{n}" for c in critics(cfg, game) for n in SIZES]
        out = folder / f"{game}.json"
        command = [sys.executable, str(ROOT / "bench" / "gpu_allocation.py"), "worker",
                   "--games", str(places.results / "neural"), "--out", str(out),
                   "--evaluation", "--cycles-times-n",
                   str(CYCLES_TIMES_N.get(game, 1_200)), "--cells", *cells]
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        before, children, started = busy_seconds(), usage.ru_utime + usage.ru_stime, \
            time.monotonic()
        with open(folder / f"{game}.log", "w") as log:
            process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
            while process.poll() is None:
                if time.monotonic() > deadline or stop_event.is_set():
                    process.kill()
                time.sleep(0.2)
        got = json.loads(out.read_text()) if out.is_file() else []
        share = others_share(before, children, time.monotonic() - started)
        for row in got:
            row.update(code="this", parallel=1, startup_seconds=row["first_segment_seconds"],
                       others_cores=None if share is None else round(share, 3))
        rows += got
        report.step("measure", game=game, cells=len(got), of=len(cells),
                    others_cores=None if share is None else round(share, 2))
        if len(got) < len(cells):
            break
    return rows


def job_env(places: Places, checkpoint_minutes: float = CHECKPOINT_MINUTES) -> dict:
    """The jobs' environment: this copy's source on the CPU, the state saved every
    ``checkpoint_minutes``, a compilation cache the jobs share, and the commit read from the
    copy's revision file (git is kept from finding the working tree around it)."""
    env = worker_env("cpu", True, SRC)
    cache = places.work / "jax-cache"
    env.update(NEURD_CHECKPOINT_MINUTES=str(checkpoint_minutes),
               JAX_COMPILATION_CACHE_DIR=str(cache),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
               GIT_CEILING_DIRECTORIES=str(ROOT.parent))
    if (ROOT / "revision.json").is_file():
        env["NEURD_REVISION_FILE"] = str(ROOT / "revision.json")
    return env


def _last_progress(log: Path) -> str | None:
    """The last progress line a job wrote to its log."""
    from neurd.progress import progress_message

    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        message = progress_message(line)
        if message is not None:
            return message
    return None


class Background:
    """One background allocation: its report, its clock, what it has made so far."""

    def __init__(self, places: Places, ends: float, minutes: float):
        self.places = places
        self.report = alloc.Report(places.out, minutes)
        self.report.data.update(kind="cpu", finished=[], stopped=[])
        self.deadline = time.monotonic() + (ends - time.time()) - PACK_SECONDS
        self.stop = threading.Event()
        self.current: tuple[str, Path] | None = None
        self.finished: list[Path] = []
        self.stopped: list[Path] = []
        self.cycles = 0

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def heartbeat(self) -> None:
        """A line in the log and the report every :data:`HEARTBEAT_SECONDS`: the job running,
        its progress and ETA, what is done, the time left."""
        while not self.stop.wait(HEARTBEAT_SECONDS):
            lines = []
            if self.current is not None:
                block, log = self.current
                lines.append(f"now: {block}: {_last_progress(log) or 'starting'}")
            lines.append(f"done: {len(self.finished)} jobs finished, {self.cycles} learning "
                         f"cycles of finished jobs; {max(self.left(), 0) / 60:.0f} min left "
                         "before packing")
            with self.report.lock:
                self.report.data["now"] = {"lines": lines, "at": time.strftime(
                    "%Y-%m-%d %H:%M:%S UTC", time.gmtime())}
            self.report.save()
            for line in lines:
                self.report.say(line)


def _throughput(bg: Background, cfg: dict, env: dict) -> list[dict]:
    """The rows that price the blocks: kept for this processor and code, else measured."""
    from neurd.revision import source_hash

    places, report = bg.places, bg.report
    cpu = processor()
    code = source_hash(SRC / "neurd" / "neural", SRC / "neurd" / "tabular")
    report.data.update(processor=cpu, code_revision=code)
    rows = known_rows(places.tables, cpu, code)
    report.step("throughput", kept=len(rows), file=str(table_path(places.tables, cpu)))
    if not rows:
        rows = measure(report, places, cfg, env, bg.deadline, bg.stop)
        from neurd.neural import variants

        stamp = {"revision_code": code, "jax": cpu["jax"], "date": time.strftime(
            "%Y-%m-%d", time.gmtime()), "load_average": list(os.getloadavg()),
            "variant": variants.resolved_name(variants.parse("default"))}
        rows = [dict(r, **stamp) for r in rows]
        busy = max((r["others_cores"] or 0.0 for r in rows), default=0.0)
        if rows and busy <= QUIET_CORES:
            report.step("measured", rows=len(rows), kept_in=str(keep_rows(places.tables, cpu,
                                                                          rows)))
        elif rows:
            report.step("measured", rows=len(rows), kept_in=None, why=(
                f"others (processes, steal) kept {busy:.2f} cores busy meanwhile (more than "
                f"{QUIET_CORES}): priced with for this allocation only, measured again by "
                "the next"))
    report.data["throughput"] = rows
    return rows


def _state(bg: Background, cfg: dict, done: dict[str, list[int]], history: float):
    """The plan's inputs now: the seeds published or finished here, the blocks in progress
    not resumed yet, the repository room left."""
    published = alloc.published_seeds(bg.places.publication)
    in_progress, history_left = alloc.published_progress(bg.places.publication, cfg)
    seeds = {g: sorted(set(published.get(g, [])) | set(done.get(g, []))) for g in cfg["games"]}
    in_progress = [b for b in in_progress
                   if not set(range(b.first, b.last + 1)) & set(seeds.get(b.game, []))]
    return seeds, in_progress, history_left - history


def run_blocks(bg: Background, cfg: dict, rows: list[dict], env: dict) -> None:
    """Plan, run the first block (every critic of its seeds), plan again, until the time is up
    or a block stops; the pace of each finished block against its prediction scales the next
    predictions (within :data:`PACE_BOUNDS` of the table's)."""
    from neurd.allocation import Throughput, cpu_plan

    throughput, sizes = Throughput(rows), alloc.repository_bytes(bg.places.results, cfg)
    done: dict[str, list[int]] = {}
    history, slowdown = 0.0, 1.0
    while not bg.stop.is_set():
        seeds, in_progress, room = _state(bg, cfg, done, history)
        step = cpu_plan(cfg, seeds, throughput, bg.left(), in_progress, sizes, room, slowdown)
        bg.report.data["plan"] = step.to_json()
        if not step.blocks:
            bg.report.step("plan", blocks=[], notes=step.notes)
            return
        first = step.blocks[0]
        group = [b for b in step.blocks if (b.game, b.first, b.last) == (
            first.game, first.first, first.last)]
        bg.report.step("plan", next=[f"{b.game}/{b.name}" for b in group], slowdown=round(
            slowdown, 2), planned=[f"{b.game}/{b.name}" for b in step.blocks], notes=step.notes)
        records = []
        for block in group:
            folder = bg.places.run / f"neural/{block.game}/blocks/{block.name}"
            bg.current = (f"{block.game}/{block.name}", folder / "run.log")
            with bg.report.lock:
                bg.report.data["current"] = {"block": bg.current[0], "log": str(bg.current[1]),
                                             "started": time.time()}
            bg.report.save()
            record = alloc.run_block(bg.report, cfg, block, bg.places.results, env,
                                     bg.deadline, bg.places.publication, "default",
                                     work=bg.places.run, stop=bg.stop)
            bg.current = None
            bg.report.data["current"] = None
            records.append(record)
            with bg.report.lock:
                bg.report.data["jobs"].append({k: v for k, v in record.items()
                                               if k not in ("folder", "state")})
            bg.report.say(f"{record['block']}: {record['status']}")
            if record.get("folder") is None:
                break
        folders = [r.get("folder") for r in records]
        if len(records) == len(group) and all(folders):
            bg.finished += folders
            done.setdefault(first.game, []).extend(range(first.first, first.last + 1))
            history += sizes.block.get(first.game, 0.0) * first.seeds
            bg.cycles += len(group) * alloc_cycles(cfg, first.game, first.done_before)
            taken = sum(r["seconds"] for r in records)
            slowdown = min(max(taken / max(sum(b.predicted_seconds for b in group), 1.0)
                               * slowdown, PACE_BOUNDS[0]), PACE_BOUNDS[1])
            bg.report.data["finished"] = [str(f) for f in bg.finished]
            continue
        states = [r.get("state") for r in records if r.get("state")]
        bg.stopped += states
        bg.report.data["stopped"] = [str(s) for s in bg.stopped]
        return  # a block stopped (the time is up), was lost or failed: nothing more to plan


def alloc_cycles(cfg: dict, game: str, done_before: float) -> int:
    """Learning cycles a job that finished did here (what a resumed one had done excluded)."""
    from neurd.allocation import cycles

    return int(round((1.0 - done_before) * cycles(cfg, game)))


def background(args, places: Places) -> int:
    """The detached process: price, plan, run, pack (see the module)."""
    shutil.rmtree(places.run, ignore_errors=True)  # nothing of an earlier allocation packed
    for name in os.listdir(places.out) if places.out.is_dir() else []:
        if name.startswith("blocks.") or name == "allocation.json":
            (places.out / name).unlink()  # the last pack, published (start checked it)
    bg = Background(places, args.ends, args.minutes)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: bg.stop.set())
    cfg = json.loads((places.results / "config/neural.json").read_text())
    bg.report.work = places.work / "work"
    bg.report.data.update(date=time.strftime("%Y-%m-%d", time.gmtime()),
                          revision=json.loads((ROOT / "revision.json").read_text())
                          if (ROOT / "revision.json").is_file() else None,
                          ends=_clock(args.ends), nice=os.nice(0))
    bg.report.step("start", pid=os.getpid(), minutes=args.minutes)
    beat = threading.Thread(target=bg.heartbeat, daemon=True)
    beat.start()
    try:
        env = job_env(places, args.checkpoint_minutes)
        rows = _throughput(bg, cfg, env)
        if rows and not bg.stop.is_set():
            run_blocks(bg, cfg, rows, env)
        bg.report.step("pack", blocks=len(bg.finished), in_progress=len(bg.stopped))
        alloc.pack_blocks(bg.report, cfg, places.results, bg.finished, bg.stopped,
                          work=places.run)
        bg.report.data["ended"] = _clock(time.time())
        bg.report.step("done", blocks=[str(f.relative_to(places.run)) for f in bg.finished],
                       in_progress=[str(f.relative_to(places.run)) for f in bg.stopped])
        return 0
    finally:
        bg.stop.set()
        record = running(places)
        if record is not None and int(record["pid"]) == os.getpid():
            places.lock.unlink(missing_ok=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    for mode, text in (("start", "start an allocation in the background"),
                       ("status", "what the allocation does, or what the last one left"),
                       ("stop", "stop the running allocation now and pack what it made"),
                       ("run", "the background process itself (start runs it)")):
        p = sub.add_parser(mode, help=text)
        p.add_argument("--results", default="results/paper",
                       help="config/neural.json and neural/<game>/game.npz (make paper-inputs)")
        p.add_argument("--publication", default="published/paper",
                       help="the publication whose seeds are done")
        p.add_argument("--work", default="results/paper/cpu-allocation",
                       help="the lock, the log, the copy of the code and the jobs' folders")
        p.add_argument("--out", default="results/paper/cpu-allocation-out",
                       help="the pack (make publish-blocks FROM=...)")
        p.add_argument("--tables", default=str(ROOT / "bench" / "cpu"),
                       help="the processors' throughput tables (bench/cpu; commit them)")
        if mode == "start":
            p.add_argument("--code", choices=("head", "tree"), default="head",
                           help="the code run: the commit checked out (head), or the working "
                                "tree as it is (tree: for trying changes; recorded as such)")
        if mode in ("start", "run"):
            p.add_argument("--minutes", type=float, required=True,
                           help="the allocation's length, packing included")
            p.add_argument("--checkpoint-minutes", type=float, default=CHECKPOINT_MINUTES,
                           help="how often a job saves its state: what a kill loses at most")
        if mode == "run":
            p.add_argument("--ends", type=float, required=True, help="its end (epoch seconds)")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    places = Places(args)
    if args.mode == "start":
        return start(args, places)
    if args.mode == "status":
        return status(places)
    if args.mode == "stop":
        return stop(places)
    return background(args, places)


if __name__ == "__main__":
    sys.exit(main())
