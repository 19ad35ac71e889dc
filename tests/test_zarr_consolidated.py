"""zarr-python opens pydaf's Zarr stores with its defaults (issue 23): the root's consolidated metadata lists its keys
by depth, then by path, so each group's children are consecutive, as zarr-python 3's ``_flat_to_nested`` needs.
Julia writes them in hash order, which zarr-python can't read (docs/spec/FORMATS.md §7.11); Julia reads any order."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
import zarr
from zarr.errors import GroupNotFoundError

import pydaf
from pydaf import SparseVector
from pydaf.formats.zarr.format import consolidated_order

from .julia_examples import FIXTURES

FIXTURE = FIXTURES / "julia" / "zarr-flat.daf.zarr"
needs_fixture = pytest.mark.skipif(not FIXTURE.is_dir(), reason=f"Julia's ZarrDaf fixture is not at {FIXTURE}")


def filled(daf: pydaf.DafWriter) -> pydaf.DafWriter:
    """Every kind of node, with names that differ only by case (zarr-python's own writer, which sorts by case-folded
    path, would interleave the children of ``Cell`` and ``cell``)."""
    daf.add_axis("cell", ["A", "B", "C", "D"]).add_axis("Cell", ["x", "y"]).add_axis("gene", ["X", "Y", "Z"])
    daf.set_scalar("version", np.uint16(3)).set_scalar("organism", "human").set_scalar("Version", 1.5)
    daf.set_vector("cell", "age", np.array([31, 45, 60, 2], np.int32)).set_vector("cell", "type", ["T", "", "B", "T"])
    daf.set_vector("Cell", "age", np.array([1.5, 2.5])).set_vector("gene", "zeros", 0)
    daf.set_vector("gene", "marker", SparseVector(3, np.array([1, 3], np.uint32), np.array([0.5, 2.0])))
    daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(np.array([[0, 2, 0], [1, 0, 0], [0, 0, 3], [4, 0, 0]],
                                                                   np.uint16)))
    daf.set_matrix("gene", "cell", "dense", np.arange(12, dtype=np.float32).reshape(3, 4), relayout=False)
    daf.set_matrix("Cell", "cell", "words", np.full((2, 4), "w"), relayout=False)
    with daf.empty_dense_vector("gene", "built", "UInt8") as buffer:
        buffer[:] = [7, 0, 9]
    return daf


def pydaf_arrays(daf: pydaf.DafReader) -> dict[str, np.ndarray]:
    """Every array of the store as pydaf reads it, keyed by its Zarr path, in zarr-python's (C, transposed) shape."""
    arrays: dict[str, np.ndarray] = {}
    for name in daf.scalars_set():
        arrays[f"scalars/{name}"] = np.array([daf.get_scalar(name)])
    for axis in daf.axes_set():
        arrays[f"axes/{axis}"] = np.asarray(daf.axis_vector(axis))
        for name in daf.vectors_set(axis):
            stored = daf.get_stored_vector(axis, name)
            if isinstance(stored, SparseVector):
                arrays[f"vectors/{axis}/{name}/nzind"] = stored.nzind
                arrays[f"vectors/{axis}/{name}/nzval"] = stored.nzval
            else:
                arrays[f"vectors/{axis}/{name}"] = np.asarray(stored)
        for columns in daf.axes_set():
            for name in daf.matrices_set(axis, columns, relayout=False):
                stored = daf.get_stored_matrix(axis, columns, name, relayout=False)
                if isinstance(stored, pydaf.SparseMatrixCSC):
                    for part in ("colptr", "rowval", "nzval"):
                        arrays[f"matrices/{axis}/{columns}/{name}/{part}"] = getattr(stored, part)
                else:
                    arrays[f"matrices/{axis}/{columns}/{name}"] = np.asarray(stored).T
    return arrays


def zarr_arrays(group: zarr.Group, prefix: str = "") -> dict[str, np.ndarray]:
    """Every array under a group, as zarr-python reads it (walking its members: for a consolidated group, the
    consolidated metadata)."""
    arrays: dict[str, np.ndarray] = {}
    for name, node in group.members():
        if isinstance(node, zarr.Group):
            arrays.update(zarr_arrays(node, f"{prefix}{name}/"))
        else:
            arrays[f"{prefix}{name}"] = node[...]
    return arrays


def assert_same_arrays(read: dict[str, np.ndarray], expected: dict[str, np.ndarray]) -> None:
    assert sorted(read) == sorted(expected)
    for key, values in expected.items():
        got = read[key]
        assert got.shape == values.shape, key
        if values.dtype.kind in "OUT":
            assert [str(value) for value in got.reshape(-1)] == [str(value) for value in values.reshape(-1)], key
        else:
            assert got.dtype == values.dtype, key
            np.testing.assert_array_equal(got, values, err_msg=key)


def consolidated_keys(path: Path) -> list[str]:
    return list(json.loads((path / "zarr.json").read_bytes())["consolidated_metadata"]["metadata"])


def test_zarr_python_defaults_open_a_pydaf_directory(tmp_path):
    path = tmp_path / "x.daf.zarr"
    daf = filled(pydaf.ZarrDaf(path, "w"))
    expected = pydaf_arrays(daf)
    assert len(expected) == 21
    for group in (zarr.open_group(str(path)), zarr.open_group(str(path), mode="r"), zarr.open_consolidated(str(path))):
        assert group.metadata.consolidated_metadata is not None  # (read through the consolidated metadata)
        assert group.attrs["daf"] == [1, 0]
        assert set(group.metadata.consolidated_metadata.flattened_metadata) == set(consolidated_keys(path))
        assert_same_arrays(zarr_arrays(group), expected)
    assert consolidated_keys(path) == sorted(consolidated_keys(path), key=consolidated_order)


def test_the_order_holds_through_deletes_overwrites_and_reopens(tmp_path):
    path = tmp_path / "x.daf.zarr"
    filled(pydaf.ZarrDaf(path, "w")).close()
    with pydaf.ZarrDaf(path, "r+") as daf:
        daf.delete_vector("cell", "age").delete_axis("Cell").set_scalar("version", 4, overwrite=True)
        daf.set_vector("gene", "marker", [1.0, 2.0, 3.0], overwrite=True).set_scalar("added", "late")
        with daf.empty_sparse_vector("cell", "built", "Float32", 1, "UInt32") as (nzind, nzval):
            nzind[:], nzval[:] = [2], [1.5]
        expected = pydaf_arrays(daf)
    assert consolidated_keys(path) == sorted(consolidated_keys(path), key=consolidated_order)
    assert_same_arrays(zarr_arrays(zarr.open_group(str(path), mode="r")), expected)
    assert "vectors/Cell" not in consolidated_keys(path) and "vectors/cell/built/nzind" in consolidated_keys(path)


@pytest.mark.parametrize("variant", ["x.daf.zarr.zip", "x.dafs.zarr.zip#/cells/raw"])
def test_zarr_python_opens_a_pydaf_archive_through_its_zip_store(tmp_path, variant):
    """An archive has no consolidated metadata (its central directory is the index): zarr-python lists the store."""
    path = str(tmp_path / variant)
    with filled(pydaf.ZarrDaf(path, "w+")) as daf:
        expected = pydaf_arrays(daf)
    archive, _, group_path = path.partition("#/")
    with zarr.storage.ZipStore(archive, mode="r") as store:
        group = zarr.open_group(store, path=group_path, mode="r")
        assert group.metadata.consolidated_metadata is None
        assert_same_arrays(zarr_arrays(group), expected)


@needs_fixture
def test_julia_order_is_not_read_by_zarr_python_defaults(tmp_path):
    """What zarr-python 3 does with Julia's own store (docs/spec/FORMATS.md §7.11): its defaults fail, without the
    consolidated metadata it reads it; a writable pydaf open (no write) rewrites the root in pydaf's order, and then
    the defaults read Julia's values, which pydaf read the same before and after."""
    path = tmp_path / "julia.daf.zarr"
    shutil.copytree(FIXTURE, path)
    julia_keys = consolidated_keys(path)
    assert julia_keys != sorted(julia_keys, key=consolidated_order)
    with pytest.raises(GroupNotFoundError, match="No group found"):
        zarr.open_group(str(path), mode="r")
    with pydaf.ZarrDaf(path, "r") as reader:  # (pydaf reads Julia's order, and a read-only open writes nothing)
        expected = pydaf_arrays(reader)
    assert len(expected) == 13 and consolidated_keys(path) == julia_keys
    assert_same_arrays(zarr_arrays(zarr.open_group(str(path), mode="r", use_consolidated=False)), expected)
    pydaf.ZarrDaf(path, "r+").close()
    assert sorted(consolidated_keys(path)) == sorted(julia_keys)
    assert consolidated_keys(path) == sorted(julia_keys, key=consolidated_order)
    assert_same_arrays(zarr_arrays(zarr.open_group(str(path), mode="r")), expected)
    with pydaf.ZarrDaf(path, "r") as reader:
        assert_same_arrays(pydaf_arrays(reader), expected)


@needs_fixture
def test_a_writable_open_of_pydaf_order_writes_nothing(tmp_path):
    path = tmp_path / "x.daf.zarr"
    filled(pydaf.ZarrDaf(path, "w")).close()
    before = (path / "zarr.json").stat().st_mtime_ns, (path / "zarr.json").read_bytes()
    pydaf.ZarrDaf(path, "r+").close()
    assert ((path / "zarr.json").stat().st_mtime_ns, (path / "zarr.json").read_bytes()) == before
