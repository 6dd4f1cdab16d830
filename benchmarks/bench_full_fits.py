"""Single fits on all of each small real data set: absurd curves and seeds.

``bench_stability.py`` fits each imputer on the visible points of random
splits. A user fits on all the data: this script does that, for each data
set of ``benchmarks/_smalldata.py`` and each imputer's defaults, at seeds 0
and 1 where the imputer takes a ``random_state``. Printed per data set and
imputer:

- ``absurd``: training subjects whose curve leaves, inside the observed time
  range, the data's range widened by half of it on each side (the rule of
  ``bench_stability.py``), at the first seed;
- ``curves`` and ``data``: the range of the curves on 201 points of the time
  range and the range of the observations;
- ``seeds agree``: whether the two seeds give the same curves (to 1e-10);
- for ``Auto``, its weights and the candidates it passed over as implausible.

Usage::

    python benchmarks/bench_full_fits.py
    python benchmarks/bench_full_fits.py --datasets pbcseq-90 --write
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, write_section  # noqa: E402
from _smalldata import DATASETS  # noqa: E402
from bench_stability import METHODS, absurd_rows, has_seed  # noqa: E402

COLUMNS = ["data", "n", "method", "absurd", "curves", "data range", "seeds agree"]
COLUMNS += ["weights (Auto)", "fit s"]
DEFAULT_METHODS = ("PACE", "FACE", "mFPCA", "Kernel", "Auto")


def curves_on(est, data, n_grid=201):
    """The fitted subjects' curves on ``n_grid`` points of the time range
    (the grid of ``bench_stability.absurd_subjects``)."""
    grid = np.linspace(*est.time_range_, n_grid)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(est.transform(data, grid=grid))


def one_row(name, data, method):
    """The table row of one imputer's fits on all of ``data``."""
    seeds = (0, 1) if has_seed(method) else (0,)
    fits, curves, seconds = [], [], []
    for seed in seeds:
        est = METHODS[method](seed)
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est.fit(data)
        seconds.append(time.perf_counter() - start)
        fits.append(est)
        curves.append(curves_on(est, data))
    est = fits[0]
    row = {
        "data": name,
        "n": len(data),
        "method": method,
        "absurd": int(absurd_rows(curves[0], data).size),
        "curves": f"{curves[0].min():.3g} to {curves[0].max():.3g}",
        "data range": f"{data.values.min():.3g} to {data.values.max():.3g}",
        "seeds agree": (
            "yes"
            if len(curves) == 1 or np.allclose(curves[0], curves[1], rtol=0, atol=1e-10)
            else "no"
        ),
        "fit s": f"{np.mean(seconds):.1f}",
    }
    if hasattr(est, "weights_"):
        mix = ", ".join(f"{k} {w:.2f}" for k, w in est.weights_.items())
        passed = ", ".join(est.implausible_)
        row["weights (Auto)"] = mix + (f" (passed over: {passed})" if passed else "")
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS)
    )
    parser.add_argument(
        "--methods", nargs="+", default=list(DEFAULT_METHODS), choices=list(METHODS)
    )
    parser.add_argument("--write", action="store_true", help="update benchmarks.md")
    args = parser.parse_args(argv)
    rows = []
    for name in args.datasets:
        data = DATASETS[name]()
        for method in args.methods:
            rows.append(one_row(name, data, method))
            print(
                f"  {name} {method}: absurd {rows[-1]['absurd']}, "
                f"{rows[-1]['fit s']} s",
                flush=True,
            )
    text = markdown_table(rows, COLUMNS)
    bad = [f"{r['method']} on {r['data']}" for r in rows if r["absurd"]]
    text += "\n\nFits with an absurd curve: " + (", ".join(bad) if bad else "none")
    print(text)
    print(machine())
    if args.write:
        write_section(
            "stability-full-fits",
            "Single fits on all of each small real data set",
            "Each imputer's defaults fitted on all of each data set (no points "
            "hidden), as a user fits: training subjects with an absurd curve, the "
            "curves' range against the data's, whether seeds 0 and 1 agree, and "
            "the mix `AutoImputer` made (see the docstring of "
            "`benchmarks/bench_full_fits.py`).\n\n" + text,
        )


if __name__ == "__main__":
    main()
