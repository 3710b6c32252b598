"""The whole pipeline at the smoke scale, end to end, in a temporary copy.

Checks every documented table (path and columns), every figure, the audit and
the provenance; that a finished run has nothing left to do; that `snakemake
--lint` is clean; and that a bad config is refused, naming the key, before any
job runs.
"""

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DEFAULT_RESULTS, copy_workflow, snakemake

from neurd.audit import COLUMNS as AUDIT_COLUMNS
from neurd.audit import VERDICTS as AUDIT_VERDICTS
from neurd.tables import read_metadata

ROOT = Path(__file__).resolve().parents[1]
SMOKE = "results/smoke"  # the smoke scale's results folder (the default's is results/)

# Documented tables: path in the results folder -> leading columns (a table may add more).
TABLES = {
    "matrix/regret_sweep.parquet": ["algorithm", "forfeit", "horizon", "step_size",
                                    "regret"],
    "matrix/regret_vs_horizon.parquet": ["algorithm", "forfeit", "horizon", "step_size",
                                         "regret"],
    "matrix/reward_readings.parquet": ["reading", "win", "loss", "algorithm", "forfeit",
                                       "horizon", "step_size", "regret"],
    "matrix/trajectories.parquet": ["algorithm", "round", "action", "logit", "probability"],
    "rps/nashconv_biased.parquet": ["algorithm", "trajectory", "iteration", "phase", "nu",
                                    "nash_conv"],
    "rps/nashconv_nonstationary.parquet": ["algorithm", "trajectory", "iteration", "phase",
                                           "nu", "nash_conv"],
    "rps/nashconv_biased_ci.parquet": ["algorithm", "iteration", "phase", "mean", "ci_low",
                                       "ci_high"],
    "rps/nashconv_nonstationary_ci.parquet": ["algorithm", "iteration", "phase", "mean",
                                              "ci_low", "ci_high"],
    "rps/nonstationary_readings.parquet": ["restart_average", "algorithm", "iteration",
                                           "phase", "nu", "mean_nash_conv"],
    "rps/flows.parquet": ["panel", "algorithm", "nu", "start", "time", "series", "rock",
                          "paper", "scissors"],
    "rps/vector_field.parquet": ["nu", "algorithm", "rock", "paper", "scissors", "d_rock",
                                 "d_paper", "d_scissors", "speed"],
    "rps/speed_ratio.parquet": ["nu", "rock", "paper", "scissors", "speed_rd", "speed_pg",
                                "ratio"],
    "rps/nash_sets.parquet": ["nu", "action", "closed_form", "lower", "upper", "unique"],
}
TABULAR_COLUMNS = ["game", "algorithm", "step_size", "iteration", "nash_conv"]
CHECK_COLUMNS = ["game", "algorithm", "iteration", "nash_conv", "nash_conv_drawn",
                 "policy_difference"]
for game in ("kuhn", "leduc"):  # the smoke scale's games
    for name in ("nashconv", "sweep", "reference_cfr_rm", "reference_cfr_plus"):
        TABLES[f"tabular/{game}/{name}.parquet"] = TABULAR_COLUMNS
    for name in ("openspiel_cfr_rm", "openspiel_cfr_plus"):
        TABLES[f"tabular/{game}/{name}.parquet"] = CHECK_COLUMNS
NEURAL_COLUMNS = {
    "nashconv": ["game", "algorithm", "entropy", "seed", "iteration", "phase", "nash_conv"],
    "policies": ["game", "algorithm", "entropy", "seed", "iteration", "phase", "infostate",
                 "action", "probability"],
    "diagnostics": ["game", "critic", "algorithm", "entropy", "seed", "iteration", "phase",
                    "nash_conv", "critic_rmse", "threshold_blocked", "critic_loss"],
    "summary": ["game", "algorithm", "entropy", "seed", "final_nash_conv", "average_nash_conv"],
    "nashconv_ci": ["game", "algorithm", "entropy", "iteration", "phase", "mean", "ci_low",
                    "ci_high"],
}
for name, columns in NEURAL_COLUMNS.items():  # the smoke scale's game, then all games
    TABLES[f"neural/kuhn/{name}.parquet"] = columns
    if name != "policies":
        TABLES[f"neural/{name}.parquet"] = columns
# Columns that are legitimately all missing: reference solvers have no step size.
ALL_NAN_ALLOWED = {"step_size", "diverged_at"}  # diverged_at: null where no run diverged
SECTION_OF = {"matrix/": "matrix", "rps/": "rps", "tabular/": "tabular", "neural/": "neural"}
FIGURES = ["fig1", "fig2", "fig3", "fig4a", "fig5", "fig4b", "fig4b_kuhn", "fig6",
           "fig6_smoke"]  # fig6_smoke: Fig 6 drawn from the tracked publication published/smoke

pytestmark = pytest.mark.workflow


def test_smoke_scale_leaves_the_default_results_alone(smoke_run):
    """Every file of the smoke run is under results/smoke/; the default's are untouched."""
    results = smoke_run / "results"
    written = {str(p.relative_to(results)) for p in results.rglob("*") if p.is_file()}
    assert written - {f for f in written if f.startswith("smoke/")} == set(DEFAULT_RESULTS)
    for path, content in DEFAULT_RESULTS.items():
        assert (results / path).read_bytes() == content


def _planned_files(workdir: Path, config: str) -> set[str]:
    """Every output and log file of the DAG a config makes (Snakemake's --summary)."""
    # neural.allow_cpu: the paper scale's DAG is planned here, not run (no GPU needed)
    summary = snakemake(workdir, "--summary", "--configfile", config,
                         "--config", "neural={allow_cpu: true}")
    assert summary.returncode == 0, summary.stderr[-3000:]
    rows = [line.split("\t") for line in summary.stdout.splitlines()[1:] if "\t" in line]
    logs = [log for row in rows for log in row[3].split(",") if log != "-"]
    return {row[0] for row in rows} | set(logs)


def test_scales_never_share_a_file(tmp_path):
    """The shipped scales' DAGs: default in results/ (its documented layout), every other
    scale in results/<scale>/; no file is planned by two scales."""
    from neurd.stages import RESULT_ENTRIES, SECTIONS

    workdir = copy_workflow(tmp_path)
    planned = {scale: _planned_files(workdir, f"workflow/config/{scale}.yaml")
               for scale in ("default", "smoke", "paper")}
    for scale in ("smoke", "paper"):
        assert planned[scale] and all(f.startswith(f"results/{scale}/") for f in planned[scale])
        assert not planned[scale] & planned["default"]
    assert not planned["smoke"] & planned["paper"]
    tops = {Path(f).parts[1] for f in planned["default"]}
    assert tops <= set(SECTIONS) | set(RESULT_ENTRIES) and "figures" in tops


# results/README.md's table of files: `<name>` is a wildcard, `{a,b}` alternatives, and a
# cell `x.png`, `.pdf` names two files.  Not targets of `snakemake`: the report (`make
# report`), the per-step logs and benchmark files (written beside each job, not outputs),
# the readings study (`make readings`) and its paper-length study (`make readings-paper`),
# the zoo (`make zoo`).
NOT_TARGETS = ("report.html", "logs/", "benchmarks/", "readings/", "readings-paper/", "zoo/")


def _documented_rows() -> list[tuple[dict[str, re.Pattern], str]]:
    """Each row of results/README.md's table: its files (name -> pattern), its description."""
    text = (ROOT / "results/README.md").read_text()
    rows = []
    for paths, description in re.findall(r"^\| (`[^|]+`) \| [^|]* \| (.*) \|$", text, re.M):
        items = re.findall(r"`([^`]+)`", paths)
        items = [items[i - 1].rsplit(".", 1)[0] + item if item.startswith(".") else item
                 for i, item in enumerate(items)]
        patterns = {}
        for item in items:
            regex = re.sub(r"<[a-z_]+>", "[^/]+", re.escape(item).replace(r"\<", "<")
                           .replace(r"\>", ">"))
            regex = re.sub(r"\\\{([^}]*)\\\}",
                           lambda m: "(" + m.group(1).replace(",", "|") + ")", regex)
            patterns[item] = re.compile(regex)
        rows.append((patterns, description))
    return rows


def _documented_patterns() -> dict[str, re.Pattern]:
    return {item: pattern for patterns, _ in _documented_rows()
            for item, pattern in patterns.items()}


def test_results_readme_documents_every_file_of_the_dag_and_no_other(tmp_path):
    """Every file of the default scale's DAG is in results/README.md's table, and every
    entry of that table (but the report, logs and benchmarks) is made by the DAG -- the
    default scale's, or the smoke scale's for what only a publication makes (the default's,
    published/paper, needs a GPU run)."""
    patterns = _documented_patterns()
    assert len(patterns) > 30
    workdir = copy_workflow(tmp_path)
    planned = {f.removeprefix("results/") for f in _planned_files(workdir,
                                                                   "workflow/config/default.yaml")}
    smoke = {f.removeprefix(f"{SMOKE}/") for f in _planned_files(workdir,
                                                                  "workflow/config/smoke.yaml")}
    targets = {f for f in planned if not f.startswith(NOT_TARGETS)}
    undocumented = [f for f in targets if not any(p.fullmatch(f) for p in patterns.values())]
    assert not undocumented, undocumented
    unmade = [name for name, p in patterns.items()
              if not name.startswith(NOT_TARGETS) and not any(p.fullmatch(f) for f in planned)
              and not any(p.fullmatch(f) for f in smoke if f.startswith("published/"))]
    assert not unmade, unmade
    undocumented = [f for f in smoke if not f.startswith(NOT_TARGETS)
                    and not any(p.fullmatch(f) for p in patterns.values())]
    assert not undocumented, undocumented


def test_a_missing_documented_file_is_made_again(smoke_run, tmp_path):
    """Delete one file of every documented kind from a finished run: Snakemake plans to
    make each again (they are all targets of the default rule; a missing intermediate
    whose consumers are up to date is otherwise left missing)."""
    workdir = tmp_path / "copy"
    shutil.copytree(smoke_run, workdir, symlinks=True)
    patterns = _documented_patterns()
    files = sorted(str(p.relative_to(workdir / SMOKE)) for p in (workdir / SMOKE).rglob("*")
                   if p.is_file())
    deleted = set()
    for name, pattern in patterns.items():
        match = next((f for f in files if pattern.fullmatch(f)), None)
        if match is not None and not name.startswith(NOT_TARGETS):
            (workdir / SMOKE / match).unlink()
            deleted.add(f"{SMOKE}/{match}")
    assert len(deleted) > 30
    summary = snakemake(workdir, "--summary", "--configfile", "workflow/config/smoke.yaml")
    plan = {row[0]: row[5] for row in (line.split("\t") for line in summary.stdout.splitlines())
            if len(row) > 5}
    assert {f: plan.get(f) for f in deleted} == {f: "update pending" for f in deleted}


def test_settings_that_change_no_number_rerun_no_job(smoke_run, tmp_path):
    """neural.checkpoint_minutes, throughput, gpus_per_job and allow_cpu are out of the
    snapshot: a finished run with them changed has nothing to recompute (only the
    whole-config snapshot and the provenance, which record the config, are rewritten)."""
    (tmp_path / "settings.yaml").write_text(
        "neural:\n  checkpoint_minutes: 0.5\n  throughput: {kuhn: 7}\n  gpus_per_job: 1\n"
        "  allow_cpu: true\n")
    dry = snakemake(smoke_run, "-n", "--cores", "2", "--configfile", "workflow/config/smoke.yaml",
                     str(tmp_path / "settings.yaml"))
    assert dry.returncode == 0, dry.stderr[-3000:]
    jobs = set(re.findall(r"^rule (\w+):", dry.stdout, re.M))
    assert jobs <= {"config_snapshot", "provenance", "all"}, jobs
    snapshots = re.findall(r"^rule config_snapshot:\n\s+output: (\S+)$", dry.stdout, re.M)
    assert snapshots == [f"{SMOKE}/config/all.json"], snapshots


def test_the_readings_study_gives_every_cell_a_number_and_a_verdict(smoke_run, tmp_path):
    """`snakemake readings` at a tiny study (Kuhn, 2 seeds, 3 entropy levels -- the grid
    check's margin needs a level inside the grid --, 3 x 40 iterations): a grid of
    Fig 6's claims under the default and two readings, every cell with a verdict and a
    finite number, the same for the readings Figs 1, 2 and 5 compute, the heat map, and the
    collapse table; nothing of `rule all` reruns."""
    workdir = tmp_path / "copy"
    shutil.copytree(smoke_run, workdir, symlinks=True)
    (workdir / "tiny.yaml").write_text(
        "readings:\n"
        "  neural: {phase_iterations: {kuhn: 40}, seeds: 2, seeds_per_job: 2,\n"
        "           seeds_per_batch: 2, checkpoints: {geometric: 2, linear: 3},\n"
        "           exact_critic_games: [], entropies: [0.0, 0.1, 1.0],\n"
        "           logits_log: {seeds: [1], entropies: [0.0]}}\n"
        "  variants:\n"
        "    raw_logits: {neurd_logits: raw}\n"
        "    exact_critic: {critic: exact}\n")
    run = snakemake(workdir, "readings", "--cores", "2", "--configfile",
                     "workflow/config/smoke.yaml", "tiny.yaml")
    assert run.returncode == 0, run.stderr[-5000:]
    assert "rule neural_run:" not in run.stdout + run.stderr
    grid = pd.read_parquet(workdir / SMOKE / "readings/grid.parquet")
    readings = ["default", "raw_logits", "exact_critic"]
    assert set(grid.reading) == set(readings)
    claims = grid.claim.unique()
    assert len(claims) >= 5 and len(grid) == len(claims) * len(readings)
    assert set(grid.verdict) <= set(AUDIT_VERDICTS)
    assert np.isfinite(grid.value).all()
    text = (workdir / SMOKE / "readings/grid.md").read_text()
    assert all(r in text for r in readings) and "n/a" not in text
    png = (workdir / SMOKE / "readings/grid.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 20_000
    other = pd.read_parquet(workdir / SMOKE / "readings/other_figures.parquet")
    assert set(other.figure) == {"fig1", "fig2", "fig5"} and len(other) == 6
    assert set(other.role) == {"default", "alternative"} and np.isfinite(other.value).all()
    collapse = pd.read_parquet(workdir / SMOKE / "readings/collapse.parquet")
    assert set(collapse.reading) == set(readings)
    assert collapse.policy_entropy.between(0, np.log(2) + 1e-9).all()
    logits = pd.read_parquet(workdir / SMOKE / "readings/logits.parquet")  # seed 1, eta 0
    assert set(logits.reading) == set(readings) and set(logits.seed) == {1}
    assert set(logits.entropy) == {0.0} and set(logits.algorithm) == {"neurd", "spg"}
    assert (logits.states == 12).all() and logits.at_beta.between(0, 1).all()
    job = pd.read_parquet(workdir / SMOKE / "readings/default/neural/kuhn/jobs/"
                          "learned_0_logits.parquet")
    assert len(job) == 24 * len(logits[logits.reading == "default"])  # Kuhn: 24 legal pairs
    assert np.isfinite(job.centred_logit).all()
    # a missing file of the study, intermediate or not, is made again by `snakemake readings`
    deleted = [f"{SMOKE}/readings/raw_logits/neural/kuhn/{name}" for name in
               ("policies.parquet", "jobs/learned_0_logits.parquet")]
    deleted += [f"{SMOKE}/readings/exact_critic/neural/diagnostics.parquet"]
    for name in deleted:
        (workdir / name).unlink()
    summary = snakemake(workdir, "readings", "--summary", "--configfile",
                         "workflow/config/smoke.yaml", "tiny.yaml")
    plan = {row[0]: row[5] for row in (line.split("\t") for line in summary.stdout.splitlines())
            if len(row) > 5}
    assert {f: plan.get(f) for f in deleted} == {f: "update pending" for f in deleted}


def test_a_scale_cannot_take_a_name_of_the_default_layout(tmp_path):
    workdir = copy_workflow(tmp_path)
    (workdir / "bad.yaml").write_text("scale: figures\n")
    run = snakemake(workdir, "--cores", "1", "--configfile", "bad.yaml", "-n")
    assert run.returncode != 0 and "scale: 'figures' is taken" in run.stdout + run.stderr


@pytest.mark.parametrize("table", sorted(TABLES))
def test_documented_tables(smoke_run, table):
    path = smoke_run / SMOKE / table
    frame = pd.read_parquet(path)
    assert list(frame.columns[: len(TABLES[table])]) == TABLES[table]
    all_missing = set(frame.columns[frame.isna().all()])
    assert len(frame) > 0 and all_missing <= ALL_NAN_ALLOWED, all_missing
    meta = read_metadata(path)
    assert set(meta["columns"]) == set(frame.columns)
    provenance = json.loads((smoke_run / SMOKE / "provenance.json").read_text())
    section = next(s for prefix, s in SECTION_OF.items() if table.startswith(prefix))
    assert meta["config_hash"] == provenance["section_hashes"][section]
    assert meta["seed"] == provenance["seed"]


def test_results_readme_says_what_each_table_holds(smoke_run):
    """results/README.md against each table of the smoke run, where both say something: a
    row's column list is its table's columns (documented in its metadata; an audit file's
    header),
    its rewards "win W, loss L" are the table's and its config's, its "N% bootstrap CI"
    the confidence of the config the table records."""
    root = smoke_run / SMOKE
    files = sorted(str(p.relative_to(root)) for p in root.rglob("*")
                   if p.suffix in (".parquet", ".csv"))
    compared = set()
    for patterns, description in _documented_rows():
        found = [f for f in files if any(p.fullmatch(f) for p in patterns.values())]
        lists = [group.split(", ") for group in re.findall(r"`([a-z_]+(?:, [a-z_]+)+)`",
                                                           description)]
        rewards = {(float(w), float(v)) for w, v in
                   re.findall(r"win (-?\d+(?:\.\d+)?), loss (-?\d+(?:\.\d+)?)", description)}
        level = re.findall(r"(\d+)% bootstrap CI", description)
        single = len(patterns) == 1 and "{" not in next(iter(patterns))
        for name in found:
            if name.endswith(".csv"):
                columns = list(pd.read_csv(root / name, nrows=0).columns)
                meta = {}
            else:  # the file's columns, in order, each documented in its metadata
                import pyarrow.parquet as pq

                meta = read_metadata(root / name)
                columns = pq.read_schema(root / name).names
                assert set(columns) == set(meta["columns"]), name
            if single and lists:  # a row of one table: its columns
                assert columns in lists, (name, columns, lists)
                compared.add(f"{name}: columns")
            if rewards and {"win", "loss"} <= set(columns):
                table = pd.read_parquet(root / name)
                pairs = set(zip(table.win.astype(float), table.loss.astype(float)))
                assert pairs == rewards, (name, pairs, rewards)
                stated = {(float(r["win"]), float(r["loss"]))
                          for r in meta["config"]["alternative_rewards"]}
                assert stated == rewards, (name, stated, rewards)
                compared.add(f"{name}: rewards")
            if level and "bootstrap" in meta.get("config", {}):
                assert [round(100 * meta["config"]["bootstrap"]["confidence"])] == \
                    [int(x) for x in level], (name, level)
                compared.add(f"{name}: confidence")
    assert {"matrix/reward_readings.parquet: rewards", "audit/fig1.csv: columns",
            "rps/nashconv_biased_ci.parquet: confidence",
            "neural/kuhn/nashconv.parquet: columns"} <= compared, sorted(compared)


@pytest.mark.parametrize("figure", FIGURES)
def test_figures_and_their_audit(smoke_run, figure):
    png = smoke_run / SMOKE / f"figures/{figure}.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert (smoke_run / SMOKE / f"figures/{figure}.pdf").read_bytes()[:5] == b"%PDF-"
    claims = pd.read_csv(smoke_run / SMOKE / f"audit/{figure}.csv")
    assert list(claims.columns) == list(AUDIT_COLUMNS)
    assert len(claims) >= 3 and set(claims.figure) == {figure}
    assert set(claims.verdict) <= set(AUDIT_VERDICTS)


def test_every_verdict_of_the_run_follows_from_its_row(smoke_run):
    """Re-derived from each audit row's check columns alone (test_audit_verdicts.rederive,
    written apart from neurd.audit)."""
    from test_audit_verdicts import rederive_all

    assert rederive_all(smoke_run / SMOKE / "audit") == sum(
        len(pd.read_csv(smoke_run / SMOKE / f"audit/{figure}.csv")) for figure in FIGURES)


def test_no_step_records_a_negative_runtime(smoke_run):
    """Every job's start (Snakemake's start marker) is before its end (its output's mtime):
    the report's runtime chart draws them on a log axis."""
    records = [json.loads(p.read_text()) for p in (smoke_run / ".snakemake/metadata").iterdir()]
    assert len(records) > 40
    short = [(r["rule"], r["endtime"] - r["starttime"]) for r in records
             if not r["endtime"] > r["starttime"]]
    assert not short, short


def test_neural_policies_table_recomputes_the_nash_conv_with_openspiel(smoke_run):
    """Every information state, legal actions only, rows summing to 1; OpenSpiel's NashConv of
    a run's end-of-phase policy, from the table alone, is the NashConv the stage recorded (in
    the odd phases, where the game is OpenSpiel's own rather than its negation)."""
    import pyspiel

    policies = pd.read_parquet(smoke_run / SMOKE / "neural/kuhn/policies.parquet")
    nashconv = pd.read_parquet(smoke_run / SMOKE / "neural/kuhn/nashconv.parquet")
    game = pyspiel.load_game("kuhn_poker")
    keys = ["algorithm", "entropy", "seed", "phase"]
    sums = policies.groupby([*keys, "infostate"]).probability.sum()
    assert np.allclose(sums, 1.0, rtol=0, atol=1e-12)
    assert policies.groupby(keys).infostate.nunique().eq(12).all()
    odd = policies[policies.phase % 2 == 1]
    assert len(odd.groupby(keys)) >= 8
    for (algorithm, entropy, seed, phase), rows in odd.groupby(keys):
        table = {s: list(zip(r.action, r.probability)) for s, r in rows.groupby("infostate")}
        value = pyspiel.nash_conv(game, pyspiel.TabularPolicy(table))
        recorded = nashconv[(nashconv.algorithm == algorithm) & (nashconv.entropy == entropy)
                            & (nashconv.seed == seed) & (nashconv.phase == phase)
                            & (nashconv.iteration == rows.iteration.iloc[0])].nash_conv
        assert len(recorded) == 1 and value == pytest.approx(recorded.iloc[0], abs=1e-9)


def test_claims_md_gathers_every_figure(smoke_run):
    text = (smoke_run / SMOKE / "audit/claims.md").read_text()
    for figure in FIGURES:
        assert f"## {figure}" in text


def test_provenance(smoke_run):
    record = json.loads((smoke_run / SMOKE / "provenance.json").read_text())
    assert record["config"]["scale"] == "smoke"
    assert record["packages"]["snakemake"].startswith("9.")
    assert record["machine"]["cpu_count"] >= 1


def test_finished_run_has_nothing_to_do(smoke_run):
    dry = snakemake(smoke_run, "--cores", "2", "--configfile", "workflow/config/smoke.yaml", "-n")
    assert dry.returncode == 0 and "Nothing to be done" in dry.stdout + dry.stderr


def test_steps_are_deterministic(smoke_run, tmp_path):
    """Rerunning a step by hand from its config snapshot gives identical numbers."""
    out = {name: tmp_path / f"{name}.parquet" for name in ("sweep", "tuned", "readings")}
    subprocess.run(
        [sys.executable, "-m", "neurd.cli", "matrix-sweep", "--config",
         str(smoke_run / SMOKE / "config/matrix.json"),
         *(f"--{k}={v}" for k, v in out.items())],
        check=True, capture_output=True,
    )
    pd.testing.assert_frame_equal(
        pd.read_parquet(out["sweep"]),
        pd.read_parquet(smoke_run / SMOKE / "matrix/regret_sweep.parquet"),
    )


def test_lint_is_clean(tmp_path):
    workdir = copy_workflow(tmp_path)
    lint = snakemake(workdir, "--lint")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    assert "Lints for" not in lint.stdout + lint.stderr


@pytest.mark.parametrize("bad, named", [
    ("matrix:\n  horizon_list: [10]\n", "'horizon_list' was unexpected"),
    ("matrix:\n  horizons: [10, -5, 100]\n", "matrix.horizons[1]"),
    ("matrix:\n  step_sizes: {min: 0.0}\n", "matrix.step_sizes.min"),
    ("matrix:\n  step_sizes: {min: 10.0, max: 1.0}\n", "matrix.step_sizes.max"),
    ("rps:\n  dt: 0\n", "rps.dt"),
    ("rps:\n  bootstrap: {method: bca}\n", "rps.bootstrap.method"),
    ("rps:\n  portraits: {starts: [[0.5, 0.3, 0.3]]}\n", "rps.portraits.starts[0]"),
    ("tabular:\n  step_sizes: [1.0, -0.5]\n", "tabular.step_sizes[1]"),
    ("tabular:\n  figure_game: chess\n", "tabular.figure_game"),
    ("tabular:\n  games: [kuhn, poker9]\n", "tabular.games"),
])
def test_bad_config_is_refused_before_any_job(tmp_path, bad, named):
    workdir = copy_workflow(tmp_path)
    (workdir / "bad.yaml").write_text(bad)
    run = snakemake(workdir, "--cores", "1", "--configfile", "bad.yaml")
    assert run.returncode != 0
    assert named in run.stdout + run.stderr
    assert not (workdir / "results").exists()


@pytest.fixture(scope="module")
def report(smoke_run):
    made = snakemake(smoke_run, "--configfile", "workflow/config/smoke.yaml",
                      "--report", f"{SMOKE}/report.html")
    assert made.returncode == 0, made.stderr[-3000:]
    return smoke_run / SMOKE / "report.html"


# The report's row of each figure, in the paper's order (workflow/rules/figures.smk).
FIGURE_LABELS = {"fig1": "Fig 1", "fig2": "Fig 2", "fig3": "Fig 3", "fig4a": "Fig 4a",
                 "fig4b": "Fig 4b", "fig4b_kuhn": "Fig 4b, Kuhn poker", "fig5": "Fig 5",
                 "fig6": "Fig 6", "fig6_smoke": "Fig 6, published/smoke"}


def test_html_report(report):
    html = report.read_text(errors="replace")
    for figure in FIGURES:
        assert f"{figure}.png" in html
    assert "claims.html" in html and "provenance.html" in html
    # captions name the tables of this scale's folder
    assert f"{SMOKE}/matrix/regret_vs_horizon.parquet" in html.replace("\\/", "/")
    assert sorted(FIGURE_LABELS) == sorted(FIGURES)


CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")


@pytest.fixture(scope="module")
def browser():
    """Debian's headless Chromium, driven by Selenium (installed by .ci/run)."""
    webdriver = pytest.importorskip("selenium.webdriver",
                                    reason="selenium is not installed (make test installs it)")
    if not (CHROMIUM and CHROMEDRIVER):
        pytest.skip("Debian's chromium and chromium-driver are not installed (.ci/run "
                    "installs them)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(20)
    yield driver
    driver.quit()


def _menu(browser, label):
    """Click the report menu's entry ``label`` (its label in a span: the landing page's text
    links the categories too), where it is rather than at screen coordinates, which the
    page's late layout may have moved onto another entry."""
    from selenium.webdriver.common.by import By

    entry = browser.find_element(By.XPATH, f"//a[span[normalize-space(text())='{label}']]")
    browser.execute_script("arguments[0].click()", entry)


def _open(browser, report, category, cell):
    """Open the report, go to a result category and view the result whose row has a cell
    ``cell`` (its path, or its first label)."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(report.as_uri())
    _menu(browser, category)
    try:
        row = WebDriverWait(browser, 60).until(lambda b: b.find_element(
            By.XPATH, f"//tr[td[normalize-space(text())='{cell}']]"))
    except TimeoutException:
        shown = browser.find_element(By.TAG_NAME, "body").text[:2000]
        raise AssertionError(f"{category}: no row {cell!r}; the page shows:\n{shown}") from None
    browser.execute_script("arguments[0].click()", row.find_element(By.XPATH,
                                                                     ".//a[@iconname='eye']"))


def _not_blank(png: bytes) -> float:
    import io

    from PIL import Image

    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    return float(pixels.std())


# The columns of a chart's canvas that hold a mark (vega's default blue, well above red; the
# axes, grid and text are grey or black). A log axis over a negative runtime still draws
# every mark, all in the few columns at its left end.
MARK_COLUMNS = """
const canvas = document.querySelector('#' + arguments[0] + ' canvas');
const data = canvas.getContext('2d').getImageData(0, 0, canvas.width, canvas.height).data;
const columns = new Set();
for (let i = 0; i < data.length; i += 4) {
  if (data[i + 3] > 0 && data[i + 2] > data[i] + 40) columns.add((i / 4) % canvas.width);
}
return columns.size;
"""


def test_report_renders_every_figure_the_audit_table_and_provenance(browser, report, tmp_path):
    """In a real browser: the landing page says what the workflow is; every figure shows as
    an image, in the paper's order; the claims audit as a table with a row per claim and
    every verdict defined; provenance with the runtime of every step and the config folded;
    the runtime chart draws every job along its axis; screenshots are not blank."""
    from selenium.webdriver.common.by import By

    browser.get(report.as_uri())
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "regenerated from scratch, at the smoke scale" in body
    _menu(browser, "Figures")
    cells = [c.text for c in browser.find_elements(By.XPATH, "//tbody/tr/td[1]")]
    assert cells == list(FIGURE_LABELS.values())
    for figure in FIGURES:
        _open(browser, report, "Figures", FIGURE_LABELS[figure])
        image = browser.find_element(By.XPATH, "//img[starts-with(@src, 'data:image/png')]")
        assert browser.execute_script("return arguments[0].naturalWidth", image) > 500
    _open(browser, report, "Audit", f"{SMOKE}/audit/claims.html")
    browser.switch_to.frame(browser.find_element(By.TAG_NAME, "iframe"))
    rows = browser.find_elements(By.CSS_SELECTOR, "table.claims tbody tr")
    audits = [pd.read_csv(report.parent / f"audit/{figure}.csv") for figure in FIGURES]
    assert len(rows) == sum(len(a) for a in audits)
    headings = {h.text for h in browser.find_elements(By.TAG_NAME, "h2")}
    assert headings == set(FIGURES)
    defined = [d.text for d in browser.find_elements(By.CSS_SELECTOR, "#verdicts dt")]
    assert defined == list(AUDIT_VERDICTS)
    browser.switch_to.default_content()
    shot = browser.get_screenshot_as_png()
    (tmp_path / "claims.png").write_bytes(shot)
    assert _not_blank(shot) > 10
    _open(browser, report, "Provenance", f"{SMOKE}/provenance.html")
    browser.switch_to.frame(browser.find_element(By.TAG_NAME, "iframe"))
    steps = browser.find_elements(By.XPATH, "//h2[@id='runtimes']/following::table[1]//tbody/tr")
    benchmarks = list((report.parent / "benchmarks").glob("*.tsv"))
    assert len(steps) == len(benchmarks) > 25
    assert browser.find_element(By.TAG_NAME, "h2").text == "Runtime of every step"
    folded = browser.find_elements(By.CSS_SELECTOR, "#config ~ details")
    assert len(folded) >= 5 and not [d for d in folded if d.get_attribute("open")]
    assert not browser.find_element(By.CSS_SELECTOR, "#config ~ details pre").is_displayed()
    browser.switch_to.default_content()
    browser.get(report.as_uri())
    _menu(browser, "Statistics")
    browser.find_element(By.CSS_SELECTOR, "#runtimes canvas")
    runtimes = browser.execute_script("return runtimes_spec.data.values")
    assert len(runtimes) > 40 and min(r["runtime"] for r in runtimes) > 0
    assert browser.execute_script(MARK_COLUMNS, "runtimes") > 30  # spread along the axis


def test_publish_a_finished_run_and_refuse_a_half_finished_one(smoke_run, tmp_path):
    """`neurd publish` makes a publication of the smoke run (each job a seed block) that every
    reader accepts and the workflow draws; a run with a job unfinished (its curves missing, or
    its checkpoint folder still there) is refused, naming the file, and nothing is written."""
    from neurd import publication

    workdir = tmp_path / "copy"
    shutil.copytree(smoke_run, workdir, symlinks=True)
    shutil.rmtree(workdir / "published/smoke")

    def publish():
        return subprocess.run([str(Path(sys.executable).parent / "neurd"), "publish",
                               "workflow/config/smoke.yaml"], cwd=workdir, capture_output=True,
                              text=True)

    jobs = workdir / SMOKE / "neural/kuhn/jobs"
    (jobs / "learned_1_checkpoint").mkdir()
    refused = publish()
    assert refused.returncode == 2 and "learned_1_curves.parquet: the job's checkpoint folder " \
        "is still there" in refused.stderr
    (jobs / "learned_1_checkpoint").rmdir()
    (jobs / "learned_1_curves.parquet").rename(tmp_path / "curves.parquet")
    refused = publish()
    assert refused.returncode == 2 and "learned_1_curves.parquet is missing" in refused.stderr
    assert not (workdir / "published/smoke").exists()
    (tmp_path / "curves.parquet").rename(jobs / "learned_1_curves.parquet")
    done = publish()
    assert done.returncode == 0, done.stderr[-3000:]
    folder = workdir / "published/smoke"
    manifest, cfg = publication.check(folder)
    publication.check_content(folder, manifest, cfg)
    assert manifest["games"]["kuhn"]["seeds"] == [0, 1]
    for critic in ("learned", "exact"):
        for chunk in (0, 1):
            block = folder / publication.block_folder("kuhn", f"{critic}_s{chunk}-{chunk}")
            assert (block / "curves.parquet").read_bytes() == \
                (jobs / f"{critic}_{chunk}_curves.parquet").read_bytes()
    dry = snakemake(workdir, "-n", "--configfile", "workflow/config/smoke.yaml")
    assert dry.returncode == 0, dry.stderr[-3000:]
