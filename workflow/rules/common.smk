# Shared definitions: how rules call the package, config snapshots, figure list.
import shlex
import sys

from neurd.config import section
from neurd.tables import write_json

# Rules call the package's command-line steps with the interpreter running
# Snakemake, so no virtual environment needs activating.
NEURD = shlex.quote(sys.executable) + " -m neurd.cli"

# Paper figures made by this workflow; each writes results/audit/<figure>.csv.
FIGURES = ["fig1", "fig2"]
FIGURE_FILES = expand("results/figures/{figure}.{ext}", figure=FIGURES, ext=["png", "pdf"])


rule config_snapshot:
    """The validated config section a step computes from, with the seed:
    the --config file of every command-line step (rerun by hand from it)."""
    output:
        "results/config/{section}.json",
    params:
        cfg=lambda wildcards: config if wildcards.section == "all" else section(config, wildcards.section),
    wildcard_constraints:
        section="all|matrix",
    localrule: True
    run:
        write_json(output[0], params.cfg)
