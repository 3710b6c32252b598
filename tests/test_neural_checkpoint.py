"""Neural checkpoints that do not fit the job (NaN or misshapen leaves, a leaf too many or too
few, results that are not what the job would hold, ``next_row`` off the grid, a broken
``meta.json``, a truncated part file) are dropped: one warning names the folder (and the file),
the folder is removed before any compute uses it, and the job runs afresh to the tables of an
uninterrupted run.  A fitting checkpoint is still resumed; another run's is ignored, not
dropped; nothing in the folder that is not the checkpoint's is deleted."""

import dataclasses
import json
import logging
import os
import shutil

import jax
import numpy as np
import pytest

from neurd import games
from neurd.names import GAMES
from neurd.neural import experiment, train

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


def _write_meta(folder, meta):
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
    restore = experiment._Checkpoint.restore

    def spy(self, *args, **kwargs):
        out = restore(self, *args, **kwargs)
        left.append(os.path.exists(self.path))
        return out

    monkeypatch.setattr(experiment._Checkpoint, "restore", spy)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=experiment.log.name):
        results = experiment.run(kuhn, _plan(), checkpoint_path=folder, checkpoint_seconds=0.0)
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    return results, left[0], warnings


def _assert_dropped(kuhn, reference, folder, monkeypatch, caplog, *named):
    """The job drops the checkpoint at restore with one warning naming the folder and
    ``named``, starts afresh, saves over it, and writes the uninterrupted run's tables."""
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


def test_a_file_in_the_folders_place_is_kept_until_the_first_save(kuhn, reference, tmp_path,
                                                                  monkeypatch, caplog):
    path = tmp_path / "checkpoint"
    path.write_text("not a checkpoint")
    results, left, warnings = _run(kuhn, path, monkeypatch, caplog)
    assert len(warnings) == 1 and str(path) in warnings[0] and left
    assert not path.exists() and len(results["pieces"]) == 1
    for key in COMPARED:
        np.testing.assert_array_equal(results[key], reference[key], err_msg=key)


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
    """A refused checkpoint in a folder that holds something else: its files go, the rest
    stays (and so does the folder, when the job ends)."""
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
    iterations, phases = experiment.checkpoint_grid(8, 2, 1, 1, plan.spec.critic_updates)
    results = {k[len("result_"):]: _array(stopped, k) for k in _meta(stopped)["arrays"]
               if k.startswith("result_")}
    legal = int(games.compile_game(GAMES["kuhn"].string).infostate_legal.sum())
    pieces = _meta(stopped)["pieces"]

    def check(results):
        experiment._check_resumable(plan, iterations, phases, 4, legal, 2, results, pieces)

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
    iterations, phases = experiment.checkpoint_grid(8, 2, 1, 1, plan.spec.critic_updates)
    results = {k[len("result_"):]: _array(folder, k) for k in _meta(folder)["arrays"]
               if k.startswith("result_")}
    legal = int(np.asarray(kuhn.infostate_legal).sum())

    def check(logits):
        experiment._check_resumable(plan, iterations, phases, 4, legal, 2,
                                    {**results, "logits": logits}, _meta(folder)["pieces"])

    check(saved)
    for bad in (saved[:, :1], np.where(np.isnan(saved), 1.0, saved)):
        with pytest.raises(ValueError) as refused:
            check(bad)
        assert refused.value.array == "result_logits"
    resumed = experiment.run(kuhn, plan, checkpoint_path=folder)
    for key in (*COMPARED, "logits"):
        np.testing.assert_array_equal(resumed[key], whole[key], err_msg=key)
