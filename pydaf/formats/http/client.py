"""The HTTP side of :class:`~pydaf.HttpDaf`: bounded GETs and Range GETs of the files of a data set served by a
static web server, with timeouts, retries, redirects and every length checked, over the standard library's
``http.client`` (imported on first use: ``import pydaf`` stays fast), and :class:`HttpByteSource`, the
:class:`~pydaf._os.byte_sources.ByteSource` of one served file (what packed shards are read through).

Every failure is a :class:`~pydaf.DafHttpError` naming the URL (and what it was read for): a 404, a 5xx that persisted
through the retries, a timeout, a dropped connection, a redirect loop, a body shorter than announced, a
``Content-Length`` or ``Content-Range`` that disagrees with what arrives or with what ``metadata.json`` says. No body is
ever read without a bound: each read is capped by the size the caller expects (from ``metadata.json``), or by
:attr:`HttpSettings.max_unsized_bytes` where nothing says how large it is.

The knobs of Julia's ``PackedFormat`` that concern HTTP are read from the environment when a data set is opened:
``DAF_PACKED_HTTP_CACHE_KB`` (the bounded cache of fetched bytes, default 262144: 256 MiB) and
``DAF_HTTP_MAX_COALESCE_GAP_KB`` (the largest gap between two wanted byte ranges that one Range request spans, default
``DAF_PACKED_TARGET_CHUNK_KB``, itself 8 by default).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urljoin, urlsplit

from ...core.cache import SizedLruCache
from ...core.packed_settings import (
    DEFAULT_HTTP_CACHE_KB,
    DEFAULT_TARGET_CHUNK_KB,
    http_max_coalesce_gap_kb,
    packed_http_cache_kb,
)
from ...errors import DafFormatError, DafHttpError, DafPathError, DafValueError

if TYPE_CHECKING:
    import http.client

_REDIRECTS = (301, 302, 303, 307, 308)

#: How many last bytes of a file :meth:`HttpByteSource.size` fetches with its size (a ZIP's central directory is at
#: its end; a smaller file comes whole).
TAIL_BYTES = 1 << 16
_READ_BLOCK = 1 << 20


@dataclass(frozen=True)
class HttpSettings:
    """How :class:`~pydaf.HttpDaf` talks to its server.

    Attributes:
        timeout: seconds to wait to connect and for each read from the socket (a timeout is not retried).
        retries: how many times a request is repeated after a 5xx status or a dropped connection.
        backoff: seconds to wait before the first retry, doubled before each next one.
        max_redirects: how many redirects one request follows (a loop is refused at once).
        cache_bytes: the bound of the cache of fetched bytes (``DAF_PACKED_HTTP_CACHE_KB``).
        max_coalesce_gap: the largest gap, in bytes, between two wanted byte ranges fetched by one Range request
            (``DAF_HTTP_MAX_COALESCE_GAP_KB``).
        max_unsized_bytes: the bound of a body whose size nothing announces (a lines file, a packed shard, served
            without a ``Content-Length``).

    Example:
        >>> settings = HttpSettings.from_environment(timeout=5)
        >>> settings.timeout, settings.cache_bytes, settings.max_coalesce_gap
        (5, 268435456, 8192)
    """

    timeout: float = 30.0
    retries: int = 3
    backoff: float = 0.25
    max_redirects: int = 10
    cache_bytes: int = DEFAULT_HTTP_CACHE_KB * 1024
    max_coalesce_gap: int = DEFAULT_TARGET_CHUNK_KB * 1024
    max_unsized_bytes: int = 1 << 34

    @classmethod
    def from_environment(cls, **overrides: Any) -> HttpSettings:
        """The defaults, with Julia's knobs from the environment (:mod:`pydaf.core.packed_settings`), then
        ``overrides``."""
        settings = cls(cache_bytes=packed_http_cache_kb() * 1024, max_coalesce_gap=http_max_coalesce_gap_kb() * 1024)
        settings = replace(settings, **overrides)
        if not settings.timeout > 0 or settings.retries < 0 or settings.backoff < 0 or settings.max_redirects < 0:
            raise DafValueError(f"invalid HTTP settings: timeout={settings.timeout}, retries={settings.retries}, "
                                f"backoff={settings.backoff}, max_redirects={settings.max_redirects}\n(expected a "
                                "positive timeout and non-negative retries, backoff and redirects)")
        return settings


def http_url(url: str) -> str:
    """``url`` without its trailing ``/``, once it is an ``http://`` or ``https://`` URL with a host (a
    :class:`~pydaf.DafPathError` otherwise: HttpDaf reads nothing else).

    Example:
        >>> http_url("http://127.0.0.1:8000/cells.daf/")
        'http://127.0.0.1:8000/cells.daf'
        >>> http_url("ftp://example.com/cells.daf")
        Traceback (most recent call last):
        ...
        pydaf.errors.DafPathError: not an HTTP(S) URL: ftp://example.com/cells.daf
        (HttpDaf reads data sets served at http:// or https:// URLs)
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https") or not parts.netloc:
        raise DafPathError(f"not an HTTP(S) URL: {url}\n(HttpDaf reads data sets served at http:// or https:// URLs)")
    if parts.query or parts.fragment:
        raise DafPathError(f"a URL with a query or a fragment: {url}\n(HttpDaf appends the paths of the data set's "
                           "files to the URL of its directory, which can't carry either)")
    return url.rstrip("/")


def join_url(base: str, relative_path: str) -> str:
    """The URL of a file of the data set (each path segment percent-encoded), Julia's ``join_url``.

    Example:
        >>> join_url("http://host/x.daf", "vectors/cell/donor age.data")
        'http://host/x.daf/vectors/cell/donor%20age.data'
    """
    return base.rstrip("/") + "/" + "/".join(quote(part, safe="") for part in relative_path.split("/"))


class ServedIdentity:
    """What names a data set read over HTTP (mixed into its format): its URL, as its default name, its complete path
    and in its description."""

    url: str
    served_format: str | None = None  # (the layout served, where it isn't a FilesDaf's)

    def format_default_name(self) -> str:
        return self.url

    def format_complete_path(self) -> str | None:
        return self.url

    def format_description_header(self, indent: str, lines: list[str], deep: bool) -> None:
        lines.append(f"{indent}type: HttpDaf")
        lines.append(f"{indent}url: {self.url}")
        if self.served_format is not None:
            lines.append(f"{indent}format: {self.served_format}")


class ByteCache(SizedLruCache[bytes]):
    """A thread-safe LRU cache of fetched bytes, bounded by their total size (an item larger than the bound is
    never kept).

    Example:
        >>> cache = ByteCache(10)
        >>> cache.put("a", b"12345"); cache.put("b", b"67890"); cache.put("c", b"x")
        >>> cache.get("a"), cache.get("b"), cache.size
        (None, b'67890', 6)
    """

    @property
    def size(self) -> int:
        """The bytes kept."""
        return self.nbytes


@dataclass
class Response:
    """What one request brought: the status, the headers (lower-case names) and the body."""

    url: str
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class HttpStatistics:
    """Counts of what a client did (for tests and benchmarks: how many requests, how many bytes)."""

    requests: int = 0
    range_requests: int = 0
    bytes_received: int = 0
    retries: int = 0


@dataclass
class HttpClient:
    """Requests to one server: one kept-alive connection per host and thread, redirects followed (a bounded number,
    a loop refused), 5xx statuses and dropped connections retried with a growing pause, each body read up to a bound.

    Example:
        >>> client = HttpClient(HttpSettings(timeout=1, retries=0))
        >>> client.get("http://127.0.0.1:9/x", limit=10, what="daf.json")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        pydaf.errors.DafHttpError: can't connect to: http://127.0.0.1:9/x
        for the daf.json
        (...)
    """

    settings: HttpSettings = field(default_factory=HttpSettings)
    statistics: HttpStatistics = field(default_factory=HttpStatistics)

    def __post_init__(self) -> None:
        self._local = threading.local()

    def close(self) -> None:
        """Close this thread's connections (other threads' close when their threads end)."""
        connections = getattr(self._local, "connections", {})
        for connection in connections.values():
            connection.close()
        connections.clear()

    def _connection(self, scheme: str, netloc: str) -> http.client.HTTPConnection:
        import http.client

        connections = self._local.__dict__.setdefault("connections", {})
        key = (scheme, netloc)
        connection = connections.get(key)
        if connection is None:
            kind = http.client.HTTPSConnection if scheme == "https" else http.client.HTTPConnection
            connection = connections[key] = kind(netloc, timeout=self.settings.timeout)
        return connection

    def _drop(self, scheme: str, netloc: str) -> None:
        connection = self._local.__dict__.get("connections", {}).pop((scheme, netloc), None)
        if connection is not None:
            connection.close()

    def get(self, url: str, *, limit: int, what: str | None = None, headers: dict[str, str] | None = None,
            expected: int | None = None, accept: tuple[int, ...] = ()) -> Response:
        """``GET url`` (following redirects, retrying 5xx and dropped connections): the first 2xx response whose
        body is at most ``limit`` bytes (and, if ``expected`` is given, exactly ``expected`` bytes when the status
        is 200), or a response of a status in ``accept``. Anything else raises :class:`~pydaf.DafHttpError`, naming
        ``url`` and (as its ``for the ...`` line) ``what`` it was read for, if given: errors raised while the reader
        layer reads a property are completed with the property there."""
        seen = [url]
        current = url
        while True:
            response = self._retried(current, limit=limit, what=what, headers=headers or {}, expected=expected)
            if response.status not in _REDIRECTS:
                break
            location = response.headers.get("location")
            if not location:
                raise DafHttpError(f"a redirect without a Location (HTTP {response.status}) from: {current}",
                                   for_=what, url=current, status=response.status)
            target = urljoin(current, location)
            if target in seen:
                raise DafHttpError(f"a redirect loop at: {url}\n(redirected through: {' -> '.join([*seen, target])})",
                                   for_=what, url=url, status=response.status)
            if len(seen) > self.settings.max_redirects:
                raise DafHttpError(f"too many redirects ({self.settings.max_redirects}) from: {url}", for_=what,
                                   url=url, status=response.status)
            if urlsplit(target).scheme.lower() not in ("http", "https"):
                raise DafHttpError(f"a redirect to a URL that is not HTTP(S): {target}\nfrom: {current}", for_=what,
                                   url=current, status=response.status)
            seen.append(target)
            current = target
        if response.status in accept:
            return response
        if response.status == 404 or response.status == 410:
            raise DafHttpError(f"not found (HTTP {response.status}): {current}", for_=what, url=current,
                               status=response.status)
        if not 200 <= response.status < 300:
            raise DafHttpError(f"HTTP status {response.status} for: {current}", for_=what, url=current,
                               status=response.status)
        return response

    def _retried(self, url: str, *, limit: int, what: str | None, headers: dict[str, str],
                 expected: int | None) -> Response:
        import http.client

        failures = 0
        reconnected = False
        while True:
            try:
                response = self._once(url, limit=limit, what=what, headers=headers, expected=expected)
            except DafHttpError:  # (what was wrong with a response: not retried)
                raise
            except TimeoutError as error:
                raise DafHttpError(f"timed out (after {self.settings.timeout} s) reading: {url}", for_=what, url=url,
                                   hint="(HttpDaf(url, timeout=SECONDS) waits longer)") from error
            except ConnectionRefusedError as error:
                raise DafHttpError(f"can't connect to: {url}", for_=what, url=url,
                                   hint=f"({type(error).__name__}: {error})") from error
            except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine,
                    http.client.ImproperConnectionState) as error:
                if not reconnected:  # (a kept-alive connection the server closed meanwhile: not a retry)
                    reconnected = True
                    continue
                problem, status = f"the connection was dropped ({type(error).__name__}: {error})", None
            except OSError as error:
                hint = f"({type(error).__name__}: {error})"
                if type(error).__name__ == "SSLCertVerificationError":
                    hint += "\n(to trust the server's certificate: SSL_CERT_FILE=FILE names the certificates to trust)"
                raise DafHttpError(f"can't connect to: {url}", for_=what, url=url, hint=hint) from error
            except http.client.HTTPException as error:
                raise DafHttpError(f"an invalid HTTP response from: {url}", for_=what, url=url,
                                   hint=f"({type(error).__name__}: {str(error)[:200]})") from error
            else:
                if response.status < 500:
                    return response
                problem, status = f"HTTP status {response.status}", response.status
            if failures >= self.settings.retries:
                raise DafHttpError(f"{problem} (after {failures} retries) for: {url}", for_=what, url=url,
                                   status=status)
            failures += 1
            self.statistics.retries += 1
            time.sleep(self.settings.backoff * 2 ** (failures - 1))

    def _once(self, url: str, *, limit: int, what: str | None, headers: dict[str, str],
              expected: int | None) -> Response:
        import http.client

        parts = urlsplit(url)
        scheme, netloc = parts.scheme.lower(), parts.netloc
        target = parts.path or "/"
        connection = self._connection(scheme, netloc)
        self.statistics.requests += 1
        if "Range" in headers:
            self.statistics.range_requests += 1
        try:
            connection.request("GET", target, headers={"Accept-Encoding": "identity", **headers})
            raw = connection.getresponse()
            status = raw.status
            response_headers = {name.lower(): value for name, value in raw.getheaders()}
            if status >= 300:  # (its body is not read: the connection is closed instead)
                self._drop(scheme, netloc)
                return Response(url, status, response_headers, b"")
            body = self._body(raw, response_headers, url=url, limit=limit, what=what,
                              expected=expected if status == 200 else None)
            if raw.will_close:
                self._drop(scheme, netloc)
            return Response(url, status, response_headers, body)
        except DafHttpError:
            self._drop(scheme, netloc)
            raise
        except http.client.IncompleteRead as error:
            self._drop(scheme, netloc)
            raise DafHttpError(f"a truncated body from: {url}\n(received {len(error.partial)} bytes of the "
                               f"{len(error.partial) + (error.expected or 0)} its Content-Length announced)",
                               for_=what, url=url) from error
        except (http.client.HTTPException, OSError):
            self._drop(scheme, netloc)
            raise

    def _body(self, raw: http.client.HTTPResponse, headers: dict[str, str], *, url: str, limit: int, what: str | None,
              expected: int | None) -> bytes:
        """The body, read up to ``limit`` bytes (and checked against its ``Content-Length`` and ``expected``)."""
        announced = headers.get("content-length")
        if announced is not None:
            try:
                length = int(announced)
            except ValueError:
                length = -1
            if length < 0:
                raise DafHttpError(f"an invalid Content-Length: {announced!r}\nfrom: {url}", for_=what, url=url,
                                   status=raw.status)
            if expected is not None and length != expected:
                raise DafHttpError(f"the server announces {length} bytes for: {url}\ninstead of the {expected} that "
                                   "metadata.json says", for_=what, url=url, status=raw.status,
                                   hint="(the server's files do not match the data set's metadata.json)")
            if length > limit:
                raise DafHttpError(f"the server announces {length} bytes for: {url}\n(more than the {limit} expected)",
                                   for_=what, url=url, status=raw.status)
            body = raw.read(length) if length else raw.read()  # (read(): the response is done, the connection free)
            if len(body) != length:
                raise DafHttpError(f"a truncated body from: {url}\n(received {len(body)} bytes of the {length} its "
                                   "Content-Length announced)", for_=what, url=url, status=raw.status)
        else:
            chunks = []
            received = 0
            while True:
                chunk = raw.read(min(_READ_BLOCK, limit + 1 - received))
                if not chunk:
                    break
                chunks.append(chunk)
                received += len(chunk)
                if received > limit:
                    raise DafHttpError(f"more than {limit} bytes from: {url}\n(the most expected)", for_=what,
                                       url=url, status=raw.status)
            body = b"".join(chunks)
            if expected is not None and len(body) != expected:
                raise DafHttpError(f"received {len(body)} bytes from: {url}\ninstead of the {expected} that "
                                   "metadata.json says", for_=what, url=url, status=raw.status,
                                   hint="(a truncated body, or the server's files do not match metadata.json)")
        self.statistics.bytes_received += len(body)
        return body


def _content_range(value: str | None) -> tuple[int, int, int | None] | None:
    """``(first, last, total)`` of a ``Content-Range: bytes first-last/total`` (total ``None`` for ``*``)."""
    if value is None or not value.startswith("bytes "):
        return None
    try:
        span, total = value[6:].split("/")
        size = None if total.strip() == "*" else int(total)
        if span.strip() == "*":  # (a 416's: no bytes, only the size)
            return -1, -1, size
        first, last = span.split("-")
        return int(first), int(last), size
    except ValueError:
        return None


def get_whole(client: HttpClient, cache: ByteCache, url: str, *, limit: int, expected: int | None = None,
              accept: tuple[int, ...] = (), what: str | None = None) -> bytes | None:
    """A whole file by one ``GET`` (as :meth:`HttpClient.get` takes ``limit``, ``expected``, ``accept`` and
    ``what``), fetched once and then served from ``cache``, under the key the :class:`HttpByteSource` of the same file
    looks for; ``None`` if the server answered a status in ``accept`` (a file it does not have).

    Example:
        >>> cache = ByteCache(1 << 10)
        >>> cache.put(("http://127.0.0.1:9/x", "whole"), b"kept")
        >>> get_whole(HttpClient(HttpSettings(timeout=1, retries=0)), cache, "http://127.0.0.1:9/x", limit=10)
        b'kept'
    """
    cached = cache.get((url, "whole"))
    if cached is not None:
        return cached
    response = client.get(url, limit=limit, expected=expected, accept=accept, what=what)
    if response.status in accept:
        return None
    cache.put((url, "whole"), response.body)
    return response.body


class HttpByteSource:
    """A :class:`~pydaf._os.byte_sources.ByteSource` over one file served by HTTP: :meth:`read` issues a Range
    request (``206``, its ``Content-Range`` and length checked), :meth:`read_ranges` coalesces nearby ranges into one
    request (gaps up to :attr:`HttpSettings.max_coalesce_gap`), and a server that ignores Range (``200``) is read
    whole, once, and served from that copy. Fetched bytes are kept in a bounded :class:`ByteCache`.

    ``size`` (if known, e.g. from ``metadata.json``) is checked against what the server says; otherwise the first
    :meth:`size` call asks the server (one suffix Range request, whose bytes are kept). ``max_size`` bounds the
    whole-file fallback.

    Example:
        >>> source = HttpByteSource("http://127.0.0.1:9/x.zip", size=0)
        >>> source.name, source.size(), source.read(0, 0)
        ('http://127.0.0.1:9/x.zip', 0, b'')
    """

    def __init__(self, url: str, *, size: int | None = None, max_size: int | None = None, what: str | None = None,
                 client: HttpClient | None = None, cache: ByteCache | None = None) -> None:
        self.name = url
        self.url = url
        self.what = what
        self.client = client if client is not None else HttpClient(HttpSettings.from_environment())
        self.cache = cache if cache is not None else ByteCache(self.client.settings.cache_bytes)
        self._size = size
        self._max_size = max_size if max_size is not None else (
            size if size is not None else self.client.settings.max_unsized_bytes)
        self._whole: bytes | None = None  # (the whole file, if the server ignores Range and we kept it)
        self._tail: tuple[int, bytes] | None = None  # (the last bytes, fetched with the size: offset, bytes)
        self.honours_range: bool | None = None  # (unknown until a first Range request)

    def _for(self) -> str:
        return "" if self.what is None else f"\nfor the {self.what}"

    def size(self) -> int:
        """The file's size in bytes (unless given, asked of the server once, with a suffix Range request for its
        last :data:`TAIL_BYTES`, kept: where a ZIP keeps its central directory; a small file comes whole)."""
        if self._size is None:
            self._probe()
        assert self._size is not None
        return self._size

    def _probe(self) -> None:
        whole = self.cache.get((self.url, "whole"))
        if whole is not None:
            self._keep_whole(whole)
            return
        response = self.client.get(self.url, limit=self._max_size, what=self.what,
                                   headers={"Range": f"bytes=-{TAIL_BYTES}"}, accept=(416,))
        announced = _content_range(response.headers.get("content-range"))
        if response.status == 416 and announced is not None and announced[2] == 0:  # (an empty file)
            self._size = 0
            return
        if response.status == 200:  # (the server ignores Range: this is the whole file)
            self.honours_range = False
            self._keep_whole(response.body)
            return
        if response.status != 206 or announced is None or announced[2] is None:
            raise DafHttpError(f"HTTP status {response.status} for a Range request of the last {TAIL_BYTES} bytes of: "
                               f"{self.url}\n(Content-Range: {response.headers.get('content-range')!r})",
                               for_=self.what, url=self.url, status=response.status)
        first, final, total = announced
        assert total is not None
        if total > self._max_size:
            raise DafHttpError(f"the server announces {total} bytes for: {self.url}\n(more than the {self._max_size} "
                               "expected)", for_=self.what, url=self.url, status=206)
        if first != max(0, total - TAIL_BYTES) or final != total - 1 or len(response.body) != total - first:
            raise DafHttpError(f"the server sent the bytes {first}-{final} ({len(response.body)} bytes) of: "
                               f"{self.url}\ninstead of its last {TAIL_BYTES} of {total} bytes", for_=self.what,
                               url=self.url, status=206, hint="(its Content-Range disagrees with what it sent)")
        self.honours_range = True
        if first == 0:
            self._keep_whole(response.body)
        else:
            self._size = total
            self._tail = (first, response.body)

    def read(self, offset: int, length: int) -> bytes | memoryview:
        """Exactly ``length`` bytes from ``offset`` (a :class:`~pydaf.DafFormatError` for a range past the end)."""
        if offset < 0 or length < 0:
            raise DafFormatError(f"invalid byte range: {offset} + {length}\nof the file: {self.name}{self._for()}")
        if length == 0:
            return b""
        if self._size is not None and offset + length > self._size:
            raise DafFormatError(f"truncated file: {self.name}\n(bytes {offset} to {offset + length} end past its "
                                 f"end, at {self._size} bytes){self._for()}")
        return self._fetch(offset, length)

    def read_ranges(self, ranges: Sequence[tuple[int, int]]) -> list[bytes | memoryview]:
        """The bytes of each ``(offset, length)`` range, fetching nearby ranges (gaps up to the coalescing bound)
        with one request each.

        Example:
            >>> HttpByteSource("http://127.0.0.1:9/x", size=10).read_ranges([])
            []
        """
        results: list[bytes | memoryview] = [b""] * len(ranges)
        wanted = sorted((index for index, (_, length) in enumerate(ranges) if length), key=lambda i: ranges[i][0])
        spans: list[list[int]] = []
        end = 0
        for index in wanted:
            offset, length = ranges[index]
            if spans and offset - end <= self.client.settings.max_coalesce_gap:
                spans[-1].append(index)
            else:
                spans.append([index])
                end = 0
            end = max(end, offset + length)
        for span in spans:
            first = ranges[span[0]][0]
            last = max(ranges[index][0] + ranges[index][1] for index in span)
            data = memoryview(self.read(first, last - first))
            for index in span:
                start = ranges[index][0] - first
                results[index] = data[start:start + ranges[index][1]]
        return results

    def _fetch(self, offset: int, length: int) -> bytes | memoryview:
        if self._whole is not None:
            return memoryview(self._whole)[offset:offset + length]
        if self._tail is not None and offset >= self._tail[0] and offset + length <= self._tail[0] + len(self._tail[1]):
            return memoryview(self._tail[1])[offset - self._tail[0]:offset + length - self._tail[0]]
        key = (self.url, offset, length)
        cached = self.cache.get(key)
        if cached is not None:
            return cached
        whole = self.cache.get((self.url, "whole"))  # (another source of the same file may have fetched it whole)
        if self.honours_range is False or whole is not None:
            whole = whole if whole is not None else self._get_whole()
            if self._size is None:
                self._size = len(whole)
            elif len(whole) != self._size:
                raise DafHttpError(f"received {len(whole)} bytes from: {self.url}\ninstead of the {self._size} "
                                   "expected", for_=self.what, url=self.url, status=200)
            if offset + length > len(whole):
                raise DafFormatError(f"truncated file: {self.name}\n(bytes {offset} to {offset + length} end past its "
                                     f"end, at {len(whole)} bytes){self._for()}")
            return memoryview(whole)[offset:offset + length]
        last = offset + length - 1
        response = self.client.get(self.url, limit=max(length, self._max_size), what=self.what,
                                   headers={"Range": f"bytes={offset}-{last}"}, expected=self._size, accept=(416,))
        if response.status == 416:  # (asked for bytes past the end: the server says where the end is)
            raise DafFormatError(f"truncated file: {self.name}\n(the server has no bytes {offset} to "
                                 f"{offset + length}: {response.headers.get('content-range')!r}){self._for()}")
        if response.status == 200:  # the server ignores Range: this is the whole file
            self.honours_range = False
            self._keep_whole(response.body)
            if offset + length > len(response.body):
                raise DafFormatError(f"truncated file: {self.name}\n(bytes {offset} to {offset + length} end past its "
                                     f"end, at {len(response.body)} bytes){self._for()}")
            return memoryview(response.body)[offset:offset + length]
        if response.status != 206:
            raise DafHttpError(f"HTTP status {response.status} for a Range request of: {self.url}", for_=self.what,
                               url=self.url, status=response.status)
        self.honours_range = True
        announced = _content_range(response.headers.get("content-range"))
        if announced is None:
            raise DafHttpError(f"a partial response without a valid Content-Range from: {self.url}\n(for the bytes "
                               f"{offset}-{last}: {response.headers.get('content-range')!r})", for_=self.what,
                               url=self.url, status=206)
        first, final, total = announced
        if total is not None:
            if self._size is None:
                if total > self._max_size:
                    raise DafHttpError(f"the server announces {total} bytes for: {self.url}\n(more than the "
                                       f"{self._max_size} expected)", for_=self.what, url=self.url, status=206)
                self._size = total
            elif total != self._size:
                raise DafHttpError(f"the server announces {total} bytes for: {self.url}\ninstead of the {self._size} "
                                   "expected", for_=self.what, url=self.url, status=206,
                                   hint="(the server's files do not match the data set's metadata.json)")
        if first != offset or final != last or len(response.body) != final - first + 1:
            raise DafHttpError(f"the server sent the bytes {first}-{final} ({len(response.body)} bytes) of: "
                               f"{self.url}\ninstead of the bytes {offset}-{last} asked for", for_=self.what,
                               url=self.url, status=206, hint="(its Content-Range disagrees with what it sent)")
        if self._size is None:
            raise DafHttpError(f"a partial response without the file's size from: {self.url}\n(Content-Range: "
                               f"{response.headers.get('content-range')!r})", for_=self.what, url=self.url, status=206)
        if offset + length > self._size:
            raise DafFormatError(f"truncated file: {self.name}\n(bytes {offset} to {offset + length} end past its "
                                 f"end, at {self._size} bytes){self._for()}")
        self.cache.put(key, response.body)
        return response.body

    def _get_whole(self) -> bytes:
        cached = self.cache.get((self.url, "whole"))
        if cached is not None:
            return cached
        response = self.client.get(self.url, limit=self._max_size, what=self.what, expected=self._size)
        self._keep_whole(response.body)
        return response.body

    def _keep_whole(self, body: bytes) -> None:
        if self._size is None:
            self._size = len(body)
        elif len(body) != self._size:
            raise DafHttpError(f"received {len(body)} bytes from: {self.url}\ninstead of the {self._size} expected",
                               for_=self.what, url=self.url, status=200)
        if len(body) <= self.cache.max_bytes:
            self.cache.put((self.url, "whole"), body)
            self._whole = body  # (small enough to keep: served from this copy from now on)
