"""Parallel reductions of matrices as Daf stores them: 1-based Julia CSC (any :class:`~.csc_arrays.CscArrays`, such as
a :class:`~pydaf.sparse.SparseMatrixCSC`, possibly read-only and memory-mapped) and column-major dense numpy arrays,
on the stored arrays as they are (no 0-based copies, never densified), in four :class:`Direction` s (per column, per
row, grouped rows, grouped columns), for the statistics of :data:`STATISTICS`. Inputs with fewer than
:data:`REDUCE_NUMBA_MIN_ENTRIES` values use plain numpy; larger ones the numba kernels of :mod:`._csc` and
:mod:`._dense`, on the threads of :mod:`.threads`.

Design: docs/design/kernels.md."""

from __future__ import annotations

import enum
import importlib
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from fractions import Fraction
from functools import cache
from types import ModuleType
from typing import Any

import numpy as np

from .._os.maps import mapped_region, release_pages
from .csc_arrays import CscArrays, PlainCsc, column_range, dense_column, entry_columns, from_scipy, select, transposed
from .threads import even_bounds, run_ranges, threads_for

__all__ = [
    "REDUCE_NUMBA_MIN_ENTRIES",
    "STATISTICS",
    "Direction",
    "Statistic",
    "column_means",
    "column_sums",
    "group_members",
    "matrix_columns",
    "matrix_rows",
    "reduce_all",
    "reduce_columns",
    "reduce_grouped_columns",
    "reduce_grouped_rows",
    "reduce_grouped_vector",
    "reduce_rows",
    "reduce_vector",
    "row_means",
    "row_sums",
]

#: Below this many values (dense) or stored entries (sparse), numpy is used instead of the numba kernels (it is faster
#: than loading even a cached kernel).
REDUCE_NUMBA_MIN_ENTRIES = 1 << 16

# Values per chunk when a vector is reduced in chunks (bounding the temporaries).
_VECTOR_CHUNK = 1 << 20

# Rows per block when a dense matrix is accumulated per row: the block's float64 accumulators (256 KB) stay in L2;
# longer column runs stream faster than short ones (5.5 ms for 80 MB with 2,048-row blocks, 4.6 ms with 32,768).
_ROW_BLOCK = 1 << 15

# Bytes of a dense block that two passes read (per-row variances, order statistics): it stays in the L2 cache between
# them (2 x 1 MB on the 2-core VM).
_CACHED_BLOCK_BYTES = 1 << 18

# Values per block that numpy transforms (logarithms) before a kernel accumulates them: numpy's SIMD ``log`` is 4-10x
# faster than numba's scalar one (no SVML here), and the block stays in cache between the two.
_TRANSFORM_BLOCK = 1 << 16

# A pass over a mapped matrix of at least this many bytes of values releases its pages as it goes, a piece of about
# _STREAM_PIECE_BYTES of values at a time per thread (see _streamed).
_STREAM_MIN_BYTES = 1 << 26
_STREAM_PIECE_BYTES = 1 << 24

# At most this many bytes of per-thread buffers: above it, per-row reductions use fewer threads and grouped columns are
# reduced one group per thread (into one shared buffer) instead.
_PRIVATE_BUFFERS_LIMIT = 1 << 30

#: A 1-based CSC matrix (only its arrays are used: the kernels sit below the sparse matrix type) or a dense one.
Matrix = CscArrays | np.ndarray


class Direction(enum.Enum):
    """What a reduction eliminates (see the module documentation)."""

    COLUMNS = "columns"
    """One value per column (Julia's ``>-``)."""
    ROWS = "rows"
    """One value per row (Julia's ``>|``)."""
    GROUPED_ROWS = "grouped rows"
    """One value per (group of rows, column)."""
    GROUPED_COLUMNS = "grouped columns"
    """One value per (row, group of columns)."""

    @property
    def transposed(self) -> Direction:
        """The same reduction of the transposed matrix."""
        return _TRANSPOSED[self]

    @property
    def is_grouped(self) -> bool:
        return self in (Direction.GROUPED_ROWS, Direction.GROUPED_COLUMNS)


_TRANSPOSED = {Direction.COLUMNS: Direction.ROWS, Direction.ROWS: Direction.COLUMNS,
               Direction.GROUPED_ROWS: Direction.GROUPED_COLUMNS, Direction.GROUPED_COLUMNS: Direction.GROUPED_ROWS}


@dataclass(frozen=True)
class Options:
    """The parameters of the statistics that take one: ``eps`` (``geomean``) and ``p`` (``quantile``)."""

    eps: float = 0.0
    p: float | None = None

    def quantile(self) -> float:
        if self.p is None:
            raise ValueError("the quantile statistic needs p")
        return float(self.p)


@dataclass(frozen=True)
class Statistic:
    """A statistic the reductions compute: its value per target of a matrix (before grouped results are shaped),
    for a whole matrix, and for a vector. :data:`STATISTICS` holds them by name.

    Example:
        >>> STATISTICS["mean"].of_vector(np.array([1, 2, 6]), Options())
        np.float64(3.0)
    """

    name: str
    of_targets: Callable[[Matrix, _Targets, Options], np.ndarray]
    of_all: Callable[[Matrix, Options], Any]
    of_vector: Callable[[np.ndarray, Options], Any]


def _statistic(name: str) -> Statistic:
    statistic = STATISTICS.get(name)
    if statistic is None:
        raise ValueError(f"unknown statistic: {name} (expected one of: {', '.join(STATISTICS)})")
    return statistic


# The public reductions.


def _reduce(matrix: Any, statistic: str, direction: Direction, groups: np.ndarray | None = None, n_groups: int = 0,
            *, eps: float = 0.0, p: float | None = None) -> np.ndarray:
    matrix = _as_matrix(matrix)
    record = _statistic(statistic)
    if isinstance(matrix, np.ndarray) and not matrix.flags.f_contiguous:
        if matrix.flags.c_contiguous:
            # A row-major matrix is the column-major layout of its transpose: reduce that the other way.
            result = _reduce(matrix.T, statistic, direction.transposed, groups, n_groups, eps=eps, p=p)
            return np.asfortranarray(result.T) if result.ndim == 2 else result
        matrix = np.asfortranarray(matrix)
    targets = _Targets(matrix.shape, direction, groups, n_groups)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return targets.shape_result(record.of_targets(matrix, targets, Options(eps, p)))


def reduce_columns(matrix: Any, statistic: str, *, eps: float = 0.0, p: float | None = None) -> np.ndarray:
    """One value per column (reducing the rows away; Julia's ``>-``) of a 1-based CSC or column-major matrix.

    ``statistic`` is one of :data:`STATISTICS`; ``eps`` is for ``geomean``, ``p`` for ``quantile``. Sums are
    ``int64``/``uint64``/``float64``, ``max``/``min`` keep the input type, the rest are ``float64``.

    Example:
        >>> from pydaf.sparse import SparseMatrixCSC
        >>> m = SparseMatrixCSC((3, 2), np.array([1, 2, 4], np.uint32), np.array([2, 1, 3], np.uint32),
        ...                     np.array([4, 1, 5], np.uint16))
        >>> m.to_dense().tolist()
        [[0, 1], [4, 0], [0, 5]]
        >>> reduce_columns(m, "sum").tolist(), reduce_columns(m, "max").tolist(), reduce_columns(m, "median").tolist()
        ([4, 6], [4, 5], [0.0, 1.0])
    """
    return _reduce(matrix, statistic, Direction.COLUMNS, eps=eps, p=p)


def reduce_rows(matrix: Any, statistic: str, *, eps: float = 0.0, p: float | None = None) -> np.ndarray:
    """One value per row (reducing the columns away; Julia's ``>|``); see :func:`reduce_columns`.

    Example:
        >>> reduce_rows(np.array([[1.0, 3.0], [2.0, 6.0]], order="F"), "mean").tolist()
        [2.0, 4.0]
    """
    return _reduce(matrix, statistic, Direction.ROWS, eps=eps, p=p)


def reduce_grouped_rows(matrix: Any, statistic: str, groups: np.ndarray, n_groups: int, *, eps: float = 0.0,
                        p: float | None = None) -> np.ndarray:
    """Reduce the rows of each group: ``groups[row]`` is the row's 0-based group (-1: ignored). The result is a
    column-major ``n_groups x n_columns`` matrix (Julia's ``-/ group >- Op``); empty groups give ``0`` sums and
    ``NaN`` means.

    Example:
        >>> m = np.array([[1, 2], [3, 4], [5, 6]], order="F")
        >>> reduce_grouped_rows(m, "sum", np.array([0, 1, 0]), 2).tolist()
        [[6, 8], [3, 4]]
    """
    return _reduce(matrix, statistic, Direction.GROUPED_ROWS, groups, n_groups, eps=eps, p=p)


def reduce_grouped_columns(matrix: Any, statistic: str, groups: np.ndarray, n_groups: int, *, eps: float = 0.0,
                           p: float | None = None) -> np.ndarray:
    """Reduce the columns of each group: ``groups[column]`` is the column's 0-based group (-1: ignored). The result
    is a column-major ``n_rows x n_groups`` matrix (Julia's ``|/ group >| Op``).

    Example:
        >>> m = np.array([[1, 2, 3], [4, 5, 6]], order="F")
        >>> reduce_grouped_columns(m, "max", np.array([1, 0, 1]), 2).tolist()
        [[2, 3], [5, 6]]
    """
    return _reduce(matrix, statistic, Direction.GROUPED_COLUMNS, groups, n_groups, eps=eps, p=p)


def reduce_all(matrix: Any, statistic: str, *, eps: float = 0.0, p: float | None = None) -> Any:
    """One value for the whole matrix (Julia's ``>>`` on a matrix), as a numpy scalar.

    Example:
        >>> from pydaf.sparse import SparseMatrixCSC
        >>> m = SparseMatrixCSC((2, 2), np.array([1, 2, 2]), np.array([2]), np.array([3.0]))
        >>> float(reduce_all(m, "mean")), float(reduce_all(m, "var"))
        (0.75, 1.6875)
    """
    matrix = _as_matrix(matrix)
    record = _statistic(statistic)
    options = Options(eps, p)
    if isinstance(matrix, np.ndarray):
        if matrix.size == 0 or 1 in matrix.shape:
            return record.of_vector(matrix.reshape(-1), options)
        # The order of the values does not matter here: a row-major matrix is reduced as its (column-major) transpose.
        matrix = matrix.T if matrix.flags.c_contiguous and not matrix.flags.f_contiguous else np.asfortranarray(matrix)
    elif matrix.shape[0] * matrix.shape[1] == 0:
        return record.of_vector(np.zeros(0, dtype=matrix.nzval.dtype), options)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return record.of_all(matrix, options)


def reduce_vector(values: np.ndarray, statistic: str, *, eps: float = 0.0, p: float | None = None) -> Any:
    """One value for a whole vector, as a numpy scalar (same statistics and types as :func:`reduce_columns`; an
    empty vector sums to zero and has a NaN anything else).

    A single vector is reduced by numpy (memory-bound; in chunks where a temporary would be as large as the vector).

    Example:
        >>> float(reduce_vector(np.array([1, 2, 3, 10]), "median"))
        2.5
        >>> reduce_vector(np.array([200, 100], np.uint8), "sum")
        np.uint64(300)
    """
    values = np.asarray(values)
    if values.ndim != 1:
        raise ValueError(f"not a vector: an array of shape {values.shape}")
    record = _statistic(statistic)
    if values.shape[0] == 0 and record.name != "sum":
        return np.float64(np.nan)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return record.of_vector(values, Options(eps, p))


def reduce_grouped_vector(values: np.ndarray, statistic: str, groups: np.ndarray, n_groups: int, *,
                          eps: float = 0.0, p: float | None = None) -> np.ndarray:
    """One value per group of a vector (``groups[i]``: the 0-based group of ``values[i]``, -1 to ignore it).

    Example:
        >>> reduce_grouped_vector(np.array([1.0, 2.0, 4.0]), "mean", np.array([0, 1, 0]), 2).tolist()
        [2.5, 2.0]
    """
    return reduce_grouped_rows(np.asarray(values).reshape((-1, 1)), statistic, groups, n_groups,
                               eps=eps, p=p)[:, 0]


def column_sums(matrix: Any) -> np.ndarray:
    """The sum of each column (``int64``, ``uint64`` or ``float64``), e.g. of a mapped ``get_stored_matrix``.

    Example:
        >>> column_sums(np.array([[1, 2], [3, 4]], np.uint8, order="F")).tolist()
        [4, 6]
    """
    return reduce_columns(matrix, "sum")


def row_sums(matrix: Any) -> np.ndarray:
    """The sum of each row (``int64``, ``uint64`` or ``float64``); for CSC, without transposing it.

    Example:
        >>> from pydaf.sparse import SparseMatrixCSC
        >>> m = SparseMatrixCSC((2, 2), np.array([1, 2, 4]), np.array([1, 1, 2]), np.array([1.5, 2.0, 3.0]))
        >>> row_sums(m).tolist()
        [3.5, 3.0]
    """
    return reduce_rows(matrix, "sum")


def column_means(matrix: Any) -> np.ndarray:
    """The mean of each column (``float64``; the implicit zeros of a sparse matrix count).

    Example:
        >>> from pydaf.sparse import SparseMatrixCSC
        >>> m = SparseMatrixCSC((4, 1), np.array([1, 2]), np.array([3]), np.array([8], np.int32))
        >>> column_means(m).tolist()
        [2.0]
    """
    return reduce_columns(matrix, "mean")


def row_means(matrix: Any) -> np.ndarray:
    """The mean of each row (``float64``).

    Example:
        >>> row_means(np.array([[1, 2], [3, 5]], order="F")).tolist()
        [1.5, 4.0]
    """
    return reduce_rows(matrix, "mean")


# Input normalization.


def _as_matrix(matrix: Any) -> Matrix:
    """A 1-based CSC (such as a :class:`~pydaf.sparse.SparseMatrixCSC`: anything with its arrays) or a 2-D numpy array
    (scipy sparse matrices are converted to 1-based CSC)."""
    if not isinstance(matrix, np.ndarray):
        if hasattr(matrix, "colptr"):  # a 1-based CSC: its arrays are all the reductions use
            return matrix
        if hasattr(matrix, "tocsc") and hasattr(matrix, "nnz"):
            return PlainCsc(*from_scipy(matrix))
    array = np.asarray(matrix)
    if array.ndim != 2:
        raise ValueError(f"not a matrix: an array of shape {array.shape}")
    return array


def _numeric_view(values: np.ndarray) -> np.ndarray:
    """Bool values as ``uint8`` (a zero-copy view), so kernels only ever see numbers."""
    if values.dtype == np.bool_:
        return values.view(np.uint8) if values.flags.c_contiguous or values.flags.f_contiguous \
            else values.astype(np.uint8)
    return values


def _read_only_view(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view


def _kernel_values(values: np.ndarray) -> np.ndarray:
    """Values as a kernel takes them: numbers (Bool as ``uint8``) in a read-only view, so writable and read-only
    (mapped) inputs share one compiled specialization."""
    return _read_only_view(_numeric_view(values))


def _kernel_csc(matrix: CscArrays) -> PlainCsc:
    """A CSC matrix as kernels take it (:func:`_kernel_indices`, :func:`_kernel_values`)."""
    return PlainCsc(matrix.shape, _kernel_indices(matrix.colptr), _kernel_indices(matrix.rowval),
                    _kernel_values(matrix.nzval))


def _kernel_indices(indices: np.ndarray) -> np.ndarray:
    """1-based indices as a kernel takes them: a read-only view as ``uint32`` (32-bit; valid indices are positive, so
    an ``int32`` reads the same) or ``int64`` (64-bit; no index reaches 2**63), so all index types share two compiled
    specializations. Other sizes are rare and converted."""
    if indices.dtype.itemsize == 4 and indices.dtype.kind in "iu":
        return _read_only_view(indices.view(np.uint32))
    if indices.dtype.itemsize == 8 and indices.dtype.kind in "iu":
        return _read_only_view(indices.view(np.int64))
    return _read_only_view(indices.astype(np.int64))


def _kernel_rows(matrix: CscArrays, needed: bool) -> np.ndarray:
    """``rowval`` as a kernel takes it or, when the pass does not need it (per-column targets), an empty array of the
    same kernel type: a ``rowval`` not read yet (a :class:`~pydaf.sparse.DeferredArray`) is then never read."""
    if needed:
        return _kernel_indices(matrix.rowval)
    deferred = getattr(matrix, "rowval_or_deferred", None)
    rowval = matrix.rowval if deferred is None else deferred()
    return _kernel_indices(np.zeros(0, dtype=rowval.dtype))


def _sum_dtype(dtype: np.dtype) -> np.dtype:
    """The accumulation type of sums: ``int64`` for signed and Bool, ``uint64`` for unsigned, ``float64`` for floats
    (so a kernel never mixes signed and unsigned 64-bit arithmetic)."""
    if dtype.kind == "u":
        return np.dtype(np.uint64)
    if dtype.kind in "ib":
        return np.dtype(np.int64)
    return np.dtype(np.float64)


def _extreme_identity(dtype: np.dtype, is_max: bool) -> Any:
    if dtype.kind == "f":
        return -np.inf if is_max else np.inf
    info = np.iinfo(dtype)
    return info.min if is_max else info.max


def _is_small(matrix: Matrix) -> bool:
    size = matrix.size if isinstance(matrix, np.ndarray) else matrix.nnz
    return size < REDUCE_NUMBA_MIN_ENTRIES


def _work(matrix: Matrix) -> int:
    return matrix.size if isinstance(matrix, np.ndarray) else matrix.nnz


def _matrix_values_dtype(matrix: Matrix) -> np.dtype:
    return matrix.dtype if isinstance(matrix, np.ndarray) else matrix.nzval.dtype


@cache
def _csc_kernels() -> ModuleType:
    """The sparse kernels (:mod:`._csc`): importing them imports numba, so only a large input does."""
    return importlib.import_module(f"{__package__}._csc")


@cache
def _dense_kernels() -> ModuleType:
    """The dense kernels (:mod:`._dense`): importing them imports numba, so only a large input does."""
    return importlib.import_module(f"{__package__}._dense")


# The target space of a direction.


class _Targets:
    """Where each value of a matrix goes in a reduction, and how many values (zeros included) each target gets."""

    def __init__(self, shape: tuple[int, int], direction: Direction, groups: np.ndarray | None,
                 n_groups: int) -> None:
        n_rows, n_columns = shape
        self.direction = direction
        self.n_rows, self.n_columns = n_rows, n_columns
        self.n_groups = n_groups
        if direction is Direction.COLUMNS:
            self.n_targets = n_columns
            self.totals = np.full(n_columns, n_rows, dtype=np.int64)
        elif direction is Direction.ROWS:
            self.n_targets = n_rows
            self.totals = np.full(n_rows, n_columns, dtype=np.int64)
        else:
            assert groups is not None
            self.groups = np.asarray(groups, dtype=np.int64)
            expected = n_rows if direction is Direction.GROUPED_ROWS else n_columns
            if self.groups.shape != (expected,):
                raise ValueError(f"groups of length {self.groups.shape[0]} for {expected} "
                                 f"{'rows' if direction is Direction.GROUPED_ROWS else 'columns'}")
            if self.groups.shape[0] and int(self.groups.max()) >= n_groups:
                raise ValueError(f"group index {int(self.groups.max())} for {n_groups} groups")
            sizes = np.bincount(self.groups[self.groups >= 0], minlength=n_groups).astype(np.int64)
            self.n_targets = n_groups * (n_columns if direction is Direction.GROUPED_ROWS else n_rows)
            # Targets are the column-major positions of the (n_groups x n_columns) or (n_rows x n_groups) result.
            self.totals = np.tile(sizes, n_columns) if direction is Direction.GROUPED_ROWS \
                else np.repeat(sizes, n_rows)

    def shape_result(self, values: np.ndarray) -> np.ndarray:
        if self.direction is Direction.GROUPED_ROWS:
            return values.reshape((self.n_groups, self.n_columns), order="F")
        if self.direction is Direction.GROUPED_COLUMNS:
            return values.reshape((self.n_rows, self.n_groups), order="F")
        return values

    def entry_targets(self, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """The target of each (row, column) entry (-1: skipped)."""
        if self.direction is Direction.COLUMNS:
            return columns
        if self.direction is Direction.ROWS:
            return rows
        if self.direction is Direction.GROUPED_ROWS:
            group = self.groups[rows]
            return np.where(group >= 0, group + columns * self.n_groups, -1)
        group = self.groups[columns]
        return np.where(group >= 0, rows + group * self.n_rows, -1)

    def kernel_maps(self) -> tuple[int, np.ndarray, np.ndarray]:
        """``row_mode``, ``row_map`` and ``col_map`` of the kernels (see :data:`._shared.PER_COLUMN`)."""
        no_map = _kernel_indices(np.zeros(0, dtype=np.int64))
        if self.direction is Direction.COLUMNS:
            return _PER_COLUMN, no_map, np.arange(self.n_columns, dtype=np.int64)
        if self.direction is Direction.ROWS:
            return _PER_ROW, no_map, np.zeros(self.n_columns, dtype=np.int64)
        if self.direction is Direction.GROUPED_ROWS:
            return _PER_GROUP_OF_ROWS, _kernel_indices(self.groups), \
                np.arange(self.n_columns, dtype=np.int64) * self.n_groups
        return _PER_ROW, no_map, np.where(self.groups >= 0, self.groups * self.n_rows, -1)


# The same values as :mod:`._shared` (which imports numba, so it is not imported here).
_PER_COLUMN, _PER_ROW, _PER_GROUP_OF_ROWS = 0, 1, 2


# Accumulation: one pass over the values, into one accumulator per target.


class Accumulation(enum.Enum):
    """What one pass accumulates per target."""

    SUM = "sum"
    """The sum (in :func:`_sum_dtype`)."""
    SQUARES = "squares"
    """The sum of the squared deviations from each target's center (``float64``)."""
    LOGS = "logs"
    """The sum of ``log(value + eps)`` (``float64``)."""
    MAX = "max"
    """The largest value (input type; NaN propagates)."""
    MIN = "min"
    """The smallest value (input type; NaN propagates)."""


@dataclass(frozen=True)
class _Pass:
    """One accumulation pass: the kernels' inputs and where they write."""

    matrix: Matrix
    targets: _Targets
    accumulation: Accumulation
    eps: float
    centers: np.ndarray
    row_mode: int
    row_map: np.ndarray
    col_map: np.ndarray

    def out_dtype(self) -> np.dtype:
        dtype = _matrix_values_dtype(self.matrix)
        if self.accumulation is Accumulation.SUM:
            return _sum_dtype(dtype)
        if self.accumulation in (Accumulation.SQUARES, Accumulation.LOGS):
            return np.dtype(np.float64)
        return np.dtype(np.uint8) if dtype == np.bool_ else dtype

    def initial(self) -> Any:
        if self.accumulation in (Accumulation.MAX, Accumulation.MIN):
            return _extreme_identity(self.out_dtype(), self.accumulation is Accumulation.MAX)
        return 0

    def log_type(self) -> np.dtype:
        """The type logarithms are computed in, as Julia's ``geomean``: ``Float32`` values with no ``eps`` in
        ``Float32`` (numpy's ``Float32`` ``log`` is also 4x faster), everything else in ``Float64`` (Julia adds the
        ``Float64`` eps first)."""
        is_float32 = _matrix_values_dtype(self.matrix) == np.float32
        return np.dtype(np.float32) if is_float32 and self.eps == 0 else np.dtype(np.float64)


def _accumulate(matrix: Matrix, targets: _Targets, accumulation: Accumulation, *, eps: float = 0.0,
                centers: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per target: the :class:`Accumulation` of its values (MAX/MIN: the identity when it has no stored value), and
    the number of its stored values (the totals, for dense matrices)."""
    row_mode, row_map, col_map = targets.kernel_maps()
    work = _Pass(matrix, targets, accumulation, float(eps),
                 np.zeros(0, dtype=np.float64) if centers is None else np.ascontiguousarray(centers, np.float64),
                 row_mode, row_map, col_map)
    if _is_small(matrix):
        return _accumulate_small(work)
    if not isinstance(matrix, np.ndarray):
        return _accumulate_csc(work)
    return _accumulate_dense(work), targets.totals


def _entries(matrix: Matrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The 0-based rows, columns and values of the stored entries of a small matrix (every entry of a dense one)."""
    n_rows, n_columns = matrix.shape
    if not isinstance(matrix, np.ndarray):
        return matrix.rowval.astype(np.int64) - 1, entry_columns(matrix.colptr), np.asarray(matrix.nzval)
    rows = np.tile(np.arange(n_rows, dtype=np.int64), n_columns)
    columns = np.repeat(np.arange(n_columns, dtype=np.int64), n_rows)
    return rows, columns, np.asarray(matrix).ravel(order="F")


#: How the small (numpy) path accumulates: the ufunc whose ``.at`` gathers into the targets, and the value each entry
#: contributes (from its values, its targets, the pass).
_SMALL: dict[Accumulation, tuple[np.ufunc, Callable[[np.ndarray, np.ndarray, _Pass], np.ndarray]]] = {
    Accumulation.SUM: (np.add, lambda values, _targets, work: values.astype(work.out_dtype())),
    Accumulation.SQUARES: (np.add, lambda values, targets, work: (values.astype(np.float64)
                                                                  - work.centers[targets]) ** 2),
    Accumulation.LOGS: (np.add, lambda values, _targets, work: np.log(values.astype(np.float64) + work.eps)),
    Accumulation.MAX: (np.maximum, lambda values, _targets, _work: values),
    Accumulation.MIN: (np.minimum, lambda values, _targets, _work: values),
}


def _accumulate_small(work: _Pass) -> tuple[np.ndarray, np.ndarray]:
    rows, columns, values = _entries(work.matrix)
    values = _numeric_view(values)
    targets = work.targets
    entry_targets = targets.entry_targets(rows, columns)
    if targets.direction.is_grouped:
        kept = entry_targets >= 0
        entry_targets, values = entry_targets[kept], values[kept]
    out = np.full(targets.n_targets, work.initial(), dtype=work.out_dtype())
    ufunc, contribution = _SMALL[work.accumulation]
    ufunc.at(out, entry_targets, contribution(values, entry_targets, work))
    if not isinstance(work.matrix, np.ndarray):
        return out, np.bincount(entry_targets, minlength=targets.n_targets).astype(np.int64)
    return out, targets.totals


# Sparse (CSC) accumulation.


def _chunk_bounds(colptr: np.ndarray, n_chunks: int) -> np.ndarray:
    """Split the columns into ``n_chunks`` runs holding about the same number of stored entries."""
    n_columns = colptr.shape[0] - 1
    nnz = int(colptr[-1]) - 1
    n_chunks = max(1, min(n_chunks, n_columns))
    wanted = np.linspace(1, nnz + 1, n_chunks + 1)
    bounds = np.searchsorted(colptr, wanted, side="left").astype(np.int64)
    bounds[0], bounds[-1] = 0, n_columns
    return np.maximum.accumulate(np.minimum(bounds, n_columns))


@dataclass
class _CscChunks:
    """How a CSC pass is split: chunk ``c`` is the columns ``col_order[bounds[c]:bounds[c + 1]]``; the chunks write
    into one shared buffer when their targets are disjoint, else each into its own."""

    col_order: np.ndarray
    bounds: np.ndarray
    shared: bool

    @property
    def n_chunks(self) -> int:
        return self.bounds.shape[0] - 1

    @property
    def n_buffers(self) -> int:
        return 1 if self.shared else self.n_chunks

    @staticmethod
    def of(work: _Pass) -> _CscChunks:
        matrix, targets = work.matrix, work.targets
        assert not isinstance(matrix, np.ndarray)
        n_threads = threads_for(matrix.nnz)
        identity = np.arange(targets.n_columns, dtype=np.int64)
        if targets.direction in (Direction.COLUMNS, Direction.GROUPED_ROWS):
            # Disjoint targets per column: several chunks per thread balance uneven columns.
            return _CscChunks(identity, _chunk_bounds(matrix.colptr, 4 * n_threads if n_threads > 1 else 1), True)
        buffer_bytes = max(1, targets.n_targets * (work.out_dtype().itemsize + 8))
        if targets.direction is Direction.ROWS:
            n_chunks = min(n_threads, max(1, _PRIVATE_BUFFERS_LIMIT // buffer_bytes))
            return _CscChunks(identity, _chunk_bounds(matrix.colptr, n_chunks), n_chunks == 1)
        if n_threads * buffer_bytes <= _PRIVATE_BUFFERS_LIMIT:
            return _CscChunks(identity, _chunk_bounds(matrix.colptr, n_threads), n_threads == 1)
        # Too many targets for a buffer per thread: one group of columns per chunk, all into one buffer.
        order = np.argsort(targets.groups, kind="stable").astype(np.int64)
        sorted_groups = targets.groups[order]
        kept = sorted_groups >= 0
        return _CscChunks(order[kept], np.searchsorted(sorted_groups[kept], np.arange(targets.n_groups + 1))
                          .astype(np.int64), True)


def _accumulate_csc(work: _Pass) -> tuple[np.ndarray, np.ndarray]:
    matrix, targets, accumulation = work.matrix, work.targets, work.accumulation
    assert not isinstance(matrix, np.ndarray)
    chunks = _CscChunks.of(work)
    out_dtype = work.out_dtype()
    out = np.full((chunks.n_buffers, targets.n_targets), work.initial(), dtype=out_dtype)
    counting = accumulation is not Accumulation.SUM and targets.direction is not Direction.COLUMNS
    counts = np.zeros((chunks.n_buffers, targets.n_targets if counting else 0), dtype=np.int64)
    csc = _csc_kernels()
    colptr, rowval, values = (_kernel_indices(matrix.colptr), _kernel_rows(matrix, work.row_mode != _PER_COLUMN),
                              _kernel_values(matrix.nzval))
    maps = (work.row_mode, work.row_map, chunks.col_order, work.col_map)

    def run_chunks(first: int, last: int, bounds: np.ndarray = chunks.bounds, shared: bool = chunks.shared,
                   out: np.ndarray = out, counts: np.ndarray = counts) -> None:
        if accumulation is Accumulation.SUM:
            csc.sums(first, last, colptr, rowval, values, 0, *maps, bounds, shared, out, counts)
        elif accumulation is Accumulation.SQUARES:
            csc.squared_deviations(first, last, colptr, rowval, values, 0, *maps, bounds, shared, work.centers, out,
                                   counts)
        elif accumulation is Accumulation.LOGS:
            for chunk in range(first, last):
                _csc_chunk_logs(work, chunks, chunk, colptr, rowval, out, counts)
        else:
            csc.extremes(first, last, colptr, rowval, values, *maps, bounds, shared, accumulation is Accumulation.MAX,
                         out, counts)

    if accumulation is not Accumulation.LOGS and np.array_equal(chunks.col_order, np.arange(targets.n_columns)) \
            and _streamed(matrix):
        def run_streamed(first: int, last: int) -> None:  # (each chunk's columns a piece at a time: see _streamed)
            for chunk in range(first, last):
                buffer = slice(0, 1) if chunks.shared else slice(chunk, chunk + 1)
                _in_pieces(matrix, int(chunks.bounds[chunk]), int(chunks.bounds[chunk + 1]),
                           lambda start, stop, buffer=buffer: run_chunks(  # type: ignore[misc]
                               0, 1, np.array([start, stop], dtype=np.int64), True, out[buffer], counts[buffer]),
                           rows=work.row_mode != _PER_COLUMN)

        run_ranges(run_streamed, even_bounds(chunks.n_chunks, threads_for(matrix.nnz)))
    else:
        run_ranges(run_chunks, even_bounds(chunks.n_chunks, threads_for(matrix.nnz)))
    if chunks.n_buffers == 1:
        result = out[0]
    elif accumulation in (Accumulation.MAX, Accumulation.MIN):
        result = out.max(axis=0) if accumulation is Accumulation.MAX else out.min(axis=0)
    else:
        result = out.sum(axis=0, dtype=out_dtype)
    if counting:
        stored = counts[0] if chunks.n_buffers == 1 else counts.sum(axis=0)
    elif targets.direction is Direction.COLUMNS:
        stored = np.diff(matrix.colptr.astype(np.int64))
    else:
        stored = np.zeros(0, dtype=np.int64)  # Not needed for sums.
    return result, stored


def _csc_chunk_logs(work: _Pass, chunks: _CscChunks, chunk: int, colptr: np.ndarray, rowval: np.ndarray,
                    out: np.ndarray, counts: np.ndarray) -> None:
    """Accumulate ``log(value + eps)`` of one chunk: numpy computes the logarithms of a block of columns (SIMD, in
    cache), then the sums kernel adds them up."""
    csc = _csc_kernels()
    assert not isinstance(work.matrix, np.ndarray)
    nzval = np.asarray(work.matrix.nzval)
    log_type = work.log_type()
    eps = log_type.type(work.eps)
    buffer = slice(0, 1) if chunks.shared else slice(chunk, chunk + 1)
    first, last = int(chunks.bounds[chunk]), int(chunks.bounds[chunk + 1])
    columns = chunks.col_order[first:last]
    starts = np.asarray(work.matrix.colptr, dtype=np.int64)[columns] - 1
    stops = np.asarray(work.matrix.colptr, dtype=np.int64)[columns + 1] - 1
    if last - first > 1 and np.array_equal(starts[1:], stops[:-1]):
        # Consecutive in storage: blocks of whole columns of about _TRANSFORM_BLOCK entries (at least one column).
        wanted = np.arange(int(starts[0]), int(stops[-1]), _TRANSFORM_BLOCK)
        cuts = np.unique(np.concatenate([np.searchsorted(starts, wanted, side="right") - 1, [last - first]]))
        cuts = cuts[cuts > 0] if cuts[0] == 0 else cuts
        blocks: Iterable[tuple[int, int]] = zip([0, *cuts[:-1].tolist()], cuts.tolist(), strict=True)
    else:
        blocks = ((index, index + 1) for index in range(last - first))
    for block_first, block_last in blocks:
        start, stop = int(starts[block_first]), int(stops[block_last - 1])
        logs = np.add(nzval[start:stop], eps, dtype=log_type)
        np.log(logs, out=logs)
        csc.sums(0, 1, colptr, rowval, logs, start, work.row_mode, work.row_map, chunks.col_order, work.col_map,
                 np.array([first + block_first, first + block_last], dtype=np.int64), True, out[buffer],
                 counts[buffer])


# Dense accumulation.


def _accumulate_dense(work: _Pass) -> np.ndarray:
    matrix, targets, accumulation = work.matrix, work.targets, work.accumulation
    assert isinstance(matrix, np.ndarray)
    out = np.full(targets.n_targets, work.initial(), dtype=work.out_dtype())
    dense = _dense_kernels()
    values = _kernel_values(matrix)
    n_rows, n_columns = matrix.shape
    by_rows = work.row_mode == _PER_ROW
    n_threads = threads_for(matrix.size)

    def rectangle(row0: int, col0: int, height: int, width: int, source: np.ndarray, source_row0: int,
                  source_col0: int) -> None:
        maps = (work.row_mode, work.row_map[row0:row0 + height] if work.row_map.shape[0] else work.row_map,
                work.col_map[col0:col0 + width], row0, _ROW_BLOCK)
        if accumulation in (Accumulation.SUM, Accumulation.LOGS):
            dense.sums(source, source_row0, source_col0, height, width, *maps, out)
        elif accumulation is Accumulation.SQUARES:
            dense.squared_deviations(source, source_row0, source_col0, height, width, *maps, work.centers, out)
        else:
            dense.extremes(source, source_row0, source_col0, height, width, *maps,
                           accumulation is Accumulation.MAX, out)

    def run(first: int, last: int) -> None:
        # Rows (per row, grouped columns) or columns (per column, grouped rows): disjoint targets per range.
        row0, height = (first, last - first) if by_rows else (0, n_rows)
        col0, width = (0, n_columns) if by_rows else (first, last - first)
        if accumulation is not Accumulation.LOGS:
            rectangle(row0, col0, height, width, values, row0, col0)
            return
        for block_row0, block_col0, block_height, block_width in _blocks(row0, col0, height, width, by_rows):
            logs = np.add(values[block_row0:block_row0 + block_height, block_col0:block_col0 + block_width],
                          work.log_type().type(work.eps), dtype=work.log_type(), order="F")
            np.log(logs, out=logs)
            rectangle(block_row0, block_col0, block_height, block_width, logs, 0, 0)

    run_ranges(run, even_bounds(n_rows if by_rows else n_columns, n_threads))
    return out


def _blocks(row0: int, col0: int, height: int, width: int, by_rows: bool) -> Iterator[tuple[int, int, int, int]]:
    """Sub-rectangles of about :data:`_TRANSFORM_BLOCK` values: blocks of whole rows (``by_rows``) or of whole
    columns of the rectangle."""
    if by_rows:
        step = max(1, _TRANSFORM_BLOCK // max(width, 1))
        for start in range(row0, row0 + height, step):
            yield start, col0, min(step, row0 + height - start), width
    else:
        step = max(1, _TRANSFORM_BLOCK // max(height, 1))
        for start in range(col0, col0 + width, step):
            yield row0, start, height, min(step, col0 + width - start)


# Per-column kernels (one statistic per column directly, in SIMD-friendly loops).


def _streamed(matrix: Matrix) -> bool:
    """Whether a pass over ``matrix`` releases its input as it goes (:func:`_in_pieces`): a large matrix mapped from
    a file. Its pages are in the page cache anyway; released, they leave the process's resident set, which memory
    limits (a cluster's scheduler, a container) measure, and which would otherwise grow by the whole matrix."""
    values = matrix if isinstance(matrix, np.ndarray) else matrix.nzval
    return values.nbytes >= _STREAM_MIN_BYTES and mapped_region(values) is not None


def _in_pieces(matrix: Matrix, first: int, last: int, run: Callable[[int, int], None], *, rows: bool) -> None:
    """``run(start, stop)`` over the columns ``first:last`` in pieces of about :data:`_STREAM_PIECE_BYTES` of values,
    in order, releasing the mapped pages of each piece's values (and ``rowval``, if the pass read it: ``rows``) once
    it is done. (Only pages wholly inside a piece are released: a neighbouring piece's are left alone.)"""
    values = matrix if isinstance(matrix, np.ndarray) else matrix.nzval
    if isinstance(matrix, np.ndarray):
        per_piece = max(1, _STREAM_PIECE_BYTES // max(1, matrix.shape[0] * matrix.dtype.itemsize))
        cuts = [*range(first, last, per_piece), last]
        flat = matrix.reshape(-1, order="F") if matrix.flags.f_contiguous else None
    else:
        colptr = np.asarray(matrix.colptr)
        wanted = np.arange(int(colptr[first]), int(colptr[last]), max(1, _STREAM_PIECE_BYTES // values.itemsize))
        cuts = np.unique(np.concatenate([[first], np.searchsorted(colptr[first:last + 1], wanted, side="right") - 1
                                         + first, [last]])).tolist()
    for start, stop in itertools.pairwise(cuts):
        if stop <= start:
            continue
        run(start, stop)
        if isinstance(matrix, np.ndarray):
            if flat is not None:
                release_pages(flat[start * matrix.shape[0]:stop * matrix.shape[0]])
            continue
        entries = slice(int(matrix.colptr[start]) - 1, int(matrix.colptr[stop]) - 1)
        release_pages(values[entries])
        if rows:
            release_pages(matrix.rowval[entries])


def _column_ranges(matrix: Matrix) -> list[int]:
    """Column ranges for the threads, balanced by stored entries."""
    n_threads = threads_for(_work(matrix))
    if not isinstance(matrix, np.ndarray):
        return _chunk_bounds(matrix.colptr, n_threads).tolist()
    return even_bounds(matrix.shape[1], n_threads)


def _run_columns(matrix: Matrix, run: Callable[[int, int], None]) -> None:
    """``run(first, last)`` (a kernel over the columns ``first:last``, which reads no ``rowval``) over all the
    columns, on the threads; a large mapped matrix a piece at a time (:func:`_streamed`)."""
    if _streamed(matrix):
        run_ranges(lambda first, last: _in_pieces(matrix, first, last, run, rows=False), _column_ranges(matrix))
    else:
        run_ranges(run, _column_ranges(matrix))


def _column_variances(matrix: Matrix) -> tuple[np.ndarray, np.ndarray]:
    """The mean and the variance of each column, in one pass over memory."""
    n_columns = matrix.shape[1]
    means = np.empty(n_columns, dtype=np.float64)
    variances = np.empty(n_columns, dtype=np.float64)
    if not isinstance(matrix, np.ndarray):
        csc, n_rows = _csc_kernels(), matrix.shape[0]
        colptr, values = _kernel_indices(matrix.colptr), _kernel_values(matrix.nzval)
        _run_columns(matrix, lambda first, last: csc.column_variances(first, last, colptr, values, n_rows, means,
                                                                      variances))
    else:
        dense, values = _dense_kernels(), _kernel_values(matrix)
        _run_columns(matrix, lambda first, last: dense.column_variances(first, last, values, means, variances))
    return means, variances


def _cached_rows(matrix: np.ndarray) -> int:
    """Rows per block of a dense matrix such that the block stays in cache (a multiple of 8, at least 8)."""
    per_row = max(1, matrix.shape[1] * max(matrix.dtype.itemsize, 8))
    return max(8, min(_ROW_BLOCK, (_CACHED_BLOCK_BYTES // per_row) // 8 * 8))


def _row_ranges(n_rows: int, block: int, work: int) -> list[int]:
    """Row ranges for the threads, in whole blocks."""
    n_blocks = (n_rows + block - 1) // block
    return [min(bound * block, n_rows) for bound in even_bounds(n_blocks, threads_for(work))]


def _column_extremes(matrix: Matrix, is_max: bool) -> tuple[np.ndarray, np.ndarray]:
    """The largest (``is_max``) or smallest stored value of each column (the identity if none; NaN if it has one),
    and the number of stored values."""
    values = _kernel_values(matrix if isinstance(matrix, np.ndarray) else matrix.nzval)
    dtype = values.dtype
    if dtype == np.uint64:
        # Keys are signed 64-bit integers; UInt64 goes the general way.
        targets = _Targets(matrix.shape, Direction.COLUMNS, None, 0)
        return _accumulate(matrix, targets, Accumulation.MAX if is_max else Accumulation.MIN)
    is_float = dtype.kind == "f"
    bits = dtype.itemsize * 8
    key_type = np.dtype(f"int{bits}") if is_float else dtype
    keys = values.view(key_type) if is_float else values
    identity = np.array([_extreme_identity(dtype, is_max)], dtype=dtype)
    initial = _ordered_keys(identity.view(key_type))[0] if is_float else int(identity[0])
    n_columns = matrix.shape[1]
    out_keys = np.full(n_columns, initial, dtype=np.int64)
    nans = np.zeros(n_columns, dtype=np.int64)
    if not isinstance(matrix, np.ndarray):
        csc, colptr = _csc_kernels(), _kernel_indices(matrix.colptr)
        _run_columns(matrix, lambda first, last: csc.column_extremes(first, last, colptr, values, keys, is_float,
                                                                     bits - 1, (1 << (bits - 1)) - 1, is_max,
                                                                     out_keys, nans))
        stored = np.diff(matrix.colptr.astype(np.int64))
    else:
        dense = _dense_kernels()
        _run_columns(matrix, lambda first, last: dense.column_extremes(first, last, values, keys, is_float,
                                                                       bits - 1, (1 << (bits - 1)) - 1, is_max,
                                                                       out_keys, nans))
        stored = np.full(n_columns, matrix.shape[0], dtype=np.int64)
    if not is_float:
        return out_keys.astype(dtype), stored
    result = _ordered_keys(out_keys.astype(key_type)).view(dtype)
    result[nans > 0] = np.nan
    return result, stored


def _ordered_keys(bits: np.ndarray) -> np.ndarray:
    """:func:`._shared.ordered_key` in numpy (its own inverse)."""
    shift = bits.dtype.itemsize * 8 - 1
    return bits ^ ((bits >> shift) & bits.dtype.type((1 << shift) - 1))


# Statistics per target.


def _sums(matrix: Matrix, targets: _Targets, _options: Options) -> np.ndarray:
    return _accumulate(matrix, targets, Accumulation.SUM)[0]


def _means(matrix: Matrix, targets: _Targets, _options: Options) -> np.ndarray:
    return _accumulate(matrix, targets, Accumulation.SUM)[0].astype(np.float64) / targets.totals


def _variances(matrix: Matrix, targets: _Targets, options: Options) -> np.ndarray:
    """Uncorrected variances in two passes (the mean, then the squared deviations from it), as Julia computes them
    (one pass of sums of squares loses precision when the mean is large); per column (or per row of a dense matrix),
    both passes run on a cached block, so memory is read once."""
    if not _is_small(matrix) and matrix.shape[0] * matrix.shape[1] > 0 and targets.direction is Direction.COLUMNS:
        return _column_variances(matrix)[1]
    # (Per row, a block of rows small enough for the cache between the passes reads each column's part of it as a
    # run of a few cache lines, which streams slowly: two full passes are 3x faster.)
    totals = targets.totals
    means = _means(matrix, targets, options)
    squares, stored = _accumulate(matrix, targets, Accumulation.SQUARES, centers=np.nan_to_num(means))
    if not isinstance(matrix, np.ndarray):
        squares = squares + (totals - stored) * means * means
    return squares / totals


def _standard_deviations(matrix: Matrix, targets: _Targets, options: Options) -> np.ndarray:
    return np.sqrt(_variances(matrix, targets, options))


def _geomeans(matrix: Matrix, targets: _Targets, options: Options) -> np.ndarray:
    totals = targets.totals
    logs, stored = _accumulate(matrix, targets, Accumulation.LOGS, eps=options.eps)
    if not isinstance(matrix, np.ndarray):
        implicit = totals - stored
        logs = logs + np.where(implicit > 0, implicit * _log_of_zero(options.eps), 0.0)
    return np.exp(logs / totals) - options.eps


def _log_of_zero(eps: float) -> float:
    return math.log(eps) if eps > 0 else -math.inf


def _extremes(matrix: Matrix, targets: _Targets, is_max: bool) -> np.ndarray:
    if targets.direction is Direction.COLUMNS and not _is_small(matrix):
        extremes, stored = _column_extremes(matrix, is_max)
    else:
        extremes, stored = _accumulate(matrix, targets, Accumulation.MAX if is_max else Accumulation.MIN)
    if not isinstance(matrix, np.ndarray):
        combine = np.maximum if is_max else np.minimum
        extremes = np.where(stored < targets.totals, combine(extremes, extremes.dtype.type(0)), extremes)
    return extremes.astype(np.bool_) if _matrix_values_dtype(matrix) == np.bool_ else extremes


def _maxima(matrix: Matrix, targets: _Targets, _options: Options) -> np.ndarray:
    return _extremes(matrix, targets, True)


def _minima(matrix: Matrix, targets: _Targets, _options: Options) -> np.ndarray:
    return _extremes(matrix, targets, False)


# Order statistics (median, quantile).


def _quantile_position(n: int, p: float) -> tuple[int, float]:
    """Julia's ``Statistics.quantile`` (type 7): the 0-based index of ``a = v[j]`` and the weight ``γ`` of ``v[j+1]``,
    with ``aleph = fma(n, p, 1 - p)`` computed exactly (so results match Julia to the bit)."""
    m = 1.0 + p * (1.0 - 1.0 - 1.0)
    aleph = float(Fraction(n) * Fraction(p) + Fraction(m))
    j = min(max(math.trunc(aleph), 1), n - 1)
    gamma = min(max(aleph - j, 0.0), 1.0)
    return max(j - 1, 0), gamma


def _interpolate(low: np.ndarray, high: np.ndarray, gamma: np.ndarray | float) -> np.ndarray:
    finite = np.isfinite(low) & np.isfinite(high)
    return np.where(finite, low + gamma * (high - low), (1 - gamma) * low + gamma * high)


def _medians(matrix: Matrix, targets: _Targets, _options: Options) -> np.ndarray:
    return _order_statistics(matrix, targets, True, 0.5)


def _quantiles(matrix: Matrix, targets: _Targets, options: Options) -> np.ndarray:
    return _order_statistics(matrix, targets, False, options.quantile())


def _order_statistics(matrix: Matrix, targets: _Targets, is_median: bool, p: float) -> np.ndarray:
    direction = targets.direction
    if _is_small(matrix) or direction.is_grouped:
        return _order_statistics_numpy(matrix, targets, is_median, p)
    if direction is Direction.ROWS and not isinstance(matrix, np.ndarray):
        # Kernel-typed inputs, so every index and value type shares one compiled transpose.
        matrix = PlainCsc(*transposed(_kernel_csc(matrix)))
        direction = Direction.COLUMNS
    n_values = matrix.shape[0] if direction is Direction.COLUMNS else matrix.shape[1]
    first, gamma = _quantile_position(n_values, p) if n_values > 0 else (0, 0.0)
    out = np.empty(targets.n_targets, dtype=np.float64)
    if n_values == 0:
        out[:] = np.nan
    elif not isinstance(matrix, np.ndarray):
        csc, colptr, values = _csc_kernels(), _kernel_indices(matrix.colptr), _kernel_values(matrix.nzval)
        _run_columns(matrix, lambda start, stop: csc.column_quantiles(start, stop, colptr, values, n_values,
                                                                      is_median, first, gamma, out))
    elif direction is Direction.COLUMNS:
        dense, values = _dense_kernels(), _kernel_values(matrix)
        _run_columns(matrix, lambda start, stop: dense.column_quantiles(start, stop, values, is_median, first,
                                                                        gamma, out))
    else:
        dense, values = _dense_kernels(), _kernel_values(matrix)
        block = _cached_rows(matrix)
        run_ranges(lambda start, stop: dense.row_quantiles(start, stop, values, block, is_median, first, gamma, out),
                   _row_ranges(matrix.shape[0], block, matrix.size))
    return out


def _order_statistics_numpy(matrix: Matrix, targets: _Targets, is_median: bool, p: float) -> np.ndarray:
    """Order statistics of any direction: sort the (target, value) pairs, then pick each target's statistic, placing
    its implicit zeros between its negative and non-negative stored values."""
    rows, columns, values = _entries(matrix)
    entry_targets = targets.entry_targets(rows, columns)
    kept = entry_targets >= 0
    entry_targets, values = entry_targets[kept], _numeric_view(values)[kept].astype(np.float64)
    order = np.lexsort((values, entry_targets))
    values = values[order]
    n_targets = targets.n_targets
    stored = np.bincount(entry_targets, minlength=n_targets).astype(np.int64)
    starts = np.cumsum(stored) - stored
    sorted_targets = entry_targets[order]
    negatives = np.bincount(sorted_targets[values < 0], minlength=n_targets).astype(np.int64)
    nans = np.bincount(sorted_targets[np.isnan(values)], minlength=n_targets) > 0
    totals = targets.totals
    zeros = totals - stored

    def statistic_at(index: np.ndarray) -> np.ndarray:
        in_negatives = index < negatives
        in_zeros = ~in_negatives & (index < negatives + zeros)
        position = np.where(in_negatives, index, index - zeros)
        position = np.clip(starts + position, 0, max(values.shape[0] - 1, 0))
        picked = values[position] if values.shape[0] else np.zeros(n_targets)
        return np.where(in_zeros, 0.0, picked)

    valid = totals > 0
    if is_median:
        half = totals // 2
        odd = totals % 2 == 1
        low = statistic_at(np.where(odd, half, np.maximum(half - 1, 0)))
        high = statistic_at(half)
        result = np.where(odd, low, low / 2 + high / 2)
    else:
        first = np.zeros(n_targets, dtype=np.int64)
        gamma = np.zeros(n_targets, dtype=np.float64)
        for n in np.unique(totals[valid]):
            first_n, gamma_n = _quantile_position(int(n), p)
            first[totals == n], gamma[totals == n] = first_n, gamma_n
        low = statistic_at(first)
        high = statistic_at(np.minimum(first + 1, np.maximum(totals - 1, 0)))
        result = _interpolate(low, high, gamma)
    result = np.where(nans, np.nan, result)
    return np.where(valid, result, np.nan)


# The mode.


def _modes(matrix: Matrix, targets: _Targets, _options: Options) -> np.ndarray:
    """Julia's ``StatsBase.mode`` of each target: the most frequent value; of ties, the first to reach the top count
    (in the order of the rows of a column, or of the columns of a row)."""
    direction = targets.direction
    if direction.is_grouped:
        return _grouped_modes(matrix, targets)
    dtype = _matrix_values_dtype(matrix)
    if _is_small(matrix) or dtype.kind not in "biuf":
        if not isinstance(matrix, np.ndarray):
            columns = matrix if direction is Direction.COLUMNS else PlainCsc(*transposed(matrix))
            entries = [column_range(columns.colptr, column) for column in range(columns.shape[1])]
            return np.array([_sparse_mode(columns.shape[0], np.asarray(columns.rowval[entry]).astype(np.int64) - 1,
                                          np.asarray(columns.nzval[entry])) for entry in entries], dtype=dtype)
        vectors = matrix.T if direction is Direction.ROWS else matrix
        return np.array([_mode(vector) for vector in matrix_columns(vectors)], dtype=dtype)
    if direction is Direction.ROWS and not isinstance(matrix, np.ndarray):
        matrix = PlainCsc(*transposed(_kernel_csc(matrix)))
        direction = Direction.COLUMNS
    values = _kernel_values(matrix if isinstance(matrix, np.ndarray) else matrix.nzval)
    is_float = values.dtype.kind == "f"
    keys = values.view(np.dtype(f"int{values.dtype.itemsize * 8}")) if is_float else values
    zero = values.dtype.type(0)
    out = np.empty(targets.n_targets, dtype=values.dtype)
    if not isinstance(matrix, np.ndarray):
        csc, colptr, rowval = _csc_kernels(), _kernel_indices(matrix.colptr), _kernel_indices(matrix.rowval)
        n_rows = matrix.shape[0]
        run_ranges(lambda first, last: csc.column_modes(first, last, colptr, rowval, values, keys, is_float, n_rows,
                                                        zero, out), _column_ranges(matrix))
    elif direction is Direction.COLUMNS:
        dense = _dense_kernels()
        run_ranges(lambda first, last: dense.column_modes(first, last, values, keys, is_float, zero, out),
                   _column_ranges(matrix))
    else:
        dense, block = _dense_kernels(), _cached_rows(matrix)
        run_ranges(lambda first, last: dense.row_modes(first, last, values, keys, is_float, block, zero, out),
                   _row_ranges(matrix.shape[0], block, matrix.size))
    return out.view(dtype) if dtype == np.bool_ else out


def _grouped_modes(matrix: Matrix, targets: _Targets) -> np.ndarray:
    """The mode of each group: of the group's rows (columns) as a matrix of their own, by columns (rows)."""
    n_rows, n_columns = matrix.shape
    dtype = _matrix_values_dtype(matrix)
    by_rows = targets.direction is Direction.GROUPED_ROWS
    result = np.zeros((targets.n_groups, n_columns) if by_rows else (n_rows, targets.n_groups), dtype=dtype,
                      order="F")
    for group, members in enumerate(group_members(targets.groups, targets.n_groups)):
        if members.shape[0] == 0:
            continue
        part: PlainCsc | np.ndarray
        if not isinstance(matrix, np.ndarray):
            part = PlainCsc(*(select(matrix, rows=members) if by_rows else select(matrix, columns=members)))
        else:
            part = np.asfortranarray(matrix[members, :] if by_rows else matrix[:, members])
        direction = Direction.COLUMNS if by_rows else Direction.ROWS
        modes = _modes(part, _Targets(part.shape, direction, None, 0), Options())
        if by_rows:
            result[group, :] = modes
        else:
            result[:, group] = modes
    return result.reshape(-1, order="F")


def _mode(values: np.ndarray) -> Any:
    """Julia's ``StatsBase.mode``: the most frequent value; of ties, the one whose last counted occurrence comes
    first (the first to reach the top count)."""
    unique, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    top = int(counts.max())
    candidates = np.flatnonzero(counts == top)
    if candidates.shape[0] == 1:
        return unique[candidates[0]]
    order = np.argsort(inverse.reshape(-1), kind="stable")
    starts = np.cumsum(counts) - counts
    reached = order[starts[candidates] + top - 1]
    return unique[candidates[np.argmin(reached)]]


def _sparse_mode(n_values: int, positions: np.ndarray, values: np.ndarray) -> Any:
    """:func:`_mode` of ``n_values`` values that are zero except at the (increasing) ``positions``, without
    materializing the zeros."""
    nonzero = values != 0
    positions, values_nonzero = positions[nonzero], values[nonzero]
    zero = values.dtype.type(0)
    n_zeros = n_values - values_nonzero.shape[0]
    if values_nonzero.shape[0] == 0:
        return zero
    unique, inverse, counts = np.unique(values_nonzero, return_inverse=True, return_counts=True)
    top = int(counts.max())
    candidates = np.flatnonzero(counts == top)
    order = np.argsort(inverse.reshape(-1), kind="stable")
    starts = np.cumsum(counts) - counts
    reached = positions[order[starts[candidates] + top - 1]]
    best = int(np.argmin(reached))
    if n_zeros > top:
        return zero
    if n_zeros == top:
        # The position of the top-th zero: the top-th position not taken by a stored non-zero.
        free_before = positions - np.arange(positions.shape[0])
        index = int(np.searchsorted(free_before, top, side="left"))
        if top - 1 + index < reached[best]:
            return zero
    return unique[candidates[best]]


def _mode_of_all(matrix: Matrix, _options: Options) -> Any:
    if not isinstance(matrix, np.ndarray):
        n_rows, n_columns = matrix.shape
        positions = np.asarray(matrix.rowval).astype(np.int64) - 1 + entry_columns(matrix.colptr) * n_rows
        return _sparse_mode(n_rows * n_columns, positions, np.asarray(matrix.nzval))
    return _mode(np.asarray(matrix).ravel(order="F"))


def _mode_of_vector(values: np.ndarray, _options: Options) -> Any:
    return _mode(values)


# Statistics of a whole matrix.


def _column_targets(matrix: Matrix) -> _Targets:
    return _Targets(matrix.shape, Direction.COLUMNS, None, 0)


def _sum_of_all(matrix: Matrix, options: Options) -> Any:
    sums = _sums(matrix, _column_targets(matrix), options)
    return sums.sum(dtype=sums.dtype)


def _mean_of_all(matrix: Matrix, options: Options) -> Any:
    return np.float64(float(_sum_of_all(matrix, options)) / (matrix.shape[0] * matrix.shape[1]))


def _variance_of_all(matrix: Matrix, options: Options) -> Any:
    size = matrix.shape[0] * matrix.shape[1]
    mean = float(_mean_of_all(matrix, options))
    targets = _column_targets(matrix)
    squares, stored = _accumulate(matrix, targets, Accumulation.SQUARES, centers=np.full(matrix.shape[1], mean))
    total = float(squares.sum())
    if not isinstance(matrix, np.ndarray):
        total += float((targets.totals - stored).sum()) * mean * mean
    return np.float64(total / size)


def _std_of_all(matrix: Matrix, options: Options) -> Any:
    return np.sqrt(_variance_of_all(matrix, options))


def _geomean_of_all(matrix: Matrix, options: Options) -> Any:
    size = matrix.shape[0] * matrix.shape[1]
    logs = _accumulate(matrix, _column_targets(matrix), Accumulation.LOGS, eps=options.eps)[0]
    total_logs = float(logs.sum())
    if not isinstance(matrix, np.ndarray) and size > matrix.nnz:
        total_logs += (size - matrix.nnz) * _log_of_zero(options.eps)
    return np.float64(np.exp(total_logs / size) - options.eps)


def _max_of_all(matrix: Matrix, options: Options) -> Any:
    return _maxima(matrix, _column_targets(matrix), options).max()


def _min_of_all(matrix: Matrix, options: Options) -> Any:
    return _minima(matrix, _column_targets(matrix), options).min()


def _median_of_all(matrix: Matrix, _options: Options) -> Any:
    return _order_statistic_of_all(matrix, True, 0.5)


def _quantile_of_all(matrix: Matrix, options: Options) -> Any:
    return _order_statistic_of_all(matrix, False, options.quantile())


def _order_statistic_of_all(matrix: Matrix, is_median: bool, p: float) -> Any:
    if not isinstance(matrix, np.ndarray):
        values = _numeric_view(matrix.nzval)
        n_zeros = matrix.shape[0] * matrix.shape[1] - matrix.nnz
    else:
        values = _numeric_view(np.asarray(matrix)).ravel(order="K")
        n_zeros = 0
    return _order_statistic(values, n_zeros, is_median, p)


def _order_statistic(values: np.ndarray, n_zeros: int, is_median: bool, p: float) -> np.float64:
    """The median or ``p`` quantile of ``values`` and ``n_zeros`` more zeros, by selection (``np.partition``) of the
    one or two order statistics needed."""
    n = values.shape[0] + n_zeros
    if n == 0:
        return np.float64(np.nan)
    numbers = values.astype(np.float64)
    if np.isnan(numbers).any():
        return np.float64(np.nan)
    n_negative = int(np.count_nonzero(numbers < 0))
    if is_median:
        indices = [(n - 1) // 2, n // 2]
        gamma = 0.0
    else:
        first, gamma = _quantile_position(n, p)
        indices = [first, min(first + 1, n - 1)]
    stored = sorted({index if index < n_negative else index - n_zeros for index in indices
                     if index < n_negative or index >= n_negative + n_zeros})
    if stored:
        numbers.partition(stored)

    def at(index: int) -> float:
        if index < n_negative:
            return float(numbers[index])
        if index < n_negative + n_zeros:
            return 0.0
        return float(numbers[index - n_zeros])

    low, high = at(indices[0]), at(indices[1])
    if is_median:
        return np.float64(low if n % 2 == 1 else low / 2 + high / 2)
    return np.float64(_interpolate(np.array(low), np.array(high), gamma))


# Statistics of a vector (numpy: one memory-bound pass).


def _sum_of_vector(values: np.ndarray, _options: Options) -> Any:
    return _numeric_view(values).sum(dtype=_sum_dtype(values.dtype))


def _mean_of_vector(values: np.ndarray, _options: Options) -> Any:
    return np.float64(float(_numeric_view(values).sum(dtype=np.float64)) / values.shape[0])


def _chunked_total(values: np.ndarray, contribution: Callable[[np.ndarray], np.ndarray]) -> float:
    """The sum of ``contribution`` of the values as ``float64``, a chunk at a time."""
    numbers = _numeric_view(values)
    total = 0.0
    for first in range(0, numbers.shape[0], _VECTOR_CHUNK):
        total += float(contribution(numbers[first:first + _VECTOR_CHUNK].astype(np.float64)).sum())
    return total


def _variance_of_vector(values: np.ndarray, options: Options) -> Any:
    mean = float(_mean_of_vector(values, options))
    return np.float64(_chunked_total(values, lambda chunk: (chunk - mean) ** 2) / values.shape[0])


def _std_of_vector(values: np.ndarray, options: Options) -> Any:
    return np.float64(math.sqrt(_variance_of_vector(values, options)))


def _geomean_of_vector(values: np.ndarray, options: Options) -> Any:
    total = _chunked_total(values, lambda chunk: np.log(chunk + options.eps))
    return np.float64(np.exp(total / values.shape[0]) - options.eps)


def _max_of_vector(values: np.ndarray, _options: Options) -> Any:
    return values.dtype.type(_numeric_view(values).max())


def _min_of_vector(values: np.ndarray, _options: Options) -> Any:
    return values.dtype.type(_numeric_view(values).min())


def _median_of_vector(values: np.ndarray, _options: Options) -> Any:
    return _order_statistic(_numeric_view(values), 0, True, 0.5)


def _quantile_of_vector(values: np.ndarray, options: Options) -> Any:
    return _order_statistic(_numeric_view(values), 0, False, options.quantile())


#: The statistics, by name: how each reduces per target, a whole matrix, and a vector.
STATISTICS: dict[str, Statistic] = {statistic.name: statistic for statistic in (
    Statistic("sum", _sums, _sum_of_all, _sum_of_vector),
    Statistic("mean", _means, _mean_of_all, _mean_of_vector),
    Statistic("var", _variances, _variance_of_all, _variance_of_vector),
    Statistic("std", _standard_deviations, _std_of_all, _std_of_vector),
    Statistic("geomean", _geomeans, _geomean_of_all, _geomean_of_vector),
    Statistic("max", _maxima, _max_of_all, _max_of_vector),
    Statistic("min", _minima, _min_of_all, _min_of_vector),
    Statistic("median", _medians, _median_of_all, _median_of_vector),
    Statistic("quantile", _quantiles, _quantile_of_all, _quantile_of_vector),
    Statistic("mode", _modes, _mode_of_all, _mode_of_vector),
)}


# Helpers for generic (per column / row / group) implementations.


def group_members(groups: np.ndarray, n_groups: int) -> list[np.ndarray]:
    """The 0-based members of each group, in order (entries of group -1 are in none).

    Example:
        >>> [members.tolist() for members in group_members(np.array([1, -1, 0, 1]), 3)]
        [[2], [0, 3], []]
    """
    groups = np.asarray(groups, dtype=np.int64)
    order = np.argsort(groups, kind="stable")
    sorted_groups = groups[order]
    bounds = np.searchsorted(sorted_groups, np.arange(n_groups + 1))
    return [order[bounds[group]:bounds[group + 1]] for group in range(n_groups)]


def matrix_columns(matrix: Any) -> Iterator[np.ndarray]:
    """Each column of a matrix as a dense vector (sparse columns are densified one at a time).

    Example:
        >>> [column.tolist() for column in matrix_columns(np.array([[1, 2], [3, 4]], order="F"))]
        [[1, 3], [2, 4]]
    """
    matrix = _as_matrix(matrix)
    if not isinstance(matrix, np.ndarray):
        return (dense_column(matrix, column) for column in range(matrix.shape[1]))
    return (matrix[:, column] for column in range(matrix.shape[1]))


def matrix_rows(matrix: Any) -> Iterator[np.ndarray]:
    """Each row of a matrix as a dense vector (a sparse matrix is transposed once, then densified row by row).

    Example:
        >>> [row.tolist() for row in matrix_rows(np.array([[1, 2], [3, 4]], order="F"))]
        [[1, 2], [3, 4]]
    """
    matrix = _as_matrix(matrix)
    if not isinstance(matrix, np.ndarray):
        return matrix_columns(PlainCsc(*transposed(matrix)))
    return (matrix[row, :] for row in range(matrix.shape[0]))
