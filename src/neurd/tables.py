"""Tidy result tables: Parquet with provenance in the file's metadata.

Every table the pipeline writes goes through :func:`write_table`, which

* checks the frame has exactly the documented columns (in that order),
* stores the column documentation, the config section that made the table,
  its hash, the seed and the package version in the Parquet key-value
  metadata (``neurd.*`` keys), and
* writes to a temporary file in the same folder and renames it into place, so
  an interrupted run never leaves a half-written table behind.

:func:`read_metadata` gives the provenance back; ``pandas.read_parquet`` reads
the data as usual.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import neurd
from neurd.machine import cpu_description

METADATA_PREFIX = "neurd."


def canonical_json(value) -> str:
    """JSON with sorted keys and no whitespace: the input of :func:`config_hash`."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=_to_builtin)


def _to_builtin(value):
    if isinstance(value, Mapping):
        return dict(value)
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"cannot serialise {type(value).__name__} to JSON")


def config_hash(config) -> str:
    """First 16 hex digits of the SHA-256 of the canonical JSON of ``config``."""
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()[:16]


class InputFileError(ValueError):
    """An input file that cannot be read (truncated, corrupt, foreign); names it."""


def _file_mode() -> int:
    """What ``open()`` would give a new file: ``0o666`` less the process umask."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` on success.

    The temporary file keeps ``path``'s suffix so that writers which choose a
    format from it (matplotlib) still work, and gets the mode a plain write
    would (0644 under the usual umask).  Temporary files of ``path`` left by
    a writer that was killed outright are removed first; a writer stopped by
    SIGTERM removes its own (the command line turns SIGTERM into an exit).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    prefix = f".{path.name}.tmp-"
    for stale in path.parent.glob(f"{prefix}*{path.suffix}"):
        stale.unlink(missing_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=path.suffix, dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        os.chmod(tmp, _file_mode())
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def read_table(path: str | os.PathLike) -> pd.DataFrame:
    """``pandas.read_parquet``, with an error naming a truncated or corrupt file."""
    try:
        return pd.read_parquet(path)
    except FileNotFoundError:
        raise
    except (OSError, ValueError, pa.ArrowException) as error:
        raise InputFileError(f"{path} cannot be read as a table ({' '.join(str(error).split())}"
                             "); it is truncated or corrupt: delete it and rerun, and Snakemake "
                             "makes it again") from None


def write_text(path: str | os.PathLike, text: str) -> None:
    """Atomically write a text file."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)


def span_between(text: str, marks: tuple[str, str]) -> tuple[int, int] | None:
    """The span of ``text`` between its two ``marks`` (each there once, the end after the
    start), or None."""
    start, end = marks
    if text.count(start) != 1 or text.count(end) != 1 or text.index(end) < text.index(start):
        return None
    first = text.index(start) + len(start)
    return first, text.index(end)


def write_between(path: str | os.PathLike, marks: tuple[str, str], part: str) -> bool:
    """Replace what lies between ``marks`` in the text file ``path`` by ``part``, the rest of
    the file untouched, the file written whole or not at all (and not at all where nothing
    changes); :class:`InputFileError` naming the file and the marks where they are not there
    once each, in order, and the file is left as it was.  Whether it was written."""
    text = Path(path).read_text(encoding="utf-8")
    span = span_between(text, marks)
    if span is None:
        raise InputFileError(f"{path}: no marks {marks[0]!r} ... {marks[1]!r} (each once, in "
                             "that order) to write between; the file is left as it is")
    if text[span[0]:span[1]] == part:
        return False
    write_text(path, text[:span[0]] + part + text[span[1]:])
    return True


def write_json(path: str | os.PathLike, value) -> None:
    write_text(path, json.dumps(value, indent=2, sort_keys=True, default=_to_builtin) + "\n")


def write_table(
    frame: pd.DataFrame,
    path: str | os.PathLike,
    *,
    columns: Mapping[str, str],
    config: Mapping | None = None,
    extra: Mapping[str, object] | None = None,
) -> None:
    """Write ``frame`` to Parquet at ``path`` with its provenance.

    ``columns`` maps each column name to its documentation and fixes the
    column order; a frame with other columns is refused.  ``config`` is the
    config section the table was computed from (stored with its hash and
    seed); ``machine`` names the processor, the instruction set XLA compiles for,
    the threads and the XLA flags (:func:`neurd.machine.cpu_description`); ``extra``
    adds further ``neurd.<key>`` entries (JSON-encoded).
    """
    if list(frame.columns) != list(columns):
        missing = [c for c in columns if c not in frame.columns]
        unexpected = [c for c in frame.columns if c not in columns]
        if missing or unexpected:
            raise ValueError(
                f"table {path}: columns do not match its documentation "
                f"(missing {missing}, unexpected {unexpected})"
            )
        frame = frame[list(columns)]
    table = pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False)
    metadata = dict(table.schema.metadata or {})
    entries = {"version": neurd.__version__, "columns": dict(columns),
               "machine": cpu_description()}
    if config is not None:
        entries["config"] = config
        entries["config_hash"] = config_hash(config)
        if "seed" in config:
            entries["seed"] = config["seed"]
    entries.update(extra or {})
    for key, value in entries.items():
        metadata[(METADATA_PREFIX + key).encode()] = canonical_json(value).encode()
    table = table.replace_schema_metadata(metadata)
    with atomic_path(path) as tmp:
        pq.write_table(table, tmp)


def read_metadata(path: str | os.PathLike) -> dict:
    """The ``neurd.*`` metadata of a table written by :func:`write_table`; a file that is no
    Parquet table (truncated, text) or whose metadata is not JSON is refused naming it."""
    try:
        raw = pq.read_schema(path).metadata or {}
        prefix = METADATA_PREFIX.encode()
        return {
            key[len(prefix):].decode(): json.loads(value)
            for key, value in raw.items()
            if key.startswith(prefix)
        }
    except FileNotFoundError:
        raise
    except (OSError, ValueError, pa.ArrowException) as error:
        raise InputFileError(f"{path} is not a Parquet table this project wrote "
                             f"({' '.join(str(error).split())})") from None


def tidy(
    axes: Sequence[Mapping[str, object]],
    values: Mapping[str, object],
    **constants,
) -> pd.DataFrame:
    """A long table from arrays on a grid: one row per cell, in C order.

    ``axes``: one mapping per array axis, from column name to that axis's
    coordinates (several columns may share an axis, e.g. iteration and the
    phase of each iteration); ``values``: column name -> array of the grid's
    shape; ``constants``: columns with one value for every row (listed first).
    The first axis varies slowest, as ``np.meshgrid(..., indexing="ij")``.
    """
    coords = [{name: np.asarray(c) for name, c in axis.items()} for axis in axes]
    shape = tuple(len(next(iter(axis.values()))) for axis in coords)
    columns: dict[str, object] = dict(constants)
    for i, axis in enumerate(coords):
        inner, outer = int(np.prod(shape[i + 1:])), int(np.prod(shape[:i]))
        for name, c in axis.items():
            if c.shape != (shape[i],):
                raise ValueError(f"column {name!r}: {c.shape[0]} coordinates on an axis of "
                                 f"length {shape[i]}")
            columns[name] = np.tile(np.repeat(c, inner), outer)
    for name, array in values.items():
        array = np.asarray(array)
        if array.shape != shape:
            raise ValueError(f"column {name!r}: shape {array.shape}, the grid is {shape}")
        columns[name] = array.reshape(-1)
    return pd.DataFrame(columns)
