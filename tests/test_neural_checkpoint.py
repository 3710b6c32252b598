"""Neural checkpoints that do not fit the job (NaN or misshapen leaves, a leaf too many or too
few, results that are not what the job would hold, ``next_row`` off the grid, a broken
``meta.json``, a truncated part file) are dropped: one warning names the folder (and the file),
the saved state is removed before any compute uses it, and the job runs afresh to the tables of
an uninterrupted run.  So is one altered after it was saved (a part's SHA-256 or ``meta.json``'s
digest differs: an edited provenance included) or whose parts declare more bytes than a part
holds.  The content checks are tested on consistently forged checkpoints (hashes and digest
recomputed after the edit), so each holds on its own.  A fitting checkpoint is still resumed;
another run's is ignored, not dropped; nothing in the folder that is not the checkpoint's is
deleted, and a path this project did not make (a file, a folder of other files, a folder it
cannot write to) is refused before any compute."""

import dataclasses
import hashlib
import io
import json
import logging
import os
import shutil
import zipfile

import jax
import numpy as np
import pytest

from neurd import games
from neurd.names import GAMES
from neurd.neural import experiment, train
from neurd.neural.checkpoint import Checkpoint, meta_digest
from neurd.neural.plan import checkpoint_grid
from neurd.neural.resumable import check_resumable

COMPARED = ("nash_conv", "critic_rmse", "blocked", "critic_loss", "policies", "iteration",
            "phase")


@pytest.fixture(scope="module")
def kuhn():
    return games.compile_game(GAMES["kuhn"].string)


def _plan(critic="learned"):
    """The smallest job: 2 algorithms x 2 entropy levels x 1 seed, a grid of 6 rows."""
    return experiment.Plan(game="kuhn", spec=train.Spec(hidden=(8,), policy_batch=16,
                                                        critic=critic),
                           entropies=(0.0, 0.1), run_seeds=(0,), seed=0, phase_iterations=8,
                           phases=2, geometric=1, linear=1)


@pytest.fixture(scope="module")
def reference(kuhn):
    """The uninterrupted run from scratch."""
    return experiment.run(kuhn, _plan())


@pytest.fixture(scope="module")
def stopped(kuhn, tmp_path_factory):
    """A good checkpoint: the job stopped by a wall-time budget of 0 s (at checkpoint row 2,
    the first after the one that timed a segment)."""
    folder = tmp_path_factory.mktemp("stopped") / "checkpoint"
    with pytest.raises(experiment.Stopped):
        experiment.run(kuhn, _plan(), checkpoint_path=folder, stop_after_seconds=0.0)
    assert json.loads((folder / "meta.json").read_text())["next_row"] == 2
    return folder


@pytest.fixture()
def checkpoint(stopped, tmp_path):
    folder = tmp_path / "checkpoint"
    shutil.copytree(stopped, folder)
    return folder


def _meta(folder):
    return json.loads((folder / "meta.json").read_text())


def _write_meta(folder, meta, seal=True):
    """Write ``meta.json``; ``seal``: with every part's SHA-256 and the digest recomputed, as a
    consistent forgery would (so that the check under test is the one that refuses it)."""
    if seal:
        meta["sha256"] = {p: hashlib.sha256((folder / p).read_bytes()).hexdigest()
                          for p in meta["parts"]}
        meta["digest"] = meta_digest(meta)
    (folder / "meta.json").write_text(json.dumps(meta))


def _array(folder, name):
    meta = _meta(folder)
    entry = meta["arrays"][name]
    files = [np.load(folder / p) for p in meta["parts"]]
    flat = np.concatenate([files[k][key] for k, key in entry["chunks"]])
    return flat.reshape(entry["shape"])


def _put(folder, name, array):
    """Store ``array`` as ``name`` (a new part file of one chunk), or drop ``name`` if None."""
    meta = _meta(folder)
    if array is None:
        del meta["arrays"][name]
    else:
        part = f"part-{meta['generation']}-{len(meta['parts'])}.npz"
        np.savez(folder / part, **{f"{name}.0": np.asarray(array).reshape(-1)})
        meta["arrays"][name] = {"dtype": array.dtype.str, "shape": list(array.shape),
                                "chunks": [[len(meta["parts"]), f"{name}.0"]]}
        meta["parts"].append(part)
    _write_meta(folder, meta)


@pytest.fixture(scope="module")
def leaf_paths(kuhn):
    """``jax.tree_util`` key paths of the job's state leaves, in checkpoint order."""
    plan = _plan()
    game = train.neural_game(kuhn)
    states = [train.batch_inputs(plan.spec, game, plan.seed, plan.game, batch, plan.entropies)[0]
              for batch in plan.batches]
    return [jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(states)[0]]


def _run(kuhn, folder, monkeypatch, caplog):
    """Run the job over ``folder`` (saving at every row); the results, whether the folder
    was still there when ``restore`` returned, and the warnings."""
    left = []
    restore = Checkpoint.restore

    def spy(self, *args, **kwargs):
        out = restore(self, *args, **kwargs)
        left.append(os.path.exists(os.path.join(self.path, "meta.json")))
        return out

    monkeypatch.setattr(Checkpoint, "restore", spy)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="neurd.neural.checkpoint"):
        results = experiment.run(kuhn, _plan(), checkpoint_path=folder, checkpoint_seconds=0.0)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return results, left[0], warnings


def _assert_dropped(kuhn, reference, folder, monkeypatch, caplog, *named):
    """The job drops the checkpoint at restore with one warning naming the folder and
    ``named``, starts afresh, saves over it, and writes the uninterrupted run's tables (and
    removes the folder at its end)."""
    results, left, warnings = _run(kuhn, folder, monkeypatch, caplog)
    assert len(warnings) == 1, warnings
    assert str(folder) in warnings[0] and all(n in warnings[0] for n in named), warnings[0]
    assert not left, "the refused checkpoint was kept"
    assert not folder.exists()  # the job's own saves went there, and it removed them at its end
    assert len(results["pieces"]) == 1 and results["pieces"][0]["first_iteration"] == 0
    for key in COMPARED:
        np.testing.assert_array_equal(results[key], reference[key], err_msg=key)
        assert results[key].dtype == reference[key].dtype, key


# --- a fitting checkpoint, another run's, a file in the folder's place -------------------------


def test_a_fitting_checkpoint_is_resumed(kuhn, reference, checkpoint, monkeypatch, caplog):
    results, left, warnings = _run(kuhn, checkpoint, monkeypatch, caplog)
    assert warnings == [] and left
    assert not checkpoint.exists()
    assert [p["first_iteration"] for p in results["pieces"]] == [0, 4]
    for key in COMPARED:
        np.testing.assert_array_equal(results[key], reference[key], err_msg=key)


def test_another_runs_checkpoint_is_ignored_not_dropped(kuhn, reference, checkpoint,
                                                        monkeypatch, caplog):
    meta = _meta(checkpoint)
    meta["identity"] = {"job": "another"}
    _write_meta(checkpoint, meta)
    results, left, warnings = _run(kuhn, checkpoint, monkeypatch, caplog)
    assert len(warnings) == 1 and "another run" in warnings[0] and left
    assert len(results["pieces"]) == 1 and not checkpoint.exists()
    for key in COMPARED:
        np.testing.assert_array_equal(results[key], reference[key], err_msg=key)


def _no_compute(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the job computed before refusing its checkpoint path")

    monkeypatch.setattr(train, "run_segment", refuse)


@pytest.mark.parametrize("what", ["file", "folder of other files", "folder of another "
                                  "checkpoint format", "symlink"])
def test_a_path_this_project_did_not_make_is_refused_and_kept(kuhn, tmp_path, monkeypatch, what):
    """Never remove or overwrite what this project did not write: a file, a folder holding
    files but not the marker (a user's, or one holding a meta.json and parts of its own), or a
    link is refused before any compute, and left as it was."""
    path = tmp_path / "checkpoint"
    if what == "file":
        path.write_text("my notes")
    elif what == "symlink":
        (tmp_path / "elsewhere").mkdir()
        path.symlink_to(tmp_path / "elsewhere")
    else:
        path.mkdir()
        names = (["notes.txt"] if what == "folder of other files"
                 else ["meta.json", "part-0-0.npz"])
        for name in names:
            (path / name).write_text("mine")
    before = {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    _no_compute(monkeypatch)
    with pytest.raises(experiment.CheckpointPathError) as refused:
        experiment.run(kuhn, _plan(), checkpoint_path=path)
    assert str(path) in str(refused.value)
    assert {p.name: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_a_folder_that_cannot_be_written_is_refused_before_compute(kuhn, tmp_path, monkeypatch):
    if os.geteuid() == 0:
        # root writes through a folder's mode bits: refuse writing the way a full or
        # read-only disk does
        def denied(*args, **kwargs):
            raise PermissionError(13, "Permission denied")

        monkeypatch.setattr("neurd.neural.checkpoint.atomic_path", denied)
    folder = tmp_path / "readonly"
    folder.mkdir()
    folder.chmod(0o555)
    _no_compute(monkeypatch)
    try:
        with pytest.raises(experiment.CheckpointPathError, match="cannot be written"):
            experiment.run(kuhn, _plan(), checkpoint_path=folder / "checkpoint")
    finally:
        folder.chmod(0o755)


def test_an_empty_folder_is_used_and_removed_at_the_end(kuhn, reference, tmp_path):
    folder = tmp_path / "given"
    folder.mkdir()
    results = experiment.run(kuhn, _plan(), checkpoint_path=folder, checkpoint_seconds=0.0)
    assert not folder.exists()
    for key in COMPARED:
        np.testing.assert_array_equal(results[key], reference[key], err_msg=key)


def test_a_state_kept_at_the_end_gives_the_same_tables_without_a_cycle(kuhn, reference, stopped,
                                                                        tmp_path, monkeypatch):
    """``keep_state``: a job (here resumed from a stopped one) keeps its state at the last row
    instead of removing it; run again with it, the job writes the uninterrupted run's tables
    and the same pieces without one learning cycle (a finished block held in progress until the
    other critic of its seeds finishes), held again leaving the state's files as they were;
    asked without a folder, it is refused."""
    folder = tmp_path / "checkpoint"
    shutil.copytree(stopped, folder)
    first = experiment.run(kuhn, _plan(), checkpoint_path=folder, keep_state=True)
    rows = len(reference["iteration"])
    assert _meta(folder)["next_row"] == rows
    monkeypatch.setattr(experiment, "_advance", lambda *a, **k: pytest.fail("a cycle ran"))
    files = {p.name: p.read_bytes() for p in folder.iterdir()}
    held = experiment.run(kuhn, _plan(), checkpoint_path=folder, keep_state=True)
    # held again: left byte for byte (a publication holding it sees nothing new to publish)
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == files
    again = experiment.run(kuhn, _plan(), checkpoint_path=folder)
    assert not folder.exists()  # without keep_state: removed at the end, as always
    for results in (first, held, again):
        for key in COMPARED:
            np.testing.assert_array_equal(results[key], reference[key], err_msg=key)
    assert again["pieces"] == first["pieces"]
    assert [p["first_iteration"] for p in again["pieces"]] == [0, 4]
    with pytest.raises(ValueError, match="needs a checkpoint path"):
        experiment.run(kuhn, _plan(), keep_state=True)


# --- altered after it was saved -----------------------------------------------------------


def test_an_edited_provenance_is_dropped(kuhn, reference, checkpoint, monkeypatch, caplog):
    """A checkpoint naming a device that never ran (its pieces edited, the digest not
    recomputed) does not lend its provenance to the curves."""
    meta = _meta(checkpoint)
    meta["pieces"][0]["device"] = "NVIDIA H200"
    _write_meta(checkpoint, meta, seal=False)
    _assert_dropped(kuhn, reference, checkpoint, monkeypatch, caplog, "altered")


def test_a_part_changed_in_place_is_dropped(kuhn, reference, checkpoint, monkeypatch, caplog):
    part = checkpoint / _meta(checkpoint)["parts"][0]
    data = bytearray(part.read_bytes())
    data[-200] ^= 1  # same size, one bit
    part.write_bytes(bytes(data))
    _assert_dropped(kuhn, reference, checkpoint, monkeypatch, caplog, part.name, "SHA-256")


def test_a_part_that_would_inflate_is_dropped_before_it_is_read(kuhn, reference, checkpoint,
                                                                monkeypatch, caplog):
    """A part whose member declares gigabytes (a compressed zip bomb), sealed consistently, is
    refused from its declared sizes (its zip directory), before numpy reads it."""
    meta = _meta(checkpoint)
    name = f"part-{meta['generation']}-{len(meta['parts'])}.npz"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("bomb.npy", "w", force_zip64=True) as member:
            block = bytes(2**20)
            for _ in range(64):  # 64 MiB of zeros: a few hundred kB on disk
                member.write(block)
    (checkpoint / name).write_bytes(buffer.getvalue())
    meta["parts"].append(name)
    _write_meta(checkpoint, meta)
    _assert_dropped(kuhn, reference, checkpoint, monkeypatch, caplog, name, "declares")


# --- the state: NaN, shape, dtype, count ------------------------------------------------------


def test_nan_in_a_policy_parameter_is_dropped(kuhn, reference, checkpoint, leaf_paths,
                                              monkeypatch, caplog):
    index = next(i for i, p in enumerate(leaf_paths) if ".policy[" in p)
    leaf = _array(checkpoint, f"leaf_{index}").copy()
    leaf.flat[0] = np.nan
    _put(checkpoint, f"leaf_{index}", leaf)
    _assert_dropped(kuhn, reference, checkpoint, monkeypatch, caplog, f"leaf_{index}",
                    "non-finite", ".npz")


@pytest.mark.parametrize("change", ["shape", "dtype"])
def test_a_leaf_of_the_wrong_shape_or_dtype_is_dropped(kuhn, reference, checkpoint, change,
                                                       monkeypatch, caplog):
    leaf = _array(checkpoint, "leaf_0")
    leaf = np.concatenate([leaf, leaf]) if change == "shape" else leaf.astype(np.float64)
    _put(checkpoint, "leaf_0", leaf)
    _assert_dropped(kuhn, reference, checkpoint, monkeypatch, caplog, "leaf_0")


@pytest.mark.parametrize("change", ["fewer", "more"])
def test_a_wrong_leaf_count_is_dropped(kuhn, reference, checkpoint, leaf_paths, change,
                                       monkeypatch, caplog):
    count = len(leaf_paths)
    if change == "fewer":
        _put(checkpoint, f"leaf_{count - 1}", None)
    else:
        _put(checkpoint, f"leaf_{count}", np.zeros(3, np.float32))
    _assert_dropped(kuhn, reference, checkpoint, monkeypatch, caplog, "leaves")


# --- the results so far -----------------------------------------------------------------------


def _nan_measured(x):
    x = x.copy()
    x[1, 0] = np.nan  # row 1 was measured before the stop: the job never writes NaN there
    return x


def _value_unmeasured(x):
    x = x.copy()
    x[4, 0] = 1.0  # row 4 was not measured yet: the job holds NaN there
    return x


@pytest.mark.parametrize("name, change", [
    ("nash_conv", lambda x: x[:-1]),  # a row short of the checkpoint grid
    ("critic_loss", lambda x: x[:, :-1]),  # a configuration short
    ("blocked", lambda x: x.astype(np.float32)),
    ("nash_conv", _nan_measured),
    ("critic_rmse", _value_unmeasured),
    ("phase_tables", lambda x: np.zeros((1,) + x.shape[1:], x.dtype)),  # no phase ended yet
    ("critic_rmse", None),  # missing
], ids=["rows", "columns", "dtype", "nan", "unmeasured", "phase-tables", "missing"])
def test_results_that_do_not_fit_are_dropped(kuhn, reference, checkpoint, name, change,
                                             monkeypatch, caplog):
    key = f"result_{name}"
    _put(checkpoint, key, None if change is None else change(_array(checkpoint, key)))
    _assert_dropped(kuhn, reference, checkpoint, monkeypatch, caplog,
                    *(() if change is None else (key,)))


@pytest.mark.parametrize("row", [-1, 7, 2.5, "2"])
def test_next_row_off_the_grid_is_dropped(kuhn, reference, checkpoint, row, monkeypatch,
                                          caplog):
    meta = _meta(checkpoint)
    meta["next_row"] = row
    _write_meta(checkpoint, meta)
    _assert_dropped(kuhn, reference, checkpoint, monkeypatch, caplog, "next_row")


def test_pieces_that_are_not_records_are_dropped(kuhn, reference, checkpoint, monkeypatch,
                                                 caplog):
    meta = _meta(checkpoint)
    meta["pieces"] = ["a piece"]
    _write_meta(checkpoint, meta)
    _assert_dropped(kuhn, reference, checkpoint, monkeypatch, caplog, "pieces")


# --- the files --------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["[1, 2]", "{\"format\": \"neurd-neural-checkpoint\"}", "{"],
                         ids=["list", "keys", "json"])
def test_a_broken_meta_json_is_dropped(kuhn, reference, checkpoint, text, monkeypatch, caplog):
    (checkpoint / "meta.json").write_text(text)
    _assert_dropped(kuhn, reference, checkpoint, monkeypatch, caplog, "meta.json")


def test_a_truncated_part_file_is_dropped(kuhn, reference, checkpoint, monkeypatch, caplog):
    part = checkpoint / _meta(checkpoint)["parts"][0]
    data = part.read_bytes()
    part.write_bytes(data[:len(data) // 2])
    _assert_dropped(kuhn, reference, checkpoint, monkeypatch, caplog, part.name)


def test_only_the_checkpoints_own_files_are_deleted(kuhn, reference, checkpoint, monkeypatch,
                                                    caplog):
    """A refused checkpoint in its folder, where someone put something else since: its files
    go, the rest stays (and so does the folder, when the job ends)."""
    (checkpoint / "notes.txt").write_text("mine")
    (checkpoint / "part-notes.npz").write_text("mine too")
    (checkpoint / "meta.json").write_text("[]")
    results, left, warnings = _run(kuhn, checkpoint, monkeypatch, caplog)
    assert len(warnings) == 1 and str(checkpoint) in warnings[0]
    assert sorted(p.name for p in checkpoint.iterdir()) == ["notes.txt", "part-notes.npz"]
    for key in COMPARED:
        np.testing.assert_array_equal(results[key], reference[key], err_msg=key)


def test_the_exact_critic_writes_no_critic_error(stopped):
    """With the exact critic, the job never writes a critic error: a checkpoint holding one
    does not fit it, one holding none does (the check alone, without running the job)."""
    plan = _plan("exact")
    iterations, phases = checkpoint_grid(8, 2, 1, 1, plan.spec.critic_updates)
    results = {k[len("result_"):]: _array(stopped, k) for k in _meta(stopped)["arrays"]
               if k.startswith("result_")}
    legal = int(games.compile_game(GAMES["kuhn"].string).infostate_legal.sum())
    pieces = _meta(stopped)["pieces"]

    def check(results):
        check_resumable(plan, iterations, phases, 4, legal, 2, results, pieces)

    with pytest.raises(ValueError) as refused:
        check(results)
    assert refused.value.array == "result_critic_rmse"
    check({**results, "critic_rmse": np.full_like(results["critic_rmse"], np.nan)})


def test_a_job_logging_logits_resumes_to_the_logits_of_an_uninterrupted_run(kuhn, tmp_path):
    """The logged centred logits are part of the saved state: a job stopped and resumed
    gives them as a run without a stop does; a checkpoint whose logits are misshapen, or
    hold values in rows not yet measured, does not fit."""
    plan = dataclasses.replace(_plan(), logits_seeds=(0,), logits_entropies=(0.1,))
    whole = experiment.run(kuhn, plan)
    folder = tmp_path / "checkpoint"
    with pytest.raises(experiment.Stopped):
        experiment.run(kuhn, plan, checkpoint_path=folder, stop_after_seconds=0.0)
    saved = _array(folder, "result_logits")
    assert saved.shape == whole["logits"].shape and np.isnan(saved[2:]).all()
    iterations, phases = checkpoint_grid(8, 2, 1, 1, plan.spec.critic_updates)
    results = {k[len("result_"):]: _array(folder, k) for k in _meta(folder)["arrays"]
               if k.startswith("result_")}
    legal = int(np.asarray(kuhn.infostate_legal).sum())

    def check(logits):
        check_resumable(plan, iterations, phases, 4, legal, 2,
                                    {**results, "logits": logits}, _meta(folder)["pieces"])

    check(saved)
    for bad in (saved[:, :1], np.where(np.isnan(saved), 1.0, saved)):
        with pytest.raises(ValueError) as refused:
            check(bad)
        assert refused.value.array == "result_logits"
    resumed = experiment.run(kuhn, plan, checkpoint_path=folder)
    for key in (*COMPARED, "logits"):
        np.testing.assert_array_equal(resumed[key], whole[key], err_msg=key)
