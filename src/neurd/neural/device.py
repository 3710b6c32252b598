"""The device a neural job computes on, for its provenance: platform, model, driver, jax.

On a GPU the model and driver come from ``nvidia-smi`` (``unknown`` where it
cannot be asked).  On a CPU the model is the processor's with the instruction set XLA
compiles for (:mod:`neurd.machine`), e.g. ``"AMD EPYC 7B13, AVX2"``; the record also
names the threads the process may use and the XLA flags in force, so that a user can tell
why two CPUs' numbers differ in float rounding.
"""

from __future__ import annotations

import subprocess

import jax

from neurd.machine import cpu_description


def device_description() -> dict:
    """The device the job computes on: platform, model, driver (GPU), jax version; on a CPU,
    the model is the processor's with its instruction set (:func:`cpu_description`'s keys
    beside it)."""
    device = jax.devices()[0]
    info = {"platform": device.platform, "device": getattr(device, "device_kind", "unknown"),
            "jax": jax.__version__}
    if device.platform == "cpu":
        cpu = cpu_description()
        info.update(cpu, device=f"{cpu['processor']}, {cpu['isa']}")
    if device.platform == "gpu":
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=30, check=True).stdout.splitlines()[0]
            info["device"], info["driver"] = (x.strip() for x in out.split(",", 1))
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            info["driver"] = "unknown"
    return info
