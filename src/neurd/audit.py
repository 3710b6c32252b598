"""The claims audit: what the paper says, what we measured, and the verdict.

Each figure writes ``results/audit/<figure>.csv`` with the columns of
:data:`COLUMNS`; :func:`gather` turns all of them into ``claims.md``.  A claim
that fails is recorded, never raised: the pipeline goes on and the report
shows it.

Verdicts: ``pass`` (the measurement meets the criterion), ``fail`` (it does
not), ``differs`` (a number the paper states is not what its stated setting
gives; the ``measured`` text carries the evidence of which reading does),
``tie`` (a claim that one learner is below the other, where the bootstrap
confidence interval of their paired per-seed difference covers 0: the runs
cannot tell them apart; :func:`paired_verdict`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from html import escape
from pathlib import Path

import pandas as pd

from neurd.tables import atomic_path, write_text

COLUMNS = ("figure", "claim", "paper_says", "measured", "criterion", "verdict")
VERDICTS = ("pass", "fail", "differs", "tie")


@dataclass(frozen=True)
class Claim:
    """One claim; ``value``: its headline number (e.g. the mean paired difference NeuRD - SPG)
    and ``reading``: the reading it is measured under, where the figure measures it under
    several; both for the readings study's grid (not columns of the audit files, whose
    ``claim`` and ``measured`` texts carry them)."""

    figure: str
    claim: str
    paper_says: str
    measured: str
    criterion: str
    verdict: str
    value: float = math.nan
    reading: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


def verdict(ok: bool, otherwise: str = "fail") -> str:
    """``"pass"`` when ``ok`` else ``otherwise`` (``"fail"`` or ``"differs"``)."""
    return "pass" if ok else otherwise


def paired_verdict(low: float, high: float) -> str:
    """A "first below second" claim from the CI ``[low, high]`` of the mean paired difference
    first - second: ``pass`` if it lies below 0, ``fail`` above, ``tie`` if it covers 0."""
    return "pass" if high < 0 else "fail" if low > 0 else "tie"


def fmt(x: float, digits: int = 3) -> str:
    """A number for the audit table: ``digits`` significant digits."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    return f"{x:.{digits}g}"


def write_audit(claims: Sequence[Claim], path: str | os.PathLike) -> pd.DataFrame:
    frame = pd.DataFrame([asdict(c) for c in claims], columns=list(COLUMNS))
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
    return frame


def read_audits(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    frames = [pd.read_csv(p, dtype=str, keep_default_na=False) for p in paths]
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    if list(frame.columns) != list(COLUMNS):
        raise ValueError(f"audit tables must have columns {COLUMNS}, got {list(frame.columns)}")
    return frame


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


HTML_STYLE = """
body { font-family: sans-serif; margin: 1.5em; }
table { border-collapse: collapse; margin-bottom: 2em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.pass { background: #e6f4ea; }
td.fail { background: #fce8e6; }
td.differs { background: #fef7e0; }
td.tie { background: #e8eaed; }
"""


def write_html(frame: pd.DataFrame, out: str | os.PathLike) -> None:
    """The claims as an HTML page, a table per figure (what the report's viewer shows)."""
    counts = frame["verdict"].value_counts()
    parts = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'><title>Claims audit</title>",
             f"<style>{HTML_STYLE}</style></head><body>", "<h1>Claims audit</h1>",
             "<p>Every claim the paper makes about a figure, measured by the pipeline. Verdicts: "
             "pass, fail (measured, criterion not met), differs (a number the paper states that "
             "its stated setting does not give).</p>",
             "<p id='totals'>Totals: " + ", ".join(f"{v}: {int(counts.get(v, 0))}"
                                                 for v in VERDICTS) + "</p>"]
    for figure, rows in frame.groupby("figure", sort=False):
        parts += [f"<h2 id='{escape(figure)}'>{escape(figure)}</h2>",
                  "<table class='claims'><thead><tr>"
                  + "".join(f"<th>{escape(c.replace('_', ' '))}</th>" for c in COLUMNS[1:])
                  + "</tr></thead><tbody>"]
        for row in rows.itertuples(index=False):
            cells = "".join(f"<td>{escape(str(getattr(row, c)))}</td>" for c in COLUMNS[1:-1])
            parts.append(f"<tr>{cells}<td class='{escape(row.verdict)}'>"
                         f"{escape(row.verdict)}</td></tr>")
        parts.append("</tbody></table>")
    parts.append("</body></html>")
    write_text(out, "\n".join(parts) + "\n")


def gather(paths: Iterable[str | os.PathLike], out: str | os.PathLike,
           html: str | os.PathLike | None = None) -> pd.DataFrame:
    """Write every figure's claims into one Markdown file (and HTML page), a table per figure."""
    frame = read_audits(sorted(paths, key=lambda p: Path(p).stem))
    counts = frame["verdict"].value_counts()
    lines = [
        "# Claims audit",
        "",
        "Every claim the paper makes about a figure, measured by the pipeline.",
        "Verdicts: pass, fail (measured, criterion not met), differs (a number the",
        "paper states that its stated setting does not give; the evidence says why).",
        "",
        "Totals: " + ", ".join(f"{v}: {int(counts.get(v, 0))}" for v in VERDICTS),
        "",
    ]
    for figure, rows in frame.groupby("figure", sort=False):
        lines += [f"## {figure}", "", "| claim | paper says | measured | criterion | verdict |",
                  "| --- | --- | --- | --- | --- |"]
        for row in rows.itertuples(index=False):
            lines.append(
                "| " + " | ".join(_cell(getattr(row, c)) for c in COLUMNS[1:]) + " |"
            )
        lines.append("")
    write_text(out, "\n".join(lines))
    if html is not None:
        write_html(frame, html)
    return frame
