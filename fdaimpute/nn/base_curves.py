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

__all__ = ["EstimatorBase"]


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
    value_mean, value_scale : float
        The module's value map: ``y_data = value_mean + value_scale * y``.
    derivative : bool, default=True
        Also compute the base's derivative (SAND needs it, VT does not:
        without it the second tensor returned is None).

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
    ):
        self.estimator = estimator
        self.derivative = bool(derivative)
        self.time_offset = float(time_offset)
        self.time_scale = float(time_scale)
        self.value_mean = float(value_mean)
        self.value_scale = float(value_scale)

    def __call__(self, t, y, mask, grid):
        """Base curves and derivatives on ``grid``: two tensors of shape (B, M).

        The derivative is None when the instance was made without it.

        Parameters
        ----------
        t, y : Tensor of shape (B, L)
            Times on the module's scale and standardised values (padded).
        mask : bool Tensor of shape (B, L)
            The observations the base may use; every row needs one.
        grid : Tensor of shape (M,)
            The module's grid.
        """
        from fdaimpute.data import IrregularData

        mask_np = mask.detach().cpu().numpy()
        counts = mask_np.sum(axis=1)
        if (counts == 0).any():
            raise ValueError("every subject needs an observation the base can see")
        times = t.detach().cpu().double().numpy()[mask_np]
        values = y.detach().cpu().double().numpy()[mask_np]
        data = IrregularData(
            self.time_offset + self.time_scale * times,
            self.value_mean + self.value_scale * values,
            np.concatenate([[0], np.cumsum(counts)]),
            # float32 times can merge observations a hair apart
            duplicates="average",
        )
        s = self.time_offset + self.time_scale * grid.detach().cpu().double().numpy()
        if self.derivative:
            curve, deriv = self._curve_and_slope(data, s)
        else:
            curve, deriv = self.estimator.transform(data, grid=s), None
        curve = (
            np.asarray(curve, dtype=np.float64) - self.value_mean
        ) / self.value_scale
        out = torch.as_tensor(curve, dtype=torch.float32, device=t.device)
        if not self.derivative:
            return out, None
        if deriv is None:
            deriv = np.gradient(curve, grid.detach().cpu().double().numpy(), axis=1)
        else:
            deriv = np.asarray(deriv) * (self.time_scale / self.value_scale)
        return out, torch.as_tensor(deriv, dtype=torch.float32, device=t.device)

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
