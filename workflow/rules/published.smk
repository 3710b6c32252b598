# Fig 6 drawn from a published run (config section published; neurd.publication): the
# publication is checked against the config file it must be the run of when the config is
# validated, and again by the job that combines its tables; figures.smk draws fig6_<name>.
from neurd.pipeline.published import COMBINED, drawn, inputs, name

PUBLISHED = config["published"]

if drawn(PUBLISHED):
    PUBLICATION = name(PUBLISHED)

    rule published_tables:
        """The publication's tables, checked (manifest hashes, columns, config hash, every
        run complete, the config file's neural section as it is now), every game in one."""
        input:
            cfg=res("config/published.json"),
            publication=inputs(PUBLISHED),
            configs=[DEFAULT_CONFIG, PUBLISHED["configfile"]],
        output:
            tables=expand(res(f"published/{PUBLICATION}/neural/{{table}}.parquet"), table=COMBINED),
            config=res(f"published/{PUBLICATION}/config/neural.json"),
        log:
            res(f"logs/published_tables_{PUBLICATION}.log"),
        localrule: True
        conda:
            CONDA_ENV
        threads: 1
        resources:
            mem_mb=4000,
            runtime=10,
        params:
            out_dir=lambda w, output: os.path.dirname(os.path.dirname(output.config)),
        shell:
            "neurd published-tables --config {input.cfg} --out-dir {params.out_dir} > {log} 2>&1"

    DOCUMENTED += rules.published_tables.output
