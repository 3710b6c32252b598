"""A configuration's random stream is its algorithm's, by name: adding, removing or
reordering algorithms changes no other algorithm's numbers (neurd.neural.algorithms)."""

import numpy as np
import pytest

from neurd.comparison import compare
from neurd.neural import algorithms, train


def test_the_built_ins_keep_the_numbers_of_the_default_order_and_users_get_their_own():
    assert [algorithms.stream_index(a) for a in ("neurd", "spg", "rmpg", "rpg", "a2c")] == [
        0, 1, 2, 3, 4]
    mine = algorithms.stream_index("clipped_spg")
    assert mine >= algorithms.USER_STREAMS and mine == algorithms.stream_index("clipped_spg")
    assert mine != algorithms.stream_index("clipped_spg2")
    with pytest.raises(ValueError, match="algorithm name"):
        algorithms.stream_index("Not A Name")


def test_the_training_keys_depend_on_the_algorithms_name_not_its_place():
    keys = {a: np.asarray(train.configuration_keys(0, "kuhn", a, [0, 1], [0, 0]))
            for a in ("neurd", "spg")}
    assert not np.array_equal(keys["neurd"], keys["spg"])
    again = np.asarray(train.configuration_keys(0, "kuhn", "spg", [0, 1], [0, 0]))
    np.testing.assert_array_equal(again, keys["spg"])


def test_adding_removing_or_reordering_algorithms_changes_no_others_numbers():
    settings = dict(name="kuhn", iterations=40, phases=2, seeds=2, entropies=(0.0, 0.1),
                    checkpoints=3, geometric=1)
    both = compare("kuhn_poker", algorithms=["neurd", "spg"], **settings).diagnostics
    alone = compare("kuhn_poker", algorithms=["spg"], **settings).diagnostics
    others = compare("kuhn_poker", algorithms=["rpg", "spg", "neurd"], **settings).diagnostics
    columns = ["nash_conv", "critic_rmse", "policy_entropy", "common_mode"]
    for algorithm, other in (("spg", alone), ("spg", others), ("neurd", others)):
        mine = both[both.algorithm == algorithm].reset_index(drop=True)
        theirs = other[other.algorithm == algorithm].reset_index(drop=True)
        for column in columns:
            np.testing.assert_array_equal(mine[column].to_numpy(), theirs[column].to_numpy(),
                                          err_msg=f"{algorithm} {column}")
