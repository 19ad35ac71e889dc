"""Writing dask arrays into a data set: the chunks are computed on the cluster (or by dask's local scheduler) and
written by the calling process as they arrive, through its :class:`~pydaf.DafWriter`, whose lock keeps the one
writer rule (workers never write).

Everything a writer would refuse (a missing axis, a length that is not the axis length, an existing property without
``overwrite``, a reserved or invalid name, a type no format stores) is refused before anything is computed or
written. A dense numeric matrix is written into the buffer of :meth:`~pydaf.DafWriter.empty_dense_matrix` (a map of
the file where the format allows) a chunk at a time, so only the chunks in flight are in memory; if a chunk fails,
the writer removes the partial matrix, as that builder does. A vector, a sparse matrix (its csc pieces assembled), a
string matrix and any matrix of an H5df are set whole once every chunk has arrived: a failure leaves the data set as
it was.

An H5df open for writing locks its file against every other process (as HDF5 does for Julia), so the workers can't
read it meanwhile: to write results into the H5df they are computed from, pass its path, which is opened for writing
only once they are computed (after the workers close their handles of it).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import scipy.sparse as sp

from ..core.names import RESERVED_VECTORS, require_valid_name
from ..core.readers import DafReader
from ..core.writers import DafWriter
from ..errors import DafNameError, DafShapeError, DafValueError, existing_property
from ..formats.h5df.format import H5dfFormat
from ..open import open_daf
from ..storage_types import storage_dtype
from .sources import cluster_client, forget_sources

if TYPE_CHECKING:
    import dask.array as da

__all__ = ["store_matrix", "store_vector"]


def _release_workers(path: str | None) -> None:
    """Make the workers, and this process's tasks, close their handles of the data set about to be written (an
    H5df's writer needs every other reader gone)."""
    if path is None:
        return
    forget_sources(path)
    client = cluster_client()
    if client is not None:
        client.run(forget_sources, path)


def _starts(chunks: tuple[tuple[int, ...], ...]) -> list[list[int]]:
    return [np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int).tolist() for sizes in chunks]


def _computed_blocks(array: da.Array, *, progress: bool, desc: str) -> Iterator[tuple[tuple[int, ...], Any]]:
    """Each block of ``array`` with its grid position, in the order they are computed. On a ``distributed`` client
    all are submitted at once (shared inputs are computed once) and each is gathered, then released, as it
    completes; else they are computed one at a time."""
    from tqdm.auto import tqdm

    blocks = array.to_delayed().ravel()
    positions = list(np.ndindex(*array.numblocks))
    client = cluster_client()
    with tqdm(total=len(positions), desc=desc, unit="chunk", disable=not progress) as bar:
        if client is None:
            for position, block in zip(positions, blocks, strict=True):
                yield position, block.compute()
                bar.update()
            return
        from distributed import as_completed

        futures = client.compute(list(blocks))
        where = {future.key: position for future, position in zip(futures, positions, strict=True)}
        try:
            for future in as_completed(futures):
                value = future.result()
                position = where[future.key]
                future.release()
                yield position, value
                bar.update()
        finally:
            client.cancel(futures)  # (after a failure, nothing is left computing for nobody)


def _require_array(array: Any, ndim: int, what: str, daf_name: str) -> None:
    import dask.array as da

    if not isinstance(array, da.Array) or array.ndim != ndim:
        got = f"a {array.ndim}-d dask array" if isinstance(array, da.Array) else type(array).__name__
        raise DafValueError(f"the value of the {what}\nis {got}, not a {ndim}-d dask array", daf_name=daf_name,
                            hint="(pass a dask.array.Array; a numpy or scipy value is set directly with the writer)")
    if array.dtype.kind not in "OUS":  # (strings are checked when set, as by the writer)
        storage_dtype(array.dtype, what=f"element type of the {what}")


def _require_length(daf: DafReader, axis: str, length: int, what: str) -> None:
    axis_length = daf.axis_length(axis)  # (pydaf's own error for a missing axis)
    if length != axis_length:
        raise DafShapeError(f"the length: {length}\nof the {what}\nis different from the length: {axis_length}\n"
                            f"of the axis: {axis}", daf_name=daf.name)


def _check_vector(daf: DafReader, axis: str, name: str, array: da.Array, overwrite: bool) -> None:
    require_valid_name(name, what="vector", daf_name=daf.name)
    if name in RESERVED_VECTORS:
        raise DafNameError(f"setting the reserved vector: {name}\nfor the axis: {axis}", daf_name=daf.name)
    what = f"vector: {name}"
    _require_array(array, 1, what, daf.name)
    _require_length(daf, axis, array.shape[0], what)
    if not overwrite and daf.has_vector(axis, name):
        raise existing_property("vector", axis, name, daf_name=daf.name)


def _check_matrix(daf: DafReader, rows_axis: str, columns_axis: str, name: str, array: da.Array, overwrite: bool,
                  relayout: bool) -> None:
    what = f"matrix: {name}"
    require_valid_name(name, what="matrix", daf_name=daf.name)
    _require_array(array, 2, what, daf.name)
    _require_length(daf, rows_axis, array.shape[0], f"rows of the {what}")
    _require_length(daf, columns_axis, array.shape[1], f"columns of the {what}")
    if not overwrite:
        for rows, columns in ((rows_axis, columns_axis), (columns_axis, rows_axis))[:2 if relayout else 1]:
            if daf.has_matrix(rows, columns, name, relayout=False):
                raise existing_property("matrix", rows, columns, name, daf_name=daf.name)


def _gathered(array: da.Array, *, progress: bool, desc: str) -> np.ndarray | sp.csc_matrix:
    """The whole value of ``array`` in this process: a numpy array (column-major), or a CSC matrix if its chunks are
    sparse."""
    row_starts, column_starts = _starts(array.chunks) if array.ndim == 2 else (_starts(array.chunks)[0], [0])
    if array.ndim == 2 and sp.issparse(array._meta):
        grid: list[list[Any]] = [[None] * len(column_starts) for _ in row_starts]
        for (row, column), block in _computed_blocks(array, progress=progress, desc=desc):
            grid[row][column] = block if sp.issparse(block) else sp.csc_matrix(block)
        return sp.bmat(grid, format="csc", dtype=array.dtype) if len(grid) * len(grid[0]) > 1 else \
            sp.csc_matrix(grid[0][0])
    value = np.empty(array.shape, dtype=array.dtype, order="F")
    for position, block in _computed_blocks(array, progress=progress, desc=desc):
        if sp.issparse(block):
            block = block.toarray()
        if array.ndim == 1:
            value[row_starts[position[0]]:row_starts[position[0]] + block.shape[0]] = block
        else:
            value[row_starts[position[0]]:row_starts[position[0]] + block.shape[0],
                  column_starts[position[1]]:column_starts[position[1]] + block.shape[1]] = block
    return value


def _set_when_computed(path: str, array: da.Array, set_value: Callable[[DafWriter, Any], object], *, progress: bool,
                       desc: str) -> None:
    """The form given a path (already checked read-only): the array computed and gathered here, the workers' handles
    of the data set closed, then the data set opened for writing and the value set."""
    value = _gathered(array, progress=progress, desc=desc)
    _release_workers(path)
    with open_daf(path, "r+") as writer:
        set_value(cast(DafWriter, writer), value)  # (open_daf in "r+" gives a writer)


def _writes_exclude_readers(daf: DafReader) -> bool:
    # (no process may write an HDF5 file while others read it: the workers, which may be reading it for this array)
    return isinstance(daf.format, H5dfFormat)


def store_vector(daf: DafWriter | str | os.PathLike, axis: str, name: str, array: da.Array, *,
                 overwrite: bool = False, progress: bool = True) -> DafWriter | None:
    """Compute a 1-d dask array and set it as the vector ``name`` of ``axis`` (as :meth:`~pydaf.DafWriter.set_vector`,
    with the array's element type). ``daf`` is a data set open for writing (returned), or the path of one, opened
    for writing only once the array is computed (returns ``None``): the way to write into the H5df the array is
    computed from, since no process may read an H5df that another writes. Refused before anything is computed if
    the writer would refuse it. A progress bar counts the chunks (``progress=False`` silences it).

    Example:
        >>> import pydaf, dask.array as da, numpy as np
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B", "C"])
        >>> _ = store_vector(daf, "cell", "age", da.from_array(np.array([3, 4, 5], np.int16), chunks=2),
        ...                  progress=False)
        >>> daf.get_vector("cell", "age").tolist(), daf.get_vector("cell", "age").dtype
        ([3, 4, 5], dtype('int16'))
        >>> store_vector(daf, "cell", "age", da.zeros(3, chunks=2), progress=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafExistsError: existing vector: age
        for the axis: cell
        in the daf data: ...
    """
    desc = f"store {name}"
    if not isinstance(daf, DafReader):
        path = os.fspath(daf)
        with open_daf(path) as reader:
            _check_vector(reader, axis, name, array, overwrite)
        _set_when_computed(path, array, lambda writer, value: writer.set_vector(axis, name, value, overwrite=overwrite),
                           progress=progress, desc=desc)
        return None
    set_vector = daf.set_vector  # (a read-only data set says here how to open it for writing)
    _check_vector(daf, axis, name, array, overwrite)
    value = _gathered(array, progress=progress, desc=desc)
    _release_workers(daf.complete_path())
    return set_vector(axis, name, value, overwrite=overwrite)


def store_matrix(daf: DafWriter | str | os.PathLike, rows_axis: str, columns_axis: str, name: str,
                 array: da.Array, *, overwrite: bool = False, relayout: bool = True,
                 progress: bool = True) -> DafWriter | None:
    """Compute a 2-d dask array of shape ``(n_rows, n_cols)`` and set it as the matrix ``name`` (as
    :meth:`~pydaf.DafWriter.set_matrix`, with the array's element type; sparse if its chunks are scipy sparse); with
    ``relayout`` (the default) the other layout is stored too. ``daf`` is a data set open for writing (returned), or
    the path of one, opened for writing only once the array is computed (returns ``None``), as for
    :func:`store_vector`. Refused before anything is computed if the writer would refuse it. A dense numeric matrix
    is written into the data set a chunk at a time as the chunks arrive (but into an H5df, which is written once
    every chunk is here). A progress bar counts the chunks (``progress=False`` silences it).

    Example:
        >>> import pydaf, dask.array as da, numpy as np
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
        >>> values = da.from_array(np.arange(6, dtype=np.float32).reshape(3, 2), chunks=(2, 1))
        >>> _ = store_matrix(daf, "cell", "gene", "score", values, progress=False)
        >>> daf.get_matrix("gene", "cell", "score", relayout=False).tolist()
        [[0.0, 2.0, 4.0], [1.0, 3.0, 5.0]]
        >>> store_matrix(daf, "gene", "cell", "UMIs", values, progress=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafShapeError: the length: 3
        of the rows of the matrix: UMIs
        is different from the length: 2
        of the axis: gene
        in the daf data: ...
    """
    desc = f"store {name}"
    relayout = relayout and rows_axis != columns_axis
    if not isinstance(daf, DafReader):
        path = os.fspath(daf)
        with open_daf(path) as reader:
            _check_matrix(reader, rows_axis, columns_axis, name, array, overwrite, relayout)
            gather = _writes_exclude_readers(reader)
        if not gather:  # (its writer doesn't stop the workers reading: streamed in)
            with open_daf(path, "r+") as writer:
                store_matrix(writer, rows_axis, columns_axis, name, array, overwrite=overwrite, relayout=relayout,
                             progress=progress)
            return None
        _set_when_computed(path, array, lambda writer, value: writer.set_matrix(
            rows_axis, columns_axis, name, value, overwrite=overwrite, relayout=relayout), progress=progress, desc=desc)
        return None
    set_matrix = daf.set_matrix  # (a read-only data set says here how to open it for writing)
    _check_matrix(daf, rows_axis, columns_axis, name, array, overwrite, relayout)
    if sp.issparse(array._meta) or array.dtype.kind in "OUS" or _writes_exclude_readers(daf):
        value = _gathered(array, progress=progress, desc=desc)
        _release_workers(daf.complete_path())
        return set_matrix(rows_axis, columns_axis, name, value, overwrite=overwrite, relayout=relayout)
    row_starts, column_starts = _starts(array.chunks)
    with daf.empty_dense_matrix(rows_axis, columns_axis, name, array.dtype, overwrite=overwrite) as buffer:
        for (row, column), block in _computed_blocks(array, progress=progress, desc=desc):
            if sp.issparse(block):
                block = block.toarray()
            buffer[row_starts[row]:row_starts[row] + block.shape[0],
                   column_starts[column]:column_starts[column] + block.shape[1]] = block
    if relayout:
        daf.relayout_matrix(rows_axis, columns_axis, name, overwrite=overwrite)
    return cast(DafWriter, daf)
