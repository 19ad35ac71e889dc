"""Swapping two paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``): how a conversion puts a new data set
directory in place of an old one so that the destination is, at every instant, the old data set or the new one.

Example:
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> for name in ("a", "b"):
    ...     os.mkdir(os.path.join(folder, name))
    ...     open(os.path.join(folder, name, name), "w").close()
    >>> if exchange_paths(os.path.join(folder, "a"), os.path.join(folder, "b")):
    ...     assert os.listdir(os.path.join(folder, "a")) == ["b"]
"""

from __future__ import annotations

import ctypes
import errno
import os

__all__ = ["exchange_paths"]


def exchange_paths(first: str | os.PathLike, second: str | os.PathLike) -> bool:
    """Swap ``first`` and ``second`` (both must exist) atomically; ``False`` (nothing done) where the system or the
    file system can't, for the caller to fall back on two renames. Other failures raise ``OSError``.

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> exchange_paths(os.path.join(folder, "missing"), folder)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        FileNotFoundError: [Errno 2] No such file or directory: ...
    """
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    at_fdcwd, rename_exchange = -100, 2
    if renameat2(at_fdcwd, os.fsencode(first), at_fdcwd, os.fsencode(second), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), os.fspath(first))
