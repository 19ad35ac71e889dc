"""A ZarrDaf directory served over HTTP, read-only: ZarrDaf's own reader (:class:`~pydaf.formats.zarr.ZarrFormat`),
reading its nodes through HTTP instead of a directory or a ZIP archive.

HTTP can't list a folder, so the data set is listed by the consolidated metadata of its root ``zarr.json`` (which
pydaf and Julia write into every ZarrDaf directory): the root is fetched once at open, and holds the ``zarr.json`` of
every node, so listing the properties, their types and shapes, and the lengths of the axes, takes no further request
for metadata. Each chunk file is fetched on its first use (one GET, bounded by the size its array's shape implies)
and kept in the data set's :class:`~pydaf.formats.http.ByteCache`; the shard of a packed array is read through an
:class:`~pydaf.formats.http.HttpByteSource` (Range requests where the server honours them, the whole file once where
it does not) by the same shard reader as every other format's, so a few columns of a packed matrix fetch only the
chunks holding them. A chunk the server does not have (404) is a chunk Zarr did not store: all the fill value, as a
local ZarrDaf reads a missing chunk file; an axis, or the indices of sparse data, must be stored, so theirs is an
error. Every other failure is the :class:`~pydaf.DafHttpError` or :class:`~pydaf.DafFormatError` HttpDaf gives.

Design notes: docs/http.md.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np

from ..._os.byte_sources import ByteSource
from ...abc.format import CacheGroup, FormatReader
from ...errors import DafFormatError, DafHttpError, DafNotDafError
from ..packed.shard import ChunkCache, http_chunk_cache
from ..zarr.format import ZarrFormat
from .client import ByteCache, HttpByteSource, HttpClient, HttpSettings, ServedIdentity, get_whole, http_url, join_url

#: A root ``zarr.json`` larger than this is not metadata (ZarrDaf's own bound on a ``zarr.json``).
_MAX_ROOT_BYTES = 1 << 28
_GONE = (404, 410)


def _is_node_name(name: str) -> bool:
    """Whether a name can be one node of the hierarchy (ZarrDaf's rule: a Daf name, as a file name)."""
    return bool(name) and not name.startswith(".") and not any(character in name for character in ("\\", "\0", "\n"))


class _ServedNodes:
    """The nodes of a ZarrDaf directory served at ``url``, as :class:`~pydaf.formats.zarr.ZarrFormat`'s reader reads
    them (the reading half of its directory and ZIP nodes): metadata and listings from the root's consolidated
    metadata (:meth:`index`), chunk files by GET, shards through byte sources, all sharing one client and cache."""

    #: Read-only: nothing is deleted, overwritten or consolidated here.
    supports_rewrites = False
    consolidates = False
    consolidated: dict[str, str] | None = None

    def __init__(self, url: str, client: HttpClient, cache: ByteCache) -> None:
        self.url = url
        self.client = client
        self.cache = cache
        self.axis_lengths: dict[str, int] = {}
        self._metadata: dict[str, dict[str, Any]] | None = None  # node -> its zarr.json (None: not indexed yet)
        self._children: dict[str, set[str]] = {}
        self._sources: dict[str, HttpByteSource] = {}
        self._missing: set[str] = set()  # (files the server does not have: asked once)
        self._lock = threading.Lock()

    # The index (the root's consolidated metadata).

    def index(self, root: dict[str, Any]) -> None:
        """List the nodes from the consolidated metadata of the (checked) root ``zarr.json``; a root without it is
        refused, saying how to add it."""
        where = f"the root zarr.json of the daf zarr group served at: {self.url}"
        consolidated = root.get("consolidated_metadata")
        listed = consolidated.get("metadata") if isinstance(consolidated, dict) else None
        if not isinstance(listed, dict):
            raise DafFormatError(f"no consolidated_metadata in {where}\n(a ZarrDaf served over HTTP is listed by it: "
                                 "HTTP can't list folders; open the directory once for writing where it is stored, "
                                 "e.g. pydaf.ZarrDaf(path, \"r+\"), which writes it, before serving it)")
        metadata: dict[str, dict[str, Any]] = {}
        children: dict[str, set[str]] = {}
        for key, node in listed.items():
            if not isinstance(node, dict):
                raise DafFormatError(f"invalid consolidated_metadata in {where}\n(the entry of the node: {key[:300]} "
                                     "is not a JSON object)")
            parts = key.split("/")
            if not all(_is_node_name(part) for part in parts):
                continue  # (no Daf name: never looked up)
            metadata[key] = node
            children.setdefault("/".join(parts[:-1]), set()).add(parts[-1])
        self._metadata, self._children = metadata, children

    def has_node(self, node: str) -> bool:
        return not node or (self._metadata is not None and node in self._metadata)

    def children(self, node: str) -> set[str]:
        return set(self._children.get(node, ()))

    def entries(self, node: str) -> set[str]:
        """The nodes listed under a node (what HTTP can tell of the files in its folder)."""
        return self.children(node) | ({"zarr.json"} if self.has_node(node) else set())

    def exists(self, key: str) -> bool:
        return self.has_node(key) or bool(self._children.get(key))

    # Files.

    def read(self, key: str, limit: int | None = None) -> bytes | None:
        """A node's ``zarr.json`` (from the index, once it is built), or a file's bytes by one GET (at most
        ``limit``), kept in the cache; ``None`` if the server does not have it."""
        if self._metadata is not None and key.endswith("/zarr.json"):
            listed = self._metadata.get(key[:-len("/zarr.json")])
            return None if listed is None else json.dumps(listed).encode()
        return self._get(key, self.client.settings.max_unsized_bytes if limit is None else limit)

    def _get(self, key: str, limit: int) -> bytes | None:
        if key in self._missing:
            return None
        # (no ``what``: the reader layer completes an error with the property and the data set)
        body = get_whole(self.client, self.cache, join_url(self.url, key), limit=limit, accept=_GONE,
                         what=None if self._metadata is not None else f"{key} of the daf served at: {self.url}")
        if body is None:
            with self._lock:
                self._missing.add(key)
        return body

    def map(self, key: str, dtype: np.dtype, count: int) -> tuple[np.ndarray, CacheGroup] | None:
        """The ``count`` values of a chunk file (fetched whole, read-only), or ``None`` if the server does not have
        it; a file of another size is a :class:`~pydaf.DafFormatError` (one announced larger, a
        :class:`~pydaf.DafHttpError`, before its body is read)."""
        expected = count * dtype.itemsize
        data = self._get(key, expected)
        if data is None:
            return None
        if len(data) != expected:
            raise DafFormatError(f"the chunk: {key}\nin the daf zarr group served at: {self.url}\nhas {len(data)} "
                                 f"bytes instead of {expected} ({count} x {dtype})")
        return np.frombuffer(data, dtype=dtype, count=count), CacheGroup.MemoryData

    def source(self, key: str) -> HttpByteSource:
        """The byte source of a file (one per file, sharing the data set's connections and cache)."""
        with self._lock:
            source = self._sources.get(key)
            if source is None:
                source = self._sources[key] = HttpByteSource(join_url(self.url, key), client=self.client,
                                                             cache=self.cache)
            return source

    def size(self, key: str) -> int | None:
        """A file's size (its bytes, if fetched; else asked of the server with its last bytes, kept: a small file
        comes whole), or ``None`` if the server does not have it."""
        cached = self.cache.get((join_url(self.url, key), "whole"))
        if cached is not None:
            return len(cached)
        if key in self._missing:
            return None
        try:
            return self.source(key).size()
        except DafHttpError as error:
            if error.status not in _GONE:
                raise
            with self._lock:
                self._missing.add(key)
            return None


class ServedZarrFormat(ServedIdentity, ZarrFormat):
    """The storage of a ZarrDaf directory served over HTTP (the module's docstring says what is fetched when): a
    read-only :class:`~pydaf.formats.zarr.ZarrFormat` whose nodes are read by HTTP (the facade is
    :class:`~pydaf.HttpDaf`).

    Example:
        >>> ServedZarrFormat("http://127.0.0.1:9/x.daf.zarr", HttpSettings(timeout=1, retries=0))
        ... # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafHttpError: can't connect to: http://127.0.0.1:9/x.daf.zarr/zarr.json
        for the zarr.json of the daf served at: http://127.0.0.1:9/x.daf.zarr
        (...)
    """

    served_format = "ZarrDaf"

    type_name = "HttpDaf"
    maps_files = False  # (fetched into memory)
    persistent = True  # (opening the URL again reads the same data)

    _nodes: _ServedNodes  # type: ignore[assignment]

    def __init__(self, url: str, settings: HttpSettings | None = None) -> None:
        # (none of ZarrFormat's opening of a local path: the few fields its reader uses, then the root)
        self.url = http_url(url)
        self.settings = settings if settings is not None else HttpSettings.from_environment()
        self.client = HttpClient(self.settings)
        self.cache = ByteCache(self.settings.cache_bytes)
        self.mode, self.container, self.group, self.path = "r", self.url, None, self.url
        self.is_writable = False
        self._building = None
        self._closed = False
        self._others_may_write = False
        self._nodes = _ServedNodes(self.url, self.client, self.cache)
        self._root: dict[str, Any] | None = None
        try:
            self._open_root(False)
            assert self._root is not None
            self._nodes.index(self._root)  # (a Zarr v3 group, a Daf data set of a version this code reads)
            self._root = None
        except BaseException:
            self.client.close()  # (a failed open keeps no connection)
            raise

    def _root_metadata(self) -> dict[str, Any] | None:
        metadata = super()._root_metadata()
        if metadata is None:
            raise DafNotDafError(f"not a daf data set: {self.url}\n(the server has no zarr.json there: HTTP 404 for "
                                 f"{join_url(self.url, 'zarr.json')})")
        self._root = metadata
        return metadata

    def _shard_source(self, key: str) -> ByteSource | None:
        """The shard's :class:`~pydaf.formats.http.HttpByteSource` (``None``: the server does not have it)."""
        return None if self._nodes.size(key) is None else self._nodes.source(key)

    def _chunk_cache(self) -> ChunkCache | None:
        return http_chunk_cache()

    def matrix_columns(self, rows_axis: str, columns_axis: str, name: str,
                       columns: np.ndarray) -> np.ndarray | None:
        """The ``columns`` (0-based positions) of a dense numeric matrix stored flat (one uncompressed chunk) as
        ``(rows_axis, columns_axis)``, read by Range requests (adjacent and nearby columns in one request), as a
        column-major array; ``None`` if the matrix is stored otherwise (sparse, packed, strings, several chunks), for
        :meth:`pydaf.HttpDaf.get_matrix_columns`."""
        node = f"matrices/{rows_axis}/{columns_axis}/{name}"
        what = f"matrix: {name}\nof the rows axis: {rows_axis}\nand the columns axis: {columns_axis}"
        if not self._nodes.has_node(node):
            return None
        metadata = self._node_metadata(node, what)
        if metadata.get("node_type") != "array":
            return None
        info = self._array(node, what, metadata)
        if not info.flat or info.dtype.kind not in "biuf":
            return None
        n_rows, n_columns = self.format_axis_length(rows_axis), self.format_axis_length(columns_axis)
        self._require_shape(info, (n_columns, n_rows), what)
        key = f"{node}/{info.chunk_key((0, 0))}"
        size = self._nodes.size(key)
        if size is None:  # (not stored: all the fill value)
            values = np.asfortranarray(self._allocate((n_rows, len(columns)), info, what))
            values.flags.writeable = False
            return values
        column_bytes = n_rows * info.dtype.itemsize
        if size != column_bytes * n_columns:
            raise DafFormatError(f"the chunk: {key}\nof the {what}\nin the daf zarr group served at: {self.url}\nhas "
                                 f"{size} bytes instead of {column_bytes * n_columns}")
        parts = self._nodes.source(key).read_ranges([(int(column) * column_bytes, column_bytes)
                                                     for column in columns])
        return np.frombuffer(b"".join(parts), dtype=info.dtype).reshape((n_rows, len(parts)), order="F")

    def format_shared_state(self, state: Any) -> Any:
        return FormatReader.format_shared_state(self, state)  # (each open of a URL is its own data set)

    def format_close(self) -> None:
        """Close the connections and drop the fetched bytes (arrays already returned keep theirs)."""
        self._closed = True
        self.client.close()
        self.cache.clear()
