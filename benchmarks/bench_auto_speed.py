"""Fit time of AutoImputer: candidates scored on their own refits, or refitted.

On each data set (``benchmarks/_smalldata.py``) AutoImputer is fitted twice
with the same seed, in the same run: as it is (PACE, FACE and mFPCA fitted
once on all the data and scored on the errors of their own refits of the
systematic folds, the chosen fit kept) and with every candidate refitted on
the visible points of ``n_folds`` folds and the chosen one fitted again (the
chooser before; ``AutoImputer._score_on_own_refits = False``). Printed: the
seconds of each, their ratio, and the method each chose.

Usage::

    python benchmarks/bench_auto_speed.py --datasets blackmore pbcseq sitka
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, write_section  # noqa: E402
from _smalldata import DATASETS  # noqa: E402

import fdaimpute as fi  # noqa: E402

COLUMNS = ["data", "n", "refitted s", "own refits s", "speed-up", "chose"]


def timed_fit(data, own_refits, seed):
    """Seconds of one AutoImputer fit and the method it chose."""
    est = fi.AutoImputer(random_state=seed)
    est._score_on_own_refits = own_refits
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(data)
    return time.perf_counter() - start, est.method_


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["blackmore", "pbcseq"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--write", action="store_true", help="update benchmarks.md")
    args = parser.parse_args(argv)
    rows = []
    for name in args.datasets:
        data = DATASETS[name]()
        before, chose_before = timed_fit(data, False, args.seed)
        after, chose_after = timed_fit(data, True, args.seed)
        rows.append(
            {
                "data": name,
                "n": len(data),
                "refitted s": f"{before:.1f}",
                "own refits s": f"{after:.1f}",
                "speed-up": f"{before / after:.1f}",
                "chose": chose_before
                if chose_before == chose_after
                else f"{chose_before} / {chose_after}",
            }
        )
        print(rows[-1], flush=True)
    text = markdown_table(rows, COLUMNS)
    print(text)
    print(machine())
    if args.write:
        write_section(
            "auto-speed",
            "AutoImputer fit time",
            "Seconds of one `AutoImputer(random_state=0)` fit with every candidate "
            "refitted per fold (3 folds, then the chosen one again; the chooser "
            "before) and scored on the candidates' own refits of the five "
            "systematic folds (now), in the same run; `chose`: refitted / own "
            "where they differ.\n\n" + text,
        )


if __name__ == "__main__":
    main()
