"""Reordering the entries of axes in place, in one or more leaf data sets (Julia's ``Reorder``, ``reorder.jl``).

Why: a memory-mapped matrix is read a page at a time, so putting the entries that are read together next to each other
(the genes of interest first, the cells of one metacell together, a random order for training batches) can save
orders of magnitude of I/O. :func:`reorder_axes` permutes every vector and matrix of the permuted axes, in every format
that stores them, crash-safely: each storage backs up what it rewrites before changing anything (``pydaf.abc.reorder``
describes the steps), so a reorder killed at any instant is rolled back by :func:`reset_reorder_axes` (or by opening
the data set for writing, which does it), leaving the old order everywhere.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, cast

import numpy as np

from ..abc.format import FormatWriter
from ..abc.reorder import (
    CrashCounter,
    FormatReorderPlan,
    PlannedAxis,
    PlannedMatrix,
    PlannedVector,
    SimulatedCrash,
)
from ..errors import DafError, DafIncompleteError, DafMissingError, DafTypeError, DafUnsupportedError, DafValueError
from ..sparse import SparseMatrixCSC
from .cache import AxisCacheKey, MatrixCacheKey, VectorCacheKey
from .readers import DafReader, is_leaf
from .writers import DafWriter


def build_reorder_plan(writer: FormatWriter, planned_axes: Mapping[str, PlannedAxis]) -> FormatReorderPlan:
    """Everything ``writer`` (a leaf storage, under its write lock) rewrites when ``planned_axes`` are permuted: the
    vectors of those axes, and each stored matrix with a permuted axis (once per stored layout). Permuted axes the
    storage lacks are ignored.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).set_vector("cell", "age", [1, 2])
        >>> axes = {"cell": PlannedAxis.of(daf.axis_vector("cell"), [1, 0])}
        >>> [planned.name for planned in build_reorder_plan(daf.format, axes).planned_vectors]
        ['age']
    """
    planned_vectors = []
    planned_matrices = []
    axes = sorted(writer.format_axes_set())
    for axis in sorted(planned_axes):
        if not writer.format_has_axis(axis, for_change=False):
            continue
        length = writer.format_axis_length(axis)  # (a vector's length: no need to read it)
        for name in sorted(writer.format_vectors_set(axis)):
            planned_vectors.append(PlannedVector(axis, name, length))
        for other_axis in axes:
            layouts = [(axis, other_axis)]
            if other_axis not in planned_axes:  # (else listed as that permuted axis's own, or square)
                layouts.append((other_axis, axis))
            for rows_axis, columns_axis in layouts:
                for name in sorted(writer.format_matrices_set(rows_axis, columns_axis)):
                    matrix, _ = writer.format_get_matrix(rows_axis, columns_axis, name)
                    size = matrix.nnz if isinstance(matrix, SparseMatrixCSC) else int(np.prod(matrix.shape))
                    planned_matrices.append(PlannedMatrix(rows_axis, columns_axis, name, int(size)))
    return FormatReorderPlan(dict(planned_axes), planned_vectors, planned_matrices)


def reorder_axes(daf_or_dafs: DafWriter | Sequence[DafWriter], axes_permutations: Mapping[str, Any], *,
                 progress: bool = True, _simulate_crash: int | None = None) -> None:
    """Permute the entries of axes in place: for each ``axis: permutation``, entry ``i`` of the axis (and of every
    vector and matrix along it) becomes what entry ``permutation[i]`` was (0-based). Every leaf data set given that
    has the axis is permuted in one crash-safe operation, and all of them must hold the same entries for it; pass all
    the data sets that share storage (several groups of one ``.h5dfs`` file) in one call.

    A kill (or an error) part way leaves each storage marked: :func:`reset_reorder_axes` (or opening it for writing)
    rolls it back to the old order. ``_simulate_crash=n`` (for tests, Julia's name) raises
    :class:`~pydaf.abc.reorder.SimulatedCrash` after ``n`` properties were replaced.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B", "C"]).set_vector("cell", "age", [1, 2, 3])
        >>> pydaf.reorder_axes(daf, {"cell": [2, 0, 1]}, progress=False)
        >>> daf.axis_vector("cell").tolist(), daf.get_vector("cell", "age").tolist()
        (['C', 'A', 'B'], [3, 1, 2])
    """
    dafs = _leaves(daf_or_dafs, "reorder_axes!")
    if not dafs or not axes_permutations:
        return
    operation_id = str(uuid.uuid4())
    with _write_locks(dafs):
        for daf in dafs:
            if _storage(daf).format_has_reorder_lock():
                raise DafIncompleteError(
                    "an interrupted reorder_axes left its backup", daf_name=daf.name,
                    hint="(call pydaf.reset_reorder_axes(daf) to roll it back first)")
        planned_axes = _planned_axes(dafs, axes_permutations)
        claimed: list[FormatWriter] = []
        try:
            _reorder_locked(dafs, claimed, planned_axes, operation_id, progress, _simulate_crash)
        except SimulatedCrash:
            raise  # (the testing hook stands for a kill: the storage stays marked, for reset_reorder_axes)
        except BaseException:
            # A failed call loses nothing: what was claimed is rolled back now, not left half permuted for the reads
            # that follow (if even that fails, the mark stays, and reset_reorder_axes or a writable open rolls back).
            for storage in claimed:
                with contextlib.suppress(DafError):
                    storage.format_reset_reorder()
            raise


def _reorder_locked(dafs: list[DafWriter], claimed: list[FormatWriter], planned_axes: dict[str, PlannedAxis],
                    operation_id: str, progress: bool, simulate_crash: int | None) -> None:
    """Julia's steps, under the write locks: lock, plan and back up each storage, replace, clean up; ``claimed``
    collects the storage locked so far."""
    for storage in (_storage(daf) for daf in dafs):
        if not any(storage is other for other in claimed):
            storage.format_lock_reorder(operation_id)
            claimed.append(storage)
    plans = [build_reorder_plan(storage, planned_axes) for storage in claimed]
    for storage, plan in zip(claimed, plans, strict=True):
        storage.format_backup_reorder(plan)
    crash_counter = None if simulate_crash is None else CrashCounter(simulate_crash)
    total = sum(plan.n_replacement_elements() for plan in plans)
    # Cached data of the permuted axes is dropped (and its version counters bumped) before the replacement, once: the
    # write locks keep the cache from being filled again until the call ends, whether the storage then holds the new
    # order, the old one (rolled back) or, after a kill, a mark. (Before, not after: a cached map of bytes rewritten
    # in place would first be copied aside into private memory by the storage, to keep it valid for its holder.)
    for daf in dafs:
        _invalidate(daf, planned_axes)
    with _progress_bar(total, progress) as bar:
        for storage, plan in zip(claimed, plans, strict=True):
            storage.format_replace_reorder(plan, bar, crash_counter)
    for storage in claimed:
        storage.format_cleanup_reorder()


def reset_reorder_axes(daf_or_dafs: DafWriter | Sequence[DafWriter]) -> bool:
    """Roll back an interrupted :func:`reorder_axes` (killed, or raising part way) in each leaf data set given,
    restoring the old order of every axis, vector and matrix it had started to permute. Returns whether any data set
    had one to roll back.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"])
        >>> pydaf.reset_reorder_axes(daf)
        False
    """
    dafs = _leaves(daf_or_dafs, "reset_reorder_axes!")
    did_work = False
    with _write_locks(dafs):
        for daf in dafs:
            if _storage(daf).format_reset_reorder():
                did_work = True
                _invalidate(daf, {axis: None for axis in _storage(daf).format_axes_set()})
    return did_work


def _leaves(daf_or_dafs: DafWriter | Sequence[DafWriter], given_to: str) -> list[DafWriter]:
    # (A data set is one, not a sequence: iterating it would run queries 0, 1, ... through its __getitem__.)
    dafs = [daf_or_dafs] if isinstance(daf_or_dafs, DafReader) else list(daf_or_dafs)
    for daf in dafs:
        if not isinstance(daf, DafWriter):
            raise DafTypeError(f"not a writable daf data: {daf!r}\ngiven to {given_to}",
                               hint="(open it for writing: pydaf.open_daf(path, \"r+\"))")
        if not is_leaf(daf):
            raise DafUnsupportedError(f"non-leaf type: {_julia_type_name(daf)}\nfor the daf data: {daf.name}\n"
                                      f"given to {given_to}",
                                      hint="(reorder the leaf data sets the chain or view is made of)")
        if not _storage(daf).supports_reorder:
            raise _storage(daf)._no_reorder()
    # A stable order (by path, then creation), so two concurrent calls over the same data sets lock them alike.
    return sorted(dafs, key=lambda daf: (0, daf.complete_path()) if daf.complete_path() else (1, str(id(daf.format))))


def _storage(daf: DafWriter) -> FormatWriter:
    """A writable data set's storage (``DafReader.format`` is typed as the reader's)."""
    return cast(FormatWriter, daf.format)


def _julia_type_name(daf: DafWriter) -> str:
    """Julia's name of a data set's type (``Write Chain`` is Julia's ``WriteChain``)."""
    return daf._type_text().replace(" ", "")


@contextlib.contextmanager
def _write_locks(dafs: list[DafWriter]) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        for daf in dafs:
            stack.enter_context(daf._state.lock.write())
        yield


def _planned_axes(dafs: list[DafWriter], axes_permutations: Mapping[str, Any]) -> dict[str, PlannedAxis]:
    planned_axes = {}
    for axis, permutation in axes_permutations.items():
        entries = None
        first: DafWriter = dafs[0]
        for daf in dafs:
            if not daf.format.format_has_axis(axis, for_change=False):
                continue
            daf_entries = np.asarray(daf.axis_vector(axis))
            if entries is None:
                entries, first = daf_entries, daf
                permutation = _permutation(permutation, axis, len(entries), daf)
            elif not np.array_equal(daf_entries, entries):
                raise DafValueError(f"axis: {axis} entries differ\nbetween the daf data: {first.name}\n"
                                    f"and the daf data: {daf.name}",
                                    hint="(every data set given to one reorder_axes must hold the same entries)")
        if entries is None:
            raise DafMissingError(f"axis: {axis}\ndoes not exist in any of the writers",
                                  hint=f"(the axes: {', '.join(sorted(set().union(*(d.axes_set() for d in dafs))))})")
        planned_axes[axis] = PlannedAxis.of(entries, permutation)
    return planned_axes


def _permutation(permutation: Any, axis: str, length: int, daf: DafWriter) -> np.ndarray:
    """A checked 0-based permutation of ``length`` entries (Julia's ``invperm`` raises an ArgumentError)."""
    values = np.asarray(permutation)
    if values.ndim != 1 or not (values.dtype.kind in "iu" or (values.size == 0 and values.dtype.kind == "f")):
        raise DafValueError(f"invalid permutation for the axis: {axis}\n(expected a vector of integer positions)",
                            daf_name=daf.name)
    if values.shape[0] != length:
        raise DafValueError(f"permutation length: {values.shape[0]}\ndoes not match axis: {axis}\nlength: {length}",
                            daf_name=daf.name, daf_preposition="in")
    values = values.astype(np.int64)
    seen = np.zeros(length, dtype=bool)
    inside = (values >= 0) & (values < length)
    seen[values[inside]] = True
    if not inside.all() or not seen.all():
        bad = values[~inside][:1].tolist() or [int(np.flatnonzero(~seen)[0])]
        what = f"position out of range: {bad[0]}" if not inside.all() else f"missing position: {bad[0]}"
        raise DafValueError(f"invalid permutation for the axis: {axis}\n{what}\n"
                            f"(expected each of 0..{length - 1} exactly once)", daf_name=daf.name)
    return values


def _invalidate(daf: DafWriter, axes: Mapping[str, Any]) -> None:
    """Drop the cached data of ``axes`` and bump the version counters of the axes and of their vectors and matrices
    (Julia's ``invalidate_axis_data!``)."""
    storage = daf.format
    all_axes = storage.format_axes_set()
    for axis in axes:
        if axis not in all_axes:
            continue
        daf._invalidate(AxisCacheKey(axis))
        daf._state.versions.bump(AxisCacheKey(axis))
        for name in storage.format_vectors_set(axis):
            daf._invalidate(VectorCacheKey(axis, name))
            daf._bump_vector(axis, name)
        for other_axis in all_axes:
            for rows_axis, columns_axis in {(axis, other_axis), (other_axis, axis)}:
                for name in storage.format_matrices_set(rows_axis, columns_axis):
                    daf._invalidate(MatrixCacheKey(rows_axis, columns_axis, name))
                    daf._invalidate(MatrixCacheKey(columns_axis, rows_axis, name))
                    daf._bump_matrix(rows_axis, columns_axis, name)


@contextlib.contextmanager
def _progress_bar(total: int, progress: bool) -> Iterator[Any]:
    from tqdm.auto import tqdm

    with tqdm(total=total, desc="reorder_axes", unit="entry", unit_scale=True, disable=not progress,
              mininterval=0.5) as bar:
        yield bar.update
