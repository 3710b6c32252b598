"""The raw reading's paper-scale publication (``published/raw_logits``), kept as evidence:
its config is the paper's under the raw reading, its divergence counts in docs/readings.md are
what it holds, and its readings figure is drawn from it (neurd.paper_readings_raw)."""

from pathlib import Path

import numpy as np
import pytest
import yaml

from neurd import paper_readings_raw as raw
from neurd.publication.commands import expected_snapshot

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def made():
    return raw.tables(workflow=ROOT)


def test_its_config_is_the_papers_under_the_raw_reading():
    """paper_raw_logits.yaml's neural section is paper.yaml's plus the raw reading, so the
    publication is the raw run of the paper's sizes; the paper's snapshot is the default
    reading's, which is not raw."""
    config = yaml.safe_load((ROOT / raw.CONFIGFILE).read_text())
    paper = yaml.safe_load((ROOT / "workflow/config/paper.yaml").read_text())
    assert config["neural"] == {**paper["neural"], "neurd_logits": "raw"}
    assert config["published"] == {"folder": raw.FOLDER.as_posix(), "configfile": raw.CONFIGFILE}
    raw_snapshot = expected_snapshot(raw.CONFIGFILE, ROOT)
    paper_snapshot = expected_snapshot("workflow/config/paper.yaml", ROOT)
    assert paper_snapshot["neurd_logits"] != "raw"
    assert {**paper_snapshot, "neurd_logits": "raw"} == raw_snapshot


def test_the_docs_counts_are_the_publications(made):
    tables, neural = made
    counts = raw.divergences(tables["summary"], tables["diagnostics"], neural)
    text = raw.markdown(counts, neural)
    page = (ROOT / "docs/readings.md").read_text()
    assert raw.BEGIN in page and raw.END in page
    assert page.split(raw.BEGIN, 1)[1].split(raw.END, 1)[0] == "\n" + text, (
        "docs/readings.md's counts of the raw publication are stale: python -m "
        "neurd.paper_readings raw-logits")
    assert (ROOT / "published/readings/paper-length" / raw.TABLE).read_text() == text


def test_the_counts_are_the_runs_that_stopped_being_finite(made):
    """Counted again from the curves: a run diverged where its NashConv is not finite at
    some checkpoint; per critic, algorithm and level the counts agree, and SPG has none."""
    tables, neural = made
    counts = raw.divergences(tables["summary"], tables["diagnostics"], neural)
    curves = tables["diagnostics"]
    for row in counts.to_dict("records"):
        runs = curves[(curves.game == row["game"]) & (curves.critic == row["critic"])
                      & (curves.algorithm == row["algorithm"])
                      & (curves.entropy == row["entropy"])]
        lost = runs.groupby("seed").nash_conv.apply(lambda v: not np.isfinite(v).all())
        assert (len(lost), int(lost.sum())) == (row["runs"], row["diverged"]), row
        assert row["diverged"] == len([w for w in row["diverged at"].split(", ") if w])
    assert counts[counts.algorithm == "spg"].diverged.sum() == 0
    assert counts[counts.algorithm == "neurd"].diverged.sum() > 0


def test_its_readings_figure_is_drawn_with_the_counts(made, tmp_path):
    tables, neural = made
    counts = raw.divergences(tables["summary"], tables["diagnostics"], neural)
    assert raw.headline(counts).startswith("runs diverged: Kuhn poker (learned critic): neurd ")
    raw.draw(tables, neural, counts, tmp_path / raw.PNG)
    png = (tmp_path / raw.PNG).read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000
