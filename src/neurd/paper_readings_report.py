"""The paper-length readings study's table and figure (:mod:`neurd.paper_readings`), from
its published cells: per game, critic, reading and entropy level, the runs that diverged
(when, and which quantity stopped being finite first), and the final and average NashConv
of the runs that did not, with bootstrap confidence intervals; and the logits' common mode
over the iterations, by reading.

``python -m neurd.paper_readings report`` writes ``table.md``, ``runs.parquet`` (one row
per run, the table's input) and ``common_mode.png`` into the publication's folder, and the
table into docs/readings.md between its markers.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from neurd.figures import style
from neurd.names import NEURD
from neurd.neural.results import average_nash_conv, diverged_at
from neurd.stats import MIN_CI_SAMPLES, bootstrap_mean_ci
from neurd.tables import read_metadata, read_table, write_table

# what stopped being finite, in the order a divergence runs: the weights, the outputs the
# softmax cannot see, those it can (the NashConv of a run's row of divergence is NaN by
# construction: not a witness)
CAUSAL_ORDER = ("critic_weight_norm", "policy_weight_norm", "common_mode", "centred_logit")
READING_COLOURS = {"raw": "#1f77b4", "centred": "#2ca02c", "centred_all": "#9467bd",
                   "spg (control)": "#d62728"}
READING_LINES = {"spg (control)": "--"}
GAME_ORDER = ("kuhn", "leduc", "goofspiel")
FINAL_CHECKPOINTS = 3  # as the neural section's final_checkpoints default
RUN_COLUMNS = {
    "cell": "the study's cell (neurd.paper_readings.CELLS)",
    "game": "the game's short name",
    "critic": "'learned' or 'exact'",
    "reading": "neural.neurd_logits of NeuRD's runs; 'spg (control)' for SPG's, which run "
               "beside the raw cell's NeuRD",
    "algorithm": "neurd or spg",
    "phases": "phases the cell runs (the payoff negated in even ones)",
    "phase length": "learning iterations per phase (the paper's 330,000)",
    "entropy": "entropy regularisation level",
    "seed": "run seed",
    "diverged_at": "the first checkpoint's iteration at which the run had diverged; null if "
                   "it did not",
    "diverged_phase": "the phase of that checkpoint",
    "first_non_finite": "the growth quantities not finite at that checkpoint, in the order "
                        "critic weights, policy weights, common mode, centred logit "
                        "('+'-joined; 'policy' where all four were finite and the policy's "
                        "NashConv or another float of the learner's state was not)",
    "final_nash_conv": "mean NashConv over the last 3 checkpoints; NaN for a diverged run",
    "average_nash_conv": "area under the NashConv curve over its iterations / their length; "
                         "NaN for a diverged run",
    "largest_common_mode": "the largest common mode measured while the run lived",
}


def cell_curves(published: Path) -> dict[str, pd.DataFrame]:
    """Every published cell's curves, by cell name, with its reading and phases."""
    out = {}
    for path in sorted((published / "cells").glob("*/curves.parquet")):
        meta = read_metadata(path)
        cfg = meta["config"]
        frame = read_table(path)
        out[path.parent.name] = frame.assign(
            reading=meta["reading"], phases=int(cfg["phases"]),
            **{"phase length": int(cfg["phase_iterations"][meta["config"]["games"][0]])})
    return out


def first_non_finite(run: pd.DataFrame, iteration: int, phase: int) -> str:
    """What was not finite at the checkpoint a run diverged at (:data:`CAUSAL_ORDER`)."""
    row = run[(run.iteration == iteration) & (run.phase == phase)].iloc[0]
    names = [n for n in CAUSAL_ORDER if n in row and not np.isfinite(row[n])]
    return "+".join(names) if names else "policy"


def run_rows(curves: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """One row per run of every cell (:data:`RUN_COLUMNS`)."""
    rows = []
    for cell, frame in curves.items():
        for (algorithm, entropy, seed), run in frame.groupby(["algorithm", "entropy", "seed"]):
            run = run.sort_values(["iteration", "phase"])
            lost = run.nash_conv.isna().to_numpy()
            at = diverged_at(run)
            phase = int(run.phase.to_numpy()[lost.argmax()]) if lost.any() else None
            lived = run[~lost]
            rows.append({
                "cell": cell, "game": run.game.iloc[0], "critic": run.critic.iloc[0],
                "reading": run.reading.iloc[0] if algorithm == NEURD else "spg (control)",
                "algorithm": algorithm, "phases": int(run.phases.iloc[0]),
                "phase length": int(run["phase length"].iloc[0]),
                "entropy": float(entropy), "seed": int(seed), "diverged_at": at,
                "diverged_phase": phase,
                "first_non_finite": None if at is None else first_non_finite(run, at, phase),
                "final_nash_conv": float(run.nash_conv.iloc[-FINAL_CHECKPOINTS:].mean(
                    skipna=False)),
                "average_nash_conv": average_nash_conv(run.iteration.to_numpy(),
                                                       run.phase.to_numpy(),
                                                       run.nash_conv.to_numpy()),
                "largest_common_mode": float(lived.common_mode.max()) if len(lived) else np.nan,
            })
    frame = pd.DataFrame(rows, columns=list(RUN_COLUMNS))
    for name in ("diverged_at", "diverged_phase"):
        frame[name] = frame[name].astype("Int64")
    return frame


def _mean_ci(values: np.ndarray) -> str:
    values = values[np.isfinite(values)]
    if not len(values):
        return "-"
    if len(values) < MIN_CI_SAMPLES:
        mean = values.mean()
        return f"{mean:.3f} [{values.min():.3f}, {values.max():.3f}]"
    mean, low, high = bootstrap_mean_ci(values, resamples=1000, seed=0)
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


def table(runs: pd.DataFrame) -> pd.DataFrame:
    """Per game, critic, phases, reading and level: the runs, those diverged and when, the
    final and average NashConv of the others (mean and range, or bootstrap 95% CI from 5
    runs on)."""
    rows = []
    keys = ["game", "critic", "phases", "reading", "entropy"]
    order = {"game": list(GAME_ORDER), "critic": ["learned", "exact"],
             "reading": [*READING_COLOURS]}
    rank = {k: {v: i for i, v in enumerate(vs)} for k, vs in order.items()}
    runs = runs.sort_values(keys, key=lambda col: col.map(rank[col.name]).fillna(99)
                            if col.name in rank else col, kind="stable")
    for key, group in runs.groupby(keys, sort=False):
        lost = group[group.diverged_at.notna()]
        when = ", ".join(f"{int(i):,}" for i in sorted(lost.diverged_at)) if len(lost) else ""
        first = ", ".join(sorted(set(lost.first_non_finite))) if len(lost) else ""
        rows.append({**dict(zip(keys, key)), "phase length": int(group["phase length"].iloc[0]),
                     "runs": len(group), "diverged": len(lost),
                     "diverged at": when, "not finite first": first,
                     "final NashConv": _mean_ci(group.final_nash_conv.to_numpy()),
                     "average NashConv": _mean_ci(group.average_nash_conv.to_numpy()),
                     "largest common mode": f"{group.largest_common_mode.max():.3g}"})
    return pd.DataFrame(rows)


def markdown(summary: pd.DataFrame) -> str:
    """The table as Markdown, one block per game and critic."""
    out = []
    for (game, critic, phases), block in summary.groupby(["game", "critic", "phases"],
                                                         sort=False):
        length = int(block["phase length"].iloc[0])
        out.append(f"\n**{game}, {critic} critic, {phases} phase{'s' if phases > 1 else ''} "
                   f"of {length:,} iterations**\n")
        columns = ["reading", "entropy", "runs", "diverged", "diverged at",
                   "not finite first", "final NashConv", "average NashConv",
                   "largest common mode"]
        out.append("| " + " | ".join(columns) + " |")
        out.append("| " + " | ".join("---" for _ in columns) + " |")
        for _, row in block.iterrows():
            out.append("| " + " | ".join(f"{row[c]:g}" if c == "entropy" else str(row[c])
                                         for c in columns) + " |")
    return "\n".join(out).strip() + "\n"




def figure(curves: dict[str, pd.DataFrame], png: Path, pdf: Path | None = None) -> None:
    """The policy logits' common mode over the iterations: a row per game and critic, a
    column per entropy level, a colour per reading (each seed a line; a cross where a run
    diverged, at its last finite value; SPG dashed)."""
    style.setup()
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    data = pd.concat([frame.assign(shown=np.where(frame.algorithm == NEURD, frame.reading,
                                                  "spg (control)"))
                      for frame in curves.values()], ignore_index=True)
    panels = sorted(set(zip(data.game, data.critic)), key=lambda p: (
        GAME_ORDER.index(p[0]) if p[0] in GAME_ORDER else 99, p[0], p[1] != "learned"))
    levels = sorted(data.entropy.unique())
    fig, axes = plt.subplots(len(panels), len(levels),
                             figsize=(3.0 * len(levels), 2.4 * len(panels) + 0.6),
                             sharex="row",
                             squeeze=False)
    for r, (game, critic) in enumerate(panels):
        rows = data[(data.game == game) & (data.critic == critic)]
        ends = sorted(set(rows.iteration[rows.phase < rows.phase.max()]
                          .groupby(rows.phase).max()))  # the negations
        for c, level in enumerate(levels):
            ax = axes[r][c]
            for shown in READING_COLOURS:  # the raw reading under the others
                chosen = rows[(rows.entropy == level) & (rows.shown == shown)]
                for _, run in chosen.groupby("seed"):
                    run = run.sort_values(["iteration", "phase"])
                    lived = run[np.isfinite(run.common_mode.to_numpy(dtype=float))]
                    ax.plot(lived.iteration, lived.common_mode, color=READING_COLOURS[shown],
                            linestyle=READING_LINES.get(shown, "-"), linewidth=0.8, alpha=0.8)
                    if run.nash_conv.isna().any() and len(lived):
                        ax.plot(lived.iteration.iloc[-1], lived.common_mode.iloc[-1], "x",
                                color=READING_COLOURS[shown], markersize=7, mew=1.6)
            for boundary in ends:
                ax.axvline(boundary, **style.NEGATION_LINE)
            ax.set_yscale("log")
            ax.set_title(f"{game} ({critic}), $\\alpha$ = {level:g}", fontsize=9)
            ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 3))
            if c == 0:
                ax.set_ylabel("common mode")
            if r == len(panels) - 1 or c == 0:
                ax.set_xlabel("iteration")
    handles = [Line2D([], [], color=colour, linestyle=READING_LINES.get(label, "-"),
                      label=label)
               for label, colour in READING_COLOURS.items() if label in set(data.shown)]
    handles.append(Line2D([], [], color="0.3", marker="x", linestyle="", label="diverged"))
    handles.append(Line2D([], [], **{k: v for k, v in style.NEGATION_LINE.items()
                                     if k != "gid"}, label=style.NEGATION_LABEL))
    height = fig.get_figheight()  # the header: the title, then the legend
    fig.suptitle("NeuRD's policy network: the common mode of its logits (per state, the "
                 "mean raw output over the legal actions; its largest size over the states "
                 "visited), by reading", fontsize=11, y=1 - 0.08 / height, va="top")
    fig.legend(handles=handles, loc="upper center", ncol=len(handles), frameon=False,
               bbox_to_anchor=(0.5, 1 - 0.38 / height))
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.62 / height))
    fig.savefig(png)
    if pdf is not None:
        fig.savefig(pdf)
    plt.close(fig)


BEGIN = "<!-- readings-paper: written by python -m neurd.paper_readings report -->"
END = "<!-- /readings-paper -->"


def write_between(docs: Path, begin: str, end: str, text: str) -> None:
    """``text`` in place of what ``docs`` holds between its markers ``begin`` and ``end``
    (nothing where the page or a marker is missing)."""
    if docs.is_file():
        page = docs.read_text()
        if begin in page and end in page:
            head, rest = page.split(begin, 1)
            docs.write_text(head + begin + "\n" + text + rest[rest.index(end):])


def report(published: Path, docs: Path = Path("docs/readings.md")) -> int:
    """Write the study's runs, table and figure into ``published`` and the table into
    ``docs`` between its markers."""
    curves = cell_curves(published)
    if not curves:
        print(f"no finished cell in {published}/cells: nothing to report")
        return 0
    runs = run_rows(curves)
    write_table(runs, published / "runs.parquet", columns=RUN_COLUMNS)
    text = markdown(table(runs))
    (published / "table.md").write_text(text)
    figure(curves, published / "common_mode.png")
    write_between(docs, BEGIN, END, text)
    print(f"{len(curves)} cells, {len(runs)} runs: {published / 'table.md'}, "
          f"{published / 'common_mode.png'}")
    return 0
