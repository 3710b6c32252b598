"""Compare two results folders table by table: did a change move any number?

    python bench/compare_tables.py OLD_RESULTS NEW_RESULTS [--only matrix rps tabular]

Every Parquet table found under both folders (same relative path) is compared on the
columns both have, exactly (values, dtypes, row order); columns only the new one has are
listed, not compared.  Exit status 1 if any shared column differs, else 0.  Used when a
change must leave numbers alone (e.g. a new reading of Fig 6 must not move Figs 1-5).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import pandas as pd


def compare(old: Path, new: Path, only: list[str] | None = None) -> list[tuple[str, str]]:
    """``[(relative path, outcome)]``: ``equal``, ``equal; new columns [...]``, ``differs: ...``,
    ``only in new`` or ``only in old``."""
    def tables(root):
        return {str(p.relative_to(root)) for p in root.rglob("*.parquet")
                if only is None or p.relative_to(root).parts[0] in only}

    found = []
    before, after = tables(old), tables(new)
    for path in sorted(before | after):
        if path not in after:
            found.append((path, "only in old"))
            continue
        if path not in before:
            found.append((path, "only in new"))
            continue
        a, b = pd.read_parquet(old / path), pd.read_parquet(new / path)
        shared = [c for c in a.columns if c in b.columns]
        try:
            pd.testing.assert_frame_equal(a[shared].reset_index(drop=True),
                                          b[shared].reset_index(drop=True), check_exact=True)
        except AssertionError as error:
            found.append((path, "differs: " + " ".join(str(error).split())[:300]))
            continue
        extra = sorted(set(b.columns) - set(a.columns))
        gone = sorted(set(a.columns) - set(b.columns))
        note = "equal" + (f"; new columns {extra}" if extra else "") + (
            f"; columns gone {gone}" if gone else "")
        found.append((path, note))
    return found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--only", nargs="+", default=None,
                        help="top-level folders to compare (e.g. matrix rps tabular)")
    args = parser.parse_args(argv)
    found = compare(args.old, args.new, args.only)
    for path, outcome in found:
        print(f"{path}: {outcome}")
    moved = [p for p, o in found if o.startswith("differs")]
    print(f"{len(found)} tables, {len(moved)} with a number that moved")
    return 1 if moved else 0


if __name__ == "__main__":
    sys.exit(main())
