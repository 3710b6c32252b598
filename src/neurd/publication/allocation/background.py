"""A background allocation's lifecycle: where its files are, its start (detached, at nice 19,
from a frozen copy of the code), its status, its stop, and what it left to publish
(:mod:`.cpu_cli` says what each does)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from neurd.progress import progress_message
from neurd.publication.allocation.places import PACKAGE, ROOT, SRC
from neurd.publication.allocation.recovery import (  # noqa: F401  (re-exported: the commands' callers)
    jobs_of,
    left_unpacked,
    pack_left,
    pack_left_saying,
    processes_of,
    states_on_disk,
    status_from_disk,
    stop_from_disk,
    unpacked_on_disk,
    writable,
)
from neurd.publication.allocation.state import (  # noqa: F401  (re-exported)
    CODE,
    LOCK,
    Places,
    Unreadable,
    alive,
    clock,
    describe,
    report_of,
    running,
    save_json,
    shown,
)
from neurd.revision import git_revision, source_hash


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


def last_progress(log: Path) -> str | None:
    """The last progress line a job wrote to its log."""
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
        "source_hash": source_hash(places.code / PACKAGE.relative_to(ROOT))})
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


def _refusal(places: Places) -> str | None:
    """Why an allocation may not start now, in words (None: it may): an unreadable lock or
    report, one running, a folder it cannot write, its inputs missing, a pack not published,
    states on the disk no pack holds (what a start would delete).  What the last one left
    without packing is packed first."""
    try:
        record = running(places)
        report_of(places)
    except Unreadable as error:
        return (f"{error}: an allocation may have ended writing it. `make "
                "cpu-allocation-status` says what is on disk; `make cpu-allocation-stop` stops "
                "whatever runs of it and packs every state it finds; then start again")
    if record is not None:
        return (f"a CPU allocation is running already: {describe(record)}. See it with "
                "`make cpu-allocation-status`, stop it with `make cpu-allocation-stop`")
    for folder in (places.work, places.out):
        why = writable(folder)
        if why:
            return why
    snapshot = places.results / "config/neural.json"
    games = json.loads(snapshot.read_text())["games"] if snapshot.is_file() else []
    for path in [snapshot] + [places.results / f"neural/{g}/game.npz" for g in games]:
        if not path.is_file():
            return f"{path} is missing: make paper-inputs"
    pack_left_saying(places, "the last CPU allocation ended without packing (killed, or the "
                     "machine stopped under it)", sys.stderr)
    left = unpublished(places.out, places.publication)
    if left:
        return (f"{shown(places.out)} holds a pack not yet published ({', '.join(left)}): "
                f"publish it first (make publish-blocks FROM={shown(places.out)}) and commit, "
                "or give another OUT")
    left = unpacked_on_disk(places)
    if left:
        return (f"{shown(places.run)} holds {', '.join(left)}, which no pack holds (a start "
                "would delete them): `make cpu-allocation-stop` packs them")
    return None


def start(args, places: Places) -> int:
    """Check, copy the code, start ``run`` detached at nice 19; print where it logs."""
    for key in ("minutes", "checkpoint_minutes"):
        value = getattr(args, key)
        if not (value == value and 0 < value < 1e4):
            print(f"--{key.replace('_', '-')} must be a positive number of minutes, got "
                  f"{value}", file=sys.stderr)
            return 2
    refused = _refusal(places)
    if refused:
        print(refused, file=sys.stderr)
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
        command = [sys.executable, "-m", "neurd.publication.allocation", "cpu", "run",
                   "--ends", f"{ends:.3f}", "--minutes", str(args.minutes),
                   "--checkpoint-minutes", str(args.checkpoint_minutes),
                   *[f"--{k}={getattr(places, k)}" for k in ("results", "publication", "work",
                                                             "out", "tables")]]
        with open(places.log, "w") as log:
            # the copy's package, not this tree's: PYTHONPATH comes before any install of it
            env = dict(os.environ, PYTHONPATH=str(places.code / SRC.relative_to(ROOT)))
            process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True,
                                       preexec_fn=_lowest_priority, cwd=places.code, env=env)
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


def status(places: Places) -> int:
    """What the allocation does now, or what the last one left."""
    try:
        record = running(places)
        report = report_of(places)
    except Unreadable as error:
        return status_from_disk(places, str(error))
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
            pack_left_saying(places, "the last one ended without packing", sys.stdout)
            return 0
    except Unreadable as error:
        return stop_from_disk(places, str(error), wait)
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

