"""The machine line of the benchmark reports (shared by the bench scripts)."""

from __future__ import annotations

import importlib.metadata
import os
import platform

import jax


def describe(packages) -> str:
    """CPU model (and its family, model and stepping numbers: ``neurd.machine``), logical CPUs,
    Python, the versions of ``packages`` and the JAX devices."""
    from neurd.machine import processor_id, processor_model

    cpu = processor_model() + (f" ({processor_id()})" if processor_id() else "")
    versions = ", ".join(f"{p} {importlib.metadata.version(p)}" for p in packages)
    devices = ", ".join(str(d) for d in jax.devices())
    return (f"{cpu}, {os.cpu_count()} logical CPUs, Python {platform.python_version()}; "
            f"{versions}; JAX devices: {devices}")
