"""Where conversions write: a new data set built next to its destination and moved into place only when complete.

A conversion (``h5ad_as_daf`` to a path, ``pydaf convert``) never writes into its destination directly. It builds the
new data set in a temporary sibling: a hidden directory beside a FilesDaf or ZarrDaf directory, a hidden file beside an
``.h5df``, ``.daf.zip`` or ``.daf.zarr.zip`` file, a hidden group beside an ``x.h5dfs#/group``, and for a new group of
an append-only archive (``x.dafs.zip#/group``, ``x.dafs.zarr.zip#/group``) a hidden copy of the archive (holding its
writer lock meanwhile). Only once everything was written is it moved into place (renames, and for a group HDF5 link
moves): a failure (a damaged input, a full disk, an interrupt) leaves the destination exactly as it was and removes
the temporary. An existing destination is replaced only if it is a Daf data set (or empty): a directory, file or group
holding anything else is refused before anything is written, and so is a data set in a group of an append-only archive
(which can't be replaced).

A conversion whose source and destination are the same storage (the same path, the same file through a link or a
symlink, the same group, or one inside the other) is refused, since replacing the destination would destroy the source.

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
import shutil
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import h5py

from ..core.readers import DafReader
from ..core.writers import DafWriter
from ..errors import DafError, DafFormatError, DafModeError
from ..formats.h5df import H5df, open_h5_file, split_h5df_path
from ..formats.registry import FormatEntry, guess_format
from ..formats.zipstore import DafAppendOnlyError, acquire_zip_store

__all__ = ["Storage", "build_daf", "is_h5ad", "require_distinct", "require_replaceable", "storage_of",
           "write_file_then_replace"]


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
        archive, _, group = text.partition("#/")
        return Storage(os.path.realpath(archive), "/" + group.strip("/"), False)
    if text.endswith(".h5df") or ".h5dfs#/" in text:
        file, group = split_h5df_path(text)
        return Storage(os.path.realpath(file), "/" + group.strip("/") if group != "/" else "/", False)
    return Storage(os.path.realpath(text), "/", True)


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


def _hidden_sibling(path: str, purpose: str, suffix: str = "") -> str:
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{purpose}-{os.getpid()}-{uuid.uuid4().hex[:8]}{suffix}")


def _refuse(destination: str, what: str) -> None:
    raise DafFormatError(f"not a daf data set: {destination}\n(it is {what}; a conversion only replaces a Daf data "
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
              name: str | None = None) -> DafWriter:
    """Create a data set at ``destination`` (a path for :func:`~pydaf.open_daf`), replacing any data set there, by
    ``fill``\\ ing a new one in a temporary sibling and moving it into place once ``fill`` returned (see the module
    docstring). Returns the new data set, opened ``r+``. If anything fails, the destination is left as it was.

    Example:
        >>> import os, tempfile, pydaf
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5dfs") + "#/cells"
        >>> build_daf(path, lambda daf: daf.add_axis("cell", ["A"])).axis_length("cell")
        1
    """
    text = os.fspath(destination)
    if text.endswith(".h5df") or ".h5dfs#/" in text:
        file, group = split_h5df_path(text)
        if group == "/":
            return _build_file(text, fill, name)
        return _build_group(file, group, fill, name)
    entry = guess_format(text)
    if "#/" in text:
        return _build_archive_group(text, entry, fill, name)
    return _build_other(text, entry, fill, name)


def _close(daf: DafReader) -> None:
    daf.format.format_close()


def require_replaceable(path: str | os.PathLike) -> None:
    """Refuse a destination (of a format other than H5df) that exists and is neither a Daf data set of the format its
    path names nor an empty directory.

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "notes.daf.zip")
        >>> with open(path, "w") as file:
        ...     _ = file.write("mine")
        >>> require_replaceable(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: not a daf data set: ...notes.daf.zip
        (it is not a ZipDaf data set: not a ZIP archive (or a corrupt one): ...
    """
    text = os.fspath(path)
    absolute = os.path.abspath(text.rstrip("/"))
    if not os.path.lexists(absolute) or (os.path.isdir(absolute) and not os.listdir(absolute)):
        return
    entry = guess_format(text)
    try:
        _close(entry.open(absolute, "r"))
    except DafError as error:
        _refuse(text, f"not a {entry.name} data set: {str(error).splitlines()[0]}")


def _build_other(path: str, entry: FormatEntry, fill: Callable[[DafWriter], object],
                 name: str | None) -> DafWriter:
    """A data set of a format other than H5df (a FilesDaf or ZarrDaf directory, a ``.daf.zip`` or ``.daf.zarr.zip``
    archive), built under a hidden sibling name with the same suffix and renamed into place."""
    absolute = os.path.abspath(path.rstrip("/"))
    require_replaceable(path)
    suffix = next((suffix for suffix in (*_ARCHIVE_SUFFIXES, ".daf.zarr") if absolute.endswith(suffix)), "")
    os.makedirs(os.path.dirname(absolute), exist_ok=True)
    temporary = _hidden_sibling(absolute, "tmp", suffix)
    try:
        _fill_temporary(entry.open(temporary, "w", name=name or path), fill)  # type: ignore[arg-type]
        if os.path.isdir(absolute):
            old = _hidden_sibling(absolute, "old", suffix)
            os.replace(absolute, old)
            os.replace(temporary, absolute)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(temporary, absolute)
    except BaseException:
        if os.path.isdir(temporary):
            shutil.rmtree(temporary, ignore_errors=True)
        elif os.path.lexists(temporary):
            os.remove(temporary)
        raise
    return entry.open(path, "r+", name=name)  # type: ignore[return-value]


def _build_archive_group(path: str, entry: FormatEntry, fill: Callable[[DafWriter], object],
                         name: str | None) -> DafWriter:
    """A new data set in a group of an append-only archive: written into a copy of the archive (taken while holding
    its writer lock, so no other process appends meanwhile), which then replaces it."""
    archive, _, group = path.partition("#/")
    absolute = os.path.abspath(archive)
    suffix = next(suffix for suffix in _GROUPS_SUFFIXES if absolute.endswith(suffix))
    os.makedirs(os.path.dirname(absolute), exist_ok=True)
    temporary = _hidden_sibling(absolute, "tmp", suffix)
    store = acquire_zip_store(absolute, writable=True) if os.path.lexists(absolute) else None
    try:
        if store is not None:
            shutil.copyfile(absolute, temporary)
            try:
                _close(entry.open(f"{temporary}#/{group}", "r"))
            except DafFormatError as error:
                if "not a daf data set" not in str(error):
                    raise
            else:
                raise DafAppendOnlyError(f"can't replace the data set: {path}\n(it is in an append-only archive; "
                                         "convert into a new group or a new archive)")
        _fill_temporary(entry.open(f"{temporary}#/{group}", "w+", name=name or path), fill)  # type: ignore[arg-type]
        os.replace(temporary, absolute)
    except BaseException:
        if os.path.lexists(temporary):
            os.remove(temporary)
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
    temporary = _hidden_sibling(absolute, "tmp", ".h5df")
    try:
        _fill_temporary(H5df(temporary, "w", name=name or path), fill)  # type: ignore[arg-type]
        os.replace(temporary, absolute)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
    return H5df(path, "r+", name=name)  # type: ignore[return-value]


def _build_group(file_path: str, group: str, fill: Callable[[DafWriter], object], name: str | None) -> DafWriter:
    if os.path.lexists(file_path) and os.path.isdir(file_path):
        _refuse(file_path, "a directory")
    file = open_h5_file(file_path, "a")
    if group in file:
        node = file[group]
        if not isinstance(node, h5py.Group):
            _refuse(f"{file_path}#{group}", "an HDF5 dataset")
        if "daf" not in node and (len(node) or len(node.attrs)):
            _refuse(f"{file_path}#{group}", "a non-empty HDF5 group without a daf data set")
    parent, _, base = group.rstrip("/").rpartition("/")
    temporary = f"{parent}/.{base}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        _fill_temporary(H5df(f"{file_path}#{temporary}", "w", name=name or f"{file_path}#{group}"),  # type: ignore[arg-type]
                        fill)
        if group in file:
            old = f"{parent}/.{base}.old-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            file.move(group, old)
            file.move(temporary, group)
            _remove_group(file_path, old)
        else:
            file.move(temporary, group)
    except BaseException:
        if temporary in file:
            _remove_group(file_path, temporary)
        raise
    return H5df(f"{file_path}#{group}", "r+", name=name)  # type: ignore[return-value]


def _remove_group(file_path: str, group: str) -> None:
    """Delete a data set's group (emptied by H5df's own mode ``w``, which keeps arrays still mapping it valid)."""
    H5df(f"{file_path}#{group}", "w")
    file = open_h5_file(file_path, "r+")
    del file[group]


def write_file_then_replace(path: str | os.PathLike, write: Callable[[str], object]) -> None:
    """Write a file by ``write(temporary_path)`` and move it over ``path`` when complete (a failure leaves ``path``
    as it was).

    Example:
        >>> import os, tempfile
        >>> path = os.path.join(tempfile.mkdtemp(), "x.txt")
        >>> write_file_then_replace(path, lambda temporary: open(temporary, "w").close())
        >>> os.path.exists(path)
        True
    """
    absolute = os.path.abspath(os.fspath(path))
    if os.path.isdir(absolute):
        _refuse(absolute, "a directory")
    temporary = _hidden_sibling(absolute, "tmp", os.path.splitext(absolute)[1])
    try:
        write(temporary)
        os.replace(temporary, absolute)
    except BaseException:
        if os.path.exists(temporary):
            os.remove(temporary)
        raise
