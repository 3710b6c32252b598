"""Tables carry their provenance; writes are atomic; the audit gathers every figure."""

import json

import pandas as pd
import pytest

from neurd import audit, provenance
from neurd.tables import atomic_path, config_hash, read_metadata, write_table

COLUMNS = {"x": "an integer", "y": "a float"}


def test_table_metadata_round_trip(tmp_path):
    cfg = {"seed": 7, "horizons": [1, 2]}
    path = tmp_path / "sub" / "t.parquet"
    write_table(pd.DataFrame({"y": [0.5, 1.5], "x": [1, 2]}), path, columns=COLUMNS, config=cfg)
    frame = pd.read_parquet(path)
    assert list(frame.columns) == ["x", "y"]  # documented order
    meta = read_metadata(path)
    assert meta["config"] == cfg and meta["seed"] == 7
    assert meta["config_hash"] == config_hash(cfg) != config_hash({**cfg, "seed": 8})
    assert meta["columns"] == COLUMNS
    assert list(tmp_path.joinpath("sub").iterdir()) == [path]  # no temporary left


def test_undocumented_columns_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"missing \['y'\], unexpected \['z'\]"):
        write_table(pd.DataFrame({"x": [1], "z": [2]}), tmp_path / "t.parquet", columns=COLUMNS)


def test_interrupted_write_leaves_nothing(tmp_path):
    path = tmp_path / "out.csv"
    path.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.csv"]


def test_claims_gather(tmp_path):
    audit.write_audit([audit.Claim("fig9", "a | b", "says", "1.0", "> 0", "pass")],
                      tmp_path / "fig9.csv")
    audit.write_audit([audit.Claim("fig8", "c", "says", "2", "< 1", "fail"),
                       audit.Claim("fig8", "d", "says", "3", "= 2", "differs")],
                      tmp_path / "fig8.csv")
    frame = audit.gather([tmp_path / "fig9.csv", tmp_path / "fig8.csv"], tmp_path / "claims.md")
    assert list(frame.figure) == ["fig8", "fig8", "fig9"]
    text = (tmp_path / "claims.md").read_text()
    assert "Totals: pass: 1, fail: 1, differs: 1" in text
    assert "a \\| b" in text and text.index("## fig8") < text.index("## fig9")


def test_bad_verdict_refused():
    with pytest.raises(ValueError, match="verdict"):
        audit.Claim("f", "c", "p", "m", "c", "maybe")


def test_provenance_records_everything():
    cfg = {"seed": 3, "scale": "smoke", "matrix": {"horizons": [1]}}
    record = provenance.collect(cfg)
    for key in ("git", "packages", "config", "config_hash", "section_hashes", "seed", "machine"):
        assert key in record
    assert record["seed"] == 3 and record["packages"]["jax"]
    assert record["section_hashes"]["matrix"] == config_hash({"seed": 3, "horizons": [1]})
    json.dumps(record)


def test_outputs_get_the_usual_mode_and_stale_temporaries_go(tmp_path):
    import os
    import stat

    import pandas as pd

    target = tmp_path / "table.parquet"
    stale = tmp_path / ".table.parquet.tmp-abc123.parquet"
    stale.write_bytes(b"left by a killed writer")
    other = tmp_path / ".other.parquet.tmp-xyz.parquet"
    other.write_bytes(b"another output's")
    old = os.umask(0o022)
    try:
        write_table(pd.DataFrame({"a": [1]}), target, columns={"a": "a number"})
    finally:
        os.umask(old)
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert not stale.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == [other.name, "table.parquet"]


def test_a_corrupt_table_or_game_is_named_with_what_to_do(tmp_path):
    import numpy as np
    import pytest

    from neurd import games
    from neurd.tables import InputFileError, read_table

    broken = tmp_path / "sweep.parquet"
    broken.write_bytes(b"PAR1 truncated")
    with pytest.raises(InputFileError, match=f"{broken}.*delete it"):
        read_table(broken)
    game = tmp_path / "kuhn.npz"
    games.save(games.compile_game("kuhn_poker"), game)
    game.write_bytes(game.read_bytes()[:200])
    with pytest.raises(games.GameFileError, match=f"{game}.*delete it"):
        games.load(game)
    del np


def test_compare_tables_finds_a_moved_number_and_new_columns(tmp_path):
    """bench/compare_tables.py, the before/after check of a change that must not move
    numbers: equal tables pass, a new column is listed, one changed value fails."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[1] / "bench" / "compare_tables.py"
    old, new = tmp_path / "old", tmp_path / "new"
    for root in (old, new):
        (root / "matrix").mkdir(parents=True)
    frame = pd.DataFrame({"horizon": [10, 20], "regret": [1.0, 2.0]})
    frame.to_parquet(old / "matrix/a.parquet")
    frame.assign(extra=[0, 1]).to_parquet(new / "matrix/a.parquet")

    def run():
        return subprocess.run([sys.executable, str(script), str(old), str(new)],
                              capture_output=True, text=True)

    same = run()
    assert same.returncode == 0 and "equal; new columns ['extra']" in same.stdout
    frame.assign(regret=[1.0, 2.0 + 1e-15]).to_parquet(new / "matrix/a.parquet")
    moved = run()
    assert moved.returncode == 1 and "matrix/a.parquet: differs" in moved.stdout
