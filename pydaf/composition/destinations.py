"""Where conversions write: a new data set built next to its destination (a hidden sibling directory, file, group, or a
copy of an append-only archive) and moved into place only when complete, so a failure leaves the destination as it
was. An existing destination is replaced only when asked, and only if it is a Daf data set; a new destination's
format is the one its name says (:func:`resolve_format`), or the one given; a source and destination sharing their
storage are refused.

Design: docs/design/conversions.md.

Example:
    >>> import os, tempfile, pydaf
    >>> folder = tempfile.mkdtemp()
    >>> build_daf(os.path.join(folder, "x.daf"), lambda daf: daf.set_scalar("n", 1), name="x!").get_scalar("n")
    np.int64(1)
    >>> sorted(os.listdir(folder))
    ['x.daf']
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import h5py

from .._os.exchange import exchange_paths
from .._os.files import file_kind, refuse_special_file, special_file_mode
from .._os.interrupts import raise_if_interrupted
from .._os.locks import process_is_alive
from ..abc.format import FormatWriter
from ..core.readers import DafReader
from ..core.writers import DafWriter
from ..errors import (
    DafAppendOnlyError,
    DafError,
    DafExistsError,
    DafFormatError,
    DafIncompleteError,
    DafModeError,
    DafNotDafError,
    DafValueError,
)
from ..formats.h5df import FORMAT as H5DF_FORMAT
from ..formats.h5df.format import H5df, split_h5df_path
from ..formats.h5df.open_files import open_h5_file
from ..formats.incomplete_copy import building_aside, clear_incomplete_copy
from ..formats.paths import split_container_path, storage_path
from ..formats.registry import FormatEntry, guess_format, registered_formats
from ..formats.zip.store import acquire_zip_store, replace_archive
from ..open import foreign_file_kind

__all__ = [
    "ANNDATA",
    "Storage",
    "build_daf",
    "check_destination",
    "clean_leftovers",
    "format_names",
    "formats_by_name_text",
    "is_h5ad",
    "repack",
    "require_absent",
    "require_distinct",
    "require_replaceable",
    "resolve_format",
    "storage_of",
    "write_file_then_replace",
]

#: The name :func:`resolve_format` gives AnnData ``.h5ad`` destinations (the others are the registry's names).
ANNDATA = "h5ad"

#: The suffix that names a new FilesDaf directory (FilesDaf is the registry's fallback: any new path would do for
#: :func:`~pydaf.open_daf`, so a conversion asks for a name that says so).
FILES_SUFFIX = ".daf"


def is_h5ad(path: str | os.PathLike) -> bool:
    """Whether a path names an AnnData file (by its suffix).

    Example:
        >>> is_h5ad("cells.h5ad"), is_h5ad("cells.h5df")
        (True, False)
    """
    return os.fspath(path).endswith(".h5ad")


#: The suffixes of single-data-set archives and of archives of several data sets (``#/group``), longest first.
_ARCHIVE_SUFFIXES = (".daf.zarr.zip", ".daf.zip")
_GROUPS_SUFFIXES = (".dafs.zarr.zip", ".dafs.zip")


@dataclass(frozen=True)
class Storage:
    """Where a data set lives: a ``file`` (``.h5df``, ``.h5dfs``, ``.h5ad``) with a ``group`` (``/`` for the file
    itself), or a ``directory`` (FilesDaf). Paths are absolute, symlinks resolved."""

    path: str
    group: str
    is_directory: bool

    def text(self) -> str:
        return self.path if self.group == "/" else f"{self.path}#{self.group}"


def storage_of(path: str | os.PathLike) -> Storage:
    """The :class:`Storage` of a path as :func:`~pydaf.open_daf` (or the AnnData functions) would use it.

    Example:
        >>> storage_of("/data/x.h5dfs#/cells").group, storage_of("/data/x.daf").is_directory
        ('/cells', True)
    """
    text = os.fspath(path)
    if is_h5ad(text) or text.endswith(_ARCHIVE_SUFFIXES):
        return Storage(os.path.realpath(text), "/", False)
    if any(f"{suffix}#/" in text for suffix in _GROUPS_SUFFIXES):
        archive, group = _split_archive_group(text)
        return Storage(os.path.realpath(archive), "/" + group.strip("/"), False)
    if text.endswith(".h5df") or ".h5dfs#/" in text:
        file, group = split_h5df_path(text)
        return Storage(os.path.realpath(file), "/" + group.strip("/") if group != "/" else "/", False)
    return Storage(os.path.realpath(text), "/", True)


def _split_archive_group(text: str) -> tuple[str, str]:
    """``(archive, group)`` of a group of a multi-daf archive (``x.dafs.zip#/group``), by the one path grammar."""
    plural = next(suffix for suffix in _GROUPS_SUFFIXES if f"{suffix}#/" in text)
    archive, group = split_container_path(text, singular=(), plural=plural, format="archive", strict=False)
    assert group is not None
    return archive, group


def _inside(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip(os.sep) + os.sep)


def _same_file(first: str, second: str) -> bool:
    if first == second:
        return True
    try:
        return os.path.samefile(first, second)  # hard links
    except OSError:
        return False


def require_distinct(source: str | os.PathLike, destination: str | os.PathLike) -> None:
    """Refuse a conversion whose destination is (or contains, or is inside) its source.

    Example:
        >>> require_distinct("x.h5dfs#/a", "x.h5dfs#/b")  # two groups of one file: fine
        >>> require_distinct("x.h5dfs#/a", "x.h5dfs#/a/b")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafModeError: can't convert: x.h5dfs#/a
        into: x.h5dfs#/a/b
        (the destination and the source share their storage; replacing one would destroy the other)
    """
    first, second = storage_of(source), storage_of(destination)
    if _same_file(first.path, second.path):
        groups = (first.group.rstrip("/") + "/", second.group.rstrip("/") + "/")
        distinct = first.group != "/" and second.group != "/" and not groups[0].startswith(groups[1]) \
            and not groups[1].startswith(groups[0])
    else:
        distinct = not _inside(first.path, second.path) and not _inside(second.path, first.path)
    if not distinct:
        raise DafModeError(f"can't convert: {os.fspath(source)}\ninto: {os.fspath(destination)}\n(the destination and "
                           "the source share their storage; replacing one would destroy the other)")


def format_names() -> list[str]:
    """The formats a conversion writes, as ``--format``/``format=`` take them: the registered Daf formats that write
    (in the registry's order; not HttpDaf, which only reads) and ``h5ad``. Each is also accepted in lower case and
    without its ``Daf`` (``files``, ``zarr``, ``zip``).

    Example:
        >>> format_names()
        ['H5df', 'ZarrDaf', 'ZipDaf', 'FilesDaf', 'h5ad']
    """
    return [entry.name for entry in registered_formats() if not entry.read_only] + [ANNDATA]


def _format_named(format: str) -> str:
    aliases = {ANNDATA: ANNDATA, "anndata": ANNDATA}
    for name in format_names():
        aliases.setdefault(name.lower(), name)
        aliases.setdefault(name.lower().removesuffix("daf") or name.lower(), name)
    chosen = aliases.get(format.lower())
    if chosen is None:
        raise DafValueError(f"unknown format: {format}\n(the known formats are: {', '.join(format_names())}; also "
                            "accepted in lower case and without Daf: files, zarr, zip)")
    return chosen


def formats_by_name_text() -> str:
    """One line per format a conversion writes: the names that say it, from the registry (and FilesDaf's and
    AnnData's rule for new paths).

    Example:
        >>> print(formats_by_name_text())  # doctest: +ELLIPSIS
        - H5df: an HDF5 file (x.h5df), or a group in one (x.h5dfs#/group)
        ...
        - FilesDaf: a directory named x.daf, or an existing directory
        - h5ad: an AnnData file (x.h5ad)
    """
    lines = [f"- {entry.name}: {entry.paths}" for entry in registered_formats()
             if not entry.fallback and not entry.read_only]
    lines += [f"- {entry.name}: a directory named x{FILES_SUFFIX}, or an existing directory"
              for entry in registered_formats() if entry.fallback]
    lines.append("- h5ad: an AnnData file (x.h5ad)")
    return "\n".join(lines)


def _format_by_name(text: str) -> str | None:
    """The format a new path's name says, if any (the first non-fallback format that recognises it)."""
    if is_h5ad(text):
        return ANNDATA
    if text.rstrip("/").endswith(FILES_SUFFIX):
        return next(entry.name for entry in registered_formats() if entry.fallback)
    for entry in registered_formats():
        if not entry.fallback and entry.guess_can_open(text):
            if entry.read_only:
                raise DafModeError(f"can't write the format: {entry.name}\nat: {text}\n(it only reads: write a local "
                                   "data set)")
            return entry.name
    return None


def _implied_format(text: str) -> str | None:
    """The format of an existing destination (by its content, as :func:`~pydaf.open_daf` tells it, an AnnData file
    being one), else the one its name says, else ``None``."""
    if is_h5ad(text):
        return ANNDATA
    if os.path.lexists(text.rstrip("/") or text):
        return ANNDATA if foreign_file_kind(text) == "anndata" else guess_format(text).name
    return _format_by_name(text)


def resolve_format(destination: str | os.PathLike, format: str | None = None) -> str:
    """The format a conversion writes at ``destination``: ``format`` if given (a name of :func:`format_names`, in
    any case, or without its ``Daf``), which must agree with the destination's own (if any); else the format of an
    existing destination (by its content); else the one its name says (``x.h5df``, ``x.h5dfs#/group``, ``x.daf.zarr``,
    ``x.daf.zarr.zip``, ``x.daf.zip``, ``x.dafs.zip#/group``, ``x.daf`` for a FilesDaf directory, ``x.h5ad``). A new
    name that says no format is a :class:`~pydaf.DafFormatError` listing the suffixes.

    Example:
        >>> resolve_format("/data/cells.h5df"), resolve_format("/data/cells.daf"), resolve_format("/data/x.h5", "h5df")
        ('H5df', 'FilesDaf', 'H5df')
        >>> resolve_format("/data/cells.h5")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: can't tell the format of the new data set: /data/cells.h5
        (its name ends with no known suffix: name it as one of the formats below, or give the format: --format NAME
        on the command line, format=NAME in Python, NAME one of: H5df, ZarrDaf, ZipDaf, FilesDaf, h5ad)
        the formats, by name:
        - H5df: an HDF5 file (x.h5df), or a group in one (x.h5dfs#/group)
        ...
    """
    text = os.fspath(destination)
    if format is not None:
        chosen = _format_named(format)
        implied = _implied_format(text)
        if implied is not None and implied != chosen:
            raise DafFormatError(f"can't write the format: {chosen}\nat: {text}\n(it is the path of a {implied} "
                                 "data set: choose another destination)")
        return chosen
    implied = _implied_format(text)
    if implied is None:
        raise DafFormatError(f"can't tell the format of the new data set: {text}\n(its name ends with no known suffix: "
                             "name it as one of the formats below, or give the format: --format NAME\non the command "
                             f"line, format=NAME in Python, NAME one of: {', '.join(format_names())})\n"
                             f"the formats, by name:\n{formats_by_name_text()}")
    return implied


def _holds_data(text: str) -> bool:
    """Whether a destination path already holds something a conversion would replace: a file, a non-empty directory,
    or (``x.h5dfs#/group``) an existing group. A group of an append-only archive is refused by its own rule."""
    if ".h5dfs#/" in text:
        file, group = split_h5df_path(text)
        if not os.path.isfile(file) or not h5py.is_hdf5(file):
            return False  # nothing there, or refused as not an H5df file when built
        return group.rstrip("/") in open_h5_file(file, "a")
    if "#/" in text:
        return False
    absolute = os.path.abspath(text.rstrip("/") or text)
    return os.path.lexists(absolute) and not (os.path.isdir(absolute) and not os.path.islink(absolute)
                                              and not os.listdir(absolute))


def require_absent(destination: str | os.PathLike, *, overwrite: bool = False) -> None:
    """Refuse (a :class:`~pydaf.DafExistsError`) a destination that already holds something (a file, a non-empty
    directory, an ``x.h5dfs#/group`` group), unless ``overwrite``. An empty directory holds nothing.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "notes.h5ad")
        >>> with open(path, "w") as file:
        ...     _ = file.write("mine")
        >>> require_absent(path, overwrite=True)
        >>> require_absent(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafExistsError: the destination exists: ...notes.h5ad
        (to replace it, pass --overwrite to the pydaf command, or overwrite=True in Python)
    """
    text = os.fspath(destination)
    if not overwrite and _holds_data(text):
        raise DafExistsError(f"the destination exists: {text}\n(to replace it, pass --overwrite to the pydaf command, "
                             "or overwrite=True in Python)")


def _hidden_sibling(path: str, purpose: str, suffix: str = "") -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{purpose}-{os.getpid()}-{uuid.uuid4().hex[:8]}{suffix}")


def _leftover_pattern(name: str) -> re.Pattern[str]:
    """The names a conversion of ``name`` gives its hidden temporaries and set-aside old data sets (and what their own
    writers put next to them: an HDF5 journal, an incomplete-copy marker), with the process id that made them."""
    return re.compile(rf"^\.\.?{re.escape(name)}\.(tmp|old)-(\d+)-[0-9a-f]{{8}}")


def _remove_path(path: str) -> None:
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def _remove_temporary(temporary: str) -> None:
    """Remove a failed conversion's temporary and what its writer put next to it (an HDF5 undo journal, an incomplete
    copy marker): nothing is left behind."""
    folder, name = os.path.split(temporary)
    _remove_path(temporary)
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for sibling in names:
        if sibling.startswith(f".{name}."):
            _remove_path(os.path.join(folder, sibling))


def clean_leftovers(destination: str | os.PathLike) -> list[str]:
    """Remove what killed conversions into ``destination`` left next to it (hidden temporaries, and old data sets set
    aside for a replacement, of processes that are gone), first putting back an old data set whose replacement never
    arrived (on a system that can't swap two directories atomically). Leftovers of live processes are kept (they may be
    conversions under way). Returns the names removed.

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> os.mkdir(os.path.join(folder, ".x.daf.tmp-999999999-0123abcd.daf"))  # (no such process)
        >>> clean_leftovers(os.path.join(folder, "x.daf")), os.listdir(folder)
        (['.x.daf.tmp-999999999-0123abcd.daf'], [])
    """
    absolute = os.path.abspath(os.fspath(destination).rstrip("/") or os.fspath(destination))
    folder, name = os.path.split(absolute)
    pattern = _leftover_pattern(name)
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    removed = []
    for leftover in names:
        match = pattern.match(leftover)
        if match is None or process_is_alive(int(match.group(2))):
            continue
        path = os.path.join(folder, leftover)
        set_aside = match.group(1) == "old" or leftover.endswith(".old")  # (ZarrDaf-FilesDaf conversions' name)
        if set_aside and not leftover.startswith("..") and not os.path.lexists(absolute) and os.path.isdir(path):
            os.rename(path, absolute)  # (the old data set, moved aside by a replacement killed before the new came)
            continue
        _remove_path(path)
        removed.append(leftover)
    return removed


def _refuse(destination: str, what: str) -> None:
    raise DafNotDafError(f"not a daf data set: {destination}\n(it is {what}; a conversion only replaces a Daf data "
                         "set, to keep anything else safe: remove it or choose another destination)")


def _fill_temporary(writer: DafWriter, fill: Callable[[DafWriter], object]) -> None:
    """Fill a temporary data set and let go of it, so an HDF5 file is flushed and closed before it is moved (arrays
    mapping it stay valid)."""
    fill(writer)
    writer.format.format_close()
    del writer
    gc.collect()


def _require_not_open(path: str) -> None:
    """Refuse to replace an HDF5 file this process has open (its handles would go on seeing the old file)."""
    for file_id in h5py.h5f.get_obj_ids(h5py.h5f.OBJ_ALL, h5py.h5f.OBJ_FILE):
        if _same_file(os.fsdecode(file_id.name), path):
            raise DafModeError(f"can't replace the HDF5 file: {path}\nwhile it is open in this process")


def build_daf(destination: str | os.PathLike, fill: Callable[[DafWriter], object], *,
              name: str | None = None, format: str | None = None, overwrite: bool = False,
              packed: bool = False) -> DafWriter:
    """Create a data set at ``destination`` in the format :func:`resolve_format` gives it (``format``, else the
    one of an existing destination, else the one its name says), by ``fill``\\ ing a new one in a temporary sibling and
    moving it into place once ``fill`` returned (see the module docstring). An existing destination is replaced only
    with ``overwrite`` (and only if it is a Daf data set). Returns the new data set, opened ``r+``. If anything fails,
    the destination is left as it was. With ``packed``, the new data set packs its writes by default (as if opened
    with ``packed=True``: every property large enough is chunked and compressed, docs/design/packed.md); the
    returned one, reopened, does not.

    Example:
        >>> import os, tempfile, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5dfs") + "#/cells"
        >>> build_daf(path, lambda daf: daf.add_axis("cell", ["A"])).axis_length("cell")
        1
        >>> build_daf(path, lambda daf: daf.add_axis("cell", ["B"]))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafExistsError: the destination exists: ...x.h5dfs#/cells
        (to replace it, pass --overwrite to the pydaf command, or overwrite=True in Python)
        >>> build_daf(path, lambda daf: daf.add_axis("cell", ["B"]), overwrite=True).axis_vector("cell").tolist()
        ['B']
    """
    text = os.fspath(destination)
    chosen = check_destination(text, format=format, overwrite=overwrite)
    if chosen == ANNDATA:
        raise DafFormatError(f"not a path for a Daf data set: {text}\n(it names an AnnData file)")
    entry = _entry(chosen)
    if packed:
        fill = _packing(fill)
    if entry is H5DF_FORMAT:
        file, group = split_h5df_path(text)
        if group == "/":
            return _build_file(text, fill, name)
        return _build_group(file, group, fill, name)
    if "#/" in text:
        return _build_archive_group(text, entry, fill, name)
    return _build_other(text, entry, fill, name)


def _packing(fill: Callable[[DafWriter], object]) -> Callable[[DafWriter], object]:
    """``fill``, into a new data set made to pack its writes by default (its constructor's ``packed=True``)."""
    def packed_fill(writer: DafWriter) -> object:
        storage = writer.format
        assert isinstance(storage, FormatWriter)
        storage.packed_default = True
        return fill(writer)

    return packed_fill


def repack(source: str | os.PathLike, destination: str | os.PathLike, *, progress: bool = True,
           overwrite: bool = False) -> None:
    """Rewrite the data set at ``source`` compactly into ``destination`` with its format's ``repack`` (H5df: every
    dataset aligned, contiguous layouts kept, the space of deleted properties reclaimed), built aside and moved into
    place when complete (see :func:`build_daf`). Close (drop) writers of the source first: any live map of it stays
    valid, but sees the old file. An existing destination is replaced only with ``overwrite`` (and only if it is a
    Daf data set); a format without a repack is a :class:`~pydaf.DafFormatError`.

    Example:
        >>> import pydaf, tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> daf = pydaf.H5df(os.path.join(folder, "a.h5df"), "w").set_scalar("x", 1)
        >>> pydaf.repack(os.path.join(folder, "a.h5df"), os.path.join(folder, "b.h5df"), progress=False)
        >>> pydaf.H5df(os.path.join(folder, "b.h5df"), "r").get_scalar("x")
        np.int64(1)
    """
    text = os.fspath(source)
    refuse_special_file(storage_path(text), what="the data set to repack")  # (opening a FIFO would block)
    entry = guess_format(text)
    if entry.repack is None:
        able = ", ".join(known.name for known in registered_formats() if known.repack is not None)
        raise DafFormatError(f"can't repack the {entry.name} data set: {text}\n"
                             f"(only these formats can be repacked: {able})")
    if entry is H5DF_FORMAT:  # (another group of the source's own file would be written while it is read)
        source_file, _ = split_h5df_path(text)
        destination_file, _ = split_h5df_path(destination)
        if os.path.abspath(source_file) == os.path.abspath(destination_file):
            raise DafModeError(f"can't repack the H5df file: {source_file}\ninto itself")
    require_distinct(text, destination)
    repack_into = entry.repack
    build_daf(destination, lambda writer: repack_into(text, writer, progress=progress), format=entry.name,
              overwrite=overwrite).format.format_close()


def _entry(name: str) -> FormatEntry:
    return next(entry for entry in registered_formats() if entry.name == name)


def check_destination(destination: str | os.PathLike, *, format: str | None = None, overwrite: bool = False) -> str:
    """Check, before anything is read or written, that a conversion may write ``destination``; returns its format
    (:func:`resolve_format`). Refused: a destination holding anything but a Daf data set of that format (or, for
    ``h5ad``, a directory), and with no ``overwrite``, an existing one (:func:`require_absent`).

    Example:
        >>> import os, tempfile, pydaf
        >>> folder = tempfile.mkdtemp()
        >>> check_destination(os.path.join(folder, "x.h5df")), check_destination(folder, overwrite=True)
        ('H5df', 'FilesDaf')
        >>> check_destination(folder, format="h5df", overwrite=True)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: can't write the format: H5df
        at: ...
        (it is the path of a FilesDaf data set: choose another destination)
    """
    text = os.fspath(destination)
    _refuse_special_file(text)
    chosen = resolve_format(text, format)
    if chosen == ANNDATA:
        if os.path.isdir(text):
            _refuse(text, "a directory")
    elif chosen == H5DF_FORMAT.name:
        file, group = split_h5df_path(text)
        if group == "/" and os.path.lexists(text):
            _require_daf_file(text)
        elif group != "/":
            _require_daf_group(file, group)
    elif "#/" not in text:
        require_replaceable(text, _entry(chosen))
    require_absent(text, overwrite=overwrite)
    return chosen


def _refuse_special_file(text: str) -> None:
    """Refuse a destination whose file is a FIFO, a socket or a device (never opened: opening a FIFO blocks)."""
    mode = special_file_mode(storage_path(text))  # (nothing there, or a dangling link: checked as any new destination)
    if mode is not None:
        _refuse(text, file_kind(mode))


def _close(daf: DafReader) -> None:
    daf.format.format_close()


def require_replaceable(path: str | os.PathLike, entry: FormatEntry | None = None) -> None:
    """Refuse a destination (of a format other than H5df) that exists and is neither a Daf data set of the format
    ``entry`` (by default, the one its path names) nor an empty directory.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "notes.daf.zip")
        >>> with open(path, "w") as file:
        ...     _ = file.write("mine")
        >>> require_replaceable(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafNotDafError: not a daf data set: ...notes.daf.zip
        (it is not a ZipDaf data set: not a ZIP archive (or a corrupt one): ...
    """
    text = os.fspath(path)
    absolute = os.path.abspath(text.rstrip("/"))
    if not os.path.lexists(absolute) or (os.path.isdir(absolute) and not os.listdir(absolute)):
        return
    entry = entry or guess_format(text)
    try:
        _close(entry.open(absolute, "r"))
    except DafIncompleteError:
        pass  # (a Daf data set a killed copy left incomplete, or one being copied into: replaceable as any other)
    except DafError as error:
        _refuse(text, f"not a {entry.name} data set: {str(error).splitlines()[0]}")


def _open_temporary(entry: FormatEntry, temporary: str, path: str, name: str | None) -> DafWriter:
    try:
        return entry.open(temporary, "w", name=name or path)  # type: ignore[return-value]
    except DafFormatError as error:  # e.g. a format that wants its suffix: name the destination, not the temporary
        raise DafFormatError(str(error).replace(temporary, path)) from None


def _build_other(path: str, entry: FormatEntry, fill: Callable[[DafWriter], object],
                 name: str | None) -> DafWriter:
    """A data set of a format other than H5df (a FilesDaf or ZarrDaf directory, a ``.daf.zip`` or ``.daf.zarr.zip``
    archive), built under a hidden sibling name with the same suffix and renamed into place."""
    absolute = os.path.abspath(path.rstrip("/"))
    require_replaceable(path, entry)
    suffix = next((suffix for suffix in (*_ARCHIVE_SUFFIXES, ".daf.zarr") if absolute.endswith(suffix)), "")
    os.makedirs(os.path.dirname(absolute), exist_ok=True)
    clean_leftovers(absolute)
    temporary = _hidden_sibling(absolute, "tmp", suffix)
    try:
        # (No reference to the writer is kept here: _fill_temporary lets go of it before the rename.)
        with building_aside(temporary):
            _fill_temporary(_open_temporary(entry, temporary, path, name), fill)
        raise_if_interrupted()
        if os.path.isdir(absolute) and os.path.isdir(temporary) and exchange_paths(temporary, absolute):
            # (one atomic swap: the destination is the old data set or the new one at every instant; the old one,
            # now under the temporary name, goes, or is removed by the next conversion if this one is killed)
            clear_incomplete_copy(absolute)
            shutil.rmtree(temporary, ignore_errors=True)
        elif os.path.isdir(absolute):
            # (no atomic swap here: a kill between the two renames leaves the old data set aside, put back by the
            # next conversion into this destination, see clean_leftovers)
            old = _hidden_sibling(absolute, "old", suffix)
            os.replace(absolute, old)
            os.replace(temporary, absolute)
            clear_incomplete_copy(absolute)
            shutil.rmtree(old, ignore_errors=True)
        else:
            replace_archive(temporary, absolute)  # (not while another process writes the old archive)
            clear_incomplete_copy(absolute)
    except BaseException:
        _remove_temporary(temporary)
        raise
    return entry.open(path, "r+", name=name)  # type: ignore[return-value]


def _build_archive_group(path: str, entry: FormatEntry, fill: Callable[[DafWriter], object],
                         name: str | None) -> DafWriter:
    """A new data set in a group of an append-only archive: written into a copy of the archive (taken while holding
    its writer lock, so no other process appends meanwhile), which then replaces it."""
    archive, group = _split_archive_group(path)
    absolute = os.path.abspath(archive)
    suffix = next(suffix for suffix in _GROUPS_SUFFIXES if absolute.endswith(suffix))
    os.makedirs(os.path.dirname(absolute), exist_ok=True)
    clean_leftovers(absolute)
    temporary = _hidden_sibling(absolute, "tmp", suffix)
    store = acquire_zip_store(absolute, writable=True) if os.path.lexists(absolute) else None
    try:
        if store is not None:
            shutil.copyfile(absolute, temporary)
            try:
                _close(entry.open(f"{temporary}#/{group}", "r"))
            except DafNotDafError:
                pass  # (no data set in that group yet: nothing to replace)
            else:
                raise DafAppendOnlyError(f"can't replace the data set: {path}\n(it is in an append-only archive; "
                                         "convert into a new group or a new archive)")
        with building_aside(f"{temporary}#/{group}"):
            _fill_temporary(entry.open(f"{temporary}#/{group}", "w+", name=name or path), fill)  # type: ignore[arg-type]
        raise_if_interrupted()
        os.replace(temporary, absolute)
        clear_incomplete_copy(path)
    except BaseException:
        _remove_temporary(temporary)
        raise
    finally:
        if store is not None:
            store.release()
    return entry.open(path, "r+", name=name)  # type: ignore[return-value]


def _require_daf_file(path: str) -> None:
    if os.path.isdir(path):
        _refuse(path, "a directory")
    if os.path.getsize(path) == 0:
        return
    if not h5py.is_hdf5(path):
        _refuse(path, "not an HDF5 file")
    _require_not_open(path)
    with h5py.File(path, "r") as file:
        if "daf" not in file and (len(file) or len(file.attrs)):
            _refuse(path, "a non-empty HDF5 file without a daf data set at its root")


def _build_file(path: str, fill: Callable[[DafWriter], object], name: str | None) -> DafWriter:
    if os.path.lexists(path):
        _require_daf_file(path)
    absolute = os.path.abspath(path)
    os.makedirs(os.path.dirname(absolute), exist_ok=True)
    clean_leftovers(absolute)
    temporary = _hidden_sibling(absolute, "tmp", ".h5df")
    try:
        with building_aside(temporary):
            _fill_temporary(H5df(temporary, "w", name=name or path), fill)
        raise_if_interrupted()
        os.replace(temporary, absolute)
        clear_incomplete_copy(absolute)
    except BaseException:
        _remove_temporary(temporary)
        raise
    return H5df(path, "r+", name=name)


def _require_daf_group(file_path: str, group: str) -> h5py.File | None:
    """Refuse an ``x.h5dfs#/group`` destination whose file is a directory or whose group holds anything but a Daf
    data set; returns the file, opened writable, if it exists."""
    if os.path.lexists(file_path) and os.path.isdir(file_path):
        _refuse(file_path, "a directory")
    if not os.path.lexists(file_path):
        return None
    file = open_h5_file(file_path, "a")
    if group in file:
        node = file[group]
        if not isinstance(node, h5py.Group):
            _refuse(f"{file_path}#{group}", "an HDF5 dataset")
        if "daf" not in node and (len(node) or len(node.attrs)):
            _refuse(f"{file_path}#{group}", "a non-empty HDF5 group without a daf data set")
    return file


def _build_group(file_path: str, group: str, fill: Callable[[DafWriter], object], name: str | None) -> DafWriter:
    file = _require_daf_group(file_path, group)
    if file is None:  # (a new file: built aside whole and renamed in, so a failure or a kill leaves no file)
        absolute = os.path.abspath(file_path)
        os.makedirs(os.path.dirname(absolute), exist_ok=True)
        clean_leftovers(absolute)
        temporary = _hidden_sibling(absolute, "tmp", ".h5dfs")
        try:
            with building_aside(f"{temporary}#{group}"):
                _fill_temporary(H5df(f"{temporary}#{group}", "w", name=name or f"{file_path}#{group}"), fill)
            raise_if_interrupted()
            os.replace(temporary, absolute)
            clear_incomplete_copy(f"{file_path}#{group}")
        except BaseException:
            _remove_temporary(temporary)
            raise
        return H5df(f"{file_path}#{group}", "r+", name=name)
    parent, _, base = group.rstrip("/").rpartition("/")
    _clean_group_leftovers(file, file_path, parent, base)
    temporary = f"{parent}/.{base}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with building_aside(f"{file_path}#{temporary}"):
            _fill_temporary(H5df(f"{file_path}#{temporary}", "w", name=name or f"{file_path}#{group}"), fill)
        raise_if_interrupted()
        old = None
        if group in file:
            old = f"{parent}/.{base}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            file.move(group, old)
        file.move(temporary, group)
        # Both moves in one commit of the file's undo journal: a kill before it rolls both back (the old data set
        # stays, the temporary is removed by the next conversion), after it the new data set is in place.
        H5df(file[group], "r+").flush()
        clear_incomplete_copy(f"{file_path}#{group}")
        if old is not None:
            _remove_group(file_path, old)
    except BaseException:
        if temporary in file:
            _remove_group(file_path, temporary)
        raise
    return H5df(f"{file_path}#{group}", "r+", name=name)


def _clean_group_leftovers(file: h5py.File, file_path: str, parent: str, base: str) -> None:
    """Remove the temporary and set-aside groups that killed conversions into ``parent/base`` of an HDF5 file left
    (of processes that are gone): they would otherwise stay in the file for ever."""
    pattern = re.compile(rf"^\.{re.escape(base)}\.(tmp|old)-(\d+)-[0-9a-f]{{8}}$")
    holder = file[parent] if parent else file
    for leftover in sorted(holder):
        match = pattern.match(leftover)
        if match is not None and not process_is_alive(int(match.group(2))):
            _remove_group(file_path, f"{parent}/{leftover}", leftover=True)


def _remove_group(file_path: str, group: str, *, leftover: bool = False) -> None:
    """Delete a data set's group (emptied by H5df's own mode ``w``, which keeps arrays still mapping it valid; a
    ``leftover`` of a killed conversion that H5df does not recognise is deleted as it is)."""
    try:
        H5df(f"{file_path}#{group}", "w")
    except DafError:
        if not leftover:
            raise
    file = open_h5_file(file_path, "r+")
    del file[group]


def write_file_then_replace(path: str | os.PathLike, write: Callable[[str], object], *,
                            overwrite: bool = False) -> None:
    """Write a file by ``write(temporary_path)`` and move it into ``path`` when complete (a failure leaves ``path``
    as it was). An existing file is replaced only with ``overwrite`` (a :class:`~pydaf.DafExistsError` otherwise,
    before anything is written); a directory never is.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.txt")
        >>> write_file_then_replace(path, lambda temporary: open(temporary, "w").close())
        >>> os.path.exists(path)
        True
        >>> write_file_then_replace(path, lambda temporary: open(temporary, "w").close())  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafExistsError: the destination exists: ...x.txt
        (to replace it, pass --overwrite to the pydaf command, or overwrite=True in Python)
    """
    absolute = os.path.abspath(os.fspath(path))
    if os.path.isdir(absolute):
        _refuse(absolute, "a directory")
    _refuse_special_file(absolute)
    require_absent(path, overwrite=overwrite)
    clean_leftovers(absolute)
    temporary = _hidden_sibling(absolute, "tmp", os.path.splitext(absolute)[1])
    try:
        write(temporary)
        raise_if_interrupted()
        os.replace(temporary, absolute)
    except BaseException:
        _remove_temporary(temporary)
        raise


def shares_storage(first: str | os.PathLike, second: str | os.PathLike) -> bool:
    """Whether two paths share their storage, by any path to it (symbolic or hard links, ``./``, a group of the same
    file), as :func:`require_distinct` refuses it: writing one would destroy the other (``pydaf manifest``'s output).

    Example:
        >>> shares_storage("/data/x.daf", "/data/x.daf/manifest.json"), shares_storage("x.h5dfs#/a", "x.h5dfs#/b")
        (True, False)
    """
    try:
        require_distinct(first, second)
    except DafModeError:
        return True
    return False
