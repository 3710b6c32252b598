"""The zoo (neurd.pipeline.zoo): its games chosen by a rule from OpenSpiel's registry, its
runs against OpenSpiel on a prefix, its summary, verdicts and page, and its Snakemake target.

The oracles: OpenSpiel's registry and game types for the selection; OpenSpiel's own
``CFRSolver`` and ``CFRPlusSolver`` for CFR and CFR+; OpenSpiel's Python CFR with its
regret matching replaced by NeuRD's or SPG's logit step for CFR(NeuRD) and CFR(SPG), its
average policy's NashConv by OpenSpiel's ``exploitability.nash_conv``.
"""

import copy
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyspiel
import pytest

from neurd import names
from neurd.audit import VERDICTS, read_audits, write_audit
from neurd.config import ConfigError
from neurd.games import GameError, compile_game
from neurd.pipeline import tabular, zoo, zoo_registry
from neurd.stages import load_config, snapshot
from neurd.tables import config_hash

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.usefixtures("float64")

# Small games of the zoo, at the zoo's kind of parameters, short runs.
SMALL = {"kuhn_poker": "kuhn_poker", "oshi_zumo": "oshi_zumo(coins=4,size=1,min_bid=1)",
         "matrix_rps": "matrix_rps"}


@pytest.fixture(scope="module")
def config():
    return load_config([], ROOT, games=False)


def _small_cfg(config, iterations=100, prefix=None):
    cfg = copy.deepcopy(snapshot(config, "zoo"))
    cfg.update(game_strings=dict(SMALL), iterations=iterations, checkpoints=21,
               step_sizes=[0.5, 4.0], openspiel_check_iterations=prefix)
    return cfg


@pytest.fixture(scope="module")
def small_runs(config):
    from neurd.precision import float64

    cfg = _small_cfg(config)
    with float64():
        return cfg, {game: zoo.run_game(cfg, game) for game in SMALL}


# --- the rule ---------------------------------------------------------------------------


def test_the_rule_selects_from_the_registry_by_type(config):
    rule = config["zoo"]["rule"]
    selected, outside = zoo_registry.registry(rule)
    types = {t.short_name: t for t in pyspiel.registered_games()}
    assert set(selected) | set(outside) <= set(types) and not set(selected) & set(outside)
    for name in selected:
        kind = types[name]
        assert kind.min_num_players <= 2 <= kind.max_num_players
        assert kind.utility == pyspiel.GameType.Utility.ZERO_SUM
        assert kind.provides_information_state_string
    assert {"kuhn_poker", "leduc_poker", "goofspiel", "matrix_rps", "hex"} <= set(selected)
    assert outside["bridge"] == "4 players, not 2"
    assert outside["matrix_pd"] == "general-sum utility"
    assert outside["breakthrough"] == "no information-state string"
    assert "1 players, not 2" not in outside.values() and outside["catch"].startswith("1 players")


def test_the_registry_read_is_openspiels_own_whatever_the_process_imported(config):
    """OpenSpiel's Python packages register more games in the process that imports them
    (python_kuhn_poker, ...); the rule reads the registry of ``import pyspiel`` alone."""
    import open_spiel.python.games  # noqa: F401  (registers OpenSpiel's Python games)

    rule = config["zoo"]["rule"]
    before = zoo_registry.registry(rule)
    zoo_registry.registered_games.cache_clear()
    assert "python_kuhn_poker" in {t.short_name for t in pyspiel.registered_games()}
    assert zoo_registry.registry(rule) == before
    assert not [name for name in [*before[0], *before[1]] if name.startswith("python_")]


def test_every_selected_game_is_run_or_excluded_with_a_reason(config):
    cfg = config["zoo"]
    chosen = zoo_registry.selection(cfg)
    selected, _ = zoo_registry.registry(cfg["rule"])
    assert sorted([*chosen["games"], *chosen["excluded"]]) == sorted(selected)
    assert all(reason.strip() for reason in chosen["excluded"].values())
    assert all(reason.strip() for reason in chosen["outside"].values())
    for name, string in chosen["games"].items():
        assert string.split("(")[0] == name


@pytest.mark.parametrize("string", ["dark_hex_ir(num_rows=2,num_cols=2)",
                                    "liars_dice_ir(numdice=1,dice_sides=3)"])
def test_an_imperfect_recall_exclusion_is_what_the_compiler_says(config, string):
    name = string.split("(")[0]
    assert "perfect recall" in config["zoo"]["excluded"][name]
    with pytest.raises(GameError, match="does not have perfect recall"):
        compile_game(string)


@pytest.mark.parametrize("change, message", [
    (lambda c: c["game_strings"].pop("hex"), r"zoo.game_strings.*\['hex'\].*neither"),
    (lambda c: c["excluded"].update(bridge="too many players"),
     r"zoo.excluded.bridge.*rule leaves it out: 4 players"),
    (lambda c: c["game_strings"].update(nope="nope"), r"zoo.game_strings.nope"),
])
def test_selection_refuses_a_gap_or_a_stray_game_naming_the_key(config, change, message):
    cfg = copy.deepcopy(config["zoo"])
    change(cfg)
    with pytest.raises(ConfigError, match=message):
        zoo_registry.selection(cfg)


@pytest.mark.parametrize("change, message", [
    (lambda c: c["excluded"].update(hex="both"), r"zoo.excluded.hex.*both run"),
    (lambda c: c["game_strings"].update(hex="y(board_size=2)"), r"zoo.game_strings.hex.*not game"),
])
def test_cross_checks_name_the_key(config, change, message):
    cfg = copy.deepcopy(config["zoo"])
    change(cfg)
    with pytest.raises(ConfigError, match=message):
        zoo.check(cfg)


def test_a_game_string_openspiel_cannot_load_is_refused_naming_the_key(config):
    cfg = copy.deepcopy(config["zoo"])
    cfg["game_strings"]["hex"] = "hex(board_size=2,no_such_parameter=1)"
    with pytest.raises(ConfigError, match=r"zoo.game_strings.hex.*no_such_parameter"):
        zoo.inspect(cfg, config["limits"])


# --- the runs against OpenSpiel ---------------------------------------------------------


def test_cfr_and_cfr_plus_equal_openspiels_over_the_whole_short_run(small_runs):
    """OpenSpiel's CFRSolver and CFRPlusSolver (C++) over every checkpoint of a 100-iteration
    run (prefix null), on a poker, a simultaneous-move game made turn-based and a matrix
    game: NashConv and average policy within 1e-9 of the engine's."""
    cfg, runs = small_runs
    for game, (curves, checks, _) in runs.items():
        assert set(checks.algorithm) == set(names.REFERENCE_SOLVERS)
        for solver in names.REFERENCE_SOLVERS:
            rows = checks[checks.algorithm == solver]
            assert list(rows.iteration) == list(zoo.checkpoints(cfg)), (game, solver)
            assert np.abs(rows.nash_conv - rows.nash_conv_drawn).max() <= tabular.AGREEMENT
            assert rows.policy_difference.max() <= tabular.AGREEMENT
            drawn = curves[curves.algorithm == solver].set_index("iteration").nash_conv
            np.testing.assert_array_equal(drawn.loc[rows.iteration], rows.nash_conv_drawn)


def test_a_cfr_plus_that_parts_from_openspiels_stops_the_summary(small_runs):
    cfg, runs = small_runs
    tables, checks, infos = zip(*runs.values())
    broken = [check.copy() for check in checks]
    broken[0].loc[broken[0].algorithm == names.CFR_PLUS, "nash_conv_drawn"] += 1e-6
    with pytest.raises(tabular.ReferenceMismatch, match="parts from OpenSpiel"):
        zoo.summarise(cfg, list(tables), list(infos), broken)


class LogitCFR:
    """OpenSpiel's Python CFR (alternating updates, reach-weighted average) with regret
    matching replaced by a logit learner at every information state: NeuRD's
    ``y += eta * r`` or SPG's ``y += eta * pi * r``, ``r`` the iteration's counterfactual
    regret, ``pi = softmax(y)``."""

    def __init__(self, game, learner, eta):
        from open_spiel.python.algorithms import cfr

        self.solver = cfr._CFRSolver(game, regret_matching_plus=False,
                                     alternating_updates=True, linear_averaging=False)
        self.learner, self.eta = learner, eta
        nodes = self.solver._info_state_nodes
        self.logits = {k: dict.fromkeys(n.legal_actions, 0.0) for k, n in nodes.items()}
        self.seen = {k: dict.fromkeys(n.legal_actions, 0.0) for k, n in nodes.items()}

    def iterate(self):
        solver = self.solver
        solver._iteration += 1
        for player in (0, 1):
            solver._compute_counterfactual_regret_for_player(
                solver._root_node, policies=None, reach_probabilities=np.ones(3), player=player)
            for key, node in solver._info_state_nodes.items():
                pi = solver._current_policy.policy_for_key(key)
                for a in node.legal_actions:
                    regret = node.cumulative_regret[a] - self.seen[key][a]
                    self.seen[key][a] = node.cumulative_regret[a]
                    weight = 1.0 if self.learner == names.NEURD else pi[a]
                    self.logits[key][a] += self.eta * weight * regret
                top = max(self.logits[key].values())
                exp = {a: math.exp(y - top) for a, y in self.logits[key].items()}
                for a in node.legal_actions:
                    pi[a] = exp[a] / sum(exp.values())


@pytest.mark.parametrize("game", ["kuhn_poker", "oshi_zumo"])
def test_neurd_and_spg_equal_openspiels_cfr_with_their_logit_step(small_runs, game):
    """The zoo's CFR(NeuRD) and CFR(SPG) NashConv at the checkpoints of a 30-iteration prefix,
    at two step sizes each, against OpenSpiel's Python CFR with the learner's step
    (OpenSpiel's NashConv of its average policy), to 1e-9."""
    from open_spiel.python.algorithms import exploitability

    cfg, runs = small_runs
    curves = runs[game][0]
    openspiel = pyspiel.load_game(SMALL[game])
    if openspiel.get_type().dynamics == pyspiel.GameType.Dynamics.SIMULTANEOUS:
        openspiel = pyspiel.convert_to_turn_based(openspiel)
    points = [int(p) for p in zoo.checkpoints(cfg) if p <= 30]
    for learner in names.LEARNERS:
        for eta in (0.5, 4.0):
            oracle, theirs = LogitCFR(openspiel, learner, eta), []
            for t in range(1, points[-1] + 1):
                oracle.iterate()
                if t in points:
                    theirs.append(exploitability.nash_conv(openspiel,
                                                           oracle.solver.average_policy()))
            ours = curves[(curves.algorithm == learner) & (curves.step_size == eta)
                          & curves.iteration.isin(points)].sort_values("iteration")
            np.testing.assert_allclose(ours.nash_conv, theirs, rtol=0, atol=1e-9,
                                       err_msg=f"{learner} eta={eta} on {game}")


# --- the summary, the verdicts, the page ------------------------------------------------


@pytest.fixture(scope="module")
def summary(small_runs):
    cfg, runs = small_runs
    tables, checks, infos = zip(*runs.values())
    return zoo.summarise(cfg, list(tables), list(infos), list(checks))


def test_summary_columns_and_values_follow_from_the_curves(small_runs, summary):
    cfg, runs = small_runs
    assert list(summary.columns) == [
        "game", "game_string", "histories", "infostates", "learner", "step_size",
        "nash_conv_1", "nash_conv_10", "nash_conv_100", "uniform_nash_conv",
        "iterations_to_1pct", "iterations_to_0.1pct", "rank"]
    assert list(zoo.summary_columns(cfg)) == list(summary.columns)
    assert sorted(summary.game.unique()) == sorted(SMALL)
    for game, (curves, _, info) in runs.items():
        rows = summary[summary.game == game].set_index("learner")
        assert sorted(rows.index) == sorted(zoo.LEARNERS)
        assert rows.histories.iloc[0] == info["histories"] == compile_game(
            SMALL[game]).num_histories
        final = curves[curves.iteration == 100]
        for learner in names.LEARNERS:  # tuned: the sweep's lowest final NashConv
            best = final[final.algorithm == learner].nash_conv.min()
            assert rows.loc[learner, "nash_conv_100"] == best
            assert rows.loc[learner, "step_size"] in cfg["step_sizes"]
        for learner in names.REFERENCE_SOLVERS:
            assert math.isnan(rows.loc[learner, "step_size"])
        assert rows.nash_conv_1.max() == pytest.approx(info["uniform_nash_conv"], abs=1e-12)
        ranks = rows["rank"].to_numpy()
        assert ranks.min() == 1 and set(ranks) <= {1, 2, 3, 4}
        assert rows.loc[rows["rank"] == 1, "nash_conv_100"].min() == rows.nash_conv_100.min()
    kuhn = summary[(summary.game == "kuhn_poker")].set_index("learner")
    reached = kuhn.loc[names.CFR_PLUS, "iterations_to_1pct"]
    curve = runs["kuhn_poker"][0]
    curve = curve[curve.algorithm == names.CFR_PLUS].set_index("iteration").nash_conv
    level = 0.01 * kuhn.uniform_nash_conv.iloc[0]
    assert curve.loc[reached] <= level and (curve.loc[:reached].iloc[:-1] > level).all()


def test_verdicts_in_the_audits_form(summary, small_runs, tmp_path):
    cfg, _ = small_runs
    found = zoo.claims(summary, cfg)
    assert len(found) == 4 * len(SMALL)
    assert {c.claim.split(": ", 1)[1] for c in found} == {
        "NeuRD ends below SPG", "NeuRD reaches 1% sooner than SPG",
        "NeuRD ends below CFR (regret matching)", "NeuRD ends below CFR+"}
    assert {c.figure for c in found} == {"zoo"}
    write_audit(found, tmp_path / "claims.csv")
    frame = read_audits([tmp_path / "claims.csv"])  # re-derives every verdict from its checks
    assert set(frame.verdict) <= set(VERDICTS)
    verdicts = {c.claim: c.verdict for c in found}
    # RPS: the uniform start is the equilibrium, every learner stays at NashConv 0
    assert verdicts["matrix_rps: NeuRD ends below SPG"] == "tie"
    assert verdicts["matrix_rps: NeuRD reaches 1% sooner than SPG"] == "tie"
    kuhn = summary[summary.game == "kuhn_poker"].set_index("learner")
    expected = "pass" if kuhn.loc["neurd", "nash_conv_100"] < kuhn.loc["spg", "nash_conv_100"] \
        else "fail"
    assert verdicts["kuhn_poker: NeuRD ends below SPG"] == expected


def test_a_level_neither_reaches_is_unmeasured(summary, small_runs):
    cfg, _ = small_runs
    rows = summary[summary.game == "kuhn_poker"].copy()
    rows["iterations_to_1pct"] = np.nan
    claim = next(c for c in zoo.claims(rows, cfg) if "sooner" in c.claim)
    assert claim.verdict == "unmeasured"


def test_page_text_is_the_summary_and_every_exclusion(summary, small_runs, config):
    cfg, _ = small_runs
    full = {**cfg, "game_strings": config["zoo"]["game_strings"]}
    text = zoo.page_text(full, summary, zoo.audit_frame(zoo.claims(summary, cfg)))
    assert text.startswith(zoo.MARK[0]) and text.rstrip().endswith(zoo.MARK[1])
    for row in summary.to_dict("records"):
        assert f"| `{SMALL[row['game']]}` | {row['histories']} |" in text
    for name, reason in config["zoo"]["excluded"].items():
        assert f"| {name} | {reason} |" in text
    assert "| bridge | 4 players, not 2 |" in text
    page = f"# title\n\nbefore\n\n{zoo.MARK[0]}\nold\n{zoo.MARK[1]}\n\nafter\n"
    spliced = zoo.splice_page(page, text)
    assert spliced == f"# title\n\nbefore\n\n{text}\nafter\n"
    assert zoo.splice_page(spliced, text) == spliced  # idempotent


def _generated_part(page: str) -> str:
    start, end = page.index(zoo.MARK[0]), page.index(zoo.MARK[1])
    return page[start:end + len(zoo.MARK[1])] + "\n"


def test_docs_page_is_the_run_of_this_config(config):
    """docs/zoo.md's generated part: from a run of this config (its hash), of every game the
    config runs, with every exclusion the config and the rule give; where the run's
    results/zoo/page.md is here, equal to it."""
    page = _generated_part((ROOT / "docs/zoo.md").read_text(encoding="utf-8"))
    cfg = snapshot(config, "zoo")
    assert f"(hash `{config_hash(cfg)}`)" in page
    rows = re.findall(r"^\| `([^`]+)` \| (\d+) \| (\d+) \| ([^|]+) \|", page, re.M)
    assert {r[0] for r in rows} == set(cfg["game_strings"].values())
    assert len(rows) == 4 * len(cfg["game_strings"])
    for string, histories, _, _ in rows:
        assert int(histories) == compile_game(string).num_histories
    chosen = zoo_registry.selection(cfg)
    for name, reason in [*chosen["excluded"].items(), *chosen["outside"].items()]:
        assert f"| {name} | {reason} |" in page
    run = ROOT / "results/zoo/page.md"
    if run.exists():
        assert page == run.read_text(encoding="utf-8")


# --- the workflow -----------------------------------------------------------------------


def test_a_games_job_asks_for_more_time_for_longer_runs(config):
    """The rule's runtime, from the config section as the Snakefile holds it (no seed)."""
    cfg = config["zoo"]
    longer = {**cfg, "iterations": 100 * cfg["iterations"]}
    for game in cfg["game_strings"]:
        assert 10 < zoo.runtime_minutes(cfg, game) < zoo.runtime_minutes(longer, game)


def _snakemake(workdir, *args):
    return subprocess.run([sys.executable, "-m", "snakemake", *args], cwd=workdir,
                          capture_output=True, text=True)


def _planned_jobs(output: str) -> dict[str, int]:
    table = re.search(r"Job stats:\n(.*?)\n\n", output, re.S)
    assert table, output[-3000:]
    return {row.split()[0]: int(row.split()[1]) for row in table.group(1).splitlines()[2:]
            if len(row.split()) == 2 and row.split()[0] != "total"}


@pytest.mark.workflow
def test_make_zoo_is_one_job_per_game_resumable_and_not_part_of_rule_all(config, tmp_path):
    for name in ("Snakefile", "workflow", "profiles", "published"):
        source = ROOT / name
        (shutil.copytree if source.is_dir() else shutil.copy)(source, tmp_path / name)
    games = sorted(config["zoo"]["game_strings"])
    plan = _snakemake(tmp_path, "zoo", "-n", "--cores", "2")
    assert plan.returncode == 0, plan.stderr[-3000:]
    assert _planned_jobs(plan.stdout) == {"config_snapshot": 1, "zoo": 1,
                                          "zoo_game": len(games), "zoo_summary": 1}
    everything = _snakemake(tmp_path, "-n", "--cores", "2")
    assert everything.returncode == 0 and "zoo_game" not in _planned_jobs(everything.stdout)
    made = _snakemake(tmp_path, "results/config/zoo.json", "--cores", "1")
    assert made.returncode == 0, made.stderr[-3000:]
    for game in games[2:]:  # a run stopped after all but two games' jobs
        for name in ("nashconv", "openspiel"):
            path = tmp_path / f"results/zoo/{game}/{name}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"made")
    again = _snakemake(tmp_path, "zoo", "-n", "--cores", "2")
    assert again.returncode == 0, again.stderr[-3000:]
    assert _planned_jobs(again.stdout) == {"zoo": 1, "zoo_game": 2, "zoo_summary": 1}
    for game in games[:2]:
        assert f"results/zoo/{game}/nashconv.parquet" in again.stdout


def _page_tables(page: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The generated part's summary table and its table of verdicts per game."""
    tables, current = [], []
    for line in [*page.splitlines(), ""]:
        if line.startswith("|"):
            current.append([cell.strip() for cell in line.strip("|").split(" | ")])
        elif current:
            tables.append(pd.DataFrame(current[2:], columns=current[0]))
            current = []
    summary = next(t for t in tables if "learner" in t.columns)
    verdicts = next(t for t in tables if "NeuRD ends below SPG" in t.columns)
    return summary, verdicts


def test_what_the_page_says_the_zoo_shows_is_what_its_table_holds():
    """The prose of docs/zoo.md, checked against its generated tables: NeuRD ends below SPG
    and reaches 1% sooner in every game whose uniform policy is not already Nash, every
    claim is a tie in those that are; CFR+ ranks first in every game and NeuRD never ends
    below it; NeuRD ends below CFR in the games the page names."""
    page = (ROOT / "docs/zoo.md").read_text(encoding="utf-8")
    summary, verdicts = _page_tables(_generated_part(page))
    start = summary.groupby("game")["NashConv at 1"].first().astype(float)
    games = {g.strip("`") for g in summary.game}
    verdicts = verdicts.set_index("game")
    assert len(verdicts) == len(games)
    solved = {name for name in verdicts.index if any(
        g.split("(")[0] == name and abs(start[f"`{g}`"]) <= 1e-12 for g in games)}
    assert solved and len(solved) < len(verdicts)
    for name, row in verdicts.iterrows():
        if name in solved:
            assert set(row) == {"tie"}, name
        else:
            assert row["NeuRD ends below SPG"] == "pass", name
            assert row["NeuRD reaches 1% sooner than SPG"] == "pass", name
            assert row["NeuRD ends below CFR+"] == "fail", name
    firsts = summary[summary["rank"] == "1"]
    assert set(summary.game) == set(firsts[firsts.learner == "CFR+"].game)
    below_cfr = sorted(verdicts.index[verdicts["NeuRD ends below CFR (regret matching)"]
                                      == "pass"])
    prose = page[:page.index(zoo.MARK[0])]
    named = re.search(r"NeuRD ends below CFR \(regret matching\) in ([^.]+)\.", prose)
    assert named, "the page names the games where NeuRD ends below CFR"
    assert sorted(re.findall(r"`(\w+)`", named.group(1))) == below_cfr


def test_the_page_step_replaces_only_a_generated_part_and_refuses_otherwise(tmp_path):
    """`neurd zoo-page` writes the run's part between the page's marks and nothing else: a page
    without them (a user's own page), with them twice or out of order, the generated file
    given as the page, or a generated file that is not a generated part, is refused naming the
    file, and the page is left byte for byte as it was."""
    from types import SimpleNamespace

    from neurd.tables import InputFileError

    part = f"{zoo.MARK[0]}\n\nnew rows\n\n{zoo.MARK[1]}\n"
    generated = tmp_path / "page.md"
    generated.write_text(part)
    good = tmp_path / "zoo.md"
    good.write_text(f"# Zoo\n\n{zoo.MARK[0]}\nold\n{zoo.MARK[1]}\n\nend\n")
    zoo._page_step(SimpleNamespace(generated=str(generated), page=str(good)), {})
    assert good.read_text() == f"# Zoo\n\n{part}\nend\n"
    mine = "\n".join(f"line {k} of a page of my own" for k in range(349)) + "\n"
    cases = {"no marks": mine, "twice": f"{part}\n{part}",
             "out of order": f"{zoo.MARK[1]}\nx\n{zoo.MARK[0]}\n"}
    for what, text in cases.items():
        page = tmp_path / f"{what}.md"
        page.write_text(text)
        with pytest.raises(InputFileError, match="no generated part"):
            zoo._page_step(SimpleNamespace(generated=str(generated), page=str(page)), {})
        assert page.read_text() == text, what
    with pytest.raises(InputFileError, match="is the generated file itself"):
        zoo._page_step(SimpleNamespace(generated=str(generated), page=str(generated)), {})
    assert generated.read_text() == part
    before = good.read_text()
    (tmp_path / "other.md").write_text(mine)
    with pytest.raises(InputFileError, match="not a generated part"):
        zoo._page_step(SimpleNamespace(generated=str(tmp_path / "other.md"), page=str(good)),
                       {})
    assert good.read_text() == before


@pytest.mark.parametrize("string, message", [
    ("hex(board_size=4)", r"zoo.game_strings.hex.*about [\d.e+]+ histories"),
    ("hex(board_size=3)", r"zoo.game_strings.hex.*more than 10,000 histories"),
])
def test_a_zoo_game_too_large_is_refused_by_the_config_check_naming_the_key(
        config, string, message):
    """Every zoo game is sized and compiled when the config is checked, as its job would (the
    whole zoo in about a second): one too large for the limits is refused then, not by its
    job after gigabytes."""
    import time

    cfg = copy.deepcopy(config["zoo"])
    cfg["game_strings"]["hex"] = string
    start = time.monotonic()
    with pytest.raises(ConfigError, match=message):
        zoo.inspect(cfg, dict(config["limits"], max_histories=10_000))
    assert time.monotonic() - start < 20


def test_a_zoo_game_without_perfect_recall_is_refused_by_the_config_check(config):
    cfg = copy.deepcopy(config["zoo"])
    cfg["game_strings"]["dark_hex"] = "dark_hex(num_rows=2,num_cols=2,abrupt=True)"
    try:
        compile_game("dark_hex(num_rows=2,num_cols=2,abrupt=True)")
    except GameError:
        with pytest.raises(ConfigError, match="zoo.game_strings.dark_hex"):
            zoo.inspect(cfg, config["limits"])
    else:
        pytest.skip("this OpenSpiel's abrupt dark hex has perfect recall")
