"""The paper-length readings study (neurd.paper_readings, make readings-paper): its cells
are the issue's, a trial of it runs, publishes and reports, a stopped cell resumes from its
published state to the same curves, and its background lifecycle is honest."""

import json
import os
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from neurd import paper_readings as study
from neurd.paper_readings_report import BEGIN, END, RUN_COLUMNS
from neurd.tables import read_metadata

TRIAL = 8  # iterations per phase of a trial: the study's machinery, not its numbers


def test_the_cells_are_every_reading_the_study_names_at_the_paper_length():
    assert study.PHASE_ITERATIONS == 330_000 and study.SEEDS >= 4
    assert set(study.ENTROPIES) == {0.0, 0.03, 0.1, 0.3, 1.0}
    cells = {(c.game, c.critic, c.reading): c.phases for c in study.CELLS}
    for game, critic in (("kuhn", "learned"), ("kuhn", "exact"), ("leduc", "learned"),
                         ("goofspiel", "learned")):
        for reading in ("raw", "centred"):
            assert (game, critic, reading) in cells
    for where in (("leduc", "learned"), ("kuhn", "exact")):  # where the raw runs diverged
        assert cells[(*where, "raw")] == cells[(*where, "centred")] == 3
    assert {g for g, _, r in cells if r == "centred_all"} == {"leduc", "goofspiel"}
    for cell in study.CELLS:  # SPG, the control, beside the raw reading; NeuRD first
        assert cell.algorithms[0] == "neurd"
        assert ("spg" in cell.algorithms) == (cell.reading == "raw")
    assert len({c.name for c in study.CELLS}) == len(study.CELLS)


def test_a_cells_section_is_refused_as_compare_refuses_it():
    cell = study.Cell("kuhn", "learned", "sideways", 1)
    with pytest.raises(ValueError, match="neurd_logits"):
        study.section(cell, "kuhn_poker")
    with pytest.raises(ValueError, match="no cell 'nope'"):
        study.cell_named("nope")


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    """Kuhn's two learned cells at a trial's length, run in processes of their own as the
    study runs them, published and reported."""
    root = tmp_path_factory.mktemp("readings-paper")
    work, published = root / "work", root / "published"
    cells = ["kuhn-learned-raw-1phase", "kuhn-learned-centred-1phase"]
    code = study.run(work, published, 30.0, TRIAL, cells)
    assert code == 0
    assert study.publish(work, published) == 0
    docs = root / "readings.md"
    docs.write_text(f"# Readings\n\n{BEGIN}\nold\n{END}\n\nafter\n")
    from neurd.paper_readings_report import report

    assert report(published, docs) == 0
    return work, published, docs


def test_a_trial_publishes_every_run_with_its_growth_and_reports_them(trial):
    work, published, docs = trial
    runs = pd.read_parquet(published / "runs.parquet")
    assert list(runs.columns) == list(RUN_COLUMNS)
    per_cell = study.SEEDS * len(study.ENTROPIES)
    assert len(runs) == 3 * per_cell  # raw: NeuRD and SPG; centred: NeuRD
    assert runs.groupby("reading").size().to_dict() == {
        "raw": per_cell, "centred": per_cell, "spg (control)": per_cell}
    curves = pd.read_parquet(published / "cells/kuhn-learned-raw-1phase/curves.parquet")
    for name in ("common_mode", "centred_logit", "policy_weight_norm", "critic_weight_norm"):
        assert np.isfinite(curves[name]).all() and (curves[name] > 0).all(), name
    meta = read_metadata(published / "cells/kuhn-learned-raw-1phase/curves.parquet")
    assert meta["reading"] == "raw" and meta["config"]["neurd_logits"] == "raw"
    assert meta["config"]["phase_iterations"] == {"kuhn": TRIAL}
    text = docs.read_text()
    assert "old" not in text and text.endswith("\nafter\n")
    assert "| raw | 0.03 | 4 | 0 |" in text and "| centred | 1 | 4 | 0 |" in text
    assert (published / "common_mode.png").stat().st_size > 10_000


def test_every_readings_neurd_starts_where_the_others_do(trial):
    """The readings' NeuRD share the first checkpoint (same weights, same streams); the
    centred reading then moves it differently from the raw one."""
    _, published, _ = trial
    raw = pd.read_parquet(published / "cells/kuhn-learned-raw-1phase/curves.parquet")
    centred = pd.read_parquet(published / "cells/kuhn-learned-centred-1phase/curves.parquet")
    raw = raw[raw.algorithm == "neurd"].reset_index(drop=True)
    first = raw.iteration == 0
    pd.testing.assert_series_equal(raw.nash_conv[first], centred.nash_conv[first])
    assert not np.array_equal(raw.common_mode[~first], centred.common_mode[~first])


def test_a_published_cell_is_not_run_again(trial, capsys):
    work, published, _ = trial
    assert study.run(work, published, 30.0, TRIAL, ["kuhn-learned-raw-1phase"]) == 0
    assert study.finished(study.cell_named("kuhn-learned-raw-1phase"), work, published)


def test_a_stopped_cell_resumes_from_its_published_state_to_the_same_curves(tmp_path,
                                                                           monkeypatch):
    """A cell cut after a saved checkpoint (as a kill) is published in progress; on a fresh
    clone (its work folder gone) it resumes from the published state and writes the curves
    of an uninterrupted run, bit for bit."""
    from neurd.neural import experiment

    cell = study.cell_named("kuhn-exact-centred-3phase")
    whole_work, whole_published = tmp_path / "whole", tmp_path / "whole-published"
    assert study.run_cell(cell, whole_work, whole_published, None, TRIAL) == "finished"
    whole = pd.read_parquet(whole_work / f"cells/{cell.name}/curves.parquet")

    work, published = tmp_path / "work", tmp_path / "published"
    monkeypatch.setattr(study, "CHECKPOINT_SECONDS", 0.0)

    class Cut(Exception):
        pass

    def update(self, done, detail=""):
        if done >= 2 * TRIAL:
            raise Cut
    monkeypatch.setattr(experiment.Progress, "update", update)
    with pytest.raises(Cut):
        study.run_cell(cell, work, published, None, TRIAL)
    monkeypatch.undo()
    assert study.publish(work, published) == 0
    kept = published / "in-progress" / cell.name
    assert kept.is_dir() and any(kept.iterdir())
    import shutil

    shutil.rmtree(work)
    assert study.run_cell(cell, work, published, None, TRIAL) == "finished"
    pd.testing.assert_frame_equal(pd.read_parquet(work / f"cells/{cell.name}/curves.parquet"),
                                  whole)
    assert study.publish(work, published) == 0
    assert not kept.exists()  # a finished cell's state leaves the publication


def test_a_lock_that_cannot_be_read_is_not_taken_for_nothing_running(tmp_path, capsys):
    work = tmp_path / "work"
    work.mkdir()
    (work / "running.json").write_text('{"pid": ')  # truncated, as by a crash mid-write
    assert study.running(work)["pid"] is None
    assert study.start(work, tmp_path / "published", 1.0, TRIAL) == 2
    assert "runs already" in capsys.readouterr().err
    assert study.publish(work, tmp_path / "published") == 0  # finished cells only: none
    assert "saved states are not" in capsys.readouterr().out
    assert study.stop(work) == 0
    assert study.running(work) is None


@pytest.mark.long
def test_the_study_starts_detached_from_frozen_code_and_stops(tmp_path):
    work, published = tmp_path / "work", tmp_path / "published"
    env = {**os.environ, "PYTHONPATH": str(study.ROOT / "src")}
    command = [sys.executable, "-m", "neurd.paper_readings", "--work", str(work),
               "--published", str(published), "--iterations", "20000"]
    started = subprocess.run([*command[:3], "start", *command[3:], "--minutes", "5",
                              "--cells", "leduc-learned-raw-3phase"],
                             capture_output=True, text=True, env=env, cwd=study.ROOT)
    assert started.returncode == 0, started.stderr
    record = json.loads((work / "running.json").read_text())
    assert (work / "code/src/neurd/paper_readings.py").is_file()
    status = subprocess.run([*command[:3], "status", *command[3:]], capture_output=True,
                            text=True, env=env, cwd=study.ROOT).stdout
    assert f'"pid": {record["pid"]}' in status
    again = subprocess.run([*command[:3], "start", *command[3:]], capture_output=True,
                           text=True, env=env, cwd=study.ROOT)
    assert again.returncode == 2 and "runs already" in again.stderr
    frozen = "neurd from " + str(work / "code" / "src" / "neurd")
    for _ in range(120):  # the cell's process says which code it imported
        if frozen in (work / "log.txt").read_text():
            break
        time.sleep(1)
    stopped = subprocess.run([*command[:3], "stop", *command[3:]], capture_output=True,
                             text=True, env=env, cwd=study.ROOT)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert study.running(work) is None and not (work / "running.json").exists()
    assert frozen in (work / "log.txt").read_text()


def test_the_docs_table_is_the_published_cells_table():
    """docs/readings.md's table of the study is written from the published cells, and says so
    where none is published."""
    from neurd.paper_readings_report import cell_curves, markdown, run_rows, table

    page = (study.ROOT / "docs/readings.md").read_text()
    block = page.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    curves = cell_curves(study.ROOT / study.PUBLISHED)
    if not curves:
        assert block == "(no cell published yet)"
        return
    assert block == markdown(table(run_rows(curves))).strip()


def test_the_study_runs_the_commit_its_published_cells_ran(tmp_path, capsys):
    """A start runs the code its published cells ran (so that a cell in progress resumes: its
    state is tied to the code's source), named in code.json, where the repository has it; an
    unknown commit recorded there is passed over, one asked for by name refused."""
    import subprocess as sp

    head = sp.run(["git", "rev-parse", "HEAD"], cwd=study.ROOT, capture_output=True,
                  text=True, check=True).stdout.strip()
    published = tmp_path / "published"
    published.mkdir()
    (published / study.CODE_RECORD).write_text(json.dumps({"commit": head}))
    assert study.pinned_commit(published) == head
    (published / study.CODE_RECORD).write_text(json.dumps({"commit": "0" * 40}))
    assert study.pinned_commit(published) is None
    assert study.start(tmp_path / "work", published, 1.0, TRIAL, commit="no-such-commit") == 2
    assert "no commit of this repository" in capsys.readouterr().err
