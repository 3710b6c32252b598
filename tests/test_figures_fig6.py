"""Fig 6 says what it was measured at, from its tables alone, and its verdicts follow the
printed criterion.

A publication may hold the paper's full length with only some of a game's 40 seeds: its rows
and figure must say "paper length, k of 40 seeds", and nothing is "paper scale" unless every
game has all 40 seeds at the paper's length.  The tables here are small synthetic ones: the
tracked smoke publication's Kuhn tables, stretched to the paper's phase length and given as
many seeds as a case needs (no long run behind them).
"""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neurd import stats
from neurd.audit import VERDICTS
from neurd.config import load_snapshot
from neurd.figures import fig6, style
from neurd.names import NEURD, SPG
from neurd.neural.results import NASHCONV_COLUMNS
from neurd.precision import float64

ROOT = Path(__file__).resolve().parents[1]
SMOKE = ROOT / "published/smoke"
PAPER = fig6.PAPER_PHASE_ITERATIONS


def _source() -> pd.DataFrame:
    """The smoke publication's Kuhn NashConv curves of the learned critic, all its blocks."""
    blocks = sorted((SMOKE / "neural/kuhn/blocks").glob("learned_s*/curves.parquet"))
    assert blocks, "the smoke publication has no learned-critic Kuhn blocks"
    curves = pd.concat([pd.read_parquet(path) for path in blocks], ignore_index=True)
    return curves[list(NASHCONV_COLUMNS)]


def tables(games: dict[str, tuple[int, int]]) -> dict[str, pd.DataFrame]:
    """Fig 6's four tables for ``games``: name -> (phase length, seeds).  Seed ``s`` of a game
    is the smoke run's seed ``s % 2`` shifted by ``0.001 s``; the iterations are stretched to
    the phase length; the CI table's band is the seeds' range (the uniform policy's NashConv
    as the smoke run's)."""
    source = _source()
    uniform = pd.read_parquet(SMOKE / "neural/kuhn/nashconv_ci.parquet").groupby(
        "phase").uniform_nash_conv.first()
    length = int(source[source.phase == 1].iteration.max())
    frames = []
    for game, (phase_length, seeds) in games.items():
        for seed in range(seeds):
            rows = source[source.seed == seed % 2].copy()
            rows["game"], rows["seed"] = game, seed
            rows["iteration"] = rows.iteration * phase_length // length
            rows["nash_conv"] = rows.nash_conv + 0.001 * seed
            frames.append(rows)
    nashconv = pd.concat(frames, ignore_index=True)
    keys = ["game", "algorithm", "entropy", "iteration", "phase"]
    ci = nashconv.groupby(keys).nash_conv.agg(["mean", "min", "max"]).reset_index().rename(
        columns={"min": "ci_low", "max": "ci_high"})
    ci["uniform_nash_conv"] = ci.phase.map(uniform)
    runs = nashconv.sort_values(["iteration", "phase"]).groupby(
        ["game", "algorithm", "entropy", "seed"]).nash_conv
    summary = pd.DataFrame({"final_nash_conv": runs.apply(lambda v: v.iloc[-2:].mean()),
                            "average_nash_conv": runs.mean()}).reset_index()
    diagnostics = nashconv.assign(critic="learned", critic_rmse=np.nan)
    return {"nashconv": nashconv, "ci": ci, "summary": summary, "diagnostics": diagnostics}


def _make(games, name="fig6_paper", scale="paper"):
    cfg = load_snapshot(SMOKE / "config/neural.json")
    with float64():
        fig, claims = fig6.make(tables(games), cfg, name, scale=scale)
    texts = [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text"))]
    note = next(t.get_text() for t in fig.texts if t.get_gid() == style.SCALE_GID)
    import matplotlib.pyplot as plt

    plt.close(fig)
    return claims, note, texts


def test_paper_length_with_some_seeds_says_so_and_is_not_paper_scale():
    claims, note, texts = _make({"kuhn": (PAPER, 40), "leduc": (PAPER, 12)})
    kuhn = [c for c in claims if c.claim.startswith("kuhn:")]
    leduc = [c for c in claims if c.claim.startswith("leduc:")]
    assert kuhn and leduc
    assert all(c.measured.startswith("[paper length, 40 of 40 seeds: judged on these 40 "
                                     "seeds] ") for c in kuhn)
    assert all(c.measured.startswith("[paper length, 12 of 40 seeds: judged on these 12 "
                                     "seeds] ") for c in leduc)
    # the paired intervals are the seeds present: 12 for Leduc's final NashConv
    final = next(c for c in leduc if "final NashConv" in c.claim)
    assert "NeuRD lower in" in final.measured and "of 12 seeds" in final.measured
    assert "Kuhn poker: paper length, 40 of 40 seeds" in note
    assert "Leduc poker: paper length, 12 of 40 seeds" in note
    assert not any("paper scale" in t for t in [note, *texts, *(c.measured for c in claims)])
    assert any("fig6_paper: Fig 6 from the published run published/paper" in t for t in texts)


def test_only_every_game_with_all_its_seeds_at_the_paper_length_is_paper_scale():
    claims, note, _ = _make({"kuhn": (PAPER, 40), "leduc": (PAPER, 40)})
    assert all(c.measured.startswith("[paper scale: 330000 iterations per phase, 40 seeds] ")
               for c in claims)
    assert note.count("paper scale") == 2
    # one game short of the paper's length: the other is no longer "paper scale"
    claims, note, _ = _make({"kuhn": (PAPER, 40), "leduc": (4000, 40)})
    assert "Kuhn poker: paper length, 40 of 40 seeds" in note
    assert ("Leduc poker: published/paper: 4000 of 0.33e6 iterations per phase, 40 of 40 "
            "seeds, provisional") in note


def test_the_default_scale_keeps_saying_what_it_is():
    claims, note, _ = _make({"kuhn": (10_000, 5)}, name="fig6", scale="default")
    label = "default scale: 10^4 of 0.33e6 iterations per phase, 5 of 40 seeds, provisional"
    assert all(c.measured.startswith(f"[{label}] ") for c in claims)
    assert note == f"Kuhn poker: {label}"
    assert {c.verdict for c in claims} <= set(VERDICTS)


def _reach(times: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Runs that sit at 1.0 until ``times[algorithm][seed][phase - 1]`` iterations into a
    phase of 100 (None: never), then at 0.2; uniform NashConv 1."""
    rows = [("g", a, 0.0, seed, (phase - 1) * 100 + offset, phase,
             0.2 if t is not None and offset >= t else 1.0)
            for a, seeds in times.items() for seed, phases in enumerate(seeds)
            for phase, t in enumerate(phases, start=1) for offset in range(0, 101, 10)]
    nashconv = pd.DataFrame(rows, columns=["game", "algorithm", "entropy", "seed", "iteration",
                                           "phase", "nash_conv"])
    return nashconv, pd.DataFrame({"game": "g", "phase": [1, 2, 3], "uniform_nash_conv": 1.0})


@pytest.mark.parametrize("neurd, spg, verdict", [
    ([0, 10, 20], [0, 30, 40], "pass"),
    ([0, 10, 40], [0, 30, 40], "tie"),  # equal medians in phase 3: no tie-break by seeds
    ([0, 50, 20], [0, 30, 40], "fail"),
    ([0, None, None], [0, None, None], "unmeasured"),  # neither reaches the level
    ([0, 10, None], [0, 30, None], "unmeasured"),
    ([0, 40, None], [0, 30, None], "fail"),  # a fail decides before nothing to measure
    ([0, 10, 20], [0, None, None], "pass"),  # SPG never: NeuRD's finite time is below
])
def test_converges_faster_is_judged_by_the_printed_rule(neurd, spg, verdict):
    nashconv, ci = _reach({NEURD: [neurd] * 3, SPG: [spg] * 3})
    claim = fig6.faster_claim("g", nashconv, ci, {NEURD: 0.0, SPG: 0.0},
                               {"audit_fraction": 0.5}, "")
    assert claim.verdict == verdict
    assert "equal medians: tie" in claim.criterion and "unmeasured" in claim.criterion
    assert [c.statistic.split(":")[0] for c in claim.checks] == ["phase 2", "phase 3"]


def _claim(claims, words: str):
    return next(c for c in claims if words in c.claim)


@pytest.mark.parametrize("seeds", [2, 4])
def test_too_few_pairs_for_an_interval_are_unmeasured_with_the_reason(seeds):
    """Below 5 seeds the final NashConv has no confidence interval to judge "ends lowest"
    by: unmeasured, the row saying so, never pass or fail from a bootstrap of 2 to 4."""
    claims, _, _ = _make({"kuhn": (10_000, seeds)}, name="fig6", scale="small")
    final = _claim(claims, "lowest final NashConv")
    assert final.verdict == "unmeasured", final.measured
    assert (f"unmeasured: {seeds} pairs are too few for a confidence interval (< "
            f"{stats.MIN_CI_SAMPLES})") in final.measured
    assert "not a confidence interval" not in final.measured
    assert all(np.isnan(x) for x in final.checks[0].observed)
    assert "unmeasured" in final.criterion
    # the average NashConv pairs (entropy, seed): 2 levels x 2 seeds = 4 pairs, too few;
    # 2 levels x 4 seeds = 8, judged
    average = _claim(claims, "average NashConv")
    assert (average.verdict == "unmeasured") == (2 * seeds < stats.MIN_CI_SAMPLES)


def test_five_pairs_are_judged_by_their_interval():
    claims, _, _ = _make({"kuhn": (10_000, 5)}, name="fig6", scale="small")
    final = _claim(claims, "lowest final NashConv")
    assert final.verdict != "unmeasured" and "95% CI [" in final.measured


def test_a_grid_with_no_inside_level_is_unmeasured_with_the_reason():
    """The smoke tables have 2 entropy levels: no best level can lie strictly inside, so
    the claim has nothing to measure (not a fail a 2-level grid could never pass)."""
    claims, _, _ = _make({"kuhn": (10_000, 5)}, name="fig6", scale="small")
    grid = _claim(claims, "entropy grid brackets")
    assert grid.verdict == "unmeasured"
    assert "unmeasured: a grid of 2 levels has no level inside it" in grid.measured
    tables3 = tables({"kuhn": (10_000, 5)})
    summary = tables3["summary"]
    three = pd.concat([summary, summary[summary.entropy == summary.entropy.max()].assign(
        entropy=5.0, final_nash_conv=lambda f: f.final_nash_conv + 1)], ignore_index=True)
    claim = fig6.grid_claim("kuhn", three, fig6.best_entropies(three, "kuhn"), "")
    assert claim.verdict in ("pass", "fail") and "unmeasured" not in claim.measured


def test_a_game_the_paper_did_not_run_says_its_own_sizes():
    """A user's game is measured against nothing of the paper's: the footer and the rows
    say its own length and seeds, with no fraction of 0.33e6 or of 40 seeds."""
    claims, note, texts = _make({"liars": (100, 2)}, name="fig6", scale="liars")
    label = "liars scale: 100 iterations per phase, 2 seeds (a game the paper did not run)"
    assert note == f"liars: {label}"
    assert all(c.measured.startswith(f"[{label}] ") for c in claims)
    assert not any("0.33e6" in t or "of 40" in t for t in [note, *texts])
    # beside a paper game, each says its own
    _, note, _ = _make({"kuhn": (10_000, 5), "liars": (100, 2)}, name="fig6", scale="x")
    assert "Kuhn poker: x scale: 10^4 of 0.33e6 iterations per phase, 5 of 40 seeds" in note
    assert "liars: x scale: 100 iterations per phase, 2 seeds (a game" in note
