"""Typed cache keys, the per-data-set cache and the version counters (Julia's ``CacheType``/``CacheKey``/``CacheGroup``,
``formats.jl``).

These are Julia's *cache* vocabulary, named ``…CacheKey`` as in Julia (its ``AxisCacheKey``), and distinct from
:mod:`pydaf.keys` (Julia's ``AxisKey``/``VectorKey``/…, which name properties in the composition APIs). Every cached
item is keyed by a frozen key object that names the property it derives from and the form it is kept in
(:class:`AxisCacheKey`, :class:`VectorCacheKey`, :class:`MatrixCacheKey`, :class:`QueryCacheKey`, …). The same
classes, in their default form, describe *changes* (what a writer modified) and *dependencies* (what a query read):

- ``key.text()`` is Julia's ``show`` of the key, as listed by ``description(cache=True)``;
- ``key.touches(change)`` tells whether data cached under ``key`` is stale once ``change`` was written;
- ``key.version(daf)`` / ``key.exists(daf)`` let a cached computation check that what it read is unchanged.

Example:
    >>> VectorCacheKey("gene", "cell").touches(MatrixCacheKey("gene", "cell", "UMIs"))
    False
    >>> MatrixCacheKey("gene", "cell", "UMIs", DataForm.RELAYOUT).touches(MatrixCacheKey("cell", "gene", "UMIs"))
    True
    >>> MatrixCacheKey("gene", "cell", "UMIs").touches(AxisCacheKey("cell"))
    True
"""

from __future__ import annotations

import enum
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

from ..abc.format import CacheGroup

if TYPE_CHECKING:
    from .readers import DafReader

__all__ = [
    "AxisCacheKey",
    "AxisForm",
    "CacheEntry",
    "CacheKey",
    "CacheType",
    "DataCache",
    "DataForm",
    "MatrixCacheKey",
    "NamesCacheKey",
    "QueryCacheKey",
    "ScalarCacheKey",
    "VectorCacheKey",
    "VersionCounters",
    "is_current",
    "stamp_of",
]


class AxisForm(enum.Enum):
    """The cached forms of an axis."""

    ENTRIES = "axis_vector"
    """The entries, a read-only ``object`` array of ``str`` (Julia's ``axis_vector``)."""
    DICT = "axis_dict"
    """A ``dict`` from entry to 0-based position (Julia's ``axis_dict``)."""
    INDEX = "axis_index"
    """A hashed ``pandas.Index`` of the entries (queries look names up in it)."""


class DataForm(enum.Enum):
    """The cached forms of a vector or a matrix."""

    STORED = "stored"
    """As the storage returned it (mapped where the store is), made read-only."""
    DENSE = "dense"
    """A sparse vector densified."""
    RELAYOUT = "relayout"
    """A matrix stored only in the other layout, transposed in memory."""
    SCIPY = "scipy"
    """The 0-based ``scipy.sparse.csc_matrix`` of a sparse matrix."""


class CacheKeyProtocol(Protocol):
    """What every cache key offers (see the module docstring)."""

    def text(self) -> str: ...

    def touches(self, change: Hashable) -> bool: ...

    def sort_key(self) -> tuple: ...

    def version(self, daf: DafReader) -> Hashable | None: ...

    def exists(self, daf: DafReader) -> bool: ...


class CacheType(enum.IntEnum):
    """The kinds of cached items, in the order Julia lists them (it sorts cached items by ``(CacheType, key)``)."""

    CachedAxis = 0
    CachedData = 1
    CachedQuery = 2
    CachedNames = 3


@dataclass(frozen=True)
class ScalarCacheKey:
    """A scalar property. Scalars have no version counter: what depends on one is recomputed after any write."""

    name: str

    def text(self) -> str:
        return f"scalar[{self.name}]"

    def touches(self, change: Hashable) -> bool:
        return change == self

    def sort_key(self) -> tuple:
        return (CacheType.CachedData, (self.name,))

    def version(self, daf: DafReader) -> Hashable | None:
        return None

    def exists(self, daf: DafReader) -> bool:
        return daf.has_scalar(self.name)


@dataclass(frozen=True)
class AxisCacheKey:
    """An axis (as a change or a dependency: its entries), or one cached form of it."""

    axis: str
    form: AxisForm = AxisForm.ENTRIES

    def text(self) -> str:
        return f"{self.form.value}[axis: {self.axis}]"

    def touches(self, change: Hashable) -> bool:
        return isinstance(change, AxisCacheKey) and change.axis == self.axis

    def sort_key(self) -> tuple:
        return (CacheType.CachedAxis, (self.axis, self.form.value))

    def version(self, daf: DafReader) -> Hashable | None:
        return daf.axis_version_counter(self.axis)

    def exists(self, daf: DafReader) -> bool:
        return daf.has_axis(self.axis)


@dataclass(frozen=True)
class VectorCacheKey:
    """A vector of an axis, or one cached form of it. Stale when the vector or its axis changes."""

    axis: str
    name: str
    form: DataForm = DataForm.STORED

    def text(self) -> str:
        prefix = "dense_vector" if self.form is DataForm.DENSE else "vector"
        return f"{prefix}[axis: {self.axis} name: {self.name}]"

    def touches(self, change: Hashable) -> bool:
        if isinstance(change, AxisCacheKey):
            return change.axis == self.axis
        return isinstance(change, VectorCacheKey) and (change.axis, change.name) == (self.axis, self.name)

    def sort_key(self) -> tuple:
        return (CacheType.CachedData, (self.axis, self.name, self.form.value))

    def version(self, daf: DafReader) -> Hashable | None:
        return (daf.axis_version_counter(self.axis), daf.vector_version_counter(self.axis, self.name))

    def exists(self, daf: DafReader) -> bool:
        return daf.has_axis(self.axis) and daf.has_vector(self.axis, self.name)


@dataclass(frozen=True)
class MatrixCacheKey:
    """A matrix of a pair of axes, or one cached form of it (a relayout is cached under the axes it was asked for,
    as Julia does). Stale when the matrix changes in either layout, or either axis changes."""

    rows_axis: str
    columns_axis: str
    name: str
    form: DataForm = DataForm.STORED

    def text(self) -> str:
        prefix = "scipy_matrix" if self.form is DataForm.SCIPY else "matrix"
        return f"{prefix}[rows_axis: {self.rows_axis} columns_axis: {self.columns_axis} name: {self.name}]"

    def touches(self, change: Hashable) -> bool:
        if isinstance(change, AxisCacheKey):
            return change.axis in (self.rows_axis, self.columns_axis)
        return isinstance(change, MatrixCacheKey) and change.name == self.name and \
            {change.rows_axis, change.columns_axis} == {self.rows_axis, self.columns_axis}

    def sort_key(self) -> tuple:
        return (CacheType.CachedData, (self.rows_axis, self.columns_axis, self.name, self.form.value))

    def either_layout(self) -> MatrixCacheKey:
        """The key of the matrix whatever its layout (axes in sorted order, stored form): the version counter's key."""
        rows_axis, columns_axis = sorted((self.rows_axis, self.columns_axis))
        return MatrixCacheKey(rows_axis, columns_axis, self.name)

    def version(self, daf: DafReader) -> Hashable | None:
        return (daf.axis_version_counter(self.rows_axis), daf.axis_version_counter(self.columns_axis),
                daf.matrix_version_counter(self.rows_axis, self.columns_axis, self.name))

    def exists(self, daf: DafReader) -> bool:
        return daf.has_axis(self.rows_axis) and daf.has_axis(self.columns_axis) and \
            daf.has_matrix(self.rows_axis, self.columns_axis, self.name)


@dataclass(frozen=True)
class NamesCacheKey:
    """A set of property names (``scalars``, ``axes``, or the vectors of an axis, the matrices of a pair of axes).
    Name sets have no version counter: what depends on one is recomputed after any write."""

    what: str
    axes: tuple[str, ...] = ()

    def text(self) -> str:
        if not self.axes:
            return f"names[{self.what}]"
        if len(self.axes) == 1:
            return f"{self.what}[axis: {self.axes[0]}]"
        return f"{self.what}[rows_axis: {self.axes[0]} columns_axis: {self.axes[1]}]"

    def touches(self, change: Hashable) -> bool:
        return True

    def sort_key(self) -> tuple:
        return (CacheType.CachedNames, (self.what, *self.axes))

    def version(self, daf: DafReader) -> Hashable | None:
        return None

    def exists(self, daf: DafReader) -> bool:
        return True


@dataclass(frozen=True)
class QueryCacheKey:
    """The result of a query, keyed by its canonical text. Never dropped by a write: a cached result is checked
    against the versions of what it read (:func:`is_current`) when it is next asked for."""

    query: str

    def text(self) -> str:
        return f"query[{self.query}]"

    def touches(self, change: Hashable) -> bool:
        return False

    def sort_key(self) -> tuple:
        return (CacheType.CachedQuery, (self.query,))

    def version(self, daf: DafReader) -> Hashable | None:
        return None

    def exists(self, daf: DafReader) -> bool:
        return True


CacheKey = AxisCacheKey | VectorCacheKey | MatrixCacheKey | QueryCacheKey | ScalarCacheKey | NamesCacheKey


@dataclass(frozen=True)
class Stamp:
    """When a computed value was made: the data set's write count, and the keys (and versions) of what it read."""

    write_count: int
    dependencies: tuple[Any, ...]
    versions: tuple[Hashable | None, ...]


def stamp_of(daf: DafReader, dependencies: Iterable[Any], write_count: int) -> Stamp:
    """The stamp of a value computed from ``dependencies`` when the data set's write count was ``write_count``."""
    ordered = tuple(sorted(set(dependencies), key=lambda key: key.sort_key()))
    return Stamp(write_count, ordered, tuple(key.version(daf) for key in ordered))


def is_current(daf: DafReader, stamp: Stamp) -> bool:
    """Whether a value with this stamp is still valid: nothing was written since, or every input it read has a
    version counter, none of them changed, and they all still exist."""
    if daf.write_count() == stamp.write_count:
        return True
    if None in stamp.versions:
        return False
    if tuple(key.version(daf) for key in stamp.dependencies) != stamp.versions:
        return False
    return all(key.exists(daf) for key in stamp.dependencies)


@dataclass
class CacheEntry:
    """A cached value, its :class:`~pydaf.CacheGroup`, and (for computed values) its :class:`Stamp`."""

    value: Any
    group: CacheGroup
    stamp: Stamp | None = None


class DataCache:
    """The cache of one data set (shared by its read-only wrappers): typed keys to :class:`CacheEntry`, behind its
    own lock. Values are computed outside the lock; when two threads compute the same item, the first stored wins.

    Example:
        >>> cache = DataCache()
        >>> cache.get_or_compute(AxisCacheKey("cell", AxisForm.DICT), lambda: ({"A": 0}, CacheGroup.MemoryData))
        {'A': 0}
        >>> cache.invalidate(AxisCacheKey("cell")), len(cache)
        (1, 0)
    """

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._entries: dict[CacheKey, CacheEntry] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, key: CacheKey) -> CacheEntry | None:
        """The entry of a key, or ``None``."""
        with self._lock:
            return self._entries.get(key)

    def get_or_compute(self, key: CacheKey, compute: Callable[[], tuple[Any, CacheGroup | None]]) -> Any:
        """The cached value of ``key``; if missing, ``compute()`` gives ``(value, group)`` and the value is cached
        under that group (not at all if the group is ``None``)."""
        entry = self.entry(key)
        if entry is not None:
            return entry.value
        value, group = compute()
        if group is None:
            return value
        with self._lock:
            return self._entries.setdefault(key, CacheEntry(value, group)).value

    def put(self, key: CacheKey, value: Any, group: CacheGroup, *, stamp: Stamp | None = None) -> None:
        """Cache a value (replacing any entry of the key)."""
        with self._lock:
            self._entries[key] = CacheEntry(value, group, stamp)

    def discard(self, key: CacheKey) -> None:
        """Drop the entry of a key, if any."""
        with self._lock:
            self._entries.pop(key, None)

    def invalidate(self, change: Hashable) -> int:
        """Drop every entry made stale by ``change`` (``key.touches(change)``); returns how many were dropped."""
        return self.drop_if(lambda key, _entry: key.touches(change))

    def drop_if(self, predicate: Callable[[CacheKey, CacheEntry], bool]) -> int:
        """Drop every entry for which ``predicate(key, entry)`` holds; returns how many were dropped."""
        with self._lock:
            stale = [key for key, entry in self._entries.items() if predicate(key, entry)]
            for key in stale:
                del self._entries[key]
        return len(stale)

    def empty(self, *, clear: CacheGroup | None = None, keep: CacheGroup | None = None) -> None:
        """Drop everything, only the ``clear`` group, or all but the ``keep`` group."""
        self.drop_if(lambda _key, entry: (clear is None and keep is None) or entry.group == clear
                     or (keep is not None and entry.group != keep))

    def entries(self) -> list[tuple[CacheKey, CacheEntry]]:
        """A snapshot of the entries, in Julia's order (axes, data, queries, names)."""
        with self._lock:
            items = list(self._entries.items())
        return sorted(items, key=lambda item: item[0].sort_key())


class VersionCounters:
    """Per-property counters, bumped under the write lock each time a property changes (so a copy of the data, kept
    with the counters it was made at, knows when it is stale). Keys are :class:`AxisCacheKey`,
    :class:`VectorCacheKey` and :meth:`MatrixCacheKey.either_layout`.

    Example:
        >>> counters = VersionCounters()
        >>> counters.bump(VectorCacheKey("cell", "age")); counters[VectorCacheKey("cell", "age")]
        1
    """

    #: The counter of a property that was never changed.
    initial: ClassVar[int] = 0

    def __init__(self) -> None:
        self._counters: dict[Hashable, int] = {}

    def __getitem__(self, key: Hashable) -> int:
        return self._counters.get(key, self.initial)

    def bump(self, key: Hashable) -> None:
        self._counters[key] = self[key] + 1


_Value = TypeVar("_Value")


class SizedLruCache(Generic[_Value]):
    """A thread-safe cache bounded by the total size of its values (``size_of`` of each, default ``len``), the least
    recently used dropped first; a value larger than the whole bound is never kept. (What HTTP reads keep of fetched
    bytes and lazy packed reads of decoded chunks.)

    Example:
        >>> cache = SizedLruCache(10)
        >>> cache.put("a", b"12345"); cache.put("b", b"67890"); cache.put("c", b"x")
        >>> cache.get("a"), cache.get("b"), cache.nbytes
        (None, b'67890', 6)
    """

    def __init__(self, max_bytes: int, size_of: Callable[[_Value], int] = len) -> None:  # type: ignore[assignment]
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._size_of = size_of
        self._items: OrderedDict[Hashable, _Value] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> _Value | None:
        """The cached value (marked as recently used), or ``None``."""
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: Hashable, value: _Value) -> None:
        """Keep a value, dropping the least recently used ones beyond the bound."""
        size = self._size_of(value)
        if size > self.max_bytes:
            return
        with self._lock:
            previous = self._items.pop(key, None)
            if previous is not None:
                self.nbytes -= self._size_of(previous)
            self._items[key] = value
            self.nbytes += size
            while self.nbytes > self.max_bytes:
                _, dropped = self._items.popitem(last=False)
                self.nbytes -= self._size_of(dropped)

    def clear(self) -> None:
        """Drop every value."""
        with self._lock:
            self._items.clear()
            self.nbytes = 0
