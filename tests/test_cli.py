"""The command line as a pipeline user meets it: --version, --help without loading JAX, logs
that begin with their command, and a wrong config snapshot refused with a message."""

import json
import subprocess
import sys

import neurd


def _neurd(*args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "neurd.cli", *args], capture_output=True,
                          text=True, **kwargs)


def test_version():
    run = _neurd("--version")
    assert run.returncode == 0 and run.stdout.strip() == f"neurd {neurd.__version__}"


def test_help_answers_without_loading_jax():
    code = ("import sys\nfrom neurd.cli import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\nprint('jax' in sys.modules, file=sys.stderr)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "neural-run" in run.stdout and "matrix-sweep" in run.stdout
    assert run.stderr.strip().splitlines()[-1] == "False"


def test_a_wrong_snapshot_is_refused_with_a_message_naming_the_file(tmp_path):
    wrong = tmp_path / "rps.json"
    wrong.write_text(json.dumps({"seed": 0, "horizons": [10, 20]}))  # the matrix section's keys
    run = _neurd("rps-nash", "--config", str(wrong), "--out", str(tmp_path / "out.parquet"))
    assert run.returncode == 2
    assert str(wrong) in run.stderr and "not a 'rps' config snapshot" in run.stderr
    assert "Traceback" not in run.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    run = _neurd("matrix-trajectories", "--config", str(broken), "--out", str(tmp_path / "o"))
    assert run.returncode == 2 and str(broken) in run.stderr and "Traceback" not in run.stderr


def test_the_log_begins_with_the_command(tmp_path):
    missing = tmp_path / "absent.json"
    run = _neurd("matrix-trajectories", "--config", str(missing), "--out", str(tmp_path / "o"))
    first = run.stderr.splitlines()[0]
    assert first.endswith(f"command: neurd matrix-trajectories --config {missing} "
                          f"--out {tmp_path / 'o'}")
