"""The ``pydaf`` command: ``demo``, ``query PATH QUERY``, ``describe PATH``, ``repack SRC DST``, ``convert SRC DST``,
``manifest PATH``.

Every command opens its paths through the format registry (:mod:`pydaf.formats.registry`), so each works on every
registered format; ``convert`` also reads and writes AnnData ``.h5ad`` files. Each sub-command's parser names the
function that runs it (``set_defaults(func=...)``).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

import numpy as np

from .check import check_main
from .demo import build_demo
from .errors import DafError, DafFormatError
from .formats.registry import guess_format, registered_formats
from .interop.content import UnsupportedElementWarning
from .interop.convert import convert as convert_paths
from .manifest import write_manifest
from .open import open_daf


def demo(path: str | None, *, n_cells: int, n_genes: int, progress: bool) -> None:
    """Build the demo data set (:func:`~pydaf.demo.build_demo`) at ``path`` (default: a temporary file), open it
    mapped and read-only, and print its description and the time of a few reads and queries.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "demo.h5df")
        >>> demo(path, n_cells=100, n_genes=50, progress=False)  # doctest: +ELLIPSIS
        name: ...demo.h5df.read_only
        type: ReadOnly
        base: H5df ...demo.h5df
        ...
        @ cell [ donor_age > 60 ] : type * donor_age: DataFrame (8, 17) in ... ms
    """
    folder = None
    if path is None:
        folder = tempfile.TemporaryDirectory(prefix="pydaf-demo-")
        path = os.path.join(folder.name, "demo.h5df")
    started = time.perf_counter()
    build_demo(path, n_cells=n_cells, n_genes=n_genes, progress=progress)
    written = time.perf_counter() - started

    started = time.perf_counter()
    daf = open_daf(path, "r")
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
    """Print the result of a query applied to the data set at ``path`` (pandas results abbreviated, sets sorted).

    Example:
        >>> import os, tempfile, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
        >>> _ = pydaf.FilesDaf(path, "w").add_axis("cell", ["A", "B"]).set_vector("cell", "age", [3, 5])
        >>> query(path, "@ cell : age >> Sum")
        8
    """
    import pandas as pd  # only for printing; importing it costs more than the rest of a small query

    result = open_daf(path, "r")[text]
    with pd.option_context("display.max_rows", 20, "display.max_columns", 10, "display.width", 120):
        print(sorted(result) if isinstance(result, set) else result)


def describe(path: str, *, deep: bool) -> None:
    """Print the description of the data set at ``path``.

    Example:
        >>> import os, tempfile, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
        >>> _ = pydaf.FilesDaf(path, "w").set_scalar("name", "x!").add_axis("cell", ["A", "B"])
        >>> describe(path, deep=False)
        name: x!.read_only
        type: ReadOnly
        base: FilesDaf x!
        scalars:
          name: "x!"
        axes:
          cell: 2 entries
    """
    print(open_daf(path, "r").description(deep=deep), end="")


def repack(source: str, destination: str, *, progress: bool) -> None:
    """Rewrite the data set at ``source`` compactly into ``destination``, with its format's repack (H5df's
    :func:`~pydaf.repack`); a :class:`~pydaf.DafFormatError` for formats that have none.

    Example:
        >>> import os, tempfile, pydaf
        >>> folder = tempfile.mkdtemp()
        >>> _ = pydaf.FilesDaf(os.path.join(folder, "x.daf"), "w")
        >>> repack(os.path.join(folder, "x.daf"), os.path.join(folder, "y.daf"), progress=False)
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: can't repack the FilesDaf data set: ...x.daf
        (only these formats can be repacked: H5df)
    """
    entry = guess_format(source)
    if entry.repack is None:
        able = ", ".join(known.name for known in registered_formats() if known.repack is not None)
        raise DafFormatError(f"can't repack the {entry.name} data set: {source}\n"
                             f"(only these formats can be repacked: {able})")
    entry.repack(source, destination, progress=progress)


def _print_skipped(message: Warning | str, category: type[Warning], filename: str, lineno: int, file=None,
                   line=None, *, show=warnings.showwarning) -> None:
    """One line per skipped AnnData element (the first line of its warning); other warnings as Python shows them."""
    if issubclass(category, UnsupportedElementWarning):
        print(f"pydaf: warning: {str(message).splitlines()[0]}", file=sys.stderr)
    else:
        show(message, category, filename, lineno, file, line)


def convert(source: str, destination: str, *, obs_is: str | None = None, var_is: str | None = None,
            X_is: str | None = None, relayout: bool = False, unsupported: str = "warn", modality: str | None = None,
            genome: str | None = None, gex_only: bool = True, progress: bool = True) -> None:
    """Convert between ``.h5ad`` files and Daf data sets (``.h5df``, ``.h5dfs#/group``, FilesDaf directories), chosen
    by the paths, or from a modality of an ``.h5mu`` file or a 10x ``.h5`` matrix into a Daf data set; the
    destination is replaced once the conversion is complete (:mod:`pydaf.interop.convert`). Each element skipped
    (``unsupported="warn"``) is printed on one line.

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
    with warnings.catch_warnings():
        warnings.simplefilter("always", UnsupportedElementWarning)
        warnings.showwarning = _print_skipped
        convert_paths(source, destination, obs_is=obs_is, var_is=var_is, X_is=X_is, relayout=relayout,
                      unsupported=unsupported, modality=modality, genome=genome, gex_only=gex_only,
                      progress=progress)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pydaf", description="Daf data sets in native Python.")
    commands = parser.add_subparsers(dest="command", required=True)
    paths = ".h5df file, .h5dfs#/group path or FilesDaf directory"

    demo_parser = commands.add_parser("demo", help="build a synthetic single-cell data set as H5df and read it mapped")
    demo_parser.add_argument("--output", help="where to write the .h5df (default: a temporary file)")
    demo_parser.add_argument("--cells", type=int, default=20_000)
    demo_parser.add_argument("--genes", type=int, default=2_000)
    demo_parser.add_argument("--no-progress", action="store_true")
    demo_parser.set_defaults(func=lambda arguments: demo(arguments.output, n_cells=arguments.cells,
                                                         n_genes=arguments.genes, progress=not arguments.no_progress))

    describe_parser = commands.add_parser("describe", help="print the description of a data set")
    describe_parser.add_argument("path", help=f"an {paths}")
    describe_parser.add_argument("--deep", action="store_true")
    describe_parser.set_defaults(func=lambda arguments: describe(arguments.path, deep=arguments.deep))

    query_parser = commands.add_parser("query", help="apply a query to a data set and print the result")
    query_parser.add_argument("path", help=f"an {paths}")
    query_parser.add_argument("query", help='a Daf query, e.g. "@ cell [ age > 60 ] : donor"')
    query_parser.set_defaults(func=lambda arguments: query(arguments.path, arguments.query))

    manifest_parser = commands.add_parser(
        "manifest", help="write the manifest of a data set: its properties and a hash of each (see julia/verify.jl)")
    manifest_parser.add_argument("path", help=f"an {paths}")
    manifest_parser.add_argument("--output", help="the JSON file to write (default: print it)")
    manifest_parser.set_defaults(func=lambda arguments: write_manifest(arguments.path, arguments.output))

    repack_parser = commands.add_parser("repack", help="rewrite an H5df data set compactly into a new file")
    repack_parser.add_argument("source")
    repack_parser.add_argument("destination")
    repack_parser.add_argument("--no-progress", action="store_true")
    repack_parser.set_defaults(func=lambda arguments: repack(arguments.source, arguments.destination,
                                                             progress=not arguments.no_progress))

    convert_parser = commands.add_parser(
        "convert", help="convert between any two of: .h5ad files and Daf data sets (.h5df, .h5dfs#/group, FilesDaf "
                        "directories, .daf.zarr, .daf.zarr.zip, .dafs.zarr.zip#/group, .daf.zip, .dafs.zip#/group); "
                        "also from .h5mu modalities and 10x Cell Ranger .h5 matrices")
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
    convert_parser.add_argument("--modality", help="the modality of an .h5mu source to import (e.g. rna)")
    convert_parser.add_argument("--genome", help="a 10x .h5 source: keep only this genome's features")
    convert_parser.add_argument("--all-features", action="store_true",
                                help="a 10x .h5 source: keep every feature type (default: Gene Expression only)")
    convert_parser.add_argument("--no-progress", action="store_true")
    convert_parser.set_defaults(func=lambda arguments: convert(
        arguments.source, arguments.destination, obs_is=arguments.obs_is, var_is=arguments.var_is,
        X_is=arguments.X_is, relayout=arguments.relayout, unsupported=arguments.unsupported,
        modality=arguments.modality, genome=arguments.genome, gex_only=not arguments.all_features,
        progress=not arguments.no_progress))

    check_parser = commands.add_parser("check", help="verify a data set's structure (exit status 1 if damaged)")
    check_parser.add_argument("path", help=f"an {paths}")
    check_parser.set_defaults(func=lambda arguments: check_main(arguments.path))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``pydaf`` command line; a :class:`~pydaf.DafError` is printed (without a traceback) and exits 1, as
    does a damaged data set for ``check``.

    Example:
        >>> main(["describe", "/no/such/file.h5df"])  # prints "pydaf: missing H5df file: ..." to stderr
        1
    """
    arguments = _parser().parse_args(argv)
    try:
        status = arguments.func(arguments)
    except DafError as error:
        print(f"pydaf: {error}", file=sys.stderr)
        return 1
    return status or 0


if __name__ == "__main__":
    sys.exit(main())
