"""``DafAnnData``: a Daf data set (or view, or chain) seen as an ``anndata.AnnData``, without copying it (dafpy's
``anndata_facade``). Two axes are AnnData's ``obs`` and ``var`` and one of their matrices is ``X``; everything is
read from, and written to, the data set itself on each access.

What maps to what (the AnnData shapes are ``(n_obs, n_vars)``; Daf stores matrices column-major):

- ``X`` and ``layers[name]``: the ``(obs, var)`` matrices. A stored ``(var, obs)`` layout is given transposed (a
  dense one is then a row-major numpy array, a sparse one a ``scipy.sparse.csr_matrix``), else the ``(obs, var)``
  one as stored (Fortran order, or ``csc_matrix``): both are the stored arrays, never copied nor densified; on a
  memory-mapped H5df they are the read-only maps of the file.
- ``obs``/``var``: the vectors of each axis, through a DataFrame-like proxy (``[name]``, ``[[names]]``,
  ``columns``, ``index``, ``to_df()``…); ``obs_names``/``var_names`` are the axis entries (read-only).
- ``uns``: the scalars (a flat mapping of strings and numbers: Daf holds no nested ``uns``).
- ``obsp``/``varp``: the square matrices of an axis, as pydaf's AnnData conversions give them (the stored matrix
  transposed, so ``obsp[k][i, j]`` is Daf's ``[j, i]``; zero-copy).
- ``obsm``/``varm``: a matrix of the obs (var) axis and another axis, keyed ``"other_axis:matrix_name"`` (the other
  axis must exist and be neither obs nor var).

Writes (``adata.X = …``, ``adata.layers[k] = …``, ``adata.obs[c] = …``, ``adata.uns[k] = …``, ``del …``) go to the
data set, overwriting what they replace (as assigning to an AnnData does). A dense matrix is written in the layout
it comes in (a row-major ``(obs, var)`` array *is* Daf's column-major ``(var, obs)``: not copied) and, as Daf does by
default, relaid out to the other layout too (square matrices have one). Through a read-only data set (a file opened
``"r"``, a view, a slice of a ``DafAnnData``) a write raises :class:`~pydaf.DafReadOnlyError`, saying how to open
the data set for writing.

Slicing ``adata[obs_index, var_index]`` (both are required; each a slice, a Boolean mask, entry names, positions, a
name, a position, ``None`` or ``...``) gives a read-only ``DafAnnData`` over a Daf view: lazy (nothing is copied
until read; a slice of contiguous entries reads slices of the stored arrays). A Daf view keeps the axis order, so
names or positions out of that order (or repeated) are refused rather than reordered. ``query_obs``/``query_var``
filter by a Daf query.

scanpy: a ``DafAnnData`` is not an ``anndata.AnnData`` instance (as dafpy's is not). scanpy steps that use only the
attributes above accept it: ``sc.pp.normalize_total(adata, inplace=False)`` reads the mapped ``X`` and returns its
result; an in-place step writes through to the data set what Daf can hold (``X``, layers, obs/var columns, scalar
``uns``) and raises a :class:`~pydaf.DafError` for the rest (a nested ``uns``, an ``obsm`` key without an axis) or
on a read-only data set (and numpy refuses to modify a read-only mapped ``X`` in place: ``sc.pp.log1p(adata)``).
Steps that need an ``anndata.AnnData`` (``sc.pp.pca``, ``sc.pp.neighbors``, ``sc.tl.*``) take ``adata.to_memory()``
(an ``anndata.AnnData`` sharing the stored arrays, read-only) or ``adata.copy()`` (a writable copy); their results
stay in that AnnData (``pydaf.interop.anndata_as_daf`` stores them in a data set).

Example:
    >>> import numpy as np, pydaf
    >>> from pydaf.interop import DafAnnData
    >>> daf = pydaf.MemoryDaf(name="cells!").add_axis("cell", ["A", "B", "C"]).add_axis("gene", ["X", "Y"])
    >>> daf = daf.set_matrix("gene", "cell", "UMIs", np.array([[1, 0, 2], [3, 4, 0]], np.uint8)).set_scalar("v", 1)
    >>> adata = DafAnnData(daf, obs_axis="cell", var_axis="gene", x_matrix="UMIs")
    >>> adata.shape, adata.X.tolist(), np.shares_memory(adata.X, daf.get_matrix("gene", "cell", "UMIs"))
    ((3, 2), [[1, 3], [0, 4], [2, 0]], True)
    >>> adata.obs["total"] = np.asarray(adata.X.sum(axis=1))             # written to the data set
    >>> daf.get_vector("cell", "total").tolist(), adata[1:, :].obs_names.tolist()
    ([4, 4, 2], ['B', 'C'])
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..composition.chains import chain_writer
from ..composition.views import VIEW_ALL_AXES, VIEW_ALL_DATA, viewer
from ..core.readers import DafReader, DafReadOnly
from ..errors import (
    DafIndexError,
    DafKeyError,
    DafMissingError,
    DafReadOnlyError,
    DafTypeError,
    DafValueError,
)
from ..formats.memory import MemoryDaf
from ..queries.tokens import escape_value
from ..storage_types import StorageScalar

__all__ = ["DafAnnData"]

#: The vector a slice selects entries by (in a memory data set chained over the sliced one, hidden by the view).
MASK_NAME = "__mask__"

_EMBEDDING_KEY = re.compile(r"^([^:]+):(.+)$")


def _key_error(error: DafMissingError) -> DafKeyError:
    """``error`` (a missing property) as a ``KeyError`` too, its fields kept."""
    return DafKeyError(error.problem, daf_name=error.daf_name, daf_preposition=error.daf_preposition,
                       what=error.what, for_=error.for_, hint=error.hint)


def _is_storage_scalar(value: Any) -> bool:
    return isinstance(value, (str, bool, int, float, np.integer, np.floating, np.bool_, np.str_))


def _stored_oriented(daf: DafReader, rows_axis: str, columns_axis: str, name: str) -> Any:
    """The ``(rows_axis, columns_axis)`` matrix without a copy: the stored ``(columns_axis, rows_axis)`` layout
    transposed (row-major dense, CSR sparse), else the stored ``(rows_axis, columns_axis)`` one. A square matrix is
    always given transposed (pydaf's AnnData convention for ``obsp``/``varp``)."""
    try:
        if daf.has_matrix(columns_axis, rows_axis, name, relayout=False):
            return _transposed(daf.get_matrix(columns_axis, rows_axis, name, relayout=False))
        return daf.get_matrix(rows_axis, columns_axis, name)
    except DafMissingError as error:
        raise _key_error(error) from None


def _transposed(matrix: Any) -> Any:
    """``matrix.T``, sharing its arrays: scipy's ``.T`` would copy the values of a sparse matrix mapped from a file
    (it copies data that is a view of a larger buffer), so the transposed matrix gets them after it is built."""
    if not sp.issparse(matrix):
        return matrix.T
    placeholder = np.broadcast_to(np.zeros(1, dtype=matrix.data.dtype), matrix.data.shape)
    flipped = sp.csr_matrix if matrix.format == "csc" else sp.csc_matrix
    result = flipped((placeholder, matrix.indices, matrix.indptr), shape=matrix.shape[::-1], copy=False)
    result.data = matrix.data
    return result


def _store_oriented(daf: Any, rows_axis: str, columns_axis: str, name: str, value: Any) -> None:
    """Set the ``(rows_axis, columns_axis)`` matrix ``value`` in the layout it comes in (a row-major array or a CSR
    matrix is Daf's ``(columns_axis, rows_axis)`` layout as it is), relaid out to the other layout too."""
    if isinstance(value, pd.DataFrame):  # aligned by its labels
        daf.set_matrix(rows_axis, columns_axis, name, value, overwrite=True)
        return
    if not sp.issparse(value):
        value = np.asarray(value)
    row_major = (value.format == "csr") if sp.issparse(value) else (
        value.ndim == 2 and value.flags.c_contiguous and not value.flags.f_contiguous)
    if rows_axis == columns_axis or row_major:
        daf.set_matrix(columns_axis, rows_axis, name, value.T, overwrite=True)
    else:
        daf.set_matrix(rows_axis, columns_axis, name, value, overwrite=True)


class _Facet:
    """What the proxies share: the facade (for its data set and its write checks)."""

    def __init__(self, adata: DafAnnData) -> None:
        self._adata = adata

    @property
    def _daf(self) -> DafReader:
        return self._adata._daf


class DafAxisFrame(_Facet):
    """``obs`` or ``var`` of a :class:`DafAnnData`: the vectors of one axis, with the ``pandas.DataFrame`` operations
    code reads AnnData's ``obs`` with (``frame["c"]`` a Series, ``frame[["c", "d"]]`` a DataFrame, ``columns``,
    ``index``, ``len`` the number of rows, ``in``, iteration over the column names, ``to_df()``) and writes through
    (``frame["c"] = values``, ``del frame["c"]``). Not a DataFrame: ``to_df()`` (or ``copy()``) gives one.

    Example:
        >>> import pydaf
        >>> adata = DafAnnData(pydaf.example_cells_daf(), obs_axis="cell", var_axis="gene", x_matrix="UMIs")
        >>> adata.obs["donor"].iloc[:2].tolist(), list(adata.obs), adata.obs.shape
        (['N89', 'N84'], ['donor', 'experiment'], (856, 2))
    """

    def __init__(self, adata: DafAnnData, axis: str) -> None:
        super().__init__(adata)
        self._axis = axis

    @property
    def index(self) -> pd.Index:
        """The axis entries."""
        return pd.Index(self._daf.axis_vector(self._axis), name=self._axis)

    @property
    def columns(self) -> pd.Index:
        """The vectors of the axis (sorted, as Daf lists them)."""
        return pd.Index(sorted(self._daf.vectors_set(self._axis)), dtype=object)

    @property
    def shape(self) -> tuple[int, int]:
        """``(number of entries, number of vectors)``."""
        return self._daf.axis_length(self._axis), len(self._daf.vectors_set(self._axis))

    def keys(self) -> pd.Index:
        """The column names (``columns``)."""
        return self.columns

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._daf.has_vector(self._axis, key)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._daf.vectors_set(self._axis)))

    def __len__(self) -> int:
        return self._daf.axis_length(self._axis)  # as a DataFrame's: the number of rows

    def _series(self, key: str) -> pd.Series:
        try:
            return self._daf.get_pd_vector(self._axis, key)
        except DafMissingError as error:
            raise _key_error(error) from None

    def __getitem__(self, key: str | list[str]) -> pd.Series | pd.DataFrame:
        if isinstance(key, str):
            return self._series(key)
        if isinstance(key, list) and all(isinstance(name, str) for name in key):
            return pd.DataFrame({name: self._series(name).to_numpy() for name in key}, index=self.index, copy=False)
        raise DafKeyError(f"not a column name (nor a list of them): {key!r}\nof the axis: {self._axis}",
                          daf_name=self._daf.name, hint=f"(its columns: {', '.join(self) or 'none'})")

    def get(self, key: str, default: Any = None) -> Any:
        """``frame[key]``, or ``default`` if there is no such column."""
        return self._series(key) if key in self else default

    def items(self) -> Iterator[tuple[str, pd.Series]]:
        """``(name, Series)`` of each column."""
        return ((name, self._series(name)) for name in self)

    def __setitem__(self, key: str, value: Any) -> None:
        self._adata._write(f"set the {self._adata._role(self._axis)} column: {key}",
                           lambda daf: daf.set_vector(self._axis, key, value, overwrite=True))

    def __delitem__(self, key: str) -> None:
        if key not in self:
            self._series(key)  # the missing-vector error
        self._adata._write(f"delete the {self._adata._role(self._axis)} column: {key}",
                           lambda daf: daf.delete_vector(self._axis, key))

    def to_df(self) -> pd.DataFrame:
        """The columns as a ``pandas.DataFrame`` (sharing the stored vectors)."""
        return pd.DataFrame({name: self._daf.get_vector(self._axis, name) for name in self}, index=self.index,
                            copy=False)

    def copy(self) -> pd.DataFrame:
        """The columns as a ``pandas.DataFrame`` of its own (writable copies)."""
        return self.to_df().copy(deep=True)

    def __repr__(self) -> str:
        return repr(self.to_df())


class _DafMapping(_Facet, MutableMapping):
    """A mapping over the properties of the data set: keys are listed sorted; a missing key raises
    :class:`~pydaf.DafKeyError` (a ``KeyError``); writes go to the data set."""

    member = ""

    def _names(self) -> set[str]:
        raise NotImplementedError

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names()))

    def __len__(self) -> int:
        return len(self._names())

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._names()

    def __repr__(self) -> str:
        return f"{self.member}: {', '.join(repr(name) for name in self) or 'none'}"


class DafLayers(_DafMapping):
    """``layers`` of a :class:`DafAnnData`: the ``(obs, var)`` matrices other than ``X`` (zero-copy).

    Example:
        >>> import numpy as np, pydaf
        >>> adata = DafAnnData(pydaf.example_cells_daf(), obs_axis="cell", var_axis="gene", x_matrix="UMIs")
        >>> adata.layers["ones"] = np.ones(adata.shape, dtype=np.float32)
        >>> list(adata.layers), adata.daf.get_matrix("gene", "cell", "ones").shape
        (['ones'], (683, 856))
    """

    member = "layers"

    def _names(self) -> set[str]:
        adata = self._adata
        return {name for name in self._daf.matrices_set(adata.obs_axis, adata.var_axis) if name != adata.x_matrix}

    def _require_layer(self, key: str) -> None:
        if key == self._adata.x_matrix:
            raise DafKeyError(f"the matrix: {key}\nis the X of the DafAnnData, not a layer", daf_name=self._daf.name,
                              hint=f"(use adata.X; the layers: {', '.join(self) or 'none'})")

    def __getitem__(self, key: str) -> Any:
        self._require_layer(key)
        return _stored_oriented(self._daf, self._adata.obs_axis, self._adata.var_axis, key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._require_layer(key)
        adata = self._adata
        adata._write(f"set the layer: {key}",
                     lambda daf: _store_oriented(daf, adata.obs_axis, adata.var_axis, key, value))

    def __delitem__(self, key: str) -> None:
        self._require_layer(key)
        if key not in self:
            self[key]  # the missing-matrix error
        adata = self._adata
        adata._write(f"delete the layer: {key}", lambda daf: daf.delete_matrix(adata.obs_axis, adata.var_axis, key))


class DafUns(_DafMapping):
    """``uns`` of a :class:`DafAnnData`: the scalars of the data set (strings and numbers; Daf holds no nested
    values, so a ``dict``, list or array is refused with a :class:`~pydaf.DafTypeError`).

    Example:
        >>> import pydaf
        >>> adata = DafAnnData(pydaf.example_cells_daf(), obs_axis="cell", var_axis="gene", x_matrix="UMIs")
        >>> adata.uns["answer"] = 42
        >>> dict(adata.uns), adata.daf.get_scalar("answer")
        ({'answer': 42, 'organism': 'human', 'reference': 'test'}, np.int64(42))
    """

    member = "uns"

    def _names(self) -> set[str]:
        return self._daf.scalars_set()

    def __getitem__(self, key: str) -> StorageScalar:
        try:
            value = self._daf.get_scalar(key)
            return value.item() if isinstance(value, np.generic) else value  # (Python's, as anndata reads uns)
        except DafMissingError as error:
            raise _key_error(error) from None

    def __setitem__(self, key: str, value: Any) -> None:
        if not _is_storage_scalar(value):
            raise DafTypeError(f"uns values must be strings or numbers, got {type(value).__name__}\nfor uns: {key}",
                               daf_name=self._daf.name,
                               hint="(a Daf scalar holds a string or a number; nested dicts, lists and arrays are "
                                    "not supported: keep them in an anndata.AnnData, e.g. adata.to_memory())")
        self._adata._write(f"set the uns scalar: {key}", lambda daf: daf.set_scalar(key, value, overwrite=True))

    def __delitem__(self, key: str) -> None:
        self[key]  # the missing-scalar error
        self._adata._write(f"delete the uns scalar: {key}", lambda daf: daf.delete_scalar(key))

    def __repr__(self) -> str:
        return "{" + ", ".join(f"{key!r}: {self[key]!r}" for key in self) + "}"


class DafPairwise(_DafMapping):
    """``obsp`` or ``varp`` of a :class:`DafAnnData`: the square matrices of one axis, transposed as pydaf's AnnData
    conversions give them (``obsp[k][i, j]`` is Daf's ``[j, i]``; zero-copy).

    Example:
        >>> import numpy as np, pydaf
        >>> daf = pydaf.example_metacells_daf()
        >>> adata = DafAnnData(daf, obs_axis="metacell", var_axis="gene", x_matrix="fraction")
        >>> np.array_equal(adata.obsp["edge_weight"], daf.get_matrix("metacell", "metacell", "edge_weight").T)
        True
    """

    def __init__(self, adata: DafAnnData, axis: str, member: str) -> None:
        super().__init__(adata)
        self._axis = axis
        self.member = member

    def _names(self) -> set[str]:
        return self._daf.matrices_set(self._axis, self._axis)

    def __getitem__(self, key: str) -> Any:
        return _stored_oriented(self._daf, self._axis, self._axis, key)

    def __setitem__(self, key: str, value: Any) -> None:
        self._adata._write(f"set the {self.member} matrix: {key}",
                           lambda daf: _store_oriented(daf, self._axis, self._axis, key, value))

    def __delitem__(self, key: str) -> None:
        self[key]  # the missing-matrix error
        self._adata._write(f"delete the {self.member} matrix: {key}",
                           lambda daf: daf.delete_matrix(self._axis, self._axis, key))


class DafEmbeddings(_DafMapping):
    """``obsm`` or ``varm`` of a :class:`DafAnnData`: the matrices of one axis (rows) and another one (columns),
    keyed ``"other_axis:matrix_name"``; the other axis must exist and be neither obs nor var (whose matrices are
    ``X``, ``layers``, ``obsp`` and ``varp``). Zero-copy.

    Example:
        >>> import pydaf
        >>> adata = DafAnnData(pydaf.example_chain_daf(), obs_axis="cell", var_axis="gene", x_matrix="UMIs")
        >>> adata.varm_keys(), adata.varm["metacell:fraction"].shape
        (['metacell:fraction'], (683, 7))
    """

    def __init__(self, adata: DafAnnData, axis: str, member: str) -> None:
        super().__init__(adata)
        self._axis = axis
        self.member = member

    def _other_axes(self) -> list[str]:
        primary = {self._adata.obs_axis, self._adata.var_axis}
        return sorted(axis for axis in self._daf.axes_set() if axis not in primary)

    def _names(self) -> set[str]:
        return {f"{other}:{name}" for other in self._other_axes()
                for name in self._daf.matrices_set(self._axis, other)}

    def _parse(self, key: object) -> tuple[str, str]:
        match = _EMBEDDING_KEY.match(key) if isinstance(key, str) else None
        if match is None:
            raise DafKeyError(f"obsm/varm key must be 'other_axis:matrix_name', got {key!r}\nfor {self.member}",
                              daf_name=self._daf.name, hint=f"(its keys: {', '.join(self) or 'none'})")
        other, name = match.group(1), match.group(2)
        if other in (self._adata.obs_axis, self._adata.var_axis):
            raise DafKeyError(f"the axis: {other}\nis a primary axis of the DafAnnData, not an {self.member} axis\n"
                              f"for {self.member}: {key}", daf_name=self._daf.name,
                              hint="(use 'layers', 'obsp' or 'varp' instead)")
        return other, name

    def __contains__(self, key: object) -> bool:
        match = _EMBEDDING_KEY.match(key) if isinstance(key, str) else None
        return match is not None and key in self._names()

    def __getitem__(self, key: str) -> Any:
        other, name = self._parse(key)
        if not self._daf.has_axis(other):
            raise DafKeyError(f"missing axis: {other}\nfor {self.member}: {key}", daf_name=self._daf.name,
                              hint=f"(its keys: {', '.join(self) or 'none'})")
        return _stored_oriented(self._daf, self._axis, other, name)

    def __setitem__(self, key: str, value: Any) -> None:
        other, name = self._parse(key)
        if not self._daf.has_axis(other):
            raise DafKeyError(f"the axis: {other}\ndoes not exist in the Daf data set\nfor {self.member}: {key}",
                              daf_name=self._daf.name,
                              hint=f"(create it before assigning an embedding: add_axis(\"{other}\", entries); "
                                   f"the other axes: {', '.join(self._other_axes()) or 'none'})")
        self._adata._write(f"set the {self.member} matrix: {key}",
                           lambda daf: _store_oriented(daf, self._axis, other, name, value))

    def __delitem__(self, key: str) -> None:
        other, name = self._parse(key)
        self[key]  # the missing-matrix error
        self._adata._write(f"delete the {self.member} matrix: {key}",
                           lambda daf: daf.delete_matrix(self._axis, other, name))


def _selection(daf: DafReader, axis: str, index: Any) -> np.ndarray | None:
    """The Boolean mask of the entries of ``axis`` that ``index`` selects, or ``None`` for all of them."""
    size = daf.axis_length(axis)

    def refuse(problem: str, hint: str | None = None) -> DafIndexError:
        return DafIndexError(f"{problem}\nfor the axis: {axis} ({size} entries)", daf_name=daf.name, hint=hint)

    if index is None or index is Ellipsis:
        return None
    if isinstance(index, slice):
        positions = np.arange(size)[index]
        if index.step is not None and index.step < 0 and len(positions) > 1:
            raise refuse(f"a slice in reverse order: {index}", "(a DafAnnData slice keeps the axis order)")
    elif isinstance(index, (str, np.str_)):
        positions = _positions_of_names(daf, axis, [str(index)])
    elif isinstance(index, (bool, np.bool_)):
        raise refuse(f"unsupported index type: {type(index).__name__}")
    elif isinstance(index, (int, np.integer)):
        if not -size <= int(index) < size:
            raise refuse(f"position out of range: {int(index)}")
        positions = np.array([int(index) % size])
    elif isinstance(index, (list, tuple, np.ndarray, pd.Index, pd.Series)):
        values = np.asarray(index)
        if values.ndim != 1:
            raise refuse(f"an index of {values.ndim} dimensions")
        if values.dtype == bool:
            if len(values) != size:
                raise refuse(f"a Boolean mask of {len(values)} entries")
            return None if values.all() else values.copy()
        if len(values) == 0:
            positions = np.zeros(0, dtype=np.int64)
        elif values.dtype.kind in "iu":
            if values.min() < -size or values.max() >= size:
                raise refuse(f"position out of range: {values.min() if values.min() < -size else values.max()}")
            positions = values.astype(np.int64) % size
        elif values.dtype.kind in "UO" and all(isinstance(value, (str, np.str_)) for value in values):
            positions = _positions_of_names(daf, axis, [str(value) for value in values])
        else:
            raise refuse(f"unsupported index type: {type(index).__name__} of {values.dtype}")
        if np.any(np.diff(positions) <= 0):
            raise refuse("entries out of the axis order (or repeated)",
                         "(a DafAnnData slice is a Daf view, which keeps the axis order: sort the entries, or slice "
                         "an in-memory AnnData: adata.to_memory()[...])")
    else:
        raise refuse(f"unsupported index type: {type(index).__name__}")
    mask = np.zeros(size, dtype=bool)
    mask[positions] = True
    return None if mask.all() else mask


def _positions_of_names(daf: DafReader, axis: str, names: list[str]) -> np.ndarray:
    try:
        return np.asarray(daf.axis_indices(axis, names), dtype=np.int64)
    except DafMissingError as error:
        raise _key_error(error) from None


class DafAnnData:
    """An ``anndata.AnnData``-like facade of a Daf data set (a reader, writer, view or chain), where ``obs_axis`` and
    ``var_axis`` are the observations and variables and ``x_matrix`` (a matrix of the two) is ``X``; see the module
    docstring (:mod:`pydaf.interop.anndata_facade`) for the mapping, the writes and what scanpy can do with it.
    Matrices are the stored arrays (zero-copy, read-only where mapped); nothing is cached in the facade.

    Example:
        >>> import pydaf
        >>> adata = DafAnnData(pydaf.example_cells_daf(), obs_axis="cell", var_axis="gene", x_matrix="UMIs")
        >>> adata.shape, adata.X.dtype, adata.uns["organism"], adata.obs_names[0]
        ((856, 683), dtype('uint8'), 'human', 'demux_07_12_20_1_AACAAGATCCATTTCA-1')
        >>> adata[adata.obs["donor"] == "N89", :].n_obs, adata.query_var("is_lateral").n_vars
        (14, 438)
    """

    def __init__(self, daf: DafReader, *, obs_axis: str, var_axis: str, x_matrix: str) -> None:
        if obs_axis == var_axis:
            raise DafValueError(f"the same axis: {obs_axis}\nfor both obs and var of a DafAnnData",
                                daf_name=daf.name)
        for axis in (obs_axis, var_axis):
            daf.axis_length(axis)  # the missing-axis error, now
        self._daf = daf
        #: The Daf axis of the observations (the rows of ``X``).
        self.obs_axis = obs_axis
        #: The Daf axis of the variables (the columns of ``X``).
        self.var_axis = var_axis
        #: The name of the ``(obs_axis, var_axis)`` matrix that is ``X``.
        self.x_matrix = x_matrix
        self._sliced = False

    # Writes.

    def _role(self, axis: str) -> str:
        return "obs" if axis == self.obs_axis else "var" if axis == self.var_axis else axis

    def _write(self, what: str, write: Callable[[Any], Any]) -> None:
        """Run ``write`` on the data set; through a read-only one, a :class:`~pydaf.DafReadOnlyError` saying what was
        being written and how to write it."""
        try:
            write(self._daf)
        except DafReadOnlyError as error:
            hint = ("(a slice or query of a DafAnnData is a read-only Daf view: write through the DafAnnData it was "
                    "taken from, or use adata.copy() for a writable anndata.AnnData)" if self._sliced else None)
            # Keep the data set's own advice (how to open it for writing), which follows the first line of its problem.
            advice = [*error.problem.split("\n")[1:], error.hint, hint]
            hints = "\n".join(line for line in advice if line)
            raise DafReadOnlyError(f"can't {what}\nthrough the DafAnnData: the daf data is read-only (a DafReadOnly)",
                                   daf_name=self._daf.name, hint=hints or None) from None

    # The data set.

    @property
    def daf(self) -> DafReader:
        """The data set this facade shows."""
        return self._daf

    @property
    def is_read_only(self) -> bool:
        """Whether writes through the facade are refused (a read-only data set, a view, a slice)."""
        return isinstance(self._daf, DafReadOnly)

    @property
    def is_view(self) -> bool:
        """``False``: not an anndata view (there is no copy-on-write: a slice is a read-only Daf view, whose writes
        raise). scanpy's ``view_to_actual`` therefore leaves a ``DafAnnData`` as it is."""
        return False

    @property
    def isbacked(self) -> bool:
        """``False``: not anndata's backed mode (the data set is read on each access, mapped where it can be)."""
        return False

    @property
    def raw(self) -> None:
        """``None``: a ``DafAnnData`` has no ``raw``."""
        return None

    # Shape and names.

    @property
    def n_obs(self) -> int:
        """The number of observations (entries of ``obs_axis``)."""
        return self._daf.axis_length(self.obs_axis)

    @property
    def n_vars(self) -> int:
        """The number of variables (entries of ``var_axis``)."""
        return self._daf.axis_length(self.var_axis)

    @property
    def shape(self) -> tuple[int, int]:
        """``(n_obs, n_vars)``."""
        return self.n_obs, self.n_vars

    def __len__(self) -> int:
        return self.n_obs

    @property
    def obs_names(self) -> pd.Index:
        """The entries of ``obs_axis`` (read-only: Daf axis entries are not renamed through the facade)."""
        return pd.Index(self._daf.axis_vector(self.obs_axis), name=self.obs_axis)

    @property
    def var_names(self) -> pd.Index:
        """The entries of ``var_axis`` (read-only)."""
        return pd.Index(self._daf.axis_vector(self.var_axis), name=self.var_axis)

    # Data.

    @property
    def X(self) -> Any:
        """The ``(n_obs, n_vars)`` matrix ``x_matrix``: the stored arrays (see the module docstring)."""
        return _stored_oriented(self._daf, self.obs_axis, self.var_axis, self.x_matrix)

    @X.setter
    def X(self, value: Any) -> None:
        self._write(f"set X (the matrix: {self.x_matrix})",
                    lambda daf: _store_oriented(daf, self.obs_axis, self.var_axis, self.x_matrix, value))

    @property
    def obs(self) -> DafAxisFrame:
        """The vectors of ``obs_axis`` (:class:`DafAxisFrame`)."""
        return DafAxisFrame(self, self.obs_axis)

    @obs.setter
    def obs(self, frame: pd.DataFrame) -> None:
        # Sets (overwrites) the frame's columns; the other vectors stay (nothing is deleted by an assignment).
        for name in frame.columns:
            self.obs[name] = frame[name]

    @property
    def var(self) -> DafAxisFrame:
        """The vectors of ``var_axis`` (:class:`DafAxisFrame`)."""
        return DafAxisFrame(self, self.var_axis)

    @var.setter
    def var(self, frame: pd.DataFrame) -> None:
        for name in frame.columns:
            self.var[name] = frame[name]

    @property
    def layers(self) -> DafLayers:
        """The other ``(obs, var)`` matrices (:class:`DafLayers`)."""
        return DafLayers(self)

    @layers.setter
    def layers(self, value: Mapping[str, Any]) -> None:
        layers = self.layers
        for name, matrix in value.items():
            layers[name] = matrix

    @property
    def uns(self) -> DafUns:
        """The scalars (:class:`DafUns`)."""
        return DafUns(self)

    @uns.setter
    def uns(self, value: Mapping[str, Any]) -> None:
        self.uns.update(value)  # sets these scalars; the others stay

    @property
    def obsp(self) -> DafPairwise:
        """The square matrices of ``obs_axis`` (:class:`DafPairwise`)."""
        return DafPairwise(self, self.obs_axis, "obsp")

    @property
    def varp(self) -> DafPairwise:
        """The square matrices of ``var_axis`` (:class:`DafPairwise`)."""
        return DafPairwise(self, self.var_axis, "varp")

    @property
    def obsm(self) -> DafEmbeddings:
        """The matrices of ``obs_axis`` and another axis, keyed ``"other_axis:name"`` (:class:`DafEmbeddings`)."""
        return DafEmbeddings(self, self.obs_axis, "obsm")

    @property
    def varm(self) -> DafEmbeddings:
        """The matrices of ``var_axis`` and another axis, keyed ``"other_axis:name"`` (:class:`DafEmbeddings`)."""
        return DafEmbeddings(self, self.var_axis, "varm")

    def obs_keys(self) -> list[str]:
        """The names of the obs columns."""
        return list(self.obs)

    def var_keys(self) -> list[str]:
        """The names of the var columns."""
        return list(self.var)

    def obsm_keys(self) -> list[str]:
        """The keys of ``obsm``."""
        return list(self.obsm)

    def varm_keys(self) -> list[str]:
        """The keys of ``varm``."""
        return list(self.varm)

    def uns_keys(self) -> list[str]:
        """The keys of ``uns``."""
        return list(self.uns)

    def to_df(self, layer: str | None = None) -> pd.DataFrame:
        """``X`` (or the layer ``layer``) as a ``pandas.DataFrame`` indexed by ``obs_names`` with ``var_names`` as
        columns: dense data shared, sparse data densified (as anndata's ``to_df`` does; mind the size)."""
        matrix = self.X if layer is None else self.layers[layer]
        if sp.issparse(matrix):
            matrix = matrix.toarray()
        return pd.DataFrame(matrix, index=self.obs_names, columns=self.var_names, copy=False)

    def obs_vector(self, key: str, *, layer: str | None = None) -> np.ndarray:
        """The obs column ``key``, or the values of the variable ``key`` in ``X`` (or ``layer``) over the obs."""
        if key in self.obs:
            return np.asarray(self._daf.get_vector(self.obs_axis, key))
        return self._matrix_line(key, self.var_names, layer, axis=1)

    def var_vector(self, key: str, *, layer: str | None = None) -> np.ndarray:
        """The var column ``key``, or the values of the observation ``key`` in ``X`` (or ``layer``) over the vars."""
        if key in self.var:
            return np.asarray(self._daf.get_vector(self.var_axis, key))
        return self._matrix_line(key, self.obs_names, layer, axis=0)

    def _matrix_line(self, key: str, names: pd.Index, layer: str | None, *, axis: int) -> np.ndarray:
        matrix = self.X if layer is None else self.layers[layer]
        position = _positions_of_names(self._daf, self.var_axis if axis == 1 else self.obs_axis, [key])[0]
        line = matrix[:, position] if axis == 1 else matrix[position, :]
        return np.ravel(line.toarray() if sp.issparse(line) else line)

    # Subsets.

    def _over(self, daf: DafReader, *, obs_axis: str | None = None, var_axis: str | None = None) -> DafAnnData:
        # (type(self): a subclass's slices are of the subclass, e.g. dafpy's, whose data set is a dafpy wrapper)
        result = type(self)(daf, obs_axis=obs_axis or self.obs_axis, var_axis=var_axis or self.var_axis,
                            x_matrix=self.x_matrix)
        result._sliced = True
        return result

    def __getitem__(self, index: Any) -> DafAnnData:
        """``adata[obs_index, var_index]``: a read-only ``DafAnnData`` of the selected entries (a Daf view)."""
        if not isinstance(index, tuple) or len(index) != 2:
            raise DafIndexError("DafAnnData slicing requires two indices: adata[obs_index, var_index]",
                                daf_name=self._daf.name, hint="(use adata[obs_index, :] to select observations)")
        masks = {axis: _selection(self._daf, axis, axis_index)
                 for axis, axis_index in zip((self.obs_axis, self.var_axis), index, strict=True)}
        masks = {axis: mask for axis, mask in masks.items() if mask is not None}
        if not masks:
            return self._over(self._daf.read_only(name=f"{self._daf.name}.sliced"))
        chain = chain_writer([self._daf, MemoryDaf(name=f"{self._daf.name}.mask")], name=f"{self._daf.name}.masked")
        for axis, mask in masks.items():
            chain.set_vector(axis, MASK_NAME, mask)
        axes = [VIEW_ALL_AXES, *((axis, f"@ {escape_value(axis)} [ {MASK_NAME} ]") for axis in masks)]
        data = [*VIEW_ALL_DATA, *(((axis, MASK_NAME), None) for axis in masks)]
        return self._over(viewer(chain, name=f"{self._daf.name}.sliced", axes=axes, data=data))

    def query_obs(self, query_fragment: str) -> DafAnnData:
        """A read-only ``DafAnnData`` of the observations a Daf mask selects: what fits between ``[`` and ``]`` in
        ``@ obs_axis [ … ]`` (``donor = N89 & age > 30``)."""
        return self._query(self.obs_axis, query_fragment)

    def query_var(self, query_fragment: str) -> DafAnnData:
        """A read-only ``DafAnnData`` of the variables a Daf mask selects (``is_lateral``, ``! is_marker``)."""
        return self._query(self.var_axis, query_fragment)

    def _query(self, axis: str, query_fragment: str) -> DafAnnData:
        query = f"@ {escape_value(axis)} [ {query_fragment} ]"
        return self._over(viewer(self._daf, name=f"{self._daf.name}.{self._role(axis)}_query",
                                 axes=[VIEW_ALL_AXES, (axis, query)]))

    @property
    def T(self) -> DafAnnData:
        """The same data set with obs and var swapped (no copy)."""
        result = type(self)(self._daf, obs_axis=self.var_axis, var_axis=self.obs_axis, x_matrix=self.x_matrix)
        result._sliced = self._sliced
        return result

    def transpose(self) -> DafAnnData:
        """:attr:`T`."""
        return self.T

    # Real AnnData objects.

    def to_memory(self, copy: bool = False) -> Any:
        """An ``anndata.AnnData`` of the same data (:func:`pydaf.interop.daf_as_anndata`): by default sharing the
        stored arrays (read-only where mapped; sparse indices are copied, being 0-based in scipy), for scanpy steps
        that need an AnnData and write their results into it; with ``copy``, a writable copy."""
        from .anndata import daf_as_anndata

        return daf_as_anndata(self._daf, obs_is=self.obs_axis, var_is=self.var_axis, X_is=self.x_matrix, copy=copy)

    def copy(self) -> Any:
        """A writable in-memory ``anndata.AnnData`` of the same data (``to_memory(copy=True)``)."""
        return self.to_memory(copy=True)

    def __repr__(self) -> str:
        lines = [f"DafAnnData object with n_obs × n_vars = {self.n_obs} × {self.n_vars}",
                 f"    over the daf data: {self._daf.name} (obs: {self.obs_axis}, var: {self.var_axis}, "
                 f"X: {self.x_matrix})"]
        for member in ("obs", "var", "uns", "obsm", "varm", "layers", "obsp", "varp"):
            keys = list(getattr(self, member))
            if keys:
                lines.append(f"    {member}: {', '.join(repr(key) for key in keys)}")
        return "\n".join(lines)
