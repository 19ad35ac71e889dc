"""A user-defined reduction, which pydaf.dask cannot combine from pieces (it knows nothing of how): imported by the
tests and preloaded by the workers of a cluster that evaluates it (a worker parses the query text itself)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pydaf.queries.base import ReductionOperation
from pydaf.queries.registry import query_operation
from pydaf.sparse import SparseMatrixCSC


@query_operation
class Extent(ReductionOperation):
    """The largest value less the smallest."""

    def reduction_result_type(self, dtype: np.dtype) -> np.dtype:
        return np.dtype(np.float64)

    def compute_vector(self, values: np.ndarray) -> np.float64:
        return np.float64(values.max() - values.min())


@query_operation
class ExtentOfPieces(Extent):
    """As :class:`Extent`, and combined from pieces on a cluster: each piece's largest and smallest value."""

    def compute_partial(self, values: Any) -> tuple[Any, Any]:
        if isinstance(values, SparseMatrixCSC):  # (its implicit zeros are values too)
            stored = values.nzval
            high, low = (stored.max(), stored.min()) if stored.shape[0] else (0, 0)
            if stored.shape[0] < values.shape[0] * values.shape[1]:
                high, low = max(high, 0), min(low, 0)
            return high, low
        values = np.asarray(values)
        return values.max(), values.min()

    def combine_partials(self, partials: list[tuple[Any, Any]]) -> np.float64:
        return np.float64(max(high for high, _ in partials) - min(low for _, low in partials))
