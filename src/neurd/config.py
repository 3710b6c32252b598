"""Pipeline config: sections, cross-field checks, and config snapshots.

The schema (``workflow/schemas/config.schema.yaml``) checks types, ranges and
unknown keys and fills defaults; :func:`check` adds the checks a JSON schema
cannot express (one value against another).  Both run in the Snakefile
before any job starts, and both name the offending key.

Each rule computes from one top-level section plus the global seed:
:func:`section` builds that dict, the pipeline writes it to
``results/config/<section>.json`` and the command-line steps read it back with
:func:`load_snapshot`, so a step can be rerun by hand from the same file.
"""

from __future__ import annotations

import json
import os
from typing import Mapping

SECTIONS = ("matrix", "rps", "tabular")


class ConfigError(ValueError):
    """A config value that is well-typed but inconsistent; names the key."""


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


def _require(ok: bool, key: str, message: str) -> None:
    if not ok:
        raise ConfigError(f"config key '{key}': {message}")


def check(config: Mapping) -> None:
    """Cross-field checks; raises :class:`ConfigError` naming the key."""
    if config.get("matrix"):
        _check_matrix(config["matrix"])
    if config.get("rps"):
        _check_rps(config["rps"])
    if config.get("tabular"):
        from neurd.pipeline.tabular import check_section

        check_section(config["tabular"])


def _check_matrix(matrix: Mapping) -> None:
    grid = matrix["step_sizes"]
    _require(grid["max"] > grid["min"], "matrix.step_sizes.max",
             f"must exceed matrix.step_sizes.min ({grid['min']}), got {grid['max']}")
    horizons = matrix["horizons"]
    _require(len(set(horizons)) == len(horizons), "matrix.horizons",
             f"must not repeat a horizon, got {horizons}")
    _require(matrix["fit_min_horizon"] < max(horizons), "matrix.fit_min_horizon",
             f"must be below the longest horizon ({max(horizons)}) so a slope can be fitted")
    _require(sum(h >= matrix["fit_min_horizon"] for h in horizons) >= 2,
             "matrix.fit_min_horizon",
             "leaves fewer than two horizons to fit a growth rate on")
    fig2 = matrix["figure2"]
    _require(fig2["horizon"] in horizons, "matrix.figure2.horizon",
             f"must be one of matrix.horizons {horizons}: the audit checks the step size "
             "the paper tuned at that horizon")
    rewards = matrix["rewards"]
    _require(rewards["win"] > rewards["loss"], "matrix.rewards.win",
             f"must exceed matrix.rewards.loss, got win={rewards['win']} loss={rewards['loss']}")


def _check_rps(rps: Mapping) -> None:
    portraits = rps["portraits"]
    _require(portraits["average_time"] > portraits["flow_time"], "rps.portraits.average_time",
             f"must exceed rps.portraits.flow_time ({portraits['flow_time']}), "
             f"got {portraits['average_time']}")
    for i, start in enumerate(portraits["starts"]):
        _require(abs(sum(start) - 1.0) < 1e-9, f"rps.portraits.starts[{i}]",
                 f"must sum to 1 (a policy over R, P, S), got {start}")


def load_snapshot(path: str | os.PathLike) -> dict:
    with open(path) as handle:
        return json.load(handle)
