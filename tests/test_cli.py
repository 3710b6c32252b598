"""The command line as a pipeline user meets it: --version, --help without loading JAX, logs
that begin with their command, and a wrong config snapshot refused with a message."""

import json
import subprocess
import sys

import neurd


def _snapshot(section: str) -> dict:
    """The default scale's snapshot of a config section, as the pipeline writes it."""
    from pathlib import Path

    import yaml

    from neurd.config import section as snapshot
    from neurd.stages import validate

    root = Path(__file__).resolve().parents[1]
    config = yaml.safe_load((root / "workflow/config/default.yaml").read_text())
    validate(config, root / "workflow/schemas")
    return snapshot(config, section)


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


# reStructuredText a terminal shows raw: inline literals, roles, and `text`_ links.
MARKUP = ("``", ":func:", ":class:", ":data:", ":mod:", ":meth:", "`_")


def test_help_is_plain_text_with_no_markup():
    """`neurd --help` and every step's: no reStructuredText for the reader to see through."""
    import argparse
    import contextlib
    import io

    from neurd.cli import build_parser

    parser = build_parser()
    (steps,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    texts = {"neurd": parser.format_help()}
    texts.update({f"neurd {name}": step.format_help() for name, step in steps.choices.items()})
    assert len(texts) > 20 and "neurd <step> ..." in texts["neurd"]
    for command, text in texts.items():
        found = [mark for mark in MARKUP if mark in text]
        assert not found, f"{command} --help shows {found}:\n{text}"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        parser.parse_args(["--help"])
    assert "``" not in out.getvalue()


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


def test_a_corrupt_input_stops_the_step_with_its_name(tmp_path):
    snapshot = tmp_path / "rps.json"
    snapshot.write_text(json.dumps(_snapshot("rps")))
    broken = tmp_path / "nashconv_biased.parquet"
    broken.write_bytes(b"not a parquet file")
    run = _neurd("rps-ci", "--config", str(snapshot), "--table", str(broken),
                 "--out", str(tmp_path / "ci.parquet"))
    assert run.returncode == 2 and f"{broken} cannot be read" in run.stderr
    assert "delete it" in run.stderr and "Traceback" not in run.stderr


def test_sigterm_stops_a_step_cleanly(tmp_path):
    import signal
    import threading

    snapshot = tmp_path / "matrix.json"
    cfg = _snapshot("matrix")
    cfg.update(horizons=[10, 100, 1000000], step_sizes={"min": 0.001, "max": 10.0, "num": 400},
               figure2=dict(cfg["figure2"], horizon=100))
    snapshot.write_text(json.dumps(cfg))
    process = subprocess.Popen([sys.executable, "-m", "neurd.cli", "matrix-sweep", "--config",
                                str(snapshot), "--sweep", str(tmp_path / "s.parquet"),
                                "--tuned", str(tmp_path / "t.parquet"),
                                "--readings", str(tmp_path / "r.parquet")],
                               stderr=subprocess.PIPE, text=True)
    # Stop it while it computes: once the first of four sweeps up to 10^6 rounds has been
    # logged (not at a fixed time, which on a loaded machine can fall inside JAX's start).
    lines, computing = [], threading.Event()

    def read():
        for line in process.stderr:
            lines.append(line)
            if "regret sweep" in line:
                computing.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert computing.wait(timeout=300), "".join(lines)[-2000:]
    assert process.poll() is None, "the step ended before it could be stopped"
    process.send_signal(signal.SIGTERM)
    process.wait(timeout=60)
    reader.join(timeout=60)
    stderr = "".join(lines)
    assert process.returncode == 128 + signal.SIGTERM, stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["matrix.json"]


def _check_config(tmp_path, text: str) -> subprocess.CompletedProcess:
    from pathlib import Path

    path = tmp_path / "my.yaml"
    path.write_text(text)
    return _neurd("check-config", str(path), cwd=Path(__file__).resolve().parents[1])


def test_check_config_names_a_missing_or_malformed_file(tmp_path):
    """What Snakemake's --configfile reports without the file's name, make's first step
    names: the file, and for bad YAML the line and column."""
    root = __import__("pathlib").Path(__file__).resolve().parents[1]
    missing = tmp_path / "absent.yaml"
    run = _neurd("check-config", str(missing), cwd=root)
    assert run.returncode == 2 and f"config file {missing}: cannot read it" in run.stderr
    for text, where in [("seed: [1,\n", "line 2, column 1"),
                        ("matrix:\n\thorizons: [10]\n", "line 2, column 1"),
                        ('{"seed": 1,', "line 1, column 12")]:
        run = _check_config(tmp_path, text)
        assert run.returncode == 2 and "Traceback" not in run.stderr
        assert f"{tmp_path / 'my.yaml'} is neither JSON nor valid YAML at {where}" in run.stderr
    run = _check_config(tmp_path, "- seed\n")
    assert run.returncode == 2 and "expected keys at the top level" in run.stderr


def test_check_config_validates_as_the_snakefile_does(tmp_path):
    run = _check_config(tmp_path, "rps:\n  portraits: {rtol: .nan}\n")
    assert run.returncode == 2 and "rps.portraits.rtol = nan" in run.stderr
    assert str(tmp_path / "my.yaml") in run.stderr
    run = _check_config(tmp_path, "matrix:\n  horizons: [10, -5]\n")
    assert run.returncode == 2 and "matrix.horizons[1]" in run.stderr
    run = _check_config(tmp_path, "scale: laptop\nrps:\n  trajectories: 10\n")
    assert run.returncode == 0 and "results in results/laptop/" in run.stderr


def test_check_config_prints_the_results_folder():
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    for scale, folder in [("default", "results"), ("smoke", "results/smoke"),
                          ("paper", "results/paper")]:
        run = _neurd("check-config", "--results-dir", f"workflow/config/{scale}.yaml", cwd=root)
        assert run.returncode == 0 and run.stdout == f"{folder}\n"


NO_BLOCK = "published/paper holds no seed block yet"


def test_check_config_warns_of_an_empty_publication_only_where_the_config_uses_it(tmp_path):
    """A user's own config that only inherits published.folder is not told about the
    paper-scale publication; the default scale (which draws it beside its own Fig 6) and
    a config that names the publication are, while it holds no seed block."""
    from pathlib import Path

    from neurd.publication import published_games

    root = Path(__file__).resolve().parents[1]
    empty = not published_games(root / "published/paper")
    own = _check_config(tmp_path, "scale: mine\nrps:\n  trajectories: 10\n")
    assert own.returncode == 0 and NO_BLOCK not in own.stderr, own.stderr
    named = _check_config(tmp_path, "scale: mine\npublished:\n  folder: published/paper\n")
    assert named.returncode == 0 and (NO_BLOCK in named.stderr) == empty, named.stderr
    default = _neurd("check-config", "workflow/config/default.yaml", cwd=root)
    assert default.returncode == 0 and (NO_BLOCK in default.stderr) == empty, default.stderr


def test_check_config_runs_no_learning_cycle_for_the_blocks_in_progress():
    """check-config checks the configured publication's finished blocks and their tables,
    never its blocks in progress (no figure draws on them; their check compiles and runs a
    learning cycle): on the default config, whose publication holds them while it grows, the
    cycle's modules are never loaded."""
    from pathlib import Path

    from neurd.publication import read_manifest

    root = Path(__file__).resolve().parents[1]
    games = read_manifest(root / "published/paper")["games"].values()
    held = sum(len(entry.get("in_progress", [])) for entry in games)
    code = ("import sys\nfrom neurd import cli\n"
            "code = cli.main(['check-config', 'workflow/config/default.yaml'])\n"
            "print(code, *[m in sys.modules for m in ('neurd.neural.experiment', "
            "'neurd.neural.train', 'flax')])")
    run = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True,
                         text=True)
    assert run.returncode == 0 and run.stdout.split() == ["0", "False", "False", "False"], (
        f"{held} blocks in progress: {run.stdout}{run.stderr[-2000:]}")


def test_which_config_files_use_the_publication(tmp_path):
    from pathlib import Path

    from neurd.publication.commands import uses_publication

    root = Path(__file__).resolve().parents[1]
    config = {"published": {"folder": "published/paper",
                            "configfile": "workflow/config/paper.yaml"}}
    mine = tmp_path / "mine.yaml"
    mine.write_text("scale: mine\n")
    named = tmp_path / "named.yaml"
    named.write_text("scale: named\npublished: {folder: published/paper}\n")
    assert uses_publication(config, [], root)
    assert uses_publication(config, [root / "workflow/config/default.yaml"], root)
    assert uses_publication(config, [root / "workflow/config/paper.yaml"], root)
    assert uses_publication(config, [named], root)
    assert not uses_publication(config, [mine], root)
    assert not uses_publication({"published": {"folder": None}}, [], root)


def test_a_command_ends_at_once_with_its_output_whole():
    """The `neurd` command (neurd.cli:run) ends its process as soon as the step is done,
    without Python's teardown of the C++ libraries (where a compiler thread still alive has
    been seen to abort a finished command): its exit status and its output are the step's,
    whole, for a step that ran JAX, a step refused and a command line refused."""
    import tomllib
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    scripts = tomllib.loads((root / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["neurd"] == "neurd.cli:run"
    for _ in range(3):
        done = _neurd("check-config", "workflow/config/smoke.yaml", cwd=root)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stderr.rstrip().splitlines()[-1].endswith(
            "neurd check-config done in " + done.stderr.rstrip().rsplit(" in ", 1)[1])
    refused = _neurd("check-config", "no-such-file.yaml", cwd=root)
    assert refused.returncode == 2 and "no-such-file.yaml" in refused.stderr
    wrong = _neurd("no-such-step")
    assert wrong.returncode == 2 and "invalid choice" in wrong.stderr
    listed = _neurd("--help")
    assert listed.returncode == 0 and listed.stdout.rstrip().endswith(
        _neurd("--help").stdout.rstrip().splitlines()[-1])


def test_an_output_a_step_could_not_write_is_refused_before_it_computes(tmp_path):
    """A step whose output path is a folder, or lies in a 'folder' that is a file, is refused
    at once naming the argument and the path, before any compute (here a zoo game's job, which
    would compute first and fail as a traceback at its end)."""
    import time

    snapshot = tmp_path / "zoo.json"
    snapshot.write_text(json.dumps(_snapshot("zoo")))
    (tmp_path / "a_folder").mkdir()
    (tmp_path / "a_file").write_text("mine\n")
    for curves, checks, words in [
            (tmp_path / "a_folder", tmp_path / "c.parquet", "--curves"),
            (tmp_path / "n.parquet", tmp_path / "a_file" / "c.parquet", "--checks")]:
        start = time.monotonic()
        run = _neurd("zoo-game", "--config", str(snapshot), "--game", "kuhn_poker", "--curves",
                     str(curves), "--checks", str(checks))
        assert run.returncode == 2, run.stderr[-2000:]
        assert words in run.stderr and ("is a folder" in run.stderr or "is a file" in
                                        run.stderr), run.stderr[-1000:]
        assert "Traceback" not in run.stderr and time.monotonic() - start < 60
    assert (tmp_path / "a_file").read_text() == "mine\n"
