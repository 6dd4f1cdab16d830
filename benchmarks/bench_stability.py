"""Stability of single fits on small real data: seeds, absurd curves, bands.

For each data set (``benchmarks/_smalldata.py``: Blackmore, pbcseq's log
bilirubin, Orthodont, Oxboys, Sitka, and Framingham and UK electricity at
8-12 readings subsampled to 50, 100 and 250 subjects; by name only, the
90-subject sets drawn afresh at each split, ``blackmore-90r`` and others of
``_smalldata.RESAMPLED``) and each of ``--splits`` random splits, every
subject with more than two observations hides 20% of them
(:func:`fdaimpute.metrics.split_held_out`). Each imputer is fitted with its
defaults on the visible observations, once per ``random_state`` in
``0 .. --seeds - 1`` (once if it has no ``random_state``), and predicts the
hidden ones. Reported per data set and imputer:

- ``RMSE / mean``: held-out RMSE relative to that of the pooled mean curve
  (a local-linear smoother of the visible points, bandwidth by GCV), mean
  over splits and seeds;
- ``spread``: the largest, over splits, of max / min held-out RMSE over
  the seeds (1 for an imputer without randomness);
- ``absurd``: fits (of all splits and seeds) whose curve of some training
  subject leaves, inside the observed time range, the data's range widened
  by half of it on each side;
- ``cover early / mid / late``: share of hidden values inside the 95%
  prediction interval ``pred +- 1.96 sqrt(sd^2 + noise)`` (the curve's SD
  from ``transform(return_std=True)`` plus the measurement noise at that
  time), pooled over splits and seeds, in the first, middle and last third
  of the time range; in brackets the pooled number of hidden points, the
  distinct observations among them (the splits overlap) and how many of
  those fell outside their interval in some fit;
- ``fit s``: mean seconds per fit.

Under the table, each coverage cell outside 0.92-0.98 (the issue's target)
gets its 95% interval on its distinct observations and the chance that a
band covering exactly 95% of new points falls outside 0.92-0.98 on so few:
on a few dozen late visits a cell cannot tell a calibrated band from one
that is off by a few points.

A line per data set gives the best of PACE, FACE, mFPCA and Kernel and the
ratio of the chooser (``Auto``) to it; ``Auto-refit`` (not run by default)
is the chooser with every candidate refitted on each of three folds, as
before it scored PACE, FACE and mFPCA on their own refits.

Usage::

    python benchmarks/bench_stability.py --datasets blackmore --seeds 5
    python benchmarks/bench_stability.py --datasets blackmore-90r --methods PACE
    python benchmarks/bench_stability.py --seeds 20 --save-rows a.json
    python benchmarks/bench_stability.py --load-rows a.json b.json --write
    python benchmarks/bench_stability.py --load-rows b.json --compare-rows a.json
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import numbers
import sys
import time
import warnings
from operator import itemgetter
from pathlib import Path

import numpy as np
from scipy.stats import binom, binomtest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import machine, markdown_table, write_section  # noqa: E402
from _smalldata import DATASETS, LARGE_DATASETS, RESAMPLED, dataset  # noqa: E402

import fdaimpute as fi  # noqa: E402
from fdaimpute.metrics import split_held_out  # noqa: E402
from fdaimpute.smoothing import (  # noqa: E402
    bandwidth_candidates,
    bin_data,
    local_linear,
    select_bandwidth,
)


def refitting_auto(seed):
    """The chooser as before: every candidate refitted on each of 3 folds."""
    est = fi.AutoImputer(random_state=seed)
    est._score_on_own_refits = False
    return est


METHODS = {
    "PACE": lambda seed: fi.PACEImputer(random_state=seed),
    "FACE": lambda seed: fi.FACEImputer(),
    "mFPCA": lambda seed: fi.MFPCAImputer(),
    "Kernel": lambda seed: fi.KernelImputer(),
    "Auto": lambda seed: fi.AutoImputer(random_state=seed),
    "Auto-choose": lambda seed: fi.AutoImputer(combine="choose", random_state=seed),
    "Auto-refit": refitting_auto,
}
CANDIDATES = ("PACE", "FACE", "mFPCA", "Kernel")
#: The coverage the issue asks of every third of the time range.
TARGET_COVER = (0.92, 0.98)
COLUMNS = ["data", "n", "method", "RMSE / mean", "spread", "absurd", "fits"]
COLUMNS += ["cover early", "cover mid", "cover late", "fit s"]
Z95 = 1.959964


def has_seed(name):
    """Whether the method's estimator takes a ``random_state``."""
    est = METHODS[name](0)
    return "random_state" in inspect.signature(type(est).__init__).parameters


def pooled_mean_rmse(visible, hidden):
    """Held-out RMSE of the pooled local-linear mean of the visible points."""
    centres, weight, sum_y, sum_y2 = bin_data(visible.times, visible.values)
    candidates = bandwidth_candidates(centres, 20)
    h, _ = select_bandwidth(
        centres,
        sum_y / weight,
        candidates,
        weights=weight,
        within_ss=sum_y2 - sum_y**2 / weight,
    )
    pred = local_linear(centres, sum_y / weight, hidden.times, h, weights=weight)
    return float(np.sqrt(np.mean((pred - hidden.values) ** 2)))


def absurd_subjects(est, data):
    """Positions of subjects whose curve leaves the widened data range."""
    grid = np.linspace(*est.time_range_, 201)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        curves = np.asarray(est.transform(data, grid=grid))
    return absurd_rows(curves, data)


def absurd_rows(curves, data):
    """Rows of ``curves`` that leave ``data``'s range widened by half of it."""
    lo, hi = float(data.values.min()), float(data.values.max())
    half = 0.5 * (hi - lo)
    bad = (curves < lo - half) | (curves > hi + half)
    return np.flatnonzero(bad.any(axis=1))


def thirds(times, time_range):
    """Third of the time range (0, 1, 2) of each time."""
    lo, hi = time_range
    return np.clip(((times - lo) / (hi - lo) * 3).astype(int), 0, 2)


def one_fit(name, seed, visible, hidden, rows):
    """Scores of one fit: RMSE, absurd subjects, coverage hits by third."""
    est = METHODS[name](seed)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(visible)
    seconds = time.perf_counter() - start
    lo, hi = est.time_range_
    if hidden.times.min() < lo or hidden.times.max() > hi:
        est.set_params(extrapolate="clip")
    grid = np.unique(hidden.times)
    subject = np.repeat(np.arange(len(hidden)), hidden.n_obs)
    column = np.searchsorted(grid, hidden.times)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            curves, sd = est.transform(visible[rows], return_std=True, grid=grid)
            curves, sd = np.asarray(curves), np.asarray(sd)
        except NotImplementedError:
            curves, sd = np.asarray(est.transform(visible[rows], grid=grid)), None
    pred = curves[subject, column]
    row = {
        "rmse": float(np.sqrt(np.mean((pred - hidden.values) ** 2))),
        "absurd": int(absurd_subjects(est, visible).size),
        "seconds": seconds,
    }
    if hasattr(est, "weights_"):
        row["weights"] = est.weights_
    if isinstance(getattr(est, "n_components_", None), numbers.Integral):
        row["K"] = int(est.n_components_)
    if sd is not None:
        noise = observation_noise(est, hidden.times)
        scale = np.sqrt(sd[subject, column] ** 2 + noise)
        inside = np.abs(hidden.values - pred) <= Z95 * scale
        third = thirds(hidden.times, (lo, hi))
        row["hits"] = np.bincount(third, inside, minlength=3).tolist()
        row["count"] = np.bincount(third, minlength=3).tolist()
        ids = np.asarray(hidden.ids)[subject]
        row["missed"] = [
            [str(i), float(t), int(j)]
            for i, t, j in zip(ids[~inside], hidden.times[~inside], third[~inside])
        ]
    return row


def observation_noise(est, times):
    """The measurement-noise variance at ``times`` (time-varying if offered)."""
    at = getattr(est, "noise_variance_at", None)
    if at is not None:
        return np.asarray(at(times))
    return np.full(times.size, float(est.noise_variance_))


def run_dataset(name, args):
    """Per-fit rows of every method on one data set."""
    out = []
    for split in range(args.first_split, args.first_split + args.splits):
        data = dataset(name, split)
        visible, hidden, rows = split_held_out(
            data, 0.2, min_keep=2, random_state=split
        )
        base = pooled_mean_rmse(visible, hidden)
        for method in args.methods:
            n_seeds = args.auto_seeds if method.startswith("Auto") else args.seeds
            seeds = range(n_seeds) if has_seed(method) else [0]
            for seed in seeds:
                row = one_fit(method, seed, visible, hidden, rows)
                row.update(
                    data=name, n=len(data), method=method, split=split, seed=seed
                )
                row["relative"] = row["rmse"] / base
                out.append(row)
            last = [r for r in out if r["method"] == method and r["split"] == split]
            rel = [r["relative"] for r in last]
            print(
                f"  {name} split {split} {method:<6} rel {np.mean(rel):.3f} "
                f"spread {max(rel) / min(rel):.3f} "
                f"absurd {sum(r['absurd'] > 0 for r in last)} "
                f"{np.mean([r['seconds'] for r in last]):.1f} s",
                flush=True,
            )
    return out


def summarize(rows):
    """Table rows per (data, method), then one chooser line per data set."""
    groups = {}
    for r in rows:
        groups.setdefault((r["data"], r["n"], r["method"]), []).append(r)
    table, best, outside, n_cells = [], {}, [], 0
    for (name, n, method), group in groups.items():
        rel = np.array([r["relative"] for r in group])
        by_split = {}
        for r in group:
            by_split.setdefault(r["split"], []).append(r["rmse"])
        spread = max(max(v) / min(v) for v in by_split.values())
        row = {
            "data": name,
            "n": n,
            "method": method,
            "RMSE / mean": f"{rel.mean():.3f}",
            "spread": f"{spread:.3f}",
            "absurd": sum(r["absurd"] > 0 for r in group),
            "fits": len(group),
            "fit s": f"{np.mean([r['seconds'] for r in group]):.1f}",
        }
        with_bands = [r for r in group if "hits" in r]
        if with_bands:
            hits = np.sum([r["hits"] for r in with_bands], axis=0)
            count = np.sum([r["count"] for r in with_bands], axis=0)
            cover = hits / np.maximum(count, 1)
            cells = zip(("early", "mid", "late"), cover, count)
            distinct = distinct_hidden(name, sorted({r["split"] for r in group}))
            missed = distinct_missed(with_bands)
            for j, (label, value, n_points) in enumerate(cells):
                cell = f"{value:.3f} ({n_points}"
                if missed is not None:
                    cell += f"; {distinct[j]}, {missed[j]} missed"
                row[f"cover {label}"] = cell + ")"
                n_cells += 1
                if not TARGET_COVER[0] <= value <= TARGET_COVER[1]:
                    outside.append((name, method, label, value, distinct[j]))
        table.append(row)
        best.setdefault(name, {})[method] = rel.mean()
    lines, ratios = [], {}
    for name, scores in best.items():
        four = {m: s for m, s in scores.items() if m in CANDIDATES}
        if not four:
            continue
        winner = min(four, key=four.get)
        line = f"- {name}: best of the four {winner} ({four[winner]:.3f})"
        for chooser in ("Auto", "Auto-choose", "Auto-refit"):
            if chooser in scores:
                ratio = scores[chooser] / four[winner]
                ratios.setdefault(chooser, []).append(ratio)
                line += f"; {chooser} / best = {ratio:.3f}"
                se = split_ratio_se(groups, name, chooser, winner)
                line += f" (SE {se:.3f})" if np.isfinite(se) else ""
        mix = mean_weights(groups, name, "Auto")
        if mix:
            line += f"; Auto's mean weights {mix}"
        lines.append(line)
    for chooser, r in ratios.items():
        r = np.array(r)
        lines.append(
            f"- {chooser} / best over the {r.size} data sets: mean {r.mean():.3f}, "
            f"largest {r.max():.3f}, within 2% on {int(np.sum(r <= 1.02))}"
        )
    return table, lines + coverage_lines(outside, n_cells)


def coverage_lines(outside, n_cells):
    """Lines on the coverage cells outside ``TARGET_COVER``: each with the
    95% interval of its coverage and how often a calibrated band would land
    outside on as many observations.

    A cell's effective size is taken as its distinct observations (the
    splits hide overlapping points, so the pooled count overstates it): the
    Wilson interval of the pooled coverage at that size, and the binomial
    chance that a band covering exactly 95% of new points covers a share
    outside ``TARGET_COVER`` of that many.
    """
    lo, hi = TARGET_COVER
    lines = [f"- Coverage cells outside {lo:.2f}-{hi:.2f}: {len(outside)} of {n_cells}"]
    excluded = 0
    for name, method, label, value, distinct in outside:
        hits = int(round(value * distinct))
        ci = binomtest(hits, distinct).proportion_ci(method="wilson")
        counts = np.arange(distinct + 1)
        inside = (counts >= lo * distinct - 1e-9) & (counts <= hi * distinct + 1e-9)
        chance = 1.0 - binom.pmf(counts[inside], distinct, 0.95).sum()
        apart = ci.high < lo or ci.low > hi
        excluded += apart
        lines.append(
            f"  - {name} {method} {label}: {value:.3f}, 95% interval "
            f"{ci.low:.3f}-{ci.high:.3f} on {distinct} distinct observations"
            f"{' (excludes the target)' if apart else ''}; a band covering "
            f"exactly 95% lands outside {lo:.2f}-{hi:.2f} on {distinct} "
            f"observations {chance:.0%} of the time"
        )
    if outside:
        lines.append(
            f"  - of these, {excluded} with an interval that excludes {lo:.2f}-{hi:.2f}"
        )
    return lines


@functools.cache
def _hidden_keys(name, split):
    """``(id, time)`` of each point a split hides, by third of its visible range."""
    data = dataset(name, split)
    visible, hidden, _ = split_held_out(data, 0.2, min_keep=2, random_state=split)
    third = thirds(hidden.times, (visible.times.min(), visible.times.max()))
    ids = np.repeat(np.asarray(hidden.ids), hidden.n_obs)
    return [set(zip(ids[third == j], hidden.times[third == j])) for j in range(3)]


def distinct_hidden(name, splits):
    """Distinct observations hidden by any of ``splits``, per third.

    The splits hide overlapping points: the pooled count overstates how many
    observations a coverage cell rests on.
    """
    keys = [_hidden_keys(name, split) for split in splits]
    return [len(set().union(*(k[j] for k in keys))) for j in range(3)]


def distinct_missed(rows):
    """Distinct observations outside their interval in any of ``rows``, per
    third (None for rows saved before misses were recorded)."""
    if any("missed" not in r for r in rows):
        return None
    keys = [set() for _ in range(3)]
    for r in rows:
        for i, t, j in r["missed"]:
            keys[j].add((i, t))
    return [len(k) for k in keys]


def moved_fits(earlier, rows, rtol=1e-9):
    """Lines naming the fits of ``rows`` whose held-out RMSE differs from the
    same fit (data, method, split, seed) in ``earlier`` by more than ``rtol``."""
    key = itemgetter("data", "method", "split", "seed")
    before = {key(r): r["rmse"] for r in earlier}
    out = []
    for r in rows:
        old = before.get(key(r))
        if old is not None and abs(r["rmse"] / old - 1) > rtol:
            data, method, split, seed = key(r)
            out.append(
                f"- {data} {method} split {split} seed {seed}: RMSE {old:.4f} -> "
                f"{r['rmse']:.4f} ({r['rmse'] / old:.3f} x)"
            )
    same = sum(key(r) in before for r in rows) - len(out)
    return out + [f"- {same} other fits within {rtol:g} of the earlier rows"]


def split_ratio_se(groups, name, method, reference):
    """Standard error over splits of ``method``'s RMSE over ``reference``'s.

    NaN with fewer than two splits that both methods were scored on.
    """

    def by_split(m):
        out = {}
        for (d, _, mm), group in groups.items():
            if (d, mm) == (name, m):
                for r in group:
                    out.setdefault(r["split"], []).append(r["relative"])
        return {k: np.mean(v) for k, v in out.items()}

    ours, theirs = by_split(method), by_split(reference)
    ratios = [ours[k] / theirs[k] for k in ours if k in theirs]
    if len(ratios) < 2:
        return np.nan
    return float(np.std(ratios, ddof=1) / np.sqrt(len(ratios)))


def mean_weights(groups, name, method):
    """``"pace 0.62, kernel 0.38"``: a chooser's mean weights over its fits."""
    fits = [r for (d, _, m), g in groups.items() if (d, m) == (name, method) for r in g]
    fits = [r["weights"] for r in fits if "weights" in r]
    if not fits:
        return ""
    names = {k for w in fits for k in w}
    mean = {k: sum(w.get(k, 0.0) for w in fits) / len(fits) for k in names}
    ordered = sorted(mean.items(), key=lambda kv: -kv[1])
    return ", ".join(f"{k} {v:.2f}" for k, v in ordered)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--datasets",
        nargs="+",
        default=list(DATASETS),
        choices=[*DATASETS, *LARGE_DATASETS, *RESAMPLED],
        metavar="NAME",
    )
    parser.add_argument(
        "--methods",
        nargs="+",
        default=[m for m in METHODS if m not in ("Auto-choose", "Auto-refit")],
    )
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument(
        "--auto-seeds",
        type=int,
        default=20,
        help="seeds of the chooser (each fit costs about four of each method)",
    )
    parser.add_argument("--splits", type=int, default=2)
    parser.add_argument("--first-split", type=int, default=0)
    parser.add_argument("--save-rows", help="write the per-fit rows to this JSON")
    parser.add_argument("--load-rows", nargs="+", help="table saved rows instead")
    parser.add_argument("--write", action="store_true", help="update benchmarks.md")
    parser.add_argument(
        "--section", default="stability", help="section of benchmarks.md to write"
    )
    parser.add_argument(
        "--title", default="Stability of single fits on small real data"
    )
    parser.add_argument("--note", default="", help="a line to add under the table")
    parser.add_argument(
        "--note-file", help="a file whose text is added under the table (after --note)"
    )
    parser.add_argument(
        "--compare-rows",
        nargs="+",
        help="earlier rows: print the fits whose held-out RMSE moved since",
    )
    args = parser.parse_args(argv)
    if args.load_rows:
        rows = [
            r for path in args.load_rows for r in json.loads(Path(path).read_text())
        ]
    else:
        rows = []
        for name in args.datasets:
            rows += run_dataset(name, args)
            if args.save_rows:
                Path(args.save_rows).write_text(json.dumps(rows))
    if args.compare_rows:
        earlier = [
            r for path in args.compare_rows for r in json.loads(Path(path).read_text())
        ]
        print("\n".join(moved_fits(earlier, rows)) + "\n")
    table, lines = summarize(rows)
    text = markdown_table(table, COLUMNS) + "\n\n" + "\n".join(lines)
    notes = [args.note] if args.note else []
    if args.note_file:
        notes.append(Path(args.note_file).read_text().strip())
    print(text)
    print(machine())
    if args.write:
        write_section(
            args.section,
            args.title,
            "Per data set and imputer (defaults): held-out RMSE over the pooled "
            "mean's, its spread over seeds (max / min), fits with an absurd curve, "
            "95% prediction-interval coverage of held-out values by thirds of the "
            "time range (see the docstring of `benchmarks/bench_stability.py`).\n\n"
            + text
            + "".join("\n\n" + note for note in notes),
        )


if __name__ == "__main__":
    main()
