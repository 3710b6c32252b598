"""One job of Fig 6: every configuration of one game for a chunk of run seeds.

:func:`run` drives the jitted learning program (:mod:`neurd.neural.train`) one
checkpoint segment at a time.  At every checkpoint it measures, exactly and in
float64, each configuration's **current** policy (the network evaluated on
every information state, renormalised in float64): its NashConv in the game
active in that phase (the payoff negated in even phases) by the sequence-form
engine, and the reach-weighted RMS error of its critic against the exact
regularised continuation values of that policy.  It logs progress between
segments, keeps the policy of every configuration at the end of each phase,
and can checkpoint its whole state to a ``.npz`` (no pickles) so that a killed
job resumes where it stopped and writes identical tables.

Checkpoints: per phase, the phase's first iteration, ``geometric`` points
spaced geometrically from one policy update on (resolving the start of the
phase) and ``linear`` points spaced evenly up to the phase's last iteration
(which is always one), all multiples of the critic updates per policy update.
A phase boundary appears twice: as the last iteration of one phase, measured
in that phase's game, and as the first of the next, in the next one's.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from neurd.games import CompiledGame
from neurd.names import NEURD
from neurd.neural import train
from neurd.precision import float64
from neurd.progress import Progress
from neurd.tables import atomic_path
from neurd.tabular.evaluation import nash_conv
from neurd.tabular.histories import action_values, history_tree, infostate_reach
from neurd.tabular.sequence_form import sequence_form

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "neurd-neural-checkpoint"
CHECKPOINT_VERSION = 2


@dataclass(frozen=True)
class Plan:
    """What a job runs: a game, the learning spec, entropy levels, run seeds, the schedule."""

    game: str
    spec: train.Spec
    entropies: tuple[float, ...]
    run_seeds: tuple[int, ...]
    seed: int
    phase_iterations: int
    phases: int
    geometric: int
    linear: int
    seeds_per_batch: int = 1

    @property
    def configurations(self) -> list[tuple[str, float, int]]:
        """(algorithm, entropy, run seed) in the order of the result arrays' columns."""
        return [(a, self.entropies[e], s) for a in self.spec.algorithms
                for s in self.run_seeds for e in range(len(self.entropies))]

    @property
    def batches(self) -> list[tuple[int, ...]]:
        """The job's run seeds by batch: seed ``s`` is in batch ``s // seeds_per_batch``.

        A batch is one call of the compiled program (``vmap`` over its
        configurations); which batch a seed is in, not which job, fixes its
        numbers, so any split of the seeds into jobs gives the same tables.
        """
        groups: dict[int, list[int]] = {}
        for s in self.run_seeds:
            groups.setdefault(s // self.seeds_per_batch, []).append(s)
        return [tuple(groups[k]) for k in sorted(groups)]


def checkpoint_grid(phase_iterations: int, phases: int, geometric: int, linear: int,
                    multiple: int) -> tuple[np.ndarray, np.ndarray]:
    """``(iteration [K], phase [K])`` of every checkpoint, in order (see the module docstring)."""
    if phase_iterations % multiple:
        raise ValueError(f"phase_iterations ({phase_iterations}) must be a multiple of the "
                         f"critic updates per policy update ({multiple})")
    offsets = np.concatenate([
        [0], np.geomspace(multiple, phase_iterations, geometric) if geometric else [],
        np.linspace(0, phase_iterations, linear + 1)[1:]])
    offsets = np.unique(np.round(offsets / multiple).astype(np.int64) * multiple)
    iterations = np.concatenate([p * phase_iterations + offsets for p in range(phases)])
    phase = np.repeat(np.arange(1, phases + 1), len(offsets))
    return iterations.astype(np.int64), phase.astype(np.int64)


@float64
def _exact_setup(compiled: CompiledGame):
    return sequence_form(compiled), history_tree(compiled)


def exact_policies(tables: jax.Array, legal: jax.Array) -> jax.Array:
    """The network's float32 policy tables in float64, renormalised over the legal actions.

    Traceable; call in a float64 scope.  This is the policy every exact
    number (NashConv, the policies table) is of.
    """
    policy = jnp.where(legal, jnp.asarray(tables, dtype=jnp.float64), 0.0)
    return policy / jnp.sum(policy, axis=-1, keepdims=True)


def signed_form(form, sign):
    """The sequence form with the payoffs times ``sign`` (the negated game for ``-1``)."""
    return dataclasses.replace(form, terminal_payoff=sign * form.terminal_payoff)


@jax.jit
def _measure(form, tree, tables, critics, etas, sign):
    """NashConv ``[C]`` and critic RMS error ``[C]`` of the current policies.

    ``tables`` and ``critics`` are the networks' float32 outputs; everything
    here is float64 (call in a float64 scope).
    """
    legal = tree.legal
    game = signed_form(form, sign)

    def one(table, critic, eta):
        policy = exact_policies(table, legal)
        continuation = action_values(tree, policy, eta, sign)[1]
        weight = infostate_reach(tree, policy)
        count = jnp.maximum(jnp.sum(legal, axis=-1), 1)
        error = jnp.sum(jnp.where(legal, jnp.square(critic - continuation), 0.0), -1) / count
        return nash_conv(game, policy), jnp.sqrt(jnp.sum(weight * error) / jnp.sum(weight))

    return jax.vmap(one)(tables, jnp.asarray(critics, jnp.float64), etas)


@partial(jax.jit, static_argnames=("spec",))
def network_nash_conv(spec: train.Spec, form, tensors, legal, params, sign=1.0):
    """NashConv ``[N]`` of policy networks ``params`` (batched), and the policies ``[N, I, A]``
    it is of: the network evaluated on every information-state tensor at once (float32),
    renormalised in float64, then the exact tree computation.  Call in a float64 scope."""
    net = train.MLP(spec.hidden, legal.shape[-1], spec.precision)
    game = signed_form(form, sign)

    def one(p):
        logits = net.apply({"params": p}, jnp.asarray(tensors, jnp.float32))
        policy = exact_policies(train.masked_policy(logits, legal), legal)
        return nash_conv(game, policy), policy

    return jax.vmap(one)(params)


def _stack(per_batch: list[dict], algorithms) -> np.ndarray:
    """Per-batch ``{algorithm: [N_b, ...]}`` -> ``[C, ...]`` in the plan's configuration order."""
    return np.concatenate([np.asarray(batch[a]) for a in algorithms for batch in per_batch])


PART_BYTES = 16 * 2**20 - 2**16  # a checkpoint file's payload: under 16 MiB with the zip's own


class Stopped(Exception):
    """The job ran out of its wall-time budget and saved its state (resume by running again)."""


class _Checkpoint:
    """The whole job state in a folder of ``.npz`` files of at most 16 MiB each (no pickles).

    ``meta.json`` names the generation of the state and its files; every
    array (the flattened leaves of the learners' states, the results so far)
    is stored flat, cut into chunks of at most :data:`PART_BYTES`, packed
    into ``part-<generation>-<k>.npz``.  A save writes the new generation's
    parts, then replaces ``meta.json`` (atomically), then removes the older
    generation's parts: a kill at any moment leaves a readable state.  The
    folder can be moved to another machine and resumed there.
    """

    def __init__(self, path, identity: dict):
        self.path, self.identity = path, identity

    def save(self, states: list, next_row: int, results: dict, pieces: list) -> None:
        folder = os.fspath(self.path)
        if os.path.exists(folder) and not os.path.isdir(folder):
            os.remove(folder)  # not a checkpoint folder: restore already said it was dropped
        os.makedirs(folder, exist_ok=True)
        previous = self._meta()
        generation = (previous or {}).get("generation", -1) + 1
        arrays = {f"leaf_{i}": np.asarray(x)
                  for i, x in enumerate(jax.tree_util.tree_leaves(states))}
        arrays.update({f"result_{k}": np.asarray(v) for k, v in results.items()})
        index, parts, part, size = {}, [], {}, 0
        for name, array in arrays.items():
            flat = np.ascontiguousarray(array).reshape(-1)
            step = PART_BYTES // flat.itemsize
            chunks = [flat[k:k + step] for k in range(0, max(len(flat), 1), step)]
            index[name] = {"dtype": array.dtype.str, "shape": list(array.shape), "chunks": []}
            for c, chunk in enumerate(chunks):
                if part and size + chunk.nbytes > PART_BYTES:
                    parts.append(part)
                    part, size = {}, 0
                key = f"{name}.{c}"
                part[key] = chunk
                size += chunk.nbytes
                index[name]["chunks"].append([len(parts), key])
        parts.append(part)
        names = [f"part-{generation}-{k}.npz" for k in range(len(parts))]
        for name, content in zip(names, parts):
            with atomic_path(os.path.join(folder, name)) as tmp, open(tmp, "wb") as handle:
                np.savez(handle, **content)
        meta = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
                "identity": self.identity, "next_row": next_row, "generation": generation,
                "parts": names, "arrays": index, "pieces": pieces}
        with atomic_path(os.path.join(folder, "meta.json")) as tmp:
            tmp.write_text(json.dumps(meta, sort_keys=True))
        for stale in os.listdir(folder):
            if stale.startswith("part-") and stale not in names:
                os.remove(os.path.join(folder, stale))

    def _meta(self):
        try:
            with open(os.path.join(os.fspath(self.path), "meta.json")) as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return None

    def restore(self, states: list):
        """``(states, next_row, results, pieces)`` from the folder, or ``None``."""
        if self.path is None or not os.path.exists(self.path):
            return None
        try:
            return self._restore(states)
        except Exception as error:  # a checkpoint is a cache: a bad one is dropped, not fatal
            log.warning("ignoring unreadable checkpoint %s (%s: %s); starting afresh",
                        self.path, type(error).__name__, error)
            return None

    def _restore(self, states: list):
        if not os.path.isdir(self.path):
            raise ValueError("not a checkpoint folder")
        with open(os.path.join(os.fspath(self.path), "meta.json")) as handle:
            meta = json.load(handle)
        if (meta.get("format"), meta.get("version"), meta.get("identity")) != (
                CHECKPOINT_FORMAT, CHECKPOINT_VERSION, self.identity):
            log.warning("ignoring checkpoint %s: it belongs to another run", self.path)
            return None
        files = [np.load(os.path.join(os.fspath(self.path), name), allow_pickle=False)
                 for name in meta["parts"]]
        try:
            arrays = {}
            for name, entry in meta["arrays"].items():
                flat = np.concatenate([files[k][key] for k, key in entry["chunks"]])
                arrays[name] = flat.astype(np.dtype(entry["dtype"]), copy=False).reshape(
                    entry["shape"])
        finally:
            for f in files:
                f.close()
        leaves, treedef = jax.tree_util.tree_flatten(states)
        restored = []
        for i, x in enumerate(leaves):
            value = arrays[f"leaf_{i}"]
            if value.shape != x.shape or value.dtype != x.dtype:
                raise ValueError(f"leaf {i} is {value.dtype}{list(value.shape)}, the job's "
                                 f"is {x.dtype}{list(x.shape)}")
            restored.append(jnp.asarray(value))
        results = {k[len("result_"):]: v for k, v in arrays.items() if k.startswith("result_")}
        log.info("resuming from checkpoint %s at checkpoint row %d", self.path, meta["next_row"])
        return (jax.tree_util.tree_unflatten(treedef, restored), int(meta["next_row"]),
                results, list(meta.get("pieces", [])))

    def size(self) -> int:
        """Bytes of the saved state (0 if none)."""
        meta = self._meta()
        if meta is None:
            return 0
        return sum(os.path.getsize(os.path.join(os.fspath(self.path), n))
                   for n in meta["parts"] + ["meta.json"])

    def remove(self) -> None:
        if self.path is not None and os.path.isdir(self.path):
            shutil.rmtree(self.path)


@jax.jit
def _phase_policies(tables, legal):
    """Float64 policies ``[P, C, I, A]`` of the float32 phase-end tables (a float64 scope)."""
    return exact_policies(tables, legal)


def device_description() -> dict:
    """The device the job computes on: platform, model, driver (GPU), jax version."""
    device = jax.devices()[0]
    info = {"platform": device.platform, "device": getattr(device, "device_kind", "unknown"),
            "jax": jax.__version__}
    if device.platform == "gpu":
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                                  "--format=csv,noheader"], capture_output=True, text=True,
                                 timeout=30, check=True).stdout.splitlines()[0]
            info["device"], info["driver"] = (x.strip() for x in out.split(",", 1))
        except (OSError, subprocess.SubprocessError, ValueError, IndexError):
            info["driver"] = "unknown"
    return info


def run(compiled: CompiledGame, plan: Plan, checkpoint_path=None, checkpoint_seconds=300.0,
        identity: dict | None = None, stop_after_seconds: float | None = None,
        revision: str = "unknown") -> dict:
    """Run every configuration of ``plan``; return the result arrays.

    Keys: ``nash_conv``, ``critic_rmse``, ``blocked``, ``critic_loss`` ``[K, C]``
    per checkpoint and configuration (:attr:`Plan.configurations` order),
    ``policies`` ``[phases, C, I, A]`` at each phase's end (float64, the
    float32 network tables renormalised), the checkpoints' ``iteration`` and
    ``phase`` ``[K]``, and ``pieces``: one record per process that worked on
    the job (device, jax version, revision, wall seconds, iterations,
    configuration-iterations per second).

    ``checkpoint_path``: a folder where the job state is saved every
    ``checkpoint_seconds`` of wall time (and resumed from if it exists and
    belongs to the same ``identity``); removed when the job finishes.
    ``stop_after_seconds``: a wall-time budget; once the next segment would
    overrun it, the state is saved to ``checkpoint_path`` and :class:`Stopped`
    is raised (run again to resume: the tables come out identical).
    """
    started = time.monotonic()
    spec = plan.spec
    game = train.neural_game(compiled)
    form, tree64 = _exact_setup(compiled)
    iterations, phases = checkpoint_grid(plan.phase_iterations, plan.phases, plan.geometric,
                                         plan.linear, spec.critic_updates)
    states, keys, etas = (list(x) for x in zip(*[
        train.batch_inputs(spec, game, plan.seed, plan.game, batch, plan.entropies)
        for batch in plan.batches]))
    configs = len(plan.configurations)
    legal = np.asarray(compiled.infostate_legal)
    results = {
        "nash_conv": np.full((len(iterations), configs), np.nan),
        "critic_rmse": np.full((len(iterations), configs), np.nan),
        "blocked": np.full((len(iterations), configs), np.nan),
        "critic_loss": np.full((len(iterations), configs), np.nan),
        # the float32 tables at each phase's end, legal entries only (what a checkpoint keeps)
        "phase_tables": np.zeros((0, configs, int(legal.sum())), np.float32),
    }
    saver = _Checkpoint(checkpoint_path, identity or {})
    restored = saver.restore(states)
    first_row, pieces = 0, []
    if restored is not None:
        states, first_row, results, pieces = restored
    piece = {**device_description(), "revision": revision, "first_iteration": 0,
             "iterations": 0, "seconds": 0.0, "configuration_iterations_per_second": None}
    eta_all = _stack(etas, spec.algorithms).astype(np.float64)
    progress = Progress(f"neural {plan.game}: {configs} configurations", iterations[-1])
    last_save = time.monotonic()
    done = int(iterations[first_row - 1]) if first_row else 0
    piece["first_iteration"] = done
    seconds_per_iteration = None

    def finish_piece(done):
        piece["iterations"] = done - piece["first_iteration"]
        piece["seconds"] = round(time.monotonic() - started, 3)
        if piece["iterations"]:
            piece["configuration_iterations_per_second"] = round(
                configs * piece["iterations"] / piece["seconds"], 1)
        return pieces + [piece]

    for row in range(first_row, len(iterations)):
        target, phase = int(iterations[row]), int(phases[row])
        sign = 1.0 if phase % 2 == 1 else -1.0
        if stop_after_seconds is not None and row > first_row and seconds_per_iteration:
            expected = (target - done) * seconds_per_iteration
            if time.monotonic() - started + 1.2 * expected + 5.0 > stop_after_seconds:
                if checkpoint_path is None:
                    raise ValueError("a wall-time budget needs a checkpoint path")
                saver.save(states, row, results, finish_piece(done))
                raise Stopped(f"stopped at iteration {done} of {int(iterations[-1])} after "
                              f"{time.monotonic() - started:.0f} s (budget "
                              f"{stop_after_seconds:.0f} s); state saved in {checkpoint_path} "
                              f"({saver.size() / 2**20:.1f} MiB): run again to resume")
        segment_start = time.monotonic()
        if target > done:
            cycles = (target - done) // spec.critic_updates
            states = [train.run_segment(spec, game, st, k, e, done // spec.critic_updates,
                                        cycles, np.float32(sign))
                      for st, k, e in zip(states, keys, etas)]
            jax.block_until_ready(states)
            if row > first_row:  # the first segment of a process includes its compilation
                seconds_per_iteration = (time.monotonic() - segment_start) / (target - done)
            done = target

        def field(name, states=states):
            return _stack([{a: getattr(s, name) for a, s in st.items()} for st in states],
                          spec.algorithms)

        critics = _stack([train.critic_tables(spec, game, st) for st in states], spec.algorithms)
        tables = field("table")
        with float64():
            value, rmse = _measure(form, tree64, tables, critics, jnp.asarray(eta_all), sign)
        results["nash_conv"][row] = np.asarray(value)
        results["critic_rmse"][row] = np.nan if spec.critic == "exact" else np.asarray(rmse)
        updates = np.maximum(field("updates"), 1)
        if target > 0:
            results["blocked"][row] = field("blocked") / updates
            results["critic_loss"][row] = field("critic_loss") / (updates * spec.critic_updates)
        if target == phase * plan.phase_iterations:
            results["phase_tables"] = np.concatenate(
                [results["phase_tables"], tables[None][:, :, legal]])
        if not np.all(np.isfinite(results["nash_conv"][row])):
            bad = int(np.flatnonzero(~np.isfinite(results["nash_conv"][row]))[0])
            raise FloatingPointError(f"NashConv is not finite at iteration {target} for "
                                     f"configuration {plan.configurations[bad]}")
        groups = len(spec.algorithms)
        per_algorithm = zip(spec.algorithms, np.split(results["nash_conv"][row], groups),
                            np.split(results["blocked"][row], groups))
        progress.update(target, f"phase {phase}, NashConv " + "; ".join(
            f"{a} {np.nanmin(v):.3g}..{np.nanmax(v):.3g}"
            + (f" (threshold blocked {100 * np.mean(b):.0f}% of pushes)"
               if a == NEURD and target > 0 else "")
            for a, v, b in per_algorithm))
        if (checkpoint_path is not None and row < len(iterations) - 1
                and time.monotonic() - last_save >= checkpoint_seconds):
            saver.save(states, row + 1, results, finish_piece(done))
            last_save = time.monotonic()
    saver.remove()
    full = np.zeros((plan.phases, configs) + legal.shape, np.float32)
    full[:, :, legal] = results.pop("phase_tables")
    with float64():
        results["policies"] = np.asarray(_phase_policies(full, jnp.asarray(legal)))
    results["iteration"], results["phase"] = iterations, phases
    results["pieces"] = finish_piece(done)
    return results
