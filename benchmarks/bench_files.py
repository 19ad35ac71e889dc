"""Benchmark: the per-call cost of FilesDaf reads and writes (opens, mapped ``get_matrix``, small vectors, overwrites,
large writes and builders), to measure what the safety checks of ``pydaf/formats/files.py`` cost.

The script builds (once per run, in a temporary directory unless ``--path`` is given) a FilesDaf data set holding a
dense ``Float32`` matrix ``cell x gene`` (default 20000 x 2000, 160 MB), a sparse ``Float32`` matrix of the same axes
(~10% non-zeros) and ``--vectors`` small ``Float64`` vectors, and times, as the best of ``--repeats`` runs:

``open r`` / ``open r+``
    ``FilesDaf(path, "r")`` and ``FilesDaf(path, "r+")`` (the writable open takes the writer lock, runs the crash
    recovery and checks ``metadata.json``).
``get dense`` / ``get sparse``
    ``get_matrix`` of the dense and ``get_stored_matrix`` of the sparse matrix on a fresh read-only open (so nothing is
    cached): the files are mapped, not read.
``get vector``
    ``get_vector`` of one small vector (per call, on a fresh open, averaged over all the vectors).
``set vector``
    ``set_vector(..., overwrite=True)`` of one small vector (per call, averaged).
``set dense``
    ``set_matrix`` of the whole dense matrix (``relayout=False``): a large write.
``build dense``
    ``empty_dense_matrix`` of the same size, filled from the dense matrix.

Run it with ``PYTHONPATH`` pointing at two checkouts to compare them::

    python benchmarks/bench_files.py                          # default size, ~1 min
    python benchmarks/bench_files.py --cells 2000 --genes 200 --repeats 2   # smoke run
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

import numpy as np
import scipy.sparse as sp
from recording import OUTPUT_HELP, recording_main

import pydaf


def _best(repeats: int, run: Callable[[], float | None]) -> float:
    """The best time of ``repeats`` runs; ``run`` returns its own time, or ``None`` to be timed whole."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        measured = run()
        times.append(time.perf_counter() - start if measured is None else measured)
    return min(times)


def build(path: str, cells: int, genes: int, vectors: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Write the benchmark data set; returns the dense matrix and one small vector (for the write timings)."""
    generator = np.random.default_rng(seed)
    dense = np.asfortranarray(generator.random((cells, genes), dtype=np.float32))
    sparse = dense.copy(order="F")
    sparse[sparse > 0.1] = 0
    daf = pydaf.FilesDaf(path, "w", name="bench!")
    daf.add_axis("cell", [f"c{index}" for index in range(cells)])
    daf.add_axis("gene", [f"g{index}" for index in range(genes)])
    daf.set_matrix("cell", "gene", "dense", dense, relayout=False)
    daf.set_matrix("cell", "gene", "sparse", sp.csc_matrix(sparse), relayout=False)
    small = generator.random(genes)
    for index in range(vectors):
        daf.set_vector("gene", f"v{index}", small)
    return dense, small


def measure(path: str, dense: np.ndarray, small: np.ndarray, vectors: int, repeats: int) -> dict[str, float]:
    """The timings (seconds) of the operations in the module docstring."""
    results: dict[str, float] = {}
    results["open r"] = _best(repeats, lambda: pydaf.FilesDaf(path, "r") and None)
    results["open r+"] = _best(repeats, lambda: pydaf.FilesDaf(path, "r+") and None)

    def timed_get(read: Callable[[pydaf.DafReader], object]) -> float:
        daf = pydaf.FilesDaf(path, "r")
        start = time.perf_counter()
        read(daf)
        return time.perf_counter() - start

    results["get dense"] = _best(repeats, lambda: timed_get(lambda daf: daf.get_matrix("cell", "gene", "dense")))
    results["get sparse"] = _best(repeats, lambda: timed_get(
        lambda daf: daf.get_stored_matrix("cell", "gene", "sparse")))
    results["get vector"] = _best(repeats, lambda: timed_get(
        lambda daf: [daf.get_vector("gene", f"v{index}") for index in range(vectors)])) / vectors
    writer = pydaf.FilesDaf(path, "r+")
    results["set vector"] = _best(repeats, lambda: _set_vectors(writer, small, vectors)) / vectors
    results["set dense"] = _best(repeats, lambda: writer.set_matrix(
        "cell", "gene", "copy", dense, relayout=False, overwrite=True) and None)

    def build_dense() -> None:
        with writer.empty_dense_matrix("cell", "gene", "built", "Float32", overwrite=True) as buffer:
            buffer[...] = dense

    results["build dense"] = _best(repeats, build_dense)
    return results


def _set_vectors(daf: pydaf.DafWriter, small: np.ndarray, vectors: int) -> None:
    for index in range(vectors):
        daf.set_vector("gene", f"v{index}", small, overwrite=True)


@recording_main(__file__)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--cells", type=int, default=20000)
    parser.add_argument("--genes", type=int, default=2000)
    parser.add_argument("--vectors", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--path", help="where to build the data set (default: a temporary directory, removed)")
    arguments = parser.parse_args(argv)
    folder = None if arguments.path else tempfile.mkdtemp(prefix="files-reliability-bench-")
    path = arguments.path or os.path.join(folder, "bench.daf")
    try:
        dense, small = build(path, arguments.cells, arguments.genes, arguments.vectors, arguments.seed)
        results = measure(path, dense, small, arguments.vectors, arguments.repeats)
    finally:
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    size = dense.nbytes / 1e6
    print(f"pydaf: {os.path.dirname(pydaf.__file__)}  matrix: {arguments.cells} x {arguments.genes} ({size:.0f} MB)")
    print(f"{'operation':<12} {'best':>12}")
    for operation, seconds in results.items():
        text = f"{seconds * 1e6:9.1f} µs" if seconds < 0.01 else f"{seconds * 1e3:9.1f} ms"
        print(f"{operation:<12} {text:>12}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
