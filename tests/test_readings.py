"""The readings study's config: every reading a neural section, validated as one."""

import copy
from pathlib import Path

import pytest
import yaml

from neurd.config import ConfigError
from neurd.neural.runs import jobs, main_critic
from neurd.pipeline.readings import DEFAULT_READING, reading_sections
from neurd.stages import validate

ROOT = Path(__file__).resolve().parents[1]
SCHEMAS = ROOT / "workflow/schemas"


def _config(readings=None) -> dict:
    config = yaml.safe_load((ROOT / "workflow/config/default.yaml").read_text())
    if readings is not None:
        config["readings"] = readings
    return config


def test_every_reading_is_the_study_default_with_one_change():
    config = _config()
    validate(config, SCHEMAS)
    sections = reading_sections(config)
    base = sections.pop(DEFAULT_READING)
    assert base["phase_iterations"] == {"kuhn": 4000, "leduc": 2000, "goofspiel": 1000}
    assert base["exact_critic_games"] == [] and base["entropies"] == config["neural"]["entropies"]
    assert len(sections) == 6
    for name, section in sections.items():
        changed = {k for k in section if section[k] != base[k]}
        assert changed == set(config["readings"]["variants"][name]), name
    assert main_critic(sections["exact_critic"]) == "exact"
    assert {c for _, c, _ in jobs(sections["exact_critic"])} == {"exact"}
    assert {c for _, c, _ in jobs(base)} == {"learned"}


@pytest.mark.parametrize("variants, named", [
    ({"x": {"neurd_logit": "centred"}}, "readings.variants.x"),
    ({"x": {"networks": "triple"}}, "neural.networks"),
    ({"x": {"hidden_sizes": [65536, 65536]}}, "limits.max_job_memory_mb"),
    ({"x": {"seeds_per_job": 3}}, "neural.seeds_per_job"),
    ({"default": {"networks": "per_player"}}, "readings.variants.default"),
    ({"x": {}}, "readings.variants.x"),
    ({"x": {"games": ["kuhn"]}}, "readings.variants.x.games"),
])
def test_a_bad_reading_is_refused_naming_it(variants, named):
    config = _config({"variants": variants})
    with pytest.raises(ConfigError) as info:
        validate(config, SCHEMAS, ["mine.yaml"])
    message = str(info.value)
    assert named in message and "mine.yaml" in message, message
    if named.startswith("neural") or named.startswith("limits"):
        assert "readings.variants.x" in message


def test_a_study_of_its_own_replaces_the_default_variants():
    config = _config({"variants": {"raw": {"neurd_logits": "raw"}}})
    validate(config, SCHEMAS)
    assert set(reading_sections(copy.deepcopy(config))) == {DEFAULT_READING, "raw"}


# --- the logged logits (neural.logits_log) -----------------------------------------------------


def test_logits_are_logged_in_the_study_only_and_the_key_is_not_a_setting():
    """Off (absent) in the pipeline's neural section, so its snapshot holds no such key
    (and neural_run no logits output); on in the study's default for seed 0 at its two
    lowest levels, in every reading; in the snapshot, since it changes what a job writes."""
    from neurd.neural import runs
    from neurd.pipeline import neural
    from neurd.stages import snapshot

    for scale in ("default", "smoke"):
        config = _config()
        if scale == "smoke":
            config = _merged(config, yaml.safe_load((ROOT / "workflow/config/smoke.yaml")
                                                    .read_text()))
        validate(config, SCHEMAS)
        assert "logits_log" not in snapshot(config, "neural")
        assert not runs.logits_logged(config["neural"])
        for name, section in reading_sections(config).items():
            assert section["logits_log"] == {"seeds": [0], "entropies": [0.0, 0.01]}, name
            assert runs.plan({**section, "seed": 0}, "kuhn", "learned", 0).logged, name
    assert "logits_log" not in neural.SETTINGS


def _merged(base, top):
    from snakemake.utils import update_config

    update_config(base, top)
    return base


@pytest.mark.parametrize("logits_log, named", [
    ({"seeds": [5], "entropies": [0.0]}, "neural.logits_log.seeds"),
    ({"seeds": [0], "entropies": [0.02]}, "neural.logits_log.entropies"),
    ({"seeds": [0]}, "neural.logits_log"),
    ({"entropies": [0.0]}, "neural.logits_log"),
    ({"seeds": [0], "entropies": [float("nan")]}, "neural.logits_log.entropies[0] = nan"),
    ({"seeds": list(range(17)), "entropies": [0.0]}, "neural.logits_log.seeds"),
    ({"seeds": [0, 0], "entropies": [0.0]}, "neural.logits_log.seeds"),
    ({"seeds": [-1], "entropies": [0.0]}, "neural.logits_log.seeds[0]"),
    ({"seeds": [0], "entropies": [0.0], "games": ["kuhn"]}, "'games' was unexpected"),
])
def test_a_bad_logits_log_is_refused_naming_it(logits_log, named):
    config = _config()
    config["neural"]["logits_log"] = logits_log
    with pytest.raises(ConfigError) as info:
        validate(config, SCHEMAS, ["mine.yaml"])
    assert named in str(info.value) and "mine.yaml" in str(info.value), str(info.value)


def test_a_reading_whose_grid_lacks_a_logged_level_is_refused_naming_it():
    config = _config()
    config["readings"] = {"variants": {"coarse": {"entropies": [0.1, 1.0]}}}
    with pytest.raises(ConfigError) as info:
        validate(config, SCHEMAS)
    assert "readings.variants.coarse" in str(info.value)
    assert "neural.logits_log.entropies" in str(info.value)


def test_the_logit_summary_counts_states_at_the_threshold_and_their_quantiles():
    import numpy as np
    import pandas as pd

    from neurd.pipeline.readings import LOGIT_COLUMNS, logit_summary

    # one run at one checkpoint: 10 states, state k with centred logits (+k/2, -k/2)
    states = np.repeat(np.arange(10), 2)
    frame = pd.DataFrame({"game": "g", "critic": "learned", "algorithm": "neurd",
                          "entropy": 0.0, "seed": 0, "iteration": 4, "phase": 1,
                          "infostate": [f"s{k}" for k in states], "action": np.tile([0, 1], 10),
                          "centred_logit": np.where(np.tile([True, False], 10), 0.5, -0.5)
                          * states})
    out = logit_summary(frame, beta=2.0)
    assert list(out.columns) == [c for c in LOGIT_COLUMNS if c != "reading"] and len(out) == 1
    row = out.iloc[0]
    largest = np.arange(10) / 2  # 0, 0.5, ..., 4.5: states 4..9 at or beyond 2
    assert (row.states, row.at_beta, row.largest) == (10, 0.6, 4.5)
    np.testing.assert_allclose([row.q10, row["median"], row.q90],
                               np.quantile(largest, [0.1, 0.5, 0.9]), rtol=0, atol=0)


# --- the grid's continuous values (Fig 6's "faster" and "grid" claims) --------------------------


def _nashconv(reach: dict) -> "tuple":
    """A NashConv table of 3 phases of 100 iterations, checkpoints every 10: run
    (algorithm, seed) sits at 1.0 until ``reach[algorithm][seed][phase - 1]`` iterations into
    the phase (None: never), then at 0.2; and its CI table (uniform NashConv 1)."""
    import pandas as pd

    rows = []
    for algorithm, seeds in reach.items():
        for seed, times in enumerate(seeds):
            for phase, time in enumerate(times, start=1):
                for offset in range(0, 101, 10):
                    hit = time is not None and offset >= time
                    rows.append(("g", algorithm, 0.0, seed, (phase - 1) * 100 + offset, phase,
                                 0.2 if hit else 1.0))
    nashconv = pd.DataFrame(rows, columns=["game", "algorithm", "entropy", "seed", "iteration",
                                           "phase", "nash_conv"])
    ci = pd.DataFrame({"game": "g", "phase": [1, 2, 3], "uniform_nash_conv": 1.0})
    return nashconv, ci


def test_the_faster_claims_value_is_the_mean_median_gap_over_the_phase_length():
    """NeuRD first after the first negation (10 vs never, counted as 100 iterations) and
    later after the second (50 vs 10): the verdict fails, the value is the mean of
    (10 - 100) / 100 and (50 - 10) / 100, not the count of phases won (1)."""
    from neurd.figures import fig6
    from neurd.names import NEURD, SPG

    nashconv, ci = _nashconv({NEURD: [[0, 10, 50]] * 3, SPG: [[0, None, 10]] * 3})
    cfg = {"audit_fraction": 0.5}
    claim = fig6.faster_claim("g", nashconv, ci, {NEURD: 0.0, SPG: 0.0}, cfg, "")
    assert claim.verdict == "fail" and claim.value == pytest.approx(-0.25, abs=1e-15)
    # medians over seeds: NeuRD (10, 20, 30) -> 20; SPG (never, never, 40) -> never = 100
    nashconv, ci = _nashconv({NEURD: [[0, 10, 0], [0, 20, 0], [0, 30, 0]],
                              SPG: [[0, None, 0], [0, None, 0], [0, 40, 0]]})
    claim = fig6.faster_claim("g", nashconv, ci, {NEURD: 0.0, SPG: 0.0}, cfg, "")
    assert claim.verdict == "tie"  # phase 2 NeuRD first; phase 3: equal medians, a tie
    assert claim.value == pytest.approx(((20 - 100) / 100 + 0) / 2, abs=1e-15)
    assert "inf" in claim.measured  # the text still says "not reached"


def test_the_grid_claims_value_is_the_smallest_margin_of_the_best_level_over_the_ends():
    """NeuRD's best (0.1) beats the better end by 0.4, SPG's best is the end 0 by 0.01 over
    its best inside level: the verdict fails and the value is -0.01, not the count of
    algorithms inside (1); moving SPG's inside level below its end flips both."""
    import pandas as pd

    from neurd.figures import fig6
    from neurd.names import NEURD, SPG
    from neurd.stats import grid_margin

    def summary(spg_inside):
        means = {NEURD: {0.0: 1.0, 0.1: 0.5, 1.0: 0.9}, SPG: {0.0: 0.30, 0.1: spg_inside,
                                                              1.0: 0.6}}
        return pd.DataFrame([("g", a, e, s, m + (0.05 if s else -0.05), 0.0)
                             for a, levels in means.items() for e, m in levels.items()
                             for s in (0, 1)], columns=["game", "algorithm", "entropy", "seed",
                                                        "final_nash_conv", "average_nash_conv"])

    for inside, outcome, value in ((0.31, "fail", -0.01), (0.25, "pass", 0.05)):
        table = summary(inside)
        claim = fig6.grid_claim("g", table, fig6.best_entropies(table, "g"), "")
        assert claim.verdict == outcome and claim.value == pytest.approx(value, abs=1e-12)
    assert grid_margin(summary(0.31), "g", NEURD) == pytest.approx(0.4, abs=1e-12)
