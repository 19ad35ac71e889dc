"""pydaf: a native Python implementation of Daf (DataAxesFormats.jl 0.3.0).

A Daf data set holds scalars, named axes, per-axis vectors and per-axis-pair matrices; its files are byte-compatible
with Julia's. Open one with :class:`MemoryDaf` or :class:`H5df`.

Example:
    >>> import pydaf
    >>> daf = pydaf.MemoryDaf(name="example!")
    >>> daf.add_axis("cell", ["A", "B"]).set_vector("cell", "age", [30, 40]).get_vector("cell", "age").tolist()
    [30, 40]
"""

from .composition.chains import chain_reader, chain_writer
from .core.read_only import DafReadOnly, read_only
from .core.readers import DafReader, Undef
from .core.writers import DafWriter
from .errors import (
    DafError,
    DafExistsError,
    DafFormatError,
    DafMissingError,
    DafModeError,
    DafNameError,
    DafReadOnlyError,
    DafShapeError,
    DafTypeError,
    DafUnsupportedError,
    DafValueError,
)
from .formats.base import CacheGroup
from .formats.files import FilesDaf
from .formats.h5df import H5df, repack
from .formats.memory import MemoryDaf
from .open import open_daf
from .sparse import SparseMatrixCSC, SparseVector

__version__ = "0.1.0"

__all__ = [
    "CacheGroup",
    "DafError",
    "DafExistsError",
    "DafFormatError",
    "DafMissingError",
    "DafModeError",
    "DafNameError",
    "DafReadOnly",
    "DafReadOnlyError",
    "DafReader",
    "DafShapeError",
    "DafTypeError",
    "DafUnsupportedError",
    "DafValueError",
    "DafWriter",
    "FilesDaf",
    "H5df",
    "MemoryDaf",
    "SparseMatrixCSC",
    "SparseVector",
    "Undef",
    "chain_reader",
    "chain_writer",
    "open_daf",
    "read_only",
    "repack",
]
