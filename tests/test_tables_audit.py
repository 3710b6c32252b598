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


def _claim(figure, name, checks, otherwise="fail"):
    return audit.Claim(figure, name, "says", "measured", "criterion", checks, otherwise)


def test_claims_gather(tmp_path):
    audit.write_audit([_claim("fig9", "a | b", [audit.Check("x", 1.0, ">", 0)])],
                      tmp_path / "fig9.csv")
    audit.write_audit([_claim("fig8", "c", [audit.Check("y", 2, "<", 1)]),
                       _claim("fig8", "d", [audit.Check("z", 3, "==", 2)], "differs"),
                       _claim("fig8", "e", [audit.Check("w", float("nan"), "<", 1)])],
                      tmp_path / "fig8.csv")
    frame = audit.gather([tmp_path / "fig9.csv", tmp_path / "fig8.csv"], tmp_path / "claims.md",
                         tmp_path / "claims.html")
    assert list(frame.figure) == ["fig8", "fig8", "fig8", "fig9"]
    assert list(frame.verdict) == ["fail", "differs", "unmeasured", "pass"]
    text = (tmp_path / "claims.md").read_text()
    assert "Totals: pass: 1, fail: 1, differs: 1, tie: 0, unmeasured: 1" in text
    assert "a \\| b" in text and text.index("## fig8") < text.index("## fig9")
    assert "y: 2 < 1 -> fail" in text and "w: nan < 1 -> unmeasured" in text
    html = (tmp_path / "claims.html").read_text()
    for verdict, meaning in audit.MEANINGS.items():  # the headers define every verdict
        assert f"- **{verdict}**: {meaning}" in text
        assert f"<dt class='{verdict}'>{verdict}</dt>" in html
    assert set(audit.MEANINGS) == set(audit.VERDICTS)


def test_a_verdict_is_derived_from_its_checks_never_given():
    with pytest.raises(TypeError):
        audit.Claim("f", "c", "p", "m", "c", [audit.Check("x", 1, "<", 2)], "fail", verdict="pass")
    with pytest.raises(ValueError, match="otherwise"):
        _claim("f", "c", [audit.Check("x", 1, "<", 2)], "maybe")
    with pytest.raises(ValueError, match="comparison"):
        audit.Check("x", 1, "~", 2)
    with pytest.raises(ValueError, match="';'"):
        audit.Check("x; y", 1, "<", 2)
    with pytest.raises(ValueError, match="at least one check"):
        _claim("f", "c", [])


@pytest.mark.parametrize("observed, comparison, threshold, outcome", [
    (1.0, "<", 2.0, "pass"), (2.0, "<", 2.0, "fail"), (2.0, "<=", 2.0, "pass"),
    (3.0, ">", 2.0, "pass"), (2.0, ">=", 2.0, "pass"), (2.0, "==", 2.0, "pass"),
    (0.5, "in", (0.35, 0.65), "pass"), (0.7, "in", (0.35, 0.65), "fail"),
    ((-2.0, -1.0), audit.TIE_BELOW, 0.0, "pass"), ((1.0, 2.0), audit.TIE_BELOW, 0.0, "fail"),
    ((-1.0, 2.0), audit.TIE_BELOW, 0.0, "tie"), (0.0, audit.TIE_BELOW, 0.0, "tie"),
    (float("-inf"), audit.TIE_BELOW, 0.0, "pass"), (float("inf"), audit.TIE_BELOW, 0.0, "fail"),
    (float("inf") - float("inf"), audit.TIE_BELOW, 0.0, "unmeasured"),
    (float("inf"), "<", float("inf"), "fail"), (1.0, "<=", float("inf"), "pass"),
    (1.0, "<", float("nan"), "unmeasured"),
])
def test_each_comparison(observed, comparison, threshold, outcome):
    assert audit.Check("x", observed, comparison, threshold).outcome == outcome


def test_a_fail_decides_then_nothing_to_measure_then_a_tie():
    assert audit.judge(["pass", "tie", "unmeasured", "fail"]) == "fail"
    assert audit.judge(["pass", "tie", "unmeasured", "fail"], "differs") == "differs"
    assert audit.judge(["pass", "tie", "unmeasured"]) == "unmeasured"
    assert audit.judge(["pass", "tie"]) == "tie"
    assert audit.judge(["pass"]) == "pass"


def test_the_audit_file_keeps_every_number_exactly_and_refuses_a_stale_verdict(tmp_path):
    """A number round-trips bit for bit; a row whose verdict its checks no longer give (an
    edited file, or one kept from an older criterion) stops the gathering, naming it."""
    x = 0.1 + 0.2  # 0.30000000000000004: rounding would pass "<= 0.3"
    claim = _claim("fig9", "c", [audit.Check("x", x, "<=", 0.3),
                                 audit.paired_check("d", -0.011, 0.018)])
    assert claim.verdict == "fail"
    path = tmp_path / "fig9.csv"
    frame = audit.write_audit([claim], path)
    checks = audit.row_checks(pd.read_csv(path, dtype=str).iloc[0])
    assert checks[0].observed == x and checks[1].observed == (-0.011, 0.018)
    assert "x: 0.30000000000000004 <= 0.3 -> fail" in audit.judged_by(frame.iloc[0])
    assert "d: [-0.011, 0.018] < (tie: covers) 0 -> tie" in audit.judged_by(frame.iloc[0])
    path.write_text(path.read_text().replace(",fail\n", ",pass\n"))
    with pytest.raises(ValueError, match=r"fig9.csv: claim 'c' says 'pass' but its checks "
                                         r"give 'fail'"):
        audit.gather([path], tmp_path / "claims.md")
    path.write_text("figure,claim,verdict\nfig9,c,pass\n")
    with pytest.raises(ValueError, match="fig9.csv: audit tables must have columns"):
        audit.gather([path], tmp_path / "claims.md")


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
