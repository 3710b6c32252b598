"""OpenSpiel's own CFR solvers: the independent check of the engine's yardsticks.

``pyspiel.CFRSolver`` is CFR with regret matching (Zinkevich et al. 2008),
alternating updates and the reach-weighted average policy;
``pyspiel.CFRPlusSolver`` is CFR+ (Tammelin 2014: regret matching+,
alternating updates, linearly weighted average).  Both are OpenSpiel's C++
implementations and their NashConv is ``pyspiel.nash_conv``'s, so these
curves owe nothing to this package's engine.  Figure 4b draws the engine's
reproduction of both (:mod:`neurd.tabular.solvers`, 40-100x faster); the
pipeline runs the solvers here over a prefix of the run and stops if the two
part (:func:`neurd.pipeline.tabular.openspiel_check`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np
import pyspiel

from neurd.games import CompiledGame, openspiel_game
from neurd.names import CFR_PLUS, CFR_RM, REFERENCE_SOLVERS, check_name
from neurd.progress import Progress
from neurd.tabular.cfr import checkpoint_segments
from neurd.tabular.policies import from_openspiel

log = logging.getLogger(__name__)

SOLVERS = {CFR_RM: pyspiel.CFRSolver, CFR_PLUS: pyspiel.CFRPlusSolver}


def solver_nash_conv(game_string: str, solver: str, checkpoints: Sequence[int],
                     compiled: CompiledGame | None = None):
    """``[K]`` NashConv of the solver's average policy after each checkpoint iteration.

    With ``compiled`` (the same game, compiled), also the average policies
    ``[K, I, A]`` in its layout: returns ``(nash_conv, policies)``.
    """
    segments = checkpoint_segments(checkpoints)
    cls = SOLVERS[check_name(solver, REFERENCE_SOLVERS, "reference solver")]
    game = openspiel_game(game_string)
    start = time.perf_counter()
    instance = cls(game)
    log.info("%s on %s: solver set up in %.2fs", solver, game, time.perf_counter() - start)
    values, policies, done = [], [], 0
    progress = Progress(f"{solver} on {game}", int(np.sum(segments)))
    for length in segments:
        for _ in range(int(length)):
            instance.evaluate_and_update_policy()
        done += int(length)
        average = instance.average_policy()
        values.append(pyspiel.nash_conv(game, average))
        if compiled is not None:
            policies.append(from_openspiel(compiled, average))
        progress.update(done, f"NashConv {values[-1]:.6g}")
    if compiled is None:
        return np.asarray(values)
    return np.asarray(values), np.stack(policies)
