"""`make publish-blocks` with no pack where it looks: one line naming the folders it looked in
(OUT and CPU_OUT) before anything runs, not argparse's "the following arguments are required:
PACK"; and `neurd published-add` naming a PACK that holds no blocks.json before it reads the
config."""

import logging
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from neurd import cli
from neurd.publication import commands

ROOT = Path(__file__).resolve().parents[1]
KEEP = ["--keep-reports", "bench/gpu/allocations", "--keep-cpu-reports", "bench/cpu/allocations"]
needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="no make here")


def _make(tmp_path: Path, *assignments: str, dry: bool = False):
    """``make publish-blocks`` in the repository with a stand-in venv whose ``neurd`` only
    records its arguments: (the run, the ``neurd`` commands it ran)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True, exist_ok=True)
    calls = tmp_path / "calls.txt"
    neurd = venv / "bin/neurd"
    neurd.write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\n')
    neurd.chmod(0o755)
    stamp = venv / ".installed"  # as new as requirements.lock: the venv is not made
    stamp.touch()
    newest = max((ROOT / name).stat().st_mtime for name in ("requirements.lock",
                                                            "pyproject.toml"))
    when = max(time.time(), newest + 1)
    os.utime(stamp, (when, when))
    done = subprocess.run(["make", *(["-n"] if dry else []), "publish-blocks",
                           f"VENV={venv}", *assignments], cwd=ROOT, capture_output=True,
                          text=True)
    return done, calls.read_text().splitlines() if calls.is_file() else []


def _folders(tmp_path: Path) -> tuple[Path, Path]:
    out, cpu_out = tmp_path / "allocation-out", tmp_path / "cpu-allocation-out"
    out.mkdir()
    cpu_out.mkdir()
    return out, cpu_out


@needs_make
def test_with_no_pack_it_names_the_folders_it_looked_in(tmp_path):
    out, cpu_out = _folders(tmp_path)
    (out / "blocks.tar.000").write_bytes(b"")  # a part without its index is no pack
    done, calls = _make(tmp_path, f"OUT={out}", f"CPU_OUT={cpu_out}")
    assert done.returncode != 0 and not calls
    said = [line for line in done.stderr.splitlines() if line.startswith("publish-blocks:")]
    assert said == [f"publish-blocks: neither OUT={out} nor CPU_OUT={cpu_out} holds a pack "
                    "(blocks.json); name the folder of a pack with FROM=<folder>"], done.stderr
    assert "arguments are required" not in done.stderr
    dry, _ = _make(tmp_path, f"OUT={out}", f"CPU_OUT={cpu_out}", dry=True)
    assert dry.returncode == 0, dry.stderr  # `make -n publish-blocks` (the docs' check) plans


@needs_make
def test_a_from_given_empty_is_named(tmp_path):
    out, cpu_out = _folders(tmp_path)
    (out / "blocks.json").write_text("{}")
    done, calls = _make(tmp_path, "FROM=", f"OUT={out}", f"CPU_OUT={cpu_out}")
    assert done.returncode != 0 and not calls
    said = [line for line in done.stderr.splitlines() if line.startswith("publish-blocks:")]
    assert said == ["publish-blocks: FROM is empty; name the folder of a pack with "
                    "FROM=<folder>"], done.stderr


@needs_make
def test_the_folders_that_hold_a_pack_are_published(tmp_path):
    """CPU_OUT's pack alone; then OUT as a folder of packs too (FROM takes one)."""
    out, cpu_out = _folders(tmp_path)
    (cpu_out / "blocks.json").write_text("{}")
    done, calls = _make(tmp_path, f"OUT={out}", f"CPU_OUT={cpu_out}")
    assert done.returncode == 0, done.stderr
    assert calls == [" ".join(["published-add", "workflow/config/paper.yaml", str(cpu_out),
                               *KEEP]),
                     "published-readme published/paper", "published-findings published/paper",
                     "published-costs published/paper"]
    (out / "gpu-1").mkdir()
    (out / "gpu-1/blocks.json").write_text("{}")
    (tmp_path / "calls.txt").unlink()
    done, calls = _make(tmp_path, f"OUT={out}", f"CPU_OUT={cpu_out}")
    assert done.returncode == 0, done.stderr
    assert calls[0] == " ".join(["published-add", "workflow/config/paper.yaml", str(out),
                                 str(cpu_out), *KEEP])


@pytest.mark.parametrize("pack, said", [
    ("empty", "{pack}: no pack here (no blocks.json in it or in its folders; a pack is a "
              "blocks.json with its parts)"),
    ("absent", "{pack}: no pack here (no such file or folder; a pack is a blocks.json with "
               "its parts)"),
    (" ", "PACK ' ' is empty: name a blocks.json or the folder holding it")])
def test_published_add_names_a_pack_that_is_none_before_reading_the_config(
        tmp_path, monkeypatch, caplog, pack, said):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty/notes.txt").write_text("no pack")
    given = str(tmp_path / pack) if pack.strip() else pack

    def unread(args):
        raise AssertionError("the config was read before the packs were found")

    monkeypatch.setattr(commands, "_config_and_folder", unread)
    with caplog.at_level(logging.INFO):
        assert cli.main(["published-add", "workflow/config/paper.yaml", given]) == 2
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == [f"neurd published-add: {said.format(pack=given)}"]
