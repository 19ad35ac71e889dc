"""Benchmark: converting a large sparse ``.h5ad`` (written by anndata) to H5df, against ``anndata.read_h5ad``.

The script first writes (once; reused when ``--path`` already holds a file of the requested shape) an ``.h5ad`` with
the real anndata package: a CSR ``X`` of ``--cells`` x ``--genes`` (default 100,000 x 20,000) with ``--density``
(default 5%) non-zeros, ``float64`` values and ``int32`` indices (~1.2 GB), a categorical ``type`` and an integer
``age`` per cell, and an ``organism`` scalar in ``uns``.

Then each operation runs in its own fresh process (so its peak RSS, ``VmHWM``, is its own), after ``sync`` and a
read of the whole file (warm page cache, no writeback of an earlier run in the way), ``--repeats`` times, the
operations interleaved. Each output is deleted after its run, then the disk is left to settle for 10 s: kept outputs
fill the page cache (so later runs pay for reclaiming memory), and deleting gigabytes on a disk mounted with
``discard`` (as on this VM) stalls new writes for seconds, which would be charged to the next run:

``read_h5ad``
    ``anndata.read_h5ad(path)`` (X is read into memory; the baseline);
``convert``
    ``pydaf.interop.h5ad_as_daf(path, "x.h5df")``: X streamed into the file as ``var x obs`` (the CSR arrays are that
    layout; Julia's Daf converts the same way);
``convert --relayout``
    the same, then also the ``obs x var`` layout, written by the parallel numba transpose (``relayout=True``).

Each process's time includes its Python imports. The table shows the best and the median time with their ratios to
``read_h5ad``'s (the verdict uses the best times; this shared VM's timings vary up to 3-fold run to run), the
peak RSS (max over runs), its ratio to the size of X in memory (data + indices + indptr), and whether the targets
hold (time ≤ 1.5 x read_h5ad, RSS ≤ 1.5 x X). The converted file is checked once against the h5ad (nnz, per-cell and
per-gene sums from both layouts, a few rows): ``equal: yes`` (the exit code is 1 otherwise).

With ``--limits``, the script also measures, in one fresh process, what the machine needs for the parts of a
relayout conversion (best of ``--repeats``): reading X's three arrays with h5py into new memory (the core of
``read_h5ad``), giving an X-sized file its pages (``fallocate``, a shared map, ``MADV_POPULATE_WRITE``: what writing
any X-sized output into a file costs before a byte of it is computed), the bare numba transpose of the same arrays
in memory (pydaf's relayout kernels into already-populated memory), and a plain copy of X's bytes (the memory
bandwidth). ``convert`` plus the file pages and the bare transpose of the second layout is the least a relayout
conversion into a file can take; the table shows that floor against ``read_h5ad``.

Examples::

    python benchmarks/bench_h5ad_convert.py                                     # 100k x 20k, built once
    python benchmarks/bench_h5ad_convert.py --limits                            # and the machine's floor
    python benchmarks/bench_h5ad_convert.py --cells 5000 --genes 1000 --path /tmp/small.h5ad   # quick run
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import numpy as np
from recording import OUTPUT_HELP, recording_main

DEFAULT_PATH = "/tmp/pydaf_bench_convert.h5ad"
GB = 1e9
TIME_TARGET = RSS_TARGET = 1.5

CHILD = """
import json, resource, sys, time
started = time.perf_counter()
operation, path, destination = sys.argv[1:4]
if operation == "read_h5ad":
    import anndata
    adata = anndata.read_h5ad(path)
    assert adata.X.nnz >= 0
else:
    from pydaf.interop import h5ad_as_daf
    h5ad_as_daf(path, destination, progress=False, relayout=operation == "convert-relayout")
seconds = time.perf_counter() - started
try:  # this process's own peak (ru_maxrss can carry the peak of the process that started it)
    with open("/proc/self/status") as status:
        rss = next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmHWM:"))
except (OSError, StopIteration):
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "rss": rss}))
"""

OPERATIONS = ("read_h5ad", "convert", "convert --relayout")

LIMITS_CHILD = """
import json, mmap, os, sys, time
import h5py, numpy as np
from pydaf._os.maps import populate_pages
from pydaf.kernels import relayout
from pydaf.sparse import SparseMatrixCSC
path, scratch, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = {}
def timed(label, action):
    started = time.perf_counter()
    result = action()
    runs.setdefault(label, []).append(time.perf_counter() - started)
    return result
def read():
    with h5py.File(path, "r") as file:
        return [file["X"][name][()] for name in ("data", "indices", "indptr")]
def file_pages(nbytes):
    descriptor = os.open(scratch, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.posix_fallocate(descriptor, 0, nbytes)
        mapped = mmap.mmap(descriptor, nbytes, mmap.MAP_SHARED)
        populate_pages(np.frombuffer(mapped, dtype=np.uint8))
        mapped.close()
    finally:
        os.close(descriptor)
        os.remove(scratch)
for _ in range(repeats):
    data, indices, indptr = timed("read X with h5py into new memory", read)
    with h5py.File(path, "r") as file:
        n_cells, n_genes = (int(size) for size in file["X"].attrs["shape"])
    matrix = SparseMatrixCSC((n_genes, n_cells), (indptr + 1).astype(np.uint32), (indices + 1).astype(np.uint32), data)
    nbytes = data.nbytes + indices.nbytes + indptr.nbytes
    timed("populate an X-sized file map", lambda: file_pages(nbytes))
    outputs = (np.empty(n_genes + 1, np.uint32), np.ones(matrix.nnz, np.uint32), np.ones(matrix.nnz, data.dtype))
    arrays = (matrix.shape, matrix.colptr, matrix.rowval, matrix.nzval)
    relayout.transpose_csc_into(*arrays, *outputs)  # (compiles or loads the kernels)
    timed("bare numba transpose (populated memory)", lambda: relayout.transpose_csc_into(*arrays, *outputs))
    copies = (np.ones_like(data), np.ones_like(indices))
    timed("copy X's bytes (memory bandwidth)", lambda: (np.copyto(copies[0], data), np.copyto(copies[1], indices)))
    del data, indices, indptr, matrix, outputs, copies
print(json.dumps(runs))
"""


def _shape(path: str) -> tuple[int, int] | None:
    import h5py

    if not os.path.exists(path):
        return None
    with h5py.File(path, "r") as file:
        return tuple(int(size) for size in file["X"].attrs["shape"])  # type: ignore[return-value]


def build(path: str, n_cells: int, n_genes: int, density: float, seed: int = 7, *, quiet: bool = False) -> None:
    """Write the h5ad with anndata (X generated block by block, sorted unique indices per row)."""
    import anndata
    import pandas as pd
    import scipy.sparse as sp

    started = time.perf_counter()
    generator = np.random.default_rng(seed)
    indptr = np.zeros(n_cells + 1, dtype=np.int64)
    index_blocks, value_blocks = [], []
    block = max(1, (1 << 24) // n_genes)
    for start in range(0, n_cells, block):
        stop = min(start + block, n_cells)
        rows, columns = np.nonzero(generator.random((stop - start, n_genes), dtype=np.float32) < density)
        indptr[start + 1:stop + 1] = np.bincount(rows, minlength=stop - start)
        index_blocks.append(columns.astype(np.int32))
        value_blocks.append(np.floor(generator.exponential(3.0, columns.shape[0])) + 1.0)
    np.cumsum(indptr, out=indptr)
    indices = np.concatenate(index_blocks)
    del index_blocks
    values = np.concatenate(value_blocks)
    del value_blocks
    index_type = np.int32 if indptr[-1] < np.iinfo(np.int32).max else np.int64
    X = sp.csr_matrix((values, indices, indptr.astype(index_type)), shape=(n_cells, n_genes))
    obs = pd.DataFrame({"type": pd.Categorical(generator.choice([f"T{index}" for index in range(10)], n_cells)),
                        "age": generator.integers(20, 90, n_cells).astype(np.int32)},
                       index=[f"cell{index:07d}" for index in range(n_cells)])
    var = pd.DataFrame(index=[f"gene{index:05d}" for index in range(n_genes)])
    anndata.AnnData(X=X, obs=obs, var=var, uns={"organism": "synthetic"}).write_h5ad(path)
    if not quiet:
        print(f"wrote {path}: {n_cells:,} cells x {n_genes:,} genes, {X.nnz:,} Float64 non-zeros, "
              f"{os.path.getsize(path) / GB:.2f} GB, in {time.perf_counter() - started:.1f} s")


def _x_bytes(path: str) -> int:
    import h5py

    with h5py.File(path, "r") as file:
        return sum(file["X"][name].size * file["X"][name].dtype.itemsize for name in ("data", "indices", "indptr"))


def _warm(path: str) -> None:
    if hasattr(os, "sync"):
        os.sync()
    with open(path, "rb") as handle:
        while handle.read(1 << 24):
            pass


def _remove(paths: list[str], settle: float) -> None:
    """Delete earlier outputs, then let the file system settle: on a disk mounted with ``discard`` (as on this VM),
    freeing gigabytes stalls new writes for seconds, which would be charged to the next measured run."""
    for path in paths:
        if os.path.exists(path):
            os.remove(path)
    if hasattr(os, "sync"):
        os.sync()
    time.sleep(settle)


def measure(operation: str, path: str, destination: str) -> dict[str, float]:
    """Run one operation in a fresh process (writing to a new ``destination``); its wall time (imports included)
    and peak RSS in bytes."""
    _warm(path)
    name = operation.replace(" --", "-")
    output = subprocess.run([sys.executable, "-c", CHILD, name, path, destination], check=True,
                            capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def verify(path: str, destination: str) -> bool:
    """The converted matrix against the h5ad, read in slices: nnz, per-cell and per-gene sums, a few cells."""
    import h5py

    import pydaf
    from pydaf.kernels import reduce_columns

    daf = pydaf.H5df(destination, "r")
    cells_by_genes = daf.get_stored_matrix("obs", "var", "X", relayout=False)
    genes_by_cells = daf.get_stored_matrix("var", "obs", "X", relayout=False)
    with h5py.File(path, "r") as file:
        group = file["X"]
        indptr = group["indptr"][()].astype(np.int64)
        n_cells, n_genes = (int(size) for size in group.attrs["shape"])
        cell_sums = np.zeros(n_cells)
        gene_sums = np.zeros(n_genes)
        step = 1 << 23
        for start in range(0, int(indptr[-1]), step):
            stop = min(start + step, int(indptr[-1]))
            data, indices = group["data"][start:stop], group["indices"][start:stop]
            gene_sums += np.bincount(indices, weights=data, minlength=n_genes)
            rows = np.searchsorted(indptr, np.arange(start, stop), side="right") - 1
            cell_sums += np.bincount(rows, weights=data, minlength=n_cells)
        equal = cells_by_genes.nnz == genes_by_cells.nnz == int(indptr[-1])
        equal &= np.allclose(reduce_columns(genes_by_cells, "sum"), cell_sums)
        equal &= np.allclose(reduce_columns(cells_by_genes, "sum"), gene_sums)
        for cell in (0, n_cells // 2, n_cells - 1):
            row = np.zeros(n_genes)
            row[group["indices"][indptr[cell]:indptr[cell + 1]]] = group["data"][indptr[cell]:indptr[cell + 1]]
            column = genes_by_cells.to_scipy()[:, cell].toarray().ravel()
            equal &= np.array_equal(row, column)
    return bool(equal)


def limits(path: str, repeats: int) -> dict[str, list[float]]:
    """The machine's costs of the parts of a relayout conversion (see the module docstring), every run of
    ``repeats``, measured in one fresh process."""
    _warm(path)
    scratch = os.path.splitext(path)[0] + ".limits.tmp"
    output = subprocess.run([sys.executable, "-c", LIMITS_CHILD, path, scratch, str(repeats)], check=True,
                            capture_output=True, text=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def report_limits(measured: dict[str, list[float]], results: dict[str, dict[str, float]]) -> str:
    """The best and the first run of each limit (the first touches memory the machine has not handed out lately:
    on a VM that reports free pages to its host, that is the case of a real conversion), and the floor of a relayout
    conversion from the best (so optimistic) figures."""
    baseline = results["read_h5ad"]["seconds"]
    lines = [f"{'machine limit':<45} {'best s':>7} {'/ read':>7} {'first s':>8}"]
    best = {label: min(seconds) for label, seconds in measured.items()}
    for label, seconds in measured.items():
        lines.append(f"{label:<45} {best[label]:7.2f} {best[label] / baseline:6.2f}x {seconds[0]:8.2f}")
    floor = (results["convert"]["seconds"] + best["populate an X-sized file map"]
             + best["bare numba transpose (populated memory)"])
    lines.append(f"{'floor of convert --relayout (convert + both)':<45} {floor:7.2f} {floor / baseline:6.2f}x")
    return "\n".join(lines)


def report(results: dict[str, dict[str, float]], x_bytes: int) -> str:
    baseline = results["read_h5ad"]["seconds"]
    median_baseline = results["read_h5ad"]["median"]
    lines = [f"{'operation':<22} {'best s':>7} {'/ read':>7} {'median s':>9} {'/ read':>7} {'peak RSS GB':>11} "
             f"{'RSS / X':>8}  targets"]
    for operation, result in results.items():
        time_ratio = result["seconds"] / baseline
        rss_ratio = result["rss"] / x_bytes
        verdict = "-" if operation == "read_h5ad" else (
            "PASS" if time_ratio <= TIME_TARGET and rss_ratio <= RSS_TARGET else "FAIL")
        median_ratio = result["median"] / median_baseline
        lines.append(f"{operation:<22} {result['seconds']:7.2f} {time_ratio:6.2f}x {result['median']:9.2f} "
                     f"{median_ratio:6.2f}x {result['rss'] / GB:11.2f} {rss_ratio:7.2f}x  {verdict}")
    lines.append(f"X in memory: {x_bytes / GB:.2f} GB (targets: time <= {TIME_TARGET}x read_h5ad, "
                 f"peak RSS <= {RSS_TARGET}x X)")
    return "\n".join(lines)


@recording_main(__file__)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--path", default=DEFAULT_PATH, help=f"the h5ad file (default: {DEFAULT_PATH})")
    parser.add_argument("--cells", type=int, default=100_000)
    parser.add_argument("--genes", type=int, default=20_000)
    parser.add_argument("--density", type=float, default=0.05)
    parser.add_argument("--repeats", type=int, default=3, help="runs of each operation (best time is shown)")
    parser.add_argument("--rebuild", action="store_true", help="write the h5ad even if it exists")
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--limits", action="store_true", help="also measure the machine's floor (see above)")
    arguments = parser.parse_args(argv)

    if arguments.rebuild or _shape(arguments.path) != (arguments.cells, arguments.genes):
        build(arguments.path, arguments.cells, arguments.genes, arguments.density, quiet=arguments.quiet)
    elif not arguments.quiet:
        print(f"reusing {arguments.path} ({os.path.getsize(arguments.path) / GB:.2f} GB)")
    destination = os.path.splitext(arguments.path)[0] + ".out.h5df"
    n_cells, n_genes = _shape(arguments.path)  # type: ignore[misc]
    settle = 10.0 if n_cells * n_genes >= 1e8 else 0.0
    _remove([destination], settle)
    x_bytes = _x_bytes(arguments.path)
    results: dict[str, Any] = {}
    runs: dict[str, list[dict[str, float]]] = {operation: [] for operation in OPERATIONS}
    for _ in range(arguments.repeats):  # Interleaved, so a slow spell of the machine hits every operation.
        for operation in OPERATIONS:
            runs[operation].append(measure(operation, arguments.path, destination))
            _remove([destination], settle)
    for operation, measured in runs.items():
        results[operation] = {"seconds": min(run["seconds"] for run in measured),
                              "median": float(np.median([run["seconds"] for run in measured])),
                              "rss": max(run["rss"] for run in measured)}
    measure("convert --relayout", arguments.path, destination)  # Unmeasured: its output (both layouts) is checked.
    equal = verify(arguments.path, destination)
    _remove([destination], 0.0)
    print(report(results, x_bytes))
    print(f"equal: {'yes' if equal else 'no'}")
    if arguments.limits:
        print(report_limits(limits(arguments.path, arguments.repeats), results))
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
