"""Figure 4b data: tabular counterfactual NeuRD vs SPG (CFR with either local learner).

Per game of the config section ``tabular`` (``games``: short names, each
with its OpenSpiel string in ``game_strings``):

* ``compile-game``: the game walked once into ``results/games/<game>.npz``
  (:mod:`neurd.games`), its information-state count checked against the
  config's ``expected_infostates``;
* ``tabular-sweep``: CFR(NeuRD) and CFR(SPG) at every step size, NashConv of
  the sequence-probability average policy at log-spaced checkpoints, as one
  jitted program (:func:`neurd.tabular.cfr.cfr_sweep`);
* ``tabular-reference``: OpenSpiel's C++ CFR (regret matching) or CFR+ at
  the same checkpoints, NashConv by ``pyspiel.nash_conv`` (one job per solver);
* ``tabular-table``: both in ``results/tabular/<game>/nashconv.parquet``, the
  table the figure reads (columns :data:`NASHCONV_COLUMNS`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd import games, names
from neurd.config import ConfigError, require
from neurd.pipeline._stage import Figure, Stage
from neurd.tables import read_table, tidy, write_table

log = logging.getLogger(__name__)

NASHCONV_COLUMNS = {
    "game": "short name of the game (config tabular.games; string in tabular.game_strings)",
    "algorithm": "'neurd': CFR with the NeuRD (= Hedge) logit step y += eta * cf. regret; "
                 "'spg': y += eta * pi * cf. regret; 'cfr_rm': OpenSpiel's CFRSolver; "
                 "'cfr_plus': OpenSpiel's CFRPlusSolver",
    "step_size": "constant step size eta of the logit step (NaN for the OpenSpiel solvers)",
    "iteration": "CFR iterations done (each updates player 0, then player 1)",
    "nash_conv": "exact NashConv of the sequence-probability average policy",
}


def figures(cfg: Mapping) -> list[Figure]:
    """Fig 4b per game: ``fig4b`` for the paper's game (``figure_game``), ``fig4b_<game>`` else."""
    return [Figure("fig4b" if game == cfg["figure_game"] else f"fig4b_{game}", "fig4b",
                   {"game": game}) for game in cfg["games"]]


def check(cfg: Mapping) -> None:
    """Cross-field checks of the ``tabular`` section (the schema has checked each value)."""
    game_names, strings = list(cfg["games"]), cfg["game_strings"]
    missing = [name for name in game_names if name not in strings]
    require(not missing, "tabular.games",
            f"{missing} have no entry in tabular.game_strings {sorted(strings)}")
    require(cfg["figure_game"] in game_names, "tabular.figure_game",
            f"{cfg['figure_game']!r} is not one of tabular.games {game_names}")
    unknown = sorted(set(cfg.get("expected_infostates", {})) - set(strings))
    require(not unknown, "tabular.expected_infostates",
            f"games {unknown} are not in tabular.game_strings {sorted(strings)}")
    # checkpoints >= 2 and iterations >= 2 (schema) give at least iterations 1 and the last


def inspect(cfg: Mapping, limits: Mapping) -> None:
    """The games (loaded and compiled by OpenSpiel), and the sweep's table, memory and requested
    runtimes against ``limits`` (:mod:`neurd.limits`); errors name the key."""
    from neurd.limits import MB, check_games, within

    sizes = check_games("tabular", cfg, limits)
    runs = len(cfg["learners"]) * len(cfg["step_sizes"])
    rows = len(sizes) * (runs + len(cfg["reference_solvers"])) * int(cfg["checkpoints"])
    within(rows, limits, "max_table_rows", "tabular.checkpoints",
           f"the NashConv table ({len(sizes)} games x ({runs} learner-step size runs + "
           f"{len(cfg['reference_solvers'])} reference solvers) x {cfg['checkpoints']} "
           "checkpoints), in rows,")
    for game, size in sizes.items():
        # the game's arrays, and per run (vmapped) a few float64 arrays over the
        # (information state, action) pairs and the histories (the exact evaluation)
        memory = 8 * (4 * size.histories * size.width
                      + runs * 8 * (size.infostates * size.actions + size.histories))
        within(memory / MB, limits, "max_job_memory_mb", "tabular.step_sizes",
               f"{game}: the sweep's estimated memory ({runs} runs vmapped over "
               f"{size.infostates} information states and {size.histories} histories)", " MB")
        within(sweep_runtime_minutes(cfg, game), limits, "max_runtime_minutes",
               "tabular.iterations", f"{game}: the sweep's requested runtime", " minutes")
        if cfg["reference_solvers"]:
            within(reference_runtime_minutes(cfg, game), limits, "max_runtime_minutes",
                   "tabular.reference_iterations",
                   f"{game}: a reference solver's requested runtime", " minutes")


def _game_string(cfg: Mapping, game: str) -> str:
    if game not in cfg["games"]:
        raise ConfigError(f"game {game!r} is not in config tabular.games {list(cfg['games'])}")
    return cfg["game_strings"][game]


def checkpoints(cfg: Mapping, up_to: int | None = None) -> np.ndarray:
    """Log-spaced iterations ``1 .. iterations`` (``checkpoints`` points, deduplicated).

    With ``up_to``, only those not beyond it (the reference solvers may run
    fewer iterations).
    """
    last = int(cfg["iterations"])
    points = np.unique(np.round(np.logspace(0, np.log10(last), int(cfg["checkpoints"]))))
    points = points.astype(np.int64)
    return points if up_to is None else points[points <= up_to]


# Seconds per iteration on a 2-core CPU (bench/bench_engine.py, tests' runs), to size the
# runtime a job asks a scheduler for: our sweep per (learner, step size) run, and OpenSpiel's
# C++ CFR per iteration and per NashConv.  Other games get the slowest figures.
SWEEP_SECONDS = {"kuhn": 2.5e-5, "leduc": 8e-5, "goofspiel": 2e-4}
REFERENCE_SECONDS = {"kuhn": (3e-5, 2e-4), "leduc": (8e-3, 0.08), "goofspiel": (2e-2, 0.35)}


def sweep_runtime_minutes(cfg: Mapping, game: str) -> int:
    """Minutes to ask for one game's sweep: three times the expected time, plus 10."""
    runs = len(cfg["learners"]) * len(cfg["step_sizes"])
    seconds = runs * int(cfg["iterations"]) * SWEEP_SECONDS.get(game, max(SWEEP_SECONDS.values()))
    return 10 + int(np.ceil(3 * seconds / 60))


def reference_runtime_minutes(cfg: Mapping, game: str) -> int:
    """Minutes to ask for one OpenSpiel reference solver on one game."""
    per_iteration, per_nash_conv = REFERENCE_SECONDS.get(game, REFERENCE_SECONDS["goofspiel"])
    seconds = (reference_iterations(cfg) * per_iteration
               + len(checkpoints(cfg, up_to=reference_iterations(cfg))) * per_nash_conv)
    return 10 + int(np.ceil(3 * seconds / 60))


def reference_iterations(cfg: Mapping) -> int:
    value = cfg.get("reference_iterations")
    return int(cfg["iterations"] if value is None else value)


def compiled_game(cfg: Mapping, game: str) -> games.CompiledGame:
    """Compile ``game`` and check its information-state count against the config."""
    _game_string(cfg, game)
    return games.compile_configured(game, cfg["game_strings"], cfg.get("expected_infostates"),
                                    "tabular")


def sweep(cfg: Mapping, game: str, compiled: games.CompiledGame) -> pd.DataFrame:
    """NashConv curves of every (learner, step size): the rows of the sweep."""
    from neurd.tabular.cfr import cfr_sweep
    from neurd.tabular.sequence_form import sequence_form

    points = checkpoints(cfg)
    start = time.perf_counter()
    curves = cfr_sweep(sequence_form(compiled), cfg["learners"], cfg["step_sizes"], points)
    log.info("%s: %d learners x %d step sizes x %d iterations in %.1fs", game,
             len(cfg["learners"]), len(cfg["step_sizes"]), points[-1],
             time.perf_counter() - start)
    return tidy([{"algorithm": np.asarray(cfg["learners"])},
                 {"step_size": np.asarray(cfg["step_sizes"], float)}, {"iteration": points}],
                {"nash_conv": curves}, game=game)[list(NASHCONV_COLUMNS)]


def reference(cfg: Mapping, game: str, solver: str) -> pd.DataFrame:
    """NashConv curve of one OpenSpiel CFR solver at the sweep's checkpoints."""
    from neurd.tabular.reference import solver_nash_conv

    if solver not in cfg["reference_solvers"]:
        raise ConfigError(f"solver {solver!r} is not in config tabular.reference_solvers "
                          f"{cfg['reference_solvers']}")
    points = checkpoints(cfg, up_to=reference_iterations(cfg))
    try:
        values = solver_nash_conv(_game_string(cfg, game), solver, points)
    except games.GameError as error:
        raise games.GameError(f"config key 'tabular.game_strings.{game}': {error}") from None
    return pd.DataFrame({"game": game, "algorithm": solver, "step_size": np.nan,
                         "iteration": points, "nash_conv": values})[list(NASHCONV_COLUMNS)]


# --- command-line steps -------------------------------------------------------


def _compile_step(args, cfg) -> None:
    games.save(compiled_game(cfg, args.game), args.out)


def _sweep_step(args, cfg) -> None:
    compiled = games.load(args.compiled)
    write_table(sweep(cfg, args.game, compiled), args.out, columns=NASHCONV_COLUMNS,
                config=cfg, extra={"game_string": compiled.game_string})


def _reference_step(args, cfg) -> None:
    write_table(reference(cfg, args.game, args.solver), args.out, columns=NASHCONV_COLUMNS,
                config=cfg, extra={"game_string": _game_string(cfg, args.game)})


def _table_step(args, cfg) -> None:
    frames = [read_table(path) for path in (args.sweep, *args.reference)]
    table = pd.concat(frames, ignore_index=True)
    write_table(table, args.out, columns=NASHCONV_COLUMNS, config=cfg,
                extra={"game_string": _game_string(cfg, args.game)})


def register(stage: Stage, sub) -> None:
    """Add this stage's steps to the ``neurd`` command line."""
    def add(name, summary, func):
        def checked(args, cfg):
            _game_string(cfg, args.game)
            func(args, cfg)

        p = stage.add_step(sub, name, summary, checked)
        p.add_argument("--game", required=True, help="short name of the game (tabular.games)")
        return p

    p = add("compile-game", "walk an OpenSpiel game once into a .npz of arrays", _compile_step)
    p.add_argument("--out", required=True, help="output: results/games/<game>.npz")

    p = add("tabular-sweep", "Fig 4b: CFR(NeuRD), CFR(SPG) NashConv over step sizes",
            _sweep_step)
    p.add_argument("--compiled", required=True, help="input: results/games/<game>.npz")
    p.add_argument("--out", required=True, help="output: results/tabular/<game>/sweep.parquet")

    p = add("tabular-reference", "Fig 4b: NashConv of OpenSpiel's CFR or CFR+ solver",
            _reference_step)
    p.add_argument("--solver", required=True, choices=names.REFERENCE_SOLVERS)
    p.add_argument("--out", required=True,
                   help="output: results/tabular/<game>/reference_<solver>.parquet")

    p = add("tabular-table", "Fig 4b table: sweep and reference curves together", _table_step)
    p.add_argument("--sweep", required=True, help="input: sweep.parquet")
    p.add_argument("--reference", nargs="*", default=[],
                   help="inputs: reference_<solver>.parquet, one per solver")
    p.add_argument("--out", required=True, help="output: results/tabular/<game>/nashconv.parquet")


STAGE = Stage(section="tabular", check=check, figures=figures, register=register,
              inspect=inspect)
