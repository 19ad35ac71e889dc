"""Starting the write-back of a file's dirty pages early, so that the ``fsync`` that makes it durable later waits for
less: the disk writes the first part while the caller still fills the rest (Linux ``sync_file_range`` with
``SYNC_FILE_RANGE_WRITE``, which only queues the writes; elsewhere nothing is started, and ``fsync`` does it all).

A H5df reorder is durable twice (its backup before the first in-place write, its new data before the backup goes):
starting each write-back while it copies or permutes took the reorder of 1.24 GB from 1.7-1.9 s to 1.6-1.7 s here
(the backup's copy and ``fsync`` from 0.94 s to 0.64 s).

Example:
    >>> import os, tempfile
    >>> with tempfile.TemporaryFile() as file:
    ...     _ = file.write(b"x" * 4096)
    ...     file.flush()
    ...     start_writeback(file.fileno())
    ...     os.fsync(file.fileno())
"""

from __future__ import annotations

import ctypes
import sys
from functools import cache

__all__ = ["start_writeback"]

_SYNC_FILE_RANGE_WRITE = 2


@cache
def _sync_file_range() -> object | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


def start_writeback(fd: int, offset: int = 0, nbytes: int = 0) -> None:
    """Queue the write-back of the dirty pages of ``nbytes`` of the file ``fd`` from ``offset`` (0: to its end),
    without waiting for it. Best effort: it changes no data, and a failure here is left for the ``fsync``."""
    function = _sync_file_range()
    if function is not None:
        function(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)  # type: ignore[operator]
