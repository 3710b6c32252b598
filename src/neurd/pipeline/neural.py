"""Figure 6 data: neural NeuRD vs SPG with reward negation, in Kuhn, Leduc and Goofspiel.

Per game of the config section ``neural``:

* ``neural-game``: the game compiled once into ``results/neural/<game>/game.npz``;
* ``neural-run``: one job -- every (algorithm, entropy level) for a chunk of run
  seeds (``seeds_per_job``), as one jitted program (:mod:`neurd.neural.experiment`),
  with the learned critic, or (for ``exact_critic_games``) the engine's exact
  ``q`` in its place; writes the job's curves and end-of-phase policies, and,
  where ``logits_log`` names runs, their centred logits at every checkpoint
  (``<critic>_<chunk>_logits.parquet`` beside them);
* ``neural-table``: the game's tables: ``nashconv``,
  ``policies``, ``diagnostics``, ``summary`` (per run: final and average
  NashConv) and ``nashconv_ci`` (bootstrap over seeds);
* ``neural-combine``: every game's tables in one of each under ``results/neural/``,
  the inputs of Fig 6.

What each table holds, how a job's table is checked and what is derived from it is
:mod:`neurd.neural.results`; which runs, jobs and seed blocks a config makes is
:mod:`neurd.neural.runs`.  This module checks the section, estimates a job's resources
and device (with :mod:`neurd.pipeline.neural_resources`), plans its jobs and runs the
command-line steps.
"""

from __future__ import annotations

import dataclasses
import difflib
import logging
import math
import os
from collections.abc import Mapping

import pandas as pd

from neurd import games
from neurd.config import ConfigError, require
from neurd.limits import MB, check_games, within
from neurd.neural import variants
from neurd.neural.algorithms import check_algorithms
from neurd.neural.environment import job_flags
from neurd.neural.results import (
    CURVES_COLUMNS,
    LOGITS_COLUMNS,
    POLICY_COLUMNS,
    TABLES,
    check_job_table,
    game_tables,
    logits_table,
    policy_table,
    run_table,
    uniform_nash_conv,
)
from neurd.neural.runs import (
    EXACT,
    LEARNED,
    block_plan,
    configurations,
    critics,
    logit_log_runs,
    logit_logged_configurations,
    main_critic,
    plan,
    seed_chunks,
)
from neurd.neural.settings import check_options
from neurd.pipeline.neural_resources import (
    check_device,
    checkpoint_minutes_default,
    job_memory_bytes,
    job_runtime_minutes,
)
from neurd.revision import git_revision
from neurd.stage import Figure, Stage
from neurd.tables import config_hash, read_metadata, read_table, write_table

log = logging.getLogger(__name__)

MAX_CONFIGURATIONS = 10_000  # per game: bounds the tables (every policy at every phase end)

# --- config -------------------------------------------------------------------------------


def check(cfg: Mapping) -> None:
    """Cross-field checks of the ``neural`` section (the schema has checked each value)."""
    check_algorithms(cfg["algorithms"], "neural.algorithms")
    check_options(cfg)
    game_names, strings = list(cfg["games"]), cfg["game_strings"]
    missing = [g for g in game_names if g not in strings]
    require(not missing, "neural.games",
            f"{missing} have no entry in neural.game_strings {sorted(strings)}")
    unknown = sorted(set(cfg.get("expected_infostates", {})) - set(strings))
    require(not unknown, "neural.expected_infostates",
            f"games {unknown} are not in neural.game_strings {sorted(strings)}")
    extra = sorted(set(cfg["exact_critic_games"]) - set(strings))
    require(not extra, "neural.exact_critic_games",
            f"{extra} are not in neural.game_strings {sorted(strings)} (the exact critic runs "
            "for those of them in neural.games)")
    for mapping in ("phase_iterations", "throughput"):
        for stray in sorted(set(cfg.get(mapping, {})) - set(strings)):
            close = difflib.get_close_matches(stray, list(strings), n=3)
            require(False, f"neural.{mapping}.{stray}",
                    f"{stray!r} is no game of neural.game_strings {sorted(strings)}"
                    + (f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""))
    ratio = cfg["critic_updates_per_policy_update"]
    for game in game_names:
        require(game in cfg["phase_iterations"], f"neural.phase_iterations.{game}",
                "is missing: every game of neural.games needs its phase length")
        require(cfg["phase_iterations"][game] % ratio == 0, f"neural.phase_iterations.{game}",
                f"must be a multiple of neural.critic_updates_per_policy_update ({ratio}), "
                f"got {cfg['phase_iterations'][game]}")
    require(cfg["seeds_per_job"] % cfg["seeds_per_batch"] == 0, "neural.seeds_per_job",
            f"must be a multiple of neural.seeds_per_batch ({cfg['seeds_per_batch']}), "
            f"got {cfg['seeds_per_job']}")
    configs = configurations(cfg, cfg["seeds"])
    require(configs <= MAX_CONFIGURATIONS, "neural.seeds",
            f"{cfg['seeds']} seeds x {len(cfg['entropies'])} entropy levels x "
            f"{len(cfg['algorithms'])} algorithms is {configs} configurations per game, more "
            f"than {MAX_CONFIGURATIONS} (the paper runs 480)")
    require(cfg["final_checkpoints"] <= cfg["checkpoints"]["linear"], "neural.final_checkpoints",
            f"must not exceed neural.checkpoints.linear ({cfg['checkpoints']['linear']})")
    seeds, entropies = logit_log_runs(cfg)
    require(bool(seeds) == bool(entropies), "neural.logits_log",
            f"names seeds {list(seeds)} and entropies {list(entropies)}: the runs logged are "
            "every seed at every entropy level named, so name both or neither")
    beyond = [s for s in seeds if s >= cfg["seeds"]]
    require(not beyond, "neural.logits_log.seeds",
            f"{beyond} are not run seeds: each must be below neural.seeds ({cfg['seeds']})")
    absent = [e for e in entropies if e not in cfg["entropies"]]
    require(not absent, "neural.logits_log.entropies",
            f"{absent} are not in neural.entropies {cfg['entropies']}")


def inspect(cfg: Mapping, limits: Mapping) -> None:
    """The games (loaded and compiled by OpenSpiel, with an information-state tensor), and
    each game's tables, job memory and requested runtime against ``limits``
    (:mod:`neurd.limits`); errors name the key."""

    sizes = check_games("neural", cfg, limits, need_tensor=True)
    grid = f"{len(cfg['algorithms'])} algorithms x {len(cfg['entropies'])} entropy levels"
    configs = configurations(cfg, cfg["seeds"])
    points = int(cfg["phases"]) * (2 + cfg["checkpoints"]["geometric"]
                                   + cfg["checkpoints"]["linear"])
    for game, size in sizes.items():
        runs = len(critics(cfg, game))
        within(configs * points * runs, limits, "max_table_rows", "neural.checkpoints",
               f"{game}: the NashConv table ({grid} x {cfg['seeds']} seeds x {runs} "
               f"critics x up to {points} checkpoints), in rows,")
        within(configs * int(cfg["phases"]) * size.legal_pairs, limits, "max_table_rows",
               "neural.seeds", f"{game}: the policies table ({grid} x {cfg['seeds']} seeds x "
               f"{cfg['phases']} phases x {size.legal_pairs} legal actions), in rows,")
        within(logit_logged_configurations(cfg) * points * size.legal_pairs, limits,
               "max_table_rows", "neural.logits_log",
               f"{game}: a job's logits table ({len(cfg['algorithms'])} algorithms x the "
               f"runs named x up to {points} checkpoints x {size.legal_pairs} legal actions), "
               "in rows,")
        within(job_memory_bytes(cfg, size) / MB, limits, "max_job_memory_mb",
               "neural.seeds_per_batch",
               f"{game}: a job's estimated memory (networks {cfg['hidden_sizes']} on a tensor "
               f"of {size.tensor_size}, {cfg['critic_batch']} x "
               f"{cfg['critic_updates_per_policy_update']} + {cfg['policy_batch']} episodes "
               f"per cycle, {size.histories} histories evaluated exactly, for {grid} x "
               f"{cfg['seeds_per_batch']} seeds per batch)", " MB")
        within(job_runtime_minutes(cfg, game), limits, "max_runtime_minutes",
               f"neural.throughput.{game}",
               f"{game}: a job's requested runtime (its configuration-iterations over the "
               "assumed throughput, doubled, plus 10)", " minutes")
    check_device(cfg, sizes)


# --- command-line steps -------------------------------------------------------------------


def _game_step(args, cfg) -> None:
    compiled = games.compile_configured(args.game, cfg["game_strings"],
                                        cfg.get("expected_infostates"), "neural")
    games.save(compiled, args.out)


EXIT_STOPPED = 75  # neural-run stopped at its wall-time budget, state saved: run it again


def _job(args, cfg):
    """The job ``neural-run`` is told to run: ``(plan, identity)`` of ``--chunk`` or
    ``--seeds``."""
    if (args.chunk is None) == (args.seeds is None):
        raise ConfigError("give --chunk (a Snakemake job) or --seeds "
                          "FIRST-LAST (a seed block), not both")
    if args.seeds is not None:
        try:
            first, last = (int(x) for x in args.seeds.split("-"))
        except ValueError:
            raise ConfigError(f"--seeds {args.seeds!r} is not FIRST-LAST "
                              "(e.g. 0-4)") from None
        return (block_plan(cfg, args.game, args.critic, first, last),
                {"seeds": [first, last]})
    chunks = seed_chunks(cfg)
    if not 0 <= args.chunk < len(chunks):
        raise ConfigError(f"--chunk {args.chunk} is not a chunk of the config "
                          f"(0..{len(chunks) - 1}: neural.seeds {cfg['seeds']} in jobs of "
                          f"neural.seeds_per_job {cfg['seeds_per_job']})")
    require(args.game in cfg["games"], "neural.games",
            f"{args.game!r} is not a game of the config ({list(cfg['games'])})")
    return plan(cfg, args.game, args.critic, args.chunk), {"chunk": args.chunk}


def _check_run_arguments(args):
    """``neural-run``'s arguments checked before anything is computed (the saving interval
    from the environment where not given); the cycle variant they name, parsed."""
    minutes = args.stop_after_minutes
    if minutes is not None and not (math.isfinite(minutes) and minutes > 0):
        raise ConfigError(f"--stop-after-minutes must be a positive number "
                          f"of minutes, got {minutes}")
    if args.keep_state and args.checkpoint is None:
        raise ConfigError("--keep-state needs --checkpoint (where the state is kept)")
    if minutes is not None and args.checkpoint is None:
        raise ConfigError("--stop-after-minutes needs --checkpoint (where the "
                          "state is saved when the budget runs out)")
    if args.checkpoint_minutes is None:
        args.checkpoint_minutes = checkpoint_minutes_default()
    if not (math.isfinite(args.checkpoint_minutes) and args.checkpoint_minutes >= 0):
        raise ConfigError(f"--checkpoint-minutes must be a number of minutes "
                          f">= 0, got {args.checkpoint_minutes}")
    if os.environ.get("JAX_ENABLE_X64", "").strip().lower() not in ("", "0", "false"):
        raise ConfigError("JAX_ENABLE_X64 is set; the neural stage computes "
                          "in float32 (its exact evaluations switch float64 on for themselves):"
                          " unset it")
    try:
        return variants.parse(args.variant)
    except ValueError as error:
        raise ConfigError(f"--variant: {error}") from None


def _run_step(args, cfg) -> None:
    variant = _check_run_arguments(args)
    # deterministic ops and the variant's flags, read when the backend starts, below
    os.environ["XLA_FLAGS"] = job_flags(os.environ.get("XLA_FLAGS", ""), variant)
    # one CPU device per core, each running its share of the configurations (the exact
    # critic: one device)
    from neurd.neural.device import job_devices, use_cores

    try:
        use_cores(job_devices(args.critic))
    except ValueError as error:
        raise ConfigError(f"{error}") from None
    from neurd.neural import experiment
    from neurd.neural.train import neural_game
    from neurd.neural.visited import visited_share

    job, which = _job(args, cfg)
    job = dataclasses.replace(job, spec=variants.apply(job.spec, variant))
    compiled = games.load_configured(args.compiled, args.game, cfg["game_strings"], "neural")
    if job.logged and args.logits is None:
        raise ConfigError("config neural.logits_log names runs of this job; "
                          "give --logits, the file their centred logits go to")
    game_hash = games.content_hash(compiled)
    identity = {"config_hash": config_hash(cfg), "game": args.game, "critic": args.critic,
                "game_hash": game_hash, **which}
    revision = git_revision(os.path.dirname(os.path.abspath(__file__)))
    budget = None if args.stop_after_minutes is None else 60.0 * args.stop_after_minutes
    try:
        results = experiment.run(compiled, job, checkpoint_path=args.checkpoint,
                                 checkpoint_seconds=60.0 * args.checkpoint_minutes,
                                 identity=identity, stop_after_seconds=budget,
                                 keep_state=args.keep_state,
                                 variant=variants.resolved_name(
                                     variant, visited_share(job.spec, neural_game(compiled))),
                                 revision=str(revision["commit"])
                                 + ("+changes" if revision["dirty"] else ""))
    except experiment.CheckpointPathError as error:
        raise ConfigError(f"{error}") from None
    except experiment.Stopped as stopped:
        log.warning("neurd neural-run: %s", stopped)
        raise SystemExit(EXIT_STOPPED) from None
    extra = {"game_string": cfg["game_strings"][args.game], "game_hash": game_hash,
             "run_seeds": list(job.run_seeds), "batches": [list(b) for b in job.batches],
             "critic": args.critic, "pieces": results["pieces"]}
    for piece in results["pieces"]:
        log.info("piece on %s (%s, jax %s): %d iterations in %.1f s, %s configuration-"
                 "iterations/s", piece["device"], piece["platform"], piece["jax"],
                 piece["iterations"], piece["seconds"],
                 piece["configuration_iterations_per_second"])
    write_table(run_table(cfg, args.game, args.critic, results, job.configurations),
                args.curves, columns=CURVES_COLUMNS, config=cfg, extra=extra)
    write_table(policy_table(cfg, args.game, compiled, results, job.configurations),
                args.policies, columns=POLICY_COLUMNS, config=cfg, extra=extra)
    if args.logits is not None:
        write_table(logits_table(args.game, args.critic, compiled, results, job),
                    args.logits, columns=LOGITS_COLUMNS, config=cfg, extra=extra)


def _table_step(args, cfg) -> None:
    for path in [*args.curves, *args.policies]:
        check_job_table(path, cfg, args.game)
    curves = pd.concat([read_table(p) for p in args.curves], ignore_index=True)
    policies = pd.concat([read_table(p) for p in args.policies], ignore_index=True)
    policies = policies[policies.seed.isin(curves[curves.critic == main_critic(cfg)].seed)]
    compiled = games.load_configured(args.compiled, args.game, cfg["game_strings"], "neural")
    uniform = uniform_nash_conv(compiled, int(cfg["phases"]))
    tables = game_tables(cfg, curves, policies, uniform)
    # the cycle variants and devices the jobs' pieces ran, carried into every derived table
    pieces = [p for path in args.curves for p in read_metadata(path).get("pieces", [])]
    ran = {"cycle_variants": sorted({str(p.get("variant", "default")) for p in pieces}),
           "devices": sorted({str(p.get("device")) for p in pieces})}
    meta = {"bootstrap": dict(cfg["bootstrap"], statistic="mean over seeds",
                              implementation="scipy.stats.bootstrap")}
    for name, path in (("nashconv", args.nashconv), ("policies", args.policies_out),
                       ("diagnostics", args.diagnostics), ("summary", args.summary),
                       ("nashconv_ci", args.ci)):
        write_table(tables[name], path, columns=TABLES[name], config=cfg,
                    extra={**ran, **meta} if name == "nashconv_ci" else ran)


def _combine_step(args, cfg) -> None:
    for name in ("nashconv", "diagnostics", "summary", "nashconv_ci"):
        paths = getattr(args, name)
        frame = pd.concat([read_table(p) for p in paths], ignore_index=True)
        ran = {key: sorted({v for p in paths for v in read_metadata(p).get(key, [])})
               for key in ("cycle_variants", "devices")}
        write_table(frame, os.path.join(args.out_dir, f"{name}.parquet"), columns=TABLES[name],
                    config=cfg, extra=ran)


def register(stage: Stage, sub) -> None:
    """Add this stage's steps to the ``neurd`` command line."""
    p = stage.add_step(sub, "neural-game", "compile a Fig 6 game once into a .npz", _game_step)
    p.add_argument("--game", required=True, help="short name (neural.games)")
    p.add_argument("--out", required=True, help="output: results/neural/<game>/game.npz")

    p = stage.add_step(sub, "neural-run",
                       "Fig 6: one job, every algorithm and entropy level for a chunk of seeds",
                       _run_step)
    p.add_argument("--game", required=True, help="short name (neural.games)")
    p.add_argument("--critic", required=True, choices=(LEARNED, EXACT))
    p.add_argument("--chunk", type=int, default=None,
                   help="chunk of run seeds (0-based; the Snakemake jobs)")
    p.add_argument("--seeds", default=None, metavar="FIRST-LAST",
                   help="a seed block instead of a chunk: run seeds FIRST..LAST as one batch")
    p.add_argument("--compiled", required=True, help="input: results/neural/<game>/game.npz")
    p.add_argument("--curves", required=True, help="output: the job's curves (.parquet)")
    p.add_argument("--policies", required=True, help="output: the job's end-of-phase policies")
    p.add_argument("--logits", default=None,
                   help="output: the centred logits of the runs config neural.logits_log "
                        "names, at every checkpoint (.parquet; no rows where the job has none "
                        "of them); needed when it has some")
    p.add_argument("--variant", default="default",
                   help="the learning cycle's variant (neurd.neural.variants: how its "
                        "arithmetic is laid out and compiled; numbers move by float rounding "
                        "only; every piece of compute records the variant it resolved to, e.g. "
                        "map_used.u1.cb-default.f32 on a CPU; default: default)")
    p.add_argument("--checkpoint", default=None,
                   help="folder where the job state is saved and resumed from (files of at "
                        "most 16 MiB; removed at the end)")
    p.add_argument("--checkpoint-minutes", type=float, default=None,
                   help="wall time between saves of the state to --checkpoint (default: "
                        "$NEURD_CHECKPOINT_MINUTES, which the workflow sets from config "
                        "neural.checkpoint_minutes, else 5; not in the snapshot: it changes "
                        "no number)")
    p.add_argument("--stop-after-minutes", type=float, default=None,
                   help="wall-time budget: before the next segment would overrun it, save the "
                        f"state to --checkpoint and exit with status {EXIT_STOPPED}; run the "
                        "same command again (on this or another machine, with the checkpoint "
                        "folder) to resume")
    p.add_argument("--keep-state", action="store_true",
                   help="at the end, keep the state (at its last row) in --checkpoint instead "
                        "of removing it: a finished job held in progress until the other "
                        "critics of its seeds finish; run again with it, the job writes the "
                        "same tables without a learning cycle")

    p = stage.add_step(sub, "neural-table", "Fig 6 tables of one game from its jobs",
                       _table_step)
    p.add_argument("--game", required=True, help="short name (neural.games)")
    p.add_argument("--compiled", required=True, help="input: results/neural/<game>/game.npz")
    p.add_argument("--curves", nargs="+", required=True, help="inputs: the jobs' curves")
    p.add_argument("--policies", nargs="+", required=True, help="inputs: the jobs' policies")
    for name in ("nashconv", "diagnostics", "summary", "ci"):
        p.add_argument(f"--{name}", required=True, help=f"output: {name} table")
    p.add_argument("--policies-out", required=True, help="output: policies table")

    p = stage.add_step(sub, "neural-combine", "Fig 6 inputs: every game's tables in one",
                       _combine_step)
    for name in ("nashconv", "diagnostics", "summary", "nashconv_ci"):
        p.add_argument(f"--{name}", nargs="+", required=True, help=f"inputs: per-game {name}")
    p.add_argument("--out-dir", required=True, help="output folder: results/neural")


# Settings that change no number (how jobs are scheduled, how often they save): out of the
# config snapshot, so out of what the tables and checkpoints are keyed on.
SETTINGS = ("checkpoint_minutes", "throughput", "gpus_per_job", "allow_cpu")
STAGE = Stage(section="neural", check=check, figures=lambda cfg: [Figure("fig6", "fig6")],
              register=register, float64=False, settings=SETTINGS, inspect=inspect)
