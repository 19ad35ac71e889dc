"""The state of a query being applied (Julia's ``QueryState``): the stack of names, scalar, vector and matrix states the
phrases push and pop, what the query is run for (:class:`Purpose`), the data it read (recorded as typed cache keys, so
a cached result knows when it is stale), and errors pointing (``▲``) at the phrase being applied.

Vectors are dense numpy arrays (strings as ``object`` arrays); matrices are column-major numpy arrays or 1-based
:class:`~pydaf.sparse.SparseMatrixCSC` straight from the store (mapped where the store is).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, NoReturn

import numpy as np

from ..abc.format import CacheGroup, StoredMatrix
from ..core.cache import AxisCacheKey, AxisForm, MatrixCacheKey, ScalarCacheKey, VectorCacheKey
from ..core.undef import Undef
from ..errors import DafQueryError
from ..julia_text import julia_string, julia_type_name
from ..sparse import SparseMatrixCSC
from ..storage_types import julia_name
from .base import QueryOperation, select_matrix
from .query import IfMissing

if TYPE_CHECKING:
    from ..core.readers import DafReader

__all__ = [
    "AxisEntries",
    "MatrixState",
    "Missing",
    "NamesState",
    "Purpose",
    "QueryState",
    "ScalarState",
    "VectorState",
    "as_booleans",
    "cast_value",
    "entry_names",
    "error_at_state",
    "resolved",
]


class Purpose(enum.Enum):
    """What a query is run for (Julia's ``what_for``)."""

    COMPUTE = enum.auto()
    """Compute the result."""
    HAS_QUERY = enum.auto()
    """Check that everything the query needs exists (:class:`Missing` is raised where something does not)."""
    REQUIRES_RELAYOUT = enum.auto()
    """Find whether a matrix is needed in the layout that is not stored."""
    DRY_RUN = enum.auto()
    """Only the shape of the result (names, scalar, vector or matrix; of which axes), with no data at all."""


class Missing(Exception):
    """Raised for :data:`Purpose.HAS_QUERY`: something the query needs does not exist."""


# Stack elements.


@dataclass
class NamesState:
    names_set: set[str] | None


@dataclass
class ScalarState:
    scalar_value: Any


#: The entries of a vector state when there is no data (:data:`Purpose.DRY_RUN`).
NO_STRINGS = np.empty(0, dtype=object)


class AxisEntries:
    """All the entries of an axis, read from the data set only when something uses them: a query whose result is
    only values (``get_np_query("@ cell @ gene :: UMIs")``) never reads the names (reading 10,000 names from an
    H5df takes ~3 ms, ten times mapping the matrix). The axis is checked to exist when the query runs; reading the
    names later, when its version counter changed since (it was deleted, maybe re-created), is an error rather than
    names that do not match the values."""

    def __init__(self, daf: DafReader, axis: str) -> None:
        self.daf, self.axis = daf, axis
        self.version = daf.axis_version_counter(axis)
        self._entries: np.ndarray | None = None

    def read(self) -> np.ndarray:
        if self._entries is None:
            with self.daf.read_lock():
                self._require_unchanged()
                self._entries = self.daf.axis_vector(self.axis)
        return self._entries

    def __len__(self) -> int:
        """How many entries, without reading their names."""
        if self._entries is not None:
            return len(self._entries)
        with self.daf.read_lock():
            self._require_unchanged()
            return self.daf.axis_length(self.axis)

    def _require_unchanged(self) -> None:
        if self.daf.axis_version_counter(self.axis) != self.version:
            raise DafQueryError(f"the entries of the axis: {self.axis}\nchanged since the query was computed",
                                daf_name=self.daf.name, daf_preposition="for")


def resolved(value: Any) -> Any:
    """``value``, or the names it stands for if it is :class:`AxisEntries` (read now)."""
    return value.read() if isinstance(value, AxisEntries) else value


@dataclass
class VectorState:
    """A vector on the stack: its entries (names; of an axis, or values grouped by), and its values (possibly the
    entries themselves, possibly still :class:`AxisEntries` to read)."""

    entries_axis_name: str | None = None
    stored_entries: np.ndarray | AxisEntries | None = None
    property_name: str | None = None
    property_axis_name: str | None = None
    is_complete_property_axis: bool = False
    stored_values: Any = None
    pending_final_values: np.ndarray | None = None
    # The (axis, vector) the values were last looked up from (``None``: not a plain vector lookup), so grouping by
    # them can follow the category order recorded for that vector (see ``group_values``).
    values_source: tuple[str, str] | None = None

    @property
    def vector_entries(self) -> np.ndarray | None:
        return resolved(self.stored_entries)

    @vector_entries.setter
    def vector_entries(self, entries: np.ndarray | AxisEntries | None) -> None:
        self.stored_entries = entries

    @property
    def vector_values(self) -> Any:
        return resolved(self.stored_values)

    @vector_values.setter
    def vector_values(self, values: Any) -> None:
        self.stored_values = values

    def copy(self) -> VectorState:
        """A shallow copy (the arrays are shared; phrases replace them rather than write into them)."""
        return replace(self)


@dataclass
class MatrixState:
    rows_state: VectorState | None = None
    columns_state: VectorState | None = None
    property_name: str | None = None
    property_axis_name: str | None = None
    matrix_values: Any = None
    pending_final_values: np.ndarray | None = None
    # The stored matrix in the other layout (``None`` if it is not stored), while ``matrix_values`` is the whole stored
    # matrix (reducing each row of a column-major matrix is a scatter; reducing each column of its flipped layout is a
    # parallel streaming pass).
    flipped: tuple[Any, Callable[[], Any]] | None = None


@dataclass
class QueryState:
    """The machine's state: the data set (``None`` for a dry run), the operations, where the current phrase starts
    and ends in them, the stack, and what the result depends on."""

    daf: DafReader | None
    operations: tuple[QueryOperation, ...]
    purpose: Purpose
    first_operation_index: int = 0
    next_operation_index: int = 0
    dependencies: set[Any] = field(default_factory=set)
    requires_relayout: bool = False
    stack: list[Any] = field(default_factory=list)

    @property
    def computing(self) -> bool:
        return self.purpose is Purpose.COMPUTE

    @property
    def data(self) -> DafReader:
        """The data set (phrases ask for it only where there is one)."""
        assert self.daf is not None
        return self.daf

    # Reading data, recording what the result depends on.

    def get_vector(self, axis: str, name: str, if_missing: IfMissing | None) -> np.ndarray:
        self.dependencies.add(VectorCacheKey(axis, name))
        vector = self.data.get_vector(axis, name, default=_default(if_missing))
        assert vector is not None  # (an IfMissing value is never None: the query refuses it)
        return vector

    def get_matrix(self, rows_axis: str, columns_axis: str, name: str, if_missing: IfMissing | None) -> Any:
        self.dependencies.add(MatrixCacheKey(rows_axis, columns_axis, name))
        return self.data.get_stored_matrix(rows_axis, columns_axis, name, default=_default(if_missing))

    def get_matrix_selection(self, rows_axis: str, columns_axis: str, name: str, rows: np.ndarray | None,
                             columns: np.ndarray | None) -> Any:
        """The selected rows and columns of a stored matrix, read through the columns of whichever layout is stored
        (``get_stored_matrix_columns``: a packed matrix decodes only the chunks of the selected columns): the
        selected columns of this layout, else the selected rows as the columns of the other layout, transposed.
        ``None`` if nothing is selected, the matrix is not stored, or its selected layout was already read whole."""
        daf = self.data
        key = MatrixCacheKey(rows_axis, columns_axis, name)
        if columns is not None and daf.has_matrix(rows_axis, columns_axis, name, relayout=False):
            self.dependencies.add(key)
            selected = daf.get_stored_matrix_columns(rows_axis, columns_axis, name, columns)
            return select_matrix(selected, rows=rows)
        if rows is not None and rows_axis != columns_axis and daf.has_matrix(columns_axis, rows_axis, name,
                                                                             relayout=False) \
                and daf.cache.entry(key) is None:
            self.dependencies.update((key, MatrixCacheKey(columns_axis, rows_axis, name)))
            selected = daf.get_stored_matrix_columns(columns_axis, rows_axis, name, rows)
            if columns is not None:
                selected = select_matrix(selected, rows=columns)
            if isinstance(selected, SparseMatrixCSC):
                return selected.transpose()
            return np.asfortranarray(selected.T)
        return None

    def get_matrix_slice(self, rows_axis: str, columns_axis: str, name: str, if_missing: IfMissing | None, entry: str,
                         *, is_column: bool) -> np.ndarray:
        """One column (or row) of a matrix, read from whichever layout is stored, so no relayout is needed."""
        daf = self.data
        self.dependencies.add(MatrixCacheKey(rows_axis, columns_axis, name))
        position = int(self.entry_indices(columns_axis if is_column else rows_axis, np.array([entry], dtype=object))[0])
        matrix: StoredMatrix | None
        if daf.has_matrix(rows_axis, columns_axis, name, relayout=False):
            matrix, as_stored = daf.get_stored_matrix(rows_axis, columns_axis, name, relayout=False), True
        elif daf.has_matrix(columns_axis, rows_axis, name, relayout=False):
            matrix, as_stored = daf.get_stored_matrix(columns_axis, rows_axis, name, relayout=False), False
        else:
            matrix, as_stored = daf.get_stored_matrix(rows_axis, columns_axis, name, default=_default(if_missing)), True
        return _matrix_column(matrix, position) if is_column == as_stored else _matrix_row(matrix, position)

    def get_recorded_categories(self, axis: str, name: str) -> list[str] | None:
        """The category order recorded for a vector imported from an AnnData categorical (the scalar
        ``<axis>_<name>_categories``, one category per line; see ``pydaf.interop.content.recorded_scalars``), if
        any."""
        scalar = f"{axis}_{name}_categories"
        self.dependencies.add(ScalarCacheKey(scalar))
        recorded = self.data.get_scalar(scalar, default=None)
        if not isinstance(recorded, str):
            return None
        return recorded.split("\n") if recorded else []

    def axis_vector(self, axis: str) -> np.ndarray:
        return self.data.axis_vector(axis)

    def axis_entries(self, axis: str) -> AxisEntries:
        """All the entries of an axis, read when first used (a missing axis is an error now, as ``axis_vector``)."""
        if not self.data.has_axis(axis):
            self.data.axis_vector(axis)  # Raises the reader's error for a missing axis.
        return AxisEntries(self.data, axis)

    def positions_in_axis(self, axis: str, names: np.ndarray) -> np.ndarray:
        """0-based positions of entry names in an axis (-1 for names that are not entries), hashed in C."""
        return _axis_index(self.data, axis).get_indexer(names.ravel()).reshape(names.shape)

    def entry_indices(self, axis: str, names: Any) -> np.ndarray:
        """0-based positions of entry names in an axis (a clear error naming the axis for a name that is not there)."""
        names = entry_names(names)
        indices = self.positions_in_axis(axis, names)
        missing = np.flatnonzero(indices.ravel() < 0)
        if missing.shape[0] > 0:
            error_at_state(self, f"missing entry: {names.ravel()[missing[0]]}\nof the axis: {axis}")
        return indices


def _default(if_missing: IfMissing | None) -> Any:
    return Undef if if_missing is None else if_missing.default_value


def _axis_index(daf: DafReader, axis: str) -> Any:
    """A hashed ``pandas.Index`` of the axis entries (cached with the data set's axis data)."""
    import pandas as pd  # (lazily: pandas takes a while to import)

    return daf.cache.get_or_compute(AxisCacheKey(axis, AxisForm.INDEX),
                                    lambda: (pd.Index(daf.axis_vector(axis), dtype=object), CacheGroup.MemoryData))


def _matrix_column(matrix: Any, column: int) -> np.ndarray:
    return matrix.column(column) if isinstance(matrix, SparseMatrixCSC) else np.asarray(matrix[:, column])


def _matrix_row(matrix: Any, row: int) -> np.ndarray:
    return matrix.row(row) if isinstance(matrix, SparseMatrixCSC) else np.asarray(matrix[row, :])


# Errors.


def _text(operations: tuple[QueryOperation, ...]) -> str:
    return " ".join(str(operation) for operation in operations)


def _offset(state: QueryState, index: int) -> int:
    return 0 if index <= 0 else len(_text(state.operations[:index])) + 1


def error_at_state(state: QueryState, message: str) -> NoReturn:
    """Raise a :class:`DafQueryError` pointing (``▲``) at the operations of the current phrase."""
    full_text = _text(state.operations)
    if state.next_operation_index == state.first_operation_index:
        if state.first_operation_index < len(state.operations):
            first_offset = _offset(state, state.first_operation_index) - 1
        else:
            first_offset = len(full_text)
        last_offset = first_offset + 1
    else:
        first_offset = _offset(state, state.first_operation_index)
        if state.next_operation_index < len(state.operations):
            last_offset = _offset(state, state.next_operation_index) - 1
        else:
            last_offset = len(full_text)
    indent = " " * max(0, first_offset)
    marker = "▲" * max(1, last_offset - first_offset)
    message = message.rstrip("\n") + f"\nin the query: {full_text}\nat location:  {indent}{marker}"
    raise DafQueryError(message, daf_name=None if state.daf is None else state.daf.name, daf_preposition="for")


def exception_line(exception: BaseException) -> str:
    """An exception as the line Julia's messages embed (Python's type and text instead of Julia's)."""
    return f"{type(exception).__name__}: {exception}"


# Values.


def is_strings(values: Any) -> bool:
    """Whether values are strings (entry names still to be read are)."""
    return isinstance(values, AxisEntries) or getattr(getattr(values, "dtype", None), "kind", None) == "O"


def as_booleans(values: Any) -> Any:
    """Julia's truthiness of values: Bool as is, non-empty strings, non-zero numbers."""
    if isinstance(values, SparseMatrixCSC):
        values = values.to_dense()
    values = np.asarray(values)
    if values.dtype == bool:
        return values
    if values.dtype.kind == "O":
        return values != ""
    return values != 0


def cast_value(state: QueryState, what: str, value: Any, dtype: np.dtype) -> Any:
    """Convert a default or final value to the element type of the data it goes into (Julia's ``cast_value``)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "O":
        return value if isinstance(value, str) else julia_string(value)
    if isinstance(value, str):
        try:
            if dtype.kind == "b":
                if value not in ("true", "false"):
                    raise ValueError(f"invalid Bool: {value!r}")
                return np.bool_(value == "true")
            if dtype.kind in "iu":
                return dtype.type(int(value))
            return dtype.type(float(value))
        except (ValueError, OverflowError) as exception:
            error_at_state(state, f"error parsing {what} value: {value}\nas type: {julia_name(dtype)}\n"
                                  f"{exception_line(exception)}")
    try:
        if dtype.kind in "iub":
            number = float(value) if not isinstance(value, int | np.integer) else int(value)
            if dtype.kind == "b":
                if number not in (0, 1):
                    raise ValueError(f"{value} is not 0 or 1")
                return np.bool_(number == 1)
            if number != int(number):
                raise ValueError(f"{value} is not an integer")
            info = np.iinfo(dtype)
            if not info.min <= int(number) <= info.max:
                raise ValueError(f"{value} is out of range")
            return dtype.type(int(number))
        return dtype.type(value)
    except (ValueError, OverflowError, TypeError) as exception:
        error_at_state(state, f"error converting: {julia_type_name(value)}\n{what} value: {julia_string(value)}"
                              f"\nto type: {julia_name(dtype)}\n{exception_line(exception)}")


def entry_names(values: Any) -> np.ndarray:
    """Values as entry names (Julia's ``string.(values)``)."""
    values = np.asarray(values)
    if values.dtype == object:
        return values
    return np.array([julia_string(value) for value in values.tolist()] if values.dtype != bool
                    else ["true" if value else "false" for value in values], dtype=object).reshape(values.shape)
