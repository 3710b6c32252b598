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
from collections.abc import Sequence

import numpy as np
import pyspiel

from neurd.games import openspiel_game
from neurd.names import CFR_PLUS, CFR_RM, REFERENCE_SOLVERS, check_name
from neurd.progress import Progress

log = logging.getLogger(__name__)

SOLVERS = {CFR_RM: pyspiel.CFRSolver, CFR_PLUS: pyspiel.CFRPlusSolver}


def solver_nash_conv(game_string: str, solver: str, checkpoints: Sequence[int]) -> np.ndarray:
    """``[K]`` NashConv of the solver's average policy after each checkpoint iteration."""
    from neurd.tabular.cfr import checkpoint_segments

    segments = checkpoint_segments(checkpoints)
    cls = SOLVERS[check_name(solver, REFERENCE_SOLVERS, "reference solver")]
    game = openspiel_game(game_string)
    start = time.perf_counter()
    instance = cls(game)
    log.info("%s on %s: solver set up in %.2fs", solver, game, time.perf_counter() - start)
    values, done = [], 0
    progress = Progress(f"{solver} on {game}", int(np.sum(segments)))
    for length in segments:
        for _ in range(int(length)):
            instance.evaluate_and_update_policy()
        done += int(length)
        values.append(pyspiel.nash_conv(game, instance.average_policy()))
        progress.update(done, f"NashConv {values[-1]:.6g}")
    return np.asarray(values)
