"""What `make figures` says first (neurd.expected_time): the time it expects here, a reference
run's time scaled by the probe's ratio, part by part; the reference of this instruction set
first; nothing promised where no run of the config was timed whole."""

import json

import pytest

from neurd import expected_time

REFERENCE = {"config": "default.yaml", "processor": "CPU A", "isa": "AVX512",
             "snakemake_seconds": 600.0, "neural_share": 0.5,
             "probe": {"neural": 10.0, "tabular": 2.0}}


def test_a_probe_twice_as_slow_expects_twice_the_time():
    assert expected_time.estimate({"neural": 10.0, "tabular": 2.0}, REFERENCE) == 600.0
    assert expected_time.estimate({"neural": 20.0, "tabular": 4.0}, REFERENCE) == 1200.0
    # the neural half scaled alone
    assert expected_time.estimate({"neural": 20.0, "tabular": 2.0}, REFERENCE) == 900.0


def test_the_reference_of_this_instruction_set_comes_first():
    other = dict(REFERENCE, processor="CPU B", isa="AVX2", snakemake_seconds=1800.0)
    here = {"neural": 10.0, "tabular": 2.0}
    said = expected_time.expectation(here, [REFERENCE, other], "AVX2")
    assert "about 30 min" in said and "CPU B, AVX2" in said and "CPU A" not in said
    both = expected_time.expectation(here, [REFERENCE, other], "SSE4_2")
    assert "10 min to 30 min" in both
    none = expected_time.expectation(here, [], "AVX2")
    assert "no time is expected" in none


def test_references_are_those_of_the_config(tmp_path):
    path = tmp_path / "figures_time.json"
    smoke = dict(REFERENCE, config="smoke.yaml")
    path.write_text(json.dumps({"runs": [REFERENCE, smoke]}))
    assert expected_time.references(path, "workflow/config/default.yaml") == [REFERENCE]
    assert expected_time.references(tmp_path / "absent.json", "default.yaml") == []


@pytest.mark.parametrize("name", ["default.yaml", "smoke.yaml", "paper.yaml"])
def test_the_repository_references_are_well_formed(name):
    """bench/figures_time.json's runs each name the processor, its instruction set, the time
    and the probe; the README's times come from them."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "bench/figures_time.json"
    for run in expected_time.references(path, name):
        assert run["processor"] and run["isa"] and run["snakemake_seconds"] > 0
        assert 0 <= run["neural_share"] <= 1
        assert run["probe"]["neural"] > 0 and run["probe"]["tabular"] > 0
