"""A published Fig 6: neural runs shipped in the repository, a seed block at a time.

The paper-scale Fig 6 takes a GPU; it arrives in **seed blocks** (a game's
runs of seeds ``first..last`` with one critic, every algorithm and entropy
level: :func:`neurd.pipeline.neural.block_plan`), computed in short GPU
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

A publication is written only whole: :func:`add_blocks` (and :func:`publish_run`,
:func:`init`) build the new one in a folder beside it, check it as every reader
will, and swap it in with two renames; an interrupted swap is undone by the
next writer.  Nothing in it is trusted for its hashes alone:

* :func:`check` (every reader, when a config is validated): the manifest's
  fields, every listed file inside the folder, a regular file (no links), of
  its size and SHA-256, nothing unlisted, the caps (files, bytes), the config
  snapshot (and, given the config it should be, not stale);
* :func:`check_content` (``published-check``, the job that draws it): every
  block's tables -- schema, the config and game they are of, one row per
  (algorithm, entropy, seed, checkpoint) over the whole grid, values finite and
  in range, probabilities summing to 1, the kept entropy levels the block's
  best, the provenance what the curves record --, whole seeds, no seed in two
  blocks, and the derived tables recomputed and equal;
* :func:`reproduce` (``published-reproduce``): each block's first learning
  cycles run again here, and :func:`phase_end_nash_conv`: the exact NashConv of
  the published policies at each phase end, against the published values.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import numpy as np
import pandas as pd

from neurd import games as game_files
from neurd import intake, resume_states
from neurd.config import load_snapshot
from neurd.figures.fig6 import best_entropies
from neurd.intake import AGREEMENT_CYCLES, AGREEMENT_NASH_CONV, PHASE_END_TOLERANCE  # noqa: F401
from neurd.pipeline.neural import (
    CI_COLUMNS,
    CURVES_COLUMNS,
    DIAGNOSTIC_COLUMNS,
    NASHCONV_COLUMNS,
    POLICY_COLUMNS,
    SUMMARY_COLUMNS,
    block_name,
    check_block,
    check_job_table,
    ci_table,
    critics,
    jobs,
    main_critic,
    parse_block,
    seed_chunks,
    summary_table,
    uniform_nash_conv,
)
from neurd.tables import (
    canonical_json,
    config_hash,
    read_metadata,
    read_table,
    write_json,
    write_table,
    write_text,
)

log = logging.getLogger(__name__)

FORMAT = "neurd-publication"
VERSION = 2  # 2: seed blocks
MANIFEST = "manifest.json"
CONFIG = "config/neural.json"
BLOCK_FILES = ("curves.parquet", "policies.parquet", "provenance.json")
DERIVED = {"summary": SUMMARY_COLUMNS, "nashconv_ci": CI_COLUMNS}
MAX_BYTES = 60 * 2**20  # the whole folder (the repository ships it)
MAX_FILE_BYTES = 16 * 2**20
MAX_FILES = 3000
# a derived table recomputed on another machine may differ in the last bits of a float
DERIVED_TOLERANCE = 1e-9
_HEX16 = re.compile(r"[0-9a-f]{16}")
_HEX64 = re.compile(r"[0-9a-f]{64}")


class PublicationError(ValueError):
    """A publication that cannot be made or read as it is; the message names the file."""


@dataclass(frozen=True)
class BlockSource:
    """A finished block to publish: its game and its job's two tables."""

    game: str
    curves: Path
    policies: Path


def block_folder(game: str, name: str) -> str:
    return f"neural/{game}/blocks/{name}"


def derived_files(game: str) -> list[str]:
    return [f"neural/{game}/{name}.parquet" for name in DERIVED]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def differences(old, new, path: str = "neural") -> list[str]:
    """The dotted keys where two config snapshots differ, with both values."""
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        return [d for key in sorted(set(old) | set(new), key=str)
                for d in differences(old.get(key, "<absent>"), new.get(key, "<absent>"),
                                     f"{path}.{key}")]
    return [] if canonical_json(old) == canonical_json(new) else [
        f"{path}: {canonical_json(old)} -> {canonical_json(new)}"]


def stale_keys(published: Mapping, expected: Mapping, defaults: Mapping) -> list[str]:
    """Where a publication's neural snapshot is not the config ``expected`` (empty: it is).

    Every key must have the same value, except a key the publication lacks that is at its
    schema default (``defaults``) now: a key added since it was made.  A new key's default
    is the behaviour before it, bit for bit (the rule every reading key follows), so the
    publication is still that config's run; a key set otherwise, changed or removed makes it
    stale.
    """
    added = {key for key in set(expected) - set(published)
             if key in defaults and canonical_json(expected[key]) == canonical_json(defaults[key])}
    return differences(published, {k: v for k, v in expected.items() if k not in added})


# --- the manifest ---------------------------------------------------------------------------


_VERBS = ("is ", "holds ", "has ", "lists ", "records ", "was ", "cannot ")


def _fail(path, message: str):
    """Refuse, naming ``path``: ``<path> is ...`` for what the file is, ``<path>: ...`` for
    what one of its parts is."""
    raise PublicationError(f"{path}{' ' if message.startswith(_VERBS) else ': '}{message}")


def _read_manifest(folder: Path) -> dict | None:
    """The manifest of ``folder``, its fields checked; None if there is none."""
    path = folder / MANIFEST
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_symlink() or not path.is_file():
        _fail(path, "is not a regular file")
    if path.stat().st_size > 4 * 2**20:
        _fail(path, f"is {path.stat().st_size} bytes, too large for a manifest")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        _fail(path, f"cannot be read ({error})")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        _fail(path, f"is not a publication's manifest (format {FORMAT!r})")
    if manifest.get("version") != VERSION:
        _fail(path, f"publication format version {manifest.get('version')!r}, this code reads "
                    f"version {VERSION}: publish it again (with --replace)")
    if not (isinstance(manifest.get("config_hash"), str)
            and _HEX16.fullmatch(manifest["config_hash"])):
        _fail(path, "config_hash is not 16 hex digits")
    files = manifest.get("files")
    if not isinstance(files, dict) or len(files) > MAX_FILES:
        _fail(path, f"files is not a mapping of at most {MAX_FILES} paths")
    for relative, entry in files.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
                and _HEX64.fullmatch(entry["sha256"]) and type(entry.get("bytes")) is int
                and 0 <= entry["bytes"] <= MAX_FILE_BYTES):
            _fail(path, f"files[{relative!r}] is not a record of sha256 and bytes (at most "
                        f"{MAX_FILE_BYTES})")
        pure = PurePosixPath(relative)
        if (not relative or pure.is_absolute() or ".." in pure.parts or "\\" in relative
                or pure.as_posix() != relative or relative == MANIFEST):
            _fail(path, f"lists {relative!r}, which is not a plain path inside the folder")
    publications = manifest.get("games")
    if not isinstance(publications, dict):
        _fail(path, "games is not a mapping")
    for game, entry in publications.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("blocks"), list)
                and all(isinstance(b, str) for b in entry["blocks"])
                and isinstance(entry.get("seeds"), list)
                and all(type(s) is int for s in entry["seeds"])):
            _fail(path, f"games[{game!r}] is not a record of blocks and seeds")
        in_progress = entry.get("in_progress", [])
        if not (isinstance(in_progress, list) and all(isinstance(b, str) for b in in_progress)):
            _fail(path, f"games[{game!r}].in_progress is not a list of block names")
        for name in entry["blocks"] + in_progress:
            try:
                parse_block(name)
            except ValueError as error:
                _fail(path, f"games[{game!r}]: {error}")
    history = manifest.get("history_bytes", 0)
    if type(history) is not int or history < 0:
        _fail(path, "history_bytes is not a number of bytes")
    if type(manifest.get("bytes")) is not int:
        _fail(path, "bytes is not a number of bytes")
    return manifest


def published_games(folder: str | os.PathLike) -> list[str]:
    """The games with at least one block in a publication (none if there is no publication)."""
    manifest = _read_manifest(Path(folder))
    return [] if manifest is None else [g for g, e in manifest["games"].items() if e["blocks"]]


def interrupted(folder: Path) -> list[Path]:
    """What an interrupted write left beside ``folder`` (its build and its previous state)."""
    return sorted(folder.parent.glob(f".{folder.name}.new-*")) + sorted(
        folder.parent.glob(f".{folder.name}.old-*"))


# --- the check every reader makes ----------------------------------------------------------


def check(folder: str | os.PathLike, expected: Mapping | None = None,
          expected_from: str = "", defaults: Mapping | None = None) -> tuple[dict, dict]:
    """``(manifest, config)`` of the publication in ``folder``, checked; else
    :class:`PublicationError` naming the file and what is wrong.

    The folder is a folder (not a link) holding a well-formed manifest; every
    file it lists is inside it, a regular file reached through no link, of its
    listed size and SHA-256; it holds no other file; the caps on files and
    bytes hold (counted on disk, not from the manifest); the config snapshot has
    the manifest's hash and is, given ``expected`` (the neural snapshot the
    publication should be of, read from ``expected_from``), that config
    (:func:`stale_keys`, with the neural schema's ``defaults``); every game is
    the config's with its files listed and whole, disjoint seed blocks.  The
    tables' content is :func:`check_content`'s.
    """
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        left = interrupted(folder)
        raise PublicationError(
            f"{folder} is not a folder" + (f" (an interrupted publish left {left[0].name} "
                                           "beside it: run the publish again to restore it)"
                                           if left else ""))
    manifest = _read_manifest(folder)
    if manifest is None:
        raise PublicationError(f"{folder}/{MANIFEST} is missing: {folder} is not a publication")
    files = manifest["files"]
    on_disk, total = [], 0
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_symlink():
            _fail(path, "is a link: a publication holds only regular files")
        if path.is_dir():
            continue
        if not path.is_file():
            _fail(path, "is not a regular file")
        if relative != MANIFEST:
            on_disk.append(relative)
        total += path.stat().st_size
        if len(on_disk) > MAX_FILES:
            _fail(folder, f"holds more than {MAX_FILES} files")
    if total > MAX_BYTES:
        _fail(folder, f"holds {total / 2**20:.1f} MiB, more than {MAX_BYTES / 2**20:.0f} MiB")
    for relative, entry in files.items():
        path = folder / relative
        if not path.is_file():
            _fail(path, f"is missing (listed in {folder}/{MANIFEST})")
        size = path.stat().st_size
        if size != entry["bytes"] or size > MAX_FILE_BYTES:
            _fail(path, f"is {size} bytes, the manifest says {entry['bytes']}")
        if _sha256(path) != entry["sha256"]:
            _fail(path, "is not the file that was published (SHA-256 differs from the "
                        "manifest's): restore it from git")
    if CONFIG not in files:
        _fail(folder / CONFIG, "is not in the manifest")
    try:
        cfg = load_snapshot(folder / CONFIG)
    except (OSError, ValueError) as error:
        _fail(folder / CONFIG, f"cannot be read ({error})")
    if not isinstance(cfg, dict) or not {"games", "game_strings", "seeds"} <= set(cfg):
        _fail(folder / CONFIG, "is not a neural config snapshot")
    digest = config_hash(cfg)
    if digest != manifest["config_hash"]:
        _fail(folder / CONFIG, f"has hash {digest}, the manifest says {manifest['config_hash']}")
    stale = [] if expected is None else stale_keys(cfg, expected, defaults or {})
    if stale:
        raise PublicationError(
            f"{folder} is stale: it was made from a neural config (hash {digest}) other than "
            f"the one {expected_from or 'expected'} gives now (hash {config_hash(expected)}): "
            + "; ".join(stale[:8])
            + ". Make it again (its blocks on a GPU, then `neurd published-add`), or set "
            "published.folder to null to draw none")
    stray = sorted(set(on_disk) - set(files))  # after staleness: another config's is named so
    if stray:
        _fail(folder / stray[0], "is not in the manifest: a publication holds only what "
                                 "neurd wrote")
    listed = {MANIFEST, CONFIG, "README.md"}
    for game, entry in manifest["games"].items():
        where = f"{folder}/{MANIFEST}: games[{game!r}]"
        if game not in cfg["games"]:
            raise PublicationError(f"{where} is not a game of its config ({cfg['games']})")
        seeds = _block_seeds(cfg, game, entry["blocks"], where)
        if sorted(seeds) != entry["seeds"]:
            raise PublicationError(f"{where}: seeds {entry['seeds']} are not its blocks' "
                                   f"{sorted(seeds)}")
        wanted = [f"{block_folder(game, b)}/{f}" for b in entry["blocks"] for f in BLOCK_FILES]
        wanted += derived_files(game) if entry["blocks"] else []
        in_progress = entry.get("in_progress", [])
        _check_in_progress(cfg, game, entry["blocks"], in_progress, where)
        wanted += [f"{resume_states.state_folder(game, b)}/meta.json" for b in in_progress]
        for relative in wanted:
            if relative not in files:
                raise PublicationError(f"{folder}/{relative} is not in the manifest")
        listed.update(wanted)
        listed.update(r for r in files for b in in_progress
                      if PurePosixPath(r).parent.as_posix() == resume_states.state_folder(game, b)
                      and resume_states.STATE_FILE.fullmatch(PurePosixPath(r).name))
    extra = sorted(set(files) - listed)
    if extra:
        _fail(folder / extra[0], "is listed but is no file of a publication")
    return manifest, cfg


def _check_in_progress(cfg: Mapping, game: str, blocks: list[str], in_progress: list[str],
                       where: str) -> None:
    """Blocks in progress are of the config, and share no seed with a block of their critic,
    finished or in progress."""
    for k, name in enumerate(in_progress):
        critic, first, last = parse_block(name)
        try:
            check_block(cfg, game, critic, first, last)
        except ValueError as error:
            raise PublicationError(f"{where}: block in progress {name}: {error}") from None
        for other in blocks + in_progress[:k]:
            o_critic, o_first, o_last = parse_block(other)
            if o_critic == critic and first <= o_last and o_first <= last:
                raise PublicationError(f"{where}: the block in progress {name} overlaps "
                                       f"{other}")


def _block_seeds(cfg: Mapping, game: str, blocks: list[str], where: str) -> list[int]:
    """The seeds the blocks publish (whole for every critic of the game); refuses blocks off
    the config, a seed in two blocks of one critic, or a seed without every critic."""
    by_critic: dict[str, list[int]] = {c: [] for c in critics(cfg, game)}
    for name in blocks:
        critic, first, last = parse_block(name)
        try:
            check_block(cfg, game, critic, first, last)
        except ValueError as error:
            raise PublicationError(f"{where}: block {name}: {error}") from None
        by_critic[critic] += range(first, last + 1)
    for critic, seeds in by_critic.items():
        if len(set(seeds)) != len(seeds):
            twice = sorted({s for s in seeds if seeds.count(s) > 1})
            raise PublicationError(f"{where}: seeds {twice[:5]} are in two {critic} blocks")
    sets = {c: set(s) for c, s in by_critic.items()}
    main = sets[main_critic(cfg)]
    for critic, seeds in sets.items():
        if seeds != main:
            raise PublicationError(f"{where}: the {critic} critic's blocks have seeds "
                                   f"{sorted(seeds)[:10]}, the {main_critic(cfg)} critic's "
                                   f"{sorted(main)[:10]}: a seed is published with every "
                                   "critic of its game")
    return sorted(main)


# --- what a block's tables must be ---------------------------------------------------------


def _schedule(cfg: Mapping, game: str) -> tuple[np.ndarray, np.ndarray]:
    from neurd.neural.experiment import checkpoint_grid  # puts off JAX

    return checkpoint_grid(int(cfg["phase_iterations"][game]), int(cfg["phases"]),
                           int(cfg["checkpoints"]["geometric"]),
                           int(cfg["checkpoints"]["linear"]),
                           int(cfg["critic_updates_per_policy_update"]))


def _grid_problems(frame: pd.DataFrame, runs: set, schedule: set, what: str) -> list[str]:
    """What keeps ``frame`` from having one row per run of ``runs`` at every point of
    ``schedule`` (the (iteration, phase) pairs)."""
    keys = ["algorithm", "entropy", "seed", "iteration", "phase"]
    if frame.duplicated(keys).any():
        row = frame[frame.duplicated(keys, keep=False)].iloc[0]
        return [f"{what}: two rows for {tuple(row[k] for k in keys)}"]
    found = {(a, float(e), int(s)): set(zip(r.iteration.tolist(), r.phase.tolist()))
             for (a, e, s), r in frame.groupby(["algorithm", "entropy", "seed"])}
    problems = []
    missing, extra = sorted(runs - set(found)), sorted(set(found) - runs)
    if missing:
        problems.append(f"{what}: {len(missing)} of {len(runs)} runs missing, e.g. {missing[0]}")
    if extra:
        problems.append(f"{what}: {len(extra)} runs the block does not make, e.g. {extra[0]}")
    short = sorted(k for k, points in found.items() if k in runs and points != schedule)
    if short:
        problems.append(f"{what}: {len(short)} runs not exactly at the checkpoints, e.g. "
                        f"{short[0]} at {len(found[short[0]] & schedule)} of {len(schedule)}")
    return problems


def _range_problems(frame: pd.DataFrame, critic: str, ratio: int, cfg: Mapping) -> list[str]:
    """Values out of their range in a block's curves (NaN only where the job writes NaN)."""
    problems = []
    start = frame.iteration.to_numpy() == 0

    def bad(column, ok, allowed_nan=None):
        values = frame[column].to_numpy(dtype=float)
        nan = np.isnan(values)
        expected_nan = np.zeros(len(values), bool) if allowed_nan is None else allowed_nan
        wrong = (nan != expected_nan) | (~nan & ~ok(np.where(nan, 0.0, values)))
        if wrong.any():
            i = int(np.flatnonzero(wrong)[0])
            problems.append(f"{column} = {float(values[i])!r} at {frame.algorithm.iloc[i]}, "
                            f"entropy {frame.entropy.iloc[i]}, seed {frame.seed.iloc[i]}, "
                            f"iteration {frame.iteration.iloc[i]} is out of its range")

    actions = 64.0
    bad("nash_conv", lambda v: np.isfinite(v) & (v >= -1e-9))
    bad("critic_rmse", lambda v: np.isfinite(v) & (v >= 0),
        np.ones(len(frame), bool) if critic == "exact" else None)
    bad("threshold_blocked", lambda v: (v >= 0) & (v <= 1), start)
    bad("critic_loss", lambda v: np.isfinite(v) & (v >= 0), start)
    bad("policy_entropy", lambda v: (v >= -1e-9) & (v <= math.log(actions)))
    bad("at_threshold", lambda v: (v >= 0) & (v <= 1))
    iterations = frame.iteration.to_numpy()
    if not np.array_equal(frame.policy_updates.to_numpy(), iterations // ratio):
        problems.append("policy_updates is not iteration / critic updates per policy update")
    updates = iterations // ratio
    expected = iterations * int(cfg["critic_batch"]) + updates * int(cfg["policy_batch"])
    if not np.array_equal(frame.trajectories.to_numpy(), expected):
        problems.append("trajectories is not the episodes the schedule samples")
    return problems


def block_provenance(game: str, name: str, meta: Mapping) -> dict:
    """A block's ``provenance.json``: what its curves' metadata records, nothing else."""
    pieces = list(meta.get("pieces", []))
    seconds = sum(float(p.get("seconds", 0.0)) for p in pieces)
    iterations = sum(int(p.get("iterations", 0)) for p in pieces)
    batches = meta.get("batches", [])
    return {
        "game": game, "block": name, "critic": meta.get("critic"),
        "seeds": meta.get("run_seeds"), "batches": batches,
        "configurations_per_batch": sorted({len(b) for b in batches}),
        "game_string": meta.get("game_string"), "game_hash": meta.get("game_hash"),
        "config_hash": meta.get("config_hash"),
        "devices": sorted({f"{p.get('device')}" + (f" (driver {p['driver']})" if "driver" in p
                                                   else "") for p in pieces}),
        "revisions": sorted({str(p.get("revision")) for p in pieces}),
        # the cycle variants the pieces ran (pieces recorded before variants have none)
        **({"variants": sorted({str(p.get("variant", "default")) for p in pieces})}
           if any("variant" in p for p in pieces) else {}),
        "compute_seconds": round(seconds, 3), "iterations": iterations, "pieces": pieces,
    }


def _check_curves(cfg: Mapping, game: str, name: str, path: Path) -> tuple[pd.DataFrame, dict]:
    """A block's curves and their metadata, checked (see :func:`check_content`)."""
    critic, first, last = parse_block(name)
    try:
        meta = check_job_table(path, cfg, game, critic)
    except ValueError as error:
        raise PublicationError(str(error)) from None
    seeds = list(range(first, last + 1))
    if meta.get("run_seeds") != seeds:
        _fail(path, f"holds run seeds {meta.get('run_seeds')}, the block {name} is {seeds}")
    batches = meta.get("batches")
    if not (isinstance(batches, list) and sorted(s for b in batches for s in b) == seeds):
        _fail(path, f"batches {batches} do not partition the block's seeds")
    pieces = meta.get("pieces")
    from neurd.neural.experiment import PIECE_KEYS  # puts off JAX

    if not (isinstance(pieces, list) and pieces and all(
            isinstance(p, dict) and all(k in p for k in PIECE_KEYS) for p in pieces)):
        _fail(path, "records no piece of compute (device, jax, revision, seconds, ...)")
    if not (isinstance(meta.get("game_hash"), str) and _HEX16.fullmatch(meta["game_hash"])):
        _fail(path, "records no game content hash")
    frame = read_table(path)
    if list(frame.columns) != list(CURVES_COLUMNS):
        _fail(path, f"columns {list(frame.columns)}, a job's curves have "
                    f"{list(CURVES_COLUMNS)}")
    if not (frame.game == game).all() or not (frame.critic == critic).all():
        _fail(path, f"holds rows of another game or critic than {game} {critic}")
    iterations, phases = _schedule(cfg, game)
    runs = {(a, float(e), s) for a in cfg["algorithms"] for e in cfg["entropies"] for s in seeds}
    problems = _grid_problems(frame, runs, set(zip(iterations.tolist(), phases.tolist())),
                              "curves")
    problems += _range_problems(frame, critic, int(cfg["critic_updates_per_policy_update"]),
                                cfg)
    if problems:
        _fail(path, "; ".join(problems[:3]))
    return frame, meta


def _kept_levels(cfg: Mapping, game: str, curves: pd.DataFrame) -> dict[str, float]:
    """Each algorithm's best entropy level within a block (its curves, main critic)."""
    nashconv = curves[list(NASHCONV_COLUMNS)]
    return best_entropies(summary_table(cfg, nashconv), game)


def _check_policies(cfg: Mapping, game: str, path: Path, seeds: list[int],
                    levels: Mapping[str, float] | None, compiled) -> pd.DataFrame:
    """A block's policies: every run of ``levels`` (algorithm -> entropy; None: every
    level), every seed, phase and legal action, probabilities in [0, 1] summing to 1 over
    each state's legal actions."""
    try:
        check_job_table(path, cfg, game)
    except ValueError as error:
        raise PublicationError(str(error)) from None
    frame = read_table(path)
    if list(frame.columns) != list(POLICY_COLUMNS):
        _fail(path, f"columns {list(frame.columns)}, a policies table's are "
                    f"{list(POLICY_COLUMNS)}")
    pairs = ([(a, float(e)) for a in cfg["algorithms"] for e in cfg["entropies"]]
             if levels is None else [(a, float(e)) for a, e in levels.items()])
    phases = np.arange(1, int(cfg["phases"]) + 1)
    rows, cols = np.nonzero(compiled.infostate_legal)
    legal = pd.MultiIndex.from_arrays([compiled.infostate_string[rows].astype(object),
                                       cols.astype(np.int64)])
    expected = len(pairs) * len(seeds) * len(phases) * len(legal)
    keys = ["algorithm", "entropy", "seed", "phase", "infostate", "action"]
    if len(frame) != expected or frame.duplicated(keys).any():
        _fail(path, f"{len(frame)} rows, the block's policies are {expected} (one per run, "
                    "phase and legal action), none twice")
    if not expected:
        return frame
    have = set(zip(frame.algorithm, frame.entropy.astype(float), frame.seed.astype(int)))
    want = {(a, e, s) for a, e in pairs for s in seeds}
    if have != want:
        _fail(path, f"holds the runs {sorted(have - want)[:2]} instead of "
                    f"{sorted(want - have)[:2]}")
    if not pd.MultiIndex.from_arrays([frame.infostate, frame.action]).isin(legal).all():
        _fail(path, "holds an action that is not legal in its information state")
    if not set(frame.phase.unique()) == set(phases.tolist()) or not np.array_equal(
            frame.iteration.to_numpy(), frame.phase.to_numpy()
            * int(cfg["phase_iterations"][game])):
        _fail(path, "phases or iterations are not the phase ends")
    p = frame.probability.to_numpy(dtype=float)
    if not (np.all(np.isfinite(p)) and np.all(p >= 0) and np.all(p <= 1)):
        _fail(path, "holds probabilities that are not finite numbers in [0, 1]")
    sums = frame.groupby(["algorithm", "entropy", "seed", "phase", "infostate"]).probability.sum()
    if not np.allclose(sums.to_numpy(), 1.0, atol=1e-9, rtol=0):
        _fail(path, "holds a policy whose probabilities do not sum to 1 over the legal actions")
    return frame


# --- the content check ---------------------------------------------------------------------


def compiled_games(cfg: Mapping, given: Mapping | None = None,
                   names: Iterable[str] | None = None) -> dict:
    """The config's games (or those of ``names``) compiled (``given[game]``: a compiled game
    to use instead)."""
    out = {}
    for game in cfg["games"] if names is None else names:
        if given and game in given:
            out[game] = given[game]
        else:
            out[game] = game_files.compile_configured(game, cfg["game_strings"],
                                                      cfg.get("expected_infostates"), "neural")
    return out


def derived_tables(cfg: Mapping, game: str, curves: pd.DataFrame, compiled) -> dict:
    """A game's summary and CI over the seeds of its blocks' curves (main critic)."""
    order = ["algorithm", "entropy", "seed", "iteration", "phase"]
    main = curves[curves.critic == main_critic(cfg)].sort_values(order, kind="stable")
    nashconv = main[list(NASHCONV_COLUMNS)].reset_index(drop=True)
    uniform = uniform_nash_conv(compiled, int(cfg["phases"]))
    return {"summary": summary_table(cfg, nashconv),
            "nashconv_ci": ci_table(cfg, nashconv, uniform)}


def _same_table(path: Path, stored: pd.DataFrame, computed: pd.DataFrame) -> None:
    if list(stored.columns) != list(computed.columns) or len(stored) != len(computed):
        _fail(path, f"is not the table its blocks give ({len(stored)} rows, {len(computed)} "
                    "recomputed)")
    for column in stored.columns:
        a, b = stored[column].to_numpy(), computed[column].to_numpy()
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            same = np.allclose(a.astype(float), b.astype(float), rtol=DERIVED_TOLERANCE,
                               atol=DERIVED_TOLERANCE, equal_nan=True)
        else:
            same = np.array_equal(a, b)
        if not same:
            _fail(path, f"column {column} is not what its blocks give (recomputed from the "
                        "blocks' curves): edited, or made by other code")


def check_content(folder: str | os.PathLike, manifest: Mapping, cfg: Mapping,
                  compiled: Mapping | None = None) -> dict:
    """Check every table of a :func:`check` ed publication; return per game its curves
    (every block's, concatenated).  ``compiled``: the config's games, compiled (else compiled
    here with OpenSpiel); each block's game content hash must be theirs."""
    folder = Path(folder)
    games = compiled_games(cfg, compiled, [g for g, e in manifest["games"].items()
                                           if e["blocks"] or e.get("in_progress")])
    for game, entry in manifest["games"].items():
        for name in entry.get("in_progress", []):
            check_state(cfg, game, name, folder / resume_states.state_folder(game, name),
                        games[game])
    curves = {}
    for game, entry in manifest["games"].items():
        if not entry["blocks"]:
            continue
        digest, frames = game_files.content_hash(games[game]), []
        for name in entry["blocks"]:
            base = folder / block_folder(game, name)
            frame, meta = _check_curves(cfg, game, name, base / "curves.parquet")
            if meta["game_hash"] != digest:
                _fail(base / "curves.parquet", f"was computed on a game of content hash "
                      f"{meta['game_hash']}, the config's {game} compiles to {digest}")
            _check_policies(cfg, game, base / "policies.parquet", meta["run_seeds"],
                            _kept_levels(cfg, game, frame) if parse_block(name)[0]
                            == main_critic(cfg) else {}, games[game])
            try:
                provenance = json.loads((base / "provenance.json").read_text())
            except ValueError as error:
                _fail(base / "provenance.json", f"cannot be read ({error})")
            if canonical_json(provenance) != canonical_json(block_provenance(game, name, meta)):
                _fail(base / "provenance.json", "is not what the block's curves record")
            frames.append(frame)
        curves[game] = pd.concat(frames, ignore_index=True)
        for name, table in derived_tables(cfg, game, curves[game], games[game]).items():
            path = folder / f"neural/{game}/{name}.parquet"
            meta = read_metadata(path)
            if meta.get("config_hash") != manifest["config_hash"]:
                _fail(path, f"has config hash {meta.get('config_hash')}, the publication's is "
                            f"{manifest['config_hash']}")
            _same_table(path, read_table(path), table)
    return curves


def check_state(cfg: Mapping, game: str, name: str, folder: Path, compiled) -> dict:
    """:func:`neurd.resume_states.check`, refusing with :class:`PublicationError`."""
    try:
        return resume_states.check(cfg, game, name, folder, compiled)
    except ValueError as error:
        raise PublicationError(f"{game} block in progress {name}: {error}") from None


def fig6_tables(curves: Mapping[str, pd.DataFrame], folder: str | os.PathLike,
                manifest: Mapping, cfg: Mapping) -> dict[str, pd.DataFrame]:
    """Fig 6's inputs from checked blocks (:func:`check_content`'s curves): every game's
    ``nashconv``, ``diagnostics``, ``summary`` and ``nashconv_ci`` in one of each."""
    order = ["critic", "algorithm", "entropy", "seed", "iteration", "phase"]
    out = {"nashconv": [], "diagnostics": [], "summary": [], "nashconv_ci": []}
    for game in manifest["games"]:
        if game not in curves:
            continue
        frame = curves[game].sort_values(order, kind="stable").reset_index(drop=True)
        out["nashconv"].append(frame[frame.critic == main_critic(cfg)][list(NASHCONV_COLUMNS)])
        out["diagnostics"].append(frame[list(DIAGNOSTIC_COLUMNS)])
        for name in DERIVED:
            out[name].append(read_table(Path(folder) / f"neural/{game}/{name}.parquet"))
    return {k: pd.concat(v, ignore_index=True) for k, v in out.items() if v}


# --- writing ------------------------------------------------------------------------------


def _recover(folder: Path) -> None:
    """Undo what an interrupted write left: its build is removed; a previous state whose
    swap did not finish is put back (or removed, if the swap did)."""
    for build in sorted(folder.parent.glob(f".{folder.name}.new-*")):
        shutil.rmtree(build, ignore_errors=True)
    old = sorted(folder.parent.glob(f".{folder.name}.old-*"))
    if old and not folder.exists():
        os.rename(old[0], folder)
        log.warning("%s: restored the publication an interrupted publish had moved aside",
                    folder)
        old = old[1:]
    for stale in old:
        shutil.rmtree(stale, ignore_errors=True)


def _write_readme(folder: Path, cfg: Mapping, manifest: Mapping, name: str) -> None:
    seeds = int(cfg["seeds"])
    lines = [
        f"# Published Fig 6: {name}", "",
        "Written by `neurd`; do not edit (the manifest's hashes and the content checks would "
        "refuse it).",
        f"Config hash {config_hash(cfg)} (`config/neural.json`): {seeds} seeds, entropy levels "
        f"{list(cfg['entropies'])}, {int(cfg['phases'])} phases of " + ", ".join(
            f"{g} {int(cfg['phase_iterations'][g])}" for g in cfg["games"])
        + " learning iterations.", "",
        "| game | seeds published | blocks | compute minutes | devices |",
        "| --- | --- | --- | ---: | --- |"]
    for game in cfg["games"]:
        entry = manifest["games"].get(game, {"blocks": [], "seeds": []})
        lines.append(f"| {game} | {len(entry['seeds'])} of {seeds} | {len(entry['blocks'])} | "
                     f"{entry.get('compute_minutes', 0)} | "
                     + "; ".join(entry.get("devices", [])) + " |")
    progress = [(g, b) for g in cfg["games"]
                for b in manifest["games"].get(g, {}).get("in_progress", [])]
    if progress:
        lines += ["", "Blocks in progress (resumed first by the next GPU allocation; never drawn, "
                  "never counted among the seeds above):", ""]
        lines += [f"- {g} {b}: {manifest['games'][g].get('progress', {}).get(b, '')}"
                  for g, b in progress]
    lines += ["", "Check it: `neurd published-check published/" + name + "`; run each block's "
              "first cycles and the phase ends' NashConv again here: `neurd published-reproduce "
              "published/" + name + " --game <game>`.", ""]
    write_text(folder / "README.md", "\n".join(lines))


def _finish(build: Path, cfg: Mapping, games: Mapping, name: str,
            current: Mapping | None = None) -> dict:
    """Write the config, README and manifest of a build; return the manifest.  Its
    ``history_bytes`` adds to the current manifest's the bytes of every file new or changed:
    what the publication has added to the repository's history (the manifest itself aside),
    an upper bound: git compresses."""
    manifest = {"format": FORMAT, "version": VERSION, "config_hash": config_hash(cfg),
                "games": games, "files": {}, "bytes": 0}
    write_json(build / CONFIG, cfg)
    _write_readme(build, cfg, manifest, name)
    for path in sorted(p for p in build.rglob("*") if p.is_file() and p.name != MANIFEST):
        manifest["files"][path.relative_to(build).as_posix()] = {
            "sha256": _sha256(path), "bytes": path.stat().st_size}
    manifest["bytes"] = sum(f["bytes"] for f in manifest["files"].values())
    before = dict(current["files"]) if current else {}
    manifest["history_bytes"] = (current.get("history_bytes", current["bytes"]) if current
                                 else 0) + sum(f["bytes"] for r, f in manifest["files"].items()
                                               if before.get(r) != f)
    if manifest["bytes"] > MAX_BYTES:
        raise PublicationError(f"{build.parent / name} would hold "
                               f"{manifest['bytes'] / 2**20:.1f} MiB, more than "
                               f"{MAX_BYTES / 2**20:.0f} MiB")
    write_json(build / MANIFEST, manifest)
    return manifest


def _swap(build: Path, folder: Path) -> None:
    """Put ``build`` in ``folder``'s place with two renames (undone by :func:`_recover`)."""
    old = None
    if folder.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{folder.name}.old-", dir=folder.parent))
        old.rmdir()
        os.rename(folder, old)
    os.rename(build, folder)
    if old is not None:
        shutil.rmtree(old)


def _build(folder: Path, cfg: Mapping, replace: bool, write) -> dict:
    """Build a new state of the publication beside ``folder`` (``write(build, games)`` adds
    to a copy of the current one, or to an empty one), check it as a reader will, swap it
    in; on any failure the current publication is untouched."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    _recover(folder)
    current = None
    if folder.exists() or folder.is_symlink():
        if folder.is_symlink() or not folder.is_dir():
            raise PublicationError(f"{folder} is not a folder: nowhere to publish")
        if any(folder.iterdir()) and not (folder / MANIFEST).exists():
            raise PublicationError(f"{folder} holds files but no {MANIFEST}: not a publication "
                                   "this project wrote; move it away first")
        if (folder / MANIFEST).exists() and not replace:
            current = check(folder)
    if current is not None and current[0]["config_hash"] != config_hash(cfg):
        raise PublicationError(
            f"{folder} holds blocks of another config (hash {current[0]['config_hash']}, this "
            f"one's is {config_hash(cfg)}: " + "; ".join(differences(current[1], cfg)[:5])
            + "): publishing would mix them; pass --replace to start it afresh")
    build = Path(tempfile.mkdtemp(prefix=f".{folder.name}.new-", dir=folder.parent))
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(build, 0o777 & ~mask)  # a folder's usual mode, not mkdtemp's private one
    try:
        games = {}
        if current is not None and current[0]["config_hash"] == config_hash(cfg):
            for relative in current[0]["files"]:
                target = build / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(folder / relative, target)
            games = {g: dict(e) for g, e in current[0]["games"].items()}
        write(build, games)
        manifest = _finish(build, cfg, games, folder.name,
                           current[0] if current is not None else None)
        checked = check(build)
        check_content(build, *checked)
        _swap(build, folder)
    except OSError as error:
        shutil.rmtree(build, ignore_errors=True)
        where = str(error.filename or build).replace(str(build), str(folder))
        raise PublicationError(f"writing {where}: {error.strerror or error}; {folder} is "
                               "unchanged") from None
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        raise
    return manifest


def init(folder: str | os.PathLike, cfg: Mapping, replace: bool = False) -> dict:
    """An empty publication of ``cfg`` (no block yet) in ``folder``."""
    return _build(Path(folder), cfg, replace, lambda build, games: None)


def add_blocks(folder: str | os.PathLike, cfg: Mapping, sources: Iterable[BlockSource],
               compiled: Mapping | None = None, replace: bool = False,
               states: Iterable[resume_states.StateSource] = ()) -> tuple[dict, list]:
    """Publish finished blocks (their job tables, ``sources``) and blocks in progress (their
    saved states, ``states``) into ``folder``; return the manifest and the names of the
    blocks added (``game/name``).

    Each source is checked as :func:`check_content` checks a published block (its
    policies then hold every entropy level; the block's best levels are kept), must add
    seeds not yet published for its critic (a block already there, byte for byte, is
    skipped), and the game's derived tables are made again over all its blocks.  A
    finished block replaces its block in progress.  Each state is checked
    (:func:`neurd.resume_states.check`) and replaces the state of the same block if it is
    further along (an older one, or the state of a block already finished, is skipped).
    """
    sources, states = list(sources), list(states)
    games_compiled = compiled_games(cfg, compiled, sorted({s.game for s in sources}
                                                          | {s.game for s in states}))
    added: list[str] = []

    def write(build: Path, games: dict) -> None:
        write_blocks(build, games)
        for game, entry in games.items():
            for name in [b for b in entry.get("in_progress", []) if b in entry["blocks"]]:
                shutil.rmtree(build / resume_states.state_folder(game, name))
                entry["in_progress"].remove(name)
                entry.get("progress", {}).pop(name, None)
        for state in states:
            _add_state(build, games.setdefault(state.game, {"blocks": [], "seeds": []}),
                       state, added)

    def _add_state(build: Path, entry: dict, state, added: list) -> None:
        game, name = state.game, state.name
        if name in entry["blocks"]:
            log.info("%s %s is finished already: its state is skipped", game, name)
            return
        info = check_state(cfg, game, name, state.folder, games_compiled[game])
        target = build / resume_states.state_folder(game, name)
        progress = entry.setdefault("in_progress", [])
        if name in progress:
            published = check_state(cfg, game, name, target, games_compiled[game])
            if info["next_row"] <= published["next_row"]:
                log.info("%s %s: the published state is as far along: skipped", game, name)
                return
            shutil.rmtree(target)
            progress.remove(name)
        _check_in_progress(cfg, game, entry["blocks"], progress + [name],
                           f"{state.folder}: {game}")
        resume_states.copy_state(state.folder, target)
        entry["in_progress"] = sorted(progress + [name])
        entry.setdefault("progress", {})[name] = resume_states.describe(info)
        added.append(f"{game}/{name} (in progress)")

    def write_blocks(build: Path, games: dict) -> None:
        for source in sources:
            game = source.game
            meta = read_metadata(source.curves) if source.curves.is_file() else {}
            seeds = meta.get("run_seeds") or []
            if not seeds or meta.get("critic") not in ("learned", "exact"):
                raise PublicationError(f"{source.curves} is not a job's curves (no run seeds or "
                                       "critic in its metadata)")
            name = block_name(meta["critic"], min(seeds), max(seeds))
            entry = games.setdefault(game, {"blocks": [], "seeds": []})
            target = build / block_folder(game, name)
            if name in entry["blocks"]:
                if _sha256(source.curves) == _sha256(target / "curves.parquet"):
                    log.info("%s %s is published already: skipped", game, name)
                    continue
                raise PublicationError(f"{source.curves}: {game} block {name} is published "
                                       "already, with other numbers")
            for other in entry["blocks"]:
                critic, first, last = parse_block(other)
                if critic == meta["critic"] and set(range(first, last + 1)) & set(seeds):
                    raise PublicationError(f"{source.curves}: {game} block {name} overlaps the "
                                           f"published block {other}")
            frame, meta = _check_curves(cfg, game, name, source.curves)
            digest = game_files.content_hash(games_compiled[game])
            if meta["game_hash"] != digest:
                _fail(source.curves, f"was computed on a game of content hash "
                      f"{meta['game_hash']}, the config's {game} compiles to {digest}")
            policies = _check_policies(cfg, game, source.policies, seeds, None,
                                       games_compiled[game])
            if meta["critic"] == main_critic(cfg):
                kept = _kept_levels(cfg, game, frame)
                keep = pd.Series(False, index=policies.index)
                for algorithm, entropy in kept.items():
                    keep |= (policies.algorithm == algorithm) & (policies.entropy == entropy)
                policies = policies[keep].reset_index(drop=True)
                what = ("each algorithm's best entropy level within the block (lowest mean "
                        "final NashConv of its seeds): "
                        + ", ".join(f"{a} {e:g}" for a, e in kept.items()))
            else:
                policies = policies.iloc[0:0]
                what = f"none (the {meta['critic']} critic's runs are diagnostics only)"
            intake.verify_block(cfg, game, name, meta["batches"], frame, policies,
                                games_compiled[game], str(source.curves))
            target.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source.curves, target / "curves.parquet")
            write_table(policies, target / "policies.parquet", columns=POLICY_COLUMNS,
                        config=cfg, extra={"game_string": meta["game_string"],
                                           "published_policies": what})
            write_json(target / "provenance.json", block_provenance(game, name, meta))
            entry["blocks"] = sorted(entry["blocks"] + [name],
                                     key=lambda b: (parse_block(b)[0], parse_block(b)[1]))
            added.append(f"{game}/{name}")
        for game, entry in games.items():
            if not entry["blocks"] or game not in games_compiled:
                continue  # no block, or no new one: its tables stand
            where = f"{folder}: {game}"
            entry["seeds"] = _block_seeds(cfg, game, entry["blocks"], where)
            frames = [read_table(build / block_folder(game, b) / "curves.parquet")
                      for b in entry["blocks"]]
            for table_name, table in derived_tables(cfg, game, pd.concat(frames),
                                                    games_compiled[game]).items():
                write_table(table, build / f"neural/{game}/{table_name}.parquet",
                            columns=DERIVED[table_name], config=cfg,
                            extra={"seeds": entry["seeds"]} if table_name == "summary" else
                            {"bootstrap": dict(cfg["bootstrap"], statistic="mean over seeds",
                                               implementation="scipy.stats.bootstrap")})
            provenance = [json.loads((build / block_folder(game, b) / "provenance.json")
                                     .read_text()) for b in entry["blocks"]]
            entry["compute_minutes"] = round(sum(p["compute_seconds"] for p in provenance)
                                             / 60.0, 2)
            entry["devices"] = sorted({d for p in provenance for d in p["devices"]})

    manifest = _build(Path(folder), cfg, replace, write)
    return manifest, added


def publish_run(cfg: Mapping, results: str | os.PathLike, folder: str | os.PathLike,
                games: Iterable[str], compiled: Mapping | None = None,
                replace: bool = False) -> tuple[dict, list]:
    """Publish the finished Snakemake jobs of ``games`` in the results folder ``results``
    (made from the neural snapshot ``cfg``, which must be the config as it is now): each job
    is a block of its seeds."""
    results = Path(results)
    snapshot_path = results / CONFIG
    if not snapshot_path.exists():
        raise PublicationError(f"{snapshot_path} is missing: run the workflow at this scale "
                               "first")
    made = load_snapshot(snapshot_path)
    if config_hash(made) != config_hash(cfg):
        raise PublicationError(
            f"{snapshot_path} is not the config's neural section as it is now ("
            + "; ".join(differences(made, cfg)[:5]) + "): rerun the workflow, then publish")
    games = list(games)
    if not games:
        raise PublicationError(f"no game to publish: none of {list(cfg['games'])} has its "
                               f"jobs done in {results}/neural/")
    sources = []
    for game, critic, chunk in jobs(cfg):
        if game not in games:
            continue
        base = results / f"neural/{game}/jobs/{critic}_{chunk}"
        curves = Path(f"{base}_curves.parquet")
        if not curves.exists():
            raise PublicationError(f"{curves} is missing: the job (critic {critic}, seeds "
                                   f"{list(seed_chunks(cfg)[chunk])}) has not finished")
        if Path(f"{base}_checkpoint").exists():
            raise PublicationError(f"{curves}: the job's checkpoint folder is still there (the "
                                   "job is running or was stopped): finish it first")
        sources.append(BlockSource(game, curves, Path(f"{base}_policies.parquet")))
    return add_blocks(folder, cfg, sources, compiled=compiled, replace=replace)


# --- reproducing (the checks themselves: neurd.intake, also run on every incoming block) ----


def block_job(cfg: Mapping, game: str, name: str, provenance: Mapping):
    """The :class:`~neurd.neural.experiment.Plan` a published block was run as (its seeds in
    the batches its provenance records)."""
    try:
        return intake.block_job(cfg, game, name, provenance["batches"])
    except ValueError as error:
        raise PublicationError(str(error)) from None


def reproduce(folder: str | os.PathLike, game: str, compiled, cycles: int = AGREEMENT_CYCLES,
              checked: tuple[dict, dict] | None = None) -> pd.DataFrame:
    """The first ``cycles`` learning cycles of every block of ``game`` (its first batch) run
    again on this machine, beside the published NashConv at every published checkpoint among
    them: ``block, algorithm, entropy, seed, iteration, published, reproduced, difference``.

    A cycle draws its samples from a key folded with its index and nothing depends on the
    phase length, so these iterations are the same computation as the published run's
    first ones, whatever its checkpoint schedule.
    """
    if type(cycles) is not int or cycles < 1:
        raise PublicationError(f"cycles must be a whole number >= 1 (a reproduction of no "
                               f"cycle vouches for nothing), got {cycles!r}")
    manifest, cfg = checked if checked is not None else check(folder)
    entry = manifest["games"].get(game)
    if not entry or not entry["blocks"]:
        raise PublicationError(f"{folder} holds no block of {game!r} (games: "
                               f"{published_games(folder)})")
    rows = [pd.DataFrame([], columns=intake.REPRODUCED_COLUMNS)]
    for name in entry["blocks"]:
        base = Path(folder) / block_folder(game, name)
        provenance = json.loads((base / "provenance.json").read_text())
        block_job(cfg, game, name, provenance)  # its batches, refused as the publication's
        rows.append(intake.reproduce_block(cfg, game, name, provenance["batches"],
                                           read_table(base / "curves.parquet"), compiled,
                                           cycles))
    frame = pd.concat([r for r in rows if len(r)] or rows[:1], ignore_index=True)
    unchecked = sorted(set(entry["blocks"]) - set(frame.block))
    if unchecked:
        raise PublicationError(f"{folder} {game}: no published checkpoint within the first "
                               f"{cycles} cycles of block {unchecked[0]}: nothing to compare "
                               "(give more cycles)")
    return frame


def phase_end_nash_conv(folder: str | os.PathLike, game: str, compiled,
                        checked: tuple[dict, dict] | None = None) -> pd.DataFrame:
    """The exact NashConv (engine, float64, no OpenSpiel) of every published policy at its
    phase's end, in that phase's game, beside the published value: ``block, algorithm,
    entropy, seed, phase, published, recomputed, difference``."""
    manifest, cfg = checked if checked is not None else check(folder)
    entry = manifest["games"].get(game) or {"blocks": []}
    negated = game_files.negated(compiled)
    out = [pd.DataFrame([], columns=intake.PHASE_END_COLUMNS)]
    for name in entry["blocks"]:
        base = Path(folder) / block_folder(game, name)
        out.append(intake.phase_end_block(cfg, game, name, read_table(base / "policies.parquet"),
                                          read_table(base / "curves.parquet"), compiled,
                                          negated))
    return pd.concat([o for o in out if len(o)] or out[:1], ignore_index=True)
