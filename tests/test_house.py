"""The shape of the code: small one-concern modules, short functions, no private name used
across modules, and the figures drawn from statistics rather than used as them.

The import graph's direction and cycles are tests/test_imports.py's; this file checks what
a maintainer reading the package meets: no module of ``src/`` or ``bench/`` over
:data:`MODULE_LINES` lines, no function of either over :data:`FUNCTION_LINES` code lines
(its docstring, blank lines and comments not counted), every module opening with a docstring
that says its concern, no ``_private`` name of one module imported or reached into by
another, and no module outside ``neurd.figures`` importing a figure module but the steps
that draw one (:data:`DRAWING_STEPS`; the registry and the command line load one by computed
name: tests/test_imports.py's ``DYNAMIC``).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "src"
MODULE_LINES = 500
FUNCTION_LINES = 60
# The steps that draw a figure, above both its tables' stage and its figure module.
DRAWING_STEPS = {
    "neurd.comparison": "Comparison.figure(): a compare() result drawn as Fig 6's panels",
    "neurd.readings_grid": "neurd readings-grid: the readings study's tables and figure",
    "neurd.publication.findings": "neurd published-findings: a publication's Fig 6 claims "
                                "written into docs/findings.md",
    "neurd.paper_readings_raw": "python -m neurd.paper_readings raw-logits: the raw reading's "
                                "publication drawn as Fig 6's panels, a readings figure",
}


def _python(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts)


def _module_name(path: Path) -> str:
    parts = path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


OURS = {_module_name(p): p for p in _python(SOURCE / "neurd")}


def _code_lines(node: ast.AST, lines: list[str]) -> int:
    """Lines of a function that hold code: not blank, not a comment, not its docstring."""
    docstring = set()
    body = getattr(node, "body", [])
    if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        docstring = set(range(body[0].lineno, body[0].end_lineno + 1))
    return sum(1 for n in range(node.lineno, node.end_lineno + 1)
               if n not in docstring and lines[n - 1].strip()
               and not lines[n - 1].strip().startswith("#"))


def test_no_module_is_over_its_size():
    paths = [*OURS.values(), *_python(ROOT / "bench")]
    over = [f"{path.relative_to(ROOT)}: {n} lines" for path in paths
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES]
    assert not over, f"modules over {MODULE_LINES} lines:\n" + "\n".join(over)


def test_no_function_is_over_its_size():
    over = []
    for path in _python(SOURCE / "neurd") + _python(ROOT / "bench"):
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = _code_lines(node, lines)
                if n > FUNCTION_LINES:
                    over.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n}")
    assert not over, f"functions over {FUNCTION_LINES} code lines:\n" + "\n".join(over)


def test_every_module_says_its_concern():
    silent = [str(path.relative_to(ROOT)) for name, path in OURS.items()
              if not (ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or "")
              .strip() and path.name != "__init__.py"]
    assert not silent, "modules without an opening docstring:\n" + "\n".join(silent)


def _imported_modules(tree: ast.Module, module: str, is_package: bool) -> dict[str, str]:
    """Local name -> our module, for every ``import neurd.x as y`` / ``from neurd import x``."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in OURS:
                    names[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom):
            source = _source(node, module, is_package)
            for alias in node.names:
                if f"{source}.{alias.name}" in OURS:
                    names[alias.asname or alias.name] = f"{source}.{alias.name}"
    return names


def _source(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")[: len(module.split(".")) - node.level + is_package]
    return ".".join(base + ([node.module] if node.module else []))


def _private_uses(path: Path, module: str, root: Path = ROOT) -> list[str]:
    """Every ``_private`` name of another of our modules (or of a bench script) that the file
    imports or reaches into, as ``"file:line imports|uses module.name"``."""
    text = path.read_text(encoding="utf-8")
    tree = ast.parse(text)
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _source(node, module, is_package)
            if source.split(".")[0] != "neurd" or source == module:
                continue
            found += [f"{path.relative_to(root)}:{node.lineno} imports {source}.{a.name}"
                      for a in node.names if a.name.startswith("_")
                      and not a.name.startswith("__")]
    modules = _imported_modules(tree, module, is_package)
    if module.startswith("bench."):  # bench/'s scripts import each other by bare name
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                modules.update({a.asname or a.name: f"bench.{a.name}" for a in node.names
                                if (ROOT / "bench" / f"{a.name}.py").exists()})
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module and (
                    ROOT / "bench" / f"{node.module}.py").exists():
                found += [f"{path.relative_to(root)}:{node.lineno} imports "
                          f"bench.{node.module}.{a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in modules and node.attr.startswith("_")
                and not node.attr.startswith("__") and modules[node.value.id] != module):
            found.append(f"{path.relative_to(root)}:{node.lineno} uses "
                         f"{modules[node.value.id]}.{node.attr}")
    return found


def test_the_checks_catch_what_they_look_for(tmp_path):
    """A planted long function and planted private uses are each found."""
    source = ("import bench_cycle\nfrom neurd.neural.experiment import _measure\n"
              "from neurd.neural import experiment\n"
              "def f():\n    '''doc'''\n" + "    x = 1\n" * 81
              + "    return bench_cycle._env, experiment._exact_setup\n")
    function = next(n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef))
    assert _code_lines(function, source.splitlines()) == 83
    script = tmp_path / "planted.py"
    script.write_text(source)
    found = [use.split(" ", 1)[1] for use in _private_uses(script, "bench.planted", tmp_path)]
    assert found == ["imports neurd.neural.experiment._measure",
                     "uses bench.bench_cycle._env", "uses neurd.neural.experiment._exact_setup"]


def test_no_private_name_is_used_across_modules():
    bench = {f"bench.{p.stem}": p for p in _python(ROOT / "bench")}
    found = [use for module, path in {**OURS, **bench}.items()
             for use in _private_uses(path, module)]
    assert not found, "private names used outside their module:\n" + "\n".join(found)


def test_only_figures_import_a_figure_module():
    figures = {name for name in OURS if name.startswith("neurd.figures.")
               and name != "neurd.figures.style"}
    found = []
    for module, path in OURS.items():
        if module.startswith("neurd.figures") or module in DRAWING_STEPS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for target in _imported_modules(tree, module, path.name == "__init__.py").values():
            if target in figures:
                found.append(f"{path.relative_to(ROOT)} imports {target}")
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in figures:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports from "
                             f"{node.module}")
    assert not found, "figure modules imported outside neurd.figures:\n" + "\n".join(found)
