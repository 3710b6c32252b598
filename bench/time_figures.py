"""Time ``make figures`` (and, with ``--test``, ``make test``) in a fresh clone; keep the run as
a reference of ``neurd expected-time`` in ``bench/figures_time.json``.

    git clone . /some/fresh/clone
    python bench/time_figures.py --clone /some/fresh/clone [--xla-flags=--xla_cpu_max_isa=AVX2]

In the clone, in order: the venv (``make .venv/.installed``, timed), the probe of
:func:`neurd.expected_time.probe` (in a fresh process, as ``make figures`` runs it), the
config check and Snakemake as ``make figures`` runs them (timed), and optionally ``make
test``.  From Snakemake's benchmark files it takes the neural jobs' share of the run's CPU
seconds.  The run is added to ``--out`` (one entry per processor, its family, model and
stepping numbers, instruction set and config: a new run replaces the one it repeats), with the
processor, the instruction set XLA compiled for, the revision and the date; the README and
docs/performance.md quote these entries.  The run records its config by name and by the hash
of the file's content (``config_hash``, :func:`neurd.expected_time.config_digest`): ``neurd
expected-time`` matches a user's config to the runs by that hash, not by the name.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from _timed import clone_machine, keep  # bench/_timed.py, beside this script

ROOT = Path(__file__).resolve().parents[1]


def _run(command: list[str], clone: Path, env: dict) -> float:
    start = time.monotonic()
    done = subprocess.run(command, cwd=clone, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command)} failed with status {done.returncode}")
    return round(time.monotonic() - start, 1)


def neural_share(benchmarks: Path) -> float:
    """The neural jobs' share of the CPU seconds of every step Snakemake timed."""
    total = neural = 0.0
    for path in benchmarks.glob("*.tsv"):
        with open(path, encoding="utf-8") as handle:
            row = next(csv.DictReader(handle, delimiter="\t"), None)
        if not row or row.get("cpu_time", "NA") == "NA":
            continue
        seconds = float(row["cpu_time"])
        total += seconds
        neural += seconds if path.name.startswith("neural_") else 0.0
    return round(neural / total, 3) if total else 0.0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clone", required=True, help="a fresh clone of this repository")
    parser.add_argument("--config", default="workflow/config/default.yaml")
    parser.add_argument("--cores", type=int, default=2)
    parser.add_argument("--xla-flags", default="",
                        help="XLA_FLAGS of the run (e.g. --xla_cpu_max_isa=AVX2)")
    parser.add_argument("--test", action="store_true", help="also time make test")
    parser.add_argument("--out", default=str(ROOT / "bench" / "figures_time.json"))
    args = parser.parse_args(argv)
    clone = Path(args.clone).resolve()
    env = dict(os.environ, XLA_FLAGS=args.xla_flags)
    env.pop("NEURD_AUDIT_DIR", None)
    venv = _run(["make", ".venv/.installed"], clone, env)
    python = str(clone / ".venv/bin/python")
    probe = json.loads(subprocess.run(
        [python, "-c", "import json; from neurd.expected_time import probe; "
         "print(json.dumps(probe()))"], cwd=clone, env=env, capture_output=True, text=True,
        check=True).stdout.strip().splitlines()[-1])
    digest = subprocess.run(
        [python, "-c", "import sys; from neurd.expected_time import config_digest; "
         "print(config_digest(sys.argv[1]))", args.config], cwd=clone, env=env,
        capture_output=True, text=True, check=True).stdout.strip().splitlines()[-1]
    check = _run([str(clone / ".venv/bin/neurd"), "check-config", args.config], clone, env)
    snakemake = _run([str(clone / ".venv/bin/snakemake"), "--cores", str(args.cores),
                      "--configfile", args.config], clone, env)
    test = _run(["make", "test"], clone, env) if args.test else None
    entry = {"config": Path(args.config).name, "config_hash": digest, **clone_machine(clone, env),
             "xla_flags": args.xla_flags, "cores": args.cores, "venv_seconds": venv,
             "check_seconds": check, "snakemake_seconds": snakemake, "test_seconds": test,
             "probe": probe, "neural_share": neural_share(clone / "results" / "benchmarks")}
    keep(Path(args.out), entry, ("config", "processor", "processor_id", "isa"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
