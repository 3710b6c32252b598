"""Where the allocation's trees are, and the environment of every process it starts."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src"
BENCH = ROOT / "bench"
ENTRY = BENCH / "gpu_allocation.py"  # the command line, also the timing workers' entry


def environment(platform: str, src: Path = SRC, cache: Path | None = None,
                variant: str = "default", fraction: float | None = None) -> dict:
    """A job's or worker's environment (:func:`neurd.neural.environment.job_environment`):
    the tree ``src`` on JAX's ``platform``, the compilation ``cache`` shared, ``fraction`` of
    the GPU's memory preallocated where given, and ``variant``'s XLA flags (only for this
    tree: another tree has no variants)."""
    from neurd.neural import variants
    from neurd.neural.environment import job_environment

    chosen = None if src != SRC or variant == "default" else variants.parse(variant)
    return job_environment(platform, src, cache=cache, memory_fraction=fraction,
                           variant=chosen)
