"""Views (Julia's ``Views``): a lazy, read-only data set whose axes and properties are queries on another one. Nothing
is computed when the view is made: each property is resolved and computed on first access, then cached in the view
until what it was computed from changes in the base. A plain lookup over whole base axes is the base's own (mapped)
array, over a contiguous range a slice of it.

Design: docs/design/views.md (with Julia's rules for the pairs)."""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeAlias

import numpy as np

from ..abc.format import CacheGroup, FormatReader, StoredMatrix, StoredVector
from ..core.cache import (
    AxisCacheKey,
    AxisForm,
    CacheKey,
    DataForm,
    MatrixCacheKey,
    QueryCacheKey,
    ScalarCacheKey,
    VectorCacheKey,
)
from ..core.names import unique_name
from ..core.readers import DafReader, DafReadOnly, DafReadOnlyWrapper
from ..errors import DafQueryError, DafValueError
from ..keys import ALL_AXES, ALL_MATRICES, ALL_SCALARS, ALL_VECTORS
from ..queries.evaluator import (
    has_query,
    is_axis_query,
    query_axis_name,
    query_requires_relayout,
    query_result_dimensions,
)
from ..queries.query import (
    Axis,
    LookupMatrix,
    LookupScalar,
    LookupVector,
    QueryOperation,
    QuerySequence,
    as_query_sequence,
    parse_query,
)
from ..queries.results import query_result
from ..sparse import SparseMatrixCSC, dense_rows, read_only_array
from ..storage_types import StorageScalar

__all__ = [
    "ALL_AXES",
    "ALL_MATRICES",
    "ALL_SCALARS",
    "ALL_VECTORS",
    "MAX_VIEW_NESTING",
    "VIEW_ALL_AXES",
    "VIEW_ALL_DATA",
    "VIEW_ALL_MATRICES",
    "VIEW_ALL_SCALARS",
    "VIEW_ALL_VECTORS",
    "DafView",
    "ViewFormat",
    "view_nesting",
    "viewer",
]

#: Pairs exposing everything of a kind as it is (``VIEW_ALL_AXES`` is the default of ``axes``).
VIEW_ALL_AXES = (ALL_AXES, "=")
VIEW_ALL_SCALARS = (ALL_SCALARS, "=")
VIEW_ALL_VECTORS = (ALL_VECTORS, "=")
VIEW_ALL_MATRICES = (ALL_MATRICES, "=")
#: The default of ``data``: every scalar, vector and matrix of the exposed axes (``[*VIEW_ALL_DATA, (key, None)]``
#: hides one).
VIEW_ALL_DATA = (VIEW_ALL_SCALARS, VIEW_ALL_VECTORS, VIEW_ALL_MATRICES)

#: The most views nested in one another (a view of a view, or of a chain holding one, and so on; each base of a
#: persistent chain seen through a view adds one): a deeper one is refused when it is made, with a
#: :class:`~pydaf.DafValueError` naming its depth and this limit, as reading through it would exhaust Python's stack.
MAX_VIEW_NESTING = 16

ViewQuery: TypeAlias = str | QueryOperation | None
ViewPairs: TypeAlias = Mapping[Any, ViewQuery] | Iterable[tuple[Any, ViewQuery]]

_WILDCARD_QUERIES = ("=", None)

# The version counters of the views already computed by this thread's outermost version-counter request: a view
# property depends on several base properties, each of which may depend on several of its own base's, so without it
# nested views would compute the same counters again and again (exponential in the nesting).
_versions_memo = threading.local()


def view_nesting(daf: DafReader) -> int:
    """How many views are nested in ``daf`` (0 for a data set that holds no view; chains count their deepest member).

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf()
        >>> view_nesting(daf), view_nesting(pydaf.viewer(pydaf.viewer(daf, data={}), data={}))
        (0, 2)
    """
    return getattr(daf.format, "view_nesting", 0)


def view_pairs(pairs: ViewPairs | None, *, data: bool, name: str, daf_name: str) -> list[tuple[Any, ViewQuery]]:
    """``axes`` or ``data`` of :func:`viewer` as a list of ``(key, query)`` pairs, validated: keys are names (or, for
    data, tuples of 2 to 4 names; lists become tuples), queries are strings, query operations or ``None``."""
    if pairs is None:
        return []
    items = list(pairs.items()) if isinstance(pairs, Mapping) else list(pairs)
    result = []
    for item in items:
        if not (isinstance(item, tuple | list) and len(item) == 2):
            raise DafValueError(f"invalid View{'Datum' if data else 'Axis'}: {item!r}\n(expected a (key, query) "
                                f"pair)", for_=f"view: {name}", daf_name=daf_name, daf_preposition="of")
        key, query = item
        if isinstance(key, list):
            key = tuple(key)
        valid_key = isinstance(key, str) or (data and isinstance(key, tuple) and 2 <= len(key) <= 4
                                             and all(isinstance(part, str) for part in key))
        if not valid_key or not (query is None or isinstance(query, str | QueryOperation)):
            raise DafValueError(f"invalid View{'Datum' if data else 'Axis'}: {item!r}\n(expected a key of "
                                f"{'names' if data else 'an axis name'} and a query, '=' or None)",
                                for_=f"view: {name}", daf_name=daf_name, daf_preposition="of")
        result.append((key, query))
    return result


@dataclass(frozen=True)
class _ViewAxis:
    """A computed view axis: its entries, and where they are in the base axis (``None``: the whole axis, a ``slice``:
    a contiguous range, else 0-based positions)."""

    entries: np.ndarray
    selection: slice | np.ndarray | None

    def brief(self) -> str:  # as ``description(cache=True)`` lists a cached value
        return f"{self.entries.shape[0]} entries"


@dataclass
class _Tracked:
    """The base properties a view property was computed from, their versions when last seen, and the view's version
    counter of the property (bumped whenever they change, so it only grows)."""

    dependencies: tuple[CacheKey, ...]
    versions: tuple[int, ...]
    generation: int = 0


def _kind(dimensions: int) -> str:
    return {-1: "names", 0: "scalar", 1: "vector", 2: "matrix"}.get(dimensions, "matrix")


def _patched(query: QuerySequence, replacements: dict[str, QuerySequence]) -> QuerySequence:
    """The query with each ``@ __axis__``-like placeholder replaced by the query it stands for (Julia's
    ``patch_query``)."""
    operations: list[QueryOperation] = []
    for operation in query.operations:
        if type(operation) is Axis and operation.axis_name in replacements:
            operations.extend(replacements[operation.axis_name].operations)
        else:
            operations.append(operation)
    return QuerySequence(*operations)


def _has_own_axes(query: ViewQuery, name: str) -> bool:
    """Whether a view matrix's query names its own axes (``@ obs @ var :: X``, not the ``__rows_axis__`` placeholder),
    so its result has that layout whichever layout is asked for."""
    prepared = _prepared(query, name, LookupMatrix)
    return prepared is not None and bool(prepared.operations) and type(prepared.operations[0]) is Axis and \
        prepared.operations[0].axis_name not in ("__rows_axis__", "__columns_axis__")


def _prepared(query: ViewQuery, name: str, operand: Callable[[str], QueryOperation]) -> QuerySequence | None:
    """A view query as a query sequence: ``None`` stays ``None``, ``"="`` is the lookup of ``name`` itself (built, not
    parsed, so any name works), a single name is a lookup of that name, anything else is parsed."""
    if query is None:
        return None
    if isinstance(query, QueryOperation):
        return as_query_sequence(query)
    text = query.strip()
    if text == "=":
        return as_query_sequence(operand(name))
    return as_query_sequence(parse_query(text, operand))


def _is_plain(query: QuerySequence, operand: type[QueryOperation]) -> bool:
    return len(query.operations) == 1 and type(query.operations[0]) is operand


def _lookup_name(operation: QueryOperation) -> str:
    """The property a lookup (``. name``, ``: name`` or ``:: name``) reads."""
    assert isinstance(operation, LookupScalar | LookupVector | LookupMatrix) and operation.property_name is not None
    return operation.property_name


def _whole_axis_name(query: QuerySequence) -> str | None:
    """The axis of a query that is just ``@ axis``, else ``None``."""
    operation = query.operations[0] if len(query.operations) == 1 else None
    return operation.axis_name if type(operation) is Axis else None


def _first_wins(pairs: Iterable[tuple[str, ViewQuery]], exists: Callable[[str, ViewQuery], bool]) -> frozenset[str]:
    """The names exposed by ``(name, query)`` pairs listed in priority order: the first pair of a name decides, and
    exposes it if ``exists(name, query)`` (Julia's ``collect_view_*``)."""
    seen: set[str] = set()
    names: set[str] = set()
    for name, query in pairs:
        if name not in seen:
            seen.add(name)
            if exists(name, query):
                names.add(name)
    return frozenset(names)


def _contiguous(positions: np.ndarray) -> slice | np.ndarray:
    """A ``slice`` when the positions are a contiguous increasing range, else the positions."""
    if positions.shape[0] == 0:
        return slice(0, 0)
    start = int(positions[0])
    if int(positions[-1]) - start + 1 == positions.shape[0] and np.all(np.diff(positions) == 1):
        return slice(start, start + positions.shape[0])
    return positions


def _positions(selection: slice | np.ndarray) -> np.ndarray:
    return np.arange(selection.start, selection.stop) if isinstance(selection, slice) else selection


def _select_vector(vector: StoredVector, selection: slice | np.ndarray | None) -> StoredVector:
    if selection is None:
        return vector
    if isinstance(vector, np.ndarray):
        return vector[selection]  # a slice is a view (zero-copy), positions copy
    return vector.select(_positions(selection))


def _select_matrix(matrix: StoredMatrix, rows: slice | np.ndarray | None,
                   columns: slice | np.ndarray | None) -> StoredMatrix:
    if rows is None and columns is None:
        return matrix
    if isinstance(matrix, SparseMatrixCSC):
        if rows is None and isinstance(columns, slice):
            # A range of columns of a CSC matrix is a range of its entries: zero-copy but for the (small) colptr.
            first = matrix.column_range(columns.start).start if columns.stop > columns.start else 0
            last = matrix.column_range(columns.stop - 1).stop if columns.stop > columns.start else 0
            colptr = (matrix.colptr[columns.start:columns.stop + 1] - first).astype(matrix.colptr.dtype)
            if columns.stop == columns.start:
                colptr = np.ones(1, dtype=matrix.colptr.dtype)
            return SparseMatrixCSC((matrix.shape[0], columns.stop - columns.start), colptr,
                                   matrix.rowval[first:last], matrix.nzval[first:last])
        return matrix.select(rows=None if rows is None else _positions(rows),
                             columns=None if columns is None else _positions(columns))
    if columns is not None:
        matrix = matrix[:, columns]  # a range of columns of a column-major matrix is a column-major view
    if rows is not None:
        return dense_rows(matrix, rows)
    return np.asfortranarray(matrix)


class ViewFormat(FormatReader):
    """The storage contract of a view: every request is answered from the base through its public API."""

    type_name: ClassVar[str] = "View"

    def __init__(self, base: DafReader, name: str, axes: list[tuple[Any, ViewQuery]],
                 data: list[tuple[Any, ViewQuery]], path: str | None = None) -> None:
        self.base = base
        self.name = name
        self.path = path
        self.view_nesting = 1 + view_nesting(base)
        # Reversed, so the first match of a search is the last pair that names the property.
        self.axes = list(reversed(axes))
        self.scalars = [(key, query) for key, query in reversed(data) if isinstance(key, str)]
        self.vectors = [(key, query) for key, query in reversed(data) if isinstance(key, tuple) and len(key) == 2]
        self.matrices = [(key, query) for key, query in reversed(data) if isinstance(key, tuple) and len(key) == 3]
        self.tensors = [(key, query) for key, query in reversed(data) if isinstance(key, tuple) and len(key) == 4]
        self._view: weakref.ref[DafView] | None = None
        self._lock = threading.RLock()
        # Resolved queries and name sets, valid while the base's write count is unchanged.
        self._resolved: dict[tuple, tuple[int, Any]] = {}
        self._tracked: dict[Hashable, _Tracked] = {}

    @property
    def view(self) -> DafView:
        view = None if self._view is None else self._view()
        assert view is not None, "the view of a ViewFormat is gone"
        return view

    # Messages.

    def _trailer(self) -> dict[str, Any]:
        """The fields of Julia's trailer of a view's errors: ``for the view: <name>\nof the daf data: <base>``."""
        return {"for_": f"view: {self.name}", "daf_name": self.base.name, "daf_preposition": "of"}

    # Identity and description.

    def format_complete_path(self) -> str | None:
        return self.path

    def format_description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        lines.append(f"{indent}type: View")
        if not deep:
            lines.append(f"{indent}base: {self.base!r}")

    def format_description_footer(self, indent: str, lines: list[str], *, cache: bool, deep: bool,
                                  tensors: bool) -> None:
        if deep:
            lines.append(f"{indent}base:")
            text = self.base.description(cache=cache, deep=deep, tensors=tensors).rstrip("\n")
            lines.extend(f"{indent}  {line}" for line in text.split("\n"))

    # Invalidation: the view changes when its base does.

    def format_write_count(self) -> int:
        return self.base.write_count()

    def format_version_counter(self, key: Hashable) -> int:
        memo = getattr(_versions_memo, "memo", None)
        if memo is None:
            _versions_memo.memo = memo = {}
            try:
                return self._version_counter(key, memo)
            finally:
                _versions_memo.memo = None
        return self._version_counter(key, memo)

    def _version_counter(self, key: Hashable, memo: dict[tuple[int, Hashable], int]) -> int:
        found = memo.get((id(self), key))
        if found is not None:
            return found
        # The base's counters are read without holding the format's lock: a thread holding the base's read lock
        # (computing a property) may be waiting for that lock, and a base writer waiting for it would then wait forever.
        with self._lock:
            tracked = self._tracked.get(key)
            if tracked is None:
                return 0
            dependencies = tracked.dependencies
        versions = self._base_versions(dependencies)
        with self._lock:
            # (If another thread added dependencies meanwhile, it bumped the counter already.)
            if tracked.dependencies == dependencies and tracked.versions != versions:
                tracked.versions = versions
                tracked.generation += 1
            memo[(id(self), key)] = tracked.generation
            return tracked.generation

    def _base_versions(self, dependencies: tuple[CacheKey, ...]) -> tuple[int, ...]:
        versions = []
        for key in dependencies:
            if isinstance(key, AxisCacheKey):
                versions.append(self.base.axis_version_counter(key.axis))
            elif isinstance(key, VectorCacheKey):
                versions.append(self.base.vector_version_counter(key.axis, key.name))
            elif isinstance(key, MatrixCacheKey):
                versions.append(self.base.matrix_version_counter(key.rows_axis, key.columns_axis, key.name))
            else:  # scalars and name sets have no version counter
                versions.append(self.base.write_count())
        return tuple(versions)

    def _track(self, key: Hashable, dependencies: Iterable[CacheKey]) -> None:
        """Record what a view property was computed from (added to what it was computed from before, so a property
        computed in turn from different inputs, e.g. the two layouts of a matrix, settles instead of flapping). A
        change seen by two threads at once may bump the counter twice: counters only need to grow on each change."""
        with self._lock:
            tracked = self._tracked.get(key)
            known = set() if tracked is None else set(tracked.dependencies)
        ordered = tuple(sorted(known | set(dependencies), key=lambda dependency: dependency.sort_key()))
        versions = self._base_versions(ordered)  # outside the lock (see ``format_version_counter``)
        with self._lock:
            tracked = self._tracked.get(key)
            if tracked is None:
                self._tracked[key] = _Tracked(ordered, versions)
            elif (ordered, versions) != (tracked.dependencies, tracked.versions):
                merged = tuple(sorted(set(tracked.dependencies) | set(ordered),
                                      key=lambda dependency: dependency.sort_key()))
                # Versions of other dependencies than those just read are read at the next look (``()`` differs).
                tracked.dependencies, tracked.versions = merged, versions if merged == ordered else ()
                tracked.generation += 1

    def _dependencies(self, key: Hashable) -> tuple[CacheKey, ...]:
        with self._lock:
            tracked = self._tracked.get(key)
            return () if tracked is None else tracked.dependencies

    def _cached(self, key: QueryCacheKey, stamp_key: Hashable, compute: Callable[[], Any]) -> Any:
        """A computed view property, cached in the view (as ``QueryData``) until what it was computed from changes.
        Computing and stamping happen under the base's read lock, so no base write falls in between."""
        view = self.view

        def computed() -> tuple[Any, list[Hashable]]:
            return compute(), [stamp_key]

        with self.base.read_lock():
            return view.cached_computation(key, computed)

    def _memo(self, key: tuple, resolve: Callable[[], Any]) -> Any:
        """A resolution (a query, or a set of names), memoized while nothing is written to the base."""
        write_count = self.base.write_count()
        with self._lock:
            found = self._resolved.get(key)
        if found is not None and found[0] == write_count:
            return found[1]
        value = resolve()
        with self._lock:
            self._resolved[key] = (write_count, value)
        return value

    # Resolving queries (Julia's ``fetch_*_query`` and ``prepare_*_query``).

    def _scalar_query(self, query: ViewQuery, name: str) -> QuerySequence | None:
        prepared = _prepared(query, name, LookupScalar)
        if prepared is not None and not _is_plain(prepared, LookupScalar):
            dimensions = query_result_dimensions(prepared)
            if dimensions != 0:
                raise DafQueryError(f"{_kind(dimensions)} query: {prepared}\nfor the scalar: {name}",
                                    **self._trailer())
        return prepared

    def _axis_query(self, query: ViewQuery, axis: str) -> QuerySequence | None:
        prepared = _prepared(query, axis, Axis)
        if prepared is not None and _whole_axis_name(prepared) is None and not is_axis_query(prepared):
            raise DafQueryError(f"not an axis query: {prepared}\nfor the axis: {axis}", **self._trailer())
        return prepared

    def _vector_query(self, axis_query: QuerySequence, axis: str, query: ViewQuery,
                      name: str) -> tuple[QuerySequence, bool] | None:
        """The full query of a vector, and whether it is a plain lookup of a base vector over the view axis."""
        prepared = _prepared(query, name, LookupVector)
        if prepared is None:
            return None
        prepared = _patched(prepared, {"__axis__": axis_query})
        plain = _is_plain(prepared, LookupVector)
        if not prepared.operations or type(prepared.operations[0]) is not Axis:
            prepared = QuerySequence(axis_query, prepared)
        dimensions = 1 if plain else query_result_dimensions(prepared)  # a vector of the axis, for a plain lookup
        if dimensions != 1:
            raise DafQueryError(f"{_kind(dimensions)} query: {prepared}\nfor the vector: {name}\nfor the axis: "
                                f"{axis}", **self._trailer())
        return prepared, plain

    def _matrix_query(self, rows_query: QuerySequence, rows_axis: str, columns_query: QuerySequence,
                      columns_axis: str, query: ViewQuery, name: str) -> tuple[QuerySequence, bool] | None:
        prepared = _prepared(query, name, LookupMatrix)
        if prepared is None:
            return None
        prepared = _patched(prepared, {"__rows_axis__": rows_query, "__columns_axis__": columns_query})
        plain = _is_plain(prepared, LookupMatrix)
        if not prepared.operations or type(prepared.operations[0]) is not Axis:
            prepared = QuerySequence(rows_query, columns_query, prepared)
        dimensions = 2 if plain else query_result_dimensions(prepared)
        if dimensions != 2:
            # Julia's message names the kind one dimension up here (a vector result says "matrix query"); the
            # recorded messages pin it, so it is kept.
            raise DafQueryError(f"{_kind(dimensions + 1)} query: {prepared}\nfor the matrix: {name}\nfor the rows "
                                f"axis: {rows_axis}\nand the columns axis: {columns_axis}", **self._trailer())
        return prepared, plain

    def _exists(self, query: QuerySequence | None, *, matrix: bool = False) -> bool:
        """Whether the base has what the query needs (and, for a matrix, in the layout it asks for). Single axes and
        plain scalar lookups are checked directly (their queries need not run)."""
        if query is None:
            return False
        axis = _whole_axis_name(query)
        if axis is not None:
            return self.base.has_axis(axis)
        operation = query.operations[0] if len(query.operations) == 1 else None
        if type(operation) is LookupScalar and operation.property_name is not None:
            return self.base.has_scalar(operation.property_name)
        return has_query(self.base, query) and not (matrix and query_requires_relayout(self.base, query))

    def _plain_exists(self, resolved: tuple[QuerySequence, bool] | None, *axes: str) -> bool:
        """Whether a resolved vector or matrix query exists; a plain lookup is checked directly on the base axes (the
        view axes' queries were checked when they were resolved)."""
        if resolved is None:
            return False
        query, plain = resolved
        if not plain:
            return self._exists(query, matrix=len(axes) == 2)
        name = _lookup_name(query.operations[-1])
        base_axes = [self._exposed_axis(axis)[1] for axis in axes]
        if len(base_axes) == 1:
            return self.base.has_axis(base_axes[0]) and self.base.has_vector(base_axes[0], name)
        return self._base_has_matrix(base_axes[0], base_axes[1], name)

    def _named_query(self, kind: str, pairs: list[tuple[Any, ViewQuery]], name: str, has: Callable[[str], bool],
                     prepare: Callable[[ViewQuery, str], QuerySequence | None]) -> QuerySequence | None:
        def resolve() -> QuerySequence | None:
            for key, query in pairs:
                if key == name or (key == "*" and has(name)):
                    prepared = prepare(query, name)
                    return prepared if self._exists(prepared) else None
            return None

        return self._memo((kind, name), resolve)

    def scalar_query(self, name: str) -> QuerySequence | None:
        """The base query of a view scalar, or ``None`` if the view has no such scalar."""
        return self._named_query("scalar", self.scalars, name, self.base.has_scalar, self._scalar_query)

    def axis_query(self, axis: str) -> QuerySequence | None:
        """The base axis query of a view axis, or ``None`` if the view has no such axis."""
        return self._named_query("axis", self.axes, axis, self.base.has_axis, self._axis_query)

    def _exposed_axis(self, axis: str) -> tuple[QuerySequence, str]:
        query = self.axis_query(axis)
        assert query is not None, axis  # the reader layer checked the axis exists
        return query, _whole_axis_name(query) or query_axis_name(query)

    def vector_query(self, axis: str, name: str) -> tuple[QuerySequence, bool] | None:
        """The full base query of a view vector (and whether it is a plain lookup), or ``None``."""
        def resolve() -> tuple[QuerySequence, bool] | None:
            axis_query, base_axis = self._exposed_axis(axis)
            for (key_axis, key_name), query in self.vectors:
                if key_axis in (axis, "*") and (key_name == name or (
                        key_name == "*" and self.base.has_axis(base_axis)
                        and self.base.has_vector(base_axis, name))):
                    resolved = self._vector_query(axis_query, axis, query, name)
                    return resolved if self._plain_exists(resolved, axis) else None
            return None

        return self._memo(("vector", axis, name), resolve)

    def _main_axis_entries(self, main_axis: str, name: str, rows_axis: str, columns_axis: str) -> np.ndarray:
        if self.axis_query(main_axis) is None:
            raise DafValueError(f"hidden tensor main axis: {main_axis}\nfor the matrix: {name}\nfor the rows axis: "
                                f"{rows_axis}\nfor the columns axis: {columns_axis}", **self._trailer())
        return self._axis(main_axis).entries

    @staticmethod
    def _tensor_entry(name: str, tensor_name: str) -> str | None:
        suffix = "_" + tensor_name
        return name[:-len(suffix)] if name.endswith(suffix) and len(name) > len(suffix) else None

    def matrix_query(self, rows_axis: str, columns_axis: str, name: str) -> tuple[QuerySequence, bool] | None:
        """The full base query of a view matrix in this layout (and whether it is a plain lookup), or ``None`` (also
        when computing it would need the base matrix in the other layout)."""
        def resolve() -> tuple[QuerySequence, bool] | None:
            rows_query, base_rows_axis = self._exposed_axis(rows_axis)
            columns_query, base_columns_axis = self._exposed_axis(columns_axis)
            for (main_axis, key_rows_axis, key_columns_axis, key_name), query in self.tensors:
                if (rows_axis, columns_axis) in ((key_rows_axis, key_columns_axis), (key_columns_axis, key_rows_axis)):
                    entry = self._tensor_entry(name, key_name)
                    if entry is not None and entry in set(self._main_axis_entries(
                            main_axis, key_name, key_rows_axis, key_columns_axis).tolist()):
                        return self._resolved_matrix(rows_query, rows_axis, columns_query, columns_axis, query, name)
            for (key_rows_axis, key_columns_axis, key_name), query in self.matrices:
                for flipped, (test_rows_axis, test_columns_axis) in enumerate(((key_rows_axis, key_columns_axis),
                                                                               (key_columns_axis, key_rows_axis))):
                    if flipped and key_rows_axis != key_columns_axis and _has_own_axes(query, name):
                        continue  # (its result is in the key's layout; the other one is a relayout of it)
                    if test_rows_axis in (rows_axis, "*") and test_columns_axis in (columns_axis, "*") and (
                            key_name == name or (key_name == "*" and self._base_has_matrix(
                                base_rows_axis, base_columns_axis, name))):
                        return self._resolved_matrix(rows_query, rows_axis, columns_query, columns_axis, query, name)
            return None

        return self._memo(("matrix", rows_axis, columns_axis, name), resolve)

    def _base_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        base = self.base
        return base.has_axis(rows_axis) and base.has_axis(columns_axis) and base.has_matrix(
            rows_axis, columns_axis, name, relayout=False)

    def _resolved_matrix(self, rows_query: QuerySequence, rows_axis: str, columns_query: QuerySequence,
                         columns_axis: str, query: ViewQuery, name: str) -> tuple[QuerySequence, bool] | None:
        resolved = self._matrix_query(rows_query, rows_axis, columns_query, columns_axis, query, name)
        return resolved if self._plain_exists(resolved, rows_axis, columns_axis) else None

    # Name sets (Julia's ``collect_view_*``).

    def format_scalars_set(self) -> set[str]:
        return set(self._memo(("scalars",), lambda: _first_wins(
            ((name, query) for key, query in self.scalars
             for name in (sorted(self.base.scalars_set()) if key == "*" else [key])),
            lambda name, query: self._exists(self._scalar_query(query, name)))))

    def format_axes_set(self) -> set[str]:
        return set(self._memo(("axes",), lambda: _first_wins(
            ((axis, query) for key, query in self.axes
             for axis in (sorted(self.base.axes_set()) if key == "*" else [key])),
            lambda axis, query: self._exists(self._axis_query(query, axis)))))

    def format_vectors_set(self, axis: str) -> set[str]:
        def resolve() -> frozenset[str]:
            axis_query, base_axis = self._exposed_axis(axis)
            return _first_wins(
                ((name, query) for (key_axis, key_name), query in self.vectors if key_axis in (axis, "*")
                 for name in (sorted(self.base.vectors_set(base_axis)) if key_name == "*" else [key_name])),
                lambda name, query: self._plain_exists(self._vector_query(axis_query, axis, query, name), axis))

        return set(self._memo(("vectors", axis), resolve))

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        names = set(self._memo(("matrices", rows_axis, columns_axis),
                               lambda: self._collect_matrices(rows_axis, columns_axis)))
        if rows_axis != columns_axis:
            names |= {name for name in self._memo(("matrices", columns_axis, rows_axis),
                                                  lambda: self._collect_matrices(columns_axis, rows_axis))
                      if self._realized_relayout(rows_axis, columns_axis, name)}
        return names

    def _collect_matrices(self, rows_axis: str, columns_axis: str) -> frozenset[str]:
        rows_query, base_rows_axis = self._exposed_axis(rows_axis)
        columns_query, base_columns_axis = self._exposed_axis(columns_axis)
        stored: list[str] | None = None

        def base_names() -> list[str]:
            nonlocal stored
            if stored is None:
                stored = sorted(self.base.matrices_set(base_rows_axis, base_columns_axis, relayout=False,
                                                       tensors=False)) \
                    if self.base.has_axis(base_rows_axis) and self.base.has_axis(base_columns_axis) else []
            return stored

        def tensor_members() -> Iterable[tuple[str, ViewQuery]]:
            for (main_axis, key_rows_axis, key_columns_axis, key_name), query in self.tensors:
                if {key_rows_axis, key_columns_axis} == {rows_axis, columns_axis}:
                    entries = set(self._main_axis_entries(main_axis, key_name, key_rows_axis,
                                                          key_columns_axis).tolist())
                    for name in base_names():
                        if self._tensor_entry(name, key_name) in entries:
                            yield name, query

        def matrices() -> Iterable[tuple[str, ViewQuery]]:
            for (key_rows_axis, key_columns_axis, key_name), query in self.matrices:
                if any(test_rows_axis in (rows_axis, "*") and test_columns_axis in (columns_axis, "*")
                       for flipped, (test_rows_axis, test_columns_axis) in enumerate(
                           ((key_rows_axis, key_columns_axis), (key_columns_axis, key_rows_axis)))
                       if not (flipped and key_rows_axis != key_columns_axis and _has_own_axes(query, key_name))):
                    for name in base_names() if key_name == "*" else [key_name]:
                        yield name, query

        # Tensor keys first: they win over matrix keys.
        return _first_wins(itertools.chain(tensor_members(), matrices()), lambda name, query: self._plain_exists(
            self._matrix_query(rows_query, rows_axis, columns_query, columns_axis, query, name), rows_axis,
            columns_axis))

    def _realized_relayout(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        """Whether the view already holds this layout of a matrix it exposes only in the other layout (it then lists
        both, as Julia's views do once the relayout was computed). A relayout made before a write to the base is
        dropped by the view's next read, so read (the axis entries: cached) before trusting one."""
        view = self.view
        key = MatrixCacheKey(rows_axis, columns_axis, name, DataForm.RELAYOUT)
        if view.cache.entry(key) is None:
            return False
        view.axis_vector(rows_axis)
        return view.cache.entry(key) is not None

    # Scalars.

    def format_has_scalar(self, name: str) -> bool:
        return self.scalar_query(name) is not None

    def format_get_scalar(self, name: str) -> StorageScalar:
        query = self.scalar_query(name)
        assert query is not None, name
        if _is_plain(query, LookupScalar):
            return self.base.get_scalar(_lookup_name(query.operations[0]))

        def compute() -> StorageScalar:
            return query_result(self.base, query, cache=False).value

        return self._cached(QueryCacheKey(f"scalar[{name}] = {query}"), ScalarCacheKey(name), compute)

    # Axes.

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        return self.axis_query(axis) is not None

    def _whole_axis(self, axis: str) -> str | None:
        """The base axis a view axis is all of (``@ axis``), or ``None`` for a subset."""
        query, base_axis = self._exposed_axis(axis)
        if len(query.operations) != 1:
            return None
        if AxisCacheKey(axis) not in self._tracked:
            self._track(AxisCacheKey(axis), [AxisCacheKey(base_axis)])
        return base_axis

    def _selection(self, axis: str) -> slice | np.ndarray | None:
        """Where the entries of a view axis are in its base axis (``None``: all of it), without reading the entries of
        a whole axis."""
        return None if self._whole_axis(axis) is not None else self._axis(axis).selection

    def _axis(self, axis: str) -> _ViewAxis:
        base_axis = self._whole_axis(axis)
        if base_axis is not None:
            return _ViewAxis(self.base.axis_vector(base_axis), None)
        query, base_axis = self._exposed_axis(axis)

        def compute() -> _ViewAxis:
            result = query_result(self.base, query, cache=False)
            entries = read_only_array(np.asarray(result.value, dtype=object))
            self._track(AxisCacheKey(axis), result.dependencies)
            return _ViewAxis(entries, _contiguous(self._base_positions(base_axis, entries)))

        return self._cached(QueryCacheKey(f"axis[{axis}] = {query}"), AxisCacheKey(axis), compute)

    def _base_positions(self, base_axis: str, entries: np.ndarray) -> np.ndarray:
        """The positions of entries in a base axis, hashed in C (the base's cached ``pandas.Index`` of the axis, which
        its queries share)."""
        import pandas as pd

        index = self.base.cache.get_or_compute(
            AxisCacheKey(base_axis, AxisForm.INDEX),
            lambda: (pd.Index(self.base.axis_vector(base_axis), dtype=object), CacheGroup.MemoryData))
        return index.get_indexer(entries).astype(np.int64)

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        return self._axis(axis).entries, None

    def format_axis_length(self, axis: str) -> int:
        base_axis = self._whole_axis(axis)
        if base_axis is not None:
            return self.base.axis_length(base_axis)
        return int(self._axis(axis).entries.shape[0])

    # Vectors.

    def format_has_vector(self, axis: str, name: str) -> bool:
        return self.vector_query(axis, name) is not None

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        resolved = self.vector_query(axis, name)
        assert resolved is not None, (axis, name)
        query, plain = resolved
        key = VectorCacheKey(axis, name)

        def compute() -> StoredVector:
            if plain:
                selection = self._selection(axis)
                base_axis = self._exposed_axis(axis)[1]
                lookup = _lookup_name(query.operations[-1])
                self._track(key, [AxisCacheKey(base_axis), VectorCacheKey(base_axis, lookup), *self._dependencies(
                    AxisCacheKey(axis))])
                return read_only_array(_select_vector(self.base.get_stored_vector(base_axis, lookup), selection))
            result = query_result(self.base, query, cache=False)
            self._require_entries(result.entries[0], self._axis(axis).entries,
                                  f"vector: {name}\nof the axis: {axis}", query)
            self._track(key, result.dependencies)
            return result.value

        return self._cached(QueryCacheKey(f"{key.text()} = {query}"), key, compute), None

    def _require_entries(self, entries: np.ndarray, expected: np.ndarray, what: str, query: QuerySequence) -> None:
        if entries.shape != expected.shape or not np.array_equal(entries, expected):
            raise DafValueError(f"the entries of the result of the query: {query}\nare not the entries of the view "
                                f"axis\nfor the {what}", **self._trailer())

    # Matrices.

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        return self.matrix_query(rows_axis, columns_axis, name) is not None or (
            rows_axis != columns_axis and self.matrix_query(columns_axis, rows_axis, name) is not None
            and self._realized_relayout(rows_axis, columns_axis, name))

    def format_get_matrix(self, rows_axis: str, columns_axis: str,
                          name: str) -> tuple[StoredMatrix, CacheGroup | None]:
        resolved = self.matrix_query(rows_axis, columns_axis, name)
        if resolved is None:
            # A realized relayout (see ``_realized_relayout``): the reader's, or computed again if it was dropped.
            entry = self.view.cache.entry(MatrixCacheKey(rows_axis, columns_axis, name, DataForm.RELAYOUT))
            if entry is not None:
                return entry.value, None
            other, _ = self.format_get_matrix(columns_axis, rows_axis, name)
            if isinstance(other, SparseMatrixCSC):
                return other.transpose().read_only(), CacheGroup.MemoryData
            return read_only_array(np.asfortranarray(other.T)), CacheGroup.MemoryData
        query, plain = resolved
        key = MatrixCacheKey(rows_axis, columns_axis, name).either_layout()

        def compute() -> StoredMatrix:
            if plain:
                rows, columns = self._selection(rows_axis), self._selection(columns_axis)
                base_rows_axis = self._exposed_axis(rows_axis)[1]
                base_columns_axis = self._exposed_axis(columns_axis)[1]
                lookup = _lookup_name(query.operations[-1])
                self._track(key, [AxisCacheKey(base_rows_axis), AxisCacheKey(base_columns_axis),
                                  MatrixCacheKey(base_rows_axis, base_columns_axis, lookup).either_layout(),
                                  *self._dependencies(AxisCacheKey(rows_axis)),
                                  *self._dependencies(AxisCacheKey(columns_axis))])
                if columns is not None:  # (only those columns read: a packed matrix decodes only their chunks)
                    selected = self.base.get_stored_matrix_columns(base_rows_axis, base_columns_axis, lookup, columns)
                    return read_only_array(_select_matrix(selected, rows, None))
                stored = self.base.get_stored_matrix(base_rows_axis, base_columns_axis, lookup, relayout=False)
                return read_only_array(_select_matrix(stored, rows, columns))
            result = query_result(self.base, query, cache=False)
            what = f"matrix: {name}\nof the rows axis: {rows_axis}\nand the columns axis: {columns_axis}"
            self._require_entries(result.entries[0], self._axis(rows_axis).entries, what, query)
            self._require_entries(result.entries[1], self._axis(columns_axis).entries, what, query)
            self._track(key, result.dependencies)
            return result.value

        text = f"{MatrixCacheKey(rows_axis, columns_axis, name).text()} = {query}"
        return self._cached(QueryCacheKey(text), MatrixCacheKey(rows_axis, columns_axis, name), compute), None


def _type_text(daf: DafReader) -> str:
    """The type part of a data set's ``brief`` (its ``repr`` without the name)."""
    text = repr(daf)
    suffix = f" {daf.name}"
    return text[:-len(suffix)] if text.endswith(suffix) else type(daf).__name__


class DafView(DafReadOnly):
    """A read-only view of another data set, defined by queries (see :func:`viewer`)."""

    write_hint = "a view is read-only: write to the data set it views"

    def __init__(self, daf: DafReader, *, name: str, axes: list[tuple[Any, ViewQuery]],
                 data: list[tuple[Any, ViewQuery]], path: str | None = None) -> None:
        view_format = ViewFormat(daf, name, axes, data, path)
        super().__init__(view_format, name=name, unique=False)
        view_format._view = weakref.ref(self)
        self._daf = daf

    @property
    def daf(self) -> DafReader:
        """The data set the view's queries apply to."""
        return self._daf

    def _type_text(self) -> str:
        return f"View {_type_text(self._daf)}"


def make_view(daf: DafReader, *, name: str | None, axes: ViewPairs | None, data: ViewPairs | None,
              path: str | None = None) -> DafReader:
    """:func:`viewer`, with the path a view reopened by :func:`~pydaf.complete_daf` reports as its own."""
    if axes is None and data is None:
        return daf.read_only(name=name)
    while isinstance(daf, DafReadOnlyWrapper):
        daf = daf.base
    if view_nesting(daf) >= MAX_VIEW_NESTING:
        raise DafValueError(f"too deeply nested view: {view_nesting(daf) + 1} views in one another\n(at most "
                            f"MAX_VIEW_NESTING = {MAX_VIEW_NESTING}: reading through more would exhaust the stack; "
                            "copy the data of a view into a data set to view it further)",
                            for_=f"view: {name if name is not None else f'{daf.name}.view'}", daf_name=daf.name,
                            daf_preposition="of")
    name = unique_name(name if name is not None else f"{daf.name}.view")
    axes_pairs = view_pairs([VIEW_ALL_AXES] if axes is None else axes, data=False, name=name, daf_name=daf.name)
    data_pairs = view_pairs(VIEW_ALL_DATA if data is None else data, data=True, name=name, daf_name=daf.name)
    for key, query in data_pairs:
        _check_wildcards(key, query, name, daf.name)
    return DafView(daf, name=name, axes=axes_pairs, data=data_pairs, path=path)


def _check_wildcards(key: Any, query: ViewQuery, name: str, daf_name: str) -> None:
    trailer: dict[str, Any] = {"for_": f"view: {name}", "daf_name": daf_name, "daf_preposition": "of"}
    if isinstance(key, str):
        if key == "*" and query not in _WILDCARD_QUERIES:
            raise DafValueError(f"invalid wildcard scalar query: {query}\nquery for wildcard must be one of: \"=\", "
                                "nothing", **trailer)
    elif len(key) == 2:
        if "*" in key and query not in _WILDCARD_QUERIES:
            raise DafValueError(f"invalid wildcard vector query: {query}\nquery for wildcard must be one of: \"=\", "
                                f"nothing\nfor the vector property: {key[1]}\nfor the vector axis: {key[0]}", **trailer)
    elif len(key) == 3:
        if "*" in key and query not in _WILDCARD_QUERIES:
            raise DafValueError(f"invalid wildcard matrix query: {query}\nquery for wildcard must be one of: \"=\", "
                                f"nothing\nfor the matrix property: {key[2]}\nfor the rows axis: {key[0]}\n"
                                f"for the columns axis: {key[1]}", **trailer)
    else:
        main_axis, rows_axis, columns_axis, matrix_name = key
        where = f"for the matrix: {matrix_name}\nfor the main axis: {main_axis}\nand the rows axis: {rows_axis}\n" \
                f"and the columns axis: {columns_axis}"
        if "*" in key:
            raise DafValueError(f"unsupported tensor wildcard\n{where}", **trailer)
        if query not in _WILDCARD_QUERIES:
            raise DafValueError(f"unsupported tensor query: {query}\nquery for tensor must be one of: \"=\", "
                                f"nothing\n{where}", **trailer)


def viewer(daf: DafReader, *, name: str | None = None, axes: ViewPairs | None = None,
           data: ViewPairs | None = None) -> DafReader:
    """A lazy, read-only view of ``daf`` (Julia's ``viewer``), defined by ``axes`` and ``data``: lists of ``(key,
    query)`` pairs or dicts (see the module docstring for the rules). ``axes`` defaults to ``[VIEW_ALL_AXES]`` and
    ``data`` to ``VIEW_ALL_DATA``; with neither, this is :meth:`~pydaf.DafReader.read_only`. The default name is
    ``<name>.view``. Nothing is computed until it is read.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B", "C"])
        >>> daf = daf.set_vector("cell", "age", [1, 5, 7]).set_vector("cell", "batch", ["U", "V", "V"])
        >>> view = pydaf.viewer(daf, name="old!", axes=[("cell", "@ cell [ age > 1 ]")],
        ...                     data=[(("cell", "age"), "="), (("cell", "group"), ": batch")])
        >>> view.axis_vector("cell").tolist(), view.get_vector("cell", "group").tolist(), pydaf.brief(view)
        (['B', 'C'], ['V', 'V'], 'View MemoryDaf old!')
    """
    return make_view(daf, name=name, axes=axes, data=data)
