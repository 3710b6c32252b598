"""The stage registry: every stage of the pipeline, found by one loop.

A stage is a module of :mod:`neurd.pipeline` that defines ``STAGE``
(:class:`neurd.pipeline._stage.Stage`).  Adding one touches only its own
files and one line of the Snakefile:

* ``src/neurd/pipeline/<section>.py``: its tables, its ``neurd`` steps and
  ``STAGE`` (section, cross-field checks, figures);
* ``src/neurd/figures/<figure>.py``: ``INPUTS`` (name -> table path) and ``make()``;
* ``workflow/schemas/<section>.schema.yaml``: its config section's schema;
* ``workflow/rules/<section>.smk``: the rules that make its tables, included
  from the Snakefile.

The config snapshot rule, the figure rules, ``rule all``, the validation
and the provenance all iterate over :data:`STAGES`.
"""

from __future__ import annotations

import importlib
import math
import os
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from neurd.config import ConfigError
from neurd.pipeline._stage import Stage

SETTINGS = ("scale", "seed")  # the top-level keys that are not a stage's section


def _find() -> dict[str, Stage]:
    package = importlib.import_module("neurd.pipeline")
    stages = {}
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        stage = getattr(importlib.import_module(f"neurd.pipeline.{info.name}"), "STAGE", None)
        if isinstance(stage, Stage):
            if stage.section in stages or stage.section in SETTINGS:
                raise RuntimeError(f"two stages claim config section {stage.section!r}")
            stages[stage.section] = stage
    return stages


STAGES: dict[str, Stage] = _find()
SECTIONS = tuple(STAGES)


def check(config: Mapping) -> None:
    """Top-level keys, then each stage's cross-field checks; errors name the key."""
    unknown = [key for key in config if key not in SETTINGS and key not in STAGES]
    if unknown:
        raise ConfigError(f"config: {unknown[0]!r} was unexpected: not a setting "
                          f"{list(SETTINGS)} or a stage section {list(SECTIONS)}")
    for section, stage in STAGES.items():
        if config.get(section):
            stage.check(config[section])


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


def validate(config: dict, schema_dir: str | os.PathLike, files=()) -> None:
    """Validate ``config`` in place (defaults filled) and check it; errors name the key.

    ``schema_dir`` holds ``config.schema.yaml`` (the settings) and one
    ``<section>.schema.yaml`` per stage.  ``files``: the config files the
    config was read from, named in every error.  NaN and infinities are
    refused first (a JSON schema's bounds let NaN through).
    """
    from snakemake.utils import validate as validate_schema
    from snakemake_interface_common.exceptions import WorkflowError

    where = f" (config files: {', '.join(map(str, files))})" if files else ""
    schema_dir = Path(schema_dir)
    try:
        check({key: None for key in config})  # unknown top-level keys first
        bad = non_finite(config)
        if bad:
            raise ConfigError("config: every number must be finite, got " + "; ".join(bad))
        validate_schema(config, str(schema_dir / "config.schema.yaml"))
        for section in SECTIONS:
            validate_schema(config, str(schema_dir / f"{section}.schema.yaml"))
        check(config)
    except ConfigError as error:
        raise ConfigError(f"{error}{where}") from None
    except WorkflowError as error:
        raise ConfigError(f"{error}{where}") from None


@dataclass(frozen=True)
class FigureJob:
    """One figure to draw: its name, module, config section and input tables (name -> path)."""

    name: str
    module: str
    section: str
    inputs: dict[str, str]


def figures(config: Mapping) -> list[FigureJob]:
    """Every figure the config makes, in stage order, with its inputs resolved."""
    jobs = []
    for section, stage in STAGES.items():
        for figure in stage.figures(config[section]):
            module = importlib.import_module(f"neurd.figures.{figure.module}")
            inputs = {name: path.format(**figure.wildcards)
                      for name, path in module.INPUTS.items()}
            jobs.append(FigureJob(figure.name, figure.module, section, inputs))
    names = [job.name for job in jobs]
    if len(set(names)) != len(names):
        raise ConfigError(f"two figures share a name: {names}")
    return jobs
