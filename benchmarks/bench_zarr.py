"""Benchmark: ``get_matrix`` of a large mapped dense matrix from a ZarrDaf directory, a ZarrDaf ZIP archive and a
ZipDaf archive, beside H5df and FilesDaf, in one run.

The script writes (once; ``--reuse`` keeps them) the same dense ``Float32`` matrix (default ``cell`` = 20000 x
``gene`` = 14000, 1.12 GB) into five stores under ``--dir``: ``bench.daf.zarr``, ``bench.daf.zarr.zip``,
``bench.daf.zip``, ``bench.h5df`` and ``bench.daf``, each through ``empty_dense_matrix`` (the seeded random blocks go
straight into the store's mapped file). Then, for each store and each of ``--runs`` rounds, a fresh child process
(this script run as ``--child KIND``, so its RSS starts clean) opens the store read-only and measures:

- ``open``: ``pydaf.open_daf(path)``;
- ``get_matrix``: ``get_matrix("cell", "gene", "UMIs")`` (a read-only map of the file: nothing is read) — the target
  is under 5 ms;
- its RSS growth (``psutil``) — the target is under 50 MB;
- whether the result is a zero-copy, read-only, column-major map;
- a checksum of a sample of columns (which touches only them), compared across stores.

It exits with 1 if a result is not a zero-copy map or the checksums differ; a missed speed or memory target is
reported (``MISSED``) but is not a failure (timings depend on the machine's load).

Examples::

    python benchmarks/bench_zarr.py                                  # 1.12 GB x 5 stores in a temp dir, removed
    python benchmarks/bench_zarr.py --cells 2000 --genes 500          # smoke run
    python benchmarks/bench_zarr.py --dir /tmp/zarr-bench --reuse --keep --runs 5
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

import numpy as np
import psutil
from recording import OUTPUT_HELP, recording_main

import pydaf
from pydaf.testing.conformance import is_file_map

STORES = {"zarr": "bench.daf.zarr", "zarr_zip": "bench.daf.zarr.zip", "zip": "bench.daf.zip", "h5df": "bench.h5df",
          "files": "bench.daf"}
MB, GB = 1e6, 1e9
GET_TARGET_SECONDS, RSS_TARGET_BYTES = 0.005, 50 * MB


def _opener(kind: str) -> Any:
    return {"zarr": pydaf.ZarrDaf, "zarr_zip": pydaf.ZarrDaf, "zip": pydaf.ZipDaf, "h5df": pydaf.H5df,
            "files": pydaf.FilesDaf}[kind]


def write_store(kind: str, path: str, cells: int, genes: int, block: int, seed: int) -> float:
    """Write the benchmark matrix into one store; returns the seconds it took."""
    start = time.perf_counter()
    daf = _opener(kind)(path, "w")
    daf.add_axis("cell", [f"C{index:07d}" for index in range(cells)])
    daf.add_axis("gene", [f"G{index:07d}" for index in range(genes)])
    rng = np.random.default_rng(seed)
    with daf.empty_dense_matrix("cell", "gene", "UMIs", "Float32") as buffer:
        for first in range(0, genes, block):
            # Whole columns of a column-major buffer are contiguous: the generator writes into the mapped file.
            rng.random(out=buffer[:, first:first + block].T, dtype=np.float32)
        del buffer
    daf.format.format_close()
    return time.perf_counter() - start


def _matches(kind: str, path: str, cells: int, genes: int) -> bool:
    try:
        daf = pydaf.open_daf(path)
        return daf.axis_length("cell") == cells and daf.axis_length("gene") == genes and \
            daf.has_matrix("cell", "gene", "UMIs", relayout=False) and type(daf.base) is _opener(kind)
    except pydaf.DafError:
        return False


def child(kind: str, path: str, sample: int) -> dict[str, Any]:
    """The body of a ``--child KIND`` process: measure one open and one ``get_matrix``."""
    process = psutil.Process()
    rss0 = process.memory_info().rss
    start = time.perf_counter()
    daf = pydaf.open_daf(path)
    opened = time.perf_counter()
    rss1 = process.memory_info().rss
    matrix = daf.get_matrix("cell", "gene", "UMIs")
    got = time.perf_counter()
    rss2 = process.memory_info().rss
    columns = np.linspace(0, matrix.shape[1] - 1, num=min(sample, matrix.shape[1])).astype(int)
    checksum = float(sum(float(matrix[:, column].sum(dtype=np.float64)) for column in columns))
    return {"open": opened - start, "get": got - opened, "rss_open": rss1 - rss0, "rss_get": rss2 - rss1,
            "zero_copy": is_file_map(matrix), "read_only": not matrix.flags.writeable,
            "f_contiguous": bool(matrix.flags.f_contiguous), "shape": list(matrix.shape), "checksum": checksum}


def spawn(kind: str, path: str, sample: int) -> dict[str, Any]:
    completed = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kind, "--path", path,
                                "--sample", str(sample)], capture_output=True, text=True, timeout=900, check=False)
    if completed.returncode:
        raise RuntimeError(f"child {kind} failed ({completed.returncode}):\n{completed.stdout}{completed.stderr}")
    return json.loads([line for line in completed.stdout.splitlines() if line.startswith("{")][-1])


@recording_main(__file__)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--dir", help="where the five stores go (default: a new temp directory, removed at the end)")
    parser.add_argument("--cells", type=int, default=20000, help="rows of the matrix (default 20000)")
    parser.add_argument("--genes", type=int, default=14000, help="columns of the matrix (default 14000)")
    parser.add_argument("--block", type=int, default=500, help="columns written per block (default 500)")
    parser.add_argument("--seed", type=int, default=1234, help="seed of the random fill (default 1234)")
    parser.add_argument("--runs", type=int, default=3, help="child processes per store (default 3)")
    parser.add_argument("--sample", type=int, default=16, help="columns summed for the checksum (default 16)")
    parser.add_argument("--reuse", action="store_true", help="keep stores that already hold a matrix of this shape")
    parser.add_argument("--keep", action="store_true", help="keep the stores at the end")
    parser.add_argument("--child", choices=sorted(STORES), help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.path, args.sample)))
        return 0

    folder = args.dir or tempfile.mkdtemp(prefix="zarr-bench-")
    os.makedirs(folder, exist_ok=True)
    nbytes = args.cells * args.genes * 4
    try:
        for kind, name in STORES.items():
            path = os.path.join(folder, name)
            if args.reuse and _matches(kind, path, args.cells, args.genes):
                print(f"reusing {path}")
                continue
            free = shutil.disk_usage(folder).free
            if free < nbytes * 1.1 + 100 * MB:
                print(f"not enough free disk space for {nbytes / GB:.2f} GB at {path} ({free / GB:.2f} GB free)")
                return 1
            print(f"wrote {path}: {write_store(kind, path, args.cells, args.genes, args.block, args.seed):.1f} s")
        print(f"\nget_matrix of a {args.cells} x {args.genes} Float32 matrix ({nbytes / GB:.2f} GB), a fresh process "
              f"per run, best and worst of {args.runs}; targets: < {GET_TARGET_SECONDS * 1e3:.0f} ms, RSS growth < "
              f"{RSS_TARGET_BYTES / MB:.0f} MB")
        header = (f"{'store':10} {'open (ms)':>12} {'get_matrix (ms)':>18} {'RSS growth (MB)':>18} "
                  f"{'zero-copy':>10} {'targets':>8}")
        print(header)
        print("-" * len(header))
        checksums: set[float] = set()
        met = correct = True
        for kind, name in STORES.items():
            results = [spawn(kind, os.path.join(folder, name), args.sample) for _ in range(args.runs)]
            gets = sorted(result["get"] for result in results)
            opens = sorted(result["open"] for result in results)
            growth = max(result["rss_get"] for result in results)
            zero_copy = all(result["zero_copy"] and result["read_only"] and result["f_contiguous"]
                            for result in results)
            ok = gets[-1] < GET_TARGET_SECONDS and growth < RSS_TARGET_BYTES and zero_copy
            met = met and ok
            checksums.update(round(result["checksum"], 3) for result in results)
            correct = correct and zero_copy
            timings = f"{opens[0] * 1e3:>5.1f}-{opens[-1] * 1e3:<6.1f} {gets[0] * 1e3:>8.3f}-{gets[-1] * 1e3:<9.3f}"
            print(f"{kind:10} {timings} {growth / MB:>18.2f} {'yes' if zero_copy else 'NO':>10} "
                  f"{'met' if ok else 'MISSED':>8}")
        print(f"targets: {'met' if met else 'MISSED'}")
        print(f"equal: {'yes' if len(checksums) == 1 else 'NO'}")
        return 0 if correct and len(checksums) == 1 else 1
    finally:
        if not args.keep:
            for name in STORES.values():
                path = os.path.join(folder, name)
                if os.path.isdir(path):
                    shutil.rmtree(path)
                elif os.path.exists(path):
                    os.remove(path)
            if args.dir is None:
                shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
