# Shared definitions: how rules call the package, the results folder, the figure list, the
# wildcards' constraints and the rules' input functions.
import json
import os
import shutil
import sys

from neurd.figures import report_label
from neurd.games import FORMAT_VERSION as GAME_FORMAT_VERSION
from neurd.names import REFERENCE_SOLVERS
from neurd.pipeline.neural import SETTINGS as NEURAL_SETTINGS
from neurd.neural.runs import main_critic
from neurd.pipeline.neural_resources import job_runtime_minutes
from neurd.pipeline.readings import select_jobs, reading_sections
from neurd.pipeline.tabular import (
    check_runtime_minutes,
    reference_runtime_minutes,
    sweep_runtime_minutes,
)
from neurd.pipeline.zoo import runtime_minutes as zoo_runtime_minutes
from neurd.stages import SECTIONS, figures, results_root, snapshot


# Rules call the package's command-line steps (`neurd <step>`).  When Snakemake
# runs from a virtual environment that is not activated, put that
# environment's scripts on PATH so jobs find the same `neurd`.
envvars:
    "PATH",


if shutil.which("neurd") is None:
    search_path = os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])
    os.environ["PATH"] = search_path

CONDA_ENV = "../envs/neurd.yaml"

# Every path of every job is under the scale's results folder --
# results/ for the default scale, results/<scale>/ for any other, so running one
# scale never replaces or mixes another's files.
RESULTS = results_root(config)


def res(path):
    """``path`` (relative, wildcards kept) under this scale's results folder."""
    return f"{RESULTS}/{path}"


# Every paper figure the config makes (from the stage registry): name -> job
# (its module in neurd.figures, config section and input tables).  Each writes
# <results>/figures/<name>.png|pdf and <results>/audit/<name>.csv.
FIGURE_JOBS = {job.name: job for job in figures(config)}
FIGURES = list(FIGURE_JOBS)
FIGURE_FILES = expand(res("figures/{figure}.{ext}"), figure=FIGURES, ext=["png", "pdf"])

# Every file results/README.md documents, added by each rules file: all targets of
# `rule all`, so a documented file that is missing is made again (Snakemake does not
# remake a missing intermediate file whose consumers are up to date).
DOCUMENTED = []


# The console shows each long job's progress (rate, ETA) from its log, every
# $NEURD_PROGRESS_SECONDS seconds (default 30; 0: never); the logs keep every line.
onstart:
    from neurd.progress import watch_logs

    watch_logs(res("logs"))


# The readings study's readings (readings.smk), each a neural section of its own.
READINGS = {
    name: {"seed": config["seed"], **section} for name, section in reading_sections(config).items()
}
READING_NAMES = list(READINGS)


# Every wildcard that means one thing in every rule.  Two are constrained by the rules
# themselves: {game}, to the games of the rule's own stage (the config's neural, tabular or
# zoo games), and {figure}, to the figures of the rule's module (figures.smk: one rule per
# figure module).
wildcard_constraints:
    section="|".join(["all", *SECTIONS]),
    reading="|".join(READING_NAMES),
    critic="learned|exact",
    chunk=r"\d+",
    experiment="biased|nonstationary",
    solver="|".join(REFERENCE_SOLVERS),


# --- input functions (and the other functions of a job's wildcards) ---------------------


def section_snapshot(wildcards):
    """The config_snapshot rule's JSON: the whole config, or a section's snapshot."""
    cfg = config if wildcards.section == "all" else snapshot(config, wildcards.section)
    return json.dumps(cfg, sort_keys=True)


def neural_section(wildcards):
    """The neural section a neural job runs: the config's, or its reading's."""
    return READINGS[wildcards.reading] if hasattr(wildcards, "reading") else config["neural"]


def neural_priority(wildcards):
    """Fig 6's jobs first (the longest chains), the largest game's first."""
    return PRIORITY_NEURAL + job_runtime_minutes(neural_section(wildcards), wildcards.game)


def neural_runtime(wildcards):
    """A neural job's requested runtime (minutes)."""
    return job_runtime_minutes(neural_section(wildcards), wildcards.game)


def neural_gpus(wildcards):
    """The GPUs a neural job asks for (its section's neural.gpus_per_job)."""
    return neural_section(wildcards)["gpus_per_job"]


def _neural_job_files(wildcards, kind, main_only):
    """A game's jobs' ``kind`` files (``curves``, ``policies``), of its neural section's
    main critic only where ``main_only``, under the config's or the reading's folder."""
    cfg = neural_section(wildcards)
    if hasattr(wildcards, "reading"):
        folder, jobs = f"readings/{wildcards.reading}/neural", READING_JOBS[wildcards.reading]
    else:
        folder, jobs = "neural", NEURAL_JOBS
    critic = main_critic(cfg) if main_only else None
    return [
        res(f"{folder}/{g}/jobs/{c}_{k}_{kind}.parquet")
        for g, c, k in select_jobs(jobs, wildcards.game, critic)
    ]


def neural_curves(wildcards):
    """neural_table's (and readings_table's) input: every job's curves of the game."""
    return _neural_job_files(wildcards, "curves", main_only=False)


def neural_policies(wildcards):
    """neural_table's (and readings_table's) input: the main critic's jobs' policies."""
    return _neural_job_files(wildcards, "policies", main_only=True)


def reading_snapshot(wildcards):
    """The readings_snapshot rule's JSON: a reading's neural section, less its settings."""
    cfg = READINGS[wildcards.reading]
    return json.dumps({k: v for k, v in cfg.items() if k not in NEURAL_SETTINGS}, sort_keys=True)


def combined_folder(wildcards, output):
    """neural_combine's (and readings_combine's) --out-dir: the folder of its tables."""
    return os.path.dirname(output.nashconv)


def tabular_priority(wildcards):
    """Fig 4b's jobs after Fig 6's, the longest game's first."""
    return PRIORITY_TABULAR + sweep_runtime_minutes(config["tabular"], wildcards.game)


def sweep_runtime(wildcards):
    """A game's Fig 4b sweep's requested runtime (minutes)."""
    return sweep_runtime_minutes(config["tabular"], wildcards.game)


def reference_runtime(wildcards):
    """A game's reference solvers' requested runtime (minutes)."""
    return reference_runtime_minutes(config["tabular"], wildcards.game)


def check_runtime(wildcards):
    """A game's OpenSpiel check's requested runtime (minutes)."""
    return check_runtime_minutes(config["tabular"], wildcards.game)


def zoo_runtime(wildcards):
    """A zoo game's requested runtime (minutes)."""
    return zoo_runtime_minutes(config["zoo"], wildcards.game)


def figure_inputs(wildcards):
    """A figure rule's input: its config snapshot and its module's tables."""
    return {"cfg": FIGURE_JOBS[wildcards.figure].config, **FIGURE_JOBS[wildcards.figure].inputs}


def figure_labels(wildcards):
    """A figure's labels in the report."""
    return {"figure": report_label(wildcards.figure), "file": f"{wildcards.figure}.png"}


def figure_input_args(wildcards):
    """A figure's tables as `neurd figure`'s --input arguments."""
    return " ".join(
        f"--input {name}={path}" for name, path in FIGURE_JOBS[wildcards.figure].inputs.items()
    )
