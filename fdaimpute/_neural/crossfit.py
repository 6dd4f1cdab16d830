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


def cross_fit(data, folds, seed, fit_fold, tensors):
    """Networks trained without each fold, paired with that fold.

    The imputer supplies the two steps that know networks; this function
    deals the subjects into folds and pairs each network with the subjects
    it did not see.

    Parameters
    ----------
    data : IrregularData
        All training subjects.
    folds : int
        Number of folds (2 or more).
    seed : int
        Seed of the deal.
    fit_fold : callable
        ``fit_fold(train, j)``: the network of fold ``j`` trained on the
        subjects ``train`` of the other folds, as the imputer's network was
        (``_NeuralImputer._fold_network``).
    tensors : callable
        ``tensors(subjects)``: the subjects as the networks read them
        (``RaggedTensors`` in standardised units).

    Returns
    -------
    modules : list of torch.nn.Module
        One trained network per fold, in eval mode.
    held : list of RaggedTensors
        The subjects of each fold, which its network did not see.
    """
    fold = np.random.default_rng(seed).permutation(len(data)) % folds
    modules, held = [], []
    for j in range(folds):
        train = data.take(np.flatnonzero(fold != j))
        modules.append(fit_fold(train, j).eval())
        held.append(tensors(data.take(np.flatnonzero(fold == j))))
    return modules, held
