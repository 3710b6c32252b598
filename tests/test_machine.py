"""The machine a result was computed on (neurd.machine): the processor, the instruction set XLA
compiles for (capped by XLA_FLAGS), threads and flags, in every table's metadata, in a run's
provenance (with the cycle variant resolved) and in each piece of a neural job."""

import jax
import pandas as pd
import pytest

from neurd import machine
from neurd.tables import read_metadata, write_table


def test_the_instruction_set_is_the_processors_capped_by_the_flag(monkeypatch):
    """A processor with AVX-512 compiles for AVX-512 unless --xla_cpu_max_isa caps it lower;
    a cap above what it has, or a value XLA does not name, changes nothing."""
    flags = frozenset("sse4_2 avx avx2 fma avx512f avx512bw avx512dq avx512vl".split())
    monkeypatch.setattr(machine, "_cpuinfo", lambda: ("Some CPU", flags))
    assert machine.xla_isa("") == "AVX512"
    assert machine.xla_isa("--xla_cpu_max_isa=AVX2") == "AVX2"
    assert machine.xla_isa("--foo --xla_cpu_max_isa=avx") == "AVX"
    assert machine.xla_isa("--xla_cpu_max_isa=AMX") == "AVX512"
    assert machine.xla_isa("--xla_cpu_max_isa=PENTIUM") == "AVX512"
    older = frozenset("sse4_2 avx avx2 fma".split())
    monkeypatch.setattr(machine, "_cpuinfo", lambda: ("An older CPU", older))
    assert machine.xla_isa("") == "AVX2"
    # an instruction set needs every one before it
    monkeypatch.setattr(machine, "_cpuinfo", lambda: ("Odd", frozenset({"avx2", "fma"})))
    assert machine.xla_isa("") not in ("AVX2", "AVX512")


def test_every_table_names_the_machine(tmp_path, monkeypatch):
    """A table's metadata names the processor, its instruction set as XLA uses it, the threads
    and the XLA flags in force when it was written."""
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_max_isa=AVX2")
    path = tmp_path / "t.parquet"
    write_table(pd.DataFrame({"x": [1.0]}), path, columns={"x": "a number"})
    recorded = read_metadata(path)["machine"]
    assert recorded["processor"] == machine.processor_model()
    assert recorded["xla_flags"] == "--xla_cpu_max_isa=AVX2"
    assert recorded["isa"] == machine.xla_isa("--xla_cpu_max_isa=AVX2")
    assert recorded["threads"] >= 1


def test_a_runs_provenance_names_the_processor_and_the_variant_run():
    from neurd.provenance import machine as provenance_machine

    record = provenance_machine()
    assert record["processor"] == machine.processor_model() and record["isa"]
    found = record["neural_cycle_variant"]
    assert set(found) == {"kuhn", "leduc", "goofspiel"}
    for variant in found.values():
        assert not variant.startswith(("auto.", "default")), found
    # the layout is the game's: Goofspiel's visited states are a third of its states
    if jax.default_backend() == "cpu":
        assert found["goofspiel"].startswith("map_visited."), found
        assert found["kuhn"].startswith("map_used.") and found["leduc"].startswith("map_used.")


def test_the_processor_is_told_apart_by_its_family_and_model_numbers():
    """Two generations a virtual machine names alike ("AMD EPYC") differ in their numbers;
    the first processor's are taken, the model name's line is not the model number."""
    text = ("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 26\nmodel\t\t: 2\n"
            "model name\t: AMD EPYC\nstepping\t: 1\n\nprocessor\t: 1\ncpu family\t: 25\n")
    assert machine.processor_numbers(text) == "family 26 model 2 stepping 1"
    assert machine.processor_numbers("model name\t: Some ARM thing\nmodel\t: x\n") == ""
    assert machine.processor_numbers("") == ""
    assert machine.cpu_description()["processor_id"] == machine.processor_id()


@pytest.mark.parametrize("text", ["", "x"])
def test_a_machine_without_cpuinfo_still_says_what_it_is(monkeypatch, text):
    monkeypatch.setattr(machine, "_cpuinfo", lambda: (None, frozenset()))
    assert machine.processor_model() and machine.xla_isa(text)
