"""Repacking an H5df data set: a compact copy into a new file (the format's ``repack`` in the registry)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import h5py
from h5py import h5d, h5o, h5t

from ..._os.write_errors import storage_error
from ...errors import DafError, DafFormatError
from .format import H5df, _check_declared_size, split_h5df_path
from .global_heap import REFERENCE, check_string_heaps


def _count_objects(group: h5py.Group) -> int:
    count = 0

    def visit(_: str, node: Any) -> None:
        nonlocal count
        count += isinstance(node, h5py.Dataset)

    group.visititems(visit)
    return count


def repack_into(source: str | os.PathLike, writer: H5df, *, progress: bool = True) -> None:
    """Fill a new, empty H5df ``writer`` with a compact copy of the H5df data set at ``source``: every dataset aligned
    and contiguous layouts kept (deleted properties leave unused space in HDF5 files; this reclaims it). The format's
    ``repack`` in the registry; :func:`pydaf.repack` builds the writer aside and moves it into place.

    Example:
        >>> import pydaf, tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> _ = pydaf.H5df(os.path.join(folder, "a.h5df"), "w").set_scalar("x", 1)
        >>> writer = pydaf.H5df(os.path.join(folder, "b.h5df"), "w")
        >>> repack_into(os.path.join(folder, "a.h5df"), writer, progress=False)
        >>> writer.get_scalar("x")
        np.int64(1)
    """
    from tqdm.auto import tqdm

    source_path, _ = split_h5df_path(source)
    reader = H5df(source, "r")
    source_root = reader.format.root  # type: ignore[attr-defined]
    try:
        total = _count_objects(source_root)
    except (RuntimeError, OSError, KeyError, ValueError) as error:  # (h5py's words for a corrupt file)
        raise _unreadable(source, source_root.name, error) from None
    with tqdm(total=total, desc=f"repack {os.path.basename(source_path)}", unit="dataset",
              disable=not progress) as bar:
        _copy_tree(source_root, writer.format.root, bar.update, source_path=os.fspath(source))  # type: ignore[attr-defined]
    writer.flush()


def _check_dataset(dataset: h5py.Dataset, source_path: str, node: str) -> None:
    """Refuse, before HDF5 copies it, a dataset whose declared size its file can't hold, or whose strings point into
    corrupt global heap collections (HDF5 can hang or allocate without bound on either), as H5df's reads do."""
    path, _ = split_h5df_path(source_path)
    what = f"HDF5 dataset: {node}"
    _check_declared_size(dataset, dataset.dtype.itemsize, what, path)
    string_type = dataset.id.get_type()
    if isinstance(string_type, h5t.TypeStringID) and string_type.is_variable_str():
        plist = dataset.id.get_create_plist()
        offset = dataset.id.get_offset()
        if (offset is not None and plist.get_layout() == h5d.CONTIGUOUS and not plist.get_nfilters()
                and dataset.file.id.get_create_plist().get_sizes() == (8, 8)
                and dataset.id.get_storage_size() == dataset.size * REFERENCE.itemsize):
            check_string_heaps(path, offset, dataset.size, what)


def _unreadable(source: str | os.PathLike, node: str, error: BaseException) -> DafError:
    """The typed error for a failure while copying ``node``: a full disk (or another storage failure) with an errno,
    else an H5df source that can't be read (a corrupt file)."""
    if isinstance(error, OSError) and error.errno is not None:
        return storage_error(error, f"can't repack the H5df data set: {os.fspath(source)}\n(copying: {node})")
    return DafFormatError(f"can't repack the H5df data set: {os.fspath(source)}\n(its HDF5 object can't be read: "
                          f"{node}: {type(error).__name__}: {error}; it is corrupt: repack a backup of it)")


def _copy_tree(source: h5py.Group, destination: h5py.Group, advance: Callable[[int], Any], *, source_path: str,
               top: bool = True) -> None:
    """Copy every group and dataset of ``source`` (but the top ``daf`` version, already written) into
    ``destination``, one dataset at a time (``H5Ocopy`` keeps types and layouts; the destination's alignment
    applies)."""
    try:
        items = list(source.items())
    except (RuntimeError, OSError, KeyError, ValueError) as error:
        raise _unreadable(source_path, source.name, error) from None
    for name, node in items:
        if isinstance(node, h5py.Group):
            _copy_tree(node, destination.require_group(name), advance, source_path=source_path, top=False)
            continue
        if not (top and name == "daf"):
            try:
                if isinstance(node, h5py.Dataset):
                    _check_dataset(node, source_path, f"{source.name.rstrip('/')}/{name}")
                h5o.copy(source.id, name.encode(), destination.id, name.encode())
            except DafError:
                raise
            except (RuntimeError, OSError, KeyError, ValueError) as error:
                raise _unreadable(source_path, f"{source.name.rstrip('/')}/{name}", error) from None
        advance(1)
