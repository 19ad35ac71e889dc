"""Normalising values given to the reader/writer API (numpy, pandas, scipy) before they are validated."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from ..errors import DafInexactError, DafTypeError, DafValueError
from ..julia_text import julia_string
from ..storage_types import STRING_DTYPE, EltypeLike, as_string_array, is_string_dtype, julia_name, storage_dtype


def is_scipy_sparse(value: Any) -> bool:
    """Whether a value is a scipy sparse matrix or array (without importing scipy).

    Example:
        >>> import scipy.sparse as sp
        >>> is_scipy_sparse(sp.eye(2)), is_scipy_sparse(np.eye(2))
        (True, False)
    """
    return hasattr(value, "tocsc") and hasattr(value, "nnz")


def plain_values(value: Any, *, what: str = "value", daf_name: str | None = None) -> np.ndarray:
    """The numpy values of an array-like (pandas objects unwrapped, zero-copy when possible).

    pandas' nullable arrays (``Int64``, ``boolean``, ``string``, ...; also as Series or DataFrame columns) become their
    numpy type when no value is missing. A missing value (``pd.NA``) has no integer, Bool or string equivalent, so it is
    refused (a :class:`~pydaf.DafValueError` naming its position) rather than turned into a float NaN or a text; in a
    nullable float array it is the float's own missing value, NaN.

    Example:
        >>> import pandas as pd
        >>> plain_values(pd.Series([1, 2])).tolist(), plain_values(pd.array([1, 2], dtype="Int64")).dtype
        ([1, 2], dtype('int64'))
        >>> plain_values(pd.Series([1, None], index=["A", "B"], dtype="Int64"), what="vector: age")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafValueError: missing value (pandas NA)
        at the position: 1 (label: B)
        of the vector: age
        (fill the missing values first, e.g. with .fillna(0), or convert to floats with NaN for them, with
        .astype("float64"))
    """
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "to_numpy"):
        if type(value).__module__.startswith("pandas"):
            return _pandas_values(value, what, daf_name)
        return value.to_numpy()
    array = np.asarray(value)
    if array.dtype.kind == "U":  # (numpy's fixed-width text drops trailing NULs: "a\0" would become "a")
        strings = np.asarray(value, dtype=object)
        if strings.shape == array.shape and all(isinstance(item, str) for item in strings.flat):
            return strings
    return array


def _pandas_values(value: Any, what: str, daf_name: str | None) -> np.ndarray:
    """A pandas object's values, nullable columns converted exactly (see :func:`plain_values`)."""
    dtypes = getattr(value, "dtypes", None)
    if getattr(value, "ndim", 1) == 2 and dtypes is not None:  # a DataFrame: column by column
        if all(isinstance(dtype, np.dtype) for dtype in dtypes):
            return value.to_numpy()
        columns = [_pandas_column(value.iloc[:, column], what, daf_name, (column, value.columns[column]))
                   for column in range(value.shape[1])]
        if not columns:
            return value.to_numpy()
        return np.stack(columns, axis=1)
    return _pandas_column(value, what, daf_name, None)


def _pandas_column(value: Any, what: str, daf_name: str | None, column: tuple[int, Any] | None) -> np.ndarray:
    import pandas as pd

    dtype = value.dtype
    if isinstance(dtype, np.dtype) or isinstance(dtype, pd.CategoricalDtype):
        return value.to_numpy()
    is_string = pd.api.types.is_string_dtype(dtype)
    is_number = pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype)
    if not (is_string or is_number):
        return value.to_numpy()
    missing = np.asarray(value.isna(), dtype=bool)
    if is_number and pd.api.types.is_float_dtype(dtype):
        return value.to_numpy(dtype=dtype.numpy_dtype, na_value=np.nan)
    if missing.any():
        position = int(np.argmax(missing))
        labels = getattr(value, "index", None)
        entry = f" (label: {labels[position]})" if labels is not None else ""
        where = f"at the position: {position}{entry}"
        if column is not None:
            where = f"at the row: {position}{entry}\nand the column: {column[0]} (label: {column[1]})"
        fix = ("fill the missing values first, e.g. with .fillna(\"\")" if is_string else
               "fill the missing values first, e.g. with .fillna(0), or convert to floats with NaN for them, with\n"
               ".astype(\"float64\")")
        raise DafValueError(f"missing value (pandas NA)\n{where}\nof the {what}\n({fix})", daf_name=daf_name)
    if is_string:
        return value.to_numpy(dtype=object)
    return value.to_numpy(dtype=dtype.numpy_dtype)


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


# Exact conversions (Julia's ``convert``, which raises ``InexactError`` rather than change a value).

#: Elements converted and checked per block by :func:`exact_cast` (the check then reads them from the cache).
_CAST_BLOCK = 1 << 16


def exact_cast(values: Any, dtype: EltypeLike, *, what: str | None = None, daf_name: str | None = None,
               where: Callable[[tuple[int, ...]], str] | None = None, out: np.ndarray | None = None,
               exact_floats: bool = True, integral: bool = False) -> np.ndarray:
    """``values`` converted to the numeric storage ``dtype`` (``values`` themselves if already of it, else a new array
    of the same layout, or ``out``) when every value converts exactly, else a :class:`~pydaf.DafInexactError` (a
    :class:`~pydaf.DafValueError`) naming the first value that does not (in column-major order) and its position.

    Exact is Julia's ``convert``: an integer type takes only whole, finite values in its range; ``Bool`` only 0 and 1
    (and any Bool converts to any number). A float type rounds a wider float to its nearest value, as Julia's
    ``convert(Float32, 0.1)`` does: choosing a narrower float type is choosing its precision. With ``exact_floats``
    (the default, used where data is stored) a float type must also hold each integer exactly (``2**53 + 1`` does not
    fit a Float64, ``2**24 + 1`` a Float32) and not overflow a finite value to infinity; without it (queries, as
    Julia's ``convert``) those round. One pass over the values, a block at a time (``integral``: the values are known
    to be whole).

    ``what`` (e.g. ``"vector: age\\nof the axis: cell"``) and ``daf_name`` make the message name the property (else it
    is Julia's ``InexactError: UInt8(300)``); ``where`` turns an index into a position text (default: ``position: i``,
    or ``row: i\\nand the column: j``).

    Example:
        >>> exact_cast(np.array([1.0, 2.0]), "UInt8").tolist()
        [1, 2]
        >>> exact_cast(np.array([1.0, 300.0]), "UInt8")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafInexactError: InexactError: UInt8(300.0)
    """
    values = np.asarray(values)
    dtype = storage_dtype(dtype)
    if values.dtype != dtype and (dtype == STRING_DTYPE or is_string_dtype(values.dtype)):
        raise DafTypeError(f"can't convert {julia_name(values.dtype)} values exactly to: {julia_name(dtype)}")
    if out is None:
        if values.dtype == dtype:
            return values
        order: Literal["C", "F"] = "F" if values.flags.f_contiguous and not values.flags.c_contiguous else "C"
        out = np.empty(values.shape, dtype=dtype, order=order)
    checks = _inexact_check(values.dtype, out.dtype, exact_floats=exact_floats, integral=integral)
    flat = _flat_pair(values, out)
    with np.errstate(invalid="ignore", over="ignore"):
        if flat is None or checks is None:
            np.copyto(out, values, casting="unsafe")
            if checks is not None and values.size and checks[1](values, out).any():
                _raise_inexact(values, out, checks[1], what, daf_name, where)
            return out
        fits, check = checks
        flat_values, flat_out = flat
        for start in range(0, flat_values.shape[0], _CAST_BLOCK):
            block, converted = flat_values[start:start + _CAST_BLOCK], flat_out[start:start + _CAST_BLOCK]
            np.copyto(converted, block, casting="unsafe")
            if not fits(block, converted) and check(block, converted).any():
                _raise_inexact(values, out, check, what, daf_name, where)
    return out


def exact_scalar(value: Any, dtype: EltypeLike, *, what: str | None = None, daf_name: str | None = None) -> Any:
    """A number converted exactly to a numeric storage type (as :func:`exact_cast`), as a numpy scalar.

    Example:
        >>> exact_scalar(3.0, "Int8"), exact_scalar(True, "Float32")
        (np.int8(3), np.float32(1.0))
    """
    return exact_cast(np.asarray(value), dtype, what=what, daf_name=daf_name)[()]


def _flat_pair(values: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Both arrays as 1-D views in the same element order (``None`` unless both are contiguous alike)."""
    if values.shape == out.shape:
        if values.flags.c_contiguous and out.flags.c_contiguous:
            return values.reshape(-1, order="C"), out.reshape(-1, order="C")
        if values.flags.f_contiguous and out.flags.f_contiguous:
            return values.reshape(-1, order="F"), out.reshape(-1, order="F")
    return None


Check = Callable[[np.ndarray, np.ndarray], np.ndarray]
Fits = Callable[[np.ndarray, np.ndarray], bool]


def _inexact_check(source: np.dtype, target: np.dtype, *, exact_floats: bool,
                   integral: bool) -> tuple[Fits, Check] | None:
    """``None`` when every value of ``source`` converts exactly to ``target``; else a quick test of a block of values
    and their (unsafe) conversion, true when all converted exactly (reductions: no temporary arrays), and a function
    flagging the values that did not (run only once the quick test failed, to find the first of them)."""
    if source == target or source.kind == "b":
        return None
    if target.kind == "b":
        return (lambda values, converted: bool(values.min() >= 0 and values.max() <= 1 and (
            source.kind != "f" or integral or np.array_equal(values, converted))),
            lambda values, _: ~((values == 0) | (values == 1)))
    if target.kind in "iu":
        info = np.iinfo(target)
        if source.kind == "f":
            low, high = float(info.min), float(info.max) + 1.0  # (float(2**63 - 1) + 1.0 is 2**63: excluded)

            def float_fits(values: np.ndarray, converted: np.ndarray) -> bool:
                # (NaN makes min and max NaN: not in range; in range, the conversion truncated: equal if whole.)
                return bool(values.min() >= low and values.max() < high) and (
                    integral or bool(np.array_equal(converted, values)))

            return float_fits, lambda values, _: ~((values >= low) & (values < high) & (np.trunc(values) == values))
        source_info = np.iinfo(source)
        # The bounds in the source's own type (comparisons mixing UInt64 and Int64 go through Float64).
        low_bound = source.type(info.min) if info.min > source_info.min else source.type(source_info.min)
        high_bound = source.type(info.max) if info.max < source_info.max else source.type(source_info.max)
        if info.min <= source_info.min and info.max >= source_info.max:
            return None
        return (lambda values, _: bool(values.min() >= low_bound and values.max() <= high_bound),
                lambda values, _: (values < low_bound) | (values > high_bound))
    if not exact_floats:
        return None
    if source.kind == "f":
        if source.itemsize <= target.itemsize:
            return None
        return (lambda _, converted: not bool(np.isinf(converted).any()),
                lambda values, converted: np.isinf(converted) & np.isfinite(values))
    bits = source.itemsize * 8 - (source.kind == "i")
    mantissa = np.finfo(target).nmant + 1
    if bits <= mantissa:
        return None
    safe = 2**mantissa  # (every integer up to it in magnitude is exact)
    limit = target.type(2.0 ** bits)  # (a power of two: exact; the first value past the source's range)
    return (lambda values, _: bool(int(values.min()) >= -safe and int(values.max()) <= safe),
            lambda values, converted: ~((converted < limit) & (converted.astype(source) == values)))


def _raise_inexact(values: np.ndarray, out: np.ndarray, check: Check, what: str | None, daf_name: str | None,
                   where: Callable[[tuple[int, ...]], str] | None) -> None:
    np.copyto(out, values, casting="unsafe")
    bad = check(values, out)
    flat_position = int(np.argmax(bad.reshape(-1, order="F")))
    position = tuple(int(index) for index in np.unravel_index(flat_position, values.shape, order="F"))
    value = values[position]
    julia = f"InexactError: {julia_name(out.dtype)}({julia_string(value)})"
    if what is None:
        raise DafInexactError(julia, value=value, position=position)
    if not position:
        place = ""
    elif where is not None:
        place = f"\nat the {where(position)}"
    elif len(position) == 2:
        place = f"\nat the row: {position[0]}\nand the column: {position[1]}"
    else:
        place = f"\nat the position: {position[0]}"
    raise DafInexactError(
        f"can't convert exactly the value: {julia_string(value)}{place}\nof the {what}\nto the element type: "
        f"{julia_name(out.dtype)}\n({julia}; round, clip or fill the values first to change them)",
        value=value, position=position, daf_name=daf_name)
