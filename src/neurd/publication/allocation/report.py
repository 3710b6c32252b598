"""The allocation's report: ``allocation.json`` rewritten at every step, a line on the
console per event, and the throughput it measured as the Markdown table of bench/NEURAL.md."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

GAMES = ("kuhn", "leduc", "goofspiel")
# learning cycles of one run of every phase at the paper's length: three phases of 330,000
# learning iterations, four (critic updates) to a cycle
PAPER_CYCLES = 3 * 330_000 // 4


class Report:
    """``allocation.json``, rewritten at every step, and a line on the console per event."""

    def __init__(self, out: Path, minutes: float, work: Path | None = None,
                 games_dir: Path | None = None, cache: Path | None = None,
                 profile: bool = False):
        """``out``: the folder that comes back; ``work``: the folder beside the jobs that
        does not; ``games_dir``: the compiled games (``<game>/game.npz``); ``cache``: the
        compilation cache the jobs share; ``profile``: whether a trace is taken."""
        self.out, self.start, self.minutes = out, time.monotonic(), minutes
        self.work, self.games_dir, self.cache, self.profile = work, games_dir, cache, profile
        self.data = {"minutes": minutes, "steps": [], "check": [], "throughput": [],
                     "jobs": [], "allocation": None}
        self.lock = threading.Lock()
        out.mkdir(parents=True, exist_ok=True)

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return 60.0 * self.minutes - self.elapsed()

    def say(self, text: str) -> None:
        print(f"[{self.elapsed() / 60:5.2f} min] {text}", flush=True)

    def step(self, name: str, **fields) -> None:
        with self.lock:
            self.data["steps"].append({"step": name, "at_seconds": round(self.elapsed(), 1),
                                       **fields})
        self.save()
        self.say(f"{name}: {fields}" if fields else name)

    def save(self) -> None:
        with self.lock:
            text = json.dumps(self.data, indent=1, sort_keys=True, default=str)
        tmp = self.out / ".allocation.json.tmp"
        tmp.write_text(text + "\n")
        os.replace(tmp, self.out / "allocation.json")


def table(report: dict) -> str:
    """The throughput of an allocation's report as the Markdown table of bench/NEURAL.md."""
    rows = report.get("throughput", [])
    lines = [f"{report.get('device', '?')} ({report.get('nvidia_smi', '')}), "
             f"{report.get('date', '')}, code {report.get('code_revision', '?')}, revision "
             f"{(report.get('revision') or {}).get('commit')}", "",
             "| code | game | critic | N | jobs on the GPU | ms/cycle | checkpoint s | "
             "start-up s | one run of every phase, min |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    cycles = {g: PAPER_CYCLES for g in GAMES}
    keyed = {}
    for row in rows:  # the slowest of the jobs timed together
        key = (row.get("code"), row["game"], row.get("critic"), row["configurations"],
               row["parallel"])
        if key not in keyed or row["ms_per_cycle"] > keyed[key]["ms_per_cycle"]:
            keyed[key] = row
    for key in sorted(keyed, key=lambda k: (k[0] != "this", GAMES.index(k[1]), k[2], k[4],
                                            k[3])):
        row = keyed[key]
        minutes = cycles[row["game"]] * row["ms_per_cycle"] / 6e4
        lines.append(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {key[4]} | "
                     f"{row['ms_per_cycle']:.3f} | {row.get('checkpoint_seconds') or '-'} | "
                     f"{row.get('startup_seconds') or '-'} | {minutes:.1f} |")
    return "\n".join(lines) + "\n"

