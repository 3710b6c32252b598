"""Figure 4b: NashConv of tabular counterfactual NeuRD vs SPG (CFR with either learner).

Left, the paper's figure: NashConv of the sequence-probability average
policy against iterations, log-log; per algorithm the mean over the constant
step sizes and, shaded, the central interval of NashConv when the step size
is drawn uniformly from that set (paper: "the 95% interval that would result
from a uniform sampling of the step size from this set").  OpenSpiel's CFR
(regret matching) and CFR+ are drawn for reference.  Right: NashConv at the
last iteration against the step size, the evidence behind the claims.

The same module draws every game of the sweep; the figure (and the audit's
``figure`` column) is ``fig4b`` for the config's ``figure_game`` (Leduc in
the paper) and ``fig4b_<game>`` for the extras.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd import names
from neurd.audit import Check, Claim, fmt
from neurd.figures import style

# One figure per game of the tabular section (fig4b, fig4b_<game>): {game} is its wildcard.
INPUTS = {"nashconv": "tabular/{game}/nashconv.parquet"}
PAPER_STEP_SIZES = (0.5, 0.9, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0)


def step_size_interval(values: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Central ``level`` interval of NashConv under a uniform draw of the step size.

    ``values [step sizes, checkpoints]``.  The draw is discrete (each step size
    has probability ``1/n``), so the bounds are its exact quantiles
    (inverted CDF): with 9 step sizes and ``level = 0.95`` they are the
    minimum and the maximum.
    """
    tail = (1.0 - level) / 2.0
    low = np.quantile(values, tail, axis=0, method="inverted_cdf")
    high = np.quantile(values, 1.0 - tail, axis=0, method="inverted_cdf")
    return low, high


def curves(table: pd.DataFrame, algorithm: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``iterations [K]``, ``step sizes [S]`` and NashConv ``[S, K]`` of one algorithm."""
    rows = table[table.algorithm == algorithm]
    grid = rows.pivot_table(index="step_size", columns="iteration", values="nash_conv",
                            aggfunc="first", dropna=False)
    if grid.isna().any().any():
        raise ValueError(f"{algorithm}: the table lacks some (step size, iteration) cells")
    return grid.columns.to_numpy(), grid.index.to_numpy(), grid.to_numpy()


def solver_curve(table: pd.DataFrame, algorithm: str):
    rows = table[table.algorithm == algorithm].sort_values("iteration")
    return rows.iteration.to_numpy(), rows.nash_conv.to_numpy()


def _game(table: pd.DataFrame) -> str:
    names = table.game.unique()
    if len(names) != 1:
        raise ValueError(f"figure 4b draws one game per table, got {list(names)}")
    return str(names[0])


def scale_text(table: pd.DataFrame) -> str:
    """Fig 4b's sizes against the paper's (it states the step sizes, not the iterations)."""
    steps = sorted(table[table.algorithm == names.NEURD].step_size.unique())
    paper = len(steps) == len(PAPER_STEP_SIZES) and np.allclose(steps, PAPER_STEP_SIZES)
    return (f"{style.size(int(table.iteration.max()))} iterations (the paper states none), "
            f"{len(steps)} step sizes" + (" (the paper's)" if paper else
                                          f" (the paper's: {len(PAPER_STEP_SIZES)})"))


def plot(table: pd.DataFrame, cfg: Mapping, scale: str | None = None):
    """Left: the learners' means with their step-size bands (one legend entry each, line
    over band) and the references; the log axis spans the data drawn, no more (a legend
    that finds no free place inside gains headroom: :func:`style.place_legend`)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    style.setup()
    game = _game(table)
    fig, (main, by_step) = plt.subplots(1, 2, figsize=(10.5, 4),
                                        gridspec_kw={"width_ratios": [1.6, 1]})
    level = cfg["interval"]
    floor, top = np.inf, 0.0
    handles, labels, bands = [], [], set()
    for algorithm in [a for a in names.LEARNERS if a in set(table.algorithm)]:
        iterations, steps, values = curves(table, algorithm)
        low, high = step_size_interval(values, level)
        floor, top = min(floor, float(low.min())), max(top, float(high.max()))
        color = style.PALETTE[algorithm]
        (line,) = main.plot(iterations, values.mean(axis=0), color=color, linewidth=2)
        whole = np.array_equal(low, values.min(axis=0)) and np.array_equal(high,
                                                                            values.max(axis=0))
        bands.add(f"min..max over them (= {level:.0%} interval)" if whole else
                  f"{level:.0%} interval of a uniformly drawn step size")
        main.fill_between(iterations, low, high, color=color, alpha=0.2, linewidth=0)
        handles.append((Patch(color=color, alpha=0.2, linewidth=0), line))
        labels.append(style.LABELS[algorithm])
        by_step.plot(steps, values[:, -1], "o-", color=color, label=style.LABELS[algorithm])
    # The references (CFR+ falls orders of magnitude lower) must not squeeze the comparison:
    # the axis ends a little below NeuRD's and SPG's lowest value; a reference that leaves
    # it says where it ended.
    bottom = floor / 3.0
    for algorithm in [a for a in names.REFERENCE_SOLVERS if a in set(table.algorithm)]:
        iterations, values = solver_curve(table, algorithm)
        top = max(top, float(values.max()))
        below = values[-1] < bottom
        (line,) = main.plot(iterations, values, color=style.PALETTE[algorithm], linestyle="--",
                            linewidth=1.2)
        handles.append(line)
        labels.append(f"{style.LABELS[algorithm]}, OpenSpiel"
                      + (f" (to {values[-1]:.2g})" if below else ""))
    title = names.game_title(game)
    main.set(xscale="log", yscale="log", xlabel="iterations",
             ylabel="NashConv of the average policy",
             title=f"{title}: tabular counterfactual NeuRD vs SPG")
    main.set_ylim(bottom, top * (top / bottom) ** 0.04)
    style.label_log_axis(main.yaxis)
    last = int(table.iteration.max())
    by_step.set(yscale="log", xlabel="step size $\\eta$", ylabel=f"NashConv at iteration {last}",
                title="final NashConv by step size")
    style.scale_note(fig, scale, scale_text(table))
    fig.tight_layout()
    sizes = table[table.algorithm.isin(names.LEARNERS)].step_size.nunique()
    main.set_title(f"{names.game_title(game)}: tabular counterfactual NeuRD vs SPG\n"
                   f"line: mean over {sizes} step sizes; band: " + "; ".join(sorted(bands)),
                   fontsize=9)
    style.place_legend(main, fontsize=7, handles=handles, labels=labels, ncol=2)
    style.place_legend(by_step, fontsize=8)
    return fig


def first_reached(iterations: np.ndarray, curve: np.ndarray, level: float) -> float:
    """First checkpoint iteration with ``curve <= level`` (NaN if never)."""
    hit = np.flatnonzero(curve <= level)
    return float(iterations[hit[0]]) if len(hit) else float("nan")


def _paper_says(name: str, quote: str) -> str:
    """The paper's words; an extra figure checks on its game what was said of Leduc."""
    return quote if name == "fig4b" else f"{quote} (said of Leduc; checked here on this game)"


def _closer_claim(table, name, neurd, spg) -> Claim:
    (_, steps, nv), (_, _, sv) = neurd, spg
    lower = int(np.sum(nv[:, -1] < sv[:, -1]))
    ratio = sv[:, -1].mean() / nv[:, -1].mean()
    refs = "; ".join(f"{style.LABELS[a]} {fmt(solver_curve(table, a)[1][-1])}"
                     for a in names.REFERENCE_SOLVERS if a in set(table.algorithm))
    last = int(table.iteration.max())
    return Claim(
        name, "NeuRD approaches Nash more closely than SPG",
        _paper_says(name, "'more quickly and more closely approximates a Nash equilibrium in "
                    "two-player Leduc Poker than tabular, all-actions, counterfactual value PG'"),
        f"NashConv at iteration {last}, mean over step sizes: NeuRD {fmt(nv[:, -1].mean())}, "
        f"SPG {fmt(sv[:, -1].mean())} (SPG/NeuRD = {fmt(ratio)}); NeuRD lower at "
        f"{lower}/{len(steps)} step sizes; best NeuRD {fmt(nv[:, -1].min())}, best SPG "
        f"{fmt(sv[:, -1].min())}" + (f"; reference: {refs}" if refs else ""),
        "mean final NashConv of NeuRD below SPG's, and lower at every step size",
        (Check("mean final NashConv SPG / NeuRD", float(ratio), ">", 1.0),
         Check("step sizes where NeuRD ends lower (threshold: all of them)", lower, "==",
               len(steps))),
    )


def _quicker_claim(name, neurd, spg, fractions) -> Claim:
    (iterations, _, nv), (_, _, sv) = neurd, spg
    n_mean, s_mean = nv.mean(axis=0), sv.mean(axis=0)
    start = n_mean[0]
    parts, checks, strictly = [], [], 0
    for fraction in fractions:
        level = fraction * start
        tn, ts = first_reached(iterations, n_mean, level), first_reached(iterations, s_mean, level)
        parts.append(f"{fmt(level)}: NeuRD at {fmt(tn, 6)}, SPG at {fmt(ts, 6)}")
        tn, ts = (np.inf if np.isnan(t) else t for t in (tn, ts))  # never: inf iterations
        checks.append(Check(f"{fmt(fraction)} x start: iteration NeuRD first reaches it "
                            "(threshold: SPG's, inf: never)", tn, "<=", ts))
        strictly += bool(tn < ts)
    checks.append(Check("levels NeuRD reaches strictly first", strictly, ">=", 1))
    return Claim(
        name, "NeuRD approaches Nash more quickly than SPG",
        _paper_says(name, "'more quickly ... approximates a Nash equilibrium'"),
        "first iteration the mean NashConv reaches " + "; ".join(parts)
        + f" (levels: {', '.join(fmt(f) for f in fractions)} x the uniform policy's "
        f"NashConv {fmt(start)}; nan: not within the run)",
        "NeuRD reaches every level SPG reaches, no later (a level SPG never reaches asks "
        "nothing), and some level strictly earlier",
        tuple(checks),
    )


def _below_claim(name, neurd, spg) -> Claim:
    (iterations, _, nv), (_, _, sv) = neurd, spg
    later = iterations > 1  # at iteration 1 both average policies are uniform
    below = nv.mean(axis=0)[later] < sv.mean(axis=0)[later]
    crossing = iterations[later][~below]
    return Claim(
        name, "NeuRD's mean NashConv stays below SPG's over the whole run",
        _paper_says(name, "the NeuRD curve lies below the SPG curve in Fig 4b"),
        f"NeuRD mean below SPG mean at {int(below.sum())}/{int(later.sum())} checkpoints "
        f"after iteration 1" + (f"; not below at {list(map(int, crossing))}" if len(crossing)
                                 else ""),
        "below at every checkpoint after iteration 1",
        (Check("checkpoints after iteration 1 where NeuRD's mean is not below SPG's",
               int((~below).sum()), "==", 0),),
    )


def _setting_claim(name, table, cfg) -> Claim:
    sets = {a: sorted(table[table.algorithm == a].step_size.unique()) for a in names.LEARNERS
            if a in set(table.algorithm)}
    distinct = len({tuple(s) for s in sets.values()})
    not_paper = sum(not (len(s) == len(PAPER_STEP_SIZES) and np.allclose(s, PAPER_STEP_SIZES))
                    for s in sets.values())
    count = len(next(iter(sets.values())))
    low, high = step_size_interval(np.arange(count, dtype=float)[:, None], cfg["interval"])
    span = "min..max" if (low[0], high[0]) == (0, count - 1) else "an inner range"
    return Claim(
        name, "both algorithms use the same constant step sizes, the paper's set",
        "'eta in {0.5, 0.9, 1, 1.5, 2, 2.5, 3, 3.5, 4}' for both; shaded: the 95% interval "
        "under a uniform draw of the step size",
        "; ".join(f"{a}: {{{', '.join(fmt(x) for x in s)}}}" for a, s in sets.items())
        + f"; interval {fmt(cfg['interval'])}: exact quantiles of a uniform draw from "
        f"{count} step sizes, i.e. {span} over step sizes",
        "same set for both, equal to the paper's; interval 0.95",
        (Check("distinct step-size sets over the learners", distinct, "==", 1),
         Check("learners whose set is not the paper's", not_paper, "==", 0),
         Check("interval level", float(cfg["interval"]), "==", 0.95)),
        "differs",
    )


def claims(table: pd.DataFrame, cfg: Mapping, name: str) -> list[Claim]:
    neurd, spg = curves(table, names.NEURD), curves(table, names.SPG)
    return [
        _closer_claim(table, name, neurd, spg),
        _quicker_claim(name, neurd, spg, cfg["audit_fractions"]),
        _below_claim(name, neurd, spg),
        _setting_claim(name, table, cfg),
    ]


def make(tables: Mapping[str, pd.DataFrame], cfg: Mapping, name: str,
         scale: str | None = None):
    """Figure and claims from the table named in :data:`INPUTS`.

    ``name``: ``fig4b`` for the paper's game (``figure_game``), ``fig4b_<game>``
    for the extras (the stage's :func:`neurd.pipeline.tabular.figures`).
    """
    table = tables["nashconv"]
    return plot(table, cfg, scale), claims(table, cfg, name)
