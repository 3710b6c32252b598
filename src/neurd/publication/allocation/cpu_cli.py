"""The paper-scale Fig 6 computed by this machine's CPU in the background, as work goes on.

    make cpu-allocation MINUTES=150     # starts it, detached, at nice 19; returns at once
    make cpu-allocation-status          # what it is doing: blocks, cycles, ETA
    make cpu-allocation-stop            # stop it now: its block stopped with its state, packed
    make publish-blocks FROM=results/paper/cpu-allocation-out    # then commit

The same as ``python -m neurd.publication.allocation cpu start|status|stop``.  The CPU of a machine
where the project is worked on sits mostly idle while code is read and written; this
command puts it to work on the paper-scale run, seed block by seed block, as a GPU
allocation (:mod:`.gpu`) does, and packs what it made the same way.

``start`` checks the inputs (``make paper-inputs``), refuses when an allocation is running
already (naming it) or when ``--out`` holds a pack not yet published, copies the source of
the commit checked out (``git archive HEAD``; the working tree's uncommitted changes are not
in it, so that the code may change beside the run and every block records the commit that
made it), and starts ``run`` detached from the shell (its own process session, stdin closed), at the
lowest priority (``nice 19``), logging to ``<work>/log.txt``.  ``run``, within ``--minutes``:

1. **prices** the blocks with this processor's throughput (ms per learning cycle of each game
   and critic at N = 12, 24, 60, 120 configurations, the checkpoint evaluation, a job's
   start-up): the rows of this processor (its model and instruction set name the file
   ``bench/cpu/<processor>.json``, its family, model and stepping numbers its rows), jax and
   neural code there, else measured here (one program at a time, a few minutes)
   and added to that file, so that the next start on such a processor computes at once (kept
   only where nothing else kept the CPU busy meanwhile, other processes or the hypervisor
   taking its time (steal): a measurement at nice 19 beside busy work would price every
   later block too high);
2. **schedules** (:func:`neurd.publication.cpu_schedule.next_allocation`): the published blocks in
   progress
   first, then Kuhn, Leduc and Goofspiel in that order, in blocks that finish in the time left, the
   last continuing in the next allocation if the repository has room for its state; after
   each block it schedules again, from the time left and the pace of the last block against its
   prediction (the foreground work takes the CPU from a job at nice 19);
3. **runs** each block (``neurd neural-run --seeds``), saving its state every
   :data:`CHECKPOINT_MINUTES` minutes, stopping it before the end with its state saved (or at
   ``stop``: killed, with the state it saved last); a block of a game with several critics
   (Kuhn) is planned only where every critic finishes, and packed only then;
4. **packs** the finished blocks and the states of those stopped into ``--out``
   (``blocks.json``, ``blocks.tar.NNN``, ``allocation.json``: the report, rewritten as it goes).

An allocation that ends without packing (killed, or the machine stopped under it) named in
its report, after every job, what it had finished and the state of the job running; the next
``start`` or ``stop`` packs it (``neurd.publication.allocation.background.pack_left``: the jobs it
left running
killed first), as its own stop would have, and ``start`` then refuses until it is published.
"""

from __future__ import annotations

import argparse

from neurd.publication.allocation.background import Places, start, status, stop
from neurd.publication.allocation.cpu import CHECKPOINT_MINUTES, background
from neurd.publication.allocation.places import ROOT


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m neurd.publication.allocation cpu",
                                     description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="mode", required=True)
    for mode, text in (("start", "start an allocation in the background"),
                       ("status", "what the allocation does, or what the last one left"),
                       ("stop", "stop the running allocation now and pack what it made"),
                       ("run", "the background process itself (start runs it)")):
        p = sub.add_parser(mode, help=text)
        p.add_argument("--results", default="results/paper",
                       help="config/neural.json and neural/<game>/game.npz (make paper-inputs)")
        p.add_argument("--publication", default="published/paper",
                       help="the publication whose seeds are done")
        p.add_argument("--work", default="results/paper/cpu-allocation",
                       help="the lock, the log, the copy of the code and the jobs' folders")
        p.add_argument("--out", default="results/paper/cpu-allocation-out",
                       help="the pack (make publish-blocks FROM=...)")
        p.add_argument("--tables", default=str(ROOT / "bench" / "cpu"),
                       help="the processors' throughput tables (bench/cpu; commit them)")
        if mode == "start":
            p.add_argument("--code", choices=("head", "tree"), default="head",
                           help="the code run: the commit checked out (head), or the working "
                                "tree as it is (tree: for trying changes; recorded as such)")
        if mode in ("start", "run"):
            p.add_argument("--minutes", type=float, required=True,
                           help="the allocation's length, packing included")
            p.add_argument("--checkpoint-minutes", type=float, default=CHECKPOINT_MINUTES,
                           help="how often a job saves its state: what a kill loses at most")
        if mode == "run":
            p.add_argument("--ends", type=float, required=True, help="its end (epoch seconds)")
    return parser


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    places = Places(args)
    if args.mode == "start":
        return start(args, places)
    if args.mode == "status":
        return status(places)
    if args.mode == "stop":
        return stop(places)
    return background(args, places)
