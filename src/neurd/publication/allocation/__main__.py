"""The allocations' command line: a CPU's in the background, or a GPU's short one.

    python -m neurd.publication.allocation cpu start --minutes 150   # make cpu-allocation
    python -m neurd.publication.allocation cpu status|stop           # make cpu-allocation-*
    python -m neurd.publication.allocation gpu --minutes 9.5 --out OUT   # make gpu-allocation
    python -m neurd.publication.allocation gpu table REPORT          # its throughput, Markdown

``cpu`` is :mod:`.cpu_cli` (its docstring says what start, status and stop do), ``gpu`` is
:mod:`.gpu` (the steps of a GPU's allocation).  Neither process takes a GPU itself: the jobs
and workers they start do, each in its own environment (:mod:`.places`).
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # this process never takes the GPU

from neurd.publication.allocation import cpu_cli, gpu  # noqa: E402  (after the platform)

USAGE = "usage: python -m neurd.publication.allocation {cpu,gpu} ... (-h after either: its options)"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in ("cpu", "gpu"):
        print(USAGE, file=sys.stderr)
        return 2
    return (cpu_cli.main if argv[0] == "cpu" else gpu.main)(argv[1:])


if __name__ == "__main__":
    sys.exit(main())
