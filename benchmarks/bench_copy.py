"""Benchmark: ``pydaf.copy_all`` of a large H5df into a FilesDaf directory, beside a plain copy of the same file.

The script writes (once; reused when ``--path`` already holds a file of the requested size) an H5df file with a dense
``Float32`` ``UMIs`` matrix of ``cell`` x ``gene`` (default 20,000 x 7,000, both layouts: 1.12 GB), filled through
the mapped ``empty_dense_matrix`` buffer block by block, and its other layout written by ``relayout_matrix``. Then,
each in a fresh child process (so the resident set starts clean; peak RSS is the child's ``VmHWM``), after ``sync`` and
a warm read of the file (the page cache holds the source in both cases):

``cp``
    ``shutil.copyfile`` of the H5df file (the same bytes a copy must move: both layouts);
``copy_all``
    ``copy_all(FilesDaf(dst, "w"), H5df(src, "r"))``: every property, both layouts of the matrix copied as stored,
    streamed through the destination's mapped builders with the maps' pages released block by block.

Each runs ``--repeats`` times, interleaved, deleting its output (and syncing) after each run. The table gives the best
and median times, copy_all's speed relative to ``cp`` (1.0 = as fast), peak RSS, and peak RSS as a fraction of the data
size; a last line checks that the copied matrix equals the source.

Examples::

    python benchmarks/bench_copy.py                                   # 1.12 GB, built once in /tmp and reused
    python benchmarks/bench_copy.py --cells 2000 --genes 500 --path /tmp/small.h5df --repeats 1   # smoke run
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import time

import numpy as np
from child_runs import GB, peak_rss, print_against_cp, remove, run_child, warm
from recording import OUTPUT_HELP, recording_main

DEFAULT_PATH = "/tmp/pydaf_bench_copy.h5df"


def _shape(path: str) -> tuple[int, int] | None:
    import pydaf

    if not os.path.exists(path):
        return None
    try:
        daf = pydaf.H5df(path, "r")
        return daf.axis_length("cell"), daf.axis_length("gene")
    except pydaf.DafError:
        return None


def write_source(path: str, cells: int, genes: int) -> None:
    """The source H5df: axes, a scalar, a vector and the dense matrix in both layouts, written block by block."""
    import pydaf

    daf = pydaf.H5df(path, "w", name="source!")
    daf.set_scalar("organism", "human")
    daf.add_axis("cell", [f"C{index}" for index in range(cells)])
    daf.add_axis("gene", [f"G{index}" for index in range(genes)])
    daf.set_vector("cell", "age", np.arange(cells, dtype=np.uint16))
    rng = np.random.default_rng(7)
    with daf.empty_dense_matrix("cell", "gene", "UMIs", "Float32") as matrix:
        block = max(1, (64 << 20) // (4 * cells))
        for start in range(0, genes, block):
            stop = min(start + block, genes)
            matrix[:, start:stop] = rng.random((cells, stop - start), dtype=np.float32)
    daf.relayout_matrix("cell", "gene", "UMIs")
    daf.flush()


def child(mode: str, source: str, destination: str) -> None:
    """Run one copy and print ``seconds peak_rss`` (imports are not timed: both modes start from a loaded process)."""
    import pydaf

    start = time.perf_counter()
    if mode == "cp":
        shutil.copyfile(source, destination)
    else:
        pydaf.copy_all(pydaf.FilesDaf(destination, "w", name="copy!"), pydaf.H5df(source, "r"), progress=False)
    elapsed = time.perf_counter() - start
    print(f"{elapsed} {peak_rss()}")


@recording_main(__file__)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--path", default=DEFAULT_PATH)
    parser.add_argument("--cells", type=int, default=20_000)
    parser.add_argument("--genes", type=int, default=7_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs=3, metavar=("MODE", "SOURCE", "DESTINATION"))
    arguments = parser.parse_args(argv)
    if arguments.child:
        child(*arguments.child)
        return 0

    import pydaf

    if _shape(arguments.path) != (arguments.cells, arguments.genes):
        write_source(arguments.path, arguments.cells, arguments.genes)
    data_bytes = 2 * arguments.cells * arguments.genes * 4
    os.sync()
    warm([arguments.path])
    stem = os.path.splitext(arguments.path)[0]
    outputs = {"cp": f"{stem}.copy.h5df", "copy_all": f"{stem}.copy.daf"}
    results: dict[str, list[tuple[float, int]]] = {mode: [] for mode in outputs}
    for _ in range(arguments.repeats):
        for mode, output in outputs.items():
            remove(output)
            results[mode].append(run_child(__file__, mode, arguments.path, output))
    copied = pydaf.FilesDaf(outputs["copy_all"], "r")
    source = pydaf.H5df(arguments.path, "r")
    equal = all(np.array_equal(copied.get_matrix(rows, columns, "UMIs", relayout=False),
                               source.get_matrix(rows, columns, "UMIs", relayout=False))
                for rows, columns in (("cell", "gene"), ("gene", "cell")))
    for output in outputs.values():
        remove(output)
    print(f"data: {arguments.cells:,} cells x {arguments.genes:,} genes Float32, both layouts:"
          f" {data_bytes / GB:.2f} GB; {arguments.repeats} interleaved runs")
    print_against_cp(results, data_bytes)
    print(f"equal: {'yes' if equal else 'NO'}")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
