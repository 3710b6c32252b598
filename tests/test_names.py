"""One vocabulary: the schema's enums, the rules' wildcards and the figure style agree with
:mod:`neurd.names`, and no module spells a name out instead of taking it from there."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from neurd import names
from neurd.figures import style

ROOT = Path(__file__).resolve().parents[1]
SPELLED = {*names.ALGORITHMS, names.RM, *(g.string for g in names.GAMES.values()),
           *(g.title for g in names.GAMES.values())}


def _schema(section: str) -> dict:
    text = (ROOT / f"workflow/schemas/{section}.schema.yaml").read_text()
    return yaml.safe_load(text)["properties"][section]["properties"]


def test_schema_enums_and_defaults_are_the_vocabulary():
    tabular = _schema("tabular")
    assert tuple(tabular["learners"]["items"]["enum"]) == names.LEARNERS
    assert tuple(tabular["reference_solvers"]["items"]["enum"]) == names.REFERENCE_SOLVERS
    assert tabular["game_strings"]["default"] == {n: g.string for n, g in names.GAMES.items()}
    assert tabular["expected_infostates"]["default"] == {
        n: g.infostates for n, g in names.GAMES.items()}
    assert set(tabular["games"]["default"]) == set(names.GAMES)


def test_figure_style_knows_every_algorithm():
    assert set(style.PALETTE) == set(names.ALGORITHMS)
    assert style.LABELS is names.ALGORITHM_LABELS


def test_modules_take_names_from_the_vocabulary():
    """No string literal in the package is a learner, algorithm or game name, except in names.py."""
    spelled = []
    for path in sorted((ROOT / "src/neurd").rglob("*.py")):
        if path.name == "names.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and node.value in SPELLED:
                spelled.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not spelled, "\n".join(spelled)


def _dry_run(*targets) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--cores", "1", *targets],
                          cwd=ROOT, capture_output=True, text=True)


@pytest.mark.workflow
def test_rule_wildcards_accept_the_vocabulary_and_nothing_else():
    solvers = [f"results/tabular/kuhn/reference_{s}.parquet" for s in names.REFERENCE_SOLVERS]
    assert _dry_run(*solvers).returncode == 0
    refused = _dry_run("results/tabular/kuhn/reference_cfr_other.parquet")
    assert refused.returncode != 0 and "MissingRuleException" in refused.stdout + refused.stderr
