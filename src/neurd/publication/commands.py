"""The commands of a published Fig 6, and its check against the config file it is the run of.

Above the stage registry (:mod:`neurd.stages`): these read whole config files.

* :func:`check_configured`: the configured publication (config section ``published``) is the
  run of ``published.configfile`` as that file is now (merged over the default config), else
  a :class:`~neurd.config.ConfigError` naming ``published.folder`` and each key that differs;
  run by the Snakefile and ``neurd check-config`` after the config is validated;
* ``neurd publish CONFIGFILE``: publish the finished Snakemake jobs of that config's run
  (each a seed block) into its ``published.folder`` (``--init``: an empty publication);
* ``neurd published-add CONFIGFILE PACK...``: check packed seed blocks (from GPU
  allocations, ``python -m neurd.publication.allocation gpu``) and add them;
* ``neurd published-derive CONFIGFILE``: make every game's derived tables again from its
  published blocks, after a change to what they hold;
* ``neurd published-check FOLDER``: check a publication, its content included;
* ``neurd published-tables``: the checked publication's tables, every game in one of each,
  under ``results/published/<name>/`` (the inputs of ``fig6_<name>``);
* ``neurd published-reproduce FOLDER --game G``: each block's first learning cycles run
  again here, and the NashConv of the published policies at the phase ends.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import textwrap
from collections.abc import Mapping
from pathlib import Path

from neurd import games
from neurd.config import ConfigError, require
from neurd.configfile import read_config_file
from neurd.names import game_title
from neurd.neural.results import TABLES
from neurd.neural.runs import parse_block
from neurd.pipeline.published import COMBINED
from neurd.publication import (
    AGREEMENT_CYCLES,
    AGREEMENT_NASH_CONV,
    PHASE_END_TOLERANCE,
    BlockSource,
    PublicationError,
    add_blocks,
    check_content,
    derive_again,
    fig6_tables,
    init,
    phase_end_nash_conv,
    publish_run,
    published_games,
    replay_state,
    reproduce,
)
from neurd.publication import check as check_publication
from neurd.publication.packs import unpack
from neurd.publication.resume_states import IN_PROGRESS, STATE_FILE, StateSource
from neurd.stages import (
    DEFAULT_CONFIG,
    STAGES,
    load_config,
    read_schema,
    results_root,
    snapshot,
)
from neurd.tables import (
    InputFileError,
    atomic_path,
    config_hash,
    span_between,
    write_between,
    write_json,
    write_table,
)

log = logging.getLogger(__name__)


def expected_snapshot(configfile: str, workflow_dir: str | os.PathLike = ".") -> dict:
    """The neural snapshot ``configfile`` gives now (merged over the default config)."""
    return snapshot(load_config([configfile], workflow_dir, games=False), "neural")


def neural_defaults(workflow_dir: str | os.PathLike = ".") -> dict:
    """The neural section's schema defaults, key by key (what a key added since a
    publication was made reads as; :func:`neurd.publication.stale_keys`)."""
    schema = read_schema(str(Path(workflow_dir) / "workflow/schemas/neural.schema.yaml"))
    properties = schema["properties"]["neural"]["properties"]
    return {key: spec["default"] for key, spec in properties.items() if "default" in spec}


def uses_publication(config: Mapping, files=(), workflow_dir: str | os.PathLike = ".") -> bool:
    """Whether the config files ``files`` (merged over the default config) use the configured
    publication: none but the default config's given (the default scale draws it beside its
    own Fig 6), one of them is its ``published.configfile`` (the run it is made from), or
    one sets the section ``published`` itself.  A user's own config that only inherits the
    default folder does not."""
    cfg = config.get("published") or {}
    if cfg.get("folder") is None:
        return False
    workflow_dir = Path(workflow_dir)
    default = (workflow_dir / DEFAULT_CONFIG).resolve()
    own = [Path(f).resolve() for f in files if Path(f).resolve() != default]
    if not own or (workflow_dir / cfg["configfile"]).resolve() in own:
        return True
    return any("published" in (read_config_file(path) or {}) for path in own)


def check_configured(config: Mapping, workflow_dir: str | os.PathLike = ".",
                     files=(), content: bool = False) -> None:
    """The configured publication is the run of ``published.configfile`` as it is now (a
    stale one is refused before any job, naming each key that differs); ``content``: its
    finished blocks' tables too (:func:`~neurd.publication.check_content`: what ``neurd
    check-config``, which ``make figures`` runs first, adds to the Snakefile's check of the
    files; the blocks in progress, which no figure draws on, are checked when published and
    by ``neurd published-check``, and what resumes one checks that it fits its job).  Where the
    config files ``files`` use it (:func:`uses_publication`) and it holds no seed block, a
    warning says so: fig6_<name> is not drawn."""
    cfg = config.get("published") or {}
    if cfg.get("folder") is None:
        return
    configfile = Path(workflow_dir) / cfg["configfile"]
    require(configfile.is_file(), "published.configfile",
            f"{cfg['configfile']} not found (the config file {cfg['folder']} must be the run of)")
    try:
        folder = Path(workflow_dir) / cfg["folder"]
        checked = check_publication(folder, expected_snapshot(str(configfile), workflow_dir),
                                    cfg["configfile"], neural_defaults(workflow_dir))
        if content:  # the finished blocks the figures draw on (the states: published-check)
            check_content(folder, *checked, states=False)
    except (PublicationError, InputFileError) as error:
        raise ConfigError(f"published.folder: {error}") from None
    if not published_games(Path(workflow_dir) / cfg["folder"]) and uses_publication(
            config, files, workflow_dir):
        log.warning("published.folder: %s holds no seed block yet, so fig6_%s is not drawn",
                    cfg["folder"], Path(cfg["folder"]).name)


# --- command-line steps -------------------------------------------------------------------


def _tables_step(args) -> None:
    cfg = STAGES["published"].load(args.config)
    manifest, neural = check_publication(cfg["folder"], expected_snapshot(cfg["configfile"]),
                                         cfg["configfile"], neural_defaults())
    curves = check_content(cfg["folder"], manifest, neural, states=False)
    tables = fig6_tables(curves, cfg["folder"], manifest, neural)
    out = Path(args.out_dir)
    seeds = {g: e["seeds"] for g, e in manifest["games"].items() if e["blocks"]}
    for table in COMBINED:
        write_table(tables[table], out / f"neural/{table}.parquet", columns=TABLES[table],
                    config=neural, extra={"published": cfg["folder"], "seeds": seeds})
    write_json(out / "config/neural.json", neural)
    log.info("%s: %s checked and combined", cfg["folder"], ", ".join(
        f"{g} ({len(s)} of {neural['seeds']} seeds)" for g, s in seeds.items()))


def _config_and_folder(args):
    config = load_config([args.configfile], args.workflow, games=False)
    folder = config["published"]["folder"]
    if folder is None:
        raise PublicationError(f"{args.configfile}: published.folder is null: nowhere to publish")
    return (snapshot(config, "neural"), Path(args.workflow) / folder,
            Path(args.workflow) / results_root(config))


def _report(manifest, added, folder) -> None:
    games = {g: f"{len(e['seeds'])} seeds in {len(e['blocks'])} blocks"
             + (f", {len(e['in_progress'])} in progress" if e.get("in_progress") else "")
             for g, e in manifest["games"].items()}
    log.info("%s: %s; now %.1f MiB: %s", folder,
             f"added {', '.join(added)}" if added else "nothing new", manifest["bytes"] / 2**20,
             games)


def _publish(args) -> None:
    cfg, folder, results = _config_and_folder(args)
    if args.init:
        manifest = init(folder, cfg, replace=args.replace)
        log.info("%s: an empty publication of the config (hash %s)", folder,
                 manifest["config_hash"])
        return
    games = args.game or [g for g in cfg["games"]
                          if (results / f"neural/{g}/summary.parquet").exists()]
    _report(*publish_run(cfg, results, folder, games, replace=args.replace), folder)


def pack_member_allowed(cfg: Mapping):
    """What a pack of blocks may hold: the jobs' files of seed blocks of the config's games,
    finished (their tables) or in progress (their saved state)."""
    games = "|".join(re.escape(g) for g in cfg["games"])
    block = r"(learned|exact)_s\d{1,4}-\d{1,4}"
    pattern = re.compile(rf"neural/({games})/blocks/{block}/"
                         r"(curves\.parquet|policies\.parquet|run\.log)"
                         rf"|neural/({games})/{IN_PROGRESS}/{block}/"
                         rf"({STATE_FILE.pattern}|run\.log)")
    return lambda member: pattern.fullmatch(member) is not None


def _pack_indexes(packs) -> list[Path]:
    """The pack indexes of ``neurd published-add``'s PACKs: each a blocks.json, a folder
    holding one, or a folder of such folders.  A PACK that is blank (as a path it would be
    the working folder, searched for packs) or holds no blocks.json is refused in one line
    naming it, before the config is read."""
    indexes = []
    for given in packs:
        path = Path(given)
        if not given.strip():
            raise PublicationError(f"PACK {given!r} is empty: name a blocks.json or the folder "
                                   "holding it")
        found = [path] if path.is_file() else sorted(path.glob("*/blocks.json")) + sorted(
            path.glob("blocks.json"))
        if not found:
            what = "no such file or folder" if not path.exists() else \
                "no blocks.json in it or in its folders"
            raise PublicationError(f"{given}: no pack here ({what}; a pack is a blocks.json "
                                   "with its parts)")
        indexes += found
    return indexes


def _add(args) -> None:
    indexes = _pack_indexes(args.packs)
    cfg, folder, results = _config_and_folder(args)
    work = results / "published-add"
    sources, states, folders, reports = [], [], [], {}
    try:
        for index_path in indexes:
            index, unpacked = unpack(index_path, pack_member_allowed(cfg), work)
            folders.append(unpacked)
            if index.get("config_hash") != config_hash(cfg):
                raise PublicationError(
                    f"{index_path} holds blocks of another config (hash "
                    f"{index.get('config_hash')}, {args.configfile}'s neural section is "
                    f"{config_hash(cfg)})")
            for block in sorted(unpacked.glob("neural/*/blocks/*")):
                parse_block(block.name)
                missing = [f for f in ("curves.parquet", "policies.parquet")
                           if not (block / f).is_file()]
                if missing:
                    raise PublicationError(
                        f"{index_path}: block {block.parts[-3]}/{block.name} has no "
                        f"{' or '.join(missing)}: an unfinished job is never published")
                sources.append(BlockSource(block.parts[-3], block / "curves.parquet",
                                           block / "policies.parquet"))
            for state in sorted(unpacked.glob(f"neural/*/{IN_PROGRESS}/*")):
                parse_block(state.name)
                states.append(StateSource(state.parts[-3], state.name, state))
            cpu = (index.get("allocation") or {}).get("kind") == "cpu"
            keep = (getattr(args, "keep_cpu_reports", None) if cpu else None) or args.keep_reports
            if keep and index.get("allocation"):
                date = str(index["allocation"].get("date", "undated"))
                reports[Path(keep) / f"{date}-{index['sha256'][:16]}.json"] = relative_paths(
                    json.dumps(index["allocation"], indent=1, sort_keys=True)) + "\n"
        if not sources and not states:
            raise PublicationError(f"{', '.join(args.packs)}: the packs hold no finished block "
                                   "and no block in progress")
        added = add_blocks(folder, cfg, sources, replace=args.replace, states=states)
        for report, text in reports.items():  # kept once the packs are in, not before
            report.parent.mkdir(parents=True, exist_ok=True)
            report.write_text(text)
        _report(*added, folder)
    finally:
        for unpacked in folders:
            shutil.rmtree(unpacked, ignore_errors=True)


def _derive_again(args) -> None:
    cfg, folder, _ = _config_and_folder(args)
    _report(*derive_again(folder, cfg), folder)


# an absolute path up to one of the repository's top-level folders (a machine's own path)
_MACHINE_PREFIX = re.compile(r"(?<![\w.~:/-])/(?:[^\s\"'/]+/)*?(?=(?:results|src|bench|published|"
                             r"workflow|tests)/)")


def relative_paths(text: str) -> str:
    """``text`` with every absolute path into a repository's folders (``/home/u/repo/results/x``)
    written from the repository's root (``results/x``): a kept allocation report names no
    machine's paths."""
    return _MACHINE_PREFIX.sub("", text)


def _check(args) -> None:
    expected = None if args.configfile is None else expected_snapshot(args.configfile,
                                                                       args.workflow)
    manifest, cfg = check_publication(args.folder, expected, args.configfile or "",
                                      neural_defaults(args.workflow))
    if not args.files_only:
        check_content(args.folder, manifest, cfg)
    log.info("%s is a valid publication%s: config hash %s, %s, %.1f MiB", args.folder,
             "" if args.files_only else " (content checked)", manifest["config_hash"],
             {g: f"{len(e['seeds'])} of {cfg['seeds']} seeds" for g, e in
              manifest["games"].items()}, manifest["bytes"] / 2**20)


def _replay(args, checked, compiled) -> None:
    """``--replay``: a block in progress run again from its start to its row, compared."""
    frame = replay_state(args.folder, args.game, args.replay, compiled, checked=checked)
    worst = float(frame.difference.max())
    log.info("%s %s: block in progress %s replayed from its start, %d NashConv values at %d "
             "rows, largest difference %.3g (bound %.0e; on the device and variant that made "
             "it: 0)", args.folder, args.game, args.replay, len(frame), frame.row.nunique(),
             worst, AGREEMENT_NASH_CONV)
    if args.out:
        with atomic_path(args.out) as tmp:
            frame.to_csv(tmp, index=False)
    if not worst <= AGREEMENT_NASH_CONV:
        raise PublicationError(f"{args.folder} {args.game}: block in progress {args.replay} "
                               f"replayed with a difference {worst:.3g}, beyond the bound "
                               f"{AGREEMENT_NASH_CONV:.0e}")


def _reproduce(args) -> None:
    if args.cycles < 1:
        raise PublicationError(f"--cycles must be at least 1 (a reproduction of no cycle "
                               f"vouches for nothing), got {args.cycles}")
    checked = check_publication(args.folder)
    cfg = checked[1]
    if args.compiled:
        compiled = games.load_configured(args.compiled, args.game, cfg["game_strings"],
                                         "neural")
    else:
        compiled = games.compile_configured(args.game, cfg["game_strings"],
                                            cfg.get("expected_infostates"), "neural")
    if args.replay:
        _replay(args, checked, compiled)
        return
    frame = reproduce(args.folder, args.game, compiled, cycles=args.cycles, checked=checked)
    ends = phase_end_nash_conv(args.folder, args.game, compiled, checked=checked)
    worst = float(frame.difference.max())
    worst_end = float(ends.difference.max()) if len(ends) else 0.0
    log.info("%s %s: %d published NashConv values of %d blocks in their first %d cycles "
             "reproduced, largest difference %.3g (bound %.0e); %d phase ends recomputed from "
             "the published policies, largest difference %.3g (bound %.0e)", args.folder,
             args.game, len(frame), frame.block.nunique(), args.cycles, worst,
             AGREEMENT_NASH_CONV, len(ends), worst_end, PHASE_END_TOLERANCE)
    if args.out:
        with atomic_path(args.out) as tmp:
            frame.to_csv(tmp, index=False)
    if not worst <= AGREEMENT_NASH_CONV:
        raise PublicationError(f"{args.folder} {args.game}: block "
                               f"{frame.block[frame.difference.idxmax()]} reproduced with a "
                               f"difference {worst:.3g}, beyond the bound "
                               f"{AGREEMENT_NASH_CONV:.0e}")
    if not worst_end <= PHASE_END_TOLERANCE:
        raise PublicationError(f"{args.folder} {args.game}: block "
                               f"{ends.block[ends.difference.idxmax()]}'s published policies "
                               f"give a NashConv {worst_end:.3g} from the published one")


# --- the README's line on a publication ---------------------------------------------------

README_MARKS = ("<!-- {folder}: seeds, written by neurd published-readme -->",
                "<!-- /{folder} -->")


def seeds_sentence(folder: str | os.PathLike) -> str:
    """What a reader of the README is told of the publication in ``folder`` (checked), from
    its manifest: how many of its config's seeds each game holds, and what that means for
    the Fig 6 verdicts."""
    manifest, cfg = check_publication(folder)
    name = Path(folder).name
    total = int(cfg["seeds"])
    counts = {g: len(manifest["games"].get(g, {}).get("seeds", [])) for g in cfg["games"]}
    held = ", ".join(f"{game_title(g)} {n} of {total}" for g, n in counts.items())
    text = f"Seeds in `published/{name}`, per game: {held}."
    if not any(counts.values()):
        return (f"{text} With none, `fig6_{name}` is not drawn, and the Fig 6 verdicts above "
                "are the default scale's alone.")
    judged = [g for g, n in counts.items() if n]
    rest = [game_title(g) + "'s" for g in cfg["games"] if g not in judged]
    return (f"{text} The pipeline draws `fig6_{name}` and its audit from them; each game's "
            "rows say how many seeds they are judged on. Fig 6 rows judged on them (their "
            "findings: docs/findings.md): "
            + ", ".join(f"{game_title(g)}'s ({counts[g]} of {total} seeds)" for g in judged)
            + ("; " + " and ".join(rest) + " at the default scale only" if rest else "")
            + ".")


def readme_block(text: str, folder: str) -> tuple[int, int] | None:
    """The span of the generated sentence between ``folder``'s marks in ``text``."""
    return span_between(text, tuple(mark.format(folder=folder) for mark in README_MARKS))


def _readme(args) -> None:
    folder = Path(args.folder).as_posix().rstrip("/")
    sentence = "\n" + textwrap.fill(seeds_sentence(folder), width=92) + "\n"
    write_between(args.readme, tuple(mark.format(folder=folder) for mark in README_MARKS),
                  sentence)
    log.info("%s: %s", args.readme, sentence.strip())


def register(sub) -> None:
    """Add the publication's commands to the ``neurd`` command line."""
    p = sub.add_parser("published-readme", help="write the README's sentence on how many "
                       "seeds a publication holds")
    p.add_argument("folder", help="the publication (published/paper)")
    p.add_argument("--readme", default="README.md", help="the file holding the sentence's marks")
    p.set_defaults(func=_readme)

    p = sub.add_parser("published-tables", help="a publication's Fig 6 tables, checked, every "
                       "game in one of each")
    p.add_argument("--config", required=True, help="published config snapshot (JSON)")
    p.add_argument("--out-dir", required=True, help="output folder: results/published/<name>")
    p.set_defaults(func=_tables_step)

    p = sub.add_parser("publish", help="publish a finished Snakemake run's Fig 6 jobs (each a "
                       "seed block) into its config's published.folder")
    p.add_argument("configfile", help="the config file of the run (workflow/config/paper.yaml)")
    p.add_argument("--game", action="append", help="a game to publish (repeat; default: every "
                   "game whose tables are there)")
    p.add_argument("--init", action="store_true",
                   help="only make an empty publication of the config (no block yet)")
    p.add_argument("--replace", action="store_true",
                   help="start the folder afresh when it holds another config's blocks")
    p.add_argument("--workflow", default=".", help="the folder holding the Snakefile")
    p.set_defaults(func=_publish)

    p = sub.add_parser("published-add", help="check packed seed blocks (from GPU allocations) "
                       "and add them to the config's published.folder")
    p.add_argument("configfile", help="the config file of the blocks (workflow/config/paper.yaml)")
    p.add_argument("packs", nargs="+", metavar="PACK",
                   help="a pack: its blocks.json, a folder holding it, or a folder of such "
                        "folders")
    p.add_argument("--keep-reports", default=None, metavar="FOLDER",
                   help="also save each pack's allocation report (check, throughput, its blocks, "
                        "jobs) as FOLDER/<pack>.json")
    p.add_argument("--keep-cpu-reports", default=None, metavar="FOLDER",
                   help="where the reports of CPU allocations (make cpu-allocation) go "
                        "instead (default: --keep-reports)")
    p.add_argument("--replace", action="store_true",
                   help="start the folder afresh when it holds another config's blocks")
    p.add_argument("--workflow", default=".", help="the folder holding the Snakefile")
    p.set_defaults(func=_add)

    p = sub.add_parser("published-derive", help="make every game's derived tables of the "
                       "config's published.folder again from its blocks, with this code")
    p.add_argument("configfile", help="the config file of the publication "
                   "(workflow/config/paper.yaml)")
    p.add_argument("--workflow", default=".", help="the folder holding the Snakefile")
    p.set_defaults(func=_derive_again)
    _register_checks(sub)


def _register_checks(sub) -> None:
    """The commands that check a publication: its files and tables, and its numbers run
    again."""
    p = sub.add_parser("published-check", help="check a publication: files, hashes, every "
                       "block's tables, no two seeds alike, positive compute seconds, the "
                       "derived tables recomputed (the cheap checks; a seed's first cycles "
                       "run again: published-reproduce)")
    p.add_argument("folder", help="the publication, e.g. published/paper")
    p.add_argument("--configfile", default=None,
                   help="also check it is the run of this config file as it is now")
    p.add_argument("--files-only", action="store_true",
                   help="check the manifest and files only (what config validation does)")
    p.add_argument("--workflow", default=".", help="the folder holding the Snakefile")
    p.set_defaults(func=_check)

    p = sub.add_parser("published-reproduce", help="run each block's first learning cycles "
                       "again here, and the NashConv of the published policies at the phase "
                       "ends, against the published numbers")
    p.add_argument("folder", help="the publication, e.g. published/paper")
    p.add_argument("--game", required=True)
    p.add_argument("--compiled", default=None,
                   help="the game compiled (results/neural/<game>/game.npz); default: "
                        "compiled here with OpenSpiel from the publication's game string")
    p.add_argument("--cycles", type=int, default=AGREEMENT_CYCLES,
                   help=f"learning cycles to run per block (at least 1; default "
                        f"{AGREEMENT_CYCLES})")
    p.add_argument("--replay", default=None, metavar="BLOCK",
                   help="instead: the block in progress BLOCK (e.g. learned_s0-4) run again "
                        "from its start to the row its state stopped at, every row's NashConv "
                        "compared (equal on the device and variant that made it: what tells a "
                        "forged state from the run's own; a GPU's at the paper's length)")
    p.add_argument("--out", default=None, help="output: the comparison as CSV")
    p.set_defaults(func=_reproduce)


