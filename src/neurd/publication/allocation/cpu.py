"""The background CPU allocation's run: this processor's throughput (measured once per
processor and code, kept in ``bench/cpu``), the jobs' environment, and the blocks of
the CPU's schedule, one at a time, each stopped with its state before the deadline, then packed."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from neurd.neural.environment import job_environment
from neurd.neural.runs import critics
from neurd.provenance import cycle_variants
from neurd.publication.allocation.background import (
    Places,
    Unreadable,
    clock,
    last_progress,
    running,
    save_json,
    unpacked_on_disk,
)
from neurd.publication.allocation.blocks import (
    published_progress,
    published_seeds,
    repository_bytes,
    run_block,
)
from neurd.publication.allocation.packing import pack_blocks
from neurd.publication.allocation.places import PACKAGE, ROOT, SRC, TIMING
from neurd.publication.allocation.report import Report
from neurd.publication.costs import Throughput, cycles
from neurd.publication.cpu_schedule import ORDER, next_allocation
from neurd.publication.resume_states import state_folder
from neurd.revision import source_hash

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


def processor() -> dict:
    """This process's processor: model, instruction set XLA uses, threads, XLA flags; jax."""
    import jax

    from neurd.neural.device import cpu_description

    return {**cpu_description(), "jax": jax.__version__}


def table_path(tables: Path, cpu: dict) -> Path:
    """The throughput file of a processor model and instruction set (the processors of one
    model name and instruction set share it: each row names its ``processor_id``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", f"{cpu['processor']} {cpu['isa']}".lower()).strip("-")
    return tables / f"{slug}.json"


def _ours(row: dict, cpu: dict, code: str) -> bool:
    """Whether a kept row is of this processor (its family, model and stepping numbers:
    two generations a virtual machine names alike differ twofold in speed), jax and code; a
    row naming no processor numbers is of none."""
    return (row.get("revision_code") == code and row.get("jax") == cpu["jax"]
            and bool(row.get("processor_id")) and row.get("processor_id") == cpu["processor_id"])


def known_rows(tables: Path, cpu: dict, code: str) -> list[dict]:
    """The rows of this processor (:func:`_ours`), instruction set, jax and neural code kept
    in ``tables``."""
    try:
        kept = json.loads(table_path(tables, cpu).read_text())
    except (OSError, ValueError):
        return []
    if kept.get("isa") != cpu["isa"]:
        return []
    return [r for r in kept.get("rows", []) if _ours(r, cpu, code)]


def keep_rows(tables: Path, cpu: dict, rows: list[dict]) -> Path:
    """Add measured rows, stamped with this processor's ``processor_id``, to the processor's
    throughput file (the rows of another code, jax or processor kept)."""
    path = table_path(tables, cpu)
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        kept = {"processor": cpu["processor"], "isa": cpu["isa"], "rows": []}
    rows = [dict(r, processor_id=cpu["processor_id"]) for r in rows]
    codes = {(r["revision_code"], r["jax"]) for r in rows}
    kept["rows"] = [r for r in kept["rows"] if (r.get("revision_code"), r.get("jax"))
                    not in codes or r.get("processor_id") != cpu["processor_id"]] + rows
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
    now = busy_seconds()
    if busy_before is None or now is None or wall <= 0:
        return None
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    mine = usage.ru_utime + usage.ru_stime - children_before
    return max(now - busy_before - mine, 0.0) / wall


def measure(report, places: Places, cfg: dict, env: dict, deadline: float,
            stop_event: threading.Event) -> list[dict]:
    """ms per cycle, checkpoint seconds and start-up of every game and critic at
    :data:`SIZES`, one program at a time (a worker per game and critic, Kuhn first, on the
    CPU devices its jobs make: :func:`neurd.neural.device.job_devices`); each row says how
    many cores other processes kept busy meanwhile (``others_cores``)."""
    rows = []
    folder = places.work / "measure"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for game, critic in [(g, c) for g in ORDER if g in cfg["games"] for c in critics(cfg, g)]:
        cells = [f"{game}:{critic}:{n}" for n in SIZES]
        out = folder / f"{game}-{critic}.json"
        command = [sys.executable, str(TIMING), "cells",
                   "--games", str(places.results / "neural"), "--out", str(out),
                   "--evaluation", "--cycles-times-n",
                   str(CYCLES_TIMES_N.get(game, 1_200)), "--cells", *cells]
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        before, children, started = busy_seconds(), usage.ru_utime + usage.ru_stime, \
            time.monotonic()
        with open(folder / f"{game}-{critic}.log", "w") as log:
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
        report.step("measure", game=game, critic=critic, cells=len(got), of=len(cells),
                    others_cores=None if share is None else round(share, 2))
        if len(got) < len(cells):
            break
    return rows


def job_env(places: Places, checkpoint_minutes: float = CHECKPOINT_MINUTES) -> dict:
    """The jobs' environment: this copy's source on the CPU, the state saved every
    ``checkpoint_minutes``, a compilation cache the jobs share, and the commit read from the
    copy's revision file (git is kept from finding the working tree around it)."""
    env = job_environment("cpu", SRC, cache=places.work / "jax-cache")
    env.update(NEURD_CHECKPOINT_MINUTES=str(checkpoint_minutes),
               GIT_CEILING_DIRECTORIES=str(ROOT.parent))
    if (ROOT / "revision.json").is_file():
        env["NEURD_REVISION_FILE"] = str(ROOT / "revision.json")
    return env


class Background:
    """One background allocation: its report, its clock, what it has made so far."""

    def __init__(self, places: Places, ends: float, minutes: float):
        self.places = places
        self.report = Report(places.out, minutes)
        self.report.data.update(kind="cpu", finished=[], stopped=[])
        self.deadline = time.monotonic() + (ends - time.time()) - PACK_SECONDS
        self.stop = threading.Event()
        self.current: tuple[str, Path] | None = None
        self.finished: list[Path] = []
        self.stopped: list[Path] = []
        self.cycles = 0

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def begin(self, block) -> None:
        """The job of ``block`` starts: the report names it, and where its tables and its state
        go (what :func:`neurd.publication.allocation.background.pack_left` packs if the allocation
        ends here)."""
        folder = self.places.run / f"neural/{block.game}/blocks/{block.name}"
        self.current = (f"{block.game}/{block.name}", folder / "run.log")
        with self.report.lock:
            self.report.data["current"] = {
                "block": self.current[0], "log": str(self.current[1]), "started": time.time(),
                "folder": str(folder),
                "state": str(self.places.run / state_folder(block.game, block.name))}
        self.report.save()

    def ended(self, records: list[dict]) -> None:
        """The job of ``records[-1]`` ended: its record in the report, and the states the
        group's jobs kept so far (held in progress if the allocation ends here)."""
        record = records[-1]
        self.current = None
        with self.report.lock:
            self.report.data["current"] = None
            self.report.data["jobs"].append({k: v for k, v in record.items()
                                             if k not in ("folder", "state")})
            self.report.data["held"] = [str(r["state"]) for r in records if r.get("state")]
        self.report.save()
        self.report.say(f"{record['block']}: {record['status']}")

    def heartbeat(self) -> None:
        """A line in the log and the report every :data:`HEARTBEAT_SECONDS`: the job running,
        its progress and ETA, what is done, the time left."""
        while not self.stop.wait(HEARTBEAT_SECONDS):
            lines = []
            if self.current is not None:
                block, log = self.current
                lines.append(f"now: {block}: {last_progress(log) or 'starting'}")
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
    places, report = bg.places, bg.report
    cpu = processor()
    code = source_hash(PACKAGE / "neural", PACKAGE / "tabular")
    report.data.update(processor=cpu, code_revision=code)
    rows = known_rows(places.tables, cpu, code)
    report.step("throughput", kept=len(rows), file=str(table_path(places.tables, cpu)))
    if not rows:
        rows = measure(report, places, cfg, env, bg.deadline, bg.stop)

        stamp = {"revision_code": code, "jax": cpu["jax"], "date": time.strftime(
            "%Y-%m-%d", time.gmtime()), "load_average": list(os.getloadavg())}
        # the variant each game's jobs run by default here (it depends on the game)
        ran = cycle_variants(cfg)
        rows = [dict(r, **stamp, variant=ran[r["game"]]) for r in rows]
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
    """The schedule's inputs now: the seeds published or finished here, the blocks in progress
    not resumed yet, the repository room left."""
    published = published_seeds(bg.places.publication)
    in_progress, history_left = published_progress(bg.places.publication, cfg)
    seeds = {g: sorted(set(published.get(g, [])) | set(done.get(g, []))) for g in cfg["games"]}
    in_progress = [b for b in in_progress
                   if not set(range(b.first, b.last + 1)) & set(seeds.get(b.game, []))]
    return seeds, in_progress, history_left - history


def run_blocks(bg: Background, cfg: dict, rows: list[dict], env: dict) -> None:
    """Schedule, run the first block (every critic of its seeds), schedule again, until the time is
    up or a block stops; the pace of each finished block against its prediction scales the next
    predictions (within :data:`PACE_BOUNDS` of the table's).  Every job may be stopped with its
    state; in a game of several critics each keeps its state at the end too, and where one
    critic's block of the seeds does not finish, the blocks that did are held in progress at
    their last row beside it (a seed is published with every critic), for the next allocation
    to complete first.  After every job the report names the finished blocks, the states kept
    and the job running with its folders: what
    :func:`neurd.publication.allocation.background.pack_left` packs
    where the allocation ends without packing."""
    throughput, sizes = Throughput(rows), repository_bytes(bg.places.results, cfg)
    done: dict[str, list[int]] = {}
    history, slowdown = 0.0, 1.0
    while not bg.stop.is_set():
        seeds, in_progress, room = _state(bg, cfg, done, history)
        step = next_allocation(cfg, seeds, throughput, bg.left(), in_progress, sizes, room,
                               slowdown)
        bg.report.data["allocation"] = step.to_json()
        if not step.blocks:
            bg.report.step("schedule", blocks=[], notes=step.notes)
            return
        first = step.blocks[0]
        group = [b for b in step.blocks if (b.game, b.first, b.last) == (
            first.game, first.first, first.last)]
        bg.report.step("schedule", next=[f"{b.game}/{b.name}" for b in group], slowdown=round(
            slowdown, 2), planned=[f"{b.game}/{b.name}" for b in step.blocks], notes=step.notes)
        records = []
        for block in group:
            bg.begin(block)
            record = run_block(bg.report, cfg, block, bg.places.results, env,
                                     bg.deadline, bg.places.publication, "default",
                                     work=bg.places.run, stop=bg.stop, may_stop=True,
                                     keep_state=len(critics(cfg, block.game)) > 1)
            records.append(record)
            bg.ended(records)
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
            with bg.report.lock:
                bg.report.data["finished"] = [str(f) for f in bg.finished]
                bg.report.data["held"] = []
            bg.report.save()  # what pack_left packs if the allocation ends without packing
            continue
        # the blocks stopped with their state, and those that finished held at their last row
        states = [r.get("state") for r in records if r.get("state")]
        bg.stopped += states
        bg.report.data["stopped"] = [str(s) for s in bg.stopped]
        return  # a block stopped (the time is up), was lost or failed: nothing more to schedule


def alloc_cycles(cfg: dict, game: str, done_before: float) -> int:
    """Learning cycles a job that finished did here (what a resumed one had done excluded)."""
    return int(round((1.0 - done_before) * cycles(cfg, game)))


def background(args, places: Places) -> int:
    """The detached process: price, schedule, run, pack (see the module)."""
    left = unpacked_on_disk(places)
    if left:  # start refused it; a run started by hand is refused here, deleting nothing
        print(f"{places.run} holds {', '.join(left)}, which no pack holds: stop packs them",
              file=sys.stderr)
        return 2
    shutil.rmtree(places.run, ignore_errors=True)  # everything of an earlier one is packed
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
                          ends=clock(args.ends), nice=os.nice(0))
    bg.report.step("start", pid=os.getpid(), minutes=args.minutes)
    beat = threading.Thread(target=bg.heartbeat, daemon=True)
    beat.start()
    try:
        env = job_env(places, args.checkpoint_minutes)
        rows = _throughput(bg, cfg, env)
        if rows and not bg.stop.is_set():
            run_blocks(bg, cfg, rows, env)
        bg.report.step("pack", blocks=len(bg.finished), in_progress=len(bg.stopped))
        pack_blocks(bg.report, cfg, places.results, bg.finished, bg.stopped,
                          work=places.run)
        bg.report.data["ended"] = clock(time.time())
        bg.report.step("done", blocks=[str(f.relative_to(places.run)) for f in bg.finished],
                       in_progress=[str(f.relative_to(places.run)) for f in bg.stopped])
        return 0
    finally:
        bg.stop.set()
        try:
            record = running(places)
        except Unreadable:  # its own lock made unreadable under it: left for stop to clear
            record = None
        if record is not None and int(record["pid"]) == os.getpid():
            places.lock.unlink(missing_ok=True)

