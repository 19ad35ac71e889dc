"""The ``pydaf`` command: ``demo``, ``query PATH QUERY``, ``describe PATH``, ``repack SRC DST``, ``convert SRC DST``,
``manifest PATH``, ``check PATH``.

Every command opens its paths through the format registry (:mod:`pydaf.formats.registry`), so each works on every
registered format, and each ``--help`` lists them from the registry; ``convert`` also reads AnnData ``.h5ad``, MuData
``.h5mu`` and 10x ``.h5`` files and writes ``.h5ad`` ones. No command replaces an existing file or data set unless
given ``--overwrite``; a new destination's format is the one its name says (``convert --format NAME`` otherwise),
see :mod:`pydaf.composition.destinations`. ``convert`` and ``repack`` print one line saying what they wrote. Each
sub-command's parser names the function that runs it (``set_defaults(func=...)``). Output piped into a command that
stops reading early (``| head``) ends quietly.
"""

from __future__ import annotations

import argparse
import errno
import io
import os
import re
import shlex
import signal
import stat
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, NoReturn

import numpy as np

from ._os.files import file_kind
from ._os.interrupts import InterruptRequested, clear_interrupt, request_interrupt
from .check import check_main
from .composition.destinations import (
    Storage,
    check_destination,
    format_names,
    formats_by_name_text,
    is_h5ad,
    storage_of,
    write_file_then_replace,
)
from .composition.destinations import repack as repack_data_set
from .core.readers import DafReader, DafReadOnlyWrapper
from .demo import MAX_DEMO_VALUES, build_demo, require_demo_sizes
from .errors import DafError, DafFormatError, DafModeError, DafStorageError, DafValueError
from .formats.registry import registered_formats
from .interop.content import UnsupportedElementWarning
from .interop.convert import convert as convert_paths
from .manifest import write_manifest
from .open import foreign_file_kind, open_daf
from .sparse import SparseMatrixCSC, SparseVector

# Paths are checked before anything is opened or written, whatever the format: a FIFO would block its reader, a device
# is no data set, and a destination's folder must be there and writable (so a failure is one line, not a half write).


def _status(path: str, shown: str) -> os.stat_result | None:
    """The status of ``path`` (links followed), ``None`` if nothing is there; a path the system can't use (too long,
    a loop of links, not searchable) is a :class:`~pydaf.DafError` naming ``shown``, the path as given."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        if error.errno == errno.ENAMETOOLONG:
            raise DafValueError(f"the path is too long ({len(shown):,} characters): {shown}") from None
        raise DafStorageError(f"can't use the path: {shown}\nfailed: {error.strerror}") from None


def _storage(path: str, role: str) -> Storage:
    if not path:
        raise DafValueError(f"empty path for the {role}\n(give the path of a data set)")
    return storage_of(path)


def require_source(path: str, role: str = "source") -> None:
    """Refuse a path to read that can't be a data set or a file to convert: an empty one, and a FIFO, socket or device
    (refused before anything opens it: opening a FIFO blocks, reading a device may never end). A missing path is left
    to the opener, which says what is missing.

    Example:
        >>> require_source("/dev/null")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: not a data set but a character device: /dev/null
    """
    status = _status(_storage(path, role).path, path)
    if status is not None and not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode)):
        raise DafFormatError(f"not a data set but {file_kind(status.st_mode)}: {path}")


def require_destination(path: str, role: str = "destination") -> None:
    """Refuse a path to write, before anything is read or written: an empty one, a FIFO, socket or device (even with
    ``--overwrite``), one whose folder is missing or is not a folder, and one this process can't write (its folder,
    or for a group of an existing ``.h5dfs`` file, the file).

    Example:
        >>> require_destination("/no/such/folder/x.h5df")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafStorageError: missing folder: /no/such/folder
        for the destination: /no/such/folder/x.h5df
        (create it first: mkdir -p /no/such/folder)
    """
    if re.match(r"[A-Za-z][A-Za-z0-9+.-]*://", path):  # (a data set served over HTTP is read-only: HttpDaf)
        raise DafModeError(f"can't write to the URL: {path}\n(the {role} is a local path: data sets served over HTTP "
                           "are read-only, HttpDaf)")
    storage = _storage(path, role)
    status = _status(storage.path, path)
    if status is not None and not (stat.S_ISREG(status.st_mode) or stat.S_ISDIR(status.st_mode)):
        raise DafFormatError(f"can't write onto {file_kind(status.st_mode)}: {path}\n(the {role} is a new path, or "
                             "what --overwrite replaces)")
    folder = os.path.dirname(storage.path)
    folder_status = _status(folder, path)
    if folder_status is None:
        raise DafStorageError(f"missing folder: {folder}\nfor the {role}: {path}\n(create it first: mkdir -p "
                              f"{shlex.quote(folder)})")
    if not stat.S_ISDIR(folder_status.st_mode):
        raise DafStorageError(f"not a folder but {file_kind(folder_status.st_mode)}: {folder}\nfor the {role}: {path}")
    written = storage.path if status is not None and storage.group != "/" and ".h5dfs" in path else folder
    if not os.access(written, os.W_OK):
        raise DafStorageError(f"can't write in: {written}\nfor the {role}: {path}\n(permission denied, or a "
                              "read-only file system)")


def demo(path: str | None, *, n_cells: int, n_genes: int, progress: bool, overwrite: bool = False) -> None:
    """Build the demo data set (:func:`~pydaf.demo.build_demo`) at ``path`` (default: a temporary file; an existing
    one is replaced, once the new one is complete, only with ``overwrite``), open it mapped and read-only, and print its
    description and the time of a few reads and queries.

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
    require_demo_sizes(n_cells, n_genes)
    folder = None
    if path is None:
        folder = tempfile.TemporaryDirectory(prefix="pydaf-demo-")
        path = os.path.join(folder.name, "demo.h5df")
    else:
        require_destination(path, "output")
        if storage_of(path).group != "/":
            raise DafValueError(f"not a path for the demo: {path}\n(it writes an H5df file, x.h5df, not a group)")
        check_destination(path, format="h5df", overwrite=overwrite)  # (only an H5df data set is replaced)
    started = time.perf_counter()
    write_file_then_replace(path, lambda temporary: build_demo(temporary, n_cells=n_cells, n_genes=n_genes,
                                                               progress=progress), overwrite=overwrite)
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
    nonzeros = umis.nnz if isinstance(umis, SparseMatrixCSC) else int(np.count_nonzero(umis))
    print(f"get_stored_matrix cell,gene UMIs ({nonzeros:,} non-zeros, zero-copy): {fetched * 1e3:.2f} ms")
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

    require_source(path)
    result = open_daf(path, "r")[text]
    with pd.option_context("display.max_rows", 20, "display.max_columns", 10, "display.width", 120):
        print(sorted(result) if isinstance(result, set) else result)


def describe(path: str, *, deep: bool) -> None:
    """Print the description of the data set at ``path`` (of the data set itself, not of the read-only wrapper it
    is opened through), each vector with a summary of its values (:func:`vector_summary`).

    Example:
        >>> import os, tempfile, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
        >>> daf = pydaf.FilesDaf(path, "w").set_scalar("name", "x!").add_axis("cell", ["A", "B", "C"])
        >>> _ = daf.set_vector("cell", "type", ["T", "B", "T"]).set_vector("cell", "age", [3.5, 1.0, float("nan")])
        >>> describe(path, deep=False)  # doctest: +ELLIPSIS
        name: x!
        type: FilesDaf
        path: ...x.daf
        mode: r
        scalars:
          name: "x!"
        axes:
          cell: 3 entries
        vectors:
          cell:
            age: 3 x Float64 (Dense); min 1, max 3.5, 1 NaN
            type: 3 x Str (Dense); 2 distinct: T (2), B (1)
    """
    require_source(path)
    daf = open_daf(path, "r")
    shown = daf.base if isinstance(daf, DafReadOnlyWrapper) else daf
    print(_with_summaries(shown, shown.description(deep=deep)), end="")


def _with_summaries(daf: DafReader, text: str) -> str:
    """The description ``text`` of ``daf`` with a summary after each of its own vectors (the top-level ``vectors:``
    section; the bases a deep description shows are left as they are)."""
    lines = text.split("\n")
    section, axis = None, None
    names: dict[str, set[str]] = {}
    for index, line in enumerate(lines):
        stripped = line.lstrip(" ")
        depth = len(line) - len(stripped)
        if depth == 0:
            section = stripped[:-1] if stripped.endswith(":") else None
        elif section == "vectors" and depth == 2 and stripped.endswith(":"):
            axis = stripped[:-1]
        elif section == "vectors" and depth == 4 and axis is not None:
            if axis not in names:
                names[axis] = daf.vectors_set(axis)
            name: str | None = stripped.split(": ", 1)[0]
            if name not in names[axis]:  # (a name holding ": ")
                name = next((name for name in names[axis] if stripped.startswith(f"{name}: ")), None)
            summary = None if name is None else vector_summary(daf.get_stored_vector(axis, name))
            if summary:
                lines[index] = f"{line}; {summary}"
    return "\n".join(lines)


#: How many of the most common values of a string vector ``describe`` shows.
_SHOWN_VALUES = 3


def _shown(value: str, width: int = 24) -> str:
    if value == "":
        return '""'
    return value if len(value) <= width else value[:width - 1] + "…"


def _number(value: float | int | np.generic) -> str:
    return f"{value:.6g}" if isinstance(value, float | np.floating) else str(value)


def vector_summary(vector: np.ndarray | SparseVector) -> str | None:
    """A short summary of a vector's values for ``describe``, cheap on large data: for strings, the number of
    distinct values and the most common ones (with their counts); for numbers, the minimum and maximum (and the number
    of NaNs, if any), over the stored non-zeros of a sparse vector (and 0, if any is not stored). ``None`` for booleans
    (the description already counts them) and empty vectors.

    Example:
        >>> vector_summary(np.array(["b", "a", "b", ""], dtype=object)), vector_summary(np.array([2, 7, 0], np.uint8))
        ('3 distinct: b (2), "" (1), a (1)', 'min 0, max 7')
    """
    if isinstance(vector, SparseVector):
        values = np.asarray(vector.nzval)
        with_zero = vector.nnz < vector.shape[0]
    else:
        values, with_zero = np.asarray(vector), False
    if values.dtype == bool or (values.size == 0 and not with_zero):
        return None
    if values.dtype.kind in "OUS":
        import pandas as pd  # (only for strings: hashing counts them faster than sorting)

        counts = pd.Series(values).value_counts(sort=False)
        counts = counts.iloc[np.lexsort((counts.index.astype(str), -counts.to_numpy()))]  # most common, then by name
        shown = ", ".join(f"{_shown(str(value))} ({count})" for value, count in counts.iloc[:_SHOWN_VALUES].items())
        more = ", …" if len(counts) > _SHOWN_VALUES else ""
        return f"{len(counts)} distinct: {shown}{more}"
    nans = int(np.count_nonzero(np.isnan(values))) if values.dtype.kind == "f" else 0
    parts = []
    finite = values[~np.isnan(values)] if nans else values
    bounds = ([finite.min().item(), finite.max().item()] if finite.size else []) + ([0] if with_zero else [])
    if bounds:
        parts.append(f"min {_number(min(bounds))}, max {_number(max(bounds))}")
    if nans:
        parts.append("all NaN" if nans == values.size and not with_zero else f"{nans:,} NaN")
    return ", ".join(parts)


def _count(number: int, singular: str, plural: str) -> str:
    return f"{number:,} {singular if number == 1 else plural}"


def written_summary(path: str) -> str:
    """The line ``convert`` and ``repack`` print about what they wrote at ``path``: its format and what it holds.

    Example:
        >>> import os, tempfile, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
        >>> _ = pydaf.FilesDaf(path, "w").add_axis("cell", ["A", "B"]).set_vector("cell", "age", [3, 5])
        >>> written_summary(path)  # doctest: +ELLIPSIS
        'wrote FilesDaf "...x.daf": 1 axis, 1 vector, 0 matrices, 0 scalars'
    """
    if is_h5ad(path) or foreign_file_kind(path) == "anndata":
        return _written_h5ad_summary(path)
    daf = open_daf(path, "r")
    shown = daf.base if isinstance(daf, DafReadOnlyWrapper) else daf
    axes = sorted(daf.axes_set())
    vectors = sum(len(daf.vectors_set(axis)) for axis in axes)
    matrices = {(frozenset((rows, columns)), name) for rows in axes for columns in axes
                for name in daf.matrices_set(rows, columns, relayout=False)}
    return (f'wrote {type(shown).__name__} "{path}": {_count(len(axes), "axis", "axes")}, '
            f'{_count(vectors, "vector", "vectors")}, {_count(len(matrices), "matrix", "matrices")}, '
            f'{_count(len(daf.scalars_set()), "scalar", "scalars")}')


def _written_h5ad_summary(path: str) -> str:
    import h5py

    with h5py.File(path, "r") as file:
        lengths, columns = [], []
        for member in ("obs", "var"):
            frame = file[member]
            if isinstance(frame, h5py.Group):
                lengths.append(len(frame[frame.attrs["_index"]]))
                columns.append(len(frame.attrs.get("column-order", [])))
            else:  # anndata < 0.7: a compound dataset
                lengths.append(len(frame))
                columns.append(len(frame.dtype.names or ()) - 1)
        layers = len(file["layers"]) if "layers" in file else 0
        matrix = "X" if "X" in file else "no X"
    return (f'wrote AnnData "{path}": {lengths[0]:,} obs x {lengths[1]:,} var, {matrix}, '
            f'{_count(layers, "layer", "layers")}, {columns[0]:,} obs and {columns[1]:,} var columns')


def repack(source: str, destination: str, *, progress: bool, overwrite: bool = False) -> None:
    """Rewrite the data set at ``source`` compactly into ``destination``, with its format's repack (H5df's
    :func:`~pydaf.repack`), and print what was written; a :class:`~pydaf.DafFormatError` for formats that have none.
    An existing destination is replaced (once the new one is complete) only with ``overwrite``.

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
    require_source(source)
    require_destination(destination)
    repack_data_set(source, destination, progress=progress, overwrite=overwrite)
    print(written_summary(destination))


def manifest(path: str, output: str | None, *, overwrite: bool = False) -> None:
    """Write the manifest of the data set at ``path`` (:func:`~pydaf.manifest.write_manifest`) to ``output`` (an
    existing file replaced, once the new one is complete, only with ``overwrite``), or print it.

    Example:
        >>> import os, tempfile, pydaf
        >>> folder = tempfile.mkdtemp()
        >>> _ = pydaf.FilesDaf(os.path.join(folder, "x.daf"), "w").set_scalar("version", 1)
        >>> manifest(os.path.join(folder, "x.daf"), os.path.join(folder, "x.json"))
        >>> manifest(os.path.join(folder, "x.daf"), os.path.join(folder, "x.json"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafExistsError: the destination exists: ...x.json
        (to replace it, pass --overwrite to the pydaf command, or overwrite=True in Python)
    """
    require_source(path, "data set")
    if output is not None:
        require_destination(output, "output")
    write_manifest(path, output, overwrite=overwrite)


def _print_skipped(message: Warning | str, category: type[Warning], filename: str, lineno: int, file=None,
                   line=None, *, show=warnings.showwarning) -> None:
    """One line per skipped AnnData element (the first line of its warning); other warnings as Python shows them."""
    if issubclass(category, UnsupportedElementWarning):
        print(f"pydaf: warning: {str(message).splitlines()[0]}", file=sys.stderr)
    else:
        show(message, category, filename, lineno, file, line)


def convert(source: str, destination: str, *, obs_is: str | None = None, var_is: str | None = None,
            X_is: str | None = None, relayout: bool = False, unsupported: str = "warn", modality: str | None = None,
            genome: str | None = None, gex_only: bool = True, obsm: bool = True, varm: bool = True,
            raw: bool = True, format: str | None = None, overwrite: bool = False, progress: bool = True,
            packed: bool = False) -> None:
    """Convert between ``.h5ad`` files and Daf data sets of any format, or from a modality of an ``.h5mu`` file or a
    10x ``.h5`` matrix into a Daf data set (:mod:`pydaf.interop.convert`), and print what was written. The
    destination's format is the one its name says, or ``format``; an existing destination is replaced (once the
    conversion is complete) only with ``overwrite``. Each element skipped (``unsupported="warn"``) is printed on one
    line.

    Example:
        >>> import os, tempfile, numpy as np, pydaf
        >>> folder = tempfile.mkdtemp()
        >>> daf = pydaf.H5df(os.path.join(folder, "a.h5df"), "w").add_axis("obs", ["A"]).add_axis("var", ["X"])
        >>> _ = daf.set_matrix("obs", "var", "X", np.array([[7.0]]))
        >>> convert(os.path.join(folder, "a.h5df"), os.path.join(folder, "b.h5ad"), progress=False)
        ... # doctest: +ELLIPSIS
        wrote AnnData "...b.h5ad": 1 obs x 1 var, X, 0 layers, 0 obs and 0 var columns
        >>> convert(os.path.join(folder, "b.h5ad"), os.path.join(folder, "c.daf"), progress=False)
        ... # doctest: +ELLIPSIS
        wrote FilesDaf "...c.daf": 2 axes, 0 vectors, 1 matrix, 0 scalars
        >>> pydaf.open_daf(os.path.join(folder, "c.daf")).get_matrix("obs", "var", "X").tolist()
        [[7.0]]
    """
    require_source(source)
    require_destination(destination)
    with warnings.catch_warnings():
        warnings.simplefilter("always", UnsupportedElementWarning)
        warnings.showwarning = _print_skipped
        convert_paths(source, destination, obs_is=obs_is, var_is=var_is, X_is=X_is, relayout=relayout,
                      unsupported=unsupported, modality=modality, genome=genome, gex_only=gex_only,
                      obsm=obsm, varm=varm, raw=raw, format=format, overwrite=overwrite, progress=progress,
                      packed=packed)
    print(written_summary(destination))


def check(path: str) -> int:
    """``pydaf check PATH`` (:func:`~pydaf.check.check_main`): the exit status, 1 if the data set is damaged; a path
    that can't be a data set is refused first (:func:`require_source`).

    Example:
        >>> import os, tempfile, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
        >>> _ = pydaf.FilesDaf(path, "w").add_axis("cell", ["A"])
        >>> check(path)  # doctest: +ELLIPSIS
        /...x.daf: sound (0 scalars, 1 axes, 0 vectors, 0 matrices checked)
        0
    """
    require_source(path)
    return check_main(path)


def _version() -> str:
    """The installed package's version (its metadata), else the module's ``__version__``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pydaf")
    except PackageNotFoundError:
        from . import __version__

        return __version__


def _daf_formats(heading: str = "formats (told by the path's content first, then by its name):") -> str:
    """The registered formats, one per line, as the epilog of a command's ``--help``."""
    return heading + "\n" + "\n".join(f"  {entry.name}: {entry.paths}" for entry in registered_formats())


_READS_SINGLE_CELL = ("  h5ad: an AnnData file (x.h5ad)\n  MuData: a modality of an x.h5mu file (--modality NAME)\n"
                      "  10x: a Cell Ranger matrix (x.h5)")

_QUERY_EPILOG = """\
the query language: help(pydaf.queries) in Python, and docs/queries.md in the repository
(Julia's Daf query language). Quote the whole query for the shell; inside it, a value with characters other
than letters, digits and _.+- is escaped with \\ (as pydaf.queries.escape_value does), '' is the empty string.
examples:
  pydaf query cells.h5df ". organism"
  pydaf query cells.h5df "@ donor [ age > 60 ] : sex"
  pydaf query cells.h5df '@ cell [ donor = N89 ] @ gene :: UMIs >| Sum'
  pydaf query cells.h5df '@ cell [ batch = ACTG\\:Plate1 ] : donor'     (a value holding ":", escaped)
"""


#: Longer runs of non-blank characters (a huge path or query) are shown abbreviated in an error line.
_LONGEST_SHOWN = 300


def _abbreviated(match: re.Match) -> str:
    text = match.group(0)
    return f"{text[:200]}…{text[-60:]} ({len(text):,} characters)"


def error_text(command: str, message: str) -> str:
    """The lines ``pydaf`` prints on standard error for a failure of ``command``: one line ``<command>: error: ...``
    (the message's lines joined, control characters escaped, a huge path abbreviated), then at most one hint line,
    the message's parenthesised advice.

    Example:
        >>> print(error_text("pydaf convert", "the destination exists: x.h5df\\n(to replace it, pass --overwrite)"))
        pydaf convert: error: the destination exists: x.h5df
        (to replace it, pass --overwrite)
        >>> print(error_text("pydaf query", "missing axis: cel\\nin the daf data: x!\\n(did you mean: cell?)"))
        pydaf query: error: missing axis: cel; in the daf data: x!
        (did you mean: cell?)
    """
    parts: list[str] = []
    hints: list[str] = []
    in_hint = False
    for line in message.split("\n"):
        line = line.strip()
        if not line:
            continue
        if in_hint or line.startswith("("):
            hints.append(line)
            in_hint = not line.endswith(")")
        elif parts and parts[-1].endswith(":"):
            parts[-1] = f"{parts[-1]} {line}"
        else:
            parts.append(line)
    lines = [f"{command}: error: {'; '.join(parts) or 'failed'}"] + ([" ".join(hints)] if hints else [])
    shown = [re.sub(r"[\x00-\x1f\x7f]", lambda match: f"\\x{ord(match.group(0)):02x}", line) for line in lines]
    return "\n".join(re.sub(rf"\S{{{_LONGEST_SHOWN + 1},}}", _abbreviated, line) for line in shown)


class _Parser(argparse.ArgumentParser):
    """A parser whose usage errors take the one-line form of every error (and exit status 2, as argparse's);
    ``commands``, the parser of each sub-command."""

    commands: dict[str, argparse.ArgumentParser]

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{error_text(self.prog, message)}\n(see: {self.prog} --help)\n")

    def _print_message(self, message: str, file: Any = None) -> None:
        if message:  # (argparse's own drops a failed write: --help into a full disk would succeed)
            (file or sys.stderr).write(message)


def _whole_number(what: str, most: int) -> Callable[[str], int]:
    """An argparse type: a whole number from 1 to ``most``."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip().replace("_", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number of {what}: {text!r}") from None
        if not 1 <= value <= most:
            raise argparse.ArgumentTypeError(f"the number of {what} must be from 1 to {most:,}, not {value:,}")
        return value

    return parse


class _CheckedOutput(io.TextIOBase):
    """Standard output whose write failures (a full disk: ``> /dev/full``) are raised as a
    :class:`~pydaf.DafStorageError`; a reader gone away (``BrokenPipeError``) is left to :func:`main`."""

    def __init__(self, stream: io.TextIOBase) -> None:
        self.stream = stream

    def _checked(self, action: Callable[[], object]) -> object:
        try:
            return action()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise DafStorageError(f"can't write the standard output\nfailed: {error.strerror or error}") from None

    def write(self, text: str) -> int:
        return self._checked(lambda: self.stream.write(text))  # type: ignore[return-value]

    def flush(self) -> None:
        self._checked(self.stream.flush)

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding


def _parser() -> _Parser:
    parser = _Parser(prog="pydaf", description="Daf data sets in native Python.")
    parser.add_argument("--version", action="version", version=f"pydaf {_version()}")
    commands = parser.add_subparsers(dest="command", required=True)
    raw = argparse.RawDescriptionHelpFormatter
    paths = "a Daf data set of any format below"
    overwrite = "replace an existing destination (a Daf data set), once the new one is complete"

    demo_parser = commands.add_parser("demo", help="build a synthetic single-cell data set as H5df and read it mapped",
                                      epilog="writes an H5df file (x.h5df)", formatter_class=raw)
    demo_parser.add_argument("--output", help="where to write the .h5df (default: a temporary file)")
    demo_parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    demo_parser.add_argument("--cells", type=_whole_number("cells", MAX_DEMO_VALUES), default=20_000,
                             help="how many cells (default: 20,000)")
    demo_parser.add_argument("--genes", type=_whole_number("genes", MAX_DEMO_VALUES), default=2_000,
                             help=f"how many genes (default: 2,000; at most {MAX_DEMO_VALUES:,} cells x genes)")
    demo_parser.add_argument("--no-progress", action="store_true")
    demo_parser.set_defaults(func=lambda arguments: demo(arguments.output, n_cells=arguments.cells,
                                                         n_genes=arguments.genes, progress=not arguments.no_progress,
                                                         overwrite=arguments.overwrite))

    describe_parser = commands.add_parser(
        "describe", help="print the description of a data set, with a summary of each vector's values",
        epilog=_daf_formats(), formatter_class=raw)
    describe_parser.add_argument("path", help=paths)
    describe_parser.add_argument("--deep", action="store_true", help="also describe the data sets it is built on")
    describe_parser.set_defaults(func=lambda arguments: describe(arguments.path, deep=arguments.deep))

    query_parser = commands.add_parser("query", help="apply a query to a data set and print the result",
                                       epilog=f"{_QUERY_EPILOG}\n{_daf_formats()}", formatter_class=raw)
    query_parser.add_argument("path", help=paths)
    query_parser.add_argument("query", help='a Daf query, e.g. "@ cell [ age > 60 ] : donor"')
    query_parser.set_defaults(func=lambda arguments: query(arguments.path, arguments.query))

    manifest_parser = commands.add_parser(
        "manifest", help="write the manifest of a data set: its properties and a hash of each (see julia/verify.jl)",
        epilog=_daf_formats(), formatter_class=raw)
    manifest_parser.add_argument("path", help=paths)
    manifest_parser.add_argument("--output", help="the JSON file to write (default: print it)")
    manifest_parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    manifest_parser.set_defaults(func=lambda arguments: manifest(arguments.path, arguments.output,
                                                                 overwrite=arguments.overwrite))

    repackable = [entry for entry in registered_formats() if entry.repack is not None]
    repack_parser = commands.add_parser(
        "repack", help="rewrite a data set compactly into a new one (formats: "
                       f"{', '.join(entry.name for entry in repackable)})", formatter_class=raw,
        epilog="formats that can be repacked (the destination is of the source's format):\n" + "\n".join(
            f"  {entry.name}: {entry.paths}" for entry in repackable))
    repack_parser.add_argument("source", help=paths)
    repack_parser.add_argument("destination", help="where to write the repacked data set (a new path)")
    repack_parser.add_argument("--overwrite", action="store_true", help=overwrite)
    repack_parser.add_argument("--no-progress", action="store_true")
    repack_parser.set_defaults(func=lambda arguments: repack(arguments.source, arguments.destination,
                                                             progress=not arguments.no_progress,
                                                             overwrite=arguments.overwrite))

    convert_parser = commands.add_parser(
        "convert", help="convert between any two of: AnnData .h5ad files and Daf data sets of every format; also "
                        "from .h5mu modalities and 10x Cell Ranger .h5 matrices", formatter_class=raw,
        epilog=f"{_daf_formats('sources (told by the content first, then by the name):')}\n{_READS_SINGLE_CELL}\n\n"
               "destinations: an existing one keeps its format (replaced only with --overwrite); a new one's is the "
               "one its\nname says:\n" + formats_by_name_text().replace("- ", "  ") + "\nor, under any name, the "
               "one --format NAME gives.")
    convert_parser.add_argument("source", help="a Daf data set, or an .h5ad, .h5mu or 10x .h5 file")
    convert_parser.add_argument("destination", help="a Daf data set or an .h5ad file (see below)")
    convert_parser.add_argument("--format", help=f"the destination's format, when its name says none: one of "
                                f"{', '.join(format_names())} (any case; also files, zarr, zip)")
    convert_parser.add_argument("--overwrite", action="store_true", help=overwrite + " (or an .h5ad file)")
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
    convert_parser.add_argument("--no-obsm", action="store_true",
                                help="an .h5ad source: skip obsm (default: its numeric elements become matrices "
                                     "over the axes obsm_<key>)")
    convert_parser.add_argument("--no-varm", action="store_true",
                                help="an .h5ad source: skip varm (default: as obsm, over the axes varm_<key>)")
    convert_parser.add_argument("--no-raw", action="store_true",
                                help="an .h5ad source: skip raw (default: kept as the axis raw_<var axis> with "
                                     "raw.X and raw.var's columns, and the scalar raw_is)")
    convert_parser.add_argument("--packed", action="store_true",
                                help="write the Daf destination packed: each property of 8 KiB or more chunked and "
                                     "compressed (codec and level: DAF_PACKED_COMPRESSION, "
                                     "DAF_PACKED_COMPRESSION_LEVEL; default blosc_zstd_bitshuffle, 5); not for .h5ad")
    convert_parser.add_argument("--no-progress", action="store_true")
    convert_parser.set_defaults(func=lambda arguments: convert(
        arguments.source, arguments.destination, obs_is=arguments.obs_is, var_is=arguments.var_is,
        X_is=arguments.X_is, relayout=arguments.relayout, unsupported=arguments.unsupported,
        modality=arguments.modality, genome=arguments.genome, gex_only=not arguments.all_features,
        obsm=not arguments.no_obsm, varm=not arguments.no_varm, raw=not arguments.no_raw, format=arguments.format,
        overwrite=arguments.overwrite, progress=not arguments.no_progress, packed=arguments.packed))

    check_parser = commands.add_parser("check", help="verify a data set's structure (exit status 1 if damaged)",
                                       epilog=_daf_formats(), formatter_class=raw)
    check_parser.add_argument("path", help=paths)
    check_parser.set_defaults(func=lambda arguments: check(arguments.path))
    parser.commands = dict(commands.choices)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the ``pydaf`` command line. Every failure is reported here, in one place, as :func:`error_text` words it:
    a :class:`~pydaf.DafError` exits 1 (as does a damaged data set for ``check``), a usage error 2, an interrupt
    (Ctrl-C) 130; anything else is a bug, shown with its traceback. Output whose reader went away (``pydaf query ... |
    head``) ends quietly, with exit status 1, as the Python documentation recommends for ``SIGPIPE``.

    Example:
        >>> main(["describe", "/no/such/file.h5df"])  # prints "pydaf describe: error: missing H5df file: ..." to stderr
        1
    """
    command = "pydaf"
    output = sys.stdout
    errors = getattr(output, "errors", None)
    if isinstance(output, io.TextIOWrapper) and errors == "strict":
        output.reconfigure(errors="surrogateescape")  # (a path of non-UTF-8 bytes is printed as the bytes it is)
    sys.stdout = _CheckedOutput(output)  # type: ignore[arg-type]
    interrupts = _Interrupts()
    try:
        try:
            parser = _parser()
            arguments, extra = parser.parse_known_args(argv)  # (exits, with status 0 or 2, on --help or bad usage)
            command = f"pydaf {arguments.command}"
            if extra:  # (said by the command's parser, as every other usage error of the command)
                parser.commands[arguments.command].error(f"unrecognized arguments: {' '.join(extra)}")
            status = arguments.func(arguments)
            if interrupts.count:  # (raised in a callback that dropped it: the command ended as if not interrupted)
                raise InterruptRequested()
        finally:
            sys.stdout.flush()  # (a closed pipe or a full disk fails here, not later when Python flushes at exit)
    except BrokenPipeError:
        _drop_output(output)
        return 1
    except KeyboardInterrupt:
        print(f"{command}: error: interrupted", file=sys.stderr)
        return 130
    except DafError as error:
        if interrupts.count:  # (Ctrl-C inside a library's callback, which reported it as its own failure)
            print(f"{command}: error: interrupted", file=sys.stderr)
            return 130
        if isinstance(error, DafStorageError) and "standard output" in error.problem:
            _drop_output(output)
        print(error_text(command, str(error)), file=sys.stderr)
        return 1
    finally:
        sys.stdout = output
        interrupts.restore()
        if isinstance(output, io.TextIOWrapper) and errors == "strict" and not output.closed:
            output.reconfigure(errors=errors)
    return status or 0


class _Interrupts:
    """While :func:`main` runs, Ctrl-C (SIGINT) raises :class:`~pydaf._os.interrupts.InterruptRequested`, is counted
    and recorded (:func:`~pydaf._os.interrupts.request_interrupt`), so an interrupt that a library reported as its own
    failure, or dropped, is still reported as an interrupt (exit status 130) and never followed by a commit. Left
    alone if SIGINT is not Python's default (ignored in a background job, or handled by the caller) or outside the
    main thread."""

    def __init__(self) -> None:
        self.count = 0
        self.previous = None
        if threading.current_thread() is threading.main_thread() and \
                signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self.previous = signal.signal(signal.SIGINT, self._interrupt)
            self.previous_hook = sys.unraisablehook
            sys.unraisablehook = self._unraisable

    def _unraisable(self, unraisable: Any) -> None:
        """Python's report of an exception raised where it can't propagate (a weakref callback, ``__del__``): the
        interrupt raised there is recorded already, so it is not printed as an error."""
        if not isinstance(unraisable.exc_value, InterruptRequested):
            self.previous_hook(unraisable)

    def _interrupt(self, signum: int, frame: object) -> None:
        self.count += 1
        request_interrupt()  # (the raise below may land in a callback that drops it: conversions check the record)
        raise InterruptRequested()

    def restore(self) -> None:
        if self.previous is not None:
            signal.signal(signal.SIGINT, self.previous)
            sys.unraisablehook = self.previous_hook
            clear_interrupt()


def _drop_output(output: Any) -> None:
    """Point standard output at ``/dev/null``, so Python's flush at exit can't fail again (what could not be written
    is dropped)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, output.fileno())
    except (OSError, ValueError, io.UnsupportedOperation):
        pass  # (not a file: nothing is flushed at exit)
    finally:
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
