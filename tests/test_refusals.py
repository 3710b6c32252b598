"""Refused clearly and at once: each class of input that used to fail late, with a traceback or
under the wrong name, is refused before any compute in one line naming what is wrong -- a bad
environment variable, options that cannot work together, a compiled game or a job table that is
not the config's, a config file with control characters, a pipe nobody writes to or a folder in
its place, nested command-line overrides typed as a config file's, a corrupt benchmark file."""

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from neurd import configfile, games
from neurd.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]
NEURD = str(Path(sys.executable).parent / "neurd")


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    """A tiny Kuhn neural config, its compiled game and Leduc's (for the wrong game)."""
    from neurd.stages import snapshot, validate

    root = tmp_path_factory.mktemp("job")
    config = yaml.safe_load(open(ROOT / "workflow/config/default.yaml"))
    config["neural"].update({"games": ["kuhn"], "entropies": [0.0], "seeds": 2,
                             "seeds_per_job": 1, "seeds_per_batch": 1,
                             "phase_iterations": {"kuhn": 8}, "exact_critic_games": [],
                             "checkpoints": {"geometric": 1, "linear": 1},
                             "final_checkpoints": 1})
    validate(config, ROOT / "workflow/schemas")
    (root / "neural.json").write_text(json.dumps(snapshot(config, "neural")))
    games.save(games.compile_configured("kuhn", config["neural"]["game_strings"], None,
                                        "neural"), root / "kuhn.npz")
    games.save(games.compile_configured("leduc", config["neural"]["game_strings"], None,
                                        "neural"), root / "leduc.npz")
    return root


def _run(job, *extra, env=None, compiled="kuhn.npz", which=("--chunk", "0"), out="out"):
    command = [NEURD, "neural-run", "--config", str(job / "neural.json"), "--game", "kuhn",
               "--critic", "learned", *which, "--compiled", str(job / compiled),
               "--curves", str(job / out / "curves.parquet"),
               "--policies", str(job / out / "policies.parquet"), *extra]
    start = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True,
                          env=dict(os.environ, JAX_PLATFORMS="cpu", **(env or {})))
    return done, time.monotonic() - start


@pytest.fixture(scope="module")
def computing(job):
    """The wall time of the same command where it computes (2 configurations, 24 iterations:
    JAX loaded, the program compiled and run), on this machine under its present load."""
    done, seconds = _run(job, out="computed")
    assert done.returncode == 0, done.stderr[-2000:]
    return seconds


def _refused_in_one_line(done, *named):
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and all(n in errors[0] for n in named), done.stderr[-2000:]


def _refused_before_compute(run, computing, *named):
    """Refused in one line, before any compute: the log holds the command and the error only
    (no progress of a run), and the refusal takes less than half the time of the command
    that computes (:func:`computing`, timed on the same machine at the same load)."""
    done, seconds = run
    _refused_in_one_line(done, *named)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 2 and " INFO command: " in lines[0], done.stderr[-2000:]
    assert seconds < computing / 2, (f"refused after {seconds:.1f} s; the command computes "
                                     f"in {computing:.1f} s")


@pytest.mark.parametrize("value", ["abc", "nan", "-1", "inf"])
def test_a_bad_checkpoint_minutes_variable_is_named_and_harms_no_other_command(job, computing,
                                                                               value):
    run = _run(job, "--checkpoint", str(job / "ck"), env={"NEURD_CHECKPOINT_MINUTES": value})
    _refused_before_compute(run, computing, "NEURD_CHECKPOINT_MINUTES", repr(value))
    assert not (job / "out/curves.parquet").exists()
    other = subprocess.run([NEURD, "--version"], capture_output=True, text=True,
                           env=dict(os.environ, NEURD_CHECKPOINT_MINUTES=value))
    assert other.returncode == 0, other.stderr


@pytest.mark.parametrize("flag", [("--stop-after-minutes", "1"), ("--keep-state",)])
def test_a_budget_or_a_kept_state_without_a_checkpoint_is_refused_before_compute(job, computing,
                                                                                 flag):
    run = _run(job, *flag)
    _refused_before_compute(run, computing, f"{flag[0]} needs --checkpoint")
    assert not (job / "out").exists()


@pytest.mark.parametrize("value", ["1", "true", "True"])
def test_double_precision_switched_on_for_the_neural_stage_is_refused(job, computing, value):
    _refused_before_compute(_run(job, env={"JAX_ENABLE_X64": value}), computing,
                            "JAX_ENABLE_X64")
    assert not (job / "out").exists()


def test_the_compiled_game_of_another_key_is_refused(job, computing):
    """`--game kuhn --compiled <Leduc's game>` would write Leduc's numbers labelled Kuhn."""
    _refused_before_compute(_run(job, compiled="leduc.npz"), computing, "leduc.npz",
                            "neural.game_strings.kuhn")
    assert not (job / "out").exists()


def test_a_chunk_or_seeds_off_the_config_are_refused(job, computing):
    _refused_before_compute(_run(job, which=("--seeds", "0-3")), computing,
                            "seeds 0-3 are not run seeds")
    _refused_before_compute(_run(job, "--seeds", "0-0"), computing,
                            "give --chunk (a Snakemake job) or --seeds")
    command = [NEURD, "neural-run", "--config", str(job / "neural.json"), "--game", "kuhn",
               "--critic", "learned", "--chunk", "5", "--compiled", str(job / "kuhn.npz"),
               "--curves", str(job / "x.parquet"), "--policies", str(job / "y.parquet")]
    done = subprocess.run(command, capture_output=True, text=True)
    _refused_in_one_line(done, "--chunk 5 is not a chunk")


def test_a_job_table_of_another_config_is_not_combined(job, computing, tmp_path):
    """neural-table refuses a job's curves made from another config, naming the file."""
    cfg = json.loads((job / "neural.json").read_text())
    other = tmp_path / "other.json"
    other.write_text(json.dumps(dict(cfg, policy_learning_rate=0.5)))
    command = [NEURD, "neural-table", "--config", str(other), "--game", "kuhn",
               "--compiled", str(job / "kuhn.npz"),
               "--curves", str(job / "computed/curves.parquet"),
               "--policies", str(job / "computed/policies.parquet"),
               *[a for name in ("nashconv", "diagnostics", "summary", "ci")
                 for a in (f"--{name}", str(tmp_path / f"{name}.parquet"))],
               "--policies-out", str(tmp_path / "p.parquet")]
    done = subprocess.run(command, capture_output=True, text=True)
    _refused_in_one_line(done, "curves.parquet is not this config's kuhn job",
                         "made from another config")
    assert not list(tmp_path.glob("*.parquet"))


# --- config files ---------------------------------------------------------------------------


@pytest.mark.parametrize("text, character", [("seed: 0\x00\n", "U+0000"),
                                             ("seed: 0\n\x1b[31mscale: x\n", "U+001B"),
                                             ('{"seed": 0, "scale": "a\x07"}', "U+0007")],
                         ids=["nul", "escape", "bell-in-json"])
def test_a_config_with_control_characters_is_refused_naming_where(tmp_path, text, character):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(f"{path}: control character {character} at "
                                                    "line")):
        configfile.read_config_file(path)


def test_a_pipe_nobody_writes_to_or_a_folder_is_refused_without_hanging(tmp_path, monkeypatch):
    monkeypatch.setattr(configfile, "PIPE_SECONDS", 0.5)
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(ConfigError, match="is a pipe that gave no end of file"):
        configfile.read_config_file(fifo)
    assert time.monotonic() - start < 5
    with pytest.raises(ConfigError, match="is not a file"):
        configfile.read_config_file(tmp_path)


def test_a_pipe_with_a_writer_is_read(tmp_path):
    read, write = os.pipe()
    os.write(write, b"seed: 3\n")
    os.close(write)
    try:
        assert configfile.read_config_file(f"/proc/self/fd/{read}") == {"seed": 3}
    finally:
        os.close(read)


def test_nested_command_line_overrides_are_typed_as_a_config_files_values():
    """Snakemake keeps `--config neural={seeds: 2}`'s nested values as strings."""
    config = {"neural": {"seeds": "2", "entropies": ["0", "0.1"], "games": ["kuhn"],
                         "game_strings": {"kuhn": "kuhn_poker"}}, "seed": 0}
    given = {"neural": {"seeds": "2", "entropies": ["0", "0.1"], "games": ["kuhn"],
                        "game_strings": {"kuhn": "kuhn_poker"}}}
    retyped = configfile.type_overrides(config, given)
    assert config["neural"] == {"seeds": 2, "entropies": [0, 0.1], "games": ["kuhn"],
                                "game_strings": {"kuhn": "kuhn_poker"}}
    assert retyped == ["neural.seeds", "neural.entropies[0]", "neural.entropies[1]"]


@pytest.mark.workflow
def test_snakemake_takes_a_nested_override(tmp_path):
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile",
                          "workflow/config/smoke.yaml", "--config", "neural={seeds: 2}"],
                         cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    bad = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile",
                          "workflow/config/smoke.yaml", "--config", "neural={seeds: two}"],
                         cwd=ROOT, capture_output=True, text=True)
    assert bad.returncode != 0 and "seeds" in bad.stdout + bad.stderr


def test_a_corrupt_benchmark_file_is_named(tmp_path):
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks/step.tsv").write_text("s\th:m:s\nabc\t1\n")
    (tmp_path / "config.json").write_text(json.dumps({"seed": 0, "scale": "x"}))
    done = subprocess.run([NEURD, "provenance", "--config", str(tmp_path / "config.json"),
                           "--out", str(tmp_path / "provenance.json"), "--benchmarks",
                           str(tmp_path / "benchmarks")], capture_output=True, text=True,
                          cwd=ROOT)
    _refused_in_one_line(done, "step.tsv cannot be read as Snakemake's benchmark table")
    assert not (tmp_path / "provenance.json").exists()


def test_the_tabular_steps_refuse_the_compiled_game_of_another_key(job, tmp_path):
    from neurd.stages import snapshot, validate

    config = yaml.safe_load(open(ROOT / "workflow/config/default.yaml"))
    validate(config, ROOT / "workflow/schemas")
    (tmp_path / "tabular.json").write_text(json.dumps(snapshot(config, "tabular")))
    done = subprocess.run([NEURD, "tabular-sweep", "--config", str(tmp_path / "tabular.json"),
                           "--game", "kuhn", "--compiled", str(job / "leduc.npz"),
                           "--out", str(tmp_path / "sweep.parquet")], capture_output=True,
                          text=True)
    _refused_in_one_line(done, "leduc.npz", "tabular.game_strings.kuhn")
    assert not (tmp_path / "sweep.parquet").exists()
