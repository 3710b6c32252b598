"""Where the allocation's trees are, and the environment of every process it starts."""

from __future__ import annotations

from pathlib import Path

from neurd.neural import variants
from neurd.neural.environment import job_environment

ROOT = Path(__file__).resolve().parents[4]
SRC = ROOT / "src"
PACKAGE = Path(__file__).resolve().parents[2]  # this tree's package (src/neurd)
HERE = Path(__file__).resolve().parent
TIMING = HERE / "timing.py"  # the timing workers, started as this file (timing's docstring)


def environment(platform: str, src: Path = SRC, cache: Path | None = None,
                variant: str = "default", fraction: float | None = None) -> dict:
    """A job's or worker's environment (:func:`neurd.neural.environment.job_environment`):
    the tree ``src`` on JAX's ``platform``, the compilation ``cache`` shared, ``fraction`` of
    the GPU's memory preallocated where given, and ``variant``'s XLA flags (only for this
    tree: another tree has no variants)."""
    chosen = None if src != SRC or variant == "default" else variants.parse(variant)
    return job_environment(platform, src, cache=cache, memory_fraction=fraction,
                           variant=chosen)
