"""The bench scripts and the neural job's modules read as the rest of the code: no function
over 80 code lines, and no private name (``_x``) of one module used from another."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FILES = sorted((ROOT / "bench").glob("*.py")) + sorted((ROOT / "src/neurd/neural").glob("*.py"))
MOST_LINES = 80


def code_lines(function: ast.FunctionDef | ast.AsyncFunctionDef, lines: list[str]) -> int:
    """Non-blank, non-comment lines of ``function`` (its nested functions included), its
    docstring left out."""
    first = function.body[0]
    docstring = set()
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        docstring = set(range(first.lineno, first.end_lineno + 1))
    return sum(1 for n in range(function.lineno, function.end_lineno + 1)
               if n not in docstring and lines[n - 1].strip()
               and not lines[n - 1].strip().startswith("#"))


def private_uses(tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, name)`` of every private name taken from another module: ``from m import _x``
    or ``m._x`` where ``m`` is a name an import bound."""
    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
                modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return found


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_function_is_over_80_code_lines(path):
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    long = [f"{node.name} ({code_lines(node, lines)} lines, line {node.lineno})"
            for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and code_lines(node, lines) > MOST_LINES]
    assert not long, f"{path.name}: " + "; ".join(long)


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_private_name_is_used_from_another_module(path):
    used = private_uses(ast.parse(path.read_text(encoding="utf-8")))
    assert not used, f"{path.name}: " + ", ".join(f"{name} (line {n})" for n, name in used)


def test_the_checks_catch_what_they_look_for():
    source = ("import gpu_check\nfrom neurd.neural.experiment import _measure\n"
              "def f():\n    '''doc'''\n" + "    x = 1\n" * 81 + "    return gpu_check._env\n")
    tree = ast.parse(source)
    function = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef))
    assert code_lines(function, source.splitlines()) == 83
    assert [name for _, name in private_uses(tree)] == ["neurd.neural.experiment._measure",
                                                        "gpu_check._env"]
