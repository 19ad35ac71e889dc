"""dafpy's ``formats``: the functions that make or open data sets, each returning dafpy's wrapper of pydaf's data
set (a :class:`~pydaf.dafpy.DafWriter` when writable, else a :class:`~pydaf.dafpy.DafReadOnly`).

Example:
    >>> import tempfile
    >>> from pydaf.dafpy import DafReadOnly, DafWriter, files_daf, memory_daf
    >>> isinstance(memory_daf(name="example!"), DafWriter)
    True
    >>> folder = tempfile.mkdtemp()
    >>> files_daf(folder + "/cells", "w", name="cells!").set_scalar("version", 1).name
    'cells!'
    >>> isinstance(files_daf(folder + "/cells"), DafReadOnly)
    True
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from ..composition.chains import chain_reader as pydaf_chain_reader
from ..composition.chains import chain_writer as pydaf_chain_writer
from ..composition.complete import complete_daf as pydaf_complete_daf
from ..formats.files import FilesDaf
from ..formats.h5df import H5df
from ..formats.http import HttpDaf
from ..formats.memory import MemoryDaf
from ..formats.zarr import ZarrDaf
from ..formats.zarr import files_to_zarr as pydaf_files_to_zarr
from ..formats.zarr import zarr_to_files as pydaf_zarr_to_files
from ..open import open_daf as pydaf_open_daf
from .data import DafReader, DafReadOnly, DafWriter, unwrap, wrap
from .julia_import import _given

__all__ = [
    "chain_reader",
    "chain_writer",
    "complete_daf",
    "files_daf",
    "files_to_zarr",
    "h5df",
    "http_daf",
    "memory_daf",
    "open_daf",
    "zarr_daf",
    "zarr_to_files",
]


def complete_daf(path: str | os.PathLike, mode: str = "r", *, name: str | None = None) -> DafReadOnly | DafWriter:
    """Open a data set with the chain of base data sets it records (pydaf's :func:`pydaf.complete_daf`)."""
    return wrap(pydaf_complete_daf(path, mode, **_given(name=name)))


def open_daf(path: str | os.PathLike, mode: str = "r", *, name: str | None = None) -> DafReadOnly | DafWriter:
    """Open a data set in the format its path names (``.h5df``, ``.daf.zarr``, ``.daf.zip``..., else files)."""
    return wrap(pydaf_open_daf(path, mode, **_given(name=name)))


def memory_daf(daf: MemoryDaf | None = None, *, name: str = "memory") -> DafWriter:
    """A new in-memory data set (or dafpy's wrapper of a given pydaf ``MemoryDaf``)."""
    return DafWriter(MemoryDaf(name=name) if daf is None else daf)


def files_daf(path: str | os.PathLike, mode: str = "r", *, name: str | None = None) -> DafReadOnly | DafWriter:
    """A data set in a directory of files (Julia's ``FilesDaf``)."""
    return wrap(FilesDaf(path, mode, **_given(name=name)))


def h5df(root: Any, mode: str = "r", *, name: str | None = None) -> DafReadOnly | DafWriter:
    """A data set in an HDF5 file, or a group of one: a path (``x.h5df``, ``x.h5dfs#/group``) or an open ``h5py``
    file or group (which dafpy can't take: pydaf speaks Python)."""
    return wrap(H5df(root, mode, **_given(name=name)))


def zarr_daf(path: str | os.PathLike, mode: str = "r", *, name: str | None = None) -> DafReadOnly | DafWriter:
    """A data set in a Zarr directory (``x.daf.zarr``) or ZIP archive (``x.daf.zarr.zip``, ``x.dafs.zarr.zip#/g``)."""
    return wrap(ZarrDaf(path, mode, **_given(name=name)))


def http_daf(url: str, *, name: str | None = None) -> DafReadOnly:
    """A read-only data set served over HTTP (pydaf's :class:`~pydaf.HttpDaf`): a FilesDaf directory exposed by any
    static web server.

    Example:
        >>> http_daf("ftp://example.com/cells")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafPathError: not an HTTP(S) URL: ftp://example.com/cells
        (HttpDaf reads data sets served at http:// or https:// URLs)
    """
    return DafReadOnly(HttpDaf(url, **_given(name=name)))


def files_to_zarr(*, files_path: str | os.PathLike, zarr_path: str | os.PathLike) -> None:
    """Convert a files data set into a new ``.daf.zarr`` directory by hard links (same file system)."""
    pydaf_files_to_zarr(files_path=files_path, zarr_path=zarr_path, progress=False)


def zarr_to_files(*, zarr_path: str | os.PathLike, files_path: str | os.PathLike) -> None:
    """Convert a ``.daf.zarr`` directory into a new files data set by hard links (same file system)."""
    pydaf_zarr_to_files(zarr_path=zarr_path, files_path=files_path, progress=False)


def chain_reader(dsets: Sequence[DafReader], *, name: str | None = None) -> DafReadOnly:
    """A read-only chain of data sets: later ones override earlier ones."""
    return DafReadOnly(pydaf_chain_reader([unwrap(dset) for dset in dsets], **_given(name=name)))


def chain_writer(dsets: Sequence[DafReader], *, name: str | None = None) -> DafWriter:
    """A chain of data sets whose last one (a writer) takes the writes."""
    return DafWriter(pydaf_chain_writer([unwrap(dset) for dset in dsets], **_given(name=name)))
