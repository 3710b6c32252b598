"""Figure 3: learning dynamics of RD and SPG in (biased) Rock-Paper-Scissors.

(a) RD and (b) SPG/QPG trajectories in RPS (nu = 1) over direction arrows of
the flow; (c) RD and (d) SPG time-averaged trajectories (solid) in biased RPS
(nu = 3), the current policy faint behind them; (e) the speed ratio
``||pi_dot_RD|| / ||pi_dot_PG||`` over the simplex, log colour scale.  Drawn on
ternary axes (mpltern): top R, left P, right S.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd.audit import Check, Claim, fmt
from neurd.figures import style
from neurd.names import NEURD, SPG

FIGURE = "fig3"
INPUTS = {
    "flows": "rps/flows.parquet",
    "field": "rps/vector_field.parquet",
    "speed": "rps/speed_ratio.parquet",
    "nash": "rps/nash_sets.parquet",
}
CORNERS = ("rock", "paper", "scissors")   # ternary top, left, right
PANELS = {
    "a": (NEURD, "RD (= NeuRD)"), "b": (SPG, "SPG (= QPG)"),
    "c": (NEURD, "RD: time averages"), "d": (SPG, "SPG: time averages"),
}
START_COLORS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a", "#66a61e", "#e6ab02")

# Audit thresholds, fixed before looking at the results.
RD_DRIFT_TOL = 1e-4          # relative drift of KL(x*||pi) on a closed RD orbit
RD_AVERAGE_TOL = 0.01        # distance of RD time averages to Nash at the end
SHRINK = 0.5                 # "converging": distance at T at most half that at T/10
SEPARATION = 10.0            # SPG's end distance vs RD's, to call it "not converging"
VERTEX, CENTRE = 0.9, 0.5    # regions of Fig 3e compared: max pi >= 0.9 vs <= 0.5


def nash_point(nash: pd.DataFrame, nu: float) -> np.ndarray:
    """Closed-form Nash ``[R, P, S]`` of game ``nu`` from the nash table."""
    rows = nash[np.isclose(nash.nu, nu)].set_index("action")
    return rows.loc[["R", "P", "S"], "closed_form"].to_numpy()


def _tlr(frame: pd.DataFrame):
    return frame[CORNERS[0]], frame[CORNERS[1]], frame[CORNERS[2]]


def _corner_labels(ax) -> None:
    ax.set_tlabel("R")
    ax.set_llabel("P")
    ax.set_rlabel("S")
    for axis in (ax.taxis, ax.laxis, ax.raxis):
        axis.set_ticks([])
        axis.set_label_rotation_mode("horizontal")
    ax.grid(False)


def _arrows(ax, field: pd.DataFrame) -> None:
    """Unit-length direction arrows of the policy flow (speed is panel e's subject)."""
    d = field[["d_rock", "d_paper", "d_scissors"]].to_numpy()
    d = d / np.maximum(field.speed.to_numpy()[:, None], 1e-300)
    ax.quiver(*_tlr(field), d[:, 0], d[:, 1], d[:, 2], color="0.55", width=0.006,
              scale=16, headwidth=4, headlength=4, zorder=1)


def _trajectory_panel(ax, flows, field, nash, panel, cfg) -> None:
    algorithm, title = PANELS[panel]
    rows = flows[flows.panel == panel]
    nu = float(rows.nu.iloc[0])
    _arrows(ax, field[(np.isclose(field.nu, nu)) & (field.algorithm == algorithm)])
    averaged = panel in ("c", "d")
    for start, path in rows.groupby("start"):
        color = START_COLORS[start % len(START_COLORS)]
        current = path[path.series == "policy"]
        if averaged:
            current = current[current.time <= cfg["portraits"]["flow_time"]]
            mean = path[path.series == "time_average"]
            ax.plot(*_tlr(current), color=color, linewidth=0.6, alpha=0.35, zorder=2)
            ax.plot(*_tlr(mean), color=color, linewidth=1.8, zorder=3)
            end = mean.iloc[-1]
            ax.scatter([end.rock], [end.paper], [end.scissors], color=color, s=22, marker="o",
                       edgecolor="black", linewidth=0.6, zorder=7)
        else:
            ax.plot(*_tlr(current), color=color, linewidth=1.2, zorder=3)
        first = path.iloc[0]
        ax.scatter([first.rock], [first.paper], [first.scissors], color=color, s=10, zorder=4)
    x = nash_point(nash, nu)
    ax.scatter([x[0]], [x[1]], [x[2]], marker="*", s=130, color="gold", edgecolor="black",
               linewidth=0.6, zorder=8, label="Nash")
    suffix = f"t <= {rows.time.max():g}"
    ax.set_title(f"({panel}) {title}\n" + rf"$\nu$ = {nu:g}, {suffix}", fontsize=9, pad=18)
    _corner_labels(ax)


def _ratio_panel(fig, ax, speed: pd.DataFrame, nash: pd.DataFrame) -> None:
    from matplotlib.colors import LogNorm

    data = speed.dropna(subset=["ratio"])
    norm = LogNorm(vmin=data.ratio.min(), vmax=data.ratio.max())
    mesh = ax.tripcolor(*_tlr(data), data.ratio, norm=norm, shading="gouraud",
                        cmap="viridis", rasterized=True)
    nu = float(speed.nu.iloc[0])
    x = nash_point(nash, nu)
    ax.scatter([x[0]], [x[1]], [x[2]], marker="*", s=90, color="gold", edgecolor="black",
               linewidth=0.6, zorder=6)
    ax.set_title("(e) speed ratio " + r"$\|\dot\pi_{RD}\| / \|\dot\pi_{PG}\|$" + "\n"
                 + rf"$\nu$ = {nu:g}", fontsize=9, pad=18)
    _corner_labels(ax)
    cax = ax.inset_axes([1.08, 0.05, 0.05, 0.9], transform=ax.transAxes)
    bar = fig.colorbar(mesh, cax=cax)
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullLocator

    ticks = [t for t in (1, 2, 3, 5, 10, 20, 30, 50, 100, 200, 500, 1000)
             if norm.vmin <= t <= norm.vmax]
    bar.ax.yaxis.set_major_locator(FixedLocator(ticks))
    bar.ax.yaxis.set_minor_locator(NullLocator())
    bar.ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    bar.set_label("speed ratio (log scale)", fontsize=8)
    bar.ax.tick_params(labelsize=7)


def scale_text(cfg: Mapping) -> str:
    """The times Fig 3 integrates over (the paper states none)."""
    portraits = cfg["portraits"]
    return (f"flows (a, b) over t <= {portraits['flow_time']:g}, time averages (c, d) over "
            f"t <= {portraits['average_time']:g} (the paper states no times)")


def plot(tables: Mapping[str, pd.DataFrame], cfg: Mapping, scale: str | None = None):
    import matplotlib.pyplot as plt
    import mpltern  # noqa: F401  (registers the "ternary" projection)

    style.setup()
    # Two rows, so that the figure stays readable at a report's width: the flows (a, b) and
    # the speed ratio (e) above, the time averages (c, d) and the legend below.
    fig = plt.figure(figsize=(12.5, 8.4))
    for position, panel in zip((1, 2, 4, 5), "abcd"):
        ax = fig.add_subplot(2, 3, position, projection="ternary")
        _trajectory_panel(ax, tables["flows"], tables["field"], tables["nash"], panel, cfg)
    ax = fig.add_subplot(2, 3, 3, projection="ternary")
    _ratio_panel(fig, ax, tables["speed"], tables["nash"])
    fig.legend(handles=_legend_handles(), loc="center", ncol=1, fontsize=9,
               frameon=False, bbox_to_anchor=(0.83, 0.27))
    fig.subplots_adjust(wspace=0.45, hspace=0.15, left=0.04, right=0.93, top=0.93,
                        bottom=0.05)
    style.scale_note(fig, scale, scale_text(cfg))
    return fig


def _legend_handles():
    from matplotlib.lines import Line2D

    return [
        Line2D([], [], marker="*", color="gold", markeredgecolor="black", markersize=11,
               linestyle="none", label=r"Nash $(1, \nu, 1)/(\nu + 2)$"),
        Line2D([], [], marker="o", color="0.3", markersize=4, linestyle="none",
               label="initial policy"),
        Line2D([], [], color="0.3", linewidth=1.2, label=r"(a, b) policy $\pi(t)$"),
        Line2D([], [], color="0.3", linewidth=0.6, alpha=0.4,
               label=r"(c, d) $\pi(t)$, t <= flow time; thick: time average"),
        Line2D([], [], marker="o", color="0.6", markeredgecolor="black", markersize=6,
               linestyle="none", label="(c, d) time average at the final time"),
    ]


# --- claims -----------------------------------------------------------------


def kl_to_nash(x: np.ndarray, pi: np.ndarray) -> np.ndarray:
    """``KL(x || pi)``, the constant of motion of RD around an interior Nash ``x``, ``[..., 3]``."""
    return np.sum(x * (np.log(x) - np.log(pi)), axis=-1)


def turns_around(x: np.ndarray, pi: np.ndarray) -> float:
    """Signed number of turns ``pi(t)`` makes around ``x`` (angle in the simplex plane / 2 pi)."""
    d = pi - x
    # Orthonormal coordinates of the plane sum(pi) = 1.
    u = d @ np.array([1.0, -1.0, 0.0]) / np.sqrt(2.0)
    v = d @ np.array([1.0, 1.0, -2.0]) / np.sqrt(6.0)
    angle = np.unwrap(np.arctan2(v, u))
    return float((angle[-1] - angle[0]) / (2.0 * np.pi))


def _paths(flows: pd.DataFrame, panel: str, series: str):
    rows = flows[(flows.panel == panel) & (flows.series == series)]
    for start, path in rows.groupby("start"):
        yield start, path.time.to_numpy(), path[list(CORNERS)].to_numpy()


def _cycle_claim(flows, nash) -> list[Claim]:
    nu = float(flows[flows.panel == "a"].nu.iloc[0])
    x = nash_point(nash, nu)
    drift, turns = [], {"a": [], "b": []}
    spg_change = []
    for panel in "ab":
        for _, _, pi in _paths(flows, panel, "policy"):
            kl = kl_to_nash(x, pi)
            turns[panel].append(turns_around(x, pi))
            if panel == "a":
                drift.append(np.max(np.abs(kl - kl[0])) / kl[0])
            else:
                spg_change.append(kl[-1] / kl[0] - 1.0)
    t_end = flows[flows.panel == "a"].time.max()
    return [
        Claim(FIGURE, "RD trajectories in RPS cycle around the Nash (closed orbits)",
              "'The game is intransitive, thus resulting in trajectories that cycle around "
              "the Nash equilibrium' (Fig 3a)",
              f"nu={nu:g}, t<={t_end:g}: RD turns around Nash "
              f"{', '.join(fmt(t, 3) for t in turns['a'])}; max relative drift of KL(x*||pi) "
              f"{fmt(max(drift), 2)}", f"every orbit turns >= 1 and KL drift <= {RD_DRIFT_TOL}",
              (Check("largest relative drift of KL(x*||pi) on an RD orbit", max(drift), "<=",
                     RD_DRIFT_TOL),
               Check("fewest turns of an RD orbit around the Nash",
                     min(abs(t) for t in turns["a"]), ">=", 1.0))),
        Claim(FIGURE, "SPG trajectories in RPS also circle the Nash",
              "Fig 3b shows the SPG flow in RPS beside RD's",
              f"SPG turns {', '.join(fmt(t, 3) for t in turns['b'])}; KL(x*||pi) changes by "
              f"{', '.join(f'{100 * c:+.1f}%' for c in spg_change)} over t<={t_end:g} "
              "(RD's constant of motion is not SPG's)",
              "every SPG trajectory turns >= 1 around the Nash",
              (Check("fewest turns of an SPG trajectory around the Nash",
                     min(abs(t) for t in turns["b"]), ">=", 1.0),)),
    ]


def _end_distances(flows, panel, x):
    """Distance of each start's time average to ``x`` at T and at T/10."""
    final, earlier, end_points = [], [], []
    for _, times, avg in _paths(flows, panel, "time_average"):
        dist = np.linalg.norm(avg - x, axis=1)
        final.append(dist[-1])
        earlier.append(np.interp(times[-1] / 10.0, times, dist))
        end_points.append(avg[-1])
    return np.array(final), np.array(earlier), np.array(end_points), times[-1]


def _average_claims(flows, nash) -> list[Claim]:
    nu = float(flows[flows.panel == "c"].nu.iloc[0])
    x = nash_point(nash, nu)
    rows = nash[np.isclose(nash.nu, nu)]
    interior = bool(rows.unique.iloc[0]) and bool(np.all(rows.closed_form > 0))
    rd, rd_before, _, t_end = _end_distances(flows, "c", x)
    spg, spg_before, spg_points, _ = _end_distances(flows, "d", x)
    return [
        Claim(FIGURE, "RD time averages converge to the interior Nash (biased RPS)",
              "'The time-averaged trajectories of RD converge to interior Nash equilibria in "
              "zero-sum games' (Fig 3c)",
              f"nu={nu:g}, Nash {np.round(x, 4).tolist()} (unique, interior: {interior}); "
              f"||pibar(T)-x*|| at T={t_end:g}: {', '.join(fmt(d) for d in rd)}; at T/10: "
              f"{', '.join(fmt(d) for d in rd_before)}",
              f"unique interior Nash; every distance <= {RD_AVERAGE_TOL} at T and <= "
              f"{SHRINK} x its value at T/10",
              (Check("unique interior Nash (1: yes, 0: no)", float(interior), "==", 1),
               Check("largest distance of an RD time average to the Nash at T", rd.max(), "<=",
                     RD_AVERAGE_TOL),
               Check("largest ratio of an RD distance at T to its value at T/10",
                     float(np.max(rd / rd_before)), "<=", SHRINK))),
        Claim(FIGURE, "SPG time averages do not converge to the Nash (biased RPS)",
              "'even in this simple game, SPG does not converge to Nash in the time-average' "
              "(Fig 3d)",
              f"||pibar(T)-x*|| at T={t_end:g}: {', '.join(fmt(d) for d in spg)} (at T/10: "
              f"{', '.join(fmt(d) for d in spg_before)}); mean end point "
              f"{np.round(spg_points.mean(axis=0), 3).tolist()}",
              f"every SPG distance >= {SEPARATION:g} x RD's largest ({fmt(rd.max())}) and above "
              f"{SHRINK} x its value at T/10",
              (Check(f"smallest SPG distance at T (threshold: {SEPARATION:g} x RD's largest)",
                     spg.min(), ">=", SEPARATION * rd.max()),
               Check("smallest ratio of an SPG distance at T to its value at T/10",
                     float(np.min(spg / spg_before)), ">", SHRINK))),
    ]


def _ratio_claim(speed: pd.DataFrame) -> Claim:
    data = speed.dropna(subset=["ratio"])
    top = data[["rock", "paper", "scissors"]].max(axis=1)
    near_vertex = data.ratio[top >= VERTEX]
    centre = data.ratio[top <= CENTRE]
    return Claim(
        FIGURE, "the RD/PG speed ratio grows near the simplex vertices",
        "'The differences in updates are compounded near the simplex vertices, where a single "
        "action retains a majority of policy mass' (Fig 3e)",
        f"nu={float(speed.nu.iloc[0]):g}: median ratio {fmt(near_vertex.median())} where max "
        f"pi >= {VERTEX} ({len(near_vertex)} points) vs {fmt(centre.median())} where max pi <= "
        f"{CENTRE} ({len(centre)} points); ratio over the simplex {fmt(data.ratio.min())} .. "
        f"{fmt(data.ratio.max())} (PG never faster: {bool(data.ratio.min() > 1)})",
        "median near the vertices >= 2 x median in the centre",
        (Check("median ratio near the vertices (threshold: 2 x the centre's)",
               float(near_vertex.median()), ">=", 2.0 * float(centre.median())),),
    )


def claims(tables: Mapping[str, pd.DataFrame]) -> list[Claim]:
    flows, nash = tables["flows"], tables["nash"]
    return [*_cycle_claim(flows, nash), *_average_claims(flows, nash),
            _ratio_claim(tables["speed"])]


def make(tables: Mapping[str, pd.DataFrame], cfg: Mapping, name: str = FIGURE,
         scale: str | None = None):
    """Figure and claims from the tables named in :data:`INPUTS` (``name``: this figure's;
    ``scale``: the config's, said on the figure)."""
    return plot(tables, cfg, scale), claims(tables)
