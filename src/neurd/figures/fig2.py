"""Figure 2: logits and policies of SPG and Hedge in matching pennies with forfeit.

A 2x2 grid: rows SPG and Hedge, columns logits and policy, against rounds;
the dashed vertical line marks the odd player's switch from H to T.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd.audit import Check, Claim, fmt
from neurd.figures import style
from neurd.names import HEDGE, NEURD, SPG
from neurd.regret import switch_rounds
from neurd.stats import refined_optimum

FIGURE = "fig2"
# Tails and Forfeit coincide while both are rarely played: dashes over dots keep both seen.
ACTION_LINES = {"H": dict(linestyle="-", linewidth=1.6),
                "T": dict(linestyle="--", linewidth=2.2, zorder=3),
                "F": dict(linestyle=":", linewidth=2.6, zorder=2)}


PAPER_HORIZON, PAPER_STEP_SIZE = 100, 0.21  # "T = 100", "eta = 0.21" (Fig 2's caption)


def scale_text(cfg: Mapping) -> str:
    """Fig 2's setting against the paper's caption."""
    fig2 = cfg["figure2"]
    same = fig2["horizon"] == PAPER_HORIZON and fig2["step_size"] == PAPER_STEP_SIZE
    return (f"T = {fig2['horizon']} rounds, step size $\\eta$ = {fig2['step_size']:g}"
            + (" (the paper's)" if same else
               f" (the paper: T = {PAPER_HORIZON}, $\\eta$ = {PAPER_STEP_SIZE:g})"))


def plot(trajectories: pd.DataFrame, cfg: Mapping, scale: str | None = None):
    import matplotlib.pyplot as plt

    style.setup()
    fig2 = cfg["figure2"]
    switch = int(switch_rounds([fig2["horizon"]], cfg["switch_fraction"])[0])
    fig, axes = plt.subplots(2, 2, figsize=(10, 6), sharex=True)
    for row, algorithm in enumerate((SPG, HEDGE)):
        data = trajectories[trajectories.algorithm == algorithm]
        shown = {"logit": centred(_wide(trajectories, algorithm, "logit")),
                 "probability": _wide(trajectories, algorithm, "probability")}
        for col, (value, label) in enumerate((("logit", r"centred logit $y(a) - \bar y$"),
                                              ("probability", r"policy $\pi(a)$"))):
            ax = axes[row, col]
            for action in data.action.unique():
                ax.plot(shown[value].index, shown[value][action],
                        color=style.ACTION_PALETTE[action],
                        label={"H": "Heads", "T": "Tails", "F": "Forfeit"}[action],
                        **ACTION_LINES[action])
            ax.axvline(switch, color="black", linestyle="--", linewidth=1, gid="phase-line",
                       label=f"odd player switches (round {switch})")
            title = {(SPG, "logit"): "SPG: logits ($y + \\eta\\,\\pi A$), centred",
                     (HEDGE, "logit"): "Hedge (= NeuRD): logits ($\\eta\\,\\Sigma_t u_t$), "
                                       "centred"}.get(
                (algorithm, value), f"{style.LABELS[algorithm]}: policy")
            ax.set(ylabel=label, title=title)
            if value == "probability":
                ax.set_ylim(-0.02, 1.02)
            if row == 1:
                ax.set_xlabel("round")
    rewards = cfg["rewards"]
    fig.suptitle(f"Matching pennies with forfeit, T = {fig2['horizon']}, "
                 f"step size $\\eta$ = {fig2['step_size']}, rewards win {rewards['win']:g}, "
                 f"loss {rewards['loss']:g}", y=1.0)
    style.scale_note(fig, scale, scale_text(cfg))
    fig.tight_layout()
    style.place_legend(axes[0, 0], fontsize=8)
    return fig


def _wide(trajectories: pd.DataFrame, algorithm: str, value: str) -> pd.DataFrame:
    data = trajectories[trajectories.algorithm == algorithm]
    return data.pivot(index="round", columns="action", values=value)


def centred(logits: pd.DataFrame) -> pd.DataFrame:
    """Logits minus their mean over the actions, per round: the part the policy depends on,
    the same for Hedge's and NeuRD's logits and under any shift of the rewards."""
    return logits.sub(logits.mean(axis=1), axis=0)


def _crossing(probs: pd.DataFrame, switch: int) -> int | None:
    """First round after the switch at which T is more probable than H."""
    after = probs.loc[switch:]
    hit = after.index[after["T"] > after["H"]]
    return int(hit[0]) if len(hit) else None


def _tuned_step_claim(table: pd.DataFrame, cfg: Mapping, reading: str,
                      alternative: bool = False) -> Claim:
    fig2 = cfg["figure2"]
    rows = table[(table.algorithm == SPG) & (table.forfeit == fig2["forfeit"])
                 & (table.horizon == fig2["horizon"])]
    optimum, inside = refined_optimum(rows.step_size, rows.regret)
    stated = fig2["step_size"]
    at_stated = rows.loc[(np.log10(rows.step_size / stated)).abs().idxmin()]
    # The paper gives two significant digits: the optimum must round to it.
    checks = (Check("optimum strictly inside the step-size grid (1: yes, 0: at an end)",
                    float(inside), "==", 1),
              Check("optimum at two significant digits", float(f"{optimum:.2g}"), "==",
                    float(f"{stated:.2g}")))
    return Claim(
        FIGURE,
        f"eta = {stated} minimises SPG's regret at T = {fig2['horizon']} ({reading})",
        "caption: 'The step size eta=0.21 was optimized in a parameter sweep for SPG with T=100'",
        f"optimum eta = {fmt(optimum, 4)} (grid minimum refined by a parabola in log eta"
        f"{'' if inside else '; at the edge of the grid'}), regret {fmt(rows.regret.min(), 5)}; "
        f"regret at eta = {fmt(at_stated.step_size, 3)}: {fmt(at_stated.regret, 5)}",
        f"optimum strictly inside the grid and rounds to {stated} at two significant digits",
        checks, "differs", optimum, reading, "tuned_step_size", alternative,
    )


def claims(trajectories: pd.DataFrame, sweep: pd.DataFrame, readings: pd.DataFrame,
           cfg: Mapping) -> list[Claim]:
    fig2 = cfg["figure2"]
    win, loss = cfg["rewards"]["win"], cfg["rewards"]["loss"]
    switch = int(switch_rounds([fig2["horizon"]], cfg["switch_fraction"])[0])
    rows = [_tuned_step_claim(sweep, cfg, f"default rewards win={win:g}, loss={loss:g}")]
    for name, table in readings.groupby("reading", sort=False):
        r = table.iloc[0]
        rows.append(_tuned_step_claim(table, cfg, f"reading '{name}': win={r.win}, loss={r.loss}",
                                      alternative=True))

    cross = {a: _crossing(_wide(trajectories, a, "probability"), switch) for a in (SPG, HEDGE)}
    delay = {a: (c - switch if c is not None else None) for a, c in cross.items()}
    rounds = {a: float("inf") if d is None else float(d) for a, d in delay.items()}
    rows.append(Claim(
        FIGURE, "SPG reacts more slowly than Hedge to the switch",
        "'SPG reacts slower' (different logit slopes after the switch)",
        f"rounds after the switch until P(T) > P(H): Hedge {delay[HEDGE]}, SPG {delay[SPG]}",
        "Hedge switches (its delay is finite) and SPG's delay is longer than Hedge's (or SPG "
        "never switches: inf)",
        (Check("Hedge's delay (rounds after the switch until P(T) > P(H), inf: never)",
               rounds[HEDGE], "<", float("inf")),
         Check("SPG's delay (Hedge's: the threshold)", rounds[SPG], ">", rounds[HEDGE])),
    ))
    if not fig2["forfeit"]:
        return rows

    probs = {a: _wide(trajectories, a, "probability") for a in (HEDGE, NEURD)}
    difference = float((probs[HEDGE] - probs[NEURD]).abs().max().max())
    rows.append(Claim(
        FIGURE, "Hedge and tabular NeuRD play the same policy in every round",
        "Statement 1: Hedge, discrete-time RD and single-state all-actions tabular NeuRD "
        "are equivalent",
        f"largest |pi_Hedge - pi_NeuRD| over the {len(probs[HEDGE]) - 1} rounds: {fmt(difference)}",
        "<= 1e-12", (Check("largest |pi_Hedge - pi_NeuRD|", difference, "<=", 1e-12),),
    ))

    return rows + _logit_claims(trajectories, switch, cross[HEDGE])


def _logit_claims(trajectories: pd.DataFrame, switch: int, hedge_cross: int | None
                  ) -> list[Claim]:
    """The claims on the logits after the switch (in the forfeit game): how fast the forfeit
    logit falls, Hedge's constant gap until T is preferred (round ``hedge_cross``), SPG's
    shrinking gap."""
    rows = []
    logits = {a: centred(_wide(trajectories, a, "logit")) for a in (SPG, HEDGE, NEURD)}
    rate = {a: float((v["F"].iloc[-1] - v["F"].loc[switch]) / (len(v) - 1 - switch))
            for a, v in logits.items()}
    rows.append(Claim(
        FIGURE, "after the switch SPG's forfeit logit falls very slowly, Hedge's keeps falling",
        "'the logit for the forfeit action is decreasing very slowly after the switch' (SPG); "
        "'the logit for the forfeit action keeps decreasing' (Hedge)",
        f"mean change of the centred F logit (F's logit minus the mean logit) per round after "
        f"the switch: Hedge {fmt(rate[HEDGE])}, SPG {fmt(rate[SPG])}, NeuRD (y + eta*A, the "
        f"same policy as Hedge) {fmt(rate[NEURD])}",
        "both negative and SPG's at most a tenth of Hedge's (in absolute value)",
        (Check("Hedge's change per round", rate[HEDGE], "<", 0),
         Check("SPG's change per round", rate[SPG], "<", 0),
         Check("|SPG's change per round| (threshold: a tenth of Hedge's)", abs(rate[SPG]), "<=",
               0.1 * abs(rate[HEDGE]))),
    ))
    gap = {a: v.max(axis=1) - v.min(axis=1) for a, v in logits.items() if a != NEURD}
    # Until the round before T overtakes H: from then on T holds the largest logit.
    end = hedge_cross - 1 if hedge_cross is not None else len(gap[HEDGE]) - 1
    hedge_window = gap[HEDGE].loc[switch:end]
    drift = float((hedge_window - hedge_window.iloc[0]).abs().max())
    rows.append(Claim(
        FIGURE, "Hedge keeps a constant logit gap from the switch until T is preferred",
        "'maintaining a constant logit gap until T becomes the preferred action'",
        f"largest change of Hedge's logit gap over rounds {switch}..{end}: {fmt(drift)} "
        f"(gap {fmt(hedge_window.iloc[0])})",
        "change <= 1e-9 x the gap (at least 1e-9)",
        (Check("largest change of Hedge's logit gap (threshold: 1e-9 x max(1, gap))", drift,
               "<=", 1e-9 * max(1.0, hedge_window.iloc[0])),),
    ))
    spg_gap = gap[SPG]
    rows.append(Claim(
        FIGURE, "SPG's logit gap shrinks after the switch",
        "'This decreases the logit gap (i.e., the range between largest and smallest logit)'",
        f"SPG logit gap at the switch {fmt(spg_gap.loc[switch])}, at the end "
        f"{fmt(spg_gap.iloc[-1])}",
        "gap at the end < gap at the switch",
        (Check("SPG's logit gap at the end (threshold: at the switch)", spg_gap.iloc[-1], "<",
               spg_gap.loc[switch]),),
    ))
    return rows


INPUTS = {
    "trajectories": "matrix/trajectories.parquet",
    "sweep": "matrix/regret_sweep.parquet",
    "readings": "matrix/reward_readings.parquet",
}


def make(tables: Mapping[str, pd.DataFrame], cfg: Mapping, name: str = FIGURE,
         scale: str | None = None):
    """Figure and claims from the tables named in :data:`INPUTS` (``name``: this figure's;
    ``scale``: the config's, said on the figure)."""
    return (plot(tables["trajectories"], cfg, scale),
            claims(tables["trajectories"], tables["sweep"], tables["readings"], cfg))
