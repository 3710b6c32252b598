# The figures, generated from each figure module's declared INPUTS; the claims
# audit of all figures; the provenance of the run; the report's landing page.


report: "../report/workflow.rst"


# One rule per figure module (fig4b draws one figure per game); the rule's
# {figure} wildcard names the figure, and its report caption shows it.


for module in sorted({job.module for job in FIGURE_JOBS.values()}):

    rule:
        name:
            module
        input:
            unpack(figure_inputs),
        output:
            png=report(
                res("figures/{figure}.png"),
                caption=f"../report/{module}.rst",
                category="Figures",
                labels=figure_labels,
            ),
            pdf=res("figures/{figure}.pdf"),
            audit=res("audit/{figure}.csv"),
        log:
            res("logs/{figure}.log"),
        benchmark:
            res("benchmarks/{figure}.tsv")
        wildcard_constraints:
            figure="|".join(name for name, job in FIGURE_JOBS.items() if job.module == module),
        conda:
            CONDA_ENV
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        params:
            module=module,
            scale=config["scale"],
            inputs=figure_input_args,
        shell:
            "neurd figure {params.module} --name {wildcards.figure} --scale {params.scale:q}"
            " --config {input.cfg}"
            " {params.inputs} --png {output.png} --pdf {output.pdf} --audit {output.audit}"
            " > {log} 2>&1"


rule claims_audit:
    """All figures' claims: a Markdown file, and an HTML page the report shows."""
    input:
        expand(res("audit/{figure}.csv"), figure=FIGURES),
    output:
        md=res("audit/claims.md"),
        html=report(res("audit/claims.html"), caption="../report/claims.rst", category="Audit"),
    log:
        res("logs/claims_audit.log"),
    localrule: True
    conda:
        CONDA_ENV
    shell:
        "neurd audit-gather --out {output.md} --html {output.html} {input} > {log} 2>&1"


rule provenance:
    """Packages, git revision, config and its hash, seeds, machine, the runtime of every
    step.  Depends on every figure so it is rewritten whenever any result is."""
    input:
        cfg=res("config/all.json"),
        figures=FIGURE_FILES,
        audit=res("audit/claims.md"),
    output:
        json=res("provenance.json"),
        html=report(
            res("provenance.html"), caption="../report/provenance.rst", category="Provenance"
        ),
    log:
        res("logs/provenance.log"),
    localrule: True
    conda:
        CONDA_ENV
    params:
        benchmarks=res("benchmarks"),
    shell:
        "neurd provenance --config {input.cfg} --out {output.json} --html {output.html}"
        " --benchmarks {params.benchmarks} > {log} 2>&1"


DOCUMENTED += [
    *FIGURE_FILES,
    *expand(res("audit/{figure}.csv"), figure=FIGURES),
    *rules.claims_audit.output,
    *rules.provenance.output,
]
