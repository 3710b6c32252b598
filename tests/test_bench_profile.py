"""bench/profile_cycle.py: a cycle's XLA operations, read from JAX's profiler and the HLO."""

import pytest


@pytest.fixture(scope="module")
def profile_cycle(bench_script):
    return bench_script("profile_cycle")


HLO = "\n".join([
    "ENTRY %main {",
    '  %ynn_fusion.7 = f32[128,50]{1,0} fusion(%a, %b), kind=kCustom, metadata={op_name='
    '"jit(f)/while/body/vmap(transpose(jvp()))/dot_general" stack_frame_id=1}',
    "  ROOT %dot.65 = f32[50,128]{1,0} dot(%a, %c), lhs_contracting_dims={0}",
    "}"])


def test_hlo_instructions_are_described_by_shape_and_origin(profile_cycle):
    described = profile_cycle.hlo_descriptions(HLO)
    assert described["ynn_fusion.7"] == ("f32[128,50]", "vmap(transpose(jvp()))/dot_general")
    assert described["dot.65"] == ("f32[50,128]", "")
    assert "main" not in described


def test_only_the_programs_operations_are_summed(profile_cycle):
    trace = {"traceEvents": [
        {"ph": "X", "name": "dot.65", "dur": 10.0},
        {"ph": "X", "name": "dot.65", "dur": 5.0},
        {"ph": "X", "name": "ThunkExecutor::Execute", "dur": 100.0},
        {"ph": "B", "name": "dot.65", "dur": 7.0},
        {"ph": "X", "name": "sm90_gemm_kernel", "dur": 3.0, "args": {"hlo_op": "fusion.3"}},
    ]}
    total, count = profile_cycle.operation_times(trace, {"dot.65", "ynn_fusion.7"})
    assert total == {"dot.65": 15.0, "fusion.3": 3.0}
    assert count == {"dot.65": 2, "fusion.3": 1}


def test_an_operation_counts_its_own_time_not_that_of_the_operations_in_it(profile_cycle):
    """A while loop's events contain its body's operations on the same thread: the loop
    keeps its own time only; an operation on another thread at the same time is not in it."""
    trace = {"traceEvents": [
        {"ph": "X", "name": "while.5", "ts": 0.0, "dur": 100.0, "pid": 1, "tid": 1},
        {"ph": "X", "name": "dot.65", "ts": 10.0, "dur": 30.0, "pid": 1, "tid": 1},
        {"ph": "X", "name": "ynn_fusion.7", "ts": 50.0, "dur": 20.0, "pid": 1, "tid": 1},
        {"ph": "X", "name": "dot.65", "ts": 20.0, "dur": 60.0, "pid": 1, "tid": 2},
        {"ph": "X", "name": "dot.65", "ts": 100.0, "dur": 5.0, "pid": 1, "tid": 1},
    ]}
    total, count = profile_cycle.operation_times(trace, {"while.5", "dot.65", "ynn_fusion.7"})
    assert total == {"while.5": 50.0, "dot.65": 95.0, "ynn_fusion.7": 20.0}
    assert count == {"while.5": 1, "dot.65": 3, "ynn_fusion.7": 1}


def test_a_kuhn_cycle_is_profiled_into_its_section(profile_cycle, tmp_path):
    out = tmp_path / "NEURAL.md"
    out.write_text("# Report\n\n## Before\n\ntext\n\n## After\n\nmore\n")
    argv = ["--games", "kuhn", "--seeds", "1", "--cycles", "2", "--top", "3", "--out", str(out)]
    for _ in range(2):  # the second run replaces the first's section
        assert profile_cycle.main(argv) == 0
    text = out.read_text()
    assert text.count(profile_cycle.HEADING) == 1 and text.count("## After") == 1
    assert text.index("## After") < text.index(profile_cycle.HEADING)
    section = text.split(profile_cycle.HEADING, 1)[1]
    assert "### kuhn, N = 12, variant `" in section
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    assert 1 <= len(rows) <= 3
    times = [float(row.split("|")[2]) for row in rows]
    assert times == sorted(times, reverse=True) and times[0] > 0


def test_a_section_is_replaced_where_it_stands(profile_cycle):
    heading = profile_cycle.HEADING
    text = f"# R\n\n{heading}\n\nold\n\n## Next\n\nkept\n"
    new = f"{heading}\n\nnew\n"
    assert profile_cycle.with_section(text, new) == f"# R\n\n{heading}\n\nnew\n\n## Next\n\nkept\n"


def test_bad_arguments_are_refused(profile_cycle, capsys):
    with pytest.raises(SystemExit):
        profile_cycle.main(["--seeds", "0"])
    assert "at least 1" in capsys.readouterr().err


def test_a_bad_device_count_is_refused(profile_cycle, capsys):
    for given in ("0", "two", "1e9"):
        with pytest.raises(SystemExit):
            profile_cycle.main(["--games", "kuhn", "--devices", given, "--out", "-"])
        assert "--devices" in capsys.readouterr().err
