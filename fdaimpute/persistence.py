"""Saving and loading imputers: one versioned, checksummed file format.

Every imputer's ``save(path)`` and ``load(path)`` go through this module.
A model file is, in order:

1. the magic line ``b"FDAIMPUTE-MODEL\\n"`` (16 bytes), which marks the file
   as an fdaimpute model;
2. a header: one line of UTF-8 JSON ending in ``b"\\n"``, with the keys

   - ``format_version`` (int): the layout of the file, :data:`FORMAT_VERSION`;
   - ``class``: the estimator's class as ``"module.QualName"``;
   - ``fitted`` (bool): whether the estimator was fitted when saved;
   - ``fdaimpute``, ``python``, ``numpy``, ``sklearn``, ``torch``: the
     versions that wrote the file (``torch`` is ``null`` when it was not
     loaded);
   - ``payload_bytes`` (int) and ``payload_sha256`` (hex str): length and
     SHA-256 digest of the payload;

3. the payload: the estimator pickled with :data:`pickle.HIGHEST_PROTOCOL`.
   The neural imputers pickle their weights as CPU tensors, so a model
   trained on a GPU loads on a machine without one.

:func:`load` checks the magic, the format version, the payload's length
and digest and the class *before* unpickling, so a foreign, truncated or
corrupted file raises a :class:`ValueError` that says which, and a model of
another class a :class:`TypeError`.

.. warning::
   Loading unpickles the payload, and unpickling can run arbitrary code:
   load only files you trust. The checksum detects accidental damage, not
   tampering.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import pickle
import sys
import tempfile
import warnings

__all__ = ["FORMAT_VERSION", "MAGIC", "load", "read_header", "save"]

#: First bytes of every model file.
MAGIC = b"FDAIMPUTE-MODEL\n"
#: Layout version written by :func:`save`; :func:`load` reads only this one.
FORMAT_VERSION = 1
# A header is a few hundred bytes; a longer "line" means a damaged file.
_MAX_HEADER = 1 << 16


def _class_path(cls):
    return f"{cls.__module__}.{cls.__qualname__}"


def _versions():
    import numpy
    import sklearn

    import fdaimpute

    torch = sys.modules.get("torch")
    return {
        "fdaimpute": fdaimpute.__version__,
        "python": ".".join(map(str, sys.version_info[:3])),
        "numpy": numpy.__version__,
        "sklearn": sklearn.__version__,
        "torch": None if torch is None else str(torch.__version__),
    }


def save(estimator, path):
    """Write an imputer to ``path`` in the fdaimpute model format.

    Fitted or not, the estimator is stored whole (parameters and fitted
    state); the file is written to a temporary name and then renamed, so an
    interrupted save never leaves a partial file at ``path``.

    Parameters
    ----------
    estimator : BaseImputer
        The imputer.
    path : str or path-like
        Destination file (overwritten).

    Raises
    ------
    TypeError
        If ``estimator`` is not an fdaimpute imputer.

    See Also
    --------
    load : read it back.
    """
    from fdaimpute.base import BaseImputer

    if not isinstance(estimator, BaseImputer):
        raise TypeError(
            f"only fdaimpute imputers can be saved, got a {type(estimator).__name__}"
        )
    payload = pickle.dumps(estimator, protocol=pickle.HIGHEST_PROTOCOL)
    header = {
        "format_version": FORMAT_VERSION,
        "class": _class_path(type(estimator)),
        "fitted": hasattr(estimator, "grid_"),
        **_versions(),
        "payload_bytes": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    head = json.dumps(header, sort_keys=True).encode("utf-8") + b"\n"
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".fdaimpute-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(MAGIC)
            fh.write(head)
            fh.write(payload)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _split(path):
    """Return ``(header, payload)`` of a model file, checking its integrity."""
    path = os.fspath(path)
    with open(path, "rb") as fh:
        blob = fh.read()
    if not blob.startswith(MAGIC):
        if MAGIC.startswith(blob):
            raise ValueError(f"{path} is truncated: it ends inside the magic line")
        raise ValueError(
            f"{path} is not an fdaimpute model file (it does not start with "
            f"{MAGIC!r}); write models with the imputer's save()"
        )
    end = blob.find(b"\n", len(MAGIC), len(MAGIC) + _MAX_HEADER)
    if end < 0:
        raise ValueError(f"{path} is truncated or corrupted: no complete header")
    try:
        header = json.loads(blob[len(MAGIC) : end].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{path} is corrupted: unreadable header ({exc})") from None
    if not isinstance(header, dict) or "format_version" not in header:
        raise ValueError(f"{path} is corrupted: the header has no format_version")
    version = header["format_version"]
    if version != FORMAT_VERSION:
        raise ValueError(
            f"{path} is in fdaimpute model format version {version!r} (written by "
            f"fdaimpute {header.get('fdaimpute', '?')}); this fdaimpute "
            f"({_versions()['fdaimpute']}) reads version {FORMAT_VERSION} only"
        )
    missing = {"class", "payload_bytes", "payload_sha256"} - header.keys()
    if missing:
        raise ValueError(f"{path} is corrupted: the header lacks {sorted(missing)}")
    payload = blob[end + 1 :]
    if len(payload) != header["payload_bytes"]:
        state = "truncated" if len(payload) < header["payload_bytes"] else "corrupted"
        raise ValueError(
            f"{path} is {state}: its payload has {len(payload)} bytes, the header "
            f"says {header['payload_bytes']}"
        )
    if hashlib.sha256(payload).hexdigest() != header["payload_sha256"]:
        raise ValueError(
            f"{path} is corrupted: the payload's SHA-256 digest does not match "
            "the header"
        )
    return header, payload


def read_header(path):
    """Read a model file's header without unpickling anything.

    Parameters
    ----------
    path : str or path-like
        A file written by :func:`save`.

    Returns
    -------
    dict
        The header (see the module description): class, format and library
        versions, payload size and digest.

    Raises
    ------
    ValueError
        If the file is not an fdaimpute model, has another format version,
        or is truncated or corrupted.
    """
    return _split(path)[0]


def _resolve(class_path):
    module, _, name = class_path.rpartition(".")
    try:
        obj = importlib.import_module(module)
        for part in name.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError):
        return None
    return obj if isinstance(obj, type) else None


def load(path, cls=None):
    """Read an imputer written by :func:`save`.

    .. warning::
       This unpickles the file's payload, which can run arbitrary code:
       load only files you trust.

    Parameters
    ----------
    path : str or path-like
        The file.
    cls : type, default=None
        Required class: the file must hold an instance of it (or of a
        subclass). ``None`` accepts any fdaimpute imputer.

    Returns
    -------
    BaseImputer
        The estimator, fitted if it was when saved. Neural imputers move
        their weights to their ``device`` (the CPU, with a warning, when
        that device is not available).

    Raises
    ------
    ValueError
        If the file is not an fdaimpute model, has another format version,
        or is truncated or corrupted.
    TypeError
        If the file holds an instance of another class than ``cls``.
    """
    from fdaimpute.base import BaseImputer

    want = BaseImputer if cls is None else cls
    header, payload = _split(path)
    stored = _resolve(header["class"])
    if stored is not None and not issubclass(stored, want):
        raise TypeError(
            f"{os.fspath(path)} holds a {stored.__name__}, not a {want.__name__}"
        )
    written_by = header.get("fdaimpute")
    current = _versions()["fdaimpute"]
    if written_by != current:
        warnings.warn(
            f"{os.fspath(path)} was written by fdaimpute {written_by}, this is "
            f"{current}; the loaded model may behave differently",
            UserWarning,
            stacklevel=3,
        )
    obj = pickle.loads(payload)
    if not isinstance(obj, want):
        raise TypeError(
            f"{os.fspath(path)} holds a {type(obj).__name__}, not a {want.__name__}"
        )
    return obj
