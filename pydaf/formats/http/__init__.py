"""HttpDaf: a FilesDaf directory served over HTTP, read-only (Julia's ``HttpDaf``), or a ZarrDaf one (beyond Julia).

:mod:`.format` holds the storage, the facade and the format's registry entry; :mod:`.zarr` the storage of a ZarrDaf
directory (ZarrDaf's reader, its nodes read by HTTP); :mod:`.client` the HTTP requests (bounded, retried, checked) and
:class:`HttpByteSource`, the byte source of one served file.
"""

from .client import ByteCache, HttpByteSource, HttpClient, HttpSettings
from .format import FORMAT, HttpDaf, HttpFormat
from .zarr import ServedZarrFormat

__all__ = ["FORMAT", "ByteCache", "HttpByteSource", "HttpClient", "HttpDaf", "HttpFormat", "HttpSettings",
           "ServedZarrFormat"]
