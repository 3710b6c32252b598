"""Every verdict of a finished run follows from its own row.

:func:`rederive` re-derives a verdict from an audit file's columns alone, following
docs/audit.md and written apart from ``neurd.audit`` (it imports nothing of it), so that a
verdict the figure code decided by any other rule, or kept from an older criterion, is
caught.  It runs on the smoke run in ``test_workflow.py`` and here on the default-scale run
in ``results/audit/`` when there is one (``make figures``), as on any results folder named
by ``NEURD_AUDIT_DIR``.
"""

import math
import os
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK_COLUMNS = ("statistic", "observed", "comparison", "threshold")
SEPARATOR = " ; "


def _number(text: str):
    text = text.strip()
    if text.startswith("["):
        low, high = (float(x) for x in text.strip("[]").split(","))
        return low, high
    return float(text)


def _check(observed, comparison: str, threshold) -> str:
    """One check's outcome, as docs/audit.md defines it."""
    values = [*(observed if isinstance(observed, tuple) else (observed,)),
              *(threshold if isinstance(threshold, tuple) else (threshold,))]
    if any(math.isnan(v) for v in values):
        return "unmeasured"
    if comparison == "< (tie: covers)":
        low, high = observed if isinstance(observed, tuple) else (observed, observed)
        if high < threshold:
            return "pass"
        return "fail" if low > threshold else "tie"
    if comparison == "in":
        return "pass" if threshold[0] <= observed <= threshold[1] else "fail"
    holds = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b,
             ">=": lambda a, b: a >= b, "==": lambda a, b: a == b}
    assert comparison in holds, f"unknown comparison {comparison!r}"
    return "pass" if holds[comparison](observed, threshold) else "fail"


def rederive(row: dict) -> str:
    """The verdict of an audit row from its check columns and ``otherwise`` alone."""
    parts = [row[c].split(SEPARATOR) for c in CHECK_COLUMNS]
    assert len({len(p) for p in parts}) == 1, f"{row['claim']}: check columns disagree"
    outcomes = {_check(_number(o), c, _number(t)) for _, o, c, t in zip(*parts)}
    assert outcomes, row["claim"]
    if "fail" in outcomes:
        assert row["otherwise"] in ("fail", "differs"), row["otherwise"]
        return row["otherwise"]
    for verdict in ("unmeasured", "tie"):
        if verdict in outcomes:
            return verdict
    return "pass"


def rederive_all(folder: Path) -> int:
    """Check every row of every audit file in ``folder``; the number of rows checked."""
    paths = sorted(p for p in folder.glob("*.csv"))
    assert paths, f"no audit files in {folder}"
    rows = 0
    for path in paths:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
        missing = [c for c in (*CHECK_COLUMNS, "otherwise") if c not in frame.columns]
        assert not missing, (f"{path}: no columns {missing}: not an audit file of this "
                             "version; remake it (make figures)")
        for row in frame.to_dict("records"):
            assert rederive(row) == row["verdict"], (path.name, row["claim"], row["verdict"])
            rows += 1
    return rows


def test_the_rederivation_follows_the_documented_rules():
    row = {"claim": "c", "statistic": "a ; b", "observed": "[-1, 0.5] ; 3",
           "comparison": "< (tie: covers) ; <=", "threshold": "0 ; 3", "otherwise": "fail"}
    assert rederive(row) == "tie"
    assert rederive({**row, "observed": "[-1, -0.5] ; 3"}) == "pass"
    assert rederive({**row, "observed": "[-1, -0.5] ; 3.5"}) == "fail"
    assert rederive({**row, "observed": "nan ; 3", "otherwise": "differs"}) == "unmeasured"
    assert rederive({**row, "observed": "nan ; 4", "otherwise": "differs"}) == "differs"
    assert rederive({**row, "statistic": "a", "observed": "inf", "comparison": "<",
                     "threshold": "inf"}) == "fail"
    assert rederive({**row, "statistic": "a", "observed": "0.3", "comparison": "in",
                     "threshold": "[0.35, 0.65]"}) == "fail"


def _default_run() -> Path:
    return Path(os.environ.get("NEURD_AUDIT_DIR", ROOT / "results")) / "audit"


def _finished() -> bool:
    """Whether the run holds every paper figure's audit (a run of one figure, as
    ``snakemake results/figures/fig6_paper.png``, is not a finished run)."""
    from neurd.cli import FIGURES

    return all((_default_run() / f"{name}.csv").is_file() for name in FIGURES)


@pytest.mark.skipif(not _finished(),
                    reason="no finished run in results/ (make figures) or NEURD_AUDIT_DIR")
def test_every_verdict_of_the_finished_run_follows_from_its_row():
    """The default-scale run of this checkout (or NEURD_AUDIT_DIR's): every claim row."""
    assert rederive_all(_default_run()) > 50
