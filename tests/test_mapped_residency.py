"""Reading a large memory-mapped matrix keeps only what is being read resident: a reduction releases the pages it is
done with, a piece at a time (pydaf/kernels/reductions.py ``_streamed``); a selection of columns releases the input
each block spanned (``permute.gather_csc_columns``), a selection of rows the blocks of columns it read
(``permute.gather_csc_rows``); a few rows of a column-major matrix are gathered a block of
columns at a time, each block released (``sparse.dense_rows``). So the process's peak resident set, which a
cluster's scheduler or a container's limit measures with mapped file pages included, grows by a few pieces, not by
the matrix. Each query runs in a child process that reads its own peak (``VmHWM``) before and after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

import pydaf

from . import hostile

N_CELLS, N_GENES = 400_000, 120  # every other cell in every gene: 24M entries, 96 MB of Float32 values, 96 MB of rows
PER_GENE = N_CELLS // 2

QUERIES = ["@ cell @ gene :: UMIs >- Sum", "@ cell @ gene :: UMIs >- Mean", "@ cell @ gene :: UMIs >- Max",
           "@ cell @ gene :: UMIs >- Var", "@ cell @ gene :: UMIs >| Sum", "@ cell @ gene :: UMIs |/ type >| Sum"]


def _query_child(report: str) -> str:
    """A child script: the query ``argv[4]`` on the H5df ``argv[1]`` (its matrix ``UMIs`` of ``argv[2]`` x ``argv[3]``
    checked first), measured on its second run; prints ``report``, an expression of ``result`` and ``growth``."""
    return f"""
import json, sys
import numpy
import pydaf
from pydaf._os.maps import release_mapped_pages
from tests.worker_memory import reset_peak, peak_rss

daf = pydaf.H5df(sys.argv[1], "r")
rows_axis, columns_axis, query = sys.argv[2:5]
daf.get_stored_matrix(rows_axis, columns_axis, "UMIs").rowval  # (checked once: the check releases its own pages)
daf.get_np_query(query, cache=False)  # (kernels loaded: not measured)
release_mapped_pages()  # (whatever the first run left resident)
before = reset_peak()
result = daf.get_np_query(query, cache=False)
growth = peak_rss() - before
print(json.dumps({report}))
"""


_CHILD = _query_child('{"growth": growth, "result": numpy.asarray(result, dtype=numpy.float64).ravel()[:5].tolist(), '
                      '"shape": list(numpy.shape(result))}')


@pytest.fixture(scope="module")
def large(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("streamed") / "large.h5df"
    daf = pydaf.H5df(path, "w").add_axis("cell", [f"c{index}" for index in range(N_CELLS)])
    daf.add_axis("gene", [f"g{index}" for index in range(N_GENES)])
    daf.set_vector("gene", "type", np.array(["A", "B", "C"])[np.arange(N_GENES) % 3])
    daf.set_vector("cell", "chosen", np.arange(N_CELLS) % 100 == 0)  # (1%: each one stored in every gene)
    with daf.empty_sparse_matrix("cell", "gene", "UMIs", "Float32", N_GENES * PER_GENE, "UInt32") as (colptr, rowval,
                                                                                                       nzval):
        colptr[:] = np.arange(N_GENES + 1, dtype=np.uint32) * PER_GENE + 1
        rowval[:] = np.tile(np.arange(1, N_CELLS + 1, 2, dtype=np.uint32), N_GENES)
        nzval[:] = np.repeat(np.arange(1, N_GENES + 1, dtype=np.float32), PER_GENE)
    daf.close()
    return path


def _measured(script: str, *arguments: str) -> dict:
    """What the child ``script`` printed (as JSON), run on ``arguments`` in a fresh process."""
    environment = {**os.environ, "PYTHONPATH": f"{hostile.ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    result = subprocess.run([sys.executable, "-c", script, *arguments], capture_output=True, text=True,
                            env=environment, check=False, cwd=hostile.ROOT)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("query", QUERIES)
def test_a_reduction_of_a_mapped_matrix_holds_a_few_pieces_of_it(large: Path, query: str):
    measured = _measured(_CHILD, str(large), "cell", "gene", query)
    read_bytes = N_GENES * PER_GENE * 4 * (1 if ">-" in query else 2)  # (the values, and the rows if it needs them)
    # At most a piece of values (and rows) per thread in flight, and per-row buffers, against the 96 MB of values (and
    # 96 MB of rows). Measured: 13-32 MB per column, 69-98 MB per row; 96-220 MB when nothing was released.
    assert measured["growth"] < (0.5 if ">-" in query else 0.65) * read_bytes, measured
    gene_values = np.arange(1, N_GENES + 1, dtype=np.float64)
    every_other = np.array([1.0, 0.0, 1.0, 0.0, 1.0])
    expected = {
        "@ cell @ gene :: UMIs >- Sum": gene_values * PER_GENE,
        "@ cell @ gene :: UMIs >- Mean": gene_values / 2,
        "@ cell @ gene :: UMIs >- Max": gene_values,
        "@ cell @ gene :: UMIs >- Var": gene_values ** 2 / 4,
        "@ cell @ gene :: UMIs >| Sum": every_other * gene_values.sum(),
        "@ cell @ gene :: UMIs |/ type >| Sum": np.array([*(gene_values[group::3].sum() for group in range(3)), 0, 0]),
    }[query]
    assert np.allclose(measured["result"], expected[:5], rtol=1e-6), (measured, expected[:5])  # (C order)


_SELECT_CHILD = _query_child('{"growth": growth, "nnz": int(result.nnz), "shape": list(result.shape), '
                             '"sums": numpy.asarray(result.sum(axis=0)).ravel()[:4].tolist()}')


def test_a_selection_of_scattered_columns_holds_only_its_copy(tmp_path: Path):
    """Every 10th of 400,000 short columns: each touches a page of the mapped input (and the kernel maps its
    neighbours along), so without releasing them the whole input (192 MB) stays resident for a 19 MB result."""
    n_genes, n_cells, per_cell = 120, 400_000, 60
    path = tmp_path / "cells.h5df"
    daf = pydaf.H5df(path, "w").add_axis("gene", [f"g{index}" for index in range(n_genes)])
    daf.add_axis("cell", [f"c{index}" for index in range(n_cells)])
    daf.set_vector("cell", "chosen", np.arange(n_cells) % 10 == 3)
    with daf.empty_sparse_matrix("gene", "cell", "UMIs", "Float32", n_cells * per_cell, "UInt32") as (colptr, rowval,
                                                                                                      nzval):
        colptr[:] = np.arange(n_cells + 1, dtype=np.uint32) * per_cell + 1
        rowval[:] = np.tile(np.arange(1, 2 * per_cell + 1, 2, dtype=np.uint32), n_cells)
        nzval[:] = np.repeat(np.arange(n_cells, dtype=np.float32) % 1000, per_cell)
    daf.close()
    measured = _measured(_SELECT_CHILD, str(path), "gene", "cell", "@ gene @ cell [ chosen ] :: UMIs")
    assert measured["shape"] == [n_genes, n_cells // 10] and measured["nnz"] == n_cells // 10 * per_cell
    assert measured["sums"] == [(cell % 1000) * per_cell for cell in (3, 13, 23, 33)]
    copy_bytes = measured["nnz"] * (4 + 4) * 2  # (the 1-based selection, and the 0-based indices scipy gets)
    # At most a block (4M entries) of input per thread resident at once: the copy and 64 MB, against the 192 MB of
    # input (measured: 82 MB; 204 MB when nothing was released).
    assert measured["growth"] < copy_bytes + 96 * 2**20, measured


_SPARSE_ROWS_CHILD = _query_child('{"growth": growth, "nnz": int(result.nnz), "shape": list(result.shape), '
                                  '"rows": result.indices[:3].tolist(), '
                                  '"sums": numpy.asarray(result.sum(axis=0)).ravel()[:3].tolist()}')


def test_a_few_rows_of_a_mapped_sparse_matrix_keep_a_block_resident(large: Path):
    """1% of the rows of a CSC matrix (24M entries: 96 MB of rows, 96 MB of values): every entry's row is read, a
    block of columns at a time, each block released; no array per stored entry (measured before: 8 bytes for each
    of them several times: 500 MB of growth)."""
    measured = _measured(_SPARSE_ROWS_CHILD, str(large), "cell", "gene", "@ cell [ chosen ] @ gene :: UMIs")
    chosen = N_CELLS // 100
    assert measured["shape"] == [chosen, N_GENES] and measured["nnz"] == chosen * N_GENES
    assert measured["rows"] == [0, 1, 2] and measured["sums"] == [1.0 * chosen, 2.0 * chosen, 3.0 * chosen]
    assert measured["growth"] < 96 * 2**20, measured


@pytest.mark.parametrize("order", ["ascending", "shuffled"])
def test_gathered_rows_equal_scipys(order: str):
    from pydaf.kernels.permute import PERMUTE_NUMBA_MIN_ENTRIES, gather_csc_rows

    rng = np.random.default_rng(7)
    matrix = sp.random(20_000, 300, density=0.5, format="csc", random_state=8, dtype=np.float32)
    rows = {"ascending": np.sort(rng.choice(20_000, 12_000, replace=False)),
            "shuffled": rng.permutation(20_000)[:12_000]}[order]
    colptr, rowval, nzval = gather_csc_rows(matrix.shape, matrix.indptr.astype(np.int64) + 1, matrix.indices + 1,
                                            matrix.data, rows)
    expected = matrix[rows, :]
    expected.sort_indices()
    assert matrix.nnz >= PERMUTE_NUMBA_MIN_ENTRIES and colptr.dtype == np.int64 and rowval.dtype == np.int32
    assert np.array_equal(colptr - 1, expected.indptr) and np.array_equal(rowval - 1, expected.indices)
    assert np.array_equal(nzval, expected.data)


@pytest.mark.parametrize("order", ["ascending", "shuffled", "repeated"])
def test_gathered_columns_equal_scipys(order: str):
    from pydaf.kernels.permute import PERMUTE_NUMBA_MIN_ENTRIES, gather_csc_columns

    rng = np.random.default_rng(5)
    matrix = sp.random(300, 20_000, density=0.5, format="csc", random_state=6, dtype=np.float32)
    columns = {"ascending": np.sort(rng.choice(20_000, 15_000, replace=False)),
               "shuffled": rng.permutation(20_000)[:15_000], "repeated": rng.integers(0, 20_000, 15_000)}[order]
    colptr, rowval, nzval = gather_csc_columns(matrix.indptr.astype(np.int64) + 1, matrix.indices + 1, matrix.data,
                                               columns)
    expected = matrix[:, columns]
    assert expected.nnz >= PERMUTE_NUMBA_MIN_ENTRIES and colptr.dtype == np.int64 and rowval.dtype == np.int32
    assert np.array_equal(colptr - 1, expected.indptr) and np.array_equal(rowval - 1, expected.indices)
    assert np.array_equal(nzval, expected.data)


_ROWS_CHILD = """
import json, sys
import numpy
import pydaf
from pydaf._os.maps import release_mapped_pages
from tests.worker_memory import reset_peak, peak_rss

daf = pydaf.H5df(sys.argv[1], "r")
view = pydaf.viewer(daf, axes=[pydaf.VIEW_ALL_AXES, ("cell", "@ cell [ chosen ]")], data=pydaf.VIEW_ALL_DATA)
for _ in range(2):  # (the first loads what the query and the view need: not measured)
    release_mapped_pages()
    before = reset_peak()
    queried = daf.get_np_query("@ cell [ chosen ] @ gene :: X", cache=False)
    queried_growth = peak_rss() - before
    release_mapped_pages()
    before = reset_peak()
    viewed = view.get_matrix("cell", "gene", "X")
    viewed_growth = peak_rss() - before
    view.empty_cache()
print(json.dumps({"queried": queried_growth, "viewed": viewed_growth, "shape": list(queried.shape),
                  "same": bool(numpy.array_equal(queried, viewed)), "exact": bool(numpy.array_equal(
                      queried, numpy.arange(1000, 1050, dtype=numpy.float64)[:, None] + numpy.arange(8000) * 1e-4)),
                  "column_major": bool(queried.flags.f_contiguous and viewed.flags.f_contiguous)}))
"""


def test_a_few_rows_of_a_column_major_matrix_keep_a_block_resident(tmp_path: Path):
    """50 neighbouring rows of 8,000 columns of 32 KB: each column's part is 400 bytes, but the kernel maps 64 KB
    around each page touched (its fault-around: the whole 256 MB matrix) for a 3.2 MB result (measured: 22 MB with
    the blocks released, 262 MB before)."""
    n_cells, n_genes = 4000, 8000
    path = tmp_path / "dense.h5df"
    daf = pydaf.H5df(path, "w").add_axis("cell", [f"c{index}" for index in range(n_cells)])
    daf.add_axis("gene", [f"g{index}" for index in range(n_genes)])
    daf.set_vector("cell", "chosen", (np.arange(n_cells) >= 1000) & (np.arange(n_cells) < 1050))
    with daf.empty_dense_matrix("cell", "gene", "X", "Float64") as values:
        values[...] = np.arange(n_cells, dtype=np.float64)[:, None] + np.arange(n_genes) * 1e-4
    daf.close()
    measured = _measured(_ROWS_CHILD, str(path))
    assert measured["shape"] == [50, n_genes] and measured["same"] and measured["exact"] and measured["column_major"]
    # A block of 16 MB at a time, and the result, against the whole 256 MB matrix.
    assert measured["queried"] < 96 * 2**20 and measured["viewed"] < 96 * 2**20, measured
