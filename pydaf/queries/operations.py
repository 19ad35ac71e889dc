"""The built-in query operations (Julia's ``Operations``): element-wise operations that keep the shape of the data
(``% Abs``, ``% Log base 2 eps 1``, ...) and reductions that turn a vector into a scalar or a matrix into a vector
(``>> Sum``, ``>| Mean``, ``>- Quantile p 0.9``, grouped with ``/``, ``-/`` and ``|/``).

Each operation is built either with keyword parameters (``Log(base=2, eps=1e-5)``) or, by the query parser, from the
``param value`` tokens of a query string (:meth:`~pydaf.queries.base.ComputationOperation.from_tokens`, raising
Julia's messages for invalid values); both follow one declaration of the parameters (``parameter_specs``).
``str(operation)`` is its canonical query text, exactly as Julia prints it.

Result element types follow Julia: :func:`float_type_for` (``Log``, ``Mean``, ``Median``, ...), :func:`int_type_for`
(``Round``), :func:`sum_type_for` (``Sum``: small integers widen to 32 bits) and :func:`unsigned_type_for` (``Abs``).
Conversions that would lose information raise ``InexactError`` (as Julia's ``convert`` does).

Example:
    >>> import numpy as np
    >>> Log(base=2).compute_eltwise(np.array([1, 4, 8], np.int64))
    array([0., 2., 3.])
    >>> str(Sum(type="Int64")), Sum().compute_vector(np.array([200, 100], np.uint8))
    ('>> Sum type Int64', np.uint32(300))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ..core.values import exact_cast
from ..errors import DafTypeError, DafValueError
from ..julia_text import julia_string
from ..kernels import reductions as kernels
from ..kernels.eltwise import divide_columns, map_values, significant_columns
from ..sparse import SparseMatrixCSC, colptr_from_counts, copy_array, dense_column_major, is_read_only_array
from ..storage_types import STRING_DTYPE
from .base import (
    AT_LEAST_0,
    AT_MOST_1,
    NOT_NEGATIVE,
    POSITIVE,
    EltwiseOperation,
    Parameter,
    ParameterKind,
    ReductionOperation,
    Rule,
)
from .registry import query_operation
from .values import (
    REQUIRED,
    error_invalid_parameter_value,
    guess_typed_value,
    parse_float_type_value,
    parse_int_type_value,
    parse_number_type_value,
    parse_number_value,
    parse_parameter_value,
)

__all__ = [
    "Abs",
    "Clamp",
    "Convert",
    "Count",
    "Fraction",
    "GeoMean",
    "Log",
    "Max",
    "Mean",
    "Median",
    "Min",
    "Mode",
    "Quantile",
    "Round",
    "Significant",
    "Std",
    "StdN",
    "Sum",
    "Var",
    "VarN",
    "error_invalid_parameter_value",
    "float_type_for",
    "guess_typed_value",
    "int_type_for",
    "parse_float_type_value",
    "parse_int_type_value",
    "parse_number_type_value",
    "parse_number_value",
    "parse_parameter_value",
    "sum_type_for",
    "unsigned_type_for",
]


# Result element types (Julia's FLOAT_DTYPE_FOR, INT_DTYPE_FOR, SUM_DTYPE_FOR, UNSIGNED_DTYPE_FOR).

_BOOL, _FLOAT32, _FLOAT64 = (np.dtype(name) for name in ("bool", "float32", "float64"))
_INT8, _INT16, _INT32, _INT64 = (np.dtype(name) for name in ("int8", "int16", "int32", "int64"))
_UINT8, _UINT16, _UINT32, _UINT64 = (np.dtype(name) for name in ("uint8", "uint16", "uint32", "uint64"))

_FLOAT_TYPE_FOR = {_BOOL: _FLOAT32, _INT8: _FLOAT32, _INT16: _FLOAT32, _INT32: _FLOAT32, _INT64: _FLOAT64,
                   _UINT8: _FLOAT32, _UINT16: _FLOAT32, _UINT32: _FLOAT32, _UINT64: _FLOAT64,
                   _FLOAT32: _FLOAT32, _FLOAT64: _FLOAT64}
_INT_TYPE_FOR = {_BOOL: _BOOL, _INT8: _INT8, _INT16: _INT16, _INT32: _INT32, _INT64: _INT64, _UINT8: _UINT8,
                 _UINT16: _UINT16, _UINT32: _UINT32, _UINT64: _UINT64, _FLOAT32: _INT32, _FLOAT64: _INT64}
_SUM_TYPE_FOR = {_BOOL: _UINT32, _INT8: _INT32, _INT16: _INT32, _INT32: _INT32, _INT64: _INT64, _UINT8: _UINT32,
                 _UINT16: _UINT32, _UINT32: _UINT32, _UINT64: _UINT64, _FLOAT32: _FLOAT32, _FLOAT64: _FLOAT64}
_UNSIGNED_TYPE_FOR = {_BOOL: _BOOL, _INT8: _UINT8, _INT16: _UINT16, _INT32: _UINT32, _INT64: _UINT64,
                      _UINT8: _UINT8, _UINT16: _UINT16, _UINT32: _UINT32, _UINT64: _UINT64,
                      _FLOAT32: _FLOAT32, _FLOAT64: _FLOAT64}


def _type_for(table: dict[np.dtype, np.dtype], element_type: Any, type: np.dtype | None) -> np.dtype:
    if type is not None:
        return np.dtype(type)
    dtype = np.dtype(element_type)
    result = table.get(dtype)
    if result is None:
        name = "String" if dtype.kind in "OUS" else str(dtype)
        raise DafTypeError(f"unsupported input type: {name} (expected a number type)")
    return result


def float_type_for(element_type: Any, type: np.dtype | None = None) -> np.dtype:
    """The result type of an operation that always produces floats (``Log``, ``Mean``, ...): ``type`` if given, else
    ``Float64`` for 64-bit inputs and ``Float32`` for everything smaller.

    Example:
        >>> float_type_for(np.dtype("uint16")), float_type_for(np.dtype("int64")), float_type_for("bool", np.float64)
        (dtype('float32'), dtype('float64'), dtype('float64'))
    """
    return _type_for(_FLOAT_TYPE_FOR, element_type, type)


def int_type_for(element_type: Any, type: np.dtype | None = None) -> np.dtype:
    """The result type of an operation that always produces integers (``Round``): ``type`` if given, else integers
    keep their type, ``Float32`` gives ``Int32`` and ``Float64`` gives ``Int64``.

    Example:
        >>> int_type_for(np.dtype("float32")), int_type_for(np.dtype("uint8"))
        (dtype('int32'), dtype('uint8'))
    """
    return _type_for(_INT_TYPE_FOR, element_type, type)


def sum_type_for(element_type: Any, type: np.dtype | None = None) -> np.dtype:
    """The result type of a sum: ``type`` if given, else floats and 64-bit integers keep their type, smaller integers
    widen to the 32-bit integer of the same signedness, and ``Bool`` sums to ``UInt32``.

    Example:
        >>> sum_type_for(np.dtype("uint8")), sum_type_for(np.dtype("int16")), sum_type_for(np.dtype("bool"))
        (dtype('uint32'), dtype('int32'), dtype('uint32'))
    """
    return _type_for(_SUM_TYPE_FOR, element_type, type)


def unsigned_type_for(element_type: Any, type: np.dtype | None = None) -> np.dtype:
    """The result type of an operation that discards the sign (``Abs``): ``type`` if given, else signed integers
    become the unsigned integer of the same size; others keep their type.

    Example:
        >>> unsigned_type_for(np.dtype("int32")), unsigned_type_for(np.dtype("float32"))
        (dtype('uint32'), dtype('float32'))
    """
    return _type_for(_UNSIGNED_TYPE_FOR, element_type, type)


# The parameters several operations share.

_NUMBER_TYPE = Parameter("type", ParameterKind.NUMBER_TYPE)
_FLOAT_TYPE = Parameter("type", ParameterKind.FLOAT_TYPE)
_EPS = Parameter("eps", ParameterKind.NUMBER, 0.0, (NOT_NEGATIVE,))


# Values: scalars, vectors, dense column-major matrices, 1-based sparse matrices.


def _eltype(input: Any) -> np.dtype:
    if isinstance(input, SparseMatrixCSC):
        return input.nzval.dtype
    if isinstance(input, str):
        return STRING_DTYPE
    return np.asarray(input).dtype


def _is_scalar(input: Any) -> bool:
    return not isinstance(input, SparseMatrixCSC) and np.ndim(input) == 0


def _require_numbers(operation: Any, input: Any) -> None:
    if _eltype(input).kind in "OUS":
        raise DafTypeError(f"unsupported input type: String\nfor the operation: {operation.operation_name()}")


def _cast(values: Any, dtype: np.dtype) -> Any:
    """``values`` converted to ``dtype`` (themselves if already of it), raising Julia's ``InexactError`` when a value
    does not fit an integer or Bool type exactly (a fraction, NaN, or out of range)."""
    values = np.asarray(values)
    if values.dtype == dtype:
        return values
    out = np.empty(values.shape, dtype=dtype)
    _cast_into(values, out)
    return out


def _cast_into(values: np.ndarray, out: np.ndarray, *, integral: bool = False) -> None:
    """Write ``values`` converted to the type of ``out`` into it, as :func:`_cast` (``integral``: the values are
    known to be whole numbers, e.g. rounded): the writers' :func:`~pydaf.core.values.exact_cast`, except that a float
    type rounds what it can't hold exactly, as Julia's ``convert`` does."""
    exact_cast(values, out.dtype, out=out, exact_floats=False, integral=integral)


def _scalar(value: Any, dtype: np.dtype) -> Any:
    return _cast(np.asarray(value), dtype)[()]


def _map_values(input: Any, dtype: np.dtype, function: Callable[[np.ndarray, np.ndarray], None], *,
                zero_to_zero: bool, identity: bool = False) -> Any:
    """Apply an element-wise ``function`` (which writes its results for a numpy array into an array of ``dtype`` of
    the same shape) to a scalar, a vector or a matrix; large inputs go in cache-sized chunks on all threads
    (:func:`~pydaf.kernels.eltwise.map_values`).

    A sparse matrix whose zeros stay zeros (``zero_to_zero``) maps its stored values only, in one pass: the result has
    its structure and shares its read-only index arrays (as Julia's ``similar``, an entry that becomes zero stays
    stored). Otherwise every entry has a value and the result is dense. When ``function`` is the ``identity`` of the
    input's type, a read-only input is its own result (zero-copy)."""
    if _is_scalar(input):
        out = np.empty((), dtype=dtype)
        function(np.asarray(input), out)
        return out[()]
    if isinstance(input, SparseMatrixCSC):
        if not zero_to_zero:
            return _map_array(dense_column_major(input), dtype, function, identity)
        return SparseMatrixCSC(input.shape, _shared_array(input.colptr), _shared_array(input.rowval),
                               _map_array(np.asarray(input.nzval), dtype, function, identity))
    return _map_array(np.asarray(input), dtype, function, identity)


def _map_array(values: np.ndarray, dtype: np.dtype, function: Callable[[np.ndarray, np.ndarray], None],
               identity: bool) -> np.ndarray:
    if identity and values.dtype == dtype:
        return _shared_array(values)
    try:
        return map_values(values, dtype, function)
    except DafValueError:
        # A value that does not convert (InexactError): report the first one in order, as Julia.
        function(values, np.empty(values.shape, dtype=dtype))
        raise


def _shared_array(values: np.ndarray) -> np.ndarray:
    """Read-only (e.g. mapped) arrays are shared by a result; writable ones are copied (results never alias their
    possibly stored, writable inputs)."""
    return values if not values.flags.writeable else values.copy(order="K")


# Element-wise operations.


@query_operation
class Abs(EltwiseOperation):
    """``% Abs [type T]``: the absolute value of every element; by default of the :func:`unsigned_type_for` the
    input type.

    Example:
        >>> Abs().compute_eltwise(np.array([-3, 2], np.int8))
        array([3, 2], dtype=uint8)
        >>> str(Abs(type="Float32"))
        '% Abs type Float32'
    """

    parameter_specs = (_NUMBER_TYPE,)
    type: np.dtype | None

    def compute_eltwise(self, input: Any) -> Any:
        _require_numbers(self, input)
        input_type = _eltype(input)
        dtype = unsigned_type_for(input_type, self.type)
        is_unsigned = input_type.kind in "ub"

        def absolute(values: np.ndarray, out: np.ndarray) -> None:
            if values.dtype == dtype and not is_unsigned:
                np.abs(values, out=out)
            else:
                _cast_into(values if is_unsigned else np.abs(values), out)

        return _map_values(input, dtype, absolute, zero_to_zero=True, identity=is_unsigned)


@query_operation
class Round(EltwiseOperation):
    """``% Round [type T]``: every element rounded to the nearest integer (ties to even); by default of the
    :func:`int_type_for` the input type.

    Example:
        >>> Round().compute_eltwise(np.array([-1.5, 2.5, 2.7]))
        array([-2,  2,  3])
    """

    parameter_specs = (_NUMBER_TYPE,)
    type: np.dtype | None

    def compute_eltwise(self, input: Any) -> Any:
        _require_numbers(self, input)
        input_type = _eltype(input)
        dtype = int_type_for(input_type, self.type)
        is_float = input_type.kind == "f"

        def rounded(values: np.ndarray, out: np.ndarray) -> None:
            _cast_into(np.rint(values) if is_float else values, out, integral=True)

        return _map_values(input, dtype, rounded, zero_to_zero=True, identity=not is_float)


@query_operation
class Clamp(EltwiseOperation):
    """``% Clamp [min m] [max M] [type T]``: every element clamped into ``[min, max]``. By default the result keeps an
    integer input type when both bounds are integers (or infinite), and is the :func:`float_type_for` it otherwise.

    Example:
        >>> Clamp(min=0, max=10).compute_eltwise(np.array([-5, 5, 50]))
        array([ 0,  5, 10])
        >>> str(Clamp(min=40, max=60))
        '% Clamp min 40.0 max 60.0'
    """

    parameter_specs = (
        _NUMBER_TYPE,
        Parameter("min", ParameterKind.NUMBER, -math.inf),
        Parameter("max", ParameterKind.NUMBER, math.inf, (
            Rule(lambda value, values: value > values["min"],
                 lambda values: f"larger than min ({julia_string(values['min'])})"),)),
    )
    type: np.dtype | None
    min: float
    max: float

    def _result_type(self, element_type: np.dtype) -> np.dtype:
        if self.type is not None:
            return self.type
        if element_type.kind in "iub" and _is_int(self.min) and _is_int(self.max):
            return int_type_for(element_type)
        return float_type_for(element_type)

    def compute_eltwise(self, input: Any) -> Any:
        _require_numbers(self, input)
        dtype = self._result_type(_eltype(input))

        def clamped(values: np.ndarray, out: np.ndarray) -> None:
            if values.dtype.kind in "iu" and _is_int(self.min) and _is_int(self.max):
                # In the integer domain: float64 would round 64-bit values.
                info = np.iinfo(values.dtype)
                low = info.min if self.min == -math.inf else max(int(self.min), info.min)
                high = info.max if self.max == math.inf else min(int(self.max), info.max)
                if low > high:
                    _cast_into(np.full(values.shape, self.max if high < info.min else self.min), out)
                elif values.dtype == dtype:
                    np.clip(values, values.dtype.type(low), values.dtype.type(high), out=out)
                else:
                    _cast_into(np.clip(values, values.dtype.type(low), values.dtype.type(high)), out)
            elif values.dtype == dtype and dtype.kind == "f":
                # Clamping in the type itself, to the bounds rounded to it, gives what Julia's clamp in Float64
                # (then converted) gives: rounding is monotonic.
                np.clip(values, dtype.type(self.min), dtype.type(self.max), out=out)
            else:
                _cast_into(np.clip(values.astype(np.float64), self.min, self.max), out)

        return _map_values(input, dtype, clamped, zero_to_zero=self.min <= 0 <= self.max)


def _is_int(value: float) -> bool:
    return math.isinf(value) or float(value).is_integer()


@query_operation
class Convert(EltwiseOperation):
    """``% Convert type T``: every element converted to ``T`` (required; values must fit exactly in an integer type).

    Example:
        >>> Convert(type="Float32").compute_eltwise(np.array([1, 2]))
        array([1., 2.], dtype=float32)
    """

    parameter_specs = (Parameter("type", ParameterKind.NUMBER_TYPE, REQUIRED),)
    type: np.dtype

    def compute_eltwise(self, input: Any) -> Any:
        _require_numbers(self, input)
        dtype = self.type
        assert dtype is not None
        return _map_values(input, dtype, _cast_into, zero_to_zero=True, identity=True)


@query_operation
class Fraction(EltwiseOperation):
    """``% Fraction [type T]``: every element divided by the total of its vector (or of its matrix column); all zeros
    for a vector whose total is zero (a matrix column whose total is zero is kept as is). Of the
    :func:`float_type_for` the input type; not defined for scalars.

    Example:
        >>> Fraction().compute_eltwise(np.array([1, 3], np.int64))
        array([0.25, 0.75])
        >>> Fraction().compute_eltwise(np.array([[1, 0], [3, 0]], np.int32, order="F")).tolist()
        [[0.25, 0.0], [0.75, 0.0]]
    """

    parameter_specs = (_FLOAT_TYPE,)
    type: np.dtype | None

    def compute_eltwise(self, input: Any) -> Any:
        if _is_scalar(input):
            raise DafValueError("applying Fraction eltwise operation to a scalar")
        _require_numbers(self, input)
        dtype = float_type_for(_eltype(input), self.type)
        if isinstance(input, SparseMatrixCSC):
            nzval = _fractions(np.asarray(input.nzval), np.asarray(input.colptr, dtype=np.int64) - 1, dtype,
                               lambda values: kernels.column_sums(input.with_values(values)))
            return SparseMatrixCSC(input.shape, _shared_array(input.colptr), _shared_array(input.rowval), nzval)
        values = np.asarray(input)
        if values.ndim == 2:
            return _fractions(np.asfortranarray(values), None, dtype, kernels.column_sums)
        total = kernels.reduce_vector(values, "sum") if values.size else 0
        if total == 0:
            return np.zeros(values.shape, dtype=dtype)
        if values.dtype == _FLOAT64 and dtype == _FLOAT32:
            # Julia divides the Float32 values by the Float64 total in Float64, then stores Float32.
            return (_cast(values, dtype).astype(np.float64) / total).astype(dtype)
        return _cast(values, dtype) / dtype.type(total)


def _fractions(values: np.ndarray, column_starts: np.ndarray | None, dtype: np.dtype,
               column_sums: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """The values of a matrix (dense, or ``nzval`` with its ``column_starts``: see
    :func:`~pydaf.kernels.eltwise.divide_columns`) divided by their column's total, as Julia: converted to ``dtype``,
    each column divided by its total in ``dtype`` (unless zero). The values are converted first only when the
    conversion rounds them (otherwise the totals of the values themselves are the same, and the division converts
    them as it reads them: one pass)."""
    if not np.can_cast(values.dtype, dtype, "safe"):
        values = _cast(values, dtype)
    totals = column_sums(values).astype(dtype)
    return divide_columns(values, column_starts, np.where(totals == 0, dtype.type(1), totals), dtype)


#: Julia accepts ``% Log base 1`` and divides by ``log(1) = 0``, giving infinities and NaNs; pydaf refuses it.
_NOT_ONE = Rule(lambda value, _values: value != 1, lambda _values: "positive and not 1")


@query_operation
class Log(EltwiseOperation):
    """``% Log [base b] [eps e] [type T]``: the logarithm of every element plus ``eps`` (default: natural log, eps 0);
    of the :func:`float_type_for` the input type.

    Example:
        >>> Log(base=2, eps=1).compute_eltwise(np.array([0, 1, 3], np.uint8))
        array([0., 1., 2.], dtype=float32)
        >>> str(Log()), str(Log(base=10, eps=1e-5, type="Float64"))
        ('% Log base e eps 0.0', '% Log type Float64 base 10.0 eps 1.0e-5')
    """

    parameter_specs = (
        _FLOAT_TYPE,
        Parameter("base", ParameterKind.NUMBER, math.e, (POSITIVE, _NOT_ONE)),
        _EPS,
    )
    type: np.dtype | None
    base: float
    eps: float

    def compute_eltwise(self, input: Any) -> Any:
        _require_numbers(self, input)
        dtype = float_type_for(_eltype(input), self.type)
        if _is_scalar(input):
            # As Julia: computed in Float64 (dividing by log(base)), then converted.
            with np.errstate(divide="ignore", invalid="ignore"):
                return dtype.type(np.log(np.float64(input) + self.eps) / np.log(self.base))

        def logarithm(values: np.ndarray, out: np.ndarray) -> None:
            # As Julia: log(T(value) + T(eps)) in the result type T.
            np.add(values, dtype.type(self.eps), out=out, dtype=dtype, casting="unsafe")
            with np.errstate(divide="ignore", invalid="ignore"):
                if self.base == 2.0:
                    np.log2(out, out=out)
                elif self.base == 10.0:
                    np.log10(out, out=out)
                else:
                    np.log(out, out=out)
                    if self.base != math.e:
                        out *= dtype.type(1.0 / math.log(self.base))

        return _map_values(input, dtype, logarithm, zero_to_zero=self.eps == 1.0)


@query_operation
class Significant(EltwiseOperation):
    """``% Significant high h [low l]``: zero the insignificant values of each vector (or matrix column). If no value
    reaches ``|x| >= high`` they all become zero; otherwise the values with ``|x| < low`` (default: ``high``) do. A
    dense matrix with zeros in the result becomes sparse (as in Julia); not defined for scalars.

    Example:
        >>> Significant(high=3, low=2).compute_eltwise(np.array([-3.5, 1.0, 2.5, -0.5]))
        array([-3.5,  0. ,  2.5,  0. ])
        >>> str(Significant(high=3))
        '% Significant high 3.0 low 3.0'
    """

    parameter_specs = (
        Parameter("high", ParameterKind.NUMBER, REQUIRED, (POSITIVE,)),
        Parameter("low", ParameterKind.NUMBER, lambda values: values["high"], (
            NOT_NEGATIVE,
            Rule(lambda value, values: value <= values["high"],
                 lambda values: f"at most high ({julia_string(values['high'])})"))),
    )
    high: float
    low: float

    def _thresholds(self, dtype: np.dtype) -> tuple[Any, Any]:
        # Julia compares in the element type (an integer type must hold the thresholds exactly).
        return _scalar(self.high, dtype), _scalar(self.low, dtype)

    def compute_eltwise(self, input: Any) -> Any:
        if _is_scalar(input):
            raise DafValueError("applying Significant eltwise operation to a scalar")
        _require_numbers(self, input)
        dtype = _eltype(input)
        high, low = self._thresholds(dtype)
        if isinstance(input, SparseMatrixCSC):
            values = np.asarray(input.nzval)
            if input.nnz >= kernels.REDUCE_NUMBA_MIN_ENTRIES:
                kept = significant_columns(*_significant_view(input.colptr, input.rowval, values, high, low),
                                           input.colptr.dtype)
                if kept is None:
                    return input if is_read_only_array(input) else copy_array(input)
                return SparseMatrixCSC(input.shape, *_significant_result(kept, dtype))
            keep = self._keep(values, input.entry_columns(), input.shape[1], high, low)
            return input.with_values(values, keep=keep & (values != 0))
        values = np.asarray(input)
        if values.ndim == 1:
            keep = self._keep(values, np.zeros(values.shape[0], dtype=np.int64), 1, high, low)
            return np.where(keep, values, dtype.type(0))
        matrix = np.asfortranarray(values)
        n_rows, n_columns = matrix.shape
        if matrix.size >= kernels.REDUCE_NUMBA_MIN_ENTRIES:
            colptr = 1 + n_rows * np.arange(n_columns + 1, dtype=np.int64)
            kept = significant_columns(*_significant_view(colptr, None, matrix.ravel(order="F"), high, low),
                                       np.dtype(np.int64))
            if kept is None:
                return _shared_array(matrix)
            # Julia returns a sparse matrix when any value became zero.
            return SparseMatrixCSC((int(n_rows), int(n_columns)), *_significant_result(kept, dtype))
        flat = matrix.ravel(order="F")
        columns = np.repeat(np.arange(n_columns, dtype=np.int64), n_rows)
        keep = self._keep(flat, columns, n_columns, high, low) & (flat != 0)
        if np.all(keep):
            return np.asfortranarray(values.copy(order="F"))
        rows = np.tile(np.arange(n_rows, dtype=np.int64), n_columns)
        colptr = colptr_from_counts(np.bincount(columns[keep], minlength=n_columns), np.int64)
        return SparseMatrixCSC((int(n_rows), int(n_columns)), colptr, rows[keep] + 1, flat[keep])

    @staticmethod
    def _keep(values: np.ndarray, columns: np.ndarray, n_columns: int, high: Any, low: Any) -> np.ndarray:
        if values.dtype.kind == "b":
            # As in Julia, where ``-true`` is the integer -1 (numpy refuses to negate a Bool).
            values, high, low = values.view(np.int8), np.int8(high), np.int8(low)
        with np.errstate(over="ignore"):  # ``-high`` of an unsigned type wraps around, as in Julia
            is_high = ~((-high < values) & (values < high))
            is_low = (-low < values) & (values < low)
        has_high = np.bincount(columns[is_high], minlength=n_columns) > 0
        return has_high[columns] & ~is_low


def _significant_view(colptr: np.ndarray, rowval: np.ndarray | None, values: np.ndarray, high: Any,
                      low: Any) -> tuple[np.ndarray, np.ndarray | None, np.ndarray, Any, Any]:
    """The kernel's inputs: Bool values as ``Int8`` (Julia's ``-true`` is -1)."""
    if values.dtype.kind == "b":
        return colptr, rowval, values.view(np.int8), np.int8(high), np.int8(low)
    return colptr, rowval, values, high, low


def _significant_result(kept: tuple[np.ndarray, np.ndarray, np.ndarray],
                        dtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    colptr, rowval, nzval = kept
    return colptr, rowval, nzval.view(dtype) if nzval.dtype != dtype else nzval


# Reductions.


class _KernelReduction(ReductionOperation):
    """A reduction computed by :mod:`pydaf.kernels.reductions`: the kernel's statistic, cast to the result type."""

    #: The kernel statistic.
    statistic: ClassVar[str] = ""

    type: np.dtype | None = None

    def _options(self) -> dict[str, Any]:
        return {}

    def _finish(self, values: Any, dtype: np.dtype) -> Any:
        return _cast(values, self.reduction_result_type(dtype))

    def compute_vector(self, values: np.ndarray) -> Any:
        _require_numbers(self, values)
        return self._finish(kernels.reduce_vector(values, self.statistic, **self._options()), values.dtype)[()]

    def compute_matrix(self, matrix: Any, axis: int) -> np.ndarray:
        _require_numbers(self, matrix)
        reduce = kernels.reduce_columns if axis == 0 else kernels.reduce_rows
        return self._finish(reduce(matrix, self.statistic, **self._options()), _eltype(matrix))

    def compute_all(self, matrix: Any) -> Any:
        _require_numbers(self, matrix)
        return self._finish(kernels.reduce_all(matrix, self.statistic, **self._options()), _eltype(matrix))[()]

    def compute_grouped_vector(self, values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
        _require_numbers(self, values)
        with np.errstate(invalid="ignore"):
            reduced = kernels.reduce_grouped_vector(values, self.statistic, groups, n_groups, **self._options())
        return self._finish(_fill_empty(reduced, groups, n_groups), values.dtype)

    def compute_grouped_matrix(self, matrix: Any, groups: np.ndarray, n_groups: int, axis: int) -> np.ndarray:
        _require_numbers(self, matrix)
        reduce = kernels.reduce_grouped_rows if axis == 0 else kernels.reduce_grouped_columns
        reduced = reduce(matrix, self.statistic, groups, n_groups, **self._options())
        empty = np.bincount(np.asarray(groups)[np.asarray(groups) >= 0], minlength=n_groups) == 0
        if np.any(empty):
            # Empty groups are replaced by the evaluator; zero them so the casts below never fail on them.
            reduced = np.array(reduced, copy=True, order="F")
            if axis == 0:
                reduced[empty, :] = 0
            else:
                reduced[:, empty] = 0
        return np.asfortranarray(self._finish(reduced, _eltype(matrix)))


def _fill_empty(reduced: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    groups = np.asarray(groups)
    empty = np.bincount(groups[groups >= 0], minlength=n_groups) == 0
    if np.any(empty):
        reduced = reduced.copy()
        reduced[empty] = 0
    return reduced


@query_operation
class Sum(_KernelReduction):
    """``>> Sum [type T]``: the sum of the elements; by default of the :func:`sum_type_for` the input type.

    Example:
        >>> Sum().compute_matrix(np.array([[1, 2], [3, 4]], np.int8, order="F"), 0)
        array([4, 6], dtype=int32)
    """

    parameter_specs = (_NUMBER_TYPE,)
    parameters_kind = "reduction"
    statistic = "sum"

    def reduction_result_type(self, dtype: np.dtype) -> np.dtype:
        return sum_type_for(dtype, self.type)


@query_operation
class Max(_KernelReduction):
    """``>> Max``: the largest element (of the input type).

    Example:
        >>> Max().compute_vector(np.array([3, 9, 2], np.uint16))
        np.uint16(9)
    """

    statistic = "max"

    def reduction_result_type(self, dtype: np.dtype) -> np.dtype:
        return np.dtype(dtype)


@query_operation
class Min(_KernelReduction):
    """``>> Min``: the smallest element (of the input type).

    Example:
        >>> Min().compute_all(SparseMatrixCSC((2, 2), np.array([1, 2, 3]), np.array([1, 2]), np.array([4.0, 5.0])))
        np.float64(0.0)
    """

    statistic = "min"

    def reduction_result_type(self, dtype: np.dtype) -> np.dtype:
        return np.dtype(dtype)


class _FloatReduction(_KernelReduction):
    parameter_specs: ClassVar[tuple[Parameter, ...]] = (_FLOAT_TYPE,)

    def reduction_result_type(self, dtype: np.dtype) -> np.dtype:
        return float_type_for(dtype, self.type)


@query_operation
class Median(_FloatReduction):
    """``>> Median [type T]``: the median (the mean of the two middle values for an even count); of the
    :func:`float_type_for` the input type.

    Example:
        >>> Median().compute_vector(np.array([1, 10, 2, 3], np.int64))
        np.float64(2.5)
    """

    statistic = "median"


@query_operation
class Quantile(_FloatReduction):
    """``>> Quantile p P [type T]``: the ``P`` quantile (``0``: minimum, ``0.5``: median, ``1``: maximum; linear
    interpolation as Julia's ``Statistics.quantile``); of the :func:`float_type_for` the input type.

    Example:
        >>> Quantile(p=0.25).compute_vector(np.array([1.0, 2.0, 3.0, 4.0, 5.0]))
        np.float64(2.0)
        >>> str(Quantile(p=0.5))
        '>> Quantile p 0.5'
    """

    parameter_specs = (_FLOAT_TYPE, Parameter("p", ParameterKind.NUMBER, REQUIRED, (AT_LEAST_0, AT_MOST_1)))
    p: float
    statistic = "quantile"

    def _options(self) -> dict[str, Any]:
        return {"p": self.p}


@query_operation
class Mean(_FloatReduction):
    """``>> Mean [type T]``: the mean; of the :func:`float_type_for` the input type.

    Example:
        >>> Mean().compute_matrix(np.array([[1, 2], [3, 5]], np.uint32, order="F"), 1)
        array([1.5, 4. ], dtype=float32)
    """

    statistic = "mean"


class _EpsReduction(_FloatReduction):
    parameter_specs = (_FLOAT_TYPE, _EPS)
    eps: float

    def _options(self) -> dict[str, Any]:
        return {"eps": self.eps}


@query_operation
class GeoMean(_EpsReduction):
    """``>> GeoMean [eps e] [type T]``: the geometric mean of the values plus ``eps``, minus ``eps``; of the
    :func:`float_type_for` the input type.

    Example:
        >>> GeoMean().compute_vector(np.array([1.0, 4.0]))
        np.float64(2.0)
        >>> str(GeoMean(eps=1))
        '>> GeoMean eps 1.0'
    """

    statistic = "geomean"


@query_operation
class Var(_FloatReduction):
    """``>> Var [type T]``: the (uncorrected) variance; of the :func:`float_type_for` the input type.

    Example:
        >>> Var().compute_vector(np.array([1.0, 3.0]))
        np.float64(1.0)
    """

    statistic = "var"


@query_operation
class Std(_FloatReduction):
    """``>> Std [type T]``: the (uncorrected) standard deviation; of the :func:`float_type_for` the input type.

    Example:
        >>> Std().compute_vector(np.array([1.0, 3.0]))
        np.float64(1.0)
    """

    statistic = "std"


class _NormalizedReduction(_EpsReduction):
    """``VarN``/``StdN``: the variance (standard deviation) divided by the mean plus ``eps``, with Julia's order of
    conversions (vectors: ``T(var) / T(mean + eps)``; matrices: ``T.(var) ./ (T.(mean) .+ eps)``)."""

    statistic = "var"

    def _pair(self, reduce: Callable[[str], Any]) -> tuple[Any, Any]:
        spread = reduce(self.statistic)
        with np.errstate(invalid="ignore"):
            return spread, reduce("mean")

    def compute_vector(self, values: np.ndarray) -> Any:
        _require_numbers(self, values)
        spread, mean = self._pair(lambda statistic: kernels.reduce_vector(values, statistic))
        return self._divide_scalar(spread, mean, values.dtype)

    def compute_all(self, matrix: Any) -> Any:
        _require_numbers(self, matrix)
        spread, mean = self._pair(lambda statistic: kernels.reduce_all(matrix, statistic))
        return self._divide_scalar(spread, mean, _eltype(matrix))

    def compute_matrix(self, matrix: Any, axis: int) -> np.ndarray:
        _require_numbers(self, matrix)
        reduce = kernels.reduce_columns if axis == 0 else kernels.reduce_rows
        spread, mean = self._pair(lambda statistic: reduce(matrix, statistic))
        return self._divide_arrays(spread, mean, _eltype(matrix))

    def compute_grouped_vector(self, values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
        _require_numbers(self, values)
        spread, mean = self._pair(
            lambda statistic: kernels.reduce_grouped_vector(values, statistic, groups, n_groups))
        dtype = self.reduction_result_type(values.dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            return spread.astype(dtype) / (mean + self.eps).astype(dtype)

    def compute_grouped_matrix(self, matrix: Any, groups: np.ndarray, n_groups: int, axis: int) -> np.ndarray:
        _require_numbers(self, matrix)
        reduce = kernels.reduce_grouped_rows if axis == 0 else kernels.reduce_grouped_columns
        spread, mean = self._pair(lambda statistic: reduce(matrix, statistic, groups, n_groups))
        return np.asfortranarray(self._divide_arrays(spread, mean, _eltype(matrix)))

    def _divide_scalar(self, spread: Any, mean: Any, dtype: np.dtype) -> Any:
        result_type = self.reduction_result_type(dtype)
        with np.errstate(divide="ignore", invalid="ignore"):
            return result_type.type(spread) / result_type.type(float(mean) + self.eps)

    def _divide_arrays(self, spread: np.ndarray, mean: np.ndarray, dtype: np.dtype) -> np.ndarray:
        result_type = self.reduction_result_type(dtype)
        means = (mean.astype(result_type).astype(np.float64) + self.eps).astype(result_type)
        with np.errstate(divide="ignore", invalid="ignore"):
            return spread.astype(result_type) / means


@query_operation
class VarN(_NormalizedReduction):
    """``>> VarN [eps e] [type T]``: the (uncorrected) variance divided by the mean plus ``eps``; of the
    :func:`float_type_for` the input type.

    Example:
        >>> VarN().compute_vector(np.array([1.0, 3.0]))
        np.float64(0.5)
    """

    statistic = "var"


@query_operation
class StdN(_NormalizedReduction):
    """``>> StdN [eps e] [type T]``: the (uncorrected) standard deviation divided by the mean plus ``eps``; of the
    :func:`float_type_for` the input type.

    Example:
        >>> StdN(eps=1).compute_vector(np.array([1.0, 3.0]))
        np.float64(0.3333333333333333)
    """

    statistic = "std"


@query_operation
class Count(ReductionOperation):
    """``>> Count [type T]``: the number of elements (``UInt32`` by default); also for strings. Most useful grouped
    (``@ cell : type / type >> Count``).

    Example:
        >>> Count().compute_grouped_vector(np.array(["a", "b", "c"], dtype=object), np.array([0, 1, 0]), 2)
        array([2, 1], dtype=uint32)
    """

    parameter_specs = (_NUMBER_TYPE,)
    type: np.dtype | None
    parameters_kind = "reduction"
    supports_strings = True
    reads_values = False

    def reduction_result_type(self, dtype: np.dtype) -> np.dtype:
        return _UINT32 if self.type is None else self.type

    def compute_vector(self, values: np.ndarray) -> Any:
        return _scalar(len(values), self.reduction_result_type(_eltype(values)))

    def compute_matrix(self, matrix: Any, axis: int) -> np.ndarray:
        n_rows, n_columns = matrix.shape
        return _cast(np.full(n_columns if axis == 0 else n_rows, n_rows if axis == 0 else n_columns, dtype=np.int64),
                     self.reduction_result_type(_eltype(matrix)))

    def compute_all(self, matrix: Any) -> Any:
        return _scalar(int(matrix.shape[0]) * int(matrix.shape[1]), self.reduction_result_type(_eltype(matrix)))

    def compute_grouped_vector(self, values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
        groups = np.asarray(groups)
        return _cast(np.bincount(groups[groups >= 0], minlength=n_groups), self.reduction_result_type(_eltype(values)))

    def compute_grouped_matrix(self, matrix: Any, groups: np.ndarray, n_groups: int, axis: int) -> np.ndarray:
        groups = np.asarray(groups)
        sizes = _cast(np.bincount(groups[groups >= 0], minlength=n_groups), self.reduction_result_type(_eltype(matrix)))
        n_rows, n_columns = matrix.shape
        if axis == 0:
            return np.asfortranarray(np.repeat(sizes[:, np.newaxis], n_columns, axis=1))
        return np.asfortranarray(np.repeat(sizes[np.newaxis, :], n_rows, axis=0))


@query_operation
class Mode(ReductionOperation):
    """``>> Mode``: the most frequent value (also for strings); of ties, the one that reached the top count first, as
    Julia's ``StatsBase.mode``.

    Example:
        >>> Mode().compute_vector(np.array(["a", "b", "b", "a"], dtype=object))
        'b'
        >>> Mode().compute_matrix(SparseMatrixCSC((3, 1), np.array([1, 3]), np.array([1, 3]), np.array([5, 5])), 0)
        array([5])
    """

    supports_strings = True

    def reduction_result_type(self, dtype: np.dtype) -> np.dtype:
        return STRING_DTYPE if np.dtype(dtype).kind in "OUS" else np.dtype(dtype)

    def compute_vector(self, values: np.ndarray) -> Any:
        return kernels.reduce_vector(np.asarray(values), "mode")

    def compute_matrix(self, matrix: Any, axis: int) -> np.ndarray:
        reduce = kernels.reduce_columns if axis == 0 else kernels.reduce_rows
        return reduce(matrix, "mode").astype(self.reduction_result_type(_eltype(matrix)), copy=False)

    def compute_all(self, matrix: Any) -> Any:
        return kernels.reduce_all(matrix, "mode")
