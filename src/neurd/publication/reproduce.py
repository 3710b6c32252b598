"""A publication's blocks computed again here (JAX): each block's first learning cycles,
and the exact NashConv of the published policies at each phase end, beside the published
values (the checks themselves are :mod:`neurd.publication.intake`'s, also run on every incoming
block).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from neurd import games as game_files
from neurd.neural.runs import block_plan, parse_block
from neurd.publication import intake
from neurd.publication.intake import AGREEMENT_CYCLES
from neurd.publication.integrity import check
from neurd.publication.manifest import PublicationError, block_folder, published_games
from neurd.publication.resume_states import identity, state_folder
from neurd.tables import read_table


def block_job(cfg: Mapping, game: str, name: str, provenance: Mapping):
    """The :class:`~neurd.neural.experiment.Plan` a published block was run as (its seeds in
    the batches its provenance records)."""
    try:
        return intake.block_job(cfg, game, name, provenance["batches"])
    except ValueError as error:
        raise PublicationError(str(error)) from None


def reproduce(folder: str | os.PathLike, game: str, compiled, cycles: int = AGREEMENT_CYCLES,
              checked: tuple[dict, dict] | None = None) -> pd.DataFrame:
    """The first ``cycles`` learning cycles of every block of ``game`` (its first batch) run
    again on this machine, beside the published NashConv at every published checkpoint among
    them: ``block, algorithm, entropy, seed, iteration, published, reproduced, difference``.

    A cycle draws its samples from a key folded with its index and nothing depends on the
    phase length, so these iterations are the same computation as the published run's
    first ones, whatever its checkpoint schedule.
    """
    if type(cycles) is not int or cycles < 1:
        raise PublicationError(f"cycles must be a whole number >= 1 (a reproduction of no "
                               f"cycle vouches for nothing), got {cycles!r}")
    manifest, cfg = checked if checked is not None else check(folder)
    entry = manifest["games"].get(game)
    if not entry or not entry["blocks"]:
        raise PublicationError(f"{folder} holds no block of {game!r} (games: "
                               f"{published_games(folder)})")
    rows = [pd.DataFrame([], columns=intake.REPRODUCED_COLUMNS)]
    for name in entry["blocks"]:
        base = Path(folder) / block_folder(game, name)
        provenance = json.loads((base / "provenance.json").read_text())
        block_job(cfg, game, name, provenance)  # its batches, refused as the publication's
        rows.append(intake.reproduce_block(cfg, game, name, provenance["batches"],
                                           read_table(base / "curves.parquet"), compiled,
                                           cycles))
    frame = pd.concat([r for r in rows if len(r)] or rows[:1], ignore_index=True)
    unchecked = sorted(set(entry["blocks"]) - set(frame.block))
    if unchecked:
        raise PublicationError(f"{folder} {game}: no published checkpoint within the first "
                               f"{cycles} cycles of block {unchecked[0]}: nothing to compare "
                               "(give more cycles)")
    return frame


def phase_end_nash_conv(folder: str | os.PathLike, game: str, compiled,
                        checked: tuple[dict, dict] | None = None) -> pd.DataFrame:
    """The exact NashConv (engine, float64, no OpenSpiel) of every published policy at its
    phase's end, in that phase's game, beside the published value: ``block, algorithm,
    entropy, seed, phase, published, recomputed, difference``."""
    manifest, cfg = checked if checked is not None else check(folder)
    entry = manifest["games"].get(game) or {"blocks": []}
    negated = game_files.negated(compiled)
    out = [pd.DataFrame([], columns=intake.PHASE_END_COLUMNS)]
    for name in entry["blocks"]:
        base = Path(folder) / block_folder(game, name)
        out.append(intake.phase_end_block(cfg, game, name, read_table(base / "policies.parquet"),
                                          read_table(base / "curves.parquet"), compiled,
                                          negated))
    return pd.concat([o for o in out if len(o)] or out[:1], ignore_index=True)


def replay_state(folder: str | os.PathLike, game: str, name: str, compiled,
                 checked: tuple[dict, dict] | None = None) -> pd.DataFrame:
    """The block in progress ``name`` of ``game`` run again from its start up to the row its
    state stopped at, beside the NashConv its state holds at every row:
    ``block, configuration, row, published, reproduced, difference``.  On the device and
    cycle variant that made the state the two are equal bit for bit; this is what tells a
    forged state from the run's own (docs/paper-scale.md)."""
    from neurd.neural.experiment import replay, restore_strictly  # puts off JAX

    manifest, cfg = checked if checked is not None else check(folder)
    if name not in (manifest["games"].get(game) or {}).get("in_progress", []):
        raise PublicationError(f"{folder} holds no block in progress {name!r} of {game!r}")
    critic, first, last = parse_block(name)
    plan = block_plan(cfg, game, critic, first, last)
    info, _, results = restore_strictly(
        compiled, plan, identity(cfg, game, name, game_files.content_hash(compiled)),
        Path(folder) / state_folder(game, name))
    rows = int(info["next_row"])
    again = replay(compiled, plan, rows)
    frame = pd.DataFrame([{"block": name, "configuration": str(plan.configurations[c]),
                           "row": r, "published": float(results["nash_conv"][r, c]),
                           "reproduced": float(again[r, c])}
                          for r in range(rows) for c in range(again.shape[1])])
    frame["difference"] = (frame.published - frame.reproduced).abs().where(
        ~(frame.published.isna() & frame.reproduced.isna()), 0.0)  # diverged in both: agreed
    return frame

