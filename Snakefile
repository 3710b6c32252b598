# neurd-repro: every figure of "Neural Replicator Dynamics" (Hennes et al., AAMAS 2020)
# regenerated from scratch.  Data flow: config -> tables -> figures -> audit.
#
#   snakemake --cores 2                                      # default scale
#   snakemake --cores 2 --configfile workflow/config/smoke.yaml
#   snakemake --cores 2 --configfile workflow/config/paper.yaml
from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "workflow/config/default.yaml"


# Types, ranges, unknown keys and defaults; then the checks a schema cannot
# express.  Both name the offending key and stop before any job runs.
validate(config, "workflow/schemas/config.schema.yaml")

from neurd.config import check

check(config)


include: "workflow/rules/common.smk"
include: "workflow/rules/matrix.smk"
include: "workflow/rules/rps.smk"
include: "workflow/rules/tabular.smk"
include: "workflow/rules/audit.smk"


rule all:
    default_target: True
    input:
        FIGURE_FILES,
        "results/audit/claims.md",
        "results/provenance.json",
