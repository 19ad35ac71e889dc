"""Benchmark: pydaf's memory-mapped H5df ``get_matrix`` against a plain h5py read of the same dataset.

The script first writes (once) an H5df file holding a large dense ``Float32`` matrix (default ``cell`` = 20000 x
``gene`` = 14000, 1.12 GB) through ``empty_dense_matrix``, filling the mapped column-major buffer block by block with
seeded random numbers, so memory stays bounded. It then measures, each in a fresh child process (this same script run
as ``--child MODE``, so the RSS starts clean and every run sees the same page-cache state):

``pydaf``
    the time of ``pydaf.H5df(path, "r")``; the time of ``get_matrix("cell", "gene", "UMIs")`` (which maps the file
    and reads nothing); the RSS growth over it; then the time of the column sums ``matrix.sum(axis=0)`` (which does
    fault the whole matrix in from the page cache) and the RSS after them.

``h5py``
    the time of ``h5py.File(path, "r")``; the time of ``ds[()]`` (a full read of the ``(gene, cell)``-shaped dataset
    into anonymous memory); the RSS growth over it; then the time of the same column sums, ``arr.sum(axis=1)``.

RSS is ``psutil.Process().memory_info().rss``; its ``shared`` part (file-backed pages, i.e. the page cache mapped into
the process, which the kernel can drop at will) is reported too. Both children save their column sums, which the
parent compares with ``np.allclose``.

Every child runs ``--runs`` times (default 2). Before each child of the first run the file's pages are evicted from
the page cache (``fsync`` + ``posix_fadvise(DONTNEED)``, best effort; ``--no-evict`` skips it), so run 1 is a cold
read from the disk and run 2 is a warm read from the page cache. A table per run is printed.

Examples::

    python benchmarks/bench_mmap.py                               # full size, temp file, removed at the end
    python benchmarks/bench_mmap.py --cells 2000 --genes 1000     # quick smoke run
    python benchmarks/bench_mmap.py --path /tmp/big.h5df --reuse --keep
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any

import h5py
import numpy as np
import psutil
from recording import OUTPUT_HELP, recording_main

import pydaf

ROWS_AXIS = "cell"
COLUMNS_AXIS = "gene"
NAME = "UMIs"
DATASET = f"/matrices/{ROWS_AXIS}/{COLUMNS_AXIS}/{NAME}"  # h5py shape (genes, cells): the transpose of the Daf matrix
MB = 1e6
GB = 1e9


def _rss() -> tuple[int, int]:
    """The process's resident set size and its file-backed (``shared``) part, in bytes."""
    info = psutil.Process().memory_info()
    return info.rss, getattr(info, "shared", 0)


# Writing.


def _existing_shape(path: str) -> tuple[int, int] | None:
    """The (cells, genes) shape of the benchmark matrix in ``path``, or ``None`` if it is not there."""
    if not os.path.exists(path):
        return None
    try:
        with h5py.File(path, "r") as file:
            genes, cells = file[DATASET].shape
            return cells, genes
    except (OSError, KeyError, ValueError):
        return None


def write_file(path: str, cells: int, genes: int, block: int, seed: int) -> None:
    """Write the benchmark H5df file: axes and one dense Float32 ``cell x gene`` matrix, filled in place."""
    nbytes = cells * genes * 4
    free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
    if free < nbytes * 1.1 + 100 * MB:
        sys.exit(f"not enough free disk space for {nbytes / GB:.2f} GB at {path} ({free / GB:.2f} GB free)")
    start = time.perf_counter()
    daf = pydaf.H5df(path, "w")
    daf.add_axis(ROWS_AXIS, [f"C{index:07d}" for index in range(cells)])
    daf.add_axis(COLUMNS_AXIS, [f"G{index:07d}" for index in range(genes)])
    rng = np.random.default_rng(seed)
    with daf.empty_dense_matrix(ROWS_AXIS, COLUMNS_AXIS, NAME, "Float32") as buffer:
        assert buffer.shape == (cells, genes) and buffer.flags.f_contiguous
        for first in range(0, genes, block):
            # A block of whole columns of a column-major buffer is contiguous; its transpose is C-contiguous, so the
            # generator writes straight into the mapped file with no temporary.
            rng.random(out=buffer[:, first:first + block].T, dtype=np.float32)
        del buffer
    daf.flush()
    del daf
    filled = time.perf_counter()
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
    synced = time.perf_counter()
    print(f"wrote {path}: {cells} x {genes} Float32 = {nbytes / GB:.2f} GB matrix, "
          f"file {os.path.getsize(path) / GB:.2f} GB; fill + flush {filled - start:.2f} s, "
          f"fsync {synced - filled:.2f} s")


def evict(path: str) -> bool:
    """Drop the file's pages from the page cache (best effort); whether the kernel accepted the advice."""
    if not hasattr(os, "posix_fadvise"):
        return False
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
        try:
            os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            return False
    return True


# Children.


def _zero_copy(array: np.ndarray) -> bool:
    """Whether ``array`` is a view of a memory map (its base chain ends in a ``memoryview`` of an ``mmap``)."""
    base: Any = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return isinstance(base, memoryview) and type(base.obj).__name__ == "mmap"


def child_pydaf(path: str) -> tuple[dict[str, Any], np.ndarray]:
    rss0, shared0 = _rss()
    start = time.perf_counter()
    daf = pydaf.H5df(path, "r")
    opened = time.perf_counter()
    rss1, _ = _rss()
    matrix = daf.get_matrix(ROWS_AXIS, COLUMNS_AXIS, NAME)
    got = time.perf_counter()
    rss2, _ = _rss()
    sums = matrix.sum(axis=0)
    summed = time.perf_counter()
    rss3, shared3 = _rss()
    return {
        "shape": list(matrix.shape), "f_contiguous": bool(matrix.flags.f_contiguous),
        "writeable": bool(matrix.flags.writeable), "zero_copy": _zero_copy(matrix),
        "open": opened - start, "get": got - opened, "sum": summed - got,
        "rss_base": rss0, "rss_get_growth": rss2 - rss1, "rss_total_growth": rss3 - rss0,
        "shared_total_growth": shared3 - shared0,
    }, sums


def child_h5py(path: str) -> tuple[dict[str, Any], np.ndarray]:
    rss0, shared0 = _rss()
    start = time.perf_counter()
    file = h5py.File(path, "r")
    opened = time.perf_counter()
    rss1, _ = _rss()
    array = file[DATASET][()]
    got = time.perf_counter()
    rss2, _ = _rss()
    sums = array.sum(axis=1)  # the h5py array is (genes, cells): its rows are the Daf matrix's columns
    summed = time.perf_counter()
    rss3, shared3 = _rss()
    file.close()
    return {
        "shape": list(array.shape), "f_contiguous": bool(array.flags.f_contiguous),
        "writeable": bool(array.flags.writeable), "zero_copy": False,
        "open": opened - start, "get": got - opened, "sum": summed - got,
        "rss_base": rss0, "rss_get_growth": rss2 - rss1, "rss_total_growth": rss3 - rss0,
        "shared_total_growth": shared3 - shared0,
    }, sums


def run_child(mode: str, path: str) -> None:
    """The body of a ``--child MODE`` process: measure, save the sums, print one JSON line."""
    result, sums = {"pydaf": child_pydaf, "h5py": child_h5py}[mode](path)
    np.save(f"{path}.{mode}.sums.npy", sums)
    print(json.dumps(result))


def spawn(mode: str, path: str) -> tuple[dict[str, Any], np.ndarray]:
    """Run this script as a fresh ``--child MODE`` process; its parsed JSON line and its column sums."""
    completed = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, "--path", path],
                               capture_output=True, text=True, timeout=900, check=False)
    if completed.returncode:
        sys.exit(f"child {mode} failed ({completed.returncode}):\n{completed.stdout}{completed.stderr}")
    line = [text for text in completed.stdout.splitlines() if text.startswith("{")][-1]
    sums_path = f"{path}.{mode}.sums.npy"
    sums = np.load(sums_path)
    os.remove(sums_path)
    return json.loads(line), sums


# Report.


def _ratio(numerator: float, denominator: float, floor: float) -> str:
    if abs(denominator) < floor:
        return "n/a (pydaf ~0)"
    return f"{numerator / denominator:.1f}x"


def print_table(title: str, cells: int, genes: int, results: dict[str, dict[str, Any]], equal: bool) -> None:
    pydaf_result, h5py_result = results["pydaf"], results["h5py"]
    rows = [
        ("open (s)", "open", 1e-9, 1.0, "{:.4f}"),
        ("get_matrix / ds[()] (s)", "get", 1e-9, 1.0, "{:.4f}"),
        ("RSS growth over get/read (MB)", "rss_get_growth", 1.0, MB, "{:.1f}"),
        ("column sums (s)", "sum", 1e-9, 1.0, "{:.3f}"),
        ("RSS growth after sums (MB)", "rss_total_growth", 1.0, MB, "{:.1f}"),
        ("  of which file-backed (MB)", "shared_total_growth", 1.0, MB, "{:.1f}"),
    ]
    print(f"\n{title}")
    print(f"matrix {ROWS_AXIS} x {COLUMNS_AXIS} = {cells} x {genes} Float32, {cells * genes * 4 / GB:.2f} GB")
    header = f"{'':32} {'pydaf':>12} {'h5py':>12} {'h5py/pydaf':>16}"
    print(header)
    print("-" * len(header))
    for label, key, floor, scale, fmt in rows:
        mine, theirs = pydaf_result[key] / scale, h5py_result[key] / scale
        print(f"{label:32} {fmt.format(mine):>12} {fmt.format(theirs):>12} {_ratio(theirs, mine, floor):>16}")
    total_mine = pydaf_result["get"] + pydaf_result["sum"]
    total_theirs = h5py_result["get"] + h5py_result["sum"]
    print(f"{'get + sums (s)':32} {total_mine:>12.3f} {total_theirs:>12.3f} "
          f"{_ratio(total_theirs, total_mine, 1e-9):>16}")
    print(f"column sums equal (np.allclose): {equal}; pydaf matrix zero-copy mmap: {pydaf_result['zero_copy']}, "
          f"read-only: {not pydaf_result['writeable']}, F-contiguous: {pydaf_result['f_contiguous']}; "
          f"child base RSS pydaf {pydaf_result['rss_base'] / MB:.0f} MB, h5py {h5py_result['rss_base'] / MB:.0f} MB")


@recording_main(__file__)
def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--path", help="the H5df file to write and read (default: in a new temp directory)")
    parser.add_argument("--cells", type=int, default=20000, help="rows of the matrix (default 20000)")
    parser.add_argument("--genes", type=int, default=14000, help="columns of the matrix (default 14000)")
    parser.add_argument("--block", type=int, default=500, help="columns written per block (default 500)")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the random fill (default 1234)")
    parser.add_argument("--runs", type=int, default=2, help="runs of each child (default 2)")
    parser.add_argument("--reuse", action="store_true", help="don't rewrite --path if it holds a matrix of this shape")
    parser.add_argument("--keep", action="store_true", help="keep the file at the end (else it is removed)")
    parser.add_argument("--no-evict", action="store_true", help="don't evict the file from the page cache before run 1")
    parser.add_argument("--child", choices=["pydaf", "h5py"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        run_child(args.child, args.path)
        return

    temp_dir = None
    if args.path is None:
        temp_dir = tempfile.mkdtemp(prefix="pydaf-bench-")
        args.path = os.path.join(temp_dir, "bench.h5df")
    path = os.path.abspath(args.path)
    try:
        if args.reuse and _existing_shape(path) == (args.cells, args.genes):
            print(f"reusing {path} ({os.path.getsize(path) / GB:.2f} GB)")
        else:
            write_file(path, args.cells, args.genes, args.block, args.seed)
        for run in range(1, args.runs + 1):
            cold = run == 1 and not args.no_evict
            results: dict[str, dict[str, Any]] = {}
            sums: dict[str, np.ndarray] = {}
            evicted = True
            for mode in ("pydaf", "h5py"):
                if cold:
                    evicted = evict(path) and evicted
                results[mode], sums[mode] = spawn(mode, path)
            equal = sums["pydaf"].shape == sums["h5py"].shape and bool(np.allclose(sums["pydaf"], sums["h5py"]))
            if cold:
                cache = "cold page cache (evicted before each child)" if evicted else "page cache eviction FAILED"
            else:
                cache = "warm page cache"
            print_table(f"run {run} of {args.runs}: {cache}", args.cells, args.genes, results, equal)
    finally:
        if not args.keep:
            if os.path.exists(path):
                os.remove(path)
            if temp_dir is not None:
                shutil.rmtree(temp_dir, ignore_errors=True)
        else:
            print(f"\nkept {path}")


if __name__ == "__main__":
    main()
