"""The knobs of packed (chunked + compressed) data (Julia's ``PackedFormat`` globals, docs/spec/FORMATS.md §1.8),
and the rules every format applies with them: whether a property is packed at all, its chunk shape, its codec.

Julia's knobs are globals one assigns (``DataAxesFormats.PackedFormat.DAF_PACKED_COMPRESSION = :gzip``); pydaf reads
environment variables of the same names, at each use, with Julia's defaults:

- ``DAF_PACKED_TARGET_CHUNK_KB`` (8): the target uncompressed chunk size in KiB, also the "pack at all?" threshold;
- ``DAF_PACKED_COMPRESSION`` (``blosc_zstd_bitshuffle``; Julia's ``:zstd`` or plain ``zstd``): one of
  :data:`SUPPORTED_COMPRESSION_CODECS`;
- ``DAF_PACKED_COMPRESSION_LEVEL`` (5): 1-9 for blosc and gzip, 1-22 for zstd;
- ``DAF_PACKED_LOCAL_CACHE_KB`` (65536) and ``DAF_PACKED_HTTP_CACHE_KB`` (262144): read caches, not layout rules;
- ``DAF_HTTP_MAX_COALESCE_GAP_KB`` (``DAF_PACKED_TARGET_CHUNK_KB``): the largest gap one HTTP Range read spans.

A value that is not a positive integer (or not a supported codec, or a level outside its codec's range) is a
:class:`~pydaf.DafValueError` naming the variable, at the first use that needs it (as Julia errors at the first write
that resolves the codec).

Example:
    >>> import os
    >>> os.environ.pop("DAF_PACKED_TARGET_CHUNK_KB", None) and None
    >>> chunks_for(True, (1_000_000,), "Float64"), chunks_for(True, (1_000,), "Float64")
    ((1024,), None)
    >>> chunks_for(True, (100_000, 7), "Bool"), chunks_for(False, (100_000,), "Int32")
    ((8192, 1), None)
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import numpy as np

from ..errors import DafValueError
from ..storage_types import STRING_DTYPE, storage_dtype

#: The codecs Julia's ``DAF_PACKED_COMPRESSION`` may name (``SUPPORTED_COMPRESSION_CODECS``), in Julia's order.
SUPPORTED_COMPRESSION_CODECS = (
    "blosc_zstd_bitshuffle", "blosc_lz4_bitshuffle", "zstd_bitshuffle", "zstd", "gzip", "gzip_shuffle")

#: Bytes per element assumed for strings when sizing chunks (Julia's ``STRING_SIZEOF_ESTIMATE``).
STRING_SIZEOF_ESTIMATE = 16

DEFAULT_TARGET_CHUNK_KB = 8
DEFAULT_COMPRESSION = "blosc_zstd_bitshuffle"
DEFAULT_COMPRESSION_LEVEL = 5
DEFAULT_LOCAL_CACHE_KB = 65536
DEFAULT_HTTP_CACHE_KB = 262144

TARGET_CHUNK_KB_VARIABLE = "DAF_PACKED_TARGET_CHUNK_KB"
COMPRESSION_VARIABLE = "DAF_PACKED_COMPRESSION"
COMPRESSION_LEVEL_VARIABLE = "DAF_PACKED_COMPRESSION_LEVEL"
LOCAL_CACHE_KB_VARIABLE = "DAF_PACKED_LOCAL_CACHE_KB"
HTTP_CACHE_KB_VARIABLE = "DAF_PACKED_HTTP_CACHE_KB"
HTTP_MAX_COALESCE_GAP_KB_VARIABLE = "DAF_HTTP_MAX_COALESCE_GAP_KB"


def _integer_variable(variable: str, default: int, *, minimum: int | None = 1) -> int:
    """An integer environment variable (unset or empty: ``default``), refused unless at least ``minimum``."""
    text = os.environ.get(variable, "").strip()
    if text == "":
        return default
    try:
        value: int | None = int(text)
    except ValueError:
        value = None
    if value is None or (minimum is not None and value < minimum):
        expected = ("an integer" if minimum is None else "a positive integer" if minimum == 1
                    else f"an integer of at least {minimum}")
        raise DafValueError(f"invalid value of the environment variable: {variable}\nvalue: {text!r}\n"
                            f"(expected {expected})", daf_name=None)
    return value


def packed_target_chunk_kb() -> int:
    """``DAF_PACKED_TARGET_CHUNK_KB``: the target uncompressed chunk size in KiB, and the threshold below which a
    property is stored flat even when packing is asked for (default 8).

    Example:
        >>> import os
        >>> os.environ["DAF_PACKED_TARGET_CHUNK_KB"] = "16"
        >>> packed_target_chunk_kb(), packed_target_chunk_bytes()
        (16, 16384)
        >>> del os.environ["DAF_PACKED_TARGET_CHUNK_KB"]
    """
    return _integer_variable(TARGET_CHUNK_KB_VARIABLE, DEFAULT_TARGET_CHUNK_KB)


def packed_target_chunk_bytes() -> int:
    """:func:`packed_target_chunk_kb` in bytes (binary kilobytes, as Julia's ``packed_target_chunk_bytes``).

    Example:
        >>> import os
        >>> os.environ.pop("DAF_PACKED_TARGET_CHUNK_KB", None) and None
        >>> packed_target_chunk_bytes()
        8192
    """
    return packed_target_chunk_kb() * 1024


def packed_local_cache_kb() -> int:
    """``DAF_PACKED_LOCAL_CACHE_KB``: the read cache of packed local data, in KiB (default 65536; not a layout rule).

    Example:
        >>> import os
        >>> os.environ.pop("DAF_PACKED_LOCAL_CACHE_KB", None) and None
        >>> packed_local_cache_kb()
        65536
    """
    return _integer_variable(LOCAL_CACHE_KB_VARIABLE, DEFAULT_LOCAL_CACHE_KB)


def packed_http_cache_kb() -> int:
    """``DAF_PACKED_HTTP_CACHE_KB``: the read cache of packed data read over HTTP, in KiB (default 262144).

    Example:
        >>> import os
        >>> os.environ.pop("DAF_PACKED_HTTP_CACHE_KB", None) and None
        >>> packed_http_cache_kb()
        262144
    """
    return _integer_variable(HTTP_CACHE_KB_VARIABLE, DEFAULT_HTTP_CACHE_KB)


def http_max_coalesce_gap_kb() -> int:
    """``DAF_HTTP_MAX_COALESCE_GAP_KB``: the largest gap (KiB) between two byte ranges an HTTP read merges into one
    Range request (default: :func:`packed_target_chunk_kb`; 0 merges only adjacent ranges).

    Example:
        >>> import os
        >>> os.environ.pop("DAF_HTTP_MAX_COALESCE_GAP_KB", None) and None
        >>> os.environ.pop("DAF_PACKED_TARGET_CHUNK_KB", None) and None
        >>> http_max_coalesce_gap_kb()
        8
    """
    return _integer_variable(HTTP_MAX_COALESCE_GAP_KB_VARIABLE, packed_target_chunk_kb(), minimum=0)


def valid_compression_level_range(compression: str) -> range:
    """The levels a codec accepts (Julia's ``valid_compression_level_range``): 1-9 for blosc and gzip, 1-22 for zstd
    (level 0, "no compression" or "library default", is refused for all: packing means compressing).

    Example:
        >>> valid_compression_level_range("zstd"), valid_compression_level_range("gzip_shuffle")
        (range(1, 23), range(1, 10))
        >>> valid_compression_level_range("lzma")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafValueError: unsupported packed compression codec: :lzma
        supported codecs: :blosc_zstd_bitshuffle, :blosc_lz4_bitshuffle, :zstd_bitshuffle, :zstd, :gzip, :gzip_shuffle
    """
    if compression in ("blosc_zstd_bitshuffle", "blosc_lz4_bitshuffle", "gzip", "gzip_shuffle"):
        return range(1, 10)
    if compression in ("zstd_bitshuffle", "zstd"):
        return range(1, 23)
    supported = ", ".join(f":{name}" for name in SUPPORTED_COMPRESSION_CODECS)
    raise DafValueError(f"unsupported packed compression codec: :{compression}\nsupported codecs: {supported}",
                        daf_name=None)


def _range_text(levels: range) -> str:
    return f"{levels.start}:{levels.stop - 1}"  # (Julia's UnitRange)


class PackedCodec(NamedTuple):
    """A resolved codec (Julia's ``PackedCodec``): one of :data:`SUPPORTED_COMPRESSION_CODECS` and a level in its
    range. Build it with :func:`compressor_for`, which validates both.

    Example:
        >>> compressor_for("gzip", 9)
        PackedCodec(compression='gzip', compression_level=9)
    """

    compression: str
    compression_level: int


def compressor_for(compression: str | None = None, compression_level: int | None = None) -> PackedCodec:
    """The codec to write packed data with (Julia's ``compressor_for``): ``compression`` and ``compression_level``, or
    when not given the environment's ``DAF_PACKED_COMPRESSION`` (``zstd`` or Julia's ``:zstd``) and
    ``DAF_PACKED_COMPRESSION_LEVEL``; validated as Julia's ``PackedCodec``, with Julia's error texts.

    Example:
        >>> import os
        >>> os.environ["DAF_PACKED_COMPRESSION"] = ":zstd"
        >>> os.environ["DAF_PACKED_COMPRESSION_LEVEL"] = "22"
        >>> compressor_for()
        PackedCodec(compression='zstd', compression_level=22)
        >>> compressor_for("gzip")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafValueError: out-of-range packed compression level: 22
        for codec: :gzip
        valid range: 1:9
        >>> del os.environ["DAF_PACKED_COMPRESSION"], os.environ["DAF_PACKED_COMPRESSION_LEVEL"]
        >>> compressor_for()
        PackedCodec(compression='blosc_zstd_bitshuffle', compression_level=5)
    """
    if compression is None:
        compression = os.environ.get(COMPRESSION_VARIABLE, "").strip() or DEFAULT_COMPRESSION
    compression = compression.removeprefix(":")
    levels = valid_compression_level_range(compression)  # (also validates the codec)
    if compression_level is None:
        compression_level = _integer_variable(COMPRESSION_LEVEL_VARIABLE, DEFAULT_COMPRESSION_LEVEL, minimum=None)
    if isinstance(compression_level, bool) or not isinstance(compression_level, int | np.integer):
        raise DafValueError(f"invalid packed compression level: {compression_level!r}\n(expected an integer)",
                            daf_name=None)
    if int(compression_level) not in levels:
        raise DafValueError(f"out-of-range packed compression level: {compression_level}\nfor codec: :{compression}\n"
                            f"valid range: {_range_text(levels)}", daf_name=None)
    return PackedCodec(compression, int(compression_level))


def effective_sizeof(dtype: Any) -> int:
    """Bytes per element for sizing chunks (Julia's ``effective_sizeof``): the element size of a number or Bool, and
    :data:`STRING_SIZEOF_ESTIMATE` for strings.

    Example:
        >>> effective_sizeof("Float32"), effective_sizeof(bool), effective_sizeof(str)
        (4, 1, 16)
    """
    resolved = storage_dtype(dtype, what="packed element type") if not isinstance(dtype, np.dtype) else dtype
    return STRING_SIZEOF_ESTIMATE if resolved == STRING_DTYPE else resolved.itemsize


def chunks_for(is_packed: bool, shape: tuple[int, ...], dtype: Any) -> tuple[int, ...] | None:
    """The chunk shape of a property, in Julia (column-major) order, or None to store it flat (Julia's
    ``chunks_for``): None unless ``is_packed`` and one column (``shape[0]`` elements; only the first dimension
    counts) holds at least :func:`packed_target_chunk_bytes`; else ``(n,)`` for a vector and ``(n, 1)`` for a matrix,
    with ``n = min(target // effective_sizeof(dtype), shape[0])``.

    Example:
        >>> import os
        >>> os.environ.pop("DAF_PACKED_TARGET_CHUNK_KB", None) and None
        >>> chunks_for(True, (5000,), "Float32"), chunks_for(True, (600, 10**6), "Float64")
        ((2048,), None)
    """
    if len(shape) not in (1, 2):
        raise DafValueError(f"packed data has 1 or 2 dimensions, not: {len(shape)} (shape: {shape})", daf_name=None)
    if not is_packed:
        return None
    target_bytes = packed_target_chunk_bytes()
    element_bytes = effective_sizeof(dtype)
    if int(shape[0]) * element_bytes < target_bytes:
        return None
    rows = min(target_bytes // element_bytes, int(shape[0]))
    return (rows,) if len(shape) == 1 else (rows, 1)


def resolve_packed(per_call: bool | None, default: bool) -> bool:
    """Whether a write packs (Julia's ``resolve_packed``): the call's ``packed=`` if given, else the data set's
    default (its constructor's ``packed=``). Anything but ``True``, ``False`` or ``None`` is refused.

    Example:
        >>> resolve_packed(None, True), resolve_packed(False, True)
        (True, False)
    """
    if per_call is None:
        return bool(default)
    if not isinstance(per_call, bool | np.bool_):
        raise DafValueError(f"invalid packed: {per_call!r}\n(expected True, False or None: the data set's default)",
                            daf_name=None)
    return bool(per_call)


def validated_packed_default(packed: Any) -> bool:
    """A data set constructor's ``packed=`` (Julia's ``packed_default``): ``True`` or ``False``, else refused.

    Example:
        >>> validated_packed_default(True)
        True
        >>> validated_packed_default("yes")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafValueError: invalid packed: 'yes'
        (expected True or False)
    """
    if not isinstance(packed, bool | np.bool_):
        raise DafValueError(f"invalid packed: {packed!r}\n(expected True or False)", daf_name=None)
    return bool(packed)
