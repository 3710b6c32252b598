"""``neurd published-costs``: what the rest of a publication costs on each processor measured,
written into docs/paper-scale.md.

Per game and processor with a throughput file in ``bench/cpu`` (each CPU allocation keeps its
processor's rows there): the seeds left, the seeds a block a CPU allocation would run there, the
seconds a seed takes and the CPU hours of the rest at that pace
(:func:`neurd.publication.cpu_schedule.seed_costs`), and whether that processor computed any of
the game's published seeds.  ``make publish-blocks`` writes it after each allocation.
"""

from __future__ import annotations

import json
import logging
import textwrap
from pathlib import Path

from neurd.names import game_title
from neurd.publication import check as check_publication
from neurd.publication.costs import SAFETY
from neurd.publication.cpu_schedule import ALLOCATION_MINUTES, SeedCost, seed_costs
from neurd.tables import span_between, write_between

log = logging.getLogger(__name__)

MARKS = ("<!-- {folder}: the cost of the rest, written by neurd published-costs -->",
         "<!-- /{folder}: the cost of the rest -->")


def costs(folder: str | Path, tables: str | Path) -> tuple[dict, list[SeedCost]]:
    """The publication's config (``folder``, checked) and the cost of its seeds left on each
    processor of ``tables`` (the throughput files: ``bench/cpu``)."""
    manifest, cfg = check_publication(folder)
    games = manifest["games"]
    kept = [dict(json.loads(path.read_text()), name=path.name)
            for path in sorted(Path(tables).glob("*.json"))]
    return cfg, seed_costs(cfg, {g: games.get(g, {}).get("seeds", []) for g in cfg["games"]},
                           {g: games.get(g, {}).get("devices", []) for g in cfg["games"]}, kept)


def section(folder: str | Path, tables: str | Path) -> str:
    """The generated section: its sentence and its table."""
    cfg, found = costs(folder, tables)
    order = {g: i for i, g in enumerate(cfg["games"])}
    rows = sorted(found, key=lambda c: (order[c.game], c.seconds_per_seed, c.processor))
    lines = [textwrap.fill(
        f"What the seeds left cost on each processor measured (`{Path(tables).as_posix()}`: "
        "its rows of the code it measured last), in the blocks a "
        f"{ALLOCATION_MINUTES:.0f}-minute CPU allocation runs there, priced as its schedule "
        f"prices them (with its safety factor {SAFETY}); a game with no seed left, at the "
        "blocks of all its seeds:", width=92), "",
             "| game | seeds left | processor | computed it | seeds a block | seconds a seed "
             "| CPU hours left |", "| --- | ---: | --- | --- | ---: | ---: | ---: |"]
    lines += [f"| {game_title(c.game)} | {c.seeds_left} | {c.processor} | "
              f"{'yes' if c.computed else 'no'} | {c.block} | {c.seconds_per_seed:,.0f} | "
              f"{c.hours_left:,.1f} |" for c in rows]
    return "\n".join(lines)


def page_part(text: str, folder: str) -> tuple[int, int] | None:
    """The span of the generated section between ``folder``'s marks in ``text``."""
    return span_between(text, tuple(mark.format(folder=folder) for mark in MARKS))


def _step(args) -> None:
    folder = Path(args.folder).as_posix().rstrip("/")
    write_between(args.page, tuple(mark.format(folder=folder) for mark in MARKS),
                  "\n" + section(folder, args.tables) + "\n")
    log.info("%s: the cost of the rest of %s written", args.page, folder)


def register(sub) -> None:
    """Add ``neurd published-costs`` to the command line."""
    p = sub.add_parser("published-costs", help="write what a publication's seeds left cost on "
                       "each processor measured between their marks in the paper-scale page")
    p.add_argument("folder", help="the publication (published/paper)")
    p.add_argument("--tables", default="bench/cpu", help="the processors' throughput files")
    p.add_argument("--page", default="docs/paper-scale.md",
                   help="the page holding the section's marks")
    p.set_defaults(func=_step)
