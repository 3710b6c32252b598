"""Published Fig 6 runs (neurd.publication), a trust boundary: every tracked publication is
valid, the current run of its config, agrees with OpenSpiel and is reproduced here; it grows by
seed blocks, atomically; and what does not check is refused with one message naming the file,
before anything is replaced.  Each class of forgery is tested with the manifest resealed
around it (its hashes recomputed), so that the content check under test is what refuses it."""

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from neurd import games, publication
from neurd.figures import fig6
from neurd.neural.results import CURVES_COLUMNS, POLICY_COLUMNS, SUMMARY_COLUMNS, summary_table
from neurd.publication import BlockSource, PublicationError
from neurd.publication.commands import expected_snapshot, neural_defaults
from neurd.stats import best_entropies
from neurd.tables import read_metadata, write_table

ROOT = Path(__file__).resolve().parents[1]
PUBLICATIONS = sorted(p for p in (ROOT / "published").iterdir()
                      if (p / publication.MANIFEST).is_file())
SMOKE = ROOT / "published/smoke"


def _configfile(folder: Path) -> str:
    """The config file ``folder`` must be the run of: ``published.configfile`` of the shipped
    config files that draw it."""
    from neurd.stages import load_config

    relative = folder.relative_to(ROOT).as_posix()
    named = {load_config([path], ROOT, games=False)["published"]["configfile"]
             for path in sorted((ROOT / "workflow/config").glob("*.yaml"))
             if load_config([path], ROOT, games=False)["published"]["folder"] == relative}
    assert len(named) == 1, f"config files drawing {relative} name {named}"
    return named.pop()


def _expected(folder: Path) -> dict:
    return expected_snapshot(_configfile(folder), ROOT)


def test_the_smoke_and_paper_publications_are_shipped():
    assert SMOKE in PUBLICATIONS and ROOT / "published/paper" in PUBLICATIONS


@pytest.mark.parametrize("folder", PUBLICATIONS, ids=lambda p: p.name)
def test_every_publication_is_the_current_run_of_its_config(folder):
    """Files, hashes, config, every block's tables and the derived tables recomputed; the
    config file it names as it is now; every block's compute recorded."""
    manifest, cfg = publication.check(folder, _expected(folder), "", neural_defaults(ROOT))
    publication.check_content(folder, manifest, cfg)
    assert manifest["bytes"] <= publication.MAX_BYTES
    for game, entry in manifest["games"].items():
        for name in entry["blocks"]:
            provenance = json.loads((folder / publication.block_folder(game, name)
                                     / "provenance.json").read_text())
            assert provenance["config_hash"] == manifest["config_hash"]
            assert provenance["pieces"] and all(p["seconds"] > 0 and p["jax"] and p["revision"]
                                                for p in provenance["pieces"])


@pytest.mark.parametrize("folder", [p for p in PUBLICATIONS if publication.published_games(p)],
                         ids=lambda p: p.name)
def test_published_policies_give_the_published_nashconv_with_openspiel(folder):
    """OpenSpiel's NashConv of published end-of-phase policies (odd phases, where the game is
    OpenSpiel's own rather than its negation) is the published NashConv, to 1e-6; the
    policies kept are each algorithm's best entropy level within the block."""
    import pyspiel

    manifest, cfg = publication.check(folder)
    rng = np.random.default_rng(0)
    for game in publication.published_games(folder):
        for name in manifest["games"][game]["blocks"]:
            base = folder / publication.block_folder(game, name)
            policies = pd.read_parquet(base / "policies.parquet")
            if name.startswith("exact"):
                assert policies.empty
                continue
            curves = pd.read_parquet(base / "curves.parquet")
            nashconv = curves.set_index(["algorithm", "entropy", "seed", "phase",
                                         "iteration"]).nash_conv
            best = best_entropies(summary_table(cfg, curves), game)
            kept = policies.groupby("algorithm").entropy.unique()
            assert {a: list(e) for a, e in kept.items()} == {a: [e] for a, e in best.items()}
            keys = ["algorithm", "entropy", "seed", "phase"]
            runs = list(policies[policies.phase % 2 == 1].groupby(keys))
            chosen = rng.choice(len(runs), size=min(4, len(runs)), replace=False)
            spiel = pyspiel.load_game(cfg["game_strings"][game])
            for i in sorted(chosen):
                (algorithm, entropy, seed, phase), rows = runs[i]
                table = {s: list(zip(r.action, r.probability))
                         for s, r in rows.groupby("infostate")}
                value = pyspiel.nash_conv(spiel, pyspiel.TabularPolicy(table))
                recorded = nashconv.loc[(algorithm, entropy, seed, phase, rows.iteration.iloc[0])]
                assert value == pytest.approx(float(recorded), abs=1e-6)


@pytest.mark.parametrize("folder", [p for p in PUBLICATIONS if publication.published_games(p)],
                         ids=lambda p: p.name)
def test_every_block_is_reproduced_here(folder):
    """Each block's first learning cycles, run on this machine in the block's own batches, give
    the published NashConv within the bound stated for two devices; the exact NashConv of every
    published policy at its phase end is the published one (1e-9)."""
    manifest, cfg = publication.check(folder)
    for game in publication.published_games(folder):
        compiled = games.compile_configured(game, cfg["game_strings"],
                                            cfg.get("expected_infostates"), "neural")
        frame = publication.reproduce(folder, game, compiled)
        assert set(frame.block) == set(manifest["games"][game]["blocks"])
        assert (frame.iteration > 0).any() and frame.algorithm.nunique() == len(cfg["algorithms"])
        assert frame.difference.max() <= publication.AGREEMENT_NASH_CONV, frame
        ends = publication.phase_end_nash_conv(folder, game, compiled)
        assert len(ends) and ends.difference.max() <= publication.PHASE_END_TOLERANCE


def test_reproducing_no_cycle_is_refused():
    with pytest.raises(PublicationError, match="at least|>= 1"):
        publication.reproduce(SMOKE, "kuhn", None, cycles=0)
    run = subprocess.run([str(Path(sys.executable).parent / "neurd"), "published-reproduce",
                          str(SMOKE), "--game", "kuhn", "--cycles", "-2"], capture_output=True,
                         text=True, cwd=ROOT)
    assert run.returncode == 2 and "--cycles must be at least 1" in run.stderr
    assert "Traceback" not in run.stderr


# --- blocks of a tiny config, made here -------------------------------------------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, tiny_kuhn_config):
    """The tiny Kuhn config (2 entropy levels, 3 seeds, 3 phases of 8 iterations) with its
    compiled game and three finished blocks of one seed each, made by ``neurd neural-run
    --seeds`` (every entropy level's policies)."""
    from neurd import cli

    root = tmp_path_factory.mktemp("tiny")
    cfg = tiny_kuhn_config()
    (root / "neural.json").write_text(json.dumps(cfg))
    compiled = games.compile_configured("kuhn", cfg["game_strings"], None, "neural")
    games.save(compiled, root / "kuhn.npz")
    blocks = {}
    for seed in range(3):
        out = root / f"block_{seed}"
        out.mkdir()
        code = cli.main(["neural-run", "--config", str(root / "neural.json"), "--game", "kuhn",
                         "--critic", "learned", "--seeds", f"{seed}-{seed}",
                         "--compiled", str(root / "kuhn.npz"),
                         "--curves", str(out / "curves.parquet"),
                         "--policies", str(out / "policies.parquet")])
        assert code == 0
        blocks[seed] = BlockSource("kuhn", out / "curves.parquet", out / "policies.parquet")
    return {"cfg": cfg, "compiled": {"kuhn": compiled}, "blocks": blocks, "root": root}


def _add(tiny, folder, *seeds, **kwargs):
    return publication.add_blocks(folder, tiny["cfg"], [tiny["blocks"][s] for s in seeds],
                                  compiled=tiny["compiled"], **kwargs)


def _state(folder: Path) -> dict:
    return {p.relative_to(folder.parent).as_posix(): p.read_bytes()
            for p in sorted(folder.parent.rglob("*")) if p.is_file()}


def test_a_publication_grows_by_seed_blocks(tiny, tmp_path):
    """Valid at every size: empty, 1 of 3 seeds, then 3; the derived tables follow the seeds;
    a block already there is skipped; the manifest names blocks and seeds."""
    folder = tmp_path / "published/tiny"
    publication.init(folder, tiny["cfg"])
    manifest, _ = publication.check(folder)
    assert manifest["games"] == {} and publication.published_games(folder) == []
    manifest, added = _add(tiny, folder, 0)
    assert added == ["kuhn/learned_s0-0"] and manifest["games"]["kuhn"]["seeds"] == [0]
    summary = pd.read_parquet(folder / "neural/kuhn/summary.parquet")
    assert sorted(summary.seed.unique()) == [0]
    checked = publication.check(folder)
    tables = publication.fig6_tables(publication.check_content(folder, *checked,
                                                               compiled=tiny["compiled"]),
                                     folder, *checked)
    assert "1 of 40 seeds" in fig6.scale_label(tables["nashconv"], "kuhn", "tiny")[0]
    assert "1 of 3" in (folder / "README.md").read_text()
    manifest, added = _add(tiny, folder, 0, 1, 2)
    assert added == ["kuhn/learned_s1-1", "kuhn/learned_s2-2"]
    assert manifest["games"]["kuhn"]["seeds"] == [0, 1, 2]
    checked = publication.check(folder)
    curves = publication.check_content(folder, *checked, compiled=tiny["compiled"])
    tables = publication.fig6_tables(curves, folder, *checked)
    assert sorted(tables["summary"].seed.unique()) == [0, 1, 2]
    assert sorted(tables["nashconv"].seed.unique()) == [0, 1, 2]
    assert "3 of 40 seeds" in fig6.scale_label(tables["nashconv"], "kuhn", "tiny")[0]
    assert "3 of 3" in (folder / "README.md").read_text()


def test_a_block_overlapping_or_differing_from_a_published_one_is_refused(tiny, tmp_path):
    folder = tmp_path / "published/tiny"
    _add(tiny, folder, 0)
    before = _state(folder)
    other = tmp_path / "other"
    shutil.copytree(tiny["root"] / "block_1", other)
    frame = pd.read_parquet(other / "curves.parquet")
    meta = read_metadata(other / "curves.parquet")
    frame["seed"] = 0
    frame["nash_conv"] += 0.001
    extra = {k: v for k, v in meta.items()
             if k not in ("config", "config_hash", "seed", "columns", "version")}
    write_table(frame, other / "curves.parquet", columns=CURVES_COLUMNS, config=meta["config"],
                extra=extra | {"run_seeds": [0], "batches": [[0]]})
    with pytest.raises(PublicationError, match="learned_s0-0 is published already, with other"):
        publication.add_blocks(folder, tiny["cfg"], [BlockSource("kuhn", other / "curves.parquet",
                                                                 other / "policies.parquet")],
                               compiled=tiny["compiled"])
    assert _state(folder) == before


def test_a_bad_block_after_good_ones_leaves_the_publication_untouched(tiny, tmp_path):
    folder = tmp_path / "published/tiny"
    _add(tiny, folder, 0)
    before = _state(folder)
    bad = tmp_path / "bad"
    shutil.copytree(tiny["root"] / "block_2", bad)
    _edit_table(bad / "policies.parquet", lambda f: f.assign(
        probability=np.where(np.arange(len(f)) == 3, np.nan, f.probability)))
    with pytest.raises(PublicationError, match="policies.parquet holds probabilities"):
        publication.add_blocks(folder, tiny["cfg"], [
            tiny["blocks"][1], BlockSource("kuhn", bad / "curves.parquet",
                                           bad / "policies.parquet")],
            compiled=tiny["compiled"])
    assert _state(folder) == before, "a refused addition changed the publication"


def test_an_interrupted_publish_is_undone_by_the_next(tiny, tmp_path, monkeypatch):
    """Killed between its two renames, a publish leaves the old state aside and no folder: a
    reader says so; the next publish restores it and goes on."""
    folder = tmp_path / "published/tiny"
    _add(tiny, folder, 0)
    before = _state(folder)
    real_rename = os.rename
    calls = []

    def crash_after_first(src, dst):
        calls.append((src, dst))
        real_rename(src, dst)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the process dies here

    monkeypatch.setattr(publication.writer.os, "rename", crash_after_first)
    with pytest.raises(KeyboardInterrupt):
        _add(tiny, folder, 1)
    monkeypatch.undo()
    assert not folder.exists()
    with pytest.raises(PublicationError, match="interrupted publish"):
        publication.check(folder)
    manifest, added = _add(tiny, folder, 1)
    assert manifest["games"]["kuhn"]["seeds"] == [0, 1] and added == ["kuhn/learned_s1-1"]
    assert not publication.interrupted(folder)
    assert set(before) <= set(_state(folder)) | {"tiny/manifest.json", "tiny/README.md"}


def test_a_full_disk_is_named_and_changes_nothing(tiny, tmp_path, monkeypatch):
    folder = tmp_path / "published/tiny"
    _add(tiny, folder, 0)
    before = _state(folder)

    def full(src, dst, *args, **kwargs):
        raise OSError(28, "No space left on device", str(dst))

    monkeypatch.setattr(publication.writer.shutil, "copyfile", full)
    with pytest.raises(PublicationError, match=r"writing .*published/tiny/\S+: No space left on "
                                               r"device; .*published/tiny is unchanged"):
        _add(tiny, folder, 1)
    monkeypatch.undo()
    assert _state(folder) == before and not publication.interrupted(folder)


def test_a_block_of_another_config_or_game_is_refused(tiny, tmp_path):
    folder = tmp_path / "published/tiny"
    other_cfg = dict(tiny["cfg"], policy_learning_rate=0.5)
    with pytest.raises(PublicationError, match="made from another config"):
        publication.add_blocks(folder, other_cfg, [tiny["blocks"][0]], compiled=tiny["compiled"])
    kuhn = tiny["compiled"]["kuhn"]
    other_game = dataclasses.replace(kuhn, history_returns=kuhn.history_returns * 2)
    with pytest.raises(PublicationError, match="content hash"):
        publication.add_blocks(folder, tiny["cfg"], [tiny["blocks"][0]],
                               compiled={"kuhn": other_game})
    assert not folder.exists()


# --- forgeries with a resealed manifest ------------------------------------------------------


@pytest.fixture
def grown(tiny, tmp_path) -> Path:
    folder = tmp_path / "published/tiny"
    _add(tiny, folder, 0, 1)
    return folder


def _reseal(folder: Path) -> None:
    """The manifest made to match the files again (as a forger who also rewrote it would)."""
    path = folder / publication.MANIFEST
    manifest = json.loads(path.read_text())
    for relative, entry in manifest["files"].items():
        if (folder / relative).is_file():
            entry["sha256"] = publication.sha256(folder / relative)
            entry["bytes"] = (folder / relative).stat().st_size
    path.write_text(json.dumps(manifest))


def _edit_table(path: Path, edit) -> None:
    meta = read_metadata(path)
    frame = pd.read_parquet(path)
    columns = {c: meta["columns"][c] for c in frame.columns}  # the metadata's keys are sorted
    extra = {k: v for k, v in meta.items()
             if k not in ("config", "config_hash", "seed", "columns", "version")}
    write_table(edit(frame), path, columns=columns, config=meta["config"], extra=extra)


def _refused(tiny, folder: Path, match: str):
    _reseal(folder)
    with pytest.raises(PublicationError, match=match) as error:
        checked = publication.check(folder)
        publication.check_content(folder, *checked, compiled=tiny["compiled"])
    return error.value


BLOCK = "neural/kuhn/blocks/learned_s0-0"


def _flip_summary(frame):
    """NeuRD's and SPG's final NashConv swapped: the verdicts they feed would flip."""
    swapped = frame.copy()
    neurd, spg = frame.algorithm == "neurd", frame.algorithm == "spg"
    swapped.loc[neurd, "final_nash_conv"] = frame.loc[spg, "final_nash_conv"].to_numpy()
    swapped.loc[spg, "final_nash_conv"] = frame.loc[neurd, "final_nash_conv"].to_numpy()
    return swapped


@pytest.mark.parametrize("path, edit, match", [
    ("neural/kuhn/summary.parquet", _flip_summary, "summary.parquet: column final_nash_conv is "
     "not what its blocks give"),
    ("neural/kuhn/nashconv_ci.parquet", lambda f: f.assign(ci_high=f.ci_high + 0.1),
     "nashconv_ci.parquet: column ci_high is not what its blocks give"),
    ("neural/kuhn/summary.parquet", lambda f: f.iloc[0:0], "not the table its blocks give"),
    (f"{BLOCK}/curves.parquet", lambda f: f.assign(nash_conv=np.where(
        np.arange(len(f)) == 5, np.nan, f.nash_conv)), "nash_conv = nan"),
    (f"{BLOCK}/curves.parquet", lambda f: f.assign(nash_conv=np.where(
        np.arange(len(f)) == 5, np.inf, f.nash_conv)), "nash_conv = inf"),
    (f"{BLOCK}/curves.parquet", lambda f: f.assign(nash_conv=np.where(
        np.arange(len(f)) == 5, -0.5, f.nash_conv)), "nash_conv = -0.5"),
    (f"{BLOCK}/curves.parquet", lambda f: f.iloc[0:0], "runs missing"),
    (f"{BLOCK}/curves.parquet", lambda f: pd.concat([f, f.iloc[[3]].assign(
        nash_conv=f.nash_conv.iloc[3] + 1)]), "two rows for"),
    (f"{BLOCK}/curves.parquet", lambda f: f[f.iteration != f.iteration.max()],
     "not exactly at the checkpoints"),
    (f"{BLOCK}/curves.parquet", lambda f: f.assign(at_threshold=f.at_threshold + 2),
     "at_threshold = "),
    (f"{BLOCK}/policies.parquet", lambda f: f.assign(probability=np.where(
        np.arange(len(f)) == 2, np.nan, f.probability)), "probabilities that are not finite"),
    (f"{BLOCK}/policies.parquet", lambda f: f.assign(probability=f.probability * 0.9),
     "do not sum to 1"),
    (f"{BLOCK}/policies.parquet", lambda f: f.iloc[0:0], "rows, the block's policies are"),
    (f"{BLOCK}/policies.parquet", lambda f: f.assign(entropy=0.1 if f.entropy.iloc[0] == 0.0
                                                     else 0.0), "holds the runs"),
], ids=["summary-flipped", "ci-edited", "summary-empty", "nashconv-nan", "nashconv-inf",
        "nashconv-negative", "curves-empty", "duplicate-conflicting", "run-short",
        "out-of-range", "probability-nan", "probability-sum", "policies-empty",
        "policies-not-the-best-level"])
def test_edited_content_is_refused_even_with_a_resealed_manifest(tiny, grown, path, edit, match):
    _edit_table(grown / path, edit)
    error = _refused(tiny, grown, match)
    assert str(grown / path) in str(error)


def test_an_edited_or_unreadable_provenance_is_refused(tiny, grown):
    path = grown / BLOCK / "provenance.json"
    record = json.loads(path.read_text())
    record["pieces"][0]["device"] = "NVIDIA H200"
    path.write_text(json.dumps(record))
    _refused(tiny, grown, "provenance.json is not what the block's curves record")
    path.write_text("{not json")
    _refused(tiny, grown, "provenance.json cannot be read")


@pytest.mark.parametrize("listed", ["../../README.md", "/etc/passwd", "neural/../x",
                                    "manifest.json"])
def test_a_listed_path_outside_the_folder_is_refused(tiny, grown, listed):
    path = grown / publication.MANIFEST
    manifest = json.loads(path.read_text())
    manifest["files"][listed] = {"sha256": "0" * 64, "bytes": 1}
    path.write_text(json.dumps(manifest))
    with pytest.raises(PublicationError, match="not a plain path inside the folder"):
        publication.check(grown)


def test_links_and_oversized_files_are_refused(tiny, grown, tmp_path, monkeypatch):
    outside = tmp_path / "outside.parquet"
    shutil.copy(grown / BLOCK / "policies.parquet", outside)
    (grown / BLOCK / "policies.parquet").unlink()
    (grown / BLOCK / "policies.parquet").symlink_to(outside)
    with pytest.raises(PublicationError, match="is a link"):
        publication.check(grown)
    (grown / BLOCK / "policies.parquet").unlink()
    shutil.copy(outside, grown / BLOCK / "policies.parquet")
    publication.check(grown)
    monkeypatch.setattr(publication.integrity, "MAX_BYTES", 1000)
    with pytest.raises(PublicationError, match="more than 0 MiB"):
        publication.check(grown)


def test_a_seed_in_two_blocks_or_a_block_off_the_config_is_refused(tiny, grown):
    path = grown / publication.MANIFEST
    manifest = json.loads(path.read_text())
    manifest["games"]["kuhn"]["blocks"].append("learned_s0-1")
    path.write_text(json.dumps(manifest))
    with pytest.raises(PublicationError, match="are in two learned blocks"):
        publication.check(grown)
    manifest["games"]["kuhn"]["blocks"] = ["learned_s0-0", "learned_s1-7"]
    path.write_text(json.dumps(manifest))
    with pytest.raises(PublicationError, match="seeds 1-7 are not run seeds"):
        publication.check(grown)


@pytest.mark.parametrize("edit, match", [
    (lambda m: m.update(version=1), "version 1"),
    (lambda m: m.update(files=[]), "files is not a mapping"),
    (lambda m: m.update(games={"kuhn": "all"}), "is not a record of blocks and seeds"),
    (lambda m: m.update(config_hash=7), "config_hash is not 16 hex digits"),
    (lambda m: m["files"].update({"README.md": {"sha256": "x", "bytes": 1}}),
     "is not a record of sha256 and bytes"),
    (lambda m: m["games"]["kuhn"].update(blocks=["learned_7"]), "not a seed block's name"),
], ids=["version", "files", "games", "hash", "entry", "block-name"])
def test_a_malformed_manifest_is_refused_in_one_line(grown, edit, match):
    path = grown / publication.MANIFEST
    manifest = json.loads(path.read_text())
    edit(manifest)
    path.write_text(json.dumps(manifest))
    with pytest.raises(PublicationError, match=match) as error:
        publication.check(grown)
    assert str(path) in str(error.value) and "\n" not in str(error.value)


def test_a_stale_publication_is_refused_naming_what_changed():
    expected = _expected(SMOKE)
    publication.check(SMOKE, expected, "smoke.yaml", neural_defaults(ROOT))
    with pytest.raises(PublicationError, match=r"stale.*neural\.seeds: 2 -> 3"):
        publication.check(SMOKE, dict(expected, seeds=3), "smoke.yaml", neural_defaults(ROOT))


def test_a_key_added_since_is_current_at_its_default_only():
    published = {"seed": 0, "seeds": 2}
    defaults = {"new_reading": "today", "seeds": 5}
    assert publication.stale_keys(published, {**published, "new_reading": "today"},
                                  defaults) == []
    assert publication.stale_keys(published, {**published, "new_reading": "other"},
                                  defaults) == ['neural.new_reading: "<absent>" -> "other"']
    assert publication.stale_keys({**published, "gone": 1}, published, defaults) == [
        'neural.gone: 1 -> "<absent>"']


def test_an_edited_missing_or_stray_file_is_refused(tmp_path):
    copy = tmp_path / "published/smoke"
    shutil.copytree(SMOKE, copy)
    summary = copy / "neural/kuhn/summary.parquet"
    data = bytearray(summary.read_bytes())
    data[len(data) // 2] ^= 0xFF
    summary.write_bytes(bytes(data))
    with pytest.raises(PublicationError, match="summary.parquet is not the file that was"):
        publication.check(copy)
    shutil.copy(SMOKE / "neural/kuhn/summary.parquet", summary)
    publication.check(copy)
    (copy / "extra.parquet").write_bytes(b"x")
    with pytest.raises(PublicationError, match="extra.parquet is not in the manifest"):
        publication.check(copy)
    (copy / "extra.parquet").unlink()
    (copy / f"{BLOCK}/policies.parquet").unlink()
    with pytest.raises(PublicationError, match="policies.parquet is missing"):
        publication.check(copy)


def test_reproduction_measures_the_published_numbers(tmp_path):
    """A published value moved by 0.01 is found 0.01 away: the comparison is of the numbers."""
    copy = tmp_path / "published/smoke"
    shutil.copytree(SMOKE, copy)
    path = copy / BLOCK / "curves.parquet"
    frame = pd.read_parquet(path)
    moved = frame.iteration == 4
    assert moved.any()
    _edit_table(path, lambda f: f.assign(nash_conv=np.where(f.iteration == 4, f.nash_conv + 0.01,
                                                            f.nash_conv)))
    _reseal(copy)
    cfg = publication.check(copy)[1]
    compiled = games.compile_configured("kuhn", cfg["game_strings"], None, "neural")
    result = publication.reproduce(copy, "kuhn", compiled)
    mine = result[result.block == "learned_s0-0"]
    assert mine[mine.iteration == 4].difference.min() > 0.009
    assert mine[mine.iteration == 0].difference.max() <= publication.AGREEMENT_NASH_CONV


def test_summary_columns_are_the_documented_ones():
    assert list(publication.DERIVED["summary"]) == list(SUMMARY_COLUMNS)
    assert "probability" in POLICY_COLUMNS


@pytest.mark.workflow
def test_the_workflow_refuses_a_stale_missing_or_emptied_publication(tmp_path):
    """Before any job, naming published.folder: a stale publication, a configured folder that is
    missing, emptied or a file; published.folder null draws none, silently."""
    for name in ("Snakefile", "workflow", "profiles", "published"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)

    def dry(*files):
        return subprocess.run([sys.executable, "-m", "snakemake", "-n", "--configfile",
                               "workflow/config/smoke.yaml", *files], cwd=tmp_path,
                              capture_output=True, text=True)

    smoke = tmp_path / "workflow/config/smoke.yaml"
    text = smoke.read_text()
    smoke.write_text(text.replace("  seeds: 2\n", "  seeds: 3\n"))
    run = dry()
    assert run.returncode != 0
    assert "published/smoke is stale" in run.stderr + run.stdout
    assert "neural.seeds: 2 -> 3" in run.stderr + run.stdout
    smoke.write_text(text)
    (tmp_path / "none.yaml").write_text("published: {folder: null}\n")
    fresh = dry("none.yaml")
    assert fresh.returncode == 0, fresh.stderr[-2000:]
    assert "fig6_smoke" not in fresh.stdout
    for damage in ("missing", "emptied", "file"):
        shutil.rmtree(tmp_path / "published/smoke", ignore_errors=True)
        if damage == "emptied":
            (tmp_path / "published/smoke").mkdir()
        elif damage == "file":
            (tmp_path / "published/smoke").write_text("x")
        run = dry()
        assert run.returncode != 0, damage
        assert "published.folder" in run.stderr + run.stdout, damage
        assert "Traceback" not in run.stderr, damage
        if damage == "file":
            (tmp_path / "published/smoke").unlink()


def test_a_block_folder_holding_another_blocks_tables_is_refused(tiny, grown):
    """The block named s0-0 holding seed 1's tables (a job folder of another seed block)."""
    for name in publication.BLOCK_FILES:
        shutil.copy(grown / "neural/kuhn/blocks/learned_s1-1" / name, grown / BLOCK / name)
    _refused(tiny, grown, r"holds run seeds \[1\], the block learned_s0-0 is \[0\]")


def test_a_pack_may_hold_only_block_files_of_configured_games():
    from neurd.publication.commands import pack_member_allowed

    allowed = pack_member_allowed({"games": ["kuhn", "leduc"]})
    assert allowed("neural/kuhn/blocks/learned_s0-39/curves.parquet")
    assert allowed("neural/leduc/blocks/exact_s3-4/run.log")
    for member in ("neural/goofspiel/blocks/learned_s0-0/curves.parquet",  # not configured
                   "neural/kuhn/game.npz", "neural/kuhn/summary.parquet",
                   "neural/kuhn/blocks/learned_s0-0/meta.json",
                   "neural/kuhn/blocks/learned_0/curves.parquet", "README.md",
                   "published/paper/manifest.json"):
        assert not allowed(member), member


def test_the_docs_state_what_the_paper_publication_holds():
    """docs/paper-scale.md's table of the published paper-scale run is its manifest's: seeds,
    blocks, CPU hours and GPU minutes per game."""
    import re

    manifest, cfg = publication.check(ROOT / "published/paper")
    text = (ROOT / "docs/paper-scale.md").read_text()
    rows = dict(re.findall(r"^\| (Kuhn|Leduc|Goofspiel) \| (\d+ of \d+ \|.+) \|$", text,
                           flags=re.M))  # the table of seeds (not the one of costs below it)
    assert set(rows) == {"Kuhn", "Leduc", "Goofspiel"}
    for game in cfg["games"]:
        entry = manifest["games"].get(game, {"seeds": [], "blocks": []})
        seeds, blocks, hours, minutes = (c.strip() for c in rows[game.capitalize()].split("|"))
        assert seeds == f"{len(entry['seeds'])} of {cfg['seeds']}", game
        assert int(blocks) == len(entry["blocks"]), game
        assert float(hours) == pytest.approx(entry.get("cpu_hours", 0), abs=0.005), game
        assert float(minutes) == pytest.approx(entry.get("gpu_minutes", 0), abs=0.05), game


def test_the_docs_state_what_the_rest_costs_on_each_processor_measured(monkeypatch):
    """docs/paper-scale.md's cost of the rest is what `neurd published-costs` writes from the
    publication and the throughput files in bench/cpu (make publish-blocks writes it)."""
    from neurd.publication import costs_page

    monkeypatch.chdir(ROOT)  # as make runs it: the folders named from the repository's root
    text = (ROOT / "docs/paper-scale.md").read_text()
    span = costs_page.page_part(text, "published/paper")
    assert span is not None
    assert text[span[0]:span[1]].strip() == costs_page.section("published/paper", "bench/cpu")


def test_kept_allocation_reports_name_no_machines_paths():
    """An allocation's report kept in bench/ (make publish-blocks) names files from the
    repository's root, never by the path of the machine it ran on."""
    from neurd.publication.commands import relative_paths

    assert relative_paths('"log": "  File \\"/home/u/repo/results/paper/code/src/neurd/cli.py\\""'
                          ) == '"log": "  File \\"results/paper/code/src/neurd/cli.py\\""'
    assert relative_paths("/srv/x/bench/cpu/a.json, src/neurd/b.py, https://x.org/src/c"
                          ) == "bench/cpu/a.json, src/neurd/b.py, https://x.org/src/c"
    for path in sorted(ROOT.glob("bench/*/allocations/*.json")):
        text = path.read_text()
        assert relative_paths(text) == text, f"{path.relative_to(ROOT)} names a machine's path"


def test_the_failure_paper_scale_md_quotes_is_the_kept_reports():
    """docs/paper-scale.md's run that diverges quotes the error it once failed its block with
    from the allocation report it names, as that report holds it."""
    import re

    page = (ROOT / "docs/paper-scale.md").read_text()
    section = page.split("### A run that diverges", 1)[1].split("\n## ", 1)[0]
    report = re.search(r"`(bench/cpu/allocations/[^`]+\.json)`", section)[1]
    quoted = re.search(r'"(NashConv is not finite at iteration \d+ for configuration\s+'
                       r"\('neurd', [\d.]+,\s+\d+\))\"", section)[1]
    jobs = json.loads((ROOT / report).read_text())["jobs"]
    logs = " ".join(j.get("log", "") for j in jobs)
    assert " ".join(quoted.split()) in " ".join(logs.split())


def test_derive_again_makes_a_stale_derived_table_what_its_blocks_give(tmp_path):
    """``neurd published-derive``: a publication whose summary was made before a column was
    added (the manifest matching it) is refused by the content check, and is what its blocks
    give again once derived again; the blocks are not touched."""
    folder = tmp_path / "smoke"
    shutil.copytree(ROOT / "published/smoke", folder)
    cfg = publication.check(folder)[1]
    summary = folder / "neural/kuhn/summary.parquet"
    current = pd.read_parquet(summary)
    blocks = {p: p.read_bytes() for p in folder.glob("neural/kuhn/blocks/*/*")}
    meta = read_metadata(summary)
    write_table(current.drop(columns="diverged_at"), summary,
                columns={c: d for c, d in meta["columns"].items() if c != "diverged_at"},
                config=meta["config"], extra={"seeds": meta["seeds"]})
    _reseal(folder)
    with pytest.raises(PublicationError, match="summary.parquet is not the table its blocks"):
        publication.check_content(folder, *publication.check(folder))
    publication.derive_again(folder, cfg)
    publication.check_content(folder, *publication.check(folder))
    pd.testing.assert_frame_equal(pd.read_parquet(summary), current)
    assert {p: p.read_bytes() for p in folder.glob("neural/kuhn/blocks/*/*")} == blocks
