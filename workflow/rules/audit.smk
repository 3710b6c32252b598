# The claims audit of all figures, and the provenance of the run.


rule claims_audit:
    """All figures' claims in one Markdown table."""
    input:
        expand("results/audit/{figure}.csv", figure=FIGURES),
    output:
        report("results/audit/claims.md", caption="../report/claims.rst", category="Audit"),
    log:
        "results/logs/claims_audit.log",
    conda:
        CONDA_ENV
    shell:
        "neurd audit-gather --out {output} {input} > {log} 2>&1"


rule provenance:
    """Packages, git revision, config and its hash, seeds, machine.  Depends on
    every figure so it is rewritten whenever any result is."""
    input:
        cfg="results/config/all.json",
        figures=FIGURE_FILES,
        audit="results/audit/claims.md",
    output:
        "results/provenance.json",
    log:
        "results/logs/provenance.log",
    conda:
        CONDA_ENV
    shell:
        "neurd provenance --config {input.cfg} --out {output} > {log} 2>&1"
