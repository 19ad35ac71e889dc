"""Random access to the bytes of one file, wherever it lives: the small protocol packed shards are read through.

A :class:`ByteSource` is a named, fixed-size run of bytes that can be read at any offset. The packed shard reader
(:mod:`pydaf.formats.packed`) only ever asks a source for its :meth:`~ByteSource.size` and for byte ranges, so the
same reader serves a memory-mapped local file (:class:`MappedByteSource`, here) and a file served over HTTP (a source
that issues Range requests). A source's contract:

- ``name`` names the file in errors (a path or a URL);
- ``size()`` is the total number of bytes (fixed for the source's life);
- ``read(offset, length)`` returns exactly ``length`` bytes starting at ``offset``; a range that is not wholly inside
  ``[0, size())`` raises :class:`~pydaf.errors.DafFormatError` (never a short read, never a crash).
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

import numpy as np

from ..errors import DafFormatError
from .maps import map_region


@runtime_checkable
class ByteSource(Protocol):
    """A named, fixed-size run of bytes readable at any offset (see the module's docstring for the contract).

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile() as handle:
        ...     _ = handle.write(b"hello"); handle.flush()
        ...     isinstance(MappedByteSource(handle.name), ByteSource)
        True
    """

    name: str

    def size(self) -> int:
        """The total number of bytes."""
        ...

    def read(self, offset: int, length: int) -> bytes | memoryview:
        """Exactly ``length`` bytes from ``offset``, or a :class:`~pydaf.errors.DafFormatError`."""
        ...


def check_range(source: ByteSource, offset: int, length: int) -> None:
    """Refuse (with a :class:`~pydaf.errors.DafFormatError` naming the source) a range not wholly inside it.

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile() as handle:
        ...     _ = handle.write(b"hello"); handle.flush()
        ...     check_range(MappedByteSource(handle.name), 4, 2)
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: truncated file: ...
        (bytes 4 to 6 end past its end, at 5 bytes)
    """
    size = source.size()
    if offset < 0 or length < 0 or offset + length > size:
        raise DafFormatError(f"truncated file: {source.name}\n(bytes {offset} to {offset + length} end past its "
                             f"end, at {size} bytes)")


class BufferByteSource:
    """A :class:`ByteSource` over bytes already in memory (or mapped): ``bytes``, a ``memoryview`` or a ``uint8``
    array. Reads are zero-copy views.

    Example:
        >>> source = BufferByteSource("hello.bin", b"hello")
        >>> source.size(), bytes(source.read(1, 3))
        (5, b'ell')
    """

    def __init__(self, name: str, data: bytes | memoryview | np.ndarray) -> None:
        self.name = name
        self._bytes = np.frombuffer(data, dtype=np.uint8) if not isinstance(data, np.ndarray) else data.view(np.uint8)
        self._size = int(self._bytes.shape[0])

    def size(self) -> int:
        """The number of bytes."""
        return self._size

    def read(self, offset: int, length: int) -> memoryview:
        """A view of ``length`` bytes from ``offset``."""
        check_range(self, offset, length)
        return self._bytes[offset:offset + length].data

    def array(self, offset: int, length: int) -> np.ndarray:
        """The same bytes as :meth:`read`, as a ``uint8`` array."""
        check_range(self, offset, length)
        return self._bytes[offset:offset + length]


class MappedByteSource(BufferByteSource):
    """A :class:`ByteSource` over a local file, memory-mapped read-only once (reads are zero-copy views of the map).

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile() as handle:
        ...     _ = handle.write(b"hello"); handle.flush()
        ...     source = MappedByteSource(handle.name)
        ...     source.size(), bytes(source.read(1, 3))
        (5, b'ell')
    """

    def __init__(self, path: str | os.PathLike, *, name: str | None = None) -> None:
        size = os.stat(path).st_size
        # (an empty file cannot be mapped; it has no bytes to read anyway)
        super().__init__(name if name is not None else os.fspath(path),
                         map_region(os.fspath(path), 0, size, writable=False) if size else np.zeros(0, np.uint8))
