# Figures 3, 4a and 5: learning dynamics in (biased, nonstationary) Rock-Paper-Scissors.


rule rps_nash_sets:
    """Closed-form Nash of every RPS game used, and the range of each action over
    all symmetric Nash policies (LP): the evidence for the paper's Nash locations."""
    input:
        cfg=res("config/rps.json"),
    output:
        res("rps/nash_sets.parquet"),
    log:
        res("logs/rps_nash_sets.log"),
    benchmark:
        res("benchmarks/rps_nash_sets.tsv")
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=1000,
        runtime=5,
    shell:
        "neurd rps-nash --config {input.cfg} --out {output} > {log} 2>&1"


rule rps_portraits:
    """Fig 3 data: RD and SPG trajectories and time averages (solve_ivp), the
    flows' direction field, and the RD/PG speed ratio over the simplex."""
    input:
        cfg=res("config/rps.json"),
    output:
        flows=res("rps/flows.parquet"),
        field=res("rps/vector_field.parquet"),
        speed=res("rps/speed_ratio.parquet"),
    log:
        res("logs/rps_portraits.log"),
    benchmark:
        res("benchmarks/rps_portraits.tsv")
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "neurd rps-portraits --config {input.cfg} --flows {output.flows}"
        " --field {output.field} --speed {output.speed} > {log} 2>&1"


rule rps_biased:
    """Fig 4a data: NashConv of the time-average policy of Euler-integrated NeuRD
    and SPG from initial policies drawn uniformly from the simplex."""
    input:
        cfg=res("config/rps.json"),
    output:
        res("rps/nashconv_biased.parquet"),
    log:
        res("logs/rps_biased.log"),
    benchmark:
        res("benchmarks/rps_biased.tsv")
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "neurd rps-biased --config {input.cfg} --out {output} > {log} 2>&1"


rule rps_nonstationary:
    """Fig 5 data: the same through phases of nu, learning carried over; mean
    curves under both readings of the time average."""
    input:
        cfg=res("config/rps.json"),
    output:
        table=res("rps/nashconv_nonstationary.parquet"),
        readings=res("rps/nonstationary_readings.parquet"),
    log:
        res("logs/rps_nonstationary.log"),
    benchmark:
        res("benchmarks/rps_nonstationary.tsv")
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "neurd rps-nonstationary --config {input.cfg} --out {output.table}"
        " --readings {output.readings} > {log} 2>&1"


rule rps_ci:
    """Mean NashConv per (algorithm, iteration) with its bootstrap confidence
    interval over trajectories (scipy.stats.bootstrap, vectorised)."""
    input:
        cfg=res("config/rps.json"),
        table=res("rps/nashconv_{experiment}.parquet"),
    output:
        res("rps/nashconv_{experiment}_ci.parquet"),
    log:
        res("logs/rps_ci_{experiment}.log"),
    benchmark:
        res("benchmarks/rps_ci_{experiment}.tsv")
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    shell:
        "neurd rps-ci --config {input.cfg} --table {input.table} --out {output} > {log} 2>&1"


DOCUMENTED += [
    *rules.rps_nash_sets.output,
    *rules.rps_portraits.output,
    *rules.rps_biased.output,
    *rules.rps_nonstationary.output,
    *expand(rules.rps_ci.output[0], experiment=["biased", "nonstationary"]),
]
