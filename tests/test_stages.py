"""The stage registry: every stage is found by one loop and declares what the workflow needs."""

import importlib
import inspect
from pathlib import Path

import pytest
import yaml

from neurd import stages
from neurd.config import ConfigError
from neurd.publication import published_games

ROOT = Path(__file__).resolve().parents[1]


def _default_config() -> dict:
    config = yaml.safe_load((ROOT / "workflow/config/default.yaml").read_text())
    stages.validate(config, ROOT / "workflow/schemas")
    return config


def test_every_stage_has_its_schema_and_rules():
    assert set(stages.SECTIONS) == {"matrix", "neural", "published", "readings", "rps",
                                    "tabular", "zoo"}
    snakefile = (ROOT / "Snakefile").read_text()
    for section in stages.SECTIONS:
        schema = yaml.safe_load((ROOT / f"workflow/schemas/{section}.schema.yaml").read_text())
        assert list(schema["properties"]) == [section]
        assert f'include: "workflow/rules/{section}.smk"' in snakefile


def test_figures_come_from_the_stages_with_their_inputs():
    config = _default_config()
    config["published"]["folder"] = None  # the publication's figure: below
    jobs = stages.figures(config)
    assert [job.name for job in jobs] == [
        "fig1", "fig2", "fig6", "fig3", "fig4a", "fig5", "fig4b_kuhn", "fig4b",
        "fig4b_goofspiel"]
    by_name = {job.name: job for job in jobs}
    assert by_name["fig4b_kuhn"].inputs == {"nashconv": "results/tabular/kuhn/nashconv.parquet"}
    assert by_name["fig3"].section == "rps"
    for job in jobs:
        module = importlib.import_module(f"neurd.figures.{job.module}")
        assert list(inspect.signature(module.make).parameters) == ["tables", "cfg", "name",
                                                                  "scale"]
        assert (ROOT / f"workflow/report/{job.module}.rst").exists()
        assert all(path.startswith(f"results/{job.section}/") for path in job.inputs.values())


def test_a_publication_with_a_block_adds_its_fig6_after_the_scales_own(tmp_path):
    config = _default_config()
    folder = ROOT / config["published"]["folder"]
    names = [job.name for job in stages.figures(config)]
    published = published_games(folder)
    assert ("fig6_paper" in names) == bool(published)
    if published:
        assert names.index("fig6_paper") == names.index("fig6") + 1
    config["published"]["folder"] = str(tmp_path / "paper")
    (tmp_path / "paper").mkdir()
    assert "fig6_paper" not in [job.name for job in stages.figures(config)]


def test_a_scale_other_than_the_default_reads_its_own_folder():
    config = _default_config()
    assert stages.results_root(config) == "results"
    config["scale"] = "laptop"
    assert stages.results_root(config) == "results/laptop"
    for job in stages.figures(config):
        assert all(path.startswith("results/laptop/") for path in job.inputs.values())


def test_unknown_section_is_named():
    with pytest.raises(ConfigError, match="'neural_typo' was unexpected"):
        stages.check({"seed": 0, "neural_typo": {}})


def test_make_clean_results_removes_exactly_the_default_layout():
    """The Makefile's list for the default scale is the registry's layout (less README.md)."""
    import re

    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("clean-results:"):]
    removed = set(re.findall(r"results/([\w.]+)", recipe[: recipe.index("else")]))
    assert removed == {*stages.SECTIONS, *stages.RESULT_ENTRIES} - {"README.md"}
