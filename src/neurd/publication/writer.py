"""Writing a publication, only whole: a new state built in a folder beside it, checked as
every reader will, and swapped in with two renames (an interrupted swap is undone by the
next writer); the blocks and states added, the derived tables made again, the README and
manifest written.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from neurd import games as game_files
from neurd.config import load_snapshot
from neurd.neural.results import POLICY_COLUMNS
from neurd.neural.runs import block_name, jobs, main_critic, parse_block, seed_chunks
from neurd.publication import intake, resume_states
from neurd.publication.content import (
    block_provenance,
    check_content,
    check_curves,
    check_policies,
    check_state,
    compiled_games,
    derived_tables,
    diverged_runs,
    kept_levels,
)
from neurd.publication.integrity import block_seeds, check, check_in_progress
from neurd.publication.manifest import (
    CONFIG,
    DERIVED,
    FORMAT,
    MANIFEST,
    MAX_BYTES,
    VERSION,
    PublicationError,
    block_folder,
    differences,
    fail,
    sha256,
)
from neurd.tables import config_hash, read_metadata, read_table, write_json, write_table, write_text

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BlockSource:
    """A finished block to publish: its game and its job's two tables."""

    game: str
    curves: Path
    policies: Path


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
        "| game | seeds published | blocks | CPU hours | GPU minutes | devices |",
        "| --- | --- | --- | ---: | ---: | --- |"]
    for game in cfg["games"]:
        entry = manifest["games"].get(game, {"blocks": [], "seeds": []})
        lines.append(f"| {game} | {len(entry['seeds'])} of {seeds} | {len(entry['blocks'])} | "
                     f"{entry.get('cpu_hours', 0)} | {entry.get('gpu_minutes', 0)} | "
                     + "; ".join(entry.get("devices", [])) + " |")
    progress = [(g, b) for g in cfg["games"]
                for b in manifest["games"].get(g, {}).get("in_progress", [])]
    if progress:
        lines += ["", "Blocks in progress (resumed first by the next allocation; never drawn, "
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
            "sha256": sha256(path), "bytes": path.stat().st_size}
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


def _build(folder: Path, cfg: Mapping, replace: bool, write) -> tuple[dict, list]:
    """Build a new state of the publication beside ``folder`` (``write(build, games)`` adds
    to a copy of the current one, or to an empty one, and returns what it added), check it
    as a reader will, swap it in; return the manifest and what was added.  On any failure
    the current publication is untouched."""
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
        added = write(build, games)
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
    return manifest, added


def init(folder: str | os.PathLike, cfg: Mapping, replace: bool = False) -> dict:
    """An empty publication of ``cfg`` (no block yet) in ``folder``."""
    return _build(Path(folder), cfg, replace, lambda build, games: [])[0]


def add_blocks(folder: str | os.PathLike, cfg: Mapping, sources: Iterable[BlockSource],
               compiled: Mapping | None = None, replace: bool = False,
               states: Iterable[resume_states.StateSource] = ()) -> tuple[dict, list]:
    """Publish finished blocks (their job tables, ``sources``) and blocks in progress (their
    saved states, ``states``) into ``folder``; return the manifest and the names of the
    blocks added (``game/name``).

    Each source is checked as :func:`~neurd.publication.content.check_content` checks a
    published block (its policies then hold every entropy level; the block's best levels
    are kept), must add seeds not yet published for its critic (a block already there, byte
    for byte, is skipped), and the game's derived tables are made again over all its blocks.
    A finished block replaces its block in progress.  Each state is checked
    (:func:`neurd.publication.resume_states.check`) and replaces the state of the same block if it
    is further along (an older one, or the state of a block already finished, is skipped).
    """
    sources, states = list(sources), list(states)
    games_compiled = compiled_games(cfg, compiled, sorted({s.game for s in sources}
                                                          | {s.game for s in states}))
    write = functools.partial(_write_blocks_and_states, cfg=cfg, sources=sources,
                              states=states, compiled=games_compiled, folder=folder)
    return _build(Path(folder), cfg, replace, write)


def derive_again(folder: str | os.PathLike, cfg: Mapping, compiled: Mapping | None = None
                 ) -> tuple[dict, list]:
    """Make every game's derived tables (summary, CI over seeds) again from its published
    blocks, with this code: after a change to what they hold (a column added), so that the
    publication is what its blocks give again; the blocks themselves are not touched."""
    def write(build: Path, games: dict) -> list[str]:
        published = [g for g, e in games.items() if e["blocks"]]
        _derive(build, games, cfg, compiled_games(cfg, compiled, published), folder)
        return [f"{g} (derived tables)" for g in published]
    return _build(Path(folder), cfg, False, write)


def _write_blocks_and_states(build: Path, games: dict, *, cfg: Mapping, sources: list,
                             states: list, compiled: Mapping, folder) -> list[str]:
    """Add ``sources`` and ``states`` to the build (``games``: its manifest's games, updated
    here); the names of the blocks added."""
    added = [name for source in sources
             if (name := _add_block(build, games, cfg, source, compiled[source.game]))]
    _derive(build, games, cfg, compiled, folder)
    for game, entry in games.items():
        for name in [b for b in entry.get("in_progress", []) if b in entry["blocks"]]:
            shutil.rmtree(build / resume_states.state_folder(game, name))
            entry["in_progress"].remove(name)
            entry.get("progress", {}).pop(name, None)
    for state in states:
        entry = games.setdefault(state.game, {"blocks": [], "seeds": []})
        if _add_state(build, entry, cfg, state, compiled[state.game]):
            added.append(f"{state.game}/{state.name} (in progress)")
    return added


def _add_state(build: Path, entry: dict, cfg: Mapping, state, compiled) -> bool:
    """Put a block's saved state in the build unless it is finished or no further along than
    the published one; whether it was put there."""
    game, name = state.game, state.name
    if name in entry["blocks"]:
        log.info("%s %s is finished already: its state is skipped", game, name)
        return False
    info = check_state(cfg, game, name, state.folder, compiled)
    target = build / resume_states.state_folder(game, name)
    progress = entry.setdefault("in_progress", [])
    if name in progress:
        published = check_state(cfg, game, name, target, compiled)
        if info["next_row"] <= published["next_row"]:
            log.info("%s %s: the published state is as far along: skipped", game, name)
            return False
        shutil.rmtree(target)
        progress.remove(name)
    check_in_progress(cfg, game, entry["blocks"], progress + [name], f"{state.folder}: {game}")
    resume_states.copy_state(state.folder, target)
    entry["in_progress"] = sorted(progress + [name])
    entry.setdefault("progress", {})[name] = resume_states.describe(info)
    return True


def _source_block(source: BlockSource, entry: Mapping, build: Path) -> str | None:
    """The block name of a source's curves; None if that block is published already, byte
    for byte; refused if it is there with other numbers or overlaps a published block."""
    game = source.game
    meta = read_metadata(source.curves) if source.curves.is_file() else {}
    seeds = meta.get("run_seeds") or []
    if not seeds or meta.get("critic") not in ("learned", "exact"):
        raise PublicationError(f"{source.curves} is not a job's curves (no run seeds or "
                               "critic in its metadata)")
    name = block_name(meta["critic"], min(seeds), max(seeds))
    if name in entry["blocks"]:
        target = build / block_folder(game, name)
        if sha256(source.curves) == sha256(target / "curves.parquet"):
            log.info("%s %s is published already: skipped", game, name)
            return None
        raise PublicationError(f"{source.curves}: {game} block {name} is published "
                               "already, with other numbers")
    for other in entry["blocks"]:
        critic, first, last = parse_block(other)
        if critic == meta["critic"] and set(range(first, last + 1)) & set(seeds):
            raise PublicationError(f"{source.curves}: {game} block {name} overlaps the "
                                   f"published block {other}")
    return name


def _add_block(build: Path, games: dict, cfg: Mapping, source: BlockSource,
               compiled) -> str | None:
    """Check a finished block's tables and put it in the build; ``game/name``, or None if it
    is published already."""
    game = source.game
    entry = games.setdefault(game, {"blocks": [], "seeds": []})
    name = _source_block(source, entry, build)
    if name is None:
        return None
    frame, meta = check_curves(cfg, game, name, source.curves)
    digest = game_files.content_hash(compiled)
    if meta["game_hash"] != digest:
        fail(source.curves, f"was computed on a game of content hash "
             f"{meta['game_hash']}, the config's {game} compiles to {digest}")
    policies = check_policies(cfg, game, source.policies, meta["run_seeds"], None, compiled,
                              diverged_runs(frame))
    policies, what = _published_policies(cfg, game, meta["critic"], frame, policies)
    intake.verify_block(cfg, game, name, meta["batches"], frame, policies, compiled,
                        str(source.curves))
    target = build / block_folder(game, name)
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source.curves, target / "curves.parquet")
    write_table(policies, target / "policies.parquet", columns=POLICY_COLUMNS,
                config=cfg, extra={"game_string": meta["game_string"],
                                   "published_policies": what})
    write_json(target / "provenance.json", block_provenance(game, name, meta))
    entry["blocks"] = sorted(entry["blocks"] + [name],
                             key=lambda b: (parse_block(b)[0], parse_block(b)[1]))
    return f"{game}/{name}"


def _published_policies(cfg: Mapping, game: str, critic: str, curves: pd.DataFrame,
                        policies: pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The policies a block publishes, and what they are: each algorithm's best entropy
    level's for the main critic, none for another."""
    if critic != main_critic(cfg):
        return policies.iloc[0:0], f"none (the {critic} critic's runs are diagnostics only)"
    kept = kept_levels(cfg, game, curves)
    keep = pd.Series(False, index=policies.index)
    for algorithm, entropy in kept.items():
        keep |= (policies.algorithm == algorithm) & (policies.entropy == entropy)
    return policies[keep].reset_index(drop=True), (
        "each algorithm's best entropy level within the block (lowest mean final NashConv of "
        "its seeds): " + ", ".join(f"{a} {e:g}" for a, e in kept.items()))


def _derive(build: Path, games: dict, cfg: Mapping, compiled: Mapping, folder) -> None:
    """Make again the derived tables, seeds, compute minutes and devices of every game with
    a block whose blocks may have changed (those of ``compiled``)."""
    for game, entry in games.items():
        if not entry["blocks"] or game not in compiled:
            continue  # no block, or no new one: its tables stand
        entry["seeds"] = block_seeds(cfg, game, entry["blocks"], f"{folder}: {game}")
        frames = [read_table(build / block_folder(game, b) / "curves.parquet")
                  for b in entry["blocks"]]
        for table_name, table in derived_tables(cfg, game, pd.concat(frames),
                                                compiled[game]).items():
            write_table(table, build / f"neural/{game}/{table_name}.parquet",
                        columns=DERIVED[table_name], config=cfg,
                        extra={"seeds": entry["seeds"]} if table_name == "summary" else
                        {"bootstrap": dict(cfg["bootstrap"], statistic="mean over seeds",
                                           implementation="scipy.stats.bootstrap")})
        provenance = [json.loads((build / block_folder(game, b) / "provenance.json")
                                 .read_text()) for b in entry["blocks"]]
        entry["compute_minutes"] = round(sum(p["compute_seconds"] for p in provenance)
                                         / 60.0, 2)
        pieces = [piece for p in provenance for piece in p["pieces"]]
        entry["cpu_hours"] = round(sum(float(p.get("seconds", 0.0)) for p in pieces
                                       if p.get("platform") == "cpu") / 3600.0, 2)
        entry["gpu_minutes"] = round(sum(float(p.get("seconds", 0.0)) for p in pieces
                                         if p.get("platform") != "cpu") / 60.0, 2)
        entry["devices"] = sorted({d for p in provenance for d in p["devices"]})


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
