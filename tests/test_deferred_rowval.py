"""The row indices of a large sparse matrix are read (packed) and checked (mapped) on first use, not when it is
fetched: a per-column reduction, which needs only ``colptr`` and ``nzval``, never reads them, and corrupt rows are
still a DafFormatError naming the matrix wherever they are first used (pydaf/sparse.py ``DeferredArray``,
``DafReader._deferring_rows_check``, the H5df format's ``_deferred_part``)."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf
from pydaf.core.readers import DEFERRED_ROWS
from pydaf.formats.h5df import packed
from pydaf.sparse import DeferredArray, SparseMatrixCSC

N_GENES, N_CELLS = 1000, 5000
DENSITY = 0.5  # (2.5M entries: past DEFERRED_ROWS)


@pytest.fixture(scope="module")
def umis() -> sp.csc_matrix:
    matrix = sp.random(N_GENES, N_CELLS, density=DENSITY, format="csc", random_state=4, dtype=np.float32)
    assert matrix.nnz >= DEFERRED_ROWS
    return matrix


def written(daf: pydaf.DafWriter, umis: sp.csc_matrix) -> pydaf.DafWriter:
    daf.add_axis("gene", [f"g{index}" for index in range(N_GENES)])
    daf.add_axis("cell", [f"c{index}" for index in range(N_CELLS)])
    daf.set_matrix("gene", "cell", "UMIs", umis, relayout=False)
    return daf


@pytest.mark.parametrize("kind", ["h5df", "files", "zarr", "h5df_packed"])
def test_a_per_column_reduction_never_reads_the_rows(tmp_path: Path, umis: sp.csc_matrix, kind: str):
    path = tmp_path / {"h5df": "x.h5df", "files": "x.daf", "zarr": "x.daf.zarr", "h5df_packed": "p.h5df"}[kind]
    daf = pydaf.H5df(path, "w", packed=True) if kind == "h5df_packed" else pydaf.open_daf(str(path), "w")
    written(daf, umis).close()
    daf = pydaf.open_daf(str(path), "r")
    totals = daf.get_np_query("@ gene @ cell :: UMIs >- Sum")
    assert np.allclose(totals, np.asarray(umis.sum(axis=0)).ravel(), rtol=1e-5)
    stored = daf.get_stored_matrix("gene", "cell", "UMIs", relayout=False)
    assert isinstance(stored.rowval_or_deferred(), DeferredArray)
    assert stored.nnz == umis.nnz and not stored.colptr.flags.writeable
    per_gene = daf.get_np_query("@ gene @ cell :: UMIs >| Sum")  # (needs the rows: read and checked now)
    assert np.allclose(per_gene, np.asarray(umis.sum(axis=1)).ravel(), rtol=1e-4)
    rowval = stored.rowval_or_deferred()
    assert isinstance(rowval, np.ndarray) and not rowval.flags.writeable
    assert np.array_equal(rowval, umis.indices + 1)
    daf.empty_cache()  # (the same bytes, checked: a mapped matrix is not checked again)
    again = daf.get_stored_matrix("gene", "cell", "UMIs", relayout=False)
    assert isinstance(again.rowval_or_deferred(), DeferredArray) == (kind == "h5df_packed")  # (not mapped: again)
    daf.close()


def test_corrupt_rows_are_refused_where_first_used(tmp_path: Path, umis: sp.csc_matrix):
    path = tmp_path / "x.daf"
    written(pydaf.FilesDaf(path, "w"), umis).close()
    rowval_file = path / "matrices" / "gene" / "cell" / "UMIs.rowval"
    rowval = np.fromfile(rowval_file, dtype=f"<i{rowval_file.stat().st_size // umis.nnz}")
    position = umis.indptr[N_CELLS // 2] + 1  # (in the middle of a column)
    rowval[position] = N_GENES + 5
    rowval.tofile(rowval_file)
    daf = pydaf.FilesDaf(path, "r")
    totals = daf.get_np_query("@ gene @ cell :: UMIs >- Sum")  # (the values per column, whatever their rows)
    assert np.allclose(totals, np.asarray(umis.sum(axis=0)).ravel(), rtol=1e-5)
    stored = daf.get_stored_matrix("gene", "cell", "UMIs", relayout=False)
    expected = (f"invalid rowval of the matrix: UMIs\nfor the rows axis: gene\nand the columns axis: cell\n"
                f"found: rowval[{position}] = {N_GENES + 5} (in column {N_CELLS // 2})\n")
    for use in (lambda: stored.rowval, lambda: daf.get_matrix("gene", "cell", "UMIs", relayout=False),
                lambda: daf.get_np_query("@ gene @ cell :: UMIs >| Sum"), lambda: stored.rowval):
        with pytest.raises(pydaf.DafFormatError) as raised:
            use()
        assert str(raised.value).startswith(expected) and raised.value.daf_name == daf.name
    daf.close()


def test_a_packed_matrix_decodes_its_rows_on_first_use_only(tmp_path: Path, umis: sp.csc_matrix,
                                                              monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "p.h5df"
    written(pydaf.H5df(path, "w", packed=True), umis).close()
    read: list[str] = []
    original, original_start = packed.read_packed, packed.start_read_packed

    def started(dataset, *arguments):  # (a large nzval is decoded while colptr and rowval are read)
        pending = original_start(dataset, *arguments)
        if pending is not None:
            read.append(dataset.name.split("/")[-1])
        return pending

    monkeypatch.setattr(packed, "read_packed", lambda dataset, *arguments: (read.append(dataset.name.split("/")[-1]),
                                                                            original(dataset, *arguments))[1])
    from pydaf.formats.h5df import format as h5df_format

    monkeypatch.setattr(h5df_format, "read_packed", packed.read_packed)
    monkeypatch.setattr(h5df_format, "start_read_packed", started)
    daf = pydaf.H5df(path, "r")
    stored = daf.get_stored_matrix("gene", "cell", "UMIs", relayout=False)
    assert sorted(read) == ["colptr", "nzval"]
    assert np.array_equal(stored.rowval, umis.indices + 1) and sorted(read) == ["colptr", "nzval", "rowval"]
    daf.empty_cache()
    unread = daf.get_stored_matrix("gene", "cell", "UMIs", relayout=False)
    daf.close()
    with pytest.raises(pydaf.DafClosedError, match=r"(?s)rowval of the matrix: UMIs\n.*which was closed"):
        _ = unread.rowval
    with pydaf.H5df(path, "r+") as writable:  # (the closed data set keeps no hold on the file)
        writable.set_scalar("note", "written after")


def test_a_deferred_rowval_is_read_once_by_many_threads():
    loads: list[int] = []
    gate = threading.Event()

    def load() -> np.ndarray:
        gate.wait()
        loads.append(1)
        return np.array([2, 1, 3])

    matrix = SparseMatrixCSC((3, 2), np.array([1, 2, 4]), DeferredArray((3,), np.dtype(np.int64), load),
                             np.array([1.0, 2.0, 3.0]))
    seen: list[np.ndarray] = []
    threads = [threading.Thread(target=lambda: seen.append(matrix.rowval)) for _ in range(8)]
    for thread in threads:
        thread.start()
    gate.set()
    for thread in threads:
        thread.join()
    assert len(loads) == 1 and len(seen) == 8 and all(rows is seen[0] for rows in seen)
    assert not seen[0].flags.writeable and matrix.nnz == 3


def test_a_failed_read_is_tried_again_and_a_pickle_holds_the_rows():
    attempts: list[int] = []

    def load() -> np.ndarray:
        attempts.append(1)
        if len(attempts) == 1:
            raise pydaf.DafFormatError("can't read the rowval", daf_name="example")
        return np.array([2, 1])

    matrix = SparseMatrixCSC((2, 2), np.array([1, 2, 3]), DeferredArray((2,), np.dtype(np.int64), load),
                             np.array([7, 8]))
    with pytest.raises(pydaf.DafFormatError):
        _ = matrix.rowval
    derived = matrix.with_values(np.array([1, 1]))
    assert isinstance(derived.rowval_or_deferred(), DeferredArray)
    copied = pickle.loads(pickle.dumps(derived))
    assert copied.to_dense().tolist() == [[0, 1], [1, 0]] and len(attempts) == 2
    assert matrix.rowval.tolist() == [2, 1] and len(attempts) == 2  # (read by the matrix derived from it)
    with pytest.raises(AttributeError, match="immutable"):
        matrix.shape = (3, 3)  # type: ignore[misc]
