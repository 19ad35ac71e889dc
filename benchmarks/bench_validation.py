"""Benchmark: what the structural validation of a large mapped sparse matrix costs at its first access.

The script writes (once, reused afterwards) an H5df file holding a sparse ``UInt16`` ``cell x gene`` matrix (default
1,000,000 x 2,000, 10% non-zeros: 200M stored entries, ``UInt32`` indices, 1.2 GB of colptr + rowval + nzval), filled
column by column through ``empty_sparse_matrix``. Then, each in a fresh child process (this script run as
``--child MODE``), on a warm page cache:

``checked``
    pydaf as it is: the first ``get_stored_matrix`` maps the arrays and validates their structure (colptr, and every
    rowval: range and order in its column), releasing the pages it read; the first ``get_matrix`` (the 0-based scipy
    matrix: the index arrays are copied) on top of it.

``unchecked``
    the same with the validation switched off (``pydaf.core.readers.require_stored_matrix`` replaced by a no-op): what
    these calls cost before validation existed.

``plain``
    a plain pass over the same mapped index arrays: ``rowval.max()`` and ``colptr.max()`` with numpy (one thread),
    the least any reader of the indices pays.

Each child prints one JSON line: times and the RSS growth over ``get_stored_matrix`` (the validation must not leave
the index arrays resident). The parent prints a table, side by side, with the ratios checked / unchecked and
validation / plain pass. Best of ``--repeats`` children per mode, interleaved.

Examples::

    python benchmarks/bench_validation.py                              # full size, file kept in /tmp for reuse
    python benchmarks/bench_validation.py --cells 20000 --genes 500 --path /tmp/small.h5df   # smoke run
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Any

import h5py
import numpy as np
import psutil
from recording import OUTPUT_HELP, recording_main

import pydaf

MB, GB = 1e6, 1e9
ROWS_AXIS, COLUMNS_AXIS, NAME = "cell", "gene", "UMIs"
DATASET = f"/matrices/{ROWS_AXIS}/{COLUMNS_AXIS}/{NAME}"


def _shape(path: str) -> tuple[int, int] | None:
    """The (cells, genes) of the benchmark matrix in ``path``, or ``None``."""
    if not os.path.exists(path):
        return None
    try:
        with h5py.File(path, "r") as file:
            return int(file[f"/axes/{ROWS_AXIS}"].shape[0]), int(file[f"{DATASET}/colptr"].shape[0]) - 1
    except (OSError, KeyError, ValueError):
        return None


def write_file(path: str, cells: int, genes: int, density: float, seed: int) -> None:
    """The benchmark H5df: axes and one sparse UInt16 matrix, filled in place column by column."""
    generator = np.random.default_rng(seed)
    counts = generator.binomial(cells, density, genes)
    nnz = int(counts.sum())
    needed = nnz * 6 + cells * 12
    free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
    if free < needed * 1.2:
        sys.exit(f"not enough free disk space for {needed / GB:.2f} GB at {path} ({free / GB:.2f} GB free)")
    started = time.perf_counter()
    daf = pydaf.H5df(path, "w", name="bench_validation!")
    daf.add_axis(ROWS_AXIS, [f"C{index:07d}" for index in range(cells)])
    daf.add_axis(COLUMNS_AXIS, [f"G{index:05d}" for index in range(genes)])
    with daf.empty_sparse_matrix(ROWS_AXIS, COLUMNS_AXIS, NAME, "UInt16", nnz, "UInt32") as (colptr, rowval, nzval):
        colptr[0] = 1
        colptr[1:] = np.cumsum(counts) + 1
        for gene in range(genes):
            start, stop = int(colptr[gene]) - 1, int(colptr[gene + 1]) - 1
            # Sorted distinct rows: a random subset of the cells, by thinning each of ``stop - start`` strata.
            strata = np.linspace(0, cells, stop - start + 1).astype(np.int64)
            rowval[start:stop] = strata[:-1] + (generator.random(stop - start) * np.maximum(
                np.diff(strata), 1)).astype(np.int64) % np.maximum(np.diff(strata), 1) + 1
            nzval[start:stop] = generator.integers(1, 50, stop - start, dtype=np.uint16)
    daf.flush()
    del daf, colptr, rowval, nzval
    print(f"wrote {path}: {cells} x {genes}, {nnz:,} stored entries, {os.path.getsize(path) / GB:.2f} GB, "
          f"in {time.perf_counter() - started:.1f} s")


def _rss() -> int:
    return psutil.Process().memory_info().rss


def child(mode: str, path: str) -> dict[str, Any]:
    from pydaf.kernels import validation

    # Load numba and the kernels first (a cached compilation, paid once per process whatever reads the data).
    validation.first_csc_problem(np.array([1, 2], np.uint32), np.array([1], np.uint32), 1)
    if mode == "unchecked":
        from pydaf.core import readers

        readers.require_stored_matrix = lambda *_arguments, **_options: None  # type: ignore[assignment]
    daf = pydaf.H5df(path, "r")
    result: dict[str, Any] = {}
    rss = _rss()
    started = time.perf_counter()
    stored = daf.get_stored_matrix(ROWS_AXIS, COLUMNS_AXIS, NAME, relayout=False)
    result["get_stored_matrix"] = time.perf_counter() - started
    result["rss_growth"] = _rss() - rss
    result["nnz"] = stored.nnz
    result["index_bytes"] = stored.rowval.nbytes + stored.colptr.nbytes
    if mode == "plain":
        started = time.perf_counter()
        result["checksum"] = int(stored.rowval.max()) + int(stored.colptr.max())
        result["plain_pass"] = time.perf_counter() - started
        return result
    started = time.perf_counter()
    matrix = daf.get_matrix(ROWS_AXIS, COLUMNS_AXIS, NAME, relayout=False)
    result["get_matrix"] = time.perf_counter() - started + result["get_stored_matrix"]
    result["scipy_nnz"] = int(matrix.nnz)
    return result


def spawn(mode: str, path: str) -> dict[str, Any]:
    completed = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, "--path", path],
                               capture_output=True, text=True, timeout=1800, check=False)
    if completed.returncode:
        sys.exit(f"child {mode} failed ({completed.returncode}):\n{completed.stdout}{completed.stderr}")
    return json.loads([line for line in completed.stdout.splitlines() if line.startswith("{")][-1])


def _warm(path: str) -> None:
    """Read the file once, so every child sees the same (warm) page cache."""
    with open(path, "rb") as handle:
        while handle.read(1 << 26):
            pass


@recording_main(__file__)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--path", default="/tmp/pydaf_bench_validation.h5df",
                        help="the H5df file (built if missing or of another shape; kept for reuse)")
    parser.add_argument("--cells", type=int, default=1_000_000)
    parser.add_argument("--genes", type=int, default=2_000)
    parser.add_argument("--density", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repeats", type=int, default=3, help="children per mode (best time kept)")
    parser.add_argument("--child", choices=["checked", "unchecked", "plain"], help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    path = os.path.abspath(arguments.path)
    if arguments.child:
        print(json.dumps(child(arguments.child, path)))
        return 0
    if _shape(path) != (arguments.cells, arguments.genes):
        write_file(path, arguments.cells, arguments.genes, arguments.density, arguments.seed)
    _warm(path)
    runs: dict[str, list[dict[str, Any]]] = {"unchecked": [], "checked": [], "plain": []}
    for _ in range(arguments.repeats):
        for mode in runs:
            runs[mode].append(spawn(mode, path))
    best = {mode: {key: min(run[key] for run in results) for key in results[0]} for mode, results in runs.items()}
    checked, unchecked, plain = best["checked"], best["unchecked"], best["plain"]
    print(f"matrix {arguments.cells:,} x {arguments.genes:,}, {checked['nnz']:,} stored entries, index arrays "
          f"{checked['index_bytes'] / GB:.2f} GB, file {os.path.getsize(path) / GB:.2f} GB (best of "
          f"{arguments.repeats}, warm page cache)")
    header = f"{'first call':28} {'unchecked':>12} {'checked':>12} {'checked/unchecked':>18}"
    print(header)
    print("-" * len(header))
    for key in ("get_stored_matrix", "get_matrix"):
        print(f"{key + ' (s)':28} {unchecked[key]:>12.4f} {checked[key]:>12.4f} "
              f"{checked[key] / max(unchecked[key], 1e-9):>17.2f}x")
    print(f"{'RSS growth, get_stored (MB)':28} {unchecked['rss_growth'] / MB:>12.1f} "
          f"{checked['rss_growth'] / MB:>12.1f}")
    validation = checked["get_stored_matrix"] - unchecked["get_stored_matrix"]
    print(f"validation: {validation:.4f} s = {validation / plain['plain_pass']:.2f}x a plain pass over the indices "
          f"(rowval.max() + colptr.max(): {plain['plain_pass']:.4f} s); "
          f"{validation / checked['nnz'] * 1e9:.2f} ns per stored entry")
    same = checked["scipy_nnz"] == unchecked["scipy_nnz"] == checked["nnz"]
    print(f"same matrix: {'yes' if same else 'NO'}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
