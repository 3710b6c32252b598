"""The learning settings, each declared once: in the config section ``neural``'s schema
(``workflow/schemas/neural.schema.yaml``), where a key's name, default, type and meaning
are, and ``x-spec`` names the field of :class:`neurd.neural.train.Spec` it is.

Everything else is derived from there: the fields of ``Spec`` (their order, types and
defaults: :func:`spec_fields`), the mapping of config keys to fields (:func:`spec_keys`,
read by the config checks of a plan and by the pipeline's jobs: :func:`spec_arguments`),
and the settings and defaults :func:`neurd.comparison.compare` takes
(:func:`learning_defaults`).  A new learning setting is a schema entry with ``x-spec``, plus
the code that uses it.  No JAX here (the config checks import this).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Mapping

from neurd import schema
from neurd.config import ConfigError
from neurd.neural import algorithms

SPEC = "x-spec"  # the schema's word for the Spec field a key is
# JSON schema type -> the Python type of the Spec field (an array: a tuple, hashable, as the
# compiled program's static spec must be)
TYPES = {"array": tuple, "integer": int, "number": float, "string": str, "boolean": bool,
         "object": tuple}
# Keys of the section ``neural`` that compare() takes as settings but that are not learning
# settings (the tables'); the critic is compare()'s own argument, not a setting
TABLE_SETTINGS = ("seeds_per_batch", "final_checkpoints", "bootstrap")


def _properties() -> dict:
    return schema.schema("neural")["properties"]["neural"]["properties"]


@functools.cache
def spec_keys() -> dict[str, str]:
    """Spec field -> the ``neural`` config key it is, in the schema's order."""
    return {prop[SPEC]: key for key, prop in _properties().items() if SPEC in prop}


def default(key: str):
    """The schema's default of the ``neural`` key ``key`` (a copy; an object's with the
    defaults of its properties filled in; a key written only when given, its ``x-default``:
    :func:`optional`)."""
    def filled(node):
        if node.get("type") == "object" and "properties" in node:
            return {**node["default"], **{k: filled(v) for k, v in node["properties"].items()}}
        return node["default"] if "default" in node else node["x-default"]
    return copy.deepcopy(filled(_properties()[key]))


def optional() -> tuple[str, ...]:
    """The ``neural`` keys a config holds only where given (``x-default`` in the schema, no
    ``default``): a section without one is the same config, of the same hash, as before the
    key was added."""
    return tuple(key for key, prop in _properties().items()
                 if "x-default" in prop and "default" not in prop)


def value(key: str, given):
    """``given``, a config's value of ``key``, as its Spec field holds it (an object: its
    items sorted, each value's too where it is an object, as tuples: hashable)."""
    kind = _properties()[key]["type"]
    if kind == "object":
        return tuple(sorted((k, tuple(sorted(v.items())) if isinstance(v, Mapping) else v)
                            for k, v in given.items()))
    if kind == "array":
        item = _properties()[key].get("items", {}).get("type")
        return tuple(TYPES[item](x) if item in TYPES else x for x in given)
    return TYPES[kind](given)


def config_value(key: str, held):
    """The inverse of :func:`value`: a Spec field's value as the config's ``key`` holds it."""
    kind = _properties()[key]["type"]
    if kind == "object":
        return {k: dict(v) if isinstance(v, tuple) else v for k, v in held}
    if kind == "array":
        return list(held)
    return held


def check_options(cfg: Mapping) -> None:
    """Refuse (a :class:`~neurd.config.ConfigError` naming the key) an option given to an
    algorithm that does not take it: an entry of ``algorithm_options`` for an algorithm the
    run does not name or of an option its algorithm does not declare
    (:mod:`neurd.neural.algorithms`), or NeuRD's ``beta`` or ``neurd_logits`` set off its
    default in a run that names no algorithm taking it."""
    names = list(cfg["algorithms"])
    for name, options in dict(cfg.get("algorithm_options") or {}).items():
        key = f"neural.algorithm_options.{name}"
        if name not in names:
            raise ConfigError(f"config key '{key}': options of {name!r}, which "
                              f"neural.algorithms {names} does not name", key)
        declared = algorithms.get(name).options
        for option in options:
            if option in algorithms.OPTION_KEYS:
                raise ConfigError(f"config key '{key}.{option}': {name}'s {option} is the key "
                                  f"neural.{algorithms.OPTION_KEYS[option]}, set there",
                                  f"{key}.{option}")
            if option not in declared:
                raise ConfigError(f"config key '{key}.{option}': {option!r} is not an option "
                                  f"of {name!r} (its options: {list(declared)})",
                                  f"{key}.{option}")
    for option, key in algorithms.OPTION_KEYS.items():
        takers = [n for n in names if option in algorithms.get(n).options]
        if key in cfg and cfg[key] != default(key) and not takers:
            raise ConfigError(f"config key 'neural.{key}': {cfg[key]!r} is an option of "
                              f"{', '.join(algorithms.OPTION_OWNERS[option])} ({option}), "
                              f"which neural.algorithms {names} does not name",
                              f"neural.{key}")


def spec_fields() -> list[tuple[str, type, object]]:
    """``(field, type, default)`` of every setting, in the schema's order: the fields of
    :class:`neurd.neural.train.Spec` before its run-time knobs."""
    return [(field, TYPES[_properties()[key]["type"]], value(key, default(key)))
            for field, key in spec_keys().items()]


def spec_arguments(cfg: Mapping, critic: str) -> dict:
    """The Spec's keyword arguments of a job of ``critic`` (``learned`` or ``exact``: a
    job's, which a config's ``critic`` key names only for its main runs) from a config's
    ``neural`` section; a key the section lacks (a snapshot from before the key: it ran as
    the key's default) at its default."""
    return {**{field: value(key, cfg[key] if key in cfg else default(key))
               for field, key in spec_keys().items() if key != "critic"}, "critic": critic}


def learning_defaults() -> dict:
    """The settings :func:`neurd.comparison.compare` takes, at the schema's defaults: every
    learning setting but the critic (its own argument), and the tables' keys."""
    keys = [key for key in spec_keys().values() if key != "critic"] + list(TABLE_SETTINGS)
    return {key: default(key) for key in keys}
