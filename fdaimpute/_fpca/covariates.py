"""Subject covariates: their numeric design and a varying-coefficient mean.

A covariate-adjusted mean ``mu(t, z) = mu0(t) + sum_k z_k beta_k(t)`` (a
varying-coefficient model, as in Jiang & Wang 2010) needs two things:

- a numeric design ``z`` from the covariates as users hold them
  (:class:`CovariateDesign`): a numeric covariate is centred on its
  training mean (so that ``mu0`` is the mean curve of an average subject);
  a categorical one is one-hot encoded against a reference level (its most
  frequent training level, ties to the first in sorted order), one column
  per other level;
- the coefficient curves ``beta_k`` (:func:`varying_coefficients`): at each
  point ``t0`` of a grid, one weighted least-squares fit of every
  observation on ``[1, z] x [1, t - t0]`` with kernel weights ``K((t -
  t0) / h)``, the local-linear smoother of one curve applied to each
  coefficient at once.
"""

from __future__ import annotations

import numpy as np

from fdaimpute._core.ids import missing_mask, subject_label
from fdaimpute._numerics.local_linear import _kernel_powers

#: Ridge on the local normal equations, relative to their trace (keeps a
#: window where a level is absent solvable; its coefficient then shrinks to 0).
_RIDGE = 1e-8
#: Kernel evaluations held at once (bounds memory).
_MAX_PAIRS = 2_000_000


def _is_numeric(column):
    return np.asarray(column).dtype.kind in "biuf"


class CovariateDesign:
    """The numeric design of subject covariates, learnt on training subjects.

    Parameters
    ----------
    encoding : dict
        ``name -> {"kind": "numeric", "centre": float}`` or ``name ->
        {"kind": "categorical", "reference": str, "levels": [str, ...]}``
        (the other levels, one design column each), in the design's order.
        Built by :meth:`learn`; a plain dict so that it saves as data.
    """

    def __init__(self, encoding):
        self.encoding = encoding

    @classmethod
    def learn(cls, covariates, names, ids=None):
        """The design of the covariates ``names`` from training values.

        Parameters
        ----------
        covariates : dict of str to ndarray
            The training subjects' covariates (one value per subject).
        names : list of str
            Which covariates enter the mean.
        ids : ndarray, default=None
            The subjects' labels, to name one in an error.

        Returns
        -------
        CovariateDesign
        """
        encoding = {}
        for name in names:
            column = _column(covariates, name, "training", ids)
            if _is_numeric(column):
                encoding[name] = {
                    "kind": "numeric",
                    "centre": float(np.mean(column.astype(np.float64))),
                }
                continue
            labels = column.astype(str)
            levels, counts = np.unique(labels, return_counts=True)
            reference = str(levels[np.argmax(counts)])
            encoding[name] = {
                "kind": "categorical",
                "reference": reference,
                "levels": [str(v) for v in levels if v != reference],
            }
        return cls(encoding)

    @property
    def columns(self):
        """Names of the design's columns (``"age"``, ``"sex=m"``, ...)."""
        out = []
        for name, code in self.encoding.items():
            if code["kind"] == "numeric":
                out.append(name)
            else:
                out += [f"{name}={level}" for level in code["levels"]]
        return out

    def matrix(self, covariates, ids=None):
        """The design ``Z`` of some subjects, shape (n_subjects, n_columns).

        Parameters
        ----------
        covariates : dict of str to ndarray
            The subjects' covariates.
        ids : ndarray, default=None
            The subjects' labels, to name one in an error.

        Raises
        ------
        ValueError
            A covariate the fit used is absent, missing for a subject, not
            numeric where it was, or holds a level unseen in training.
        """
        blocks = []
        for name, code in self.encoding.items():
            column = _column(covariates, name, "these", ids)
            who = _label(ids)
            if code["kind"] == "numeric":
                if not _is_numeric(column):
                    raise ValueError(
                        f"covariate {name!r} was numeric in training, got "
                        f"values of type {column.dtype}"
                    )
                blocks.append(column.astype(np.float64)[:, None] - code["centre"])
                continue
            labels = column.astype(str)
            known = set(code["levels"]) | {code["reference"]}
            unseen = np.flatnonzero(~np.isin(labels, list(known)))
            if unseen.size:
                i = int(unseen[0])
                raise ValueError(
                    f"{who(i)}: covariate {name!r} has level {column[i]!r}, not "
                    f"seen in training (levels {sorted(known)})"
                )
            blocks.append(
                (labels[:, None] == np.asarray(code["levels"])[None, :]).astype(float)
            )
        n = len(next(iter(covariates.values()))) if covariates else 0
        return np.concatenate(blocks, axis=1) if blocks else np.zeros((n, 0))

    def values(self, z):
        """The covariates of a design ``z``: the inverse of :meth:`matrix`.

        Parameters
        ----------
        z : ndarray of shape (n_subjects, n_columns)

        Returns
        -------
        dict of str to ndarray
            Numeric covariates as floats, categorical ones as their levels
            (the reference where a row's one-hot columns are all zero).
        """
        out, at = {}, 0
        for name, code in self.encoding.items():
            if code["kind"] == "numeric":
                out[name] = z[:, at] + code["centre"]
                at += 1
                continue
            k = len(code["levels"])
            block = z[:, at : at + k]
            labels = np.asarray([code["reference"], *code["levels"]], dtype=object)
            pick = np.where(block.max(axis=1) > 0.5, block.argmax(axis=1) + 1, 0)
            out[name] = labels[pick]
            at += k
        return out


def _label(ids):
    def name(i):
        return subject_label(ids, i) if ids is not None else f"subject {i}"

    return name


def _column(covariates, name, which, ids):
    """One covariate of ``covariates`` as an array, refusing missing values."""
    if name not in covariates:
        have = sorted(covariates)
        raise ValueError(
            f"covariate {name!r} is needed but {which} subjects do not carry it "
            f"(their covariates: {have}); give it, e.g. "
            f"MultivariateIrregularData.from_long(df, covariates=[{name!r}, ...])"
        )
    column = np.asarray(covariates[name])
    missing = missing_mask(column)
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise ValueError(
            f"{_label(ids)(i)}: covariate {name!r} is missing; the "
            "covariate-adjusted mean needs every subject's covariates"
        )
    return column


def varying_coefficients(times, values, design, grid, bandwidth, kernel):
    """Local-linear varying-coefficient fit of ``values ~ [1, z] beta(t)``.

    Parameters
    ----------
    times, values : ndarray of shape (n_obs,)
        The observations.
    design : ndarray of shape (n_obs, q)
        Each observation's subject's design row ``z``.
    grid : ndarray of shape (G,)
        Where to estimate the coefficients.
    bandwidth : float
        Kernel bandwidth.
    kernel : str
        Kernel name.

    Returns
    -------
    ndarray of shape (q + 1, G)
        ``mu0`` (row 0) and ``beta_1 .. beta_q`` at ``grid``.
    """
    x = np.concatenate([np.ones((times.size, 1)), design], axis=1)
    q1 = x.shape[1]
    outer = (x[:, :, None] * x[:, None, :]).reshape(times.size, q1 * q1)
    xy = x * values[:, None]
    out = np.empty((q1, grid.size))
    step = max(1, _MAX_PAIRS // max(times.size, 1))
    for start in range(0, grid.size, step):
        part = grid[start : start + step]
        k0, k1, k2 = _kernel_powers(
            times[None, :] - part[:, None], bandwidth, kernel, 2
        )
        m0, m1, m2 = (k @ outer for k in (k0, k1, k2))
        gram = np.block(
            [
                [m0.reshape(-1, q1, q1), m1.reshape(-1, q1, q1)],
                [m1.reshape(-1, q1, q1), m2.reshape(-1, q1, q1)],
            ]
        )
        rhs = np.concatenate([k0 @ xy, k1 @ xy], axis=1)
        trace = np.trace(gram, axis1=1, axis2=2)
        gram += (_RIDGE * trace / (2 * q1))[:, None, None] * np.eye(2 * q1)
        coef = np.linalg.solve(gram, rhs[:, :, None])[:, :q1, 0]
        out[:, start : start + step] = coef.T
    return out
