"""What a saved job state must hold to be resumed: its results and its record of pieces, as
the job holds them before a checkpoint row (:func:`check_resumable`), or :class:`Unfit`
saying why not.  The checkpoint folder (:mod:`neurd.neural.checkpoint`) drops a state that
does not fit, or refuses it where it must be used as it is.
"""

from __future__ import annotations

import numpy as np

from neurd.neural.measurement import GROWTH, MEASURED
from neurd.neural.plan import Plan
from neurd.neural.runs import PIECE_KEYS


class Unfit(ValueError):
    """Why a checkpoint does not fit the job; ``array``: the stored array at fault, if one."""

    def __init__(self, reason: str, array: str | None = None):
        super().__init__(reason)
        self.array = array


def check_resumable(plan: Plan, iterations: np.ndarray, phases: np.ndarray, configs: int,
                    legal_count: int, next_row: int, results: dict, pieces: list) -> None:
    """Raise :class:`Unfit` unless ``results`` and ``pieces`` are what
    :func:`~neurd.neural.experiment.run` holds before checkpoint row ``next_row`` of the grid
    ``iterations``/``phases``.

    The per-checkpoint arrays are float64 ``[K, C]``: finite in the rows measured
    (``row < next_row``) while the configuration lives, NaN in the others, in every row for
    the exact critic's error, and at iteration 0 for ``blocked`` and ``critic_loss``; a
    configuration that diverged (``run`` records it so) is NaN in every array from the
    first row its NashConv is NaN; ``phase_tables`` is float32 ``[P, C, L]``, one per phase
    ended before ``next_row``, finite where the configuration lived at the phase's end and
    NaN where not; ``logits`` is float64 ``[K, len(plan.logged), L]``, finite in the rows
    measured while the configuration lived and NaN in the others; each piece a record with
    the keys ``run`` writes (the pipeline reads them).
    """
    rows = len(iterations)
    if not 0 <= next_row <= rows:
        raise Unfit(f"meta.json: next_row {next_row} is off the checkpoint grid (rows "
                    f"0..{rows})")
    names = {*MEASURED, *GROWTH, "phase_tables", "logits"}
    if set(results) != names:
        raise Unfit(f"meta.json: the results are {sorted(results)}, the job's are "
                    f"{sorted(names)}")
    measured = np.arange(rows) < next_row
    lives = _lives(results, measured, configs)
    _check_measured(plan, iterations, results, measured, lives, configs)
    _check_growth(results, measured, lives, configs)
    _check_phase_tables(plan, iterations, phases, results, measured, lives, legal_count)
    logits, shape = results["logits"], (rows, len(plan.logged), legal_count)
    if logits.dtype != np.float64 or logits.shape != shape:
        raise Unfit(f"is {logits.dtype}{list(logits.shape)}, the job's is "
                    f"float64{list(shape)}", "result_logits")
    logged = np.broadcast_to(lives[:, np.asarray(plan.logged, np.int64)][:, :, None], shape)
    if not (np.all(np.isfinite(logits[logged])) and np.all(np.isnan(logits[~logged]))):
        raise Unfit("is not finite exactly in the rows the job has measured (while the "
                    "configuration had not diverged)", "result_logits")
    _check_pieces(pieces, int(iterations[next_row - 1]) if next_row else 0, next_row)


def _lives(results: dict, measured: np.ndarray, configs: int) -> np.ndarray:
    """``[K, C]``: the rows measured while each configuration lived (before the first row its
    NashConv is NaN in)."""
    rows = len(measured)
    nash_conv = results["nash_conv"]
    if nash_conv.shape == (rows, configs):  # the first row each configuration is NaN in
        lost = np.isnan(nash_conv) & measured[:, None]
        first = np.where(lost.any(axis=0), np.argmax(lost, axis=0), rows)
    else:
        first = np.full(configs, rows)
    return measured[:, None] & (np.arange(rows)[:, None] < first[None, :])


def _check_measured(plan, iterations, results, measured, lives, configs) -> None:
    """The per-checkpoint arrays: float64 ``[K, C]``, finite exactly where written."""
    rows = len(iterations)
    entropy = results.get("policy_entropy")  # measured in every row while a configuration lives
    if (isinstance(entropy, np.ndarray) and entropy.shape == (rows, configs)
            and np.any(np.isfinite(entropy[measured[:, None] & ~lives]))):
        raise Unfit("holds NaN where the configuration's other measurements hold values (a "
                    "configuration that diverged is NaN in every one)", "result_nash_conv")
    for name in MEASURED:
        value, array = results[name], f"result_{name}"
        if value.dtype != np.float64 or value.shape != (rows, configs):
            raise Unfit(f"is {value.dtype}{list(value.shape)}, the job's is "
                        f"float64{[rows, configs]}", array)
        if name in ("blocked", "critic_loss"):
            written = lives & (iterations > 0)[:, None]
        elif name == "critic_rmse" and plan.spec.critic == "exact":
            written = np.zeros_like(lives)
        else:
            written = lives
        if not np.all(np.isfinite(value[written])):
            raise Unfit("holds non-finite values in rows the job has measured (of a "
                        "configuration that had not diverged)", array)
        if not np.all(np.isnan(value[~written])):
            raise Unfit("holds values where the job has written none", array)


def _check_growth(results, measured, lives, configs) -> None:
    """The :data:`GROWTH` arrays: float64 ``[K, C]``, finite while a configuration lives,
    as measured (finite or not) at the row it diverged at, NaN after it and where not
    measured."""
    rows = len(measured)
    diverged_row = np.zeros_like(lives)
    ends = lives.sum(axis=0)  # a configuration's first row not lived
    for c in np.flatnonzero(ends < measured.sum()):
        diverged_row[ends[c], c] = True
    for name in GROWTH:
        value, array = results[name], f"result_{name}"
        if value.dtype != np.float64 or value.shape != (rows, configs):
            raise Unfit(f"is {value.dtype}{list(value.shape)}, the job's is "
                        f"float64{[rows, configs]}", array)
        if not np.all(np.isfinite(value[lives])):
            raise Unfit("holds non-finite values in rows the job has measured (of a "
                        "configuration that had not diverged)", array)
        if not np.all(np.isnan(value[~lives & ~diverged_row])):
            raise Unfit("holds values where the job has written none", array)


def _check_phase_tables(plan, iterations, phases, results, measured, lives, legal_count
                        ) -> None:
    """``phase_tables``: float32 ``[P, C, L]``, finite exactly where a configuration lived
    at a phase's end."""
    configs = lives.shape[1]
    ends = np.flatnonzero(measured & (iterations == phases * plan.phase_iterations))
    tables = results["phase_tables"]
    if tables.dtype != np.float32 or tables.shape != (len(ends), configs, legal_count):
        raise Unfit(f"is {tables.dtype}{list(tables.shape)}, the job's is "
                    f"float32{[len(ends), configs, legal_count]}", "result_phase_tables")
    kept = np.broadcast_to(lives[ends][:, :, None], tables.shape)  # lived at the phase's end
    if not (np.all(np.isfinite(tables[kept])) and np.all(np.isnan(tables[~kept]))):
        raise Unfit("is not finite exactly where a configuration lived at a phase's end",
                    "result_phase_tables")


def _check_pieces(pieces: list, done: int, next_row: int) -> None:
    """Each piece a record with :data:`PIECE_KEYS`, the pieces following one another up to
    iteration ``done`` (that of the last row measured)."""
    reached = 0
    for i, piece in enumerate(pieces):
        missing = [k for k in PIECE_KEYS if k not in piece]
        if missing:
            raise Unfit(f"meta.json: piece {i} lacks {', '.join(missing)}")
        start, count = piece["first_iteration"], piece["iterations"]
        if not (type(start) is int and type(count) is int and start == reached and count >= 0):
            raise Unfit(f"meta.json: piece {i} starts at iteration {start!r} after "
                        f"{reached} iterations were done (pieces follow one another)")
        reached += count
    if pieces and reached != done:
        raise Unfit(f"meta.json: the pieces did {reached} iterations, the curves measured up to "
                    f"iteration {done} (next_row {next_row})")
