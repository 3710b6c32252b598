"""neurd installs into an existing environment: pyproject.toml's lower bounds are the oldest
versions tested, and this test is what tests them.

It installs the package from a copy of its sources into a fresh venv, every direct
dependency at exactly its lower bound (the rest as pip resolves them), then runs there the
engine's and the neural stage's tests, the config check and a dry run of the workflow at the
smoke scale.  It needs the package index; where it cannot be reached the test is skipped and
says so.  requirements.lock, not these bounds, is what every README command installs.
"""

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
TESTS = ["tests/test_engine_api.py", "tests/test_neural.py", "tests/test_neural_compare.py",
         "tests/test_tables_audit.py"]
OFFLINE = re.compile(r"NewConnectionError|Failed to establish a new connection|Temporary "
                     r"failure in name resolution|Network is unreachable|ConnectTimeout")

pytestmark = pytest.mark.oldest


def floors() -> dict[str, str]:
    """Each direct dependency's lower bound (its one ``>=``), by name."""
    pins = {}
    for spec in PROJECT["dependencies"]:
        requirement = Requirement(spec)
        bounds = [s.version for s in requirement.specifier if s.operator == ">="]
        assert len(bounds) == 1, f"{spec}: a dependency needs exactly one lower bound"
        pins[requirement.name] = bounds[0]
    return pins


def _locked(name: str) -> str:
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.lower().startswith(f"{name}=="):
            return line.split("==")[1]
    raise AssertionError(f"{name} is not in requirements.lock")


def _run(command, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, **kwargs)


@pytest.fixture(scope="module")
def oldest(tmp_path_factory):
    """A venv holding neurd with every direct dependency at its lower bound."""
    home = tmp_path_factory.mktemp("oldest")
    source = home / "source"  # a build writes into its source folder: not the working tree
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "src", source / "src",
                    ignore=shutil.ignore_patterns("*.egg-info", "__pycache__"))
    # the config schemas, installed with the package (pyproject's data-files)
    shutil.copytree(ROOT / "workflow/schemas", source / "workflow/schemas")
    constraints = home / "floors.txt"
    constraints.write_text("".join(f"{n}=={v}\n" for n, v in floors().items()))
    venv = home / "venv"
    made = _run([sys.executable, "-m", "venv", str(venv)])
    assert made.returncode == 0, made.stderr
    python = venv / "bin" / "python"
    installed = _run([str(python), "-m", "pip", "install", "--quiet", "-c", str(constraints),
                      str(source), f"pytest=={_locked('pytest')}"],
                     env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    if installed.returncode != 0 and OFFLINE.search(installed.stderr):
        pytest.skip("the package index cannot be reached: the oldest versions are not tested")
    assert installed.returncode == 0, installed.stderr[-4000:]
    return python


def test_exactly_the_lower_bounds_are_installed(oldest):
    frozen = _run([str(oldest), "-m", "pip", "freeze"]).stdout
    versions = {re.sub(r"[-_.]+", "-", n).lower(): v for n, _, v in
                (line.partition("==") for line in frozen.splitlines())}
    for name, version in floors().items():
        assert versions.get(re.sub(r"[-_.]+", "-", name).lower()) == version, name
    check = _run([str(oldest), "-m", "pip", "check"])
    assert check.returncode == 0, check.stdout


def test_the_engine_and_the_neural_stage_pass_their_tests_at_the_oldest_versions(oldest):
    done = _run([str(oldest), "-m", "pytest", *TESTS, "-m", "not workflow", "-q",
                 "-p", "no:cacheprovider"], cwd=ROOT)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    assert re.search(r"\d+ passed", done.stdout)


def test_the_workflow_validates_and_plans_at_the_oldest_versions(oldest, tmp_path):
    for name in ("Snakefile", "workflow", "profiles", "published"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    checked = _run([str(oldest.parent / "neurd"), "check-config", "workflow/config/smoke.yaml"],
                   cwd=tmp_path)
    assert checked.returncode == 0, checked.stderr[-3000:]
    planned = _run([str(oldest), "-m", "snakemake", "-n", "--cores", "2", "--configfile",
                    "workflow/config/smoke.yaml"], cwd=tmp_path)
    assert planned.returncode == 0, planned.stderr[-3000:]
    assert "neural_run" in planned.stdout and "fig6" in planned.stdout
