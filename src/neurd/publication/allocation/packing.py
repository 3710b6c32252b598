"""What comes back: the finished blocks' tables and the stopped blocks' states packed into
``blocks.json`` and its parts, and the profile trace."""

from __future__ import annotations

import tarfile
from pathlib import Path

from neurd.publication.allocation.report import Report
from neurd.publication.packs import pack
from neurd.publication.resume_states import state_files
from neurd.tables import config_hash


def pack_blocks(report: Report, cfg: dict, results: Path, finished: list[Path],
                stopped: list[Path], work: Path | None = None) -> None:
    """Pack the finished blocks' tables and the stopped blocks' states (with their logs), run in
    ``work`` (default ``results/allocation``), into ``blocks.json`` and its parts in the folder
    that comes back, with the report."""
    files = {}
    for folder, names in [(f, ("curves.parquet", "policies.parquet")) for f in finished] + [
            (f, state_files(f)) for f in stopped]:
        for name in [*names, "run.log"]:
            files[folder.relative_to(work or results / "allocation").as_posix()
                  + f"/{name}"] = (
                folder / name)
    if files:
        pack(files, report.out, "blocks", extra={"config_hash": config_hash(cfg),
                                                  "allocation": report.data})


def pack_profile(report: Report) -> None:
    folder = report.work / "profile"
    if not folder.is_dir():
        return
    target = report.out / "profile.tar.gz"
    # the whole trace; over the size that comes back, the XPlane files alone (what xprof
    # reads; the Chrome trace is derived from them)
    for left_out in ((), (".trace.json.gz",)):
        with tarfile.open(target, "w:gz") as tar:
            tar.add(folder, arcname="profile", filter=lambda member, ends=left_out: None
                    if member.name.endswith(ends) else member)
        if target.stat().st_size <= 15 * 2**20:
            report.step("profile", bytes=target.stat().st_size, left_out=list(left_out))
            return
    target.unlink()
    report.step("profile", dropped="over 15 MiB")

