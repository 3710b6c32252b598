"""The schedule of allocations: seed blocks sized and placed to finish the run soonest.

GPU time comes in short allocations (one GPU, about ten minutes, nothing kept
afterwards but a few files).  The paper-scale Fig 6 is therefore computed in
seed blocks (:func:`neurd.neural.runs.block_plan`): the runs of seeds
``first..last`` of one game and critic as one batch.  A block that does not
finish inside the allocation that starts it is stopped at a checkpoint row, its
saved state comes back and is published as the game's **block in progress**
(:mod:`neurd.publication.resume_states`), and the next allocation resumes it first.  A
game run with several critics (the exact critic beside the learned one) is an
exception: a seed is published with every critic at once, so its blocks are
planned only where all of them finish in the allocation (a CPU allocation, which may be cut
short, holds a finished block in progress until the other critics' blocks of its seeds come:
:func:`in_progress_groups`).

:func:`schedule` is a pure function of the config, the seeds already published,
the blocks in progress, the measured throughput (ms per learning cycle of each
game and critic at N configurations with P jobs sharing the GPU), the seconds
of jobs of this allocation and of the next ones, and the repository bytes the
run may still add (:data:`HISTORY_CAP` in all: every finished block once, and
every block-in-progress state each time one is committed).  It simulates the
allocations for every number of jobs sharing the GPU and every block size of
each game, and keeps the schedule that **finishes every game's seeds in the
fewest allocations** within the cap (then: the first seed of each game soonest,
then the fewest GPU seconds, then the fewest bytes).  :func:`next_allocation` is its first
allocation; :func:`describe` says, per game, which allocation brings its first
seed and its last.  A GPU takes the games in :data:`GPU_ORDER`, Goofspiel first.

A block's seconds and bytes are priced in :mod:`neurd.publication.costs`; one CPU allocation is
planned in :mod:`neurd.publication.cpu_schedule`, with this module's blocks.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from neurd.neural.runs import configurations, critics, main_critic
from neurd.publication.costs import Bytes, Throughput

# a piece of a block that would compute less than this is not started (its start-up would
# cost more than it computes); SAVE_SECONDS is kept at a slot's end for saving the state
MIN_PIECE_SECONDS = 60.0
SAVE_SECONDS = 30.0
# what the whole paper-scale run may add to the repository's history
HISTORY_CAP = 100 * 2**20
# block sizes tried (seeds per block); the config's seeds and what is measured bound them
BLOCK_SIZES = (1, 2, 4, 5, 8, 10, 20, 40)
# the games' order on a GPU: Goofspiel, which takes a CPU days, first; Leduc and Kuhn, which a
# CPU computes in the background (neurd.publication.cpu_schedule, in the other order), after
GPU_ORDER = ("goofspiel", "leduc", "kuhn")


@dataclass(frozen=True)
class Block:
    """A piece of a seed block planned: game, critic, seeds ``first..last``, its slot, the
    seconds it is predicted to take there, and the share of the block's work done before it
    (``done_before``, > 0 when it resumes a block in progress) and after it (1: it finishes)."""

    game: str
    critic: str
    first: int
    last: int
    slot: int
    predicted_seconds: float
    done_before: float = 0.0
    done_after: float = 1.0

    @property
    def name(self) -> str:
        return f"{self.critic}_s{self.first}-{self.last}"

    @property
    def seeds(self) -> int:
        return self.last - self.first + 1

    @property
    def finishes(self) -> bool:
        return self.done_after >= 1.0


@dataclass(frozen=True)
class InProgress:
    """A published block in progress: ``done`` is the share of its learning cycles done."""

    game: str
    critic: str
    first: int
    last: int
    done: float


@dataclass
class Allocation:
    """An allocation's block pieces, the parallel jobs they assume, and why anything was left."""

    parallel: int
    blocks: list[Block] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def seeds_after(self, published: Mapping[str, Sequence[int]], main: Mapping[str, str]
                    ) -> dict[str, int]:
        """Seeds each game has once this allocation's finished blocks (main critic) are
        published."""
        return {g: len(published.get(g, ())) + sum(b.seeds for b in self.blocks if b.game == g
                                                   and b.critic == main[g] and b.finishes)
                for g in main}

    def to_json(self) -> dict:
        return {"parallel": self.parallel, "notes": self.notes,
                "blocks": [{**asdict(b), "name": b.name, "finishes": b.finishes}
                           for b in self.blocks]}


@dataclass
class _Job:
    game: str
    critic: str
    first: int
    last: int
    work: float            # seconds of the whole block (safety included)
    done: float = 0.0      # share done
    whole: bool = False    # must finish in the allocation that starts it

    @property
    def seeds(self) -> int:
        return self.last - self.first + 1


@dataclass
class Schedule:
    """The allocations of one choice of jobs on the GPU and block sizes."""

    parallel: int
    sizes: dict[str, int]
    allocations: list[Allocation]
    complete: bool
    history_bytes: float
    gpu_seconds: float
    first: dict[str, int]
    full: dict[str, int]
    seeds: dict[str, int] = field(default_factory=dict)
    capped: bool = False

    def key(self, cap: float) -> tuple:
        """Smaller is better: complete within ``cap`` first, in the fewest allocations, each
        game's first seed soonest, the fewest GPU seconds and bytes, the fewest jobs; an
        incomplete one (or over the cap) by the most games completed."""
        within = self.history_bytes <= cap
        if self.complete and within:
            return (0, len(self.allocations), sum(self.first.values()), self.gpu_seconds,
                    self.history_bytes, self.parallel)
        return (1, not within, -len(self.full), -sum(self.seeds.values()), len(self.allocations),
                self.gpu_seconds, self.history_bytes)


def in_progress_groups(cfg: Mapping, in_progress: Sequence[InProgress]) -> list[InProgress]:
    """The blocks in progress, each followed, in a game of several critics, by a block of
    every other critic of its seeds that is not in progress (``done`` 0: started afresh) and
    overlaps none that is: a seed is published with every critic of its game, so a block held
    in progress (finished, or stopped) waits for the other critics' blocks of its seeds.  Each
    group (a game's seeds ``first..last``) comes whole, its critics in the config's order."""
    groups: dict[tuple, dict[str, InProgress]] = {}
    for block in in_progress:
        groups.setdefault((block.game, block.first, block.last), {})[block.critic] = block
    out = []
    for (game, first, last), held in groups.items():
        for critic in critics(cfg, game):
            if critic in held:
                out.append(held[critic])
            elif not any(b.game == game and b.critic == critic and b.first <= last
                         and first <= b.last for b in in_progress):
                out.append(InProgress(game, critic, first, last, done=0.0))
    return out


def open_seeds(cfg, game, published, in_progress) -> list[int]:
    taken = set(int(s) for s in published.get(game, ()))
    for block in in_progress:
        if block.game == game:
            taken |= set(range(block.first, block.last + 1))
    return [s for s in range(int(cfg["seeds"])) if s not in taken]


def seed_ranges(seeds: Sequence[int], size: int) -> list[tuple[int, int]]:
    """Consecutive runs of at most ``size`` seeds covering ``seeds``."""
    out, start = [], None
    for k, s in enumerate(seeds):
        if start is None:
            start = s
        end_here = k + 1 == len(seeds) or seeds[k + 1] != s + 1 or s - start + 1 == size
        if end_here:
            out.append((start, s))
            start = None
    return out


def _jobs(cfg, published, in_progress, throughput, parallel, sizes) -> list[_Job] | None:
    """The jobs of a schedule in order: blocks in progress first, then new blocks, game by game
    in :data:`GPU_ORDER` (the game a CPU cannot compute first; the seeds a CPU allocation has
    published are not among them)."""
    jobs = []
    for block in in_progress_groups(cfg, in_progress):
        work = throughput.work(cfg, block.game, block.critic, block.last - block.first + 1,
                               parallel)
        if work is None:
            return None
        jobs.append(_Job(block.game, block.critic, block.first, block.last, work,
                         done=block.done, whole=len(critics(cfg, block.game)) > 1))
    queues = {}
    for game in cfg["games"]:
        queue = []
        for first, last in seed_ranges(open_seeds(cfg, game, published, in_progress),
                                     sizes[game]):
            for critic in critics(cfg, game):
                work = throughput.work(cfg, game, critic, last - first + 1, parallel)
                if work is None:
                    return None
                queue.append(_Job(game, critic, first, last, work,
                                  whole=len(critics(cfg, game)) > 1))
        queues[game] = queue
    for game in [g for g in GPU_ORDER if g in queues] + [g for g in queues
                                                          if g not in GPU_ORDER]:
        jobs += queues[game]
    return jobs


def _allocation(jobs: list[_Job], throughput: Throughput, parallel: int, seconds: float
                ) -> tuple[Allocation, list[_Job]]:
    """Place ``jobs`` (in order, each in the slot with the most time left) into one
    allocation of ``parallel`` slots of ``seconds``; return its blocks and the jobs left (a block
    stopped in this allocation first, with its share done)."""
    free = [float(seconds)] * parallel
    step, left, carried = Allocation(parallel=parallel), [], []
    for job in jobs:
        slot = max(range(parallel), key=lambda k: free[k])
        fixed = throughput.startup(job.game)
        rest = (1.0 - job.done) * job.work
        room = free[slot] - fixed
        if room >= rest:
            after, used = 1.0, fixed + rest
        elif not job.whole and room >= SAVE_SECONDS + MIN_PIECE_SECONDS:
            after = job.done + (room - SAVE_SECONDS) / job.work
            used = free[slot]
        else:
            left.append(job)
            continue
        free[slot] -= used
        step.blocks.append(Block(job.game, job.critic, job.first, job.last, slot,
                                 round(used, 1), round(job.done, 6), min(after, 1.0)))
        if after < 1.0:
            carried.append(_Job(job.game, job.critic, job.first, job.last, job.work,
                                done=after, whole=job.whole))
    return step, carried + left


def _simulate(cfg, published, in_progress, throughput, bytes_, parallel, sizes,
              first_seconds, later_seconds, limit, cap) -> Schedule | None:
    jobs = _jobs(cfg, published, in_progress, throughput, parallel, sizes)
    if jobs is None:
        return None
    main = {g: main_critic(cfg) for g in cfg["games"]}
    have = {g: len(published.get(g, ())) for g in cfg["games"]}
    total = int(cfg["seeds"])
    allocations, history, gpu, capped = [], 0.0, 0.0, False
    first = {g: 0 for g in cfg["games"] if have[g]}
    full = {g: 0 for g in cfg["games"] if have[g] >= total}
    for k in range(1, limit + 1):
        if not jobs:
            break
        step, after = _allocation(jobs, throughput, parallel,
                                  first_seconds if k == 1 else later_seconds)
        added = sum((bytes_.block if b.finishes else bytes_.state).get(b.game, 0.0) * b.seeds
                    for b in step.blocks)
        if not step.blocks:
            break
        if history + added > cap and allocations:
            capped = True  # the run stops where the repository's cap is reached
            break
        allocations.append(step)
        jobs, history = after, history + added
        for block in step.blocks:
            gpu += block.predicted_seconds
            if block.finishes and block.critic == main[block.game]:
                have[block.game] += block.seeds
        for game in cfg["games"]:
            if have[game] and game not in first:
                first[game] = k
            if have[game] >= total and game not in full:
                full[game] = k
    return Schedule(parallel, dict(sizes), allocations or [Allocation(parallel)], not jobs,
                    history, gpu, first, full, {g: min(have[g], total) for g in cfg["games"]},
                    capped)


def schedule(cfg: Mapping, published: Mapping[str, Sequence[int]], throughput: Throughput,
             seconds: float, later_seconds: float | None = None,
             in_progress: Sequence[InProgress] = (), bytes_: Bytes | None = None,
             history_left: float = HISTORY_CAP, max_parallel: int = 3, limit: int = 100
             ) -> Schedule:
    """The best schedule (see the module): over 1..``max_parallel`` jobs sharing the GPU
    (those measured) and the block sizes of :data:`BLOCK_SIZES` each game's measured sizes
    allow, the one that finishes every game in the fewest allocations of ``later_seconds``
    (this one: ``seconds``) while adding at most ``history_left`` bytes."""
    later = seconds if later_seconds is None else later_seconds
    bytes_ = bytes_ or Bytes({}, {})
    largest = max((int(r["configurations"]) for r in throughput.rows), default=0)
    per_seed = configurations(cfg, 1)
    options = {}
    for game in cfg["games"]:
        n_open = len(open_seeds(cfg, game, published, in_progress))
        options[game] = sorted({min(s, max(n_open, 1)) for s in BLOCK_SIZES
                                if s * per_seed <= largest} or {1})
    best = None
    for parallel in [p for p in throughput.parallels() if p <= max_parallel]:
        for choice in itertools.product(*(options[g] for g in cfg["games"])):
            bound = limit  # a schedule longer than the best complete one cannot beat it
            if best is not None and best.key(history_left)[0] == 0:
                bound = min(limit, len(best.allocations))
            found = _simulate(cfg, published, in_progress, throughput, bytes_, parallel,
                              dict(zip(cfg["games"], choice)), seconds, later, bound,
                              history_left)
            if found is not None and (best is None or found.key(history_left)
                                      < best.key(history_left)):
                best = found
    if best is None:
        return Schedule(1, {}, [Allocation(1, notes=["no throughput measured: nothing can be "
                                                "planned"])], False, 0.0, 0.0, {}, {})
    if best.history_bytes > history_left or best.capped:
        best.allocations[0].notes.append(
            f"no schedule finishes every game within the {history_left / 2**20:.1f} MiB the "
            f"run may still add to the repository; this one stops at "
            f"{best.history_bytes / 2**20:.1f} MiB")
    for game in cfg["games"]:
        if game not in best.full:
            one = throughput.predict(cfg, game, main_critic(cfg), 1, best.parallel)
            need = "not measured" if one is None else f"{one / 60:.1f} min for one seed"
            best.allocations[0].notes.append(f"{game}: not finished within {limit} allocations "
                                       f"({need})")
    return best


def next_allocation(cfg: Mapping, published: Mapping[str, Sequence[int]],
                    throughput: Throughput, seconds: float, max_parallel: int = 3, **keywords
                    ) -> Allocation:
    """This allocation's blocks: the first of :func:`schedule`'s allocations."""
    return schedule(cfg, published, throughput, seconds, max_parallel=max_parallel,
                    **keywords).allocations[0]


def describe(cfg: Mapping, published: Mapping[str, Sequence[int]], best: Schedule) -> str:
    """The schedule of the rest in words: per game, the allocation that brings its first seed
    at full length and its last."""
    total = int(cfg["seeds"])
    why = ("within the repository's cap" if best.capped
           else f"within {len(best.allocations)} allocations")
    parts = []
    for game in cfg["games"]:
        have = len(published.get(game, ()))
        when_first = ("has" if have else f"allocation {best.first[game]}"
                      if game in best.first else f"not {why}")
        when_full = (f"allocation {best.full[game]}" if game in best.full
                     else f"not {why}")
        parts.append(f"{game}: {have} of {total} seeds now; first seed at full length: "
                     f"{when_first}; all {total}: {when_full}")
    sizes = ", ".join(f"{g} {s}" for g, s in best.sizes.items())
    return ("; ".join(parts) + f" ({len(best.allocations)} allocations, {best.parallel} jobs "
            f"on the GPU, blocks of {sizes} seeds, {best.gpu_seconds / 60:.0f} GPU minutes, "
            f"{best.history_bytes / 2**20:.1f} MiB added to the repository)")
