"""Every config key against wrong types, NaN, infinities, zero, negative and huge values.

A value is either refused before any job, by a message that names the key (and the config
files), or accepted by the schema and the stages' checks; NaN, infinities, wrong types and
huge sizes are always refused.
"""

import copy
import math
from pathlib import Path

import pytest
import yaml

from neurd.config import ConfigError
from neurd.stages import SECTIONS, SETTINGS, load_config, validate

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "workflow/schemas"
ALWAYS_REFUSED = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf, "huge": 1e300,
                  "text": "many", "long text": "x" * 1000}
MAYBE_REFUSED = {"zero": 0, "negative": -1}


def _leaves(schema: dict, path: tuple = ()):
    """``(path, leaf schema)`` of every key; an array contributes its first item."""
    kind = schema.get("type")
    if kind == "object" and "properties" in schema:
        for key, sub in schema["properties"].items():
            yield from _leaves(sub, (*path, key))
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        yield from _leaves(schema["additionalProperties"], (*path, "kuhn"))
    elif kind == "array" and isinstance(schema.get("items"), dict):
        yield from _leaves(schema["items"], (*path, 0))
    else:
        yield path, schema


def _all_leaves():
    found = []
    for name in ("config", *SECTIONS):
        schema = yaml.safe_load((SCHEMAS / f"{name}.schema.yaml").read_text())
        found += list(_leaves(schema))
    return found


def _default() -> dict:
    """The default config with every default filled in (a list setting the file leaves out,
    like ``matrix.alternative_rewards``, has its full default items to set a key in)."""
    config = yaml.safe_load((ROOT / "workflow/config/default.yaml").read_text())
    validate(config, SCHEMAS)
    return config


def _set(config: dict, path: tuple, value) -> dict:
    """``config`` with the key at ``path`` set to ``value`` (an array keeps one element)."""
    config = copy.deepcopy(config)
    node = config
    for key, following in zip(path[:-1], path[1:]):
        if isinstance(following, int):
            first = (node.get(key) or [{}])[0] if isinstance(node, dict) else {}
            node[key] = [copy.deepcopy(first) if isinstance(first, dict) else first]
            node = node[key]
        elif isinstance(key, int):
            node = node[key]
        else:
            node = node.setdefault(key, {})
    node[path[-1]] = value
    return config


def _dotted(path: tuple) -> str:
    return ".".join(str(p) for p in path if not isinstance(p, int))


def _refusal(config: dict):
    try:
        validate(config, SCHEMAS, ["fuzz.yaml"])
    except ConfigError as error:
        return str(error)
    return None


LEAVES = _all_leaves()
KEYS = [path for path, _ in LEAVES]


def test_the_fuzz_covers_every_section():
    assert {path[0] for path in KEYS} == {*SETTINGS, *SECTIONS}
    assert len(KEYS) > 70


@pytest.mark.parametrize("path", KEYS, ids=_dotted)
def test_every_key_refuses_bad_values_by_name(path):
    config = _default()
    last = [p for p in path if not isinstance(p, int)][-1]
    leaf = dict(LEAVES)[path]
    for label, value in {**ALWAYS_REFUSED, **MAYBE_REFUSED}.items():
        message = _refusal(_set(config, path, value))
        if label == "text" and leaf.get("type") == "string" and "enum" not in leaf:
            continue  # any text is a string; what it names is checked where it is used
        if label in ALWAYS_REFUSED:
            assert message is not None, f"{_dotted(path)} = {value!r} was accepted"
        if message is not None:
            assert str(last) in message and "fuzz.yaml" in message, (
                f"{_dotted(path)} = {value!r}: the message does not name the key or the file:"
                f" {message}")


def _arrays(schema: dict, path: tuple = ()):
    """``(path, schema)`` of every array setting (the first level: items of items aside)."""
    if schema.get("type") == "object":
        for key, sub in schema.get("properties", {}).items():
            yield from _arrays(sub, (*path, key))
    elif schema.get("type") == "array":
        yield path, schema


ARRAYS = [found for name in ("config", *SECTIONS)
          for found in _arrays(yaml.safe_load((SCHEMAS / f"{name}.schema.yaml").read_text()))]


def _lists(node, path: tuple = ()):
    """The path of every list a config holds (lists inside lists aside)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _lists(value, (*path, key))
    elif isinstance(node, list):
        yield path


@pytest.mark.parametrize("name", ["default", "smoke", "paper"])
def test_the_fuzz_covers_every_list(name):
    """Every list of the shipped configs (defaults filled) is a list setting the fuzz lengthens:
    its own, or, inside the readings study's sections (``readings.neural``,
    ``readings.variants.<reading>``), the ``neural`` setting it stands for."""
    files = [] if name == "default" else [ROOT / f"workflow/config/{name}.yaml"]
    config = load_config(files, ROOT, games=False)
    covered = {path for path, _ in ARRAYS}
    missed = []
    for path in _lists(config):
        setting = path
        if path[:2] == ("readings", "neural"):
            setting = ("neural", *path[2:])
        elif path[:2] == ("readings", "variants"):
            setting = ("neural", *path[3:])
        if setting not in covered:
            missed.append(_dotted(path))
    assert not missed, f"lists no fuzz test lengthens: {missed}"
    assert ("neural", "logits_log", "seeds") in covered  # a list of an optional object


@pytest.mark.parametrize("path, schema", ARRAYS, ids=[_dotted(p) for p, _ in ARRAYS])
def test_every_list_refuses_more_items_than_its_bound_by_name(path, schema):
    """A list one item longer than its schema's maxItems, and one of 10^5 items, are refused
    by a one-line message naming the key (without printing the whole list)."""
    config = _default()
    node = config
    for key in path[:-1]:
        node = node.get(key) or {}  # an object without a default (neural.logits_log) is absent
    items = node.get(path[-1]) or schema["default"] or schema["examples"][0]
    for length in (schema["maxItems"] + 1, 100_000):
        longer = [items[i % len(items)] for i in range(length)]
        message = _refusal(_set(config, path, longer))
        assert message is not None, f"{_dotted(path)} with {length} items was accepted"
        assert str(path[-1]) in message and "fuzz.yaml" in message and "\n" not in message
        assert len(message) < 1000, message[:300]


# The classes the schema alone cannot catch, tried on every key they concern: a game string
# OpenSpiel cannot load or the engine cannot solve, and a limit too small for the config.
BAD_GAMES = {"general-sum": "matrix_pd", "3 players": "kuhn_poker(players=3)",
             "unknown": "no_such_game", "malformed": "leduc_poker(",
             "too large": "goofspiel(num_cards=8)"}
GAME_KEYS = [(section, game) for section in ("tabular", "neural")
             for game in ("kuhn", "leduc", "goofspiel")]


@pytest.mark.parametrize("section, game", GAME_KEYS, ids=[f"{s}.{g}" for s, g in GAME_KEYS])
def test_every_game_string_refuses_games_the_engine_cannot_run_by_name(section, game):
    config = _default()
    for label, value in BAD_GAMES.items():
        bad = copy.deepcopy(config)
        bad[section]["game_strings"][game] = value
        bad[section]["expected_infostates"].pop(game, None)
        message = _refusal(bad)
        assert message is not None, f"{section}.game_strings.{game} = {value!r} was accepted"
        assert f"{section}.game_strings.{game}" in message and "fuzz.yaml" in message, (
            label, message)


LIMITS = ["max_histories", "max_table_rows", "max_job_memory_mb", "max_runtime_minutes"]


@pytest.mark.parametrize("limit", LIMITS)
def test_every_limit_refuses_a_config_beyond_it_with_the_estimate(limit):
    config = _default()
    config["limits"][limit] = 1
    message = _refusal(config)
    assert message is not None and f"limits.{limit}" in message and "fuzz.yaml" in message
    assert any(ch.isdigit() for ch in message.split(f"limits.{limit}")[0]), message
