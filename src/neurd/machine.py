"""The machine a result was computed on, as a user needs it to tell why numbers differ.

On a CPU the float rounding of a float32 result, and its speed, move with the processor and
with the instruction set XLA compiles for (``XLA_FLAGS=--xla_cpu_max_isa=AVX2`` makes a
machine with AVX-512 compile as one with AVX2 only does): :func:`cpu_description` names the
processor's model (``/proc/cpuinfo``'s model name, else :func:`platform.processor`), its
family, model and stepping numbers (:func:`processor_id`: a virtual machine's model name can
be as bare as ``AMD EPYC`` for processors of different generations), that instruction set
(:func:`xla_isa`), the threads the process may use and the XLA flags in force.  Every
table's metadata (:func:`neurd.tables.write_table`), a run's provenance and each piece of a
neural job record it.
"""

from __future__ import annotations

import functools
import os
import platform
from pathlib import Path

# XLA's CPU instruction sets (the values --xla_cpu_max_isa takes), weakest first, each with
# the /proc/cpuinfo flags a processor needs for it
ISAS = (("SSE4_2", ("sse4_2",)), ("AVX", ("avx",)), ("AVX2", ("avx2", "fma")),
        ("AVX512", ("avx512f", "avx512bw", "avx512dq", "avx512vl")),
        ("AVX512_VNNI", ("avx512_vnni",)), ("AVX512_BF16", ("avx512_bf16",)),
        ("AMX", ("amx_tile", "amx_int8")), ("AMX_FP16", ("amx_fp16",)))
MAX_ISA_FLAG = "--xla_cpu_max_isa"


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> tuple[str | None, frozenset[str]]:
    """The processor's model name and flags from ``/proc/cpuinfo`` (None, {} elsewhere)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None, frozenset()
    model, flags = None, set()
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "model name" and model is None:
            model = " ".join(value.split())
        elif key == "flags" and not flags:
            flags = set(value.split())
    return model, frozenset(flags)


def processor_model() -> str:
    """The processor's model name (``platform.processor()`` or the machine's architecture where
    the system does not say)."""
    model, _ = _cpuinfo()
    return model or platform.processor() or platform.machine() or "unknown"


@functools.lru_cache(maxsize=1)
def processor_id() -> str:
    """The processor's family, model and stepping numbers as ``/proc/cpuinfo`` gives them
    (``family 26 model 2 stepping 1``), which tell apart two generations a virtual machine
    names alike; empty where the system does not say (not Linux, not x86)."""
    try:
        return processor_numbers(Path("/proc/cpuinfo").read_text(encoding="utf-8",
                                                                  errors="replace"))
    except OSError:
        return ""


def processor_numbers(cpuinfo: str) -> str:
    """:func:`processor_id` of a ``/proc/cpuinfo`` text (its first processor's numbers)."""
    found = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("cpu family", "model", "stepping") and key not in found:
            found[key] = value.strip()
    return " ".join(f"{name} {found[key]}" for key, name in (
        ("cpu family", "family"), ("model", "model"), ("stepping", "stepping"))
        if found.get(key, "").isdigit())


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
    """Processor model and its :func:`processor_id`, the instruction set XLA uses, threads and
    the XLA flags in force."""
    return {"processor": processor_model(), "processor_id": processor_id(), "isa": xla_isa(),
            "threads": threads(), "xla_flags": os.environ.get("XLA_FLAGS", "")}


def available_memory_bytes() -> float | None:
    """The memory the machine has available now (``/proc/meminfo``'s MemAvailable; None
    where the system does not say)."""
    try:
        for line in Path("/proc/meminfo").read_text(encoding="ascii").splitlines():
            if line.startswith("MemAvailable:"):
                return float(line.split()[1]) * 1024.0
    except (OSError, ValueError, IndexError):
        return None
    return None
