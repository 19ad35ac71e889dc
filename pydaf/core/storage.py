"""The read half of a backend as the reader/writer layer calls it: every failure becomes a :class:`~pydaf.DafError`
that names the data set and the property.

A backend reading hostile storage (a truncated HDF5 file, a broken JSON descriptor, a missing data file, a dataset of
the wrong kind) may raise anything: ``OSError``/``KeyError``/``RuntimeError`` from h5py, ``ValueError`` from json or
numpy, ``IndexError`` from its own indexing. :class:`CheckedReads` turns each into a
:class:`~pydaf.DafFormatError` (``can't read the <property>``, with the original error), and completes a
:class:`~pydaf.DafError` the backend raised without naming the data set (e.g. ``the data file: … has 12 bytes instead
of 16``) with the property and the data set. Errors that already name a data set (``error.daf_name``: a chain's
member) pass unchanged.

Example:
    >>> import pydaf
    >>> daf = pydaf.MemoryDaf(name="example!")
    >>> reads = CheckedReads(daf.format, daf.name)
    >>> try:
    ...     reads.format_get_scalar("missing")  # the backend's KeyError
    ... except pydaf.DafFormatError as error:
    ...     print(error)
    can't read the scalar: missing
    (KeyError: 'missing')
    in the daf data: example!
"""

from __future__ import annotations

import numpy as np

from ..abc.format import CacheGroup, FormatReader, StoredMatrix, StoredVector
from ..errors import DafError, DafFormatError
from ..storage_types import StorageScalar

__all__ = ["CheckedReads", "property_text"]


def property_text(kind: str, *names: str) -> str:
    """How messages name a property (Julia's wording): ``kind`` is ``scalar``, ``axis``, ``vector`` (axis, name),
    ``matrix`` (rows axis, columns axis, name), or ``scalars``, ``axes``, ``vectors`` (axis), ``matrices`` (rows
    axis, columns axis) for the sets of names.

    Example:
        >>> print(property_text("matrix", "cell", "gene", "UMIs"))
        matrix: UMIs
        for the rows axis: cell
        and the columns axis: gene
    """
    if kind in ("scalar", "axis"):
        return f"{kind}: {names[0]}"
    if kind == "vector":
        return f"vector: {names[1]}\nof the axis: {names[0]}"
    if kind == "matrix":
        return f"matrix: {names[2]}\nfor the rows axis: {names[0]}\nand the columns axis: {names[1]}"
    if kind == "vectors":
        return f"names of the vectors\nof the axis: {names[0]}"
    if kind == "matrices":
        return f"names of the matrices\nfor the rows axis: {names[0]}\nand the columns axis: {names[1]}"
    return f"names of the {kind}"


class CheckedReads:
    """The ``format_*`` reads of a backend (same names and arguments), raising only :class:`~pydaf.DafError`\\ s.

    ``daf_name`` is the data set's name for the messages (the reader sets it once it knows it).
    """

    __slots__ = ("_format", "daf_name")

    def __init__(self, format: FormatReader, daf_name: str) -> None:
        self._format = format
        self.daf_name = daf_name

    def _failed(self, error: Exception, kind: str, *names: str) -> None:
        """Raise the DafError for ``error`` raised while reading a property (return: re-raise ``error`` as it is)."""
        if isinstance(error, DafError):
            if error.daf_name is not None:
                return
            raise error.completed(daf_name=self.daf_name, what=(kind, *names),
                                  for_=property_text(kind, *names)) from error
        raise DafFormatError(f"can't read the {property_text(kind, *names)}\n({type(error).__name__}: {error})",
                             daf_name=self.daf_name, what=(kind, *names)) from error

    # Scalars.

    def format_has_scalar(self, name: str) -> bool:
        try:
            return self._format.format_has_scalar(name)
        except Exception as error:
            self._failed(error, "scalar", name)
            raise

    def format_scalars_set(self) -> set[str]:
        try:
            return self._format.format_scalars_set()
        except Exception as error:
            self._failed(error, "scalars")
            raise

    def format_get_scalar(self, name: str) -> StorageScalar:
        try:
            return self._format.format_get_scalar(name)
        except Exception as error:
            self._failed(error, "scalar", name)
            raise

    # Axes.

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        try:
            return self._format.format_has_axis(axis, for_change=for_change)
        except Exception as error:
            self._failed(error, "axis", axis)
            raise

    def format_axes_set(self) -> set[str]:
        try:
            return self._format.format_axes_set()
        except Exception as error:
            self._failed(error, "axes")
            raise

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        try:
            return self._format.format_axis_vector(axis)
        except Exception as error:
            self._failed(error, "axis", axis)
            raise

    def format_axis_length(self, axis: str) -> int:
        try:
            return self._format.format_axis_length(axis)
        except Exception as error:
            self._failed(error, "axis", axis)
            raise

    # Vectors.

    def format_has_vector(self, axis: str, name: str) -> bool:
        try:
            return self._format.format_has_vector(axis, name)
        except Exception as error:
            self._failed(error, "vector", axis, name)
            raise

    def format_vectors_set(self, axis: str) -> set[str]:
        try:
            return self._format.format_vectors_set(axis)
        except Exception as error:
            self._failed(error, "vectors", axis)
            raise

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        try:
            return self._format.format_get_vector(axis, name)
        except Exception as error:
            self._failed(error, "vector", axis, name)
            raise

    # Matrices.

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        try:
            return self._format.format_has_matrix(rows_axis, columns_axis, name)
        except Exception as error:
            self._failed(error, "matrix", rows_axis, columns_axis, name)
            raise

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        try:
            return self._format.format_matrices_set(rows_axis, columns_axis)
        except Exception as error:
            self._failed(error, "matrices", rows_axis, columns_axis)
            raise

    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        try:
            return self._format.format_get_matrix(rows_axis, columns_axis, name)
        except Exception as error:
            self._failed(error, "matrix", rows_axis, columns_axis, name)
            raise

    def format_get_matrix_columns(self, rows_axis: str, columns_axis: str, name: str,
                                  columns: np.ndarray) -> StoredMatrix | None:
        try:
            return self._format.format_get_matrix_columns(rows_axis, columns_axis, name, columns)
        except Exception as error:
            self._failed(error, "matrix", rows_axis, columns_axis, name)
            raise
