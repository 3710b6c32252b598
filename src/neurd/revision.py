"""The git revision of the source tree: which code made a result.

Every table's provenance and each piece of a neural job record it; it sits
on the lowest floor of the package (``tests/test_imports.py``), so any
module may ask for it.
"""

from __future__ import annotations

import os
import subprocess


def git_revision(cwd: str | os.PathLike = ".") -> dict[str, object]:
    """Commit of the working tree and whether it has uncommitted changes."""
    def git(*args):
        return subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        return {"commit": git("rev-parse", "HEAD"), "dirty": bool(git("status", "--porcelain"))}
    except (OSError, subprocess.CalledProcessError):
        return {"commit": None, "dirty": None}
