"""A neural job's environment, built in one place (neurd.neural.environment): XLA's
deterministic GPU ops always on for a job (a user's setting replaced), a cycle variant's
command-buffer flag, the platform, the tree imported, GPU memory and the shared compilation
cache."""

import pytest

from neurd.neural import variants
from neurd.neural.environment import DETERMINISTIC, job_environment, job_flags


def test_a_jobs_flags_keep_the_users_and_make_gpu_ops_deterministic():
    user = "--xla_cpu_max_isa=AVX2 --xla_gpu_deterministic_ops=false"
    assert job_flags(user).split() == ["--xla_cpu_max_isa=AVX2", DETERMINISTIC]
    assert job_flags(user, deterministic=False) == "--xla_cpu_max_isa=AVX2"
    assert job_flags("") == DETERMINISTIC
    off = variants.Variant(command_buffers="off")
    assert job_flags(user, off).split() == ["--xla_cpu_max_isa=AVX2", DETERMINISTIC,
                                            f"{variants.FLAG}="]
    assert job_flags(f"{variants.FLAG}=FUSION", variants.Variant()) == DETERMINISTIC
    with pytest.raises(TypeError, match="not a string"):
        job_flags(None)


def test_a_jobs_environment_names_its_tree_platform_memory_and_cache(tmp_path):
    base = {"PATH": "/bin", "XLA_FLAGS": "--xla_cpu_max_isa=AVX2"}
    env = job_environment("cpu", tmp_path / "src", base=base)
    assert env["PATH"] == "/bin" and env["PYTHONPATH"] == str(tmp_path / "src")
    assert env["JAX_PLATFORMS"] == "cpu" and env["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert env["XLA_FLAGS"].split() == ["--xla_cpu_max_isa=AVX2", DETERMINISTIC]
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
