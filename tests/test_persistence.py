"""The model file format: save/load of every imputer and its failure modes."""

import json
import os
import pickle

import numpy as np
import pytest
from _configs import CNP_TINY, SAND_TINY, TINY
from numpy.testing import assert_array_equal
from sklearn.exceptions import NotFittedError

import fdaimpute as fi
from fdaimpute import persistence
from fdaimpute.persistence import FORMAT_VERSION, MAGIC, read_header

try:
    import torch
except ImportError:  # the neural imputers need torch
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="needs torch")
FACTORIES = {
    "Kernel": lambda: fi.KernelImputer(),
    "PACE": lambda: fi.PACEImputer(random_state=0),
    "MICE": lambda: fi.MICEImputer(n_bins=21, max_iter=2, random_state=0),
    "VT": lambda: fi.VTImputer(**TINY),
    "SAND": lambda: fi.SANDImputer(**SAND_TINY),
    "CNP": lambda: fi.CNPImputer(**CNP_TINY),
}
NEURAL = ("VT", "SAND", "CNP")
NAMES = [
    pytest.param(name, marks=needs_torch) if name in NEURAL else name
    for name in FACTORIES
]


@pytest.fixture(scope="module")
def fitted(sim):
    cache = {}

    def get(name):
        if name not in cache:
            cache[name] = FACTORIES[name]().fit(sim.train.data)
        return cache[name]

    return get


@pytest.fixture(scope="module")
def kernel_file(fitted, tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "kernel.fdaimpute"
    fitted("Kernel").save(path)
    return path


def _outputs(est, data):
    """Everything the estimator computes for ``data`` that it supports."""
    out = {
        "transform": est.transform(data),
        "derivative": est.derivative(data),
        "predict_at": est.predict_at(data).values,
    }
    if isinstance(est, fi.PACEImputer):
        out["std"] = est.transform(data, return_std=True)[1]
        out["scores"] = est.scores(data)
    if isinstance(est, fi.CNPImputer):
        out["std"] = est.transform(data, return_std=True)[1]
        out["encode"] = est.encode(data)
    if getattr(est, "error_head_", None) is not None:
        out["std"] = est.transform(data, return_std=True)[1]
    return out


def _assert_same_model(a, b, data):
    assert type(a) is type(b)
    assert a.get_params() == b.get_params()
    assert_array_equal(a.grid_, b.grid_)
    expected, got = _outputs(a, data), _outputs(b, data)
    assert expected.keys() == got.keys()
    for key in expected:
        assert_array_equal(got[key], expected[key], err_msg=key)


@pytest.mark.parametrize("name", NAMES)
def test_save_load_gives_bit_identical_outputs(fitted, sim, tmp_path, name):
    est = fitted(name)
    path = tmp_path / "model.fdaimpute"
    est.save(path)
    loaded = type(est).load(path)
    _assert_same_model(est, loaded, sim.test.data)
    # the base class loads any imputer
    _assert_same_model(est, fi.BaseImputer.load(path), sim.test.data)
    header = read_header(path)
    assert header["class"] == f"{type(est).__module__}.{type(est).__name__}"
    assert header["format_version"] == FORMAT_VERSION
    assert header["fitted"] is True
    assert header["fdaimpute"] == fi.__version__
    if name in NEURAL:
        assert header["torch"] == str(torch.__version__)


@pytest.mark.parametrize("name", NAMES)
def test_pickle_round_trip_is_bit_identical(fitted, sim, name):
    est = fitted(name)
    _assert_same_model(est, pickle.loads(pickle.dumps(est)), sim.test.data)


@pytest.mark.parametrize("name", NAMES)
def test_unfitted_estimator_saves_and_loads_unfitted(tmp_path, name):
    est = FACTORIES[name]()
    path = tmp_path / "unfitted.fdaimpute"
    est.save(path)
    assert read_header(path)["fitted"] is False
    loaded = type(est).load(path)
    assert type(loaded) is type(est)
    assert loaded.get_params() == est.get_params()
    with pytest.raises(NotFittedError):
        loaded.transform([(np.array([0.1, 0.5]), np.array([1.0, 2.0]))])


def test_load_refuses_another_class_before_unpickling(kernel_file, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("unpickled a file of the wrong class")

    monkeypatch.setattr(persistence.pickle, "loads", forbidden)
    with pytest.raises(TypeError, match="holds a KernelImputer, not a PACEImputer"):
        fi.PACEImputer.load(kernel_file)


def test_load_refuses_another_class_after_unpickling(kernel_file, tmp_path):
    # A header naming an unknown class cannot be checked up front: the class
    # of the unpickled object still is.
    blob = kernel_file.read_bytes()
    head_end = blob.index(b"\n", len(MAGIC))
    header = json.loads(blob[len(MAGIC) : head_end])
    header["class"] = "somewhere.Else"
    path = tmp_path / "renamed.fdaimpute"
    path.write_bytes(MAGIC + json.dumps(header).encode() + b"\n" + blob[head_end + 1 :])
    with pytest.raises(TypeError, match="not a MICEImputer"):
        fi.MICEImputer.load(path)
    assert isinstance(fi.KernelImputer.load(path), fi.KernelImputer)


def test_wrong_magic_is_not_a_model(fitted, tmp_path):
    # e.g. a bare pickle, as the neural imputers wrote before this format
    path = tmp_path / "bare.pkl"
    path.write_bytes(pickle.dumps(fitted("Kernel")))
    with pytest.raises(ValueError, match="is not an fdaimpute model file") as info:
        fi.KernelImputer.load(path)
    assert str(path) in str(info.value)
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    with pytest.raises(ValueError, match="not an fdaimpute model file"):
        fi.BaseImputer.load(text)


def _with_header(blob, **changes):
    head_end = blob.index(b"\n", len(MAGIC))
    header = json.loads(blob[len(MAGIC) : head_end])
    header.update(changes)
    return MAGIC + json.dumps(header).encode() + b"\n" + blob[head_end + 1 :]


def test_other_format_version_is_refused(kernel_file, tmp_path):
    path = tmp_path / "future.fdaimpute"
    path.write_bytes(_with_header(kernel_file.read_bytes(), format_version=2))
    msg = f"format version 2 .* reads version {FORMAT_VERSION} only"
    with pytest.raises(ValueError, match=msg):
        fi.KernelImputer.load(path)


def test_other_fdaimpute_version_warns(kernel_file, tmp_path, sim, fitted):
    path = tmp_path / "old.fdaimpute"
    path.write_bytes(_with_header(kernel_file.read_bytes(), fdaimpute="0.0.1"))
    with pytest.warns(UserWarning, match="written by fdaimpute 0.0.1"):
        loaded = fi.KernelImputer.load(path)
    _assert_same_model(fitted("Kernel"), loaded, sim.test.data)


@pytest.mark.parametrize("where", ["magic", "header", "payload", "last byte"])
def test_truncated_file_is_reported(kernel_file, tmp_path, where):
    blob = kernel_file.read_bytes()
    head_end = blob.index(b"\n", len(MAGIC))
    cut = {
        "magic": 5,
        "header": len(MAGIC) + 20,
        "payload": head_end + 1 + (len(blob) - head_end) // 2,
        "last byte": len(blob) - 1,
    }[where]
    path = tmp_path / "cut.fdaimpute"
    path.write_bytes(blob[:cut])
    with pytest.raises(ValueError, match="is truncated"):
        fi.KernelImputer.load(path)


def test_empty_file_is_truncated(tmp_path):
    path = tmp_path / "empty.fdaimpute"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="is truncated"):
        fi.KernelImputer.load(path)


@pytest.mark.parametrize("offset", [0, 100, -1])
def test_flipped_payload_byte_is_reported(kernel_file, tmp_path, offset):
    blob = bytearray(kernel_file.read_bytes())
    start = blob.index(b"\n", len(MAGIC)) + 1
    pos = start + offset if offset >= 0 else len(blob) + offset
    blob[pos] ^= 0x01
    path = tmp_path / "flipped.fdaimpute"
    path.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="corrupted: the payload's SHA-256"):
        fi.KernelImputer.load(path)


def test_damaged_header_is_reported(kernel_file, tmp_path):
    blob = bytearray(kernel_file.read_bytes())
    blob[len(MAGIC)] = ord("[")  # the JSON object no longer parses
    path = tmp_path / "bad-header.fdaimpute"
    path.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="corrupted: unreadable header"):
        fi.KernelImputer.load(path)
    path.write_bytes(MAGIC + b"x" * 70_000)  # no end of header at all
    with pytest.raises(ValueError, match="no complete header"):
        fi.KernelImputer.load(path)


def test_extra_bytes_are_reported(kernel_file, tmp_path):
    path = tmp_path / "longer.fdaimpute"
    path.write_bytes(kernel_file.read_bytes() + b"\0")
    with pytest.raises(ValueError, match="is corrupted: its payload has"):
        fi.KernelImputer.load(path)


def test_failed_save_leaves_the_old_file(fitted, kernel_file, tmp_path, monkeypatch):
    path = tmp_path / "model.fdaimpute"
    path.write_bytes(kernel_file.read_bytes())

    def broken(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(persistence.os, "replace", broken)
    with pytest.raises(OSError, match="disk full"):
        fitted("MICE").save(path)
    assert path.read_bytes() == kernel_file.read_bytes()
    assert os.listdir(tmp_path) == ["model.fdaimpute"]


def test_save_refuses_other_objects(tmp_path):
    with pytest.raises(TypeError, match="only fdaimpute imputers"):
        persistence.save({"not": "an imputer"}, tmp_path / "x.fdaimpute")


@needs_torch
@pytest.mark.skipif(
    torch is not None and torch.cuda.is_available(), reason="needs no CUDA"
)
def test_neural_model_for_missing_device_loads_on_cpu(fitted, sim, tmp_path):
    est = fitted("VT")
    expected = est.transform(sim.test.data)
    path = tmp_path / "cuda.fdaimpute"
    est.set_params(device="cuda")
    try:
        est.save(path)
    finally:
        est.set_params(device=TINY.get("device", "auto"))
    with pytest.warns(UserWarning, match="not available here; using the CPU"):
        loaded = fi.VTImputer.load(path)
    assert loaded.device_.type == "cpu"
    assert_array_equal(loaded.transform(sim.test.data), expected)
