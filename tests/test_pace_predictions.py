"""Held-out predictions for every K: the two algorithms against a direct solve."""

import numpy as np
import pytest

from fdaimpute._fpca import scores
from fdaimpute._fpca.scores import cumulative_predictions
from fdaimpute._numerics.linalg import group_by_count, pool_small_groups


def _problem(counts, counts_new, p, seed=0):
    rng = np.random.default_rng(seed)
    off = np.concatenate([[0], np.cumsum(counts)])
    off_new = np.concatenate([[0], np.cumsum(counts_new)])
    basis = rng.normal(size=(off[-1], p))
    basis_new = rng.normal(size=(off_new[-1], p))
    resid = rng.normal(size=off[-1])
    lam = np.geomspace(1.0, 1e-3, p)
    return resid, basis, off, basis_new, off_new, lam


def _direct(resid, basis, off, basis_new, off_new, lam, sigma2):
    """Each subject and K alone: Phi_h Lambda Phi^T (Phi Lambda Phi^T + s2 I)^-1 r."""
    out = np.zeros((basis_new.shape[0], lam.size))
    for i in range(off.size - 1):
        b, r = basis[off[i] : off[i + 1]], resid[off[i] : off[i + 1]]
        h = basis_new[off_new[i] : off_new[i + 1]]
        for k in range(1, lam.size + 1):
            cov = (b[:, :k] * lam[:k]) @ b[:, :k].T + sigma2 * np.eye(len(r))
            weights = np.linalg.solve(cov, r)
            out[off_new[i] : off_new[i + 1], k - 1] = (
                h[:, :k] * lam[:k] @ b[:, :k].T @ weights
            )
    return out


@pytest.mark.parametrize("sigma2", [0.5, 1e-3])
def test_both_algorithms_give_the_direct_predictions(monkeypatch, sigma2):
    # visible counts 0-12 (some in observation space, some not), hidden 0-3
    counts = np.array([0, 1, 2, 3, 3, 4, 7, 12, 2, 5])
    counts_new = np.array([1, 2, 0, 1, 3, 1, 2, 1, 2, 0])
    problem = _problem(counts, counts_new, p=15)
    want = _direct(*problem, sigma2)
    # the Cholesky factor's jitter (1e-10 of its trace) costs some digits
    cholesky_tol = dict(rtol=1e-5, atol=1e-6)
    got = cumulative_predictions(*problem, sigma2)
    np.testing.assert_allclose(got, want, **cholesky_tol)
    few = np.repeat(counts * scores.OBSERVATION_SPACE_RATIO <= 15, counts_new)
    np.testing.assert_allclose(got[few], want[few], rtol=1e-9, atol=1e-9)
    # every subject through the p x p Cholesky factor
    monkeypatch.setattr(scores, "OBSERVATION_SPACE_RATIO", 10**6)
    np.testing.assert_allclose(
        cumulative_predictions(*problem, sigma2), want, **cholesky_tol
    )
    # every subject through the observation-space recursion
    monkeypatch.setattr(scores, "OBSERVATION_SPACE_RATIO", 0)
    np.testing.assert_allclose(
        cumulative_predictions(*problem, sigma2), want, rtol=1e-9, atol=1e-9
    )


def test_recursion_is_not_used_without_noise(monkeypatch):
    """With sigma2 ~ 0 the recursion (which starts from I / sigma2) stands aside."""
    used = []
    recursion = scores._predict_in_observation_space

    def spy(*args):
        used.append(args[1].shape)
        return recursion(*args)

    monkeypatch.setattr(scores, "_predict_in_observation_space", spy)
    problem = _problem(np.full(6, 3), np.full(6, 1), p=20)
    cumulative_predictions(*problem, 1e-12)
    assert not used
    cumulative_predictions(*problem, 0.1)
    assert used


def test_pooled_small_groups_predict_as_each_group_alone(monkeypatch):
    """Subjects of several counts pooled into one padded batch: same predictions."""
    counts = np.array([0, 1, 2, 3, 3, 4, 1, 2, 2, 0, 3])
    counts_new = np.array([1, 2, 0, 1, 3, 1, 2, 1, 2, 1, 1])
    problem = _problem(counts, counts_new, p=25, seed=1)
    pooled = cumulative_predictions(*problem, 0.3)
    monkeypatch.setattr(scores, "pool_small_groups", lambda chunks, size: chunks)
    np.testing.assert_allclose(
        pooled, cumulative_predictions(*problem, 0.3), rtol=1e-12, atol=1e-14
    )


def test_pool_small_groups_keeps_every_subject_once_and_large_groups_whole():
    offsets = np.concatenate([[0], np.cumsum([2, 1, 3, 2, 1] + [4] * 70)])
    chunks = list(group_by_count(offsets))
    pooled = list(pool_small_groups(chunks, size=3, small=64))
    # groups by count: 1 point (2 subjects), 2 (2), 3 (1), 4 (70); the 70
    # stay one group, the small ones are pooled up to three (size), padded
    assert sorted(r.size for r, _ in pooled) == [2, 3, 70]
    for rows, obs in pooled:
        for row, slots in zip(rows, obs):
            own = np.arange(offsets[row], offsets[row + 1])
            np.testing.assert_array_equal(slots[: own.size], own)
            assert np.all(slots[own.size :] == -1)
    assert sorted(np.concatenate([r for r, _ in pooled])) == list(range(75))


def _each_subject_alone(
    resid, table, index, off, table_new, index_new, off_new, lam, s2
):
    """The Cholesky path's numbers for one subject at a time, by SciPy's solves."""
    from scipy.linalg import solve_triangular

    p = lam.size
    out = np.zeros((off_new[-1], p))
    for i in range(off.size - 1):
        b = table[index[off[i] : off[i + 1]]]
        h = table_new[index_new[off_new[i] : off_new[i + 1]]]
        a = b.T @ b
        a[np.diag_indices(p)] += s2 / lam + 1e-10 * np.trace(a) / p
        chol = np.linalg.cholesky(a)
        y = solve_triangular(chol, b.T @ resid[off[i] : off[i + 1]], lower=True)
        z = solve_triangular(chol, h.T, lower=True)  # (p, hidden)
        out[off_new[i] : off_new[i + 1]] = np.cumsum(z * y[:, None], axis=0).T
    return out


def test_cholesky_path_in_slices_and_shares_is_each_subject_alone(monkeypatch):
    """Factored in slices, packed, cut into equal shares: every subject as alone.

    The p x p systems are formed and factored a few subjects at a time, L's
    lower triangle is packed with the subjects last, the subjects are cut
    into as many pieces as a multiple of the threads, and the basis comes
    as a table of rows with an index: a wrong slice, row or subject would
    move predictions by their own size, not by rounding.
    """
    rng = np.random.default_rng(3)
    p, n = 12, 61
    counts = rng.integers(3, 20, n)  # 5 m > p: all through the Cholesky path
    counts_new = rng.integers(0, 5, n)  # subjects of a count differ in hidden
    off = np.concatenate([[0], np.cumsum(counts)])
    off_new = np.concatenate([[0], np.cumsum(counts_new)])
    table = rng.normal(size=(40, p))
    index = rng.integers(0, 40, off[-1])
    index_new = rng.integers(0, 40, off_new[-1])
    resid = rng.normal(size=off[-1])
    lam = np.geomspace(1.0, 1e-3, p)
    s2 = 0.5
    by_index = dict(index_fit=index, index_new=index_new)
    whole = cumulative_predictions(
        resid, table, off, table, off_new, lam, s2, **by_index
    )
    # the rows themselves instead of a table: the same numbers
    rows = cumulative_predictions(
        resid, table[index], off, table[index_new], off_new, lam, s2
    )
    np.testing.assert_array_equal(rows, whole)
    # slices of 3, pieces of at most 7 cut for 3 threads: the same numbers
    monkeypatch.setattr(scores, "FACTOR_SUBJECTS", 3)
    monkeypatch.setattr(scores, "CHUNK_SUBJECTS", 7)
    monkeypatch.setattr(scores, "PARALLEL_MIN_OBSERVATIONS", 0)
    monkeypatch.setattr(scores, "n_workers", lambda: 3)
    cut = cumulative_predictions(resid, table, off, table, off_new, lam, s2, **by_index)
    np.testing.assert_array_equal(cut, whole)
    want = _each_subject_alone(
        resid, table, index, off, table, index_new, off_new, lam, s2
    )
    np.testing.assert_allclose(whole, want, rtol=1e-10, atol=1e-12)
