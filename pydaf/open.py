"""``open_daf``: open a data set of any registered storage format, chosen by its path (see :mod:`.formats.registry`)."""

from __future__ import annotations

import os

from .core.readers import DafReader
from .formats import files, h5df, zarr  # noqa: F401 - importing a format module registers its format
from .formats.registry import guess_format


def open_daf(path: str | os.PathLike, mode: str = "r", *, name: str | None = None) -> DafReader:
    """Open a data set in the format that recognises ``path`` (:func:`~pydaf.formats.registry.guess_format`): an
    HDF5 file or a path ending with ``.h5df`` or holding ``.h5dfs#/group`` as :class:`~pydaf.H5df`; a Zarr group's
    directory or a path ending with ``.daf.zarr``, ``.daf.zarr.zip`` or holding ``.dafs.zarr.zip#/group`` as a
    :class:`~pydaf.ZarrDaf`; another directory or a new path as a :class:`~pydaf.FilesDaf`. Mode ``r`` returns a
    read-only data set.

    Example:
        >>> import pydaf, tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> type(pydaf.open_daf(os.path.join(folder, "x.h5df"), "w")).__name__, type(
        ...     pydaf.open_daf(os.path.join(folder, "x.daf"), "w")).__name__
        ('H5df', 'FilesDaf')
    """
    text = os.fspath(path)
    return guess_format(text).open(text, mode, name=name)
