"""Figure 6's claims audit (:mod:`neurd.figures.fig6` draws the figure), and what its tables
say of themselves: the games, a phase's length, the seeds, the scale they were measured at.

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
from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd import names
from neurd.audit import PAIRED_CRITERION, TIE_BELOW, Check, Claim, fmt, paired
from neurd.figures import style
from neurd.names import NEURD, SPG
from neurd.neural.results import diverged_runs, every_diverged_run, exact_critic_runs
from neurd.stats import best_entropies, grid_margin

FIGURE = "fig6"
PAPER_PHASE_ITERATIONS = 330_000
PAPER_PHASE_TEXT = "0.33e6"  # as the paper writes it
PAPER_SEEDS = 40
NAMED = 3  # the diverged runs a row names before "and k more"


def table_games(summary: pd.DataFrame) -> list[str]:
    order = list(names.GAMES)
    found = list(dict.fromkeys(summary.game))
    return sorted(found, key=lambda g: order.index(g) if g in order else len(order))


def phase_length(nashconv: pd.DataFrame, game: str) -> int:
    rows = nashconv[(nashconv.game == game) & (nashconv.phase == 1)]
    return int(rows.iteration.max())


def _seeds(nashconv: pd.DataFrame, game: str) -> int:
    """The seeds a game's table holds (a publication may hold fewer than its config's)."""
    return int(nashconv[nashconv.game == game].seed.nunique())


def scale_label(nashconv: pd.DataFrame, game: str, scale: str | None) -> tuple[str, bool]:
    """What a game's results were measured at, from the table alone, and whether it is the
    paper's scale: that needs every game of the table at the paper's length with all its
    seeds.  A game the paper did not run is labelled with its own sizes, not with a
    fraction of the paper's.  ``scale``: the name of the run's scale (e.g. "default
    scale")."""
    length, seeds = phase_length(nashconv, game), _seeds(nashconv, game)
    if game not in names.GAMES:  # no paper size to measure it against: its own
        return (f"{scale or 'this run'}: {style.size(length)} iterations per phase, {seeds} "
                "seeds (a game the paper did not run)", False)
    full = [phase_length(nashconv, g) >= PAPER_PHASE_ITERATIONS
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


def reach_iterations(run: pd.DataFrame, phase: int, level: float) -> float:
    """Iterations after the phase's start until the run's NashConv is at most ``level``."""
    rows = run[run.phase == phase].sort_values("iteration")
    hit = rows[rows.nash_conv <= level]
    return float(hit.iteration.iloc[0] - rows.iteration.iloc[0]) if len(hit) else np.inf


def seed_runs(nashconv, game, algorithm, entropy):
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


def faster_claim(game, nashconv, ci, best, cfg, note) -> Claim:
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
    runs = {a: seed_runs(nashconv, game, a, best[a]) for a in (NEURD, SPG)}
    seeds = sorted(set(runs[NEURD]) & set(runs[SPG]))
    length = phase_length(nashconv, game)
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


def grid_claim(game, summary, best, note) -> Claim:
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


def _cause(runs: pd.DataFrame, diagnostics: pd.DataFrame, game: str, cfg: Mapping) -> str:
    """What the diverged ``runs`` say of their cause: NeuRD's reading of its logits where it
    is the raw one (whose common mode nothing bounds: docs/readings.md), and, where the
    tables have the growth columns, the median over those runs of the common mode and the
    largest centred logit at their last checkpoint before diverging ('' where neither)."""
    said = []
    if cfg.get("neurd_logits") == "raw" and (runs.algorithm == NEURD).any():
        said.append("NeuRD's loss on the network's raw outputs (neural.neurd_logits raw), whose "
                    "common mode nothing bounds (docs/readings.md)")
    if "common_mode" in diagnostics:
        last = []
        for run in runs.itertuples():
            critic = "exact" if run.critic == "exact" else cfg.get("critic", "learned")
            rows = diagnostics[(diagnostics.game == game) & (diagnostics.algorithm == run.algorithm)
                               & (diagnostics.entropy == run.entropy)
                               & (diagnostics.seed == run.seed) & (diagnostics.critic == critic)]
            rows = rows[rows.iteration < run.diverged_at].sort_values(["iteration", "phase"])
            rows = rows[np.isfinite(rows.common_mode.to_numpy(float))]
            if len(rows):
                last.append((rows.common_mode.iloc[-1], rows.centred_logit.iloc[-1]))
        if last:
            common, centred = np.median(np.asarray(last, float), axis=0)
            said.append(f"before diverging, the median run's logits had a common mode of "
                        f"{fmt(common)} and a largest centred logit of {fmt(centred)}")
    return f" ({'; '.join(said)})" if said else ""


def _diverged_claim(game, summary, diagnostics, note, cfg) -> Claim:
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
                    "left out of the other rows): " + "; ".join(named) + more
                    + _cause(runs, diagnostics, game, cfg))
    return Claim(
        FIGURE, f"{game}: every run finishes without diverging",
        "the paper's curves reach the end of every run (none diverges)",
        note + measured, "no run's NashConv stops being finite (its network's weights blow up)",
        (Check("runs diverged", len(runs), "==", 0),), "fail", float(len(runs)))


def claims(nashconv, ci, summary, diagnostics, cfg, scale: str | None = None) -> list[Claim]:
    """Every game's claims; ``scale``: what the rows are labelled with (e.g. "default
    scale"; :func:`scale_note`)."""
    rows = []
    for game in table_games(summary):
        note, _ = scale_note(nashconv, game, scale)
        best = best_entropies(summary, game)
        rows += [
            faster_claim(game, nashconv, ci, best, cfg, note),
            _final_claim(game, summary, best, note, cfg),
            _average_claim(game, summary, note, cfg),
            _sensitivity_claim(game, summary, note),
            grid_claim(game, summary, best, note),
        ]
        exact = _exact_critic_claim(game, diagnostics, note, cfg)
        if exact is not None:
            rows.append(exact)
        rows.append(_diverged_claim(game, summary, diagnostics, note, cfg))
    return rows
