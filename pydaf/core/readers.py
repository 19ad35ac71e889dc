"""The public read API (Julia's ``Readers``), written once over any :class:`~pydaf.abc.format.FormatReader`.

Every call takes the data set's read lock, validates its arguments, and caches what is costly to rebuild (relayouts,
converted sparse matrices, axis dictionaries); mapped data is cached as :attr:`CacheGroup.MappedData`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, overload

import numpy as np

from .._os.maps import mapped_region
from ..abc.format import CacheGroup, Capabilities, FormatReader, StoredMatrix, StoredVector
from ..errors import (
    DafClosedError,
    DafError,
    DafFormatError,
    DafIndexError,
    DafMissingError,
    DafReadOnlyError,
    DafShapeError,
    DafValueError,
    missing_property,
)
from ..hints import existing_names_hint
from ..sparse import DeferredArray, SparseMatrixCSC, SparseVector, read_only_array
from ..storage_types import StorageScalar, scalar_dtype, scalar_value
from .brief import brief_array, brief_scalar, percent
from .cache import (
    AxisCacheKey,
    AxisForm,
    CacheKey,
    DataCache,
    DataForm,
    MatrixCacheKey,
    QueryCacheKey,
    VectorCacheKey,
    VersionCounters,
    is_current,
    stamp_of,
)
from .locks import ReadWriteLock
from .names import RESERVED_VECTORS, require_lookup_name, unique_name
from .storage import CheckedReads, property_text
from .undef import Undef, UndefType
from .validation import (
    NUMBA_THRESHOLD,
    require_entries,
    require_scalar,
    require_sparse_rows,
    require_stored_matrix,
    require_stored_vector,
)
from .values import as_storable_array, is_scipy_sparse, plain_values

if TYPE_CHECKING:
    import pandas as pd
    import scipy.sparse as sp

#: From this many stored entries, the ``rowval`` of a sparse matrix read from storage is checked (and, if the backend
#: defers it, read) on first use, not when the matrix is fetched: see :meth:`DafReader._deferring_rows_check`.
DEFERRED_ROWS = NUMBA_THRESHOLD


class _State:
    """What a data set shares with every wrapper of it: the data lock, the cache, the version counters, and what
    is known to be valid (``validated``, which ``empty_cache`` keeps: see :meth:`DafReader._validate_mapped`)."""

    def __init__(self) -> None:
        self.lock = ReadWriteLock()
        self.cache = DataCache()
        self.versions = VersionCounters()
        self.validated: dict[CacheKey, tuple[Any, ...]] = {}


class _ClosedState:
    """What a closed data set has instead of its :class:`_State`: every use of it (the lock every read and write
    takes, the cache) raises :class:`~pydaf.DafClosedError`."""

    def __init__(self, name: str, path: str | None) -> None:
        reopen = (f"reopen it to use it again: pydaf.open_daf({path!r})" if path is not None
                  else "a closed data set that is not stored can't be reopened")
        self._name, self._hint = name, f"({reopen})"

    def error(self) -> DafClosedError:
        # (Julia's message names the data set first: the problem names it, there is no trailer)
        return DafClosedError(f"the daf data: {self._name}\nwas closed", daf_name=self._name, daf_preposition=None,
                              hint=self._hint)

    def __getattr__(self, attribute: str) -> Any:
        raise self.error()


class DafReader:
    """Read access to a Daf data set: scalars, axes, per-axis vectors and per-axis-pair matrices.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="example!")
        >>> daf.add_axis("cell", ["A", "B"]).set_vector("cell", "age", [3, 5]).get_vector("cell", "age").tolist()
        [3, 5]
    """

    def __init__(self, format: FormatReader, *, name: str | None = None, state: _State | None = None,
                 unique: bool = True) -> None:
        self._format = format
        # Every read of the backend goes through this, so whatever it raises on hostile storage is a DafError.
        self._reads = CheckedReads(format, format.format_default_name())
        self._state = format.format_shared_state(state or _State())
        self._external_writes = format.format_write_count()
        if name is None:
            try:
                stored = self._reads.format_get_scalar("name") if self._reads.format_has_scalar("name") else None
            except DafError:  # a damaged name scalar must not prevent opening (and checking) the data set
                stored = None
            name = stored if isinstance(stored, str) else format.format_default_name()
        # ``unique=False``: the name was made unique already (a chain needs its final name to build its storage).
        self._name = self._reads.daf_name = unique_name(name) if unique else name

    # Identity.

    @property
    def name(self) -> str:
        """The name of the data set, used in descriptions and error messages."""
        return self._name

    @property
    def format(self) -> FormatReader:
        """The storage backend (for advanced use; its ``format_*`` methods assume the lock is held)."""
        return self._format

    @property
    def capabilities(self) -> Capabilities:
        """What the storage of this data set can do, as its format declares it: whether it accepts deletes and
        overwrites (``supports_rewrites``; ``False`` for append-only storage, a ZIP archive), returns stored numbers
        as memory maps of files (``maps_files``), and outlives this object (``persistent``).

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().capabilities
            Capabilities(supports_rewrites=True, maps_files=False, persistent=False)
            >>> pydaf.MemoryDaf().capabilities.supports_rewrites
            True
        """
        return self._format.capabilities

    def complete_path(self) -> str | None:
        """The absolute path of persistent storage (``file#/group`` for a group in an HDF5 file), or ``None``."""
        return self._format.format_complete_path()

    def __repr__(self) -> str:
        return f"{self._type_text()} {self._name}"

    def _type_text(self) -> str:
        return self._format.type_name

    def __getattr__(self, attribute: str) -> Any:
        # Only reached for a missing attribute: a write method of a read-only data set raises a DafReadOnlyError (an
        # AttributeError, so ``hasattr`` stays false) saying how to write.
        raise missing_attribute(self, attribute)

    # Closing.

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (on this data set, or on the one a read-only wrapper wraps)."""
        return isinstance(self._state, _ClosedState)

    def close(self) -> None:
        """Release the data set: its cached data, and the files, maps and inter-process locks its storage holds
        (``FormatReader.format_close``); from then on every read, write and query of it (and of its read-only
        wrappers) raises :class:`~pydaf.DafClosedError`. Closing again does nothing. A ``with`` block closes the data
        set at its end. Other handles on the same storage (another open of the same path) stay open.

        Arrays already returned stay valid and read-only: a mapped array keeps its map of the file (never the lock
        of a FilesDaf, ZarrDaf or ZipDaf writer); an array mapped from an H5df file keeps this process's *shared*
        lock on that file until the array is dropped (so no other process can write the bytes under it), see
        docs/design/core.md. A :class:`~pydaf.MemoryDaf` drops its data, as ``io.BytesIO.close`` does. Closing a
        read-only wrapper closes the data set it wraps; closing a view or a chain closes only that view or chain
        (the data sets it reads stay open; reading through them once those are closed raises the same error).

        Example:
            >>> import os, tempfile, pydaf
            >>> path = os.path.join(tempfile.mkdtemp(), "x.h5df")
            >>> with pydaf.H5df(path, "w", name="x") as daf:
            ...     _ = daf.add_axis("cell", ["A", "B"])
            >>> daf.closed
            True
            >>> daf.axis_length("cell")  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            pydaf.errors.DafClosedError: the daf data: x
            was closed
            (reopen it to use it again: pydaf.open_daf('...x.h5df'))
        """
        state = self._state
        if isinstance(state, _ClosedState):
            return
        with state.lock.write():  # (waits for reads and writes in flight)
            if isinstance(self._state, _ClosedState):  # (closed by another thread meanwhile)
                return
            self._state = _ClosedState(self._name, self._format.format_complete_path())
            state.cache.empty()  # (the cached arrays: H5df's hold a share of the file's lock)
            self._format.format_close()

    def __enter__(self) -> DafReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # Locks and cache (for code that composes several calls: copies, chains, views, interop, queries).

    @contextmanager
    def read_lock(self) -> Iterator[None]:
        """Hold the data set's read lock for a ``with`` block, so several reads see one state (no write can happen in
        between). Reentrant; every public read method also takes it by itself.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"])
            >>> with daf.read_lock():
            ...     daf.axis_length("cell"), daf.axis_vector("cell").tolist()
            (2, ['A', 'B'])
        """
        with self._state.lock.read():
            yield

    def write_count(self) -> int:
        """How many times the write lock was released: a cheap "anything may have changed" stamp.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf()
            >>> before = daf.write_count()
            >>> daf.set_scalar("x", 1).write_count() - before
            1
        """
        return self._state.lock.write_count + self._format.format_write_count()

    @property
    def cache(self) -> DataCache:
        """The data set's cache (:class:`~pydaf.core.cache.DataCache`), shared with its read-only wrappers. Derived
        data kept here must be keyed by the typed keys of :mod:`pydaf.core.cache`, so writes invalidate it.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A"])
            >>> _ = daf.axis_dict("cell")
            >>> [key.text() for key, _ in daf.cache.entries()]
            ['axis_dict[axis: cell]']
        """
        return self._state.cache

    def cached_computation(self, key: QueryCacheKey, compute: Callable[[], tuple[Any, Iterable[Any]]], *,
                           store: bool = True) -> Any:
        """A value computed from the data set (a query result): the cached one if it is still current (nothing it
        read changed since, :func:`~pydaf.core.cache.is_current`), else ``compute()``, which returns the value and
        the keys of what it read (:class:`~pydaf.core.cache.VectorCacheKey`, …). With ``store`` the new value is cached
        (as ``QueryData``). Runs under the read lock.

        Example:
            >>> import pydaf
            >>> from pydaf.core.cache import QueryCacheKey, VectorCacheKey
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A"]).set_vector("cell", "age", [3])
            >>> total = lambda: (int(daf.get_vector("cell", "age").sum()), [VectorCacheKey("cell", "age")])
            >>> daf.cached_computation(QueryCacheKey("total age"), total)
            3
            >>> daf.set_vector("cell", "age", [4], overwrite=True).cached_computation(QueryCacheKey("total age"), total)
            4
        """
        with self._state.lock.read():
            entry = self._state.cache.entry(key)
            if entry is not None and entry.stamp is not None and is_current(self, entry.stamp):
                return entry.value
            if entry is not None:
                self._state.cache.discard(key)
            write_count = self.write_count()
            value, dependencies = compute()
            if store:
                self._state.cache.put(key, value, CacheGroup.QueryData,
                                      stamp=stamp_of(self, dependencies, write_count))
            return value

    # Scalars.

    def has_scalar(self, name: str) -> bool:
        """Whether a scalar property exists.

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().set_scalar("version", 1).has_scalar("version")
            True
        """
        require_lookup_name(name, what="scalar", daf_name=self._name)
        with self._state.lock.read():
            return self._reads.format_has_scalar(name)

    def scalars_set(self) -> set[str]:
        """The names of the scalar properties.

        Example:
            >>> import pydaf
            >>> sorted(pydaf.MemoryDaf().set_scalar("a", 1).set_scalar("b", "x").scalars_set())
            ['a', 'b']
        """
        with self._state.lock.read():
            return set(self._reads.format_scalars_set())

    @overload
    def get_scalar(self, name: str) -> StorageScalar: ...
    @overload
    def get_scalar(self, name: str, *, default: StorageScalar | UndefType | None) -> StorageScalar | None: ...

    def get_scalar(self, name: str, *, default: StorageScalar | UndefType | None = Undef) -> StorageScalar | None:
        """The value of a scalar property: a ``str``, a Python ``bool``/``int``/``float`` as stored from Python, or a
        numpy scalar keeping the stored width. If missing, ``default`` is returned (``Undef``, the default, raises).

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().set_scalar("organism", "human")
            >>> daf.get_scalar("organism"), daf.get_scalar("version", default=None)
            ('human', None)
        """
        require_lookup_name(name, what="scalar", daf_name=self._name)
        with self._state.lock.read():
            if not self._reads.format_has_scalar(name):
                if default is Undef:
                    raise missing_property("scalar", name, daf_name=self._name,
                                  hint=existing_names_hint(name, self._reads.format_scalars_set(), "scalars"))
                return default
            value = self._reads.format_get_scalar(name)
            require_scalar(value, what=property_text("scalar", name), daf_name=self._name)
            return value

    # Axes.

    def has_axis(self, axis: str) -> bool:
        """Whether an axis exists.

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().add_axis("cell", ["A"]).has_axis("gene")
            False
        """
        require_lookup_name(axis, what="axis", daf_name=self._name)
        with self._state.lock.read():
            return self._reads.format_has_axis(axis, for_change=False)

    def axes_set(self) -> set[str]:
        """The names of the axes.

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().add_axis("cell", ["A"]).axes_set()
            {'cell'}
        """
        with self._state.lock.read():
            return set(self._reads.format_axes_set())

    def _require_axis(self, axis: str, what_for: str) -> None:
        require_lookup_name(axis, what="axis", daf_name=self._name)
        if not self._reads.format_has_axis(axis, for_change=False):
            raise DafMissingError(f"missing axis: {axis}\n{what_for}", daf_name=self._name, daf_preposition="of",
                                  what=("axis", axis),
                                  hint=existing_names_hint(axis, self._reads.format_axes_set(), "axes"))

    def axis_length(self, axis: str) -> int:
        """The number of entries of an axis.

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).axis_length("cell")
            2
        """
        with self._state.lock.read():
            self._require_axis(axis, "for: axis_length")
            return self._reads.format_axis_length(axis)

    def _cached(self, key: CacheKey, compute: Callable[[], tuple[Any, CacheGroup | None]]) -> Any:
        external_writes = self._format.format_write_count()
        if external_writes != self._external_writes:
            # The data sets this storage reads from (a chain's members) were written to directly: what was cached from
            # them may be stale, and nothing tells which part.
            self._state.cache.drop_if(lambda _key, entry: entry.stamp is None)
            self._external_writes = external_writes
        return self._state.cache.get_or_compute(key, compute)

    def _axis_entries(self, axis: str) -> np.ndarray:
        def compute() -> tuple[np.ndarray, CacheGroup | None]:
            entries, group = self._reads.format_axis_vector(axis)
            if group is not None:  # (data a backend keeps in memory was validated when it was stored)
                require_entries(entries, self._reads.format_axis_length(axis), what=property_text("axis", axis),
                                daf_name=self._name)
            return read_only_array(entries), group

        return self._cached(AxisCacheKey(axis), compute)

    @overload
    def axis_vector(self, axis: str) -> np.ndarray: ...
    @overload
    def axis_vector(self, axis: str, *, default: UndefType | None) -> np.ndarray | None: ...

    def axis_vector(self, axis: str, *, default: UndefType | None = Undef) -> np.ndarray | None:
        """The entries of an axis, as a read-only ``object`` array of ``str`` (``None`` if missing and
        ``default=None``).

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).axis_vector("cell").tolist()
            ['A', 'B']
        """
        if default is not None and default is not Undef:
            raise DafValueError(f"invalid default for axis_vector: {default!r} (expected None)", daf_name=self._name)
        with self._state.lock.read():
            if default is None:
                require_lookup_name(axis, what="axis", daf_name=self._name)
                if not self._reads.format_has_axis(axis, for_change=False):
                    return None
            self._require_axis(axis, "for: axis_vector")
            return self._axis_entries(axis)

    def axis_dict(self, axis: str) -> Mapping[str, int]:
        """A read-only mapping from each entry of an axis to its (0-based) position (a view of the cached ``dict``:
        Julia hands out the ``Dict`` itself, which a caller could change under every later lookup).

        Example:
            >>> import pydaf
            >>> positions = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).axis_dict("cell")
            >>> positions["B"], dict(positions)
            (1, {'A': 0, 'B': 1})
        """
        with self._state.lock.read():
            self._require_axis(axis, "for: axis_dict")
            return MappingProxyType(self._axis_dict(axis))

    def _axis_dict(self, axis: str) -> dict[str, int]:
        def compute() -> tuple[dict[str, int], CacheGroup]:
            entries = self._axis_entries(axis)
            positions = {entry: position for position, entry in enumerate(entries.tolist())}
            if len(positions) != entries.shape[0]:
                raise DafFormatError(
                    f"invalid entries of the axis: {axis}\nfound: {entries.shape[0] - len(positions)} repeated "
                    "entries\nexpected: unique entries", daf_name=self._name)
            return positions, CacheGroup.MemoryData

        return self._cached(AxisCacheKey(axis, AxisForm.DICT), compute)

    def axis_indices(self, axis: str, entries: Iterable[str], *, allow_empty: bool = False,
                     allow_missing: bool = False) -> np.ndarray:
        """The 0-based positions of entries of an axis. With ``allow_empty``, ``""`` gives ``-1``; with
        ``allow_missing``, any unknown entry gives ``-1``; otherwise unknown entries raise.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"])
            >>> daf.axis_indices("cell", ["B", "", "A"], allow_empty=True).tolist()
            [1, -1, 0]
        """
        with self._state.lock.read():
            self._require_axis(axis, "for: axis_dict")
            positions = self._axis_dict(axis)
            entries = list(entries)
            result = np.empty(len(entries), dtype=np.int64)
            for index, entry in enumerate(entries):
                position = positions.get(entry)
                if position is None:
                    if (allow_empty and entry == "") or allow_missing:
                        position = -1
                    else:
                        raise DafMissingError(f"missing entry: {entry}\nfor the axis: {axis}", daf_name=self._name)
                result[index] = position
            return result

    def axis_entries(self, axis: str, indices: Sequence[int] | np.ndarray | None = None, *,
                     allow_empty: bool = False) -> np.ndarray:
        """The entries of an axis at 0-based positions (all of them when ``indices`` is ``None``). With
        ``allow_empty``, a negative position gives ``""``.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"])
            >>> daf.axis_entries("cell", [1, -1], allow_empty=True).tolist()
            ['B', '']
        """
        with self._state.lock.read():
            self._require_axis(axis, "for: axis_vector")
            entries = self._axis_entries(axis)
            if indices is None:
                return entries
            positions = np.asarray(indices)
            if positions.size and positions.dtype.kind not in "iu":
                raise DafValueError(f"invalid indices for the axis: {axis}\n(expected integers)", daf_name=self._name)
            positions = positions.astype(np.int64, copy=False)
            negative = positions < 0
            if negative.any() and not allow_empty:
                raise DafValueError(
                    f"negative index: {int(positions[negative][0])}\nfor the axis: {axis}\n(pass allow_empty=True "
                    "to get empty entries)", daf_name=self._name)
            if positions.size and positions.max() >= entries.shape[0]:
                raise DafValueError(
                    f"index: {int(positions.max())}\nis out of bounds for the axis: {axis}\nof length: "
                    f"{entries.shape[0]}", daf_name=self._name)
            result = entries[np.where(negative, 0, positions)] if entries.shape[0] else np.full(
                positions.shape, "", dtype=object)
            if negative.any():
                result = result.copy()
                result[negative] = ""
            return read_only_array(result)

    # Vectors.

    def has_vector(self, axis: str, name: str) -> bool:
        """Whether a vector exists for an axis (always true for the virtual ``name`` and ``index`` vectors).

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().add_axis("cell", ["A"]).has_vector("cell", "name")
            True
        """
        with self._state.lock.read():
            self._require_axis(axis, f"for has_vector: {name}")
            require_lookup_name(name, what="vector", daf_name=self._name)
            return name in RESERVED_VECTORS or self._reads.format_has_vector(axis, name)

    def vectors_set(self, axis: str) -> set[str]:
        """The names of the vectors of an axis (without the virtual ``name`` and ``index``).

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().add_axis("cell", ["A"]).set_vector("cell", "age", [1]).vectors_set("cell")
            {'age'}
        """
        with self._state.lock.read():
            self._require_axis(axis, "for: vectors_set")
            return set(self._reads.format_vectors_set(axis))

    def _check_default_vector(self, axis: str, name: str, default: Any) -> np.ndarray | None:
        """Validate a non-scalar ``default`` (its length, and its index if it is a pandas Series)."""
        if default is None or default is Undef or isinstance(default, str | int | float | np.generic):
            return None
        values = plain_values(default)
        if values.ndim != 1:
            raise DafShapeError(f"the default for the vector: {name}\nis not a vector", daf_name=self._name)
        length = self._reads.format_axis_length(axis)
        if values.shape[0] != length:
            raise DafShapeError(
                f"the length: {values.shape[0]}\nof the default for the vector: {name}\nis different from the length: "
                f"{length}\nof the axis: {axis}", daf_name=self._name)
        self._check_names(axis, default, "entry names of the: default", index=True)
        return values

    def _check_names(self, axis: str, value: Any, what: str, *, index: bool) -> None:
        """If ``value`` is a pandas object labelled with strings, its labels must be the axis entries."""
        labels = getattr(value, "index" if index else "columns", None)
        if labels is None or not hasattr(labels, "dtype") or labels.dtype.kind not in "OUT":
            return
        entries = self._axis_entries(axis)
        if len(labels) != entries.shape[0] or not np.array_equal(np.asarray(labels, dtype=object), entries):
            raise DafShapeError(f"{what}\nmismatch the entry names of the axis: {axis}", daf_name=self._name)

    @overload
    def get_stored_vector(self, axis: str, name: str) -> StoredVector: ...
    @overload
    def get_stored_vector(self, axis: str, name: str, *, default: Any) -> StoredVector | None: ...

    def get_stored_vector(self, axis: str, name: str, *, default: Any = Undef) -> StoredVector | None:
        """The vector exactly as stored, zero-copy: a dense read-only numpy array, or a
        :class:`~pydaf.sparse.SparseVector` with 1-based ``nzind`` (read-only, memory-mapped where the store is).

        Example:
            >>> import pydaf, scipy.sparse as sp
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B", "C"])
            >>> daf.set_vector("cell", "x", pydaf.SparseVector(3, np.array([2]), np.array([1.5])))  # doctest: +ELLIPSIS
            MemoryDaf ...
            >>> daf.get_stored_vector("cell", "x").nzind.tolist()
            [2]
        """
        with self._state.lock.read():
            self._require_axis(axis, f"for the vector: {name}")
            require_lookup_name(name, what="vector", daf_name=self._name)
            default_values = self._check_default_vector(axis, name, default)
            if name == "name":
                return self._axis_entries(axis)
            if name == "index":
                return self._index_vector(axis)
            if not self._reads.format_has_vector(axis, name):
                return self._vector_default(axis, name, default, default_values)
            return self._stored_vector(axis, name)

    def _index_vector(self, axis: str) -> np.ndarray:
        return read_only_array(np.arange(self._reads.format_axis_length(axis), dtype=np.int64))

    def _validate_mapped(self, key: CacheKey, stored: StoredVector | StoredMatrix,
                         validate: Callable[[], None]) -> None:
        """Run ``validate`` on ``stored`` data unless the same file bytes were validated with no write since.
        ``empty_cache`` drops data, not what was learned about it: a sparse matrix mapped again is not scanned again
        (200M entries take 0.14-0.2 s, `benchmarks/bench_validation.py`). The bytes of a region can change only by
        a write through this data set (counted), or through another process's writer, which for H5df the file's
        locks exclude while it is open here, and which elsewhere replaces files (new identity, time or size)."""
        stamp = self._mapped_stamp(stored)
        if stamp is None or self._state.validated.get(key) != stamp:
            validate()
            if stamp is not None:
                self._state.validated[key] = stamp

    def _mapped_stamp(self, stored: StoredVector | StoredMatrix) -> tuple[Any, ...] | None:
        """What identifies the file bytes of sparse ``stored`` data and the writes so far, or ``None`` if not all of
        it is mapped (dense data is checked in O(1); memory is read again anyway)."""
        arrays: tuple[Any, ...] = ()
        if isinstance(stored, SparseMatrixCSC):
            arrays = (stored.colptr, stored.rowval_or_deferred(), stored.nzval)
        elif isinstance(stored, SparseVector):
            arrays = (stored.nzind, stored.nzval)
        regions = tuple(mapped_region(array) if isinstance(array, np.ndarray) else None for array in arrays)
        if not regions or None in regions:
            return None
        return regions, self._state.lock.write_count, self._format.format_write_count()

    def _deferring_rows_check(self, key: CacheKey, matrix: SparseMatrixCSC, shape: tuple[int, int],
                              what: str) -> SparseMatrixCSC:
        """A large sparse matrix, checked now but for its ``rowval``, which is read (if the backend deferred it)
        and checked on first use: a per-column reduction (``>| Sum``, a column's entries) needs only ``colptr`` and
        ``nzval``, so it reads and scans half the data (docs/design/checks.md)."""
        stamp = self._mapped_stamp(matrix)
        if stamp is not None and self._state.validated.get(key) == stamp:
            return matrix
        require_stored_matrix(matrix, shape, what=what, daf_name=self._name, rows=False)
        source = matrix.rowval_or_deferred()
        daf_name, validated = self._name, self._state.validated

        def load() -> np.ndarray:
            rowval = source.load() if isinstance(source, DeferredArray) else source
            if isinstance(source, DeferredArray) and (rowval.shape != source.shape or rowval.dtype != source.dtype):
                raise DafFormatError(f"the rowval of the {what}\nwas read as {rowval.shape[0]} {rowval.dtype} "
                                     f"where {source.shape[0]} {source.dtype} were declared", daf_name=daf_name)
            require_sparse_rows(shape, matrix.colptr, rowval, what=what, daf_name=daf_name)
            if stamp is not None:
                validated[key] = stamp
            return rowval

        return SparseMatrixCSC(matrix.shape, matrix.colptr, DeferredArray(source.shape, source.dtype, load),
                               matrix.nzval)

    def _stored_vector(self, axis: str, name: str) -> StoredVector:
        def compute() -> tuple[StoredVector, CacheGroup | None]:
            vector, group = self._reads.format_get_vector(axis, name)
            if group is not None:  # (data a backend keeps in memory was validated when it was stored)
                self._validate_mapped(VectorCacheKey(axis, name), vector, lambda: require_stored_vector(
                    vector, self._reads.format_axis_length(axis), what=property_text("vector", axis, name),
                    daf_name=self._name))
            if isinstance(vector, SparseVector):
                return vector.read_only(), group
            return read_only_array(vector), group

        return self._cached(VectorCacheKey(axis, name), compute)

    def _vector_elsewhere(self, axis: str, name: str) -> str:
        """For a missing vector's message: the other axes that have a vector of that name, and how to reach it in a
        query when this axis has a vector of their entries (``@ cell : age``, where ``@ cell : donor : age`` was
        meant)."""
        lines = []
        vectors = self._reads.format_vectors_set(axis)
        for other in sorted(self._reads.format_axes_set()):
            if other != axis and name in self._reads.format_vectors_set(other):
                reach = f": reach it with the query: @ {axis} : {other} : {name}" if other in vectors else ""
                lines.append(f"\n(a vector of the axis {other}{reach})")
        return "".join(lines)

    def _vector_default(self, axis: str, name: str, default: Any, values: np.ndarray | None) -> Any:
        if default is Undef:
            hint = existing_names_hint(name, self._reads.format_vectors_set(axis), f"vectors for the axis {axis}")
            raise missing_property("vector", axis, name, daf_name=self._name,
                                   hint=hint + self._vector_elsewhere(axis, name))
        if default is None:
            return None
        if values is not None:
            return read_only_array(as_storable_array(values, what=f"default for the vector: {name}"))
        value = scalar_value(default, what=f"default for the vector: {name}")
        return read_only_array(np.full(self._reads.format_axis_length(axis), value, dtype=scalar_dtype(value)))

    @overload
    def get_vector(self, axis: str, name: str) -> np.ndarray: ...
    @overload
    def get_vector(self, axis: str, name: str, *, default: Any) -> np.ndarray | None: ...

    def get_vector(self, axis: str, name: str, *, default: Any = Undef) -> np.ndarray | None:
        """A vector as a dense, read-only numpy array (zero-copy where the store is mapped; a sparse vector is
        densified and cached). ``name`` gives the entries, ``index`` the 0-based positions. If missing, ``default``:
        ``Undef`` raises, ``None`` returns ``None``, a scalar is repeated, a vector (of the axis length) is returned.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"])
            >>> daf.get_vector("cell", "age", default=0).tolist()
            [0, 0]
        """
        with self._state.lock.read():
            stored = self.get_stored_vector(axis, name, default=default)
            if isinstance(stored, SparseVector):
                def compute() -> tuple[np.ndarray, CacheGroup]:
                    return read_only_array(stored.to_dense()), CacheGroup.MemoryData

                return self._cached(VectorCacheKey(axis, name, DataForm.DENSE), compute)
            return stored

    def get_pd_vector(self, axis: str, name: str, *, default: Any = Undef) -> pd.Series | None:
        """:meth:`get_vector` as a ``pandas.Series`` indexed by the axis entries (zero-copy values).

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).set_vector("cell", "age", [3, 5])
            >>> daf.get_pd_vector("cell", "age")["B"]
            np.int64(5)
        """
        import pandas as pd

        with self._state.lock.read():
            values = self.get_vector(axis, name, default=default)
            if values is None:
                return None
            return pd.Series(values, index=pd.Index(self._axis_entries(axis), name=axis), name=name, copy=False)

    # Matrices.

    def _require_matrix_axes(self, rows_axis: str, columns_axis: str, what_for: str) -> None:
        self._require_axis(rows_axis, f"for the rows of {what_for}")
        self._require_axis(columns_axis, f"for the columns of {what_for}")

    def has_matrix(self, rows_axis: str, columns_axis: str, name: str, *, relayout: bool = True) -> bool:
        """Whether a matrix exists for a pair of axes (with ``relayout``, in either layout).

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A"]).add_axis("gene", ["X", "Y"])
            >>> daf.set_matrix("cell", "gene", "UMIs", np.array([[1, 2]]), relayout=False).has_matrix(
            ...     "gene", "cell", "UMIs")
            True
        """
        with self._state.lock.read():
            self._require_matrix_axes(rows_axis, columns_axis, f"the matrix: {name}")
            require_lookup_name(name, what="matrix", daf_name=self._name)
            return self._has_matrix(rows_axis, columns_axis, name, relayout=relayout)

    def _has_matrix(self, rows_axis: str, columns_axis: str, name: str, *, relayout: bool) -> bool:
        if self._reads.format_has_matrix(rows_axis, columns_axis, name):
            return True
        return relayout and rows_axis != columns_axis and self._reads.format_has_matrix(columns_axis, rows_axis, name)

    def matrices_set(self, rows_axis: str, columns_axis: str, *, relayout: bool = True,
                     tensors: bool = True) -> set[str]:
        """The names of the matrices of a pair of axes (with ``relayout``, stored in either layout). With
        ``tensors``, the matrices ``<entry>_<name>`` of every entry of an axis are shown as one ``/<axis>/_<name>``.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A"]).add_axis("gene", ["X"])
            >>> daf.set_matrix("cell", "gene", "UMIs", np.array([[1]])).matrices_set("gene", "cell")
            {'UMIs'}
        """
        with self._state.lock.read():
            self._require_matrix_axes(rows_axis, columns_axis, "matrices_set")
            names = set(self._reads.format_matrices_set(rows_axis, columns_axis))
            if relayout and rows_axis != columns_axis:
                names |= self._reads.format_matrices_set(columns_axis, rows_axis)
            if tensors:
                for tensor_axis, tensor_name, members in self._tensors_of(names):
                    names -= members
                    names.add(f"/{tensor_axis}/_{tensor_name}")
            return names

    def _tensors_of(self, names: set[str]) -> list[tuple[str, str, set[str]]]:
        """The tensors among matrix names: ``(axis, name, member matrices)`` for names ``<entry>_<name>`` where
        ``entry`` is an entry of ``axis``."""
        tensors: dict[tuple[str, str], set[str]] = {}
        candidates = [name for name in names if "_" in name]
        if not candidates:
            return []
        for axis in sorted(self._reads.format_axes_set()):
            positions = self._axis_dict(axis)
            for name in candidates:
                for split in [index for index, character in enumerate(name) if character == "_"]:
                    if name[:split] in positions and split + 1 < len(name):
                        tensors.setdefault((axis, name[split + 1:]), set()).add(name)
        return [(axis, name, members) for (axis, name), members in sorted(tensors.items())]

    def _check_default_matrix(self, rows_axis: str, columns_axis: str, name: str, default: Any) -> Any:
        if default is None or default is Undef or isinstance(default, str | int | float | np.generic):
            return None
        shape = (self._reads.format_axis_length(rows_axis), self._reads.format_axis_length(columns_axis))
        matrix: SparseMatrixCSC | np.ndarray
        if is_scipy_sparse(default):
            matrix = SparseMatrixCSC.from_scipy(default)
        else:
            matrix = np.asfortranarray(plain_values(default))
            if matrix.ndim != 2:
                raise DafShapeError(f"the default for the matrix: {name}\nis not a matrix", daf_name=self._name)
        for index, (axis, what) in enumerate(((rows_axis, "rows"), (columns_axis, "columns"))):
            if matrix.shape[index] != shape[index]:
                raise DafShapeError(
                    f"the length: {matrix.shape[index]}\nof the {what} of the default for the matrix: {name}\n"
                    f"is different from the length: {shape[index]}\nof the axis: {axis}", daf_name=self._name)
        self._check_names(rows_axis, default, "row names of the: default", index=True)
        self._check_names(columns_axis, default, "column names of the: default", index=False)
        return matrix

    @overload
    def get_stored_matrix(self, rows_axis: str, columns_axis: str, name: str, *,
                          relayout: bool = True) -> StoredMatrix: ...
    @overload
    def get_stored_matrix(self, rows_axis: str, columns_axis: str, name: str, *, default: Any,
                          relayout: bool = True) -> StoredMatrix | None: ...

    def get_stored_matrix(self, rows_axis: str, columns_axis: str, name: str, *, default: Any = Undef,
                          relayout: bool = True) -> StoredMatrix | None:
        """The matrix as stored, zero-copy: a column-major ``(n_rows, n_cols)`` read-only numpy array, or a
        :class:`~pydaf.sparse.SparseMatrixCSC` with the stored 1-based ``colptr``/``rowval``/``nzval`` (memory-mapped
        where the store is) — what numba kernels take. If only the other layout is stored (and ``relayout``), its
        relayout is computed once and cached.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
            >>> import scipy.sparse as sp
            >>> daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(np.array([[0], [7]])))  # doctest: +ELLIPSIS
            MemoryDaf ...
            >>> daf.get_stored_matrix("cell", "gene", "UMIs").rowval.tolist()
            [2]
        """
        with self._state.lock.read():
            self._require_matrix_axes(rows_axis, columns_axis, f"the matrix: {name}")
            require_lookup_name(name, what="matrix", daf_name=self._name)
            default_matrix = self._check_default_matrix(rows_axis, columns_axis, name, default)
            if self._reads.format_has_matrix(rows_axis, columns_axis, name):
                return self._stored_matrix(rows_axis, columns_axis, name)
            if relayout and rows_axis != columns_axis and self._reads.format_has_matrix(columns_axis, rows_axis, name):
                return self._relayout_matrix(rows_axis, columns_axis, name)
            if default is Undef:
                other = "\n(and the other way around)" if relayout and rows_axis != columns_axis else ""
                names = set(self._reads.format_matrices_set(rows_axis, columns_axis))
                if other:
                    names |= self._reads.format_matrices_set(columns_axis, rows_axis)
                raise DafMissingError(
                    f"missing matrix: {name}\nfor the rows axis: {rows_axis}\nand the columns axis: {columns_axis}"
                    f"{other}", daf_name=self._name, what=("matrix", rows_axis, columns_axis, name),
                    hint=existing_names_hint(name, names, f"matrices for the axes {rows_axis} and {columns_axis}"))
            if default is None:
                return None
            if default_matrix is not None:
                if isinstance(default_matrix, SparseMatrixCSC):
                    return default_matrix
                return read_only_array(as_storable_array(default_matrix, what=f"default for the matrix: {name}"))
            value = scalar_value(default, what=f"default for the matrix: {name}")
            shape = (self._reads.format_axis_length(rows_axis), self._reads.format_axis_length(columns_axis))
            if not isinstance(value, str) and value == 0:
                colptr = np.ones(shape[1] + 1, dtype=np.int64)
                empty = np.empty(0, dtype=np.int64)
                return SparseMatrixCSC(shape, colptr, empty, np.empty(0, dtype=scalar_dtype(value)))
            return read_only_array(np.full(shape, value, dtype=scalar_dtype(value), order="F"))

    def _stored_matrix(self, rows_axis: str, columns_axis: str, name: str) -> StoredMatrix:
        def compute() -> tuple[StoredMatrix, CacheGroup | None]:
            return self._fetch_matrix(rows_axis, columns_axis, name)

        return self._cached(MatrixCacheKey(rows_axis, columns_axis, name), compute)

    def _fetch_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix, CacheGroup | None]:
        """A stored matrix from the backend (not the cache), validated, read-only."""
        matrix, group = self._reads.format_get_matrix(rows_axis, columns_axis, name)
        if group is not None:  # (data a backend keeps in memory was validated when it was stored)
            shape = (self._reads.format_axis_length(rows_axis), self._reads.format_axis_length(columns_axis))
            what = property_text("matrix", rows_axis, columns_axis, name)
            key = MatrixCacheKey(rows_axis, columns_axis, name)
            if isinstance(matrix, SparseMatrixCSC) and (
                    matrix.nnz >= DEFERRED_ROWS or isinstance(matrix.rowval_or_deferred(), DeferredArray)):
                matrix = self._deferring_rows_check(key, matrix, shape, what)
            else:
                self._validate_mapped(key, matrix, lambda: require_stored_matrix(matrix, shape, what=what,
                                                                                 daf_name=self._name))
        if isinstance(matrix, SparseMatrixCSC):
            return matrix.read_only(), group
        return read_only_array(matrix), group

    def _relayout_matrix(self, rows_axis: str, columns_axis: str, name: str) -> StoredMatrix:
        def compute() -> tuple[StoredMatrix, CacheGroup]:
            source = self._stored_matrix(columns_axis, rows_axis, name)
            if isinstance(source, SparseMatrixCSC):
                return source.transpose().read_only(), CacheGroup.MemoryData
            return read_only_array(np.asfortranarray(source.T)), CacheGroup.MemoryData

        return self._cached(MatrixCacheKey(rows_axis, columns_axis, name, DataForm.RELAYOUT), compute)

    def get_stored_matrix_columns(self, rows_axis: str, columns_axis: str, name: str,
                                  columns: slice | Sequence[int] | np.ndarray) -> StoredMatrix:
        """Some columns of :meth:`get_stored_matrix` (``columns``: a slice, or 0-based positions in any order), read
        without the rest of the matrix where the storage can: the columns of a packed matrix decode only the chunks
        that hold them (each call; decoded chunks are kept in a bounded cache, ``DAF_PACKED_LOCAL_CACHE_KB``). Else
        (flat data, a matrix already read, or only the other layout stored) the columns of the whole stored matrix:
        a range of columns of mapped data is a zero-copy view.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X", "Y", "Z"])
            >>> daf = daf.set_matrix("cell", "gene", "UMIs", np.arange(6).reshape(2, 3))
            >>> daf.get_stored_matrix_columns("cell", "gene", "UMIs", [2, 0]).tolist()
            [[2, 0], [5, 3]]
        """
        with self._state.lock.read():
            self._require_matrix_axes(rows_axis, columns_axis, f"the matrix: {name}")
            require_lookup_name(name, what="matrix", daf_name=self._name)
            n_columns = self._reads.format_axis_length(columns_axis)
            positions = np.arange(n_columns)[columns] if isinstance(columns, slice) else \
                np.asarray(columns, dtype=np.int64).reshape(-1)
            if positions.size and (positions.min() < 0 or positions.max() >= n_columns):
                raise DafIndexError(f"column positions out of range: {positions.min()} to {positions.max()}\nfor "
                                    f"the axis: {columns_axis} of length: {n_columns}", daf_name=self._name)
            if self._reads.format_has_matrix(rows_axis, columns_axis, name) \
                    and self._state.cache.entry(MatrixCacheKey(rows_axis, columns_axis, name)) is None:
                selected = self._reads.format_get_matrix_columns(rows_axis, columns_axis, name, positions)
                if selected is not None:
                    shape = (self._reads.format_axis_length(rows_axis), int(positions.shape[0]))
                    require_stored_matrix(selected, shape, what=property_text("matrix", rows_axis, columns_axis, name),
                                          daf_name=self._name)
                    if isinstance(selected, SparseMatrixCSC):
                        return selected.read_only()
                    return read_only_array(selected)
            matrix = self.get_stored_matrix(rows_axis, columns_axis, name)
            return select_stored_columns(matrix, columns if isinstance(columns, slice) else positions)

    @overload
    def get_matrix(self, rows_axis: str, columns_axis: str, name: str, *,
                   relayout: bool = True) -> np.ndarray | sp.csc_matrix: ...
    @overload
    def get_matrix(self, rows_axis: str, columns_axis: str, name: str, *, default: Any,
                   relayout: bool = True) -> np.ndarray | sp.csc_matrix | None: ...

    def get_matrix(self, rows_axis: str, columns_axis: str, name: str, *, default: Any = Undef,
                   relayout: bool = True) -> np.ndarray | sp.csc_matrix | None:
        """A matrix with shape ``(n_rows, n_cols)``: dense as a read-only column-major numpy array (zero-copy where
        the store is mapped), sparse as a 0-based ``scipy.sparse.csc_matrix`` (cached; ``nzval`` shared). If missing,
        ``default``: ``Undef`` raises, ``None`` gives ``None``, ``0`` gives an empty sparse matrix, another scalar a
        filled matrix, a matrix of the right shape itself. For the 1-based stored components use
        :meth:`get_stored_matrix`.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X", "Y", "Z"])
            >>> daf.set_matrix("cell", "gene", "UMIs", np.arange(6).reshape(2, 3))  # doctest: +ELLIPSIS
            MemoryDaf ...
            >>> daf.get_matrix("gene", "cell", "UMIs").tolist()
            [[0, 3], [1, 4], [2, 5]]
        """
        with self._state.lock.read():
            stored = self.get_stored_matrix(rows_axis, columns_axis, name, default=default, relayout=relayout)
            if not isinstance(stored, SparseMatrixCSC):
                return stored
            if default is not Undef and not self._has_matrix(rows_axis, columns_axis, name, relayout=relayout):
                return stored.to_scipy()
            return self._cached(MatrixCacheKey(rows_axis, columns_axis, name, DataForm.SCIPY),
                                lambda: (stored.to_scipy(), CacheGroup.MemoryData))

    def get_pd_matrix(self, rows_axis: str, columns_axis: str, name: str, *, default: Any = Undef,
                      relayout: bool = True) -> pd.DataFrame | None:
        """:meth:`get_matrix` as a ``pandas.DataFrame`` indexed by the rows entries with the columns entries as
        columns. Dense data is shared (zero-copy); sparse data becomes a sparse DataFrame (never densified).

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
            >>> daf.set_matrix("cell", "gene", "UMIs", np.array([[1], [2]])).get_pd_matrix("cell", "gene", "UMIs")[
            ...     "X"].tolist()
            [1, 2]
        """
        import pandas as pd

        with self._state.lock.read():
            matrix = self.get_matrix(rows_axis, columns_axis, name, default=default, relayout=relayout)
            if matrix is None:
                return None
            index = pd.Index(self._axis_entries(rows_axis), name=rows_axis)
            columns = pd.Index(self._axis_entries(columns_axis), name=columns_axis)
            if isinstance(matrix, np.ndarray):
                return pd.DataFrame(matrix, index=index, columns=columns, copy=False)
            return pd.DataFrame.sparse.from_spmatrix(matrix, index=index, columns=columns)

    # Queries.

    def get_query(self, query: Any = None, *, cache: bool = True) -> Any:
        """Apply a query (a string like ``"@ cell [ age > 60 ] : donor"`` or built with ``|``): names come back as a
        ``set``, a scalar as a numpy scalar or ``str``, a vector as a ``pandas.Series`` and a matrix as a
        ``pandas.DataFrame`` labelled by entry names (sparse stays sparse). With ``cache`` the result is kept (as
        ``QueryData``) until any input changes; ``daf[query]`` is ``get_query(query, cache=False)``. Without a query,
        returns something to pipe a query into: ``Axis("cell") | LookupVector("age") | daf.get_query()``.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).set_vector("cell", "age", [3, 5])
            >>> daf.get_query("@ cell : age >> Sum")
            np.int64(8)
        """
        from ..queries.results import PendingQuery, as_pandas, query_result

        if query is None:
            return PendingQuery(self, cache=cache, form=as_pandas)
        return as_pandas(query_result(self, query, cache=cache))

    get_pd_query = get_query

    def __getitem__(self, query: Any) -> Any:
        return self.get_query(query, cache=False)

    def get_np_query(self, query: Any = None, *, cache: bool = True) -> Any:
        """Like :meth:`get_query`, but a vector is a numpy array and a matrix a column-major numpy array or a
        ``scipy.sparse.csc_matrix`` (read-only, zero-copy where the data is stored as is).

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).set_vector("cell", "age", [3, 5])
            >>> daf.get_np_query("@ cell : age % Abs").tolist()
            [3, 5]
        """
        from ..queries.results import PendingQuery, as_numpy, query_result

        if query is None:
            return PendingQuery(self, cache=cache, form=as_numpy)
        return as_numpy(query_result(self, query, cache=cache))

    def get_stored_query(self, query: Any = None, *, cache: bool = True) -> Any:
        """Like :meth:`get_np_query`, but a sparse matrix is a :class:`~pydaf.sparse.SparseMatrixCSC` with Julia's
        1-based ``colptr``/``rowval`` (what :meth:`get_stored_matrix` returns, and what numba kernels take): a stored
        matrix, or an element-wise result that keeps its structure, shares the stored index arrays (mapped where the
        store is), where ``get_np_query`` makes 0-based copies of them for scipy.

        Example:
            >>> import pydaf, scipy.sparse as sp
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
            >>> daf = daf.set_matrix("cell", "gene", "UMIs", sp.csc_matrix(np.array([[0], [-7]])))
            >>> absolute = daf.get_stored_query("@ cell @ gene :: UMIs % Abs")
            >>> absolute.rowval.tolist(), absolute.nzval.tolist()
            ([2], [7])
        """
        from ..queries.results import PendingQuery, as_stored, query_result

        if query is None:
            return PendingQuery(self, cache=cache, form=as_stored)
        return as_stored(query_result(self, query, cache=cache))

    def has_query(self, query: Any) -> bool:
        """Whether the query is valid and the axes and properties it names exist (without computing it).

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A"])
            >>> daf.has_query("@ cell"), daf.has_query("@ gene")
            (True, False)
        """
        from ..queries.evaluator import has_query

        return has_query(self, query)

    def query_requires_relayout(self, query: Any) -> bool:
        """Whether computing the query needs a matrix in the layout that is not stored.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A"]).add_axis("gene", ["X"])
            >>> daf = daf.set_matrix("gene", "cell", "UMIs", np.array([[1]]), relayout=False)
            >>> daf.query_requires_relayout("@ cell @ gene :: UMIs")
            True
        """
        from ..queries.evaluator import query_requires_relayout

        return query_requires_relayout(self, query)

    def get_frame(self, axis: Any, columns: Any = None, *, cache: bool = False) -> pd.DataFrame:
        """A ``pandas.DataFrame`` with a row per entry of ``axis`` (an axis name or an axis query such as
        ``"@ cell [ age > 1 ]"``), indexed by the entry names. ``columns``: vector names, ``(name, query)`` pairs
        (or a dict) where the query is a suffix (``": donor : age"``) or a full query; by default ``name`` and every
        vector of the axis, alphabetically.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).set_vector("cell", "age", [3, 5])
            >>> daf.get_frame("cell", [("double", ": age % Convert type Float64")])["double"].tolist()
            [3.0, 5.0]
        """
        from ..queries.results import get_frame

        return get_frame(self, axis, columns, cache=cache)

    get_pd_frame = get_frame

    # Version counters.

    def axis_version_counter(self, axis: str) -> int:
        """A counter that changes whenever the axis is deleted (so its entries may have changed).

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().add_axis("cell", ["A"]).axis_version_counter("cell")
            0
        """
        return self._version_counter(AxisCacheKey(axis))

    def vector_version_counter(self, axis: str, name: str) -> int:
        """A counter that changes whenever the vector is set (safe cache keys for copies of it).

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A"]).set_vector("cell", "age", [1])
            >>> daf.vector_version_counter("cell", "age")
            1
        """
        return self._version_counter(VectorCacheKey(axis, name))

    def matrix_version_counter(self, rows_axis: str, columns_axis: str, name: str) -> int:
        """A counter that changes whenever the matrix is set, in either layout (the axes order is irrelevant).

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A"]).add_axis("gene", ["X"])
            >>> daf.set_matrix("cell", "gene", "UMIs", np.array([[1]])).matrix_version_counter("gene", "cell", "UMIs")
            1
        """
        return self._version_counter(MatrixCacheKey(rows_axis, columns_axis, name).either_layout())

    def _version_counter(self, key: AxisCacheKey | VectorCacheKey | MatrixCacheKey) -> int:
        return self._state.versions[key] + self._format.format_version_counter(key)

    # Cache.

    def empty_cache(self, *, clear: CacheGroup | None = None, keep: CacheGroup | None = None) -> None:
        """Drop cached data: everything, only the ``clear`` group, or all but the ``keep`` group.

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf().empty_cache(clear=pydaf.CacheGroup.MemoryData)
        """
        if clear is not None and keep is not None:
            raise DafValueError("can't specify both clear and keep for empty_cache", daf_name=self._name)
        self._state.cache.empty(clear=clear, keep=keep)

    # Description.

    def description(self, *, cache: bool = False, deep: bool = False, tensors: bool = True) -> str:
        """A YAML-like summary of the data set, in the same layout as Julia's ``description``.

        Example:
            >>> import pydaf
            >>> print(pydaf.MemoryDaf(name="example!").add_axis("cell", ["A", "B"]).description(), end="")
            name: example!
            type: MemoryDaf
            axes:
              cell: 2 entries
        """
        lines: list[str] = []
        with self._state.lock.read():
            self._describe("", lines, cache=cache, deep=deep, tensors=tensors)
        lines.append("")
        return "\n".join(lines)

    def _describe(self, indent: str, lines: list[str], *, cache: bool, deep: bool, tensors: bool) -> None:
        lines.append(f"{indent}name: {self._name}")
        indent = indent.replace("-", " ")
        self._description_header(indent, lines, deep)
        scalars = sorted(self._reads.format_scalars_set())
        if scalars:
            lines.append(f"{indent}scalars:")
            lines.extend(f"{indent}  {name}: {brief_scalar(self._reads.format_get_scalar(name))}"
                         for name in scalars)
        axes = sorted(self._reads.format_axes_set())
        if axes:
            lines.append(f"{indent}axes:")
            lines.extend(f"{indent}  {axis}: {self._reads.format_axis_length(axis)} entries" for axis in axes)
            self._describe_vectors(indent, lines, axes)
            found_tensors = self._describe_matrices(indent, lines, axes, tensors=tensors)
            if cache:
                self._describe_cache(indent, lines)
            if found_tensors:
                self._describe_tensors(indent, lines, found_tensors)
        self._description_footer(indent, lines, cache=cache, deep=deep, tensors=tensors)

    def _description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        self._format.format_description_header(indent, lines, deep)

    def _description_footer(self, indent: str, lines: list[str], *, cache: bool, deep: bool, tensors: bool) -> None:
        self._format.format_description_footer(indent, lines, cache=cache, deep=deep, tensors=tensors)

    def _describe_vectors(self, indent: str, lines: list[str], axes: list[str]) -> None:
        header = False
        for axis in axes:
            names = sorted(self._reads.format_vectors_set(axis))
            if not names:
                continue
            if not header:
                lines.append(f"{indent}vectors:")
                header = True
            lines.append(f"{indent}  {axis}:")
            lines.extend(f"{indent}    {name}: {brief_array(self._stored_vector(axis, name))}" for name in names)

    def _describe_matrices(self, indent: str, lines: list[str], axes: list[str], *,
                           tensors: bool) -> dict[tuple[str, str], list[tuple[str, str, set[str]]]]:
        header = False
        found: dict[tuple[str, str], list[tuple[str, str, set[str]]]] = {}
        for rows_axis in axes:
            for columns_axis in axes:
                names = set(self._reads.format_matrices_set(rows_axis, columns_axis))
                if tensors:
                    pair_tensors = self._tensors_of(names)
                    if pair_tensors:
                        found[(rows_axis, columns_axis)] = pair_tensors
                        for _, _, members in pair_tensors:
                            names -= members
                if not names:
                    continue
                if not header:
                    lines.append(f"{indent}matrices:")
                    header = True
                lines.append(f"{indent}  {rows_axis},{columns_axis}:")
                lines.extend(
                    f"{indent}    {name}: {brief_array(self._stored_matrix(rows_axis, columns_axis, name))}"
                    for name in sorted(names))
        return found

    def _describe_cache(self, indent: str, lines: list[str]) -> None:
        entries = self._state.cache.entries()
        if not entries:
            return
        lines.append(f"{indent}cache:")
        for key, entry in entries:
            text = key.text().replace("'", "''")
            lines.append(f"{indent}  '{text}': ({entry.group}) {_brief_cached(entry.value)}")

    def _describe_tensors(self, indent: str, lines: list[str],
                          found: dict[tuple[str, str], list[tuple[str, str, set[str]]]]) -> None:
        by_axis: dict[str, list[tuple[str, str, str, set[str]]]] = {}
        for (rows_axis, columns_axis), pair_tensors in found.items():
            for tensor_axis, tensor_name, members in pair_tensors:
                by_axis.setdefault(tensor_axis, []).append((rows_axis, columns_axis, tensor_name, members))
        lines.append(f"{indent}tensors:")
        for tensor_axis in sorted(by_axis):
            lines.append(f"{indent}  {tensor_axis}:")
            n_entries = self._reads.format_axis_length(tensor_axis)
            last_pair = None
            for rows_axis, columns_axis, tensor_name, members in sorted(by_axis[tensor_axis]):
                if (rows_axis, columns_axis) != last_pair:
                    lines.append(f"{indent}    {rows_axis},{columns_axis}:")
                    last_pair = (rows_axis, columns_axis)
                suffix = "" if len(members) == n_entries else f" ({len(members)} out of {n_entries})"
                briefs: dict[tuple[str, int], list[int]] = {}
                for member in members:
                    text, counted = _counted_brief(self._stored_matrix(rows_axis, columns_axis, member))
                    counters = briefs.setdefault(text, [0, 0, 0])
                    for index, value in enumerate(counted):
                        counters[index] += value
                texts = [_counted_text(key, *counters) for key, counters in sorted(briefs.items())]
                if len(texts) == 1:
                    lines.append(f"{indent}      {tensor_name}{suffix}: {texts[0]}")
                else:
                    lines.append(f"{indent}      {tensor_name}{suffix}:")
                    lines.extend(f"{indent}      - {text}" for text in texts)

    # Wrapping.

    def read_only(self, *, name: str | None = None) -> DafReader:
        """A read-only view of this data set (itself if already read-only and no new name is given).

        Example:
            >>> import pydaf
            >>> pydaf.MemoryDaf(name="example!").read_only().name
            'example!.read_only'
        """
        if isinstance(self, DafReadOnly) and name is None:
            return self
        return DafReadOnlyWrapper(self, name=name)


class DafReadOnly(DafReader):
    """A data set with no write methods (Julia's abstract ``DafReadOnly``): what :meth:`~DafReader.read_only` returns,
    whether a :class:`DafReadOnlyWrapper` of a data set, a view (:func:`~pydaf.viewer`) or a read-only chain
    (:func:`~pydaf.chain_reader`). A write method raises a :class:`~pydaf.DafReadOnlyError` saying how to write
    (:attr:`write_hint`, else through the wrapped data set, else by reopening the file for writing).

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="example!").add_axis("cell", ["A"])
        >>> [isinstance(reader, pydaf.DafReadOnly) for reader in (daf, daf.read_only(), pydaf.viewer(daf))]
        [False, True, True]
    """

    #: How to write to what this data set shows (``None``: see :func:`missing_attribute`).
    write_hint: ClassVar[str | None] = None


class DafReadOnlyWrapper(DafReadOnly):
    """A read-only wrapper of a data set (Julia's ``DafReadOnlyWrapper``, shown as ``ReadOnly``): what
    :meth:`~DafReader.read_only` and a mode ``r`` open return. It shares the wrapped data set's storage, lock, cache and
    version counters, so it sees every change made through the writer.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="example!").add_axis("cell", ["A"])
        >>> view = daf.read_only()
        >>> hasattr(view, "set_scalar"), view.axis_length("cell"), view.base is daf
        (False, 1, True)
    """

    def __init__(self, daf: DafReader, *, name: str | None = None) -> None:
        if isinstance(daf._state, _ClosedState):
            raise daf._state.error()
        self._base = daf
        super().__init__(daf.format, name=name or f"{daf.name}.read_only", state=daf._state)

    @property
    def _state(self) -> Any:
        """The wrapped data set's state, so closing that data set closes this wrapper too."""
        return self._base._state

    @_state.setter
    def _state(self, state: Any) -> None:
        pass  # (DafReader.__init__ sets it: a wrapper's state is always the wrapped data set's)

    def close(self) -> None:
        """Close the wrapped data set (see :meth:`DafReader.close`): a read-only open (mode ``r``) returns this
        wrapper, so it is what a ``with`` block closes.

        Example:
            >>> import pydaf
            >>> daf = pydaf.MemoryDaf()
            >>> with daf.read_only() as reader:
            ...     reader.closed
            False
            >>> daf.closed
            True
        """
        self._base.close()

    @property
    def base(self) -> DafReader:
        """The wrapped data set."""
        return self._base

    def _type_text(self) -> str:
        return f"ReadOnly {self._base._type_text()}"

    def __repr__(self) -> str:
        return f"ReadOnly {self._base!r}"

    def _description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        lines.append(f"{indent}type: ReadOnly")
        if not deep:
            lines.append(f"{indent}base: {self._base!r}")

    def _description_footer(self, indent: str, lines: list[str], *, cache: bool, deep: bool, tensors: bool) -> None:
        if deep:
            lines.append(f"{indent}base:")
            self._base._describe(f"{indent}  ", lines, cache=cache, deep=deep, tensors=tensors)


def _brief_cached(value: Any) -> str:
    """Julia's ``brief`` of a cached value (arrays, dictionaries and indices of axes, query results)."""
    if isinstance(value, np.ndarray | SparseVector | SparseMatrixCSC):
        return brief_array(value)
    if is_scipy_sparse(value):
        return brief_array(SparseMatrixCSC.from_scipy(value))
    brief = getattr(value, "brief", None)
    if callable(brief):
        return brief()
    if isinstance(value, dict) or hasattr(value, "get_indexer"):
        return f"{len(value)} entries"
    return brief_scalar(value)


def _counted_brief(matrix: StoredMatrix) -> tuple[tuple[str, int], tuple[int, int, int]]:
    """A tensor member's brief with its count (stored entries if sparse, else true entries if Boolean) blanked out
    (and where), and ``(1, count, size)``, so members that differ only by that count are described together (Julia's
    ``tensors_description``)."""
    parts = brief_array(matrix).split(" ")
    size = int(np.prod(matrix.shape))
    if ("Sparse" in parts or "(Sparse" in parts) and isinstance(matrix, SparseMatrixCSC):
        at = (parts.index("Sparse") if "Sparse" in parts else parts.index("(Sparse")) + 1
        counted = matrix.nnz
    elif "true)" in parts and isinstance(matrix, np.ndarray):
        at = parts.index("true)") - 2
        counted = int(np.count_nonzero(matrix))
    else:
        return (" ".join(parts), -1), (1, 0, size)
    parts[at] = parts[at + 1] = "."
    return (" ".join(parts), at), (1, counted, size)


def _counted_text(key: tuple[str, int], count: int, counted: int, size: int) -> str:
    """``<count> X <brief>`` with the summed count (and its percentage) put back where ``_counted_brief`` blanked it."""
    text, at = key
    parts = text.split(" ")
    if at >= 0:
        parts[at], parts[at + 1] = str(counted), f"({percent(counted, size)})"
    return f"{count} X {' '.join(parts)}"


def is_leaf(daf_or_type: DafReader | type) -> bool:
    """Whether a data set (or a data set class) is a leaf storage format that owns its in-memory or on-disk state
    directly (:class:`~pydaf.MemoryDaf`, :class:`~pydaf.FilesDaf`, :class:`~pydaf.H5df`, :class:`~pydaf.ZarrDaf`,
    :class:`~pydaf.ZipDaf`), rather than a wrapper (a view, a chain, a read-only wrapper, a contract's data set);
    Julia's ``is_leaf``. Only leaf formats can be reordered in place. A class opts in with a true ``leaf_format``
    class attribute.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="x!")
        >>> is_leaf(daf), is_leaf(pydaf.MemoryDaf), is_leaf(daf.read_only()), is_leaf(pydaf.DafReader)
        (True, True, False, False)
    """
    daf_type = daf_or_type if isinstance(daf_or_type, type) else type(daf_or_type)
    return issubclass(daf_type, DafReader) and getattr(daf_type, "leaf_format", False) is True


# The public methods of DafWriter that DafReader lacks, set when core.writers defines DafWriter (this module can't
# import it): the attributes a read-only data set refuses with a DafReadOnlyError rather than an AttributeError.
_WRITE_METHODS: frozenset[str] = frozenset()


def write_methods(writer_class: type) -> frozenset[str]:
    """Record (and return) the public methods of ``writer_class`` that :class:`DafReader` lacks."""
    global _WRITE_METHODS
    _WRITE_METHODS = frozenset(name for name in dir(writer_class) if not name.startswith("_")
                               and not hasattr(DafReader, name) and callable(getattr(writer_class, name)))
    return _WRITE_METHODS


def missing_attribute(daf: DafReader, attribute: str) -> AttributeError:
    """The error of a missing attribute of a data set: for a write method of a read-only one, a
    :class:`~pydaf.DafReadOnlyError` (also an ``AttributeError``) naming the data set and saying how to write to it;
    else Python's plain ``AttributeError``.

    Example:
        >>> import pydaf
        >>> print(missing_attribute(pydaf.MemoryDaf(name="x!").read_only(), "set_scalar"))
        can't set_scalar: the daf data is read-only
        (write through the data set it wraps: its .base)
        in the daf data: x!.read_only
    """
    state = vars(daf)
    if attribute not in _WRITE_METHODS or "_name" not in state:
        return AttributeError(f"{type(daf).__name__!r} object has no attribute {attribute!r}", name=attribute, obj=daf)
    return DafReadOnlyError(f"can't {attribute}: the daf data is read-only\n({_how_to_write(daf)})",
                            daf_name=state["_name"])


def _how_to_write(daf: DafReader) -> str:
    hint = getattr(type(daf), "write_hint", None)  # views and read-only chains say how to write to what they show
    if hint is not None:
        return hint
    if isinstance(daf, DafReadOnlyWrapper) and "_base" in vars(daf):
        base = daf.base
        if base.format.is_writable and hasattr(base, "set_scalar"):
            return "write through the data set it wraps: its .base"
    path = daf.format.format_complete_path()
    where = f'"{path}"' if path is not None else "path"
    return f'open it for writing with mode "r+": pydaf.open_daf({where}, "r+")'


def select_stored_columns(matrix: StoredMatrix, columns: slice | np.ndarray) -> StoredMatrix:
    """Some columns of a stored matrix: a range of a column-major array, or of a CSC matrix's entries, shares its
    memory (zero-copy but for a sparse matrix's ``colptr``); positions make a new matrix.

    Example:
        >>> select_stored_columns(np.asfortranarray(np.arange(6).reshape(2, 3)), slice(1, 3)).tolist()
        [[1, 2], [4, 5]]
    """
    if isinstance(matrix, np.ndarray):
        return matrix[:, columns] if isinstance(columns, slice) else read_only_array(np.asfortranarray(
            matrix[:, columns]))
    if isinstance(columns, slice):
        start, stop, step = columns.indices(matrix.shape[1])
        if step != 1:
            columns = np.arange(start, stop, step)
        else:
            stop = max(start, stop)
            first, last = int(matrix.colptr[start]) - 1, int(matrix.colptr[stop]) - 1
            colptr = (matrix.colptr[start:stop + 1] - first).astype(matrix.colptr.dtype)
            return SparseMatrixCSC((matrix.shape[0], stop - start), colptr, matrix.rowval[first:last],
                                   matrix.nzval[first:last]).read_only()
    return matrix.select(columns=np.asarray(columns, dtype=np.int64)).read_only()
