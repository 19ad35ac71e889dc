"""The content of an AnnData (or of a 10x Cell Ranger matrix) in Daf's terms, and its writing into a Daf data set:
readers sort what they find into a :class:`Content` (what Daf can hold, and one message per element it cannot);
:func:`content_as_daf` checks every shape, reports the unsupported elements to the handler, then writes axes, vectors,
scalars and the matrices, streamed straight into the destination's builders (a CSR matrix as the ``var x obs``
matrix its arrays are). What a vector can't say about a column is recorded in plain scalars (:func:`recorded_scalars`).

Design: docs/design/anndata.md.

Example:
    >>> content = Content(obs={"_index": Column(np.array(["A", "B"], dtype=object))},
    ...                   var={"_index": Column(np.array(["X"], dtype=object)),
    ...                        "score": Column(np.array([0.5]))})
    >>> daf = content_as_daf(content, None, obs_is="cell", var_is="gene", name="example!")
    >>> daf.axis_vector("cell").tolist(), daf.get_vector("gene", "score").tolist()
    (['A', 'B'], [0.5])
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import h5py
import numpy as np

from .. import kernels
from .._os.files import require_regular_file
from .._os.maps import populate_pages
from ..composition.destinations import build_daf, require_distinct
from ..core.names import is_valid_name
from ..core.validation import NUMBA_THRESHOLD, sparse_matrix_problem
from ..core.writers import DafWriter
from ..errors import DafError, DafFormatError, DafShapeError, DafTypeError, DafUnsupportedError, DafValueError
from ..formats.memory import MemoryDaf
from ..open import outside_reference
from ..sparse import SparseMatrixCSC
from ..storage_types import STRING_DTYPE, indtype_for_size, scalar_value, storage_dtype
from .h5ad_elements import Column, MatrixSource, Unsupported

__all__ = ["AXIS_ARRAY_ENCODINGS", "RAW_RECORD", "UNSUPPORTED_HANDLERS", "AxisArray", "Content",
           "UnsupportedElementWarning", "axis_array_axis", "axis_array_record", "column_order_scalar", "column_scalar",
           "content_as_daf", "element_path", "index_name_scalar", "open_source", "progress_bar", "raw_axis_name",
           "recorded_scalars", "sort_axis_array", "sort_columns", "sort_matrix", "sort_uns"]

#: What to do with an element Daf can't hold: skip it silently, warn (one :class:`UnsupportedElementWarning` per
#: element), or raise a :class:`~pydaf.DafUnsupportedError` before anything is written.
UNSUPPORTED_HANDLERS = ("ignore", "warn", "error")

# Entries per slice when matrices are streamed (bounded buffers: ~100 MB for 8-byte values and indices).
_CHUNK = 1 << 23


class UnsupportedElementWarning(UserWarning):
    """An element of an AnnData (or 10x) file that Daf can't hold and that was skipped (``unsupported element``), or
    a column stored with a loss (``lossy element``: e.g. missing entries that can't be told from real empty strings).
    The first line of the message names the element."""


@dataclass
class Content:
    """What an AnnData holds, in Daf's terms, before anything is written: ``obs``/``var`` as ``{"_index": Column,
    column: Column, ...}`` in column order, ``uns`` scalars, ``matrices`` as ``(member, key, source)`` with member
    one of ``X``, ``layers``, ``obsp``, ``varp`` (and ``raw``: raw.X), and one message per element Daf cannot hold.
    ``raw`` holds the columns of ``raw.var`` (as ``var``) when the AnnData has a ``raw`` that is kept."""

    uns: dict[str, Any] = field(default_factory=dict)
    obs: dict[str, Column] = field(default_factory=dict)
    var: dict[str, Column] = field(default_factory=dict)
    matrices: list[tuple[str, str, MatrixSource]] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)
    origin: str = "the AnnData object"  # where it comes from, for messages
    #: The name of the obs/var index (``member -> name``), when it has one.
    index_names: dict[str, str] = field(default_factory=dict)
    #: ``uns`` arrays of colors (``<column>_colors -> strings``), kept if they belong to a categorical column.
    colors: dict[str, np.ndarray] = field(default_factory=dict)
    #: The scalars recording what Daf's vectors can't say (filled by :func:`content_as_daf`, see
    #: :func:`recorded_scalars`).
    recorded: dict[str, Any] = field(default_factory=dict)
    axis_arrays: list[AxisArray] = field(default_factory=list)  # obsm/varm elements kept (see AxisArray)
    raw: dict[str, Column] | None = None  # raw.var's columns ({"_index": raw.var_names, ...}); None: no raw


#: The scalar recording that a data set holds an AnnData's ``raw``: the name of its axis (:func:`raw_axis_name`).
RAW_RECORD = "raw_is"


def raw_axis_name(var_axis: str) -> str:
    """The Daf axis of the ``raw.var_names`` of an AnnData whose var axis is ``var_axis``: ``raw_<var_axis>``.

    Example:
        >>> raw_axis_name("gene"), raw_axis_name("var")
        ('raw_gene', 'raw_var')
    """
    return f"raw_{var_axis}"


def element_path(member: str, key: str) -> str:
    """How messages name the element ``key`` of ``member`` (``raw_varm`` is AnnData's ``raw/varm``).

    Example:
        >>> element_path("obsm", "X_umap"), element_path("raw_varm", "PCs")
        ('obsm/X_umap', 'raw/varm/PCs')
    """
    return f"{'raw/varm' if member == 'raw_varm' else member}/{key}"


# Which obs/var (raw) axis the rows of an obsm/varm (raw.varm) element are.
_AXIS_ARRAY_ROWS = {"obsm": "obs", "varm": "var", "raw_varm": "raw"}


#: The AnnData encodings of the obsm/varm elements kept as Daf matrices (anndata's ``encoding-type`` names), one of
#: which the record scalar ``<axis>_encoding`` holds.
AXIS_ARRAY_ENCODINGS = ("array", "csr_matrix", "csc_matrix", "dataframe")


@dataclass
class AxisArray:
    """An ``obsm``/``varm`` element kept as a Daf matrix: ``source`` (``n_obs`` or ``n_var`` rows) becomes the matrix
    ``key`` of the rows axis (obs or var) and a new axis :func:`axis_array_axis` whose ``entries`` are the element's
    column names (a DataFrame's columns, else ``"0"``, ``"1"``, ...), recorded by the scalar :func:`axis_array_record`
    holding ``encoding`` (one of :data:`AXIS_ARRAY_ENCODINGS`) so the export rebuilds the same element."""

    member: str
    key: str
    encoding: str
    source: MatrixSource
    entries: np.ndarray


def axis_array_axis(member: str, key: str) -> str:
    """The Daf axis of the columns of an ``obsm``/``varm`` element: ``<member>_<key>``.

    Example:
        >>> axis_array_axis("obsm", "X_umap")
        'obsm_X_umap'
    """
    return f"{member}_{key}"


def axis_array_record(axis: str) -> str:
    """The scalar recording that an axis holds the columns of an ``obsm``/``varm`` element, and its AnnData encoding.

    Example:
        >>> axis_array_record("obsm_X_umap")
        'obsm_X_umap_encoding'
    """
    return f"{axis}_encoding"


def report_unsupported(messages: list[str], handler: str, name: str) -> None:
    """Report each message to the ``unsupported_handler``: nothing, an :class:`UnsupportedElementWarning` each, or
    a :class:`~pydaf.DafUnsupportedError` for the first.

    Example:
        >>> report_unsupported(["unsupported element: obsm/X_pca"], "error", "cells!")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafUnsupportedError: unsupported element: obsm/X_pca
        in AnnData for the daf data: cells!
    """
    if handler not in UNSUPPORTED_HANDLERS:
        raise DafValueError(f"invalid unsupported_handler: {handler!r} (expected one of: "
                            f"{', '.join(UNSUPPORTED_HANDLERS)})")
    for message in messages:
        text = f"{message}\nin AnnData for the daf data: {name}"
        if handler == "error":
            raise DafUnsupportedError(message, daf_name=name, daf_preposition="in AnnData for")
        if handler == "warn":
            warnings.warn(text, UnsupportedElementWarning, stacklevel=4)


def sort_matrix(content: Content, member: str, key: str, value: Any) -> None:
    """File one element of a matrix member (``X``, ``layers``, ``obsp``, ``varp``; a new ``key`` replaces an earlier
    one) or note why it can't be held.

    Example:
        >>> content = Content()
        >>> sort_matrix(content, "layers", "spliced", Unsupported("awkward array"))
        >>> content.unsupported
        ['unsupported element: layers/spliced (awkward array)']
    """
    where = member if member == "X" else f"{member}/{key}"
    if member != "X" and not is_valid_name(key):
        content.unsupported.append(f"unsupported element: {where} (a name Daf can't store)")
    elif isinstance(value, Unsupported):
        content.unsupported.append(f"unsupported element: {where} ({value.reason})")
    elif not isinstance(value, MatrixSource):
        content.unsupported.append(f"unsupported element: {where} (not a matrix)")
    elif value.dtype.kind not in "biuf" or value.dtype.itemsize > 8 or value.dtype == np.float16:
        content.unsupported.append(f"unsupported element: {where} (element type: {value.dtype})")
    else:
        content.matrices[:] = [entry for entry in content.matrices if entry[:2] != (member, key)]
        content.matrices.append((member, key, value))


def sort_columns(content: Content, member: str, columns: Any) -> dict[str, Any]:
    """The columns of ``obs``/``var`` (``{"_index": ..., name: Column | Unsupported}``) that Daf can hold, noting
    why each other one can't.

    Example:
        >>> content = Content()
        >>> kept = sort_columns(content, "obs", {"_index": Column(np.array(["A"], dtype=object)),
        ...                                      "name": Column(np.array([1]))})
        >>> list(kept), content.unsupported
        (['_index'], ['unsupported element: obs/name (a reserved Daf vector name)'])
    """
    if isinstance(columns, Unsupported):
        raise DafFormatError(f"can't read the AnnData {member}: {columns.reason}\nin {content.origin}")
    kept: dict[str, Any] = {}
    index = columns.get("_index") if isinstance(columns, dict) else None
    if not isinstance(index, Column) or index.values.ndim != 1:
        reason = index.reason if isinstance(index, Unsupported) else "missing" if index is None else "not a vector"
        raise DafFormatError(f"can't read the names (index) of the AnnData {member}: {reason}\nin {content.origin}\n"
                             "(an obs/var dataframe needs a 1-dimensional index: the entries of its Daf axis)")
    for name, column in columns.items():
        where = f"{member}/{name}" if name != "_index" else f"{member} names"
        if isinstance(column, Unsupported):
            content.unsupported.append(f"unsupported element: {where} ({column.reason})")
            continue
        if name != "_index" and name in ("name", "index"):
            content.unsupported.append(f"unsupported element: {where} (a reserved Daf vector name)")
            continue
        if name != "_index" and not is_valid_name(name):
            content.unsupported.append(f"unsupported element: {where} (a name Daf can't store)")
            continue
        try:
            storage_dtype(column.values.dtype)
        except DafTypeError:
            if name == "_index":
                raise DafFormatError(f"can't read the names (index) of the AnnData {member}: element type "
                                     f"{column.values.dtype}\nin {content.origin}") from None
            content.unsupported.append(f"unsupported element: {where} (element type: {column.values.dtype})")
            continue
        if name != "_index":
            column = _stored_column(column, where, content.unsupported)
        if column.missing is not None:
            empty = '""' if column.values.dtype == STRING_DTYPE else ("false" if column.values.dtype == bool else "0")
            content.unsupported.append(f"nullable element: {where} has {int(column.missing.sum())} missing values, "
                                       f"stored as {empty}")
        kept[name] = column
    return kept


# Integers up to 2^53 are exact in a Float64 (a nullable integer column with missing values is stored so).
_EXACT_FLOAT_INTEGER = 1 << 53


def _stored_column(column: Column, where: str, messages: list[str]) -> Column:
    """The column as Daf stores it (``missing`` cleared once the missing entries are kept, see
    :func:`recorded_scalars`), noting each lossy step in ``messages``: categoricals keep their labels (``""`` where
    missing: exported as missing unless ``""`` is a category); nullable integer/bool columns with missing entries
    become Float64 with NaN; nullable strings keep ``""`` for missing (exported as missing unless the column also
    held real empty strings)."""
    if column.note is not None:
        messages.append(f"lossy element: {where} ({column.note})")
    missing = column.missing
    count = 0 if missing is None else int(missing.sum())
    if column.categories is not None:
        categories = column.categories.tolist()
        problem = ("a category holds a line break" if any("\n" in category for category in categories)
                   else "its only category is the empty string" if categories == [""] else None)
        if problem is not None:
            lost = f", its {count} missing values as \"\"" if count else ""
            messages.append(f"lossy element: {where} (categories not kept: {problem}; stored as strings{lost})")
            return replace(column, categories=None, ordered=False, missing=None)
        if count and "" in categories:
            messages.append(f"lossy element: {where} has {count} missing values and the category \"\": the missing "
                            "values are stored as that category (and exported as it)")
        return replace(column, missing=None)
    if column.nullable == "string":
        empty = column.values == ""
        if np.any(empty & ~missing) if missing is not None else np.any(empty):
            if count:
                messages.append(f"lossy element: {where} has {count} missing values and empty strings: both are "
                                "stored as \"\" (and exported as empty strings)")
            else:
                messages.append(f"lossy element: {where} (a nullable string column holding empty strings: stored "
                                "and exported as plain strings)")
            return replace(column, nullable=None, missing=None)
        return replace(column, missing=None)
    if column.nullable is not None and missing is not None:
        values = column.values
        present = values[~missing]
        if values.dtype.kind in "iu" and present.size and (present.max() > _EXACT_FLOAT_INTEGER
                                                           or present.min() < -_EXACT_FLOAT_INTEGER):
            messages.append(f"lossy element: {where} has {count} missing values, stored as 0 (its integers are too "
                            "large to be exact in a Float64 with NaN)")
            return replace(column, missing=None)
        stored = values.astype(np.float64)
        stored[missing] = np.nan
        return replace(column, values=stored, missing=None)
    return column


def sort_uns(content: Content, uns: dict[str, Any]) -> None:
    """File the ``uns`` values that are scalars, noting why each other one can't be held.

    Example:
        >>> content = Content()
        >>> sort_uns(content, {"organism": "human", "params": {}})
        >>> content.uns, content.unsupported
        ({'organism': 'human'}, ['unsupported element: uns/params (nested mapping)'])
    """
    for key, value in uns.items():
        colors = _colors(key, value)
        if colors is not None:
            content.colors[key] = colors
        elif isinstance(value, Column):
            content.unsupported.append(f"unsupported element: uns/{key} (array of shape {value.values.shape})")
        elif isinstance(value, Unsupported):
            content.unsupported.append(f"unsupported element: uns/{key} ({value.reason})")
        elif not is_valid_name(key):
            content.unsupported.append(f"unsupported element: uns/{key} (a name Daf can't store)")
        elif isinstance(value, str | bool | int | float | np.generic):
            try:
                scalar_value(value)
            except DafTypeError:
                content.unsupported.append(f"unsupported element: uns/{key} (a {type(value).__name__})")
            else:
                content.uns[key] = value
        else:
            kind = "nested mapping" if isinstance(value, dict) else "not a scalar"
            content.unsupported.append(f"unsupported element: uns/{key} ({kind})")


def sort_axis_array(content: Content, member: str, key: str, value: Any, *, entries: Any = None,
                    encoding: str | None = None) -> None:
    """File one ``obsm``/``varm`` element (``value``: a 2-dimensional :class:`MatrixSource`; ``entries``: its column
    names, by default ``"0"``, ``"1"``, ...; ``encoding``: by default the source's) or note why it can't be held.

    Example:
        >>> content = Content()
        >>> sort_axis_array(content, "obsm", "X_umap", MatrixSource("dense", (3, 2), np.dtype("f4"), np.zeros((3, 2))))
        >>> [(array.key, array.encoding, array.entries.tolist()) for array in content.axis_arrays]
        [('X_umap', 'array', ['0', '1'])]
        >>> sort_axis_array(content, "obsm", "X_spatial", Unsupported("3-dimensional array"))
        >>> content.unsupported
        ['unsupported element: obsm/X_spatial (3-dimensional array)']
    """
    where = element_path(member, key)
    if not is_valid_name(key):
        content.unsupported.append(f"unsupported element: {where} (a name Daf can't store)")
    elif isinstance(value, Unsupported):
        content.unsupported.append(f"unsupported element: {where} ({value.reason})")
    elif not isinstance(value, MatrixSource):
        content.unsupported.append(f"unsupported element: {where} (not a matrix)")
    elif value.dtype.kind not in "biuf" or value.dtype.itemsize > 8 or value.dtype == np.float16:
        content.unsupported.append(f"unsupported element: {where} (element type: {value.dtype})")
    else:
        if entries is None:
            entries = np.array([str(index) for index in range(value.shape[1])], dtype=object)
        if encoding is None:
            encoding = {"csr": "csr_matrix", "csc": "csc_matrix"}.get(value.kind, "array")
        content.axis_arrays[:] = [array for array in content.axis_arrays if (array.member, array.key) != (member, key)]
        content.axis_arrays.append(AxisArray(member, key, encoding, value, np.asarray(entries, dtype=object)))


def _colors(key: str, value: Any) -> np.ndarray | None:
    """The colors of an ``uns`` entry ``<column>_colors`` (a 1-dimensional array of strings, scanpy's colors of a
    categorical column's categories), else ``None``."""
    if not key.endswith("_colors"):
        return None
    if isinstance(value, Column):
        if value.missing is not None:
            return None
        value = value.values
    if isinstance(value, list | tuple):
        value = np.array(value, dtype=object)
    if not isinstance(value, np.ndarray) or value.ndim != 1 or value.dtype.kind not in "OU":
        return None
    items = value.tolist()
    if not all(isinstance(item, str) and "\n" not in item for item in items):
        return None
    return np.array(items, dtype=object)


def column_scalar(axis: str, column: str, what: str) -> str:
    """The name of the scalar recording ``what`` (``categories``, ``ordered``, ``nullable``, ``colors``) of the
    vector ``column`` of ``axis``, imported from an AnnData column (see :func:`recorded_scalars`).

    Example:
        >>> column_scalar("cell", "louvain", "categories")
        'cell_louvain_categories'
    """
    return f"{axis}_{column}_{what}"


def index_name_scalar(axis: str) -> str:
    """The name of the scalar recording the name of the AnnData index an axis was imported from.

    Example:
        >>> index_name_scalar("gene")
        'gene_index_name'
    """
    return f"{axis}_index_name"


#: What :func:`column_scalar` records.
RECORDED_COLUMN_FACTS = ("categories", "ordered", "nullable", "colors")


def recorded_scalars(content: Content, axes: dict[str, str]) -> dict[str, Any]:
    """The scalars recording what the vectors of the obs/var axes can't say, so the export restores the AnnData
    columns (all plain Daf scalars, which Julia's Daf reads as any other):

    - ``<axis>_<column>_categories``: a categorical's categories in their order, one per line (the vector holds the
      labels, ``""`` where missing: a label that isn't a category is a missing value);
    - ``<axis>_<column>_ordered``: ``true`` for an ordered categorical;
    - ``<axis>_<column>_colors``: the colors of its categories (scanpy's ``uns["<column>_colors"]``), one per line;
    - ``<axis>_<column>_nullable``: the pandas nullable type of the column (``Int64``, ``UInt8``, …, ``boolean``:
      the vector is Float64 with NaN where missing if any are, else of its own type; ``string``: ``""`` is missing);
    - ``<axis>_index_name``: the name of the obs/var index.

    An ``uns`` array of colors whose column isn't a categorical of obs or var goes to the unsupported elements.

    Example:
        >>> content = Content(obs={"_index": Column(np.array(["A", "B"], dtype=object)),
        ...                        "type": Column(np.array(["T", "B"], dtype=object),
        ...                                       categories=np.array(["T", "B"], dtype=object))},
        ...                   colors={"type_colors": np.array(["#ff0000", "#0000ff"], dtype=object)},
        ...                   index_names={"obs": "barcode"})
        >>> recorded_scalars(content, {"obs": "cell", "var": "gene"})
        {'cell_index_name': 'barcode', 'cell_type_categories': 'T\\nB', 'cell_type_colors': '#ff0000\\n#0000ff'}
    """
    scalars: dict[str, Any] = {}
    for member in _column_members(content, axes):
        axis = axes[member]
        if member in content.index_names:
            scalars[index_name_scalar(axis)] = content.index_names[member]
        for name, column in getattr(content, member).items():
            if name == "_index":
                continue
            if column.categories is not None:
                scalars[column_scalar(axis, name, "categories")] = "\n".join(column.categories.tolist())
                if column.ordered:
                    scalars[column_scalar(axis, name, "ordered")] = True
                colors = content.colors.get(f"{name}_colors") if member != "raw" else None
                in_obs = content.obs.get(name)  # (scanpy's colors are of obs columns: obs first)
                if colors is not None and (member == "obs" or in_obs is None or in_obs.categories is None):
                    scalars[column_scalar(axis, name, "colors")] = "\n".join(colors.tolist())
            if column.nullable is not None:
                scalars[column_scalar(axis, name, "nullable")] = column.nullable
    return scalars


def _column_members(content: Content, axes: dict[str, str]) -> tuple[str, ...]:
    """The members of ``content`` whose columns become the vectors of an axis: obs, var, and raw (raw.var) if kept."""
    return ("obs", "var", "raw") if content.raw is not None and "raw" in axes else ("obs", "var")


def _record(content: Content, axes: dict[str, str]) -> None:
    """Fill ``content.recorded``, noting the colors that belong to no categorical and the ``uns`` scalars whose
    names are taken by the recorded ones."""
    content.recorded = recorded_scalars(content, axes)
    for key, colors in content.colors.items():
        column = key[:-len("_colors")]
        if not any(column_scalar(axes[member], column, "colors") in content.recorded for member in ("obs", "var")):
            content.unsupported.append(f"unsupported element: uns/{key} (array of shape {colors.shape}: the colors "
                                       "of no categorical obs/var column)")
    for key in sorted(set(content.uns).intersection(content.recorded)):
        content.unsupported.append(f"unsupported element: uns/{key} (the name of a scalar recording an obs/var "
                                   "column)")


def _chosen(value: str | None, uns: dict[str, Any], key: str, default: str) -> str:
    if value is not None:
        return value
    stored = uns.get(key)
    return stored if isinstance(stored, str) else default


@contextmanager
def progress_bar(total: int, progress: bool, description: str) -> Iterator[Any]:
    """A tqdm progress bar of ``total`` entries (disabled unless ``progress``).

    Example:
        >>> with progress_bar(10, False, "AnnData -> Daf") as bar:
        ...     bar.update(10)
    """
    from tqdm.auto import tqdm

    with tqdm(total=total, desc=description, unit="entry", unit_scale=True, disable=not progress,
              mininterval=0.5) as bar:
        yield bar


def _read_slice(source: Any, start: int, stop: int, out: np.ndarray) -> None:
    """Copy ``source[start:stop]`` (an h5py dataset or an array) into ``out`` (converting the type on the way)."""
    if isinstance(source, h5py.Dataset):
        if stop > start:
            source.read_direct(out, np.s_[start:stop])
    else:
        out[...] = source[start:stop]


def _read_indices(source: Any, start: int, stop: int, out: np.ndarray, limit: int, where: str) -> None:
    """Copy the 0-based ``source[start:stop]`` into ``out`` as 1-based indices, refusing any outside ``0..limit - 1``
    *before* converting them (HDF5 clips a negative value into an unsigned type, numpy wraps it: either would make a
    wrong index that looks valid). Read straight into ``out`` when the types have the same size."""
    dtype = np.dtype(source.dtype)
    raw = out.view(dtype) if out.dtype.itemsize == dtype.itemsize else np.empty(stop - start, dtype=dtype)
    _read_slice(source, start, stop, raw)
    if raw.size and (raw.min() < 0 or raw.max() >= limit):
        position = int(np.argmax((raw < 0) | (raw >= limit)))
        raise DafFormatError(f"invalid indices of the AnnData sparse matrix: {where}\n"
                             f"found: indices[{start + position}] = {raw[position]}\nexpected: 0..{limit - 1}")
    np.add(raw, 1, out=out, casting="unsafe")


def _indptr(source: MatrixSource, n_columns: int, where: str) -> np.ndarray:
    indptr = np.asarray(source.indptr[()] if isinstance(source.indptr, h5py.Dataset) else source.indptr,
                        dtype=np.int64)
    if indptr.shape != (n_columns + 1,) or indptr[0] != 0 or indptr[-1] != source.nnz or np.any(np.diff(indptr) < 0):
        raise DafFormatError(f"invalid indptr of the sparse matrix: {where}\n(expected {n_columns + 1} non-decreasing "
                             f"offsets from 0 to nnz = {source.nnz})")
    return indptr


@contextmanager
def _sparse_builder(daf: DafWriter, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                    nnz: int) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``daf.empty_sparse_matrix``; or, for a data set that packs by default (``packed=True``: a packed conversion),
    buffers in memory stored by ``set_matrix`` when filled, so its components are packed as Julia's ``copy_all!``
    packs them (a FilesDaf's and a ZarrDaf's sparse builders are always flat, as Julia's)."""
    if not getattr(daf.format, "packed_default", False):
        with daf.empty_sparse_matrix(rows_axis, columns_axis, name, dtype, nnz) as buffers:
            yield buffers
        return
    shape = (daf.axis_length(rows_axis), daf.axis_length(columns_axis))
    index_dtype = indtype_for_size(max(shape[0], shape[1], nnz))
    colptr = np.full(shape[1] + 1, nnz + 1, dtype=index_dtype)
    colptr[0] = 1
    rowval, nzval = np.ones(nnz, dtype=index_dtype), np.zeros(nnz, dtype=dtype)
    yield colptr, rowval, nzval
    daf.set_matrix(rows_axis, columns_axis, name, SparseMatrixCSC(shape, colptr, rowval, nzval), relayout=False)


def _write_sparse(daf: DafWriter, rows_axis: str, columns_axis: str, name: str, source: MatrixSource, where: str,
                  bar: Any) -> None:
    """Store the 0-based CSC arrays of ``source`` as the 1-based CSC matrix ``(rows_axis, columns_axis)``,
    streaming slices straight into the destination's buffers."""
    indptr = _indptr(source, daf.axis_length(columns_axis), where)
    if source.index_mask is not None:
        _write_masked_sparse(daf, rows_axis, columns_axis, name, source, indptr, where, bar)
        return
    nnz = source.nnz
    with _sparse_builder(daf, rows_axis, columns_axis, name, source.dtype, nnz) as (colptr, rowval, nzval):
        np.add(indptr, 1, out=colptr, casting="unsafe")
        for start in range(0, nnz, _CHUNK):
            stop = min(start + _CHUNK, nnz)
            populate_pages(rowval[start:stop])
            populate_pages(nzval[start:stop])
            _read_indices(source.indices, start, stop, rowval[start:stop], daf.axis_length(rows_axis), where)
            _read_slice(source.data, start, stop, nzval[start:stop])
            bar.update(stop - start)
        # Checked before the builder makes the matrix exist (the builder checks again, the pages are in the cache).
        _require_valid_indices(SparseMatrixCSC((daf.axis_length(rows_axis), daf.axis_length(columns_axis)), colptr,
                                               rowval, nzval), where)
        del colptr, rowval, nzval  # drop the maps of the file now (they count in this process's RSS)


def _write_masked_sparse(daf: DafWriter, rows_axis: str, columns_axis: str, name: str, source: MatrixSource,
                         indptr: np.ndarray, where: str, bar: Any) -> None:
    """:func:`_write_sparse` keeping only the entries whose index ``source.index_mask`` keeps (renumbered in order),
    in two streaming passes: one counts the kept entries of each column (the new ``colptr``), the other copies them
    into the destination's buffers."""
    mask = np.asarray(source.index_mask, dtype=bool)
    renumbered = np.cumsum(mask, dtype=np.int64)  # the 1-based new index of each kept one
    nnz = source.nnz
    kept_before = np.zeros(indptr.shape[0], dtype=np.int64)  # kept entries before each column's first
    kept_so_far = 0
    for start in range(0, nnz, _CHUNK):
        stop = min(start + _CHUNK, nnz)
        raw = np.empty(stop - start, dtype=np.int64)
        _read_indices(source.indices, start, stop, raw, mask.shape[0], where)
        running = np.cumsum(mask[raw - 1], dtype=np.int64) + kept_so_far
        columns = slice(int(np.searchsorted(indptr, start, side="right")),
                        int(np.searchsorted(indptr, stop, side="right")))
        kept_before[columns] = running[indptr[columns] - start - 1]
        kept_so_far = int(running[-1])
    with _sparse_builder(daf, rows_axis, columns_axis, name, source.dtype, kept_so_far) as (colptr, rowval,
                                                                                                nzval):
        np.add(kept_before, 1, out=colptr, casting="unsafe")
        position = 0
        for start in range(0, nnz, _CHUNK):
            stop = min(start + _CHUNK, nnz)
            raw = np.empty(stop - start, dtype=np.int64)
            _read_indices(source.indices, start, stop, raw, mask.shape[0], where)
            values = np.empty(stop - start, dtype=source.dtype)
            _read_slice(source.data, start, stop, values)
            kept = mask[raw - 1]
            count = int(kept.sum())
            rowval[position:position + count] = renumbered[raw[kept] - 1]
            nzval[position:position + count] = values[kept]
            position += count
            bar.update(stop - start)
        _require_valid_indices(SparseMatrixCSC((daf.axis_length(rows_axis), daf.axis_length(columns_axis)), colptr,
                                               rowval, nzval), where)
        del colptr, rowval, nzval


def _require_valid_indices(matrix: SparseMatrixCSC, where: str) -> None:
    """Check the (writable, 1-based) indices copied from an AnnData sparse matrix, first sorting the entries of each
    column by row if they are out of order (AnnData allows it, Daf does not)."""
    problem = sparse_matrix_problem(matrix.shape, matrix.colptr, matrix.rowval)
    if problem is not None and problem.unsorted:
        if matrix.nnz < NUMBA_THRESHOLD:
            order = np.lexsort((matrix.rowval, matrix.entry_columns()))
            matrix.rowval[...] = matrix.rowval[order]
            matrix.nzval[...] = matrix.nzval[order]
        else:
            kernels.sort_csc_columns(matrix.colptr, matrix.rowval, matrix.nzval)
        problem = sparse_matrix_problem(matrix.shape, matrix.colptr, matrix.rowval)
        if problem is not None and problem.unsorted:
            raise DafFormatError(f"duplicate entries in the AnnData sparse matrix: {where}\n({problem.found}, "
                                 "after sorting each column's entries by row)")
    if problem is not None:
        index = problem.component.replace("rowval", "indices").replace("colptr", "indptr")
        raise DafFormatError(f"invalid {index} of the AnnData sparse matrix: {where}\n(as Daf's 1-based "
                             f"{problem.component}) found: {problem.found}\nexpected: {problem.expected}")


def _write_dense(daf: DafWriter, rows_axis: str, columns_axis: str, name: str, source: MatrixSource,
                 bar: Any) -> None:
    """Store a row-major ``(n_columns_axis, n_rows_axis)`` AnnData matrix as the column-major ``(rows_axis,
    columns_axis)`` Daf matrix: the same bytes."""
    with daf.empty_dense_matrix(rows_axis, columns_axis, name, source.dtype) as buffer:
        row_major = buffer.T
        n_rows = row_major.shape[0]
        step = max(1, _CHUNK // max(1, row_major.shape[1]))
        for start in range(0, n_rows, step):
            stop = min(start + step, n_rows)
            populate_pages(row_major[start:stop])
            if isinstance(source.data, h5py.Dataset):
                source.data.read_direct(row_major, np.s_[start:stop], np.s_[start:stop])
            else:
                row_major[start:stop] = source.data[start:stop]
            bar.update((stop - start) * row_major.shape[1])
        del buffer, row_major


def _matrix_axes(member: str, axes: dict[str, str]) -> tuple[str, str]:
    """The Daf ``(rows, columns)`` axes of an AnnData matrix member (obs x var, obs x raw var, or square)."""
    obs_axis, var_axis = axes["obs"], axes["var"]
    if member == "raw":
        return obs_axis, axes["raw"]
    return {"obsp": (obs_axis, obs_axis), "varp": (var_axis, var_axis)}.get(member, (obs_axis, var_axis))


def _require_shapes(content: Content, axes: dict[str, str]) -> None:
    """Check, before anything is written, that every column and matrix fits the obs and var axes."""
    members = _column_members(content, axes)
    lengths = {axes[member]: getattr(content, member)["_index"].values.shape[0] for member in members}
    for member in members:
        what = "raw/var" if member == "raw" else member
        for name, column in getattr(content, member).items():
            if column.values.ndim != 1 or column.values.shape[0] != lengths[axes[member]]:
                raise DafFormatError(f"the shape: {column.values.shape}\nof the AnnData column: {what}/{name}\n"
                                     f"is different from the number of {what} names: {lengths[axes[member]]}\n"
                                     f"in {content.origin}")
    for member, key, source in content.matrices:
        rows_axis, columns_axis = _matrix_axes(member, axes)
        expected = (lengths[rows_axis], lengths[columns_axis])
        if tuple(source.shape) != expected:
            where = member if member == "X" else f"{member}/{key}"
            what = "obs x raw/var" if member == "raw" else "obs x var"
            raise DafFormatError(f"the shape: {source.shape[0]} x {source.shape[1]}\nof the AnnData matrix: {where}"
                                 f"\nis different from: {expected[0]} x {expected[1]} ({member} of {what})\n"
                                 f"in {content.origin}")


# obsm/varm elements: a matrix of the obs (var) axis and an axis of their own.


def _require_axis_array_shapes(content: Content) -> None:
    """Check, before anything is written, that every obsm (varm) element has a row per obs (var) name and a column
    per entry of its axis, and that those entries are unique (as Daf's axis entries must be)."""
    for array in content.axis_arrays:
        member = _AXIS_ARRAY_ROWS[array.member]
        expected = (getattr(content, member)["_index"].values.shape[0], array.entries.shape[0])
        if tuple(array.source.shape) != expected:
            raise DafFormatError(f"the shape: {array.source.shape[0]} x {array.source.shape[1]}\nof the AnnData "
                                 f"element: {element_path(array.member, array.key)}\nis different from: "
                                 f"{expected[0]} x {expected[1]} ({member} x its columns)\nin {content.origin}")


def _settle_axis_arrays(content: Content, axes: dict[str, str], destination: Any) -> None:
    """Keep the obsm/varm elements whose axis and record scalar are free; report the others (an axis or a scalar of
    that name is the obs/var axis, an uns scalar, one the import records, or already in the destination): nothing
    is ever overwritten, and which element is dropped does not depend on the order of anything."""
    taken_axes = set(axes.values())
    taken_scalars = set(content.uns) | set(content.recorded) | {"obs_is", "var_is", "X_is"}
    taken_scalars |= {column_order_scalar(axis) for axis in axes.values()}
    if isinstance(destination, DafWriter):
        taken_axes |= destination.axes_set()
        taken_scalars |= destination.scalars_set()
    kept = []
    for array in content.axis_arrays:
        axis = axis_array_axis(array.member, array.key)
        record = axis_array_record(axis)
        where = element_path(array.member, array.key)
        if axis in taken_axes:
            content.unsupported.append(f"unsupported element: {where} (its axis: {axis} already exists)")
        elif record in taken_scalars:
            content.unsupported.append(f"unsupported element: {where} (its record scalar: {record} already exists)")
        else:
            kept.append(array)
    content.axis_arrays[:] = kept


def _settle_raw(content: Content, axes: dict[str, str], destination: Any) -> None:
    """Keep the AnnData's ``raw`` as the axis :func:`raw_axis_name` (``axes["raw"]``) if that axis and the record
    scalar :data:`RAW_RECORD` are free and its names are unique; else report it and drop it (raw.X, raw.var and
    raw.varm): nothing is overwritten, and the outcome depends on nothing's order."""
    if content.raw is None:
        return
    axis = raw_axis_name(axes["var"])
    taken_axes = {axes["obs"], axes["var"]}
    taken_scalars = set(content.uns) | {"obs_is", "var_is", "X_is"}
    if isinstance(destination, DafWriter):
        taken_axes |= destination.axes_set()
        taken_scalars |= destination.scalars_set()
    names = content.raw["_index"].values
    problem = (f"its axis: {axis} already exists" if axis in taken_axes
               else f"its record scalar: {RAW_RECORD} already exists" if RAW_RECORD in taken_scalars
               else "duplicate raw/var names (Daf axis entries are unique)" if len(set(names.tolist())) != len(names)
               else None)
    if problem is None:
        axes["raw"] = axis
        return
    content.unsupported.append(f"unsupported element: raw ({problem})")
    content.raw = None
    content.matrices[:] = [entry for entry in content.matrices if entry[0] != "raw"]
    content.axis_arrays[:] = [array for array in content.axis_arrays if array.member != "raw_varm"]


def _write_axis_array(daf: DafWriter, array: AxisArray, axes: dict[str, str], bar: Any, origin: str) -> None:
    """Store an obsm (varm) element as the matrix ``(obs, <member>_<key>)`` (``(var, ...)``), column-major (each
    column of the element a contiguous vector over the obs, as ``@ obs @ obsm_X_umap :: X_umap`` reads it): its axis,
    then the matrix, then the record scalar (so a record never names a missing matrix)."""
    rows_axis = axes[_AXIS_ARRAY_ROWS[array.member]]
    axis = axis_array_axis(array.member, array.key)
    where = element_path(array.member, array.key)
    daf.add_axis(axis, array.entries)
    source = array.source
    try:
        if source.kind == "csc":  # the arrays are the (rows, columns) CSC matrix: streamed as they are
            _write_sparse(daf, rows_axis, axis, array.key, source, where, bar)
        elif source.kind == "csr":  # the arrays are the (columns, rows) CSC matrix: transposed (in memory)
            def whole(part: Any, dtype: Any) -> np.ndarray:
                return np.asarray(part[()] if isinstance(part, h5py.Dataset) else part, dtype=dtype)

            flipped = SparseMatrixCSC((source.shape[1], source.shape[0]), _indptr(source, source.shape[0], where) + 1,
                                      whole(source.indices, np.int64) + 1, whole(source.data, source.dtype).copy())
            _require_valid_indices(flipped, where)
            daf.set_matrix(rows_axis, axis, array.key, flipped.transpose(), relayout=False)
            bar.update(source.nnz)
        else:
            _write_transposed_dense(daf, rows_axis, axis, array.key, source, bar)
    except DafError as error:  # (what is raised inside names the element, not the file)
        error.with_line(f"in {origin}")
        raise
    except Exception as error:  # a truncated or damaged dataset, read in slices
        raise DafFormatError(f"can't read the AnnData element: {where}\nin {origin}\n({type(error).__name__}: "
                             f"{error})") from error
    daf.set_scalar(axis_array_record(axis), array.encoding)


def _write_transposed_dense(daf: DafWriter, rows_axis: str, columns_axis: str, name: str, source: MatrixSource,
                            bar: Any) -> None:
    """Store a row-major ``(n_rows_axis, n_columns_axis)`` AnnData matrix as the column-major ``(rows_axis,
    columns_axis)`` Daf matrix (the values moved, in slices of rows)."""
    with daf.empty_dense_matrix(rows_axis, columns_axis, name, source.dtype) as buffer:
        n_rows, n_columns = buffer.shape
        step = max(1, _CHUNK // max(1, n_columns))
        for start in range(0, n_rows, step):
            stop = min(start + step, n_rows)
            buffer[start:stop, :] = source.data[start:stop]
            bar.update((stop - start) * n_columns)
        del buffer


def _write_matrix(daf: DafWriter, member: str, key: str, source: MatrixSource, axes: dict[str, str], X_is: str,
                  relayout: bool, bar: Any, origin: str) -> None:
    where = member if member == "X" else f"{member}/{key}"
    try:
        _write_member(daf, member, key, source, axes, X_is, relayout, bar, where)
    except DafError as error:  # (what is raised inside names the element, not the file)
        error.with_line(f"in {origin}")
        raise
    except Exception as error:  # a truncated or damaged dataset, read in slices
        raise DafFormatError(f"can't read the AnnData matrix: {where}\nin {origin}\n({type(error).__name__}: "
                             f"{error})") from error


def _write_member(daf: DafWriter, member: str, key: str, source: MatrixSource, axes: dict[str, str], X_is: str,
                  relayout: bool, bar: Any, where: str) -> None:
    rows_axis, columns_axis = _matrix_axes(member, axes)
    name = X_is if member in ("X", "raw") else key  # (raw.X is named as X, over the raw axis)
    square = rows_axis == columns_axis
    if source.kind == "csc" and square:
        # Daf's square matrices are the transpose of AnnData's: the CSC arrays are transposed (in memory).
        def whole(part: Any, dtype: Any) -> np.ndarray:
            return np.asarray(part[()] if isinstance(part, h5py.Dataset) else part, dtype=dtype)

        matrix = SparseMatrixCSC(source.shape, _indptr(source, source.shape[1], where) + 1,
                                 whole(source.indices, np.int64) + 1, whole(source.data, source.dtype).copy())
        _require_valid_indices(matrix, where)
        daf.set_matrix(rows_axis, columns_axis, name, matrix.transpose(), relayout=False)
        bar.update(source.nnz)
        return
    if source.kind == "csc":
        stored = (rows_axis, columns_axis)
        _write_sparse(daf, *stored, name, source, where, bar)
    elif source.kind == "csr":
        stored = (columns_axis, rows_axis)
        _write_sparse(daf, *stored, name, source, where, bar)
    else:
        stored = (columns_axis, rows_axis)
        _write_dense(daf, *stored, name, source, bar)
    if relayout and not square:
        daf.relayout_matrix(*stored, name)
        bar.update(source.nnz)


def open_source(path: str | os.PathLike, destination: Any, kind: str) -> h5py.File:
    """Open the HDF5 file a conversion reads (``kind`` names it in messages), once sure it is not the storage of
    ``destination`` (a :class:`~pydaf.DafWriter`, a path or ``None``).

    Example:
        >>> open_source("/no/such/file.h5ad", None, "h5ad")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: can't open the h5ad file: /no/such/file.h5ad
        ...
    """
    text = os.fspath(path)
    target = destination.complete_path() if isinstance(destination, DafWriter) else destination
    if target is not None:
        require_distinct(text, target)
    try:
        require_regular_file(text, what=f"the {kind} file")  # (a FIFO or device would block HDF5's open forever)
        file = h5py.File(text, "r")
    except OSError as error:
        raise DafFormatError(f"can't open the {kind} file: {text}\n({error})") from error
    try:
        outside = outside_reference(file)
    except Exception as error:  # (a damaged link table)
        file.close()
        raise DafFormatError(f"can't read the {kind} file: {text}\n({type(error).__name__}: {error})") from error
    if outside is not None:
        file.close()
        raise DafFormatError(f"the {kind} file: {text}\nrefers to another file: {outside}\n(pydaf reads nothing "
                             "outside the file it converts; AnnData, MuData and Cell Ranger never write such elements)")
    return file


def column_order_scalar(axis: str) -> str:
    """The name of the scalar recording the order of an axis' vectors as the source had its columns.

    Example:
        >>> column_order_scalar("cell")
        'cell_column_order'
    """
    return f"{axis}_column_order"


def _fill(daf: DafWriter, content: Content, axes: dict[str, str], X_is: str, relayout: bool, progress: bool) -> None:
    scalars = {key: value for key, value in content.uns.items() if key not in content.recorded}
    scalars.update(content.recorded)  # (numpy scalars keep their width: Int32 stays Int32)
    # Recorded, as daf_as_h5ad records them in uns, so converting back restores AnnData's obs/var/X. Each scalar is
    # set once (an append-only destination, a ZIP archive, refuses a second write of one uns already held).
    for key, value, default in (("obs_is", axes["obs"], "obs"), ("var_is", axes["var"], "var"), ("X_is", X_is, "X")):
        if value != default:
            scalars[key] = value
    for key, value in scalars.items():
        daf.set_scalar(key, value, overwrite=True)
    for member in _column_members(content, axes):
        columns = getattr(content, member)
        daf.add_axis(axes[member], columns["_index"].values)
        order = [name for name in columns if name != "_index"]
        for name in order:
            daf.set_vector(axes[member], name, columns[name].values)
        if order != sorted(order):  # (Daf lists vectors sorted; the export would lose the source's order)
            daf.set_scalar(column_order_scalar(axes[member]), "\n".join(order), overwrite=True)
    total = sum(source.nnz * (2 if relayout and member in ("X", "layers", "raw") else 1)
                for member, _, source in content.matrices)
    total += sum(array.source.nnz for array in content.axis_arrays)
    with progress_bar(total, progress, "AnnData -> Daf") as bar:
        for member, key, source in content.matrices:
            _write_matrix(daf, member, key, source, axes, X_is, relayout, bar, content.origin)
        for array in content.axis_arrays:
            _write_axis_array(daf, array, axes, bar, content.origin)
    if "raw" in axes:  # (last, so the record never names a raw that is not all there)
        daf.set_scalar(RAW_RECORD, axes["raw"])


def _repeated_names(names: list[Any]) -> list[Any]:
    """The names that occur more than once, in their order of first occurrence."""
    seen: set[Any] = set()
    repeated: dict[Any, None] = {}
    for entry in names:
        if entry in seen:
            repeated[entry] = None
        seen.add(entry)
    return list(repeated)


def content_as_daf(content: Content, destination: DafWriter | str | os.PathLike | None, *, name: str | None = None,
                   obs_is: str | None = None, var_is: str | None = None, X_is: str | None = None,
                   defaults: tuple[str, str, str] = ("obs", "var", "X"), unsupported_handler: str = "warn",
                   relayout: bool = False, progress: bool = False, overwrite: bool = False) -> DafWriter:
    """Write ``content`` into ``destination`` (a :class:`~pydaf.DafWriter`, written in place; a path, built aside
    and moved into place when complete, replacing an existing data set only with ``overwrite``; or ``None`` for a new
    :class:`~pydaf.MemoryDaf`), which is returned. The
    names of the obs and var axes and of the X matrix are ``obs_is``/``var_is``/``X_is``, else the ``uns`` scalars of
    those names, else ``defaults``. Everything is checked and the unsupported elements reported first.

    Example:
        >>> content = Content(obs={"_index": Column(np.array(["A"], dtype=object))},
        ...                   var={"_index": Column(np.array(["X"], dtype=object))}, unsupported=["unsupported: Y"])
        >>> content_as_daf(content, None, unsupported_handler="ignore").axes_set() == {"obs", "var"}
        True
    """
    uns = content.uns
    name = name if name is not None else _chosen(None, uns, "name", "anndata")
    axes = {"obs": _chosen(obs_is, uns, "obs_is", defaults[0]), "var": _chosen(var_is, uns, "var_is", defaults[1])}
    X_is = _chosen(X_is, uns, "X_is", defaults[2])
    if axes["obs"] == axes["var"]:
        raise DafValueError(f"the same name: {axes['obs']}\nfor the obs and var axes of the AnnData: {name}")
    for member in ("obs", "var"):
        names = getattr(content, member)["_index"].values
        if len(set(names.tolist())) != len(names):
            repeated = _repeated_names(names.tolist())
            shown = ", ".join(repr(entry) for entry in repeated[:5]) + (", ..." if len(repeated) > 5 else "")
            raise DafShapeError(
                f"duplicate {member} names in the AnnData: {name}\nin {content.origin}\n"
                f"({len(repeated)} names repeat: {shown}; Daf axis entries are unique: make them unique first, "
                f"e.g. adata.{member}_names_make_unique() and pydaf.interop.anndata_as_daf(adata, ...))")
    _settle_raw(content, axes, destination)
    _require_shapes(content, axes)
    _record(content, axes)
    _require_axis_array_shapes(content)
    _settle_axis_arrays(content, axes, destination)
    report_unsupported(content.unsupported, unsupported_handler, name)
    if isinstance(destination, DafWriter):
        _fill(destination, content, axes, X_is, relayout, progress)
        return destination
    if destination is None:
        daf = MemoryDaf(name=name)
        _fill(daf, content, axes, X_is, relayout, progress)
        return daf
    return build_daf(destination, lambda daf: _fill(daf, content, axes, X_is, relayout, progress), name=name,
                     overwrite=overwrite)
