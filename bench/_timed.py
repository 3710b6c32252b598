"""What the scripts that time a fresh clone whole share (``time_figures.py``,
``time_tests.py``): the clone's machine and revision, and the file of runs they keep."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path


def clone_machine(clone: Path, env: dict) -> dict:
    """The clone's processor (its model and its family, model and stepping numbers),
    instruction set, threads (as its own ``neurd.machine`` reads them under ``env``), the date
    and the clone's revision."""
    cpu = json.loads(subprocess.run(
        [str(clone / ".venv/bin/python"), "-c", "import json; from neurd.machine import "
         "cpu_description; print(json.dumps(cpu_description()))"], cwd=clone, env=env,
        capture_output=True, text=True, check=True).stdout)
    revision = subprocess.run(["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True,
                              text=True, check=True).stdout.strip()
    return {"processor": cpu["processor"], "processor_id": cpu.get("processor_id", ""),
            "isa": cpu["isa"], "threads": cpu["threads"],
            "date": time.strftime("%Y-%m-%d", time.gmtime()), "revision": revision}


def keep(out: Path, entry: dict, same: tuple[str, ...]) -> None:
    """Add ``entry`` to the runs of ``out``, replacing the one it repeats (equal on ``same``,
    a run that lacks a key of it, of a file written before it was recorded, repeating none)."""
    runs = json.loads(out.read_text())["runs"] if out.is_file() else []
    runs = [r for r in runs if any(k not in r for k in same)
            or tuple(r[k] for k in same) != tuple(entry[k] for k in same)]
    out.write_text(json.dumps({"runs": runs + [entry]}, indent=1, sort_keys=True) + "\n")
    print(json.dumps(entry, indent=1, sort_keys=True))
