"""The git revision of the source tree: which code made a result.

Every table's provenance and each piece of a neural job record it; it sits
on the lowest floor of the package (``tests/test_imports.py``), so any
module may ask for it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

REVISION_FILE_VARIABLE = "NEURD_REVISION_FILE"


def source_hash(*folders: str | os.PathLike) -> str:
    """First 16 hex digits of a SHA-256 over every ``.py`` file under ``folders`` (default:
    the ``neurd`` package): path and content.  Names the code that ran where no git is."""
    roots = [Path(f) for f in folders] or [Path(__file__).resolve().parent]
    digest = hashlib.sha256()
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            digest.update(path.relative_to(root.parent).as_posix().encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def git_revision(cwd: str | os.PathLike = ".") -> dict[str, object]:
    """Commit of the working tree and whether it has uncommitted changes.

    Where git cannot tell (a copy of the tree without its history, as a GPU machine gets),
    the file ``$NEURD_REVISION_FILE`` written where git could (``make
    gpu-allocation-inputs``) names the commit, believed only if the package's source hash
    now is the one it recorded; else the commit is unknown and the source hash says what ran.
    """
    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.CalledProcessError):
        pass
    here = source_hash()
    recorded = {}
    if os.environ.get(REVISION_FILE_VARIABLE):
        try:
            recorded = json.loads(Path(os.environ[REVISION_FILE_VARIABLE]).read_text())
        except (OSError, ValueError):
            recorded = {}
    if isinstance(recorded, dict) and recorded.get("source_hash") == here and recorded.get(
            "commit"):
        return {"commit": str(recorded["commit"]), "dirty": bool(recorded.get("dirty")),
                "source_hash": here}
    return {"commit": f"unknown (source {here})", "dirty": None, "source_hash": here}
