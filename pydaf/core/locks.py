"""A reentrant read/write lock: many readers or one writer, safe across threads.

The thread that holds the write lock may take it again, and may take the read lock (Julia's
``ExtendedReadWriteLock``). A thread that holds only a read lock may take it again; asking it for the write lock
would wait for itself, so that is refused with an error instead of deadlocking.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager


class ReadWriteLock:
    """Many concurrent readers or one (reentrant) writer.

    Example:
        >>> lock = ReadWriteLock()
        >>> with lock.write():
        ...     with lock.read():
        ...         lock.has_write_lock()
        True
    """

    def __init__(self) -> None:
        self._condition = threading.Condition(threading.Lock())
        self._writer: int | None = None
        self._write_depth = 0
        self._readers: dict[int, int] = {}
        self._writers_waiting = 0
        #: How many times the write lock was released: a cheap "anything may have changed" stamp for caches.
        self.write_count = 0

    def has_write_lock(self) -> bool:
        """Whether the calling thread holds the write lock."""
        return self._writer == threading.get_ident()

    def has_read_lock(self) -> bool:
        """Whether the calling thread holds a read (or the write) lock."""
        me = threading.get_ident()
        return self._writer == me or me in self._readers

    def acquire_read(self) -> None:
        me = threading.get_ident()
        with self._condition:
            if self._writer == me or me in self._readers:
                self._readers[me] = self._readers.get(me, 0) + 1
                return
            # Waiting writers go first, so a stream of readers can't starve them.
            while self._writer is not None or self._writers_waiting:
                self._condition.wait()
            self._readers[me] = 1

    def release_read(self) -> None:
        me = threading.get_ident()
        with self._condition:
            depth = self._readers[me] - 1
            if depth:
                self._readers[me] = depth
            else:
                del self._readers[me]
                self._condition.notify_all()

    def acquire_write(self) -> None:
        me = threading.get_ident()
        with self._condition:
            if self._writer == me:
                self._write_depth += 1
                return
            if me in self._readers:
                raise RuntimeError("can't take the write lock while holding only the read lock (would deadlock)")
            self._writers_waiting += 1
            try:
                while self._writer is not None or self._readers:
                    self._condition.wait()
            finally:
                self._writers_waiting -= 1
            self._writer = me
            self._write_depth = 1

    def release_write(self) -> None:
        with self._condition:
            self._write_depth -= 1
            if self._write_depth == 0:
                self.write_count += 1
                self._writer = None
                self._condition.notify_all()

    @contextmanager
    def read(self) -> Iterator[None]:
        """Hold the read lock for the ``with`` block."""
        self.acquire_read()
        try:
            yield
        finally:
            self.release_read()

    @contextmanager
    def write(self) -> Iterator[None]:
        """Hold the write lock for the ``with`` block."""
        self.acquire_write()
        try:
            yield
        finally:
            self.release_write()
