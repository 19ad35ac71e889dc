"""AnnData's ``obsm``/``varm`` as Daf matrices over named extra axes, both ways: each numeric 2-D element
``obsm[key]`` (dense, CSR, CSC, or a DataFrame of numeric columns of one type) becomes the axis ``obsm_<key>``, the
matrix ``<key>`` of (``obs_is``, ``obsm_<key>``) stored column-major, and the scalar ``obsm_<key>_encoding`` from
which the export rebuilds the element. Nothing is overwritten or renamed: what can't be kept goes to the
``unsupported_handler``.

Design: docs/design/anndata.md.

Example:
    >>> import anndata, numpy as np, pydaf
    >>> adata = anndata.AnnData(np.ones((3, 2), dtype=np.float32))
    >>> adata.obs_names, adata.var_names = ["A", "B", "C"], ["X", "Y"]
    >>> adata.obsm["X_umap"] = np.arange(6, dtype=np.float32).reshape(3, 2)
    >>> daf = pydaf.interop.anndata_as_daf(adata, obs_is="cell", var_is="gene")
    >>> daf.axis_vector("obsm_X_umap").tolist(), daf.get_scalar("obsm_X_umap_encoding")
    (['0', '1'], 'array')
    >>> daf.get_np_query("@ cell @ obsm_X_umap :: X_umap").tolist()
    [[0.0, 1.0], [2.0, 3.0], [4.0, 5.0]]
    >>> pydaf.interop.daf_as_anndata(daf).obsm["X_umap"].dtype
    dtype('float32')
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import h5py
import numpy as np

from ..errors import DafMissingError, DafValueError
from ..sparse import SparseMatrixCSC
from .content import (
    AXIS_ARRAY_ENCODINGS,
    Content,
    axis_array_axis,
    axis_array_record,
    element_path,
    sort_axis_array,
)
from .h5ad_elements import (
    Column,
    MatrixSource,
    Unsupported,
    compound_fields,
    encoding_of,
    read_dataframe,
    read_element,
    read_guarded,
    require_stored_size,
)

if TYPE_CHECKING:
    import anndata

    from ..core.readers import DafReader

__all__ = ["AxisArraysKept", "exported_axis_arrays", "kept_keys", "read_h5ad_axis_arrays",
           "read_memory_axis_arrays", "recorded_axis_arrays"]

#: Which ``obsm``/``varm`` elements an import keeps: all (``True``), none (``False``), or the listed keys.
AxisArraysKept = bool | Iterable[str]


def kept_keys(keep: AxisArraysKept, member: str, keys: list[str], origin: str) -> list[str]:
    """The keys of ``member`` (``obsm``/``varm``) to import, of the ``keys`` it has.

    Example:
        >>> kept_keys(True, "obsm", ["X_pca", "X_umap"], "x.h5ad"), kept_keys(["X_umap"], "obsm", ["X_pca", "X_umap"],
        ...                                                                    "x.h5ad")
        (['X_pca', 'X_umap'], ['X_umap'])
        >>> kept_keys(["X_tsne"], "obsm", ["X_pca", "X_umap"], "x.h5ad")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafMissingError: missing obsm key: X_tsne
        in x.h5ad
        (its obsm keys are: X_pca, X_umap)
    """
    if keep is True:
        return list(keys)
    if keep is False:
        return []
    if isinstance(keep, str | bytes) or not isinstance(keep, Iterable):
        raise DafValueError(f"invalid {member}: {keep!r}\n(expected True, False or a list of {member} keys)")
    chosen = list(dict.fromkeys(keep))
    for key in chosen:
        if key not in keys:
            raise DafMissingError(f"missing {member} key: {key}\nin {origin}\n(its {member} keys are: "
                                  f"{', '.join(map(str, keys)) or 'none'})")
    return [key for key in keys if key in chosen]


# Reading an h5ad file.


def read_h5ad_axis_arrays(root: h5py.Group, content: Content, member: str, keep: AxisArraysKept, *,
                          into: str | None = None) -> None:
    """File the elements of ``root[member]`` (``obsm``/``varm``: a group, or anndata < 0.7's compound dataset with a
    field per element) that ``keep`` selects into ``content`` (the obs and var names already read) as elements of
    ``into`` (by default ``member``; ``raw_varm`` for raw's ``varm``, whose rows are the raw var names).

    Example:
        >>> import os, tempfile
        >>> from pydaf.interop.h5ad_elements import Column
        >>> content = Content(obs={"_index": Column(np.array(["A", "B"], dtype=object))})
        >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5ad"), "w") as file:
        ...     _ = file.create_dataset("obsm", data=np.zeros(2, dtype=[("X_umap", "<f4", (2,)), ("n", "<i8")]))
        ...     read_h5ad_axis_arrays(file, content, "obsm", True)
        >>> [(array.key, array.source.shape) for array in content.axis_arrays], content.unsupported
        ([('X_umap', (2, 2))], ['unsupported element: obsm/n (1-dimensional array)'])
    """
    into = member if into is None else into
    element = root.get(member)
    if element is None:
        kept_keys(keep, member, [], content.origin)
        return
    if isinstance(element, h5py.Group):
        keys = list(element)
    else:
        keys = compound_fields(element)
        if not keys:
            content.unsupported.append(f"unsupported element: {element_path(into, '')[:-1]}")
            return
    chosen = kept_keys(keep, member, keys, content.origin)
    if not chosen:
        return
    names = getattr(content, {"obsm": "obs", "varm": "var", "raw_varm": "raw"}[into])["_index"].values
    if isinstance(element, h5py.Group):
        for key in chosen:
            value, entries, encoding = read_guarded(element[key], lambda item: _h5ad_axis_array(item, names))
            sort_axis_array(content, into, key, value, entries=entries, encoding=encoding)
    else:
        rows = read_guarded(element, _whole_dataset)
        for key in chosen:
            values = rows[key]
            value = (MatrixSource("dense", values.shape, values.dtype, np.ascontiguousarray(values))
                     if values.ndim == 2 else Unsupported(f"{values.ndim}-dimensional array"))
            sort_axis_array(content, into, key, value)


def _whole_dataset(dataset: h5py.Dataset) -> np.ndarray:
    require_stored_size(dataset)  # (before its declared size is allocated)
    return dataset[()]


def _h5ad_axis_array(element: Any, names: np.ndarray) -> tuple[Any, Any, str | None]:
    if encoding_of(element)[0] == "dataframe":
        return _h5ad_frame(element, names)
    value = read_element(element)
    if isinstance(value, Column):
        return Unsupported("1-dimensional array"), None, None
    if isinstance(value, dict):
        return Unsupported("nested mapping"), None, None
    return value, None, None


def _h5ad_frame(group: Any, names: np.ndarray) -> tuple[Any, Any, str | None]:
    """A DataFrame element: its numeric columns (plain ``array``s of one type) as one dense matrix, and its column
    names; its index must be the obs (var) names, as anndata requires."""
    if not isinstance(group, h5py.Group):
        return Unsupported("dataframe that is not a group"), None, None
    columns = read_dataframe(group)
    if isinstance(columns, Unsupported):
        return columns, None, None
    index = columns.pop("_index")
    if not isinstance(index, Column) or index.values.tolist() != names.tolist():
        return Unsupported("a dataframe whose index is not the AnnData's names"), None, None
    problem = _frame_problem({name: (encoding_of(group[name])[0] in (None, "array"), column)
                              for name, column in columns.items()})
    if problem is not None:
        return Unsupported(problem), None, None
    return _frame_source(names.shape[0], [column.values for column in columns.values()]), list(columns), "dataframe"


def _frame_problem(columns: dict[str, tuple[bool, Any]]) -> str | None:
    """Why a DataFrame (``{name: (plain, Column)}``) can't be one Daf matrix, or ``None``."""
    dtypes = set()
    for name, (plain, column) in columns.items():
        if isinstance(column, Unsupported):
            return f"a dataframe with the column: {name} ({column.reason})"
        dtype = column.values.dtype
        if not plain or column.missing is not None or dtype.kind not in "biuf" or dtype == np.float16:
            return f"a dataframe with the non-numeric column: {name}"
        dtypes.add(dtype)
    if len(dtypes) > 1:
        return f"a dataframe with columns of different types: {', '.join(sorted(map(str, dtypes)))}"
    return None


def _frame_source(n_rows: int, values: list[np.ndarray]) -> MatrixSource:
    dtype = values[0].dtype if values else np.dtype(np.float64)
    data = np.empty((n_rows, len(values)), dtype=dtype)
    for index, column in enumerate(values):
        data[:, index] = column
    return MatrixSource("dense", data.shape, dtype, data)


# Reading an in-memory AnnData.


def read_memory_axis_arrays(adata: anndata.AnnData | anndata.Raw, content: Content, member: str, keep: AxisArraysKept,
                            *, into: str | None = None) -> None:
    """File the elements of ``adata.obsm``/``adata.varm`` that ``keep`` selects into ``content`` as elements of
    ``into`` (by default ``member``; ``raw_varm`` for the ``varm`` of ``adata.raw``, given as ``adata``).

    Example:
        >>> import anndata, pandas as pd
        >>> adata = anndata.AnnData(np.zeros((2, 1), dtype=np.float32))
        >>> adata.obsm["protein_expression"] = pd.DataFrame({"CD3": [1, 2], "CD4": [3, 4]}, index=adata.obs_names)
        >>> content = Content()
        >>> read_memory_axis_arrays(adata, content, "obsm", True)
        >>> [(array.key, array.encoding, array.entries.tolist()) for array in content.axis_arrays]
        [('protein_expression', 'dataframe', ['CD3', 'CD4'])]
    """
    import pandas as pd

    mapping = getattr(adata, member)
    chosen = kept_keys(keep, member, list(mapping.keys()), content.origin)
    names = np.asarray((adata.obs_names if member == "obsm" else adata.var_names).astype(str), dtype=object)
    into = member if into is None else into
    for key in chosen:
        value = mapping[key]
        if isinstance(value, pd.DataFrame):
            source, entries = _memory_frame(value, names)
            sort_axis_array(content, into, key, source, entries=entries, encoding="dataframe")
        else:
            sort_axis_array(content, into, key, _memory_array(value))


def _memory_array(value: Any) -> Any:
    import scipy.sparse as sp

    if sp.issparse(value):
        if value.ndim != 2:
            return Unsupported(f"{value.ndim}-dimensional sparse array")
        if value.format not in ("csr", "csc"):
            value = value.tocsr()  # (h5ad holds CSR and CSC only: this is what write_h5ad would write)
        return MatrixSource(value.format, value.shape, value.data.dtype, value.data, value.indices, value.indptr)
    if isinstance(value, np.ndarray):
        if value.ndim != 2:
            return Unsupported(f"{value.ndim}-dimensional array")
        if value.dtype == object or value.dtype.kind in "SU":
            return Unsupported("string matrix")
        return MatrixSource("dense", value.shape, value.dtype, np.asarray(value))
    return Unsupported(f"matrix type: {type(value).__name__}")


def _memory_frame(frame: Any, names: np.ndarray) -> tuple[Any, Any]:
    import pandas as pd

    columns = list(frame.columns)
    if not all(isinstance(name, str) for name in columns) or len(set(columns)) != len(columns):
        return Unsupported("a dataframe whose column names are not unique strings"), None
    if np.asarray(frame.index.astype(str), dtype=object).tolist() != names.tolist():
        return Unsupported("a dataframe whose index is not the AnnData's names"), None
    plain = {}
    for name in columns:
        dtype = frame[name].dtype
        numpy = isinstance(dtype, np.dtype) and not isinstance(dtype, pd.api.extensions.ExtensionDtype)
        plain[name] = (numpy, Column(frame[name].to_numpy()) if numpy else Unsupported(f"column type: {dtype}"))
    problem = _frame_problem(plain)
    if problem is not None:
        return Unsupported(problem), None
    values = [column.values for _, column in plain.values() if isinstance(column, Column)]  # (all are, by now)
    return _frame_source(len(names), values), columns


# Export.


def recorded_axis_arrays(daf: DafReader, obs_axis: str, var_axis: str,
                         raw_axis: str | None = None) -> list[tuple[str, str, str, str, str]]:
    """The obsm/varm elements a data set records: ``(member, key, rows_axis, axis, encoding)`` for every axis
    ``<member>_<key>`` whose record scalar holds an encoding and that has the matrix ``key`` of the rows axis (obs or
    var) and it; sorted by key. With a ``raw_axis``, also raw's varm (member ``raw_varm``, over that axis).

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A"]).add_axis("gene", ["X"]).add_axis("obsm_X_umap", ["0"])
        >>> daf.set_matrix("cell", "obsm_X_umap", "X_umap", np.array([[0.5]])).set_scalar(
        ...     "obsm_X_umap_encoding", "array")  # doctest: +ELLIPSIS
        MemoryDaf ...
        >>> recorded_axis_arrays(daf, "cell", "gene")
        [('obsm', 'X_umap', 'cell', 'obsm_X_umap', 'array')]
    """
    records = []
    axes = daf.axes_set()
    members = [("obsm", obs_axis), ("varm", var_axis)] + ([("raw_varm", raw_axis)] if raw_axis is not None else [])
    for member, rows_axis in members:
        prefix = axis_array_axis(member, "")
        for axis in sorted(axes):
            key = axis[len(prefix):]
            if not axis.startswith(prefix) or not key or axis in (obs_axis, var_axis, raw_axis):
                continue
            encoding = daf.get_scalar(axis_array_record(axis), default=None)
            if isinstance(encoding, str) and encoding in AXIS_ARRAY_ENCODINGS and daf.has_matrix(rows_axis, axis, key):
                records.append((member, key, rows_axis, axis, encoding))
    return records


def exported_axis_arrays(daf: DafReader, obs_axis: str, var_axis: str,
                         raw_axis: str | None = None) -> Iterator[tuple[str, str, str, Any]]:
    """``(member, key, encoding, value)`` of each recorded element, ``value`` as the h5ad writers take it: a
    row-major-readable ``(rows, columns)`` array (``array``), Daf's CSC matrix whose arrays are the element's
    (``csr_matrix``: the ``(columns, rows)`` matrix; ``csc_matrix``: the ``(rows, columns)`` one), or ``(names,
    {column: values})`` (``dataframe``). A sparse matrix recorded as an ``array`` stays sparse (``csc_matrix``); a
    dense one recorded as sparse is made sparse.

    Example:
        >>> import pydaf
        >>> daf = pydaf.MemoryDaf().add_axis("cell", ["A", "B"]).add_axis("gene", ["X"]).add_axis("obsm_p", ["CD3"])
        >>> daf.set_matrix("cell", "obsm_p", "p", np.array([[1], [2]])).set_scalar(
        ...     "obsm_p_encoding", "dataframe")  # doctest: +ELLIPSIS
        MemoryDaf ...
        >>> [(member, key, encoding, value[0].tolist(), {name: column.tolist() for name, column in value[1].items()})
        ...  for member, key, encoding, value in exported_axis_arrays(daf, "cell", "gene")]
        [('obsm', 'p', 'dataframe', ['A', 'B'], {'CD3': [1, 2]})]
    """
    for member, key, rows_axis, axis, encoding in recorded_axis_arrays(daf, obs_axis, var_axis, raw_axis):
        stored = daf.get_stored_matrix(rows_axis, axis, key)
        if encoding == "dataframe":
            dense = stored.to_dense() if isinstance(stored, SparseMatrixCSC) else np.asarray(stored)
            entries = daf.axis_vector(axis)
            yield member, key, encoding, (daf.axis_vector(rows_axis),
                                          {str(entry): dense[:, index] for index, entry in enumerate(entries)})
            continue
        if encoding != "array" and not isinstance(stored, SparseMatrixCSC):
            stored = SparseMatrixCSC.from_dense(np.asarray(stored))
        if encoding == "csr_matrix":
            yield member, key, encoding, stored.transpose()
        elif isinstance(stored, SparseMatrixCSC):
            yield member, key, "csc_matrix", stored
        else:
            yield member, key, encoding, np.asarray(stored)
