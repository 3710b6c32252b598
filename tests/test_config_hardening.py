"""The classes of bad config that used to get through validation, each refused before any job.

Games are loaded and walked when the config is validated; what a run will write, allocate
and ask a scheduler for is bounded (``limits``); every list and name has a length bound;
mapping settings merge over their defaults; ``neurd check-config`` runs nothing from a
file; every ``neurd`` step turns a game error into one line naming the key.
"""

import copy
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from snakemake.utils import update_config

from neurd.config import ConfigError
from neurd.stages import snapshot, validate

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "workflow/schemas"


def _default() -> dict:
    return yaml.safe_load((ROOT / "workflow/config/default.yaml").read_text())


def _refusal(changes: dict) -> str:
    """The message validating the default config with ``changes`` merged in gives."""
    config = _default()
    update_config(config, copy.deepcopy(changes))
    with pytest.raises(ConfigError) as info:
        validate(config, SCHEMAS, ["mine.yaml"])
    message = str(info.value)
    assert "mine.yaml" in message and "\n" not in message, message
    return message


# --- games ----------------------------------------------------------------------------------

@pytest.mark.parametrize("section", ["tabular", "neural"])
@pytest.mark.parametrize("game_string, reason", [
    ("matrix_pd", "ZERO_SUM"),  # general-sum
    ("kuhn_poker(players=3)", "3 players"),
    ("no_such_game", "cannot load"),
    ("kuhn_poker(players=2", "cannot load"),  # malformed
])
def test_a_game_the_engine_cannot_solve_is_refused_by_key(section, game_string, reason):
    message = _refusal({section: {"game_strings": {"kuhn": game_string}}})
    assert f"{section}.game_strings.kuhn" in message and reason in message


@pytest.mark.parametrize("section", ["tabular", "neural"])
def test_a_wrong_information_state_count_is_refused_by_key(section):
    message = _refusal({section: {"expected_infostates": {"leduc": 935}}})
    assert f"{section}.expected_infostates.leduc" in message and "936" in message


def test_a_game_too_large_is_refused_quickly_and_the_cap_can_be_raised():
    """Goofspiel 8 has billions of histories: refused while counting, in seconds, naming the
    key and the limit; a smaller cap refuses Leduc, and raising it accepts it again."""
    start = time.perf_counter()
    message = _refusal({"tabular": {"games": ["goofspiel"], "figure_game": "goofspiel",
                                    "game_strings": {"goofspiel": "goofspiel(num_cards=8)"},
                                    "expected_infostates": {}}})
    assert time.perf_counter() - start < 20
    assert "tabular.game_strings.goofspiel" in message and "limits.max_histories" in message
    message = _refusal({"limits": {"max_histories": 5000}})
    assert "game_strings.leduc" in message and "more than 5,000 histories" in message
    config = _default()
    config["limits"] = {"max_histories": 30000}
    validate(config, SCHEMAS)


def test_the_neural_stage_needs_an_information_state_tensor():
    message = _refusal({"neural": {"games": ["ttt"], "game_strings": {"ttt": "tic_tac_toe"},
                                   "phase_iterations": {"ttt": 8}, "exact_critic_games": []}})
    assert "neural.game_strings.ttt" in message and "information-state tensor" in message


@pytest.mark.parametrize("section, step, extra", [
    ("neural", "neural-game", ["--out", "k.npz"]),
    ("tabular", "compile-game", ["--out", "k.npz"]),
    ("tabular", "tabular-openspiel-check", ["--solver", "cfr_rm", "--compiled", "k.npz",
                                            "--reference", "r.parquet", "--out", "k.parquet"]),
])
def test_every_step_turns_a_game_error_into_one_line_naming_the_key(tmp_path, section, step,
                                                                    extra):
    """A snapshot edited by hand past validation: the step that meets the game says what is
    wrong in one line naming the key, without a traceback."""
    config = _default()
    validate(config, SCHEMAS)
    cfg = snapshot(config, section)
    cfg["game_strings"]["kuhn"] = "kuhn_poker(players=3)"
    path = tmp_path / f"{section}.json"
    path.write_text(json.dumps(cfg))
    run = subprocess.run([sys.executable, "-m", "neurd.cli", step, "--config", str(path),
                          "--game", "kuhn", *extra], capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2, run.stderr[-2000:]
    errors = [line for line in run.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and f"{section}.game_strings.kuhn" in errors[0], run.stderr[-2000:]
    assert "Traceback" not in run.stderr


# --- products of in-range numbers -----------------------------------------------------------

def test_a_table_too_long_is_refused_with_its_estimate():
    message = _refusal({"neural": {"seeds": 500, "seeds_per_job": 100, "seeds_per_batch": 10,
                                   "checkpoints": {"geometric": 10000, "linear": 10000}}})
    assert "neural.checkpoints" in message and "rows" in message
    assert "limits.max_table_rows" in message
    message = _refusal({"tabular": {"checkpoints": 10000, "step_sizes": list(range(1, 101))},
                        "limits": {"max_table_rows": 1000000}})
    assert "tabular.checkpoints" in message and "limits.max_table_rows = 1,000,000" in message


def test_networks_or_batches_that_cannot_fit_in_memory_are_refused():
    message = _refusal({"neural": {"hidden_sizes": [65536, 65536], "seeds_per_batch": 5}})
    assert "neural.seeds_per_batch" in message and "MB" in message
    assert "limits.max_job_memory_mb" in message
    message = _refusal({"neural": {"policy_batch": 1000000}})
    assert "neural.seeds_per_batch" in message and "memory" in message


def test_an_absurd_runtime_request_is_refused():
    """A tiny throughput used to ask SLURM for 1e303 minutes."""
    message = _refusal({"neural": {"throughput": {"leduc": 1e-300}}})
    assert "neural.throughput.leduc" in message and "limits.max_runtime_minutes" in message
    message = _refusal({"tabular": {"iterations": 10000000, "step_sizes": list(range(1, 101))}})
    assert "tabular.iterations" in message and "minutes" in message


def test_the_shipped_scales_are_within_the_default_limits():
    for scale in ("smoke", "default", "paper"):
        config = _default()
        top = yaml.safe_load((ROOT / f"workflow/config/{scale}.yaml").read_text())
        for key, value in top.items():
            if isinstance(value, dict):
                config.setdefault(key, {}).update(value)
            else:
                config[key] = value
        # the paper's neural sizes need a GPU where none is visible (tests/test_gpu_settings.py)
        config["neural"]["allow_cpu"] = scale == "paper"
        validate(config, SCHEMAS)


# --- lengths ----------------------------------------------------------------------------------

def _unbounded(schema, path=""):
    """Arrays without maxItems, strings without maxLength or enum, open mappings without
    maxProperties and propertyNames, anywhere in a schema."""
    if not isinstance(schema, dict):
        return []
    found = []
    kind = schema.get("type")
    if kind == "array" and "maxItems" not in schema:
        found.append(path)
    if kind == "string" and "maxLength" not in schema and "enum" not in schema:
        found.append(path)
    if (kind == "object" and isinstance(schema.get("additionalProperties"), dict)
            and not {"maxProperties", "propertyNames"} <= set(schema)):
        found.append(path)
    for key, sub in schema.get("properties", {}).items():
        found += _unbounded(sub, f"{path}.{key}")
    for key in ("items", "additionalProperties", "propertyNames"):
        found += _unbounded(schema.get(key), f"{path}[{key}]")
    return found


def test_every_list_name_and_mapping_of_every_schema_has_a_length_bound():
    found = []
    for schema in sorted(SCHEMAS.glob("*.schema.yaml")):
        found += [f"{schema.name}: {p}" for p in _unbounded(yaml.safe_load(schema.read_text()))]
    assert not found, found


@pytest.mark.parametrize("changes, key", [
    ({"neural": {"games": ["k" * 300], "game_strings": {"k" * 300: "kuhn_poker"}}},
     "neural.games[0]"),
    ({"scale": "s" * 300}, "config key 'scale'"),
    ({"neural": {"entropies": [i / 1e5 for i in range(100000)]}}, "neural.entropies"),
    ({"tabular": {"game_strings": {"kuhn": "kuhn_poker" + " " * 10000}}},
     "tabular.game_strings.kuhn"),
    ({"matrix": {"alternative_rewards": [{"name": f"r{i}", "win": 1.0, "loss": 0.0}
                                         for i in range(1000)]}},
     "matrix.alternative_rewards"),
])
def test_a_too_long_list_or_name_is_refused_by_key(changes, key):
    assert key in _refusal(changes)


# --- mapping settings -------------------------------------------------------------------------

def test_one_entry_of_a_mapping_setting_is_merged_over_the_defaults():
    config = _default()
    config["neural"]["game_strings"] = {"leduc": "leduc_poker"}
    config["neural"]["throughput"] = {"kuhn": 1000.0}
    validate(config, SCHEMAS)
    neural = config["neural"]
    assert set(neural["game_strings"]) == {"kuhn", "leduc", "goofspiel"}
    assert neural["throughput"]["kuhn"] == 1000.0 and neural["throughput"]["leduc"] == 5000


def test_a_changed_game_string_drops_the_default_count_not_blames_it():
    """Leduc with another string: its default 936 information states no longer apply (the
    game is counted, not compared with a number the user never wrote)."""
    config = _default()
    config["tabular"]["game_strings"] = {"leduc": "leduc_poker(players=2,suit_isomorphism=True)"}
    validate(config, SCHEMAS)
    assert "leduc" not in config["tabular"]["expected_infostates"]
    assert config["tabular"]["expected_infostates"]["kuhn"] == 12


# --- config files -----------------------------------------------------------------------------

def _check_config(tmp_path, text: str) -> subprocess.CompletedProcess:
    path = tmp_path / "mine.yaml"
    path.write_text(text)
    return subprocess.run([sys.executable, "-m", "neurd.cli", "check-config", str(path),
                           "--workflow", str(ROOT)], capture_output=True, text=True, timeout=60)


def test_check_config_never_runs_a_files_content(tmp_path):
    marker = tmp_path / "ran"
    run = _check_config(tmp_path, f"__use_yte__: true\nseed: ?open({str(marker)!r}, 'w')"
                        ".write('x')\n")
    assert run.returncode == 2 and not marker.exists()
    assert "mine.yaml" in run.stderr and "__use_yte__" in run.stderr


def test_check_config_refuses_duplicate_keys_by_key_and_line(tmp_path):
    run = _check_config(tmp_path, "neural:\n  seeds: 5\n  phases: 3\n  seeds: 40\n")
    assert run.returncode == 2 and "'seeds'" in run.stderr and "line 4" in run.stderr


def test_check_config_refuses_a_huge_file_and_an_alias_bomb_quickly(tmp_path):
    bomb = ["rps:", "  dt: 0.1", "  x0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]"]
    bomb += [f"  x{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    start = time.perf_counter()
    run = _check_config(tmp_path, "\n".join(bomb) + "\n")
    assert run.returncode == 2 and "alias" in run.stderr and "mine.yaml" in run.stderr
    big = tmp_path / "big.yaml"
    with open(big, "w") as handle:
        handle.write("seed: 0\n")
        handle.truncate(50 * 2**20)
    run2 = subprocess.run([sys.executable, "-m", "neurd.cli", "check-config", str(big),
                           "--workflow", str(ROOT)], capture_output=True, text=True, timeout=60)
    assert run2.returncode == 2 and "big.yaml" in run2.stderr
    assert time.perf_counter() - start < 30
