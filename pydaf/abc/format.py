"""The storage contract every backend implements: Julia's ``format_*`` functions (``formats.jl``).

A backend is one subclass of :class:`FormatWriter` (or :class:`FormatReader` for read-only storage). It only moves
data: the reader/writer layer above (:mod:`pydaf.core`) has already validated names, axes, shapes and types, holds
the data lock, and owns caching and version counters. So a ``format_*`` method may assume:

- the data set's lock is held: at least its read lock for a :class:`FormatReader` method, its write lock for a
  :class:`FormatWriter` method (so no other call on this storage runs at the same time as a write);
- the axes it is given exist (or, for ``format_add_axis``, do not), and the property does (for getters and deletes)
  or does not (for setters and ``empty`` builders) exist; an overwrite is a delete with ``for_set=True`` followed by
  a set, under the same write lock;
- the names of new properties and axes are valid (:func:`pydaf.core.names.require_valid_name`: non-empty, no ``/``,
  ``\\``, NUL or newline, not starting with ``.``); names given to the ``format_has_*`` lookups are passed as the
  caller gave them, and a name the storage could never hold must simply not be found (never resolved to another
  place in the storage or outside it);
- dense matrices are column-major ``(n_rows, n_cols)`` numpy arrays, sparse data is a 1-based
  :class:`~pydaf.sparse.SparseVector` / :class:`~pydaf.sparse.SparseMatrixCSC`, strings are ``object`` arrays of
  ``str``, scalars are validated Python/numpy scalars;
- vectors and matrices it returns are never written to by the caller (the reader layer marks them read-only).

Getters return ``(value, group)``: the :class:`CacheGroup` under which the reader layer caches the value, or ``None``
for values not worth caching (already in memory, e.g. MemoryDaf's own arrays). Each method below states what it
trusts, in the manner of Julia's ``formats.jl``.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Hashable
from typing import Any, ClassVar, NamedTuple, TypeAlias

import numpy as np

from ..errors import DafError, DafModeError, DafUnsupportedError
from ..kernels.relayout import transpose_csc_into, transpose_dense_into
from ..sparse import SparseMatrixCSC, SparseVector
from ..storage_types import STRING_DTYPE, StorageScalar
from .reorder import CrashCounter, FormatReorderPlan, ReorderProgress

StoredVector: TypeAlias = np.ndarray | SparseVector
StoredMatrix: TypeAlias = np.ndarray | SparseMatrixCSC

MODES = ("r", "r+", "w+", "w")


class Capabilities(NamedTuple):
    """What a data set's storage can do (declared by its :class:`FormatReader`, read as
    :attr:`pydaf.DafReader.capabilities`).

    Attributes:
        supports_rewrites: stored properties can be deleted and overwritten (``False`` for append-only storage, a
            ZIP archive, which refuses both with :class:`~pydaf.DafAppendOnlyError`).
        maps_files: stored numbers come back as read-only memory maps of files (zero-copy).
        persistent: the data outlives the data set object (it is stored in files).

    Example:
        >>> Capabilities(supports_rewrites=False, maps_files=True, persistent=True).supports_rewrites
        False
    """

    supports_rewrites: bool
    maps_files: bool
    persistent: bool


class CacheGroup(enum.Enum):
    """What kind of cached item this is, so :meth:`~pydaf.DafReader.empty_cache` can clear or keep each kind."""

    MappedData = "MappedData"
    """Memory-mapped from storage: cheap to keep, cheap to recreate."""
    MemoryData = "MemoryData"
    """Read into (or computed in) memory, e.g. a relayout or a converted sparse matrix."""
    QueryData = "QueryData"
    """The result of a query."""

    def __str__(self) -> str:
        return self.value


class FormatReader(ABC):
    """Read access to one Daf storage. See the module docstring for the contract."""

    #: The name shown as ``type:`` in :meth:`~pydaf.DafReader.description`.
    type_name: ClassVar[str] = "Daf"

    #: Whether the storage may be written.
    is_writable: bool = False

    #: Whether stored properties can be deleted and overwritten (``False``: append-only storage; the writer layer
    #: refuses deletes and overwrites with :class:`~pydaf.DafAppendOnlyError` before calling the format).
    supports_rewrites: bool = True

    #: Whether stored numbers come back as read-only memory maps of files (zero-copy).
    maps_files: bool = False

    #: Whether the data outlives this object (it is stored in files that can be opened again).
    persistent: bool = False

    @property
    def capabilities(self) -> Capabilities:
        """The three declarations above, together."""
        return Capabilities(self.supports_rewrites, self.maps_files, self.persistent)

    def format_default_name(self) -> str:
        """The name of the data set when none was given (and there is no ``name`` scalar)."""
        return self.type_name

    def format_complete_path(self) -> str | None:
        """The absolute path of persistent storage, or ``None``."""
        return None

    def format_description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        """Append the ``type:`` line (and any storage-specific lines, e.g. the path) to a description."""
        lines.append(f"{indent}type: {self.type_name}")

    def format_description_footer(self, indent: str, lines: list[str], *, cache: bool, deep: bool,
                                  tensors: bool) -> None:
        """Append storage-specific lines at the end of a description (nothing by default)."""

    def format_shared_state(self, state: Any) -> Any:
        """The state (data lock, cache, version counters) of the data set: ``state``, or, when another handle in this
        process already opened the same storage (through another path or a symlink), that handle's state, so both
        see one lock and one cache. ``state`` by default."""
        return state

    def format_stores_references(self) -> bool:
        """Whether ``format_set_*`` keeps the arrays it is given (rather than writing them out), so a copy into this
        storage shares the source's arrays (Julia's in-memory copies); ``False`` by default."""
        return False

    def format_version_counter(self, key: Hashable) -> int:
        """How many times a property (``AxisCacheKey``, ``VectorCacheKey`` or ``MatrixCacheKey.either_layout()`` of
        :mod:`pydaf.core.cache`) was changed in the data sets this storage reads from other than through it (a chain:
        the changes made to its members directly); added to the data set's own version counter. 0 (the default) for
        storage that only changes through its own writer."""
        return 0

    def format_write_count(self) -> int:
        """How many times the data sets this storage reads from were written to other than through it (a chain: the
        sum of its members' write counts); 0 (the default) for storage that only changes through its own writer."""
        return 0

    def format_close(self) -> None:
        """Release OS resources (open files). Mapped arrays already handed out stay valid."""

    # Scalars.

    @abstractmethod
    def format_has_scalar(self, name: str) -> bool:
        """Whether a scalar property called ``name`` exists.

        This trusts that the read lock is held. ``name`` is unvalidated: one the storage could not hold is not found.
        """

    @abstractmethod
    def format_scalars_set(self) -> set[str]:
        """The names of the scalar properties (the caller copies the set, so it may be the backend's own).

        This trusts that the read lock is held.
        """

    @abstractmethod
    def format_get_scalar(self, name: str) -> StorageScalar:
        """The value of the scalar property ``name``: a ``str``, or a numpy (or Python ``bool``/``int``/``float``)
        number of a storage type, kept at its stored width.

        This trusts that the read lock is held and that the scalar exists.
        """

    # Axes.

    @abstractmethod
    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        """Whether the axis exists. With ``for_change``, the answer decides an ``add_axis`` or ``delete_axis`` that
        follows under the same write lock (a backend that composes others, or tracks what its axes are used for, may
        need to know); otherwise it is a plain lookup.

        This trusts that the read lock (the write lock, with ``for_change``) is held. ``axis`` is unvalidated.
        """

    @abstractmethod
    def format_axes_set(self) -> set[str]:
        """The names of the axes (the caller copies the set, so it may be the backend's own).

        This trusts that the read lock is held.
        """

    @abstractmethod
    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        """The entries of the axis, in order, as a 1-D ``object`` array of distinct ``str``, and how to cache it (the
        reader layer caches it, with its entry-to-index dictionary, until the axis changes).

        This trusts that the read lock is held and that the axis exists.
        """

    @abstractmethod
    def format_axis_length(self, axis: str) -> int:
        """The number of entries of the axis (called often: it should not read the entries).

        This trusts that the read lock is held and that the axis exists.
        """

    # Vectors.

    @abstractmethod
    def format_has_vector(self, axis: str, name: str) -> bool:
        """Whether the vector ``name`` of the axis exists (the virtual ``name`` and ``index`` vectors are the reader
        layer's business: they are never asked for, and never stored).

        This trusts that the read lock is held and that the axis exists. ``name`` is unvalidated.
        """

    @abstractmethod
    def format_vectors_set(self, axis: str) -> set[str]:
        """The names of the vectors of the axis, without ``name`` and ``index`` (the caller copies the set).

        This trusts that the read lock is held and that the axis exists.
        """

    @abstractmethod
    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        """The vector as stored, with the axis length: a dense numpy array of a storage type (strings as an
        ``object`` array of ``str``) or a :class:`SparseVector` with 1-based, strictly increasing ``nzind``; and how
        to cache it (:attr:`CacheGroup.MappedData` for a map of the storage, which should be returned without a
        copy).

        This trusts that the read lock is held, that the axis exists and that the vector exists.
        """

    # Matrices.

    @abstractmethod
    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        """Whether the matrix ``name`` is stored in this layout: column-major, with ``rows_axis`` rows and
        ``columns_axis`` columns. The other layout is a different entry (the reader layer asks for both).

        This trusts that the read lock is held and that both axes exist. ``name`` is unvalidated.
        """

    @abstractmethod
    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        """The names of the matrices stored in this layout (the caller copies the set).

        This trusts that the read lock is held and that both axes exist.
        """

    @abstractmethod
    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        """The matrix as stored in this layout, of shape ``(len(rows_axis), len(columns_axis))``: a column-major
        (Fortran-ordered) numpy array, or a :class:`SparseMatrixCSC` with 1-based ``colptr``/``rowval``; and how to
        cache it (:attr:`CacheGroup.MappedData` for a map of the storage, returned without a copy).

        This trusts that the read lock is held, that both axes exist and that the matrix exists in this layout.
        """

    def format_get_matrix_columns(self, rows_axis: str, columns_axis: str, name: str,
                                  columns: np.ndarray) -> StoredMatrix | None:
        """Some ``columns`` (0-based positions, any order) of the matrix as stored in this layout, read without the
        rest of it where the storage can (a packed matrix decodes only the chunks holding them): a new column-major
        array or :class:`SparseMatrixCSC` of shape ``(len(rows_axis), len(columns))``, which the reader validates.
        ``None`` (the default) means the storage has no cheaper way: the reader slices the whole matrix (of
        :meth:`format_get_matrix`, cached; zero-copy where it is mapped), so a backend need not implement this.

        This trusts what :meth:`format_get_matrix` does, and that ``columns`` are in range.
        """
        return None


class FormatWriter(FormatReader):
    """Read and write access to one Daf storage. See the module docstring for the contract."""

    is_writable = True

    #: Whether writes not given ``packed=`` pack (the data set constructor's ``packed=``; Julia's ``packed_default``).
    packed_default: bool = False

    #: Whether the write in progress packs (Julia's ``is_packed`` argument of each ``format_*`` write): the writer
    #: layer sets it, under the write lock, around the ``format_set_*``, ``format_relayout_matrix`` and ``empty``
    #: builder calls of one write. A format that packs stores a property packed when it is set and
    #: :func:`pydaf.core.packed_settings.chunks_for` gives a chunk shape; a format that does not pack ignores it.
    is_packed: bool = False

    # Scalars.

    @abstractmethod
    def format_set_scalar(self, name: str, value: StorageScalar) -> None:
        """Store the scalar property ``name``: a ``str``, or a number of a storage type (a Python ``bool``, ``int``
        or ``float`` is Julia's ``Bool``, ``Int64`` or ``Float64``), to be read back with the same type and width.

        This trusts that the write lock is held, that ``name`` is valid and that the scalar does not exist (an
        overwrite first deletes it with ``for_set=True``).
        """

    @abstractmethod
    def format_delete_scalar(self, name: str, *, for_set: bool) -> None:
        """Delete the scalar property ``name``. With ``for_set``, this is the first half of an overwrite:
        :meth:`format_set_scalar` follows under the same write lock, so a backend may keep what it needs to restore
        the old value should the process die in between (FilesDaf keeps hidden backups until the new value is in
        place), and skip checks that only a real delete needs (a chain refuses to delete a property that an earlier
        member also holds, but a set hides it). Without ``for_set``, nothing of the scalar may remain.

        This trusts that the write lock is held and that the scalar exists.
        """

    # Axes.

    @abstractmethod
    def format_add_axis(self, axis: str, entries: np.ndarray) -> None:
        """Add the axis with its ``entries``: a 1-D ``object`` array of distinct ``str``, in order. From now on, the
        axis has no vectors and no matrices.

        This trusts that the write lock is held, that ``axis`` is valid and does not exist (an overwrite first
        deletes it), and that the entries are distinct.
        """

    @abstractmethod
    def format_delete_axis(self, axis: str) -> None:
        """Delete the axis and every vector of it and matrix that uses it (either layout, square ones included);
        nothing of them may remain (unlike Julia, whose caller deletes the properties first).

        This trusts that the write lock is held and that the axis exists.
        """

    # Vectors.

    @abstractmethod
    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        """Store the vector ``name`` of the axis: a dense numpy array of a storage type (strings as an ``object``
        array of ``str``), a :class:`SparseVector` (1-based, strictly increasing ``nzind``), or a scalar to repeat
        along the axis. The backend may keep a reference to the arrays (MemoryDaf does) or copy them, and may store
        the data in another form that reads back the same (FilesDaf and H5df store mostly-empty strings sparse).

        This trusts that the write lock is held, that the axis exists, that ``name`` is valid and not ``name`` or
        ``index``, that the vector does not exist (an overwrite first deletes it with ``for_set=True``), and that
        the data has the axis length and a storage type.
        """

    @abstractmethod
    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        """Delete the vector ``name`` of the axis. With ``for_set``, this is the first half of an overwrite (a set or
        an ``empty`` builder of the same vector follows under the same write lock; see
        :meth:`format_delete_scalar`). Without ``for_set``, nothing of the vector may remain. Arrays returned
        earlier keep their values (H5df, whose freed space HDF5 may reuse, first moves their maps into private
        memory).

        This trusts that the write lock is held, that the axis exists and that the vector exists.
        """

    @abstractmethod
    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        """A writable buffer of the axis length and ``dtype``, zero-filled (or fresh space that reads as zeros),
        that becomes the vector: the caller fills it in place, then calls
        :meth:`format_filled_empty_dense_vector`; if the filling fails it calls :meth:`format_discard_empty`, then
        (unless that kept the old value) deletes the vector if :meth:`format_has_vector` says it exists. The vector
        may exist from this call on (MemoryDaf creates it here) or only once filled (H5df, FilesDaf); the write lock
        is held throughout.

        This trusts that the write lock is held, that the axis exists, that ``name`` is valid and not ``name`` or
        ``index``, that the vector does not exist, and that ``dtype`` is a numeric storage type.
        """

    def format_filled_empty_dense_vector(self, axis: str, name: str, filled: np.ndarray) -> None:
        """Called once the buffer of :meth:`format_get_empty_dense_vector` is filled (nothing by default)."""

    @abstractmethod
    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """Writable ``(nzind, nzval)`` buffers of ``nnz`` elements, of ``indtype`` and ``dtype``, that become the
        vector: the caller fills them (1-based, strictly increasing ``nzind``), checks them, and then calls
        :meth:`format_filled_empty_sparse_vector`, or on failure :meth:`format_discard_empty` (as for
        :meth:`format_get_empty_dense_vector`).

        This trusts what :meth:`format_get_empty_dense_vector` trusts, that ``nnz`` is at most the axis length and
        that ``indtype`` is an integer storage type.
        """

    def format_filled_empty_sparse_vector(self, axis: str, name: str, filled: SparseVector) -> None:
        """Called once the buffers of :meth:`format_get_empty_sparse_vector` are filled (nothing by default)."""

    # Matrices.

    @abstractmethod
    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        """Store the matrix ``name`` in this layout only (rows ``rows_axis``, columns ``columns_axis``): a
        column-major ``(n_rows, n_cols)`` numpy array of a storage type (strings as ``object``), a
        :class:`SparseMatrixCSC` (1-based), or a scalar to repeat over the whole matrix (a backend may store a zero
        fill as an empty sparse matrix, as Julia does). The other layout, if wanted, is stored afterwards by
        :meth:`format_relayout_matrix`.

        This trusts that the write lock is held, that both axes exist, that ``name`` is valid, that the matrix does
        not exist in this layout (an overwrite first deletes it with ``for_set=True``), and that the data has the
        axes' lengths and a storage type.
        """

    @abstractmethod
    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        """Delete the matrix ``name`` in this layout only (the reader layer deletes each layout it means to). With
        ``for_set``, this is the first half of an overwrite (see :meth:`format_delete_scalar`); without it, nothing
        of this layout may remain. Arrays returned earlier keep their values.

        This trusts that the write lock is held, that both axes exist and that the matrix exists in this layout.
        """

    @abstractmethod
    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        """A writable, zero-filled, column-major ``(n_rows, n_cols)`` buffer of ``dtype`` that becomes the matrix in
        this layout: the caller fills it in place, then calls :meth:`format_filled_empty_dense_matrix`, or on
        failure :meth:`format_discard_empty` and, if :meth:`format_has_matrix` says it exists, a delete (as for
        :meth:`format_get_empty_dense_vector`).

        This trusts that the write lock is held, that both axes exist, that ``name`` is valid, that the matrix does
        not exist in this layout, and that ``dtype`` is a numeric storage type.
        """

    def format_filled_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                         filled: np.ndarray) -> None:
        """Called once the buffer of :meth:`format_get_empty_dense_matrix` is filled (nothing by default)."""

    @abstractmethod
    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Writable ``(colptr, rowval, nzval)`` buffers of ``n_cols + 1``, ``nnz`` and ``nnz`` elements (zero-filled,
        or untouched fresh space that reads as zeros) that become the matrix in this layout: the caller fills them
        (1-based CSC), checks them, then calls :meth:`format_filled_empty_sparse_matrix`, or on failure
        :meth:`format_discard_empty` (as for :meth:`format_get_empty_dense_matrix`).

        This trusts what :meth:`format_get_empty_dense_matrix` trusts, that ``nnz`` is at most ``n_rows * n_cols``
        and that ``indtype`` is an integer storage type.
        """

    def format_filled_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                          filled: SparseMatrixCSC) -> None:
        """Called once the buffers of :meth:`format_get_empty_sparse_matrix` are filled (nothing by default)."""

    def format_discard_empty(self) -> bool:
        """Clean up after ``empty_*`` builders whose filling failed. Returns whether the storage itself removed what
        they started *and* kept the value each property had before (an overwriting builder's ``for_set`` delete
        undone), so the caller leaves the property as it is; ``False`` (the default, for storage that creates the
        property up front) has the caller delete the partial property instead."""
        return False

    def format_relayout_matrix(self, rows_axis: str, columns_axis: str, name: str, matrix: StoredMatrix) -> None:
        """Store the transpose of ``matrix`` (stored under ``(rows_axis, columns_axis)``) under
        ``(columns_axis, rows_axis)``, column-major. Numbers go through the ``empty_*`` builders, so a mapped store
        writes the result straight into the file."""
        if isinstance(matrix, SparseMatrixCSC):
            colptr, rowval, nzval = self.format_get_empty_sparse_matrix(
                columns_axis, rows_axis, name, matrix.dtype, matrix.nnz, matrix.colptr.dtype
            )
            transpose_csc_into(matrix.shape, matrix.colptr, matrix.rowval, matrix.nzval, colptr, rowval, nzval)
            filled = SparseMatrixCSC((matrix.shape[1], matrix.shape[0]), colptr, rowval, nzval)
            self.format_filled_empty_sparse_matrix(columns_axis, rows_axis, name, filled)
        elif matrix.dtype == STRING_DTYPE:
            self.format_set_matrix(columns_axis, rows_axis, name, np.asfortranarray(matrix.T))
        else:
            buffer = self.format_get_empty_dense_matrix(columns_axis, rows_axis, name, matrix.dtype)
            transpose_dense_into(matrix, buffer)
            self.format_filled_empty_dense_matrix(columns_axis, rows_axis, name, buffer)

    # Reorder (Julia's ``Reorder`` hooks; see :mod:`pydaf.abc.reorder` for the steps and what each may assume).

    #: Whether this storage implements the reorder hooks below (a leaf that does not, e.g. an append-only ZIP
    #: archive, is refused by :func:`pydaf.reorder_axes` before anything changes).
    supports_reorder: ClassVar[bool] = False

    def format_lock_reorder(self, operation_id: str) -> None:
        """Claim the reorder: from now until :meth:`format_cleanup_reorder`, :meth:`format_has_reorder_lock` is
        true (also for another process opening the storage, for persistent storage). ``operation_id`` (a UUID) is
        shared by every writer of one ``reorder_axes`` call, so storage shared by several writers (the groups of one
        HDF5 file) can tell its own lock from a foreign one."""
        raise self._no_reorder()

    def format_backup_reorder(self, plan: FormatReorderPlan) -> None:
        """Save whatever :meth:`format_reset_reorder` needs to restore every axis, vector and matrix of ``plan``."""
        raise self._no_reorder()

    def format_replace_reorder(self, plan: FormatReorderPlan, progress: ReorderProgress,
                               crash_counter: CrashCounter | None) -> None:
        """Write the permuted axes, vectors and matrices of ``plan``; call ``progress(n)`` as elements are written
        and ``tick_crash_counter(crash_counter)`` after each property."""
        raise self._no_reorder()

    def format_cleanup_reorder(self) -> None:
        """Drop the backup and the lock: the reorder is done."""
        raise self._no_reorder()

    def format_has_reorder_lock(self) -> bool:
        """Whether a reorder was claimed and not cleaned up (one in progress, or interrupted)."""
        return False

    def format_reset_reorder(self) -> bool:
        """Roll an interrupted reorder back to the old order and drop its lock; whether there was one."""
        return False

    def _no_reorder(self) -> DafError:  # (an append-only format's says so: DafAppendOnlyError)
        return DafUnsupportedError(f"{self.type_name} does not support reorder_axes",
                                   hint="(copy the data set to a format that does: MemoryDaf, FilesDaf, H5df, ZarrDaf)")


def parse_mode(mode: str) -> tuple[bool, bool, bool]:
    """Julia's ``parse_mode``: ``(is_writable, may_create, truncate)``; any other string raises."""
    if mode not in MODES:
        raise DafModeError(f"invalid mode: {mode}")
    return mode != "r", mode in ("w+", "w"), mode == "w"


def weakest_cache_group(*groups: CacheGroup | None) -> CacheGroup:
    """The cache group of data built from several parts: mapped only if every part is."""
    return CacheGroup.MappedData if all(group == CacheGroup.MappedData for group in groups) else CacheGroup.MemoryData
