"""bench/cycle_rate.py: the cycle's share of the product rate, its section of bench/NEURAL.md,
and the reading there that quotes it."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NEURAL = ROOT / "bench" / "NEURAL.md"


@pytest.fixture(scope="module")
def cycle_rate(bench_script):
    return bench_script("cycle_rate")


def _table(text: str, heading: str) -> list[dict]:
    """The rows of the first table under ``heading``, by the table's own column names."""
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    lines = [line for line in section.splitlines() if line.startswith("|")]
    names = [c.strip() for c in lines[0].strip("|").split("|")]
    return [dict(zip(names, (c.strip() for c in line.strip("|").split("|"))))
            for line in lines[2:]]


def test_a_kuhn_cycle_is_measured_into_its_section(cycle_rate, tmp_path):
    out = tmp_path / "NEURAL.md"
    out.write_text("# before\n\n## Another section\n\nkept\n")
    assert cycle_rate.main(["--games", "kuhn", "--configurations", "12", "--rounds", "1",
                            "--seconds", "0.2", "--isas", "native", "--devices", "1",
                            "--out", str(out)]) == 0
    text = out.read_text()
    assert "## Another section\n\nkept" in text
    (row,) = _table(text, cycle_rate.HEADING)
    assert (row["game"], row["N"], row["CPU devices"]) == ("kuhn", "12", "1")
    # named by its model, its family and model numbers and its own instruction set, whatever
    # XLA was limited to
    from neurd.machine import processor_id, processor_model, xla_isa
    assert row["processor"] == cycle_rate.processor_name()
    assert row["processor"].startswith(processor_model())
    assert row["processor"].endswith(f", {xla_isa('')}") and processor_id() in row["processor"]
    ms, share = float(row["ms/cycle"]), float(row["share"].rstrip("%"))
    assert ms > 0 and 0 < share <= 100 and float(row["segment's fixed ms"]) >= 0
    assert float(row["XLA's defaults, ms/cycle"]) > 0
    assert float(row["options' speed-up"].rstrip("x")) > 0


def test_a_cycle_is_one_more_cycle_of_a_segment_its_fixed_cost_apart(cycle_rate):
    """per_cycle: a segment of c cycles costs its fixed part and c cycles; a cycle is what one
    more costs (the segment's fixed cost, the median of the empty segments, apart)."""
    now, costs = [0.0], iter([0.05, 0.07, 0.06, 0.06 + 40 * 0.002])

    def clock():
        return now[0]

    def segment(cycles):
        now[0] += next(costs)

    seconds, fixed = cycle_rate.per_cycle(segment, 40, repeats=3, clock=clock)
    assert fixed == pytest.approx(0.06) and seconds == pytest.approx(0.002)


@pytest.mark.parametrize("argv, message", [
    (["--devices", "0"], "not a positive number"),
    (["--devices", "two"], "not numbers or 'cores'"),
    (["--configurations", "13"], "not a positive multiple of 12"),
    (["--rounds", "0"], "--rounds must be at least 1"),
    (["--seconds", "nan"], "--seconds positive"),
])
def test_bad_arguments_are_refused(cycle_rate, capsys, argv, message):
    with pytest.raises(SystemExit):
        cycle_rate.main(argv)
    assert message in capsys.readouterr().err


def test_a_run_replaces_its_own_processors_rows_and_keeps_the_others(cycle_rate):
    """Rows of a processor the run did not measure stay (with their date); its own are
    replaced; an old table without a date column gives its rows the section's date."""
    def measured(processor, ms):
        return dict(processor=processor, xla_isa="AVX2", cpu_devices=2, game="goofspiel",
                    configurations=60, variant="map_visited", gflop=3.63, ms_per_cycle=ms,
                    segment_ms=20.0,
                    cycle_gflops=100.0, product_gflops=200.0, share=0.5, passes_ms=20.0,
                    passes_share=0.6, defaults_ms=ms, options_speedup=1.0)

    # a table as written before it had a date column: its rows take the section's date
    columns = [c for c in cycle_rate.COLUMNS if c not in ("date", cycle_rate.SEGMENT)]
    values = ["AVX2", "2", "goofspiel", "60", "map_visited", "3.63", "{ms}", "100", "200",
              "50%", "20.0", "60%", "{ms}", "1.00x"]
    old = "\n".join([cycle_rate.HEADING, "", "Date: 2000-01-02  ", "",
                     "| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
                    + [f"| {name} | " + " | ".join(values).format(ms=ms) + " |"
                       for name, ms in (("Alpha", "40.0"), ("Beta", "50.0"))])
    earlier = cycle_rate.earlier_rows(old)
    assert [(r["processor"], r["date"]) for r in earlier] == [("Alpha", "2000-01-02"),
                                                              ("Beta", "2000-01-02")]
    # a table as written before it timed a segment's fixed cost apart: "-" there
    assert {r[cycle_rate.SEGMENT] for r in earlier} == {"-"}
    again = cycle_rate.section([measured("Beta", 30.0)], "c", "0", "0", earlier)
    rows = _table(again, cycle_rate.HEADING)
    assert [(r["processor"], r["ms/cycle"]) for r in rows] == [("Alpha", "40.0"),
                                                               ("Beta", "30.0")]
    assert rows[0]["date"] == "2000-01-02" and rows[1]["date"] != "2000-01-02"
    # one model name, two instruction sets: two processors, each keeping its own rows
    both = cycle_rate.section([measured("Alpha, AVX512_BF16", 20.0)], "c", "0", "0",
                              cycle_rate.earlier_rows(again.replace("| Alpha |",
                                                                    "| Alpha, AVX2 |")))
    assert [(r["processor"], r["ms/cycle"]) for r in _table(both, cycle_rate.HEADING)] == [
        ("Alpha, AVX2", "40.0"), ("Beta", "30.0"), ("Alpha, AVX512_BF16", "20.0")]
    assert cycle_rate.earlier_rows("no section here") == []


def test_the_reading_quotes_the_table_above_it(cycle_rate):
    """For every processor of the table, the reading's Goofspiel numbers (ms a cycle on one
    device and on one per core, and the share then) are the ranges of that processor's
    rows, as they print there."""
    text = NEURAL.read_text()
    table = [r for r in _table(text, cycle_rate.HEADING) if r["game"] == "goofspiel"]
    processors = list(dict.fromkeys(r["processor"] for r in table))
    assert processors, "the table has no Goofspiel row"

    def spread(rows, column):
        low, high = (f"{f(float(r[column].rstrip('%')) for r in rows):.0f}" for f in (min, max))
        return low if low == high else f"{low}-{high}"

    flat = re.sub(r"\s+", " ", text)
    for processor in processors:
        by_count = {}
        for r in table:
            if r["processor"] == processor:
                by_count.setdefault(int(r["CPU devices"]), []).append(r)
        assert max(by_count) > 1, f"{processor}: no row on one device per core"
        one, most = by_count[1], by_count[max(by_count)]
        quoted = re.search(r"Goofspiel's cycle on `" + re.escape(processor) + r"` from "
                           r"(\d+(?:-\d+)?) ms to (\d+(?:-\d+)?) ms, to (\d+(?:-\d+)?)% of "
                           r"the product rate", flat)
        assert quoted, f"{processor}: the reading's sentence quoting the table is not found"
        assert quoted.groups() == (spread(one, "ms/cycle"), spread(most, "ms/cycle"),
                                   spread(most, "share")), processor


def test_the_reading_quotes_the_visited_layouts_time_from_the_variants_table():
    """The reading's "map_visited took X ms a cycle where map_used took Y ms" is Goofspiel's
    two rows at N = 60 of the variants' table (bench/bench_cycle.py), as they print there."""
    text = NEURAL.read_text()
    rows = {r["variant"]: r for r in _table(text, "## Cycle variants, CPU")
            if r["game"] == "goofspiel" and r["N"] == "60"}
    quoted = re.search(r"`map_visited` took (\d+(?:\.\d+)?) ms a cycle where `map_used` took "
                       r"(\d+(?:\.\d+)?) ms", re.sub(r"\s+", " ", text))
    assert quoted, "the reading's sentence quoting the variants' table is not found"
    assert quoted.groups() == (rows["map_visited"]["ms/cycle (wall)"],
                               rows["map_used"]["ms/cycle (wall)"])
    assert float(quoted.group(1)) < float(quoted.group(2))
