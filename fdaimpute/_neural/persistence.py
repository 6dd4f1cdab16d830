"""Pickling a neural imputer: its networks travel as CPU weights.

A pickle (or a model file) holds the estimator's attributes with ``module_`` and
``error_head_`` replaced by their weights on the CPU (and ``device_``
dropped); loading rebuilds both networks from ``module_config_`` on the
estimator's ``device`` (the CPU, with a warning, where that is missing).
The keys are those of every earlier version, so saved models still load.
"""

from __future__ import annotations

import warnings

__all__ = ["TorchStatePickling", "cpu_weights", "resolve_device"]

_TORCH_STATE = "_module_state"
_HEAD_STATE = "_error_head_state"


def resolve_device(device):
    """The ``torch.device`` of a ``device`` parameter.

    Parameters
    ----------
    device : str, torch.device or None
        ``None`` or ``"auto"``: CUDA when available, else the CPU.

    Returns
    -------
    torch.device

    Raises
    ------
    ValueError
        If the name is not a device, or names CUDA where there is none.
    """
    import torch

    if device is None or device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"invalid device {device!r}: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {device!r} was requested but CUDA is not available")
    return dev


def cpu_weights(module):
    """A copy of ``module``'s state dict on the CPU."""
    return {k: v.detach().cpu().clone() for k, v in module.state_dict().items()}


class TorchStatePickling:
    """``__getstate__``/``__setstate__`` for an estimator holding torch networks.

    The class using it provides ``device``, ``module_config_``,
    ``_build_module(config)`` and ``_attach_base(module)`` (which gives a
    rebuilt module its statistical base, kept outside the weights).
    """

    def __getstate__(self):
        state = self.__dict__.copy()
        module = state.pop("module_", None)
        if module is not None:
            state[_TORCH_STATE] = cpu_weights(module)
        head = state.pop("error_head_", None)
        if head is not None:
            state[_HEAD_STATE] = (head.n_features, head.width, cpu_weights(head))
        state.pop("device_", None)
        return state

    def __setstate__(self, state):
        weights = state.pop(_TORCH_STATE, None)
        head = state.pop(_HEAD_STATE, None)
        self.__dict__.update(state)
        if weights is None:
            return
        try:
            device = resolve_device(self.device)
        except ValueError:
            warnings.warn(
                f"device {self.device!r} is not available here; using the CPU",
                UserWarning,
                stacklevel=2,
            )
            device = resolve_device("cpu")
        _check_shapes(lambda: self._build_module(self.module_config_), weights)
        module = self._build_module(self.module_config_)
        module.load_state_dict(weights)
        self._attach_base(module)
        self.module_ = module.to(device).eval()
        self.device_ = device
        self.error_head_ = None
        if head is not None:
            from fdaimpute.nn.uncertainty import ErrorVarianceHead

            n_features, width, head_weights = head
            _check_shapes(lambda: ErrorVarianceHead(n_features, width), head_weights)
            error_head = ErrorVarianceHead(n_features, width)
            error_head.load_state_dict(head_weights)
            self.error_head_ = error_head.to(device).eval()


def _check_shapes(build, weights):
    """Raise ValueError unless ``weights`` fit the network ``build()`` makes.

    The network is built on torch's meta device first (no memory), so a
    configuration asking for a network larger than its stored weights is
    refused before anything is allocated.
    """
    import torch

    try:
        with torch.device("meta"):
            expected = {k: tuple(v.shape) for k, v in build().state_dict().items()}
    except (NotImplementedError, RuntimeError):  # a module the meta device cannot build
        return
    got = {k: tuple(v.shape) for k, v in weights.items()}
    if got != expected:
        wrong = sorted(set(got) ^ set(expected)) or sorted(
            k for k in got if got[k] != expected[k]
        )
        raise ValueError(
            "the stored weights do not fit the network of the stored configuration "
            f"(first differences: {wrong[:3]})"
        )
