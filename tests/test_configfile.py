"""neurd.configfile: config files read without trusting them.

Every refusal is a one-line ConfigError naming the file (and key and line
where there is one); the shipped configs load as ``yaml.safe_load`` loads them.
"""

import json
import os
import threading
import time
import tracemalloc
from pathlib import Path

import pytest
import yaml

from neurd import configfile
from neurd.config import ConfigError
from neurd.configfile import MAX_CONFIG_BYTES, MAX_CONFIG_NODES, parse_config, read_config_file

SHIPPED = sorted((Path(__file__).parents[1] / "workflow" / "config").glob("*.yaml"))


def _refusal(tmp_path, text, name="my.yaml"):
    """The message of the ConfigError reading ``text`` from a file raises; checks it
    is one line and names the file."""
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        read_config_file(path)
    message = str(info.value)
    assert "\n" not in message
    assert f"config file {path}" in message
    return message


# --- what loads ----------------------------------------------------------------------


def test_the_shipped_configs_are_found():
    assert {path.name for path in SHIPPED} >= {"default.yaml", "paper.yaml", "smoke.yaml"}


@pytest.mark.parametrize("path", SHIPPED, ids=lambda path: path.name)
def test_a_shipped_config_loads_as_safe_load_loads_it(path):
    with open(path, encoding="utf-8") as handle:
        expected = yaml.safe_load(handle)
    assert read_config_file(path) == expected
    assert parse_config(json.dumps(expected, indent=2), "as.json") == expected  # and as JSON


def test_small_aliases_and_merge_keys_load_as_safe_load_loads_them(tmp_path):
    # A key a mapping writes itself overrides a merged one: no duplicate.
    text = ("base: &base {rtol: 1.0e-6, steps: [1, 2]}\n"
            "rps:\n  portraits:\n    <<: *base\n    rtol: 1.0e-3\n"
            "matrix:\n  <<: [*base, {extra: true}]\n  horizons: *base\n")
    path = tmp_path / "aliases.yaml"
    path.write_text(text)
    assert read_config_file(path) == yaml.safe_load(text)
    assert read_config_file(path)["rps"]["portraits"] == {"rtol": 1.0e-3, "steps": [1, 2]}


def test_a_false_use_yte_is_dropped_as_yte_drops_it(tmp_path):
    import yte

    text = "__use_yte__: false\nseed: 3\nnote: '?1 + 1'\n"
    path = tmp_path / "plain.yaml"
    path.write_text(text)
    assert read_config_file(path) == yte.process_yaml(text, require_use_yte=True) \
        == {"seed": 3, "note": "?1 + 1"}


# --- size ----------------------------------------------------------------------------


def test_a_50_mb_file_is_refused_from_its_size_without_reading_it(tmp_path, monkeypatch):
    path = tmp_path / "huge.yaml"
    with open(path, "wb") as handle:
        handle.truncate(50 * 2**20)  # sparse: no 50 MB written
    monkeypatch.setattr(configfile, "open", lambda *a, **k: pytest.fail("opened"),
                        raising=False)
    start = time.perf_counter()
    with pytest.raises(ConfigError) as info:
        read_config_file(path)
    assert time.perf_counter() - start < 0.5
    message = str(info.value)
    assert "\n" not in message and f"config file {path}" in message
    assert f"{50 * 2**20} bytes" in message and f"{MAX_CONFIG_BYTES}-byte cap" in message


def test_a_file_one_byte_over_the_cap_is_refused(tmp_path):
    message = _refusal(tmp_path, "#" * (MAX_CONFIG_BYTES + 1))
    assert f"{MAX_CONFIG_BYTES + 1} bytes" in message


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no named pipes")
def test_a_pipe_is_read_no_further_than_the_cap(tmp_path):
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)

    def write():
        try:
            with open(path, "wb") as pipe:
                for _ in range(60):  # 60 MiB if nobody stops reading
                    pipe.write(b"#" * 2**20)
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    with pytest.raises(ConfigError) as info:
        read_config_file(path)
    writer.join(10)
    assert not writer.is_alive()
    assert f"config file {path} holds more than the {MAX_CONFIG_BYTES}-byte cap" \
        in str(info.value)


# --- duplicate keys ------------------------------------------------------------------


@pytest.mark.parametrize(("text", "key", "where"), [
    ('{"seed": 1,\n "scale": "x",\n "seed": 2}', "seed", "line 3 (first at line 1)"),
    ('{"rps": {\n  "portraits": {"rtol": 1,\n   "rtol": 2}}}', "rtol",
     "line 3 (first at line 2)"),
    ('{"matrix": {"horizons": [1, {"a": 1},\n {"a": 1, "b": 2,\n  "a": 3}]}}', "a",
     "line 3 (first at line 2)"),
    # the same key in a nested object is no duplicate; the second at the top level is
    ('{"rps": {"seed": 1},\n "seed": 2,\n "seed": 3}', "seed", "line 3 (first at line 2)"),
], ids=["top", "nested", "in-list", "shadowed"])
def test_json_duplicate_keys_are_refused_naming_key_and_line(tmp_path, text, key, where):
    message = _refusal(tmp_path, text, "my.json")
    assert f"duplicate key {key!r} at {where}" in message


@pytest.mark.parametrize(("text", "key", "where"), [
    ("seed: 1\nscale: x\nseed: 2\n", "seed", "line 3 (first at line 1)"),
    ("rps:\n  portraits:\n    rtol: 1\n    steps: 2\n    rtol: 3\n", "rtol",
     "line 5 (first at line 3)"),
    ("matrix:\n  games:\n    - name: a\n      size: 2\n      name: b\n", "name",
     "line 5 (first at line 3)"),
    ("rps: {a: 1, b: 2,\n  a: 3}\n", "a", "line 2 (first at line 1)"),
    ("rps:\n  1: a\n  1.0: b\n", "1.0", "line 3 (first at line 2)"),  # equal as values
    ("rps:\n  <<: {a: 1}\n  <<: {b: 2}\n", "<<", "line 3 (first at line 2)"),
], ids=["top", "nested", "in-list", "flow", "equal-values", "merge-twice"])
def test_yaml_duplicate_keys_are_refused_naming_key_and_line(tmp_path, text, key, where):
    message = _refusal(tmp_path, text)
    assert f"duplicate key {key!r} at {where}" in message


# --- nothing is evaluated ------------------------------------------------------------


def test_use_yte_is_refused_and_its_expressions_never_run(tmp_path):
    import yte

    marker = tmp_path / "evaluated"
    text = ("__use_yte__: true\n"
            f"seed: \"?__import__('pathlib').Path({str(marker)!r}).write_text('x')\"\n")
    message = _refusal(tmp_path, text)
    assert not marker.exists()
    assert "line 1 sets __use_yte__" in message
    assert "never evaluates" in message and "Snakemake itself would evaluate" in message
    assert "write plain values" in message
    # what Snakemake's loader does with the same text: the expression runs
    yte.process_yaml(text, require_use_yte=True)
    assert marker.read_text() == "x"


@pytest.mark.parametrize("flag", ["yes", "1", "[true]", "'on'"])
def test_any_true_use_yte_is_refused(tmp_path, flag):
    assert "sets __use_yte__" in _refusal(tmp_path, f"seed: 1\n__use_yte__: {flag}\n")


@pytest.mark.parametrize(("value", "tag"), [
    ("!!python/object/apply:os.system ['touch {marker}']", "!!python/object/apply:os.system"),
    ("!!python/name:os.system", "!!python/name:os.system"),
    ("!!python/tuple [1, 2]", "!!python/tuple"),
    ("!!python/object/new:pathlib.Path ['{marker}']", "!!python/object/new:pathlib.Path"),
    ("!local 1", "!local"),
])
def test_tags_outside_plain_data_are_refused(tmp_path, value, tag):
    marker = tmp_path / "evaluated"
    message = _refusal(tmp_path, "seed: 1\nrps:\n  x: " + value.format(marker=marker) + "\n")
    assert f"tag {tag} at line 3 is not allowed" in message
    assert not marker.exists()


# --- alias expansion -----------------------------------------------------------------


def _laughs(levels: int) -> str:
    """A billion laughs in a section: each level a list of 9 aliases of the one before."""
    names = [chr(ord("a") + i) for i in range(levels)]
    lines = ["seed: 1", "rps:", f"  {names[0]}: &{names[0]} [" + ", ".join(["lol"] * 9) + "]"]
    for before, name in zip(names, names[1:]):
        lines.append(f"  {name}: &{name} [" + ", ".join([f"*{before}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_fast_and_small(tmp_path):
    path = tmp_path / "bomb.yaml"
    path.write_text(_laughs(9))  # 9**9, some 387 million strings once expanded
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(ConfigError) as info:
            read_config_file(path)
        seconds = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 2 and peak < 10 * 2**20
    message = str(info.value)
    assert "\n" not in message and f"config file {path}" in message
    assert f"more than {MAX_CONFIG_NODES} values once its aliases are expanded" in message


def test_aliases_expanding_to_under_the_cap_load(tmp_path):
    # 5 levels: some 75,000 nodes expanded (6 levels: 600,000, refused)
    path = tmp_path / "aliases.yaml"
    path.write_text(_laughs(5))
    assert read_config_file(path) == yaml.safe_load(_laughs(5))
    assert "once its aliases are expanded" in _refusal(tmp_path, _laughs(6))


def test_a_recursive_alias_is_refused(tmp_path):
    message = _refusal(tmp_path, "seed: 1\nrps:\n  loop: &loop [1, *loop]\n")
    assert "anchored at line 3 holds an alias of itself" in message


# --- malformed files keep their messages ---------------------------------------------


@pytest.mark.parametrize(("text", "where"), [
    ("seed: [1,\n", "line 2, column 1"),
    ("matrix:\n\thorizons: [10]\n", "line 2, column 1"),
    ('{"seed": 1,', "line 1, column 12"),
])
def test_malformed_yaml_is_reported_with_line_and_column(tmp_path, text, where):
    path = tmp_path / "my.yaml"
    message = _refusal(tmp_path, text)
    assert message.startswith(f"config file {path} is neither JSON nor valid YAML at {where}: ")


def test_other_refusals_name_the_file(tmp_path):
    assert "expected keys at the top level" in _refusal(tmp_path, "- 1\n- 2\n")
    assert "expected keys at the top level" in _refusal(tmp_path, "")
    assert "nested too deep" in _refusal(tmp_path, "[" * 5000)
    assert "nested too deep" in _refusal(tmp_path, '{"a": ' * 5000, "deep.json")
    assert "the value at line 2, column 9 cannot be read: month must be in 1..12" \
        in _refusal(tmp_path, "seed: 1\nstart:  2020-13-01\n")
    missing = tmp_path / "missing.yaml"
    with pytest.raises(ConfigError, match=f"config file {missing}: cannot read it"):
        read_config_file(missing)
