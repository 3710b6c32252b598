"""The paper-scale Fig 6 on this machine's CPU in the background (neurd.publication.cpu_schedule,
neurd.publication.allocation): the plan takes Kuhn, then Leduc, then Goofspiel, never schedules past
the deadline, keeps a block of several critics whole, sizes blocks for the CPU, and
resumes blocks in progress first; the background command starts detached, refuses a second,
says what it does, stops with the state saved, packs, and what it packs publishes (a block
computed in two allocations equals the block run whole); its blocks name the processor."""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_allocation import (
    PAPER,  # the paper config's neural keys the plans read
    neural_run_process,
    write_inputs,
)

from neurd.publication import cpu_schedule, gpu_schedule
from neurd.publication.costs import Bytes, Throughput
from neurd.publication.cpu_schedule import block_seconds, block_size, next_allocation
from neurd.publication.gpu_schedule import MIN_PIECE_SECONDS, SAVE_SECONDS, InProgress

ROOT = Path(__file__).resolve().parents[1]
# ms per cycle at N = 12, 24, 60, 120, near what a two-core CPU gives (bench/NEURAL.md), set so
# that Leduc and Goofspiel are cheapest per seed at N = 60, Kuhn at N = 120
MS = {"kuhn": (0.6, 1.1, 2.5, 4.8), "leduc": (3.2, 6.2, 14.5, 31.0),
      "goofspiel": (8.4, 16.0, 40.0, 95.0)}
BYTES = Bytes(block={"kuhn": 0.41e6, "leduc": 0.52e6, "goofspiel": 0.86e6},
              state={"kuhn": 0.3e6, "leduc": 1.0e6, "goofspiel": 2.7e6})


def _rows(scale: float = 1.0) -> list[dict]:
    return [{"game": g, "critic": c, "configurations": n, "parallel": 1,
             "ms_per_cycle": ms * scale, "checkpoint_seconds": 0.01 * n / 12,
             "startup_seconds": 10.0}
            for g, values in MS.items()
            for c in (("learned", "exact") if g == "kuhn" else ("learned",))
            for n, ms in zip((12, 24, 60, 120), values)]


def _plan(seconds, published=None, **keywords):
    return next_allocation(PAPER, published or {}, Throughput(keywords.pop("rows", _rows())),
                           seconds, bytes_=keywords.pop("bytes_", BYTES), **keywords)



def test_the_cost_of_the_rest_is_priced_as_the_schedule_prices_it():
    """Per game and processor measured, the seeds left cost what the CPU schedule's blocks
    predict, with the rows of the code the file measured last; a game a processor did not
    measure is left out there, and a processor is said to have computed a game only where the
    game's published blocks name it."""
    old = [dict(r, revision_code="old", ms_per_cycle=100 * r["ms_per_cycle"]) for r in _rows()]
    new = [dict(r, revision_code="new") for r in _rows()]
    slow = [dict(r, revision_code="x") for r in _rows(scale=3.0) if r["game"] == "leduc"]
    tables = [{"name": "fast.json", "processor": "Fast", "isa": "AVX2", "rows": old + new},
              {"name": "slow.json", "processor": "Slow", "isa": "AMX", "rows": slow}]
    published = {"kuhn": list(range(40)), "leduc": list(range(7))}
    costs = cpu_schedule.seed_costs(PAPER, published, {"leduc": ["Slow, AMX", "GPU x"]}, tables)
    found = {(c.game, c.processor): c for c in costs}
    assert set(found) == {("kuhn", "Fast, AVX2"), ("leduc", "Fast, AVX2"),
                          ("goofspiel", "Fast, AVX2"), ("leduc", "Slow, AMX")}
    throughput = Throughput(new)
    for (game, name), cost in found.items():
        rows = throughput if name == "Fast, AVX2" else Throughput(slow)
        left = 40 - len(published.get(game, []))
        assert cost.seeds_left == left and cost.computed == (name == "Slow, AMX")
        assert cost.block == block_size(PAPER, rows, game, left or 40, 150 * 60.0)
        assert cost.seconds_per_seed == pytest.approx(
            block_seconds(PAPER, rows, game, cost.block) / cost.block)
        assert cost.hours_left == pytest.approx(left * cost.seconds_per_seed / 3600)
    assert found["kuhn", "Fast, AVX2"].hours_left == 0 < found["kuhn", "Fast, AVX2"].block
    assert found["leduc", "Slow, AMX"].seconds_per_seed > found["leduc", "Fast, AVX2"
                                                                ].seconds_per_seed

@pytest.mark.parametrize("minutes", [3, 9, 30, 150, 600, 3000])
@pytest.mark.parametrize("slowdown", [1.0, 2.5])
def test_the_cpu_plan_never_schedules_past_the_deadline(minutes, slowdown):
    """Every planned piece's predicted time (slowed as told) adds up to at most the time
    given; every block that finishes is predicted to, a piece that does not ends its time."""
    step = _plan(60.0 * minutes, slowdown=slowdown)
    # (each piece's seconds are rounded to 0.1 in the plan)
    assert sum(b.predicted_seconds for b in step.blocks) <= 60.0 * minutes + 0.05 * len(
        step.blocks)
    throughput = Throughput(_rows())
    for block in step.blocks:
        whole = throughput.predict(PAPER, block.game, block.critic, block.seeds, 1) * slowdown
        if block.finishes:
            assert block.predicted_seconds == pytest.approx(whole, abs=0.1)
        else:
            assert block is step.blocks[-1] and block.game != "kuhn"
            assert block.predicted_seconds < whole


def test_games_come_breadth_first_kuhn_then_leduc_and_goofspiel_in_turn():
    """Kuhn's 40 seeds first (cheap), then Leduc and Goofspiel in turn, each to 5 seeds (a
    first confidence interval), then 10, 20 and 40: every seed at most once, in blocks of
    consecutive seeds, each game's in order."""
    assert cpu_schedule.stages(["kuhn", "leduc", "goofspiel"], 40) == [
        ("kuhn", 40), ("leduc", 5), ("goofspiel", 5), ("leduc", 10), ("goofspiel", 10),
        ("leduc", 20), ("goofspiel", 20), ("leduc", 40), ("goofspiel", 40)]
    step = _plan(60.0 * 60 * 200)
    counts, reached = {g: 0 for g in PAPER["games"]}, []
    for block in step.blocks:
        if block.critic == "learned":
            counts[block.game] += block.last - block.first + 1
            reached.append(dict(counts))
    assert all(r["kuhn"] == 40 for r in reached if r["leduc"] or r["goofspiel"])
    assert next(r for r in reached if r["goofspiel"])["leduc"] == 5  # Leduc's 5 first
    assert next(r for r in reached if r["leduc"] > 5)["goofspiel"] == 5  # then Goofspiel's
    for game in PAPER["games"]:
        seeds = [s for b in step.blocks if b.game == game and b.critic == "learned"
                 for s in range(b.first, b.last + 1)]
        assert sorted(seeds) == seeds == list(range(40)), game


def test_an_allocation_of_a_few_hours_gives_every_game_its_first_seeds():
    """With Kuhn done, an allocation of a few hours reaches Goofspiel's first seeds before
    Leduc's sixth: a first verdict of every game within the first allocations."""
    step = _plan(60.0 * 60 * 4, {"kuhn": list(range(40))})
    games = [b.game for b in step.blocks]
    assert "goofspiel" in games and "kuhn" not in games
    leduc = [s for b in step.blocks if b.game == "leduc" for s in range(b.first, b.last + 1)]
    assert max(leduc) < 5 or games.index("goofspiel") < max(
        i for i, b in enumerate(step.blocks) if b.game == "leduc")


def test_a_kuhn_block_is_whole_and_of_the_cheapest_size():
    """Kuhn (two critics) is planned a seed block with both critics, one after the other, each
    finishing, of the size that costs least per seed among those whose group fits (here 10
    seeds: N = 120); where the time left holds no such group, a smaller one."""
    step = _plan(60.0 * 150)
    kuhn = [b for b in step.blocks if b.game == "kuhn"]
    assert kuhn and all(b.finishes for b in kuhn)
    for learned, exact in zip(kuhn[::2], kuhn[1::2]):
        assert (learned.critic, exact.critic) == ("learned", "exact")
        assert (learned.first, learned.last) == (exact.first, exact.last)
    throughput = Throughput(_rows())
    per_seed = {n: block_seconds(PAPER, throughput, "kuhn", n) / n for n in (1, 2, 5, 10)}
    assert kuhn[0].seeds == 10 == min(per_seed, key=per_seed.get), per_seed
    ten = block_seconds(PAPER, throughput, "kuhn", 10)
    short = _plan(ten - 1.0)
    sizes = {b.seeds for b in short.blocks if b.game == "kuhn"}
    assert sizes and max(sizes) < 10
    assert sum(b.predicted_seconds for b in short.blocks) <= ten - 1.0 + 0.05 * len(
        short.blocks)


def test_blocks_are_sized_for_the_cpu():
    """A block's size is the measured one of fewest seconds per seed: here Leduc's and
    Goofspiel's 5 seeds (N = 60), not the largest measured."""
    throughput = Throughput(_rows())
    for game in ("leduc", "goofspiel"):
        size = block_size(PAPER, throughput, game, 40, math.inf)
        per_seed = {n: block_seconds(PAPER, throughput, game, n) / n for n in (1, 2, 5, 10)}
        assert size == 5 == min(per_seed, key=per_seed.get), (game, per_seed)
    # within the time left: a smaller block where the cheapest does not fit
    five = block_seconds(PAPER, throughput, "leduc", 5)
    assert block_size(PAPER, throughput, "leduc", 40, five - 1) < 5
    assert block_size(PAPER, throughput, "leduc", 3, math.inf) <= 3
    assert block_size(PAPER, Throughput([]), "leduc", 40, math.inf) is None


def test_blocks_in_progress_are_resumed_first():
    """A published block in progress is the first piece, resumed where it stopped, and its
    seeds are not planned again: its five Leduc seeds count, so Goofspiel's first five come
    next (breadth first)."""
    kuhn_done = {"kuhn": list(range(40))}
    block = InProgress("leduc", "learned", 0, 4, done=0.6)
    step = _plan(60.0 * 150, published=kuhn_done, in_progress=[block])
    first = step.blocks[0]
    assert (first.game, first.first, first.last, first.done_before) == ("leduc", 0, 4, 0.6)
    assert first.finishes
    later = [s for b in step.blocks[1:] if b.game == "leduc" for s in range(b.first, b.last + 1)]
    assert step.blocks[1].game == "goofspiel" and (not later or min(later) == 5)


@pytest.mark.parametrize("exact_done", [None, 0.4])
def test_a_kuhn_group_cut_in_half_is_completed_first(exact_done):
    """A Kuhn seed block whose learned critic finished (held in progress at its last row)
    while its exact critic was cut (in progress) or never started comes first in the next
    allocation: the held block (its start-up only), then the exact block resumed or started
    afresh; no other block takes those seeds.  A GPU's plan completes the group too."""
    held = [InProgress("kuhn", "learned", 9, 10, done=1.0)]
    if exact_done is not None:
        held.append(InProgress("kuhn", "exact", 9, 10, done=exact_done))
    step = _plan(60.0 * 150, in_progress=held)
    first, second = step.blocks[:2]
    assert [(b.name, b.done_before, b.finishes) for b in (first, second)] == [
        ("learned_s9-10", 1.0, True), ("exact_s9-10", exact_done or 0.0, True)]
    assert first.predicted_seconds == pytest.approx(Throughput(_rows()).startup("kuhn"), abs=0.1)
    throughput = Throughput(_rows())
    rest = throughput.work(PAPER, "kuhn", "exact", 2, 1) * (1.0 - (exact_done or 0.0))
    assert second.predicted_seconds == pytest.approx(rest + throughput.startup("kuhn"), abs=0.1)
    later = [s for b in step.blocks[2:] if b.game == "kuhn" for s in range(b.first, b.last + 1)]
    assert later and not {9, 10} & set(later)
    assert gpu_schedule.in_progress_groups(PAPER, held)[1] == (
        held[1] if exact_done is not None else InProgress("kuhn", "exact", 9, 10, done=0.0))
    # a block of another seed range of the other critic in progress: not doubled
    odd = [held[0], InProgress("kuhn", "exact", 10, 10, done=0.2)]
    assert gpu_schedule.in_progress_groups(PAPER, odd) == odd
    rows = [dict(r, parallel=1) for r in _rows(scale=0.05)]
    gpu = gpu_schedule.schedule(PAPER, {"kuhn": list(range(9)) + list(range(11, 40)),
                                      "leduc": list(range(40)), "goofspiel": list(range(40))},
                              Throughput(rows), 8 * 60.0, 8 * 60.0, in_progress=held,
                              bytes_=Bytes({g: 1e5 for g in MS}, {g: 1e5 for g in MS}))
    planned = [(b.name, b.finishes) for step in gpu.allocations for b in step.blocks]
    assert ("exact_s9-10", True) in planned and ("learned_s9-10", True) in planned
    assert gpu.complete


@pytest.mark.parametrize("exact", ["finished", "stopped", "not started"])
def test_a_group_is_packed_finished_only_whole_else_held_in_progress(tmp_path, monkeypatch,
                                                                   exact):
    """The background allocation runs a Kuhn group's jobs stoppable, each keeping its state at
    the end; the group's finished tables are packed only where both critics finished, else the
    learned block that finished is held in progress (its state at the last row) beside the exact
    block's state, if it has one."""
    from neurd.publication.allocation import cpu as cpu_run
    from neurd.publication.allocation.background import Places

    places = Places(SimpleNamespace(**{k: tmp_path / k for k in (
        "results", "publication", "work", "out", "tables")}))
    bg = cpu_run.Background(places, time.time() + 3600.0, 60.0)
    calls = []

    def fake_run_block(report, cfg, block, results, env, deadline, publication, variant,
                       **keywords):
        calls.append((block.name, keywords["may_stop"], keywords["keep_state"]))
        tables, state = tmp_path / "tables" / block.name, tmp_path / "state" / block.name
        status = "finished" if block.critic == "learned" else exact
        if len(calls) > 2:
            bg.stop.set()
        record = {"block": f"kuhn/{block.name}", "status": status, "seconds": 1.0}
        return dict(record, folder=tables if status == "finished" else None,
                    state=None if status == "not started" else state)

    monkeypatch.setattr(cpu_run, "run_block", fake_run_block)
    monkeypatch.setattr(cpu_run, "repository_bytes", lambda results, cfg: BYTES)
    cpu_run.run_blocks(bg, PAPER, _rows(), {})
    learned, other = calls[0][0], calls[1][0]
    assert learned.startswith("learned_s0-") and other == learned.replace("learned", "exact")
    assert all(c[1:] == (True, True) for c in calls)  # stoppable, each keeping its state
    if exact == "finished":
        assert bg.finished[:2] == [tmp_path / "tables" / learned, tmp_path / "tables" / other]
        assert bg.stopped == [] and len(calls) > 2  # and on to the next group
    else:
        assert bg.finished == [] and len(calls) == 2
        assert bg.stopped == [tmp_path / "state" / learned] + (
            [tmp_path / "state" / other] if exact == "stopped" else [])


class _Died(Exception):
    """The allocation's process ended under it (killed, the machine stopped)."""


@pytest.mark.parametrize("dies", ["exact", "learned"])
def test_what_an_allocation_that_died_left_is_packed_as_its_stop_would_have(tmp_path,
                                                                           monkeypatch, dies):
    """An allocation whose process ends without packing leaves in its report the blocks it
    finished, the states its running group kept and the job running; stop (none running) packs
    them as the allocation's own stop would have: the finished group whole, the group cut
    short held in progress (the learned block's state at its last row, the exact block's state
    saved last), every member once; a second stop packs nothing again."""
    from neurd.publication.allocation import background
    from neurd.publication.allocation import cpu as cpu_run
    from neurd.publication.allocation.background import Places
    from neurd.publication.resume_states import state_folder

    places = Places(SimpleNamespace(**{k: tmp_path / k for k in (
        "results", "publication", "work", "out", "tables")}))
    (tmp_path / "results/config").mkdir(parents=True)
    (tmp_path / "results/config/neural.json").write_text(json.dumps(PAPER))
    bg = cpu_run.Background(places, time.time() + 3600.0, 60.0)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    bg.report.step("start", pid=int(gone.stdout))  # a process that has ended
    calls = []

    def fake_run_block(report, cfg, block, results, env, deadline, publication, variant,
                       **keywords):
        calls.append(block.name)
        folder = places.run / f"neural/kuhn/blocks/{block.name}"
        state = places.run / state_folder("kuhn", block.name)
        for path in (folder, state):
            path.mkdir(parents=True, exist_ok=True)
        (folder / "run.log").write_text(f"{block.name}\n")
        (state / "meta.json").write_text(json.dumps({"parts": [], "block": block.name}))
        assert report.data["current"]["state"] == str(state)
        if len(calls) == (4 if dies == "exact" else 3):  # in the second group's job of it
            raise _Died
        for name in ("curves.parquet", "policies.parquet"):
            (folder / name).write_bytes(block.name.encode())
        (state / "run.log").write_text(f"{block.name}\n")
        return {"block": f"kuhn/{block.name}", "status": "finished", "seconds": 1.0,
                "folder": folder, "state": state}

    monkeypatch.setattr(cpu_run, "run_block", fake_run_block)
    monkeypatch.setattr(cpu_run, "repository_bytes", lambda results, cfg: BYTES)
    with pytest.raises(_Died):
        cpu_run.run_blocks(bg, PAPER, _rows(), {})
    assert background.left_unpacked(places) is not None
    assert background.stop(places) == 0
    index = json.loads((places.out / "blocks.json").read_text())
    members = [m["name"] for m in index["members"] if m["name"] != "pack-record.json"]
    assert len(members) == len(set(members))
    first, second = calls[0].replace("learned_", ""), calls[2].replace("learned_", "")
    blocks = {f"neural/kuhn/blocks/{c}_{first}/{f}" for c in ("learned", "exact")
              for f in ("curves.parquet", "policies.parquet", "run.log")}
    kept = {f"neural/kuhn/in-progress/{c}_{second}/{f}"
            for c in (("learned", "exact") if dies == "exact" else ("learned",))
            for f in ("meta.json", "run.log")}
    assert set(members) == blocks | kept
    left = background.unpublished(places.out, places.publication)
    assert sorted(left) == sorted([f"kuhn/learned_{first}", f"kuhn/exact_{first}"] + [
        f"kuhn/{c}_{second} (in progress)" for c in ("learned", "exact")
        if dies == "exact" or c == "learned"])
    assert background.left_unpacked(places) is None and background.pack_left(places) is None


def test_the_tail_goes_to_a_block_in_progress_only_where_the_repository_has_room():
    """Time too short for any whole block ends with a one-seed block that continues in the next
    allocation, if its state fits beside every seed's finished block; else nothing is started
    and the plan says why."""
    kuhn_done = {"kuhn": list(range(40))}
    one = block_seconds(PAPER, Throughput(_rows()), "leduc", 1)
    seconds = one * 0.7
    step = _plan(seconds, published=kuhn_done)
    assert len(step.blocks) == 1 and not step.blocks[0].finishes
    assert step.blocks[0].seeds == 1 and step.blocks[0].predicted_seconds == pytest.approx(
        seconds, abs=0.1)
    reserve = sum(BYTES.block[g] * 40 for g in ("leduc", "goofspiel"))
    full = _plan(seconds, published=kuhn_done, history_left=reserve + 0.5e6)
    assert not [b for b in full.blocks if b.game == "leduc"]
    assert any("repository room" in n for n in full.notes), full.notes
    # too short to start anything worth its start-up: nothing
    tiny = _plan(SAVE_SECONDS + MIN_PIECE_SECONDS, published=kuhn_done)
    assert not tiny.blocks and tiny.notes


def test_a_slower_pace_plans_less():
    """The allocation's measured slowdown stretches every prediction: fewer seeds fit."""
    fast, slow = _plan(60.0 * 150), _plan(60.0 * 150, slowdown=2.0)
    seeds = [sum(b.seeds for b in s.blocks if b.finishes and b.critic == "learned")
             for s in (fast, slow)]
    assert seeds[1] < seeds[0]


# --- the background command, on this CPU, at a small scale -------------------------------------

COMMAND = [sys.executable, "-m", "neurd.publication.allocation", "cpu"]


def _small(root: Path):
    """In ``root``: the smoke config with one critic (a block may be split) and a Kuhn run of
    about half a minute, its game compiled, an empty publication, and a throughput table of
    this processor and code (so that no allocation measures)."""
    from neurd.config import load_snapshot
    from neurd.publication.allocation import cpu as cpu_run

    cfg = dict(load_snapshot(ROOT / "published/smoke/config/neural.json"),
               exact_critic_games=[])
    cfg["phase_iterations"] = dict(cfg["phase_iterations"], kuhn=40000)
    write_inputs(root, cfg, root / "published")
    from neurd.revision import source_hash

    cpu = cpu_run.processor()
    code = source_hash(ROOT / "src/neurd/neural", ROOT / "src/neurd/tabular")
    rows = [{"game": "kuhn", "critic": "learned", "configurations": n, "parallel": 1,
             "code": "this", "ms_per_cycle": 2.0, "checkpoint_seconds": 0.01,
             "startup_seconds": 5.0, "revision_code": code, "jax": cpu["jax"]}
            for n in (12, 24, 60, 120)]
    cpu_run.keep_rows(root / "tables", cpu, rows)
    return root, cfg, cpu


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """:func:`_small`, shared by the tests of one allocation after another."""
    return _small(tmp_path_factory.mktemp("cpu"))


def _command(root, mode, *extra):
    return subprocess.run([*COMMAND, mode, "--results",
                           str(root / "results"), "--publication", str(root / "published"),
                           "--work", str(root / "work"), "--out", str(root / "out"),
                           "--tables", str(root / "tables"), *extra],
                          capture_output=True, text=True, timeout=300)


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (Linux's ``/proc``), each once."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo.extend(children.get(found[-1], []))
    return found


def _at_the_tests_priority(pid: int) -> None:
    """Checks that the allocation ``pid`` runs at the lowest priority (nice 19, Linux's idle
    policy, in a group of its own at nice 19 where Linux groups processes), then raises it
    and whatever it has started to the tests' own priority where it may (root): tests beside
    it, and another background allocation of this machine, would starve it."""
    assert os.getpriority(os.PRIO_PROCESS, pid) == 19
    if hasattr(os, "SCHED_IDLE"):
        assert os.sched_getscheduler(pid) == os.SCHED_IDLE
    group = Path(f"/proc/{pid}/autogroup")
    if group.exists():
        assert group.read_text().split()[-2:] == ["nice", "19"], group.read_text()
    try:
        if group.exists():
            group.write_text("0")
        for process in _descendants(pid):
            for thread in Path(f"/proc/{process}/task").glob("*"):
                try:
                    os.sched_setscheduler(int(thread.name), os.SCHED_OTHER, os.sched_param(0))
                except ProcessLookupError:
                    pass  # ended meanwhile
    except (PermissionError, AttributeError):
        pass  # only root may raise a priority: slower beside other tests, not wrong


def _wait(condition, seconds, what):
    until = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < until, f"{what}: not after {seconds} s"
        time.sleep(0.5)


def _publish(root, cfg, monkeypatch):
    from neurd.publication.commands import _add  # the step `make publish-blocks` runs

    monkeypatch.setattr("neurd.publication.commands._config_and_folder",
                        lambda args: (cfg, root / "published", root / "publish-work"))
    _add(SimpleNamespace(packs=[str(root / "out")], keep_reports=None,
                         keep_cpu_reports=str(root / "reports"), replace=False,
                         configfile="smoke", workflow="."))
    return json.loads((root / "published/manifest.json").read_text())["games"]["kuhn"]


@pytest.mark.workflow
def test_the_background_allocation_lives_stops_packs_and_publishes(small, monkeypatch):
    """Started, it returns at once with the allocation detached and running at nice 19; a
    second start is refused naming the first; status says what it does; stopped, its block comes
    back in progress (the state it saved last) and starting again before publishing is refused;
    published, the next allocation resumes it, and the block that finishes is the block run
    whole, every piece naming this processor, its instruction set and the variant it ran."""
    import pandas as pd


    root, cfg, cpu = small
    start = time.monotonic()
    started = _command(root, "start", "--minutes", "20", "--code", "tree",
                       "--checkpoint-minutes", "0.05")
    assert started.returncode == 0, started.stderr
    assert time.monotonic() - start < 30 and "started: pid" in started.stdout
    lock = json.loads((root / "work/running.json").read_text())
    _at_the_tests_priority(lock["pid"])
    assert os.getsid(lock["pid"]) == lock["pid"]  # its own session: the shell may go
    again = _command(root, "start", "--minutes", "5", "--code", "tree")
    assert again.returncode == 2 and f"pid {lock['pid']}" in again.stderr
    state = root / "work/run/neural/kuhn/in-progress/learned_s0-1/meta.json"

    def learned_something():  # a state past iteration 0 (row 0 is the untrained networks)
        try:
            return json.loads(state.read_text())["next_row"] >= 2
        except (OSError, ValueError, KeyError):
            return False
    _wait(learned_something, 240, "the job's first saved state past iteration 0")
    said = _command(root, "status")
    assert said.returncode == 0 and "running" in said.stdout
    assert "now: kuhn/learned_s0-1" in said.stdout, said.stdout
    stopped = _command(root, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not (root / "work/running.json").exists()
    report = json.loads((root / "out/allocation.json").read_text())
    # killed by the stop, with the state it saved last; or, on a machine busy enough to make
    # the job overrun its slot before the stop came, stopped there by its own budget
    assert [j["status"] for j in report["jobs"]] in (
        ["in progress (killed, with the state it saved last)"],
        ["in progress (stopped at the end of its slot, state saved)"]), report["jobs"]
    assert report["processor"]["processor"] == cpu["processor"]
    refused = _command(root, "start", "--minutes", "5", "--code", "tree")
    assert refused.returncode == 2 and "not yet published" in refused.stderr

    kuhn = _publish(root, cfg, monkeypatch)
    assert kuhn["in_progress"] == ["learned_s0-1"] and kuhn["seeds"] == []
    assert list((root / "reports").glob("*.json"))
    resumed = _command(root, "start", "--minutes", "20", "--code", "tree")
    assert resumed.returncode == 0, resumed.stderr
    _at_the_tests_priority(json.loads((root / "work/running.json").read_text())["pid"])
    _wait(lambda: not (root / "work/running.json").exists(), 240, "the second allocation")
    report = json.loads((root / "out/allocation.json").read_text())
    assert [j["status"] for j in report["jobs"]] == ["finished"], report["jobs"]
    block = root / "work/run/neural/kuhn/blocks/learned_s0-1"
    whole = root / "whole"
    neural_run_process("--config", str(root / "results/config/neural.json"), "--game", "kuhn",
                       "--critic", "learned", "--seeds", "0-1", "--compiled",
                       str(root / "results/neural/kuhn/game.npz"), "--curves",
                       str(whole / "curves.parquet"), "--policies",
                       str(whole / "policies.parquet"))
    for name in ("curves.parquet", "policies.parquet"):
        pd.testing.assert_frame_equal(pd.read_parquet(block / name),
                                      pd.read_parquet(whole / name), check_exact=True)
    kuhn = _publish(root, cfg, monkeypatch)
    assert kuhn["seeds"] == [0, 1] and not kuhn.get("in_progress")
    provenance = json.loads((root / "published/neural/kuhn/blocks/learned_s0-1/"
                             "provenance.json").read_text())
    assert len(provenance["pieces"]) == 2
    for piece in provenance["pieces"]:
        assert piece["processor"] == cpu["processor"] and piece["isa"] == cpu["isa"]
        assert piece["variant"].startswith("map_used."), piece["variant"]
        assert piece["threads"] >= 1 and "xla_flags" in piece and piece["cpu_devices"] >= 1
    assert provenance["devices"] == [f"{cpu['processor']}, {cpu['isa']}"]


def _started_with_a_saved_state(root: Path) -> tuple[int, Path]:
    """A started allocation's pid and its job's state once saved past iteration 0."""
    started = _command(root, "start", "--minutes", "20", "--code", "tree",
                       "--checkpoint-minutes", "0.05")
    assert started.returncode == 0, started.stderr
    pid = json.loads((root / "work/running.json").read_text())["pid"]
    _at_the_tests_priority(pid)
    state = root / "work/run/neural/kuhn/in-progress/learned_s0-1/meta.json"

    def learned_something():
        try:
            return json.loads(state.read_text())["next_row"] >= 2
        except (OSError, ValueError, KeyError):
            return False
    _wait(learned_something, 240, "the job's first saved state past iteration 0")
    return pid, state


@pytest.mark.workflow
@pytest.mark.parametrize("killed", ["with its job", "alone"])
def test_an_allocation_killed_leaves_its_state_packed_and_published(tmp_path, monkeypatch,
                                                                    killed):
    """Killed (SIGKILL to its process group, as when the machine stops under it, or to the
    allocation alone, its job left running), the allocation packs nothing itself; status says
    so, and the next start kills the job left, packs what it left (the state its job saved
    last) and refuses to start over it until that is published; it publishes as the block in
    progress."""
    import signal

    from neurd.publication.allocation.background import jobs_of

    root, cfg, _ = _small(tmp_path)
    pid, state = _started_with_a_saved_state(root)
    if killed == "alone":
        os.kill(pid, signal.SIGKILL)
    else:
        os.killpg(pid, signal.SIGKILL)
    _wait(lambda: not Path(f"/proc/{pid}").exists(), 30, "the allocation's end")
    assert bool(jobs_of(pid, (root / "work/code").resolve())) == (killed == "alone")
    said = _command(root, "status")
    assert "ended without packing" in said.stdout, said.stdout
    assert not (root / "out/blocks.json").exists()
    refused = _command(root, "start", "--minutes", "5", "--code", "tree")
    assert refused.returncode == 2, refused.stderr
    assert "ended without packing" in refused.stderr and "learned_s0-1 (in progress)" in \
        refused.stderr and "not yet published" in refused.stderr, refused.stderr
    report = json.loads((root / "out/allocation.json").read_text())
    assert report["jobs"][-1]["status"].startswith("in progress (its allocation ended")
    assert _command(root, "status").stdout.count("ended without packing") == 0
    assert jobs_of(pid, (root / "work/code").resolve()) == []
    kuhn = _publish(root, cfg, monkeypatch)
    assert kuhn["in_progress"] == ["learned_s0-1"] and kuhn["seeds"] == []
    meta = json.loads((root / "published/neural/kuhn/in-progress/learned_s0-1/meta.json")
                      .read_text())
    assert meta["next_row"] >= 2


def test_a_gpu_takes_goofspiel_first_and_skips_what_the_cpu_published():
    """On a GPU the games come the other way round: Goofspiel's blocks before Leduc's and
    Kuhn's; the seeds a CPU allocation has published are never planned again."""
    rows = [dict(r, parallel=1) for r in _rows(scale=0.05)]
    published = {"kuhn": list(range(40)), "leduc": list(range(12))}
    best = gpu_schedule.schedule(PAPER, published, Throughput(rows), 8 * 60.0, 8 * 60.0,
                               bytes_=Bytes({g: 1e5 for g in MS}, {g: 1e5 for g in MS}))
    planned = [b for step in best.allocations for b in step.blocks]
    order = [b.game for b in planned]
    assert order == sorted(order, key=["goofspiel", "leduc", "kuhn"].index)
    assert not [b for b in planned if b.game == "kuhn"]
    assert min(b.first for b in planned if b.game == "leduc") == 12
    assert best.complete


def test_a_measurement_beside_busy_work_is_seen_as_such():
    """What other processes take from the CPU during a measurement is measured (from
    /proc/stat): a busy loop beside it shows as most of a core, so the measurement is not kept
    for later allocations."""
    import resource

    from neurd.publication.allocation import cpu as cpu_run

    if cpu_run.busy_seconds() is None:
        pytest.skip("the system does not say how busy its CPU is (no /proc/stat)")
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    before, start = cpu_run.busy_seconds(), time.monotonic()
    busy = subprocess.Popen([sys.executable, "-c",
                             "import time\nend = time.time() + 1.5\nwhile time.time() < end: pass"])
    time.sleep(1.5)
    share = cpu_run.others_share(before, usage.ru_utime + usage.ru_stime,
                                        time.monotonic() - start)
    busy.wait()
    assert share > cpu_run.QUIET_CORES, share



def test_a_throughput_row_prices_only_the_processor_it_was_measured_on(tmp_path):
    """Two processors of one model name and instruction set share a throughput file, each
    row stamped with the processor's family, model and stepping numbers: each reads back its
    own rows only, keeping one's rows does not drop the other's, and a row without the numbers
    (of a file written before they were recorded) prices no processor."""
    from neurd.publication.allocation import cpu as cpu_run

    first = {"processor": "AMD EPYC", "isa": "AVX512_BF16", "jax": "0.1",
             "processor_id": "family 26 model 2 stepping 1"}
    second = dict(first, processor_id="family 25 model 17 stepping 1")

    def rows(ms):
        return [{"game": "kuhn", "configurations": n, "ms_per_cycle": ms,
                 "revision_code": "abc", "jax": "0.1"} for n in (12, 24)]

    tables = tmp_path / "tables"
    path = cpu_run.keep_rows(tables, first, rows(1.0))
    assert cpu_run.keep_rows(tables, second, rows(2.0)) == path
    for cpu, ms in ((first, 1.0), (second, 2.0)):
        mine = cpu_run.known_rows(tables, cpu, "abc")
        assert [r["ms_per_cycle"] for r in mine] == [ms, ms]
        assert {r["processor_id"] for r in mine} == {cpu["processor_id"]}
    # measured again on the first: its rows replaced, the second's kept
    cpu_run.keep_rows(tables, first, rows(3.0))
    assert [r["ms_per_cycle"] for r in cpu_run.known_rows(tables, first, "abc")] == [3.0, 3.0]
    assert [r["ms_per_cycle"] for r in cpu_run.known_rows(tables, second, "abc")] == [2.0, 2.0]
    assert cpu_run.known_rows(tables, first, "other code") == []
    assert cpu_run.known_rows(tables, dict(first, isa="AVX2"), "abc") == []
    kept = json.loads(path.read_text())
    kept["rows"] = [{k: v for k, v in r.items() if k != "processor_id"} for r in kept["rows"]]
    path.write_text(json.dumps(kept))
    assert cpu_run.known_rows(tables, first, "abc") == []
    assert cpu_run.known_rows(tables, dict(first, processor_id=""), "abc") == []


@pytest.mark.workflow
def test_a_group_cut_in_half_is_held_published_and_completed(tmp_path, monkeypatch):
    """A Kuhn seed whose learned block finished while its exact block was stopped (a group cut
    by the deadline): the learned block, held at its last row, and the exact block's state are
    packed and published in progress (no seed yet); the next allocation's plan takes the group
    first, the held block writes its tables again at once (the same numbers) and the exact one
    finishes; published, the seed is whole."""
    import pandas as pd

    from neurd.config import load_snapshot
    from neurd.publication.allocation import blocks as block_run
    from neurd.publication.allocation import cpu as cpu_run
    from neurd.publication.allocation.packing import pack_blocks
    from neurd.publication.allocation.report import Report
    from neurd.publication.resume_states import state_folder

    root = tmp_path
    cfg = dict(load_snapshot(ROOT / "published/smoke/config/neural.json"))
    cfg["phase_iterations"] = dict(cfg["phase_iterations"], kuhn=8000)
    assert cfg["exact_critic_games"] == ["kuhn"]
    write_inputs(root, cfg, root / "published")
    results = root / "results"
    env = dict(cpu_run.job_env(SimpleNamespace(work=root / "work")), NEURD_CHECKPOINT_MINUTES="0")
    far = time.monotonic() + 600.0
    learned = gpu_schedule.Block("kuhn", "learned", 0, 0, 0, 60.0)
    run = root / "run"
    record = block_run.run_block(Report(root / "out", 10.0), cfg, learned, results, env, far,
                                 root / "published", "default", work=run, may_stop=True,
                                 keep_state=True)
    assert record["status"] == "finished" and record["state"] is not None, record
    assert json.loads((record["state"] / "meta.json").read_text())["next_row"] > 2
    held_curves = pd.read_parquet(record["folder"] / "curves.parquet")
    exact_state = run / state_folder("kuhn", "exact_s0-0")
    stopped = subprocess.run(
        [sys.executable, "-m", "neurd.cli", "neural-run", "--config",
         str(results / "config/neural.json"), "--game", "kuhn", "--critic", "exact", "--seeds",
         "0-0", "--compiled", str(results / "neural/kuhn/game.npz"), "--curves",
         str(root / "x/curves.parquet"), "--policies", str(root / "x/policies.parquet"),
         "--checkpoint", str(exact_state), "--stop-after-minutes", "0.0001"],
        env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert stopped.returncode == block_run.EXIT_STOPPED, stopped.stderr[-2000:]
    (exact_state / "run.log").write_text(stopped.stderr)
    report = Report(root / "out", 10.0)
    report.data.update(kind="cpu", date="2026-01-01")
    pack_blocks(report, cfg, results, [], [record["state"], exact_state], work=run)
    kuhn = _publish(root, cfg, monkeypatch)
    assert kuhn["in_progress"] == ["exact_s0-0", "learned_s0-0"] and kuhn["seeds"] == []
    assert "100%" in kuhn["progress"]["learned_s0-0"], kuhn["progress"]

    in_progress, _ = block_run.published_progress(root / "published", cfg)
    rows = [r for r in _rows() if r["game"] == "kuhn"]
    step = next_allocation(cfg, {}, Throughput(rows), 3600.0, in_progress, BYTES)
    first, second = step.blocks[:2]
    assert (first.name, first.done_before) == ("learned_s0-0", 1.0)
    assert second.name == "exact_s0-0" and 0 < second.done_before < 1
    again = root / "again"
    done = [block_run.run_block(Report(root / "out", 10.0), cfg, b, results, env, far,
                                root / "published", "default", work=again, may_stop=True,
                                keep_state=True) for b in (first, second)]
    assert [d["status"] for d in done] == ["finished", "finished"], done
    pd.testing.assert_frame_equal(pd.read_parquet(done[0]["folder"] / "curves.parquet"),
                                  held_curves, check_exact=True)
    for name in os.listdir(root / "out"):
        (root / "out" / name).unlink()
    pack_blocks(report, cfg, results, [d["folder"] for d in done], [], work=again)
    kuhn = _publish(root, cfg, monkeypatch)
    assert kuhn["seeds"] == [0] and not kuhn.get("in_progress")
    assert sorted(kuhn["blocks"]) == ["exact_s0-0", "learned_s0-0"]
    for name, devices in (("learned_s0-0", None), ("exact_s0-0", 1)):  # the exact: one device
        provenance = json.loads((root / f"published/neural/kuhn/blocks/{name}/"
                                 "provenance.json").read_text())
        assert all(p["cpu_devices"] == (devices or p["threads"]) for p in provenance["pieces"])


@pytest.mark.workflow
@pytest.mark.parametrize("broken", ["report", "lock"])
def test_an_unreadable_report_or_lock_loses_no_state(tmp_path, monkeypatch, broken):
    """Its report truncated after the allocation was killed (as a crash while writing it
    would), or its lock truncated while it runs: neither is taken for "nothing running,
    nothing left". Status says what the disk holds and what runs, start refuses (it would
    have deleted the only saved state), stop stops what runs of the allocation's code and
    packs every state it finds, and the state publishes as the block in progress."""
    import signal

    root, cfg, _ = _small(tmp_path)
    pid, state = _started_with_a_saved_state(root)
    if broken == "report":
        os.killpg(pid, signal.SIGKILL)
        _wait(lambda: not Path(f"/proc/{pid}").exists(), 30, "the allocation's end")
        report = root / "out/allocation.json"
        report.write_bytes(report.read_bytes()[:40])
    else:
        lock = root / "work/running.json"
        lock.write_bytes(lock.read_bytes()[:10])
    said = _command(root, "status")
    assert said.returncode == 0 and "cannot be read" in said.stdout, said.stdout
    assert "in-progress/learned_s0-1" in said.stdout, said.stdout
    assert ("processes of the allocation's code: none" in said.stdout) == (broken == "report")
    refused = _command(root, "start", "--minutes", "5", "--code", "tree")
    assert refused.returncode == 2 and "cannot be read" in refused.stderr, refused.stderr
    assert state.is_file()  # nothing deleted
    stopped = _command(root, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert "kuhn/in-progress/learned_s0-1" in stopped.stdout, stopped.stdout
    _wait(lambda: not Path(f"/proc/{pid}").exists(), 30, "the allocation's end")
    assert not (root / "work/running.json").exists()
    if broken == "report":
        assert list((root / "out").glob("allocation.unreadable-*.json"))
    kuhn = _publish(root, cfg, monkeypatch)
    assert kuhn["in_progress"] == ["learned_s0-1"] and kuhn["seeds"] == []


def test_a_full_or_unwritable_folder_is_refused_in_one_line(tmp_path, monkeypatch):
    from neurd.publication.allocation import background

    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    said = background.writable(not_a_folder / "out")
    assert said.startswith("cannot write in ") and "out" in said and "\n" not in said

    def full(self, data):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(Path, "write_bytes", full)
    said = background.writable(tmp_path / "work")
    assert said.endswith("work: No space left on device"), said
