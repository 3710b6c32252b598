"""The readings study: Fig 6's claims re-measured under each reading the paper leaves open.

Config section ``readings``: ``neural`` sets the study's scale (keys of the
``neural`` section, over it) and ``variants`` names each alternative reading
by the ``neural`` keys it changes from the study's default, one change at a
time.  Every reading, ``default`` included, is a ``neural`` section of its own
(:func:`variant_sections`), validated like the ``neural`` section itself
when the config is (schema, checks, games and limits), and run by the Fig 6
steps (``neurd neural-run`` / ``neural-table`` / ``neural-combine``) into
``results/readings/<reading>/``.  ``neurd readings-grid`` then measures
Fig 6's claims on each (:func:`neurd.figures.fig6.claims`, the audit's own
code) and writes the grid (columns below), a heat map of it and the
policy-collapse panels: the policy's entropy per reading, and what the
collapse is made of, from the centred logits the study logs
(``neural.logits_log``: by default seed 0 at the two lowest entropy levels;
each job writes them beside its curves, ``<critic>_<chunk>_logits.parquet``,
and :func:`logit_table` keeps, per run and checkpoint, how far the states'
logits sit from 0 and how many reach NeuRD's threshold).  Not part of
``rule all``: ``make readings``.
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd.config import ConfigError, load_snapshot, require
from neurd.figures import fig1, fig5, fig6, style
from neurd.names import NEURD, SPG, game_title
from neurd.pipeline.neural import jobs, main_critic
from neurd.precision import float64
from neurd.stage import Stage
from neurd.tables import read_table, write_table, write_text

log = logging.getLogger(__name__)

DEFAULT_READING = "default"
STUDY = "readings study"  # what the study's Fig 6 rows and figure are labelled with
GRID_COLUMNS = {
    "reading": "the reading: 'default' (the pipeline's) or a variant of config "
               "readings.variants, one change from it",
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
             "lowest at a level inside it (grid; positive: every best level inside); NaN "
             "where nothing is measured (no phase after a negation, fewer than 3 levels)",
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
COLLAPSE_COLUMNS = {
    "reading": GRID_COLUMNS["reading"],
    "game": "short name of the game",
    "algorithm": "'neurd' or 'spg'",
    "entropy": "entropy regularisation level alpha",
    "iteration": "learning iterations done",
    "phase": "phase of the reward (1-based)",
    "policy_entropy": "mean over seeds of the policy's reach-weighted entropy (nats)",
    "at_threshold": "mean over seeds of the share of centred logits at NeuRD's threshold",
    "nash_conv": "mean over seeds of the NashConv",
}
_LARGEST = ("the largest |centred logit| over an information state's legal actions "
            "(centred logit: log pi centred over the legal actions, float64)")
LOGIT_COLUMNS = {
    "reading": GRID_COLUMNS["reading"],
    "game": "short name of the game",
    "algorithm": "'neurd' or 'spg'",
    "entropy": "entropy regularisation level alpha (a level of neural.logits_log)",
    "seed": "run seed (a seed of neural.logits_log)",
    "iteration": "learning iterations done",
    "phase": "phase of the reward (1-based)",
    "beta": "NeuRD's logit threshold in the reading (neural.beta; SPG has none)",
    "states": "information states of the game",
    "at_beta": "share of the information states where " + _LARGEST + " is at or beyond "
               "beta: states whose policy NeuRD's threshold no longer pushes further out",
    "q10": "10% quantile over the information states of " + _LARGEST,
    "median": "median over the information states of " + _LARGEST,
    "q90": "90% quantile over the information states of " + _LARGEST,
    "largest": "largest over the information states of " + _LARGEST,
}


def variant_sections(config: Mapping) -> dict[str, dict]:
    """Every reading's ``neural`` section (defaults not yet filled): the config's ``neural``
    section, the study's scale over it, then the reading's changes (mappings merged)."""
    from snakemake.utils import update_config  # how Snakemake merges config files

    study = config.get("readings") or {}
    base = copy.deepcopy(dict(config.get("neural") or {}))
    update_config(base, copy.deepcopy(study.get("neural") or {}))
    sections = {DEFAULT_READING: base}
    for name, changes in (study.get("variants") or {}).items():
        sections[name] = copy.deepcopy(base)
        update_config(sections[name], copy.deepcopy(changes))
    return sections


def select_jobs(jobs, game: str | None = None, critic: str | None = None) -> list:
    """The (game, critic, chunk) jobs of a reading, of one game and critic where given."""
    return [(g, c, k) for g, c, k in jobs
            if (game is None or g == game) and (critic is None or c == critic)]


def check(cfg: Mapping) -> None:
    """Cross-field checks of the ``readings`` section."""
    require(DEFAULT_READING not in cfg["variants"], f"readings.variants.{DEFAULT_READING}",
            f"'{DEFAULT_READING}' is the study's own reading (readings.neural); name the "
            "variant otherwise")
    for name, changes in cfg["variants"].items():
        require(bool(changes), f"readings.variants.{name}",
                "changes nothing: a reading names the neural keys it changes")
        require("games" not in changes, f"readings.variants.{name}.games",
                "a reading cannot change the games (the grid compares claims game by game)")


# --- the grid -------------------------------------------------------------------------------


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


def collapse_table(tables: Mapping[str, Mapping[str, pd.DataFrame]],
                   snapshots: Mapping[str, Mapping]) -> pd.DataFrame:
    """Per reading, game, algorithm, entropy and checkpoint: the mean over seeds of the
    policy's entropy, its share of logits at the threshold and its NashConv (the runs of
    the reading's main critic)."""

    frames = []
    for reading, t in tables.items():
        d = t["diagnostics"]
        d = d[d.critic == main_critic(snapshots[reading])]
        mean = d.groupby(["game", "algorithm", "entropy", "iteration", "phase"], sort=True)[
            ["policy_entropy", "at_threshold", "nash_conv"]].mean().reset_index()
        frames.append(mean.assign(reading=reading))
    return pd.concat(frames, ignore_index=True)[list(COLLAPSE_COLUMNS)]


def logit_summary(logits: pd.DataFrame, beta: float) -> pd.DataFrame:
    """A job's logged centred logits (:data:`neurd.pipeline.neural.LOGITS_COLUMNS`) per run
    and checkpoint: per information state the largest |centred logit| over its legal
    actions, then over the states its share at or beyond ``beta`` and its quantiles
    (the columns of :data:`LOGIT_COLUMNS` but ``reading``)."""

    run = ["game", "algorithm", "entropy", "seed", "iteration", "phase"]
    per_state = (logits.assign(largest=np.abs(logits.centred_logit.to_numpy(np.float64)))
                 .groupby([*run, "infostate"], sort=True)["largest"].max().reset_index())
    rows = []
    for key, group in per_state.groupby(run, sort=True):
        largest = group["largest"].to_numpy(np.float64)
        q10, median, q90 = np.quantile(largest, [0.1, 0.5, 0.9])
        rows.append((*key, float(beta), len(largest), float(np.mean(largest >= beta)),
                     float(q10), float(median), float(q90), float(largest.max())))
    return pd.DataFrame(rows, columns=[c for c in LOGIT_COLUMNS if c != "reading"])


def logit_table(jobs: Mapping[str, list], snapshots: Mapping[str, Mapping]) -> pd.DataFrame:
    """Per reading, the :func:`logit_summary` of each of its jobs' logits files (``jobs``:
    reading -> paths; a job that logs no run adds no row)."""
    frames = [logit_summary(read_table(path), float(snapshots[reading]["beta"]))
              .assign(reading=reading) for reading, paths in jobs.items() for path in paths]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("reading", "game", "algorithm")
                                          else float) for c in LOGIT_COLUMNS})
    return pd.concat(frames, ignore_index=True)[list(LOGIT_COLUMNS)]


def other_figures_table(matrix: Mapping[str, pd.DataFrame], matrix_cfg: Mapping,
                        rps: Mapping[str, pd.DataFrame], rps_cfg: Mapping) -> pd.DataFrame:
    """The readings Figs 1, 2 and 5 already compute, as claims under each: the rewards
    (Figs 1-2) and the restarted time average (Fig 5), measured by the audit's own code."""

    from neurd.figures import fig2  # puts off JAX (neurd.regret)

    with float64():
        found = [*fig1.claims(matrix["sweep"], matrix["tuned"], matrix["readings"], matrix_cfg),
                 *fig2.claims(matrix["trajectories"], matrix["sweep"], matrix["readings"],
                              matrix_cfg)]
        fives = fig5.claims(rps["ci"], rps["readings"], rps["nash"], rps_cfg, rps["nashconv"])
    rows = []
    for claim in found:
        if claim.reading:
            role = "default" if claim.reading.startswith("default") else "alternative"
            rows.append({"figure": claim.figure,
                         "claim": claim.claim.replace(f" ({claim.reading})", ""),
                         "role": role, "reading": claim.reading, "verdict": claim.verdict,
                         "value": float(claim.value), "measured": claim.measured})
    other = next(c for c in fives if c.reading)
    phases = [c for c in fives if c.claim.startswith("phase ")
              and ("decreases" in c.claim or "ends the phase below" in c.claim)]
    held = sum(all(c.verdict == "pass" for c in phases if c.claim.startswith(f"phase {p} "))
               for p in sorted({c.claim.split()[1] for c in phases}))
    restart = bool(rps_cfg["nonstationary"]["restart_average"])
    label = "in every phase NeuRD's NashConv falls and ends below SPG's"
    rows.append({"figure": "fig5", "claim": label, "role": "default",
                 "reading": fig5._reading_name(restart),
                 "verdict": "pass" if all(c.verdict == "pass" for c in phases) else "fail",
                 "value": float(held), "measured": "; ".join(
                     f"{c.claim}: {c.verdict}" for c in phases)})
    rows.append({"figure": "fig5", "claim": label, "role": "alternative",
                 "reading": other.reading, "verdict": other.verdict,
                 "value": float(other.value), "measured": other.measured})
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
    for algorithm in (NEURD, SPG):
        run = default[default.algorithm == algorithm].sort_values(["iteration", "phase"])
        colour = style.PALETTE[algorithm]
        axes[0].plot(run.iteration, run["median"], color=colour,
                     label=f"{style.LABELS[algorithm]}: median")
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


def draw(grid: pd.DataFrame, other: pd.DataFrame, collapse: pd.DataFrame, readings: list[str],
         logits: pd.DataFrame | None = None):
    """Top: Fig 6's claims under each reading (verdict and headline number per cell);
    middle: the readings Figs 1, 2 and 5 compute; then NeuRD's policy entropy at the
    lowest entropy level in each game, per reading (a collapse falls to 0); bottom, where
    the study logged centred logits (:func:`logit_table`): what the collapse is made of
    (:func:`_draw_logits`)."""
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
        ax.set_title(rf"{game}: NeuRD's policy entropy, entropy level $\alpha$ = {lowest:g}",
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


# --- command-line steps ---------------------------------------------------------------------


def _grid_step(args, cfg) -> None:
    readings = [r for r, _ in (item.partition("=")[::2] for item in args.reading)]
    folders = dict(item.partition("=")[::2] for item in args.reading)
    unknown = sorted(set(readings) - {DEFAULT_READING, *cfg["variants"]})
    if unknown:
        raise ConfigError(f"readings {unknown} are not in config readings.variants")
    tables, snapshots, changes = {}, {}, {}
    base = load_snapshot(f"{folders[DEFAULT_READING]}/config/neural.json")
    for reading, folder in folders.items():
        snapshots[reading] = load_snapshot(f"{folder}/config/neural.json")
        tables[reading] = {name: read_table(f"{folder}/neural/{name}.parquet")
                           for name in ("nashconv", "diagnostics", "summary")}
        tables[reading]["ci"] = read_table(f"{folder}/neural/nashconv_ci.parquet")
        changes[reading] = {k: v for k, v in snapshots[reading].items() if base.get(k) != v}
    grid = grid_table(tables, snapshots, changes)
    collapse = collapse_table(tables, snapshots)
    logits = logit_table({reading: [
        f"{folder}/neural/{game}/jobs/{critic}_{chunk}_logits.parquet"
        for game, critic, chunk in select_jobs(jobs(snapshots[reading]),
                                               critic=main_critic(snapshots[reading]))]
        for reading, folder in folders.items()}, snapshots)
    inputs = dict(item.partition("=")[::2] for item in args.input)
    matrix = {name: read_table(inputs[name]) for name in
              ("sweep", "tuned", "readings", "trajectories")}
    rps = {name: read_table(inputs[f"rps_{name}"]) for name in
           ("ci", "readings", "nash", "nashconv")}
    other = other_figures_table(matrix, load_snapshot(args.matrix_config), rps,
                                load_snapshot(args.rps_config))
    write_table(grid, args.grid, columns=GRID_COLUMNS, config=cfg)
    write_table(other, args.other, columns=OTHER_COLUMNS, config=cfg)
    write_table(collapse, args.collapse, columns=COLLAPSE_COLUMNS, config=cfg)
    write_table(logits, args.logits, columns=LOGIT_COLUMNS, config=cfg)
    fig = draw(grid, other, collapse, readings, logits)
    nashconv = tables[DEFAULT_READING]["nashconv"]
    style.note(fig, "; ".join(f"{game_title(g)}: {fig6.scale_label(nashconv, g, STUDY)[0]}"
                              for g in dict.fromkeys(nashconv.game)))
    style.save(fig, args.png, args.pdf)
    _write_markdown(grid, other, readings, args.md)
    counts = grid.groupby("reading").verdict.value_counts().unstack(fill_value=0)
    log.info("readings grid:\n%s", counts)


def _write_markdown(grid: pd.DataFrame, other: pd.DataFrame, readings: list[str], path
                    ) -> None:

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
    write_text(path, "\n".join(lines))


def register(stage: Stage, sub) -> None:
    """Add this stage's steps to the ``neurd`` command line."""
    p = stage.add_step(sub, "readings-grid",
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


def _derive(config: Mapping) -> dict[str, tuple[str, dict]]:
    """Every reading's neural section by the key it comes from; a reading that plays other
    games than the neural section's is refused (its tables are expanded over the neural
    section's games, and its jobs run on the neural stage's compiled games)."""
    derived = {f"readings.variants.{name}" if name != DEFAULT_READING else "readings.neural":
               ("neural", section) for name, section in variant_sections(config).items()}
    neural = config.get("neural") or {}
    games, strings = neural.get("games"), neural.get("game_strings") or {}
    for label, (_, section) in derived.items():
        require(section.get("games", games) == games, f"{label}.games",
                f"plays {section.get('games')}, the neural section {games}: a reading runs "
                "the neural section's games (the grid compares claims game by game)")
        changed = [g for g in games or () if g in (section.get("game_strings") or {})
                   and section["game_strings"][g] != strings.get(g)]
        require(not changed, f"{label}.game_strings.{changed[0] if changed else ''}",
                f"{section['game_strings'][changed[0]] if changed else ''!r} is not the "
                f"neural section's {strings.get(changed[0]) if changed else ''!r}: a reading "
                "runs on the neural stage's compiled games")
    return derived


STAGE = Stage(section="readings", check=check, figures=lambda cfg: [], register=register,
              derive=_derive)
