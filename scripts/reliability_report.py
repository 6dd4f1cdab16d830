"""Run the reliability tests and print the counts quoted in docs/reliability.md.

    python scripts/reliability_report.py

Runs pytest on the files that check bad inputs, properties, injected
faults and scikit-learn's estimator contract, then prints one row per file
and per group with the number of test cases and their outcomes.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

GROUPS = {
    "bad inputs": ["tests/test_inputs.py", "tests/test_data.py", "tests/test_cli.py"],
    "properties": ["tests/test_properties.py"],
    "faults": ["tests/test_faults.py", "tests/test_persistence.py"],
    "estimator contract": ["tests/test_sklearn_compat.py"],
}


def _outcome(case):
    for tag in ("failure", "error"):
        if case.find(tag) is not None:
            return "failed"
    skipped = case.find("skipped")
    if skipped is not None:
        kind = skipped.get("type", "")
        return "xfailed" if "xfail" in kind else "skipped"
    return "passed"


def _run(files):
    with tempfile.TemporaryDirectory() as tmp:
        xml = Path(tmp) / "report.xml"
        cmd = [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={xml}",
            *files,
        ]
        subprocess.run(cmd, cwd=ROOT, check=False, stdout=subprocess.DEVNULL)
        tree = ET.parse(xml)
    counts = {}
    for case in tree.iter("testcase"):
        path = case.get("file") or case.get("classname", "").replace(".", "/") + ".py"
        counts.setdefault(path, Counter())[_outcome(case)] += 1
    return counts


def _row(name, counter):
    total = sum(counter.values())
    cells = [counter[k] for k in ("passed", "failed", "skipped", "xfailed")]
    return f"| {name} | {total} | " + " | ".join(map(str, cells)) + " |"


def main():
    files = [f for group in GROUPS.values() for f in group]
    counts = _run(files)
    print("| file | cases | passed | failed | skipped | xfailed |")
    print("|---|---|---|---|---|---|")
    for path in files:
        print(_row(path, counts.get(path, Counter())))
    print()
    print("| group | cases | passed | failed | skipped | xfailed |")
    print("|---|---|---|---|---|---|")
    for group, members in GROUPS.items():
        total = sum((counts.get(f, Counter()) for f in members), Counter())
        print(_row(group, total))


if __name__ == "__main__":
    main()
