"""What a seed block costs: seconds, from a processor's measured throughput, and bytes in the
repository's history.

:class:`Throughput` holds measured rows (ms per learning cycle of each game and critic at N
configurations with P jobs sharing the device, the checkpoint evaluation's and the start-up's
seconds) and predicts a block's seconds from them (:meth:`Throughput.predict`); :class:`Bytes`
is what a finished block and a block-in-progress state add to the repository per seed.  Both
schedules of allocations price their blocks here: the GPU's (:mod:`neurd.publication.gpu_schedule`)
and the CPU's (:mod:`neurd.publication.cpu_schedule`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from neurd.neural.plan import checkpoint_grid
from neurd.neural.runs import configurations

# A job's predicted time is start-up + overhead + SAFETY x (cycles x ms + checkpoints x
# evaluation): the throughput was measured on short segments, the jobs run for minutes.
# Start-up is what compiling and the first segment took in a fresh process (measured with
# the other programs compiling beside it: an upper bound); the overhead covers the rest a job
# does once (imports, the exact evaluation's compilation, writing the tables or the state).
SAFETY = 1.15
JOB_OVERHEAD_SECONDS = 45.0
DEFAULT_STARTUP_SECONDS = 60.0


def cycles(cfg: Mapping, game: str) -> int:
    """Learning cycles of one run of ``game`` (every phase)."""
    return int(cfg["phases"]) * int(cfg["phase_iterations"][game]) // int(
        cfg["critic_updates_per_policy_update"])


def checkpoints(cfg: Mapping, game: str) -> int:
    """Checkpoint evaluations of one run of ``game``."""
    return len(checkpoint_grid(int(cfg["phase_iterations"][game]), int(cfg["phases"]),
                               int(cfg["checkpoints"]["geometric"]),
                               int(cfg["checkpoints"]["linear"]),
                               int(cfg["critic_updates_per_policy_update"]))[0])


def _interpolate(points: list[tuple[float, float]], n: float) -> float | None:
    """Linear in N between measured points; the smallest point's value below it (fewer
    configurations take no longer); None above the largest (not measured: not planned)."""
    if not points:
        return None
    points = sorted(points)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    if n > xs[-1]:
        return None
    return float(np.interp(n, xs, ys))


class Throughput:
    """Measured rows: ``game, critic, configurations, parallel, ms_per_cycle`` and, where
    timed, ``checkpoint_seconds`` and ``startup_seconds``."""

    def __init__(self, rows: Sequence[Mapping]):
        """Rows of this code with a finite positive time; where several jobs timed the same
        cell at once (``parallel`` > 1, a row each), the slowest is kept."""
        kept: dict[tuple, dict] = {}
        for row in rows:
            ms = float(row.get("ms_per_cycle", math.nan))
            if row.get("code", "this") != "this" or not (math.isfinite(ms) and ms > 0):
                continue
            key = (row["game"], row.get("critic", "learned"), int(row["configurations"]),
                   int(row["parallel"]))
            if key not in kept or ms > float(kept[key]["ms_per_cycle"]):
                kept[key] = dict(row)
        self.rows = list(kept.values())
        self._cache: dict[tuple, float | None] = {}

    def parallels(self) -> list[int]:
        return sorted({int(r["parallel"]) for r in self.rows})

    def _points(self, game, critic, parallel, key):
        return [(float(r["configurations"]), float(r[key])) for r in self.rows
                if r["game"] == game and r.get("critic", "learned") == critic
                and int(r["parallel"]) == parallel and r.get(key) is not None
                and math.isfinite(float(r[key]))]

    def startup(self, game: str) -> float:
        """Seconds a job of ``game`` takes before its first cycle, and to finish: start-up
        (the largest measured) and the fixed overhead."""
        if ("startup", game) not in self._cache:
            startups = [float(r["startup_seconds"]) for r in self.rows if r["game"] == game
                        and r.get("startup_seconds") is not None]
            self._cache["startup", game] = ((max(startups) if startups
                                             else DEFAULT_STARTUP_SECONDS) + JOB_OVERHEAD_SECONDS)
        return self._cache["startup", game]

    def work(self, cfg: Mapping, game: str, critic: str, seeds: int, parallel: int
             ) -> float | None:
        """Seconds of learning and checkpoint evaluation of a whole block of ``seeds`` seeds
        with ``parallel`` jobs on the GPU, with the safety factor (None: not measured)."""
        key = ("work", id(cfg), game, critic, seeds, parallel)
        if key not in self._cache:
            self._cache[key] = self._work(cfg, game, critic, seeds, parallel)
        return self._cache[key]

    def _work(self, cfg, game, critic, seeds, parallel):
        n = configurations(cfg, seeds)
        ms = _interpolate(self._points(game, critic, parallel, "ms_per_cycle"), n)
        if ms is None:
            return None
        evaluation = _interpolate(self._points(game, critic, 1, "checkpoint_seconds"), n)
        if evaluation is None:
            evaluation = _interpolate(self._points(game, "learned", 1, "checkpoint_seconds"), n)
        return SAFETY * (cycles(cfg, game) * ms / 1e3
                         + checkpoints(cfg, game) * (evaluation or 0.0) * parallel)

    def predict(self, cfg: Mapping, game: str, critic: str, seeds: int, parallel: int
                ) -> float | None:
        """Seconds a whole block of ``seeds`` seeds takes in one go with ``parallel`` jobs on
        the GPU (None: not measured there)."""
        work = self.work(cfg, game, critic, seeds, parallel)
        return None if work is None else self.startup(game) + work


@dataclass(frozen=True)
class Bytes:
    """What the repository's history gains, per seed of a game: a finished block's files
    (``block``, once) and a block-in-progress state (``state``, each time one is committed)."""

    block: Mapping[str, float]
    state: Mapping[str, float]
