"""The manifest (``pydaf.manifest``, ``pydaf manifest PATH``): its format, its hash checked against an independent
element-by-element implementation of the definition (the one ``julia/manifest.jl`` implements), and, on every backend
of ``conftest.BACKENDS`` (and ZarrDaf once it is registered), equal data hashing the same across stores and layouts
of storage (sparse or dense) while any change of value, type, shape, entry or layout shows."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
import pydaf.manifest
from pydaf import SparseMatrixCSC, SparseVector
from pydaf.formats.registry import guess_format, registered_formats
from pydaf.manifest import daf_manifest, manifest_differences, manifest_json, value_hash
from pydaf.testing import NUMBER_DTYPES, DafBackend, sample_values

from .conftest import BACKENDS

# The data every store is given.


def fill_sample(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    """Every kind of property: scalars of each type, dense and sparse vectors, mostly-empty strings (stored sparse on
    disk), matrices dense, sparse and of strings, in both layouts, in one layout, and square."""
    for dtype in NUMBER_DTYPES:
        daf.set_scalar(f"scalar_{np.dtype(dtype).name}", sample_values(dtype, (3,))[1])
    daf.set_scalar("text", "naïve – ✓").set_scalar("empty", "")
    daf.add_axis("cell", ["A", "B", "C", "D"]).add_axis("gene", ["X", "Y", "Zé"])
    for dtype in NUMBER_DTYPES:
        daf.set_vector("cell", f"dense_{np.dtype(dtype).name}", sample_values(dtype, (4,)))
    daf.set_vector("cell", "sparse_float32", SparseVector(4, np.array([2, 4], np.uint32),
                                                          np.array([1.5, -2.5], np.float32)))
    daf.set_vector("cell", "sparse_bool", SparseVector(4, np.array([1, 3], np.int64), np.array([True, True])))
    daf.set_vector("cell", "label", np.array(["a", "", "ü", "d"], dtype=object))
    daf.set_vector("cell", "mostly_empty", np.array(["", "", "", "x"], dtype=object))
    daf.set_matrix("cell", "gene", "dense", sample_values(np.float32, (4, 3)))
    daf.set_matrix("gene", "cell", "UMIs", sp.csc_matrix(sample_values(np.uint16, (3, 4))), relayout=False)
    daf.set_matrix("cell", "gene", "names", np.array([["a", "b", ""], ["", "", ""], ["c", "", "d"], ["", "", "e"]],
                                                     dtype=object), relayout=False)
    daf.set_matrix("cell", "cell", "edges", sp.csc_matrix(sample_values(np.float64, (4, 4), seed=1)))
    daf.set_matrix("gene", "gene", "mask", sample_values(np.bool_, (3, 3)))
    return daf


class RegisteredFormatBackend(DafBackend):
    """A format of the registry that ``conftest.BACKENDS`` does not list yet (ZarrDaf, while it is being added),
    created through the registry by the path suffix its paths take."""

    persistent = True

    def __init__(self, name: str, suffix: str) -> None:
        self.name, self.suffix = name, suffix

    def path(self, directory: Path) -> str:
        index = 0
        while (directory / f"daf{index}{self.suffix}").exists():
            index += 1
        return str(directory / f"daf{index}{self.suffix}")

    def new(self, directory: Path, name: str) -> pydaf.DafWriter:
        path = self.path(directory)
        entry = guess_format(path)
        assert entry.name == self.name, f"{path} opens as {entry.name}, not {self.name}"
        return entry.open(path, "w", name=name)

    def reopen(self, daf: pydaf.DafReader, mode: str = "r+") -> pydaf.DafReader:
        return guess_format(daf.complete_path()).open(daf.complete_path(), mode, name=daf.name)


def manifest_backends() -> list[DafBackend]:
    """``conftest.BACKENDS``, and ZarrDaf if it is registered but not there yet."""
    backends = list(BACKENDS)
    if "ZarrDaf" in {entry.name for entry in registered_formats()} and not any(
            "zarr" in backend.name.lower() for backend in backends):
        backends.append(RegisteredFormatBackend("ZarrDaf", ".daf.zarr"))
    return backends


@pytest.fixture(scope="module")
def reference_manifest() -> dict:
    return daf_manifest(fill_sample(pydaf.MemoryDaf(name="reference!")))


# The hash, element by element, as its definition says (independent of pydaf.manifest's vectorised streaming).

_STRUCT_FORMATS = {"Bool": "?", "Int8": "b", "Int16": "h", "Int32": "i", "Int64": "q", "UInt8": "B", "UInt16": "H",
                   "UInt32": "I", "UInt64": "Q", "Float32": "f", "Float64": "d"}


def reference_hash(kind: str, eltype: str, dims: tuple[int, ...], values: list) -> str:
    """The definition, literally: ``values`` are all the values (zeros included) in column-major order."""
    body = bytearray(f"daf-manifest-1 {kind} {eltype} {','.join(map(str, dims))}\n".encode("ascii"))
    if eltype == "String":
        for value in values:
            body += value.encode("utf-8") + b"\xff"
    elif kind == "scalar":
        body += struct.pack("<" + _STRUCT_FORMATS[eltype], values[0])
    else:
        for position, value in enumerate(values):
            if value != 0:
                body += struct.pack("<Q", position) + struct.pack("<" + _STRUCT_FORMATS[eltype], value)
    return hashlib.sha256(bytes(body)).hexdigest()


@pytest.mark.parametrize("dtype", NUMBER_DTYPES)
def test_vector_and_matrix_hashes_follow_the_definition(dtype):
    eltype = pydaf.storage_types.julia_name(np.dtype(dtype))
    vector = sample_values(dtype, (7,))
    assert value_hash("vector", vector) == reference_hash("vector", eltype, (7,), vector.tolist())
    matrix = sample_values(dtype, (3, 5), seed=2)
    column_major = matrix.reshape(-1, order="F").tolist()
    assert value_hash("matrix", matrix) == reference_hash("matrix", eltype, (3, 5), column_major)
    sparse = SparseMatrixCSC.from_scipy(sp.csc_matrix(matrix))
    assert value_hash("matrix", sparse) == reference_hash("matrix", eltype, (3, 5), column_major)
    scalar = vector[1]
    assert value_hash("scalar", scalar) == reference_hash("scalar", eltype, (), [scalar.item()])


def test_string_hashes_follow_the_definition():
    values = ["a", "", "ü ✓", "\x00"]
    assert value_hash("axis", np.array(values, dtype=object)) == reference_hash("axis", "String", (4,), values)
    assert value_hash("vector", np.array(values, dtype=object)) == reference_hash("vector", "String", (4,), values)
    matrix = np.array([["a", "b"], ["", "c"]], dtype=object)
    assert value_hash("matrix", matrix) == reference_hash("matrix", "String", (2, 2), ["a", "", "b", "c"])
    assert value_hash("scalar", "hé") == reference_hash("scalar", "String", (), ["hé"])
    # The separator keeps values apart: moving a character between neighbours changes the hash.
    assert value_hash("axis", np.array(["ab", "c"], dtype=object)) != value_hash("axis", np.array(["a", "bc"],
                                                                                                   dtype=object))


def test_zeros_nan_and_signs_of_zero():
    assert value_hash("vector", np.array([0.0, -0.0, 1.0])) == value_hash("vector", np.array([0.0, 0.0, 1.0]))
    assert value_hash("vector", np.array([np.nan, 0.0])) != value_hash("vector", np.zeros(2))
    explicit = SparseVector(3, np.array([1, 2], np.uint32), np.array([0.0, 5.0]))  # an explicitly stored zero
    assert value_hash("vector", explicit) == value_hash("vector", np.array([0.0, 5.0, 0.0]))


def test_type_and_shape_are_part_of_the_hash():
    same_bytes = np.array([1, 2], np.int32)
    assert value_hash("vector", same_bytes) != value_hash("vector", same_bytes.astype(np.uint32))
    assert value_hash("matrix", np.ones((2, 3))) != value_hash("matrix", np.ones((3, 2)))
    assert value_hash("vector", np.ones(6)) != value_hash("matrix", np.ones((2, 3)))


def test_streaming_in_chunks_hashes_the_same(monkeypatch):
    dense = sample_values(np.float64, (9, 11), seed=3)
    sparse = SparseMatrixCSC.from_scipy(sp.csc_matrix(dense))
    vector = sample_values(np.int16, (50,))
    strings = np.array([f"v{index}" if index % 3 else "" for index in range(20)], dtype=object)
    whole = [value_hash("matrix", dense), value_hash("matrix", sparse), value_hash("vector", vector),
             value_hash("vector", strings), value_hash("matrix", np.asfortranarray(dense)[:, ::2])]
    for chunk in (1, 2, 7):
        monkeypatch.setattr(pydaf.manifest, "CHUNK", chunk)
        assert [value_hash("matrix", dense), value_hash("matrix", sparse), value_hash("vector", vector),
                value_hash("vector", strings), value_hash("matrix", np.asfortranarray(dense)[:, ::2])] == whole
    assert whole[0] == whole[1]


def test_invalid_unicode_is_refused_naming_the_property():
    daf = pydaf.MemoryDaf(name="bad!").add_axis("cell", ["A"])
    daf.set_vector("cell", "label", np.array(["\ud800"], dtype=object))
    with pytest.raises(pydaf.DafValueError, match="invalid UTF-8 in the vector: label\nof the axis: cell"):
        daf_manifest(daf)


# The manifest.


def test_manifest_lists_every_property(reference_manifest):
    manifest = reference_manifest
    assert manifest["manifest"] == "daf-manifest" and manifest["version"] == 1 and manifest["name"] == "reference!"
    assert manifest["scalars"]["scalar_uint16"] == {"eltype": "UInt16", "value": 65535,
                                                    "hash": value_hash("scalar", np.uint16(65535))}
    assert manifest["scalars"]["text"]["value"] == "naïve – ✓" and manifest["scalars"]["empty"]["value"] == ""
    assert manifest["scalars"]["scalar_float32"]["value"] == repr(float(sample_values(np.float32, (3,))[1]))
    shown = daf_manifest(pydaf.MemoryDaf().set_scalar("nan", np.nan).set_scalar("inf", -np.inf))["scalars"]
    assert (shown["nan"]["value"], shown["inf"]["value"]) == ("NaN", "-Inf")
    assert manifest["axes"]["gene"] == {"length": 3, "hash": value_hash("axis", np.array(["X", "Y", "Zé"],
                                                                                           dtype=object))}
    vectors = manifest["vectors"]["cell"]
    assert set(vectors) == {f"dense_{np.dtype(dtype).name}" for dtype in NUMBER_DTYPES} | {
        "sparse_float32", "sparse_bool", "label", "mostly_empty"}
    assert vectors["sparse_float32"] == {"eltype": "Float32", "length": 4, "storage": "sparse", "nnz": 2,
                                         "hash": vectors["sparse_float32"]["hash"]}
    assert (vectors["label"]["storage"], vectors["label"]["nnz"]) == ("dense", 3)
    matrices = manifest["matrices"]
    assert set(matrices["cell"]["gene"]) == {"dense", "names"} and set(matrices["gene"]["cell"]) == {"dense", "UMIs"}
    assert set(matrices["cell"]["cell"]) == {"edges"} and set(matrices["gene"]["gene"]) == {"mask"}
    assert matrices["gene"]["cell"]["UMIs"]["shape"] == [3, 4] and matrices["gene"]["cell"]["UMIs"]["storage"] == \
        "sparse"
    assert matrices["cell"]["gene"]["dense"]["hash"] != matrices["gene"]["cell"]["dense"]["hash"]  # the transpose
    assert json.loads(manifest_json(manifest)) == manifest


@pytest.mark.parametrize("backend", manifest_backends(), ids=str)
def test_equal_data_in_every_store_has_the_same_manifest(backend, tmp_path, reference_manifest):
    daf = fill_sample(backend.new(tmp_path, "stored!"))
    reopened = backend.reopen(daf, "r")
    manifest = daf_manifest(reopened)
    assert manifest_differences(reference_manifest, manifest, storage=True) == []
    assert manifest["scalars"] == reference_manifest["scalars"]


def test_sparse_and_dense_storage_of_the_same_values_hash_the_same():
    values = sample_values(np.float32, (4, 3))
    dense = pydaf.MemoryDaf(name="dense").add_axis("cell", list("ABCD")).add_axis("gene", list("XYZ"))
    sparse = pydaf.MemoryDaf(name="sparse").add_axis("cell", list("ABCD")).add_axis("gene", list("XYZ"))
    dense.set_matrix("cell", "gene", "m", values).set_vector("cell", "v", values[:, 0].copy())
    sparse.set_matrix("cell", "gene", "m", sp.csc_matrix(values))
    sparse.set_vector("cell", "v", SparseVector.from_dense(values[:, 0].copy()))
    left, right = daf_manifest(dense), daf_manifest(sparse)
    assert manifest_differences(left, right) == []
    assert manifest_differences(left, right, storage=True) == [
        "vectors/cell/v: storage differs", "matrices/cell/gene/m: storage differs",
        "matrices/gene/cell/m: storage differs"]


def _changed(change) -> list[str]:
    daf = fill_sample(pydaf.MemoryDaf(name="changed!"))
    change(daf)
    return manifest_differences(daf_manifest(fill_sample(pydaf.MemoryDaf(name="same!"))), daf_manifest(daf))


def test_every_change_shows():
    dense = sample_values(np.float32, (4, 3))
    dense[1, 0] += 1  # a non-zero value (so only the hash changes, not the count of non-zeros)
    assert _changed(lambda daf: daf.set_matrix("cell", "gene", "dense", dense, overwrite=True)) == [
        "matrices/cell/gene/dense: hash differs", "matrices/gene/cell/dense: hash differs"]
    assert _changed(lambda daf: daf.set_vector("cell", "dense_int32", sample_values(np.int32, (4,)).astype(
        np.uint32), overwrite=True)) == ["vectors/cell/dense_int32: eltype differs",
                                         "vectors/cell/dense_int32: hash differs"]
    assert _changed(lambda daf: daf.set_scalar("text", "naive", overwrite=True)) == ["scalars/text: hash differs"]
    assert _changed(lambda daf: daf.set_vector("cell", "label", np.array(["a", "", "u", "d"], dtype=object),
                                               overwrite=True)) == ["vectors/cell/label: hash differs"]
    assert _changed(lambda daf: daf.delete_matrix("cell", "gene", "dense", relayout=False)) == [
        "matrices/cell/gene/dense: missing"]
    assert _changed(lambda daf: daf.relayout_matrix("gene", "cell", "UMIs")) == ["matrices/cell/gene/UMIs: unexpected"]
    assert _changed(lambda daf: daf.add_axis("gene", ["X", "Zé", "Y"], overwrite=True)) != []


def test_layouts_can_be_ignored():
    one = pydaf.MemoryDaf(name="one").add_axis("cell", ["A"]).add_axis("gene", ["X", "Y"])
    two = pydaf.MemoryDaf(name="two").add_axis("cell", ["A"]).add_axis("gene", ["X", "Y"])
    one.set_matrix("cell", "gene", "m", np.array([[1.0, 2.0]]))
    two.set_matrix("cell", "gene", "m", np.array([[1.0, 2.0]]), relayout=False)
    assert manifest_differences(daf_manifest(one), daf_manifest(two)) == ["matrices/gene/cell/m: missing"]
    assert manifest_differences(daf_manifest(one), daf_manifest(two), layouts=False) == []


def test_manifests_of_another_version_are_refused():
    with pytest.raises(pydaf.DafValueError, match="not a version 1 daf manifest"):
        manifest_differences({"manifest": "daf-manifest", "version": 2}, daf_manifest(pydaf.MemoryDaf()))


def test_the_command_writes_the_manifest(tmp_path):
    path = tmp_path / "sample.daf"
    fill_sample(pydaf.FilesDaf(path, "w", name="sample!"))
    output = tmp_path / "manifest.json"
    result = subprocess.run([sys.executable, "-m", "pydaf.cli", "manifest", str(path), "--output", str(output)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    written = json.loads(output.read_text(encoding="utf-8"))
    assert written == daf_manifest(pydaf.open_daf(path))
    printed = subprocess.run([sys.executable, "-m", "pydaf.cli", "manifest", str(path)], capture_output=True,
                             text=True, encoding="utf-8")
    assert printed.stdout == output.read_text(encoding="utf-8")
    missing = subprocess.run([sys.executable, "-m", "pydaf.cli", "manifest", str(tmp_path / "none.h5df")],
                             capture_output=True, text=True)
    assert missing.returncode == 1 and missing.stderr.startswith("pydaf manifest: error: ") and not missing.stdout
