# The config snapshots every step computes from.


rule config_snapshot:
    """The validated config section a step computes from, with the seed: the --config
    file of every command-line step (rerun by hand from it).  A stage's settings that
    change no number (neural.checkpoint_minutes, throughput, gpus_per_job) are left out,
    so changing them reruns nothing; the rules pass them from the config.  A `neurd`
    command as every step, not a `run:` block: Snakemake's local executor starts a job
    before it writes the job's start marker, and a `run:` block this short finished
    first, so the report recorded a negative runtime for it."""
    output:
        res("config/{section}.json"),
    log:
        res("logs/config_snapshot_{section}.log"),
    localrule: True
    conda:
        CONDA_ENV
    params:
        cfg=section_snapshot,
    shell:
        "neurd config-snapshot --out {output} {params.cfg:q} > {log} 2>&1"


DOCUMENTED += expand(res("config/{section}.json"), section=["all", *SECTIONS])
