"""Shared fixtures.

Importing neurd leaves JAX in float32; tests of double-precision work (the
learners, dynamics, regret and engine internals, compared to 1e-12) ask for
it with ``pytestmark = pytest.mark.usefixtures("float64")``, module-wide so
that module-scoped fixtures are built in float64 too.
"""

import pytest

from neurd.precision import float64 as _float64


@pytest.fixture(scope="module")
def float64():
    with _float64():
        yield
