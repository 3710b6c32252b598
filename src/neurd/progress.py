"""Long jitted loops run in chunks, with progress reported between chunks.

A long computation is a ``lax.scan`` over steps (CFR checkpoints, neural
training chunks).  Logging from inside the scan (a host callback) would make
an accelerator stop and wait at every step; instead :func:`scan_in_chunks`
calls one jitted program per chunk of steps, which returns its metrics
stacked, and logs progress -- work done of the total, rate and time left --
on the host between chunks.  The chunks are padded to one length, so the
program is compiled once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import jax
import numpy as np


class Progress:
    """``label: done/total unit (x%), rate, elapsed, ETA`` lines on a logger."""

    def __init__(self, label: str, total: float, unit: str = "iterations",
                 log: logging.Logger | None = None):
        self.label, self.total, self.unit = label, float(total), unit
        self.log = log or logging.getLogger(__package__)
        self.start = time.perf_counter()

    def update(self, done: float, detail: str = "") -> None:
        elapsed = time.perf_counter() - self.start
        rate = done / elapsed if elapsed > 0 else float("nan")
        left = (self.total - done) / rate if done > 0 else float("nan")
        share = 100.0 * done / self.total if self.total else 100.0
        self.log.info("%s: %d/%d %s (%.0f%%), %.3g %s/s, %.1fs elapsed, ETA %.1fs%s",
                      self.label, done, self.total, self.unit, share, rate, self.unit,
                      elapsed, left, f"; {detail}" if detail else "")


def scan_in_chunks(
    run_chunk: Callable,
    carry,
    xs: np.ndarray,
    *,
    chunk_size: int,
    pad_value,
    on_chunk: Callable | None = None,
):
    """Run ``run_chunk(carry, xs[i:i + chunk_size]) -> (carry, ys)`` over all of ``xs``.

    ``run_chunk`` is a jitted ``lax.scan`` over the leading axis of its
    ``xs`` chunk.  The last chunk is padded with ``pad_value`` (a step that
    must leave ``carry`` unchanged, e.g. zero iterations), so every call has
    the same shapes.  After each chunk ``on_chunk(steps_done, ys)`` gets the
    chunk's metrics (padding removed) on the host.

    Returns the final carry and the metrics of every step, stacked
    (``ys[k]`` for step ``k``), as NumPy arrays.
    """
    xs = np.asarray(xs)
    count = len(xs)
    if count == 0 or chunk_size < 1:
        raise ValueError(f"need at least one step and chunk_size >= 1, got {count} steps, "
                         f"chunk_size {chunk_size}")
    padded = -(-count // chunk_size) * chunk_size
    xs = np.concatenate([xs, np.full((padded - count, *xs.shape[1:]), pad_value, xs.dtype)])
    outputs = []
    for start in range(0, padded, chunk_size):
        carry, ys = run_chunk(carry, xs[start:start + chunk_size])
        real = min(chunk_size, count - start)
        ys = jax.tree_util.tree_map(lambda y, n=real: np.asarray(y)[:n], ys)
        outputs.append(ys)
        if on_chunk is not None:
            on_chunk(start + real, ys)
    stacked = jax.tree_util.tree_map(lambda *parts: np.concatenate(parts), *outputs)
    return carry, stacked
