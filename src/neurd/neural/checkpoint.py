"""A neural job's saved state: the checkpoint folder's format, its save, restore and checks.

The whole job state (the learners' states, the results so far, a record of
each process that worked on the job) is a folder of ``.npz`` parts of at most
16 MiB each and a ``meta.json`` naming them, their SHA-256 and a digest of
itself (no pickles); see :class:`Checkpoint`.  A checkpoint is a cache: one
that does not fit the job is dropped (:meth:`Checkpoint.restore`), except
where a saved state must be used as it is (:func:`check_state`).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import math
import os
import re
import zipfile
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from neurd.games import CompiledGame
from neurd.neural.plan import Plan, job_template
from neurd.neural.resumable import Unfit, check_resumable
from neurd.tables import atomic_path

log = logging.getLogger(__name__)

CHECKPOINT_FORMAT = "neurd-neural-checkpoint"
# 3: the policy's entropy and threshold share; 4: the logged logits; 5: the folder's marker,
# every part's SHA-256 and the digest of meta.json
CHECKPOINT_VERSION = 5
PART_BYTES = 16 * 2**20 - 2**16  # a checkpoint file's payload: under 16 MiB with the zip's own


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


def meta_digest(meta: dict) -> str:
    """SHA-256 of everything ``meta.json`` says but its own digest: identity, rows, the
    arrays' layout, the pieces (the provenance the curves will carry) and every part's
    SHA-256.  An edit of any of them without this digest's is refused at restore."""
    body = {k: meta[k] for k in _META_KEYS if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


class Checkpoint:
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
    SHA-256 and a digest of itself (:func:`meta_digest`); a part is read only
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
        meta["digest"] = meta_digest(meta)
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

        ``check(next_row, results, pieces)``: raises :class:`Unfit` unless the
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
            reason = (str(error) if isinstance(error, Unfit)
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
        """Read the folder; raise :class:`Unfit` (or the reader's error) unless it fits.

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
        if meta["digest"] != meta_digest(meta):
            raise Unfit("meta.json was altered after it was written (its digest does not "
                         "match its content)")
        next_row, pieces = meta["next_row"], meta["pieces"]
        if type(next_row) is not int or next_row < 0:
            raise Unfit(f"meta.json: next_row {next_row!r} is not a checkpoint row")
        if not (isinstance(pieces, list) and all(isinstance(p, dict) for p in pieces)):
            raise Unfit("meta.json: pieces is not a list of records")
        arrays, located = self._read_arrays(folder, meta["parts"], meta["arrays"],
                                            meta["sha256"])
        leaves, treedef = jax.tree_util.tree_flatten(states)
        stored = {k for k in arrays if not k.startswith("result_")}
        expected = {f"leaf_{i}" for i in range(len(leaves))}
        if stored != expected:
            odd = sorted(stored ^ expected, key=lambda k: (len(k), k))
            raise Unfit(f"meta.json: the state is {len(stored)} arrays, the job's {len(leaves)}"
                         f" leaves (not in both: {', '.join(odd[:3])}"
                         f"{', ...' if len(odd) > 3 else ''})")
        results = {k[len("result_"):]: v for k, v in arrays.items() if k.startswith("result_")}
        try:
            for i, x in enumerate(leaves):
                value = arrays[f"leaf_{i}"]
                if value.shape != x.shape or value.dtype != x.dtype:
                    raise Unfit(f"is {value.dtype}{list(value.shape)}, the job's is "
                                 f"{x.dtype}{list(x.shape)}", f"leaf_{i}")
                if np.issubdtype(value.dtype, np.inexact) and not np.all(np.isfinite(value)):
                    raise Unfit("holds non-finite values", f"leaf_{i}")
            if check is not None:
                check(next_row, results, pieces)
        except Unfit as unfit:
            if unfit.array is None:
                raise
            raise Unfit(f"{unfit.array} (in {', '.join(located[unfit.array])}) {unfit}") from None
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
            raise Unfit("no meta.json") from None
        except ValueError as error:
            raise Unfit(f"meta.json is not JSON ({error})") from None
        if not isinstance(meta, dict):
            raise Unfit(f"meta.json is a JSON {type(meta).__name__}, not an object")
        missing = [k for k in _META_KEYS if k not in meta]
        if missing:
            raise Unfit(f"meta.json lacks {', '.join(missing)}")
        return meta

    @staticmethod
    def _open_part(folder, name: str, digest: str):
        """Part ``name`` opened (an ``NpzFile``) once its SHA-256 is ``digest`` and its members
        declare no more bytes than a part holds; :class:`Unfit` saying why not."""
        path = os.path.join(folder, name)
        try:
            if os.path.getsize(path) > PART_BYTES + 2**16:
                raise Unfit(f"{name} is {os.path.getsize(path)} bytes, more than a part holds")
            data = open(path, "rb").read()
            if hashlib.sha256(data).hexdigest() != digest:
                raise Unfit(f"{name} is not the part that was saved (its SHA-256 differs from "
                            "meta.json's)")
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                declared = sum(member.file_size for member in archive.infolist())
            if declared > PART_BYTES + 2**16:
                raise Unfit(f"{name} declares {declared} bytes of arrays, more than a part "
                            "holds")
            return np.load(io.BytesIO(data), allow_pickle=False)
        except Unfit:
            raise
        except Exception as error:
            raise Unfit(f"{name} is unreadable ({type(error).__name__}: {error})") from None

    @staticmethod
    def _read_arrays(folder, parts, index, digests) -> tuple[dict, dict]:
        """``({name: array}, {name: [part files]})`` as ``meta.json`` describes them; each
        part read only once its SHA-256 is the one ``meta.json`` gives and its members
        declare no more bytes than a part holds (so a crafted part cannot inflate)."""
        if not (isinstance(parts, list) and all(isinstance(n, str) and _PART.fullmatch(n)
                                                for n in parts)):
            raise Unfit("meta.json: parts is not a list of part-<generation>-<k>.npz names")
        if not isinstance(index, dict):
            raise Unfit("meta.json: arrays is not an object")
        if not (isinstance(digests, dict) and set(digests) == set(parts)):
            raise Unfit("meta.json: sha256 does not name every part")
        arrays, located = {}, {}
        with contextlib.ExitStack() as stack:
            files = [stack.enter_context(Checkpoint._open_part(folder, name, digests[name]))
                     for name in parts]
            for name, entry in index.items():
                try:
                    dtype, shape, chunks = (np.dtype(entry["dtype"]), tuple(entry["shape"]),
                                            entry["chunks"])
                    if not (all(type(n) is int and n >= 0 for n in shape)
                            and all(type(k) is int and 0 <= k < len(files)
                                    and isinstance(key, str) for k, key in chunks)):
                        raise ValueError
                except Exception:
                    raise Unfit(f"meta.json: the entry of {name} is malformed") from None
                located[name] = sorted({parts[k] for k, _ in chunks})
                flat = []
                for k, key in chunks:
                    try:
                        chunk = files[k][key]
                    except Exception as error:
                        raise Unfit(f"{parts[k]}: {key} is unreadable ({type(error).__name__}"
                                     f": {error})") from None
                    if chunk.dtype != dtype or chunk.ndim != 1:
                        raise Unfit(f"{parts[k]}: {key} is {chunk.dtype}{list(chunk.shape)}, "
                                     f"not the flat {dtype} meta.json says")
                    flat.append(chunk)
                flat = np.concatenate(flat) if flat else np.zeros(0, dtype)
                if flat.size != math.prod(shape):
                    raise Unfit(f"{name} (in {', '.join(located[name])}) holds {flat.size} "
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


class StateError(ValueError):
    """A saved job state that is refused where it must be used as it is (a block in progress
    carried between machines); the message names the folder or file and what is wrong."""


def check_state(compiled: CompiledGame, plan: Plan, identity: dict, folder) -> dict:
    """Check the saved state in ``folder`` strictly (as :func:`~neurd.neural.experiment.run`
    would resume it, but a state that does not fit is refused, not dropped): raise
    :class:`StateError` naming the file and what is wrong; else ``{"next_row",
    "iteration", "rows", "pieces"}``."""
    return restore_strictly(compiled, plan, identity, folder)[0]


def restore_strictly(compiled: CompiledGame, plan: Plan, identity: dict, folder
                     ) -> tuple[dict, list, dict]:
    """:func:`check_state`'s checks; ``(info, states, results)``: what it returns, and the
    learner states (one per batch) and the results the state holds."""
    folder = os.fspath(folder)
    states, iterations, phases = job_template(compiled, plan)
    legal = int(np.asarray(compiled.infostate_legal).sum())
    checker = Checkpoint(folder, identity)
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
        restored = checker._restore(states, partial(check_resumable, plan, iterations, phases,
                                                    len(plan.configurations), legal))
    except Unfit as unfit:
        raise StateError(f"{folder}: {unfit}") from None
    except Exception as error:
        raise StateError(f"{folder}: cannot be read ({type(error).__name__}: {error})") from None
    if restored is None:
        raise StateError(f"{folder}/meta.json is not a state of this format "
                         f"({CHECKPOINT_FORMAT} version {CHECKPOINT_VERSION})")
    next_row, pieces = restored[1], restored[3]
    return ({"next_row": next_row, "rows": len(iterations), "pieces": pieces,
             "iteration": int(iterations[next_row - 1]) if next_row else 0,
             "iterations": int(iterations[-1])}, restored[0], restored[2])
