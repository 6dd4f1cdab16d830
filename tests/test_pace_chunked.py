"""PACE fitted from chunks of subjects: the same model as the whole fit."""

import copy
import warnings

import _configs
import numpy as np
import pandas as pd
import pytest

import fdaimpute as fi
from fdaimpute import IrregularData
from fdaimpute._core.ids import id_hashes
from fdaimpute._pace import chunked as chunked_fit
from fdaimpute.chunks import CSVChunks
from fdaimpute.noise import difference_estimate
from fdaimpute.pace import PACEImputer

TOL = 1e-10


@pytest.fixture(scope="module")
def data():
    sim = fi.simulate.sand_paper(n=300, n_obs="2-10", random_state=3)
    return sim.train.data


@pytest.fixture(scope="module")
def grid_data():
    """Subjects on a regular grid of 21 times: many tied lags and exact bins."""
    rng = np.random.default_rng(1)
    grid = np.linspace(0, 1, 21)
    times, values = [], []
    for _ in range(200):
        t = np.sort(rng.choice(grid, rng.integers(3, 9), replace=False))
        a, b = rng.normal(size=2)
        times.append(t)
        values.append(a + b * np.sin(3 * t) + 0.3 * rng.normal(size=t.size))
    return IrregularData.from_lists(times, values, ids=np.arange(200) * 7)


def _cuts(data, sizes):
    """Chunks of these sizes, and the rest."""
    edges = np.concatenate([[0], np.cumsum(sizes, dtype=int), [len(data)]])
    return [data[int(a) : int(b)] for a, b in zip(edges[:-1], edges[1:])]


CHUNKINGS = [(), (1,), (135,), (7, 93, 13)]


@pytest.mark.parametrize("sizes", CHUNKINGS)
def test_default_fit_from_chunks_equals_whole_fit(data, sizes):
    """Cross-validated bandwidths, K, noise floor and bands: all as the whole fit."""
    whole = PACEImputer(random_state=0).fit(data)
    chunked = PACEImputer(random_state=0).fit_chunks(_cuts(data, sizes))
    _configs.assert_same_pace_model(whole, chunked)
    np.testing.assert_allclose(
        whole.cv_results_["scores"], chunked.cv_results_["scores"], atol=TOL
    )
    assert whole.cv_results_["n_hidden"] == chunked.cv_results_["n_hidden"]
    curves_w, std_w = whole.transform(data[:40], return_std=True)
    curves_c, std_c = chunked.transform(data[:40], return_std=True)
    np.testing.assert_allclose(curves_w, curves_c, rtol=0, atol=TOL)
    np.testing.assert_allclose(std_w, std_c, rtol=0, atol=TOL)


@pytest.mark.parametrize("sizes", [(), (2,), (100, 11)])
def test_fdapace_fit_from_chunks_equals_whole_fit(data, sizes):
    whole = PACEImputer.fdapace().fit(data)
    chunked = PACEImputer.fdapace().fit_chunks(_cuts(data, sizes))
    _configs.assert_same_pace_model(whole, chunked)
    np.testing.assert_allclose(
        whole.transform(data), chunked.transform(data), rtol=0, atol=TOL
    )


def test_exact_bins_and_tied_lags_match(grid_data):
    """Regular times: exact bins, and the noise estimate's ties at the cut."""
    est = PACEImputer(random_state=2, n_work_grid=21)
    whole = copy.deepcopy(est).fit(grid_data)
    chunked = copy.deepcopy(est).fit_chunks(_cuts(grid_data, (3, 120)))
    assert whole.n_bins_ == 21
    _configs.assert_same_pace_model(whole, chunked)


def test_checked_chunked_fit_gives_way_to_the_next_bandwidths_as_fit_does():
    # 90 of pbcseq's patients: the covariance bandwidths with the least
    # held-out error give a patient an implausible curve, and fit passes
    # over them (test_stability); the chunked fit makes the same check chunk
    # by chunk and keeps the same model
    small = _configs.subsample(_configs.pbcseq(), 90)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = PACEImputer(random_state=0).fit(small)
        parts = _cuts(small, (30, 31))
        chunked = PACEImputer(random_state=0).fit_chunks(parts, check_curves=True)
        unchecked = PACEImputer(random_state=0).fit_chunks(parts)
    passed = whole.cv_results_["implausible_bandwidths"]
    assert passed and chunked.cv_results_["implausible_bandwidths"] == passed
    _configs.assert_same_pace_model(chunked, whole)
    # without the check: the bandwidths with the least held-out error
    assert tuple(unchecked.bandwidth_cov_) == passed[0]
    # transform judges curves against the training values' range
    assert chunked.value_range_ == unchecked.value_range_ == whole.value_range_


def test_order_of_chunks_does_not_matter_without_cv(data):
    """Fixed choices: every sum is order-free, so any chunk order gives the fit."""
    est = PACEImputer(bandwidth_cov=(0.3, 0.08), n_components=4, random_state=0)
    parts = _cuts(data, (40, 200))
    forward = copy.deepcopy(est).fit_chunks(parts)
    backward = copy.deepcopy(est).fit_chunks(parts[::-1])
    _configs.assert_same_pace_model(forward, backward)
    _configs.assert_same_pace_model(forward, copy.deepcopy(est).fit(data))


def test_cv_draws_follow_the_order_read(data):
    """With CV the held-out points are drawn by position, as fit draws them."""
    parts = _cuts(data, (100, 50))
    order = [2, 0, 1]
    chunked = PACEImputer(random_state=5).fit_chunks([parts[i] for i in order])
    whole = PACEImputer(random_state=5).fit(
        IrregularData.concat([parts[i] for i in order])
    )
    _configs.assert_same_pace_model(whole, chunked)


def test_callable_source_is_read_again(data):
    parts = _cuts(data, (120,))
    calls = []

    def read():
        calls.append(1)
        return iter(parts)

    fitted = PACEImputer(random_state=0).fit_chunks(read)
    assert len(calls) == 3  # survey, mean sums, covariance sums
    PACEImputer(random_state=0).fit_chunks(read, check_curves=True)
    assert len(calls) == 3 + 4  # and the check of every curve
    _configs.assert_same_pace_model(fitted, PACEImputer(random_state=0).fit(data))


def test_subject_in_two_chunks_is_named(data):
    first, second = data[:10], data[10:20]
    ids = second.ids.copy()
    ids[3] = first.ids[5]
    clash = IrregularData(second.times, second.values, second.offsets, ids=ids)
    with pytest.raises(
        ValueError, match=rf"subject {first.ids[5]} \(chunks 0 and 1\).*more than one"
    ):
        PACEImputer().fit_chunks([first, clash, data[20:]])


def test_survey_keeps_id_hashes_not_ids(data):
    found = chunked_fit.survey_chunk(data[:10])
    assert found.id_hashes.dtype == np.uint64 and found.id_hashes.shape == (10,)
    assert not hasattr(found, "ids")
    # an id hashes alike in an int array and among strings
    mixed = id_hashes(np.array([7, "a"], dtype=object))
    assert mixed[0] == id_hashes(np.array([7, 8]))[0] != mixed[1]


def test_shared_id_hashes_are_told_from_repeated_subjects(data, monkeypatch):
    # every id hashing alike: the chunks are read again, the ids compared,
    # and the fit is the whole fit; a subject truly in two chunks is named
    monkeypatch.setattr(
        chunked_fit, "id_hashes", lambda ids: np.zeros(len(ids), dtype=np.uint64)
    )
    whole = PACEImputer(random_state=0, n_components=3).fit(data)
    parts = _cuts(data, (7, 93, 13))
    chunked = PACEImputer(random_state=0, n_components=3).fit_chunks(parts)
    _configs.assert_same_pace_model(whole, chunked)
    ids = parts[2].ids.copy()
    ids[0] = parts[0].ids[4]
    parts[2] = IrregularData(parts[2].times, parts[2].values, parts[2].offsets, ids=ids)
    with pytest.raises(ValueError, match=r"chunks 0 and 2"):
        PACEImputer(random_state=0).fit_chunks(parts)


def test_bad_sources_are_refused(data):
    est = PACEImputer()
    with pytest.raises(ValueError, match="no data"):
        est.fit_chunks([])
    with pytest.raises(ValueError, match="no data"):
        est.fit_chunks([data[:0], data[:0]])
    with pytest.raises(TypeError, match="iterator"):
        est.fit_chunks(iter([data]))
    with pytest.raises(TypeError, match="not one data set"):
        est.fit_chunks(data)
    with pytest.raises(TypeError, match="chunk 1"):
        est.fit_chunks([data[:10], 3.5])
    with pytest.raises(ValueError, match="single observation"):
        est.fit_chunks([_singles(data)[:100], _singles(data)[100:]])


def _singles(data):
    """One observation of each subject."""
    first = data.offsets[:-1]
    return IrregularData(
        data.times[first], data.values[first], np.arange(len(data) + 1), ids=data.ids
    )


@pytest.mark.parametrize(
    "params",
    [
        {"bandwidth_mean": "cv"},
        {"bandwidth_cov": "gcv"},
        {"n_components": "bic"},
    ],
)
def test_rules_needing_all_points_are_refused(data, params):
    est = PACEImputer(**params)
    with pytest.raises(ValueError, match="not available with fit_chunks"):
        est.fit_chunks([data])
    assert not hasattr(est, "grid_")


def test_failed_chunked_fit_leaves_estimator_unfitted(data):
    est = PACEImputer(random_state=0).fit(data)
    with pytest.raises(ValueError, match="more than one chunk"):
        est.fit_chunks([data, data])
    assert not hasattr(est, "eigenvalues_")


def test_difference_estimate_ignores_the_order_of_tied_pairs(grid_data):
    """Ties at the cut are all kept, so reordering subjects changes nothing."""
    order = np.random.default_rng(0).permutation(len(grid_data))
    shuffled = grid_data[order]
    a = difference_estimate(grid_data.times, grid_data.values, grid_data.subject_index)
    b = difference_estimate(shuffled.times, shuffled.values, shuffled.subject_index)
    assert a == pytest.approx(b, rel=1e-12)
    assert 0.05 < a < 0.2  # the truth is 0.3^2 = 0.09


def _write(data, path, shuffle_within=False):
    frame = data.to_long()
    if shuffle_within:
        frame = frame.sample(frac=1.0, random_state=0)
    frame.sort_values("id", kind="stable").to_csv(path, index=False)


def test_csv_chunks_keep_subjects_whole(data, tmp_path):
    path = tmp_path / "obs.csv"
    _write(data, path, shuffle_within=True)
    chunks = list(CSVChunks(path, chunksize=97))
    assert len(chunks) > 5
    assert all(c.times.size < 97 + 10 for c in chunks)
    joined = IrregularData.concat(chunks)
    order = np.argsort(data.ids)
    # the file's ids are numbers sorted as numbers, read back as their text
    expected = data[order]
    expected = IrregularData(
        expected.times, expected.values, expected.offsets, ids=expected.ids.astype(str)
    )
    assert joined == expected
    whole = PACEImputer(random_state=0).fit(data[order])
    chunked = PACEImputer(random_state=0).fit_chunks(CSVChunks(path, chunksize=250))
    _configs.assert_same_pace_model(whole, chunked)


def _ids_csv(path, ids):
    times = np.arange(len(ids)) / len(ids)
    frame = pd.DataFrame({"id": ids, "time": times, "value": 1.0})
    path.write_text(frame.to_csv(index=False))


def test_csv_chunks_keep_ids_as_text(tmp_path):
    path = tmp_path / "obs.csv"
    _ids_csv(path, ["007", "007", "7", "7", "8"])
    chunks = list(CSVChunks(path, chunksize=2))
    assert [c.ids.tolist() for c in chunks] == [["007"], ["7"], ["8"]]


@pytest.mark.parametrize(
    "ids",
    [
        ["1", "2", "9", "10", "11"],  # as numbers (DataFrame.sort_values)
        ["1", "10", "11", "2", "9"],  # as text (sort -k1,1)
        ["a", "b", "c", "c", "d"],
    ],
)
def test_csv_chunks_accept_ids_sorted_as_text_or_numbers(tmp_path, ids):
    path = tmp_path / "obs.csv"
    _ids_csv(path, ids)
    got = [i for c in CSVChunks(path, chunksize=2) for i in c.ids.tolist()]
    assert got == list(dict.fromkeys(ids))


def test_csv_chunks_refuse_an_order_that_changes_between_blocks(tmp_path):
    path = tmp_path / "obs.csv"
    # text order up to "2", then number order: "10" would come back
    _ids_csv(path, ["1", "10", "2", "3", "10"])
    with pytest.raises(ValueError, match="not sorted by subject id"):
        list(CSVChunks(path, chunksize=2))


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
@pytest.mark.parametrize("ids", [["a", "a", "b", "a", "c"], [3, 3, 5, 3, 7]])
def test_chunks_refuse_a_subject_that_comes_back_within_a_block(tmp_path, suffix, ids):
    from fdaimpute.chunks import ParquetChunks

    frame = pd.DataFrame({"id": ids, "time": np.arange(5.0), "value": 1.0})
    path = tmp_path / f"obs.{suffix}"
    if suffix == "csv":
        frame.to_csv(path, index=False)
        chunks = CSVChunks(path)
    else:
        pytest.importorskip("pyarrow")
        frame.to_parquet(path, index=False)
        chunks = ParquetChunks(path)
    # whole runs of one subject are checked, not rows: a and b are sorted,
    # and a's second run comes after b
    come_back = f"subject {str(ids[3])!r} comes after {str(ids[2])!r}"
    with pytest.raises(ValueError, match=come_back):
        list(chunks)


def test_csv_chunks_refuse_unsorted_rows(data, tmp_path):
    path = tmp_path / "obs.csv"
    frame = data[:20].to_long()
    frame.iloc[::-1].to_csv(path, index=False)
    with pytest.raises(ValueError, match="not sorted by subject id"):
        list(CSVChunks(path, chunksize=1000))
    with pytest.raises(ValueError, match="chunksize"):
        CSVChunks(path, chunksize=0)
