"""Shared figure style and saving.

matplotlib and seaborn are imported when a figure is drawn, not when a
figure module is imported (the workflow reads every module's ``INPUTS``
while it parses).
"""

from __future__ import annotations

import os
from pathlib import Path

from neurd import names
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
ACTION_PALETTE = {"H": "#1f77b4", "T": "#ff7f0e", "F": "#7f7f7f"}
PHASE_LINE = {"color": "red", "linestyle": "--", "linewidth": 1.0}


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


# No creation dates in the files: the same tables give byte-identical figures.
METADATA = {".png": {"Software": None}, ".pdf": {"CreationDate": None, "Producer": None}}


def save(fig, png: str | os.PathLike, pdf: str | os.PathLike) -> None:
    """Write the figure as PNG and PDF, each atomically, without dates in them."""
    import matplotlib.pyplot as plt

    for path in (png, pdf):
        with atomic_path(path) as tmp:
            fig.savefig(tmp, metadata=METADATA[Path(path).suffix])
    plt.close(fig)
