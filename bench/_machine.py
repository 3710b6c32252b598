"""The machine line of the benchmark reports (shared by the bench scripts)."""

from __future__ import annotations

import importlib.metadata
import os
import platform

import jax


def describe(packages) -> str:
    """CPU model, logical CPUs, Python, the versions of ``packages`` and the JAX devices."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    versions = ", ".join(f"{p} {importlib.metadata.version(p)}" for p in packages)
    devices = ", ".join(str(d) for d in jax.devices())
    return (f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}; "
            f"{versions}; JAX devices: {devices}")
