"""Cross-fitted calibration of the error model on few subjects.

With few held-out subjects the error-variance head's overall level is a
noisy estimate (measured in ``docs/neural.md``). Cross-fitting gives it
every subject instead: the subjects are dealt into ``k`` folds, a network
with the fitted imputer's settings is trained on all folds but one for as
many epochs as the imputer kept, and its residuals on the left-out fold are
pooled over the folds. The imputer's own network is unchanged.
"""

from __future__ import annotations

import numpy as np

#: ``calibration_folds="auto"`` cross-fits below this many subjects.
AUTO_CROSS_FIT_SUBJECTS = 500
#: and then uses this many folds.
AUTO_FOLDS = 5


def n_folds(setting, n_subjects, warm):
    """Folds of the cross-fitted calibration, 0 for the held-out subjects only.

    Parameters
    ----------
    setting : int, "auto" or None
        The imputer's ``calibration_folds``.
    n_subjects : int
        Subjects in the training data.
    warm : bool
        Whether the fit continues a previous one (never cross-fitted: the
        epochs of the earlier fits cannot be replayed).

    Returns
    -------
    int
    """
    if setting is None or warm:
        return 0
    if setting == "auto":
        setting = AUTO_FOLDS if n_subjects < AUTO_CROSS_FIT_SUBJECTS else 0
    # a fold needs a subject, and the networks need training subjects
    return min(int(setting), n_subjects) if n_subjects >= 2 else 0


def cross_fit(imputer, data, grid, cfg, regularizers, amp, seed, folds, device):
    """Networks trained without each fold, paired with that fold.

    Parameters
    ----------
    imputer : _NeuralImputer
        The imputer being fitted; its network is trained and its
        ``module_config_`` and ``best_epoch_`` set.
    data : IrregularData
        All training subjects.
    grid : Tensor
        The model grid (standardised time).
    cfg : dict
        Resolved settings (:meth:`_NeuralImputer._config`).
    regularizers : list
        Checked regularizers.
    amp : bool or str
        Mixed precision.
    seed : int
        Seed of the folds and of the networks.
    folds : int
        Number of folds (2 or more).
    device : torch.device
        Where to train.

    Returns
    -------
    modules : list of torch.nn.Module
        One trained network per fold.
    held : list of RaggedTensors
        The subjects of each fold, which its network did not see.
    """
    import torch

    fold = np.random.default_rng(seed).permutation(len(data)) % folds
    last = imputer.best_epoch_
    modules, held = [], []
    for j in range(folds):
        train = data.take(np.flatnonzero(fold != j))
        torch.manual_seed(seed + 101 * (j + 1))
        module = imputer._build_module(imputer.module_config_).to(device)
        imputer._after_build(module, grid)
        if imputer.base_ is not None:
            imputer._attach_base(module, imputer._fit_base(train, seed))
        if last >= 0:
            # the same schedule as the imputer's network, stopped at the
            # epoch it kept (by then the training loss is lowest, or near)
            trainer = imputer._make_trainer(
                module, grid, cfg, regularizers, amp, seed + j + 1, budget=False
            )
            trainer.on_epoch_end = lambda record: record["epoch"] >= last
            trainer.fit(imputer._tensors(train, device))
            imputer._finish_fold(module, grid)
        modules.append(module.eval())
        held.append(imputer._tensors(data.take(np.flatnonzero(fold == j)), device))
    return modules, held
