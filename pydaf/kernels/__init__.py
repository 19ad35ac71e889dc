"""numba kernels that run directly on stored data (1-based Julia CSC, column-major dense), mapped or in memory. They
compile lazily on first use and cache their machine code on disk; the package imports nothing (numba included) until
one of its names is used, and sits below :mod:`pydaf.sparse` (a CSC matrix is anything with its arrays,
:mod:`.csc_arrays`). The reductions can be called on the matrices of a data set directly, e.g. on the memory-mapped
``get_stored_matrix`` of an H5df file.

Design: docs/design/kernels.md.

Example:
    >>> import numpy as np
    >>> from pydaf.kernels import column_means, reduce_grouped_rows, row_sums
    >>> from pydaf.sparse import SparseMatrixCSC
    >>> umis = SparseMatrixCSC((3, 2), np.array([1, 3, 4], np.uint32), np.array([1, 3, 2], np.uint32),
    ...                        np.array([5, 1, 2], np.uint16))
    >>> row_sums(umis).tolist(), column_means(umis).tolist()
    ([5, 2, 1], [2.0, 0.6666666666666666])
    >>> reduce_grouped_rows(umis, "max", np.array([0, 1, 0]), 2).tolist()
    [[5, 0], [0, 2]]
"""

from __future__ import annotations

import importlib
from typing import Any

#: Each public name and the module that defines it.
_EXPORTS = {
    **dict.fromkeys(
        ("REDUCE_NUMBA_MIN_ENTRIES", "STATISTICS", "Direction", "Statistic", "column_means", "column_sums",
         "reduce_all", "reduce_columns", "reduce_grouped_columns", "reduce_grouped_rows", "reduce_grouped_vector",
         "reduce_rows", "reduce_vector", "row_means", "row_sums"), "reductions"),
    **dict.fromkeys(("RELAYOUT_NUMBA_MIN_ENTRIES", "transpose_csc_into", "transpose_dense_into"), "relayout"),
    **dict.fromkeys(("CSC_BAD_COLPTR", "CSC_BAD_ORDER", "first_csc_problem", "first_sorted_problem",
                     "global_heap_problem", "sort_csc_columns", "transposed_mismatch"), "validation"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))
