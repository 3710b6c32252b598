"""Command-line steps of the pipeline: ``neurd <step> ...``.

Every Snakemake rule is one of these calls, so any table or figure can be
remade by hand from its config snapshot (``results/config/<section>.json``)
and its input tables; ``neurd <step> --help`` lists the arguments.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time

import pandas as pd

log = logging.getLogger("neurd")

FIGURES = ("fig1", "fig2")


def _matrix_sweep(args) -> None:
    from neurd.config import load_snapshot
    from neurd.pipeline import matrix
    from neurd.tables import write_table

    cfg = load_snapshot(args.config)
    rewards = cfg["rewards"]
    sweep = matrix.sweep(cfg, rewards["win"], rewards["loss"])
    write_table(sweep, args.sweep, columns=matrix.SWEEP_COLUMNS, config=cfg)
    write_table(matrix.tuned(sweep), args.tuned, columns=matrix.SWEEP_COLUMNS, config=cfg,
                extra={"selection": "lowest final regret per (algorithm, forfeit, horizon)"})
    write_table(matrix.readings(cfg), args.readings, columns=matrix.READING_COLUMNS, config=cfg)


def _matrix_trajectories(args) -> None:
    from neurd.config import load_snapshot
    from neurd.pipeline import matrix
    from neurd.tables import write_table

    cfg = load_snapshot(args.config)
    write_table(matrix.trajectories(cfg), args.out, columns=matrix.TRAJECTORY_COLUMNS, config=cfg)


def _figure(args) -> None:
    from neurd.audit import write_audit
    from neurd.config import load_snapshot
    from neurd.figures import style

    module = importlib.import_module(f"neurd.figures.{args.name}")
    tables = {}
    for item in args.input:
        name, _, path = item.partition("=")
        tables[name] = pd.read_parquet(path)
    missing = [n for n in module.INPUTS if n not in tables]
    if missing:
        raise SystemExit(f"figure {args.name} needs --input for {missing}")
    fig, claims = module.make(tables, load_snapshot(args.config))
    style.save(fig, args.png, args.pdf)
    frame = write_audit(claims, args.audit)
    for row in frame.itertuples():
        log.info("%s [%s] %s: %s", args.name, row.verdict, row.claim, row.measured)


def _audit_gather(args) -> None:
    from neurd.audit import gather

    frame = gather(args.audits, args.out)
    log.info("claims audit: %s", dict(frame.verdict.value_counts()))


def _provenance(args) -> None:
    from neurd.config import load_snapshot
    from neurd.provenance import collect
    from neurd.tables import write_json

    write_json(args.out, collect(load_snapshot(args.config)))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="neurd", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)

    p = sub.add_parser("matrix-sweep", help="Fig 1 tables: regret over horizons x step sizes")
    p.add_argument("--config", required=True, help="matrix config snapshot (JSON)")
    p.add_argument("--sweep", required=True, help="output: regret_sweep.parquet")
    p.add_argument("--tuned", required=True, help="output: regret_vs_horizon.parquet")
    p.add_argument("--readings", required=True, help="output: reward_readings.parquet")
    p.set_defaults(func=_matrix_sweep)

    p = sub.add_parser("matrix-trajectories", help="Fig 2 table: logits and policies by round")
    p.add_argument("--config", required=True, help="matrix config snapshot (JSON)")
    p.add_argument("--out", required=True, help="output: trajectories.parquet")
    p.set_defaults(func=_matrix_trajectories)

    p = sub.add_parser("figure", help="draw a paper figure and write its claims audit")
    p.add_argument("name", choices=FIGURES)
    p.add_argument("--config", required=True, help="config snapshot of the figure's section")
    p.add_argument("--input", action="append", default=[], metavar="NAME=PATH",
                   help="an input table (repeat); names as the figure module's INPUTS")
    p.add_argument("--png", required=True)
    p.add_argument("--pdf", required=True)
    p.add_argument("--audit", required=True, help="output: results/audit/<figure>.csv")
    p.set_defaults(func=_figure)

    p = sub.add_parser("audit-gather", help="gather every figure's audit into claims.md")
    p.add_argument("--out", required=True)
    p.add_argument("audits", nargs="+")
    p.set_defaults(func=_audit_gather)

    p = sub.add_parser("provenance", help="write provenance.json for a config")
    p.add_argument("--config", required=True, help="snapshot of the whole config (JSON)")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_provenance)
    return parser


def main(argv=None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    args = build_parser().parse_args(argv)
    start = time.perf_counter()
    args.func(args)
    log.info("neurd %s done in %.1fs", args.step, time.perf_counter() - start)
    return 0


if __name__ == "__main__":
    sys.exit(main())
