"""Chains (Julia's ``Chains``): several data sets seen as one; later ones override earlier ones.

A read chain answers each request from the last member that has the property. A write chain also writes, always
into its last member (adding there, first, any axis the property needs that only earlier members have). Members that
share an axis must agree on its entries.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any

import numpy as np

from ..core.readers import DafReader
from ..core.writers import DafWriter
from ..errors import DafValueError
from ..formats.base import CacheGroup, FormatWriter, StoredMatrix, StoredVector
from ..sparse import SparseMatrixCSC, SparseVector
from ..storage_types import StorageScalar


class ChainFormat(FormatWriter):
    """The storage contract over a sequence of data sets (members keep their own locks and caches)."""

    def __init__(self, members: Sequence[DafReader], *, writable: bool) -> None:
        if not members:
            raise DafValueError("empty chain")
        self.members = list(members)
        self._builders: dict[tuple, AbstractContextManager[Any]] = {}
        self.is_writable = writable
        self.type_name = "Write Chain" if writable else "ReadOnly Chain"
        if writable and not isinstance(self.members[-1], DafWriter):
            raise DafValueError(f"the last data set of a write chain is read-only: {self.members[-1].name}")
        entries: dict[str, tuple[str, np.ndarray]] = {}
        for member in self.members:
            for axis in member.axes_set():
                mine = member.axis_vector(axis)
                if axis in entries and not np.array_equal(entries[axis][1], mine):
                    raise DafValueError(f"different entries for the axis: {axis}\nin the daf data: {entries[axis][0]}"
                                        f"\nand the daf data: {member.name}\nin the chain")
                entries.setdefault(axis, (member.name, mine))

    @property
    def last(self) -> DafWriter:
        return self.members[-1]  # type: ignore[return-value]

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

    def _has_vector(self, member: DafReader, axis: str, name: str) -> bool:
        return member.has_axis(axis) and name in member.vectors_set(axis)

    def format_has_vector(self, axis: str, name: str) -> bool:
        return any(self._has_vector(member, axis, name) for member in self.members)

    def format_vectors_set(self, axis: str) -> set[str]:
        return set().union(*(member.vectors_set(axis) for member in self.members if member.has_axis(axis)))

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        return self._owner(lambda member: self._has_vector(member, axis, name)).get_stored_vector(axis, name), None

    def _has_matrix(self, member: DafReader, rows_axis: str, columns_axis: str, name: str) -> bool:
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

    # Writing: into the last member.

    def _ensure_axes(self, *axes: str) -> None:
        for axis in axes:
            if not self.last.has_axis(axis):
                self.last.add_axis(axis, self.format_axis_vector(axis)[0])

    def _require_only_last(self, what: str, found: bool) -> None:
        if found:
            raise DafValueError(f"can't delete the {what}\nwhich exists in an earlier daf data of the chain")

    def format_set_scalar(self, name: str, value: StorageScalar) -> None:
        self.last.set_scalar(name, value, overwrite=True)

    def format_delete_scalar(self, name: str, *, for_set: bool) -> None:
        if not for_set:
            self._require_only_last(f"scalar: {name}", any(member.has_scalar(name) for member in self.members[:-1]))
        self.last.delete_scalar(name, must_exist=False)

    def format_add_axis(self, axis: str, entries: np.ndarray) -> None:
        self.last.add_axis(axis, entries)

    def format_delete_axis(self, axis: str) -> None:
        self._require_only_last(f"axis: {axis}", any(member.has_axis(axis) for member in self.members[:-1]))
        self.last.delete_axis(axis)

    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        self._ensure_axes(axis)
        self.last.set_vector(axis, name, vector, overwrite=True)

    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        if not for_set:
            self._require_only_last(f"vector: {name}\nof the axis: {axis}", any(
                self._has_vector(member, axis, name) for member in self.members[:-1]))
        if self._has_vector(self.last, axis, name):
            self.last.delete_vector(axis, name)

    # The ``empty_*`` builders of the chain are the last member's own builders, held open until the chain's buffers
    # are filled (so the member validates, caches and counts versions as for any write; a sparse matrix is checked
    # twice, once by each writer).

    def _open_builder(self, key: tuple, builder: AbstractContextManager[Any]) -> Any:
        buffers = builder.__enter__()
        self._builders[key] = builder
        return buffers

    def _close_builder(self, key: tuple) -> None:
        self._builders.pop(key).__exit__(None, None, None)

    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        self._ensure_axes(axis)
        return self._open_builder(("vector", axis, name),
                                  self.last.empty_dense_vector(axis, name, dtype, overwrite=True))

    def format_filled_empty_dense_vector(self, axis: str, name: str, filled: np.ndarray) -> None:
        self._close_builder(("vector", axis, name))

    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        self._ensure_axes(axis)
        return self._open_builder(("vector", axis, name),
                                  self.last.empty_sparse_vector(axis, name, dtype, nnz, indtype, overwrite=True))

    def format_filled_empty_sparse_vector(self, axis: str, name: str, filled: SparseVector) -> None:
        self._close_builder(("vector", axis, name))

    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        self._ensure_axes(rows_axis, columns_axis)
        self.last.set_matrix(rows_axis, columns_axis, name, matrix, overwrite=True, relayout=False)

    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        if not for_set:
            self._require_only_last(f"matrix: {name}\nof the axes: {rows_axis}, {columns_axis}", any(
                self._has_matrix(member, rows_axis, columns_axis, name) for member in self.members[:-1]))
        if self._has_matrix(self.last, rows_axis, columns_axis, name):
            self.last.delete_matrix(rows_axis, columns_axis, name, relayout=False)

    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        self._ensure_axes(rows_axis, columns_axis)
        return self._open_builder(("matrix", rows_axis, columns_axis, name), self.last.empty_dense_matrix(
            rows_axis, columns_axis, name, dtype, overwrite=True))

    def format_filled_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                         filled: np.ndarray) -> None:
        self._close_builder(("matrix", rows_axis, columns_axis, name))

    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        self._ensure_axes(rows_axis, columns_axis)
        return self._open_builder(("matrix", rows_axis, columns_axis, name), self.last.empty_sparse_matrix(
            rows_axis, columns_axis, name, dtype, nnz, indtype, overwrite=True))

    def format_filled_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                          filled: SparseMatrixCSC) -> None:
        self._close_builder(("matrix", rows_axis, columns_axis, name))

    def format_discard_empty(self) -> None:
        # A failed fill: the member's builders remove what they started (the innermost first).
        while self._builders:
            _, builder = self._builders.popitem()
            builder.__exit__(DafValueError, DafValueError("the filling of an empty property failed"), None)


def chain_reader(members: Sequence[DafReader], *, name: str | None = None) -> DafReader:
    """A read-only chain: each property comes from the last member that has it.

    Example:
        >>> import pydaf
        >>> base = pydaf.MemoryDaf(name="base!").set_scalar("version", 1).set_scalar("kind", "base")
        >>> top = pydaf.MemoryDaf(name="top!").set_scalar("version", 2)
        >>> chain = pydaf.chain_reader([base, top], name="chain!")
        >>> int(chain.get_scalar("version")), chain.get_scalar("kind")
        (2, 'base')
    """
    return DafReader(ChainFormat(members, writable=False), name=name or "chain")


def chain_writer(members: Sequence[DafReader], *, name: str | None = None) -> DafWriter:
    """A write chain: reads as :func:`chain_reader`, writes go to the last member (which must be writable).

    Example:
        >>> import pydaf
        >>> base = pydaf.MemoryDaf(name="base!").add_axis("cell", ["A", "B"])
        >>> top = pydaf.MemoryDaf(name="top!")
        >>> chain = pydaf.chain_writer([base, top], name="chain!").set_vector("cell", "age", [1, 2])
        >>> top.get_vector("cell", "age").tolist(), base.has_vector("cell", "age")
        ([1, 2], False)
    """
    return DafWriter(ChainFormat(members, writable=True), name=name or "chain")
