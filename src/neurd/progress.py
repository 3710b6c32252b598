"""Long jitted loops run in chunks, with progress reported between chunks.

A long computation is a ``lax.scan`` over steps (CFR checkpoints, neural
training chunks).  Logging from inside the scan (a host callback) would make
an accelerator stop and wait at every step; instead :func:`scan_in_chunks`
calls one jitted program per chunk of steps, which returns its metrics
stacked, and logs progress -- work done of the total, rate and time left --
on the host between chunks.  The chunks are padded to one length, so the
program is compiled once.

Each step's log (``results/logs/<step>.log``) keeps every progress line; during a
Snakemake run :func:`watch_logs` (started by the workflow) also shows on the
console, every ``$NEURD_PROGRESS_SECONDS`` seconds (default 30; 0: never), the
latest progress line of each job that has been running that long.  A value that is not
a finite number >= 0 is refused (:func:`progress_seconds`) before the run starts.
"""

from __future__ import annotations

import logging
import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from neurd.config import ConfigError


class Progress:
    """``label: done/total unit (x%), rate, elapsed, ETA`` lines on a logger.

    Throttled as the pipeline's console is: a line for the first update, then at most one
    every ``interval`` seconds (:func:`progress_seconds`: ``$NEURD_PROGRESS_SECONDS``,
    default 30; 0: none between the first and the last; a bad value is refused here, before
    the loop), and always the last (``done >= total``); the updates between go to the
    logger at DEBUG.  The first segment of a jitted loop includes its compilation, so the
    rate and the time left are measured from the end of the first update that did work
    (``done > 0``): before that the rate is the whole run's and the ETA ``?``.
    """

    def __init__(self, label: str, total: float, unit: str = "iterations",
                 log: logging.Logger | None = None, interval: float | None = None,
                 clock: Callable[[], float] = time.perf_counter):
        self.label, self.total, self.unit = label, float(total), unit
        self.log = log or logging.getLogger(__package__)
        interval = progress_seconds() if interval is None else float(interval)
        self.interval = interval if interval > 0 else float("inf")
        self.clock = clock
        self.start = clock()
        self.base: tuple[float, float] | None = None  # (time, done) after the first segment
        self.logged: float | None = None  # when the last INFO line was written

    def update(self, done: float, detail: str = "") -> None:
        now = self.clock()
        elapsed = now - self.start
        if self.base is None or done <= self.base[1]:
            rate = done / elapsed if elapsed > 0 else float("nan")
            left = float("nan")
            if self.base is None and done > 0:
                self.base = (now, float(done))
        else:
            rate = (done - self.base[1]) / (now - self.base[0]) if now > self.base[0] else \
                float("nan")
            left = (self.total - done) / rate if rate > 0 else float("nan")
        due = (self.logged is None or done >= self.total
               or now - self.logged >= self.interval)
        if due:
            self.logged = now
        share = 100.0 * done / self.total if self.total else 100.0
        self.log.log(logging.INFO if due else logging.DEBUG,
                     "%s: %d/%d %s (%.0f%%), %.3g %s/s, %s elapsed, ETA %s%s",
                     self.label, done, self.total, self.unit, share, rate, self.unit,
                     duration(elapsed), duration(left), f"; {detail}" if detail else "")


def duration(seconds: float) -> str:
    """``12.3s``, ``4m05s``, ``2h03m``: a wall time as a person reads it (``?`` if unknown)."""
    if not seconds == seconds or seconds in (float("inf"), float("-inf")):
        return "?"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m{secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"


# --- console progress of a Snakemake run --------------------------------------------------

PROGRESS_SECONDS_VARIABLE = "NEURD_PROGRESS_SECONDS"
DEFAULT_PROGRESS_SECONDS = 30.0
CONSOLE_WIDTH = 200  # a console line is cut here; the log keeps the whole line
# What Progress.update logs: "<label>: done/total unit (x%), rate unit/s, <t> elapsed, ETA <t>"
_PROGRESS = re.compile(r"(?P<message>\S.*?: \d+/\d+ \S+ \(\d+%\), \S+ \S+/s, \S+ elapsed, "
                       r"ETA \S+.*)$")


def progress_message(line: str) -> str | None:
    """The progress message of a log line written by :class:`Progress` (``None`` if it is not
    one): the text after the logging prefix (time, logger, level)."""
    match = _PROGRESS.search(line.rstrip("\n"))
    if match is None:
        return None
    message = match.group("message")
    prefix = re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ \S+ INFO ", message)
    return message[prefix.end():] if prefix else message


def progress_seconds(environ=os.environ) -> float:
    """Seconds between a job's progress lines on the console: ``$NEURD_PROGRESS_SECONDS``
    (unset or empty: 30; 0 turns them off).  Every reader of the variable comes here, so a
    value that is not a finite number >= 0 (``-1``, ``x``, ``nan``, ``inf``) is refused
    at once, naming it, rather than turning progress off without a word."""
    text = environ.get(PROGRESS_SECONDS_VARIABLE)
    if text is None or not text.strip():
        return DEFAULT_PROGRESS_SECONDS
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"${PROGRESS_SECONDS_VARIABLE} is {text!r}, not a number of seconds "
                          f">= 0 (0 turns progress off; unset: {DEFAULT_PROGRESS_SECONDS:g})")
    return value


class LogWatcher:
    """Shows, on ``stream``, the latest progress line of each job log in ``folder``.

    A log is a job's once it is written to after the watcher started (earlier runs'
    logs are left alone; a log truncated by a rerun is read from its start again).
    A job's line is shown once it has run ``interval`` seconds and then at most every
    ``interval`` seconds, whenever its log has a new progress line: a job shorter than
    ``interval`` shows nothing.  Lines read ``[<log name>] <progress message>``.
    """

    def __init__(self, folder, interval: float, stream=None, clock=time.monotonic):
        self.folder, self.interval = Path(folder), float(interval)
        self.stream, self.clock = stream, clock
        self.offsets: dict[Path, int] = {}
        self.started: dict[Path, float] = {}  # when the watcher saw the job's log grow
        self.shown: dict[Path, float] = {}
        self.latest: dict[Path, str] = {}
        self.partial: dict[Path, str] = {}
        for path in self._logs():
            self.offsets[path] = path.stat().st_size

    def _logs(self) -> list[Path]:
        return sorted(self.folder.rglob("*.log")) if self.folder.is_dir() else []

    def poll(self) -> list[str]:
        """Read what the logs gained since the last poll; return (and write) the lines due."""
        now, due = self.clock(), []
        for path in self._logs():
            try:
                size = path.stat().st_size
                offset = self.offsets.get(path, 0)
                if size < offset:  # truncated: the job was started again
                    offset, self.partial[path] = 0, ""
                    self.started.pop(path, None)
                    self.shown.pop(path, None)
                if size == offset:
                    continue
                with open(path, encoding="utf-8", errors="replace") as handle:
                    handle.seek(offset)
                    text = self.partial.get(path, "") + handle.read(size - offset)
            except OSError:
                continue
            self.offsets[path] = size
            self.started.setdefault(path, now)
            *lines, self.partial[path] = text.split("\n")
            for line in lines:
                message = progress_message(line)
                if message is not None:
                    self.latest[path] = message
        for path, message in self.latest.items():
            if (now - self.started.get(path, now) >= self.interval
                    and now - self.shown.get(path, -float("inf")) >= self.interval):
                name = path.relative_to(self.folder).with_suffix("").as_posix()
                line = f"[{name}] {message}"
                due.append(line[:CONSOLE_WIDTH - 3] + "..." if len(line) > CONSOLE_WIDTH
                           else line)
                self.shown[path] = now
        for path in [p for p in self.latest if p in self.shown and self.shown[p] == now]:
            del self.latest[path]  # shown: wait for the job's next line
        if due:
            stream = self.stream or sys.stderr
            stream.write("".join(f"{line}\n" for line in due))
            stream.flush()
        return due


def watch_logs(folder, interval: float | None = None, stream=None) -> threading.Thread | None:
    """Start a daemon thread that polls :class:`LogWatcher` on ``folder`` (the run's
    ``logs`` folder) until the process ends; ``interval``: ``$NEURD_PROGRESS_SECONDS`` by
    default (:func:`progress_seconds`, which refuses a bad value before the run's first
    job).  Returns the thread, or ``None`` when progress is turned off.  A failure to
    read never stops the run: the thread only reads logs and writes to the console."""
    interval = progress_seconds() if interval is None else float(interval)
    if interval <= 0:
        return None
    watcher = LogWatcher(folder, interval, stream)

    def loop():
        while True:
            time.sleep(min(interval, 2.0))
            try:
                watcher.poll()
            except Exception:  # noqa: BLE001 (the console's progress must never stop a run)
                pass

    thread = threading.Thread(target=loop, name="neurd-progress", daemon=True)
    thread.start()
    return thread


def scan_in_chunks(
    run_chunk: Callable,
    carry,
    xs: np.ndarray,
    *,
    chunk_size: int,
    pad_value,
    on_chunk: Callable | None = None,
):
    """Run ``run_chunk(carry, xs[i:i + chunk_size]) -> (carry, ys)`` over all of ``xs``.

    ``run_chunk`` is a jitted ``lax.scan`` over the leading axis of its
    ``xs`` chunk.  The last chunk is padded with ``pad_value`` (a step that
    must leave ``carry`` unchanged, e.g. zero iterations), so every call has
    the same shapes.  After each chunk ``on_chunk(steps_done, ys)`` gets the
    chunk's metrics (padding removed) on the host.

    Returns the final carry and the metrics of every step, stacked
    (``ys[k]`` for step ``k``), as NumPy arrays.
    """
    import jax  # the foundation modules load no JAX until a scan runs

    xs = np.asarray(xs)
    count = len(xs)
    if count == 0 or chunk_size < 1:
        raise ValueError(f"need at least one step and chunk_size >= 1, got {count} steps, "
                         f"chunk_size {chunk_size}")
    padded = -(-count // chunk_size) * chunk_size
    xs = np.concatenate([xs, np.full((padded - count, *xs.shape[1:]), pad_value, xs.dtype)])
    outputs = []
    for start in range(0, padded, chunk_size):
        carry, ys = run_chunk(carry, xs[start:start + chunk_size])
        real = min(chunk_size, count - start)
        ys = jax.tree_util.tree_map(lambda y, n=real: np.asarray(y)[:n], ys)
        outputs.append(ys)
        if on_chunk is not None:
            on_chunk(start + real, ys)
    stacked = jax.tree_util.tree_map(lambda *parts: np.concatenate(parts), *outputs)
    return carry, stacked
