"""Published Fig 6 runs (neurd.publication): every tracked publication is valid, the current
run of its config, agrees with OpenSpiel and is reproduced here; a stale, edited, incomplete
or foreign one is refused with a message naming the file, and never drawn."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neurd import publication
from neurd.pipeline.neural import NASHCONV_COLUMNS, SUMMARY_COLUMNS
from neurd.pipeline.published import expected_snapshot, neural_defaults
from neurd.publication import PublicationError
from neurd.tables import read_metadata, write_table

ROOT = Path(__file__).resolve().parents[1]
PUBLICATIONS = sorted(p for p in (ROOT / "published").iterdir()
                      if (p / publication.MANIFEST).is_file())
SMOKE = ROOT / "published/smoke"


def _configfile(folder: Path) -> Path:
    """The shipped config file whose published.folder is ``folder``."""
    from neurd.stages import load_config

    relative = folder.relative_to(ROOT).as_posix()
    for path in sorted((ROOT / "workflow/config").glob("*.yaml")):
        if load_config([path], ROOT, games=False)["published"]["folder"] == relative:
            return path
    raise AssertionError(f"no config file of workflow/config publishes into {relative}")


def _expected(folder: Path) -> dict:
    return expected_snapshot(str(_configfile(folder)), ROOT)


def test_the_smoke_publication_is_shipped():
    assert SMOKE in PUBLICATIONS


@pytest.mark.parametrize("folder", PUBLICATIONS, ids=lambda p: p.name)
def test_every_publication_is_the_current_run_of_its_config(folder):
    """Manifest hashes, the tables' documented columns and config hash, every run complete,
    and the config file it names as it is now."""
    manifest, cfg = publication.check(folder, _expected(folder), "", neural_defaults(ROOT))
    assert manifest["games"] and set(manifest["games"]) <= set(cfg["games"])
    assert manifest["bytes"] <= publication.MAX_BYTES
    for game in manifest["games"]:
        provenance = json.loads((folder / f"neural/{game}/provenance.json").read_text())
        assert provenance["config_hash"] == manifest["config_hash"]
        pieces = [p for job in provenance["jobs"] for p in job["pieces"]]
        assert pieces and all(p["seconds"] > 0 and p["jax"] and p["revision"] for p in pieces)


@pytest.mark.parametrize("folder", PUBLICATIONS, ids=lambda p: p.name)
def test_published_policies_give_the_published_nashconv_with_openspiel(folder):
    """OpenSpiel's NashConv of published end-of-phase policies (odd phases, where the game is
    OpenSpiel's own rather than its negation) is the published NashConv, to 1e-6; the
    policies kept are each algorithm's best entropy level."""
    import pyspiel

    from neurd.figures.fig6 import best_entropies

    manifest, cfg = publication.check(folder)
    rng = np.random.default_rng(0)
    for game in manifest["games"]:
        base = folder / f"neural/{game}"
        policies = pd.read_parquet(base / "policies.parquet")
        nashconv = pd.read_parquet(base / "nashconv.parquet").set_index(
            ["algorithm", "entropy", "seed", "phase", "iteration"]).nash_conv
        best = best_entropies(pd.read_parquet(base / "summary.parquet"), game)
        kept = policies.groupby("algorithm").entropy.unique()
        assert {a: list(e) for a, e in kept.items()} == {a: [e] for a, e in best.items()}
        keys = ["algorithm", "entropy", "seed", "phase"]
        runs = list(policies[policies.phase % 2 == 1].groupby(keys))
        chosen = rng.choice(len(runs), size=min(6, len(runs)), replace=False)
        spiel = pyspiel.load_game(cfg["game_strings"][game])
        for i in sorted(chosen):
            (algorithm, entropy, seed, phase), rows = runs[i]
            table = {s: list(zip(r.action, r.probability)) for s, r in rows.groupby("infostate")}
            value = pyspiel.nash_conv(spiel, pyspiel.TabularPolicy(table))
            recorded = nashconv.loc[(algorithm, entropy, seed, phase, rows.iteration.iloc[0])]
            assert value == pytest.approx(float(recorded), abs=1e-6)


@pytest.mark.parametrize("folder", PUBLICATIONS, ids=lambda p: p.name)
def test_the_first_checkpoints_of_a_publication_are_reproduced_here(folder):
    """Its first job's first learning cycles, run on this machine, give the published NashConv
    within the bound stated for two devices (README, "Determinism")."""
    from neurd import games

    manifest, cfg = publication.check(folder)
    game = next(iter(manifest["games"]))
    compiled = games.compile_configured(game, cfg["game_strings"], cfg.get("expected_infostates"),
                                        "neural")
    frame = publication.reproduce(folder, game, compiled)
    assert (frame.iteration > 0).any() and frame.algorithm.nunique() == len(cfg["algorithms"])
    assert frame.difference.max() <= publication.AGREEMENT_NASH_CONV, frame


# --- refusals, on a copy of the smoke publication -------------------------------------------


@pytest.fixture
def copy(tmp_path) -> Path:
    folder = tmp_path / "published/smoke"
    shutil.copytree(SMOKE, folder)
    return folder


def _rehash(folder: Path) -> None:
    """The manifest made to match the files again (as an edit that also forged it would)."""
    path = folder / publication.MANIFEST
    manifest = json.loads(path.read_text())
    for relative, entry in manifest["files"].items():
        entry["sha256"] = publication._sha256(folder / relative)
        entry["bytes"] = (folder / relative).stat().st_size
    path.write_text(json.dumps(manifest))


def _rewrite(path: Path, frame: pd.DataFrame, columns: dict, **config_changes) -> None:
    config = dict(read_metadata(path)["config"], **config_changes)
    write_table(frame, path, columns=columns, config=config)


def test_a_stale_publication_is_refused_naming_what_changed(copy):
    expected = _expected(SMOKE)
    publication.check(copy, expected, "smoke.yaml", neural_defaults(ROOT))
    with pytest.raises(PublicationError, match=r"stale.*neural\.seeds: 2 -> 3"):
        publication.check(copy, dict(expected, seeds=3), "smoke.yaml", neural_defaults(ROOT))


def test_a_key_added_since_is_current_at_its_default_only():
    published = {"seed": 0, "seeds": 2}
    defaults = {"new_reading": "today", "seeds": 5}
    assert publication.stale_keys(published, {**published, "new_reading": "today"},
                                  defaults) == []
    assert publication.stale_keys(published, {**published, "new_reading": "other"},
                                  defaults) == ['neural.new_reading: "<absent>" -> "other"']
    assert publication.stale_keys({**published, "gone": 1}, published, defaults) == [
        'neural.gone: 1 -> "<absent>"']


def test_an_edited_missing_or_stray_file_is_refused(copy):
    summary = copy / "neural/kuhn/summary.parquet"
    data = bytearray(summary.read_bytes())
    data[len(data) // 2] ^= 0xFF
    summary.write_bytes(bytes(data))
    with pytest.raises(PublicationError, match="summary.parquet is not the file that was"):
        publication.check(copy)
    shutil.copy(SMOKE / "neural/kuhn/summary.parquet", summary)
    publication.check(copy)
    (copy / "neural/kuhn/extra.parquet").write_bytes(b"x")
    with pytest.raises(PublicationError, match="extra.parquet is not in the manifest"):
        publication.check(copy)
    (copy / "neural/kuhn/extra.parquet").unlink()
    (copy / "neural/kuhn/policies.parquet").unlink()
    with pytest.raises(PublicationError, match="policies.parquet is missing"):
        publication.check(copy)


def test_a_table_of_other_columns_or_another_config_is_refused(copy):
    summary = copy / "neural/kuhn/summary.parquet"
    frame = pd.read_parquet(summary)
    columns = {k: v for k, v in SUMMARY_COLUMNS.items() if k != "average_nash_conv"}
    _rewrite(summary, frame[list(columns)], columns)
    _rehash(copy)
    with pytest.raises(PublicationError, match="summary.parquet: columns"):
        publication.check(copy)
    _rewrite(summary, frame, SUMMARY_COLUMNS, seeds=3)
    _rehash(copy)
    with pytest.raises(PublicationError, match="summary.parquet has config hash"):
        publication.check(copy)


def test_a_half_finished_run_is_refused(copy):
    path = copy / "neural/kuhn/nashconv.parquet"
    frame = pd.read_parquet(path)
    last = frame.iteration.max()
    run = (frame.algorithm == "neurd") & (frame.seed == 1) & (frame.entropy == 0.0)
    _rewrite(path, frame[~(run & (frame.iteration == last))], NASHCONV_COLUMNS)
    _rehash(copy)
    with pytest.raises(PublicationError, match=r"not a finished run: 1 runs not at every "
                                               r"checkpoint, e\.g\. \('neurd', 0\.0, 1\)"):
        publication.check(copy)
    _rewrite(path, frame[frame.seed == 0], NASHCONV_COLUMNS)
    _rehash(copy)
    with pytest.raises(PublicationError, match="not a finished run: 4 of 8 runs missing"):
        publication.check(copy)


def test_reproduction_measures_the_published_numbers(copy):
    """A published value moved by 0.01 is found 0.01 away: the comparison is of the numbers."""
    from neurd import games

    path = copy / "neural/kuhn/nashconv.parquet"
    frame = pd.read_parquet(path)
    moved = frame.iteration == 4
    assert moved.any()
    frame.loc[moved, "nash_conv"] += 0.01
    _rewrite(path, frame, NASHCONV_COLUMNS)
    _rehash(copy)
    cfg = publication.check(copy)[1]
    compiled = games.compile_configured("kuhn", cfg["game_strings"], None, "neural")
    result = publication.reproduce(copy, "kuhn", compiled)
    assert result[result.iteration == 4].difference.min() > 0.009
    assert result[result.iteration == 0].difference.max() <= publication.AGREEMENT_NASH_CONV


@pytest.mark.workflow
def test_the_workflow_refuses_a_stale_publication_before_any_job(tmp_path):
    for name in ("Snakefile", "workflow", "profiles", "published"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    smoke = tmp_path / "workflow/config/smoke.yaml"
    smoke.write_text(smoke.read_text().replace("  seeds: 2\n", "  seeds: 3\n"))
    run = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile",
                          "workflow/config/smoke.yaml"], cwd=tmp_path, capture_output=True,
                         text=True)
    assert run.returncode != 0
    assert "published/smoke is stale" in run.stderr + run.stdout
    assert "neural.seeds: 2 -> 3" in run.stderr + run.stdout
    (tmp_path / "none.yaml").write_text("published: {folder: null}\n")
    fresh = subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile",
                            "workflow/config/smoke.yaml", "none.yaml"], cwd=tmp_path,
                           capture_output=True, text=True)
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    assert "fig6_smoke" not in fresh.stdout
