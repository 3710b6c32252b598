"""Fig 6 with a run that diverged: shown for what it is, and left out of what it has no value for.

A run that diverged keeps its rows with NaN from its first non-finite NashConv on
(``nashconv``, ``diagnostics``), has no final or average NashConv and says where it diverged
(``summary.diverged_at``), and the CI table's mean is NaN wherever one of its level's seeds
is.  The figure leaves such a run out of its box plots and says how many it left out; a
level with such a run cannot be an algorithm's best; the paired claims drop the pairs it
is in and say so; and each game has a claim that no run diverged, failing with the runs
named.  The tables are test_figures_fig6's (the smoke publication's Kuhn curves, 6 seeds,
2 entropy levels), a run marked diverged on them as the engine writes one.
"""

import io

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
import test_figures_fig6 as shared
from matplotlib.collections import PathCollection

from neurd.audit import VERDICTS, fmt, paired
from neurd.config import load_snapshot
from neurd.figures import fig6
from neurd.names import NEURD, SPG
from neurd.neural import results
from neurd.precision import float64
from neurd.publication import findings as published_findings
from neurd.stats import grid_margin

CFG = load_snapshot(shared.SMOKE / "config/neural.json")
MEASURED = ["nash_conv", "critic_rmse", "threshold_blocked", "critic_loss", "policy_entropy",
            "at_threshold"]
RUN = ["game", "algorithm", "entropy", "seed"]
AT = 12_000  # a checkpoint of phase 2 of the 3 x 10^4 iterations


def _tables(seeds: int = 6) -> dict[str, pd.DataFrame]:
    """Kuhn's tables, no run diverged: the summary with its ``diverged_at`` column all null."""
    t = shared.tables({"kuhn": (10_000, seeds)})
    t["summary"] = t["summary"].assign(diverged_at=pd.array([pd.NA] * len(t["summary"]),
                                                             dtype="Int64"))
    return t


def diverge(t: dict, runs) -> dict:
    """``t`` with each of ``runs`` ((algorithm, entropy, seed, iteration)) diverged at the
    iteration's first checkpoint, as the engine records it."""
    t = {k: v.copy() for k, v in t.items()}
    for algorithm, entropy, seed, iteration in runs:
        for name in ("nashconv", "diagnostics"):
            f = t[name]
            lost = ((f.algorithm == algorithm) & (f.entropy == entropy) & (f.seed == seed)
                    & (f.iteration >= iteration))
            f.loc[lost, [c for c in MEASURED if c in f]] = np.nan
        s = t["summary"]
        run = (s.algorithm == algorithm) & (s.entropy == entropy) & (s.seed == seed)
        s.loc[run, ["final_nash_conv", "average_nash_conv"]] = np.nan
        s.loc[run, "diverged_at"] = iteration
    broken = t["nashconv"][t["nashconv"].nash_conv.isna()]
    keys = ["game", "algorithm", "entropy", "iteration", "phase"]
    hit = t["ci"].set_index(keys).index.isin(broken.set_index(keys).index)
    t["ci"].loc[hit, ["mean", "ci_low", "ci_high"]] = np.nan
    return t


def _make(t, name="fig6", **cfg):
    with float64():
        return fig6.make(t, {**CFG, **cfg}, name, scale="small")


def _claim(claims, words):
    found = [c for c in claims if words in c.claim]
    assert len(found) == 1, [c.claim for c in claims]
    return found[0]


def _rows(claims):
    return [(c.claim, c.measured, c.criterion, c.verdict, repr(c.value), repr(c.checks))
            for c in claims]


def _png(fig) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def test_the_tables_follow_the_contract():
    """The diverged tables as the engine writes them: the run's rows kept, NaN from the
    checkpoint on; its level's mean NaN there and only there."""
    before, after = _tables(), diverge(_tables(), [(NEURD, 0.1, 1, AT)])
    assert len(after["nashconv"]) == len(before["nashconv"])
    run = after["nashconv"][(after["nashconv"].algorithm == NEURD)
                            & (after["nashconv"].entropy == 0.1) & (after["nashconv"].seed == 1)]
    assert run[run.iteration < AT].nash_conv.notna().all()
    assert run[run.iteration >= AT].nash_conv.isna().all() and (run.iteration >= AT).any()
    level = after["ci"][(after["ci"].algorithm == NEURD) & (after["ci"].entropy == 0.1)]
    assert level["mean"].isna().sum() == (run.iteration >= AT).sum()
    assert after["ci"]["mean"].isna().sum() == level["mean"].isna().sum()
    assert after["summary"].diverged_at.dtype == "Int64"
    assert after["summary"].diverged_at.notna().sum() == 1


def test_a_level_with_a_diverged_run_is_not_an_algorithms_best():
    """NeuRD's best level (0.1) has a seed diverged: the mean over its other seeds would
    still pick it, but its mean is undefined, so 0.0 is NeuRD's best; SPG's is unchanged."""
    t = _tables()
    assert fig6.best_entropies(t["summary"], "kuhn") == {NEURD: 0.1, SPG: 0.1}
    summary = diverge(t, [(NEURD, 0.1, 1, AT)])["summary"]
    skipping = summary.groupby(["algorithm", "entropy"]).final_nash_conv.mean()
    assert skipping.loc[NEURD].idxmin() == 0.1  # the mean over the seeds that did not diverge
    assert fig6.best_entropies(summary, "kuhn") == {NEURD: 0.0, SPG: 0.1}
    every = diverge(t, [(NEURD, 0.0, 2, AT), (NEURD, 0.1, 1, AT)])["summary"]
    assert fig6.best_entropies(every, "kuhn") == {SPG: 0.1}


def test_the_figure_leaves_the_diverged_run_out_and_says_so(tmp_path):
    t = diverge(_tables(), [(NEURD, 0.1, 1, AT)])
    fig, _ = _make(t)
    top, box = fig.axes[0], fig.axes[1]
    assert box.get_xlabel() == "1 run diverged (left out): 1 NeuRD"
    assert top.get_title().endswith("CI\npassed over (a run diverged): NeuRD $\\alpha$ 0.1")
    labels = [line.get_label() for line in top.lines]
    assert "NeuRD ($\\alpha$ = 0.1)" not in labels and "NeuRD ($\\alpha$ = 0)" in labels
    dots = np.concatenate([c.get_offsets() for c in box.collections
                           if isinstance(c, PathCollection)])
    assert len(dots) == 2 * 2 * 6 - 1 and np.isfinite(dots).all()
    fig.savefig(tmp_path / "fig6.png")
    plt.close(fig)
    assert (tmp_path / "fig6.png").stat().st_size > 10_000
    fig, _ = _make(_tables())
    assert fig.axes[1].get_xlabel() == "" and "diverged" not in fig.axes[0].get_title()
    plt.close(fig)


def test_an_algorithm_without_a_best_level_is_drawn_without_it_and_unmeasured():
    """A NeuRD run diverged at every level: NeuRD has no best level, the top panel draws SPG
    alone and says so, and the claims at the best levels are unmeasured, saying why."""
    t = diverge(_tables(), [(NEURD, 0.0, 2, AT), (NEURD, 0.1, 1, AT)])
    fig, claims = _make(t)
    top = fig.axes[0]
    assert " ".join(top.get_title().split()).endswith(
        "passed over (a run diverged): NeuRD $\\alpha$ 0, 0.1 (all: no best)")
    assert not [line for line in top.lines if line.get_label().startswith("NeuRD")]
    assert fig.axes[1].get_xlabel() == "2 runs diverged (left out): 2 NeuRD"
    _png(fig)
    for words in ("converges faster", "lowest final NashConv"):
        claim = _claim(claims, words)
        assert claim.verdict == "unmeasured", claim.measured
        assert "unmeasured: no best level for NeuRD (a run diverged at every level)" \
            in claim.measured
    grid = _claim(claims, "entropy grid brackets")
    assert "NeuRD none (a run diverged at every level)" in grid.measured
    assert grid.verdict in VERDICTS and np.isnan(grid.value)


def test_the_new_claim_fails_naming_the_runs_and_passes_without_one():
    clean = _claim(_make(_tables())[1], "without diverging")
    assert clean.verdict == "pass" and clean.value == 0
    assert clean.measured.endswith("none of the 24 runs diverged")
    one = _claim(_make(diverge(_tables(), [(NEURD, 0.1, 1, AT)]), neurd_logits="raw")[1],
                 "without diverging")
    assert one.verdict == "fail" and one.value == 1
    assert ("1 of 24 runs diverged (NashConv not finite from there on, left out of the other "
            "rows): NeuRD alpha 0.1 seed 1 at iteration 12000 (NeuRD's loss on the network's "
            "raw outputs (neural.neurd_logits raw), whose common mode nothing bounds "
            "(docs/readings.md))") in one.measured
    runs = [(a, 0.0, s, at) for a in (NEURD, SPG)
            for s, at in enumerate((12_000, 12_800, 14_000))]  # checkpoints
    many = _claim(_make(diverge(_tables(), runs))[1], "without diverging")
    assert many.verdict == "fail" and many.value == 6
    assert ("6 of 24 runs diverged" in many.measured and
            "NeuRD alpha 0 seed 0 at iteration 12000; NeuRD alpha 0 seed 1 at iteration 12800; "
            "NeuRD alpha 0 seed 2 at iteration 14000; and 3 more" in many.measured)


def test_a_run_of_the_exact_critic_that_diverged_is_counted_and_named():
    """The exact critic's runs beside the learned ones (Kuhn's) count among a game's runs:
    one that diverged fails the claim, named with its critic, and its pair is left out of
    the exact critic's claim."""
    t = _tables()
    t["diagnostics"] = pd.concat([t["diagnostics"], t["diagnostics"].assign(critic="exact")],
                                 ignore_index=True)
    clean = _claim(_make(t)[1], "without diverging")
    assert clean.verdict == "pass" and clean.measured.endswith("none of the 48 runs diverged")
    d = t["diagnostics"]
    lost = ((d.critic == "exact") & (d.algorithm == NEURD) & (d.entropy == 0.1) & (d.seed == 1)
            & (d.iteration >= AT))
    d.loc[lost, "nash_conv"] = np.nan
    claims = _make(t)[1]
    one = _claim(claims, "without diverging")
    assert one.verdict == "fail" and one.value == 1
    assert ("1 of 48 runs diverged (NashConv not finite from there on, left out of the other "
            "rows): NeuRD alpha 0.1 seed 1 (exact critic) at iteration 12000") in one.measured
    assert "left out: 1 of the 12 (entropy, seed) pairs" in _claim(claims, "exact q").measured
    runs = results.every_diverged_run(t["summary"], t["diagnostics"], "kuhn")
    assert runs[["critic", "algorithm", "seed", "diverged_at"]].values.tolist() == [
        ["exact", NEURD, 1, AT]]


def test_no_run_diverged_is_as_before_with_or_without_the_column():
    """A summary with ``diverged_at`` all null, and one from before the column, give the
    same figure and the same claims; every claim but the new one as test_figures_fig6's."""
    t = _tables()
    older = {**t, "summary": t["summary"].drop(columns="diverged_at")}
    fig, claims = _make(t, "fig6_paper")
    fig_older, claims_older = _make(older, "fig6_paper")
    assert _png(fig) == _png(fig_older)
    assert _rows(claims) == _rows(claims_older)
    assert [c.claim.removeprefix("kuhn: ") for c in claims] == [
        "NeuRD converges faster after each negation",
        "NeuRD ends with the lowest final NashConv",
        "NeuRD's average NashConv over all iterations is lower",
        "NeuRD is less sensitive to the entropy level",
        "the entropy grid brackets each algorithm's best level",
        "every run finishes without diverging"]
    assert not [c for c in claims[:-1] if "diverged" in c.measured]


def test_the_paired_claims_drop_the_diverged_runs_pairs():
    """The average NashConv pairs (entropy, seed): the diverged run's pair is left out (11
    of 12 judged) and the row says so; the difference is the other 11 pairs' mean."""
    t = diverge(_tables(), [(NEURD, 0.1, 1, AT)])
    claims = _make(t)[1]
    average = _claim(claims, "average NashConv")
    assert "NeuRD lower in" in average.measured and "of 11 (entropy, seed) pairs; left out: " \
        "1 of the 12 (entropy, seed) pairs, where a run diverged" in average.measured
    s = t["summary"].set_index(["entropy", "seed", "algorithm"]).average_nash_conv.unstack()
    kept = s.drop(index=(0.1, 1))
    assert average.value == pytest.approx(float(np.mean(kept[NEURD] - kept[SPG])), abs=1e-12)
    assert not np.isnan(average.value) and average.verdict in VERDICTS
    clean = _claim(_make(_tables())[1], "average NashConv")
    assert "of 12 (entropy, seed) pairs" in clean.measured and "left out" not in clean.measured
    assert "the means leave out 1 diverged run" in _claim(claims, "less sensitive").measured
    # the exact critic's runs (in the diagnostics alone): its diverged run's pair dropped
    exact = t["diagnostics"][t["diagnostics"].seed != 1].assign(critic="exact")
    exact.loc[(exact.algorithm == SPG) & (exact.entropy == 0.0) & (exact.seed == 4)
              & (exact.iteration >= AT), "nash_conv"] = np.nan
    t["diagnostics"] = pd.concat([t["diagnostics"], exact], ignore_index=True)
    critic = _claim(_make(t)[1], "exact q")
    assert critic.measured.endswith("of 9 (entropy, seed) pairs; left out: 1 of the 10 "
                                    "(entropy, seed) pairs, where a run diverged")
    # seeds: a pair with a diverged side (NaN) is dropped, and the text counts them
    neurd = pd.Series([0.1, np.nan, 0.3, 0.2, 0.5, 0.4], index=range(6))
    spg = pd.Series([0.2, 0.4, 0.5, np.nan, 0.6, 0.7], index=range(6))
    with float64():
        text, check, mean = paired(neurd, spg, CFG, "difference", "seeds")
    assert text.endswith("NeuRD lower in 4 of 4 seeds; left out: 2 of the 6 seeds, where a "
                         "run diverged")
    assert mean == pytest.approx(-0.175, abs=1e-12)  # seeds 0, 2, 4 and 5
    assert check.outcome == "unmeasured"  # 4 pairs: too few for an interval


def test_the_grid_margin_leaves_out_the_levels_with_a_diverged_run():
    """NeuRD: ends 1.0 and 0.9, inside 0.5 and 0.7; a level with a diverged run has no
    mean: an end's leaves the other end, the inside's leaves the other inside level."""
    means = {0.0: 1.0, 0.1: 0.5, 0.3: 0.7, 1.0: 0.9}
    summary = pd.DataFrame([("g", NEURD, e, s, m, m, pd.NA) for e, m in means.items()
                            for s in (0, 1)], columns=[*RUN, "final_nash_conv",
                                                       "average_nash_conv", "diverged_at"])
    summary["diverged_at"] = summary.diverged_at.astype("Int64")

    def lost(*levels):
        out = summary.copy()
        hit = out.entropy.isin(levels) & (out.seed == 1)
        out.loc[hit, ["final_nash_conv", "average_nash_conv"]] = np.nan
        out.loc[hit, "diverged_at"] = AT
        return grid_margin(out, "g", NEURD)

    assert lost() == pytest.approx(0.4, abs=1e-12)
    assert lost(1.0) == pytest.approx(0.5, abs=1e-12)  # the end 1.0 left out: 1.0 - 0.5
    assert lost(0.1) == pytest.approx(0.2, abs=1e-12)  # inside 0.7 left: 0.9 - 0.7
    assert np.isnan(lost(0.1, 0.3)) and np.isnan(lost(0.0, 1.0))


def test_a_curve_that_goes_nan_is_drawn_up_to_it():
    """A best-level curve whose mean turns NaN (from a summary that does not say the run
    diverged) is drawn up to there and stops: no error in the limits, bands or legend."""
    t = diverge(_tables(), [(SPG, 0.1, 1, AT)])
    t["summary"] = _tables()["summary"].drop(columns="diverged_at")
    fig, _ = _make(t)
    line = next(line for line in fig.axes[0].lines if line.get_label().startswith("SPG"))
    x, y = line.get_xdata(), line.get_ydata()
    assert np.isfinite(y[x < AT]).all() and np.isnan(y[x >= AT]).all()
    assert np.isfinite(fig.axes[0].get_ylim()).all()
    _png(fig)


def test_the_findings_page_says_which_runs_diverged(monkeypatch):
    """The published section names the diverged run per game and before the claims; with
    none diverged it is word for word the same with or without the column."""
    def section(t):
        tables = {**t, "nashconv_ci": t["ci"]}
        monkeypatch.setattr(published_findings, "check_content", lambda *args, **kwargs: None)
        monkeypatch.setattr(published_findings, "fig6_tables", lambda *args: tables)
        with float64():
            return " ".join(published_findings.findings(shared.SMOKE).split())

    t = _tables(seeds=2)
    clean = section(t)
    assert clean == section({**t, "summary": t["summary"].drop(columns="diverged_at")})
    assert "GPU minutes)" in clean and "run diverged" not in clean.split("|")[0]
    text = section(diverge(t, [(SPG, 0.0, 0, AT)]))
    assert "Kuhn poker 2 of 2 (" in text and "GPU minutes; 1 run diverged)" in text
    assert ("; 1 run diverged (NashConv not finite from a checkpoint on): the other claims "
            "are judged without them") in text
    row = next(r for r in text.split("| kuhn: ")[1:] if r.startswith("every run finishes"))
    assert "| fail |" in row and "SPG alpha 0 seed 0 at iteration 12000" in row


def test_the_claim_names_the_cause_the_tables_show():
    """Runs of NeuRD's raw reading that diverged are named with it; where the tables have the
    growth columns, with the common mode and the largest centred logit their median run had
    at its last checkpoint before; a centred reading's are not said to be raw."""
    t = diverge(_tables(), [(NEURD, 0.1, 1, AT), (NEURD, 0.1, 2, AT)])
    d = t["diagnostics"]
    d["common_mode"] = np.where(d.iteration < AT, 10.0 ** (d.iteration / AT * 3), np.nan)
    d["centred_logit"] = np.where(d.iteration < AT, 1.5, np.nan)
    claim = _claim(_make(t, neurd_logits="raw")[1], "without diverging")
    before = d[(d.iteration < AT)].iteration.max()
    assert "neural.neurd_logits raw" in claim.measured
    assert (f"before diverging, the median run's logits had a common mode of "
            f"{fmt(10.0 ** (before / AT * 3))} and a largest centred logit of 1.5"
            in claim.measured), claim.measured
    assert CFG["neurd_logits"] == "centred"  # the smoke publication's: the default
    centred = _claim(_make(t)[1], "without diverging")
    assert "neurd_logits raw" not in centred.measured and "common mode of" in centred.measured
