"""The built-in query operations: Julia's values, result types, canonical texts and parse errors; scalars, vectors,
dense and (read-only, 1-based) sparse matrices; and the operation registry."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from pydaf.errors import DafQueryError, DafTypeError, DafValueError
from pydaf.kernels import reductions
from pydaf.queries import operations
from pydaf.queries.base import EltwiseOperation, ReductionOperation
from pydaf.queries.operations import (
    Abs,
    Clamp,
    Convert,
    Count,
    Fraction,
    GeoMean,
    Log,
    Max,
    Mean,
    Median,
    Min,
    Mode,
    Quantile,
    Round,
    Significant,
    Std,
    StdN,
    Sum,
    Var,
    VarN,
    float_type_for,
    guess_typed_value,
    int_type_for,
    parse_number_type_value,
    parse_number_value,
    sum_type_for,
    unsigned_type_for,
)
from pydaf.queries.registry import (
    ELTWISE_OPERATIONS,
    REDUCTION_OPERATIONS,
    query_operation,
    register_query_operation,
)
from pydaf.queries.tokens import tokenize
from pydaf.sparse import SparseMatrixCSC

_OPERATORS = re.compile(r">>|>\||>-|%")


def parse(text: str):
    """Parse ``% Name param value ...`` (or ``>> ...``) with the operation's ``from_tokens``, as the parser does."""
    tokens = tokenize(text, _OPERATORS)
    registry = ELTWISE_OPERATIONS if tokens[0].value == "%" else REDUCTION_OPERATIONS
    name = tokens[1]
    parameters = {tokens[index].value: tokens[index + 1] for index in range(2, len(tokens), 2)}
    return registry[name.value].from_tokens(name, parameters)


def parse_error(text: str) -> str:
    with pytest.raises(DafQueryError) as raised:
        parse(text)
    return str(raised.value)


def _read_only(array: np.ndarray) -> np.ndarray:
    array = np.array(array, copy=True, order="F" if array.ndim == 2 else "C")
    array.flags.writeable = False
    return array


def sparse(dense, indtype=np.uint32) -> SparseMatrixCSC:
    """A read-only 1-based CSC of a dense (row-major literal) matrix."""
    dense = np.asfortranarray(np.array(dense))
    rows, columns = np.nonzero(dense.T)
    colptr = np.concatenate([[1], np.cumsum(np.bincount(rows, minlength=dense.shape[1])) + 1]).astype(indtype)
    matrix = SparseMatrixCSC(dense.shape, _read_only(colptr), _read_only((columns + 1).astype(indtype)),
                             _read_only(dense.T[rows, columns]))
    assert np.array_equal(matrix.to_dense(), dense)
    return matrix


def dense(values, dtype=None) -> np.ndarray:
    return _read_only(np.asfortranarray(np.array(values, dtype=dtype)))


def as_dense(matrix) -> np.ndarray:
    return matrix.to_dense() if isinstance(matrix, SparseMatrixCSC) else np.asarray(matrix)


def eltype(value) -> np.dtype:
    return value.nzval.dtype if isinstance(value, SparseMatrixCSC) else np.asarray(value).dtype


# Result types.


def test_julia_result_type_tables():
    names = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"]
    float_types = ["float32"] * 4 + ["float64"] + ["float32"] * 3 + ["float64", "float32", "float64"]
    int_types = [*names[:9], "int32", "int64"]
    sum_types = ["uint32", "int32", "int32", "int32", "int64", "uint32", "uint32", "uint32", "uint64", "float32",
                 "float64"]
    unsigned_types = ["bool", "uint8", "uint16", "uint32", "uint64", "uint8", "uint16", "uint32", "uint64", "float32",
                      "float64"]
    for name, float_name, int_name, sum_name, unsigned_name in zip(names, float_types, int_types, sum_types,
                                                                    unsigned_types, strict=True):
        assert float_type_for(np.dtype(name)) == np.dtype(float_name)
        assert int_type_for(np.dtype(name)) == np.dtype(int_name)
        assert sum_type_for(np.dtype(name)) == np.dtype(sum_name)
        assert unsigned_type_for(np.dtype(name)) == np.dtype(unsigned_name)
        assert sum_type_for(np.dtype(name), np.dtype("int8")) == np.dtype("int8")
    with pytest.raises(DafTypeError, match="unsupported input type: String"):
        float_type_for(np.dtype(object))


# Element-wise operations (the cases of Julia's test/operations.jl, on every kind of input).


ELTWISE_CASES = [
    # (operation, input, expected values, expected type)
    (Abs(), [[0, -1, 2], [-3, 4, 5]], [[0, 1, 2], [3, 4, 5]], "uint64"),
    (Abs(type="Int8"), [[0, -1, 2], [-3, 4, 5]], [[0, 1, 2], [3, 4, 5]], "int8"),
    (Abs(), [-1.0, 2.0], [1.0, 2.0], "float64"),
    (Round(), [[0, -1.7, 2.3], [-3.3, 4.7, 5.2]], [[0, -2, 2], [-3, 5, 5]], "int64"),
    (Round(type="Int8"), [-1.7, 2.3], [-2, 2], "int8"),
    (Round(), np.array([0.5, 1.5, 2.5], np.float32), [0, 2, 2], "int32"),
    (Clamp(max=0), [-1.7, 2.3], [-1.7, 0.0], "float64"),
    (Clamp(min=0), [-1, 2], [0, 2], "int64"),
    (Clamp(max=0.5), [-1, 2], [-1.0, 0.5], "float64"),
    (Clamp(type="Float32", min=0), [-1, 2], [0, 2], "float32"),
    (Clamp(min=0, max=4), [[0, -1.7, 2.3], [-3.3, 4.7, 5.2]], [[0, 0, 2.3], [0, 4, 4]], "float64"),
    (Clamp(min=1, max=4), [[0, -1, 2], [-3, 4, 5]], [[1, 1, 2], [1, 4, 4]], "int64"),
    (Convert(type="Int8"), [-1, 2], [-1, 2], "int8"),
    (Convert(type="Float32"), [[0, -1.7, 2.3], [-3.3, 4.7, 5.2]],
     np.array([[0, -1.7, 2.3], [-3.3, 4.7, 5.2]], np.float32), "float32"),
    (Fraction(), [1, 3], [0.25, 0.75], "float64"),
    (Fraction(type="Float32"), [1, 3], [0.25, 0.75], "float32"),
    (Fraction(), [0, 0], [0.0, 0.0], "float64"),
    (Fraction(), [[0, 0, 2], [1, 0, 6]], [[0, 0, 0.25], [1, 0, 0.75]], "float64"),
    (Fraction(type="Float32"), [[0, 0, 2], [1, 0, 6]], [[0, 0, 0.25], [1, 0, 0.75]], "float32"),
    (Fraction(), np.array([[1, 0], [3, 0]], np.uint8), [[0.25, 0], [0.75, 0]], "float32"),
    (Log(base=2), [1.0, 2.0], [0.0, 1.0], "float64"),
    (Log(base=2, eps=1, type="Float32"), [1.0, 2.0], np.array([1.0, math.log2(3)], np.float32), "float32"),
    (Log(eps=1), [[0, 1, 2], [3, 4, 5]], np.log([[1, 2, 3], [4, 5, 6]]), "float64"),
    (Log(base=10, eps=1), np.array([[0, 9], [99, 0]], np.uint16), [[0, 1], [2, 0]], "float32"),
    (Log(base=3), [1.0, 9.0], [0.0, 2.0], "float64"),
    (Log(), [[0, 1], [1, 0]], [[-np.inf, 0], [0, -np.inf]], "float64"),
    (Significant(high=3), [1, 3], [0, 3], "int64"),
    (Significant(high=3, low=1), [1, 3], [1, 3], "int64"),
    (Significant(high=3, low=2), [[1.0, 2.0, 2.0], [-3.0, 1.0, 6.0]], [[0, 0, 2.0], [-3.0, 0, 6.0]], "float64"),
    (Significant(high=3, low=2), [[0.0, 2.0, 2.0], [-3.0, 0.0, 6.0]], [[0, 0, 2.0], [-3.0, 0, 6.0]], "float64"),
]


@pytest.mark.parametrize("operation,values,expected,dtype", ELTWISE_CASES,
                         ids=[f"{case[0]} {np.ndim(case[1])}d" for case in ELTWISE_CASES])
def test_eltwise_values_and_types(operation, values, expected, dtype):
    values = np.array(values)
    expected = np.array(expected)
    inputs = [dense(values)] if values.ndim == 1 else [dense(values), sparse(values)]
    for value in inputs:
        before = as_dense(value).copy()
        result = operation.compute_eltwise(value)
        assert eltype(result) == np.dtype(dtype), (value, result)
        np.testing.assert_allclose(as_dense(result).astype(np.float64), expected.astype(np.float64), rtol=1e-6)
        if values.ndim == 2 and not isinstance(result, SparseMatrixCSC):
            assert result.flags.f_contiguous
        assert np.array_equal(as_dense(value), before)  # The (read-only) input is untouched.


def test_eltwise_scalars():
    assert Abs().compute_eltwise(np.int64(-1)) == 1 and eltype(Abs().compute_eltwise(np.int64(-1))) == np.uint64
    assert eltype(Abs(type="Int8").compute_eltwise(-1)) == np.int8
    assert Round().compute_eltwise(np.float64(1.3)) == 1 and eltype(Round().compute_eltwise(1.3)) == np.int64
    assert Round().compute_eltwise(np.float64(2.5)) == 2  # Ties to even, as Julia.
    assert Clamp(min=0.5, max=1.5).compute_eltwise(1.3) == 1.3
    assert Clamp(max=0.5).compute_eltwise(1.3) == 0.5 and Clamp(min=1.5).compute_eltwise(1.3) == 1.5
    assert eltype(Convert(type="Int8").compute_eltwise(np.int64(1))) == np.int8
    assert Log().compute_eltwise(np.int64(1)) == 0.0 and eltype(Log(type="Float32").compute_eltwise(1)) == np.float32
    assert math.isclose(parse("% Log base e eps pi").compute_eltwise(np.int64(0)), math.log(math.pi))
    assert Log(base=2).compute_eltwise(np.uint8(8)) == np.float32(3.0)
    assert isinstance(Log().compute_eltwise(np.float64(2.0)), np.float64)
    with pytest.raises(DafValueError, match=r"^applying Fraction eltwise operation to a scalar$"):
        Fraction().compute_eltwise(np.int64(1))
    with pytest.raises(DafValueError, match=r"^applying Significant eltwise operation to a scalar$"):
        Significant(high=3.0).compute_eltwise(1)


def test_sparse_stays_sparse_when_zero_maps_to_zero():
    matrix = sparse([[0, -1.6, 2.0], [-3.0, 0, 0.4]], np.int64)
    for operation in (Abs(), Round(), Clamp(min=-1, max=1), Convert(type="Float32"), Fraction(), Log(eps=1)):
        result = operation.compute_eltwise(matrix)
        assert isinstance(result, SparseMatrixCSC), operation
        # Only the stored values are mapped: the result's index arrays are the input's (read-only) ones.
        assert result.colptr is matrix.colptr and result.rowval is matrix.rowval, operation
        assert not result.nzval.flags.writeable or not np.shares_memory(result.nzval, matrix.nzval), operation
    rounded = Round().compute_eltwise(matrix)
    # As Julia's ``similar`` + broadcast: Round(0.4) stays stored, as a zero.
    assert rounded.nnz == 4 and rounded.to_dense().tolist() == [[0, -2, 2], [-3, 0, 0]]
    for operation in (Log(), Clamp(min=1), Log(eps=2)):
        result = operation.compute_eltwise(matrix)
        assert isinstance(result, np.ndarray) and result.flags.f_contiguous, operation
    np.testing.assert_allclose(Clamp(min=1).compute_eltwise(matrix), [[1, 1, 2], [1, 1, 1]])
    significant = Significant(high=1.5, low=1).compute_eltwise(dense([[2.0, 0.5], [1.0, 1.0]]))
    assert isinstance(significant, SparseMatrixCSC) and significant.to_dense().tolist() == [[2.0, 0.0], [1.0, 0.0]]
    assert isinstance(Significant(high=1).compute_eltwise(dense([[2.0, 1.5]])), np.ndarray)  # No zero: stays dense.


def test_inexact_conversions_raise_like_julia():
    with pytest.raises(DafValueError, match=r"^InexactError: Int64\(1.5\)$"):
        Convert(type="Int64").compute_eltwise(np.array([1.0, 1.5]))
    with pytest.raises(DafValueError, match=r"^InexactError: UInt8\(300\)$"):
        Convert(type="UInt8").compute_eltwise(np.array([1, 300]))
    with pytest.raises(DafValueError, match=r"^InexactError: Bool\(2\)$"):
        Convert(type="Bool").compute_eltwise(np.array([0, 1, 2]))
    with pytest.raises(DafValueError, match=r"^InexactError: UInt8\(-128\)$"):
        Abs().compute_eltwise(np.array([-128], np.int8))  # abs(typemin(Int8)) overflows, as in Julia.
    with pytest.raises(DafValueError, match=r"^InexactError: Int8\(300.0\)$"):
        Round(type="Int8").compute_eltwise(300.2)
    with pytest.raises(DafValueError, match=r"InexactError: Int64\(NaN\)"):
        Round().compute_eltwise(np.array([np.nan]))
    with pytest.raises(DafValueError, match=r"^InexactError: Int8\(200\)$"):
        Sum(type="Int8").compute_vector(np.array([100, 100]))
    assert Convert(type="Bool").compute_eltwise(np.array([0.0, 1.0])).tolist() == [False, True]
    assert Clamp(min=-200, max=200).compute_eltwise(np.array([-128, 127], np.int8)).tolist() == [-128, 127]
    big = np.array([2**62 + 1, -(2**62) - 1])
    assert Clamp(min=-(2**62), max=2**62).compute_eltwise(big).tolist() == [2**62, -(2**62)]


def test_strings_are_refused():
    with pytest.raises(DafTypeError, match="unsupported input type: String"):
        Abs().compute_eltwise(np.array(["a"], dtype=object))
    with pytest.raises(DafTypeError, match="unsupported input type: String"):
        Sum().compute_vector(np.array(["a"], dtype=object))


# Reductions.


MATRIX = [[1.0, 2.0, 2.0], [-3.0, 1.0, 6.0]]

REDUCTION_CASES = [
    # (operation, matrix, expected per column, expected type) — Julia's test/operations.jl, "/ cell / gene : value".
    (Count(), MATRIX, [2, 2, 2], "uint32"),
    (Sum(), MATRIX, [-2.0, 3.0, 8.0], "float64"),
    (Max(), MATRIX, [1.0, 2.0, 6.0], "float64"),
    (Min(), MATRIX, [-3.0, 1.0, 2.0], "float64"),
    (Mean(type="Float32"), MATRIX, [-1.0, 1.5, 4.0], "float32"),
    (GeoMean(type="Float32"), [[1.0, 2.0, 2.0], [4.0, 8.0, 2.0]], [2.0, 4.0, 2.0], "float32"),
    (GeoMean(type="Float32", eps=1), [[0.0, 1.0, 1.0], [3.0, 7.0, 1.0]], [1.0, 3.0, 1.0], "float32"),
    (Var(type="Float32"), MATRIX, [4.0, 0.25, 4.0], "float32"),
    (VarN(type="Float32"), [[1.0, 3.0, 2.0], [-3.0, 9.0, 6.0]], [-4.0, 1.5, 1.0], "float32"),
    (Std(type="Float32"), [[-1.0, 2.0, 4.0], [-3.0, 6.0, 12.0]], [1.0, 2.0, 4.0], "float32"),
    (StdN(type="Float32"), [[-1.0, 2.0, 4.0], [-3.0, 6.0, 12.0]], [-0.5, 0.5, 0.5], "float32"),
    (Median(), [[1, 5, 2], [3, 1, 6], [8, 2, 7]], [3.0, 2.0, 6.0], "float64"),
    (Quantile(p=0.5), [[1.0, 1.0], [2.0, -3.0], [2.0, 6.0]], [2.0, 1.0], "float64"),
    (Quantile(p=1.0, type="Float32"), [[1.0, 1.0], [2.0, -3.0], [2.0, 6.0]], [2.0, 6.0], "float32"),
    (Mode(), [[1.0, 1.0], [2.0, 1.0], [2.0, 6.0]], [2.0, 1.0], "float64"),
    (Sum(), np.array([[1, 2], [3, 4]], np.uint8), [4, 6], "uint32"),
    (Sum(), np.array([[True, False], [True, True]]), [2, 1], "uint32"),
    (Max(), np.array([[True, False], [False, False]]), [True, False], "bool"),
    (Mean(), np.array([[1, 2], [2, 4]], np.uint32), [1.5, 3.0], "float32"),
    (Mean(), np.array([[1, 2], [2, 4]], np.int64), [1.5, 3.0], "float64"),
]


def _reference_columns(operation, values: np.ndarray) -> np.ndarray:
    return np.array([operation.compute_vector(values[:, column]) for column in range(values.shape[1])])


@pytest.mark.parametrize("operation,values,expected,dtype", REDUCTION_CASES,
                         ids=[f"{case[0]} {np.asarray(case[1]).dtype}" for case in REDUCTION_CASES])
def test_reduction_values_and_types(operation, values, expected, dtype):
    values = np.array(values)
    dtype = np.dtype(dtype)
    assert operation.reduction_result_type(values.dtype) == dtype
    for matrix in (dense(values), sparse(values), _read_only(np.ascontiguousarray(values))):
        per_column = operation.compute_matrix(matrix, 0)
        assert per_column.dtype == dtype
        np.testing.assert_allclose(per_column.astype(np.float64), np.array(expected, dtype=np.float64), rtol=1e-6)
        # The same per row (of the transpose), per vector, for the whole matrix, and grouped.
        transposed = dense(values.T) if isinstance(matrix, np.ndarray) else sparse(values.T)
        per_row = operation.compute_matrix(transposed, 1)
        assert per_row.dtype == dtype and np.array_equal(per_row, per_column)
        per_vector = _reference_columns(operation, values)
        assert np.array_equal(per_vector, per_column) and per_vector.dtype == dtype
        whole = operation.compute_all(matrix)
        assert np.asarray(whole).dtype == dtype
        assert whole == operation.compute_vector(values.ravel(order="F"))
        groups = np.array([0, 1, 0, -1, 1][:values.shape[0]])
        grouped = operation.compute_grouped_matrix(matrix, groups, 3, 0)
        assert grouped.shape == (3, values.shape[1]) and grouped.dtype == dtype and grouped.flags.f_contiguous
        for group in range(2):
            members = values[groups == group]
            np.testing.assert_allclose(grouped[group].astype(np.float64),
                                       _reference_columns(operation, members).astype(np.float64), rtol=1e-6)
        grouped = operation.compute_grouped_matrix(transposed, groups, 3, 1)
        assert grouped.shape == (values.shape[1], 3) and grouped.dtype == dtype
        for group in range(2):
            np.testing.assert_allclose(grouped[:, group].astype(np.float64),
                                       _reference_columns(operation, values[groups == group]).astype(np.float64),
                                       rtol=1e-6)
        column = values[:, 0]
        grouped_vector = operation.compute_grouped_vector(column, groups, 3)
        assert grouped_vector.dtype == dtype
        for group in range(2):
            assert grouped_vector[group] == operation.compute_vector(column[groups == group])


def test_reductions_of_vectors_follow_julia():
    assert Count().compute_vector(np.array([1, 3])) == 2 and isinstance(Count().compute_vector(np.array([1])),
                                                                          np.uint32)
    assert Count(type="Int8").compute_vector(np.array(["Foo", "Bar"], dtype=object)) == np.int8(2)
    assert Sum().compute_vector(np.array([1, 3])) == 4 and isinstance(Sum().compute_vector(np.array([1])), np.int64)
    assert Sum(type="Int8").compute_vector(np.array([1, 3])) == np.int8(4)
    assert isinstance(Sum(type="Int8").compute_vector(np.array([1, 3])), np.int8)
    assert Max().compute_vector(np.array([1, 3])) == 3 and Min().compute_vector(np.array([1, 3])) == 1
    assert Median().compute_vector(np.array([1, 3, 7])) == 3.0
    assert [Quantile(p=p).compute_vector(np.array([1, 3, 7])) for p in (0.0, 0.25, 0.5)] == [1.0, 2.0, 3.0]
    assert Mean().compute_vector(np.array([1, 3])) == 2.0
    assert GeoMean().compute_vector(np.array([1, 4])) == 2.0
    assert GeoMean(eps=1).compute_vector(np.array([0, 3])) == 1.0
    assert Var().compute_vector(np.array([1, 3])) == 1.0 and VarN().compute_vector(np.array([1, 3])) == 0.5
    assert Std().compute_vector(np.array([1, 3])) == 1.0 and StdN().compute_vector(np.array([1, 3])) == 0.5
    assert Mode().compute_vector(np.array([1, 1, 3])) == 1
    assert Mode().compute_vector(np.array(["Foo", "Foo", "Bar"], dtype=object)) == "Foo"
    assert Mode().reduction_result_type(np.dtype(object)) == np.dtype(object)
    assert isinstance(Mean().compute_vector(np.array([1, 3], np.int16)), np.float32)


def test_mode_breaks_ties_as_julia():
    # StatsBase.mode: the value that first reaches the top count wins.
    assert Mode().compute_vector(np.array([1, 2, 2, 1])) == 2
    assert Mode().compute_vector(np.array([3, 1, 2])) == 3
    assert Mode().compute_vector(np.array(["b", "a", "a", "b", "b", "a"], dtype=object)) == "b"
    generator = np.random.default_rng(3)
    for _ in range(50):
        values = generator.integers(-2, 3, (7, 3)) * (generator.random((7, 3)) < 0.6)
        expected = [Mode().compute_vector(values[:, column]) for column in range(3)]
        assert Mode().compute_matrix(sparse(values), 0).tolist() == expected
        assert Mode().compute_matrix(sparse(values.T), 1).tolist() == expected
        assert Mode().compute_all(sparse(values)) == Mode().compute_vector(values.ravel(order="F"))


def test_count_and_mode_of_strings():
    names = np.array([["a", "b"], ["a", "c"], ["b", "c"]], dtype=object)
    assert Count().compute_matrix(names, 0).tolist() == [3, 3]
    assert Count().compute_matrix(names, 1).dtype == np.uint32
    assert Count().compute_all(names) == 6
    assert Count().compute_grouped_matrix(names, np.array([0, 1, 0]), 2, 0).tolist() == [[2, 2], [1, 1]]
    assert Mode().compute_matrix(names, 0).tolist() == ["a", "c"]
    assert Mode().compute_matrix(names, 1).tolist() == ["a", "a", "b"]
    assert Mode().compute_all(names) == "a"


def test_reductions_on_the_numba_path(monkeypatch):
    monkeypatch.setattr(reductions, "REDUCE_NUMBA_MIN_ENTRIES", 0)
    values = np.array([[0, 2, 1, 0], [5, 0, 0, 0], [1, 1, 0, 7]], dtype=np.uint16)
    matrix = sparse(values)
    assert Sum().compute_matrix(matrix, 1).tolist() == [3, 5, 9]
    assert Sum().compute_matrix(matrix, 0).dtype == np.uint32
    np.testing.assert_allclose(Mean().compute_grouped_matrix(matrix, np.array([0, 1, 0]), 2, 0),
                               [[0.5, 1.5, 0.5, 3.5], [5, 0, 0, 0]])
    np.testing.assert_allclose(VarN(eps=1).compute_matrix(matrix, 0), values.var(axis=0) / (values.mean(axis=0) + 1),
                               rtol=1e-6)
    assert Max().compute_all(matrix) == 7 and Median().compute_matrix(matrix, 0).tolist() == [1.0, 1.0, 0.0, 0.0]


def test_normalized_reductions_convert_as_julia():
    values = np.array([1.0, 2.0, 4.0], dtype=np.float32)
    variance, mean = np.var(values.astype(np.float64)), np.mean(values.astype(np.float64))
    # Vectors: T(var) / T(mean + eps).
    assert VarN(eps=0.1).compute_vector(values) == np.float32(variance) / np.float32(mean + 0.1)
    # Matrices: T.(var) ./ (T.(mean) .+ eps).
    expected = np.float32(variance) / np.float32(np.float64(np.float32(mean)) + 0.1)
    assert VarN(eps=0.1).compute_matrix(dense(values[:, np.newaxis]), 0)[0] == expected
    assert StdN(eps=0.1).compute_grouped_vector(values, np.array([0, 0, 0]), 1).dtype == np.float32


# Canonical texts.


def test_canonical_strings():
    texts = {
        Abs(): "% Abs",
        Abs(type=np.int8): "% Abs type Int8",
        Round(type=int): "% Round type Int64",
        Clamp(): "% Clamp min -Inf max Inf",
        Clamp(min=40, max=60, type="Int64"): "% Clamp type Int64 min 40.0 max 60.0",
        Convert(type="float32"): "% Convert type Float32",
        Fraction(): "% Fraction",
        Log(): "% Log base e eps 0.0",
        Log(base=2, eps=1e-5): "% Log base 2.0 eps 1.0e-5",
        Log(base=math.pi, eps=1234567.0): "% Log base pi eps 1.234567e6",
        Significant(high=3, low=2): "% Significant high 3.0 low 2.0",
        Count(): ">> Count",
        Count(type="UInt8"): ">> Count type UInt8",
        Mode(): ">> Mode",
        Sum(type="Bool"): ">> Sum type Bool",
        Max(): ">> Max",
        Min(): ">> Min",
        Median(type="Float32"): ">> Median type Float32",
        Quantile(p=0.1): ">> Quantile p 0.1",
        Mean(): ">> Mean",
        GeoMean(): ">> GeoMean eps 0.0",
        Var(): ">> Var",
        VarN(eps=1): ">> VarN eps 1.0",
        Std(): ">> Std",
        StdN(type=np.float64, eps=0.0001): ">> StdN type Float64 eps 0.0001",
    }
    for operation, text in texts.items():
        assert str(operation) == text
        assert str(parse(text)) == text and parse(text) == operation and hash(parse(text)) == hash(operation)
    assert Sum().canonical(">|") == ">| Sum"
    assert Log(base=2) == Log(base=2.0) and Log(base=2) != Log(base=3) and Abs() != Round()
    assert repr(Log(base=2)) == "Log('% Log base 2.0 eps 0.0')"


# Parsing parameters.


def test_parse_parameters():
    assert parse("% Log base 2 eps 1 type Float32") == Log(base=2, eps=1, type="Float32")
    assert parse("% Abs type auto") == Abs()
    assert parse("% Abs type int") == Abs(type="Int64")
    assert parse("% Clamp min -1.5e2 max +0x10") == Clamp(min=-150, max=16)
    assert parse("% Significant high 3") == Significant(high=3, low=3)
    assert parse(">> Quantile p 1") == Quantile(p=1)
    assert parse(">> Sum type uint16") == Sum(type="UInt16")
    assert parse("% Clamp max Inf") == Clamp() and parse("% Clamp min -inf") == Clamp()


@pytest.mark.parametrize("text,message", [
    ("% Abs type String", 'invalid value: "String"\nvalue must be: a number type\nfor the parameter: type\n'
                          "for the operation: Abs\nin: % Abs type String\nat:            ▲▲▲▲▲▲"),
    ("% Clamp max q", 'invalid value: "q"\nvalue must be: a valid Float64\nfor the parameter: max\n'
                      "for the operation: Clamp\nin: % Clamp max q\nat:             ▲"),
    ("% Clamp min 1 max 0", 'invalid value: "0"\nvalue must be: larger than min (1.0)\nfor the parameter: max\n'
                            "for the operation: Clamp\nin: % Clamp min 1 max 0\nat:                   ▲"),
    ("% Convert", "missing required parameter: type\nfor the eltwise operation: Convert\nin: % Convert\n"
                  "at:   ▲▲▲▲▲▲▲"),
    ("% Fraction type Int32", 'invalid value: "Int32"\nvalue must be: a float type\nfor the parameter: type\n'
                              "for the operation: Fraction\nin: % Fraction type Int32\nat:                 ▲▲▲▲▲"),
    ("% Log base 0", 'invalid value: "0"\nvalue must be: positive\nfor the parameter: base\n'
                     "for the operation: Log\nin: % Log base 0\nat:            ▲"),
    ("% Log eps -1", 'invalid value: "-1"\nvalue must be: not negative\nfor the parameter: eps\n'
                     "for the operation: Log\nin: % Log eps -1\nat:           ▲▲"),
    ("% Significant high 0", 'invalid value: "0"\nvalue must be: positive\nfor the parameter: high\n'
                             "for the operation: Significant\nin: % Significant high 0\nat:                    ▲"),
    ("% Significant high 1 low -1", 'invalid value: "-1"\nvalue must be: not negative\nfor the parameter: low\n'
                                    "for the operation: Significant\nin: % Significant high 1 low -1\n"
                                    "at:                          ▲▲"),
    ("% Significant high 1 low 2", 'invalid value: "2"\nvalue must be: at most high (1.0)\n'
                                   "for the parameter: low\nfor the operation: Significant\n"
                                   "in: % Significant high 1 low 2\nat:                          ▲"),
    ("% Significant low 1", "missing required parameter: high\nfor the eltwise operation: Significant\n"
                            "in: % Significant low 1\nat:   ▲▲▲▲▲▲▲▲▲▲▲"),
    (">> Quantile p -0.5", 'invalid value: "-0.5"\nvalue must be: at least 0\nfor the parameter: p\n'
                           "for the operation: Quantile\nin: >> Quantile p -0.5\nat:               ▲▲▲▲"),
    (">> Quantile p 1.5", 'invalid value: "1.5"\nvalue must be: at most 1\nfor the parameter: p\n'
                          "for the operation: Quantile\nin: >> Quantile p 1.5\nat:               ▲▲▲"),
    (">> Quantile", "missing required parameter: p\nfor the eltwise operation: Quantile\nin: >> Quantile\n"
                    "at:    ▲▲▲▲▲▲▲▲"),
    (">> GeoMean eps -1", 'invalid value: "-1"\nvalue must be: not negative\nfor the parameter: eps\n'
                          "for the operation: GeoMean\nin: >> GeoMean eps -1\nat:                ▲▲"),
    (">> VarN eps -1", 'invalid value: "-1"\nvalue must be: not negative\nfor the parameter: eps\n'
                       "for the operation: VarN\nin: >> VarN eps -1\nat:             ▲▲"),
    (">> StdN eps -1", 'invalid value: "-1"\nvalue must be: not negative\nfor the parameter: eps\n'
                       "for the operation: StdN\nin: >> StdN eps -1\nat:             ▲▲"),
    (">> Sum type Float16", 'invalid value: "Float16"\nvalue must be: a number type\nfor the parameter: type\n'
                            "for the operation: Sum\nin: >> Sum type Float16\nat:             ▲▲▲▲▲▲▲"),
    (">> Mean type Int8", 'invalid value: "Int8"\nvalue must be: a float type\nfor the parameter: type\n'
                          "for the operation: Mean\nin: >> Mean type Int8\nat:              ▲▲▲▲"),
    ("% Log base 1_0", 'invalid value: "1_0"\nvalue must be: a valid Float64\nfor the parameter: base\n'
                       "for the operation: Log\nin: % Log base 1_0\nat:            ▲▲▲"),
])
def test_parse_errors_are_julia_messages(text, message):
    assert parse_error(text) == message


def test_invalid_builder_parameters():
    with pytest.raises(DafValueError, match=r"value must be: larger than min \(5.0\)"):
        Clamp(min=5, max=1)
    with pytest.raises(DafValueError, match="value must be: positive\nfor the parameter: base"):
        Log(base=0)
    with pytest.raises(DafValueError, match="value must be: a float type"):
        Mean(type="Int32")
    with pytest.raises(DafValueError, match="value must be: a number type"):
        Sum(type="String")
    with pytest.raises(DafValueError, match="value must be: a number type"):
        Convert(type=None)
    with pytest.raises(DafValueError, match="value must be: at most 1"):
        Quantile(p=2)
    with pytest.raises(DafValueError, match=r"value must be: at most high \(1.0\)"):
        Significant(high=1, low=2)
    with pytest.raises(DafValueError, match="value must be: a number"):
        GeoMean(eps="1")


def test_value_parsing_helpers():
    tokens = tokenize("|| 1.0 Int32", re.compile(r"\|\|"))
    operator, value, type_token = tokens
    assert parse_number_type_value(operator, "type", type_token) == np.dtype(np.int32)
    with pytest.raises(DafQueryError) as raised:
        parse_number_value(operator, "value", value, np.int32)
    assert str(raised.value) == ('invalid value: "1.0"\nvalue must be: a valid Int32\nfor the parameter: value\n'
                                 "for the operation: ||\nin: || 1.0 Int32\nat:    ▲▲▲")
    assert parse_number_value(operator, "value", value, np.float32) == np.float32(1.0)
    assert isinstance(parse_number_value(operator, "value", value, np.float32), np.float32)
    for text, dtype, expected in [("true", np.bool_, True), ("0", np.bool_, False), ("255", np.uint8, 255),
                                  ("-0x10", np.int64, -16), ("0b101", np.uint8, 5), ("010", np.int16, 10),
                                  ("+3", np.int8, 3), (".5", np.float64, 0.5), ("0x1p3", np.float64, 8.0),
                                  ("1E3", np.float32, 1000.0), ("pi", np.float64, math.pi)]:
        token = tokenize(text, re.compile(r"\|\|"))[0]
        parsed = parse_number_value(operator, "value", token, dtype)
        assert parsed == expected and parsed.dtype == np.dtype(dtype), text
    for text, dtype in [("256", np.uint8), ("-1", np.uint8), ("yes", np.bool_), ("1.5", np.int64), ("e", np.int64),
                        ("1e", np.float64), ("", np.float64)]:
        token = tokenize(text or "''", re.compile(r"\|\|"))[0]
        with pytest.raises(DafQueryError, match="value must be: a valid"):
            parse_number_value(operator, "value", token, dtype)


def test_guess_typed_value():
    cases = [("true", np.True_), ("false", np.False_), ("12", np.int64(12)), ("-3", np.int64(-3)),
             ("1.5", np.float64(1.5)), ("1e-3", np.float64(0.001)), ("e", np.float64(math.e)),
             ("pi", np.float64(math.pi)), ("Inf", np.float64(np.inf)), ("0x1F", np.int64(31))]
    for text, expected in cases:
        guessed = guess_typed_value(text)
        assert guessed == expected and type(guessed) is type(expected), text
    for text in ("foo", "1.0.1", "True", "", "1_000"):
        assert guess_typed_value(text) == text and isinstance(guess_typed_value(text), str)
    assert np.isnan(guess_typed_value("NaN"))


# The registry.


def test_custom_operations_need_only_the_basics():
    class Negated(EltwiseOperation):
        def compute_eltwise(self, input):
            return -input

    class Spread(ReductionOperation):
        parameters = ("scale",)

        def __init__(self, *, scale: float = 1.0) -> None:
            self.scale = float(scale)

        @classmethod
        def from_tokens(cls, operation_name, parameters):
            scale = operations.parse_parameter_value(
                lambda token: operations.parse_number_value(operation_name, "scale", token, np.float64),
                operation_name, "reduction", parameters, "scale", 1.0)
            return cls(scale=scale)

        def reduction_result_type(self, dtype):
            return np.dtype(np.float64)

        def compute_vector(self, values):
            return np.float64((values.max() - values.min()) * self.scale)

    register_query_operation(Negated)
    register_query_operation(Spread)
    register_query_operation(Spread)  # Idempotent.
    try:
        assert parse("% Negated").compute_eltwise(np.int64(3)) == -3
        operation = parse(">> Spread scale 2")
        assert str(operation) == ">> Spread scale 2.0" and operation == Spread(scale=2)
        values = np.array([[1, 5], [4, 2], [3, 9]])
        for matrix in (dense(values), sparse(values)):
            assert operation.compute_matrix(matrix, 0).tolist() == [6.0, 14.0]
            assert operation.compute_matrix(matrix, 1).tolist() == [8.0, 4.0, 12.0]
            assert operation.compute_all(matrix) == 16.0
            assert operation.compute_grouped_matrix(matrix, np.array([0, 0, 1]), 3, 0).tolist() == \
                [[6.0, 6.0], [0.0, 0.0], [0.0, 0.0]]
            assert operation.compute_grouped_matrix(matrix, np.array([1, -1]), 2, 1).tolist() == \
                [[0.0, 0.0], [0.0, 0.0], [0.0, 0.0]]
        assert operation.compute_grouped_vector(np.array([1, 5, 4]), np.array([0, 1, 0]), 2).tolist() == [6.0, 0.0]
    finally:
        del ELTWISE_OPERATIONS["Negated"], REDUCTION_OPERATIONS["Spread"]


def test_conflicting_registrations_are_refused():
    class Sum(ReductionOperation):  # Deliberately the name of a built-in.
        pass

    with pytest.raises(DafValueError, match=r"conflicting registrations for the reduction operation: Sum\n"
                                            r"first in: .*operations\.py:[0-9]+\nsecond in: .*test_operations\.py"):
        register_query_operation(Sum)
    with pytest.raises(DafValueError, match="not an EltwiseOperation or ReductionOperation"):
        register_query_operation(int)  # type: ignore[arg-type]
    assert query_operation(Abs) is Abs


def test_a_definition_executed_again_registers_again(tmp_path):
    """A module executed twice (a reload, a file a dask worker preloads) makes two classes of one definition: the
    second registration replaces the first; another definition of the name is still refused."""
    import importlib.util
    import sys

    path = tmp_path / "twice.py"
    path.write_text("from pydaf.queries.base import ReductionOperation\n"
                    "from pydaf.queries.registry import query_operation\n"
                    "@query_operation\n"
                    "class Twice(ReductionOperation):\n"
                    "    pass\n")
    classes = []
    try:
        for name in ("twice_a", "twice_b"):
            spec = importlib.util.spec_from_file_location(name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module  # (as an import does)
            spec.loader.exec_module(module)
            classes.append(module.Twice)
            assert REDUCTION_OPERATIONS["Twice"] is module.Twice
        assert classes[0] is not classes[1]

        class Twice(ReductionOperation):  # (another definition of the name)
            pass

        with pytest.raises(DafValueError, match="conflicting registrations for the reduction operation: Twice"):
            register_query_operation(Twice)
    finally:
        REDUCTION_OPERATIONS.pop("Twice", None)
        sys.modules.pop("twice_a", None)
        sys.modules.pop("twice_b", None)


def test_every_builtin_is_registered():
    assert sorted(ELTWISE_OPERATIONS) >= sorted(["Abs", "Clamp", "Convert", "Fraction", "Log", "Round",
                                                 "Significant"])
    for name in ("Count", "GeoMean", "Max", "Mean", "Median", "Min", "Mode", "Quantile", "Std", "StdN", "Sum",
                 "Var", "VarN"):
        assert REDUCTION_OPERATIONS[name].__name__ == name
    assert Count.supports_strings and Mode.supports_strings and not Sum.supports_strings
    assert not Abs.supports_strings


def test_results_never_alias_writable_inputs():
    values = np.array([1, 2], np.uint8)
    for operation in (Abs(), Round(), Convert(type="UInt8"), Clamp(min=0, max=9)):
        result = operation.compute_eltwise(values)
        assert not np.shares_memory(result, values), operation
    writable = SparseMatrixCSC((2, 1), np.array([1, 3]), np.array([1, 2]), np.array([1, 2], np.uint8))
    result = Abs().compute_eltwise(writable)
    assert not any(np.shares_memory(a, b) for a, b in zip((result.colptr, result.rowval, result.nzval),
                                                          (writable.colptr, writable.rowval, writable.nzval),
                                                          strict=True))
    mapped_like = sparse([[1, 0], [2, 3]])
    shared = Abs().compute_eltwise(mapped_like)
    assert shared.rowval is mapped_like.rowval and not np.shares_memory(shared.nzval, mapped_like.nzval)


@pytest.fixture
def large_path(monkeypatch):
    """The large-input paths for every input: numba kernels, element-wise maps in tiny chunks on all threads."""
    from pydaf.kernels import eltwise, threads

    monkeypatch.setattr(reductions, "REDUCE_NUMBA_MIN_ENTRIES", 0)
    monkeypatch.setattr(threads, "PARALLEL_MIN_ENTRIES", 0)
    monkeypatch.setattr(eltwise, "MAP_CHUNK", 3)


def test_eltwise_on_the_large_path_match_the_small_one(large_path, monkeypatch):
    generator = np.random.default_rng(4)
    values = generator.integers(-4, 5, (23, 7)) * (generator.random((23, 7)) < 0.5)
    values[:, 3] = 0  # A column of zeros (Fraction keeps it; Significant drops it).
    values[0, 5] = 9
    operations_to_check = (Abs(), Round(), Clamp(min=-1, max=2), Clamp(min=0.5, max=3.5), Convert(type="Float32"),
                           Fraction(), Log(eps=1), Log(base=2, eps=5), Significant(high=3, low=2),
                           Significant(high=1))
    for dtype in (np.int64, np.float32, np.uint16, np.bool_):
        typed = np.abs(values).astype(dtype) if np.dtype(dtype).kind in "ub" else values.astype(dtype)
        for matrix in (dense(typed), sparse(typed)):
            for operation in operations_to_check:
                with monkeypatch.context() as small:
                    small.setattr(reductions, "REDUCE_NUMBA_MIN_ENTRIES", 1 << 40)
                    try:
                        expected = operation.compute_eltwise(matrix)
                    except DafValueError as error:  # E.g. Bool(3.0) for a threshold: the same error either way.
                        with pytest.raises(DafValueError, match=re.escape(str(error))):
                            operation.compute_eltwise(matrix)
                        continue
                large = operation.compute_eltwise(matrix)
                assert eltype(large) == eltype(expected), (operation, dtype)
                assert type(large) is type(expected), (operation, dtype)
                np.testing.assert_allclose(as_dense(large).astype(np.float64), as_dense(expected).astype(np.float64),
                                           rtol=1e-6, err_msg=f"{operation} {dtype}")


def test_eltwise_errors_report_the_first_failing_value(large_path):
    # Chunks run concurrently; the error is still Julia's: the first value (in order) that does not convert.
    values = np.concatenate([np.arange(40.0), [1.5], np.arange(40.0), [2.5]])
    with pytest.raises(DafValueError, match=r"^InexactError: Int64\(1.5\)$"):
        Convert(type="Int64").compute_eltwise(values)
    with pytest.raises(DafValueError, match=r"^InexactError: UInt8\(300\)$"):
        Convert(type="UInt8").compute_eltwise(sparse(np.array([[0, 1, 300], [2, 0, 400]])))


def test_identity_operations_are_zero_copy_on_read_only_inputs(large_path):
    counts = dense(np.array([[0, 3], [2, 0]], np.uint16))
    assert Abs().compute_eltwise(counts) is counts
    assert Round().compute_eltwise(counts) is counts
    assert Convert(type="UInt16").compute_eltwise(counts) is counts
    matrix = sparse(np.array([[0, 3], [2, 0]], np.uint16))
    same = Abs().compute_eltwise(matrix)
    assert same.colptr is matrix.colptr and same.rowval is matrix.rowval and same.nzval is matrix.nzval
    assert Significant(high=1).compute_eltwise(matrix) is matrix  # Nothing to drop.
    writable = np.array([1, 2], np.uint16)
    assert not np.shares_memory(Abs().compute_eltwise(writable), writable)


def test_significant_drops_zeros_and_insignificant_columns(large_path):
    values = np.array([[4.0, 1.0, 0.5], [-1.5, 0.0, 0.2], [0.0, 2.0, -0.1]])
    result = Significant(high=3, low=1).compute_eltwise(dense(values))
    assert isinstance(result, SparseMatrixCSC) and result.colptr.dtype == np.int64
    assert result.to_dense().tolist() == [[4.0, 0.0, 0.0], [-1.5, 0.0, 0.0], [0.0, 0.0, 0.0]]
    assert result.nnz == 2
    stored = sparse(values)
    assert Significant(high=3, low=1).compute_eltwise(stored).to_dense().tolist() == result.to_dense().tolist()
    # Julia compares in the element type: for unsigned types -high wraps around, so every value is "high".
    unsigned = sparse(np.array([[1, 0], [2, 5]], np.uint16))
    assert Significant(high=3).compute_eltwise(unsigned).to_dense().tolist() == [[1, 0], [2, 5]]


def test_fraction_of_inexact_conversions_converts_first(large_path):
    big = np.array([[2**24 + 1, 1], [1, 0]], np.int32)  # 2**24 + 1 is not a Float32.
    result = Fraction().compute_eltwise(dense(big))
    converted = big.astype(np.float32)
    assert result.dtype == np.float32
    np.testing.assert_array_equal(result, converted / np.where(converted.sum(axis=0) == 0, 1,
                                                               converted.sum(axis=0)).astype(np.float32))


def test_square_matrix_reduced_per_row_is_not_its_transpose():
    import pydaf

    daf = pydaf.MemoryDaf().add_axis("cell", ["a", "b"])
    daf.set_matrix("cell", "cell", "m", np.array([[1, 2], [3, 4]], order="F"))
    assert daf.get_np_query("@ cell @ cell :: m >| Sum").tolist() == [3, 7]
    assert daf.get_np_query("@ cell @ cell :: m >- Sum").tolist() == [4, 6]


def test_numpy_results_never_read_the_names(tmp_path):
    import pydaf
    from pydaf.core.cache import AxisCacheKey
    from pydaf.queries.results import query_result

    path = str(tmp_path / "names.h5df")
    daf = pydaf.H5df(path, "w").add_axis("cell", ["a", "b", "c"]).add_axis("gene", ["x", "y"])
    daf.set_matrix("cell", "gene", "UMIs", np.array([[1, 2], [3, 4], [5, 6]], np.uint16, order="F"))
    daf = pydaf.H5df(path, "r")

    def axes_read() -> set[str]:
        return {key.axis for key, _ in daf.cache.entries() if isinstance(key, AxisCacheKey)}

    assert daf.get_np_query("@ cell @ gene :: UMIs", cache=False).tolist() == [[1, 2], [3, 4], [5, 6]]
    assert daf.get_np_query("@ cell @ gene :: UMIs >| Sum", cache=False).tolist() == [3, 7, 11]
    assert axes_read() == set()
    frame = daf["@ cell @ gene :: UMIs"]
    assert list(frame.index) == ["a", "b", "c"] and list(frame.columns) == ["x", "y"]
    assert axes_read() == {"cell", "gene"}
    # Names read after the axis changed would not be the names of the values: an error instead.
    writer = pydaf.MemoryDaf().add_axis("cell", ["a", "b"]).set_vector("cell", "age", [1, 2])
    result = query_result(writer, "@ cell : age", cache=False)
    writer.add_axis("cell", ["c", "d"], overwrite=True)
    with pytest.raises(DafQueryError, match="the entries of the axis: cell\nchanged since the query was computed"):
        _ = result.entries
