"""Progress a person sees: every long step logs its rate and time left, and a Snakemake run
shows each long job's latest progress line on the console, from its log, without opening it."""

import io
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import copy_workflow

from neurd import progress
from neurd.progress import LogWatcher, Progress, duration, progress_message, progress_seconds

ROOT = Path(__file__).resolve().parents[1]
FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"  # neurd.cli's log format


def _logged(update) -> str:
    """What a step's log holds after ``update(Progress)``, in the command line's format."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(FORMAT))
    log = logging.getLogger("neurd.test_progress")
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    try:
        update(Progress("CFR sweep", 200, log=log))
    finally:
        log.removeHandler(handler)
    return stream.getvalue()


def test_a_progress_line_is_recognised_in_a_log_and_nothing_else_is():
    text = _logged(lambda p: p.update(50, "neurd NashConv 0.3..1.7"))
    message = progress_message(text.splitlines()[0])
    assert message.startswith("CFR sweep: 50/200 iterations (25%), ")
    assert " elapsed, ETA " in message and message.endswith("; neurd NashConv 0.3..1.7")
    assert progress_message(_logged(lambda p: p.update(0)).splitlines()[0]).endswith("ETA ?")
    for other in ("2026-01-01 10:00:00,000 neurd INFO command: neurd tabular-sweep --game kuhn",
                  "2026-01-01 10:00:00,000 neurd INFO neurd tabular-sweep done in 3.2s", ""):
        assert progress_message(other) is None


class _Recorder(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append((record.levelno, record.getMessage()))


def _run(times, dones, total, interval):
    """A Progress on a fake clock: an update at each ``times[k]`` with ``dones[k]`` done;
    the (level, message) of every record."""
    clock = iter([0.0, *times])
    log, recorder = logging.getLogger("neurd.test_progress.throttle"), _Recorder()
    log.addHandler(recorder)
    log.setLevel(logging.DEBUG)
    log.propagate = False
    try:
        bar = Progress("neural liars", total, log=log, interval=interval,
                       clock=lambda: next(clock))
        for done in dones:
            bar.update(done)
    finally:
        log.removeHandler(recorder)
    return recorder.records


def test_a_short_run_from_python_prints_a_few_lines_not_one_per_chunk():
    """A 7.6 s run of 69 chunks (the first 5 s of it compiling) at the default 30 s: the
    first line and the last at INFO, the 67 between at DEBUG only."""
    times = [5.0 + 2.6 * k / 68 for k in range(69)]
    records = _run(times, [600 * (k + 1) // 69 for k in range(69)], 600, 30)
    shown = [message for level, message in records if level == logging.INFO]
    assert len(records) == 69 and len(shown) == 2
    assert shown[-1].startswith("neural liars: 600/600 iterations (100%)")


def test_lines_are_at_most_one_an_interval_apart_and_the_last_is_always_shown():
    times = [0.4 * k for k in range(1, 51)]  # 20 s of updates every 0.4 s
    records = _run(times, list(range(1, 51)), 50, 5)
    shown = [k for k, (level, _) in enumerate(records) if level == logging.INFO]
    assert shown[0] == 0 and shown[-1] == 49
    assert all((b - a) * 0.4 >= 5 - 1e-9 for a, b in zip(shown[:-2], shown[1:-1]))
    assert len(shown) == 5  # at 0.4 s, then every 5 s to 20 s: 0.4, 5.6, 10.8, 16.0, 20.0


def test_the_time_left_is_measured_after_the_first_segment():
    """The first segment (compilation) takes 60 s, each later one 1 s for 10 of 1000
    iterations: the ETA is the later segments' rate (~99 s left after the second), not
    the whole run's (which would say ~98 minutes)."""
    records = _run([0.0, 60.0, 61.0], [0, 10, 20], 1000, 0.001)
    messages = [message for _, message in records]
    assert messages[0].endswith("ETA ?") and messages[1].endswith("ETA ?")
    assert "10 iterations/s" in messages[2] and messages[2].endswith("ETA 1m38s")


@pytest.mark.parametrize("seconds, text", [(4.25, "4.2s"), (59.9, "59.9s"), (245, "4m05s"),
                                           (7380, "2h03m"), (float("nan"), "?"),
                                           (float("inf"), "?")])
def test_durations_read_as_a_person_reads_them(seconds, text):
    assert duration(seconds) == text


@pytest.mark.parametrize("text, seconds", [(None, 30.0), ("", 30.0), (" ", 30.0),
                                           ("0", 0.0), ("30", 30.0), ("0.5", 0.5)])
def test_the_interval_comes_from_the_environment_and_zero_turns_it_off(tmp_path, text,
                                                                        seconds):
    environ = {} if text is None else {"NEURD_PROGRESS_SECONDS": text}
    assert progress_seconds(environ) == seconds
    assert progress.watch_logs(tmp_path, interval=0) is None


@pytest.mark.parametrize("text", ["-1", "x", "nan", "inf", "-inf", "soon", "1e400"])
def test_an_interval_that_is_not_seconds_is_refused_naming_it(text):
    """-1 or x used to turn progress off without a word: now the variable and its value are
    named, in one line, by the one function every reader of the variable calls."""
    with pytest.raises(ValueError) as refused:
        progress_seconds({"NEURD_PROGRESS_SECONDS": text})
    message = str(refused.value)
    assert "\n" not in message
    assert message.startswith(f"$NEURD_PROGRESS_SECONDS is {text!r}, not a number of seconds")


def test_every_reader_of_the_interval_refuses_a_bad_one(monkeypatch, tmp_path):
    """A step's Progress and the Snakemake run's log watcher (started before the first job)
    read the variable through progress_seconds, so both refuse before any work."""
    monkeypatch.setenv("NEURD_PROGRESS_SECONDS", "-1")
    with pytest.raises(ValueError, match=r"NEURD_PROGRESS_SECONDS is '-1'"):
        Progress("CFR sweep", 200)
    with pytest.raises(ValueError, match=r"NEURD_PROGRESS_SECONDS is '-1'"):
        progress.watch_logs(tmp_path)
    assert Progress("CFR sweep", 200, interval=5).interval == 5.0  # given: not read
    sources = [ROOT / "Snakefile", *(path for folder in ("src", "workflow", "bench")
                                     for path in (ROOT / folder).rglob("*")
                                     if path.suffix in (".py", ".smk"))]
    readers = [f"{path.relative_to(ROOT)}: {line.strip()}" for path in sources
               if path != ROOT / "src/neurd/progress.py"
               for line in path.read_text(encoding="utf-8").splitlines()
               if "PROGRESS_SECONDS" in line and not line.lstrip().startswith("#")
               and '"NEURD_PROGRESS_SECONDS": ' not in line]  # a comment, or a value set
    assert not readers, readers


def test_a_snakemake_run_with_a_bad_interval_stops_before_its_first_job(tmp_path):
    """The workflow's log watcher reads the variable when the run starts: a bad value ends
    the run, naming it, with no job run and nothing written under results/."""
    workdir = copy_workflow(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", "results/smoke/neural/kuhn/jobs/learned_0_curves"
         ".parquet", "--cores", "1", "--configfile", "workflow/config/smoke.yaml"],
        cwd=workdir, capture_output=True, text=True,
        env={**os.environ, "NEURD_PROGRESS_SECONDS": "x"})
    assert done.returncode != 0
    assert "$NEURD_PROGRESS_SECONDS is 'x', not a number of seconds >= 0" in done.stderr
    assert not (workdir / "results").exists(), done.stderr[-3000:]


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def _line(done, total=100):
    return (f"2026-01-01 10:00:00,000 neurd INFO neural kuhn: {done}/{total} iterations "
            f"({done}%), 3.1 iterations/s, 1.0s elapsed, ETA 2.0s; phase 1\n")


def test_the_watcher_shows_each_long_jobs_latest_line_at_most_every_interval(tmp_path):
    old = tmp_path / "old_run.log"
    old.write_text(_line(10))  # a log of an earlier run: never shown
    clock, console = Clock(), io.StringIO()
    watcher = LogWatcher(tmp_path, interval=10, stream=console, clock=clock)
    job = tmp_path / "neural_run_kuhn_learned_0.log"
    job.write_text("2026-01-01 10:00:00,000 neurd INFO command: neurd neural-run\n" + _line(1))
    assert watcher.poll() == []  # the job has not run 10 s yet
    clock.now += 5
    with open(job, "a") as handle:
        handle.write(_line(2) + _line(3)[:30])  # a line half written
    assert watcher.poll() == []
    clock.now += 5
    assert watcher.poll() == ["[neural_run_kuhn_learned_0] neural kuhn: 2/100 iterations (2%), "
                              "3.1 iterations/s, 1.0s elapsed, ETA 2.0s; phase 1"]
    with open(job, "a") as handle:
        handle.write(_line(3)[30:] + _line(4))
    clock.now += 9
    assert watcher.poll() == []  # shown 9 s ago
    clock.now += 1
    assert [line.split(": ")[1][:5] for line in watcher.poll()] == ["4/100"]
    clock.now += 20
    assert watcher.poll() == []  # nothing new in the log
    short = tmp_path / "readings" / "short.log"  # a job that ends within the interval
    short.parent.mkdir()
    short.write_text(_line(100))
    assert watcher.poll() == []
    job.write_text(_line(5))  # the job run again: its log starts afresh
    assert watcher.poll() == []
    clock.now += 10
    assert [line.split("] ")[0] for line in watcher.poll()] == ["[readings/short",
                                                                 "[neural_run_kuhn_learned_0"]
    assert "old_run" not in console.getvalue()
    assert console.getvalue().count("\n") == 4


def test_a_long_line_is_cut_on_the_console(tmp_path):
    clock, console = Clock(), io.StringIO()
    watcher = LogWatcher(tmp_path, interval=1, stream=console, clock=clock)
    (tmp_path / "job.log").write_text(_line(7).rstrip("\n") + "; " + "x" * 500 + "\n")
    watcher.poll()
    clock.now += 1
    (line,) = watcher.poll()
    assert len(line) == progress.CONSOLE_WIDTH and line.endswith("...")


@pytest.mark.workflow
def test_a_snakemake_run_shows_each_long_jobs_progress_and_keeps_the_log(tmp_path):
    """The smoke scale's neural job, with a progress line every half second: the console
    shows its progress (rate, ETA) under the job's name, and its log keeps every line."""
    for name in ("Snakefile", "workflow", "profiles", "published"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    target = "results/smoke/neural/kuhn/jobs/learned_0_curves.parquet"
    done = subprocess.run(
        [sys.executable, "-m", "snakemake", target, "--cores", "2", "--configfile",
         "workflow/config/smoke.yaml"], cwd=tmp_path, capture_output=True, text=True,
        env={**os.environ, "NEURD_PROGRESS_SECONDS": "0.5"})
    assert done.returncode == 0, done.stderr[-3000:]
    shown = [line for line in (done.stdout + done.stderr).splitlines()
             if line.startswith("[neural_run_kuhn_learned_0] neural kuhn: ")]
    assert shown, (done.stdout + done.stderr)[-3000:]
    assert all(" iterations/s, " in line and " ETA " in line for line in shown)
    log = (tmp_path / "results/smoke/logs/neural_run_kuhn_learned_0.log").read_text()
    logged = [progress_message(line) for line in log.splitlines()]
    assert all(line.split("] ", 1)[1].rstrip(".") in "\n".join(filter(None, logged))
               for line in shown)
    assert logged[-1] is None and "600/600 iterations (100%)" in log
