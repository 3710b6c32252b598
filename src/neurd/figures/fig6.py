"""Figure 6: neural NeuRD vs SPG, NashConv through phases of negated reward, per game.

Top row (the paper's a-c): per game, the exact NashConv of the current network
policy against learning iterations, for the entropy level with the lowest
final NashConv of each algorithm; mean over seeds with its bootstrap band; red
dashed lines where the payoff is negated.  Bottom row (d-f): per game, the
average NashConv over all iterations of every run, at every entropy level, as
box plots per algorithm.

The audit measures the paper's four claims per game, paired by seed where
seeds are shared, plus whether the entropy grid brackets each algorithm's best
level and what the exact critic (where it was run) changes.  Every verdict
states the scale it was measured at: short of the paper's 3 x 0.33e6
iterations and 40 seeds it is provisional.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd import names
from neurd.audit import Claim, fmt, paired_verdict, verdict
from neurd.figures import style
from neurd.names import NEURD, SPG
from neurd.stats import paired_difference_ci

FIGURE = "fig6"
INPUTS = {
    "nashconv": "neural/nashconv.parquet",
    "ci": "neural/nashconv_ci.parquet",
    "summary": "neural/summary.parquet",
    "diagnostics": "neural/diagnostics.parquet",
}
PAPER_PHASE_ITERATIONS = 330_000
PAPER_SEEDS = 40
PANELS = "abcdefghijkl"
JITTER = 0.15  # half-width of the strip plot's sideways spread, in categories (_strip)


def best_entropies(summary: pd.DataFrame, game: str) -> dict[str, float]:
    """Per algorithm, the entropy level with the lowest mean final NashConv over seeds."""
    rows = summary[summary.game == game]
    means = rows.groupby(["algorithm", "entropy"]).final_nash_conv.mean()
    return {a: float(means.loc[a].idxmin()) for a in means.index.get_level_values(0).unique()}


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


def _strip(ax, rows: pd.DataFrame, order: list[str], rng: np.random.Generator) -> None:
    """Every run's average NashConv as a dot over its algorithm's box, jittered sideways.

    The dots ``seaborn.stripplot(..., color="black", size=2.5, alpha=0.6, jitter=0.15)``
    drew, with its jitter: uniform within +-``JITTER`` of a category's width, none for a
    lone dot; the categorical axis keeps the box plot's limits, as seaborn keeps them.
    seaborn draws the jitter from NumPy's global generator and takes none of its own, so
    the same tables gave a different figure on every run.  The figure's own generator
    ``rng``, seeded from the config's ``seed``, makes the jitter depend on the config alone
    without touching NumPy's global state, which seeding it around seaborn's call (and
    restoring it after) would change, if only for the length of the call.
    """
    limits = ax.get_xlim()
    for position, algorithm in enumerate(order):
        values = rows.loc[rows.algorithm == algorithm, "average_nash_conv"].to_numpy()
        offsets = rng.uniform(-JITTER, JITTER, len(values)) if len(values) > 1 else 0.0
        ax.scatter(position + offsets, values, color="black", s=2.5**2, alpha=0.6,
                   linewidth=0, zorder=3)
    ax.set_xlim(limits)


def plot(nashconv, ci, summary, cfg, title: str | None = None):
    import matplotlib.pyplot as plt
    import seaborn as sns

    style.setup()
    rng = np.random.default_rng(cfg["seed"])  # the strip plots' jitter (_strip)
    games = _games(summary)
    fig, axes = plt.subplots(2, len(games), figsize=(4.6 * len(games), 7.2), squeeze=False)
    for col, game in enumerate(games):
        ax = axes[0, col]
        best = best_entropies(summary, game)
        for algorithm, entropy in best.items():
            c = _curve(ci, game, algorithm, entropy)
            color = style.PALETTE[algorithm]
            ax.plot(c.iteration, c["mean"], color=color,
                    label=rf"{style.LABELS[algorithm]} ($\eta$ = {entropy:g})")
            ax.fill_between(c.iteration, c.ci_low, c.ci_high, color=color, alpha=0.25,
                            linewidth=0)
        length = _phase_length(nashconv, game)
        for boundary in range(length, int(ci[ci.game == game].iteration.max()), length):
            ax.axvline(boundary, **style.PHASE_LINE)
        seeds = summary[summary.game == game].seed.nunique()
        ax.set(xlabel="learning iterations (critic updates)", ylabel="NashConv (current policy)",
               title=f"({PANELS[col]}) {names.game_title(game)}: best entropy per algorithm,\n"
                     f"mean of {seeds} seeds, {int(100 * cfg['bootstrap']['confidence'])}% "
                     "bootstrap CI")
        ax.ticklabel_format(axis="x", style="sci", scilimits=(0, 3))
        ax.legend(fontsize=8)
        box = axes[1, col]
        rows = summary[summary.game == game]
        order = [a for a in names.LEARNERS if a in set(rows.algorithm)]
        sns.boxplot(data=rows, x="algorithm", y="average_nash_conv", order=order, ax=box,
                    hue="algorithm", palette=style.PALETTE, legend=False, showfliers=False,
                    width=0.5)
        _strip(box, rows, order, rng)
        box.set_xticks(range(len(order)), [style.LABELS[a] for a in order])
        box.set(xlabel="", ylabel="average NashConv over all iterations",
                title=f"({PANELS[len(games) + col]}) {names.game_title(game)}: every run at "
                      f"{rows.entropy.nunique()} entropy levels")
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


# --- the claims audit ---------------------------------------------------------------------


def scale_note(nashconv: pd.DataFrame, game: str) -> tuple[str, bool]:
    """The measured scale in words, and whether it is the paper's (else provisional)."""
    length = _phase_length(nashconv, game)
    seeds = nashconv[nashconv.game == game].seed.nunique()
    paper = length >= PAPER_PHASE_ITERATIONS and seeds >= PAPER_SEEDS
    note = (f"[{'paper scale' if paper else 'provisional'}: {length} iterations per phase "
            f"(paper {PAPER_PHASE_ITERATIONS}), {seeds} seeds (paper {PAPER_SEEDS})] ")
    return note, paper


def reach_iterations(run: pd.DataFrame, phase: int, level: float) -> float:
    """Iterations after the phase's start until the run's NashConv is at most ``level``."""
    rows = run[run.phase == phase].sort_values("iteration")
    hit = rows[rows.nash_conv <= level]
    return float(hit.iteration.iloc[0] - rows.iteration.iloc[0]) if len(hit) else np.inf


def _runs(nashconv, game, algorithm, entropy):
    rows = nashconv[(nashconv.game == game) & (nashconv.algorithm == algorithm)
                    & (nashconv.entropy == entropy)]
    return {seed: run for seed, run in rows.groupby("seed")}


def _faster_claim(game, nashconv, ci, best, cfg, note) -> Claim:
    """The verdict: in every phase after a negation NeuRD's median time to the level is
    below SPG's (equal medians: NeuRD earlier in more seeds).  The value, continuous: the
    mean over those phases of (NeuRD's median time - SPG's) / the phase's length, a run
    that never reaches the level counted as taking the whole phase (-1: NeuRD there at
    once and SPG never; 0: level; NaN without a phase after a negation)."""
    phases = sorted(nashconv[nashconv.game == game].phase.unique())
    runs = {a: _runs(nashconv, game, a, best[a]) for a in (NEURD, SPG)}
    seeds = sorted(set(runs[NEURD]) & set(runs[SPG]))
    length = _phase_length(nashconv, game)
    parts, ok, gaps = [], True, []
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
            earlier = median[NEURD] < median[SPG] or (median[NEURD] == median[SPG]
                                                     and wins > losses)
            ok &= earlier
            capped = {a: float(np.median(np.minimum(t, length))) for a, t in times.items()}
            gaps.append((capped[NEURD] - capped[SPG]) / length)
    return Claim(
        FIGURE, f"{game}: NeuRD converges faster after each negation",
        "'NeuRD converges faster than SPG in all three domains'",
        note + "; ".join(parts) + f" (level: {fmt(cfg['audit_fraction'])} x the uniform "
        "policy's NashConv in the phase's game; inf: not reached; best entropy per algorithm)",
        "in every phase after a negation NeuRD's median time to the level is below SPG's",
        verdict(ok), float(np.mean(gaps)) if gaps else np.nan)


def paired(neurd: pd.Series, spg: pd.Series, cfg: Mapping) -> tuple[str, str, float]:
    """``(measured text, verdict, mean difference)`` of "NeuRD below SPG" from values paired
    by index (seeds, or (entropy, seed)): the bootstrap CI of the mean paired difference
    NeuRD - SPG (shared seeds start from the same weights), ``tie`` where it covers 0."""
    both = neurd.index.intersection(spg.index)
    a, b = neurd.loc[both].to_numpy(), spg.loc[both].to_numpy()
    boot = cfg["bootstrap"]
    mean, low, high = paired_difference_ci(
        a, b, resamples=int(boot["resamples"]), confidence=float(boot["confidence"]),
        method=boot["method"], seed=int(cfg["seed"]))
    text = (f"paired difference NeuRD - SPG {fmt(mean)}, {fmt(100 * float(boot['confidence']))}%"
            f" CI [{fmt(low)}, {fmt(high)}]; NeuRD lower in {int(np.sum(a < b))} of {len(both)}")
    return text, paired_verdict(low, high), mean


PAIRED_CRITERION = ("the bootstrap CI of the mean paired difference NeuRD - SPG lies below 0 "
                    "(tie: it covers 0)")


def _final_claim(game, summary, best, note, cfg) -> Claim:
    rows = summary[summary.game == game]
    final = {a: rows[(rows.algorithm == a) & (rows.entropy == best[a])]
             .set_index("seed").final_nash_conv for a in (NEURD, SPG)}
    means = {a: float(f.mean()) for a, f in final.items()}
    text, outcome, difference = paired(final[NEURD], final[SPG], cfg)
    return Claim(
        FIGURE, f"{game}: NeuRD ends with the lowest final NashConv",
        "'NeuRD ... yields the lowest final NashConv'",
        note + f"final NashConv (mean of the last checkpoints) at the best entropy: NeuRD "
        f"{fmt(means[NEURD])} (eta {fmt(best[NEURD])}), SPG {fmt(means[SPG])} (eta "
        f"{fmt(best[SPG])}); {text} seeds", PAIRED_CRITERION, outcome,
        difference)


def _average_claim(game, summary, note, cfg) -> Claim:
    rows = summary[summary.game == game]
    wide = rows.pivot_table(index=["entropy", "seed"], columns="algorithm",
                            values="average_nash_conv")
    means = {a: float(wide[a].mean()) for a in (NEURD, SPG)}
    text, outcome, difference = paired(wide[NEURD], wide[SPG], cfg)
    return Claim(
        FIGURE, f"{game}: NeuRD's average NashConv over all iterations is lower",
        "'NeuRD consistently has lower average NashConv'",
        note + f"average NashConv over every entropy level and seed: NeuRD {fmt(means[NEURD])}, "
        f"SPG {fmt(means[SPG])}; {text} (entropy, seed) pairs", PAIRED_CRITERION, outcome,
        difference)


def _sensitivity_claim(game, summary, note) -> Claim:
    rows = summary[summary.game == game]
    by_level = rows.groupby(["algorithm", "entropy"]).average_nash_conv.mean()
    spread = {a: float(by_level.loc[a].max() - by_level.loc[a].min()) for a in (NEURD, SPG)}
    return Claim(
        FIGURE, f"{game}: NeuRD is less sensitive to the entropy level",
        "'NeuRD ... is less sensitive to the entropy regularization level, in contrast to PG'",
        note + f"spread (max - min over {rows.entropy.nunique()} levels) of the mean average "
        f"NashConv: NeuRD {fmt(spread[NEURD])}, SPG {fmt(spread[SPG])}",
        "NeuRD's spread below SPG's", verdict(spread[NEURD] < spread[SPG]),
        spread[NEURD] - spread[SPG])


def grid_margin(summary: pd.DataFrame, game: str, algorithm: str) -> float:
    """How clearly the entropy grid brackets ``algorithm``'s best level in ``game``: the
    lower of the mean final NashConv at the grid's two ends minus the lowest at a level
    strictly inside it (means over seeds, as :func:`best_entropies`).  Positive: an inside
    level beats both ends by that much (the best lies inside); negative: an end beats every
    inside level by that much (the best lies on it); near 0: the ends and the best inside
    level are alike, and seed noise can move the best across the grid's end.  NaN for a
    grid of fewer than 3 levels (nothing inside)."""
    rows = summary[(summary.game == game) & (summary.algorithm == algorithm)]
    means = rows.groupby("entropy").final_nash_conv.mean().sort_index()
    if len(means) < 3:
        return np.nan
    return float(min(means.iloc[0], means.iloc[-1]) - means.iloc[1:-1].min())


def _grid_claim(game, summary, best, note) -> Claim:
    """The verdict: every algorithm's best level lies strictly inside the grid.  The
    value, continuous: the smallest :func:`grid_margin` over the algorithms (in NashConv,
    positive where every best level lies inside), rather than a count of them: it says
    how far the bracketing is from flipping."""
    levels = sorted(summary[summary.game == game].entropy.unique())
    inside = {a: levels[0] < e < levels[-1] for a, e in best.items()}
    return Claim(
        FIGURE, f"{game}: the entropy grid brackets each algorithm's best level",
        "the paper sweeps entropy levels and shows the best per algorithm (levels not stated)",
        note + f"grid {[fmt(x) for x in levels]}; best by final NashConv: "
        + ", ".join(f"{style.LABELS[a]} {fmt(e)}" for a, e in best.items()),
        "every algorithm's best level lies strictly inside the grid",
        verdict(all(inside.values())),
        float(np.min([grid_margin(summary, game, a) for a in best])))


def _exact_critic_claim(game, diagnostics, note, cfg) -> Claim | None:
    rows = diagnostics[diagnostics.game == game]
    if not {"exact", "learned"} <= set(rows.critic):
        return None
    last = rows[rows.iteration == rows.iteration.max()]
    last = last[last.phase == last.phase.max()]
    final = last.groupby(["critic", "algorithm"]).nash_conv.mean()
    rmse = last[last.critic == "learned"].groupby("algorithm").critic_rmse.mean()
    runs = last[last.critic == "exact"].set_index(["entropy", "seed"])
    text, outcome, difference = paired(runs[runs.algorithm == NEURD].nash_conv,
                           runs[runs.algorithm == SPG].nash_conv, cfg)
    exact = {a: float(final.loc[("exact", a)]) for a in (NEURD, SPG)}
    learned = {a: float(final.loc[("learned", a)]) for a in (NEURD, SPG)}
    return Claim(
        FIGURE, f"{game}: with the exact q in the critic's place, NeuRD ends below SPG",
        "not in the paper: separates the learner's effect from the critic's lag",
        note + "final NashConv, mean over seeds and entropy levels: exact critic NeuRD "
        f"{fmt(exact[NEURD])}, SPG {fmt(exact[SPG])}; learned critic NeuRD "
        f"{fmt(learned[NEURD])}, SPG {fmt(learned[SPG])}; learned critic's final RMS error "
        f"NeuRD {fmt(float(rmse[NEURD]))}, SPG {fmt(float(rmse[SPG]))}; exact critic: {text} "
        "(entropy, seed) pairs", PAIRED_CRITERION, outcome,
        difference)


def claims(nashconv, ci, summary, diagnostics, cfg) -> list[Claim]:
    rows = []
    for game in _games(summary):
        note, _ = scale_note(nashconv, game)
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
    return rows


def make(tables: Mapping[str, pd.DataFrame], cfg: Mapping, name: str = FIGURE):
    """Figure and claims from the tables named in :data:`INPUTS`."""
    nashconv, ci, summary = tables["nashconv"], tables["ci"], tables["summary"]
    # fig6_<name>: drawn from the publication published/<name> (neurd.pipeline.published)
    title = None if name == FIGURE else (
        f"{name}: Fig 6 from the published run published/{name.removeprefix(FIGURE + '_')}")
    return (plot(nashconv, ci, summary, cfg, title),
            claims(nashconv, ci, summary, tables["diagnostics"], cfg))
