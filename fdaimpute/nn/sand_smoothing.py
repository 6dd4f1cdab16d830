"""How much SAND smooths: the closed-form start's ridge, chosen on held-out points.

SAND's closed-form start (:meth:`~fdaimpute.nn.SANDLayer.init_identity`) is a
smoother whose strength is the ridge of its least-squares problem: a larger
ridge damps more of the high frequencies of ``T~``. Training the layer's
weights by gradient descent to learn that smoothing from the data overfits
at the sample sizes of a CPU fit (thousands of subjects, tens of thousands
of weights in the layer): the measured curves ended rougher than the
transformer's and no more accurate (``docs/benchmarks.md``, section
"SAND and VT at their defaults"). Choosing the one ridge on the validation
subjects' hidden points instead is a one-dimensional choice, and the layer
keeps learning on top of its start.

:class:`SANDTrainer` does this once after the epochs: the kept state's SAND
layer is compared with the closed-form start at each ridge of
:data:`RIDGES`, and the one that best predicts the validation subjects'
hidden points is kept.
"""

from __future__ import annotations

from fdaimpute.nn import distributed
from fdaimpute.nn.training import Trainer

__all__ = ["AUTO_START", "RIDGES", "SANDTrainer"]

#: The ridges (relative to the largest squared singular value) compared.
RIDGES = (1e-5, 1e-4, 3e-4, 1e-3, 3e-3, 1e-2)
#: The ridge SAND starts from when the smoothing is chosen after training.
AUTO_START = 3e-4


class SANDTrainer(Trainer):
    """The :class:`~fdaimpute.nn.Trainer` of a SAND module, choosing its smoothing.

    Parameters
    ----------
    module, grid, **options
        As for :class:`~fdaimpute.nn.Trainer`.
    smoothing : "auto" or None, default=None
        ``"auto"``: after the epochs, keep whichever of the trained SAND
        layer and the closed-form starts at :data:`RIDGES` predicts the
        validation subjects' hidden points best (:meth:`finish`). ``None``:
        keep the trained layer.

    Attributes
    ----------
    smoothing_ : float or None
        The ridge of the closed-form start that was kept, or None where the
        trained layer was, nothing was chosen, or ``keep_start`` went back to
        the state before training.
    smoothing_errors_ : dict
        Held-out error of each candidate (``"trained"`` and the ridges);
        empty where nothing was chosen.
    """

    def __init__(self, module, grid, *, smoothing=None, **options):
        super().__init__(module, grid, **options)
        if smoothing not in ("auto", None):
            raise ValueError(f"smoothing must be 'auto' or None, got {smoothing!r}")
        self.smoothing = smoothing
        self.smoothing_ = None
        self.smoothing_errors_ = {}

    def finish(self, valid, hidden):
        """Choose SAND's smoothing on the validation subjects (see the class).

        Returns whether a closed-form start replaced the trained layer.
        """
        if self.smoothing != "auto":
            return False
        layer = self.module.sand
        trained = _copy(layer.state_dict())
        errors = {"trained": self._held_out(valid, hidden)}
        best, best_state = "trained", trained
        for ridge in RIDGES:
            layer.load_state_dict(trained)
            layer.init_identity(self.grid, ridge=ridge)
            errors[ridge] = self._held_out(valid, hidden)
            if errors[ridge] < errors[best]:
                best, best_state = ridge, _copy(layer.state_dict())
        layer.load_state_dict(best_state)
        self.smoothing_errors_ = errors
        self.smoothing_ = None if best == "trained" else best
        return self.smoothing_ is not None

    def _check_gain(self, valid, hidden):
        super()._check_gain(valid, hidden)
        if self.best_epoch < self.start_epoch:
            # back at the start (``keep_start``): nothing chosen is in use
            self.smoothing_ = None

    def _held_out(self, valid, hidden):
        error = self.validate(valid, hidden)
        return distributed.mean_over_ranks(error, self.device, self.world_size)


def _copy(state):
    return {k: v.detach().clone() for k, v in state.items()}
