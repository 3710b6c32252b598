"""Shared figure style and saving."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg")  # no screen needed: figures are files

import matplotlib.pyplot as plt  # noqa: E402
import seaborn as sns  # noqa: E402

from neurd.tables import atomic_path  # noqa: E402

# One colour per learner across every figure.
PALETTE = {
    "hedge": "#1f77b4",
    "neurd": "#1f77b4",
    "spg": "#d62728",
    "cfr_rm": "#7f7f7f",
    "cfr_plus": "#2ca02c",
}
LABELS = {
    "hedge": "Hedge (= NeuRD)",
    "neurd": "NeuRD",
    "spg": "SPG",
    "cfr_rm": "CFR (regret matching)",
    "cfr_plus": "CFR+",
}
ACTION_PALETTE = {"H": "#1f77b4", "T": "#ff7f0e", "F": "#7f7f7f"}
PHASE_LINE = {"color": "red", "linestyle": "--", "linewidth": 1.0}


def setup() -> None:
    sns.set_theme(context="paper", style="whitegrid", font_scale=1.1)
    plt.rcParams.update({"figure.dpi": 150, "savefig.bbox": "tight", "pdf.fonttype": 42})


def save(fig, png: str | os.PathLike, pdf: str | os.PathLike) -> None:
    """Write the figure as PNG and PDF, each atomically."""
    for path in (png, pdf):
        with atomic_path(path) as tmp:
            fig.savefig(tmp)
    plt.close(fig)
