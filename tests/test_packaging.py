"""The dependency lists stay in step: pyproject.toml's bounds, requirements.lock's pins and
the conda environments written from the lock (workflow/envs/from_lock.py).  That the lower
bounds work is tests/test_oldest_versions.py's part."""

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pyproject_requirements() -> dict[str, str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    specs = project["dependencies"] + extras["test"] + extras["slurm"]  # cuda: GPU machines only
    return {_canonical(Requirement(s).name): str(Requirement(s).specifier) for s in specs}


def _locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[_canonical(name)] = version
    return pins


@pytest.mark.parametrize("path", ["environment.yml", "workflow/envs/neurd.yaml"])
def test_conda_environments_pin_every_locked_version(path):
    """The conda files are written from the lock: every locked package at its version, no
    other (environment.yml adds the package itself)."""
    env = yaml.safe_load((ROOT / path).read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    pinned = {}
    for line in pip:
        if line.startswith("-e"):
            continue
        requirement = Requirement(line)
        (spec,) = requirement.specifier
        assert spec.operator == "==", line
        pinned[_canonical(requirement.name)] = spec.version
    assert pinned == _locked()
    assert ("-e ." in pip) == (path == "environment.yml")
    generator = ROOT / "workflow/envs/from_lock.py"
    check = subprocess.run([sys.executable, str(generator), "--check"], capture_output=True,
                           text=True)
    assert check.returncode == 0, check.stderr


def test_lock_pins_every_dependency_within_its_bounds():
    pins = _locked()
    for name, specifier in _pyproject_requirements().items():
        assert name in pins, f"{name} is not pinned in requirements.lock (run `make lock`)"
        assert Requirement(f"{name}{specifier}").specifier.contains(pins[name]), (
            f"requirements.lock pins {name}=={pins[name]}, outside pyproject's {specifier}"
        )


def test_lock_pins_exact_versions():
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[A-Za-z0-9_.+\-]+", line.strip()), line


def test_every_dependency_has_a_lower_bound_and_the_extras_are_the_locked_versions():
    """Runtime dependencies: one lower bound each, the oldest tested version
    (tests/test_oldest_versions.py installs exactly those); the test and SLURM extras: the
    versions the lock pins, which the whole suite runs on."""
    pins = _locked()
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    for spec in project["dependencies"]:
        requirement = Requirement(spec)
        assert [s.operator for s in requirement.specifier] == [">="], spec
    extras = project["optional-dependencies"]
    for spec in extras["test"] + extras["slurm"]:
        requirement = Requirement(spec)
        floors = [s.version for s in requirement.specifier if s.operator == ">="]
        name = _canonical(requirement.name)
        assert floors == [pins[name]], (
            f"{name}: pyproject's lower bound {floors} is not the locked {pins[name]}")
