# Figures 1 and 2: repeated matching pennies.


rule regret_sweep:
    """Final regret of Hedge and SPG at every horizon x step size, with and
    without Forfeit; the tuned curves of Fig 1; the alternative reward readings."""
    input:
        cfg=res("config/matrix.json"),
    output:
        sweep=res("matrix/regret_sweep.parquet"),
        tuned=res("matrix/regret_vs_horizon.parquet"),
        readings=res("matrix/reward_readings.parquet"),
    log:
        res("logs/regret_sweep.log"),
    benchmark:
        res("benchmarks/regret_sweep.tsv")
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    shell:
        "neurd matrix-sweep --config {input.cfg} --sweep {output.sweep}"
        " --tuned {output.tuned} --readings {output.readings} > {log} 2>&1"


rule regret_trajectories:
    """Logits and policies of Hedge and SPG, round by round (Fig 2)."""
    input:
        cfg=res("config/matrix.json"),
    output:
        res("matrix/trajectories.parquet"),
    log:
        res("logs/regret_trajectories.log"),
    benchmark:
        res("benchmarks/regret_trajectories.tsv")
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    shell:
        "neurd matrix-trajectories --config {input.cfg} --out {output} > {log} 2>&1"


DOCUMENTED += [*rules.regret_sweep.output, *rules.regret_trajectories.output]
