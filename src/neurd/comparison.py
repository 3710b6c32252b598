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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from neurd import games, schema
from neurd.config import ConfigError
from neurd.figures import fig6
from neurd.games import CompiledGame, GameError
from neurd.limits import size_of
from neurd.machine import available_memory_bytes
from neurd.neural import results as neural_tables
from neurd.neural import runs
from neurd.neural.settings import default as settings_default
from neurd.neural.settings import learning_defaults, optional
from neurd.pipeline import neural as stage
from neurd.pipeline import neural_resources

# The neural section's learning and table keys, at their defaults (those of
# workflow/schemas/neural.schema.yaml, where each is declared once: neurd.neural.settings):
# what compare() takes as **settings.
DEFAULTS: dict[str, object] = learning_defaults()
CRITICS = ("learned", "exact")


@dataclass(frozen=True)
class Comparison:
    """What :func:`compare` returns: the game's tables as the pipeline's ``neural-table``
    step writes them (columns: :data:`neurd.neural.results.TABLES`, ``results/README.md``),
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

    def figure(self, title: str | None = None):
        """A Fig 6-style figure of this comparison (a matplotlib figure: ``.savefig(path)``
        keeps it): per game, each algorithm at its best entropy level (the lowest mean final
        NashConv), mean over seeds with a bootstrap band from 5 seeds on (each seed below);
        beneath, every run's average NashConv, boxes per algorithm and dots per entropy
        level.  Every algorithm of the run is drawn, with the registry's labels
        (:mod:`neurd.neural.algorithms`)."""
        game = self.config["games"][0]
        return fig6.plot(self.nashconv, self.nashconv_ci, self.summary, self.config,
                         title or f"compare({game!r}): {', '.join(self.config['algorithms'])}",
                         "compare()")

    def table(self) -> pd.DataFrame:
        """Mean final and average NashConv over seeds, per entropy level (rows) and algorithm
        (columns): the numbers Fig 6 (d-f) draws and its audit compares."""
        means = self.summary.groupby(["entropy", "algorithm"])[
            ["final_nash_conv", "average_nash_conv"]].mean()
        return means.unstack("algorithm")


def compare(game: str | CompiledGame, *, iterations: int = 1000, phases: int = 3,
            seeds: int = 2, entropies: Sequence[float] = (0.0, 0.1), seed: int = 0,
            critic: str = "learned", checkpoints: int = 20, geometric: int = 10,
            name: str = "game", max_hours: float | None = 2.0, **settings) -> Comparison:
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

    ``max_hours``: the longest the run may take (None: no bound).  A run estimated longer is
    refused: before compiling, where the stage's estimate for two CPU cores passes it tenfold,
    and otherwise once its first segments give its pace here, with the estimate in hours; a
    run whose memory (the stage's estimate of a job) passes 80% of what the machine has
    available is refused before compiling, naming the estimate.

    ``settings``: any learning key of the config section ``neural`` (:data:`DEFAULTS`:
    ``hidden_sizes``, ``policy_learning_rate``, ``critic_batch``, ``neurd_logits``, ...);
    the others keep their defaults, the paper's where it states them.

    Bad arguments raise :class:`~neurd.config.ConfigError` (a :class:`ValueError`) naming the
    argument and its config key, as the config's schema words it, before any compilation;
    a game the engine or the
    networks cannot take raises :class:`neurd.games.GameError` with the reason.
    """
    from neurd.neural import experiment  # puts off JAX

    unknown = sorted(set(settings) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"compare: unknown setting {unknown[0]!r}; the settings are the "
                         f"config section neural's {sorted(DEFAULTS)}")
    cfg = neural_section(name, iterations, phases, seeds, entropies, seed, critic, checkpoints,
                   geometric, settings)
    if max_hours is not None and not (isinstance(max_hours, (int, float))
                                      and not isinstance(max_hours, bool)
                                      and 0 < max_hours < float("inf")):
        raise ConfigError(f"compare: argument max_hours must be a positive number of hours or "
                          f"None, got {max_hours!r}", "max_hours")
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
    _check_size(cfg, name, compiled, max_hours)
    plan = runs.plan(cfg, name, critic, 0)
    try:
        results = experiment.run(compiled, plan, max_seconds=None if max_hours is None
                                 else 3600.0 * max_hours)
    except experiment.TooLong as error:
        raise ConfigError(f"compare: argument max_hours: {error}; pass a larger max_hours (or "
                          "None) to run it anyway, or fewer iterations", "max_hours") from None
    uniform = neural_tables.uniform_nash_conv(compiled, cfg["phases"])
    tables = neural_tables.game_tables(
        cfg, neural_tables.run_table(cfg, name, critic, results, plan.configurations),
        neural_tables.policy_table(cfg, name, compiled, results, plan.configurations), uniform)
    return Comparison(**tables, uniform_nash_conv=uniform, game=compiled, config=cfg)


def _check_size(cfg: Mapping, name: str, compiled: CompiledGame, max_hours) -> None:
    """Refuse, before compiling, a run the stage's estimates put far past ``max_hours`` on two
    CPU cores, or past 80% of the memory the machine has available."""
    size = size_of(compiled)
    hours = neural_resources.cpu_hours(cfg, {name: size})[name]
    if max_hours is not None and hours > 10.0 * max_hours:
        raise ConfigError(f"compare: argument max_hours: the run would take about {hours:.1f} "
                          f"hours on two CPU cores (the stage's estimate from measured rates), "
                          f"more than the {max_hours} allowed; pass a larger max_hours (or "
                          "None) to run it anyway, or fewer iterations", "max_hours")
    available = available_memory_bytes()
    need = neural_resources.job_memory_bytes(dict(cfg, seeds_per_job=cfg["seeds"]), size)
    if available is not None and need > 0.8 * available:
        raise ConfigError(f"compare: the run would hold about {need / 2**30:.1f} GiB (networks "
                          f"{cfg['hidden_sizes']}, {cfg['seeds_per_batch']} seeds per batch), "
                          f"more than 80% of the {available / 2**30:.1f} GiB this machine has "
                          "available: lower seeds_per_batch or hidden_sizes", "seeds_per_batch")


# compare()'s own arguments -> the config key each is (``{name}``: the game's short name)
ARGUMENT_KEYS = {"iterations": "neural.phase_iterations.{name}", "phases": "neural.phases",
                 "seeds": "neural.seeds", "entropies": "neural.entropies", "seed": "seed",
                 "critic": "neural.critic", "checkpoints": "neural.checkpoints.linear",
                 "geometric": "neural.checkpoints.geometric", "name": "neural.games[0]"}


def _argument(key: str | None) -> str:
    """The argument of :func:`compare` a refused config key is (a setting: its own name)."""
    part = (key or "").removeprefix("neural.")
    for argument, config_key in ARGUMENT_KEYS.items():
        stem = config_key.removeprefix("neural.").split("{")[0].split("[")[0].rstrip(".")
        if part == stem or part.startswith((f"{stem}.", f"{stem}[")):
            return argument
    top = part.split(".")[0].split("[")[0]
    return {"games": "name", "game_strings": "name", "seeds_per_job": "seeds_per_batch",
            "checkpoints": "checkpoints"}.get(top, top or "settings")


def neural_section(name, iterations, phases, seeds, entropies, seed, critic, checkpoints,
             geometric, settings: Mapping) -> dict:
    """The ``neural`` section (plus ``seed``) of one game's run, checked by the config's own
    schema and cross-field checks (:func:`neurd.schema.check_section`,
    :func:`neurd.pipeline.neural.check`): a value a config file may not hold is refused here
    with the same message, naming the argument, before any compilation."""
    if not isinstance(entropies, (str, bytes, Mapping)) and isinstance(entropies, Iterable):
        entropies = list(entropies)
    cfg = copy.deepcopy(DEFAULTS)
    for setting, value in copy.deepcopy(dict(settings)).items():  # a mapping over its default
        both = isinstance(value, Mapping) and isinstance(cfg[setting], Mapping)
        cfg[setting] = {**cfg[setting], **value} if both else value
    key = name if isinstance(name, str) else "game"
    cfg.update(games=[name], game_strings={key: "game"}, entropies=entropies, seeds=seeds,
               phases=phases, critic=critic, phase_iterations={key: iterations},
               exact_critic_games=[], checkpoints={"geometric": geometric, "linear": checkpoints})
    try:
        schema.check_section("neural", {"games": [name]})  # the name first: keys follow it
        schema.check_section("config", {"seed": seed})
        schema.check_section("neural", cfg)
        cfg = schema.integers(schema.plain(cfg),
                              schema.schema("neural")["properties"]["neural"])
        for key in optional():  # at its default: absent, as a config file without it
            if key in cfg and cfg[key] == settings_default(key):
                del cfg[key]
        # every seed in one job; the batch (seeds_per_batch), not the job, fixes the numbers
        cfg["seeds_per_job"] = -(-cfg["seeds"] // cfg["seeds_per_batch"]) * cfg["seeds_per_batch"]
        stage.check(cfg)
    except ConfigError as error:
        raise ConfigError(f"compare: argument {_argument(error.key)}: {error}", error.key) \
            from None
    cfg.update(seed=int(schema.plain(seed)), entropies=[float(e) for e in cfg["entropies"]])
    return cfg
