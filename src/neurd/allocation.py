"""The plan of a short GPU allocation: which seed blocks to run so that every one finishes.

GPU time comes in short allocations (one GPU, about ten minutes, nothing kept
afterwards but a few files).  The paper-scale Fig 6 is therefore computed in
seed blocks (:func:`neurd.pipeline.neural.block_plan`), each a whole run of its
seeds from the first iteration to the last, sized from measured throughput so
that it finishes inside the allocation that starts it: no state crosses from
one allocation to the next, and an allocation loses nothing but what its plan
chose not to start.

:func:`plan` is a pure function of the config, the seeds already published,
the measured throughput (ms per learning cycle of each game and critic at N
configurations with P jobs sharing the GPU) and the minutes left.  It puts the
paper's **length** first (every game at full length with at least one seed
before any game gets more), then **seeds** (the cheapest next seed first, so
that the allocations needed for all of them are few); a block whose predicted
time does not fit is never planned.  It tries 1..P slots and keeps
the best.  :func:`schedule` repeats it over future allocations of the same
size: the plan for the rest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

import numpy as np

from neurd.pipeline.neural import critics, main_critic

# A job's predicted time is start-up + overhead + SAFETY x (cycles x ms + checkpoints x
# evaluation): the throughput was measured on short segments, the jobs run for minutes.
# Start-up is what compiling and the first segment took in a fresh process (measured with
# the other programs compiling beside it: an upper bound); the overhead covers the rest a job
# does once (imports, the exact evaluation's compilation, writing the tables)
SAFETY = 1.15
JOB_OVERHEAD_SECONDS = 45.0
DEFAULT_STARTUP_SECONDS = 60.0


@dataclass(frozen=True)
class Block:
    """A seed block planned: game, critic, seeds ``first..last``, its slot and timing."""

    game: str
    critic: str
    first: int
    last: int
    slot: int
    predicted_seconds: float

    @property
    def name(self) -> str:
        return f"{self.critic}_s{self.first}-{self.last}"

    @property
    def seeds(self) -> int:
        return self.last - self.first + 1


@dataclass
class Plan:
    """An allocation's blocks, the parallel jobs they assume, and why anything was left."""

    parallel: int
    blocks: list[Block] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def seeds_after(self, published: Mapping[str, Sequence[int]], main: Mapping[str, str]
                    ) -> dict[str, int]:
        """Seeds each game has once this plan's blocks (of its main critic) are published."""
        return {g: len(published.get(g, ())) + sum(b.seeds for b in self.blocks
                                                   if b.game == g and b.critic == main[g])
                for g in main}

    def to_json(self) -> dict:
        return {"parallel": self.parallel, "notes": self.notes,
                "blocks": [{**asdict(b), "name": b.name} for b in self.blocks]}


def configurations(cfg: Mapping, seeds: int) -> int:
    """Configurations of a block of ``seeds`` seeds (every algorithm and entropy level)."""
    return len(cfg["algorithms"]) * len(cfg["entropies"]) * seeds


def cycles(cfg: Mapping, game: str) -> int:
    """Learning cycles of one run of ``game`` (every phase)."""
    return int(cfg["phases"]) * int(cfg["phase_iterations"][game]) // int(
        cfg["critic_updates_per_policy_update"])


def checkpoints(cfg: Mapping, game: str) -> int:
    """Checkpoint evaluations of one run of ``game``."""
    from neurd.neural.experiment import checkpoint_grid  # puts off JAX

    return len(checkpoint_grid(int(cfg["phase_iterations"][game]), int(cfg["phases"]),
                               int(cfg["checkpoints"]["geometric"]),
                               int(cfg["checkpoints"]["linear"]),
                               int(cfg["critic_updates_per_policy_update"]))[0])


def _interpolate(points: list[tuple[float, float]], n: float) -> float | None:
    """Linear in N between measured points; the smallest point's value below it (fewer
    configurations take no longer); None above the largest (not measured: not planned)."""
    if not points:
        return None
    points = sorted(points)
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    if n > xs[-1]:
        return None
    return float(np.interp(n, xs, ys))


class Throughput:
    """Measured rows: ``game, critic, configurations, parallel, ms_per_cycle`` and, where
    timed, ``checkpoint_seconds`` and ``startup_seconds``."""

    def __init__(self, rows: Sequence[Mapping]):
        """Rows of this code with a finite positive time; where several jobs timed the same
        cell at once (``parallel`` > 1, a row each), the slowest is kept."""
        kept: dict[tuple, dict] = {}
        for row in rows:
            ms = float(row.get("ms_per_cycle", math.nan))
            if row.get("code", "this") != "this" or not (math.isfinite(ms) and ms > 0):
                continue
            key = (row["game"], row.get("critic", "learned"), int(row["configurations"]),
                   int(row["parallel"]))
            if key not in kept or ms > float(kept[key]["ms_per_cycle"]):
                kept[key] = dict(row)
        self.rows = list(kept.values())

    def parallels(self) -> list[int]:
        return sorted({int(r["parallel"]) for r in self.rows})

    def _points(self, game, critic, parallel, key):
        return [(float(r["configurations"]), float(r[key])) for r in self.rows
                if r["game"] == game and r.get("critic", "learned") == critic
                and int(r["parallel"]) == parallel and r.get(key) is not None
                and math.isfinite(float(r[key]))]

    def predict(self, cfg: Mapping, game: str, critic: str, seeds: int, parallel: int
                ) -> float | None:
        """Seconds a block of ``seeds`` seeds takes with ``parallel`` jobs on the GPU (None:
        not measured there)."""
        n = configurations(cfg, seeds)
        ms = _interpolate(self._points(game, critic, parallel, "ms_per_cycle"), n)
        if ms is None:
            return None
        evaluation = _interpolate(self._points(game, critic, 1, "checkpoint_seconds"), n)
        if evaluation is None:
            evaluation = _interpolate(self._points(game, "learned", 1, "checkpoint_seconds"), n)
        startups = [float(r["startup_seconds"]) for r in self.rows if r["game"] == game
                    and r.get("startup_seconds") is not None]
        startup = max(startups) if startups else DEFAULT_STARTUP_SECONDS
        work = (cycles(cfg, game) * ms / 1e3
                + checkpoints(cfg, game) * (evaluation or 0.0) * parallel)
        return startup + JOB_OVERHEAD_SECONDS + SAFETY * work


def _critics(cfg: Mapping, game: str) -> tuple[str, ...]:
    return critics(cfg, game)


def plan_slots(cfg: Mapping, published: Mapping[str, Sequence[int]], throughput: Throughput,
               seconds: float, parallel: int) -> Plan:
    """The plan with ``parallel`` slots of ``seconds`` each (see the module):

    1. **length**: a one-seed block of every game that has no seed yet, the cheapest first,
       each in the slot with the most time left (with its exact-critic twin);
    2. **seeds**: those blocks grown a seed at a time, the one whose next seed costs least
       first (a block of more seeds costs little more on a GPU), while they fit their slots;
    3. new blocks, as large as fit, the game with the fewest seeds first, while any fits.
    """
    free = [float(seconds)] * parallel
    total = int(cfg["seeds"])
    done = {g: sorted(int(s) for s in published.get(g, ())) for g in cfg["games"]}
    order = list(cfg["games"])
    units: list[dict] = []  # game, first, seeds, times and slots per critic

    def times(game, seeds):
        out = [throughput.predict(cfg, game, c, seeds, parallel) for c in _critics(cfg, game)]
        return None if any(t is None for t in out) else out

    def seeds_of(game):
        return len(done[game]) + sum(u["seeds"] for u in units if u["game"] == game)

    def taken(game):
        return set(done[game]) | {s for u in units if u["game"] == game
                                  for s in range(u["first"], u["first"] + u["seeds"])}

    def place(game, seeds):
        first = next(s for s in range(total + 1) if s not in taken(game))
        room = 0
        while first + room < total and first + room not in taken(game):
            room += 1
        for size in range(min(seeds, room), 0, -1):
            wanted = times(game, size)
            slots = None if wanted is None else _fit(free, wanted)
            if slots is not None:
                for t, slot in zip(wanted, slots):
                    free[slot] -= t
                units.append({"game": game, "first": first, "seeds": size, "times": wanted,
                              "slots": slots})
                return True
        return False

    notes = []
    one_seed = {g: times(g, 1) for g in order}
    for game in sorted((g for g in order if not done[g]),
                       key=lambda g: (max(one_seed[g]) if one_seed[g] else math.inf,
                                      order.index(g))):
        if not place(game, 1):
            need = ("not measured" if one_seed[game] is None
                    else f"{max(one_seed[game]) / 60:.1f} min for one seed")
            notes.append(f"{game}: no block fits ({need}; largest slot left "
                         f"{max(free) / 60:.1f} min with {parallel} jobs on the GPU)")
    while True:  # grow the block whose next seed costs least (then: the fewest seeds)
        options = []
        for unit in units:
            end = unit["first"] + unit["seeds"]
            if end >= total or end in taken(unit["game"]):
                continue
            wanted = times(unit["game"], unit["seeds"] + 1)
            if wanted is None:
                continue
            extra = [w - t for w, t in zip(wanted, unit["times"])]
            room = list(free)
            for slot, more in zip(unit["slots"], extra):
                room[slot] -= more
            if min(room) >= -1e-9:
                options.append((sum(extra), seeds_of(unit["game"]), order.index(unit["game"]),
                                id(unit), unit, wanted, room))
        if not options:
            break
        *_, unit, wanted, room = min(options, key=lambda o: o[:4])
        free[:] = room
        unit["seeds"], unit["times"] = unit["seeds"] + 1, wanted
    while True:
        open_games = [g for g in order if seeds_of(g) < total]
        placed = False
        for game in sorted(open_games, key=lambda g: (seeds_of(g), order.index(g))):
            if place(game, total):
                placed = True
                break
        if not placed:
            break
    out = Plan(parallel=parallel, notes=notes)
    for unit in units:
        for critic, t, slot in zip(_critics(cfg, unit["game"]), unit["times"], unit["slots"]):
            out.blocks.append(Block(unit["game"], critic, unit["first"],
                                    unit["first"] + unit["seeds"] - 1, slot, round(t, 1)))
    return out


def _fit(free: list[float], times: list[float]) -> list[int] | None:
    """Slots for jobs of ``times`` (each in the slot with the most time left that holds it),
    or None if one does not fit."""
    left, slots = list(free), []
    for t in sorted(range(len(times)), key=lambda i: -times[i]):
        best = max(range(len(left)), key=lambda k: left[k])
        if left[best] < times[t]:
            return None
        left[best] -= times[t]
        slots.append((t, best))
    return [slot for _, slot in sorted(slots)]


def _score(plan: Plan, cfg: Mapping, published: Mapping[str, Sequence[int]]) -> tuple:
    after = plan.seeds_after(published, {g: main_critic(cfg) for g in cfg["games"]})
    return (sum(1 for v in after.values() if v > 0), min(after.values()), sum(after.values()),
            -plan.parallel)


def plan(cfg: Mapping, published: Mapping[str, Sequence[int]], throughput: Throughput,
         seconds: float, max_parallel: int = 3) -> Plan:
    """The best plan for ``seconds`` of jobs: over 1..``max_parallel`` jobs sharing the GPU
    (those measured), the most games at full length, then the fewest seeds of any game
    highest, then the most seeds."""
    options = [plan_slots(cfg, published, throughput, seconds, p)
               for p in throughput.parallels() if p <= max_parallel]
    if not options:
        return Plan(parallel=1, notes=["no throughput measured: nothing can be planned"])
    return max(options, key=lambda p: _score(p, cfg, published))


def schedule(cfg: Mapping, published: Mapping[str, Sequence[int]], throughput: Throughput,
             seconds: float, max_parallel: int = 3, limit: int = 50) -> list[Plan]:
    """The plans of this allocation and the following ones of the same size, until every
    game has every seed (or nothing more fits, or ``limit`` allocations)."""
    done = {g: list(published.get(g, ())) for g in cfg["games"]}
    out = []
    for _ in range(limit):
        step = plan(cfg, done, throughput, seconds, max_parallel)
        if not step.blocks:
            out.append(step)
            break
        out.append(step)
        for block in step.blocks:
            if block.critic == main_critic(cfg):
                done[block.game] = sorted(set(done[block.game])
                                          | set(range(block.first, block.last + 1)))
        if all(len(v) >= int(cfg["seeds"]) for v in done.values()):
            break
    return out


def describe(cfg: Mapping, published: Mapping[str, Sequence[int]], plans: list[Plan]) -> str:
    """The plan for the rest in words: when each game first has a seed at full length and
    when it has all of them."""
    total, main = int(cfg["seeds"]), {g: main_critic(cfg) for g in cfg["games"]}
    first, full = {}, {}
    done = {g: list(published.get(g, ())) for g in cfg["games"]}
    for k, step in enumerate(plans, start=1):
        after = step.seeds_after(done, main)
        for game, seeds in after.items():
            if seeds and game not in first:
                first[game] = k
            if seeds >= total and game not in full:
                full[game] = k
        for block in step.blocks:
            if block.critic == main[block.game]:
                done[block.game] = sorted(set(done[block.game])
                                          | set(range(block.first, block.last + 1)))
    parts = []
    for game in cfg["games"]:
        have = len(published.get(game, ()))
        when_first = ("has" if have else f"allocation {first[game]}" if game in first
                      else "never at this speed")
        when_full = (f"allocation {full[game]}" if game in full else "not within "
                     f"{len(plans)} allocations")
        parts.append(f"{game}: {have} of {total} seeds now; first seed at full length: "
                     f"{when_first}; all {total}: {when_full}")
    last = plans[-1].notes if plans else []
    return "; ".join(parts) + (f" ({'; '.join(last)})" if last else "")
