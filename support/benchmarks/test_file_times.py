"""Each test file's share of a test run, from the JUnit XML that `bash scripts/test.sh` writes.

    python support/benchmarks/test_file_times.py outputs/test-artifacts/junit.xml

prints a Markdown table: every test file's seconds (its tests' calls plus their fixtures' set-up; a session fixture
counts where it is first used, so a notebook's one execution is charged to the first test that reads it), its number
of tests, and the total.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path


def file_times(junit: Path) -> dict[str, tuple[float, int]]:
    """Test file -> (seconds, number of tests), slowest first."""
    seconds: dict[str, float] = defaultdict(float)
    count: dict[str, int] = defaultdict(int)
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = case.get("file") or case.get("classname", "?").replace(".", "/") + ".py"
        seconds[name] += float(case.get("time", 0))
        count[name] += 1
    return {name: (seconds[name], count[name]) for name in sorted(seconds, key=seconds.get, reverse=True)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("junit", type=Path, help="the JUnit XML of a pytest run")
    args = parser.parse_args(argv)
    times = file_times(args.junit)
    print("| test file | tests | seconds |\n|---|---:|---:|")
    for name, (seconds, count) in times.items():
        print(f"| `{name}` | {count} | {seconds:,.0f} |")
    total = sum(s for s, _ in times.values())
    print(f"| **all** | {sum(c for _, c in times.values())} | {total:,.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
