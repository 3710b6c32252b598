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

SPEC = "x-spec"  # the schema's word for the Spec field a key is
# JSON schema type -> the Python type of the Spec field (an array: a tuple, hashable, as the
# compiled program's static spec must be)
TYPES = {"array": tuple, "integer": int, "number": float, "string": str, "boolean": bool}
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
    defaults of its properties filled in)."""
    def filled(node):
        if node.get("type") == "object" and "properties" in node:
            return {**node["default"], **{k: filled(v) for k, v in node["properties"].items()}}
        return node["default"]
    return copy.deepcopy(filled(_properties()[key]))


def value(key: str, given):
    """``given``, a config's value of ``key``, as its Spec field holds it."""
    kind = _properties()[key]["type"]
    if kind == "array":
        item = _properties()[key].get("items", {}).get("type")
        return tuple(TYPES[item](x) if item in TYPES else x for x in given)
    return TYPES[kind](given)


def spec_fields() -> list[tuple[str, type, object]]:
    """``(field, type, default)`` of every setting, in the schema's order: the fields of
    :class:`neurd.neural.train.Spec` before its run-time knobs."""
    return [(field, TYPES[_properties()[key]["type"]], value(key, default(key)))
            for field, key in spec_keys().items()]


def spec_arguments(cfg: Mapping, critic: str) -> dict:
    """The Spec's keyword arguments of a job of ``critic`` (``learned`` or ``exact``: a
    job's, which a config's ``critic`` key names only for its main runs) from a config's
    ``neural`` section."""
    return {**{field: value(key, cfg[key]) for field, key in spec_keys().items()
               if key != "critic"}, "critic": critic}


def learning_defaults() -> dict:
    """The settings :func:`neurd.comparison.compare` takes, at the schema's defaults: every
    learning setting but the critic (its own argument), and the tables' keys."""
    keys = [key for key in spec_keys().values() if key != "critic"] + list(TABLE_SETTINGS)
    return {key: default(key) for key in keys}
