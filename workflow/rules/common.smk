# Shared definitions: how rules call the package, the results folder, the figure list.
import os
import shutil
import sys

from neurd.games import FORMAT_VERSION as GAME_FORMAT_VERSION
from neurd.stages import SECTIONS, figures, results_root


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
