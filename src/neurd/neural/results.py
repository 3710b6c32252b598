"""The neural stage's tables: what each holds (its columns), how a job's table is made
from a run's results and checked to be a config's run, and what is derived from a game's
curves (per-run summary, bootstrap CI over seeds, the uniform policy's NashConv) and which
runs diverged (under the main critic and the exact one).

The stage (:mod:`neurd.pipeline.neural`) writes these tables and a publication
(:mod:`neurd.publication`) checks and derives them again, both from here.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from neurd import games
from neurd.neural.plan import checkpoint_grid
from neurd.neural.runs import main_critic
from neurd.stats import bootstrap_mean_ci
from neurd.tables import InputFileError, config_hash, read_metadata, tidy

_RUN_DOCS = {
    "game": "short name of the game (config neural.games; string in neural.game_strings)",
    "algorithm": "'neurd': all-actions NeuRD (logits step along eta * A, thresholded at "
                 "neural.beta); 'spg': all-actions softmax policy gradient (eta * pi * A)",
    "entropy": "entropy regularisation level alpha of the reward transformation (Perolat "
               "et al. 2020 call it eta), uniform reference policy; the figures' alpha",
    "seed": "run seed: initial weights shared by every algorithm and entropy level",
}
_POINT_DOCS = {
    "iteration": "learning iterations done (critic updates; one policy update every "
                 "neural.critic_updates_per_policy_update of them)",
    "phase": "phase of the reward (1-based; the payoff is negated in even phases); a phase "
             "boundary appears as the last iteration of one phase and the first of the next",
}
NASHCONV_COLUMNS = {
    **_RUN_DOCS, **_POINT_DOCS,
    "nash_conv": "exact NashConv of the current network policy in the phase's (unregularised) "
                 "game, computed by the engine in float64; NaN from the checkpoint a run "
                 "diverged at on (summary.diverged_at)",
    "policy_updates": "policy updates done (iteration / critic updates per policy update)",
    "trajectories": "episodes sampled so far (critic and policy batches)",
}
DIAGNOSTIC_COLUMNS = {
    "game": _RUN_DOCS["game"],
    "critic": "'learned': the Q-network; 'exact': the engine's exact regularised q of the "
              "current policy in the critic's place (neural.exact_critic_games)",
    **{k: v for k, v in _RUN_DOCS.items() if k != "game"}, **_POINT_DOCS,
    "nash_conv": NASHCONV_COLUMNS["nash_conv"],
    "critic_rmse": "reach-weighted RMS error of the critic against the exact regularised "
                   "continuation values of the current policy (NaN for the exact critic)",
    "threshold_blocked": "share of NeuRD's logit pushes (visit-weighted, legal actions, an "
                         "advantage of at least 1e-6 in size) the threshold blocked, mean over "
                         "the policy updates since the previous checkpoint (0 for SPG; NaN at "
                         "iteration 0)",
    "critic_loss": "mean critic regression loss over the critic updates since the previous "
                   "checkpoint (NaN at iteration 0)",
    "policy_entropy": "entropy (nats) of the current policy, mean over information states "
                      "weighted by the policy's own reach (0: deterministic where it plays)",
    "at_threshold": "share of the legal (information state, action) pairs whose centred "
                    "logit (log pi centred over the legal actions) is at or beyond "
                    "+-neural.beta: where NeuRD's threshold stops pushing",
}
# what grows before a network diverges (neurd.neural.measurement.GROWTH); a run that diverges
# keeps the values measured at the checkpoint it diverged at (those not finite there name
# what stopped being finite first), NaN after it
GROWTH_COLUMNS = {
    "common_mode": "the policy network's common mode: per information state the mean of its "
                   "raw outputs over the legal actions (what the softmax cannot see), its "
                   "largest size over the states the current policy visits",
    "centred_logit": "the largest size of a raw output minus that mean, over the legal "
                     "actions of the states the current policy visits (what NeuRD's "
                     "threshold bounds)",
    "policy_weight_norm": "L2 norm of all the policy network's weights (float64)",
    "critic_weight_norm": "L2 norm of all the critic network's weights (float64; constant "
                          "under the exact critic, which does not use it)",
}
DIAGNOSTIC_COLUMNS = {**DIAGNOSTIC_COLUMNS, **GROWTH_COLUMNS}
POLICY_COLUMNS = {
    **_RUN_DOCS, **_POINT_DOCS,
    "infostate": "OpenSpiel's information-state string",
    "action": "OpenSpiel action id (legal actions only)",
    "probability": "probability of the action under the network policy, float64 as "
                   "evaluated (the float32 network output renormalised over legal actions)",
}
SUMMARY_COLUMNS = {
    **_RUN_DOCS,
    "final_nash_conv": "mean NashConv over the last neural.final_checkpoints checkpoints (NaN "
                       "for a run that diverged)",
    "average_nash_conv": "area under the NashConv curve over all iterations divided by its "
                         "length (trapezoids within each phase): Fig 6 (d-f); NaN for a run "
                         "that diverged",
    "diverged_at": "the first checkpoint's iteration at which the run had diverged (its "
                   "NashConv or a float of its learner's state was not finite; every "
                   "measurement of it is NaN from there on); null for a run that did not",
}
CI_COLUMNS = {
    "game": _RUN_DOCS["game"], "algorithm": _RUN_DOCS["algorithm"],
    "entropy": _RUN_DOCS["entropy"], **_POINT_DOCS,
    "mean": "mean NashConv over seeds (NaN where a seed has diverged)",
    "ci_low": "lower end of the bootstrap confidence interval of the mean (over seeds; NaN "
              "with one seed or where a seed has diverged)",
    "ci_high": "upper end of the bootstrap confidence interval of the mean (over seeds; NaN "
               "with one seed)",
    "uniform_nash_conv": "NashConv of the uniform policy in the phase's game (the audit's "
                         "yardstick for 'converges faster')",
}
CURVES_COLUMNS = {**DIAGNOSTIC_COLUMNS,
                  **{k: NASHCONV_COLUMNS[k] for k in ("policy_updates", "trajectories")}}
# a job's curves as written before the growth columns (a publication's earlier blocks)
CURVES_COLUMNS_WITHOUT_GROWTH = {k: v for k, v in CURVES_COLUMNS.items()
                                 if k not in GROWTH_COLUMNS}


def with_growth(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the :data:`GROWTH_COLUMNS` (NaN where a table from before them has
    none), in the order of :data:`DIAGNOSTIC_COLUMNS`."""
    missing = {name: np.nan for name in GROWTH_COLUMNS if name not in frame}
    return frame.assign(**missing) if missing else frame
LOGITS_COLUMNS = {
    **{k: v for k, v in DIAGNOSTIC_COLUMNS.items() if k in (*_RUN_DOCS, "critic")},
    **_POINT_DOCS,
    "infostate": POLICY_COLUMNS["infostate"],
    "action": POLICY_COLUMNS["action"],
    "centred_logit": "log pi of the action under the current network policy (pi floored at "
                     "1e-30, float64 as evaluated) minus its mean over the state's legal "
                     "actions: what the softmax keeps of the network's logits, and what "
                     "NeuRD's threshold neural.beta bounds; runs of neural.logits_log only",
}
TABLES = {"nashconv": NASHCONV_COLUMNS, "policies": POLICY_COLUMNS,
          "diagnostics": DIAGNOSTIC_COLUMNS, "summary": SUMMARY_COLUMNS,
          "nashconv_ci": CI_COLUMNS}


def checkpoint_schedule(cfg: Mapping, game: str) -> tuple[np.ndarray, np.ndarray]:
    """``(iterations, phases)``: the checkpoints of one run of ``game``, where its curves have
    a row."""
    return checkpoint_grid(int(cfg["phase_iterations"][game]), int(cfg["phases"]),
                           int(cfg["checkpoints"]["geometric"]),
                           int(cfg["checkpoints"]["linear"]),
                           int(cfg["critic_updates_per_policy_update"]))


def check_job_table(path, cfg: Mapping, game: str, critic: str | None = None) -> dict:
    """A job's table's metadata, checked to be ``cfg``'s run of ``game`` (its config hash,
    game string and, where given, critic); else :class:`~neurd.tables.InputFileError`
    naming the file and what differs."""
    try:
        meta = read_metadata(path)
    except (OSError, ValueError) as error:
        raise InputFileError(f"{path} cannot be read as a table ({error})") from None
    problems = []
    if meta.get("config_hash") != config_hash(cfg):
        problems.append(f"made from another config (hash {meta.get('config_hash')}, this one's "
                        f"{config_hash(cfg)})")
    if meta.get("game_string") != cfg["game_strings"].get(game):
        problems.append(f"of the game {meta.get('game_string')!r}, not {game}'s "
                        f"{cfg['game_strings'].get(game)!r}")
    if critic is not None and meta.get("critic") != critic:
        problems.append(f"of the {meta.get('critic')} critic, not the {critic}")
    if problems:
        raise InputFileError(f"{path} is not this config's {game} job: " + "; ".join(problems))
    return meta


def grid_problems(frame: pd.DataFrame, runs: set, schedule: set, what: str) -> list[str]:
    """What keeps ``frame`` from having one row per run of ``runs`` at every point of
    ``schedule`` (the (iteration, phase) pairs)."""
    keys = ["algorithm", "entropy", "seed", "iteration", "phase"]
    if frame.duplicated(keys).any():
        row = frame[frame.duplicated(keys, keep=False)].iloc[0]
        return [f"{what}: two rows for {tuple(row[k] for k in keys)}"]
    found = {(a, float(e), int(s)): set(zip(r.iteration.tolist(), r.phase.tolist()))
             for (a, e, s), r in frame.groupby(["algorithm", "entropy", "seed"])}
    problems = []
    missing, extra = sorted(runs - set(found)), sorted(set(found) - runs)
    if missing:
        problems.append(f"{what}: {len(missing)} of {len(runs)} runs missing, e.g. {missing[0]}")
    if extra:
        problems.append(f"{what}: {len(extra)} runs the block does not make, e.g. {extra[0]}")
    short = sorted(k for k, points in found.items() if k in runs and points != schedule)
    if short:
        problems.append(f"{what}: {len(short)} runs not exactly at the checkpoints, e.g. "
                        f"{short[0]} at {len(found[short[0]] & schedule)} of {len(schedule)}")
    return problems


def run_table(cfg: Mapping, game: str, critic: str, results: Mapping, configurations
              ) -> pd.DataFrame:
    """The job's curves: one row per (configuration, checkpoint)."""
    algorithm, entropy, seed = (np.asarray(x) for x in zip(*configurations))
    iterations = np.asarray(results["iteration"])
    ratio = int(cfg["critic_updates_per_policy_update"])
    updates = iterations // ratio
    return tidy([{"iteration": iterations, "phase": np.asarray(results["phase"]),
                  "policy_updates": updates,
                  "trajectories": iterations * int(cfg["critic_batch"])
                  + updates * int(cfg["policy_batch"])},
                 {"algorithm": algorithm, "entropy": entropy.astype(float),
                  "seed": seed.astype(np.int64)}],
                {"nash_conv": results["nash_conv"], "critic_rmse": results["critic_rmse"],
                 "threshold_blocked": results["blocked"], "critic_loss": results["critic_loss"],
                 "policy_entropy": results["policy_entropy"],
                 "at_threshold": results["at_threshold"],
                 **{name: results[name] for name in GROWTH_COLUMNS}},
                game=game, critic=critic)


def policy_table(cfg: Mapping, game: str, compiled, results: Mapping, configurations
                 ) -> pd.DataFrame:
    """Every configuration's policy at the end of each phase, legal actions only."""
    rows, cols = np.nonzero(compiled.infostate_legal)
    algorithm, entropy, seed = (np.asarray(x) for x in zip(*configurations))
    phases = np.arange(1, int(cfg["phases"]) + 1)
    policies = np.asarray(results["policies"])[:, :, rows, cols]  # [P, C, legal pairs]
    return tidy([{"phase": phases, "iteration": phases * int(cfg["phase_iterations"][game])},
                 {"algorithm": algorithm, "entropy": entropy.astype(float),
                  "seed": seed.astype(np.int64)},
                 {"infostate": compiled.infostate_string[rows].astype(object),
                  "action": cols.astype(np.int64)}],
                {"probability": policies}, game=game)[list(POLICY_COLUMNS)]


def logits_table(game: str, critic: str, compiled, results: Mapping, plan) -> pd.DataFrame:
    """The logged runs' centred logits: one row per (run, checkpoint, legal action); no row
    where the plan logs none."""
    rows, cols = np.nonzero(compiled.infostate_legal)
    chosen = [plan.configurations[c] for c in plan.logged]
    algorithm = np.asarray([a for a, _, _ in chosen], dtype=object)
    entropy = np.asarray([e for _, e, _ in chosen], dtype=float)
    seed = np.asarray([s for _, _, s in chosen], dtype=np.int64)
    return tidy([{"algorithm": algorithm, "entropy": entropy, "seed": seed},
                 {"iteration": np.asarray(results["iteration"]),
                  "phase": np.asarray(results["phase"])},
                 {"infostate": compiled.infostate_string[rows].astype(object),
                  "action": cols.astype(np.int64)}],
                {"centred_logit": np.swapaxes(np.asarray(results["logits"]), 0, 1)},
                game=game, critic=critic)[list(LOGITS_COLUMNS)]


def average_nash_conv(iteration: np.ndarray, phase: np.ndarray, nash_conv: np.ndarray) -> float:
    """Area under the curve over all iterations / its length, trapezoids within each phase."""
    area = sum(np.trapezoid(nash_conv[phase == p], iteration[phase == p])
               for p in np.unique(phase))
    return float(area / (iteration.max() - iteration.min()))


def diverged_at(run: pd.DataFrame) -> int | None:
    """The first iteration (in the order of phases) at which a run's NashConv is not finite;
    None for a run that reached its end."""
    run = run.sort_values(["iteration", "phase"])
    lost = run.nash_conv.isna().to_numpy()
    return int(run.iteration.to_numpy()[lost.argmax()]) if lost.any() else None


def summary_table(cfg: Mapping, nashconv: pd.DataFrame) -> pd.DataFrame:
    """Per run: final NashConv (mean of the last checkpoints), average NashConv, and where
    it diverged (NaN, NaN and the iteration for a run that did)."""
    last = int(cfg["final_checkpoints"])
    rows = []
    for key, run in nashconv.groupby(["game", "algorithm", "entropy", "seed"], sort=True):
        run = run.sort_values(["iteration", "phase"])
        rows.append((*key, float(run.nash_conv.iloc[-last:].mean(skipna=False)),
                     average_nash_conv(run.iteration.to_numpy(), run.phase.to_numpy(),
                                       run.nash_conv.to_numpy()), diverged_at(run)))
    frame = pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS))
    frame["diverged_at"] = frame.diverged_at.astype("Int64")
    return frame


def diverged_runs(summary: pd.DataFrame, game: str) -> pd.DataFrame:
    """A game's runs that diverged (``diverged_at`` given: the first iteration whose NashConv
    was not finite), by algorithm, entropy level and seed; none from a summary without the
    column (a publication from before it: none of its runs diverged)."""
    rows = summary[summary.game == game]
    if "diverged_at" not in rows:
        return rows.iloc[:0]
    return rows[rows.diverged_at.notna()].sort_values(["algorithm", "entropy", "seed"])


def exact_critic_runs(diagnostics: pd.DataFrame, game: str) -> pd.DataFrame:
    """A game's runs with the exact critic beside the learned one (the runs of
    Fig 6's exact-critic claim; none where the game has no such runs): ``algorithm, entropy,
    seed, diverged_at``, the first iteration (in the order of phases) whose NashConv was not
    finite, null for a run that reached its end."""
    rows = diagnostics[diagnostics.game == game]
    columns = ["algorithm", "entropy", "seed", "diverged_at"]
    if not {"exact", "learned"} <= set(rows.critic):
        return pd.DataFrame(columns=columns)
    out = [(*key, diverged_at(run))
           for key, run in rows[rows.critic == "exact"].groupby(columns[:3], sort=True)]
    frame = pd.DataFrame(out, columns=columns)
    frame["diverged_at"] = frame.diverged_at.astype("Int64")
    return frame


def every_diverged_run(summary: pd.DataFrame, diagnostics: pd.DataFrame, game: str
                       ) -> pd.DataFrame:
    """A game's runs that diverged under either critic: :func:`diverged_runs` (the learned
    critic's, or the config's main critic's) and the exact critic's beside them, with a
    ``critic`` column (``main`` or ``exact``)."""
    exact = exact_critic_runs(diagnostics, game)
    exact = exact[exact.diverged_at.notna()].assign(critic="exact")
    main = diverged_runs(summary, game).assign(critic="main")
    if "diverged_at" not in main:  # a summary from before the column: none diverged
        main = main.assign(diverged_at=pd.array([], dtype="Int64"))
    columns = ["critic", "algorithm", "entropy", "seed", "diverged_at"]
    return pd.concat([main[columns], exact[columns]], ignore_index=True)


def finished_runs(summary: pd.DataFrame, game: str) -> pd.DataFrame:
    """A game's runs that did not diverge: those with a final and an average NashConv."""
    return summary[summary.game == game].drop(diverged_runs(summary, game).index)


def uniform_nash_conv(compiled, phases: int) -> np.ndarray:
    """``[phases]``: NashConv of the uniform policy in each phase's game (payoff negated in
    even phases)."""
    from neurd import engine

    values = {}
    for sign in (1.0, -1.0):
        game = compiled if sign > 0 else games.negated(compiled)
        values[sign] = float(engine.nash_conv(game, engine.uniform_policy(game)))
    return np.array([values[1.0 if p % 2 else -1.0] for p in range(1, phases + 1)])


def ci_table(cfg: Mapping, nashconv: pd.DataFrame, uniform: np.ndarray) -> pd.DataFrame:
    """Mean NashConv and its bootstrap CI over seeds per (algorithm, entropy, checkpoint)."""
    b = cfg["bootstrap"]
    frames = []
    for (game, algorithm, entropy), rows in nashconv.groupby(["game", "algorithm", "entropy"],
                                                             sort=True):
        wide = rows.pivot(index="seed", columns=["iteration", "phase"],
                          values="nash_conv")  # a diverged run's NaN kept
        wide = wide.sort_index(axis=1, level=["iteration", "phase"])
        values = wide.to_numpy()
        mean, low, high = (np.full(values.shape[1], np.nan) for _ in range(3))
        whole = ~np.isnan(values).any(axis=0)  # no seed has diverged there
        if len(wide) >= 2 and whole.any():
            mean[whole], low[whole], high[whole] = bootstrap_mean_ci(
                values[:, whole], resamples=b["resamples"], confidence=b["confidence"],
                method=b["method"], seed=cfg["seed"])
        elif len(wide) == 1:  # one seed (a publication's first block): a mean, no interval
            mean = values[0]
        points = wide.columns.to_frame(index=False)
        frames.append(pd.DataFrame({
            "game": game, "algorithm": algorithm, "entropy": entropy,
            "iteration": points.iteration.to_numpy(), "phase": points.phase.to_numpy(),
            "mean": mean, "ci_low": low, "ci_high": high,
            "uniform_nash_conv": uniform[points.phase.to_numpy() - 1]}))
    return pd.concat(frames, ignore_index=True)[list(CI_COLUMNS)]


def game_tables(cfg: Mapping, curves: pd.DataFrame, policies: pd.DataFrame,
                uniform: np.ndarray) -> dict:
    """A game's five tables from its jobs' curves and policies."""
    order = ["critic", "algorithm", "entropy", "seed", "iteration", "phase"]
    curves = curves.sort_values(order, kind="stable").reset_index(drop=True)
    main = curves[curves.critic == main_critic(cfg)]
    nashconv = main[list(NASHCONV_COLUMNS)].reset_index(drop=True)
    return {
        "nashconv": nashconv,
        "policies": policies.sort_values(["algorithm", "entropy", "seed", "phase"],
                                         kind="stable").reset_index(drop=True),
        "diagnostics": with_growth(curves)[list(DIAGNOSTIC_COLUMNS)],
        "summary": summary_table(cfg, nashconv),
        "nashconv_ci": ci_table(cfg, nashconv, uniform),
    }
