"""OpenSpiel's own CFR solvers: reference curves and oracles, independent of JAX.

``pyspiel.CFRSolver`` is CFR with regret matching (Zinkevich et al. 2008),
alternating updates and the reach-weighted average policy;
``pyspiel.CFRPlusSolver`` is CFR+ (Tammelin 2014: regret matching+,
alternating updates, linearly weighted average).  Both are OpenSpiel's C++
implementations; their NashConv is computed by ``pyspiel.nash_conv``, so a
reference curve owes nothing to this package's engine.
"""

from __future__ import annotations

import logging
import time
from typing import Sequence

import numpy as np
import pyspiel

from neurd.games import load_game

log = logging.getLogger(__name__)

SOLVERS = {"cfr_rm": pyspiel.CFRSolver, "cfr_plus": pyspiel.CFRPlusSolver}


def solver_class(name: str):
    try:
        return SOLVERS[name]
    except KeyError:
        raise ValueError(f"unknown reference solver {name!r}; expected one of "
                         f"{sorted(SOLVERS)}") from None


def reference_curve(game_string: str, solver: str, checkpoints: Sequence[int]) -> np.ndarray:
    """``[K]`` NashConv of the solver's average policy after each checkpoint iteration."""
    from neurd.tabular.cfr import checkpoint_segments

    segments = checkpoint_segments(checkpoints)
    cls = solver_class(solver)
    game = load_game(game_string)
    start = time.perf_counter()
    instance = cls(game)
    log.info("%s on %s: solver set up in %.2fs", solver, game, time.perf_counter() - start)
    values, done = [], 0
    for length in segments:
        for _ in range(int(length)):
            instance.evaluate_and_update_policy()
        done += int(length)
        values.append(pyspiel.nash_conv(game, instance.average_policy()))
        log.info("%s iteration %d (%.1fs): NashConv %.6g", solver, done,
                 time.perf_counter() - start, values[-1])
    return np.asarray(values)
