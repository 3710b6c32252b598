"""Pipeline config: errors, checks helpers and config snapshots.

The schemas (``workflow/schemas/``: the settings and one file per stage)
check types, ranges and unknown keys and fill defaults; each stage's
``check`` adds what a JSON schema cannot express (one value against
another).  :func:`neurd.stages.validate` runs both in the Snakefile before
any job starts, and both name the offending key.

Each rule computes from one top-level section plus the global seed:
:func:`section` builds that dict, the pipeline writes it to
``results/config/<section>.json`` and the command-line steps read it back
(:meth:`neurd.stage.Stage.load`), so a step can be rerun by hand
from the same file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping


class ConfigError(ValueError):
    """A config value that is refused; names the key (``key``: it dotted, where one is)."""

    def __init__(self, message: str, key: str | None = None):
        super().__init__(message)
        self.key = key


def section(config: Mapping, name: str) -> dict:
    """Config section ``name`` with the global ``seed`` added."""
    if name not in config:
        raise ConfigError(f"config has no section {name!r}")
    return {"seed": config["seed"], **_plain(config[name])}


def _plain(value):
    """Nested plain dicts/lists (Snakemake hands over OrderedDicts)."""
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def require(ok: bool, key: str, message: str) -> None:
    """Raise :class:`ConfigError` naming ``key`` unless ``ok``."""
    if not ok:
        raise ConfigError(f"config key '{key}': {message}", key)


def load_snapshot(path: str | os.PathLike) -> dict:
    with open(path) as handle:
        return json.load(handle)
