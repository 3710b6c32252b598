"""The readings study: Fig 6's claims re-measured under each reading the paper leaves open.

Config section ``readings``: ``neural`` sets the study's scale (keys of the
``neural`` section, over it) and ``variants`` names each alternative reading
by the ``neural`` keys it changes from the study's default, one change at a
time.  Every reading, ``default`` included, is a ``neural`` section of its own
(:func:`reading_sections`), validated like the ``neural`` section itself
when the config is (schema, checks, games and limits), and run by the Fig 6
steps (``neurd neural-run`` / ``neural-table`` / ``neural-combine``) into
``results/readings/<reading>/``.  This module reads those folders back
(:func:`read_readings`) and derives the study's own tables (columns below):
per reading, what a policy's collapse is made of, from the centred logits the
study logs (``neural.logits_log``: by default seed 0 at the two lowest entropy
levels; each job writes them beside its curves,
``<critic>_<chunk>_logits.parquet``, and :func:`logit_table` keeps, per run
and checkpoint, how far the states' logits sit from 0 and how many reach
NeuRD's threshold).  ``neurd readings-grid`` (:mod:`neurd.readings_grid`)
measures Fig 6's claims on each reading and draws the grid
(:mod:`neurd.figures.readings`).  Not part of ``rule all``: ``make readings``.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd.config import load_snapshot, require
from neurd.names import DEFAULT_READING, READING_COLUMN
from neurd.neural.runs import jobs, main_critic
from neurd.stage import Stage
from neurd.tables import read_table

COLLAPSE_COLUMNS = {
    "reading": READING_COLUMN,
    "game": "short name of the game",
    "algorithm": "'neurd' or 'spg'",
    "entropy": "entropy regularisation level alpha",
    "iteration": "learning iterations done",
    "phase": "phase of the reward (1-based)",
    "policy_entropy": "mean over seeds of the policy's reach-weighted entropy (nats)",
    "at_threshold": "mean over seeds of the share of centred logits at NeuRD's threshold",
    "nash_conv": "mean over seeds of the NashConv",
}
_LARGEST = ("the largest |centred logit| over an information state's legal actions "
            "(centred logit: log pi centred over the legal actions, float64)")
LOGIT_COLUMNS = {
    "reading": READING_COLUMN,
    "game": "short name of the game",
    "algorithm": "'neurd' or 'spg'",
    "entropy": "entropy regularisation level alpha (a level of neural.logits_log)",
    "seed": "run seed (a seed of neural.logits_log)",
    "iteration": "learning iterations done",
    "phase": "phase of the reward (1-based)",
    "beta": "NeuRD's logit threshold in the reading (neural.beta; SPG has none)",
    "states": "information states of the game",
    "at_beta": "share of the information states where " + _LARGEST + " is at or beyond "
               "beta: states whose policy NeuRD's threshold no longer pushes further out",
    "q10": "10% quantile over the information states of " + _LARGEST,
    "median": "median over the information states of " + _LARGEST,
    "q90": "90% quantile over the information states of " + _LARGEST,
    "largest": "largest over the information states of " + _LARGEST,
}


def reading_sections(config: Mapping) -> dict[str, dict]:
    """Every reading's ``neural`` section (defaults not yet filled): the config's ``neural``
    section, the study's scale over it, then the reading's changes (mappings merged)."""
    from snakemake.utils import update_config  # how Snakemake merges config files

    study = config.get("readings") or {}
    base = copy.deepcopy(dict(config.get("neural") or {}))
    update_config(base, copy.deepcopy(study.get("neural") or {}))
    sections = {DEFAULT_READING: base}
    for name, changes in (study.get("variants") or {}).items():
        sections[name] = copy.deepcopy(base)
        update_config(sections[name], copy.deepcopy(changes))
    return sections


def select_jobs(jobs, game: str | None = None, critic: str | None = None) -> list:
    """The (game, critic, chunk) jobs of a reading, of one game and critic where given."""
    return [(g, c, k) for g, c, k in jobs
            if (game is None or g == game) and (critic is None or c == critic)]


def check(cfg: Mapping) -> None:
    """Cross-field checks of the ``readings`` section."""
    require(DEFAULT_READING not in cfg["variants"], f"readings.variants.{DEFAULT_READING}",
            f"'{DEFAULT_READING}' is the study's own reading (readings.neural); name the "
            "other reading otherwise")
    for name, changes in cfg["variants"].items():
        require(bool(changes), f"readings.variants.{name}",
                "changes nothing: a reading names the neural keys it changes")
        require("games" not in changes, f"readings.variants.{name}.games",
                "a reading cannot change the games (the grid compares claims game by game)")


def collapse_table(tables: Mapping[str, Mapping[str, pd.DataFrame]],
                   snapshots: Mapping[str, Mapping]) -> pd.DataFrame:
    """Per reading, game, algorithm, entropy and checkpoint: the mean over seeds of the
    policy's entropy, its share of logits at the threshold and its NashConv (the runs of
    the reading's main critic)."""

    frames = []
    for reading, t in tables.items():
        d = t["diagnostics"]
        d = d[d.critic == main_critic(snapshots[reading])]
        mean = d.groupby(["game", "algorithm", "entropy", "iteration", "phase"], sort=True)[
            ["policy_entropy", "at_threshold", "nash_conv"]].mean().reset_index()
        frames.append(mean.assign(reading=reading))
    return pd.concat(frames, ignore_index=True)[list(COLLAPSE_COLUMNS)]


def logit_summary(logits: pd.DataFrame, beta: float) -> pd.DataFrame:
    """A job's logged centred logits (:data:`neurd.pipeline.neural.LOGITS_COLUMNS`) per run
    and checkpoint: per information state the largest |centred logit| over its legal
    actions, then over the states its share at or beyond ``beta`` and its quantiles
    (the columns of :data:`LOGIT_COLUMNS` but ``reading``)."""

    run = ["game", "algorithm", "entropy", "seed", "iteration", "phase"]
    per_state = (logits.assign(largest=np.abs(logits.centred_logit.to_numpy(np.float64)))
                 .groupby([*run, "infostate"], sort=True)["largest"].max().reset_index())
    rows = []
    for key, group in per_state.groupby(run, sort=True):
        largest = group["largest"].to_numpy(np.float64)
        q10, median, q90 = np.quantile(largest, [0.1, 0.5, 0.9])
        rows.append((*key, float(beta), len(largest), float(np.mean(largest >= beta)),
                     float(q10), float(median), float(q90), float(largest.max())))
    return pd.DataFrame(rows, columns=[c for c in LOGIT_COLUMNS if c != "reading"])


def logit_table(jobs: Mapping[str, list], snapshots: Mapping[str, Mapping]) -> pd.DataFrame:
    """Per reading, the :func:`logit_summary` of each of its jobs' logits files (``jobs``:
    reading -> paths; a job that logs no run adds no row)."""
    frames = [logit_summary(read_table(path), float(snapshots[reading]["beta"]))
              .assign(reading=reading) for reading, paths in jobs.items() for path in paths]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame({c: pd.Series(dtype=object if c in ("reading", "game", "algorithm")
                                          else float) for c in LOGIT_COLUMNS})
    return pd.concat(frames, ignore_index=True)[list(LOGIT_COLUMNS)]



def read_readings(folders: Mapping[str, str]) -> tuple[dict, dict, dict]:
    """Each reading's Fig 6 tables (``ci``: its ``nashconv_ci``), config snapshot and the
    keys it changes from the default reading's (``folders``: reading -> results folder)."""
    tables, snapshots, changes = {}, {}, {}
    base = load_snapshot(f"{folders[DEFAULT_READING]}/config/neural.json")
    for reading, folder in folders.items():
        snapshots[reading] = load_snapshot(f"{folder}/config/neural.json")
        tables[reading] = {name: read_table(f"{folder}/neural/{name}.parquet")
                           for name in ("nashconv", "diagnostics", "summary")}
        tables[reading]["ci"] = read_table(f"{folder}/neural/nashconv_ci.parquet")
        changes[reading] = {k: v for k, v in snapshots[reading].items() if base.get(k) != v}
    return tables, snapshots, changes


def logit_files(folders: Mapping[str, str], snapshots: Mapping[str, Mapping]) -> dict:
    """Per reading, the logits files of its main critic's jobs (:func:`logit_table`)."""
    return {reading: [f"{folder}/neural/{game}/jobs/{critic}_{chunk}_logits.parquet"
                      for game, critic, chunk in select_jobs(
                          jobs(snapshots[reading]), critic=main_critic(snapshots[reading]))]
            for reading, folder in folders.items()}


def _derive(config: Mapping) -> dict[str, tuple[str, dict]]:
    """Every reading's neural section by the key it comes from; a reading that plays other
    games than the neural section's is refused (its tables are expanded over the neural
    section's games, and its jobs run on the neural stage's compiled games)."""
    derived = {f"readings.variants.{name}" if name != DEFAULT_READING else "readings.neural":
               ("neural", section) for name, section in reading_sections(config).items()}
    neural = config.get("neural") or {}
    games, strings = neural.get("games"), neural.get("game_strings") or {}
    for label, (_, section) in derived.items():
        require(section.get("games", games) == games, f"{label}.games",
                f"plays {section.get('games')}, the neural section {games}: a reading runs "
                "the neural section's games (the grid compares claims game by game)")
        changed = [g for g in games or () if g in (section.get("game_strings") or {})
                   and section["game_strings"][g] != strings.get(g)]
        require(not changed, f"{label}.game_strings.{changed[0] if changed else ''}",
                f"{section['game_strings'][changed[0]] if changed else ''!r} is not the "
                f"neural section's {strings.get(changed[0]) if changed else ''!r}: a reading "
                "runs on the neural stage's compiled games")
    return derived


def register(stage: Stage, sub) -> None:
    """The stage's one step, ``neurd readings-grid``, draws the study's figure: it is added
    by :mod:`neurd.readings_grid`, above both this stage and the figures."""


STAGE = Stage(section="readings", check=check, figures=lambda cfg: [], register=register,
              derive=_derive)
