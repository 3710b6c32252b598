# Figures 3, 4a and 5: learning dynamics in (biased, nonstationary) Rock-Paper-Scissors.


rule rps_nash_sets:
    """Closed-form Nash of every RPS game used, and the range of each action over
    all symmetric Nash policies (LP): the evidence for the paper's Nash locations."""
    input:
        cfg="results/config/rps.json",
    output:
        "results/rps/nash_sets.parquet",
    log:
        "results/logs/rps_nash_sets.log",
    resources:
        mem_mb=1000,
        runtime=5,
    conda:
        CONDA_ENV
    shell:
        "neurd rps-nash --config {input.cfg} --out {output} > {log} 2>&1"


rule rps_portraits:
    """Fig 3 data: RD and SPG trajectories and time averages (solve_ivp), the
    flows' direction field, and the RD/PG speed ratio over the simplex."""
    input:
        cfg="results/config/rps.json",
    output:
        flows="results/rps/flows.parquet",
        field="results/rps/vector_field.parquet",
        speed="results/rps/speed_ratio.parquet",
    log:
        "results/logs/rps_portraits.log",
    benchmark:
        "results/benchmarks/rps_portraits.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        "neurd rps-portraits --config {input.cfg} --flows {output.flows}"
        " --field {output.field} --speed {output.speed} > {log} 2>&1"


rule rps_biased:
    """Fig 4a data: NashConv of the time-average policy of Euler-integrated NeuRD
    and SPG from initial policies drawn uniformly from the simplex."""
    input:
        cfg="results/config/rps.json",
    output:
        "results/rps/nashconv_biased.parquet",
    log:
        "results/logs/rps_biased.log",
    benchmark:
        "results/benchmarks/rps_biased.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        "neurd rps-biased --config {input.cfg} --out {output} > {log} 2>&1"


rule rps_nonstationary:
    """Fig 5 data: the same through phases of nu, learning carried over; mean
    curves under both readings of the time average."""
    input:
        cfg="results/config/rps.json",
    output:
        table="results/rps/nashconv_nonstationary.parquet",
        readings="results/rps/nonstationary_readings.parquet",
    log:
        "results/logs/rps_nonstationary.log",
    benchmark:
        "results/benchmarks/rps_nonstationary.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        "neurd rps-nonstationary --config {input.cfg} --out {output.table}"
        " --readings {output.readings} > {log} 2>&1"


rule rps_ci:
    """Mean NashConv per (algorithm, iteration) with its bootstrap confidence
    interval over trajectories (scipy.stats.bootstrap, vectorised)."""
    input:
        cfg="results/config/rps.json",
        table="results/rps/nashconv_{experiment}.parquet",
    output:
        "results/rps/nashconv_{experiment}_ci.parquet",
    wildcard_constraints:
        experiment="biased|nonstationary",
    log:
        "results/logs/rps_ci_{experiment}.log",
    benchmark:
        "results/benchmarks/rps_ci_{experiment}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    conda:
        CONDA_ENV
    shell:
        "neurd rps-ci --config {input.cfg} --table {input.table} --out {output} > {log} 2>&1"


rule fig3:
    input:
        cfg="results/config/rps.json",
        flows="results/rps/flows.parquet",
        field="results/rps/vector_field.parquet",
        speed="results/rps/speed_ratio.parquet",
        nash="results/rps/nash_sets.parquet",
    output:
        png=report("results/figures/fig3.png", caption="../report/fig3.rst", category="Figures"),
        pdf="results/figures/fig3.pdf",
        audit="results/audit/fig3.csv",
    log:
        "results/logs/fig3.log",
    conda:
        CONDA_ENV
    shell:
        "neurd figure fig3 --config {input.cfg} --input flows={input.flows}"
        " --input field={input.field} --input speed={input.speed} --input nash={input.nash}"
        " --png {output.png} --pdf {output.pdf} --audit {output.audit} > {log} 2>&1"


rule fig4a:
    input:
        cfg="results/config/rps.json",
        nashconv="results/rps/nashconv_biased.parquet",
        ci="results/rps/nashconv_biased_ci.parquet",
    output:
        png=report("results/figures/fig4a.png", caption="../report/fig4a.rst", category="Figures"),
        pdf="results/figures/fig4a.pdf",
        audit="results/audit/fig4a.csv",
    log:
        "results/logs/fig4a.log",
    conda:
        CONDA_ENV
    shell:
        "neurd figure fig4a --config {input.cfg} --input nashconv={input.nashconv}"
        " --input ci={input.ci}"
        " --png {output.png} --pdf {output.pdf} --audit {output.audit} > {log} 2>&1"


rule fig5:
    input:
        cfg="results/config/rps.json",
        nashconv="results/rps/nashconv_nonstationary.parquet",
        ci="results/rps/nashconv_nonstationary_ci.parquet",
        readings="results/rps/nonstationary_readings.parquet",
        nash="results/rps/nash_sets.parquet",
    output:
        png=report("results/figures/fig5.png", caption="../report/fig5.rst", category="Figures"),
        pdf="results/figures/fig5.pdf",
        audit="results/audit/fig5.csv",
    log:
        "results/logs/fig5.log",
    conda:
        CONDA_ENV
    shell:
        "neurd figure fig5 --config {input.cfg} --input nashconv={input.nashconv}"
        " --input ci={input.ci} --input readings={input.readings} --input nash={input.nash}"
        " --png {output.png} --pdf {output.pdf} --audit {output.audit} > {log} 2>&1"
