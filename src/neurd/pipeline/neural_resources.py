"""Where and for how long the neural stage's jobs compute: the CPU hours a config would take
and the refusal of a paper-size run on a machine without a GPU (:func:`check_device`), the
GPU memory settings of jobs that share a GPU, a job's memory and the runtime asked of a
scheduler, and the interval at which a job saves its state.  The stage is
:mod:`neurd.pipeline.neural`.
"""

from __future__ import annotations

import functools
import math
import os
import subprocess
import sys
from collections.abc import Mapping

from neurd.config import ConfigError, require
from neurd.limits import mlp_parameters
from neurd.names import GAMES
from neurd.neural.runs import configurations, critics, logit_logged_configurations

# Configuration-iterations per second of the neural stage on two CPU cores (24 configurations,
# bench/NEURAL.md), per game string; another game is estimated from its information states at
# Goofspiel's cost per state, and at most Kuhn's rate.
CPU_RATES = {GAMES["kuhn"].string: 5.7e4, GAMES["leduc"].string: 6.0e3,
             GAMES["goofspiel"].string: 1.7e3}
CPU_SECONDS_PER_INFOSTATE = 1 / (1.7e3 * 2124)
CPU_HOURS_WITHOUT_GPU = 24.0  # more than this on the CPU is refused unless neural.allow_cpu


def cpu_hours(cfg: Mapping, sizes: Mapping) -> dict[str, float]:
    """Estimated hours of each game's neural jobs, one after another on two CPU cores
    (``sizes``: game -> :class:`neurd.limits.GameSize`)."""
    configs = configurations(cfg, cfg["seeds"])
    hours = {}
    for game, size in sizes.items():
        rate = CPU_RATES.get(cfg["game_strings"][game], min(
            CPU_RATES[GAMES["kuhn"].string], 1 / (CPU_SECONDS_PER_INFOSTATE * size.infostates)))
        runs = len(critics(cfg, game))
        work = runs * configs * int(cfg["phase_iterations"][game]) * int(cfg["phases"])
        hours[game] = work / rate / 3600
    return hours


@functools.cache
def gpu_visible() -> bool:
    """Whether JAX sees a GPU on this machine, as a job started here would (asked in a child
    process, which allocates no GPU memory, so that this one never starts a JAX backend)."""

    probe = "import jax; print(jax.default_backend())"
    env = {**os.environ, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    try:
        done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                              env=env, timeout=300)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and done.stdout.strip() in ("gpu", "cuda", "rocm")


def check_device(cfg: Mapping, sizes: Mapping, gpu=gpu_visible) -> None:
    """Refuse, naming ``neural.allow_cpu`` and the estimated CPU hours, neural jobs that would
    take more than :data:`CPU_HOURS_WITHOUT_GPU` hours on this machine's CPU: no GPU is
    visible to JAX here (``gpu()``) and ``allow_cpu`` is false.  The paper's sizes need a
    GPU (about 100 CPU hours); the default scale's take minutes and are never refused."""
    hours = cpu_hours(cfg, sizes)
    total = sum(hours.values())
    if cfg.get("allow_cpu", False) or total <= CPU_HOURS_WITHOUT_GPU or gpu():
        return
    each = ", ".join(f"{game} {h:.0f}" for game, h in hours.items())
    require(False, "neural.allow_cpu",
            f"is false and no GPU is visible to JAX on this machine, where the neural jobs "
            f"would take about {total:.0f} CPU hours ({each}; estimated for two cores from "
            f"measured rates), more than the {CPU_HOURS_WITHOUT_GPU:.0f} allowed without a "
            "GPU. Run them on a GPU machine (JAX for CUDA: pip install -e '.[cuda]'; docs/gpu.md), "
            "or set neural.allow_cpu: true to run them on this CPU on purpose, or to submit "
            "them from here to a cluster's GPU nodes (neural.gpus_per_job >= 1)")


# JAX preallocates 75% of a GPU's memory per process: right for a job that has the GPU to
# itself, fatal for the second of two jobs that share one.
GPU_MEMORY_FRACTION = 0.75


def gpu_memory_environment(cfg: Mapping, gpus: int | None = None) -> dict[str, str]:
    """XLA's GPU memory settings for the neural jobs, sized to how many share a GPU.

    ``gpus``: the GPUs Snakemake may hand out on this machine (``--resources gpu=N``;
    ``None`` where not given, as on a cluster, whose jobs get their own).  Snakemake does
    not give a local job a GPU of its own: every job computes on the first GPU JAX sees.
    Jobs asking for no GPU (``gpus_per_job: 0``) may all land on one: they allocate what
    they need (preallocation off).  With ``N`` GPUs for jobs of ``g`` each, ``N // g`` jobs
    run at once on the first GPU: each takes that share of the 75% JAX preallocates."""
    per_job = int(cfg["gpus_per_job"])
    if per_job == 0:
        return {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}
    gpus = getattr(gpus, "value", gpus)  # Snakemake may hand over its Resource record
    if not isinstance(gpus, (int, float)) or isinstance(gpus, bool):
        gpus = None
    sharing = int(gpus) // per_job if gpus is not None else 1
    if sharing <= 1:
        return {}
    return {"XLA_PYTHON_CLIENT_MEM_FRACTION": f"{GPU_MEMORY_FRACTION / sharing:.3f}"}


def job_memory_bytes(cfg: Mapping, size) -> int:
    """Estimated peak bytes of one neural job (a :class:`neurd.limits.GameSize` game).

    Per configuration of a batch (vmapped): both networks' weights with their
    gradients and optimiser state (float32); a cycle's sampled episodes with
    the networks' inputs, activations and gradients at every step (float32);
    the float64 exact evaluation over the histories at a checkpoint.  Per
    configuration of the job: the end-of-phase tables kept until the end.
    """

    batch = configurations(cfg, cfg["seeds_per_batch"])
    job = configurations(cfg, cfg["seeds_per_job"])
    layers = [size.tensor_size, *cfg["hidden_sizes"], size.actions]
    copies = 2 if cfg.get("networks") == "per_player" else 1
    networks = 2 * copies * mlp_parameters(layers) * 4 * 4
    steps = (int(cfg["critic_batch"]) * int(cfg["critic_updates_per_policy_update"])
             + int(cfg["policy_batch"])) * (size.depth + 1)
    episodes = steps * (size.tensor_size + 4 * size.actions + 4 * sum(cfg["hidden_sizes"])) * 4
    exact = 8 * size.histories * size.width * 8
    kept = int(cfg["phases"]) * size.infostates * size.actions * 4
    points = int(cfg["phases"]) * (2 + cfg["checkpoints"]["geometric"]
                                   + cfg["checkpoints"]["linear"])
    logits = logit_logged_configurations(cfg) * points * size.infostates * size.actions * 8
    return int(batch * (networks + episodes + exact) + job * kept + logits)


CHECKPOINT_MINUTES_VARIABLE = "NEURD_CHECKPOINT_MINUTES"
DEFAULT_CHECKPOINT_MINUTES = 5.0


def checkpoint_minutes_default() -> float:
    """``$NEURD_CHECKPOINT_MINUTES`` (set by the workflow from neural.checkpoint_minutes), else
    5; a value that is not a number of minutes >= 0 is refused naming the variable."""
    text = os.environ.get(CHECKPOINT_MINUTES_VARIABLE)
    if text is None:
        return DEFAULT_CHECKPOINT_MINUTES
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 0):
        raise ConfigError(f"environment variable {CHECKPOINT_MINUTES_VARIABLE}={text!r} is not "
                          "a number of minutes >= 0 (the workflow sets it from config "
                          "neural.checkpoint_minutes): unset or correct it")
    return value


def export_settings(cfg: Mapping, gpus: int | None = None) -> None:
    """Put ``checkpoint_minutes`` where ``neurd neural-run`` reads its default, and the GPU
    memory settings (:func:`gpu_memory_environment`; those set by the user are kept), in the
    environment of the Snakemake process (and so of its jobs).  They change no number, so
    they are not rule parameters, whose change would rerun every job."""
    os.environ[CHECKPOINT_MINUTES_VARIABLE] = repr(float(cfg["checkpoint_minutes"]))
    for name, value in gpu_memory_environment(cfg, gpus).items():
        os.environ.setdefault(name, value)



def job_runtime_minutes(cfg: Mapping, game: str) -> int:
    """Wall time to ask a scheduler for one job: configurations x iterations / throughput."""
    configs = configurations(cfg, cfg["seeds_per_job"])
    work = configs * int(cfg["phase_iterations"][game]) * int(cfg["phases"])
    seconds = work / float(cfg["throughput"][game]) if game in cfg["throughput"] else 3600.0
    return int(math.ceil(2.0 * seconds / 60.0)) + 10
