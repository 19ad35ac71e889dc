"""numba kernels that run directly on stored data (1-based Julia CSC, column-major dense), mapped or in memory.

Kernels compile lazily on first use and cache their machine code on disk, so importing pydaf stays fast and a second
process does not recompile.

The reductions (:mod:`pydaf.kernels.reductions`) can be called on the matrices of a data set directly, e.g. on the
memory-mapped ``get_stored_matrix`` of an H5df file:

Example:
    >>> import numpy as np
    >>> from pydaf.sparse import SparseMatrixCSC
    >>> umis = SparseMatrixCSC((3, 2), np.array([1, 3, 4], np.uint32), np.array([1, 3, 2], np.uint32),
    ...                        np.array([5, 1, 2], np.uint16))
    >>> row_sums(umis).tolist(), column_means(umis).tolist()
    ([5, 2, 1], [2.0, 0.6666666666666666])
    >>> reduce_grouped_rows(umis, "max", np.array([0, 1, 0]), 2).tolist()
    [[5, 0], [0, 2]]
"""

from .reductions import (
    NUMBA_THRESHOLD,
    STATISTICS,
    column_means,
    column_sums,
    reduce_all,
    reduce_columns,
    reduce_grouped_columns,
    reduce_grouped_rows,
    reduce_grouped_vector,
    reduce_rows,
    reduce_vector,
    row_means,
    row_sums,
    transpose_csc,
)
from .relayout import transpose_csc_into, transpose_dense_into

__all__ = [
    "NUMBA_THRESHOLD",
    "STATISTICS",
    "column_means",
    "column_sums",
    "reduce_all",
    "reduce_columns",
    "reduce_grouped_columns",
    "reduce_grouped_rows",
    "reduce_grouped_vector",
    "reduce_rows",
    "reduce_vector",
    "row_means",
    "row_sums",
    "transpose_csc",
    "transpose_csc_into",
    "transpose_dense_into",
]
