"""Normalising values given to the reader/writer API (numpy, pandas, scipy) before they are validated."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..storage_types import STRING_DTYPE, as_string_array, is_string_dtype, storage_dtype


def is_scipy_sparse(value: Any) -> bool:
    """Whether a value is a scipy sparse matrix or array (without importing scipy).

    Example:
        >>> import scipy.sparse as sp
        >>> is_scipy_sparse(sp.eye(2)), is_scipy_sparse(np.eye(2))
        (True, False)
    """
    return hasattr(value, "tocsc") and hasattr(value, "nnz")


def plain_values(value: Any) -> np.ndarray:
    """The numpy values of an array-like (pandas objects unwrapped, zero-copy when possible).

    Example:
        >>> import pandas as pd
        >>> plain_values(pd.Series([1, 2])).tolist()
        [1, 2]
    """
    if hasattr(value, "to_numpy") and not isinstance(value, np.ndarray):
        return value.to_numpy()
    return np.asarray(value)


def as_storable_array(values: np.ndarray, *, what: str) -> np.ndarray:
    """Validate an array's element type: numbers keep their dtype, strings become ``object`` arrays of ``str``.

    Example:
        >>> as_storable_array(np.array(["a", "b"]), what="vector: x").dtype
        dtype('O')
    """
    if is_string_dtype(values.dtype) or values.dtype == STRING_DTYPE:
        return as_string_array(values, what=what)
    dtype = storage_dtype(values.dtype, what=f"element type of the {what}")
    return values if values.dtype == dtype else values.astype(dtype)
