"""Benchmark: every reduction and element-wise query, dense and sparse, against the bare single-threaded numpy/scipy
pass that computes the same values.

The script writes (once; reused while the files match the requested sizes) two H5df files under ``--directory``:

``dense.h5df``
    ``cell`` (default 10,000 entries) x ``gene_<T>`` column-major matrices ``X`` of each type ``T`` (``Float32``,
    ``Float64``, ``UInt16``), each ~80 MB (the number of genes depends on the type: 2,000 / 1,000 / 4,000);
``sparse.h5df``
    ``cell`` (30,000) x ``gene`` (20,000) sparse matrices ``X_<T>`` of each type, 5% non-zeros (30 M stored entries,
    ``UInt32`` indices: 60-240 MB of values and 120 MB of row indices), stored in that layout only;

both with a ``type`` axis of 10 entries and a ``type`` per cell (for the grouped rows).

Each row of the table is one query, ``@ cell @ gene :: X`` followed by:

``fetch``
    nothing: the matrix itself (against ``empty_cache(); get_stored_matrix(...)``; for the sparse matrix, which the
    query returns as a scipy ``csc_matrix``, followed by the 0-based copies of its indices that any scipy reader of
    this file, whose indices are Julia's 1-based ones, must make);
``(fetched again, every page read)``
    not a query: ``empty_cache(); get_stored_matrix(...)``, then one value read per 4 KB page of the stored arrays
    (the ``op`` column: the same reads on the matrix as fetched before). Every query after ``empty_cache`` fetches the
    matrix again and pays this on the pages it reads; the bare passes run on arrays fetched once. (A map made afresh
    faults every page in: 5-6 ms for 80 MB. The open file keeps its maps for reuse, so this row shows what is left.);
``>- R`` / ``>| R``
    each of the 13 reductions per column (one value per gene) and per row (one value per cell);
``% E``
    each of the 7 element-wise operations;
``-/ type =@ >- Mean``
    the mean per cell type and gene (against pandas ``groupby(...).mean()`` on the dense matrix, and the scipy
    indicator-matrix product on the sparse one, as pandas has no sparse groupby).

Columns: ``query`` is ``daf.empty_cache(); daf.get_np_query(query, cache=False)`` on the open mapped file (so every
run fetches the matrix again and computes; the page cache is warm), or with ``--stored`` ``get_stored_query`` (a
sparse result in Julia's 1-based form, sharing the stored indices, where scipy's form needs 0-based copies of them;
the sparse ``fetch`` row's bare pass is then ``get_stored_matrix`` alone); ``op`` is the operation called directly on
the mapped stored matrix (``Sum().compute_matrix(stored, 0)``, the kernel level: no query parsing, no fetch); ``bare``
is the bare pass on the same data in memory (numpy on the mapped dense array; scipy on a ``csc_matrix`` built from it
beforehand, untimed), single-threaded (BLAS is limited to one thread). Each time is the best and the median of
``--repeats`` runs after a warm-up run (which compiles or loads the numba kernels), and ``cpu`` is the CPU time /
wall time of the best pydaf query run (2.0: both cores busy). ``q/bare`` and ``op/bare`` are the ratios of the best
times. ``ok`` says whether the query's values equal the bare pass's (``np.allclose``, ``rtol=1e-4`` for Float32
results; for ``Mode``, whether the value returned occurs as often as the most frequent value, as ties may be broken
differently).

Where numpy/scipy has no one-call pass, the bare pass is the plain numpy a user would write, named in the ``bare``
column of the table: the sparse ``Median``/``Quantile``/``Mode`` loop over the columns with ``np.partition``/
``np.unique`` (per row, over a ``tocsr()`` copy made in the pass); ``Var`` of a sparse matrix is ``mean(X²) - mean²``
(scipy); ``Fraction`` and ``Significant`` of a sparse matrix work on ``data`` with ``np.repeat`` of per-column
values, and ``Significant`` of a dense matrix builds a ``csc_matrix`` (Julia's result is sparse once a value became
zero; for unsigned types Julia's ``-high`` wraps around, so every value is "high" and the non-zeros stay); ``GeoMean``
adds the ``Float64`` eps (as Julia does, so ``Float32`` values are logged in ``Float64``). ``Count`` has no data pass:
its bare pass is ``get_stored_matrix`` (after ``empty_cache``) and ``np.full``.

Examples::

    python benchmarks/bench_kernels.py                          # ~80 MB dense, 30 M-entry sparse; ~1 GB in /tmp
    python benchmarks/bench_kernels.py --only 'sparse.*Sum'     # rows whose "kind type query" matches a regex
    python benchmarks/bench_kernels.py --stored                 # queries by get_stored_query
    python benchmarks/bench_kernels.py --directory /tmp/small --dense-cells 500 --dense-megabytes 1 \
        --sparse-cells 800 --sparse-genes 600 --repeats 1                  # smoke run
"""

from __future__ import annotations

import os

# The bare passes are single-threaded: numpy's reductions are, and BLAS (used by a few numpy calls) is made so.
for _variable in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")

import argparse  # noqa: E402
import functools  # noqa: E402
import re  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from recording import OUTPUT_HELP, recording_main  # noqa: E402

DEFAULT_DIRECTORY = "/tmp/kernels-bench"
TYPES = {"Float32": np.float32, "Float64": np.float64, "UInt16": np.uint16}
N_TYPES = 10
DENSE_MEGABYTES = 80
SPARSE_DENSITY = 0.05
EPS = 1.0
P = 0.9
HIGH, LOW = 3, 1

#: The 13 reductions: the query text after ``>-``/``>|``.
REDUCTIONS = ["Sum", "Mean", "Max", "Min", "Median", "Quantile p 0.9", "Var", "Std", "VarN", "StdN",
              "GeoMean eps 1", "Count", "Mode"]

#: The 7 element-wise operations, by element type (``Convert`` changes the type; ``Clamp`` keeps zeros zero, so a
#: sparse matrix stays sparse).
ELTWISE = ["Abs", "Round", "Clamp min 0 max 5", "Convert type {other}", "Fraction", "Log eps 1",
           f"Significant high {HIGH} low {LOW}"]

GROUPED = "-/ type =@ >- Mean"


# Building the files.


def _values(generator: np.random.Generator, type_name: str, count: int, *, nonzero: bool) -> np.ndarray:
    """Expression-like values: small counts for UInt16, exponential (rounded to 1/8, so values repeat) for floats."""
    if type_name == "UInt16":
        values = generator.geometric(0.3, count) - (0 if nonzero else 1)
        return np.minimum(values, 65535).astype(np.uint16)
    values = np.round(generator.exponential(1.0, count) * 8) / 8
    if nonzero:
        values += 0.125
    return values.astype(TYPES[type_name])


def _add_types(daf: Any, n_cells: int, generator: np.random.Generator) -> None:
    names = np.array([f"T{index}" for index in range(N_TYPES)], dtype=object)
    daf.add_axis("type", names)
    daf.set_vector("cell", "type", names[generator.integers(0, N_TYPES, n_cells)])


@dataclass(frozen=True)
class Sizes:
    """The sizes of the benchmark data."""

    dense_cells: int = 10_000
    dense_megabytes: float = DENSE_MEGABYTES
    sparse_cells: int = 30_000
    sparse_genes: int = 20_000

    def dense_genes(self, type_name: str) -> int:
        return max(1, int(self.dense_megabytes * 1e6) // (self.dense_cells * np.dtype(TYPES[type_name]).itemsize))


def build_dense(path: str, sizes: Sizes, seed: int = 1) -> None:
    import pydaf

    generator = np.random.default_rng(seed)
    n_cells = sizes.dense_cells
    daf = pydaf.H5df(path, "w", name="dense!")
    daf.add_axis("cell", np.array([f"C{index:06d}" for index in range(n_cells)], dtype=object))
    _add_types(daf, n_cells, generator)
    for type_name in TYPES:
        n_genes = sizes.dense_genes(type_name)
        daf.add_axis(f"gene_{type_name}", np.array([f"G{index:05d}" for index in range(n_genes)], dtype=object))
        with daf.empty_dense_matrix("cell", f"gene_{type_name}", "X", type_name) as matrix:
            for first in range(0, n_genes, 256):
                last = min(first + 256, n_genes)
                block = _values(generator, type_name, n_cells * (last - first), nonzero=False)
                matrix[:, first:last] = block.reshape((n_cells, last - first), order="F")
            del matrix
    daf.flush()


def build_sparse(path: str, sizes: Sizes, seed: int = 2) -> None:
    import pydaf

    generator = np.random.default_rng(seed)
    n_cells, n_genes = sizes.sparse_cells, sizes.sparse_genes
    daf = pydaf.H5df(path, "w", name="sparse!")
    daf.add_axis("cell", np.array([f"C{index:06d}" for index in range(n_cells)], dtype=object))
    daf.add_axis("gene", np.array([f"G{index:05d}" for index in range(n_genes)], dtype=object))
    _add_types(daf, n_cells, generator)
    # Each gene's cells: a Bernoulli mask drawn as bytes; the same structure for every value type.
    threshold = round(SPARSE_DENSITY * 256)
    rows_of_genes = [(np.flatnonzero(generator.integers(0, 256, n_cells, dtype=np.uint8) < threshold) + 1)
                     .astype(np.uint32) for _gene in range(n_genes)]
    counts = np.array([rows.shape[0] for rows in rows_of_genes], dtype=np.int64)
    nnz = int(counts.sum())
    for type_name in TYPES:
        with daf.empty_sparse_matrix("cell", "gene", f"X_{type_name}", type_name, nnz, "UInt32") as (colptr, rowval,
                                                                                                  nzval):
            colptr[0] = 1
            colptr[1:] = np.cumsum(counts) + 1
            position = 0
            for rows in rows_of_genes:
                rowval[position:position + rows.shape[0]] = rows
                position += rows.shape[0]
            for first in range(0, nnz, 1 << 24):
                count = min(1 << 24, nnz - first)
                nzval[first:first + count] = _values(generator, type_name, count, nonzero=True)
            del colptr, rowval, nzval
    daf.flush()


def _dense_ok(path: str, sizes: Sizes) -> bool:
    import pydaf

    try:
        daf = pydaf.H5df(path, "r")
        return daf.axis_length("cell") == sizes.dense_cells and all(
            daf.has_matrix("cell", f"gene_{name}", "X", relayout=False)
            and daf.axis_length(f"gene_{name}") == sizes.dense_genes(name) for name in TYPES)
    except Exception:  # Any unreadable file is rebuilt.
        return False


def _sparse_ok(path: str, sizes: Sizes) -> bool:
    import pydaf

    try:
        daf = pydaf.H5df(path, "r")
        return daf.axis_length("cell") == sizes.sparse_cells and daf.axis_length("gene") == sizes.sparse_genes \
            and all(daf.has_matrix("cell", "gene", f"X_{name}", relayout=False) for name in TYPES)
    except Exception:  # Any unreadable file is rebuilt.
        return False


def ensure_files(directory: str, sizes: Sizes, *, quiet: bool = False) -> tuple[str, str]:
    """The paths of the dense and sparse files, (re)built unless they already hold data of these sizes."""
    os.makedirs(directory, exist_ok=True)
    dense_path, sparse_path = os.path.join(directory, "dense.h5df"), os.path.join(directory, "sparse.h5df")
    builds = [(path, build) for path, ok, build in ((dense_path, _dense_ok, build_dense),
                                                    (sparse_path, _sparse_ok, build_sparse))
              if not ok(path, sizes)]
    needed = 3 * sizes.dense_megabytes * 1e6 + 3 * sizes.sparse_cells * sizes.sparse_genes * SPARSE_DENSITY * 12
    if builds and shutil.disk_usage(directory).free < needed * 1.2:
        sys.exit(f"not enough free disk space at {directory} for ~{needed / 1e9:.1f} GB")
    for path, build in builds:
        started = time.perf_counter()
        if os.path.exists(path):
            os.remove(path)
        build(path, sizes)
        if not quiet:
            print(f"wrote {path} ({os.path.getsize(path) / 1e6:.0f} MB) in {time.perf_counter() - started:.1f} s")
    return dense_path, sparse_path


# Measuring.


@dataclass
class Timing:
    best: float
    median: float
    cpu: float


def measure(function: Callable[[], Any], repeats: int) -> Timing:
    """Best and median wall time of ``repeats`` runs after a warm-up run, with the CPU utilisation of the best."""
    return measure_together([function], repeats)[0][0]


def measure_together(functions: list[Callable[[], Any]], repeats: int,
                     check: Callable[[list[Any]], bool] | None = None) -> tuple[list[Timing], bool]:
    """:func:`measure` of each of ``functions``, their runs interleaved: a warm-up run of each, whose results go to
    ``check`` (whose verdict is returned) and are dropped, then ``repeats`` rounds of one run of each, the order
    rotating each round, so that every side of a row runs under the same conditions. On this VM a freed page may be
    handed back to the host (virtio-balloon free page reporting) and touching it again costs a host fault: 80 MB of
    fresh pages took 140-150 ms instead of 9-14 ms after a 3 s pause, and a side measured alone in a streak of such
    pages looked 5-7x slower than the side measured before it. Each result is dropped right after its run (held, it
    would keep alive what the next run must make again, such as a sparse result's 0-based indices)."""
    results = [function() for function in functions]
    ok = check(results) if check is not None else True
    del results
    times: list[list[float]] = [[] for _ in functions]
    cpus: list[list[float]] = [[] for _ in functions]
    for round_index in range(max(1, repeats)):
        for offset in range(len(functions)):
            index = (round_index + offset) % len(functions)
            cpu = time.process_time()
            wall = time.perf_counter()
            result = functions[index]()
            times[index].append(time.perf_counter() - wall)
            cpus[index].append(time.process_time() - cpu)
            del result
    timings = []
    for function_times, function_cpus in zip(times, cpus, strict=True):
        best = int(np.argmin(function_times))
        timings.append(Timing(function_times[best], statistics.median(function_times),
                              function_cpus[best] / function_times[best] if function_times[best] > 0 else 0.0))
    return timings, ok


@dataclass
class Case:
    """One data set: a dense or sparse matrix of one type, with everything the bare passes need."""

    kind: str
    type_name: str
    daf: Any
    rows_axis: str
    columns_axis: str
    name: str
    stored: Any  # the mapped stored matrix (numpy F-order array or SparseMatrixCSC)
    csc: Any = None  # scipy, in memory (sparse only)
    csr: Any = None
    groups: np.ndarray | None = None
    group_names: np.ndarray | None = None

    @property
    def prefix(self) -> str:
        return f"@ {self.rows_axis} @ {self.columns_axis} :: {self.name}"

    @property
    def nbytes(self) -> int:
        if self.kind == "dense":
            return int(self.stored.nbytes)
        return int(self.stored.nzval.nbytes + self.stored.rowval.nbytes + self.stored.colptr.nbytes)


def load_cases(dense_path: str, sparse_path: str, types: list[str]) -> list[Case]:
    import scipy.sparse as sp

    import pydaf

    cases = []
    for kind, path in (("dense", dense_path), ("sparse", sparse_path)):
        daf = pydaf.H5df(path, "r")
        groups = np.asarray(daf.get_vector("cell", "type"), dtype=str)
        group_names, group_indices = np.unique(groups, return_inverse=True)
        for type_name in types:
            columns_axis = f"gene_{type_name}" if kind == "dense" else "gene"
            name = "X" if kind == "dense" else f"X_{type_name}"
            stored = daf.get_stored_matrix("cell", columns_axis, name, relayout=False)
            case = Case(kind, type_name, daf, "cell", columns_axis, name, stored, groups=group_indices,
                        group_names=group_names)
            if kind == "sparse":
                case.csc = sp.csc_matrix((np.array(stored.nzval), np.array(stored.rowval, dtype=np.int32) - 1,
                                          np.array(stored.colptr, dtype=np.int32) - 1), shape=stored.shape)
                case.csr = case.csc.tocsr()
            cases.append(case)
    return cases


# The bare passes.


def _float_type(type_name: str) -> Any:
    return np.float64 if type_name == "Float64" else np.float32


def _other_type(type_name: str) -> str:
    return "Float32" if type_name == "Float64" else "Float64"


def _compressed_loop(matrix: Any, function: Callable[[np.ndarray, int], Any], n: int) -> np.ndarray:
    """``function(values, n)`` of each compressed slice (column of a CSC, row of a CSR) of a scipy matrix."""
    indptr, data = matrix.indptr, matrix.data
    return np.array([function(data[indptr[index]:indptr[index + 1]], n) for index in range(indptr.shape[0] - 1)])


def _sparse_quantile(values: np.ndarray, n: int, p: float) -> float:
    """The ``p`` quantile (type 7) of ``values`` padded with zeros to ``n`` values (the stored values are positive)."""
    position = p * (n - 1)
    low = int(np.floor(position))
    high = min(low + 1, n - 1)
    zeros = n - values.shape[0]
    wanted = [index - zeros for index in (low, high) if index >= zeros]
    parted = np.partition(values, wanted) if wanted else values

    def at(index: int) -> float:
        return 0.0 if index < zeros else float(parted[index - zeros])

    return at(low) + (position - low) * (at(high) - at(low))


def _sparse_mode(values: np.ndarray, n: int) -> Any:
    unique, counts = np.unique(values, return_counts=True)
    if counts.shape[0] == 0 or n - values.shape[0] >= counts.max():
        return values.dtype.type(0)
    return unique[np.argmax(counts)]


def _dense_mode(matrix: np.ndarray, axis: int) -> np.ndarray:
    import scipy.stats

    return scipy.stats.mode(matrix, axis=axis, keepdims=False).mode


def bare_reduction(case: Case, reduction: str, axis: int) -> tuple[str, Callable[[], Any]]:
    """The name and function of the bare pass of a reduction (``axis`` 0: per column, ``>-``; 1: per row)."""
    name = reduction.split()[0]
    if case.kind == "dense":
        x = case.stored
        simple = {"Sum": lambda: x.sum(axis=axis), "Mean": lambda: x.mean(axis=axis),
                  "Max": lambda: x.max(axis=axis), "Min": lambda: x.min(axis=axis),
                  "Median": lambda: np.median(x, axis=axis), "Quantile": lambda: np.quantile(x, P, axis=axis),
                  "Var": lambda: x.var(axis=axis), "Std": lambda: x.std(axis=axis),
                  "VarN": lambda: x.var(axis=axis) / x.mean(axis=axis),
                  "StdN": lambda: x.std(axis=axis) / x.mean(axis=axis),
                  "GeoMean": lambda: np.exp(np.log(x + np.float64(EPS)).mean(axis=axis)) - EPS,
                  "Mode": lambda: _dense_mode(x, axis)}
        if name in simple:
            label = {"Mode": "scipy.stats.mode", "GeoMean": "exp(mean(log(x+1)))-1"}.get(name, f"np {name.lower()}")
            return label, simple[name]
    else:
        csc = case.csc
        n = csc.shape[axis]

        def compressed() -> Any:
            # Per row, the loop needs the rows: the CSR conversion is part of the pass.
            return csc if axis == 0 else csc.tocsr()

        def mean() -> np.ndarray:
            return np.asarray(csc.mean(axis=axis)).ravel()

        def var() -> np.ndarray:
            means = mean()
            return np.asarray(csc.multiply(csc).mean(axis=axis)).ravel() - means * means

        def geomean() -> np.ndarray:
            logs = csc.copy()
            logs.data = np.log(logs.data + np.float64(EPS))
            return np.exp(np.asarray(logs.mean(axis=axis)).ravel()) - EPS

        simple = {"Sum": lambda: np.asarray(csc.sum(axis=axis)).ravel(), "Mean": mean,
                  "Max": lambda: csc.max(axis=axis).toarray().ravel(),
                  "Min": lambda: csc.min(axis=axis).toarray().ravel(),
                  "Var": var, "Std": lambda: np.sqrt(var()), "VarN": lambda: var() / mean(),
                  "StdN": lambda: np.sqrt(var()) / mean(), "GeoMean": geomean,
                  "Median": lambda: _compressed_loop(compressed(), lambda v, k: _sparse_quantile(v, k, 0.5), n),
                  "Quantile": lambda: _compressed_loop(compressed(), lambda v, k: _sparse_quantile(v, k, P), n),
                  "Mode": lambda: _compressed_loop(compressed(), _sparse_mode, n)}
        labels = {"Var": "scipy mean(x²)-mean²", "Std": "scipy sqrt(var)", "VarN": "scipy var/mean",
                  "StdN": "scipy std/mean", "GeoMean": "log(data+1), scipy mean",
                  "Median": f"{'' if axis == 0 else 'tocsr, '}loop np.partition",
                  "Quantile": f"{'' if axis == 0 else 'tocsr, '}loop np.partition",
                  "Mode": f"{'' if axis == 0 else 'tocsr, '}loop np.unique"}
        if name in simple:
            return labels.get(name, f"scipy {name.lower()}"), simple[name]
    assert name == "Count", name

    def count() -> np.ndarray:
        case.daf.empty_cache()
        matrix = case.daf.get_stored_matrix(case.rows_axis, case.columns_axis, case.name, relayout=False)
        return np.full(matrix.shape[1 - axis], matrix.shape[axis])

    return "get_stored_matrix + np.full", count


def bare_eltwise(case: Case, operation: str) -> tuple[str, Callable[[], Any]]:
    name = operation.split()[0]
    float_type = _float_type(case.type_name)
    if case.kind == "dense":
        x = case.stored

        def significant_dense() -> Any:
            # Julia's result is sparse when any value became zero.
            import scipy.sparse as sp

            if x.dtype.kind == "u":
                return sp.csc_matrix(x)  # Every value is "high" (Julia's -high wraps around): the non-zeros stay.
            magnitude = np.abs(x)
            keep = (magnitude >= LOW) & (magnitude >= HIGH).any(axis=0)[np.newaxis, :]
            return sp.csc_matrix(np.where(keep, x, 0))

        functions = {
            "Abs": ("np.abs", lambda: np.abs(x)),
            "Round": ("np.rint + astype", lambda: np.rint(x).astype(np.int64 if x.dtype == np.float64 else np.int32))
            if x.dtype.kind == "f" else ("copy (Round of integers: identity)", lambda: x.copy(order="K")),
            "Clamp": ("np.clip", lambda: np.clip(x, 0, 5)),
            "Convert": ("astype", lambda: x.astype(TYPES[_other_type(case.type_name)])),
            "Fraction": ("x / x.sum(axis=0)", lambda: x / x.sum(axis=0)[np.newaxis, :]),
            "Log": ("np.log(x + 1)", lambda: np.log(x + float_type(EPS))),
            "Significant": ("csc_matrix(np.where(mask))", significant_dense),
        }
        return functions[name]
    import scipy.sparse as sp

    csc = case.csc
    data = csc.data
    counts = np.diff(csc.indptr)

    def with_data(values: np.ndarray) -> Any:
        return sp.csc_matrix((values, csc.indices, csc.indptr), shape=csc.shape, copy=False)

    def fraction_sparse() -> Any:
        sums = np.asarray(csc.sum(axis=0)).ravel()
        return with_data(data / np.repeat(sums, counts))

    def significant_sparse() -> Any:
        if data.dtype.kind == "u":
            return csc.copy()  # Every value is "high" (Julia's -high wraps around): the stored non-zeros stay.
        magnitude = np.abs(data)
        has_high = np.add.reduceat((magnitude >= HIGH).astype(np.int64), csc.indptr[:-1]) > 0
        keep = (magnitude >= LOW) & np.repeat(has_high, counts)
        # (A new matrix: ``eliminate_zeros`` compacts the index arrays in place.)
        result = sp.csc_matrix((np.where(keep, data, 0), csc.indices.copy(), csc.indptr.copy()), shape=csc.shape)
        result.eliminate_zeros()
        return result

    functions = {
        "Abs": ("np.abs(data)", lambda: with_data(np.abs(data))),
        "Round": ("np.rint(data) + astype", lambda: with_data(
            np.rint(data).astype(np.int64 if data.dtype == np.float64 else np.int32)))
        if data.dtype.kind == "f" else ("data.copy() (Round of integers: identity)", lambda: with_data(data.copy())),
        "Clamp": ("np.clip(data)", lambda: with_data(np.clip(data, 0, 5))),
        "Convert": ("data.astype", lambda: with_data(data.astype(TYPES[_other_type(case.type_name)]))),
        "Fraction": ("data / np.repeat(sums)", fraction_sparse),
        "Log": ("np.log(data + 1)", lambda: with_data(np.log(data + float_type(EPS)))),
        "Significant": ("where(mask) + eliminate_zeros", significant_sparse),
    }
    return functions[name]


def bare_grouped(case: Case) -> tuple[str, Callable[[], Any]]:
    groups = case.groups
    assert groups is not None
    if case.kind == "dense":
        import pandas as pd

        frame = pd.DataFrame(case.stored, copy=False)
        return "pandas groupby.mean", lambda: frame.groupby(groups).mean().to_numpy()
    import scipy.sparse as sp

    n_groups = int(groups.max()) + 1
    indicator = sp.csr_matrix((np.ones(groups.shape[0]), (groups, np.arange(groups.shape[0]))),
                              shape=(n_groups, groups.shape[0]))
    sizes = np.bincount(groups, minlength=n_groups).astype(np.float64)
    return "scipy indicator @ X / sizes", lambda: (indicator @ case.csc).toarray() / sizes[:, np.newaxis]


#: The row that measures what fetching a matrix again costs: every query after ``empty_cache`` pays it on the pages it
#: reads (the bare passes run on arrays fetched once). Not a query: left out of the summary.
TOUCH = "(fetched again, every page read)"


def touch_pages(stored: Any) -> int:
    """Read one value of each 4 KB page of the stored arrays (faulting in the pages of a map made afresh)."""
    arrays = (stored.colptr, stored.rowval, stored.nzval) if hasattr(stored, "colptr") else (stored,)
    total = 0
    for array in arrays:
        flat = array.ravel(order="K")  # (a view: the stored arrays are contiguous)
        total += int(flat[::max(1, 4096 // flat.dtype.itemsize)].astype(np.int64).sum())
    return total


def bare_stored(case: Case) -> tuple[str, Callable[[], Any]]:
    def fetch() -> Any:
        case.daf.empty_cache()
        return case.daf.get_stored_matrix(case.rows_axis, case.columns_axis, case.name, relayout=False)

    return "empty_cache; get_stored_matrix", fetch


def bare_fetch(case: Case) -> tuple[str, Callable[[], Any]]:
    name, fetch = bare_stored(case)
    if case.kind == "dense":
        return name, fetch
    import scipy.sparse as sp

    def fetch_scipy() -> Any:
        # The query returns scipy, whose indices are 0-based: from this file (Julia's 1-based indices), any scipy
        # reader must make them, a copy of the indices (one numpy call each, single-threaded).
        # (The arrays are attached after construction: given to the constructor, the mapped nzval would be copied.)
        stored = fetch()
        matrix = sp.csc_matrix(stored.shape, dtype=stored.nzval.dtype)
        matrix.data = stored.nzval
        matrix.indices = np.subtract(stored.rowval, 1, dtype=np.int32, casting="unsafe")
        matrix.indptr = np.subtract(stored.colptr, 1, dtype=np.int32, casting="unsafe")
        return matrix

    return "empty_cache; get_stored_matrix, 0-based indices", fetch_scipy


# pydaf.


def pydaf_operation(case: Case, query_suffix: str) -> Callable[[], Any]:
    """The operation called directly on the mapped stored matrix (no query, no fetch)."""
    from pydaf.queries import parse_query

    stored = case.stored
    if not query_suffix:
        return lambda: stored
    if query_suffix == TOUCH:
        return lambda: touch_pages(stored)
    if query_suffix == GROUPED:
        from pydaf.queries.operations import Mean

        groups, n_groups = case.groups, int(case.groups.max()) + 1
        return lambda: Mean().compute_grouped_matrix(stored, groups, n_groups, 0)
    parsed = parse_query(query_suffix)  # (one operation: itself, as Julia's parse_query returns)
    operation = parsed.operations[-1] if hasattr(parsed, "operations") else parsed
    if query_suffix.startswith("%"):
        return lambda: operation.compute_eltwise(stored)
    reduction = operation.reduction_operation
    axis = 0 if query_suffix.startswith(">-") else 1
    return lambda: reduction.compute_matrix(stored, axis)


def pydaf_query(case: Case, query: str, *, stored: bool = False) -> Callable[[], Any]:
    """The query after ``empty_cache``: ``get_np_query`` (a sparse result as a 0-based scipy matrix), or with
    ``stored`` ``get_stored_query`` (as Julia's 1-based ``SparseMatrixCSC``, sharing the stored indices)."""
    daf = case.daf
    get = daf.get_stored_query if stored else daf.get_np_query

    def run() -> Any:
        daf.empty_cache()
        if query.endswith(TOUCH):
            return touch_pages(daf.get_stored_matrix(case.rows_axis, case.columns_axis, case.name, relayout=False))
        return get(query, cache=False)

    return run


# Checking.


def _as_scipy(result: Any) -> Any:
    """A sparse result as a scipy matrix (``None`` for a dense one)."""
    if hasattr(result, "colptr"):
        return result.to_scipy()
    return result if hasattr(result, "tocsc") else None


def check(case: Case, query_suffix: str, result: Any, expected: Any) -> bool:
    """Whether a pydaf result has the values of the bare pass's (a sparse one is never densified: 30 M entries would
    be 4.8 GB dense)."""
    if query_suffix.endswith("Mode"):
        return _check_mode(case, query_suffix, np.asarray(result))
    rtol = 1e-4 if case.type_name == "Float32" or getattr(result, "dtype", None) == np.float32 else 1e-7
    actual, wanted = _as_scipy(result), _as_scipy(expected)
    if actual is not None or wanted is not None:
        if actual is None or wanted is None or actual.shape != wanted.shape:
            return False
        actual, wanted = actual.astype(np.float64).tocsc(), wanted.astype(np.float64).tocsc()
        difference = abs(actual - wanted)
        scale = abs(wanted).max() if wanted.nnz else 0.0
        return bool(difference.nnz == 0 or difference.max() <= 1e-6 + rtol * scale)
    actual, wanted = np.asarray(result, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    return actual.shape == wanted.shape and bool(np.allclose(actual, wanted, rtol=rtol, atol=1e-6, equal_nan=True))


def _check_mode(case: Case, query_suffix: str, modes: np.ndarray) -> bool:
    """Each mode occurs as often as the most frequent value of its column (or row)."""
    axis = 0 if query_suffix.startswith(">-") else 1
    if case.kind == "dense":
        values = case.stored if axis == 0 else case.stored.T
        chosen = (values == modes[np.newaxis, :]).sum(axis=0)
        best = np.array([np.unique(values[:, index], return_counts=True)[1].max()
                         for index in range(values.shape[1])])
        return bool(np.array_equal(chosen, best))
    compressed = case.csc if axis == 0 else case.csr
    n = compressed.shape[axis]
    counts = np.diff(compressed.indptr)
    for index in range(counts.shape[0]):
        values = compressed.data[compressed.indptr[index]:compressed.indptr[index + 1]]
        frequencies = np.unique(values, return_counts=True)[1]
        best = max(int(frequencies.max()) if frequencies.shape[0] else 0, n - values.shape[0])
        chosen = n - values.shape[0] if modes[index] == 0 else int((values == modes[index]).sum())
        if chosen != best:
            return False
    return True


# The table.


@dataclass
class Row:
    kind: str
    type_name: str
    query: str
    bare_name: str
    pydaf_query: Timing
    operation: Timing
    bare: Timing
    ok: bool
    megabytes: float


def rows_to_run(case: Case, *, stored: bool = False) -> list[tuple[str, Callable[[], tuple[str, Callable[[], Any]]]]]:
    """The rows of a case: the query suffix and what makes its bare pass (with ``stored``, the fetch returns the
    stored form, so its bare pass makes no 0-based indices either)."""
    rows: list[tuple[str, Callable[[], tuple[str, Callable[[], Any]]]]] = [
        ("", lambda: bare_stored(case) if stored else bare_fetch(case)), (TOUCH, lambda: bare_stored(case))]
    for reduction in REDUCTIONS:
        for direction, axis in ((">-", 0), (">|", 1)):
            rows.append((f"{direction} {reduction}",
                         lambda reduction=reduction, axis=axis: bare_reduction(case, reduction, axis)))
    for operation in ELTWISE:
        text = operation.format(other=_other_type(case.type_name))
        rows.append((f"% {text}", lambda text=text: bare_eltwise(case, text)))
    rows.append((GROUPED, lambda: bare_grouped(case)))
    return rows


def check_results(case: Case, query_suffix: str, results: list[Any]) -> bool:
    """:func:`check` of the results of the bare pass, the query and the operation (in this order)."""
    return check(case, query_suffix, results[1], results[0])


def run(cases: list[Case], repeats: int, only: str | None, *, quiet: bool = False, stored: bool = False) -> list[Row]:
    pattern = re.compile(only) if only else None
    rows = []
    for case in cases:
        for suffix, make_bare in rows_to_run(case, stored=stored):
            label = f"{case.kind} {case.type_name} {suffix or 'fetch'}"
            if pattern is not None and not pattern.search(label):
                continue
            query = f"{case.prefix} {suffix}".strip()
            bare_name, bare = make_bare()
            (bare_timing, query_timing, operation_timing), ok = measure_together(
                [bare, pydaf_query(case, query, stored=stored), pydaf_operation(case, suffix)], repeats,
                None if suffix in ("", TOUCH) else functools.partial(check_results, case, suffix))
            row = Row(case.kind, case.type_name, suffix or "fetch", bare_name, query_timing, operation_timing,
                      bare_timing, ok, case.nbytes / 1e6)
            rows.append(row)
            if not quiet:
                print(format_row(row), flush=True)
    return rows


HEADER = (f"{'kind':<6} {'type':<7} {'query':<28} {'MB':>4} {'query ms':>15} {'op ms':>15} {'bare ms':>15} "
          f"{'q/bare':>6} {'op/bare':>7} {'cpu':>4} {'ok':>3}  bare")


def _ms(timing: Timing) -> str:
    return f"{timing.best * 1e3:7.1f}/{timing.median * 1e3:<7.1f}"


def format_row(row: Row) -> str:
    return (f"{row.kind:<6} {row.type_name:<7} {row.query:<28} {row.megabytes:4.0f} {_ms(row.pydaf_query)} "
            f"{_ms(row.operation)} {_ms(row.bare)} {row.pydaf_query.best / row.bare.best:6.2f} "
            f"{row.operation.best / row.bare.best:7.2f} {row.pydaf_query.cpu:4.1f} {'yes' if row.ok else 'NO':>3}  "
            f"{row.bare_name}")


#: The targets of the table: a query within this ratio of its bare pass, an operation at most at this one.
QUERY_TARGET, OPERATION_TARGET = 1.5, 1.0


def summary(rows: list[Row]) -> list[str]:
    """How many queries and operations meet their targets, the median ratio, and the rows that miss (the ``TOUCH``
    row is not a query; ``fetch`` and ``Count`` have no operation)."""
    queries = [row for row in rows if row.query != TOUCH]
    operations = [row for row in queries if row.query != "fetch" and not row.query.endswith("Count")]

    def ratio(timing: Timing, row: Row) -> float:
        return timing.best / row.bare.best

    slow_queries = [row for row in queries if ratio(row.pydaf_query, row) > QUERY_TARGET]
    slow_operations = [row for row in operations if ratio(row.operation, row) > OPERATION_TARGET]
    lines = [f"queries <= {QUERY_TARGET}x bare: {len(queries) - len(slow_queries)} / {len(queries)}; operations <= "
             f"{OPERATION_TARGET}x bare: {len(operations) - len(slow_operations)} / {len(operations)}; median "
             f"query / bare: {statistics.median(ratio(row.pydaf_query, row) for row in queries):.2f}"
             if queries else "no rows"]
    lines += [f"  query above {QUERY_TARGET}x: {row.kind} {row.type_name} {row.query} "
              f"({ratio(row.pydaf_query, row):.2f}x)" for row in slow_queries]
    lines += [f"  operation above {OPERATION_TARGET}x: {row.kind} {row.type_name} {row.query} "
              f"({ratio(row.operation, row):.2f}x)" for row in slow_operations]
    return lines


def parallel_speedups() -> tuple[float, float]:
    """How much faster two threads finish twice the work of one, for a compute-bound numba loop and for numpy
    streaming 2 x 80 MB from memory: ~2.0 and ~1.5-2 on an idle 2-core machine; near 1.0 when other processes hold
    a core (then no kernel can gain from the second thread, and the ratios of this table show single-core speed)."""
    from concurrent.futures import ThreadPoolExecutor

    import numba

    @numba.njit(nogil=True)
    def compute(n: int) -> float:  # pragma: no cover - jit
        total = 0.0
        for index in range(n):
            total += np.sqrt(np.float64(index))
        return total

    arrays = [np.ones(10_000_000), np.ones(10_000_000)]
    compute(10)
    with ThreadPoolExecutor(2) as pool:
        def best_of(function: Callable[[], Any]) -> float:
            return min(measure(function, 2).best for _ in range(2))

        one = best_of(lambda: (compute(20_000_000), compute(20_000_000)))
        two = best_of(lambda: list(pool.map(compute, [20_000_000, 20_000_000])))
        one_stream = best_of(lambda: [array.sum() for array in arrays])
        two_stream = best_of(lambda: list(pool.map(np.sum, arrays)))
    return one / two, one_stream / two_stream


def load_average() -> str:
    try:
        return " ".join(f"{value:.1f}" for value in os.getloadavg())
    except OSError:  # pragma: no cover
        return "?"


@recording_main(__file__)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--directory", default=DEFAULT_DIRECTORY, help=f"where the files are (default: "
                                                                       f"{DEFAULT_DIRECTORY})")
    parser.add_argument("--dense-cells", type=int, default=Sizes.dense_cells)
    parser.add_argument("--dense-megabytes", type=float, default=Sizes.dense_megabytes,
                        help="the size of each dense matrix")
    parser.add_argument("--sparse-cells", type=int, default=Sizes.sparse_cells)
    parser.add_argument("--sparse-genes", type=int, default=Sizes.sparse_genes)
    parser.add_argument("--types", default=",".join(TYPES), help="comma-separated element types")
    parser.add_argument("--repeats", type=int, default=5, help="timed runs after the warm-up run")
    parser.add_argument("--only", help="run only the rows whose 'kind type query' matches this regex")
    parser.add_argument("--quiet", action="store_true", help="print only the final table")
    parser.add_argument("--stored", action="store_true",
                        help="queries by get_stored_query (a sparse result in Julia's 1-based form, sharing the stored "
                             "indices) instead of get_np_query (a 0-based scipy matrix)")
    arguments = parser.parse_args(argv)

    sizes = Sizes(arguments.dense_cells, arguments.dense_megabytes, arguments.sparse_cells, arguments.sparse_genes)
    dense_path, sparse_path = ensure_files(arguments.directory, sizes, quiet=arguments.quiet)
    import numba

    types = [name for name in arguments.types.split(",") if name]
    compute_speedup, stream_speedup = parallel_speedups()
    print(f"load average before: {load_average()}; {os.cpu_count()} cores; {numba.config.NUMBA_NUM_THREADS} numba "
          f"threads; 2 threads vs 1: {compute_speedup:.2f}x (compute), {stream_speedup:.2f}x (memory); best/median of "
          f"{arguments.repeats} runs after a warm-up run; times in ms")
    if not arguments.quiet:
        print(HEADER)
    rows = run(load_cases(dense_path, sparse_path, types), arguments.repeats, arguments.only, quiet=arguments.quiet,
               stored=arguments.stored)
    if arguments.quiet:
        print(HEADER)
        for row in rows:
            print(format_row(row))
    for line in summary(rows):
        print(line)
    compute_speedup, stream_speedup = parallel_speedups()
    print(f"load average after: {load_average()}; 2 threads vs 1: {compute_speedup:.2f}x (compute), "
          f"{stream_speedup:.2f}x (memory)")
    return 0 if all(row.ok for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
