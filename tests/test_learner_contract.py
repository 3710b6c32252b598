"""A user's local learner at the engine's door (neurd.tabular.contract): a step of the wrong
shape, a policy that is no distribution, code that raises, or a step that turns NaN is refused
naming the learner, the function, the player and (for a run) the first iteration and value;
a state of another game is refused by average_policy naming both shapes."""

import jax.numpy as jnp
import pytest

from neurd import engine
from neurd.engine import LearnerError, LocalLearner


@pytest.fixture(scope="module")
def kuhn():
    return engine.compile_game("kuhn_poker")


def _zeros(legal):
    return jnp.zeros(legal.shape, jnp.float64)


def _softmax(params, legal):
    z = jnp.where(legal, params, -jnp.inf)
    z = z - jnp.max(z, axis=1, keepdims=True)
    e = jnp.where(legal, jnp.exp(z), 0.0)
    return e / e.sum(axis=1, keepdims=True)


def _hedge(params, regrets, eta, legal):
    return params + eta * regrets


def test_a_good_learner_of_ones_own_runs_as_neurd_does(kuhn):
    mine = LocalLearner("my hedge", _zeros, _hedge, _softmax)
    ours = engine.average_policy(kuhn, engine.cfr(kuhn, mine, 1.0, 50))
    theirs = engine.average_policy(kuhn, engine.cfr(kuhn, "neurd", 1.0, 50))
    assert abs(ours - theirs).max() < 1e-12


@pytest.mark.parametrize("learner, words", [
    (LocalLearner("wide", _zeros, lambda p, r, e, legal: jnp.concatenate([p, p], axis=1),
                  _softmax), "step (player 0) returned shape"),
    (LocalLearner("ints", lambda legal: jnp.zeros(legal.shape, jnp.int32), _hedge, _softmax),
     "init (player 0) returned dtype int32"),
    (LocalLearner("nan", _zeros, lambda p, r, e, legal: p + jnp.nan, _softmax),
     "step (player 0) returned nan at information state 0, action 0"),
    (LocalLearner("flat", _zeros, _hedge, lambda p, legal: jnp.ones(legal.shape)),
     "policy (player 0) is not a distribution"),
    (LocalLearner("raises", _zeros, lambda p, r, e, legal: 1 / 0, _softmax),
     "raised ZeroDivisionError on player 0"),
])
def test_a_learner_that_breaks_its_contract_is_refused_before_the_run(kuhn, learner, words):
    with pytest.raises(LearnerError) as refused:
        engine.cfr(kuhn, learner, 1.0, 10)
    message = str(refused.value)
    assert message.startswith(f"engine.cfr: learner {learner.name!r}") and words in message, \
        message
    assert "\n" not in message


def test_a_run_that_turns_nan_names_the_iteration_and_the_value(kuhn):
    """A step that is finite at first and blows up later is found by its first bad
    iteration (the run is repeated, halving, only when its end is not finite)."""
    def late(params, regrets, eta, legal):
        return params + eta * regrets * jnp.exp(jnp.abs(params).max() * 50.0)

    learner = LocalLearner("late", _zeros, late, _softmax)
    with pytest.raises(LearnerError, match=r"learner 'late' gave (nan|inf|-inf) at iteration "
                                           r"\d+ \(of 200\)") as refused:
        engine.cfr(kuhn, learner, 1.0, 200)
    at = int(str(refused.value).split("at iteration ")[1].split(" ")[0])
    assert 1 <= at <= 200
    with pytest.raises(LearnerError, match="learner 'late' gave"):
        engine.cfr_regret(kuhn, learner, 1.0, 200)


def test_a_state_of_another_game_is_refused_by_name(kuhn):
    leduc = engine.compile_game("leduc_poker")
    state = engine.cfr(leduc, "neurd", 1.0, 5)
    with pytest.raises(ValueError, match=r"engine.average_policy: argument state is not a run "
                                         r"of this game: its player 0 has \d+ information "
                                         r"states x 3 actions, the game's 6 x 2"):
        engine.average_policy(kuhn, state)
    with pytest.raises(TypeError, match="must be a CFRState"):
        engine.average_policy(kuhn, {"params": 1})
    with pytest.raises(TypeError, match="must be a CFRState"):
        engine.current_policy([1, 2])


def test_a_cfr_run_far_longer_than_allowed_is_refused_with_its_estimate(kuhn, monkeypatch):
    """engine.cfr times a short run before a long one and refuses one estimated past
    max_hours, naming the estimate and the keyword."""
    leduc = engine.compile_game("leduc_poker")
    with pytest.raises(ValueError, match=r"engine.cfr: the run would take about [\d.]+ hours "
                                         r"\(10,000,000 iterations at the pace of 20 timed "
                                         r"here\), more than max_hours = 0.001"):
        engine.cfr(leduc, "neurd", 1.0, 10_000_000, max_hours=0.001)
    with pytest.raises(ValueError, match="max_hours must be a positive number"):
        engine.cfr(kuhn, "neurd", 1.0, 10, max_hours=float("nan"))
    assert int(engine.cfr(kuhn, "neurd", 1.0, 2000, max_hours=1.0).iteration.item()) == 2000


def test_cfr_runs_past_the_machines_memory_are_refused_before_anything_is_allocated(
        kuhn, monkeypatch):
    """engine.cfr, cfr_regret and cfr_sweep estimate a run's memory and refuse one past 80% of
    what the machine has available, naming the estimate, the game's size and what to lower."""
    need = engine.run_memory_bytes(engine.sequence_form(kuhn), 1)
    assert need > 0
    assert engine.run_memory_bytes(engine.sequence_form(kuhn), 30) > 10 * need
    monkeypatch.setattr(engine, "available_memory_bytes", lambda: need / 0.8 * 0.99)
    for call in (lambda: engine.cfr(kuhn, "neurd", 1.0, 10),
                 lambda: engine.cfr_regret(kuhn, "neurd", 1.0, 10)):
        with pytest.raises(ValueError, match=r"engine.cfr(_regret)?: 1 run\(s\) of this game "
                                             r"\(12 information states x 2 actions, 30 "
                                             r"terminal histories\) would hold about"):
            call()
    monkeypatch.setattr(engine, "available_memory_bytes", lambda: 3 * need)
    assert int(engine.cfr(kuhn, "neurd", 1.0, 10).iteration.item()) == 10
    with pytest.raises(ValueError, match=r"engine.cfr_sweep: 40 run\(s\).*pass fewer step "
                                         r"sizes"):
        engine.cfr_sweep(kuhn, ["neurd", "spg"], [0.1 * (k + 1) for k in range(20)], [10])
    monkeypatch.setattr(engine, "available_memory_bytes", lambda: None)
    assert int(engine.cfr(kuhn, "neurd", 1.0, 10).iteration.item()) == 10
