# Figure 6: neural NeuRD vs SPG with reward negation. Each game's work is split
# into jobs of neural.seeds_per_job run seeds; a job runs every algorithm and
# entropy level of its seeds as one jitted program (GPU when present).
from neurd.pipeline.neural import (
    export_settings,
    job_runtime_minutes,
    jobs,
    logs_logits,
    main_critic,
)

NEURAL = config["neural"]
# How often a job saves its state, and how much GPU memory it takes, change no number, so
# they are not parameters (a change would rerun every job): jobs read them from the
# environment (neurd neural-run --checkpoint-minutes defaults to $NEURD_CHECKPOINT_MINUTES;
# XLA's memory variables, sized to the jobs sharing a GPU: --resources gpu=N); every
# Snakemake process, a cluster job's included, sets them here when it reads the Snakefile.
export_settings(NEURAL, workflow.resource_settings.resources.get("gpu"))
NEURAL_JOBS = jobs(NEURAL)
NEURAL_GAME_PATTERN = "|".join(NEURAL["games"])
# neural.logits_log (off by default) adds the jobs' logits files; off, the rule is as it was
# before the key existed (same outputs, same command), so nothing reruns.
NEURAL_LOGITS = logs_logits(NEURAL)


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
    priority: lambda wildcards: PRIORITY_NEURAL + job_runtime_minutes(NEURAL, wildcards.game)
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
        critic="learned|exact",
        chunk=r"\d+",
    priority: lambda wildcards: PRIORITY_NEURAL + job_runtime_minutes(NEURAL, wildcards.game)
    conda:
        CONDA_ENV
    # One core asked for, though XLA spreads a cycle over every core it sees: a job asking
    # for two on a two-core machine never starts while one-core jobs keep one core busy,
    # and would wait for all of them (bench/RESULTS.md). A cluster job gets two
    # (profiles/slurm: set-threads), which XLA then uses.
    threads: 1
    resources:
        mem_mb=8000,
        runtime=lambda wildcards: job_runtime_minutes(NEURAL, wildcards.game),
        gpu=NEURAL["gpus_per_job"],
    params:
        checkpoint=res("neural/{game}/jobs/{critic}_{chunk}_checkpoint"),
    shell:
        (
            "neurd neural-run --config {input.cfg} --game {wildcards.game}"
            " --critic {wildcards.critic} --chunk {wildcards.chunk} --compiled {input.game}"
            " --curves {output.curves} --policies {output.policies}"
            " --checkpoint {params.checkpoint}"
        )
        + (" --logits {output.logits}" if NEURAL_LOGITS else "")
        + " > {log} 2>&1"


rule neural_table:
    """A game's tables: NashConv curves, end-of-phase policies, diagnostics, per-run
    summary and bootstrap CIs over seeds."""
    input:
        cfg=res("config/neural.json"),
        game=res("neural/{game}/game.npz"),
        curves=lambda wildcards: [
            res(f"neural/{g}/jobs/{c}_{k}_curves.parquet")
            for g, c, k in NEURAL_JOBS
            if g == wildcards.game
        ],
        policies=lambda wildcards: [
            res(f"neural/{g}/jobs/{c}_{k}_policies.parquet")
            for g, c, k in NEURAL_JOBS
            if g == wildcards.game and c == main_critic(NEURAL)
        ],
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
    priority: lambda wildcards: PRIORITY_NEURAL + job_runtime_minutes(NEURAL, wildcards.game)
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
        out_dir=lambda wildcards, output: os.path.dirname(output.nashconv),
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
