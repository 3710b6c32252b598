"""A GPU (or CPU) allocation's work for the paper-scale Fig 6, as a package of concerns.

``bench/gpu_allocation.py`` is its command line (:mod:`allocating.cli`) and
``bench/cpu_allocation.py`` the background CPU allocation, which uses the
same blocks, packs and report.  One module per concern:

* :mod:`allocating.places`: where the trees and the entry script are, and the
  environment of every process the allocation starts (built by
  :func:`neurd.neural.environment.job_environment`, the one place);
* :mod:`allocating.report`: ``allocation.json``, rewritten at every step, the
  console's lines, and the throughput's Markdown table;
* :mod:`allocating.processes`: processes run at once within a deadline;
* :mod:`allocating.checks`: the device's check and the cycle variants';
* :mod:`allocating.measurement`: the throughput table and its timing workers;
* :mod:`allocating.blocks`: the publication's progress (read through
  :func:`neurd.publication.read_manifest`) and the planned blocks run;
* :mod:`allocating.packs`: the finished blocks and the profile packed to come back;
* :mod:`allocating.cli`: the steps in order, and the command line.

Nothing here imports ``neurd`` at module level: a timing worker imports the
package from the tree its ``PYTHONPATH`` names (this one, or a ``--baseline``
tree it times).
"""
