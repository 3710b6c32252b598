"""The code and the rules are as a contributor expects: ruff and snakefmt are clean.

`snakemake --lint` is checked in tests/test_workflow.py.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*command) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *command], cwd=ROOT, capture_output=True,
                          text=True)


def test_ruff_is_clean():
    result = _run("ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_rules_are_snakefmt_formatted():
    result = _run("snakefmt", "--check", "Snakefile", "workflow/rules")
    assert result.returncode == 0, result.stdout + result.stderr
