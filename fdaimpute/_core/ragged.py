"""Subjects as consecutive runs of observations: what the data containers share."""

from __future__ import annotations

import numbers

import numpy as np


class RaggedSubjects:
    """Sizes, indexing and subsetting of subjects delimited by ``offsets``.

    For a container whose observations lie subject after subject in flat
    arrays (``times`` and others), subject ``i`` owning
    ``offsets[i]:offsets[i + 1]``, with one id per subject in ``ids``.
    A subclass says what one subject is (:meth:`_subject`) and builds a
    subset from the positions :meth:`_gather` gives (``take``).
    """

    @property
    def n_obs(self):
        """Number of observations of each subject, shape (n_subjects,)."""
        return np.diff(self.offsets)

    @property
    def n_subjects(self):
        """Number of subjects."""
        return self.offsets.size - 1

    @property
    def shape(self):
        """``(n_subjects,)``, so that scikit-learn indexes this like an array."""
        return (self.n_subjects,)

    @property
    def subject_index(self):
        """Subject position of each observation, shape (n_obs,)."""
        return np.repeat(np.arange(self.n_subjects), self.n_obs)

    @property
    def time_range(self):
        """``(min, max)`` of all observation times."""
        return float(self.times.min()), float(self.times.max())

    def __len__(self):
        return self.n_subjects

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, key):
        if isinstance(key, tuple):
            if len(key) == 2 and key[1] is Ellipsis:
                key = key[0]
            else:
                raise IndexError(f"{type(self).__name__} supports one index (subjects)")
        n = len(self)
        if isinstance(key, numbers.Integral) and not isinstance(key, bool):
            i = int(key) + n if key < 0 else int(key)
            if not 0 <= i < n:
                raise IndexError(f"subject index {key} out of range for {n} subjects")
            return self._subject(slice(self.offsets[i], self.offsets[i + 1]))
        if isinstance(key, slice):
            return self.take(np.arange(n)[key])
        key = np.asarray(key)
        if key.dtype == bool:
            if key.shape != (n,):
                raise IndexError(
                    f"boolean mask of shape {key.shape} does not match {n} subjects"
                )
            return self.take(np.flatnonzero(key))
        if key.dtype.kind in "iu" or key.size == 0:
            idx = key.astype(np.int64).ravel()
            if idx.size and (idx.max() >= n or idx.min() < -n):
                raise IndexError(f"subject index out of range for {n} subjects")
            return self.take(np.where(idx < 0, idx + n, idx))
        raise IndexError(f"cannot index subjects with dtype {key.dtype}")

    def _subject(self, rows):
        """Subject ``self[i]``, given the slice of its observations."""
        raise NotImplementedError

    def _gather(self, indices):
        """``(indices, offsets, flat)`` of the subjects at ``indices``, in order.

        ``flat`` are the positions of their observations in the flat arrays
        and ``offsets`` delimit them in the subset.
        """
        indices = np.asarray(indices, dtype=np.int64)
        counts = self.n_obs[indices]
        offsets = np.concatenate([[0], np.cumsum(counts)])
        starts = self.offsets[indices]
        flat = np.repeat(starts - offsets[:-1], counts) + np.arange(offsets[-1])
        return indices, offsets, flat
