"""The stage registry: every stage of the pipeline, found by one loop.

A stage is a module of :mod:`neurd.pipeline` that defines ``STAGE``
(:class:`neurd.stage.Stage`).  Adding one touches only its own
files and one line of the Snakefile:

* ``src/neurd/pipeline/<section>.py``: its tables, its ``neurd`` steps and
  ``STAGE`` (section, cross-field checks, figures);
* ``src/neurd/figures/<figure>.py``: ``INPUTS`` (name -> table path in the results
  folder) and ``make()``;
* ``workflow/schemas/<section>.schema.yaml``: its config section's schema;
* ``workflow/rules/<section>.smk``: the rules that make its tables, included
  from the Snakefile.

The config snapshot rule, the figure rules, ``rule all``, the validation
and the provenance all iterate over :data:`STAGES`.
"""

from __future__ import annotations

import functools
import importlib
import os
import pkgutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from neurd import config as config_sections
from neurd import configfile
from neurd.config import ConfigError
from neurd.schema import message as schema_message
from neurd.schema import non_finite
from neurd.stage import Stage

SETTINGS = ("scale", "seed", "limits")  # the top-level keys that are not a stage's section

# Where a scale's results go: the default scale in results/ itself (the paths
# the README documents), every other scale in results/<scale>/, so no two
# scales share a file.  A scale cannot take the name of an entry of the
# default's layout (the stage sections and these).
DEFAULT_SCALE = "default"
RESULTS = "results"
RESULT_ENTRIES = ("audit", "benchmarks", "config", "figures", "games", "logs",
                  "provenance.json", "provenance.html", "report.html", "README.md")


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
    scale = config.get("scale")
    if isinstance(scale, str) and scale in (*SECTIONS, *RESULT_ENTRIES):
        raise ConfigError(f"scale: {scale!r} is taken by the default scale's results "
                          f"(results/{scale}); name the scale otherwise")
    for section, stage in STAGES.items():
        if config.get(section):
            stage.check(config[section])


def _schema_message(error) -> str:
    """One line for a schema violation: the key dotted (``'neural.entropies[2]'``) and what
    is wrong (:func:`neurd.schema.message`)."""
    import jsonschema

    cause = error.__context__  # Snakemake raises its error while handling jsonschema's
    if not isinstance(cause, jsonschema.ValidationError):
        return " ".join(str(error).split())
    return schema_message(cause)


def snapshot(config: Mapping, name: str) -> dict:
    """What the steps of section ``name`` compute from: the section with the global seed,
    less the stage's settings that change no number (:attr:`Stage.settings`)."""
    return {key: value for key, value in config_sections.section(config, name).items()
            if key not in STAGES[name].settings}


def results_root(config: Mapping) -> str:
    """The folder a config's results go to: ``results`` or ``results/<scale>``."""
    scale = config.get("scale", DEFAULT_SCALE)
    return RESULTS if scale == DEFAULT_SCALE else f"{RESULTS}/{scale}"


def validate(config: dict, schema_dir: str | os.PathLike, files=(), games: bool = True
             ) -> None:
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
        schemas = {name: str(schema_dir / f"{name}.schema.yaml") for name in ("config", *SECTIONS)}
        for path in schemas.values():
            merge_map_defaults(config, read_schema(path))
        for path in schemas.values():
            validate_schema(config, path)
        check(config)
        if games:  # else the values only, not the games they name (load_config(games=False))
            inspect(config)
        for stage in STAGES.values():
            if stage.derive is not None and config.get(stage.section):
                for label, (name, section) in stage.derive(config).items():
                    _validate_derived(label, name, section, schemas[name],
                                      config["limits"] if games else None, validate_schema)
    except ConfigError as error:
        raise ConfigError(f"{error}{where}") from None
    except WorkflowError as error:
        raise ConfigError(f"{_schema_message(error)}{where}") from None


def _validate_derived(label, name, section, schema_path, limits, validate_schema) -> None:
    """A derived ``name`` section, validated as the config's own; errors start with ``label``."""
    from snakemake_interface_common.exceptions import WorkflowError

    derived = {name: section}
    try:
        merge_map_defaults(derived, read_schema(schema_path))
        validate_schema(derived, schema_path)
        STAGES[name].check(derived[name])
        if STAGES[name].inspect is not None and limits is not None:
            STAGES[name].inspect(derived[name], limits)
    except ConfigError as error:
        raise ConfigError(f"{label}: {error}") from None
    except WorkflowError as error:
        raise ConfigError(f"{label}: {_schema_message(error)}") from None


def inspect(config: Mapping) -> None:
    """Each stage's ``inspect``: its games and what its run will allocate, write and ask a
    scheduler for, against the config's ``limits`` (:mod:`neurd.limits`)."""
    for section, stage in STAGES.items():
        if config.get(section) and stage.inspect is not None:
            stage.inspect(config[section], config["limits"])


@functools.cache
def read_schema(path: str) -> dict:
    """A schema file, read once per process (only read, never changed, by its callers)."""
    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def merge_map_defaults(node, schema: Mapping) -> None:
    """Merge each given mapping setting (``neural.game_strings``) over its schema default.

    A JSON schema's default fills a key only when it is absent: a config that
    sets one entry of ``game_strings`` would drop the others (and the error
    would then blame a key the user never wrote).  A mapping whose schema has
    ``additionalProperties`` (names -> values) and a default is merged over
    that default instead, entry by entry, as Snakemake merges config files.
    ``x-default-entries-follow: <key>`` keeps a default entry only where the
    sibling mapping ``<key>`` has its default value for that name: the default
    ``expected_infostates`` of a game are those of its default game string.
    """
    if not isinstance(node, dict):
        return
    properties = schema.get("properties", {})
    for key, sub in properties.items():
        value = node.get(key)
        follow = sub.get("x-default-entries-follow")
        if value is None and follow is not None:
            value = node[key] = {}
        if not isinstance(value, dict):
            continue
        default = sub.get("default")
        if (isinstance(sub.get("additionalProperties"), dict) and isinstance(default, dict)
                and sub.get("x-merge-defaults", True)):
            if follow is not None:
                given = node.get(follow) if isinstance(node.get(follow), dict) else {}
                base = properties[follow].get("default", {})
                default = {name: v for name, v in default.items()
                           if given.get(name, base.get(name)) == base.get(name)}
            node[key] = {**default, **value}
        else:
            merge_map_defaults(value, sub)


DEFAULT_CONFIG = "workflow/config/default.yaml"


def read_config_file(path: str | os.PathLike) -> dict:
    """One config file, read without running anything in it; errors name it.

    Snakemake reads ``--configfile`` before the Snakefile runs, and its own
    messages for a missing or malformed file do not always name the file;
    ``neurd check-config`` (which ``make`` runs first) reads it here instead,
    and refuses what Snakemake would take silently or execute: duplicate keys,
    YTE templates, oversized files and alias bombs (:mod:`neurd.configfile`).
    """
    return configfile.read_config_file(path)


def load_config(files=(), workflow_dir: str | os.PathLike = ".", games: bool = True) -> dict:
    """The config the Snakefile would see: the default config, each file merged over it
    as ``--configfile`` does, validated (:func:`validate`); errors name key and file.
    ``games=False`` leaves out the checks that load the games (:func:`inspect`)."""
    from snakemake.utils import update_config

    workflow_dir = Path(workflow_dir)
    default = workflow_dir / DEFAULT_CONFIG
    if not default.is_file():
        raise ConfigError(f"{default} not found: run from the workflow's folder (the one "
                          "holding the Snakefile) or name it")
    config = read_config_file(default)
    for path in files:
        update_config(config, read_config_file(path))
    validate(config, workflow_dir / "workflow/schemas", [DEFAULT_CONFIG, *map(str, files)],
             games=games)
    return config


@dataclass(frozen=True)
class FigureJob:
    """One figure to draw: its name, module, config section, input tables (name -> path) and
    the config snapshot it reads."""

    name: str
    module: str
    section: str
    inputs: dict[str, str]
    config: str


def figures(config: Mapping) -> list[FigureJob]:
    """Every figure the config makes, in stage order, with its inputs resolved.

    A module's ``INPUTS`` are relative to the results folder (or to the figure's
    :attr:`~neurd.stage.Figure.folder` in it); the jobs' inputs are
    under :func:`results_root` of ``config``.
    """
    root = results_root(config)
    jobs = []
    for section, stage in STAGES.items():
        for figure in stage.figures(config[section]):
            module = importlib.import_module(f"neurd.figures.{figure.module}")
            base = f"{root}/{figure.folder}".rstrip("/")
            inputs = {name: f"{base}/{path.format(**figure.wildcards)}"
                      for name, path in module.INPUTS.items()}
            snapshot_path = f"{root}/{figure.config or f'config/{section}.json'}"
            jobs.append(FigureJob(figure.name, figure.module, section, inputs, snapshot_path))
    names = [job.name for job in jobs]
    if len(set(names)) != len(names):
        raise ConfigError(f"two figures share a name: {names}")
    return jobs
