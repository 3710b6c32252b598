"""Packs (neurd.publication.packs): what a GPU allocation hands back is verified whole before
anything is
written, and only what the caller allows is extracted.  Each class of bad pack is refused with
one message naming the file, and leaves the caller's folder exactly as it was: a missing middle
part, a part of another pack, parts out of order (more than 100 included, where names sort as
text), an altered part, members the index does not list or that differ from it, members that
are links, devices, absolute or '..' paths, sparse files, more members or bytes than stated,
and members the caller does not allow."""

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest

from neurd.publication import packs
from neurd.publication.packs import PackError


def _allowed(name: str) -> bool:
    return name.startswith("neural/") and name.endswith((".parquet", ".log"))


@pytest.fixture
def files(tmp_path) -> dict:
    source = tmp_path / "source"
    source.mkdir()
    out = {}
    for k in range(5):
        path = source / f"f{k}"
        path.write_bytes(bytes([k]) * (3000 + 1000 * k))
        out[f"neural/kuhn/blocks/learned_s{k}-{k}/curves.parquet"] = path
    return out


@pytest.fixture
def made(tmp_path, files) -> Path:
    out = tmp_path / "pack"
    packs.pack(files, out, "blocks", extra={"config_hash": "0" * 16}, part_bytes=4096)
    return out


def _state(folder: Path) -> dict:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.fixture
def target(tmp_path) -> Path:
    """The caller's folder, with something of its own that no failure may touch."""
    folder = tmp_path / "work"
    (folder / "keep").mkdir(parents=True)
    (folder / "keep/file").write_text("mine")
    return folder


def _refused(made: Path, target: Path, match: str, allowed=_allowed):
    before = _state(target)
    with pytest.raises(PackError, match=match) as error:
        packs.unpack(made / "blocks.json", allowed, target)
    assert _state(target) == before, "a refused pack changed the caller's folder"
    assert not list(target.glob(".unpack-*"))
    return error.value


def test_a_pack_round_trips(made, target, files):
    index, folder = packs.unpack(made / "blocks.json", _allowed, target)
    assert index["config_hash"] == "0" * 16 and len(index["parts"]) > 5
    for member, path in files.items():
        assert (folder / member).read_bytes() == Path(path).read_bytes()
    assert _state(target / "keep") == {"file": b"mine"}


def test_a_missing_middle_part_is_named(made, target):
    middle = made / "blocks.tar.002"
    middle.unlink()
    assert str(middle) in str(_refused(made, target, "is missing: part 3 of"))


def test_a_part_of_another_pack_is_refused(made, target, tmp_path, files):
    other = tmp_path / "other"
    changed = {name: files["neural/kuhn/blocks/learned_s4-4/curves.parquet"] for name in files}
    packs.pack(changed, other, "blocks", part_bytes=4096)
    assert (other / "blocks.tar.001").read_bytes() != (made / "blocks.tar.001").read_bytes()
    shutil.copy(other / "blocks.tar.001", made / "blocks.tar.001")
    _refused(made, target, r"blocks\.tar\.001 .*(another pack|bytes)")


def test_an_altered_part_is_refused(made, target):
    part = made / "blocks.tar.001"
    data = bytearray(part.read_bytes())
    data[10] ^= 1
    part.write_bytes(bytes(data))
    _refused(made, target, "is not part 2 of the pack")


def test_a_hundred_parts_are_joined_in_the_index_order(tmp_path, target):
    """Parts are joined in the index's order: a hundred of them (the cap) round-trip, and an
    index listing them in another order is refused."""
    source = tmp_path / "big"
    source.write_bytes(bytes(range(256)) * 400)
    size = packs.pack({"neural/big.parquet": source}, tmp_path / "once", "blocks")["bytes"]
    out = tmp_path / "hundred"
    index = packs.pack({"neural/big.parquet": source}, out, "blocks", part_bytes=-(-size // 100))
    assert len(index["parts"]) == 100
    _, folder = packs.unpack(out / "blocks.json", _allowed, target)
    assert (folder / "neural/big.parquet").read_bytes() == source.read_bytes()
    shutil.rmtree(folder)
    index["parts"][10], index["parts"][11] = index["parts"][11], index["parts"][10]
    (out / "blocks.json").write_text(json.dumps(index))
    _refused(out, target, "the parts joined are not the archive")


def test_an_index_of_more_parts_than_the_cap_is_refused(made, target):
    index = json.loads((made / "blocks.json").read_text())
    index["parts"] = index["parts"] * 30
    (made / "blocks.json").write_text(json.dumps(index))
    _refused(made, target, "at most 100 records")


def test_more_parts_than_the_cap_are_refused(tmp_path):
    source = tmp_path / "big"
    source.write_bytes(bytes(200_000))
    with pytest.raises(PackError, match="more than 100"):
        packs.pack({"neural/big.parquet": source}, tmp_path / "out", "blocks", part_bytes=1000)


def _forge(made: Path, members: list[tuple[tarfile.TarInfo, bytes | None]],
           index_members=None) -> None:
    """Replace the pack's archive by one of ``members`` and reseal the index around it, as a
    forger would (so that the member checks are what refuses it)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, None if data is None else io.BytesIO(data))
    archive = buffer.getvalue()
    for old in made.glob("blocks.tar.*"):
        old.unlink()
    (made / "blocks.tar.000").write_bytes(archive)
    index = json.loads((made / "blocks.json").read_text())
    index["parts"] = [{"name": "blocks.tar.000", "bytes": len(archive),
                       "sha256": packs._sha256(archive)}]
    index["bytes"], index["sha256"] = len(archive), packs._sha256(archive)
    index["members"] = index_members if index_members is not None else [
        {"name": i.name, "bytes": i.size, "sha256": packs._sha256(d or b"")}
        for i, d in members]
    (made / "blocks.json").write_text(json.dumps(index))


def _file(name: str, data: bytes = b"x" * 10) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "absolute", "dotdot", "device",
                                  "folder"])
def test_members_that_are_not_plain_files_are_refused(made, target, kind):
    if kind in ("symlink", "hardlink"):
        info = tarfile.TarInfo("neural/link.parquet")
        info.type = tarfile.SYMTYPE if kind == "symlink" else tarfile.LNKTYPE
        info.linkname = "/etc/passwd"
        member = (info, None)
    elif kind == "device":
        info = tarfile.TarInfo("neural/dev.parquet")
        info.type = tarfile.CHRTYPE
        member = (info, None)
    elif kind == "folder":
        info = tarfile.TarInfo("neural/dir.parquet")
        info.type = tarfile.DIRTYPE
        member = (info, None)
    else:
        member = _file("/neural/abs.parquet" if kind == "absolute"
                       else "neural/../../escape.parquet")
    _forge(made, [member])
    _refused(made, target, "plain relative path|not a regular file", allowed=lambda n: True)


def test_a_sparse_member_declaring_a_huge_file_is_refused(made, target):
    info = tarfile.TarInfo("neural/sparse.parquet")
    info.type = tarfile.GNUTYPE_SPARSE
    info.size = 0
    _forge(made, [(info, b"")], index_members=[{"name": "neural/sparse.parquet",
                                                "bytes": 50 * 2**30, "sha256": "0" * 64}])
    _refused(made, target, "sparse|regular|bytes")


def test_a_member_the_caller_does_not_allow_is_refused(made, target):
    _forge(made, [_file("neural/kuhn/blocks/learned_s0-0/curves.parquet"),
                  _file("neural/kuhn/game.npz")])
    _refused(made, target, "game.npz' is not a file this pack may hold")


def test_members_that_differ_from_the_index_are_refused(made, target):
    good = _file("neural/a.parquet", b"abc")
    _forge(made, [good], index_members=[{"name": "neural/a.parquet", "bytes": 4,
                                         "sha256": packs._sha256(b"abc")}])
    _refused(made, target, "is 3 bytes, the index says 4")
    _forge(made, [good], index_members=[{"name": "neural/a.parquet", "bytes": 3,
                                         "sha256": packs._sha256(b"abd")}])
    _refused(made, target, "not the file that was packed")
    _forge(made, [good], index_members=[])
    _refused(made, target, "not in the index")
    _forge(made, [good], index_members=[
        {"name": "neural/a.parquet", "bytes": 3, "sha256": packs._sha256(b"abc")},
        {"name": "neural/b.parquet", "bytes": 3, "sha256": packs._sha256(b"abc")}])
    _refused(made, target, "missing")


def test_too_many_members_or_bytes_are_refused(made, target, monkeypatch):
    members = [_file(f"neural/m{k}.parquet", b"y") for k in range(30)]
    _forge(made, members)
    monkeypatch.setattr(packs, "MAX_MEMBERS", 20)
    _refused(made, target, "at most 20 records|more than 20 members")
    monkeypatch.setattr(packs, "MAX_MEMBERS", 5000)
    monkeypatch.setattr(packs, "MAX_TOTAL_BYTES", 10)
    _refused(made, target, "more than 10")


@pytest.mark.parametrize("edit, match", [
    (lambda i: i.update(format="other"), "not a pack's index"),
    (lambda i: i.update(version=9), "pack version 9"),
    (lambda i: i.update(parts="all"), "'parts' is not a list"),
    (lambda i: i["parts"][0].update(bytes=-1), "'parts' is not a list"),
    (lambda i: i["parts"][0].update(name="../x"), "not a plain file name"),
    (lambda i: i.update(parts=[]), "no part"),
], ids=["format", "version", "parts", "bytes", "name", "empty"])
def test_a_malformed_index_is_named(made, target, edit, match):
    index = json.loads((made / "blocks.json").read_text())
    edit(index)
    (made / "blocks.json").write_text(json.dumps(index))
    error = _refused(made, target, match)
    assert "blocks.json" in str(error)


def test_an_index_that_is_not_json_or_missing_is_named(made, target):
    (made / "blocks.json").write_text("{")
    _refused(made, target, "cannot be read")
    (made / "blocks.json").unlink()
    _refused(made, target, "is missing")


def test_the_callers_record_is_packed_and_an_edited_one_refused(tmp_path):
    """An allocation's report rides in the index and in the archive: an index whose report
    was edited (a made-up processor) is refused, naming what differs; the caller gets no
    record file among the members."""
    source = tmp_path / "a.parquet"
    source.write_bytes(b"abc")
    out = tmp_path / "pack"
    record = {"config_hash": "0123456789abcdef", "allocation": {"processor": "AMD EPYC"}}
    packs.pack({"neural/a.parquet": source}, out, "blocks", extra=record)
    index, folder = packs.unpack(out / "blocks.json", lambda m: True, tmp_path / "work")
    assert index["allocation"] == record["allocation"]
    assert sorted(p.name for p in folder.rglob("*") if p.is_file()) == ["a.parquet"]
    edited = json.loads((out / "blocks.json").read_text())
    edited["allocation"]["processor"] = "A made-up processor"
    (out / "blocks.json").write_text(json.dumps(edited))
    with pytest.raises(packs.PackError, match="record .* is not the one packed"):
        packs.unpack(out / "blocks.json", lambda m: True, tmp_path / "work2")
    assert not (tmp_path / "work2").exists() or not any((tmp_path / "work2").iterdir())
    with pytest.raises(packs.PackError, match="pack's own names"):
        packs.pack({"neural/a.parquet": source}, out, "blocks", extra={"members": []})
