"""Copying whole data sets between stores (``copy_all``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..sparse import SparseMatrixCSC

if TYPE_CHECKING:
    from ..core.readers import DafReader
    from ..core.writers import DafWriter


def copy_all(destination: DafWriter, source: DafReader, *, overwrite: bool = False, progress: bool = True) -> None:
    """Copy every scalar, axis, vector and matrix of ``source`` into ``destination``, each matrix in the layouts
    ``source`` stores (so nothing is relaid out); sparse data stays sparse and mapped data is written from the map.

    Example:
        >>> import numpy as np, pydaf
        >>> source = pydaf.MemoryDaf().set_scalar("organism", "human").add_axis("cell", ["A", "B"])
        >>> source.set_vector("cell", "age", [3, 5]).add_axis("gene", ["X"])  # doctest: +ELLIPSIS
        MemoryDaf ...
        >>> source.set_matrix("cell", "gene", "UMIs", np.array([[1], [2]]), relayout=False)  # doctest: +ELLIPSIS
        MemoryDaf ...
        >>> copy = pydaf.MemoryDaf()
        >>> copy_all(copy, source, progress=False)
        >>> copy.get_scalar("organism"), copy.get_vector("cell", "age").tolist(), copy.has_matrix(
        ...     "gene", "cell", "UMIs", relayout=False)
        ('human', [3, 5], False)
    """
    from tqdm.auto import tqdm

    with source.read_lock():
        axes = sorted(source.axes_set())
        matrices = [(rows, columns, name) for rows in axes for columns in axes
                    for name in sorted(source.matrices_set(rows, columns, relayout=False))]
        vectors = [(axis, name) for axis in axes for name in sorted(source.vectors_set(axis))]
        for name in sorted(source.scalars_set()):
            destination.set_scalar(name, source.get_scalar(name), overwrite=overwrite)
        for axis in axes:
            destination.add_axis(axis, source.axis_vector(axis), overwrite=overwrite)
        with tqdm(total=len(vectors) + len(matrices), desc="copy", unit="property", disable=not progress,
                  mininterval=0.5) as bar:
            for axis, name in vectors:
                destination.set_vector(axis, name, source.get_stored_vector(axis, name), overwrite=overwrite)
                bar.update(1)
            for rows, columns, name in matrices:
                matrix = source.get_stored_matrix(rows, columns, name, relayout=False)
                if isinstance(matrix, SparseMatrixCSC):
                    with destination.empty_sparse_matrix(rows, columns, name, matrix.dtype, matrix.nnz,
                                                         matrix.colptr.dtype, overwrite=overwrite) as buffers:
                        for buffer, values in zip(buffers, (matrix.colptr, matrix.rowval, matrix.nzval), strict=True):
                            buffer[...] = values
                else:
                    destination.set_matrix(rows, columns, name, matrix, overwrite=overwrite, relayout=False)
                bar.update(1)
