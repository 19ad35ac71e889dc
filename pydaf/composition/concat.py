"""Concatenating data sets along one or more axes (Julia's ``Concat``): :func:`concatenate` and :class:`MergeAction`.

The vectors and matrices of a concatenated axis are concatenated; the other axes must be the same in every source and
are copied once; scalars and the data of other axes are dropped, kept from the last source, or collected into a new
``dataset`` axis, as ``merge`` says. Julia's rules throughout: its prefixing heuristic, its element type promotion, its
sparse-or-dense choice and its messages (``docs/design/concat.md`` lists where pydaf is stricter).

Everything is checked before anything is written (a refused call changes nothing). Then each concatenated matrix is
written straight into the destination's ``empty_dense_matrix`` / ``empty_sparse_matrix`` buffers (mapped into the
file for H5df and FilesDaf), source by source, a block of columns or entries at a time, from the sources' stored arrays
(zero-copy, mapped where the store is); the pages of both maps are released after each block, so concatenating data
larger than memory keeps a small resident set. A sparse source is never densified.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from .._os.maps import release_pages
from ..core.readers import DafReader
from ..errors import DafMissingError, DafShapeError, DafTypeError, DafValueError, existing_property
from ..kernels.relayout import transpose_csc_into
from ..keys import PropertyKey, pairs_as_dict
from ..queries.query import julia_string
from ..sparse import SparseMatrixCSC, SparseVector
from ..storage_types import STRING_DTYPE, StorageScalar, indtype_for_size, scalar_dtype, scalar_value
from .copies import expand_tensors

if TYPE_CHECKING:
    from tqdm import tqdm

    from ..core.writers import DafWriter

__all__ = ["MergeAction", "concatenate"]


class MergeAction(enum.Enum):
    """What :func:`concatenate` does with a property that is not along a concatenated axis (a scalar, or a vector or
    matrix of other axes), per ``merge``.

    Example:
        >>> [action.name for action in MergeAction]
        ['SkipProperty', 'LastValue', 'CollectAxis']
    """

    SkipProperty = "SkipProperty"
    """Leave the property out of the result (the default)."""
    LastValue = "LastValue"
    """Take the value of the last source that has the property."""
    CollectAxis = "CollectAxis"
    """Collect the value of every source along the dataset axis: a scalar becomes a vector of the dataset axis, a
    vector of an axis a matrix of that axis and the dataset axis (refused for matrices: Daf has no 3D data)."""


#: Bytes of values copied between releasing the pages of the maps (bounds the resident set of the streaming copy).
_BLOCK_BYTES = 1 << 23
#: Bytes of dense values sparsified at a time (finding the non-zeros makes two 8-byte indices per non-zero).
_SPARSIFY_BLOCK_BYTES = 1 << 22


def concatenate(destination: DafWriter, axis: str | Sequence[str], sources: Sequence[DafReader], *,
                names: Sequence[str] | None = None, dataset_axis: str | None = "dataset", dataset_property: bool = True,
                prefix: bool | Sequence[bool] = False,
                prefixed: set[str] | frozenset[str] | Sequence[set[str] | frozenset[str]] | None = None,
                empty: Mapping[Any, StorageScalar] | Iterable[tuple[Any, StorageScalar]] | None = None,
                sparse_if_saves_storage_fraction: float = 0.25,
                merge: Mapping[Any, MergeAction] | Iterable[tuple[Any, MergeAction]] | None = None,
                overwrite: bool = False, progress: bool = True) -> None:
    """Concatenate ``sources`` into ``destination`` along ``axis`` (a name, or a list of names to concatenate along
    several axes at once); Julia's ``concatenate!``.

    Each source is named by ``names`` (default: the sources' names). Unless ``dataset_axis`` is ``None``, a new axis of
    that name lists the sources, and (with ``dataset_property``) each concatenated axis gets a vector of that name
    telling the source of each entry. The entries of a concatenated axis must be unique across the sources, or be
    made so by ``prefix`` (``"<name>."`` before each entry; one flag, or one per axis). Vectors holding entries of a
    prefixed axis are prefixed too: those named like the axis or ``<axis>.<suffix>``, or exactly those listed in
    ``prefixed`` (a set, or one set per axis).

    Vectors of a concatenated axis, and matrices of it and another axis, are concatenated; a source that lacks one is
    filled with its ``empty`` value (a dict or ``(key, value)`` pairs keyed by ``(axis, name)`` / ``(rows_axis,
    columns_axis, name)`` / ``(main_axis, rows_axis, columns_axis, name)``), which must then be given. The element
    type is Julia's promotion of the sources' (and the empty value's) types. A concatenated matrix is stored with the
    concatenated axis as its columns; it is sparse if that takes at most ``1 - sparse_if_saves_storage_fraction`` of the
    dense size (dense sources counted as fully non-zero). The other axes must have the same entries in every source.
    Scalars and the vectors and matrices of other axes are dropped unless ``merge`` (``(key, MergeAction)`` pairs,
    ``"*"`` wildcards, the last matching pair wins; matrix keys name one layout) says to keep the last value or collect
    them along the dataset axis. Existing properties of ``destination`` are replaced only with ``overwrite``; its axes
    never are. ``progress=False`` silences the progress bar.

    Example:
        >>> import pydaf
        >>> first = pydaf.MemoryDaf(name="first").add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])
        >>> second = pydaf.MemoryDaf(name="second").add_axis("cell", ["A"]).set_vector("cell", "age", [3])
        >>> destination = pydaf.MemoryDaf(name="both")
        >>> concatenate(destination, "cell", [first, second], names=["first", "second"], prefix=True, progress=False)
        >>> destination.axis_vector("cell").tolist(), destination.get_vector("cell", "age").tolist()
        (['first.A', 'first.B', 'second.A'], [1, 2, 3])
        >>> destination.get_vector("cell", "dataset").tolist()
        ['first', 'first', 'second']
    """
    request = _Request.checked(destination, axis, sources, names=names, dataset_axis=dataset_axis,
                               dataset_property=dataset_property, prefix=prefix, prefixed=prefixed, empty=empty,
                               fraction=sparse_if_saves_storage_fraction, merge=merge, overwrite=overwrite)
    with ExitStack() as locks:
        # The destination first: a source that shares its lock (a read-only view of it) can then still be read.
        locks.enter_context(destination.write_lock())
        for source in request.sources:
            locks.enter_context(source.read_lock())
        steps = _Planner(request).plan()
        _execute(destination, steps, overwrite=overwrite, progress=progress)


# The request: the arguments, validated (Julia asserts these; here they are errors naming the argument).


@dataclass(frozen=True)
class _Request:
    destination: DafWriter
    axes: list[str]
    sources: list[DafReader]
    names: list[str]
    dataset_axis: str | None
    dataset_property: bool
    prefixes: list[bool]
    prefixed: list[frozenset[str]] | None
    empty: dict[Any, StorageScalar]
    fraction: float
    merge: list[tuple[PropertyKey, MergeAction]]
    overwrite: bool

    @staticmethod
    def checked(destination: DafWriter, axis: str | Sequence[str], sources: Sequence[DafReader], *,
                names: Sequence[str] | None, dataset_axis: str | None, dataset_property: bool,
                prefix: bool | Sequence[bool], prefixed: Any, empty: Any, fraction: float, merge: Any,
                overwrite: bool) -> _Request:
        if isinstance(fraction, bool) or not isinstance(fraction, float | int | np.floating | np.integer) or not (
                0 < fraction < 1):
            raise DafValueError(f"invalid sparse_if_saves_storage_fraction: {fraction!r}\n(expected a number between 0 "
                                "and 1, exclusive)")
        axes = [axis] if isinstance(axis, str) else list(axis)
        _require_names(axes, "concatenated axes")
        if not axes:
            raise DafValueError("no axis to concatenate")
        sources = list(sources)
        if not sources:
            raise DafValueError(f"no sources to concatenate into the daf data: {destination.name}",
                                daf_name=destination.name, daf_preposition=None)
        for source in sources:
            if not isinstance(source, DafReader):
                raise DafTypeError(f"not a daf data set: {source!r}\n(a source concatenated into the daf data: "
                                   f"{destination.name})", daf_name=destination.name, daf_preposition=None)
        names = [source.name for source in sources] if names is None else list(names)
        _require_names(names, "names of the concatenated data sets")
        if len(names) != len(sources):
            raise DafValueError(f"the number of names: {len(names)}\nis different from the number of sources: "
                                f"{len(sources)}", daf_name=destination.name, daf_preposition="concatenated into")
        if dataset_axis is not None:
            if not isinstance(dataset_axis, str):
                raise DafTypeError(f"invalid dataset_axis: {dataset_axis!r} (expected a name or None)")
            if dataset_axis in axes:
                raise DafValueError(f"the dataset axis: {dataset_axis}\nis also a concatenated axis")
        prefixes = [prefix] * len(axes) if isinstance(prefix, bool | np.bool_) else list(prefix)
        if len(prefixes) != len(axes) or not all(isinstance(flag, bool | np.bool_) for flag in prefixes):
            raise DafValueError(f"invalid prefix: {prefix!r}\n(expected a bool, or one bool per concatenated axis: "
                                f"{', '.join(axes)})")
        return _Request(destination, axes, sources, names, dataset_axis, bool(dataset_property),
                        [bool(flag) for flag in prefixes], _prefixed_sets(prefixed, axes),
                        _empty_values(empty), float(fraction), _merge_pairs(merge),
                        bool(overwrite))


def _require_names(names: list[Any], what: str) -> None:
    if not all(isinstance(name, str) for name in names):
        raise DafTypeError(f"invalid {what}: {names!r} (expected strings)")
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise DafValueError(f"non-unique {what}: {', '.join(repeated)}")


def _prefixed_sets(prefixed: Any, axes: list[str]) -> list[frozenset[str]] | None:
    if prefixed is None:
        return None
    sets = [prefixed] if isinstance(prefixed, set | frozenset) else list(prefixed)
    if len(sets) != len(axes) or not all(isinstance(names, set | frozenset) and all(
            isinstance(name, str) for name in names) for names in sets):
        raise DafValueError(f"invalid prefixed: {prefixed!r}\n(expected a set of vector names, or one set per "
                            f"concatenated axis: {', '.join(axes)})")
    return [frozenset(names) for names in sets]


def _is_key(key: Any, tuple_lengths: tuple[int, ...]) -> bool:
    """Whether ``key`` is a scalar name or a tuple of names of one of the lengths."""
    return isinstance(key, str) or (isinstance(key, tuple) and len(key) in tuple_lengths and all(
        isinstance(part, str) for part in key))


def _empty_values(empty: Any) -> dict[Any, StorageScalar]:
    """The ``empty`` values by data key, each a validated scalar."""
    values: dict[Any, StorageScalar] = {}
    for key, value in (pairs_as_dict(empty) or {}).items():
        if not _is_key(key, (2, 3, 4)):
            raise DafValueError(f"invalid empty DataKey: {key!r}")
        values[key] = scalar_value(value, what=f"empty value for: {key}")
    return values


def _merge_pairs(merge: Any) -> list[tuple[PropertyKey, MergeAction]]:
    if merge is None:
        return []
    pairs = []
    for datum in merge.items() if isinstance(merge, Mapping) else merge:
        if not isinstance(datum, tuple | list) or len(datum) != 2:
            raise DafValueError(f"invalid MergeDatum: {datum!r}\n(expected a (key, MergeAction) pair)")
        key, action = datum
        key = tuple(key) if isinstance(key, list) else key
        if not _is_key(key, (2, 3)) or not isinstance(action, MergeAction):
            raise DafValueError(f"invalid MergeDatum: {datum!r}\n(expected a (key, MergeAction) pair, keyed by a "
                                "scalar name, (axis, name) or (rows_axis, columns_axis, name))")
        pairs.append((key, action))
    return pairs


# Planning: every check and every decision, before anything is written.


@dataclass
class _Part:
    """One source's share of a concatenated vector or matrix: its stored array (``None``: missing, filled with the
    empty value), how many entries (vector) or columns (matrix) it contributes, and whether a matrix is stored in the
    other layout (``(axis, other_axis)`` rather than ``(other_axis, axis)``). ``nnz`` is what it contributes to a
    sparse result."""

    stored: np.ndarray | SparseVector | SparseMatrixCSC | None
    n_columns: int
    transposed: bool = False
    nnz: int = 0


class _Step(Protocol):
    """One write of the concatenation; ``nbytes`` is how much it writes (for the progress bar)."""

    @property
    def nbytes(self) -> int: ...

    def write(self, destination: DafWriter, overwrite: bool, bar: tqdm) -> None: ...


class _Planner:
    """Julia's ``concatenate!``, split into checks that plan steps (here) and the steps' writes (run afterwards)."""

    def __init__(self, request: _Request) -> None:
        self.request = request
        self.destination = request.destination
        self.sources = request.sources
        self.empty = expand_tensors([self.destination, *self.sources], request.empty)
        self.steps: list[_Step] = []
        self.other_axes: dict[str, np.ndarray] = {}

    def _into(self) -> dict[str, Any]:
        """The fields of the trailer ``concatenated into the daf data: <destination>``."""
        return {"daf_name": self.destination.name, "daf_preposition": "concatenated into"}

    def plan(self) -> list[_Step]:
        request = self.request
        self._check_axes()
        other_axes = self.other_axes = self._other_axes()
        if request.dataset_axis is not None:
            self.steps.append(_AddAxis(request.dataset_axis, np.array(request.names, dtype=object)))
        for other_axis, entries in other_axes.items():
            self.steps.append(_AddAxis(other_axis, entries))
        for index, axis in enumerate(request.axes):
            self._concatenate_axis(index, axis, other_axes)
        if request.merge:
            self._merge(other_axes)
        return self.steps

    def _require_no_axis(self, daf: DafReader, axis: str) -> None:
        if daf.has_axis(axis):
            raise existing_property("axis", axis, daf_name=daf.name)

    def _check_axes(self) -> None:
        request = self.request
        for axis in request.axes:
            self._require_no_axis(self.destination, axis)
            for source in self.sources:
                if not source.has_axis(axis):
                    raise DafMissingError(f"missing axis: {axis}\nfor: concatenate!", daf_name=source.name,
                                          daf_preposition="of", what=("axis", axis))
        for rows_axis in request.axes:
            for columns_axis in request.axes:
                for source in self.sources:
                    names = sorted(source.matrices_set(rows_axis, columns_axis, relayout=False, tensors=False))
                    if names:
                        name = names[0]
                        raise DafValueError(
                            f"can't concatenate the matrix: {name}\nfor the concatenated rows axis: {rows_axis}\n"
                            f"and the concatenated columns axis: {columns_axis}\nin the daf data: {source.name}",
                            **self._into())
        if request.dataset_axis is not None:
            for daf in (self.destination, *self.sources):
                self._require_no_axis(daf, request.dataset_axis)

    def _other_axes(self) -> dict[str, np.ndarray]:
        """The axes that are not concatenated (sorted), with their entries, which must be the same in every source."""
        found: dict[str, tuple[str, np.ndarray]] = {}
        for source in self.sources:
            for axis in sorted(source.axes_set() - set(self.request.axes)):
                entries = source.axis_vector(axis)
                previous = found.get(axis)
                if previous is None:
                    found[axis] = (source.name, entries)
                elif not np.array_equal(entries, previous[1]):
                    raise DafValueError(f"different entries for the axis: {axis}\nbetween the daf data: {previous[0]}\n"
                                        f"and the daf data: {source.name}", **self._into())
        for axis in found:
            self._require_no_axis(self.destination, axis)
        return {axis: found[axis][1] for axis in sorted(found)}

    def _empty_value(self, *keys: Any) -> StorageScalar | None:
        return next((self.empty[key] for key in keys if key in self.empty), None)

    # Concatenated axes.

    def _concatenate_axis(self, index: int, axis: str, other_axes: dict[str, np.ndarray]) -> None:
        request = self.request
        sizes = [source.axis_length(axis) for source in self.sources]
        entries = np.concatenate([np.empty(0, dtype=object)] + [
            _prefixed(source.axis_vector(axis), name) if request.prefixes[index] else source.axis_vector(axis)
            for source, name in zip(self.sources, request.names, strict=True)])
        if len(set(entries.tolist())) != entries.shape[0]:
            raise DafShapeError(f"non-unique entries for new axis: {axis}", daf_name=self.destination.name)
        self.steps.append(_AddAxis(axis, entries))
        vector_names: set[str] = set()
        for source in self.sources:
            vector_names |= source.vectors_set(axis)
        if request.dataset_axis is not None and request.dataset_property:
            if request.dataset_axis not in vector_names:
                datasets = np.repeat(np.array(request.names, dtype=object), sizes)
                self.steps.append(_SetVector(axis, request.dataset_axis, datasets))
            elif not request.overwrite:  # Julia: the sources' vector of that name replaces it, only with overwrite
                raise existing_property("vector", axis, request.dataset_axis, daf_name=self.destination.name)
        for name in sorted(vector_names):
            self._concatenate_vector(axis, name, sizes, self._is_prefixed(index, name))
        for other_axis in other_axes:
            matrix_names: set[str] = set()
            for source in self.sources:
                # Either layout (Julia only takes matrices some source stores as (other_axis, axis)).
                matrix_names |= source.matrices_set(other_axis, axis, tensors=False)
            for name in sorted(matrix_names):
                self._concatenate_matrix(other_axis, axis, name, sizes)

    def _is_prefixed(self, index: int, name: str) -> bool:
        request = self.request
        if request.prefixed is not None:
            return name in request.prefixed[index]
        return any(prefix and (name == axis or name.startswith(axis + "."))
                   for axis, prefix in zip(request.axes, request.prefixes, strict=True))

    def _require_empty(self, parts: list[_Part], empty: StorageScalar | None, what: str) -> None:
        for part, source in zip(parts, self.sources, strict=True):
            if part.stored is None and empty is None:
                raise DafMissingError(f"no empty value for the {what}\nwhich is missing from the daf data: "
                                      f"{source.name}", **self._into())

    def _concatenate_vector(self, axis: str, name: str, sizes: list[int], prefix: bool) -> None:
        vectors = [source.get_stored_vector(axis, name, default=None) for source in self.sources]
        parts = [_Part(vector, size) for vector, size in zip(vectors, sizes, strict=True)]
        empty = self._empty_value((axis, name))
        what = f"vector: {name}\nof the axis: {axis}"
        self._require_empty(parts, empty, what)
        dtype = _merged_dtype(empty, _dtypes(parts))
        if dtype == STRING_DTYPE:
            values = np.concatenate([np.empty(0, dtype=object)] + [
                np.full(size, julia_string(empty), dtype=object) if vector is None
                else _prefixed(_as_strings(vector), source_name) if prefix else _as_strings(vector)
                for vector, size, source_name in zip(vectors, sizes, self.request.names, strict=True)])
            self.steps.append(_SetVector(axis, name, values))
            return
        sparse = self._is_sparse(parts, empty, dtype, what, n_rows=1, with_colptr=False)
        self.steps.append(_ConcatVector(axis, name, parts, dtype, empty, sparse))

    def _is_sparse(self, parts: list[_Part], empty: StorageScalar | None, dtype: np.dtype, what: str, *,
                   n_rows: int, with_colptr: bool) -> bool:
        """Check that the values fit the promoted type, and whether the result is sparse (then count each part's
        entries)."""
        self._check_fits(parts, empty, dtype, what)
        sparse = _sparse_saving(dtype, parts, empty, n_rows=n_rows, with_colptr=with_colptr) >= self.request.fraction
        if sparse:
            _count_nnz(parts, empty, n_rows=n_rows)
        return sparse

    def _plan_columns(self, rows_axis: str, columns_axis: str, name: str, parts: list[_Part],
                      empty: StorageScalar | None, what: str, *, with_colptr: bool) -> None:
        """Plan a matrix whose columns are the parts' columns side by side."""
        self._require_empty(parts, empty, what)
        dtype = _merged_dtype(empty, _dtypes(parts))
        n_rows = self.other_axes[rows_axis].shape[0]
        if dtype == STRING_DTYPE:
            self.steps.append(_SetMatrix(rows_axis, columns_axis, name, _string_columns(parts, empty, n_rows)))
            return
        sparse = self._is_sparse(parts, empty, dtype, what, n_rows=n_rows, with_colptr=with_colptr)
        self.steps.append(_ConcatMatrix(rows_axis, columns_axis, name, n_rows, parts, dtype, empty, sparse))

    def _matrix_parts(self, other_axis: str, axis: str, name: str, sizes: list[int]) -> list[_Part]:
        parts = []
        for source, size in zip(self.sources, sizes, strict=True):
            if source.has_matrix(other_axis, axis, name, relayout=False):
                parts.append(_Part(source.get_stored_matrix(other_axis, axis, name, relayout=False), size))
            elif source.has_matrix(axis, other_axis, name, relayout=False):
                parts.append(_Part(source.get_stored_matrix(axis, other_axis, name, relayout=False), size, True))
            else:
                parts.append(_Part(None, size))
        return parts

    def _concatenate_matrix(self, other_axis: str, axis: str, name: str, sizes: list[int]) -> None:
        self._plan_columns(other_axis, axis, name, self._matrix_parts(other_axis, axis, name, sizes),
                           self._empty_value((other_axis, axis, name), (axis, other_axis, name)),
                           f"matrix: {name}\nof the rows axis: {other_axis}\nand the columns axis: {axis}",
                           with_colptr=True)

    def _check_fits(self, parts: list[_Part], empty: StorageScalar | None, dtype: np.dtype, what: str) -> None:
        """Julia's promotion is exact except UInt64 into Int64 (mixed with signed types): Julia's conversion fails
        on a value above ``typemax(Int64)``, and so does this, before anything is written."""
        if dtype != np.int64:
            return
        limit = np.iinfo(np.int64).max
        for part, source in zip(parts, self.sources, strict=True):
            largest = _largest_unsigned(part.stored)
            if largest is not None and largest > limit:
                raise DafValueError(f"the value: {largest}\nof the {what}\nin the daf data: {source.name}\n"
                                    "does not fit in the concatenated element type: Int64", **self._into())
        if isinstance(empty, np.uint64) and empty > limit:
            raise DafValueError(f"the empty value: {empty}\nof the {what}\ndoes not fit in the concatenated element "
                                "type: Int64", **self._into())

    # Merging the properties of other axes.

    def _merge(self, other_axes: dict[str, np.ndarray]) -> None:
        scalar_names: set[str] = set()
        for source in self.sources:
            scalar_names |= source.scalars_set()
        for name in sorted(scalar_names):
            action = self._merge_action(name)
            if action != MergeAction.SkipProperty:
                self._merge_scalar(name, action)
        for axis in other_axes:
            vector_names: set[str] = set()
            square_names: set[str] = set()
            for source in self.sources:
                vector_names |= source.vectors_set(axis)
                square_names |= source.matrices_set(axis, axis, tensors=False)
            for name in sorted(vector_names):
                action = self._merge_action((axis, name))
                if action != MergeAction.SkipProperty:
                    self._merge_vector(axis, name, action)
            for name in sorted(square_names):
                self._merge_matrix(axis, axis, name)
        for rows_axis in other_axes:
            for columns_axis in other_axes:
                if rows_axis != columns_axis:
                    matrix_names: set[str] = set()
                    for source in self.sources:
                        matrix_names |= source.matrices_set(rows_axis, columns_axis, relayout=False, tensors=False)
                    for name in sorted(matrix_names):
                        self._merge_matrix(rows_axis, columns_axis, name)

    def _merge_action(self, key: PropertyKey) -> MergeAction:
        """The action of the last merge pair whose key matches (``"*"`` matches any part)."""
        parts = (key,) if isinstance(key, str) else key
        for merge_key, action in reversed(self.request.merge):
            merge_parts = (merge_key,) if isinstance(merge_key, str) else merge_key
            if len(merge_parts) == len(parts) and all(
                    wanted in ("*", part) for wanted, part in zip(merge_parts, parts, strict=True)):
                return action
        return MergeAction.SkipProperty

    def _require_dataset_axis(self, what: str) -> str:
        if self.request.dataset_axis is None:
            raise DafValueError(f"can't collect axis for the {what}\nof the daf data sets concatenated into the daf "
                                f"data: {self.destination.name}\nbecause no data set axis was created",
                                daf_name=self.destination.name, daf_preposition=None)
        return self.request.dataset_axis

    def _merge_scalar(self, name: str, action: MergeAction) -> None:
        values = [source.get_scalar(name, default=None) for source in self.sources]
        if action == MergeAction.LastValue:
            if not self.request.overwrite and self.destination.has_scalar(name):
                raise existing_property("scalar", name, daf_name=self.destination.name)
            self.steps.append(_SetScalar(name, next(value for value in reversed(values) if value is not None)))
            return
        dataset_axis = self._require_dataset_axis(f"scalar: {name}")
        empty = self._empty_value(name)
        for value, source in zip(values, self.sources, strict=True):
            if value is None and empty is None:
                raise DafMissingError(f"no empty value for the scalar: {name}\nwhich is missing from the daf data: "
                                      f"{source.name}", **self._into())
        scalars = [scalar_value(empty if value is None else value) for value in values]
        dtype = _merged_dtype(empty, [scalar_dtype(scalar) for scalar in scalars])
        if dtype == STRING_DTYPE:
            collected = np.array([julia_string(scalar) for scalar in scalars], dtype=object)
        else:
            self._check_fits([_Part(np.asarray(scalar), 1) for scalar in scalars], None, dtype, f"scalar: {name}")
            collected = np.array([dtype.type(scalar) for scalar in scalars], dtype=dtype)
        self.steps.append(_SetVector(dataset_axis, name, collected))

    def _merge_vector(self, axis: str, name: str, action: MergeAction) -> None:
        stored = [source.get_stored_vector(axis, name, default=None) for source in self.sources]
        if action == MergeAction.LastValue:
            self.steps.append(_SetVector(axis, name, next(value for value in reversed(stored) if value is not None)))
            return
        what = f"vector: {name}\nof the axis: {axis}"
        dataset_axis = self._require_dataset_axis(what)
        # Julia's vector estimate here (no colptr in the sparse size).
        self._plan_columns(axis, dataset_axis, name, [_Part(_as_column(vector), 1) for vector in stored],
                           self._empty_value((axis, name)), what, with_colptr=False)

    def _merge_matrix(self, rows_axis: str, columns_axis: str, name: str) -> None:
        action = self._merge_action((rows_axis, columns_axis, name))
        if action == MergeAction.SkipProperty:
            return
        if action == MergeAction.CollectAxis:
            raise DafValueError(f"can't collect axis for the matrix: {name}\nof the rows axis: {rows_axis}\nand the "
                                f"columns axis: {columns_axis}\nof the daf data sets concatenated into the daf data: "
                                f"{self.destination.name}\nbecause that would create a 3D tensor, which is not "
                                "supported", daf_name=self.destination.name, daf_preposition=None)
        source = next(source for source in reversed(self.sources)
                      if source.has_matrix(rows_axis, columns_axis, name, relayout=False))
        stored = source.get_stored_matrix(rows_axis, columns_axis, name, relayout=False)
        if isinstance(stored, np.ndarray) and stored.dtype == STRING_DTYPE:  # (strings are stored dense)
            self.steps.append(_SetMatrix(rows_axis, columns_axis, name, stored))
            return
        part = _Part(stored, stored.shape[1], nnz=stored.nnz if isinstance(stored, SparseMatrixCSC) else 0)
        self.steps.append(_ConcatMatrix(rows_axis, columns_axis, name, stored.shape[0], [part], stored.dtype, None,
                                        isinstance(stored, SparseMatrixCSC)))


def _prefixed(values: np.ndarray, name: str) -> np.ndarray:
    return np.array([f"{name}.{value}" for value in values.tolist()], dtype=object)


def _as_strings(values: np.ndarray | SparseVector) -> np.ndarray:
    """A vector as strings, numbers written as Julia's ``string`` writes them."""
    if isinstance(values, SparseVector):
        values = values.to_dense()
    if values.dtype == STRING_DTYPE:
        return values
    return np.array([julia_string(value) for value in values], dtype=object)


def _as_column(vector: np.ndarray | SparseVector | None) -> np.ndarray | SparseMatrixCSC | None:
    """A vector as a one-column matrix (zero-copy)."""
    if isinstance(vector, SparseVector):
        return SparseMatrixCSC((vector.length, 1), np.array([1, vector.nnz + 1]), vector.nzind, vector.nzval)
    return None if vector is None else vector.reshape(-1, 1)


def _string_columns(parts: list[_Part], empty: StorageScalar | None, n_rows: int) -> np.ndarray:
    """The concatenation of string (or stringified) matrix parts, in memory (strings are never mapped)."""
    columns = []
    for part in parts:
        if part.stored is None:
            columns.append(np.full((n_rows, part.n_columns), julia_string(empty), dtype=object))
            continue
        stored = part.stored
        assert not isinstance(stored, SparseVector)  # (a matrix part)
        values = stored.to_dense() if isinstance(stored, SparseMatrixCSC) else stored
        values = values.T if part.transposed else values
        if values.dtype != STRING_DTYPE:
            values = np.array([julia_string(value) for value in values.reshape(-1)], dtype=object).reshape(
                values.shape)
        columns.append(values)
    return np.asfortranarray(np.concatenate(columns, axis=1)) if columns else np.empty((n_rows, 0), dtype=object)


# Julia's element type promotion (``merge_dtypes``), applied in source order as Julia's ``reduce`` does.

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_SIGNED = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32), np.dtype(np.int64))
_UNSIGNED = (np.dtype(np.uint8), np.dtype(np.uint16), np.dtype(np.uint32), np.dtype(np.uint64))


def _dtype_for_size(size: int, dtypes: tuple[np.dtype, ...]) -> np.dtype:
    return next((dtype for dtype in dtypes[:-1] if size <= dtype.itemsize), dtypes[-1])


def _merge_dtype(left: np.dtype | None, right: np.dtype | None) -> np.dtype | None:
    """Julia's ``merge_dtypes``. ``Bool`` (which Julia's version can't merge) counts as an unsigned byte when mixed
    with other numbers, and stays ``Bool`` with itself."""
    if left is None or right is None or left == right:
        return right if left is None else left
    if STRING_DTYPE in (left, right):
        return STRING_DTYPE
    if left.kind == "f" or right.kind == "f":
        return _dtype_for_size(max(left.itemsize, right.itemsize), _FLOATS)
    if left.kind == "i" or right.kind == "i":
        return _dtype_for_size(max(dtype.itemsize + (dtype.kind != "i") for dtype in (left, right)), _SIGNED)
    return _dtype_for_size(max(left.itemsize, right.itemsize), _UNSIGNED)


def _dtypes(parts: list[_Part]) -> list[np.dtype]:
    return [np.dtype(part.stored.dtype) for part in parts if part.stored is not None]


def _merged_dtype(empty: StorageScalar | None, dtypes: list[np.dtype]) -> np.dtype:
    """Julia's ``reduce(merge_dtypes, values; init = typeof(empty))``."""
    dtype = None if empty is None else scalar_dtype(empty)
    for other in dtypes:
        dtype = _merge_dtype(dtype, other)
    assert dtype is not None, "a concatenated property exists in some source"
    return dtype


def _largest_unsigned(stored: Any) -> int | None:
    """The largest value of UInt64 data (a streaming pass over it), else ``None``."""
    values = stored.nzval if isinstance(stored, SparseVector | SparseMatrixCSC) else stored
    if not isinstance(values, np.ndarray) or values.dtype != np.uint64 or values.size == 0:
        return None
    flat = values.reshape(-1, order="A")
    step = _BLOCK_BYTES // 8
    largest = 0
    for start in range(0, flat.shape[0], step):
        largest = max(largest, int(flat[start:start + step].max()))
        _release(flat[start:start + step])
    return largest


# Julia's sparse-or-dense choice.


def _is_zero(empty: StorageScalar | None) -> bool:
    return empty is not None and not isinstance(empty, str) and empty == 0


def _sparse_saving(dtype: np.dtype, parts: list[_Part], empty: StorageScalar | None, *, n_rows: int,
                   with_colptr: bool) -> float:
    """Julia's ``sparse_vectors_storage_fraction`` / ``sparse_matrices_storage_fraction``: the fraction of the dense
    size that sparse storage saves, counting dense sources as fully non-zero."""
    dense_size = sparse_size = n_columns = 0
    for part in parts:
        size = n_rows * part.n_columns
        n_columns += part.n_columns
        dense_size += size
        if isinstance(part.stored, SparseVector | SparseMatrixCSC):
            sparse_size += part.stored.nnz
        elif part.stored is not None or not _is_zero(empty):
            sparse_size += size
    if dense_size == 0:
        return 0.0  # Julia's 0/0 is NaN, which never passes the threshold
    index_size = indtype_for_size(dense_size).itemsize
    dense_bytes = dense_size * dtype.itemsize
    sparse_bytes = sparse_size * (dtype.itemsize + index_size) + (n_columns + 1) * index_size * with_colptr
    return (dense_bytes - sparse_bytes) / dense_bytes


def _count_nnz(parts: list[_Part], empty: StorageScalar | None, *, n_rows: int) -> None:
    """Set each part's entries in a sparse result: a sparse source's stored entries, a dense source's non-zeros (a
    streaming pass), or all of a missing part's unless its empty value is zero."""
    for part in parts:
        stored = part.stored
        if isinstance(stored, SparseVector | SparseMatrixCSC):
            part.nnz = stored.nnz
        elif stored is None:
            part.nnz = 0 if _is_zero(empty) else n_rows * part.n_columns
        else:
            part.nnz = sum(int(np.count_nonzero(block)) for block in _blocks_of(_columns_first(part), _BLOCK_BYTES))


def _columns_first(part: _Part) -> np.ndarray:
    """A dense part as ``(n_columns, n_rows)``: row ``j`` holds the values of column ``j`` of the result (a view)."""
    stored = part.stored
    assert isinstance(stored, np.ndarray)
    if stored.ndim == 1:
        return stored.reshape(-1, 1)
    return stored if part.transposed else stored.T


def _blocks_of(view: np.ndarray, nbytes: int) -> Iterable[np.ndarray]:
    """Consecutive row blocks of a columns-first view, about ``nbytes`` each, released after use."""
    step = max(1, nbytes // max(1, view.shape[1] * view.dtype.itemsize))
    for start in range(0, view.shape[0], step):
        block = view[start:start + step]
        yield block
        _release(block)


def _release(*arrays: np.ndarray) -> None:
    """Drop the pages of contiguous mapped arrays from the resident set (the data stays in the file)."""
    for array in arrays:
        if array.flags.c_contiguous or array.flags.f_contiguous:
            release_pages(array)


# The steps.


@dataclass
class _AddAxis:
    axis: str
    entries: np.ndarray
    nbytes: int = 0

    def write(self, destination: DafWriter, overwrite: bool, bar: tqdm) -> None:
        destination.add_axis(self.axis, self.entries)


@dataclass
class _SetScalar:
    name: str
    value: StorageScalar
    nbytes: int = 0

    def write(self, destination: DafWriter, overwrite: bool, bar: tqdm) -> None:
        destination.set_scalar(self.name, self.value, overwrite=overwrite)


@dataclass
class _SetVector:
    axis: str
    name: str
    value: np.ndarray | SparseVector
    nbytes: int = 0

    def write(self, destination: DafWriter, overwrite: bool, bar: tqdm) -> None:
        destination.set_vector(self.axis, self.name, self.value, overwrite=overwrite)


@dataclass
class _SetMatrix:
    rows_axis: str
    columns_axis: str
    name: str
    value: np.ndarray
    nbytes: int = 0

    def write(self, destination: DafWriter, overwrite: bool, bar: tqdm) -> None:
        destination.set_matrix(self.rows_axis, self.columns_axis, self.name, self.value, overwrite=overwrite,
                               relayout=False)


@dataclass
class _ConcatVector:
    """A numeric vector of a concatenated axis, written part by part into the destination's builder."""

    axis: str
    name: str
    parts: list[_Part]
    dtype: np.dtype
    empty: StorageScalar | None
    sparse: bool

    @property
    def nbytes(self) -> int:
        return sum(part.nnz if self.sparse else part.n_columns for part in self.parts) * self.dtype.itemsize

    def write(self, destination: DafWriter, overwrite: bool, bar: tqdm) -> None:
        if not self.sparse:
            with destination.empty_dense_vector(self.axis, self.name, self.dtype, overwrite=overwrite) as values:
                offset = 0
                for part in self.parts:
                    _dense_vector_part(part, values[offset:offset + part.n_columns], self.empty)
                    offset += part.n_columns
                    bar.update(part.n_columns * self.dtype.itemsize)
            return
        nnz = sum(part.nnz for part in self.parts)
        with destination.empty_sparse_vector(self.axis, self.name, self.dtype, nnz,
                                             overwrite=overwrite) as (nzind, nzval):
            offset = position = 0
            for part in self.parts:
                entries = slice(position, position + part.nnz)
                _sparse_vector_part(part, nzind[entries], nzval[entries], offset, self.empty)
                offset += part.n_columns
                position += part.nnz
                bar.update(part.nnz * self.dtype.itemsize)


def _dense_vector_part(part: _Part, out: np.ndarray, empty: StorageScalar | None) -> None:
    stored = part.stored
    if stored is None:
        out[...] = empty
    elif isinstance(stored, SparseVector):
        out[...] = 0
        out[stored.nzind.astype(np.intp) - 1] = stored.nzval
    else:
        out[...] = stored
    _release(out)


def _sparse_vector_part(part: _Part, nzind: np.ndarray, nzval: np.ndarray, offset: int,
                        empty: StorageScalar | None) -> None:
    stored = part.stored
    if stored is None:
        if part.nnz:  # a non-zero empty value: every entry is stored
            nzind[...] = np.arange(offset + 1, offset + part.n_columns + 1)
            nzval[...] = empty
    elif isinstance(stored, SparseVector):
        np.add(stored.nzind, offset, out=nzind, dtype=nzind.dtype, casting="unsafe")
        nzval[...] = stored.nzval
    else:
        assert isinstance(stored, np.ndarray)  # (a vector part)
        positions = np.flatnonzero(stored)
        np.add(positions, offset + 1, out=nzind, casting="unsafe")
        nzval[...] = stored[positions]
    _release(nzind, nzval)


@dataclass
class _ConcatMatrix:
    """A numeric matrix whose columns are the parts' columns side by side (or a merged matrix: a single part),
    written part by part, block by block, into the destination's builder."""

    rows_axis: str
    columns_axis: str
    name: str
    n_rows: int
    parts: list[_Part]
    dtype: np.dtype
    empty: StorageScalar | None
    sparse: bool

    @property
    def nbytes(self) -> int:
        return sum(part.nnz if self.sparse else self.n_rows * part.n_columns for part in self.parts) * \
            self.dtype.itemsize

    def write(self, destination: DafWriter, overwrite: bool, bar: tqdm) -> None:
        def progress(n_values: int) -> None:
            bar.update(n_values * self.dtype.itemsize)

        if not self.sparse:
            with destination.empty_dense_matrix(self.rows_axis, self.columns_axis, self.name, self.dtype,
                                                overwrite=overwrite) as values:
                column = 0
                for part in self.parts:
                    _dense_matrix_part(part, values[:, column:column + part.n_columns], self.empty, progress)
                    column += part.n_columns
            return
        nnz = sum(part.nnz for part in self.parts)
        with destination.empty_sparse_matrix(self.rows_axis, self.columns_axis, self.name, self.dtype, nnz,
                                             overwrite=overwrite) as (colptr, rowval, nzval):
            column = position = 0
            for part in self.parts:
                entries = slice(position, position + part.nnz)
                _sparse_matrix_part(part, colptr[column:column + part.n_columns + 1], rowval[entries], nzval[entries],
                                    position, self.n_rows, self.empty, progress)
                column += part.n_columns
                position += part.nnz
            colptr[column] = position + 1


def _dense_matrix_part(part: _Part, out: np.ndarray, empty: StorageScalar | None,
                       progress: Callable[[int], None]) -> None:
    """Write a part into its (column-major, contiguous) columns of a dense result."""
    n_rows, n_columns = out.shape
    step = max(1, _BLOCK_BYTES // max(1, n_rows * out.dtype.itemsize))
    stored = part.stored
    if isinstance(stored, SparseMatrixCSC) and part.transposed:
        _scatter_transposed(stored, out, step, progress)
        return
    for start in range(0, n_columns, step):
        stop = min(start + step, n_columns)
        target = out[:, start:stop]
        if stored is None:
            target[...] = empty
        elif isinstance(stored, SparseMatrixCSC):
            first, last = int(stored.colptr[start]) - 1, int(stored.colptr[stop]) - 1
            counts: np.ndarray = np.diff(stored.colptr[start:stop + 1].astype(np.int64))
            target[...] = 0
            target[stored.rowval[first:last].astype(np.intp) - 1, np.repeat(np.arange(stop - start), counts)] = \
                stored.nzval[first:last]
            _release(stored.rowval[first:last], stored.nzval[first:last])
        else:
            block = _columns_first(part)[start:stop]
            target[...] = block.T
            _release(block)
        _release(target)
        progress(n_rows * (stop - start))
    if part.transposed and isinstance(stored, np.ndarray):  # (a sparse one was scattered above)
        _release(stored)


def _scatter_transposed(stored: SparseMatrixCSC, out: np.ndarray, step: int, progress: Callable[[int], None]) -> None:
    """Write a sparse part stored in the other layout (its columns are the result's rows) into a dense result."""
    n_rows, n_columns = out.shape
    for start in range(0, n_columns, step):
        out[:, start:start + step] = 0
    for first_row, last_row in _entry_blocks(stored.colptr, _BLOCK_BYTES // 16):
        first, last = int(stored.colptr[first_row]) - 1, int(stored.colptr[last_row]) - 1
        counts: np.ndarray = np.diff(stored.colptr[first_row:last_row + 1].astype(np.int64))
        out[np.repeat(np.arange(first_row, last_row), counts), stored.rowval[first:last].astype(np.intp) - 1] = \
            stored.nzval[first:last]
        _release(stored.rowval[first:last], stored.nzval[first:last])
    _release(out)
    progress(n_rows * n_columns)


def _entry_blocks(colptr: np.ndarray, entries: int) -> list[tuple[int, int]]:
    """Consecutive column ranges of a CSC matrix holding about ``entries`` stored entries each (at least a column)."""
    n_columns = colptr.shape[0] - 1
    wanted = np.arange(int(colptr[0]), int(colptr[-1]), max(1, entries), dtype=np.int64)
    starts = np.searchsorted(colptr, wanted, side="right") - 1
    bounds = np.unique(np.concatenate([[0], np.clip(starts, 0, n_columns), [n_columns]])).tolist()
    return list(itertools.pairwise(bounds))


def _sparse_matrix_part(part: _Part, colptr: np.ndarray, rowval: np.ndarray, nzval: np.ndarray, position: int,
                        n_rows: int, empty: StorageScalar | None, progress: Callable[[int], None]) -> None:
    """Write a part into a sparse result: ``colptr`` holds its columns' pointers and the next column's (``n + 1``),
    ``rowval``/``nzval`` its entries, which start after ``position`` entries of the result."""
    stored = part.stored
    n_columns = part.n_columns
    if stored is None:
        if not part.nnz:
            colptr[...] = position + 1
            return
        # A non-zero empty value: every entry is stored.
        step = max(1, _BLOCK_BYTES // max(1, n_rows * nzval.dtype.itemsize))
        colptr[...] = position + 1 + np.arange(n_columns + 1, dtype=np.int64) * n_rows
        for start in range(0, n_columns, step):
            entries = slice(start * n_rows, min(start + step, n_columns) * n_rows)
            rowval[entries] = np.tile(np.arange(1, n_rows + 1), min(step, n_columns - start))
            nzval[entries] = empty
            _release(rowval[entries], nzval[entries])
            progress(entries.stop - entries.start)
    elif isinstance(stored, SparseMatrixCSC) and part.transposed:
        transpose_csc_into(stored.shape, stored.colptr, stored.rowval, stored.nzval, colptr, rowval, nzval)
        np.add(colptr, position, out=colptr, casting="unsafe")
        _release(colptr, rowval, nzval, stored.colptr, stored.rowval, stored.nzval)
        progress(part.nnz)
    elif isinstance(stored, SparseMatrixCSC):
        _stream(colptr, stored.colptr, position)
        _stream(rowval, stored.rowval, 0)
        _stream(nzval, stored.nzval, 0)
        progress(part.nnz)
    else:
        found = 0
        view = _columns_first(part)
        start = 0
        for block in _blocks_of(view, _SPARSIFY_BLOCK_BYTES):
            columns, rows = np.nonzero(block)
            counts = np.bincount(columns, minlength=block.shape[0])
            stop = start + block.shape[0]
            colptr[start:stop] = position + found + 1 + np.cumsum(counts) - counts
            entries = slice(found, found + columns.shape[0])
            np.add(rows, 1, out=rowval[entries], casting="unsafe")
            nzval[entries] = block[columns, rows]
            _release(rowval[entries], nzval[entries])
            found += columns.shape[0]
            start = stop
            progress(columns.shape[0])
        colptr[n_columns] = position + found + 1


def _stream(target: np.ndarray, source: np.ndarray, add: int) -> None:
    """``target[...] = source + add`` (1-D) a block at a time, releasing both maps' pages after each block."""
    step = max(1, _BLOCK_BYTES // max(1, source.dtype.itemsize))
    for start in range(0, target.shape[0], step):
        stop = min(start + step, target.shape[0])
        if add:
            # In the target's type, which holds every index of the result (the source's may be narrower).
            np.add(source[start:stop], add, out=target[start:stop], dtype=target.dtype, casting="unsafe")
        else:
            target[start:stop] = source[start:stop]
        _release(source[start:stop], target[start:stop])


# Running the steps.


def _execute(destination: DafWriter, steps: list[_Step], *, overwrite: bool, progress: bool) -> None:
    """Run the planned writes. If one fails (a full disk, …), the axes and scalars this call created are deleted
    again (with everything written along them), so the destination is left as it was, but for what ``overwrite``
    replaced."""
    from tqdm.auto import tqdm

    created_axes: list[str] = []
    created_scalars: list[str] = []
    with tqdm(total=sum(step.nbytes for step in steps), desc="concatenate", unit="B", unit_scale=True,
              unit_divisor=1024, disable=not progress, mininterval=0.5) as bar:
        try:
            for step in steps:
                if isinstance(step, _SetScalar) and not destination.has_scalar(step.name):
                    created_scalars.append(step.name)
                step.write(destination, overwrite, bar)
                if isinstance(step, _AddAxis):
                    created_axes.append(step.axis)
        except BaseException:
            for axis in reversed(created_axes):
                destination.delete_axis(axis, must_exist=False)
            for name in created_scalars:
                destination.delete_scalar(name, must_exist=False)
            raise
