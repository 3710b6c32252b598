"""The dependency lists stay in step: pyproject.toml, environment.yml, requirements.lock."""

import re
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


def _environment_requirements(path: str = "environment.yml") -> dict[str, str]:
    env = yaml.safe_load((ROOT / path).read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    reqs = [Requirement(s) for s in pip if not s.startswith("-e")]
    return {_canonical(r.name): str(r.specifier) for r in reqs}


def _locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            pins[_canonical(name)] = version
    return pins


@pytest.mark.parametrize("path", ["environment.yml", "workflow/envs/neurd.yaml"])
def test_conda_environments_pin_the_locked_versions(path):
    """The conda files list pyproject's packages at exactly the versions the lock pins."""
    pins = _locked()
    assert _environment_requirements(path) == {
        name: f"=={pins[name]}" for name in _pyproject_requirements()}


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


def test_lower_bounds_are_the_tested_floor():
    """Each direct dependency's lower bound is the version the lock pins (and CI installs)."""
    pins = _locked()
    for name, specifier in _pyproject_requirements().items():
        floors = [s.version for s in Requirement(f"{name}{specifier}").specifier
                  if s.operator == ">="]
        assert floors == [pins[name]], (
            f"{name}: pyproject's lower bound {floors} is not the locked {pins[name]}; "
            "raise the bound and run `make lock`")
