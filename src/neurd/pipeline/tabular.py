"""Figure 4b data: tabular counterfactual NeuRD vs SPG (CFR with either local learner).

Per game of the config section ``tabular`` (``games``: short names, each
with its OpenSpiel string in ``game_strings``):

* ``compile-game``: the game walked once into ``results/games/<game>.npz``
  (:mod:`neurd.games`), its information-state count checked against the
  config's ``expected_infostates``;
* ``tabular-sweep``: CFR(NeuRD) and CFR(SPG) at every step size, NashConv of
  the sequence-probability average policy at log-spaced checkpoints, as one
  jitted program (:func:`neurd.tabular.cfr.cfr_sweep`);
* ``tabular-reference``: the yardsticks, CFR (regret matching) and CFR+ at
  the same checkpoints, as OpenSpiel's ``CFRSolver`` and ``CFRPlusSolver``
  compute them, reproduced bit for bit by the engine
  (:mod:`neurd.tabular.solvers`), every configured solver in one program;
* ``tabular-openspiel-check``: OpenSpiel's own solver over the first
  ``openspiel_check_iterations`` iterations (``null``: all of them), its
  NashConv (``pyspiel.nash_conv``) and average policy compared with the
  engine's at every checkpoint; the step fails, and with it the run, if
  they differ by more than :data:`AGREEMENT`;
* ``tabular-table``: the sweep and the yardsticks in
  ``results/tabular/<game>/nashconv.parquet``, the table the figure reads
  (columns :data:`NASHCONV_COLUMNS`), once every check has passed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd import games, names
from neurd.config import ConfigError, require
from neurd.limits import MB, check_games, within
from neurd.stage import Figure, Stage
from neurd.tables import read_table, tidy, write_table

log = logging.getLogger(__name__)

NASHCONV_COLUMNS = {
    "game": "short name of the game (config tabular.games; string in tabular.game_strings)",
    "algorithm": "'neurd': CFR with the NeuRD (= Hedge) logit step y += eta * cf. regret; "
                 "'spg': y += eta * pi * cf. regret; 'cfr_rm': CFR with regret matching and "
                 "'cfr_plus': CFR+, as OpenSpiel's CFRSolver and CFRPlusSolver compute them "
                 "(reproduced by the engine, checked against OpenSpiel's own)",
    "step_size": "constant step size eta of the logit step (NaN for cfr_rm and cfr_plus)",
    "iteration": "CFR iterations done (each updates player 0, then player 1)",
    "nash_conv": "exact NashConv of the sequence-probability average policy",
}


CHECK_COLUMNS = {
    "game": "short name of the game (config tabular.games)",
    "algorithm": "'cfr_rm' (OpenSpiel's CFRSolver) or 'cfr_plus' (CFRPlusSolver)",
    "iteration": "a checkpoint of the run within its first tabular.openspiel_check_iterations "
                 "iterations",
    "nash_conv": "pyspiel.nash_conv of OpenSpiel's own solver's average policy",
    "nash_conv_drawn": "the NashConv the figure draws at this checkpoint (the engine's, "
                       "reference_<solver>.parquet)",
    "policy_difference": "largest absolute difference between OpenSpiel's and the engine's "
                         "average policy, over every information state and action",
}

# How far the engine's yardsticks may be from OpenSpiel's own (NashConv, policies); the two
# compute the same floating-point operations in the same order, so they agree exactly.
AGREEMENT = 1e-9


class ReferenceMismatch(RuntimeError):
    """The engine's CFR or CFR+ parted from OpenSpiel's own solver."""


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
                   f"{game}: the reference solvers' requested runtime", " minutes")
            within(check_runtime_minutes(cfg, game), limits, "max_runtime_minutes",
                   "tabular.openspiel_check_iterations",
                   f"{game}: an OpenSpiel check's requested runtime", " minutes")


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
# runtime a job asks a scheduler for: our sweep per (learner, step size) run, the engine's
# CFR and CFR+ per solver, and OpenSpiel's C++ CFR per iteration and per NashConv.  Other
# games get the slowest figures.
SWEEP_SECONDS = {"kuhn": 2.5e-5, "leduc": 8e-5, "goofspiel": 2e-4}
SOLVER_SECONDS = {"kuhn": 1e-5, "leduc": 3e-4, "goofspiel": 1.2e-3}
OPENSPIEL_SECONDS = {"kuhn": (3e-5, 2e-4), "leduc": (8e-3, 0.08), "goofspiel": (2e-2, 0.35)}


def sweep_runtime_minutes(cfg: Mapping, game: str) -> int:
    """Minutes to ask for one game's sweep: three times the expected time, plus 10."""
    runs = len(cfg["learners"]) * len(cfg["step_sizes"])
    seconds = runs * int(cfg["iterations"]) * SWEEP_SECONDS.get(game, max(SWEEP_SECONDS.values()))
    return 10 + int(np.ceil(3 * seconds / 60))


def reference_runtime_minutes(cfg: Mapping, game: str) -> int:
    """Minutes to ask for one game's yardsticks (every reference solver, one job)."""
    per_iteration = SOLVER_SECONDS.get(game, max(SOLVER_SECONDS.values()))
    seconds = len(cfg["reference_solvers"]) * reference_iterations(cfg) * per_iteration
    return 10 + int(np.ceil(3 * seconds / 60))


def check_runtime_minutes(cfg: Mapping, game: str) -> int:
    """Minutes to ask for one OpenSpiel check of one solver on one game."""
    per_iteration, per_nash_conv = OPENSPIEL_SECONDS.get(game, OPENSPIEL_SECONDS["goofspiel"])
    points = check_points(cfg)
    seconds = int(points[-1]) * per_iteration + len(points) * per_nash_conv
    return 10 + int(np.ceil(3 * seconds / 60))


def reference_iterations(cfg: Mapping) -> int:
    """Iterations of the yardsticks (``tabular.reference_iterations``; null: the sweep's)."""
    value = cfg.get("reference_iterations")
    return int(cfg["iterations"] if value is None else value)


def check_points(cfg: Mapping) -> np.ndarray:
    """The yardsticks' checkpoints that OpenSpiel's own solvers check: those within the first
    ``openspiel_check_iterations`` (null: every one), and at least the first."""
    points = checkpoints(cfg, up_to=reference_iterations(cfg))
    limit = cfg.get("openspiel_check_iterations")
    return points if limit is None else points[:max(1, int(np.sum(points <= int(limit))))]


def _openspiel_string(cfg: Mapping, game: str) -> str:
    """The game's OpenSpiel string, once OpenSpiel has loaded it; errors name the key."""
    try:
        games.openspiel_game(_game_string(cfg, game))
    except games.GameError as error:
        raise games.GameError(f"config key 'tabular.game_strings.{game}': {error}") from None
    return _game_string(cfg, game)


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


def reference(cfg: Mapping, game: str, compiled: games.CompiledGame) -> dict[str, pd.DataFrame]:
    """NashConv curves of every reference solver at the sweep's checkpoints (the engine's CFR
    and CFR+, as OpenSpiel computes them), solver -> rows."""
    from neurd.tabular.solvers import solver_curves

    solvers = list(cfg["reference_solvers"])
    points = checkpoints(cfg, up_to=reference_iterations(cfg))
    start = time.perf_counter()
    curves = solver_curves(compiled, solvers, points)
    log.info("%s: %s x %d iterations in %.1fs", game, solvers, points[-1],
             time.perf_counter() - start)
    return {solver: pd.DataFrame({"game": game, "algorithm": solver, "step_size": np.nan,
                                  "iteration": points, "nash_conv": values}
                                 )[list(NASHCONV_COLUMNS)]
            for solver, values in zip(solvers, curves)}


def openspiel_check(cfg: Mapping, game: str, solver: str, compiled: games.CompiledGame,
                    drawn: pd.DataFrame) -> pd.DataFrame:
    """OpenSpiel's own ``solver`` against the drawn yardstick over :func:`check_points`.

    Raises :class:`ReferenceMismatch` naming the first checkpoint where the NashConv
    drawn, or the engine's average policy, is more than :data:`AGREEMENT` from
    OpenSpiel's.
    """
    from neurd.tabular.reference import solver_nash_conv
    from neurd.tabular.solvers import solver_curves

    if solver not in cfg["reference_solvers"]:
        raise ConfigError(f"solver {solver!r} is not in config tabular.reference_solvers "
                          f"{cfg['reference_solvers']}")
    points = check_points(cfg)
    game_string = _openspiel_string(cfg, game)
    drawn = drawn[(drawn.game == game) & (drawn.algorithm == solver)].set_index("iteration")
    missing = sorted(set(points) - set(drawn.index))
    if missing:
        raise ConfigError(f"the {solver} curve of {game} has no row at checkpoints {missing}; "
                          "it was made from another config: delete it and rerun")
    theirs, their_policies = solver_nash_conv(game_string, solver, points, compiled)
    _, (our_policies,) = solver_curves(compiled, [solver], points, policies=True)
    table = pd.DataFrame({
        "game": game, "algorithm": solver, "iteration": points, "nash_conv": theirs,
        "nash_conv_drawn": drawn.nash_conv.loc[points].to_numpy(),
        "policy_difference": np.abs(their_policies - our_policies).max(axis=(1, 2)),
    })[list(CHECK_COLUMNS)]
    parted = table[(np.abs(table.nash_conv - table.nash_conv_drawn) > AGREEMENT)
                   | (table.policy_difference > AGREEMENT)]
    if len(parted):
        row = parted.iloc[0]
        raise ReferenceMismatch(
            f"{solver} on {game} parts from OpenSpiel's own solver at iteration "
            f"{row.iteration}: NashConv {float(row.nash_conv_drawn)!r} drawn vs "
            f"{float(row.nash_conv)!r} "
            f"OpenSpiel's, average policies up to {row.policy_difference:.3g} apart "
            f"(agreement required: {AGREEMENT})")
    log.info("%s on %s: equal to OpenSpiel's at %d checkpoints up to iteration %d (NashConv "
             "within %.2g, policies within %.2g)", solver, game, len(points), points[-1],
             float(np.abs(table.nash_conv - table.nash_conv_drawn).max()),
             float(table.policy_difference.max()))
    return table


# --- command-line steps -------------------------------------------------------


def _compile_step(args, cfg) -> None:
    games.save(compiled_game(cfg, args.game), args.out)


def _sweep_step(args, cfg) -> None:
    compiled = games.load_configured(args.compiled, args.game, cfg["game_strings"], "tabular")
    write_table(sweep(cfg, args.game, compiled), args.out, columns=NASHCONV_COLUMNS,
                config=cfg, extra={"game_string": compiled.game_string})


def _reference_step(args, cfg) -> None:
    compiled = games.load_configured(args.compiled, args.game, cfg["game_strings"], "tabular")
    if len(args.out) != len(cfg["reference_solvers"]):
        raise ConfigError(f"--out names {len(args.out)} files for the "
                          f"{len(cfg['reference_solvers'])} tabular.reference_solvers "
                          f"{cfg['reference_solvers']}")
    for path, table in zip(args.out, reference(cfg, args.game, compiled).values()):
        write_table(table, path, columns=NASHCONV_COLUMNS, config=cfg,
                    extra={"game_string": compiled.game_string})


def _check_step(args, cfg) -> None:
    _openspiel_string(cfg, args.game)  # a bad game string is named before any file is read
    compiled = games.load_configured(args.compiled, args.game, cfg["game_strings"], "tabular")
    table = openspiel_check(cfg, args.game, args.solver, compiled, read_table(args.reference))
    write_table(table, args.out, columns=CHECK_COLUMNS, config=cfg,
                extra={"game_string": compiled.game_string})


def _table_step(args, cfg) -> None:
    references = [read_table(path) for path in args.reference]
    checks = [read_table(path) for path in args.checks]
    drawn = sorted(set().union(*(set(t.algorithm) for t in references)))
    checked = sorted(set().union(*(set(t.algorithm) for t in checks)))
    if drawn != checked:
        raise ConfigError(f"--checks cover {checked}, the references drawn are {drawn}: every "
                          "yardstick needs OpenSpiel's check (tabular-openspiel-check)")
    for path, check in zip(args.checks, checks):
        worst = float(np.maximum(np.abs(check.nash_conv - check.nash_conv_drawn),
                                 check.policy_difference).max())
        if not worst <= AGREEMENT:
            raise ReferenceMismatch(f"{path}: the yardstick parts from OpenSpiel's own solver "
                                    f"by {worst:.3g} (agreement required: {AGREEMENT})")
    table = pd.concat([read_table(args.sweep), *references], ignore_index=True)
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

    p = add("tabular-reference", "Fig 4b: NashConv of CFR and CFR+ (OpenSpiel's, by the engine)",
            _reference_step)
    p.add_argument("--compiled", required=True, help="input: results/games/<game>.npz")
    p.add_argument("--out", required=True, nargs="+",
                   help="outputs: results/tabular/<game>/reference_<solver>.parquet, one per "
                        "solver of tabular.reference_solvers, in its order")

    p = add("tabular-openspiel-check",
            "Fig 4b: OpenSpiel's own CFR or CFR+ against the drawn curve (fails if they part)",
            _check_step)
    p.add_argument("--solver", required=True, choices=names.REFERENCE_SOLVERS)
    p.add_argument("--compiled", required=True, help="input: results/games/<game>.npz")
    p.add_argument("--reference", required=True,
                   help="input: results/tabular/<game>/reference_<solver>.parquet")
    p.add_argument("--out", required=True,
                   help="output: results/tabular/<game>/openspiel_<solver>.parquet")

    p = add("tabular-table", "Fig 4b table: sweep and reference curves together", _table_step)
    p.add_argument("--sweep", required=True, help="input: sweep.parquet")
    p.add_argument("--reference", nargs="*", default=[],
                   help="inputs: reference_<solver>.parquet, one per solver")
    p.add_argument("--checks", nargs="*", default=[],
                   help="inputs: openspiel_<solver>.parquet, one per reference solver (each "
                        "must have passed)")
    p.add_argument("--out", required=True, help="output: results/tabular/<game>/nashconv.parquet")


STAGE = Stage(section="tabular", check=check, figures=figures, register=register,
              inspect=inspect)
