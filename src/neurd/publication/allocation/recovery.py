"""What an allocation that ended badly left, and how a start, a status and a stop recover it:
read from its report where it ended without packing (killed, or the machine stopped under
it: :func:`pack_left`), or from the disk and ``/proc`` where its lock or report cannot be
read (:func:`status_from_disk`, :func:`stop_from_disk`); nothing a pack does not hold is
ever deleted (:func:`unpacked_on_disk`)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from neurd.publication.allocation.packing import pack_blocks
from neurd.publication.allocation.report import Report
from neurd.publication.allocation.state import Places, report_of, running, shown


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


def jobs_of(pid: int, code: Path) -> list[int]:
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
    report = left_unpacked(places)
    if report is None:
        return None
    pid = next(int(s["pid"]) for s in report["steps"] if s.get("step") == "start")
    for _ in range(60):
        jobs = jobs_of(pid, places.code)
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


def pack_left_saying(places: Places, said: str, stream) -> None:
    """:func:`pack_left`, saying ``said`` and what it packed on ``stream`` where it packed."""
    packed = pack_left(places)
    if packed is not None:
        print(f"{said}: what it left is packed now in {shown(places.out)} "
              f"({', '.join(packed) or 'nothing'})" + (
                  f": make publish-blocks FROM={shown(places.out)}, then commit" if packed
                  else ""), file=stream)


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


def status_from_disk(places: Places, why: str) -> int:
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


def stop_from_disk(places: Places, why: str, wait: float) -> int:
    """Stop where the lock or the report cannot be read: every process of the allocation's
    code stopped, every finished block and saved state on disk packed (the unreadable report
    kept aside, renamed), the lock removed."""
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
