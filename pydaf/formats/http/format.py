"""HttpDaf: read-only access to a FilesDaf directory served by any static web server (Julia's ``HttpDaf``), and,
beyond Julia, to a ZarrDaf directory (:mod:`.zarr`; :func:`served_format` tells which is served).

``metadata.json`` (docs/spec/FORMATS.md §3.2) is fetched once at open, so listing the scalars, axes, vectors and
matrices, reading scalars and the lengths of axes, takes no further request; each data file is fetched on its first
use (one GET, its size checked against what ``metadata.json`` implies before a byte is read) and kept in a bounded
cache. The files are decoded by the same code as FilesDaf's and ZipDaf's (:mod:`pydaf.formats.files.layout`).
The server's data is assumed not to change while a data set is open; reopening picks up changes.

Design notes: docs/http.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar
from urllib.parse import urlsplit

import numpy as np

from ...abc.format import CacheGroup, FormatReader, StoredMatrix, StoredVector
from ...core.read_only import DafReadOnly
from ...core.readers import DafReader
from ...errors import DafFormatError, DafIndexError, DafMissingError, DafModeError, DafNotDafError
from ...sparse import SparseMatrixCSC
from ...storage_types import StorageScalar
from ..files.layout import (
    axis_entries,
    decode_matrix,
    decode_matrix_columns,
    decode_vector,
    is_file_name,
    is_packed,
    lines,
    member,
    numeric_dtype,
    parse_json,
    scalar_value,
    verify_version,
)
from ..packed.shard import http_chunk_cache
from ..registry import FormatEntry, register_format
from .client import ByteCache, HttpByteSource, HttpClient, HttpSettings, ServedIdentity, get_whole, http_url, join_url
from .zarr import ServedZarrFormat

_MAX_DAF_JSON_BYTES = 1 << 16
_MAX_METADATA_BYTES = 1 << 30  # (a descriptor is ~100 bytes: a billion bytes is ten million properties)


class _HttpSource:
    """The files of one property on the server, as the layout's decoders read them."""

    def __init__(self, storage: HttpFormat, base: str, what: str) -> None:
        self._storage = storage
        self._base = base
        self.what = what

    def map(self, suffix: str, dtype: np.dtype, count: int | None) -> tuple[np.ndarray, CacheGroup]:
        relative = self._base + suffix
        if count is None:  # (v1.0 sparse components: as long as their size says)
            data = self._storage.fetch(relative, self.what)
            if len(data) % dtype.itemsize:
                raise DafFormatError(f"the data file: {relative}\nof {self.what}\nin the daf served at: "
                                     f"{self._storage.url}\nhas {len(data)} bytes (not a multiple of "
                                     f"{dtype.itemsize})")
            count = len(data) // dtype.itemsize
        else:
            data = self._storage.fetch(relative, self.what, expected=count * dtype.itemsize)
        return np.frombuffer(data, dtype=dtype, count=count), CacheGroup.MemoryData

    def text(self, suffix: str, count: int) -> np.ndarray:
        data = self._storage.fetch(self._base + suffix, self.what)
        return lines(data, count, f"{self.what}\nin the daf served at: {self._storage.url}")

    def invalid(self, problem: str) -> DafFormatError:
        return DafFormatError(f"invalid {self.what}\nin the daf served at: {self._storage.url}\n({problem})")

    def byte_source(self, suffix: str, *, max_size: int | None = None) -> HttpByteSource:
        """The served file of the property with ``suffix`` (a packed shard), read by Range requests."""
        return self._storage.byte_source(self._base + suffix, max_size=max_size)


class HttpFormat(ServedIdentity, FormatReader):
    """The storage of an :class:`HttpDaf`: the files of a FilesDaf directory at a URL (see the module docstring)."""

    type_name = "HttpDaf"
    supports_rewrites = False  # (nothing is ever written)
    persistent = True  # (opening the URL again reads the same data)

    def __init__(self, url: str, settings: HttpSettings | None = None) -> None:
        self.url = http_url(url)
        self.settings = settings if settings is not None else HttpSettings.from_environment()
        self.client = HttpClient(self.settings)
        self.cache = ByteCache(self.settings.cache_bytes)
        try:
            self.metadata = self._open()
        except BaseException:
            self.client.close()  # (a failed open keeps no connection)
            raise

    def _open(self) -> dict[str, dict[str, Any]]:
        """``daf.json`` checked, and ``metadata.json`` parsed."""
        daf_json = self.client.get(join_url(self.url, "daf.json"), limit=_MAX_DAF_JSON_BYTES,
                                   what=f"daf.json of the daf served at: {self.url}", accept=(404,))
        if daf_json.status == 404:
            raise DafNotDafError(f"not a daf data set: {self.url}\n(the server has no daf.json there: HTTP 404 for "
                                 f"{daf_json.url})")
        where = f"the daf served at: {self.url}"
        verify_version(parse_json(daf_json.body, f"the daf.json of {where}"), where)
        metadata = self.client.get(join_url(self.url, "metadata.json"), limit=_MAX_METADATA_BYTES,
                                   what=f"metadata.json of {where}", accept=(404,))
        if metadata.status == 404:
            raise DafFormatError(f"missing metadata.json in: {where}\n(HttpDaf lists a data set by its metadata.json; "
                                 "open the directory once for writing where it is stored, e.g. pydaf.FilesDaf(path, "
                                 "\"r+\"), which writes it, before serving it)")
        index = parse_json(metadata.body, f"the metadata.json of {where}")
        if not isinstance(index, dict) or not all(isinstance(value, dict) for value in index.values()):
            raise DafFormatError(f"invalid metadata.json of {where}\n(expected a JSON object of property descriptors)")
        return index

    def format_close(self) -> None:
        """Close the connections and drop the fetched bytes (arrays already returned keep theirs)."""
        self.client.close()
        self.cache.clear()

    # Fetching.

    def fetch(self, relative: str, what: str, *, expected: int | None = None) -> bytes:
        """The bytes of a file of the data set (``expected`` bytes if given: a server that says or sends otherwise
        is refused before more is read), fetched once and then served from the bounded cache."""
        limit = expected if expected is not None else self.settings.max_unsized_bytes
        # (no what: the reader layer completes an error with the property and the data set)
        body = get_whole(self.client, self.cache, join_url(self.url, relative), limit=limit, expected=expected)
        assert body is not None  # (no status accepted but 2xx)
        if expected is not None and len(body) != expected:  # (a 2xx other than 200: checked here)
            raise DafFormatError(f"the data file: {relative}\nof {what}\nin the daf served at: {self.url}\nhas "
                                 f"{len(body)} bytes instead of {expected}")
        return body

    def byte_source(self, relative: str, *, size: int | None = None, max_size: int | None = None) -> HttpByteSource:
        """A :class:`HttpByteSource` of a file of the data set (of ``size`` bytes, if known: checked against what the
        server says), sharing this data set's connections and cache."""
        return HttpByteSource(join_url(self.url, relative), size=size, max_size=max_size, client=self.client,
                              cache=self.cache)

    # Names.

    def _names(self, prefix: str) -> set[str]:
        return {key[len(prefix):] for key in self.metadata
                if key.startswith(prefix) and is_file_name(key[len(prefix):])}

    def _descriptor(self, key: str, what: str) -> dict[str, Any]:
        descriptor = self.metadata.get(key)
        if descriptor is None:
            raise DafMissingError(f"missing {what}\nin the daf served at: {self.url}")
        return descriptor

    @staticmethod
    def _key(*parts: str) -> str | None:
        """The metadata key of a property (``None`` for a name no FilesDaf could hold: such a property is not
        found, never another one)."""
        names = parts[1:]
        return "/".join(parts) if all(is_file_name(name) for name in names) else None

    # Scalars.

    def format_has_scalar(self, name: str) -> bool:
        return self._key("scalars", name) in self.metadata

    def format_scalars_set(self) -> set[str]:
        return self._names("scalars/")

    def format_get_scalar(self, name: str) -> StorageScalar:
        what = f"the scalar: {name}"
        return scalar_value(self._descriptor(f"scalars/{name}", what), f"{what}\nin the daf served at: {self.url}")

    # Axes.

    def format_has_axis(self, axis: str, *, for_change: bool) -> bool:
        return self._key("axes", axis) in self.metadata

    def format_axes_set(self) -> set[str]:
        return self._names("axes/")

    def format_axis_length(self, axis: str) -> int:
        what = f"the axis: {axis}"
        descriptor = self._descriptor(f"axes/{axis}", what)
        where = f"{what}\nin the metadata.json of the daf served at: {self.url}"
        if member(descriptor, "format", str, where) != "axis":
            raise DafFormatError(f"invalid descriptor of {where}\n(expected \"format\":\"axis\")")
        count = member(descriptor, "n_entries", int, where)
        if count < 0:
            raise DafFormatError(f"invalid descriptor of {where}\n(negative n_entries: {count})")
        return count

    def format_axis_vector(self, axis: str) -> tuple[np.ndarray, CacheGroup | None]:
        length = self.format_axis_length(axis)
        what = f"the axis: {axis}"
        data = self.fetch(f"axes/{axis}.txt", what)
        return axis_entries(data, length, f"{what}\nin the daf served at: {self.url}"), CacheGroup.MemoryData

    # Vectors.

    def format_has_vector(self, axis: str, name: str) -> bool:
        return self._key("vectors", axis, name) in self.metadata

    def format_vectors_set(self, axis: str) -> set[str]:
        return self._names(f"vectors/{axis}/") if is_file_name(axis) else set()

    def format_get_vector(self, axis: str, name: str) -> tuple[StoredVector, CacheGroup | None]:
        what = f"the vector: {name}\nof the axis: {axis}"
        base = f"vectors/{axis}/{name}"
        return decode_vector(_HttpSource(self, base, what), self._descriptor(base, what),
                             self.format_axis_length(axis))

    # Matrices.

    def format_has_matrix(self, rows_axis: str, columns_axis: str, name: str) -> bool:
        return self._key("matrices", rows_axis, columns_axis, name) in self.metadata

    def format_matrices_set(self, rows_axis: str, columns_axis: str) -> set[str]:
        if not (is_file_name(rows_axis) and is_file_name(columns_axis)):
            return set()
        return self._names(f"matrices/{rows_axis}/{columns_axis}/")

    def format_get_matrix(self, rows_axis: str, columns_axis: str, name: str) -> tuple[StoredMatrix,
                                                                                       CacheGroup | None]:
        what = f"the matrix: {name}\nof the rows axis: {rows_axis}\nand the columns axis: {columns_axis}"
        base = f"matrices/{rows_axis}/{columns_axis}/{name}"
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        return decode_matrix(_HttpSource(self, base, what), self._descriptor(base, what), shape)

    def format_get_matrix_columns(self, rows_axis: str, columns_axis: str, name: str,
                                  columns: np.ndarray) -> StoredMatrix | None:
        what = f"the matrix: {name}\nof the rows axis: {rows_axis}\nand the columns axis: {columns_axis}"
        base = f"matrices/{rows_axis}/{columns_axis}/{name}"
        shape = (self.format_axis_length(rows_axis), self.format_axis_length(columns_axis))
        return decode_matrix_columns(_HttpSource(self, base, what), self._descriptor(base, what), shape, columns,
                                     cache=http_chunk_cache())

    def matrix_columns(self, rows_axis: str, columns_axis: str, name: str,
                       columns: np.ndarray) -> np.ndarray | None:
        """The ``columns`` (0-based positions) of a flat dense numeric matrix stored as ``(rows_axis, columns_axis)``,
        read by Range requests (adjacent and nearby columns in one request), as a column-major array; ``None`` if the
        matrix is stored otherwise (sparse, packed, strings)."""
        descriptor = self.metadata.get(f"matrices/{rows_axis}/{columns_axis}/{name}")
        if descriptor is None or descriptor.get("format") != "dense" or is_packed(descriptor):
            return None
        eltype = descriptor.get("eltype")
        dtype = None if not isinstance(eltype, str) or eltype in ("String", "string") else \
            numeric_dtype(eltype, f"the matrix: {name}")
        if dtype is None:
            return None
        n_rows, n_columns = self.format_axis_length(rows_axis), self.format_axis_length(columns_axis)
        column_bytes = n_rows * dtype.itemsize
        source = self.byte_source(f"matrices/{rows_axis}/{columns_axis}/{name}.data", size=column_bytes * n_columns)
        parts = source.read_ranges([(int(column) * column_bytes, column_bytes) for column in columns])
        values = np.frombuffer(b"".join(parts), dtype=dtype).reshape((n_rows, len(parts)), order="F")
        return values


class HttpDaf(DafReadOnly):
    """A read-only Daf data set served over HTTP, Julia's ``HttpDaf``: ``url`` is the address of a FilesDaf
    directory exposed by any static web server (``python -m http.server``, nginx, an object store), holding its
    ``daf.json`` and ``metadata.json``. ``metadata.json`` is fetched at open; each data file on its first use, then
    kept in a cache bounded by ``DAF_PACKED_HTTP_CACHE_KB`` (default 256 MiB). Packed files are read by Range
    requests where the server honours them (:class:`~pydaf.formats.http.HttpByteSource`).

    Beyond Julia, ``url`` may also be a ZarrDaf directory (``x.daf.zarr``, or any URL whose root has a Zarr group's
    ``zarr.json`` marked as a Daf data set and no ``daf.json``), read the same way by ZarrDaf's own reader
    (:mod:`pydaf.formats.http.zarr`): the root ``zarr.json`` (and its consolidated metadata) at open, each chunk file
    on first use, packed shards by Range requests.

    The name is ``name``, else the data set's ``name`` scalar, else the URL. ``timeout`` (seconds per connection or
    read), ``retries`` (after a 5xx status or a dropped connection) and ``backoff`` (the first pause between retries,
    doubled each time) say how patient it is; every failure is a :class:`~pydaf.DafHttpError` naming the URL and the
    property. ``packed`` is accepted, as Julia accepts it, and means nothing for a data set that is never written.

    Example:
        >>> import pydaf
        >>> pydaf.HttpDaf("ftp://example.com/cells.daf")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafPathError: not an HTTP(S) URL: ftp://example.com/cells.daf
        (HttpDaf reads data sets served at http:// or https:// URLs)
    """

    write_hint: ClassVar[str | None] = (
        "an HttpDaf is read-only: copy it to write, e.g. pydaf convert URL local.daf, or pydaf.copy_all")

    _format: HttpFormat | ServedZarrFormat

    def __init__(self, url: str, *, name: str | None = None, timeout: float = 30.0, retries: int = 3,
                 backoff: float = 0.25, packed: bool = False) -> None:
        settings = HttpSettings.from_environment(timeout=timeout, retries=retries, backoff=backoff)
        super().__init__(served_format(url, settings), name=name)

    @property
    def url(self) -> str:
        """The URL of the served directory (without a trailing ``/``)."""
        return self._format.url

    def get_matrix_columns(self, rows_axis: str, columns_axis: str, name: str,
                           columns: slice | Sequence[int] | Sequence[str] | np.ndarray) -> np.ndarray:
        """Some columns of a dense matrix (``columns``: a slice or 0-based positions of the columns axis, or its
        entries), as a read-only column-major array, fetching only their bytes where the matrix is stored flat in
        this layout (one Range request per run of nearby columns, ``DAF_HTTP_MAX_COALESCE_GAP_KB``); otherwise the
        columns of :meth:`get_matrix` (a sparse matrix is densified only in the selected columns).

        Example:
            >>> import functools, http.server, os, tempfile, threading, numpy as np, pydaf
            >>> path = os.path.join(tempfile.mkdtemp(), "x.daf")
            >>> daf = pydaf.FilesDaf(path, "w").add_axis("cell", ["A", "B"]).add_axis("gene", ["X", "Y", "Z"])
            >>> _ = daf.set_matrix("cell", "gene", "UMIs", np.arange(6).reshape(2, 3), relayout=False)
            >>> class Quiet(http.server.SimpleHTTPRequestHandler):
            ...     def log_message(self, *arguments): pass
            >>> server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=path))
            >>> threading.Thread(target=server.serve_forever, daemon=True).start()
            >>> served = pydaf.HttpDaf(f"http://127.0.0.1:{server.server_address[1]}")
            >>> served.get_matrix_columns("cell", "gene", "UMIs", [2, 0]).tolist()
            [[2, 0], [5, 3]]
            >>> served.get_matrix_columns("gene", "cell", "UMIs", ["B"]).tolist()  # (relaid out: all, then B)
            [[3], [4], [5]]
            >>> server.shutdown(); server.server_close()
        """
        if isinstance(columns, slice):
            positions = np.arange(self.axis_length(columns_axis))[columns]
        else:
            listed = list(columns)
            positions = self.axis_indices(columns_axis, listed) if listed and isinstance(listed[0], str) else \
                np.asarray(listed, dtype=np.int64)
        n_columns = self.axis_length(columns_axis)
        if positions.size and (positions.min() < 0 or positions.max() >= n_columns):
            raise DafIndexError(f"column positions out of range: {positions.min()} to {positions.max()}\nfor the "
                                f"axis: {columns_axis} of length: {n_columns}", daf_name=self.name)
        self.axis_length(rows_axis)  # (a missing axis: its error, first)
        if self.has_matrix(rows_axis, columns_axis, name, relayout=False):
            with self._state.lock.read():
                values = self._format.matrix_columns(rows_axis, columns_axis, name, positions)
            if values is not None:
                return values
        selected = self.get_stored_matrix_columns(rows_axis, columns_axis, name, positions)  # (packed: lazily)
        dense = np.asfortranarray(selected.to_dense() if isinstance(selected, SparseMatrixCSC) else selected)
        dense.flags.writeable = False
        return dense

    @classmethod
    def open(cls, path: str, mode: str = "r", *, name: str | None = None, packed: bool = False) -> DafReader:
        """Open the data set served at the URL ``path`` (:func:`~pydaf.open_daf`'s entry): mode ``r`` only
        (``packed``, the default of writes, means nothing here)."""
        if mode != "r":
            raise DafModeError(f"can't open a data set served over HTTP in mode {mode!r}: {path}\n(HttpDaf is "
                               "read-only: open it in mode \"r\", or copy it to a local data set to write)")
        return cls(path, name=name)


def served_format(url: str, settings: HttpSettings) -> HttpFormat | ServedZarrFormat:
    """The storage of the data set served at ``url``: a ZarrDaf directory if its path ends with ``.daf.zarr``, else
    a FilesDaf directory (its ``daf.json``), else, where there is no ``daf.json``, a ZarrDaf directory (its root
    ``zarr.json``); neither is a :class:`~pydaf.DafNotDafError` naming both.

    Example:
        >>> served_format("http://127.0.0.1:9/x.daf.zarr", HttpSettings(timeout=1, retries=0))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafHttpError: can't connect to: http://127.0.0.1:9/x.daf.zarr/zarr.json
        ...
    """
    if urlsplit(http_url(url)).path.endswith(".daf.zarr"):
        return ServedZarrFormat(url, settings)
    try:
        return HttpFormat(url, settings)
    except DafNotDafError:
        try:
            return ServedZarrFormat(url, settings)
        except DafNotDafError:
            base = http_url(url)
            raise DafNotDafError(f"not a daf data set: {base}\n(the server has neither a daf.json there, as a FilesDaf "
                                 f"directory has, nor a zarr.json, as a ZarrDaf directory has: HTTP 404 for "
                                 f"{join_url(base, 'daf.json')} and {join_url(base, 'zarr.json')})") from None


def _guess_can_open(path: str) -> bool:
    """An ``http://`` or ``https://`` URL (in any case)."""
    return path[:8].lower().startswith(("http://", "https://"))


FORMAT = register_format(FormatEntry(
    name="HttpDaf", paths="a FilesDaf or ZarrDaf directory served over HTTP (http://host/x.daf, "
    "http://host/x.daf.zarr or https://...; read-only)",
    guess_can_open=_guess_can_open, open=HttpDaf.open, priority=0, read_only=True))
