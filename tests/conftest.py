"""Shared fixtures.

Importing neurd leaves JAX in float32; tests of double-precision work (the
learners, dynamics, regret and engine internals, compared to 1e-12) ask for
it with ``pytestmark = pytest.mark.usefixtures("float64")``, module-wide so
that module-scoped fixtures are built in float64 too.

``smoke_run`` is the smoke scale's whole workflow run once in a temporary copy (for the
workflow's checks and the cluster's comparison), with stand-ins of a default-scale run's
results (:data:`DEFAULT_RESULTS`) planted before it starts.

``tiny_kuhn_config`` is the tiny neural config of Kuhn poker that the tests of
published runs and of blocks in progress compute their blocks with.

A test of minutes is marked ``long`` (every ``workflow`` and ``oldest`` test is): ``make
test`` runs the others, ``make test-long`` these, ``make test-all`` both in one run.

A test process computes on JAX's one CPU device, started here, so that a command run in the
process (``cli.main(["neural-run", ...])``) keeps it: a job started as a process of its own
makes one device per core, as a user's does (``neurd.neural.device.use_cores``;
``tests/test_cpu_devices.py`` runs the configurations shared between devices).
"""

import importlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import jax
import pytest
import yaml

from neurd.precision import float64 as _float64

jax.devices()  # the backend starts with its one CPU device (see the module docstring)

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def bench_script():
    """``bench_script(name)``: the script ``bench/<name>.py`` imported as a module (the
    helpers beside it importable while it loads)."""
    def load(name: str):
        sys.path.insert(0, str(ROOT / "bench"))
        try:
            return importlib.import_module(name)
        finally:
            sys.path.remove(str(ROOT / "bench"))

    return load

# 2 entropy levels, 3 seeds (one batch), 3 phases of 8 iterations, 1 + 2 checkpoints a phase
TINY_KUHN = {"games": ["kuhn"], "entropies": [0.0, 0.1], "seeds": 3, "seeds_per_job": 3,
             "seeds_per_batch": 3, "phase_iterations": {"kuhn": 8}, "exact_critic_games": [],
             "hidden_sizes": [8], "critic_batch": 4, "policy_batch": 16,
             "checkpoints": {"geometric": 1, "linear": 2}, "final_checkpoints": 2,
             "bootstrap": {"resamples": 100}}


# Stand-ins for a default-scale run's results, there before the smoke run starts.
DEFAULT_RESULTS = {"matrix/regret_sweep.parquet": b"default table",
                   "figures/fig1.png": b"default figure", "provenance.json": b"{}"}


def copy_workflow(dest: Path, published: Path | None = None, also: tuple[str, ...] = ()) -> Path:
    """A copy of the workflow (Snakefile, rules, configs, profiles, publication) at ``dest``:
    the publication ``published`` (a folder like the repository's ``published/``; default:
    the repository's), and the repository's files or folders ``also``."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("Snakefile", "workflow", "profiles", *also):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, dest / name)
    shutil.copytree(published or ROOT / "published", dest / "published")
    return dest


def snakemake(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir,
                          capture_output=True, text=True)


WORKER_GIB = 5  # the most memory one test process was seen to hold (compiling Goofspiel's cycles)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: nothing without it
def pytest_xdist_auto_num_workers(config):
    """`-n auto` (`make test`): one test process per core this process may run on, no more
    than the memory holds at :data:`WORKER_GIB` each."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return max(1, min(cores or 1, int(memory // WORKER_GIB)))


# The test files that take the session fixture ``smoke_run`` (the smoke scale's whole workflow,
# minutes of CPU): a parallel run hands them to one test process together, which makes the run
# once (test_expected_time checks that no other file takes it).
SMOKE_RUN_FILES = ("tests/test_workflow.py", "tests/test_cluster.py")


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: nothing without it
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile` (`make test`): a file to a test process at a time, in the order the
    files were collected (heaviest first, :func:`pytest_collection_modifyitems`; xdist's own
    scheduler would reorder them by their number of tests), the :data:`SMOKE_RUN_FILES` as
    one."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class InCollectionOrder(LoadFileScheduling):
        def _split_scope(self, nodeid):
            return file_group(nodeid)

    config.option.loadscopereorder = False
    return InCollectionOrder(config, log)


def file_group(nodeid: str) -> str:
    """The unit a parallel run hands to a test process: the test's file, or the first of the
    :data:`SMOKE_RUN_FILES` for any of them."""
    path = nodeid.split("::", 1)[0]
    return SMOKE_RUN_FILES[0] if path in SMOKE_RUN_FILES else path


def pytest_collection_modifyitems(config, items):
    """A test of minutes (marked ``workflow`` or ``oldest``) is also ``long``: `make test`
    leaves it out, `make test-long` runs it (``.ci/run`` runs both). The test files run
    heaviest first (:func:`file_seconds`)."""
    for item in items:
        if item.get_closest_marker("workflow") or item.get_closest_marker("oldest"):
            item.add_marker(pytest.mark.long)
    seconds = file_seconds(ROOT / "bench/tests_time.json")
    items.sort(key=lambda item: -seconds.get(item.nodeid.split("::")[0], 0.0))  # stable


def file_seconds(path: Path) -> dict[str, float]:
    """Each test file's seconds as the slowest tests of the runs kept in ``path``
    (``bench/tests_time.json``, written by ``bench/time_tests.py``) show them: the most its
    listed tests took together in any run. The files run in that order, the others after in
    theirs: a parallel run (a file to a process at a time) ends on light files, not one heavy
    file alone."""
    try:
        runs = json.loads(path.read_text())["runs"]
        parts = [part["slowest"] for run in runs for part in run["parts"].values()]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}
    seconds: dict[str, float] = {}
    for slowest in parts:
        summed: dict[str, float] = {}
        for spent, _, test in slowest:
            name = test.split("::")[0]
            summed[name] = summed.get(name, 0.0) + float(spent)
        for name, spent in summed.items():
            seconds[name] = max(seconds.get(name, 0.0), spent)
    return seconds


@pytest.fixture(scope="module")
def float64():
    with _float64():
        yield


def _tiny_kuhn_config(**neural) -> dict:
    """The neural snapshot of the default config with :data:`TINY_KUHN` (and ``neural``'s
    keys) over its ``neural`` section, validated against the schemas."""
    from neurd.stages import snapshot, validate

    config = yaml.safe_load(open(ROOT / "workflow/config/default.yaml"))
    config["neural"].update({**TINY_KUHN, **neural})
    validate(config, ROOT / "workflow/schemas")
    return snapshot(config, "neural")


@pytest.fixture(scope="session")
def tiny_kuhn_config():
    """Makes a tiny Kuhn neural config snapshot: ``tiny_kuhn_config(**changes)``."""
    return _tiny_kuhn_config


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """The smoke scale run whole on two cores in a copy of the workflow (its folder)."""
    workdir = copy_workflow(tmp_path_factory.mktemp("smoke"))
    for path, content in DEFAULT_RESULTS.items():
        (workdir / "results" / path).parent.mkdir(parents=True, exist_ok=True)
        (workdir / "results" / path).write_bytes(content)
    done = snakemake(workdir, "--cores", "2", "--configfile", "workflow/config/smoke.yaml")
    assert done.returncode == 0, done.stderr[-5000:]
    return workdir
