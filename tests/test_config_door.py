"""What ``neurd check-config`` once let through, each refused there in one line naming the key:
a stray game in a per-game mapping, a misspelled game (one line, the closest names, not
OpenSpiel's list of every game), a reading that plays other games or other game strings than
the neural section, a bad ``NEURD_CHECKPOINT_MINUTES``; and every message names a key one way,
``config key 'section.key[i]'``."""

import copy
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from neurd.config import ConfigError
from neurd.stages import validate

ROOT = Path(__file__).resolve().parents[1]
NEURD = str(Path(sys.executable).parent / "neurd")


def _check_config(tmp_path, text: str, **env):
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    return subprocess.run([NEURD, "check-config", str(path)], capture_output=True, text=True,
                          cwd=ROOT, env=dict(os.environ, JAX_PLATFORMS="cpu", **env))


def _refused_in_one_line(done, *named) -> str:
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and all(n in errors[0] for n in named), done.stderr[-3000:]
    return errors[0]


@pytest.mark.parametrize("mapping", ["phase_iterations", "throughput"])
def test_a_stray_game_in_a_per_game_mapping_is_refused(tmp_path, mapping):
    done = _check_config(tmp_path, f"neural:\n  {mapping}: {{kuhn: 40, kuhnn: 50}}\n")
    _refused_in_one_line(done, f"config key 'neural.{mapping}.kuhnn'", "did you mean 'kuhn'",
                         "mine.yaml")


def test_a_misspelled_game_is_one_line_with_the_closest_names(tmp_path):
    done = _check_config(tmp_path, "neural:\n  game_strings: {kuhn: 'kuhn_pokr()'}\n")
    _refused_in_one_line(done, "config key 'neural.game_strings.kuhn'", "'kuhn_pokr()'",
                         "'kuhn_poker'", "mine.yaml")
    assert len(done.stderr.splitlines()) < 10, done.stderr  # not OpenSpiel's 127 names
    assert "2048" not in done.stderr and "Available games" not in done.stderr


def test_openspiel_prints_nothing_of_its_own_for_a_bad_parameter(tmp_path):
    done = _check_config(tmp_path, "neural:\n  game_strings: {kuhn: 'kuhn_poker(playrs=3)'}\n")
    line = _refused_in_one_line(done, "config key 'neural.game_strings.kuhn'", "playrs")
    assert "OpenSpiel exception" not in done.stderr.replace(line, "")


@pytest.mark.parametrize("readings, key", [
    ({"neural": {"games": ["kuhn"]}}, "readings.neural.games"),
    ({"neural": {"game_strings": {"leduc": "leduc_poker(suit_isomorphism=true)"}}},
     "readings.neural.game_strings.leduc"),
    ({"variants": {"other": {"game_strings": {"kuhn": "kuhn_poker(players=2)"}}}},
     "readings.variants.other.game_strings.kuhn"),
])
def test_a_reading_of_other_games_is_refused_at_validation(readings, key):
    config = yaml.safe_load((ROOT / "workflow/config/default.yaml").read_text())
    update_config(config, {"readings": copy.deepcopy(readings)})
    with pytest.raises(ConfigError) as info:
        validate(config, ROOT / "workflow/schemas", ["mine.yaml"], games=False)
    assert f"config key '{key}'" in str(info.value) and "mine.yaml" in str(info.value)


def test_a_bad_checkpoint_minutes_variable_is_refused_by_check_config(tmp_path):
    """One bad value through this door (a process of its own: seconds); every kind of bad
    value (not a number, NaN, negative, infinite) is refused through neurd neural-run's in
    tests/test_refusals.py, by the same check."""
    done = _check_config(tmp_path, "seed: 0\n", NEURD_CHECKPOINT_MINUTES="nan")
    _refused_in_one_line(done, "NEURD_CHECKPOINT_MINUTES", repr("nan"))


@pytest.mark.parametrize("changes", [
    {"matrix": {"horizons": [10, -5]}}, {"rps": {"dt": 0}}, {"neural": {"seeds": "2"}},
    {"neural": {"phase_iterations": {"kuhnn": 40}}}, {"tabular": {"figure_game": "chess"}},
    {"neural": {"entropies": [float("nan")]}}, {"neural": {"hidden_sizes": [-3]}},
    {"readings": {"variants": {"x": {"networks": "triple"}}}},
])
def test_every_message_names_its_key_one_way(changes):
    config = yaml.safe_load((ROOT / "workflow/config/default.yaml").read_text())
    update_config(config, copy.deepcopy(changes))
    with pytest.raises(ConfigError) as info:
        validate(config, ROOT / "workflow/schemas", ["mine.yaml"], games=False)
    message = str(info.value)
    assert "config key [" not in message and "config key (" not in message, message
    assert re.match(r"(readings\.[a-z0-9_.]+: )?(config key '[a-z][a-z0-9_]*(\.[a-z0-9_]+|"
                    r"\[\d+\])*': |config: every number must be finite, got "
                    r"[a-z][a-z0-9_.\[\]]* = )", message), message
