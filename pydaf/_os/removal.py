"""Removing a folder or file a data set no longer refers to (a retired reorder backup): its names go at once, the
blocks of its files are freed on a background thread.

A file's blocks, and its pages in the page cache, are freed when its last name and its last descriptor are gone: on
ext4, for the 1.24 GB of clean cached files a reorder's backup holds, that took 0.3 s of a 0.9 s reorder. So
:func:`remove_freeing_later` first opens (``O_PATH``) each large file that the removal frees, removes them (the
unlinks then only drop names), and closes those descriptors on a daemon thread: the call returns with the names
gone, and the space comes back a moment later. Nothing can be left behind: a process that exits or is killed first
has its descriptors closed by the kernel, which frees the blocks then. A child forked meanwhile closes its copies at
once (so it does not hold the space).

Example:
    >>> import os, tempfile
    >>> root = tempfile.mkdtemp()
    >>> os.makedirs(os.path.join(root, "old", "matrices"))
    >>> with open(os.path.join(root, "old", "matrices", "x.data"), "wb") as file:
    ...     _ = file.write(bytes(2 << 20))
    >>> folder = os.open(root, os.O_RDONLY)
    >>> remove_freeing_later(folder, "old"), os.listdir(root)
    (True, [])
    >>> wait_for_freeing(); os.close(folder)
"""

from __future__ import annotations

import os
import shutil
import stat
import threading
from contextlib import suppress

__all__ = ["DEFERRED_MIN_BYTES", "close_later", "hold_to_free_later", "remove_freeing_later", "wait_for_freeing"]

#: Files smaller than this are freed by their unlink, as usual (it costs next to nothing).
DEFERRED_MIN_BYTES = 1 << 20

#: The most descriptors one removal holds (well below the usual limit of 1,024 open files).
_MAX_HELD = 256

_lock = threading.Lock()
_held: set[int] = set()  # (descriptors waiting to be closed)
_freeing: list[threading.Thread] = []


def remove_freeing_later(folder: int | None, name: str) -> bool:
    """Remove the folder or file ``name`` of the folder descriptor ``folder`` (a path if ``folder`` is None; links
    are removed, never followed), freeing the blocks of its large files on a background thread (see the module's
    docstring). Returns whether there was something to remove. An ``OSError`` of the removal propagates."""
    try:
        status = os.stat(name, dir_fd=folder, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = _hold_files(folder, name, status)
    try:
        if stat.S_ISDIR(status.st_mode):
            shutil.rmtree(name, dir_fd=folder)  # (the descriptor-based rmtree, which never follows links)
        else:
            with suppress(FileNotFoundError):
                os.unlink(name, dir_fd=folder)
    finally:
        close_later(held)
    return True


def hold_to_free_later(path: str) -> list[int]:
    """Before a rename replaces the file ``path`` (or anything else drops its last name): descriptors that keep its
    blocks until :func:`close_later` closes them on the background thread (none if it is small, has other links, or
    can't be opened).

    Example:
        >>> import tempfile
        >>> path = tempfile.mkstemp()[1]
        >>> held = hold_to_free_later(path); os.remove(path); close_later(held); wait_for_freeing()
    """
    try:
        return _hold_files(None, path, os.stat(path, follow_symlinks=False))
    except OSError:
        return []


def close_later(held: list[int]) -> None:
    """Close descriptors of :func:`hold_to_free_later` (or of a removal) on the background thread."""
    if held:
        thread = threading.Thread(target=_close, args=(held,), name="pydaf-freeing", daemon=True)
        with _lock:
            _freeing[:] = [*(alive for alive in _freeing if alive.is_alive()), thread]
        thread.start()


def wait_for_freeing() -> None:
    """Wait until the files removed so far are freed (tests, and callers that measure free space).

    Example:
        >>> wait_for_freeing()
    """
    with _lock:
        threads = list(_freeing)
    for thread in threads:
        thread.join()


def _hold_files(folder: int | None, name: str, status: os.stat_result) -> list[int]:
    """Descriptors of the regular files at or under ``name`` that removing it frees (one link, large enough)."""
    held: list[int] = []

    def hold(file: str, directory: int | None, status: os.stat_result) -> None:
        if stat.S_ISREG(status.st_mode) and status.st_nlink == 1 and status.st_size >= DEFERRED_MIN_BYTES:
            fd = os.open(file, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
            with _lock:
                _held.add(fd)
            held.append(fd)

    with suppress(OSError):  # (holding is an optimization: what can't be held is freed by its unlink)
        if not stat.S_ISDIR(status.st_mode):
            hold(name, folder, status)
            return held
        for _, _, files, directory in os.fwalk(name, dir_fd=folder, follow_symlinks=False):
            for file in files:
                if len(held) >= _MAX_HELD:
                    return held
                hold(file, directory, os.stat(file, dir_fd=directory, follow_symlinks=False))
    return held


def _close(held: list[int]) -> None:
    for fd in held:
        with _lock:  # (closed and dropped together: a child forked meanwhile closes exactly what is still held)
            os.close(fd)
            _held.discard(fd)


def _close_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # (the parent's may have been held by its freeing thread, which the child lacks)
    for fd in _held:
        with suppress(OSError):
            os.close(fd)
    _held.clear()
    _freeing.clear()


os.register_at_fork(after_in_child=_close_in_child)
