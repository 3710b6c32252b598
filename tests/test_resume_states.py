"""Blocks in progress (neurd.publication.resume_states): a seed block stopped at the end of one
allocation
is published as its saved state and resumed by the next; the block run in three pieces, each
published in between, equals the block run whole; a state that is truncated, of another config,
game or seeds, or whose pieces do not add up to the cycles its curves measured, is refused
naming the file, and the publication is left as it was."""

import hashlib
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from neurd import cli, games, publication
from neurd.neural import checkpoint
from neurd.publication import BlockSource, PublicationError, resume_states

BLOCK = "learned_s0-1"
STOP = ["--stop-after-minutes", "0.0001"]  # stops two checkpoint rows into each piece


# the tiny Kuhn config with phases of 16 iterations and 1 + 3 checkpoints a phase
RESUMED = {"phase_iterations": {"kuhn": 16}, "checkpoints": {"geometric": 1, "linear": 3}}


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_kuhn_config):
    root = tmp_path_factory.mktemp("resume")
    cfg = tiny_kuhn_config(**RESUMED)
    (root / "neural.json").write_text(json.dumps(cfg))
    compiled = games.compile_configured("kuhn", cfg["game_strings"], None, "neural")
    games.save(compiled, root / "kuhn.npz")
    return {"root": root, "cfg": cfg, "compiled": compiled}


def _run(setup, out, *extra, block=BLOCK, config="neural.json"):
    """``neurd neural-run`` of ``block``; its exit code."""
    root = setup["root"]
    out.mkdir(parents=True, exist_ok=True)
    critic, first, last = block.split("_s")[0], *block.split("_s")[1].split("-")
    return cli.main(["neural-run", "--config", str(root / config), "--game", "kuhn",
                     "--critic", critic, "--seeds", f"{first}-{last}",
                     "--compiled", str(root / "kuhn.npz"),
                     "--curves", str(out / "curves.parquet"),
                     "--policies", str(out / "policies.parquet"), *extra])


@pytest.fixture(scope="module")
def whole(setup):
    out = setup["root"] / "whole"
    assert _run(setup, out) == 0
    return out


@pytest.fixture(scope="module")
def pieces(setup):
    """The block run in three pieces, its state published after the first two; each later
    piece resumed from the published state.  Returns the folders, the publication and its
    manifests after each add."""
    root, cfg, compiled = setup["root"], setup["cfg"], setup["compiled"]
    folder = root / "published"
    publication.init(folder, cfg)
    manifests = []
    job = root / "job"
    for piece in range(2):
        checkpoint = root / f"checkpoint_{piece}"
        if piece:  # the next allocation: the published state copied into the job's folder
            resume_states.to_checkpoint(folder / resume_states.state_folder("kuhn", BLOCK),
                                     checkpoint)
        with pytest.raises(SystemExit) as stopped:
            _run(setup, job, "--checkpoint", str(checkpoint), *STOP)
        assert stopped.value.code == 75
        manifest, added = publication.add_blocks(
            folder, cfg, [], compiled={"kuhn": compiled},
            states=[resume_states.StateSource("kuhn", BLOCK, checkpoint)])
        assert added == [f"kuhn/{BLOCK} (in progress)"]
        manifests.append(manifest)
    checkpoint = root / "checkpoint_2"
    resume_states.to_checkpoint(folder / resume_states.state_folder("kuhn", BLOCK), checkpoint)
    assert _run(setup, job, "--checkpoint", str(checkpoint)) == 0
    manifest, added = publication.add_blocks(
        folder, cfg, [BlockSource("kuhn", job / "curves.parquet", job / "policies.parquet")],
        compiled={"kuhn": compiled})
    manifests.append(manifest)
    return {"job": job, "folder": folder, "manifests": manifests}


def test_a_block_in_three_pieces_equals_the_block_run_whole(whole, pieces):
    from neurd.tables import read_metadata

    for name in ("curves.parquet", "policies.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(pieces["job"] / name),
                                      pd.read_parquet(whole / name), check_exact=True)
    done = read_metadata(pieces["job"] / "curves.parquet")["pieces"]
    assert len(done) == 3 and [p["first_iteration"] for p in done][0] == 0
    assert all(p["device"] for p in done)  # each piece records its device


def test_the_block_in_progress_is_listed_never_counted_and_replaced(setup, pieces):
    first, second, final = pieces["manifests"]
    for manifest in (first, second):
        entry = manifest["games"]["kuhn"]
        assert entry["in_progress"] == [BLOCK] and entry["seeds"] == [] and entry["blocks"] == []
        assert f"{resume_states.state_folder('kuhn', BLOCK)}/meta.json" in manifest["files"]
    assert first["games"]["kuhn"]["progress"][BLOCK] != second["games"]["kuhn"]["progress"][BLOCK]
    assert second["history_bytes"] > first["history_bytes"] > 0
    entry = final["games"]["kuhn"]
    assert entry["blocks"] == [BLOCK] and entry["seeds"] == [0, 1]
    assert not entry.get("in_progress")
    assert not [f for f in final["files"] if "/in-progress/" in f]
    readme = (pieces["folder"] / "README.md").read_text()
    assert "in progress" not in readme.lower()
    checked = publication.check(pieces["folder"])
    publication.check_content(pieces["folder"], *checked,
                              compiled={"kuhn": setup["compiled"]})


@pytest.fixture(scope="module")
def state(setup):
    """A state stopped after its first piece."""
    checkpoint = setup["root"] / "state"
    with pytest.raises(SystemExit):
        _run(setup, setup["root"] / "state_job", "--checkpoint", str(checkpoint), *STOP)
    return checkpoint


def _refused(setup, tmp_path, source, name=BLOCK, match=None):
    folder = tmp_path / "published"
    publication.init(folder, setup["cfg"])
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    with pytest.raises(PublicationError, match=match) as refused:
        publication.add_blocks(folder, setup["cfg"], [], compiled={"kuhn": setup["compiled"]},
                               states=[resume_states.StateSource("kuhn", name, source)])
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before
    return str(refused.value)


def _copy(state, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(state, target)
    return target


def _reseal(folder, meta):
    meta["sha256"] = {p: hashlib.sha256((folder / p).read_bytes()).hexdigest()
                      for p in meta["parts"]}
    meta["digest"] = checkpoint.meta_digest(meta)
    (folder / "meta.json").write_text(json.dumps(meta))


def test_a_truncated_state_is_refused_naming_the_file(setup, state, tmp_path):
    copy = _copy(state, tmp_path)
    part = copy / json.loads((copy / "meta.json").read_text())["parts"][0]
    part.write_bytes(part.read_bytes()[:-100])
    message = _refused(setup, tmp_path, copy)
    assert part.name in message


def test_a_state_of_another_config_is_refused(setup, tmp_path, tiny_kuhn_config):
    other = tiny_kuhn_config(**RESUMED, policy_learning_rate=0.003)
    (setup["root"] / "other.json").write_text(json.dumps(other))
    checkpoint = tmp_path / "other"
    with pytest.raises(SystemExit):
        _run(setup, tmp_path / "job", "--checkpoint", str(checkpoint), *STOP,
             config="other.json")
    message = _refused(setup, tmp_path, checkpoint, match="another run")
    assert "config_hash" in message and "meta.json" in message


def test_a_state_of_other_seeds_is_refused(setup, state, tmp_path):
    message = _refused(setup, tmp_path, _copy(state, tmp_path), name="learned_s1-2",
                       match="another run")
    assert "seeds [0, 1], expected [1, 2]" in message


def test_a_state_of_another_game_is_refused(setup, state, tmp_path):
    copy = _copy(state, tmp_path)
    meta = json.loads((copy / "meta.json").read_text())
    meta["identity"]["game_hash"] = "0" * 16
    _reseal(copy, meta)
    assert "game_hash" in _refused(setup, tmp_path, copy, match="another run")


def test_pieces_that_do_not_match_the_curves_are_refused(setup, state, tmp_path):
    copy = _copy(state, tmp_path)
    meta = json.loads((copy / "meta.json").read_text())
    meta["pieces"][-1]["iterations"] += 4  # cycles claimed beyond the rows measured
    _reseal(copy, meta)
    message = _refused(setup, tmp_path, copy, match="the pieces did")
    assert str(copy) in message


def test_a_state_with_nan_weights_is_refused(setup, state, tmp_path):
    copy = _copy(state, tmp_path)
    meta = json.loads((copy / "meta.json").read_text())
    part = meta["parts"][0]
    with np.load(copy / part) as data:
        arrays = {k: data[k] for k in data.files}
    key = next(k for k in arrays if k.startswith("leaf_") and arrays[k].dtype == np.float32)
    arrays[key] = np.full_like(arrays[key], np.nan)
    np.savez(copy / part, **arrays)
    _reseal(copy, meta)
    assert "non-finite" in _refused(setup, tmp_path, copy)


def test_a_pack_may_hold_a_block_in_progress():
    from neurd.publication.commands import pack_member_allowed

    allowed = pack_member_allowed({"games": ["kuhn"]})
    base = "neural/kuhn/in-progress/learned_s0-39"
    assert allowed(f"{base}/meta.json") and allowed(f"{base}/part-3-0.npz")
    for member in (f"{base}/.neurd-checkpoint", f"{base}/curves.parquet",
                   "neural/leduc/in-progress/learned_s0-1/meta.json"):
        assert not allowed(member), member


def _arrays(copy):
    """The state's arrays, part by part: {part: {key: array}}."""
    meta = json.loads((copy / "meta.json").read_text())
    found = {}
    for part in meta["parts"]:
        with np.load(copy / part) as data:
            found[part] = {k: data[k] for k in data.files}
    return meta, found


def _rewrite(copy, meta, found):
    for part, arrays in found.items():
        np.savez(copy / part, **arrays)
    _reseal(copy, meta)


def test_a_state_whose_weights_were_scaled_is_refused(setup, state, tmp_path):
    """Every network weight scaled under a consistent index: the policy tables it holds are no
    longer what its weights give, by more than float32 rounding allows on any processor."""
    copy = _copy(state, tmp_path)
    meta, found = _arrays(copy)
    for arrays in found.values():  # every float32 leaf of the learners' states
        for key in arrays:
            if key.startswith("leaf_") and arrays[key].dtype == np.float32:
                arrays[key] = arrays[key] * np.float32(1.5)
    _rewrite(copy, meta, found)
    message = _refused(setup, tmp_path, copy)
    assert "not what its weights give" in message and "rounding allows" in message, message


def test_a_state_whose_last_nashconv_was_changed_is_refused(setup, state, tmp_path):
    """The NashConv of the last row measured, changed under a consistent index: it is no
    longer what the state's policy tables give."""
    copy = _copy(state, tmp_path)
    meta, found = _arrays(copy)
    row = meta["next_row"] - 1
    entry = meta["arrays"]["result_nash_conv"]
    (part, key), = entry["chunks"]  # a small state: one chunk
    table = found[meta["parts"][part]][key].reshape(entry["shape"])
    table[row] += 0.01
    found[meta["parts"][part]][key] = table.reshape(-1)
    _rewrite(copy, meta, found)
    assert "NashConv is not what its policy tables give" in _refused(setup, tmp_path, copy)


def test_a_piece_whose_seconds_do_not_give_its_rate_is_refused(setup, state, tmp_path):
    copy = _copy(state, tmp_path)
    meta = json.loads((copy / "meta.json").read_text())
    meta["pieces"][-1]["seconds"] = meta["pieces"][-1]["seconds"] * 1000 + 1
    _reseal(copy, meta)
    assert "its iterations and seconds give" in _refused(setup, tmp_path, copy)


def test_a_block_in_progress_is_replayed_from_its_start(setup, state, tmp_path):
    """`neurd published-reproduce --replay BLOCK` runs the block in progress again from its
    start to its row: every NashConv its state holds is the replay's, bit for bit here (a
    state forged consistently with itself would not be)."""
    from neurd.publication import replay_state

    folder = tmp_path / "published"
    publication.init(folder, setup["cfg"])
    publication.add_blocks(folder, setup["cfg"], [], compiled={"kuhn": setup["compiled"]},
                           states=[resume_states.StateSource("kuhn", BLOCK, state)])
    frame = replay_state(folder, "kuhn", BLOCK, setup["compiled"])
    assert len(frame) and frame.row.nunique() >= 2
    assert (frame.difference == 0).all(), frame[frame.difference > 0].head()
    with pytest.raises(PublicationError, match="no block in progress 'learned_s5-6'"):
        replay_state(folder, "kuhn", "learned_s5-6", setup["compiled"])
