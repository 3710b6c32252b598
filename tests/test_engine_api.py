"""The public engine API: the documented example runs as written, bad input is refused."""

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

from neurd import engine

DOC = Path(__file__).resolve().parents[1] / "docs" / "engine.md"


def test_the_documented_example_runs_verbatim(capsys):
    """Every ```python block of docs/engine.md, in order, in one namespace."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)
    assert len(blocks) >= 4
    namespace = {}
    exec(compile("\n".join(blocks), str(DOC), "exec"), namespace)  # noqa: S102
    printed = capsys.readouterr().out
    assert "936 (468, 468) 3" in printed and "the engine needs 2" in printed
    # what the text around the code promises
    assert namespace["curves"].shape == (2, 3, 3)
    assert np.all(namespace["curves"][0, :, -1] < namespace["curves"][1, :, -1])
    assert float(engine.nash_conv(namespace["game"], namespace["uniform"])) == pytest.approx(
        4.747222222222222, abs=1e-12)


def test_every_public_function_is_documented():
    for name in engine.__all__:
        member = getattr(engine, name)
        if inspect.isfunction(member):
            assert inspect.getdoc(member), f"engine.{name} has no docstring"


@pytest.fixture(scope="module")
def kuhn():
    return engine.compile_game("kuhn_poker")


def test_save_load_and_batch_evaluation(kuhn, tmp_path):
    path = tmp_path / "kuhn.npz"
    engine.save_game(kuhn, path)
    again = engine.load_game(path)
    policies = engine.random_policies(again, num=3, seed=0)
    batch = engine.nash_conv(again, policies)
    assert batch.shape == (3,)
    for policy, value in zip(policies, batch):
        assert float(engine.nash_conv(kuhn, policy)) == pytest.approx(float(value), abs=1e-13)
    assert engine.expected_values(kuhn, policies).shape == (3, 2)


@pytest.mark.parametrize("call, error, message", [
    (lambda g: engine.nash_conv(g, np.ones((12, 3)) / 3), ValueError, r"shape \(12, 2\)"),
    (lambda g: engine.nash_conv(g, -np.ones((12, 2))), ValueError, "negative"),
    (lambda g: engine.nash_conv(g, np.full((12, 2), 0.6)), ValueError, "sum to 1"),
    (lambda g: engine.best_response(g, engine.uniform_policy(g), 2), ValueError, "player"),
    (lambda g: engine.cfr(g, "neurd", 1.0, iterations=0), ValueError, "iterations"),
    (lambda g: engine.cfr(g, "neurd", np.ones(3), iterations=5), ValueError, "step_size"),
    (lambda g: engine.cfr(g, "neurd", 0.0, iterations=5), ValueError,
     r"argument step_size: config key 'tabular.step_sizes\[0\]': 0.0 is less than or equal to "
     "the minimum of 0"),
    (lambda g: engine.cfr(g, "spg", np.nan, iterations=5), ValueError,
     r"argument step_size: config: every number must be finite"),
    (lambda g: engine.cfr(g, "adam", 1.0, iterations=5), ValueError, "unknown local learner"),
    (lambda g: engine.sequence_form("kuhn_poker"), TypeError, "CompiledGame"),
])
def test_bad_input_is_refused_with_a_message(kuhn, call, error, message):
    with pytest.raises(error, match=message):
        call(kuhn)


def test_probability_on_an_illegal_action_names_the_information_state():
    game = engine.compile_game("leduc_poker")
    policy = np.asarray(engine.uniform_policy(game)).copy()
    row = int(np.flatnonzero(~game.infostate_legal.all(axis=1))[0])
    policy[row] = 1 / 3
    with pytest.raises(ValueError, match=re.escape(repr(str(game.infostate_string[row])))):
        engine.nash_conv(game, policy)


def test_the_engine_takes_openspiel_objects():
    """A loaded pyspiel.Game compiles; Python policies of open_spiel.python.policy convert;
    a game without information-state tensors still evaluates exactly; the history cap is
    the caller's."""
    import pyspiel
    from open_spiel.python import policy as python_policy
    from open_spiel.python.algorithms import exploitability

    openspiel_game = pyspiel.load_game("leduc_poker")
    game = engine.compile_game(openspiel_game)
    assert game.num_infostates == 936
    tabular = python_policy.TabularPolicy(openspiel_game)
    rng = np.random.default_rng(0)
    weights = rng.random(tabular.action_probability_array.shape) * tabular.legal_actions_mask
    tabular.action_probability_array = weights / weights.sum(axis=1, keepdims=True)
    for policy in (tabular, python_policy.UniformRandomPolicy(openspiel_game)):
        ours = float(engine.nash_conv(game, engine.from_openspiel(game, policy)))
        assert ours == pytest.approx(exploitability.nash_conv(openspiel_game, policy), abs=1e-10)
    without = engine.compile_game("oshi_zumo(coins=4,size=1,horizon=3)")
    assert without.infostate_tensor.shape == (without.num_infostates, 0)
    uniform = engine.uniform_policy(without)
    theirs = pyspiel.nash_conv(pyspiel.convert_to_turn_based(pyspiel.load_game(
        "oshi_zumo(coins=4,size=1,horizon=3)")), engine.to_openspiel(without, uniform))
    assert float(engine.nash_conv(without, uniform)) == pytest.approx(theirs, abs=1e-10)
    with pytest.raises(engine.GameError, match="max_histories"):
        engine.compile_game("leduc_poker", max_histories=100)
