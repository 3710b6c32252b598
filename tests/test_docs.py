"""The README and every page of docs/ say what the code does: their commands run (cheap ones
for real, expensive ones as a dry run, a parse or --help), their links lead somewhere, and
no page speaks of the project's history or of the machine it was written on.

docs/engine.md and docs/neural.md run in full as tests/test_engine_api.py and
tests/test_neural_compare.py; here every page's ```python block is at least compiled.
"""

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import copy_workflow

from neurd.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
NAMES = [str(page.relative_to(ROOT)) for page in PAGES]
# Pages linked from the index that are written with other parts of the project.
ELSEWHERE: set[str] = set()
REQUIRED = {"README.md", "docs/index.md", "docs/design.md", "docs/readings.md",
            "docs/performance.md", "docs/promises.md", "docs/findings.md", "docs/gpu.md",
            "docs/engine.md", "docs/neural.md"}

# What a page for the user never says: the project's development history, a "now" that
# describes a past state of the code, the machine or the people that built it.
BANNED = {
    r"\bnow\b": "'now' describes a state of the code that a later revision may change",
    r"\bno longer\b": "development history",
    r"\b(not|never) (been )?\w*\s*yet\b|\byet to\b|\bnot yet\b": "a status that goes stale",
    r"\b(previous|earlier|current|last) revision|\brevision before\b": "development history",
    r"\bbefore (this|the current) (one|revision|change)": "development history",
    r"\bsince (those|these) measurements\b": "development history",
    r"\bthis \d+-core\b|\bthis (CPU-only|development|shared) machine\b":
        "the machine the docs were written on",
    r"\bopen (GPU )?issue\b|\bissue #?\d+\b": "the project's issue tracker",
    r"\b(session|assistant|helper|agent)s?\b": "how the project was built",
    r"/work/|/tmp/|/home/": "a path of one machine",
    r"TEST_TIME|TODO|FIXME|XXX": "a placeholder",
    r"\b\d[\d,]* tests\b": "a count of tests drifts with every change: not written",
}


def _page(name: str) -> str:
    return (ROOT / name).read_text(encoding="utf-8")


def test_every_page_the_index_promises_exists():
    assert REQUIRED <= set(NAMES), sorted(REQUIRED - set(NAMES))
    index = _page("docs/index.md")
    for name in NAMES:
        if name.startswith("docs/") and name != "docs/index.md":
            assert f"({Path(name).name})" in index, f"docs/index.md does not list {name}"


@pytest.mark.parametrize("name", NAMES)
def test_no_page_speaks_of_history_or_of_one_machine(name):
    text = _page(name)
    for pattern, why in BANNED.items():
        found = [m.group(0) for m in re.finditer(pattern, text, re.I)]
        assert not found, f"{name} says {found[:3]}: {why}"


@pytest.mark.parametrize("name", NAMES)
def test_every_link_of_a_page_leads_somewhere(name):
    page = ROOT / name
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text()):
        if re.match(r"https?://", target):
            continue
        path = (page.parent / target).resolve()
        relative = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else target
        assert path.exists() or relative in ELSEWHERE, f"{name} links to {target}"
    for mention in re.findall(r"`((?:docs|src|tests|workflow|bench|profiles)/[\w./-]+)`",
                              page.read_text()):
        if "<" in mention or "*" in mention:
            continue
        assert (ROOT / mention).exists() or mention in ELSEWHERE, f"{name} names {mention}"


def _blocks(name: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", _page(name), flags=re.S)


@pytest.mark.parametrize("name", NAMES)
def test_every_python_block_compiles(name):
    for number, block in enumerate(_blocks(name, "python")):
        compile(block, f"{name} python block {number}", "exec")


def _commands() -> list[tuple[str, str]]:
    """Every line of every ```bash block of every page: (page, command without comment)."""
    found = []
    for name in NAMES:
        for block in _blocks(name, "bash"):
            for line in block.splitlines():
                command = re.sub(r"\s+#.*$", "", line).strip()
                if command and not command.startswith("#"):
                    found.append((name, command))
    return found


COMMANDS = _commands()


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    """A copy of the workflow to dry-run documented commands in."""
    home = copy_workflow(tmp_path_factory.mktemp("docs"), also=("Makefile",))
    (home / "liars.yaml").write_text(_blocks("docs/neural.md", "yaml")[0])
    return home


def _gpu_visible() -> bool:
    from neurd.pipeline.neural_resources import gpu_visible

    return gpu_visible()


@pytest.mark.parametrize("name, command", COMMANDS, ids=[f"{n}: {c}" for n, c in COMMANDS])
def test_every_documented_command_runs(name, command, workflow):
    """make: its target exists (make -n); snakemake: a dry run plans it (the paper scale
    without a GPU: refused, naming neural.allow_cpu); neurd: the step and its options parse
    (check-config runs); a script: --help; pytest: the tests it names are collected;
    installers: named, not run."""
    words = shlex.split(command)
    program = words[0]
    if program in ("pip", "conda", ".", "source", "cd", "git"):
        return  # installs or changes the shell: not run here
    if program == "make":
        done = subprocess.run(["make", "-n", *words[1:]], cwd=ROOT, capture_output=True,
                              text=True)
        assert done.returncode == 0, f"{name}: {command}\n{done.stderr}"
        return
    if program == "snakemake":
        done = subprocess.run([sys.executable, "-m", "snakemake", *words[1:], "-n"],
                              cwd=workflow, capture_output=True, text=True)
        output = done.stdout + done.stderr
        if "paper.yaml" in command and not _gpu_visible():
            assert done.returncode != 0 and "neural.allow_cpu" in output, output[-2000:]
        elif "--profile profiles/slurm" in command:
            assert "slurm" in output.lower(), output[-2000:]  # a dry run of the SLURM plan
        else:
            assert done.returncode == 0, f"{name}: {command}\n{output[-3000:]}"
        return
    if program == "neurd":
        if words[1] == "check-config":
            done = subprocess.run([str(Path(sys.executable).parent / "neurd"), *words[1:]],
                                  cwd=workflow, capture_output=True, text=True)
            assert done.returncode == 0, f"{name}: {command}\n{done.stderr[-2000:]}"
        else:
            build_parser().parse_args(words[1:])  # SystemExit on an unknown step or option
        return
    if words[1:3] == ["-m", "pytest"] and program.endswith("python"):
        done = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                               *words[3:]], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, f"{name}: {command}\n{done.stdout[-2000:]}"
        return
    if program == "python":
        script = ROOT / words[1]
        assert script.is_file(), f"{name}: {command}"
        done = subprocess.run([sys.executable, str(script), "--help"], cwd=ROOT,
                              capture_output=True, text=True)
        assert done.returncode == 0, f"{name}: {command}\n{done.stderr[-2000:]}"
        return
    raise AssertionError(f"{name}: no way to check {command!r}: add the program here")


def test_every_section_of_the_readme_named_elsewhere_exists():
    """A comment, schema or page that sends the reader to the README's "<section>" finds
    that heading there."""
    headings = set(re.findall(r"^#+ (.+)$", _page("README.md"), flags=re.M))
    sources = [ROOT / "Makefile", ROOT / "Snakefile", *sorted((ROOT / "workflow").rglob("*.*")),
               *sorted((ROOT / "src").rglob("*.py")), *PAGES]
    named = [(path.relative_to(ROOT), section) for path in sources if path.is_file()
             for section in re.findall(r"README's\s+\"([^\"]+)\"",
                                       path.read_text(errors="replace"))]
    missing = [(str(path), section) for path, section in named if section not in headings]
    assert not missing, f"README has no such section: {missing}"


def test_the_readme_says_how_many_seeds_the_paper_scale_publication_holds(tmp_path):
    """The sentence between the README's marks is what published/paper's manifest gives now
    (make publish-blocks writes it: neurd published-readme published/paper)."""
    import textwrap

    from neurd.cli import main
    from neurd.publication.commands import readme_block, seeds_sentence

    text = _page("README.md")
    span = readme_block(text, "published/paper")
    assert span is not None, "README.md has no marks for published/paper's seeds"
    expected = textwrap.fill(seeds_sentence(ROOT / "published/paper"), width=92)
    assert text[span[0]:span[1]].strip() == expected, (
        "README.md's sentence on published/paper is stale: neurd published-readme "
        "published/paper")
    assert re.search(r"Kuhn poker \d+ of 40, Leduc poker \d+ of 40, Goofspiel \d+ of 40",
                     " ".join(expected.split()))
    # the step writes a publication's sentence between its marks, and only there
    readme = tmp_path / "README.md"
    readme.write_text("# x\n\n<!-- published/smoke: seeds, written by neurd published-readme"
                      " -->\nold\n<!-- /published/smoke -->\nafter\n")
    old_cwd = Path.cwd()
    try:
        import os

        os.chdir(ROOT)
        assert main(["published-readme", "published/smoke", "--readme", str(readme)]) == 0
    finally:
        os.chdir(old_cwd)
    written = readme.read_text()
    assert "Kuhn poker 2 of 2" in written and "old" not in written
    assert written.startswith("# x\n") and written.endswith("<!-- /published/smoke -->\nafter\n")
