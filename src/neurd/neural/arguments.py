"""A job's plan checked as the config is: :func:`check_plan`, before anything compiles.

:func:`neurd.neural.experiment.run` takes a :class:`~neurd.neural.experiment.Plan` (its
:class:`~neurd.neural.train.Spec`) from the pipeline, from :func:`neurd.comparison.compare`
or from a caller of its own.  Each field is a key of the config section ``neural``
(:data:`SPEC_KEYS`, :data:`PLAN_KEYS`); the plan is written back as that section and
checked by the section's schema (:func:`neurd.schema.check_section`), so a value a config
file may not hold is refused with the config's message, naming the field, before JAX
compiles a thing (a negative width would otherwise fail sixteen frames deep in flax, an
unknown optimiser as a ``KeyError``).
"""

from __future__ import annotations

from neurd import schema
from neurd.config import ConfigError
from neurd.neural import settings, variants
from neurd.neural.algorithms import check_algorithms

# Spec field -> the neural config key it is (declared once, in the schema: x-spec)
SPEC_KEYS = settings.spec_keys()
# Plan field -> the neural config key it is (``phase_iterations``: of its game)
PLAN_KEYS = {"game": "games", "entropies": "entropies", "phase_iterations": "phase_iterations",
             "phases": "phases", "geometric": "checkpoints", "linear": "checkpoints",
             "seeds_per_batch": "seeds_per_batch", "logits_seeds": "logits_log",
             "logits_entropies": "logits_log"}


def _field(key: str | None, plan) -> str:
    """The plan's field a refused config key is."""
    part = (key or "").removeprefix("neural.").split(".")[0].split("[")[0]
    if part == "seed":
        return "plan.seed"
    if part == "checkpoints":
        sub = (key or "").removeprefix("neural.checkpoints.").split("[")[0]
        return f"plan.{sub if sub in ('geometric', 'linear') else 'linear'}"
    if part == "logits_log":
        return "plan.logits_entropies" if ".entropies" in (key or "") else "plan.logits_seeds"
    for fields, prefix in ((SPEC_KEYS, "plan.spec."), (PLAN_KEYS, "plan.")):
        for name, config_key in fields.items():
            if config_key == part:
                return prefix + name
    return "plan"


def _config_value(key: str, held):
    """A Spec field as its config key holds it; a value of another shape as it is (for the
    schema to refuse, naming the field)."""
    try:
        return settings.config_value(key, held)
    except (TypeError, ValueError, AttributeError):
        return held


def check_run_time(spec) -> None:
    """Refuse the spec's run-time knobs (not config keys: how the cycle's program is laid out,
    :mod:`neurd.neural.variants`) unless they are a variant's, in one line naming the field."""
    from neurd.neural import layouts  # puts off JAX

    names = layouts.names()
    if not (isinstance(spec.layout, str) and spec.layout in names):
        raise ConfigError(f"neural run: plan.spec.layout: {spec.layout!r} is not "
                          f"one of {list(names)}")
    if type(spec.unroll) is not int or spec.unroll not in variants.UNROLLS:
        raise ConfigError(f"neural run: plan.spec.unroll: {spec.unroll!r} is not one of "
                          f"{list(variants.UNROLLS)}")


def check_plan(plan) -> None:
    """Refuse a plan whose fields a config's ``neural`` section could not hold, in one line
    naming the field and its config key (a :class:`~neurd.config.ConfigError`); its run-time
    knobs are :func:`check_run_time`'s."""
    spec = plan.spec
    check_run_time(spec)
    section = {key: _config_value(key, getattr(spec, name)) for name, key in SPEC_KEYS.items()}
    game = plan.game if isinstance(plan.game, str) else "game"
    section.update(games=[plan.game], entropies=plan.entropies,
                   phase_iterations={game: plan.phase_iterations}, phases=plan.phases,
                   checkpoints={"geometric": plan.geometric, "linear": plan.linear},
                   seeds_per_batch=plan.seeds_per_batch)
    if plan.logits_seeds or plan.logits_entropies:
        section["logits_log"] = {"seeds": plan.logits_seeds, "entropies": plan.logits_entropies}
    try:
        schema.check_section("neural", {"games": [plan.game]})  # the name first: keys follow
        schema.check_section("config", {"seed": plan.seed})
        schema.check_section("neural", section)
        check_algorithms(spec.algorithms, "neural.algorithms")
        settings.check_options(section)
        seeds = schema.plain(plan.run_seeds)
        if not (isinstance(seeds, list) and seeds and all(
                type(s) is int and 0 <= s <= 9999 for s in seeds)
                and len(set(seeds)) == len(seeds)):
            raise ConfigError(f"plan.run_seeds: {plan.run_seeds!r} are not distinct run seeds "
                              "in [0, 9999] (below neural.seeds' maximum)", "neural.seeds")
    except ConfigError as error:
        field = "plan.run_seeds" if error.key == "neural.seeds" else _field(error.key, plan)
        message = str(error).removeprefix("plan.run_seeds: ")
        raise ConfigError(f"neural run: {field}: {message}", error.key) from None
