"""What one job of Fig 6 runs (:class:`Plan`) and where it measures (:func:`checkpoint_grid`).

A plan names a game, the learning spec, the entropy levels and run seeds, and
the schedule; its configurations are every (algorithm, entropy, run seed), in
the order of the result arrays' columns, and its batches the calls of the
compiled program they are run in.

Checkpoints: per phase, the phase's first iteration, ``geometric`` points
spaced geometrically from one policy update on (resolving the start of the
phase) and ``linear`` points spaced evenly up to the phase's last iteration
(which is always one), all multiples of the critic updates per policy update.
A phase boundary appears twice: as the last iteration of one phase, measured
in that phase's game, and as the first of the next, in the next one's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from neurd.games import CompiledGame

if TYPE_CHECKING:  # a plan and its checkpoint grid need no JAX (the publication's checks)
    from neurd.neural import train


@dataclass(frozen=True)
class Plan:
    """What a job runs: a game, the learning spec, entropy levels, run seeds, the schedule."""

    game: str
    spec: train.Spec
    entropies: tuple[float, ...]
    run_seeds: tuple[int, ...]
    seed: int
    phase_iterations: int
    phases: int
    geometric: int
    linear: int
    seeds_per_batch: int = 1
    logits_seeds: tuple[int, ...] = ()
    logits_entropies: tuple[float, ...] = ()
    batch_origin: int = 0

    @property
    def configurations(self) -> list[tuple[str, float, int]]:
        """(algorithm, entropy, run seed) in the order of the result arrays' columns."""
        return [(a, self.entropies[e], s) for a in self.spec.algorithms
                for s in self.run_seeds for e in range(len(self.entropies))]

    @property
    def logged(self) -> list[int]:
        """Indices in :attr:`configurations` of those whose centred logits are kept at every
        checkpoint: every algorithm's runs of a seed of ``logits_seeds`` (those of this job)
        at an entropy level of ``logits_entropies``."""
        return [c for c, (_, entropy, seed) in enumerate(self.configurations)
                if seed in self.logits_seeds and entropy in self.logits_entropies]

    @property
    def batches(self) -> list[tuple[int, ...]]:
        """The job's run seeds by batch: seed ``s`` is in batch
        ``(s - batch_origin) // seeds_per_batch``.

        A batch is one call of the compiled program (``vmap`` over its
        configurations); which batch a seed is in, not which job, fixes its
        numbers, so any split of the seeds into jobs gives the same tables.  A
        seed block (:func:`neurd.neural.runs.block_plan`) is one batch of its
        own: ``batch_origin`` its first seed, ``seeds_per_batch`` its size.
        """
        groups: dict[int, list[int]] = {}
        for s in self.run_seeds:
            groups.setdefault((s - self.batch_origin) // self.seeds_per_batch, []).append(s)
        return [tuple(groups[k]) for k in sorted(groups)]


def checkpoint_grid(phase_iterations: int, phases: int, geometric: int, linear: int,
                    multiple: int) -> tuple[np.ndarray, np.ndarray]:
    """``(iteration [K], phase [K])`` of every checkpoint, in order (see the module docstring)."""
    if phase_iterations % multiple:
        raise ValueError(f"phase_iterations ({phase_iterations}) must be a multiple of the "
                         f"critic updates per policy update ({multiple})")
    offsets = np.concatenate([
        [0], np.geomspace(multiple, phase_iterations, geometric) if geometric else [],
        np.linspace(0, phase_iterations, linear + 1)[1:]])
    offsets = np.unique(np.round(offsets / multiple).astype(np.int64) * multiple)
    iterations = np.concatenate([p * phase_iterations + offsets for p in range(phases)])
    phase = np.repeat(np.arange(1, phases + 1), len(offsets))
    return iterations.astype(np.int64), phase.astype(np.int64)


def job_template(compiled: CompiledGame, plan: Plan) -> tuple[list, np.ndarray, np.ndarray]:
    """``(states, iterations, phases)``: the job's initial learner states (one per batch),
    whose leaves a saved state must match, and its checkpoint grid."""
    from neurd.neural import train  # puts off JAX

    game = train.neural_game(compiled)
    states = [train.batch_inputs(plan.spec, game, plan.seed, plan.game, batch,
                                 plan.entropies)[0] for batch in plan.batches]
    iterations, phases = checkpoint_grid(plan.phase_iterations, plan.phases, plan.geometric,
                                         plan.linear, plan.spec.critic_updates)
    return states, iterations, phases
