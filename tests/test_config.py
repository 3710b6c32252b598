"""Config: the schema fills defaults and names every bad key before any job runs."""

import copy
from pathlib import Path

import pytest
import yaml
from snakemake_interface_common.exceptions import WorkflowError

from neurd.config import ConfigError, section
from neurd.stages import validate

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "workflow/schemas"
SCALES = ["smoke", "default", "paper"]


def _load(scale: str) -> dict:
    """A scale's config as Snakemake builds it: default.yaml, then the scale on top."""
    def merge(base, top):
        for key, value in top.items():
            if isinstance(value, dict) and isinstance(base.get(key), dict):
                merge(base[key], value)
            else:
                base[key] = value
        return base

    config = yaml.safe_load((ROOT / "workflow/config/default.yaml").read_text())
    return merge(config, yaml.safe_load((ROOT / f"workflow/config/{scale}.yaml").read_text()))


def _validated(config: dict) -> dict:
    config = copy.deepcopy(config)
    validate(config, SCHEMAS)
    return config


@pytest.mark.parametrize("scale", SCALES)
def test_every_scale_is_valid(scale):
    config = _load(scale)
    if scale == "paper":  # its neural sizes need a GPU where none is visible (test_gpu_settings)
        config = {**config, "neural": {**config.get("neural", {}), "allow_cpu": True}}
    config = _validated(config)
    assert config["scale"] == scale
    assert section(config, "matrix")["seed"] == config["seed"]


def test_defaults_are_filled():
    config = _validated({})
    assert config["seed"] == 0
    assert config["matrix"]["switch_fraction"] == 0.4
    assert config["matrix"]["figure2"] == {"horizon": 100, "step_size": 0.21, "forfeit": True}


def _error(config: dict) -> str:
    with pytest.raises((WorkflowError, ConfigError)) as info:
        _validated(config)
    return str(info.value)


def test_unknown_key_is_named():
    assert "'horizon_list' was unexpected" in _error({"matrix": {"horizon_list": [10]}})
    assert "'sedd' was unexpected" in _error({"sedd": 3})


def test_wrong_type_is_named():
    message = _error({"matrix": {"switch_fraction": "forty percent"}})
    assert "is not of type 'number'" in message and "matrix.switch_fraction" in message


def test_non_positive_horizon_is_named():
    message = _error({"matrix": {"horizons": [10, 0, 100]}})
    assert "matrix.horizons[1]" in message


def test_non_positive_step_size_is_named():
    message = _error({"matrix": {"step_sizes": {"min": 0.0}}})
    assert "matrix.step_sizes.min" in message
    message = _error({"matrix": {"figure2": {"step_size": -0.21}}})
    assert "matrix.figure2.step_size" in message


def test_cross_field_checks_name_the_key():
    assert "matrix.step_sizes.max" in _error({"matrix": {"step_sizes": {"min": 10.0, "max": 1.0}}})
    assert "matrix.figure2.horizon" in _error({"matrix": {"horizons": [10, 200, 1000]}})
    assert "matrix.fit_min_horizon" in _error({"matrix": {"fit_min_horizon": 100000}})
    assert "rps.portraits.average_time" in _error({"rps": {"portraits": {"average_time": 50.0}}})


def test_checks_the_schema_guarantees_are_left_to_it():
    assert "non-unique" in _error({"matrix": {"horizons": [10, 100, 100]}})
    assert "non-unique" in _error({"tabular": {"step_sizes": [1.0, 1.0]}})
    assert "tabular.step_sizes[0]" in _error({"tabular": {"step_sizes": [0.0, 1.0]}})


def test_sizes_are_bounded_by_what_a_machine_can_hold():
    assert "rps.trajectories" in _error({"rps": {"trajectories": 10000,
                                                 "biased": {"iterations": 1000000}}})
    assert "neural.seeds" in _error({"neural": {"seeds": 10000, "seeds_per_job": 10,
                                                "seeds_per_batch": 10}})
    assert "matrix.step_sizes.num" in _error({"matrix": {"step_sizes": {"num": 10**9}}})
    assert "config key 'seed'" in _error({"seed": 2**40})


def test_non_finite_numbers_are_refused_by_name_first():
    message = _error({"rps": {"portraits": {"rtol": float("nan")}}})
    assert "rps.portraits.rtol = nan" in message
    message = _error({"matrix": {"step_sizes": {"min": float("nan"), "max": 10.0}}})
    assert "matrix.step_sizes.min = nan" in message and "step_sizes.max" not in message
