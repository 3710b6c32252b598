"""The environment a neural job's process runs in, built in one place.

XLA's flags (the deterministic ops a GPU needs to repeat a run bit for bit, and
a cycle variant's command buffers, :mod:`neurd.neural.variants`), the JAX
platform, the source tree a worker imports, the share of GPU memory a job may
take and the compilation cache jobs share.  ``neurd neural-run`` sets its own
flags with :func:`job_flags` before JAX starts; the allocations and the bench
scripts start their jobs and timing workers with :func:`job_environment`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from neurd.neural import variants

# on a GPU, scatter-adds (segment sums) are atomic and their order varies from run to run
# unless XLA is told to be deterministic; every neural job runs under it
DETERMINISTIC = "--xla_gpu_deterministic_ops=true"
# on a CPU, a job's configurations shared between its CPU devices meet at collectives; XLA
# aborts the process where one device waits for the others longer than 40 s, which a job at
# the lowest priority (a background allocation, the paper-length readings study) does
# whenever the machine's foreground work takes its cores: those waits may last an hour
# (a real deadlock still ends), and are not logged as stuck before ten minutes
CPU_COLLECTIVE_TIMEOUTS = ("--xla_cpu_collective_call_terminate_timeout_seconds=3600",
                           "--xla_cpu_collective_call_warn_stuck_timeout_seconds=600")


def job_flags(flags: str = "", variant: variants.Variant | None = None,
              deterministic: bool = True) -> str:
    """``flags`` (an ``XLA_FLAGS`` value) for a neural job: any deterministic-ops flag
    replaced by :data:`DETERMINISTIC` (left out with ``deterministic=False``, as a timing
    without it), the CPU collectives' timeouts of :data:`CPU_COLLECTIVE_TIMEOUTS` where
    ``flags`` set none (neither changes a number), and ``variant``'s command-buffer flag in
    place of any there."""
    if not isinstance(flags, str):
        raise TypeError(f"XLA flags {flags!r} are not a string")
    kept = [f for f in flags.split() if "xla_gpu_deterministic_ops" not in f]
    given = {f.split("=")[0] for f in kept}
    flags = " ".join(kept + [f for f in CPU_COLLECTIVE_TIMEOUTS if f.split("=")[0] not in given]
                     + ([DETERMINISTIC] if deterministic else []))
    return flags if variant is None else variants.xla_flags(variant, flags)


def job_environment(platform: str, src: str | os.PathLike, *,
                    base: Mapping[str, str] | None = None,
                    cache: str | os.PathLike | None = None, memory_fraction: float | None = None,
                    variant: variants.Variant | None = None,
                    deterministic: bool = True) -> dict[str, str]:
    """The environment of a job or worker process importing the package from ``src`` and
    computing on JAX's ``platform``: ``base`` (default this process's environment) with
    :func:`job_flags`, GPU memory allocated as needed (or, with ``memory_fraction``, that
    share preallocated, for jobs sharing a GPU), and the persistent compilation ``cache``
    where given (every program kept, however quick to compile)."""
    if not (isinstance(platform, str) and platform):
        raise ValueError(f"JAX platform {platform!r} is not a name (cpu, cuda, ...)")
    env = dict(os.environ if base is None else base, PYTHONPATH=str(src),
               JAX_PLATFORMS=platform, XLA_PYTHON_CLIENT_PREALLOCATE="false",
               PYTHONUNBUFFERED="1")
    env["XLA_FLAGS"] = job_flags(env.get("XLA_FLAGS", ""), variant, deterministic)
    if cache is not None:
        env["JAX_COMPILATION_CACHE_DIR"] = str(Path(cache))
        env["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
        env["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    if memory_fraction is not None:
        if not 0 < memory_fraction <= 1:
            raise ValueError(f"memory_fraction {memory_fraction!r} is not in (0, 1]")
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "true"
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{memory_fraction:.2f}"
    return env
