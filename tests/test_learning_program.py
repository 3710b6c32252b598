"""The learning programs' compiler options (:func:`neurd.neural.programs.compiler_options`): on
a CPU, XLA's YNNPACK library gets a learned critic's cycle's products only, not its
reductions over the actions; the exact critic's programs and an XLA that does not know the
option compile with XLA's defaults; the numbers stay those of XLA's defaults up to float
rounding, and each piece of a job records the options."""

import jax
import numpy as np
import pytest

from neurd import games
from neurd.names import GAMES
from neurd.neural import programs, train

YNN = "__ynn_fusion"


@pytest.fixture(scope="module")
def game():
    return train.neural_game(games.compile_game(GAMES["kuhn"].string))


def _inputs(game):
    spec = train.Spec()
    states, keys, etas = train.batch_inputs(spec, game, 0, "kuhn", (0,), (0.0, 1.0))
    return spec, states, keys, etas


def _fused_reductions(text: str) -> int:
    """How many of the compiled program's YNNPACK fusions hold a reduction."""
    bodies = {}
    for block in text.split("\n\n"):
        head = block.lstrip().split(" ", 1)[0].lstrip("%")
        bodies[head] = block
    called = [line.split("calls=%", 1)[1].split(",", 1)[0]
              for line in text.splitlines() if YNN in line and "calls=%" in line]
    return sum(" reduce(" in bodies.get(name, "") for name in called)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="a CPU's compiler options")
def test_on_a_cpu_the_products_only_go_to_ynnpack(game):
    spec, states, keys, etas = _inputs(game)
    args = (spec, game, states, keys, etas, 0, 2, np.float32(1.0))
    ours = train.run_segment.lower(*args).compile().as_text()
    assert programs.compiler_options("cpu") == programs.CPU_COMPILER_OPTIONS
    plain = train.run_segment.defaults.lower(*args).compile().as_text()
    # XLA's defaults hand YNNPACK the reductions over the actions too (what the option is
    # for: were that no longer so, this test says the option has become moot)
    assert _fused_reductions(plain) > 0
    assert _fused_reductions(ours) == 0 and ours.count(YNN) > 0  # the products still go


def test_an_xla_without_the_option_compiles_with_its_defaults(monkeypatch):
    monkeypatch.setattr(programs, "CPU_COMPILER_OPTIONS",
                        {"xla_cpu_no_such_option_of_any_xla": "true"})
    programs.compiler_options.cache_clear()
    try:
        assert programs.compiler_options("cpu") is None
    finally:
        programs.compiler_options.cache_clear()
    assert programs.compiler_options("gpu") is None and programs.compiler_options("tpu") is None
    for bad in ("", None, 3):
        with pytest.raises(ValueError, match="not a JAX platform name"):
            programs.compiler_options(bad)


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="a CPU's compiler options")
def test_the_numbers_are_xla_defaults_up_to_float_rounding(game):
    """Ten cycles under the options and under XLA's defaults agree within what float32
    rounding of the reductions' order moves (the layouts' tolerance), and differ: the
    reductions are computed another way."""
    spec, states, keys, etas = _inputs(game)
    args = (spec, game, states, keys, etas, 0, 10, np.float32(1.0))
    ours = train.run_segment(*args)
    plain = train.run_segment.defaults(*args)
    differ = False
    for algorithm, state in ours.items():
        for name in ("policy", "critic", "table"):
            for a, b in zip(jax.tree_util.tree_leaves(getattr(state, name)),
                            jax.tree_util.tree_leaves(getattr(plain[algorithm], name))):
                np.testing.assert_allclose(a, b, rtol=0, atol=1e-5, err_msg=name)
                differ = differ or not np.array_equal(a, b)
    assert differ


@pytest.mark.skipif(jax.default_backend() != "cpu", reason="a CPU's compiler options")
def test_each_piece_records_its_critics_options(game):
    """A job's pieces name the options its program ran under: the learned critic's, and
    none (XLA's defaults) for the exact critic, whose program is compiled without them."""
    from neurd.neural import experiment

    words = " ".join(f"{k}={v}" for k, v in programs.CPU_COMPILER_OPTIONS.items())
    for critic, expected in (("learned", words), ("exact", "")):
        plan = experiment.Plan(game="kuhn", spec=train.Spec(hidden=(8,), policy_batch=16,
                                                            critic=critic),
                               entropies=(0.0, 0.1), run_seeds=(0,), seed=0,
                               phase_iterations=8, phases=1, geometric=1, linear=1)
        (piece,) = experiment.run(games.compile_game(GAMES["kuhn"].string), plan)["pieces"]
        assert piece["compiler_options"] == expected, critic
    assert programs.compiler_options("cpu", "exact") is None
    with pytest.raises(ValueError, match="is not one of"):
        programs.compiler_options("cpu", "tabular")
