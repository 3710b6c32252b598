"""A job's checkpoint rows (:func:`neurd.neural.experiment.run`): what is measured at each,
exactly and in float64, of every configuration's learner state (:func:`measure_row`,
:func:`measure_growth`), and the divergence of a configuration (:func:`diverged`,
:func:`zero_diverged`): from the row its NashConv or a float of its state stops being finite,
every measurement of it is NaN, and its state computes on from zeros."""

from __future__ import annotations

from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np

from neurd.neural import train
from neurd.neural.measurement import (
    GROWTH,
    MEASURED,
    centred_logits,
    logit_growth,
    measure,
    weight_norms,
)
from neurd.neural.plan import Plan
from neurd.precision import float64


@dataclass(frozen=True)
class Job:
    """What stays fixed over a job: its plan, the game's arrays and exact setup, the
    checkpoint grid, the batches' random keys and entropy weights."""

    plan: Plan
    game: train.NeuralGame
    form: object
    tree: object
    iterations: np.ndarray
    phases: np.ndarray
    keys: list
    etas: list
    legal: np.ndarray

    @property
    def configs(self) -> int:
        return len(self.plan.configurations)

    @property
    def pairs(self) -> int:
        """Legal (information state, action) pairs."""
        return int(self.legal.sum())


def stacked(per_batch: list[dict], algorithms) -> np.ndarray:
    """Per-batch ``{algorithm: [N_b, ...]}`` -> ``[C, ...]`` in the plan's configuration order."""
    return np.concatenate([np.asarray(batch[a]) for a in algorithms for batch in per_batch])


def state_field(states: list, name: str, algorithms) -> np.ndarray:
    """One field of the learners' states ``[C, ...]``, in the plan's configuration order."""
    return stacked([{a: getattr(s, name) for a, s in st.items()} for st in states], algorithms)


def diverged(results: dict, rows: int) -> np.ndarray:
    """``[C]``: the configurations that have diverged in the first ``rows`` measured rows
    (their NashConv is NaN there: :func:`measure_row` writes every measurement of a
    diverged configuration NaN from the row it diverged at)."""
    return np.any(np.isnan(results["nash_conv"][:rows]), axis=0)


def per_configuration(states: list, algorithms, fn) -> np.ndarray:
    """``[C]``: ``fn(state)`` (one value per configuration of a batch's state), in the plan's
    configuration order."""
    return stacked([{a: fn(s) for a, s in st.items()} for st in states], algorithms)


def finite_states(states: list, algorithms) -> np.ndarray:
    """``[C]``: whether every float of a configuration's learner state is finite."""
    def finite(state):  # reduced where the state lives: [N] booleans cross to the host
        leaves = [jnp.isfinite(x.reshape(len(x), -1)).all(axis=1)
                  for x in jax.tree_util.tree_leaves(state)
                  if jnp.issubdtype(x.dtype, jnp.inexact)]
        return np.asarray(jnp.all(jnp.stack(leaves), axis=0))
    return per_configuration(states, algorithms, finite)


def zero_diverged(states: list, algorithms, gone: np.ndarray) -> list:
    """The learner states with every float of the configurations ``gone`` (``[C]``) set to 0:
    a diverged configuration computes on in its batch (the batch is one program), from zeros
    rather than from infinities, and nothing of it is measured again."""
    if not gone.any():
        return states
    sizes = [len(st[algorithms[0]].updates) for st in states]
    offsets = np.cumsum([0, *sizes])
    out = [dict(st) for st in states]
    for k, algorithm in enumerate(algorithms):
        base = k * offsets[-1]
        for b, st in enumerate(states):
            mask = gone[base + offsets[b]:base + offsets[b + 1]]
            if not mask.any():
                continue
            keep = jnp.asarray(~mask)
            out[b][algorithm] = jax.tree_util.tree_map(
                lambda x, keep=keep: jnp.where(keep.reshape((-1,) + (1,) * (x.ndim - 1)), x,
                                               jnp.zeros_like(x))
                if jnp.issubdtype(x.dtype, jnp.inexact) else x, st[algorithm])
    return out


def measure_row(job: Job, states: list, results: dict, row: int, sign: float,
                 gone: np.ndarray | None = None) -> np.ndarray:
    """Write checkpoint row ``row`` of ``results`` from the learner states: the exact
    measurement, the logged logits, the threshold and critic counters, the tables at a
    phase's end.  Return ``[C]``: the configurations diverged at or before this row.

    A configuration **diverges** where its NashConv is not finite or its learner state holds
    a float that is not: from that row on every measurement of it (and its logged logits and
    phase-end tables) is NaN, and it is never measured again; ``gone`` (``[C]``, default
    none): the configurations diverged before this row."""
    plan, spec = job.plan, job.plan.spec
    gone = np.zeros(job.configs, bool) if gone is None else np.asarray(gone, bool)
    target, phase = int(job.iterations[row]), int(job.phases[row])
    critics = stacked([train.critic_tables(spec, job.game, st) for st in states], spec.algorithms)
    tables = state_field(states, "table", spec.algorithms)
    etas = stacked(job.etas, spec.algorithms).astype(np.float64)
    with float64():
        value, rmse, entropy, at = measure(job.form, job.tree, tables, critics,
                                           jnp.asarray(etas), sign, beta=spec.beta)
    results["nash_conv"][row] = np.asarray(value)
    results["policy_entropy"][row] = np.asarray(entropy)
    results["at_threshold"][row] = np.asarray(at)
    results["critic_rmse"][row] = np.nan if spec.critic == "exact" else np.asarray(rmse)
    measure_growth(job, states, results, row, tables)
    if plan.logged:
        with float64():
            centred = centred_logits(tables[np.asarray(plan.logged, np.int64)],
                                     jnp.asarray(job.legal))
        results["logits"][row] = np.asarray(centred)[:, job.legal]
    updates = np.maximum(state_field(states, "updates", spec.algorithms), 1)
    if target > 0:
        results["blocked"][row] = state_field(states, "blocked", spec.algorithms) / updates
        results["critic_loss"][row] = (state_field(states, "critic_loss", spec.algorithms)
                                       / (updates * spec.critic_updates))
    before = gone
    gone = gone | ~np.isfinite(results["nash_conv"][row]) | ~finite_states(
        states, spec.algorithms)
    for name in GROWTH:
        gone = gone | ~np.isfinite(results[name][row])
    for name in MEASURED:
        results[name][row, gone] = np.nan
    for name in GROWTH:  # the row a run diverges at keeps what was measured there
        results[name][row, before] = np.nan
    if plan.logged:
        results["logits"][row, gone[np.asarray(plan.logged, np.int64)]] = np.nan
    if target == phase * plan.phase_iterations:
        ended = np.asarray(tables[None][:, :, job.legal], np.float32)
        ended[:, gone] = np.nan
        results["phase_tables"] = np.concatenate([results["phase_tables"], ended])
    return gone


def measure_growth(job: Job, states: list, results: dict, row: int, tables: np.ndarray
                    ) -> None:
    """Write checkpoint row ``row`` of the :data:`~neurd.neural.measurement.GROWTH` results:
    the policy logits' common mode and largest centred logit over the visited states, and
    each network's weight norm."""
    spec = job.plan.spec
    outputs = stacked([train.policy_outputs(spec, job.game, st) for st in states],
                     spec.algorithms)
    with float64():
        common, centred = logit_growth(job.tree, tables, outputs)
        policy = per_configuration(states, spec.algorithms, lambda s: weight_norms(s.policy))
        critic = per_configuration(states, spec.algorithms, lambda s: weight_norms(s.critic))
    results["common_mode"][row] = np.asarray(common)
    results["centred_logit"][row] = np.asarray(centred)
    results["policy_weight_norm"][row] = np.asarray(policy)
    results["critic_weight_norm"][row] = np.asarray(critic)
