"""The zoo's games: which of OpenSpiel's registered games the config's rule selects.

The registry is read in a process that imports ``pyspiel`` alone (:func:`registered_games`:
importing OpenSpiel's Python packages registers further games in the running process). A
game the rule leaves out is listed with its reason (:func:`rule_problems`); every game the
rule selects is in exactly one of the config's ``zoo.game_strings`` and ``zoo.excluded``
(:func:`selection`). The stage is :mod:`neurd.pipeline.zoo`.
"""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from neurd.config import require


def rule_problems(game_type, rule: Mapping) -> list[str]:
    """Why the rule leaves out a registered game (:class:`GameType`); empty if it
    selects it."""
    problems = []
    players = int(rule["players"])
    if not game_type.min_num_players <= players <= game_type.max_num_players:
        count = (f"{game_type.min_num_players}" if game_type.min_num_players
                 == game_type.max_num_players else
                 f"{game_type.min_num_players}-{game_type.max_num_players}")
        problems.append(f"{count} players, not {players}")
    if game_type.utility != rule["utility"]:
        problems.append(f"{game_type.utility.replace('_', '-')} utility")
    if not game_type.provides_information_state_string:
        problems.append("no information-state string")
    return problems


@dataclass(frozen=True)
class GameType:
    """What the rule reads of a registered game's ``pyspiel.GameType``."""

    short_name: str
    min_num_players: int
    max_num_players: int
    utility: str
    provides_information_state_string: bool


# OpenSpiel's registry as ``import pyspiel`` alone gives it, read in a process of its own:
# importing OpenSpiel's Python packages (``open_spiel.python.games``, which its Python
# algorithms import) registers further games in the running process.
_REGISTRY = """import json, pyspiel
print(json.dumps([[t.short_name, t.min_num_players, t.max_num_players, t.utility.name.lower(),
                   t.provides_information_state_string] for t in pyspiel.registered_games()]))
"""


@functools.cache
def registered_games() -> tuple[GameType, ...]:
    """OpenSpiel's registered games (its C++ registry), sorted by short name."""
    done = subprocess.run([sys.executable, "-c", _REGISTRY], capture_output=True, text=True,
                          check=True)
    return tuple(GameType(*row) for row in sorted(json.loads(done.stdout.splitlines()[-1])))


def registry(rule: Mapping) -> tuple[list[str], dict[str, str]]:
    """OpenSpiel's registered games: those the rule selects (sorted), and the others with
    the rule's reason (name -> reason)."""
    selected, left_out = [], {}
    for game_type in registered_games():
        problems = rule_problems(game_type, rule)
        if problems:
            left_out[game_type.short_name] = "; ".join(problems)
        else:
            selected.append(game_type.short_name)
    return selected, left_out


def selection(cfg: Mapping) -> dict[str, dict[str, str]]:
    """``{"games": name -> string, "excluded": name -> reason, "outside": name -> reason}``:
    what the zoo runs, what the rule selects but the config excludes, what the rule leaves
    out; checked against the registry (every selected game run or excluded, nothing else)."""
    selected, outside = registry(cfg["rule"])
    listed = {**cfg["game_strings"], **cfg["excluded"]}
    missing = [name for name in selected if name not in listed]
    require(not missing, "zoo.game_strings",
            f"the rule selects {missing}, which are in neither zoo.game_strings nor "
            "zoo.excluded: give each its parameters or the reason it is left out")
    for key in ("game_strings", "excluded"):
        stray = sorted(set(cfg[key]) - set(selected))
        require(not stray, f"zoo.{key}.{stray[0] if stray else ''}",
                f"{stray} {'are not' if len(stray) > 1 else 'is not'} a registered game the "
                "rule selects" + (f" (the rule leaves it out: {outside[stray[0]]})"
                                  if stray and stray[0] in outside else ""))
    return {"games": dict(sorted(cfg["game_strings"].items())),
            "excluded": dict(sorted(cfg["excluded"].items())), "outside": outside}
