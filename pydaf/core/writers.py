"""The public write API (Julia's ``Writers``), written once over any :class:`~pydaf.abc.format.FormatWriter`.

Every call takes the write lock, validates names, axes, lengths and types *before* touching storage (so a refused
call changes nothing), invalidates cached data, and bumps version counters. Writers return ``self`` for chaining.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from .._os.maps import populate_pages, release_pages
from ..abc.format import FormatWriter
from ..errors import (
    DafAppendOnlyError,
    DafError,
    DafMissingError,
    DafNameError,
    DafShapeError,
    DafTypeError,
    DafValueError,
    existing_property,
    missing_property,
)
from ..sparse import SparseMatrixCSC, SparseVector
from ..storage_types import (
    STRING_DTYPE,
    EltypeLike,
    StorageScalar,
    as_string_array,
    indtype_for_size,
    require_index_dtype,
    require_number_dtype,
    scalar_value,
    storage_dtype,
)
from .cache import AxisCacheKey, MatrixCacheKey, VectorCacheKey
from .names import RESERVED_VECTORS, require_lookup_name, require_valid_name
from .packed_settings import resolve_packed
from .readers import DafReader, write_methods
from .storage import property_text
from .validation import require_stored_matrix, require_stored_vector
from .values import as_storable_array, exact_cast, exact_scalar, is_scipy_sparse, plain_values


class DafWriter(DafReader):
    """Read and write access to a Daf data set.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="example!")
        >>> daf.set_scalar("organism", "human").get_scalar("organism")
        'human'
    """

    _format: FormatWriter

    @contextmanager
    def write_lock(self) -> Iterator[None]:
        """Hold the data set's write lock for a ``with`` block, so several writes (and reads) happen with no other
        thread reading or writing in between. Reentrant; every public write method also takes it by itself.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf()
            >>> with daf.write_lock():
            ...     _ = daf.set_scalar("a", 1).set_scalar("b", daf.get_scalar("a") + 1)
            >>> int(daf.get_scalar("b"))
            2
        """
        with self._state.lock.write():
            yield

    # Helpers.

    def _invalidate(self, change: AxisCacheKey | VectorCacheKey | MatrixCacheKey) -> None:
        """Drop every cached item made stale by a change (see :meth:`pydaf.core.cache.DataCache.invalidate`)."""
        self._state.cache.invalidate(change)

    def _bump_vector(self, axis: str, name: str) -> None:
        self._state.versions.bump(VectorCacheKey(axis, name))

    def _bump_matrix(self, rows_axis: str, columns_axis: str, name: str) -> None:
        self._state.versions.bump(MatrixCacheKey(rows_axis, columns_axis, name).either_layout())

    def _require_not_reserved(self, axis: str, name: str) -> None:
        if name in RESERVED_VECTORS:
            raise DafNameError(f"setting the reserved vector: {name}\nfor the axis: {axis}", daf_name=self._name)

    def _require_vector_absent(self, axis: str, name: str, overwrite: bool) -> None:
        if not overwrite and self._reads.format_has_vector(axis, name):
            raise existing_property("vector", axis, name, daf_name=self._name)

    def _require_matrix_absent(self, rows_axis: str, columns_axis: str, name: str, overwrite: bool) -> None:
        if not overwrite and self._reads.format_has_matrix(rows_axis, columns_axis, name):
            raise existing_property("matrix", rows_axis, columns_axis, name, daf_name=self._name)

    def _require_rewrites(self, doing: str, kind: str, *names: str) -> None:
        """Refuse to ``doing`` (``delete`` or ``overwrite``) a stored property of append-only storage (its format
        declares ``supports_rewrites = False``), before anything changes: the one place that does."""
        if not self._format.supports_rewrites:
            raise DafAppendOnlyError(
                f"{self._format.type_name} is append-only; can't {doing} the {property_text(kind, *names)}",
                daf_name=self._name, what=(kind, *names),
                hint="(the ZIP backend is append-only: a property once written stays; write a new data set, or use a "
                     "format that accepts rewrites)")

    def _before_set_vector(self, axis: str, name: str) -> None:
        self._invalidate(VectorCacheKey(axis, name))
        if self._reads.format_has_vector(axis, name):
            self._require_rewrites("overwrite", "vector", axis, name)
            self._format.format_delete_vector(axis, name, for_set=True)
        self._bump_vector(axis, name)

    def _before_set_matrix(self, rows_axis: str, columns_axis: str, name: str) -> None:
        self._invalidate(MatrixCacheKey(rows_axis, columns_axis, name))
        if self._reads.format_has_matrix(rows_axis, columns_axis, name):
            self._require_rewrites("overwrite", "matrix", rows_axis, columns_axis, name)
            self._format.format_delete_matrix(rows_axis, columns_axis, name, for_set=True)

    @contextmanager
    def _packing(self, packed: bool | None) -> Iterator[None]:
        """Let the format calls of the block pack (:attr:`~pydaf.abc.format.FormatWriter.is_packed`) as Julia's
        ``resolve_packed``: if ``packed``, or (``None``) if the data set packs by default. Under the write lock."""
        storage = self._format
        previous = storage.is_packed
        storage.is_packed = resolve_packed(packed, storage.packed_default)
        try:
            yield
        finally:
            storage.is_packed = previous

    @contextmanager
    def _storing(self, kind: str, *names: str) -> Iterator[None]:
        """Turn a value a backend can't store (e.g. a NUL in an HDF5 string: h5py's ``ValueError``) into a
        DafValueError naming the property."""
        try:
            yield
        except DafError:
            raise
        except (ValueError, TypeError) as error:
            raise DafValueError(f"can't store the {property_text(kind, *names)}\n"
                                f"({type(error).__name__}: {error})", daf_name=self._name) from error

    def _check_length(self, axis: str, length: int, what: str) -> None:
        axis_length = self._reads.format_axis_length(axis)
        if length != axis_length:
            raise DafShapeError(
                f"the length: {length}\nof the {what}\nis different from the length: {axis_length}\nof the axis: "
                f"{axis}", daf_name=self._name)

    # Scalars.

    def set_scalar(self, name: str, value: StorageScalar, *, overwrite: bool = False) -> DafWriter:
        """Set a scalar property: a ``str``, ``bool``, ``int`` (Int64), ``float`` (Float64) or a numpy scalar of a
        storage type (kept exactly).

        Example:
            >>> import pydaf, numpy as np
            >>> pydaf.MemoryDaf().set_scalar("version", np.uint8(3)).get_scalar("version")
            np.uint8(3)
        """
        require_valid_name(name, what="scalar", daf_name=self._name)
        value = scalar_value(value, what=f"scalar: {name}")
        with self._state.lock.write():
            if self._reads.format_has_scalar(name):
                if not overwrite:
                    raise existing_property("scalar", name, daf_name=self._name)
                self._require_rewrites("overwrite", "scalar", name)
                self._format.format_delete_scalar(name, for_set=True)
            with self._storing("scalar", name):
                self._format.format_set_scalar(name, value)
        return self

    def delete_scalar(self, name: str, *, must_exist: bool = True) -> DafWriter:
        """Delete a scalar property (with ``must_exist=False``, do nothing if it is missing).

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().set_scalar("x", 1).delete_scalar("x").has_scalar("x")
            False
        """
        require_lookup_name(name, what="scalar", daf_name=self._name)
        with self._state.lock.write():
            if not self._reads.format_has_scalar(name):
                if must_exist:
                    raise missing_property("scalar", name, daf_name=self._name)
                return self
            self._require_rewrites("delete", "scalar", name)
            self._format.format_delete_scalar(name, for_set=False)
        return self

    # Axes.

    def add_axis(self, axis: str, entries: Iterable[str] | np.ndarray, *, overwrite: bool = False) -> DafWriter:
        """Add an axis with unique string entries. With ``overwrite``, an existing axis is deleted first, with every
        vector and matrix that uses it.

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).axis_length("cell")
            2
        """
        require_valid_name(axis, what="axis", daf_name=self._name)
        values = plain_values(entries if not isinstance(entries, str) else [entries],
                              what=f"entries of the axis: {axis}", daf_name=self._name)
        if values.ndim != 1:
            raise DafShapeError(f"the entries of the new axis: {axis}\nare not a vector", daf_name=self._name)
        values = as_string_array(values, what=f"entries of the axis: {axis}")
        if len(set(values.tolist())) != values.shape[0]:
            raise DafShapeError(f"non-unique entries for new axis: {axis}", daf_name=self._name)
        with self._state.lock.write():
            if self._reads.format_has_axis(axis, for_change=True):
                if not overwrite:
                    raise existing_property("axis", axis, daf_name=self._name)
                self._require_rewrites("overwrite", "axis", axis)
                self._delete_axis(axis)
            with self._storing("axis", axis):
                self._format.format_add_axis(axis, values)
        return self

    def delete_axis(self, axis: str, *, must_exist: bool = True) -> DafWriter:
        """Delete an axis, with every vector of it and every matrix that uses it.

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().add_axis("cell", ["A"]).delete_axis("cell").has_axis("cell")
            False
        """
        require_lookup_name(axis, what="axis", daf_name=self._name)
        with self._state.lock.write():
            if not self._reads.format_has_axis(axis, for_change=True):
                if must_exist:
                    raise DafMissingError(f"missing axis: {axis}\nfor: delete_axis", daf_name=self._name,
                                          daf_preposition="of", what=("axis", axis))
                return self
            self._require_rewrites("delete", "axis", axis)
            self._delete_axis(axis)
        return self

    def _delete_axis(self, axis: str) -> None:
        self._invalidate(AxisCacheKey(axis))
        self._format.format_delete_axis(axis)
        self._state.versions.bump(AxisCacheKey(axis))

    def _prepare_fill(self, value: Any, eltype: EltypeLike | None, what: str) -> StorageScalar:
        """Validate (and convert exactly to ``eltype``) a scalar that fills a whole vector or matrix."""
        value = scalar_value(value, what=what)
        if eltype is None:
            return value
        if isinstance(value, str):
            raise DafTypeError(f"can't convert the string fill of the {what}\nto the element type: "
                               f"{eltype}", daf_name=self._name)
        return exact_scalar(value, require_number_dtype(eltype), what=f"fill of the {what}", daf_name=self._name)

    def _label_positions(self, axis: str, labels: Any, what: str) -> np.ndarray | None:
        """Where each entry of the axis is among a pandas object's string labels (``None`` when the labels are the
        entries in order, or are not strings, e.g. a default ``RangeIndex``: then the values are positional)."""
        if labels is None or not hasattr(labels, "dtype") or labels.dtype.kind not in "OUT":
            return None
        entries = self._axis_entries(axis)
        names = np.asarray(labels, dtype=object)
        if names.shape[0] == entries.shape[0] and np.array_equal(names, entries):
            return None
        import pandas as pd  # (the labels are a pandas index: pandas is already imported)

        index, entries_index = pd.Index(names), pd.Index(entries)
        problems = []
        missing = np.flatnonzero(~entries_index.isin(names))
        if missing.size:
            problems.append(f"first missing: {entries[missing[0]]} ({missing.size} missing)")
        extra = np.flatnonzero(entries_index.get_indexer(names) < 0)
        if extra.size:
            problems.append(f"first extra: {names[extra[0]]} ({extra.size} extra)")
        if not index.is_unique:
            problems.append(f"first duplicate: {index[index.duplicated()][0]}")
        if problems:
            raise DafValueError(f"{what}\nmismatch the entry names of the axis: {axis}\n("
                                + "; ".join(problems) + ")", daf_name=self._name)
        return index.get_indexer(entries)

    # Vectors.

    def _prepare_vector(self, axis: str, name: str, value: Any, eltype: EltypeLike | None) -> Any:
        """Validate and convert a vector value (before anything is changed)."""
        if isinstance(value, str | bool | int | float | np.generic):
            return self._prepare_fill(value, eltype, f"vector: {name}")
        if isinstance(value, SparseVector):
            vector: Any = value
        elif is_scipy_sparse(value):
            if 1 not in value.shape:
                raise DafShapeError(f"the sparse matrix given for the vector: {name}\nis not 1 x N or "
                                    "N x 1", daf_name=self._name)
            coo = value.tocoo(copy=True)
            coo.sum_duplicates()
            positions = coo.col if value.shape[0] == 1 else coo.row
            order = np.argsort(positions, kind="stable")
            vector = SparseVector(int(max(value.shape)), (positions[order] + 1).astype(np.int64), coo.data[order])
        else:
            values = plain_values(value, what=property_text("vector", axis, name), daf_name=self._name)
            if values.ndim != 1:
                raise DafShapeError(f"the value given for the vector: {name}\nis not 1-dimensional "
                                    f"(shape: {values.shape})", daf_name=self._name)
            # A pandas Series labelled with the axis entries in another order is aligned by label, as anndata does.
            positions = self._label_positions(axis, getattr(value, "index", None), "entry names of the: vector")
            if positions is not None:
                values = values[positions]
            vector = as_storable_array(values, what=f"vector: {name}")
        self._check_length(axis, vector.shape[0], f"vector: {name}")
        what = property_text("vector", axis, name)
        if isinstance(vector, SparseVector):
            dtype = require_number_dtype(vector.nzval.dtype, what=f"element type of the vector: {name}")
            if eltype is not None:
                dtype = require_number_dtype(eltype, what=f"element type of the vector: {name}")
            indtype = require_index_dtype(vector.nzind.dtype)
            nzind = np.asarray(vector.nzind, dtype=indtype)
            vector = SparseVector(vector.length, nzind, exact_cast(
                vector.nzval, dtype, what=what, daf_name=self._name,
                where=lambda at: self._entry_text("position", axis, int(nzind[at[0]]) - 1)))
            require_stored_vector(vector, vector.length, what=f"sparse vector given for: {name}",
                                  daf_name=self._name, error=DafValueError)
        elif eltype is not None:
            dtype = storage_dtype(eltype, what=f"element type of the vector: {name}")
            if (dtype == STRING_DTYPE) != (vector.dtype == STRING_DTYPE):
                raise DafTypeError(f"can't convert the vector: {name}\nof type: {vector.dtype}\n"
                                   f"to the element type: {eltype}", daf_name=self._name)
            vector = exact_cast(vector, dtype, what=what, daf_name=self._name,
                                where=lambda at: self._entry_text("position", axis, at[0]))
        return vector

    def _entry_text(self, kind: str, axis: str, position: int) -> str:
        """``<kind>: <position> (entry: <name>)``, how a message points at a value's place along an axis."""
        return f"{kind}: {position} (entry: {self._axis_entries(axis)[position]})"

    def set_vector(self, axis: str, name: str, value: Any, *, eltype: EltypeLike | None = None,
                   overwrite: bool = False, packed: bool | None = None) -> DafWriter:
        """Set a vector of an axis: a numpy array / list / pandas Series, a :class:`~pydaf.sparse.SparseVector` or 1 x N
        scipy sparse matrix (stored sparse), or a scalar to repeat.

        A Series labelled with strings is aligned by label to the axis entries (as anndata does); its labels must be
        exactly the entries, in any order (else a :class:`~pydaf.DafValueError` names the first missing and the first
        extra one). A Series with non-string labels (e.g. the default ``RangeIndex``) is positional, as an array.
        pandas' nullable arrays become their numpy type; a missing value (``pd.NA``) in an integer, Bool or string one
        is refused (a float one's is NaN).

        ``eltype`` converts the values exactly, as Julia's ``convert``: a value the type can't hold (out of range, a
        fraction or NaN for an integer type, an integer a float type can't hold exactly) is a
        :class:`~pydaf.DafInexactError` naming the first one and its position, never wrapped, truncated or rounded (a
        float given a narrower float type is rounded to it, as Julia's ``convert(Float32, 0.1)``).

        ``packed`` (Julia's): store it chunked and compressed, where the format packs (H5df) and the vector is large
        enough (``pydaf.core.packed_settings``); ``None`` (the default) uses the data set's ``packed=``.

        Example:
            >>> import pydaf, pandas as pd
            >>> daf = pydaf.MemoryDaf(name="example!").add_axis("cell", ["A", "B"])
            >>> daf.set_vector("cell", "age", [1, 2], eltype="UInt8").get_vector("cell", "age").dtype
            dtype('uint8')
            >>> daf.set_vector("cell", "donor", pd.Series(["N2", "N1"], index=["B", "A"])).get_vector("cell", "donor")
            array(['N1', 'N2'], dtype=object)
            >>> daf.set_vector("cell", "score", [1.0, -1.0], eltype="UInt16")
            Traceback (most recent call last):
            ...
            pydaf.errors.DafInexactError: can't convert exactly the value: -1.0
            at the position: 1 (entry: B)
            of the vector: score
            of the axis: cell
            to the element type: UInt16
            (InexactError: UInt16(-1.0); round, clip or fill the values first to change them)
            in the daf data: example!
        """
        self._require_not_reserved(axis, name)
        require_valid_name(name, what="vector", daf_name=self._name)
        resolve_packed(packed, False)  # (an invalid packed is refused before anything changes)
        with self._state.lock.write():
            self._require_axis(axis, f"for the vector: {name}")
            vector = self._prepare_vector(axis, name, value, eltype)
            self._require_vector_absent(axis, name, overwrite)
            self._before_set_vector(axis, name)
            with self._storing("vector", axis, name), self._packing(packed):
                self._format.format_set_vector(axis, name, vector)
        return self

    def delete_vector(self, axis: str, name: str, *, must_exist: bool = True) -> DafWriter:
        """Delete a vector of an axis.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A"]).set_vector("cell", "age", [1])
            >>> daf.delete_vector("cell", "age").has_vector("cell", "age")
            False
        """
        self._require_not_reserved(axis, name)
        with self._state.lock.write():
            self._require_axis(axis, f"for the vector: {name}")
            require_lookup_name(name, what="vector", daf_name=self._name)
            if not self._reads.format_has_vector(axis, name):
                if must_exist:
                    raise missing_property("vector", axis, name, daf_name=self._name)
                return self
            self._require_rewrites("delete", "vector", axis, name)
            self._invalidate(VectorCacheKey(axis, name))
            self._format.format_delete_vector(axis, name, for_set=False)
        return self

    @contextmanager
    def _building_vector(self, axis: str, name: str, overwrite: bool) -> Iterator[None]:
        """Hold the write lock while a builder's buffers are filled; on failure, remove the partial vector."""
        self._require_not_reserved(axis, name)
        require_valid_name(name, what="vector", daf_name=self._name)
        with self._state.lock.write():
            self._require_axis(axis, f"for the vector: {name}")
            self._require_vector_absent(axis, name, overwrite)
            self._before_set_vector(axis, name)
            try:
                yield
            except BaseException:
                kept_old = self._format.format_discard_empty()
                self._invalidate(VectorCacheKey(axis, name))
                if not kept_old and self._reads.format_has_vector(axis, name):
                    self._format.format_delete_vector(axis, name, for_set=False)
                raise

    @contextmanager
    def empty_dense_vector(self, axis: str, name: str, eltype: EltypeLike, *,
                           overwrite: bool = False, packed: bool | None = None) -> Iterator[np.ndarray]:
        """Create a dense numeric vector and yield its writable buffer (zero-filled; mapped straight into the file
        where the store allows) to fill in place. If the block raises, the vector is removed. ``packed`` as for
        :meth:`set_vector` (a packed buffer is in memory, written compressed when the block ends).

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"])
            >>> with daf.empty_dense_vector("cell", "age", "Int32") as age:
            ...     age[:] = [7, 8]
            >>> daf.get_vector("cell", "age").tolist()
            [7, 8]
        """
        dtype = require_number_dtype(eltype, what=f"element type of the vector: {name}")
        resolve_packed(packed, False)
        with self._building_vector(axis, name, overwrite), self._packing(packed):
            buffer = self._format.format_get_empty_dense_vector(axis, name, dtype)
            yield buffer
            self._format.format_filled_empty_dense_vector(axis, name, buffer)

    @contextmanager
    def empty_sparse_vector(self, axis: str, name: str, eltype: EltypeLike, nnz: int,
                            indtype: EltypeLike | None = None, *, overwrite: bool = False,
                            packed: bool | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Create a sparse numeric vector with ``nnz`` stored entries and yield its writable ``(nzind, nzval)``
        buffers to fill in place; ``nzind`` holds **1-based**, strictly increasing positions (Julia's layout).
        ``indtype`` defaults to ``UInt32`` (``UInt64`` for huge axes). ``packed`` as for :meth:`set_vector`.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B", "C"])
            >>> with daf.empty_sparse_vector("cell", "x", "Float32", 1) as (nzind, nzval):
            ...     nzind[0], nzval[0] = 3, 0.5
            >>> daf.get_vector("cell", "x").tolist()
            [0.0, 0.0, 0.5]
        """
        dtype = require_number_dtype(eltype, what=f"element type of the vector: {name}")
        nnz = _require_count(nnz, "nnz")
        resolve_packed(packed, False)
        with self._building_vector(axis, name, overwrite), self._packing(packed):
            length = self._reads.format_axis_length(axis)
            if nnz > length:
                raise DafShapeError(f"the nnz: {nnz}\nof the sparse vector: {name}\nis larger than "
                                    f"the length: {length}\nof the axis: {axis}", daf_name=self._name)
            index_dtype = require_index_dtype(indtype) if indtype is not None else indtype_for_size(length)
            nzind, nzval = self._format.format_get_empty_sparse_vector(axis, name, dtype, nnz, index_dtype)
            yield nzind, nzval
            filled = SparseVector(length, nzind, nzval)
            require_stored_vector(filled, length, what=f"sparse {property_text('vector', axis, name)}",
                                  daf_name=self._name, error=DafValueError)
            self._format.format_filled_empty_sparse_vector(axis, name, filled)

    # Matrices.

    def _prepare_matrix(self, rows_axis: str, columns_axis: str, name: str, value: Any,
                        eltype: EltypeLike | None) -> Any:
        if isinstance(value, str | bool | int | float | np.generic):
            return self._prepare_fill(value, eltype, f"matrix: {name}")
        if isinstance(value, SparseMatrixCSC):
            matrix: Any = value
        elif is_scipy_sparse(value):
            matrix = SparseMatrixCSC.from_scipy(value)
        else:
            values = plain_values(value, what=property_text("matrix", rows_axis, columns_axis, name),
                                  daf_name=self._name)
            if values.ndim != 2:
                raise DafShapeError(f"the value given for the matrix: {name}\nis not 2-dimensional "
                                    f"(shape: {values.shape})", daf_name=self._name)
            # A DataFrame labelled with the axes' entries in other orders is aligned by label, as anndata does.
            rows = self._label_positions(rows_axis, getattr(value, "index", None), "row names of the: matrix")
            columns = self._label_positions(columns_axis, getattr(value, "columns", None),
                                            "column names of the: matrix")
            if rows is not None:
                values = values[rows, :]
            if columns is not None:
                values = values[:, columns]
            matrix = np.asfortranarray(as_storable_array(values, what=f"matrix: {name}"))
        for index, (axis, what) in enumerate(((rows_axis, "rows"), (columns_axis, "columns"))):
            self._check_length(axis, matrix.shape[index], f"{what} of the matrix: {name}")
        what = property_text("matrix", rows_axis, columns_axis, name)
        if isinstance(matrix, SparseMatrixCSC):
            dtype = require_number_dtype(matrix.nzval.dtype, what=f"element type of the matrix: {name}")
            if eltype is not None:
                dtype = require_number_dtype(eltype, what=f"element type of the matrix: {name}")
            indtype = require_index_dtype(matrix.colptr.dtype)
            colptr, rowval = np.asarray(matrix.colptr, dtype=indtype), np.asarray(matrix.rowval, dtype=indtype)

            def where(at: tuple[int, ...]) -> str:
                column = int(np.searchsorted(colptr, at[0] + 1, side="right")) - 1
                return self._cell_text(rows_axis, columns_axis, int(rowval[at[0]]) - 1, column)

            matrix = SparseMatrixCSC(matrix.shape, colptr, rowval,
                                     exact_cast(matrix.nzval, dtype, what=what, daf_name=self._name, where=where))
            require_stored_matrix(matrix, matrix.shape, what=f"sparse matrix given for: {name}",
                                  daf_name=self._name, error=DafValueError)
        elif eltype is not None:
            dtype = storage_dtype(eltype, what=f"element type of the matrix: {name}")
            if (dtype == STRING_DTYPE) != (matrix.dtype == STRING_DTYPE):
                raise DafTypeError(f"can't convert the matrix: {name}\nof type: {matrix.dtype}\n"
                                   f"to the element type: {eltype}", daf_name=self._name)
            matrix = np.asfortranarray(exact_cast(matrix, dtype, what=what, daf_name=self._name,
                                                  where=lambda at: self._cell_text(rows_axis, columns_axis, *at)))
        return matrix

    def _cell_text(self, rows_axis: str, columns_axis: str, row: int, column: int) -> str:
        """``row: <i> (entry: <name>)\\nand the column: <j> (entry: <name>)``, a matrix value's place."""
        return (f"{self._entry_text('row', rows_axis, row)}\nand the "
                f"{self._entry_text('column', columns_axis, column)}")

    def set_matrix(self, rows_axis: str, columns_axis: str, name: str, value: Any, *,
                   eltype: EltypeLike | None = None, overwrite: bool = False, relayout: bool = True,
                   packed: bool | None = None) -> DafWriter:
        """Set a matrix of a pair of axes, shaped ``(n_rows, n_cols)``: a numpy array or DataFrame (stored
        column-major; a C-order array is copied), a scipy sparse matrix or :class:`~pydaf.sparse.SparseMatrixCSC`
        (stored sparse), or a scalar to repeat. With ``relayout`` (the default) the other layout is stored too.

        A DataFrame's string index and columns are aligned by label to the rows and columns axes, and ``eltype``
        converts exactly, as for :meth:`set_vector` (a refused value is named with its row and column, 0-based, and
        their entries; for sparse data only the stored values are converted). ``packed`` as for :meth:`set_vector`
        (each layout, and each sparse component, is packed if large enough).

        Example:
            >>> import pydaf, numpy as np
            >>> daf = pydaf.MemoryDaf(name="example!").add_axis("cell", ["A"]).add_axis("gene", ["X", "Y"])
            >>> daf.set_matrix("cell", "gene", "UMIs", np.array([[1, 2]])).has_matrix("gene", "cell", "UMIs",
            ...                                                                        relayout=False)
            True
            >>> daf.set_matrix("cell", "gene", "fraction", np.array([[0.5, 1.0]]), eltype="UInt8")
            Traceback (most recent call last):
            ...
            pydaf.errors.DafInexactError: can't convert exactly the value: 0.5
            at the row: 0 (entry: A)
            and the column: 0 (entry: X)
            of the matrix: fraction
            for the rows axis: cell
            and the columns axis: gene
            to the element type: UInt8
            (InexactError: UInt8(0.5); round, clip or fill the values first to change them)
            in the daf data: example!
        """
        require_valid_name(name, what="matrix", daf_name=self._name)
        relayout = relayout and rows_axis != columns_axis
        resolve_packed(packed, False)
        with self._state.lock.write(), self._packing(packed):
            self._require_matrix_axes(rows_axis, columns_axis, f"the matrix: {name}")
            matrix = self._prepare_matrix(rows_axis, columns_axis, name, value, eltype)
            self._require_matrix_absent(rows_axis, columns_axis, name, overwrite)
            if relayout:
                self._require_matrix_absent(columns_axis, rows_axis, name, overwrite)
            self._before_set_matrix(rows_axis, columns_axis, name)
            if relayout:
                self._before_set_matrix(columns_axis, rows_axis, name)
            self._bump_matrix(rows_axis, columns_axis, name)
            with self._storing("matrix", rows_axis, columns_axis, name):
                self._format.format_set_matrix(rows_axis, columns_axis, name, matrix)
            if relayout:
                stored, _ = self._reads.format_get_matrix(rows_axis, columns_axis, name)
                self._format.format_relayout_matrix(rows_axis, columns_axis, name, stored)
        return self

    def relayout_matrix(self, rows_axis: str, columns_axis: str, name: str, *, overwrite: bool = False,
                        packed: bool | None = None) -> DafWriter:
        """Store the other layout (``(columns_axis, rows_axis)``) of a matrix stored as ``(rows_axis,
        columns_axis)``; ``packed`` as for :meth:`set_vector`.

        Example:
            >>> import pydaf, numpy as np
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A"]).add_axis("gene", ["X", "Y"])
            >>> daf.set_matrix("cell", "gene", "UMIs", np.array([[1, 2]]), relayout=False)  # doctest: +ELLIPSIS
            MemoryDaf ...
            >>> daf.relayout_matrix("cell", "gene", "UMIs").get_matrix("gene", "cell", "UMIs",
            ...                                                         relayout=False).tolist()
            [[1], [2]]
        """
        resolve_packed(packed, False)
        with self._state.lock.write(), self._packing(packed):
            self._require_matrix_axes(rows_axis, columns_axis, f"the matrix: {name}")
            require_lookup_name(name, what="matrix", daf_name=self._name)
            if rows_axis == columns_axis:
                raise DafValueError(f"can't relayout square matrix: {name}\nof the axis: {rows_axis}\n"
                                    "due to daf representation limitations", daf_name=self._name)
            if not self._reads.format_has_matrix(rows_axis, columns_axis, name):
                raise missing_property("matrix", rows_axis, columns_axis, name, daf_name=self._name)
            self._require_matrix_absent(columns_axis, rows_axis, name, overwrite)
            stored = self._stored_matrix(rows_axis, columns_axis, name)  # validated before anything changes
            self._before_set_matrix(columns_axis, rows_axis, name)
            self._bump_matrix(rows_axis, columns_axis, name)
            self._format.format_relayout_matrix(rows_axis, columns_axis, name, stored)
        return self

    def delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, must_exist: bool = True,
                      relayout: bool = True) -> DafWriter:
        """Delete a matrix (with ``relayout``, both layouts).

        Example:
            >>> import pydaf, numpy as np
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A"]).add_axis("gene", ["X"])
            >>> daf.set_matrix("cell", "gene", "UMIs", np.array([[1]])).delete_matrix("gene", "cell", "UMIs") \\
            ...     .has_matrix("cell", "gene", "UMIs")
            False
        """
        relayout = relayout and rows_axis != columns_axis
        with self._state.lock.write():
            self._require_matrix_axes(rows_axis, columns_axis, f"the matrix: {name}")
            require_lookup_name(name, what="matrix", daf_name=self._name)
            if not self._has_matrix(rows_axis, columns_axis, name, relayout=relayout):
                if must_exist:
                    other = "\n(and the other way around)" if relayout else ""
                    raise DafMissingError(
                        f"missing matrix: {name}\nfor the rows axis: {rows_axis}\nand the columns axis: "
                        f"{columns_axis}{other}", daf_name=self._name)
                return self
            self._require_rewrites("delete", "matrix", rows_axis, columns_axis, name)
            self._invalidate(MatrixCacheKey(rows_axis, columns_axis, name))
            for rows, columns in ((rows_axis, columns_axis), (columns_axis, rows_axis))[:2 if relayout else 1]:
                if self._reads.format_has_matrix(rows, columns, name):
                    self._format.format_delete_matrix(rows, columns, name, for_set=False)
        return self

    @contextmanager
    def _building_matrix(self, rows_axis: str, columns_axis: str, name: str, overwrite: bool) -> Iterator[None]:
        require_valid_name(name, what="matrix", daf_name=self._name)
        with self._state.lock.write():
            self._require_matrix_axes(rows_axis, columns_axis, f"the matrix: {name}")
            self._require_matrix_absent(rows_axis, columns_axis, name, overwrite)
            self._before_set_matrix(rows_axis, columns_axis, name)
            self._bump_matrix(rows_axis, columns_axis, name)
            try:
                yield
            except BaseException:
                kept_old = self._format.format_discard_empty()
                self._invalidate(MatrixCacheKey(rows_axis, columns_axis, name))
                if not kept_old and self._reads.format_has_matrix(rows_axis, columns_axis, name):
                    self._format.format_delete_matrix(rows_axis, columns_axis, name, for_set=False)
                raise

    @contextmanager
    def empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str, eltype: EltypeLike, *,
                           overwrite: bool = False, packed: bool | None = None) -> Iterator[np.ndarray]:
        """Create a dense numeric matrix (this layout only) and yield its writable, column-major
        ``(n_rows, n_cols)`` buffer (zero-filled; mapped straight into the file where the store allows). ``packed`` as
        for :meth:`set_vector`.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
            >>> with daf.empty_dense_matrix("cell", "gene", "UMIs", "UInt16") as umis:
            ...     umis[:, 0] = [4, 5]
            >>> daf.get_matrix("cell", "gene", "UMIs").tolist()
            [[4], [5]]
        """
        dtype = require_number_dtype(eltype, what=f"element type of the matrix: {name}")
        resolve_packed(packed, False)
        with self._building_matrix(rows_axis, columns_axis, name, overwrite), self._packing(packed):
            buffer = self._format.format_get_empty_dense_matrix(rows_axis, columns_axis, name, dtype)
            yield buffer
            self._format.format_filled_empty_dense_matrix(rows_axis, columns_axis, name, buffer)

    @contextmanager
    def empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, eltype: EltypeLike, nnz: int,
                            indtype: EltypeLike | None = None, *, overwrite: bool = False,
                            packed: bool | None = None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Create a sparse numeric matrix (this layout only) with ``nnz`` stored entries and yield its writable
        ``(colptr, rowval, nzval)`` buffers, Julia's **1-based** CSC layout (``colptr[0] == 1``,
        ``colptr[-1] == nnz + 1``). ``indtype`` defaults to ``UInt32`` (``UInt64`` for huge sizes). ``packed`` as for
        :meth:`set_vector`.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
            >>> with daf.empty_sparse_matrix("cell", "gene", "UMIs", "Float32", 1) as (colptr, rowval, nzval):
            ...     colptr[:] = [1, 2]; rowval[0] = 2; nzval[0] = 9
            >>> daf.get_matrix("cell", "gene", "UMIs").toarray().tolist()
            [[0.0], [9.0]]
        """
        dtype = require_number_dtype(eltype, what=f"element type of the matrix: {name}")
        nnz = _require_count(nnz, "nnz")
        resolve_packed(packed, False)
        with self._building_matrix(rows_axis, columns_axis, name, overwrite), self._packing(packed):
            shape = (self._reads.format_axis_length(rows_axis), self._reads.format_axis_length(columns_axis))
            if nnz > shape[0] * shape[1]:
                raise DafShapeError(f"the nnz: {nnz}\nof the sparse matrix: {name}\nis larger than its "
                                    f"size: {shape[0]} x {shape[1]}", daf_name=self._name)
            index_dtype = (require_index_dtype(indtype) if indtype is not None
                           else indtype_for_size(max(shape[0], shape[1], nnz)))
            colptr, rowval, nzval = self._format.format_get_empty_sparse_matrix(
                rows_axis, columns_axis, name, dtype, nnz, index_dtype)
            # As Julia's builders: a valid matrix (every entry in row 1 of the first column) until filled. The rows
            # are pre-filled a block at a time, each released once written: a caller streaming a 0.7 GB rowval in
            # blocks (concatenate, copies) otherwise peaked at the whole rowval resident (871 MB for a 1.08 GB matrix).
            colptr[...] = nnz + 1
            colptr[0] = 1
            _fill_released(rowval, 1)
            yield colptr, rowval, nzval
            filled = SparseMatrixCSC(shape, colptr, rowval, nzval)
            what = f"sparse {property_text('matrix', rows_axis, columns_axis, name)}"
            require_stored_matrix(filled, shape, what=what, daf_name=self._name, error=DafValueError)
            self._format.format_filled_empty_sparse_matrix(rows_axis, columns_axis, name, filled)


#: Entries pre-filled per block by :func:`_fill_released` (32 MB of UInt32 indices).
_FILL_BLOCK = 1 << 23


def _fill_released(array: np.ndarray, value: int) -> None:
    """Fill ``array`` with ``value`` a block at a time, dropping each block's pages from the process once written
    (they stay in the file's page cache) where ``array`` lies in a shared file map; in memory, a plain fill."""
    for start in range(0, array.size, _FILL_BLOCK):
        block = array[start:start + _FILL_BLOCK]
        populate_pages(block)
        block[...] = value
        release_pages(block)


def _require_count(value: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
        raise DafValueError(f"invalid {what}: {value!r} (expected a non-negative integer)")
    return int(value)


write_methods(DafWriter)  # what a read-only data set refuses as a write (DafReader.__getattr__)
