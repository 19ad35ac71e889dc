"""The ``pydaf`` command: ``demo``, ``query PATH QUERY``, ``describe PATH``, ``repack SRC DST``, ``convert SRC DST``."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np


def build_demo(path: str, *, n_cells: int = 20_000, n_genes: int = 2_000, n_types: int = 8, seed: int = 123,
               progress: bool = True) -> None:
    """Write a deterministic synthetic single-cell-like data set as H5df: a cells x genes sparse UMI matrix (~90%
    zeros, both layouts), per-cell and per-gene vectors, and a ``type`` axis with its own vectors.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "demo.h5df")
        >>> build_demo(path, n_cells=100, n_genes=50, progress=False)
        >>> import pydaf
        >>> pydaf.H5df(path, "r").axis_length("cell")
        100
    """
    from tqdm.auto import tqdm

    from .formats.h5df import H5df

    generator = np.random.default_rng(seed)
    daf = H5df(path, "w", name="demo!")
    daf.set_scalar("organism", "synthetic").set_scalar("seed", seed)
    daf.add_axis("cell", [f"cell{index:06d}" for index in range(n_cells)])
    daf.add_axis("gene", [f"gene{index:05d}" for index in range(n_genes)])
    daf.add_axis("type", [f"type{index}" for index in range(n_types)])
    daf.set_vector("type", "color", [f"#{(index * 2654435761) % 0xFFFFFF:06x}" for index in range(n_types)])
    cell_types = generator.integers(0, n_types, n_cells)
    daf.set_vector("cell", "type", np.array([f"type{index}" for index in cell_types], dtype=object))
    daf.set_vector("cell", "donor_age", generator.integers(20, 90, n_cells).astype(np.uint8))
    daf.set_vector("gene", "is_lateral", generator.random(n_genes) < 0.1)

    # Per column (gene), ~10% of the cells have counts; written straight into the file's map, column block by block.
    column_nnz = generator.binomial(n_cells, 0.1, n_genes)
    nnz = int(column_nnz.sum())
    with daf.empty_sparse_matrix("cell", "gene", "UMIs", "UInt16", nnz, "Int64") as (colptr, rowval, nzval):
        colptr[1:] = np.cumsum(column_nnz) + 1
        for gene in tqdm(range(n_genes), desc="UMIs", unit="gene", disable=not progress, mininterval=0.5):
            start, stop = int(colptr[gene]) - 1, int(colptr[gene + 1]) - 1
            rowval[start:stop] = np.sort(generator.choice(n_cells, stop - start, replace=False)) + 1
            nzval[start:stop] = generator.geometric(0.3, stop - start)
    daf.relayout_matrix("cell", "gene", "UMIs")
    daf.set_vector("cell", "total_UMIs", np.asarray(daf.get_matrix("cell", "gene", "UMIs").sum(axis=1)).ravel(),
                   eltype="UInt32")
    daf.set_matrix("type", "gene", "mean_UMIs", np.zeros((n_types, n_genes), np.float32))
    daf.flush()


def demo(path: str | None, *, n_cells: int, n_genes: int, progress: bool) -> None:
    from .formats.h5df import H5df

    folder = None
    if path is None:
        folder = tempfile.TemporaryDirectory(prefix="pydaf-demo-")
        path = os.path.join(folder.name, "demo.h5df")
    started = time.perf_counter()
    build_demo(path, n_cells=n_cells, n_genes=n_genes, progress=progress)
    written = time.perf_counter() - started

    started = time.perf_counter()
    daf = H5df(path, "r")
    opened = time.perf_counter() - started
    started = time.perf_counter()
    umis = daf.get_stored_matrix("cell", "gene", "UMIs")
    fetched = time.perf_counter() - started

    print(daf.description(), end="")
    print(f"file: {path} ({os.path.getsize(path) / 1e6:.1f} MB)")
    print(f"write: {written:.3f} s")
    print(f"open (mapped, read-only): {opened * 1e3:.2f} ms")
    print(f"get_stored_matrix cell,gene UMIs ({umis.nnz:,} non-zeros, zero-copy): {fetched * 1e3:.2f} ms")
    for query in ("@ cell @ gene :: UMIs >> Sum type Int64", "@ cell @ gene :: UMIs >- Sum",
                  "@ cell @ gene :: UMIs -/ type =@ >- Mean || 0", "@ cell [ donor_age > 60 ] : type * donor_age"):
        started = time.perf_counter()
        result = daf[query]
        elapsed = time.perf_counter() - started
        shown = result if np.ndim(result) == 0 else f"{type(result).__name__} {np.shape(result)}"
        print(f"{query}: {shown} in {elapsed * 1e3:.1f} ms")
    if folder is not None:
        del daf, umis
        folder.cleanup()


def query(path: str, text: str) -> None:
    import pandas as pd

    from .open import open_daf

    result = open_daf(path, "r")[text]
    with pd.option_context("display.max_rows", 20, "display.max_columns", 10, "display.width", 120):
        print(sorted(result) if isinstance(result, set) else result)


def describe(path: str, *, deep: bool) -> None:
    from .formats.h5df import H5df

    print(H5df(path, "r").description(deep=deep), end="")


def convert(source: str, destination: str, *, obs_is: str | None = None, var_is: str | None = None,
            X_is: str | None = None, relayout: bool = False, unsupported: str = "warn", progress: bool = True) -> None:
    """Convert between ``.h5ad`` files and Daf data sets (``.h5df``, ``.h5dfs#/group``, FilesDaf directories), chosen
    by the paths; the destination is replaced once the conversion is complete (:mod:`pydaf.interop.convert`).

    Example:
        >>> import os, tempfile, numpy as np, pydaf
        >>> folder = tempfile.mkdtemp()
        >>> daf = pydaf.H5df(os.path.join(folder, "a.h5df"), "w").add_axis("obs", ["A"]).add_axis("var", ["X"])
        >>> _ = daf.set_matrix("obs", "var", "X", np.array([[7.0]]))
        >>> convert(os.path.join(folder, "a.h5df"), os.path.join(folder, "b.h5ad"), progress=False)
        >>> convert(os.path.join(folder, "b.h5ad"), os.path.join(folder, "c.daf"), progress=False)
        >>> pydaf.open_daf(os.path.join(folder, "c.daf")).get_matrix("obs", "var", "X").tolist()
        [[7.0]]
    """
    from .interop.convert import convert as convert_paths

    convert_paths(source, destination, obs_is=obs_is, var_is=var_is, X_is=X_is, relayout=relayout,
                  unsupported=unsupported, progress=progress)


def main(argv: list[str] | None = None) -> int:
    """Run the ``pydaf`` command line.

    Example:
        >>> main(["describe", "/no/such/file.h5df"])  # prints "pydaf: missing H5df file: ..." to stderr
        1
    """
    from .errors import DafError
    from .formats.h5df import repack

    parser = argparse.ArgumentParser(prog="pydaf", description="Daf data sets in native Python.")
    commands = parser.add_subparsers(dest="command", required=True)
    demo_parser = commands.add_parser("demo", help="build a synthetic single-cell data set as H5df and read it mapped")
    demo_parser.add_argument("--output", help="where to write the .h5df (default: a temporary file)")
    demo_parser.add_argument("--cells", type=int, default=20_000)
    demo_parser.add_argument("--genes", type=int, default=2_000)
    demo_parser.add_argument("--no-progress", action="store_true")
    describe_parser = commands.add_parser("describe", help="print the description of a data set")
    describe_parser.add_argument("path", help="an .h5df file or an .h5dfs#/group path")
    describe_parser.add_argument("--deep", action="store_true")
    query_parser = commands.add_parser("query", help="apply a query to a data set and print the result")
    query_parser.add_argument("path", help="an .h5df file, .h5dfs#/group path or FilesDaf directory")
    query_parser.add_argument("query", help='a Daf query, e.g. "@ cell [ age > 60 ] : donor"')
    repack_parser = commands.add_parser("repack", help="rewrite an H5df data set compactly into a new file")
    repack_parser.add_argument("source")
    repack_parser.add_argument("destination")
    repack_parser.add_argument("--no-progress", action="store_true")
    convert_parser = commands.add_parser(
        "convert", help="convert between .h5ad files and Daf data sets (.h5df, .h5dfs#/group, FilesDaf directories)")
    convert_parser.add_argument("source")
    convert_parser.add_argument("destination", help="replaced, once complete, if it is a Daf data set")
    convert_parser.add_argument("--obs-is", help="the Daf axis of AnnData's obs (default: uns obs_is, else obs)")
    convert_parser.add_argument("--var-is", help="the Daf axis of AnnData's var (default: uns var_is, else var)")
    convert_parser.add_argument("--X-is", dest="X_is", help="the Daf matrix of AnnData's X (default: uns X_is, else X)")
    convert_parser.add_argument("--relayout", action="store_true",
                                help="also store the other layout of X and the layers (default: only the layout "
                                     "the h5ad holds, as Julia's Daf does)")
    convert_parser.add_argument("--unsupported", choices=("ignore", "warn", "error"), default="warn",
                                help="what to do with AnnData elements Daf can't hold (default: warn)")
    convert_parser.add_argument("--no-progress", action="store_true")
    check_parser = commands.add_parser("check", help="verify a data set's structure (exit status 1 if damaged)")
    check_parser.add_argument("path", help="an .h5df file, .h5dfs#/group path or FilesDaf directory")
    arguments = parser.parse_args(argv)
    try:
        if arguments.command == "demo":
            demo(arguments.output, n_cells=arguments.cells, n_genes=arguments.genes,
                 progress=not arguments.no_progress)
        elif arguments.command == "query":
            query(arguments.path, arguments.query)
        elif arguments.command == "describe":
            describe(arguments.path, deep=arguments.deep)
        elif arguments.command == "check":
            from .check import check_main

            return check_main(arguments.path)
        elif arguments.command == "convert":
            convert(arguments.source, arguments.destination, obs_is=arguments.obs_is, var_is=arguments.var_is,
                    X_is=arguments.X_is, relayout=arguments.relayout, unsupported=arguments.unsupported,
                    progress=not arguments.no_progress)
        else:
            repack(arguments.source, arguments.destination, progress=not arguments.no_progress)
    except DafError as error:
        print(f"pydaf: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
