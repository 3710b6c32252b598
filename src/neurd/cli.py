"""Command-line steps of the pipeline: ``neurd <step> ...``.

Every Snakemake rule is one of these calls, so any table or figure can be
remade by hand from its config snapshot (``results/config/<section>.json``)
and its input tables; ``neurd <step> --help`` lists the arguments.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import logging
import os
import pkgutil
import shlex
import signal
import sys
import time

from neurd import __version__, expected_time, readings_grid
from neurd.audit import gather, write_audit
from neurd.config import ConfigError, load_snapshot
from neurd.figures import style
from neurd.games import GameError, GameFileError
from neurd.pipeline.neural_resources import checkpoint_minutes_default
from neurd.pipeline.tabular import ReferenceMismatch
from neurd.precision import float64
from neurd.progress import progress_seconds
from neurd.provenance import collect, write_html
from neurd.publication import PublicationError, costs_page
from neurd.publication import commands as published_commands
from neurd.publication import findings as published_findings
from neurd.publication.commands import check_configured
from neurd.publication.intake import BlockRefused
from neurd.publication.packs import PackError
from neurd.stages import STAGES, load_config, results_root
from neurd.tables import InputFileError, read_table, write_json

log = logging.getLogger(__package__)
# What `neurd --help` says first: plain text (the module's doc is reStructuredText).
DESCRIPTION = ("Command-line steps of the pipeline: neurd <step> ... Every Snakemake rule is "
               "one of these calls; neurd <step> --help lists its arguments.")


def _modules(package: str) -> list[str]:
    """Names of the modules of a subpackage of neurd."""
    path = importlib.import_module(package).__path__
    return sorted(m.name for m in pkgutil.iter_modules(path) if not m.name.startswith("_"))


# Every module of neurd.figures is a figure with INPUTS and make(), but `style` (their style),
# `readings` (the readings study's grid, drawn by neurd readings-grid) and `fig6_claims`
# (Fig 6's audit, which fig6.make calls).
FIGURES = [name for name in _modules("neurd.figures")
           if name not in ("style", "readings", "fig6_claims")]


def _figure(args) -> None:
    module = importlib.import_module(f"neurd.figures.{args.module}")
    name = args.name or args.module
    tables = {}
    for item in args.input:
        table, _, path = item.partition("=")
        tables[table] = read_table(path)
    missing = [n for n in module.INPUTS if n not in tables]
    if missing:
        raise SystemExit(f"figure {name} needs --input for {missing}")
    with float64():  # the audit's arithmetic on the float64 tables
        fig, claims = module.make(tables, load_snapshot(args.config), name, scale=args.scale)
    claims = [dataclasses.replace(claim, figure=name) for claim in claims]
    style.save(fig, args.png, args.pdf)
    frame = write_audit(claims, args.audit)
    for row in frame.itertuples():
        log.info("%s [%s] %s: %s", name, row.verdict, row.claim, row.measured)


def _audit_gather(args) -> None:
    frame = gather(args.audits, args.out, args.html)
    log.info("claims audit: %s", dict(frame.verdict.value_counts()))


def _provenance(args) -> None:
    record = collect(load_snapshot(args.config), benchmarks=args.benchmarks)
    write_json(args.out, record)
    if args.html:
        write_html(record, args.html)


def _config_snapshot(args) -> None:
    write_json(args.out, json.loads(args.json))
    log.info("wrote %s", args.out)


def _check_config(args) -> None:
    if args.results_dir:  # the folder only: the config's values, not the games or the GPU
        print(results_root(load_config(args.files, args.workflow, games=False)))
        return
    config = load_config(args.files, args.workflow)
    check_configured(config, args.workflow, args.files, content=True)
    checkpoint_minutes_default()  # the environment a job reads its saving interval from
    progress_seconds()  # and its progress interval: a bad one named before any job
    log.info("config is valid: scale %r, results in %s/", config["scale"],
             results_root(config))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=__package__, description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="step", required=True)


    for stage in STAGES.values():
        stage.add_steps(sub)
    readings_grid.register(sub)
    published_commands.register(sub)
    published_findings.register(sub)
    costs_page.register(sub)
    expected_time.register(sub)

    p = sub.add_parser("figure", help="draw a paper figure and write its claims audit")
    p.add_argument("module", choices=FIGURES, help="the figure's module in neurd.figures")
    p.add_argument("--name", help="the figure's name (default: the module's), e.g. fig4b_kuhn")
    p.add_argument("--scale", default=None,
                   help="the config's scale, said on the figure (e.g. default)")
    p.add_argument("--config", required=True, help="config snapshot of the figure's section")
    p.add_argument("--input", action="append", default=[], metavar="NAME=PATH",
                   help="an input table (repeat); names as the figure module's INPUTS")
    p.add_argument("--png", required=True)
    p.add_argument("--pdf", required=True)
    p.add_argument("--audit", required=True, help="output: results/audit/<figure>.csv")
    p.set_defaults(func=_figure)

    p = sub.add_parser("audit-gather", help="gather every figure's audit into claims.md")
    p.add_argument("--out", required=True, help="output: claims.md")
    p.add_argument("--html", default=None, help="output: the same as an HTML page")
    p.add_argument("audits", nargs="+")
    p.set_defaults(func=_audit_gather)

    p = sub.add_parser("config-snapshot",
                       help="write a config snapshot (the rule config_snapshot's step)")
    p.add_argument("--out", required=True, help="output: results/config/<section>.json")
    p.add_argument("json", help="the snapshot as JSON text")
    p.set_defaults(func=_config_snapshot)

    p = sub.add_parser("check-config",
                       help="check config files as the Snakefile would, before a run")
    p.add_argument("files", nargs="*", metavar="FILE",
                   help="config files merged over the default, as snakemake --configfile")
    p.add_argument("--workflow", default=".", help="the folder holding the Snakefile")
    p.add_argument("--results-dir", action="store_true",
                   help="print the folder the config's results go to, and nothing else")
    p.set_defaults(func=_check_config)

    p = sub.add_parser("provenance", help="write provenance.json for a config")
    p.add_argument("--config", required=True, help="snapshot of the whole config (JSON)")
    p.add_argument("--out", required=True, help="output: provenance.json")
    p.add_argument("--html", default=None, help="output: the same as an HTML page")
    p.add_argument("--benchmarks", default=None,
                   help="folder of Snakemake benchmark files: every step's runtime")
    p.set_defaults(func=_provenance)
    return parser


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # matplotlib's PDF font subsetting logs every glyph table at INFO
    logging.getLogger("fontTools").setLevel(logging.WARNING)
    args = build_parser().parse_args(argv)
    # Every log begins with the command that made it, so a step can be rerun from its log.
    log.info("command: neurd %s", shlex.join(sys.argv[1:] if argv is None else argv))
    # Snakemake stops jobs with SIGTERM: exit through the finally blocks, which remove
    # half-written temporary files.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    start = time.perf_counter()
    try:
        args.func(args)
    except (BlockRefused, ConfigError, GameError, GameFileError, InputFileError, PackError,
            PublicationError, ReferenceMismatch) as error:
        # a bad snapshot, game, input, pack or publication, or a yardstick that parts from
        # OpenSpiel's: the message names the file or key and what to do
        log.error("neurd %s: %s", args.step, error)
        return 2
    log.info("neurd %s done in %.1fs", args.step, time.perf_counter() - start)
    return 0


def run() -> None:
    """The ``neurd`` command: :func:`main`, then the process ends at once, its output flushed.

    Python's own exit would go on to destroy the C++ libraries' static objects (XLA's, whose
    compiler may still hold a worker thread after a program is compiled); under load that
    order has been seen to end a finished command with "terminate called without an active
    exception" (SIGABRT) after it had done its work and said so.  Ending with
    :func:`os._exit` once everything Python writes is flushed runs none of that.  Every file a
    step writes is closed (and renamed into place) before :func:`main` returns."""
    try:
        code = main()
    except SystemExit as exit_:  # argparse's errors, SIGTERM (see main)
        code = exit_.code
    if code is None:
        code = 0
    elif not isinstance(code, int):
        print(code, file=sys.stderr)
        code = 1
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":
    run()
