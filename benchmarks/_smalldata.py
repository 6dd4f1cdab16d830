"""Small real longitudinal data sets for the stability benchmark.

Each loader returns an :class:`fdaimpute.IrregularData` (ids kept, times in
the data's own unit). The Rdatasets files live in ``benchmarks/data``
(``SOURCE.md`` there names each R package and its licence); Framingham and
UK electricity ship with the package and are subsampled here.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

import fdaimpute as fi

DATA = Path(__file__).resolve().parent / "data"


def _read(name, id, time, value, transform=None, time_scale=1.0):
    frame = pd.read_csv(DATA / f"{name}.csv")
    frame = frame[[id, time, value]].dropna()
    frame[id] = frame[id].astype(str)
    frame[time] = frame[time].astype(float) * time_scale
    if transform is not None:
        frame[value] = transform(frame[value].astype(float))
    return fi.IrregularData.from_long(frame, id=id, time=time, value=value)


def blackmore():
    """carData::Blackmore: exercise hours a week of 231 girls, ages 8 to 18."""
    return _read("Blackmore", "subject", "age", "exercise")


def pbcseq():
    """survival::pbcseq: log serum bilirubin of 312 patients over years."""
    return _read("pbcseq", "id", "day", "bili", np.log, time_scale=1 / 365.25)


def orthodont():
    """nlme::Orthodont: a jaw distance (mm) of 27 children at 8, 10, 12, 14."""
    return _read("Orthodont", "Subject", "age", "distance")


def oxboys():
    """nlme::Oxboys: heights (cm) of 26 boys at 9 occasions."""
    return _read("Oxboys", "Subject", "age", "height")


def sitka():
    """MASS::Sitka: log size of 79 spruce trees at 5 times (days)."""
    return _read("Sitka", "tree", "Time", "size")


def subsample(data, n, seed=0):
    """``n`` subjects of ``data`` drawn without replacement (all if fewer)."""
    if n >= len(data):
        return data
    rng = np.random.default_rng(seed)
    return data.take(np.sort(rng.choice(len(data), n, replace=False)))


def _subsampled(loader, n):
    return lambda: subsample(loader(), n, seed=n)


def _framingham(n):
    return lambda: subsample(fi.datasets.load_framingham().data, n, seed=n)


def _uk(n, level="sparse"):
    return lambda: subsample(fi.datasets.load_uk_electricity(level).data, n, seed=n)


#: name -> loader of every data set the stability benchmark scores
DATASETS = {
    "blackmore": blackmore,
    "blackmore-90": _subsampled(blackmore, 90),
    "pbcseq": pbcseq,
    "pbcseq-90": _subsampled(pbcseq, 90),
    "pbcseq-250": _subsampled(pbcseq, 250),
    "orthodont": orthodont,
    "oxboys": oxboys,
    "sitka": sitka,
    "framingham-50": _framingham(50),
    "framingham-90": _framingham(90),
    "framingham-100": _framingham(100),
    "framingham-250": _framingham(250),
    "uk-8-12-50": _uk(50),
    "uk-8-12-90": _uk(90),
    "uk-8-12-100": _uk(100),
    "uk-8-12-250": _uk(250),
}

#: Whole UK electricity tables (5,494 households): where one held-out draw
#: already hides thousands of points. Scored by name only, not by default.
LARGE_DATASETS = {
    f"uk-{name}-all": (lambda level=level: fi.datasets.load_uk_electricity(level).data)
    for name, level in (("30", "dense"), ("8-12", "sparse"), ("3-5", "ssparse"))
}

#: The subsampled sets drawn afresh at every split (seed ``RESAMPLE_SEED`` plus
#: the split) instead of once: name -> (loader of all subjects, subjects). A
#: fixed draw of 90 subjects holds few late visits (59 distinct held-out
#: points in Blackmore-90's last third), so its coverage cells measure that
#: draw as much as the method; fresh draws measure the method at that size.
RESAMPLED = {
    "blackmore-90r": (blackmore, 90),
    "pbcseq-90r": (pbcseq, 90),
    "framingham-90r": (lambda: fi.datasets.load_framingham().data, 90),
    "uk-8-12-90r": (lambda: fi.datasets.load_uk_electricity("sparse").data, 90),
}
RESAMPLE_SEED = 1000


def dataset(name, split):
    """The subjects of data set ``name`` at ``split`` (of ``DATASETS``,
    ``LARGE_DATASETS`` or, drawn for the split, ``RESAMPLED``)."""
    if name in RESAMPLED:
        loader, n = RESAMPLED[name]
        return subsample(loader(), n, seed=RESAMPLE_SEED + split)
    return {**DATASETS, **LARGE_DATASETS}[name]()
