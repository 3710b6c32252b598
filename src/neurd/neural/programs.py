"""How the learning programs are compiled: on a CPU, with compiler options of their own.

On a CPU, XLA hands its YNNPACK library a program's products and, unless told otherwise,
its reductions with the elementwise work around them.  A learning cycle's reductions are
over a game's few actions (``[N, I, A]``: the softmax, the losses), where YNNPACK runs them
several times slower than XLA's own loops (``bench/profile_cycle.py``; bench/NEURAL.md):
the learning programs (:func:`neurd.neural.train.run_segment`,
:func:`neurd.neural.train.critic_tables`) hand it their products only.  The options change
the reductions' order of sums, so the numbers agree with XLA's defaults within float32
rounding, not bit for bit; each piece of a job records them
(:func:`neurd.neural.device.device_description`).
"""

from __future__ import annotations

import functools

import jax
import numpy as np

# the options of the learning programs on a CPU (see the module)
CPU_COMPILER_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type":
                        "LIBRARY_FUSION_TYPE_INDIVIDUAL_DOT"}


@functools.cache
def compiler_options(backend: str) -> dict | None:
    """The options the learning programs are compiled with on ``backend``: on a CPU,
    :data:`CPU_COMPILER_OPTIONS` where this XLA knows them (a tiny program compiled with
    them first), else none: XLA's defaults.  ``backend``: a JAX platform name (``cpu``,
    ``gpu``...)."""
    if not (isinstance(backend, str) and backend):
        raise ValueError(f"backend {backend!r} is not a JAX platform name (cpu, gpu, ...)")
    if backend != "cpu":
        return None
    try:
        jax.jit(lambda x: x + 1).lower(np.zeros(2, np.float32)).compile(CPU_COMPILER_OPTIONS)
    except (jax.errors.JaxRuntimeError, ValueError, TypeError):
        return None
    return dict(CPU_COMPILER_OPTIONS)


def learning_program(static_argnames: tuple = ()):
    """``jax.jit`` for the learning programs, compiled for the default backend with its
    :func:`compiler_options` (one jitted program per backend, made at the first call); the
    returned function's ``lower`` lowers that program."""
    def wrap(function):
        programs = {}

        def program():
            backend = jax.default_backend()
            if backend not in programs:
                programs[backend] = jax.jit(function, static_argnames=static_argnames,
                                            compiler_options=compiler_options(backend))
            return programs[backend]

        @functools.wraps(function)
        def call(*args, **kwargs):
            return program()(*args, **kwargs)

        call.lower = lambda *args, **kwargs: program().lower(*args, **kwargs)
        return call
    return wrap
