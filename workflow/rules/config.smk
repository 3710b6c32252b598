# The config snapshots every step computes from.
from neurd.stages import snapshot
from neurd.tables import write_json


rule config_snapshot:
    """The validated config section a step computes from, with the seed: the --config
    file of every command-line step (rerun by hand from it).  A stage's settings that
    change no number (neural.checkpoint_minutes, throughput, gpus_per_job) are left out,
    so changing them reruns nothing; the rules pass them from the config."""
    output:
        res("config/{section}.json"),
    log:
        res("logs/config_snapshot_{section}.log"),
    wildcard_constraints:
        section="|".join(["all", *SECTIONS]),
    localrule: True
    params:
        cfg=lambda wildcards: (
            config if wildcards.section == "all" else snapshot(config, wildcards.section)
        ),
    run:
        write_json(output[0], params.cfg)
        with open(log[0], "w") as handle:
            print(f"wrote {output[0]}", file=handle)


DOCUMENTED += expand(res("config/{section}.json"), section=["all", *SECTIONS])
