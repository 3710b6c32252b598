"""Files carried between machines in a few parts of bounded size, verified before use.

A short GPU allocation hands back only a few files of bounded size.  :func:`pack`
tars the files a job made into parts of at most :data:`PART_BYTES`
(``<name>.tar.000``, ``.001``, ...) and writes an index ``<name>.json``: the
parts in order with their sizes and SHA-256, every member with its size and
SHA-256, and whatever record the caller adds (``extra``).

:func:`unpack` is the other end.  Before anything is written it checks the
whole pack: the index's format, every part present with its size and hash (a
part missing, from another pack or in the wrong order is named), the archive's
members exactly the index's (names, sizes), each a regular file with a plain
relative name that the caller allows, within the stated counts and sizes.
Only then are the members extracted, each checked against its hash, into a
fresh temporary folder that the caller swaps into place or removes: on any
failure nothing the caller has is touched.

The caller's record (``extra``: an allocation's report, say) is written twice: in the
index, where it is read, and as the member :data:`RECORD` of the archive, under the parts'
hashes; :func:`unpack` refuses a pack whose index's record is not its archive's (an index
edited by hand), and gives the caller no :data:`RECORD` file.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
import tarfile
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path, PurePosixPath

FORMAT = "neurd-pack"
VERSION = 1
PART_BYTES = 15 * 2**20  # a part, under the 16 MiB a file may have on the way back
MAX_PARTS = 100
MAX_MEMBERS = 5000
MAX_MEMBER_BYTES = 64 * 2**20
MAX_TOTAL_BYTES = 512 * 2**20
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
RECORD = "pack-record.json"  # the caller's record, in the archive (see the module)
_OWN_KEYS = ("format", "version", "name", "sha256", "bytes", "parts", "members")


def _record_bytes(record: Mapping) -> bytes:
    return (json.dumps(record, indent=1, sort_keys=True) + "\n").encode()


class PackError(ValueError):
    """A pack that does not check; the message names the file and what is wrong."""


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def pack(files: Mapping[str, str | os.PathLike], out: str | os.PathLike, name: str,
         extra: Mapping | None = None, part_bytes: int = PART_BYTES) -> dict:
    """Tar ``files`` (member name -> path) into ``out/<name>.tar.NNN`` and write the index
    ``out/<name>.json``; return the index."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    record = dict(extra or {})
    clash = sorted(set(record) & set(_OWN_KEYS)) + ([RECORD] if RECORD in files else [])
    if clash:
        raise PackError(f"{out}/{name}: {clash} are the pack's own names")
    contents = {m: Path(p).read_bytes() for m, p in files.items()}
    if record:
        contents[RECORD] = _record_bytes(record)
    members, buffer = [], io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for member in sorted(contents):
            data = contents[member]
            info = tarfile.TarInfo(member)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
            members.append({"name": member, "bytes": len(data), "sha256": _sha256(data)})
    archive = buffer.getvalue()
    parts = []
    for k, start in enumerate(range(0, max(len(archive), 1), part_bytes)):
        data = archive[start:start + part_bytes]
        part = f"{name}.tar.{k:03d}"
        (out / part).write_bytes(data)
        parts.append({"name": part, "bytes": len(data), "sha256": _sha256(data)})
    if len(parts) > MAX_PARTS:
        raise PackError(f"{out}/{name}: {len(parts)} parts, more than {MAX_PARTS}")
    index = {"format": FORMAT, "version": VERSION, "name": name, "sha256": _sha256(archive),
             "bytes": len(archive), "parts": parts, "members": members, **record}
    (out / f"{name}.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return index


def read_index(path: str | os.PathLike) -> dict:
    """The index at ``path``, its fields checked (not yet its parts)."""
    path = Path(path)
    try:
        if path.stat().st_size > 16 * 2**20:
            raise PackError(f"{path} is {path.stat().st_size} bytes: not a pack's index")
        index = json.loads(path.read_text())
    except FileNotFoundError:
        raise PackError(f"{path} is missing: not a pack (its index)") from None
    except (OSError, ValueError) as error:
        raise PackError(f"{path} cannot be read as a pack's index ({error})") from None
    if not isinstance(index, dict) or index.get("format") != FORMAT:
        raise PackError(f"{path} is not a pack's index (format {FORMAT!r})")
    if index.get("version") != VERSION:
        raise PackError(f"{path}: pack version {index.get('version')!r}, this neurd reads "
                        f"{VERSION}")

    def records(key, limit):
        value = index.get(key)
        if not (isinstance(value, list) and len(value) <= limit and all(
                isinstance(r, dict) and isinstance(r.get("name"), str)
                and type(r.get("bytes")) is int and r["bytes"] >= 0
                and isinstance(r.get("sha256"), str) and len(r["sha256"]) == 64
                for r in value)):
            raise PackError(f"{path}: '{key}' is not a list of at most {limit} records of name, "
                            "bytes and sha256")
        return value

    parts = records("parts", MAX_PARTS)
    records("members", MAX_MEMBERS)
    if not parts:
        raise PackError(f"{path}: the pack has no part")
    for part in parts:
        if not _NAME.fullmatch(part["name"]):
            raise PackError(f"{path}: part name {part['name']!r} is not a plain file name")
    if not (type(index.get("bytes")) is int and isinstance(index.get("sha256"), str)):
        raise PackError(f"{path}: the archive's bytes and sha256 are missing")
    return index


def _checked_member(index_path: Path, member: tarfile.TarInfo, expected: Mapping,
                    allowed: Callable[[str], bool]) -> None:
    name = member.name
    where = f"{index_path}: member {name!r}"
    pure = PurePosixPath(name)
    if (not name or pure.is_absolute() or ".." in pure.parts or "\\" in name
            or any(not _NAME.fullmatch(p) for p in pure.parts)):
        raise PackError(f"{where} is not a plain relative path")
    if member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE) or member.issparse():
        raise PackError(f"{where} is not a regular file (links, devices, folders and sparse "
                        "files are refused)")
    if name != RECORD and not allowed(name):
        raise PackError(f"{where} is not a file this pack may hold")
    if member.size > MAX_MEMBER_BYTES:
        raise PackError(f"{where} is {member.size} bytes, more than {MAX_MEMBER_BYTES}")
    if member.size != expected["bytes"]:
        raise PackError(f"{where} is {member.size} bytes, the index says {expected['bytes']}")


def _joined_parts(index_path: Path, index: dict) -> bytes:
    """The archive: the index's parts, each checked against its size and SHA-256, joined and
    checked against the archive's."""
    archive = []
    for k, part in enumerate(index["parts"]):
        path = index_path.parent / part["name"]
        if not path.is_file() or path.is_symlink():
            raise PackError(f"{path} is missing: part {k + 1} of {len(index['parts'])} of the "
                            f"pack {index_path}")
        if path.stat().st_size != part["bytes"]:
            raise PackError(f"{path} is {path.stat().st_size} bytes, the index says "
                            f"{part['bytes']}: truncated, or a part of another pack")
        data = path.read_bytes()
        if _sha256(data) != part["sha256"]:
            raise PackError(f"{path} is not part {k + 1} of the pack {index_path} (its SHA-256 "
                            "differs from the index's): a part of another pack, or altered")
        archive.append(data)
    archive = b"".join(archive)
    if len(archive) != index["bytes"] or _sha256(archive) != index["sha256"]:
        raise PackError(f"{index_path}: the parts joined are not the archive the index "
                        "describes")
    if len(archive) > MAX_TOTAL_BYTES:
        raise PackError(f"{index_path}: the archive is {len(archive)} bytes, more than "
                        f"{MAX_TOTAL_BYTES}")
    return archive


def unpack(index_path: str | os.PathLike, allowed: Callable[[str], bool],
           work: str | os.PathLike) -> tuple[dict, Path]:
    """Check the pack whose index is ``index_path`` and extract it into a new temporary
    folder inside ``work``; return ``(index, folder)``.  The caller moves what it wants out
    of the folder and removes it.  ``allowed(member name)``: whether the pack may hold it.
    Raises :class:`PackError` naming the file and what is wrong, having written nothing
    (the temporary folder is removed)."""
    index_path = Path(index_path)
    index = read_index(index_path)
    archive = _joined_parts(index_path, index)
    expected = {m["name"]: m for m in index["members"]}
    if len(expected) != len(index["members"]):
        raise PackError(f"{index_path}: the index names a member twice")
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:") as tar:
            members = []
            for member in tar:
                if len(members) >= MAX_MEMBERS:
                    raise PackError(f"{index_path}: more than {MAX_MEMBERS} members")
                if member.name not in expected:
                    raise PackError(f"{index_path}: member {member.name!r} is not in the index")
                _checked_member(index_path, member, expected[member.name], allowed)
                members.append(member)
            names = [m.name for m in members]
            if sorted(names) != sorted(expected) or len(set(names)) != len(names):
                missing = sorted(set(expected) - set(names))
                raise PackError(f"{index_path}: the archive's members are not the index's "
                                f"(missing {missing[:3]}, or one twice)")
            if sum(m.size for m in members) > MAX_TOTAL_BYTES:
                raise PackError(f"{index_path}: the members hold more than {MAX_TOTAL_BYTES} "
                                "bytes")
            Path(work).mkdir(parents=True, exist_ok=True)
            folder = Path(tempfile.mkdtemp(prefix=".unpack-", dir=work))
            try:
                record = {k: v for k, v in index.items() if k not in _OWN_KEYS}
                for member in members:
                    data = tar.extractfile(member).read()
                    if _sha256(data) != expected[member.name]["sha256"]:
                        raise PackError(f"{index_path}: member {member.name!r} is not the file "
                                        "that was packed (SHA-256 differs from the index's)")
                    if member.name == RECORD:
                        if data != _record_bytes(record):
                            raise PackError(f"{index_path}: the index's record (its "
                                            f"{sorted(record)}) is not the one packed: edited "
                                            "after packing")
                        continue
                    target = folder / member.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    target.write_bytes(data)
                if record and RECORD not in expected:
                    raise PackError(f"{index_path}: the index holds a record ({sorted(record)}) "
                                    "its archive does not: an index edited, or not a pack")
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
    except tarfile.TarError as error:
        raise PackError(f"{index_path}: the archive cannot be read ({error})") from None
    return index, folder
