"""A published Fig 6: neural runs shipped in the repository, a seed block at a time.

The paper-scale Fig 6 takes a GPU; it arrives in **seed blocks** (a game's
runs of seeds ``first..last`` with one critic, every algorithm and entropy
level: :func:`neurd.neural.runs.block_plan`), computed in short GPU
allocations and published here as they come, so the publication is valid, and
drawn by ``make figures``, at every size from no block to every seed.  Its
layout::

    manifest.json          format, config hash, per game its blocks and seeds, and every
                           file's SHA-256 and size
    README.md              what the folder holds, written with it
    config/neural.json     the neural config snapshot every block was computed from
    neural/<game>/blocks/<critic>_s<first>-<last>/
        curves.parquet     the block's job curves, byte for byte as ``neurd neural-run``
                           wrote them (NashConv and diagnostics at every checkpoint)
        policies.parquet   the end-of-phase policies of each algorithm's best entropy
                           level within the block (lowest mean final NashConv of its seeds)
        provenance.json    seeds, batches, game string and content hash, and every piece
                           of compute (device, driver, jax, revision, wall seconds,
                           configuration-iterations per second), from the curves' metadata
    neural/<game>/summary.parquet, nashconv_ci.parquet
                           derived from every block's curves (main critic): per run final
                           and average NashConv, and the bootstrap CI over the seeds there

A publication is written only whole (:mod:`~neurd.publication.writer`):
:func:`add_blocks` (and :func:`publish_run`, :func:`init`) build the new one in
a folder beside it, check it as every reader will, and swap it in with two
renames; an interrupted swap is undone by the next writer.  Nothing in it is
trusted for its hashes alone:

* :func:`check` (:mod:`~neurd.publication.integrity`; every reader, when a
  config is validated): the manifest's fields, every listed file inside the
  folder, a regular file (no links), of its size and SHA-256, nothing
  unlisted, the caps (files, bytes), the config snapshot (and, given the
  config it should be, not stale);
* :func:`check_content` (:mod:`~neurd.publication.content`;
  ``published-check``, the job that draws it): every block's tables --
  schema, the config and game they are of, one row per (algorithm, entropy,
  seed, checkpoint) over the whole grid, values finite and in range,
  probabilities summing to 1, the kept entropy levels the block's best, the
  provenance what the curves record --, whole seeds, no seed in two blocks,
  and the derived tables recomputed and equal;
* :func:`reproduce` (:mod:`~neurd.publication.reproduce`;
  ``published-reproduce``): each block's first learning cycles run again
  here, and :func:`phase_end_nash_conv`: the exact NashConv of the published
  policies at each phase end, against the published values.

The layout's names and the manifest are :mod:`~neurd.publication.manifest`'s;
this package gathers the names its callers use.

The package is the publication's whole machinery, each part a module of its own:
:mod:`~neurd.publication.intake` (an incoming block's first cycles replayed, its phase-end
NashConv recomputed), :mod:`~neurd.publication.resume_states` (blocks in progress),
:mod:`~neurd.publication.packs` (files carried between machines, verified whole before use),
:mod:`~neurd.publication.costs`, :mod:`~neurd.publication.gpu_schedule` and
:mod:`~neurd.publication.cpu_schedule` (what a block costs, and which blocks a GPU's or a
CPU's allocation runs), :mod:`~neurd.publication.allocation` (the allocations themselves:
``python -m neurd.publication.allocation gpu|cpu``), :mod:`~neurd.publication.commands`
(``neurd publish`` and ``neurd published-*``) and :mod:`~neurd.publication.findings` (a
publication's Fig 6 claims written into docs/findings.md).  Its faces are those two command
lines and the names below; the modules above this one's floor (the schedules, the
allocations, the commands, the findings) are imported by their own names, never from here.
"""

from __future__ import annotations

from neurd.publication.content import (
    DERIVED_TOLERANCE,
    block_provenance,
    check_content,
    check_state,
    compiled_games,
    derived_tables,
    fig6_tables,
)
from neurd.publication.intake import AGREEMENT_CYCLES, AGREEMENT_NASH_CONV, PHASE_END_TOLERANCE
from neurd.publication.integrity import check
from neurd.publication.manifest import (
    BLOCK_FILES,
    CONFIG,
    DERIVED,
    FORMAT,
    MANIFEST,
    MAX_BYTES,
    MAX_FILE_BYTES,
    MAX_FILES,
    VERSION,
    PublicationError,
    block_folder,
    derived_files,
    differences,
    interrupted,
    published_games,
    read_manifest,
    sha256,
    stale_keys,
)
from neurd.publication.reproduce import block_job, phase_end_nash_conv, replay_state, reproduce
from neurd.publication.writer import BlockSource, add_blocks, derive_again, init, publish_run

__all__ = [
    "AGREEMENT_CYCLES", "AGREEMENT_NASH_CONV", "BLOCK_FILES", "CONFIG", "DERIVED",
    "DERIVED_TOLERANCE", "FORMAT", "MANIFEST", "MAX_BYTES", "MAX_FILES", "MAX_FILE_BYTES",
    "PHASE_END_TOLERANCE", "VERSION", "BlockSource", "PublicationError", "add_blocks",
    "block_folder", "block_job", "block_provenance", "check", "check_content", "check_state",
    "compiled_games", "derive_again", "derived_files", "derived_tables", "differences",
    "fig6_tables", "init", "interrupted", "phase_end_nash_conv", "publish_run", "published_games",
    "read_manifest", "replay_state", "reproduce", "sha256", "stale_keys",
]
