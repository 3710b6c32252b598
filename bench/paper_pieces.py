"""The paper-scale Fig 6 jobs, a piece at a time, on a GPU machine that does not outlive the piece.

GPU time often comes in short pieces on machines with neither Snakemake nor OpenSpiel
(preemptible instances, short SLURM jobs); what survives a piece is the files it hands
back (here: at most 8 files of 16 MiB).  This script runs the real ``neurd neural-run``
of every unfinished job of the named games, each stopped by its wall-time budget with
its state saved, and packs the jobs' folders (finished curves and policies, and the
checkpoint of an unfinished job) into parts of at most 15 MiB::

    # here: the config snapshot and the compiled games (no GPU needed)
    snakemake results/paper/config/neural.json results/paper/neural/kuhn/game.npz \\
        --cores 2 --configfile workflow/config/paper.yaml
    # on the GPU machine, with results/paper/config, results/paper/neural/kuhn/game.npz and
    # (from the second piece on) the unpacked jobs folder carried there:
    python3 bench/paper_pieces.py run --results results/paper --game kuhn --minutes 8 --out OUT
    # back here: unpack, and once every job is finished, the tables and the publication
    python3 bench/paper_pieces.py unpack --results results/paper OUT/pieces.tar.*
    snakemake results/paper/neural/kuhn/summary.parquet --cores 2 \\
        --configfile workflow/config/paper.yaml
    make publish GAME=kuhn

A job resumed from its checkpoint on another machine writes the same tables as one
uninterrupted run (``neurd neural-run``'s own guarantee, tested on CPU); each piece is
listed in the job's curves (device, driver, jax version, revision, wall time,
configuration-iterations per second), which the publication's provenance keeps.
``--parallel N`` runs N jobs of a game at once on the one GPU (the learning step is
latency-bound, so two jobs share a GPU well; each gets 1/N of its memory).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import time
from pathlib import Path

PART_BYTES = 15 * 2**20
EXIT_STOPPED = 75  # neurd neural-run: stopped at its budget, state saved


def _jobs(results: Path, games: list[str]) -> list[tuple[str, str, int]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from neurd.pipeline.neural import jobs

    cfg = json.loads((results / "config/neural.json").read_text())
    unknown = sorted(set(games) - set(cfg["games"]))
    if unknown:
        raise SystemExit(f"{unknown} are not games of {results}/config/neural.json "
                         f"({cfg['games']})")
    return [job for job in jobs(cfg) if job[0] in games]


def _paths(results: Path, game: str, critic: str, chunk: int) -> dict[str, Path]:
    base = results / f"neural/{game}/jobs/{critic}_{chunk}"
    return {"curves": Path(f"{base}_curves.parquet"), "policies": Path(f"{base}_policies.parquet"),
            "checkpoint": Path(f"{base}_checkpoint"), "log": Path(f"{base}.log")}


def run(args) -> int:
    results, deadline = Path(args.results), time.monotonic() + 60.0 * args.minutes
    todo = [job for job in _jobs(results, args.game)
            if not _paths(results, *job)["curves"].exists()
            and (not args.only or f"{job[1]}_{job[2]}" in args.only)]
    print(f"{len(todo)} unfinished jobs: {todo}", flush=True)
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               XLA_PYTHON_CLIENT_MEM_FRACTION=f"{0.9 / args.parallel:.2f}")
    env["PYTHONPATH"] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), env.get("PYTHONPATH", "")])
    running: list[tuple[tuple, subprocess.Popen]] = []
    stopped = []
    while todo or running:
        while todo and len(running) < args.parallel:
            left = (deadline - time.monotonic()) / 60.0
            if left <= 0 or left < args.min_start_minutes:
                todo = []  # too little left to be worth a start (JAX and the compilation)
                break
            game, critic, chunk = job = todo.pop(0)
            paths = _paths(results, *job)
            command = [sys.executable, "-m", "neurd.cli", "neural-run",
                       "--config", str(results / "config/neural.json"), "--game", game,
                       "--critic", critic, "--chunk", str(chunk),
                       "--compiled", str(results / f"neural/{game}/game.npz"),
                       "--curves", str(paths["curves"]), "--policies", str(paths["policies"]),
                       "--checkpoint", str(paths["checkpoint"]),
                       "--checkpoint-minutes", str(args.checkpoint_minutes),
                       "--stop-after-minutes", f"{left:.6g}"]
            paths["log"].parent.mkdir(parents=True, exist_ok=True)
            log = open(paths["log"], "a")
            running.append((job, subprocess.Popen(command, env=env, stdout=log,
                                                  stderr=subprocess.STDOUT)))
            print(f"started {job} with {left:.1f} min left", flush=True)
        if not running:
            break
        time.sleep(2.0)
        for item in list(running):
            job, process = item
            if process.poll() is None:
                continue
            running.remove(item)
            status = {0: "finished", EXIT_STOPPED: "stopped at its budget (state saved)"}.get(
                process.returncode, f"FAILED (exit {process.returncode})")
            print(f"{job}: {status}", flush=True)
            if process.returncode not in (0, EXIT_STOPPED):
                print(_paths(results, *job)["log"].read_text()[-3000:], flush=True)
                return 1
            if process.returncode == EXIT_STOPPED:
                stopped.append(job)
    if args.out:
        pack(results, args.game, Path(args.out))
    left = [job for job in _jobs(results, args.game)
            if not _paths(results, *job)["curves"].exists()]
    print(f"{len(left)} jobs still unfinished: {left}", flush=True)
    return 0


def pack(results: Path, games: list[str], out: Path) -> None:
    """The games' jobs folders (curves, policies, checkpoints, logs) as ``pieces.tar.NN``."""
    out.mkdir(parents=True, exist_ok=True)
    archive = out / "pieces.tar"
    with tarfile.open(archive, "w") as tar:
        for game in games:
            folder = results / f"neural/{game}/jobs"
            if folder.exists():
                tar.add(folder, arcname=f"neural/{game}/jobs")
    data, part = archive.read_bytes(), 0
    archive.unlink()
    for start in range(0, max(len(data), 1), PART_BYTES):
        (out / f"pieces.tar.{part:02d}").write_bytes(data[start:start + PART_BYTES])
        part += 1
    print(f"packed {len(data) / 2**20:.1f} MiB into {part} parts in {out}", flush=True)


def unpack(args) -> int:
    """Reassemble ``pieces.tar.NN`` and extract the jobs folders into ``--results``, replacing
    each job's previous files (a checkpoint a piece has moved on from included)."""
    parts = sorted(Path(p) for p in args.parts)
    data = b"".join(p.read_bytes() for p in parts)
    results = Path(args.results)
    results.mkdir(parents=True, exist_ok=True)
    archive = results / ".pieces.tar"
    archive.write_bytes(data)
    try:
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            bad = [m.name for m in members if not m.name.startswith("neural/")
                   or ".." in Path(m.name).parts or m.issym() or m.islnk()]
            if bad:
                raise SystemExit(f"refusing to extract {bad[:3]}: not a jobs folder")
            for folder in {"/".join(Path(m.name).parts[:3]) for m in members}:
                target = results / folder
                for stale in target.glob("*_checkpoint") if target.exists() else []:
                    for f in stale.iterdir():
                        f.unlink()
                    stale.rmdir()
            tar.extractall(results, filter="data")
    finally:
        archive.unlink()
    print(f"unpacked {len(parts)} parts into {results}", flush=True)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    p = sub.add_parser("run", help="run the unfinished jobs of the games, within a budget")
    p.add_argument("--results", default="results/paper", help="the scale's results folder")
    p.add_argument("--game", action="append", required=True, help="a game (repeat)")
    p.add_argument("--minutes", type=float, required=True, help="wall-time budget of the piece")
    p.add_argument("--checkpoint-minutes", type=float, default=2.0,
                   help="wall time between saves of a job's state (default 2)")
    p.add_argument("--min-start-minutes", type=float, default=1.0,
                   help="start no job with less of the budget left (default 1)")
    p.add_argument("--parallel", type=int, default=1, help="jobs at once on the GPU")
    p.add_argument("--only", action="append", metavar="CRITIC_CHUNK",
                   help="run only this job (e.g. learned_0; repeat): a paper-scale Goofspiel "
                        "job's checkpoint is up to 45 MiB, so one at a time fits 64 MiB")
    p.add_argument("--out", default=None, help="folder for the packed jobs folders")
    p.set_defaults(func=run)
    p = sub.add_parser("unpack", help="put a piece's packed jobs folders back in place")
    p.add_argument("--results", default="results/paper", help="the scale's results folder")
    p.add_argument("parts", nargs="+", help="pieces.tar.NN files, all of one piece")
    p.set_defaults(func=unpack)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
