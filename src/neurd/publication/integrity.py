"""The check every reader makes of a publication: its files (inside the folder, regular,
of their listed size and SHA-256, nothing unlisted, within the caps), its config snapshot
(of the manifest's hash, not stale) and its games' seed blocks (the config's, whole,
disjoint).  The tables' content is :mod:`neurd.publication.content`'s.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from neurd.config import load_snapshot
from neurd.neural.runs import check_block, critics, main_critic, parse_block
from neurd.publication import resume_states
from neurd.publication.manifest import (
    BLOCK_FILES,
    CONFIG,
    MANIFEST,
    MAX_BYTES,
    MAX_FILE_BYTES,
    MAX_FILES,
    PublicationError,
    block_folder,
    derived_files,
    fail,
    interrupted,
    read_manifest,
    sha256,
    stale_keys,
)
from neurd.tables import config_hash


def check(folder: str | os.PathLike, expected: Mapping | None = None,
          expected_from: str = "", defaults: Mapping | None = None) -> tuple[dict, dict]:
    """``(manifest, config)`` of the publication in ``folder``, checked; else
    :class:`~neurd.publication.manifest.PublicationError` naming the file and what is wrong.

    The folder is a folder (not a link) holding a well-formed manifest; every
    file it lists is inside it, a regular file reached through no link, of its
    listed size and SHA-256; it holds no other file; the caps on files and
    bytes hold (counted on disk, not from the manifest); the config snapshot has
    the manifest's hash and is, given ``expected`` (the neural snapshot the
    publication should be of, read from ``expected_from``), that config
    (:func:`~neurd.publication.manifest.stale_keys`, with the neural schema's
    ``defaults``); every game is the config's with its files listed and whole,
    disjoint seed blocks.  The tables' content is
    :func:`neurd.publication.content.check_content`'s.
    """
    folder = Path(folder)
    if folder.is_symlink() or not folder.is_dir():
        left = interrupted(folder)
        raise PublicationError(
            f"{folder} is not a folder" + (f" (an interrupted publish left {left[0].name} "
                                           "beside it: run the publish again to restore it)"
                                           if left else ""))
    manifest = read_manifest(folder)
    if manifest is None:
        raise PublicationError(f"{folder}/{MANIFEST} is missing: {folder} is not a publication")
    on_disk = _files_on_disk(folder)
    _check_listed_files(folder, manifest["files"])
    cfg = _snapshot(folder, manifest, expected, expected_from, defaults)
    # after staleness: another config's file is named so
    stray = sorted(set(on_disk) - set(manifest["files"]))
    if stray:
        fail(folder / stray[0], "is not in the manifest: a publication holds only what "
                                "neurd wrote")
    _check_games(folder, manifest, cfg)
    return manifest, cfg


def _files_on_disk(folder: Path) -> list[str]:
    """Every file under ``folder`` but the manifest (relative), each a regular file reached
    through no link, within the caps on files and bytes."""
    on_disk, total = [], 0
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if path.is_symlink():
            fail(path, "is a link: a publication holds only regular files")
        if path.is_dir():
            continue
        if not path.is_file():
            fail(path, "is not a regular file")
        if relative != MANIFEST:
            on_disk.append(relative)
        total += path.stat().st_size
        if len(on_disk) > MAX_FILES:
            fail(folder, f"holds more than {MAX_FILES} files")
    if total > MAX_BYTES:
        fail(folder, f"holds {total / 2**20:.1f} MiB, more than {MAX_BYTES / 2**20:.0f} MiB")
    return on_disk


def _check_listed_files(folder: Path, files: Mapping) -> None:
    """Every file the manifest lists is there, of its listed size and SHA-256."""
    for relative, entry in files.items():
        path = folder / relative
        if not path.is_file():
            fail(path, f"is missing (listed in {folder}/{MANIFEST})")
        size = path.stat().st_size
        if size != entry["bytes"] or size > MAX_FILE_BYTES:
            fail(path, f"is {size} bytes, the manifest says {entry['bytes']}")
        if sha256(path) != entry["sha256"]:
            fail(path, "is not the file that was published (SHA-256 differs from the "
                       "manifest's): restore it from git")


def _snapshot(folder: Path, manifest: Mapping, expected: Mapping | None, expected_from: str,
              defaults: Mapping | None) -> dict:
    """The publication's config snapshot: listed, of the manifest's hash, and (given
    ``expected``) not stale."""
    if CONFIG not in manifest["files"]:
        fail(folder / CONFIG, "is not in the manifest")
    try:
        cfg = load_snapshot(folder / CONFIG)
    except (OSError, ValueError) as error:
        fail(folder / CONFIG, f"cannot be read ({error})")
    if not isinstance(cfg, dict) or not {"games", "game_strings", "seeds"} <= set(cfg):
        fail(folder / CONFIG, "is not a neural config snapshot")
    digest = config_hash(cfg)
    if digest != manifest["config_hash"]:
        fail(folder / CONFIG, f"has hash {digest}, the manifest says {manifest['config_hash']}")
    stale = [] if expected is None else stale_keys(cfg, expected, defaults or {})
    if stale:
        raise PublicationError(
            f"{folder} is stale: it was made from a neural config (hash {digest}) other than "
            f"the one {expected_from or 'expected'} gives now (hash {config_hash(expected)}): "
            + "; ".join(stale[:8])
            + ". Make it again (its blocks on a GPU, then `neurd published-add`), or set "
            "published.folder to null to draw none")
    return cfg


def _check_games(folder: Path, manifest: Mapping, cfg: Mapping) -> None:
    """Every game of the manifest is the config's, with whole, disjoint seed blocks, every
    file of its blocks, derived tables and blocks in progress listed, and nothing else."""
    files = manifest["files"]
    listed = {MANIFEST, CONFIG, "README.md"}
    for game, entry in manifest["games"].items():
        where = f"{folder}/{MANIFEST}: games[{game!r}]"
        if game not in cfg["games"]:
            raise PublicationError(f"{where} is not a game of its config ({cfg['games']})")
        seeds = block_seeds(cfg, game, entry["blocks"], where)
        if sorted(seeds) != entry["seeds"]:
            raise PublicationError(f"{where}: seeds {entry['seeds']} are not its blocks' "
                                   f"{sorted(seeds)}")
        wanted = [f"{block_folder(game, b)}/{f}" for b in entry["blocks"] for f in BLOCK_FILES]
        wanted += derived_files(game) if entry["blocks"] else []
        in_progress = entry.get("in_progress", [])
        check_in_progress(cfg, game, entry["blocks"], in_progress, where)
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
        fail(folder / extra[0], "is listed but is no file of a publication")


def check_in_progress(cfg: Mapping, game: str, blocks: list[str], in_progress: list[str],
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


def block_seeds(cfg: Mapping, game: str, blocks: list[str], where: str) -> list[int]:
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
