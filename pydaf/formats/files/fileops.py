"""The file operations of a FilesDaf directory, each relative to the descriptor of a folder and never following links:
what its writes (:mod:`.format`) and its reorders (:mod:`.reorder`) both do with files."""

from __future__ import annotations

import errno
import os
import secrets
import shutil
import stat
from contextlib import suppress

import numpy as np

from .layout import MATRIX_SUFFIXES, VECTOR_SUFFIXES

CREATE_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

#: Bytes per ``write`` call.
WRITE_CHUNK = 1 << 28

#: The suffixes of the files of vectors and matrices, longest first.
PROPERTY_SUFFIXES = tuple(sorted(set(VECTOR_SUFFIXES + MATRIX_SUFFIXES), key=len, reverse=True))

__all__ = ["CREATE_FLAGS", "PROPERTY_SUFFIXES", "WRITE_CHUNK", "create_new", "lstat", "remove_entry", "replace",
           "split_suffix", "temporary_name", "unlink", "write_new"]


def temporary_name(file: str) -> str:
    """An unpredictable hidden name for a new file next to ``file``: one a FilesDaf writable open drops
    (``.<file>.tmp-<hex>``), and Julia ignores (it ends with neither ``.json`` nor ``.txt``).

    Example:
        >>> temporary_name("age.data").startswith(".age.data.tmp-")
        True
    """
    token = secrets.token_hex(8)
    name = f".{file}.tmp-{token}"
    return name if len(os.fsencode(name)) <= 255 else f".daf.tmp-{token}"


def lstat(folder: int, name: str) -> os.stat_result | None:
    """The status of ``name`` in ``folder`` (not following a link), ``None`` if there is nothing (or the name is too
    long to be there)."""
    try:
        return os.stat(name, dir_fd=folder, follow_symlinks=False)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        if error.errno == errno.ENAMETOOLONG:
            return None
        raise


def unlink(folder: int, name: str) -> None:
    """Remove the file or link ``name`` if it is there."""
    with suppress(FileNotFoundError):
        os.unlink(name, dir_fd=folder)


def replace(folder: int, source: str, target: str) -> None:
    """Rename ``source`` over ``target``, both in ``folder``."""
    os.replace(source, target, src_dir_fd=folder, dst_dir_fd=folder)


def remove_entry(folder: int, name: str) -> None:
    """Remove a file, link or whole folder (links inside are removed, never followed)."""
    status = lstat(folder, name)
    if status is None:
        return
    if stat.S_ISDIR(status.st_mode):
        shutil.rmtree(name, dir_fd=folder)  # the fd-based rmtree, which never follows links
    else:
        unlink(folder, name)


def create_new(folder: int, file: str) -> tuple[str, int]:
    """A new hidden temporary file next to ``file``, created exclusively (never an existing file or link): its name
    and descriptor (open for writing).

    Example:
        >>> import tempfile
        >>> folder = os.open(tempfile.mkdtemp(), os.O_RDONLY)
        >>> name, fd = create_new(folder, "x.data")
        >>> os.close(fd); name.startswith(".x.data.tmp-"), os.listdir(folder) == [name]
        (True, True)
    """
    while True:
        name = temporary_name(file)
        try:
            return name, os.open(name, CREATE_FLAGS, 0o644, dir_fd=folder)
        except FileExistsError:
            continue


def write_new(folder: int, file: str, data: bytes | np.ndarray) -> str:
    """Write a new hidden temporary file next to ``file``; returns its name (removed again if the write fails)."""
    name, fd = create_new(folder, file)
    try:
        if isinstance(data, np.ndarray):
            view = np.ascontiguousarray(data).reshape(-1).view(np.uint8).data
        else:
            view = memoryview(data)
        written = 0
        while written < len(view):
            written += os.write(fd, view[written:written + WRITE_CHUNK])
    except BaseException:
        unlink(folder, name)
        raise
    finally:
        os.close(fd)
    return name


def split_suffix(file: str) -> tuple[str, str] | None:
    """``(name, suffix)`` of a property's file, or ``None`` if it has no property suffix.

    Example:
        >>> split_suffix("age.nzval"), split_suffix("notes")
        (('age', '.nzval'), None)
    """
    for suffix in PROPERTY_SUFFIXES:
        if file.endswith(suffix) and len(file) > len(suffix):
            return file[:-len(suffix)], suffix
    return None
