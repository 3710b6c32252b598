"""bench/paper_pieces.py, the paper-scale Fig 6 a piece at a time on machines that do not outlive
a piece: pieces stopped by their budget, packed, unpacked on the next machine and resumed make
the tables of one uninterrupted run."""

import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from neurd import games
from neurd.stages import load_config, snapshot
from neurd.tables import write_json

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "bench/paper_pieces.py"
TINY = {"games": ["kuhn"], "exact_critic_games": [], "entropies": [0.0, 0.1], "seeds": 2,
        "seeds_per_job": 1, "seeds_per_batch": 1, "phase_iterations": {"kuhn": 40},
        "checkpoints": {"geometric": 2, "linear": 2}, "final_checkpoints": 2}


def _results(folder: Path, cfg: dict, compiled) -> Path:
    write_json(folder / "config/neural.json", cfg)
    games.save(compiled, folder / "neural/kuhn/game.npz")
    return folder


def _pieces(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *map(str, args)], capture_output=True,
                          text=True)


@pytest.mark.workflow
def test_pieces_packed_and_moved_between_machines_make_one_run(tmp_path):
    (tmp_path / "tiny.yaml").write_text(f"neural: {TINY}\n")
    cfg = snapshot(load_config([tmp_path / "tiny.yaml"], ROOT, games=False), "neural")
    compiled = games.compile_configured("kuhn", cfg["game_strings"], None, "neural")
    once = _results(tmp_path / "once", cfg, compiled)
    done = _pieces("run", "--results", once, "--game", "kuhn", "--minutes", 10, "--only",
                   "learned_1")
    assert done.returncode == 0 and "0 jobs still unfinished" not in done.stdout, done.stdout
    pieces = 0
    for piece in range(40):
        machine = _results(tmp_path / f"machine{piece}", cfg, compiled)
        if piece:  # what the last machine handed back, carried to this one
            unpacked = _pieces("unpack", "--results", machine,
                               *sorted((tmp_path / f"out{piece - 1}").glob("pieces.tar.*")))
            assert unpacked.returncode == 0, unpacked.stderr[-2000:]
        done = _pieces("run", "--results", machine, "--game", "kuhn", "--minutes", 0.1,
                       "--min-start-minutes", 0, "--only", "learned_1", "--out",
                       tmp_path / f"out{piece}")
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        pieces += 1
        jobs = machine / "neural/kuhn/jobs"
        if (jobs / "learned_1_curves.parquet").exists():
            break
        assert "stopped at its budget" in done.stdout
        assert (jobs / "learned_1_checkpoint").is_dir()
        assert all(p.stat().st_size <= 15 * 2**20 for p in (tmp_path / f"out{piece}").iterdir())
    assert pieces >= 2
    assert not (jobs / "learned_1_checkpoint").exists()
    for name in ("curves", "policies"):
        assert pd.read_parquet(jobs / f"learned_1_{name}.parquet").equals(
            pd.read_parquet(once / f"neural/kuhn/jobs/learned_1_{name}.parquet"))
    shutil.rmtree(tmp_path / "once")


def test_unpack_refuses_what_is_not_a_jobs_folder(tmp_path):
    import tarfile

    evil = tmp_path / "evil.txt"
    evil.write_text("x")
    with tarfile.open(tmp_path / "pieces.tar.00", "w") as tar:
        tar.add(evil, arcname="../outside.txt")
    done = _pieces("unpack", "--results", tmp_path / "r", tmp_path / "pieces.tar.00")
    assert done.returncode != 0 and "not a jobs folder" in done.stderr
    assert not (tmp_path / "outside.txt").exists()
