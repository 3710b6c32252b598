# The zoo (`make zoo`; not a target of `rule all`): counterfactual NeuRD against SPG, CFR
# and CFR+ on every game of OpenSpiel's registry that config zoo's rule selects, one job
# per game, then the summary, the claims, both figures and the page's generated part.
from neurd.pipeline.zoo import selection

ZOO = config["zoo"]
ZOO_GAMES = list(selection(ZOO)["games"])


rule zoo_game:
    """One game, as Fig 4b runs its games: CFR(NeuRD) and CFR(SPG) at every step size,
    the engine's CFR and CFR+, and OpenSpiel's own CFR and CFR+ over a prefix (the job
    fails if they part)."""
    input:
        cfg=res("config/zoo.json"),
    output:
        curves=res("zoo/{game}/nashconv.parquet"),
        checks=res("zoo/{game}/openspiel.parquet"),
    log:
        res("logs/zoo_game_{game}.log"),
    benchmark:
        res("benchmarks/zoo_game_{game}.tsv")
    wildcard_constraints:
        game="|".join(ZOO_GAMES),
    conda:
        CONDA_ENV
    threads: 1
    resources:
        mem_mb=4000,
        runtime=zoo_runtime,
    shell:
        "neurd zoo-game --config {input.cfg} --game {wildcards.game}"
        " --curves {output.curves} --checks {output.checks} > {log} 2>&1"


rule zoo_summary:
    """Every game's tuned curves in one summary, the claims in the audit's form, the
    figure grid, the rank figure and the page's generated part."""
    input:
        cfg=res("config/zoo.json"),
        curves=expand(res("zoo/{game}/nashconv.parquet"), game=ZOO_GAMES),
        checks=expand(res("zoo/{game}/openspiel.parquet"), game=ZOO_GAMES),
    output:
        summary=res("zoo/summary.parquet"),
        claims=res("zoo/claims.csv"),
        grid=res("zoo/grid.png"),
        grid_pdf=res("zoo/grid.pdf"),
        ranks=res("zoo/ranks.png"),
        ranks_pdf=res("zoo/ranks.pdf"),
        page=res("zoo/page.md"),
    log:
        res("logs/zoo_summary.log"),
    benchmark:
        res("benchmarks/zoo_summary.tsv")
    localrule: True
    conda:
        CONDA_ENV
    shell:
        "neurd zoo-summary --config {input.cfg} --curves {input.curves}"
        " --checks {input.checks} --summary {output.summary} --claims {output.claims}"
        " --grid {output.grid} {output.grid_pdf} --ranks {output.ranks} {output.ranks_pdf}"
        " --page {output.page} > {log} 2>&1"


# Every file the zoo makes, all targets of `rule zoo`, so a missing one is made again (as
# DOCUMENTED for `rule all`).
ZOO_MADE = [
    *expand(rules.zoo_game.output, game=ZOO_GAMES),
    *rules.zoo_summary.output,
]


rule zoo:
    """The zoo's target (make zoo)."""
    input:
        ZOO_MADE,
    localrule: True
