"""Fig 6 drawn from a published run (:mod:`neurd.publication`): the paper scale's, computed
once on a GPU and shipped in the repository, so any machine draws it.

Config section ``published``: ``folder``, the publication (``published/paper``; ``null``
draws none), and ``configfile``, the config file it must be the run of
(``workflow/config/paper.yaml``): the publication's neural config snapshot must be that
file's ``neural`` section as it is now, merged over the defaults, or the config is refused
when validated (a stale publication is never drawn).  Where the folder holds a
publication, the workflow draws ``fig6_<name>`` (``<name>``: the folder's last part) with its
claims audit from it, beside the scale's own ``fig6``.

Steps:

* ``neurd publish CONFIGFILE``: publish the finished games of that config's run (its
  results folder) into its ``published.folder``;
* ``neurd published-check FOLDER``: check a publication (manifest, hashes, tables, runs
  complete; ``--configfile``: against that config too);
* ``neurd published-tables``: the checked publication's tables, every game in one of each,
  under ``results/published/<name>/`` (the inputs of ``fig6_<name>``);
* ``neurd published-reproduce FOLDER --game G``: the publication's first learning cycles
  run again on this machine, against the agreement bound across devices.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from neurd.config import ConfigError, require
from neurd.pipeline._stage import Figure, Stage

log = logging.getLogger(__name__)

COMBINED = ("nashconv", "nashconv_ci", "summary", "diagnostics")  # Fig 6's inputs


def name(cfg: Mapping) -> str | None:
    """The publication's name (its folder's last part), or None without a folder."""
    return None if cfg.get("folder") is None else Path(cfg["folder"]).name


def drawn(cfg: Mapping) -> bool:
    """Whether there is a publication to draw: a folder with a manifest (and a game)."""
    from neurd.publication import published_games

    return cfg.get("folder") is not None and bool(published_games(cfg["folder"]))


def inputs(cfg: Mapping) -> list[str]:
    """Every file of the publication (the manifest and what it lists)."""
    from neurd.publication import MANIFEST, _read_manifest

    manifest = _read_manifest(Path(cfg["folder"]))
    return [f"{cfg['folder']}/{MANIFEST}", *(f"{cfg['folder']}/{f}" for f in manifest["files"])]


def expected_snapshot(configfile: str, workflow_dir: str | os.PathLike = ".") -> dict:
    """The neural snapshot ``configfile`` gives now (merged over the default config)."""
    from neurd.stages import load_config, snapshot

    return snapshot(load_config([configfile], workflow_dir, games=False), "neural")


def neural_defaults(workflow_dir: str | os.PathLike = ".") -> dict:
    """The neural section's schema defaults, key by key (what a key added since a
    publication was made reads as; :func:`neurd.publication.stale_keys`)."""
    from neurd.stages import _read_schema

    schema = _read_schema(str(Path(workflow_dir) / "workflow/schemas/neural.schema.yaml"))
    properties = schema["properties"]["neural"]["properties"]
    return {key: spec["default"] for key, spec in properties.items() if "default" in spec}


def check(cfg: Mapping) -> None:
    """Nothing beyond the schema (``folder`` is ``published/<name>``)."""


def inspect(cfg: Mapping, limits: Mapping) -> None:
    """The publication, when there is one: checked against what ``configfile`` gives now."""
    from neurd.publication import PublicationError
    from neurd.publication import check as check_publication

    if not drawn(cfg):
        return
    require(Path(cfg["configfile"]).is_file(), "published.configfile",
            f"{cfg['configfile']} not found (the config file {cfg['folder']} must be the run of)")
    try:
        check_publication(cfg["folder"], expected_snapshot(cfg["configfile"]), cfg["configfile"],
                          neural_defaults())
    except PublicationError as error:
        raise ConfigError(f"published.folder: {error}") from None


def figures(cfg: Mapping) -> list[Figure]:
    if not drawn(cfg):
        return []
    label = name(cfg)
    return [Figure(f"fig6_{label}", "fig6", folder=f"published/{label}",
                   config=f"published/{label}/config/neural.json")]


# --- command-line steps -------------------------------------------------------------------


def _tables_step(args, cfg) -> None:
    from neurd.pipeline.neural import TABLES
    from neurd.publication import check as check_publication
    from neurd.tables import read_table, write_json, write_table

    manifest, neural = check_publication(cfg["folder"], expected_snapshot(cfg["configfile"]),
                                         cfg["configfile"], neural_defaults())
    out = Path(args.out_dir)
    for table in COMBINED:
        frame = pd.concat([read_table(Path(cfg["folder"]) / f"neural/{game}/{table}.parquet")
                           for game in manifest["games"]], ignore_index=True)
        write_table(frame, out / f"neural/{table}.parquet", columns=TABLES[table],
                    config=neural, extra={"published": cfg["folder"]})
    write_json(out / "config/neural.json", neural)
    log.info("%s: %s checked and combined", cfg["folder"], ", ".join(manifest["games"]))


def _publish(args) -> None:
    from neurd.publication import PublicationError, publish
    from neurd.stages import load_config, results_root, snapshot

    config = load_config([args.configfile], args.workflow, games=False)
    folder = config["published"]["folder"]
    if folder is None:
        raise PublicationError(f"{args.configfile}: published.folder is null: nowhere to publish")
    results = Path(args.workflow) / results_root(config)
    cfg = snapshot(config, "neural")
    games = args.game or [g for g in cfg["games"]
                          if (results / f"neural/{g}/summary.parquet").exists()]
    manifest = publish(cfg, results, Path(args.workflow) / folder, games,
                       policies=args.policies, replace=args.replace)
    log.info("published %s into %s (%.1f MiB): %s", ", ".join(games), folder,
             manifest["bytes"] / 2**20, manifest["games"])


def _check(args) -> None:
    from neurd.publication import check as check_publication

    expected = None if args.configfile is None else expected_snapshot(args.configfile,
                                                                       args.workflow)
    manifest, cfg = check_publication(args.folder, expected, args.configfile or "",
                                      neural_defaults(args.workflow))
    log.info("%s is a valid publication: config hash %s, games %s, %.1f MiB", args.folder,
             manifest["config_hash"], list(manifest["games"]), manifest["bytes"] / 2**20)


def _reproduce(args) -> None:
    from neurd import games
    from neurd.publication import AGREEMENT_NASH_CONV, check, reproduce
    from neurd.tables import atomic_path

    checked = check(args.folder)
    cfg = checked[1]
    if args.compiled:
        compiled = games.load(args.compiled)
    else:
        compiled = games.compile_configured(args.game, cfg["game_strings"],
                                            cfg.get("expected_infostates"), "neural")
    frame = reproduce(args.folder, args.game, compiled, cycles=args.cycles, checked=checked)
    worst = float(frame.difference.max()) if len(frame) else float("nan")
    log.info("%s %s: %d published NashConv values in the first %d cycles reproduced; largest "
             "difference %.3g (bound %.0e)", args.folder, args.game, len(frame), args.cycles,
             worst, AGREEMENT_NASH_CONV)
    if args.out:
        with atomic_path(args.out) as tmp:
            frame.to_csv(tmp, index=False)
    if not len(frame) or not worst <= AGREEMENT_NASH_CONV:
        raise SystemExit(f"neurd published-reproduce: {args.folder} {args.game}: largest "
                         f"difference {worst:.3g} beyond the bound {AGREEMENT_NASH_CONV:.0e}"
                         if len(frame) else "no published checkpoint in the first cycles")


def register(stage: Stage, sub) -> None:
    """Add this stage's steps to the ``neurd`` command line."""
    from neurd.publication import AGREEMENT_CYCLES

    p = stage.add_step(sub, "published-tables",
                       "a publication's Fig 6 tables, checked, every game in one of each",
                       _tables_step)
    p.add_argument("--out-dir", required=True, help="output folder: results/published/<name>")

    p = sub.add_parser("publish", help="publish a finished run's Fig 6 tables (every game "
                       "done, or --game) into its config's published.folder")
    p.add_argument("configfile", help="the config file of the run (workflow/config/paper.yaml)")
    p.add_argument("--game", action="append", help="a game to publish (repeat; default: every "
                   "game whose tables are there)")
    p.add_argument("--policies", choices=("best", "all"), default="best",
                   help="end-of-phase policies kept: each algorithm's best entropy level "
                        "(default) or every run")
    p.add_argument("--replace", action="store_true",
                   help="start the folder afresh when it holds another config's games")
    p.add_argument("--workflow", default=".", help="the folder holding the Snakefile")
    p.set_defaults(func=_publish)

    p = sub.add_parser("published-check", help="check a publication: manifest, hashes, "
                       "tables, every run complete")
    p.add_argument("folder", help="the publication, e.g. published/paper")
    p.add_argument("--configfile", default=None,
                   help="also check it is the run of this config file as it is now")
    p.add_argument("--workflow", default=".", help="the folder holding the Snakefile")
    p.set_defaults(func=_check)

    p = sub.add_parser("published-reproduce", help="run a publication's first learning "
                       "cycles again here and compare with its NashConv")
    p.add_argument("folder", help="the publication, e.g. published/paper")
    p.add_argument("--game", required=True)
    p.add_argument("--compiled", default=None,
                   help="the game compiled (results/neural/<game>/game.npz); default: "
                        "compiled here with OpenSpiel from the publication's game string")
    p.add_argument("--cycles", type=int, default=AGREEMENT_CYCLES,
                   help=f"learning cycles to run (default {AGREEMENT_CYCLES})")
    p.add_argument("--out", default=None, help="output: the comparison as CSV")
    p.set_defaults(func=_reproduce)


STAGE = Stage(section="published", check=check, figures=figures, register=register,
              float64=False, inspect=inspect)
