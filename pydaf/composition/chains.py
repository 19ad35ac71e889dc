"""Chains (Julia's ``Chains``): several data sets seen as one; later ones override earlier ones.

A read chain answers each request from the last member that has the property. A write chain also writes, always into
its last member (adding there, first, any axis the property needs that only earlier members have); it deletes only what
exists in no earlier member. Members that share an axis must agree on its entries. A chain of chains is the one long
chain of their members, and a read-only wrapper of a data set is chained as the data set itself.

Members keep their own locks, caches and version counters: a chain reads them through their public API, so a change
made to a member directly is seen by the chain (its version counters are the sums of its members', as in Julia, and its
cache is dropped when a member was written).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, ClassVar

import numpy as np

from ..abc.format import CacheGroup, FormatReader, FormatWriter, StoredMatrix, StoredVector
from ..core.cache import AxisCacheKey, MatrixCacheKey, VectorCacheKey
from ..core.names import unique_name
from ..core.readers import DafReader, DafReadOnly, DafReadOnlyWrapper
from ..core.writers import DafWriter
from ..errors import DafValueError
from ..formats.paths import split_complete_path
from ..sparse import SparseMatrixCSC, SparseVector
from ..storage_types import StorageScalar


class ReadOnlyChainFormat(FormatReader):
    """The storage contract over a sequence of data sets, read-only."""

    type_name: ClassVar[str] = "ReadOnly Chain"

    def __init__(self, members: Sequence[DafReader], name: str) -> None:
        self.members = _flatten(members)
        self.name = name
        # (the deepest nesting of views among the members: see pydaf.composition.views.MAX_VIEW_NESTING)
        self.view_nesting = max((getattr(member.format, "view_nesting", 0) for member in self.members), default=0)
        _require_same_axes(self.members, name)

    # The capabilities of a chain are those of its last member: the one written to, and the one whose arrays a read
    # returns first.
    @property  # (computed: FormatReader declares it as a plain class attribute, hence the ignore)
    def supports_rewrites(self) -> bool:  # type: ignore[override]
        return self.members[-1].format.supports_rewrites

    @property  # (computed: FormatReader declares it as a plain class attribute, hence the ignore)
    def maps_files(self) -> bool:  # type: ignore[override]
        return self.members[-1].format.maps_files

    @property  # (computed: FormatReader declares it as a plain class attribute, hence the ignore)
    def persistent(self) -> bool:  # type: ignore[override]
        return self.members[-1].format.persistent

    def _owner(self, test: Callable[[DafReader], bool]) -> DafReader:
        return next(member for member in reversed(self.members) if test(member))

    def format_description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        lines.append(f"{indent}type: {self.type_name}")
        if not deep:
            lines.append(f"{indent}chain:")
            lines.extend(f"{indent}- {member!r}" for member in self.members)

    def format_description_footer(self, indent: str, lines: list[str], *, cache: bool, deep: bool,
                                  tensors: bool) -> None:
        if deep:
            lines.append(f"{indent}chain:")
            for member in self.members:
                member_lines = member.description(cache=cache, deep=deep, tensors=tensors).rstrip("\n").split("\n")
                lines.append(f"{indent}- {member_lines[0]}")
                lines.extend(f"{indent}  {line}" for line in member_lines[1:])

    def format_complete_path(self) -> str | None:
        """The last member's path, when the chain holds exactly what reopening that path would give: every member is
        reached from the last one by following the ``base_daf_repository`` records, and no member is left over."""
        path = self.members[-1].complete_path()
        if path is None:
            return None
        by_path: dict[str, DafReader] = {}
        for member in self.members:
            member_path = member.complete_path()
            if member_path is None:
                return None
            by_path[member_path] = member
        reached: set[str] = set()
        unvisited = [path]
        while unvisited:
            member_path = unvisited.pop()
            reached.add(member_path)
            base = by_path[member_path].get_scalar("base_daf_repository", default=None)
            if isinstance(base, str):
                base_path = base_daf_path(member_path, base)
                if base_path not in by_path:
                    return None
                if base_path not in reached:
                    unvisited.append(base_path)
        return path if len(reached) == len(by_path) else None

    def format_version_counter(self, key: Hashable) -> int:
        return sum(_member_version_counter(member, key) for member in self.members)

    def format_write_count(self) -> int:
        return sum(member.write_count() for member in self.members)

    # Reading: the last member that has it.

    def format_has_scalar(self, name: str) -> bool:
        return any(member.has_scalar(name) for member in self.members)

    def format_scalars_set(self) -> set[str]:
        return set().union(*(member.scalars_set() for member in self.members))

    def format_get_scalar(self, name: str) -> StorageScalar:
        return self._owner(lambda member: member.has_scalar(name)).get_scalar(name)

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        return any(member.has_axis(axis) for member in self.members)

    def format_axes_set(self) -> set[str]:
        return set().union(*(member.axes_set() for member in self.members))

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        return self._owner(lambda member: member.has_axis(axis)).axis_vector(axis), None

    def format_axis_length(self, axis: str) -> int:
        return self._owner(lambda member: member.has_axis(axis)).axis_length(axis)

    @staticmethod
    def _has_vector(member: DafReader, axis: str, name: str) -> bool:
        return member.has_axis(axis) and member.has_vector(axis, name)

    def format_has_vector(self, axis: str, name: str) -> bool:
        return any(self._has_vector(member, axis, name) for member in self.members)

    def format_vectors_set(self, axis: str) -> set[str]:
        return set().union(*(member.vectors_set(axis) for member in self.members if member.has_axis(axis)))

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        return self._owner(lambda member: self._has_vector(member, axis, name)).get_stored_vector(axis, name), None

    @staticmethod
    def _has_matrix(member: DafReader, rows_axis: str, columns_axis: str, name: str) -> bool:
        return member.has_axis(rows_axis) and member.has_axis(columns_axis) and member.has_matrix(
            rows_axis, columns_axis, name, relayout=False)

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        return any(self._has_matrix(member, rows_axis, columns_axis, name) for member in self.members)

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        return set().union(*(member.matrices_set(rows_axis, columns_axis, relayout=False, tensors=False)
                              for member in self.members if member.has_axis(rows_axis) and member.has_axis(
                                  columns_axis)))

    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        owner = self._owner(lambda member: self._has_matrix(member, rows_axis, columns_axis, name))
        return owner.get_stored_matrix(rows_axis, columns_axis, name, relayout=False), None


class WriteChainFormat(ReadOnlyChainFormat, FormatWriter):
    """The storage contract over a sequence of data sets whose last one is written to."""

    type_name: ClassVar[str] = "Write Chain"

    def __init__(self, members: Sequence[DafReader], name: str) -> None:
        super().__init__(members, name)
        self._builders: dict[tuple, tuple[AbstractContextManager[Any], Hashable | None, tuple[int, int]]] = {}
        # What the chain's own writes did to its last member's counters: the chain counts those writes itself, so
        # only the rest (writes made to members directly) add to the chain's counters.
        self._absorbed_writes = 0
        self._absorbed: dict[Hashable, int] = {}

    def format_version_counter(self, key: Hashable) -> int:
        return super().format_version_counter(key) - self._absorbed.get(key, 0)

    def format_write_count(self) -> int:
        return super().format_write_count() - self._absorbed_writes

    def _counts(self, key: Hashable | None) -> tuple[int, int]:
        return self.last.write_count(), 0 if key is None else _member_version_counter(self.last, key)

    def _absorb(self, key: Hashable | None, before: tuple[int, int]) -> None:
        after = self._counts(key)
        self._absorbed_writes += after[0] - before[0]
        if key is not None:
            self._absorbed[key] = self._absorbed.get(key, 0) + after[1] - before[1]

    @contextmanager
    def _writing(self, key: Hashable | None = None) -> Iterator[None]:
        before = self._counts(key)
        try:
            yield
        finally:
            self._absorb(key, before)

    @property
    def last(self) -> DafWriter:
        return self.members[-1]  # type: ignore[return-value]

    def format_stores_references(self) -> bool:
        return self.last.format.format_stores_references()

    # Writing: into the last member.

    def _ensure_axes(self, *axes: str) -> None:
        for axis in axes:
            if not self.last.has_axis(axis):
                self.last.add_axis(axis, self.format_axis_vector(axis)[0])

    def _refuse_delete(self, what: str, found: Callable[[DafReader], bool]) -> None:
        earlier = next((member for member in reversed(self.members[:-1]) if found(member)), None)
        if earlier is not None:
            raise DafValueError(f"failed to delete the {what}\nfrom the daf data: {self.last.name}\nof the chain: "
                                f"{self.name}\nbecause it exists in the earlier: {earlier.name}",
                                daf_name=self.last.name, daf_preposition=None)

    def format_set_scalar(self, name: str, value: StorageScalar) -> None:
        with self._writing():
            self.last.set_scalar(name, value, overwrite=True)

    # A delete "for set" is left to the last member's own overwriting set or builder, which keeps the old value
    # until the new one is complete (a failed build then loses nothing).

    def format_delete_scalar(self, name: str, *, for_set: bool) -> None:
        if for_set:
            return
        self._refuse_delete(f"scalar: {name}", lambda member: member.has_scalar(name))
        with self._writing():
            self.last.delete_scalar(name, must_exist=False)

    def format_add_axis(self, axis: str, entries: np.ndarray) -> None:
        with self._writing(AxisCacheKey(axis)):
            self.last.add_axis(axis, entries)

    def format_delete_axis(self, axis: str) -> None:
        self._refuse_delete(f"axis: {axis}", lambda member: member.has_axis(axis))
        with self._writing(AxisCacheKey(axis)):
            self.last.delete_axis(axis)

    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        with self._writing(VectorCacheKey(axis, name)):
            self._ensure_axes(axis)
            self.last.set_vector(axis, name, vector, overwrite=True)

    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        if for_set:
            return
        self._refuse_delete(f"vector: {name}\nof the axis: {axis}", lambda member: self._has_vector(member, axis, name))
        if self._has_vector(self.last, axis, name):
            with self._writing(VectorCacheKey(axis, name)):
                self.last.delete_vector(axis, name)

    # The ``empty_*`` builders of the chain are the last member's own builders, held open until the chain's buffers
    # are filled (so the member validates, caches and counts versions as for any write; a sparse matrix is checked
    # twice, once by each writer).

    def _open_builder(self, key: tuple, counter: Hashable, open_builder: Callable[[], AbstractContextManager[Any]],
                      axes: tuple[str, ...]) -> Any:
        before = self._counts(counter)
        self._ensure_axes(*axes)
        builder = open_builder()
        buffers = builder.__enter__()
        self._builders[key] = (builder, counter, before)
        return buffers

    def _close_builder(self, key: tuple, *error: Any) -> None:
        builder, counter, before = self._builders.pop(key)
        try:
            builder.__exit__(*(error or (None, None, None)))
        finally:
            self._absorb(counter, before)

    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        return self._open_builder(("vector", axis, name), VectorCacheKey(axis, name),
                                  lambda: self.last.empty_dense_vector(axis, name, dtype, overwrite=True), (axis,))

    def format_filled_empty_dense_vector(self, axis: str, name: str, filled: np.ndarray) -> None:
        self._close_builder(("vector", axis, name))

    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        return self._open_builder(
            ("vector", axis, name), VectorCacheKey(axis, name),
            lambda: self.last.empty_sparse_vector(axis, name, dtype, nnz, indtype, overwrite=True), (axis,))

    def format_filled_empty_sparse_vector(self, axis: str, name: str, filled: SparseVector) -> None:
        self._close_builder(("vector", axis, name))

    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        with self._writing(MatrixCacheKey(rows_axis, columns_axis, name).either_layout()):
            self._ensure_axes(rows_axis, columns_axis)
            self.last.set_matrix(rows_axis, columns_axis, name, matrix, overwrite=True, relayout=False)

    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        if for_set:
            return
        self._refuse_delete(f"matrix: {name}\nfor the rows axis: {rows_axis}\nand the columns axis: {columns_axis}",
                            lambda member: self._has_matrix(member, rows_axis, columns_axis, name))
        if self._has_matrix(self.last, rows_axis, columns_axis, name):
            with self._writing(MatrixCacheKey(rows_axis, columns_axis, name).either_layout()):
                self.last.delete_matrix(rows_axis, columns_axis, name, relayout=False)

    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        return self._open_builder(
            ("matrix", rows_axis, columns_axis, name), MatrixCacheKey(rows_axis, columns_axis, name).either_layout(),
            lambda: self.last.empty_dense_matrix(rows_axis, columns_axis, name, dtype, overwrite=True),
            (rows_axis, columns_axis))

    def format_filled_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                         filled: np.ndarray) -> None:
        self._close_builder(("matrix", rows_axis, columns_axis, name))

    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return self._open_builder(
            ("matrix", rows_axis, columns_axis, name), MatrixCacheKey(rows_axis, columns_axis, name).either_layout(),
            lambda: self.last.empty_sparse_matrix(rows_axis, columns_axis, name, dtype, nnz, indtype, overwrite=True),
            (rows_axis, columns_axis))

    def format_filled_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                          filled: SparseMatrixCSC) -> None:
        self._close_builder(("matrix", rows_axis, columns_axis, name))

    def format_discard_empty(self) -> bool:
        # A failed fill: the member's builders remove what they started (the innermost first), and its writer keeps
        # or deletes the old value as its storage allows, so the chain has nothing left to delete.
        for key in reversed(list(self._builders)):
            self._close_builder(key, DafValueError, DafValueError("the filling of an empty property failed"), None)
        return True


def base_daf_path(path: str, base: str) -> str:
    """The absolute path of the base recorded (relative to the directory of ``path``, or absolute) by a repository.
    Only the container's part is normalized: a ``..`` after the ``#`` of a group never climbs out of the container.

    Example:
        >>> base_daf_path("/data/deeper/more.daf", "../all.h5dfs#/cells"), base_daf_path("/data/x.daf", "y.h5df#/../..")
        ('/data/all.h5dfs#/cells', '/data/y.h5df#/../..')
    """
    directory = os.path.dirname(split_complete_path(path)[0])
    container, group = split_complete_path(base)
    return os.path.abspath(os.path.join(directory, container)) + group


def _flatten(members: Sequence[DafReader]) -> list[DafReader]:
    """The data sets of a chain: read-only wrappers unwrapped and chains expanded into their members (Julia's
    ``flatten_dafs``)."""
    flat: list[DafReader] = []
    for member in members:
        while isinstance(member, DafReadOnlyWrapper):
            member = member.base
        if isinstance(member.format, ReadOnlyChainFormat):
            flat.extend(member.format.members)
        else:
            flat.append(member)
    return flat


def _require_same_axes(members: list[DafReader], name: str) -> None:
    seen: dict[str, tuple[str, np.ndarray]] = {}
    for member in members:
        for axis in sorted(member.axes_set()):
            entries = member.axis_vector(axis)
            if axis not in seen:
                seen[axis] = (member.name, entries)
                continue
            first_name, first_entries = seen[axis]
            if entries.shape[0] != first_entries.shape[0]:
                raise DafValueError(
                    f"different number of entries: {entries.shape[0]}\nfor the axis: {axis}\nin the daf data: "
                    f"{member.name}\nfrom the number of entries: {first_entries.shape[0]}\nfor the axis: {axis}\n"
                    f"in the daf data: {first_name}\nin the chain: {name}", daf_name=member.name, daf_preposition=None)
            differ = np.flatnonzero(entries != first_entries)
            if differ.shape[0]:
                index = int(differ[0])
                raise DafValueError(
                    f"different entry#{index + 1}: {entries[index]}\nfor the axis: {axis}\nin the daf data: "
                    f"{member.name}\nfrom the entry#{index + 1}: {first_entries[index]}\nfor the axis: {axis}\n"
                    f"in the daf data: {first_name}\nin the chain: {name}", daf_name=member.name, daf_preposition=None)


def _member_version_counter(member: DafReader, key: Hashable) -> int:
    if isinstance(key, AxisCacheKey):
        return member.axis_version_counter(key.axis)
    if isinstance(key, VectorCacheKey):
        return member.vector_version_counter(key.axis, key.name)
    if isinstance(key, MatrixCacheKey):
        return member.matrix_version_counter(key.rows_axis, key.columns_axis, key.name)
    raise TypeError(f"not a version counter key: {key!r}")


def _name_suffix(name: str | None) -> str:
    return "" if name is None else f": {name}"


class ReadOnlyChain(DafReadOnly):
    """A read-only chain of data sets (see :func:`chain_reader`)."""

    write_hint = "a chain made by chain_reader is read-only: pydaf.chain_writer writes to its last data set"

    def __init__(self, members: Sequence[DafReader], *, name: str) -> None:
        super().__init__(ReadOnlyChainFormat(members, name), name=name, unique=False)


def chain_reader(members: Sequence[DafReader], *, name: str | None = None) -> DafReader:
    """A read-only chain: each property comes from the last member that has it (one member: a read-only view of it).

    Example:
        >>> import pydaf
        >>> base = pydaf.MemoryDaf(name="base!").set_scalar("version", 1).set_scalar("kind", "base")
        >>> top = pydaf.MemoryDaf(name="top!").set_scalar("version", 2)
        >>> chain = pydaf.chain_reader([base, top], name="chain!")
        >>> int(chain.get_scalar("version")), chain.get_scalar("kind"), repr(chain)
        (2, 'base', 'ReadOnly Chain chain!')
    """
    if not members:
        raise DafValueError(f"empty chain{_name_suffix(name)}")
    if len(members) == 1:
        return members[0].read_only(name=name)
    name = unique_name(name if name is not None else ";".join(member.name for member in members), ";#")
    return ReadOnlyChain(members, name=name)


def chain_writer(members: Sequence[DafReader], *, name: str | None = None) -> DafWriter:
    """A write chain: reads as :func:`chain_reader`, writes go to the last member (which must be writable). One member
    and no name: that member itself.

    Example:
        >>> import pydaf
        >>> base = pydaf.MemoryDaf(name="base!").add_axis("cell", ["A", "B"])
        >>> top = pydaf.MemoryDaf(name="top!")
        >>> chain = pydaf.chain_writer([base, top], name="chain!").set_vector("cell", "age", [1, 2])
        >>> top.get_vector("cell", "age").tolist(), base.has_vector("cell", "age")
        ([1, 2], False)
    """
    if not members:
        raise DafValueError(f"empty chain{_name_suffix(name)}")
    if len(members) == 1 and name is None:
        if not isinstance(members[0], DafWriter):
            raise DafValueError(f"read-only final data: {members[0].name}\nin write chain")
        return members[0]
    if not isinstance(members[-1], DafWriter):
        raise DafValueError(f"read-only final data: {members[-1].name}\nin write chain{_name_suffix(name)}")
    name = unique_name(name) if name is not None else ";".join(member.name for member in members)
    return DafWriter(WriteChainFormat(members, name), name=name, unique=False)
