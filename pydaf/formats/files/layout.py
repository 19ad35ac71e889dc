"""The FilesDaf layout (docs/spec/FORMATS.md §3) apart from where its files live: which files and descriptor
(``.json``) each property is stored as, with their exact bytes, and how a property is decoded from them.
:class:`~pydaf.FilesDaf` keeps them in a directory and :class:`~pydaf.ZipDaf` as the entries of a ZIP archive; both
use these functions, so the two layouts are the same byte for byte (unzipping a ZipDaf gives a FilesDaf directory).

Decoding reads through a :class:`LayoutSource` (the files of one property, however stored): every size a descriptor
declares is checked against the axes and the stored sizes before anything is mapped, and bad descriptors raise
:class:`~pydaf.DafFormatError` naming the property.
"""

from __future__ import annotations

import json
import math
from contextlib import suppress
from typing import Any, Protocol

import numpy as np

from ..._os.byte_sources import ByteSource
from ...abc.format import CacheGroup, StoredMatrix, StoredVector, weakest_cache_group
from ...core.packed_settings import chunks_for, compressor_for
from ...errors import DafFormatError, DafValueError
from ...sparse import SparseMatrixCSC, SparseVector, selected_column_runs
from ...storage_types import DTYPES_BY_NAME, STRING_DTYPE, StorageScalar, julia_name, scalar_dtype
from .._strings import (
    dense_string_matrix,
    dense_string_vector,
    sparse_string_matrix,
    sparse_string_vector,
    sparse_strings_are_smaller,
)
from ..packed import descriptor_layout, is_packed_descriptor, read_packed_array
from ..packed.shard import ChunkCache, LazyPackedArray
from ..packed.shard_writer import component_json as packed_component_json
from ..packed.shard_writer import encode_packed_dense_array, packed_array_json

#: The FilesDaf format version written (``daf.json``); reading accepts this major version up to this minor one.
MAJOR_VERSION = 1
MINOR_VERSION = 1

#: The suffixes of a vector's files, its descriptor first (Julia's ``format_delete_vector!`` list).
VECTOR_SUFFIXES = (".json", ".txt", ".data", ".zip", ".nzind", ".nzind.zip", ".nzval", ".nzval.zip", ".nztxt")
#: The suffixes of a matrix's files, its descriptor first.
MATRIX_SUFFIXES = (".json", ".data", ".txt", ".zip", ".colptr", ".colptr.zip", ".rowval", ".rowval.zip", ".nzval",
                   ".nzval.zip", ".nztxt")

#: A property's files: ``(suffix, bytes or an array whose raw bytes in memory order are the file)``.
Files = list[tuple[str, bytes | np.ndarray]]


# Encoding.


def utf8(text: str, what: str) -> bytes:
    """``text`` as UTF-8 (a :class:`~pydaf.DafValueError` naming ``what`` if it can't be)."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise DafValueError(f"{what}\nis not valid UTF-8 text ({error})") from error


def lines_bytes(values: np.ndarray, what: str) -> bytes:
    """A lines file: each string followed by a newline (Julia's ``println``); a newline inside one is refused.

    Example:
        >>> lines_bytes(np.array(["A", "B"], dtype=object), "the axis: cell")
        b'A\\nB\\n'
    """
    for value in values.flat:
        if "\n" in value:
            raise DafValueError(f"a string of {what}\ncontains a newline, which FilesDaf can't store: {value!r}")
    return utf8("".join(f"{value}\n" for value in values.flat), what)


def json_value(value: StorageScalar) -> str:
    """A scalar as JSON.jl writes it (shortest round-trip numbers, ``true``/``false``)."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, np.bool_):
        return "true" if value else "false"
    if isinstance(value, np.floating):
        if not np.isfinite(value):
            raise DafValueError(f"FilesDaf can't store the non-finite scalar: {value}")
        text = np.format_float_positional(value, unique=True, trim="0") if 1e-5 <= abs(value) < 1e16 or value == 0 \
            else np.format_float_scientific(value, unique=True, trim="0").replace("e+", "e")
        return text
    return str(int(value))


def scalar_json(value: StorageScalar) -> str:
    """The descriptor of a scalar (without its trailing newline).

    Example:
        >>> scalar_json(np.float64(0.5)), scalar_json("amos")
        ('{"type":"Float64","value":0.5}', '{"type":"String","value":"amos"}')
    """
    return f'{{"type":"{julia_name(scalar_dtype(value))}","value":{json_value(value)}}}'


def dense_json(eltype: str) -> str:
    """The descriptor of dense data of a Julia element type."""
    return f'{{"format":"dense","eltype":"{eltype}"}}'


def component_json(eltype: str, n_elements: int) -> str:
    return f'{{"format":"dense","eltype":"{eltype}","n_elements":{n_elements}}}'


def sparse_json(components: list[tuple[str, str, int]]) -> str:
    """The v1.1 descriptor of sparse data: ``(component, Julia element type, n_elements)`` each, in order.

    Example:
        >>> sparse_json([("nzind", "Int64", 2)])
        '{"format":"sparse","nzind":{"format":"dense","eltype":"Int64","n_elements":2}}'
    """
    parts = ",".join(f'"{name}":{component_json(eltype, count)}' for name, eltype, count in components)
    return f'{{"format":"sparse",{parts}}}'


def sparse_files(indices: list[tuple[str, np.ndarray]], nzval: np.ndarray, what: str,
                 packed: bool = False) -> tuple[Files, str]:
    """The files and descriptor of sparse data: its index components, then ``nzval`` (``.nztxt`` lines for strings,
    left out for all-true Bool data). If ``packed``, each component Julia's ``chunks_for`` packs (long enough) is a
    ``.<component>.zip`` shard, its descriptor carrying the packed fields (``packed_format_write_sparse_component!``,
    ``write_sparse_string_nzval``)."""
    parts = list(indices)
    if nzval.dtype == STRING_DTYPE or not (nzval.dtype == np.bool_ and nzval.all()):
        parts.append(("nzval", nzval))
    files: Files = []
    descriptors: list[str] = []
    for component, values in parts:
        chunk_shape = chunks_for(packed, values.shape, values.dtype)
        if chunk_shape is not None:
            codec = compressor_for()
            files.append((f".{component}.zip", encode_packed_dense_array(values, chunk_shape, codec)))
            descriptor = packed_component_json(values.dtype, values.shape[0], chunk_shape, codec)
            descriptors.append(f'"{component}":{descriptor}')
            continue
        if values.dtype == STRING_DTYPE:
            files.append((".nztxt", lines_bytes(values, what)))
        else:
            files.append((f".{component}", values))
        eltype = "String" if values.dtype == STRING_DTYPE else julia_name(values.dtype)
        descriptors.append(f'"{component}":{component_json(eltype, values.shape[0])}')
    return files, f'{{"format":"sparse",{",".join(descriptors)}}}'


def _packed_dense(values: np.ndarray, packed: bool) -> tuple[Files, str] | None:
    """The shard and descriptor of dense data (Julia shape) if ``packed`` and Julia's ``chunks_for`` packs it
    (``packed_format_write_dense_array!``), else None."""
    chunk_shape = chunks_for(packed, values.shape, values.dtype)
    if chunk_shape is None:
        return None
    codec = compressor_for()
    return [(".zip", encode_packed_dense_array(values, chunk_shape, codec))], packed_array_json(values.dtype,
                                                                                                  chunk_shape, codec)


def vector_files(vector: StoredVector | StorageScalar, length: int, what: str, *, packed: bool = False,
                 pack_strings: bool = True) -> tuple[Files, str]:
    """The files and descriptor of a vector of ``length`` entries, as Julia's FilesDaf stores it (a zero fill as an
    empty sparse vector; strings sparse when that is smaller). ``packed`` (Julia's ``is_packed``): each part long
    enough is a packed shard; a scalar fill never is, nor strings unless ``pack_strings`` (ZipDaf writes them flat).

    Example:
        >>> vector_files(np.array([1.5, 2.5]), 2, "the vector: x")[1]
        '{"format":"dense","eltype":"Float64"}'
        >>> vector_files(np.int64(0), 3, "the vector: x")[1]
        '{"format":"sparse","nzind":{"format":"dense","eltype":"Int64","n_elements":0},"nzval":{"format":"dense","eltype":"Int64","n_elements":0}}'
    """
    if not isinstance(vector, np.ndarray | SparseVector):
        packed = False  # (Julia's fill_file: a fill is never packed)
        if not isinstance(vector, str) and vector == 0:  # Julia stores a zero fill as an empty sparse vector
            vector = SparseVector(length, np.empty(0, np.int64), np.empty(0, scalar_dtype(vector)))
        else:
            vector = np.full(length, vector, dtype=scalar_dtype(vector))
    if isinstance(vector, SparseVector):
        return sparse_files([("nzind", vector.nzind)], vector.nzval, what, packed)
    if vector.dtype == STRING_DTYPE:
        packed = packed and pack_strings
        if sparse_strings_are_smaller(vector, None):
            nzind, texts = sparse_string_vector(vector)
            return sparse_files([("nzind", nzind)], texts, what, packed)
        return _packed_dense(vector, packed) or ([(".txt", lines_bytes(vector, what))], dense_json("String"))
    return _packed_dense(vector, packed) or ([(".data", vector)], dense_json(julia_name(vector.dtype)))


def matrix_files(matrix: StoredMatrix | StorageScalar, shape: tuple[int, int], what: str, *, packed: bool = False,
                 pack_strings: bool = True) -> tuple[Files, str]:
    """The files and descriptor of a ``shape`` matrix (column-major), as Julia's FilesDaf stores it (``packed`` and
    ``pack_strings`` as for :func:`vector_files`).

    Example:
        >>> files, descriptor = matrix_files(np.array([[1, 2], [3, 4]], dtype=np.int8), (2, 2), "the matrix: m")
        >>> files[0][0], bytes(np.ascontiguousarray(files[0][1])), descriptor
        ('.data', b'\\x01\\x03\\x02\\x04', '{"format":"dense","eltype":"Int8"}')
    """
    if not isinstance(matrix, np.ndarray | SparseMatrixCSC):
        packed = False  # (Julia's fill_file: a fill is never packed)
        if not isinstance(matrix, str) and matrix == 0:  # Julia stores a zero fill as an empty sparse matrix
            matrix = SparseMatrixCSC(shape, np.ones(shape[1] + 1, np.int64), np.empty(0, np.int64),
                                     np.empty(0, scalar_dtype(matrix)))
        else:
            matrix = np.full(shape, matrix, dtype=scalar_dtype(matrix), order="F")
    if isinstance(matrix, SparseMatrixCSC):
        return sparse_files([("colptr", matrix.colptr), ("rowval", matrix.rowval)], matrix.nzval, what, packed)
    if matrix.dtype == STRING_DTYPE:
        packed = packed and pack_strings
        if sparse_strings_are_smaller(matrix, shape[1]):
            colptr, rowval, texts = sparse_string_matrix(matrix)
            return sparse_files([("colptr", colptr), ("rowval", rowval)], texts, what, packed)
        return _packed_dense(matrix, packed) or ([(".txt", lines_bytes(matrix.reshape(-1, order="F"), what))],
                                                 dense_json("String"))
    return _packed_dense(matrix, packed) or ([(".data", np.asfortranarray(matrix).T)],
                                             dense_json(julia_name(matrix.dtype)))


def empty_sparse_vector_json(filled: SparseVector) -> str:
    """The descriptor of a filled ``empty_sparse_vector!`` (whose ``nzval`` is always stored)."""
    return sparse_json([("nzind", julia_name(filled.nzind.dtype), filled.nnz),
                        ("nzval", julia_name(filled.dtype), filled.nnz)])


def empty_sparse_matrix_json(filled: SparseMatrixCSC) -> str:
    """The descriptor of a filled ``empty_sparse_matrix!`` (whose ``nzval`` is always stored)."""
    index = julia_name(filled.colptr.dtype)
    return sparse_json([("colptr", index, filled.shape[1] + 1), ("rowval", index, filled.nnz),
                        ("nzval", julia_name(filled.dtype), filled.nnz)])


# Decoding.


def is_text(name: str) -> bool:
    """Whether a name is valid UTF-8 (``os.listdir`` gives other bytes as surrogates; they are not Daf names)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def is_file_name(name: object) -> bool:
    """Whether a name can be a property's (or an axis's) file name: non-empty UTF-8, not starting with ``.``,
    without ``/`` or NUL."""
    return isinstance(name, str) and bool(name) and not name.startswith(".") and "/" not in name and \
        "\0" not in name and is_text(name)


def member(descriptor: Any, key: str, kinds: type | tuple[type, ...], what: str, *, optional: bool = False) -> Any:
    """A member of a descriptor of one of ``kinds`` (``None`` if missing and ``optional``)."""
    if not isinstance(descriptor, dict):
        raise DafFormatError(f"invalid descriptor of {what}\n(expected a JSON object)")
    if key not in descriptor and optional:
        return None
    value = descriptor.get(key)
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):  # JSON true is not 1
        names = {str: "string", int: "integer", dict: "JSON object"}
        expected = " or ".join(names.get(kind, kind.__name__) for kind in kinds)
        raise DafFormatError(f"invalid descriptor of {what}\n(expected \"{key}\" to be a {expected})")
    return value


def element_count(descriptor: dict[str, Any], what: str) -> int | None:
    """The ``n_elements`` of a component descriptor, if it has one."""
    count = member(descriptor, "n_elements", int, what, optional=True)
    if count is not None and count < 0:
        raise DafFormatError(f"invalid descriptor of {what}\n(negative n_elements: {count})")
    return count


def is_string_type(eltype: str) -> bool:
    return eltype in ("String", "string")


def numeric_dtype(eltype: str, what: str, *, index: bool = False) -> np.dtype:
    """The numpy type of a Julia element type name (an integer type if ``index``)."""
    dtype = DTYPES_BY_NAME.get(eltype)
    if dtype is None or (index and dtype.kind not in "iu"):
        expected = "an integer type" if index else "a Daf element type"
        raise DafFormatError(f"invalid element type: {eltype}\nof {what}\n(expected {expected})")
    return dtype


def scalar_value(descriptor: Any, what: str) -> StorageScalar:
    """A scalar from its descriptor, converted as Julia's ``convert`` would (anything else is refused).

    Example:
        >>> scalar_value({"type": "Int8", "value": 7}, "the scalar: x")
        np.int8(7)
    """
    eltype = member(descriptor, "type", str, what)
    if "value" not in descriptor:
        raise DafFormatError(f"invalid descriptor of {what}\n(no \"value\")")
    value = descriptor["value"]
    if is_string_type(eltype):
        if isinstance(value, str):
            return value
    elif isinstance(value, int | float):
        dtype = numeric_dtype(eltype, what)
        integral = int(value) if isinstance(value, int) or value.is_integer() else None  # inf, nan: not integral
        if dtype.kind == "b" and integral in (0, 1):
            return np.bool_(integral)
        if dtype.kind in "iu" and integral is not None and np.iinfo(dtype).min <= integral <= np.iinfo(dtype).max:
            return dtype.type(integral)
        if dtype.kind == "f":
            with suppress(OverflowError):
                number = float(value)
                if not np.isfinite(number) or abs(number) <= float(np.finfo(dtype).max):
                    return dtype.type(number)
    raise DafFormatError(f"invalid value: {str(value)[:100]}\nof {what}\n(expected a value of type: {eltype})")


def _refuse_constant(constant: str) -> Any:
    raise ValueError(f"non-standard JSON constant: {constant} (JSON.jl neither writes nor reads it)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is out of the range of a Float64")
    return value


def parse_json(data: bytes, what: str) -> Any:
    """A descriptor's JSON: standard JSON only (``NaN``, ``Infinity`` and numbers beyond a Float64 are refused, as
    JSON.jl refuses them), any problem a :class:`~pydaf.DafFormatError` naming ``what``.

    Example:
        >>> parse_json(b'{"type":"Float64","value":0.5}', "the scalar: x")
        {'type': 'Float64', 'value': 0.5}
        >>> parse_json(b'{"type":"Float64","value":NaN}', "the scalar: x")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: invalid JSON in the descriptor of the scalar: x
        (non-standard JSON constant: NaN (JSON.jl neither writes nor reads it))
    """
    try:
        return json.loads(data, parse_constant=_refuse_constant, parse_float=_finite_float)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        raise DafFormatError(f"invalid JSON in the descriptor of {what}\n({str(error)[:200]})") from error


def checked_text(data: bytes, what: str) -> str:
    """The text of a lines file: UTF-8, each line (if any) ending with a newline."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DafFormatError(f"the text of {what}\nis not valid UTF-8 ({error})") from error
    if text and not text.endswith("\n"):
        raise DafFormatError(f"the text of {what}\ndoes not end with a newline")
    return text


def line_count(data: bytes, what: str) -> int:
    """The number of lines of a (checked) lines file."""
    checked_text(data, what)
    return data.count(b"\n")


def lines(data: bytes, count: int, what: str) -> np.ndarray:
    """The ``count`` lines of a lines file.

    Example:
        >>> lines(b"A\\nB\\n", 2, "the axis: cell").tolist()
        ['A', 'B']
    """
    text = checked_text(data, what)
    if text.count("\n") != count:
        raise DafFormatError(f"the text of {what}\nhas {text.count(chr(10))} lines instead of {count}")
    return np.array(text[:-1].split("\n"), dtype=object) if count else np.empty(0, dtype=object)


def axis_entries(data: bytes, count: int, what: str) -> np.ndarray:
    """The ``count`` entries of an axis file, which must be unique (Julia's ``add_axis!`` refuses repeats: a file
    that has one was written or edited by something other than Daf).

    Example:
        >>> axis_entries(b"A\\nB\\nA\\n", 3, "the axis: cell")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: duplicate entry: 'A'
        of the axis: cell
        (the entries of an axis are unique: the axis file was written or edited by something other than Daf)
    """
    entries = lines(data, count, what)
    if len(set(entries.tolist())) != entries.shape[0]:
        seen: set[str] = set()
        repeated = next(entry for entry in entries.tolist() if entry in seen or seen.add(entry))  # type: ignore[func-returns-value]
        raise DafFormatError(f"duplicate entry: {repeated!r}\nof {what}\n(the entries of an axis are unique: the axis "
                             "file was written or edited by something other than Daf)")
    return entries


class LayoutSource(Protocol):
    """The stored files of one property, wherever they are (a folder, a ZIP archive)."""

    #: How errors name the property (``the vector: x\\nof the axis: cell``).
    what: str

    def map(self, suffix: str, dtype: np.dtype, count: int | None) -> tuple[np.ndarray, CacheGroup]:
        """The values of a data file of ``count`` elements (``None``: as many as its size holds), read-only, mapped
        where possible; a missing file or a wrong size raises."""

    def text(self, suffix: str, count: int) -> np.ndarray:
        """The ``count`` lines of a lines file."""

    def invalid(self, problem: str) -> DafFormatError:
        """The error of an invalid property."""

    def byte_source(self, suffix: str) -> ByteSource:
        """The bytes of a packed shard file (``.zip``, ``.nzval.zip``…); a missing file raises."""


def verify_version(version: Any, where: str) -> None:
    """Check a parsed ``daf.json`` (``where`` names the data set in errors).

    Example:
        >>> verify_version({"version": [2, 0]}, "the daf directory: x")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafFormatError: incompatible format version: 2.0
        for the daf directory: x
        the code supports version: 1.1
    """
    numbers = version.get("version") if isinstance(version, dict) else None
    if not isinstance(numbers, list) or len(numbers) != 2 or not all(
            isinstance(number, int) and not isinstance(number, bool) for number in numbers):
        raise DafFormatError(f"invalid daf.json in {where}\n(expected {{\"version\":[major,minor]}})")
    major, minor = numbers
    if major != MAJOR_VERSION or minor > MINOR_VERSION:
        raise DafFormatError(f"incompatible format version: {major}.{minor}\nfor {where}\nthe code supports version: "
                             f"{MAJOR_VERSION}.{MINOR_VERSION}")


def is_packed(descriptor: dict[str, Any]) -> bool:
    """Whether a descriptor (or one of its components) describes packed (``.zip`` shard) data."""
    return "packed_format" in descriptor or any(isinstance(component, dict) and "packed_format" in component
                                                for component in descriptor.values())


def _packed(source: LayoutSource, suffix: str, descriptor: dict[str, Any], eltype: str,
            shape: tuple[int, ...]) -> tuple[np.ndarray, CacheGroup]:
    """Packed data (a dual-format shard, docs/spec/FORMATS.md §3.9 and §4), decoded whole into memory."""
    dtype = STRING_DTYPE if is_string_type(eltype) else numeric_dtype(eltype, source.what)
    layout = descriptor_layout(descriptor, dtype, shape, invalid=source.invalid)
    return read_packed_array(source.byte_source(suffix), layout, invalid=source.invalid), CacheGroup.MemoryData


def _dense(source: LayoutSource, descriptor: dict[str, Any], shape: tuple[int, ...]) -> tuple[np.ndarray, CacheGroup]:
    """Dense data of ``shape`` (Julia order; a matrix is column-major), flat or packed."""
    eltype = member(descriptor, "eltype", str, source.what)
    if is_packed_descriptor(descriptor):
        return _packed(source, ".zip", descriptor, eltype, shape)
    count = math.prod(shape)
    if is_string_type(eltype):
        values, group = source.text(".txt", count), CacheGroup.MemoryData
    else:
        values, group = source.map(".data", numeric_dtype(eltype, source.what), count)
    return values.reshape(shape, order="F"), group


def _index(source: LayoutSource, descriptor: dict[str, Any], component: str, count: int | None,
           at_most: int | None = None) -> tuple[np.ndarray, CacheGroup]:
    """An index component of a sparse property (``nzind``, ``colptr``, ``rowval``), either descriptor version;
    ``count`` is its required length, if known, else at most ``at_most`` (checked before a packed one is decoded:
    its declared length is all that sizes it)."""
    what = source.what
    if "eltype" in descriptor:  # v1.0: one index type, lengths from the file sizes
        indtype = member(descriptor, "indtype", str, what)
        return source.map(f".{component}", numeric_dtype(indtype, what, index=True), count)
    part = member(descriptor, component, dict, what)
    declared = element_count(part, what)
    if count is not None and declared is not None and declared != count:
        raise source.invalid(f"{component} has {declared} elements instead of {count}")
    eltype = member(part, "eltype", str, what)
    dtype = numeric_dtype(eltype, what, index=True)
    count = declared if count is None else count
    if is_packed_descriptor(part):
        if count is None:  # (a packed component's length is only ever declared)
            raise source.invalid(f"the packed {component} has no n_elements")
        if at_most is not None and count > at_most:
            raise source.invalid(f"the packed {component} declares {count} elements, more than the {at_most} entries "
                                 "of the property")
        return _packed(source, f".{component}.zip", part, eltype, (count,))
    return source.map(f".{component}", dtype, count)


def _values(source: LayoutSource, descriptor: dict[str, Any], nnz: int) -> tuple[np.ndarray, CacheGroup]:
    """The ``nzval`` of a sparse property with ``nnz`` entries (all-true Bool when it is not stored)."""
    what = source.what
    if "eltype" in descriptor:  # v1.0: Bool data is always all-true (docs/spec/FORMATS.md §3.5)
        eltype = member(descriptor, "eltype", str, what)
        part = None
    else:
        part = member(descriptor, "nzval", dict, what, optional=True)
        eltype = None if part is None else member(part, "eltype", str, what)
        declared = None if part is None else element_count(part, what)
        if declared is not None and declared != nnz:
            raise source.invalid(f"nzval has {declared} elements instead of {nnz}")
    if part is not None and eltype is not None and is_packed_descriptor(part):
        return _packed(source, ".nzval.zip", part, eltype, (nnz,))  # (strings too: a vlen-utf8 shard)
    if eltype is not None and is_string_type(eltype):
        return source.text(".nztxt", nnz), CacheGroup.MemoryData
    dtype = np.dtype(np.bool_) if eltype is None else numeric_dtype(eltype, what)
    if part is None and dtype == np.bool_:
        return np.ones(nnz, dtype=np.bool_), CacheGroup.MemoryData
    return source.map(".nzval", dtype, nnz)


def decode_vector(source: LayoutSource, descriptor: Any, length: int) -> tuple[StoredVector, CacheGroup | None]:
    """A vector of ``length`` entries from its descriptor and files (v1.0 or v1.1)."""
    layout = member(descriptor, "format", str, source.what)
    if layout == "dense":
        return _dense(source, descriptor, (length,))
    if layout != "sparse":
        raise source.invalid(f"unknown format: {layout}")
    nzind, group = _index(source, descriptor, "nzind", None, length)
    if nzind.shape[0] > length or (nzind.shape[0] and (int(nzind[0]) < 1 or int(nzind[-1]) > length)):
        # The full check of the indices is an O(nnz) pass, left to the reader layer; these are O(1).
        raise source.invalid(f"{nzind.shape[0]} stored entries from {int(nzind[0])} to {int(nzind[-1])} for an "
                             f"axis of length {length}")
    nzval, values_group = _values(source, descriptor, nzind.shape[0])
    if nzval.dtype == STRING_DTYPE:
        return dense_string_vector(length, nzind, nzval), CacheGroup.MemoryData
    return SparseVector(length, nzind, nzval), weakest_cache_group(group, values_group)


def decode_matrix(source: LayoutSource, descriptor: Any,
                  shape: tuple[int, int]) -> tuple[StoredMatrix, CacheGroup | None]:
    """A ``shape`` matrix from its descriptor and files (v1.0 or v1.1)."""
    layout = member(descriptor, "format", str, source.what)
    if layout == "dense":
        return _dense(source, descriptor, shape)
    if layout != "sparse":
        raise source.invalid(f"unknown format: {layout}")
    colptr, group = _index(source, descriptor, "colptr", shape[1] + 1)
    rowval, rowval_group = _index(source, descriptor, "rowval", None, shape[0] * shape[1])
    nnz = rowval.shape[0]
    if nnz > shape[0] * shape[1] or int(colptr[0]) != 1 or int(colptr[-1]) != nnz + 1:
        raise source.invalid(f"{nnz} stored entries with colptr from {int(colptr[0])} to {int(colptr[-1])} for a "
                             f"{shape[0]} x {shape[1]} matrix")
    nzval, values_group = _values(source, descriptor, nnz)
    if nzval.dtype == STRING_DTYPE:
        return dense_string_matrix(shape, colptr, rowval, nzval), CacheGroup.MemoryData
    group = weakest_cache_group(group, rowval_group, values_group)
    if rowval.dtype != colptr.dtype:
        rowval, group = rowval.astype(colptr.dtype), CacheGroup.MemoryData
    return SparseMatrixCSC(shape, colptr, rowval, nzval), group


def decode_matrix_columns(source: LayoutSource, descriptor: Any, shape: tuple[int, int], columns: np.ndarray, *,
                          cache: ChunkCache | None = None) -> StoredMatrix | None:
    """The ``columns`` (0-based positions) of a packed ``shape`` matrix, decoding only the chunks that hold them
    (``lazy_sparse.jl``): a dense matrix's column tiles; a sparse matrix's ``colptr`` (whole: it is small), then the
    runs of ``rowval`` and ``nzval`` its selected columns cover. ``None`` where nothing is packed (flat data is mapped:
    the caller slices the whole matrix, zero-copy). The result is new and unchecked (the caller validates it).

    Example:
        >>> class Flat:
        ...     what = "the matrix: UMIs"
        >>> decode_matrix_columns(Flat(), {"format": "dense", "eltype": "Float64"}, (2, 3), np.array([1])) is None
        True
    """
    what = source.what
    layout = member(descriptor, "format", str, what)
    if layout == "dense":
        if not is_packed_descriptor(descriptor):
            return None
        eltype = member(descriptor, "eltype", str, what)
        dtype = STRING_DTYPE if is_string_type(eltype) else numeric_dtype(eltype, what)
        packed = descriptor_layout(descriptor, dtype, shape, invalid=source.invalid)
        return LazyPackedArray(source.byte_source(".zip"), packed, invalid=source.invalid, cache=cache).columns(columns)
    if layout != "sparse" or "eltype" in descriptor:  # (v1.0 sparse data is never packed)
        return None
    parts = {component: member(descriptor, component, dict, what, optional=True)
             for component in ("rowval", "nzval")}
    if not any(part is not None and is_packed_descriptor(part) for part in parts.values()):
        return None
    colptr, _ = _index(source, descriptor, "colptr", shape[1] + 1)
    nnz = int(colptr[-1]) - 1
    try:
        starts, stops, selected_colptr = selected_column_runs(colptr, columns, shape[0])
    except ValueError as error:
        raise source.invalid(str(error)) from None
    rowval = _component_runs(source, descriptor, "rowval", nnz, starts, stops, cache)
    nzval = _component_runs(source, descriptor, "nzval", nnz, starts, stops, cache)
    selected_shape = (shape[0], int(columns.shape[0]))
    if nzval.dtype == STRING_DTYPE:
        return dense_string_matrix(selected_shape, selected_colptr, rowval, nzval)
    return SparseMatrixCSC(selected_shape, selected_colptr, rowval.astype(colptr.dtype, copy=False), nzval)


def _component_runs(source: LayoutSource, descriptor: dict[str, Any], component: str, nnz: int, starts: np.ndarray,
                    stops: np.ndarray, cache: ChunkCache | None) -> np.ndarray:
    """The runs ``[starts, stops)`` of a sparse component (``rowval``, ``nzval``) of ``nnz`` elements, concatenated:
    only their chunks decoded if it is packed, else gathered from its mapped file."""
    what = source.what
    part = member(descriptor, component, dict, what, optional=True)
    if part is not None and is_packed_descriptor(part):
        declared = element_count(part, what)
        if declared is not None and declared != nnz:
            raise source.invalid(f"{component} has {declared} elements instead of {nnz}")
        eltype = member(part, "eltype", str, what)
        index = component == "rowval"
        dtype = STRING_DTYPE if is_string_type(eltype) and not index else numeric_dtype(eltype, what, index=index)
        layout = descriptor_layout(part, dtype, (nnz,), invalid=source.invalid)
        lazy = LazyPackedArray(source.byte_source(f".{component}.zip"), layout, invalid=source.invalid, cache=cache)
        return lazy.elements(starts, stops)
    values, _ = _index(source, descriptor, "rowval", nnz) if component == "rowval" else _values(source, descriptor,
                                                                                               nnz)
    counts = stops - starts
    if not counts.size or not counts.sum():
        return values[:0].copy()
    # (the positions of every run's elements, without a Python loop: each run's start, then steps of one)
    positions = np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts) + np.arange(counts.sum())
    return values[positions]
