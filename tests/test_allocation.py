"""Short GPU allocations (neurd.publication.gpu_schedule, neurd.publication.allocation): the
schedule sizes seed blocks to finish every game in the fewest allocations within the
repository's cap, continues a block longer than an allocation in the next, resumes blocks in
progress first, and says what the rest takes; the allocation command, run on the CPU at the
smoke scale, keeps to its budget, checks the device first, and packs blocks that `neurd
published-add` checks and publishes (refusing a pack that does not check)."""

import importlib
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import copy_workflow

from neurd.publication import gpu_schedule
from neurd.publication.costs import Bytes, Throughput

ROOT = Path(__file__).resolve().parents[1]


def neural_run_process(*args: str) -> None:
    """``neurd neural-run`` in a process of its own, as an allocation's jobs run it (one CPU
    device per core; the test process keeps its one): the block to compare theirs with."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    done = subprocess.run([sys.executable, "-m", "neurd.cli", "neural-run", *args], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
PAPER = {"games": ["kuhn", "leduc", "goofspiel"], "algorithms": ["neurd", "spg"],
         "entropies": [0.0, 0.01, 0.03, 0.1, 0.3, 1.0], "seeds": 40, "phases": 3,
         "phase_iterations": {"kuhn": 330000, "leduc": 330000, "goofspiel": 330000},
         "critic_updates_per_policy_update": 4, "checkpoints": {"geometric": 20, "linear": 50},
         "exact_critic_games": ["kuhn"], "critic": "learned"}


def _rows(ms: dict, parallel=(1, 2, 3), slow=1.6) -> list[dict]:
    """Throughput rows: ``ms[game]`` is (ms at N=12, ms at N=480), linear between; P jobs
    sharing the GPU each ``slow`` x slower per extra job."""
    rows = []
    for game, (small, large) in ms.items():
        for critic in (("learned", "exact") if game == "kuhn" else ("learned",)):
            for n in (12, 60, 120, 240, 480):
                for p in parallel:
                    value = (small + (large - small) * (n - 12) / 468) * slow ** (p - 1)
                    rows.append({"game": game, "critic": critic, "configurations": n,
                                 "parallel": p, "ms_per_cycle": value,
                                 "checkpoint_seconds": 0.05 * n / 480 if p == 1 else None,
                                 "startup_seconds": 20.0})
    return rows


# as measured on an H200 at N = 480 (bench/NEURAL.md), with a guess for N = 12
H200 = _rows({"kuhn": (0.3, 0.46), "leduc": (1.2, 3.5), "goofspiel": (2.5, 8.1)})
# a card on which a seed of every game fits an allocation (the planning logic, not a card)
FAST = _rows({"kuhn": (0.15, 0.3), "leduc": (0.4, 1.2), "goofspiel": (0.5, 2.0)})


def _seeds(step, game, critic="learned"):
    return sorted(s for b in step.blocks if b.game == game and b.critic == critic
                  for s in range(b.first, b.last + 1))


# bytes per seed the repository gains (a finished block, a block-in-progress state): small
# enough that the history cap never binds, and the paper config's own (resume_states.
# bytes_per_seed at the paper scale, rounded up)
SMALL = Bytes(block={g: 1e5 for g in PAPER["games"]},
                         state={g: 1e5 for g in PAPER["games"]})
PAPER_BYTES = Bytes(block={"kuhn": 0.41e6, "leduc": 0.52e6, "goofspiel": 0.86e6},
                               state={"kuhn": 0.3e6, "leduc": 1.0e6, "goofspiel": 2.7e6})


def _schedule(rows, seconds=8 * 60, bytes_=SMALL, **keywords):
    return gpu_schedule.schedule(PAPER, keywords.pop("published", {}), Throughput(rows), seconds,
                               9 * 60, bytes_=bytes_, **keywords)


def test_no_planned_block_overruns_its_slot():
    throughput = Throughput(H200)
    for seconds in (120, 300, 480, 900):
        step = gpu_schedule.next_allocation(PAPER, {}, throughput, seconds, bytes_=SMALL)
        for slot in range(step.parallel):
            used = sum(b.predicted_seconds for b in step.blocks if b.slot == slot)
            assert used <= seconds + 1e-6, (seconds, slot, used)
        for block in step.blocks:
            if block.finishes and block.done_before == 0:
                assert block.predicted_seconds == pytest.approx(throughput.predict(
                    PAPER, block.game, block.critic, block.seeds, step.parallel), abs=0.1)


def test_a_block_longer_than_an_allocation_continues_in_the_next():
    """At the H200's measured speed a Goofspiel seed takes longer than an allocation: its block
    is started anyway, stopped at the end of its slot and resumed first by the next allocation
    where it stopped; every game gets all 40 seeds."""
    best = _schedule(H200)
    assert best.complete and set(best.full) == set(PAPER["games"])
    split = [(k, b) for k, step in enumerate(best.allocations) for b in step.blocks
             if not b.finishes]
    assert any(b.game == "goofspiel" for _, b in split)
    for k, block in split:
        # resumed by the next allocation, first of its slot's pieces, where it stopped
        resumed = [b for b in best.allocations[k + 1].blocks if (b.game, b.name) == (block.game,
                                                                                block.name)]
        assert len(resumed) == 1
        assert resumed[0] is min((b for b in best.allocations[k + 1].blocks
                                  if b.slot == resumed[0].slot),
                                 key=best.allocations[k + 1].blocks.index)
        assert resumed[0].done_before == pytest.approx(block.done_after, abs=1e-6)
    # a game run with several critics publishes a seed with all of them: never split
    assert not [b for _, b in split if b.game == "kuhn"]


def test_the_plan_prefers_fewer_allocations(monkeypatch):
    """Blocks of many seeds cost little more per cycle than one-seed blocks on a GPU: the plan
    takes them, and finishes in fewer allocations than one-seed blocks (the old rule) do."""
    best = _schedule(H200)
    monkeypatch.setattr(gpu_schedule, "BLOCK_SIZES", (1,))
    one_seed = _schedule(H200)
    assert len(best.allocations) < len(one_seed.allocations) or not one_seed.complete
    assert max(best.sizes.values()) > 1


def test_blocks_in_progress_are_resumed_first():
    progress = [gpu_schedule.InProgress("goofspiel", "learned", 0, 19, done=0.6)]
    step = _schedule(H200, in_progress=progress).allocations[0]
    first = step.blocks[0]
    assert (first.game, first.first, first.last, first.done_before) == ("goofspiel", 0, 19, 0.6)
    assert not [b for b in step.blocks if b.game == "goofspiel" and b.first <= 19
                and b is not first]


def test_the_history_cap_is_kept_and_named():
    """Within the cap, the schedule adds no more than it; with a cap too small for every game,
    the run stops where the cap is reached and the plan says so."""
    best = _schedule(FAST, bytes_=PAPER_BYTES)
    assert best.complete and best.history_bytes <= gpu_schedule.HISTORY_CAP
    tight = _schedule(FAST, bytes_=PAPER_BYTES, history_left=20 * 2**20)
    assert not tight.complete and tight.history_bytes <= 20 * 2**20
    assert any("MiB" in note for note in tight.allocations[0].notes)


def test_published_seeds_are_not_planned_again():
    best = _schedule(H200, published={"kuhn": list(range(40)), "leduc": [0, 1, 2]})
    planned = [b for step in best.allocations for b in step.blocks]
    assert not [b for b in planned if b.game == "kuhn"]
    assert min(b.first for b in planned if b.game == "leduc") == 3


def test_the_plan_for_the_rest_completes_every_game():
    best = _schedule(FAST)
    total = {g: sum(b.seeds for p in best.allocations for b in p.blocks
                    if b.game == g and b.critic == "learned" and b.finishes)
             for g in PAPER["games"]}
    assert total == {"kuhn": 40, "leduc": 40, "goofspiel": 40}
    words = gpu_schedule.describe(PAPER, {}, best)
    assert f"all 40: allocation {len(best.allocations)}" in words


def test_a_game_not_measured_is_named():
    rows = [r for r in H200 if r["game"] != "goofspiel"]
    best = _schedule(rows)
    assert best.allocations[0].notes and "no throughput" in best.allocations[0].notes[0]


def test_unmeasured_sizes_are_not_planned():
    """Above the largest measured N (or with no row of a game) nothing is predicted."""
    throughput = Throughput([r for r in H200 if r["configurations"] <= 60])
    assert throughput.predict(PAPER, "kuhn", "learned", 6, 1) is None
    assert throughput.predict(PAPER, "kuhn", "learned", 5, 1) is not None
    assert gpu_schedule.next_allocation(PAPER, {}, Throughput([]), 600).blocks == []


def test_the_slowest_of_jobs_timed_together_is_kept():
    rows = [dict(H200[0], parallel=2, ms_per_cycle=1.0), dict(H200[0], parallel=2,
                                                               ms_per_cycle=3.0)]
    assert Throughput(rows).rows[0]["ms_per_cycle"] == 3.0


def _bench():
    """neurd.publication.allocation, the allocations' package of concerns, as its modules."""
    return SimpleNamespace(**{name: importlib.import_module(
        f"neurd.publication.allocation.{name}") for name in (
        "blocks", "checks", "measurement", "packing", "places", "processes", "report", "timing")})


def test_a_gpu_allocation_packs_a_kuhn_group_whole_or_holds_it():
    """Of a GPU allocation's finished blocks, a Kuhn block whose seeds' other critic finished
    too is packed finished; one whose partner did not is held in progress as the state it kept
    at its end (a seed is published with every critic); a one-critic game's block is packed
    finished alone, and so is one without a kept state."""
    whole_groups = _bench().blocks.whole_groups
    run = Path("run/neural")
    pair = [run / "kuhn/blocks/learned_s0-1", run / "kuhn/blocks/exact_s0-1"]
    alone = run / "kuhn/blocks/learned_s2-3"
    leduc = run / "leduc/blocks/learned_s0-4"
    states = {f: f.parent.parent / "in-progress" / f.name for f in [*pair, alone]}
    partner = run / "kuhn/in-progress/exact_s2-3"
    finished, stopped = whole_groups(PAPER, [*pair, alone, leduc], [partner], states)
    assert finished == [*pair, leduc]
    assert stopped == [partner, states[alone]]
    # a finished block without a kept state is never dropped: packed, the publication's
    # check names the seed without its other critic
    assert whole_groups(PAPER, [alone, leduc], [], {}) == ([alone, leduc], [])


def test_what_prices_every_block_is_timed_first():
    """The measurement times every game and critic at N = 480 and 12 first, N = 480 first of
    all, then the other sizes, nothing twice or left out; N = 480 alone prices every block of
    the paper no lower than the full table does, and the first round's rows make a plan."""
    bench = _bench()
    cells = [f"{g}:{c}:{n}" for g in PAPER["games"]
             for c in (("learned", "exact") if g == "kuhn" else ("learned",))
             for n in bench.timing.SIZES]
    rounds = bench.measurement.measurement_order(cells)
    assert sorted(c for r in rounds for c in r) == sorted(cells) and len(rounds) == 2
    sizes = [int(c.rsplit(":", 1)[1]) for c in rounds[0]]
    assert set(sizes) == {480, 12} and sizes == sorted(sizes, reverse=True)
    assert len(rounds[0]) == 2 * 4 and 480 not in {int(c.rsplit(":", 1)[1]) for c in rounds[1]}
    full = Throughput(H200)
    largest = Throughput([r for r in H200 if r["configurations"] == 480])
    first = Throughput([r for r in H200 if r["configurations"] in (12, 480)])
    for game in PAPER["games"]:
        for seeds in (1, 2, 7, 20, 40):
            for parallel in (1, 2, 3):
                exact = full.predict(PAPER, game, "learned", seeds, parallel)
                assert largest.predict(PAPER, game, "learned", seeds, parallel) >= exact
                assert first.predict(PAPER, game, "learned", seeds, parallel) is not None
    assert gpu_schedule.next_allocation(PAPER, {}, first, 300, bytes_=SMALL).blocks


def test_a_cell_some_of_the_jobs_sharing_the_gpu_missed_is_dropped():
    """With P jobs timed together, a cell counts only where all P timed it."""
    row = {"game": "kuhn", "critic": "learned", "ms_per_cycle": 1.0}
    rows = [dict(row, configurations=480, slot=0), dict(row, configurations=480, slot=1),
            dict(row, configurations=12, slot=0)]
    kept = _bench().measurement.timed_by_all(rows, 2)
    assert [(r["configurations"], r["slot"]) for r in kept] == [(480, 0), (480, 1)]
    assert len(_bench().measurement.timed_by_all(rows, 1)) == 3


def test_a_timing_worker_runs_the_tree_it_is_given(tmp_path):
    """A timing worker, started as its file, imports the package from its PYTHONPATH (the
    baseline tree when it times the baseline), not from this tree, and nothing of this tree at
    module level; the allocation's command line uses this tree."""
    from neurd.publication.allocation.places import TIMING

    tree = tmp_path / "old/src/neurd"
    tree.mkdir(parents=True)
    (tree / "__init__.py").write_text("")
    (tree / "games.py").write_text("raise ImportError('the old tree: ' + __file__)\n")
    env = dict(os.environ, PYTHONPATH=str(tree.parent), JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, str(TIMING), "cells", "--games", str(tmp_path),
                           "--out", str(tmp_path / "rows.json"), "--cells", "kuhn:learned:12"],
                          env=env, capture_output=True, text=True)
    assert done.returncode != 0 and f"the old tree: {tree / 'games.py'}" in done.stderr, \
        done.stderr[-2000:]


def test_a_baseline_without_its_own_games_is_skipped_and_said(tmp_path):
    """The baseline tree reads the compiled games of its day: without them (in
    ``<baseline>/../neural``) it is not timed, and the report says why."""
    bench = _bench()
    baseline = tmp_path / "baseline/src"
    baseline.mkdir(parents=True)
    report = bench.report.Report(tmp_path / "out", 1)
    report.work, report.games_dir = tmp_path / "work", tmp_path / "games"
    rows = bench.measurement.measure(report, ["kuhn:learned:12"], 0.5, tmp_path / "cache",
                                     "cpu", baseline)
    assert rows == []
    said = [s for s in report.data["steps"] if s["step"] == "measure baseline"]
    assert said and "no games compiled by it" in said[0]["skipped"]


def test_a_profile_too_large_to_come_back_keeps_its_xplane_files(tmp_path):
    """Over 15 MiB packed, the profile comes back without its Chrome trace; if the XPlane
    files alone are over, nothing of it comes back, and the report says which."""
    bench = _bench()
    run = tmp_path / "work/profile/leduc-480/plugins/profile/1"
    run.mkdir(parents=True)
    (run / "vm.xplane.pb").write_bytes(os.urandom(2**20))
    (run / "vm.trace.json.gz").write_bytes(os.urandom(16 * 2**20))
    report = bench.report.Report(tmp_path / "out", 1)
    report.work = tmp_path / "work"
    bench.packing.pack_profile(report)
    with tarfile.open(tmp_path / "out/profile.tar.gz") as tar:
        assert [Path(n).name for n in tar.getnames() if n.endswith((".pb", ".gz"))] == [
            "vm.xplane.pb"]
    assert report.data["steps"][-1]["left_out"] == [".trace.json.gz"]
    (run / "vm.xplane.pb").write_bytes(os.urandom(16 * 2**20))
    bench.packing.pack_profile(report)
    assert not (tmp_path / "out/profile.tar.gz").exists()
    assert report.data["steps"][-1]["dropped"] == "over 15 MiB"


# --- the command, on the CPU, at the smoke scale ------------------------------------------


@pytest.fixture(scope="module")
def smoke_inputs(tmp_path_factory):
    """What `make gpu-allocation-inputs` gives an allocation, for the smoke config: its neural
    snapshot and compiled game, and an empty publication of it."""
    from neurd.config import load_snapshot

    root = tmp_path_factory.mktemp("inputs")
    cfg = load_snapshot(ROOT / "published/smoke/config/neural.json")
    write_inputs(root, cfg, root / "published/smoke")
    return root, cfg


def write_inputs(root: Path, cfg: dict, published: Path) -> None:
    """An allocation's inputs under ``root/results`` (the neural snapshot ``cfg`` and its
    compiled Kuhn), and an empty publication of ``cfg`` in ``published``."""
    from neurd import games, publication

    (root / "results/config").mkdir(parents=True)
    (root / "results/config/neural.json").write_text(json.dumps(cfg))
    (root / "results/neural/kuhn").mkdir(parents=True)
    games.save(games.compile_configured("kuhn", cfg["game_strings"], None, "neural"),
               root / "results/neural/kuhn/game.npz")
    publication.init(published, cfg)


def _allocate(root, minutes, out, *extra):
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "neurd.publication.allocation", "gpu",
                           "--platform", "cpu", "--results", str(root / "results"), "--publication",
                           str(root / "published/smoke"), "--minutes", str(minutes), "--out",
                           str(out), "--no-profile", *extra], capture_output=True, text=True)
    return done, time.monotonic() - start


def _cpu_table(path: Path) -> Path:
    """A throughput table of this CPU for the smoke config (generous: a CPU is slow)."""
    from neurd.revision import source_hash

    code = source_hash(ROOT / "src/neurd/neural", ROOT / "src/neurd/tabular")
    rows = [dict(r, device="cpu", code="this", revision_code=code, ms_per_cycle=40.0,
                 startup_seconds=25.0) for r in _rows({"kuhn": (1, 1)}, parallel=(1,))]
    path.write_text(json.dumps({"throughput": rows}))
    return path


@pytest.mark.workflow
def test_a_measuring_round_keeps_the_cells_it_timed(smoke_inputs, tmp_path):
    """Two jobs timing cells together, stopped at their second cell (a game that is not
    there), keep the first cell's rows, each job's, and the report says the round failed."""
    bench = _bench()
    root, _ = smoke_inputs
    report = bench.report.Report(tmp_path / "out", 5)
    report.work, report.games_dir = tmp_path / "work", root / "results/neural"
    rows = bench.measurement.workers(report, "this x2", ["kuhn:learned:12", "absent:learned:12"],
                                     bench.places.environment("cpu"), 2, [], 300)
    assert [(r["game"], r["configurations"], r["parallel"]) for r in rows] == [
        ("kuhn", 12, 2)] * 2
    assert all(r["ms_per_cycle"] > 0 and r["finite"] for r in rows)
    failed = [s for s in report.data["steps"] if s["step"] == "measure this x2"]
    assert failed and all("absent" in s["failed"] for s in failed)


@pytest.mark.workflow
def test_a_timing_worker_whose_partner_is_gone_stops(smoke_inputs, tmp_path):
    """A worker told to share the GPU with another that never comes times nothing (what it
    timed alone would be dropped) and ends instead of waiting at every cell."""
    root, _ = smoke_inputs
    out = tmp_path / "rows.json"
    env = _bench().places.environment("cpu")
    start = time.monotonic()
    done = subprocess.run([sys.executable, str(_bench().places.TIMING), "cells",
                           "--games", str(root / "results/neural"), "--out", str(out),
                           "--parallel", "2", "--sync", str(tmp_path / "sync"),
                           "--sync-seconds", "1", "--cells", "kuhn:learned:12",
                           "kuhn:learned:60", "kuhn:exact:12"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(out.read_text()) == [] and "did not come" in done.stdout
    assert not (tmp_path / "sync/kuhn:learned:60").exists()
    assert time.monotonic() - start < 60


@pytest.mark.workflow
def test_a_one_minute_allocation_keeps_to_its_budget(smoke_inputs, tmp_path):
    """Under a one-minute budget the command checks the device, plans, starts no block that
    its time left cannot finish, and ends within the minute (and a little for Python)."""
    root, _ = smoke_inputs
    out = tmp_path / "out"
    done, seconds = _allocate(root, 1, out, "--check-minutes", "0.75", "--throughput",
                              str(_cpu_table(tmp_path / "t.json")))
    report = json.loads((out / "allocation.json").read_text())
    assert seconds <= 60 + 15, seconds
    lost = [j for j in report["jobs"] if j["status"].startswith(("lost", "failed"))]
    assert not lost, lost
    if done.returncode == 0:  # the check finished within its share
        assert report["allocation"] is not None and all(c["ok"] for c in report["check"])
    else:
        assert any(s["step"] == "check" and not s.get("ok") for s in report["steps"])
        assert report["jobs"] == []


@pytest.mark.workflow
def test_an_allocation_packs_blocks_that_publish(smoke_inputs, tmp_path):
    """A longer allocation runs the planned blocks, packs them (the report inside the index),
    and `neurd published-add` checks and publishes them; the same pack again adds nothing; a
    pack with a part altered is refused and the publication is unchanged."""
    root, cfg = smoke_inputs
    out = tmp_path / "out"
    done, seconds = _allocate(root, 6, out, "--check-minutes", "3", "--throughput",
                              str(_cpu_table(tmp_path / "t.json")))
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert seconds <= 6 * 60 + 15
    report = json.loads((out / "allocation.json").read_text())
    assert all(c["ok"] for c in report["check"]) and report["allocation"]["blocks"]
    finished = [j for j in report["jobs"] if j["status"] == "finished"]
    assert finished and not [j for j in report["jobs"]
                             if j["status"].startswith(("lost", "failed"))]
    index = json.loads((out / "blocks.json").read_text())
    assert index["allocation"]["allocation"] == report["allocation"]
    # what comes back from an allocation: a few plain files of at most 16 MiB, nothing else
    back = sorted(p.name for p in out.iterdir())
    assert back[:2] == ["allocation.json", "blocks.json"] and all(
        name.startswith("blocks.tar.") for name in back[2:]), back
    assert len(back) <= 8 and all((out / n).is_file() and (out / n).stat().st_size <= 16 * 2**20
                                  for n in back)
    workflow = copy_workflow(tmp_path / "workflow", published=root / "published")
    neurd = str(Path(sys.executable).parent / "neurd")

    def add(pack):
        return subprocess.run([neurd, "published-add", "workflow/config/smoke.yaml", str(pack),
                               "--keep-reports", "reports"], cwd=workflow, capture_output=True,
                              text=True)

    added = add(out)
    assert added.returncode == 0, added.stderr[-3000:]
    manifest = json.loads((workflow / "published/smoke/manifest.json").read_text())
    assert manifest["games"]["kuhn"]["blocks"] and list((workflow / "reports").glob("*.json"))
    before = {p: p.read_bytes() for p in (workflow / "published").rglob("*") if p.is_file()}
    again = add(out)
    assert again.returncode == 0 and "nothing new" in again.stderr
    part = out / "blocks.tar.000"
    data = bytearray(part.read_bytes())
    data[100] ^= 1
    part.write_bytes(bytes(data))
    refused = add(out)
    assert refused.returncode == 2 and "blocks.tar.000 is not part 1" in refused.stderr
    after = {p: p.read_bytes() for p in (workflow / "published").rglob("*") if p.is_file()}
    assert after == before


@pytest.mark.workflow
def test_a_block_stopped_by_one_allocation_is_published_and_finished_by_the_next(
        smoke_inputs, tmp_path, monkeypatch):
    """An allocation's job stopped at the end of its slot comes back as a state in the pack,
    `neurd published-add` publishes it as the block in progress, and the next allocation
    resumes it from the publication: the block that finishes is the block run whole."""
    import pandas as pd

    from neurd import publication
    from neurd.tables import read_metadata

    bench = _bench()
    root, smoke = smoke_inputs
    cfg = dict(smoke, exact_critic_games=[])  # one critic: a block may be split
    results = tmp_path / "results"
    shutil.copytree(root / "results", results)
    (results / "config/neural.json").write_text(json.dumps(cfg))
    folder = tmp_path / "published"
    publication.init(folder, cfg)
    cache = tmp_path / "cache"

    def allocate(block, deadline):
        report = bench.report.Report(tmp_path / f"out{len(list(tmp_path.glob('out*')))}", 5)
        step = gpu_schedule.Allocation(1, [block])
        found = bench.blocks.run_jobs(report, cfg, step, results, "cpu", cache,
                               time.monotonic() + deadline, folder)
        return report, found

    monkeypatch.setattr(gpu_schedule, "SAVE_SECONDS", 119.0)  # a stop budget of one second
    piece = gpu_schedule.Block("kuhn", "learned", 0, 0, 0, 60.0, 0.0, 0.5)
    report, (finished, stopped) = allocate(piece, 120)
    assert not finished and len(stopped) == 1, report.data["jobs"]
    assert report.data["jobs"][0]["status"].startswith("in progress")
    bench.packing.pack_blocks(report, cfg, results, finished, stopped)
    index = json.loads((report.out / "blocks.json").read_text())
    assert any(m["name"].endswith("in-progress/learned_s0-0/meta.json")
               for m in index["members"])

    # the command's own step, as `make publish-blocks` runs it
    from neurd.publication.commands import _add
    monkeypatch.setattr("neurd.publication.commands._config_and_folder",
                        lambda args: (cfg, folder, tmp_path / "work"))
    _add(SimpleNamespace(packs=[str(report.out)], keep_reports=None, replace=False,
                         configfile="smoke", workflow="."))
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["games"]["kuhn"]["in_progress"] == ["learned_s0-0"]
    assert manifest["games"]["kuhn"]["seeds"] == []

    monkeypatch.setattr(gpu_schedule, "SAVE_SECONDS", 30.0)
    resumed = gpu_schedule.Block("kuhn", "learned", 0, 0, 0, 60.0, 0.3, 1.0)
    report, (finished, stopped) = allocate(resumed, 600)
    assert len(finished) == 1 and not stopped, report.data["jobs"]
    whole = tmp_path / "whole"
    neural_run_process("--config", str(results / "config/neural.json"), "--game", "kuhn",
                       "--critic", "learned", "--seeds", "0-0", "--compiled",
                       str(results / "neural/kuhn/game.npz"), "--curves",
                       str(whole / "curves.parquet"), "--policies",
                       str(whole / "policies.parquet"))
    for name in ("curves.parquet", "policies.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(finished[0] / name),
                                      pd.read_parquet(whole / name), check_exact=True)
    assert len(read_metadata(finished[0] / "curves.parquet")["pieces"]) == 2


def test_the_docs_state_the_schedule_of_the_rest():
    """docs/paper-scale.md's bytes per seed and schedule of the rest are what the code gives for
    the paper config and the H200 table in bench/gpu."""
    import re

    from neurd import games
    from neurd.publication.resume_states import bytes_per_seed
    from neurd.stages import load_config, snapshot

    cfg = snapshot(load_config([str(ROOT / "workflow/config/paper.yaml")], str(ROOT),
                               games=False), "neural")
    sizes = {g: bytes_per_seed(cfg, g, games.compile_configured(
        g, cfg["game_strings"], cfg.get("expected_infostates"), "neural")) for g in cfg["games"]}
    text = " ".join((ROOT / "docs/paper-scale.md").read_text().split())
    mib = [f"{sizes[g][0] / 2**20:.2f}" for g in cfg["games"]]
    assert (f"{mib[0]} MiB for Kuhn (its two critics), {mib[1]} MiB for Leduc and {mib[2]} MiB "
            "for Goofspiel") in text
    states = [f"{sizes[g][1] / 2**20:.2f}" for g in cfg["games"]]
    assert f"a state adds {states[0]}, {states[1]} and {states[2]} MiB" in text
    measured = json.loads((ROOT / "bench/gpu/h200-2026-11-26.json").read_text())["throughput"]
    rows = [dict(r, code="this", critic=c, parallel=1, startup_seconds=r[
        "compile_and_first_seconds"]) for r in measured
        if r["flag"] and r["precision"] == "float32" and r["code"] != "before"
        for c in ("learned", "exact")]
    bytes_ = Bytes({g: b for g, (b, _) in sizes.items()},
                              {g: s for g, (_, s) in sizes.items()})
    capped, free = (gpu_schedule.schedule(cfg, {}, Throughput(rows), 5.5 * 60, 8 * 60,
                                        bytes_=bytes_, history_left=cap)
                    for cap in (gpu_schedule.HISTORY_CAP, math.inf))
    words = re.search(r"within the 100 MiB cap: Goofspiel's first seed in allocation (\d+), and "
                      r"the run stops at ([\d.]+) MiB after (\d+) allocations with (\d+) of "
                      r"Goofspiel's 40 seeds", text)
    assert words, "the capped plan is not stated"
    assert int(words.group(1)) == capped.first["goofspiel"]
    assert words.group(2) == f"{capped.history_bytes / 2**20:.1f}"
    assert int(words.group(3)) == len(capped.allocations) and capped.capped
    assert int(words.group(4)) == capped.seeds["goofspiel"] < 40
    # Goofspiel first: no seed of another game before Goofspiel's 40th
    assert "leduc" not in capped.first and "kuhn" not in capped.first
    one = Throughput(rows).predict(cfg, "goofspiel", "learned", 1, 1) / 60
    assert f"a Goofspiel seed takes {one:.1f} minutes of GPU" in text
    assert (f"every game's 40th seed by allocation {max(free.full.values())}, in "
            f"{len(free.allocations)} allocations ({free.gpu_seconds / 60:.0f} GPU minutes, blocks "
            f"of {max(free.sizes.values())} seeds), adding {free.history_bytes / 2**20:.1f} "
            "MiB") in text


@pytest.mark.workflow
def test_an_allocation_runs_the_fastest_variant_that_passed_and_never_one_that_failed(
        smoke_inputs, tmp_path, monkeypatch):
    """The variants are checked as the device is (against the device check's CPU run) and
    timed; one whose check did not finish is not chosen, even timed fastest of all."""
    from neurd.neural import variants

    bench = _bench()
    root, _ = smoke_inputs
    report = bench.report.Report(tmp_path / "out", 10)
    report.work, report.games_dir = tmp_path / "work", root / "results/neural"
    report.work.mkdir()
    # the device check's CPU run of the learned critic, which every variant is compared with
    # (the device check itself runs whole in the allocations above)
    (report.work / "check").mkdir()
    cpu_run = report.work / "check/cpu_kuhn_learned.npz"
    reference = subprocess.run([sys.executable, "-m", "neurd.publication.allocation.device_check",
                                "cycles",
                                "--games", str(report.games_dir), "--game", "kuhn", "--critic",
                                "learned", "--out", str(cpu_run)],
                               env=bench.places.environment("cpu"), capture_output=True,
                               text=True)
    assert reference.returncode == 0, reference.stderr[-2000:]
    # three of them (each is a few processes): the default, another layout, and an unrolled
    # loop that is never run: its check does not finish and it is timed fastest of all
    everyone = variants.candidates(gpu=False)
    candidates = [everyone[0], everyone[1], everyone[-1]]
    monkeypatch.setattr(variants, "candidates", lambda gpu=True: candidates)
    broken = candidates[-1].name
    real = bench.checks.run_all

    def run_all(jobs, seconds, limit=12):
        ran = [k for k, (argv, _) in enumerate(jobs) if broken not in argv]
        done = [None] * len(jobs)  # None: did not finish
        for k, result in zip(ran, real([jobs[k] for k in ran], seconds, limit)):
            done[k] = result
        timed = report.work / "variants" / f"time_{candidates[0].name}.json"
        (report.work / "variants" / f"time_{broken}.json").write_text(json.dumps(
            [dict(r, ms_per_cycle=1e-6) for r in json.loads(timed.read_text())]))
        return done

    monkeypatch.setattr(bench.checks, "run_all", run_all)
    chosen = bench.checks.check_variants(report, ["kuhn"], "cpu", tmp_path / "cache", 600)
    checked = {r["variant"]: r for r in report.data["variants"]["checked"]}
    assert set(checked) == {v.name for v in candidates}
    assert checked[broken]["passed"] is False and chosen != broken
    assert checked[chosen]["passed"] is True
    timed = [r for r in checked.values() if r["passed"]]
    assert chosen == min(timed, key=lambda r: r["summed_ms_per_cycle"])["variant"]


def test_a_failed_block_says_why_in_the_allocation_log(tmp_path):
    """A job that fails is reported as failed with its error (a NashConv that turned NaN at
    the paper's length, say), not as lost at the deadline."""
    log = tmp_path / "run.log"
    log.write_text("2026-11-28 05:38:47 neurd INFO neural kuhn: 77%\nTraceback (most recent "
                   "call last):\n  File \"x.py\", line 1, in run\n    raise FloatingPointError("
                   "f\"...\")\nFloatingPointError: NashConv is not finite at iteration 778800 "
                   "for configuration ('neurd', 0.1, 3)\n")
    assert _bench().processes.last_error(log) == ("FloatingPointError: NashConv is not finite at "
                                         "iteration 778800 for configuration ('neurd', 0.1, 3)")
    log.write_text("killed\n")
    assert _bench().processes.last_error(log) == "killed"
