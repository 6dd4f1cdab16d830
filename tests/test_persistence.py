"""The model file format: save/load of every imputer and its failure modes."""

import hashlib
import io
import json
import os
import pickle
import re
import struct
import sys
import warnings
from pathlib import Path

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


def _roughness():
    from fdaimpute.nn.regularizers import Roughness

    return Roughness(0.01)


FACTORIES = {
    "Kernel": lambda: fi.KernelImputer(),
    "PACE": lambda: fi.PACEImputer(random_state=0),
    "PACE-fdapace": lambda: fi.PACEImputer(
        fdapace_compat=True, bandwidth_cov="gcv", random_state=0
    ),
    "FACE": lambda: fi.FACEImputer(),
    "mFPCA": lambda: fi.MFPCAImputer(),
    "MICE": lambda: fi.MICEImputer(n_bins=21, max_iter=2, random_state=0),
    "GAIN": lambda: fi.GAINImputer(max_iter=20, random_state=0),
    "VT": lambda: fi.VTImputer(**TINY),
    # the nested PACE base, a regularizer and the error model's weights
    "VT+PACE": lambda: fi.VTImputer(
        **dict(TINY, base="pace", regularizers=[_roughness()])
    ),
    "VT+Kernel": lambda: fi.VTImputer(**dict(TINY, base=fi.KernelImputer())),
    "SAND": lambda: fi.SANDImputer(**SAND_TINY),
    "CNP": lambda: fi.CNPImputer(**CNP_TINY),
    # the chosen candidate nested inside
    "Auto": lambda: fi.AutoImputer(n_folds=1, random_state=0),
}
NEURAL = ("GAIN", "VT", "VT+PACE", "VT+Kernel", "SAND", "CNP")
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


def _params(est):
    """Parameters, with an estimator parameter as its class and parameters."""
    return {
        k: (type(v), _params(v)) if hasattr(v, "get_params") else v
        for k, v in est.get_params(deep=False).items()
    }


def _assert_same_model(a, b, data):
    assert type(a) is type(b)
    assert _params(a) == _params(b)
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
    assert header["class"] == type(est).__name__
    assert header["encoding"] == "data"
    assert header["model"]["class"] == type(est).__name__
    assert header["format_version"] == FORMAT_VERSION
    assert header["header_sha256"] == _header_digest(header)
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
    assert _params(loaded) == _params(est)
    with pytest.raises(NotFittedError):
        loaded.transform([(np.array([0.1, 0.5]), np.array([1.0, 2.0]))])


def test_load_refuses_another_class_before_reading_the_payload(
    kernel_file, monkeypatch
):
    def forbidden(*args, **kwargs):
        raise AssertionError("read the payload of a file of the wrong class")

    monkeypatch.setattr(persistence, "_decode", forbidden)
    monkeypatch.setattr(persistence.pickle, "loads", forbidden)
    counted = _counting_open(
        monkeypatch, limit=_payload_start(kernel_file.read_bytes())
    )
    with pytest.raises(TypeError, match="holds a KernelImputer, not a PACEImputer"):
        fi.PACEImputer.load(kernel_file)
    assert counted["bytes"] == _payload_start(kernel_file.read_bytes())


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


def _split_file(blob):
    """``(header, payload)`` of a model file's bytes."""
    start = len(MAGIC) + 8
    (length,) = struct.unpack("<Q", blob[len(MAGIC) : start])
    return json.loads(blob[start : start + length]), blob[start + length :]


def _header_digest(header):
    """``header_sha256`` as the format's description defines it."""
    rest = {k: v for k, v in header.items() if k != "header_sha256"}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _join_file(header, payload, seal=True):
    """A model file of ``header`` and ``payload``; ``seal``: with the header's
    digest recomputed, as whoever edits a file on purpose would."""
    if seal:
        header = dict(header, header_sha256=_header_digest(header))
    head = json.dumps(header).encode()
    return MAGIC + struct.pack("<Q", len(head)) + head + payload


def _with_header(blob, **changes):
    header, payload = _split_file(blob)
    header.update(changes)
    return _join_file(header, payload)


def _payload_start(blob):
    (length,) = struct.unpack("<Q", blob[len(MAGIC) : len(MAGIC) + 8])
    return len(MAGIC) + 8 + length


def test_other_format_version_is_refused(kernel_file, tmp_path):
    path = tmp_path / "future.fdaimpute"
    later = FORMAT_VERSION + 1
    path.write_bytes(_with_header(kernel_file.read_bytes(), format_version=later))
    msg = f"format version {later} .* reads versions 2, {FORMAT_VERSION} only"
    with pytest.raises(ValueError, match=msg):
        fi.KernelImputer.load(path)


def test_file_of_the_earlier_pickle_format_is_refused(fitted, tmp_path):
    payload = pickle.dumps(fitted("Kernel"))
    header = {"format_version": 1, "class": "fdaimpute.kernel.KernelImputer"}
    path = tmp_path / "v1.fdaimpute"
    path.write_bytes(MAGIC + json.dumps(header).encode() + b"\n" + payload)
    with pytest.raises(ValueError, match="earlier fdaimpute .* refit the model"):
        fi.KernelImputer.load(path)


@pytest.mark.parametrize("first_byte", [ord("{"), ord("{") + 1])
def test_header_length_starting_like_json_loads(fitted, sim, tmp_path, first_byte):
    # the length field is little-endian: a header of 123 + 256 k bytes starts
    # it with the byte "{", which must not be taken for the earlier format
    est = fitted("Kernel")
    path = tmp_path / "model.fdaimpute"
    for pad in range(256):
        persistence.save(est, path, metadata={"note": "x" * pad})
        raw = path.read_bytes()[len(MAGIC) : len(MAGIC) + 8]
        if raw[0] == first_byte:
            break
    else:
        pytest.fail("no padding gave the wanted first byte of the length")
    loaded = fi.KernelImputer.load(path)
    assert_array_equal(loaded.transform(sim.test.data), est.transform(sim.test.data))


def test_other_fdaimpute_version_warns(kernel_file, tmp_path, sim, fitted):
    path = tmp_path / "old.fdaimpute"
    path.write_bytes(_with_header(kernel_file.read_bytes(), fdaimpute="0.0.1"))
    with pytest.warns(UserWarning, match="written by fdaimpute 0.0.1"):
        loaded = fi.KernelImputer.load(path)
    _assert_same_model(fitted("Kernel"), loaded, sim.test.data)


@pytest.mark.parametrize("where", ["magic", "length", "header", "payload", "last byte"])
def test_truncated_file_is_reported(kernel_file, tmp_path, where):
    blob = kernel_file.read_bytes()
    start = _payload_start(blob)
    cut = {
        "magic": 5,
        "length": len(MAGIC) + 3,
        "header": len(MAGIC) + 20,
        "payload": start + (len(blob) - start) // 2,
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
    start = _payload_start(blob)
    pos = start + offset if offset >= 0 else len(blob) + offset
    blob[pos] ^= 0x01
    path = tmp_path / "flipped.fdaimpute"
    path.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="corrupted: the payload's SHA-256"):
        fi.KernelImputer.load(path)


@pytest.mark.parametrize(
    "key", [b'"noise_variance": ', b'"n_components_": ', b'"bandwidth_mean_": ']
)
def test_changed_digit_in_the_header_is_reported(fitted, tmp_path, key):
    # a fitted number of the model tree, still valid JSON after the change
    path = tmp_path / "pace.fdaimpute"
    fitted("PACE").save(path)
    blob = bytearray(path.read_bytes())
    i = blob.rfind(key) + len(key)
    blob[i] = ord("9") if blob[i] != ord("9") else ord("8")
    path.write_bytes(bytes(blob))
    msg = "is corrupted: the header's SHA-256 digest does not match"
    with pytest.raises(ValueError, match=msg) as info:
        fi.PACEImputer.load(path)
    assert str(path) in str(info.value)
    with pytest.raises(ValueError, match=msg):
        read_header(path)


def test_damaged_header_is_reported(kernel_file, tmp_path):
    blob = bytearray(kernel_file.read_bytes())
    blob[len(MAGIC) + 8] = ord("[")  # the JSON object no longer parses
    path = tmp_path / "bad-header.fdaimpute"
    path.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="corrupted: unreadable header"):
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


def test_save_without_overwrite_keeps_an_existing_file(fitted, kernel_file, tmp_path):
    path = tmp_path / "model.fdaimpute"
    path.write_bytes(b"precious")
    with pytest.raises(FileExistsError, match="exists"):
        persistence.save(fitted("Kernel"), path, overwrite=False)
    assert path.read_bytes() == b"precious"
    assert os.listdir(tmp_path) == ["model.fdaimpute"]


def test_save_refuses_other_objects(tmp_path):
    with pytest.raises(TypeError, match="only fdaimpute imputers"):
        persistence.save({"not": "an imputer"}, tmp_path / "x.fdaimpute")


def test_metadata_is_kept_in_the_header(fitted, tmp_path):
    path = tmp_path / "meta.fdaimpute"
    columns = {"id": "subject", "time": "age", "value": "height"}
    persistence.save(fitted("Kernel"), path, metadata=columns)
    assert read_header(path)["metadata"] == columns


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


# --------------------------------------------------------------------------- #
# a model file cannot run code


class _Sentinel:
    """Unpickling it creates the file ``path``: what an attacker's pickle does."""

    def __init__(self, path):
        self.path = str(path)

    def __reduce__(self):
        return (Path.write_text, (Path(self.path), "ran"))


def test_crafted_pickle_payload_runs_nothing(kernel_file, tmp_path):
    sentinel = tmp_path / "sentinel"
    evil = pickle.dumps(_Sentinel(sentinel))
    digest = hashlib.sha256(evil).hexdigest()
    header, _ = _split_file(kernel_file.read_bytes())
    files = {
        # the layout of today's files, with a pickle for the arrays
        "data": _join_file(
            dict(header, payload_bytes=len(evil), payload_sha256=digest), evil
        ),
        # a file saying it is a pickle
        "pickle": _join_file(
            dict(
                header,
                encoding="pickle",
                payload_bytes=len(evil),
                payload_sha256=digest,
            ),
            evil,
        ),
    }
    for name, blob in files.items():
        path = tmp_path / f"{name}.fdaimpute"
        path.write_bytes(blob)
        with pytest.raises(ValueError):
            fi.BaseImputer.load(path)
        assert not sentinel.exists(), name
    with pytest.raises(ValueError, match="allow_pickle=True"):
        fi.BaseImputer.load(tmp_path / "pickle.fdaimpute")
    # the explicit opt-in does unpickle (and the wrong class is still caught)
    with pytest.raises(TypeError, match="holds a int"):
        fi.BaseImputer.load(tmp_path / "pickle.fdaimpute", allow_pickle=True)
    assert sentinel.exists()


def _v1_file(class_path, payload):
    """A file in the layout of the earlier format: a header line, then a pickle."""
    header = {
        "format_version": 1,
        "class": class_path,
        "fitted": True,
        "fdaimpute": fi.__version__,
        "payload_bytes": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    return MAGIC + json.dumps(header).encode() + b"\n" + payload


def test_pickle_in_the_earlier_layout_runs_nothing(tmp_path):
    sentinel = tmp_path / "sentinel"
    path = tmp_path / "v1.fdaimpute"
    path.write_bytes(
        _v1_file("fdaimpute.kernel.KernelImputer", pickle.dumps(_Sentinel(sentinel)))
    )
    for allow_pickle in (False, True):
        with pytest.raises(ValueError, match="earlier fdaimpute"):
            fi.BaseImputer.load(path, allow_pickle=allow_pickle)
    assert not sentinel.exists()


def test_module_named_in_the_earlier_layout_is_not_imported(tmp_path, monkeypatch):
    sentinel = tmp_path / "sentinel"
    (tmp_path / "evilmod1.py").write_text(
        f"open({str(sentinel)!r}, 'w').write('ran')\nclass Thing:\n    pass\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = tmp_path / "v1.fdaimpute"
    path.write_bytes(_v1_file("evilmod1.Thing", pickle.dumps(None)))
    with pytest.raises((ValueError, TypeError)):
        fi.KernelImputer.load(path)
    assert not sentinel.exists()
    assert "evilmod1" not in sys.modules


@pytest.mark.parametrize("where", ["top", "nested"])
def test_header_naming_a_module_imports_nothing(
    kernel_file, tmp_path, monkeypatch, where
):
    sentinel = tmp_path / "sentinel"
    (tmp_path / "evilmod.py").write_text(
        f"open({str(sentinel)!r}, 'w').write('ran')\nclass Thing:\n    pass\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    header, payload = _split_file(kernel_file.read_bytes())
    evil = {"$": "object", "class": "evilmod.Thing", "state": {}}
    if where == "top":
        header.update({"class": "evilmod.Thing", "model": evil})
    elif where == "nested":
        header["model"]["state"]["mean_"] = evil
    path = tmp_path / "evil.fdaimpute"
    path.write_bytes(_join_file(header, payload))
    for allow_pickle in (False, True):
        with pytest.raises(ValueError, match="evilmod.Thing"):
            fi.BaseImputer.load(path, allow_pickle=allow_pickle)
    assert not sentinel.exists()
    assert "evilmod" not in sys.modules


def _counting_open(monkeypatch, limit):
    """Make persistence's ``open`` count the bytes read and fail past ``limit``."""
    counted = {"bytes": 0}

    class Counting(io.FileIO):
        def read(self, size=-1):
            if size is None or size < 0 or counted["bytes"] + size > limit:
                raise AssertionError(f"read more than {limit} bytes")
            out = super().read(size)
            counted["bytes"] += len(out)
            return out

        readall = read

    def fake_open(path, mode="r", *args, **kwargs):
        assert mode == "rb"
        return Counting(path, "r")

    monkeypatch.setattr(persistence, "open", fake_open, raising=False)
    return counted


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="needs /dev/zero")
def test_dev_zero_is_refused_without_reading_it(monkeypatch):
    counted = _counting_open(monkeypatch, limit=1 << 16)
    with pytest.raises(ValueError, match="not an fdaimpute model file"):
        fi.BaseImputer.load("/dev/zero")
    assert counted["bytes"] <= len(MAGIC)


@pytest.mark.parametrize("start", [b"junk", b"magic", b"header", b"payload"])
def test_big_junk_file_is_refused_without_reading_it(tmp_path, monkeypatch, start):
    path = tmp_path / "big.fdaimpute"
    size = 3 << 30  # 3 GB, sparse: nothing is written but the first bytes
    huge = {
        "encoding": "data",
        "class": "KernelImputer",
        "format_version": 2,
        "model": None,
        "payload_bytes": size,
        "payload_sha256": "0" * 64,
    }
    head = json.dumps(huge).encode()
    first = {
        b"junk": os.urandom(64),
        b"magic": MAGIC + struct.pack("<Q", size),  # a header of 3 GB
        b"header": MAGIC + struct.pack("<Q", 100) + b"{" + b" " * 40,
        b"payload": MAGIC + struct.pack("<Q", len(head)) + head,  # a 3 GB payload
    }[start]
    with open(path, "wb") as fh:
        fh.write(first)
        fh.truncate(size)
    counted = _counting_open(monkeypatch, limit=1 << 16)
    with pytest.raises(ValueError, match="not an fdaimpute model|corrupted|truncated"):
        fi.BaseImputer.load(path)
    assert counted["bytes"] <= len(first) + 200


# --------------------------------------------------------------------------- #
# what the format cannot hold: refused at save time, or pickled when allowed


@needs_torch
def test_random_state_object_is_refused_with_advice(sim, tmp_path):
    est = fi.PACEImputer(random_state=np.random.RandomState(0))
    path = tmp_path / "rs.fdaimpute"
    with pytest.raises(
        TypeError,
        match=r"random_state is a numpy RandomState.*"
        r"integer seed",
    ):
        est.save(path)
    assert not path.exists()


@needs_torch
def test_own_regularizer_needs_allow_pickle(sim, tmp_path):
    from fdaimpute.nn.regularizers import Roughness

    class MyRoughness(Roughness):
        pass

    est = fi.VTImputer(**dict(TINY, max_epochs=1, regularizers=[MyRoughness(0.1)]))
    est.fit(sim.train.data)
    path = tmp_path / "own.fdaimpute"
    msg = r"regularizers\[0\] is a .*MyRoughness, not one of fdaimpute's built-in"
    with pytest.raises(TypeError, match=msg) as info:
        est.save(path)
    assert "allow_pickle=True" in str(info.value)
    assert not path.exists()
    # the test module's class is picklable by reference
    MyRoughness.__module__, MyRoughness.__qualname__ = __name__, "_MyRoughness"
    globals()["_MyRoughness"] = MyRoughness
    with pytest.warns(UserWarning, match="saved as a pickle"):
        est.save(path, allow_pickle=True)
    assert read_header(path)["encoding"] == "pickle"
    with pytest.raises(ValueError, match="allow_pickle=True"):
        fi.VTImputer.load(path)
    loaded = fi.VTImputer.load(path, allow_pickle=True)
    assert_array_equal(loaded.transform(sim.test.data), est.transform(sim.test.data))


class _OwnKernel(fi.KernelImputer):
    pass


def test_subclass_of_an_imputer_needs_allow_pickle(sim, tmp_path):
    est = _OwnKernel().fit(sim.train.data)
    path = tmp_path / "sub.fdaimpute"
    with pytest.raises(TypeError, match="subclass of an fdaimpute imputer"):
        est.save(path)
    with pytest.warns(UserWarning, match="saved as a pickle"):
        est.save(path, allow_pickle=True)
    assert read_header(path)["class"].endswith("_OwnKernel")
    loaded = fi.KernelImputer.load(path, allow_pickle=True)
    assert type(loaded) is _OwnKernel


def test_a_pickled_class_that_cannot_be_found_is_named(sim, tmp_path, monkeypatch):
    import __main__

    class ScriptKernel(fi.KernelImputer):
        """A class of the user's script, as pickle finds it there."""

    ScriptKernel.__module__, ScriptKernel.__qualname__ = "__main__", "ScriptKernel"
    monkeypatch.setattr(__main__, "ScriptKernel", ScriptKernel, raising=False)
    path = tmp_path / "script.fdaimpute"
    with pytest.warns(UserWarning, match="saved as a pickle"):
        ScriptKernel().fit(sim.train.data).save(path, allow_pickle=True)
    monkeypatch.delattr(__main__, "ScriptKernel")  # another program
    with pytest.raises(ImportError, match="define it in the program that loads") as err:
        fi.KernelImputer.load(path, allow_pickle=True)
    assert err.value.name == "__main__.ScriptKernel"
    assert "class __main__.ScriptKernel it needs cannot be found" in str(err.value)
    # defined again, it loads
    monkeypatch.setattr(__main__, "ScriptKernel", ScriptKernel, raising=False)
    assert type(fi.KernelImputer.load(path, allow_pickle=True)) is ScriptKernel


def test_tree_with_a_private_attribute_name_is_refused(kernel_file, tmp_path):
    header, payload = _split_file(kernel_file.read_bytes())
    header["model"]["state"]["__class__"] = "x"
    path = tmp_path / "dunder.fdaimpute"
    path.write_bytes(_join_file(header, payload))
    with pytest.raises(ValueError, match="cannot have the attribute '__class__'"):
        fi.KernelImputer.load(path)


def test_header_and_model_of_different_classes_are_refused(fitted, tmp_path):
    path = tmp_path / "pace.fdaimpute"
    fitted("PACE").save(path)
    header, payload = _split_file(path.read_bytes())
    header["class"] = "KernelImputer"
    path.write_bytes(_join_file(header, payload))
    with pytest.raises(ValueError, match="header says KernelImputer"):
        fi.BaseImputer.load(path)


def test_model_tree_is_plain_json_with_class_names(fitted, tmp_path):
    path = tmp_path / "pace.fdaimpute"
    fitted("PACE").save(path)
    tree = read_header(path)["model"]
    names = set()

    def walk(node):
        if isinstance(node, dict):
            if node.get("$") == "object":
                names.add(node["class"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(tree)
    assert {"PACEImputer", "PACEModel", "MeanCurve", "DefaultNumerics"} <= names
    assert not any("." in name for name in names)  # names, not module paths
    assert tree["state"]["random_state"] == 0


@needs_torch
def test_config_asking_for_a_bigger_network_than_its_weights_is_refused(
    fitted, tmp_path
):
    path = tmp_path / "vt.fdaimpute"
    fitted("VT").save(path)
    header, payload = _split_file(path.read_bytes())
    config = header["model"]["state"]["module_config_"]["items"]["vt"]["items"]
    config["d_model"] = 1 << 20  # a network of terabytes, with the tiny weights
    path.write_bytes(_join_file(header, payload))
    with pytest.raises(ValueError, match="do not fit the network"):
        fi.VTImputer.load(path)


# --------------------------------------------------------------------------- #
# a file edited on purpose (its digests recomputed) is checked as it loads


def _edited(path, tmp_path, edit):
    """A copy of the model file ``path`` changed by ``edit(header, arrays)``,
    with both digests recomputed."""
    from safetensors.numpy import load as load_arrays
    from safetensors.numpy import save as save_arrays

    header, payload = _split_file(path.read_bytes())
    arrays = dict(load_arrays(payload))
    edit(header, arrays)
    payload = save_arrays(arrays)
    header.update(
        payload_bytes=len(payload), payload_sha256=hashlib.sha256(payload).hexdigest()
    )
    out = tmp_path / "edited.fdaimpute"
    out.write_bytes(_join_file(header, payload))
    return out


def _state(header, *attributes):
    """The state of the object at ``attributes`` in the header's model tree."""
    node = header["model"]
    for name in attributes:
        node = node["state"][name]
    return node["state"]


def _key(header, *attributes):
    """The payload's name of the array at ``attributes`` in the model tree."""
    *owner, name = attributes
    return _state(header, *owner)[name]["key"]


def _set_array(change, *attributes):
    def edit(header, arrays):
        key = _key(header, *attributes)
        arrays[key] = np.ascontiguousarray(change(arrays[key]))

    return edit


def _set_value(value, *attributes):
    def edit(header, arrays):
        *owner, name = attributes
        _state(header, *owner)[name] = value

    return edit


def _drop(*attributes):
    def edit(header, arrays):
        *owner, name = attributes
        del _state(header, *owner)[name]

    return edit


def _nan(a):
    return np.full_like(a, np.nan)


def _unflagged(edit):
    """``edit``, and no array node saying it was finite floats, as in a file
    of format 2: the estimators' own checks find what ``edit`` did."""

    def walk(node):
        if isinstance(node, dict):
            node.pop("finite", None)
            node = list(node.values())
        for value in node if isinstance(node, list) else ():
            walk(value)

    def both(header, arrays):
        edit(header, arrays)
        walk(header["model"])

    return both


EDITS = {
    "eigenvalues negated": (
        "PACE",
        _set_array(np.negative, "_model", "eigenvalues"),
        r"_model.eigenvalues has negative values",
    ),
    "grid_ cast to int": (
        "PACE",
        _set_array(lambda a: a.astype(np.int64), "grid_"),
        r"PACEImputer.grid_ is an array of int64, saved as floats",
    ),
    "grid_ cast to int, unflagged": (
        "PACE",
        _unflagged(_set_array(lambda a: a.astype(np.int64), "grid_")),
        r"grid_ is int64, not an array of floats",
    ),
    "eigenfunctions 3 of their columns": (
        "PACE",
        _set_array(lambda a: a[:, :3], "_model", "eigenfunctions"),
        r"_model.eigenfunctions has shape \(\d+, 3\), not \(\d+, \d+\)",
    ),
    "eigenfunctions half of their rows": (
        "PACE",
        _set_array(lambda a: a[: len(a) // 2], "_model", "eigenfunctions"),
        r"_model.eigenfunctions has shape",
    ),
    "eigenfunctions NaN": (
        "PACE",
        _set_array(_nan, "_model", "eigenfunctions"),
        r"eigenfunctions_? holds NaN or infinite values, saved finite",
    ),
    "eigenfunctions NaN, unflagged": (
        "PACE",
        _unflagged(_set_array(_nan, "_model", "eigenfunctions")),
        r"eigenfunctions_? holds NaN or infinite values$",
    ),
    "noise variance -1": (
        "PACE",
        _set_value(-1.0, "_model", "noise_variance"),
        r"_model.noise_variance is -1.0, not >= 0",
    ),
    "n_components_ changed": (
        "PACE",
        _set_value(3, "n_components_"),
        r"n_components_ is 3, but the model has \d+ components",
    ),
    "_model removed": ("PACE", _drop("_model"), r"no attribute '_model'"),
    "unknown kernel": (
        "PACE",
        _set_value("no-such-kernel", "kernel"),
        r"'kernel' parameter of PACEImputer must be",
    ),
    "FACE eigen_coef a column short": (
        "FACE",
        _set_array(lambda a: a[:, :-1], "_model", "eigen_coef"),
        r"_model.eigen_coef has shape",
    ),
    "FACE eigenfunctions_ a row short": (
        "FACE",
        _set_array(lambda a: a[:-1], "eigenfunctions_"),
        r"eigenfunctions_ has shape",
    ),
    "mFPCA n_components_ changed": (
        "mFPCA",
        _set_value(1, "n_components_"),
        r"n_components_ is 1, but the model has \d+ components",
    ),
    "mFPCA spread 0": (
        "mFPCA",
        _set_value({"$": "tuple", "items": [0.0, 1.0, 0.0, 0.0]}, "_scale"),
        r"_scale\[3\] is 0.0, not > 0",
    ),
    "Kernel bandwidth negative": (
        "Kernel",
        _set_value(-0.1, "bandwidth_"),
        r"bandwidth_ is -0.1, not > 0",
    ),
    "Kernel mean_ a point short": (
        "Kernel",
        _set_array(lambda a: a[:-1], "mean_"),
        r"mean_ has shape \(100,\), not \(101\)",
    ),
    "time_range_ reversed": (
        "Kernel",
        _set_value({"$": "tuple", "items": [1.0, 0.0]}, "time_range_"),
        r"time_range_ is \(1.0, 0.0\): its end is before its start",
    ),
    "Auto weights not summing to 1": (
        "Auto",
        lambda header, arrays: _state(header)["weights_"]["items"].update(
            {_state(header)["method_"]: 5.0}
        ),
        r"weights_ sum to .*, not 1",
    ),
    "Auto candidate's eigenvalues negated": (
        "Auto",
        _set_array(np.negative, "estimator_", "_model", "eigenvalues"),
        r"estimators?_(\[.*\])?: _model.eigenvalues has negative values",
    ),
    "fitted flag false": (
        "Kernel",
        lambda header, arrays: header.update(fitted=False),
        r"its header says fitted=False, its model is fitted",
    ),
}


@pytest.mark.parametrize("case", EDITS)
def test_edited_model_is_refused(fitted, tmp_path, case):
    name, edit, msg = EDITS[case]
    path = tmp_path / "model.fdaimpute"
    fitted(name).save(path)
    edited = _edited(path, tmp_path, edit)
    with pytest.raises(ValueError) as info:
        fi.BaseImputer.load(edited)
    assert str(info.value).startswith(f"{edited} is corrupted: ")
    assert re.search(msg, str(info.value)), str(info.value)


def test_format_version_must_be_an_integer(kernel_file, tmp_path):
    path = tmp_path / "float-version.fdaimpute"
    path.write_bytes(_with_header(kernel_file.read_bytes(), format_version=2.0))
    with pytest.raises(ValueError, match="is corrupted: format_version is 2.0"):
        fi.KernelImputer.load(path)


# --------------------------------------------------------------------------- #
# files of the previous format version (no header digest) still load

OLD_FILES = sorted((Path(__file__).parent / "data" / "models").glob("*-v2.fdaimpute"))


@pytest.mark.parametrize("path", OLD_FILES, ids=lambda p: p.stem)
def test_file_of_format_version_2_loads(path):
    # written by fdaimpute at commit 961d743 with the subjects and the
    # curves and bands it gave them in its metadata
    header = read_header(path)
    assert header["format_version"] == 2 and "header_sha256" not in header
    meta = header["metadata"]
    subjects = [(np.array(t), np.array(y)) for t, y in json.loads(meta["subjects"])]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "was written by fdaimpute", UserWarning)
        est = fi.BaseImputer.load(path)
    curves, std = est.transform(subjects, return_std=True)
    assert_array_equal(curves, json.loads(meta["transform"]))
    assert_array_equal(std, json.loads(meta["std"]))


def test_file_of_format_version_2_is_still_checked(tmp_path):
    path = OLD_FILES[0]
    blob = bytearray(path.read_bytes())
    blob[-1] ^= 0x01
    flipped = tmp_path / "flipped.fdaimpute"
    flipped.write_bytes(bytes(blob))
    with pytest.raises(ValueError, match="corrupted: the payload's SHA-256"):
        fi.BaseImputer.load(flipped)
    # no header digest to recompute: an edit of the model is found by its checks
    header, payload = _split_file(path.read_bytes())
    _state(header)["noise_variance_"] = -1.0
    edited = tmp_path / "edited.fdaimpute"
    edited.write_bytes(_join_file(header, payload, seal=False))
    with pytest.raises(ValueError, match="corrupted: noise_variance_ is -1.0"):
        fi.BaseImputer.load(edited)
