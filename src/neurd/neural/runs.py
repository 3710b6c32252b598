"""Which runs a neural config makes: its configurations, the critics each game is run with,
the run seeds in chunks (the Snakemake jobs) and in seed blocks (the published ones).

A run is one (algorithm, entropy level, seed) configuration of a game with one critic;
every job and every block runs every algorithm and entropy level of its seeds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from neurd.config import require

LEARNED, EXACT = "learned", "exact"


def configurations(cfg: Mapping, seeds: int) -> int:
    """Configurations of ``seeds`` seeds of one game and critic (every algorithm and entropy
    level)."""
    return len(cfg["algorithms"]) * len(cfg["entropies"]) * int(seeds)


def main_critic(cfg: Mapping) -> str:
    """The critic of the runs Fig 6 draws (``neural.critic``; learned where the key is
    absent)."""
    return cfg.get("critic", LEARNED)


def critics(cfg: Mapping, game: str) -> tuple[str, ...]:
    """The critics ``game`` is run with: the main one, and the exact one too for
    ``exact_critic_games``."""
    main = main_critic(cfg)
    return (main, EXACT) if game in cfg["exact_critic_games"] and main != EXACT else (main,)


def seed_chunks(cfg: Mapping) -> list[tuple[int, ...]]:
    """The run seeds ``0 .. seeds-1`` in chunks of ``seeds_per_job``: one job each."""
    seeds, size = int(cfg["seeds"]), int(cfg["seeds_per_job"])
    return [tuple(range(start, min(start + size, seeds))) for start in range(0, seeds, size)]


def jobs(cfg: Mapping) -> list[tuple[str, str, int]]:
    """Every job as (game, critic, chunk): each critic of each game (:func:`critics`), every
    chunk of seeds."""
    return [(game, critic, k) for game in cfg["games"] for critic in critics(cfg, game)
            for k in range(len(seed_chunks(cfg)))]


# --- seed blocks --------------------------------------------------------------------------
# A seed block is a job of its own size outside the Snakemake chunks: run seeds first..last
# of one game and critic, every algorithm and entropy level, as ONE batch (one vmapped
# program).  The paper-scale Fig 6 is computed in blocks sized to a short GPU allocation
# (bench/gpu_allocation.py) and published a block at a time (neurd.publication).  A block's
# numbers are fixed by the config, the game, the critic and its seeds; which batch a seed is
# in moves float rounding only (as another device does), so a block records its batches.

_BLOCK = re.compile(r"(learned|exact)_s(\d{1,4})-(\d{1,4})")


def block_name(critic: str, first: int, last: int) -> str:
    """``<critic>_s<first>-<last>``: the block's folder name."""
    return f"{critic}_s{int(first)}-{int(last)}"


def parse_block(name: str) -> tuple[str, int, int]:
    """``(critic, first, last)`` of a block name; ValueError if it is not one."""
    match = _BLOCK.fullmatch(name)
    if not match or int(match.group(2)) > int(match.group(3)):
        raise ValueError(f"{name!r} is not a seed block's name (<critic>_s<first>-<last>)")
    return match.group(1), int(match.group(2)), int(match.group(3))


def check_block(cfg: Mapping, game: str, critic: str, first: int, last: int) -> None:
    """Raise :class:`~neurd.config.ConfigError` unless the block is one of ``cfg``'s runs."""
    require(game in cfg["games"], "neural.games", f"{game!r} is not a game of the config "
            f"({list(cfg['games'])})")
    require(critic in critics(cfg, game), "neural.exact_critic_games",
            f"{game} is not run with the {critic} critic (critics: {list(critics(cfg, game))})")
    require(0 <= first <= last < int(cfg["seeds"]), "neural.seeds",
            f"seeds {first}-{last} are not run seeds 0-{int(cfg['seeds']) - 1}")
