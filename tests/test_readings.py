"""The readings study's config: every reading a neural section, validated as one."""

import copy
from pathlib import Path

import pytest
import yaml

from neurd.config import ConfigError
from neurd.pipeline.neural import jobs, main_critic
from neurd.pipeline.readings import DEFAULT_READING, variant_sections
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
    sections = variant_sections(config)
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
    ({"x": {"networks": "triple"}}, "['neural']['networks']"),
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
    if named.startswith("['neural']") or named.startswith("limits"):
        assert "readings.variants.x" in message


def test_a_study_of_its_own_replaces_the_default_variants():
    config = _config({"variants": {"centred": {"neurd_logits": "centred"}}})
    validate(config, SCHEMAS)
    assert set(variant_sections(copy.deepcopy(config))) == {DEFAULT_READING, "centred"}
