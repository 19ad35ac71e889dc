"""AnnData interop: ``.h5ad`` files (and the modalities of MuData ``.h5mu`` files) and in-memory ``anndata.AnnData``
objects to and from Daf data sets.

The mapping is Julia's (``DataAxesFormats.AnnDataFormat``): ``obs`` and ``var`` become two named axes (``obs_is``,
``var_is``), ``X`` a matrix of them (``X_is``), ``layers`` more matrices, ``obsp``/``varp`` square matrices, the
``obs``/``var`` columns vectors and the scalars of ``uns`` scalars. The chosen names are stored as ``uns`` entries
(``obs_is``, ``var_is``, ``X_is``) when exporting, so importing restores them. Categoricals become strings; missing
entries of nullable columns become ``0``/``false``/``""`` (and are reported). What Daf cannot hold (``obsm``/``varm``,
nested ``uns``, arrays in ``uns`` - also of one element -, awkward arrays, string matrices) goes to the
``unsupported_handler``: ``"ignore"``, ``"warn"`` (the default: one
:class:`~pydaf.interop.content.UnsupportedElementWarning` per element) or ``"error"`` (raised before anything is
written). An AnnData without ``X`` is a Daf data set without that matrix, and back. The order of the ``obs``/``var``
columns is kept through the scalar ``<axis>_column_order`` (:mod:`pydaf.interop.content`).

Files of every anndata version read as ``anndata.read_h5ad`` reads them: the current encodings, anndata 0.7's
(``__categories``, ``categories`` references) and anndata < 0.7's, whose ``obs``/``var`` are compound datasets (a
field per column, categorical columns as codes with their categories in ``uns/<column>_categories``), ``X`` may be an
``h5sparse_format`` group, ``obsm``/``varm`` compound datasets (a field per matrix), string scalars of ``uns``
1-element byte-string arrays, and the neighbors graph is in ``uns/neighbors/{distances,connectivities}`` (anndata
moves those to ``obsp``; so does pydaf).

Safety: an ``.h5ad`` file is read as hostile input. Everything that can be checked before writing is (the obs/var
names, column lengths and types, matrix shapes, the ``indptr`` of sparse matrices); the indices of sparse matrices are
checked as they are copied, before the matrix is made to exist (a problem is a :class:`~pydaf.DafFormatError` naming
the element). Columns whose entries are out of order (allowed by AnnData and scipy) are sorted, as Daf requires.
A destination given as a path is built aside and moved into place only when complete
(:mod:`pydaf.interop.destinations`), so a failure leaves it as it was; a destination given as a
:class:`~pydaf.DafWriter` is written in place, so a failure may leave the properties written before it.

Orientation: see :mod:`pydaf.interop.content` (a CSR ``X`` is stored ``(var, obs)`` as it is in the file;
``relayout=True`` also stores ``(obs, var)``; square ``obsp``/``varp`` matrices are AnnData's transposed, as in
Julia).

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

from ..core.writers import DafWriter
from ..errors import DafError, DafFormatError, DafMissingError, DafValueError
from ..sparse import SparseMatrixCSC
from .content import (
    Content,
    column_order_scalar,
    content_as_daf,
    open_source,
    progress_bar,
    sort_columns,
    sort_matrix,
    sort_uns,
)
from .destinations import require_distinct, write_file_then_replace
from .h5ad_elements import (
    Column,
    MatrixSource,
    Unsupported,
    categorical_column,
    compound_fields,
    legacy_string_scalar,
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


def _read_h5ad(root: h5py.Group, origin: str) -> Content:
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
    for member in ("obsm", "varm"):
        if member in root:
            element = root[member]
            keys = list(element) if isinstance(element, h5py.Group) else compound_fields(element)
            content.unsupported.extend(f"unsupported element: {member}/{key}" for key in keys)
            if not isinstance(element, h5py.Group) and not keys:
                content.unsupported.append(f"unsupported element: {member}")
    for member in root:
        if member not in ("obs", "var", "uns", "X", "obsm", "varm", *_MATRIX_MEMBERS):
            content.unsupported.append(f"unsupported element: {member}")
    return content


def _read_uns_value(element: Any) -> Any:
    """A value of ``uns``, as anndata reads it: an array (even of one element) is an array, except the 1-element
    byte-string array that anndata < 0.7 wrote for a string scalar."""
    scalar = read_guarded(element, legacy_string_scalar)
    if scalar is not None:
        return scalar
    value = read_element(element)
    if isinstance(value, Column):
        return Unsupported(f"array of shape {value.values.shape}")
    return value


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
        return categorical_column(series.cat.codes.to_numpy(), np.asarray(series.cat.categories.astype(str)))
    if isinstance(dtype, pd.api.extensions.ExtensionDtype) and not isinstance(dtype, np.dtype):
        # pandas' nullable types: missing entries become Julia's "empty" values (NaN stays NaN for floats).
        missing = series.isna().to_numpy()
        if pd.api.types.is_bool_dtype(dtype):
            values = series.to_numpy(dtype=bool, na_value=False)
        elif pd.api.types.is_integer_dtype(dtype):
            values = series.to_numpy(dtype=dtype.numpy_dtype, na_value=0)
        elif pd.api.types.is_float_dtype(dtype):
            return Column(series.to_numpy(dtype=dtype.numpy_dtype, na_value=np.nan))
        elif pd.api.types.is_string_dtype(dtype):
            values = np.asarray(series.fillna("").astype(object).to_numpy(), dtype=object)
        else:
            return Unsupported(f"column type: {dtype}")
        return Column(values, missing if missing.any() else None)
    values = series.to_numpy()
    if values.dtype == object:
        if not all(isinstance(value, str) for value in values.tolist()):
            return Unsupported("column of mixed objects")
        return Column(values.astype(object))
    if values.dtype.kind not in "biuf" or values.dtype == np.float16:
        return Unsupported(f"column type: {values.dtype}")
    return Column(values)


def _frame_columns(frame: Any) -> dict[str, Any]:
    columns: dict[str, Any] = {"_index": Column(np.asarray(frame.index.astype(str), dtype=object))}
    for name in frame.columns:
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


def _read_anndata(adata: anndata.AnnData) -> Content:
    content = Content()
    content.obs = sort_columns(content, "obs", _frame_columns(adata.obs))
    content.var = sort_columns(content, "var", _frame_columns(adata.var))
    sort_uns(content, dict(adata.uns))
    if adata.X is not None:
        sort_matrix(content, "X", "X", _memory_matrix(adata.X))
    for member in ("layers", "obsp", "varp"):
        for key, value in getattr(adata, member).items():
            sort_matrix(content, member, key, _memory_matrix(value))
    for member in ("obsm", "varm"):
        content.unsupported.extend(f"unsupported element: {member}/{key}" for key in getattr(adata, member))
    if adata.raw is not None:
        content.unsupported.append("unsupported element: raw")
    return content



# Importing.


def h5ad_as_daf(path: str | os.PathLike, destination: DafWriter | str | os.PathLike | None = None, *,
                name: str | None = None, obs_is: str | None = None, var_is: str | None = None,
                X_is: str | None = None, modality: str | None = None, unsupported_handler: str = "warn",
                relayout: bool = False, progress: bool = True) -> DafWriter:
    """Read an ``.h5ad`` file (with h5py; anndata is not needed), or the ``modality`` of a MuData ``.h5mu`` file, into
    a Daf data set: ``destination`` (a :class:`~pydaf.DafWriter`, a path for :func:`~pydaf.open_daf` in mode ``w``,
    or ``None`` for a new :class:`~pydaf.MemoryDaf`), which is returned. Large sparse matrices stream into the
    destination with bounded buffers. ``X`` and the layers are stored in the layout the file holds (CSR and dense as
    ``(var_is, obs_is)``, CSC as ``(obs_is, var_is)``), as Julia's Daf does; with ``relayout`` the other layout is
    stored too. A MuData file without a ``modality`` is a :class:`~pydaf.DafValueError` listing its modalities.

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
            content = _read_h5ad(root, origin)
        except DafError:
            raise
        except Exception as error:  # anything the element readers did not name
            raise DafFormatError(f"can't read {origin}\n({type(error).__name__}: {error})") from error
        return content_as_daf(content, destination, name=name, obs_is=obs_is, var_is=var_is, X_is=X_is,
                              unsupported_handler=unsupported_handler, relayout=relayout, progress=progress)


def anndata_as_daf(adata: anndata.AnnData, destination: DafWriter | str | os.PathLike | None = None, *,
                   name: str | None = None, obs_is: str | None = None, var_is: str | None = None,
                   X_is: str | None = None, unsupported_handler: str = "warn", relayout: bool = False,
                   progress: bool = False) -> DafWriter:
    """Copy an in-memory ``anndata.AnnData`` into a Daf data set (the same mapping as :func:`h5ad_as_daf`).

    Example:
        >>> import anndata, numpy as np
        >>> adata = anndata.AnnData(np.array([[1.0, 0.0]], dtype=np.float32))
        >>> adata.obs_names, adata.var_names = ["A"], ["X", "Y"]
        >>> anndata_as_daf(adata, obs_is="cell", var_is="gene").get_matrix("cell", "gene", "X").tolist()
        [[1.0, 0.0]]
    """
    return content_as_daf(_read_anndata(adata), destination, name=name, obs_is=obs_is, var_is=var_is, X_is=X_is,
                          unsupported_handler=unsupported_handler, relayout=relayout, progress=progress)


# Daf to AnnData.


@dataclass
class _Export:
    obs_is: str
    var_is: str
    X_is: str | None  # None: no X
    uns: dict[str, Any]


def _export_names(daf: DafReader, obs_is: str | None, var_is: str | None, X_is: str | None) -> _Export:
    def chosen(value: str | None, key: str, default: str) -> str:
        if value is not None:
            return value
        stored = daf.get_scalar(key, default=None)
        return stored if isinstance(stored, str) else default

    export = _Export(chosen(obs_is, "obs_is", "obs"), chosen(var_is, "var_is", "var"), chosen(X_is, "X_is", "X"), {})
    if export.obs_is == export.var_is:
        raise DafValueError(f"the same axis: {export.obs_is}\nfor obs and var of the daf data: {daf.name}")
    for axis in (export.obs_is, export.var_is):
        if not daf.has_axis(axis):
            raise DafMissingError(f"missing axis: {axis}\nin the daf data: {daf.name}")
    if not daf.has_matrix(export.obs_is, export.var_is, export.X_is):
        if X_is is not None:  # asked for by name: its absence is an error; else the AnnData has no X
            raise DafMissingError(f"missing matrix: {export.X_is}\nfor the rows axis: {export.obs_is}\nand the "
                                  f"columns axis: {export.var_is}\nin the daf data: {daf.name}")
        export.X_is = None
    internal = {column_order_scalar(export.obs_is), column_order_scalar(export.var_is)}
    export.uns = {name: daf.get_scalar(name) for name in sorted(daf.scalars_set()) if name not in internal}
    for key, value, default in (("obs_is", export.obs_is, "obs"), ("var_is", export.var_is, "var"),
                                ("X_is", export.X_is, "X")):
        if value is not None and value != default:
            export.uns[key] = value
        else:
            export.uns.pop(key, None)
    return export


def _column_order(daf: DafReader, axis: str) -> list[str]:
    """The vectors of an axis in the order recorded when it was imported (``<axis>_column_order``), the others
    after them, sorted."""
    names = daf.vectors_set(axis)
    recorded = daf.get_scalar(column_order_scalar(axis), default=None)
    first = [name for name in recorded.split("\n") if name in names] if isinstance(recorded, str) else []
    return list(dict.fromkeys(first)) + sorted(names.difference(first))


def _columns(daf: DafReader, axis: str) -> dict[str, np.ndarray]:
    columns = {}
    for name in _column_order(daf, axis):
        vector = daf.get_vector(axis, name)
        columns[name] = np.asarray(vector.to_dense() if hasattr(vector, "to_dense") else vector)
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
    """``(member, key, matrix, encoding)`` of X (if any), the layers, obsp and varp."""
    obs, var = export.obs_is, export.var_is
    if export.X_is is not None:
        yield "X", "X", *_anndata_matrix(daf, obs, var, export.X_is, allow_csc=allow_csc)
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
                X_is: str | None = None, progress: bool = True) -> None:
    """Write a Daf data set as an ``.h5ad`` file (anndata's current format, written with h5py): the axes ``obs_is``
    and ``var_is`` (by default the scalars of those names, else ``obs``/``var``) with their vectors (in the order
    recorded on import, else sorted), the matrix ``X_is`` as ``X`` (none if the data set has no such matrix, unless
    ``X_is`` is given), the other matrices of the two axes as layers, their square matrices as ``obsp``/``varp``
    (transposed back), and every scalar in ``uns`` (plus ``obs_is``/``var_is``/``X_is`` when not the defaults).
    Sparse matrices are written as ``csr_matrix`` from the stored ``(var_is, obs_is)`` layout, or as ``csc_matrix``
    when only ``(obs_is, var_is)`` is stored, streaming slices of the stored arrays (nothing is relaid out).

    Example:
        >>> import os, tempfile, numpy as np, pydaf, anndata
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
        >>> path = os.path.join(tempfile.mkdtemp(), "x.h5ad")
        >>> daf_as_h5ad(daf.set_matrix("cell", "gene", "UMIs", np.array([[1], [2]])), path, obs_is="cell",
        ...             var_is="gene", X_is="UMIs", progress=False)
        >>> adata = anndata.read_h5ad(path)
        >>> adata.X.tolist(), adata.uns["X_is"]
        ([[1], [2]], 'UMIs')
    """
    source = daf.complete_path()
    if source is not None:
        require_distinct(source, path)
    with daf.read_lock():
        export = _export_names(daf, obs_is, var_is, X_is)
        matrices = list(_matrices(daf, export, allow_csc=True))
        try:
            write_file_then_replace(path, lambda temporary: _write_h5ad(temporary, daf, export, matrices, progress))
        except DafError:
            raise
        except (ValueError, TypeError) as error:  # e.g. a NUL in a string, which HDF5 strings can't hold
            raise DafValueError(f"can't write the h5ad file: {os.fspath(path)}\nfrom the daf data: {daf.name}\n"
                                f"({type(error).__name__}: {error})") from error


def _write_h5ad(path: str, daf: DafReader, export: _Export, matrices: list[tuple[str, str, Any, str]],
                progress: bool) -> None:
    with h5py.File(path, "w") as file:
        stamp(file, "anndata", "0.1.0")
        for member, axis in (("obs", export.obs_is), ("var", export.var_is)):
            write_element(file, member, "dataframe", (daf.axis_vector(axis), _columns(daf, axis)))
        uns = {key: ("string" if isinstance(value, str) else "numeric-scalar", value)
               for key, value in export.uns.items()}
        groups = {member: write_element(file, member, "dict", uns if member == "uns" else {})
                  for member in ("layers", "obsm", "varm", "obsp", "varp", "uns")}
        total = sum(matrix.nnz if isinstance(matrix, SparseMatrixCSC) else int(np.prod(matrix.shape))
                    for _, _, matrix, _ in matrices)
        with progress_bar(total, progress, "Daf -> AnnData") as bar:
            for member, key, matrix, encoding in matrices:
                write_element(file if member == "X" else groups[member], key, encoding, matrix, bar=bar)


def daf_as_anndata(daf: DafReader, *, obs_is: str | None = None, var_is: str | None = None,
                   X_is: str | None = None, X_eltype: Any = None) -> anndata.AnnData:
    """A new in-memory ``anndata.AnnData`` of a Daf data set (the same mapping as :func:`daf_as_h5ad`); sparse
    matrices become ``scipy.sparse.csr_matrix``, dense ones numpy arrays. ``X_eltype`` converts ``X``.

    Example:
        >>> import numpy as np, pydaf
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"])
        >>> adata = daf_as_anndata(daf.set_matrix("cell", "gene", "UMIs", np.array([[1], [2]])), obs_is="cell",
        ...                        var_is="gene", X_is="UMIs", X_eltype=np.float32)
        >>> adata.X.dtype, adata.obs_names.tolist()
        (dtype('float32'), ['A', 'B'])
    """
    import anndata
    import pandas as pd
    import scipy.sparse as sp

    def row_major(matrix: Any) -> Any:
        if isinstance(matrix, SparseMatrixCSC):
            return sp.csr_matrix((np.asarray(matrix.nzval), np.asarray(matrix.rowval, dtype=np.int64) - 1,
                                  np.asarray(matrix.colptr, dtype=np.int64) - 1),
                                 shape=(matrix.shape[1], matrix.shape[0]))
        return np.ascontiguousarray(matrix)

    def frame(axis: str) -> pd.DataFrame:
        index = pd.Index(np.asarray(daf.axis_vector(axis), dtype=object))
        return pd.DataFrame(_columns(daf, axis), index=index)

    with daf.read_lock():
        export = _export_names(daf, obs_is, var_is, X_is)
        members: dict[str, dict[str, Any]] = {"layers": {}, "obsp": {}, "varp": {}}
        X = None
        for member, key, matrix, _ in _matrices(daf, export, allow_csc=False):
            if member == "X":
                X = row_major(matrix)
                if X_eltype is not None:
                    X = X.astype(X_eltype)
            else:
                members[member][key] = row_major(matrix)
        return anndata.AnnData(X=X, obs=frame(export.obs_is), var=frame(export.var_is), uns=export.uns,
                               **members)
