"""Shared figure style and saving.

matplotlib and seaborn are imported when a figure is drawn, not when a
figure module is imported (the workflow reads every module's ``INPUTS``
while it parses).
"""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np

from neurd import names
from neurd.neural import algorithms
from neurd.stats import MIN_CI_SAMPLES
from neurd.tables import atomic_path

# One colour per algorithm across every figure; labels from the vocabulary.
PALETTE = {
    names.HEDGE: "#1f77b4",
    names.NEURD: "#1f77b4",
    names.SPG: "#d62728",
    names.CFR_RM: "#7f7f7f",
    names.CFR_PLUS: "#2ca02c",
}
LABELS = names.ALGORITHM_LABELS
# The neural algorithms' colours beyond NeuRD's and SPG's (neurd.neural.algorithms): the
# other built-ins' fixed, a user's one of USER_COLOURS by its name, the same in every figure
BUILT_IN_COLOURS = {"rmpg": "#2ca02c", "rpg": "#9467bd", "a2c": "#8c564b"}
USER_COLOURS = ("#ff7f0e", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#393b79")
ACTION_PALETTE = {"H": "#1f77b4", "T": "#ff7f0e", "F": "#7f7f7f"}
# Phase boundaries: a mark of the axes, not data (a legend may sit over one if it must).
PHASE_LINE = {"color": "red", "linestyle": "--", "linewidth": 1.0, "gid": "phase-line"}
# Fig 6's negations of the payoff: a neutral mark behind the curves (below their zorder 2),
# in neither learner's colour, named in the legend by NEGATION_LABEL.
NEGATION_LINE = {"color": "0.55", "linestyle": ":", "linewidth": 1.3, "zorder": 1.5,
                 "gid": "phase-line"}
NEGATION_LABEL = "payoff negated"
# The gid of the text that says a figure's scale (tests find it by this).
SCALE_GID = "scale-note"


def algorithm_order(present) -> list[str]:
    """The neural algorithms of ``present`` in the order every figure draws them: NeuRD and
    SPG (the paper's pair), the other built-ins in the registry's order, then a user's by
    name."""
    found = set(present)
    built_in = [a for a in algorithms.BUILT_IN if a in found]
    return built_in + sorted(found - set(built_in))


def algorithm_colour(name: str) -> str:
    """An algorithm's colour, the same in every figure and run (:data:`PALETTE` for the
    paper's, :data:`BUILT_IN_COLOURS` for the other built-ins, else one of
    :data:`USER_COLOURS` by its name's CRC-32)."""
    if name in PALETTE:
        return PALETTE[name]
    if name in BUILT_IN_COLOURS:
        return BUILT_IN_COLOURS[name]
    return USER_COLOURS[zlib.crc32(name.encode()) % len(USER_COLOURS)]


def algorithm_label(name: str) -> str:
    """An algorithm's label as the registry holds it (``register(..., label=...)``); a name
    this process has not registered (a user's, drawn where its code is not imported) is
    shown upper-cased, as the registry's default label."""
    try:
        return algorithms.get(name).label
    except ValueError:
        return LABELS.get(name, name.upper())


def setup() -> None:
    import matplotlib

    matplotlib.use("Agg")  # no screen needed: figures are files
    import matplotlib.pyplot as plt
    import seaborn as sns

    # From matplotlib's own defaults, not from whatever an earlier figure, a caller or a
    # matplotlibrc left in this process: a figure depends on its tables and config only.
    matplotlib.rcdefaults()
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)
    plt.rcParams.update({"figure.dpi": 150, "savefig.bbox": "tight", "pdf.fonttype": 42})


def label_log_axis(axis) -> None:
    """Label a log axis at 1, 2 and 5 times each power of ten, so values can be read off."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    axis.set_minor_formatter(NullFormatter())


def size(n: float) -> str:
    """A count for a figure's text: ``10^k`` for a power of ten from 10^4 on, else plain."""
    n = float(n)
    if n >= 10_000 and n == int(n):
        k = len(str(int(n))) - 1
        if int(n) == 10**k:
            return f"10^{k}"
    return f"{n:g}" if n != int(n) else str(int(n))


def versus(value: float, paper: float, unit: str, shown: str | None = None) -> str:
    """A size against the paper's: "100 starts (the paper's)" or "20 of the paper's 100
    starts"; ``shown``: how to write the paper's number (e.g. "0.33e6")."""
    paper_text = shown or size(paper)
    if float(value) == float(paper):
        return f"{size(value)} {unit} (the paper's)"
    return f"{size(value)} of the paper's {paper_text} {unit}"


def band_text(n: int, what: str, bootstrap) -> str:
    """How a figure's band is drawn from ``n`` samples (``what``: "seeds", "starts"): its
    bootstrap confidence interval, or, below :data:`MIN_CI_SAMPLES`, that there is none."""
    if n >= MIN_CI_SAMPLES:
        return (f"{int(round(100 * float(bootstrap['confidence'])))}% bootstrap CI "
                f"({bootstrap['resamples']} resamples, {bootstrap['method']})")
    return f"no CI: {n} {what} are too few (< {MIN_CI_SAMPLES})"


def note(fig, text: str) -> None:
    """A line of text below a figure's axes (what it was made from)."""
    fig.text(0.01, 0.0, text, ha="left", va="top", fontsize=8, color="0.25", wrap=True,
             gid=SCALE_GID)


def scale_note(fig, scale: str | None, text: str) -> None:
    """Say on the figure what it was made from: ``"<scale> scale: <text>"`` below the axes.

    ``scale``: the config's scale (``None``: not known, e.g. a figure drawn by hand)."""
    note(fig, f"{scale + ' scale' if scale else 'scale not given'}: {text}")


# --- legends inside the axes, off the data -----------------------------------------------

LOCATIONS = ("upper right", "upper left", "lower left", "lower right", "center right",
             "center left", "upper center", "lower center", "center")


def obstacles(ax, marks: bool = True) -> list:
    """What a legend in ``ax`` must not cover, in display coordinates: every line (but
    the phase lines when ``marks`` is false), band, box, marker and text of the axes."""
    from matplotlib.collections import PathCollection
    from matplotlib.path import Path

    renderer = ax.figure.canvas.get_renderer()
    found = []
    for line in ax.lines:
        if not line.get_visible() or (not marks and line.get_gid() == "phase-line"):
            continue
        path = line.get_transform().transform_path(line.get_path())
        found.append(("line", path))
        if line.get_marker() not in (None, "None", "", " "):
            found.append(("points", path.vertices))
    for collection in ax.collections:
        if not collection.get_visible():
            continue
        if isinstance(collection, PathCollection):  # scatter: a marker at every offset
            found.append(("points", collection.get_offset_transform().transform(
                collection.get_offsets())))
            continue
        transform = collection.get_transform()
        for path in collection.get_paths():
            found.append(("area", transform.transform_path(path)))
    for patch in ax.patches:
        if patch.get_visible():
            found.append(("area", patch.get_transform().transform_path(patch.get_path())))
    for text in ax.texts:
        if text.get_visible() and text.get_text():
            box = text.get_window_extent(renderer)
            found.append(("area", Path.unit_rectangle().transformed(_box_transform(box))))
    return found


def _box_transform(box):
    from matplotlib.transforms import Affine2D

    return Affine2D().scale(box.width, box.height).translate(box.x0, box.y0)


def covers(box, found) -> int:
    """How many of ``found`` (:func:`obstacles`) the display box ``box`` touches."""

    count = 0
    for kind, item in found:
        if kind == "points":
            points = np.asarray(item)
            inside = ((points[:, 0] >= box.x0) & (points[:, 0] <= box.x1)
                      & (points[:, 1] >= box.y0) & (points[:, 1] <= box.y1))
            count += bool(inside.any())
        else:
            count += bool(item.intersects_bbox(box, filled=kind == "area"))
    return count


def _legend_box(legend, pad: float = 3.0):
    box = legend.get_window_extent(legend.figure.canvas.get_renderer())
    return box.expanded((box.width + 2 * pad) / box.width, (box.height + 2 * pad) / box.height)


def place_legend(ax, headroom: int = 4, **kwargs):
    """A legend inside ``ax`` that covers no data: the first of :data:`LOCATIONS` whose box
    touches no line, band, marker or text of the axes (phase lines allowed if it must);
    if none is free, the y axis gains headroom at the top, ``headroom`` steps at most, to at
    most twice its first top on a log axis (``2 ** (k / headroom)`` times it at step ``k``)
    and to at most twice its first span on a linear one, so that its data stays within a
    factor of two of its limits (tested for every figure), and the locations are tried again;
    the last resort is the location that covers least.  Call it once the figure's layout is
    final (after ``tight_layout``): a legend's size is in points, the axes' in inches."""
    kwargs.pop("loc", None)
    best = None
    bottom, top = ax.get_ylim()
    log = ax.get_yscale() == "log"
    for attempt in range(headroom + 1):
        for marks in (True, False):
            found = obstacles(ax, marks)
            for loc in LOCATIONS:
                legend = ax.legend(loc=loc, **kwargs)
                touched = covers(_legend_box(legend), found)
                if touched == 0:
                    return legend
                if best is None or touched < best[0]:
                    best = (touched, loc, ax.get_ylim())
        if attempt < headroom:
            step = (attempt + 1) / headroom
            ax.set_ylim(bottom, top * 2.0 ** step if log else top + step * (top - bottom))
    ax.set_ylim(best[2])
    return ax.legend(loc=best[1], **kwargs)


# No creation dates in the files: the same tables give byte-identical figures.
METADATA = {".png": {"Software": None}, ".pdf": {"CreationDate": None, "Producer": None}}


def save(fig, png: str | os.PathLike, pdf: str | os.PathLike) -> None:
    """Write the figure as PNG and PDF, each atomically, without dates in them."""
    import matplotlib.pyplot as plt

    for path in (png, pdf):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, metadata=METADATA[Path(path).suffix])
    plt.close(fig)
