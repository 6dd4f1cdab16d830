"""Writing files so that a failure never leaves a partial or replaced file."""

from __future__ import annotations

import contextlib
import os
import tempfile

__all__ = ["atomic_path", "atomic_write"]


def atomic_write(path, chunks, overwrite=True):
    """Write ``chunks`` (bytes) to a temporary file beside ``path``, then rename it.

    Parameters
    ----------
    path : str or path-like
        Destination.
    chunks : iterable of bytes
        The content, in order.
    overwrite : bool, default=True
        ``False``: raise :class:`FileExistsError` if ``path`` exists (checked
        before writing and again at the rename, which then does not replace
        a file created meanwhile).
    """
    with atomic_path(path, overwrite) as tmp, open(tmp, "wb") as fh:
        for chunk in chunks:
            fh.write(chunk)


@contextlib.contextmanager
def atomic_path(path, overwrite=True):
    """A temporary file beside ``path`` to write; renamed to ``path`` at the end.

    The temporary file is removed if the block raises. ``overwrite`` as in
    :func:`atomic_write`.
    """
    path = os.fspath(path)
    if not overwrite and os.path.lexists(path):
        raise FileExistsError(f"{path} exists")
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".fdaimpute-", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        if hasattr(os, "chmod"):  # the mode a plain open() would give
            os.chmod(tmp, 0o666 & ~_umask())
        yield tmp
        _rename(tmp, path, overwrite)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _umask():
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _rename(tmp, path, overwrite):
    if overwrite:
        os.replace(tmp, path)
        return
    try:
        os.link(tmp, path)  # fails if path exists: never replaces a file
    except FileExistsError:
        raise FileExistsError(f"{path} exists") from None
    except OSError:  # a filesystem without hard links
        if os.path.lexists(path):
            raise FileExistsError(f"{path} exists") from None
        os.replace(tmp, path)
        return
    os.remove(tmp)
