"""Write the conda environments from requirements.lock: every locked version, exactly.

``environment.yml`` (for conda users; with ``-e .``, the package itself) and
``workflow/envs/neurd.yaml`` (the rules' environment under ``snakemake --sdm conda``;
its post-deploy script installs the package) pin in their pip section every package the
lock pins, so a conda environment holds the versions pip's does.  ``make lock`` runs
this after re-pinning the lock; ``tests/test_packaging.py`` fails when they differ.

    python workflow/envs/from_lock.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = "3.11"
HEADERS = {
    "environment.yml": (
        "# For conda users: `conda env create -f environment.yml && conda activate "
        "neurd-repro`,\n"
        "# from the repository root (the `-e .` line installs the neurd package itself, which "
        "the\n"
        "# Snakefile imports). Written from requirements.lock by workflow/envs/from_lock.py "
        "(`make lock`):\n"
        "# every package at exactly the locked version. The tested path is pip (`make test`).\n"
        "name: neurd-repro\n"),
    "workflow/envs/neurd.yaml": (
        "# Conda environment of every rule (`snakemake --sdm conda`). Written from "
        "requirements.lock\n"
        "# by workflow/envs/from_lock.py (`make lock`): every package at exactly the locked "
        "version.\n"
        "# neurd.post-deploy.sh installs the package itself into the environment.\n"),
}


def locked(lock: Path = ROOT / "requirements.lock") -> list[str]:
    """The lock's pins, in its order (comments and blank lines left out)."""
    lines = (line.strip() for line in lock.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def environment(name: str, pins: list[str]) -> str:
    """The text of the conda environment file ``name`` (a key of :data:`HEADERS`)."""
    extra = ["-e ."] if name == "environment.yml" else []
    body = "".join(f"      - {pin}\n" for pin in pins + extra)
    return (f"{HEADERS[name]}channels:\n  - conda-forge\ndependencies:\n  - python={PYTHON}\n"
            f"  - pip\n  - pip:\n{body}")


def main(argv: list[str]) -> int:
    pins, stale = locked(), []
    for name in HEADERS:
        path, text = ROOT / name, environment(name, pins)
        if "--check" in argv:
            if not path.is_file() or path.read_text() != text:
                stale.append(name)
        else:
            path.write_text(text)
    for name in stale:
        print(f"{name} differs from requirements.lock: run `make lock` or "
              "`python workflow/envs/from_lock.py`", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
