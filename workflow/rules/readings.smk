# The readings study (`make readings`; not a target of `rule all`): every reading of
# config readings is a neural section of its own, run by the Fig 6 steps into
# results/readings/<reading>/, then one grid of Fig 6's claims under every reading.
# The readings (READINGS, READING_NAMES) and the functions of a job's wildcards are
# common.smk's.
READING_JOBS = {name: jobs(cfg) for name, cfg in READINGS.items()}


rule readings_snapshot:
    """A reading's neural section (the study's scale and the reading's changes, validated
    with the config): the --config of its Fig 6 steps.  A `neurd` command, as
    config_snapshot (a `run:` block this short records a negative runtime)."""
    output:
        res("readings/{reading}/config/neural.json"),
    log:
        res("logs/readings_snapshot_{reading}.log"),
    localrule: True
    conda:
        CONDA_ENV
    params:
        cfg=reading_snapshot,
    shell:
        "neurd config-snapshot --out {output} {params.cfg:q} > {log} 2>&1"


# A reading's jobs and tables are Fig 6's, under results/readings/<reading>/: the table and
# combine steps are neural_table's and neural_combine's rules with the reading's paths
# (use rule ... with). The run step is a rule of its own: its logits output is always there
# (neural_run has one only with neural.logits_log, decided when the Snakefile is read, and
# `use rule` can change a rule's files but not its command); its command, threads,
# resources and priority are neural_run's (neural.smk), its own section's where they
# depend on it.
rule readings_run:
    """One job of one reading (as neural_run), with its logged runs' centred logits (the
    study's default logs some; a file with no rows where a reading logs none)."""
    input:
        cfg=res("readings/{reading}/config/neural.json"),
        game=res("neural/{game}/game.npz"),
    output:
        curves=res("readings/{reading}/neural/{game}/jobs/{critic}_{chunk}_curves.parquet"),
        policies=res("readings/{reading}/neural/{game}/jobs/{critic}_{chunk}_policies.parquet"),
        logits=res("readings/{reading}/neural/{game}/jobs/{critic}_{chunk}_logits.parquet"),
    log:
        res("logs/readings_run_{reading}_{game}_{critic}_{chunk}.log"),
    benchmark:
        res("benchmarks/readings_run_{reading}_{game}_{critic}_{chunk}.tsv")
    wildcard_constraints:
        game=NEURAL_GAME_PATTERN,
    priority: neural_priority
    conda:
        CONDA_ENV
    threads: NEURAL_RUN_THREADS
    resources:
        **NEURAL_RUN_RESOURCES,
    params:
        checkpoint=res("readings/{reading}/neural/{game}/jobs/{critic}_{chunk}_checkpoint"),
    shell:
        NEURAL_RUN_COMMAND
        + " --logits {output.logits} --checkpoint {params.checkpoint} > {log} 2>&1"


use rule neural_table as readings_table with:
    input:
        cfg=res("readings/{reading}/config/neural.json"),
        game=res("neural/{game}/game.npz"),
        curves=neural_curves,
        policies=neural_policies,
    output:
        nashconv=res("readings/{reading}/neural/{game}/nashconv.parquet"),
        policies=res("readings/{reading}/neural/{game}/policies.parquet"),
        diagnostics=res("readings/{reading}/neural/{game}/diagnostics.parquet"),
        summary=res("readings/{reading}/neural/{game}/summary.parquet"),
        ci=res("readings/{reading}/neural/{game}/nashconv_ci.parquet"),
    log:
        res("logs/readings_table_{reading}_{game}.log"),
    benchmark:
        res("benchmarks/readings_table_{reading}_{game}.tsv")
    wildcard_constraints:
        game=NEURAL_GAME_PATTERN,


use rule neural_combine as readings_combine with:
    input:
        cfg=res("readings/{reading}/config/neural.json"),
        nashconv=expand(
            res("readings/{{reading}}/neural/{game}/nashconv.parquet"), game=NEURAL["games"]
        ),
        diagnostics=expand(
            res("readings/{{reading}}/neural/{game}/diagnostics.parquet"), game=NEURAL["games"]
        ),
        summary=expand(
            res("readings/{{reading}}/neural/{game}/summary.parquet"), game=NEURAL["games"]
        ),
        ci=expand(
            res("readings/{{reading}}/neural/{game}/nashconv_ci.parquet"), game=NEURAL["games"]
        ),
    output:
        nashconv=res("readings/{reading}/neural/nashconv.parquet"),
        diagnostics=res("readings/{reading}/neural/diagnostics.parquet"),
        summary=res("readings/{reading}/neural/summary.parquet"),
        ci=res("readings/{reading}/neural/nashconv_ci.parquet"),
    log:
        res("logs/readings_combine_{reading}.log"),


rule readings_grid:
    """Fig 6's claims under every reading: the grid, its heat map and the collapse panels
    (the logged runs' centred logits, read from the main critic's jobs)."""
    input:
        cfg=res("config/readings.json"),
        tables=expand(
            res("readings/{reading}/neural/{name}.parquet"),
            reading=READING_NAMES,
            name=["nashconv", "diagnostics", "summary", "nashconv_ci"],
        ),
        snapshots=expand(res("readings/{reading}/config/neural.json"), reading=READING_NAMES),
        logits=[
            res(f"readings/{r}/neural/{g}/jobs/{c}_{k}_logits.parquet")
            for r in READING_NAMES
            for g, c, k in select_jobs(READING_JOBS[r], critic=main_critic(READINGS[r]))
        ],
        matrix_cfg=res("config/matrix.json"),
        rps_cfg=res("config/rps.json"),
        sweep=res("matrix/regret_sweep.parquet"),
        tuned=res("matrix/regret_vs_horizon.parquet"),
        rewards=res("matrix/reward_readings.parquet"),
        trajectories=res("matrix/trajectories.parquet"),
        rps_ci=res("rps/nashconv_nonstationary_ci.parquet"),
        rps_readings=res("rps/nonstationary_readings.parquet"),
        rps_nash=res("rps/nash_sets.parquet"),
        rps_nashconv=res("rps/nashconv_nonstationary.parquet"),
    output:
        grid=res("readings/grid.parquet"),
        other=res("readings/other_figures.parquet"),
        collapse=res("readings/collapse.parquet"),
        logits=res("readings/logits.parquet"),
        png=report(res("readings/grid.png"), caption="../report/readings.rst", category="Readings"),
        pdf=res("readings/grid.pdf"),
        md=res("readings/grid.md"),
    log:
        res("logs/readings_grid.log"),
    localrule: True
    conda:
        CONDA_ENV
    params:
        readings=" ".join(f"--reading {r}={res(f'readings/{r}')}" for r in READING_NAMES),
    shell:
        "neurd readings-grid --config {input.cfg} {params.readings}"
        " --matrix-config {input.matrix_cfg} --rps-config {input.rps_cfg}"
        " --input sweep={input.sweep} --input tuned={input.tuned}"
        " --input readings={input.rewards} --input trajectories={input.trajectories}"
        " --input rps_ci={input.rps_ci} --input rps_readings={input.rps_readings}"
        " --input rps_nash={input.rps_nash} --input rps_nashconv={input.rps_nashconv}"
        " --grid {output.grid} --other {output.other}"
        " --collapse {output.collapse} --logits {output.logits}"
        " --png {output.png} --pdf {output.pdf} --md {output.md}"
        " > {log} 2>&1"


# Every file the study makes, all targets of `rule readings`, so a missing one is made again
# (as DOCUMENTED for `rule all`: Snakemake does not remake a missing intermediate file whose
# consumers are up to date).
READINGS_MADE = [
    *[
        path.format(reading=r, game=g, critic=c, chunk=k)
        for r in READING_NAMES
        for g, c, k in READING_JOBS[r]
        for path in rules.readings_run.output
    ],
    *[
        path.format(reading=r, game=g)
        for r in READING_NAMES
        for g in NEURAL["games"]
        for path in rules.readings_table.output
    ],
    *[path.format(reading=r) for r in READING_NAMES for path in rules.readings_combine.output],
    *rules.readings_grid.output,
]


rule readings:
    """The readings study's target (make readings)."""
    input:
        READINGS_MADE,
    localrule: True
