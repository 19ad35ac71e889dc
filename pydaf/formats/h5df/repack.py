"""Repacking an H5df data set: a compact copy into a new file (the format's ``repack`` in the registry)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import h5py
from h5py import h5o

from .format import H5df, split_h5df_path


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
    with tqdm(total=_count_objects(source_root), desc=f"repack {os.path.basename(source_path)}", unit="dataset",
              disable=not progress) as bar:
        _copy_tree(source_root, writer.format.root, bar.update)  # type: ignore[attr-defined]
    writer.flush()


def _copy_tree(source: h5py.Group, destination: h5py.Group, advance: Callable[[int], Any], *,
               top: bool = True) -> None:
    """Copy every group and dataset of ``source`` (but the top ``daf`` version, already written) into
    ``destination``, one dataset at a time (``H5Ocopy`` keeps types and layouts; the destination's alignment
    applies)."""
    for name, node in source.items():
        if isinstance(node, h5py.Group):
            _copy_tree(node, destination.require_group(name), advance, top=False)
            continue
        if not (top and name == "daf"):
            h5o.copy(source.id, name.encode(), destination.id, name.encode())
        advance(1)
