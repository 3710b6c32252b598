# Shared definitions: how rules call the package, config snapshots, the figure list.
import os
import shutil
import sys

from neurd.config import section
from neurd.stages import SECTIONS, figures
from neurd.tables import write_json


# Rules call the package's command-line steps (`neurd <step>`).  When Snakemake
# runs from a virtual environment that is not activated, put that
# environment's scripts on PATH so jobs find the same `neurd`.
envvars:
    "PATH",


if shutil.which("neurd") is None:
    search_path = os.pathsep.join([os.path.dirname(sys.executable), os.environ["PATH"]])
    os.environ["PATH"] = search_path

CONDA_ENV = "../envs/neurd.yaml"

# Every paper figure the config makes (from the stage registry): name -> job
# (its module in neurd.figures, config section and input tables).  Each writes
# results/figures/<name>.png|pdf and results/audit/<name>.csv.
FIGURE_JOBS = {job.name: job for job in figures(config)}
FIGURES = list(FIGURE_JOBS)
FIGURE_FILES = expand("results/figures/{figure}.{ext}", figure=FIGURES, ext=["png", "pdf"])


rule config_snapshot:
    """The validated config section a step computes from, with the seed:
    the --config file of every command-line step (rerun by hand from it)."""
    output:
        "results/config/{section}.json",
    log:
        "results/logs/config_snapshot_{section}.log",
    wildcard_constraints:
        section="|".join(["all", *SECTIONS]),
    localrule: True
    params:
        cfg=lambda wildcards: (
            config if wildcards.section == "all" else section(config, wildcards.section)
        ),
    run:
        write_json(output[0], params.cfg)
        with open(log[0], "w") as handle:
            print(f"wrote {output[0]}", file=handle)
