"""Blocks in progress: a seed block stopped by the end of a GPU allocation, carried to the next.

A seed block of the paper-scale Fig 6 (:func:`neurd.neural.runs.block_plan`)
may take longer than one allocation.  Its job then stops at a checkpoint row and
saves its whole state (``neurd neural-run --checkpoint ... --stop-after-minutes``:
the networks' weights, the curves measured so far and the record of every piece
of compute; :mod:`neurd.neural.experiment`), the state comes back in the
allocation's pack, and it is published as the game's **block in progress**::

    neural/<game>/in-progress/<critic>_s<first>-<last>/
        meta.json           the state's index: identity (config hash, game, critic,
                            game content hash, seeds), the checkpoint row it resumes at,
                            every piece of compute (device, revision, seconds), every
                            part's SHA-256 and a digest of itself
        part-<g>-<k>.npz    the arrays, at most 16 MiB a file

A block in progress is listed in the manifest (``games.<game>.in_progress``) and
the publication's README, never drawn and never counted among the seeds.  The
next allocation copies it into its job's checkpoint folder and resumes it: the
block that finishes is the block an uninterrupted run on the same device gives,
bit for bit (the job's checkpoints guarantee it, and tests check it).

Before a state is published it is checked as strictly as a block
(:func:`check`): made from this config (its hash) on this game (its string and
the content hash of the game compiled here), of the seeds its name says, every
array of the job's dtype and shape and finite, the curves measured exactly up to
the row it resumes at, the pieces following one another up to that iteration,
every part of its size and SHA-256.  Nothing that does not check is published.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neurd import games
from neurd.neural.runs import block_plan, check_block, critics, parse_block
from neurd.tables import config_hash

IN_PROGRESS = "in-progress"
STATE_FILE = re.compile(r"meta\.json|part-\d{1,6}-\d{1,6}\.npz")
# What the repository gains for one seed of a finished block, per row of its tables (upper
# bounds: a curves row holds 8 floating-point values and 7 keys, a policies row one
# probability and 8 keys, which Parquet stores dictionary-encoded)
CURVES_ROW_BYTES = 80
POLICY_ROW_BYTES = 24


@dataclass(frozen=True)
class StateSource:
    """A block in progress to publish: its game, block name and the folder of its state."""

    game: str
    name: str
    folder: Path


def state_folder(game: str, name: str) -> str:
    """Where a publication keeps the state of ``game``'s block in progress ``name``."""
    return f"neural/{game}/{IN_PROGRESS}/{name}"


def identity(cfg: Mapping, game: str, name: str, game_hash: str) -> dict:
    """What ``neurd neural-run --seeds`` records as the identity of a block's state."""
    critic, first, last = parse_block(name)
    return {"config_hash": config_hash(cfg), "game": game, "critic": critic,
            "game_hash": game_hash, "seeds": [first, last]}


def state_files(folder: str | os.PathLike) -> list[str]:
    """The files of the state in ``folder``: ``meta.json`` and the parts it names (each a
    plain file name of a part); ValueError naming the file if ``meta.json`` says otherwise."""
    path = Path(folder) / "meta.json"
    try:
        parts = json.loads(path.read_text())["parts"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(f"{path} cannot be read as a saved state's index ({error})") from None
    if not (isinstance(parts, list) and all(isinstance(p, str) and STATE_FILE.fullmatch(p)
                                            and p != "meta.json" for p in parts)):
        raise ValueError(f"{path}: parts is not a list of part file names")
    return ["meta.json", *parts]


def check(cfg: Mapping, game: str, name: str, folder: str | os.PathLike, compiled) -> dict:
    """Check the state of ``game``'s block ``name`` in ``folder`` (see the module); return
    ``{"next_row", "iteration", "iterations", "rows", "pieces"}``, else raise ValueError
    naming the file and what is wrong."""
    from neurd.neural.experiment import check_consistent_state  # puts off JAX

    critic, first, last = parse_block(name)
    check_block(cfg, game, critic, first, last)
    files = state_files(folder)
    stray = sorted(p.name for p in Path(folder).iterdir()
                   if p.name not in files and STATE_FILE.fullmatch(p.name))
    if stray:
        raise ValueError(f"{Path(folder) / stray[0]} is not a part of the state its meta.json "
                         "describes")
    info = check_consistent_state(compiled, block_plan(cfg, game, critic, first, last),
                                  identity(cfg, game, name, games.content_hash(compiled)),
                                  folder)
    if info["next_row"] == 0:
        raise ValueError(f"{Path(folder) / 'meta.json'}: the state holds no learning cycle "
                         "yet: nothing to resume")
    return info


def copy_state(source: str | os.PathLike, target: str | os.PathLike) -> list[str]:
    """Copy the state's files (``meta.json`` and its parts, nothing else) from ``source`` into
    a new folder ``target``; return their names."""
    files = state_files(source)
    Path(target).mkdir(parents=True, exist_ok=True)
    for name in files:
        shutil.copyfile(Path(source) / name, Path(target) / name)
    return files


def to_checkpoint(source: str | os.PathLike, target: str | os.PathLike) -> list[str]:
    """Make ``target`` the job checkpoint folder of the state in ``source`` (its files, and the
    marker that makes the folder the job's): ``neurd neural-run --checkpoint target`` then
    resumes the block where the state stopped."""
    from neurd.neural.experiment import CHECKPOINT_FORMAT, MARKER  # puts off JAX

    files = copy_state(source, target)
    (Path(target) / MARKER).write_text(f"{CHECKPOINT_FORMAT}: a published block in progress, "
                                       "resumed by neurd neural-run\n")
    return files


def describe(info: Mapping) -> str:
    """A state's progress in words, for the publication's README."""
    share = info["iteration"] / max(info["iterations"], 1)
    devices = sorted({str(p.get("device")) for p in info["pieces"]})
    return (f"iteration {info['iteration']} of {info['iterations']} ({100 * share:.0f}%), "
            f"{len(info['pieces'])} piece(s) on {', '.join(devices)}")


def bytes_per_seed(cfg: Mapping, game: str, compiled) -> tuple[float, float]:
    """``(block, state)``: bytes the repository gains per seed of ``game`` for a finished
    block (its tables, upper bounds: :data:`CURVES_ROW_BYTES`, ...) and for each commit of a
    block-in-progress state (exactly: the job's state arrays at their largest, before the last
    phase's end, for a one-seed block; the arrays grow linearly with the seeds)."""
    import jax

    from neurd.neural.experiment import job_template  # puts off JAX

    plan = block_plan(cfg, game, critics(cfg, game)[0], 0, 0)
    configurations = len(plan.configurations)
    states, iterations, _ = job_template(compiled, plan)
    leaves = sum(int(np.prod(x.shape)) * np.dtype(x.dtype).itemsize
                 for x in jax.tree_util.tree_leaves(states))
    rows = len(iterations)
    legal = int(np.asarray(compiled.infostate_legal).sum())
    # a state holds the policies of every phase ended but the last (at its end, the job ends)
    results = (6 * rows * configurations * 8 + (plan.phases - 1) * configurations * legal * 4
               + rows * len(plan.logged) * legal * 8)
    state = leaves + results
    curves = len(critics(cfg, game)) * configurations * rows * CURVES_ROW_BYTES
    policies = len(cfg["algorithms"]) * plan.phases * legal * POLICY_ROW_BYTES
    return float(curves + policies), float(state)
