"""A configuration that diverges is recorded, not fatal: its every measurement is NaN from the
checkpoint it diverged at, the rest of its block runs on, a job stopped after the divergence
resumes to the same numbers, and the tables, checkpoints and publication checks accept a NaN
only as the tail of a run that diverged.

The diverging job is Algorithm 1's plain sum over the batch's steps on Leduc at the paper's
learning rates: its steps are 256x the default reading's and NeuRD's network at entropy 0.1
goes to NaN within two phases of 400 iterations (docs/readings.md; the default reading does
not: tests/test_neural_readings.py); at entropy 0 it may or may not within them, as the
processor's float rounding takes the chaotic run, so the tests below hold either way."""

import numpy as np
import pandas as pd
import pytest

from neurd.games import compile_game
from neurd.names import NEURD, SPG
from neurd.neural import experiment, train
from neurd.neural.measurement import GROWTH, MEASURED
from neurd.neural.results import ci_table, run_table, summary_table
from neurd.neural.resumable import check_resumable
from neurd.publication import content

CFG = {"critic_updates_per_policy_update": 4, "critic_batch": 4, "policy_batch": 256,
       "final_checkpoints": 2, "seed": 0,
       "bootstrap": {"resamples": 200, "confidence": 0.95, "method": "percentile"}}


@pytest.fixture(scope="module")
def leduc():
    return compile_game("leduc_poker")


def _plan(seeds=(0,)):
    # a run that diverges: Algorithm 1's plain sum over the batch under the raw reading
    return experiment.Plan(game="leduc", spec=train.Spec(loss_normalisation="batch_sum",
                                                         neurd_logits="raw"),
                           entropies=(0.0, 0.1), run_seeds=seeds, seed=0,
                           phase_iterations=400, phases=2, geometric=2, linear=4,
                           seeds_per_batch=1)


@pytest.fixture(scope="module")
def whole(leduc):
    return experiment.run(leduc, _plan())


def _first_nan(values: np.ndarray) -> np.ndarray:
    """``[C]``: each column's first NaN row (the row count if none)."""
    lost = np.isnan(values)
    return np.where(lost.any(axis=0), np.argmax(lost, axis=0), len(values))


def test_a_diverging_configuration_is_nan_from_its_divergence_and_the_others_run_on(whole):
    plan = _plan()
    algorithms = np.array([a for a, _, _ in plan.configurations])
    first = _first_nan(whole["nash_conv"])
    rows = len(whole["iteration"])
    entropies = np.array([e for _, e, _ in plan.configurations])
    assert (first[(algorithms == NEURD) & (entropies == 0.1)] < rows).all(), (
        "the plain sum's NeuRD run at entropy 0.1 diverges")
    assert (first[algorithms == SPG] == rows).all(), "SPG's do not, in the same block"
    for c, row in enumerate(first):
        for name in MEASURED:
            tail = whole[name][row:, c]
            assert np.isnan(tail).all(), (name, c)
        assert np.isfinite(whole["nash_conv"][:row, c]).all()
        for name in GROWTH:  # finite while it lives, as measured at the row, NaN after
            assert np.isfinite(whole[name][:row, c]).all(), (name, c)
            assert np.isnan(whole[name][row + 1:, c]).all(), (name, c)
        ends = whole["phase"][whole["iteration"] == whole["phase"] * plan.phase_iterations]
        for p, phase in enumerate(np.unique(ends)):
            end_row = np.flatnonzero(whole["iteration"] == phase * plan.phase_iterations)[0]
            policy = whole["policies"][p, c]
            assert np.isnan(policy).all() if end_row >= row else np.isfinite(policy).all()


def test_a_job_stopped_after_a_divergence_resumes_to_the_same_numbers(leduc, whole, tmp_path,
                                                                      monkeypatch):
    """The job is cut (an exception, as a kill) after the first divergence is saved: the saved
    state holds the diverged configuration as zeros and its NaN rows; it is resumed, checked
    as a publication checks a block in progress, and the rest is the uninterrupted run's."""
    plan, folder = _plan(), tmp_path / "state"
    first = _first_nan(whole["nash_conv"])
    cut = int(whole["iteration"][np.sort(first)[0] + 1])

    class Cut(Exception):
        pass

    def update(self, done, detail=""):
        if done >= cut:
            raise Cut
    monkeypatch.setattr(experiment.Progress, "update", update)
    with pytest.raises(Cut):
        experiment.run(leduc, plan, checkpoint_path=folder, checkpoint_seconds=0.0,
                       identity={"test": 1})
    monkeypatch.undo()
    info = experiment.check_consistent_state(leduc, plan, {"test": 1}, folder)
    assert info["next_row"] == np.sort(first)[0] + 1
    _, _, saved = experiment.restore_strictly(leduc, plan, {"test": 1}, folder)
    assert experiment.diverged(saved, info["next_row"]).sum() >= 1
    resumed = experiment.run(leduc, plan, checkpoint_path=folder, identity={"test": 1})
    for key in (*MEASURED, *GROWTH, "policies"):
        np.testing.assert_array_equal(resumed[key], whole[key], err_msg=key)
    np.testing.assert_array_equal(experiment.replay(leduc, plan, len(whole["iteration"])),
                                  whole["nash_conv"])


def test_a_checkpoint_holds_nan_only_as_a_diverged_configurations_tail(leduc, whole):
    plan = _plan()
    iterations, phases = whole["iteration"], whole["phase"]
    rows, configs = whole["nash_conv"].shape
    legal = int(np.asarray(leduc.infostate_legal).sum())
    legal_mask = np.asarray(leduc.infostate_legal)
    results = {name: whole[name].copy() for name in (*MEASURED, *GROWTH)}
    results["phase_tables"] = np.asarray(
        [p[:, legal_mask] for p in whole["policies"]], np.float32)
    results["logits"] = np.full((rows, 0, legal), np.nan)

    def check(changed):
        check_resumable(plan, iterations, phases, configs, legal, rows, {**results, **changed},
                        [])

    check({})  # the run's own results, a diverged configuration's NaN tail included
    c = int(np.argmin(_first_nan(whole["nash_conv"])))
    row = int(_first_nan(whole["nash_conv"])[c])
    revived = whole["nash_conv"].copy()
    revived[row + 1, c] = 1.0  # a NaN in the middle of a run, then a value again
    with pytest.raises(ValueError) as refused:
        check({"nash_conv": revived})
    assert refused.value.array == "result_nash_conv"
    for name, array in (("at_threshold", "result_at_threshold"),
                        ("policy_entropy", "result_nash_conv")):
        kept = whole[name].copy()
        kept[row, c] = 0.5  # a measurement of a configuration that had diverged
        with pytest.raises(ValueError) as refused:
            check({name: kept})
        assert refused.value.array == array, name
    grown = whole["common_mode"].copy()
    assert np.all(np.isnan(grown[row + 1:, c]))  # NaN after the row it diverged at
    grown[row, c] = np.inf  # at that row, what was measured, finite or not
    check({"common_mode": grown})
    grown[row + 1, c] = 0.5  # but nothing after it
    with pytest.raises(ValueError) as refused:
        check({"common_mode": grown})
    assert refused.value.array == "result_common_mode"
    tables = results["phase_tables"].copy()
    tables[-1, c] = 0.5  # a phase-end table of a configuration that had diverged
    with pytest.raises(ValueError) as refused:
        check({"phase_tables": tables})
    assert refused.value.array == "result_phase_tables"


def _curves(whole, plan) -> pd.DataFrame:
    return run_table(CFG, "leduc", "learned", whole, plan.configurations)


def test_the_tables_record_where_a_run_diverged(whole):
    plan = _plan()
    curves = _curves(whole, plan)
    nashconv = curves[["game", "algorithm", "entropy", "seed", "iteration", "phase",
                       "nash_conv"]]
    summary = summary_table(CFG, nashconv)
    first = _first_nan(whole["nash_conv"])
    for c, (algorithm, entropy, _) in enumerate(plan.configurations):
        run = summary[(summary.algorithm == algorithm) & (summary.entropy == entropy)].iloc[0]
        if first[c] < len(whole["iteration"]):
            assert run.diverged_at == whole["iteration"][first[c]]
            assert np.isnan(run.final_nash_conv) and np.isnan(run.average_nash_conv)
        else:
            assert pd.isna(run.diverged_at) and np.isfinite(run.final_nash_conv)
    assert str(summary.diverged_at.dtype) == "Int64"
    assert content.diverged_runs(curves) == {
        (a, float(e), int(s)): int(whole["iteration"][first[c]])
        for c, (a, e, s) in enumerate(plan.configurations) if first[c] < len(whole["iteration"])}


def test_the_ci_is_nan_exactly_where_a_seed_has_diverged(leduc):
    two = experiment.run(leduc, _plan(seeds=(0, 1)))
    plan = _plan(seeds=(0, 1))
    curves = _curves(two, plan)
    nashconv = curves[["game", "algorithm", "entropy", "seed", "iteration", "phase",
                       "nash_conv"]]
    ci = ci_table(CFG, nashconv, np.array([4.7, 4.2]))
    for (algorithm, entropy), rows in ci.groupby(["algorithm", "entropy"]):
        runs = nashconv[(nashconv.algorithm == algorithm) & (nashconv.entropy == entropy)]
        wide = runs.pivot(index="seed", columns=["iteration", "phase"], values="nash_conv")
        wide = wide.sort_index(axis=1)
        lost = np.isnan(wide.to_numpy()).any(axis=0)
        assert np.array_equal(np.isnan(rows["mean"].to_numpy()), lost)
        assert np.array_equal(np.isnan(rows.ci_low.to_numpy()), lost)
        assert np.allclose(rows["mean"].to_numpy()[~lost], wide.to_numpy().mean(axis=0)[~lost])
    assert ci["mean"].isna().any() and ci["mean"].notna().any()


def test_a_publication_accepts_a_nan_only_as_the_tail_of_a_diverged_run(whole):
    plan = _plan()
    curves = _curves(whole, plan).assign(critic_rmse=1.0)
    lost = np.isnan(curves.nash_conv.to_numpy())
    curves.loc[lost, "critic_rmse"] = np.nan
    assert not content._range_problems(curves, "learned", 4, CFG)
    run = curves[curves.nash_conv.isna()].iloc[0]
    key = (curves.algorithm == run.algorithm) & (curves.entropy == run.entropy)
    revived = curves.copy()
    last = revived[key].iteration.idxmax()
    revived.loc[last, "nash_conv"] = 0.5  # NaN, then a value again
    assert any("nash_conv" in p for p in content._range_problems(revived, "learned", 4, CFG))
    hidden = curves.copy()
    hidden.loc[last, "policy_entropy"] = 0.5  # a diverged run measured again
    assert any("policy_entropy" in p for p in content._range_problems(hidden, "learned", 4,
                                                                       CFG))
