"""Benchmark: a view of a large memory-mapped matrix costs O(1) to create and to fetch the matrix.

The script writes (once) an H5df file holding a dense ``Float32`` ``cell x gene`` matrix ``UMIs`` (default 20000 x
14000 = 1.12 GB, filled with seeded random numbers through the mapped ``empty_dense_matrix`` buffer), and a Boolean
``gene`` vector ``is_first`` marking the first half of the genes. Then, each in a fresh child process (this script run
as ``--child MODE``, so RSS and caches start clean), it opens the file read-only and measures:

``base``
    ``daf.get_matrix("cell", "gene", "UMIs")`` on the data set itself.
``view``
    ``pydaf.viewer(daf, axes=[VIEW_ALL_AXES], data=VIEW_ALL_DATA)``, then the same ``get_matrix`` through it.
``renamed``
    ``pydaf.viewer(daf, axes=[("obs", "@ cell"), ("var", "@ gene")], data=[(("obs", "var", "X"), ":: UMIs")])``,
    then ``get_matrix("obs", "var", "X")``.
``slice``
    ``pydaf.viewer(daf, axes=[VIEW_ALL_AXES, ("gene", "@ gene [ is_first ]")])``, then ``get_matrix("cell",
    "gene", "UMIs")``: a contiguous range of columns, a slice of the mapped matrix. Reading the view axis (evaluating
    the mask over the genes) is timed apart, as it is O(genes), not O(matrix).

For each: the time to create the view, of the first fetch (which maps the file) and of a second one (cached), as wall
time and as CPU time of the thread (on a shared machine the wall time also counts waiting for a core: with a load
of 6 on 2 cores, a run often waits a 4 ms time slice), the RSS growth over the first fetch, whether the result lies in
a map of the file (zero-copy) and, for views, whether it is the very array the data set returns (or, for the slice, a
view of it). Each child runs ``--runs`` times (default 3), interleaved; the table shows medians. Every child first runs
a tiny masked query through a tiny view, so the one-time cost of a process's first query (~0.5 s of imports and
thread-pool start) is not counted, and, as ``timeit`` does, it disables the garbage collector while it measures. The
check at the end: creating a view and fetching its matrix take < 5 ms of CPU (median), grow RSS by < 50 MB, and the
matrix is zero-copy (exit status 1 otherwise).

Examples::

    python benchmarks/bench_views.py                                # 1.12 GB, temp file, removed at the end
    python benchmarks/bench_views.py --cells 2000 --genes 1000      # smoke run
    python benchmarks/bench_views.py --path /tmp/big.h5df --keep    # keep (and reuse) the file
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

import numpy as np
import psutil
from recording import OUTPUT_HELP, recording_main

import pydaf

MB = 1e6
GB = 1e9
LIMIT_SECONDS = 0.005
LIMIT_RSS = 50 * MB
MODES = ("base", "view", "renamed", "slice")


def _rss() -> int:
    return psutil.Process().memory_info().rss


def _mapped(array: np.ndarray, path: str) -> bool:
    """Whether the array's data lies inside a memory map of ``path`` (Linux: ``/proc/self/maps``)."""
    if not os.path.exists("/proc/self/maps"):
        return False
    address = array.__array_interface__["data"][0]
    real = os.path.realpath(path)
    with open("/proc/self/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and os.path.realpath(fields[5]) == real:
                low, high = (int(value, 16) for value in fields[0].split("-"))
                if low <= address < high:
                    return True
    return False


# Writing.


def _existing_shape(path: str) -> tuple[int, int] | None:
    if not os.path.exists(path):
        return None
    try:
        daf = pydaf.H5df(path, "r")
        shape = (daf.axis_length("cell"), daf.axis_length("gene")) if daf.has_matrix(
            "cell", "gene", "UMIs", relayout=False) and daf.has_vector("gene", "is_first") else None
    except pydaf.DafError:
        return None
    del daf
    gc.collect()  # closes the file, which may be written again next
    return shape


def write_file(path: str, cells: int, genes: int, seed: int = 20261123, block: int = 256) -> None:
    nbytes = cells * genes * 4
    free = shutil.disk_usage(os.path.dirname(os.path.abspath(path))).free
    if free < nbytes * 1.1 + 100 * MB:
        sys.exit(f"not enough free disk space for {nbytes / GB:.2f} GB at {path} ({free / GB:.2f} GB free)")
    start = time.perf_counter()
    daf = pydaf.H5df(path, "w", name="big!")
    daf.add_axis("cell", [f"C{index:07d}" for index in range(cells)])
    daf.add_axis("gene", [f"G{index:07d}" for index in range(genes)])
    daf.set_vector("gene", "is_first", np.arange(genes) < genes // 2)
    rng = np.random.default_rng(seed)
    with daf.empty_dense_matrix("cell", "gene", "UMIs", "Float32") as buffer:
        for first in range(0, genes, block):
            # Whole columns of a column-major buffer are contiguous: the generator writes straight into the map.
            rng.random(out=buffer[:, first:first + block].T, dtype=np.float32)
        del buffer
    del daf
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
    print(f"wrote {path}: {cells:,} x {genes:,} Float32 = {nbytes / GB:.2f} GB in {time.perf_counter() - start:.1f} s")


# Children.


def _warm_up() -> None:
    """Run a tiny masked query, so the one-time cost of a process's first query (imports, the kernels' thread pool:
    ~0.5 s) is not counted as the cost of the view (every mode does it, the base too)."""
    tiny = pydaf.MemoryDaf(name="warm-up!").add_axis("x", ["a", "b"]).set_vector("x", "m", [True, False])
    tiny.get_query("@ x [ m ]", cache=False)
    pydaf.viewer(tiny, axes=[("x", "@ x [ m ]")]).get_vector("x", "m")


class _Timer:
    """Wall time and CPU time (of this thread) of a block."""

    def __enter__(self) -> _Timer:
        self.wall, self.cpu = time.perf_counter(), time.thread_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.thread_time() - self.cpu

    def times(self) -> list[float]:
        return [self.wall, self.cpu]


def child(mode: str, path: str) -> dict[str, Any]:
    _warm_up()
    daf = pydaf.H5df(path, "r")
    # As ``timeit`` does: no garbage collection inside the timed calls (a full collection of this process, which has
    # numpy, pandas, h5py and numba loaded, takes several ms and would land on whichever call happens to trigger it).
    gc.collect()
    gc.disable()
    rows, columns, name = ("obs", "var", "X") if mode == "renamed" else ("cell", "gene", "UMIs")
    result: dict[str, Any] = {"mode": mode, "create": None, "axis": None}
    with _Timer() as timer:
        if mode == "base":
            target: pydaf.DafReader = daf
        elif mode == "view":
            target = pydaf.viewer(daf, name="view!", axes=[pydaf.VIEW_ALL_AXES], data=pydaf.VIEW_ALL_DATA)
        elif mode == "renamed":
            target = pydaf.viewer(daf, name="renamed!", axes=[("obs", "@ cell"), ("var", "@ gene")],
                                  data=[(("obs", "var", "X"), ":: UMIs")])
        else:
            target = pydaf.viewer(daf, name="slice!", axes=[pydaf.VIEW_ALL_AXES, ("gene", "@ gene [ is_first ]")])
    if mode != "base":
        result["create"] = timer.times()
    if mode == "slice":
        with _Timer() as timer:
            target.axis_length("gene")
        result["axis"] = timer.times()
    rss = _rss()
    with _Timer() as timer:
        matrix = target.get_matrix(rows, columns, name)
    result["first"] = timer.times()
    result["rss"] = _rss() - rss
    with _Timer() as timer:
        again = target.get_matrix(rows, columns, name)
    result["second"] = timer.times()
    gc.enable()
    assert again is matrix
    result["shape"] = list(matrix.shape)
    result["nbytes"] = int(matrix.nbytes)
    result["mapped"] = _mapped(matrix, path)
    result["read_only"] = not matrix.flags.writeable
    result["f_contiguous"] = bool(matrix.flags.f_contiguous)
    stored = daf.get_matrix("cell", "gene", "UMIs")
    result["same"] = matrix is stored
    if mode == "slice":
        result["same"] = bool(np.shares_memory(matrix, stored)) and np.array_equal(
            matrix[:, -1], stored[:, matrix.shape[1] - 1])
    return result


def spawn(mode: str, path: str) -> dict[str, Any]:
    completed = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", mode, "--path", path],
                               capture_output=True, text=True, timeout=600, check=False)
    if completed.returncode:
        sys.exit(f"child {mode} failed ({completed.returncode}):\n{completed.stdout}{completed.stderr}")
    return json.loads([line for line in completed.stdout.splitlines() if line.startswith("{")][-1])


# Report.


def _ms(runs: list[dict[str, Any]], key: str) -> str:
    """Median wall / median CPU time, in ms."""
    timed = [run[key] for run in runs if run[key] is not None]
    if not timed:
        return "-"
    wall = statistics.median(wall for wall, _ in timed)
    cpu = statistics.median(cpu for _, cpu in timed)
    return f"{wall * 1e3:.3f} / {cpu * 1e3:.3f}"


def report(results: dict[str, list[dict[str, Any]]], quiet: bool = False, limit: float = LIMIT_SECONDS) -> bool:
    """Print the table; whether the views met the limits."""
    rows = [
        ("create (ms, wall / CPU)", lambda runs: _ms(runs, "create")),
        ("read the view axis", lambda runs: _ms(runs, "axis")),
        ("get_matrix, first", lambda runs: _ms(runs, "first")),
        ("get_matrix, again", lambda runs: _ms(runs, "second")),
        ("RSS growth, first (MB)", lambda runs: f"{max(run['rss'] for run in runs) / MB:+.1f}"),
        ("shape", lambda runs: " x ".join(f"{size:,}" for size in runs[0]["shape"])),
        ("GB", lambda runs: f"{runs[0]['nbytes'] / GB:.2f}"),
        ("in a map of the file", lambda runs: "yes" if all(run["mapped"] for run in runs) else "NO"),
        ("read-only, column-major", lambda runs: "yes" if all(run["read_only"] and run["f_contiguous"]
                                                              for run in runs) else "NO"),
        ("the base's array (slice: of it)", lambda runs: "yes" if all(run["same"] for run in runs) else "NO"),
    ]
    width = max(len(label) for label, _ in rows)
    columns = {mode: [render(results[mode]) for _, render in rows] for mode in results}
    widths = {mode: max(len(mode), *(len(text) for text in columns[mode])) for mode in results}
    print(f"{'':{width}}  " + "  ".join(f"{mode:>{widths[mode]}}" for mode in results))
    for index, (label, _) in enumerate(rows):
        print(f"{label:{width}}  " + "  ".join(f"{columns[mode][index]:>{widths[mode]}}" for mode in results))
    ok = True
    for mode in ("view", "renamed", "slice"):
        runs = results[mode]
        create = statistics.median(run["create"][1] for run in runs)
        fetch = statistics.median(run["first"][1] for run in runs)
        rss = max(run["rss"] for run in runs)
        zero_copy = all(run["mapped"] and run["same"] for run in runs)
        passed = create < limit and fetch < limit and rss < LIMIT_RSS and zero_copy
        ok &= passed
        if not quiet or not passed:
            print(f"check {mode}: CPU create {create * 1e3:.3f} ms, CPU first get_matrix {fetch * 1e3:.3f} ms (limit "
                  f"{limit * 1e3:g} ms), RSS growth {rss / MB:+.1f} MB (limit {LIMIT_RSS / MB:.0f} MB), "
                  f"zero-copy {'yes' if zero_copy else 'NO'}: {'PASS' if passed else 'FAIL'}")
    return ok


@recording_main(__file__)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--cells", type=int, default=20_000)
    parser.add_argument("--genes", type=int, default=14_000)
    parser.add_argument("--path", help="the H5df file (default: a temporary one, removed at the end)")
    parser.add_argument("--keep", action="store_true", help="keep the file (it is reused when its shape matches)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--quiet", action="store_true")
    parser.add_argument("--limit-ms", type=float, default=LIMIT_SECONDS * 1e3,
                        help="the CPU time limit of creating a view and of fetching its matrix (default 5)")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    arguments = parser.parse_args(argv)
    if arguments.child:
        print(json.dumps(child(arguments.child, arguments.path)))
        return 0

    folder = None
    path = arguments.path
    if path is None:
        folder = tempfile.mkdtemp(prefix="pydaf_bench_views-")
        path = os.path.join(folder, "big.h5df")
    try:
        if _existing_shape(path) != (arguments.cells, arguments.genes):
            write_file(path, arguments.cells, arguments.genes)
        results: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
        for _ in range(arguments.runs):
            for mode in MODES:  # interleaved, so every mode sees the same page-cache state
                results[mode].append(spawn(mode, path))
        return 0 if report(results, arguments.quiet, arguments.limit_ms / 1e3) else 1
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
        elif not arguments.keep and os.path.exists(path):
            os.remove(path)


if __name__ == "__main__":
    sys.exit(main())
