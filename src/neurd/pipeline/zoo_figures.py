"""The zoo's two figures (:mod:`neurd.pipeline.zoo`): the grid of curves and the ranks.

* the grid: one panel per game (its short name and size; its parameters are
  the summary's ``game_string``), NashConv of the average policy against
  iterations, log-log, for CFR(NeuRD) and CFR(SPG) at their tuned step sizes,
  CFR and CFR+; a game whose uniform policy is already a Nash equilibrium
  (NashConv 0 to rounding) says so in its panel;
* the ranks: per game (rows) and learner (columns), the rank of the final
  NashConv (1: lowest), the value written in the cell; beside it, how many
  games each learner ranks first, second, ... among those whose uniform policy
  is not already Nash (in the others every learner ties).

Drawn with the paper figures' style (:mod:`neurd.figures.style`); matplotlib
is imported when a figure is drawn.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from neurd import names
from neurd.figures import style

# A NashConv at most this (relative to the uniform policy's, or absolutely) is 0 to
# rounding; a log axis cannot draw it.
ZERO = 1e-12
# The zoo's learners: CFR with NeuRD, with SPG, with regret matching (OpenSpiel's CFR), CFR+.
LEARNERS = (names.NEURD, names.SPG, names.CFR_RM, names.CFR_PLUS)


def grid(curves: pd.DataFrame, summary: pd.DataFrame):
    """The figure: one log-log panel per game, the four learners' curves."""
    import matplotlib.pyplot as plt

    style.setup()
    game_names = sorted(summary.game.unique())
    columns = min(5, len(game_names))
    rows = math.ceil(len(game_names) / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(3.0 * columns, 2.5 * rows),
                             squeeze=False)
    for ax, game in zip(axes.flat, game_names):
        _panel(ax, curves[curves.game == game], summary[summary.game == game])
    for ax in axes.flat[len(game_names):]:
        ax.set_visible(False)
    handles = [plt.Line2D([], [], color=style.PALETTE[a], linestyle="-" if a in names.LEARNERS
                          else "--", label=style.LABELS[a]) for a in LEARNERS]
    fig.legend(handles=handles, loc="lower center", ncol=len(handles),
               bbox_to_anchor=(0.5, -0.01), frameon=False)
    fig.suptitle("NashConv of the average policy (tuned step size for NeuRD and SPG)")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def _panel(ax, curves: pd.DataFrame, summary: pd.DataFrame) -> None:
    uniform = float(summary.uniform_nash_conv.iloc[0])
    floor = ZERO * max(uniform, 1.0)
    for row in summary.to_dict("records"):
        learner = row["learner"]
        rows = curves[curves.algorithm == learner]
        if learner in names.LEARNERS:
            rows = rows[np.isclose(rows.step_size, row["step_size"], rtol=0, atol=0)]
        rows = rows.sort_values("iteration")
        values = rows.nash_conv.to_numpy()
        ax.plot(rows.iteration, np.where(values > floor, values, np.nan),
                color=style.PALETTE[learner],
                linestyle="-" if learner in names.LEARNERS else "--", linewidth=1.2)
    ax.set(xscale="log", yscale="log", xlim=(1, int(curves.iteration.max())),
           title=f"{summary.game.iloc[0]} ({int(summary.histories.iloc[0]):,} histories)")
    ax.title.set_fontsize(8)
    ax.tick_params(labelsize=6)
    if uniform <= floor:
        ax.text(0.5, 0.5, "uniform policy is Nash:\nNashConv 0 throughout",
                transform=ax.transAxes, ha="center", va="center", fontsize=7)
        ax.set_yscale("linear")
        ax.set_yticks([])


def ranks(summary: pd.DataFrame):
    """The figure: rank of each learner's final NashConv per game, and the wins."""
    import matplotlib.pyplot as plt

    style.setup()
    learners = LEARNERS
    final = [c for c in summary.columns if c.startswith("nash_conv_")][-1]
    table = summary.pivot(index="game", columns="learner", values="rank")[list(learners)]
    values = summary.pivot(index="game", columns="learner", values=final)[list(learners)]
    fig, (heat, wins) = plt.subplots(1, 2, figsize=(9.5, 0.32 * len(table) + 1.6),
                                     gridspec_kw={"width_ratios": [2.2, 1]})
    heat.imshow(table.to_numpy(), cmap="RdYlGn_r", vmin=1, vmax=len(learners), aspect="auto")
    for (i, j), rank in np.ndenumerate(table.to_numpy()):
        heat.text(j, i, f"{rank}: {values.iat[i, j]:.2g}", ha="center", va="center",
                  fontsize=6, color="white" if rank in (1, len(learners)) else "black")
    heat.set_xticks(range(len(learners)), [style.LABELS[a] for a in learners], fontsize=7)
    heat.set_yticks(range(len(table)), table.index, fontsize=7)
    heat.grid(False)
    heat.set_title(f"rank of the final NashConv ({final.split('_')[-1]} iterations; "
                   "1: lowest)", fontsize=8)
    uniform = summary.groupby("game").uniform_nash_conv.first().loc[table.index]
    open_games = table[uniform.to_numpy() > ZERO * np.maximum(uniform.to_numpy(), 1.0)]
    colors = plt.get_cmap("RdYlGn_r")(np.linspace(0, 1, len(learners)))
    left = np.zeros(len(learners))
    for rank, color in zip(range(1, len(learners) + 1), colors):
        counts = np.array([int((open_games[a] == rank).sum()) for a in learners])
        wins.barh(range(len(learners)), counts, left=left, color=color, label=f"rank {rank}")
        for k, count in enumerate(counts):
            if count:
                wins.text(left[k] + count / 2, k, str(count), ha="center", va="center",
                          fontsize=7, color="white" if rank in (1, len(learners)) else "black")
        left += counts
    wins.set_yticks(range(len(learners)), [style.LABELS[a] for a in learners], fontsize=7)
    wins.invert_yaxis()
    wins.set_xlabel(f"games at each rank, of the {len(open_games)} whose uniform policy is "
                    "not Nash", fontsize=7)
    wins.legend(fontsize=6, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=len(learners),
                frameon=False)
    fig.tight_layout()
    return fig


def save_grid(curves: pd.DataFrame, summary: pd.DataFrame, paths) -> None:
    import matplotlib.pyplot as plt

    fig = grid(curves, summary)
    style.save(fig, *paths)
    plt.close(fig)


def save_ranks(summary: pd.DataFrame, paths) -> None:
    import matplotlib.pyplot as plt

    fig = ranks(summary)
    style.save(fig, *paths)
    plt.close(fig)
