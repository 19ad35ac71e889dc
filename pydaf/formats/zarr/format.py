"""ZarrDaf: a Daf data set as a Zarr v3 hierarchy, byte-compatible with Julia's ``ZarrDaf``: a directory
(``x.daf.zarr``), a ZIP archive holding one data set at its root (``x.daf.zarr.zip``) or several in groups
(``x.dafs.zarr.zip#/group``). Every array is one uncompressed chunk, memory-mapped when read; writes are atomic per
property (an archive is append-only, through :mod:`pydaf.formats.zip.store`); nothing read is trusted. The same
reader reads a directory served over HTTP (:mod:`pydaf.formats.http.zarr`, its nodes and shards read by HTTP).

Design: docs/design/zarr.md; the bytes: docs/spec/FORMATS.md §5."""

from __future__ import annotations

import errno
import itertools
import json
import math
import os
import shutil
import stat
import struct
import threading
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

import numpy as np

from ..._os.byte_sources import BufferByteSource, ByteSource
from ..._os.files import file_kind, open_regular_file, read_regular_file
from ..._os.locks import LockHold, ProcessRegistry, hold_lock
from ..._os.maps import FileKey, file_key, map_file, map_region
from ..._os.write_errors import storage_error
from ...abc.format import CacheGroup, StoredMatrix, StoredVector, parse_mode, weakest_cache_group
from ...abc.reorder import ReorderThroughModule
from ...core.packed_settings import chunks_for, compressor_for, validated_packed_default
from ...errors import (
    DafAppendOnlyError,
    DafClosedError,
    DafError,
    DafFormatError,
    DafLockedError,
    DafMissingError,
    DafModeError,
    DafNameError,
    DafNotDafError,
    DafPathError,
    DafStorageError,
    DafValueError,
    DafZarrVersionError,
)
from ...sparse import SparseMatrixCSC, SparseVector, selected_column_runs
from ...storage_types import STRING_DTYPE, StorageScalar, scalar_dtype
from ..packed import PackedLayout, packed_layout, read_packed_array
from ..packed.shard import ChunkCache, LazyPackedArray
from ..packed.shard_writer import encode_packed_dense_array, sharded_array_metadata
from ..paths import split_container_path
from ..registry import FormatEntry, PersistentDaf, register_format
from ..stored import StoredFormat
from ..zip.store import ZipAppend, ZipStore, acquire_zip_store
from . import reorder as _reorder

_T = TypeVar("_T")

MAJOR_VERSION = 1
MINOR_VERSION = 0

_DATA_TYPES: dict[str, np.dtype] = {name: np.dtype(name) for name in (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")}
_DATA_TYPE_NAMES: dict[np.dtype, str] = {dtype: name for name, dtype in _DATA_TYPES.items()}

#: A group's ``zarr.json`` as Zarr.jl writes it, and its entry in the consolidated metadata as DAF.jl writes it.
_GROUP_FILE = b'{"node_type":"group","zarr_format":3}'
_GROUP_ENTRY = '{"zarr_format":3,"node_type":"group"}'

_MAX_METADATA_BYTES = 1 << 28  # a zarr.json larger than this is not metadata (the root of a million nodes is ~500 MB)
_MAX_CHUNKS = 1 << 20  # chunks of one foreign array (pydaf and Julia write one)
_MAX_GZIP_RATIO = 1100

_HIDDEN_MARK = ".pydaf-"

#: The most UTF-8 bytes of one name (an axis, a property): a node's hidden temporary, backup or deleted copy
#: (``.<name>.pydaf-deleted-<pid>-<count>``) must still be a file name (255 bytes), in a directory or once an archive
#: is unzipped into one.
_MAX_NAME_BYTES = 200
#: Names a node can't have: every group's own metadata file is ``<group>/zarr.json`` (Zarr v2's ``.zarray``,
#: ``.zgroup``, ``.zattrs`` and pydaf's hidden files start with ``.``, which no Daf name does).
_RESERVED_NAMES = frozenset({"zarr.json"})
#: A ``vlen-utf8`` chunk stores counts and lengths as ``u32``.
_MAX_VLEN = 0xFFFFFFFF

_V2_HINT = ("Zarr v2 store at: {path}\nDataAxesFormats requires a Zarr v3 store.\nConvert via `python -m zarr "
            "v2_to_v3 <path>` (zarr-python 3.1.2+),\nthen reopen.")


def split_zarr_path(path: str | os.PathLike) -> tuple[str, str | None, bool]:
    """Julia's ``parse_zarr_path``: ``(container, group, is_zip)`` for ``x.daf.zarr`` (a directory),
    ``x.daf.zarr.zip`` (a ZIP archive with the data set at its root) and ``x.dafs.zarr.zip#/group`` (a group of a ZIP
    archive); anything else is a :class:`~pydaf.DafPathError`
    (:func:`~pydaf.formats.paths.split_container_path`).

    Example:
        >>> split_zarr_path("cells.daf.zarr"), split_zarr_path("all.dafs.zarr.zip#/cells/raw")
        (('cells.daf.zarr', None, False), ('all.dafs.zarr.zip', 'cells/raw', True))
    """
    container, group = split_container_path(path, singular=(".daf.zarr.zip",), plural=".dafs.zarr.zip",
                                            format="ZarrDaf", directory=".daf.zarr")
    return container, group, container.endswith(".zip")


def _is_replaceable_directory(path: str) -> bool:
    """Whether mode ``w`` may erase the directory ``path``: it is empty, a Zarr group that is a Daf data set, or what a
    killed creation or truncation of one leaves (its four top groups, hidden temporaries); anything else is somebody's
    data.

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> _is_replaceable_directory(folder)
        True
        >>> open(os.path.join(folder, "notes.txt"), "w").close()
        >>> _is_replaceable_directory(folder)
        False
    """
    entries = [entry for entry in os.listdir(path) if not entry.startswith(".")]
    if "zarr.json" not in entries:
        return set(entries) <= {"scalars", "axes", "vectors", "matrices"}
    try:  # (a FIFO would block, a link lead elsewhere: neither is ours)
        metadata = json.loads(read_regular_file(os.path.join(path, "zarr.json"), what="the root zarr.json",
                                                limit=_MAX_METADATA_BYTES, follow_symlinks=False))
    except (OSError, ValueError, DafError):
        return False
    attributes = metadata.get("attributes") if isinstance(metadata, dict) else None
    return isinstance(attributes, dict) and "daf" in attributes and metadata.get("node_type") == "group"


def _is_node_name(name: object) -> bool:
    """Whether a name can be one node of the hierarchy (the core's rule for Daf names)."""
    return isinstance(name, str) and bool(name) and not name.startswith(".") and not any(
        character in name for character in ("/", "\\", "\0", "\n"))


def _is_metadata_key(name: str) -> bool:
    """Whether a ZIP entry is a node's ``zarr.json``: the entry that ends each appended batch."""
    return name == "zarr.json" or name.endswith("/zarr.json")


def _parent(node: str) -> str:
    return node.rpartition("/")[0]


def name_problem(name: str) -> str | None:
    """Why a ZarrDaf node can't have the (Daf-valid) ``name``, or ``None``: each name is a file name in a directory
    (or an archive unzipped into one), so it must be UTF-8 of at most ``_MAX_NAME_BYTES`` bytes, and not the name of
    a group's own metadata file.

    Example:
        >>> name_problem("age") is None, name_problem("zarr.json"), name_problem("x" * 201)
        (True, 'a name reserved for Zarr metadata', 'longer than 200 UTF-8 bytes (201)')
    """
    if name in _RESERVED_NAMES:
        return "a name reserved for Zarr metadata"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "not encodable as UTF-8 (it holds a lone surrogate)"
    if size > _MAX_NAME_BYTES:
        return f"longer than {_MAX_NAME_BYTES} UTF-8 bytes ({size})"
    return None


def array_metadata(dtype: np.dtype, shape: tuple[int, ...]) -> str:
    """The ``zarr.json`` of a flat (one chunk, uncompressed) array as Zarr.jl writes it, for the Zarr (C-order) shape;
    a zero-length dimension gets a chunk length of 1 (Zarr requires chunks of at least 1).

    Example:
        >>> array_metadata(np.dtype(np.int32), (1,))[:52]
        '{"chunk_grid":{"configuration":{"chunk_shape":[1]},"'
    """
    if dtype == STRING_DTYPE:
        data_type, codecs, fill = "string", '[{"configuration":{},"name":"vlen-utf8"}]', '""'
    else:
        data_type, codecs = _DATA_TYPE_NAMES[dtype], '[{"configuration":{"endian":"little"},"name":"bytes"}]'
        fill = "false" if dtype == np.bool_ else "0.0" if dtype.kind == "f" else "0"
    chunks = ",".join(str(max(size, 1)) for size in shape)
    dimensions = ",".join(str(size) for size in shape)
    return (f'{{"chunk_grid":{{"configuration":{{"chunk_shape":[{chunks}]}},"name":"regular"}},'
            '"chunk_key_encoding":{"configuration":{"separator":"/"},"name":"default"},'
            f'"codecs":{codecs},"data_type":"{data_type}","fill_value":{fill},"node_type":"array",'
            f'"shape":[{dimensions}],"zarr_format":3}}')


def encode_strings(values: Iterable[str]) -> bytes:
    """The ``vlen-utf8`` encoding of strings: a little-endian ``u32`` count, then each string's ``u32`` byte length
    and UTF-8 bytes.

    Example:
        >>> encode_strings(["hello"]).hex()
        '010000000500000068656c6c6f'
    """
    encoded = [value.encode("utf-8") for value in values]
    if len(encoded) > _MAX_VLEN or any(len(value) > _MAX_VLEN for value in encoded):
        raise DafValueError(f"a string of more than {_MAX_VLEN} UTF-8 bytes (or more than {_MAX_VLEN} strings in "
                            "one array): Zarr's vlen-utf8 codec stores lengths and counts as 32-bit numbers")
    lengths = struct.pack(f"<{len(encoded)}I", *map(len, encoded))
    parts = [struct.pack("<I", len(encoded))]
    for index, value in enumerate(encoded):
        parts.append(lengths[4 * index:4 * index + 4])
        parts.append(value)
    return b"".join(parts)


def decode_strings(data: bytes, count: int, what: str) -> np.ndarray:
    """The ``count`` strings of a ``vlen-utf8`` chunk, as an ``object`` array; a malformed chunk (wrong count, lengths
    running past its end, trailing bytes, invalid UTF-8) is a :class:`~pydaf.DafFormatError` naming ``what``.

    Example:
        >>> decode_strings(encode_strings(["a", "ünï"]), 2, "example").tolist()
        ['a', 'ünï']
    """
    size = len(data)
    if size < 4 or struct.unpack_from("<I", data)[0] != count or 4 + 4 * count > size:
        raise DafFormatError(f"the vlen-utf8 chunk of the {what}\ndoes not hold {count} strings in its {size} bytes")
    values: list[str] = []
    unpack = struct.Struct("<I").unpack_from
    position = 4
    try:
        for _ in range(count):
            (length,) = unpack(data, position)
            end = position + 4 + length
            if end > size:
                raise DafFormatError(f"the vlen-utf8 chunk of the {what}\nhas a string running past its end")
            values.append(data[position + 4:end].decode("utf-8"))
            position = end
    except UnicodeDecodeError as error:
        raise DafFormatError(f"the vlen-utf8 chunk of the {what}\nholds invalid UTF-8 ({error})") from error
    if position != size:
        raise DafFormatError(f"the vlen-utf8 chunk of the {what}\nhas {size - position} bytes past its last string")
    result = np.empty(count, dtype=object)
    result[:] = values
    return result


@dataclass(frozen=True)
class _Array:
    """What pydaf needs of an array's ``zarr.json``, checked."""

    dtype: np.dtype  # native-endian numbers, or STRING_DTYPE
    shape: tuple[int, ...]  # the Zarr (C-order) shape
    chunks: tuple[int, ...]
    separator: str
    v2_keys: bool
    big_endian: bool
    gzip: bool
    fill: Any
    #: A packed (sharded) array's layout (Julia order), read as Julia's ZarrDaf reads it: one shard, through its index.
    packed: PackedLayout | None = None

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def flat(self) -> bool:
        """One uncompressed little-endian chunk covering the array exactly: mappable."""
        return self.chunks == self.shape and not (self.gzip or self.big_endian) and self.packed is None

    def chunk_key(self, index: tuple[int, ...]) -> str:
        coordinates = self.separator.join(str(coordinate) for coordinate in index)
        if self.v2_keys:
            return coordinates or "0"
        return f"c{self.separator}{coordinates}" if coordinates else "c"


def _fill_value(value: Any, dtype: np.dtype, what: str) -> Any:
    if dtype == STRING_DTYPE:
        if not isinstance(value, str):
            raise DafFormatError(f"invalid fill_value: {value!r}\nfor the string {what}")
        return value
    try:
        if isinstance(value, str) and value in ("NaN", "Infinity", "-Infinity") and dtype.kind == "f":
            return dtype.type(float(value.replace("inity", "")))
        if isinstance(value, bool | int | float):
            converted = dtype.type(value)
            if converted != value and not (isinstance(value, float) and math.isnan(value)):
                raise ValueError(value)
            return converted
    except (ValueError, OverflowError, TypeError):
        pass
    raise DafFormatError(f"invalid fill_value: {value!r}\nfor the {dtype} {what}")


def _parse_array(metadata: dict[str, Any], what: str) -> _Array:
    """Check an array's ``zarr.json`` and extract what reading it needs (a :class:`~pydaf.DafFormatError` naming
    ``what`` for anything pydaf can't read exactly)."""

    def fail(problem: str) -> DafFormatError:
        return DafFormatError(f"{problem}\nin the zarr.json of the {what}")

    data_type = metadata.get("data_type")
    if data_type == "string":
        dtype = STRING_DTYPE
    elif isinstance(data_type, str) and data_type in _DATA_TYPES:
        dtype = _DATA_TYPES[data_type]
    else:
        raise fail(f"unsupported data_type: {data_type!r}")
    shape = metadata.get("shape")
    if not isinstance(shape, list) or len(shape) > 2 or not all(
            isinstance(size, int) and not isinstance(size, bool) and size >= 0 for size in shape):
        raise fail(f"invalid shape: {shape!r}")
    grid = metadata.get("chunk_grid")
    chunks = grid.get("configuration", {}).get("chunk_shape") if isinstance(grid, dict) else None
    if not isinstance(grid, dict) or grid.get("name") != "regular" or not isinstance(chunks, list) or \
            len(chunks) != len(shape) or not all(isinstance(size, int) and not isinstance(size, bool) and size >= 1
                                                 for size in chunks):
        raise fail(f"unsupported chunk_grid: {grid!r}")
    encoding = metadata.get("chunk_key_encoding", {"name": "default"})
    name = encoding.get("name") if isinstance(encoding, dict) else None
    separator = (encoding.get("configuration") or {}).get("separator", "/" if name == "default" else ".") \
        if isinstance(encoding, dict) else None
    if name not in ("default", "v2") or separator not in ("/", "."):
        raise fail(f"unsupported chunk_key_encoding: {encoding!r}")
    if metadata.get("storage_transformers"):
        raise fail("unsupported storage_transformers")
    codecs = metadata.get("codecs")
    if not isinstance(codecs, list) or not codecs or not all(isinstance(codec, dict) for codec in codecs):
        raise fail(f"invalid codecs: {codecs!r}")
    names = [codec.get("name") for codec in codecs]
    if "sharding_indexed" in names:
        packed = _sharding_layout(codecs, dtype, tuple(shape), tuple(chunks), fail)
        return _Array(dtype, tuple(shape), tuple(chunks), separator, name == "v2", False, False,
                      _fill_value(metadata.get("fill_value"), dtype, what), packed)
    expected = "vlen-utf8" if dtype == STRING_DTYPE else "bytes"
    if names[0] != expected or len(names) > 2 or (len(names) == 2 and names[1] != "gzip"):
        raise fail(f"unsupported codecs: {names} (pydaf reads [{expected}] and [{expected}, gzip])")
    endian = (codecs[0].get("configuration") or {}).get("endian", "little")
    if endian not in ("little", "big"):
        raise fail(f"invalid endian: {endian!r}")
    return _Array(dtype, tuple(shape), tuple(chunks), separator, name == "v2", endian == "big" and dtype.itemsize > 1
                  if dtype != STRING_DTYPE else False, len(names) == 2,
                  _fill_value(metadata.get("fill_value"), dtype, what))


def _sharding_layout(codecs: list[dict[str, Any]], dtype: np.dtype, shape: tuple[int, ...], chunks: tuple[int, ...],
                     fail: Callable[[str], DafFormatError]) -> PackedLayout:
    """The layout of a packed (sharded) array, as Julia writes it (docs/spec/FORMATS.md §5.5): one shard holding the
    whole array, its inner chunks ``[bytes | vlen-utf8, gzip | zstd | blosc]`` (the shard shape need not be a multiple
    of the inner chunk shape: edge chunks are padded, as Zarr.jl reads them), its index ``[bytes, crc32c]``."""
    configuration = codecs[0].get("configuration") if len(codecs) == 1 else None
    if not isinstance(configuration, dict):
        raise fail(f"unsupported codecs: {[codec.get('name') for codec in codecs]} (pydaf reads sharding_indexed as "
                   "the only codec)")
    inner_shape = configuration.get("chunk_shape")
    # (one shard holding the whole array: Julia's is the shape itself, pydaf's the shape rounded up to whole inner
    # chunks, which zarr-python also reads)
    rounded = [-(-size // chunk) * chunk for size, chunk in zip(shape, inner_shape, strict=True)] if isinstance(
        inner_shape, list) and len(inner_shape) == len(shape) and all(
        isinstance(chunk, int) and chunk > 0 for chunk in inner_shape) else None
    if chunks != shape and list(chunks) != rounded:
        raise fail(f"a sharded array whose shard (chunk_shape {list(chunks)}) is not the whole array (shape "
                   f"{list(shape)}); pydaf reads Julia's packed arrays, one shard holding the whole array")
    inner = configuration.get("codecs")
    expected = "vlen-utf8" if dtype == STRING_DTYPE else "bytes"
    if not isinstance(inner, list) or len(inner) != 2 or not all(isinstance(codec, dict) for codec in inner) or \
            inner[0].get("name") != expected or (inner[0].get("configuration") or {}).get("endian", "little") != \
            "little":
        raise fail(f"unsupported inner codecs of a shard: {inner!r} (pydaf reads [{expected}, gzip | zstd | blosc], "
                   "little-endian)")
    settings = inner[1].get("configuration") or {}
    if inner[1].get("name") in ("gzip", "zstd"):
        compression, level = inner[1]["name"], settings.get("level")
    elif inner[1].get("name") == "blosc" and settings.get("cname") in ("zstd", "lz4"):
        compression, level = f"blosc_{settings['cname']}_bitshuffle", settings.get("clevel")
    else:
        raise fail(f"unsupported compression of a shard: {inner[1]!r} (pydaf reads gzip, zstd and blosc with zstd or "
                   "lz4)")
    index_codecs = configuration.get("index_codecs")
    if not isinstance(index_codecs, list) or [codec.get("name") if isinstance(codec, dict) else None
                                              for codec in index_codecs] != ["bytes", "crc32c"] or \
            (index_codecs[0].get("configuration") or {}).get("endian", "little") != "little":
        raise fail(f"unsupported index_codecs of a shard: {index_codecs!r} (pydaf reads [bytes, crc32c])")
    return packed_layout(dtype, shape[::-1], inner_shape[::-1] if isinstance(inner_shape, list) else inner_shape,
                         compression, level, invalid=fail, check_level=False,
                         index_location=configuration.get("index_location", "end"))


def _all_fill(values: np.ndarray) -> bool:
    """Whether every element equals Zarr.jl's fill value (``isequal(zero(T), x)``: bitwise zero for numbers, so
    ``-0.0`` is kept; ``""`` for strings): such a chunk is not written."""
    if values.dtype == STRING_DTYPE:
        return not any(values.flat)
    return not np.ascontiguousarray(values).reshape(-1).view(np.uint8).any()


def _gunzip(data: bytes, expected: int | None, what: str) -> bytes:
    """A gzip chunk's bytes (``expected`` of them, if known), refusing one that would inflate past what gzip can
    compress into its size (a bomb) before inflating it."""
    limit = max(len(data), 1) * _MAX_GZIP_RATIO
    if expected is not None and expected > limit:
        raise DafFormatError(f"a gzip chunk of the {what}\nclaims {expected} bytes from {len(data)}")
    decompressor = zlib.decompressobj(31)
    try:
        raw = decompressor.decompress(data, (limit if expected is None else expected) + 1)
    except zlib.error as error:
        raise DafFormatError(f"a corrupt gzip chunk of the {what}\n({error})") from error
    if decompressor.unconsumed_tail:
        raise DafFormatError(f"a gzip chunk of the {what}\ninflates past {limit} bytes")
    return raw


# Where the nodes live: a directory tree or the entries of a ZIP archive.


class _DirectoryNodes:
    """The nodes of a data set in a directory, addressed by ``/``-separated keys relative to its root; one per
    directory per process (:func:`_directory_nodes`), shared by its handles with the consolidated metadata kept for
    writing and this process's writer lock."""

    #: Nodes are deleted and replaced in place; the root keeps consolidated metadata (Julia's and zarr-python's index).
    supports_rewrites = True
    consolidates = True

    def __init__(self, root: str) -> None:
        self.root = root
        self._real = os.path.realpath(root)
        self._counter = itertools.count()
        self._writers = 0
        self._hold: LockHold | None = None  # (this process's writer lock, while a writable handle is open)
        #: The root group's attributes, and (once opened writable) its consolidated metadata: node -> descriptor.
        self.attributes: dict[str, Any] = {}
        self.consolidated: dict[str, str] | None = None
        #: The length of each axis read so far (shared: a handle's axis change is seen by the others).
        self.axis_lengths: dict[str, int] = {}
        #: Serialises changes of the consolidated metadata (a handle may open while another thread writes).
        self.mutex = threading.RLock()
        #: The nodes this process renamed aside for an overwrite in flight: their backups are not read in their place
        #: (any other backup is the committed value of an overwrite a killed writer never finished, which is read).
        self.aside: set[str] = set()
        #: The nodes the root's consolidated metadata lists, by parent, with the identity of the root they were read
        #: from (see :meth:`recorded`).
        self._record: tuple[tuple[int, ...], dict[str, set[str]]] | None = None
        #: The nodes whose delete, half done by a killed writer, :meth:`recover` finished (listed until the writable
        #: open that recovered them rewrites the root).
        self.finished_deletes: set[str] = set()

    def acquire_writer(self) -> bool:
        """Count one more writable handle, taking this process's writer lock on the directory for the first (an
        exclusive :mod:`~pydaf._os.locks` lock); returns whether it was newly taken (the first writer of this process,
        which recovers what a killed one left)."""
        with _directories.mutex:
            if self._hold is not None:
                self._writers += 1
                return False
            self._hold = hold_lock(self.root, exclusive=True, what="ZarrDaf directory")
            self._writers += 1
            return True

    def hold_count(self) -> int:
        """How many writable handles of this process hold the writer lock (none: another process may write)."""
        with _directories.mutex:
            return self._writers

    def release_writer(self) -> None:
        """Count one writable handle less; the last one releases the writer lock."""
        with _directories.mutex:
            self._writers -= 1
            if self._writers == 0 and self._hold is not None:
                self._hold.release()
                self._hold = None

    def path(self, key: str) -> str:
        return os.path.join(self.root, *key.split("/")) if key else self.root

    def locate(self, key: str) -> str:
        """The path holding a key: its own, or, where a node of it is missing but its backup is there (an overwrite
        whose writer was killed before its new value was in place, and that no writable open recovered yet), the
        same key in the backup, which holds the committed value (what recovery would put back)."""
        path = self.path(key)
        if not key or os.path.lexists(path):
            return path
        parts = key.split("/")
        current = self.root
        for index, part in enumerate(parts):
            candidate = os.path.join(current, part)
            if not os.path.lexists(candidate):
                backup = os.path.join(current, f".{part}{_HIDDEN_MARK}backup")
                if "/".join(parts[:index + 1]) in self.aside or not os.path.isdir(backup):
                    return path
                candidate = backup
            current = candidate
        return current

    def _confined(self, key: str) -> str:
        """The path of a key (:meth:`locate`), refusing one that a link makes resolve out of the directory."""
        path = self.locate(key)
        self._refuse_escape(path, key)
        return path

    def _escape(self, path: str) -> str | None:
        """Where a path that links out of the directory resolves to (``None`` for a path inside it)."""
        real = os.path.realpath(path)
        return None if real == self._real or real.startswith(self._real + os.sep) else real

    def _refuse_escape(self, path: str, key: str) -> None:
        """Refuse a path that a link makes resolve out of the directory: nothing outside is read or written."""
        real = self._escape(path)
        if real is not None:
            raise DafFormatError(f"the file: {key}\nin the ZarrDaf directory: {self.root}\nis a link out of the "
                                 f"directory (to: {real})")

    def recorded(self, parent: str, *, fresh: bool = False) -> set[str]:
        """The children of the node ``parent`` that the root's consolidated metadata lists. A pydaf writer writes a
        node before it lists it and unlists it before it removes it, so a listed node is a committed one: missing, or
        not a folder with a regular ``zarr.json``, it is damage (:meth:`missing`), never what a killed writer leaves.
        Empty without consolidated metadata (Julia may write none: then the nodes that are there are read). Cached by
        the identity of the root's file (``fresh``: read again)."""
        try:
            status = os.stat(os.path.join(self.root, "zarr.json"))
        except OSError:
            return set()
        identity = (status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns)
        record = self._record
        if fresh or record is None or record[0] != identity:
            record = (identity, self._read_record())
            self._record = record
        return record[1].get(parent, set())

    def _read_record(self) -> dict[str, set[str]]:
        try:
            data = self.read("zarr.json", _MAX_METADATA_BYTES)
            metadata = json.loads(data) if data is not None else None
        except (DafError, ValueError, UnicodeDecodeError):
            return {}  # (the root's own problems are refused where the root is read)
        consolidated = metadata.get("consolidated_metadata") if isinstance(metadata, dict) else None
        listed = consolidated.get("metadata") if isinstance(consolidated, dict) else None
        by_parent: dict[str, set[str]] = {}
        for key in listed if isinstance(listed, dict) else ():
            parent, _, name = key.rpartition("/")
            if _is_node_name(name):
                by_parent.setdefault(parent, set()).add(name)
        return by_parent

    def missing(self, node: str) -> DafFormatError | None:
        """The error for a node the root's consolidated metadata lists (:meth:`recorded`) that is not a folder with a
        regular ``zarr.json``: the data set is damaged (it must never read as if the node did not exist); ``None`` for
        a node not listed, or the node of an overwrite this process has in flight (listed until it is unlisted)."""
        parent, _, name = node.rpartition("/")
        if name not in self.recorded(parent) or name not in self.recorded(parent, fresh=True):
            return None
        if any(node == other or node.startswith(other + "/") for other in (*self.aside, *self.finished_deletes)):
            return None
        if self._is_metadata_file(self.locate(f"{node}/zarr.json"), f"{node}/zarr.json"):
            return None  # (there after all: another process's overwrite committed while it was looked for)
        try:
            siblings = os.listdir(self.locate(parent))
        except OSError:
            siblings = []
        if any(sibling.startswith(f".{name}{_HIDDEN_MARK}deleted-") for sibling in siblings):
            return None  # (a delete half done by a killed writer of an earlier pydaf, which unlisted nodes last)
        return DafFormatError(f"the node: {node}\nof the ZarrDaf directory: {self.root}\nis listed in the "
                              f"consolidated metadata of its root zarr.json (it was committed), but "
                              f"{self._node_problem(node)}\n(the data set is damaged: restore the node from a copy; if "
                              "it was removed on purpose, remove the consolidated_metadata from the root zarr.json, "
                              "and the nodes that are there are read)")

    def _node_problem(self, node: str) -> str:
        """What is wrong at a node that should be a folder holding a ``zarr.json``, in words."""
        path = self.locate(node)
        try:
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                real = self._escape(path)
                if real is not None:
                    return f"it is a link out of the directory (to: {real})"
                mode = os.stat(path).st_mode
        except FileNotFoundError:
            return "it is a dangling symbolic link" if os.path.islink(path) else "its folder is missing"
        except NotADirectoryError:
            return "a folder above it is not a folder"
        except OSError as error:
            return "it is a loop of symbolic links" if error.errno == errno.ELOOP else \
                f"its folder can't be read ({error.strerror})"
        if not stat.S_ISDIR(mode):
            return f"it is {file_kind(mode)}, not a folder"
        metadata = os.path.join(path, "zarr.json")
        if os.path.islink(metadata) and not os.path.exists(metadata):
            return "its zarr.json is a dangling symbolic link"
        return "its zarr.json is missing"

    def _unreadable(self, key: str, error: OSError) -> DafError:
        if error.errno == errno.ENAMETOOLONG:
            return DafFormatError(f"a path too long for this file system: {key}\nin the ZarrDaf directory: {self.root}")
        if error.errno == errno.ELOOP:
            return DafFormatError(f"a loop of symbolic links at: {key}\nin the ZarrDaf directory: {self.root}")
        return storage_error(error, f"can't read the file: {key}\nin the ZarrDaf directory: {self.root}")

    def read(self, key: str, limit: int | None = None) -> bytes | None:
        """The bytes of a file (at most ``limit`` of them), or ``None`` if it is missing; a FIFO, socket, device or
        directory planted there is refused without blocking."""
        path = self._confined(key)
        try:
            return read_regular_file(path, what=f"the file: {key}\nin the ZarrDaf directory: {self.root}",
                                     limit=(1 << 62) if limit is None else limit)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except DafError:
            raise
        except OSError as error:
            raise self._unreadable(key, error) from error

    def map(self, key: str, dtype: np.dtype, count: int) -> tuple[np.ndarray, CacheGroup] | None:
        """A read-only map of a chunk file of ``count`` elements, or ``None`` if it is missing; a file of another
        size (or not a regular file) is a :class:`~pydaf.DafFormatError`, before anything is mapped."""
        path = self._confined(key)
        try:
            fd, status = open_regular_file(path, what=f"the chunk: {key}\nin the ZarrDaf directory: {self.root}")
        except (FileNotFoundError, NotADirectoryError):
            return None
        except DafError:
            raise
        except OSError as error:
            raise self._unreadable(key, error) from error
        try:
            expected = count * dtype.itemsize
            if status.st_size != expected:
                raise DafFormatError(f"the chunk: {key}\nin the ZarrDaf directory: {self.root}\nhas "
                                     f"{status.st_size} bytes instead of {expected} ({count} x {dtype})")
            # (mapped from the descriptor just checked: reopening the path could meet a file planted meanwhile)
            return map_file(fd, path, 0, expected, writable=False).view(dtype), CacheGroup.MappedData
        finally:
            os.close(fd)

    def size(self, key: str) -> int | None:
        try:
            return os.stat(self._confined(key)).st_size
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as error:
            raise self._unreadable(key, error) from error

    def _followed_mode(self, path: str, key: str) -> int:
        """The mode of what is at ``path``, through a link that stays in the directory (one out of it is refused)."""
        mode = os.lstat(path).st_mode
        if stat.S_ISLNK(mode):
            self._refuse_escape(path, key)
            mode = os.stat(path).st_mode
        return mode

    def _is_metadata_file(self, path: str, key: str) -> bool:
        """Whether a node's ``zarr.json`` is there; anything but a regular file there (a FIFO, a folder, ...) is
        refused, rather than the node silently left out."""
        try:
            mode = self._followed_mode(path, key)
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as error:
            if error.errno == errno.ENAMETOOLONG:
                return False  # (a name no file can have: no such node)
            raise self._unreadable(key, error) from error
        if not stat.S_ISREG(mode):
            raise DafFormatError(f"not a regular file ({file_kind(mode)}): the file: {key}\nin the ZarrDaf "
                                 f"directory: {self.root}")
        return True

    def has_node(self, node: str) -> bool:
        """Whether a node is there (a folder with a regular ``zarr.json``, inside the directory); a node the
        consolidated metadata lists that is not is refused (:meth:`missing`), as is one linked out of the directory."""
        key = f"{node}/zarr.json" if node else "zarr.json"
        path = self.locate(key)
        if self._is_metadata_file(path, key):
            self._refuse_escape(path, key)
            return True
        if node:
            self._refuse_escape(self.locate(node), node)
            missing = self.missing(node)
            if missing is not None:
                raise missing
            parent, _, name = node.rpartition("/")
            if name in self.recorded(parent):  # (listed yet not missing: an overwrite committed meanwhile)
                return self._is_metadata_file(self.locate(key), key)
        return False

    def identity(self, node: str) -> tuple[int, int, int] | None:
        """What tells whether a node's folder was replaced (an overwrite renames a new folder in) or deleted."""
        try:
            status = os.stat(self.locate(node))
        except OSError:
            return None
        return status.st_dev, status.st_ino, status.st_ctime_ns

    def exists(self, key: str) -> bool:
        """Whether anything at all is at a key (a node, a file, a folder, a link)."""
        return os.path.lexists(self.locate(key))

    def entries(self, node: str) -> set[str]:
        """The names of everything in a node's folder (files and folders, nodes or not; hidden ones left out)."""
        try:
            return {name for name in os.listdir(self.locate(node)) if not name.startswith(".")}
        except (FileNotFoundError, NotADirectoryError):
            return set()
        except OSError as error:
            raise self._unreadable(node, error) from error

    def _is_child(self, path: str, child: str) -> bool:
        """Whether an entry of a group's folder is a node (a folder with a regular ``zarr.json``); a regular file is
        none (the root's own ``zarr.json``, ...), a folder without ``zarr.json`` none yet (a killed group creation);
        a FIFO, socket, device, link loop or link out of the directory is refused, never silently left out."""
        try:
            mode = self._followed_mode(path, child)
        except (FileNotFoundError, NotADirectoryError):
            return False  # (gone since listed, or a dangling link: refused by the caller if it is listed)
        except OSError as error:
            raise self._unreadable(child, error) from error
        if stat.S_ISREG(mode):
            return False
        if not stat.S_ISDIR(mode):
            raise DafFormatError(f"not a folder ({file_kind(mode)}): the node: {child}\nin the ZarrDaf directory: "
                                 f"{self.root}")
        return self._is_metadata_file(os.path.join(path, "zarr.json"), f"{child}/zarr.json")

    def children(self, node: str) -> set[str]:
        """The names of the nodes in a group; a node the consolidated metadata lists that is not there is refused
        (:meth:`missing`), never silently left out."""
        folder = self.locate(node)
        try:
            if node:
                self._refuse_escape(folder, node)
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            missing = self.missing(node) if node else None
            if missing is not None:
                raise missing from None
            names = []
        except OSError as error:
            raise self._unreadable(node, error) from error
        found = {name for name in names if _is_node_name(name) and self._is_child(
            os.path.join(folder, name), f"{node}/{name}".lstrip("/"))}
        # (and the nodes an overwrite that a killed writer never finished holds in their backups: see locate)
        suffix = f"{_HIDDEN_MARK}backup"
        for name in names:
            original = name[1:-len(suffix)]
            if name.startswith(".") and name.endswith(suffix) and _is_node_name(original) and original not in found \
                    and f"{node}/{original}".lstrip("/") not in self.aside \
                    and not os.path.lexists(os.path.join(folder, original)) \
                    and os.path.isfile(os.path.join(folder, name, "zarr.json")):
                found.add(original)
        for name in self.recorded(node) - found:
            child = f"{node}/{name}" if node else name
            missing = self.missing(child)
            if missing is not None:
                raise missing
            if self._is_metadata_file(self.locate(f"{child}/zarr.json"), f"{child}/zarr.json"):
                found.add(name)  # (an overwrite committed while the folder was listed)
        return found

    def hidden(self, node: str, name: str, kind: str) -> str:
        """The path of a hidden ``kind`` (a temporary, a backup, ...) of the child ``name`` of ``node``."""
        return os.path.join(self.path(node), f".{name}{_HIDDEN_MARK}{kind}")

    def backup(self, node: str) -> str:
        parent, _, name = node.rpartition("/")
        return self.hidden(parent, name, "backup")

    def begin(self, node: str) -> _DirectoryWriter:
        return _DirectoryWriter(self, node)

    def make_group(self, node: str) -> None:
        """Create a group (and its zarr.json) if it does not exist yet (never through a link out of the directory)."""
        self._confined(node)
        folder = self.path(node)
        os.makedirs(folder, exist_ok=True)
        if not os.path.isfile(os.path.join(folder, "zarr.json")):
            self.write_file(f"{node}/zarr.json", _GROUP_FILE)

    def write_file(self, key: str, data: bytes) -> None:
        """Write one file atomically (a temporary, renamed into place)."""
        path = self.path(key)
        folder, name = os.path.split(path)
        temporary = os.path.join(folder, f".{name}{_HIDDEN_MARK}tmp-{os.getpid()}-{next(self._counter)}")
        try:
            with open(temporary, "wb") as handle:
                handle.write(data)
            os.replace(temporary, path)
        except BaseException:
            if os.path.exists(temporary):
                os.remove(temporary)
            raise

    def delete(self, node: str, *, for_set: bool) -> None:
        """Remove a node; before an overwrite (``for_set``), rename it aside until its replacement is in place."""
        path = self.path(node)
        if for_set:
            backup = self.backup(node)
            if os.path.lexists(backup):
                shutil.rmtree(backup)
            os.rename(path, backup)
            self.aside.add(node)
        else:
            self.remove_tree(node)

    def remove_tree(self, node: str) -> bool:
        """Remove a node and everything under it (renamed away first, so it disappears at once); returns whether
        there was one."""
        path = self.path(node)
        if not os.path.lexists(path):
            return False
        parent, _, name = node.rpartition("/")
        doomed = self.hidden(parent, name, f"deleted-{os.getpid()}-{next(self._counter)}")
        os.rename(path, doomed)
        if os.path.isdir(doomed) and not os.path.islink(doomed):
            shutil.rmtree(doomed)
        else:
            os.remove(doomed)
        return True

    def recover(self) -> None:
        """Finish what a killed writer left: drop temporaries and half-deleted nodes; put back a node renamed aside
        for an overwrite whose new value never got into place (else drop it)."""
        for folder, folders, files in os.walk(self.root):
            for name in [*folders, *files]:
                if not name.startswith(".") or _HIDDEN_MARK not in name:
                    continue
                path = os.path.join(folder, name)
                original, _, kind = name[1:].rpartition(_HIDDEN_MARK)  # (a name may hold the mark too)
                if kind == "backup" and not os.path.lexists(os.path.join(folder, original)):
                    os.rename(path, os.path.join(folder, original))
                    continue
                if kind.startswith("deleted-") and not os.path.lexists(os.path.join(folder, original)):
                    self.finished_deletes.add(os.path.relpath(os.path.join(folder, original), self.root).replace(
                        os.sep, "/"))  # (maybe still listed, by an earlier pydaf that unlisted nodes last)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.remove(path)
            folders[:] = [name for name in folders if not name.startswith(".")]

    def put_back(self, node: str) -> bool:
        """Put back a node this process renamed aside for an overwrite that did not happen (its new value failed);
        returns whether there was one."""
        self.aside.discard(node)
        backup, path = self.backup(node), self.path(node)
        if os.path.lexists(backup) and not os.path.lexists(path):
            os.rename(backup, path)
            return True
        return False


class _DirectoryWriter:
    """One node's files, written under a hidden temporary directory and renamed into place by :meth:`commit`."""

    def __init__(self, nodes: _DirectoryNodes, node: str) -> None:
        self._nodes = nodes
        self._node = node
        parent, _, name = node.rpartition("/")
        nodes._confined(parent)  # (a folder replaced by a link out of the directory: refused before any write)
        os.makedirs(nodes.path(parent), exist_ok=True)
        self._temporary = nodes.hidden(parent, name, f"tmp-{os.getpid()}-{next(nodes._counter)}")
        os.mkdir(self._temporary)

    def _file(self, key: str) -> str:
        path = os.path.join(self._temporary, *key.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return path

    def add(self, key: str, data: bytes | np.ndarray) -> None:
        with open(self._file(key), "wb") as handle:
            handle.write(data if isinstance(data, bytes) else np.ascontiguousarray(data).reshape(-1).data)

    def reserve(self, key: str, nbytes: int) -> np.ndarray:
        path = self._file(key)
        with open(path, "wb") as handle:
            if nbytes:
                os.posix_fallocate(handle.fileno(), 0, nbytes)  # a full disk fails here, not as SIGBUS in a map
        return map_region(path, 0, nbytes, writable=True) if nbytes else np.zeros(0, dtype=np.uint8)

    def write_file(self, key: str, write: Callable[[int], object]) -> None:
        """A file written by ``write(fd)`` (the reorder's permuted ``pwrite``s: 2-3x faster than filling a new
        file through a map, which faults in each page)."""
        fd = os.open(self._file(key), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            write(fd)
        finally:
            os.close(fd)

    def commit(self) -> None:
        os.rename(self._temporary, self._nodes.path(self._node))
        self._nodes.aside.discard(self._node)
        backup = self._nodes.backup(self._node)
        if os.path.lexists(backup):
            shutil.rmtree(backup)

    def abort(self) -> bool:
        """Drop the temporary; put back a node renamed aside for this overwrite. Returns whether one was."""
        shutil.rmtree(self._temporary, ignore_errors=True)
        return self._nodes.put_back(self._node)


class _ZipNodes:
    """The nodes of a data set in a ZIP archive (under ``group/`` for a group of a multi-daf archive)."""

    #: An archive is append-only (a node, once written, stays) and keeps no consolidated metadata (its central
    #: directory is the index).
    supports_rewrites = False
    consolidates = False
    consolidated: dict[str, str] | None = None

    def __init__(self, store: ZipStore, group: str | None) -> None:
        self.store = store
        self.prefix = f"{group}/" if group else ""
        self.axis_lengths: dict[str, int] = {}  # (an archive's axes never change)

    def _name(self, key: str) -> str:
        return self.prefix + key

    def read(self, key: str, limit: int | None = None) -> bytes | None:
        name = self._name(key)
        entry = self.store.entry(name)
        if entry is None:
            return None
        if limit is not None and entry.size > limit:
            raise DafFormatError(f"the ZIP entry: {name}\nin the archive: {self.store.path}\nhas {entry.size} bytes "
                                 "(too large for metadata)")
        return self.store.read(name)

    def map(self, key: str, dtype: np.dtype, count: int) -> tuple[np.ndarray, CacheGroup] | None:
        name = self._name(key)
        if name not in self.store:
            return None
        mapped = self.store.map_array(name, dtype, count)
        if mapped is None:  # compressed or unaligned (a foreign archive): a copy
            return np.frombuffer(self.store.read(name), dtype=dtype).copy(), CacheGroup.MemoryData
        return mapped, CacheGroup.MappedData

    def size(self, key: str) -> int | None:
        entry = self.store.entry(self._name(key))
        return None if entry is None else entry.size

    def has_node(self, node: str) -> bool:
        return self._name(f"{node}/zarr.json" if node else "zarr.json") in self.store

    def exists(self, key: str) -> bool:
        """Whether any entry is at a key or under it."""
        name = self._name(key)
        return name in self.store or bool(self.store.children(name))

    def entries(self, node: str) -> set[str]:
        """The next name of every entry under a node (files and folders, nodes or not)."""
        return self.store.children(self._name(node).rstrip("/"))

    def children(self, node: str) -> set[str]:
        base = self._name(node).rstrip("/")
        return {name for name in self.store.children(base) if _is_node_name(name)
                and f"{base}/{name}/zarr.json".lstrip("/") in self.store}

    def begin(self, node: str) -> _ZipWriter:
        return _ZipWriter(self.store.append(), self._name(f"{node}/" if node else ""))


class _ZipWriter:
    """One node's entries (or, for the root, several nodes'), appended as one batch: its last entry (a zarr.json)
    commits it."""

    def __init__(self, batch: ZipAppend, base: str) -> None:
        self._batch = batch
        self._base = base

    def add(self, key: str, data: bytes | np.ndarray) -> None:
        self._batch.add(self._base + key, data, replace=True)  # supersedes entries a killed batch left

    def reserve(self, key: str, nbytes: int) -> np.ndarray:
        return self._batch.reserve(self._base + key, nbytes, replace=True)

    def commit(self) -> None:
        self._batch.commit()

    def abort(self) -> bool:
        self._batch.abort()
        return False


_Writer = _DirectoryWriter | _ZipWriter


# The data sets in directories this process has open, by identity (their nodes, shared by every handle on each).
_directories: ProcessRegistry[FileKey, _DirectoryNodes] = ProcessRegistry("ZarrDaf directories")


def _directory_nodes(root: str) -> _DirectoryNodes:
    """The nodes of the data set in a directory, shared by every handle on it in this process."""
    key = file_key(root)
    assert key is not None
    with _directories.mutex:
        nodes = _directories.get(key)
        if nodes is None:
            nodes = _DirectoryNodes(root)
            _directories.add(key, nodes)
        return nodes


class ZarrFormat(ReorderThroughModule, StoredFormat):
    """The storage of a ZarrDaf data set: a Zarr v3 group in a directory or a ZIP archive.

    Example:
        >>> ZarrFormat.max_name_bytes, sorted(ZarrFormat.reserved_names)
        (200, ['zarr.json'])
    """

    type_name = "ZarrDaf"

    #: The limits of the names of axes and properties (checked before anything is written; see :func:`name_problem`):
    #: at most this many UTF-8 bytes, and none of the reserved names.
    max_name_bytes: ClassVar[int] = _MAX_NAME_BYTES
    reserved_names: ClassVar[frozenset[str]] = _RESERVED_NAMES

    @property  # (computed: FormatReader declares it as a plain class attribute, hence the ignore)
    def supports_rewrites(self) -> bool:  # type: ignore[override]
        """A directory accepts deletes and overwrites; a ZIP archive is append-only (its nodes say which)."""
        return self._nodes.supports_rewrites

    def __init__(self, path: str, mode: str) -> None:
        writable, may_create, truncate = parse_mode(mode)
        container, group, is_zip = split_zarr_path(path)
        self.locate(container, group, mode)
        self.is_writable = writable
        self._building: tuple[str, _Writer] | None = None  # an empty_* builder's node and writer, until filled
        self._closed = False
        self._nodes: _DirectoryNodes | _ZipNodes
        if is_zip:
            if writable and group is not None:  # (each part of a group is a folder once the archive is unzipped)
                for part in group.split("/"):
                    problem = name_problem(part)
                    if problem is not None:
                        raise DafPathError(f"invalid group: {part[:80]!r}\nin the path: {self.path[:300]}\n(it is "
                                           f"{problem}; each part of a group is at most {_MAX_NAME_BYTES} UTF-8 bytes, "
                                           f"other than {', '.join(sorted(_RESERVED_NAMES))})")
            if truncate and group is not None:
                raise DafModeError(f"can't truncate a sub-daf inside a zip-backed ZarrDaf; the ZIP backend is "
                                   f"append-only: {self.path}")
            if not may_create and not os.path.exists(self.container):
                raise DafFormatError(f"no such file: {self.container}")
            store = acquire_zip_store(self.container, writable=writable, create=may_create,
                                      is_commit=_is_metadata_key,
                                      truncate=("zarr.json", "ZarrDaf") if truncate and group is None else None)
            self._release = weakref.finalize(self, store.release)
            self._nodes = _ZipNodes(store, group)
            self._others_may_write = writable or not store.writable
        else:
            try:
                self._nodes = self._open_directory(may_create, truncate)
            except DafError:
                raise
            except OSError as error:
                if error.errno == errno.ENAMETOOLONG:
                    raise DafPathError(f"a path too long for this file system: {self.container[:300]}...\n(make "
                                       "the path, or the name of one of its folders, shorter)") from error
                raise storage_error(error, f"can't open the ZarrDaf directory: {self.container}") from error
        try:
            if not is_zip:  # (a reorder a killed process left: rolled back, or refused: see reorder.py)
                _reorder.recover_interrupted_reorder(self, first_writer=getattr(self, "_first_writer", False))
            self._open_root(may_create)
        except BaseException:
            self.format_close()  # (a failed open holds no archive and no writer lock)
            raise

    # Opening.

    def _open_directory(self, may_create: bool, truncate: bool) -> _DirectoryNodes:
        path = self.container
        if os.path.lexists(path) and not os.path.isdir(path):
            raise DafFormatError(f"not a directory: {path}")
        if truncate and os.path.isdir(path):
            hold = hold_lock(path, exclusive=True, what="ZarrDaf directory")  # (not while another process writes it)
            try:
                if not hold.first:
                    raise DafLockedError(f"can't truncate the ZarrDaf directory: {path}\nwhile this process has it "
                                         "open for writing (close it first)")
                if not _is_replaceable_directory(path):
                    raise DafModeError(f"not a daf directory: {path}\n(it is a non-empty directory that is not a "
                                       "ZarrDaf data set; ZarrDaf will not use or erase it in mode w)")
                if os.path.isfile(os.path.join(path, "zarr.json")):
                    os.remove(os.path.join(path, "zarr.json"))  # no longer a data set, even if the rest is half gone
                shutil.rmtree(path)  # (files still mapped stay valid: they are unlinked, never cut)
            finally:
                hold.release()
        if not os.path.isdir(path):
            if not may_create:
                raise DafFormatError(f"no such directory: {path}")
            os.makedirs(path, exist_ok=True)
        nodes = _directory_nodes(path)
        # Unless this process holds the writer lock already, another process may have written since the last open:
        # this open sees the data set as it is now (the axis lengths, and the shared cache: format_shared_state).
        self._others_may_write = nodes.hold_count() == 0
        if self._others_may_write:
            nodes.axis_lengths.clear()
        if self.is_writable:
            self._first_writer = nodes.acquire_writer()
            if self._first_writer:
                nodes.recover()  # (only the first writer of this process: later ones may be in the middle of a write)
            self._release = weakref.finalize(self, nodes.release_writer)
        return nodes

    def _root_metadata(self) -> dict[str, Any] | None:
        data = self._nodes.read("zarr.json", _MAX_METADATA_BYTES)
        if data is None:
            if any(self._nodes.read(marker, _MAX_METADATA_BYTES) is not None for marker in (".zgroup", ".zattrs")):
                raise DafZarrVersionError(_V2_HINT.format(path=self.path))
            return None
        try:
            metadata = json.loads(data)
        except (ValueError, UnicodeDecodeError) as error:
            raise DafFormatError(f"invalid zarr.json of the zarr group: {self.path}\n({error})") from error
        if not isinstance(metadata, dict):
            raise DafFormatError(f"invalid zarr.json of the zarr group: {self.path}\n(not a JSON object)")
        if metadata.get("zarr_format") == 2:
            raise DafZarrVersionError(_V2_HINT.format(path=self.path))
        if metadata.get("zarr_format") != 3 or metadata.get("node_type") != "group":
            raise DafFormatError(f"not a daf zarr group: {self.path}")
        return metadata

    def _open_root(self, may_create: bool) -> None:
        metadata = self._root_metadata()
        if metadata is None:
            if not may_create:
                raise DafFormatError(f"not a zarr group: {self.path}")
            if self._nodes.consolidates and not set(os.listdir(self.container)) <= {
                    "scalars", "axes", "vectors", "matrices"}:  # (what a killed creation may leave)
                raise DafFormatError(f"not a zarr group: {self.path}\n(it is a non-empty directory; mode w+ will not "
                                     "use it, use mode w to replace it)")
            self._create({})
            return
        attributes = metadata.get("attributes", {})
        if not isinstance(attributes, dict):
            raise DafFormatError(f"invalid attributes in the zarr.json of the zarr group: {self.path}")
        if "daf" not in attributes:
            if not may_create:
                raise DafNotDafError(f"not a daf data set: {self.path}")
            self._create(attributes)
            return
        self._verify_version(attributes["daf"])
        if self.is_writable:
            if self._nodes.consolidates:
                self._directory().attributes = attributes
                self._load_consolidated(metadata)
            elif "consolidated_metadata" in metadata:
                self._write_zip_root(attributes)

    def _verify_version(self, version: Any) -> None:
        if not isinstance(version, list) or len(version) != 2 or not all(
                isinstance(part, int) and not isinstance(part, bool) for part in version):
            raise DafFormatError(f"malformed daf version marker: {version!r}\nexpected: [major, minor]\nin daf zarr "
                                 f"group: {self.path}")
        if version[0] != MAJOR_VERSION or version[1] > MINOR_VERSION:
            raise DafFormatError(f"incompatible format version: {version[0]}.{version[1]}\nthe code supports version: "
                                 f"{MAJOR_VERSION}.{MINOR_VERSION}\nin daf zarr group: {self.path}")

    def _create(self, attributes: dict[str, Any]) -> None:
        """Make the group a Daf data set: the four groups, then the root's ``daf`` attribute (what makes it one)."""
        attributes = {**attributes, "daf": [MAJOR_VERSION, MINOR_VERSION]}
        if not self._nodes.consolidates:
            groups = [group for group in ("scalars", "axes", "vectors", "matrices") if not self._nodes.has_node(group)]
            self._write_node("", [*((f"{group}/zarr.json", _GROUP_FILE) for group in groups),
                                  ("zarr.json", self._zip_root_bytes(attributes))], [])
            return
        nodes = self._directory()
        for group in ("scalars", "axes", "vectors", "matrices"):
            nodes.make_group(group)
        nodes.attributes = attributes
        nodes.consolidated = self._walk_entries()
        self._write_root()

    @staticmethod
    def _zip_root_bytes(attributes: dict[str, Any]) -> bytes:
        encoded = json.dumps(attributes, separators=(",", ":"), ensure_ascii=False)
        return f'{{"attributes":{encoded},"node_type":"group","zarr_format":3}}'.encode()

    def _write_zip_root(self, attributes: dict[str, Any]) -> None:
        """Drop a stale ``consolidated_metadata`` (from zipping a directory) by appending a root without it."""
        self._write_node("", [("zarr.json", self._zip_root_bytes(attributes))], [])

    # Consolidated metadata (directories).

    def _directory(self) -> _DirectoryNodes:
        """The nodes, where only a directory's can be (they consolidate): the one place that narrows their type."""
        assert isinstance(self._nodes, _DirectoryNodes)
        return self._nodes

    def _load_consolidated(self, metadata: dict[str, Any]) -> None:
        """Keep the on-disk consolidated metadata (and its order) if it describes the tree exactly; else rebuild it."""
        with self._directory().mutex:
            self._reload_consolidated(metadata)

    def _reload_consolidated(self, metadata: dict[str, Any]) -> None:
        """Rewrite the root unless it is exactly what :meth:`_root_bytes` writes for the tree: stale or broken
        metadata (Julia trusts a stale one), and also Julia's key order (which zarr-python can't read) is replaced."""
        walked = self._walk_entries()
        consolidated = metadata.get("consolidated_metadata")
        consolidated = consolidated if isinstance(consolidated, dict) else {}
        stored = consolidated.get("metadata")
        self._nodes.consolidated = walked
        if isinstance(stored, dict) and consolidated.get("kind") == "inline" and stored.keys() == walked.keys() and \
                all(stored[key] == json.loads(text) for key, text in walked.items()) and \
                self._nodes.read("zarr.json", _MAX_METADATA_BYTES) == self._root_bytes():
            return
        self._write_root()
        self._directory().finished_deletes.clear()  # (the root no longer lists them)

    def _walk_entries(self) -> dict[str, str]:
        """Every node under the root with its consolidated descriptor, read from the tree."""
        entries: dict[str, str] = {}
        pending = [""]
        while pending:
            node = pending.pop()
            for child in self._nodes.children(node):
                key = f"{node}/{child}" if node else child
                metadata = self._node_metadata(key, f"node: {key}")
                if metadata.get("node_type") == "group":
                    entries[key] = _group_entry(metadata)
                    pending.append(key)
                else:
                    entries[key] = json.dumps(metadata, separators=(",", ":"), ensure_ascii=False)
        return entries

    def _root_bytes(self) -> bytes:
        """The root ``zarr.json``, in Julia's form except for the order of the consolidated keys: by depth, then by
        path (:func:`consolidated_order`), which zarr-python's reader needs; Julia's reader takes any order."""
        nodes = self._directory()
        assert nodes.consolidated is not None
        attributes = json.dumps(nodes.attributes, separators=(",", ":"), ensure_ascii=False)
        body = ",".join(f"{json.dumps(key, ensure_ascii=False)}:{nodes.consolidated[key]}"
                        for key in sorted(nodes.consolidated, key=consolidated_order))
        return (f'{{"zarr_format":3,"node_type":"group","attributes":{attributes},"consolidated_metadata":{{"kind":'
                f'"inline","must_understand":false,"metadata":{{{body}}}}}}}').encode()

    def _write_root(self) -> None:
        self._directory().write_file("zarr.json", self._root_bytes())

    def _consolidate(self, entries: list[tuple[str, str]]) -> None:
        """Add (or replace) nodes in the consolidated metadata (Julia appends them by byte surgery; pydaf rewrites
        the root with every key in :func:`consolidated_order`)."""
        if self._nodes.consolidated is None:
            return
        nodes = self._directory()
        with nodes.mutex:
            nodes.consolidated = {**(nodes.consolidated or {}), **dict(entries)}
            self._write_root()

    def _unconsolidate(self, nodes: list[str]) -> None:
        """Drop nodes (and what is under them) from the consolidated metadata."""
        if self._nodes.consolidated is None:
            return
        directory = self._directory()
        with directory.mutex:
            kept = {key: text for key, text in (directory.consolidated or {}).items()
                    if not any(key == node or key.startswith(node + "/") for node in nodes)}
            if directory.consolidated is not None and len(kept) == len(directory.consolidated):
                return  # (none of them listed)
            directory.consolidated = kept
            self._write_root()

    # Reading nodes.

    def _node_metadata(self, node: str, what: str) -> dict[str, Any]:
        data = self._nodes.read(f"{node}/zarr.json", _MAX_METADATA_BYTES)
        if data is None:
            if self._nodes.supports_rewrites:  # (a directory: its consolidated metadata may list the node)
                damage = self._directory().missing(node)
                if damage is not None:
                    raise damage
            raise DafFormatError(f"missing zarr.json of the {what}\nin the daf zarr group: {self.path}")
        try:
            metadata = json.loads(data)
        except (ValueError, UnicodeDecodeError) as error:
            raise DafFormatError(f"invalid zarr.json of the {what}\nin the daf zarr group: {self.path}\n({error})"
                                 ) from error
        if not isinstance(metadata, dict) or metadata.get("zarr_format") != 3 or \
                metadata.get("node_type") not in ("group", "array"):
            raise DafFormatError(f"the zarr.json of the {what}\nin the daf zarr group: {self.path}\nis not a Zarr v3 "
                                 "group or array")
        return metadata

    def _array(self, node: str, what: str, metadata: dict[str, Any] | None = None) -> _Array:
        metadata = metadata if metadata is not None else self._node_metadata(node, what)
        if metadata.get("node_type") != "array":
            raise DafFormatError(f"the {what}\nin the daf zarr group: {self.path}\nis a group, not an array")
        return _parse_array(metadata, f"{what}\nin the daf zarr group: {self.path}")

    def _read_values(self, node: str, info: _Array, what: str) -> tuple[np.ndarray, CacheGroup]:
        """All the values of an array, flat in the Zarr (C) order, which is Julia's column-major order: a read-only
        map of its chunk when it is one uncompressed chunk."""
        size = info.size
        if size == 0:
            return np.empty(0, dtype=info.dtype), CacheGroup.MemoryData
        if info.packed is not None:
            return self._read_packed(node, info, what), CacheGroup.MemoryData
        if info.flat and info.dtype != STRING_DTYPE:
            key = f"{node}/{info.chunk_key((0,) * len(info.shape))}"
            mapped = self._nodes.map(key, info.dtype, size)
            if mapped is not None:
                return mapped
            return self._allocate(info.shape, info, what).reshape(-1), CacheGroup.MemoryData
        keys = self._chunk_keys(node, info, what)
        self._check_chunk_sizes(keys, info, what)
        values = self._allocate(info.shape, info, what)
        grid = [-(-extent // length) for extent, length in zip(info.shape, info.chunks, strict=True)]
        for index, key in zip(itertools.product(*(range(count) for count in grid)), keys, strict=True):
            chunk = self._read_chunk(key, info, what)
            if chunk is None:
                continue
            target = tuple(slice(coordinate * length, min((coordinate + 1) * length, extent))
                           for coordinate, length, extent in zip(index, info.chunks, info.shape, strict=True))
            values[target] = chunk[tuple(slice(0, part.stop - part.start) for part in target)]
        return values.reshape(-1), CacheGroup.MemoryData

    def _read_packed(self, node: str, info: _Array, what: str) -> np.ndarray:
        """The values of a packed (sharded) array, flat in Julia's column-major order (a missing shard: all the fill
        value). Julia's ZarrDaf reads the shard through its index; its shards are also ZIP archives, whose central
        directory gives the same chunks with their CRC32s, so pydaf reads those through it (catching a corrupt chunk)
        and others (zarr-python's) through the index."""
        assert info.packed is not None
        source = self._shard_source(f"{node}/{info.chunk_key((0,) * len(info.shape))}")
        if source is None:
            return self._allocate((info.size,), info, what)

        def invalid(problem: str) -> DafFormatError:
            return DafFormatError(f"invalid packed data of the {what}\nin the daf zarr group: {self.path}\n({problem})")

        values = read_packed_array(source, info.packed, invalid=invalid, via="auto", fill=info.fill)
        return values.reshape(-1, order="F")

    def _allocate(self, shape: tuple[int, ...], info: _Array, what: str) -> np.ndarray:
        """An array of the fill value, for the values of an array (whose shape the caller checked against the axes)
        that are not stored: zeros come from ``calloc`` (pages are only touched when used); memory that can't be had
        is a :class:`~pydaf.DafStorageError` naming the property, never a ``MemoryError``."""
        try:
            if info.dtype == STRING_DTYPE:
                values = np.empty(shape, dtype=object)
                values.fill(info.fill)
                return values
            if not np.asarray(info.fill, dtype=info.dtype).reshape(1).view(np.uint8).any():
                return np.zeros(shape, dtype=info.dtype)
            return np.full(shape, info.fill, dtype=info.dtype)
        except MemoryError:
            size = math.prod(shape)
            raise DafStorageError(f"not enough memory to read the {what}\nin the daf zarr group: {self.path}\n"
                                  f"whose {size} {'String' if info.dtype == STRING_DTYPE else info.dtype} values "
                                  f"({size * info.dtype.itemsize} bytes) are not stored (all the fill value: "
                                  f"{info.fill!r}) and must be made in memory") from None

    def _check_chunk_sizes(self, keys: list[str], info: _Array, what: str) -> None:
        """Refuse an array whose stored chunks can't hold what their declared shape says, before anything is
        allocated: an uncompressed chunk holds exactly its values, a gzip one at most ``_MAX_GZIP_RATIO`` times its
        size, a ``vlen-utf8`` one at least 4 bytes per string (a missing chunk is the fill value, and the caller
        checked the array's shape against the axes)."""
        count = math.prod(info.chunks)
        needed = 4 + 4 * count if info.dtype == STRING_DTYPE else count * info.dtype.itemsize
        for key in keys:
            stored = self._nodes.size(key)
            if stored is None:
                continue
            if info.gzip:
                fits = needed <= max(stored, 1) * _MAX_GZIP_RATIO
            else:
                fits = stored >= needed if info.dtype == STRING_DTYPE else stored == needed
            if not fits:
                raise DafFormatError(f"the chunk: {key}\nof the {what}\nin the daf zarr group: {self.path}\nhas "
                                     f"{stored} bytes{' (gzip)' if info.gzip else ''}: it can't hold the "
                                     f"{count} values of its declared chunk shape: {list(info.chunks)}")

    def _chunk_keys(self, node: str, info: _Array, what: str) -> list[str]:
        """The keys of an array's chunks, in the C order of its chunk grid (no more than ``_MAX_CHUNKS``)."""
        grid = [-(-extent // length) for extent, length in zip(info.shape, info.chunks, strict=True)]
        if math.prod(grid) > _MAX_CHUNKS:
            raise DafFormatError(f"the {what}\nin the daf zarr group: {self.path}\nis split into {math.prod(grid)} "
                                 "chunks (too many)")
        return [f"{node}/{info.chunk_key(index)}" for index in itertools.product(*(range(count) for count in grid))]

    def _read_chunk(self, key: str, info: _Array, what: str) -> np.ndarray | None:
        data = self._nodes.read(key)
        if data is None:
            return None
        count = math.prod(info.chunks)
        if info.dtype == STRING_DTYPE:
            if info.gzip:
                data = _gunzip(data, None, f"{what}\nin the daf zarr group: {self.path}")
            return decode_strings(data, count, f"{what}\nin the daf zarr group: {self.path}").reshape(info.chunks)
        expected = count * info.dtype.itemsize
        if info.gzip:
            data = _gunzip(data, expected, f"{what}\nin the daf zarr group: {self.path}")
        if len(data) != expected:
            raise DafFormatError(f"the chunk: {key}\nof the {what}\nin the daf zarr group: {self.path}\nhas "
                                 f"{len(data)} bytes instead of {expected}")
        stored = info.dtype.newbyteorder(">") if info.big_endian else info.dtype
        return np.frombuffer(data, dtype=stored).astype(info.dtype).reshape(info.chunks)

    def _read_strings(self, node: str, info: _Array, what: str) -> np.ndarray:
        if info.size and info.flat:
            data = self._nodes.read(f"{node}/{info.chunk_key((0,) * len(info.shape))}")
            if data is None:
                return self._allocate((info.size,), info, what)
            return decode_strings(data, info.size, f"{what}\nin the daf zarr group: {self.path}")
        values, _ = self._read_values(node, info, what)
        return values

    def _read_dense(self, node: str, info: _Array, what: str) -> tuple[np.ndarray, CacheGroup]:
        if info.dtype == STRING_DTYPE:
            return self._read_strings(node, info, what), CacheGroup.MemoryData
        return self._read_values(node, info, what)

    def _require_shape(self, info: _Array, shape: tuple[int, ...], what: str) -> None:
        if info.shape != shape:
            raise DafFormatError(f"the Zarr shape: {list(info.shape)}\nof the {what}\nin the daf zarr group: "
                                 f"{self.path}\nis not the expected: {list(shape)}")

    def _component(self, node: str, name: str, what: str, *, index: bool, length: int | None = None,
                   at_most: int | None = None) -> tuple[np.ndarray, CacheGroup]:
        """A component of sparse data: a vector of integers (``index``) or numbers, of ``length`` elements or at most
        ``at_most``, checked before it is read; an index component must be stored (1-based indices are never 0, the
        fill value), so its size is bounded by its stored bytes."""
        info = self._array(f"{node}/{name}", f"{name} of the {what}")
        if len(info.shape) != 1 or info.dtype == STRING_DTYPE or (index and info.dtype.kind not in "iu"):
            kind = "String" if info.dtype == STRING_DTYPE else info.dtype
            raise DafFormatError(f"the {name} of the {what}\nin the daf zarr group: {self.path}\nis not a vector of "
                                 f"{'integers' if index else 'numbers'} (it is {kind} {list(info.shape)})")
        count = info.shape[0]
        if (length is not None and count != length) or (at_most is not None and count > at_most) or (
                index and count and any(self._nodes.size(key) is None
                                        for key in self._chunk_keys(f"{node}/{name}", info, what))):
            expected = length if length is not None else f"at most {at_most}" if at_most is not None else "stored"
            raise DafFormatError(f"the {name} of the sparse {what}\nin the daf zarr group: {self.path}\nhas "
                                 f"{count} entries (expected: {expected}) or is not all stored")
        return self._read_values(f"{node}/{name}", info, f"{name} of the {what}")

    # Writing nodes.

    @contextmanager
    def _writing(self, node: str, writer: _Writer | None = None) -> Iterator[_Writer]:
        """A writer of a node's files (or a builder's, started earlier): aborted if the block fails, an ``OSError``
        (a full disk, ...) becoming a :class:`~pydaf.DafStorageError` naming the node."""
        if getattr(self, "_closed", False):  # (a builder still filling when its data set was closed)
            raise DafClosedError(f"can't write the node: {node}\nof the daf zarr group: {self.path}\nwhich was "
                                 "closed (reopen it to write it)")
        try:
            writer = writer if writer is not None else self._nodes.begin(node)
        except OSError as error:
            raise storage_error(error, f"can't write the node: {node}\nof the daf zarr group: {self.path}") from error
        try:
            yield writer
        except BaseException as error:
            if writer.abort():
                self._reconsolidate()  # (the old node of a failed overwrite is back: so is its entry)
            if isinstance(error, OSError) and not isinstance(error, DafError):
                raise storage_error(error, f"can't write the node: {node}\nof the daf zarr group: {self.path}"
                                    ) from error
            raise

    def _write_node(self, node: str, files: Sequence[tuple[str, bytes | np.ndarray]],
                    entries: list[tuple[str, str]], writer: _Writer | None = None) -> None:
        """Write a node's files (chunks first, its zarr.json last: in a ZIP archive, what commits it) atomically,
        then index them."""
        with self._writing(node, writer) as started:
            for key, data in files:
                started.add(key, data)
            started.commit()
        self._consolidate(entries)

    def _delete_node(self, node: str, what: str, *, for_set: bool) -> None:
        if not self._nodes.supports_rewrites:  # (the writer layer refuses first; a format never trusts blindly)
            raise DafAppendOnlyError("can't delete or overwrite properties in a zip-backed ZarrDaf; the ZIP backend "
                                     f"is append-only\nfor the {what}\nin the daf zarr group: {self.path}")
        if not for_set:
            self._unconsolidate([node])  # (unlisted first: a listed node is a committed one, see `recorded`)
        try:
            self._directory().delete(node, for_set=for_set)
        except OSError as error:
            if not for_set:
                self._reconsolidate()  # (still there: listed again)
            raise storage_error(error, f"can't delete the {what}\nin the daf zarr group: {self.path}") from error
        if for_set:
            self._unconsolidate([node])  # (its backup holds the committed value until the new one is in place)

    def located_path(self, key: str) -> str:
        """The file or folder holding ``key`` (``/``-separated, from the root) of a directory data set: its own path,
        or its path in the backup of a node whose overwrite a killed writer never finished (the committed value,
        which this handle reads; see ``_DirectoryNodes.locate``). A linked conversion links the files found here.

        Example:
            >>> import os, tempfile, pydaf
            >>> path = os.path.join(tempfile.mkdtemp(), "a.daf.zarr")
            >>> daf = pydaf.ZarrDaf(path, "w").add_axis("cell", ["A"]).set_vector("cell", "age", [1])
            >>> os.rename(os.path.join(path, "vectors/cell/age"), os.path.join(path, "vectors/cell/.age.pydaf-backup"))
            >>> os.path.relpath(pydaf.ZarrDaf(path).format.located_path("vectors/cell/age/c/0"), path)
            'vectors/cell/.age.pydaf-backup/c/0'
        """
        if not self._nodes.supports_rewrites:
            raise DafFormatError(f"the zip-backed ZarrDaf: {self.path}\nhas no files of its own (they are ZIP entries)")
        return self._directory().locate(key)

    # Identity: StoredFormat's.

    def format_shared_state(self, state: Any) -> Any:
        """StoredFormat's (one lock and cache per data set in this process), except that an open while this process
        does not hold the writer lock empties the shared cache: another process may have committed since it was
        filled, and a new open sees the data set as it is now (so do the older handles, from then on)."""
        shared = super().format_shared_state(state)
        if shared is not state and self._others_may_write:
            shared.cache.empty()
        return shared

    def format_close(self) -> None:
        """Release this handle's hold of the archive (or of the directory's writer lock), after dropping what an
        unfilled builder wrote (an overwrite keeps the old value); arrays already returned stay valid (they keep
        their maps, not the lock). Idempotent."""
        if getattr(self, "_building", None) is not None and not getattr(self, "_closed", False):
            self.format_discard_empty()
        self._closed = True
        release = getattr(self, "_release", None)
        if release is not None:
            release()

    def _consistently(self, node: str, read: Callable[[], _T]) -> _T:
        """``read()`` a node of a directory; if it fails as damaged while another process replaced or deleted the node
        (readers take no lock), read again, so a node changed midway is never taken for damage (a deleted one is
        then a :class:`~pydaf.DafMissingError`)."""
        if not self._nodes.supports_rewrites:  # (an archive's nodes never change once written)
            return read()
        nodes = self._directory()
        for attempt in range(3):
            before = nodes.identity(node)
            try:
                value = read()
            except DafFormatError as error:
                after = nodes.identity(node)
                if after is None and nodes.missing(node) is None:  # (found by has_*, gone since)
                    raise DafMissingError(f"the node: {node}\nof the daf zarr group: {self.path}\nwas deleted (by "
                                          "another process, while it was being read)") from error
                if attempt == 2 or after == before:
                    raise
                continue
            if attempt == 2 or nodes.identity(node) == before:  # (else a file may have gone midway: read as elided)
                return value
        raise AssertionError("unreachable")

    # Scalars.

    def format_has_scalar(self, name: str) -> bool:
        return _is_node_name(name) and self._nodes.has_node(f"scalars/{name}")

    def format_scalars_set(self) -> set[str]:
        return self._nodes.children("scalars")

    def format_get_scalar(self, name: str) -> StorageScalar:
        return self._consistently(f"scalars/{name}", lambda: self._get_scalar(name))

    def _get_scalar(self, name: str) -> StorageScalar:
        what = f"scalar: {name}"
        info = self._array(f"scalars/{name}", what)
        if info.size != 1 or len(info.shape) > 1:
            raise DafFormatError(f"the Zarr shape: {list(info.shape)}\nof the {what}\nin the daf zarr group: "
                                 f"{self.path}\nis not [1]")
        if info.flat and info.dtype != STRING_DTYPE:  # a few bytes: read, not mapped
            data = self._nodes.read(f"scalars/{name}/{info.chunk_key((0,) * len(info.shape))}", _MAX_METADATA_BYTES)
            if data is None:
                return info.dtype.type(info.fill)
            if len(data) != info.dtype.itemsize:
                raise DafFormatError(f"the chunk of the {what}\nin the daf zarr group: {self.path}\nhas {len(data)} "
                                     f"bytes instead of {info.dtype.itemsize}")
            return np.frombuffer(data, dtype=info.dtype)[0]
        values, _ = self._read_dense(f"scalars/{name}", info, what)
        value = values[0]
        return str(value) if info.dtype == STRING_DTYPE else info.dtype.type(value)

    def format_set_scalar(self, name: str, value: StorageScalar) -> None:
        self._require_names(("scalar", name))
        dtype = scalar_dtype(value)
        values = np.array([value], dtype=dtype)
        self._write_array(f"scalars/{name}", values, (1,))

    def format_delete_scalar(self, name: str, *, for_set: bool) -> None:
        if for_set:
            self._require_names(("scalar", name))
        self._delete_node(f"scalars/{name}", f"scalar: {name}", for_set=for_set)

    def _array_files(self, values: np.ndarray, shape: tuple[int, ...],
                     prefix: str = "") -> tuple[list[tuple[str, bytes | np.ndarray]], str]:
        """The chunk (unless every value is the fill value) and the metadata of a flat array holding ``values`` in
        Zarr (C) order."""
        metadata = array_metadata(values.dtype, shape)
        files: list[tuple[str, bytes | np.ndarray]] = []
        if values.size and not _all_fill(values):
            key = "c/0/0" if len(shape) == 2 else "c/0"
            files.append((prefix + key, encode_strings(values.reshape(-1)) if values.dtype == STRING_DTYPE
                          else values))
        return files, metadata

    @staticmethod
    def _packed_array_files(values: np.ndarray, shape: tuple[int, ...], prefix: str = "", *, packed: bool,
                            chunk_shape: tuple[int, ...] | None = None
                            ) -> tuple[list[tuple[str, bytes | np.ndarray]], str, str] | None:
        """The shard and the ``zarr.json`` (and consolidated entry) of a packed array holding ``values`` in Zarr (C)
        order, if ``packed`` and Julia's ``chunks_for`` packs it (``dense_zcreate``; or of inner ``chunk_shape``,
        Julia order, if given: a streamed matrix's), else None (docs/spec/FORMATS.md §5.5)."""
        julia_shape = tuple(shape[::-1])
        if chunk_shape is None:
            chunk_shape = chunks_for(packed, julia_shape, values.dtype)
        if chunk_shape is None or not packed:
            return None
        codec = compressor_for()
        julia_values = values.reshape(shape).T  # (Zarr's C order is Julia's column-major order)
        shard = encode_packed_dense_array(julia_values, chunk_shape, codec)
        metadata, entry = sharded_array_metadata(values.dtype, julia_shape, chunk_shape, codec)
        return [(prefix + ("c/0/0" if len(shape) == 2 else "c/0"), shard)], metadata, entry

    def _write_array(self, node: str, values: np.ndarray, shape: tuple[int, ...], *, packed: bool = False,
                     chunk_shape: tuple[int, ...] | None = None) -> None:
        with self._putting_back(node):
            packed_files = self._packed_array_files(values, shape, packed=packed, chunk_shape=chunk_shape)
            if packed_files is None:
                files, metadata = self._array_files(values, shape)
                entry = metadata
            else:
                files, metadata, entry = packed_files
        self._write_node(node, [*files, ("zarr.json", metadata.encode())], [(node, entry)])

    def _write_sparse(self, node: str, components: list[tuple[str, np.ndarray]], *, packed: bool = False) -> None:
        files: list[tuple[str, bytes | np.ndarray]] = []
        metadata: dict[str, str] = {}
        entries: dict[str, str] = {}
        with self._putting_back(node):
            for name, values in components:
                packed_files = self._packed_array_files(values, values.shape, f"{name}/", packed=packed)
                if packed_files is None:
                    chunk, metadata[name] = self._array_files(values, values.shape, f"{name}/")
                    entries[name] = metadata[name]
                else:
                    chunk, metadata[name], entries[name] = packed_files
                files += chunk
        files += [(f"{name}/zarr.json", text.encode()) for name, text in metadata.items()]
        self._write_node(node, [*files, ("zarr.json", _GROUP_FILE)], _sparse_entries(node, entries))

    # Axes.

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        return _is_node_name(axis) and self._nodes.has_node(f"axes/{axis}")

    def format_axes_set(self) -> set[str]:
        return self._nodes.children("axes")

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        return self._consistently(f"axes/{axis}", lambda: self._axis_vector(axis))

    def _axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        what = f"axis: {axis}"
        self.format_axis_length(axis)  # (checks the declared length against the stored bytes first)
        info = self._axis_info(axis)
        if info.dtype != STRING_DTYPE:
            raise DafFormatError(f"the {what}\nin the daf zarr group: {self.path}\nis not a string array")
        return self._read_strings(f"axes/{axis}", info, what), CacheGroup.MemoryData

    def _axis_info(self, axis: str) -> _Array:
        what = f"axis: {axis}"
        info = self._array(f"axes/{axis}", what)
        if len(info.shape) != 1:
            raise DafFormatError(f"the {what}\nin the daf zarr group: {self.path}\nis not one-dimensional")
        return info

    def format_axis_length(self, axis: str) -> int:
        length = self._nodes.axis_lengths.get(axis)
        if length is None:
            length = self._consistently(f"axes/{axis}", lambda: self._axis_length(axis))
        return length

    def _axis_length(self, axis: str) -> int:
        length = self._nodes.axis_lengths.get(axis)
        if length is None:
            info = self._axis_info(axis)
            length = info.shape[0]
            # Every chunk must be stored (entries are distinct, so not all ""), with at least 4 bytes per entry: a
            # hostile shape can't make readers allocate more than the stored bytes say.
            for key in self._chunk_keys(f"axes/{axis}", info, f"axis: {axis}"):
                data_size = self._nodes.size(key)
                if data_size is None or data_size < 4 + 4 * math.prod(info.chunks):
                    raise DafFormatError(f"the axis: {axis}\nin the daf zarr group: {self.path}\ndeclares {length} "
                                         f"entries but stores {data_size or 0} bytes of them in: {key}")
            self._nodes.axis_lengths[axis] = length
        return length

    def format_add_axis(self, axis: str, entries: np.ndarray) -> None:
        self._require_names(("axis", axis))
        others = sorted(self.format_axes_set() - {axis})
        groups = [f"vectors/{axis}", f"matrices/{axis}", f"matrices/{axis}/{axis}",
                  *(f"matrices/{axis}/{other}" for other in others), *(f"matrices/{other}/{axis}" for other in others)]
        files, metadata = self._array_files(entries, (entries.shape[0],))
        self._nodes.axis_lengths.pop(axis, None)
        if not self._nodes.supports_rewrites:
            # Append-only: one batch, the groups, then the axis (its zarr.json last: what makes it exist).
            self._write_node("", [*((f"{group}/zarr.json", _GROUP_FILE) for group in groups),
                                  *((f"axes/{axis}/{key}", data) for key, data in files),
                                  (f"axes/{axis}/zarr.json", metadata.encode())], [])
            return
        # Whatever a killed delete of an axis of this name left belongs to no axis now.
        leftovers = [f"vectors/{axis}", f"matrices/{axis}",
                     *(f"matrices/{other}/{axis}" for other in self._nodes.children("matrices"))]
        nodes = self._directory()
        self._unconsolidate(leftovers)  # (unlisted before removed: a listed node is a committed one)
        for leftover in leftovers:
            nodes.remove_tree(leftover)
        for group in groups:
            nodes.make_group(group)
        self._write_node(f"axes/{axis}", [*files, ("zarr.json", metadata.encode())],
                         [(f"axes/{axis}", metadata), *((group, _GROUP_ENTRY) for group in groups)])

    def format_delete_axis(self, axis: str) -> None:
        self._delete_node(f"axes/{axis}", f"axis: {axis}", for_set=False)  # the axis is gone first
        self._nodes.axis_lengths.pop(axis, None)
        nodes = self._directory()  # (an archive refused the delete above)
        dependents = [f"vectors/{axis}", f"matrices/{axis}",
                      *(f"matrices/{other}/{axis}" for other in nodes.children("matrices"))]
        self._unconsolidate(dependents)  # (unlisted before removed: a listed node is a committed one)
        for node in dependents:
            nodes.remove_tree(node)

    # Vectors.

    def format_has_vector(self, axis: str, name: str) -> bool:
        return _is_node_name(name) and self._nodes.has_node(f"vectors/{axis}/{name}")

    def format_vectors_set(self, axis: str) -> set[str]:
        return self._nodes.children(f"vectors/{axis}")

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        return self._consistently(f"vectors/{axis}/{name}", lambda: self._get_vector(axis, name))

    def _get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        node, what = f"vectors/{axis}/{name}", f"vector: {name}\nof the axis: {axis}"
        length = self.format_axis_length(axis)
        metadata = self._node_metadata(node, what)
        if metadata.get("node_type") == "array":
            info = self._array(node, what, metadata)
            self._require_shape(info, (length,), what)
            return self._read_dense(node, info, what)
        nzind, nzind_group = self._component(node, "nzind", what, index=True, at_most=length)
        nzval, nzval_group = self._nzval(node, what, nzind.shape[0])
        return SparseVector(length, nzind, nzval), weakest_cache_group(nzind_group, nzval_group)

    def _nzval(self, node: str, what: str, nnz: int) -> tuple[np.ndarray, CacheGroup]:
        if not self._nodes.has_node(f"{node}/nzval"):  # (refused if the consolidated metadata lists it)
            if self._nodes.exists(f"{node}/nzval"):  # (its values without their zarr.json: never all-true Bools)
                raise DafFormatError(f"the nzval of the sparse {what}\nin the daf zarr group: {self.path}\nhas no "
                                     "zarr.json (it is damaged: its values can't be read)")
            # Nothing else in the group either (an nzval renamed by damage, say in a ZIP's central directory, which
            # holds no consolidated metadata): only then is it Julia's all-true Bool pattern.
            strangers = sorted(self._nodes.entries(node) - {"zarr.json", "nzind", "colptr", "rowval"})
            if strangers:
                raise DafFormatError(f"the sparse {what}\nin the daf zarr group: {self.path}\nhas no nzval but holds: "
                                     f"{', '.join(strangers)[:300]}\n(it is damaged: its values can't be read)")
            return np.ones(nnz, dtype=np.bool_), CacheGroup.MemoryData  # Julia omits an all-true Bool nzval
        return self._component(node, "nzval", what, index=False, length=nnz)

    def format_set_vector(self, axis: str, name: str, vector: StoredVector | StorageScalar) -> None:
        self._require_names(("axis", axis), ("vector", name))
        node = f"vectors/{axis}/{name}"
        length = self.format_axis_length(axis)
        if isinstance(vector, SparseVector):
            self._write_sparse(node, _sparse_parts([("nzind", vector.nzind)], vector.nzval), packed=self.is_packed)
            return
        if not isinstance(vector, np.ndarray):
            vector = np.full(length, vector, dtype=scalar_dtype(vector))  # Zarr stores a fill as a dense array
        self._write_array(node, vector, (length,), packed=self.is_packed)  # (Julia packs strings vectors too)

    def format_delete_vector(self, axis: str, name: str, *, for_set: bool) -> None:
        if for_set:
            self._require_names(("axis", axis), ("vector", name))
        self._delete_node(f"vectors/{axis}/{name}", f"vector: {name}\nof the axis: {axis}", for_set=for_set)

    # Builders (the chunks are written in place; the zarr.json files, which make the property exist, when filled).

    def _start_building(self, node: str, chunks: list[tuple[str, np.dtype, int]]) -> list[np.ndarray]:
        parts = node.split("/")
        self._require_names(*((kind, part) for kind, part in zip(
            {2: ("scalar",), 3: ("axis", "vector"), 4: ("axis", "axis", "matrix")}[len(parts)], parts[1:],
            strict=True)))
        with self._writing(node) as writer:
            buffers = [writer.reserve(key, count * dtype.itemsize).view(dtype) if count else np.zeros(0, dtype=dtype)
                       for key, dtype, count in chunks]
        self._building = (node, writer)
        return buffers

    def _finish_building(self, files: Sequence[tuple[str, bytes | np.ndarray]], entries: list[tuple[str, str]]) -> None:
        assert self._building is not None, "filled an empty_* builder that was not started"
        (node, writer), self._building = self._building, None
        self._write_node(node, files, entries, writer)

    def format_discard_empty(self) -> bool:
        # A node is built aside and renamed into place only when filled, so a failed build leaves nothing of its own,
        # and an overwrite's old node (renamed aside by the for_set delete) is put back: the old value is kept.
        building, self._building = self._building, None
        self._packed_chunks = None
        if building is None:
            return False
        if building[1].abort():
            self._reconsolidate()
        return True

    def _reconsolidate(self) -> None:
        """Rebuild the consolidated metadata from the tree (after a node renamed aside for an overwrite came back)."""
        if self._nodes.consolidated is not None:
            nodes = self._directory()
            with nodes.mutex:
                nodes.consolidated = self._walk_entries()
                self._write_root()

    @contextmanager
    def _putting_back(self, node: str) -> Iterator[None]:
        """Put back the old node of an overwrite if preparing its new value fails (a string that can't be encoded,
        ...), so the failed overwrite keeps the old value."""
        try:
            yield
        except BaseException:
            if self._nodes.supports_rewrites and self._directory().put_back(node):
                self._reconsolidate()
            raise

    def _require_names(self, *names: tuple[str, str]) -> None:
        """Refuse, before anything is written (or renamed aside), a ``(kind, name)`` a node can't have
        (:func:`name_problem`)."""
        for kind, name in names:
            problem = name_problem(name)
            if problem is not None:
                shown = name if len(name) <= 80 else f"{name[:60]}... ({len(name)} characters)"
                raise DafNameError(f"invalid {kind} name: {shown!r}\nfor the daf zarr group: {self.path}\n(it is "
                                   f"{problem}; ZarrDaf names are file names of at most {_MAX_NAME_BYTES} UTF-8 "
                                   f"bytes, other than {', '.join(sorted(_RESERVED_NAMES))}: choose another name)")

    #: The inner chunk shape (Julia order) of the packed dense builder being filled (in memory, written packed when
    #: filled, as Julia's), or None.
    _packed_chunks: tuple[int, ...] | None = None

    def _start_packed(self, node: str, chunk_shape: tuple[int, ...] | None, shape: tuple[int, ...],
                      dtype: np.dtype) -> np.ndarray | None:
        if chunk_shape is None:
            return None
        self._start_building(node, [])
        self._packed_chunks = chunk_shape
        return np.zeros(shape, dtype=dtype, order="F")

    def _finish_packed(self, values: np.ndarray, shape: tuple[int, ...]) -> bool:
        """Write a packed builder's buffer (``values`` in Zarr order), if it is one."""
        chunk_shape, self._packed_chunks = self._packed_chunks, None
        if chunk_shape is None:
            return False
        packed_files = self._packed_array_files(values, shape, packed=True, chunk_shape=chunk_shape)
        assert packed_files is not None and self._building is not None
        files, metadata, entry = packed_files
        self._finish_building([*files, ("zarr.json", metadata.encode())], [(self._building[0], entry)])
        return True

    def format_get_empty_dense_vector(self, axis: str, name: str, dtype: np.dtype) -> np.ndarray:
        length = self.format_axis_length(axis)
        packed = self._start_packed(f"vectors/{axis}/{name}", chunks_for(self.is_packed, (length,), dtype),
                                    (length,), dtype)
        if packed is not None:
            return packed
        (buffer,) = self._start_building(f"vectors/{axis}/{name}", [("c/0", dtype, length)])
        return buffer

    def format_filled_empty_dense_vector(self, axis: str, name: str, filled: np.ndarray) -> None:
        if self._finish_packed(filled, filled.shape):
            return
        node, metadata = f"vectors/{axis}/{name}", array_metadata(filled.dtype, filled.shape)
        self._finish_building([("zarr.json", metadata.encode())], [(node, metadata)])

    def format_get_empty_sparse_vector(self, axis: str, name: str, dtype: np.dtype, nnz: int,
                                       indtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        nzind, nzval = self._start_building(f"vectors/{axis}/{name}", [("nzind/c/0", indtype, nnz),
                                                                        ("nzval/c/0", dtype, nnz)])
        return nzind, nzval

    def format_filled_empty_sparse_vector(self, axis: str, name: str, filled: SparseVector) -> None:
        self._finish_sparse(f"vectors/{axis}/{name}", [("nzind", filled.nzind), ("nzval", filled.nzval)])

    def _finish_sparse(self, node: str, components: list[tuple[str, np.ndarray]]) -> None:
        metadata = {name: array_metadata(values.dtype, values.shape) for name, values in components}
        files = [(f"{name}/zarr.json", text.encode()) for name, text in metadata.items()]
        self._finish_building([*files, ("zarr.json", _GROUP_FILE)], _sparse_entries(node, metadata))

    # Matrices.

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        return _is_node_name(name) and self._nodes.has_node(f"matrices/{rows_axis}/{columns_axis}/{name}")

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        return self._nodes.children(f"matrices/{rows_axis}/{columns_axis}")

    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        return self._consistently(f"matrices/{rows_axis}/{columns_axis}/{name}",
                                  lambda: self._get_matrix(rows_axis, columns_axis, name))

    def _get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix, CacheGroup | None]:
        node = f"matrices/{rows_axis}/{columns_axis}/{name}"
        what = f"matrix: {name}\nof the rows axis: {rows_axis}\nand the columns axis: {columns_axis}"
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        metadata = self._node_metadata(node, what)
        if metadata.get("node_type") == "array":
            info = self._array(node, what, metadata)
            self._require_shape(info, (shape[1], shape[0]), what)  # Zarr's shape is Julia's reversed
            values, group = self._read_dense(node, info, what)
            return values.reshape(shape, order="F"), group
        colptr, colptr_group = self._component(node, "colptr", what, index=True, length=shape[1] + 1)
        rowval, rowval_group = self._component(node, "rowval", what, index=True, at_most=shape[0] * shape[1])
        nzval, nzval_group = self._nzval(node, what, rowval.shape[0])
        if int(colptr[0]) != 1 or int(colptr[-1]) != rowval.shape[0] + 1:
            raise DafFormatError(f"the colptr and rowval of the sparse {what}\nin the daf zarr group: {self.path}\n"
                                 f"are not a 1-based CSC of {shape[0]} x {shape[1]} ({colptr.shape[0]} colptr from "
                                 f"{colptr[0] if colptr.size else '-'} to {colptr[-1] if colptr.size else '-'}, "
                                 f"{rowval.shape[0]} rowval)")
        if rowval.dtype != colptr.dtype:  # Julia's CSC has one index type
            rowval, rowval_group = rowval.astype(colptr.dtype), CacheGroup.MemoryData
        return SparseMatrixCSC(shape, colptr, rowval, nzval), weakest_cache_group(colptr_group, rowval_group,
                                                                                  nzval_group)

    def format_get_matrix_columns(self, rows_axis: str, columns_axis: str, name: str,
                                  columns: np.ndarray) -> StoredMatrix | None:
        return self._consistently(f"matrices/{rows_axis}/{columns_axis}/{name}",
                                  lambda: self._get_matrix_columns(rows_axis, columns_axis, name, columns))

    def _get_matrix_columns(self, rows_axis: str, columns_axis: str, name: str,
                            columns: np.ndarray) -> StoredMatrix | None:
        """Some columns of a packed (sharded) matrix, decoding only the chunks that hold them (``None``: not packed,
        or its shard is not stored, read whole as :meth:`_get_matrix` reads it)."""
        node = f"matrices/{rows_axis}/{columns_axis}/{name}"
        what = f"matrix: {name}\nof the rows axis: {rows_axis}\nand the columns axis: {columns_axis}"
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        metadata = self._node_metadata(node, what)
        if metadata.get("node_type") == "array":
            info = self._array(node, what, metadata)
            if info.packed is None:
                return None
            self._require_shape(info, (shape[1], shape[0]), what)
            lazy = self._lazy_packed(node, info, what)
            return None if lazy is None else lazy.columns(columns)
        parts = {part: self._array(f"{node}/{part}", f"{part} of the {what}")
                 for part in ("rowval", "nzval") if self._nodes.has_node(f"{node}/{part}")}
        if not any(info.packed is not None for info in parts.values()):
            return None
        colptr, _ = self._component(node, "colptr", what, index=True, length=shape[1] + 1)
        nnz = int(colptr[-1]) - 1
        try:
            starts, stops, selected_colptr = selected_column_runs(colptr, columns, shape[0])
        except ValueError as error:
            raise DafFormatError(f"the colptr of the sparse {what}\nin the daf zarr group: {self.path}\nis not a "
                                 f"1-based CSC of {shape[0]} x {shape[1]} ({error})") from None

        def runs(part: str) -> np.ndarray:
            info = parts.get(part)
            if info is not None and info.packed is not None and len(info.shape) == 1 \
                    and info.dtype != STRING_DTYPE and (part == "nzval" or info.dtype.kind in "iu"):
                if info.shape[0] != nnz:
                    raise DafFormatError(f"the {part} of the sparse {what}\nin the daf zarr group: {self.path}\n"
                                         f"has {info.shape[0]} entries (expected: {nnz})")
                lazy = self._lazy_packed(f"{node}/{part}", info, f"{part} of the {what}")
                if lazy is not None:
                    return lazy.elements(starts, stops)
            whole = self._component(node, "rowval", what, index=True, length=nnz)[0] if part == "rowval" else \
                self._nzval(node, what, nnz)[0]
            counts = stops - starts
            if not counts.size or not counts.sum():
                return whole[:0].copy()
            return whole[np.repeat(starts - np.concatenate(([0], np.cumsum(counts)[:-1])), counts)
                         + np.arange(counts.sum())]

        rowval = runs("rowval").astype(colptr.dtype, copy=False)
        return SparseMatrixCSC((shape[0], int(columns.shape[0])), selected_colptr, rowval, runs("nzval"))

    def _lazy_packed(self, node: str, info: _Array, what: str) -> LazyPackedArray | None:
        """The chunks of a packed array's shard, located (``None`` if the shard is not stored)."""
        assert info.packed is not None
        source = self._shard_source(f"{node}/{info.chunk_key((0,) * len(info.shape))}")
        if source is None or not source.size():
            return None

        def invalid(problem: str) -> DafFormatError:
            return DafFormatError(f"invalid packed data of the {what}\nin the daf zarr group: {self.path}\n({problem})")

        return LazyPackedArray(source, info.packed, invalid=invalid, via="auto", fill=info.fill,
                               cache=self._chunk_cache())

    def _shard_source(self, key: str) -> ByteSource | None:
        """The bytes of the shard of a packed array (``None``: not stored), which the shard reader reads: a zero-copy
        view of its map here (a directory or an archive); read by HTTP Range requests in a ZarrDaf served over HTTP
        (:class:`pydaf.formats.http.zarr.ServedZarrFormat`, which overrides this)."""
        size = self._nodes.size(key)
        if size is None:
            return None
        mapped = self._nodes.map(key, np.dtype(np.uint8), size) if size else None
        if size and mapped is None:
            return None  # (gone since its size was read: not stored)
        return BufferByteSource(f"{key} (in the daf zarr group: {self.path})",
                                np.zeros(0, dtype=np.uint8) if mapped is None else mapped[0])

    def _chunk_cache(self) -> ChunkCache | None:
        """The cache of decoded chunks of lazy packed reads (``None``: the local one, ``DAF_PACKED_LOCAL_CACHE_KB``)."""
        return None

    def format_set_matrix(self, rows_axis: str, columns_axis: str, name: str,
                          matrix: StoredMatrix | StorageScalar) -> None:
        self._require_names(("axis", rows_axis), ("axis", columns_axis), ("matrix", name))
        node = f"matrices/{rows_axis}/{columns_axis}/{name}"
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        if isinstance(matrix, SparseMatrixCSC):
            self._write_sparse(node, _sparse_parts([("colptr", matrix.colptr), ("rowval", matrix.rowval)],
                                                   matrix.nzval), packed=self.is_packed)
            return
        if not isinstance(matrix, np.ndarray):
            matrix = np.full(shape, matrix, dtype=scalar_dtype(matrix), order="F")
        self._write_array(node, np.asfortranarray(matrix).T, (shape[1], shape[0]),  # (string matrices: never packed)
                          packed=self.is_packed and matrix.dtype != STRING_DTYPE)

    def format_delete_matrix(self, rows_axis: str, columns_axis: str, name: str, *, for_set: bool) -> None:
        if for_set:
            self._require_names(("axis", rows_axis), ("axis", columns_axis), ("matrix", name))
        self._delete_node(f"matrices/{rows_axis}/{columns_axis}/{name}", f"matrix: {name}\nof the rows axis: "
                          f"{rows_axis}\nand the columns axis: {columns_axis}", for_set=for_set)

    def format_get_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                      dtype: np.dtype) -> np.ndarray:
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        # (Julia streams a packed dense matrix with one whole column per inner chunk, not chunks_for's)
        streamed = (shape[0], 1) if chunks_for(self.is_packed, shape, dtype) is not None else None
        packed = self._start_packed(f"matrices/{rows_axis}/{columns_axis}/{name}", streamed, shape, dtype)
        if packed is not None:
            return packed
        (buffer,) = self._start_building(f"matrices/{rows_axis}/{columns_axis}/{name}",
                                         [("c/0/0", dtype, shape[0] * shape[1])])
        return buffer.reshape(shape, order="F")

    def format_filled_empty_dense_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                         filled: np.ndarray) -> None:
        if self._finish_packed(np.asfortranarray(filled).T, (filled.shape[1], filled.shape[0])):
            return
        node = f"matrices/{rows_axis}/{columns_axis}/{name}"
        metadata = array_metadata(filled.dtype, (filled.shape[1], filled.shape[0]))
        self._finish_building([("zarr.json", metadata.encode())], [(node, metadata)])

    def format_get_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str, dtype: np.dtype,
                                       nnz: int, indtype: np.dtype) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        n_columns = self.format_axis_length(columns_axis)
        colptr, rowval, nzval = self._start_building(f"matrices/{rows_axis}/{columns_axis}/{name}", [
            ("colptr/c/0", indtype, n_columns + 1), ("rowval/c/0", indtype, nnz), ("nzval/c/0", dtype, nnz)])
        return colptr, rowval, nzval

    def format_filled_empty_sparse_matrix(self, rows_axis: str, columns_axis: str, name: str,
                                          filled: SparseMatrixCSC) -> None:
        self._finish_sparse(f"matrices/{rows_axis}/{columns_axis}/{name}", [
            ("colptr", filled.colptr), ("rowval", filled.rowval), ("nzval", filled.nzval)])

    # Reorder (Julia's hooks, in pydaf/formats/zarr/reorder.py: a directory only, an archive is append-only).

    reorder_module = _reorder

    @property  # (computed: FormatWriter declares it as a class attribute, hence the ignore)
    def supports_reorder(self) -> bool:  # type: ignore[override]
        """A directory can be reordered in place; a ZIP archive can't (append-only)."""
        return self._nodes.supports_rewrites

    def _no_reorder(self) -> DafError:
        return _reorder.no_reorder(self) if not self._nodes.supports_rewrites else super()._no_reorder()

    # What reorder.py builds nodes with (it can't import this module, which imports it).
    group_file: ClassVar[bytes] = _GROUP_FILE
    array_metadata = staticmethod(array_metadata)
    is_all_fill = staticmethod(_all_fill)


def _group_entry(metadata: dict[str, Any]) -> str:
    attributes = metadata.get("attributes")
    if not attributes:
        return _GROUP_ENTRY
    encoded = json.dumps(attributes, separators=(",", ":"), ensure_ascii=False)
    return f'{{"zarr_format":3,"node_type":"group","attributes":{encoded}}}'


def _sparse_parts(indices: list[tuple[str, np.ndarray]], nzval: np.ndarray) -> list[tuple[str, np.ndarray]]:
    """The components stored for sparse data: ``nzval`` is left out for all-true Bool values (Julia's rule)."""
    if nzval.dtype == np.bool_ and nzval.all():
        return indices
    return [*indices, ("nzval", nzval)]


def _sparse_entries(node: str, metadata: dict[str, str]) -> list[tuple[str, str]]:
    """The consolidated entries of a sparse property: its group and its arrays."""
    return [(node, _GROUP_ENTRY), *((f"{node}/{name}", metadata[name]) for name in metadata)]


def consolidated_order(key: str) -> tuple[int, list[str]]:
    """Where a node goes in the consolidated metadata pydaf writes: by depth, then by path (part by part), so the
    children of each group are consecutive, as zarr-python's reader needs (its ``_flat_to_nested`` sorts the keys by
    depth only, stably, and groups consecutive keys by parent: Julia's hash order, which interleaves parents, makes
    ``zarr.open_group`` fail with "No group found"). zarr-python itself writes by depth then case-folded path, which
    interleaves ``Cell/…`` and ``cell/…``; comparing the parts exactly never does.

    Example:
        >>> sorted(["vectors/cell/age", "axes/cell", "vectors", "axes", "vectors/cell", "axes/Cell"],
        ...        key=consolidated_order)
        ['axes', 'vectors', 'axes/Cell', 'axes/cell', 'vectors/cell', 'vectors/cell/age']
    """
    parts = key.split("/")
    return len(parts), parts


class ZarrDaf(PersistentDaf):
    """A Daf data set in a Zarr v3 hierarchy, Julia's ``ZarrDaf``: a directory ``x.daf.zarr``, a ZIP archive
    ``x.daf.zarr.zip``, or a group of a ZIP archive holding several, ``x.dafs.zarr.zip#/group``. Numbers are
    memory-mapped (zero-copy) in both; ZIP archives are append-only (deletes and overwrites raise
    :class:`~pydaf.formats.zip.store.DafAppendOnlyError`). Modes as :class:`~pydaf.H5df` (``r`` returns a
    :class:`~pydaf.DafReadOnly`; ``w`` replaces a directory or a whole archive, and is refused for a group of an
    archive). zarr-python reads what this writes (matrices as their transpose, as Julia's), packed arrays too
    (``packed=True``: writes pack by default, as sharded arrays; docs/design/packed.md).

    Example:
        >>> import pydaf, tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "example.daf.zarr")
        >>> daf = pydaf.ZarrDaf(path, "w", name="example!").add_axis("cell", ["A", "B"])
        >>> daf.set_vector("cell", "age", [3, 5]).get_vector("cell", "age").tolist()
        [3, 5]
        >>> sorted(os.listdir(os.path.join(path, "vectors", "cell", "age")))
        ['c', 'zarr.json']
        >>> zipped = pydaf.ZarrDaf(os.path.join(os.path.dirname(path), "all.dafs.zarr.zip#/cells"), "w+")
        >>> zipped.add_axis("cell", ["A"]).axis_vector("cell").tolist()
        ['A']
    """

    #: A leaf storage format (see :func:`pydaf.is_leaf`): it owns its state and can be reordered in place.
    leaf_format: ClassVar[bool] = True

    _format: ZarrFormat

    def __init__(self, path: str | os.PathLike, mode: str = "r", *, name: str | None = None,
                 packed: bool = False) -> None:
        packed = validated_packed_default(packed)
        super().__init__(ZarrFormat(os.fspath(path), mode), name=name)
        self._format.packed_default = packed


def _guess_can_open(path: str) -> bool:
    """A ZarrDaf path by its suffix (``x.daf.zarr``, ``x.daf.zarr.zip``, ``x.dafs.zarr.zip#/group``, and the near
    misses Julia refuses with a message), or a directory holding a Zarr group's ``zarr.json`` (or a v2 ``.zgroup``,
    refused with Julia's conversion hint) and no FilesDaf ``daf.json``."""
    if ".dafs.zarr.zip" in path or ".daf.zarr.zip" in path:
        return True
    if os.path.isdir(path):
        marked = any(os.path.isfile(os.path.join(path, marker)) for marker in ("zarr.json", ".zgroup"))
        return not os.path.isfile(os.path.join(path, "daf.json")) and (marked or path.rstrip("/").endswith(".daf.zarr"))
    return not os.path.lexists(path) and path.rstrip("/").endswith(".daf.zarr")


FORMAT = register_format(FormatEntry(
    name="ZarrDaf", paths="a Zarr v3 directory (x.daf.zarr), a ZIP of one (x.daf.zarr.zip), or a group in a ZIP "
    "(x.dafs.zarr.zip#/group)", guess_can_open=_guess_can_open, open=ZarrDaf.open, priority=20))
