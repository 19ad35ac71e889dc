"""The content of an AnnData (or of a 10x Cell Ranger matrix) in Daf's terms, and its writing into a Daf data set.

Readers (:mod:`pydaf.interop.anndata` for ``.h5ad``/``.h5mu`` files and in-memory ``AnnData`` objects,
:mod:`pydaf.interop.tenx` for 10x ``.h5`` files) sort what they find into a :class:`Content`: what Daf can hold
(``obs``/``var`` columns in their order, ``uns`` scalars, matrices as :class:`~pydaf.interop.h5ad_elements.MatrixSource`
read later in slices) and one message per element it cannot. :func:`content_as_daf` then checks every shape, reports
the unsupported elements to the handler (so ``"error"`` raises before the destination is touched), and writes:
axes, vectors, scalars, then the matrices, streamed straight into the destination's builders.

Orientation: AnnData matrices are row-major ``obs x var``; Daf's are column-major. A CSR matrix's arrays *are* the
column-major ``var x obs`` matrix, so it is copied as it is (indices shifted to 1-based), as Julia's Daf does; with
``relayout`` the ``obs x var`` layout is also computed (a parallel numba transpose straight into the destination). As
in Julia, square ``obsp``/``varp`` matrices are the **transpose** of AnnData's (no data is moved).

Column order: Daf keeps no order of an axis' vectors, so when the ``obs``/``var`` columns are not in alphabetical
order their order is recorded in the scalar ``<axis>_column_order`` (the names, one per line), which the export
(:func:`~pydaf.interop.daf_as_h5ad`, :func:`~pydaf.interop.daf_as_anndata`) uses and does not copy into ``uns``.

Example:
    >>> content = Content(obs={"_index": Column(np.array(["A", "B"], dtype=object))},
    ...                   var={"_index": Column(np.array(["X"], dtype=object)),
    ...                        "score": Column(np.array([0.5]))})
    >>> daf = content_as_daf(content, None, obs_is="cell", var_is="gene", name="example!")
    >>> daf.axis_vector("cell").tolist(), daf.get_vector("gene", "score").tolist()
    (['A', 'B'], [0.5])
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from .. import kernels
from ..core.names import is_valid_name
from ..core.validation import NUMBA_THRESHOLD, sparse_matrix_problem
from ..core.writers import DafWriter
from ..errors import DafError, DafFormatError, DafShapeError, DafTypeError, DafUnsupportedError, DafValueError
from ..formats.mapping import populate_pages
from ..formats.memory import MemoryDaf
from ..sparse import SparseMatrixCSC
from ..storage_types import STRING_DTYPE, scalar_value, storage_dtype
from .destinations import build_daf, require_distinct
from .h5ad_elements import Column, MatrixSource, Unsupported

__all__ = ["UNSUPPORTED_HANDLERS", "Content", "UnsupportedElementWarning", "column_order_scalar", "content_as_daf",
           "open_source", "progress_bar", "sort_columns", "sort_matrix", "sort_uns"]

#: What to do with an element Daf can't hold: skip it silently, warn (one :class:`UnsupportedElementWarning` per
#: element), or raise a :class:`~pydaf.DafUnsupportedError` before anything is written.
UNSUPPORTED_HANDLERS = ("ignore", "warn", "error")

# Entries per slice when matrices are streamed (bounded buffers: ~100 MB for 8-byte values and indices).
_CHUNK = 1 << 23


class UnsupportedElementWarning(UserWarning):
    """An element of an AnnData (or 10x) file that Daf can't hold and that was skipped, or a nullable column whose
    missing entries were stored as empty values. The first line of the message names the element."""


@dataclass
class Content:
    """What an AnnData holds, in Daf's terms, before anything is written: ``obs``/``var`` as ``{"_index": Column,
    column: Column, ...}`` in column order, ``uns`` scalars, ``matrices`` as ``(member, key, source)`` with member
    one of ``X``, ``layers``, ``obsp``, ``varp``, and one message per element Daf cannot hold."""

    uns: dict[str, Any] = field(default_factory=dict)
    obs: dict[str, Column] = field(default_factory=dict)
    var: dict[str, Column] = field(default_factory=dict)
    matrices: list[tuple[str, str, MatrixSource]] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    origin: str = "the AnnData object"  # where it comes from, for messages


def report_unsupported(messages: list[str], handler: str, name: str) -> None:
    """Report each message to the ``unsupported_handler``: nothing, an :class:`UnsupportedElementWarning` each, or
    a :class:`~pydaf.DafUnsupportedError` for the first.

    Example:
        >>> report_unsupported(["unsupported element: obsm/X_pca"], "error", "cells!")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafUnsupportedError: unsupported element: obsm/X_pca
        in AnnData for the daf data: cells!
    """
    if handler not in UNSUPPORTED_HANDLERS:
        raise DafValueError(f"invalid unsupported_handler: {handler!r} (expected one of: "
                            f"{', '.join(UNSUPPORTED_HANDLERS)})")
    for message in messages:
        text = f"{message}\nin AnnData for the daf data: {name}"
        if handler == "error":
            raise DafUnsupportedError(text)
        if handler == "warn":
            warnings.warn(text, UnsupportedElementWarning, stacklevel=4)


def sort_matrix(content: Content, member: str, key: str, value: Any) -> None:
    """File one element of a matrix member (``X``, ``layers``, ``obsp``, ``varp``; a new ``key`` replaces an earlier
    one) or note why it can't be held.

    Example:
        >>> content = Content()
        >>> sort_matrix(content, "layers", "spliced", Unsupported("awkward array"))
        >>> content.unsupported
        ['unsupported element: layers/spliced (awkward array)']
    """
    where = member if member == "X" else f"{member}/{key}"
    if member != "X" and not is_valid_name(key):
        content.unsupported.append(f"unsupported element: {where} (a name Daf can't store)")
    elif isinstance(value, Unsupported):
        content.unsupported.append(f"unsupported element: {where} ({value.reason})")
    elif not isinstance(value, MatrixSource):
        content.unsupported.append(f"unsupported element: {where} (not a matrix)")
    elif value.dtype.kind not in "biuf" or value.dtype.itemsize > 8 or value.dtype == np.float16:
        content.unsupported.append(f"unsupported element: {where} (element type: {value.dtype})")
    else:
        content.matrices[:] = [entry for entry in content.matrices if entry[:2] != (member, key)]
        content.matrices.append((member, key, value))


def sort_columns(content: Content, member: str, columns: Any) -> dict[str, Any]:
    """The columns of ``obs``/``var`` (``{"_index": ..., name: Column | Unsupported}``) that Daf can hold, noting
    why each other one can't.

    Example:
        >>> content = Content()
        >>> kept = sort_columns(content, "obs", {"_index": Column(np.array(["A"], dtype=object)),
        ...                                      "name": Column(np.array([1]))})
        >>> list(kept), content.unsupported
        (['_index'], ['unsupported element: obs/name (a reserved Daf vector name)'])
    """
    if isinstance(columns, Unsupported):
        raise DafFormatError(f"can't read the AnnData {member}: {columns.reason}\nin {content.origin}")
    kept: dict[str, Any] = {}
    for name, column in columns.items():
        where = f"{member}/{name}" if name != "_index" else f"{member} names"
        if isinstance(column, Unsupported):
            content.unsupported.append(f"unsupported element: {where} ({column.reason})")
            continue
        if name != "_index" and name in ("name", "index"):
            content.unsupported.append(f"unsupported element: {where} (a reserved Daf vector name)")
            continue
        if name != "_index" and not is_valid_name(name):
            content.unsupported.append(f"unsupported element: {where} (a name Daf can't store)")
            continue
        try:
            storage_dtype(column.values.dtype)
        except DafTypeError:
            content.unsupported.append(f"unsupported element: {where} (element type: {column.values.dtype})")
            continue
        if column.missing is not None:
            empty = '""' if column.values.dtype == STRING_DTYPE else ("false" if column.values.dtype == bool else "0")
            content.unsupported.append(f"nullable element: {where} has {int(column.missing.sum())} missing values, "
                                       f"stored as {empty}")
        kept[name] = column
    return kept


def sort_uns(content: Content, uns: dict[str, Any]) -> None:
    """File the ``uns`` values that are scalars, noting why each other one can't be held.

    Example:
        >>> content = Content()
        >>> sort_uns(content, {"organism": "human", "params": {}})
        >>> content.uns, content.unsupported
        ({'organism': 'human'}, ['unsupported element: uns/params (nested mapping)'])
    """
    for key, value in uns.items():
        if isinstance(value, Unsupported):
            content.unsupported.append(f"unsupported element: uns/{key} ({value.reason})")
        elif not is_valid_name(key):
            content.unsupported.append(f"unsupported element: uns/{key} (a name Daf can't store)")
        elif isinstance(value, str | bool | int | float | np.generic):
            try:
                scalar_value(value)
            except DafTypeError:
                content.unsupported.append(f"unsupported element: uns/{key} (a {type(value).__name__})")
            else:
                content.uns[key] = value
        else:
            kind = "nested mapping" if isinstance(value, dict) else "not a scalar"
            content.unsupported.append(f"unsupported element: uns/{key} ({kind})")



def _chosen(value: str | None, uns: dict[str, Any], key: str, default: str) -> str:
    if value is not None:
        return value
    stored = uns.get(key)
    return stored if isinstance(stored, str) else default


@contextmanager
def progress_bar(total: int, progress: bool, description: str) -> Iterator[Any]:
    """A tqdm progress bar of ``total`` entries (disabled unless ``progress``).

    Example:
        >>> with progress_bar(10, False, "AnnData -> Daf") as bar:
        ...     bar.update(10)
    """
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=description, unit="entry", unit_scale=True, disable=not progress,
              mininterval=0.5) as bar:
        yield bar


def _read_slice(source: Any, start: int, stop: int, out: np.ndarray) -> None:
    """Copy ``source[start:stop]`` (an h5py dataset or an array) into ``out`` (converting the type on the way)."""
    if isinstance(source, h5py.Dataset):
        if stop > start:
            source.read_direct(out, np.s_[start:stop])
    else:
        out[...] = source[start:stop]


def _read_indices(source: Any, start: int, stop: int, out: np.ndarray, limit: int, where: str) -> None:
    """Copy the 0-based ``source[start:stop]`` into ``out`` as 1-based indices, refusing any outside ``0..limit - 1``
    *before* converting them (HDF5 clips a negative value into an unsigned type, numpy wraps it: either would make a
    wrong index that looks valid). Read straight into ``out`` when the types have the same size."""
    dtype = np.dtype(source.dtype)
    raw = out.view(dtype) if out.dtype.itemsize == dtype.itemsize else np.empty(stop - start, dtype=dtype)
    _read_slice(source, start, stop, raw)
    if raw.size and (raw.min() < 0 or raw.max() >= limit):
        position = int(np.argmax((raw < 0) | (raw >= limit)))
        raise DafFormatError(f"invalid indices of the AnnData sparse matrix: {where}\n"
                             f"found: indices[{start + position}] = {raw[position]}\nexpected: 0..{limit - 1}")
    np.add(raw, 1, out=out, casting="unsafe")


def _indptr(source: MatrixSource, n_columns: int, where: str) -> np.ndarray:
    indptr = np.asarray(source.indptr[()] if isinstance(source.indptr, h5py.Dataset) else source.indptr,
                        dtype=np.int64)
    if indptr.shape != (n_columns + 1,) or indptr[0] != 0 or indptr[-1] != source.nnz or np.any(np.diff(indptr) < 0):
        raise DafFormatError(f"invalid indptr of the sparse matrix: {where}\n(expected {n_columns + 1} non-decreasing "
                             f"offsets from 0 to nnz = {source.nnz})")
    return indptr


def _write_sparse(daf: DafWriter, rows_axis: str, columns_axis: str, name: str, source: MatrixSource, where: str,
                  bar: Any) -> None:
    """Store the 0-based CSC arrays of ``source`` as the 1-based CSC matrix ``(rows_axis, columns_axis)``,
    streaming slices straight into the destination's buffers."""
    indptr = _indptr(source, daf.axis_length(columns_axis), where)
    if source.index_mask is not None:
        _write_masked_sparse(daf, rows_axis, columns_axis, name, source, indptr, where, bar)
        return
    nnz = source.nnz
    with daf.empty_sparse_matrix(rows_axis, columns_axis, name, source.dtype, nnz) as (colptr, rowval, nzval):
        np.add(indptr, 1, out=colptr, casting="unsafe")
        for start in range(0, nnz, _CHUNK):
            stop = min(start + _CHUNK, nnz)
            populate_pages(rowval[start:stop])
            populate_pages(nzval[start:stop])
            _read_indices(source.indices, start, stop, rowval[start:stop], daf.axis_length(rows_axis), where)
            _read_slice(source.data, start, stop, nzval[start:stop])
            bar.update(stop - start)
        # Checked before the builder makes the matrix exist (the builder checks again, the pages are in the cache).
        _require_valid_indices(SparseMatrixCSC((daf.axis_length(rows_axis), daf.axis_length(columns_axis)), colptr,
                                               rowval, nzval), where)
        del colptr, rowval, nzval  # drop the maps of the file now (they count in this process's RSS)


def _write_masked_sparse(daf: DafWriter, rows_axis: str, columns_axis: str, name: str, source: MatrixSource,
                         indptr: np.ndarray, where: str, bar: Any) -> None:
    """:func:`_write_sparse` keeping only the entries whose index ``source.index_mask`` keeps (renumbered in order),
    in two streaming passes: one counts the kept entries of each column (the new ``colptr``), the other copies them
    into the destination's buffers."""
    mask = np.asarray(source.index_mask, dtype=bool)
    renumbered = np.cumsum(mask, dtype=np.int64)  # the 1-based new index of each kept one
    nnz = source.nnz
    kept_before = np.zeros(indptr.shape[0], dtype=np.int64)  # kept entries before each column's first
    kept_so_far = 0
    for start in range(0, nnz, _CHUNK):
        stop = min(start + _CHUNK, nnz)
        raw = np.empty(stop - start, dtype=np.int64)
        _read_indices(source.indices, start, stop, raw, mask.shape[0], where)
        running = np.cumsum(mask[raw - 1], dtype=np.int64) + kept_so_far
        columns = slice(int(np.searchsorted(indptr, start, side="right")),
                        int(np.searchsorted(indptr, stop, side="right")))
        kept_before[columns] = running[indptr[columns] - start - 1]
        kept_so_far = int(running[-1])
    with daf.empty_sparse_matrix(rows_axis, columns_axis, name, source.dtype, kept_so_far) as (colptr, rowval,
                                                                                                nzval):
        np.add(kept_before, 1, out=colptr, casting="unsafe")
        position = 0
        for start in range(0, nnz, _CHUNK):
            stop = min(start + _CHUNK, nnz)
            raw = np.empty(stop - start, dtype=np.int64)
            _read_indices(source.indices, start, stop, raw, mask.shape[0], where)
            values = np.empty(stop - start, dtype=source.dtype)
            _read_slice(source.data, start, stop, values)
            kept = mask[raw - 1]
            count = int(kept.sum())
            rowval[position:position + count] = renumbered[raw[kept] - 1]
            nzval[position:position + count] = values[kept]
            position += count
            bar.update(stop - start)
        _require_valid_indices(SparseMatrixCSC((daf.axis_length(rows_axis), daf.axis_length(columns_axis)), colptr,
                                               rowval, nzval), where)
        del colptr, rowval, nzval


def _require_valid_indices(matrix: SparseMatrixCSC, where: str) -> None:
    """Check the (writable, 1-based) indices copied from an AnnData sparse matrix, first sorting the entries of each
    column by row if they are out of order (AnnData allows it, Daf does not)."""
    problem = sparse_matrix_problem(matrix.shape, matrix.colptr, matrix.rowval)
    if problem is not None and problem.unsorted:
        if matrix.nnz < NUMBA_THRESHOLD:
            order = np.lexsort((matrix.rowval, matrix.entry_columns()))
            matrix.rowval[...] = matrix.rowval[order]
            matrix.nzval[...] = matrix.nzval[order]
        else:
            kernels.sort_csc_columns(matrix.colptr, matrix.rowval, matrix.nzval)
        problem = sparse_matrix_problem(matrix.shape, matrix.colptr, matrix.rowval)
        if problem is not None and problem.unsorted:
            raise DafFormatError(f"duplicate entries in the AnnData sparse matrix: {where}\n({problem.found}, "
                                 "after sorting each column's entries by row)")
    if problem is not None:
        index = problem.component.replace("rowval", "indices").replace("colptr", "indptr")
        raise DafFormatError(f"invalid {index} of the AnnData sparse matrix: {where}\n(as Daf's 1-based "
                             f"{problem.component}) found: {problem.found}\nexpected: {problem.expected}")


def _write_dense(daf: DafWriter, rows_axis: str, columns_axis: str, name: str, source: MatrixSource,
                 bar: Any) -> None:
    """Store a row-major ``(n_columns_axis, n_rows_axis)`` AnnData matrix as the column-major ``(rows_axis,
    columns_axis)`` Daf matrix: the same bytes."""
    with daf.empty_dense_matrix(rows_axis, columns_axis, name, source.dtype) as buffer:
        row_major = buffer.T
        n_rows = row_major.shape[0]
        step = max(1, _CHUNK // max(1, row_major.shape[1]))
        for start in range(0, n_rows, step):
            stop = min(start + step, n_rows)
            populate_pages(row_major[start:stop])
            if isinstance(source.data, h5py.Dataset):
                source.data.read_direct(row_major, np.s_[start:stop], np.s_[start:stop])
            else:
                row_major[start:stop] = source.data[start:stop]
            bar.update((stop - start) * row_major.shape[1])
        del buffer, row_major


def _matrix_axes(member: str, axes: dict[str, str]) -> tuple[str, str]:
    """The Daf ``(rows, columns)`` axes of an AnnData matrix member (obs x var, or square)."""
    obs_axis, var_axis = axes["obs"], axes["var"]
    return {"obsp": (obs_axis, obs_axis), "varp": (var_axis, var_axis)}.get(member, (obs_axis, var_axis))


def _require_shapes(content: Content, axes: dict[str, str]) -> None:
    """Check, before anything is written, that every column and matrix fits the obs and var axes."""
    lengths = {axes[member]: getattr(content, member)["_index"].values.shape[0] for member in ("obs", "var")}
    for member in ("obs", "var"):
        for name, column in getattr(content, member).items():
            if column.values.ndim != 1 or column.values.shape[0] != lengths[axes[member]]:
                raise DafFormatError(f"the shape: {column.values.shape}\nof the AnnData column: {member}/{name}\n"
                                     f"is different from the number of {member} names: {lengths[axes[member]]}\n"
                                     f"in {content.origin}")
    for member, key, source in content.matrices:
        rows_axis, columns_axis = _matrix_axes(member, axes)
        expected = (lengths[rows_axis], lengths[columns_axis])
        if tuple(source.shape) != expected:
            where = member if member == "X" else f"{member}/{key}"
            raise DafFormatError(f"the shape: {source.shape[0]} x {source.shape[1]}\nof the AnnData matrix: {where}"
                                 f"\nis different from: {expected[0]} x {expected[1]} ({member} of obs x var)\n"
                                 f"in {content.origin}")


def _write_matrix(daf: DafWriter, member: str, key: str, source: MatrixSource, axes: dict[str, str], X_is: str,
                  relayout: bool, bar: Any, origin: str) -> None:
    where = member if member == "X" else f"{member}/{key}"
    try:
        _write_member(daf, member, key, source, axes, X_is, relayout, bar, where)
    except DafError as error:
        if origin in str(error):
            raise
        raise type(error)(f"{error}\nin {origin}") from error
    except Exception as error:  # a truncated or damaged dataset, read in slices
        raise DafFormatError(f"can't read the AnnData matrix: {where}\nin {origin}\n({type(error).__name__}: "
                             f"{error})") from error


def _write_member(daf: DafWriter, member: str, key: str, source: MatrixSource, axes: dict[str, str], X_is: str,
                  relayout: bool, bar: Any, where: str) -> None:
    rows_axis, columns_axis = _matrix_axes(member, axes)
    name = X_is if member == "X" else key
    square = rows_axis == columns_axis
    if source.kind == "csc" and square:
        # Daf's square matrices are the transpose of AnnData's: the CSC arrays are transposed (in memory).
        def whole(part: Any, dtype: Any) -> np.ndarray:
            return np.asarray(part[()] if isinstance(part, h5py.Dataset) else part, dtype=dtype)

        matrix = SparseMatrixCSC(source.shape, _indptr(source, source.shape[1], where) + 1,
                                 whole(source.indices, np.int64) + 1, whole(source.data, source.dtype).copy())
        _require_valid_indices(matrix, where)
        daf.set_matrix(rows_axis, columns_axis, name, matrix.transpose(), relayout=False)
        bar.update(source.nnz)
        return
    if source.kind == "csc":
        stored = (rows_axis, columns_axis)
        _write_sparse(daf, *stored, name, source, where, bar)
    elif source.kind == "csr":
        stored = (columns_axis, rows_axis)
        _write_sparse(daf, *stored, name, source, where, bar)
    else:
        stored = (columns_axis, rows_axis)
        _write_dense(daf, *stored, name, source, bar)
    if relayout and not square:
        daf.relayout_matrix(*stored, name)
        bar.update(source.nnz)


def open_source(path: str | os.PathLike, destination: Any, kind: str) -> h5py.File:
    """Open the HDF5 file a conversion reads (``kind`` names it in messages), once sure it is not the storage of
    ``destination`` (a :class:`~pydaf.DafWriter`, a path or ``None``).

    Example:
        >>> open_source("/no/such/file.h5ad", None, "h5ad")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: can't open the h5ad file: /no/such/file.h5ad
        ...
    """
    text = os.fspath(path)
    target = destination.complete_path() if isinstance(destination, DafWriter) else destination
    if target is not None:
        require_distinct(text, target)
    try:
        return h5py.File(text, "r")
    except OSError as error:
        raise DafFormatError(f"can't open the {kind} file: {text}\n({error})") from error


def column_order_scalar(axis: str) -> str:
    """The name of the scalar recording the order of an axis' vectors as the source had its columns.

    Example:
        >>> column_order_scalar("cell")
        'cell_column_order'
    """
    return f"{axis}_column_order"


def _fill(daf: DafWriter, content: Content, axes: dict[str, str], X_is: str, relayout: bool, progress: bool) -> None:
    scalars = dict(content.uns)  # numpy scalars keep their width (Int32 stays Int32)
    # Recorded, as daf_as_h5ad records them in uns, so converting back restores AnnData's obs/var/X. Each scalar is
    # set once (an append-only destination, a ZIP archive, refuses a second write of one uns already held).
    for key, value, default in (("obs_is", axes["obs"], "obs"), ("var_is", axes["var"], "var"), ("X_is", X_is, "X")):
        if value != default:
            scalars[key] = value
    for key, value in scalars.items():
        daf.set_scalar(key, value, overwrite=True)
    for member in ("obs", "var"):
        columns = getattr(content, member)
        daf.add_axis(axes[member], columns["_index"].values)
        order = [name for name in columns if name != "_index"]
        for name in order:
            daf.set_vector(axes[member], name, columns[name].values)
        if order != sorted(order):  # (Daf lists vectors sorted; the export would lose the source's order)
            daf.set_scalar(column_order_scalar(axes[member]), "\n".join(order), overwrite=True)
    total = sum(source.nnz * (2 if relayout and member in ("X", "layers") else 1)
                for member, _, source in content.matrices)
    with progress_bar(total, progress, "AnnData -> Daf") as bar:
        for member, key, source in content.matrices:
            _write_matrix(daf, member, key, source, axes, X_is, relayout, bar, content.origin)


def content_as_daf(content: Content, destination: DafWriter | str | os.PathLike | None, *, name: str | None = None,
                   obs_is: str | None = None, var_is: str | None = None, X_is: str | None = None,
                   defaults: tuple[str, str, str] = ("obs", "var", "X"), unsupported_handler: str = "warn",
                   relayout: bool = False, progress: bool = False) -> DafWriter:
    """Write ``content`` into ``destination`` (a :class:`~pydaf.DafWriter`, written in place; a path, built aside
    and moved into place when complete; or ``None`` for a new :class:`~pydaf.MemoryDaf`), which is returned. The
    names of the obs and var axes and of the X matrix are ``obs_is``/``var_is``/``X_is``, else the ``uns`` scalars of
    those names, else ``defaults``. Everything is checked and the unsupported elements reported first.

    Example:
        >>> content = Content(obs={"_index": Column(np.array(["A"], dtype=object))},
        ...                   var={"_index": Column(np.array(["X"], dtype=object))}, unsupported=["unsupported: Y"])
        >>> content_as_daf(content, None, unsupported_handler="ignore").axes_set() == {"obs", "var"}
        True
    """
    uns = content.uns
    name = name if name is not None else _chosen(None, uns, "name", "anndata")
    axes = {"obs": _chosen(obs_is, uns, "obs_is", defaults[0]), "var": _chosen(var_is, uns, "var_is", defaults[1])}
    X_is = _chosen(X_is, uns, "X_is", defaults[2])
    if axes["obs"] == axes["var"]:
        raise DafValueError(f"the same name: {axes['obs']}\nfor the obs and var axes of the AnnData: {name}")
    for member in ("obs", "var"):
        names = getattr(content, member)["_index"].values
        if len(set(names.tolist())) != len(names):
            raise DafShapeError(f"duplicate {member} names in the AnnData: {name}\n(Daf axis entries are unique)")
    _require_shapes(content, axes)
    report_unsupported(content.unsupported, unsupported_handler, name)
    if isinstance(destination, DafWriter):
        _fill(destination, content, axes, X_is, relayout, progress)
        return destination
    if destination is None:
        daf = MemoryDaf(name=name)
        _fill(daf, content, axes, X_is, relayout, progress)
        return daf
    return build_daf(destination, lambda daf: _fill(daf, content, axes, X_is, relayout, progress), name=name)
