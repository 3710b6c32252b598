"""The config's schemas outside the Snakefile: found, read, and their errors worded once.

The schemas in ``workflow/schemas/`` are the one set of rules for every value the
project takes: the Snakefile and ``neurd check-config`` validate a config with them
(:func:`neurd.stages.validate`), and the Python API (:func:`neurd.comparison.compare`,
:func:`neurd.neural.experiment.run`) checks its arguments against the same section
schema with :func:`check_section`, so a value a config file may not hold is refused
from Python with the same words, before any compilation.

Every message names a key the one way the project writes keys: ``config key
'neural.game_strings.kuhn': ...``, dotted, with ``[i]`` for a list's item
(:func:`dotted`).
"""

from __future__ import annotations

import functools
import math
import reprlib
import sys
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import yaml

from neurd.config import ConfigError

SCHEMA_FOLDERS = (Path(__file__).resolve().parents[2] / "workflow" / "schemas",
                  Path(sys.prefix) / "share/neurd/schemas")
"""Where the schemas are: the source tree's ``workflow/schemas`` (an editable install, a
checkout), else where ``pip install .`` puts them (``[tool.setuptools.data-files]``)."""


def dotted(parts) -> str:
    """A key path as the project writes it: ``neural.entropies[2]``, ``matrix.horizons``."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def non_finite(value, path: str = "") -> list[str]:
    """The dotted keys (``rps.portraits.rtol``, ``matrix.horizons[2]``) holding NaN or +-inf."""
    if isinstance(value, Mapping):
        return [bad for key, item in value.items()
                for bad in non_finite(item, f"{path}.{key}" if path else str(key))]
    if isinstance(value, (list, tuple)):
        return [bad for i, item in enumerate(value) for bad in non_finite(item, f"{path}[{i}]")]
    if isinstance(value, float) and not math.isfinite(value):
        return [f"{path} = {value}"]
    return []


def message(error) -> str:
    """One line for a ``jsonschema.ValidationError``: ``config key '<dotted key>': <what>``,
    the offending value abridged (a 10^5-item list is not printed)."""
    what = " ".join(error.message.split())
    if len(what) > 300:
        abridged = reprlib.Repr()
        abridged.maxlist = abridged.maxdict = 4
        abridged.maxstring = abridged.maxother = 40
        what = (f"{abridged.repr(error.instance)} fails {error.validator} "
                f"{abridged.repr(error.validator_value)}")
    where = dotted(error.absolute_path)
    return f"config key {repr(where) if where else '(top level)'}: {what}"


@functools.cache
def schema(name: str) -> dict:
    """The schema of config section ``name`` (``config``: the settings), read once."""
    for folder in SCHEMA_FOLDERS:
        path = folder / f"{name}.schema.yaml"
        if path.is_file():
            with open(path, encoding="utf-8") as handle:
                return yaml.safe_load(handle)
    raise ConfigError(f"the schema of config section {name!r} ({name}.schema.yaml) is in none "
                      f"of {[str(f) for f in SCHEMA_FOLDERS]}: reinstall neurd")


def plain(value):
    """``value`` as the data a config file holds: NumPy scalars and arrays as Python numbers
    and lists, tuples as lists (what a schema's types check), mappings as dicts."""
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def integers(value, node: Mapping):
    """``value`` with each whole float where ``node`` (a schema) says integer made an int, as
    a JSON schema takes ``100.0`` for an integer and a config's readers ``int()`` it."""
    if node.get("type") == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        properties, other = node.get("properties", {}), node.get("additionalProperties")
        return {k: integers(v, properties.get(k, other if isinstance(other, dict) else {}))
                for k, v in value.items()}
    if isinstance(value, list) and isinstance(node.get("items"), dict):
        return [integers(v, node["items"]) for v in value]
    return value


def check_section(name: str, values: Mapping) -> None:
    """Refuse ``values`` (the config section ``name``; ``config``: the settings) unless its
    schema takes them: the first error as :func:`message` words it, NaN and infinities
    first (a schema's bounds let NaN through).  A :class:`~neurd.config.ConfigError` whose
    ``key`` is the dotted key."""
    import jsonschema  # puts off what config validation alone needs

    data = plain(values) if name == "config" else {name: plain(values)}
    bad = non_finite(data)
    if bad:
        raise ConfigError("config: every number must be finite, got " + "; ".join(bad),
                          bad[0].split(" = ")[0])
    rules = schema(name)
    validator = jsonschema.validators.validator_for(rules)(rules)
    error = jsonschema.exceptions.best_match(validator.iter_errors(data))
    if error is not None:
        raise ConfigError(message(error), dotted(error.absolute_path))
