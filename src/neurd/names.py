"""One vocabulary: the names of learners, algorithms, solvers and games.

Every module, table, config schema enum, rule wildcard and figure style takes
its names from here (``tests/test_names.py`` checks the schema, the rules and
the style against it), so a name is spelled once.

Learners are the local update rules of the paper; an *algorithm* is what a
table's ``algorithm`` column holds: a learner, Hedge (the name the paper uses
for single-state NeuRD in Figs 1-2), or one of OpenSpiel's reference solvers.
"""

from __future__ import annotations

from dataclasses import dataclass

# --- learners and algorithms ---------------------------------------------------

NEURD = "neurd"  # y += eta * A (= Hedge = RD in the tabular case)
SPG = "spg"  # y += eta * pi * A (softmax policy gradient, all actions)
HEDGE = "hedge"  # NeuRD in repeated matching pennies, with Hedge's own logits eta * sum u
RM = "rm"  # regret matching, the original CFR's local learner

LEARNERS = (NEURD, SPG)  # the paper's two learners
CFR_LEARNERS = (RM, NEURD, SPG)  # built-in local learners of CFR
MATRIX_ALGORITHMS = (HEDGE, SPG)  # Fig 1's regret sweep
TRAJECTORY_ALGORITHMS = (HEDGE, NEURD, SPG)  # Fig 2's logits, as each learner keeps them

CFR_RM = "cfr_rm"  # OpenSpiel's CFRSolver
CFR_PLUS = "cfr_plus"  # OpenSpiel's CFRPlusSolver
REFERENCE_SOLVERS = (CFR_RM, CFR_PLUS)

# The paper's algorithms (Figs 1-6, the CFR references), with their labels in figures; a
# neural run's other algorithms are the registry's, with its labels
# (neurd.neural.algorithms, neurd.figures.style.algorithm_label).
ALGORITHM_LABELS = {
    HEDGE: "Hedge (= NeuRD)",
    NEURD: "NeuRD",
    SPG: "SPG",
    CFR_RM: "CFR (regret matching)",
    CFR_PLUS: "CFR+",
}
ALGORITHMS = tuple(ALGORITHM_LABELS)


def check_name(name: str, allowed, what: str) -> str:
    """``name`` if it is one of ``allowed``, else a ``ValueError`` listing them."""
    if name not in allowed:
        raise ValueError(f"unknown {what} {name!r}; expected one of {list(allowed)}")
    return name


# --- the readings study ---------------------------------------------------------

DEFAULT_READING = "default"  # the study's own reading; every other is one change from it
# what the `reading` column of the study's tables holds (its grid's, collapse's and logits')
READING_COLUMN = ("the reading: 'default' (the pipeline's) or a variant of config "
                  "readings.variants, one change from it")


# --- games ---------------------------------------------------------------------


@dataclass(frozen=True)
class PaperGame:
    """A game of the paper: short name, OpenSpiel string, title, information states."""

    name: str
    string: str
    title: str
    infostates: int


# Section 5's games.  Goofspiel with the default points_order=random has
# 236,450 information states; the paper's 2124 is the descending point order,
# made turn-based.
GAMES = {
    game.name: game
    for game in (
        PaperGame("kuhn", "kuhn_poker", "Kuhn poker", 12),
        PaperGame("leduc", "leduc_poker", "Leduc poker", 936),
        PaperGame(
            "goofspiel",
            "goofspiel(num_cards=5,imp_info=True,points_order=descending)",
            "Goofspiel",
            2124,
        ),
    )
}


def game_title(name: str) -> str:
    """The display title of a game's short name (the name itself for other games)."""
    return GAMES[name].title if name in GAMES else name
