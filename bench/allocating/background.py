"""A background allocation's lifecycle: where its files are, its start (detached, at nice 19,
from a frozen copy of the code), its status, its stop, and what it left to publish
(``bench/cpu_allocation.py`` says what each does)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from allocating.places import ROOT

LOCK = "running.json"
CODE = ("src", "bench", "workflow")  # what the copy of the code holds (the config's schemas)


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


def alive(pid: int) -> bool:
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


class Unreadable(Exception):
    """The allocation's lock or report exists and cannot be read (truncated by a crash, say):
    never taken for "nothing running, nothing left"."""


def running(places: Places) -> dict | None:
    """The running allocation's lock record (pid, times, folders), or None; a lock left by
    a process that is gone is removed.  :class:`Unreadable` where the lock cannot be read."""
    try:
        record = json.loads(places.lock.read_text())
        pid = int(record["pid"])
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise Unreadable(f"the lock {shown(places.lock)} cannot be read ({error})") from None
    if alive(pid):
        return record
    places.lock.unlink(missing_ok=True)
    return None


def report_of(places: Places) -> dict | None:
    """The last allocation's report (``allocation.json``), None where there is none;
    :class:`Unreadable` where it cannot be read."""
    path = places.out / "allocation.json"
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise Unreadable(f"the report {shown(path)} cannot be read ({error})") from None


def processes_of(places: Places) -> list[int]:
    """Every process running from the allocation's copy of the code (the allocation and its
    jobs: their working folder is ``<work>/code``), whatever its lock or report say; Linux's
    ``/proc``, none elsewhere."""
    code, found = places.code.resolve(), []
    for folder in Path("/proc").glob("[0-9]*"):
        try:
            if Path(os.readlink(folder / "cwd")) == code and int(folder.name) != os.getpid():
                found.append(int(folder.name))
        except (OSError, ValueError):
            continue
    return sorted(found)


def states_on_disk(places: Places) -> tuple[list[Path], list[Path]]:
    """``(finished blocks, saved states)`` in the allocation's run folder, read from the disk
    alone: a block's folder with its curves, a state's folder with its ``meta.json``."""
    run = places.run / "neural"
    finished = sorted(p.parent for p in run.glob("*/blocks/*/curves.parquet"))
    states = sorted(p.parent for p in run.glob("*/in-progress/*/meta.json"))
    return finished, states


def unpacked_on_disk(places: Places) -> list[str]:
    """What the run folder holds that no pack in ``out`` holds as it is (a finished block's
    curves, a state's ``meta.json``, by SHA-256): what a start would otherwise delete."""
    try:
        index = json.loads((places.out / "blocks.json").read_text())
        packed = {m["name"]: m["sha256"] for m in index.get("members", [])}
    except (OSError, ValueError, KeyError, TypeError):
        packed = {}
    finished, states = states_on_disk(places)
    left = []
    for folder, file in [(f, "curves.parquet") for f in finished] + [
            (s, "meta.json") for s in states]:
        name = (folder / file).relative_to(places.run).as_posix()
        digest = hashlib.sha256((folder / file).read_bytes()).hexdigest()
        if packed.get(name) != digest:
            left.append(str(folder.relative_to(places.run / "neural")))
    return left


def writable(folder: Path) -> str | None:
    """Why ``folder`` cannot take the allocation's files (full, read-only, not a folder), in
    one line naming it; None where it can."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        probe = folder / ".write-probe"
        probe.write_bytes(b"\0" * 65536)
        probe.unlink()
    except OSError as error:
        return f"cannot write in {shown(folder)}: {error.strerror or error}"
    return None


def save_json(path: Path, data) -> None:
    """Write ``data`` as JSON whole or not at all (a temporary file renamed)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)


def clock(epoch: float) -> str:
    return time.strftime("%H:%M UTC", time.gmtime(epoch))


def shown(path) -> str:
    """``path`` as a user reads it: relative to the current folder where it is inside it."""
    path = Path(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def describe(record: dict) -> str:
    return (f"pid {record['pid']}, started {clock(record['started'])}, ends "
            f"{clock(record['ends'])}; log {shown(record['log'])}")


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


def left_unpacked(places: Places) -> dict | None:
    """The report of the last allocation where it ended without packing (killed, or the
    machine stopped under it): an ``allocation.json`` of a CPU allocation that started and
    has no ``done`` step, and no allocation running or starting."""
    if running(places) is not None or places.lock.exists():
        return None
    report = report_of(places)
    if report is None:
        return None
    steps = [s.get("step") for s in report.get("steps", [])]
    if report.get("kind") != "cpu" or "start" not in steps or "done" in steps:
        return None
    return report


def _jobs_of(pid: int, code: Path) -> list[int]:
    """The processes still running of the allocation ``pid``'s process group (its jobs, left
    running where only the allocation was killed): ``neurd`` commands run in its copy of the
    code ``code`` (a group of that number after a restart is not taken for it), Linux's
    ``/proc``; none elsewhere."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            group = int(stat.read_text().rsplit(")", 1)[1].split()[2])
            command = (stat.parent / "cmdline").read_bytes()
            folder = Path(os.readlink(stat.parent / "cwd"))
        except (OSError, ValueError, IndexError):
            continue
        if group == pid and b"neurd" in command and folder == code \
                and int(stat.parent.name) != os.getpid():
            found.append(int(stat.parent.name))
    return found


def pack_left(places: Places) -> list[str] | None:
    """Pack what an allocation that ended without packing left (:func:`left_unpacked`), as its
    stop would have: the blocks it finished, the states its running group kept, and the state
    the job running saved last (its jobs still running killed first, as a stop kills them);
    the pack's blocks (``game/name``, a state ``(in progress)``), or None where there is
    nothing of the kind.  Without it the next allocation would start over those folders."""
    from allocating.packs import pack_blocks
    from allocating.report import Report

    report = left_unpacked(places)
    if report is None:
        return None
    pid = next(int(s["pid"]) for s in report["steps"] if s.get("step") == "start")
    for _ in range(60):
        jobs = _jobs_of(pid, places.code)
        if not jobs:
            break
        for job in jobs:
            try:
                os.kill(job, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.5)
    current = report.get("current") or {}
    states = [*report.get("stopped", []), *report.get("held", [])]
    if current.get("state") and (Path(current["state"]) / "meta.json").is_file():
        log = Path(current["folder"]) / "run.log"
        if log.is_file():
            shutil.copyfile(log, Path(current["state"]) / "run.log")
        states.append(current["state"])
        report["jobs"].append({"block": current["block"], "status": "in progress (its "
                               "allocation ended without packing: the state it saved last)"})
    finished = [Path(f) for f in report.get("finished", [])
                if (Path(f) / "curves.parquet").is_file()]
    stopped = [Path(s) for s in dict.fromkeys(states) if (Path(s) / "meta.json").is_file()]
    config = places.results / "config/neural.json"
    if not config.is_file():
        raise SystemExit(f"{config} is missing: make paper-inputs, then pack what the "
                         f"allocation pid {pid} left")
    heartbeat = (report.get("now") or {}).get("at", "?")
    out = Report(places.out, float(report.get("minutes", 0)))
    out.data = dict(report, current=None, ended=f"after {heartbeat}, without packing")
    out.step("pack", blocks=len(finished), in_progress=len(stopped),
             left_by=f"pid {pid}, which ended without packing (its last heartbeat {heartbeat})")
    pack_blocks(out, json.loads(config.read_text()), places.results, finished, stopped,
                work=places.run)
    out.step("done", blocks=[str(f.relative_to(places.run)) for f in finished],
             in_progress=[str(s.relative_to(places.run)) for s in stopped])
    return [f"{f.parts[-3]}/{f.name}" for f in finished] + [
        f"{s.parts[-3]}/{s.name} (in progress)" for s in stopped]


def _pack_left_saying(places: Places, said: str, stream) -> None:
    """:func:`pack_left`, saying ``said`` and what it packed on ``stream`` where it packed."""
    packed = pack_left(places)
    if packed is not None:
        print(f"{said}: what it left is packed now in {shown(places.out)} "
              f"({', '.join(packed) or 'nothing'})" + (
                  f": make publish-blocks FROM={shown(places.out)}, then commit" if packed
                  else ""), file=stream)


def last_progress(log: Path) -> str | None:
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


def _lowest_priority() -> None:
    """In the child before it runs: nice 19, for its own session's scheduling group too, and
    Linux's idle scheduling policy (inherited by its jobs and their threads).

    Where Linux groups processes by session (autogroup, on by default on most desktops and
    servers), each session is weighed against the others whatever its processes' nice values:
    nice 19 alone, in a session of its own, still takes a core from the shell's work. Even at
    nice 19 in a group at nice 19, a job that is running keeps its core for a while when a
    thread of the foreground work wakes, and XLA's threads wake each other many times in a
    computation; under ``SCHED_IDLE`` any other thread that wakes preempts it at once."""
    os.nice(19)
    try:
        with open("/proc/self/autogroup", "w") as group:
            group.write("19")
    except OSError:
        pass  # no autogroup (switched off, or not Linux): nice 19 is the whole priority
    if hasattr(os, "SCHED_IDLE"):
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            pass  # refused (a sandbox): nice 19 is the whole priority


def start(args, places: Places) -> int:
    """Check, copy the code, start ``run`` detached at nice 19; print where it logs."""
    for key in ("minutes", "checkpoint_minutes"):
        value = getattr(args, key)
        if not (value == value and 0 < value < 1e4):
            print(f"--{key.replace('_', '-')} must be a positive number of minutes, got "
                  f"{value}", file=sys.stderr)
            return 2
    try:
        record = running(places)
        report_of(places)
    except Unreadable as error:
        print(f"{error}: an allocation may have ended writing it. `make cpu-allocation-status` "
              "says what is on disk; `make cpu-allocation-stop` stops whatever runs of it and "
              "packs every state it finds; then start again", file=sys.stderr)
        return 2
    if record is not None:
        print(f"a CPU allocation is running already: {describe(record)}. See it with "
              "`make cpu-allocation-status`, stop it with `make cpu-allocation-stop`",
              file=sys.stderr)
        return 2
    for folder in (places.work, places.out):
        why = writable(folder)
        if why:
            print(why, file=sys.stderr)
            return 2
    snapshot = places.results / "config/neural.json"
    games = json.loads(snapshot.read_text())["games"] if snapshot.is_file() else []
    for path in [snapshot] + [places.results / f"neural/{g}/game.npz" for g in games]:
        if not path.is_file():
            print(f"{path} is missing: make paper-inputs", file=sys.stderr)
            return 2
    _pack_left_saying(places, "the last CPU allocation ended without packing (killed, or the "
                      "machine stopped under it)", sys.stderr)
    left = unpublished(places.out, places.publication)
    if left:
        print(f"{shown(places.out)} holds a pack not yet published ({', '.join(left)}): "
              f"publish it first (make publish-blocks FROM={shown(places.out)}) and commit, or "
              "give another "
              "OUT", file=sys.stderr)
        return 2
    left = unpacked_on_disk(places)
    if left:
        print(f"{shown(places.run)} holds {', '.join(left)}, which no pack holds (a start "
              "would delete them): `make cpu-allocation-stop` packs them", file=sys.stderr)
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
                                       preexec_fn=_lowest_priority, cwd=places.code)
        record = {"pid": process.pid, "started": now, "ends": ends, "minutes": args.minutes,
                  "commit": commit, "log": str(places.log), "out": str(places.out)}
        save_json(places.lock, record)
    except BaseException:
        places.lock.unlink(missing_ok=True)
        raise
    print(f"CPU allocation started: {describe(record)}.\nSee it with `make "
          "cpu-allocation-status`; when it has ended, publish what it made with `make "
          f"publish-blocks FROM={shown(places.out)}` and commit.", flush=True)
    return 0


def _status_from_disk(places: Places, why: str) -> int:
    """Status where the lock or the report cannot be read: what the disk and ``/proc`` say."""
    finished, states = states_on_disk(places)
    running_now = processes_of(places)
    print(f"{why}: what is on disk and running, read without it:")
    print(f"  processes of the allocation's code: {running_now or 'none'}")
    print(f"  finished blocks: {[str(f.relative_to(places.run)) for f in finished] or 'none'}")
    print(f"  saved states: {[str(s.relative_to(places.run)) for s in states] or 'none'}")
    print("  `make cpu-allocation-stop` stops those processes and packs every block and state "
          "found; start refuses until then")
    return 0


def _stop_from_disk(places: Places, why: str, wait: float) -> int:
    """Stop where the lock or the report cannot be read: every process of the allocation's
    code stopped, every finished block and saved state on disk packed (the unreadable report
    kept aside, renamed), the lock removed."""
    from allocating.packs import pack_blocks
    from allocating.report import Report

    print(f"{why}: stopping what runs of the allocation's code, packing what is on disk")
    for sig, seconds in ((signal.SIGTERM, wait), (signal.SIGKILL, 30.0)):
        for pid in processes_of(places):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        until = time.monotonic() + seconds
        while processes_of(places) and time.monotonic() < until:
            time.sleep(0.5)
    if processes_of(places):
        print(f"processes {processes_of(places)} of the allocation's code did not end",
              file=sys.stderr)
        return 1
    config = places.results / "config/neural.json"
    if not config.is_file():
        print(f"{config} is missing: make paper-inputs, then stop again", file=sys.stderr)
        return 2
    report_path = places.out / "allocation.json"
    if report_path.exists():
        try:
            json.loads(report_path.read_text())
        except (OSError, ValueError):
            os.replace(report_path, places.out / f"allocation.unreadable-{int(time.time())}.json")
    finished, states = states_on_disk(places)
    for folder in [*finished, *states]:  # each with its job's log, as the pack holds it
        log = places.run / "neural" / folder.parts[-3] / "blocks" / folder.name / "run.log"
        if not (folder / "run.log").is_file():
            if log.is_file():
                shutil.copyfile(log, folder / "run.log")
            else:
                (folder / "run.log").write_text(f"no log of its job was found: {why}\n")
    report = Report(places.out, 0.0)
    report.data.update(kind="cpu", ended=f"{why}; packed from the disk by a stop")
    report.step("pack", blocks=len(finished), in_progress=len(states), from_disk=True)
    if finished or states:
        pack_blocks(report, json.loads(config.read_text()), places.results, finished, states,
                    work=places.run)
    report.step("done", blocks=[str(f.relative_to(places.run)) for f in finished],
                in_progress=[str(s.relative_to(places.run)) for s in states])
    places.lock.unlink(missing_ok=True)
    packed = [str(p.relative_to(places.run / "neural")) for p in (*finished, *states)]
    print(f"stopped; packed in {shown(places.out)}: {', '.join(packed) or 'nothing'}"
          + (f": make publish-blocks FROM={shown(places.out)}, then commit" if packed else ""))
    return 0


def status(places: Places) -> int:
    """What the allocation does now, or what the last one left."""
    try:
        record = running(places)
        report = report_of(places)
    except Unreadable as error:
        return _status_from_disk(places, str(error))
    if record is not None:
        print(f"CPU allocation running: {describe(record)}; "
              f"{max(record['ends'] - time.time(), 0) / 60:.0f} min left")
    else:
        print("no CPU allocation is running")
    if report is None:
        return 0
    current = report.get("current") if record is not None else None
    if current:
        print(f"  now: {current['block']}: "
              f"{last_progress(Path(current['log'])) or 'starting'}")
    jobs = report.get("jobs", [])
    if jobs:
        print("  jobs: " + "; ".join(f"{j['block']} {j['status'].split(' (')[0]}"
                                     + (f" in {j['seconds'] / 60:.1f} min" if "seconds" in j
                                        else "") for j in jobs))
    done = [s for s in report.get("steps", []) if s["step"] == "done"]
    if record is None and left_unpacked(places) is not None:
        print(f"  the last one ended without packing (killed, or the machine stopped under "
              f"it) after {(report.get('now') or {}).get('at', '?')}: `make "
              "cpu-allocation-stop` packs what it left (a start packs it first too)")
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
    it saved last), what it made packed; wait for it to end.  None running: pack what the last
    one left where it ended without packing (:func:`pack_left`)."""
    try:
        record = running(places)
        if record is None:
            print("no CPU allocation is running")
            _pack_left_saying(places, "the last one ended without packing", sys.stdout)
            return 0
    except Unreadable as error:
        return _stop_from_disk(places, str(error), wait)
    os.kill(int(record["pid"]), signal.SIGTERM)
    until = time.monotonic() + wait
    while alive(int(record["pid"])) and time.monotonic() < until:
        time.sleep(0.5)
    if alive(int(record["pid"])):
        print(f"the allocation (pid {record['pid']}) has not ended after {wait:.0f} s; see "
              f"{shown(record['log'])}", file=sys.stderr)
        return 1
    print(f"stopped; what it made is packed in {shown(record['out'])}: make publish-blocks "
          f"FROM={shown(record['out'])}, then commit")
    return 0

