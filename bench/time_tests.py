"""Time the test suite's two parts (``make test``, ``make test-long``) on this machine and keep
the run, with its slowest tests, in ``bench/tests_time.json``; docs/performance.md's table of
the tests' times is generated from that file (:func:`neurd.expected_time.tests_table`).

    git clone . /some/fresh/clone
    python bench/time_tests.py --clone /some/fresh/clone [--xla-flags=--xla_cpu_max_isa=AVX2]
    python bench/time_tests.py --clone /some/fresh/clone --log ci.log [--xla-flags=...]

The first form runs ``make test`` and ``make test-long`` in the clone; the second reads the
output of a run already made there (``.ci/run``'s log: both parts, in order).  Each part's time
is pytest's own (``= ... in 1546.40s``), its slowest tests pytest's ``--durations`` list.  One
entry per processor and instruction set: a new run replaces the one it repeats.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

from _timed import clone_machine, keep  # bench/_timed.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
PARTS = ("test", "test-long")
SUMMARY = re.compile(r"^=+ (?P<counts>.*?) in (?P<seconds>[\d.]+)s(?: \([\d:]+\))? =+$")
DURATION = re.compile(r"^(?P<seconds>[\d.]+)s (?P<when>call|setup|teardown)\s+(?P<test>.+)$")


def parse(text: str) -> list[dict]:
    """Each pytest session of ``text`` in order: its seconds, its counts line and its slowest
    tests (``[seconds, phase, test id]``, as pytest's ``--durations`` lists them)."""
    sessions, slowest = [], []
    for line in text.splitlines():
        line = line.strip()
        found = DURATION.match(line)
        if found:
            slowest.append([float(found["seconds"]), found["when"], found["test"]])
            continue
        found = SUMMARY.match(line)
        if found and ("passed" in found["counts"] or "failed" in found["counts"]):
            sessions.append({"seconds": float(found["seconds"]), "counts": found["counts"],
                             "slowest": slowest})
            slowest = []
    return sessions


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clone", required=True, help="a fresh clone of this repository")
    parser.add_argument("--xla-flags", default="",
                        help="XLA_FLAGS of the run (--xla_cpu_max_isa=AVX2: an AVX2 machine)")
    parser.add_argument("--log", help="the output of a run already made in the clone "
                        "(make test, then make test-long), instead of running them")
    parser.add_argument("--parts", nargs="+", default=list(PARTS), choices=PARTS,
                        help="the parts run (or in the log), in order (default: both)")
    parser.add_argument("--note", default="", help="what else ran on the machine meanwhile")
    parser.add_argument("--out", default=str(ROOT / "bench" / "tests_time.json"))
    args = parser.parse_args(argv)
    clone = Path(args.clone).resolve()
    env = dict(os.environ, XLA_FLAGS=args.xla_flags)
    env.pop("NEURD_AUDIT_DIR", None)
    if args.log:
        text = Path(args.log).read_text(errors="replace")
    else:
        outputs = []
        for part in args.parts:
            done = subprocess.run(["make", part], cwd=clone, env=env, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            sys.stdout.write(done.stdout[-3000:])
            outputs.append(done.stdout)
        text = "\n".join(outputs)
    sessions = parse(text)
    if len(sessions) != len(args.parts):
        sys.exit(f"found {len(sessions)} pytest sessions, not {len(args.parts)} "
                 f"({', '.join(args.parts)})")
    failed = [s["counts"] for s in sessions if "failed" in s["counts"]]
    if failed:
        sys.exit(f"a part failed: {failed}: not kept")
    entry = {**clone_machine(clone, env), "xla_flags": args.xla_flags, "note": args.note,
             "parts": {part: s for part, s in zip(args.parts, sessions)}}
    keep(Path(args.out), entry, ("processor", "processor_id", "isa"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
