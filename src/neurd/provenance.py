"""Provenance of a pipeline run: code, packages, config, seeds and machine."""

from __future__ import annotations

import csv
import datetime as _dt
import importlib.metadata
import json
import os
import platform
from collections.abc import Mapping
from html import escape
from pathlib import Path

from neurd import __version__, games
from neurd.machine import cpu_description
from neurd.names import GAMES
from neurd.neural import runs, variants
from neurd.revision import git_revision
from neurd.stages import SECTIONS, snapshot
from neurd.tables import InputFileError, config_hash, write_text

PACKAGES = (
    __package__, "snakemake", "jax", "jaxlib", "open_spiel", "numpy", "scipy",
    "pandas", "pyarrow", "matplotlib", "seaborn", "mpltern", "pygments", "pyyaml",
)


def package_versions(names=PACKAGES) -> dict[str, str | None]:
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def cycle_variants(neural: Mapping | None = None) -> dict[str, str]:
    """``{game: variant}``: the learning cycle's variant the neural jobs of each game of a
    config's ``neural`` section run here by default, resolved (it depends on the game:
    :func:`neurd.neural.layouts.resolve`); without a section, the paper's games' with the
    learner's default spec."""
    from neurd.neural.train import Spec, neural_game
    from neurd.neural.visited import visited_share

    if neural is None:
        spec, strings = Spec(), {name: GAMES[name].string for name in GAMES}
    else:
        spec, strings = runs.spec(neural, "learned"), {
            name: neural["game_strings"][name] for name in neural["games"]}
    default = variants.parse(variants.DEFAULT_NAME)
    return {name: variants.resolved_name(default, visited_share(
        spec, neural_game(games.compile_game(string)))) for name, string in strings.items()}


def machine(neural: Mapping | None = None) -> dict[str, object]:
    """The machine: system, Python, JAX's backend and devices, the processor, the instruction
    set XLA compiles for, the threads, the XLA flags in force (:mod:`neurd.machine`), and the
    learning cycle's variant the neural jobs of each game of ``neural`` (a config's section)
    run here by default, resolved (:func:`cycle_variants`; every job's pieces also record
    their own)."""
    import jax

    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        **cpu_description(),
        "jax_backend": jax.default_backend(),
        "jax_devices": [str(d) for d in jax.devices()],
        "neural_cycle_variant": cycle_variants(neural),
    }


def runtimes(benchmarks: str | os.PathLike) -> list[dict[str, object]]:
    """Every step's wall time and peak memory, from Snakemake's ``benchmark:`` files."""
    rows = []
    for path in sorted(Path(benchmarks).glob("*.tsv")):
        try:
            with open(path, encoding="utf-8") as handle:
                record = next(csv.DictReader(handle, delimiter="\t"), None)
            if record:
                rows.append({"step": path.stem, "seconds": float(record["s"]),
                             "max_rss_mb": float(record["max_rss"])
                             if record.get("max_rss", "NA") != "NA" else None})
        except (OSError, UnicodeDecodeError, csv.Error, KeyError, TypeError,
                ValueError) as error:
            raise InputFileError(f"benchmark file {path} cannot be read as Snakemake's "
                                 f"benchmark table ({type(error).__name__}: {error}): delete "
                                 "it and rerun its step") from None
    return rows


def collect(config: Mapping, cwd: str | os.PathLike = ".",
            benchmarks: str | os.PathLike | None = None) -> dict[str, object]:
    """Everything needed to say how a set of results was made.

    ``version`` is the release of :mod:`neurd` (``neurd.__version__``, CITATION.cff's);
    ``config_hash`` is the hash of the whole validated config; ``section_hashes``
    those of its top-level sections, which is what each table's
    ``neurd.config_hash`` metadata records (a table is made from one section
    plus the seed, less the settings that change no number: :func:`neurd.stages.snapshot`).
    """
    return {
        "created_utc": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        "version": __version__,
        "git": git_revision(cwd),
        "packages": package_versions(),
        "config": config,
        "config_hash": config_hash(config),
        "section_hashes": {
            name: config_hash(snapshot(config, name)) for name in SECTIONS if name in config
        },
        "seed": config.get("seed"),
        "machine": machine(config.get("neural")),
        "runtimes": runtimes(benchmarks) if benchmarks is not None else [],
    }


def write_html(record: Mapping, path: str | os.PathLike) -> None:
    """Provenance as an HTML page for the report: code, packages, machine, config, runtimes."""
    def table(rows, header):
        head = "".join(f"<th>{escape(h)}</th>" for h in header)
        body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>"
                       for row in rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    git = record["git"]
    steps = record.get("runtimes", [])
    total = sum(r["seconds"] for r in steps)
    config, hashes = record["config"], record["section_hashes"]

    def folded(name, value, note=""):
        body = escape(json.dumps(value, indent=2, sort_keys=True))
        return (f"<details><summary><code>{escape(name)}</code>{escape(note)}</summary>"
                f"<pre>{body}</pre></details>")

    # The config last, folded: a section per line, opened on a click.
    sections = [folded(k, v, f" (hash {hashes[k]})" if k in hashes else "")
                for k, v in config.items() if isinstance(v, dict)]
    scalars = {k: v for k, v in config.items() if not isinstance(v, dict)}
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>Provenance</title>",
        "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;"
        "margin-bottom:1.5em}th,td{border:1px solid #ccc;padding:3px 8px;text-align:left}"
        "th{background:#f0f0f0}pre{background:#f7f7f7;padding:1em}"
        "details{margin:0.3em 0}summary{cursor:pointer}</style></head><body>",
        "<h1>Provenance</h1>",
        f"<p>Made {escape(str(record['created_utc']))} by neurd "
        f"{escape(str(record.get('version')))} at git revision "
        f"<code>{escape(str(git['commit']))}</code>"
        + (" (with uncommitted changes)" if git.get("dirty") else "") + ", scale "
        f"<b>{escape(str(config.get('scale')))}</b>, seed {record['seed']}, config hash "
        f"<code>{escape(str(record['config_hash']))}</code>. Every table's metadata records "
        "the hash of the config section it was computed from (below, with each section).</p>",
        "<p>On this page: <a href='#runtimes'>runtime of every step</a>, "
        "<a href='#packages'>packages</a>, <a href='#machine'>machine</a>, "
        "<a href='#config'>config</a>.</p>",
        f"<h2 id='runtimes'>Runtime of every step</h2><p>{len(steps)} steps, {total:.0f} s of "
        "wall time in all (Snakemake's benchmark files, <code>results/benchmarks/</code>).</p>",
        table([[r["step"], f"{r['seconds']:.1f}",
                "" if r["max_rss_mb"] is None else f"{r['max_rss_mb']:.0f}"] for r in steps],
              ["step", "wall time (s)", "peak memory (MB)"]),
        "<h2 id='packages'>Packages</h2>",
        table(sorted(record["packages"].items()), ["package", "version"]),
        "<h2 id='machine'>Machine</h2>",
        table(sorted((k, v) for k, v in record["machine"].items()), ["", ""]),
        "<h2 id='config'>Config</h2>",
        "<p>" + ", ".join(f"{escape(k)}: <code>{escape(str(v))}</code>"
                          for k, v in sorted(scalars.items())) + ". Each section folded "
        "(click to open), with the hash its tables record:</p>",
        *sections,
        folded("the whole config", config, f" (hash {record['config_hash']})"),
        "</body></html>",
    ]
    write_text(path, "\n".join(parts) + "\n")
