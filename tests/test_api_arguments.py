"""The Python API checks its arguments by the config's schema before anything compiles.

Every field of :class:`neurd.neural.experiment.Plan` and its :class:`~neurd.neural.train.Spec`
with a bad value of each kind is refused by :func:`neurd.neural.experiment.run` in one line
naming the field and its config key, in the config's words, and nothing is compiled or run;
so is every keyword of :mod:`neurd.engine` that a config key governs (``max_histories``,
``iterations``, ``step_size``, ``step_sizes``, the sweep's last checkpoint, ``seed``).
(:func:`neurd.comparison.compare`'s walk is in ``test_neural_compare.py``.)"""

import dataclasses
import math

import numpy as np
import pytest

from neurd import engine, games
from neurd.config import ConfigError
from neurd.neural import arguments, experiment, train

NAN = math.nan
SPEC_BAD = {
    "algorithms": [("neurd", "adam"), (), ("neurd", "neurd"), (1,)],
    "hidden": [(-3,), (0,), (), (65537,), (1.5,), (True,), (NAN,)],
    "critic_batch": [0, -1, 10**7, 4.5, "4", True, NAN],
    "policy_batch": [0, 10**7, 2.5, "256", True, NAN],
    "critic_updates": [0, 1001, "4", True, NAN],
    "policy_learning_rate": [-0.1, 0.0, 101.0, "0.1", True, NAN, math.inf],
    "critic_learning_rate": [-0.1, 0.0, 101.0, "0.1", True, NAN, -math.inf],
    "optimizer": ["rmsprop", "SGD", 1],
    "beta": [0.0, -2.0, 1001.0, "2", True, NAN],
    "algorithm_options": ["x", (("spg", (("x", 1.0),)),), (("rpg", ()),),
                          (("neurd", (("beta", 3.0),)),), ((1, ()),)],
    "critic": ["oracle", 1],
    "precision": ["float64", "highest", 32],
    "neurd_logits": ["centered", "RAW", 0],
    "loss_normalisation": ["mean", None],
    "networks": ["triple", 2],
}
# the spec's run-time knobs (neurd.neural.variants), not config keys
RUN_TIME_BAD = {"layout": ["fast", "", 1, None], "unroll": [0, 2, 3, "4", 4.0, True]}
PLAN_BAD = {
    "game": ["Kuhn", "", 1, "k" * 33],
    "entropies": [(), (-0.1,), (101.0,), (NAN,), (0.1, 0.1), ("0.1",), 0.1],
    "run_seeds": [(), (-1,), (10**4,), (0, 0), (1.5,), ("0",), (True,)],
    "seed": [-1, 2**31, "0", NAN, True],
    "phase_iterations": [0, 2, 10**9, 8.5, "8", True, NAN],
    "phases": [0, 101, "1", True, NAN],
    "geometric": [-1, 10**5, "1", True, NAN],
    "linear": [0, 10**5, "1", True, NAN],
    "seeds_per_batch": [0, 10**5, "2", True, NAN],
    "logits_seeds": [(-1,), (10**4,), (0, 0), ("0",)],
    "logits_entropies": [(-0.1,), (NAN,), (0.0, 0.0), ("0",)],
}
BASE = experiment.Plan(game="kuhn", spec=train.Spec(), entropies=(0.0,), run_seeds=(0, 1), seed=0,
                       phase_iterations=8, phases=1, geometric=1, linear=1, seeds_per_batch=2)


def test_every_field_is_walked():
    assert set(SPEC_BAD) | set(RUN_TIME_BAD) == {f.name for f in dataclasses.fields(train.Spec)}
    assert set(PLAN_BAD) | {"spec", "batch_origin"} == {
        f.name for f in dataclasses.fields(experiment.Plan)}


@pytest.fixture(scope="module")
def kuhn():
    return games.compile_game("kuhn_poker")


def _refused(kuhn, monkeypatch, plan, field):
    def compiled(*_, **__):
        raise AssertionError("compiled before the plan was checked")

    monkeypatch.setattr(experiment.train, "neural_game", compiled)
    with pytest.raises(ConfigError) as info:
        experiment.run(kuhn, plan)
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"neural run: plan.{field}: "), message
    return message


@pytest.mark.parametrize("name", sorted(SPEC_BAD))
def test_a_bad_spec_field_is_refused_before_compiling(kuhn, monkeypatch, name):
    for value in SPEC_BAD[name]:
        plan = dataclasses.replace(BASE, spec=dataclasses.replace(train.Spec(), **{name: value}))
        message = _refused(kuhn, monkeypatch, plan, f"spec.{name}")
        assert f"neural.{arguments.SPEC_KEYS[name]}" in message


@pytest.mark.parametrize("name", sorted(RUN_TIME_BAD))
def test_a_bad_run_time_knob_is_refused_before_compiling(kuhn, monkeypatch, name):
    """Refused in one line naming the field: where the spec is made (an unknown layout), or
    by the run."""
    for value in RUN_TIME_BAD[name]:
        try:
            spec = dataclasses.replace(train.Spec(), **{name: value})
        except ValueError as error:
            assert "\n" not in str(error) and "variant" in str(error), error
            continue
        _refused(kuhn, monkeypatch, dataclasses.replace(BASE, spec=spec), f"spec.{name}")


@pytest.mark.parametrize("name", sorted(PLAN_BAD))
def test_a_bad_plan_field_is_refused_before_compiling(kuhn, monkeypatch, name):
    for value in PLAN_BAD[name]:
        extra = {"logits_entropies": (0.0,)} if name == "logits_seeds" else (
            {"logits_seeds": (0,)} if name == "logits_entropies" else {})
        _refused(kuhn, monkeypatch, dataclasses.replace(BASE, **{name: value}, **extra), name)


def test_the_refusals_are_the_config_files_words(kuhn, monkeypatch):
    spec = dataclasses.replace(train.Spec(), hidden=(-3,))
    message = _refused(kuhn, monkeypatch, dataclasses.replace(BASE, spec=spec), "spec.hidden")
    assert message.endswith("config key 'neural.hidden_sizes[0]': -3 is less than the minimum "
                            "of 1")


def test_a_good_plan_runs(kuhn):
    results = experiment.run(kuhn, BASE)
    assert results["nash_conv"].shape[1] == len(BASE.configurations)


# neurd.engine: keyword -> (call with the bad value, the config key it is checked as)
ENGINE_BAD = {
    "compile_game.max_histories": (lambda g, v: engine.compile_game("kuhn_poker", max_histories=v),
                                   "limits.max_histories", [0, -1, 10**10, "1000", 1.5, NAN,
                                                            True, None]),
    "cfr.iterations": (lambda g, v: engine.cfr(g, "neurd", 1.0, iterations=v),
                       "tabular.iterations", [0, 1, 10**8, "10", 1.5, NAN, True, None]),
    "cfr.step_size": (lambda g, v: engine.cfr(g, "neurd", v, iterations=2),
                      "tabular.step_sizes", [0.0, -1.0, 1001.0, "1", NAN, math.inf, True, None,
                                             np.full((12, 1), -1.0), np.full((12, 1), NAN)]),
    "cfr_regret.iterations": (lambda g, v: engine.cfr_regret(g, "spg", 1.0, iterations=v),
                              "tabular.iterations", [0, 10**8, "10", NAN, True]),
    "cfr_regret.step_size": (lambda g, v: engine.cfr_regret(g, "spg", v, iterations=2),
                             "tabular.step_sizes", [0.0, 1001.0, "1", NAN, True]),
    "cfr_sweep.step_sizes": (lambda g, v: engine.cfr_sweep(g, ["neurd"], v, [1, 2]),
                             "tabular.step_sizes", [[], [0.0], [-1.0], [1001.0], ["1"], [NAN],
                                                    [1.0, 1.0], [True], list(range(1, 102))]),
    "cfr_sweep.checkpoints": (lambda g, v: engine.cfr_sweep(g, ["neurd"], [1.0], v),
                              "tabular.iterations", [[1], [1, 10**8]]),
    "random_policies.seed": (lambda g, v: engine.random_policies(g, 2, v), "seed",
                             [-1, 2**31, "0", 1.5, NAN, True]),
}


@pytest.mark.parametrize("keyword", sorted(ENGINE_BAD))
def test_an_engine_keyword_is_checked_as_its_config_key_before_compiling(kuhn, monkeypatch,
                                                                         keyword):
    from neurd.tabular import cfr

    def compiled(*_, **__):
        raise AssertionError("ran before its arguments were checked")

    for name in ("run", "run_with_regret", "cfr_sweep"):
        monkeypatch.setattr(cfr, name, compiled)
    monkeypatch.setattr(engine, "_compile_game", compiled)
    call, key, values = ENGINE_BAD[keyword]
    function, argument = keyword.split(".")
    for value in values:
        with pytest.raises(ConfigError) as info:
            call(kuhn, value)
        message = str(info.value)
        assert "\n" not in message and message.startswith(
            f"engine.{function}: argument {argument}: config"), (value, message)
        assert key in message, (value, message)


@pytest.mark.parametrize("call, said", [
    (lambda g: engine.cfr(g, "adam", 1.0, iterations=2), "unknown local learner 'adam'"),
    (lambda g: engine.cfr_sweep(g, "neurd", [1.0], [1, 2]), "argument learners must be a list"),
    (lambda g: engine.cfr_sweep(g, ["x"], [1.0], [1, 2]), "unknown local learner 'x'"),
    (lambda g: engine.cfr_sweep(g, ["neurd"], [1.0], [2, 1]), "strictly increasing"),
    (lambda g: engine.cfr(g, "neurd", np.ones(3), iterations=2), "shape (12, 1)"),
    (lambda g: engine.random_policies(g, -1, 0), "argument num must be an integer"),
    (lambda g: engine.best_response(g, engine.uniform_policy(g), 2), "player must be 0 or 1"),
])
def test_engine_keywords_no_config_key_governs_are_refused_in_one_line(kuhn, call, said):
    """A learner (the engine also has regret matching), a policy's shape, a player: the
    engine's own rules, refused before anything runs."""
    with pytest.raises(ValueError) as info:
        call(kuhn)
    assert said in str(info.value) and "\n" not in str(info.value)
