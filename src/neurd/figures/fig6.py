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

The audit measures the paper's four claims per game, paired by seed where
seeds are shared, plus whether the entropy grid brackets each algorithm's best
level, what the exact critic (where it was run) changes, and whether every run
finished without diverging (the others are measured on the runs that did: a pair
with a diverged side is left out, and the row says how many were).  Every row says
what it was measured at, from the tables alone (:func:`scale_label`): "paper
scale" only where every game of the tables has the paper's 3 x 0.33e6
iterations and 40 seeds; "paper length, k of 40 seeds" for a game at the
paper's length with k seeds (judged on those k); else the scale's name, its
length and seeds against the paper's, and "provisional".
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd import names
from neurd.audit import PAIRED_CRITERION, TIE_BELOW, Check, Claim, fmt, paired
from neurd.figures import style
from neurd.names import NEURD, SPG
from neurd.neural.results import (
    diverged_runs,
    every_diverged_run,
    exact_critic_runs,
    finished_runs,
)
from neurd.stats import MIN_CI_SAMPLES, best_entropies, grid_margin

FIGURE = "fig6"
INPUTS = {
    "nashconv": "neural/nashconv.parquet",
    "ci": "neural/nashconv_ci.parquet",
    "summary": "neural/summary.parquet",
    "diagnostics": "neural/diagnostics.parquet",
}
PAPER_PHASE_ITERATIONS = 330_000
PAPER_PHASE_TEXT = "0.33e6"  # as the paper writes it
PAPER_SEEDS = 40
PANELS = "abcdefghijkl"
SPREAD = 0.22  # half-width of the dots' spread over a box, in categories (_dots)
LEVELS_CMAP = "viridis"
NAMED = 3  # the diverged runs a row names before "and k more"
TITLE_WIDTH = 52  # characters of a top panel's title line


def _games(summary: pd.DataFrame) -> list[str]:
    order = list(names.GAMES)
    found = list(dict.fromkeys(summary.game))
    return sorted(found, key=lambda g: order.index(g) if g in order else len(order))


def _curve(ci: pd.DataFrame, game: str, algorithm: str, entropy: float) -> pd.DataFrame:
    rows = ci[(ci.game == game) & (ci.algorithm == algorithm) & (ci.entropy == entropy)]
    return rows.sort_values(["iteration", "phase"])


def _phase_length(nashconv: pd.DataFrame, game: str) -> int:
    rows = nashconv[(nashconv.game == game) & (nashconv.phase == 1)]
    return int(rows.iteration.max())


def _seeds(nashconv: pd.DataFrame, game: str) -> int:
    """The seeds a game's table holds (a publication may hold fewer than its config's)."""
    return int(nashconv[nashconv.game == game].seed.nunique())


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


def scale_label(nashconv: pd.DataFrame, game: str, scale: str | None) -> tuple[str, bool]:
    """What a game's results were measured at, from the table alone, and whether it is the
    paper's scale: that needs every game of the table at the paper's length with all its
    seeds.  A game the paper did not run is labelled with its own sizes, not with a
    fraction of the paper's.  ``scale``: the name of the run's scale (e.g. "default
    scale")."""
    length, seeds = _phase_length(nashconv, game), _seeds(nashconv, game)
    if game not in names.GAMES:  # no paper size to measure it against: its own
        return (f"{scale or 'this run'}: {style.size(length)} iterations per phase, {seeds} "
                "seeds (a game the paper did not run)", False)
    full = [_phase_length(nashconv, g) >= PAPER_PHASE_ITERATIONS
            and _seeds(nashconv, g) >= PAPER_SEEDS for g in dict.fromkeys(nashconv.game)]
    if all(full):
        return (f"paper scale: {style.size(length)} iterations per phase, {seeds} seeds",
                True)
    if length >= PAPER_PHASE_ITERATIONS:
        return f"paper length, {seeds} of {PAPER_SEEDS} seeds", False
    return (f"{scale or 'this run'}: {style.size(length)} of {PAPER_PHASE_TEXT} iterations per "
            f"phase, {seeds} of {PAPER_SEEDS} seeds, provisional", False)


def scale_note(nashconv: pd.DataFrame, game: str, scale: str | None = None) -> tuple[str, bool]:
    """The audit rows' prefix: :func:`scale_label` in brackets (with the seeds the paired
    intervals are judged on where the paper's length has fewer than its seeds)."""
    label, paper = scale_label(nashconv, game, scale)
    if label.startswith("paper length"):
        label += f": judged on these {_seeds(nashconv, game)} seeds"
    return f"[{label}] ", paper


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
        for _, run in _runs(nashconv, game, algorithm, entropy).items():
            run = run.sort_values(["iteration", "phase"])
            ax.plot(run.iteration, run.nash_conv, color=color, linewidth=0.7, alpha=0.5)
    length = _phase_length(nashconv, game)
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
    games = _games(summary)
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


# --- the claims audit ---------------------------------------------------------------------


def reach_iterations(run: pd.DataFrame, phase: int, level: float) -> float:
    """Iterations after the phase's start until the run's NashConv is at most ``level``."""
    rows = run[run.phase == phase].sort_values("iteration")
    hit = rows[rows.nash_conv <= level]
    return float(hit.iteration.iloc[0] - rows.iteration.iloc[0]) if len(hit) else np.inf


def _runs(nashconv, game, algorithm, entropy):
    rows = nashconv[(nashconv.game == game) & (nashconv.algorithm == algorithm)
                    & (nashconv.entropy == entropy)]
    return {seed: run for seed, run in rows.groupby("seed")}


def _without_best(best: Mapping[str, float], claim: str, paper_says: str, criterion: str,
                  note: str) -> Claim | None:
    """A claim at the best levels, unmeasured where an algorithm has no best level (a run
    diverged at every level), the row saying so; None where both have one."""
    missing = [style.LABELS[a] for a in (NEURD, SPG) if a not in best]
    if not missing:
        return None
    return Claim(FIGURE, claim, paper_says,
                 note + f"unmeasured: no best level for {' and '.join(missing)} (a run "
                 "diverged at every level)", criterion,
                 (Check("best entropy levels (none: a run diverged at every level)", math.nan,
                        ">=", 1),))


def _faster_claim(game, nashconv, ci, best, cfg, note) -> Claim:
    """The verdict: in every phase after a negation NeuRD's median time to the level is
    below SPG's (a check per phase on the difference of the medians: equal medians a tie,
    neither median reached, inf - inf, nothing to measure).  The value, continuous: the
    mean over those phases of (NeuRD's median time - SPG's) / the phase's length, a run
    that never reaches the level counted as taking the whole phase (-1: NeuRD there at
    once and SPG never; 0: level; NaN without a phase after a negation)."""
    claim = f"{game}: NeuRD converges faster after each negation"
    paper_says = "'NeuRD converges faster than SPG in all three domains'"
    criterion = ("in every phase after a negation NeuRD's median time to the level is below "
                 "SPG's (a run that never reaches it takes inf); equal medians: tie; neither "
                 "median reached (inf - inf): unmeasured")
    unranked = _without_best(best, claim, paper_says, criterion, note)
    if unranked is not None:
        return unranked
    phases = sorted(nashconv[nashconv.game == game].phase.unique())
    runs = {a: _runs(nashconv, game, a, best[a]) for a in (NEURD, SPG)}
    seeds = sorted(set(runs[NEURD]) & set(runs[SPG]))
    length = _phase_length(nashconv, game)
    parts, checks, gaps = [], [], []
    for phase in phases:
        uniform = float(ci[(ci.game == game) & (ci.phase == phase)].uniform_nash_conv.iloc[0])
        level = cfg["audit_fraction"] * uniform
        times = {a: np.array([reach_iterations(runs[a][s], phase, level) for s in seeds])
                 for a in (NEURD, SPG)}
        wins = int(np.sum(times[NEURD] < times[SPG]))
        losses = int(np.sum(times[NEURD] > times[SPG]))
        median = {a: float(np.median(t)) for a, t in times.items()}
        parts.append(f"phase {phase} (level {fmt(level)}): median NeuRD {fmt(median[NEURD], 6)}"
                     f", SPG {fmt(median[SPG], 6)} iterations; NeuRD earlier in {wins}, later "
                     f"in {losses} of {len(seeds)} seeds")
        if phase > 1:  # after each negation
            checks.append(Check(f"phase {phase}: NeuRD's median time to the level minus SPG's "
                                "(iterations, never reached: inf)",
                                median[NEURD] - median[SPG], TIE_BELOW, 0.0))
            capped = {a: float(np.median(np.minimum(t, length))) for a, t in times.items()}
            gaps.append((capped[NEURD] - capped[SPG]) / length)
    if not checks:
        checks.append(Check("phases after a negation (none: nothing to measure)", math.nan,
                            ">=", 1))
    return Claim(
        FIGURE, claim, paper_says,
        note + "; ".join(parts) + f" (level: {fmt(cfg['audit_fraction'])} x the uniform "
        "policy's NashConv in the phase's game; inf: not reached; best entropy level alpha "
        "per algorithm)", criterion, tuple(checks), "fail",
        float(np.mean(gaps)) if gaps else np.nan)


def _final_claim(game, summary, best, note, cfg) -> Claim:
    claim = f"{game}: NeuRD ends with the lowest final NashConv"
    paper_says = "'NeuRD ... yields the lowest final NashConv'"
    unranked = _without_best(best, claim, paper_says, PAIRED_CRITERION, note)
    if unranked is not None:
        return unranked
    rows = summary[summary.game == game]
    final = {a: rows[(rows.algorithm == a) & (rows.entropy == best[a])]
             .set_index("seed").final_nash_conv for a in (NEURD, SPG)}
    means = {a: float(f.mean()) for a, f in final.items()}
    text, check, difference = paired(final[NEURD], final[SPG], cfg, "bootstrap interval of "
                                     "the mean paired difference NeuRD - SPG of the final "
                                     "NashConv", "seeds")
    return Claim(
        FIGURE, claim, paper_says,
        note + f"final NashConv (mean of the last checkpoints) at the best entropy level: "
        f"NeuRD {fmt(means[NEURD])} (alpha {fmt(best[NEURD])}), SPG {fmt(means[SPG])} (alpha "
        f"{fmt(best[SPG])}); {text}", PAIRED_CRITERION, (check,), "fail", difference)


def _average_claim(game, summary, note, cfg) -> Claim:
    """The means: over the runs that did not diverge; the pairs: every (entropy, seed) of
    the table, a diverged run's (no average) left out by :func:`paired`, which says so."""
    rows = summary[summary.game == game]
    wide = rows.set_index(["entropy", "seed", "algorithm"]).average_nash_conv.unstack()
    means = {a: float(wide[a].mean()) for a in (NEURD, SPG)}
    text, check, difference = paired(wide[NEURD], wide[SPG], cfg, "bootstrap interval of "
                                     "the mean paired difference NeuRD - SPG of the average "
                                     "NashConv", "(entropy, seed) pairs")
    return Claim(
        FIGURE, f"{game}: NeuRD's average NashConv over all iterations is lower",
        "'NeuRD consistently has lower average NashConv'",
        note + f"average NashConv over every entropy level and seed: NeuRD {fmt(means[NEURD])}, "
        f"SPG {fmt(means[SPG])}; {text}", PAIRED_CRITERION, (check,), "fail", difference)


def _sensitivity_claim(game, summary, note) -> Claim:
    """The means: over each level's runs that did not diverge (a level with none has no
    mean, and no part in the spread); the row says how many runs were left out."""
    rows = summary[summary.game == game]
    by_level = rows.groupby(["algorithm", "entropy"]).average_nash_conv.mean()
    spread = {a: float(by_level.loc[a].max() - by_level.loc[a].min()) for a in (NEURD, SPG)}
    diverged = len(diverged_runs(summary, game))
    return Claim(
        FIGURE, f"{game}: NeuRD is less sensitive to the entropy level",
        "'NeuRD ... is less sensitive to the entropy regularization level, in contrast to PG'",
        note + f"spread (max - min over {rows.entropy.nunique()} levels) of the mean average "
        f"NashConv: NeuRD {fmt(spread[NEURD])}, SPG {fmt(spread[SPG])}"
        + (f"; the means leave out {diverged} diverged run{'s' * (diverged != 1)}"
           if diverged else ""),
        "NeuRD's spread below SPG's",
        (Check("NeuRD's spread (threshold: SPG's)", spread[NEURD], "<", spread[SPG]),), "fail",
        spread[NEURD] - spread[SPG])


def _grid_claim(game, summary, best, note) -> Claim:
    """The verdict: every algorithm's best level lies strictly inside the grid.  The
    value, continuous: the smallest :func:`grid_margin` over the algorithms (in NashConv,
    positive where every best level lies inside), rather than a count of them: it says
    how far the bracketing is from flipping.  An algorithm with a diverged run at every
    level has no best level: nothing to locate (unmeasured)."""
    levels = sorted(summary[summary.game == game].entropy.unique())
    algorithms = sorted(set(summary[summary.game == game].algorithm))
    checks = [Check(f"{style.LABELS[a]}'s best level (threshold: the grid's {end})", e, op,
                    bound)
              for a, e in best.items()
              for end, op, bound in (("lowest", ">", levels[0]), ("highest", "<", levels[-1]))]
    checks += [Check(f"{style.LABELS[a]}'s best level (none: a run diverged at every level)",
                     math.nan, ">", levels[0]) for a in algorithms if a not in best]
    found = [f"{style.LABELS[a]} {fmt(best[a])}" if a in best else
             f"{style.LABELS[a]} none (a run diverged at every level)" for a in algorithms]
    reason = ""
    if len(levels) < 3:  # no level inside the grid: a best level cannot lie inside it
        checks = [Check("levels strictly inside the grid (none)", math.nan, ">=", 1)]
        reason = (f"; unmeasured: a grid of {len(levels)} level{'s' * (len(levels) != 1)} has "
                  "no level inside it")
    return Claim(
        FIGURE, f"{game}: the entropy grid brackets each algorithm's best level",
        "the paper sweeps entropy levels and shows the best per algorithm (levels not stated)",
        note + f"grid {[fmt(x) for x in levels]}; best by final NashConv: "
        + ", ".join(found) + reason,
        "every algorithm's best level lies strictly inside the grid (a grid of fewer than 3 "
        "levels has no inside: unmeasured)",
        tuple(checks), "fail",
        float(np.min([grid_margin(summary, game, a) for a in algorithms])))


def _exact_critic_claim(game, diagnostics, note, cfg) -> Claim | None:
    rows = diagnostics[diagnostics.game == game]
    if not {"exact", "learned"} <= set(rows.critic):
        return None
    last = rows[rows.iteration == rows.iteration.max()]
    last = last[last.phase == last.phase.max()]
    final = last.groupby(["critic", "algorithm"]).nash_conv.mean()
    rmse = last[last.critic == "learned"].groupby("algorithm").critic_rmse.mean()
    runs = last[last.critic == "exact"].set_index(["entropy", "seed"])
    text, check, difference = paired(runs[runs.algorithm == NEURD].nash_conv,
                                     runs[runs.algorithm == SPG].nash_conv, cfg,
                                     "bootstrap interval of the mean paired difference "
                                     "NeuRD - SPG of the final NashConv, exact critic",
                                     "(entropy, seed) pairs")
    exact = {a: float(final.loc[("exact", a)]) for a in (NEURD, SPG)}
    learned = {a: float(final.loc[("learned", a)]) for a in (NEURD, SPG)}
    return Claim(
        FIGURE, f"{game}: with the exact q in the critic's place, NeuRD ends below SPG",
        "not in the paper: separates the learner's effect from the critic's lag",
        note + "final NashConv, mean over seeds and entropy levels: exact critic NeuRD "
        f"{fmt(exact[NEURD])}, SPG {fmt(exact[SPG])}; learned critic NeuRD "
        f"{fmt(learned[NEURD])}, SPG {fmt(learned[SPG])}; learned critic's final RMS error "
        f"NeuRD {fmt(float(rmse[NEURD]))}, SPG {fmt(float(rmse[SPG]))}; exact critic: {text}",
        PAIRED_CRITERION, (check,), "fail", difference)


def _diverged_claim(game, summary, diagnostics, note) -> Claim:
    """The verdict: no run of the game diverged (the paper's curves all reach their end),
    the exact critic's runs beside the learned ones included.  The value: how many runs
    diverged; the row names the first :data:`NAMED` of them."""
    runs = every_diverged_run(summary, diagnostics, game)
    total = int((summary.game == game).sum()) + len(exact_critic_runs(diagnostics, game))
    named = [f"{style.LABELS[r.algorithm]} alpha {fmt(r.entropy)} seed {r.seed}"
             f"{' (exact critic)' if r.critic == 'exact' else ''} at iteration "
             f"{int(r.diverged_at)}" for r in runs.head(NAMED).itertuples()]
    more = f"; and {len(runs) - NAMED} more" if len(runs) > NAMED else ""
    measured = f"none of the {total} runs diverged"
    if len(runs):
        measured = (f"{len(runs)} of {total} runs diverged (NashConv not finite from there on, "
                    "left out of the other rows): " + "; ".join(named) + more)
    return Claim(
        FIGURE, f"{game}: every run finishes without diverging",
        "the paper's curves reach the end of every run (none diverges)",
        note + measured, "no run's NashConv stops being finite (its network's weights blow up)",
        (Check("runs diverged", len(runs), "==", 0),), "fail", float(len(runs)))


def claims(nashconv, ci, summary, diagnostics, cfg, scale: str | None = None) -> list[Claim]:
    """Every game's claims; ``scale``: what the rows are labelled with (e.g. "default
    scale"; :func:`scale_note`)."""
    rows = []
    for game in _games(summary):
        note, _ = scale_note(nashconv, game, scale)
        best = best_entropies(summary, game)
        rows += [
            _faster_claim(game, nashconv, ci, best, cfg, note),
            _final_claim(game, summary, best, note, cfg),
            _average_claim(game, summary, note, cfg),
            _sensitivity_claim(game, summary, note),
            _grid_claim(game, summary, best, note),
        ]
        exact = _exact_critic_claim(game, diagnostics, note, cfg)
        if exact is not None:
            rows.append(exact)
        rows.append(_diverged_claim(game, summary, diagnostics, note))
    return rows


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
