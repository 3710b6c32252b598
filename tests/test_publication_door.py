"""What a publication lets in, refused at its door in one line naming the file or block, with
nothing written: a block whose numbers were changed under a consistent index (its first cycles
run again here and its phase ends recomputed before it is published), a table that is no
Parquet (truncated, or text in its place) in a publication or a pack, a publication whose
content was emptied under a consistent manifest (refused by ``neurd check-config``, which
``make figures`` runs first), and another config's publication in the config's folder (named
as another config's, not as a stray file)."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import test_publication as shared

from neurd import publication
from neurd.publication import BlockSource, PublicationError, intake
from neurd.publication.commands import expected_snapshot, neural_defaults
from neurd.publication.intake import BlockRefused
from neurd.tables import InputFileError, read_metadata, write_table

# the tiny config's blocks and a publication of two of them (test_publication's fixtures)
tiny, grown = shared.tiny, shared.grown
_add, _edit_table, _reseal, _state = shared._add, shared._edit_table, shared._reseal, shared._state
ROOT = Path(__file__).resolve().parents[1]
NEURD = str(Path(sys.executable).parent / "neurd")
BLOCK = "neural/kuhn/blocks/learned_s2-2"


def _forged(tiny, tmp_path, table: str, edit) -> BlockSource:
    """Block 2's job tables with ``table`` edited and rewritten whole (its metadata, every
    column's documentation and hash as the job wrote them): a consistent forgery."""
    source = tiny["blocks"][2]
    out = tmp_path / "forged"
    out.mkdir(exist_ok=True)
    for name in ("curves", "policies"):
        shutil.copy(getattr(source, name), out / f"{name}.parquet")
    _edit_table(out / f"{table}.parquet", edit)
    return BlockSource("kuhn", out / "curves.parquet", out / "policies.parquet")


def _halved(frame):
    frame = frame.copy()
    frame["nash_conv"] = frame.nash_conv / 2
    return frame


def _uniform(frame):
    frame = frame.copy()
    counts = frame.groupby(["algorithm", "entropy", "seed", "phase", "infostate"]).action \
        .transform("count")
    frame["probability"] = 1.0 / counts
    return frame


@pytest.mark.parametrize("table, edit, said", [
    ("curves", _halved, "does not reproduce here"),
    ("policies", _uniform, "the exact NashConv of its published policy at the end of phase"),
])
def test_a_block_with_other_numbers_under_a_consistent_index_is_not_published(
        tiny, grown, tmp_path, table, edit, said):
    before = _state(grown)
    forged = _forged(tiny, tmp_path, table, edit)
    with pytest.raises(BlockRefused) as refused:
        publication.add_blocks(grown, tiny["cfg"], [forged], compiled=tiny["compiled"])
    message = str(refused.value)
    assert "\n" not in message and "kuhn block learned_s2-2" in message and said in message
    assert "difference" in message and "beyond the bound" in message, message
    assert _state(grown) == before  # nothing written, nothing left beside it


def test_a_genuine_block_passes_the_same_checks(tiny):
    source = tiny["blocks"][2]
    from neurd.tables import read_metadata, read_table

    meta = read_metadata(source.curves)
    found = intake.verify_block(tiny["cfg"], "kuhn", "learned_s2-2", meta["batches"],
                                read_table(source.curves), read_table(source.policies),
                                tiny["compiled"]["kuhn"])
    assert found["reproduced"] > 0 and found["largest"] <= intake.AGREEMENT_NASH_CONV
    assert found["phase_ends"] > 0 and found["largest_phase_end"] <= intake.PHASE_END_TOLERANCE


def _not_parquet(path: Path, how: str) -> None:
    if how == "text":
        path.write_text("algorithm,entropy,seed\nneurd,0.0,0\n")
    else:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("how", ["text", "truncated"])
@pytest.mark.parametrize("relative", [f"{BLOCK}/curves.parquet", f"{BLOCK}/policies.parquet",
                                      "neural/kuhn/summary.parquet"])
def test_a_table_that_is_no_parquet_in_a_publication_is_named_in_one_line(
        tiny, grown, relative, how):
    _add(tiny, grown, 2)
    _not_parquet(grown / relative, how)
    _reseal(grown)
    with pytest.raises((PublicationError, InputFileError)) as refused:
        publication.check_content(grown, *publication.check(grown), compiled=tiny["compiled"])
    message = str(refused.value)
    assert "\n" not in message and str(grown / relative) in message, message
    run = subprocess.run([NEURD, "published-check", str(grown)], capture_output=True, text=True)
    errors = [line for line in run.stderr.splitlines() if " ERROR " in line]
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert len(errors) == 1 and str(grown / relative) in errors[0], run.stderr[-2000:]


@pytest.mark.parametrize("how", ["text", "truncated"])
@pytest.mark.parametrize("name", ["curves", "policies"])
def test_a_table_that_is_no_parquet_in_a_pack_is_named_and_nothing_written(
        tiny, grown, tmp_path, name, how):
    before = _state(grown)
    source = _forged(tiny, tmp_path, "curves", lambda frame: frame)
    _not_parquet(getattr(source, name), how)
    with pytest.raises((PublicationError, InputFileError)) as refused:
        publication.add_blocks(grown, tiny["cfg"], [source], compiled=tiny["compiled"])
    message = str(refused.value)
    assert "\n" not in message and str(getattr(source, name)) in message, message
    assert _state(grown) == before


@pytest.fixture
def workflow(tmp_path) -> Path:
    """A copy of the workflow with its publications."""
    for name in ("Snakefile", "workflow", "published"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    return tmp_path


def test_an_emptied_table_under_a_consistent_manifest_is_refused_by_check_config(workflow):
    summary = workflow / "published/smoke/neural/kuhn/summary.parquet"
    _edit_table(summary, lambda frame: frame.iloc[0:0])
    _reseal(workflow / "published/smoke")
    before = _state(workflow / "published/smoke")
    run = subprocess.run([NEURD, "check-config", "--workflow", str(workflow),
                          str(workflow / "workflow/config/smoke.yaml")], capture_output=True,
                         text=True, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    errors = [line for line in run.stderr.splitlines() if " ERROR " in line]
    assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr[-2000:]
    assert len(errors) == 1 and "published.folder" in errors[0], run.stderr[-2000:]
    assert str(summary) in errors[0] and "0 rows" in errors[0], errors[0]
    assert _state(workflow / "published/smoke") == before


def test_another_configs_publication_in_the_folder_is_named_as_such(workflow):
    smoke, paper = workflow / "published/smoke", workflow / "published/paper"
    for path in paper.rglob("*"):  # the paper publication copied over the smoke one
        if path.is_file():
            target = smoke / path.relative_to(paper)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, target)
    configfile = str(workflow / "workflow/config/smoke.yaml")
    with pytest.raises(PublicationError) as refused:
        publication.check(smoke, expected_snapshot(configfile, workflow), configfile,
                          neural_defaults(workflow))
    message = str(refused.value)
    assert "is stale" in message and "other than the one" in message, message
    assert "not in the manifest" not in message
    assert json.loads((smoke / publication.MANIFEST).read_text())["config_hash"] in message


def test_a_refused_block_is_one_line_of_the_command_line(monkeypatch, caplog):
    """``neurd published-add`` reports a refused block as every refusal: one error line, exit
    status 2, no traceback."""
    from neurd import cli
    from neurd.publication import commands

    def refuse(args):
        raise BlockRefused("pack: kuhn block learned_s0-0 does not reproduce here: ...")

    monkeypatch.setattr(commands, "_add", refuse)
    assert cli.main(["published-add", "workflow/config/smoke.yaml", "pack"]) == 2
    errors = [r for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and "learned_s0-0 does not reproduce" in errors[0].getMessage()


def _rewritten(path: Path, frame: pd.DataFrame, **metadata) -> None:
    """``path``'s table rewritten as ``frame``, its metadata as it was but for ``metadata``."""
    meta = read_metadata(path)
    extra = {k: v for k, v in meta.items()
             if k not in ("config", "config_hash", "seed", "columns", "version")}
    write_table(frame, path, columns={c: meta["columns"][c] for c in frame.columns},
                config=meta["config"], extra={**extra, **metadata})


def _relabelled(tiny, tmp_path, seed: int) -> BlockSource:
    """Block 0's tables copied under seed ``seed``'s name, every index made consistent: the
    seed column and the metadata's run seeds and batches."""
    out = tmp_path / f"copied_{seed}"
    out.mkdir()
    for name in ("curves", "policies"):
        shutil.copy(getattr(tiny["blocks"][0], name), out / f"{name}.parquet")
        path = out / f"{name}.parquet"
        indexes = ({"run_seeds": [seed], "batches": [[seed]]}
                   if "run_seeds" in read_metadata(path) else {})
        _rewritten(path, pd.read_parquet(path).assign(seed=seed), **indexes)
    return BlockSource("kuhn", out / "curves.parquet", out / "policies.parquet")


def test_a_block_copied_under_another_seeds_name_is_refused(tiny, grown, tmp_path,
                                                            monkeypatch):
    """A copy of seed 0's block under seed 2's name, its indexes consistent, let past the
    intake's replay (as a hand-made publication would be): the publication's own check, the
    one make figures and published-check run, refuses it, naming the two seeds."""
    monkeypatch.setattr(intake, "verify_block", lambda *args, **kwargs: None)
    copied = _relabelled(tiny, tmp_path, 2)
    with pytest.raises(PublicationError, match="seeds 0 and 2 have the same curves"):
        publication.add_blocks(grown, tiny["cfg"], [copied], compiled=tiny["compiled"])
        checked = publication.check(grown)
        publication.check_content(grown, *checked, compiled=tiny["compiled"])


def test_a_piece_of_negative_or_endless_compute_is_refused(tiny, grown, tmp_path):
    """A block whose pieces record negative (or infinite) seconds would publish "-535.72" CPU
    hours into the README: refused at the door, naming the file."""
    for seconds in (-535.72 * 3600, float("inf"), 0.0):
        forged = _forged(tiny, tmp_path, "curves", lambda frame: frame)
        pieces = [{**p, "seconds": seconds} for p in read_metadata(forged.curves)["pieces"]]
        _rewritten(forged.curves, pd.read_parquet(forged.curves), pieces=pieces)
        with pytest.raises(PublicationError, match="not a positive, finite number"):
            publication.add_blocks(grown, tiny["cfg"], [forged], compiled=tiny["compiled"])


def test_nothing_is_kept_from_a_refused_pack(tiny, grown, tmp_path, monkeypatch):
    """A pack whose block does not reproduce is refused whole: the publication unchanged, and
    its allocation's report not kept (it was, before the refusal, once)."""
    from types import SimpleNamespace

    from neurd.publication import packs
    from neurd.publication.commands import _add
    from neurd.tables import config_hash

    forged = _forged(tiny, tmp_path, "curves", _halved)
    block = "neural/kuhn/blocks/learned_s2-2"
    packs.pack({f"{block}/curves.parquet": forged.curves,
                f"{block}/policies.parquet": forged.policies}, tmp_path / "pack", "blocks",
               extra={"config_hash": config_hash(tiny["cfg"]),
                      "allocation": {"kind": "cpu", "date": "2026-12-06"}})
    monkeypatch.setattr("neurd.publication.commands._config_and_folder",
                        lambda args: (tiny["cfg"], grown, tmp_path / "work"))
    before, reports = _state(grown), tmp_path / "reports"
    with pytest.raises(BlockRefused, match="does not reproduce here"):
        _add(SimpleNamespace(packs=[str(tmp_path / "pack")], keep_reports=str(reports),
                             keep_cpu_reports=str(reports), replace=False, configfile="tiny",
                             workflow="."))
    assert _state(grown) == before and not reports.exists()
