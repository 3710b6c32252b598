"""Each learning setting is declared once, in the neural schema (neurd.neural.settings):
Spec's fields, compare()'s settings and the config checks are derived from it."""

import dataclasses
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

from neurd.comparison import DEFAULTS, neural_section
from neurd.config import load_snapshot
from neurd.neural import settings, train
from neurd.neural.arguments import SPEC_KEYS
from neurd.publication.commands import expected_snapshot
from neurd.tables import config_hash

ROOT = Path(__file__).resolve().parents[1]


def test_spec_is_the_schemas_settings_then_the_run_time_knobs():
    fields = [f.name for f in dataclasses.fields(train.Spec)]
    assert fields == [*settings.spec_keys(), "layout", "unroll"]
    assert SPEC_KEYS == settings.spec_keys()
    spec = train.Spec()
    for field, key in settings.spec_keys().items():
        assert getattr(spec, field) == settings.value(key, settings.default(key)), field
    assert set(DEFAULTS) == {k for k in settings.spec_keys().values() if k != "critic"} | set(
        settings.TABLE_SETTINGS)


def test_the_losses_keyword_defaults_are_the_schemas():
    """NeuRD's loss, called without a config, reads its logits as the config's default does
    (neural.neurd_logits) and thresholds them at its default beta: one default, not two."""
    import inspect

    from neurd.neural import losses

    for function in (losses.neurd_loss, losses.common_mode_gradient):
        keywords = inspect.signature(function).parameters
        assert keywords["centre"].default == losses.CENTRINGS[
            settings.default("neurd_logits")], function.__name__
    assert inspect.signature(losses.neurd_loss).parameters["beta"].default == (
        settings.default("beta"))

ADDED = """      my_knob:
        x-spec: my_knob
        type: number
        minimum: 0
        maximum: 10
        description: A setting added in one place, by a test.
        default: 0.5
"""
PROBE = """
import sys
from neurd.comparison import DEFAULTS, compare
from neurd.config import ConfigError
from neurd.neural import runs, train
assert train.Spec().my_knob == 0.5, train.Spec()
assert DEFAULTS["my_knob"] == 0.5
result = compare("kuhn_poker", name="kuhn", iterations=8, phases=1, seeds=2, entropies=[0.0],
                 checkpoints=3, geometric=1, my_knob=0.25)
assert result.config["my_knob"] == 0.25
assert runs.spec(result.config, "learned").my_knob == 0.25
try:
    compare("kuhn_poker", name="kuhn", iterations=8, my_knob=-1)
except ConfigError as error:
    print("refused:", error)
print("ok")
"""


def test_a_setting_added_to_the_schema_alone_is_taken_everywhere(tmp_path):
    tree = tmp_path / "tree"
    shutil.copytree(ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "workflow", tree / "workflow")
    path = tree / "workflow/schemas/neural.schema.yaml"
    text = path.read_text()
    anchor = "      critic_batch:\n"
    path.write_text(text.replace(anchor, ADDED + anchor, 1))
    assert yaml.safe_load(path.read_text())["properties"]["neural"]["properties"]["my_knob"]
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                           env=env, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr[-2000:]
    assert "refused: compare: argument my_knob: config key 'neural.my_knob'" in probe.stdout
    assert "ok" in probe.stdout
    for given, code in (("0.25", 0), ("-1", 1)):
        config = tmp_path / f"mine{code}.yaml"
        config.write_text(f"scale: mine\npublished: {{folder: null}}\n"
                          f"neural:\n  my_knob: {given}\n")
        checked = subprocess.run([sys.executable, "-m", "neurd.cli", "check-config",
                                  str(config)], capture_output=True, text=True, env=env,
                                 cwd=tree)
        assert (checked.returncode != 0) == bool(code), checked.stderr[-2000:]
        if code:
            assert "neural.my_knob" in checked.stderr + checked.stdout


def test_a_key_written_only_when_given_leaves_every_config_hash_as_it_was():
    """A key added with an x-default (no schema default) is absent from a config that does
    not give it: the smoke publication's snapshot, made before algorithm_options existed, is
    still the smoke config's section, hash for hash, and compare() writes none either."""
    assert "algorithm_options" in settings.optional()
    published = load_snapshot(ROOT / "published/smoke/config/neural.json")
    now = expected_snapshot("workflow/config/smoke.yaml", ROOT)
    assert "algorithm_options" not in now and config_hash(now) == config_hash(published)
    cfg = neural_section("kuhn", 8, 1, 2, [0.0], 0, "learned", 3, 1, {})
    assert "algorithm_options" not in cfg
    given = neural_section("kuhn", 8, 1, 2, [0.0], 0, "learned", 3, 1,
                           {"algorithm_options": {}})
    assert "algorithm_options" not in given
