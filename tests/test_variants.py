"""A learning cycle's variants (neurd.neural.variants): named and parsed both ways, refused
clearly when unknown, applied to a spec and to XLA's flags; an allocation runs the fastest
variant that passed its check, and never one that failed it, however fast; a run of a variant
records it in every piece of compute, and its numbers are the default's up to float rounding."""

import numpy as np
import pytest

from neurd import games
from neurd.names import GAMES
from neurd.neural import experiment, train, variants
from neurd.neural.variants import Variant


def test_every_candidate_is_named_and_parsed_back():
    names = [v.name for v in variants.candidates(gpu=True)]
    assert len(set(names)) == len(names) and names[0] == Variant().name
    for variant in variants.candidates(gpu=True):
        assert variants.parse(variant.name) == variant
    assert variants.parse("default") == Variant()
    cpu = variants.candidates(gpu=False)
    assert all(v.command_buffers == "default" and v.products == "f32" for v in cpu)


@pytest.mark.parametrize("name, named", [
    ("vmap.u3.cb-default.f32", "unroll 3"), ("nope.u1.cb-default.f32", "layout 'nope'"),
    ("vmap.u1.cb-maybe.f32", "command_buffers 'maybe'"), ("vmap.u1.cb-off.f16", "products"),
    ("vmap", "not a cycle variant's name"), ("", "not a cycle variant's name")])
def test_an_unknown_variant_is_refused_naming_the_knob(name, named):
    with pytest.raises(ValueError, match=named):
        variants.parse(name)


def test_the_command_buffer_flag_is_replaced_not_added():
    flags = "--xla_gpu_deterministic_ops=true --xla_gpu_enable_command_buffer=FUSION"
    off = variants.xla_flags(Variant(command_buffers="off"), flags)
    assert off.split() == ["--xla_gpu_deterministic_ops=true",
                           "--xla_gpu_enable_command_buffer="]
    assert variants.xla_flags(Variant(), flags) == "--xla_gpu_deterministic_ops=true"
    assert "WHILE" in variants.xla_flags(Variant(command_buffers="while"))


def test_a_variant_changes_the_spec_knobs_only():
    spec = train.Spec(precision="float32")
    fast = variants.apply(spec, Variant(unroll=4, products="tf32"))
    assert (fast.unroll, fast.precision) == (4, "tensorfloat32")
    assert variants.apply(spec, Variant()).precision == "float32"
    assert variants.apply(spec, Variant()) == spec


def test_a_variant_that_failed_its_check_is_never_chosen():
    names = [v.name for v in variants.candidates(gpu=True)]
    fastest, second = names[3], names[5]
    ms = {name: 10.0 for name in names}
    ms[fastest], ms[second] = 1.0, 5.0
    passed = {name: True for name in names}
    passed[fastest] = False
    assert variants.choose(passed, ms) == second
    passed[second] = False
    assert variants.choose(passed, ms) not in (fastest, second)
    assert variants.choose({n: False for n in names}, ms) == Variant().name
    assert variants.choose({fastest: True}, {fastest: None}) == Variant().name
    unchecked = {n: True for n in names if n != fastest}
    assert variants.choose(unchecked, ms) != fastest


@pytest.fixture(scope="module")
def kuhn():
    return games.compile_game(GAMES["kuhn"].string)


def _plan(variant: Variant):
    spec = variants.apply(train.Spec(hidden=(8,), policy_batch=16), variant)
    return experiment.Plan(game="kuhn", spec=spec, entropies=(0.0, 0.1), run_seeds=(0,),
                           seed=0, phase_iterations=40, phases=1, geometric=1, linear=1)


# The unrolled loops, and one layout: every layout's agreement with the first-written one on
# every game, leaf by leaf, is tests/test_neural_variants.py's (a run of each here again would
# compile each once more and check less).
CHECKED_HERE = [v for v in variants.candidates(gpu=False)[1:]
                if v.unroll != 1 or v.layout == "joined"]


def test_every_cpu_variant_is_checked_here_or_leaf_by_leaf():
    """A CPU variant left out here is a layout at unroll 1, which test_neural_variants runs
    (it runs every layout of :data:`neurd.neural.layouts.LAYOUTS` on every game)."""
    from neurd.neural import layouts

    for variant in variants.candidates(gpu=False)[1:]:
        if variant not in CHECKED_HERE:
            assert variant.unroll == 1 and variant.layout in layouts.LAYOUTS, variant.name
    assert {v.unroll for v in CHECKED_HERE} > {1}


@pytest.mark.parametrize("variant", [  # unrolled by 16: the longest compilation, make test-long
    pytest.param(v, marks=pytest.mark.long if v.unroll >= 16 else ()) for v in CHECKED_HERE],
    ids=lambda v: v.name)
def test_every_cpu_variant_agrees_with_the_default_and_records_itself(kuhn, variant):
    """10 cycles: NashConv within 1e-5 of the default's, bitwise the same run to run."""
    base = experiment.run(kuhn, _plan(Variant()))
    runs = [experiment.run(kuhn, _plan(variant), variant=variant.name) for _ in range(2)]
    np.testing.assert_array_equal(runs[0]["nash_conv"], runs[1]["nash_conv"])
    np.testing.assert_allclose(runs[0]["nash_conv"], base["nash_conv"], atol=1e-5, rtol=0)
    assert [p["variant"] for p in runs[0]["pieces"]] == [variant.name]
