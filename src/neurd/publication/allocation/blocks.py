"""The publication's progress (its seeds, its blocks in progress, the history left) and the
planned blocks run, several at once, each stopped with its state saved or killed at the
deadline."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from neurd import games
from neurd.neural.plan import checkpoint_grid
from neurd.neural.runs import critics, parse_block
from neurd.publication import gpu_schedule
from neurd.publication.allocation.places import ROOT, SRC, environment
from neurd.publication.allocation.processes import last_error
from neurd.publication.allocation.report import Report
from neurd.publication.costs import Bytes
from neurd.publication.manifest import read_manifest
from neurd.publication.resume_states import bytes_per_seed, state_folder, to_checkpoint

EXIT_STOPPED = 75  # neurd neural-run stopped at its wall-time budget, its state saved


def published_seeds(publication: Path) -> dict[str, list[int]]:
    """``{game: [run seed]}`` the publication holds (none where it has no manifest)."""
    manifest = read_manifest(publication) or {}
    return {g: list(e.get("seeds", [])) for g, e in manifest.get("games", {}).items()}


def published_progress(publication: Path, cfg: dict) -> tuple[list, float]:
    """The publication's blocks in progress (each with the share of its cycles done), and the
    bytes the paper-scale run may still add to the repository's history."""
    manifest = read_manifest(publication)
    if manifest is None:
        return [], float(gpu_schedule.HISTORY_CAP)
    out = []
    for game, entry in manifest.get("games", {}).items():
        iterations = checkpoint_grid(int(cfg["phase_iterations"][game]), int(cfg["phases"]),
                                     int(cfg["checkpoints"]["geometric"]),
                                     int(cfg["checkpoints"]["linear"]),
                                     int(cfg["critic_updates_per_policy_update"]))[0]
        for name in entry.get("in_progress", []):
            meta = json.loads((publication / state_folder(game, name) / "meta.json").read_text())
            done = int(iterations[meta["next_row"] - 1]) / int(iterations[-1])
            out.append(gpu_schedule.InProgress(game, *parse_block(name), done=done))
    used = manifest.get("history_bytes", manifest.get("bytes", 0))
    return out, float(gpu_schedule.HISTORY_CAP - used)


def repository_bytes(results: Path, cfg: dict):
    """Bytes per seed of a finished block and of a block-in-progress state, per game."""
    sizes = {g: bytes_per_seed(cfg, g, games.load(results / f"neural/{g}/game.npz"))
             for g in cfg["games"]}
    return Bytes(block={g: b for g, (b, _) in sizes.items()},
                 state={g: s for g, (_, s) in sizes.items()})


def run_block(report: Report, cfg: dict, block, results: Path, env: dict,
              hard_deadline: float, publication: Path, variant: str,
              work: Path | None = None, stop: threading.Event | None = None,
              may_stop: bool | None = None, keep_state: bool = False) -> dict:
    """Run one planned block (a published block in progress resumed from its state) in
    ``work`` (default ``results/allocation``); its record for the report, with ``folder`` (its
    tables) and ``state`` (its saved state).  The job is killed at ``hard_deadline`` or once
    ``stop`` is set; a job of one critic killed so comes back in progress from the state it
    saved last (its checkpoint folder's, at most ``--checkpoint-minutes`` old).
    ``may_stop``: whether the job may be stopped with its state (default: where its game has
    one critic); ``keep_state``: a job that finishes keeps its state at its last row too
    (``state`` in the record), to be held in progress where another critic of its seeds does
    not finish."""
    work = results / "allocation" if work is None else work
    left = hard_deadline - time.monotonic()
    record = {"block": f"{block.game}/{block.name}", "slot": block.slot,
              "predicted_seconds": block.predicted_seconds}
    # a block that may stop (by default one critic's) starts if a piece worth its start-up
    # fits; one that must finish (a seed is published with every critic at once), if all of it
    # does
    may_stop = len(critics(cfg, block.game)) == 1 if may_stop is None else may_stop
    least = gpu_schedule.MIN_PIECE_SECONDS + gpu_schedule.SAVE_SECONDS + 60.0
    if (needs := block.predicted_seconds if not may_stop
            else min(block.predicted_seconds, least)) > left:
        record["status"] = f"not started: needs {needs:.0f} s, {left:.0f} s left"
        return record
    folder = work / f"neural/{block.game}/blocks/{block.name}"
    folder.mkdir(parents=True, exist_ok=True)
    state = work / state_folder(block.game, block.name)
    if block.done_before > 0:  # the published block in progress, resumed
        to_checkpoint(publication / state_folder(block.game, block.name), state)
    command = [sys.executable, "-m", "neurd.cli", "neural-run",
               "--config", str(results / "config/neural.json"), "--game", block.game,
               "--critic", block.critic, "--seeds", f"{block.first}-{block.last}",
               "--compiled", str(results / f"neural/{block.game}/game.npz"),
               "--curves", str(folder / "curves.parquet"),
               "--policies", str(folder / "policies.parquet"),
               "--checkpoint", str(state), "--variant", variant]
    command += ["--keep-state"] if keep_state else []
    if may_stop:
        budget = hard_deadline - time.monotonic() - gpu_schedule.SAVE_SECONDS
        command += ["--stop-after-minutes", f"{max(budget, 1.0) / 60:.4f}"]
    report.say(f"{record['block']}: started on slot {block.slot} (predicted "
               f"{block.predicted_seconds / 60:.1f} min, {left / 60:.1f} min left)")
    start = time.monotonic()
    with open(folder / "run.log", "w") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   cwd=ROOT)
        killed = False
        while process.poll() is None:
            if time.monotonic() >= hard_deadline or (stop is not None and stop.is_set()):
                process.kill()
                killed = True
            time.sleep(0.2)
    record.update(seconds=round(time.monotonic() - start, 1), returncode=process.returncode)
    ok = process.returncode == 0 and (folder / "curves.parquet").is_file()
    saved = (state / "meta.json").is_file()
    paused = saved and (process.returncode == EXIT_STOPPED or (killed and may_stop))
    record["status"] = ("finished" if ok else "in progress (stopped at the end of its slot, "
                        "state saved)" if paused and not killed else "in progress (killed, "
                        "with the state it saved last)" if paused
                        else "lost (killed at the deadline)" if killed
                        else f"failed (exit {process.returncode}): "
                        f"{last_error(folder / 'run.log')}")
    if not ok:
        record["log"] = (folder / "run.log").read_text()[-2000:]
    held = ok and keep_state and saved  # finished, its state kept at its last row
    if paused or held:
        shutil.copyfile(folder / "run.log", state / "run.log")
    return dict(record, folder=folder if ok else None, state=state if paused or held else None)


def run_jobs(report: Report, cfg: dict, step: gpu_schedule.Allocation, results: Path, platform: str,
             cache: Path, hard_deadline: float, publication: Path, variant: str = "default"
             ) -> tuple[list, list]:
    """The allocation's blocks, ``step.parallel`` at a time (one queue per slot); ``(finished,
    stopped)``: the folders of the blocks that finished, and of the states of those stopped
    at the end of their slot (blocks in progress for the next allocation).  In a game of
    several critics each job keeps its state at the end, and a block whose seeds' other
    critics did not all finish is held in progress (:func:`whole_groups`)."""
    shutil.rmtree(results / "allocation/neural", ignore_errors=True)  # nothing earlier packed
    finished, stopped, held = [], [], {}
    env = environment(platform, SRC, cache, variant, 0.9 / step.parallel)

    def slot_queue(slot: int) -> None:
        for block in [b for b in step.blocks if b.slot == slot]:
            record = run_block(report, cfg, block, results, env, hard_deadline, publication,
                               variant, keep_state=len(critics(cfg, block.game)) > 1)
            folder, state = record.pop("folder", None), record.pop("state", None)
            with report.lock:
                report.data["jobs"].append(record)
                finished.extend([folder] if folder else [])
                stopped.extend([state] if state and not folder else [])
                held.update({folder: state} if folder and state else {})
            report.save()
            report.say(f"{record['block']}: {record['status']}"
                       + (f" in {record['seconds']:.0f} s" if "seconds" in record else ""))

    threads = [threading.Thread(target=slot_queue, args=(k,)) for k in range(step.parallel)]
    for thread in threads:
        thread.start()
    while any(t.is_alive() for t in threads):
        wake = time.monotonic() + 30.0  # a line every 30 s; on to packing as the last one ends
        for thread in threads:
            thread.join(timeout=max(wake - time.monotonic(), 0.0))
        if any(t.is_alive() for t in threads):
            report.say(f"jobs: {len(report.data['jobs'])} of {len(step.blocks)} done, "
                       f"{max(hard_deadline - time.monotonic(), 0) / 60:.1f} min to the "
                       "deadline")
    return whole_groups(cfg, finished, stopped, held)


def whole_groups(cfg: dict, finished: list[Path], stopped: list[Path], held: dict
                 ) -> tuple[list, list]:
    """``(finished, stopped)`` with every finished block of a game of several critics whose
    seeds' blocks of the other critics did not all finish moved to ``stopped`` as the state it
    kept at its end (``held[folder]``; a seed is published with every critic at once)."""
    done: dict[tuple, set] = {}
    for folder in finished:
        critic, first, last = parse_block(folder.name)
        done.setdefault((folder.parts[-3], first, last), set()).add(critic)
    whole, kept = [], list(stopped)
    for folder in finished:
        critic, first, last = parse_block(folder.name)
        game = folder.parts[-3]
        if done[(game, first, last)] >= set(critics(cfg, game)) or folder not in held:
            whole.append(folder)  # (one without a kept state: publishing it names the gap)
        else:
            kept.append(held[folder])
    return whole, kept

