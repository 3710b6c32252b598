# Figures 1 and 2: repeated matching pennies.


rule regret_sweep:
    """Final regret of Hedge and SPG at every horizon x step size, with and
    without Forfeit; the tuned curves of Fig 1; the alternative reward readings."""
    input:
        cfg="results/config/matrix.json",
    output:
        sweep="results/matrix/regret_sweep.parquet",
        tuned="results/matrix/regret_vs_horizon.parquet",
        readings="results/matrix/reward_readings.parquet",
    log:
        "results/logs/regret_sweep.log",
    benchmark:
        "results/benchmarks/regret_sweep.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        CONDA_ENV
    shell:
        "neurd matrix-sweep --config {input.cfg} --sweep {output.sweep}"
        " --tuned {output.tuned} --readings {output.readings} > {log} 2>&1"


rule regret_trajectories:
    """Logits and policies of Hedge and SPG, round by round (Fig 2)."""
    input:
        cfg="results/config/matrix.json",
    output:
        "results/matrix/trajectories.parquet",
    log:
        "results/logs/regret_trajectories.log",
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        "neurd matrix-trajectories --config {input.cfg} --out {output} > {log} 2>&1"


rule fig1:
    input:
        cfg="results/config/matrix.json",
        sweep="results/matrix/regret_sweep.parquet",
        tuned="results/matrix/regret_vs_horizon.parquet",
        readings="results/matrix/reward_readings.parquet",
    output:
        png=report("results/figures/fig1.png", caption="../report/fig1.rst", category="Figures"),
        pdf="results/figures/fig1.pdf",
        audit="results/audit/fig1.csv",
    log:
        "results/logs/fig1.log",
    conda:
        CONDA_ENV
    shell:
        "neurd figure fig1 --config {input.cfg} --input sweep={input.sweep}"
        " --input tuned={input.tuned} --input readings={input.readings}"
        " --png {output.png} --pdf {output.pdf} --audit {output.audit} > {log} 2>&1"


rule fig2:
    input:
        cfg="results/config/matrix.json",
        trajectories="results/matrix/trajectories.parquet",
        sweep="results/matrix/regret_sweep.parquet",
        readings="results/matrix/reward_readings.parquet",
    output:
        png=report("results/figures/fig2.png", caption="../report/fig2.rst", category="Figures"),
        pdf="results/figures/fig2.pdf",
        audit="results/audit/fig2.csv",
    log:
        "results/logs/fig2.log",
    conda:
        CONDA_ENV
    shell:
        "neurd figure fig2 --config {input.cfg} --input trajectories={input.trajectories}"
        " --input sweep={input.sweep} --input readings={input.readings}"
        " --png {output.png} --pdf {output.pdf} --audit {output.audit} > {log} 2>&1"
