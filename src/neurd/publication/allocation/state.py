"""An allocation's files and processes: where they are (:class:`Places`), its lock (who
runs), its report, and the small writers and words the commands share."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

LOCK = "running.json"
CODE = ("src", "workflow")  # what the copy of the code holds (the config's schemas)
# what the command line of a CPU allocation's process holds (python -m ... cpu run)
MARKER = "neurd.publication.allocation cpu"


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
    return MARKER in command


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
