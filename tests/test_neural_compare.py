"""Neural NeuRD vs SPG on a game of one's own: docs/neural.md runs as written, from Python
(`neurd.comparison.compare`) and from a config file through the pipeline, and both give the
same numbers; compare's defaults are the config's; bad arguments are refused by name."""

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from neurd.audit import VERDICTS
from neurd.comparison import DEFAULTS, compare
from neurd.names import LEARNERS
from neurd.pipeline.neural import TABLES

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "neural.md"
GAME = "liars_dice(numdice=1,dice_sides=3)"


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(), flags=re.S)


@pytest.fixture(scope="module")
def documented():
    """Every ```python block of docs/neural.md, in order, in one namespace."""
    namespace = {}
    exec(compile("\n".join(_blocks("python")), str(DOC), "exec"), namespace)  # noqa: S102
    return namespace


def test_the_documented_python_runs_and_gives_the_tables_it_promises(documented):
    result = documented["result"]
    configurations = 2 * 2 * 2  # algorithms x entropy levels x seeds
    assert result.game.num_infostates == 192 and result.game.num_actions == 7
    for name, columns in TABLES.items():
        assert list(getattr(result, name).columns) == list(columns), name
    nashconv = result.nashconv
    assert set(nashconv.phase) == {1, 2, 3} and nashconv.iteration.max() == 300
    assert nashconv.groupby(["algorithm", "entropy", "seed"]).ngroups == configurations
    assert np.all(np.isfinite(nashconv.nash_conv)) and np.all(nashconv.nash_conv >= 0)
    assert len(result.summary) == configurations
    sums = result.policies.groupby(["algorithm", "entropy", "seed", "phase", "infostate"]
                                   ).probability.sum()
    assert np.allclose(sums, 1.0, atol=1e-12)
    ci = result.nashconv_ci
    assert np.all((ci.ci_low <= ci["mean"] + 1e-12) & (ci["mean"] <= ci.ci_high + 1e-12))
    table = result.table()
    assert table.shape == (2, 4) and list(table.index) == [0.0, 0.1]
    assert np.allclose(table["final_nash_conv"].to_numpy(),
                       result.summary.groupby(["entropy", "algorithm"]).final_nash_conv.mean()
                       .unstack().to_numpy())
    # the uniform policy's NashConv: the game itself in phases 1 and 3, negated in phase 2
    assert result.uniform_nash_conv[0] == result.uniform_nash_conv[2] > 0
    # the first checkpoint is the untrained networks, shared by NeuRD and SPG
    start = nashconv[nashconv.iteration == 0].pivot_table(
        index=["entropy", "seed"], columns="algorithm", values="nash_conv")
    assert np.array_equal(start["neurd"], start["spg"])
    assert set(documented["DEFAULTS"]) == set(DEFAULTS)


def test_compare_defaults_are_the_config_sections():
    schema = yaml.safe_load((ROOT / "workflow/schemas/neural.schema.yaml").read_text())
    properties = schema["properties"]["neural"]["properties"]

    def default(node):
        if node.get("type") == "object" and "properties" in node:
            return {**node["default"], **{k: default(v) for k, v in node["properties"].items()}}
        return node["default"]

    assert {key: default(properties[key]) for key in DEFAULTS} == DEFAULTS
    assert DEFAULTS["algorithms"] == list(LEARNERS)
    signature = compare.__kwdefaults__
    assert signature["checkpoints"] == properties["checkpoints"]["properties"]["linear"][
        "default"]
    assert signature["geometric"] == properties["checkpoints"]["properties"]["geometric"][
        "default"]


@pytest.mark.parametrize("arguments, message", [
    ({"iterations": 102}, r"iterations must be a multiple of .*\(4\), got 102"),
    ({"iterations": 0}, r"iterations must be an integer"),
    ({"iterations": 100.0}, r"iterations must be an integer"),
    ({"seeds": 1}, r"seeds must be an integer in \[2,"),
    ({"phases": 0}, r"phases must be an integer"),
    ({"entropies": []}, r"entropies must be"),
    ({"entropies": [0.1, 0.1]}, r"entropies must be distinct"),
    ({"entropies": [-0.1]}, r"entropies must be"),
    ({"entropies": [float("nan")]}, r"entropies must be"),
    ({"critic": "oracle"}, r"critic must be one of"),
    ({"name": "Liar's dice"}, r"name must be a short lower-case name"),
    ({"algorithms": ["neurd", "adam"]}, r"algorithms must be distinct names"),
    ({"learning_rate": 0.1}, r"unknown setting 'learning_rate'"),
    ({"checkpoints": 2}, r"checkpoints must be an integer in \[3,"),
])
def test_bad_arguments_are_refused_by_name_before_anything_runs(arguments, message):
    with pytest.raises(ValueError, match=message):
        compare(GAME, **arguments)


def test_a_game_the_networks_cannot_take_is_refused_with_the_reason():
    from neurd.games import GameError

    with pytest.raises(GameError, match="information-state tensor"):
        compare("oshi_zumo(coins=4,size=1,horizon=3)", iterations=4)
    with pytest.raises(GameError, match="the engine needs 2"):
        compare("kuhn_poker(players=3)", iterations=4)
    with pytest.raises(TypeError, match="game string or a CompiledGame"):
        compare(42)


def _command(line: str) -> list[str]:
    """A documented command run with this interpreter's neurd and snakemake."""
    words = shlex.split(line)
    if words[0] == "snakemake":
        return [sys.executable, "-m", "snakemake", *words[1:]]
    if words[0] == "neurd":
        return [str(Path(sys.executable).parent / "neurd"), *words[1:]]
    raise AssertionError(f"docs/neural.md: unexpected command {line!r}")


@pytest.mark.workflow
def test_the_documented_config_file_gives_fig6_and_compares_numbers(documented, tmp_path):
    """The ```yaml block as liars.yaml and the ```bash commands, in a copy of the workflow:
    Fig 6 and its audit for the game, and the game's tables equal to compare()'s."""
    for name in ("Snakefile", "workflow", "profiles", "published"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    (config_text,) = _blocks("yaml")
    (tmp_path / "liars.yaml").write_text(config_text)
    (commands,) = _blocks("bash")
    env = {**os.environ, "NEURD_PROGRESS_SECONDS": "0"}
    for line in filter(None, commands.splitlines()):
        done = subprocess.run(_command(line), cwd=tmp_path, capture_output=True, text=True,
                              env=env)
        assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
    results = tmp_path / "results/liars"
    assert (results / "figures/fig6.png").stat().st_size > 10_000
    audit = pd.read_csv(results / "audit/fig6.csv")
    assert len(audit) >= 4 and set(audit.verdict) <= set(VERDICTS)
    # 2 seeds and 2 entropy levels: "ends lowest" has too few pairs for an interval and the
    # grid no inside level: unmeasured, each row saying why; the game's own sizes, not a
    # fraction of the paper's
    rows = audit.set_index(audit.claim.str.split(": ", n=1).str[1])
    final = rows.loc["NeuRD ends with the lowest final NashConv"]
    grid = rows.loc["the entropy grid brackets each algorithm's best level"]
    assert final.verdict == "unmeasured" and "2 pairs are too few" in final.measured
    assert grid.verdict == "unmeasured" and "a grid of 2 levels has no level" in grid.measured
    label = "[liars scale: 100 iterations per phase, 2 seeds (a game the paper did not run)]"
    assert audit.measured.str.startswith(label).all(), audit.measured.iloc[0]
    assert not audit.measured.str.contains("0.33e6|of 40 seeds").any()
    for name in TABLES:
        piped = pd.read_parquet(results / f"neural/liars/{name}.parquet")
        pd.testing.assert_frame_equal(piped, getattr(documented["result"], name),
                                      check_dtype=False)
