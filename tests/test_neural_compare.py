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


def test_the_documented_users_algorithm_runs_beside_the_built_in_ones(documented):
    mine = documented["mine"]
    assert list(mine.summary.algorithm.unique()) == ["clipped_spg", "neurd", "rpg", "spg"]
    assert np.all(np.isfinite(mine.nashconv.nash_conv))
    start = mine.nashconv[mine.nashconv.iteration == 0].pivot_table(
        index="seed", columns="algorithm", values="nash_conv")
    assert np.all(start.to_numpy() == start[["neurd"]].to_numpy())  # the same first networks


def test_compare_defaults_are_the_config_sections():
    schema = yaml.safe_load((ROOT / "workflow/schemas/neural.schema.yaml").read_text())
    properties = schema["properties"]["neural"]["properties"]

    def default(node):
        if node.get("type") == "object" and "properties" in node:
            return {**node["default"], **{k: default(v) for k, v in node["properties"].items()}}
        return node["default"] if "default" in node else node["x-default"]  # x-: if given

    assert {key: default(properties[key]) for key in DEFAULTS} == DEFAULTS
    assert DEFAULTS["algorithms"] == list(LEARNERS)
    signature = compare.__kwdefaults__
    assert signature["checkpoints"] == properties["checkpoints"]["properties"]["linear"][
        "default"]
    assert signature["geometric"] == properties["checkpoints"]["properties"]["geometric"][
        "default"]


@pytest.mark.parametrize("arguments, message", [
    ({"iterations": 102}, r"argument iterations: .*must be a multiple of .*\(4\), got 102"),
    ({"iterations": 0}, r"argument iterations: .*0 is less than the minimum of 4"),
    ({"iterations": 100.5}, r"argument iterations: .*100.5 is not of type 'integer'"),
    ({"seeds": 1}, r"argument seeds: config key 'neural.seeds': 1 is less than the minimum"),
    ({"phases": 0}, r"argument phases: .*0 is less than the minimum of 1"),
    ({"entropies": []}, r"argument entropies: .*should be non-empty"),
    ({"entropies": [0.1, 0.1]}, r"argument entropies: .*non-unique elements"),
    ({"entropies": [-0.1]}, r"argument entropies: config key 'neural.entropies\[0\]'"),
    ({"entropies": [float("nan")]}, r"argument entropies: .*neural.entropies\[0\] = nan"),
    ({"critic": "oracle"}, r"argument critic: .*'oracle' is not one of \['learned', 'exact'\]"),
    ({"name": "Liar's dice"}, r"argument name: config key 'neural.games\[0\]'"),
    ({"algorithms": ["neurd", "adam"]}, r"argument algorithms: .*'adam' is not registered"),
    ({"learning_rate": 0.1}, r"unknown setting 'learning_rate'"),
    ({"checkpoints": 2}, r"argument final_checkpoints: .*must not exceed "
                         r"neural.checkpoints.linear \(2\)"),
    # what a config file refuses, compare() refused too: it once ran these, or failed in JAX
    ({"policy_learning_rate": -0.1}, r"argument policy_learning_rate: config key "
                                     r"'neural.policy_learning_rate': -0.1 is less than or "
                                     r"equal to the minimum of 0"),
    ({"critic_batch": 0}, r"argument critic_batch: .*0 is less than the minimum of 1"),
    ({"neurd_logits": "centered"}, r"argument neurd_logits: .*'centered' is not one of"),
    ({"optimizer": "rmsprop"}, r"argument optimizer: .*'rmsprop' is not one of"),
    ({"hidden_sizes": [-3]}, r"argument hidden_sizes: config key 'neural.hidden_sizes\[0\]': "
                             r"-3 is less than the minimum of 1"),
])
def test_bad_arguments_are_refused_by_name_before_anything_runs(arguments, message):
    with pytest.raises(ValueError, match=message):
        compare(GAME, **arguments)


# Every keyword of compare() with a bad value of each kind: of the wrong type, out of its
# range (or not one of its choices), not finite, a boolean for a number
NAN = float("nan")
BAD_VALUES = {
    "iterations": ["1000", 2, 1002, NAN, True],
    "phases": ["3", 0, 101, NAN, True],
    "seeds": ["2", 1, 10**5, NAN, True],
    "entropies": ["0.1", [], [-1.0], [101.0], [NAN], [0.1, 0.1], [True], 0.1],
    "seed": ["0", -1, 2**31, NAN, True],
    "critic": [1, "oracle", ["learned"]],
    "checkpoints": ["20", 0, 10**5, NAN, True],
    "geometric": ["10", -1, 10**5, NAN, True],
    "name": [1, "Kuhn", "k" * 33, "1kuhn", ""],
    "algorithms": ["neurd", [], ["neurd", "neurd"], ["adam"], [1]],
    "hidden_sizes": [128, [], [0], [-3], [65537], [NAN], [1.5], [True], [1] * 9],
    "critic_batch": ["4", 0, 10**7, NAN, True, 4.5],
    "policy_batch": ["256", 0, 10**7, NAN, True, 2.5],
    "critic_updates_per_policy_update": ["4", 0, 1001, NAN, True],
    "policy_learning_rate": ["0.1", 0.0, -0.1, 101.0, NAN, float("inf"), True],
    "critic_learning_rate": ["0.1", 0.0, -0.1, 101.0, NAN, float("-inf"), True],
    "optimizer": [1, "rmsprop", "SGD"],
    "matmul_precision": [32, "float64", "highest"],
    "neurd_logits": [0, "centered", "RAW"],
    "loss_normalisation": [None, "mean", "sum"],
    "networks": [2, "triple", "separate"],
    "beta": ["2", 0.0, -1.0, 1001.0, NAN, True],
    "algorithm_options": ["x", [], {"spg": {"x": 1.0}}, {"rpg": {}}, {"neurd": {"beta": 3.0}},
                          {"Neurd": {}}, {"spg": {"x": NAN}}],
    "seeds_per_batch": ["5", 0, 10**5, NAN, True],
    "final_checkpoints": ["3", 0, 21, NAN, True],
    "bootstrap": [1000, {"resamples": 10}, {"confidence": 1.0}, {"method": "bca"},
                  {"resamples": NAN}, {"samples": 1000}],
}


def test_a_mapping_setting_is_merged_over_its_default():
    from neurd import comparison

    cfg = comparison.neural_section("game", 8, 1, 2, [0.0], 0, "learned", 3, 1,
                              {"bootstrap": {"resamples": 200}})
    assert cfg["bootstrap"] == {**DEFAULTS["bootstrap"], "resamples": 200}


def test_every_keyword_is_checked_before_any_compilation_as_the_config_checks_it(monkeypatch):
    """Each keyword, each kind of bad value: refused in one line naming the argument and its
    config key, before the game is compiled; a setting's message is the config file's."""
    from neurd import comparison
    from neurd.config import ConfigError
    from neurd.stages import validate

    keywords = (set(compare.__kwdefaults__) | set(DEFAULTS)) - {"max_hours"}  # no config key
    assert set(BAD_VALUES) == keywords, keywords ^ set(BAD_VALUES)

    def compiled(*_, **__):
        raise AssertionError("compiled before its arguments were checked")

    monkeypatch.setattr(comparison.games, "compile_game", compiled)
    for keyword, values in BAD_VALUES.items():
        for value in values:
            with pytest.raises(ConfigError) as info:
                compare(GAME, **{keyword: value})
            message = str(info.value)
            assert "\n" not in message and message.startswith(
                f"compare: argument {keyword}: config"), (keyword, value, message)
            if keyword in DEFAULTS:  # a setting: the message a config file's value gets
                config = yaml.safe_load((ROOT / "workflow/config/default.yaml").read_text())
                config["neural"][keyword] = value
                with pytest.raises(ConfigError) as from_file:
                    validate(config, ROOT / "workflow/schemas", games=False)
                assert message.removeprefix(f"compare: argument {keyword}: ") == str(
                    from_file.value), (keyword, value)


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


def test_a_run_far_longer_than_allowed_is_refused_with_its_estimate():
    """compare(iterations=10**8) is refused, not started for a day: by the stage's estimate
    before compiling where that passes max_hours tenfold, else at the pace its first segments
    measure; either way naming max_hours and the hours estimated."""
    import time

    from neurd.comparison import compare
    from neurd.config import ConfigError

    start = time.monotonic()
    with pytest.raises(ConfigError, match=r"compare: argument max_hours: .*about [\d.,]+ "
                                          r"hours.*pass a larger max_hours"):
        compare("kuhn_poker", iterations=10**8, max_hours=0.5)
    assert time.monotonic() - start < 120
    # an estimate within tenfold: compiled, then refused at the pace measured
    with pytest.raises(ConfigError, match=r"compare: argument max_hours: at the pace of its "
                                          r"first segments .* about [\d.]+ hours, more than "
                                          r"the 0.02 allowed"):
        compare("kuhn_poker", iterations=10**6, max_hours=0.02)
    for bad in (0, -1.0, float("nan"), float("inf"), True, "2"):
        with pytest.raises(ConfigError, match="must be a positive number of hours or None"):
            compare("no_such_game_is_compiled", iterations=100, max_hours=bad)


def test_a_run_too_large_for_the_machines_memory_is_refused_before_compiling(monkeypatch):
    from neurd import comparison
    from neurd.config import ConfigError

    monkeypatch.setattr(comparison, "available_memory_bytes", lambda: 2.0**20)
    with pytest.raises(ConfigError, match=r"would hold about [\d.]+ GiB .* more than 80% of the "
                                          r"0.0 GiB this machine has available: lower "
                                          r"seeds_per_batch"):
        comparison.compare("kuhn_poker", iterations=100)


def _labels(fig) -> tuple[list[str], list[str]]:
    """The bottom panel's algorithm ticks and the top panel's legend entries."""
    top, bottom = fig.axes[0], fig.axes[1]
    ticks = [t.get_text() for t in bottom.get_xticklabels()]
    legend = [t.get_text() for t in top.get_legend().get_texts()]
    return ticks, legend


def test_the_comparisons_figure_draws_every_algorithm_with_the_registrys_labels(documented):
    """docs/neural.md's run of NeuRD, SPG, RPG and a user's clipped SPG: each drawn, in a
    stable order (the paper's pair, the other built-ins, then the user's), labelled as
    registered; Fig 6 drawn from the same tables draws them too, its claims the paper's."""
    import matplotlib.pyplot as plt

    from neurd.figures import fig6, style
    from neurd.neural import settings

    mine = documented["mine"]
    expected = ["NeuRD", "SPG", "RPG", "clipped SPG"]
    ticks, legend = _labels(documented["figure"])
    assert ticks == expected
    assert [t.split(" ($")[0] for t in legend if "$" in t] == expected
    colours = [style.algorithm_colour(a) for a in ("neurd", "spg", "rpg", "clipped_spg")]
    assert len(set(colours)) == 4
    tables = {"nashconv": mine.nashconv, "ci": mine.nashconv_ci, "summary": mine.summary,
              "diagnostics": mine.diagnostics}
    cfg = {**mine.config, "audit_fraction": settings.default("audit_fraction")}
    fig, claims = fig6.make(tables, cfg, scale="test")
    assert _labels(fig)[0] == expected
    assert all("RPG" not in c.measured and "clipped" not in c.measured for c in claims)
    plt.close(fig)
    plt.close(documented["figure"])
