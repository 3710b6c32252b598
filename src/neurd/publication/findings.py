"""``neurd published-findings``: what a publication's Fig 6 says, written into the findings page.

docs/findings.md's section on the paper-length Fig 6 is not written by hand: this step
writes it between its marks from the publication alone (``published/paper``: its
manifest, its blocks' curves checked and its derived tables), with the audit's own claims
(:func:`neurd.figures.fig6.claims`, as ``fig6_paper``'s audit rows are measured), so that
its numbers are the published seeds' on every machine.  ``tests/test_findings.py`` checks
that the page's part is what the publication gives now.

It joins two floors: the publication, checked against nothing but itself
(:mod:`neurd.publication`), and the figure's claims; so it sits above both, beside the
command line that adds it.
"""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

from neurd.figures import fig6
from neurd.names import game_title
from neurd.neural import results
from neurd.publication import check as check_publication
from neurd.publication import check_content, fig6_tables
from neurd.tables import span_between, write_between

log = logging.getLogger(__name__)

MARKS = ("<!-- {folder}: the paper-length Fig 6, written by neurd published-findings -->",
         "<!-- /{folder}: the paper-length Fig 6 -->")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def findings(folder: str | Path) -> str:
    """The section: per game the seeds published, the CPU hours and GPU minutes they took
    and how many of its runs diverged (where any did), and every Fig 6 claim judged on them
    (claim, verdict, what was measured)."""
    folder = Path(folder)
    name = f"published/{folder.name}"  # as the workflow names it (published.folder)
    manifest, cfg = check_publication(folder)
    total = int(cfg["seeds"])
    entries = {g: manifest["games"].get(g, {}) for g in cfg["games"]}
    if not any(e.get("seeds") for e in entries.values()):
        return "\n".join([_seeds_line(name, cfg, entries, {}), "", _fill(
            "No seed is published yet: no Fig 6 claim is judged at the paper's length, and "
            "the Fig 6 findings above are the default scale's alone.")])
    curves = check_content(folder, manifest, cfg, states=False)
    tables = fig6_tables(curves, folder, manifest, cfg)
    diverged = {g: len(results.every_diverged_run(tables["summary"], tables["diagnostics"], g))
                for g in entries}
    claims = fig6.claims(tables["nashconv"], tables["nashconv_ci"], tables["summary"],
                         tables["diagnostics"], cfg, name)
    lines = [_seeds_line(name, cfg, entries, diverged), "",
             _fill(f"Each claim as `fig6_{folder.name}`'s audit judges it, on the seeds "
                   f"published (a game with fewer than {total} is judged on those alone, and "
                   f"its rows say so){_diverged_text(diverged)}:"), "",
             "| claim | verdict | measured |", "| --- | --- | --- |"]
    lines += [f"| {_cell(c.claim)} | {c.verdict} | {_cell(c.measured)} |" for c in claims]
    return "\n".join(lines)


def _runs(n: int) -> str:
    return f"{n} run{'s' * (n != 1)}"


def _seeds_line(name: str, cfg, entries, diverged: dict[str, int]) -> str:
    """The seeds published per game, what they took, and how many of its runs diverged
    (``diverged``: per game, where any seed is published)."""
    held = []
    for game, entry in entries.items():
        text = f"{game_title(game)} {len(entry.get('seeds', []))} of {int(cfg['seeds'])}"
        if entry.get("seeds"):
            lost = diverged.get(game, 0)
            text += (f" ({entry.get('cpu_hours', 0)} CPU hours, {entry.get('gpu_minutes', 0)} "
                     f"GPU minutes{f'; {_runs(lost)} diverged' if lost else ''})")
        held.append(text)
    return _fill(f"Seeds in `{name}` ({int(cfg['phases'])} x {_lengths(cfg)} learning "
                 f"iterations), per game: {'; '.join(held)}.")


def _diverged_text(diverged: dict[str, int]) -> str:
    """What the claims make of the runs that diverged ('' where none did)."""
    lost = sum(diverged.values())
    if not lost:
        return ""
    return (f"; {_runs(lost)} diverged (NashConv not finite from a checkpoint on): the other "
            "claims are judged without them, and each game's \"every run finishes without "
            "diverging\" names its own")


def _fill(text: str) -> str:
    return textwrap.fill(text, width=92, break_on_hyphens=False)


def _lengths(cfg) -> str:
    lengths = sorted({int(v) for v in cfg["phase_iterations"].values()})
    return " / ".join(f"{n:,}" for n in lengths)


def page_part(text: str, folder: str) -> tuple[int, int] | None:
    """The span of the generated section between ``folder``'s marks in ``text``."""
    return span_between(text, tuple(mark.format(folder=folder) for mark in MARKS))


def _step(args) -> None:
    folder = Path(args.folder).as_posix().rstrip("/")
    write_between(args.page, tuple(mark.format(folder=folder) for mark in MARKS),
                  "\n" + findings(folder) + "\n")
    log.info("%s: the paper-length Fig 6 of %s written", args.page, folder)


def register(sub) -> None:
    """Add ``neurd published-findings`` to the command line."""
    p = sub.add_parser("published-findings", help="write a publication's Fig 6 claims, judged "
                       "on its seeds, between their marks in the findings page")
    p.add_argument("folder", help="the publication (published/paper)")
    p.add_argument("--page", default="docs/findings.md",
                   help="the page holding the section's marks")
    p.set_defaults(func=_step)
