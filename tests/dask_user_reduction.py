"""User-defined reductions for the pydaf.dask tests: ``Extent``, which pydaf.dask cannot combine from pieces (nothing
says how), and ``ExtentOfPieces``, which says how. A worker parses the query text itself, so a cluster's workers
preload this file (``preload=[__file__]``: dask calls :func:`dask_setup`); the tests register them with
:func:`registered` for their duration only (other tests list the registered operations)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from pydaf.queries.base import ReductionOperation
from pydaf.queries.registry import REDUCTION_OPERATIONS, register_query_operation
from pydaf.sparse import SparseMatrixCSC


class Extent(ReductionOperation):
    """The largest value less the smallest."""

    def reduction_result_type(self, dtype: np.dtype) -> np.dtype:
        return np.dtype(np.float64)

    def compute_vector(self, values: np.ndarray) -> np.float64:
        return np.float64(values.max() - values.min())


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


OPERATIONS = (Extent, ExtentOfPieces)


def dask_setup(worker: Any = None) -> None:
    """Register the operations in a dask worker (its preload hook)."""
    for operation in OPERATIONS:
        register_query_operation(operation)


@contextmanager
def registered() -> Iterator[None]:
    """The operations registered in this process meanwhile."""
    dask_setup()
    try:
        yield
    finally:
        for operation in OPERATIONS:
            REDUCTION_OPERATIONS.pop(operation.operation_name(), None)
