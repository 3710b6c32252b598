"""One job of Fig 6, run top to bottom: every configuration of one game for a chunk of run seeds.

:func:`run` drives the jitted learning program (:mod:`neurd.neural.train`) one
checkpoint segment at a time (the grid: :func:`~neurd.neural.plan.checkpoint_grid`).
At every checkpoint it measures each configuration's current policy exactly, in
float64 (:mod:`neurd.neural.measurement`), logs progress between segments,
keeps the policy of every configuration at the end of each phase, and can save
its whole state to a checkpoint folder (:mod:`neurd.neural.checkpoint`) so that
a killed or stopped job resumes where it stopped and writes identical tables.
For the configurations a plan names (:attr:`~neurd.neural.plan.Plan.logged`:
some run seeds at some entropy levels, none by default) it also keeps the
policy's centred logits at every checkpoint, per information state and legal
action, to show what a collapse to a deterministic policy is made of; naming
none changes no other number.
"""

from __future__ import annotations

import time
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from neurd.games import CompiledGame
from neurd.names import NEURD
from neurd.neural import train
from neurd.neural.arguments import check_plan
from neurd.neural.checkpoint import (
    CHECKPOINT_FORMAT,
    MARKER,
    Checkpoint,
    CheckpointPathError,
    StateError,
    check_state,
    restore_strictly,
)
from neurd.neural.device import device_description
from neurd.neural.measurement import (
    GROWTH,
    MEASURED,
    exact_policies,
    exact_setup,
    network_nash_conv,
    phase_policies,
)
from neurd.neural.plan import Plan, checkpoint_grid, job_template
from neurd.neural.resumable import PIECE_KEYS, check_resumable
from neurd.neural.rows import (  # noqa: F401  (diverged re-exported: callers of a job use it)
    Job,
    diverged,
    measure_row,
    per_configuration,
    state_field,
    zero_diverged,
)
from neurd.precision import float64
from neurd.progress import Progress

# what callers of a job use, from the modules that define it
__all__ = ["CHECKPOINT_FORMAT", "MARKER", "PIECE_KEYS", "CheckpointPathError", "Plan",
           "StateError", "Stopped", "check_consistent_state", "check_state", "checkpoint_grid",
           "exact_policies", "job_template", "network_nash_conv", "replay", "restore_strictly",
           "run"]

# A saved state's policy tables against what its weights give: float32 rounding of another
# device or cycle variant only; its last row's NashConv against what its tables give: float64
# exact arithmetic; a piece's rate against its own seconds and iterations
TABLE_TOLERANCE = 1e-5
NASH_CONV_TOLERANCE = 1e-9
MAX_CONFIGURATION_ITERATIONS_PER_SECOND = 1e9


class Stopped(Exception):
    """The job ran out of its wall-time budget and saved its state (resume by running again)."""


class TooLong(Exception):
    """The job's time, estimated from its first segments, is more than it was allowed."""


def _setup(compiled: CompiledGame, plan: Plan) -> tuple[Job, list, dict]:
    """``(job, states, results)``: the job's fixed arrays, its initial learner states (one
    per batch) and its results before any checkpoint (NaN rows, no phase ended)."""
    game = train.neural_game(compiled)
    form, tree = exact_setup(compiled)
    iterations, phases = checkpoint_grid(plan.phase_iterations, plan.phases, plan.geometric,
                                         plan.linear, plan.spec.critic_updates)
    states, keys, etas = (list(x) for x in zip(*[
        train.batch_inputs(plan.spec, game, plan.seed, plan.game, batch, plan.entropies)
        for batch in plan.batches]))
    job = Job(plan, game, form, tree, iterations, phases, keys, etas,
               np.asarray(compiled.infostate_legal))
    rows = len(iterations)
    results = {
        **{name: np.full((rows, job.configs), np.nan) for name in (*MEASURED, *GROWTH)},
        # the float32 tables at each phase's end, legal entries only (what a checkpoint keeps)
        "phase_tables": np.zeros((0, job.configs, job.pairs), np.float32),
        "logits": np.full((rows, len(plan.logged), job.pairs), np.nan),
    }
    train.check_losses(plan.spec, job.game)  # a user's loss, before any compute
    return job, states, results


def _advance(job: Job, states: list, done: int, target: int, sign: float) -> list:
    """The learner states after the iterations ``done..target`` (every batch, on device)."""
    spec = job.plan.spec
    cycles = (target - done) // spec.critic_updates
    states = [train.run_segment(spec, job.game, st, k, e, done // spec.critic_updates, cycles,
                                np.float32(sign))
              for st, k, e in zip(states, job.keys, job.etas)]
    jax.block_until_ready(states)
    return states


def _progress_text(algorithms, phase: int, target: int, nash_conv: np.ndarray,
                   blocked: np.ndarray) -> str:
    """A checkpoint's progress line: each algorithm's range of NashConv (and NeuRD's share
    of pushes its threshold blocked)."""
    groups = len(algorithms)
    per_algorithm = zip(algorithms, np.split(nash_conv, groups), np.split(blocked, groups))

    def values(v: np.ndarray) -> str:
        lived, lost = v[np.isfinite(v)], int(np.sum(~np.isfinite(v)))
        text = f"{lived.min():.3g}..{lived.max():.3g}" if lived.size else "none"
        return text + (f" ({lost} diverged)" if lost else "")

    return f"phase {phase}, NashConv " + "; ".join(
        f"{a} {values(v)}"
        + (f" (threshold blocked {100 * np.nanmean(b):.0f}% of pushes)"
           if a == NEURD and target > 0 and np.isfinite(b).any() else "")
        for a, v, b in per_algorithm)


def _piece_so_far(piece: dict, done: int, started: float, configs: int) -> dict:
    """This process's record of its work on the job once it has reached iteration ``done``."""
    iterations = done - piece["first_iteration"]
    seconds = round(time.monotonic() - started, 3)
    return {**piece, "iterations": iterations, "seconds": seconds,
            "configuration_iterations_per_second":
                round(configs * iterations / seconds, 1) if iterations else None}


def _outcome(job: Job, results: dict, pieces: list) -> dict:
    """The result arrays :func:`run` returns, from those of its last checkpoint row."""
    plan, legal = job.plan, job.legal
    full = np.zeros((plan.phases, job.configs) + legal.shape, np.float32)
    full[:, :, legal] = results.pop("phase_tables")
    with float64():
        results["policies"] = np.asarray(phase_policies(full, jnp.asarray(legal)))
    results["iteration"], results["phase"] = job.iterations, job.phases
    results["pieces"] = pieces
    return results


def _check_pace(max_seconds: float | None, elapsed: float, seconds_per_iteration: float,
                left: int) -> None:
    """Raise :class:`TooLong` where ``elapsed`` and ``left`` iterations at the pace measured
    pass ``max_seconds``."""
    if max_seconds is None:
        return
    estimate = elapsed + left * seconds_per_iteration
    if estimate > max_seconds:
        raise TooLong(f"at the pace of its first segments ({1.0 / seconds_per_iteration:,.0f} "
                      f"iterations a second) the run would take about {estimate / 3600:.1f} "
                      f"hours, more than the {max_seconds / 3600:.2f} allowed")


def run(compiled: CompiledGame, plan: Plan, checkpoint_path=None, checkpoint_seconds=300.0,
        identity: dict | None = None, stop_after_seconds: float | None = None,
        revision: str = "unknown", variant: str = "default",
        max_seconds: float | None = None, keep_state: bool = False) -> dict:
    """Run every configuration of ``plan``; return the result arrays.

    Keys: ``nash_conv``, ``critic_rmse``, ``blocked``, ``critic_loss``,
    ``policy_entropy``, ``at_threshold`` ``[K, C]``
    per checkpoint and configuration (:attr:`Plan.configurations` order),
    ``logits`` ``[K, len(plan.logged), legal pairs]``: the centred logits (float64,
    as :func:`~neurd.neural.measurement.measure` computes them) of the
    :attr:`Plan.logged` configurations at every checkpoint, per legal (information
    state, action) pair in the order of ``np.nonzero(compiled.infostate_legal)`` (no
    configuration by default),
    ``policies`` ``[phases, C, I, A]`` at each phase's end (float64, the
    float32 network tables renormalised), the checkpoints' ``iteration`` and
    ``phase`` ``[K]``, and ``pieces``: one record per process that worked on
    the job (device, jax version, revision, wall seconds, iterations,
    configuration-iterations per second, the cycle ``variant``).

    ``checkpoint_path``: a folder where the job state is saved every
    ``checkpoint_seconds`` of wall time (and resumed from if it exists and
    belongs to the same ``identity``; one that is unreadable or does not fit the
    plan is dropped with a warning, before any compute); removed when the job
    finishes.
    A plan a config could not hold is refused first
    (:func:`~neurd.neural.arguments.check_plan`).
    ``checkpoint_path`` is a folder (:mod:`neurd.neural.checkpoint`), never a file.
    ``stop_after_seconds``: a wall-time budget; once the next segment would
    overrun it, the state is saved to ``checkpoint_path`` and :class:`Stopped`
    is raised (run again to resume: the tables come out identical).
    ``max_seconds``: the longest the job may take; once the first timed segment gives its
    pace, a job whose estimated time is longer raises :class:`TooLong` with the estimate.
    ``keep_state``: at the end, the state is saved to ``checkpoint_path`` at its last row
    instead of removed (a finished job held until the other critics of its seeds finish: run
    again with it, the job writes the same tables at once, without a learning cycle).
    """
    check_plan(plan)  # before anything compiles: the config's schema, the config's words
    _needs_a_folder(checkpoint_path, stop_after_seconds, keep_state)
    started = time.monotonic()
    job, states, results = _setup(compiled, plan)
    saver = Checkpoint(checkpoint_path, identity or {})
    saver.claim()  # before any compute: a path that is not this project's is refused
    restored = saver.restore(states, partial(check_resumable, plan, job.iterations, job.phases,
                                             job.configs, job.pairs))
    first_row, pieces = 0, []
    if restored is not None:
        states, first_row, results, pieces = restored
    done = int(job.iterations[first_row - 1]) if first_row else 0
    gone = diverged(results, first_row)
    piece = {**device_description(plan.spec.critic), "revision": revision, "variant": variant,
             "first_iteration": done, "iterations": 0, "seconds": 0.0,
             "configuration_iterations_per_second": None}
    progress = Progress(f"neural {plan.game}: {job.configs} configurations", job.iterations[-1])
    last_save, seconds_per_iteration = time.monotonic(), None
    for row in range(first_row, len(job.iterations)):
        target, phase = int(job.iterations[row]), int(job.phases[row])
        sign = 1.0 if phase % 2 == 1 else -1.0
        # the budget: stop before a segment that would overrun it at the pace measured so far
        if (stop_after_seconds is not None and row > first_row and seconds_per_iteration
                and time.monotonic() - started + 1.2 * (target - done) * seconds_per_iteration
                + 5.0 > stop_after_seconds):
            saver.save(states, row, results,
                       pieces + [_piece_so_far(piece, done, started, job.configs)])
            raise Stopped(f"stopped at iteration {done} of {int(job.iterations[-1])} after "
                          f"{time.monotonic() - started:.0f} s (budget "
                          f"{stop_after_seconds:.0f} s); state saved in {checkpoint_path} "
                          f"({saver.size() / 2**20:.1f} MiB): run again to resume")
        segment_start = time.monotonic()
        if target > done:
            states = _advance(job, states, done, target, sign)
            if row > first_row:  # the first segment of a process includes its compilation
                seconds_per_iteration = (time.monotonic() - segment_start) / (target - done)
                _check_pace(max_seconds, time.monotonic() - started, seconds_per_iteration,
                            int(job.iterations[-1]) - target)
            done = target
        now = measure_row(job, states, results, row, sign, gone)
        for c in np.flatnonzero(now & ~gone):
            progress.log.warning("neural %s: configuration %s diverged at iteration %d "
                                 "(recorded NaN from here on)", plan.game,
                                 plan.configurations[c], target)
        gone = now
        states = zero_diverged(states, plan.spec.algorithms, gone)
        progress.update(target, _progress_text(plan.spec.algorithms, phase, target,
                                               results["nash_conv"][row], results["blocked"][row]))
        if (checkpoint_path is not None and row < len(job.iterations) - 1
                and time.monotonic() - last_save >= checkpoint_seconds):
            saver.save(states, row + 1, results,
                       pieces + [_piece_so_far(piece, done, started, job.configs)])
            last_save = time.monotonic()
    worked = first_row < len(job.iterations)  # this process worked on the job
    if worked:
        pieces = pieces + [_piece_so_far(piece, done, started, job.configs)]
    return _finish(saver, job, states, results, pieces, keep_state, worked)


def _needs_a_folder(checkpoint_path, stop_after_seconds: float | None, keep_state: bool) -> None:
    """A wall-time budget and a state kept at the end need a checkpoint folder (refused
    before any compute)."""
    if checkpoint_path is None and stop_after_seconds is not None:
        raise ValueError("a wall-time budget needs a checkpoint path")
    if checkpoint_path is None and keep_state:
        raise ValueError("keeping the state at the end needs a checkpoint path")


def _finish(saver: Checkpoint, job: Job, states: list, results: dict, pieces: list,
            keep_state: bool, worked: bool) -> dict:
    """The finished job's outcome; its state saved at the last row (``keep_state``: held
    until the other critics of its seeds finish; a state held there already is left as it
    is, byte for byte, so that a publication holding it sees nothing new) or removed."""
    if keep_state:
        if worked:
            saver.save(states, len(job.iterations), results, pieces)
    else:
        saver.remove()
    return _outcome(job, results, pieces)


def check_consistent_state(compiled: CompiledGame, plan: Plan, identity: dict, folder) -> dict:
    """:func:`check_state`, and the state checked against itself: every configuration's
    policy table is what its policy weights give (within :data:`TABLE_TOLERANCE` and the
    bound float32 rounding allows: :func:`neurd.neural.train.policy_table_rounding`, so a
    state saved on one processor passes on another); the
    NashConv of its last measured row is what those tables give (within
    :data:`NASH_CONV_TOLERANCE`), and the segment's policy updates are that row's spacing; each
    piece's seconds and iterations agree with its recorded rate, a rate no machine reaches
    refused.  Raise :class:`StateError` naming the folder and the first that is not so.

    What a forged state can still do: weights, tables and a last row made consistent with one
    another (a state another run could have reached, or a row copied from the one before where
    the rows are evenly spaced) pass; only running the block again from its start (a replay,
    on a GPU at the paper's length) tells them from the run's own."""
    info, states, results = restore_strictly(compiled, plan, identity, folder)
    if info["next_row"] == 0:
        return info  # nothing measured yet: nothing to hold against
    job, _, scratch = _setup(compiled, plan)
    spec, row = plan.spec, info["next_row"] - 1
    gone = diverged(results, row + 1)  # diverged configurations: zeros, measured no more

    def table_gaps(state):
        """``[N, 2]``: per configuration, at the information state where its table is
        furthest beyond what rounding allows, the gap and what rounding allows there."""
        given = jax.vmap(partial(train.policy_table, spec, job.game))(state.policy)
        gaps = jnp.max(jnp.abs(given - state.table), axis=-1)
        allowed = TABLE_TOLERANCE + jax.vmap(partial(train.policy_table_rounding, spec,
                                                     job.game))(state.policy)
        worst = jnp.argmax(jnp.where(jnp.isnan(gaps), jnp.inf, gaps - allowed), axis=1)
        pick = partial(jnp.take_along_axis, indices=worst[:, None], axis=1)
        return jnp.concatenate([pick(gaps), pick(allowed)], axis=1)

    found = per_configuration(states, spec.algorithms, table_gaps)
    gaps, allowed = np.where(gone, 0.0, found[:, 0]), found[:, 1]
    if not np.all(gaps <= allowed):
        worst = int(np.argmax(np.where(np.isnan(gaps), np.inf, gaps - allowed)))
        raise StateError(f"{folder}: configuration {plan.configurations[worst]}'s policy table "
                         f"is not what its weights give (they differ by {gaps[worst]:.3g}, "
                         f"where float32 rounding allows {allowed[worst]:.3g})")
    spacing = int(job.iterations[row]) - (int(job.iterations[row - 1]) if row else 0)
    updates = state_field(states, "updates", spec.algorithms)[~gone]
    if row and not np.all(updates == spacing // spec.critic_updates):
        raise StateError(f"{folder}: its learners made {int(updates.max())} policy updates in "
                         f"the last segment, row {row}'s spacing gives "
                         f"{spacing // spec.critic_updates}")
    measure_row(job, states, scratch, row, 1.0 if int(job.phases[row]) % 2 == 1 else -1.0,
                 gone)
    gap = float(np.max(np.abs(scratch["nash_conv"][row] - results["nash_conv"][row])[~gone],
                       initial=0.0))
    if not gap <= NASH_CONV_TOLERANCE:
        raise StateError(f"{folder}: row {row}'s NashConv is not what its policy tables give "
                         f"(they differ by {gap:.3g})")
    _check_pieces(folder, info["pieces"], job.configs)
    return info


def _check_pieces(folder, pieces: list, configs: int) -> None:
    for k, piece in enumerate(pieces):
        iterations, seconds = int(piece["iterations"]), float(piece["seconds"])
        rate = piece.get("configuration_iterations_per_second")
        if iterations and not seconds > 0:
            raise StateError(f"{folder}: piece {k} did {iterations} iterations in {seconds} s")
        if not iterations:
            continue
        real = configs * iterations / seconds
        if rate is None or abs(float(rate) - real) > 0.01 * real + 0.1:
            raise StateError(f"{folder}: piece {k} records {rate} configuration-iterations a "
                             f"second, its iterations and seconds give {real:.1f}")
        if real > MAX_CONFIGURATION_ITERATIONS_PER_SECOND:
            raise StateError(f"{folder}: piece {k} would have run {real:.3g} "
                             "configuration-iterations a second: no machine does")



def replay(compiled: CompiledGame, plan: Plan, rows: int) -> np.ndarray:
    """``[rows, C]``: the NashConv of every configuration at the first ``rows`` checkpoint rows
    of ``plan``, computed again from the start (no state saved or read): what a saved state's
    curves up to its row must be, on the device and cycle variant that made them."""
    job, states, results = _setup(compiled, plan)
    if not 0 < rows <= len(job.iterations):
        raise ValueError(f"rows must be in 1..{len(job.iterations)}, got {rows}")
    done, gone = 0, np.zeros(job.configs, bool)
    for row in range(rows):
        target, phase = int(job.iterations[row]), int(job.phases[row])
        sign = 1.0 if phase % 2 == 1 else -1.0
        if target > done:
            states = _advance(job, states, done, target, sign)
            done = target
        gone = measure_row(job, states, results, row, sign, gone)
        states = zero_diverged(states, job.plan.spec.algorithms, gone)
    return results["nash_conv"][:rows]
