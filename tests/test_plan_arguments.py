"""A neural run's plan is checked by the config's schema before anything compiles: every field
of :class:`neurd.neural.experiment.Plan` and its :class:`~neurd.neural.train.Spec` with a bad
value of each kind is refused by :func:`neurd.neural.experiment.run` in one line naming the
field and its config key, in the config's words, and nothing is compiled or run."""

import dataclasses
import math

import pytest

from neurd import games
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
    "critic": ["oracle", 1],
    "precision": ["float64", "highest", 32],
    "neurd_logits": ["centered", "RAW", 0],
    "loss_normalisation": ["mean", None],
    "networks": ["triple", 2],
}
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
    assert set(SPEC_BAD) == {f.name for f in dataclasses.fields(train.Spec)}
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
