"""AnnData interop: ``.h5ad`` files and in-memory ``anndata.AnnData`` objects to and from Daf data sets.

The mapping is Julia's (``DataAxesFormats.AnnDataFormat``): ``obs`` and ``var`` become two named axes (``obs_is``,
``var_is``), ``X`` a matrix of them (``X_is``), ``layers`` more matrices, ``obsp``/``varp`` square matrices, the
``obs``/``var`` columns vectors and the scalars of ``uns`` scalars. The chosen names are stored as ``uns`` entries
(``obs_is``, ``var_is``, ``X_is``) when exporting, so importing restores them. Categoricals become strings; missing
entries of nullable columns become ``0``/``false``/``""`` (and are reported). What Daf cannot hold (``obsm``/``varm``,
nested ``uns``, awkward arrays, string matrices) goes to the ``unsupported_handler``: ``"ignore"``, ``"warn"`` (the
default: one warning per element) or ``"error"`` (raised before anything is written).

Safety: an ``.h5ad`` file is read as hostile input. Everything that can be checked before writing is (the obs/var
names, column lengths and types, matrix shapes, the ``indptr`` of sparse matrices); the indices of sparse matrices are
checked as they are copied, before the matrix is made to exist (a problem is a :class:`~pydaf.DafFormatError` naming
the element). Columns whose entries are out of order (allowed by AnnData and scipy) are sorted, as Daf requires.
A destination given as a path is built aside and moved into place only when complete
(:mod:`pydaf.interop.destinations`), so a failure leaves it as it was; a destination given as a
:class:`~pydaf.DafWriter` is written in place, so a failure may leave the properties written before it.

Orientation: AnnData matrices are row-major ``obs x var``; Daf's are column-major. A CSR ``X`` is, as it is stored,
the column-major ``var x obs`` matrix, so it is copied as is (indices shifted to 1-based), as Julia's Daf does; with
``relayout=True`` its ``obs x var`` layout is also computed, by a parallel numba transpose straight into the
destination (otherwise Daf computes it when first asked for, like Julia's ``relayout!``). As in Julia, square
``obsp``/``varp`` matrices are the **transpose** of AnnData's (no data is moved to make them column-major).

Example:
    >>> import os, tempfile, numpy as np, pydaf
    >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"]).add_axis("gene", ["X", "Y", "Z"])
    >>> daf.set_matrix("cell", "gene", "UMIs", np.array([[0, 1, 2], [3, 0, 0]]), relayout=False) \\
    ...     .set_vector("cell", "age", [3, 5])  # doctest: +ELLIPSIS
    MemoryDaf ...
    >>> path = os.path.join(tempfile.mkdtemp(), "cells.h5ad")
    >>> daf_as_h5ad(daf, path, obs_is="cell", var_is="gene", X_is="UMIs", progress=False)
    >>> back = h5ad_as_daf(path, progress=False)
    >>> sorted(back.axes_set()), back.get_matrix("cell", "gene", "UMIs").tolist()
    (['cell', 'gene'], [[0, 1, 2], [3, 0, 0]])
    >>> back.get_vector("cell", "age").tolist()
    [3, 5]
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from .. import kernels
from ..core.names import is_valid_name
from ..core.validation import NUMBA_THRESHOLD, sparse_matrix_problem
from ..core.writers import DafWriter
from ..errors import (
    DafError,
    DafFormatError,
    DafMissingError,
    DafShapeError,
    DafTypeError,
    DafUnsupportedError,
    DafValueError,
)
from ..formats.mapping import populate_pages
from ..sparse import SparseMatrixCSC
from ..storage_types import STRING_DTYPE, scalar_value, storage_dtype
from .destinations import build_daf, require_distinct, write_file_then_replace
from .h5ad_elements import (
    Column,
    MatrixSource,
    Unsupported,
    categorical_column,
    read_dataframe,
    read_element,
    read_guarded,
)

if TYPE_CHECKING:
    import anndata

    from ..core.readers import DafReader

__all__ = ["anndata_as_daf", "daf_as_anndata", "daf_as_h5ad", "h5ad_as_daf"]

UNSUPPORTED_HANDLERS = ("ignore", "warn", "error")

# Entries per slice when matrices are streamed (bounded buffers: ~100 MB for 8-byte values and indices).
_CHUNK = 1 << 23

_MATRIX_MEMBERS = ("X", "layers", "obsp", "varp")


@dataclass
class _Content:
    """What an AnnData holds, in Daf's terms, before anything is written."""

    uns: dict[str, Any] = field(default_factory=dict)
    obs: dict[str, Any] = field(default_factory=dict)
    var: dict[str, Any] = field(default_factory=dict)
    matrices: list[tuple[str, str, MatrixSource]] = field(default_factory=list)  # (member, key, source)
    unsupported: list[str] = field(default_factory=list)  # one message per element Daf cannot hold
    origin: str = "the AnnData object"  # where it comes from, for messages


def _report(messages: list[str], handler: str, name: str) -> None:
    if handler not in UNSUPPORTED_HANDLERS:
        raise DafValueError(f"invalid unsupported_handler: {handler!r} (expected one of: "
                            f"{', '.join(UNSUPPORTED_HANDLERS)})")
    for message in messages:
        text = f"{message}\nin AnnData for the daf data: {name}"
        if handler == "error":
            raise DafUnsupportedError(text)
        if handler == "warn":
            warnings.warn(text, UserWarning, stacklevel=4)


def _sort_out(content: _Content, member: str, key: str, value: Any) -> None:
    """File one element of a matrix member (X, layers, obsp, varp) or note why it can't be held."""
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
        content.matrices.append((member, key, value))


def _sort_columns(content: _Content, member: str, columns: Any) -> dict[str, Any]:
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


def _sort_uns(content: _Content, uns: dict[str, Any]) -> None:
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


# Reading an h5ad file.


def _read_h5ad(root: h5py.Group) -> _Content:
    content = _Content(origin=f"the AnnData file: {root.file.filename}")
    for member in ("obs", "var"):
        if member not in root:
            raise DafFormatError(f"missing {member} in the AnnData file: {root.file.filename}")
    content.obs = _sort_columns(content, "obs", read_guarded(root["obs"], read_dataframe))
    content.var = _sort_columns(content, "var", read_guarded(root["var"], read_dataframe))
    if "uns" in root:
        uns = root["uns"]
        if isinstance(uns, h5py.Group):
            _sort_uns(content, {key: _read_uns_value(uns[key]) for key in uns})
        else:
            content.unsupported.append("unsupported element: uns (not a group)")
    if "X" in root:
        _sort_out(content, "X", "X", read_element(root["X"]))
    for member in ("layers", "obsp", "varp"):
        if member in root:
            if not isinstance(root[member], h5py.Group):
                content.unsupported.append(f"unsupported element: {member} (not a group)")
                continue
            for key in root[member]:
                _sort_out(content, member, key, read_element(root[member][key]))
    for member in ("obsm", "varm"):
        if member in root:
            content.unsupported.extend(f"unsupported element: {member}/{key}" for key in root[member])
    for member in root:
        if member not in ("obs", "var", "uns", "X", "obsm", "varm", *_MATRIX_MEMBERS):
            content.unsupported.append(f"unsupported element: {member}")
    return content


def _read_uns_value(element: Any) -> Any:
    value = read_element(element)
    if isinstance(value, Column):
        return Unsupported("array")
    return value


# Reading an in-memory AnnData.


def _pandas_column(series: Any) -> Column | Unsupported:
    import pandas as pd

    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return categorical_column(series.cat.codes.to_numpy(), np.asarray(series.cat.categories.astype(str)))
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and not isinstance(dtype, np.dtype):
        # pandas' nullable types: missing entries become Julia's "empty" values (NaN stays NaN for floats).
        missing = series.isna().to_numpy()
        if pd.api.types.is_bool_dtype(dtype):
            values = series.to_numpy(dtype=bool, na_value=False)
        elif pd.api.types.is_integer_dtype(dtype):
            values = series.to_numpy(dtype=dtype.numpy_dtype, na_value=0)
        elif pd.api.types.is_float_dtype(dtype):
            return Column(series.to_numpy(dtype=dtype.numpy_dtype, na_value=np.nan))
        elif pd.api.types.is_string_dtype(dtype):
            values = np.asarray(series.fillna("").astype(object).to_numpy(), dtype=object)
        else:
            return Unsupported(f"column type: {dtype}")
        return Column(values, missing if missing.any() else None)
    values = series.to_numpy()
    if values.dtype == object:
        if not all(isinstance(value, str) for value in values.tolist()):
            return Unsupported("column of mixed objects")
        return Column(values.astype(object))
    if values.dtype.kind not in "biuf" or values.dtype == np.float16:
        return Unsupported(f"column type: {values.dtype}")
    return Column(values)


def _frame_columns(frame: Any) -> dict[str, Any]:
    columns: dict[str, Any] = {"_index": Column(np.asarray(frame.index.astype(str), dtype=object))}
    for name in frame.columns:
        columns[str(name)] = _pandas_column(frame[name])
    return columns


def _memory_matrix(value: Any) -> Any:
    import scipy.sparse as sp

    if sp.issparse(value):
        kind = value.format
        if kind not in ("csr", "csc"):
            value, kind = value.tocsr(), "csr"
        return MatrixSource(kind, value.shape, value.data.dtype, value.data, value.indices, value.indptr)
    if isinstance(value, np.ndarray) and value.ndim == 2:
        if value.dtype == object or value.dtype.kind in "SU":
            return Unsupported("string matrix")
        return MatrixSource("dense", value.shape, value.dtype, np.ascontiguousarray(value))
    return Unsupported(f"matrix type: {type(value).__name__}")


def _read_anndata(adata: anndata.AnnData) -> _Content:
    content = _Content()
    content.obs = _sort_columns(content, "obs", _frame_columns(adata.obs))
    content.var = _sort_columns(content, "var", _frame_columns(adata.var))
    _sort_uns(content, dict(adata.uns))
    if adata.X is not None:
        _sort_out(content, "X", "X", _memory_matrix(adata.X))
    for member in ("layers", "obsp", "varp"):
        for key, value in getattr(adata, member).items():
            _sort_out(content, member, key, _memory_matrix(value))
    for member in ("obsm", "varm"):
        content.unsupported.extend(f"unsupported element: {member}/{key}" for key in getattr(adata, member))
    if adata.raw is not None:
        content.unsupported.append("unsupported element: raw")
    return content


# Writing the content into a Daf data set.


def _chosen(value: str | None, uns: dict[str, Any], key: str, default: str) -> str:
    if value is not None:
        return value
    stored = uns.get(key)
    return stored if isinstance(stored, str) else default


@contextmanager
def _progress_bar(total: int, progress: bool, description: str) -> Iterator[Any]:
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
    nnz = source.nnz
    indptr = _indptr(source, daf.axis_length(columns_axis), where)
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


def _require_shapes(content: _Content, axes: dict[str, str]) -> None:
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


def _fill(daf: DafWriter, content: _Content, axes: dict[str, str], X_is: str, relayout: bool, progress: bool) -> None:
    for key, value in content.uns.items():
        daf.set_scalar(key, value, overwrite=True)  # numpy scalars keep their width (Int32 stays Int32)
    # Recorded, as daf_as_h5ad records them in uns, so converting back restores AnnData's obs/var/X.
    for key, value, default in (("obs_is", axes["obs"], "obs"), ("var_is", axes["var"], "var"), ("X_is", X_is, "X")):
        if value != default:
            daf.set_scalar(key, value, overwrite=True)
    for member in ("obs", "var"):
        columns = getattr(content, member)
        daf.add_axis(axes[member], columns["_index"].values)
        for name, column in columns.items():
            if name != "_index":
                daf.set_vector(axes[member], name, column.values)
    total = sum(source.nnz * (2 if relayout and member in ("X", "layers") else 1)
                for member, _, source in content.matrices)
    with _progress_bar(total, progress, "AnnData -> Daf") as bar:
        for member, key, source in content.matrices:
            _write_matrix(daf, member, key, source, axes, X_is, relayout, bar, content.origin)


def _as_daf(content: _Content, destination: Any, name: str | None, obs_is: str | None, var_is: str | None,
            X_is: str | None, unsupported_handler: str, relayout: bool, progress: bool) -> DafWriter:
    uns = content.uns
    name = name if name is not None else _chosen(None, uns, "name", "anndata")
    axes = {"obs": _chosen(obs_is, uns, "obs_is", "obs"), "var": _chosen(var_is, uns, "var_is", "var")}
    X_is = _chosen(X_is, uns, "X_is", "X")
    if axes["obs"] == axes["var"]:
        raise DafValueError(f"the same name: {axes['obs']}\nfor the obs and var axes of the AnnData: {name}")
    for member in ("obs", "var"):
        names = getattr(content, member)["_index"].values
        if len(set(names.tolist())) != len(names):
            raise DafShapeError(f"duplicate {member} names in the AnnData: {name}\n(Daf axis entries are unique)")
    _require_shapes(content, axes)
    _report(content.unsupported, unsupported_handler, name)
    if isinstance(destination, DafWriter):
        _fill(destination, content, axes, X_is, relayout, progress)
        return destination
    if destination is None:
        from ..formats.memory import MemoryDaf

        daf = MemoryDaf(name=name)
        _fill(daf, content, axes, X_is, relayout, progress)
        return daf
    return build_daf(destination, lambda daf: _fill(daf, content, axes, X_is, relayout, progress), name=name)


def h5ad_as_daf(path: str | os.PathLike, destination: DafWriter | str | os.PathLike | None = None, *,
                name: str | None = None, obs_is: str | None = None, var_is: str | None = None,
                X_is: str | None = None, unsupported_handler: str = "warn", relayout: bool = False,
                progress: bool = True) -> DafWriter:
    """Read an ``.h5ad`` file (with h5py; anndata is not needed) into a Daf data set: ``destination`` (a
    :class:`~pydaf.DafWriter`, a path for :func:`~pydaf.open_daf` in mode ``w``, or ``None`` for a new
    :class:`~pydaf.MemoryDaf`), which is returned. Large sparse matrices stream into the destination with bounded
    buffers. ``X`` and the layers are stored in the layout the file holds (CSR and dense as ``(var_is, obs_is)``, CSC
    as ``(obs_is, var_is)``), as Julia's Daf does; with ``relayout`` the other layout is stored too.

    Example:
        >>> import os, tempfile, numpy as np, pydaf
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5ad")
        >>> daf_as_h5ad(daf.set_matrix("cell", "gene", "UMIs", np.array([[1], [2]])), path, obs_is="cell",
        ...             var_is="gene", X_is="UMIs", progress=False)
        >>> h5ad_as_daf(path, progress=False).get_matrix("gene", "cell", "UMIs").tolist()
        [[1, 2]]
    """
    text = os.fspath(path)
    target = destination.complete_path() if isinstance(destination, DafWriter) else destination
    if target is not None:
        require_distinct(text, target)
    try:
        file = h5py.File(text, "r")
    except OSError as error:
        raise DafFormatError(f"can't open the h5ad file: {text}\n({error})") from error
    with file:
        try:
            content = _read_h5ad(file)
        except DafError:
            raise
        except Exception as error:  # anything the element readers did not name
            raise DafFormatError(f"can't read the AnnData file: {text}\n({type(error).__name__}: {error})") from error
        return _as_daf(content, destination, name, obs_is, var_is, X_is, unsupported_handler, relayout, progress)


def anndata_as_daf(adata: anndata.AnnData, destination: DafWriter | str | os.PathLike | None = None, *,
                   name: str | None = None, obs_is: str | None = None, var_is: str | None = None,
                   X_is: str | None = None, unsupported_handler: str = "warn", relayout: bool = False,
                   progress: bool = False) -> DafWriter:
    """Copy an in-memory ``anndata.AnnData`` into a Daf data set (the same mapping as :func:`h5ad_as_daf`).

    Example:
        >>> import anndata, numpy as np
        >>> adata = anndata.AnnData(np.array([[1.0, 0.0]], dtype=np.float32))
        >>> adata.obs_names, adata.var_names = ["A"], ["X", "Y"]
        >>> anndata_as_daf(adata, obs_is="cell", var_is="gene").get_matrix("cell", "gene", "X").tolist()
        [[1.0, 0.0]]
    """
    content = _read_anndata(adata)
    return _as_daf(content, destination, name, obs_is, var_is, X_is, unsupported_handler, relayout, progress)


# Daf to AnnData.


@dataclass
class _Export:
    obs_is: str
    var_is: str
    X_is: str
    uns: dict[str, Any]


def _export_names(daf: DafReader, obs_is: str | None, var_is: str | None, X_is: str | None) -> _Export:
    def chosen(value: str | None, key: str, default: str) -> str:
        if value is not None:
            return value
        stored = daf.get_scalar(key, default=None)
        return stored if isinstance(stored, str) else default

    export = _Export(chosen(obs_is, "obs_is", "obs"), chosen(var_is, "var_is", "var"), chosen(X_is, "X_is", "X"), {})
    if export.obs_is == export.var_is:
        raise DafValueError(f"the same axis: {export.obs_is}\nfor obs and var of the daf data: {daf.name}")
    for axis in (export.obs_is, export.var_is):
        if not daf.has_axis(axis):
            raise DafMissingError(f"missing axis: {axis}\nin the daf data: {daf.name}")
    if not daf.has_matrix(export.obs_is, export.var_is, export.X_is):
        raise DafMissingError(f"missing matrix: {export.X_is}\nfor the rows axis: {export.obs_is}\nand the columns "
                              f"axis: {export.var_is}\nin the daf data: {daf.name}")
    export.uns = {name: daf.get_scalar(name) for name in sorted(daf.scalars_set())}
    for key, value, default in (("obs_is", export.obs_is, "obs"), ("var_is", export.var_is, "var"),
                                ("X_is", export.X_is, "X")):
        if value != default:
            export.uns[key] = value
        else:
            export.uns.pop(key, None)
    return export


def _anndata_matrix(daf: DafReader, rows_axis: str, columns_axis: str, name: str, *, allow_csc: bool) -> Any:
    """The AnnData ``(rows_axis, columns_axis)`` matrix and its AnnData encoding: Daf's ``(columns_axis, rows_axis)``
    matrix as ``csr`` (its CSC arrays are the AnnData CSR arrays) or ``dense`` (its column-major values are the
    row-major ones); or, if ``allow_csc`` and only the sparse ``(rows_axis, columns_axis)`` layout is stored, that one
    as ``csc``, so nothing is relaid out."""
    if not daf.has_matrix(columns_axis, rows_axis, name, relayout=False) and allow_csc:
        stored = daf.get_stored_matrix(rows_axis, columns_axis, name, relayout=False)
        if isinstance(stored, SparseMatrixCSC):
            return stored, "csc"
    flipped = daf.get_stored_matrix(columns_axis, rows_axis, name)
    return flipped, "csr" if isinstance(flipped, SparseMatrixCSC) else "dense"


def _matrices(daf: DafReader, export: _Export, *, allow_csc: bool) -> Iterator[tuple[str, str, Any, str]]:
    """``(member, key, matrix, encoding)`` of X, the layers, obsp and varp."""
    obs, var = export.obs_is, export.var_is
    yield "X", "X", *_anndata_matrix(daf, obs, var, export.X_is, allow_csc=allow_csc)
    for name in sorted(daf.matrices_set(obs, var)):
        if name != export.X_is:
            yield "layers", name, *_anndata_matrix(daf, obs, var, name, allow_csc=allow_csc)
    for member, axis in (("obsp", obs), ("varp", var)):
        for name in sorted(daf.matrices_set(axis, axis)):  # Daf's square matrices are AnnData's, transposed.
            square = daf.get_stored_matrix(axis, axis, name)
            yield member, name, square, "csr" if isinstance(square, SparseMatrixCSC) else "dense"


def _index_dtype(limit: int) -> np.dtype:
    return np.dtype(np.int32) if limit < np.iinfo(np.int32).max else np.dtype(np.int64)


def _h5_attributes(element: Any, encoding: str, version: str, **extra: Any) -> None:
    element.attrs["encoding-type"] = encoding
    element.attrs["encoding-version"] = version
    for key, value in extra.items():
        element.attrs[key] = value


def _h5_strings(group: h5py.Group, name: str, values: np.ndarray) -> None:
    dataset = group.create_dataset(name, data=np.asarray(values, dtype=object),
                                   dtype=h5py.string_dtype("utf-8"))
    _h5_attributes(dataset, "string-array", "0.2.0")


def _h5_dataframe(group: h5py.Group, member: str, daf: DafReader, axis: str) -> None:
    frame = group.create_group(member)
    names = sorted(daf.vectors_set(axis))
    _h5_attributes(frame, "dataframe", "0.2.0", _index="_index",
                   **{"column-order": np.array(names, dtype=object) if names else np.array([], dtype=np.float64)})
    _h5_strings(frame, "_index", daf.axis_vector(axis))
    for name in names:
        vector = daf.get_vector(axis, name)
        values = np.asarray(vector.to_dense() if hasattr(vector, "to_dense") else vector)
        if values.dtype == STRING_DTYPE:
            _h5_strings(frame, name, values)
        else:
            _h5_attributes(frame.create_dataset(name, data=values), "array", "0.2.0")


def _h5_matrix(group: h5py.Group, name: str, matrix: Any, encoding: str, bar: Any) -> None:
    """Write a matrix of :func:`_anndata_matrix` as an AnnData element, streaming slices."""
    if encoding in ("csr", "csc"):
        shape = matrix.shape if encoding == "csc" else (matrix.shape[1], matrix.shape[0])
        element = group.create_group(name)
        _h5_attributes(element, f"{encoding}_matrix", "0.1.0", shape=np.array(shape, dtype=np.int64))
        nnz = matrix.nnz
        element.create_dataset("indptr", data=np.asarray(matrix.colptr, dtype=np.int64).astype(_index_dtype(nnz)) - 1)
        indices = element.create_dataset("indices", shape=(nnz,), dtype=_index_dtype(matrix.shape[0]))
        data = element.create_dataset("data", shape=(nnz,), dtype=matrix.nzval.dtype)
        for start in range(0, nnz, _CHUNK):
            stop = min(start + _CHUNK, nnz)
            indices[start:stop] = np.subtract(matrix.rowval[start:stop], 1, dtype=indices.dtype)
            data[start:stop] = matrix.nzval[start:stop]
            bar.update(stop - start)
        return
    row_major = np.asarray(matrix).T  # Column-major (n_var, n_obs) is row-major (n_obs, n_var): no copy.
    dataset = group.create_dataset(name, shape=row_major.shape, dtype=row_major.dtype)
    step = max(1, _CHUNK // max(1, row_major.shape[1]))
    for start in range(0, row_major.shape[0], step):
        stop = min(start + step, row_major.shape[0])
        dataset.write_direct(np.ascontiguousarray(row_major[start:stop]), dest_sel=np.s_[start:stop])
        bar.update((stop - start) * row_major.shape[1])
    _h5_attributes(dataset, "array", "0.2.0")


def _h5_scalar(group: h5py.Group, name: str, value: Any) -> None:
    if isinstance(value, str):
        dataset = group.create_dataset(name, data=value, dtype=h5py.string_dtype("utf-8"))
        _h5_attributes(dataset, "string", "0.2.0")
    else:
        _h5_attributes(group.create_dataset(name, data=np.asarray(value)), "numeric-scalar", "0.2.0")


def daf_as_h5ad(daf: DafReader, path: str | os.PathLike, *, obs_is: str | None = None, var_is: str | None = None,
                X_is: str | None = None, progress: bool = True) -> None:
    """Write a Daf data set as an ``.h5ad`` file (anndata's current format, written with h5py): the axes ``obs_is``
    and ``var_is`` (by default the scalars of those names, else ``obs``/``var``) with their vectors, the matrix
    ``X_is`` as ``X``, the other matrices of the two axes as layers, their square matrices as ``obsp``/``varp``
    (transposed back), and every scalar in ``uns`` (plus ``obs_is``/``var_is``/``X_is`` when not the defaults).
    Sparse matrices are written as ``csr_matrix`` from the stored ``(var_is, obs_is)`` layout, or as ``csc_matrix``
    when only ``(obs_is, var_is)`` is stored, streaming slices of the stored arrays (nothing is relaid out).

    Example:
        >>> import os, tempfile, numpy as np, pydaf, anndata
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5ad")
        >>> daf_as_h5ad(daf.set_matrix("cell", "gene", "UMIs", np.array([[1], [2]])), path, obs_is="cell",
        ...             var_is="gene", X_is="UMIs", progress=False)
        >>> adata = anndata.read_h5ad(path)
        >>> adata.X.tolist(), adata.uns["X_is"]
        ([[1], [2]], 'UMIs')
    """
    source = daf.complete_path()
    if source is not None:
        require_distinct(source, path)
    with daf.read_lock():
        export = _export_names(daf, obs_is, var_is, X_is)
        matrices = list(_matrices(daf, export, allow_csc=True))
        try:
            write_file_then_replace(path, lambda temporary: _write_h5ad(temporary, daf, export, matrices, progress))
        except DafError:
            raise
        except (ValueError, TypeError) as error:  # e.g. a NUL in a string, which HDF5 strings can't hold
            raise DafValueError(f"can't write the h5ad file: {os.fspath(path)}\nfrom the daf data: {daf.name}\n"
                                f"({type(error).__name__}: {error})") from error


def _write_h5ad(path: str, daf: DafReader, export: _Export, matrices: list[tuple[str, str, Any, str]],
                progress: bool) -> None:
    with h5py.File(path, "w") as file:
        _h5_attributes(file, "anndata", "0.1.0")
        _h5_dataframe(file, "obs", daf, export.obs_is)
        _h5_dataframe(file, "var", daf, export.var_is)
        groups = {}
        for member in ("layers", "obsm", "varm", "obsp", "varp", "uns"):
            groups[member] = file.create_group(member)
            _h5_attributes(groups[member], "dict", "0.1.0")
        for key, value in export.uns.items():
            _h5_scalar(groups["uns"], key, value)
        total = sum(matrix.nnz if isinstance(matrix, SparseMatrixCSC) else int(np.prod(matrix.shape))
                    for _, _, matrix, _ in matrices)
        with _progress_bar(total, progress, "Daf -> AnnData") as bar:
            for member, key, matrix, encoding in matrices:
                _h5_matrix(file if member == "X" else groups[member], key, matrix, encoding, bar)


def daf_as_anndata(daf: DafReader, *, obs_is: str | None = None, var_is: str | None = None,
                   X_is: str | None = None, X_eltype: Any = None) -> anndata.AnnData:
    """A new in-memory ``anndata.AnnData`` of a Daf data set (the same mapping as :func:`daf_as_h5ad`); sparse
    matrices become ``scipy.sparse.csr_matrix``, dense ones numpy arrays. ``X_eltype`` converts ``X``.

    Example:
        >>> import numpy as np, pydaf
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
        >>> adata = daf_as_anndata(daf.set_matrix("cell", "gene", "UMIs", np.array([[1], [2]])), obs_is="cell",
        ...                        var_is="gene", X_is="UMIs", X_eltype=np.float32)
        >>> adata.X.dtype, adata.obs_names.tolist()
        (dtype('float32'), ['A', 'B'])
    """
    import anndata
    import pandas as pd
    import scipy.sparse as sp

    def row_major(matrix: Any) -> Any:
        if isinstance(matrix, SparseMatrixCSC):
            return sp.csr_matrix((np.asarray(matrix.nzval), np.asarray(matrix.rowval, dtype=np.int64) - 1,
                                  np.asarray(matrix.colptr, dtype=np.int64) - 1),
                                 shape=(matrix.shape[1], matrix.shape[0]))
        return np.ascontiguousarray(np.asarray(matrix).T)

    def frame(axis: str) -> pd.DataFrame:
        index = pd.Index(np.asarray(daf.axis_vector(axis), dtype=object))
        columns = {}
        for name in sorted(daf.vectors_set(axis)):
            vector = daf.get_vector(axis, name)
            columns[name] = np.asarray(vector.to_dense() if hasattr(vector, "to_dense") else vector)
        return pd.DataFrame(columns, index=index)

    with daf.read_lock():
        export = _export_names(daf, obs_is, var_is, X_is)
        members: dict[str, dict[str, Any]] = {"layers": {}, "obsp": {}, "varp": {}}
        X = None
        for member, key, matrix, _ in _matrices(daf, export, allow_csc=False):
            if member == "X":
                X = row_major(matrix)
                if X_eltype is not None:
                    X = X.astype(X_eltype)
            else:
                members[member][key] = row_major(matrix)
        return anndata.AnnData(X=X, obs=frame(export.obs_is), var=frame(export.var_is), uns=export.uns,
                               **members)
