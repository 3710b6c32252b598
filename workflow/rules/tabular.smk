# Figure 4b (and its extras for other games): tabular counterfactual NeuRD vs
# SPG, i.e. CFR with either local learner, on OpenSpiel games compiled once.
TABULAR = config["tabular"]
TABULAR_GAME_PATTERN = "|".join(TABULAR["games"])


rule compile_game:
    """Walk the OpenSpiel game once into arrays (histories, information
    states with their strings and tensors, sequence form)."""
    input:
        cfg=res("config/tabular.json"),
    output:
        res("games/{game}.npz"),
    log:
        res("logs/compile_game_{game}.log"),
    benchmark:
        res("benchmarks/compile_game_{game}.tsv")
    wildcard_constraints:
        game=TABULAR_GAME_PATTERN,
    priority: tabular_priority
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
        "neurd compile-game --config {input.cfg} --game {wildcards.game}"
        " --out {output} > {log} 2>&1"


rule tabular_sweep:
    """CFR(NeuRD) and CFR(SPG) at every step size: NashConv of the average
    policy at log-spaced checkpoints, one jitted program per game."""
    input:
        cfg=res("config/tabular.json"),
        game=res("games/{game}.npz"),
    output:
        res("tabular/{game}/sweep.parquet"),
    log:
        res("logs/tabular_sweep_{game}.log"),
    benchmark:
        res("benchmarks/tabular_sweep_{game}.tsv")
    wildcard_constraints:
        game=TABULAR_GAME_PATTERN,
    priority: tabular_priority
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=sweep_runtime,
    shell:
        "neurd tabular-sweep --config {input.cfg} --game {wildcards.game}"
        " --compiled {input.game} --out {output} > {log} 2>&1"


rule tabular_reference:
    """The yardsticks: CFR (regret matching) and CFR+ at the same checkpoints, as
    OpenSpiel's CFRSolver and CFRPlusSolver compute them, reproduced by the engine
    (every configured solver in one program)."""
    input:
        cfg=res("config/tabular.json"),
        game=res("games/{game}.npz"),
    output:
        expand(
            res("tabular/{{game}}/reference_{solver}.parquet"),
            solver=TABULAR["reference_solvers"],
        ),
    log:
        res("logs/tabular_reference_{game}.log"),
    benchmark:
        res("benchmarks/tabular_reference_{game}.tsv")
    wildcard_constraints:
        game=TABULAR_GAME_PATTERN,
    priority: tabular_priority
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=reference_runtime,
    shell:
        "neurd tabular-reference --config {input.cfg} --game {wildcards.game}"
        " --compiled {input.game} --out {output} > {log} 2>&1"


rule tabular_openspiel_check:
    """OpenSpiel's own C++ CFR or CFR+ over the first tabular.openspiel_check_iterations
    iterations against the drawn yardstick: fails, and stops the run, if they part."""
    input:
        cfg=res("config/tabular.json"),
        game=res("games/{game}.npz"),
        reference=res("tabular/{game}/reference_{solver}.parquet"),
    output:
        res("tabular/{game}/openspiel_{solver}.parquet"),
    log:
        res("logs/tabular_openspiel_check_{game}_{solver}.log"),
    benchmark:
        res("benchmarks/tabular_openspiel_check_{game}_{solver}.tsv")
    wildcard_constraints:
        game=TABULAR_GAME_PATTERN,
    priority: tabular_priority
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=check_runtime,
    shell:
        "neurd tabular-openspiel-check --config {input.cfg} --game {wildcards.game}"
        " --solver {wildcards.solver} --compiled {input.game} --reference {input.reference}"
        " --out {output} > {log} 2>&1"


rule tabular_nashconv:
    """Sweep and reference curves in the table Figure 4b reads, once OpenSpiel's
    checks have passed."""
    input:
        cfg=res("config/tabular.json"),
        sweep=res("tabular/{game}/sweep.parquet"),
        reference=expand(
            res("tabular/{{game}}/reference_{solver}.parquet"),
            solver=TABULAR["reference_solvers"],
        ),
        checks=expand(
            res("tabular/{{game}}/openspiel_{solver}.parquet"),
            solver=TABULAR["reference_solvers"],
        ),
    output:
        res("tabular/{game}/nashconv.parquet"),
    log:
        res("logs/tabular_nashconv_{game}.log"),
    wildcard_constraints:
        game=TABULAR_GAME_PATTERN,
    localrule: True
    conda:
        CONDA_ENV
    shell:
        "neurd tabular-table --config {input.cfg} --game {wildcards.game}"
        " --sweep {input.sweep} --reference {input.reference} --checks {input.checks}"
        " --out {output} > {log} 2>&1"


DOCUMENTED += [
    *expand(rules.compile_game.output[0], game=TABULAR["games"]),
    *expand(rules.tabular_sweep.output[0], game=TABULAR["games"]),
    *expand(
        res("tabular/{game}/reference_{solver}.parquet"),
        game=TABULAR["games"],
        solver=TABULAR["reference_solvers"],
    ),
    *expand(
        rules.tabular_openspiel_check.output[0],
        game=TABULAR["games"],
        solver=TABULAR["reference_solvers"],
    ),
    *expand(rules.tabular_nashconv.output[0], game=TABULAR["games"]),
]
