"""The device a neural job computes on, for its provenance: platform, model, driver, jax.

On a GPU the model and driver come from ``nvidia-smi`` (``unknown`` where it
cannot be asked).  On a CPU the model is the processor's (``/proc/cpuinfo``'s
model name, else :func:`platform.processor`) with the instruction set XLA
compiles for (:func:`xla_isa`: the best the processor has, capped by
``--xla_cpu_max_isa`` in ``XLA_FLAGS``), e.g. ``"AMD EPYC 7B13, AVX2"``; the
record also names the threads the process may use and the XLA flags in force,
so that a user can tell why two CPUs' numbers differ in float rounding.
"""

from __future__ import annotations

import os
import platform
import subprocess

import jax

# XLA's CPU instruction sets (the values --xla_cpu_max_isa takes), weakest first, each with
# the /proc/cpuinfo flags a processor needs for it
ISAS = (("SSE4_2", ("sse4_2",)), ("AVX", ("avx",)), ("AVX2", ("avx2", "fma")),
        ("AVX512", ("avx512f", "avx512bw", "avx512dq", "avx512vl")),
        ("AVX512_VNNI", ("avx512_vnni",)), ("AVX512_BF16", ("avx512_bf16",)),
        ("AMX", ("amx_tile", "amx_int8")), ("AMX_FP16", ("amx_fp16",)))
MAX_ISA_FLAG = "--xla_cpu_max_isa"


def _cpuinfo() -> tuple[str | None, set[str]]:
    """The processor's model name and flags from ``/proc/cpuinfo`` (None, {} elsewhere)."""
    try:
        text = open("/proc/cpuinfo", encoding="utf-8", errors="replace").read()
    except OSError:
        return None, set()
    model, flags = None, set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "model name" and model is None:
            model = " ".join(value.split())
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model, flags


def processor_model() -> str:
    """The processor's model name (``platform.processor()`` or the machine's architecture where
    the system does not say)."""
    model, _ = _cpuinfo()
    return model or platform.processor() or platform.machine() or "unknown"


def xla_isa(xla_flags: str | None = None) -> str:
    """The instruction set XLA's CPU backend compiles for here: the best of :data:`ISAS` this
    processor has (each needing the ones before it), capped by ``--xla_cpu_max_isa`` in
    ``xla_flags`` (default: ``$XLA_FLAGS``); the architecture's name where the processor's
    flags cannot be read (not x86)."""
    _, flags = _cpuinfo()
    if not flags:
        return platform.machine() or "unknown"
    best = None
    for name, needs in ISAS:
        if not set(needs) <= flags:
            break
        best = name
    best = best or platform.machine() or "unknown"
    flags_text = os.environ.get("XLA_FLAGS", "") if xla_flags is None else xla_flags
    cap = None
    for flag in flags_text.split():
        if flag.startswith(MAX_ISA_FLAG + "="):
            cap = flag.split("=", 1)[1].strip().upper()
    order = [name for name, _ in ISAS]
    if cap in order and best in order and order.index(cap) < order.index(best):
        return cap
    return best


def threads() -> int:
    """The processors this process may run on (its affinity where the system tells)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_description() -> dict:
    """Processor model, the instruction set XLA uses, threads and the XLA flags in force."""
    return {"processor": processor_model(), "isa": xla_isa(), "threads": threads(),
            "xla_flags": os.environ.get("XLA_FLAGS", "")}


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
