"""Every figure is byte-identical, PNG and PDF, whenever it is drawn from the same tables.

The tables are made once per session by the pipeline's own command-line steps, with the
arguments the rules give them (``workflow/rules/*.smk``), run in this process (one import of
JAX and OpenSpiel, not one per step) on a scale below the smoke scale: the smoke config with
:data:`TINY` merged over it, validated as the Snakefile validates it.  The figures' claims
need not hold at that scale; the figures only have to be drawn from real tables.

Every figure module (``neurd.cli.FIGURES``) is then drawn as ``neurd figure`` draws it: twice
in this process, in separate calls, the second under other matplotlib settings, and once in a
fresh Python process with another hash seed that draws the figures in reverse order.  The
three PNGs must be equal byte for byte, and so must the three PDFs; a draw must leave the
global random generators of NumPy and Python as it found them.

Each figure, drawn from the same tables, must also say what it is: its scale on the figure
itself, its legends inside their axes and off the data, one symbol per quantity (eta the
step size, alpha Fig 6's entropy level), no band called a confidence interval over fewer
samples than ``stats.MIN_CI_SAMPLES``.
"""

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import matplotlib
import numpy as np
import pytest

from neurd.cli import FIGURES
from neurd.stages import SECTIONS

ROOT = Path(__file__).resolve().parents[1]
# Merged over workflow/config/smoke.yaml: every figure, one game each for Figs 4b and 6, short
# runs (the neural stage's two seeds run as one job, with the learned critic only).
TINY = {
    "scale": "figure_test",
    "matrix": {"step_sizes": {"num": 21}},
    "rps": {"trajectories": 5, "biased": {"iterations": 200},
            "nonstationary": {"phase_iterations": 50},
            "portraits": {"average_time": 150.0, "samples": 60, "field_resolution": 6,
                          "ratio_resolution": 15}},
    "tabular": {"games": ["kuhn"], "figure_game": "kuhn", "iterations": 40, "checkpoints": 8,
                "reference_solvers": ["cfr_plus"]},
    "neural": {"games": ["kuhn"], "exact_critic_games": [], "seeds": 2, "seeds_per_job": 2,
               "seeds_per_batch": 2, "phase_iterations": {"kuhn": 40},
               "checkpoints": {"geometric": 2, "linear": 3}},
    "published": {"folder": None},  # no publication: its figure is fig6's module on tables
}
# Settings an earlier figure or a caller could leave behind; a figure must not depend on them.
OTHER_SETTINGS = {"axes.titleweight": "bold", "font.size": 14.0, "lines.linewidth": 3.0,
                  "axes.prop_cycle": matplotlib.cycler(color=["#000000"]),
                  "savefig.dpi": 72}


def _steps(res: str, config) -> list[list[str]]:
    """The rules' commands (less ``neurd``) for every table the figures read, in DAG order;
    neural-run without the checkpoint folder the rule gives it (a run of seconds)."""
    from neurd.neural.runs import jobs as neural_jobs

    cfg = {section: f"{res}/config/{section}.json" for section in SECTIONS}
    steps = [
        ["matrix-sweep", "--config", cfg["matrix"], "--sweep", f"{res}/matrix/regret_sweep.parquet",
         "--tuned", f"{res}/matrix/regret_vs_horizon.parquet",
         "--readings", f"{res}/matrix/reward_readings.parquet"],
        ["matrix-trajectories", "--config", cfg["matrix"],
         "--out", f"{res}/matrix/trajectories.parquet"],
        ["rps-nash", "--config", cfg["rps"], "--out", f"{res}/rps/nash_sets.parquet"],
        ["rps-portraits", "--config", cfg["rps"], "--flows", f"{res}/rps/flows.parquet",
         "--field", f"{res}/rps/vector_field.parquet", "--speed", f"{res}/rps/speed_ratio.parquet"],
        ["rps-biased", "--config", cfg["rps"], "--out", f"{res}/rps/nashconv_biased.parquet"],
        ["rps-nonstationary", "--config", cfg["rps"],
         "--out", f"{res}/rps/nashconv_nonstationary.parquet",
         "--readings", f"{res}/rps/nonstationary_readings.parquet"],
        *[["rps-ci", "--config", cfg["rps"], "--table", f"{res}/rps/nashconv_{experiment}.parquet",
           "--out", f"{res}/rps/nashconv_{experiment}_ci.parquet"]
          for experiment in ("biased", "nonstationary")],
    ]
    tabular = config["tabular"]
    for game in tabular["games"]:
        table = f"{res}/tabular/{game}"
        references = [f"{table}/reference_{solver}.parquet"
                      for solver in tabular["reference_solvers"]]
        steps += [
            ["compile-game", "--config", cfg["tabular"], "--game", game,
             "--out", f"{res}/games/{game}.npz"],
            ["tabular-sweep", "--config", cfg["tabular"], "--game", game,
             "--compiled", f"{res}/games/{game}.npz", "--out", f"{table}/sweep.parquet"],
            ["tabular-reference", "--config", cfg["tabular"], "--game", game,
             "--compiled", f"{res}/games/{game}.npz", "--out", *references],
            *[["tabular-openspiel-check", "--config", cfg["tabular"], "--game", game,
               "--solver", solver, "--compiled", f"{res}/games/{game}.npz",
               "--reference", path, "--out", f"{table}/openspiel_{solver}.parquet"]
              for solver, path in zip(tabular["reference_solvers"], references)],
            ["tabular-table", "--config", cfg["tabular"], "--game", game,
             "--sweep", f"{table}/sweep.parquet", "--reference", *references,
             "--checks", *[f"{table}/openspiel_{solver}.parquet"
                           for solver in tabular["reference_solvers"]],
             "--out", f"{table}/nashconv.parquet"],
        ]
    neural = config["neural"]
    runs = neural_jobs(neural)
    for game in neural["games"]:
        folder = f"{res}/neural/{game}"
        mine = [(critic, chunk) for g, critic, chunk in runs if g == game]
        steps += [
            ["neural-game", "--config", cfg["neural"], "--game", game,
             "--out", f"{folder}/game.npz"],
            *[["neural-run", "--config", cfg["neural"], "--game", game, "--critic", critic,
               "--chunk", str(chunk), "--compiled", f"{folder}/game.npz",
               "--curves", f"{folder}/jobs/{critic}_{chunk}_curves.parquet",
               "--policies", f"{folder}/jobs/{critic}_{chunk}_policies.parquet"]
              for critic, chunk in mine],
            ["neural-table", "--config", cfg["neural"], "--game", game,
             "--compiled", f"{folder}/game.npz",
             "--curves", *[f"{folder}/jobs/{c}_{k}_curves.parquet" for c, k in mine],
             "--policies", *[f"{folder}/jobs/{c}_{k}_policies.parquet" for c, k in mine
                             if c == "learned"],
             "--nashconv", f"{folder}/nashconv.parquet",
             "--policies-out", f"{folder}/policies.parquet",
             "--diagnostics", f"{folder}/diagnostics.parquet",
             "--summary", f"{folder}/summary.parquet", "--ci", f"{folder}/nashconv_ci.parquet"],
        ]
    combine = ["neural-combine", "--config", cfg["neural"], "--out-dir", f"{res}/neural"]
    for name in ("nashconv", "diagnostics", "summary", "nashconv_ci"):
        combine += [f"--{name}", *[f"{res}/neural/{g}/{name}.parquet" for g in neural["games"]]]
    return [*steps, combine]
    return steps


class Tables:
    """The session's tables and, per figure, the ``neurd figure`` arguments that draw it."""

    def __init__(self, folder: Path):
        from neurd.stages import figures, load_config, results_root, snapshot
        from neurd.tables import write_json

        self.folder = folder
        (folder / "tiny.json").write_text(json.dumps(TINY))
        config = load_config([ROOT / "workflow/config/smoke.yaml", folder / "tiny.json"], ROOT)
        res = str(folder / results_root(config))
        for section in SECTIONS:  # as the config_snapshot rule writes them
            write_json(f"{res}/config/{section}.json", snapshot(config, section))
        self.steps = _steps(res, config)
        self.jobs = {job.name: job for job in figures(config)}
        self.res = res

    def make(self) -> None:
        from neurd.cli import build_parser

        parser = build_parser()
        environment = dict(os.environ)  # neural-run sets XLA_FLAGS for its backend
        try:
            for argv in self.steps:
                args = parser.parse_args(argv)
                args.func(args)
        finally:
            os.environ.clear()
            os.environ.update(environment)

    def figure_args(self, name: str, out: Path) -> list[str]:
        """``neurd figure`` as the figure rules call it (workflow/rules/figures.smk)."""
        job = self.jobs[name]
        return ["figure", job.module, "--name", job.name, "--scale", TINY["scale"],
                "--config", str(self.folder / job.config),
                *[f"--input={table}={self.folder / path}" for table, path in job.inputs.items()],
                "--png", str(out / f"{name}.png"), "--pdf", str(out / f"{name}.pdf"),
                "--audit", str(out / f"{name}.csv")]


@pytest.fixture(scope="session")
def figure_tables(tmp_path_factory) -> Tables:
    tables = Tables(tmp_path_factory.mktemp("figure_tables"))
    tables.make()
    return tables


def _digests(out: Path, name: str) -> dict[str, str]:
    return {ext: hashlib.sha256((out / f"{name}.{ext}").read_bytes()).hexdigest()
            for ext in ("png", "pdf")}


# A fresh interpreter draws every figure with `neurd figure`'s own entry point.
FRESH = """
import json, sys
from neurd.cli import main
for argv in json.load(sys.stdin):
    if main(argv) != 0:
        sys.exit(f"neurd {' '.join(argv)} failed")
"""


@pytest.fixture(scope="module")
def fresh_draws(figure_tables, tmp_path_factory):
    """Started at once, on the other core, while this process draws; waited for per figure."""
    out = tmp_path_factory.mktemp("fresh")
    names = list(reversed(figure_tables.jobs))
    env = dict(os.environ, PYTHONHASHSEED="2" if os.environ.get("PYTHONHASHSEED") == "1" else "1")
    (out / "argv.json").write_text(json.dumps([figure_tables.figure_args(n, out) for n in names]))
    log = out / "log.txt"
    with open(out / "argv.json") as stdin, open(log, "w") as stderr:
        process = subprocess.Popen([sys.executable, "-c", FRESH], stdin=stdin,
                                   stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    done = {}

    def draw(name: str) -> dict[str, str]:
        if not done:
            assert process.wait(timeout=600) == 0, log.read_text()[-5000:]
            done.update({n: _digests(out, n) for n in names})
        return done[name]

    yield draw
    if process.poll() is None:
        process.kill()
        process.wait()


def _global_states() -> tuple:
    state = np.random.get_state()
    return (state[0], state[1].tobytes(), *state[2:]), random.getstate()


def _draw(tables: Tables, name: str, out: Path) -> dict:
    """Draw one figure in this process: the digests of its PNG and PDF, and under "global"
    which of NumPy's and Python's global random generators the drawing moved on."""
    from neurd.cli import build_parser

    out.mkdir(exist_ok=True)
    args = build_parser().parse_args(tables.figure_args(name, out))
    before = _global_states()
    args.func(args)
    moved = [which for which, a, b in zip(("NumPy's", "Python's"), before, _global_states())
             if a != b]
    return {**_digests(out, name), "global": moved}


@pytest.fixture(scope="module")
def first_draws(figure_tables, tmp_path_factory):
    """Each figure's first draw in this process, drawn when first asked for."""
    out, done = tmp_path_factory.mktemp("first"), {}

    def draw(name: str) -> dict[str, str]:
        if name not in done:
            done[name] = _draw(figure_tables, name, out)
        return done[name]

    return draw


def _names(tables: Tables, module: str) -> list[str]:
    names = [name for name, job in tables.jobs.items() if job.module == module]
    assert names, f"the test's config draws no figure of module {module}"
    return names


def test_every_figure_module_is_drawn(figure_tables):
    assert sorted({job.module for job in figure_tables.jobs.values()}) == sorted(FIGURES)


@pytest.mark.parametrize("module", FIGURES)
def test_figure_is_byte_identical_when_drawn_again(figure_tables, first_draws, fresh_draws,
                                                   module, tmp_path):
    """A second call, under other matplotlib settings, writes the same bytes (meanwhile a
    fresh process draws every figure: fresh_draws starts it)."""
    for name in _names(figure_tables, module):
        first = first_draws(name)
        with matplotlib.rc_context(OTHER_SETTINGS):
            second = _draw(figure_tables, name, tmp_path)
        for ext in ("png", "pdf"):
            assert second[ext] == first[ext], f"{name}.{ext} differs between two draws"
        # Same bytes, yet a global generator moved on: its draws are the caller's to seed.
        moved = sorted(set(first["global"] + second["global"]))
        assert not moved, f"{name} draws from {' and '.join(moved)} global random generator"


@pytest.mark.parametrize("module", FIGURES)
def test_figure_is_byte_identical_in_a_fresh_process(figure_tables, first_draws, fresh_draws,
                                                     module):
    """The fresh process (another hash seed, the figures in reverse order) writes the same
    bytes as this one."""
    for name in _names(figure_tables, module):
        for ext in ("png", "pdf"):
            assert fresh_draws(name)[ext] == first_draws(name)[ext], \
                f"{name}.{ext} differs between this process and a fresh one"


# --- what each figure says ------------------------------------------------------------------


@pytest.fixture(scope="module")
def drawn(figure_tables):
    """Every figure as ``neurd figure`` makes it (the figure object, before saving) and its
    claims: name -> (figure, claims)."""
    import importlib

    import matplotlib.pyplot as plt

    from neurd.config import load_snapshot
    from neurd.precision import float64
    from neurd.tables import read_table

    done = {}
    for name, job in figure_tables.jobs.items():
        module = importlib.import_module(f"neurd.figures.{job.module}")
        tables = {t: read_table(figure_tables.folder / path) for t, path in job.inputs.items()}
        with float64():
            done[name] = module.make(tables, load_snapshot(figure_tables.folder / job.config),
                                     name, scale=TINY["scale"])
    yield done
    for fig, _ in done.values():
        plt.close(fig)


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(lambda a: hasattr(a, "get_text")) if t.get_text()]


def test_every_figure_says_its_scale_on_itself(drawn):
    from neurd.figures import style

    for name, (fig, _) in drawn.items():
        notes = [t.get_text() for t in fig.texts if t.get_gid() == style.SCALE_GID]
        assert len(notes) == 1, name
        if name.startswith("fig6"):
            assert notes[0] == ("Kuhn poker: figure_test scale: 40 of 0.33e6 iterations per "
                                "phase, 2 of 40 seeds, provisional"), notes[0]
        else:
            assert notes[0].startswith("figure_test scale: ") and len(notes[0]) > 40, notes[0]
    assert "5 of the paper's 100 starts" in drawn["fig4a"][0].texts[0].get_text()


def _inside(points, box) -> bool:
    import numpy as np

    points = np.asarray(points, dtype=float).reshape(-1, 2)
    return bool(np.any((points[:, 0] > box.x0) & (points[:, 0] < box.x1)
                       & (points[:, 1] > box.y0) & (points[:, 1] < box.y1)))


def _dense(vertices, steps: int = 40):
    """Points along a polyline, ``steps`` per segment (a segment may cross a box with both
    ends outside it)."""
    import numpy as np

    vertices = np.asarray(vertices, dtype=float)
    vertices = vertices[np.isfinite(vertices).all(axis=1)]
    if len(vertices) < 2:
        return vertices
    t = np.linspace(0, 1, steps)[:, None, None]
    return (vertices[:-1] + t * (vertices[1:] - vertices[:-1])).reshape(-1, 2)


def _legend_covers(ax, legend) -> list[str]:
    """What of the axes' data the legend's box covers: lines (but phase lines), bands,
    boxes and markers, sampled apart from the figure code's own placement."""
    import numpy as np
    from matplotlib.collections import PathCollection

    renderer = ax.figure.canvas.get_renderer()
    box = legend.get_window_extent(renderer)
    grid = np.stack(np.meshgrid(np.linspace(box.x0, box.x1, 12), np.linspace(box.y0, box.y1, 6)),
                    axis=-1).reshape(-1, 2)
    found = []
    for line in ax.lines:
        if line.get_gid() != "phase-line" and line.get_visible():
            path = line.get_transform().transform_path(line.get_path())
            if _inside(_dense(path.vertices), box):
                found.append(f"line {line.get_label()}")
    for collection in ax.collections:
        if isinstance(collection, PathCollection):
            points = collection.get_offset_transform().transform(collection.get_offsets())
            if _inside(points, box):
                found.append("markers")
            continue
        for path in collection.get_paths():
            path = collection.get_transform().transform_path(path)
            if _inside(_dense(path.vertices), box) or path.contains_points(grid).any():
                found.append("band")
    for patch in ax.patches:
        path = patch.get_transform().transform_path(patch.get_path())
        if _inside(_dense(path.vertices), box) or path.contains_points(grid).any():
            found.append("patch")
    return found


def test_legends_sit_inside_their_axes_off_the_data(drawn):
    checked = 0
    for name, (fig, _) in drawn.items():
        fig.canvas.draw()
        for ax in fig.axes:
            legend = ax.get_legend()
            if legend is None:
                continue
            box = legend.get_window_extent(fig.canvas.get_renderer())
            frame = ax.get_window_extent(fig.canvas.get_renderer())
            assert frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 \
                and box.y1 <= frame.y1, f"{name}: a legend leaves its axes"
            assert not _legend_covers(ax, legend), (name, ax.get_title(),
                                                    _legend_covers(ax, legend))
            checked += 1
    assert checked >= 8  # figs 1 (2), 2, 4a, 4b (2), 5, 6


def test_one_symbol_per_quantity(drawn):
    """eta is the step size (Figs 1, 2, 4b), alpha Fig 6's entropy level: Fig 6 says no
    eta, in its figure or its audit rows, and no other figure uses alpha."""
    for name, (fig, claims) in drawn.items():
        texts = _texts(fig)
        if name.startswith("fig6"):
            assert not [t for t in texts if "eta" in t.replace("beta", "")], name
            assert not [c.measured for c in claims if " eta " in c.measured], name
            assert any(r"$\alpha$" in t for t in texts)
        else:
            assert not [t for t in texts if "alpha" in t], name
    assert any(r"step size $\eta$" in t for t in _texts(drawn["fig2"][0]))


def test_fig1_legend_speaks_words_not_config_keys(drawn):
    fig, _ = drawn["fig1"]
    labels = [t.get_text() for ax in fig.axes if ax.get_legend()
              for t in ax.get_legend().get_texts()]
    assert "faded: rewards win 1, loss -1 (another reading)" in labels
    assert not [label for label in labels if "_" in label], labels


def test_too_few_seeds_are_drawn_not_called_a_confidence_interval(drawn, figure_tables):
    """The tiny tables hold 2 seeds: Fig 6 draws each seed and says there is no CI; Fig 4a
    from 5 starts has its band, from 3 it would not."""
    from matplotlib.collections import PolyCollection

    from neurd import stats
    from neurd.config import load_snapshot
    from neurd.figures import fig4a
    from neurd.tables import read_table

    fig, _ = drawn["fig6"]
    top = fig.axes[0]
    assert "mean of 2 seeds, thin: each seed (< 5 seeds: no CI)" in top.get_title()
    assert not [c for c in top.collections if isinstance(c, PolyCollection)]
    assert len([line for line in top.lines if line.get_gid() != "phase-line"]) == 2 + 2 * 2
    assert stats.MIN_CI_SAMPLES == 5
    job = figure_tables.jobs["fig4a"]
    ci = read_table(figure_tables.folder / job.inputs["ci"])
    cfg = load_snapshot(figure_tables.folder / job.config)
    for n, band in ((5, True), (3, False)):
        fig = fig4a.plot(ci, cfg, n, "figure_test")
        ax = fig.axes[0]
        assert bool([c for c in ax.collections if isinstance(c, PolyCollection)]) == band
        assert ("95% bootstrap CI" in ax.get_title()) == band
        assert ("no CI: 3 starts are too few (< 5)" in ax.get_title()) == (not band)


def test_the_neural_tables_name_the_variant_and_the_device_their_jobs_ran(figure_tables):
    """Every derived neural table (per game and combined) carries, in its metadata, the cycle
    variants the jobs' pieces ran (resolved: never "default" or "auto") and their devices
    (on a CPU the processor with its instruction set)."""
    from neurd.machine import cpu_description
    from neurd.tables import read_metadata

    cpu = cpu_description()
    paths = sorted(Path(figure_tables.res, "neural").glob("*.parquet")) + sorted(
        Path(figure_tables.res, "neural").glob("*/nashconv*.parquet"))
    assert paths
    for path in paths:
        meta = read_metadata(path)
        assert meta["cycle_variants"] and not any(
            v == "default" or v.startswith("auto.") for v in meta["cycle_variants"]), path
        assert meta["devices"] == [f"{cpu['processor']}, {cpu['isa']}"], path
        assert meta["machine"]["processor"] == cpu["processor"]


def _data_extent(ax, axis: str):
    """The finite extent of the data drawn in data coordinates on ``axis`` ('x' or 'y'):
    lines (but marks drawn across the axes, as phase lines), bands and patches."""
    import numpy as np

    column = 0 if axis == "x" else 1
    values = []
    for line in ax.lines:
        if line.get_visible() and line.get_gid() != "phase-line" \
                and line.get_transform() == ax.transData:
            values.append(np.asarray(line.get_xydata(), dtype=float)[:, column])
    for item in [*ax.collections, *ax.patches]:
        if not item.get_visible() or item.get_transform() != ax.transData:
            continue
        paths = item.get_paths() if hasattr(item, "get_paths") else [item.get_path()]
        for path in paths:
            values.append(np.asarray(path.vertices, dtype=float)[:, column])
        if hasattr(item, "get_offsets") and item.get_offset_transform() == ax.transData:
            values.append(np.asarray(item.get_offsets(), dtype=float).reshape(-1, 2)[:, column])
    values = np.concatenate(values) if values else np.array([])
    log = (ax.get_xscale() if axis == "x" else ax.get_yscale()) == "log"
    values = values[np.isfinite(values) & ((values > 0) if log else True)]
    return (values.min(), values.max(), log) if len(values) else None


def test_every_axis_holds_its_data_within_a_factor_of_two(drawn):
    """No axis spans much more than its data (Fig 4b's once ran to about 300 for data at most
    4.75): a log axis's limits each within a factor of about two of its data's ends, a
    linear one's data filling at least half of it."""

    checked = 0
    for name, (fig, _) in drawn.items():
        fig.canvas.draw()
        for ax in fig.axes:
            for axis in ("x", "y"):
                extent = _data_extent(ax, axis)
                if extent is None:
                    continue
                low, high, log = extent
                lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
                if high - low <= 1e-12 * max(abs(high), 1.0):  # one value: nothing to fill
                    continue
                where = (name, ax.get_title(), axis, (lo, hi), (low, high))
                if log:  # each limit within a factor of about two of the data's end there
                    assert hi <= 2.2 * min(high, hi) and max(low, lo) <= 2.2 * lo, where
                else:  # the data fill at least half the axis
                    assert min(hi, high) - max(lo, low) >= (hi - lo) / 2.2, where
                checked += 1
    assert checked >= 20


@pytest.mark.parametrize("scale", ["log", "linear"])
def test_a_legend_with_no_free_place_widens_its_axis_at_most_twofold(scale):
    """Axes full of lines leave a legend no free place: the axis gains headroom, to at most
    twice its top (log) or its span (linear) (compounding steps once took Fig 4b's log axis
    from 5 to about 300), and the legend takes the place that covers least."""
    import matplotlib.pyplot as plt
    import numpy as np

    from neurd.figures import style

    style.setup()
    fig, ax = plt.subplots(figsize=(4, 3))
    x = np.linspace(1, 100, 200)
    for level in np.geomspace(0.01, 5, 40) if scale == "log" else np.linspace(0, 5, 40):
        ax.plot(x, np.full_like(x, level) * (1 + 0.3 * np.sin(x / 7)), color="0.5")
    ax.set_yscale(scale)
    for k in range(6):
        ax.plot([], [], label=f"series {k}")
    fig.tight_layout()
    bottom, top = ax.get_ylim()
    style.place_legend(ax)
    new_bottom, new_top = ax.get_ylim()
    assert new_bottom == bottom
    if scale == "log":
        assert new_top <= 2.0 * top * (1 + 1e-9)
    else:
        assert new_top - bottom <= 2.0 * (top - bottom) + 1e-9
    plt.close(fig)
