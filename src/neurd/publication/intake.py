"""What a seed block must show before it is published: its numbers are computed again here.

A block's tables can be consistent (every hash right, every row in place, every value in
range) and still not be what its runs computed: a NashConv halved, a curve smoothed.  Two
checks recompute them, the same for a block coming in (``neurd published-add``, through
:func:`verify_block`, before anything is published) and for a published one (``neurd
published-reproduce``, :func:`neurd.publication.reproduce` and
:func:`neurd.publication.phase_end_nash_conv`):

* :func:`reproduce_block`: the first :data:`AGREEMENT_CYCLES` learning cycles of the block's
  first batch run again on this machine, in the block's own batches (which fix the float
  rounding of a seed), against the block's NashConv at every checkpoint among them, within
  :data:`AGREEMENT_NASH_CONV` (float32 learning agrees across devices in distribution, not
  bit for bit);
* :func:`phase_end_block`: the exact NashConv (the engine, float64, no OpenSpiel) of every
  policy the block publishes, in its phase's game, against the block's NashConv at that
  phase's end, within :data:`PHASE_END_TOLERANCE`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from neurd import games as game_files
from neurd.neural.runs import block_plan, parse_block

# How far a run of the same config on another device may be from the published numbers after
# its first cycles: float32 learning agrees across devices in distribution, not bit for bit,
# and after AGREEMENT_CYCLES cycles CPU and GPU were measured within 2.1e-7 in NashConv
# (docs, "Determinism"); ``make gpu-check`` and the reproduction both allow this much.
AGREEMENT_CYCLES = 3
AGREEMENT_NASH_CONV = 1e-3
# how far NashConv recomputed from the published float64 policies may be from the published
# value (the same float64 computation on another machine)
PHASE_END_TOLERANCE = 1e-9

REPRODUCED_COLUMNS = ["block", "algorithm", "entropy", "seed", "iteration", "published",
                      "reproduced", "difference"]
PHASE_END_COLUMNS = ["block", "algorithm", "entropy", "seed", "phase", "published",
                     "recomputed", "difference"]


class BlockRefused(ValueError):
    """A block whose numbers are not what its runs compute here; names the block."""


def block_job(cfg: Mapping, game: str, name: str, batches: Sequence[Sequence[int]]):
    """The :class:`~neurd.neural.experiment.Plan` a block was run as: its seeds in the
    ``batches`` its curves record (a :class:`ValueError` if they are no partition of the
    block's seeds into equal consecutive runs)."""
    critic, first, last = parse_block(name)
    batches = [tuple(b) for b in batches]
    if not batches or not all(batches):
        raise ValueError(f"{game} block {name}: no batches recorded")
    job = block_plan(cfg, game, critic, first, last, seeds_per_batch=len(batches[0]))
    if job.batches != batches:
        raise ValueError(f"{game} block {name}: its batches {batches} are not a partition "
                         "into equal consecutive runs of seeds")
    return job


def reproduce_block(cfg: Mapping, game: str, name: str, batches, curves: pd.DataFrame, compiled,
                    cycles: int = AGREEMENT_CYCLES) -> pd.DataFrame:
    """The first ``cycles`` learning cycles of the block's first batch run again here, beside
    the block's NashConv (``curves``) at every checkpoint among them (columns
    :data:`REPRODUCED_COLUMNS`).  A cycle draws its samples from a key folded with its index
    and nothing depends on the phase length, so these iterations are the same computation as
    the block's first ones, whatever its checkpoint schedule."""
    from neurd.neural import experiment  # puts off JAX

    job = block_job(cfg, game, name, batches)
    job = dataclasses.replace(job, run_seeds=job.batches[0], phase_iterations=cycles
                              * job.spec.critic_updates, phases=1, geometric=0, linear=cycles)
    results = experiment.run(compiled, job)
    published = curves[curves.phase == 1].set_index(
        ["algorithm", "entropy", "seed", "iteration"]).nash_conv
    rows = []
    for k, iteration in enumerate(results["iteration"]):
        for c, (algorithm, entropy, seed) in enumerate(job.configurations):
            key = (algorithm, float(entropy), int(seed), int(iteration))
            if key in published.index:
                value, given = float(results["nash_conv"][k, c]), float(published.loc[key])
                both = np.isnan(value) and np.isnan(given)  # diverged in both: agreed
                rows.append((name, *key, given, value, 0.0 if both else abs(value - given)))
    return pd.DataFrame(rows, columns=REPRODUCED_COLUMNS)


def phase_end_block(cfg: Mapping, game: str, name: str, policies: pd.DataFrame,
                    curves: pd.DataFrame, compiled, negated=None) -> pd.DataFrame:
    """The exact NashConv (engine, float64) of every policy of ``policies`` at its phase's
    end, in that phase's game (the payoff negated in even phases), beside the block's value
    in ``curves`` (columns :data:`PHASE_END_COLUMNS`)."""
    from neurd import engine  # puts off JAX

    if not len(policies):
        return pd.DataFrame([], columns=PHASE_END_COLUMNS)
    rows_, cols_ = np.nonzero(compiled.infostate_legal)
    position = {(s, int(a)): (r, int(a)) for r, a, s in
                zip(rows_, cols_, compiled.infostate_string[rows_])}
    negated = game_files.negated(compiled) if negated is None else negated
    length = int(cfg["phase_iterations"][game])
    published = curves.set_index(["algorithm", "entropy", "seed", "iteration", "phase"]).nash_conv
    runs = list(policies.groupby(["algorithm", "entropy", "seed", "phase"]))
    tables = np.zeros((len(runs),) + compiled.infostate_legal.shape)
    for k, (_, run) in enumerate(runs):
        for state, action, p in zip(run.infostate, run.action, run.probability):
            tables[(k, *position[(state, int(action))])] = p
    odd = np.array([key[3] % 2 == 1 for key, _ in runs])
    values = np.empty(len(runs))
    for played, chosen in ((compiled, odd), (negated, ~odd)):
        if chosen.any():
            values[chosen] = np.asarray(engine.nash_conv(played, tables[chosen]))
    out = []
    for ((algorithm, entropy, seed, phase), _), value in zip(runs, values):
        given = float(published.loc[(algorithm, entropy, seed, phase * length, phase)])
        out.append((name, algorithm, float(entropy), int(seed), int(phase), given,
                    float(value), abs(float(value) - given)))
    return pd.DataFrame(out, columns=PHASE_END_COLUMNS)


def verify_block(cfg: Mapping, game: str, name: str, batches, curves: pd.DataFrame,
                 policies: pd.DataFrame, compiled, where: str = "") -> dict:
    """Refuse (:class:`BlockRefused`, naming the block and the difference) a block whose
    first cycles do not reproduce here within :data:`AGREEMENT_NASH_CONV`, or whose
    published policies' exact NashConv at the phase ends is not its own within
    :data:`PHASE_END_TOLERANCE`; return what was compared (counts, largest differences)."""
    label = f"{where}: " if where else ""
    try:
        reproduced = reproduce_block(cfg, game, name, batches, curves, compiled)
    except ValueError as error:
        raise BlockRefused(f"{label}{error}") from None
    if not len(reproduced):
        raise BlockRefused(f"{label}{game} block {name}: no checkpoint within its first "
                           f"{AGREEMENT_CYCLES} cycles: nothing to reproduce it by")
    worst = float(np.max(reproduced.difference.to_numpy()))  # NaN stays NaN
    if not worst <= AGREEMENT_NASH_CONV:
        row = reproduced.loc[reproduced.difference.idxmax()]
        raise BlockRefused(
            f"{label}{game} block {name} does not reproduce here: its NashConv "
            f"{row.published:.6g} at iteration {row.iteration} ({row.algorithm}, entropy "
            f"{row.entropy:g}, seed {row.seed}) is {row.reproduced:.6g} run again, a difference "
            f"{worst:.3g} beyond the bound {AGREEMENT_NASH_CONV:.0e}; not published")
    ends = phase_end_block(cfg, game, name, policies, curves, compiled)
    worst_end = float(np.max(ends.difference.to_numpy())) if len(ends) else 0.0
    if not worst_end <= PHASE_END_TOLERANCE:
        row = ends.loc[ends.difference.idxmax()]
        raise BlockRefused(
            f"{label}{game} block {name}: the exact NashConv of its published policy at the "
            f"end of phase {row.phase} ({row.algorithm}, entropy {row.entropy:g}, seed "
            f"{row.seed}) is {row.recomputed:.6g}, its curves say {row.published:.6g}, a "
            f"difference {worst_end:.3g} beyond the bound {PHASE_END_TOLERANCE:.0e}; "
            "not published")
    return {"reproduced": len(reproduced), "largest": worst, "phase_ends": len(ends),
            "largest_phase_end": worst_end}
