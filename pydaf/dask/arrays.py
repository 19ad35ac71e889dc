"""Stored vectors and matrices as dask arrays, read by the workers themselves.

Each task of the graph carries a :class:`~pydaf.dask.sources.DafSource` and the entries (or columns) it reads, and
opens the data set in its own process (:func:`~pydaf.dask.sources.open_source`): nothing large is pickled into the
graph. The client opens the source locally only to learn shapes, types and (for sparse data) where to cut the chunks,
so a missing axis or property raises pydaf's own error when the array is built, not on a worker.

Chunks follow the stored layout: a matrix is cut into ranges of its stored columns (of the transposed stored matrix,
that is into row ranges, when only the other layout is stored). A dense chunk is a read-only view of the file where
the storage maps it (zero-copy); a sparse chunk is a ``scipy.sparse.csc_matrix`` (its values shared with the map, its
0-based indices a copy), never densified. The pages of a mapped chunk leave the worker's resident memory when the
chunk is dropped (:func:`~pydaf._os.maps.release_pages`): the reader keeps its map of the whole matrix open for the
next chunk, and without that a worker that read every chunk would count the whole file in its RSS, which is what
dask's memory limits measure.
"""

from __future__ import annotations

import os
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from .._os.maps import mapped_region, release_pages
from ..core.cache import MatrixCacheKey
from ..core.readers import DafReader
from ..errors import DafValueError
from ..sparse import SparseMatrixCSC, SparseVector
from .sources import DafSource, local_reader, open_source

if TYPE_CHECKING:
    import dask.array as da

__all__ = ["matrix", "vector"]

#: The default size of a chunk (dask's own default ``array.chunk-size`` is 128 MiB).
CHUNK_BYTES = 128 << 20

# How many columns of a sparse matrix are sampled to estimate its density when its column pointers can't be read
# without decoding (packed) or downloading (HTTP) the whole matrix.
_SAMPLED_COLUMNS = 32


@dataclass(frozen=True)
class _VectorChunk:
    """What one task of :func:`vector` reads: entries ``[start, stop)`` of a vector."""

    source: DafSource
    axis: str
    name: str
    start: int
    stop: int


@dataclass(frozen=True)
class _MatrixChunk:
    """What one task of :func:`matrix` reads: stored columns ``[start, stop)`` of the matrix stored as ``(rows_axis,
    columns_axis)``; ``flipped`` if that is the transpose of the requested layout (the chunk is then transposed)."""

    source: DafSource
    rows_axis: str
    columns_axis: str
    name: str
    start: int
    stop: int
    flipped: bool


def _release_when_dropped(owner: object, array: np.ndarray) -> None:
    """When ``owner`` (a chunk) is garbage, drop the pages of ``array`` (a contiguous view of a file map it holds)
    from this process's resident set; the data stays in the file and the page cache. Anything not mapped is left."""
    if array.size and (array.flags.c_contiguous or array.flags.f_contiguous) and mapped_region(array) is not None:
        weakref.finalize(owner, release_pages, array.view())


def _read_vector_chunk(chunk: _VectorChunk) -> np.ndarray:
    daf = open_source(chunk.source)
    stored = daf.get_stored_vector(chunk.axis, chunk.name)
    if isinstance(stored, SparseVector):  # (only the entries of this range are made dense)
        positions = stored.nzind - 1
        first, last = np.searchsorted(positions, [chunk.start, chunk.stop])
        piece = SparseVector(chunk.stop - chunk.start, positions[first:last] - chunk.start + 1,
                             stored.nzval[first:last])
        dense = piece.to_dense()
        dense.flags.writeable = False
        return dense
    values = stored[chunk.start:chunk.stop]
    _release_when_dropped(values, values)
    return values


def _read_matrix_chunk(chunk: _MatrixChunk) -> np.ndarray | sp.csc_matrix:
    daf = open_source(chunk.source)
    stored = daf.get_stored_matrix_columns(chunk.rows_axis, chunk.columns_axis, chunk.name,
                                           slice(chunk.start, chunk.stop))
    if isinstance(stored, SparseMatrixCSC):
        piece = stored.transpose() if chunk.flipped else stored
        result = piece.to_scipy()  # (0-based indices copied; values shared)
        # The stored indices were only read to copy them; the values stay in use as long as the chunk.
        release_pages(stored.rowval)
        if piece is not stored:
            release_pages(stored.nzval)
        else:
            _release_when_dropped(result, stored.nzval)
        return result
    values = stored.T if chunk.flipped else stored
    _release_when_dropped(values, values)
    return values


def _chunks(length: int, step: int) -> tuple[int, ...]:
    step = max(1, int(step))
    return tuple(min(step, length - start) for start in range(0, length, step)) or (0,)


def _bounds(sizes: tuple[int, ...]) -> list[tuple[int, int]]:
    stops = np.cumsum(sizes).tolist()
    return [(stop - size, stop) for size, stop in zip(sizes, stops, strict=True)]


def _array(name: str, tasks: dict, chunks: tuple[tuple[int, ...], ...], meta: Any) -> da.Array:
    import dask.array as da
    from dask.highlevelgraph import HighLevelGraph

    return da.Array(HighLevelGraph.from_collections(name, tasks, dependencies=()), name, chunks, meta=meta)


def _require_positive(value: int | None, what: str) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | np.integer) or value <= 0):
        raise DafValueError(f"invalid {what}: {value!r} (expected a positive integer, or None for the default)")


def vector(daf: DafReader | str | os.PathLike, axis: str, name: str, *,
           chunk_entries: int | None = None) -> da.Array:
    """A vector of a stored data set (open, or its path or URL) as a 1-d dask array, in chunks of ``chunk_entries``
    entries (by default, about 128 MiB of values each). Each task opens the data set in its worker; a chunk of a
    mapped vector is a read-only view of the file, and a sparse vector is made dense one chunk at a time.

    Example:
        >>> import pydaf, tempfile, os, numpy as np
        >>> path = os.path.join(tempfile.mkdtemp(), "cells.h5df")
        >>> with pydaf.open_daf(path, "w") as daf:
        ...     _ = daf.add_axis("cell", ["A", "B", "C"]).set_vector("cell", "age", np.array([31, 45, 60], np.uint8))
        >>> ages = vector(path, "cell", "age", chunk_entries=2)
        >>> ages.chunks, ages.compute(scheduler="synchronous").tolist()
        (((2, 1),), [31, 45, 60])
    """
    from dask.base import tokenize

    _require_positive(chunk_entries, "chunk_entries")
    source, reader = local_reader(daf)
    length = reader.axis_length(axis)
    stored = reader.get_stored_vector(axis, name)  # (pydaf's own error if it is missing)
    dtype = stored.nzval.dtype if isinstance(stored, SparseVector) else stored.dtype
    step = chunk_entries or max(1, CHUNK_BYTES // max(1, dtype.itemsize))
    chunks = _chunks(length, step)
    key = "daf-vector-" + tokenize(source, axis, name, chunks)
    tasks = {(key, index): (_read_vector_chunk, _VectorChunk(source, axis, name, start, stop))
             for index, (start, stop) in enumerate(_bounds(chunks))}
    return _array(key, tasks, (chunks,), np.empty((0,), dtype=dtype))


def _sparse_widths(reader: DafReader, rows_axis: str, columns_axis: str, name: str, probe: SparseMatrixCSC,
                   target: int) -> tuple[int, ...]:
    """Column counts of chunks holding about ``target`` bytes each of a sparse matrix (as scipy holds it)."""
    n_columns = reader.axis_length(columns_axis)
    per_entry = 8 + probe.nzval.dtype.itemsize
    if n_columns == 0:
        return (0,)
    if reader.cache.entry(MatrixCacheKey(rows_axis, columns_axis, name)) is not None:
        # The whole matrix is at hand (mapped, or read anyway): cut where the bytes add up.
        whole = reader.get_stored_matrix(rows_axis, columns_axis, name, relayout=False)
        assert isinstance(whole, SparseMatrixCSC)
        colptr = np.asarray(whole.colptr, np.int64)
        sizes = np.diff(colptr) * per_entry + 8
        totals = np.concatenate([[0], np.cumsum(sizes)])
        cuts = [0]
        while cuts[-1] < n_columns:
            stop = int(np.searchsorted(totals, totals[cuts[-1]] + target, side="right")) - 1
            cuts.append(min(n_columns, max(stop, cuts[-1] + 1)))
        return tuple(np.diff(cuts).tolist())
    # Packed or remote: the density of a few columns spread over the matrix (decodes only the chunks holding them).
    sampled = np.unique(np.linspace(0, n_columns - 1, min(n_columns, _SAMPLED_COLUMNS)).astype(np.int64))
    sample = reader.get_stored_matrix_columns(rows_axis, columns_axis, name, sampled)
    per_column = sample.nnz / len(sampled) * per_entry + 8 if isinstance(sample, SparseMatrixCSC) else 8
    return _chunks(n_columns, target // max(1, int(per_column)))


def matrix(daf: DafReader | str | os.PathLike, rows_axis: str, columns_axis: str, name: str, *,
           relayout: bool = True, chunk_bytes: int | None = None) -> da.Array:
    """A matrix of a stored data set (open, or its path or URL) as a 2-d dask array of shape ``(n_rows, n_cols)``,
    cut along the stored layout's columns into chunks of about ``chunk_bytes`` (default 128 MiB). If only the other
    layout is stored (and ``relayout``), the chunks are row ranges of the transposed stored matrix (no relayout of
    the whole matrix is computed anywhere).

    A dense chunk is a read-only view of the file where the storage maps it (zero-copy); a sparse chunk is a
    ``scipy.sparse.csc_matrix`` (its ``_meta`` too), never densified: computing the array gives a scipy sparse matrix.
    dask's reductions don't take scipy chunks (scipy's ``sum`` has no ``keepdims``); reduce each chunk with
    ``map_blocks`` instead.

    Example:
        >>> import pydaf, tempfile, os, numpy as np, scipy.sparse as sp
        >>> path = os.path.join(tempfile.mkdtemp(), "cells.daf")
        >>> with pydaf.open_daf(path, "w") as daf:
        ...     _ = daf.add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
        ...     _ = daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(np.array([[0, 2], [1, 0], [0, 3]])))
        ...     _ = daf.set_matrix("cell", "gene", "score", np.arange(6.0).reshape(3, 2), relayout=False)
        >>> umis = matrix(path, "gene", "cell", "UMIs", chunk_bytes=16)
        >>> umis.chunks, type(umis._meta).__name__
        (((2,), (1, 1, 1)), 'csc_matrix')
        >>> umis.compute(scheduler="synchronous").toarray().tolist()
        [[0, 1, 0], [2, 0, 3]]
        >>> scores = matrix(path, "gene", "cell", "score")  # (only the other layout is stored: row ranges of it)
        >>> scores.sum(axis=1).compute(scheduler="synchronous").tolist()
        [6.0, 9.0]
    """
    from dask.base import tokenize

    _require_positive(chunk_bytes, "chunk_bytes")
    target = chunk_bytes or CHUNK_BYTES
    source, reader = local_reader(daf)
    if reader.has_matrix(rows_axis, columns_axis, name, relayout=False):  # (pydaf's own error for a missing axis)
        flipped = False
    elif relayout and rows_axis != columns_axis and reader.has_matrix(columns_axis, rows_axis, name, relayout=False):
        flipped = True
    else:
        reader.get_stored_matrix(rows_axis, columns_axis, name, relayout=relayout)  # (raises pydaf's missing error)
        raise AssertionError("unreachable: the matrix exists in neither layout")
    stored_rows, stored_columns = (columns_axis, rows_axis) if flipped else (rows_axis, columns_axis)
    probe = reader.get_stored_matrix_columns(stored_rows, stored_columns, name, slice(0, 0))  # (no data read)
    n_rows = reader.axis_length(stored_rows)
    if isinstance(probe, SparseMatrixCSC):
        widths = _sparse_widths(reader, stored_rows, stored_columns, name, probe, target)
        dtype = probe.nzval.dtype
        meta: Any = sp.csc_matrix((0, 0), dtype=dtype)
    else:
        dtype = probe.dtype
        widths = _chunks(reader.axis_length(stored_columns), target // max(1, n_rows * dtype.itemsize))
        meta = np.empty((0, 0), dtype=dtype)
    key = "daf-matrix-" + tokenize(source, rows_axis, columns_axis, name, flipped, widths)
    tasks = {}
    for index, (start, stop) in enumerate(_bounds(widths)):
        position = (key, index, 0) if flipped else (key, 0, index)
        tasks[position] = (_read_matrix_chunk, _MatrixChunk(source, stored_rows, stored_columns, name, start, stop,
                                                            flipped))
    chunks = (widths, (n_rows,)) if flipped else ((n_rows,), widths)
    return _array(key, tasks, chunks, meta)
