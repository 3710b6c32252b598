"""Figure 6: neural NeuRD vs SPG, NashConv through phases of negated reward, per game.

Top row (the paper's a-c): per game, the exact NashConv of the current network
policy against learning iterations, for the entropy level alpha with the lowest
final NashConv of each algorithm; mean over seeds with its bootstrap band (each
seed drawn instead where there are fewer than ``MIN_CI_SAMPLES``); grey
dotted lines behind the curves where the payoff is negated, named in the legend.
Bottom row (d-f): per game, the
average NashConv over all iterations of every run, at every entropy level, as
box plots per algorithm (all levels pooled, as the paper's), every run a dot
coloured and placed left to right by its level.

A run that diverged (its NashConv not finite from a checkpoint on: ``summary.diverged_at``;
a summary without that column is from before it, when no published run diverged) has no
final or average NashConv: a level with such a run has no mean final NashConv and cannot be
an algorithm's best (the top panel says which were passed over), and the bottom panels
leave the run out and say how many they left out.

The paper gives the entropy level no symbol (the regularisation it follows
calls it eta, which is the step size in Figs 1, 2 and 4b): here it is alpha.

The claims audit, and what the tables say of themselves (the scale they were measured at),
are :mod:`neurd.figures.fig6_claims`'s.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd import names
from neurd.figures import style
from neurd.figures.fig6_claims import (  # noqa: F401  (the audit's names, re-exported)
    FIGURE,
    PAPER_PHASE_ITERATIONS,
    PAPER_PHASE_TEXT,
    PAPER_SEEDS,
    best_entropies,
    claims,
    faster_claim,
    grid_claim,
    phase_length,
    scale_label,
    scale_note,
    seed_runs,
    table_games,
)
from neurd.neural.results import diverged_runs, finished_runs
from neurd.stats import MIN_CI_SAMPLES

INPUTS = {
    "nashconv": "neural/nashconv.parquet",
    "ci": "neural/nashconv_ci.parquet",
    "summary": "neural/summary.parquet",
    "diagnostics": "neural/diagnostics.parquet",
}
PANELS = "abcdefghijkl"
SPREAD = 0.22  # half-width of the dots' spread over a box, in categories (_dots)
LEVELS_CMAP = "viridis"
TITLE_WIDTH = 52  # characters of a top panel's title line


def _curve(ci: pd.DataFrame, game: str, algorithm: str, entropy: float) -> pd.DataFrame:
    rows = ci[(ci.game == game) & (ci.algorithm == algorithm) & (ci.entropy == entropy)]
    return rows.sort_values(["iteration", "phase"])


def _passed_over(summary: pd.DataFrame, game: str, best: Mapping[str, float]) -> str:
    """What the top panel does not show for diverged runs, in lines as wide as its title's:
    the levels passed over, and the algorithms left without a best level ('' where no run
    diverged)."""
    runs = diverged_runs(summary, game)
    if runs.empty:
        return ""
    parts = [f"{style.algorithm_label(a)} \N{GREEK SMALL LETTER ALPHA} "
             + ", ".join(f"{e:g}" for e in sorted(set(runs[runs.algorithm == a].entropy)))
             + ("" if a in best else " (all: no best)")
             for a in style.algorithm_order(runs.algorithm)]
    text = textwrap.fill("passed over (a run diverged): " + "; ".join(parts), TITLE_WIDTH)
    return text.replace("\N{GREEK SMALL LETTER ALPHA}", r"$\alpha$")


def _levels(summary: pd.DataFrame, game: str) -> str:
    count = summary[summary.game == game].entropy.nunique()
    return f"{count} entropy level{'s' * (count != 1)}"


def _left_out(runs: pd.DataFrame) -> str:
    """The bottom panel's note of the diverged ``runs`` it leaves out ('' where none)."""
    if runs.empty:
        return ""
    counts = runs.algorithm.value_counts()
    return (f"{len(runs)} run{'s' * (len(runs) != 1)} diverged (left out): "
            + ", ".join(f"{counts[a]} {style.algorithm_label(a)}"
                        for a in style.algorithm_order(counts.index)))


def _scale_name(scale: str | None, name: str) -> str | None:
    """The scale a figure's rows are labelled with: the config's, or the publication's."""
    if name != FIGURE:
        return f"published/{name.removeprefix(FIGURE + '_')}"
    return f"{scale} scale" if scale else None


def _level_colours(levels) -> dict[float, tuple]:
    import matplotlib

    cmap = matplotlib.colormaps[LEVELS_CMAP]
    n = len(levels)
    return {level: cmap(0.9 * k / max(n - 1, 1)) for k, level in enumerate(sorted(levels))}


def _dots(ax, rows: pd.DataFrame, order: list[str], colours: Mapping[float, tuple]) -> None:
    """Every run's average NashConv as a dot over its algorithm's box, coloured by its
    entropy level and placed left to right by it (its seeds side by side within the
    level's slot): the levels the box pools stay apart, no random jitter."""
    levels = sorted(colours)
    limits = ax.get_xlim()
    for position, algorithm in enumerate(order):
        runs = rows[rows.algorithm == algorithm]
        for k, level in enumerate(levels):
            values = runs[runs.entropy == level].sort_values("seed").average_nash_conv
            n = len(values)
            slot = (k + (np.arange(n) + 0.5) / max(n, 1)) / len(levels)
            ax.scatter(position - SPREAD + 2 * SPREAD * slot, values, color=colours[level],
                       s=16, edgecolor="black", linewidth=0.3, zorder=3)
    ax.set_xlim(limits)


def _top(ax, nashconv, ci, summary, game, panel, cfg) -> None:
    """Panel (a-c): each algorithm at its best level, mean with a band or every seed; the
    levels passed over for a diverged run named below the title."""
    best = best_entropies(summary, game)
    seeds = summary[summary.game == game].seed.nunique()
    band = seeds >= MIN_CI_SAMPLES
    for algorithm in style.algorithm_order(best):
        entropy = best[algorithm]
        c = _curve(ci, game, algorithm, entropy)
        color = style.algorithm_colour(algorithm)
        ax.plot(c.iteration, c["mean"], color=color, linewidth=1.6,
                label=rf"{style.algorithm_label(algorithm)} ($\alpha$ = {entropy:g})")
        if band:
            ax.fill_between(c.iteration, c.ci_low, c.ci_high, color=color, alpha=0.25,
                            linewidth=0)
            continue
        for _, run in seed_runs(nashconv, game, algorithm, entropy).items():
            run = run.sort_values(["iteration", "phase"])
            ax.plot(run.iteration, run.nash_conv, color=color, linewidth=0.7, alpha=0.5)
    length = phase_length(nashconv, game)
    for k, boundary in enumerate(range(length, int(ci[ci.game == game].iteration.max()),
                                       length)):
        ax.axvline(boundary, **style.NEGATION_LINE,
                   label=style.NEGATION_LABEL if k == 0 else "_nolegend_")
    level = int(round(100 * float(cfg["bootstrap"]["confidence"])))
    spread = (f"{level}% bootstrap CI" if band else
              f"thin: each seed (< {MIN_CI_SAMPLES} seeds: no CI)")
    passed = _passed_over(summary, game, best)
    ax.set(xlabel="learning iterations (critic updates)", ylabel="NashConv (current policy)",
           title=rf"({panel}) {names.game_title(game)}: best entropy level $\alpha$ per "
                 f"algorithm,\nmean of {seeds} seeds, {spread}" + (f"\n{passed}" if passed else ""))
    ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 3))


def plot(nashconv, ci, summary, cfg, title: str | None = None, scale: str | None = None):
    """The figure; ``scale``: what its rows are labelled with (:func:`_scale_name`)."""
    import matplotlib.pyplot as plt
    import seaborn as sns
    from matplotlib.lines import Line2D

    style.setup()
    games = table_games(summary)
    fig, axes = plt.subplots(2, len(games), figsize=(4.6 * len(games), 7.6), squeeze=False)
    colours = _level_colours(summary.entropy.unique())
    for col, game in enumerate(games):
        _top(axes[0, col], nashconv, ci, summary, game, PANELS[col], cfg)
        box = axes[1, col]
        rows = finished_runs(summary, game)
        order = style.algorithm_order(rows.algorithm)
        sns.boxplot(data=rows, x="algorithm", y="average_nash_conv", order=order, ax=box,
                    hue="algorithm", palette={a: style.algorithm_colour(a) for a in order},
                    legend=False, showfliers=False, width=0.5, boxprops={"alpha": 0.45})
        _dots(box, rows, order, colours)
        box.set_xticks(range(len(order)), [style.algorithm_label(a) for a in order])
        box.set(xlabel=_left_out(diverged_runs(summary, game)),
                ylabel="average NashConv over all iterations",
                title=f"({PANELS[len(games) + col]}) {names.game_title(game)}: every run at "
                      f"{_levels(summary, game)}")
    handles = [Line2D([], [], marker="o", linestyle="none", markerfacecolor=c,
                      markeredgecolor="black", markeredgewidth=0.3, markersize=6,
                      label=f"{level:g}") for level, c in colours.items()]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), fontsize=8,
               title=r"dots: every run, by its entropy level $\alpha$ (left to right)",
               title_fontsize=8, frameon=False, bbox_to_anchor=(0.5, 0.0))
    if title:
        fig.suptitle(title, fontsize=10)
    style.note(fig, "; ".join(
        f"{names.game_title(g)}: {scale_label(nashconv, g, scale)[0]}" for g in games))
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    for col in range(len(games)):
        style.place_legend(axes[0, col], fontsize=8)
    return fig


def make(tables: Mapping[str, pd.DataFrame], cfg: Mapping, name: str = FIGURE,
         scale: str | None = None):
    """Figure and claims from the tables named in :data:`INPUTS`; ``scale``: the config's
    (a publication's figure, ``fig6_<name>``, is labelled with the publication instead).
    The figure draws every algorithm the run has (:mod:`neurd.neural.algorithms`, in
    :func:`~neurd.figures.style.algorithm_order`, with the registry's labels); the claims
    are the paper's, of NeuRD and SPG."""
    paper = {key: frame[frame.algorithm.isin(names.LEARNERS)] if "algorithm" in frame
             else frame for key, frame in tables.items()}
    # fig6_<name>: drawn from the publication published/<name> (neurd.pipeline.published)
    label = _scale_name(scale, name)
    title = None if name == FIGURE else f"{name}: Fig 6 from the published run {label}"
    return (plot(tables["nashconv"], tables["ci"], tables["summary"], cfg, title, label),
            claims(paper["nashconv"], paper["ci"], paper["summary"], paper["diagnostics"], cfg,
                   label))
