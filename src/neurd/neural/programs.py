"""How the learning programs are compiled: on a CPU, with compiler options of their own.

On a CPU, XLA hands its YNNPACK library a program's products and, unless told otherwise,
its reductions with the elementwise work around them.  A learned critic's cycle reduces
over a game's few actions (``[N, I, A]``: the softmax, the losses), where YNNPACK runs the
reductions several times slower than XLA's own loops (``bench/profile_cycle.py``;
bench/NEURAL.md): its learning programs (:func:`neurd.neural.train.run_segment`,
:func:`neurd.neural.train.critic_tables`) hand YNNPACK their products only
(:data:`CPU_COMPILER_OPTIONS`).  The exact critic's cycle is mostly its passes over the
game's histories, whose many small reductions YNNPACK runs faster than XLA's loops (on a
two-core AMD EPYC with AVX2, a Kuhn cycle of the exact critic ran several times slower
under the options): its programs keep XLA's defaults.  The options change the reductions'
order of sums, so the numbers agree with XLA's defaults within float32 rounding, not bit
for bit; each piece of a job records them (``compiler_options``, :func:`described`).
"""

from __future__ import annotations

import functools

import jax
import numpy as np

# the options of the learning programs on a CPU (see the module)
CPU_COMPILER_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type":
                        "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}
# a learned critic, or the exact values of the current policy (neurd.neural.train.Spec)
CRITICS = ("learned", "exact")


@functools.cache
def compiler_options(backend: str, critic: str = "learned") -> dict | None:
    """The options the learning programs of ``critic`` are compiled with on ``backend``: on
    a CPU, for the learned critic, :data:`CPU_COMPILER_OPTIONS` where this XLA knows them (a
    tiny program compiled with them first); else none: XLA's defaults (see the module).
    ``backend``: a JAX platform name (``cpu``, ``gpu``...)."""
    if not (isinstance(backend, str) and backend):
        raise ValueError(f"backend {backend!r} is not a JAX platform name (cpu, gpu, ...)")
    if critic not in CRITICS:
        raise ValueError(f"critic {critic!r} is not one of {CRITICS}")
    if backend != "cpu" or critic != "learned":
        return None
    try:
        jax.jit(lambda x: x + 1).lower(np.zeros(2, np.float32)).compile(CPU_COMPILER_OPTIONS)
    except (jax.errors.JaxRuntimeError, ValueError, TypeError):
        return None
    return dict(CPU_COMPILER_OPTIONS)


def described(backend: str, critic: str = "learned") -> str:
    """:func:`compiler_options` as ``key=value`` words (empty: XLA's defaults), as a piece
    records them."""
    options = compiler_options(backend, critic) or {}
    return " ".join(f"{key}={value}" for key, value in sorted(options.items()))


def learning_program(function):
    """``jax.jit`` for a learning program whose first argument is its static ``spec``
    (:class:`neurd.neural.train.Spec`), compiled for the default backend with the
    :func:`compiler_options` of the spec's critic (one jitted program per backend and
    critic, made at its first call); the returned function's ``lower`` lowers that
    program, and its ``defaults`` is the same program under XLA's defaults (a benchmark's
    or a test's comparison)."""
    programs = {}

    def program(spec):
        key = (jax.default_backend(), spec.critic)
        if key not in programs:
            programs[key] = jax.jit(function, static_argnames=("spec",),
                                    compiler_options=compiler_options(*key))
        return programs[key]

    @functools.wraps(function)
    def call(spec, *args, **kwargs):
        return program(spec)(spec, *args, **kwargs)

    call.lower = lambda spec, *args, **kwargs: program(spec).lower(spec, *args, **kwargs)
    call.defaults = jax.jit(function, static_argnames=("spec",))
    return call
