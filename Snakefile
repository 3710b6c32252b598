# neurd-repro: every figure of "Neural Replicator Dynamics" (Hennes et al., AAMAS 2020)
# regenerated from scratch.  Data flow: config -> tables -> figures -> audit.
#
#   snakemake --cores 2                                      # default scale
#   snakemake --cores 2 --configfile workflow/config/smoke.yaml
#   snakemake --cores 2 --configfile workflow/config/paper.yaml
#
# Stages register themselves (neurd.stages); a new stage adds its rules file
# below, and everything else (config validation, snapshots, figure rules,
# rule all, provenance) finds it through the registry.
from snakemake.utils import min_version

from neurd.configfile import type_overrides
from neurd.publication.commands import check_configured
from neurd.stages import DEFAULT_CONFIG, validate

min_version("9.0")


configfile: DEFAULT_CONFIG


# `--config neural={seeds: 2}` typed as a config file's values are (Snakemake keeps nested
# command-line values as strings).
type_overrides(config, workflow.config_settings.config)

# Each section against its schema (types, ranges, unknown keys, defaults), then
# the checks a schema cannot express; both name the offending key and stop
# before any job runs.
validate(
    config,
    f"{workflow.basedir}/workflow/schemas",
    [DEFAULT_CONFIG, *workflow.overwrite_configfiles],
)
# A publication drawn is the run of its config file as that file is now
# (neurd.publication.commands).
check_configured(config, workflow.basedir, workflow.overwrite_configfiles)


# Which ready job starts first (Snakemake's priority, highest first): the longest chains of
# the DAG.  Fig 6's jobs, the longest (each takes both cores of a laptop), by the size of
# their game; then Fig 4b's per game (compile, sweep, yardsticks, OpenSpiel's checks), so
# that no long job is left to run alone at the end; then the rest (0).
PRIORITY_NEURAL = 200
PRIORITY_TABULAR = 100


include: "workflow/rules/common.smk"
include: "workflow/rules/config.smk"
include: "workflow/rules/matrix.smk"
include: "workflow/rules/neural.smk"
include: "workflow/rules/published.smk"
include: "workflow/rules/readings.smk"
include: "workflow/rules/rps.smk"
include: "workflow/rules/tabular.smk"
include: "workflow/rules/zoo.smk"
include: "workflow/rules/figures.smk"


rule all:
    default_target: True
    input:
        DOCUMENTED,
