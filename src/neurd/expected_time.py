"""``neurd expected-time``: how long ``make figures`` should take on this machine, said first.

``make figures`` runs for minutes on one machine and for three times as long on another
(the processor, and the instruction set XLA compiles for).  Before its first long job it
prints the time it expects here, from a probe of about fifteen seconds (:func:`probe`: a Leduc
learning cycle at 60 configurations, float32, and Leduc's tabular CFR, float64, each
compiled and timed) set against the same probe on the machines where the run was timed
whole (``bench/figures_time.json``, written by ``bench/time_figures.py``): each such
reference's time, scaled by how much slower or faster the probe runs here, its neural and
tabular parts each by the share of the run's CPU time they took there; the reference of the
same instruction set first.  The console's progress lines (each job's ETA) then correct it.

A reference is a run of the same config: matched by the hash of the config file's content
(:func:`config_digest`), not by its name, so a user's own ``default.yaml`` of other content
is priced by no run, and a copy of the project's under another name by the project's runs.
The time is advice: a file of references that cannot be read is named in a warning and no
time is expected, but ``make figures`` goes on.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from neurd import names
from neurd.configfile import read_config_file
from neurd.machine import cpu_description
from neurd.progress import progress_seconds
from neurd.tables import config_hash

log = logging.getLogger(__name__)

REFERENCES = Path("bench/figures_time.json")
PROBE_CONFIGURATIONS = 60  # 5 seeds x 6 entropy levels x 2 algorithms: a default-scale batch
PROBE_CYCLES = 20
PROBE_CFR_ITERATIONS = 50


def probe() -> dict[str, float]:
    """Seconds of the probe's two parts on this machine: ``neural`` (the learning program of
    Leduc at :data:`PROBE_CONFIGURATIONS` compiled, then :data:`PROBE_CYCLES` cycles) and
    ``tabular`` (Leduc's sequence form and :data:`PROBE_CFR_ITERATIONS` iterations of CFR
    with NeuRD, compiled and run, in float64); the game compiled once before either."""
    import jax

    from neurd import engine
    from neurd.neural import train

    compiled = engine.compile_game(names.GAMES["leduc"].string)
    start = time.perf_counter()
    spec = train.Spec()
    game = train.neural_game(compiled)
    per_seed = PROBE_CONFIGURATIONS // (6 * len(spec.algorithms))
    states, keys, etas = train.batch_inputs(spec, game, 0, "leduc", tuple(range(per_seed)),
                                            [0.0, 0.01, 0.03, 0.1, 0.3, 1.0])
    jax.block_until_ready(train.run_segment(spec, game, states, keys, etas, 0, PROBE_CYCLES,
                                            np.float32(1.0)))
    neural = time.perf_counter() - start
    start = time.perf_counter()
    jax.block_until_ready(engine.cfr(compiled, names.NEURD, 1.0,
                                     iterations=PROBE_CFR_ITERATIONS).cumulative_policy)
    return {"neural": round(neural, 3), "tabular": round(time.perf_counter() - start, 3)}


def estimate(here: Mapping[str, float], reference: Mapping) -> float:
    """Seconds ``make figures`` should take here from one reference run: its Snakemake wall
    time, its neural share scaled by the neural probe's ratio, the rest by the tabular one's."""
    share = float(reference["neural_share"])
    ratio = {k: float(here[k]) / float(reference["probe"][k]) for k in ("neural", "tabular")}
    return float(reference["snakemake_seconds"]) * (share * ratio["neural"]
                                                     + (1.0 - share) * ratio["tabular"])


class ReferencesUnreadable(ValueError):
    """The file of runs timed whole cannot be read or parsed; the message names it."""


def timed_runs(path: str | Path) -> list[dict]:
    """Every run recorded in ``path`` (``{"runs": [...]}``).  A file that is missing,
    unreadable, truncated or not such a list is :class:`ReferencesUnreadable`, one line naming
    it: taken for "no runs", it would hide a damaged file behind "no time is expected"."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as error:
        raise ReferencesUnreadable(f"{path} cannot be read ({error.strerror or error})") from None
    except ValueError as error:  # JSON's errors and UnicodeDecodeError
        reason = " ".join(str(error).split())
        raise ReferencesUnreadable(f"{path} is not JSON ({reason})") from None
    runs = data.get("runs") if isinstance(data, dict) else None
    if not isinstance(runs, list) or not all(isinstance(run, dict) for run in runs):
        raise ReferencesUnreadable(f'{path} holds no list of runs ({{"runs": [{{...}}]}})')
    return runs


def config_digest(config: str | Path) -> str:
    """The hash of config file ``config``'s content as read (:func:`neurd.tables.config_hash`
    of its mapping): what a run timed whole records of its config (``config_hash``)."""
    return config_hash(read_config_file(config))


def references(path: str | Path, config: str | Path) -> list[dict]:
    """The reference runs in ``path`` of config file ``config``: those recorded with the hash
    of its content (:func:`config_digest`), whatever its name; a run recorded without one
    prices nothing.  Raises :class:`ReferencesUnreadable` for a damaged ``path``."""
    runs = timed_runs(path)
    digest = config_digest(config)
    return [run for run in runs if run.get("config_hash") == digest]


def expectation(here: Mapping[str, float], runs: Sequence[Mapping], isa: str) -> str:
    """What ``make figures`` says first: the time it expects, from the references of this
    instruction set (of every one where none is of it)."""
    probed = [r for r in runs if r.get("probe")]
    mine = [r for r in probed if r.get("isa") == isa] or probed
    if not mine:
        return ("make figures: no run of this config has been timed whole "
                "(bench/time_figures.py): no time is expected")
    seconds = [estimate(here, r) for r in mine]
    low, high = min(seconds), max(seconds)
    said = _minutes(low) if math.isclose(low, high, rel_tol=0.1) else \
        f"{_minutes(low)} to {_minutes(high)}"
    basis = "; ".join(f"{named(r)}, {r['isa']}: {_minutes(float(r['snakemake_seconds']))}"
                      for r in mine)
    return (f"make figures: about {said} on this machine (its probe: neural "
            f"{here['neural']:.1f} s, tabular {here['tabular']:.1f} s; timed whole on {basis}); "
            "each job's progress line then says its own ETA")


def named(run: Mapping) -> str:
    """A timed run's processor as the tables name it: its model, and its family, model and
    stepping numbers where the run recorded them (``AMD EPYC (family 25 model 17 stepping
    1)``: one model name covers processors twice as fast as each other)."""
    numbers = run.get("processor_id")
    return f"{run['processor']} ({numbers})" if numbers else str(run["processor"])


def times_table(runs: Sequence[Mapping]) -> str:
    """The runs timed whole as docs/performance.md's table, the slowest first."""
    lines = ["| processor | instruction set (XLA) | Snakemake | venv and check | `make test` | "
             "date, revision | note |", "| --- | --- | ---: | ---: | ---: | --- | --- |"]
    for run in sorted(runs, key=lambda r: -float(r["snakemake_seconds"])):
        setup = float(run.get("venv_seconds") or 0) + float(run.get("check_seconds") or 0)
        test = run.get("test_seconds")
        lines.append(f"| {named(run)} | {run['isa']} | "
                     f"{_clock(float(run['snakemake_seconds']))} | {_clock(setup)} | "
                     f"{_clock(float(test)) if test else '-'} | {run['date']}, "
                     f"{str(run['revision'])[:7]} | {run.get('note', '')} |")
    return "\n".join(lines) + "\n"


TESTS_SLOWEST = 5  # the slowest tests of each part docs/performance.md lists


def tests_table(runs: Sequence[Mapping]) -> str:
    """The test suite's runs (``bench/tests_time.json``, written by ``bench/time_tests.py``)
    as docs/performance.md's table, the longest first: each part's time (``-``: not run) and
    its :data:`TESTS_SLOWEST` slowest tests."""
    def total(run):
        return sum(float(p["seconds"]) for p in run["parts"].values())

    def clock(part):
        return _clock(float(part["seconds"])) if part else "-"

    lines = ["| processor | instruction set (XLA) | `make test` | `make test-long` | slowest "
             "tests (seconds) | date, revision | note |",
             "| --- | --- | ---: | ---: | --- | --- | --- |"]
    for run in sorted(runs, key=lambda r: -total(r)):
        parts = run["parts"]
        slowest = "; ".join(
            f"{part}: " + ", ".join(f"`{test}` {seconds:.0f}"
                                    for seconds, _, test in parts[part]["slowest"][
                                        :TESTS_SLOWEST])
            for part in ("test", "test-long") if part in parts)
        lines.append(f"| {named(run)} | {run['isa']} | "
                     f"{clock(parts.get('test'))} | {clock(parts.get('test-long'))} | {slowest} | "
                     f"{run['date']}, {str(run['revision'])[:7]} | {run.get('note', '')} |")
    return "\n".join(lines) + "\n"


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(round(seconds)), 60)
    return f"{minutes} min {rest:02d} s"


def _minutes(seconds: float) -> str:
    minutes = seconds / 60.0
    return f"{minutes:.0f} min" if minutes >= 2 else f"{seconds:.0f} s"


def _step(args) -> None:
    progress_seconds()  # the progress lines said to follow: a bad interval refused before the probe
    try:
        runs = references(args.references, args.configfile)
    except ReferencesUnreadable as error:  # advice only: make figures goes on
        log.warning("make figures: %s: no time is expected", error)
        return
    cpu = cpu_description()
    if not runs:
        log.info("make figures: no run of a config of %s's content has been timed whole (%s):"
                 " no time is expected", args.configfile, args.references)
        return
    from neurd.neural.device import use_cores

    use_cores()  # as the neural jobs do
    log.info("%s", expectation(probe(), runs, cpu["isa"]))


def register(sub) -> None:
    """Add ``neurd expected-time`` to the command line."""
    p = sub.add_parser("expected-time", help="say how long make figures should take here, "
                       "from a probe of about fifteen seconds")
    p.add_argument("configfile", help="the config file of the run (its content is matched)")
    p.add_argument("--references", default=str(REFERENCES),
                   help="the runs timed whole (bench/figures_time.json)")
    p.set_defaults(func=_step)
