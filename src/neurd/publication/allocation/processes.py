"""Processes run at once within a deadline, and what a failed job's log says."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path


def run_all(jobs: list[tuple[list[str], dict]], seconds: float, limit: int = 12
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


def last_error(log: Path) -> str:
    """The last line of a job's log that says what went wrong (its last line otherwise)."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines()
             if line.strip()]
    said = [line for line in lines if "Error" in line or "error" in line]
    return (said or lines or ["(an empty log)"])[-1][:300]

