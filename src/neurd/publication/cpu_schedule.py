"""One CPU allocation's blocks: the paper-scale run computed in the background on a machine's
CPU.

A CPU computes the paper-scale Fig 6 (``make cpu-allocation``) while the project is worked
on, one job at a time, the games in :data:`ORDER` (Kuhn, Leduc, Goofspiel: the cheapest
first), priced on that processor's own measured throughput
(:class:`neurd.publication.costs.Throughput`).
:func:`next_allocation` is the allocation's blocks: the published blocks in progress first,
then each game's open seeds in blocks of :func:`block_size`, each planned only where it
finishes in the time left; what is left at the end goes to a one-seed block that continues in
the next allocation.  A GPU's allocations are planned in :mod:`neurd.publication.gpu_schedule`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from neurd.neural.runs import critics
from neurd.publication.costs import Bytes, Throughput
from neurd.publication.gpu_schedule import (
    HISTORY_CAP,
    MIN_PIECE_SECONDS,
    SAVE_SECONDS,
    Allocation,
    Block,
    InProgress,
    in_progress_groups,
    open_seeds,
    seed_ranges,
)

# A CPU computes the paper-scale run in the background while the project is worked on, one
# job at a time, breadth first (stages: the cheapest game whole, then the others in turn).
# Every job saves its state every few minutes and may be stopped at any time.  A seed of a
# game run with several critics is published only once every critic's block of it has
# finished: a block whose partner did not finish in the allocation is held in progress (a
# finished one at its last row) and the next allocation completes the group first; so such a
# game's blocks are planned only where the whole group fits.  A block's size is what costs
# least per seed, within the time left.
ORDER = ("kuhn", "leduc", "goofspiel")
BLOCK_SIZES = (1, 2, 3, 4, 5, 6, 8, 10)
# Breadth first: the first game of the order (the cheapest) to all its seeds, then the others
# in turn, each to 5 seeds (a first confidence interval), then 10, 20 and all: every game has
# its first paper-length verdict within the first allocations, and each later one narrows the
# intervals of all of them (:func:`stages`)
SEED_STEPS = (5, 10, 20)


def stages(games: Sequence[str], seeds: int) -> list[tuple[str, int]]:
    """``(game, seeds it is filled to)`` in the order a CPU allocation fills them: the first
    of ``games`` to ``seeds``, then each other in turn to each of :data:`SEED_STEPS` below
    ``seeds``, then to ``seeds``."""
    first, rest = list(games[:1]), list(games[1:])
    steps = [n for n in SEED_STEPS if n < seeds] + [seeds]
    return [(g, seeds) for g in first] + [(g, n) for n in steps for g in rest]


def block_seconds(cfg: Mapping, throughput: Throughput, game: str, seeds: int,
                  slowdown: float = 1.0) -> float | None:
    """Predicted seconds of a block of ``seeds`` seeds of ``game`` run alone on the CPU, every
    critic one after the other, start-ups included, times ``slowdown`` (None: not measured)."""
    total = 0.0
    for critic in critics(cfg, game):
        one = throughput.predict(cfg, game, critic, seeds, 1)
        if one is None:
            return None
        total += one
    return total * slowdown


def block_size(cfg: Mapping, throughput: Throughput, game: str, n_open: int,
               seconds: float, slowdown: float = 1.0) -> int | None:
    """Seeds per block of ``game`` on this CPU: of :data:`BLOCK_SIZES` up to ``n_open`` (the
    game's open seeds), the measured size of the fewest predicted seconds per seed (every
    critic's) among those that fit in ``seconds``; one seed where none fits; None where one
    seed is not measured."""
    sizes = [s for s in BLOCK_SIZES if s <= max(n_open, 1)]
    priced = {s: block_seconds(cfg, throughput, game, s, slowdown) for s in sizes}
    priced = {s: t for s, t in priced.items() if t is not None}
    if 1 not in priced:
        return None
    fitting = [s for s, t in priced.items() if t <= seconds]
    return min(fitting, key=lambda s: (priced[s] / s, -s)) if fitting else 1


def next_allocation(cfg: Mapping, published: Mapping[str, Sequence[int]],
                    throughput: Throughput, seconds: float,
                    in_progress: Sequence[InProgress] = (), bytes_: Bytes | None = None,
                    history_left: float = HISTORY_CAP, slowdown: float = 1.0,
                    order: Sequence[str] = ORDER) -> Allocation:
    """One CPU allocation of ``seconds``, one job at a time (slot 0), in order: the published
    blocks in progress (resumed), then the games of ``order`` breadth first (:func:`stages`:
    the first to all its seeds, the others in turn to 5, 10, 20 and all), their open seeds in
    blocks of :func:`block_size`, each planned only where it finishes in the time left (a smaller
    one where the block does not), every critic of a seed one after the other.  What is left at
    the end, too short for any whole block, goes to a one-seed block of a game of one critic
    that continues in the next allocation, if its saved state fits in what the repository may
    still take beside every seed's finished block (``history_left``).  Every prediction is
    multiplied by ``slowdown`` (the allocation's measured pace against the table's).  A block
    in progress of a game of several critics comes with the other critics' blocks of its seeds
    (:func:`neurd.publication.gpu_schedule.in_progress_groups`)."""
    bytes_ = bytes_ or Bytes({}, {})
    games = [g for g in order if g in cfg["games"]] + [g for g in cfg["games"] if g not in order]
    # what the seeds not yet published will add once finished, kept out of the states' room
    reserve = sum(bytes_.block.get(g, 0.0) * (int(cfg["seeds"]) - len(published.get(g, ())))
                  for g in games)
    filler = _Filler(cfg, throughput, bytes_, slowdown, float(seconds), history_left - reserve)
    for block in sorted(in_progress_groups(cfg, in_progress),
                        key=lambda b: games.index(b.game)):
        filler.resume(block)
    for game, upto in stages(games, int(cfg["seeds"])):
        taken = set(int(s) for s in published.get(game, ())) | {
            s for b in [*in_progress, *filler.step.blocks] if b.game == game
            for s in range(b.first, b.last + 1)}
        seeds = [s for s in open_seeds(cfg, game, published, in_progress)
                 if s not in taken][:max(upto - len(taken), 0)]
        if seeds:
            filler.fill(game, seeds)
        if filler.left <= 0:
            break
    return filler.step


@dataclass
class _Filler:
    """One CPU allocation being filled: its blocks (``step``), the seconds left and the
    repository room left for saved states."""

    cfg: Mapping
    throughput: Throughput
    bytes_: Bytes
    slowdown: float
    left: float
    room: float
    step: Allocation = field(default_factory=lambda: Allocation(parallel=1))

    def place(self, game, critic, first, last, seconds, before=0.0, after=1.0):
        self.step.blocks.append(Block(game, critic, first, last, 0, round(seconds, 1),
                                      round(before, 6), min(after, 1.0)))

    def partial(self, game, critic, first, last, work, startup, before) -> bool:
        """A piece of a block that runs to the end and continues next time, where it computes
        enough and its state has room; False where it does not."""
        state = self.bytes_.state.get(game, 0.0) * (last - first + 1)
        if self.left - startup - SAVE_SECONDS < MIN_PIECE_SECONDS or state > self.room:
            return False
        self.place(game, critic, first, last, self.left, before,
                   before + (self.left - startup - SAVE_SECONDS) / (work * self.slowdown))
        self.left, self.room = 0.0, self.room - state
        return True

    def resume(self, block: InProgress) -> None:
        """A published block in progress: its rest where it fits, else a piece of it."""
        work = self.throughput.work(self.cfg, block.game, block.critic,
                                    block.last - block.first + 1, 1)
        if work is None:
            self.step.notes.append(f"{block.game}: not measured; its block in progress waits")
            return
        startup = self.throughput.startup(block.game) * self.slowdown
        rest = startup + (1.0 - block.done) * work * self.slowdown
        if rest <= self.left:
            self.place(block.game, block.critic, block.first, block.last, rest, block.done)
            self.left -= rest
        elif not self.partial(block.game, block.critic, block.first, block.last, work, startup,
                              block.done):
            self.step.notes.append(
                f"{block.game} {block.critic}_s{block.first}-{block.last}: in progress, not "
                "resumed (too little time or repository room)")

    def fill(self, game: str, seeds: Sequence[int]) -> None:
        """``game``'s open ``seeds`` in blocks that finish in the time left, then a piece."""
        cfg, throughput, slowdown = self.cfg, self.throughput, self.slowdown
        size = block_size(cfg, throughput, game, len(seeds), self.left, slowdown)
        if size is None:
            self.step.notes.append(f"{game}: not measured on this CPU: not planned")
            return
        several = len(critics(cfg, game)) > 1
        k = 0
        while k < len(seeds):
            first = seeds[k]
            block = seed_ranges(seeds[k:], size)[0]  # the next block's seeds, consecutive
            fits = [n for n in range(block[1] - first + 1, 0, -1) if (
                block_seconds(cfg, throughput, game, n, slowdown) or math.inf) <= self.left]
            if not fits:
                critic = critics(cfg, game)[0]
                if several or not self.partial(
                        game, critic, first, first, throughput.work(cfg, game, critic, 1, 1),
                        throughput.startup(game) * slowdown, 0.0):
                    self.step.notes.append(
                        f"{game}: a block of one seed takes "
                        f"{block_seconds(cfg, throughput, game, 1, slowdown) / 60:.1f} min, "
                        f"{max(self.left, 0.0) / 60:.1f} min left" + (
                            "" if several else " (too little to start one, or no repository "
                            "room for its state)"))
                return
            for critic in critics(cfg, game):
                one = throughput.predict(cfg, game, critic, fits[0], 1) * slowdown
                self.place(game, critic, first, first + fits[0] - 1, one)
                self.left -= one
            k += fits[0]


# --- what the rest costs on each processor measured -------------------------------------------

ALLOCATION_MINUTES = 150.0  # make cpu-allocation's default length: the block sizes it chooses


@dataclass(frozen=True)
class SeedCost:
    """What a game's seeds left cost on one processor: the seconds of a seed in the blocks a
    CPU allocation of :data:`ALLOCATION_MINUTES` would run there (of every seed, where none is
    left), as the schedule prices them
    (its safety factor, :data:`neurd.publication.costs.SAFETY`, included), and the CPU hours
    of every seed left at that pace."""

    game: str
    processor: str  # "<model>, <instruction set>", as a block's provenance names it
    table: str  # its throughput file in bench/cpu
    seeds_left: int
    block: int  # seeds per block
    seconds_per_seed: float
    computed: bool  # whether this processor computed any of the game's published seeds

    @property
    def hours_left(self) -> float:
        return self.seeds_left * self.seconds_per_seed / 3600.0


def seed_costs(cfg: Mapping, published: Mapping[str, Sequence[int]],
               devices: Mapping[str, Sequence[str]], tables: Sequence[Mapping]
               ) -> list[SeedCost]:
    """Per game of ``cfg`` and processor of ``tables`` (each a throughput file's content, with
    its ``name``: ``processor``, ``isa``, ``rows``) measured on that game: the cost of its
    seeds left (``cfg``'s seeds less ``published``'s), priced with the rows of the code
    revision the file kept last (its newest measurement); ``devices``: each game's
    processors, as its published blocks name them."""
    out = []
    for kept in tables:
        rows = list(kept.get("rows", []))
        if not rows:
            continue
        newest = rows[-1].get("revision_code")
        throughput = Throughput([r for r in rows if r.get("revision_code") == newest])
        name = f"{kept['processor']}, {kept['isa']}"
        for game in cfg["games"]:
            left = int(cfg["seeds"]) - len(set(published.get(game, ())))
            # a game whose seeds are all published: what a seed cost, as if none were
            size = block_size(cfg, throughput, game, left or int(cfg["seeds"]),
                              60.0 * ALLOCATION_MINUTES)
            if size is None:
                continue
            seconds = block_seconds(cfg, throughput, game, size) / size
            out.append(SeedCost(game, name, str(kept["name"]), left, size, seconds,
                                name in devices.get(game, ())))
    return out
