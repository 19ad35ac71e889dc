"""The backends every test runs on, listed once (:data:`BACKENDS`), with how to create, reopen and inspect each
(:class:`pydaf.testing.DafBackend` hooks), and the fixture that parametrises tests over them.

A test that should hold on every backend takes the ``backend`` fixture and calls ``backend.new(tmp_path, name)``
(``backend.reopen(daf)`` to read it back, ``backend.path(tmp_path)`` for a path to open); a fixture that must vary
independently of ``backend`` uses ``params=BACKENDS, ids=str`` itself. ``test_conformance.py`` runs the conformance
suite on each backend. A backend added here is run by all of them.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest

import pydaf
from pydaf import SparseMatrixCSC, SparseVector
from pydaf.testing import DafBackend


def _new_path(directory: Path, suffix: str) -> str:
    """A path under ``directory`` that does not exist yet."""
    return next(str(path) for path in (directory / f"daf{index}{suffix}" for index in itertools.count())
                if not path.exists())


def _comparable(value: Any) -> Any:
    """A stored value in a form that compares equal exactly when the stored data does (type, shape and bytes)."""
    if isinstance(value, SparseVector):
        return ("SparseVector", value.length, _comparable(value.nzind), _comparable(value.nzval))
    if isinstance(value, SparseMatrixCSC):
        return ("SparseMatrixCSC", value.shape, *(_comparable(part) for part in (value.colptr, value.rowval,
                                                                                  value.nzval)))
    if isinstance(value, np.ndarray):
        body = value.tolist() if value.dtype.kind == "O" else np.asfortranarray(value).tobytes(order="A")
        return (value.dtype.str, value.shape, body)
    return (type(value).__name__, value.tolist() if isinstance(value, np.generic) else value)


class MemoryBackend(DafBackend):
    name = "memory"

    def new(self, directory: Path, name: str) -> pydaf.DafWriter:
        return pydaf.MemoryDaf(name=name)

    def snapshot(self, daf: pydaf.DafReader) -> Mapping[str, Any]:
        """The dictionaries of the :class:`~pydaf.formats.memory.MemoryFormat` themselves."""
        storage = daf.format
        items: dict[str, Any] = {f"scalars/{name}": _comparable(value) for name, value in storage.scalars.items()}
        items.update({f"axes/{axis}": _comparable(entries) for axis, entries in storage.axes.items()})
        for axis, vectors in storage.vectors.items():
            items.update({f"vectors/{axis}/{name}": _comparable(vector) for name, vector in vectors.items()})
        for (rows_axis, columns_axis), matrices in storage.matrices.items():
            items.update({f"matrices/{rows_axis}/{columns_axis}/{name}": _comparable(matrix)
                          for name, matrix in matrices.items()})
        return items


class H5dfBackend(DafBackend):
    name = "h5df"

    def path(self, directory: Path) -> str:
        return _new_path(directory, ".h5df")

    def new(self, directory: Path, name: str) -> pydaf.DafWriter:
        return pydaf.H5df(self.path(directory), "w", name=name)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        """Close the HDF5 file and open it again, so everything is read back from disk."""
        path = daf.complete_path()
        daf.format.file.close()
        return pydaf.H5df(path, mode, name=daf.name)

    def snapshot(self, daf: pydaf.DafReader) -> Mapping[str, Any]:
        """Every group, dataset and attribute under the data set's HDF5 group, read with h5py (not through maps)."""
        root = daf.format.root
        items: dict[str, Any] = {f"@{key}": repr(value) for key, value in root.attrs.items()}

        def visit(name: str, node: h5py.Group | h5py.Dataset) -> None:
            if isinstance(node, h5py.Dataset):
                items[name] = (node.dtype.str, node.shape, _comparable(np.asarray(node[()])))
            else:
                items[name] = "group"
            items.update({f"{name}@{key}": repr(value) for key, value in node.attrs.items()})

        root.visititems(visit)
        return items


class H5dfGroupBackend(H5dfBackend):
    """A data set in a group of an ``.h5dfs`` file that holds another data set, which must stay intact."""

    name = "h5df_group"

    def path(self, directory: Path) -> str:
        return f"{_new_path(directory, '.h5dfs')}#/nested/group"

    def new(self, directory: Path, name: str) -> pydaf.DafWriter:
        path = self.path(directory)
        pydaf.H5df(path.replace("#/nested/group", "#/other"), "w").set_scalar("other", 1)
        return pydaf.H5df(path, "w", name=name)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        reopened = super().reopen(daf, mode)
        assert pydaf.H5df(str(reopened.complete_path()).replace("#/nested/group", "#/other"),
                          "r").get_scalar("other") == 1
        return reopened


class FilesBackend(DafBackend):
    name = "files"

    def path(self, directory: Path) -> str:
        return _new_path(directory, ".daf")

    def new(self, directory: Path, name: str) -> pydaf.DafWriter:
        return pydaf.FilesDaf(self.path(directory), "w", name=name)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        """Open the directory again, so everything is read back from its files."""
        return pydaf.FilesDaf(daf.complete_path(), mode, name=daf.name)

    def snapshot(self, daf: pydaf.DafReader) -> Mapping[str, Any]:
        """Every directory and file (hidden ones included), ``.json`` files parsed (their key order is free)."""
        return _files_snapshot(daf.complete_path())


def _files_snapshot(root: str) -> dict[str, Any]:
    """Every directory and file under ``root`` (hidden ones included), ``.json`` files parsed (key order is free)."""
    items: dict[str, Any] = {}
    for folder, folders, files in os.walk(root):
        relative = os.path.relpath(folder, root)
        items.update({os.path.join(relative, name): "directory" for name in folders})
        for name in files:
            with open(os.path.join(folder, name), "rb") as handle:
                content = handle.read()
            items[os.path.join(relative, name)] = json.loads(content) if name.endswith(".json") else content
    return items


class ZarrBackend(DafBackend):
    """A ZarrDaf directory (``x.daf.zarr``)."""

    name = "zarr"
    daf_type: Any = pydaf.ZarrDaf
    suffix = ".daf.zarr"

    def path(self, directory: Path) -> str:
        return _new_path(directory, self.suffix)

    def new(self, directory: Path, name: str) -> pydaf.DafWriter:
        return self.daf_type(self.path(directory), "w", name=name)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        """Open the directory (or archive) again, after releasing this handle's hold of it."""
        daf.format.format_close()
        return self.daf_type(daf.complete_path(), mode, name=daf.name)

    def snapshot(self, daf: pydaf.DafReader) -> Mapping[str, Any]:
        """Every directory and file (hidden ones included), ``zarr.json`` files parsed."""
        return _files_snapshot(daf.complete_path())


class ZarrZipBackend(ZarrBackend):
    """A ZarrDaf ZIP archive (``x.daf.zarr.zip``): append-only."""

    name = "zarr_zip"
    suffix = ".daf.zarr.zip"
    json_suffix = "zarr.json"  # the entries that snapshots compare parsed

    def snapshot(self, daf: pydaf.DafReader) -> Mapping[str, Any]:
        """Every entry of the archive as Python's ``zipfile`` reads it (CRC-checked, ``zarr.json`` parsed), the
        archive's own bytes (a digest), and any file beside it that is not another archive (a leftover)."""
        archive = daf.complete_path().split("#/")[0]
        with zipfile.ZipFile(archive) as opened:
            assert opened.testzip() is None
            items: dict[str, Any] = {
                info.filename: json.loads(opened.read(info)) if info.filename.endswith(self.json_suffix)
                else opened.read(info) for info in opened.infolist()}
        with open(archive, "rb") as handle:
            items["<archive>"] = hashlib.sha256(handle.read()).hexdigest()
        folder = os.path.dirname(archive)
        items["<beside>"] = sorted(name for name in os.listdir(folder) if not name.endswith(".zip"))
        return items


class ZarrZipGroupBackend(ZarrZipBackend):
    """A data set in a group of a ``.dafs.zarr.zip`` archive that holds another data set, which must stay intact."""

    name = "zarr_zip_group"
    suffix = ".dafs.zarr.zip"

    def path(self, directory: Path) -> None:
        """None: mode ``w`` is refused for a group of an archive (append-only); ``test_zarr.py`` and
        ``test_zipdaf.py`` open these paths."""
        return None

    def new(self, directory: Path, name: str) -> pydaf.DafWriter:
        path = f"{_new_path(directory, self.suffix)}#/nested/group"
        other = self.daf_type(path.replace("#/nested/group", "#/other"), "w+")
        other.set_scalar("other", 1)
        other.format.format_close()
        return self.daf_type(path, "w+", name=name)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        reopened = super().reopen(daf, mode)
        other = self.daf_type(str(reopened.complete_path()).replace("#/nested/group", "#/other"), "r")
        assert other.get_scalar("other") == 1
        other.base.format.format_close()
        return reopened


class ZipBackend(ZarrZipBackend):
    """A ZipDaf archive (``x.daf.zip``): FilesDaf entries, append-only."""

    name = "zip"
    daf_type = pydaf.ZipDaf
    suffix = ".daf.zip"
    json_suffix = ".json"


class ZipGroupBackend(ZarrZipGroupBackend):
    """A data set in a group of a ``.dafs.zip`` archive that holds another data set, which must stay intact."""

    name = "zip_group"
    daf_type = pydaf.ZipDaf
    suffix = ".dafs.zip"
    json_suffix = ".json"


class ChainBackend(DafBackend):
    """A write chain over an empty memory base and a ``top`` member of another backend, which gets the writes."""

    def __init__(self, top: DafBackend) -> None:
        self.top = top
        self.name = "chain" if isinstance(top, MemoryBackend) else f"chain_over_{top.name}"

    def new(self, directory: Path, name: str) -> pydaf.DafWriter:
        return pydaf.chain_writer([pydaf.MemoryDaf(name="base!"), self.top.new(directory, "top!")], name=name)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        if not self.persistent:
            return super().reopen(daf, mode)
        base, top = daf.format.members
        chain = pydaf.chain_reader if mode == "r" else pydaf.chain_writer
        return chain([base, self.top.reopen(top, mode)], name=daf.name)

    def snapshot(self, daf: pydaf.DafReader) -> Mapping[str, Any]:
        base, top = daf.format.members
        return {**{f"base:{key}": value for key, value in MemoryBackend().snapshot(base).items()},
                **{f"top:{key}": value for key, value in self.top.snapshot(top).items()}}


MEMORY, H5DF, H5DF_GROUP, FILES = MemoryBackend(), H5dfBackend(), H5dfGroupBackend(), FilesBackend()
ZARR, ZARR_ZIP, ZARR_ZIP_GROUP = ZarrBackend(), ZarrZipBackend(), ZarrZipGroupBackend()
ZIP, ZIP_GROUP = ZipBackend(), ZipGroupBackend()
CHAIN = ChainBackend(MEMORY)

#: Every backend the tests run on.
BACKENDS: list[DafBackend] = [MEMORY, H5DF, H5DF_GROUP, FILES, ZARR, ZARR_ZIP, ZARR_ZIP_GROUP, ZIP, ZIP_GROUP, CHAIN]


@pytest.fixture(params=BACKENDS, ids=str)
def backend(request: pytest.FixtureRequest) -> DafBackend:
    """Each backend in turn."""
    return request.param
