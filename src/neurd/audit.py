"""The claims audit: what the paper says, what we measured, and the verdict.

Each figure writes ``results/audit/<figure>.csv`` with the columns of
:data:`COLUMNS`; :func:`gather` turns all of them into ``claims.md``.  A claim
that fails is recorded, never raised: the pipeline goes on and the report
shows it.

A verdict is data, not prose: every claim carries the checks it is judged by
(:class:`Check`: a statistic, the number observed, a comparison and a
threshold), and its verdict follows from them alone (:func:`judge`), so a row
of the audit can be re-derived from its own columns and a changed criterion
cannot keep an old verdict.  Each check comes out ``pass``, ``fail``, ``tie``
or ``unmeasured`` (:func:`outcome`); the claim's verdict is, in this order:

- the claim's ``otherwise`` verdict (``fail``, or ``differs`` for a number the
  paper states) if any check fails;
- ``unmeasured`` if any check has nothing to measure (its observed number or
  its threshold is NaN: e.g. neither learner reaches the level within a phase,
  so there is no time to compare; too few pairs for a confidence interval; an
  entropy grid with no level inside it);
- ``tie`` if any check is a tie (an interval that covers its threshold: the
  runs cannot tell the learners apart);
- ``pass`` otherwise: every check holds.

The vocabulary is :data:`VERDICTS`; ``docs/audit.md`` says what each means.
"""

from __future__ import annotations

import math
import operator
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd

from neurd.stats import MIN_CI_SAMPLES, paired_difference_ci
from neurd.tables import atomic_path, write_text

COLUMNS = ("figure", "claim", "paper_says", "measured", "criterion", "statistic", "observed",
           "comparison", "threshold", "otherwise", "verdict")
VERDICTS = ("pass", "fail", "differs", "tie", "unmeasured")
# What each verdict means, for the headers of claims.md and the HTML page.
MEANINGS = {
    "pass": "every check of the claim holds",
    "fail": "a check does not hold: measured, and the claim is not met",
    "differs": "a number the paper states is not what its stated setting gives (the measured "
               "text carries the evidence of which reading does)",
    "tie": "no check fails, and an interval (e.g. the bootstrap CI of a paired difference "
           "NeuRD - SPG, or equal medians) covers its threshold: the runs cannot tell the "
           "learners apart",
    "unmeasured": "no check fails, and one has nothing to measure (its number is NaN: e.g. "
                  "neither learner reaches the level within a phase, fewer than 5 pairs give "
                  "no confidence interval, an entropy grid of 2 levels has no inside): the "
                  "run's size does not suit the check; the row says why; not a fail",
}
OTHERWISE = ("fail", "differs")  # what a claim is when one of its checks fails

# Scalar comparisons, and TIE_BELOW: three-way, an interval [low, high] (a number is the
# interval [x, x]) against a threshold t: pass if high < t, fail if low > t, tie otherwise.
SCALAR = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
          "==": operator.eq}
IN = "in"  # threshold [a, b]: pass if a <= observed <= b
TIE_BELOW = "< (tie: covers)"
COMPARISONS = (*SCALAR, IN, TIE_BELOW)
SEPARATOR = " ; "  # between the checks of a claim, in each of the four check columns


@dataclass(frozen=True)
class Check:
    """One comparison a verdict rests on: ``observed comparison threshold``.

    ``observed``: a number, or an interval ``(low, high)`` for :data:`TIE_BELOW`;
    ``threshold``: a number, or an interval ``(a, b)`` for :data:`IN`.  NaN anywhere:
    nothing to measure (``unmeasured``); infinities compare as numbers (a level never
    reached is ``inf`` iterations away).
    """

    statistic: str
    observed: float | tuple[float, float]
    comparison: str
    threshold: float | tuple[float, float]

    def __post_init__(self):
        if self.comparison not in COMPARISONS:
            raise ValueError(f"comparison must be one of {COMPARISONS}, got "
                             f"{self.comparison!r}")
        if ";" in self.statistic or not self.statistic:
            raise ValueError(f"a statistic's name is non-empty without ';': {self.statistic!r}")
        pair = (self.comparison == TIE_BELOW, self.comparison == IN)
        for name, value, interval in (("observed", self.observed, pair[0]),
                                      ("threshold", self.threshold, pair[1])):
            if isinstance(value, tuple) and not (interval and len(value) == 2):
                raise ValueError(f"{self.statistic}: {name} {value!r} is an interval only "
                                 f"for {TIE_BELOW!r} (observed) and {IN!r} (threshold)")
            if interval and name == "threshold" and not isinstance(value, tuple):
                raise ValueError(f"{self.statistic}: comparison {IN!r} takes an interval")
        object.__setattr__(self, "observed", _numbers(self.observed))
        object.__setattr__(self, "threshold", _numbers(self.threshold))

    @property
    def outcome(self) -> str:
        return outcome(self.observed, self.comparison, self.threshold)


def _numbers(value):
    return tuple(float(v) for v in value) if isinstance(value, tuple) else float(value)


def outcome(observed, comparison: str, threshold) -> str:
    """``pass``, ``fail``, ``tie`` or ``unmeasured`` of one check (see the module's doc)."""
    numbers = [*(observed if isinstance(observed, tuple) else (observed,)),
               *(threshold if isinstance(threshold, tuple) else (threshold,))]
    if any(math.isnan(x) for x in numbers):
        return "unmeasured"
    if comparison == TIE_BELOW:
        low, high = observed if isinstance(observed, tuple) else (observed, observed)
        return "pass" if high < threshold else "fail" if low > threshold else "tie"
    if comparison == IN:
        return "pass" if threshold[0] <= observed <= threshold[1] else "fail"
    return "pass" if SCALAR[comparison](observed, threshold) else "fail"


def judge(outcomes: Iterable[str], otherwise: str = "fail") -> str:
    """A claim's verdict from its checks' outcomes (see the module's doc for the order)."""
    found = set(outcomes)
    if not found:
        raise ValueError("a claim is judged by at least one check")
    if "fail" in found:
        return otherwise
    for verdict in ("unmeasured", "tie"):
        if verdict in found:
            return verdict
    return "pass"


@dataclass(frozen=True)
class Claim:
    """One claim, judged by its ``checks`` (the verdict is derived, never given).

    ``otherwise``: the verdict when a check fails (``fail``, or ``differs`` for a number
    the paper states).  ``value``: its headline number (e.g. the mean paired difference
    NeuRD - SPG) and ``reading``: the reading it is measured under, where the figure
    measures it under several; ``key``: the claim's stable name, the same under every
    reading (e.g. ``hedge_bound``), and ``alternative``: whether the reading is another
    than the config's; all for the readings study's grid (not columns of the audit files,
    whose ``claim`` and ``measured`` texts carry them)."""

    figure: str
    claim: str
    paper_says: str
    measured: str
    criterion: str
    checks: tuple[Check, ...]
    otherwise: str = "fail"
    value: float = math.nan
    reading: str = ""
    key: str = ""
    alternative: bool = False
    verdict: str = field(init=False)

    def __post_init__(self):
        if self.otherwise not in OTHERWISE:
            raise ValueError(f"otherwise must be one of {OTHERWISE}, got {self.otherwise!r}")
        object.__setattr__(self, "checks", tuple(self.checks))
        object.__setattr__(self, "verdict",
                           judge((c.outcome for c in self.checks), self.otherwise))


def paired_verdict(low: float, high: float) -> str:
    """The outcome of "first below second" from the CI ``[low, high]`` of the mean paired
    difference first - second (:func:`paired_check`)."""
    return outcome((float(low), float(high)), TIE_BELOW, 0.0)


def paired_check(statistic: str, low: float, high: float) -> Check:
    """"first below second" from the CI ``[low, high]`` of the mean paired difference
    first - second: ``pass`` if it lies below 0, ``fail`` above, ``tie`` if it covers 0."""
    return Check(statistic, (low, high), TIE_BELOW, 0.0)


def paired(neurd: pd.Series, spg: pd.Series, cfg: Mapping, statistic: str, unit: str
           ) -> tuple[str, Check, float]:
    """``(measured text, check, mean difference)`` of "NeuRD below SPG" from values paired
    by index (seeds, or (entropy, seed): the ``unit`` the text counts in): the bootstrap CI
    of the mean paired difference NeuRD - SPG (shared seeds start from the same weights), a
    tie where it covers 0.  A pair with a side without a value (NaN: its run diverged) is
    left out, and the text says how many were.  Fewer than ``MIN_CI_SAMPLES`` pairs
    give no confidence interval (the percentile bootstrap covers far less than its nominal
    level): the check has nothing to judge by (NaN: ``unmeasured``), and the text says
    why."""

    both = neurd.index.intersection(spg.index)
    a, b = neurd.loc[both].to_numpy(), spg.loc[both].to_numpy()
    kept = ~(np.isnan(a) | np.isnan(b))
    a, b = a[kept], b[kept]
    lower = f"NeuRD lower in {int(np.sum(a < b))} of {len(a)} {unit}" + (
        f"; left out: {len(both) - len(a)} of the {len(both)} {unit}, where a run diverged"
        if len(a) < len(both) else "")
    if len(a) < MIN_CI_SAMPLES:  # no confidence interval: nothing to judge by
        mean = float(np.mean(a - b)) if len(a) else math.nan
        text = (f"paired difference NeuRD - SPG {fmt(mean)}; unmeasured: {len(a)} pairs are "
                f"too few for a confidence interval (< {MIN_CI_SAMPLES}); {lower}")
        return text, paired_check(statistic, math.nan, math.nan), mean
    boot = cfg["bootstrap"]
    mean, low, high = paired_difference_ci(
        a, b, resamples=int(boot["resamples"]), confidence=float(boot["confidence"]),
        method=boot["method"], seed=int(cfg["seed"]))
    text = (f"paired difference NeuRD - SPG {fmt(mean)}, "
            f"{fmt(100 * float(boot['confidence']))}% CI [{fmt(low)}, {fmt(high)}]; {lower}")
    return text, paired_check(statistic, low, high), mean


PAIRED_CRITERION = ("the bootstrap confidence interval of the mean paired difference NeuRD - "
                    "SPG lies below 0 (tie: it covers 0; fewer than "
                    f"{MIN_CI_SAMPLES} pairs give no interval: unmeasured)")


def fmt(x: float, digits: int = 3) -> str:
    """A number for the audit table: ``digits`` significant digits."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "nan"
    return f"{x:.{digits}g}"


# --- the check columns as text ------------------------------------------------------------


def number_text(x: float) -> str:
    """A number exactly, as the audit files store it: an integer without a point, else
    Python's shortest round-trip form (``inf``, ``nan`` included)."""
    x = float(x)
    if math.isfinite(x) and x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return repr(x)


def value_text(value, show=number_text) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return show(value)


def parse_value(text: str):
    """A number, or an interval ``[a, b]``, from :func:`value_text`."""
    text = text.strip()
    if text.startswith("[") and text.endswith("]"):
        parts = [float(p) for p in text[1:-1].split(",")]
        if len(parts) != 2:
            raise ValueError(f"an interval has two numbers, got {text!r}")
        return tuple(parts)
    return float(text)


def check_columns(claim: Claim) -> dict[str, str]:
    """The four check columns of a claim's row (its checks joined by :data:`SEPARATOR`)."""
    checks = claim.checks
    return {"statistic": SEPARATOR.join(c.statistic for c in checks),
            "observed": SEPARATOR.join(value_text(c.observed) for c in checks),
            "comparison": SEPARATOR.join(c.comparison for c in checks),
            "threshold": SEPARATOR.join(value_text(c.threshold) for c in checks)}


def row_checks(row) -> list[Check]:
    """The checks of an audit row (a mapping or a named tuple with the check columns)."""
    get = row.get if hasattr(row, "get") else lambda key: getattr(row, key)
    columns = [str(get(c)).split(SEPARATOR) for c in
               ("statistic", "observed", "comparison", "threshold")]
    if len({len(c) for c in columns}) != 1:
        raise ValueError(f"claim {get('claim')!r}: the check columns list different numbers "
                         "of checks")
    return [Check(s, parse_value(o), c, parse_value(t)) for s, o, c, t in zip(*columns)]


def rederive(row) -> str:
    """The verdict an audit row's check columns and ``otherwise`` give."""
    get = row.get if hasattr(row, "get") else lambda key: getattr(row, key)
    return judge((c.outcome for c in row_checks(row)), str(get("otherwise")))


def _shown(check: Check) -> str:
    """A check for a reader: 6 significant digits, unless rounding would change its
    outcome (then the exact numbers of the audit file)."""
    def short(x):
        return f"{x:.6g}"

    rounded = Check(check.statistic, parse_value(value_text(check.observed, short)),
                    check.comparison, parse_value(value_text(check.threshold, short)))
    show = short if rounded.outcome == check.outcome else number_text
    return (f"{check.statistic}: {value_text(check.observed, show)} {check.comparison} "
            f"{value_text(check.threshold, show)} -> {check.outcome}")


def judged_by(row) -> str:
    """Every check of an audit row in words, with its outcome."""
    return "; ".join(_shown(c) for c in row_checks(row))


# --- files ---------------------------------------------------------------------------------


def write_audit(claims: Sequence[Claim], path: str | os.PathLike) -> pd.DataFrame:
    rows = [{"figure": c.figure, "claim": c.claim, "paper_says": c.paper_says,
             "measured": c.measured, "criterion": c.criterion, **check_columns(c),
             "otherwise": c.otherwise, "verdict": c.verdict} for c in claims]
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)
    return frame


def read_audits(paths: Iterable[str | os.PathLike]) -> pd.DataFrame:
    """Every audit file in one frame; a file whose columns are not :data:`COLUMNS`, or a row
    whose verdict does not follow from its checks, is refused, naming the file."""
    frames = []
    for path in paths:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        if list(frame.columns) != list(COLUMNS):
            raise ValueError(f"{path}: audit tables must have columns {COLUMNS}, got "
                             f"{list(frame.columns)} (remake it with its figure's rule)")
        for row in frame.to_dict("records"):
            derived = rederive(row)
            if derived != row["verdict"]:
                raise ValueError(f"{path}: claim {row['claim']!r} says {row['verdict']!r} but "
                                 f"its checks give {derived!r} (remake it with its figure's "
                                 "rule)")
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


# The columns a reader sees: the check columns folded into one ("judged by").
SHOWN = ("claim", "paper_says", "measured", "criterion", "judged_by", "verdict")
INTRO = ("Every claim the paper makes about a figure, measured by the pipeline. Each claim "
         "is judged by its checks (a statistic, the number observed, a comparison, a "
         "threshold; 'judged by' lists them with their outcomes), and its verdict follows "
         "from them alone: the claim's fail verdict (fail, or differs for a number the paper "
         "states) if a check fails, else unmeasured if a check has nothing to measure, else "
         "tie if a check is a tie, else pass. Comparison '< (tie: covers)': an interval "
         "[low, high] against t: pass if high < t, fail if low > t, tie if it covers t. "
         "docs/audit.md says how to re-derive a verdict from the audit files.")


def _totals(frame: pd.DataFrame) -> str:
    counts = frame["verdict"].value_counts()
    return "Totals: " + ", ".join(f"{v}: {int(counts.get(v, 0))}" for v in VERDICTS)


HTML_STYLE = """
body { font-family: sans-serif; margin: 1.5em; }
table { border-collapse: collapse; margin-bottom: 2em; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
td.pass { background: #e6f4ea; }
td.fail { background: #fce8e6; }
td.differs { background: #fef7e0; }
td.tie { background: #e8eaed; }
td.unmeasured { background: #e3f2fd; }
"""


def write_html(frame: pd.DataFrame, out: str | os.PathLike) -> None:
    """The claims as an HTML page, a table per figure (what the report's viewer shows)."""

    parts = ["<!DOCTYPE html>", "<html><head><meta charset='utf-8'><title>Claims audit</title>",
             f"<style>{HTML_STYLE}</style></head><body>", "<h1>Claims audit</h1>",
             f"<p>{escape(INTRO)}</p>", "<dl id='verdicts'>"]
    parts += [f"<dt class='{v}'>{v}</dt><dd>{escape(MEANINGS[v])}</dd>" for v in VERDICTS]
    parts += ["</dl>", f"<p id='totals'>{escape(_totals(frame))}</p>"]
    for figure, rows in frame.groupby("figure", sort=False):
        parts += [f"<h2 id='{escape(figure)}'>{escape(figure)}</h2>",
                  "<table class='claims'><thead><tr>"
                  + "".join(f"<th>{escape(c.replace('_', ' '))}</th>" for c in SHOWN)
                  + "</tr></thead><tbody>"]
        for row in rows.to_dict("records"):
            row["judged_by"] = judged_by(row)
            cells = "".join(f"<td>{escape(str(row[c]))}</td>" for c in SHOWN[:-1])
            parts.append(f"<tr>{cells}<td class='{escape(row['verdict'])}'>"
                         f"{escape(row['verdict'])}</td></tr>")
        parts.append("</tbody></table>")
    parts.append("</body></html>")
    write_text(out, "\n".join(parts) + "\n")


def gather(paths: Iterable[str | os.PathLike], out: str | os.PathLike,
           html: str | os.PathLike | None = None) -> pd.DataFrame:
    """Write every figure's claims into one Markdown file (and HTML page), a table per figure."""
    frame = read_audits(sorted(paths, key=lambda p: Path(p).stem))
    lines = ["# Claims audit", "", INTRO, "", "Verdicts:", ""]
    lines += [f"- **{v}**: {MEANINGS[v]}" for v in VERDICTS]
    lines += ["", _totals(frame), ""]
    for figure, rows in frame.groupby("figure", sort=False):
        lines += [f"## {figure}", "", "| " + " | ".join(c.replace("_", " ") for c in SHOWN)
                  + " |", "| " + " | ".join("---" for _ in SHOWN) + " |"]
        for row in rows.to_dict("records"):
            row["judged_by"] = judged_by(row)
            lines.append("| " + " | ".join(_cell(row[c]) for c in SHOWN) + " |")
        lines.append("")
    write_text(out, "\n".join(lines))
    if html is not None:
        write_html(frame, html)
    return frame
