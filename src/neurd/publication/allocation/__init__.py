"""The allocations that compute a publication's seed blocks: a GPU's short one and a CPU's in
the background, as a package of concerns.

``python -m neurd.publication.allocation gpu|cpu`` is their command line (:mod:`.__main__`;
``make gpu-allocation``, ``make cpu-allocation``).  What each allocation runs is scheduled
below this package (:mod:`neurd.publication.gpu_schedule`, :mod:`neurd.publication.cpu_schedule`,
priced by :mod:`neurd.publication.costs`); what it packs is published by ``neurd published-add``
(:mod:`neurd.publication.commands`).  One module per concern:

* :mod:`.places`: where the trees and the timing workers' file are, and the environment of
  every process the allocation starts (built by
  :func:`neurd.neural.environment.job_environment`, the one place);
* :mod:`.report`: ``allocation.json``, rewritten at every step, the console's lines, and the
  throughput's Markdown table;
* :mod:`.processes`: processes run at once within a deadline;
* :mod:`.timing`: the timing workers, started as a file in the tree they time;
* :mod:`.device_check`: the GPU check (``make gpu-check``), whose cycles and comparison the
  allocation's device check runs;
* :mod:`.checks`: the device's check and the cycle variants';
* :mod:`.measurement`: the throughput table, timed by :mod:`.timing`'s workers;
* :mod:`.blocks`: the publication's progress (read through
  :func:`neurd.publication.read_manifest`) and the planned blocks run;
* :mod:`.packing`: the finished blocks, the states kept and the profile packed to come back;
* :mod:`.gpu`: a GPU allocation's steps in order, and its command line;
* :mod:`.state`, :mod:`.recovery`, :mod:`.background`, :mod:`.cpu`, :mod:`.cpu_cli`: a
  background CPU allocation's lock and report, what a crashed one left, its start, status and
  stop, its run, and its command line.
"""
