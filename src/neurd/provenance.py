"""Provenance of a pipeline run: code, packages, config, seeds and machine."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
from collections.abc import Mapping

from neurd.tables import config_hash

PACKAGES = (
    __package__, "snakemake", "jax", "jaxlib", "open_spiel", "numpy", "scipy",
    "pandas", "pyarrow", "matplotlib", "seaborn", "mpltern", "pygments", "pyyaml",
)


def package_versions(names=PACKAGES) -> dict[str, str | None]:
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


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


def machine() -> dict[str, object]:
    import jax

    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
    }


def collect(config: Mapping, cwd: str | os.PathLike = ".") -> dict[str, object]:
    """Everything needed to say how a set of results was made.

    ``config_hash`` is the hash of the whole validated config; ``section_hashes``
    those of its top-level sections, which is what each table's
    ``neurd.config_hash`` metadata records (a table is made from one section
    plus the seed, see :func:`neurd.config.section`).
    """
    from neurd.config import section
    from neurd.stages import SECTIONS

    return {
        "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "git": git_revision(cwd),
        "packages": package_versions(),
        "config": config,
        "config_hash": config_hash(config),
        "section_hashes": {
            name: config_hash(section(config, name)) for name in SECTIONS if name in config
        },
        "seed": config.get("seed"),
        "machine": machine(),
    }
