"""Copying data between data sets (Julia's ``Copies``): ``copy_scalar``, ``copy_axis``, ``copy_vector``,
``copy_matrix``, ``copy_tensor`` and ``copy_all``.

Julia's rules: a property that already exists in the destination is replaced if ``overwrite``, else skipped if not
``insist``, else an error. An axis of the destination may be the same as the source's, a subset of it (the values of
the missing entries are dropped), or a superset of it (the missing values are filled with ``empty``, which must then be
given); anything else is an error.

Copying into a store that keeps references (a :class:`~pydaf.MemoryDaf`) shares the source's arrays, as Julia does.
Copying into a store that writes (H5df, FilesDaf) streams: each matrix is written through the destination's ``empty_*``
builders (mapped into the file), a block of columns or entries at a time, and the pages of the source and destination
maps are released from the process after each block, so a copy of a matrix larger than memory keeps a bounded resident
set. Nothing sparse is densified.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from .._os.maps import release_pages
from ..core.storage import property_text
from ..core.undef import Undef, UndefType
from ..core.values import exact_cast, exact_scalar
from ..errors import DafMissingError, DafValueError
from ..formats.incomplete_copy import begin_incomplete_copy, end_incomplete_copy
from ..julia_text import julia_string
from ..keys import pairs_as_dict
from ..sparse import SparseMatrixCSC, SparseVector, colptr_from_counts
from ..storage_types import STRING_DTYPE, EltypeLike, StorageScalar, julia_name, storage_dtype

if TYPE_CHECKING:
    from ..core.readers import DafReader
    from ..core.writers import DafWriter

__all__ = ["copy_all", "copy_axis", "copy_matrix", "copy_scalar", "copy_tensor", "copy_vector"]

#: Julia's ``bestify`` default: store sparse when that saves at least this fraction of the dense size.
MIN_SPARSE_SAVING_FRACTION = 0.25

#: Bytes copied between releasing the pages of the maps (bounds the resident set of a streaming copy).
_BLOCK_BYTES = 1 << 25

_SAME, _SOURCE_IS_SUBSET, _DESTINATION_IS_SUBSET = "same", "source is a subset", "destination is a subset"


# Scalars and axes.


def copy_scalar(*, destination: DafWriter, source: DafReader, name: str, rename: str | None = None,
                type: EltypeLike | None = None, default: StorageScalar | UndefType | None = Undef,
                overwrite: bool = False, insist: bool = True) -> None:
    """Copy a scalar (as ``rename`` if given, converted to ``type`` if given). A missing scalar is ``default``
    (``Undef`` raises; ``None`` copies nothing).

    Example:
        >>> import pydaf
        >>> source, destination = pydaf.MemoryDaf().set_scalar("version", "1.5"), pydaf.MemoryDaf()
        >>> copy_scalar(destination=destination, source=source, name="version", type="Float32")
        >>> destination.get_scalar("version")
        np.float32(1.5)
    """
    rename = name if rename is None else rename
    if not overwrite and not insist and destination.has_scalar(rename):
        return
    value = source.get_scalar(name, default=default)
    if value is None:
        return
    if type is not None:
        value = _convert_scalar(value, storage_dtype(type, what=f"type of the scalar: {rename}"), name, source.name)
    destination.set_scalar(rename, value, overwrite=overwrite)


def _convert_scalar(value: StorageScalar, dtype: np.dtype, name: str, daf_name: str) -> StorageScalar:
    """A scalar converted as Julia's ``convert`` (text parsed as Julia's ``parse``): exactly, or a DafValueError."""
    if dtype == STRING_DTYPE:
        return value if isinstance(value, str) else str(value)
    if isinstance(value, str):
        try:
            if dtype.kind == "b":
                return np.bool_({"true": True, "false": False, "1": True, "0": False}[value.strip()])
            value = int(value) if dtype.kind in "iu" else float(value)
        except (KeyError, ValueError) as error:
            raise DafValueError(f"can't parse the value: {value}\nof the scalar: {name}\nas the type: "
                                f"{julia_name(dtype)}", daf_name=daf_name) from error
    return exact_scalar(value, dtype, what=f"scalar: {name}", daf_name=daf_name)


def copy_axis(*, destination: DafWriter, source: DafReader, axis: str, rename: str | None = None,
              default: UndefType | None = Undef, overwrite: bool = False, insist: bool = True) -> None:
    """Copy an axis (as ``rename`` if given). An existing destination axis is replaced (with all its data) if
    ``overwrite``, else kept if not ``insist``, else an error. A missing axis is ``default`` (``None``: nothing).

    Example:
        >>> import pydaf
        >>> source, destination = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]), pydaf.MemoryDaf()
        >>> copy_axis(destination=destination, source=source, axis="cell", rename="obs")
        >>> destination.axis_vector("obs").tolist()
        ['A', 'B']
    """
    rename = axis if rename is None else rename
    if destination.has_axis(rename):
        if overwrite:
            destination.delete_axis(rename)
        elif not insist:
            return
    entries = source.axis_vector(axis, default=default)
    if entries is not None:
        destination.add_axis(rename, entries)


# Axis relations.


def _relation(*, destination: DafWriter, destination_axis: str, source: DafReader, source_axis: str,
              allow_missing: bool, what_for: str | None) -> str:
    if allow_missing and not destination.has_axis(destination_axis):
        return _SAME
    source_entries = source.axis_vector(source_axis)
    destination_entries = destination.axis_vector(destination_axis)
    if np.array_equal(source_entries, destination_entries):
        return _SAME
    source_set, destination_set = set(source_entries.tolist()), set(destination_entries.tolist())
    if source_set == destination_set:
        return _SAME
    if source_set > destination_set:
        return _DESTINATION_IS_SUBSET
    if source_set < destination_set:
        _verify_subset(source.name, source_axis, destination.name, destination_axis, what_for)
        return _SOURCE_IS_SUBSET
    raise DafValueError(f"disjoint entries in the axis: {source_axis}\nof the source daf data: {source.name}\n"
                        f"and the axis: {destination_axis}\nof the target daf data: {destination.name}")


def _verify_subset(source_name: str, source_axis: str, destination_name: str, destination_axis: str,
                   what_for: str | None) -> None:
    if what_for is not None:
        raise DafMissingError(f"missing entries in the axis: {source_axis}\nof the source daf data: {source_name}\n"
                              f"which are needed for copying {what_for}\nof the axis: {destination_axis}\n"
                              f"of the target daf data: {destination_name}")


def _positions(source: DafReader, source_axis: str, destination: DafReader, destination_axis: str) -> np.ndarray:
    """The 0-based position, in the source axis, of each destination entry (-1 where the source lacks it)."""
    return source.axis_indices(source_axis, destination.axis_vector(destination_axis), allow_missing=True)


# Vectors.


def copy_vector(*, destination: DafWriter, source: DafReader, axis: str, name: str, reaxis: str | None = None,
                rename: str | None = None, eltype: EltypeLike | None = None, default: Any = Undef,
                empty: StorageScalar | None = None, bestify: bool = False,
                min_sparse_saving_fraction: float = MIN_SPARSE_SAVING_FRACTION, overwrite: bool = False,
                insist: bool = True, _relation_of_axis: str | None = None) -> None:
    """Copy a vector (into the axis ``reaxis`` and as ``rename`` if given, converted to ``eltype`` if given; sparse
    stays sparse). The destination axis may be a subset of the source's (extra values are dropped) or a superset of it
    (missing values are ``empty``, which must then be given). With ``bestify``, stored sparse or dense, whichever is
    smaller by at least ``min_sparse_saving_fraction``.

    Example:
        >>> import pydaf
        >>> source = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])
        >>> destination = pydaf.MemoryDaf().add_axis("cell", ["A", "B", "C"])
        >>> copy_vector(destination=destination, source=source, axis="cell", name="age", empty=0)
        >>> destination.get_vector("cell", "age").tolist()
        [1, 2, 0]
    """
    reaxis = axis if reaxis is None else reaxis
    rename = name if rename is None else rename
    if not overwrite and not insist and destination.has_vector(reaxis, rename):
        return
    what_for = f"the vector: {name}\nto the vector: {rename}" if empty is None else None
    relation = _relation_of_axis or _relation(destination=destination, destination_axis=reaxis, source=source,
                                              source_axis=axis, allow_missing=False, what_for=what_for)
    value = source.get_stored_vector(axis, name, default=default)
    if value is None:
        return
    dtype = storage_dtype(eltype if eltype is not None else value.dtype, what=f"element type of the vector: {rename}")
    value, empty = _exactly(value, empty, dtype, property_text("vector", axis, name), source.name)
    if relation == _DESTINATION_IS_SUBSET:
        value = _vector_at(value, _positions(source, axis, destination, reaxis))
    elif relation == _SOURCE_IS_SUBSET:
        _verify_subset(source.name, axis, destination.name, reaxis, what_for)
        value = _vector_into(value, _positions(destination, reaxis, source, axis),
                             destination.axis_length(reaxis), empty, dtype)
    value = _vector_as(value, dtype)
    if bestify and dtype != STRING_DTYPE:
        value = _bestify_vector(value, min_sparse_saving_fraction)
    destination.set_vector(reaxis, rename, value, overwrite=overwrite)


def _exactly(value: Any, empty: StorageScalar | None, dtype: np.dtype, what: str,
             daf_name: str) -> tuple[Any, StorageScalar | None]:
    """A copied value (and the ``empty`` value) converted to a numeric ``dtype`` exactly, as Julia's ``convert``: else
    a :class:`~pydaf.DafInexactError` naming the first value that does not convert (before anything is written)."""
    if dtype == STRING_DTYPE:
        return value, empty
    if empty is not None and not isinstance(empty, str):
        empty = exact_scalar(empty, dtype, what=f"empty value for the {what}", daf_name=daf_name)
    if value.dtype == dtype or value.dtype == STRING_DTYPE:
        return value, empty
    if isinstance(value, SparseVector):
        nzind = value.nzind
        return SparseVector(value.length, nzind, exact_cast(
            value.nzval, dtype, what=what, daf_name=daf_name,
            where=lambda at: f"position: {int(nzind[at[0]]) - 1}")), empty
    if isinstance(value, SparseMatrixCSC):
        colptr, rowval = value.colptr, value.rowval

        def where(at: tuple[int, ...]) -> str:
            column = int(np.searchsorted(colptr, at[0] + 1, side="right")) - 1
            return f"row: {int(rowval[at[0]]) - 1}\nand the column: {column}"

        return value.with_values(exact_cast(value.nzval, dtype, what=what, daf_name=daf_name, where=where)), empty
    return exact_cast(value, dtype, what=what, daf_name=daf_name), empty


def _vector_at(value: np.ndarray | SparseVector, positions: np.ndarray) -> np.ndarray | SparseVector:
    """The values at (valid, 0-based) positions, sparse kept sparse."""
    if isinstance(value, SparseVector):
        return value.select(positions)
    return value[positions]


def _vector_into(value: np.ndarray | SparseVector, positions: np.ndarray, length: int, empty: Any,
                 dtype: np.dtype) -> np.ndarray | SparseVector:
    """A vector of ``length`` holding ``value`` at ``positions`` (0-based) and ``empty`` elsewhere (sparse stays
    sparse when ``empty`` is zero)."""
    if isinstance(value, SparseVector) and dtype != STRING_DTYPE and empty == 0:
        moved = positions[value.nzind.astype(np.int64) - 1]
        order = np.argsort(moved, kind="stable")
        return SparseVector(length, (moved[order] + 1).astype(value.nzind.dtype), value.nzval[order].astype(dtype))
    dense = np.full(length, empty, dtype=dtype) if dtype != STRING_DTYPE else np.full(length, str(empty), dtype=object)
    source_values = value.to_dense() if isinstance(value, SparseVector) else value
    dense[positions] = source_values if dtype != STRING_DTYPE else [_as_text(item) for item in source_values]
    if isinstance(value, SparseVector) and dtype != STRING_DTYPE:
        return SparseVector.from_dense(dense, indtype=value.nzind.dtype)
    return dense


def _vector_as(value: np.ndarray | SparseVector, dtype: np.dtype) -> np.ndarray | SparseVector:
    if value.dtype == dtype:
        return value
    if dtype == STRING_DTYPE:
        dense = value.to_dense() if isinstance(value, SparseVector) else value
        return np.array([_as_text(item) for item in dense], dtype=object)
    if isinstance(value, SparseVector):
        return SparseVector(value.length, value.nzind, value.nzval.astype(dtype))
    return value.astype(dtype)


def _as_text(value: Any) -> str:
    """Julia's ``string`` of a value (``1.0``, ``true``)."""
    return julia_string(value)


def _bestify_vector(value: np.ndarray | SparseVector, fraction: float) -> np.ndarray | SparseVector:
    nnz = value.nnz if isinstance(value, SparseVector) else int(np.count_nonzero(value))
    length = value.length if isinstance(value, SparseVector) else int(value.shape[0])
    dense_size = length * value.dtype.itemsize
    sparse_size = nnz * (value.dtype.itemsize + 4)
    if sparse_size <= (1 - fraction) * dense_size:
        return value if isinstance(value, SparseVector) else SparseVector.from_dense(value, indtype=np.uint32)
    return value.to_dense() if isinstance(value, SparseVector) else value


# Matrices.


def copy_matrix(*, destination: DafWriter, source: DafReader, rows_axis: str, columns_axis: str, name: str,
                rows_reaxis: str | None = None, columns_reaxis: str | None = None, rename: str | None = None,
                eltype: EltypeLike | None = None, default: Any = Undef, empty: StorageScalar | None = None,
                bestify: bool = False, min_sparse_saving_fraction: float = MIN_SPARSE_SAVING_FRACTION,
                relayout: bool = True, overwrite: bool = False, insist: bool = True,
                _relations: tuple[str, ...] | None = None) -> None:
    """Copy a matrix (into ``rows_reaxis``/``columns_reaxis`` and as ``rename`` if given, converted to ``eltype`` if
    given). With ``relayout`` (the default) both layouts end up in the destination: the source's other layout is
    copied if it is stored, else the destination relays out. Axes may be subsets or supersets as for
    :func:`copy_vector`; sparse stays sparse (a superset filled with ``empty == 0`` too).

    Example:
        >>> import pydaf, numpy as np
        >>> source = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X", "Y"])
        >>> source.set_matrix("cell", "gene", "UMIs", np.array([[1, 2], [3, 4]]))  # doctest: +ELLIPSIS
        MemoryDaf ...
        >>> destination = pydaf.MemoryDaf().add_axis("cell", ["A"]).add_axis("gene", ["X", "Y", "Z"])
        >>> copy_matrix(destination=destination, source=source, rows_axis="cell", columns_axis="gene",
        ...             name="UMIs", empty=0)
        >>> destination.get_matrix("cell", "gene", "UMIs").toarray().tolist()
        [[1, 2, 0]]
    """
    relayout = relayout and rows_axis != columns_axis
    rows_reaxis = rows_axis if rows_reaxis is None else rows_reaxis
    columns_reaxis = columns_axis if columns_reaxis is None else columns_reaxis
    rename = name if rename is None else rename
    if not overwrite and not insist and destination.has_matrix(rows_reaxis, columns_reaxis, rename, relayout=relayout):
        return
    what_for = f"the matrix: {name}\nto the matrix: {rename}" if empty is None else None
    if _relations is None:
        _relations = tuple(_relation(destination=destination, destination_axis=to_axis, source=source,
                                     source_axis=from_axis, allow_missing=False, what_for=what_for)
                           for from_axis, to_axis in ((rows_axis, rows_reaxis), (columns_axis, columns_reaxis)))
    rows_relation, columns_relation = _relations
    value = source.get_stored_matrix(rows_axis, columns_axis, name, default=default, relayout=relayout)
    if value is None:
        return
    if relayout and source.has_matrix(columns_axis, rows_axis, name, relayout=False) and \
            source.has_matrix(rows_axis, columns_axis, name, relayout=False):
        copy_matrix(destination=destination, source=source, rows_axis=columns_axis, columns_axis=rows_axis,
                    name=name, rows_reaxis=columns_reaxis, columns_reaxis=rows_reaxis, rename=rename, eltype=eltype,
                    default=None, empty=empty, bestify=bestify, min_sparse_saving_fraction=min_sparse_saving_fraction,
                    relayout=False, overwrite=overwrite, _relations=(columns_relation, rows_relation))
        relayout = False
    for relation, from_axis, to_axis in ((columns_relation, columns_axis, columns_reaxis),
                                         (rows_relation, rows_axis, rows_reaxis)):
        if relation == _SOURCE_IS_SUBSET:
            _verify_subset(source.name, from_axis, destination.name, to_axis, what_for)
    dtype = storage_dtype(eltype if eltype is not None else value.dtype, what=f"element type of the matrix: {rename}")
    value, empty = _exactly(value, empty, dtype, property_text("matrix", rows_axis, columns_axis, name), source.name)
    if _SOURCE_IS_SUBSET in _relations:
        value = _matrix_into(value, (rows_relation, columns_relation),
                             (_into_positions(source, rows_axis, destination, rows_reaxis, rows_relation),
                              _into_positions(source, columns_axis, destination, columns_reaxis, columns_relation)),
                             (destination.axis_length(rows_reaxis), destination.axis_length(columns_reaxis)),
                             empty, dtype)
    elif _DESTINATION_IS_SUBSET in _relations:
        rows = None if rows_relation == _SAME else _positions(source, rows_axis, destination, rows_reaxis)
        columns = None if columns_relation == _SAME else _positions(source, columns_axis, destination, columns_reaxis)
        value = value.select(rows=rows, columns=columns) if isinstance(value, SparseMatrixCSC) else \
            np.asfortranarray(value[rows if rows is not None else slice(None), :]
                              [:, columns if columns is not None else slice(None)])
    if bestify and dtype != STRING_DTYPE:
        value = _bestify_matrix(value, min_sparse_saving_fraction)
    write_matrix(destination, rows_reaxis, columns_reaxis, rename, value, dtype=dtype, overwrite=overwrite,
                 relayout=relayout)


def _into_positions(source: DafReader, source_axis: str, destination: DafReader, destination_axis: str,
                    relation: str) -> np.ndarray:
    """The 0-based position, in the destination axis, of each source entry that is kept (``-1`` for entries the
    destination lacks)."""
    if relation == _SAME and np.array_equal(source.axis_vector(source_axis), destination.axis_vector(destination_axis)):
        return np.arange(source.axis_length(source_axis), dtype=np.int64)
    return destination.axis_indices(destination_axis, source.axis_vector(source_axis), allow_missing=True)


def _matrix_into(value: np.ndarray | SparseMatrixCSC, relations: tuple[str, str],
                 positions: tuple[np.ndarray, np.ndarray], shape: tuple[int, int], empty: Any,
                 dtype: np.dtype) -> np.ndarray | SparseMatrixCSC:
    """A matrix of ``shape`` holding the kept source entries at their destination positions and ``empty`` elsewhere
    (sparse when the source is sparse or ``empty`` is zero, as Julia)."""
    rows, columns = positions
    if (isinstance(value, SparseMatrixCSC) or empty == 0) and dtype != STRING_DTYPE and empty == 0:
        source = value if isinstance(value, SparseMatrixCSC) else SparseMatrixCSC.from_dense(value)
        entry_rows = rows[source.rowval.astype(np.int64) - 1]
        entry_columns = columns[source.entry_columns()]
        kept = np.flatnonzero((entry_rows >= 0) & (entry_columns >= 0))
        order = kept[np.lexsort((entry_rows[kept], entry_columns[kept]))]
        indtype = source.colptr.dtype
        counts = np.bincount(entry_columns[order], minlength=shape[1])
        return SparseMatrixCSC(shape, colptr_from_counts(counts, indtype), (entry_rows[order] + 1).astype(indtype),
                               source.nzval[order].astype(dtype))
    dense = np.full(shape, empty, dtype=dtype, order="F")
    kept_rows, kept_columns = np.flatnonzero(rows >= 0), np.flatnonzero(columns >= 0)
    source_dense = value.to_dense() if isinstance(value, SparseMatrixCSC) else value
    dense[np.ix_(rows[kept_rows], columns[kept_columns])] = source_dense[np.ix_(kept_rows, kept_columns)]
    if isinstance(value, SparseMatrixCSC):
        return SparseMatrixCSC.from_dense(dense, indtype=value.colptr.dtype)
    return dense


def _bestify_matrix(value: np.ndarray | SparseMatrixCSC, fraction: float) -> np.ndarray | SparseMatrixCSC:
    n_rows, n_columns = value.shape
    nnz = value.nnz if isinstance(value, SparseMatrixCSC) else int(np.count_nonzero(value))
    dense_size = n_rows * n_columns * value.dtype.itemsize
    sparse_size = nnz * (value.dtype.itemsize + 4) + (n_columns + 1) * 4
    if sparse_size <= (1 - fraction) * dense_size:
        return value if isinstance(value, SparseMatrixCSC) else SparseMatrixCSC.from_dense(value,
                                                                                             indtype=np.uint32)
    return value.to_dense() if isinstance(value, SparseMatrixCSC) else value


def write_matrix(destination: DafWriter, rows_axis: str, columns_axis: str, name: str,
                 value: np.ndarray | SparseMatrixCSC, *, dtype: np.dtype | None = None, overwrite: bool = False,
                 relayout: bool = True) -> None:
    """Store a matrix (column-major dense or 1-based CSC, e.g. a source's ``get_stored_matrix``) converted to
    ``dtype``: as is into a store that keeps references (shared, zero-copy), else streamed through the destination's
    ``empty_*`` builders a block at a time, releasing the maps' pages after each block. With ``relayout`` the other
    layout is stored too.

    Example:
        >>> import pydaf, numpy as np, tempfile, os
        >>> daf = pydaf.H5df(os.path.join(tempfile.mkdtemp(), "x.h5df"), "w")
        >>> _ = daf.add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
        >>> write_matrix(daf, "cell", "gene", "UMIs", np.array([[1], [2]], order="F"), dtype=np.dtype("float32"))
        >>> daf.get_matrix("gene", "cell", "UMIs").tolist()
        [[1.0, 2.0]]
    """
    dtype = value.dtype if dtype is None else np.dtype(dtype)
    relayout = relayout and rows_axis != columns_axis
    packs_sparse = isinstance(value, SparseMatrixCSC) and getattr(destination.format, "packed_default", False)
    if destination.format.format_stores_references() or dtype == STRING_DTYPE or packs_sparse:
        # (a data set that packs by default stores sparse data packed through set_matrix, as Julia's copy does:
        # its empty_sparse_matrix builder is always flat)
        if value.dtype != dtype:
            value = value.with_values(value.nzval.astype(dtype)) if isinstance(value, SparseMatrixCSC) else \
                value.astype(dtype, order="F")
        destination.set_matrix(rows_axis, columns_axis, name, value, overwrite=overwrite, relayout=relayout)
        return
    if relayout and not overwrite and destination.has_matrix(columns_axis, rows_axis, name, relayout=False):
        # As set_matrix: refuse before writing anything.
        raise DafValueError(f"existing matrix: {name}\nfor the rows axis: {columns_axis}\nand the columns axis: "
                            f"{rows_axis}", daf_name=destination.name, what=("matrix", columns_axis, rows_axis, name))
    if isinstance(value, SparseMatrixCSC):
        with destination.empty_sparse_matrix(rows_axis, columns_axis, name, dtype, value.nnz, value.colptr.dtype,
                                             overwrite=overwrite) as (colptr, rowval, nzval):
            colptr[...] = value.colptr
            _stream(rowval, value.rowval)
            _stream(nzval, value.nzval)
    else:
        with destination.empty_dense_matrix(rows_axis, columns_axis, name, dtype, overwrite=overwrite) as buffer:
            _stream(buffer.reshape(-1, order="F"), np.asfortranarray(value).reshape(-1, order="F"))
    if relayout:
        destination.relayout_matrix(rows_axis, columns_axis, name, overwrite=overwrite)


def _stream(destination: np.ndarray, source: np.ndarray) -> None:
    """``destination[...] = source`` (1-D) a block at a time, releasing both maps' pages after each block."""
    step = max(1, _BLOCK_BYTES // max(1, source.dtype.itemsize))
    for start in range(0, source.shape[0], step):
        stop = min(start + step, source.shape[0])
        destination[start:stop] = source[start:stop]
        release_pages(source[start:stop])
        release_pages(destination[start:stop])


def copy_tensor(*, destination: DafWriter, source: DafReader, main_axis: str, rows_axis: str, columns_axis: str,
                name: str, rows_reaxis: str | None = None, columns_reaxis: str | None = None,
                rename: str | None = None, eltype: EltypeLike | None = None, empty: StorageScalar | None = None,
                bestify: bool = False, min_sparse_saving_fraction: float = MIN_SPARSE_SAVING_FRACTION,
                relayout: bool = True, overwrite: bool = False, insist: bool = True) -> None:
    """Copy a tensor: the matrix ``<entry>_<name>`` of every entry of ``main_axis`` in the destination (those the
    source lacks are filled with ``empty``), with :func:`copy_matrix`.

    Example:
        >>> import pydaf, numpy as np
        >>> source = pydaf.MemoryDaf().add_axis("batch", ["U"]).add_axis("cell", ["A"]).add_axis("gene", ["X"])
        >>> source.set_matrix("cell", "gene", "U_high", np.array([[True]]))  # doctest: +ELLIPSIS
        MemoryDaf ...
        >>> destination = pydaf.MemoryDaf().add_axis("batch", ["U", "V"]).add_axis("cell", ["A"])
        >>> destination.add_axis("gene", ["X"])  # doctest: +ELLIPSIS
        MemoryDaf ...
        >>> copy_tensor(destination=destination, source=source, main_axis="batch", rows_axis="cell",
        ...             columns_axis="gene", name="high", empty=False)
        >>> sorted(destination.matrices_set("cell", "gene", tensors=False))
        ['U_high', 'V_high']
    """
    for entry in destination.axis_vector(main_axis).tolist():
        copy_matrix(destination=destination, source=source, rows_axis=rows_axis, columns_axis=columns_axis,
                    name=f"{entry}_{name}", rows_reaxis=rows_reaxis, columns_reaxis=columns_reaxis,
                    rename=None if rename is None else f"{entry}_{rename}", eltype=eltype, default=empty, empty=empty,
                    bestify=bestify, min_sparse_saving_fraction=min_sparse_saving_fraction, relayout=relayout,
                    overwrite=overwrite, insist=insist)


# Everything.


def copy_all(destination: DafWriter, source: DafReader, *, empty: Mapping | Iterable | None = None,
             types: Mapping | Iterable | None = None, overwrite: bool = False, insist: bool = True,
             relayout: bool = True, progress: bool = True) -> None:
    """Copy every scalar, axis, vector and matrix of ``source`` into ``destination``. Axes the destination lacks are
    created; existing destination axes are never replaced and must equal, or be subsets or supersets of, the source's.
    ``empty`` gives the values of the entries a superset axis adds, per ``(axis, name)`` vector or ``(rows_axis,
    columns_axis, name)`` matrix (a ``(main_axis, rows_axis, columns_axis, name)`` tensor key covers each of its
    matrices, and creates the ones the source lacks); ``types`` converts properties (scalar names or the same keys).
    With ``relayout`` (the default) both layouts of each matrix end up in the destination; without it, each matrix is
    copied in the layouts the source stores. A progress bar shows (``progress=False`` silences it). Into a stored data
    set the copy is marked incomplete from before its first change to after its last
    (:mod:`pydaf.formats.incomplete_copy`): a process killed in the middle leaves a data set that refuses to open,
    saying so, never a silently partial one.

    Example:
        >>> import numpy as np, pydaf
        >>> source = pydaf.MemoryDaf().set_scalar("organism", "human").add_axis("cell", ["A", "B"])
        >>> source.set_vector("cell", "age", [3, 5]).add_axis("gene", ["X"])  # doctest: +ELLIPSIS
        MemoryDaf ...
        >>> source.set_matrix("cell", "gene", "UMIs", np.array([[1], [2]]), relayout=False)  # doctest: +ELLIPSIS
        MemoryDaf ...
        >>> copy = pydaf.MemoryDaf()
        >>> copy_all(copy, source, relayout=False, progress=False)
        >>> copy.get_scalar("organism"), copy.get_vector("cell", "age").tolist(), copy.has_matrix(
        ...     "gene", "cell", "UMIs", relayout=False)
        ('human', [3, 5], False)
    """
    with source.read_lock():
        tensor_keys: list[tuple[str, str, str, str]] = []
        empty = expand_tensors([destination, source], pairs_as_dict(empty) or {}, tensor_keys)
        types = expand_tensors([destination, source], pairs_as_dict(types) or {}, tensor_keys)
        what_for = ": data" if not empty else None
        relations = {axis: _relation(destination=destination, destination_axis=axis, source=source, source_axis=axis,
                                     allow_missing=True, what_for=what_for) for axis in sorted(source.axes_set())}
        # A stored destination is marked "incomplete copy" from before the first change to after the last (a killed
        # copy leaves a data set that refuses to open, saying so); a failure raised here drops the mark.
        path = destination.complete_path()
        token = None if path is None else begin_incomplete_copy(path, what=f"a copy_all from {source.name}")
        try:
            _copy_all(destination, source, relations, empty, types, tensor_keys, overwrite=overwrite, insist=insist,
                      relayout=relayout, progress=progress)
            if token is not None and hasattr(destination, "flush"):
                destination.flush()
        except Exception:
            end_incomplete_copy(token)
            raise
        end_incomplete_copy(token)


def _copy_all(destination: DafWriter, source: DafReader, relations: dict[str, str], empty: dict, types: dict,
              tensor_keys: list[tuple[str, str, str, str]], *, overwrite: bool, insist: bool, relayout: bool,
              progress: bool) -> None:
    from tqdm.auto import tqdm

    for name in sorted(source.scalars_set()):
        copy_scalar(destination=destination, source=source, name=name, type=types.get(name),
                    overwrite=overwrite, insist=insist)
    for axis in relations:
        if not destination.has_axis(axis):
            copy_axis(destination=destination, source=source, axis=axis, overwrite=overwrite, insist=insist)
    vectors = [(axis, name) for axis in relations for name in sorted(source.vectors_set(axis))]
    matrices = [(rows_axis, columns_axis, name) for rows_axis in relations for columns_axis in relations
                if not relayout or columns_axis >= rows_axis
                for name in sorted(source.matrices_set(rows_axis, columns_axis, relayout=relayout, tensors=False))]
    with tqdm(total=len(vectors) + len(matrices), desc="copy", unit="property", disable=not progress,
              mininterval=0.5) as bar:
        for axis, name in vectors:
            copy_vector(destination=destination, source=source, axis=axis, name=name,
                        empty=empty.get((axis, name)), eltype=types.get((axis, name)), overwrite=overwrite,
                        insist=insist, _relation_of_axis=relations[axis])
            bar.update(1)
        for rows_axis, columns_axis, name in matrices:
            _copy_one_matrix(destination, source, rows_axis, columns_axis, name, relations, empty, types,
                             overwrite=overwrite, insist=insist, relayout=relayout)
            bar.update(1)
    for main_axis, rows_axis, columns_axis, name in tensor_keys:
        for entry in destination.axis_vector(main_axis).tolist():
            matrix_name = f"{entry}_{name}"
            if not destination.has_matrix(rows_axis, columns_axis, matrix_name, relayout=relayout):
                _copy_one_matrix(destination, source, rows_axis, columns_axis, matrix_name, relations, empty,
                                 types, overwrite=overwrite, insist=insist, relayout=relayout)


def _copy_one_matrix(destination: DafWriter, source: DafReader, rows_axis: str, columns_axis: str, name: str,
                     relations: dict[str, str], empty: dict, types: dict, *, overwrite: bool, insist: bool,
                     relayout: bool) -> None:
    empty_value = empty.get((rows_axis, columns_axis, name), empty.get((columns_axis, rows_axis, name)))
    eltype = types.get((rows_axis, columns_axis, name), types.get((columns_axis, rows_axis, name)))
    copy_matrix(destination=destination, source=source, rows_axis=rows_axis, columns_axis=columns_axis, name=name,
                default=Undef if empty_value is None else empty_value, empty=empty_value, eltype=eltype,
                overwrite=overwrite, insist=insist, relayout=relayout,
                _relations=(relations[rows_axis], relations[columns_axis]))


def expand_tensors(dafs: list[DafReader], data: dict,
                   tensor_keys: list[tuple[str, str, str, str]] | None = None) -> dict:
    """Julia's ``expand_tensors``: replace each ``(main_axis, rows_axis, columns_axis, name)`` tensor key by the keys
    of its matrices ``<entry>_<name>`` (one per entry of the main axis in any of the data sets), appending the tensor
    keys to ``tensor_keys`` if given.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf().add_axis("batch", ["b1", "b2"])
        >>> sorted(expand_tensors([daf], {("batch", "cell", "gene", "UMIs"): 0, ("cell", "age"): 1}))
        [('cell', 'age'), ('cell', 'gene', 'b1_UMIs'), ('cell', 'gene', 'b2_UMIs')]
    """
    expanded = dict(data)
    for key, value in data.items():
        if isinstance(key, tuple) and len(key) == 4:
            if tensor_keys is not None and key not in tensor_keys:
                tensor_keys.append(key)
            del expanded[key]
            main_axis, rows_axis, columns_axis, name = key
            for daf in dafs:
                if daf.has_axis(main_axis):
                    for entry in daf.axis_vector(main_axis).tolist():
                        expanded[(rows_axis, columns_axis, f"{entry}_{name}")] = value
    return expanded
