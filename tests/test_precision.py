"""float64 only where it is meant: importing neurd changes nothing; the exact work
switches double precision on for itself and leaves the caller's setting as it was."""

import subprocess
import sys

import jax.numpy as jnp
import numpy as np
import pytest

from neurd import engine
from neurd.precision import float64, is_float64


def test_importing_the_package_leaves_jax_in_float32():
    code = ("import jax, neurd, neurd.engine, neurd.stages, neurd.cli, neurd.figures.fig1; "
            "assert not jax.config.jax_enable_x64; print(jax.numpy.ones(1).dtype)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "float32"


def test_float64_scope_is_restored_after_an_error():
    assert not is_float64()
    with pytest.raises(RuntimeError), float64():
        assert jnp.ones(1).dtype == jnp.float64
        raise RuntimeError
    assert not is_float64() and jnp.ones(1).dtype == jnp.float32


def test_engine_computes_in_float64_for_a_float32_caller():
    game = engine.compile_game("kuhn_poker")
    policies = engine.random_policies(game, 3, seed=0)
    values = engine.nash_conv(game, policies)
    assert isinstance(values, np.ndarray) and values.dtype == np.float64
    with float64():  # the same call from a caller already in double precision
        exact = engine.nash_conv(game, policies)
    np.testing.assert_array_equal(values, exact)
    assert np.all(values > 0.1)
    state = engine.cfr(game, "neurd", step_size=1.0, iterations=20)
    assert engine.average_policy(game, state).dtype == np.float64
    assert not is_float64() and jnp.ones(1).dtype == jnp.float32
