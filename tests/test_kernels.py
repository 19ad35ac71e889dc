"""The reduction kernels (pydaf.kernels.reductions) against straightforward numpy, on both the numpy (small) and the
numba (large) paths, on 1-based CSC (several index and value types, read-only) and dense (column- and row-major)."""

from __future__ import annotations

import numpy as np
import pytest

from pydaf.kernels import reductions
from pydaf.kernels.reductions import (
    column_means,
    column_sums,
    group_members,
    matrix_columns,
    matrix_rows,
    reduce_all,
    reduce_columns,
    reduce_grouped_columns,
    reduce_grouped_rows,
    reduce_grouped_vector,
    reduce_rows,
    reduce_vector,
    row_means,
    row_sums,
)
from pydaf.sparse import SparseMatrixCSC, colptr_from_counts, dense_column_major

EPS = 2.0
P = 0.3


REFERENCES = {
    "sum": lambda values, axis: values.sum(axis=axis),
    "mean": lambda values, axis: values.mean(axis=axis),
    "var": lambda values, axis: values.var(axis=axis),
    "std": lambda values, axis: values.std(axis=axis),
    "max": lambda values, axis: values.max(axis=axis),
    "min": lambda values, axis: values.min(axis=axis),
    "median": lambda values, axis: np.median(values, axis=axis),
    "quantile": lambda values, axis: np.quantile(values, P, axis=axis),
    "geomean": lambda values, axis: _geomean(values, axis),
}


def _geomean(values: np.ndarray, axis: int | None) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.exp(np.log(values + EPS).mean(axis=axis)) - EPS


def _use_path(monkeypatch, path: str) -> str:
    monkeypatch.setattr(reductions, "REDUCE_NUMBA_MIN_ENTRIES", 1 << 30 if path == "numpy" else 0)
    return path


@pytest.fixture(params=["numpy", "numba"])
def path(request, monkeypatch):
    """Run a test on the small-input numpy path and on the numba kernels."""
    return _use_path(monkeypatch, request.param)


def _read_only(array: np.ndarray) -> np.ndarray:
    array = np.array(array, copy=True, order="K")
    array.flags.writeable = False
    return array


def _sparse(dense: np.ndarray, indtype=np.uint32) -> SparseMatrixCSC:
    """A read-only 1-based CSC of a dense matrix, with an explicitly stored zero (which must count as a zero)."""
    n_rows, n_columns = dense.shape
    colptr = [1]
    rowval: list[int] = []
    nzval: list = []
    for column in range(n_columns):
        for row in range(n_rows):
            if dense[row, column] != 0 or (row == 0 and column == 1):
                rowval.append(row + 1)
                nzval.append(dense[row, column])
        colptr.append(len(rowval) + 1)
    return SparseMatrixCSC(dense.shape, _read_only(np.array(colptr, dtype=indtype)),
                           _read_only(np.array(rowval, dtype=indtype)), _read_only(np.array(nzval, dtype=dense.dtype)))


def _dense(n_rows: int, n_columns: int, dtype, seed: int = 1, density: float = 0.3) -> np.ndarray:
    generator = np.random.default_rng(seed)
    if np.dtype(dtype) == np.bool_:
        values = generator.random((n_rows, n_columns)) < density
    elif np.dtype(dtype).kind == "u":
        values = generator.integers(1, 20, (n_rows, n_columns)) * (generator.random((n_rows, n_columns)) < density)
    else:
        values = generator.integers(-10, 20, (n_rows, n_columns)) * (generator.random((n_rows, n_columns)) < density)
        if np.dtype(dtype).kind == "f":
            values = values + generator.random((n_rows, n_columns)) * (values != 0)
    result = np.asfortranarray(values.astype(dtype))
    result[:, -1] = 0  # An empty column.
    return result


# Small shapes with odd sizes; (13, 9) has an empty column and, for the grouped tests, an empty group.
CASES = [
    ("sparse uint16 / uint32", np.uint16, np.uint32),
    ("sparse int32 / int64", np.int32, np.int64),
    ("sparse float32 / uint64", np.float32, np.uint64),
    ("sparse bool / int32", np.bool_, np.int32),
    ("dense float64", np.float64, None),
    ("dense int16", np.int16, None),
]

# Every value type compiles its own kernels: the numba path runs on a subset (the index types share kernels anyway).
NUMBA_CASES = ("sparse uint16 / uint32", "dense float64")


PATH_CASES = [
    pytest.param(path, *case, id=f"{path}-{case[0]}")
    for path in ("numpy", "numba")
    for case in CASES
    if path == "numpy" or case[0] in NUMBA_CASES
]


def _matrix(dtype, indtype, layout: str = "F"):
    dense = _dense(13, 9, dtype)
    if indtype is not None:
        return _sparse(dense, indtype), dense
    if layout == "C":
        return _read_only(np.ascontiguousarray(dense)), dense
    return _read_only(dense), dense


def _assert_matches(actual: np.ndarray, expected: np.ndarray) -> None:
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64),
                               rtol=1e-10, atol=1e-10, equal_nan=True)


@pytest.mark.parametrize("path_name,name,dtype,indtype", PATH_CASES)
def test_columns_rows_and_all_match_numpy(monkeypatch, path_name, name, dtype, indtype):
    _use_path(monkeypatch, path_name)
    matrix, dense = _matrix(dtype, indtype)
    values = dense.astype(np.float64)
    for statistic, reference in REFERENCES.items():
        options = {"eps": EPS, "p": P}
        with np.errstate(invalid="ignore"):
            _assert_matches(reduce_columns(matrix, statistic, **options), reference(values, 0))
            _assert_matches(reduce_rows(matrix, statistic, **options), reference(values, 1))
            _assert_matches(reduce_all(matrix, statistic, **options), reference(values.ravel(), None))


@pytest.mark.parametrize("path_name,name,dtype,indtype", PATH_CASES)
def test_grouped_rows_and_columns_match_numpy(monkeypatch, path_name, name, dtype, indtype):
    _use_path(monkeypatch, path_name)
    matrix, dense = _matrix(dtype, indtype)
    values = dense.astype(np.float64)
    row_groups = np.array([0, 2, -1, 0, 2, 2, 0, -1, 2, 0, 0, 2, 0])  # Group 1 is empty.
    column_groups = np.array([1, 0, 0, -1, 1, 3, 0, 1, 3])  # Group 2 is empty.
    for statistic, reference in REFERENCES.items():
        options = {"eps": EPS, "p": P}
        grouped = reduce_grouped_rows(matrix, statistic, row_groups, 3, **options)
        assert grouped.shape == (3, 9) and grouped.flags.f_contiguous
        for group in (0, 2):
            with np.errstate(invalid="ignore"):
                _assert_matches(grouped[group], reference(values[row_groups == group], 0))
        grouped = reduce_grouped_columns(matrix, statistic, column_groups, 4, **options)
        assert grouped.shape == (13, 4) and grouped.flags.f_contiguous
        for group in (0, 1, 3):
            with np.errstate(invalid="ignore"):
                _assert_matches(grouped[:, group], reference(values[:, column_groups == group], 1))
    # Empty groups: zero sums and counts, NaN means.
    assert np.all(reduce_grouped_rows(matrix, "sum", row_groups, 3)[1] == 0)
    assert np.all(np.isnan(reduce_grouped_columns(matrix, "mean", column_groups, 4)[:, 2]))


def test_row_major_dense_is_reduced_without_copying_to_column_major(path):
    matrix, dense = _matrix(np.float64, None, layout="C")
    assert matrix.flags.c_contiguous and not matrix.flags.f_contiguous
    values = dense.astype(np.float64)
    for statistic, reference in REFERENCES.items():
        with np.errstate(invalid="ignore"):
            _assert_matches(reduce_columns(matrix, statistic, eps=EPS, p=P), reference(values, 0))
            _assert_matches(reduce_rows(matrix, statistic, eps=EPS, p=P), reference(values, 1))
    groups = np.array([0, 1, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0, 0])
    grouped = reduce_grouped_rows(matrix, "sum", groups, 2)
    assert grouped.flags.f_contiguous
    _assert_matches(grouped, np.stack([values[groups == group].sum(axis=0) for group in range(2)]))


def test_result_types():
    matrix, _ = _matrix(np.uint16, np.uint32)
    assert reduce_columns(matrix, "sum").dtype == np.uint64
    assert reduce_rows(matrix, "max").dtype == np.uint16
    assert reduce_columns(matrix, "mean").dtype == np.float64
    signed, _ = _matrix(np.int16, None)
    assert reduce_rows(signed, "sum").dtype == np.int64
    assert reduce_rows(signed, "min").dtype == np.int16
    flags, _ = _matrix(np.bool_, np.int64)
    assert reduce_columns(flags, "sum").dtype == np.int64
    assert reduce_columns(flags, "max").dtype == np.bool_
    floats, _ = _matrix(np.float32, None)
    assert reduce_columns(floats, "sum").dtype == np.float64
    assert reduce_grouped_rows(floats, "min", np.zeros(13, np.int64), 1).dtype == np.float32


def test_integer_sums_are_exact_beyond_float_precision(path):
    big = 2**53 + 1
    dense = np.asfortranarray(np.array([[big, 1], [1, 0], [big, 3]], dtype=np.int64))
    # (Dense integer kernels are the same code as the float ones; only the sparse ones run here on both paths.)
    for matrix in (_sparse(dense, np.int64), dense) if path == "numpy" else (_sparse(dense, np.int64),):
        assert column_sums(matrix).tolist() == [2 * big + 1, 4]
        assert row_sums(matrix).tolist() == [big + 1, 1, big + 3]
        assert int(reduce_all(matrix, "sum")) == 2 * big + 5
    unsigned = np.asfortranarray(np.array([[2**64 - 2], [1]], dtype=np.uint64))
    assert column_sums(unsigned if path == "numpy" else _sparse(unsigned, np.uint32)).tolist() == [2**64 - 1]


def test_implicit_zeros_count(path):
    # A column of 10 rows with 2 stored entries has 8 zeros.
    matrix = SparseMatrixCSC((10, 1), np.array([1, 3], np.uint32), np.array([2, 7], np.uint32),
                             np.array([5.0, 3.0]))
    assert reduce_columns(matrix, "mean").tolist() == [0.8]
    assert reduce_columns(matrix, "min").tolist() == [0.0]
    assert reduce_columns(matrix, "median").tolist() == [0.0]
    np.testing.assert_allclose(reduce_columns(matrix, "var"), [np.var([5.0, 3.0] + [0.0] * 8)])
    negative = SparseMatrixCSC((4, 1), np.array([1, 3], np.uint32), np.array([1, 3], np.uint32),
                               np.array([-2.0, -1.0]))
    assert reduce_columns(negative, "max").tolist() == [0.0]
    assert reduce_columns(negative, "median").tolist() == [-0.5]
    assert reduce_columns(negative, "quantile", p=0.5).tolist() == [-0.5]
    assert reduce_rows(negative, "min").tolist() == [-2.0, 0.0, -1.0, 0.0]


def test_nan_propagates_through_max_min_and_median(path):
    dense = np.asfortranarray(np.array([[1.0, np.nan], [3.0, 2.0]]))
    for matrix in (dense, _sparse(dense, np.uint32)):
        assert np.isnan(reduce_columns(matrix, "max")[1]) and reduce_columns(matrix, "max")[0] == 3.0
        assert np.isnan(reduce_rows(matrix, "min")[0])
        assert np.isnan(reduce_columns(matrix, "median")[1])
        assert np.isnan(reduce_all(matrix, "max"))


def test_quantiles_follow_julia():
    # Statistics.quantile([1, 3, 7], 0.25) == 2.0; quantile(1:10, 0.9) == 9.1 (computed with an exact fma).
    assert reduce_vector(np.array([1, 3, 7]), "quantile", p=0.25) == 2.0
    assert reduce_vector(np.arange(1, 11), "quantile", p=0.9) == 9.1
    assert reduce_vector(np.array([5.0]), "quantile", p=0.7) == 5.0
    assert reduce_vector(np.array([1, 3, 7]), "quantile", p=0.0) == 1.0
    assert reduce_vector(np.array([1, 3, 7]), "quantile", p=1.0) == 7.0
    assert reduce_vector(np.array([1, 2, 3, 10]), "median") == 2.5


def test_grouped_vectors(path):
    values = _read_only(np.array([1.0, 2.0, 4.0, 8.0, 3.0]))
    groups = np.array([0, 1, 0, -1, 2])
    assert reduce_grouped_vector(values, "sum", groups, 4).tolist()[:3] == [5.0, 2.0, 3.0]
    assert reduce_grouped_vector(values, "max", groups, 3).tolist() == [4.0, 2.0, 3.0]
    assert reduce_grouped_vector(values, "median", groups, 3).tolist() == [2.5, 2.0, 3.0]
    with pytest.raises(ValueError, match="groups of length"):
        reduce_grouped_vector(values, "sum", groups[:2], 3)
    with pytest.raises(ValueError, match="group index 2 for 2 groups"):
        reduce_grouped_vector(values, "sum", groups, 2)


def test_too_large_buffers_use_fewer_threads(monkeypatch):
    # When per-thread buffers would be too large, grouped columns go one group per chunk into a shared buffer.
    monkeypatch.setattr(reductions, "REDUCE_NUMBA_MIN_ENTRIES", 0)
    monkeypatch.setattr(reductions, "_PRIVATE_BUFFERS_LIMIT", 0)
    matrix, dense = _matrix(np.uint16, np.uint32)
    groups = np.array([1, 0, 0, -1, 1, 3, 0, 1, 3])
    for statistic in ("sum", "max", "var"):
        expected = np.stack([REFERENCES[statistic](dense[:, groups == group].astype(np.float64), 1)
                             for group in (0, 1, 3)], axis=1)
        _assert_matches(reduce_grouped_columns(matrix, statistic, groups, 4)[:, [0, 1, 3]], expected)
        # Per row, on a single thread (one buffer).
        _assert_matches(reduce_rows(matrix, statistic), REFERENCES[statistic](dense.astype(np.float64), 1))


def test_large_sparse_matrix_on_all_threads():
    # Above the threshold for real: the balanced chunks, per-thread row buffers and their sum.
    generator = np.random.default_rng(7)
    n_rows, n_columns, nnz_per_column = 5000, 40, 2000
    colptr = np.arange(1, (n_columns + 1) * nnz_per_column + 1, nnz_per_column, dtype=np.uint32)
    rowval = np.concatenate([np.sort(generator.choice(n_rows, nnz_per_column, replace=False)) + 1
                             for _ in range(n_columns)]).astype(np.uint32)
    nzval = generator.integers(1, 100, rowval.shape[0]).astype(np.uint16)
    matrix = SparseMatrixCSC((n_rows, n_columns), _read_only(colptr), _read_only(rowval), _read_only(nzval))
    assert matrix.nnz >= reductions.REDUCE_NUMBA_MIN_ENTRIES
    dense = matrix.to_dense().astype(np.float64)
    _assert_matches(row_sums(matrix), dense.sum(axis=1))
    _assert_matches(column_sums(matrix), dense.sum(axis=0))
    _assert_matches(row_means(matrix), dense.mean(axis=1))
    _assert_matches(column_means(matrix), dense.mean(axis=0))
    _assert_matches(reduce_rows(matrix, "max"), dense.max(axis=1))
    _assert_matches(reduce_columns(matrix, "median"), np.median(dense, axis=0))
    groups = generator.integers(-1, 10, n_rows)
    _assert_matches(reduce_grouped_rows(matrix, "mean", groups, 10),
                    np.stack([dense[groups == group].mean(axis=0) for group in range(10)]))


def test_inputs_are_never_written(path):
    matrix, _ = _matrix(np.uint16, np.uint32)
    before = (matrix.colptr.copy(), matrix.rowval.copy(), matrix.nzval.copy())
    for statistic in REFERENCES:
        reduce_rows(matrix, statistic, eps=EPS, p=P)
        reduce_grouped_rows(matrix, statistic, np.zeros(13, np.int64), 1, eps=EPS, p=P)
    assert all(np.array_equal(a, b) for a, b in zip(before, (matrix.colptr, matrix.rowval, matrix.nzval), strict=True))


def test_scipy_input_and_errors():
    import scipy.sparse as sp

    assert column_sums(sp.csr_matrix(np.array([[1, 0], [2, 3]]))).tolist() == [3, 3]
    with pytest.raises(ValueError, match="unknown statistic: mean2 \\(expected one of: sum, mean,"):
        reduce_columns(np.ones((2, 2)), "mean2")
    with pytest.raises(ValueError, match="not a matrix"):
        reduce_columns(np.ones(3), "sum")


def test_helpers():
    dense = np.asfortranarray(np.array([[0, 1, 0], [2, 0, 3], [0, 4, 5]], dtype=np.int32))
    matrix = _sparse(dense, np.uint32)
    assert np.array_equal(dense_column_major(matrix), dense) and dense_column_major(matrix).flags.f_contiguous
    transposed = matrix.transpose()
    assert transposed.colptr.dtype == np.uint32 and np.array_equal(transposed.to_dense(), dense.T)
    assert np.array_equal(matrix.select(rows=np.array([0, 2])).to_dense(), dense[[0, 2]])
    assert np.array_equal(matrix.select(columns=np.array([2, 0])).to_dense(), dense[:, [2, 0]])
    assert [column.tolist() for column in matrix_columns(matrix)] == dense.T.tolist()
    assert [row.tolist() for row in matrix_rows(matrix)] == dense.tolist()
    assert [members.tolist() for members in group_members(np.array([2, 0, -1, 2]), 3)] == [[1], [], [0, 3]]
    assert colptr_from_counts(np.array([0, 2]), np.int64).tolist() == [1, 1, 3]


def test_benchmark_script_kernels(tmp_path, capsys):
    # benchmarks/bench_queries.py on a tiny file (the full run is ≥ 1 GB): every column agrees with scipy.
    from .benchmark_scripts import load_benchmark

    bench = load_benchmark("bench_queries")
    path = str(tmp_path / "bench.h5df")
    assert bench.main(["--path", path, "--cells", "3000", "--genes", "40", "--repeats", "1", "--quiet"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:7] == ["reduction", "query", "s", "fresh", "s", "kernel", "s"]
    assert [line.split()[0] for line in lines[1:4]] == [">|", ">-", "-/"]
    assert all(line.endswith("yes") for line in lines[1:4])
    assert lines[4].startswith("tiny query overhead: '. organism' computed")
    assert bench._existing_shape(path) == (3000, 40)  # Reused by the next run.


# The numba kernels on larger, adversarial inputs (each a few thousand values: still quick to run).


@pytest.fixture
def numba_path(monkeypatch):
    """The numba kernels for every input, run on all threads, transforming logarithms in small blocks."""
    from pydaf.kernels import threads

    monkeypatch.setattr(reductions, "REDUCE_NUMBA_MIN_ENTRIES", 0)
    monkeypatch.setattr(threads, "PARALLEL_MIN_ENTRIES", 0)
    monkeypatch.setattr(reductions, "_TRANSFORM_BLOCK", 37)
    monkeypatch.setattr(reductions, "_ROW_BLOCK", 16)


def _adversarial_columns(n_rows: int) -> np.ndarray:
    """Columns that defeat naive quickselects (sorted, reversed, organ pipe, all equal, few distinct values) and
    sparse-like ones with negatives around implicit zeros."""
    generator = np.random.default_rng(11)
    pipe = np.concatenate([np.arange(n_rows // 2), np.arange(n_rows - n_rows // 2)[::-1]])
    columns = [np.arange(n_rows), np.arange(n_rows)[::-1], pipe, np.ones(n_rows), generator.integers(-2, 3, n_rows),
               generator.normal(size=n_rows) * (generator.random(n_rows) < 0.3), -generator.random(n_rows)]
    return np.asfortranarray(np.stack(columns, axis=1).astype(np.float64))


@pytest.mark.parametrize("n_rows", [5, 17, 1001])
def test_order_statistics_by_selection(numba_path, n_rows):
    dense = _adversarial_columns(n_rows)
    matrices = (dense, _sparse(dense), _read_only(np.ascontiguousarray(dense)))
    for p in (0.0, 0.1, 0.5, 0.77, 1.0):
        for matrix in matrices:
            _assert_matches(reduce_columns(matrix, "quantile", p=p), np.quantile(dense, p, axis=0))
            _assert_matches(reduce_rows(matrix, "quantile", p=p), np.quantile(dense, p, axis=1))
    for matrix in matrices:
        _assert_matches(reduce_columns(matrix, "median"), np.median(dense, axis=0))
        _assert_matches(reduce_rows(matrix, "median"), np.median(dense, axis=1))
        _assert_matches(reduce_all(matrix, "median"), np.median(dense))


def test_extremes_of_floats_by_integer_keys(numba_path):
    # Negative zeros, infinities, subnormals and NaN, in both float types.
    values = np.array([[-0.0, 1.0, -np.inf, 5e-324, 3.0], [0.0, -1.0, np.inf, -5e-324, np.nan],
                       [-2.5, -3.5, 0.5, 0.0, 1.0]]).T
    for dtype in (np.float32, np.float64, np.int8, np.uint16, np.uint64, np.int64):
        dense = np.asfortranarray(np.nan_to_num(values, posinf=100, neginf=-100).astype(dtype)
                                  if np.dtype(dtype).kind in "iu" else values.astype(dtype))
        if np.dtype(dtype).kind == "u":
            dense = np.asfortranarray(np.abs(dense))
        for matrix in (dense, _sparse(dense)):
            for statistic, reference in (("max", np.max), ("min", np.min)):
                result = reduce_columns(matrix, statistic)
                assert result.dtype == dense.dtype
                np.testing.assert_array_equal(result, reference(dense, axis=0))
                np.testing.assert_array_equal(reduce_rows(matrix, statistic), reference(dense, axis=1))


def test_variances_in_one_pass_match_two_passes(numba_path):
    generator = np.random.default_rng(5)
    # A large mean: one pass of sums of squares would lose the variance.
    dense = np.asfortranarray(1e8 + generator.normal(size=(53, 9)))
    for matrix in (dense, _sparse(dense)):
        np.testing.assert_allclose(reduce_columns(matrix, "var"), dense.var(axis=0), rtol=1e-9)
        np.testing.assert_allclose(reduce_rows(matrix, "var"), dense.var(axis=1), rtol=1e-9)
        np.testing.assert_allclose(reduce_rows(matrix, "std"), dense.std(axis=1), rtol=1e-9)


def test_geomeans_with_blocks_of_logarithms(numba_path):
    generator = np.random.default_rng(6)
    for dtype in (np.float32, np.float64, np.uint16):
        dense = _dense(61, 23, dtype, seed=7, density=0.6)
        dense = np.asfortranarray(np.abs(dense))
        values = dense.astype(np.float64)
        groups = generator.integers(-1, 4, 61)
        for matrix in (dense, _sparse(dense)):
            # (An all-zero column's geomean is exp(log(eps)) - eps: zero up to rounding.)
            close = {"rtol": 1e-10, "atol": 1e-12}
            np.testing.assert_allclose(reduce_columns(matrix, "geomean", eps=EPS), _geomean(values, 0), **close)
            np.testing.assert_allclose(reduce_rows(matrix, "geomean", eps=EPS), _geomean(values, 1), **close)
            grouped = reduce_grouped_rows(matrix, "geomean", groups, 4, eps=EPS)
            for group in range(4):
                np.testing.assert_allclose(grouped[group], _geomean(values[groups == group], 0), **close)


def test_modes_follow_julia(numba_path):
    # StatsBase.mode: the most frequent value; of ties, the first to reach the top count (zeros included).
    generator = np.random.default_rng(8)
    for trial in range(20):
        n_rows, n_columns = int(generator.integers(2, 60)), int(generator.integers(1, 9))
        values = generator.integers(-2, 3, (n_rows, n_columns)) * (generator.random((n_rows, n_columns)) < 0.5)
        for dtype in (np.float64, np.int32, np.uint16):
            dense = np.asfortranarray(np.abs(values) if np.dtype(dtype).kind == "u" else values).astype(dtype)
            if trial % 4 == 0 and dtype == np.float64:
                dense[generator.integers(0, n_rows, 3), 0] = np.nan
            expected_columns = [reductions._mode(dense[:, column]) for column in range(n_columns)]
            expected_rows = [reductions._mode(dense[row, :]) for row in range(n_rows)]
            for matrix in (dense, _sparse(dense)):
                np.testing.assert_array_equal(reduce_columns(matrix, "mode"), expected_columns)
                np.testing.assert_array_equal(reduce_rows(matrix, "mode"), expected_rows)
    assert reduce_columns(np.asfortranarray([[3.0], [1.0], [1.0], [3.0]]), "mode").tolist() == [1.0]
    assert reduce_columns(_sparse(np.asfortranarray([[0], [2], [2], [0]])), "mode").tolist() == [2]


def test_kernels_on_all_threads_match_one(monkeypatch):
    # The same sums, extremes and grouped means on one thread and on several (balanced chunks, private buffers).
    from pydaf.kernels import threads

    monkeypatch.setattr(reductions, "REDUCE_NUMBA_MIN_ENTRIES", 0)
    dense = _dense(301, 43, np.float64, seed=9, density=0.4)
    groups = np.random.default_rng(9).integers(-1, 5, 301)
    results = []
    for minimum in (1 << 40, 0):
        monkeypatch.setattr(threads, "PARALLEL_MIN_ENTRIES", minimum)
        results.append([function(matrix, statistic) for matrix in (dense, _sparse(dense))
                        for function in (reduce_columns, reduce_rows) for statistic in ("sum", "max", "var")]
                       + [reduce_grouped_rows(_sparse(dense), "mean", groups, 5)])
    for single, parallel in zip(*results, strict=True):
        _assert_matches(parallel, single)


def test_statistics_registry():
    assert list(reductions.STATISTICS) == ["sum", "mean", "var", "std", "geomean", "max", "min", "median",
                                          "quantile", "mode"]
    for name, statistic in reductions.STATISTICS.items():
        assert statistic.name == name and callable(statistic.of_targets)
        assert callable(statistic.of_all) and callable(statistic.of_vector)
    with pytest.raises(ValueError, match="the quantile statistic needs p"):
        reduce_columns(np.ones((2, 2), order="F"), "quantile")
    assert reductions.Direction.GROUPED_ROWS.transposed is reductions.Direction.GROUPED_COLUMNS


def test_run_ranges_raises_after_every_range_finished():
    import time

    from pydaf.kernels.threads import even_bounds, run_ranges

    finished = []

    def work(first: int, last: int) -> None:
        if first == 0:
            raise RuntimeError("first range failed")
        if first == 3:
            time.sleep(0.3)  # (still running when the failure is seen)
        finished.append((first, last))

    with pytest.raises(RuntimeError, match="first range failed"):
        run_ranges(work, even_bounds(9, 3))
    assert sorted(finished) == [(3, 6), (6, 9)]


def test_map_all_returns_in_order_and_waits_for_every_item_when_interrupted():
    import signal
    import time

    from pydaf.kernels.threads import map_all

    assert map_all(lambda number: number * number, range(5)) == [0, 1, 4, 9, 16]
    # (a Ctrl-C arriving while the calling thread waits: the other items still write into buffers that the caller's
    # cleanup may unmap, which crashed a killed convert with SIGSEGV)
    finished = []

    def work(item: int) -> int:
        if item == 0:
            time.sleep(0.6)
            finished.append(item)
        return item

    def interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.1)
        with pytest.raises(KeyboardInterrupt):
            map_all(work, [0, 1, 2])
        assert finished == [0]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_no_kernel_runs_on_a_pool_by_map():
    # (``list(pool.map(...))`` leaves the running items going on a Ctrl-C while the caller unmaps their buffers: a
    # Ctrl-C'd convert to H5df died with SIGSEGV in CI; :func:`map_all` waits for them)
    import re
    from pathlib import Path

    import pydaf

    root = Path(pydaf.__file__).parent
    found = [f"{path.relative_to(root)}:{number}" for path in sorted(root.rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if re.search(r"(pool\(\)|pool)\.map\(", line) and "``" not in line]
    assert found == []


def test_importing_pydaf_does_not_import_numba():
    import subprocess
    import sys

    code = ("import sys, pydaf, pydaf.kernels, pydaf.queries; import pydaf.kernels.reductions; "
            "print('numba' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "False"


def test_benchmark_script_kernels_side_by_side(tmp_path, capsys):
    # benchmarks/bench_kernels.py on tiny files (the real run is ≥ 50 MB per matrix): every row agrees.
    from .benchmark_scripts import load_benchmark

    bench = load_benchmark("bench_kernels")
    arguments = ["--directory", str(tmp_path), "--dense-cells", "300", "--dense-megabytes", "0.2", "--sparse-cells",
                 "400", "--sparse-genes", "300", "--types", "UInt16", "--repeats", "1", "--quiet"]
    assert bench.main(arguments) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith(("dense ", "sparse "))]
    assert len(rows) == 2 * (2 + 2 * 13 + 7 + 1)
    assert all(" yes " in row for row in rows)
    assert bench.main([*arguments, "--only", "sparse UInt16 >- Sum"]) == 0
    assert len([line for line in capsys.readouterr().out.splitlines() if line.startswith("sparse ")]) == 1
    # Queries in the stored form: the same values (the fetch's bare pass then makes no 0-based indices either).
    assert bench.main([*arguments, "--stored", "--only", "sparse UInt16 (fetch|%)"]) == 0
    stored_rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("sparse ")]
    assert len(stored_rows) == 1 + 7 and all(" yes " in row for row in stored_rows)
    assert stored_rows[0].endswith("empty_cache; get_stored_matrix")
