"""Opening files a data set does not own (a source to convert, an ``.h5ad``, a ``zarr.json``, a chunk, a journal)
without ever blocking: a FIFO, socket, device or folder planted where a regular file is expected is refused with a
:class:`~pydaf.errors.DafFormatError` before anything reads from it (opening a FIFO for reading blocks until a writer
comes; reading a character device may never end).

Files are opened ``O_NONBLOCK`` and checked with ``fstat`` on the open descriptor, so the check and the read concern
the same file. A library that opens a path itself (h5py, zipfile, zarr) gets :func:`require_regular_file` first: a
file swapped between the check and its open is the one race left, and the library then meets a regular file or
fails; it cannot be made to hang by a file planted before the call.

Example:
    >>> import os, tempfile
    >>> folder = tempfile.mkdtemp()
    >>> os.mkfifo(os.path.join(folder, "zarr.json"))
    >>> try:
    ...     read_regular_file(os.path.join(folder, "zarr.json"), what="the Zarr metadata", limit=1 << 20)
    ... except DafFormatError as error:
    ...     print(str(error).splitlines()[0])
    not a regular file (a FIFO): the Zarr metadata
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat

from ..errors import DafFormatError, DafStorageError

__all__ = ["file_kind", "open_regular_file", "read_regular_file", "refuse_special_file", "require_regular_file",
           "special_file_mode"]


def file_kind(mode: int) -> str:
    """What a ``st_mode`` says a file is, in words.

    Example:
        >>> import stat
        >>> file_kind(stat.S_IFIFO), file_kind(stat.S_IFREG)
        ('a FIFO', 'a regular file')
    """
    for test, text in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return text
    return "not a file"


def _refuse(path: str | os.PathLike, what: str, mode: int, daf_name: str | None) -> DafFormatError:
    return DafFormatError(f"not a regular file ({file_kind(mode)}): {what}\nat: {os.fspath(path)}",
                          daf_name=daf_name)


def require_regular_file(path: str | os.PathLike, *, what: str, follow_symlinks: bool = True,
                         daf_name: str | None = None) -> os.stat_result:
    """The status of ``path`` if it is a regular file; otherwise a :class:`DafFormatError` naming ``what`` was
    expected there (a missing file raises ``FileNotFoundError``, for the caller to word).

    Example:
        >>> import tempfile
        >>> try:
        ...     require_regular_file(tempfile.gettempdir(), what="the h5ad file")
        ... except DafFormatError as error:
        ...     print(str(error).splitlines()[0])
        not a regular file (a directory): the h5ad file
    """
    status = os.stat(path, follow_symlinks=follow_symlinks)
    if not stat.S_ISREG(status.st_mode):
        raise _refuse(path, what, status.st_mode, daf_name)
    return status


def refuse_special_file(path: str | os.PathLike, *, what: str, daf_name: str | None = None) -> None:
    """Refuse a FIFO, socket or device at ``path`` (where a data set's file or directory is expected) before anything
    opens it; a regular file or a directory passes, and a missing path is left to the caller.

    Example:
        >>> import os, tempfile
        >>> fifo = os.path.join(tempfile.mkdtemp(), "x.h5df")
        >>> os.mkfifo(fifo)
        >>> refuse_special_file(os.path.dirname(fifo), what="the source")  # (a directory passes)
        >>> try:
        ...     refuse_special_file(fifo, what="the source")
        ... except DafFormatError as error:
        ...     print(str(error).splitlines()[0])
        not a regular file (a FIFO): the source
    """
    mode = special_file_mode(path)
    if mode is not None:
        raise _refuse(path, what, mode, daf_name)


def special_file_mode(path: str | os.PathLike) -> int | None:
    """The mode of what is at ``path`` (following links) if it is neither a regular file nor a directory (a FIFO,
    socket or device), else ``None`` (also for nothing there, or a dangling link). Nothing is opened.

    Example:
        >>> special_file_mode("/dev/null") is not None, special_file_mode("/"), special_file_mode("/no/such/path")
        (True, None, None)
    """
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    return None if stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode) else status.st_mode


def open_regular_file(path: str | os.PathLike, *, what: str, flags: int = os.O_RDONLY, dir_fd: int | None = None,
                      follow_symlinks: bool = True, daf_name: str | None = None) -> tuple[int, os.stat_result]:
    """A descriptor of the regular file ``path`` (opened with ``flags``, close-on-exec, in blocking mode once known
    to be a regular file) and its status; anything else is refused without blocking. ``follow_symlinks=False``
    refuses a symbolic link (``O_NOFOLLOW``). The caller closes the descriptor.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x")
        >>> with open(path, "w") as handle:
        ...     _ = handle.write("abc")
        >>> fd, status = open_regular_file(path, what="a test file")
        >>> os.read(fd, 10), status.st_size
        (b'abc', 3)
        >>> os.close(fd)
    """
    flags |= os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags, dir_fd=dir_fd)
    except OSError as error:
        if error.errno == errno.ELOOP and not follow_symlinks:
            raise _refuse(path, what, stat.S_IFLNK, daf_name) from None
        if error.errno in (errno.ENXIO, errno.EISDIR):  # (a FIFO without a reader or a socket; a directory)
            try:
                mode = os.stat(path, dir_fd=dir_fd, follow_symlinks=follow_symlinks).st_mode
            except OSError:
                mode = stat.S_IFDIR if error.errno == errno.EISDIR else stat.S_IFSOCK
            raise _refuse(path, what, mode, daf_name) from None
        raise
    try:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise _refuse(path, what, status.st_mode, daf_name)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd, status


def read_regular_file(path: str | os.PathLike, *, what: str, limit: int, dir_fd: int | None = None,
                      follow_symlinks: bool = True, daf_name: str | None = None) -> bytes:
    """The whole content of the regular file ``path``, refused (before reading) if it is larger than ``limit`` bytes
    or is not a regular file: a declared or planted size never becomes an allocation.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "big")
        >>> with open(path, "wb") as handle:
        ...     _ = handle.write(b"x" * 100)
        >>> try:
        ...     read_regular_file(path, what="a small file", limit=10)
        ... except DafFormatError as error:
        ...     print(str(error).splitlines()[0])
        too large (100 bytes; at most 10 expected): a small file
    """
    fd, status = open_regular_file(path, what=what, dir_fd=dir_fd, follow_symlinks=follow_symlinks,
                                   daf_name=daf_name)
    try:
        if status.st_size > limit:
            raise DafFormatError(f"too large ({status.st_size} bytes; at most {limit} expected): {what}\n"
                                 f"at: {os.fspath(path)}", daf_name=daf_name)
        parts = []
        left = status.st_size
        while left > 0:
            part = os.read(fd, min(left, 1 << 30))
            if not part:
                break  # (cut short while we read: what was there is returned, for the caller's own checks)
            parts.append(part)
            left -= len(part)
        if os.read(fd, 1):
            raise DafStorageError(f"{what} grew while it was read\nat: {os.fspath(path)}", daf_name=daf_name)
        return b"".join(parts)
    finally:
        os.close(fd)
