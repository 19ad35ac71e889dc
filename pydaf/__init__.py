"""pydaf: a native Python implementation of Daf (DataAxesFormats.jl 0.3.0).

A Daf data set holds scalars, named axes, per-axis vectors and per-axis-pair matrices; its files are byte-compatible
with Julia's. Open one with :class:`MemoryDaf`, :class:`H5df`, :class:`FilesDaf`, :class:`ZarrDaf` or :class:`ZipDaf`.

Example:
    >>> import pydaf
    >>> daf = pydaf.MemoryDaf(name="example!")
    >>> daf.add_axis("cell", ["A", "B"]).set_vector("cell", "age", [30, 40]).get_vector("cell", "age").tolist()
    [30, 40]
"""

from typing import TYPE_CHECKING

from .abc.format import CacheGroup
from .abc.reorder import FormatReorderPlan, PlannedAxis, PlannedMatrix, PlannedVector, SimulatedCrash
from .check import check_daf
from .composition.adapters import adapter
from .composition.chains import chain_reader, chain_writer
from .composition.complete import complete_chain, complete_daf
from .composition.computations import (
    CONTRACT,
    CONTRACT1,
    CONTRACT2,
    CONTRACT3,
    DEFAULT,
    computation,
    documented,
    function_contract,
    function_default,
)
from .composition.concat import MergeAction, concatenate
from .composition.contracts import (
    DAF_ENFORCE_CONTRACTS,
    Contract,
    ContractExpectation,
    CreatedOutput,
    GuaranteedOutput,
    OptionalInput,
    OptionalOutput,
    RequiredInput,
    contract_documentation,
    contractor,
    contracts_enforced,
    verify_input,
    verify_output,
)
from .composition.copies import copy_all, copy_axis, copy_matrix, copy_scalar, copy_tensor, copy_vector
from .composition.destinations import repack
from .composition.groups import collect_group_members, compact_groups, group_names
from .composition.reconstruction import reconstruct_axis
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
from .core.readers import DafReader, Undef, is_leaf
from .core.reorder import build_reorder_plan, reorder_axes, reset_reorder_axes
from .core.writers import DafWriter
from .errors import (
    DafAppendOnlyError,
    DafChainError,
    DafClosedError,
    DafContractError,
    DafError,
    DafExistsError,
    DafFormatError,
    DafHttpError,
    DafIncompleteError,
    DafIndexError,
    DafInexactError,
    DafKeyError,
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
from .formats.http import HttpDaf
from .formats.memory import MemoryDaf
from .formats.zarr import ZarrDaf, files_to_zarr, zarr_to_files
from .formats.zip import ZipDaf
from .keys import ALL_AXES, ALL_MATRICES, ALL_SCALARS, ALL_VECTORS, pairs_as_dict
from .open import open_daf
from .sparse import SparseMatrixCSC, SparseVector, copy_array, is_read_only_array, read_only_array
from .storage_types import (
    StorageFloat,
    StorageInteger,
    StorageReal,
    StorageScalar,
    StorageScalarBase,
    StorageSigned,
    StorageUnsigned,
)

__version__ = "0.1.0"

__all__ = [
    "ALL_AXES",
    "ALL_MATRICES",
    "ALL_SCALARS",
    "ALL_VECTORS",
    "CONTRACT",
    "CONTRACT1",
    "CONTRACT2",
    "CONTRACT3",
    "DAF_ENFORCE_CONTRACTS",
    "DEFAULT",
    "VIEW_ALL_AXES",
    "VIEW_ALL_DATA",
    "VIEW_ALL_MATRICES",
    "VIEW_ALL_SCALARS",
    "VIEW_ALL_VECTORS",
    "CacheGroup",
    "Contract",
    "ContractExpectation",
    "CreatedOutput",
    "DafAnnData",
    "DafAppendOnlyError",
    "DafChainError",
    "DafClosedError",
    "DafContractError",
    "DafError",
    "DafExistsError",
    "DafFormatError",
    "DafHttpError",
    "DafIncompleteError",
    "DafIndexError",
    "DafInexactError",
    "DafKeyError",
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
    "FormatReorderPlan",
    "GuaranteedOutput",
    "H5df",
    "HttpDaf",
    "MemoryDaf",
    "MergeAction",
    "OptionalInput",
    "OptionalOutput",
    "PlannedAxis",
    "PlannedMatrix",
    "PlannedVector",
    "RequiredInput",
    "SimulatedCrash",
    "SparseMatrixCSC",
    "SparseVector",
    "StorageFloat",
    "StorageInteger",
    "StorageReal",
    "StorageScalar",
    "StorageScalarBase",
    "StorageSigned",
    "StorageUnsigned",
    "Undef",
    "ZarrDaf",
    "ZipDaf",
    "adapter",
    "brief",
    "build_reorder_plan",
    "chain_reader",
    "chain_writer",
    "check_daf",
    "collect_group_members",
    "compact_groups",
    "complete_chain",
    "complete_daf",
    "computation",
    "concatenate",
    "contract_documentation",
    "contractor",
    "contracts_enforced",
    "copy_all",
    "copy_array",
    "copy_axis",
    "copy_matrix",
    "copy_scalar",
    "copy_tensor",
    "copy_vector",
    "documented",
    "example_cells_daf",
    "example_chain_daf",
    "example_metacells_daf",
    "files_to_zarr",
    "function_contract",
    "function_default",
    "group_names",
    "is_leaf",
    "is_read_only_array",
    "open_daf",
    "pairs_as_dict",
    "read_only",
    "read_only_array",
    "reconstruct_axis",
    "reorder_axes",
    "repack",
    "reset_reorder_axes",
    "verify_input",
    "verify_output",
    "viewer",
    "zarr_to_files",
]


if TYPE_CHECKING:
    from .interop.anndata_facade import DafAnnData


def __getattr__(name: str) -> object:
    # pydaf.DafAnnData (pydaf.interop.anndata_facade) imports pandas: only when asked for, so `import pydaf` stays fast.
    if name == "DafAnnData":
        from .interop.anndata_facade import DafAnnData

        return DafAnnData
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
