"""A published Fig 6: a finished scale's neural tables, shipped in the repository.

The paper-scale Fig 6 takes a GPU to compute; its tables are computed once,
published in a tracked folder (``published/paper/``), and drawn from there by
``make figures`` on any machine.  A publication's layout::

    manifest.json              format, config hash, games, every file's SHA-256 and size
    README.md                  what the folder holds, written with it
    config/neural.json         the neural config snapshot every table was computed from
    neural/<game>/nashconv.parquet, nashconv_ci.parquet, summary.parquet,
                  diagnostics.parquet     as the pipeline writes them, byte for byte
    neural/<game>/policies.parquet        the end-of-phase policies of each algorithm's
                                          best entropy level (``policies: best``) or all
    neural/<game>/provenance.json         per job: run seeds, critic, and every piece of
                                          it (device, driver, jax, git revision, wall
                                          time, configuration-iterations per second)

:func:`publish` adds one game at a time from a finished run (every job done,
every run at every checkpoint; a half-finished job's tables are refused), so
each game can be published as soon as its run is done.  :func:`check` is what
every reader calls first: the manifest's hashes, the tables' columns and
config hash, each run complete, and -- given the config the publication
should match -- the same config hash, else :class:`PublicationError` naming
what differs (a stale publication is refused, never drawn).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from neurd.config import load_snapshot
from neurd.tables import (
    canonical_json,
    config_hash,
    read_metadata,
    read_table,
    write_json,
    write_table,
    write_text,
)

FORMAT = "neurd-publication"
VERSION = 1
MANIFEST = "manifest.json"
CONFIG = "config/neural.json"
COPIED = ("nashconv", "nashconv_ci", "summary", "diagnostics")  # byte for byte
TABLES = (*COPIED, "policies")
POLICIES = ("best", "all")
MAX_BYTES = 60 * 2**20  # the whole folder (the repository ships it)


class PublicationError(ValueError):
    """A publication that cannot be made or read as it is; the message names the file."""


def game_files(game: str) -> list[str]:
    """A game's files in a publication, relative to its folder."""
    return [*(f"neural/{game}/{name}.parquet" for name in TABLES),
            f"neural/{game}/provenance.json"]


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


# --- what a finished run is -----------------------------------------------------------------


def incomplete(cfg: Mapping, game: str, nashconv: pd.DataFrame) -> list[str]:
    """What a game's NashConv table lacks to be a finished run of ``cfg`` (empty: nothing):
    every (algorithm, entropy, seed) at every checkpoint of the schedule, finite."""
    from neurd.neural.experiment import checkpoint_grid

    iterations, phases = checkpoint_grid(
        int(cfg["phase_iterations"][game]), int(cfg["phases"]),
        int(cfg["checkpoints"]["geometric"]), int(cfg["checkpoints"]["linear"]),
        int(cfg["critic_updates_per_policy_update"]))
    schedule = set(zip(iterations.tolist(), phases.tolist()))
    runs = {(a, float(e), s) for a in cfg["algorithms"] for e in cfg["entropies"]
            for s in range(int(cfg["seeds"]))}
    rows = nashconv[nashconv.game == game]
    found = {(a, float(e), int(s)): set(zip(r.iteration.tolist(), r.phase.tolist()))
             for (a, e, s), r in rows.groupby(["algorithm", "entropy", "seed"])}
    problems = []
    missing = sorted(runs - set(found))
    if missing:
        problems.append(f"{len(missing)} of {len(runs)} runs missing, e.g. {missing[0]}")
    short = sorted(k for k, points in found.items() if k in runs and points != schedule)
    if short:
        have = found[short[0]]
        problems.append(f"{len(short)} runs not at every checkpoint, e.g. {short[0]} at "
                        f"{len(have & schedule)} of {len(schedule)} (last iteration "
                        f"{max(i for i, _ in have) if have else None} of {max(iterations)})")
    extra = sorted(set(found) - runs)
    if extra:
        problems.append(f"{len(extra)} runs the config does not make, e.g. {extra[0]}")
    if not np.all(np.isfinite(rows.nash_conv.to_numpy())):
        problems.append("NashConv not finite")
    return problems


# --- publishing -----------------------------------------------------------------------------


def _read_manifest(folder: Path) -> dict | None:
    path = folder / MANIFEST
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise PublicationError(f"{path} cannot be read: {error}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise PublicationError(f"{path} is not a publication's manifest (format {FORMAT!r})")
    if manifest.get("version") != VERSION:
        raise PublicationError(f"{path}: publication format version {manifest.get('version')}, "
                               f"this code reads version {VERSION}: publish it again")
    return manifest


def _job_provenance(cfg: Mapping, results: Path, game: str) -> list[dict]:
    """Every job of ``game``: critic, chunk, run seeds, and its pieces (from the job's curves
    metadata, where ``neurd neural-run`` records them)."""
    from neurd.pipeline.neural import jobs

    out = []
    for g, critic, chunk in jobs(cfg):
        if g != game:
            continue
        path = results / f"neural/{game}/jobs/{critic}_{chunk}_curves.parquet"
        if not path.exists():
            raise PublicationError(f"{path} is missing: the job (critic {critic}, chunk "
                                   f"{chunk}) has not finished")
        if (results / f"neural/{game}/jobs/{critic}_{chunk}_checkpoint").exists():
            raise PublicationError(f"{path}: the job's checkpoint folder is still there (the "
                                   "job is running or was stopped): finish it first")
        meta = read_metadata(path)
        if meta.get("config_hash") != config_hash(cfg):
            raise PublicationError(f"{path} was made from another config (hash "
                                   f"{meta.get('config_hash')}, expected {config_hash(cfg)})")
        pieces = meta.get("pieces", [])
        out.append({"critic": critic, "chunk": chunk, "run_seeds": meta.get("run_seeds"),
                    "pieces": pieces,
                    "seconds": round(sum(float(p.get("seconds", 0.0)) for p in pieces), 3)})
    return out


def publish(cfg: Mapping, results: str | os.PathLike, folder: str | os.PathLike,
            games: Iterable[str], policies: str = "best", replace: bool = False) -> dict:
    """Publish ``games`` of the finished run in ``results`` (a scale's results folder, made
    from the neural snapshot ``cfg``) into ``folder``; return the manifest.

    The run's snapshot ``results/config/neural.json`` must be ``cfg`` (the config as it is
    now), every job finished and every run complete (:func:`incomplete`).  A folder holding
    another config's games is refused unless ``replace`` (then it starts afresh).  The
    publication is then checked as every reader checks it (:func:`check`).
    """
    from neurd.figures.fig6 import best_entropies
    from neurd.pipeline.neural import POLICY_COLUMNS

    if policies not in POLICIES:
        raise PublicationError(f"policies must be one of {POLICIES}, got {policies!r}")
    results, folder = Path(results), Path(folder)
    snapshot_path = results / CONFIG
    if not snapshot_path.exists():
        raise PublicationError(f"{snapshot_path} is missing: run the workflow at this scale "
                               "first")
    made = load_snapshot(snapshot_path)
    if config_hash(made) != config_hash(cfg):
        raise PublicationError(
            f"{snapshot_path} is not the config's neural section as it is now ("
            + "; ".join(differences(made, cfg)[:5]) + "): rerun the workflow, then publish")
    manifest = _read_manifest(folder)
    if manifest is not None and manifest["config_hash"] != config_hash(cfg):
        if not replace:
            raise PublicationError(
                f"{folder} holds games of another config (hash {manifest['config_hash']}, this "
                f"one's is {config_hash(cfg)}): publishing would mix them; pass --replace to "
                "start the folder afresh")
        shutil.rmtree(folder)
        manifest = None
    if manifest is None:
        manifest = {"format": FORMAT, "version": VERSION, "config_hash": config_hash(cfg),
                    "games": {}, "files": {}}
    games = list(games)
    if not games:
        raise PublicationError(f"no game to publish: none of {list(cfg['games'])} has its "
                               f"tables in {results}/neural/")
    for game in games:
        if game not in cfg["games"]:
            raise PublicationError(f"{game!r} is not a game of the config ({list(cfg['games'])})")
        source = results / "neural" / game
        frames = {}
        for name in TABLES:
            path = source / f"{name}.parquet"
            if not path.exists():
                raise PublicationError(f"{path} is missing: the game's run has not finished")
            if read_metadata(path).get("config_hash") != config_hash(cfg):
                raise PublicationError(f"{path} was made from another config than "
                                       f"{snapshot_path}: rerun the workflow")
            frames[name] = read_table(path)
        problems = incomplete(cfg, game, frames["nashconv"])
        if problems:
            raise PublicationError(f"{source}/nashconv.parquet is not a finished run: "
                                   + "; ".join(problems))
        jobs = _job_provenance(cfg, results, game)
        target = folder / "neural" / game
        target.mkdir(parents=True, exist_ok=True)
        for name in COPIED:
            shutil.copyfile(source / f"{name}.parquet", target / f"{name}.parquet")
        kept = frames["policies"]
        best = best_entropies(frames["summary"], game)
        if policies == "best":
            keep = pd.Series(False, index=kept.index)
            for algorithm, entropy in best.items():
                keep |= (kept.algorithm == algorithm) & (kept.entropy == entropy)
            kept = kept[keep].reset_index(drop=True)
        what = ("every run" if policies == "all" else "each algorithm's best entropy level "
                "(lowest mean final NashConv): " + ", ".join(f"{a} {e:g}"
                                                           for a, e in best.items()))
        write_table(kept, target / "policies.parquet", columns=POLICY_COLUMNS, config=cfg,
                    extra={"published_policies": what})
        seconds = sum(job["seconds"] for job in jobs)
        devices = sorted({str(p.get("device")) + (f" (driver {p['driver']})" if "driver" in p
                                                  else "")
                          for job in jobs for p in job["pieces"]})
        write_json(target / "provenance.json", {
            "game": game, "config_hash": config_hash(cfg), "policies": what,
            "compute_minutes": round(seconds / 60.0, 2), "devices": devices, "jobs": jobs})
        manifest["games"][game] = {"policies": policies, "compute_minutes":
                                   round(seconds / 60.0, 2), "devices": devices}
    write_json(folder / CONFIG, cfg)
    _write_readme(folder, cfg, manifest)
    manifest["files"] = {}
    for path in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST):
        relative = path.relative_to(folder).as_posix()
        manifest["files"][relative] = {"sha256": _sha256(path), "bytes": path.stat().st_size}
    total = sum(f["bytes"] for f in manifest["files"].values())
    if total > MAX_BYTES:
        raise PublicationError(f"{folder} would hold {total / 2**20:.1f} MiB, more than "
                               f"{MAX_BYTES / 2**20:.0f} MiB (publish with policies 'best')")
    manifest["bytes"] = total
    write_json(folder / MANIFEST, manifest)
    check(folder, cfg, "the run")  # what every reader will check
    return manifest


def _write_readme(folder: Path, cfg: Mapping, manifest: Mapping) -> None:
    games = manifest["games"]
    lines = [
        f"# Published Fig 6: {folder.name}", "",
        "Written by `neurd publish`; do not edit (the manifest's hashes would refuse it).",
        f"Config hash {config_hash(cfg)} (`config/neural.json`): "
        f"{int(cfg['seeds'])} seeds, entropy levels {list(cfg['entropies'])}, "
        f"{int(cfg['phases'])} phases of " + ", ".join(
            f"{g} {int(cfg['phase_iterations'][g])}" for g in cfg["games"])
        + " learning iterations.", "",
        "| game | policies kept | compute minutes | devices |", "| --- | --- | ---: | --- |"]
    for game in cfg["games"]:
        if game in games:
            entry = games[game]
            lines.append(f"| {game} | {entry['policies']} | {entry['compute_minutes']} | "
                         + "; ".join(entry["devices"]) + " |")
        else:
            lines.append(f"| {game} | not published yet | | |")
    lines += ["", "Check it: `neurd published-check " + folder.as_posix() + "`; reproduce its "
              "first checkpoints on this machine: `neurd published-reproduce "
              + folder.as_posix() + " --game <game>`.", ""]
    write_text(folder / "README.md", "\n".join(lines))


# --- reading --------------------------------------------------------------------------------


def published_games(folder: str | os.PathLike) -> list[str]:
    """The games a publication holds, by its manifest (none if there is no publication)."""
    manifest = _read_manifest(Path(folder))
    return [] if manifest is None else list(manifest["games"])


def check(folder: str | os.PathLike, expected: Mapping | None = None,
          expected_from: str = "", defaults: Mapping | None = None) -> tuple[dict, dict]:
    """``(manifest, config)`` of the publication in ``folder``, checked; else
    :class:`PublicationError` naming the file.

    Every file of the manifest is there with its SHA-256 and nothing else is in
    ``neural/``; the tables have the documented columns (in order) and the
    publication's config hash; every run is complete; and, given ``expected``
    (the neural snapshot the publication should be of, read from
    ``expected_from``), it is that config (:func:`stale_keys`, with the neural
    schema's ``defaults``).
    """
    from neurd.pipeline.neural import TABLES as DOCS

    folder = Path(folder)
    manifest = _read_manifest(folder)
    if manifest is None:
        raise PublicationError(f"{folder}/{MANIFEST} is missing: {folder} is not a publication")
    files = manifest.get("files", {})
    for relative, entry in files.items():
        path = folder / relative
        if not path.is_file():
            raise PublicationError(f"{path} is missing (listed in {folder}/{MANIFEST})")
        if _sha256(path) != entry["sha256"]:
            raise PublicationError(f"{path} is not the file that was published (SHA-256 "
                                   "differs from the manifest's): restore it from git")
    stray = sorted(p.relative_to(folder).as_posix() for p in (folder / "neural").rglob("*")
                   if p.is_file() and p.relative_to(folder).as_posix() not in files)
    if stray:
        raise PublicationError(f"{folder}/{stray[0]} is not in the manifest: a publication "
                               "holds only what `neurd publish` wrote")
    cfg = load_snapshot(folder / CONFIG)
    digest = config_hash(cfg)
    if digest != manifest["config_hash"]:
        raise PublicationError(f"{folder}/{CONFIG} has hash {digest}, the manifest says "
                               f"{manifest['config_hash']}")
    stale = [] if expected is None else stale_keys(cfg, expected, defaults or {})
    if stale:
        raise PublicationError(
            f"{folder} is stale: it was made from a neural config (hash {digest}) other than "
            f"the one {expected_from or 'expected'} gives now (hash {config_hash(expected)}): "
            + "; ".join(stale[:8])
            + ". Make it again (`make paper` on a GPU, then `make publish`), or set "
            "published.folder to null to draw none")
    for game in manifest["games"]:
        for relative in game_files(game):
            if relative not in files:
                raise PublicationError(f"{folder}/{relative} is not in the manifest")
        for name in TABLES:
            path = folder / f"neural/{game}/{name}.parquet"
            meta = read_metadata(path)
            columns = list(read_table(path).columns)
            if columns != list(DOCS[name]):
                raise PublicationError(f"{path}: columns {columns}, the {name} table's are "
                                       f"{list(DOCS[name])} (published by another version)")
            if meta.get("config_hash") != digest:
                raise PublicationError(f"{path} has config hash {meta.get('config_hash')}, "
                                       f"the publication's is {digest}")
        problems = incomplete(cfg, game, read_table(folder / f"neural/{game}/nashconv.parquet"))
        if problems:
            raise PublicationError(f"{folder}/neural/{game}/nashconv.parquet is not a finished "
                                   "run: " + "; ".join(problems))
    return manifest, cfg


# --- reproducing ----------------------------------------------------------------------------

# How far a run of the same config on another device may be from the published numbers after
# its first cycles: float32 learning agrees across devices in distribution, not bit for bit,
# and after AGREEMENT_CYCLES cycles CPU and GPU were measured within 2.1e-7 in NashConv
# (README, "Determinism"); ``make gpu-check`` and the reproduction both allow this much.
AGREEMENT_CYCLES = 3
AGREEMENT_NASH_CONV = 1e-3


def reproduce(folder: str | os.PathLike, game: str, compiled, cycles: int = AGREEMENT_CYCLES,
              checked: tuple[dict, dict] | None = None) -> pd.DataFrame:
    """The first ``cycles`` learning cycles of the publication's first job (its first batch
    of seeds, main critic) run again on this machine, beside the published NashConv at every
    published checkpoint among them: ``algorithm, entropy, seed, iteration, published,
    reproduced, difference``.

    A cycle draws its samples from a key folded with its index and nothing depends on the
    phase length, so these iterations are the same computation as the published run's
    first ones, whatever its checkpoint schedule.  ``checked``: what :func:`check` gave for
    ``folder``, if the caller has just checked it (else it is checked here).
    """
    import dataclasses

    from neurd.neural import experiment
    from neurd.pipeline.neural import main_critic, plan

    manifest, cfg = checked if checked is not None else check(folder)
    if game not in manifest["games"]:
        raise PublicationError(f"{folder} holds no {game!r} (games: {list(manifest['games'])})")
    job = plan(cfg, game, main_critic(cfg), 0)
    length = cycles * job.spec.critic_updates
    job = dataclasses.replace(job, run_seeds=job.batches[0], phase_iterations=length, phases=1,
                              geometric=0, linear=cycles)
    results = experiment.run(compiled, job)
    published = read_table(Path(folder) / f"neural/{game}/nashconv.parquet")
    published = published[published.phase == 1].set_index(
        ["algorithm", "entropy", "seed", "iteration"]).nash_conv
    rows = []
    for k, iteration in enumerate(results["iteration"]):
        for c, (algorithm, entropy, seed) in enumerate(job.configurations):
            key = (algorithm, float(entropy), int(seed), int(iteration))
            if key in published.index:
                value = float(results["nash_conv"][k, c])
                rows.append((*key, float(published.loc[key]), value,
                             abs(value - float(published.loc[key]))))
    return pd.DataFrame(rows, columns=["algorithm", "entropy", "seed", "iteration",
                                       "published", "reproduced", "difference"])
