"""One short GPU allocation's work for the paper-scale Fig 6, in one command.

    make gpu-allocation MINUTES=9.5 OUT=<folder that comes back>
    PYTHONPATH=src python3 -m neurd.publication.allocation gpu --minutes 9.5 --out OUT

GPU time comes as short allocations: one machine, about ten minutes of one
command, nothing kept afterwards but the files the command writes (a few, of at
most 16 MiB).  Within ``--minutes`` this command

1. **checks** the device (at most ``--check-minutes``): three learning cycles of
   every game and critic on the CPU and twice on the GPU, a process each, all at once --
   every leaf finite, the
   two GPU runs bitwise equal, CPU and GPU within the bound (:mod:`.device_check`'s
   first part).  If the check fails, no job starts.
2. **measures** (when no throughput table of this device is given, or
   ``--measure always``; at most ``--measure-minutes``): ms per learning cycle
   of each game at N = 12, 60, 120, 240, 480 configurations with 1, 2 and 3 jobs
   sharing the GPU, the checkpoint evaluation and the start-up of a job; the same
   for ``--baseline`` (an older ``src`` tree) with one job; a profile trace
   (``jax.profiler``) of a short Leduc and Goofspiel segment.  Programs are
   compiled once, in parallel, into a compilation cache the jobs then share.
   What prices the schedule comes first: every game at N = 480 and 12 with 1, 2 and 3
   jobs, then the other sizes, then the baseline; each round keeps the cells it
   timed when the budget ends it, so a short budget still prices every block.
3. **schedules** (:func:`neurd.publication.gpu_schedule.next_allocation`): the seed blocks that fit
   what is left, the paper's length first (every game with a seed) then seeds, from the
   measured (or given) throughput and the seeds the publication already has;
   every block predicted to finish, none started that would not.
4. **runs** them (``neurd neural-run --seeds``), several at once on the GPU as
   planned, each killed only at the hard deadline (its block is then lost).
5. **packs** the finished blocks (``blocks.json`` and ``blocks.tar.NNN``, every
   part and file with its SHA-256), with this allocation's report in the index.

Writes into ``--out``: ``allocation.json`` (the report, rewritten as it goes: device,
check, throughput, the allocation's blocks, jobs, the schedule of the rest), ``blocks.json`` and
its parts, and ``profile.tar.gz`` when a trace was taken.  Back on a CPU machine,
``make publish-blocks FROM=<that folder>`` checks and publishes the blocks.

Needs jax (CUDA), flax, optax, numpy, pandas, pyarrow; not Snakemake nor OpenSpiel:
the config snapshot and the compiled games come with the working tree
(``make gpu-allocation-inputs`` makes them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import time
from pathlib import Path

from neurd.publication import gpu_schedule
from neurd.publication.allocation.blocks import (
    published_progress,
    published_seeds,
    repository_bytes,
    run_jobs,
)
from neurd.publication.allocation.checks import check_device, check_variants
from neurd.publication.allocation.device_check import describe_device
from neurd.publication.allocation.measurement import given_variant, measure
from neurd.publication.allocation.packing import pack_blocks, pack_profile
from neurd.publication.allocation.places import PACKAGE, ROOT, environment
from neurd.publication.allocation.report import Report, table
from neurd.publication.allocation.timing import SIZES
from neurd.publication.costs import Throughput
from neurd.revision import REVISION_FILE_VARIABLE, git_revision, source_hash
from neurd.tables import config_hash

DESCRIPTION = "One short GPU allocation's work for the paper-scale Fig 6, in one command."


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m neurd.publication.allocation gpu",
                                     description=DESCRIPTION)
    sub = parser.add_subparsers(dest="mode")
    t = sub.add_parser("table", help="an allocation report's throughput as Markdown")
    t.add_argument("report", help="allocation.json, or a report kept in bench/gpu/allocations")
    parser.add_argument("--results", default="results/paper",
                        help="the scale's results folder: config/neural.json and "
                             "neural/<game>/game.npz (make gpu-allocation-inputs)")
    parser.add_argument("--publication", default="published/paper",
                        help="the publication whose seeds are done")
    parser.add_argument("--out", required=False, help="the folder that comes back")
    parser.add_argument("--minutes", type=float, default=9.5, help="the allocation's budget")
    parser.add_argument("--check-minutes", type=float, default=2.5,
                        help="the most the check may take (it should take about a minute on "
                             "a GPU machine, and what it does not use goes to the jobs; if it "
                             "overruns, no job starts)")
    parser.add_argument("--measure", choices=("auto", "always", "never"), default="auto",
                        help="auto: measure unless --throughput holds rows of this device")
    parser.add_argument("--measure-minutes", type=float, default=3.0)
    parser.add_argument("--throughput", action="append", default=[],
                        help="a throughput table: an earlier allocation's report (repeat); "
                             "its rows of this device's kind are used")
    parser.add_argument("--baseline", default=None, help="an older src tree timed beside")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--no-variants", action="store_true",
                        help="measure and run the default cycle variant only")
    parser.add_argument("--reserve-minutes", type=float, default=0.5,
                        help="kept at the end for packing")
    parser.add_argument("--max-parallel", type=int, default=3)
    parser.add_argument("--platform", default="cuda",
                        help="the JAX platform of the jobs (cpu: a dry run on a CPU)")
    return parser


def inputs(parser: argparse.ArgumentParser, args) -> tuple[Path, dict]:
    """The results folder and its config snapshot, checked, before anything runs."""
    for key in ("minutes", "check_minutes", "measure_minutes", "reserve_minutes"):
        value = getattr(args, key)
        if not (value == value and 0 <= value < 1e4):
            parser.error(f"--{key.replace('_', '-')} must be a number of minutes, got {value}")
    if args.minutes <= 0 or args.max_parallel < 1:
        parser.error("--minutes must be positive and --max-parallel at least 1")
    if not args.out:
        parser.error("--out is required")
    results = Path(args.results)
    snapshot = results / "config/neural.json"
    if not snapshot.is_file():
        parser.error(f"{snapshot} is missing: make gpu-allocation-inputs (on a machine with "
                     "Snakemake and OpenSpiel) and carry results/paper here")
    cfg = json.loads(snapshot.read_text())
    missing = [g for g in cfg["games"] if not (results / f"neural/{g}/game.npz").is_file()]
    if missing:
        parser.error(f"compiled games missing in {results}/neural: {missing}")
    return results, cfg


def start(args, results: Path, cfg: dict) -> tuple[Report, str]:
    """The report, its working folders and the device it describes; the device's kind."""
    # only what comes back is written to --out (a few files); the rest works beside the jobs
    report = Report(Path(args.out), args.minutes, work=results / "allocation" / "work",
                    games_dir=results / "neural", cache=results / "allocation" / "jax-cache",
                    profile=not args.no_profile)
    shutil.rmtree(report.work, ignore_errors=True)
    report.work.mkdir(parents=True)
    report.cache.mkdir(parents=True, exist_ok=True)
    info, smi = describe_device(environment(args.platform))
    if (results / "revision.json").is_file():
        os.environ[REVISION_FILE_VARIABLE] = str((results / "revision.json").resolve())
    report.data.update({
        "device": info.stdout.strip(), "nvidia_smi": smi,
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "revision": git_revision(ROOT), "config_hash": config_hash(cfg),
        # what a cycle runs: throughput measured under another code is measured again
        "code_revision": source_hash(PACKAGE / "neural", PACKAGE / "tabular")})
    report.step("start", device=info.stdout.strip() or info.stderr[-300:])
    return report, info.stdout


def throughput(args, report: Report, cfg: dict, kind: str) -> tuple[list[dict], str]:
    """The throughput rows the schedule prices blocks with and the cycle variant the jobs run:
    the given reports' of this card and code, else measured here (variants first)."""
    rows = []
    for path in args.throughput:
        given = json.loads(Path(path).read_text())
        rows += [dict(r, source=Path(path).name) for r in given.get("throughput", [])
                 if kind and r.get("device") == kind and r.get("code") == "this"
                 and r.get("revision_code") == report.data["code_revision"]]
    variant = given_variant(rows)
    rows = [r for r in rows if str(r.get("variant", "default")) == variant]
    if args.measure == "always" or (args.measure == "auto" and not rows):
        cells = [f"{g}:{c}:{n}" for g in cfg["games"]
                 for c in (("learned", "exact") if g in cfg["exact_critic_games"]
                           else ("learned",)) for n in SIZES]
        budget = min(60 * args.measure_minutes, report.left() - 120)
        start = time.monotonic()
        variant = "default" if args.no_variants else check_variants(
            report, list(cfg["games"]), args.platform, report.cache, budget / 3)
        rows = measure(report, cells, budget - (time.monotonic() - start), report.cache,
                       args.platform, Path(args.baseline) if args.baseline else None,
                       variant)
        for row in rows:
            row["device"], row["revision_code"] = kind, report.data["code_revision"]
        pack_profile(report)
    report.data["throughput"], report.data["variant"] = rows, variant
    return rows, variant


def next_allocation(args, report: Report, cfg: dict, results: Path, rows: list[dict],
                    checked: float):
    """This allocation's blocks and the schedule for the rest, into the report (its
    ``allocation``)."""
    publication = Path(args.publication)
    published = published_seeds(publication)
    in_progress, history_left = published_progress(publication, cfg)
    best = gpu_schedule.schedule(
        cfg, published, Throughput(rows), report.left() - 60 * args.reserve_minutes,
        later_seconds=60 * (args.minutes - args.reserve_minutes) - checked - 30,
        in_progress=in_progress, bytes_=repository_bytes(results, cfg),
        history_left=history_left, max_parallel=args.max_parallel)
    step = best.allocations[0]
    report.data["allocation"] = step.to_json()
    report.data["rest"] = {"allocations": len(best.allocations), "sizes": best.sizes,
                           "parallel": best.parallel, "first": best.first, "full": best.full,
                           "gpu_minutes": round(best.gpu_seconds / 60, 1),
                           "history_mib": round(best.history_bytes / 2**20, 1),
                           "history_left_mib": round(history_left / 2**20, 1),
                           "words": gpu_schedule.describe(cfg, published, best)}
    report.step("schedule", blocks=[f"{b.game}/{b.name}@{b.slot}" for b in step.blocks],
                parallel=step.parallel, notes=step.notes)
    return step


def main(argv=None) -> int:
    command = parser()
    args = command.parse_args(argv)
    if args.mode == "table":
        print(table(json.loads(Path(args.report).read_text())), end="")
        return 0
    results, cfg = inputs(command, args)
    report, device = start(args, results, cfg)
    if args.platform != "cpu" and "gpu" not in device:
        report.step("no GPU visible to JAX: nothing run")
        return 1
    if not check_device(report, results / "neural", args.platform, 60 * args.check_minutes,
                        list(cfg["games"])):
        return 1
    checked = report.elapsed()  # what the next allocations' check is expected to take
    rows, variant = throughput(args, report, cfg, device.split("|")[-1].strip())
    step = next_allocation(args, report, cfg, results, rows, checked)
    hard = time.monotonic() + report.left() - 60 * args.reserve_minutes
    finished, stopped = run_jobs(report, cfg, step, results, args.platform, report.cache,
                                 hard, Path(args.publication), variant)
    report.step("pack", blocks=len(finished), in_progress=len(stopped))
    pack_blocks(report, cfg, results, finished, stopped)
    report.step("done", blocks=[str(f.relative_to(results / "allocation")) for f in finished],
                in_progress=[str(f.relative_to(results / "allocation")) for f in stopped])
    return 0

