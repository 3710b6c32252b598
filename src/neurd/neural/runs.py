"""Which runs a neural config makes: its configurations, the critics each game is run with,
the run seeds in chunks (the Snakemake jobs) and in seed blocks (the published ones), and
the learner :func:`spec` and :func:`plan` of each: the one step from a config to what runs,
used by the stage, the intake, the resume states and the allocations alike.

A run is one (algorithm, entropy level, seed) configuration of a game with one critic;
every job and every block runs every algorithm and entropy level of its seeds.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from neurd.config import require
from neurd.neural import settings
from neurd.neural.plan import Plan

LEARNED, EXACT = "learned", "exact"

# the keys of a run's records of pieces (one per process that worked on it: its tables'
# metadata, a saved state, a published block's provenance)
PIECE_KEYS = ("platform", "device", "jax", "revision", "first_iteration", "iterations",
              "seconds", "configuration_iterations_per_second")


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
# (neurd.publication.allocation) and published a block at a time (neurd.publication).  A block's
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


def logit_log_runs(cfg: Mapping) -> tuple[tuple[int, ...], tuple[float, ...]]:
    """``(seeds, entropies)`` of ``neural.logits_log``: the runs whose centred logits are
    kept at every checkpoint (every algorithm's, at each of those seeds and levels).

    Off (``((), ())``) when the key is absent, as it is by default: the key has no
    schema default, so a config that does not name it has no trace of it in its snapshot,
    config hash or tables' metadata (no job reruns, no publication goes stale for it).  It
    is not a setting: it changes what a job writes."""
    given = cfg.get("logits_log") or {}
    return (tuple(int(s) for s in given.get("seeds", ())),
            tuple(float(e) for e in given.get("entropies", ())))


def logits_logged(cfg: Mapping) -> bool:
    """Whether ``neural.logits_log`` names any run (then ``neural-run`` writes logits)."""
    seeds, entropies = logit_log_runs(cfg)
    return bool(seeds) and bool(entropies)


def logit_logged_configurations(cfg: Mapping) -> int:
    """Configurations whose logits are kept, at most (all in one job)."""
    seeds, entropies = logit_log_runs(cfg)
    return len(cfg["algorithms"]) * len(seeds) * len(entropies)


def spec(cfg: Mapping, critic: str):
    """The learner's :class:`~neurd.neural.train.Spec` of a config's ``neural`` section
    (JAX is imported here, not before)."""
    from neurd.neural.train import Spec

    return Spec(**settings.spec_arguments(cfg, critic))


def plan(cfg: Mapping, game: str, critic: str, chunk: int):
    """The :class:`~neurd.neural.plan.Plan` of job ``chunk`` (:func:`seed_chunks`) of
    ``game`` under ``critic``."""
    return Plan(game=game, spec=spec(cfg, critic), entropies=tuple(map(float, cfg["entropies"])),
                run_seeds=seed_chunks(cfg)[chunk], seed=int(cfg["seed"]),
                phase_iterations=int(cfg["phase_iterations"][game]), phases=int(cfg["phases"]),
                geometric=int(cfg["checkpoints"]["geometric"]),
                linear=int(cfg["checkpoints"]["linear"]),
                seeds_per_batch=int(cfg["seeds_per_batch"]),
                logits_seeds=logit_log_runs(cfg)[0], logits_entropies=logit_log_runs(cfg)[1])


def block_plan(cfg: Mapping, game: str, critic: str, first: int, last: int,
               seeds_per_batch: int | None = None):
    """The :class:`~neurd.neural.experiment.Plan` of a seed block: seeds ``first..last``, as
    one batch (or in batches of ``seeds_per_batch`` consecutive seeds)."""
    check_block(cfg, game, critic, first, last)
    return dataclasses.replace(
        plan(cfg, game, critic, 0), run_seeds=tuple(range(first, last + 1)),
        seeds_per_batch=seeds_per_batch or last - first + 1, batch_origin=first)
