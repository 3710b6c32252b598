"""Double precision where it is meant, and nowhere else.

Importing :mod:`neurd` leaves JAX at its default (float32).  The tabular,
matrix and RPS work needs float64 -- exact comparisons with OpenSpiel to
1e-12 depend on it -- so its entry points switch it on for their own
duration with :func:`float64`, a context manager and decorator around
``jax.enable_x64``.  JAX keys its compilation caches on that setting, so a
function traced in double precision is never reused in single precision, and
neural code, which runs outside these scopes, computes in float32.
"""

from __future__ import annotations

import contextlib


class _Float64(contextlib.ContextDecorator):
    """``with float64():`` or ``@float64()``: JAX in double precision for the duration."""

    def __enter__(self):
        import jax

        self._scope = jax.enable_x64(True)
        self._scope.__enter__()
        return self

    def __exit__(self, *exc):
        return self._scope.__exit__(*exc)

    def _recreate_cm(self):  # a fresh scope per decorated call (re-entrant, thread-safe)
        return _Float64()


def float64(function=None):
    """Run in float64: ``@float64`` / ``@float64()`` on a function, or ``with float64():``."""
    scope = _Float64()
    return scope if function is None else scope(function)


def is_float64() -> bool:
    """Whether JAX computes in double precision here and now."""
    import jax

    return bool(jax.config.jax_enable_x64)
