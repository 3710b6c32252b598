"""The paper's neural sizes need a GPU: without one they are refused at validation with the
estimated CPU hours and the key that allows them; jobs sharing a GPU size their memory."""

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from neurd.config import ConfigError
from neurd.limits import check_games
from neurd.pipeline import neural, neural_resources
from neurd.stages import load_config

ROOT = Path(__file__).resolve().parents[1]
NEURD = str(Path(sys.executable).parent / "neurd")


def _section(*files):
    config = load_config([str(ROOT / f) for f in files], ROOT, games=False)
    return config["neural"], check_games("neural", config["neural"], config["limits"])


def _no_gpu():
    return False


def _never():
    raise AssertionError("asked for a GPU where the CPU is enough")


def test_the_paper_scale_without_a_gpu_is_refused_with_its_estimate_and_the_key():
    cfg, sizes = _section("workflow/config/paper.yaml")
    hours = neural_resources.cpu_hours(cfg, sizes)
    # 480 configurations x 3 x 0.33e6 iterations at the measured two-core rates, Kuhn twice
    # (its exact-critic runs): about 100 hours, Goofspiel the most
    assert 90 < sum(hours.values()) < 120 and max(hours, key=hours.get) == "goofspiel"
    with pytest.raises(ConfigError, match=r"'neural.allow_cpu'.* about 104 CPU hours .*"
                                          r"goofspiel 78.*allow_cpu: true"):
        neural_resources.check_device(cfg, sizes, gpu=_no_gpu)
    neural_resources.check_device(cfg, sizes, gpu=lambda: True)
    neural_resources.check_device({**cfg, "allow_cpu": True}, sizes, gpu=_never)


@pytest.mark.parametrize("files", [(), ("workflow/config/smoke.yaml",)])
def test_the_default_and_smoke_scales_never_ask_for_a_gpu(files):
    cfg, sizes = _section(*files)
    assert sum(neural_resources.cpu_hours(cfg, sizes).values()) < 1
    neural_resources.check_device(cfg, sizes, gpu=_never)


def test_a_game_of_ones_own_is_estimated_from_its_information_states():
    cfg, _ = _section()
    cfg = {**cfg, "games": ["liars"], "game_strings": {"liars": "liars_dice"},
           "phase_iterations": {"liars": 10**6}, "exact_critic_games": []}
    sizes = check_games("neural", {**cfg, "expected_infostates": {}}, {"max_histories": 10**7})
    hours = neural_resources.cpu_hours(cfg, sizes)["liars"]
    states = sizes["liars"].infostates
    configurations = 2 * 6 * 5
    # at Goofspiel's measured cost per information state: 1.7e3 configuration-iterations per
    # second with 24 configurations on two cores (docs/performance.md) over its 2124 states
    assert hours == pytest.approx(configurations * 3e6 * states / (1.7e3 * 2124) / 3600)
    twice = {"liars": dataclasses.replace(sizes["liars"], infostates=2 * states)}
    assert neural_resources.cpu_hours(cfg, twice)["liars"] == pytest.approx(2 * hours)
    with pytest.raises(ConfigError, match="allow_cpu"):
        neural_resources.check_device(cfg, sizes, gpu=_no_gpu)


@pytest.mark.skipif(neural_resources.gpu_visible(),
                    reason="a GPU is visible here: nothing is refused")
def test_check_config_refuses_the_paper_scale_here_and_the_key_allows_it(tmp_path):
    refused = subprocess.run([NEURD, "check-config", "workflow/config/paper.yaml"], cwd=ROOT,
                             capture_output=True, text=True)
    assert refused.returncode == 2
    assert "config key 'neural.allow_cpu'" in refused.stderr and "CPU hours" in refused.stderr
    allow = tmp_path / "allow.yaml"
    allow.write_text("neural:\n  allow_cpu: true\n")
    allowed = subprocess.run([NEURD, "check-config", "workflow/config/paper.yaml", str(allow)],
                             cwd=ROOT, capture_output=True, text=True)
    assert allowed.returncode == 0, allowed.stderr[-2000:]


@pytest.mark.parametrize("gpus_per_job, gpus, expected", [
    (0, None, {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
    (0, 4, {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}),
    (1, None, {}),  # a cluster's job has its GPU to itself
    (1, 1, {}),
    (1, 2, {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.375"}),
    (1, 3, {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.250"}),
    (2, 4, {"XLA_PYTHON_CLIENT_MEM_FRACTION": "0.375"}),
])
def test_jobs_sharing_a_gpu_size_their_memory(gpus_per_job, gpus, expected):
    assert neural_resources.gpu_memory_environment({"gpus_per_job": gpus_per_job}, gpus) == expected


def test_settings_exported_to_the_jobs_keep_what_the_user_set(monkeypatch):
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.5")
    monkeypatch.delenv("XLA_PYTHON_CLIENT_PREALLOCATE", raising=False)
    neural_resources.export_settings({"checkpoint_minutes": 5, "gpus_per_job": 1}, gpus=4)
    import os

    assert os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] == "0.5"
    neural_resources.export_settings({"checkpoint_minutes": 5, "gpus_per_job": 0})
    assert os.environ["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert "allow_cpu" in neural.SETTINGS  # changes no number: out of the snapshot
