"""Saving and loading imputers: one file of data that cannot run code.

Every imputer's ``save(path)`` and ``load(path)`` go through this module.
A model file is, in order:

1. the magic line ``b"FDAIMPUTE-MODEL\\n"`` (16 bytes);
2. the length of the header in bytes, an unsigned 64-bit little-endian
   integer (8 bytes);
3. the header: a UTF-8 JSON object with the keys

   - ``format_version`` (int): the layout of the file, :data:`FORMAT_VERSION`;
   - ``class``: the estimator's class, a key of fdaimpute's fixed table of
     classes (e.g. ``"PACEImputer"``);
   - ``fitted`` (bool): whether the estimator was fitted when saved;
   - ``encoding``: ``"data"``, or ``"pickle"`` for a file saved with
     ``allow_pickle=True`` that the data encoding could not hold;
   - ``model`` (``"data"`` only): the estimator as a tree of JSON values:
     every parameter, fitted number, history and configuration, and the
     class name of every object, with references to the arrays;
   - ``metadata``: strings the writer attached (the command line keeps
     the column names the model was fitted with);
   - ``fdaimpute``, ``python``, ``numpy``, ``sklearn``, ``torch``: the
     versions that wrote the file (``torch`` is ``null`` when it was not
     loaded);
   - ``payload_bytes`` (int) and ``payload_sha256`` (hex str): length and
     SHA-256 digest of the payload;
   - ``header_sha256`` (hex str): SHA-256 digest of the rest of the header
     (every key but this one) as canonical JSON (:func:`header_digest`): it
     covers the model tree, with the fitted numbers it holds, and through
     ``payload_sha256`` the payload too;

4. the payload: the arrays and tensors in the safetensors format (or, for
   ``"pickle"``, the pickled estimator).

Classes are looked up in a fixed table of fdaimpute's own classes
(:data:`fdaimpute._io.model_tree.CLASSES`); nothing a file names is imported,
and no part of a ``"data"`` file is unpickled. A value the format cannot
hold (a ``RandomState``, a user's own regularizer or imputer subclass) is
refused by :func:`save` with a message saying what to change.

:func:`load` reads the magic, then the header (at most
:data:`MAX_HEADER_BYTES`), checking its digest, then exactly the payload
the header declares, checking its length and digest, so a foreign,
truncated or corrupted file raises a :class:`ValueError` that says which,
before the rest of it is read; a model of another class raises a
:class:`TypeError`. It then checks the model it built, since a file edited
with its digests recomputed can hold values no fit gives: every array
saved as finite floats must still be, the parameters must be valid and the
fitted attributes consistent (``BaseImputer._check_state``: the
eigenfunctions' shape against the grid and ``n_components_``, eigenvalues
and variances ``>= 0``, ...); the :class:`ValueError` says what is wrong.

Files of format version 2 (before the header digest) still load, their
payload's digest checked.

.. warning::
   ``allow_pickle=True`` lets :func:`load` unpickle a ``"pickle"`` file,
   and unpickling can run any code: pass it only for files you trust.
   The checksum detects accidental damage, not tampering.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import stat
import struct
import sys
import warnings

from fdaimpute._io.files import atomic_write

__all__ = [
    "FORMAT_VERSION",
    "MAGIC",
    "MAX_HEADER_BYTES",
    "READ_VERSIONS",
    "header_digest",
    "load",
    "read_header",
    "save",
]

#: First bytes of every model file.
MAGIC = b"FDAIMPUTE-MODEL\n"
#: Layout version written by :func:`save`.
FORMAT_VERSION = 3
#: Layout versions :func:`load` reads: 2 lacks ``header_sha256``.
READ_VERSIONS = (2, 3)
#: Largest header :func:`load` reads (a header is kilobytes; training
#: histories of many epochs make it longer).
MAX_HEADER_BYTES = 64 << 20
_LENGTH = struct.Struct("<Q")
_CHUNK = 1 << 20
_ENCODINGS = ("data", "pickle")


def _versions():
    import numpy
    import sklearn

    from fdaimpute._version import __version__

    torch = sys.modules.get("torch")
    return {
        "fdaimpute": __version__,
        "python": ".".join(map(str, sys.version_info[:3])),
        "numpy": numpy.__version__,
        "sklearn": sklearn.__version__,
        "torch": None if torch is None else str(torch.__version__),
    }


def header_digest(header):
    """The ``header_sha256`` of a model file's header.

    Parameters
    ----------
    header : dict
        The header, as JSON values; a ``header_sha256`` key is left out.

    Returns
    -------
    str
        The hex SHA-256 digest of the rest of the header as canonical JSON:
        ``json.dumps(rest, sort_keys=True, separators=(",", ":"),
        ensure_ascii=True, allow_nan=False)`` encoded as ASCII. Any change
        of a value, key or the nesting changes it; the header's own
        whitespace and key order do not.

    Raises
    ------
    ValueError
        If the header holds a number JSON cannot write (an infinity read
        from an out-of-range literal).
    """
    rest = {k: v for k, v in header.items() if k != "header_sha256"}
    text = json.dumps(
        rest, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def _payload(estimator, allow_pickle):
    """``(encoding, model tree or None, payload bytes)`` of an estimator."""
    from safetensors.numpy import save as save_arrays

    from fdaimpute._io.model_tree import UnsupportedObject, to_tree

    try:
        tree, arrays = to_tree(estimator)
    except UnsupportedObject as exc:
        if not allow_pickle:
            raise
        warnings.warn(
            f"{exc.args[0].split(', which')[0]}: saved as a pickle, which "
            "loads only with load(path, allow_pickle=True)",
            UserWarning,
            stacklevel=4,
        )
        return "pickle", None, pickle.dumps(estimator, protocol=pickle.HIGHEST_PROTOCOL)
    return "data", tree, save_arrays(arrays)


def save(estimator, path, *, allow_pickle=False, metadata=None, overwrite=True):
    """Write an imputer to ``path`` in the fdaimpute model format.

    Fitted or not, the estimator is stored whole (parameters and fitted
    state) as data: JSON values and safetensors arrays. The file is written
    to a temporary name in the same folder and then renamed, so an
    interrupted save never leaves a partial file at ``path``.

    Parameters
    ----------
    estimator : BaseImputer
        One of fdaimpute's imputers.
    path : str or path-like
        Destination file.
    allow_pickle : bool, default=False
        If the estimator holds a value the format cannot hold (a user's own
        regularizer, say), pickle it instead of raising, with a warning.
        Such a file loads only with ``load(path, allow_pickle=True)``.
    metadata : dict of str to str, default=None
        Strings to keep in the header (see :func:`read_header`).
    overwrite : bool, default=True
        Replace an existing file at ``path``; ``False`` raises
        :class:`FileExistsError` instead.

    Raises
    ------
    TypeError
        If ``estimator`` is not an fdaimpute imputer, or (without
        ``allow_pickle``) holds a value the format cannot hold; the message
        names the attribute and what to change.
    FileExistsError
        If ``path`` exists and ``overwrite=False``.

    See Also
    --------
    load : read it back.
    """
    from fdaimpute._io.model_tree import class_key, is_imputer_class

    if not is_imputer_class(type(estimator)):
        raise TypeError(
            f"only fdaimpute imputers can be saved, got a {type(estimator).__name__}"
        )
    metadata = dict(metadata or {})
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
        raise TypeError("metadata must map strings to strings")
    encoding, tree, payload = _payload(estimator, allow_pickle)
    cls = type(estimator)
    header = {
        "format_version": FORMAT_VERSION,
        "class": class_key(cls) or f"{cls.__module__}.{cls.__qualname__}",
        "fitted": hasattr(estimator, "grid_"),
        "encoding": encoding,
        **_versions(),
        "metadata": metadata,
        "payload_bytes": len(payload),
        "payload_sha256": hashlib.sha256(payload).hexdigest(),
    }
    if tree is not None:
        header["model"] = tree
    header["header_sha256"] = header_digest(header)
    head = json.dumps(header, allow_nan=False).encode("utf-8")
    atomic_write(path, [MAGIC, _LENGTH.pack(len(head)), head, payload], overwrite)


def _read_exactly(fh, n, path, what):
    """``n`` bytes of ``fh``, read in chunks; ValueError naming ``what`` if short."""
    parts, left = [], n
    while left > 0:
        part = fh.read(min(left, _CHUNK))
        if not part:
            raise ValueError(
                f"{path} is truncated: it ends inside the {what} ({n - left} of "
                f"{n} bytes)"
            )
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def _check_header(header, path):
    if not isinstance(header, dict) or "format_version" not in header:
        raise ValueError(f"{path} is corrupted: the header has no format_version")
    version = header["format_version"]
    if type(version) is not int:
        raise ValueError(f"{path} is corrupted: format_version is {version!r}")
    if version not in READ_VERSIONS:
        raise ValueError(
            f"{path} is in fdaimpute model format version {version} (written by "
            f"fdaimpute {header.get('fdaimpute', '?')}); this fdaimpute "
            f"({_versions()['fdaimpute']}) reads versions "
            f"{', '.join(map(str, READ_VERSIONS))} only"
        )
    if version >= 3:
        _check_header_digest(header, path)
    missing = {"class", "encoding", "payload_bytes", "payload_sha256"} - set(header)
    if missing:
        raise ValueError(f"{path} is corrupted: the header lacks {sorted(missing)}")
    size = header["payload_bytes"]
    if type(size) is not int or size < 0:
        raise ValueError(f"{path} is corrupted: payload_bytes is {size!r}")
    if header["encoding"] not in _ENCODINGS:
        raise ValueError(
            f"{path} is corrupted: unknown encoding {header['encoding']!r}"
        )
    if header["encoding"] == "data" and "model" not in header:
        raise ValueError(f"{path} is corrupted: the header has no model")
    if not isinstance(header["class"], str):
        raise ValueError(f"{path} is corrupted: class is {header['class']!r}")


def _check_header_digest(header, path):
    try:
        digest = header_digest(header)
    except ValueError:
        digest = None
    if header.get("header_sha256") != digest:
        raise ValueError(
            f"{path} is corrupted: the header's SHA-256 digest does not match "
            "its content"
        )


def _read_header(fh, path):
    """The header of the open file ``fh``, read after checking the magic line."""
    magic = fh.read(len(MAGIC))
    if magic != MAGIC:
        if MAGIC.startswith(magic):
            raise ValueError(f"{path} is truncated: it ends inside the magic line")
        raise ValueError(
            f"{path} is not an fdaimpute model file (it does not start with "
            f"{MAGIC!r}); write models with the imputer's save()"
        )
    raw = _read_exactly(fh, _LENGTH.size, path, "header length")
    (length,) = _LENGTH.unpack(raw)
    # the earlier format put a JSON line here: as a length, its text is far
    # beyond any header (a length's first byte alone may well be "{")
    if length > MAX_HEADER_BYTES and raw[:2] == b'{"':
        raise ValueError(
            f"{path} is in the model format of an earlier fdaimpute (a pickle), "
            f"which this one does not read: refit the model and save it again"
        )
    if length > MAX_HEADER_BYTES:
        raise ValueError(
            f"{path} is corrupted: its header would be {length} bytes, more than "
            f"the {MAX_HEADER_BYTES} a model header may have"
        )
    head = _read_exactly(fh, length, path, "header")
    try:
        header = json.loads(head.decode("utf-8"), parse_constant=_no_constant)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"{path} is corrupted: unreadable header ({exc})") from None
    _check_header(header, path)
    return header


def _no_constant(name):
    raise ValueError(f"{name} is not JSON")


def _read(path, check=None, want_payload=True):
    """``(header, payload)`` of a model file, checking its integrity.

    ``check(header)`` runs after the header is read and before the payload is.
    """
    path = os.fspath(path)
    with open(path, "rb") as fh:
        header = _read_header(fh, path)
        if check is not None:
            check(header)
        if not want_payload:
            return header, None
        size = header["payload_bytes"]
        info = os.fstat(fh.fileno())
        if stat.S_ISREG(info.st_mode):
            left = info.st_size - fh.tell()
            if left != size:
                state = "truncated" if left < size else "corrupted"
                raise ValueError(
                    f"{path} is {state}: its payload has {left} bytes, the "
                    f"header says {size}"
                )
        payload = _read_exactly(fh, size, path, "payload")
        if fh.read(1):
            raise ValueError(
                f"{path} is corrupted: it goes on after the {size} bytes of "
                "payload the header declares"
            )
    if hashlib.sha256(payload).hexdigest() != header["payload_sha256"]:
        raise ValueError(
            f"{path} is corrupted: the payload's SHA-256 digest does not match "
            "the header"
        )
    return header, payload


def read_header(path):
    """Read a model file's header, without reading its payload.

    Parameters
    ----------
    path : str or path-like
        A file written by :func:`save`.

    Returns
    -------
    dict
        The header (see the module description): class, encoding, the model
        tree, metadata, format and library versions, payload size and digest.

    Raises
    ------
    ValueError
        If the file is not an fdaimpute model, has another format version,
        or its header is truncated or corrupted.
    """
    return _read(path, want_payload=False)[0]


def _stored_class(header):
    """The class a header names, when it is one of fdaimpute's (else None)."""
    from fdaimpute._io.model_tree import CLASSES, resolve

    name = header["class"]
    return resolve(name)[0] if name in CLASSES else None


def load(path, cls=None, *, allow_pickle=False):
    """Read an imputer written by :func:`save`.

    Parameters
    ----------
    path : str or path-like
        The file.
    cls : type, default=None
        Required class: the file must hold an instance of it (or of a
        subclass). ``None`` accepts any fdaimpute imputer.
    allow_pickle : bool, default=False
        Also load a file that ``save(..., allow_pickle=True)`` had to
        pickle. **Unpickling can run any code**: pass it only for a file
        you trust. Files of data load either way.

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
        is truncated or corrupted (a digest that does not match, or a model
        whose parameters or fitted values do not hold together), or holds a
        pickle and ``allow_pickle`` is False.
    TypeError
        If the file holds an instance of another class than ``cls``.
    ImportError
        If a pickled estimator's class (or its module) cannot be found, as
        a class defined in the script that saved it (``__main__``) cannot
        in another program: import or define it before loading. Its
        ``name`` is the missing class (``module.Class``) or module.
    """
    from fdaimpute._io.model_tree import is_imputer_class

    shown = os.fspath(path)
    wanted = "BaseImputer" if cls is None else cls.__name__

    def is_wanted(found):
        return is_imputer_class(found) if cls is None else issubclass(found, cls)

    def check(header):
        stored = _stored_class(header)
        if header["encoding"] == "pickle" and not allow_pickle:
            raise ValueError(
                f"{shown} holds a pickled {header['class']} (saved with "
                "allow_pickle=True). Unpickling can run any code, so it is "
                "loaded only with load(path, allow_pickle=True), or --trust-model "
                "on the command line: do that only if you trust where the file "
                "came from"
            )
        if header["encoding"] == "data" and stored is None:
            raise ValueError(
                f"{shown} is corrupted: {header['class']!r} is not one of "
                "fdaimpute's imputers"
            )
        if stored is not None and not is_wanted(stored):
            raise TypeError(f"{shown} holds a {stored.__name__}, not a {wanted}")

    header, payload = _read(path, check)
    written_by = header.get("fdaimpute")
    current = _versions()["fdaimpute"]
    if written_by != current:
        warnings.warn(
            f"{shown} was written by fdaimpute {written_by}, this is "
            f"{current}; the loaded model may behave differently",
            UserWarning,
            stacklevel=3,
        )
    obj = _decode(header, payload, shown) if header["encoding"] == "data" else None
    if obj is None:
        obj = _unpickled(payload, header["class"], shown)
    if not is_wanted(type(obj)):
        raise TypeError(f"{shown} holds a {type(obj).__name__}, not a {wanted}")
    return obj


class _ClassFinder(pickle.Unpickler):
    """An unpickler that names the class it cannot find."""

    def find_class(self, module, name):
        try:
            return super().find_class(module, name)
        except (AttributeError, ImportError) as exc:
            raise _MissingClass(f"{module}.{name}") from exc


class _MissingClass(Exception):
    """A class of a pickle (``args[0]``: ``module.Class``) that cannot be found."""


def _unpickled(payload, stored, shown):
    """The estimator pickled in ``payload``; an ImportError naming its class
    (or one it holds) when that cannot be found."""
    try:
        return _ClassFinder(io.BytesIO(payload)).load()
    except _MissingClass as exc:
        missing = exc.args[0]
    script = (
        " (a class defined in a script, module __main__, exists only in that "
        "script: define it in the program that loads the file too, or move it "
        "to a module that both import)"
        if missing.startswith("__main__.")
        else ""
    )
    raise ImportError(
        f"{shown} holds a pickled {stored}, and the class {missing} it needs "
        f"cannot be found: import or define it before loading the file{script}",
        name=missing,
    )


def _decode(header, payload, shown):
    from safetensors import SafetensorError
    from safetensors.numpy import load as load_arrays

    from fdaimpute._io.model_tree import from_tree

    try:
        arrays = load_arrays(payload)
    except (SafetensorError, ValueError, TypeError) as exc:
        raise ValueError(f"{shown} is corrupted: unreadable arrays ({exc})") from None
    try:
        obj = from_tree(header["model"], arrays)
    except (ValueError, TypeError, KeyError, AttributeError, RuntimeError) as exc:
        raise ValueError(f"{shown} is corrupted: {exc}") from None
    if type(obj).__name__ != header["class"]:
        raise ValueError(
            f"{shown} is corrupted: its header says {header['class']}, its model "
            f"is a {type(obj).__name__}"
        )
    fitted = hasattr(obj, "grid_")
    if header.get("fitted", fitted) != fitted:
        raise ValueError(
            f"{shown} is corrupted: its header says fitted={header['fitted']!r}, "
            f"its model is {'' if fitted else 'not '}fitted"
        )
    try:
        obj._check_state()
    except (ValueError, TypeError, AttributeError, KeyError, IndexError) as exc:
        raise ValueError(f"{shown} is corrupted: {exc}") from None
    return obj
