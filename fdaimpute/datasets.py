"""Real data shipped with the package (nothing is downloaded at load time)."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

import numpy as np

from fdaimpute.data import IrregularData

__all__ = ["RealData", "load_framingham", "load_uk_electricity"]

_LEVELS = {
    "dense": "dense",
    30: "dense",
    "30": "dense",
    "sparse": "sparse",
    "8-12": "sparse",
    "ssparse": "ssparse",
    "3-5": "ssparse",
}


@dataclass
class RealData:
    """A real data set split in row order.

    Attributes
    ----------
    data : IrregularData
        All subjects.
    train, validation, test : IrregularData
        The first 90%, the next 5% and the last 5% of subjects (the split
        of the SAND paper).
    description : str
        Where the data come from and what the units are.
    """

    data: IrregularData
    train: IrregularData
    validation: IrregularData
    test: IrregularData
    description: str


def load_uk_electricity(n_obs="sparse"):
    """London smart-meter readings of 5,494 households, 13-14 November 2013.

    Half-hourly electricity use (kWh) over 48 hours, subsampled as in the
    SAND paper (Hong et al., NeurIPS 2024) to 30, 8-12 or 3-5 readings per
    household. Times are scaled to ``[0, 1]`` (half-hour ``k`` of 0..95 is
    ``k / 95``). The same households appear in the same order at every
    sparsity level; ids are the row numbers.

    Parameters
    ----------
    n_obs : {"dense", "sparse", "ssparse"} or {30, "8-12", "3-5"}, default="sparse"
        Sparsity level.

    Returns
    -------
    RealData

    Notes
    -----
    Source: the data folder of the SAND paper's public code release
    (github.com/jshong071/SAND, MIT licence, copied in
    ``fdaimpute/_data/uk_electricity_LICENSE.txt``). The full 96-point
    series are not included: score imputations on held-out readings
    (:func:`fdaimpute.metrics.held_out_error`) or against the ``dense``
    readings of the same households.

    Examples
    --------
    >>> from fdaimpute.datasets import load_uk_electricity
    >>> uk = load_uk_electricity("3-5")
    >>> len(uk.data), len(uk.train), len(uk.test)
    (5494, 4945, 274)
    """
    try:
        level = _LEVELS[n_obs]
    except (KeyError, TypeError):
        raise ValueError(
            f"n_obs must be one of {sorted(map(str, _LEVELS))}, got {n_obs!r}"
        ) from None
    path = resources.files("fdaimpute") / "_data" / "uk_electricity.npz"
    with resources.as_file(path) as file, np.load(file) as archive:
        counts = archive[f"{level}_counts"].astype(np.int64)
        times = archive[f"{level}_index"].astype(np.float64) / 95.0
        values = archive[f"{level}_kwh"].astype(np.float64)
    data = IrregularData(times, values, np.concatenate([[0], np.cumsum(counts)]))
    return _in_row_order(
        data,
        "London smart meters, 5,494 households, half-hourly kWh on 13-14 "
        f"November 2013; {level} subsample; times scaled to [0, 1] (k/95).",
    )


def load_framingham():
    """Body-mass index of 889 Framingham Heart Study participants, ages 40 to 60.

    The curves of the SAND paper's real-data table (Hong et al., NeurIPS
    2024): 3 to 11 visits per participant, one a year at most. Times are
    ages scaled to ``[0, 1]`` (age 40 is 0, age 60 is 1; 21 distinct
    times). Values are BMI as prepared by the paper's authors (centred and
    scaled: about -0.9 to 2.0, mean 0.03, SD 0.29), not raw kg/m^2. Ids
    are the row numbers.

    Returns
    -------
    RealData

    Notes
    -----
    Source: the data folder of the SAND paper's public code release
    (github.com/jshong071/SAND, MIT licence, copied in
    ``fdaimpute/_data/framingham_LICENSE.txt``). Participant 602 has two
    visits recorded at age 60 (values 0.509 and 0.601); they are averaged
    (``IrregularData(..., duplicates="average")``), so 7,769 recorded
    visits become 7,768 observations. There are no true curves: score
    imputations on held-out visits (:func:`fdaimpute.metrics.held_out_error`).

    Examples
    --------
    >>> from fdaimpute.datasets import load_framingham
    >>> fram = load_framingham()
    >>> len(fram.data), int(fram.data.n_obs.min()), int(fram.data.n_obs.max())
    (889, 3, 11)
    """
    path = resources.files("fdaimpute") / "_data" / "framingham.npz"
    with resources.as_file(path) as file, np.load(file) as archive:
        counts = archive["counts"].astype(np.int64)
        times = archive["times"].astype(np.float64)
        values = archive["values"].astype(np.float64)
    data = IrregularData(
        times,
        values,
        np.concatenate([[0], np.cumsum(counts)]),
        duplicates="average",
    )
    return _in_row_order(
        data,
        "Framingham Heart Study, 889 participants, body-mass index (centred "
        "and scaled by the SAND paper's authors) at 3-11 visits between ages "
        "40 and 60; times scaled to [0, 1] ((age - 40) / 20).",
    )


def _in_row_order(data, description):
    """A :class:`RealData` split 90/5/5 in row order."""
    n = len(data)
    n_train, n_val = int(round(0.9 * n)), int(round(0.05 * n))
    return RealData(
        data=data,
        train=data[:n_train],
        validation=data[n_train : n_train + n_val],
        test=data[n_train + n_val :],
        description=description,
    )
