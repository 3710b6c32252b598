"""What `make figures` says first (neurd.expected_time): the time it expects here, a reference
run's time scaled by the probe's ratio, part by part; the reference of this instruction set
first; nothing promised where no run of the config was timed whole."""

import json
import logging
import shutil
from pathlib import Path

import pytest

from neurd import cli, expected_time

ROOT = Path(__file__).resolve().parents[1]
DEFAULT = ROOT / "workflow/config/default.yaml"
REFERENCE = {"config": "default.yaml", "config_hash": expected_time.config_digest(DEFAULT),
             "processor": "CPU A", "isa": "AVX512", "snakemake_seconds": 600.0,
             "neural_share": 0.5, "probe": {"neural": 10.0, "tabular": 2.0}}


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


def test_references_are_those_of_the_configs_content_not_its_name(tmp_path):
    """A user's own default.yaml of other content is priced by no run of the project's; a copy
    of the project's under another name is; a run recorded without a hash prices nothing."""
    path = tmp_path / "figures_time.json"
    smoke = dict(REFERENCE, config="smoke.yaml",
                 config_hash=expected_time.config_digest(ROOT / "workflow/config/smoke.yaml"))
    unhashed = {k: v for k, v in REFERENCE.items() if k != "config_hash"}
    path.write_text(json.dumps({"runs": [REFERENCE, smoke, unhashed]}))
    assert expected_time.references(path, DEFAULT) == [REFERENCE]
    mine = tmp_path / "mine" / "default.yaml"
    mine.parent.mkdir()
    mine.write_text(DEFAULT.read_text().replace("\nseed: 0\n", "\nseed: 7\n", 1))
    assert mine.read_text() != DEFAULT.read_text()
    assert expected_time.references(path, mine) == []
    copy = shutil.copy(DEFAULT, tmp_path / "my_run.yaml")
    assert expected_time.references(path, copy) == [REFERENCE]


@pytest.mark.parametrize("text, said", [
    (None, "cannot be read (No such file or directory)"),
    ('{"runs": [{"config": "default.yaml", "probe', "is not JSON (Unterminated string"),
    (b"\xff\xfe{}", "is not JSON ("),
    ('{"runs": 3}', "holds no list of runs"),
    ('["default.yaml"]', "holds no list of runs")])
def test_a_damaged_file_of_references_is_named(tmp_path, text, said):
    path = tmp_path / "figures_time.json"
    if text is not None:
        (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    with pytest.raises(expected_time.ReferencesUnreadable) as refused:
        expected_time.references(path, DEFAULT)
    assert str(refused.value).startswith(f"{path} {said}") and "\n" not in str(refused.value)


def _expected_time(monkeypatch, caplog, config, references):
    """``neurd expected-time``'s exit status, its log lines and whether it probed."""
    probed = []
    monkeypatch.setattr(expected_time, "probe",
                        lambda: probed.append(1) or {"neural": 10.0, "tabular": 2.0})
    monkeypatch.setattr("neurd.neural.device.use_cores", lambda: 1)
    with caplog.at_level(logging.INFO):
        status = cli.main(["expected-time", str(config), "--references", str(references)])
    said = [r.getMessage() for r in caplog.records if r.name == "neurd.expected_time"]
    return status, said, bool(probed)


def test_make_figures_is_told_of_a_damaged_file_of_references_and_goes_on(
        tmp_path, monkeypatch, caplog):
    """A truncated bench/figures_time.json used to read as "no run timed": now it is named in
    one warning, nothing is probed, and the step succeeds (make figures goes on)."""
    truncated = tmp_path / "figures_time.json"
    truncated.write_text((ROOT / "bench/figures_time.json").read_text()[:200])
    status, said, probed = _expected_time(monkeypatch, caplog, DEFAULT, truncated)
    assert status == 0 and not probed
    assert said == [f"make figures: {truncated} is not JSON (" + said[0].split(" (", 1)[1]]
    assert said[0].endswith(": no time is expected")
    assert [r.levelname for r in caplog.records if r.name == "neurd.expected_time"] == [
        "WARNING"]


def test_make_figures_prices_a_config_by_its_content(tmp_path, monkeypatch, caplog):
    references = tmp_path / "figures_time.json"
    references.write_text(json.dumps({"runs": [REFERENCE]}))
    mine = tmp_path / "default.yaml"  # the user's own, of other content
    mine.write_text("seed: 7\n")
    status, said, probed = _expected_time(monkeypatch, caplog, mine, references)
    assert status == 0 and not probed and "no time is expected" in said[0]
    caplog.clear()
    copy = shutil.copy(DEFAULT, tmp_path / "renamed.yaml")
    status, said, probed = _expected_time(monkeypatch, caplog, copy, references)
    assert status == 0 and probed and "about 10 min" in said[0] and "CPU A" in said[0]


def test_a_bad_progress_interval_is_refused_before_the_probe(tmp_path, monkeypatch, caplog):
    """make figures says the time, then the progress lines say each job's: a bad
    $NEURD_PROGRESS_SECONDS ends it here, named, before the probe's fifteen seconds."""
    monkeypatch.setenv("NEURD_PROGRESS_SECONDS", "-1")
    status, _, probed = _expected_time(monkeypatch, caplog, DEFAULT,
                                       ROOT / "bench/figures_time.json")
    assert status == 2 and not probed
    assert any("$NEURD_PROGRESS_SECONDS is '-1'" in r.getMessage() for r in caplog.records)



def test_two_processors_of_one_model_name_are_two_runs_each_named_by_its_numbers(tmp_path):
    """A run timed on a processor whose model name and instruction set an earlier run shares
    but whose family, model and stepping numbers differ is kept beside it, not in its place,
    and the tables and the expectation name each by its numbers; a run of the same numbers
    replaces the one it repeats, and a run recorded without numbers is named by its model."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from _timed import keep  # bench/_timed.py

    out, same = tmp_path / "figures_time.json", ("config", "processor", "processor_id", "isa")
    old = dict(REFERENCE, date="2000-01-01", revision="a" * 40)  # no processor_id recorded
    keep(out, old, ("config", "processor", "isa"))
    first = dict(old, processor_id="family 26 model 2 stepping 1", snakemake_seconds=300.0)
    second = dict(first, processor_id="family 25 model 17 stepping 1", snakemake_seconds=450.0)
    for entry in (first, second, dict(first, snakemake_seconds=310.0)):
        keep(out, entry, same)
    runs = json.loads(out.read_text())["runs"]
    assert sorted((r.get("processor_id", ""), r["snakemake_seconds"]) for r in runs) == [
        ("", 600.0), ("family 25 model 17 stepping 1", 450.0),
        ("family 26 model 2 stepping 1", 310.0)]
    table = expected_time.times_table(runs)
    assert [line.split(" | ")[0] for line in table.splitlines()[2:]] == [
        "| CPU A", "| CPU A (family 25 model 17 stepping 1)",
        "| CPU A (family 26 model 2 stepping 1)"]
    said = expected_time.expectation({"neural": 10.0, "tabular": 2.0}, runs, "AVX512")
    assert "CPU A (family 26 model 2 stepping 1), AVX512: 5 min" in said


def _timed_default_runs(root: Path) -> list[dict]:
    """bench/figures_time.json's runs of default.yaml, by the name they record (the runs the
    README and docs/performance.md quote)."""
    return [run for run in expected_time.timed_runs(root / "bench/figures_time.json")
            if run["config"] == "default.yaml"]


def test_the_repository_references_are_well_formed():
    """bench/figures_time.json's runs each name the config (and the hash of its content), the
    processor, its instruction set, the time and the probe; the README's times come from
    them."""
    for run in expected_time.timed_runs(ROOT / "bench/figures_time.json"):
        assert (ROOT / "workflow/config" / run["config"]).is_file()
        assert len(run["config_hash"]) == 16
        assert run["processor"] and run["isa"] and run["snakemake_seconds"] > 0
        if run["probe"]:  # a run timed with its probe prices the estimate
            assert 0 <= run["neural_share"] <= 1
            assert run["probe"]["neural"] > 0 and run["probe"]["tabular"] > 0


def test_the_repository_references_price_the_default_config():
    """The runs of default.yaml were timed with the content it has now: make figures prices
    itself with them.  A change to default.yaml leaves them behind: time a run of the new
    content (bench/time_figures.py) or make figures expects no time."""
    runs = _timed_default_runs(ROOT)
    assert runs and expected_time.references(ROOT / "bench/figures_time.json", DEFAULT) == runs


def test_the_performance_page_gives_the_runs_timed_slowest_first():
    """docs/performance.md's table of make figures' times is bench/figures_time.json's runs,
    each naming its processor and instruction set, the slowest first."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    runs = _timed_default_runs(root)
    assert runs
    table = expected_time.times_table(runs)
    assert table in (root / "docs/performance.md").read_text(encoding="utf-8"), table
    rows = [line for line in table.splitlines()[2:]]
    assert [r.split(" | ")[0] for r in rows]  # one row a run
    assert len(rows) == len(runs)


def test_the_readme_quotes_each_runs_whole_time():
    """The README's and docs/performance.md's `make figures` times are bench/figures_time.json's
    runs: the venv, the config's check and Snakemake, summed, one quote per processor measured."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readme = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    performance = (root / "docs/performance.md").read_text(encoding="utf-8")
    for run in _timed_default_runs(root):
        whole = expected_time._clock(float(run["snakemake_seconds"])
                                     + float(run.get("venv_seconds") or 0)
                                     + float(run.get("check_seconds") or 0))
        assert whole in readme and whole in performance, (run["processor"], run["isa"], whole)


def test_runs_without_a_probe_do_not_price_the_estimate():
    unprobed = dict(REFERENCE, probe=None, processor="CPU C")
    said = expected_time.expectation({"neural": 10.0, "tabular": 2.0}, [unprobed, REFERENCE],
                                     "AVX512")
    assert "CPU C" not in said and "about 10 min" in said


def _time_tests():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    try:
        import time_tests
    finally:
        sys.path.pop(0)
    return time_tests


def test_the_tests_times_are_read_from_pytests_own_lines():
    """bench/time_tests.py reads each pytest session's time and slowest tests (ids with
    spaces too) from a log of make test then make test-long."""
    log = """collected 3 items
============================= slowest 15 durations =============================
120.30s call     tests/test_a.py::test_one
14.72s setup    tests/test_b.py::test_two[learner0-step (player 0) returned shape]
= 1 failed, 1090 passed, 3 skipped, 91 deselected, 34 warnings in 1546.40s (0:25:46) =
make: *** [Makefile:60: test] Error 1
============================= slowest 15 durations =============================
300.00s call     tests/test_workflow.py::test_the_smoke_run
============ 12 passed, 1090 deselected in 900.10s (0:15:00) ============
"""
    first, second = _time_tests().parse(log)
    assert first["seconds"] == 1546.40 and "1 failed" in first["counts"]
    assert first["slowest"] == [
        [120.30, "call", "tests/test_a.py::test_one"],
        [14.72, "setup", "tests/test_b.py::test_two[learner0-step (player 0) returned shape]"]]
    assert second == {"seconds": 900.10, "counts": "12 passed, 1090 deselected",
                      "slowest": [[300.0, "call", "tests/test_workflow.py::test_the_smoke_run"]]}


def test_the_performance_page_gives_the_tests_times_on_each_instruction_set():
    """docs/performance.md's table of the tests' times is bench/tests_time.json's runs (the
    slowest first, each part's time and slowest tests, named by processor and instruction
    set)."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    runs = json.loads((root / "bench/tests_time.json").read_text())["runs"]
    assert runs and all(r["processor"] and r["isa"] and "test" in r["parts"]
                        and set(r["parts"]) <= {"test", "test-long"} for r in runs)
    assert {r["isa"] for r in runs if "test-long" in r["parts"]}
    assert all("failed" not in p["counts"] for r in runs for p in r["parts"].values())
    table = expected_time.tests_table(runs)
    assert table in (root / "docs/performance.md").read_text(encoding="utf-8"), table


def test_the_test_files_run_heaviest_first(tmp_path):
    """The order a parallel `make test` hands out its files in: each file's listed slowest
    tests summed per run, the most of any run; a missing or malformed record orders nothing."""
    from conftest import file_seconds

    record = tmp_path / "tests_time.json"
    record.write_text(json.dumps({"runs": [
        {"parts": {"test": {"slowest": [[10.0, "call", "tests/a.py::x"],
                                        [5.0, "setup", "tests/a.py::y[1]"],
                                        [12.0, "call", "tests/b.py::z"]]},
                   "test-long": {"slowest": [[30.0, "call", "tests/c.py::w"]]}}},
        {"parts": {"test": {"slowest": [[20.0, "call", "tests/b.py::z"]]}}}]}))
    assert file_seconds(record) == {"tests/a.py": 15.0, "tests/b.py": 20.0, "tests/c.py": 30.0}
    assert file_seconds(tmp_path / "missing.json") == {}
    record.write_text('{"runs": [{"parts": 3}]}')
    assert file_seconds(record) == {}


def test_parallel_tests_take_a_core_each_as_memory_allows(monkeypatch):
    """`make test`'s `-n auto`: one process per core, no more than the memory holds."""
    import os

    from conftest import WORKER_GIB, pytest_xdist_auto_num_workers

    def machine(cores, gib):
        monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
        sizes = {"SC_PAGE_SIZE": 4096, "SC_PHYS_PAGES": int(gib * 2**30 / 4096)}
        monkeypatch.setattr(os, "sysconf", lambda name: sizes[name])
        return pytest_xdist_auto_num_workers(None)

    assert machine(2, 24) == 2  # the README's two cores and 24 GiB
    assert machine(16, 32) == 32 // WORKER_GIB
    assert machine(8, 2) == 1


def test_a_parallel_run_hands_out_files_heaviest_first_and_the_smoke_runs_files_together(
        tmp_path):
    """In two test processes (`make test`'s `--dist loadfile`): the file that the timing record
    makes heaviest starts before the file of most tests (xdist alone would hand that one out
    first and the heavy one last), and the files that share the smoke run go to one process."""
    import subprocess
    import sys
    from pathlib import Path

    import conftest

    tests = tmp_path / "tests"
    tests.mkdir()
    (tests / "conftest.py").write_text(Path(conftest.__file__).read_text())
    (tmp_path / "bench").mkdir()
    (tmp_path / "bench/tests_time.json").write_text(json.dumps({"runs": [{"parts": {"test": {
        "slowest": [[100.0, "call", "tests/test_heavy.py::test_0"]]}}}]}))
    body = ("import os, time\n"
            "def _record(name):\n"
            "    with open(os.path.join(os.path.dirname(__file__), 'ran.txt'), 'a') as f:\n"
            "        worker = os.environ['PYTEST_XDIST_WORKER']\n"
            "        f.write(f\"{time.monotonic()} {worker} {name}\\n\")\n"
            "    time.sleep(0.2)\n")
    files = {"test_heavy.py": 1, "test_many.py": 6, **{name.split("/")[1]: 2
                                                       for name in conftest.SMOKE_RUN_FILES}}
    for name, count in files.items():
        (tests / name).write_text(body + "".join(
            f"def test_{i}():\n    _record('{name}')\n" for i in range(count)))
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "-n", "2", "--dist", "loadfile", "tests"], cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    ran = sorted(line.split() for line in (tests / "ran.txt").read_text().splitlines())
    assert len(ran) == sum(files.values())
    started = {}
    for when, _, name in ran:
        started.setdefault(name, float(when))
    assert started["test_heavy.py"] < started["test_many.py"], ran
    workers = {name: {worker for _, worker, test in ran if test == name}
               for name in files}
    together = set().union(*(workers[name.split("/")[1]] for name in conftest.SMOKE_RUN_FILES))
    assert all(len(used) == 1 for used in workers.values()) and len(together) == 1, workers


def test_only_the_files_that_go_together_take_the_smoke_run():
    """A test file that takes ``smoke_run`` outside :data:`conftest.SMOKE_RUN_FILES` would make
    the smoke run again in a process of its own."""
    import ast
    from pathlib import Path

    import conftest

    takers = set()
    for path in sorted(Path(conftest.__file__).parent.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and "smoke_run" in [
                    argument.arg for argument in node.args.args]:
                takers.add(f"tests/{path.name}")
    assert takers == set(conftest.SMOKE_RUN_FILES)
