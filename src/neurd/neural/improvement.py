"""Step 2 of a learning cycle, policy improvement (:mod:`neurd.neural.train`), written once:
at every information state the policy update's episodes visited (every state, or each
configuration's visited rows under a visited layout: :mod:`neurd.neural.visited`), the ``q``
of its critic (or the exact one), its algorithm's gradient in the logits
(:func:`logit_gradient`; a user's loss checked first: :func:`check_losses`), pulled back to
the weights, and the optimiser's step (:func:`policy_step`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

import jax
import jax.numpy as jnp
import numpy as np
import optax

from neurd.config import ConfigError
from neurd.neural import algorithms, losses
from neurd.neural.visited import visited_rows
from neurd.tabular.histories import action_values, own_terms

if TYPE_CHECKING:
    from neurd.neural.train import NeuralGame, RunState, Spec

OPTIMIZERS = {"sgd": optax.sgd, "adam": optax.adam}


def optimizers(spec: Spec):
    """The policy's and the critic's optax optimisers (``spec.optimizer``)."""
    make = OPTIMIZERS[spec.optimizer]
    return make(spec.policy_learning_rate), make(spec.critic_learning_rate)


@dataclass(frozen=True)
class Rows:
    """Where step 2 computes, for ``N`` configurations: every information state
    (``rows`` None: the game's arrays shared, vmapped with axis None), or each
    configuration's visited rows ``[N, R]`` (``kept``: a row that is a real visit, not
    padding) with the game's arrays taken at them (axis 0)."""

    rows: jax.Array | None
    kept: jax.Array | None
    legal: jax.Array
    num_legal: jax.Array

    @classmethod
    def of(cls, spec: Spec, game: NeuralGame, visited: bool, weights: jax.Array) -> Rows:
        tree = game.tree
        if not visited:
            return cls(None, None, tree.legal, tree.num_legal)
        rows, kept = jax.vmap(partial(visited_rows, spec, game))(weights)  # [N, R]
        return cls(rows, kept, tree.legal[rows], tree.num_legal[rows])

    @property
    def axis(self) -> int | None:
        return None if self.rows is None else 0

    def at(self, x):
        """Each configuration's rows of ``x`` ``[N, I, ...]`` (``x`` itself for every state;
        None stays None)."""
        if x is None or self.rows is None:
            return x
        return jax.vmap(lambda v, r: v[r])(x, self.rows)


def improve(spec: Spec, game: NeuralGame, layout, net, policy: dict, pullback, logits,
            table, critic: dict, weights, taken, eta, sign, algorithm):
    """``(the policy's gradient in its weights, the share of pushes blocked)`` ``[N]`` of
    step 2 (see the module): ``logits``/``table`` ``[N, I, A]`` the cycle's pass and its
    ``pullback``, ``critic`` the critic's weights after step 1, ``weights [N, I]`` the
    states' weights and ``taken`` the shares of the actions taken, of the policy update's
    episodes."""
    rows = Rows.of(spec, game, layout.visited, weights)
    if spec.critic == "exact":  # the exact regularised q of the policy, at the rows
        q = rows.at(jax.vmap(partial(policy_q, spec, game), in_axes=(0, None, 0, None))(
            table, None, eta, sign))
    else:  # the critic's pass at the rows, plus the acting player's own term
        values = (layout.every(net, critic) if rows.rows is None
                  else layout.every_at(net, critic, rows.rows))
        q = values + jax.vmap(own_terms, in_axes=(0, rows.axis, rows.axis, 0))(
            rows.at(table), rows.num_legal, rows.legal, eta)
    kept = weights if rows.rows is None else jnp.where(rows.kept, rows.at(weights), 0.0)
    by_logits, blocked = jax.vmap(partial(logit_gradient, spec, game),
                                  in_axes=(0, 0, 0, 0, 0, rows.axis))(
        rows.at(logits), q, kept, algorithm, rows.at(taken), rows.legal)
    pull = pullback if rows.rows is None else layout.pullback_at(net, policy, rows.rows)
    return pull(by_logits), blocked




def policy_q(spec: Spec, game: NeuralGame, table: jax.Array, critic_values: jax.Array | None,
             eta, sign) -> jax.Array:
    """``[I, A]``: step 2's ``q``, from the critic's values on every information state (or,
    with the exact critic, from the policy table alone: ``critic_values`` unused)."""
    tree = game.tree
    if spec.critic == "exact":
        return action_values(tree, table, eta, sign)[0]
    return critic_values + own_terms(table, tree.num_legal, tree.legal, eta)


# the options that are Spec settings (a loss's keyword -> its value of the spec)
SPEC_OPTIONS = {"beta": lambda spec: spec.beta,
                "centre": lambda spec: losses.CENTRINGS[spec.neurd_logits]}


def loss_options(spec: Spec, chosen: algorithms.Algorithm) -> dict:
    """The keywords ``chosen``'s loss is called with: each option it declares, from
    ``spec.algorithm_options`` where given there, else from the spec's setting of that name
    (NeuRD's ``beta`` and ``centre``), else none (its loss's default)."""
    given = dict(dict(spec.algorithm_options).get(chosen.name, ()))
    out = {}
    for option in chosen.options:
        if option in given:
            out[option] = given[option]
        elif option in SPEC_OPTIONS:
            out[option] = SPEC_OPTIONS[option](spec)
    return out


def logit_gradient(spec: Spec, game: NeuralGame, logits: jax.Array, q: jax.Array,
                   weights: jax.Array, algorithm, taken: jax.Array | None = None,
                   legal: jax.Array | None = None):
    """``(d loss / d logits [I, A], share blocked)``: step 2's loss of the configuration's
    algorithm (``algorithm``: its index in ``spec.algorithms``; a loss of
    :mod:`neurd.neural.algorithms`), differentiated in the logits.  Every algorithm's
    gradient is formed and the configuration's kept, so every algorithm runs in one
    ``vmap``; each is its own loss's gradient, chosen after differentiation, so that
    another algorithm's loss (its NaN, its infinities) cannot reach it.
    ``taken``: the shares of the actions taken (:func:`critic_steps`), for the algorithms
    of the sampled actions.  ``legal``: the states' legal actions (default: every state's,
    ``game.tree.legal``)."""
    legal = game.tree.legal if legal is None else legal
    found = []
    for name in spec.algorithms:
        chosen = algorithms.get(name)
        extra = {**loss_options(spec, chosen), **({"taken": taken} if chosen.sampled else {})}
        function = chosen.function()

        def loss(x, function=function, extra=extra):  # the signature's order
            return function(x, q, legal, weights, **extra)
        (_, blocked), by_logits = jax.value_and_grad(loss, has_aux=True)(logits)
        found.append((by_logits, blocked))
    kept = found[-1]
    for index in range(len(found) - 2, -1, -1):
        kept = tuple(jnp.where(algorithm == index, mine, other)
                     for mine, other in zip(found[index], kept))
    return kept


def check_losses(spec: Spec, game: NeuralGame) -> None:
    """Refuse, before a run computes, an algorithm of ``spec`` that is not built in whose loss,
    called once on a test input of ``game``'s shapes (random logits and q, every state
    weighted alike), does not return a finite scalar loss and a share blocked in [0, 1] with
    a finite gradient in the logits of their shape: a :class:`~neurd.config.ConfigError`
    naming the algorithm and what is wrong.  (A loss that passes and goes wrong later makes
    its own configurations diverge, recorded so; the others are not touched:
    :func:`logit_gradient`.)"""
    legal = np.asarray(game.tree.legal)
    rng = np.random.default_rng(0)
    logits = jnp.asarray(rng.normal(size=legal.shape), jnp.float32)
    q = jnp.asarray(np.where(legal, rng.normal(size=legal.shape), 0.0), jnp.float32)
    weights = jnp.full(legal.shape[0], 1.0 / legal.shape[0], jnp.float32)
    taken = jnp.asarray(legal / np.maximum(legal.sum(-1, keepdims=True), 1), jnp.float32)
    for index, name in enumerate(spec.algorithms):
        if name in algorithms.BUILT_IN:
            continue
        chosen, key = algorithms.get(name), f"neural.algorithms[{index}]"
        extra = {**loss_options(spec, chosen), **({"taken": taken} if chosen.sampled else {})}

        def refuse(what, name=name, key=key):
            raise ConfigError(f"config key '{key}': algorithm {name!r}: {what} (called on a "
                              "test input of the game's shapes before the run)", key)

        function = chosen.function()

        def loss(x, function=function, extra=extra):
            out = function(x, q, legal, weights, **extra)
            if not (isinstance(out, (tuple, list)) and len(out) == 2):
                refuse(f"its loss returns {type(out).__name__}, not (loss, share blocked)")
            value, share = (jnp.asarray(x) for x in out)
            for what, x in (("loss", value), ("share blocked", share)):
                if x.shape != ():
                    refuse(f"its {what} is of shape {list(x.shape)}, not a scalar")
            return value, share
        try:
            (value, share), gradient = jax.value_and_grad(loss, has_aux=True)(logits)
        except ConfigError:
            raise
        except Exception as error:  # its own error, whatever it is, named with it
            refuse(f"its loss raised {type(error).__name__}: {str(error)[:200]}")
        if not np.isfinite(float(value)):
            refuse(f"its loss is {float(value)}, not finite")
        if not 0.0 <= float(share) <= 1.0:
            refuse(f"its share blocked is {float(share)}, not in [0, 1]")
        if gradient.shape != logits.shape or not np.isfinite(np.asarray(gradient)).all():
            refuse("its gradient in the logits is not finite")


def policy_step(spec: Spec, state: RunState, grads: dict):
    """``(new policy weights, optimiser state)``: the optimiser's step on ``grads``."""
    policy_opt, _ = optimizers(spec)
    updates, policy_state = policy_opt.update(grads, state.policy_opt, state.policy)
    return optax.apply_updates(state.policy, updates), policy_state


