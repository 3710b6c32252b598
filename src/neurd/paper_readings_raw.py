"""The raw reading at the paper's length: the publication ``published/raw_logits``, the
paper-scale Fig 6 computed under ``neural.neurd_logits: raw`` (Algorithm 1's loss on the
network's raw outputs) before the default became the centred reading, kept as the evidence
of that decision (docs/readings.md).

``python -m neurd.paper_readings raw-logits`` (part of ``make readings-paper-publish``)
checks the publication against its config file (``workflow/config/paper_raw_logits.yaml``),
as the pipeline checks the publication it draws, and writes beside the study's table
and figure (``published/readings/paper-length``):

* ``raw_logits.png``: the readings figure "raw logits at the paper's length", Fig 6 drawn
  from the publication's seeds, the diverged runs named under each panel;
* ``raw_logits.md``: its divergence counts, per game, critic, algorithm and entropy level
  (the runs, those that diverged and at which iterations), also written into
  docs/readings.md between its markers (tested to be what the publication gives).
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pandas as pd

from neurd.figures import fig6
from neurd.names import game_title
from neurd.neural.results import every_diverged_run
from neurd.paper_readings_report import write_between
from neurd.publication import check as check_publication
from neurd.publication import check_content
from neurd.publication.commands import expected_snapshot, neural_defaults
from neurd.publication.content import fig6_tables

FOLDER = Path("published/raw_logits")
CONFIGFILE = "workflow/config/paper_raw_logits.yaml"
PNG, TABLE = "raw_logits.png", "raw_logits.md"
TITLE = "Raw logits at the paper's length"
BEGIN = "<!-- raw-logits: written by python -m neurd.paper_readings raw-logits -->"
END = "<!-- /raw-logits -->"


def tables(folder: str | os.PathLike = FOLDER, configfile: str = CONFIGFILE,
           workflow: str | os.PathLike = ".") -> tuple[dict[str, pd.DataFrame], dict]:
    """The publication's Fig 6 tables and its neural config, checked as the pipeline checks
    the publication it draws: its files and hashes, the config file's neural section as it
    is now, its blocks' content."""
    folder = Path(workflow) / folder
    manifest, neural = check_publication(folder, expected_snapshot(configfile, workflow),
                                         configfile, neural_defaults(workflow))
    curves = check_content(folder, manifest, neural, states=False)
    return fig6_tables(curves, folder, manifest, neural), neural


def divergences(summary: pd.DataFrame, diagnostics: pd.DataFrame, neural) -> pd.DataFrame:
    """Per game, critic, algorithm and entropy level: the runs, those that diverged and the
    iterations at which they had (the learned critic's runs are the summary's; the exact
    critic's, where a game has them, the diagnostics')."""
    rows = []
    for game in [g for g in neural["games"] if g in set(summary.game)]:
        lost = every_diverged_run(summary, diagnostics, game)
        lost["critic"] = lost.critic.replace({"main": neural["critic"]})
        seeds = summary[summary.game == game].seed.nunique()
        critics = sorted(set(diagnostics[diagnostics.game == game].critic),
                         key=lambda c: c != neural["critic"])
        for critic in critics:
            for algorithm in neural["algorithms"]:
                for level in neural["entropies"]:
                    gone = lost[(lost.critic == critic) & (lost.algorithm == algorithm)
                                & (lost.entropy == level)]
                    rows.append({"game": game, "critic": critic, "algorithm": algorithm,
                                 "entropy": float(level), "runs": seeds,
                                 "diverged": len(gone),
                                 "diverged at": ", ".join(f"{int(i):,}" for i in
                                                          sorted(gone.diverged_at))})
    return pd.DataFrame(rows)


def markdown(counts: pd.DataFrame, neural) -> str:
    """The counts as Markdown: a line per game and critic, then a table of the levels."""
    out = []
    for (game, critic), block in counts.groupby(["game", "critic"], sort=False):
        totals = "; ".join(
            f"{algorithm} {int(rows.diverged.sum())} of {int(rows.runs.sum())}"
            for algorithm, rows in block.groupby("algorithm", sort=False))
        out.append(f"\n**{game_title(game)}, {critic} critic, {block.runs.iloc[0]} seeds, "
                   f"{neural['phases']} phases of {neural['phase_iterations'][game]:,} "
                   f"iterations**: runs diverged: {totals}\n")
        out.append("| algorithm | entropy | runs | diverged | diverged at |")
        out.append("| --- | --- | --- | --- | --- |")
        for row in block.to_dict("records"):
            out.append(f"| {row['algorithm']} | {row['entropy']:g} | {row['runs']} | "
                       f"{row['diverged']} | {row['diverged at']} |")
    return "\n".join(out).strip() + "\n"


def headline(counts: pd.DataFrame) -> str:
    """The runs diverged, per game and critic and algorithm, in a line."""
    parts = []
    for (game, critic), block in counts.groupby(["game", "critic"], sort=False):
        totals = ", ".join(f"{algorithm} {int(rows.diverged.sum())} of {int(rows.runs.sum())}"
                           for algorithm, rows in block.groupby("algorithm", sort=False))
        parts.append(f"{game_title(game)} ({critic} critic): {totals}")
    return "runs diverged: " + "; ".join(parts)


def draw(made: dict[str, pd.DataFrame], neural, counts: pd.DataFrame, png: Path) -> None:
    """The readings figure: Fig 6 of the publication's seeds under :data:`TITLE`, with the
    divergence counts of both critics (the panels draw the learned critic's runs)."""
    import matplotlib.pyplot as plt

    figure = fig6.plot(made["nashconv"], made["nashconv_ci"], made["summary"], neural,
                       f"{TITLE} ({FOLDER}, neural.neurd_logits raw)\n"
                       + textwrap.fill(headline(counts), 150), str(FOLDER))
    figure.savefig(png)
    plt.close(figure)


def report(out: Path, docs: Path = Path("docs/readings.md"), workflow: Path = Path(".")
           ) -> int:
    """Check the publication, draw the figure and write the counts (``out``: the study's
    published folder) and into ``docs`` between its markers."""
    made, neural = tables(workflow=workflow)
    counts = divergences(made["summary"], made["diagnostics"], neural)
    text = markdown(counts, neural)
    out.mkdir(parents=True, exist_ok=True)
    (out / TABLE).write_text(text)
    draw(made, neural, counts, out / PNG)
    write_between(docs, BEGIN, END, text)
    print(f"{FOLDER}: {out / TABLE}, {out / PNG}")
    return 0
