"""One short GPU allocation's work for the paper-scale Fig 6, in one command.

    make gpu-allocation MINUTES=9.5 OUT=<folder that comes back>
    python3 bench/gpu_allocation.py --minutes 9.5 --out OUT      # the same, without make

GPU time comes as short allocations: one machine, about ten minutes of one
command, nothing kept afterwards but the files the command writes (a few, of at
most 16 MiB).  Within ``--minutes`` this command

1. **checks** the device (at most ``--check-minutes``): three learning cycles of
   every game and critic on the CPU and twice on the GPU, a process each, all at once --
   every leaf finite, the
   two GPU runs bitwise equal, CPU and GPU within the bound (``bench/gpu_check.py``'s
   first part).  If the check fails, no job starts.
2. **measures** (when no throughput table of this device is given, or
   ``--measure always``; at most ``--measure-minutes``): ms per learning cycle
   of each game at N = 12, 60, 120, 240, 480 configurations with 1, 2 and 3 jobs
   sharing the GPU, the checkpoint evaluation and the start-up of a job; the same
   for ``--baseline`` (an older ``src`` tree) with one job; a profile trace
   (``jax.profiler``) of a short Leduc and Goofspiel segment.  Programs are
   compiled once, in parallel, into a compilation cache the jobs then share.
   What prices the plan comes first: every game at N = 480 and 12 with 1, 2 and 3
   jobs, then the other sizes, then the baseline; each round keeps the cells it
   timed when the budget ends it, so a short budget still prices every block.
3. **plans** (:func:`neurd.allocation.next_allocation`): the seed blocks that fit what is
   left, the paper's length first (every game with a seed) then seeds, from the
   measured (or given) throughput and the seeds the publication already has;
   every block predicted to finish, none started that would not.
4. **runs** them (``neurd neural-run --seeds``), several at once on the GPU as
   planned, each killed only at the hard deadline (its block is then lost).
5. **packs** the finished blocks (``blocks.json`` and ``blocks.tar.NNN``, every
   part and file with its SHA-256), with this allocation's report in the index.

Writes into ``--out``: ``allocation.json`` (the report, rewritten as it goes: device,
check, throughput, plan, jobs, the plan for the rest), ``blocks.json`` and its parts,
and ``profile.tar.gz`` when a trace was taken.  Back on a CPU machine,
``make publish-blocks FROM=<that folder>`` checks and publishes the blocks.

Needs jax (CUDA), flax, optax, numpy, pandas, pyarrow; not Snakemake nor OpenSpiel:
the config snapshot and the compiled games come with the working tree
(``make gpu-allocation-inputs`` makes them).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")  # this process never takes the GPU

ROOT = Path(__file__).resolve().parents[1]
# a timing worker imports the package from the tree its PYTHONPATH names (this one, or the
# --baseline tree it times); every other use of this script takes this tree's
if sys.argv[1:2] != ["worker"]:
    sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from allocating.cli import main  # noqa: E402  (bench/allocating: the allocation's concerns)

if __name__ == "__main__":
    sys.exit(main())
