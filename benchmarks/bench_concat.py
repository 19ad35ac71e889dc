"""Benchmark: ``pydaf.concatenate`` of large H5df sources into an H5df, beside a plain copy of the same bytes.

The script writes (once; reused when ``--path`` already holds sources of the requested shape) ``--sources`` H5df files,
each with ``--cells`` cells (named per source) and the same ``--genes`` genes, and a ``UMIs`` matrix stored as ``gene``
x ``cell`` (the layout the concatenation writes): dense ``Float32`` (default; 2 x 10,000 x 14,000: 1.12 GB), or with
``--sparse`` a sparse ``UInt16`` matrix with ``--density`` non-zeros (``UInt32`` indices). Then, each in a fresh child
process (peak RSS is the child's ``VmHWM``), after ``sync`` and a warm read of the sources:

``cp``
    the sources' bytes appended into one new file (``shutil.copyfileobj``): the bytes a concatenation must move;
``concatenate``
    ``concatenate(H5df(destination, "w"), "cell", [H5df(source, "r"), ...])``: the matrix streamed source by source,
    block by block, into the destination's mapped builder, with the maps' pages released after each block.

Each runs ``--repeats`` times, interleaved, deleting its output (and syncing) after each run. The table gives the best
and median times, the concatenation's speed relative to ``cp`` (1.0 = as fast), peak RSS, and peak RSS as a fraction of
the data size; a last line checks the concatenated matrix against the sources.

Examples::

    python benchmarks/bench_concat.py                                     # 1.12 GB dense, built once in /tmp, reused
    python benchmarks/bench_concat.py --sparse --cells 200000 --genes 20000 --density 0.02   # 1.15 GB sparse
    python benchmarks/bench_concat.py --cells 2000 --genes 500 --path /tmp/small --repeats 1  # smoke run
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

DEFAULT_PATH = "/tmp/pydaf_bench_concat"


def _source_paths(path: str, sources: int) -> list[str]:
    return [f"{path}.{index}.h5df" for index in range(sources)]


def _description(cells: int, genes: int, sparse: bool, density: float) -> str:
    return f"{cells} x {genes} " + (f"sparse {density}" if sparse else "dense")


def _is_built(paths: list[str], description: str) -> bool:
    import pydaf

    for path in paths:
        if not os.path.exists(path):
            return False
        try:
            if pydaf.H5df(path, "r").get_scalar("benchmark", default=None) != description:
                return False
        except pydaf.DafError:
            return False
    return True


def write_source(path: str, index: int, cells: int, genes: int, sparse: bool, density: float) -> None:
    """One source: its cells, the genes, and the ``gene`` x ``cell`` UMIs, written block by block into the builder."""
    import pydaf

    daf = pydaf.H5df(path, "w", name=f"source{index}!")
    daf.add_axis("cell", [f"S{index}C{cell}" for cell in range(cells)])
    daf.add_axis("gene", [f"G{gene}" for gene in range(genes)])
    daf.set_vector("cell", "age", np.full(cells, index, dtype=np.uint16))
    rng = np.random.default_rng(index)
    block = max(1, (64 << 20) // (4 * genes))
    if not sparse:
        with daf.empty_dense_matrix("gene", "cell", "UMIs", "Float32") as matrix:
            for start in range(0, cells, block):
                stop = min(start + block, cells)
                matrix[:, start:stop] = rng.random((genes, stop - start), dtype=np.float32)
    else:
        per_cell = max(1, int(genes * density))
        nnz = per_cell * cells
        with daf.empty_sparse_matrix("gene", "cell", "UMIs", "UInt16", nnz, "UInt32") as (colptr, rowval, nzval):
            colptr[:] = np.arange(cells + 1, dtype=np.uint64) * per_cell + 1
            for start in range(0, cells, block):
                stop = min(start + block, cells)
                rows = np.sort(rng.random((stop - start, genes)).argpartition(per_cell, axis=1)[:, :per_cell], axis=1)
                rowval[start * per_cell:stop * per_cell] = rows.reshape(-1) + 1
                nzval[start * per_cell:stop * per_cell] = rng.integers(1, 100, (stop - start) * per_cell)
    daf.set_scalar("benchmark", _description(cells, genes, sparse, density))
    daf.flush()


def child(mode: str, destination: str, sources: list[str]) -> None:
    """Run one concatenation or copy and print ``seconds peak_rss`` (imports and opens are not timed)."""
    import pydaf

    dafs = [pydaf.H5df(source, "r") for source in sources]
    start = time.perf_counter()
    if mode == "cp":
        with open(destination, "wb") as output:
            for source in sources:
                with open(source, "rb") as input:
                    shutil.copyfileobj(input, output, 16 << 20)
    else:
        target = pydaf.H5df(destination, "w", name="concatenated!")
        pydaf.concatenate(target, "cell", dafs, progress=False)
        target.flush()
    elapsed = time.perf_counter() - start
    print(f"{elapsed} {peak_rss()}")


def _equal(destination: str, sources: list[str]) -> bool:
    """Whether the concatenated matrix holds each source's columns, compared a source at a time."""
    import pydaf

    result = pydaf.H5df(destination, "r").get_stored_matrix("gene", "cell", "UMIs", relayout=False)
    column = 0
    for path in sources:
        source = pydaf.H5df(path, "r").get_stored_matrix("gene", "cell", "UMIs", relayout=False)
        n_columns = source.shape[1]
        if isinstance(source, pydaf.SparseMatrixCSC):
            if not isinstance(result, pydaf.SparseMatrixCSC):
                return False
            first, last = int(result.colptr[column]) - 1, int(result.colptr[column + n_columns]) - 1
            same = (np.array_equal(result.colptr[column:column + n_columns + 1].astype(np.int64) - first,
                                   source.colptr.astype(np.int64))
                    and np.array_equal(result.rowval[first:last], source.rowval)
                    and np.array_equal(result.nzval[first:last], source.nzval))
        else:
            same = np.array_equal(result[:, column:column + n_columns], source)
        if not same:
            return False
        column += n_columns
    return column == result.shape[1]


@recording_main(__file__)
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output", metavar="PATH", help=OUTPUT_HELP)
    parser.add_argument("--path", default=DEFAULT_PATH, help="prefix of the source files (<path>.<i>.h5df)")
    parser.add_argument("--sources", type=int, default=2)
    parser.add_argument("--cells", type=int, default=10_000, help="cells per source")
    parser.add_argument("--genes", type=int, default=14_000)
    parser.add_argument("--sparse", action="store_true")
    parser.add_argument("--density", type=float, default=0.02)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--child", nargs="+", metavar="ARGUMENT")
    arguments = parser.parse_args(argv)
    if arguments.child:
        child(arguments.child[0], arguments.child[1], arguments.child[2:])
        return 0

    sources = _source_paths(arguments.path, arguments.sources)
    description = _description(arguments.cells, arguments.genes, arguments.sparse, arguments.density)
    if not _is_built(sources, description):
        for index, path in enumerate(sources):
            write_source(path, index, arguments.cells, arguments.genes, arguments.sparse, arguments.density)
    data_bytes = sum(os.path.getsize(path) for path in sources)
    os.sync()
    warm(sources)
    outputs = {"cp": f"{arguments.path}.copy", "concatenate": f"{arguments.path}.concatenated.h5df"}
    results: dict[str, list[tuple[float, int]]] = {mode: [] for mode in outputs}
    for _ in range(arguments.repeats):
        for mode, output in outputs.items():
            remove(output)
            results[mode].append(run_child(__file__, mode, output, *sources))
    equal = _equal(outputs["concatenate"], sources)
    for output in outputs.values():
        remove(output)
    print(f"data: {arguments.sources} sources of {description} UMIs ({arguments.genes:,} genes x "
          f"{arguments.cells:,} cells each): {data_bytes / GB:.2f} GB; {arguments.repeats} interleaved runs")
    print_against_cp(results, data_bytes)
    print(f"equal: {'yes' if equal else 'NO'}")
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
