"""Benchmark: ``pydaf.reorder_axes`` of a large data set in place, in H5df, FilesDaf and ZarrDaf, beside a plain copy
of the same files.

The script writes (once per format; reused when ``--directory`` already holds data sets of the requested size) a data
set with a dense ``Float32`` ``UMIs`` matrix and a sparse ``Float32`` ``sparse`` matrix of ``cell`` x ``gene``, both in
both layouts (default 20,000 x 7,000 and 1 in 29 entries stored: 1.12 GB dense, ~0.12 GB sparse), as an H5df file, a
FilesDaf directory and a ZarrDaf directory. Entry ``(i, j)`` of both matrices is a function of the original positions
``i, j`` (which the entries ``C<i>`` / ``G<j>`` name), so any order of the axes can be checked. Then, each in a fresh
child process, after ``sync`` and a warm read of the files (the page cache holds the data in both cases):

``cp``
    ``shutil.copyfile`` (``copytree`` for a directory) of the data set's files: the bytes a reorder must move;
``cp+fsync``
    the same, then ``fsync`` of every file and folder copied: a durable copy, as a crash-safe reorder's writes are
    (with a warm page cache, ``cp`` alone is a memory copy that never waits for the disk);
``reorder``
    ``reorder_axes(daf, {"cell": random permutation, "gene": random permutation})`` of the data set opened ``r+``
    (and its ``close``): every matrix and vector is rewritten in the new order, after the crash-safety backup. The
    first reorder of a process also loads numba's compiled kernels from its cache (0.4-0.6 s here);
``reorder-loaded``
    the same in a process that has already reordered (a small data set, untimed): a session's second call.

With ``--cold`` (root, Linux), each run starts with the page cache dropped instead: both read the data set from the
disk, as a data set larger than memory is.

Memory: on a VM whose balloon reports free memory to the host (``virtio_balloon`` free page reporting, as on the
project's Firecracker VM), memory freed more than ~1 s ago costs the host's page fault at its first touch again:
touching 1.5 GB took 0.2 s right after a free, 1.0 s 2 s after it and 1.5-2.7 s 5-8 s after it. Both a copy and a
reorder write ~1.24 GB of new page cache, so their times swung 0.35-2.9 s with the memory's state. By default
(``--memory recycled``) each child touches and frees 2.5 times the data set's size just before it starts the clock,
so both sides take their new pages from memory the guest already holds, as on a machine without a balloon;
``--memory as-is`` leaves memory as the run before left it (the host's faults land on either side).

Each runs ``--repeats`` times, interleaved (formats and operations), the copy removed and synced after each run. The
table gives per format the best and median times, the speed in MB/s of the data set's size, the speed relative to
``cp`` and to ``cp+fsync`` (1.0 = as fast; the target is 0.5) and the peak RSS (which counts the mapped pages of the
data set the reorder touched); last, a check per format that the reordered matrices hold the values their entries
name, and the verdict per format.

Examples::

    python benchmarks/bench_reorder.py                   # 3 x 1.24 GB, built once in /tmp/pydaf_bench_reorder
    python benchmarks/bench_reorder.py --cells 2000 --genes 500 --directory /tmp/small --repeats 1   # smoke run
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from typing import Any

import numpy as np
from child_runs import GB, MB, peak_rss, remove, warm
from recording import OUTPUT_HELP, REPOSITORY, recording_main

DEFAULT_DIRECTORY = "/tmp/pydaf_bench_reorder"
FORMATS = {"h5df": "data.h5df", "files": "data.daf", "zarr": "data.daf.zarr"}
SPARSE_STRIDE = 29  # (1 entry in 29 stored)


def _format(kind: str) -> type:
    import pydaf

    return {"h5df": pydaf.H5df, "files": pydaf.FilesDaf, "zarr": pydaf.ZarrDaf}[kind]


def dense_values(cells: np.ndarray, genes: np.ndarray) -> np.ndarray:
    """The dense ``UMIs`` of the original cells and genes (``cells`` a column, ``genes`` a row of positions)."""
    return ((cells * 7919 + genes * 104729) % 1000003).astype(np.float32)


def sparse_rows(gene: int, cells: int) -> np.ndarray:
    """The original cells stored in the original column ``gene`` of ``sparse`` (a stride of the cells)."""
    return np.arange(gene % SPARSE_STRIDE, cells, SPARSE_STRIDE)


def _description(cells: int, genes: int) -> str:
    return f"{cells} x {genes} dense and 1/{SPARSE_STRIDE} sparse Float32, both layouts"


def _is_built(kind: str, path: str, cells: int, genes: int) -> bool:
    import pydaf

    if not os.path.exists(path):
        return False
    try:
        daf = _format(kind)(path, "r")
        return daf.get_scalar("bench", default=None) == _description(cells, genes)
    except pydaf.DafError:
        return False


def write_data_set(kind: str, path: str, cells: int, genes: int) -> None:
    """The data set: axes, a vector per axis, the dense matrix written block by block into its mapped buffer, the
    sparse matrix, and the other layout of each by ``relayout_matrix``."""
    import scipy.sparse as sp

    remove(path)
    daf = _format(kind)(path, "w", name="reorder!")
    daf.add_axis("cell", [f"C{index}" for index in range(cells)])
    daf.add_axis("gene", [f"G{index}" for index in range(genes)])
    daf.set_vector("cell", "position", np.arange(cells, dtype=np.uint32))
    daf.set_vector("gene", "position", np.arange(genes, dtype=np.uint32))
    all_cells = np.arange(cells)[:, None]
    with daf.empty_dense_matrix("cell", "gene", "UMIs", "Float32") as matrix:
        block = max(1, (64 << 20) // (4 * cells))
        for start in range(0, genes, block):
            stop = min(start + block, genes)
            matrix[:, start:stop] = dense_values(all_cells, np.arange(start, stop)[None, :])
    daf.relayout_matrix("cell", "gene", "UMIs")
    rows = [sparse_rows(gene, cells) for gene in range(genes)]
    colptr = np.concatenate([[0], np.cumsum([len(row) for row in rows])])
    rowval = np.concatenate(rows)
    columns = np.repeat(np.arange(genes), np.diff(colptr))
    nzval = dense_values(rowval, columns)
    daf.set_matrix("cell", "gene", "sparse", sp.csc_matrix((nzval, rowval, colptr), shape=(cells, genes)),
                   relayout=False)
    daf.relayout_matrix("cell", "gene", "sparse")
    daf.set_scalar("bench", _description(cells, genes))
    daf.close()


def data_set_bytes(path: str) -> int:
    if os.path.isfile(path):
        return os.path.getsize(path)
    return sum(os.path.getsize(os.path.join(folder, name)) for folder, _, names in os.walk(path) for name in names)


def data_set_files(path: str) -> list[str]:
    if os.path.isfile(path):
        return [path]
    return [os.path.join(folder, name) for folder, _, names in os.walk(path) for name in names]


def check(kind: str, path: str, samples: int = 5) -> bool:
    """Whether both layouts of both matrices, at a few sampled positions, hold the values of the original positions
    their entries name."""
    daf = _format(kind)(path, "r")
    cells = np.array([int(entry[1:]) for entry in daf.axis_vector("cell")])
    genes = np.array([int(entry[1:]) for entry in daf.axis_vector("gene")])
    n_cells = len(cells)
    generator = np.random.default_rng(0)
    good = np.array_equal(daf.get_vector("cell", "position"), cells) and \
        np.array_equal(daf.get_vector("gene", "position"), genes)
    dense = daf.get_matrix("cell", "gene", "UMIs", relayout=False)
    dense_t = daf.get_matrix("gene", "cell", "UMIs", relayout=False)
    sparse = daf.get_stored_matrix("cell", "gene", "sparse", relayout=False)
    sparse_t = daf.get_stored_matrix("gene", "cell", "sparse", relayout=False)
    for gene in generator.integers(0, len(genes), samples):
        good &= np.array_equal(dense[:, gene], dense_values(cells, genes[gene]))
        stored = cells % SPARSE_STRIDE == genes[gene] % SPARSE_STRIDE
        good &= np.array_equal(_csc_column(sparse, gene, n_cells),
                               np.where(stored, dense_values(cells, genes[gene]), 0).astype(np.float32))
    for cell in generator.integers(0, n_cells, samples):
        good &= np.array_equal(dense_t[:, cell], dense_values(cells[cell], genes))
        stored = genes % SPARSE_STRIDE == cells[cell] % SPARSE_STRIDE
        good &= np.array_equal(_csc_column(sparse_t, cell, len(genes)),
                               np.where(stored, dense_values(cells[cell], genes), 0).astype(np.float32))
    return bool(good)


def _csc_column(matrix: Any, column: int, n_rows: int) -> np.ndarray:
    """A column of a 1-based CSC matrix (a :class:`pydaf.SparseMatrixCSC`), dense."""
    start, stop = int(matrix.colptr[column]) - 1, int(matrix.colptr[column + 1]) - 1
    values = np.zeros(n_rows, dtype=np.float32)
    values[np.asarray(matrix.rowval[start:stop]) - 1] = matrix.nzval[start:stop]
    return values


def recycle_memory(nbytes: int) -> None:
    """Touch ``nbytes`` of new memory and free it (see "Memory" in the module's docstring): the next ``nbytes`` the
    process or the page cache takes come from pages the guest holds, not from the host's faults."""
    if nbytes > 0:
        block = np.empty(nbytes, dtype=np.uint8)
        block[::4096] = 1
        del block
        with open("/proc/self/clear_refs", "w") as clear:  # (the peak RSS reported is the operation's, from here)
            clear.write("5\n")


def child(mode: str, kind: str, path: str, argument: str, recycle: str = "0", cold: bool = False) -> None:
    """Run one operation and print ``seconds peak_rss`` (imports are not timed: both start from a loaded process).
    Just before the clock starts, the data set is read (unless ``cold``: the parent dropped the page cache) and
    ``recycle`` bytes of memory are recycled."""
    import pydaf

    def before_the_clock() -> None:
        if not cold:
            warm(data_set_files(path))
        recycle_memory(int(recycle))

    if mode in ("cp", "cp+fsync"):
        before_the_clock()
        start = time.perf_counter()
        if os.path.isdir(path):
            shutil.copytree(path, argument, copy_function=shutil.copyfile)
        else:
            shutil.copyfile(path, argument)
        if mode == "cp+fsync":  # (a durable copy: what a crash-safe operation has to pay for its writes)
            for name in data_set_files(argument):
                _fsync(name)
            for folder in {os.path.dirname(name) for name in data_set_files(argument)}:
                _fsync(folder)
    else:
        if mode == "reorder-loaded":  # (untimed: one reorder of a small data set loads numba's compiled kernels)
            import tempfile

            with tempfile.TemporaryDirectory(dir=os.path.dirname(path)) as folder:
                small = os.path.join(folder, FORMATS[kind])
                write_data_set(kind, small, 1_100, 1_000)
                daf = _format(kind)(small, "r+")
                pydaf.reorder_axes(daf, {"cell": np.arange(1_100)[::-1], "gene": np.arange(1_000)[::-1]},
                                   progress=False)
                daf.close()
        generator = np.random.default_rng(int(argument))
        before_the_clock()
        start = time.perf_counter()
        daf = _format(kind)(path, "r+")
        permutations = {axis: generator.permutation(daf.axis_length(axis)) for axis in ("cell", "gene")}
        pydaf.reorder_axes(daf, permutations, progress=False)
        daf.close()
    elapsed = time.perf_counter() - start
    print(f"{elapsed} {peak_rss()}")


def _drop_caches() -> None:
    """Write out and drop the page cache (Linux, root), so a run reads the data set from the disk."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as file:
        file.write("1\n")


def _fsync(path: str) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _run_child(*arguments: str) -> tuple[float, int]:
    import subprocess

    # (the child imports this checkout's pydaf, as the parent does)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([REPOSITORY, os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run([sys.executable, __file__, "--child", *arguments], capture_output=True, text=True,
                            env=environment)
    if result.returncode != 0:
        raise RuntimeError(f"the child {' '.join(arguments)} failed:\n{result.stderr[-3000:]}")
    output = result.stdout.split()
    return float(output[0]), int(output[1])


@recording_main(__file__)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--directory", default=DEFAULT_DIRECTORY)
    parser.add_argument("--cells", type=int, default=20_000)
    parser.add_argument("--genes", type=int, default=7_000)
    parser.add_argument("--formats", default=",".join(FORMATS), help="a comma-separated subset of h5df,files,zarr")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", action="store_true", help="keep the data sets (reused by the next run)")
    parser.add_argument("--cold", action="store_true",
                        help="start each run with the data set out of the page cache (root: drops the caches)")
    parser.add_argument("--memory", choices=("recycled", "as-is"), default="recycled",
                        help="the memory's state when the clock starts (see Memory above)")
    parser.add_argument("--child", nargs=5, metavar=("MODE", "FORMAT", "PATH", "ARGUMENT", "RECYCLE"))
    arguments = parser.parse_args(argv)
    if arguments.child:
        child(*arguments.child, cold=arguments.cold)
        return 0

    kinds = arguments.formats.split(",")
    os.makedirs(arguments.directory, exist_ok=True)
    paths = {kind: os.path.join(arguments.directory, FORMATS[kind]) for kind in kinds}
    for kind, path in paths.items():
        if not _is_built(kind, path, arguments.cells, arguments.genes):
            write_data_set(kind, path, arguments.cells, arguments.genes)
    os.sync()
    modes = ("cp", "cp+fsync", "reorder", "reorder-loaded")
    results: dict[str, dict[str, list[tuple[float, int]]]] = {kind: {mode: [] for mode in modes} for kind in kinds}
    sizes = {kind: data_set_bytes(path) for kind, path in paths.items()}
    for repeat in range(arguments.repeats):
        for kind, path in paths.items():
            copy = path + ".copy"
            for mode in modes:
                if arguments.cold:
                    _drop_caches()
                recycle = int(2.5 * sizes[kind]) if arguments.memory == "recycled" else 0
                results[kind][mode].append(_run_child(mode, kind, path, copy if mode.startswith("cp") else
                                                      str(1000 + repeat), str(recycle),
                                                      *(["--cold"] if arguments.cold else [])))
                remove(copy)
    description = _description(arguments.cells, arguments.genes)
    print(f"data: {arguments.cells:,} cells x {arguments.genes:,} genes, {description}; {arguments.repeats} "
          f"interleaved runs, page cache {'dropped (cold)' if arguments.cold else 'warm'} before each, memory "
          f"{arguments.memory}")
    print(f"{'format':<7} {'operation':<14} {'GB':>6} {'best s':>8} {'median s':>9} {'best MB/s':>10} "
          f"{'speed vs cp':>12} {'vs cp+fsync':>12} {'peak RSS MB':>12}")
    verdicts = []
    for kind in kinds:
        best = {mode: min(seconds for seconds, _ in runs) for mode, runs in results[kind].items()}
        for mode, runs in results[kind].items():
            times = [seconds for seconds, _ in runs]
            print(f"{kind:<7} {mode:<14} {sizes[kind] / GB:>6.2f} {best[mode]:>8.3f} {statistics.median(times):>9.3f} "
                  f"{sizes[kind] / MB / best[mode]:>10.0f} {best['cp'] / best[mode]:>11.2f}x "
                  f"{best['cp+fsync'] / best[mode]:>11.2f}x {max(rss for _, rss in runs) / MB:>12.0f}")
        for mode in ("reorder", "reorder-loaded"):
            ratios = (best["cp"] / best[mode], best["cp+fsync"] / best[mode])
            verdicts.append(f"{kind} {mode} {ratios[0]:.2f}x of cp {'PASS' if ratios[0] >= 0.5 else 'FAIL'}, "
                            f"{ratios[1]:.2f}x of cp+fsync {'PASS' if ratios[1] >= 0.5 else 'FAIL'}")
    equal = {kind: check(kind, path) for kind, path in paths.items()}
    print("equal: " + ", ".join(f"{kind} {'yes' if good else 'NO'}" for kind, good in equal.items()))
    print("reorder at >= 50% of the copy's speed: " + "; ".join(verdicts))
    if not arguments.keep:
        for path in paths.values():
            remove(path)
    return 0 if all(equal.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
