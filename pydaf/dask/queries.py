"""Daf queries evaluated on a dask cluster: :func:`query` (a lazy ``dask.array.Array``), :func:`get_np_query` and
:func:`get_query` (computed, in the forms of the data set's own ``get_np_query`` and ``get_query``).

How a query is split. The query is parsed in the client and an axis that survives in its result is chosen:

- ``@ r @ c :: m`` with element-wise steps (``%``, comparisons, lookups of entry names): the stored layout's columns
  axis (``c`` if ``(r, c)`` is stored, else ``r``);
- ``>- Op`` (one value per column) and ``-/ p >- Op`` keep the columns axis; ``>| Op`` (one value per row) and
  ``|/ p >| Op`` keep the rows axis: the kept axis is split where it is the columns of the layout the engine reads
  (the query's own if stored, else the flipped one); where it is that layout's rows, the reduced (or grouped) axis is
  split instead and the partials are combined (below);
- a vector query (``@ cell [ mask ] : donor : age % Abs``) splits its axis.

The split axis is cut into contiguous ranges of its entries. Each task carries the :class:`~pydaf.dask.DafSource`,
the query text and its range, opens the data set (:func:`~pydaf.dask.open_source`), views it with the split axis
restricted to the range (the data set chained with a ``MemoryDaf`` holding each entry's position, viewed with
``axes=[(axis, "@ axis [ position >= start & position < stop ]")]``; a worker makes the chain once per data set and
axis; a range of columns is a zero-copy slice of a mapped matrix) and evaluates the same query there with pydaf's
own engine. The pieces are concatenated along the split axis: the result is exactly (bitwise) the local
``daf.get_np_query(query)``. Masks on the split axis (``@ gene [ is_marker ]``) work through the view; the client
evaluates the split axis's own axis query to know how many entries each piece has. A mask of one axis that looks up
another axis of the query (``@ cell [ UMIs @ gene = G3 > 0 ] @ gene``: a piece holds only some genes) is evaluated
once by the client; the pieces mask the axis by its result, a Bool vector sent once to each worker (an eighth of a
byte per entry) and chained over the data set there.

Reductions that eliminate the split axis combine per-piece partials, computed by pydaf's reduction kernels:

- ``>> Op`` of a vector or a matrix (a scalar);
- ``>> Median`` and ``>> Quantile`` of a vector or matrix (selected by rounds, below);
- ``>> Mode`` of a vector or matrix (counted by rounds, below);
- ``/ p >> Op`` of a vector (each piece's groups and their partials, combined by group, in the engine's order,
  by its own code: sorted values, the order of categories recorded for an AnnData categorical, or the axis order with
  ``=@``; empty groups take the ``||`` default, or fail as locally);
- ``>| Op``, ``>- Op``, ``|/ p >| Op`` and ``-/ p >- Op`` ending a query whose kept axis is the rows of the layout
  the engine reads, if sparse, or dense and only stored flipped (a piece of the stored rows would read the whole
  matrix: a sparse one finds rows only by reading all its indices, a dense one reads a strided part of every column,
  then relays it out; a dense matrix in the query's own layout keeps pieces of its rows, bitwise exact): pieces of the
  reduced axis, its stored columns; each piece evaluates the matrix in its stored layout (its element-wise steps
  commute with the transposition) and the partials of each kept entry (per group: ``-/``, ``|/``), which are
  combined per kept entry (and group, in the engine's order as for ``/ p >> Op``).

``Sum``, ``Max``, ``Min`` and ``Count`` are exact (sums in the kernels' 64-bit accumulators, then cast to the result
type as the operation does); ``Mean`` (sums and counts) is exact for integer data; ``Var``, ``Std``, ``VarN`` and
``StdN`` (counts, means and squared deviations, Chan et al.'s combination) and the sums and means of float data
differ from the local result only by rounding: within a relative 1e-12 for Float64 results (about 1e-16 measured);
Float32 data is accumulated in Float64 either way, so a Float32 result differs by at most one Float32 rounding
(relative 6e-8). ``GeoMean`` combines sums of ``log(value + eps)`` and counts (as ``Mean``), with the logarithms in
the type the kernels would take them for the whole (``Float32`` for ``Float32`` data without eps and at least
``REDUCE_NUMBA_MIN_ENTRIES`` stored values, else ``Float64``): within the same rounding.

``>> Median`` and ``>> Quantile`` of a whole matrix or vector (not per group) are selected exactly, by rounds over the
pieces (:func:`_select`): each piece counts its values per bucket of 16 bits of their ordered integer keys within the
buckets holding the order statistics needed, until a bucket is small enough for the pieces to return its keys; a key
is its value bit for bit, so the result is the local one bitwise. :func:`get_np_query` runs one ``dask.compute`` per
round; :func:`query` is one task that submits the rounds' pieces from its worker (``distributed.worker_client``).
Per group of a vector (``/ p >> Median``), each piece returns its values and their groups, and the combination
selects per group with the kernels' own code (bitwise; it holds the vector, not the matrix it came from).

``>> Mode`` of a whole matrix or vector is counted by rounds over the pieces (:func:`_mode`): histograms of the
values' keys (as a selection's, with -0.0 and 0.0 one key and all NaNs one, as ``np.unique`` counts them) cut the
keys into batches of at most ``_MODE_BATCH`` values; a round per batch, each piece returns each distinct key of the
batch with its count and the position of its last occurrence in the whole (column-major), the client sums the counts
and keeps the batch's best (most frequent; of ties, the earliest last occurrence, as Julia's ``StatsBase.mode``), then
the best of the batches: the local result bitwise, except the sign of a zero result where a dense matrix holds both
-0.0 and 0.0 (the local one is its sort's pick: 0.0 here) and a NaN result among NaNs of several bit patterns
(``np.nan`` here). ``Mode`` per group of a vector (``/ p >> Mode``) is taken, as ``Median``, from each piece's values
and groups in the vector's order. ``>> Mode`` of strings combines each piece's distinct strings, with their counts
and last positions (one task holds the distinct strings).

Steps after a combined reduction (``>> Sum % Log``, ``/ type >> Mean > 3``, ``>| Max >= 40``, ``/ t >> Mean >> Max``)
apply to its result, which is small, by the engine itself (the result held by a ``MemoryDaf``). A group-by whose key
drops entries (``/ metacell ?? : type``) drops them from each piece's values by the key's entries.
One task evaluates the whole query on a worker (exactly the local engine's result) for what is not split: reductions
of the whole split axis that are not combined from pieces (user-defined ones that do not say how; a ``Mode`` of
strings per group), count matrices (``*``) and square slices (``@|``, ``@-``) of vectors, lookups whose values are
entries of the split axis itself (``=@ cell``, a property named ``cell``), a chain whose ``??`` drops entries outside
a group-by (their number is only known from the data), lookups after a reduction, and queries that do not start at an
axis (scalars, single entries). A user-defined reduction of the whole
that implements ``compute_partial`` and ``combine_partials`` (see :class:`~pydaf.queries.base.ReductionOperation`)
is combined from the pieces' partials. A one-task ``query`` has unknown (NaN) shape and an ``object`` dtype until
computed; a group-by's number of groups is unknown (NaN) unless they are the entries of an axis (``=@``). Sets of
names (``@ ?``, ``@ cell : ?``) are small: :func:`get_np_query`/:func:`get_query` evaluate them locally.

Errors in the query (syntax, an unknown property, an unsupported type) are raised in the client when the graph is
built: the client evaluates the query (or the parts of a group-by) on one entry of the split axis.
"""

from __future__ import annotations

import functools
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._os.maps import release_mapped_pages, release_pages
from ..composition.chains import chain_reader
from ..composition.views import VIEW_ALL_AXES, viewer
from ..core.readers import DafReader
from ..core.values import exact_cast
from ..errors import DafError, DafQueryError, DafValueError
from ..formats.memory import MemoryDaf
from ..kernels import reductions as kernels
from ..queries.base import EltwiseOperation, ReductionOperation
from ..queries.evaluator import QueryResult, query_result_dimensions
from ..queries.operations import Count, GeoMean, Max, Mean, Median, Min, Mode, Quantile, Std, StdN, Sum, Var, VarN
from ..queries.query import (
    AsAxis,
    Axis,
    BeginMask,
    BeginNegatedMask,
    ComparisonOperation,
    CountBy,
    EndMask,
    GroupBy,
    GroupColumnsBy,
    GroupRowsBy,
    IfMissing,
    IfNot,
    IsEqual,
    LookupMatrix,
    LookupVector,
    QuerySequence,
    ReduceToColumn,
    ReduceToRow,
    SquareColumnIs,
    SquareRowIs,
    as_query_sequence,
)
from ..queries.results import as_numpy, as_pandas, query_result
from ..queries.tokens import escape_value
from ..sparse import SparseMatrixCSC
from .sources import DafSource, local_reader, open_source, source_of

if TYPE_CHECKING:
    import dask.array

__all__ = ["get_np_query", "get_query", "query"]

#: The default size of a piece of a split query: about this many bytes of the stored data it reads.
DEFAULT_CHUNK_BYTES = 128 * 1024 * 1024

# The vector of each entry's position a piece's view restricts the split axis by (in a MemoryDaf chained over the
# data set).
_RANGE_POSITION = "__pydaf_dask_position__"

# How many (data set, axis) chains of pieces a process keeps.
_KEPT_RANGES = 8

# How many columns of a sparse matrix tell its density.
_SAMPLED_COLUMNS = 64

# Bytes per entry assumed for the split axis of a vector query (vectors are small: pieces are large).
_VECTOR_ENTRY_BYTES = 8

# The reductions combined from per-piece partials (exactly for Sum/Max/Min/Count).
_DECOMPOSABLE = (Sum, Max, Min, Count, Mean, Var, Std, VarN, StdN, GeoMean)

# The order statistics of a whole matrix or vector selected exactly by rounds over the pieces (``>> Median``).
_SELECTED = (Median, Quantile)

# The reductions of a vector per group combined from each piece's values and groups, by the kernels' own code in the
# vector's order (what no partial statistic gives: an order statistic, the first most frequent value).
_BY_VALUES = (Median, Quantile, Mode)

# Values a piece transforms at a time (logarithms, keys): its temporaries stay small whatever its size.
_BLOCK_ENTRIES = 1 << 20

# Bits of the values' ordered keys each round of a selection narrows by (a histogram of 65536 buckets).
_KEY_BITS = 16

# A selection's bucket holding at most this many values: the next round returns their keys, and ends.
_FEW_KEYS = 1 << 18


# The plan: how a query is split.


@dataclass
class _Plan:
    """How a query is evaluated: ``"split"`` (pieces along ``axis``, concatenated along result dimension ``dimension``),
    ``"reduce"`` / ``"group"`` / ``"rows"`` (``prefix`` split so, each piece's partials of ``reduction`` combined: to a
    scalar, by group, by row), ``"select"`` (``prefix`` split so, its median or quantile selected by rounds over the
    pieces), ``"mode"`` (``prefix`` split so, its mode counted by rounds over the pieces) or ``"one"`` (one task:
    ``reason``)."""

    kind: str
    dimensions: int
    axis: str | None = None
    axis_query: QuerySequence | None = None
    dimension: int = 0
    prefix: QuerySequence | None = None
    reduction: ReductionOperation | None = None
    reason: str = ""
    matrix: tuple[str, str, str] | None = None  # the rows axis, columns axis and name of a matrix lookup
    key_query: QuerySequence | None = None  # a group-by: each entry's group
    fallback: _Plan | None = None  # "rows", "grouped": the plan splitting the kept axis instead
    after: tuple = ()  # steps applied to the combined result (element-wise, comparisons, reductions)


def _axis_segment(operations: tuple, index: int) -> int | None:
    """The end of the axis query starting at ``index`` (``@ axis`` and its mask, if any), or ``None`` if none starts
    there (an ``@ axis = entry`` picks an entry, it is not an axis query)."""
    if index >= len(operations):
        return None
    operation = operations[index]
    if type(operation) is not Axis or operation.axis_name is None:
        return None
    end = index + 1
    if end < len(operations) and isinstance(operations[end], IsEqual):
        return None
    if end < len(operations) and isinstance(operations[end], BeginMask | BeginNegatedMask):
        while end < len(operations) and not isinstance(operations[end], EndMask):
            end += 1
        if end == len(operations):
            return None
        end += 1
    return end


def _names_in(operations: tuple) -> set[str]:
    """Every axis or property a query names (and the prefix before ``.`` of each property: ``type.manual`` names
    entries of ``type``)."""
    names: set[str] = set()
    for operation in operations:
        for attribute in ("axis_name", "property_name"):
            name = getattr(operation, attribute, None)
            if isinstance(name, str):
                names.add(name)
                names.add(name.split(".", 1)[0])
    return names


def _steps_after(rest: tuple) -> int | None:
    """Where the steps that follow a combined reduction begin in ``rest`` (after the reduction's own ``||``), or
    ``None`` if one of them reads the data set (a lookup): such steps apply to the combined result, which is small."""
    start = 0
    while start < len(rest) and isinstance(rest[start], IfMissing):
        start += 1
    steps = rest[start:]
    if all(isinstance(step, EltwiseOperation | ComparisonOperation | ReductionOperation | IfMissing) for step in steps):
        return start
    return None


# Why a query whose axes are looked up by its own masks is one task (unless the masks are evaluated first).
_LOOKED_UP = "the surviving axes are looked up by the query itself"


def _one(dimensions: int, reason: str) -> _Plan:
    return _Plan("one", dimensions, reason=reason)


def _plan(local: DafReader, sequence: QuerySequence) -> _Plan:
    """Choose how to evaluate ``sequence`` (see the module docstring)."""
    dimensions = query_result_dimensions(sequence)  # (also checks the query is valid)
    operations: tuple[Any, ...] = sequence.operations
    if dimensions < 0:
        return _one(dimensions, "a set of names")
    first_end = _axis_segment(operations, 0)
    if first_end is None:
        return _one(dimensions, "the query does not start at an axis")
    segments = [(0, first_end)]
    second_end = _axis_segment(operations, first_end)
    matrix_name = None
    if second_end is not None:
        if second_end >= len(operations) or type(operations[second_end]) is not LookupMatrix:
            return _one(dimensions, "an unusual phrase")
        segments.append((first_end, second_end))
        matrix_name = operations[second_end].property_name
        index = second_end + 1
    else:
        index = first_end
    axes: list[str | None] = [operations[start].axis_name for start, _ in segments]
    matrix = None if matrix_name is None else (str(axes[0]), str(axes[1]), matrix_name)
    # Each step of the query: how it changes the dimensions of what it works on (an axis, or None: groups).
    eliminated_at: int | None = None
    before_elimination: list[str | None] = []
    reduced_at: int | None = None  # a ``>|``, ``>-``, ``|/`` or ``-/`` of the matrix of both axes
    while index < len(operations):
        operation = operations[index]
        if isinstance(operation, SquareColumnIs | SquareRowIs):
            return _one(dimensions, "a square matrix slice (@| or @-)")
        if isinstance(operation, CountBy):
            return _one(dimensions, "a count matrix (*)")
        if isinstance(operation, IfNot) and operation.final_value is None and axes:
            return _one(dimensions, "?? drops entries (their number is only known from the data)")
        if isinstance(operation, ReduceToRow | ReduceToColumn):
            if len(axes) != 2:
                return _one(dimensions, "an unusual phrase")
            if None not in axes and reduced_at is None:
                reduced_at = index
            axes = [axes[1]] if isinstance(operation, ReduceToRow) else [axes[0]]
        elif isinstance(operation, GroupRowsBy | GroupColumnsBy | GroupBy):
            ends_with = {GroupRowsBy: ReduceToRow, GroupColumnsBy: ReduceToColumn, GroupBy: ReductionOperation}
            end = index + 1
            while end < len(operations) and not isinstance(operations[end], ends_with[type(operation)]):
                end += 1
            if end == len(operations):
                return _one(dimensions, "an unusual phrase")
            if isinstance(operation, GroupBy):
                if len(axes) != 1:
                    return _one(dimensions, "an unusual phrase")
                eliminated_at, before_elimination = index, list(axes)
                axes = [None]
            elif len(axes) != 2:
                return _one(dimensions, "an unusual phrase")
            else:
                if None not in axes and reduced_at is None:
                    reduced_at = index
                axes = [None, axes[1]] if isinstance(operation, GroupRowsBy) else [axes[0], None]
            index = end
        elif isinstance(operation, ReductionOperation):
            if axes and eliminated_at is None:
                eliminated_at, before_elimination = index, list(axes)
            axes = []
        elif isinstance(operation, Axis) and index + 1 < len(operations) \
                and isinstance(operations[index + 1], IsEqual):
            index += 1  # (a slice of a matrix as a property: ``:: m @ axis = entry``)
        elif not isinstance(operation, EltwiseOperation | ComparisonOperation | LookupVector | LookupMatrix | AsAxis
                            | IfMissing | IfNot | IsEqual):
            return _one(dimensions, "an unusual phrase")
        index += 1

    def splittable(candidates: list[str | None]) -> str | None:
        """The axis to split among the surviving ones (the stored layout's columns first), if any is safe."""
        named = [axis for axis in candidates if axis is not None]
        if len(named) != len(set(named)):
            return None  # (a square matrix: restricting the axis restricts both)
        if len(named) == 2 and matrix_name is not None:
            rows_axis, columns_axis = named
            if not local.has_matrix(rows_axis, columns_axis, matrix_name, relayout=False) \
                    and local.has_matrix(columns_axis, rows_axis, matrix_name, relayout=False):
                named = [rows_axis, columns_axis]
            else:
                named = [columns_axis, rows_axis]
        for axis in named:
            start = next(start for start, _ in segments if operations[start].axis_name == axis)
            others = operations[:start] + operations[start + 1:]
            if axis not in _names_in(others):
                return axis
        return None

    survivors = [axis for axis in axes if axis is not None]
    if survivors:
        split_axis = splittable(axes)
        if split_axis is None:
            fallback = _one(dimensions, _LOOKED_UP)
        else:
            fallback = _split_plan(dimensions, split_axis, axes.index(split_axis), operations, segments)
            fallback.matrix = matrix
        if reduced_at is not None and matrix is not None:
            plan = _stored_rows_plan(local, dimensions, operations, segments, matrix, reduced_at,
                                     lambda axis: splittable([axis]) == axis)
            if plan is not None:
                plan.fallback = fallback
                return plan
        return fallback
    if eliminated_at is None or not any(axis is not None for axis in before_elimination):
        return _one(dimensions, "no axis of the data set survives in the result")
    key_steps: tuple = ()
    if isinstance(operations[eliminated_at], GroupBy):
        closing = next(index for index in range(eliminated_at + 1, len(operations))
                       if isinstance(operations[index], ReductionOperation))
        key_steps = operations[eliminated_at + 1:closing]
        reduction, rest = operations[closing], operations[closing + 1:]
    else:
        reduction, rest = operations[eliminated_at], operations[eliminated_at + 1:]
    is_group = isinstance(operations[eliminated_at], GroupBy)
    selected = type(reduction) in _SELECTED and not is_group
    moded = type(reduction) is Mode and not is_group
    user_combined = reduction.combines_partials and not is_group
    if type(reduction) not in _DECOMPOSABLE and type(reduction) not in _BY_VALUES and not user_combined:
        return _one(dimensions, f"the reduction {reduction.operation_name()} is not combined from pieces")
    after_at = _steps_after(rest)
    if after_at is None:
        return _one(dimensions, "lookups after the reduction")
    after = rest[after_at:]
    split_axis = splittable(before_elimination)
    if split_axis is None:
        return _one(dimensions, _LOOKED_UP)
    plan = _split_plan(len(before_elimination), split_axis, before_elimination.index(split_axis), operations,
                       segments)
    plan.kind = "select" if selected else "mode" if moded else "reduce"
    plan.dimensions, plan.reduction = 0, reduction
    plan.prefix = QuerySequence(*operations[:eliminated_at])
    plan.matrix, plan.after = matrix, after
    if isinstance(operations[eliminated_at], GroupBy):
        assert plan.axis_query is not None
        plan.kind, plan.dimensions = "group", 1
        plan.key_query = _key_query(plan.axis_query, operations[eliminated_at].property_name, key_steps)
    return plan


def _stored_rows_plan(local: DafReader, dimensions: int, operations: tuple[Any, ...],
                      segments: list[tuple[int, int]], matrix: tuple[str, str, str], reduced_at: int,
                      safe: Any) -> _Plan | None:
    """A reduction of the matrix to one value per entry, or per group of entries, of the axis it keeps (``>| Op``,
    ``>- Op``, ``|/ p >| Op``, ``-/ p >- Op``) that ends the query, where the kept axis is the rows of the layout the
    engine reads (the query's own if stored, else the flipped one): a piece of its rows would read the whole stored
    matrix (sparse: the rows of a CSC matrix are found only by reading all of its indices; dense: a strided part of
    every column, which page fault-around makes nearly all of its pages, measured), so the pieces are ranges of the
    reduced axis (its stored columns), each evaluating the matrix in the stored layout and its partials per kept
    entry (and per group), which are combined. ``None`` where this does not apply."""
    rows_axis, columns_axis, name = matrix
    step = operations[reduced_at]
    closing = reduced_at
    if isinstance(step, GroupRowsBy | GroupColumnsBy):
        closing = next(index for index in range(reduced_at + 1, len(operations))
                       if isinstance(operations[index], ReduceToRow | ReduceToColumn))
    key_steps = operations[reduced_at + 1:closing]
    reduction = operations[closing].reduction_operation
    kept, reduced = ((rows_axis, columns_axis) if isinstance(step, ReduceToColumn | GroupColumnsBy)
                     else (columns_axis, rows_axis))
    after_at = _steps_after(operations[closing + 1:])
    if type(reduction) not in _DECOMPOSABLE or after_at is None \
            or not safe(reduced):
        return None
    if local.has_matrix(rows_axis, columns_axis, name, relayout=False):
        stored = (rows_axis, columns_axis)
    elif local.has_matrix(columns_axis, rows_axis, name, relayout=False):
        stored = (columns_axis, rows_axis)
    else:
        return None  # (a missing matrix: its default, or the engine's error, from the other plan)
    if stored[0] != kept:
        return None
    plan = _split_plan(2, reduced, 0 if reduced == rows_axis else 1, operations, segments)
    plan.kind = "rows" if closing == reduced_at else "grouped"
    plan.dimensions, plan.reduction, plan.matrix = dimensions, reduction, matrix
    plan.after = operations[closing + 1 + after_at:]
    # The matrix in the stored layout (its element-wise steps commute with the transposition): each piece reduces
    # the stored columns it holds, per stored row.
    (first_start, first_end), (second_start, second_end) = segments
    axis_queries = operations[first_start:first_end] + operations[second_start:second_end]
    if stored != (rows_axis, columns_axis):
        axis_queries = operations[second_start:second_end] + operations[first_start:first_end]
    plan.prefix = QuerySequence(*axis_queries, *operations[second_end:reduced_at])
    if plan.kind == "grouped":
        assert plan.axis_query is not None
        plan.key_query = _key_query(plan.axis_query, step.property_name, key_steps)
    return plan


def _key_query(axis_query: QuerySequence, property_name: str, key_steps: tuple) -> QuerySequence:
    """Each entry's group: its property, looked up as a group-by looks it up (a matrix slice if one follows)."""
    sliced = any(isinstance(step, Axis) for step in key_steps[:2])
    lookup = LookupMatrix(property_name) if sliced else LookupVector(property_name)
    return QuerySequence(*axis_query.operations, lookup, *key_steps)


def _split_plan(dimensions: int, axis: str, dimension: int, operations: tuple,
                segments: list[tuple[int, int]]) -> _Plan:
    start, end = next((start, end) for start, end in segments if operations[start].axis_name == axis)
    return _Plan("split", dimensions, axis=axis, axis_query=QuerySequence(*operations[start:end]), dimension=dimension)


# Masks evaluated in the client: a mask of one axis that looks up the other (``@ cell [ X @ gene = g5 > 0 ] @ gene``)
# would see only a piece's entries of the split axis; the client evaluates it once, and the pieces mask the axis by
# its result, a vector of a ``MemoryDaf`` chained over the data set. And square matrices: restricting the axis of
# ``@ cell @ cell :: knn`` to a range restricts both its rows and its columns; the columns are queried as an alias
# axis of the same entries instead (a view whose matrix of (cell, alias) is the stored one), which is split alone.

#: The alias of the columns axis of a square matrix (its entries and vectors are the axis's).
_ALIAS = "__pydaf_dask_columns__"


@dataclass(frozen=True)
class _DerivedSource:
    """A data set, the masks the client evaluated (each ``(axis, name, bits)`` a Bool vector ``name`` of ``axis``, its
    packed bits: an eighth of a byte per entry in the graph, that the rewritten query masks the axis by), and the
    square matrix whose columns are queried as :data:`_ALIAS` (``(axis, name)``), if any."""

    source: DafSource
    masks: tuple[tuple[str, str, bytes], ...]
    square: tuple[str, str] | None = None


_Source = DafSource | _DerivedSource

# The last few derived data sets used, per process: (pid, derived source) -> (the data set, the derived one).
_derived_kept: OrderedDict[tuple[int, _DerivedSource], tuple[DafReader, DafReader]] = OrderedDict()


def _masks_memory(daf: DafReader, masks: list[tuple[str, str, np.ndarray]]) -> MemoryDaf:
    memory = MemoryDaf(name=f"{daf.name}.masks")
    for axis, name, bits in masks:
        if not memory.has_axis(axis):
            memory.add_axis(axis, daf.axis_vector(axis))
        memory.set_vector(axis, name, bits)
    return memory


def _derived_reader(daf: DafReader, masks: list[tuple[str, str, np.ndarray]], square: tuple[str, str] | None) \
        -> DafReader:
    """``daf`` chained with the masks' vectors, and viewed with the columns of a square matrix as :data:`_ALIAS`."""
    if masks:
        daf = chain_reader([daf, _masks_memory(daf, masks)], name=f"{daf.name}.masked")
    if square is not None:
        axis, name = square
        lookup = f"@ {escape_value(axis)} @ {escape_value(axis)} :: {escape_value(name)}"
        daf = viewer(daf, name=f"{daf.name}.columns", axes=[VIEW_ALL_AXES, (_ALIAS, f"@ {escape_value(axis)}")],
                     data=[("*", "="), (("*", "*"), "="), ((axis, _ALIAS, name), lookup)])
    return daf


def _open(source: _Source) -> DafReader:
    """The data set of a task (:func:`~pydaf.dask.open_source`), derived as its source says (made once per process,
    while the data set stays open)."""
    if isinstance(source, DafSource):
        return open_source(source)
    daf = open_source(source.source)

    def derive() -> DafReader:
        masks = [(axis, name, np.unpackbits(np.frombuffer(bits, dtype=np.uint8), count=daf.axis_length(axis))
                  .astype(bool)) for axis, name, bits in source.masks]
        return _derived_reader(daf, masks, source.square)

    return _kept(_derived_kept, (os.getpid(), source), daf, derive)


def _square(sequence: QuerySequence) -> tuple[QuerySequence, tuple[str, str]] | None:
    """A query of a square matrix (``@ a [ mask ] @ a [ mask ] :: m ...``) with its columns axis as :data:`_ALIAS`,
    and ``(a, m)``; ``None`` for any other query."""
    operations: tuple[Any, ...] = sequence.operations
    first = _axis_segment(operations, 0)
    second = None if first is None else _axis_segment(operations, first)
    if first is None or second is None or second >= len(operations) \
            or type(operations[second]) is not LookupMatrix or operations[0].axis_name != operations[first].axis_name:
        return None
    axis, name = str(operations[0].axis_name), str(operations[second].property_name)
    return QuerySequence(*operations[:first], Axis(_ALIAS), *operations[first + 1:]), (axis, name)


def _derived(local: DafReader, sequence: QuerySequence) \
        -> tuple[DafReader, QuerySequence, list[tuple[str, str, np.ndarray]], tuple[str, str] | None] | None:
    """The data set and query the pieces evaluate where masks are evaluated here or a square matrix is aliased (see
    above): the derived data set, the rewritten query, the masks and the square matrix; ``None`` if neither."""
    masks: list[tuple[str, str, np.ndarray]] = []
    evaluated = _evaluated_masks(local, sequence)
    if evaluated is not None:
        sequence, masks = evaluated
    square = None
    aliased = _square(sequence)
    if aliased is not None:
        sequence, square = aliased
    if not masks and square is None:
        return None
    return _derived_reader(local, masks, square), sequence, masks, square


def _evaluated_masks(local: DafReader, sequence: QuerySequence) \
        -> tuple[QuerySequence, list[tuple[str, str, np.ndarray]]] | None:
    """The query with each mask of its leading axes that names another of them replaced by a mask by a vector, and
    those vectors (evaluated here); ``None`` if no mask does."""
    import pandas as pd

    operations: list[Any] = list(sequence.operations)
    segments: list[tuple[int, int]] = []
    end = _axis_segment(sequence.operations, 0)
    while end is not None and len(segments) < 2:
        segments.append((segments[-1][1] if segments else 0, end))
        end = _axis_segment(sequence.operations, end)
    axes = {str(operations[start].axis_name) for start, _ in segments}
    masks: list[tuple[str, str, np.ndarray]] = []
    for start, end in reversed(segments):
        axis = str(operations[start].axis_name)
        if end - start == 1 or not _names_in(tuple(operations[start + 1:end])) & (axes - {axis}):
            continue
        try:
            entries = np.asarray(query_result(local, QuerySequence(*operations[start:end]), cache=False).value,
                                 dtype=object)
        except DafError:
            return None  # (the engine's error for the whole query, raised as it is planned)
        bits = np.zeros(local.axis_length(axis), dtype=bool)
        bits[pd.Index(local.axis_vector(axis), dtype=object).get_indexer(entries)] = True
        name = f"__pydaf_dask_mask_{len(masks)}__"
        masks.append((axis, name, bits))
        operations[start:end] = [Axis(axis), BeginMask(name), EndMask()]
    if not masks:
        return None
    return QuerySequence(*operations), masks


# A piece: the data set with the split axis restricted to a range.


@dataclass
class _Ranges:
    """What the pieces of one axis of one open data set share: a ``MemoryDaf`` with the axis and each entry's
    position (a piece's axis query selects its range of positions) and its chain over the data set (which hashes the
    axis's entries once, not once a piece)."""

    memory: MemoryDaf
    chain: DafReader


# The last few used, per process (as open_source keeps the data sets): (id of the data set, axis) -> (the data set,
# its _Ranges).
_ranges_kept: OrderedDict[tuple[int, str], tuple[DafReader, _Ranges]] = OrderedDict()
_ranges_lock = threading.Lock()


def _new_ranges(daf: DafReader, axis: str) -> _Ranges:
    memory = MemoryDaf(name=f"{daf.name}.ranges")
    memory.add_axis(axis, daf.axis_vector(axis))
    memory.set_vector(axis, _RANGE_POSITION, np.arange(daf.axis_length(axis), dtype=np.int64))
    return _Ranges(memory, chain_reader([daf, memory], name=f"{daf.name}.ranged"))


def _kept(kept: OrderedDict[Any, tuple[DafReader, Any]], key: Any, daf: DafReader, make: Callable[[], Any]) -> Any:
    """What ``make`` makes of the open data set ``daf``, kept under ``key`` (the last :data:`_KEPT_RANGES` used) while
    ``daf`` is the one open (a data set closed and opened again is a new object: made again)."""
    with _ranges_lock:
        found = kept.get(key)
        if found is not None and found[0] is daf:
            kept.move_to_end(key)
            return found[1]
    made = make()
    with _ranges_lock:
        found = kept.get(key)
        if found is None or found[0] is not daf:
            found = kept[key] = (daf, made)
        kept.move_to_end(key)
        while len(kept) > _KEPT_RANGES:
            kept.popitem(last=False)
    return found[1]


def _kept_ranges(daf: DafReader, axis: str) -> _Ranges:
    return _kept(_ranges_kept, (id(daf), axis), daf, lambda: _new_ranges(daf, axis))


def _range_view(daf: DafReader, axis: str, start: int, stop: int, *, keep: bool = True) -> DafReader:
    """``daf`` with ``axis`` restricted to the entries ``start:stop`` (a view; a range of a mapped matrix's columns
    is a slice of it). ``keep``: share the axis's chain with the other pieces of this process (a worker's): the
    pieces write nothing, so threads run them at once and the chain's hashed entries serve them all."""
    ranges = _kept_ranges(daf, axis) if keep else _new_ranges(daf, axis)
    position = escape_value(_RANGE_POSITION)
    axis_query = f"@ {escape_value(axis)} [ {position} >= {start} & {position} < {stop} ]"
    return viewer(ranges.chain, name=f"{daf.name}[{axis}={start}:{stop}]", axes=[VIEW_ALL_AXES, (axis, axis_query)])


def _releasing(task: Callable[..., Any]) -> Callable[..., Any]:
    """A task that, once done, drops the pages it mapped from the worker's resident set (the data set stays open and
    mapped for the next task): without it a worker that evaluated every piece would count the whole file in the RSS
    that dask's memory limits measure."""

    @functools.wraps(task)
    def releasing(*arguments: Any) -> Any:
        try:
            return task(*arguments)
        finally:
            release_mapped_pages()

    return releasing


@_releasing
def _evaluate_piece(source: _Source, query_text: str, axis: str, start: int, stop: int) -> Any:
    """The query on a range of the split axis (a task: numpy or scipy csc)."""
    view = _range_view(_open(source), axis, start, stop)
    return as_numpy(query_result(view, as_query_sequence(query_text), cache=False))


@_releasing
def _evaluate_whole(source: _Source, query_text: str) -> Any:
    """The whole query in one task."""
    return _open(source).get_np_query(query_text, cache=False)


@dataclass(frozen=True)
class _Partial:
    """What a piece contributes to a combined reduction: its number of values, their input type, and the statistics
    the reduction needs (in the kernels' accumulation types)."""

    size: int
    dtype: np.dtype
    statistics: dict[str, Any] = field(default_factory=dict)


# GeoMean: the sums of ``log(value + eps)`` of each piece (per target), as the kernels compute the logarithms.


def _log_types(dtype: np.dtype, eps: float) -> dict[str, np.dtype]:
    """The types the kernels may compute a GeoMean's logarithms in: ``Float64``; and ``Float32`` for ``Float32`` data
    without eps, which the kernels take in ``Float32`` when the reduced matrix has at least ``REDUCE_NUMBA_MIN_ENTRIES``
    stored values (and in ``Float64`` below that, or for a vector): a piece sums both, the combination picks."""
    types: dict[str, np.dtype] = {"logs": np.dtype(np.float64)}
    if np.dtype(dtype) == np.float32 and eps == 0:
        types["logs32"] = np.dtype(np.float32)
    return types


def _logs(values: np.ndarray, eps: float, log_type: np.dtype) -> np.ndarray:
    """``log(values + eps)`` in ``log_type`` (as the kernels: eps converted to it, added, then the logarithm)."""
    logs = np.add(values, log_type.type(eps), dtype=log_type)
    np.log(logs, out=logs)
    return logs


def _column_blocks(values: Any) -> Iterator[tuple[int, int]]:
    """Ranges of the columns of a matrix of about ``_BLOCK_ENTRIES`` stored values each."""
    n_rows, n_columns = int(values.shape[0]), int(values.shape[1])
    stored = values.nnz if isinstance(values, SparseMatrixCSC) else n_rows * n_columns
    per_block = max(1, int(_BLOCK_ENTRIES * n_columns // max(1, stored)))
    for first in range(0, n_columns, per_block):
        yield first, min(n_columns, first + per_block)


def _log_statistics(values: Any, eps: float, *, per_row: bool = False, codes: np.ndarray | None = None,
                    n_groups: int = 0, float64_only: bool = False) -> dict[str, Any]:
    """The sums of ``log(value + eps)`` of the stored values of a vector or matrix (in each log type of
    :func:`_log_types`, summed in ``Float64``) and how many values are stored: of them all, per row
    (``per_row``), or per group (``codes``: each value's group in a vector, each column's in a matrix; then per group
    and row, as rows of groups). A sparse matrix's implicit zeros are added by the combination (their number is the
    total less the stored)."""
    dtype = values.nzval.dtype if isinstance(values, SparseMatrixCSC) else np.asarray(values).dtype
    types: dict[str, np.dtype] = {"logs": np.dtype(np.float64)} if float64_only else _log_types(dtype, eps)
    if not (isinstance(values, SparseMatrixCSC) or np.ndim(values) == 2):
        vector = np.asarray(values)
        sums = {}
        for name, log_type in types.items():
            logs = _logs(vector, eps, log_type)
            sums[name] = logs.sum(dtype=np.float64) if codes is None \
                else np.bincount(codes, weights=logs, minlength=n_groups)
        counts = vector.shape[0] if codes is None else np.bincount(codes, minlength=n_groups).astype(np.int64)
        return {**sums, "stored": counts}
    n_rows = int(values.shape[0])
    shape: tuple[int, ...] = (n_groups, n_rows) if codes is not None else (n_rows,) if per_row else ()
    sums = {name: np.zeros(shape) for name in types}
    stored = np.zeros(shape, dtype=np.int64)
    sparse = isinstance(values, SparseMatrixCSC)
    if sparse:
        colptr = np.asarray(values.colptr, dtype=np.int64)
    for first, last in _column_blocks(values):
        if sparse:
            start, stop = int(colptr[first]) - 1, int(colptr[last]) - 1
            block = np.asarray(values.nzval[start:stop])
            targets = None
            if codes is not None or per_row:
                targets = np.asarray(values.rowval[start:stop], dtype=np.int64) - 1
                if codes is not None:
                    columns = np.repeat(np.arange(first, last), np.diff(colptr[first:last + 1]))
                    targets = codes[columns].astype(np.int64) * n_rows + targets
            for name, log_type in types.items():
                logs = _logs(block, eps, log_type)
                sums[name] += logs.sum(dtype=np.float64) if targets is None \
                    else np.bincount(targets, weights=logs, minlength=max(1, stored.size)).reshape(shape)
            stored += block.shape[0] if targets is None \
                else np.bincount(targets, minlength=max(1, stored.size)).reshape(shape)
            continue
        dense = np.asarray(values)[:, first:last]
        for name, log_type in types.items():
            logs = _logs(dense, eps, log_type)
            if codes is None:
                sums[name] += logs.sum(axis=1 if per_row else None, dtype=np.float64)
            else:
                for group in np.unique(codes[first:last]):
                    sums[name][group] += logs[:, codes[first:last] == group].sum(axis=1, dtype=np.float64)
        if codes is None:
            stored += dense.shape[1] if per_row else dense.size
        else:
            stored += np.bincount(codes[first:last], minlength=n_groups).astype(np.int64)[:, np.newaxis]
    return {**sums, "stored": stored}


def _geomeans(statistics: dict[str, Any], totals: Any, eps: float) -> Any:
    """The geometric means (``Float64``) from the combined log sums and stored counts, as the kernels finish them: the
    implicit zeros' ``log(eps)`` added, ``exp(mean log) - eps``; in the log type the kernels would have used for the
    whole (``Float32`` for large ``Float32`` inputs without eps)."""
    stored = np.asarray(statistics["stored"])
    large = int(stored.sum()) >= kernels.REDUCE_NUMBA_MIN_ENTRIES
    logs = statistics["logs32" if large and "logs32" in statistics else "logs"]
    implicit = totals - stored
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        zeros = math.log(eps) if eps > 0 else -math.inf
        if np.any(implicit > 0):
            logs = logs + np.where(implicit > 0, implicit * zeros, 0.0)
        return np.exp(logs / totals) - eps


@_releasing
def _partial_piece(source: _Source, prefix_text: str, reduction_text: str, axis: str, start: int,
                   stop: int, dense_vector: bool = False) -> _Partial:
    """The partial statistics of a range of the values a reduction reduces (a task). ``dense_vector``: the whole is
    a vector or a dense matrix of one row or column (whose GeoMean the kernels take in ``Float64`` logs)."""
    view = _range_view(_open(source), axis, start, stop)
    values = query_result(view, as_query_sequence(prefix_text), cache=False).value
    reduction: Any = as_query_sequence(reduction_text).operations[0]
    is_matrix = isinstance(values, SparseMatrixCSC) or np.ndim(values) == 2
    size = int(values.shape[0]) * int(values.shape[1]) if is_matrix else len(values)
    dtype = values.nzval.dtype if isinstance(values, SparseMatrixCSC) else np.asarray(values).dtype
    if size == 0 or isinstance(reduction, Count):
        return _Partial(size, dtype)
    if type(reduction) not in _DECOMPOSABLE:  # (a user-defined reduction that says how to combine pieces)
        return _Partial(size, dtype, {"user": reduction.compute_partial(values)})

    def statistic(name: str) -> Any:
        return kernels.reduce_all(values, name) if is_matrix else kernels.reduce_vector(np.asarray(values), name)

    if isinstance(reduction, Sum | Mean):
        return _Partial(size, dtype, {"sum": statistic("sum")})
    if isinstance(reduction, GeoMean):
        return _Partial(size, dtype, _log_statistics(values, reduction.eps, float64_only=dense_vector))
    if isinstance(reduction, Max):
        return _Partial(size, dtype, {"max": statistic("max")})
    if isinstance(reduction, Min):
        return _Partial(size, dtype, {"min": statistic("min")})
    return _Partial(size, dtype, {"mean": float(statistic("mean")), "var": float(statistic("var"))})


def _cast(value: Any, dtype: np.dtype) -> Any:
    """As the operations cast a reduced value to their result type (Julia's ``convert``: rounding floats, exact
    integers)."""
    return exact_cast(np.asarray(value), np.dtype(dtype), exact_floats=False)[()]


def _combine(source: _Source, query_text: str, reduction_text: str, *partials: _Partial) -> Any:
    """The reduction of the whole from the pieces' partials (a task)."""
    reduction: Any = as_query_sequence(reduction_text).operations[0]
    pieces = [partial for partial in partials if partial.size > 0]
    if not pieces:  # nothing to reduce: the engine's answer (the IfMissing default, or its error)
        return _evaluate_whole(source, query_text)
    if type(reduction) not in _DECOMPOSABLE:
        return reduction.combine_partials([partial.statistics["user"] for partial in pieces])
    dtype = pieces[0].dtype
    result_type = reduction.reduction_result_type(dtype)
    size = sum(partial.size for partial in pieces)
    if isinstance(reduction, Count):
        return _cast(size, result_type)
    if isinstance(reduction, Sum | Mean):
        sums = [partial.statistics["sum"] for partial in pieces]
        total = sums[0]
        for value in sums[1:]:
            total = total + value  # (in the kernels' int64/uint64/float64 accumulator type, as one sum would be)
        if isinstance(reduction, Sum):
            return _cast(total, result_type)
        return _cast(np.float64(float(total) / size), result_type)
    if isinstance(reduction, Max):
        return _cast(max(partial.statistics["max"] for partial in pieces), result_type)
    if isinstance(reduction, Min):
        return _cast(min(partial.statistics["min"] for partial in pieces), result_type)
    if isinstance(reduction, GeoMean):
        names = set.intersection(*(set(partial.statistics) for partial in pieces))
        statistics = {name: sum(partial.statistics[name] for partial in pieces) for name in names}
        return _cast(np.float64(_geomeans(statistics, size, reduction.eps)), result_type)
    # Chan et al.: the mean and the sum of squared deviations of the union of the pieces.
    count, mean, squares = 0, 0.0, 0.0
    for partial in pieces:
        n, piece_mean = partial.size, partial.statistics["mean"]
        piece_squares = partial.statistics["var"] * n
        delta = piece_mean - mean
        total = count + n
        mean += delta * n / total
        squares += piece_squares + delta * delta * count * n / total
        count = total
    variance = squares / count
    if isinstance(reduction, Var):
        return _cast(np.float64(variance), result_type)
    spread = math.sqrt(variance) if isinstance(reduction, Std | StdN) else variance
    if isinstance(reduction, Std):
        return _cast(np.float64(spread), result_type)
    assert isinstance(reduction, VarN | StdN)
    with np.errstate(divide="ignore", invalid="ignore"):
        return result_type.type(spread) / result_type.type(mean + reduction.eps)


# Group-bys of a vector (``/ p >> Op``): each piece's groups and their partials, combined by group.


@dataclass(frozen=True)
class _GroupPartial:
    """A piece's groups (the typed values of the group property), the input type, and each group's statistics (one
    value per group of a vector; a row of one value per kept entry for a matrix, whose ``kept`` entries they are)."""

    groups: np.ndarray
    dtype: np.dtype
    statistics: dict[str, np.ndarray]
    kept: tuple[int, ...] = ()


@_releasing
def _group_piece(source: _Source, prefix_text: str, key_text: str, reduction_text: str, axis: str, start: int,
                 stop: int) -> _GroupPartial:
    """The groups of a range of a vector, or of the stored columns of a matrix (in its stored layout), and each
    group's partial statistics (a task)."""
    import pandas as pd

    view = _range_view(_open(source), axis, start, stop)
    prefix = query_result(view, as_query_sequence(prefix_text), cache=False)
    values = prefix.value
    is_matrix = isinstance(values, SparseMatrixCSC) or np.ndim(values) == 2
    if not is_matrix:
        values = np.asarray(values)
    dtype = values.nzval.dtype if isinstance(values, SparseMatrixCSC) else values.dtype
    key = query_result(view, as_query_sequence(key_text), cache=False)
    keys = np.asarray(key.value)
    if keys.shape[0] != values.shape[1 if is_matrix else 0]:  # (``??`` dropped the entries whose key is empty)
        kept = pd.Index(np.asarray(prefix.entries[1 if is_matrix else 0], dtype=object), dtype=object) \
            .get_indexer(np.asarray(key.entries[0], dtype=object))
        values = values.select(columns=kept) if isinstance(values, SparseMatrixCSC) \
            else values[:, kept] if is_matrix else values[kept]
    reduction: Any = as_query_sequence(reduction_text).operations[0]
    codes, groups = pd.factorize(keys, use_na_sentinel=False)
    groups = np.asarray(groups, dtype=keys.dtype)
    n_groups = groups.shape[0]
    statistics = {"count": np.bincount(codes, minlength=n_groups).astype(np.int64)}
    if isinstance(reduction, GeoMean):
        statistics.update(_log_statistics(values, reduction.eps, codes=codes, n_groups=n_groups))
    elif isinstance(reduction, _BY_VALUES) and not is_matrix:  # (the values themselves: see _combine_groups)
        statistics.update({"values": values, "codes": codes.astype(np.int64)})
    elif not isinstance(reduction, Count) and (is_matrix or values.shape[0] > 0):
        needed: dict[type, tuple[str, ...]] = {Sum: ("sum",), Mean: ("sum",), Max: ("max",), Min: ("min",)}
        names = needed.get(type(reduction), ("mean", "var"))
        with np.errstate(invalid="ignore"):
            for name in names:
                if is_matrix:  # (each stored row's groups of columns, as rows of groups)
                    reduced = kernels.reduce_grouped_columns(values, name, codes, n_groups).T
                else:
                    reduced = kernels.reduce_grouped_vector(values, name, codes, n_groups)
                statistics[name] = np.asarray(reduced)
    return _GroupPartial(groups, dtype, statistics, (int(values.shape[0]),) if is_matrix else ())


def _combine_groups(source: _Source, query_text: str, reduction_text: str, group_axis: str | None,
                    values_source: tuple[str, str] | None, groups_dimension: int,
                    *partials: _GroupPartial) -> tuple[np.ndarray, np.ndarray]:
    """The grouped reduction of the whole from the pieces' per-group partials, and the group names, in the engine's
    order (its own ``group_values``: sorted values, or the order of categories recorded for ``values_source``), or
    the order of the group axis (``=@``) (a task). A matrix's groups are its ``groups_dimension`` (its rows for
    ``-/``, its columns for ``|/``)."""
    import pandas as pd

    from ..queries.phrases.common import group_values
    from ..queries.state import Purpose, QueryState, VectorState, cast_value, entry_names

    reduction: Any = as_query_sequence(reduction_text).operations[0]
    dtype = partials[0].dtype
    kept = partials[0].kept
    result_type = reduction.reduction_result_type(dtype)
    codes, groups = pd.factorize(np.concatenate([partial.groups for partial in partials]), use_na_sentinel=False)
    groups = np.asarray(groups, dtype=partials[0].groups.dtype)
    n_groups = groups.shape[0]
    count = np.zeros(n_groups, dtype=np.int64)
    totals: dict[str, np.ndarray] = {}
    mean = np.zeros((n_groups, *kept))
    squares = np.zeros((n_groups, *kept))
    per_group = (-1,) + (1,) * len(kept)  # (a group's count, against its row of statistics)
    offset = 0
    selected_values: list[np.ndarray] = []  # (a median or quantile: each piece's values, and their groups)
    selected_codes: list[np.ndarray] = []
    for partial in partials:
        where = codes[offset:offset + partial.groups.shape[0]]  # (each group once in a piece)
        offset += partial.groups.shape[0]
        n = partial.statistics["count"]
        if "values" in partial.statistics:
            selected_values.append(partial.statistics["values"])
            selected_codes.append(where[partial.statistics["codes"]])
        for name, value in partial.statistics.items():
            if name in ("sum", "max", "min", "logs", "logs32", "stored"):
                if name not in totals:
                    totals[name] = np.zeros((n_groups, *kept), dtype=value.dtype)
                    totals[name][where] = value
                    totals[f"{name}_seen"] = np.zeros(n_groups, dtype=bool)
                else:
                    seen = totals[f"{name}_seen"][where].reshape(per_group)
                    old = totals[name][where]
                    pick = np.maximum if name == "max" else np.minimum
                    combined = pick(old, value) if name in ("max", "min") else old + value
                    totals[name][where] = np.where(seen, combined, value)
                totals[f"{name}_seen"][where] = True
        if "var" in partial.statistics:  # Chan et al., per group
            before = count[where].reshape(per_group)
            total = before + n.reshape(per_group)
            delta = partial.statistics["mean"] - mean[where]
            with np.errstate(invalid="ignore", divide="ignore"):
                share = np.where(total > 0, n.reshape(per_group) / np.maximum(total, 1), 0.0)
                mean[where] += delta * share
                squares[where] += partial.statistics["var"] * n.reshape(per_group) + delta * delta * before * share
        count[where] += n

    counts = count.reshape(per_group)
    if isinstance(reduction, Count):
        reduced = exact_cast(count, result_type, exact_floats=False)
        if kept:  # (the same count for each kept entry)
            reduced = np.repeat(reduced[:, np.newaxis], kept[0], axis=1)
    elif isinstance(reduction, Sum):
        reduced = exact_cast(totals["sum"], result_type, exact_floats=False)
    elif isinstance(reduction, Mean):
        reduced = exact_cast(totals["sum"].astype(np.float64) / counts, result_type, exact_floats=False)
    elif isinstance(reduction, Max | Min):
        name = "max" if isinstance(reduction, Max) else "min"
        reduced = exact_cast(totals[name], result_type, exact_floats=False)
    elif isinstance(reduction, _BY_VALUES):  # (the engine's own reduction per group of the values, in order)
        with np.errstate(invalid="ignore"):
            reduced = reduction.compute_grouped_vector(np.concatenate(selected_values),
                                                       np.concatenate(selected_codes), n_groups)
        reduced = exact_cast(reduced, result_type, exact_floats=False)
    elif isinstance(reduction, GeoMean):
        names = [name for name in ("logs", "logs32", "stored") if name in totals]
        reduced = exact_cast(_geomeans({name: totals[name] for name in names}, counts, reduction.eps), result_type,
                             exact_floats=False)
    else:
        variance = squares / counts
        spread = np.sqrt(variance) if isinstance(reduction, Std | StdN) else variance
        if isinstance(reduction, Var | Std):
            reduced = exact_cast(spread, result_type, exact_floats=False)
        elif kept:  # (VarN/StdN as the operation divides a matrix's arrays: Julia's order of conversions)
            means = (mean.astype(result_type).astype(np.float64) + reduction.eps).astype(result_type)
            with np.errstate(divide="ignore", invalid="ignore"):
                reduced = spread.astype(result_type) / means
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                reduced = spread.astype(result_type) / (mean + reduction.eps).astype(result_type)

    def oriented(result: np.ndarray) -> np.ndarray:
        """A matrix in the engine's layout: column-major, its groups in ``groups_dimension``."""
        if not kept:
            return result
        return np.asfortranarray(result.T if groups_dimension == 1 else result)

    if group_axis is None:
        group_state = VectorState()
        group_state.stored_values, group_state.values_source = groups, values_source
        query_state = QueryState(_open(source) if values_source else MemoryDaf(), (), Purpose.COMPUTE)
        ordered, rank = group_values(query_state, group_state)
        result = np.empty_like(reduced)
        result[rank] = reduced
        return oriented(result), entry_names(ordered)
    # The groups are the entries of an axis, in its order (values that are no entry of it are in no group).
    daf = _open(source)
    entries = daf.axis_vector(group_axis)
    positions = pd.Index(entries, dtype=object).get_indexer(entry_names(groups))
    known = positions >= 0
    result = np.zeros((entries.shape[0], *kept), dtype=reduced.dtype)
    result[positions[known]] = reduced[known]
    present = np.zeros(entries.shape[0], dtype=bool)
    present[positions[known]] = count[known] > 0
    if not np.all(present):
        operations = as_query_sequence(query_text).operations
        if_missing = operations[-1] if isinstance(operations[-1], IfMissing) else None
        if if_missing is None:  # the engine's error
            return np.asarray(_evaluate_whole(source, query_text)), entries
        state = QueryState(daf, operations, Purpose.COMPUTE)
        result[~present] = cast_value(state, "missing", if_missing.default_value, result.dtype)
    return oriented(result), np.asarray(entries, dtype=object)


# A ``>| Op`` of a sparse matrix stored by rows: pieces of its columns, each row's partials combined.


@_releasing
def _row_partial_piece(source: _Source, prefix_text: str, reduction_text: str, axis: str, start: int,
                       stop: int) -> _Partial:
    """The per-row partial statistics of a range of the columns of the matrix a ``>|`` reduces (a task): ``size``
    is its number of columns, the statistics are vectors of one value per row."""
    view = _range_view(_open(source), axis, start, stop)
    values = query_result(view, as_query_sequence(prefix_text), cache=False).value
    reduction: Any = as_query_sequence(reduction_text).operations[0]
    dtype = values.nzval.dtype if isinstance(values, SparseMatrixCSC) else np.asarray(values).dtype
    n_rows, n_columns = int(values.shape[0]), int(values.shape[1])
    if n_rows == 0 or n_columns == 0 or isinstance(reduction, Count):
        return _Partial(n_columns, dtype, {"rows": np.asarray(n_rows)})
    if isinstance(reduction, GeoMean):
        statistics = _log_statistics(values, reduction.eps, per_row=True)
        statistics["rows"] = np.asarray(n_rows)
        return _Partial(n_columns, dtype, statistics)
    needed: dict[type, tuple[str, ...]] = {Sum: ("sum",), Mean: ("sum",), Max: ("max",), Min: ("min",)}
    statistics = {name: np.asarray(kernels.reduce_rows(values, name))
                  for name in needed.get(type(reduction), ("mean", "var"))}
    statistics["rows"] = np.asarray(n_rows)
    return _Partial(n_columns, dtype, statistics)


def _combine_rows(source: _Source, query_text: str, reduction_text: str, *partials: _Partial) -> np.ndarray:
    """The ``>|`` reduction of the whole matrix from its column pieces' per-row partials (a task)."""
    reduction: Any = as_query_sequence(reduction_text).operations[0]
    pieces = [partial for partial in partials if partial.size > 0]
    n_rows = int(pieces[0].statistics["rows"]) if pieces else 0
    if n_rows == 0:  # an empty matrix: the engine's answer (the IfMissing default, or its error)
        return np.asarray(_evaluate_whole(source, query_text))
    dtype = pieces[0].dtype
    result_type = reduction.reduction_result_type(dtype)
    size = sum(partial.size for partial in pieces)
    if isinstance(reduction, Count):
        return exact_cast(np.full(n_rows, size, dtype=np.int64), result_type, exact_floats=False)
    if isinstance(reduction, Sum | Mean):
        total = pieces[0].statistics["sum"].copy()
        for partial in pieces[1:]:
            total += partial.statistics["sum"]  # (in the kernels' int64/uint64/float64 accumulator type)
        if isinstance(reduction, Sum):
            return exact_cast(total, result_type, exact_floats=False)
        return exact_cast(total.astype(np.float64) / size, result_type, exact_floats=False)
    if isinstance(reduction, Max | Min):
        name, pick = ("max", np.maximum) if isinstance(reduction, Max) else ("min", np.minimum)
        extreme = pieces[0].statistics[name]
        for partial in pieces[1:]:
            extreme = pick(extreme, partial.statistics[name])
        return exact_cast(extreme, result_type, exact_floats=False)
    if isinstance(reduction, GeoMean):
        names = set.intersection(*(set(partial.statistics) for partial in pieces)) - {"rows"}
        statistics = {name: sum(partial.statistics[name] for partial in pieces) for name in names}
        return exact_cast(_geomeans(statistics, size, reduction.eps), result_type, exact_floats=False)
    # Chan et al., each row.
    count, mean, squares = 0, np.zeros(n_rows), np.zeros(n_rows)
    for partial in pieces:
        n = partial.size
        delta = partial.statistics["mean"] - mean
        total_count = count + n
        mean = mean + delta * (n / total_count)
        squares = squares + partial.statistics["var"] * n + delta * delta * (count * n / total_count)
        count = total_count
    variance = squares / count
    spread = np.sqrt(variance) if isinstance(reduction, Std | StdN) else variance
    if isinstance(reduction, Var | Std):
        return exact_cast(spread, result_type, exact_floats=False)
    # (VarN/StdN as the operation divides arrays: Julia's order of conversions.)
    means = (mean.astype(result_type).astype(np.float64) + reduction.eps).astype(result_type)
    with np.errstate(divide="ignore", invalid="ignore"):
        return spread.astype(result_type) / means


# ``>> Median`` and ``>> Quantile`` of a whole matrix or vector: exact selection by rounds.
#
# Each value has an unsigned integer key in its order (floats: the kernels' ordered keys of their bits; signed
# integers: the sign bit flipped). Round 1: each piece counts its values per bucket of the keys' top 16 bits (a sparse
# piece adds its implicit zeros to the bucket of zero's key) and its NaNs; the client finds the bucket holding each
# order statistic needed (the median of an even count needs two, a quantile the two it interpolates). Each next
# round counts, within those buckets only, per bucket of the next 16 bits; once a bucket holds at most ``_FEW_KEYS``
# values, the pieces return their keys in it (with counts) and the statistic is picked from them. A key determines its
# value bit for bit: the result is the local one exactly. A piece never holds more than its own values' keys.


@dataclass(frozen=True)
class _Selection:
    """What a piece returns in a round of a selection: its number of values (implicit zeros included), of NaNs, its
    values' type, and for each prefix asked the buckets (or keys) within it that hold values, and how many."""

    size: int
    nans: int
    dtype: np.dtype
    buckets: tuple[tuple[np.ndarray, np.ndarray], ...]


def _value_keys(values: np.ndarray) -> np.ndarray:
    """Unsigned integer keys of the values, of their width, in the values' order (NaNs past the infinities; -0.0 just
    before 0.0)."""
    values = values.view(np.uint8) if values.dtype == np.bool_ else values
    width = values.dtype.itemsize
    sign = np.uint64(1 << (8 * width - 1)).astype(f"u{width}")
    if values.dtype.kind == "f":
        bits = values.view(f"i{width}")
        shift = 8 * width - 1
        ordered = bits ^ ((bits >> shift) & bits.dtype.type((1 << shift) - 1))  # (kernels' _ordered_keys)
        return ordered.view(f"u{width}") ^ sign
    if values.dtype.kind == "i":
        return values.view(f"u{width}") ^ sign
    return values


def _key_value(key: int, dtype: np.dtype) -> float:
    """The value (as ``Float64``, as the kernels select in) of a key of :func:`_value_keys`."""
    dtype = np.dtype(np.uint8) if dtype == np.bool_ else np.dtype(dtype)
    width = dtype.itemsize
    unsigned = np.array([key], dtype=f"u{width}")
    if dtype.kind == "u":
        return float(unsigned[0])
    signed = (unsigned ^ np.uint64(1 << (8 * width - 1)).astype(f"u{width}")).view(f"i{width}")
    if dtype.kind == "i":
        return float(signed[0])
    shift = 8 * width - 1
    bits = signed ^ ((signed >> shift) & signed.dtype.type((1 << shift) - 1))
    return float(bits.view(dtype)[0])


def _value_chunks(values: Any) -> tuple[Iterator[np.ndarray], int, np.dtype]:
    """The stored values of a vector or matrix in 1-d chunks of about ``_BLOCK_ENTRIES``, the number of a sparse
    matrix's implicit zeros, and the values' type."""
    if isinstance(values, SparseMatrixCSC):
        nzval = np.asarray(values.nzval)
        implicit = int(values.shape[0]) * int(values.shape[1]) - nzval.shape[0]
        chunks = (nzval[start:start + _BLOCK_ENTRIES] for start in range(0, nzval.shape[0], _BLOCK_ENTRIES))
        return chunks, implicit, nzval.dtype
    array = np.asarray(values)
    if array.ndim == 1:
        return (array[start:start + _BLOCK_ENTRIES] for start in range(0, array.shape[0], _BLOCK_ENTRIES)), 0, \
            array.dtype
    blocks = _column_blocks(array)
    return (array[:, first:last].ravel(order="F") for first, last in blocks), 0, array.dtype


@_releasing
def _select_piece(source: _Source, prefix_text: str, axis: str, start: int, stop: int,
                  prefixes: tuple[tuple[int, int, bool], ...]) -> _Selection:
    """A round of a selection on a range of the values (a task): for each ``(prefix, bits, keys)``, the values whose
    key's top ``bits`` bits are ``prefix``, counted by their next 16 bits, or (``keys``) by their whole key."""
    view = _range_view(_open(source), axis, start, stop)
    values = query_result(view, as_query_sequence(prefix_text), cache=False).value
    chunks, implicit, dtype = _value_chunks(values)
    width = 8 * (1 if dtype == np.bool_ else dtype.itemsize)
    zero_key = int(_value_keys(np.zeros(1, dtype=dtype))[0])
    size, nans = implicit, 0
    found: list[list[np.ndarray]] = [[] for _ in prefixes]
    counted = [np.zeros(0 if want_keys else 1 << min(_KEY_BITS, width - bits), dtype=np.int64)
               for _, bits, want_keys in prefixes]
    for chunk in chunks:
        size += chunk.shape[0]
        if dtype.kind == "f":
            nans += int(np.count_nonzero(np.isnan(chunk)))
        keys = _value_keys(chunk)
        for index, (prefix, bits, want_keys) in enumerate(prefixes):
            inside = keys if bits == 0 else keys[(keys >> (width - bits)) == prefix]
            if want_keys:
                found[index].append(inside)
                continue
            step = min(_KEY_BITS, width - bits)
            buckets = np.bincount(((inside >> (width - bits - step)) & ((1 << step) - 1)).astype(np.intp),
                                  minlength=1 << step)
            counted[index] += buckets
    results = []
    for index, (prefix, bits, want_keys) in enumerate(prefixes):
        zeros_inside = implicit if bits == 0 or zero_key >> (width - bits) == prefix else 0
        if want_keys:
            keys, counts = np.unique(np.concatenate([np.zeros(0, dtype=f"u{width // 8}"), *found[index]]),
                                     return_counts=True)
            if zeros_inside:
                keys, counts = np.append(keys, keys.dtype.type(zero_key)), np.append(counts, zeros_inside)
            results.append((keys.astype(np.uint64), counts.astype(np.int64)))
            continue
        step = min(_KEY_BITS, width - bits)
        buckets = counted[index]
        if zeros_inside:
            buckets[(zero_key >> (width - bits - step)) & ((1 << step) - 1)] += zeros_inside
        where = np.flatnonzero(buckets)
        results.append((where.astype(np.uint64), buckets[where].astype(np.int64)))
    return _Selection(size, nans, dtype, tuple(results))


def _select(run_round: Callable[[tuple[tuple[int, int, bool], ...]], list[_Selection]], reduction: Any,
            whole: Callable[[], Any]) -> Any:
    """The median or quantile (``reduction``) of the values of the pieces, selected by rounds (``run_round`` runs one
    round on every piece); ``whole`` gives the engine's answer when there are no values (a default, or its error)."""
    selections = run_round(((0, 0, False),))
    size = sum(selection.size for selection in selections)
    if size == 0:
        return whole()
    dtype = selections[0].dtype
    result_type = reduction.reduction_result_type(dtype)
    if sum(selection.nans for selection in selections) > 0:  # (as the kernels: any NaN makes the result NaN)
        return _cast(np.float64(np.nan), result_type)
    width = 8 * (1 if dtype == np.bool_ else dtype.itemsize)
    if isinstance(reduction, Median):
        ranks, gamma = [(size - 1) // 2, size // 2], 0.0
    else:
        first, gamma = kernels._quantile_position(size, reduction.p)
        ranks = [first, min(first + 1, size - 1)]
    # Each order statistic needed: its key's known top bits, how many, and its rank among the values under them.
    states = {rank: (0, 0, rank) for rank in ranks}
    keys: dict[int, int] = {}
    asked: tuple[tuple[int, int, bool], ...] = ((0, 0, False),)
    while True:
        merged: dict[tuple[int, int, bool], tuple[np.ndarray, np.ndarray]] = {}
        for index, ask in enumerate(asked):
            where = np.concatenate([selection.buckets[index][0] for selection in selections])
            counts = np.concatenate([selection.buckets[index][1] for selection in selections])
            unique, inverse = np.unique(where, return_inverse=True)
            merged[ask] = (unique, np.bincount(inverse, weights=counts, minlength=unique.shape[0]).astype(np.int64))
        next_asks: set[tuple[int, int, bool]] = set()
        for rank, (prefix, bits, within) in list(states.items()):
            if rank in keys:
                continue
            want_keys = (prefix, bits, True) in merged
            where, counts = merged[(prefix, bits, want_keys)]
            below = np.cumsum(counts)
            at = int(np.searchsorted(below, within, side="right"))
            before = int(below[at - 1]) if at else 0
            if want_keys:
                keys[rank] = int(where[at])
                continue
            step = min(_KEY_BITS, width - bits)
            prefix, bits, within = (prefix << step) | int(where[at]), bits + step, within - before
            states[rank] = (prefix, bits, within)
            if bits == width:
                keys[rank] = prefix
            else:
                next_asks.add((prefix, bits, int(counts[at]) <= _FEW_KEYS))
        if not next_asks:
            break
        asked = tuple(sorted(next_asks))
        selections = run_round(asked)
    low, high = _key_value(keys[ranks[0]], dtype), _key_value(keys[ranks[1]], dtype)
    if isinstance(reduction, Median):  # (as the kernels' _order_statistic)
        value = np.float64(low if size % 2 == 1 else low / 2 + high / 2)
    else:
        value = np.float64(kernels._interpolate(np.array(low), np.array(high), gamma))
    return _cast(value, result_type)


def _select_rounds(source: _Source, prefix_text: str, axis: str, ranges: list[tuple[int, int, int]],
                   compute: Callable[[list[Any]], list[Any]]) -> Callable[[tuple], list[_Selection]]:
    """A function running one round of a selection on every range (``compute`` computes a list of delayed tasks)."""
    import dask

    piece = dask.delayed(_select_piece, pure=True)
    return lambda asked: compute([piece(source, prefix_text, axis, start, stop, asked) for start, stop, _ in ranges])


# ``>> Mode`` of a whole matrix or vector: the most frequent value, counted by rounds over the pieces.
#
# Equal values share a key (``_mode_keys``: the keys of the selection, with -0.0 given 0.0's and every NaN ``np.nan``'s,
# as ``np.unique`` counts them). Round 1 counts the values per bucket of the keys' top 16 bits (as a selection does,
# a sparse piece's implicit zeros in zero's bucket); a bucket of more than ``_MODE_BATCH`` values is counted by its
# next 16 bits in the next round, until it is small enough or a single key. Consecutive small buckets make batches of
# at most ``_MODE_BATCH`` values (or one key), one a round: each piece returns each distinct key of the batch's range,
# its count and the position of its last occurrence in the whole's column-major order (a sparse piece: its zeros'
# count and last position, without making them); the client sums the counts per key, keeps the latest position and
# the batch's best (most frequent; of ties, the earliest last occurrence, as ``StatsBase.mode`` picks the first to
# reach the top count), then the best of the batches. A key is its value bit for bit.

#: The values a batch of a mode holds at most: what the pieces return in a round, and the client merges.
_MODE_BATCH = 1 << 23


@dataclass(frozen=True)
class _ModeRound:
    """What a piece returns in a round of a mode: its number of values (implicit zeros included), their type, whether
    it is sparse, for each histogram asked the buckets of the next bits holding values and how many, and for the batch
    asked (a range of keys) each distinct key in it, its count (none sent if all are 1) and the position of its last
    occurrence in the whole, with the signs of the zeros seen in the range (1: 0.0, 2: -0.0) and the keys of its NaNs
    as stored."""

    size: int
    dtype: np.dtype
    sparse: bool
    buckets: tuple[tuple[np.ndarray, np.ndarray], ...]
    keys: np.ndarray
    counts: np.ndarray
    last: np.ndarray
    zero_signs: int
    nan_keys: np.ndarray


def _special_keys(dtype: np.dtype) -> dict[str, int]:
    """The keys of :func:`_value_keys` of a float type's 0.0, -0.0, -inf, inf and NaN (``np.nan``)."""
    keys = _value_keys(np.array([0.0, -0.0, -np.inf, np.inf, np.nan], dtype=dtype))
    return dict(zip(("zero", "negative_zero", "low", "high", "nan"), (int(key) for key in keys), strict=True))


def _mode_keys(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The keys of the values as they are stored, and as ``np.unique`` compares the values: -0.0 has 0.0's key, every
    NaN ``np.nan``'s (the canonical keys)."""
    raw = _value_keys(values)
    if values.dtype.kind != "f":
        return raw, raw
    special = _special_keys(values.dtype)
    keys = raw.copy()
    keys[raw == raw.dtype.type(special["negative_zero"])] = special["zero"]
    keys[(raw > raw.dtype.type(special["high"])) | (raw < raw.dtype.type(special["low"]))] = special["nan"]
    return raw, keys


def _key_scalar(key: int, dtype: np.dtype) -> Any:
    """The value of ``dtype`` (a numpy scalar) whose :func:`_value_keys` key is ``key``."""
    dtype = np.dtype(dtype)
    width = dtype.itemsize
    unsigned = np.array([key], dtype=f"u{width}")
    if dtype == np.bool_:
        return unsigned.view(np.bool_)[0]
    if dtype.kind == "u":
        return unsigned.view(dtype)[0]
    signed = (unsigned ^ np.uint64(1 << (8 * width - 1)).astype(f"u{width}")).view(f"i{width}")
    if dtype.kind == "i":
        return signed.view(dtype)[0]
    shift = 8 * width - 1
    bits = signed ^ ((signed >> shift) & signed.dtype.type((1 << shift) - 1))
    return bits.view(dtype)[0]


def _distinct(keys: np.ndarray, counts: np.ndarray, last: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each distinct key, the sum of its counts and the latest of its positions."""
    if keys.shape[0] == 0:
        return keys, counts, last
    order = np.argsort(keys)  # (equal keys in any order: their counts are summed, their latest position kept)
    keys = keys[order]
    first = np.concatenate(([True], keys[1:] != keys[:-1]))
    if first.all():  # (continuous values: nothing to combine)
        return keys, counts[order], last[order]
    starts = np.flatnonzero(first)
    return keys[starts], np.add.reduceat(counts[order], starts), np.maximum.reduceat(last[order], starts)


def _merged(found: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_distinct` of several ``(keys, counts, last)``."""
    return _distinct(np.concatenate([keys.astype(np.uint64) for keys, _, _ in found]),
                     np.concatenate([counts for _, counts, _ in found]),
                     np.concatenate([last for _, _, last in found]).astype(np.int64))


def _located_chunks(values: Any) -> Iterator[tuple[np.ndarray, Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]]]:
    """The stored values of a vector or matrix in 1-d chunks of about ``_BLOCK_ENTRIES``, each with a function giving
    the column and row (in the piece) of the values at some of its indices (a vector: column 0)."""
    if isinstance(values, SparseMatrixCSC):
        nzval = np.asarray(values.nzval)
        starts = np.asarray(values.colptr, dtype=np.int64)[:-1] - 1
        rowval = values.rowval
        for first in range(0, nzval.shape[0], _BLOCK_ENTRIES):
            def locate(indices: np.ndarray, first: int = first) -> tuple[np.ndarray, np.ndarray]:
                stored = indices + first
                return np.searchsorted(starts, stored, side="right") - 1, np.asarray(rowval[stored], np.int64) - 1

            yield nzval[first:first + _BLOCK_ENTRIES], locate
            release_pages(nzval[first:first + _BLOCK_ENTRIES])  # (done with: out of the worker's RSS)
            release_pages(rowval[first:first + _BLOCK_ENTRIES])
        return
    array = np.asarray(values)
    if array.ndim == 1:
        for first in range(0, array.shape[0], _BLOCK_ENTRIES):
            def in_vector(indices: np.ndarray, first: int = first) -> tuple[np.ndarray, np.ndarray]:
                return np.zeros_like(indices), indices + first

            yield array[first:first + _BLOCK_ENTRIES], in_vector
            release_pages(array[first:first + _BLOCK_ENTRIES])
        return
    n_rows = array.shape[0]
    for first, last in _column_blocks(array):
        def in_columns(indices: np.ndarray, first: int = first) -> tuple[np.ndarray, np.ndarray]:
            return indices // n_rows + first, indices % n_rows

        yield array[:, first:last].ravel(order="F"), in_columns
        release_pages(array[:, first:last])


def _whole_positions(columns: np.ndarray, rows: np.ndarray, n_rows: int, offset: int, total: int,
                     by_columns: bool) -> np.ndarray:
    """Positions in the whole (column-major) of a piece's columns and rows (of a vector: column 0), the piece holding
    the entries ``offset:offset + n`` of the whole's columns (``by_columns``) or rows, of ``total``."""
    if by_columns:
        return (columns + offset) * n_rows + rows
    return columns * total + offset + rows


def _last_implicit(values: SparseMatrixCSC) -> tuple[int, int]:
    """The column and row of the last position (column-major) a sparse matrix does not store; ``(-1, -1)`` if none."""
    n_rows = int(values.shape[0])
    colptr = np.asarray(values.colptr, dtype=np.int64) - 1
    short = np.flatnonzero(np.diff(colptr) < n_rows)
    if short.shape[0] == 0:
        return -1, -1
    column = int(short[-1])
    free = np.ones(n_rows, dtype=bool)
    free[np.asarray(values.rowval[colptr[column]:colptr[column + 1]], dtype=np.int64) - 1] = False
    return column, int(np.flatnonzero(free)[-1])


@_releasing
def _mode_piece(source: _Source, prefix_text: str, axis: str, start: int, stop: int, offset: int, total: int,
                dimension: int, histograms: tuple[tuple[int, int], ...],
                batch: tuple[int, int] | None) -> _ModeRound:
    """A round of a mode on a range of the values (a task): for each ``(prefix, bits)`` of ``histograms``, the values
    whose key's top ``bits`` bits are ``prefix``, counted by their next 16 bits; for ``batch`` (the lowest and highest
    key of a range), each distinct key in it, its count and its last position in the whole (the piece holds the
    entries ``offset:offset + n`` of the whole's ``dimension``, of ``total``)."""
    view = _range_view(_open(source), axis, start, stop)
    values = query_result(view, as_query_sequence(prefix_text), cache=False).value
    sparse = isinstance(values, SparseMatrixCSC)
    is_matrix = sparse or np.ndim(values) == 2
    dtype = np.asarray(values.nzval).dtype if sparse else np.asarray(values).dtype
    n_rows = int(values.shape[0])
    size = n_rows * int(values.shape[1]) if is_matrix else n_rows
    width = 8 * dtype.itemsize
    zero_key = int(_value_keys(np.zeros(1, dtype=dtype))[0])
    special = _special_keys(dtype) if dtype.kind == "f" else {}

    def located(columns: np.ndarray, rows: np.ndarray) -> np.ndarray:
        return _whole_positions(columns, rows, n_rows, offset, total, is_matrix and dimension == 1)

    counted = [np.zeros(1 << min(_KEY_BITS, width - bits), dtype=np.int64) for _, bits in histograms]
    found: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    zero_signs, nan_keys = 0, np.zeros(0, dtype=np.uint64)
    stored = 0
    for chunk, locate in _located_chunks(values):
        stored += chunk.shape[0]
        raw, keys = _mode_keys(chunk)
        for index, (prefix, bits) in enumerate(histograms):
            inside = keys if bits == 0 else keys[(keys >> (width - bits)) == prefix]
            step = min(_KEY_BITS, width - bits)
            counted[index] += np.bincount(((inside >> (width - bits - step)) & ((1 << step) - 1)).astype(np.intp),
                                          minlength=1 << step)
        if batch is None:
            continue
        where = np.flatnonzero((keys >= batch[0]) & (keys <= batch[1]))
        if where.shape[0] == 0:
            continue
        columns, rows = locate(where)
        found.append(_distinct(keys[where], np.ones(where.shape[0], dtype=np.int64), located(columns, rows)))
        if len(found) > 1:  # (merged as it goes: a piece holds its distinct keys, not every value in the batch)
            found = [_merged(found)]
        if special and batch[0] <= special["zero"] <= batch[1]:
            zero_signs |= int(np.any(raw[where] == special["zero"])) | 2 * int(
                np.any(raw[where] == special["negative_zero"]))
        if special and batch[0] <= special["nan"] <= batch[1]:
            nans = raw[where][keys[where] == special["nan"]]
            nan_keys = np.union1d(nan_keys, nans.astype(np.uint64))
    implicit = size - stored
    if implicit and batch is not None and batch[0] <= zero_key <= batch[1]:
        assert sparse
        column, row = _last_implicit(values)
        found.append((np.array([zero_key], dtype=np.uint64), np.array([implicit], dtype=np.int64),
                      located(np.array([column]), np.array([row]))))
    buckets = []
    for index, (prefix, bits) in enumerate(histograms):
        step = min(_KEY_BITS, width - bits)
        if implicit and (bits == 0 or zero_key >> (width - bits) == prefix):
            counted[index][(zero_key >> (width - bits - step)) & ((1 << step) - 1)] += implicit
        where = np.flatnonzero(counted[index])
        buckets.append((where.astype(np.uint64), counted[index][where]))
    if found:
        keys, counts, last = _merged(found)
    else:
        keys, counts, last = np.zeros(0, np.uint64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    if np.all(counts == 1):  # (continuous values: the counts are not sent)
        counts = np.zeros(0, np.int64)
    return _ModeRound(size, dtype, sparse, tuple(buckets), keys, counts, last, zero_signs, nan_keys)


def _mode(run_round: Callable[[tuple[tuple[int, int], ...], tuple[int, int] | None], list[_ModeRound]],
          reduction: Any, whole: Callable[[], Any]) -> Any:
    """The mode of the values of the pieces, by rounds (``run_round`` runs one round on every piece: histograms of
    some buckets, and a batch); ``whole`` gives the engine's answer when there are no values (a default, or its
    error)."""
    pieces = run_round(((0, 0),), None)
    size = sum(piece.size for piece in pieces)
    if size == 0:
        return whole()
    dtype = pieces[0].dtype
    sparse = any(piece.sparse for piece in pieces)
    width = 8 * dtype.itemsize

    def buckets(index: int, prefix: int, bits: int) -> list[tuple[int, int, int]]:
        """The buckets of the next bits under ``prefix`` that hold values: (prefix, bits, count)."""
        where = np.concatenate([piece.buckets[index][0] for piece in pieces])
        counts = np.concatenate([piece.buckets[index][1] for piece in pieces])
        unique, inverse = np.unique(where, return_inverse=True)
        summed = np.bincount(inverse, weights=counts, minlength=unique.shape[0])
        step = min(_KEY_BITS, width - bits)
        return [((prefix << step) | int(bucket), bits + step, int(count))
                for bucket, count in zip(unique, summed, strict=True) if count > 0]

    def key_range(prefix: int, bits: int) -> tuple[int, int]:
        return prefix << (width - bits), ((prefix + 1) << (width - bits)) - 1

    regions = buckets(0, 0, 0)  # (in the order of their keys)
    best: tuple[int, int, int] | None = None  # (count, last position, key)
    zero_signs, nan_keys = 0, np.zeros(0, dtype=np.uint64)
    while regions:
        ready = [count <= _MODE_BATCH or bits == width for _, bits, count in regions]
        split = tuple((prefix, bits) for (prefix, bits, _), is_ready in zip(regions, ready, strict=True)
                      if not is_ready)
        # The batch: the first run of consecutive ready buckets, of at most _MODE_BATCH values (or one bucket).
        first = ready.index(True) if True in ready else len(regions)
        end, held = first, 0
        while end < len(regions) and ready[end] and (end == first or held + regions[end][2] <= _MODE_BATCH):
            held += regions[end][2]
            end += 1
        batch = None
        if first < end:
            batch = (key_range(*regions[first][:2])[0], key_range(*regions[end - 1][:2])[1])
        pieces = run_round(split, batch)
        kept = [region for index, region in enumerate(regions) if not ready[index] or not first <= index < end]
        regions = [region for region in kept if (region[0], region[1]) not in split]
        for index, (prefix, bits) in enumerate(split):
            regions.extend(buckets(index, prefix, bits))
        regions.sort(key=lambda region: key_range(region[0], region[1])[0])
        if batch is None:
            continue
        keys, counts, last = _distinct(np.concatenate([piece.keys for piece in pieces]),
                                       np.concatenate([piece.counts if piece.counts.shape[0] == piece.keys.shape[0]
                                                       else np.ones(piece.keys.shape[0], np.int64)
                                                       for piece in pieces]),
                                       np.concatenate([piece.last for piece in pieces]))
        for piece in pieces:
            zero_signs |= piece.zero_signs
            nan_keys = np.union1d(nan_keys, piece.nan_keys)
        if keys.shape[0] == 0:
            continue
        top = int(counts.max())
        at = int(np.argmin(np.where(counts == top, last, np.iinfo(np.int64).max)))
        if best is None or (top, -int(last[at])) > (best[0], -best[1]):
            best = (top, int(last[at]), int(keys[at]))
    assert best is not None
    key = best[2]
    value = _key_scalar(key, dtype)
    if dtype.kind == "f":
        special = _special_keys(dtype)
        if key == special["zero"] and not sparse and zero_signs == 2:  # (only -0.0: np.unique's representative)
            value = dtype.type(-0.0)
        elif key == special["nan"] and nan_keys.shape[0] == 1:  # (the NaN as stored)
            value = _key_scalar(int(nan_keys[0]), dtype)
    return _cast(value, reduction.reduction_result_type(dtype))


@_releasing
def _strings_mode_piece(source: _Source, prefix_text: str, axis: str, start: int, stop: int, offset: int, total: int,
                        dimension: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The distinct strings of a range of the values whose mode is taken (a task), each one's count and the position
    of its last occurrence in the whole (column-major; the piece holds the entries ``offset:offset + n`` of the whole's
    ``dimension``, of ``total``)."""
    import pandas as pd

    view = _range_view(_open(source), axis, start, stop)
    values = np.asarray(query_result(view, as_query_sequence(prefix_text), cache=False).value)
    codes, distinct = pd.factorize(values.ravel(order="F"), use_na_sentinel=False)
    counts = np.bincount(codes, minlength=distinct.shape[0]).astype(np.int64)
    last = np.full(distinct.shape[0], -1, dtype=np.int64)
    np.maximum.at(last, codes, np.arange(codes.shape[0], dtype=np.int64))
    n_rows = max(1, values.shape[0])  # (a vector: one column of them)
    last = _whole_positions(last // n_rows, last % n_rows, n_rows, offset, total, values.ndim == 2 and dimension == 1)
    return np.asarray(distinct, dtype=object), counts, last


def _combine_strings_modes(source: _Source, query_text: str,
                           *pieces: tuple[np.ndarray, np.ndarray, np.ndarray]) -> Any:
    """The mode of strings from the pieces' distinct strings (a task): the most frequent; of ties, the one whose last
    occurrence is first (it reached the top count first, as Julia's ``StatsBase.mode``)."""
    import pandas as pd

    if not any(distinct.shape[0] for distinct, _, _ in pieces):  # (no values: the engine's default, or its error)
        return _evaluate_whole(source, query_text)
    table = pd.DataFrame({"value": np.concatenate([distinct for distinct, _, _ in pieces]),
                          "count": np.concatenate([counts for _, counts, _ in pieces]),
                          "last": np.concatenate([last for _, _, last in pieces])})
    summed = table.groupby("value", sort=False).agg({"count": "sum", "last": "max"})
    top = summed[summed["count"] == summed["count"].max()]
    return str(top["last"].idxmin())


def _offsets(ranges: list[tuple[int, int, int]]) -> list[int]:
    """Where each range's selected entries start among all of them, and (last) how many there are."""
    return np.concatenate(([0], np.cumsum([count for _, _, count in ranges]))).astype(int).tolist()


def _mode_rounds(source: _Source, prefix_text: str, axis: str, ranges: list[tuple[int, int, int]], dimension: int,
                 compute: Callable[[list[Any]], list[Any]]) -> Callable[..., list[_ModeRound]]:
    """A function running one round of a mode on every range (``compute`` computes a list of delayed tasks)."""
    import dask

    piece = dask.delayed(_mode_piece, pure=True)
    offsets = _offsets(ranges)
    return lambda histograms, batch: compute([
        piece(source, prefix_text, axis, start, stop, offset, offsets[-1], dimension, histograms, batch)
        for (start, stop, _), offset in zip(ranges, offsets, strict=False)])


def _by_rounds(kind: str, source: _Source, prefix_text: str, axis: str, ranges: list[tuple[int, int, int]],
               dimension: int, reduction: Any, compute: Callable[[list[Any]], list[Any]],
               whole: Callable[[], Any]) -> Any:
    """A selection (``kind``: ``"select"``) or a mode (``"mode"``), each round's tasks computed by ``compute``."""
    if kind == "mode":
        return _mode(_mode_rounds(source, prefix_text, axis, ranges, dimension, compute), reduction, whole)
    return _select(_select_rounds(source, prefix_text, axis, ranges, compute), reduction, whole)


def _in_rounds(kind: str, source: _Source, query_text: str, prefix_text: str, reduction_text: str, axis: str,
               ranges: list[tuple[int, int, int]], dimension: int) -> Any:
    """A selection (``kind``: ``"select"``) or a mode (``"mode"``) as one task of a lazy graph: on a worker it submits
    each round's pieces to the cluster (``distributed.worker_client``, which frees its thread meanwhile); elsewhere it
    computes them with dask's current scheduler."""
    import dask

    reduction: Any = as_query_sequence(reduction_text).operations[0]

    def evaluate(compute: Callable[[list[Any]], list[Any]]) -> Any:
        return _by_rounds(kind, source, prefix_text, axis, ranges, dimension, reduction, compute,
                          lambda: _evaluate_whole(source, query_text))

    try:
        from distributed import get_worker, worker_client

        get_worker()
    except (ImportError, ValueError):
        return evaluate(lambda tasks: list(dask.compute(*tasks)))
    with worker_client() as client:
        return evaluate(lambda tasks: list(client.gather(client.compute(tasks))))


# Building the graph.


@dataclass
class _Graph:
    """The tasks of a query and how their results make the whole."""

    plan: _Plan
    pieces: list[Any]  # dask delayed values
    lengths: list[int] = field(default_factory=list)  # entries of the split axis in each piece
    probe: QueryResult | None = None  # the query on one entry: types, the other dimension, its names
    entries: np.ndarray | None = None  # the (selected) entries of the split axis
    local_value: Any = None  # a set of names, evaluated locally
    group_axis: str | None = None  # the axis whose entries are the groups of a group-by (``=@``)
    ranges: list[tuple[int, int, int]] = field(default_factory=list)  # a selection's pieces
    source: Any = None  # (a DafSource, or a Delayed _DerivedSource)
    query_text: str = ""
    final_dtype: np.dtype | None = None  # a group-by's, after the steps that follow it


def _ranges(selected: np.ndarray, length: int, entry_bytes: float, chunk_bytes: int) -> list[tuple[int, int, int]]:
    """Contiguous ranges of an axis of ``length`` entries, each about ``chunk_bytes`` of data, and how many of the
    ``selected`` positions each holds (ranges holding none are left out)."""
    per_range = max(1, int(chunk_bytes // max(entry_bytes, 1.0)))
    ranges = []
    for start in range(0, length, per_range):
        stop = min(length, start + per_range)
        count = int(np.searchsorted(selected, stop) - np.searchsorted(selected, start))
        if count:
            ranges.append((start, stop, count))
    return ranges


def _entry_bytes(local: DafReader, plan: _Plan) -> float:
    """About how many bytes of stored data one entry of the split axis reads: a matrix lookup's stored bytes per
    entry of the axis (a sparse matrix's from the density of a few columns spread over it; nothing is read whole),
    a vector's 8."""
    assert plan.axis is not None
    if plan.matrix is None:
        return _VECTOR_ENTRY_BYTES
    rows_axis, columns_axis, name = plan.matrix
    for rows, columns in ((rows_axis, columns_axis), (columns_axis, rows_axis)):
        if local.has_matrix(rows, columns, name, relayout=False):
            n_rows, n_columns = local.axis_length(rows), local.axis_length(columns)
            probe = local.get_stored_matrix_columns(rows, columns, name, slice(0, 0))  # (no data read)
            if isinstance(probe, SparseMatrixCSC):
                sampled = np.unique(np.linspace(0, max(0, n_columns - 1), min(n_columns, _SAMPLED_COLUMNS))
                                    .astype(np.int64))
                sample = local.get_stored_matrix_columns(rows, columns, name, sampled) if sampled.shape[0] else probe
                nnz = sample.nnz if isinstance(sample, SparseMatrixCSC) else n_rows * sampled.shape[0]
                per_column = nnz / max(1, sampled.shape[0]) * (probe.nzval.dtype.itemsize + 8) + 8
            else:
                per_column = n_rows * np.asarray(probe).dtype.itemsize
            return per_column * n_columns / max(1, local.axis_length(plan.axis))
    return _VECTOR_ENTRY_BYTES * max(local.axis_length(rows_axis), local.axis_length(columns_axis))


def _graph(daf: DafReader | str | os.PathLike, query_value: Any, chunk_bytes: int | None,
           plan: _Plan | None = None) -> _Graph:
    import dask
    import pandas as pd

    if chunk_bytes is not None and (not isinstance(chunk_bytes, int) or chunk_bytes <= 0):
        raise DafValueError(f"invalid chunk_bytes: {chunk_bytes!r}\n(expected a positive number of bytes)")
    source, local = local_reader(daf)
    sequence = as_query_sequence(query_value)
    text = str(sequence)
    if plan is None:
        plan = _plan(local, sequence)
        # (A mask that looks up another axis keeps that axis from being split, as the two axes of a square matrix
        # keep each other: evaluated first, and aliased.)
        derived = _derived(local, sequence) if plan.dimensions >= 0 else None
        if derived is not None:
            derived_local, derived_sequence, masks, square = derived
            derived_plan = _plan(derived_local, derived_sequence)
            if derived_plan.kind != "one":
                packed = tuple((axis, name, np.packbits(bits).tobytes()) for axis, name, bits in masks)
                # (One key of the graph that every task takes: its bits are sent to a worker once.)
                source = dask.delayed(_DerivedSource(source, packed, square), pure=True)
                local, sequence, plan = derived_local, derived_sequence, derived_plan
                text = str(sequence)
    if plan.dimensions < 0:
        return _Graph(plan, [], local_value=local.get_np_query(sequence, cache=False))
    whole = _Graph(plan, [dask.delayed(_evaluate_whole, pure=True)(source, text)])
    if plan.kind == "one":
        return whole
    assert plan.axis is not None and plan.axis_query is not None
    if plan.after:  # (the pieces evaluate the query up to its combined reduction; the steps after it follow)
        text = str(QuerySequence(*sequence.operations[:len(sequence.operations) - len(plan.after)]))
    # The entries of the split axis the query selects (its own axis query: ``@ gene [ is_marker ]``).
    entries = np.asarray(query_result(local, plan.axis_query, cache=False).value, dtype=object)
    positions = np.sort(pd.Index(local.axis_vector(plan.axis), dtype=object).get_indexer(entries).astype(np.int64))
    if positions.shape[0] == 0:
        whole.plan = _one(plan.dimensions, "the split axis has no selected entries")
        return whole
    # The query on one entry, in the client: raises the query's errors here, and tells the result's types and its
    # other dimension.
    probe_view = _range_view(local, plan.axis, int(positions[0]), int(positions[0]) + 1, keep=False)
    # (A group-by's groups are not all in one entry: its parts are evaluated, not the whole.)
    grouped = plan.kind in ("group", "grouped")
    probe = query_result(probe_view, plan.prefix if grouped else sequence, cache=False)
    probe.entries_of_dimensions = probe.entries  # (read now: the names of a whole axis are read lazily)
    if _ALIAS in probe.dimension_names:  # (the columns of a square matrix: named as the query names them)
        square_axis = str(getattr(sequence.operations[0], "axis_name", ""))
        probe.dimension_names = tuple(square_axis if name == _ALIAS else name for name in probe.dimension_names)
    group_axis = None
    strings_mode = False
    if plan.kind in ("reduce", "select", "mode", "group", "rows", "grouped"):
        assert plan.prefix is not None and plan.reduction is not None
        # (The values reduced must be numbers the kernels take, unless only counted.)
        reduced = query_result(probe_view, plan.prefix, cache=False).value
        reduced_type = reduced.nzval.dtype if isinstance(reduced, SparseMatrixCSC) else np.asarray(reduced).dtype
        strings_mode = plan.kind == "mode" and reduced_type.kind in "OUS"
        if reduced_type.kind not in "biuf" and not isinstance(plan.reduction, Count) and not strings_mode:
            if grouped:
                query_result(probe_view, sequence, cache=False)  # (the engine's error for the type)
            whole.plan = _one(plan.dimensions, "the reduced values are not numbers")
            return whole
    final_dtype = None
    if grouped and plan.after:  # (the steps' errors, raised here, and the result's type)
        final = as_numpy(query_result(probe_view, sequence, cache=False))
        final_dtype = np.asarray(final).dtype
    if grouped:
        from ..queries.machine import final_state
        from ..queries.state import Purpose

        assert plan.reduction is not None
        # (Only its type; and for a matrix the kept entries: the stored rows of the probe.)
        shape = (0,) if plan.kind == "group" else (np.shape(reduced)[0], 0)
        probe.value = np.zeros(shape, dtype=plan.reduction.reduction_result_type(reduced_type))

        assert plan.key_query is not None
        key_state = final_state(probe_view, plan.key_query, Purpose.COMPUTE)
        key = key_state.stack[-1]
        group_axis = key.property_axis_name
        values_source = key.values_source if group_axis is None else None  # (recorded categories order groups)
    ranges = _ranges(positions, local.axis_length(plan.axis), _entry_bytes(local, plan),
                     DEFAULT_CHUNK_BYTES if chunk_bytes is None else chunk_bytes)
    if plan.kind == "split":
        piece = dask.delayed(_evaluate_piece, pure=True)
        pieces = [piece(source, text, plan.axis, start, stop) for start, stop, _ in ranges]
        return _Graph(plan, pieces, [count for _, _, count in ranges], probe, entries)
    assert plan.prefix is not None and plan.reduction is not None
    reduction_text = str(plan.reduction)
    if plan.kind == "rows":
        row_partial = dask.delayed(_row_partial_piece, pure=True)
        partials = [row_partial(source, str(plan.prefix), reduction_text, plan.axis, start, stop)
                    for start, stop, _ in ranges]
        combined = dask.delayed(_combine_rows, pure=True)(source, text, reduction_text, *partials)
        return _Graph(plan, [combined], [], probe)
    if grouped:
        assert plan.key_query is not None
        group = dask.delayed(_group_piece, pure=True)
        partials = [group(source, str(plan.prefix), str(plan.key_query), reduction_text, plan.axis, start, stop)
                    for start, stop, _ in ranges]
        groups_dimension = plan.dimension if plan.kind == "grouped" else 0
        combined = dask.delayed(_combine_groups, pure=True)(source, text, reduction_text, group_axis,
                                                            values_source, groups_dimension, *partials)
        return _Graph(plan, [combined], [], probe, group_axis=group_axis, final_dtype=final_dtype)
    if plan.kind == "mode" and strings_mode:  # (each piece's distinct strings, combined in one task)
        offsets = _offsets(ranges)
        piece = dask.delayed(_strings_mode_piece, pure=True)
        partials = [piece(source, str(plan.prefix), plan.axis, start, stop, offset, offsets[-1], plan.dimension)
                    for (start, stop, _), offset in zip(ranges, offsets, strict=False)]
        plan.kind = "reduce"
        return _Graph(plan, [dask.delayed(_combine_strings_modes, pure=True)(source, text, *partials)], [], probe)
    if plan.kind in ("select", "mode"):
        task = dask.delayed(_in_rounds, pure=True)(plan.kind, source, text, str(plan.prefix), reduction_text,
                                                   plan.axis, ranges, plan.dimension)
        return _Graph(plan, [task], [count for _, _, count in ranges], probe, ranges=ranges, source=source,
                      query_text=text)
    # (The kernels take the GeoMean of a vector, or of a dense matrix of one row or column, in Float64 logs.)
    dense_vector = not isinstance(reduced, SparseMatrixCSC) \
        and (np.ndim(reduced) == 1 or positions.shape[0] == 1 or np.shape(reduced)[1 - plan.dimension] == 1)
    partial = dask.delayed(_partial_piece, pure=True)
    partials = [partial(source, str(plan.prefix), reduction_text, plan.axis, start, stop, dense_vector)
                for start, stop, _ in ranges]
    return _Graph(plan, [dask.delayed(_combine, pure=True)(source, text, reduction_text, *partials)], [], probe)


# Assembling the pieces.


def _finish(value: Any, steps: tuple) -> Any:
    """The steps that follow a combined reduction (element-wise, comparisons, reductions) applied to its result (a
    scalar, or the small vector or matrix of a group-by or of one value per row), by the engine itself: the result
    held by a ``MemoryDaf`` and queried there."""
    if not steps:
        return value
    if np.ndim(value) == 0:  # (only element-wise steps follow a scalar)
        for step in steps:
            value = step.compute_eltwise(value)
        return value
    array = np.asarray(value)
    memory = MemoryDaf(name="combined")
    head: tuple[Any, ...]
    if array.ndim == 1:
        memory.add_axis("entry", [str(index) for index in range(array.shape[0])])
        memory.set_vector("entry", "value", array)
        head = (Axis("entry"), LookupVector("value"))
    else:
        memory.add_axis("row", [str(index) for index in range(array.shape[0])])
        memory.add_axis("column", [str(index) for index in range(array.shape[1])])
        memory.set_matrix("row", "column", "value", array, relayout=False)
        head = (Axis("row"), Axis("column"), LookupMatrix("value"))
    return as_numpy(query_result(memory, QuerySequence(*head, *steps), cache=False))


def _finished(pair: tuple[Any, Any], steps: tuple) -> tuple[Any, Any]:
    """:func:`_finish` of a group-by's values, with its group names."""
    return _finish(pair[0], steps), pair[1]


def _is_sparse(value: Any) -> bool:
    import scipy.sparse

    return scipy.sparse.issparse(value)


def _assemble(graph: _Graph, values: list[Any]) -> Any:
    """The whole result from the computed pieces (numpy, scipy csc or a scalar)."""
    plan = graph.plan
    if plan.kind in ("group", "grouped"):
        return values[0][0]  # (the values; the group names are values[0][1])
    if plan.kind != "split":
        return values[0]
    if plan.dimensions == 1:
        return np.concatenate([np.asarray(value) for value in values])
    if any(_is_sparse(value) for value in values) and all(_is_sparse(value) for value in values):
        import scipy.sparse

        stack = scipy.sparse.hstack if plan.dimension == 1 else scipy.sparse.vstack
        return stack(values, format="csc")
    dense = [value.toarray() if _is_sparse(value) else np.asarray(value) for value in values]
    return np.asfortranarray(np.concatenate(dense, axis=plan.dimension))


# The API.


def query(daf: DafReader | str | os.PathLike, query: Any, *, chunk_bytes: int | None = None) -> dask.array.Array:
    """The result of a Daf query on a stored data set (an open one, or its path or URL) as a lazy
    ``dask.array.Array``: 1-d for a vector, 2-d for a matrix (sparse pieces are ``scipy.sparse.csc_matrix``), 0-d for
    a scalar. Pieces are contiguous ranges of an axis that survives in the result, each about ``chunk_bytes`` of
    stored data (default 128 MiB), evaluated by workers that open the data set themselves (see the module
    docstring); nothing large is in the graph. Forms that are not split are one task, of unknown (NaN) shape.
    A set of names is not an array: use :func:`get_query`.

    Example:
        >>> import pydaf, pydaf.dask, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "cells.h5df")
        >>> daf = pydaf.open_daf(path, "w").add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
        >>> daf = daf.set_matrix("cell", "gene", "UMIs", [[1, 2], [3, 4], [5, 6]])
        >>> lazy = pydaf.dask.query(path, "@ cell @ gene :: UMIs >- Sum", chunk_bytes=24)
        >>> lazy.numblocks, lazy.compute(scheduler="synchronous").tolist()
        ((2,), [9, 12])
    """
    import dask.array as da

    graph = _graph(daf, query, chunk_bytes)
    plan = graph.plan
    if plan.dimensions < 0:
        raise DafQueryError(f"a set of names is not an array: {as_query_sequence(query)}",
                            hint="hint: pydaf.dask.get_query (or the data set's own get_query) gives the set")
    if plan.kind == "one":
        nan = float("nan")
        return da.from_delayed(graph.pieces[0], shape=(nan,) * plan.dimensions, dtype=object)
    assert graph.probe is not None
    probe_value = as_numpy(graph.probe)
    if plan.after:  # (the steps after the combined reduction, on its result)
        import dask

        final_dimensions = query_result_dimensions(as_query_sequence(query))
        finish = dask.delayed(_finished if plan.kind in ("group", "grouped") else _finish, pure=True)
        graph.pieces[0] = finish(graph.pieces[0], plan.after)
        if plan.kind in ("group", "grouped"):
            probe_value = np.zeros(np.shape(probe_value), dtype=graph.final_dtype)
        if final_dimensions == 0:
            import operator

            value = graph.pieces[0]
            if plan.kind in ("group", "grouped"):
                value = dask.delayed(operator.getitem, pure=True)(value, 0)
            return da.from_delayed(value, shape=(), dtype=np.asarray(probe_value).dtype)
    if plan.kind in ("reduce", "select", "mode"):
        return da.from_delayed(graph.pieces[0], shape=(), dtype=np.asarray(probe_value).dtype)
    if plan.kind == "rows":
        return da.from_delayed(graph.pieces[0], shape=probe_value.shape, dtype=probe_value.dtype)
    if plan.kind in ("group", "grouped"):  # (how many groups is known once every piece is, or the group axis's)
        import operator

        import dask

        values = dask.delayed(operator.getitem, pure=True)(graph.pieces[0], 0)
        n_groups = float("nan") if graph.group_axis is None else local_reader(daf)[1].axis_length(graph.group_axis)
        grouped_shape: tuple[float, ...] = (n_groups,)
        if plan.kind == "grouped":  # (the probe's rows: the kept entries)
            n_kept = probe_value.shape[0]
            grouped_shape = (n_groups, n_kept) if plan.dimension == 0 else (n_kept, n_groups)
        return da.from_delayed(values, shape=grouped_shape, dtype=probe_value.dtype)
    dtype = probe_value.dtype
    arrays = []
    for piece, length in zip(graph.pieces, graph.lengths, strict=True):
        if plan.dimensions == 1:
            shape: tuple[int, ...] = (length,)
            meta: Any = np.empty((0,), dtype=dtype)
        else:
            shape = (length, probe_value.shape[1]) if plan.dimension == 0 else (probe_value.shape[0], length)
            if _is_sparse(probe_value):
                import scipy.sparse

                meta = scipy.sparse.csc_matrix((0, 0), dtype=dtype)
            else:
                meta = np.empty((0, 0), dtype=dtype)
        arrays.append(da.from_delayed(piece, shape=shape, dtype=dtype, meta=meta))
    return arrays[0] if len(arrays) == 1 else da.concatenate(arrays, axis=plan.dimension)


def get_np_query(daf: DafReader | str | os.PathLike, query: Any, *, chunk_bytes: int | None = None,
                 **compute: Any) -> Any:
    """The result of a Daf query evaluated on the cluster (see :func:`query`), in the forms of
    :meth:`~pydaf.DafReader.get_np_query`: a numpy vector, a column-major numpy or ``scipy.sparse.csc_matrix``
    matrix, a numpy scalar, or a set of names (evaluated locally). ``compute`` goes to ``dask.compute`` (e.g.
    ``scheduler="synchronous"``).

    Example:
        >>> import pydaf, pydaf.dask, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "cells.h5df")
        >>> daf = pydaf.open_daf(path, "w").add_axis("cell", ["A", "B", "C"]).set_vector("cell", "age", [3, 5, 9])
        >>> pydaf.dask.get_np_query(daf, "@ cell : age >> Sum", scheduler="synchronous")
        np.int64(17)
        >>> pydaf.dask.get_np_query(daf, "@ cell [ age > 4 ] : age % Abs", scheduler="synchronous").tolist()
        [5, 9]
    """
    import dask

    graph = _graph(daf, query, chunk_bytes)
    if graph.plan.dimensions < 0:
        return graph.local_value
    if graph.plan.kind in ("select", "mode"):
        return _finish(_select_eagerly(graph, compute), graph.plan.after)
    values = list(dask.compute(*graph.pieces, **compute))
    return _finish(_assemble(graph, values), graph.plan.after)


def get_query(daf: DafReader | str | os.PathLike, query: Any, *, chunk_bytes: int | None = None,
              **compute: Any) -> Any:
    """As :func:`get_np_query`, in the forms of :meth:`~pydaf.DafReader.get_query`: a vector as a ``pandas.Series``
    and a matrix as a ``pandas.DataFrame`` labelled by entry names (read by the client), a scalar, or a set of names.

    Example:
        >>> import pydaf, pydaf.dask, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "cells.h5df")
        >>> daf = pydaf.open_daf(path, "w").add_axis("cell", ["A", "B", "C"]).set_vector("cell", "age", [3, 5, 9])
        >>> pydaf.dask.get_query(path, "@ cell [ age > 4 ] : age", scheduler="synchronous").to_dict()
        {'B': 5, 'C': 9}
    """
    import dask

    graph = _graph(daf, query, chunk_bytes)
    plan = graph.plan
    if plan.dimensions < 0:
        return graph.local_value
    if plan.kind == "one":  # (labelled by the worker that evaluates it)
        task = dask.delayed(_evaluate_whole_pandas, pure=True)(source_of(daf), str(as_query_sequence(query)))
        return dask.compute(task, **compute)[0]
    if plan.kind in ("select", "mode"):
        return _finish(_select_eagerly(graph, compute), plan.after)
    values = list(dask.compute(*graph.pieces, **compute))
    value = _finish(_assemble(graph, values), plan.after)
    if np.ndim(value) == 0:
        return value
    if plan.kind == "group":
        import pandas as pd

        return pd.Series(value, index=pd.Index(values[0][1], name=graph.group_axis, dtype=object), copy=False)
    assert graph.probe is not None
    if plan.kind == "grouped":  # (the probe's rows are the kept entries)
        kept = (graph.probe.entries[0], graph.probe.dimension_names[0])
        groups = (values[0][1], graph.group_axis)
        labels = (groups, kept) if plan.dimension == 0 else (kept, groups)
        return as_pandas(QueryResult(2, value, tuple(entries for entries, _ in labels),
                                     tuple(name for _, name in labels)))
    if plan.kind == "rows":  # (the probe has every row)
        return as_pandas(QueryResult(1, value, graph.probe.entries, graph.probe.dimension_names))
    assert graph.entries is not None
    entries = list(graph.probe.entries)
    entries[plan.dimension] = graph.entries
    if _is_sparse(value):
        import pandas as pd

        index = pd.Index(entries[0], name=graph.probe.dimension_names[0], dtype=object)
        columns = pd.Index(entries[1], name=graph.probe.dimension_names[1], dtype=object)
        return pd.DataFrame.sparse.from_spmatrix(value, index=index, columns=columns)
    return as_pandas(QueryResult(plan.dimensions, value, tuple(entries), graph.probe.dimension_names))


def _select_eagerly(graph: _Graph, compute: dict[str, Any]) -> Any:
    """A selection (or a mode) run from the calling process: one ``dask.compute`` per round."""
    import dask

    plan = graph.plan
    assert graph.source is not None and plan.axis is not None and plan.prefix is not None
    assert plan.reduction is not None
    source, text = graph.source, str(plan.prefix)
    query_text = str(graph.query_text)

    def whole() -> Any:
        return dask.compute(dask.delayed(_evaluate_whole, pure=True)(source, query_text), **compute)[0]

    def computed(tasks: list[Any]) -> list[Any]:
        return list(dask.compute(*tasks, **compute))

    return _by_rounds(plan.kind, source, text, plan.axis, graph.ranges, plan.dimension, plan.reduction, computed,
                      whole)


@_releasing
def _evaluate_whole_pandas(source: _Source, query_text: str) -> Any:
    """The whole query in one task, labelled."""
    return _open(source).get_query(query_text, cache=False)
