"""One job of Fig 6: every configuration of one game for a chunk of run seeds.

:func:`run` drives the jitted learning program (:mod:`neurd.neural.train`) one
checkpoint segment at a time.  At every checkpoint it measures, exactly and in
float64, each configuration's **current** policy (the network evaluated on
every information state, renormalised in float64): its NashConv in the game
active in that phase (the payoff negated in even phases) by the sequence-form
engine, and the reach-weighted RMS error of its critic against the exact
regularised continuation values of that policy.  It logs progress between
segments, keeps the policy of every configuration at the end of each phase,
and can checkpoint its whole state to a folder of ``.npz`` files (no pickles) so that a
killed job resumes where it stopped and writes identical tables.  For the configurations
a plan names (:attr:`Plan.logged`: some run seeds at some entropy levels, none by
default) it also keeps the policy's centred logits at every checkpoint, per
information state and legal action, to show what a collapse to a deterministic
policy is made of; naming none changes no other number.

Checkpoints: per phase, the phase's first iteration, ``geometric`` points
spaced geometrically from one policy update on (resolving the start of the
phase) and ``linear`` points spaced evenly up to the phase's last iteration
(which is always one), all multiples of the critic updates per policy update.
A phase boundary appears twice: as the last iteration of one phase, measured
in that phase's game, and as the first of the next, in the next one's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import logging
import math
import os
import re
import subprocess
import time
import zipfile
from dataclasses import dataclass
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from neurd.games import CompiledGame
from neurd.names import NEURD
from neurd.neural import train
from neurd.neural.arguments import check_plan
from neurd.precision import float64
from neurd.progress import Progress
from neurd.tables import atomic_path
from neurd.tabular.evaluation import nash_conv
from neurd.tabular.histories import PI_FLOOR, action_values, history_tree, infostate_reach
from neurd.tabular.sequence_form import sequence_form

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "neurd-neural-checkpoint"
# 3: the policy's entropy and threshold share; 4: the logged logits; 5: the folder's marker,
# every part's SHA-256 and the digest of meta.json
CHECKPOINT_VERSION = 5


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
    logits_seeds: tuple[int, ...] = ()
    logits_entropies: tuple[float, ...] = ()
    batch_origin: int = 0

    @property
    def configurations(self) -> list[tuple[str, float, int]]:
        """(algorithm, entropy, run seed) in the order of the result arrays' columns."""
        return [(a, self.entropies[e], s) for a in self.spec.algorithms
                for s in self.run_seeds for e in range(len(self.entropies))]

    @property
    def logged(self) -> list[int]:
        """Indices in :attr:`configurations` of those whose centred logits are kept at every
        checkpoint: every algorithm's runs of a seed of ``logits_seeds`` (those of this job)
        at an entropy level of ``logits_entropies``."""
        return [c for c, (_, entropy, seed) in enumerate(self.configurations)
                if seed in self.logits_seeds and entropy in self.logits_entropies]

    @property
    def batches(self) -> list[tuple[int, ...]]:
        """The job's run seeds by batch: seed ``s`` is in batch
        ``(s - batch_origin) // seeds_per_batch``.

        A batch is one call of the compiled program (``vmap`` over its
        configurations); which batch a seed is in, not which job, fixes its
        numbers, so any split of the seeds into jobs gives the same tables.  A
        seed block (:func:`neurd.pipeline.neural.block_plan`) is one batch of its
        own: ``batch_origin`` its first seed, ``seeds_per_batch`` its size.
        """
        groups: dict[int, list[int]] = {}
        for s in self.run_seeds:
            groups.setdefault((s - self.batch_origin) // self.seeds_per_batch, []).append(s)
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


def centred_log_policy(policy, legal, count):
    """``(log pi, its centred logits)`` ``[..., I, A]`` of float64 policies: ``log pi``
    (``pi`` floored at :data:`PI_FLOOR`, 0 off the legal actions) and ``log pi`` minus its
    mean over the ``count`` legal actions of each state: what the softmax keeps of the
    network's logits.  Traceable."""
    log_pi = jnp.where(legal, jnp.log(jnp.maximum(policy, PI_FLOOR)), 0.0)
    return log_pi, log_pi - jnp.sum(log_pi, -1, keepdims=True) / count[..., None]


@jax.jit
def _centred_logits(tables, legal):
    """Float64 centred logits ``[N, I, A]`` of float32 policy tables ``[N, I, A]`` (0 off the
    legal actions), as :func:`_measure` computes them; a float64 scope."""
    count = jnp.maximum(jnp.sum(legal, axis=-1), 1)
    return jax.vmap(lambda table: jnp.where(
        legal, centred_log_policy(exact_policies(table, legal), legal, count)[1], 0.0))(tables)


def signed_form(form, sign):
    """The sequence form with the payoffs times ``sign`` (the negated game for ``-1``)."""
    return dataclasses.replace(form, terminal_payoff=sign * form.terminal_payoff)


@partial(jax.jit, static_argnames=("beta",))
def _measure(form, tree, tables, critics, etas, sign, beta=2.0):
    """Per configuration ``[C]``: NashConv, the critic's RMS error, the policy's entropy and
    the share of its logits at NeuRD's threshold, of the current policies.

    ``tables`` and ``critics`` are the networks' float32 outputs; everything
    here is float64 (call in a float64 scope).  The entropy (nats) is the mean
    over information states weighted by the policy's own reach; the centred
    logits are ``log pi`` centred over the legal actions (what the softmax
    keeps of the network's logits; ``pi`` floored at :data:`PI_FLOOR`), and the
    share is over the legal (state, action) pairs of ``|centred logit| >= beta``:
    how much of the policy sits where NeuRD's threshold stops pushing.
    """
    legal = tree.legal
    game = signed_form(form, sign)

    def one(table, critic, eta):
        policy = exact_policies(table, legal)
        continuation = action_values(tree, policy, eta, sign)[1]
        weight = infostate_reach(tree, policy)
        count = jnp.maximum(jnp.sum(legal, axis=-1), 1)
        error = jnp.sum(jnp.where(legal, jnp.square(critic - continuation), 0.0), -1) / count
        log_pi, centred = centred_log_policy(policy, legal, count)
        entropy = -jnp.sum(jnp.where(legal, policy * log_pi, 0.0), -1)
        at_threshold = jnp.sum(legal & (jnp.abs(centred) >= beta)) / jnp.sum(legal)
        return (nash_conv(game, policy), jnp.sqrt(jnp.sum(weight * error) / jnp.sum(weight)),
                jnp.sum(weight * entropy) / jnp.sum(weight), at_threshold)

    return jax.vmap(one)(tables, jnp.asarray(critics, jnp.float64), etas)


@partial(jax.jit, static_argnames=("spec",))
def network_nash_conv(spec: train.Spec, form, tensors, legal, params, sign=1.0, players=None):
    """NashConv ``[N]`` of policy networks ``params`` (batched), and the policies ``[N, I, A]``
    it is of: the network evaluated on every information-state tensor at once (float32),
    renormalised in float64, then the exact tree computation.  Call in a float64 scope.
    ``players`` ``[I]``: each state's player (needed by one network per player)."""
    if spec.networks != "shared" and players is None:
        raise ValueError("network_nash_conv: one network per player needs the players")
    net = train.network(spec.networks, spec.hidden, legal.shape[-1], spec.precision)
    game = signed_form(form, sign)

    def one(p):
        logits = net.apply({"params": p}, jnp.asarray(tensors, jnp.float32), players)
        policy = exact_policies(train.masked_policy(logits, legal), legal)
        return nash_conv(game, policy), policy

    return jax.vmap(one)(params)


def _stack(per_batch: list[dict], algorithms) -> np.ndarray:
    """Per-batch ``{algorithm: [N_b, ...]}`` -> ``[C, ...]`` in the plan's configuration order."""
    return np.concatenate([np.asarray(batch[a]) for a in algorithms for batch in per_batch])


PART_BYTES = 16 * 2**20 - 2**16  # a checkpoint file's payload: under 16 MiB with the zip's own


class Stopped(Exception):
    """The job ran out of its wall-time budget and saved its state (resume by running again)."""


class _Unfit(ValueError):
    """Why a checkpoint does not fit the job; ``array``: the stored array at fault, if one."""

    def __init__(self, reason: str, array: str | None = None):
        super().__init__(reason)
        self.array = array


class CheckpointPathError(ValueError):
    """A ``--checkpoint`` path this project will not write to (it holds what it did not
    write, or cannot be written); raised before any compute."""


# the file names a checkpoint folder holds: its marker, its meta.json, its parts, and their
# temporaries (neurd.tables.atomic_path's ".<name>.tmp-<random><suffix>", left by a writer
# killed outright); nothing else in a folder is ever removed
MARKER = ".neurd-checkpoint"
_PART = re.compile(r"part-(\d+)-(\d+)\.npz")
_OWN = re.compile(r"\.neurd-checkpoint|meta\.json|part-\d+-\d+\.npz"
                  r"|\.(meta\.json|part-\d+-\d+\.npz)\.tmp-\w+\.\w+")
_META_KEYS = ("format", "version", "identity", "next_row", "generation", "parts", "arrays",
              "pieces", "sha256", "digest")
# the results run() measures at each checkpoint row, and the keys of its records of pieces
_MEASURED = ("nash_conv", "critic_rmse", "blocked", "critic_loss", "policy_entropy",
             "at_threshold")
PIECE_KEYS = ("platform", "device", "jax", "revision", "first_iteration", "iterations",
               "seconds", "configuration_iterations_per_second")


def _meta_digest(meta: dict) -> str:
    """SHA-256 of everything ``meta.json`` says but its own digest: identity, rows, the
    arrays' layout, the pieces (the provenance the curves will carry) and every part's
    SHA-256.  An edit of any of them without this digest's is refused at restore."""
    body = {k: meta[k] for k in _META_KEYS if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class _Checkpoint:
    """The whole job state in a folder of ``.npz`` files of at most 16 MiB each (no pickles).

    ``meta.json`` names the generation of the state and its files; every
    array (the flattened leaves of the learners' states, the results so far)
    is stored flat, cut into chunks of at most :data:`PART_BYTES`, packed
    into ``part-<generation>-<k>.npz``.  A save writes the new generation's
    parts, then replaces ``meta.json`` (atomically), then removes the older
    generation's parts: a kill at any moment leaves a readable state.  The
    folder can be moved to another machine and resumed there.

    The folder is this project's only if it holds the marker file
    :data:`MARKER` (written by :meth:`claim` before any compute): a path that
    holds anything else, or a file, is refused, and nothing but the files named
    by ``_OWN`` is ever removed from it.  ``meta.json`` carries every part's
    SHA-256 and a digest of itself (:func:`_meta_digest`); a part is read only
    after its hash and its declared sizes check.

    A checkpoint is a cache: one that is unreadable, altered or does not fit
    the job is dropped (its files removed) with a warning, and the job starts
    afresh.
    """

    def __init__(self, path, identity: dict):
        self.path, self.identity = path, identity

    def claim(self) -> None:
        """Make the folder this job's (creating it with the marker), or raise
        :class:`CheckpointPathError`: a file, or a folder holding anything without the
        marker, is not this project's to write to; a folder it cannot write to would lose
        the job's state at its first save."""
        if self.path is None:
            return
        folder = os.fspath(self.path)
        if os.path.islink(folder) or (os.path.exists(folder) and not os.path.isdir(folder)):
            raise CheckpointPathError(
                f"--checkpoint {folder} exists and is not a folder: a checkpoint never replaces "
                "a file it did not write; give another path")
        if os.path.isdir(folder) and os.listdir(folder) and not os.path.isfile(
                os.path.join(folder, MARKER)):
            raise CheckpointPathError(
                f"--checkpoint {folder} is a folder this project did not make (it holds files "
                f"but no {MARKER}): a checkpoint never writes into it; give an empty or new "
                "folder (one left by an older version of neurd can be deleted)")
        try:
            os.makedirs(folder, exist_ok=True)
            with atomic_path(os.path.join(folder, MARKER)) as tmp:
                tmp.write_text(f"{CHECKPOINT_FORMAT}: a neural job's saved state, written by "
                               "neurd neural-run and removed when the job finishes\n")
        except OSError as error:
            raise CheckpointPathError(f"--checkpoint {folder} cannot be written "
                                      f"({type(error).__name__}: {error.strerror or error})"
                                      ) from None

    def save(self, states: list, next_row: int, results: dict, pieces: list) -> None:
        folder = os.fspath(self.path)
        self.claim()
        generation = self._next_generation(folder)
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
        digests = {}
        for name, content in zip(names, parts):
            buffer = io.BytesIO()
            np.savez(buffer, **content)
            data = buffer.getvalue()
            digests[name] = hashlib.sha256(data).hexdigest()
            with atomic_path(os.path.join(folder, name)) as tmp:
                tmp.write_bytes(data)
        meta = {"format": CHECKPOINT_FORMAT, "version": CHECKPOINT_VERSION,
                "identity": self.identity, "next_row": next_row, "generation": generation,
                "parts": names, "arrays": index, "pieces": pieces, "sha256": digests}
        meta["digest"] = _meta_digest(meta)
        with atomic_path(os.path.join(folder, "meta.json")) as tmp:
            tmp.write_text(json.dumps(meta, sort_keys=True))
        for stale in os.listdir(folder):
            if _PART.fullmatch(stale) and stale not in names:
                os.remove(os.path.join(folder, stale))

    def _next_generation(self, folder) -> int:
        """One past every generation in the folder (its ``meta.json``'s and its parts'), so
        that a save never overwrites a part the ``meta.json`` in place still names, whatever
        that ``meta.json`` holds (another run's is ignored at restore, not dropped)."""
        meta = self._meta()
        seen = [int(m.group(1)) for m in map(_PART.fullmatch, os.listdir(folder)) if m]
        if isinstance(meta, dict) and type(meta.get("generation")) is int:
            seen.append(meta["generation"])
        return max(seen, default=-1) + 1

    def _meta(self):
        try:
            with open(os.path.join(os.fspath(self.path), "meta.json")) as handle:
                return json.load(handle)
        except (OSError, ValueError):
            return None

    def restore(self, states: list, check=None):
        """``(states, next_row, results, pieces)`` from the folder, or ``None``.

        ``check(next_row, results, pieces)``: raises :class:`_Unfit` unless the
        results and pieces are what the job would hold at ``next_row``.  A
        checkpoint that is unreadable or does not fit (see :meth:`_restore`) is
        dropped here, with one warning naming it and why, before any compute
        uses it; another run's (its identity differs) is ignored and left for
        the first save to replace; so is a file in the folder's place.
        """
        if self.path is None or not os.path.exists(self.path):
            return None
        folder = os.fspath(self.path)
        if not os.path.isfile(os.path.join(folder, "meta.json")):
            return None  # claimed, nothing saved yet
        try:
            return self._restore(states, check)
        except Exception as error:  # a checkpoint is a cache: a bad one is dropped, not fatal
            reason = (str(error) if isinstance(error, _Unfit)
                      else f"{type(error).__name__}: {error}")
        try:
            self._clear(keep_marker=True)
            outcome = "removed its files"
        except OSError as error:  # the first save replaces what is left
            outcome = f"could not remove it ({type(error).__name__}: {error})"
        log.warning("dropping checkpoint %s, which does not fit this job: %s; %s and starting "
                    "afresh", folder, reason, outcome)
        return None

    def _restore(self, states: list, check):
        """Read the folder; raise :class:`_Unfit` (or the reader's error) unless it fits.

        It fits if ``meta.json`` is an object with every key a save writes, its
        ``next_row`` a row (an int >= 0), ``pieces`` a list of objects, its
        parts readable and holding every array as ``meta.json`` describes it
        (dtype, shape, chunks); if the arrays are exactly the job's state
        leaves, each of the job's dtype and shape and finite where floating,
        plus results that pass ``check``.  Anything less would fail the job
        later, far from the file (an IndexError, a NaN NashConv), or change its
        tables.
        """
        folder = os.fspath(self.path)
        meta = self._read_meta(folder)
        if (meta["format"], meta["version"], meta["identity"]) != (
                CHECKPOINT_FORMAT, CHECKPOINT_VERSION, self.identity):
            log.warning("ignoring checkpoint %s: it belongs to another run", self.path)
            return None
        if meta["digest"] != _meta_digest(meta):
            raise _Unfit("meta.json was altered after it was written (its digest does not "
                         "match its content)")
        next_row, pieces = meta["next_row"], meta["pieces"]
        if type(next_row) is not int or next_row < 0:
            raise _Unfit(f"meta.json: next_row {next_row!r} is not a checkpoint row")
        if not (isinstance(pieces, list) and all(isinstance(p, dict) for p in pieces)):
            raise _Unfit("meta.json: pieces is not a list of records")
        arrays, located = self._read_arrays(folder, meta["parts"], meta["arrays"],
                                            meta["sha256"])
        leaves, treedef = jax.tree_util.tree_flatten(states)
        stored = {k for k in arrays if not k.startswith("result_")}
        expected = {f"leaf_{i}" for i in range(len(leaves))}
        if stored != expected:
            odd = sorted(stored ^ expected, key=lambda k: (len(k), k))
            raise _Unfit(f"meta.json: the state is {len(stored)} arrays, the job's {len(leaves)}"
                         f" leaves (not in both: {', '.join(odd[:3])}"
                         f"{', ...' if len(odd) > 3 else ''})")
        results = {k[len("result_"):]: v for k, v in arrays.items() if k.startswith("result_")}
        try:
            for i, x in enumerate(leaves):
                value = arrays[f"leaf_{i}"]
                if value.shape != x.shape or value.dtype != x.dtype:
                    raise _Unfit(f"is {value.dtype}{list(value.shape)}, the job's is "
                                 f"{x.dtype}{list(x.shape)}", f"leaf_{i}")
                if np.issubdtype(value.dtype, np.inexact) and not np.all(np.isfinite(value)):
                    raise _Unfit("holds non-finite values", f"leaf_{i}")
            if check is not None:
                check(next_row, results, pieces)
        except _Unfit as unfit:
            if unfit.array is None:
                raise
            raise _Unfit(f"{unfit.array} (in {', '.join(located[unfit.array])}) {unfit}") from None
        log.info("resuming from checkpoint %s at checkpoint row %d", self.path, next_row)
        return (jax.tree_util.tree_unflatten(treedef, [jnp.asarray(arrays[f"leaf_{i}"])
                                                       for i in range(len(leaves))]),
                next_row, results, pieces)

    @staticmethod
    def _read_meta(folder) -> dict:
        try:
            with open(os.path.join(folder, "meta.json")) as handle:
                meta = json.load(handle)
        except FileNotFoundError:
            raise _Unfit("no meta.json") from None
        except ValueError as error:
            raise _Unfit(f"meta.json is not JSON ({error})") from None
        if not isinstance(meta, dict):
            raise _Unfit(f"meta.json is a JSON {type(meta).__name__}, not an object")
        missing = [k for k in _META_KEYS if k not in meta]
        if missing:
            raise _Unfit(f"meta.json lacks {', '.join(missing)}")
        return meta

    @staticmethod
    def _read_arrays(folder, parts, index, digests) -> tuple[dict, dict]:
        """``({name: array}, {name: [part files]})`` as ``meta.json`` describes them; each
        part read only once its SHA-256 is the one ``meta.json`` gives and its members
        declare no more bytes than a part holds (so a crafted part cannot inflate)."""
        if not (isinstance(parts, list) and all(isinstance(n, str) and _PART.fullmatch(n)
                                                for n in parts)):
            raise _Unfit("meta.json: parts is not a list of part-<generation>-<k>.npz names")
        if not isinstance(index, dict):
            raise _Unfit("meta.json: arrays is not an object")
        if not (isinstance(digests, dict) and set(digests) == set(parts)):
            raise _Unfit("meta.json: sha256 does not name every part")
        arrays, located = {}, {}
        with contextlib.ExitStack() as stack:
            files = []
            for name in parts:
                path = os.path.join(folder, name)
                try:
                    if os.path.getsize(path) > PART_BYTES + 2**16:
                        raise _Unfit(f"{name} is {os.path.getsize(path)} bytes, more than a "
                                     "part holds")
                    data = open(path, "rb").read()
                    if hashlib.sha256(data).hexdigest() != digests[name]:
                        raise _Unfit(f"{name} is not the part that was saved (its SHA-256 "
                                     "differs from meta.json's)")
                    with zipfile.ZipFile(io.BytesIO(data)) as archive:
                        declared = sum(member.file_size for member in archive.infolist())
                    if declared > PART_BYTES + 2**16:
                        raise _Unfit(f"{name} declares {declared} bytes of arrays, more than a "
                                     "part holds")
                    files.append(stack.enter_context(
                        np.load(io.BytesIO(data), allow_pickle=False)))
                except _Unfit:
                    raise
                except Exception as error:
                    raise _Unfit(f"{name} is unreadable ({type(error).__name__}: "
                                 f"{error})") from None
            for name, entry in index.items():
                try:
                    dtype, shape, chunks = (np.dtype(entry["dtype"]), tuple(entry["shape"]),
                                            entry["chunks"])
                    if not (all(type(n) is int and n >= 0 for n in shape)
                            and all(type(k) is int and 0 <= k < len(files)
                                    and isinstance(key, str) for k, key in chunks)):
                        raise ValueError
                except Exception:
                    raise _Unfit(f"meta.json: the entry of {name} is malformed") from None
                located[name] = sorted({parts[k] for k, _ in chunks})
                flat = []
                for k, key in chunks:
                    try:
                        chunk = files[k][key]
                    except Exception as error:
                        raise _Unfit(f"{parts[k]}: {key} is unreadable ({type(error).__name__}"
                                     f": {error})") from None
                    if chunk.dtype != dtype or chunk.ndim != 1:
                        raise _Unfit(f"{parts[k]}: {key} is {chunk.dtype}{list(chunk.shape)}, "
                                     f"not the flat {dtype} meta.json says")
                    flat.append(chunk)
                flat = np.concatenate(flat) if flat else np.zeros(0, dtype)
                if flat.size != math.prod(shape):
                    raise _Unfit(f"{name} (in {', '.join(located[name])}) holds {flat.size} "
                                 f"values, not the {math.prod(shape)} of its shape {list(shape)}")
                arrays[name] = flat.reshape(shape)
        return arrays, located

    def size(self) -> int:
        """Bytes of the saved state (0 if none)."""
        meta = self._meta()
        if not isinstance(meta, dict) or not isinstance(meta.get("parts"), list):
            return 0
        return sum(os.path.getsize(os.path.join(os.fspath(self.path), n))
                   for n in meta["parts"] + ["meta.json"])

    def remove(self) -> None:
        if self.path is not None and os.path.isdir(self.path):
            self._clear()

    def _clear(self, keep_marker: bool = False) -> None:
        """Remove the checkpoint's own files (its marker too unless ``keep_marker``), then
        the folder if that empties it: whatever else is in it is left alone."""
        folder = os.fspath(self.path)
        for name in os.listdir(folder):
            if (_OWN.fullmatch(name) and not os.path.isdir(os.path.join(folder, name))
                    and not (keep_marker and name == MARKER)):
                os.remove(os.path.join(folder, name))
        if not os.listdir(folder) and not os.path.islink(folder):
            os.rmdir(folder)


def _check_resumable(plan: Plan, iterations: np.ndarray, phases: np.ndarray, configs: int,
                     legal_count: int, next_row: int, results: dict, pieces: list) -> None:
    """Raise :class:`_Unfit` unless ``results`` and ``pieces`` are what :func:`run` holds
    before checkpoint row ``next_row`` of the grid ``iterations``/``phases``.

    The per-checkpoint arrays are float64 ``[K, C]``: finite in the rows measured
    (``row < next_row``; :func:`run` stops at a non-finite NashConv), NaN in the
    others, in every row for the exact critic's error, and at iteration 0 for
    ``blocked`` and ``critic_loss``; ``phase_tables`` is float32 ``[P, C, L]``,
    finite, one per phase ended before ``next_row``; ``logits`` is float64
    ``[K, len(plan.logged), L]``, finite in the rows measured and NaN in the
    others; each piece a record with the keys :func:`run` writes (the pipeline
    reads them).
    """
    rows = len(iterations)
    if not 0 <= next_row <= rows:
        raise _Unfit(f"meta.json: next_row {next_row} is off the checkpoint grid (rows "
                     f"0..{rows})")
    names = {*_MEASURED, "phase_tables", "logits"}
    if set(results) != names:
        raise _Unfit(f"meta.json: the results are {sorted(results)}, the job's are "
                     f"{sorted(names)}")
    measured = np.arange(rows) < next_row
    for name in _MEASURED:
        value, array = results[name], f"result_{name}"
        if value.dtype != np.float64 or value.shape != (rows, configs):
            raise _Unfit(f"is {value.dtype}{list(value.shape)}, the job's is "
                         f"float64{[rows, configs]}", array)
        written = measured & (iterations > 0 if name in ("blocked", "critic_loss") else True)
        if name == "critic_rmse" and plan.spec.critic == "exact":
            written = np.zeros(rows, bool)
        if not np.all(np.isfinite(value[written])):
            raise _Unfit("holds non-finite values in rows the job has measured", array)
        if not np.all(np.isnan(value[~written])):
            raise _Unfit("holds values where the job has written none", array)
    ended = int(np.sum(measured & (iterations == phases * plan.phase_iterations)))
    tables = results["phase_tables"]
    if tables.dtype != np.float32 or tables.shape != (ended, configs, legal_count):
        raise _Unfit(f"is {tables.dtype}{list(tables.shape)}, the job's is "
                     f"float32{[ended, configs, legal_count]}", "result_phase_tables")
    if not np.all(np.isfinite(tables)):
        raise _Unfit("holds non-finite values", "result_phase_tables")
    logits, shape = results["logits"], (rows, len(plan.logged), legal_count)
    if logits.dtype != np.float64 or logits.shape != shape:
        raise _Unfit(f"is {logits.dtype}{list(logits.shape)}, the job's is "
                     f"float64{list(shape)}", "result_logits")
    if not (np.all(np.isfinite(logits[measured])) and np.all(np.isnan(logits[~measured]))):
        raise _Unfit("is not finite exactly in the rows the job has measured", "result_logits")
    reached = 0
    for i, piece in enumerate(pieces):
        missing = [k for k in PIECE_KEYS if k not in piece]
        if missing:
            raise _Unfit(f"meta.json: piece {i} lacks {', '.join(missing)}")
        start, count = piece["first_iteration"], piece["iterations"]
        if not (type(start) is int and type(count) is int and start == reached and count >= 0):
            raise _Unfit(f"meta.json: piece {i} starts at iteration {start!r} after "
                         f"{reached} iterations were done (pieces follow one another)")
        reached += count
    done = int(iterations[next_row - 1]) if next_row else 0
    if pieces and reached != done:
        raise _Unfit(f"meta.json: the pieces did {reached} iterations, the curves measured up to "
                     f"iteration {done} (next_row {next_row})")


class StateError(ValueError):
    """A saved job state that is refused where it must be used as it is (a block in progress
    carried between machines); the message names the folder or file and what is wrong."""


def job_template(compiled: CompiledGame, plan: Plan) -> tuple[list, np.ndarray, np.ndarray]:
    """``(states, iterations, phases)``: the job's initial learner states (one per batch),
    whose leaves a saved state must match, and its checkpoint grid."""
    game = train.neural_game(compiled)
    states = [train.batch_inputs(plan.spec, game, plan.seed, plan.game, batch,
                                 plan.entropies)[0] for batch in plan.batches]
    iterations, phases = checkpoint_grid(plan.phase_iterations, plan.phases, plan.geometric,
                                         plan.linear, plan.spec.critic_updates)
    return states, iterations, phases


def check_state(compiled: CompiledGame, plan: Plan, identity: dict, folder) -> dict:
    """Check the saved state in ``folder`` strictly (as :func:`run` would resume it, but a
    state that does not fit is refused, not dropped): raise :class:`StateError` naming the
    file and what is wrong; else ``{"next_row", "iteration", "rows", "pieces"}``."""
    folder = os.fspath(folder)
    states, iterations, phases = job_template(compiled, plan)
    legal = int(np.asarray(compiled.infostate_legal).sum())
    checker = _Checkpoint(folder, identity)
    meta = checker._meta()
    if not os.path.isfile(os.path.join(folder, "meta.json")):
        raise StateError(f"{folder}/meta.json is missing: not a saved job state")
    if not isinstance(meta, dict):
        raise StateError(f"{folder}/meta.json cannot be read as a saved job state")
    if isinstance(meta.get("identity"), dict) and meta["identity"] != identity:
        odd = sorted(k for k in set(meta["identity"]) | set(identity)
                     if meta["identity"].get(k) != identity.get(k))
        raise StateError(f"{folder}/meta.json is the state of another run: "
                         + "; ".join(f"{k} {meta['identity'].get(k)!r}, expected "
                                     f"{identity.get(k)!r}" for k in odd))
    try:
        restored = checker._restore(states, partial(_check_resumable, plan, iterations, phases,
                                                    len(plan.configurations), legal))
    except _Unfit as unfit:
        raise StateError(f"{folder}: {unfit}") from None
    except Exception as error:
        raise StateError(f"{folder}: cannot be read ({type(error).__name__}: {error})") from None
    if restored is None:
        raise StateError(f"{folder}/meta.json is not a state of this format "
                         f"({CHECKPOINT_FORMAT} version {CHECKPOINT_VERSION})")
    next_row, pieces = restored[1], restored[3]
    return {"next_row": next_row, "rows": len(iterations), "pieces": pieces,
            "iteration": int(iterations[next_row - 1]) if next_row else 0,
            "iterations": int(iterations[-1])}


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
        revision: str = "unknown", variant: str = "default") -> dict:
    """Run every configuration of ``plan``; return the result arrays.

    Keys: ``nash_conv``, ``critic_rmse``, ``blocked``, ``critic_loss``,
    ``policy_entropy``, ``at_threshold`` ``[K, C]``
    per checkpoint and configuration (:attr:`Plan.configurations` order),
    ``logits`` ``[K, len(plan.logged), legal pairs]``: the centred logits (float64,
    as :func:`_measure` computes them) of the :attr:`Plan.logged` configurations at
    every checkpoint, per legal (information state, action) pair in the order of
    ``np.nonzero(compiled.infostate_legal)`` (no configuration by default),
    ``policies`` ``[phases, C, I, A]`` at each phase's end (float64, the
    float32 network tables renormalised), the checkpoints' ``iteration`` and
    ``phase`` ``[K]``, and ``pieces``: one record per process that worked on
    the job (device, jax version, revision, wall seconds, iterations,
    configuration-iterations per second, the cycle ``variant``).

    ``checkpoint_path``: a folder where the job state is saved every
    ``checkpoint_seconds`` of wall time (and resumed from if it exists and
    belongs to the same ``identity``; one that is unreadable or does not fit the
    plan is dropped with a warning, before any compute); removed when the job
    finishes.
    A plan a config could not hold is refused first
    (:func:`~neurd.neural.arguments.check_plan`).
    ``stop_after_seconds``: a wall-time budget; once the next segment would
    overrun it, the state is saved to ``checkpoint_path`` and :class:`Stopped`
    is raised (run again to resume: the tables come out identical).
    """
    check_plan(plan)  # before anything compiles: the config's schema, the config's words
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
        **{name: np.full((len(iterations), configs), np.nan) for name in _MEASURED},
        # the float32 tables at each phase's end, legal entries only (what a checkpoint keeps)
        "phase_tables": np.zeros((0, configs, int(legal.sum())), np.float32),
        "logits": np.full((len(iterations), len(plan.logged), int(legal.sum())), np.nan),
    }
    logged = np.asarray(plan.logged, np.int64)
    saver = _Checkpoint(checkpoint_path, identity or {})
    saver.claim()  # before any compute: a path that is not this project's is refused
    restored = saver.restore(states, partial(_check_resumable, plan, iterations, phases,
                                             configs, int(legal.sum())))
    first_row, pieces = 0, []
    if restored is not None:
        states, first_row, results, pieces = restored
    piece = {**device_description(), "revision": revision, "variant": variant,
             "first_iteration": 0,
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
            value, rmse, entropy, at = _measure(form, tree64, tables, critics,
                                                jnp.asarray(eta_all), sign, beta=spec.beta)
        results["nash_conv"][row] = np.asarray(value)
        results["policy_entropy"][row] = np.asarray(entropy)
        results["at_threshold"][row] = np.asarray(at)
        results["critic_rmse"][row] = np.nan if spec.critic == "exact" else np.asarray(rmse)
        if len(logged):
            with float64():
                centred = _centred_logits(tables[logged], jnp.asarray(legal))
            results["logits"][row] = np.asarray(centred)[:, legal]
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
