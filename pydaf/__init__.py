"""pydaf: a native Python implementation of Daf (DataAxesFormats.jl 0.3.0).

A Daf data set holds scalars, named axes, per-axis vectors and per-axis-pair matrices; its files are byte-compatible
with Julia's. Open one with :class:`MemoryDaf`, :class:`H5df`, :class:`FilesDaf`, :class:`ZarrDaf` or :class:`ZipDaf`.

Example:
    >>> import pydaf
    >>> daf = pydaf.MemoryDaf(name="example!")
    >>> daf.add_axis("cell", ["A", "B"]).set_vector("cell", "age", [30, 40]).get_vector("cell", "age").tolist()
    [30, 40]
"""

from .abc.format import CacheGroup
from .check import check_daf
from .composition.chains import chain_reader, chain_writer
from .composition.complete import complete_chain, complete_daf
from .composition.concat import MergeAction, concatenate
from .composition.copies import copy_all, copy_axis, copy_matrix, copy_scalar, copy_tensor, copy_vector
from .composition.destinations import repack
from .composition.views import (
    VIEW_ALL_AXES,
    VIEW_ALL_DATA,
    VIEW_ALL_MATRICES,
    VIEW_ALL_SCALARS,
    VIEW_ALL_VECTORS,
    DafView,
    viewer,
)
from .core.brief import brief
from .core.read_only import DafReadOnly, DafReadOnlyWrapper, read_only
from .core.readers import DafReader, Undef
from .core.writers import DafWriter
from .errors import (
    DafAppendOnlyError,
    DafChainError,
    DafClosedError,
    DafError,
    DafExistsError,
    DafFormatError,
    DafInexactError,
    DafLockedError,
    DafMissingError,
    DafModeError,
    DafNameError,
    DafPathError,
    DafReadOnlyError,
    DafShapeError,
    DafStorageError,
    DafTypeError,
    DafUnsupportedError,
    DafValueError,
)
from .example_data import example_cells_daf, example_chain_daf, example_metacells_daf
from .formats.files import FilesDaf
from .formats.h5df import H5df
from .formats.memory import MemoryDaf
from .formats.zarr import ZarrDaf, files_to_zarr, zarr_to_files
from .formats.zip import ZipDaf
from .keys import ALL_AXES, ALL_MATRICES, ALL_SCALARS, ALL_VECTORS, pairs_as_dict
from .open import open_daf
from .sparse import SparseMatrixCSC, SparseVector, copy_array, is_read_only_array, read_only_array

__version__ = "0.1.0"

__all__ = [
    "ALL_AXES",
    "ALL_MATRICES",
    "ALL_SCALARS",
    "ALL_VECTORS",
    "VIEW_ALL_AXES",
    "VIEW_ALL_DATA",
    "VIEW_ALL_MATRICES",
    "VIEW_ALL_SCALARS",
    "VIEW_ALL_VECTORS",
    "CacheGroup",
    "DafAppendOnlyError",
    "DafChainError",
    "DafClosedError",
    "DafError",
    "DafExistsError",
    "DafFormatError",
    "DafInexactError",
    "DafLockedError",
    "DafMissingError",
    "DafModeError",
    "DafNameError",
    "DafPathError",
    "DafReadOnly",
    "DafReadOnlyError",
    "DafReadOnlyWrapper",
    "DafReader",
    "DafShapeError",
    "DafStorageError",
    "DafTypeError",
    "DafUnsupportedError",
    "DafValueError",
    "DafView",
    "DafWriter",
    "FilesDaf",
    "H5df",
    "MemoryDaf",
    "MergeAction",
    "SparseMatrixCSC",
    "SparseVector",
    "Undef",
    "ZarrDaf",
    "ZipDaf",
    "brief",
    "chain_reader",
    "chain_writer",
    "check_daf",
    "complete_chain",
    "complete_daf",
    "concatenate",
    "copy_all",
    "copy_array",
    "copy_axis",
    "copy_matrix",
    "copy_scalar",
    "copy_tensor",
    "copy_vector",
    "example_cells_daf",
    "example_chain_daf",
    "example_metacells_daf",
    "files_to_zarr",
    "is_read_only_array",
    "open_daf",
    "pairs_as_dict",
    "read_only",
    "read_only_array",
    "repack",
    "viewer",
    "zarr_to_files",
]
