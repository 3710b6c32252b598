"""The Fig 6 numbers docs/findings.md quotes are the default-scale run's.

docs/findings.md names its run: the default scale's claims audit (``results/audit/``, written
by ``make figures``).  Each number it quotes for Fig 6 is bound here to the audit row it is
read from; on a finished default run in ``results/`` (or ``NEURD_AUDIT_DIR``'s folder) every
one must agree with the run, to the precision written.  The neural stage is float32 and not
bitwise portable across CPU models (docs/promises.md): the page names the CPUs that gave
its numbers, and a CPU that gives others is written there as a range (``2.69-2.83``), in
which the run's value must then lie.

Without a run the binding itself is still checked: every quote is on the page, and the
page says that its Leduc numbers vary with the CPU model.
"""

import os
import re
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]
FINDINGS = ROOT / "docs/findings.md"
NUMBER = r"(-?[\d.]+(?:e[-+]?\d+)?)"
FINAL = (rf"NeuRD {NUMBER} \(alpha [^)]*\), SPG {NUMBER} \(alpha [^)]*\); paired difference "
         rf"NeuRD - SPG {NUMBER}, {NUMBER}% CI \[{NUMBER}, {NUMBER}\]")
AVERAGE = rf"every entropy level and seed: NeuRD {NUMBER}, SPG {NUMBER};"
SPREAD = rf"mean average NashConv: NeuRD {NUMBER}, SPG {NUMBER}$"

# (the page's words, whitespace folded; game; words of the claim; what the row's measured
# text gives, the same numbers in the same order; how many of them the quote takes)
QUOTES = [
    ("NeuRD ends lower (2.89 vs 3.80,", "leduc", "lowest final", FINAL, 2),
    ("pairs (3.35 vs 5.45)", "leduc", "average NashConv", AVERAGE, 2),
    ("(spread 0.351 vs 1.81)", "leduc", "less sensitive", SPREAD, 2),
    ("(0.225 vs 0.227; paired difference -0.00155, 95% CI [-0.0218, 0.0195]: tie)",
     "kuhn", "lowest final", FINAL, 6),
    ("the lower average NashConv (0.463 vs 0.59,", "kuhn", "average NashConv", AVERAGE, 2),
    ("the smaller spread (0.227 vs 0.414)", "kuhn", "less sensitive", SPREAD, 2),
    ("with the exact q in the critic's place NeuRD ends below SPG (0.313 vs 0.355) while with "
     "the learned critic it ends level (0.433 vs 0.419), and NeuRD's critic is the less "
     "accurate one (RMS error 0.26 vs 0.205)", "kuhn", "exact q",
     rf"exact critic NeuRD {NUMBER}, SPG {NUMBER}; learned critic NeuRD {NUMBER}, SPG "
     rf"{NUMBER}; learned critic's final RMS error NeuRD {NUMBER}, SPG {NUMBER};", 6),
    ("in a median 128 iterations vs SPG's 1500", "kuhn", "converges faster",
     rf"phase 2 \(level [^)]*\): median NeuRD {NUMBER}, SPG {NUMBER} iterations", 2),
    ("NeuRD and SPG end level (1.38 vs 1.40,", "goofspiel", "lowest final", FINAL, 2),
    ("paired difference -0.0222, 95% CI [-0.0426, 0.00604]: tie", "goofspiel", "lowest final",
     rf"paired difference NeuRD - SPG {NUMBER}, {NUMBER}% CI \[{NUMBER}, {NUMBER}\]", 4),
    ("So its average NashConv (1.61 vs 1.56)", "goofspiel", "average NashConv", AVERAGE, 2),
    ("its entropy sensitivity (0.288 vs 0.031)", "goofspiel", "less sensitive", SPREAD, 2),
]
# A number of the page, or a range of the values seen across CPU models: "low-high", or
# "low to high" where the high end is negative too
QUOTED = re.compile(r"(?<![\d.\w])(-?\d+(?:\.\d+)?)(?:-(\d+(?:\.\d+)?)| to (-?\d+(?:\.\d+)?))?")


def _page() -> str:
    return " ".join(FINDINGS.read_text(encoding="utf-8").split())


def _half_unit(text: str) -> float:
    """Half the last written digit's unit: the rounding a written number allows."""
    mantissa = text.lower().split("e")[0]
    digits = len(mantissa.split(".")[1]) if "." in mantissa else 0
    exponent = int(text.lower().split("e")[1]) if "e" in text.lower() else 0
    return 0.5 * 10.0 ** (exponent - digits)


def quoted_numbers(quote: str) -> list[tuple[str, str]]:
    """Each number of a quote as (low, high) text (equal for a single number)."""
    return [(low, high or negative or low) for low, high, negative in QUOTED.findall(quote)]


def agrees(run_text: str, low: str, high: str) -> bool:
    """The run's number (as its audit text writes it) lies in [low, high], each end
    widened by the rounding of the number written there and of the run's own text."""
    value, slack = float(run_text), _half_unit(run_text)
    return (float(low) - _half_unit(low) - slack <= value
            <= float(high) + _half_unit(high) + slack)


def test_every_quote_is_on_the_page_and_the_page_says_which_cpus_gave_them():
    page = _page()
    for quote, _, _, pattern, count in QUOTES:
        assert quote in page, f"docs/findings.md no longer says {quote!r}: bind its new words"
        assert len(quoted_numbers(quote)) == count, quote
        assert re.compile(pattern).groups >= count, pattern
    assert re.search(r"Leduc's numbers vary with the CPU model.{0,300}CPU devices.{0,300}"
                     r"(Intel Xeon|AMD EPYC)", page), (
        "docs/findings.md does not say its Leduc numbers vary by CPU and device count")


def test_the_reading_of_a_quote():
    assert quoted_numbers("(2.69-2.83 vs 3.82; [-0.011, 0.018], 95% CI)") == [
        ("2.69", "2.83"), ("3.82", "3.82"), ("-0.011", "-0.011"), ("0.018", "0.018"),
        ("95", "95")]
    assert quoted_numbers("[-0.016 to -0.015, 0.015-0.019]") == [("-0.016", "-0.015"),
                                                                  ("0.015", "0.019")]
    assert agrees("2.75", "2.69", "2.83") and not agrees("2.85", "2.69", "2.83")
    assert agrees("0.23", "0.230", "0.230") and not agrees("0.236", "0.230", "0.230")
    assert agrees("0.408", "0.38", "0.408") and not agrees("0.36", "0.38", "0.408")


def _run_folder() -> Path:
    return Path(os.environ.get("NEURD_AUDIT_DIR", ROOT / "results")) / "audit"


# the tests that check a finished default-scale run
needs_run = pytest.mark.skipif(not (_run_folder() / "fig6.csv").is_file(),
                               reason="no finished default-scale run in results/ (make "
                                      "figures) or NEURD_AUDIT_DIR")


@needs_run
def test_the_quoted_numbers_are_the_runs():
    frame = pd.read_csv(_run_folder() / "fig6.csv", dtype=str, keep_default_na=False)
    assert frame.measured.str.contains("default scale:").all(), (
        "this audit is not the default scale's, the run docs/findings.md quotes")
    wrong = []
    for quote, game, words, pattern, count in QUOTES:
        rows = frame[frame.claim.str.startswith(f"{game}:") & frame.claim.str.contains(words)]
        assert len(rows) == 1, (game, words, list(frame.claim))
        found = re.search(pattern, rows.measured.iloc[0])
        assert found, (game, words, pattern, rows.measured.iloc[0])
        for run_text, (low, high) in zip(found.groups()[:count], quoted_numbers(quote)):
            if not agrees(run_text, low, high):
                value = float(run_text)
                off = value - float(high) if value > float(high) else value - float(low)
                wrong.append(f"{game} {words}: the run gives {run_text}, the page "
                             f"{low if low == high else f'{low}-{high}'} in {quote!r} "
                             f"(out by {off:+.3g})")
    assert not wrong, ("docs/findings.md quotes numbers this run does not give (another "
                       "CPU model? widen the range and name the model):\n" + "\n".join(wrong))


def test_the_paper_length_section_is_the_publications():
    """docs/findings.md's section on the paper-length Fig 6 is what `neurd published-findings`
    writes from published/paper as it is now (rerun it after every publication)."""
    from neurd.publication.findings import findings, page_part

    text = FINDINGS.read_text(encoding="utf-8")
    span = page_part(text, "published/paper")
    assert span is not None, "docs/findings.md has no marks for published/paper"
    assert text[span[0]:span[1]] == "\n" + findings(ROOT / "published/paper") + "\n", (
        "docs/findings.md's paper-length section is not the publication's: run `neurd "
        "published-findings published/paper`")


def test_a_publication_with_seeds_is_judged_claim_by_claim(tmp_path):
    """With seeds published, the section has every Fig 6 claim of each game judged on them,
    labelled with the publication; a page without the marks is refused and left as it is."""
    from neurd import cli
    from neurd.publication.findings import findings

    text = findings(ROOT / "published/smoke")
    assert "Kuhn poker 2 of 2 (" in " ".join(text.split())
    assert "| claim | verdict | measured |" in text
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert len(rows) >= 6 and all("published/smoke" in row for row in rows[1:]), rows
    assert all(row.split(" | ")[1] in ("pass", "fail", "tie", "unmeasured", "differs")
               for row in rows[1:])
    page = tmp_path / "page.md"
    page.write_text("no marks here\n")
    assert cli.main(["published-findings", str(ROOT / "published/smoke"), "--page",
                     str(page)]) != 0
    assert page.read_text() == "no marks here\n"


# The README's verdict counts: "holds **65 claims: 50-51 pass, ...** (Figs 1-5: 41 pass, ...;
# Fig 6: 9-10 pass, ...: ...": each count a number or a range over the CPUs measured
COUNTS = re.compile(r"holds \*\*(\d+) claims: ([^*]+)\*\* \(Figs 1-5: ([^;]+); Fig 6: "
                    r"([^:]+):")
VERDICT = re.compile(r"(\d+)(?:-(\d+))? (pass|fail|differs?|tie|unmeasured)\b")


def verdict_counts(text: str) -> dict[str, tuple[int, int]]:
    """``{verdict: (low, high)}`` of a list such as ``50-51 pass, 7 fail, 3 differ``."""
    found = {}
    for low, high, verdict in VERDICT.findall(text):
        found["differs" if verdict == "differ" else verdict] = (int(low), int(high or low))
    return found


def _readme_counts():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    found = COUNTS.search(readme)
    assert found, "the README no longer states its verdict counts as the test reads them"
    claims, total, early, fig6 = found.groups()
    return int(claims), *(verdict_counts(part) for part in (total, early, fig6))


def test_the_verdict_counts_add_up_and_the_pages_agree():
    """The README's total is Figs 1-5's and Fig 6's counts added, the ranges' ends alike, and
    can hold its number of claims; docs/findings.md's Fig 6 audit says the README's."""
    claims, total, early, fig6 = _readme_counts()
    for verdict in set(total) | set(early) | set(fig6):
        parts = [part.get(verdict, (0, 0)) for part in (early, fig6)]
        assert total.get(verdict) == tuple(map(sum, zip(*parts))), verdict
    assert sum(low for low, _ in total.values()) <= claims <= sum(h for _, h in total.values())
    found = re.search(r"Audit: ([^(]+?) over the three games", _page())
    assert found and verdict_counts(found.group(1)) == fig6, (
        "docs/findings.md's Fig 6 audit counts are not the README's")
    found = re.search(r"it has (\d+) claims: ([^(]+) \(Figs 1-5: ([^;]+); Fig 6: ([^:]+):",
                      _page())
    assert found, "docs/findings.md no longer states its verdict counts as the test reads them"
    assert (int(found.group(1)), *(verdict_counts(part) for part in found.groups()[1:])) == (
        claims, total, early, fig6), "docs/findings.md's verdict counts are not the README's"


@needs_run
def test_the_readmes_verdict_counts_are_the_runs():
    """The run's claims audit has the README's number of claims, and each verdict's count in
    Figs 1-5 and in Fig 6 lies in the README's range for it."""
    claims, _, early, fig6 = _readme_counts()
    tables = {path.stem: pd.read_csv(path, dtype=str, keep_default_na=False)
              for path in _run_folder().glob("fig*.csv") if path.stem != "fig6_paper"}
    run_early = pd.concat([t for name, t in tables.items() if name != "fig6"]).verdict
    wrong = []
    for label, verdicts, stated in (("Figs 1-5", run_early, early),
                                    ("Fig 6", tables["fig6"].verdict, fig6)):
        counts = verdicts.value_counts().to_dict()
        for verdict in set(counts) | set(stated):
            low, high = stated.get(verdict, (0, 0))
            if not low <= counts.get(verdict, 0) <= high:
                wrong.append(f"{label} {verdict}: the run has {counts.get(verdict, 0)}, the "
                             f"README {low if low == high else f'{low}-{high}'}")
    assert not wrong, "the README's verdict counts are not this run's:\n" + "\n".join(wrong)
    assert claims == sum(len(t) for t in tables.values())
