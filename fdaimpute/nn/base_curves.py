"""A statistical base for the networks: a fitted imputer's curves to correct.

With a base, a VT or SAND module outputs ``base + g * (network - base)``: the
base's curve (and derivative) is computed from exactly the observations the
encoder sees, so in training, where part of each subject's points are
hidden, the base never sees the points the loss scores. The weight ``g``
starts at zero, so an untrained module *is* the base.
"""

from __future__ import annotations

import numpy as np
import torch

from fdaimpute._core.plausible import silenced

__all__ = ["EstimatorBase", "module_base"]


def module_base(module):
    """A module's statistical base (its ``base_curves``, or its transformer's
    for a SAND module), or None."""
    for part in (module, getattr(module, "vt", None)):
        base_curves = getattr(part, "base_curves", None)
        if base_curves is not None:
            return base_curves
    return None


class EstimatorBase:
    """The curves of a fitted fdaimpute imputer, in a module's units.

    Called by a module with its batch (times on the module's [0, 1] scale,
    standardised values, the mask of what the encoder sees) and its grid, it
    maps the visible observations back to data units, asks the imputer for
    each subject's curve and derivative on the grid, and returns them
    standardised again. The imputer runs in NumPy (float64) on the CPU; the
    result is moved to the batch's device. No gradient flows through it.

    Parameters
    ----------
    estimator : BaseImputer
        A fitted imputer. Its ``derivative`` is used where it has one;
        otherwise the derivative is the finite difference of its curve
        (:func:`numpy.gradient`).
    time_offset, time_scale : float
        The module's time map: ``t_data = time_offset + time_scale * t``.
    value_mean, value_scale : float or array of shape (p,)
        The module's value map: ``y_data = value_mean + value_scale * y``;
        one of each per variable for an imputer fitted on ``p`` variables
        (whose curves are ``p`` blocks of the grid, variable-major).
    derivative : bool, default=True
        Also compute the base's derivative (SAND needs it, VT does not:
        without it the second tensor returned is None).
    covariates : CovariateDesign, default=None
        For an imputer that reads subject covariates: their design, which
        turns the module's covariates back into the imputer's.
    covariate_scale : ndarray, default=None
        With ``covariates``: the module's covariates are the design's
        columns divided by these.

    Examples
    --------
    >>> import numpy as np, torch
    >>> import fdaimpute as fi
    >>> from fdaimpute.nn.base_curves import EstimatorBase
    >>> sim = fi.simulate.sand_paper(n=60, n_obs="8-12", random_state=0)
    >>> pace = fi.PACEImputer(extrapolate="clip").fit(sim.train.data)
    >>> base = EstimatorBase(pace, 0.0, 1.0, 0.0, 1.0)
    >>> t = torch.tensor([[0.1, 0.5, 0.9]]); y = torch.tensor([[0.3, 1.0, -0.2]])
    >>> curve, deriv = base(t, y, torch.ones(1, 3, dtype=torch.bool),
    ...                     torch.linspace(0, 1, 11))
    >>> curve.shape, deriv.shape
    (torch.Size([1, 11]), torch.Size([1, 11]))
    """

    def __init__(
        self,
        estimator,
        time_offset,
        time_scale,
        value_mean,
        value_scale,
        derivative=True,
        covariates=None,
        covariate_scale=None,
    ):
        self.estimator = estimator
        self.covariates = covariates
        self.covariate_scale = covariate_scale
        self.derivative = bool(derivative)
        self.time_offset = float(time_offset)
        self.time_scale = float(time_scale)
        self.value_mean = np.asarray(value_mean, dtype=np.float64)
        self.value_scale = np.asarray(value_scale, dtype=np.float64)

    def __call__(self, t, y, mask, grid, variable=None, covariates=None):
        """Base curves and derivatives on ``grid``: two tensors of shape (B, M).

        With ``p`` variables, of shape (B, p * M).

        The derivative is None when the instance was made without it.

        Parameters
        ----------
        t, y : Tensor of shape (B, L)
            Times on the module's scale and standardised values (padded).
        mask : bool Tensor of shape (B, L)
            The observations the base may use; every row needs one.
        grid : Tensor of shape (M,)
            The module's grid.
        variable : long Tensor of shape (B, L), default=None
            Each observation's variable, for an imputer of several.
        covariates : Tensor of shape (B, c), default=None
            Each subject's covariates as the module reads them (with the
            instance's ``covariates``).
        """
        mask_np = mask.detach().cpu().numpy()
        counts = mask_np.sum(axis=1)
        if (counts == 0).any():
            raise ValueError("every subject needs an observation the base can see")
        times = t.detach().cpu().double().numpy()[mask_np]
        values = y.detach().cpu().double().numpy()[mask_np]
        codes = None if variable is None else variable.detach().cpu().numpy()[mask_np]
        data = self._subjects(times, values, codes, counts)
        if self.covariates is not None:
            if covariates is None:
                raise ValueError("this base reads each subject's covariates")
            z = covariates.detach().cpu().double().numpy() * self.covariate_scale
            data.covariates = self.covariates.values(z)
        g = grid.detach().cpu().double().numpy()
        s = self.time_offset + self.time_scale * g
        # the network's own curves are checked, and their subjects named, by
        # its transform; a batch's partly hidden subjects are not the user's
        with silenced():
            if self.derivative:
                curve, deriv = self._curve_and_slope(data, s)
            else:
                curve, deriv = self.estimator.transform(data, grid=s), None
        mean, scale = self._row_map(g.size)
        curve = (np.asarray(curve, dtype=np.float64) - mean) / scale
        out = torch.as_tensor(curve, dtype=torch.float32, device=t.device)
        if not self.derivative:
            return out, None
        if deriv is None:
            # each variable's block on its own
            blocks = curve.reshape(len(curve), -1, g.size)
            deriv = np.gradient(blocks, g, axis=2).reshape(curve.shape)
        else:
            deriv = np.asarray(deriv) * (self.time_scale / scale)
        return out, torch.as_tensor(deriv, dtype=torch.float32, device=t.device)

    def _subjects(self, times, values, codes, counts):
        """The visible observations in data units, as the imputer reads them."""
        from fdaimpute.data import IrregularData
        from fdaimpute.multivariate import MultivariateIrregularData

        offsets = np.concatenate([[0], np.cumsum(counts)])
        times = self.time_offset + self.time_scale * times
        several = getattr(self.estimator, "variables_", None)
        # float32 times can merge observations a hair apart: duplicates="average"
        if several is None:
            values = self.value_mean + self.value_scale * values
            return IrregularData(times, values, offsets, duplicates="average")
        if codes is None:  # a module of one variable (of an imputer of several)
            codes = np.zeros(times.size, dtype=np.int64)
        mean = np.broadcast_to(self.value_mean, (len(several),))
        scale = np.broadcast_to(self.value_scale, (len(several),))
        values = mean[codes] + scale[codes] * values
        return MultivariateIrregularData(
            times,
            values,
            codes,
            offsets,
            variables=self.estimator.variables_,
            duplicates="average",
        )

    def _row_map(self, m):
        """The value map over one row of curves (``m`` points per variable)."""
        if self.value_mean.ndim == 0:
            return self.value_mean, self.value_scale
        return np.repeat(self.value_mean, m), np.repeat(self.value_scale, m)

    def _curve_and_slope(self, data, grid):
        """The imputer's curves and derivatives (None where it has none).

        In one pass where the imputer offers it (the FPCA family scores the
        subjects once for both).
        """
        est = self.estimator
        both = getattr(est, "_curves_and_derivatives", None)
        try:
            if both is not None:
                return both(data, grid=grid)
            return est.transform(data, grid=grid), est.derivative(data, grid=grid)
        except NotImplementedError:
            return est.transform(data, grid=grid), None
