"""The closed set of element types Daf stores (Julia's ``StorageTypes``), and their numpy dtypes.

Numbers are ``Bool``, ``Int8``…``Int64``, ``UInt8``…``UInt64``, ``Float32`` and ``Float64`` (one byte per ``Bool``);
strings are UTF-8 ``String``. pydaf hands strings out as numpy ``object`` arrays of ``str``. Anything else (complex,
float16, datetime, arbitrary objects) is refused with :class:`pydaf.DafTypeError`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeAlias

import numpy as np

from .errors import DafTypeError

#: The Julia name of each storable numpy dtype (numbers only; strings are ``"String"``).
JULIA_NAMES: dict[np.dtype, str] = {
    np.dtype(np.bool_): "Bool",
    np.dtype(np.int8): "Int8",
    np.dtype(np.int16): "Int16",
    np.dtype(np.int32): "Int32",
    np.dtype(np.int64): "Int64",
    np.dtype(np.uint8): "UInt8",
    np.dtype(np.uint16): "UInt16",
    np.dtype(np.uint32): "UInt32",
    np.dtype(np.uint64): "UInt64",
    np.dtype(np.float32): "Float32",
    np.dtype(np.float64): "Float64",
}

#: The numpy dtype of each Julia element type name (lower-case aliases accepted, as Julia's FilesDaf reader does).
DTYPES_BY_NAME: dict[str, np.dtype] = {name: dtype for dtype, name in JULIA_NAMES.items()}
DTYPES_BY_NAME.update({name.lower(): dtype for dtype, name in JULIA_NAMES.items()})
DTYPES_BY_NAME["Int"] = DTYPES_BY_NAME["int"] = np.dtype(np.int64)

#: The dtype pydaf uses for string arrays.
STRING_DTYPE = np.dtype(object)

StorageNumber: TypeAlias = bool | int | float | np.bool_ | np.integer | np.floating
StorageScalar: TypeAlias = StorageNumber | str

# Julia's storage type unions, as tuples of the numpy scalar types (``str`` for strings), usable with ``isinstance``
# on scalars and ``issubclass`` on an array's ``dtype.type``. Python's ``bool``/``int``/``float`` are left out on
# purpose: ``bool`` is an ``int`` in Python, so ``isinstance(True, StorageInteger)`` would be true where Julia's
# ``true isa StorageInteger`` is false; :func:`scalar_value` turns Python numbers into these numpy types.
# (``StorageScalar`` above stays a type alias for annotations; ``StorageScalarBase`` is its tuple form.)


def _same_width_aliases(canonical: tuple[type[np.generic], ...]) -> tuple[Any, ...]:
    # numpy has distinct scalar classes of one dtype (``np.longlong`` beside ``np.int64`` on Linux): an array of
    # dtype "q" has ``dtype.type is np.longlong``, so the tuples hold those classes too (after the canonical ones).
    dtypes = {np.dtype(scalar_type) for scalar_type in canonical}
    aliases = {scalar_type for scalar_type in set(np.sctypeDict.values())
               if np.dtype(scalar_type) in dtypes and scalar_type not in canonical}
    return canonical + tuple(sorted(aliases, key=lambda scalar_type: (np.dtype(scalar_type).itemsize,
                                                                     scalar_type.__name__)))


#: Julia's ``StorageSigned``: the signed integer element types.
StorageSigned: tuple[type[np.signedinteger], ...] = _same_width_aliases((np.int8, np.int16, np.int32, np.int64))
#: Julia's ``StorageUnsigned``: the unsigned integer element types.
StorageUnsigned: tuple[type[np.unsignedinteger], ...] = _same_width_aliases((np.uint8, np.uint16, np.uint32,
                                                                            np.uint64))
#: Julia's ``StorageInteger``: the integer element types.
StorageInteger: tuple[type[np.integer], ...] = StorageSigned + StorageUnsigned
#: Julia's ``StorageFloat``: the floating point element types.
StorageFloat: tuple[type[np.floating], ...] = _same_width_aliases((np.float32, np.float64))
#: Julia's ``StorageReal``: the number element types (``Bool`` included).
StorageReal: tuple[type[np.generic], ...] = (np.bool_, *StorageInteger, *StorageFloat)
#: Julia's ``StorageScalarBase``: every element type, numbers and strings.
StorageScalarBase: tuple[type, ...] = (*StorageReal, str)

#: What may be passed where an element type is expected: a numpy dtype, a Python/numpy type, or a Julia name.
EltypeLike: TypeAlias = np.dtype | type | str


def is_string_dtype(dtype: np.dtype) -> bool:
    """Whether arrays of this dtype hold strings (``object``, ``U``, ``S`` or numpy's ``StringDType``)."""
    return dtype.kind in "OUST"


def storage_dtype(eltype: EltypeLike, *, what: str = "element type") -> np.dtype:
    """The numpy dtype of a storable element type given as a dtype, a type or a Julia name.

    Strings (``str``, ``"String"``) map to ``object``.

    Example:
        >>> storage_dtype("UInt8"), storage_dtype(float), storage_dtype(str)
        (dtype('uint8'), dtype('float64'), dtype('O'))
    """
    if isinstance(eltype, str):
        if eltype in ("String", "string", "str", "Str"):
            return STRING_DTYPE
        dtype = DTYPES_BY_NAME.get(eltype)
        if dtype is None:
            raise DafTypeError(f"unsupported {what}: {eltype}")
        return dtype
    if eltype is str:
        return STRING_DTYPE
    try:
        dtype = np.dtype(eltype)
    except TypeError as error:
        raise DafTypeError(f"unsupported {what}: {eltype!r}") from error
    if is_string_dtype(dtype):
        return STRING_DTYPE
    dtype = dtype.newbyteorder("=") if dtype.byteorder not in ("=", "|") else dtype
    if dtype not in JULIA_NAMES:
        raise DafTypeError(f"unsupported {what}: {dtype} (Daf stores Bool, Int8…Int64, UInt8…UInt64, Float32, Float64 "
                           "and String)")
    return dtype


def julia_name(dtype: np.dtype) -> str:
    """The Julia name of a storable dtype (``"String"`` for strings).

    Example:
        >>> julia_name(np.dtype("float32"))
        'Float32'
    """
    if is_string_dtype(dtype):
        return "String"
    return JULIA_NAMES[np.dtype(dtype)]


def require_number_dtype(eltype: EltypeLike, *, what: str = "element type") -> np.dtype:
    """Like :func:`storage_dtype`, but refuse strings (sparse data and the ``empty_*`` builders are numeric only)."""
    dtype = storage_dtype(eltype, what=what)
    if dtype == STRING_DTYPE:
        raise DafTypeError(f"unsupported {what}: String (only numbers are allowed here)")
    return dtype


def require_index_dtype(eltype: EltypeLike) -> np.dtype:
    """A dtype usable for sparse indices: any storable integer type (Julia allows signed and unsigned)."""
    dtype = storage_dtype(eltype, what="sparse index type")
    if dtype.kind not in "iu":
        raise DafTypeError(f"unsupported sparse index type: {julia_name(dtype)} (expected an integer type)")
    return dtype


def indtype_for_size(size: int) -> np.dtype:
    """Julia's ``indtype_for_size``: ``UInt32``, or ``UInt64`` above ``typemax(UInt32)``.

    Example:
        >>> indtype_for_size(1000)
        dtype('uint32')
    """
    return np.dtype(np.uint32) if size <= np.iinfo(np.uint32).max else np.dtype(np.uint64)


def scalar_value(value: Any, *, what: str = "scalar") -> StorageScalar:
    """Validate a scalar for storage and normalise it to a ``str`` or a numpy scalar: Python ``bool``, ``int`` and
    ``float`` become ``Bool``, ``Int64`` (``UInt64`` above its range) and ``Float64``; numpy scalars keep their type.

    Example:
        >>> scalar_value(np.float32(1.5)), scalar_value(3), scalar_value("x")
        (np.float32(1.5), np.int64(3), 'x')
    """
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return np.bool_(value)
    if isinstance(value, int):
        if np.iinfo(np.int64).min <= value <= np.iinfo(np.int64).max:
            return np.int64(value)
        if 0 <= value <= np.iinfo(np.uint64).max:
            return np.uint64(value)
        raise DafTypeError(f"unsupported {what}: {value} does not fit in Int64 or UInt64")
    if isinstance(value, float):
        return np.float64(value)
    if isinstance(value, np.bool_ | np.integer | np.floating):  # (not strings, bytes, dates, complex or objects)
        storage_dtype(value.dtype, what=f"{what} type")
        return value
    raise DafTypeError(f"unsupported {what} type: {type(value).__name__}")


def scalar_dtype(value: StorageScalar) -> np.dtype:
    """The storage dtype of a scalar value (of a Python ``bool``/``int``/``float``: the one :func:`scalar_value`
    stores it as).

    Example:
        >>> scalar_dtype(3), scalar_dtype(np.float32(1.5)), scalar_dtype("x")
        (dtype('int64'), dtype('float32'), dtype('O'))
    """
    if isinstance(value, str):
        return STRING_DTYPE
    return np.dtype(value.dtype) if isinstance(value, np.generic) else np.asarray(scalar_value(value)).dtype


def as_string_array(values: Iterable[Any] | np.ndarray, *, what: str) -> np.ndarray:
    """Convert strings to pydaf's ``object`` array of ``str`` (copying only when needed)."""
    array = np.asarray(values) if not isinstance(values, np.ndarray) else values
    if array.size == 0:
        return np.empty(array.shape, dtype=STRING_DTYPE)
    if array.dtype == STRING_DTYPE:
        for value in array.flat:
            if not isinstance(value, str):
                raise DafTypeError(f"unsupported {what}: contains a {type(value).__name__}, expected only strings")
        return array
    if array.dtype.kind == "S":
        return np.vectorize(lambda raw: raw.decode("utf-8"), otypes=[object])(array)
    if array.dtype.kind in "UT":
        return array.astype(object)
    raise DafTypeError(f"unsupported {what}: dtype {array.dtype}, expected strings")
