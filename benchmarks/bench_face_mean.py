"""FACE's and mFPCA's P-spline mean: GCV against folds of subjects, on one split.

The split of ``bench_stability.py`` (20% of each subject's points hidden,
``split_held_out(..., random_state=split)``) of a small data set of
``benchmarks/_smalldata.py``; for FACE with ``lambda_mean="gcv"`` and its
default (``"auto"``: folds of subjects below 1,000 subjects), and mFPCA's
default, printed: the mean's degrees of freedom and range, the curves'
range on the training subjects, the training subjects whose curve leaves
the widened data range (``bench_stability.absurd_rows``), and the held-out
RMSE over the pooled mean curve's.

Usage::

    python benchmarks/bench_face_mean.py
    python benchmarks/bench_face_mean.py --dataset blackmore --split 0
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table  # noqa: E402
from _smalldata import DATASETS  # noqa: E402
from bench_stability import absurd_rows, pooled_mean_rmse  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.metrics import split_held_out  # noqa: E402

FITS = {
    'FACE, lambda_mean="gcv"': lambda: fi.FACEImputer(lambda_mean="gcv"),
    "FACE (default)": fi.FACEImputer,
    "mFPCA (default)": fi.MFPCAImputer,
}


def one_row(name, make, visible, hidden, rows):
    """The printed row of one fit on the visible points."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = make().fit(visible)
        grid = np.linspace(*est.time_range_, 201)
        curves = np.asarray(est.transform(visible, grid=grid))
        times = np.split(hidden.times, hidden.offsets[1:-1])
        pred = np.concatenate(est.predict_at(visible.take(rows), times))
    rmse = float(np.sqrt(np.mean((pred - hidden.values) ** 2)))
    df = getattr(est, "df_mean_", None)
    return {
        "fit": name,
        "mean df": "" if df is None else f"{df:.1f}",
        "mean": f"{est.mean_.min():.3g} to {est.mean_.max():.3g}",
        "curves": f"{curves.min():.3g} to {curves.max():.3g}",
        "absurd subjects": int(absurd_rows(curves, visible).size),
        "RMSE / mean": f"{rmse / pooled_mean_rmse(visible, hidden):.3f}",
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="blackmore-90", choices=list(DATASETS))
    parser.add_argument("--split", type=int, default=12)
    args = parser.parse_args(argv)
    data = DATASETS[args.dataset]()
    visible, hidden, rows = split_held_out(
        data, 0.2, min_keep=2, random_state=args.split
    )
    print(
        f"{args.dataset}, split {args.split}: {len(visible)} subjects, values "
        f"{visible.values.min():.3g} to {visible.values.max():.3g}"
    )
    table = [one_row(name, make, visible, hidden, rows) for name, make in FITS.items()]
    print(markdown_table(table, list(table[0])))
    print(machine())


if __name__ == "__main__":
    main()
