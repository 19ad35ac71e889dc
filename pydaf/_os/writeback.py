"""Starting the write-back of a file's dirty pages early, so that the ``fsync`` that makes it durable later waits for
less: the disk writes the first part while the caller still fills the rest (Linux ``sync_file_range`` with
``SYNC_FILE_RANGE_WRITE``, which only queues the writes; elsewhere nothing is started, and ``fsync`` does it all).

An H5df reorder makes what it writes durable (by swap: the new file before it is renamed over the old one; by backup:
the backup before the first in-place write, the new data before the backup goes). Without an early write-back, the
``fsync`` of 1.29 GB waited 0.65-0.69 s here; with a :class:`WritebackThread` queuing it while the file is filled,
0.02-0.1 s (the reorder as a whole: 1.5-1.6 s against 1.0-1.1 s).

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
import threading
from functools import cache

__all__ = ["WritebackThread", "start_writeback"]

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


class WritebackThread:
    """A thread that queues the write-back of a file's dirty pages every ``interval`` seconds until :meth:`stop`:
    the disk writes what was written while the caller's threads go on filling the file (a call that queues a lot of
    pages waits for the disk, which would stall the caller's own threads).

    Example:
        >>> import os, tempfile
        >>> with tempfile.TemporaryFile() as file:
        ...     thread = WritebackThread(file.fileno())
        ...     _ = file.write(b"x" * 4096)
        ...     thread.stop()
    """

    def __init__(self, fd: int, interval: float = 0.05) -> None:
        self._fd = fd
        self._interval = interval
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pydaf-writeback", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval):
            start_writeback(self._fd)

    def stop(self) -> None:
        """Stop the thread (and wait for it: the caller may close the file then). Idempotent."""
        self._stopped.set()
        if self._thread is not threading.current_thread():
            self._thread.join()
