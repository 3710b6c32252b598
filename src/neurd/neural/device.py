"""The device a neural job computes on, for its provenance: platform, model, driver, jax.

On a GPU the model and driver come from ``nvidia-smi`` (``unknown`` where it
cannot be asked).
"""

from __future__ import annotations

import subprocess

import jax


def device_description() -> dict:
    """The device the job computes on: platform, model, driver (GPU), jax version."""
    device = jax.devices()[0]
    info = {"platform": device.platform, "device": getattr(device, "device_kind", "unknown"),
            "jax": jax.__version__}
    if device.platform == "gpu":
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=30, check=True).stdout.splitlines()[0]
            info["device"], info["driver"] = (x.strip() for x in out.split(",", 1))
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            info["driver"] = "unknown"
    return info
