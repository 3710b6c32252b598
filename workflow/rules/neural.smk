# Figure 6: neural NeuRD vs SPG with reward negation. Each game's work is split
# into jobs of neural.seeds_per_job run seeds; a job runs every algorithm and
# entropy level of its seeds as one jitted program (GPU when present).
from neurd.neural.runs import jobs, logits_logged
from neurd.pipeline.neural_resources import export_settings

NEURAL = config["neural"]
# How often a job saves its state, and how much GPU memory it takes, change no number, so
# they are not parameters (a change would rerun every job): jobs read them from the
# environment (neurd neural-run --checkpoint-minutes defaults to $NEURD_CHECKPOINT_MINUTES;
# XLA's memory variables, sized to the jobs sharing a GPU: --resources gpu=N); every
# Snakemake process, a cluster job's included, sets them here when it reads the Snakefile.
export_settings(NEURAL, workflow.resource_settings.resources.get("gpu"))
NEURAL_JOBS = jobs(NEURAL)
NEURAL_GAME_PATTERN = "|".join(NEURAL["games"])
# neural.logits_log (off by default) adds the jobs' logits files; off, the rule has no logits
# output and its command no --logits (a changed command reruns every job).
NEURAL_LOGITS = logits_logged(NEURAL)
# A job's command, shared with the readings study's jobs (readings.smk), which add their
# files after it.
NEURAL_RUN_COMMAND = (
    "neurd neural-run --config {input.cfg} --game {wildcards.game}"
    " --critic {wildcards.critic} --chunk {wildcards.chunk} --compiled {input.game}"
    " --curves {output.curves} --policies {output.policies}"
)
# One core asked for, though a job shares its configurations between one CPU device per core
# it sees (neurd.neural.device.use_cores): a job asking for two on a two-core machine never
# starts while one-core jobs keep one core busy, and would wait for all of them
# (bench/RESULTS.md). A cluster job gets two (profiles/slurm: set-threads), which it then
# uses.
NEURAL_RUN_THREADS = 1
# A job's resources (the readings study's jobs' too): memory, the runtime of its section's
# configuration-iterations and the GPUs of its section's neural.gpus_per_job.
NEURAL_RUN_RESOURCES = {"mem_mb": 8000, "runtime": neural_runtime, "gpu": neural_gpus}


rule neural_game:
    """A Fig 6 game compiled once into arrays (information-state tensors included)."""
    input:
        cfg=res("config/neural.json"),
    output:
        res("neural/{game}/game.npz"),
    log:
        res("logs/neural_game_{game}.log"),
    benchmark:
        res("benchmarks/neural_game_{game}.tsv")
    wildcard_constraints:
        game=NEURAL_GAME_PATTERN,
    priority: neural_priority
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    params:
        # a compiled file of another format version is made again
        game_format=GAME_FORMAT_VERSION,
    shell:
        "neurd neural-game --config {input.cfg} --game {wildcards.game} --out {output} > {log} 2>&1"


rule neural_run:
    """One job: every algorithm and entropy level for a chunk of run seeds; the job's
    state is checkpointed (params.checkpoint, not an output) and resumed after a kill.
    With neural.logits_log, also the logged runs' centred logits (output.logits)."""
    input:
        cfg=res("config/neural.json"),
        game=res("neural/{game}/game.npz"),
    output:
        **(
            {"logits": res("neural/{game}/jobs/{critic}_{chunk}_logits.parquet")}
            if NEURAL_LOGITS
            else {}
        ),
        curves=res("neural/{game}/jobs/{critic}_{chunk}_curves.parquet"),
        policies=res("neural/{game}/jobs/{critic}_{chunk}_policies.parquet"),
    log:
        res("logs/neural_run_{game}_{critic}_{chunk}.log"),
    benchmark:
        res("benchmarks/neural_run_{game}_{critic}_{chunk}.tsv")
    wildcard_constraints:
        game=NEURAL_GAME_PATTERN,
    priority: neural_priority
    conda:
        CONDA_ENV
    threads: NEURAL_RUN_THREADS
    resources:
        **NEURAL_RUN_RESOURCES,
    params:
        checkpoint=res("neural/{game}/jobs/{critic}_{chunk}_checkpoint"),
    shell:
        NEURAL_RUN_COMMAND
        + " --checkpoint {params.checkpoint}"
        + (" --logits {output.logits}" if NEURAL_LOGITS else "")
        + " > {log} 2>&1"


rule neural_table:
    """A game's tables: NashConv curves, end-of-phase policies, diagnostics, per-run
    summary and bootstrap CIs over seeds."""
    input:
        cfg=res("config/neural.json"),
        game=res("neural/{game}/game.npz"),
        curves=neural_curves,
        policies=neural_policies,
    output:
        nashconv=res("neural/{game}/nashconv.parquet"),
        policies=res("neural/{game}/policies.parquet"),
        diagnostics=res("neural/{game}/diagnostics.parquet"),
        summary=res("neural/{game}/summary.parquet"),
        ci=res("neural/{game}/nashconv_ci.parquet"),
    log:
        res("logs/neural_table_{game}.log"),
    benchmark:
        res("benchmarks/neural_table_{game}.tsv")
    wildcard_constraints:
        game=NEURAL_GAME_PATTERN,
    priority: neural_priority
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    shell:
        "neurd neural-table --config {input.cfg} --game {wildcards.game} --compiled {input.game}"
        " --curves {input.curves}"
        " --policies {input.policies} --nashconv {output.nashconv}"
        " --policies-out {output.policies} --diagnostics {output.diagnostics}"
        " --summary {output.summary} --ci {output.ci} > {log} 2>&1"


rule neural_combine:
    """Every game's tables in one of each: the inputs of Fig 6."""
    input:
        cfg=res("config/neural.json"),
        nashconv=expand(res("neural/{game}/nashconv.parquet"), game=NEURAL["games"]),
        diagnostics=expand(res("neural/{game}/diagnostics.parquet"), game=NEURAL["games"]),
        summary=expand(res("neural/{game}/summary.parquet"), game=NEURAL["games"]),
        ci=expand(res("neural/{game}/nashconv_ci.parquet"), game=NEURAL["games"]),
    output:
        nashconv=res("neural/nashconv.parquet"),
        diagnostics=res("neural/diagnostics.parquet"),
        summary=res("neural/summary.parquet"),
        ci=res("neural/nashconv_ci.parquet"),
    log:
        res("logs/neural_combine.log"),
    localrule: True
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
    params:
        out_dir=combined_folder,
    shell:
        "neurd neural-combine --config {input.cfg} --nashconv {input.nashconv}"
        " --diagnostics {input.diagnostics} --summary {input.summary}"
        " --nashconv_ci {input.ci} --out-dir {params.out_dir} > {log} 2>&1"


DOCUMENTED += [
    *expand(rules.neural_game.output[0], game=NEURAL["games"]),
    *[
        path.format(game=g, critic=c, chunk=k)
        for g, c, k in NEURAL_JOBS
        for path in rules.neural_run.output
    ],
    *expand(rules.neural_table.output, game=NEURAL["games"]),
    *rules.neural_combine.output,
]
