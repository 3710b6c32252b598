"""The content check of a publication's tables: every block's curves and policies
(schema, config, game, the whole grid of runs and checkpoints, values in range, the kept
entropy levels the block's best), its provenance what its curves record, and the derived
tables recomputed and equal; and Fig 6's inputs from the checked blocks.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from neurd import games as game_files
from neurd.neural.results import (
    CURVES_COLUMNS,
    CURVES_COLUMNS_WITHOUT_GROWTH,
    DIAGNOSTIC_COLUMNS,
    NASHCONV_COLUMNS,
    POLICY_COLUMNS,
    check_job_table,
    checkpoint_schedule,
    ci_table,
    grid_problems,
    summary_table,
    uniform_nash_conv,
    with_growth,
)
from neurd.neural.runs import PIECE_KEYS, main_critic, parse_block
from neurd.publication import resume_states
from neurd.publication.manifest import DERIVED, HEX16, PublicationError, block_folder, fail
from neurd.stats import best_entropies
from neurd.tables import canonical_json, read_metadata, read_table

# a derived table recomputed on another machine may differ in the last bits of a float
DERIVED_TOLERANCE = 1e-9


def _out_of_range(frame: pd.DataFrame, column: str, ok, allowed_nan=None) -> list[str]:
    """The first value of ``column`` that ``ok`` refuses, or that is NaN where
    ``allowed_nan`` (a mask; None: nowhere) does not allow it (or not NaN where it does)."""
    values = frame[column].to_numpy(dtype=float)
    nan = np.isnan(values)
    expected_nan = np.zeros(len(values), bool) if allowed_nan is None else allowed_nan
    wrong = (nan != expected_nan) | (~nan & ~ok(np.where(nan, 0.0, values)))
    if not wrong.any():
        return []
    i = int(np.flatnonzero(wrong)[0])
    return [f"{column} = {float(values[i])!r} at {frame.algorithm.iloc[i]}, "
            f"entropy {frame.entropy.iloc[i]}, seed {frame.seed.iloc[i]}, "
            f"iteration {frame.iteration.iloc[i]} is out of its range"]


RUN = ["algorithm", "entropy", "seed"]


def _lost(frame: pd.DataFrame) -> np.ndarray:
    """Per row of a block's curves: whether its run had diverged there (its NashConv is NaN
    at this checkpoint or an earlier one of the run)."""
    order = frame.sort_values([*RUN, "iteration", "phase"], kind="stable")
    lost = order.nash_conv.isna().groupby([order[k] for k in RUN]).cummax()
    return lost.reindex(frame.index).to_numpy(dtype=bool)


def diverged_runs(curves: pd.DataFrame) -> dict[tuple, int]:
    """``(algorithm, entropy, seed) -> iteration``: the runs of a block's curves that
    diverged, and the first checkpoint their NashConv is NaN at."""
    lost = curves[curves.nash_conv.isna()]
    return {(a, float(e), int(s)): int(rows.iteration.min())
            for (a, e, s), rows in lost.groupby(RUN)}


def _range_problems(frame: pd.DataFrame, critic: str, ratio: int, cfg: Mapping) -> list[str]:
    """Values out of their range in a block's curves (NaN only where the job writes NaN: a
    run that diverged is NaN in every measurement from its first NaN NashConv on)."""
    lost = _lost(frame)
    start = (frame.iteration.to_numpy() == 0) | lost
    actions = 64.0
    revived = np.flatnonzero(lost & frame.nash_conv.notna().to_numpy())
    problems = [] if not len(revived) else [
        "nash_conv = nan at {}, entropy {}, seed {} and a value again at iteration {}: a run "
        "that diverged is NaN from there on".format(*frame[RUN].iloc[revived[0]],
                                                    frame.iteration.iloc[revived[0]])]
    problems += [
        *_out_of_range(frame, "nash_conv", lambda v: np.isfinite(v) & (v >= -1e-9), lost),
        *_out_of_range(frame, "critic_rmse", lambda v: np.isfinite(v) & (v >= 0),
                       np.ones(len(frame), bool) if critic == "exact" else lost),
        *_out_of_range(frame, "threshold_blocked", lambda v: (v >= 0) & (v <= 1), start),
        *_out_of_range(frame, "critic_loss", lambda v: np.isfinite(v) & (v >= 0), start),
        *_out_of_range(frame, "policy_entropy",
                       lambda v: (v >= -1e-9) & (v <= math.log(actions)), lost),
        *_out_of_range(frame, "at_threshold", lambda v: (v >= 0) & (v <= 1), lost),
    ]
    iterations = frame.iteration.to_numpy()
    if not np.array_equal(frame.policy_updates.to_numpy(), iterations // ratio):
        problems.append("policy_updates is not iteration / critic updates per policy update")
    updates = iterations // ratio
    expected = iterations * int(cfg["critic_batch"]) + updates * int(cfg["policy_batch"])
    if not np.array_equal(frame.trajectories.to_numpy(), expected):
        problems.append("trajectories is not the episodes the schedule samples")
    return problems


def block_provenance(game: str, name: str, meta: Mapping) -> dict:
    """A block's ``provenance.json``: what its curves' metadata records, nothing else."""
    pieces = list(meta.get("pieces", []))
    seconds = sum(float(p.get("seconds", 0.0)) for p in pieces)
    iterations = sum(int(p.get("iterations", 0)) for p in pieces)
    batches = meta.get("batches", [])
    return {
        "game": game, "block": name, "critic": meta.get("critic"),
        "seeds": meta.get("run_seeds"), "batches": batches,
        "configurations_per_batch": sorted({len(b) for b in batches}),
        "game_string": meta.get("game_string"), "game_hash": meta.get("game_hash"),
        "config_hash": meta.get("config_hash"),
        "devices": sorted({f"{p.get('device')}" + (f" (driver {p['driver']})" if "driver" in p
                                                   else "") for p in pieces}),
        "revisions": sorted({str(p.get("revision")) for p in pieces}),
        # the cycle variants the pieces ran (pieces recorded before variants have none)
        **({"variants": sorted({str(p.get("variant", "default")) for p in pieces})}
           if any("variant" in p for p in pieces) else {}),
        "compute_seconds": round(seconds, 3), "iterations": iterations, "pieces": pieces,
    }


def check_curves(cfg: Mapping, game: str, name: str, path: Path) -> tuple[pd.DataFrame, dict]:
    """A block's curves and their metadata, checked (see :func:`check_content`)."""
    critic, first, last = parse_block(name)
    try:
        meta = check_job_table(path, cfg, game, critic)
    except ValueError as error:
        raise PublicationError(str(error)) from None
    seeds = list(range(first, last + 1))
    if meta.get("run_seeds") != seeds:
        fail(path, f"holds run seeds {meta.get('run_seeds')}, the block {name} is {seeds}")
    batches = meta.get("batches")
    if not (isinstance(batches, list) and sorted(s for b in batches for s in b) == seeds):
        fail(path, f"batches {batches} do not partition the block's seeds")
    pieces = meta.get("pieces")
    if not (isinstance(pieces, list) and pieces and all(
            isinstance(p, dict) and all(k in p for k in PIECE_KEYS) for p in pieces)):
        fail(path, "records no piece of compute (device, jax, revision, seconds, ...)")
    for piece in pieces:
        seconds = piece.get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not (
                math.isfinite(seconds) and seconds > 0):
            fail(path, f"records a piece of compute of {seconds!r} seconds: not a positive, "
                       "finite number")
    if not (isinstance(meta.get("game_hash"), str) and HEX16.fullmatch(meta["game_hash"])):
        fail(path, "records no game content hash")
    frame = read_table(path)
    if list(frame.columns) not in (list(CURVES_COLUMNS), list(CURVES_COLUMNS_WITHOUT_GROWTH)):
        fail(path, f"columns {list(frame.columns)}, a job's curves have "
                    f"{list(CURVES_COLUMNS)} (or, before the growth columns, "
                    f"{list(CURVES_COLUMNS_WITHOUT_GROWTH)})")
    if not (frame.game == game).all() or not (frame.critic == critic).all():
        fail(path, f"holds rows of another game or critic than {game} {critic}")
    iterations, phases = checkpoint_schedule(cfg, game)
    runs = {(a, float(e), s) for a in cfg["algorithms"] for e in cfg["entropies"] for s in seeds}
    problems = grid_problems(frame, runs, set(zip(iterations.tolist(), phases.tolist())),
                              "curves")
    problems += _range_problems(frame, critic, int(cfg["critic_updates_per_policy_update"]),
                                cfg)
    if problems:
        fail(path, "; ".join(problems[:3]))
    return frame, meta


def _check_distinct_seeds(where: Path, curves: pd.DataFrame) -> None:
    """Refuse two seeds whose curves are the same (one block copied under another seed's
    name): every seed draws its own networks and episodes, so no two of its NashConv curves
    coincide, bit for bit, with another's."""
    keys = ["critic", "algorithm", "entropy", "iteration", "phase"]
    seen: dict[bytes, int] = {}
    for seed, rows in curves.sort_values(keys, kind="stable").groupby("seed", sort=True):
        values = rows.nash_conv.to_numpy(np.float64)
        if np.isnan(values).all():
            continue
        digest = hashlib.sha256(values.tobytes()).digest()
        if digest in seen:
            fail(where, f"seeds {seen[digest]} and {seed} have the same curves bit for bit: a "
                        "block copied under another seed's name")
        seen[digest] = int(seed)


def kept_levels(cfg: Mapping, game: str, curves: pd.DataFrame) -> dict[str, float]:
    """Each algorithm's best entropy level within a block (its curves, main critic)."""
    nashconv = curves[list(NASHCONV_COLUMNS)]
    return best_entropies(summary_table(cfg, nashconv), game)


def check_policies(cfg: Mapping, game: str, path: Path, seeds: list[int],
                    levels: Mapping[str, float] | None, compiled,
                    diverged: Mapping[tuple, int] | None = None) -> pd.DataFrame:
    """A block's policies: every run of ``levels`` (algorithm -> entropy; None: every
    level), every seed, phase and legal action, probabilities in [0, 1] summing to 1 over
    each state's legal actions; NaN exactly at the phase ends of a run of ``diverged``
    (:func:`diverged_runs` of its curves) at or after the checkpoint it diverged at."""
    try:
        check_job_table(path, cfg, game)
    except ValueError as error:
        raise PublicationError(str(error)) from None
    frame = read_table(path)
    if list(frame.columns) != list(POLICY_COLUMNS):
        fail(path, f"columns {list(frame.columns)}, a policies table's are "
                    f"{list(POLICY_COLUMNS)}")
    pairs = ([(a, float(e)) for a in cfg["algorithms"] for e in cfg["entropies"]]
             if levels is None else [(a, float(e)) for a, e in levels.items()])
    phases = np.arange(1, int(cfg["phases"]) + 1)
    rows, cols = np.nonzero(compiled.infostate_legal)
    legal = pd.MultiIndex.from_arrays([compiled.infostate_string[rows].astype(object),
                                       cols.astype(np.int64)])
    expected = len(pairs) * len(seeds) * len(phases) * len(legal)
    keys = ["algorithm", "entropy", "seed", "phase", "infostate", "action"]
    if len(frame) != expected or frame.duplicated(keys).any():
        fail(path, f"{len(frame)} rows, the block's policies are {expected} (one per run, "
                    "phase and legal action), none twice")
    if not expected:
        return frame
    have = set(zip(frame.algorithm, frame.entropy.astype(float), frame.seed.astype(int)))
    want = {(a, e, s) for a, e in pairs for s in seeds}
    if have != want:
        fail(path, f"holds the runs {sorted(have - want)[:2]} instead of "
                    f"{sorted(want - have)[:2]}")
    if not pd.MultiIndex.from_arrays([frame.infostate, frame.action]).isin(legal).all():
        fail(path, "holds an action that is not legal in its information state")
    if not set(frame.phase.unique()) == set(phases.tolist()) or not np.array_equal(
            frame.iteration.to_numpy(), frame.phase.to_numpy()
            * int(cfg["phase_iterations"][game])):
        fail(path, "phases or iterations are not the phase ends")
    p = frame.probability.to_numpy(dtype=float)
    at = [(diverged or {}).get((a, float(e), int(s_))) for a, e, s_ in
          zip(frame.algorithm, frame.entropy, frame.seed)]
    lost = np.array([d is not None and d <= i for d, i in zip(at, frame.iteration)], bool)
    if not (np.array_equal(np.isnan(p), lost) and np.all(p[~lost] >= 0)
            and np.all(p[~lost] <= 1)):
        fail(path, "holds probabilities that are not finite numbers in [0, 1] (NaN only at "
                   "the phase ends of a run that had diverged)")
    sums = frame[~lost].groupby(["algorithm", "entropy", "seed", "phase",
                                 "infostate"]).probability.sum()
    if not np.allclose(sums.to_numpy(), 1.0, atol=1e-9, rtol=0):
        fail(path, "holds a policy whose probabilities do not sum to 1 over the legal actions")
    return frame


def compiled_games(cfg: Mapping, given: Mapping | None = None,
                   names: Iterable[str] | None = None) -> dict:
    """The config's games (or those of ``names``) compiled (``given[game]``: a compiled game
    to use instead)."""
    out = {}
    for game in cfg["games"] if names is None else names:
        if given and game in given:
            out[game] = given[game]
        else:
            out[game] = game_files.compile_configured(game, cfg["game_strings"],
                                                      cfg.get("expected_infostates"), "neural")
    return out


def derived_tables(cfg: Mapping, game: str, curves: pd.DataFrame, compiled) -> dict:
    """A game's summary and CI over the seeds of its blocks' curves (main critic)."""
    order = ["algorithm", "entropy", "seed", "iteration", "phase"]
    main = curves[curves.critic == main_critic(cfg)].sort_values(order, kind="stable")
    nashconv = main[list(NASHCONV_COLUMNS)].reset_index(drop=True)
    uniform = uniform_nash_conv(compiled, int(cfg["phases"]))
    return {"summary": summary_table(cfg, nashconv),
            "nashconv_ci": ci_table(cfg, nashconv, uniform)}


def _same_table(path: Path, stored: pd.DataFrame, computed: pd.DataFrame) -> None:
    if list(stored.columns) != list(computed.columns) or len(stored) != len(computed):
        fail(path, f"is not the table its blocks give ({len(stored)} rows, {len(computed)} "
                    "recomputed)")
    for column in stored.columns:
        a, b = stored[column].to_numpy(), computed[column].to_numpy()
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            same = np.allclose(a.astype(float), b.astype(float), rtol=DERIVED_TOLERANCE,
                               atol=DERIVED_TOLERANCE, equal_nan=True)
        else:
            same = np.array_equal(a, b)
        if not same:
            fail(path, f"column {column} is not what its blocks give (recomputed from the "
                        "blocks' curves): edited, or made by other code")


def check_content(folder: str | os.PathLike, manifest: Mapping, cfg: Mapping,
                  compiled: Mapping | None = None, states: bool = True) -> dict:
    """Check every table of a :func:`check` ed publication; return per game its curves
    (every block's, concatenated).  ``compiled``: the config's games, compiled (else compiled
    here with OpenSpiel); each block's game content hash must be theirs.  ``states``: the
    blocks in progress too (:func:`check_state`, which compiles and runs a learning cycle:
    the publication's own check and its intake need it; the figures and their tables draw
    on finished blocks only)."""
    folder = Path(folder)
    games = compiled_games(cfg, compiled, [g for g, e in manifest["games"].items()
                                           if e["blocks"] or (states and e.get("in_progress"))])
    for game, entry in manifest["games"].items():
        for name in entry.get("in_progress", []) if states else []:
            check_state(cfg, game, name, folder / resume_states.state_folder(game, name),
                        games[game])
    curves = {}
    for game, entry in manifest["games"].items():
        if not entry["blocks"]:
            continue
        digest, frames = game_files.content_hash(games[game]), []
        for name in entry["blocks"]:
            base = folder / block_folder(game, name)
            frame, meta = check_curves(cfg, game, name, base / "curves.parquet")
            if meta["game_hash"] != digest:
                fail(base / "curves.parquet", f"was computed on a game of content hash "
                      f"{meta['game_hash']}, the config's {game} compiles to {digest}")
            check_policies(cfg, game, base / "policies.parquet", meta["run_seeds"],
                            kept_levels(cfg, game, frame) if parse_block(name)[0]
                            == main_critic(cfg) else {}, games[game], diverged_runs(frame))
            try:
                provenance = json.loads((base / "provenance.json").read_text())
            except ValueError as error:
                fail(base / "provenance.json", f"cannot be read ({error})")
            if canonical_json(provenance) != canonical_json(block_provenance(game, name, meta)):
                fail(base / "provenance.json", "is not what the block's curves record")
            frames.append(frame)
        curves[game] = pd.concat(frames, ignore_index=True)
        _check_distinct_seeds(folder / f"neural/{game}", curves[game])
        for name, table in derived_tables(cfg, game, curves[game], games[game]).items():
            path = folder / f"neural/{game}/{name}.parquet"
            meta = read_metadata(path)
            if meta.get("config_hash") != manifest["config_hash"]:
                fail(path, f"has config hash {meta.get('config_hash')}, the publication's is "
                            f"{manifest['config_hash']}")
            _same_table(path, read_table(path), table)
    return curves


def check_state(cfg: Mapping, game: str, name: str, folder: Path, compiled) -> dict:
    """:func:`neurd.publication.resume_states.check`, refusing with :class:`PublicationError`."""
    try:
        return resume_states.check(cfg, game, name, folder, compiled)
    except ValueError as error:
        raise PublicationError(f"{game} block in progress {name}: {error}") from None


def fig6_tables(curves: Mapping[str, pd.DataFrame], folder: str | os.PathLike,
                manifest: Mapping, cfg: Mapping) -> dict[str, pd.DataFrame]:
    """Fig 6's inputs from checked blocks (:func:`check_content`'s curves): every game's
    ``nashconv``, ``diagnostics``, ``summary`` and ``nashconv_ci`` in one of each."""
    order = ["critic", "algorithm", "entropy", "seed", "iteration", "phase"]
    out = {"nashconv": [], "diagnostics": [], "summary": [], "nashconv_ci": []}
    for game in manifest["games"]:
        if game not in curves:
            continue
        frame = curves[game].sort_values(order, kind="stable").reset_index(drop=True)
        out["nashconv"].append(frame[frame.critic == main_critic(cfg)][list(NASHCONV_COLUMNS)])
        out["diagnostics"].append(with_growth(frame)[list(DIAGNOSTIC_COLUMNS)])
        for name in DERIVED:
            out[name].append(read_table(Path(folder) / f"neural/{game}/{name}.parquet"))
    return {k: pd.concat(v, ignore_index=True) for k, v in out.items() if v}
