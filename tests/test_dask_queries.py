"""pydaf.dask.queries on a real dask cluster (2 worker processes): each query's result equals the local evaluation
(bitwise where split along a surviving axis), errors surface in the client when the graph is built, and the graph
carries no data."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import scipy.sparse

import pydaf
from pydaf.errors import DafQueryError

distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")

from pydaf.dask import queries as dask_queries  # noqa: E402

from . import dask_user_reduction  # noqa: E402  (Extent, ExtentOfPieces)

N_CELLS, N_GENES = 1200, 800


@pytest.fixture(scope="module")
def client():
    with dask_user_reduction.registered():  # (and preloaded by the workers)
        cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                                           preload=[dask_user_reduction.__file__])
        client = distributed.Client(cluster)
        yield client
        client.close()
        cluster.close()


def _big_daf() -> pydaf.MemoryDaf:
    """Dense and sparse matrices large enough to split into several pieces, in both or one layout."""
    rng = np.random.default_rng(29)
    daf = pydaf.MemoryDaf(name="big!")
    daf.add_axis("cell", [f"C{index}" for index in range(N_CELLS)])
    daf.add_axis("gene", [f"G{index}" for index in range(N_GENES)])
    daf.add_axis("type", ["T0", "T1", "T2", "T3"])
    daf.set_vector("cell", "type", np.array([f"T{index % 3}" for index in range(N_CELLS)], dtype=object))
    daf.set_vector("cell", "score", rng.normal(size=N_CELLS))
    daf.set_vector("cell", "batch", rng.integers(0, 5, size=N_CELLS).astype(np.int32))
    daf.set_vector("gene", "is_marker", rng.random(N_GENES) < 0.3)
    daf.set_vector("gene", "module", np.array([f"M{index % 7}" for index in range(N_GENES)], dtype=object))
    # Square matrices: a sparse one of cells (2%), a dense one of genes.
    daf.set_matrix("cell", "cell", "knn", scipy.sparse.random(N_CELLS, N_CELLS, density=0.02, format="csc",
                                                              random_state=4, dtype=np.float32), relayout=False)
    daf.set_matrix("gene", "gene", "corr", np.asfortranarray(rng.normal(size=(N_GENES, N_GENES))), relayout=False)
    # Strings in a dense matrix, each as frequent as the others: the mode is the one whose last occurrence is first.
    daf.set_matrix("cell", "gene", "call", np.array(list("ACGT"), dtype=object)[
        (np.arange(N_CELLS)[:, None] + np.arange(N_GENES)[None, :]) % 4], relayout=False)
    # (Every 7th cell in no metacell: ``?? : kind`` drops it.)
    daf.add_axis("metacell", [f"MC{index}" for index in range(10)])
    daf.set_vector("metacell", "kind", np.array([f"K{index % 3}" for index in range(10)], dtype=object))
    daf.set_vector("cell", "metacell", np.array(["" if index % 7 == 0 else f"MC{index % 10}"
                                                for index in range(N_CELLS)], dtype=object))
    # Dense Float64 stored as (cell, gene) only; dense Float32 stored as (gene, cell) only.
    daf.set_matrix("cell", "gene", "expression", np.asfortranarray(rng.gamma(2.0, 3.0, (N_CELLS, N_GENES))),
                   relayout=False)
    daf.set_matrix("gene", "cell", "fraction",
                   np.asfortranarray(rng.random((N_GENES, N_CELLS)).astype(np.float32)), relayout=False)
    # Sparse UInt16 (about 5% stored), stored as (cell, gene) only.
    umis = scipy.sparse.random(N_CELLS, N_GENES, density=0.05, format="csc", random_state=7,
                               data_rvs=lambda size: rng.integers(1, 40, size=size)).astype(np.uint16)
    daf.set_matrix("cell", "gene", "UMIs", umis, relayout=False)
    return daf


def _flipped_daf() -> pydaf.MemoryDaf:
    """The matrices of :func:`_big_daf` stored only as (gene, cell): a (cell, gene) query keeps ``gene``, the rows of
    the stored layout. ``level`` follows recorded (AnnData) categories, not sorted."""
    big = _big_daf()
    daf = pydaf.MemoryDaf(name="flipped!")
    for axis in ("cell", "gene", "type", "metacell"):
        daf.add_axis(axis, big.axis_vector(axis))
    for axis, name in (("cell", "type"), ("cell", "score"), ("cell", "batch"), ("gene", "is_marker"),
                       ("cell", "metacell"), ("metacell", "kind")):
        daf.set_vector(axis, name, big.get_vector(axis, name))
    daf.set_vector("cell", "level", np.array([f"L{index % 11}" for index in range(N_CELLS)], dtype=object))
    daf.set_scalar("cell_level_categories", "\n".join(f"L{index}" for index in range(11)))  # (L2 before L10)
    for name in ("UMIs", "expression", "fraction"):
        matrix = big.get_matrix("cell", "gene", name)
        flipped = scipy.sparse.csc_matrix(matrix.T) if scipy.sparse.issparse(matrix) else np.asfortranarray(matrix.T)
        daf.set_matrix("gene", "cell", name, flipped, relayout=False)
    return daf


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    folder = tmp_path_factory.mktemp("dask_queries")
    result = {}
    cells = pydaf.example_cells_daf()
    for key, name in (("h5df", "cells.h5df"), ("files", "cells.daf"), ("zarr", "cells.daf.zarr")):
        path = str(folder / name)
        pydaf.copy_all(pydaf.open_daf(path, "w"), cells, progress=False)
        result[key] = path
    path = str(folder / "big.h5df")
    pydaf.copy_all(pydaf.open_daf(path, "w"), _big_daf(), progress=False, relayout=False)
    result["big"] = path
    path = str(folder / "big.daf")
    pydaf.copy_all(pydaf.open_daf(path, "w"), _big_daf(), progress=False, relayout=False)
    result["big_files"] = path
    flipped = _flipped_daf()
    for key, name, relayout in (("flip", "flip.daf", False), ("flip_h5", "flip.h5df", False),
                                ("both", "both.h5df", True)):
        path = str(folder / name)
        pydaf.copy_all(pydaf.open_daf(path, "w"), flipped, progress=False, relayout=relayout)
        result[key] = path
    both = pydaf.open_daf(result["both"], "r")
    assert all(both.has_matrix("cell", "gene", name, relayout=False) for name in ("UMIs", "expression"))
    flip = pydaf.open_daf(result["flip"], "r")
    assert not any(flip.has_matrix("cell", "gene", name, relayout=False) for name in ("UMIs", "expression"))
    return result


# (data set, query, how it is evaluated: "split <axis>", "reduce <axis>", "select <axis>", "mode <axis>" or "one",
# chunk_bytes)
# The example cells: 856 cells x 683 genes of UInt8 UMIs (both layouts, dense; 584 bytes a cell, 683 a gene).
CELLS = 20_000  # about 30 pieces of the cells' matrix
QUERIES = [
    # Matrices, element-wise.
    ("h5df", "@ cell @ gene :: UMIs", "split gene", CELLS),
    ("files", "@ cell @ gene :: UMIs % Log base 2 eps 1", "split gene", CELLS),
    ("zarr", "@ cell @ gene :: UMIs > 2", "split gene", CELLS),
    ("h5df", "@ gene @ cell :: UMIs % Clamp min 1 max 5", "split cell", CELLS),
    ("big", "@ cell @ gene :: UMIs", "split gene", 60_000),
    ("big", "@ cell @ gene :: UMIs % Convert type Float32", "split gene", 60_000),
    ("big", "@ cell @ gene :: expression % Log base 2 eps 1", "split gene", 1_000_000),
    ("big", "@ cell @ gene :: fraction", "split cell", 500_000),  # only (gene, cell) stored: its columns are cells
    ("big_files", "@ cell @ gene [ is_marker ] :: expression % Abs", "split gene", 1_000_000),
    # Reductions to one value per column (>-) or per row (>|).
    ("h5df", "@ cell @ gene :: UMIs >- Sum", "split gene", CELLS),
    ("files", "@ cell @ gene :: UMIs >- Max", "split gene", CELLS),
    ("zarr", "@ cell @ gene :: UMIs >- Mean", "split gene", CELLS),
    ("h5df", "@ cell @ gene :: UMIs >| Sum", "rows gene", CELLS),  # (dense: a piece of rows would fault in most pages)
    ("h5df", "@ cell @ gene :: UMIs >| Median", "split cell", CELLS),
    ("big", "@ cell @ gene :: UMIs >- Sum", "split gene", 60_000),
    ("big", "@ cell @ gene :: UMIs >| Median", "split cell", 60_000),
    # >| of a sparse matrix stored by rows: pieces of its columns, per-row partials combined.
    ("big", "@ cell @ gene :: UMIs >| Sum", "rows gene", 60_000),
    ("big", "@ cell @ gene :: UMIs >| Max", "rows gene", 60_000),
    ("big", "@ cell @ gene :: UMIs >| Mean", "rows gene", 60_000),
    ("big_files", "@ cell [ type = T1 ] @ gene [ is_marker ] :: UMIs >| Count", "rows gene", 60_000),
    ("big", "@ cell @ gene :: UMIs % Convert type Int64 >| Min", "rows gene", 60_000),
    ("big", "@ cell @ gene :: expression >- Std", "split gene", 1_000_000),
    ("big", "@ cell @ gene :: expression >| Quantile p 0.9", "split cell", 1_000_000),
    ("big", "@ cell @ gene :: fraction >- Min", "rows cell", 500_000),  # (dense, only (gene, cell) stored)
    ("big_files", "@ cell @ gene :: expression >- Mode", "split gene", 1_000_000),
    # Group-bys of a matrix.
    ("h5df", "@ cell @ gene :: UMIs -/ donor >- Sum", "split gene", CELLS),
    ("files", "@ gene @ cell :: UMIs |/ experiment >| Max", "grouped cell", CELLS),
    ("big", "@ cell @ gene :: UMIs -/ type >- Mean", "split gene", 60_000),
    ("big", "@ cell @ gene :: UMIs -/ type =@ >- Sum || 0", "split gene", 60_000),
    ("big", "@ gene @ cell :: expression |/ batch >| Median", "split gene", 1_000_000),
    # The kept axis is the stored rows (matrices stored only flipped, sparse and dense): pieces of the reduced axis,
    # each one's partials per kept entry (and per group) combined.
    ("flip", "@ cell @ gene :: UMIs -/ type >- Sum", "grouped cell", 60_000),
    ("flip", "@ cell @ gene :: UMIs -/ type >- Mean", "grouped cell", 60_000),  # (integer data: exact)
    ("flip", "@ cell @ gene :: UMIs -/ batch >- Max", "grouped cell", 60_000),
    ("flip", "@ cell @ gene :: UMIs -/ type >- Min", "grouped cell", 60_000),
    ("flip", "@ cell @ gene :: UMIs -/ type >- Count", "grouped cell", 60_000),
    ("flip", "@ cell [ score > 0 ] @ gene [ is_marker ] :: UMIs -/ type >- Sum", "grouped cell", 60_000),
    ("flip", "@ cell [ type = T1 ] @ gene :: UMIs -/ type =@ >- Sum || 0", "grouped cell", 60_000),  # empty groups
    ("flip", "@ cell @ gene :: UMIs > 5 -/ type =@ >- Max || false", "grouped cell", 60_000),
    ("flip", "@ gene @ cell :: UMIs |/ type >| Max", "grouped cell", 60_000),
    ("flip", "@ gene [ is_marker ] @ cell :: UMIs |/ batch >| Sum type Int64", "grouped cell", 60_000),
    ("flip", "@ cell @ gene :: UMIs >- Sum", "rows cell", 60_000),
    ("flip", "@ cell @ gene :: UMIs >- Mean", "rows cell", 60_000),
    ("flip", "@ cell [ type = T2 ] @ gene :: UMIs >- Count", "rows cell", 60_000),
    ("flip", "@ cell @ gene :: expression -/ type >- Max", "grouped cell", 1_000_000),
    ("flip", "@ cell @ gene :: expression >- Min", "rows cell", 1_000_000),
    ("flip", "@ gene @ cell :: expression |/ batch >| Count", "grouped cell", 1_000_000),  # (dense, its own layout)
    ("flip", "@ cell @ gene :: expression -/ batch >- Count", "grouped cell", 1_000_000),
    ("flip", "@ cell @ gene :: fraction -/ type >- Max", "grouped cell", 500_000),
    ("flip_h5", "@ cell @ gene :: UMIs -/ type >- Sum", "grouped cell", 60_000),
    ("flip_h5", "@ cell @ gene :: expression -/ batch >- Min", "grouped cell", 1_000_000),
    ("flip", "@ cell @ gene :: UMIs -/ type >- Median", "split gene", 60_000),  # (not combined: the kept axis)
    ("flip", "@ cell @ gene :: UMIs -/ level >- Sum", "grouped cell", 60_000),  # (recorded categories: L2 < L10)
    ("flip", "@ cell @ gene :: expression -/ level >- Max", "grouped cell", 1_000_000),
    ("flip", "@ cell : batch / level >> Sum", "group cell", 800),
    ("flip", "@ cell @ gene :: expression >- Mode", "split gene", 1_000_000),
    # Both layouts stored: the engine reads the query's own; where it keeps its rows, partials are combined.
    ("both", "@ cell @ gene :: UMIs -/ type >- Sum", "split gene", 60_000),
    ("both", "@ gene @ cell :: UMIs |/ type >| Sum", "grouped cell", 60_000),
    ("both", "@ cell @ gene :: expression -/ type >- Max", "split gene", 1_000_000),
    ("both", "@ gene @ cell :: expression |/ type >| Min", "grouped cell", 1_000_000),  # (dense, its own layout)
    ("both", "@ gene @ cell :: UMIs >| Max", "rows cell", 60_000),
    # Masks on rows and columns (and on the split axis).
    ("h5df", "@ cell [ donor : age > 60 ] @ gene :: UMIs >- Sum", "split gene", CELLS),
    ("zarr", "@ cell @ gene [ is_lateral ] :: UMIs >- Sum", "split gene", CELLS),
    ("h5df", "@ cell [ donor : sex = male ] @ gene [ ! is_lateral ] :: UMIs", "split gene", CELLS),
    ("big", "@ cell [ type = T1 & score > 0 ] @ gene [ is_marker ] :: UMIs", "split gene", 60_000),
    # (Masks that look up the other axis: evaluated once by the client, the pieces mask by its result.)
    ("big", "@ cell [ UMIs @ gene = G3 > 0 ] @ gene :: expression >- Max", "split gene", 1_000_000),
    ("big", "@ cell [ UMIs @ gene = G3 > 0 ] @ gene :: UMIs >> Sum", "reduce gene", 60_000),
    ("big", "@ cell [ UMIs @ gene = G3 > 0 & type = T1 ] @ gene :: UMIs >| Sum", "rows gene", 60_000),
    ("big", "@ cell [ ! UMIs @ gene = G3 ] @ gene [ UMIs @ cell = C5 > 0 ] :: UMIs >> Median", "select gene",
     60_000),
    ("flip", "@ cell [ UMIs @ gene = G3 > 0 ] @ gene :: UMIs -/ type >- Sum", "grouped cell", 60_000),
    # Scalars of a whole matrix or vector.
    ("h5df", "@ cell @ gene :: UMIs >> Sum", "reduce gene", CELLS),
    ("files", "@ cell @ gene :: UMIs >> Max", "reduce gene", CELLS),
    ("zarr", "@ cell @ gene :: UMIs >> Count", "reduce gene", CELLS),
    ("h5df", "@ cell @ gene :: UMIs >> Mean", "reduce gene", CELLS),
    ("big", "@ cell @ gene :: UMIs >> Sum", "reduce gene", 60_000),
    ("big", "@ cell @ gene :: UMIs >> Min", "reduce gene", 60_000),
    ("big", "@ cell @ gene :: UMIs >> Sum type Int64", "reduce gene", 60_000),
    ("big", "@ cell [ type = T9 ] @ gene :: UMIs >> Sum || 7", "reduce gene", 60_000),  # no cell: the default
    ("h5df", "@ cell @ gene :: UMIs >> Median", "select gene", CELLS),  # (selected by rounds: exact)
    ("big", "@ cell @ gene :: UMIs >> Quantile p 0.99", "select gene", 60_000),
    ("big", "@ cell @ gene :: expression >> Median", "select gene", 1_000_000),
    ("flip", "@ cell @ gene :: fraction >> Quantile p 0.3", "select cell", 500_000),
    ("h5df", "@ cell : donor : age >> Median", "select cell", 800),
    ("h5df", "@ donor : age >> Max", "reduce donor", 64),
    ("h5df", "@ cell : donor : age >> Sum", "reduce cell", 800),
    ("h5df", "@ cell : donor : age >> Mode", "mode cell", 800),  # (counted by rounds: exact)
    ("big", "@ cell @ gene :: UMIs >> Mode", "mode gene", 60_000),
    ("flip", "@ cell @ gene :: fraction >> Mode", "mode cell", 500_000),  # (pieces of the query's rows)
    ("h5df", "@ cell : experiment >> Mode", "reduce cell", 800),  # (strings: each piece's distinct ones)
    ("big", "@ cell : type >> Mode", "reduce cell", 800),  # (three strings, as frequent: the tie-break)
    ("big", "@ cell @ gene :: call >> Mode", "reduce gene", 60_000),
    ("big_files", "@ cell [ type = T1 ] @ gene [ is_marker ] :: call >> Mode", "reduce gene", 60_000),
    ("big", "@ cell [ type = T9 ] @ gene :: call >> Mode || none", "reduce gene", 60_000),  # (no cell: the default)
    ("big", "@ cell : batch / type >> Mode", "group cell", 800),  # (each piece's values, in order)
    # Vectors.
    ("h5df", "@ cell : donor : age", "split cell", 800),
    ("files", r"@ cell [ experiment ~ demux_.\*_1 ] : donor : sex", "split cell", 800),
    ("zarr", "@ gene [ ! is_lateral ]", "split gene", 800),
    ("h5df", "@ donor : age % Log eps 1 > 6", "split donor", 64),
    ("big", "@ cell : score % Abs", "split cell", 800),
    # Group-bys of a vector: per-group partials combined.
    ("h5df", "@ cell : donor : age / experiment >> Mean", "group cell", 800),
    ("files", "@ donor : age / sex >> Max", "group donor", 64),
    ("zarr", "@ cell : experiment / donor : sex >> Count", "group cell", 800),
    ("h5df", "@ cell [ donor : age > 80 ] : donor / donor =@ >> Count || 0", "group cell", 800),
    ("h5df", "@ cell @ gene :: UMIs >| Sum / donor >> Sum", "group cell", CELLS),
    ("big", "@ cell : batch / type >> Sum", "group cell", 800),
    ("big", "@ cell @ gene :: UMIs >| Max / type =@ >> Max || 0", "group cell", 60_000),
    ("big", "@ cell : batch / type >> Min", "group cell", 800),
    # Steps after a combined reduction: applied to its (small) result by the engine.
    ("big", "@ cell @ gene :: UMIs >> Sum % Log base 2", "reduce gene", 60_000),
    ("big", "@ cell @ gene :: expression >> Median % Abs % Round", "select gene", 1_000_000),
    ("big", "@ cell @ gene :: UMIs >> Mode % Convert type Int16", "mode gene", 60_000),
    ("big", "@ cell [ type = T9 ] @ gene :: UMIs >> Sum || 7 % Log base 2", "reduce gene", 60_000),  # (the default)
    ("h5df", "@ cell @ gene :: UMIs >| Sum / donor >> Mean % Round", "group cell", CELLS),
    ("h5df", "@ cell : donor : age / experiment >> Mean > 50", "group cell", 800),
    ("h5df", "@ cell : donor : age / experiment >> Mean >> Max", "group cell", 800),
    ("big", "@ cell @ gene :: UMIs >| Sum % Log eps 1", "rows gene", 60_000),
    ("big", "@ cell @ gene :: UMIs >| Max >= 3", "rows gene", 60_000),
    ("flip", "@ cell @ gene :: UMIs -/ type >- Sum % Log eps 1", "grouped cell", 60_000),
    ("flip", "@ cell @ gene :: UMIs -/ type =@ >- Max || 0 < 5", "grouped cell", 60_000),
    # Square matrices: their columns queried as an alias axis (restricting the axis would restrict both).
    ("big", "@ cell @ cell :: knn", "split columns", 20_000),
    ("big", "@ cell @ cell :: knn >| Sum", "rows columns", 20_000),
    ("big", "@ cell @ cell :: knn >- Max", "split columns", 20_000),
    ("big", "@ cell [ type = T1 ] @ cell [ type = T2 ] :: knn % Log eps 1", "split columns", 20_000),
    ("big", "@ cell @ cell :: knn |/ type >| Max", "grouped columns", 20_000),
    ("big_files", "@ gene @ gene :: corr >| Min", "rows columns", 500_000),
    ("big_files", "@ gene @ gene :: corr >> Median", "select columns", 500_000),
    ("big", "@ gene [ is_marker ] @ gene :: corr >- Max", "split columns", 500_000),
    # Group keys that drop entries (``??``: cells in no metacell are in no group).
    ("big", "@ cell : batch / metacell ?? : kind >> Mean", "group cell", 800),
    ("big", "@ cell : batch / metacell ?? : kind >> Median", "group cell", 800),
    ("big", "@ cell @ gene :: UMIs >| Sum / metacell ?? : kind >> Max", "group cell", 60_000),
    ("big", "@ cell @ gene :: expression >| Max / metacell ?? : kind >> Count", "group cell", 1_000_000),
    ("flip", "@ cell @ gene :: UMIs -/ metacell ?? : kind >- Sum", "grouped cell", 60_000),
    ("flip", "@ cell @ gene :: expression -/ metacell ?? : kind >- Max", "grouped cell", 1_000_000),
    # User-defined reductions of a whole matrix or vector: combined from pieces where they say how.
    ("big", "@ cell @ gene :: expression >> ExtentOfPieces", "reduce gene", 1_000_000),
    ("big", "@ cell @ gene :: UMIs >> ExtentOfPieces", "reduce gene", 60_000),  # (sparse: its implicit zeros)
    ("h5df", "@ cell : donor : age >> ExtentOfPieces", "reduce cell", 800),
    ("big", "@ cell @ gene :: UMIs >> Extent", "one", 60_000),
    ("big", "@ cell @ gene :: UMIs >- Extent", "split gene", 60_000),  # (per column: each piece's whole columns)
    ("big", "@ cell @ gene :: UMIs >| Extent", "split cell", 60_000),  # (per row: each piece's whole rows)
    # Counts, square and unusual phrases, names and scalars: one task (or local names).
    ("h5df", "@ cell : donor : age / experiment >> Median", "group cell", 800),  # (each piece's values)
    ("h5df", "@ cell : experiment * donor : sex", "one", 800),
    ("h5df", ". organism", "one", 800),
    ("h5df", ": age @ donor = N16", "one", 800),
    ("h5df", "@ ?", "names", 800),
    ("zarr", "@ cell : ?", "names", 800),
]


def _same(local, result) -> None:
    """Bitwise equality of values, types and (for matrices) layout."""
    if isinstance(local, set):
        assert result == local
    elif scipy.sparse.issparse(local):
        assert scipy.sparse.issparse(result) and result.format == "csc"
        assert result.shape == local.shape and result.dtype == local.dtype
        assert (result != local).nnz == 0
    else:
        assert np.asarray(result).dtype == np.asarray(local).dtype
        assert np.asarray(result).shape == np.asarray(local).shape
        assert np.array_equal(result, local)
        if np.ndim(local) == 2:
            assert np.asarray(result).flags.f_contiguous


@pytest.mark.parametrize(("key", "query", "how", "chunk_bytes"), QUERIES, ids=[entry[1] for entry in QUERIES])
def test_query_equals_local(client, paths, key, query, how, chunk_bytes):
    path = paths[key]
    local = pydaf.open_daf(path, "r").get_np_query(query, cache=False)
    graph = dask_queries._graph(path, query, chunk_bytes)
    kind = "names" if graph.plan.dimensions < 0 else graph.plan.kind
    assert kind == how.split()[0], graph.plan.reason
    if kind in ("split", "reduce", "select", "mode", "group", "rows", "grouped"):
        # ("columns": the columns of a square matrix, queried as an alias axis)
        assert graph.plan.axis == how.split()[1].replace("columns", dask_queries._ALIAS)
        pieces = len(graph.pieces) if kind == "split" else len(graph.ranges) if kind in ("select", "mode") \
            else sum(count for name, count in _task_names(graph).items() if not name.startswith("combine"))
        assert pieces >= 4, pieces
    if kind in ("rows", "grouped"):  # (the tasks: one per piece, and the combination)
        tasks = _task_names(graph)
        piece = "row_partial_piece" if kind == "rows" else "group_piece"  # (key_split drops the leading "_")
        combine = "combine_rows" if kind == "rows" else "combine_groups"
        assert tasks == {piece: pieces, combine: 1}, tasks
    result = dask_queries.get_np_query(path, query, chunk_bytes=chunk_bytes)
    _same(local, result)


def _task_names(graph) -> dict[str, int]:
    """How many tasks of each function the combined result's graph holds."""
    from collections import Counter

    from dask.utils import key_split

    return dict(Counter(key_split(key) for key in graph.pieces[0].dask
                        if key_split(key) != "DerivedSource"))  # (the evaluated masks: one key, not a task)


def test_the_table_covers_enough(paths):
    kinds = [how.split()[0] for _, _, how, _ in QUERIES]
    assert len(QUERIES) >= 25 and kinds.count("split") >= 25 and kinds.count("reduce") >= 8
    assert kinds.count("group") >= 6 and kinds.count("one") >= 4 and kinds.count("rows") >= 8
    assert kinds.count("grouped") >= 18 and kinds.count("select") >= 5 and kinds.count("mode") >= 3


# Float reductions combined from partials: equal up to rounding.


@pytest.mark.parametrize("query", [
    "@ cell @ gene :: expression >> Sum",
    "@ cell @ gene :: expression >> Mean",
    "@ cell @ gene :: expression >> Var",
    "@ cell @ gene :: expression >> Std",
    "@ cell @ gene :: expression >> VarN eps 1",
    "@ cell @ gene :: expression >> StdN",
    "@ cell @ gene :: UMIs >> Var",
    "@ cell @ gene :: UMIs >| Var",
    "@ cell @ gene :: UMIs % Convert type Float64 >| StdN eps 1",
    "@ cell @ gene :: UMIs % Convert type Float64 >| Mean",
    "@ cell @ gene :: fraction >> Sum",  # Float32 data: the kernels sum in Float64 either way
    "@ cell @ gene :: fraction >> Mean",
    "@ cell : score >> Std",
    "@ cell : score / type >> Mean",
    "@ cell : score / type >> Var",
    "@ cell : score / batch >> StdN eps 1",
    "@ cell @ gene :: expression >| Sum / type =@ >> Std || 0",
    "@ cell @ gene :: fraction >| Mean / type >> Sum",
    # GeoMean: sums of log(value + eps) combined (Float32 without eps: logs in Float32 as the kernels take them).
    "@ cell @ gene :: expression >> GeoMean",
    "@ cell @ gene :: expression >> GeoMean eps 1",
    "@ cell @ gene :: fraction >> GeoMean",
    "@ cell @ gene :: fraction >> GeoMean eps 0.5",
    "@ cell @ gene :: UMIs >> GeoMean eps 1",
    "@ cell @ gene :: UMIs >> GeoMean",  # (implicit zeros, no eps: 0)
    "@ cell @ gene :: UMIs >| GeoMean eps 1",
    "@ cell @ gene :: UMIs % Convert type Float32 >| GeoMean",
    "@ cell : score % Abs >> GeoMean",
    "@ cell : score % Abs / type >> GeoMean",
    "@ cell : batch / type >> GeoMean eps 1",
    "@ cell @ gene :: fraction >| Mean / type >> GeoMean",
])
def test_combined_float_reductions_within_tolerance(client, paths, query):
    path = paths["big"]
    local = pydaf.open_daf(path, "r").get_np_query(query, cache=False)
    chunk_bytes = 800 if query.startswith("@ cell :") else 60_000 if "UMIs" in query else 100_000
    graph = dask_queries._graph(path, query, chunk_bytes)
    assert graph.plan.kind in ("reduce", "group", "rows") and len(graph.pieces[0].dask) - 1 >= 4
    result = dask_queries.get_np_query(path, query, chunk_bytes=chunk_bytes)
    assert np.asarray(result).dtype == np.asarray(local).dtype and np.shape(result) == np.shape(local)
    rtol = 1e-12 if np.asarray(local).dtype == np.float64 else 1e-6
    assert np.allclose(result, local, rtol=rtol, atol=0), (result, local)


@pytest.mark.parametrize(("key", "query", "how"), [
    ("flip", "@ cell @ gene :: expression -/ type >- Mean", "grouped"),
    ("flip", "@ cell @ gene :: expression -/ type >- Var", "grouped"),
    ("flip", "@ cell @ gene :: expression -/ batch >- Std", "grouped"),
    ("flip", "@ cell @ gene :: expression -/ type =@ >- Sum || -1", "grouped"),
    ("flip", "@ cell @ gene :: UMIs -/ type >- VarN eps 1", "grouped"),
    ("flip", "@ cell @ gene :: UMIs % Log base 2 eps 1 -/ batch >- StdN eps 1", "grouped"),
    ("flip", "@ cell @ gene :: UMIs % Convert type Float64 -/ type >- Mean", "grouped"),
    ("flip", "@ gene @ cell :: UMIs % Convert type Float64 |/ type >| Sum", "grouped"),
    ("flip", "@ gene @ cell :: UMIs % Convert type Float64 |/ batch >| Var", "grouped"),
    ("flip", "@ cell @ gene :: expression >- Mean", "rows"),
    ("flip", "@ cell @ gene :: UMIs >- Std", "rows"),
    ("flip", "@ cell @ gene :: fraction -/ type >- Mean", "grouped"),  # Float32 data, in Float64 either way
    ("flip_h5", "@ cell @ gene :: UMIs % Convert type Float64 -/ type >- StdN", "grouped"),
    ("both", "@ gene @ cell :: UMIs % Log eps 1 |/ type >| Var", "grouped"),
    ("both", "@ gene @ cell :: UMIs % Convert type Float64 >| Mean", "rows"),
    ("flip", "@ cell @ gene :: expression -/ type >- GeoMean", "grouped"),
    ("flip", "@ cell @ gene :: UMIs -/ type >- GeoMean eps 1", "grouped"),
    ("flip", "@ cell @ gene :: UMIs -/ batch >- GeoMean", "grouped"),  # (groups of implicit zeros: 0)
    ("flip", "@ cell @ gene :: fraction -/ type >- GeoMean", "grouped"),  # (Float32 logs, as the kernels)
    ("flip", "@ cell @ gene :: expression >- GeoMean eps 2", "rows"),
    ("flip", "@ cell @ gene :: fraction >- GeoMean", "rows"),
    ("flip", "@ cell @ gene :: UMIs >- GeoMean eps 1", "rows"),
])
def test_stored_rows_float_reductions_within_tolerance(client, paths, key, query, how):
    path = paths[key]
    local = pydaf.open_daf(path, "r").get_np_query(query, cache=False)
    chunk_bytes = 60_000 if "UMIs" in query else 1_000_000
    graph = dask_queries._graph(path, query, chunk_bytes)
    assert graph.plan.kind == how and graph.plan.axis == "cell"
    assert len(graph.pieces[0].dask) - 1 >= 4
    result = dask_queries.get_np_query(path, query, chunk_bytes=chunk_bytes)
    assert result.dtype == local.dtype and result.shape == local.shape
    assert result.flags.f_contiguous
    rtol = 1e-12 if local.dtype == np.float64 else 1e-6
    assert np.allclose(result, local, rtol=rtol, atol=0), (result, local)


def test_stored_rows_pieces_read_the_reduced_axis(paths):
    # (The new path: each piece a range of cells, the stored columns; the grouped query's kept axis is whole.)
    path, query = paths["flip"], "@ cell @ gene :: UMIs -/ type >- Sum"
    graph = dask_queries._graph(path, query, 60_000)
    tasks = dict(graph.pieces[0].dask)
    pieces = [task for key, task in tasks.items() if str(key).startswith("_group_piece")]
    assert len(pieces) >= 4
    ranges = []
    for task in pieces:
        arguments = [getattr(argument, "value", argument) for argument in task.args]
        prefix, axis, start, stop = arguments[1], arguments[4], arguments[5], arguments[6]
        assert axis == "cell" and prefix == "@ gene @ cell :: UMIs"  # (the stored layout, no relayout)
        ranges.append((start, stop))
    assert sorted(ranges)[0][0] == 0 and sorted(ranges)[-1][1] == N_CELLS
    # Before: one piece of genes, from the whole stored matrix (the same result, without partials).
    fallback = dask_queries._plan(pydaf.open_daf(path, "r"), dask_queries.as_query_sequence(query)).fallback
    old = dask_queries._graph(path, query, 60_000, fallback)
    assert old.plan.kind == "split" and old.plan.axis == "gene"
    local = pydaf.open_daf(path, "r").get_np_query(query, cache=False)
    _same(local, dask_queries.get_np_query(path, query, chunk_bytes=60_000, scheduler="synchronous"))


def test_stored_rows_lazy_and_labelled(client, paths):
    path = paths["flip"]
    daf = pydaf.open_daf(path, "r")
    for query in ("@ cell @ gene :: UMIs -/ type >- Mean", "@ gene @ cell [ score > 0 ] :: UMIs |/ type =@ >| Sum || 0",
                  "@ cell @ gene [ is_marker ] :: expression >- Max"):
        local = daf.get_query(query, cache=False)
        result = dask_queries.get_query(path, query, chunk_bytes=60_000)
        assert dask_queries._graph(path, query, 60_000).plan.kind in ("grouped", "rows")
        assert type(result) is type(local) and result.equals(local)
        assert list(result.index) == list(local.index) and result.index.name == local.index.name
        if hasattr(local, "columns"):
            assert list(result.columns) == list(local.columns) and result.columns.name == local.columns.name
    lazy = dask_queries.query(path, "@ cell @ gene :: UMIs -/ type >- Sum", chunk_bytes=60_000)
    assert np.isnan(lazy.shape[0]) and lazy.shape[1] == N_GENES and lazy.dtype == np.uint32
    assert np.array_equal(lazy.compute(), daf.get_np_query("@ cell @ gene :: UMIs -/ type >- Sum", cache=False))
    lazy = dask_queries.query(path, "@ gene @ cell :: UMIs |/ type =@ >| Max || 0", chunk_bytes=60_000)
    assert lazy.shape == (N_GENES, 4) and lazy.dtype == np.uint16
    assert np.array_equal(lazy.compute(), daf.get_np_query("@ gene @ cell :: UMIs |/ type =@ >| Max || 0"))


@pytest.mark.parametrize(("key", "query", "chunk_bytes"), [
    ("big", "@ cell @ gene :: UMIs >> Sum % Log base 2", 60_000),
    ("big", "@ cell @ gene :: expression >> Median % Abs", 1_000_000),
    ("h5df", "@ cell : donor : age / experiment >> Mean > 50", 800),
    ("h5df", "@ cell : donor : age / experiment >> Mean >> Max", 800),
    ("big", "@ cell [ type = T1 ] @ gene :: UMIs >| Sum % Log eps 1", 60_000),
    ("flip", "@ cell @ gene :: UMIs -/ type =@ >- Max || 0 < 5", 60_000),
])
def test_steps_after_a_reduction_lazy_and_labelled(client, paths, key, query, chunk_bytes):
    """The steps after a combined reduction apply to its result in every form: labelled as locally, and the lazy
    array has the result's type (and shape where known)."""
    path = paths[key]
    daf = pydaf.open_daf(path, "r")
    plan = dask_queries._graph(path, query, chunk_bytes).plan
    assert plan.kind != "one" and plan.after, plan.reason
    local = daf.get_query(query, cache=False)
    result = dask_queries.get_query(path, query, chunk_bytes=chunk_bytes)
    if hasattr(local, "equals"):
        assert type(result) is type(local) and result.equals(local)
        assert list(result.index) == list(local.index) and result.index.name == local.index.name
        if hasattr(local, "columns"):
            assert list(result.columns) == list(local.columns)
    else:
        assert result == local and type(result) is type(local)
    lazy = dask_queries.query(path, query, chunk_bytes=chunk_bytes)
    local_np = daf.get_np_query(query, cache=False)
    assert lazy.dtype == np.asarray(local_np).dtype and lazy.ndim == np.ndim(local_np)
    assert all(np.isnan(size) or size == local_size
               for size, local_size in zip(lazy.shape, np.shape(local_np), strict=True))
    computed = lazy.compute()  # (dask assembles a matrix in C order)
    assert computed.dtype == np.asarray(local_np).dtype and np.array_equal(computed, local_np)


def test_stored_rows_empty_group_without_a_default_fails_as_locally(client, paths):
    path, query = paths["flip"], "@ cell [ type = T1 ] @ gene :: UMIs -/ type =@ >- Sum"  # (T0, T2, T3: no cell)
    with pytest.raises(DafQueryError, match="no IfMissing value specified for the unused entry"):
        pydaf.open_daf(path, "r").get_np_query(query, cache=False)
    assert dask_queries._graph(path, query, 60_000).plan.kind == "grouped"
    with pytest.raises(DafQueryError, match="no IfMissing value specified for the unused entry"):
        dask_queries.get_np_query(path, query, chunk_bytes=60_000)


def test_integer_sums_are_exact_whatever_the_pieces(client, paths):
    path = paths["big"]
    local = pydaf.open_daf(path, "r").get_np_query("@ cell @ gene :: UMIs >> Sum", cache=False)
    for chunk_bytes in (5_000, 50_000, 10**9):
        assert dask_queries.get_np_query(path, "@ cell @ gene :: UMIs >> Sum", chunk_bytes=chunk_bytes) == local


# Labelled (pandas) results.


@pytest.mark.parametrize("query", [
    "@ cell @ gene :: UMIs >- Sum",
    "@ cell [ donor : age > 60 ] @ gene [ is_lateral ] :: UMIs",
    "@ cell @ gene :: UMIs -/ donor >- Max",
    "@ gene @ cell :: UMIs |/ experiment >| Sum",
    "@ cell : donor : age",
    "@ donor : age / sex >> Max",
    "@ cell : donor / donor =@ >> Count",
    "@ donor : age / sex >> Median",
    "@ cell @ gene :: UMIs >> Sum",
    "@ gene : ?",
])
def test_get_query_is_labelled_as_locally(client, paths, query):
    path = paths["h5df"]
    local = pydaf.open_daf(path, "r").get_query(query, cache=False)
    result = dask_queries.get_query(path, query, chunk_bytes=CELLS)
    if hasattr(local, "equals"):
        assert type(result) is type(local)
        assert result.equals(local)
        assert list(result.index) == list(local.index) and result.index.name == local.index.name
        if hasattr(local, "columns"):
            assert list(result.columns) == list(local.columns) and result.columns.name == local.columns.name
    else:
        assert result == local


@pytest.mark.parametrize(("query", "chunk_bytes"), [
    ("@ cell @ cell :: knn >- Max", 20_000),
    ("@ gene @ gene :: corr >| Min", 500_000),
    ("@ gene [ is_marker ] @ gene :: corr", 500_000),
    ("@ cell @ cell :: knn |/ type >| Max", 20_000),
])
def test_a_square_matrix_is_labelled_as_locally(client, paths, query, chunk_bytes):
    """The alias of a square matrix's columns is the pieces' business: results are named by the query's axis."""
    path = paths["big"]
    local = pydaf.open_daf(path, "r").get_query(query, cache=False)
    assert dask_queries._graph(path, query, chunk_bytes).plan.axis == dask_queries._ALIAS
    result = dask_queries.get_query(path, query, chunk_bytes=chunk_bytes)
    assert type(result) is type(local) and result.equals(local)
    assert list(result.index) == list(local.index) and result.index.name == local.index.name
    if hasattr(local, "columns"):
        assert list(result.columns) == list(local.columns) and result.columns.name == local.columns.name
    lazy = dask_queries.query(path, query, chunk_bytes=chunk_bytes)
    assert np.array_equal(lazy.compute(), np.asarray(pydaf.open_daf(path, "r").get_np_query(query, cache=False)))


def test_get_query_of_per_row_pieces_is_labelled(client, paths):
    path, query = paths["big"], "@ cell [ type = T1 ] @ gene :: UMIs >| Sum"
    local = pydaf.open_daf(path, "r").get_query(query, cache=False)
    assert dask_queries._graph(path, query, 60_000).plan.kind == "rows"
    result = dask_queries.get_query(path, query, chunk_bytes=60_000)
    assert result.equals(local) and list(result.index) == list(local.index) and result.index.name == "cell"
    lazy = dask_queries.query(path, query, chunk_bytes=60_000)
    assert lazy.shape == local.shape and lazy.dtype == local.dtype


def test_get_query_of_a_sparse_matrix_is_a_sparse_frame(client, paths):
    path = paths["big"]
    local = pydaf.open_daf(path, "r").get_query("@ cell @ gene [ is_marker ] :: UMIs", cache=False)
    result = dask_queries.get_query(path, "@ cell @ gene [ is_marker ] :: UMIs", chunk_bytes=60_000)
    assert list(result.columns) == list(local.columns) and list(result.index) == list(local.index)
    assert (result.sparse.to_coo() != local.sparse.to_coo()).nnz == 0


# The lazy array.


def test_query_is_a_lazy_chunked_array(client, paths):
    path = paths["big"]
    lazy = dask_queries.query(path, "@ cell @ gene :: expression % Log base 2 eps 1", chunk_bytes=1_000_000)
    assert lazy.shape == (N_CELLS, N_GENES) and lazy.dtype == np.float64
    assert lazy.numblocks[0] == 1 and lazy.numblocks[1] >= 8
    local = pydaf.open_daf(path, "r").get_np_query("@ cell @ gene :: expression % Log base 2 eps 1", cache=False)
    assert np.array_equal(lazy.compute(), local)
    # Further dask operations run on the pieces.
    assert np.allclose(lazy.sum(axis=0).compute(), local.sum(axis=0), rtol=1e-12)


def test_sparse_pieces_stay_sparse(client, paths):
    path = paths["big"]
    lazy = dask_queries.query(path, "@ cell @ gene :: UMIs", chunk_bytes=60_000)
    assert isinstance(lazy._meta, scipy.sparse.csc_matrix) and lazy.numblocks[1] >= 4
    pieces = client.compute(lazy.to_delayed().ravel().tolist(), sync=True)
    assert all(isinstance(piece, scipy.sparse.csc_matrix) for piece in pieces)
    local = pydaf.open_daf(path, "r").get_np_query("@ cell @ gene :: UMIs", cache=False)
    assert (scipy.sparse.hstack(pieces, format="csc") != local).nnz == 0


def test_scalar_and_one_task_arrays(client, paths):
    path = paths["h5df"]
    daf = pydaf.open_daf(path, "r")
    scalar = dask_queries.query(path, "@ cell @ gene :: UMIs >> Sum", chunk_bytes=CELLS)
    assert scalar.shape == () and scalar.dtype == np.uint32
    assert scalar.compute() == daf.get_np_query("@ cell @ gene :: UMIs >> Sum")
    grouped = dask_queries.query(path, "@ donor : age / sex >> Max", chunk_bytes=64)
    assert grouped.ndim == 1 and np.isnan(grouped.shape[0]) and grouped.dtype == np.uint32
    assert np.array_equal(grouped.compute(), daf.get_np_query("@ donor : age / sex >> Max"))
    one = dask_queries.query(path, "@ cell : experiment / donor : sex >> Mode")  # (strings: one task)
    assert one.ndim == 1 and np.isnan(one.shape[0])
    assert dask_queries._graph(path, "@ cell : experiment / donor : sex >> Mode", None).plan.kind == "one"
    assert np.array_equal(one.compute(), daf.get_np_query("@ cell : experiment / donor : sex >> Mode"))
    with pytest.raises(DafQueryError, match="a set of names is not an array"):
        dask_queries.query(path, "@ ?")


# Errors and the graph.


@pytest.mark.parametrize(("query", "error"), [
    ("@ cell @ gene :: nonesuch >- Sum", pydaf.DafError),
    ("@ cell : nonesuch", pydaf.DafError),
    ("@ cell @ gene :: UMIs >- Sum %", DafQueryError),
    ("@ cell @ gene :: UMIs >- Summ", DafQueryError),
    ("@ nonesuch : age", pydaf.DafError),
    ("@ cell : donor >> Sum", pydaf.DafError),  # strings do not sum
    ("@ cell : donor / experiment >> Sum", pydaf.DafError),
])
def test_query_errors_are_raised_when_the_graph_is_built(paths, query, error):
    path = paths["h5df"]
    with pytest.raises(error) as local_error:
        pydaf.open_daf(path, "r").get_np_query(query, cache=False)
    with pytest.raises(error) as dask_error:
        dask_queries.query(path, query, chunk_bytes=CELLS)  # no cluster: raised before anything is computed
    assert type(dask_error.value) is type(local_error.value)


def test_an_empty_group_without_a_default_fails_as_locally(client, paths):
    path = paths["h5df"]
    query = "@ cell [ donor : age > 80 ] : donor / donor =@ >> Count"  # most donors have no such cell
    with pytest.raises(DafQueryError, match="no IfMissing value specified for the unused entry"):
        pydaf.open_daf(path, "r").get_np_query(query, cache=False)
    assert dask_queries._graph(path, query, 800).plan.kind == "group"
    with pytest.raises(DafQueryError, match="no IfMissing value specified for the unused entry"):
        dask_queries.get_np_query(path, query, chunk_bytes=800)


def test_the_graph_holds_no_data(paths):
    path = paths["big"]
    stored = sum(np.asarray(part).nbytes for part in (pydaf.open_daf(path, "r").get_stored_matrix(
        "cell", "gene", "expression", relayout=False),))
    for query in ("@ cell @ gene :: expression % Abs", "@ cell @ gene :: expression >> Mean",
                  "@ cell @ gene [ is_marker ] :: UMIs >- Sum"):
        lazy = dask_queries.query(path, query, chunk_bytes=1_000_000)
        graph = dict(lazy.__dask_graph__())
        size = len(pickle.dumps(graph))
        assert size < 2_000 * max(1, len(graph)), (query, size, len(graph))
        assert size < stored / 100


def test_a_piece_is_a_zero_copy_slice_of_the_mapped_matrix(paths):
    daf = pydaf.open_daf(paths["big_files"], "r")
    stored = daf.get_stored_matrix("cell", "gene", "expression", relayout=False)
    view = dask_queries._range_view(daf, "gene", 100, 200)
    piece = view.get_np_query("@ cell @ gene :: expression")
    assert view.axis_vector("gene").tolist() == [f"G{index}" for index in range(100, 200)]
    assert piece.shape == (N_CELLS, 100) and np.shares_memory(piece, stored)
    assert np.array_equal(piece, stored[:, 100:200])
    # The pieces of a process share the axis's chain.
    first, second = dask_queries._range_view(daf, "gene", 0, 10), dask_queries._range_view(daf, "gene", 10, 30)
    assert first.axis_length("gene") == 10 and second.axis_length("gene") == 20
    assert first.daf is second.daf is dask_queries._kept_ranges(daf, "gene").chain


def test_pieces_in_threads_of_one_process(paths):
    # (Pieces of one worker share the axis's chain: threads run them at once.)
    path = paths["big_files"]
    for query in ("@ cell @ gene :: expression >- Max", "@ cell @ gene [ is_marker ] :: UMIs",
                  "@ cell @ gene :: UMIs >> Sum", "@ cell : batch / type >> Sum", "@ cell @ gene :: UMIs >| Sum"):
        local = pydaf.open_daf(path, "r").get_np_query(query, cache=False)
        result = dask_queries.get_np_query(path, query, chunk_bytes=800 if "batch" in query else 60_000,
                                           scheduler="threads", num_workers=4)
        _same(local, result)


def test_a_rewritten_data_set_gets_new_tasks(tmp_path):
    path = str(tmp_path / "small.h5df")
    daf = pydaf.open_daf(path, "w").add_axis("cell", ["A", "B", "C"]).set_vector("cell", "age", [1, 2, 3])
    first = dask_queries.query(path, "@ cell : age").name
    daf.set_vector("cell", "age", [4, 5, 6], overwrite=True)
    second = dask_queries.query(path, "@ cell : age")
    assert second.name != first
    assert second.compute(scheduler="synchronous").tolist() == [4, 5, 6]


def test_a_worker_killed_in_the_middle_of_a_query_is_replaced_and_the_result_is_right(client, paths):
    # SIGKILL of a worker process while the query's pieces run: dask reruns the lost pieces on the other worker and on
    # the one the nanny starts instead (a new process), and the combined result is the local one.
    import signal
    import threading
    import time

    query = "@ cell @ gene :: UMIs >- Sum"
    local = pydaf.open_daf(paths["big"], "r").get_np_query(query, cache=False)
    graph = dask_queries._graph(paths["big"], query, 5_000)
    assert len(graph.pieces) >= 50, len(graph.pieces)
    before = client.run(os.getpid)
    results: list = []
    thread = threading.Thread(target=lambda: results.append(dask_queries.get_np_query(paths["big"], query,
                                                                                        chunk_bytes=5_000)))
    thread.start()
    deadline = time.monotonic() + 60
    while not any(client.processing().values()) and time.monotonic() < deadline:
        time.sleep(0.005)
    victim = next(iter(before.values()))
    os.kill(victim, signal.SIGKILL)
    killed_while_running = thread.is_alive()
    thread.join(120)
    assert killed_while_running and not thread.is_alive()
    _same(local, results[0])
    client.wait_for_workers(2, timeout=60)
    assert victim not in client.run(os.getpid).values()


# Median and Quantile of a whole matrix or vector: selected by rounds over the pieces, bitwise equal to local.

N_SELECT_CELLS, N_SELECT_GENES = 1001, 301  # (an odd count of values; masks make even ones)


@pytest.fixture(scope="module")
def selection_path(tmp_path_factory):
    """Dense Float64, Float32, Int64 (beyond 2^53), UInt8 and Bool matrices; sparse matrices with many implicit zeros
    among negative and positive values, with all-equal stored values, with a NaN; a dense matrix with a NaN;
    vectors."""
    rng = np.random.default_rng(31)
    shape = (N_SELECT_CELLS, N_SELECT_GENES)
    daf = pydaf.MemoryDaf(name="selection!")
    daf.add_axis("cell", [f"C{index}" for index in range(N_SELECT_CELLS)])
    daf.add_axis("gene", [f"G{index}" for index in range(N_SELECT_GENES)])
    daf.set_vector("cell", "score", rng.normal(size=N_SELECT_CELLS))
    daf.set_vector("cell", "level", rng.integers(-50, 50, N_SELECT_CELLS).astype(np.int16))
    daf.set_vector("cell", "even", np.arange(N_SELECT_CELLS) < 500)  # (500 cells)
    daf.set_vector("cell", "none", np.zeros(N_SELECT_CELLS, dtype=bool))
    daf.add_axis("kind", ["K0", "K1", "K2", "K3", "K4"])  # (K4: no cell)
    daf.set_vector("cell", "kind", np.array(["K0", "K1", "K2", "K3"], dtype=object)[rng.integers(0, 4, N_SELECT_CELLS)])
    daf.set_vector("gene", "odd", np.arange(N_SELECT_GENES) < 151)
    with_nan = rng.normal(size=N_SELECT_CELLS)
    with_nan[17] = np.nan
    daf.set_vector("cell", "with_nan", with_nan)
    dense = {
        "normal": rng.normal(size=shape),
        "narrow": rng.normal(size=shape).astype(np.float32),
        "huge": (rng.integers(-2**62, 2**62, size=shape) | 1).astype(np.int64),
        "bytes": rng.integers(0, 256, size=shape).astype(np.uint8),
        "flags": rng.random(shape) < 0.5,
    }
    dense_nan = rng.normal(size=shape)
    dense_nan[5, 200] = np.nan
    dense["dense_nan"] = dense_nan
    for name, values in dense.items():
        daf.set_matrix("cell", "gene", name, np.asfortranarray(values), relayout=False)
    signed = scipy.sparse.random(*shape, density=0.02, format="csc", random_state=3,
                                 data_rvs=lambda size: rng.normal(size=size))
    daf.set_matrix("cell", "gene", "signed", signed, relayout=False)
    equal = scipy.sparse.random(*shape, density=0.6, format="csc", random_state=4)
    equal.data[:] = 2.5
    daf.set_matrix("cell", "gene", "equal", equal, relayout=False)
    sparse_nan = scipy.sparse.random(*shape, density=0.05, format="csc", random_state=5,
                                     data_rvs=lambda size: rng.normal(size=size))
    sparse_nan.data[3] = np.nan
    daf.set_matrix("cell", "gene", "sparse_nan", sparse_nan, relayout=False)
    counts = scipy.sparse.random(*shape, density=0.3, format="csc", random_state=6,
                                 data_rvs=lambda size: rng.integers(1, 9, size=size)).astype(np.int32)
    daf.set_matrix("cell", "gene", "counts", counts, relayout=False)
    path = str(tmp_path_factory.mktemp("dask_select") / "select.h5df")
    pydaf.copy_all(pydaf.open_daf(path, "w"), daf, progress=False, relayout=False)
    return path


SELECTIONS = [
    f"{axes} :: {name} >> {reduction}"
    for name in ("normal", "narrow", "huge", "bytes", "flags", "signed", "equal", "counts")
    for axes in ("@ cell @ gene", "@ cell [ even ] @ gene [ odd ]")
    for reduction in ("Median", "Quantile p 0.25")
] + [
    "@ cell @ gene :: normal >> Quantile p 0",
    "@ cell @ gene :: normal >> Quantile p 1",
    "@ cell @ gene :: narrow >> Quantile p 0.999 type Float64",
    "@ cell @ gene :: signed % Abs >> Quantile p 0.97",
    "@ cell @ gene :: signed >> Median type Float32",
    "@ cell @ gene :: equal >> Quantile p 0.3",  # (implicit zeros, then 2.5: the boundary)
    "@ cell @ gene :: dense_nan >> Median",
    "@ cell @ gene :: sparse_nan >> Quantile p 0.5",
    "@ cell : score >> Median",
    "@ cell [ even ] : score >> Median",
    "@ cell : level >> Quantile p 0.6",
    "@ cell : with_nan >> Median",
    "@ cell [ none ] @ gene :: normal >> Median || 7",  # (no values: the default)
]


@pytest.mark.parametrize("query", SELECTIONS)
def test_median_and_quantile_are_selected_exactly(client, selection_path, query):
    path = selection_path
    whole = dask_queries._graph(path, query, 1 << 40)  # (then about 6 pieces of the selected entries)
    entry_bytes = dask_queries._entry_bytes(pydaf.open_daf(path, "r"), whole.plan)
    chunk_bytes = int(entry_bytes * max(1, sum(whole.lengths)) / 6) + 1
    graph = dask_queries._graph(path, query, chunk_bytes)
    assert graph.plan.kind == "select" and len(graph.ranges) >= 4, graph.plan.reason
    local = pydaf.open_daf(path, "r").get_np_query(query, cache=False)
    result = dask_queries.get_np_query(path, query, chunk_bytes=chunk_bytes)
    assert type(result) is type(local)
    assert np.asarray(result).tobytes() == np.asarray(local).tobytes(), (result, local)  # (bitwise: NaN too)


@pytest.mark.parametrize("query", [
    "@ cell : score / kind >> Median",
    "@ cell [ even ] : level / kind >> Quantile p 0.3",
    "@ cell : with_nan / kind >> Median",  # (NaN in one group only)
    "@ cell : level / kind =@ >> Median || -1",  # (K4: the default)
    "@ cell @ gene :: normal >| Sum / kind >> Median",
    "@ cell @ gene :: huge >| Max / kind >> Quantile p 0.8",
])
def test_median_and_quantile_per_group_are_exact(client, selection_path, query):
    """Per group, each piece returns its values and their groups; the combination selects per group with the kernels'
    own code (the vector on one worker, not the matrix)."""
    path = selection_path
    chunk_bytes = 100_000 if "::" in query else 800
    graph = dask_queries._graph(path, query, chunk_bytes)
    assert graph.plan.kind == "group" and len(graph.pieces[0].dask) - 1 >= 4, graph.plan.reason
    local = pydaf.open_daf(path, "r").get_np_query(query, cache=False)
    result = dask_queries.get_np_query(path, query, chunk_bytes=chunk_bytes)
    assert result.dtype == local.dtype and result.tobytes() == local.tobytes(), (result, local)
    labelled = dask_queries.get_query(path, query, chunk_bytes=chunk_bytes)
    assert labelled.equals(pydaf.open_daf(path, "r").get_query(query, cache=False))


@pytest.mark.parametrize(("data", "query"), [
    ("selection_path", "@ cell @ gene :: normal >> Median"),
    ("selection_path", "@ cell @ gene :: signed >> Quantile p 0.9"),
    ("mode_path", "@ cell @ gene :: tied64 >> Mode"),
    ("mode_path", "@ cell @ gene :: tie_value_first >> Mode"),
])
def test_rounds_are_one_lazy_task_and_labelled(client, request, data, query):
    """``query`` of a selection or a mode gives one task, which submits each round's pieces to the cluster from its
    worker."""
    from dask.utils import key_split

    path = request.getfixturevalue(data)
    local = pydaf.open_daf(path, "r")
    chunk_bytes = _mode_chunk_bytes(path, query) if data == "mode_path" else 100_000
    lazy = dask_queries.query(path, query, chunk_bytes=chunk_bytes)
    expected = local.get_np_query(query, cache=False)
    assert lazy.shape == () and lazy.dtype == expected.dtype
    assert [key_split(key) for key in lazy.__dask_graph__() if "rounds" in str(key)] == ["in_rounds"]
    assert lazy.compute().tobytes() == expected.tobytes()
    assert lazy.compute(scheduler="synchronous") == expected
    assert dask_queries.get_query(path, query, chunk_bytes=100_000) == local.get_query(query, cache=False)


@pytest.mark.parametrize(("data", "query"), [("selection_path", "@ cell [ none ] @ gene :: normal >> Median"),
                                            ("mode_path", "@ cell [ none ] @ gene :: normal >> Mode")])
def test_rounds_of_no_values_fail_as_locally(client, request, data, query):
    path = request.getfixturevalue(data)
    with pytest.raises(pydaf.DafError) as local_error:
        pydaf.open_daf(path, "r").get_np_query(query, cache=False)
    with pytest.raises(pydaf.DafError) as dask_error:
        dask_queries.get_np_query(path, query, chunk_bytes=100_000)
    assert type(dask_error.value) is type(local_error.value)


def test_a_selection_narrows_by_rounds(selection_path, monkeypatch):
    """Each round narrows to the buckets holding the order statistics: all-equal values take one round per 16 bits of
    their key; spread values end once a bucket is small (the pieces return its keys)."""
    rounds: dict[str, list] = {}

    def counted(query):
        graph = dask_queries._graph(selection_path, query, 100_000)
        asked: list = []
        run = dask_queries._select_rounds(graph.source, str(graph.plan.prefix), graph.plan.axis, graph.ranges,
                                          lambda tasks: list(dask.compute(*tasks, scheduler="synchronous")))
        value = dask_queries._select(lambda prefixes: asked.append(prefixes) or run(prefixes), graph.plan.reduction,
                                     lambda: None)
        rounds[query] = asked
        return value

    daf = pydaf.open_daf(selection_path, "r")
    for query in ("@ cell @ gene :: equal >> Median", "@ cell @ gene :: normal >> Median",
                  "@ cell @ gene :: bytes >> Median"):
        assert counted(query) == daf.get_np_query(query, cache=False)
    assert len(rounds["@ cell @ gene :: equal >> Median"]) == 2  # (the bucket of 2.5: its one key)
    assert rounds["@ cell @ gene :: equal >> Median"][-1] == ((49156, 16, True),)
    assert len(rounds["@ cell @ gene :: normal >> Median"]) == 2  # (then the keys of a small bucket)
    assert rounds["@ cell @ gene :: normal >> Median"][-1][0][2]
    assert len(rounds["@ cell @ gene :: bytes >> Median"]) == 1  # (8 bits: the histogram is the values)
    # Never asking for keys: one round per 16 bits of the key, all the values in one bucket each time.
    monkeypatch.setattr(dask_queries, "_FEW_KEYS", 0)
    assert counted("@ cell @ gene :: equal >> Quantile p 0.7") == 2.5
    assert len(rounds["@ cell @ gene :: equal >> Quantile p 0.7"]) == 4
    assert all(not want_keys for asked in rounds["@ cell @ gene :: equal >> Quantile p 0.7"]
               for _, _, want_keys in asked)


# Mode of a whole matrix or vector: counted by rounds over the pieces, bitwise equal to local.

N_MODE_CELLS, N_MODE_GENES = 400, 90  # (36000 values: even, so that a sparse matrix can tie its zeros)


def _tied(n_values: int, dtype, rng) -> np.ndarray:
    """Column-major values where 7, 5 and 9 each occur 40 times, more than any other value: 7 first (position 0), but
    5's last occurrence (the middle) comes before 7's and 9's, so 5 is the mode (Julia picks the first value to reach
    the top count). Each is spread over the whole, so over the pieces."""
    values = (rng.permutation(n_values) % (n_values // 3)).astype(dtype)  # (background: each value 3 times)
    values[3 * np.linspace(1, n_values // 6, 40).astype(np.int64) + 1] = 5
    values[np.concatenate(([0], 3 * np.linspace(n_values // 6 + 2, n_values // 3 - 2, 39).astype(np.int64) + 2))] = 7
    values[3 * np.linspace(n_values // 9, n_values // 3 - 1, 40).astype(np.int64)] = 9
    return values


def _sparse_from(flat: np.ndarray, shape: tuple[int, int]) -> scipy.sparse.csc_matrix:
    """A CSC matrix storing exactly the non-zero entries of ``flat`` (column-major), and its -0.0 entries as stored
    (explicit) zeros."""
    matrix = flat.reshape(shape, order="F")
    stored = (matrix != 0) | np.signbit(matrix)
    rows, columns = np.nonzero(stored.T)  # (column-major: by column, then row)
    rows, columns = columns, rows
    indptr = np.concatenate(([0], np.cumsum(np.bincount(columns, minlength=shape[1]))))
    return scipy.sparse.csc_matrix((matrix[rows, columns], rows, indptr), shape=shape)


@pytest.fixture(scope="module")
def mode_path(tmp_path_factory):
    """Matrices and vectors whose modes test each rule: continuous values (all counts 1), real ties with different
    last positions (Float32, Int64), Bool, UInt8, sparse matrices whose zeros win, tie with a stored value either
    way, or lose to a stored value, NaN (the mode, or not), -0.0 and 0.0 counted as one value, only flipped stored."""
    rng = np.random.default_rng(37)
    shape = (N_MODE_CELLS, N_MODE_GENES)
    n_values = shape[0] * shape[1]
    daf = pydaf.MemoryDaf(name="modes!")
    daf.add_axis("cell", [f"C{index}" for index in range(N_MODE_CELLS)])
    daf.add_axis("gene", [f"G{index}" for index in range(N_MODE_GENES)])
    daf.set_vector("cell", "even", np.arange(N_MODE_CELLS) % 2 == 0)
    daf.set_vector("cell", "none", np.zeros(N_MODE_CELLS, dtype=bool))
    daf.set_vector("gene", "odd", np.arange(N_MODE_GENES) % 2 == 1)
    daf.set_vector("cell", "score", rng.normal(size=N_MODE_CELLS))
    daf.set_vector("cell", "tied", _tied(N_MODE_CELLS * 3, np.int32, rng)[:N_MODE_CELLS])
    daf.set_vector("cell", "level", rng.integers(0, 6, N_MODE_CELLS).astype(np.int16))
    dense = {
        "normal": rng.normal(size=n_values),
        "tied32": _tied(n_values, np.float32, rng),
        "tied64": _tied(n_values, np.int64, rng),
        "small32": rng.integers(-3, 4, n_values).astype(np.float32),
        "small64": rng.integers(-3, 4, n_values).astype(np.int64),
        "flags": rng.random(n_values) < 0.5,
        "bytes": rng.integers(0, 256, n_values).astype(np.uint8),
    }
    nan_mode = rng.normal(size=n_values)
    nan_mode[rng.random(n_values) < 0.1] = np.nan  # (NaNs, counted as one value, are the mode)
    dense["nan_mode"] = nan_mode
    with_nan = rng.integers(0, 30, n_values).astype(np.float64)
    with_nan[rng.random(n_values) < 0.02] = np.nan  # (fewer NaNs than each integer)
    dense["with_nan"] = with_nan
    zeros = rng.choice(np.array([-1.0, 1.0, 2.0]), n_values, p=[0.3, 0.3, 0.4])
    zero = rng.random(n_values) < 0.55  # (0.0 and -0.0: neither alone, but both together, beats 2.0)
    zeros[zero] = np.where(rng.random(int(zero.sum())) < 0.5, -0.0, 0.0)
    dense["signed_zeros"] = zeros
    negative_zeros = rng.integers(1, 4, n_values).astype(np.float64)
    negative_zeros[rng.random(n_values) < 0.4] = -0.0  # (only -0.0: the mode, its sign kept)
    dense["negative_zeros"] = negative_zeros
    for name, values in dense.items():
        daf.set_matrix("cell", "gene", name, np.asfortranarray(values.reshape(shape, order="F")), relayout=False)
    daf.set_matrix("gene", "cell", "flipped",
                   np.asfortranarray(_tied(n_values, np.int64, rng).reshape(shape[::-1], order="F")),
                   relayout=False)
    # Sparse: the zeros win; a stored value wins; 3 ties with the zeros (36000 = 2 x 17998 + 4 (4.0)).
    sparse = {}
    sparse["counts"] = scipy.sparse.random(*shape, density=0.05, format="csc", random_state=7,
                                           data_rvs=lambda size: rng.integers(1, 9, size=size)).astype(np.uint16)
    stored = np.zeros(n_values)
    stored[rng.random(n_values) < 0.7] = 2.5
    stored[rng.random(n_values) < 0.05] = -1.0
    sparse["stored"] = _sparse_from(stored, shape)
    for name, last_is_zero in (("tie_zero_first", False), ("tie_value_first", True)):
        flat = np.zeros(n_values)
        threes = rng.permutation(np.arange(1, n_values - 1))[:17_998]
        if not last_is_zero:  # (3 at the last position: the zeros reach their count first)
            threes[0] = n_values - 1
        flat[threes] = 3.0
        fours = rng.permutation(np.flatnonzero(flat == 0)[1:-1])[:4]
        flat[fours] = 4.0
        explicit = rng.permutation(np.flatnonzero(flat == 0)[1:-1])[:50]
        flat[explicit] = -0.0  # (stored, explicit zeros: counted with the implicit ones)
        assert np.count_nonzero(flat == 3.0) == np.count_nonzero(flat == 0) == 17_998
        matrix = _sparse_from(flat, shape)
        assert matrix.nnz == 17_998 + 4 + 50
        sparse[name] = matrix
    for name, values in sparse.items():
        daf.set_matrix("cell", "gene", name, values, relayout=False)
    path = str(tmp_path_factory.mktemp("dask_mode") / "modes.h5df")
    pydaf.copy_all(pydaf.open_daf(path, "w"), daf, progress=False, relayout=False)
    return path


MODES = [
    f"{axes} :: {name} >> Mode"
    for name in ("normal", "tied32", "tied64", "small32", "small64", "flags", "bytes", "nan_mode", "with_nan",
                 "negative_zeros", "counts", "stored", "tie_zero_first", "tie_value_first")
    for axes in ("@ cell @ gene", "@ cell [ even ] @ gene [ odd ]")
] + [
    "@ cell @ gene :: flipped >> Mode",  # (stored only as (gene, cell): pieces of the query's rows)
    "@ gene @ cell :: flipped >> Mode",
    "@ cell [ even ] @ gene :: flipped >> Mode",
    "@ cell @ gene :: counts % Convert type Int64 >> Mode",
    "@ cell : tied >> Mode",
    "@ cell [ even ] : tied >> Mode",
    "@ cell : level >> Mode",
    "@ cell : score >> Mode",
    "@ cell [ none ] @ gene :: normal >> Mode || 7",  # (no values: the default)
]


def _mode_chunk_bytes(path: str, query: str) -> int:
    """About 6 pieces of the selected entries."""
    whole = dask_queries._graph(path, query, 1 << 40)
    entry_bytes = dask_queries._entry_bytes(pydaf.open_daf(path, "r"), whole.plan)
    return int(entry_bytes * max(1, sum(whole.lengths)) / 6) + 1


@pytest.mark.parametrize("query", MODES)
def test_mode_is_counted_exactly(client, mode_path, query):
    path = mode_path
    chunk_bytes = _mode_chunk_bytes(path, query)
    graph = dask_queries._graph(path, query, chunk_bytes)
    assert graph.plan.kind == "mode" and len(graph.ranges) >= 4, graph.plan.reason
    local = pydaf.open_daf(path, "r").get_np_query(query, cache=False)
    result = dask_queries.get_np_query(path, query, chunk_bytes=chunk_bytes)
    assert type(result) is type(local)
    assert np.asarray(result).tobytes() == np.asarray(local).tobytes(), (result, local)  # (bitwise: NaN, -0.0)


def test_the_mode_tables_rules(mode_path):
    """The data set tests what it means to: the local modes are the values each rule gives."""
    daf = pydaf.open_daf(mode_path, "r")
    assert daf.get_np_query("@ cell @ gene :: tied64 >> Mode") == 5  # (7 first, but 5 reached the count first)
    assert daf.get_np_query("@ cell @ gene :: tied32 >> Mode") == 5
    assert np.isnan(daf.get_np_query("@ cell @ gene :: nan_mode >> Mode"))
    assert not np.isnan(daf.get_np_query("@ cell @ gene :: with_nan >> Mode"))
    assert daf.get_np_query("@ cell @ gene :: stored >> Mode") == 2.5
    assert daf.get_np_query("@ cell @ gene :: counts >> Mode") == 0
    assert daf.get_np_query("@ cell @ gene :: tie_zero_first >> Mode") == 0
    assert daf.get_np_query("@ cell @ gene :: tie_value_first >> Mode") == 3
    assert daf.get_np_query("@ cell @ gene :: signed_zeros >> Mode") == 0
    negative = daf.get_np_query("@ cell @ gene :: negative_zeros >> Mode")
    assert negative == 0 and np.signbit(negative)
    first = daf.get_np_query("@ cell @ gene :: normal", cache=False)[0, 0]
    assert daf.get_np_query("@ cell @ gene :: normal >> Mode") == first  # (all counts 1: the first value)


def test_mode_of_signed_zeros(client, mode_path):
    """-0.0 and 0.0 are one value (as ``np.unique`` counts them), so zero is the mode; which zero the local engine
    returns when both are there is its sort's (``np.unique``'s argsort), not the data's: the dask result is 0.0
    then, equal but maybe of another sign (documented). Alone, -0.0 keeps its sign (the table above); a sparse
    matrix's zero is 0.0, as locally."""
    path = mode_path
    query = "@ cell @ gene :: signed_zeros >> Mode"
    chunk_bytes = _mode_chunk_bytes(path, query)
    local = pydaf.open_daf(path, "r").get_np_query(query, cache=False)
    result = dask_queries.get_np_query(path, query, chunk_bytes=chunk_bytes)
    assert type(result) is type(local) and result == local == 0
    assert not np.signbit(result)
    sparse = dask_queries.get_np_query(path, "@ cell @ gene :: tie_zero_first >> Mode",
                                       chunk_bytes=_mode_chunk_bytes(path, "@ cell @ gene :: tie_zero_first >> Mode"))
    assert sparse == 0 and not np.signbit(sparse)  # (50 stored -0.0 among the zeros)


def test_a_mode_of_no_selected_entry_is_the_default(client, mode_path):
    # (No selected entry of the split axis: one task, the default.)
    query = "@ cell @ gene [ ! odd & odd ] :: normal >> Mode || 7"
    assert dask_queries._graph(mode_path, query, 100_000).plan.kind == "one"
    assert dask_queries.get_np_query(mode_path, query, chunk_bytes=100_000) \
        == pydaf.open_daf(mode_path, "r").get_np_query(query, cache=False) == 7


def test_a_mode_counts_by_batches(mode_path, monkeypatch):
    """With batches of at most 1000 values: a bucket of more is counted by its next 16 bits (small integers share
    their keys' top 48 bits: three more rounds of histograms), and the batches take one round each; the result is the
    same."""
    rounds: dict[str, list] = {}

    def counted(query):
        graph = dask_queries._graph(mode_path, query, 100_000)
        asked: list = []
        run = dask_queries._mode_rounds(graph.source, str(graph.plan.prefix), graph.plan.axis, graph.ranges,
                                        graph.plan.dimension,
                                        lambda tasks: list(dask.compute(*tasks, scheduler="synchronous")))
        value = dask_queries._mode(lambda histograms, batch: asked.append((histograms, batch))
                                   or run(histograms, batch), graph.plan.reduction, lambda: None)
        rounds[query] = asked
        return value

    daf = pydaf.open_daf(mode_path, "r")
    queries = ("@ cell @ gene :: small64 >> Mode", "@ cell @ gene :: tied32 >> Mode",
               "@ cell @ gene :: tie_value_first >> Mode", "@ cell @ gene :: tie_zero_first >> Mode")
    for query in queries:  # (unbatched: one histogram, one batch of every value)
        assert counted(query).tobytes() == daf.get_np_query(query, cache=False).tobytes()
        assert len(rounds[query]) == 2 and rounds[query][1][0] == ()
    monkeypatch.setattr(dask_queries, "_MODE_BATCH", 1000)
    for query in queries:
        assert counted(query).tobytes() == daf.get_np_query(query, cache=False).tobytes()
    small = rounds["@ cell @ gene :: small64 >> Mode"]  # (7 values, each ~5000 times: each its own batch)
    # (-3..-1 and 0..3 differ in their keys' top bit: two buckets, each narrowed to one key in three rounds)
    assert [bits for histograms, _ in small for _, bits in histograms] == [0, 16, 16, 32, 32, 48, 48]
    assert sum(batch is not None for _, batch in small) == 7
    assert all(low == high for _, batch in small if batch is not None for low, high in [batch])
    tied = rounds["@ cell @ gene :: tied32 >> Mode"]  # (36000 values in batches of at most 1000, or one key)
    assert sum(batch is not None for _, batch in tied) >= 36
