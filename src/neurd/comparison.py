"""Neural NeuRD vs SPG on any game, from Python, in one call: :func:`compare`.

The pipeline's Fig 6 jobs are driven by a config section (``neural``) and its
snapshot; :func:`compare` runs the same learning program
(:func:`neurd.neural.experiment.run` on an :class:`~neurd.neural.experiment.Plan`)
on one game from a handful of arguments, every other setting at the config's
default, and returns the tables the pipeline writes for a game.  With the same
settings it gives the pipeline's numbers (the same plan, the same seeds), so a
study started here can be scaled up as a config file (``docs/neural.md``).

Runs are float32 networks with exact float64 NashConv at checkpoints, as in the
pipeline; progress (rate, time left) is logged on the ``neurd`` logger at INFO.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from neurd import games
from neurd.games import CompiledGame, GameError
from neurd.names import LEARNERS
from neurd.pipeline import neural as stage

# The neural section's learning and table keys, at their defaults (those of
# workflow/schemas/neural.schema.yaml; tests/test_neural_compare.py keeps them equal):
# what compare() takes as **settings.
DEFAULTS: dict[str, object] = {
    "algorithms": list(LEARNERS),
    "hidden_sizes": [128],
    "critic_batch": 4,
    "policy_batch": 256,
    "critic_updates_per_policy_update": 4,
    "policy_learning_rate": 0.002,
    "critic_learning_rate": 0.01,
    "optimizer": "sgd",
    "matmul_precision": "float32",
    "neurd_logits": "raw",
    "loss_normalisation": "player_mean",
    "networks": "shared",
    "beta": 2.0,
    "seeds_per_batch": 5,
    "final_checkpoints": 3,
    "bootstrap": {"resamples": 1000, "confidence": 0.95, "method": "percentile"},
}
CRITICS = ("learned", "exact")


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare` returns: the game's tables as the pipeline's ``neural-table``
    step writes them (columns: :data:`neurd.pipeline.neural.TABLES`, ``results/README.md``),
    and what made them."""

    nashconv: pd.DataFrame
    """One row per run (algorithm, entropy, seed) and checkpoint: the exact NashConv of the
    current network policy in the phase's game (Fig 6 a-c)."""
    summary: pd.DataFrame
    """One row per run: ``final_nash_conv`` (mean of the last checkpoints) and
    ``average_nash_conv`` (area under the curve over its length; Fig 6 d-f)."""
    nashconv_ci: pd.DataFrame
    """Mean NashConv over seeds and its bootstrap confidence interval, per algorithm, entropy
    level and checkpoint."""
    diagnostics: pd.DataFrame
    """``nashconv`` with the critic's error, the share of pushes NeuRD's threshold blocked,
    the critic's loss, the policy's entropy and its share of logits at the threshold."""
    policies: pd.DataFrame
    """Every run's policy at the end of each phase, per information state and legal action."""
    uniform_nash_conv: np.ndarray
    """``[phases]``: the uniform policy's NashConv in each phase's game (the scale of the
    curves; the payoff is negated in even phases)."""
    game: CompiledGame
    config: dict
    """The ``neural`` config section (and ``seed``) the tables are made from, one game named
    ``name``: a config file with this section gives the same tables through the pipeline."""

    def table(self) -> pd.DataFrame:
        """Mean final and average NashConv over seeds, per entropy level (rows) and algorithm
        (columns): the numbers Fig 6 (d-f) draws and its audit compares."""
        means = self.summary.groupby(["entropy", "algorithm"])[
            ["final_nash_conv", "average_nash_conv"]].mean()
        return means.unstack("algorithm")


def compare(game: str | CompiledGame, *, iterations: int = 1000, phases: int = 3,
            seeds: int = 2, entropies: Sequence[float] = (0.0, 0.1), seed: int = 0,
            critic: str = "learned", checkpoints: int = 20, geometric: int = 10,
            name: str = "game", **settings) -> Comparison:
    """NeuRD vs SPG with neural networks on ``game``: the payoff negated every phase (Fig 6).

    ``game``: an OpenSpiel game string (two players, zero-sum, perfect recall, with an
    information-state tensor; simultaneous moves are made turn-based) or a compiled game
    (:func:`neurd.engine.compile_game`).  ``iterations``: learning iterations (critic
    updates) per phase, a multiple of ``critic_updates_per_policy_update`` (4);
    ``phases``: phases of the reward (the payoff is negated in even ones); ``seeds``: run
    seeds per algorithm and entropy level; ``entropies``: entropy regularisation levels;
    ``seed``: the global seed every random draw derives from; ``critic``: ``"learned"``
    (Algorithm 1's Q-network) or ``"exact"`` (the exact regularised q of the current
    policy in its place); ``checkpoints`` linear and ``geometric`` NashConv points per
    phase (``neural.checkpoints``); ``name``: the game's short name in the tables.

    ``settings``: any learning key of the config section ``neural`` (:data:`DEFAULTS`:
    ``hidden_sizes``, ``policy_learning_rate``, ``critic_batch``, ``neurd_logits``, ...);
    the others keep their defaults, the paper's where it states them.

    Bad arguments raise :class:`ValueError` naming the argument; a game the engine or the
    networks cannot take raises :class:`neurd.games.GameError` with the reason.
    """
    from neurd.neural import experiment  # puts off JAX

    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"compare: unknown setting {unknown[0]!r}; the settings are the "
                         f"config section neural's {sorted(DEFAULTS)}")
    cfg = _section(name, iterations, phases, seeds, entropies, seed, critic, checkpoints,
                   geometric, settings)
    if isinstance(game, CompiledGame):
        compiled = game
    elif isinstance(game, str):
        compiled = games.compile_game(game)
    else:
        raise TypeError(f"compare: game must be an OpenSpiel game string or a CompiledGame, "
                        f"got {type(game).__name__}")
    if compiled.infostate_tensor.shape[1] == 0:
        raise GameError(f"game {compiled.game_string!r} provides no information-state tensor: "
                        "the networks have no input")
    cfg["game_strings"] = {name: compiled.game_string}
    plan = stage.plan(cfg, name, critic, 0)
    results = experiment.run(compiled, plan)
    uniform = stage.uniform_nash_conv(compiled, cfg["phases"])
    tables = stage.game_tables(
        cfg, stage.run_table(cfg, name, critic, results, plan.configurations),
        stage.policy_table(cfg, name, compiled, results, plan.configurations), uniform)
    return Comparison(**tables, uniform_nash_conv=uniform, game=compiled, config=cfg)


def _section(name, iterations, phases, seeds, entropies, seed, critic, checkpoints,
             geometric, settings: Mapping) -> dict:
    """The ``neural`` section (plus ``seed``) of one game's run; each argument checked."""
    def integer(key, value, low, high=10**9):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not (
                low <= value <= high):
            raise ValueError(f"compare: {key} must be an integer in [{low}, {high}], "
                             f"got {value!r}")
        return int(value)

    if not (isinstance(name, str) and re.fullmatch(r"[a-z][a-z0-9_]{0,31}", name)):
        raise ValueError(f"compare: name must be a short lower-case name ([a-z][a-z0-9_]*), "
                         f"got {name!r}")
    cfg = {**copy.deepcopy(DEFAULTS), **copy.deepcopy(dict(settings))}
    ratio = integer("critic_updates_per_policy_update",
                    cfg["critic_updates_per_policy_update"], 1, 1000)
    if integer("iterations", iterations, ratio) % ratio:
        raise ValueError(f"compare: iterations must be a multiple of "
                         f"critic_updates_per_policy_update ({ratio}), got {iterations}")
    entropies = [float(e) for e in entropies]
    if not entropies or len(set(entropies)) != len(entropies) or not all(
            np.isfinite(e) and e >= 0 for e in entropies):
        raise ValueError(f"compare: entropies must be distinct finite numbers >= 0, got "
                         f"{entropies}")
    if critic not in CRITICS:
        raise ValueError(f"compare: critic must be one of {CRITICS}, got {critic!r}")
    algorithms = list(cfg["algorithms"])
    if not algorithms or len(set(algorithms)) != len(algorithms) or not set(algorithms) <= set(
            LEARNERS):
        raise ValueError(f"compare: algorithms must be distinct names of {list(LEARNERS)}, "
                         f"got {algorithms}")
    seeds = integer("seeds", seeds, 2, 10000)
    per_batch = integer("seeds_per_batch", cfg["seeds_per_batch"], 1, 10000)
    final = integer("final_checkpoints", cfg["final_checkpoints"], 1, 10000)
    linear = integer("checkpoints", checkpoints, max(1, final))
    cfg.update(
        games=[name], entropies=entropies, seeds=seeds, phases=integer("phases", phases, 1, 100),
        seed=integer("seed", seed, 0, 2**32 - 1), critic=critic, algorithms=algorithms,
        phase_iterations={name: int(iterations)}, exact_critic_games=[],
        checkpoints={"geometric": integer("geometric", geometric, 0, 10000), "linear": linear},
        # every seed in one job; the batch (seeds_per_batch), not the job, fixes the numbers
        seeds_per_job=-(-seeds // per_batch) * per_batch)
    return cfg
