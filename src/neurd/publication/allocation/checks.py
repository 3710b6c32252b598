"""The device's check (a few learning cycles on the CPU and twice on the device, compared)
and the cycle variants' (each checked as the device was, and timed)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

from neurd.neural import variants
from neurd.publication.allocation import device_check
from neurd.publication.allocation.places import SRC, TIMING, environment
from neurd.publication.allocation.processes import run_all
from neurd.publication.allocation.report import Report
from neurd.publication.allocation.timing import SIZES


def check_device(report: Report, games_dir: Path, platform: str, seconds: float,
                 games: list[str]) -> bool:
    """The device check's cycles, a process per game and device, on the CPU and twice on the
    device, all at once; compared here."""
    work = report.work / "check"
    work.mkdir(exist_ok=True)
    runs = [(where, game, critic) for where in ("cpu", "a", "b") for game in games
            for critic in (("learned", "exact") if game in device_check.EXACT else ("learned",))]
    jobs = [([*device_check.CYCLES, "--games", str(games_dir), "--game", game, "--critic",
              critic, "--out", str(work / f"{where}_{game}_{critic}.npz")],
             environment("cpu" if where == "cpu" else platform)) for where, game, critic in runs]
    for (where, game, critic), done in zip(runs, run_all(jobs, seconds, limit=16)):
        if done is None or done.returncode != 0:
            report.step("check", ok=False, why=f"the {game} {critic} run ({where}) "
                        + ("took too long" if done is None else "failed"),
                        output=None if done is None else done.stdout[-3000:])
            return False
    merged = {}
    for where in ("cpu", "a", "b"):
        arrays = {}
        for _, game, critic in [r for r in runs if r[0] == where]:
            with np.load(work / f"{where}_{game}_{critic}.npz") as data:
                arrays.update({k: data[k] for k in data.files if k != "platform"})
                arrays["platform"] = data["platform"]
        merged[where] = work / f"{where}.npz"
        np.savez(merged[where], **arrays)

    checks = Checks()
    device_check.compare_cycles(checks, merged["cpu"], [merged["a"], merged["b"]], games_dir)
    report.data["check"] += checks.rows
    for row in checks.rows:
        report.say(f"[{'ok' if row['ok'] else 'FAIL'}] {row['check']}")
    report.step("check", ok=checks.ok())
    return checks.ok()


class Checks:
    """What :func:`device_check.compare_cycles` finds, as rows (its ``check(name, ok,
    measured)``)."""

    def __init__(self):
        self.rows: list[dict] = []

    def check(self, name: str, ok: bool, measured) -> None:
        self.rows.append({"check": name, "ok": bool(ok), "measured": measured})

    def ok(self) -> bool:
        return bool(self.rows) and all(r["ok"] for r in self.rows)


def check_variants(report: Report, games: list[str], platform: str, cache: Path,
                   seconds: float) -> str:
    """The cycle variant the allocation runs: each candidate (:func:`neurd.neural.variants.
    candidates`) checked on every game as the device was (its learned critic's cycles twice
    on the device, against the device check's CPU run) and timed at N = 480; the one with the
    least summed ms per cycle among those that passed for every game (the default where none
    did better, or no time was left)."""
    work = report.work / "variants"
    work.mkdir(parents=True, exist_ok=True)
    candidates = variants.candidates(gpu=platform != "cpu")
    jobs, what = [], []
    for variant in candidates:
        env = environment(platform, SRC, cache, variant.name)
        jobs.append(([sys.executable, str(TIMING), "cells", "--games",
                      str(report.games_dir), "--out", str(work / f"time_{variant.name}.json"),
                      "--variant", variant.name, "--cells",
                      *[f"{g}:learned:{max(SIZES)}" for g in games]], env))
        what.append(None)
        for game in games:
            for where in ("a", "b"):
                jobs.append(([*device_check.CYCLES, "--games", str(report.games_dir),
                              "--game", game, "--critic", "learned", "--variant", variant.name,
                              "--out",
                              str(work / f"{variant.name}_{where}_{game}.npz")], env))
                what.append((variant.name, game, where))
    done = run_all(jobs, seconds)
    passed, ms = {}, {}
    for variant in candidates:
        name = variant.name
        runs = {(w[1], w[2]): d for w, d in zip(what, done) if w and w[0] == name}
        ok = all(d is not None and d.returncode == 0 for d in runs.values())
        for game in games if ok else []:
            checks = Checks()
            device_check.compare_cycles(
                checks, report.work / "check" / f"cpu_{game}_learned.npz",
                [work / f"{name}_{w}_{game}.npz" for w in ("a", "b")], report.games_dir)
            ok = ok and checks.ok()
        timed = work / f"time_{name}.json"
        rows = json.loads(timed.read_text()) if timed.is_file() else []
        passed[name] = ok and len(rows) == len(games) and all(r["finite"] for r in rows)
        ms[name] = sum(r["ms_per_cycle"] for r in rows) if passed[name] else None
    chosen = variants.choose(passed, ms)
    report.data["variants"] = {"chosen": chosen, "checked": [
        {"variant": v.name, "passed": passed[v.name], "summed_ms_per_cycle": ms[v.name]}
        for v in candidates]}
    report.step("variants", chosen=chosen, passed=sum(passed.values()), of=len(candidates))
    return chosen

