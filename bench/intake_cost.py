"""What ``neurd published-add`` spends checking one paper-scale seed block, on this machine.

Before a block is published its first cycles are run again in its own batches and the exact
NashConv of its published policies at every phase end is recomputed
(:mod:`neurd.publication.intake`).
This times both on a block of the paper config (``workflow/config/paper.yaml``): Goofspiel,
seeds 0-19 in one batch of 20, every algorithm and entropy level (240 configurations,
networks [128], batches of 4 and 256 episodes), 3 phases; its published policies are each
algorithm's best level (2 x 20 seeds x 3 phases = 120 policies).  The checks cost the same
whatever the block's numbers, so the block's tables here are placeholders on its exact
checkpoint grid (uniform policies, NashConv 0): what is timed is the recomputation, not the
verdict.  CPU time is the process's user + system time (every thread of XLA's).

    JAX_PLATFORMS=cpu python bench/intake_cost.py [--out intake_cost.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from _machine import describe  # noqa: E402

from neurd import games  # noqa: E402
from neurd.neural.plan import checkpoint_grid  # noqa: E402
from neurd.publication import intake  # noqa: E402
from neurd.stages import load_config, snapshot  # noqa: E402

GAME, BLOCK = "goofspiel", "learned_s0-19"


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _placeholders(cfg, compiled):
    """A block's curves (its exact checkpoint grid) and published policies (uniform)."""
    iterations, phases = checkpoint_grid(
        int(cfg["phase_iterations"][GAME]), int(cfg["phases"]),
        int(cfg["checkpoints"]["geometric"]), int(cfg["checkpoints"]["linear"]),
        int(cfg["critic_updates_per_policy_update"]))
    runs = [(a, float(e), s) for a in cfg["algorithms"] for e in cfg["entropies"]
            for s in range(20)]
    curves = pd.DataFrame([(a, e, s, int(i), int(p), 0.0) for a, e, s in runs
                           for i, p in zip(iterations, phases)],
                          columns=["algorithm", "entropy", "seed", "iteration", "phase",
                                   "nash_conv"])
    rows, cols = np.nonzero(compiled.infostate_legal)
    counts = compiled.infostate_legal.sum(axis=1)
    length = int(cfg["phase_iterations"][GAME])
    policies = pd.DataFrame(
        [(a, 0.0, s, phase, phase * length, compiled.infostate_string[r], int(c),
          1.0 / counts[r]) for a in cfg["algorithms"] for s in range(20)
         for phase in range(1, int(cfg["phases"]) + 1) for r, c in zip(rows, cols)],
        columns=["algorithm", "entropy", "seed", "phase", "iteration", "infostate", "action",
                 "probability"])
    return curves, policies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="also write the figures as JSON here")
    args = parser.parse_args()
    config = load_config([str(ROOT / "workflow/config/paper.yaml")], ROOT, games=False)
    cfg = snapshot(config, "neural")
    compiled = games.compile_configured(GAME, cfg["game_strings"],
                                        cfg.get("expected_infostates"), "neural")
    curves, policies = _placeholders(cfg, compiled)
    out = {"block": f"{GAME} {BLOCK}", "configurations": len(cfg["algorithms"])
           * len(cfg["entropies"]) * 20, "machine": describe(["jax", "jaxlib"])}
    for name, step in (
            ("first_cycles", lambda: intake.reproduce_block(
                cfg, GAME, BLOCK, [list(range(20))], curves, compiled)),
            ("phase_ends", lambda: intake.phase_end_block(cfg, GAME, BLOCK, policies, curves,
                                                         compiled))):
        wall, cpu = time.perf_counter(), _cpu()
        found = step()
        out[name] = {"values": len(found), "wall_seconds": round(time.perf_counter() - wall, 1),
                     "cpu_seconds": round(_cpu() - cpu, 1)}
        print(name, out[name], flush=True)
    out["load_average"] = os.getloadavg()
    # what the block cost to make: its configuration-iterations at the paper config's assumed
    # GPU throughput (configuration-iterations per second, neural.throughput)
    work = out["configurations"] * int(cfg["phase_iterations"][GAME]) * int(cfg["phases"])
    out["block_gpu_minutes_at_assumed_throughput"] = round(
        work / float(config["neural"]["throughput"][GAME]) / 60, 1)
    text = json.dumps(out, indent=1)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
