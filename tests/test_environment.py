"""A neural job's environment, built in one place (neurd.neural.environment): XLA's
deterministic GPU ops always on for a job (a user's setting replaced), a cycle variant's
command-buffer flag, the platform, the tree imported, GPU memory and the shared compilation
cache."""

import os
import subprocess
import sys

import pytest

from neurd.neural import variants
from neurd.neural.environment import (
    CPU_COLLECTIVE_TIMEOUTS,
    DETERMINISTIC,
    job_environment,
    job_flags,
)

TIMEOUTS = list(CPU_COLLECTIVE_TIMEOUTS)


def test_a_jobs_flags_keep_the_users_and_make_gpu_ops_deterministic():
    user = "--xla_cpu_max_isa=AVX2 --xla_gpu_deterministic_ops=false"
    assert job_flags(user).split() == ["--xla_cpu_max_isa=AVX2", *TIMEOUTS, DETERMINISTIC]
    assert job_flags(user, deterministic=False).split() == ["--xla_cpu_max_isa=AVX2", *TIMEOUTS]
    assert job_flags("").split() == [*TIMEOUTS, DETERMINISTIC]
    off = variants.Variant(command_buffers="off")
    assert job_flags(user, off).split() == ["--xla_cpu_max_isa=AVX2", *TIMEOUTS, DETERMINISTIC,
                                            f"{variants.FLAG}="]
    assert job_flags(f"{variants.FLAG}=FUSION", variants.Variant()).split() == [
        *TIMEOUTS, DETERMINISTIC]
    with pytest.raises(TypeError, match="not a string"):
        job_flags(None)


def test_a_users_own_collective_timeout_is_kept():
    mine = "--xla_cpu_collective_call_terminate_timeout_seconds=5"
    assert job_flags(mine).split() == [mine, TIMEOUTS[1], DETERMINISTIC]


def test_xla_takes_the_jobs_flags_and_runs_a_collective_on_two_cpu_devices():
    """XLA aborts a process at start-up on a flag it does not know: every flag job_flags
    adds is one this JAX knows, and a collective between two CPU devices runs under them."""
    code = ("import jax, jax.numpy as jnp\n"
            "total = jax.pmap(lambda x: jax.lax.psum(x, 'i'), axis_name='i')(jnp.arange(2.0))\n"
            "print(len(jax.devices()), float(total[0]))")
    flags = job_flags("--xla_force_host_platform_device_count=2")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu"},
                         timeout=300)
    assert run.returncode == 0 and run.stdout.split() == ["2", "1.0"], run.stderr[-2000:]


def test_a_jobs_environment_names_its_tree_platform_memory_and_cache(tmp_path):
    base = {"PATH": "/bin", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}
    env = job_environment("cpu", tmp_path / "src", base=base)
    assert env["PATH"] == "/bin" and env["PYTHONPATH"] == str(tmp_path / "src")
    assert env["JAX_PLATFORMS"] == "cpu" and env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert env["XLA_FLAGS"].split() == ["--xla_cpu_max_isa=AVX2", *TIMEOUTS, DETERMINISTIC]
    assert "JAX_COMPILATION_CACHE_DIR" not in env and base["XLA_FLAGS"].count(" ") == 0
    shared = job_environment("cuda", "src", base=base, cache=tmp_path / "cache",
                             memory_fraction=0.3)
    assert shared["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "cache")
    assert shared["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] == "0"
    assert shared["XLA_PYTHON_CLIENT_PREALLOCATE"] == "true"
    assert shared["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.30"
    for fraction in (0, -0.5, 1.5, 1e300, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="memory_fraction"):
            job_environment("cuda", "src", base=base, memory_fraction=fraction)
    with pytest.raises(ValueError, match="not a name"):
        job_environment("", "src", base=base)
