"""``pydaf check``: verify that a data set of any backend is sound, and say what is damaged if it is not.

:func:`check_daf` reads every property straight from the backend (through :class:`~pydaf.core.storage.CheckedReads`,
bypassing and not filling the cache) and checks it as the reader does on first access, for every backend, in memory
too: every scalar, axis, vector and matrix is readable; axis entries are unique strings; vector lengths and matrix
shapes match their axes; sparse indices are valid 1-based structures; and when both layouts of a matrix are stored,
they hold the same values (compared column block by column block, or, for two sparse layouts, entry by entry in one
streaming pass with a cursor per row: a large sparse matrix is never densified nor transposed). Each problem is one
line; a problem with a property does not stop the check of the others.

Example:
    >>> import pydaf, numpy as np
    >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
    >>> check_daf(daf.set_matrix("cell", "gene", "UMIs", np.array([[1], [2]])))
    []
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any

import h5py
import numpy as np

from . import kernels
from .composition.destinations import storage_of
from .core.readers import DafReader
from .core.storage import CheckedReads, property_text
from .core.validation import require_entries, require_scalar, require_stored_matrix, require_stored_vector
from .errors import DafError
from .formats.h5df.open_files import open_h5_file
from .formats.registry import guess_format
from .open import open_daf
from .sparse import SparseMatrixCSC, dense_column_major

__all__ = ["check_daf", "check_main", "check_path"]

#: Values per block when two layouts are compared block by block (bounded temporaries).
_BLOCK_VALUES = 1 << 22


def _one_line(error: DafError) -> str:
    """An error message on one line, without the data set trailer (the check names the data set once)."""
    return "; ".join(error.text(daf=False).split("\n"))


class _Checker:
    def __init__(self, daf: DafReader) -> None:
        self.daf = daf
        self.reads = CheckedReads(daf.format, daf.name)
        self.problems: list[str] = []
        self.counts = {"scalars": 0, "axes": 0, "vectors": 0, "matrices": 0}

    def attempt(self, where: str, action: Callable[[], Any]) -> Any:
        """Run ``action``; a DafError becomes a problem line about ``where`` (and ``None`` is returned)."""
        try:
            return action()
        except DafError as error:
            self.problems.append(f"{where}: {_one_line(error)}")
            return None

    def run(self) -> None:
        names = self.attempt("scalars", self.reads.format_scalars_set) or set()
        for name in sorted(names):
            self.attempt(f"scalar {name}", functools.partial(self.scalar, name))
        axes = self.attempt("axes", self.reads.format_axes_set) or set()
        lengths = {}
        for axis in sorted(axes):
            length = self.attempt(f"axis {axis}", functools.partial(self.axis, axis))
            if length is not None:
                lengths[axis] = length
        for axis in sorted(lengths):
            vectors = self.attempt(f"vectors of {axis}", functools.partial(self.reads.format_vectors_set, axis))
            for name in sorted(vectors or set()):
                self.attempt(f"vector {axis}/{name}", functools.partial(self.vector, axis, name, lengths))
        for rows_axis in sorted(lengths):
            for columns_axis in sorted(lengths):
                self.matrices(rows_axis, columns_axis, lengths)

    def scalar(self, name: str) -> None:
        require_scalar(self.reads.format_get_scalar(name), what=property_text("scalar", name),
                       daf_name=self.daf.name)
        self.counts["scalars"] += 1

    def axis(self, axis: str) -> int:
        length = self.reads.format_axis_length(axis)
        entries, _ = self.reads.format_axis_vector(axis)
        require_entries(entries, length, what=property_text("axis", axis), daf_name=self.daf.name)
        repeated = length - len(set(entries.tolist()))
        if repeated:
            self.problems.append(f"axis {axis}: {repeated} repeated entries (expected unique entries)")
        self.counts["axes"] += 1
        return length

    def vector(self, axis: str, name: str, lengths: dict[str, int]) -> None:
        vector, _ = self.reads.format_get_vector(axis, name)
        require_stored_vector(vector, lengths[axis], what=property_text("vector", axis, name), daf_name=self.daf.name)
        self.counts["vectors"] += 1

    def matrices(self, rows_axis: str, columns_axis: str, lengths: dict[str, int]) -> None:
        where = f"matrices of {rows_axis},{columns_axis}"
        for name in sorted(self.attempt(where, lambda: self.reads.format_matrices_set(rows_axis, columns_axis))
                           or set()):
            matrix = self.attempt(f"matrix {rows_axis},{columns_axis}/{name}",
                                  functools.partial(self.matrix, rows_axis, columns_axis, name, lengths))
            if matrix is None or rows_axis >= columns_axis:  # each pair of layouts once, from its sorted side
                continue
            if not self.attempt(f"matrix {columns_axis},{rows_axis}/{name}",
                                functools.partial(self.reads.format_has_matrix, columns_axis, rows_axis, name)):
                continue
            other = self.attempt(f"matrix {columns_axis},{rows_axis}/{name}",
                                 functools.partial(self.matrix, columns_axis, rows_axis, name, lengths, count=False))
            if other is not None:
                difference = _layouts_difference(matrix, other)
                if difference is not None:
                    self.problems.append(f"matrix {rows_axis},{columns_axis}/{name}: the layouts {rows_axis},"
                                         f"{columns_axis} and {columns_axis},{rows_axis} differ: {difference}")

    def matrix(self, rows_axis: str, columns_axis: str, name: str, lengths: dict[str, int], *,
               count: bool = True) -> Any:
        matrix, _ = self.reads.format_get_matrix(rows_axis, columns_axis, name)
        require_stored_matrix(matrix, (lengths[rows_axis], lengths[columns_axis]),
                              what=property_text("matrix", rows_axis, columns_axis, name), daf_name=self.daf.name)
        if count:
            self.counts["matrices"] += 1
        return matrix


def _layouts_difference(matrix: Any, other: Any) -> str | None:
    """How ``other`` (the ``(columns, rows)`` layout) differs from the transpose of ``matrix``, or ``None``."""
    if matrix.dtype != other.dtype:
        return f"element types {matrix.dtype} and {other.dtype}"
    found: tuple[int, int] | None
    if isinstance(matrix, SparseMatrixCSC) and isinstance(other, SparseMatrixCSC):
        found = kernels.transposed_mismatch(matrix, other)
    elif isinstance(other, SparseMatrixCSC):  # stream by the columns of the sparse one
        found = _dense_blocks_difference(other, matrix)
        found = None if found is None else (found[1], found[0])
    else:
        found = _dense_blocks_difference(matrix, other)
    if found is None:
        return None
    return f"at row {found[0]}, column {found[1]} (0-based)"


def _equal_values(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    equal = first == second
    if first.dtype.kind == "f":
        equal |= np.isnan(first) & np.isnan(second)
    return np.asarray(equal)


def _first_difference(first: np.ndarray, second: np.ndarray) -> tuple[int, int] | None:
    different = ~_equal_values(first, second)
    if not different.any():
        return None
    row, column = np.unravel_index(int(np.argmax(different.reshape(-1, order="F"))), first.shape, order="F")
    return int(row), int(column)


def _column_blocks(n_rows: int, n_columns: int) -> Iterator[slice]:
    step = max(1, _BLOCK_VALUES // max(1, n_rows))
    for start in range(0, n_columns, step):
        yield slice(start, min(start + step, n_columns))


def _dense_blocks_difference(matrix: Any, other: np.ndarray) -> tuple[int, int] | None:
    """The first difference between ``matrix`` (dense or sparse) and ``other.T`` (dense), a block of columns of
    ``matrix`` (rows of ``other``) at a time."""
    n_rows, n_columns = matrix.shape
    for columns in _column_blocks(n_rows, n_columns):
        if isinstance(matrix, SparseMatrixCSC):
            block = matrix.select(columns=np.arange(columns.start, columns.stop)).to_dense()
        else:
            block = dense_column_major(matrix[:, columns])
        found = _first_difference(block, other[columns, :].T)
        if found is not None:
            return found[0], found[1] + columns.start
    return None


def check_daf(daf: DafReader) -> list[str]:
    """The problems of a data set, one line each (``[]`` if it is sound): see the module docstring.

    Example:
        >>> import pydaf, numpy as np
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).set_vector("cell", "age", [3, 5])
        >>> check_daf(daf)
        []
    """
    return _checked(daf).problems


def _checked(daf: DafReader) -> _Checker:
    checker = _Checker(daf)
    with daf.read_lock():
        checker.run()
    return checker


def check_path(path: str | os.PathLike) -> tuple[list[str], dict[str, int]]:
    """Open a data set read-only (:func:`~pydaf.open_daf`) and check it: its problems (one line each; a data set that
    can't be opened is one problem) and how many scalars, axes, vectors and matrices were checked.

    Example:
        >>> import os, tempfile, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5df")
        >>> pydaf.H5df(path, "w").add_axis("cell", ["A"]).flush()
        >>> check_path(path)
        ([], {'scalars': 0, 'axes': 1, 'vectors': 0, 'matrices': 0})
    """
    try:
        daf = open_daf(path, "r")
    except DafError as error:
        return [f"open: {_one_line(error)}"], {}
    checker = _checked(daf)
    return checker.problems, checker.counts


def _is_data_set_storage(path: str) -> bool:
    """Whether a data set that fails to open is damaged (its storage is there, of the kind its path names, some format
    recognises it, and the group it names is in it), rather than no data set at all (nothing there, a directory named
    like a file, a file no format recognises, a missing group)."""
    storage = storage_of(path)
    if not os.path.exists(storage.path) or (os.path.isdir(storage.path) and not storage.is_directory):
        return False
    if "#" not in path and not os.path.exists(path):  # (a path through a file: x.h5df/..)
        return False
    try:
        entry = guess_format(path)
    except DafError:
        return False
    if entry.name == "H5df" and storage.group != "/" and h5py.is_hdf5(storage.path):
        try:
            return storage.group in open_h5_file(storage.path, "r")
        except DafError:
            return True  # (a damaged file)
    return True


def check_main(path: str) -> int:
    """``pydaf check PATH``: print one line per problem (stdout) and return 1, or print a summary and return 0.

    Example:
        >>> import os, tempfile, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5df")
        >>> pydaf.H5df(path, "w").add_axis("cell", ["A"]).flush()
        >>> check_main(path)  # doctest: +ELLIPSIS
        /...x.h5df: sound (0 scalars, 1 axes, 0 vectors, 0 matrices checked)
        0
    """
    problems, counts = check_path(path)
    if problems and not counts and not _is_data_set_storage(path):
        open_daf(path, "r")  # (raises what is wrong: not a damaged data set, but no data set at all)
    for problem in problems:
        print(f"{path}: {problem}")
    if problems:
        print(f"pydaf check: {len(problems)} problem{'s' if len(problems) > 1 else ''} in {path}", file=sys.stderr)
        return 1
    print(f"{path}: sound ({', '.join(f'{count} {what}' for what, count in counts.items())} checked)")
    return 0
