"""A publication's layout and manifest: the names of its files, its caps, its manifest read
and checked field by field, and how a refusal names the file.

Shared by the reader's check (:mod:`neurd.publication.integrity`), the content check
(:mod:`neurd.publication.content`) and the writer (:mod:`neurd.publication.writer`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

from neurd.neural.results import CI_COLUMNS, SUMMARY_COLUMNS
from neurd.neural.runs import parse_block
from neurd.tables import canonical_json

FORMAT = "neurd-publication"
VERSION = 2  # 2: seed blocks
MANIFEST = "manifest.json"
CONFIG = "config/neural.json"
BLOCK_FILES = ("curves.parquet", "policies.parquet", "provenance.json")
DERIVED = {"summary": SUMMARY_COLUMNS, "nashconv_ci": CI_COLUMNS}
MAX_BYTES = 60 * 2**20  # the whole folder (the repository ships it)
MAX_FILE_BYTES = 16 * 2**20
MAX_FILES = 3000
HEX16 = re.compile(r"[0-9a-f]{16}")
HEX64 = re.compile(r"[0-9a-f]{64}")


class PublicationError(ValueError):
    """A publication that cannot be made or read as it is; the message names the file."""


def block_folder(game: str, name: str) -> str:
    return f"neural/{game}/blocks/{name}"


def derived_files(game: str) -> list[str]:
    return [f"neural/{game}/{name}.parquet" for name in DERIVED]


def sha256(path: Path) -> str:
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


_VERBS = ("is ", "holds ", "has ", "lists ", "records ", "was ", "cannot ")


def fail(path, message: str):
    """Refuse, naming ``path``: ``<path> is ...`` for what the file is, ``<path>: ...`` for
    what one of its parts is."""
    raise PublicationError(f"{path}{' ' if message.startswith(_VERBS) else ': '}{message}")


def read_manifest(folder: Path) -> dict | None:
    """The manifest of ``folder``, its fields checked; None if there is none."""
    path = folder / MANIFEST
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_symlink() or not path.is_file():
        fail(path, "is not a regular file")
    if path.stat().st_size > 4 * 2**20:
        fail(path, f"is {path.stat().st_size} bytes, too large for a manifest")
    try:
        manifest = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        fail(path, f"cannot be read ({error})")
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        fail(path, f"is not a publication's manifest (format {FORMAT!r})")
    if manifest.get("version") != VERSION:
        fail(path, f"publication format version {manifest.get('version')!r}, this code reads "
                    f"version {VERSION}: publish it again (with --replace)")
    if not (isinstance(manifest.get("config_hash"), str)
            and HEX16.fullmatch(manifest["config_hash"])):
        fail(path, "config_hash is not 16 hex digits")
    files = manifest.get("files")
    if not isinstance(files, dict) or len(files) > MAX_FILES:
        fail(path, f"files is not a mapping of at most {MAX_FILES} paths")
    for relative, entry in files.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("sha256"), str)
                and HEX64.fullmatch(entry["sha256"]) and type(entry.get("bytes")) is int
                and 0 <= entry["bytes"] <= MAX_FILE_BYTES):
            fail(path, f"files[{relative!r}] is not a record of sha256 and bytes (at most "
                        f"{MAX_FILE_BYTES})")
        pure = PurePosixPath(relative)
        if (not relative or pure.is_absolute() or ".." in pure.parts or "\\" in relative
                or pure.as_posix() != relative or relative == MANIFEST):
            fail(path, f"lists {relative!r}, which is not a plain path inside the folder")
    publications = manifest.get("games")
    if not isinstance(publications, dict):
        fail(path, "games is not a mapping")
    for game, entry in publications.items():
        if not (isinstance(entry, dict) and isinstance(entry.get("blocks"), list)
                and all(isinstance(b, str) for b in entry["blocks"])
                and isinstance(entry.get("seeds"), list)
                and all(type(s) is int for s in entry["seeds"])):
            fail(path, f"games[{game!r}] is not a record of blocks and seeds")
        in_progress = entry.get("in_progress", [])
        if not (isinstance(in_progress, list) and all(isinstance(b, str) for b in in_progress)):
            fail(path, f"games[{game!r}].in_progress is not a list of block names")
        for name in entry["blocks"] + in_progress:
            try:
                parse_block(name)
            except ValueError as error:
                fail(path, f"games[{game!r}]: {error}")
    history = manifest.get("history_bytes", 0)
    if type(history) is not int or history < 0:
        fail(path, "history_bytes is not a number of bytes")
    if type(manifest.get("bytes")) is not int:
        fail(path, "bytes is not a number of bytes")
    return manifest


def published_games(folder: str | os.PathLike) -> list[str]:
    """The games with at least one block in a publication (none if there is no publication)."""
    manifest = read_manifest(Path(folder))
    return [] if manifest is None else [g for g, e in manifest["games"].items() if e["blocks"]]


def interrupted(folder: Path) -> list[Path]:
    """What an interrupted write left beside ``folder`` (its build and its previous state)."""
    return sorted(folder.parent.glob(f".{folder.name}.new-*")) + sorted(
        folder.parent.glob(f".{folder.name}.old-*"))
