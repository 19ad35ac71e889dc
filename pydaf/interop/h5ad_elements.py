"""Reading the elements of an ``.h5ad`` file with h5py, by dispatch on ``encoding-type`` / ``encoding-version``.

Each reader turns one HDF5 element into a plain Python value: a :class:`Column` (a vector, with a mask of missing
entries for nullable encodings), a :class:`MatrixSource` (a dense dataset or the three arrays of a CSR/CSC matrix, read
lazily in slices so large matrices stream), a scalar, a ``dict`` of elements, or an :class:`Unsupported` element that
Daf cannot hold. Legacy files (anndata ≤ 0.7) without encoding attributes are recognised by their shape: plain
datasets, ``h5sparse_format`` groups, dataframes with a ``__categories`` subgroup or ``categories`` object references,
dataframes stored as one compound dataset (anndata < 0.7: a field per column, the first is the index), and groups
without attributes as dicts.

Files are assumed hostile: whatever a reader raises on a damaged element (a missing member, an attribute of the wrong
type, undecodable text, a truncated dataset, category codes or a mask that don't fit) becomes a
:class:`~pydaf.DafFormatError` naming the element and the file (:func:`read_guarded`).

Example:
    >>> READERS[("csr_matrix", "0.1.0")].__name__, READERS[("dataframe", "0.2.0")].__name__
    ('read_csr', 'read_dataframe')
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h5py
import numpy as np

from ..errors import DafError, DafFormatError

__all__ = ["READERS", "Column", "MatrixSource", "Unsupported", "categorical_column", "compound_fields",
           "legacy_string_scalar", "nullable_name", "read_compound_dataframe", "read_element", "read_guarded", "reads",
           "require_stored_size"]


@dataclass
class Column:
    """A vector: numbers, bools or strings (``object`` array), with ``missing`` marking the null entries (if any).
    A categorical column holds its labels (``""`` where missing) and its ``categories`` (strings, in their order)
    and whether they are ``ordered``; a column of one of pandas' nullable types names it in ``nullable``
    (``"Int64"``, ``"UInt8"``, …, ``"boolean"``, ``"string"``), its missing entries holding ``0``/``False``/``""``.
    ``note`` names a lossy step already taken while reading (e.g. non-string categories made strings)."""

    values: np.ndarray
    missing: np.ndarray | None = None
    categories: np.ndarray | None = None
    ordered: bool = False
    nullable: str | None = None
    note: str | None = None


@dataclass
class MatrixSource:
    """A matrix as AnnData stores it: ``dense`` (a row-major dataset or array) or ``csr``/``csc`` (the three arrays,
    0-based, datasets or arrays sliced on demand)."""

    kind: str
    shape: tuple[int, int]
    dtype: np.dtype
    data: Any
    indices: Any = None
    indptr: Any = None
    #: For ``csr``/``csc``: which values of ``indices`` to keep (a mask over the minor axis; the kept ones are
    #: renumbered in order), or ``None`` for all. A 10x matrix keeps only some features this way.
    index_mask: np.ndarray | None = None

    @property
    def nnz(self) -> int:
        return int(self.data.shape[0]) if self.kind != "dense" else int(np.prod(self.shape))


@dataclass
class Unsupported:
    """An element Daf cannot hold (the reason is reported to the unsupported handler)."""

    reason: str


Reader = Callable[[Any], Any]

#: ``(encoding-type, encoding-version) -> reader``; ``version`` ``"*"`` matches any version.
READERS: dict[tuple[str, str | None], Reader] = {}


def reads(encoding_type: str, *versions: str) -> Callable[[Reader], Reader]:
    """Register a reader of an encoding (for the given versions, or any version if none are given).

    Example:
        >>> @reads("my-encoding", "0.1.0")
        ... def read_mine(element):
        ...     return "mine"
        >>> READERS[("my-encoding", "0.1.0")] is read_mine
        True
        >>> del READERS[("my-encoding", "0.1.0")]
    """

    def register(reader: Reader) -> Reader:
        for version in versions or ("*",):
            READERS[(encoding_type, version)] = reader
        return reader

    return register


def _attribute(element: Any, name: str, default: Any = None) -> Any:
    value = element.attrs.get(name, default)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray) and value.dtype.kind in "OSU":
        return [item.decode() if isinstance(item, bytes) else str(item) for item in value.tolist()]
    return value


def encoding_of(element: Any) -> tuple[str | None, str | None]:
    return _attribute(element, "encoding-type"), _attribute(element, "encoding-version")


def element_text(element: Any) -> str:
    """How messages name an element: its HDF5 path and file (or its type, for in-memory data).

    Example:
        >>> element_text(np.zeros(2))
        'an in-memory ndarray'
    """
    name, file = getattr(element, "name", None), getattr(getattr(element, "file", None), "filename", None)
    if isinstance(name, str) and isinstance(file, str):
        return f"{name}\nin the AnnData file: {file}"
    return f"an in-memory {type(element).__name__}"


def read_guarded(element: Any, reader: Reader) -> Any:
    """``reader(element)``, with anything but a :class:`~pydaf.DafError` it raises turned into a
    :class:`~pydaf.DafFormatError` naming the element.

    Example:
        >>> import tempfile, os
        >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5"), "w") as file:
        ...     group = file.create_group("bad")
        ...     try:
        ...         read_guarded(group, lambda element: element["missing"])
        ...     except DafFormatError as error:
        ...         print(str(error).splitlines()[0])
        can't read the AnnData element: /bad
    """
    try:
        return reader(element)
    except DafError:
        raise
    except Exception as error:
        raise DafFormatError(f"can't read the AnnData element: {element_text(element)}\n({type(error).__name__}: "
                             f"{error})") from error


def read_element(element: Any) -> Any:
    """Read one element (dispatching on its encoding, or guessing a legacy one).

    Example:
        >>> import tempfile, os
        >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5"), "w") as file:
        ...     dataset = file.create_dataset("n", data=np.array([1, 2]))
        ...     dataset.attrs["encoding-type"], dataset.attrs["encoding-version"] = "array", "0.2.0"
        ...     read_element(dataset).values.tolist()
        [1, 2]
    """
    return read_guarded(element, _dispatch)


def _dispatch(element: Any) -> Any:
    encoding, version = encoding_of(element)
    if encoding is None:
        return _read_legacy(element)
    if not isinstance(encoding, str) or not isinstance(version, str | None):
        return Unsupported(f"invalid encoding attributes: {encoding!r} {version!r}")
    reader = READERS.get((encoding, version)) or READERS.get((encoding, "*"))
    if reader is None:
        return Unsupported(f"unsupported encoding: {encoding} {version}")
    return reader(element)


# A chunked (compressed) or unallocated dataset may declare more bytes than its file stores, but not without bound:
# reading one allocates all of it. zlib compresses at most ~1032:1 (the bound H5df uses too).
_MAX_EXPANSION = 1024

# The least bytes a variable-length string (or other variable-length element) takes once read: a Python object.
_VARIABLE_ITEMSIZE = 16


def require_stored_size(dataset: Any, what: str | None = None) -> None:
    """Refuse an HDF5 dataset whose declared shape its storage can't hold, *before* anything is allocated for it: a
    contiguous dataset must fit in its file, a chunked or unallocated one may declare at most ~1024 times the bytes
    it stores (zlib's best ratio); a :class:`~pydaf.DafFormatError` names the element (``what``, else its path) and
    the file. Anything but an h5py dataset passes (an in-memory array holds what it says).

    Example:
        >>> import tempfile, os
        >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5"), "w") as file:
        ...     require_stored_size(file.create_dataset("small", data=np.arange(10)))
        ...     try:
        ...         require_stored_size(file.create_dataset("huge", shape=(3 << 30,), dtype="f4", chunks=True))
        ...     except DafFormatError as error:
        ...         print(str(error).splitlines()[0])
        the AnnData element: /huge
    """
    if not isinstance(dataset, h5py.Dataset):
        return
    string = h5py.check_string_dtype(dataset.dtype)
    variable = h5py.check_vlen_dtype(dataset.dtype) is not None or (string is not None and string.length is None)
    nbytes = int(dataset.size or 0) * max(_VARIABLE_ITEMSIZE if variable else dataset.dtype.itemsize, 1)
    if nbytes <= 1 << 20:  # (small enough to read whatever it holds)
        return
    file_size = os.path.getsize(dataset.file.filename)
    dcpl = dataset.id.get_create_plist()
    contiguous = dcpl.get_layout() == h5py.h5d.CONTIGUOUS and dataset.id.get_offset() is not None \
        and not dcpl.get_external_count()
    limit = file_size if contiguous else max(int(dataset.id.get_storage_size()), 1 << 20) * _MAX_EXPANSION
    if nbytes > limit:
        raise DafFormatError(f"the AnnData element: {what or dataset.name}\nin the file: {dataset.file.filename}\n"
                             f"declares {nbytes} bytes (shape: {dataset.shape}, element type: {dataset.dtype})\n"
                             f"which its storage ({file_size} bytes of file) can't hold")


def _strings(dataset: h5py.Dataset) -> np.ndarray:
    require_stored_size(dataset)
    values = dataset[()]
    if isinstance(values, bytes | str):
        values = np.array([values], dtype=object)
    flat = values.ravel()
    if flat.dtype.kind in "OS":
        return np.array([item.decode() if isinstance(item, bytes) else str(item) for item in flat.tolist()],
                        dtype=object).reshape(values.shape)
    return flat.astype(str).astype(object).reshape(values.shape)


def _is_string_dataset(dataset: h5py.Dataset) -> bool:
    return h5py.check_string_dtype(dataset.dtype) is not None or dataset.dtype.kind in "SU"


def _numbers(dataset: h5py.Dataset) -> np.ndarray:
    require_stored_size(dataset)
    values = np.empty(dataset.shape, dtype=dataset.dtype)
    if values.size:
        dataset.read_direct(values)
    return values


# Arrays and scalars.


@reads("array", "0.2.0")
def read_array(dataset: Any) -> Any:
    if not isinstance(dataset, h5py.Dataset):
        return Unsupported("array that is not a dataset")
    if dataset.dtype.names:
        return Unsupported("compound dataset")
    if dataset.ndim == 1:
        return Column(_strings(dataset) if _is_string_dataset(dataset) else _numbers(dataset))
    if dataset.ndim == 2:
        if _is_string_dataset(dataset):
            return Unsupported("string matrix")
        require_stored_size(dataset)
        return MatrixSource("dense", (int(dataset.shape[0]), int(dataset.shape[1])), dataset.dtype, dataset)
    if dataset.ndim == 0:
        return read_scalar(dataset)
    return Unsupported(f"{dataset.ndim}-dimensional array")


@reads("string-array", "0.2.0")
def read_string_array(dataset: Any) -> Any:
    if dataset.ndim != 1:
        return Unsupported(f"{dataset.ndim}-dimensional string array")
    return Column(_strings(dataset))


@reads("numeric-scalar", "0.2.0")
@reads("string", "0.2.0")
def read_scalar(dataset: Any) -> Any:
    require_stored_size(dataset)
    value = dataset[()]
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.ndarray):
        value = value.reshape(-1)[0]
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, np.generic) and value.dtype.kind == "c":
        return Unsupported("complex scalar")
    return value


# Sparse matrices.


def _sparse(group: Any, kind: str, shape: Any) -> Any:
    if not isinstance(group, h5py.Group) or not all(name in group for name in ("data", "indices", "indptr")):
        return Unsupported(f"{kind} matrix without data/indices/indptr")
    data, indices, indptr = group["data"], group["indices"], group["indptr"]
    if _is_string_dataset(data):
        return Unsupported(f"{kind} matrix of strings")
    sizes = np.asarray(shape).ravel()
    if sizes.shape != (2,) or sizes.dtype.kind not in "iu" or (sizes < 0).any():
        raise ValueError(f"invalid shape attribute: {shape!r} (expected 2 non-negative integers)")
    for part in (data, indices, indptr):
        if not isinstance(part, h5py.Dataset) or part.ndim != 1:
            raise ValueError(f"the {part.name.rpartition('/')[2]} of a {kind} matrix is not a 1-dimensional dataset")
    for part in (indices, indptr):
        if part.dtype.kind not in "iu":
            raise ValueError(f"the {part.name.rpartition('/')[2]} of a {kind} matrix has the element type: "
                             f"{part.dtype} (expected integers)")
    for part in (data, indices, indptr):
        require_stored_size(part)  # (a declared nnz or shape is no allocation before it is known to be stored)
    if indices.shape != data.shape:
        raise ValueError(f"a {kind} matrix has {data.shape[0]} data values but {indices.shape[0]} indices")
    major = int(sizes[0] if kind == "csr" else sizes[1])
    if indptr.shape != (major + 1,):
        raise ValueError(f"a {kind} matrix of shape {tuple(int(size) for size in sizes)} has {indptr.shape[0]} indptr "
                         f"entries (expected {major + 1})")
    return MatrixSource(kind, (int(sizes[0]), int(sizes[1])), data.dtype, data, indices, indptr)


@reads("csr_matrix", "0.1.0")
def read_csr(group: Any) -> Any:
    return _sparse(group, "csr", group.attrs["shape"])


@reads("csc_matrix", "0.1.0")
def read_csc(group: Any) -> Any:
    return _sparse(group, "csc", group.attrs["shape"])


# Categorical and nullable vectors.


def categorical_column(codes: np.ndarray, categories: np.ndarray, ordered: bool = False) -> Column:
    """Category labels of codes; code -1 (missing) is the empty string, Daf's empty value, and is marked missing.
    Non-string categories become strings (noted in the column, to be reported).

    Example:
        >>> column = categorical_column(np.array([1, -1, 0]), np.array(["a", "b"]))
        >>> column.values.tolist(), column.missing.tolist(), column.categories.tolist()
        (['b', '', 'a'], [False, True, False], ['a', 'b'])
    """
    original = np.asarray(categories)
    items = original.tolist()
    names = np.array([item.decode() if isinstance(item, bytes) else str(item) for item in items], dtype=object)
    note = None
    if original.dtype.kind not in "OSU" or any(not isinstance(item, str | bytes) for item in items):
        note = f"categories of type {original.dtype} stored as strings"
    labels = np.append(names, "")
    codes = np.asarray(codes)
    if codes.ndim != 1 or codes.dtype.kind not in "iu":
        raise ValueError(f"categorical codes of shape {codes.shape} and type {codes.dtype} (expected integers)")
    codes = codes.astype(np.int64)
    if codes.size and (codes.min() < -1 or codes.max() >= len(labels) - 1):
        raise ValueError(f"categorical codes in {codes.min()}..{codes.max()} (expected -1..{len(labels) - 2}, for "
                         f"{len(labels) - 1} categories)")
    missing = codes < 0
    return Column(labels[np.where(missing, len(labels) - 1, codes)], missing if missing.any() else None,
                  categories=names, ordered=bool(ordered), note=note)


def _ordered(group: Any) -> bool:
    """anndata's ``ordered`` attribute of a categorical (a bool, or a 1-element array in older files)."""
    value = np.asarray(group.attrs.get("ordered", False)).ravel()
    return bool(value[0]) if value.size else False


@reads("categorical", "0.2.0")
def read_categorical(group: Any) -> Any:
    categories = read_element(group["categories"])
    if isinstance(categories, Unsupported):
        return categories
    labels = categories.values
    if categories.missing is not None:
        labels = np.where(categories.missing, "", labels.astype(object))
    return categorical_column(_numbers(group["codes"]), np.asarray(labels), _ordered(group))


def nullable_name(dtype: np.dtype) -> str:
    """pandas' name of the nullable type of a numpy integer or bool type.

    Example:
        >>> nullable_name(np.dtype(np.int64)), nullable_name(np.dtype(np.uint8)), nullable_name(np.dtype(bool))
        ('Int64', 'UInt8', 'boolean')
    """
    if dtype.kind == "b":
        return "boolean"
    return dtype.name.replace("uint", "UInt").replace("int", "Int")


def _nullable(group: Any, empty: Any) -> Any:
    values = read_element(group["values"])
    if isinstance(values, Unsupported):
        return values
    missing = _numbers(group["mask"]).astype(bool)
    if missing.shape != values.values.shape:
        raise ValueError(f"a mask of shape {missing.shape} for values of shape {values.values.shape}")
    result = values.values.copy()
    result[missing] = empty
    name = "string" if isinstance(empty, str) else nullable_name(result.dtype)
    return Column(result, missing if missing.any() else None, nullable=name)


@reads("nullable-integer", "0.1.0")
def read_nullable_integer(group: Any) -> Any:
    return _nullable(group, 0)


@reads("nullable-boolean", "0.1.0")
def read_nullable_boolean(group: Any) -> Any:
    return _nullable(group, False)


@reads("nullable-string-array", "0.1.0")
def read_nullable_string(group: Any) -> Any:
    return _nullable(group, "")


# Containers.


@reads("dict", "0.1.0")
def read_dict(group: Any) -> dict[str, Any]:
    return {name: group[name] for name in group}  # read lazily, element by element


@reads("dataframe", "0.1.0", "0.2.0")
def read_dataframe(group: Any) -> Any:
    """A dataframe as ``{"_index": Column, column: Column | Unsupported, ...}`` in column order."""
    if isinstance(group, h5py.Dataset):
        return read_compound_dataframe(group)
    index_name = _attribute(group, "_index") or ("_index" if "_index" in group else "index")
    order = _attribute(group, "column-order")
    if order is None or isinstance(order, np.ndarray | float):
        order = [name for name in group if name not in (index_name, "__categories")]
    elif isinstance(order, str):
        order = [order]
    legacy_categories = group.get("__categories")
    columns: dict[str, Any] = {"_index": _read_column(group, group[index_name], None)}
    for name in order:
        columns[name] = _read_column(group, group[name], legacy_categories.get(name) if legacy_categories else None)
    return columns


def _read_column(group: Any, element: Any, legacy_categories: Any) -> Any:
    reference = element.attrs.get("categories") if isinstance(element, h5py.Dataset) else None
    if reference is not None and isinstance(reference, h5py.Reference):
        legacy_categories = group.file[reference]
    if legacy_categories is not None:
        return categorical_column(_numbers(element), _strings(legacy_categories).astype(str))
    value = read_element(element)
    if isinstance(value, Column | Unsupported):
        return value
    return Unsupported("column that is not a vector")


def _field_column(values: np.ndarray, dtype: np.dtype) -> Column | Unsupported:
    """A column of a compound dataset: fixed-length byte strings and variable-length strings are text (UTF-8)."""
    if dtype.shape:
        return Unsupported(f"a field of shape {dtype.shape}")
    if dtype.kind == "S" or h5py.check_string_dtype(dtype) is not None:
        return Column(np.array([item.decode() if isinstance(item, bytes) else str(item) for item in values.tolist()],
                               dtype=object))
    if dtype.kind not in "biuf":
        return Unsupported(f"a field of type {dtype}")
    return Column(np.ascontiguousarray(values))


def read_compound_dataframe(dataset: h5py.Dataset) -> Any:
    """A dataframe of anndata < 0.7: a 1-dimensional compound dataset, a field per column; the first is the index (as
    anndata's ``read_dataframe_legacy`` takes it). Categorical columns hold codes, their categories are in
    ``uns/<column>_categories`` (applied by the caller, which has ``uns``).

    Example:
        >>> import tempfile, os
        >>> rows = np.array([(b"c1", 3), (b"c2", 4)], dtype=[("index", "S2"), ("n", "<i8")])
        >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5"), "w") as file:
        ...     frame = read_compound_dataframe(file.create_dataset("obs", data=rows))
        >>> frame["_index"].values.tolist(), frame["n"].values.tolist()
        (['c1', 'c2'], [3, 4])
    """
    fields = dataset.dtype.fields
    if dataset.ndim != 1 or not fields:
        return Unsupported("dataframe stored as a dataset that is not a 1-dimensional compound dataset")
    require_stored_size(dataset)
    rows = dataset[()]
    names = list(dataset.dtype.names)
    columns: dict[str, Any] = {"_index": _field_column(rows[names[0]], fields[names[0]][0])}
    for name in names[1:]:
        columns[name] = _field_column(rows[name], fields[name][0])
    return columns


def compound_fields(dataset: h5py.Dataset) -> list[str]:
    """The field names of a compound dataset (anndata < 0.7 stored ``obsm``/``varm`` so: a field per matrix), else
    ``[]``.

    Example:
        >>> import tempfile, os
        >>> rows = np.zeros(2, dtype=[("X_pca", "<f4", (3,)), ("X_umap", "<f8", (2,))])
        >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5"), "w") as file:
        ...     compound_fields(file.create_dataset("obsm", data=rows))
        ['X_pca', 'X_umap']
    """
    return list(dataset.dtype.names or ()) if isinstance(dataset, h5py.Dataset) else []


def legacy_string_scalar(element: Any) -> str | None:
    """The string of a 1-element fixed-length byte-string dataset without encoding attributes, which anndata < 0.7
    wrote for a string scalar of ``uns`` and anndata still reads as one; ``None`` for anything else (a 1-element
    array of another kind is an array).

    Example:
        >>> import tempfile, os
        >>> with h5py.File(os.path.join(tempfile.mkdtemp(), "x.h5"), "w") as file:
        ...     legacy_string_scalar(file.create_dataset("a", data=np.array([b"umap"]))), \\
        ...         legacy_string_scalar(file.create_dataset("b", data=np.array([10])))
        ('umap', None)
    """
    if (isinstance(element, h5py.Dataset) and element.shape == (1,) and element.dtype.kind == "S"
            and encoding_of(element) == (None, None)):
        return _strings(element)[0]
    return None


@reads("anndata", "0.1.0")
@reads("raw", "0.1.0")
def read_anndata(group: Any) -> dict[str, Any]:
    return {name: group[name] for name in group}


@reads("awkward-array")
def read_awkward(_group: Any) -> Any:
    return Unsupported("awkward array")


def _read_legacy(element: Any) -> Any:
    if isinstance(element, h5py.Dataset):
        return read_scalar(element) if element.ndim == 0 else read_array(element)
    sparse_format = _attribute(element, "h5sparse_format")
    if sparse_format in ("csr", "csc"):
        return _sparse(element, sparse_format, element.attrs["h5sparse_shape"])
    if "_index" in element.attrs or "__categories" in element:
        return read_dataframe(element)
    return read_dict(element)
