"""The readings study's last step, ``neurd readings-grid``: every reading's Fig 6 claims,
tables and figure written at once.

It joins two floors: the study's config and tables (:mod:`neurd.pipeline.readings`, the
``readings`` stage, whose ``--config`` it checks) and its figure
(:mod:`neurd.figures.readings`, which measures the claims with the audit's own code), so
it sits above both, beside the command line that adds it.
"""

from __future__ import annotations

import logging

from neurd.config import ConfigError, load_snapshot
from neurd.figures import readings as figure
from neurd.figures import style
from neurd.names import DEFAULT_READING
from neurd.pipeline import readings as study
from neurd.tables import read_table, write_table, write_text

log = logging.getLogger(__name__)


def _grid_step(args, cfg) -> None:
    readings = [r for r, _ in (item.partition("=")[::2] for item in args.reading)]
    folders = dict(item.partition("=")[::2] for item in args.reading)
    unknown = sorted(set(readings) - {DEFAULT_READING, *cfg["variants"]})
    if unknown:
        raise ConfigError(f"readings {unknown} are not in config readings.variants")
    tables, snapshots, changes = study.read_readings(folders)
    grid = figure.grid_table(tables, snapshots, changes)
    collapse = study.collapse_table(tables, snapshots)
    logits = study.logit_table(study.logit_files(folders, snapshots), snapshots)
    inputs = dict(item.partition("=")[::2] for item in args.input)
    matrix = {name: read_table(inputs[name]) for name in
              ("sweep", "tuned", "readings", "trajectories")}
    rps = {name: read_table(inputs[f"rps_{name}"]) for name in
           ("ci", "readings", "nash", "nashconv")}
    other = figure.other_figures_table(matrix, load_snapshot(args.matrix_config), rps,
                                       load_snapshot(args.rps_config))
    write_table(grid, args.grid, columns=figure.GRID_COLUMNS, config=cfg)
    write_table(other, args.other, columns=figure.OTHER_COLUMNS, config=cfg)
    write_table(collapse, args.collapse, columns=study.COLLAPSE_COLUMNS, config=cfg)
    write_table(logits, args.logits, columns=study.LOGIT_COLUMNS, config=cfg)
    fig = figure.plot(grid, other, collapse, readings, logits)
    figure.scale_note(fig, tables[DEFAULT_READING]["nashconv"])
    style.save(fig, args.png, args.pdf)
    write_text(args.md, figure.markdown(grid, other, readings))
    counts = grid.groupby("reading").verdict.value_counts().unstack(fill_value=0)
    log.info("readings grid:\n%s", counts)


def register(sub) -> None:
    """Add ``neurd readings-grid`` to the command line (its ``--config``: the ``readings``
    section's snapshot, checked by the stage)."""
    p = study.STAGE.add_step(sub, "readings-grid",
                             "the readings study's grid: Fig 6's claims under every reading",
                             _grid_step)
    p.add_argument("--reading", action="append", required=True, metavar="NAME=FOLDER",
                   help="a reading and its results folder (repeat; 'default' first)")
    p.add_argument("--input", action="append", default=[], metavar="NAME=PATH",
                   help="the Figs 1-2 tables (sweep, tuned, readings, trajectories) and "
                        "Fig 5's (rps_ci, rps_readings, rps_nash, rps_nashconv)")
    p.add_argument("--matrix-config", required=True, help="matrix config snapshot")
    p.add_argument("--rps-config", required=True, help="rps config snapshot")
    p.add_argument("--grid", required=True, help="output: grid.parquet")
    p.add_argument("--other", required=True, help="output: other_figures.parquet")
    p.add_argument("--collapse", required=True, help="output: collapse.parquet")
    p.add_argument("--logits", required=True,
                   help="output: logits.parquet (read from each reading's jobs' logits files)")
    p.add_argument("--png", required=True)
    p.add_argument("--pdf", required=True)
    p.add_argument("--md", required=True, help="output: grid.md")
