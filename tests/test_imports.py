"""The import graph of ``src/neurd`` runs one way, and no import hides inside a function.

Every module sits on a floor (:data:`LAYERS`, lowest first); a module imports
only from its own floor or below, and the graph of every import -- at module
level, inside functions, and the registry's and command line's imports by
computed name -- has no cycle.  So no import inside a function can be
dodging a circle: at module level it would close none.  An import inside a
function is allowed only to put off loading a package that costs start-up
time or need not be installed (:data:`LAZY_PACKAGES`, each with its reason),
directly or through a module of ours that loads one which the importing
module does not load already; every other import belongs at module level.
"""

from __future__ import annotations

import ast
import fnmatch
import sys
from collections import defaultdict
from pathlib import Path

import pytest

SOURCE = Path(__file__).resolve().parents[1] / "src"

# Lowest floor first.  A module may import from its own floor (no cycle allowed) or below.
# The modules of neurd.publication that make up a published run (its format, checks and
# writer); the package's other modules sit on the floors of what they import.
PUBLISHED_RUN = ("manifest", "content", "integrity", "reproduce", "writer", "intake",
                 "resume_states")

LAYERS = [
    # foundations: the vocabulary, config errors, precision scopes, progress, random
    # streams, statistics, the matrix games and the learners' steps, the source revision and
    # the machine
    ["neurd", "neurd.names", "neurd.config", "neurd.precision", "neurd.progress",
     "neurd.streams", "neurd.stats", "neurd.matrix_games", "neurd.learners", "neurd.revision",
     "neurd.machine"],
    # files: tables with provenance, config files and their schemas, files carried between
    # machines (the publication's packs)
    ["neurd.tables", "neurd.configfile", "neurd.publication.packs", "neurd.schema"],
    # games compiled to arrays
    ["neurd.games", "neurd.games.*"],
    # computation on games and matrices, and the limits of a run (the neural stage's runs
    # and tables, neurd.neural.runs and neurd.neural.results, among them: below the stage
    # and the publication, which both use them)
    ["neurd.limits", "neurd.regret", "neurd.dynamics", "neurd.tabular", "neurd.tabular.*",
     "neurd.neural", "neurd.neural.*", "neurd.engine"],
    # what a stage declares; claims and figures
    ["neurd.stage", "neurd.audit", "neurd.figures", "neurd.figures.*"],
    # a published run, with its blocks in progress and the checks of incoming blocks (below
    # the stage that draws it: they plan a block with neurd.neural.runs, not with a stage)
    ["neurd.publication", *[f"neurd.publication.{m}" for m in PUBLISHED_RUN]],
    # the stages (the published run's draws the publication); the schedules of GPU and CPU
    # allocations, and what their blocks cost; neural NeuRD vs SPG in one call, giving the
    # stage's tables
    ["neurd.pipeline", "neurd.pipeline.*", "neurd.publication.gpu_schedule",
     "neurd.publication.cpu_schedule", "neurd.publication.costs", "neurd.comparison"],
    # the registry of the stages
    ["neurd.stages"],
    # a run's provenance, a publication checked against its config file, the readings
    # study's grid step (its tables and its figure), a publication's Fig 6 claims written into
    # the findings page, the time make figures expects, the paper-length readings study (its
    # background runner, its table and figure, the raw reading's publication drawn beside
    # them), the allocations that compute a publication's blocks, the command line
    ["neurd.provenance", "neurd.publication.commands", "neurd.readings_grid",
     "neurd.publication.findings", "neurd.publication.costs_page",
     "neurd.expected_time", "neurd.paper_readings",
     "neurd.paper_readings_report", "neurd.paper_readings_raw", "neurd.publication.allocation",
     "neurd.publication.allocation.*", "neurd.cli"],
]

# Imports by computed name (importlib.import_module), as (module, "top" | "function",
# modules imported): the registry loads every stage when it is imported and a figure's
# module when it lists the figures; the command line loads the figure it draws; neurd.games
# loads OpenSpiel's compiler only when one of its names is asked for.
DYNAMIC = [
    ("neurd.stages", "top", "neurd.pipeline.*"),
    ("neurd.stages", "function", "neurd.figures.*"),
    ("neurd.cli", "top", "neurd.figures"),
    ("neurd.cli", "function", "neurd.figures.*"),
    ("neurd.games", "function", "neurd.games.compile"),
    ("neurd.games", "function", "neurd.games.openspiel"),
]
DYNAMIC_CALLS = {"neurd.stages": 3, "neurd.cli": 2, "neurd.games": 1}

# Packages a function may import on first use, and why they are put off.
LAZY_PACKAGES = {
    "jax": "XLA's start-up (1-2 s): the Snakefile and the figure steps never compute in "
           "JAX, neurd check-config and the table steps only for a publication's exact "
           "NashConv (neurd.engine)",
    "optax": "the neural stage's optimisers: 2 s to import, and JAX with them",
    "flax": "the neural stage's networks: 2 s to import, and JAX with them",
    "matplotlib": "drawing only (1-2 s with pyplot): the computing steps never draw",
    "mpltern": "Fig 3's ternary axes: drawing only",
    "seaborn": "Fig 6's drawing only (4 s with its imports)",
    "scipy": "the bootstrap, the Nash sets' linear programs and the ODE solver only: 1 s "
             "to import, and most steps use none of them",
    "pyspiel": "not needed, nor installed, on a GPU node that runs the neural jobs from "
               "compiled games (README, GPU and cluster)",
    "open_spiel": "as pyspiel (its Python policies)",
    "snakemake": "config validation only; not installed where jobs run in pieces "
                 "(bench/paper_pieces.py)",
    "snakemake_interface_common": "as snakemake",
    "jsonschema": "as snakemake (its schema errors)",
}

# Modules whose function-level imports are not checked, each with its reason.
UNCHECKED = {
    "neurd.publication.allocation.timing": "the timing workers: started as a file in a process "
    "whose PYTHONPATH names the tree they time (this one or an older one), they import neurd "
    "only inside their functions, from that tree",
}


def _modules() -> dict[str, Path]:
    found = {}
    for path in sorted((SOURCE / "neurd").rglob("*.py")):
        parts = path.relative_to(SOURCE).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = _modules()


def _matching(pattern: str) -> list[str]:
    return [name for name in MODULES if fnmatch.fnmatchcase(name, pattern)
            and not name.rsplit(".", 1)[-1].startswith("_")]


def _floor(module: str) -> int:
    floors = [i for i, layer in enumerate(LAYERS) for pattern in layer
              if fnmatch.fnmatchcase(module, pattern)]
    assert floors, f"{module} is on no floor of LAYERS"
    return min(floors)


def _resolve(module: str, node: ast.ImportFrom | ast.Import, is_package: bool) -> list[str]:
    """The modules an import statement loads (ours by module name, others by top name)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        base = module.split(".")[: len(module.split(".")) - node.level + is_package]
        source = ".".join(base + ([node.module] if node.module else []))
    else:
        source = node.module
    return [f"{source}.{alias.name}" if f"{source}.{alias.name}" in MODULES else source
            for alias in node.names]


def _ours(name: str) -> str | None:
    """Our module that an imported name lives in, with its parent packages loaded first."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports() -> list[tuple[str, str, str, int]]:
    """``(module, target, "top" | "function", line)`` for every import statement."""
    found = []
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        inside, typing_only = set(), set()
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                inside.update(id(child) for child in ast.walk(node) if child is not node)
            if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
                typing_only.update(id(child) for child in ast.walk(node) if child is not node)
        for node in ast.walk(tree):  # an import for type checkers only never runs: not one
            if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in typing_only:
                where = "function" if id(node) in inside else "top"
                for target in _resolve(module, node, path.name == "__init__.py"):
                    found.append((module, target, where, node.lineno))
    return found


IMPORTS = _imports()


def _edges(include_unchecked_functions: bool = False) -> dict[str, set[str]]:
    """Our module -> our modules it loads, at any level (parent packages included)."""
    graph = defaultdict(set)
    for module, target, where, _ in IMPORTS:
        ours = _ours(target)
        if ours is None or ours == module:
            continue
        if where == "function" and module in UNCHECKED and not include_unchecked_functions:
            continue
        parts = ours.split(".")
        for i in range(1, len(parts) + 1):  # neurd.tabular.cfr loads neurd, neurd.tabular
            parent = ".".join(parts[:i])
            if parent != module and not module.startswith(parent + "."):
                graph[module].add(parent)
    for module, _, pattern in DYNAMIC:
        graph[module].update(_matching(pattern))
    return graph


def _top_level_closure(module: str) -> tuple[set[str], set[str]]:
    """Our modules and the third-party top names loaded by importing ``module``."""
    ours, theirs, stack = {module}, set(), [module]
    while stack:
        current = stack.pop()
        targets = [t for m, t, where, _ in IMPORTS if m == current and where == "top"]
        targets += [t for m, where, pattern in DYNAMIC if m == current and where == "top"
                    for t in _matching(pattern)]
        for target in targets:
            mine = _ours(target)
            if mine is None:
                theirs.add(target.split(".")[0])
                continue
            parts = mine.split(".")
            for i in range(1, len(parts) + 1):
                parent = ".".join(parts[:i])
                if parent not in ours:
                    ours.add(parent)
                    stack.append(parent)
    return ours, theirs


def test_every_module_is_on_a_floor_and_imports_only_its_own_floor_or_below():
    wrong = [f"{module} (floor {_floor(module)}) imports {target} (floor {_floor(target)})"
             for module, targets in _edges().items() for target in targets
             if _floor(target) > _floor(module)]
    assert not wrong, "imports that run upwards:\n" + "\n".join(sorted(wrong))


def test_the_import_graph_has_no_cycle():
    graph = _edges()
    state: dict[str, int] = {}
    cycles = []

    def visit(node, path):
        state[node] = 1
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                cycles.append(" -> ".join(path[path.index(target):] + [target]))
            elif target not in state:
                visit(target, path + [target])
        state[node] = 2

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    assert not cycles, "import cycles:\n" + "\n".join(cycles)


def test_the_registry_type_lives_below_the_registry_and_the_stages():
    assert not [m for m in MODULES if m.startswith("neurd.pipeline._")]
    assert _floor("neurd.stage") < _floor("neurd.pipeline.tabular") < _floor("neurd.stages")


def test_a_function_level_import_only_puts_off_a_heavy_package():
    wrong = []
    for module, target, where, line in IMPORTS:
        if where != "function" or module in UNCHECKED:
            continue
        place = f"{MODULES[module].relative_to(SOURCE)}:{line} imports {target} in a function"
        _, loaded = _top_level_closure(module)
        mine = _ours(target)
        if mine is None:
            top = target.split(".")[0]
            if top not in LAZY_PACKAGES:
                wrong.append(f"{place}: not a package worth putting off; import it at module "
                             "level")
            elif top in loaded:
                wrong.append(f"{place}, but {module} loads {top} already")
            continue
        _, heavy = _top_level_closure(mine)
        if not (heavy & set(LAZY_PACKAGES)) - loaded:
            wrong.append(f"{place}, which loads nothing {module} does not load already; "
                         "import it at module level")
    assert not wrong, "\n".join(wrong)


def test_every_import_by_computed_name_is_declared():
    calls = defaultdict(int)
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr == "import_module"):
                calls[module] += 1
    assert dict(calls) == DYNAMIC_CALLS


@pytest.mark.parametrize("module", ["neurd.stages", "neurd.cli", "neurd.pipeline.tabular"])
def test_the_registry_and_the_command_line_load_no_heavy_package(module):
    """What the Snakefile and every `neurd` step load before they compute: no JAX, no
    OpenSpiel, no plotting, no SciPy (checked on the source, and in a fresh interpreter)."""
    import subprocess

    _, loaded = _top_level_closure(module)
    heavy = ("jax", "optax", "flax", "matplotlib", "seaborn", "pyspiel", "scipy")
    assert not loaded & set(heavy), loaded
    code = f"import sys, {module}; print(sorted(m for m in {heavy} if m in sys.modules))"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.strip() == "[]", run.stdout
