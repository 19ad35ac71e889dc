"""Benchmark: pydaf's queries and reduction kernels on a large mapped sparse matrix, against scipy in memory.

The script first writes (once; reused when ``--path`` already holds a file of the requested size) an H5df file with a
sparse ``UInt16`` ``UMIs`` matrix of ``cell`` x ``gene`` (default 1,000,000 x 2,000, ~10% non-zeros, ``UInt32``
indices: ~2.4 GB on disk for both layouts), a ``type`` vector on cells with 10 categories and an ``organism`` scalar.
The matrix is written straight into the file's maps (``empty_sparse_matrix``), then its other layout is written by
``relayout_matrix``.

It then prints one table, a row per reduction:

``>| Sum``
    one sum per cell (``@ cell @ gene :: UMIs >| Sum``);
``>- Sum``
    one sum per gene (``@ cell @ gene :: UMIs >- Sum``);
``-/ type >- Mean``
    the mean of each gene in each cell type (``@ cell @ gene :: UMIs -/ type >- Mean``);

with the time of the pydaf query on an open data set (``get_query(query, cache=False)``: mapped, computed every time;
the axis entry names were read once, when first used, as in any session), of the same query on a fresh read-only open
of the file (``H5df(path, "r")[query]``, which includes reading the 1M cell names from the file), of the pydaf kernel
called directly on the mapped ``get_stored_matrix`` (``pydaf.kernels.reduce_rows`` etc.), and of scipy on the same
matrix read into memory (``csc.sum(axis=1)``, ``csc.sum(axis=0)``, and an indicator-matrix product for the grouped
means), the scipy/pydaf time ratios, and the CPU utilisation (process CPU time / wall time; 2.0 means both cores of a
2-core machine were busy). Times are the best of ``--repeats`` runs after one warm-up run (which loads or compiles the
numba kernels); the page cache is warm (the file was just written or read). Every result is checked against scipy
with ``np.allclose``. A last line gives the per-query overhead of tiny queries (``. organism`` and ``@ cell : type``
on a 3-cell in-memory data set) in microseconds, computed (``cache=False``, as ``daf[query]`` does) and from the
query cache (``get_query(query)``).

``--kernels-only`` skips the query engine (the kernel and scipy columns only).

Examples::

    python benchmarks/bench_queries.py                            # 1M x 2000, built once, reused after
    python benchmarks/bench_queries.py --cells 20000 --genes 500  # quick smoke run (small file)
    python benchmarks/bench_queries.py --path /data/big.h5df --repeats 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from recording import OUTPUT_HELP, recording_main

DEFAULT_PATH = "/tmp/pydaf_bench_queries.h5df"
N_TYPES = 10
DENSITY = 0.1
GB = 1e9

QUERIES = {
    ">| Sum": "@ cell @ gene :: UMIs >| Sum",
    ">- Sum": "@ cell @ gene :: UMIs >- Sum",
    "-/ type >- Mean": "@ cell @ gene :: UMIs -/ type >- Mean",
}


# Building the file.


def _existing_shape(path: str) -> tuple[int, int] | None:
    """The (cells, genes) of the benchmark data in ``path``, or ``None`` if it is not a usable benchmark file."""
    import pydaf

    if not os.path.exists(path):
        return None
    try:
        daf = pydaf.H5df(path, "r")
        if not (daf.has_matrix("gene", "cell", "UMIs", relayout=False) and daf.has_vector("cell", "type")
                and daf.has_scalar("organism")):
            return None
        return daf.axis_length("cell"), daf.axis_length("gene")
    except Exception:  # Any unreadable file is simply rebuilt.
        return None


def build(path: str, n_cells: int, n_genes: int, seed: int = 123, *, quiet: bool = False) -> None:
    """Write the benchmark H5df: ~10% of each gene's cells have UMIs, written gene by gene into the mapped file."""
    import pydaf

    expected_bytes = 2 * n_cells * n_genes * DENSITY * 6
    directory = os.path.dirname(os.path.abspath(path))
    if shutil.disk_usage(directory).free < expected_bytes * 1.2 + 1e8:
        sys.exit(f"not enough free disk space at {directory} for ~{expected_bytes / GB:.1f} GB")
    started = time.perf_counter()
    if os.path.exists(path):
        os.remove(path)
    daf = pydaf.H5df(path, "w", name="bench!")
    daf.set_scalar("organism", "synthetic")
    daf.add_axis("cell", np.array([f"C{index:07d}" for index in range(n_cells)], dtype=object))
    daf.add_axis("gene", np.array([f"G{index:05d}" for index in range(n_genes)], dtype=object))
    generator = np.random.default_rng(seed)
    types = generator.integers(0, N_TYPES, n_cells)
    daf.set_vector("cell", "type", np.array([f"T{index}" for index in range(N_TYPES)], dtype=object)[types])
    # Each gene's cells: a Bernoulli(DENSITY) mask drawn as bytes (fast), kept as sorted 1-based rows until the total
    # nnz is known and the file's buffers can be allocated.
    threshold = round(DENSITY * 256)
    rows_of_genes = []
    for _gene in range(n_genes):
        mask = generator.integers(0, 256, n_cells, dtype=np.uint8) < threshold
        rows_of_genes.append((np.flatnonzero(mask) + 1).astype(np.uint32))
    nnz = sum(rows.shape[0] for rows in rows_of_genes)
    with daf.empty_sparse_matrix("cell", "gene", "UMIs", "UInt16", nnz, "UInt32") as (colptr, rowval, nzval):
        colptr[0] = 1
        position = 0
        for gene, rows in enumerate(rows_of_genes):
            rowval[position:position + rows.shape[0]] = rows
            position += rows.shape[0]
            colptr[gene + 1] = position + 1
        rows_of_genes.clear()
        block = 1 << 24
        for first in range(0, nnz, block):
            count = min(block, nnz - first)
            nzval[first:first + count] = np.minimum(generator.geometric(0.3, count), 65535)
        del colptr, rowval, nzval
    daf.relayout_matrix("cell", "gene", "UMIs")
    daf.flush()
    del daf
    if not quiet:
        print(f"wrote {path}: {n_cells:,} cells x {n_genes:,} genes, {nnz:,} UInt16 UMIs (both layouts), "
              f"{os.path.getsize(path) / GB:.2f} GB, in {time.perf_counter() - started:.1f} s")


# Measuring.


class Timing:
    """The best wall time of a function over repeated runs, with the CPU utilisation of that run."""

    def __init__(self, function: Callable[[], Any], repeats: int) -> None:
        self.result = function()  # The warm-up run: loads (or compiles) the kernels, touches the pages.
        self.first = None
        self.seconds = float("inf")
        self.utilisation = 0.0
        for _ in range(repeats):
            cpu = time.process_time()
            wall = time.perf_counter()
            self.result = function()
            wall = time.perf_counter() - wall
            cpu = time.process_time() - cpu
            if wall < self.seconds:
                self.seconds = wall
                self.utilisation = cpu / wall if wall > 0 else 0.0


def _values(result: Any) -> np.ndarray:
    """A query result (pandas) or a kernel result (numpy) as a float64 numpy array."""
    values = result.to_numpy() if hasattr(result, "to_numpy") else np.asarray(result)
    if hasattr(values, "toarray"):
        values = values.toarray()
    return np.asarray(values, dtype=np.float64)


def run(path: str, repeats: int, *, kernels_only: bool = False, quiet: bool = False) -> dict[str, dict[str, Any]]:
    """Measure every reduction; return ``{name: {"query": Timing | None, "kernel": Timing, "scipy": Timing}}``."""
    import scipy.sparse as sp

    import pydaf
    from pydaf.kernels import reduce_columns, reduce_grouped_rows, reduce_rows

    # scipy: the same matrix read into memory (0-based copies of the indices, as scipy needs them).
    reader = pydaf.H5df(path, "r")
    stored = reader.get_stored_matrix("cell", "gene", "UMIs")
    csc = sp.csc_matrix((np.array(stored.nzval), np.array(stored.rowval) - 1, np.array(stored.colptr) - 1),
                        shape=stored.shape)
    type_values, type_groups = np.unique(np.asarray(reader.get_vector("cell", "type"), dtype=str), return_inverse=True)
    type_groups = type_groups.astype(np.int64)
    n_types = type_values.shape[0]
    indicator = sp.csr_matrix((np.ones(csc.shape[0]), (type_groups, np.arange(csc.shape[0]))),
                              shape=(n_types, csc.shape[0]))
    type_sizes = np.bincount(type_groups, minlength=n_types).astype(np.float64)
    del reader, stored

    # The kernels run on the mapped stored matrix of one open (the query column pays for a fresh open every time).
    matrix = pydaf.H5df(path, "r").get_stored_matrix("cell", "gene", "UMIs")

    def kernel(name: str) -> Callable[[], Any]:
        def call() -> Any:
            if name == ">| Sum":
                return reduce_rows(matrix, "sum")
            if name == ">- Sum":
                return reduce_columns(matrix, "sum")
            return reduce_grouped_rows(matrix, "mean", type_groups, n_types)

        return call

    # The query on an open data set (its axis entries were read once, as in any session), computed every time.
    opened = pydaf.H5df(path, "r")

    def query(name: str) -> Callable[[], Any]:
        return lambda: opened.get_query(QUERIES[name], cache=False)

    def fresh(name: str) -> Callable[[], Any]:
        return lambda: pydaf.H5df(path, "r")[QUERIES[name]]

    scipy_functions = {
        ">| Sum": lambda: np.asarray(csc.sum(axis=1, dtype=np.uint64)).ravel(),
        ">- Sum": lambda: np.asarray(csc.sum(axis=0, dtype=np.uint64)).ravel(),
        "-/ type >- Mean": lambda: (indicator @ csc).toarray() / type_sizes[:, np.newaxis],
    }
    results: dict[str, dict[str, Any]] = {}
    for name in QUERIES:
        results[name] = {
            "query": None if kernels_only else Timing(query(name), repeats),
            "fresh": None if kernels_only else Timing(fresh(name), repeats),
            "kernel": Timing(kernel(name), repeats),
            "scipy": Timing(scipy_functions[name], repeats),
        }
        expected = _values(results[name]["scipy"].result)
        for kind in ("query", "fresh", "kernel"):
            timing = results[name][kind]
            if timing is not None:
                timing.equal = bool(np.allclose(_values(timing.result), expected))
    return results


def tiny_query_overhead(repeats: int = 2000) -> dict[str, float]:
    """Microseconds per ``daf[query]`` of tiny queries on a 3-cell in-memory data set."""
    import pydaf

    daf = pydaf.MemoryDaf(name="tiny!")
    daf.set_scalar("organism", "human")
    daf.add_axis("cell", ["A", "B", "C"])
    daf.set_vector("cell", "type", np.array(["T1", "T2", "T1"], dtype=object))
    overheads = {}
    for text in (". organism", "@ cell : type"):
        functions = {"computed": lambda text=text: daf.get_query(text, cache=False),
                     "cached": lambda text=text: daf.get_query(text)}
        for label, function in functions.items():
            function()
            started = time.perf_counter()
            for _ in range(repeats):
                function()
            overheads[f"{text!r} {label}"] = (time.perf_counter() - started) / repeats * 1e6
    return overheads


def report(results: dict[str, dict[str, Any]], overheads: dict[str, float] | None) -> str:
    lines = [f"{'reduction':<17} {'query s':>9} {'fresh s':>9} {'kernel s':>9} {'scipy s':>9} {'scipy/query':>11} "
             f"{'scipy/kernel':>12} {'CPU query':>9} {'CPU kernel':>10} {'CPU scipy':>9}  equal"]
    for name, timings in results.items():
        query, fresh, kernel, scipy = timings["query"], timings["fresh"], timings["kernel"], timings["scipy"]
        query_seconds = f"{query.seconds:9.3f}" if query else f"{'-':>9}"
        fresh_seconds = f"{fresh.seconds:9.3f}" if fresh else f"{'-':>9}"
        query_ratio = f"{scipy.seconds / query.seconds:10.1f}x" if query else f"{'-':>11}"
        query_cpu = f"{query.utilisation:9.2f}" if query else f"{'-':>9}"
        equal = all(timing.equal for timing in (query, fresh, kernel) if timing is not None)
        lines.append(f"{name:<17} {query_seconds} {fresh_seconds} {kernel.seconds:9.3f} {scipy.seconds:9.3f} "
                     f"{query_ratio} {scipy.seconds / kernel.seconds:11.1f}x {query_cpu} {kernel.utilisation:10.2f} "
                     f"{scipy.utilisation:9.2f}  {'yes' if equal else 'NO'}")
    if overheads:
        lines.append("tiny query overhead: " + ", ".join(f"{text} {microseconds:.0f} us"
                                                         for text, microseconds in overheads.items()))
    return "\n".join(lines)


@recording_main(__file__)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--path", default=DEFAULT_PATH, help=f"the H5df file (default: {DEFAULT_PATH})")
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--genes", type=int, default=2_000)
    parser.add_argument("--repeats", type=int, default=3, help="timed runs after the warm-up run (best is shown)")
    parser.add_argument("--rebuild", action="store_true", help="write the file even if it exists")
    parser.add_argument("--kernels-only", action="store_true", help="skip the query engine")
    parser.add_argument("--quiet", action="store_true")
    arguments = parser.parse_args(argv)

    if arguments.rebuild or _existing_shape(arguments.path) != (arguments.cells, arguments.genes):
        build(arguments.path, arguments.cells, arguments.genes, quiet=arguments.quiet)
    elif not arguments.quiet:
        print(f"reusing {arguments.path} ({os.path.getsize(arguments.path) / GB:.2f} GB)")
    try:
        import numba

        threads = numba.get_num_threads()
    except ImportError:  # pragma: no cover
        threads = 1
    if not arguments.quiet:
        print(f"{arguments.cells:,} cells x {arguments.genes:,} genes; {threads} numba threads; "
              f"best of {arguments.repeats} after a warm-up run")
    results = run(arguments.path, arguments.repeats, kernels_only=arguments.kernels_only, quiet=arguments.quiet)
    overheads = None if arguments.kernels_only else tiny_query_overhead()
    print(report(results, overheads))
    all_equal = all(timing.equal for timings in results.values() for timing in timings.values()
                    if timing is not None and timing is not timings["scipy"])
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())
