"""The readings study's figure: Fig 6's claims under each reading, as a grid.

:func:`grid_table` measures Fig 6's claims (:func:`neurd.figures.fig6.claims`, the
audit's own code) on each reading's tables, :func:`other_figures_table` the readings
Figs 1, 2 and 5 compute themselves (picked by each claim's ``key``); :func:`plot` draws
the verdicts as heat maps, NeuRD's policy entropy per reading and, where the study logged
centred logits, what a policy's collapse is made of; :func:`markdown` writes the grid as
text.  The tables it draws from beside the grid (the collapse and the logits) and the
study's config are :mod:`neurd.pipeline.readings`'s; ``neurd readings-grid``
(:mod:`neurd.readings_grid`) writes them all.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import pandas as pd

from neurd.figures import fig1, fig5, fig6, style
from neurd.names import DEFAULT_READING, NEURD, READING_COLUMN, SPG, game_title
from neurd.precision import float64

STUDY = "readings study"  # what the study's Fig 6 rows and figure are labelled with
GRID_COLUMNS = {
    "reading": READING_COLUMN,
    "changes": "the neural keys the reading changes from the study's default (JSON)",
    "figure": "the figure whose claim this is (fig6)",
    "claim": "the claim, as the audit words it",
    "verdict": "the audit's verdict under this reading: pass, fail, tie (the CI of the "
               "paired difference covers 0) or differs",
    "value": "the claim's headline number, continuous: the mean paired difference NeuRD - "
             "SPG (final, average, exact critic); NeuRD's minus SPG's spread (sensitivity); "
             "the mean over the phases after a negation of (NeuRD's median iterations to "
             "the level - SPG's) / the phase's length, a run that never reaches it counted "
             "as the phase's length (faster; negative: NeuRD first); the smallest over the "
             "algorithms of the lower mean final NashConv at the grid's two ends minus the "
             "lowest at a level inside it (grid; positive: every best level inside); the "
             "runs that diverged (diverging); NaN where nothing is measured (no phase after "
             "a negation, fewer than 3 levels)",
    "measured": "the audit's measured text",
}
OTHER_COLUMNS = {
    "figure": "fig1, fig2 or fig5",
    "claim": "the claim, without the reading it is measured under",
    "role": "'default': the pipeline's reading; 'alternative': the other one the figure "
            "computes (Figs 1-2: the text's rewards +1/-1; Fig 5: the time average not "
            "restarted at a phase switch)",
    "reading": "the reading, in words",
    "verdict": "the audit's verdict under this reading",
    "value": "the claim's headline number: Hedge's worst regret at the largest step size "
             "(fig1), SPG's tuned step size at T = 100 (fig2), the phases in which NeuRD's "
             "mean falls and ends below SPG's (fig5)",
    "measured": "the audit's measured text",
}

def grid_table(tables: Mapping[str, Mapping[str, pd.DataFrame]],
               snapshots: Mapping[str, Mapping], changes: Mapping[str, Mapping]
               ) -> pd.DataFrame:
    """One row per (reading, claim): Fig 6's claims measured on each reading's tables."""

    rows = []
    for reading, t in tables.items():
        with float64():
            found = fig6.claims(t["nashconv"], t["ci"], t["summary"], t["diagnostics"],
                                snapshots[reading], STUDY)
        for claim in found:
            rows.append({"reading": reading, "changes": json.dumps(changes[reading],
                                                                  sort_keys=True),
                         "figure": claim.figure, "claim": claim.claim, "verdict": claim.verdict,
                         "value": float(claim.value), "measured": claim.measured})
    grid = pd.DataFrame(rows, columns=list(GRID_COLUMNS))
    # a claim some readings do not measure (the learned-vs-exact critic check, where only
    # some readings run both critics) has no cell everywhere: it is left out of the grid
    everywhere = grid.groupby("claim").reading.nunique() == len(tables)
    return grid[grid.claim.isin(everywhere[everywhere].index)].reset_index(drop=True)


def other_figures_table(matrix: Mapping[str, pd.DataFrame], matrix_cfg: Mapping,
                        rps: Mapping[str, pd.DataFrame], rps_cfg: Mapping) -> pd.DataFrame:
    """The readings Figs 1, 2 and 5 already compute, as claims under each: the rewards
    (Figs 1-2) and the restarted time average (Fig 5), measured by the audit's own code.
    A claim measured under several readings is one row per reading, named by the claim
    under the config's reading (without the reading itself, which has its own column)."""

    from neurd.figures import fig2  # puts off JAX (neurd.regret)

    with float64():
        found = [*fig1.claims(matrix["sweep"], matrix["tuned"], matrix["readings"], matrix_cfg),
                 *fig2.claims(matrix["trajectories"], matrix["sweep"], matrix["readings"],
                              matrix_cfg),
                 *fig5.reading_claims(rps["ci"], rps["readings"], rps_cfg, rps["nashconv"])]
    found = [claim for claim in found if claim.key]
    names = {(c.figure, c.key): c.claim.removesuffix(f" ({c.reading})")
             for c in found if not c.alternative}
    rows = [{"figure": c.figure, "claim": names[c.figure, c.key],
             "role": "alternative" if c.alternative else "default", "reading": c.reading,
             "verdict": c.verdict, "value": float(c.value), "measured": c.measured}
            for c in found]
    return pd.DataFrame(rows, columns=list(OTHER_COLUMNS))


VERDICT_CODES = {"fail": 0, "tie": 1, "differs": 2, "pass": 3, "unmeasured": 4}


COLOURS = ("#f4b6ae", "#d5d8dc", "#fde7a6", "#a8dcb4", "#bbdefb")  # as VERDICT_CODES


def _heat(ax, cells: pd.DataFrame, rows: list[str], columns: list[str], column: str,
          labels: list[str]) -> None:
    """A verdict heat map: one cell per (row claim, column), its verdict and number."""
    from matplotlib.colors import ListedColormap

    index = cells.set_index(["claim", column])
    codes = [[VERDICT_CODES.get(index.verdict.get((r, c)), float("nan")) for c in columns]
             for r in rows]
    ax.imshow(codes, cmap=ListedColormap(COLOURS), vmin=-0.5, vmax=len(COLOURS) - 0.5,
              aspect="auto")
    ax.grid(False)
    for i, r in enumerate(rows):
        for j, c in enumerate(columns):
            verdict = index.verdict.get((r, c))
            text = "n/a" if verdict is None else f"{verdict}\n{index.value.get((r, c)):.3g}"
            ax.text(j, i, text, ha="center", va="center", fontsize=7)
    ax.set_xticks(range(len(columns)), labels, rotation=20, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)


def collapsing_entropy(collapse: pd.DataFrame, logits: pd.DataFrame, game: str) -> float:
    """The level of ``logits`` (logged) at which NeuRD's policy entropy at the last
    checkpoint of the default reading is lowest in ``game``: the collapse to explain."""
    levels = set(logits[logits.game == game].entropy)
    rows = collapse[(collapse.reading == DEFAULT_READING) & (collapse.game == game)
                    & (collapse.algorithm == NEURD) & collapse.entropy.isin(levels)]
    if rows.empty:
        return min(levels)
    last = rows[(rows.phase == rows.phase.max())]
    last = last[last.iteration == last.iteration.max()]
    return float(last.sort_values(["policy_entropy", "entropy"]).entropy.iloc[0])


def _draw_logits(fig, band, total, collapse, logits, readings) -> None:
    """Why a policy collapses (Goofspiel's, or the last game logged): at the logged level
    where NeuRD's entropy ends lowest, the per-state largest |centred logit| of NeuRD and
    SPG (median, 10-90% band; the default reading) against the threshold beta, and the
    share of states at or beyond beta per reading (mean over the logged seeds)."""

    logged = list(dict.fromkeys(logits.game))
    game = "goofspiel" if "goofspiel" in logged else logged[-1]
    entropy = collapsing_entropy(collapse, logits, game)
    rows = logits[(logits.game == game) & (logits.entropy == entropy)]
    mean = rows.groupby(["reading", "algorithm", "iteration", "phase"], sort=True)[
        ["at_beta", "q10", "median", "q90", "beta"]].mean().reset_index()
    seeds = rows.seed.nunique()
    default = mean[mean.reading == DEFAULT_READING]
    length = int(rows[rows.phase == 1].iteration.max())
    axes = [fig.add_axes((0.07 + k * 0.48, band[0] + 0.7 / total, 0.4, band[1] - 1.2 / total))
            for k in range(2)]
    for algorithm in style.algorithm_order(default.algorithm):
        run = default[default.algorithm == algorithm].sort_values(["iteration", "phase"])
        colour = style.algorithm_colour(algorithm)
        axes[0].plot(run.iteration, run["median"], color=colour,
                     label=f"{style.algorithm_label(algorithm)}: median")
        axes[0].fill_between(run.iteration, run.q10, run.q90, color=colour, alpha=0.25,
                             linewidth=0, label="10-90% of states")
    if not default.empty:
        axes[0].axhline(float(default.beta.iloc[0]), color="black", linestyle=":",
                        linewidth=1.0, label=r"threshold $\beta$")
    axes[0].set_title(rf"{game}, $\alpha$ = {entropy:g}, {DEFAULT_READING} reading ({seeds} seed"
                      f"{'s' if seeds > 1 else ''}):\nper state, the largest |centred logit| "
                      "over its legal actions", fontsize=9)
    axes[0].set_ylabel("|log pi - mean over legal actions|", fontsize=8)
    for k, reading in enumerate(readings):  # colours as in the policy-entropy panels
        run = mean[(mean.reading == reading) & (mean.algorithm == NEURD)].sort_values(
            ["iteration", "phase"])
        if run.empty:
            continue
        axes[1].plot(run.iteration, run.at_beta, label=f"NeuRD, {reading.replace('_', ' ')}",
                     color=f"C{k}", lw=1.4 if reading == DEFAULT_READING else 0.8)
    run = default[default.algorithm == SPG].sort_values(["iteration", "phase"])
    axes[1].plot(run.iteration, run.at_beta, color="grey", linestyle="--",
                 label=f"SPG, {DEFAULT_READING}")
    axes[1].set_title(rf"{game}, $\alpha$ = {entropy:g}: share of states with a centred logit"
                      "\n" r"at or beyond $\pm\beta$ (NeuRD per reading)", fontsize=9)
    axes[1].set_ylabel("share of information states", fontsize=8)
    for ax in axes:
        for boundary in range(length, int(rows.iteration.max()), length):
            ax.axvline(boundary, **style.PHASE_LINE)
        ax.set_xlabel("learning iterations", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6, loc="best")


def plot(grid: pd.DataFrame, other: pd.DataFrame, collapse: pd.DataFrame, readings: list[str],
         logits: pd.DataFrame | None = None):
    """Top: Fig 6's claims under each reading (verdict and headline number per cell);
    middle: the readings Figs 1, 2 and 5 compute; then NeuRD's policy entropy at the
    lowest entropy level in each game, per reading (a collapse falls to 0); bottom, where
    the study logged centred logits (:func:`neurd.pipeline.readings.logit_table`): what
    the collapse is made of (:func:`_draw_logits`)."""
    import matplotlib.pyplot as plt

    style.setup()
    claims = list(dict.fromkeys(grid.claim))
    others = list(dict.fromkeys(other.claim))
    games = list(dict.fromkeys(collapse.game))
    logged = logits is not None and not logits.empty
    heights = (0.42 * len(claims) + 1.0, 0.42 * max(len(others), 1) + 1.0, 2.4,
               *((2.9,) if logged else ()))
    total = sum(heights) + 0.6
    fig = plt.figure(figsize=(2.0 + 1.15 * max(len(readings), 4), total))
    top = 1 - 0.3 / total
    bands = []
    for h in heights:
        bands.append((top - h / total, h / total))
        top -= h / total
    ax = fig.add_axes((0.34, bands[0][0] + 0.9 / total, 0.64, bands[0][1] - 1.2 / total))
    _heat(ax, grid, claims, readings, "reading", [r.replace("_", " ") for r in readings])
    ax.set_title("Fig 6's claims under each reading (verdict, headline number)", fontsize=10)
    if others:
        ax = fig.add_axes((0.34, bands[1][0] + 0.9 / total, 0.64 * 2 / max(len(readings), 4),
                           bands[1][1] - 1.2 / total))
        _heat(ax, other.assign(claim=other.figure + ": " + other.claim),
              [f"{f}: {c}" for f, c in dict.fromkeys(zip(other.figure, other.claim))],
              ["default", "alternative"], "role", ["default", "alternative"])
        ax.set_title("Figs 1, 2, 5 under the readings they compute (default: rewards 1/0, "
                     "time average restarted each phase;\nalternative: the text's +1/-1, the "
                     "average over all iterations)", fontsize=8, loc="left")
    for k, game in enumerate(games):
        ax = fig.add_axes((0.07 + k * 0.32, bands[2][0] + 0.7 / total, 0.26,
                           bands[2][1] - 1.0 / total))
        rows = collapse[(collapse.game == game) & (collapse.algorithm == NEURD)]
        lowest = rows.entropy.min()
        for reading in readings:
            run = rows[(rows.reading == reading) & (rows.entropy == lowest)].sort_values(
                ["iteration", "phase"])
            ax.plot(run.iteration, run.policy_entropy, label=reading.replace("_", " "),
                    lw=1.4 if reading == DEFAULT_READING else 0.8)
        ax.set_title(f"{game}: NeuRD's policy entropy,\n" + rf"entropy level $\alpha$ = {lowest:g}",
                     fontsize=9)
        ax.set_xlabel("learning iterations", fontsize=8)
        ax.tick_params(labelsize=7)
        if k == 0:
            ax.set_ylabel("entropy (nats)", fontsize=8)
        if k == len(games) - 1:
            ax.legend(fontsize=6, loc="best")
    if logged:
        _draw_logits(fig, bands[3], total, collapse, logits, readings)
    return fig


def scale_note(fig, nashconv: pd.DataFrame) -> None:
    """Say on the figure each game's scale (of the default reading's Fig 6 table)."""
    style.note(fig, "; ".join(f"{game_title(g)}: {fig6.scale_label(nashconv, g, STUDY)[0]}"
                              for g in dict.fromkeys(nashconv.game)))


def markdown(grid: pd.DataFrame, other: pd.DataFrame, readings: list[str]) -> str:
    """The grid and the other figures' readings as Markdown tables (``grid.md``)."""
    lines = ["# Fig 6's claims under each reading", "",
             "Verdict and headline number per claim (rows) and reading (columns); "
             "`results/readings/grid.parquet` has the measured text of every cell.", "",
             "| claim | " + " | ".join(readings) + " |",
             "| --- |" + " --- |" * len(readings)]
    cells = grid.set_index(["claim", "reading"])
    for claim in dict.fromkeys(grid.claim):
        row = []
        for reading in readings:
            if (claim, reading) in cells.index:
                cell = cells.loc[(claim, reading)]
                row.append(f"{cell.verdict} ({cell.value:.3g})")
            else:
                row.append("n/a")
        lines.append(f"| {claim} | " + " | ".join(row) + " |")
    verdicts = grid.groupby("reading").verdict.value_counts().unstack(fill_value=0)
    lines += ["", "Totals per reading: " + "; ".join(
        f"{r}: " + ", ".join(f"{v} {int(verdicts.loc[r].get(v, 0))}"
                             for v in ("pass", "tie", "fail")) for r in readings), "",
              "## The readings Figs 1, 2 and 5 compute", "",
              "| figure | claim | default reading | alternative reading |",
              "| --- | --- | --- | --- |"]
    for (figure, claim), rows in other.groupby(["figure", "claim"], sort=False):
        cell = {r.role: f"{r.verdict} ({r.value:.3g}; {r.reading})" for r in rows.itertuples()}
        lines.append(f"| {figure} | {claim} | {cell.get('default', 'n/a')} | "
                     f"{cell.get('alternative', 'n/a')} |")
    lines.append("")
    return "\n".join(lines)
