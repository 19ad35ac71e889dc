"""AnnData interop: ``.h5ad`` files (and the modalities of MuData ``.h5mu`` files) and in-memory ``anndata.AnnData``
objects to and from Daf data sets, with Julia's mapping (``obs``/``var`` as two axes, ``X`` and ``layers`` as
matrices, ``uns`` scalars as scalars). What a vector can't say about a column (categories, missing values, nullable
types, index names, column order) is kept in plain scalars, ``obsm``/``varm`` and ``raw`` become axes and matrices of
their own, and what Daf can't hold goes to the ``unsupported_handler``. Files of every anndata version read as
``anndata.read_h5ad`` reads them, as hostile input.

Design: docs/design/anndata.md.

Example:
    >>> import os, tempfile, numpy as np, pydaf
    >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B"]).add_axis("gene", ["X", "Y", "Z"])
    >>> daf.set_matrix("cell", "gene", "UMIs", np.array([[0, 1, 2], [3, 0, 0]]), relayout=False) \\
    ...     .set_vector("cell", "age", [3, 5])  # doctest: +ELLIPSIS
    MemoryDaf ...
    >>> path = os.path.join(tempfile.mkdtemp(), "cells.h5ad")
    >>> daf_as_h5ad(daf, path, obs_is="cell", var_is="gene", X_is="UMIs", progress=False)
    >>> back = h5ad_as_daf(path, progress=False)
    >>> sorted(back.axes_set()), back.get_matrix("cell", "gene", "UMIs").tolist()
    (['cell', 'gene'], [[0, 1, 2], [3, 0, 0]])
    >>> back.get_vector("cell", "age").tolist()
    [3, 5]
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from ..composition.destinations import require_absent, require_distinct, write_file_then_replace
from ..core.values import exact_cast
from ..core.writers import DafWriter
from ..errors import DafError, DafFormatError, DafValueError, missing_property
from ..sparse import SparseMatrixCSC
from .axis_arrays import (
    AxisArraysKept,
    exported_axis_arrays,
    read_h5ad_axis_arrays,
    read_memory_axis_arrays,
    recorded_axis_arrays,
)
from .content import (
    RAW_RECORD,
    RECORDED_COLUMN_FACTS,
    Content,
    axis_array_axis,
    axis_array_record,
    column_order_scalar,
    column_scalar,
    content_as_daf,
    element_path,
    index_name_scalar,
    open_source,
    progress_bar,
    sort_columns,
    sort_matrix,
    sort_uns,
)
from .h5ad_elements import (
    Column,
    MatrixSource,
    Unsupported,
    categorical_column,
    compound_fields,
    legacy_string_scalar,
    nullable_name,
    read_dataframe,
    read_element,
    read_guarded,
)
from .h5ad_writers import stamp, write_element
from .mudata import anndata_root

if TYPE_CHECKING:
    import anndata

    from ..core.readers import DafReader

__all__ = ["anndata_as_daf", "daf_as_anndata", "daf_as_h5ad", "h5ad_as_daf"]

_MATRIX_MEMBERS = ("X", "layers", "obsp", "varp")


# Reading an h5ad file.


def _read_h5ad(root: h5py.Group, origin: str, *, obsm: AxisArraysKept = True,
               varm: AxisArraysKept = True, raw: bool = True) -> Content:
    content = Content(origin=origin)
    for member in ("obs", "var"):
        if member not in root:
            raise DafFormatError(f"missing {member} in {origin}")
    frames = {member: read_guarded(root[member], read_dataframe) for member in ("obs", "var")}
    uns = root.get("uns")
    consumed: set[str] = set()
    if isinstance(root["obs"], h5py.Dataset) and isinstance(uns, h5py.Group):  # anndata < 0.7
        consumed = _apply_legacy_categories(frames, uns)
    content.obs = sort_columns(content, "obs", frames["obs"])
    content.var = sort_columns(content, "var", frames["var"])
    for member in ("obs", "var"):
        index_name = read_guarded(root[member], _h5ad_index_name)
        if index_name is not None:
            content.index_names[member] = index_name
    if isinstance(uns, h5py.Group):
        sort_uns(content, {key: _read_uns_value(uns[key]) for key in uns if key not in consumed})
    elif uns is not None:
        content.unsupported.append("unsupported element: uns (not a group)")
    if "X" in root:
        sort_matrix(content, "X", "X", read_element(root["X"]))
    for member in ("layers", "obsp", "varp"):
        if member in root:
            if not isinstance(root[member], h5py.Group):
                content.unsupported.append(f"unsupported element: {member} (not a group)")
                continue
            for key in root[member]:
                sort_matrix(content, member, key, read_element(root[member][key]))
    if isinstance(uns, h5py.Group):
        _move_adjacency(content, uns)
    for member, keep in (("obsm", obsm), ("varm", varm)):
        read_h5ad_axis_arrays(root, content, member, keep)
    if raw:
        _read_h5ad_raw(root, content)
    for member in root:
        if member not in ("obs", "var", "uns", "X", "obsm", "varm", *_MATRIX_MEMBERS, *_RAW_MEMBERS):
            content.unsupported.append(f"unsupported element: {member}")
    return content


# raw: a group (`raw/X`, `raw/var`, `raw/varm`), or anndata < 0.7's top-level `raw.X`, `raw.var`, `raw.varm`.
_RAW_MEMBERS = ("raw", "raw.X", "raw.var", "raw.varm")


def _read_h5ad_raw(root: h5py.Group, content: Content) -> None:
    """File the file's ``raw`` (as ``anndata.read_h5ad`` reads it: the ``raw`` group, or the legacy ``raw.*``
    elements; a file with both is refused, as anndata refuses it) into ``content``: raw.var's columns, raw.X (the
    matrix member ``raw``) and raw.varm's elements (``raw_varm``). A raw without X or var is reported."""
    legacy = [member for member in _RAW_MEMBERS[1:] if member in root]
    if "raw" not in root and not legacy:
        return
    if "raw" in root and legacy:
        raise DafFormatError(f"both raw and {', '.join(legacy)} (anndata's current and legacy raw) in {content.origin}")
    if "raw" in root:
        group = root["raw"]
        if not isinstance(group, h5py.Group):
            content.unsupported.append("unsupported element: raw (not a group)")
            return
        elements = {name: group.get(name) for name in ("X", "var", "varm")}
        content.unsupported += [f"unsupported element: raw/{name}" for name in group if name not in elements]
    else:
        elements = {name: root.get(f"raw.{name}") for name in ("X", "var", "varm")}
    missing = [f"raw/{name}" for name in ("X", "var") if elements[name] is None]
    if missing:
        content.unsupported.append(f"unsupported element: raw (without {' and '.join(missing)})")
        return
    content.raw = sort_columns(content, "raw/var", read_guarded(elements["var"], read_dataframe))
    index_name = read_guarded(elements["var"], _h5ad_index_name)
    if index_name is not None:
        content.index_names["raw"] = index_name
    sort_matrix(content, "raw", "X", read_element(elements["X"]))
    if not any(member == "raw" for member, *_ in content.matrices):
        content.unsupported.append("unsupported element: raw (its X is not kept)")
        content.raw = None
        return
    if elements["varm"] is not None:
        if "raw" in root:
            read_h5ad_axis_arrays(group, content, "varm", True, into="raw_varm")
        else:
            read_h5ad_axis_arrays(root, content, "raw.varm", True, into="raw_varm")


def _h5ad_index_name(element: Any) -> str | None:
    """The name anndata gives the index of a dataframe: its ``_index`` attribute unless that is ``_index`` (anndata's
    name for an unnamed index), or the first field of a compound dataset (anndata < 0.7)."""
    if isinstance(element, h5py.Dataset):
        names = compound_fields(element)
        return names[0] if names else None
    name = element.attrs.get("_index")
    if isinstance(name, bytes):
        name = name.decode()
    return name if isinstance(name, str) and name != "_index" else None


def _read_uns_value(element: Any) -> Any:
    """A value of ``uns``, as anndata reads it: an array (even of one element) is an array (a :class:`Column`, which
    :func:`~pydaf.interop.content.sort_uns` keeps only as the colors of a categorical), except the 1-element
    byte-string array that anndata < 0.7 wrote for a string scalar."""
    scalar = read_guarded(element, legacy_string_scalar)
    if scalar is not None:
        return scalar
    return read_element(element)


def _apply_legacy_categories(frames: dict[str, Any], uns: h5py.Group) -> set[str]:
    """anndata < 0.7 stored a categorical column's codes in ``obs``/``var`` and its categories in
    ``uns/<column>_categories``; make the columns categorical as anndata does (``_clean_uns``: for every frame with
    such an integer column whose codes fit the categories) and return the ``uns`` keys used up."""
    consumed = set()
    for key in uns:
        element = uns[key]
        if not key.endswith("_categories") or not isinstance(element, h5py.Dataset):
            continue
        scalar = read_guarded(element, legacy_string_scalar)
        categories = [scalar] if scalar is not None else read_element(element)
        if isinstance(categories, Column):
            categories = categories.values
        elif isinstance(categories, str | int | np.generic):
            categories = [categories]
        else:
            continue
        labels = np.asarray(categories).astype(str)
        name = key.replace("_categories", "")  # (anndata's rule, kept so the same columns become categorical)
        for frame in frames.values():
            column = frame.get(name) if isinstance(frame, dict) and name != "_index" else None
            if not isinstance(column, Column) or column.values.dtype.kind not in "iu":
                continue
            codes = column.values
            if codes.size == 0 or (codes.max() < len(labels) and codes.min() >= -1):
                frame[name] = categorical_column(codes, labels)
                consumed.add(key)
    return consumed


def _move_adjacency(content: Content, uns: h5py.Group) -> None:
    """The neighbors graph of older files (``uns/neighbors/{distances,connectivities}``) goes to ``obsp``, as anndata
    moves it (the rest of ``uns/neighbors`` stays a nested mapping)."""
    neighbors = uns.get("neighbors")
    if not isinstance(neighbors, h5py.Group):
        return
    for key in ("distances", "connectivities"):
        if key in neighbors:
            value = read_element(neighbors[key])
            if isinstance(value, MatrixSource):
                sort_matrix(content, "obsp", key, value)


# Reading an in-memory AnnData.


def _pandas_column(series: Any) -> Column | Unsupported:
    import pandas as pd

    dtype = series.dtype
    if isinstance(dtype, pd.CategoricalDtype):
        return categorical_column(series.cat.codes.to_numpy(), np.asarray(series.cat.categories),
                                  bool(dtype.ordered))
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and not isinstance(dtype, np.dtype):
        # pandas' nullable types: missing entries hold Julia's "empty" values for now (sort_columns keeps them
        # missing: see recorded_scalars); NaN stays NaN for floats.
        missing = series.isna().to_numpy()
        if pd.api.types.is_bool_dtype(dtype):
            values = series.to_numpy(dtype=bool, na_value=False)
        elif pd.api.types.is_integer_dtype(dtype):
            values = series.to_numpy(dtype=dtype.numpy_dtype, na_value=0)
        elif pd.api.types.is_float_dtype(dtype):
            return Column(series.to_numpy(dtype=dtype.numpy_dtype, na_value=np.nan))
        elif pd.api.types.is_string_dtype(dtype):
            values = np.asarray(series.fillna("").astype(object).to_numpy(), dtype=object)
            return Column(values, missing if missing.any() else None, nullable="string")
        else:
            return Unsupported(f"column type: {dtype}")
        return Column(values, missing if missing.any() else None, nullable=nullable_name(values.dtype))
    values = series.to_numpy()
    if values.dtype == object:
        items = values.tolist()
        if all(isinstance(value, str) for value in items):
            return Column(values.astype(object))
        if not all(isinstance(value, str | bytes) for value in items):
            return Unsupported("column of mixed objects")
        try:  # (anndata reads the fixed-length strings of old files as bytes; the files hold text)
            text = [value.decode() if isinstance(value, bytes) else value for value in items]
        except UnicodeDecodeError:
            return Unsupported("column of bytes that are not UTF-8 text")
        return Column(np.array(text, dtype=object), note="bytes decoded as UTF-8 strings")
    if values.dtype.kind not in "biuf" or values.dtype == np.float16:
        return Unsupported(f"column type: {values.dtype}")
    return Column(values)


def _frame_columns(frame: Any, member: str, content: Content) -> dict[str, Any]:
    columns: dict[str, Any] = {"_index": Column(np.asarray(frame.index.astype(str), dtype=object))}
    for name in frame.columns:
        if str(name) == "_index":  # (the key of the names here, and a name anndata refuses to write)
            content.unsupported.append(f"unsupported element: {member}/_index (a column named as AnnData's index)")
            continue
        columns[str(name)] = _pandas_column(frame[name])
    return columns


def _memory_matrix(value: Any) -> Any:
    import scipy.sparse as sp

    if sp.issparse(value):
        kind = value.format
        if kind not in ("csr", "csc"):
            value, kind = value.tocsr(), "csr"
        return MatrixSource(kind, value.shape, value.data.dtype, value.data, value.indices, value.indptr)
    if isinstance(value, np.ndarray) and value.ndim == 2:
        if value.dtype == object or value.dtype.kind in "SU":
            return Unsupported("string matrix")
        return MatrixSource("dense", value.shape, value.dtype, np.ascontiguousarray(value))
    return Unsupported(f"matrix type: {type(value).__name__}")


def _read_anndata(adata: anndata.AnnData, *, obsm: AxisArraysKept = True, varm: AxisArraysKept = True,
                  raw: bool = True) -> Content:
    content = Content()
    content.obs = sort_columns(content, "obs", _frame_columns(adata.obs, "obs", content))
    content.var = sort_columns(content, "var", _frame_columns(adata.var, "var", content))
    for member in ("obs", "var"):
        index_name = getattr(adata, member).index.name
        if index_name is not None:
            content.index_names[member] = str(index_name)
    sort_uns(content, dict(adata.uns))
    if adata.X is not None:
        sort_matrix(content, "X", "X", _memory_matrix(adata.X))
    for member in ("layers", "obsp", "varp"):
        for key, value in getattr(adata, member).items():
            sort_matrix(content, member, key, _memory_matrix(value))
    for member, keep in (("obsm", obsm), ("varm", varm)):
        read_memory_axis_arrays(adata, content, member, keep)
    if raw and adata.raw is not None:
        content.raw = sort_columns(content, "raw/var", _frame_columns(adata.raw.var, "raw/var", content))
        if adata.raw.var.index.name is not None:
            content.index_names["raw"] = str(adata.raw.var.index.name)
        sort_matrix(content, "raw", "X", _memory_matrix(adata.raw.X))
        if not any(member == "raw" for member, *_ in content.matrices):
            content.unsupported.append("unsupported element: raw (its X is not kept)")
            content.raw = None
        else:
            read_memory_axis_arrays(adata.raw, content, "varm", True, into="raw_varm")
    return content


# Importing.


def h5ad_as_daf(path: str | os.PathLike, destination: DafWriter | str | os.PathLike | None = None, *,
                name: str | None = None, obs_is: str | None = None, var_is: str | None = None,
                X_is: str | None = None, modality: str | None = None, unsupported_handler: str = "warn",
                relayout: bool = False, obsm: AxisArraysKept = True, varm: AxisArraysKept = True,
                raw: bool = True, progress: bool = True, overwrite: bool = False) -> DafWriter:
    """Read an ``.h5ad`` file (with h5py; anndata is not needed), or the ``modality`` of a MuData ``.h5mu`` file, into
    a Daf data set: ``destination`` (a :class:`~pydaf.DafWriter`, a path for :func:`~pydaf.open_daf` in mode ``w``,
    or ``None`` for a new :class:`~pydaf.MemoryDaf`), which is returned. Large sparse matrices stream into the
    destination with bounded buffers. ``X`` and the layers are stored in the layout the file holds (CSR and dense as
    ``(var_is, obs_is)``, CSC as ``(obs_is, var_is)``), as Julia's Daf does; with ``relayout`` the other layout is
    stored too. A MuData file without a ``modality`` is a :class:`~pydaf.DafValueError` listing its modalities.
    The numeric ``obsm``/``varm`` elements become matrices over axes of their own (:mod:`pydaf.interop.axis_arrays`);
    ``obsm``/``varm`` ``False`` skip them, a list of keys keeps only those. The AnnData's ``raw`` is kept (unless
    ``raw=False``) as the axis ``raw_<var_is>`` of the raw var names, with raw.var's columns as its vectors, raw.X as
    the matrix ``X_is`` of it and ``obs_is`` (in the layout the file holds, as X), raw.varm's elements as varm's
    (over axes ``raw_varm_<key>``) and the scalar ``raw_is`` naming the axis, so :func:`daf_as_h5ad` and
    :func:`daf_as_anndata` rebuild ``raw``. A path ``destination`` that exists is replaced (once the new data set
    is complete) only with ``overwrite``.

    Example:
        >>> import os, tempfile, numpy as np, pydaf
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5ad")
        >>> daf_as_h5ad(daf.set_matrix("cell", "gene", "UMIs", np.array([[1], [2]])), path, obs_is="cell",
        ...             var_is="gene", X_is="UMIs", progress=False)
        >>> h5ad_as_daf(path, progress=False).get_matrix("gene", "cell", "UMIs").tolist()
        [[1, 2]]
    """
    text = os.fspath(path)
    file = open_source(text, destination, "h5ad")
    with file:
        root, origin = anndata_root(file, modality, text)
        try:
            content = _read_h5ad(root, origin, obsm=obsm, varm=varm, raw=raw)
        except DafError:
            raise
        except Exception as error:  # anything the element readers did not name
            raise DafFormatError(f"can't read {origin}\n({type(error).__name__}: {error})") from error
        return content_as_daf(content, destination, name=name, obs_is=obs_is, var_is=var_is, X_is=X_is,
                              unsupported_handler=unsupported_handler, relayout=relayout, progress=progress,
                              overwrite=overwrite)


def anndata_as_daf(adata: anndata.AnnData, destination: DafWriter | str | os.PathLike | None = None, *,
                   name: str | None = None, obs_is: str | None = None, var_is: str | None = None,
                   X_is: str | None = None, unsupported_handler: str = "warn", relayout: bool = False,
                   obsm: AxisArraysKept = True, varm: AxisArraysKept = True, raw: bool = True,
                   progress: bool = False, overwrite: bool = False) -> DafWriter:
    """Copy an in-memory ``anndata.AnnData`` into a Daf data set (the same mapping as :func:`h5ad_as_daf`, ``raw``
    included unless ``raw=False``).

    Example:
        >>> import anndata, numpy as np
        >>> adata = anndata.AnnData(np.array([[1.0, 0.0]], dtype=np.float32))
        >>> adata.obs_names, adata.var_names = ["A"], ["X", "Y"]
        >>> anndata_as_daf(adata, obs_is="cell", var_is="gene").get_matrix("cell", "gene", "X").tolist()
        [[1.0, 0.0]]
        >>> adata.raw = adata  # (raw.X and raw.var: copies of X and var)
        >>> daf = anndata_as_daf(adata, obs_is="cell", var_is="gene")
        >>> daf.get_scalar("raw_is"), daf.get_np_query("@ cell @ raw_gene :: X").tolist()
        ('raw_gene', [[1.0, 0.0]])
        >>> daf_as_anndata(daf).raw.var_names.tolist()
        ['X', 'Y']
    """
    return content_as_daf(_read_anndata(adata, obsm=obsm, varm=varm, raw=raw), destination, name=name, obs_is=obs_is,
                          var_is=var_is, X_is=X_is, unsupported_handler=unsupported_handler, relayout=relayout,
                          progress=progress, overwrite=overwrite)


# Daf to AnnData.


@dataclass
class _Export:
    obs_is: str
    var_is: str
    X_is: str | None  # None: no X
    uns: dict[str, Any]
    raw: str | None = None  # the raw axis (its matrix raw_X with obs_is is raw.X), or None: no raw
    raw_X: str = "X"


def _export_names(daf: DafReader, obs_is: str | None, var_is: str | None, X_is: str | None) -> _Export:
    def chosen(value: str | None, key: str, default: str) -> str:
        if value is not None:
            return value
        stored = daf.get_scalar(key, default=None)
        return stored if isinstance(stored, str) else default

    export = _Export(chosen(obs_is, "obs_is", "obs"), chosen(var_is, "var_is", "var"), chosen(X_is, "X_is", "X"), {})
    if export.obs_is == export.var_is:
        raise DafValueError(f"the same axis: {export.obs_is}", daf_name=daf.name, daf_preposition="for obs and var of")
    for axis in (export.obs_is, export.var_is):
        if not daf.has_axis(axis):
            raise missing_property("axis", axis, daf_name=daf.name)
    if export.X_is is not None and not daf.has_matrix(export.obs_is, export.var_is, export.X_is):
        if X_is is not None:  # asked for by name: its absence is an error; else the AnnData has no X
            raise missing_property("matrix", export.obs_is, export.var_is, export.X_is, daf_name=daf.name)
        export.X_is = None
    _export_raw(daf, export)
    internal = _recorded_names(daf, export.obs_is) | _recorded_names(daf, export.var_is)
    if export.raw is not None:
        internal |= _recorded_names(daf, export.raw) | {RAW_RECORD}
    internal |= {axis_array_record(axis)
                 for *_, axis, _ in recorded_axis_arrays(daf, export.obs_is, export.var_is, export.raw)}
    export.uns = {name: daf.get_scalar(name) for name in sorted(daf.scalars_set()) if name not in internal}
    export.uns.update(_recorded_colors(daf, export.obs_is) | _recorded_colors(daf, export.var_is))
    for key, value, default in (("obs_is", export.obs_is, "obs"), ("var_is", export.var_is, "var"),
                                ("X_is", export.X_is, "X")):
        if value is not None and value != default:
            export.uns[key] = value
        else:
            export.uns.pop(key, None)
    return export


def _export_raw(daf: DafReader, export: _Export) -> None:
    """The raw the data set records (:data:`~pydaf.interop.content.RAW_RECORD` names an axis, other than obs/var,
    that has the matrix named as X was on import - the ``X_is`` scalar, else ``X`` - with the obs axis); else none,
    and the record is a scalar as any other."""
    axis = daf.get_scalar(RAW_RECORD, default=None)
    if not isinstance(axis, str) or axis in (export.obs_is, export.var_is) or not daf.has_axis(axis):
        return
    stored = daf.get_scalar("X_is", default=None)
    name = stored if isinstance(stored, str) else "X"
    if daf.has_matrix(export.obs_is, axis, name):
        export.raw, export.raw_X = axis, name


def _recorded_names(daf: DafReader, axis: str) -> set[str]:
    """The scalars that record how the vectors of an axis were AnnData columns (not copied into ``uns``)."""
    names = {column_order_scalar(axis), index_name_scalar(axis)}
    for vector in daf.vectors_set(axis):
        names.update(column_scalar(axis, vector, what) for what in RECORDED_COLUMN_FACTS)
    return names


def _recorded_colors(daf: DafReader, axis: str) -> dict[str, np.ndarray]:
    """scanpy's ``uns["<column>_colors"]`` of the categorical vectors of an axis whose colors were recorded."""
    colors = {}
    for vector in sorted(daf.vectors_set(axis)):
        recorded = daf.get_scalar(column_scalar(axis, vector, "colors"), default=None)
        if isinstance(recorded, str):
            colors[f"{vector}_colors"] = np.array(recorded.split("\n") if recorded else [], dtype=object)
    return colors


def _index_name(daf: DafReader, axis: str) -> str | None:
    name = daf.get_scalar(index_name_scalar(axis), default=None)
    return name if isinstance(name, str) else None


_NULLABLE_NUMBERS = ("Int8", "Int16", "Int32", "Int64", "UInt8", "UInt16", "UInt32", "UInt64", "boolean")


def _anndata_column(daf: DafReader, axis: str, name: str, vector: np.ndarray) -> Any:
    """The AnnData column of a vector (see :func:`~pydaf.interop.content.recorded_scalars`): a ``pd.Categorical``
    when its categories are recorded (``""`` and any label not a category is missing; a label not a category other
    than ``""`` - the vector was changed since - is added as a category, after the recorded ones), a pandas nullable
    array when its nullable type is (NaN, or ``""`` for ``string``, is missing; values that no longer fit the type
    are left as they are), else the vector itself."""
    import pandas as pd

    categories = daf.get_scalar(column_scalar(axis, name, "categories"), default=None)
    if isinstance(categories, str) and vector.dtype == object:
        names = categories.split("\n") if categories else []
        codes = pd.Index(names, dtype=object).get_indexer(vector)
        added = sorted(set(vector[codes < 0].tolist()).difference(["", *names]))
        if added:
            names += added
            codes = pd.Index(names, dtype=object).get_indexer(vector)
        ordered = daf.get_scalar(column_scalar(axis, name, "ordered"), default=False)
        ordered = isinstance(ordered, bool | np.bool_) and bool(ordered)
        return pd.Categorical.from_codes(codes, categories=pd.Index(names, dtype=object), ordered=ordered)
    nullable = daf.get_scalar(column_scalar(axis, name, "nullable"), default=None)
    if nullable == "string" and vector.dtype == object:
        values = vector.copy()
        values[vector == ""] = None
        return pd.array(values, dtype="string")
    if nullable in _NULLABLE_NUMBERS and vector.dtype.kind in "biuf":
        try:
            return pd.array(vector, dtype=nullable)
        except (TypeError, ValueError):
            return vector
    return vector


def _column_order(daf: DafReader, axis: str) -> list[str]:
    """The vectors of an axis in the order recorded when it was imported (``<axis>_column_order``), the others
    after them, sorted."""
    names = daf.vectors_set(axis)
    recorded = daf.get_scalar(column_order_scalar(axis), default=None)
    first = [name for name in recorded.split("\n") if name in names] if isinstance(recorded, str) else []
    return list(dict.fromkeys(first)) + sorted(names.difference(first))


def _columns(daf: DafReader, axis: str, *, copy: bool = True) -> dict[str, Any]:
    """The AnnData columns of the vectors of an axis (numpy arrays, owned if ``copy`` else as the data set gives
    them, or pandas categoricals and nullable arrays: see :func:`_anndata_column`)."""
    columns = {}
    for name in _column_order(daf, axis):
        vector = daf.get_vector(axis, name)
        vector = np.asarray(vector.to_dense() if hasattr(vector, "to_dense") else vector)
        column = _anndata_column(daf, axis, name, vector)
        columns[name] = np.array(column) if copy and column is vector else column
    return columns


def _anndata_matrix(daf: DafReader, rows_axis: str, columns_axis: str, name: str, *, allow_csc: bool) -> Any:
    """The AnnData ``(rows_axis, columns_axis)`` matrix and its AnnData encoding: Daf's ``(columns_axis, rows_axis)``
    matrix as ``csr_matrix`` (its CSC arrays are the AnnData CSR arrays) or ``array`` (its column-major values are
    the row-major ones, given as their transposed view); or, if ``allow_csc`` and only the sparse ``(rows_axis,
    columns_axis)`` layout is stored, that one as ``csc_matrix``, so nothing is relaid out."""
    if not daf.has_matrix(columns_axis, rows_axis, name, relayout=False) and allow_csc:
        stored = daf.get_stored_matrix(rows_axis, columns_axis, name, relayout=False)
        if isinstance(stored, SparseMatrixCSC):
            return stored, "csc_matrix"
    flipped = daf.get_stored_matrix(columns_axis, rows_axis, name)
    if isinstance(flipped, SparseMatrixCSC):
        return flipped, "csr_matrix"
    return np.asarray(flipped).T, "array"


def _matrices(daf: DafReader, export: _Export, *, allow_csc: bool) -> Iterator[tuple[str, str, Any, str]]:
    """``(member, key, matrix, encoding)`` of X (if any), raw.X (member ``raw``, if any), the layers, obsp and
    varp."""
    obs, var = export.obs_is, export.var_is
    if export.X_is is not None:
        yield "X", "X", *_anndata_matrix(daf, obs, var, export.X_is, allow_csc=allow_csc)
    if export.raw is not None:
        yield "raw", "X", *_anndata_matrix(daf, obs, export.raw, export.raw_X, allow_csc=allow_csc)
    for name in sorted(daf.matrices_set(obs, var)):
        if name != export.X_is:
            yield "layers", name, *_anndata_matrix(daf, obs, var, name, allow_csc=allow_csc)
    for member, axis in (("obsp", obs), ("varp", var)):
        for name in sorted(daf.matrices_set(axis, axis)):  # Daf's square matrices are AnnData's, transposed.
            square = daf.get_stored_matrix(axis, axis, name)
            if isinstance(square, SparseMatrixCSC):
                yield member, name, square, "csr_matrix"
            else:
                yield member, name, np.asarray(square).T, "array"


def daf_as_h5ad(daf: DafReader, path: str | os.PathLike, *, obs_is: str | None = None, var_is: str | None = None,
                X_is: str | None = None, overwrite: bool = False, progress: bool = True) -> None:
    """Write a Daf data set as an ``.h5ad`` file (anndata's current format, written with h5py): the axes ``obs_is``
    and ``var_is`` (by default the scalars of those names, else ``obs``/``var``) with their vectors (in the order
    recorded on import, else sorted), the matrix ``X_is`` as ``X`` (none if the data set has no such matrix, unless
    ``X_is`` is given), the other matrices of the two axes as layers, their square matrices as ``obsp``/``varp``
    (transposed back), the recorded ``obsm``/``varm`` elements as they were imported
    (:mod:`pydaf.interop.axis_arrays`), ``raw`` when the data set records one (the axis the scalar ``raw_is``
    names, with the matrix of it and ``obs_is`` named by the ``X_is`` scalar, else ``X``; see :func:`h5ad_as_daf`)
    as anndata's ``raw`` group, and every other scalar in ``uns`` (plus ``obs_is``/``var_is``/``X_is`` when not the
    defaults). Columns are written as they were imported, from the scalars that record them (categoricals
    with their categories in order, ``ordered`` and ``uns["<column>_colors"]``; pandas' nullable types with their
    missing values; the index names: :func:`~pydaf.interop.content.recorded_scalars`); those scalars are not copied
    into ``uns``. Sparse matrices are written as ``csr_matrix`` from the stored ``(var_is, obs_is)`` layout, or
    as ``csc_matrix`` when only ``(obs_is, var_is)`` is stored, streaming slices of the stored arrays (nothing is
    relaid out). An existing file is replaced (once the new one is complete) only with ``overwrite``.

    Example:
        >>> import os, tempfile, numpy as np, pydaf, anndata
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5ad")
        >>> daf_as_h5ad(daf.set_matrix("cell", "gene", "UMIs", np.array([[1], [2]])), path, obs_is="cell",
        ...             var_is="gene", X_is="UMIs", progress=False)
        >>> adata = anndata.read_h5ad(path)
        >>> adata.X.tolist(), adata.uns["X_is"]
        ([[1], [2]], 'UMIs')
        >>> daf_as_h5ad(daf, path, progress=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafExistsError: the destination exists: ...x.h5ad
        (to replace it, pass --overwrite to the pydaf command, or overwrite=True in Python)
    """
    source = daf.complete_path()
    if source is not None:
        require_distinct(source, path)
    require_absent(path, overwrite=overwrite)  # before anything is read
    with daf.read_lock():
        export = _export_names(daf, obs_is, var_is, X_is)
        matrices = list(_matrices(daf, export, allow_csc=True))
        try:
            write_file_then_replace(path, lambda temporary: _write_h5ad(temporary, daf, export, matrices, progress),
                                    overwrite=overwrite)
        except DafError:
            raise
        except (ValueError, TypeError) as error:  # e.g. a NUL in a string, which HDF5 strings can't hold
            raise DafValueError(f"can't write the h5ad file: {os.fspath(path)}", daf_name=daf.name,
                                daf_preposition="from", hint=f"({type(error).__name__}: {error})") from error


def _write_h5ad(path: str, daf: DafReader, export: _Export, matrices: list[tuple[str, str, Any, str]],
                progress: bool) -> None:
    with h5py.File(path, "w") as file:
        stamp(file, "anndata", "0.1.0")
        for member, axis in (("obs", export.obs_is), ("var", export.var_is)):
            write_element(file, member, "dataframe", (daf.axis_vector(axis), _columns(daf, axis, copy=False),
                                                      _index_name(daf, axis)))
        uns = {key: ("string-array" if isinstance(value, np.ndarray) else "string" if isinstance(value, str)
                     else "numeric-scalar", value) for key, value in export.uns.items()}
        groups = {member: write_element(file, member, "dict", uns if member == "uns" else {})
                  for member in ("layers", "obsm", "varm", "obsp", "varp", "uns")}
        if export.raw is not None:  # (as anndata writes it: a group of X, var and varm)
            groups["raw"] = stamp(file.create_group("raw"), "raw", "0.1.0")
            write_element(groups["raw"], "var", "dataframe", (daf.axis_vector(export.raw),
                                                              _columns(daf, export.raw, copy=False),
                                                              _index_name(daf, export.raw)))
            groups["raw_varm"] = write_element(groups["raw"], "varm", "dict", {})
        total = sum(matrix.nnz if isinstance(matrix, SparseMatrixCSC) else int(np.prod(matrix.shape))
                    for _, _, matrix, _ in matrices)
        with progress_bar(total, progress, "Daf -> AnnData") as bar:
            for member, key, matrix, encoding in matrices:
                write_element(file if member == "X" else groups[member], key, encoding, matrix, bar=bar)
        _write_axis_arrays(daf, export, groups)


def _write_axis_arrays(daf: DafReader, export: _Export, groups: dict[str, h5py.Group]) -> None:
    """The recorded obsm/varm elements (:mod:`pydaf.interop.axis_arrays`), in their AnnData encodings."""
    for member, key, encoding, value in exported_axis_arrays(daf, export.obs_is, export.var_is, export.raw):
        if encoding == "dataframe":
            bad = [name for name in value[1] if "/" in name or name == "_index"]
            if bad:  # (h5py would make a group of a "/", and "_index" is the index's own name)
                raise DafValueError(f"can't write the column: {bad[0]}\nof the AnnData dataframe: "
                                    f"{element_path(member, key)}\n"
                                    f"(an entry of the axis: {axis_array_axis(member, key)})",
                                    daf_name=daf.name, daf_preposition="in an h5ad file, from")
        write_element(groups[member], key, encoding, value)


def _anndata_axis_arrays(daf: DafReader, export: _Export) -> dict[str, dict[str, Any]]:
    """The recorded obsm/varm elements as an in-memory AnnData holds them (writable copies)."""
    import pandas as pd
    import scipy.sparse as sp

    members: dict[str, dict[str, Any]] = {"obsm": {}, "varm": {}, "raw_varm": {}}
    for member, key, encoding, value in exported_axis_arrays(daf, export.obs_is, export.var_is, export.raw):
        if encoding == "dataframe":
            names, columns = value
            element: Any = pd.DataFrame({name: np.array(column) for name, column in columns.items()},
                                        index=pd.Index(np.asarray(names, dtype=object)),
                                        columns=pd.Index(list(columns), dtype=object))
        elif encoding == "array":
            element = np.array(value, order="C")
        else:
            arrays = (np.array(value.nzval), np.asarray(value.rowval, dtype=np.int64) - 1,
                      np.asarray(value.colptr, dtype=np.int64) - 1)
            if encoding == "csr_matrix":  # value: the (columns, rows) CSC matrix
                element = sp.csr_matrix(arrays, shape=(value.shape[1], value.shape[0]))
            else:
                element = sp.csc_matrix(arrays, shape=value.shape)
        members[member][key] = element
    return members


def daf_as_anndata(daf: DafReader, *, obs_is: str | None = None, var_is: str | None = None,
                   X_is: str | None = None, X_eltype: Any = None, copy: bool = True) -> anndata.AnnData:
    """A new in-memory ``anndata.AnnData`` of a Daf data set (the same mapping as :func:`daf_as_h5ad`), for scanpy:
    every array it holds (X, layers, obsp/varp, the obs/var columns) is its own and writable, whatever the data set
    (a memory-mapped H5df gives read-only views). Sparse matrices become ``scipy.sparse.csr_matrix``, dense ones
    numpy arrays; categorical columns, nullable columns, index names and ``uns`` colors are restored as recorded on
    import (:func:`~pydaf.interop.content.recorded_scalars`). A recorded ``raw`` (see :func:`daf_as_h5ad`) becomes
    ``adata.raw``, copied or viewed as ``X`` is. ``X_eltype`` converts ``X`` (not raw.X).

    ``copy=False`` gives instead a zero-copy AnnData **view** of the data set (to read, not for scanpy's in-place
    steps): dense matrices are the stored ones (read-only views of a mapped file: Daf's column-major ``(var, obs)``
    matrix *is* the row-major ``(obs, var)`` one); a sparse matrix shares its stored values (``data``), but its
    indices are copied, being 0-based in scipy and 1-based in Daf (a ``csr_matrix`` from the stored ``(var, obs)``
    layout, or a ``csc_matrix`` when only ``(obs, var)`` is stored, so nothing is relaid out or densified); numeric
    and string columns are the stored vectors; categoricals and nullable columns, and ``X_eltype``, are converted
    copies.

    Example:
        >>> import numpy as np, pydaf
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
        >>> adata = daf_as_anndata(daf.set_matrix("cell", "gene", "UMIs", np.array([[1], [2]])), obs_is="cell",
        ...                        var_is="gene", X_is="UMIs", X_eltype=np.float32)
        >>> adata.X.dtype, adata.obs_names.tolist(), adata.X.flags.writeable
        (dtype('float32'), ['A', 'B'], True)
        >>> view = daf_as_anndata(daf, obs_is="cell", var_is="gene", X_is="UMIs", copy=False)
        >>> np.shares_memory(view.X, daf.get_matrix("gene", "cell", "UMIs"))
        True
    """
    import anndata
    import pandas as pd
    import scipy.sparse as sp

    def row_major(matrix: Any, encoding: str) -> Any:
        if isinstance(matrix, SparseMatrixCSC):
            data = np.array(matrix.nzval) if copy else np.asarray(matrix.nzval)
            indices = np.asarray(matrix.rowval, dtype=np.int64) - 1
            indptr = np.asarray(matrix.colptr, dtype=np.int64) - 1
            if encoding == "csc_matrix":  # (copy=False only) the stored (obs, var) layout, as it is
                result = sp.csc_matrix((data, indices, indptr), shape=matrix.shape, copy=False)
            else:
                result = sp.csr_matrix((data, indices, indptr), shape=(matrix.shape[1], matrix.shape[0]), copy=False)
            result.data = data  # (scipy copies a view of a larger array, as the values mapped from a file are)
            return result
        return np.array(matrix, order="C") if copy else matrix

    def frame(axis: str) -> pd.DataFrame:
        index = pd.Index(np.asarray(daf.axis_vector(axis), dtype=object), name=_index_name(daf, axis))
        return pd.DataFrame(_columns(daf, axis, copy=copy), index=index, copy=False)

    with daf.read_lock():
        export = _export_names(daf, obs_is, var_is, X_is)
        members: dict[str, dict[str, Any]] = {"layers": {}, "obsp": {}, "varp": {}}
        X = raw_X = None
        for member, key, matrix, encoding in _matrices(daf, export, allow_csc=not copy):
            if member == "raw":
                raw_X = row_major(matrix, encoding)
            elif member == "X":
                X = row_major(matrix, encoding)
                if X_eltype is not None:  # exactly (Julia's convert), or a DafInexactError: never wrapped or truncated
                    what = "X of the AnnData"
                    X = (type(X)((exact_cast(X.data, X_eltype, what=what, daf_name=daf.name), X.indices, X.indptr),
                                 shape=X.shape) if sp.issparse(X) else exact_cast(X, X_eltype, what=what,
                                                                                   daf_name=daf.name))
            else:
                members[member][key] = row_major(matrix, encoding)
        axis_arrays = _anndata_axis_arrays(daf, export)
        raw_varm = axis_arrays.pop("raw_varm")
        raw = None if export.raw is None else {"X": raw_X, "var": frame(export.raw), "varm": raw_varm}
        uns = {key: value.item() if isinstance(value, np.generic) else value  # as anndata.read_h5ad gives them
               for key, value in export.uns.items()}
        return anndata.AnnData(X=X, obs=frame(export.obs_is), var=frame(export.var_is), uns=uns, raw=raw,
                               **members, **axis_arrays)
