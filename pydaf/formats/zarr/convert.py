"""Julia's ``ZarrConvert``: a FilesDaf directory into a ZarrDaf directory (``x.daf.zarr``) and back, hard-linking
every raw numeric file instead of copying it (both formats store a flat numeric array as the same raw little-endian
bytes), and copying the rest through the API. Stricter than Julia: nothing is written outside the destination, which
is built aside and renamed into place; the source is only read.

Design: docs/design/conversions.md ("FilesDaf ⇄ ZarrDaf directories").

Example:
    >>> import os, tempfile, pydaf
    >>> folder = tempfile.mkdtemp()
    >>> source = pydaf.FilesDaf(os.path.join(folder, "cells.daf"), "w").add_axis("cell", ["A", "B"])
    >>> _ = source.set_vector("cell", "age", [3.5, 4.5])
    >>> files_to_zarr(files_path=os.path.join(folder, "cells.daf"), zarr_path=os.path.join(folder, "cells.daf.zarr"),
    ...               progress=False)
    >>> pydaf.ZarrDaf(os.path.join(folder, "cells.daf.zarr")).get_vector("cell", "age").tolist()
    [3.5, 4.5]
    >>> os.stat(os.path.join(folder, "cells.daf", "vectors", "cell", "age.data")).st_nlink
    2
"""

from __future__ import annotations

import errno
import gc
import mmap
import os
import shutil
import stat
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..._os.exchange import exchange_paths
from ...abc.format import StoredMatrix, StoredVector
from ...core.readers import DafReader
from ...core.writers import DafWriter
from ...errors import DafError, DafExistsError, DafFormatError, DafNotDafError, DafStorageError
from ...sparse import SparseMatrixCSC, SparseVector
from ...storage_types import STRING_DTYPE, julia_name
from ..files.format import FilesDaf
from ..files.layout import dense_json, sparse_json
from .format import ZarrDaf, ZarrFormat, array_metadata, split_zarr_path

__all__ = ["convert_linked", "files_to_zarr", "is_linkable_pair", "zarr_to_files"]

_ZARR_GROUP = b'{"node_type":"group","zarr_format":3}'  # (what Zarr.jl writes for a group, as ZarrDaf does)
_LINK_FAILURES = (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP)


def files_to_zarr(*, files_path: str | os.PathLike, zarr_path: str | os.PathLike, progress: bool = True) -> None:
    """Convert the FilesDaf directory ``files_path`` into a new ZarrDaf directory ``zarr_path`` (``x.daf.zarr``; an
    existing path is refused), hard-linking its numeric files (see the module docstring).

    Example:
        >>> import os, tempfile, pydaf
        >>> folder = tempfile.mkdtemp()
        >>> _ = pydaf.FilesDaf(os.path.join(folder, "a.daf"), "w")
        >>> files_to_zarr(files_path=os.path.join(folder, "a.daf"),  # doctest: +ELLIPSIS
        ...               zarr_path=os.path.join(folder, "a.daf.zarr.zip"))
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: can't convert into a zip-backed ZarrDaf: ...a.daf.zarr.zip
    """
    destination = _zarr_directory(zarr_path, "into")
    _require_absent(destination)
    source = FilesDaf(os.fspath(files_path), "r")
    build_linked(source, os.fspath(files_path), destination, progress=progress)


def zarr_to_files(*, zarr_path: str | os.PathLike, files_path: str | os.PathLike, progress: bool = True) -> None:
    """Convert the ZarrDaf directory ``zarr_path`` (``x.daf.zarr``) into a new FilesDaf directory ``files_path`` (an
    existing path is refused), hard-linking its single-chunk numeric arrays (see the module docstring).

    Example:
        >>> import os, tempfile, pydaf
        >>> folder = tempfile.mkdtemp()
        >>> _ = pydaf.ZarrDaf(os.path.join(folder, "a.daf.zarr"), "w").set_scalar("n", 1)
        >>> zarr_to_files(zarr_path=os.path.join(folder, "a.daf.zarr"), files_path=os.path.join(folder, "a.daf"),
        ...               progress=False)
        >>> pydaf.FilesDaf(os.path.join(folder, "a.daf")).get_scalar("n")
        np.int64(1)
    """
    source_path = _zarr_directory(zarr_path, "from")
    destination = os.fspath(files_path)
    _require_absent(destination)
    source = ZarrDaf(source_path, "r")
    build_linked(source, source_path, destination, progress=progress)


def convert_linked(source: str | os.PathLike, destination: str | os.PathLike, *, progress: bool = True) -> None:
    """``pydaf convert`` between a FilesDaf directory and a ZarrDaf directory (:func:`is_linkable_pair`): as
    :func:`files_to_zarr` / :func:`zarr_to_files`, except that an existing destination is replaced if it is a data set
    of its format (or an empty directory); anything else there is refused before anything is written.

    Example:
        >>> import os, tempfile, pydaf
        >>> folder = tempfile.mkdtemp()
        >>> _ = pydaf.ZarrDaf(os.path.join(folder, "a.daf.zarr"), "w").set_scalar("n", 1)
        >>> _ = pydaf.FilesDaf(os.path.join(folder, "b.daf"), "w").set_scalar("n", 2)
        >>> convert_linked(os.path.join(folder, "a.daf.zarr"), os.path.join(folder, "b.daf"), progress=False)
        >>> pydaf.FilesDaf(os.path.join(folder, "b.daf")).get_scalar("n")
        np.int64(1)
    """
    source_path, destination_path = os.fspath(source), os.fspath(destination)
    to_zarr = _directory_kind(destination_path) == "zarr"
    if to_zarr:
        destination_path = _zarr_directory(destination_path, "into")
    else:
        source_path = _zarr_directory(source_path, "from")
    if os.path.lexists(destination_path) and not (os.path.isdir(destination_path) and
                                                  not os.listdir(destination_path)):
        try:
            (ZarrDaf if to_zarr else FilesDaf)(destination_path, "r").format.format_close()
        except DafError as error:
            raise DafNotDafError(f"not a daf data set: {destination_path}\n(it is not a "
                                 f"{'ZarrDaf' if to_zarr else 'FilesDaf'} data set: {str(error).splitlines()[0]}; "
                                 "a conversion only replaces a Daf data set, to keep anything else safe: remove it "
                                 "or choose another destination)") from None
    source_daf = (FilesDaf if to_zarr else ZarrDaf)(source_path, "r")
    build_linked(source_daf, source_path, destination_path, progress=progress, replace=True)


def is_linkable_pair(source: str | os.PathLike, destination: str | os.PathLike) -> bool:
    """Whether a conversion from ``source`` to ``destination`` (paths as :func:`~pydaf.open_daf` takes them) is
    between a FilesDaf directory and a ZarrDaf directory, which :func:`build_linked` converts by hard links.

    Example:
        >>> is_linkable_pair("a.daf", "a.daf.zarr"), is_linkable_pair("a.daf.zarr", "a.daf.zip")
        (True, False)
    """
    kinds = [_directory_kind(os.fspath(path)) for path in (source, destination)]
    return None not in kinds and kinds[0] != kinds[1]


def _directory_kind(path: str) -> str | None:
    """``"zarr"`` for a ZarrDaf directory path, ``"files"`` for a FilesDaf one, else ``None``."""
    if path.rstrip("/").endswith(".daf.zarr") and "#" not in path:
        return "zarr"
    if "#" in path or "://" in path or path.endswith((".zip", ".h5df", ".h5ad", ".h5dfs")) or ".h5dfs#" in path or (
            os.path.lexists(path) and not os.path.isdir(path)):
        return None
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "daf.json")) and os.listdir(path):
        return None  # (not a FilesDaf directory: another format's)
    return "files"


def _zarr_directory(path: str | os.PathLike, direction: str) -> str:
    text = os.fspath(path)
    if text.startswith(("http://", "https://")):
        raise DafFormatError(f"can't convert {direction} a remote ZarrDaf over HTTP: {text}")
    if "#" in text or text.endswith(".zip"):
        raise DafFormatError(f"can't convert {direction} a zip-backed ZarrDaf: {text}")
    if not text.rstrip("/").endswith(".daf.zarr"):
        raise DafFormatError(f"ZarrDaf directory path must end with .daf.zarr: {text}")
    return split_zarr_path(text)[0]


def _require_absent(path: str) -> None:
    if os.path.lexists(path):
        raise DafExistsError(f"destination already exists: {path}")


def _hidden_sibling(path: str, suffix: str) -> str:
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}{suffix}")


def build_linked(source: DafReader, source_path: str, destination: str, *, progress: bool,
                 replace: bool = False) -> None:
    """Convert ``source`` (a FilesDaf or ZarrDaf directory data set open read-only at ``source_path``) into the other
    format at ``destination``, built in a hidden sibling and renamed into place when complete; with ``replace``, an
    existing destination (the caller checked it is a Daf data set) is replaced, else refused."""
    to_zarr = source.format.type_name == "FilesDaf"
    temporary = _hidden_sibling(destination, ".daf.zarr" if to_zarr else "")
    os.makedirs(os.path.dirname(os.path.abspath(destination)), exist_ok=True)
    try:
        writer: DafWriter = ZarrDaf(temporary, "w", name=source.name) if to_zarr else FilesDaf(
            temporary, "w", name=source.name)
        placer = _Placer(source, source_path, writer, temporary, to_zarr)
        placer.run(progress)
        _let_go(writer)
        # A writable open rebuilds the index (ZarrDaf's consolidated metadata, FilesDaf's metadata.json) from the
        # descriptors written beside the API.
        _let_go((ZarrDaf if to_zarr else FilesDaf)(temporary, "r+"))
        _place(temporary, destination, replace=replace)
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise


def _let_go(daf: DafReader) -> None:
    daf.format.format_close()
    del daf
    gc.collect()


def _place(temporary: str, destination: str, *, replace: bool) -> None:
    absolute = os.path.abspath(destination)
    if not os.path.lexists(absolute):
        os.rename(temporary, absolute)
        return
    if not replace:
        raise DafExistsError(f"destination already exists: {destination}")
    if exchange_paths(temporary, absolute):  # (one atomic swap: the old data set or the new one at every instant)
        shutil.rmtree(temporary, ignore_errors=True)
        return
    old = _hidden_sibling(absolute, ".old")  # (put back by the next conversion if a kill comes before the new one)
    os.rename(absolute, old)
    os.rename(temporary, absolute)
    shutil.rmtree(old, ignore_errors=True)


def _is_mapped(array: object) -> bool:
    """Whether an array is (a view of) a memory map of its file, so the file holds exactly its bytes."""
    while array is not None and not isinstance(array, mmap.mmap):
        array = array.obj if isinstance(array, memoryview) else getattr(array, "base", None)
    return isinstance(array, mmap.mmap)


@dataclass
class _Component:
    """One raw file of a numeric property: the values mapped from it and its name in each layout."""

    values: np.ndarray
    files_suffix: str  # FilesDaf: <name><suffix>
    zarr_key: str  # ZarrDaf: <node>/<key>
    shape: tuple[int, ...]  # the Zarr (C-order) shape


class _Placer:
    """Writes every property of the source into the destination: linked where it can be, else through the API."""

    def __init__(self, source: DafReader, source_path: str, writer: DafWriter, root: str, to_zarr: bool) -> None:
        self.source = source
        self.source_root = source_path
        self.writer = writer
        self.root = root
        self.to_zarr = to_zarr

    def run(self, progress: bool) -> None:
        source = self.source
        for name in sorted(source.scalars_set()):
            self.writer.set_scalar(name, source.get_scalar(name))
        axes = sorted(source.axes_set())
        for axis in axes:
            self.writer.add_axis(axis, source.axis_vector(axis))
        tasks: list[Callable[[], None]] = []
        for axis in axes:
            tasks += [self._vector_task(axis, name) for name in sorted(source.vectors_set(axis))]
        for rows_axis in axes:
            for columns_axis in axes:
                tasks += [self._matrix_task(rows_axis, columns_axis, name)
                          for name in sorted(source.matrices_set(rows_axis, columns_axis, relayout=False))]
        from tqdm.auto import tqdm  # (tqdm.auto imports asyncio: ~25 ms of every `import pydaf`)

        with tqdm(total=len(tasks), desc="convert", unit="property", disable=not progress, leave=False) as bar:
            for task in tasks:
                task()
                bar.update(1)

    def _vector_task(self, axis: str, name: str) -> Callable[[], None]:
        def task() -> None:
            with self.source.read_lock():
                stored, _ = self.source.format.format_get_vector(axis, name)
            vector = self.source.get_vector(axis, name)  # (the reader's checks of the values, before any link)
            parts = ("vectors", axis, name)
            if not self._link(parts, stored, (stored.shape[0],) if isinstance(stored, np.ndarray) else None):
                self.writer.set_vector(axis, name, vector)

        return task

    def _matrix_task(self, rows_axis: str, columns_axis: str, name: str) -> Callable[[], None]:
        def task() -> None:
            with self.source.read_lock():
                stored, _ = self.source.format.format_get_matrix(rows_axis, columns_axis, name)
            matrix = self.source.get_matrix(rows_axis, columns_axis, name, relayout=False)  # (the reader's checks)
            parts = ("matrices", rows_axis, columns_axis, name)
            shape = (stored.shape[1], stored.shape[0]) if isinstance(stored, np.ndarray) else None
            if not self._link(parts, stored, shape):
                self.writer.set_matrix(rows_axis, columns_axis, name, matrix, relayout=False)

        return task

    def _components(self, stored: StoredVector | StoredMatrix,
                    shape: tuple[int, ...] | None) -> list[_Component] | None:
        """The raw files of a numeric property, or ``None`` if it is not stored as mapped files of one type each (it
        is then copied through the API). An all-true Bool ``nzval`` that is not stored is left out."""
        if isinstance(stored, np.ndarray):
            if stored.dtype == STRING_DTYPE or not _is_mapped(stored) or shape is None:
                return None  # (strings, empty arrays and Zarr arrays not stored as one raw chunk)
            key = "c/0/0" if stored.ndim == 2 else "c/0"
            return [_Component(stored, ".data", key, shape)]
        if isinstance(stored, SparseVector):
            parts = [("nzind", stored.nzind), ("nzval", stored.nzval)]
        elif isinstance(stored, SparseMatrixCSC):
            parts = [("colptr", stored.colptr), ("rowval", stored.rowval), ("nzval", stored.nzval)]
        else:
            return None
        components = []
        for component, values in parts:
            if values.dtype == STRING_DTYPE:
                return None
            if component == "nzval" and values.dtype == np.bool_ and not _is_mapped(values) and values.all():
                continue  # (omitted in both layouts)
            if not _is_mapped(values) and values.size:
                return None
            components.append(_Component(values, f".{component}", f"{component}/c/0", (values.shape[0],)))
        return components

    def _link(self, parts: tuple[str, ...], stored: StoredVector | StoredMatrix, shape: tuple[int, ...] | None) -> bool:
        components = self._components(stored, shape)
        if components is None:
            return False
        relative = os.path.join(*parts)
        files_root, zarr_root = (self.source_root, self.root) if self.to_zarr else (self.root, self.source_root)
        files_base, node = os.path.join(files_root, relative), os.path.join(zarr_root, relative)
        if not self.to_zarr:  # (where the source read it: the backup of an overwrite a killed writer left, perhaps)
            source_format = self.source.format
            assert isinstance(source_format, ZarrFormat)
            node = source_format.located_path("/".join(parts))
        for component in components:
            files_path, zarr_path = files_base + component.files_suffix, os.path.join(node, component.zarr_key)
            if self.to_zarr:
                self._link_file(files_path, component.values, zarr_path)
                metadata = os.path.join(node, component.zarr_key.partition("c/")[0], "zarr.json")
                _write(metadata, array_metadata(component.values.dtype, component.shape).encode())
            else:
                self._link_file(zarr_path, component.values, files_path)
        if isinstance(stored, np.ndarray):
            descriptor = dense_json(julia_name(stored.dtype))
        else:
            descriptor = sparse_json([(component.files_suffix[1:], julia_name(component.values.dtype),
                                       component.values.shape[0]) for component in components])
            if self.to_zarr:
                _write(os.path.join(node, "zarr.json"), _ZARR_GROUP)
        if not self.to_zarr:
            _write(files_base + ".json", (descriptor + "\n").encode())  # (last: what makes the property exist)
        return True

    def _link_file(self, source: str, values: np.ndarray, target: str) -> None:
        """Hard-link ``source`` (a regular file holding exactly ``values``) as ``target``; copy it if it can't be."""
        status = os.lstat(source)
        if not stat.S_ISREG(status.st_mode) or status.st_size != values.nbytes:
            raise DafFormatError(f"the file: {source}\nis not a regular file of {values.nbytes} bytes (it changed "
                                 "while it was converted, or it is a link)")
        os.makedirs(os.path.dirname(target), exist_ok=True)
        if values.nbytes == 0:
            _write(target, b"")
            return
        try:
            os.link(source, target, follow_symlinks=False)
        except OSError as error:
            if error.errno not in _LINK_FAILURES:
                raise DafStorageError(f"can't link the file: {source}\nas: {target}\n({error})") from error
            shutil.copyfile(source, target, follow_symlinks=False)


def _write(path: str, data: bytes) -> None:
    with open(path, "xb") as handle:
        handle.write(data)
