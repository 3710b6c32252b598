"""A user's algorithm cannot touch NeuRD's and SPG's numbers: each configuration's gradient
is its own algorithm's loss's alone, a loss that is wrong at its first call is refused
naming the algorithm, and the built-in names cannot be replaced (neurd.neural.train,
neurd.neural.algorithms)."""

import jax.numpy as jnp
import numpy as np
import pytest

from neurd.config import ConfigError
from neurd.games import compile_game
from neurd.names import NEURD, SPG
from neurd.neural import algorithms, experiment, losses, train


def _plan(names):
    return experiment.Plan(game="kuhn", spec=train.Spec(algorithms=names, hidden=(16,),
                                                        policy_batch=32),
                           entropies=(0.0, 0.1), run_seeds=(0, 1), seed=0,
                           phase_iterations=40, phases=2, geometric=1, linear=2)


@pytest.fixture(scope="module")
def kuhn():
    return compile_game("kuhn_poker")


@pytest.fixture(scope="module")
def paper(kuhn):
    return experiment.run(kuhn, _plan((NEURD, SPG)))


def _nan_gradient(logits, q, legal, weights):
    """SPG's loss plus a term whose value is 0 and whose gradient is NaN everywhere."""
    loss, share = losses.spg_loss(logits, q, legal, weights)
    return loss + 0.0 * jnp.sum(jnp.sqrt(jnp.zeros_like(logits) - logits * 0.0)), share


def _exploding(logits, q, legal, weights):
    """Finite on its first call; a step of 1e30 that sends its own networks to infinity."""
    return -1e30 * jnp.sum(weights[:, None] * logits * legal), jnp.zeros(())


def test_a_nan_gradient_beside_the_paper_changes_none_of_its_numbers(kuhn, paper, monkeypatch):
    """The loss is let past its first-call check here, to show the gradient itself is
    isolated: the old sum of every algorithm's loss under one gradient spread its NaN to
    44 of 48 of NeuRD's and SPG's NashConv values."""
    algorithms.register("nan_gradient", _nan_gradient, replace=True)
    monkeypatch.setattr(train, "check_losses", lambda spec, game: None)
    three = experiment.run(kuhn, _plan((NEURD, SPG, "nan_gradient")))
    for key in ("nash_conv", "critic_rmse", "policy_entropy", "common_mode",
                "policy_weight_norm"):
        np.testing.assert_array_equal(three[key][:, :8], paper[key], err_msg=key)
    assert experiment.diverged(three, len(three["iteration"]))[8:].all()
    assert not experiment.diverged(three, len(three["iteration"]))[:8].any()


def test_a_loss_that_diverges_later_diverges_alone(kuhn, paper):
    algorithms.register("exploding", _exploding, replace=True)
    three = experiment.run(kuhn, _plan((NEURD, SPG, "exploding")))
    np.testing.assert_array_equal(three["nash_conv"][:, :8], paper["nash_conv"])
    gone = experiment.diverged(three, len(three["iteration"]))
    assert gone[8:].all() and not gone[:8].any()


@pytest.mark.parametrize("loss, said", [
    (lambda x, q, legal, w: (jnp.sum(x, axis=0), jnp.zeros(())),
     "its loss is of shape [2], not a scalar"),
    (lambda x, q, legal, w: (jnp.sum(x) * jnp.nan, jnp.zeros(())),
     "its loss is nan, not finite"),
    (lambda x, q, legal, w: (jnp.sum(x * q), 1.5 + jnp.zeros(())),
     "its share blocked is 1.5, not in [0, 1]"),
    (lambda x, q, legal, w: (jnp.sum(jnp.sqrt(jnp.abs(x) * 0.0)), jnp.zeros(())),
     "its gradient in the logits is not finite"),
    (lambda x, q, legal, w: jnp.sum(x), "not (loss, share blocked)"),
    (lambda x, q, legal, w: (x @ jnp.ones((7,)), 0.0),
     "its loss raised TypeError"),
])
def test_a_loss_wrong_at_its_first_call_is_refused_naming_the_algorithm(kuhn, loss, said):
    algorithms.register("wrong", loss, replace=True)
    with pytest.raises(ConfigError) as refused:
        experiment.run(kuhn, _plan((NEURD, "wrong")))
    assert "config key 'neural.algorithms[1]': algorithm 'wrong': " in str(refused.value)
    assert said in str(refused.value)
    assert refused.value.key == "neural.algorithms[1]"


def test_the_built_ins_cannot_be_replaced_and_a_users_only_explicitly():
    for name in algorithms.BUILT_IN:
        known = algorithms.get(name)
        with pytest.raises(ValueError, match="built in and cannot be replaced"):
            algorithms.register(name, known.loss, label="mine", weighted=known.weighted,
                                sampled=known.sampled, source=known.source)
        assert algorithms.get(name) == known
    algorithms.register("twice", losses.spg_loss)
    algorithms.register("twice", losses.spg_loss)  # the same again: no change
    with pytest.raises(ValueError, match="pass replace=True"):
        algorithms.register("twice", losses.rpg_loss)
    with pytest.raises(ValueError, match="pass replace=True"):
        algorithms.register("twice", losses.spg_loss, label="other")
    assert algorithms.register("twice", losses.rpg_loss, replace=True).loss is losses.rpg_loss
    with pytest.raises(ValueError, match="replace 1 is not True or False"):
        algorithms.register("twice", losses.rpg_loss, replace=1)
