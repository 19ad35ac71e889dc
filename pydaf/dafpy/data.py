"""dafpy's ``DafReader``, ``DafReadOnly`` and ``DafWriter``: thin wrappers of a pydaf data set with dafpy's method
names, arguments and return forms.

A wrapper holds a pydaf data set (its :attr:`DafReader.daf`) and forwards each call to it; what differs is only the
convention: ``None`` for an option means "the default", vectors and matrices come back as numpy (``get_np_*``) or
pandas (``get_pd_*``) without axis names on the index, strings as numpy ``str`` arrays, scalars as Python ``int``,
``float``, ``bool`` or ``str``, indices as ``int32`` (``int64`` for axes longer than ``int32`` can count), and a
matrix given to ``set_matrix`` must be column-major (as dafpy requires: flip the axes and pass the ``transpose``).

Where dafpy copies, pydaf does not: a dense numeric vector or matrix is pydaf's own read-only array (a zero-copy view
of a mapped file), and a sparse matrix in a pandas frame stays sparse (a ``DataFrame`` of sparse columns) instead of
being made dense.

Example:
    >>> import numpy as np
    >>> from pydaf.dafpy import memory_daf
    >>> daf = memory_daf(name="example!").add_axis("cell", ["A", "B"]).add_axis("gene", ["X", "Y", "Z"])
    >>> daf = daf.set_vector("cell", "age", np.array([[30, 40]])).set_scalar("organism", "human")
    >>> daf.get_scalar("organism"), daf.get_np_vector("cell", "age").tolist()
    ('human', [30, 40])
    >>> daf.get_np_vector("cell", "x", default=None) is None
    True
    >>> daf.get_pd_vector("cell", "age")
    A    30
    B    40
    dtype: int64
    >>> with daf.empty_dense_matrix("cell", "gene", "UMIs", np.int32) as umis:
    ...     umis[:, :] = [[1, 2, 3], [4, 5, 6]]
    >>> daf.get_pd_frame("cell")
      name  age
    0    A   30
    1    B   40
    >>> daf["@ cell @ gene :: UMIs >| Sum"].tolist(), daf.daf.name
    ([6, 15], 'example!')
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence, Set
from contextlib import contextmanager
from typing import Any
from weakref import WeakValueDictionary

import numpy as np
import pandas as pd
import scipy.sparse as sp

from ..abc.format import CacheGroup
from ..core.brief import brief
from ..core.readers import DafReader as PydafReader
from ..core.undef import Undef
from ..core.writers import DafWriter as PydafWriter
from ..errors import DafTypeError
from ..interop.anndata_facade import DafAnnData as PydafAnnData
from .julia_import import _given
from .operations import PendingNumpyQuery, PendingPandasQuery
from .storage_types import StorageScalar

__all__ = ["CacheGroup", "DafReadOnly", "DafReader", "DafWriter"]  # (DafAnnData: from .anndata_facade)

#: A key of a property: a scalar name, ``(axis, name)`` of a vector or ``(rows_axis, columns_axis, name)`` of a
#: matrix (Julia's ``PropertyKey``).
PropertyKey = str | tuple[str, str] | tuple[str, str, str]

#: A key of any data, tensors included (Julia's ``DataKey``).
DataKey = PropertyKey | tuple[str, str, str, str]

# The largest axis whose positions dafpy's ``int32`` indices hold exactly.
_INT32_LIMIT = 2**31 - 1


def python_scalar(value: Any) -> Any:
    """A numpy scalar as the Python ``bool``/``int``/``float``/``str`` dafpy returns; anything else as is.

    Example:
        >>> python_scalar(np.uint8(3)), python_scalar(np.str_("x")), python_scalar([1])
        (3, 'x', [1])
    """
    if isinstance(value, np.generic):
        return value.item()
    return value


def numpy_strings(array: Any) -> Any:
    """A numpy array of strings as dafpy returns it (``dtype=str``); numbers and sparse matrices as they are.

    Example:
        >>> numpy_strings(np.array(["a", "bc"], dtype=object)).dtype
        dtype('<U2')
    """
    if isinstance(array, np.ndarray) and array.dtype == object:
        strings = np.array(array, dtype=str)
        strings.flags.writeable = False
        return strings
    return array


def _plain_pandas(value: Any) -> Any:
    """A query's pandas result without the axis names pydaf puts on its index and columns (as dafpy returns it)."""
    if isinstance(value, pd.Series):
        return pd.Series(numpy_strings(value.to_numpy()), index=pd.Index(np.asarray(value.index, dtype=str)),
                         copy=False)
    if isinstance(value, pd.DataFrame):
        frame = value.copy(deep=False)
        frame.index = pd.Index(np.asarray(value.index, dtype=str))
        frame.columns = pd.Index(np.asarray(value.columns, dtype=str))
        return frame
    return python_scalar(value)


def unwrap(daf: Any) -> Any:
    """The pydaf data set of a dafpy wrapper (anything else as is): what this layer passes to pydaf.

    Example:
        >>> from pydaf.dafpy import memory_daf
        >>> type(unwrap(memory_daf())).__name__
        'MemoryDaf'
    """
    return daf.daf if isinstance(daf, DafReader) else daf


def wrap(daf: PydafReader) -> DafReadOnly | DafWriter:
    """A pydaf data set as dafpy's class for it: a :class:`DafWriter` if it is writable, else a :class:`DafReadOnly`.

    Example:
        >>> import pydaf
        >>> type(wrap(pydaf.MemoryDaf())).__name__, type(wrap(pydaf.MemoryDaf().read_only())).__name__
        ('DafWriter', 'DafReadOnly')
    """
    if isinstance(daf, PydafWriter):
        return DafWriter(daf)
    return DafReadOnly(daf)


class DafReader:
    """Read access to a Daf data set (dafpy's ``DafReader``), over a pydaf data set.

    Example:
        >>> import pydaf
        >>> from pydaf.dafpy import DafReader
        >>> reader = DafReader(pydaf.example_cells_daf())
        >>> reader.name, reader.axis_length("donor"), reader.get_scalar("organism")
        ('cells!', 95, 'human')
    """

    def __init__(self, daf: PydafReader) -> None:
        if isinstance(daf, DafReader):
            daf = daf.daf
        if not isinstance(daf, PydafReader):
            raise TypeError(f"not a pydaf data set: {daf!r}")
        self._pydaf = daf
        self.weakrefs: WeakValueDictionary[Any, Any] = WeakValueDictionary()

    @property
    def daf(self) -> PydafReader:
        """The pydaf data set this wraps (what pydaf's own functions take)."""
        return self._pydaf

    @property
    def name(self) -> str:
        """The (hopefully unique) name of the data set."""
        return self._pydaf.name

    def __str__(self) -> str:
        return repr(self._pydaf)

    def __repr__(self) -> str:
        return repr(self._pydaf)

    def description(self, *, cache: bool | None = None, deep: bool | None = None, tensors: bool | None = None) -> str:
        """The (multi-line) description of the data set, Julia's text."""
        return self._pydaf.description(**_given(cache=cache, deep=deep, tensors=tensors))

    # Scalars.

    def has_scalar(self, name: str) -> bool:
        """Whether the data set has a scalar of this name."""
        return self._pydaf.has_scalar(name)

    def get_scalar(self, name: str) -> StorageScalar:
        """The value of a scalar, a Python ``bool``/``int``/``float``/``str`` whatever type it is stored in."""
        return python_scalar(self._pydaf.get_scalar(name))

    def scalars_set(self) -> Set[str]:
        """The names of the scalars."""
        return self._pydaf.scalars_set()

    # Axes.

    def has_axis(self, axis: str) -> bool:
        """Whether the data set has this axis."""
        return self._pydaf.has_axis(axis)

    def axes_set(self) -> Set[str]:
        """The names of the axes."""
        return self._pydaf.axes_set()

    def axis_length(self, axis: str) -> int:
        """The number of entries of an axis."""
        return self._pydaf.axis_length(axis)

    def _remembered(self, key: tuple, compute: Any) -> Any:
        """A value kept while the caller holds it, for as long as the version counter in ``key`` is unchanged (so a
        repeated call returns the same object, as dafpy's)."""
        value = self.weakrefs.get(key)
        if value is None:
            value = compute()
            self.weakrefs[key] = value
        return value

    def axis_np_vector(self, axis: str) -> np.ndarray:
        """The entries of an axis, a numpy ``str`` array."""
        return self._remembered((self._pydaf.axis_version_counter(axis), axis, True),
                                lambda: numpy_strings(self._pydaf.axis_vector(axis)))

    def axis_np_entries(self, axis: str, indices: Sequence[int] | np.ndarray | None = None, *,
                        allow_empty: bool = False) -> np.ndarray:
        """The entries at 0-based ``indices`` (all when ``None``); with ``allow_empty``, a negative index gives
        ``""``."""
        if indices is None:
            return self.axis_np_vector(axis)
        return numpy_strings(self._pydaf.axis_entries(axis, np.asarray(list(indices) if isinstance(indices, range)
                                                                        else indices), allow_empty=allow_empty))

    def axis_dict(self, axis: str) -> Mapping[str, int]:
        """A read-only mapping from the entries of an axis to their 0-based positions (pydaf's, cached)."""
        return self._pydaf.axis_dict(axis)

    def axis_np_indices(self, axis: str, entries: Sequence[str], *, allow_empty: bool = False) -> np.ndarray:
        """The 0-based positions of ``entries`` (``int32``); with ``allow_empty``, ``""`` gives ``-1``."""
        indices = self._pydaf.axis_indices(axis, entries, allow_empty=allow_empty)
        if self._pydaf.axis_length(axis) <= _INT32_LIMIT:
            indices = indices.astype(np.int32)
        return indices

    def axis_pd_indices(self, axis: str, entries: Sequence[str], *, allow_empty: bool = False) -> pd.Series:
        """:meth:`axis_np_indices` as a ``pandas.Series`` indexed by the ``entries``."""
        return pd.Series(self.axis_np_indices(axis, entries, allow_empty=allow_empty), index=np.array(entries),
                         copy=False)

    # Vectors.

    def has_vector(self, axis: str, name: str) -> bool:
        """Whether the axis has a vector of this name."""
        return self._pydaf.has_vector(axis, name)

    def vectors_set(self, axis: str) -> Set[str]:
        """The names of the vectors of an axis (not ``name``)."""
        return self._pydaf.vectors_set(axis)

    def get_np_vector(self, axis: str, name: str, *, default: Any = Undef) -> np.ndarray | None:
        """A vector as a numpy array (dense; zero-copy for stored numbers; ``str`` for strings). A missing vector is
        ``default`` (a scalar or values to use; ``None``: return ``None``); by default it is an error."""
        if not self._pydaf.has_vector(axis, name):
            return numpy_strings(self._pydaf.get_vector(axis, name, default=default))
        return self._remembered((self._pydaf.vector_version_counter(axis, name), axis, name),
                                lambda: numpy_strings(self._pydaf.get_vector(axis, name)))

    def get_pd_vector(self, axis: str, name: str, *, default: Any = Undef) -> pd.Series | None:
        """:meth:`get_np_vector` as a ``pandas.Series`` indexed by the axis entries."""
        vector = self.get_np_vector(axis, name, default=default)
        if vector is None:
            return None
        return pd.Series(vector, index=self.axis_np_vector(axis), copy=False)

    # Matrices.

    def has_matrix(self, rows_axis: str, columns_axis: str, name: str, *, relayout: bool | None = None) -> bool:
        """Whether the axes have a matrix of this name (in either layout unless ``relayout=False``)."""
        return self._pydaf.has_matrix(rows_axis, columns_axis, name, **_given(relayout=relayout))

    def matrices_set(self, rows_axis: str, columns_axis: str, *, relayout: bool | None = None) -> Set[str]:
        """The names of the matrices of the axes (in either layout unless ``relayout=False``)."""
        return self._pydaf.matrices_set(rows_axis, columns_axis, **_given(relayout=relayout))

    def get_np_matrix(self, rows_axis: str, columns_axis: str, name: str, *, default: Any = Undef,
                      relayout: bool | None = None) -> np.ndarray | sp.csc_matrix | None:
        """A matrix, column-major: a numpy array (zero-copy where stored) or a ``scipy.sparse.csc_matrix``. A missing
        matrix is ``default`` (a scalar, or a matrix returned as given; ``None``: return ``None``)."""
        options = _given(relayout=relayout)
        if not self._pydaf.has_matrix(rows_axis, columns_axis, name, **options):
            matrix = self._pydaf.get_matrix(rows_axis, columns_axis, name, default=default, **options)
            if isinstance(default, np.ndarray | sp.spmatrix) and matrix is not None:
                return default  # Julia returns the given default itself (after checking its shape).
            return numpy_strings(matrix)
        return self._remembered((self._pydaf.matrix_version_counter(rows_axis, columns_axis, name), rows_axis,
                                 columns_axis, name),
                                lambda: numpy_strings(self._pydaf.get_matrix(rows_axis, columns_axis, name,
                                                                             **options)))

    def get_pd_matrix(self, rows_axis: str, columns_axis: str, name: str, *, default: Any = Undef,
                      relayout: bool | None = None) -> pd.DataFrame | None:
        """:meth:`get_np_matrix` as a ``pandas.DataFrame`` indexed by the entries of the axes (a sparse matrix as
        sparse columns, not made dense)."""
        matrix = self.get_np_matrix(rows_axis, columns_axis, name, default=default, relayout=relayout)
        if matrix is None:
            return None
        index, columns = self.axis_np_vector(rows_axis), self.axis_np_vector(columns_axis)
        if sp.issparse(matrix):
            return pd.DataFrame.sparse.from_spmatrix(matrix, index=index, columns=columns)
        return pd.DataFrame(matrix, index=index, columns=columns, copy=False)

    # Cache.

    def empty_cache(self, *, clear: CacheGroup | None = None, keep: CacheGroup | None = None) -> None:
        """Empty the cache (only the ``clear`` group, or all but the ``keep`` group)."""
        self._pydaf.empty_cache(clear=clear, keep=keep)

    # Queries.

    def has_query(self, query: Any) -> bool:
        """Whether the query can be applied to the data set."""
        return self._pydaf.has_query(query)

    def query_requires_relayout(self, query: Any) -> bool:
        """Whether computing the query needs a matrix in the layout that is not stored."""
        return self._pydaf.query_requires_relayout(query)

    def get_np_query(self, query: Any = None, *, cache: bool | None = None) -> Any:
        """Apply a query: names as a set, a scalar as a Python value, a vector as a numpy array, a matrix as a
        column-major numpy array or ``csc_matrix``. Without a query, something to pipe one into
        (``query | daf.get_np_query()``)."""
        if query is None:
            return PendingNumpyQuery(lambda query: self.get_np_query(query, cache=cache))
        result = self._pydaf.get_np_query(query, **_given(cache=cache))
        return python_scalar(numpy_strings(result))

    def get_pd_query(self, query: Any = None, *, cache: bool | None = None) -> Any:
        """As :meth:`get_np_query`, but a vector as a ``pandas.Series`` and a matrix as a ``pandas.DataFrame``,
        indexed by entry names (a sparse matrix as sparse columns)."""
        if query is None:
            return PendingPandasQuery(lambda query: self.get_pd_query(query, cache=cache))
        return _plain_pandas(self._pydaf.get_query(query, **_given(cache=cache)))

    def __getitem__(self, query: Any) -> Any:
        """``daf[query]`` is ``daf.get_pd_query(query, cache=False)``."""
        return self.get_pd_query(query, cache=False)

    def get_pd_frame(self, axis: Any, columns: Any = None, *, cache: bool | None = None) -> pd.DataFrame:
        """A ``pandas.DataFrame`` with a row per entry of ``axis`` (an axis name or query) and a column per vector
        (vector names, ``(name, query)`` pairs or a ``{name: query}`` dict; by default ``name`` and every vector),
        with a plain ``RangeIndex`` (the entries are the ``name`` column)."""
        frame = self._pydaf.get_frame(axis, columns, **_given(cache=cache)).reset_index(drop=True)
        frame.columns = pd.Index(list(frame.columns))
        for column in frame.columns:
            values = frame[column].to_numpy()
            if values.dtype == object:
                frame[column] = numpy_strings(values)
        return frame

    get_frame = get_pd_frame

    # Wrappers.

    def read_only(self, *, name: str | None = None) -> DafReadOnly:
        """A read-only view of the data set (under a new ``name`` if given)."""
        return DafReadOnly(self._pydaf.read_only(name=name))

    def as_anndata(self, *, obs_axis: str, var_axis: str, x_matrix: str) -> DafAnnData:
        """This data set as an ``AnnData``-like object, without copying (see :class:`pydaf.dafpy.DafAnnData`)."""
        return DafAnnData(self, obs_axis=obs_axis, var_axis=var_axis, x_matrix=x_matrix)

    def complete_path(self) -> str | None:
        """The absolute path of a persistent data set, or ``None``."""
        return self._pydaf.complete_path()


class DafReadOnly(DafReader):
    """A read-only data set (dafpy's ``DafReadOnly``).

    Example:
        >>> from pydaf.dafpy import memory_daf
        >>> frozen = memory_daf(name="example!").read_only()
        >>> frozen.read_only() is frozen, frozen.read_only(name="renamed").name
        (True, 'renamed')
    """

    def read_only(self, *, name: str | None = None) -> DafReadOnly:
        if name is None:
            return self
        return super().read_only(name=name)


def _require_column_major(matrix: Any, *, daf_name: str) -> None:
    """dafpy passes matrices to Julia as they are, and Julia takes only column-major ones (Julia's
    ``require_column_major``): a CSR matrix or a row-major (C-order) 2-D array is refused, with Julia's message."""
    if sp.issparse(matrix):
        row_major = matrix.format != "csc"
    elif isinstance(matrix, np.ndarray) and matrix.ndim == 2:
        row_major = not matrix.flags.f_contiguous and min(matrix.shape) > 1
    else:
        return
    if row_major:
        raise DafTypeError(f"type not in column-major layout: {brief(matrix)}", daf_name=daf_name,
                           hint="(flip the axes and pass the transpose: a zero-copy column-major view)")


class DafWriter(DafReader):
    """Read and write access to a Daf data set (dafpy's ``DafWriter``); its setters return ``self`` for chaining.

    Example:
        >>> from pydaf.dafpy import memory_daf
        >>> daf = memory_daf(name="example!").add_axis("cell", ["A", "B"])
        >>> with daf.empty_sparse_vector("cell", "x", np.float32, 1, np.int32) as (nzind, nzval):
        ...     nzind[0], nzval[0] = 2, 0.5
        >>> daf.get_np_vector("cell", "x").tolist()
        [0.0, 0.5]
    """

    def __init__(self, daf: PydafWriter) -> None:
        super().__init__(daf)
        if not isinstance(self.daf, PydafWriter):
            raise TypeError(f"not a writable pydaf data set: {daf!r}")

    @property
    def daf(self) -> PydafWriter:
        """The pydaf data set this wraps."""
        return self._pydaf  # type: ignore[return-value]

    def set_scalar(self, name: str, value: StorageScalar, *, overwrite: bool | None = None) -> DafWriter:
        """Set a scalar (a numpy scalar keeps its type: ``np.uint8(1)`` is stored as ``UInt8``)."""
        self._pydaf.set_scalar(name, value, **_given(overwrite=overwrite))
        return self

    def delete_scalar(self, name: str, *, must_exist: bool = True) -> DafWriter:
        """Delete a scalar."""
        self._pydaf.delete_scalar(name, must_exist=must_exist)
        return self

    def add_axis(self, axis: str, entries: Sequence[str] | np.ndarray, *, overwrite: bool | None = None) -> DafWriter:
        """Add an axis with these (unique) entries."""
        self._pydaf.add_axis(axis, entries, **_given(overwrite=overwrite))
        return self

    def delete_axis(self, axis: str, *, must_exist: bool = True) -> DafWriter:
        """Delete an axis and every vector and matrix of it."""
        self._pydaf.delete_axis(axis, must_exist=must_exist)
        return self

    def set_vector(self, axis: str, name: str, value: Any, *, overwrite: bool | None = None) -> DafWriter:
        """Set a vector: values (a 1 x N or N x 1 array is taken as a vector) or a 1 x N / N x 1 sparse matrix
        (stored sparse)."""
        if isinstance(value, np.ndarray) and value.ndim == 2 and 1 in value.shape:
            value = value.reshape(-1)
        self._pydaf.set_vector(axis, name, value, **_given(overwrite=overwrite))
        return self

    @contextmanager
    def empty_dense_vector(self, axis: str, name: str, eltype: Any, *,
                           overwrite: bool | None = None) -> Iterator[np.ndarray]:
        """``with daf.empty_dense_vector(...) as vector:`` fill a new dense vector in place."""
        with self._pydaf.empty_dense_vector(axis, name, eltype, **_given(overwrite=overwrite)) as vector:
            yield vector

    @contextmanager
    def empty_sparse_vector(self, axis: str, name: str, eltype: Any, nnz: int, indtype: Any, *,
                            overwrite: bool | None = None) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """``with daf.empty_sparse_vector(...) as (nzind, nzval):`` fill a new sparse vector in place (``nzind``
        1-based, as Julia's)."""
        with self._pydaf.empty_sparse_vector(axis, name, eltype, nnz, indtype,
                                             **_given(overwrite=overwrite)) as buffers:
            yield buffers

    def delete_vector(self, axis: str, name: str, *, must_exist: bool = True) -> DafWriter:
        """Delete a vector."""
        self._pydaf.delete_vector(axis, name, must_exist=must_exist)
        return self

    def set_matrix(self, rows_axis: str, columns_axis: str, name: str, value: Any, *, overwrite: bool | None = None,
                   relayout: bool | None = None) -> DafWriter:
        """Set a matrix: a column-major numpy array or a ``csc_matrix`` (for a row-major one, flip the axes and pass
        the ``transpose``), or a scalar to fill it with."""
        _require_column_major(value, daf_name=self.name)
        self._pydaf.set_matrix(rows_axis, columns_axis, name, value, **_given(overwrite=overwrite, relayout=relayout))
        return self

    @contextmanager
    def empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str, eltype: Any, *,
                           overwrite: bool | None = None) -> Iterator[np.ndarray]:
        """``with daf.empty_dense_matrix(...) as matrix:`` fill a new (column-major) dense matrix in place."""
        with self._pydaf.empty_dense_matrix(rows_axis, columns_axis, name, eltype,
                                            **_given(overwrite=overwrite)) as matrix:
            yield matrix

    @contextmanager
    def empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, eltype: Any, nnz: int, indtype: Any,
                            *, overwrite: bool | None = None) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """``with daf.empty_sparse_matrix(...) as (colptr, rowval, nzval):`` fill a new CSC matrix in place
        (``colptr`` and ``rowval`` 1-based, as Julia's)."""
        with self._pydaf.empty_sparse_matrix(rows_axis, columns_axis, name, eltype, nnz, indtype,
                                             **_given(overwrite=overwrite)) as buffers:
            yield buffers

    def relayout_matrix(self, rows_axis: str, columns_axis: str, name: str, *,
                        overwrite: bool | None = None) -> DafWriter:
        """Store the other layout of a matrix too."""
        self._pydaf.relayout_matrix(rows_axis, columns_axis, name, **_given(overwrite=overwrite))
        return self

    def delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, must_exist: bool = True) -> DafWriter:
        """Delete a matrix (both layouts)."""
        self._pydaf.delete_matrix(rows_axis, columns_axis, name, must_exist=must_exist)
        return self


class DafAnnData(PydafAnnData):
    """pydaf's :class:`~pydaf.interop.DafAnnData` of a dafpy data set (or of a pydaf one), whose ``daf`` is the data
    set it was given, as dafpy's is (exported by :mod:`pydaf.dafpy.anndata_facade`).

    Example:
        >>> from pydaf.dafpy import example_cells_daf
        >>> cells = example_cells_daf()
        >>> adata = DafAnnData(cells, obs_axis="cell", var_axis="gene", x_matrix="UMIs")
        >>> adata.shape, adata.daf is cells, cells.as_anndata(obs_axis="cell", var_axis="gene", x_matrix="UMIs").n_obs
        ((856, 683), True, 856)
    """

    def __init__(self, daf: Any, *, obs_axis: str, var_axis: str, x_matrix: str) -> None:
        super().__init__(unwrap(daf), obs_axis=obs_axis, var_axis=var_axis, x_matrix=x_matrix)
        self._dafpy_daf = daf if isinstance(daf, DafReader) else wrap(daf)

    @property
    def daf(self) -> DafReader:  # type: ignore[override]
        """The dafpy data set this facade shows."""
        return self._dafpy_daf
