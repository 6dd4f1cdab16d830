"""PACE fitted on a Dask cluster and imputation as a Dask job: the in-memory answers."""

import warnings

import _configs
import numpy as np
import pandas as pd
import pytest

import fdaimpute as fi
from fdaimpute import IrregularData
from fdaimpute.face import FACEImputer
from fdaimpute.kernel import KernelImputer
from fdaimpute.pace import PACEImputer

dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
cluster = pytest.importorskip("fdaimpute.cluster")

COLUMNS = ("who", "age", "bmi")


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as local,
        distributed.Client(local) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def data():
    sim = fi.simulate.sand_paper(n=300, n_obs="2-10", random_state=3)
    return sim.train.data


@pytest.fixture(scope="module")
def frame(data):
    """The long table, ids as numbers in a shuffled (not sorted) order."""
    table = data.to_long(*COLUMNS)
    labels = np.random.default_rng(0).permutation(len(data))
    table["who"] = np.repeat(labels, data.n_obs)
    return table


@pytest.fixture(scope="module")
def whole_in_id_order(frame):
    """PACE fitted once, in memory, on the table sorted by id.

    The fits of the scattered frame and of the sorted files must equal it.
    """
    in_id_order = frame.sort_values("who", kind="stable")
    return PACEImputer(random_state=0).fit(
        IrregularData.from_long(in_id_order, *COLUMNS)
    )


def _cut(frame, edges):
    """A Dask frame with partitions ending at these rows (any, even mid-subject)."""
    edges = [0, *edges, len(frame)]
    parts = [frame.iloc[a:b] for a, b in zip(edges[:-1], edges[1:])]
    return dd.concat([dd.from_pandas(p, npartitions=1) for p in parts])


def test_checked_fit_dask_gives_way_to_the_next_bandwidths_as_fit_does(client):
    # as test_pace_chunked: 90 of pbcseq's patients, where fit passes over
    # the best covariance bandwidths for a patient's implausible curve; the
    # check runs partition by partition
    columns = ("patient", "years", "log_bili")
    table = _configs.subsample(_configs.pbcseq(), 90).to_long(*columns)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = PACEImputer(random_state=0).fit(
            IrregularData.from_long(table, *columns)
        )
        fitted = PACEImputer(random_state=0).fit_dask(
            _cut(table, [5, 200, 201, 330]), *columns, check_curves=True
        )
    passed = whole.cv_results_["implausible_bandwidths"]
    assert passed and fitted.cv_results_["implausible_bandwidths"] == passed
    _configs.assert_same_pace_model(fitted, whole)
    assert fitted.value_range_ == whole.value_range_


def test_fit_dask_cut_through_subjects_equals_fit(client, data, frame):
    whole = PACEImputer(random_state=0).fit(IrregularData.from_long(frame, *COLUMNS))
    # one-row partitions, an empty one, one inside a single subject, cuts
    # through subjects at both ends of a partition
    row = np.cumsum(data.n_obs)
    edges = [1, 2, 2, row[3] + 1, row[3] + 2, row[40] - 1, 700, row[200]]
    df = _cut(frame, edges)
    with pytest.warns(UserWarning, match="cut through a subject") as record:
        fitted = PACEImputer(random_state=0).fit_dask(df, *COLUMNS)
    assert record[0].filename == __file__
    _configs.assert_same_pace_model(fitted, whole)
    assert fitted.n_subjects_fit_ == len(data)


@pytest.mark.parametrize("persist", [False, True])
def test_fit_dask_whole_subject_partitions_do_not_warn(client, frame, persist):
    whole = PACEImputer(random_state=0, n_components=3).fit(
        IrregularData.from_long(frame, *COLUMNS)
    )
    ids = frame["who"].to_numpy()
    cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    df = _cut(frame, cuts[[50, 120, 200]].tolist())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fitted = PACEImputer(random_state=0, n_components=3).fit_dask(
            df, *COLUMNS, persist=persist
        )
    _configs.assert_same_pace_model(fitted, whole)


def test_fit_dask_sorts_scattered_subjects_by_id(client, frame, whole_in_id_order):
    scattered = frame.sample(frac=1.0, random_state=1)
    df = dd.from_pandas(scattered, npartitions=3, sort=False)
    with pytest.warns(UserWarning, match="sorting the frame by 'who'"):
        fitted = PACEImputer(random_state=0).fit_dask(df, *COLUMNS)
    _configs.assert_same_pace_model(fitted, whole_in_id_order)


def test_fit_dask_gathers_per_subject_results_in_batches_without_ids(
    client, data, frame, monkeypatch
):
    # per-subject results (id hashes, counts) come back two partitions at a
    # time, and the survey carries no ids: the fit is still the in-memory one
    monkeypatch.setattr(cluster, "GATHER_BATCH", 2)
    gathered, surveys = [], []
    compute = cluster._gathered

    def counted(dask, tasks):
        gathered.append(len(tasks))
        return compute(dask, tasks)

    finish = cluster._chunked.finish_survey

    def seen(found):
        surveys.append(found)
        return finish(found)

    monkeypatch.setattr(cluster, "_gathered", counted)
    monkeypatch.setattr(cluster._chunked, "finish_survey", seen)
    whole = PACEImputer(random_state=0).fit(IrregularData.from_long(frame, *COLUMNS))
    row = np.cumsum(data.n_obs)
    df = _cut(frame, [row[3] + 1, row[40], 700, row[150] - 1, row[200]])
    with pytest.warns(UserWarning, match="cut through a subject"):
        fitted = PACEImputer(random_state=0).fit_dask(df, *COLUMNS)
    _configs.assert_same_pace_model(fitted, whole)
    assert gathered == [6]  # one scan gives both the plan and the survey
    assert surveys[0].id_hashes is None and surveys[0].n_subjects == len(data)


def test_fit_dask_moves_count_where_the_subject_stands(client, data, frame):
    # partition 0 ends with a subject that also opened it (rows [a, b, a]),
    # and its rows go on in partition 1: the moved count is added to that
    # subject, the first of partition 0, not to the last subject
    a, b = frame["who"].unique()[:2]
    rows = frame[frame["who"] == a]
    head = frame[frame["who"] == b]
    rest = frame[~frame["who"].isin([a, b])]
    table = pd.concat([rows.iloc[:2], head, rows.iloc[2:4], rows.iloc[4:], rest])
    table = table.reset_index(drop=True)
    assert len(rows) > 4
    whole = PACEImputer(random_state=0).fit(IrregularData.from_long(table, *COLUMNS))
    df = _cut(table, [2 + len(head) + 2, 2 + len(head) + 3, 900])
    with pytest.warns(UserWarning, match="cut through a subject"):
        fitted = PACEImputer(random_state=0).fit_dask(df, *COLUMNS)
    _configs.assert_same_pace_model(fitted, whole)


def test_fit_dask_averages_duplicates_across_a_cut(client, data, frame):
    # a subject's duplicated time lies on both sides of a partition edge:
    # averaged once joined, as in memory (the counts are then not the sums
    # of the two sides')
    ids = frame["who"].to_numpy()
    starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])
    first = frame.iloc[starts[5] : starts[6]]
    assert len(first) >= 2
    twin = first.iloc[[0]].assign(bmi=first["bmi"].iloc[0] + 1.0)
    table = pd.concat([frame.iloc[: starts[6]], twin, frame.iloc[starts[6] :]])
    table = table.reset_index(drop=True)
    whole = PACEImputer(random_state=0).fit(
        IrregularData.from_long(table, *COLUMNS, duplicates="average")
    )
    assert whole.n_subjects_fit_ == len(data)
    df = _cut(table, [starts[6], 1000])
    with pytest.warns(UserWarning, match="cut through a subject"):
        fitted = PACEImputer(random_state=0).fit_dask(
            df, *COLUMNS, duplicates="average"
        )
    _configs.assert_same_pace_model(fitted, whole)
    # by default the joined subject's repeated time is refused, as in memory
    with (
        pytest.warns(UserWarning, match="cut through a subject"),
        pytest.raises(ValueError, match="two observations at time"),
    ):
        PACEImputer(random_state=0).fit_dask(df, *COLUMNS)


def test_partition_summaries_carry_hashes_not_ids():
    part = pd.DataFrame({"who": ["b", "b", "a", "c", "c"]})
    hashes, first, head_whole, last = cluster._scan_ids(part, "who")[0]
    assert (first, head_whole, last) == ("b", True, "c")
    assert hashes.dtype == np.uint64 and hashes.shape == (3,)
    assert np.unique(hashes).size == 3
    # the same id hashes alike in another partition
    again = cluster._scan_ids(pd.DataFrame({"who": ["c", "d"]}), "who")[0][0]
    assert again[0] == hashes[2]


def test_a_hash_collision_costs_a_sort_not_a_wrong_fit(
    client, frame, whole_in_id_order, monkeypatch
):
    # every id hashing alike: whole-subject partitions look spread, so the
    # frame is sorted by id, and the fit is still the in-memory one
    monkeypatch.setattr(
        cluster, "_id_hashes", lambda ids: np.zeros(len(ids), dtype=np.uint64)
    )
    ids = frame["who"].to_numpy()
    cuts = np.flatnonzero(ids[1:] != ids[:-1]) + 1
    df = _cut(frame, cuts[[50, 120, 200]].tolist())
    with pytest.warns(UserWarning, match="sorting the frame by 'who'"):
        fitted = PACEImputer(random_state=0).fit_dask(df, *COLUMNS)
    _configs.assert_same_pace_model(fitted, whole_in_id_order)


def test_fit_dask_refuses_what_fit_chunks_refuses(client, frame):
    df = dd.from_pandas(frame, npartitions=2, sort=False)
    with pytest.raises(ValueError, match="'when' .the time column. is not in"):
        PACEImputer().fit_dask(df, "who", "when", "bmi")
    with pytest.raises(ValueError, match="not available with fit_chunks"):
        PACEImputer(bandwidth_mean="cv").fit_dask(df, *COLUMNS)
    bad = frame.copy()
    bad.loc[bad.index[5], "who"] = None
    with pytest.raises(ValueError, match="missing subject ids"):
        PACEImputer().fit_dask(dd.from_pandas(bad, npartitions=2), *COLUMNS)


@pytest.fixture(scope="module")
def fitted(data):
    train = data[:200]
    return {
        "pace": PACEImputer(random_state=0).fit(train),
        "face": FACEImputer().fit(train),
        "kernel": KernelImputer().fit(train),
        "vt": fi.VTImputer(**_configs.TINY, device="cpu").fit(train),
    }


@pytest.mark.parametrize("method", ["pace", "face", "kernel", "vt"])
def test_transform_job_equals_transform(client, data, frame, fitted, method):
    est = fitted[method]
    df = _cut(frame, [5, 333, 334, 1200])
    whole = IrregularData.from_long(frame, *COLUMNS)
    with pytest.warns(UserWarning, match="cut through a subject"):
        job = cluster.transform(est, df, *COLUMNS)
    out = job.compute()
    assert out["who"].tolist() == whole.ids.tolist()
    assert list(out.columns[1:]) == [f"t={t:.10g}" for t in est.grid_]
    # the network computes in float32, and other batches sum in another order
    tol = 1e-5 if method == "vt" else 1e-12
    np.testing.assert_allclose(
        out.iloc[:, 1:].to_numpy(), est.transform(whole), rtol=0, atol=tol
    )


@pytest.mark.filterwarnings("ignore:.*cut through a subject:UserWarning")
def test_transform_job_long_with_std_and_predict_at(client, frame, fitted):
    est = fitted["pace"]
    df = _cut(frame, [400, 900])
    whole = IrregularData.from_long(frame, *COLUMNS)
    grid = np.linspace(*est.time_range_, 7)
    out = cluster.transform(
        est, df, *COLUMNS, grid=grid, return_std=True, layout="long"
    ).compute()
    curves, std = est.transform(whole, grid=grid, return_std=True)
    assert list(out.columns) == ["who", "age", "bmi", "std"]
    assert out["who"].tolist() == np.repeat(whole.ids, 7).tolist()
    np.testing.assert_allclose(out["age"], np.tile(grid, len(whole)))
    np.testing.assert_allclose(out["bmi"], curves.ravel(), atol=1e-12)
    np.testing.assert_allclose(out["std"], std.ravel(), atol=1e-12)

    own = cluster.predict_at(est, df, *COLUMNS).compute()
    expected = est.predict_at(whole)
    np.testing.assert_allclose(own["age"], expected.times)
    np.testing.assert_allclose(own["bmi"], expected.values, atol=1e-12)
    common = cluster.predict_at(est, df, *COLUMNS, times=[0.25, 0.5]).compute()
    np.testing.assert_allclose(
        common.iloc[:, 1:].to_numpy(),
        est.predict_at(whole, [0.25, 0.5]),
        atol=1e-12,
    )
    with pytest.raises(ValueError, match="layout"):
        cluster.transform(est, df, *COLUMNS, layout="tall")


def _fit_command(path, model, *extra):
    from fdaimpute.cli import main

    columns = ["--id", "who", "--time", "age", "--value", "bmi"]
    return main(
        ["fit", str(path), "--method", "pace", "--save", str(model), *columns, *extra]
    )


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_cli_fit_on_a_scheduler_saves_the_whole_fit(
    client, frame, whole_in_id_order, tmp_path, suffix
):
    from fdaimpute.persistence import load

    pytest.importorskip("pyarrow")
    path = tmp_path / f"obs.{suffix}"
    sorted_frame = frame.sort_values("who", kind="stable")
    if suffix == "csv":
        sorted_frame.to_csv(path, index=False)
    else:
        sorted_frame.to_parquet(path, index=False, row_group_size=500)
    address = client.scheduler.address
    assert _fit_command(path, tmp_path / "m.fdai", "--scheduler", address) == 0
    fitted = load(tmp_path / "m.fdai")
    # the file's ids are read as text; the model does not depend on them
    _configs.assert_same_pace_model(fitted, whole_in_id_order)
    np.testing.assert_allclose(fitted.grid_, whole_in_id_order.grid_)


def test_cli_fit_on_a_scheduler_checks_curves_when_asked(client, tmp_path):
    # pbcseq-90, where fit passes over the best covariance bandwidths for a
    # patient's implausible curve (test_checked_fit_dask_...)
    from fdaimpute.cli import main
    from fdaimpute.persistence import load

    pytest.importorskip("pyarrow")
    columns = ("patient", "years", "log_bili")
    table = _configs.subsample(_configs.pbcseq(), 90).to_long(*columns)
    table["patient"] = table["patient"].astype(str)
    path = tmp_path / "pbc.parquet"
    table.to_parquet(path, index=False, row_group_size=100)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        whole = PACEImputer(random_state=0).fit(
            IrregularData.from_long(table, *columns)
        )
    names = ["--id", "patient", "--time", "years", "--value", "log_bili"]
    command = ["fit", str(path), "--method", "pace", *names]
    command += ["--scheduler", client.scheduler.address]
    assert main([*command, "--save", str(tmp_path / "a.fdai"), "--check-curves"]) == 0
    assert main([*command, "--save", str(tmp_path / "b.fdai")]) == 0
    _configs.assert_same_pace_model(load(tmp_path / "a.fdai"), whole)
    passed = whole.cv_results_["implausible_bandwidths"]
    assert tuple(load(tmp_path / "b.fdai").bandwidth_cov_) == passed[0]


def test_cli_fit_on_workers_and_its_refusals(frame, tmp_path):
    from fdaimpute.persistence import load

    pytest.importorskip("pyarrow")
    path = tmp_path / "obs.parquet"
    frame.to_parquet(path, index=False)
    model = tmp_path / "m.fdai"
    assert _fit_command(path, model, "--workers", "2", "--grid", "0:1:11") == 0
    whole = PACEImputer(random_state=0, grid=np.linspace(0, 1, 11)).fit(
        IrregularData.read_parquet(path, *COLUMNS)
    )
    _configs.assert_same_pace_model(load(model), whole)
    with pytest.raises(SystemExit, match="pace only"):
        _fit_command(path, tmp_path / "k.fdai", "--workers", "1", "--method", "kernel")
    with pytest.raises(SystemExit, match="not both"):
        _fit_command(path, tmp_path / "k.fdai", "--workers", "1", "--scheduler", "x")


def test_cli_reads_parquet_row_groups_as_partitions(frame, tmp_path, monkeypatch):
    # Dask's default reads a file this small as one partition, which only one
    # worker would fit; the command line joins row groups up to a size
    from fdaimpute._cli import cluster as cli_cluster

    pytest.importorskip("pyarrow")
    path = tmp_path / "obs.parquet"
    frame.to_parquet(path, index=False, row_group_size=400)
    n_groups = -(-len(frame) // 400)
    assert n_groups > 2
    assert dd.read_parquet(path).npartitions == 1
    got = cli_cluster.read_frame(str(path), COLUMNS)
    assert got.npartitions == 1  # the whole file is under 8 MiB
    monkeypatch.setattr(cli_cluster, "PARQUET_PARTITION", "1B")
    got = cli_cluster.read_frame(str(path), COLUMNS)
    assert got.npartitions == n_groups
    assert len(got) == len(frame)
    assert got["who"].dtype.kind not in "iub"  # ids as text


def test_cli_reads_a_csv_as_the_other_readers_do(tmp_path):
    from fdaimpute._cli import cluster as cli_cluster

    path = tmp_path / "obs.csv"
    path.write_text("who,age,bmi\nNA,0.1,0.2\nNA,0.5,NA\nnull,0.1,0.2\nnull,0.5,1.0\n")
    got = cli_cluster.read_frame(str(path), COLUMNS).compute()
    assert got["who"].tolist() == ["NA", "NA", "null", "null"]  # ids, not missing
    assert got["bmi"].isna().tolist() == [False, True, False, False]
    path.write_text("who,age,bmi\nA,0.1,0.2,1\nA,0.5,0.3,1\n")
    with pytest.raises(ValueError, match="line 2 of .* has 4 fields"):
        cli_cluster.read_frame(str(path), COLUMNS)


def _allocator_settings():
    import os

    return {name: os.environ.get(name) for name in cluster.WORKER_MALLOC}


def test_local_cluster_workers_start_with_its_allocator_settings(monkeypatch):
    for name in cluster.WORKER_MALLOC:
        # the nanny sets them in this process too: put back what was here
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    expected = {name: str(value) for name, value in cluster.WORKER_MALLOC.items()}
    with (
        cluster.local_cluster(1, dashboard_address=":0") as local,
        distributed.Client(local) as client,
    ):
        (settings,) = client.run(_allocator_settings).values()
    assert settings == expected
    # Dask's own default, which made PACE's passes 1.5x slower, is replaced
    assert settings["MALLOC_TRIM_THRESHOLD_"] != "65536"
    with pytest.raises(ValueError, match="processes=False"):
        cluster.local_cluster(1, processes=False)
