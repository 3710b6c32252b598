"""The device a neural job computes on, for its provenance: platform, model, driver, jax.

On a GPU the model and driver come from ``nvidia-smi`` (``unknown`` where it
cannot be asked).  On a CPU the model is the processor's with the instruction set XLA
compiles for (:mod:`neurd.machine`), e.g. ``"AMD EPYC 7B13, AVX2"``; the record also
names the threads the process may use and the XLA flags in force, so that a user can tell
why two CPUs' numbers differ in float rounding, and the CPU devices the configurations were
shared between (:func:`use_cores`).

**Every core its configurations.**  A learning cycle is many small operations, each too
small for XLA to gain much by splitting it between a CPU's cores.  :func:`use_cores` has
JAX's CPU backend make one device per core, and :func:`neurd.neural.train.run_segment`
gives each device its share of the configurations, to run in a program of its own
(``bench/cycle_rate.py`` measures both ways: its section of bench/NEURAL.md).  A job of
the exact critic makes one device (:func:`job_devices`): its cycle is mostly tiny
operations (the exact values' passes over a game's histories), and shared between
devices each operation waits on the others' threads (on a two-core AMD EPYC with AVX2, a
Kuhn job of the exact critic ran slower on two devices than on one, the learned critic's
faster: docs/performance.md).
"""

from __future__ import annotations

import os
import subprocess

import jax

from neurd.machine import cpu_description, threads
from neurd.neural import programs

# JAX's own setting (and its environment variable): the devices its CPU backend makes
CPU_DEVICES = "jax_num_cpu_devices"
CPU_DEVICES_VARIABLE = "JAX_NUM_CPU_DEVICES"
# The most CPU devices a job may ask for: far above any processor's cores (a device past the
# cores only queues), low enough that a mistyped count is refused before JAX makes it
MAX_CPU_DEVICES = 1024


def use_cores(count: int | None = None) -> int:
    """Have JAX's CPU backend make ``count`` devices, before JAX's first computation;
    returns the devices it has.  ``count`` default: ``$JAX_NUM_CPU_DEVICES`` where set,
    else one per core this process may run on, and where the backend has already started
    (a program that computed before), the devices it started with.  A ValueError for a
    count that is not a whole number from 1 to :data:`MAX_CPU_DEVICES`, or a count given
    (or set in the environment) once the backend has started with another."""
    given = os.environ.get(CPU_DEVICES_VARIABLE, "").strip()
    asked = count is not None or bool(given)
    if count is None:
        try:
            count = int(given) if given else threads()
        except ValueError:
            raise ValueError(f"${CPU_DEVICES_VARIABLE} is {given!r}, not a whole number of "
                             "CPU devices") from None
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"CPU devices: {count!r} is not a positive whole number")
    if count > MAX_CPU_DEVICES:
        raise ValueError(f"CPU devices: {count} is more than {MAX_CPU_DEVICES}, the most a "
                         "job may make")
    if getattr(jax.config, CPU_DEVICES) == count:
        return count
    try:
        jax.config.update(CPU_DEVICES, count)
    except RuntimeError:  # the backend has started: its devices stay
        have = len(jax.local_devices(backend="cpu"))
        if asked and have != count:
            raise ValueError(f"cannot make {count} CPU devices: JAX's CPU backend has "
                             f"started with {have}") from None
        return have
    return count


def job_devices(critic: str) -> int | None:
    """The CPU devices a neural job of ``critic`` asks :func:`use_cores` for: one for the
    exact critic (see the module), else ``None`` (one per core); ``$JAX_NUM_CPU_DEVICES``,
    where set, for either."""
    if critic not in ("learned", "exact"):
        raise ValueError(f"critic {critic!r} is not 'learned' or 'exact'")
    if critic == "exact" and not os.environ.get(CPU_DEVICES_VARIABLE, "").strip():
        return 1
    return None


def cpu_devices() -> int:
    """How many CPU devices :func:`neurd.neural.train.run_segment` shares the configurations
    between: JAX's CPU devices where its default backend is a CPU, else 1."""
    if jax.default_backend() != "cpu":
        return 1
    return len(jax.local_devices(backend="cpu"))


def device_description(critic: str | None = None) -> dict:
    """The device the job computes on: platform, model, driver (GPU), jax version; on a CPU,
    the model is the processor's with its instruction set (:func:`cpu_description`'s keys
    beside it).  Given a job's ``critic``, also the compiler options its learning program
    runs under (``compiler_options``: :func:`neurd.neural.programs.described`; empty for
    XLA's defaults)."""
    device = jax.devices()[0]
    info = {"platform": device.platform, "device": getattr(device, "device_kind", "unknown"),
            "jax": jax.__version__}
    if critic is not None:
        info["compiler_options"] = programs.described(device.platform, critic)
    if device.platform == "cpu":
        cpu = cpu_description()
        info.update(cpu, device=f"{cpu['processor']}, {cpu['isa']}",
                    cpu_devices=cpu_devices())
    if device.platform == "gpu":
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=30, check=True).stdout.splitlines()[0]
            info["device"], info["driver"] = (x.strip() for x in out.split(",", 1))
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            info["driver"] = "unknown"
    return info
