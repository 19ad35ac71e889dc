"""``open_daf``: open a data set of any storage format, chosen by its path."""

from __future__ import annotations

import os

from .core.readers import DafReader
from .formats.files import FilesDaf
from .formats.h5df import H5df


def open_daf(path: str | os.PathLike, mode: str = "r", *, name: str | None = None) -> DafReader:
    """Open ``x.h5df`` or ``x.h5dfs#/group`` as :class:`~pydaf.H5df`, anything else as a :class:`~pydaf.FilesDaf`
    directory. Mode ``r`` returns a read-only data set.

    Example:
        >>> import pydaf, tempfile, os
        >>> folder = tempfile.mkdtemp()
        >>> type(pydaf.open_daf(os.path.join(folder, "x.h5df"), "w")).__name__, type(
        ...     pydaf.open_daf(os.path.join(folder, "x.daf"), "w")).__name__
        ('H5df', 'FilesDaf')
    """
    text = os.fspath(path)
    if text.endswith(".h5df") or ".h5dfs#/" in text:
        return H5df(text, mode, name=name)
    return FilesDaf(text, mode, name=name)
